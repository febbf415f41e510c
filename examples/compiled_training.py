"""A compiled training loop: fit y = sin(w x + c) to noisy data with tape.compile.

The loss is recorded on its first call and replayed natively on the later
ones (each step appends the same rows with the new parameter values), so the
Python loop below only pays for the optimizer. Run: python examples/compiled_training.py
"""
import math

import tape

tape.manual_seed(0)
xs = [i / 16 for i in range(32)]
ys = [math.sin(1.7 * x + 0.3) + 0.01 * tape.randn(()).item() for x in xs]
inputs = [tape.tensor(x) for x in xs]
targets = [tape.tensor(y) for y in ys]
w = tape.tensor(1.0, requires_grad=True)
c = tape.tensor(0.0, requires_grad=True)


@tape.compile
def loss(w, c):
    total = 0.0
    for x, y in zip(inputs, targets):  # unrolled into the recording once
        total = total + ((w * x + c).sin() - y) ** 2
    return total / len(inputs)


def main(steps=300, lr=0.5):
    for step in range(steps):
        value = loss(w, c)
        value.backward()
        with tape.no_grad():
            for p in (w, c):
                p.sub_(lr * p.grad)
                p.grad = None
        if step % 100 == 0:
            print(f"step {step:3d}  loss {value.item():.6f}")
    print(f"w = {w.item():.3f}, c = {c.item():.3f} (data: 1.700, 0.300); recordings: {loss.recordings}")
    return value.item()


if __name__ == "__main__":
    main()
