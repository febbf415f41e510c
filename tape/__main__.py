"""`python -m tape`: a walk through the engine — a graph, first and second
derivatives, PyTorch's in-place error caught and explained — ending with the
per-op cost of a 10,000-op scalar chain, forward and backward."""
import time

import tape


def _graph_and_derivatives():
    x = tape.tensor(2.0, requires_grad=True)
    y = x * x
    z = y.sin()
    print("x = tape.tensor(2.0, requires_grad=True); y = x * x; z = y.sin()")
    print(f"  z.grad_fn                 {z.grad_fn}")
    print(f"  z.grad_fn.next_functions  {z.grad_fn.next_functions}")
    print(f"  x.is_leaf, y.is_leaf      {x.is_leaf} {y.is_leaf}")
    (g,) = tape.autograd.grad(z, x, create_graph=True)
    (h,) = tape.autograd.grad(g, x)
    print(f"  dz/dx   = 2x cos(x^2)     {g.item():.4f}   (g = {g})")
    print(f"  d2z/dx2                   {h.item():.4f}")


def _inplace_error():
    a = tape.ones(3, requires_grad=True)
    b = a.exp()  # exp saves its output for backward
    b.add_(1)    # ... which this changes in place
    print("\na = tape.ones(3, requires_grad=True); b = a.exp(); b.add_(1); b.sum().backward()")
    try:
        b.sum().backward()
    except RuntimeError as e:
        print(f"  RuntimeError: {str(e)[:104]}...")
        print("  exp's backward needs exp(a), but add_ overwrote it: tape refuses to return a wrong "
              "gradient.")


def _scalar_chain_figures(n=10_000, repeats=5):
    x = tape.tensor(0.5, requires_grad=True)
    a = tape.tensor(0.9, requires_grad=True)
    b = tape.tensor(0.1, requires_grad=True)
    forward, backward = [], []
    for _ in range(repeats + 1):  # the first round loads the native sweep
        t0 = time.perf_counter()
        y = x
        for _ in range(n):
            y = y.sin() * a + b
        t1 = time.perf_counter()
        y.backward()
        t2 = time.perf_counter()
        forward.append((t1 - t0) / (3 * n))
        backward.append((t2 - t1) / (3 * n))
    fwd = sorted(forward[1:])[repeats // 2] * 1e6
    bwd = sorted(backward[1:])[repeats // 2] * 1e6
    print(f"\nscalar chain y = sin(y) * a + b, {n:,} steps ({3 * n:,} ops), median of {repeats}:")
    print(f"  forward {fwd:.2f} us/op   backward {bwd * 1000:.0f} ns/op   total {fwd + bwd:.2f} us/op")


def main():
    _graph_and_derivatives()
    _inplace_error()
    _scalar_chain_figures()


if __name__ == "__main__":
    main()
