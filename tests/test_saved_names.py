"""Every op's node shows what PyTorch's node of the same call saves: the
`_saved_*` names and values of derivatives.yaml, and the tensors that
saved_tensors_hooks packs, in PyTorch's order. One case per op of the
registry at least (test_every_op_with_a_node_has_a_case); the expected
values were read from PyTorch 2.13's nodes of the same calls (float64)."""
import pytest

import tape
from tape._registry import REGISTRY, opdefs
from tape.autograd.graph import saved_tensors_hooks


class Leaf(str):
    """The leaf of that name itself."""


class _Result:
    """A new tensor of the call's result, in its place in the graph."""

    def __repr__(self):
        return "RESULT"


RESULT = _Result()


class Value:
    """A tensor of these values, dtype and requires_grad (a non-leaf input, a
    detached operand, an index or a mask)."""

    def __init__(self, values, dtype, requires_grad):
        self.values, self.dtype, self.requires_grad = values, dtype, requires_grad

    def __repr__(self):
        return f"Value({self.values!r}, {self.dtype!r}, {self.requires_grad})"


def leaves():
    return dict(x=tape.tensor([0.5, 1.5, 2.0], requires_grad=True), w=tape.tensor([1.25, 0.75, 3.0], requires_grad=True),
                m=tape.tensor([[1.0, 2.0], [3.0, 4.5]], requires_grad=True),
                n=tape.tensor([[0.5, 1.0], [2.0, 1.5]], requires_grad=True),
                v=tape.tensor([1.0, 2.0], requires_grad=True), u=tape.tensor([0.5, -1.0], requires_grad=True),
                a=tape.tensor([[1.0, 2.5, 0.5], [3.0, -1.0, 2.0]], requires_grad=True),
                b=tape.tensor([[[1.0, 2.0], [0.5, 1.0]], [[2.0, 0.0], [1.0, 3.0]]], requires_grad=True),
                c=tape.tensor([[[0.5, 1.0], [1.5, 2.0]], [[1.0, -1.0], [0.0, 2.0]]], requires_grad=True),
                p=tape.tensor([[4.0, 2.0], [2.0, 3.0]], requires_grad=True), s=tape.tensor(0.25, requires_grad=True))


def assigned(t, key, value):
    t[key] = value
    return t


def _changed_view(base, view_of):
    """A view of base changed in place: its new grad_fn is an AsStridedBackward0 of base's."""
    v = view_of(base)
    v.mul_(2)
    return v


def _changed_base(base, view_of):
    """base after an in-place op on a view of it: CopySlices."""
    view_of(base).mul_(2)
    return base if base._base is None else base._base


# (case, the registry's op it records, the call, PyTorch's node's `_saved_*`
# values by name, the names of the tensors its saved_tensors_hooks pack, in order)
CASES = [
    ('add', 'add', lambda L: L['x'] + L['w'],
     {'alpha': 1},
     []),
    ('sub', 'sub', lambda L: L['x'] - L['w'],
     {'alpha': 1},
     []),
    ('add_alpha', 'add_alpha', lambda L: tape.add(L['x'], L['w'], alpha=2.0),
     {'alpha': 2.0},
     []),
    ('sub_alpha', 'sub_alpha', lambda L: L['x'].sub(L['w'], alpha=-0.5),
     {'alpha': -0.5},
     []),
    ('mul', 'mul', lambda L: L['x'] * L['w'],
     {'other': Leaf('w'), 'self': Leaf('x')},
     ['other', 'self']),
    ('div', 'div', lambda L: L['x'] / L['w'],
     {'other': Leaf('w'), 'self': Leaf('x')},
     ['other', 'self']),
    ('neg', 'neg', lambda L: -L['x'],
     {},
     []),
    ('reciprocal', 'reciprocal', lambda L: L['x'].reciprocal(),
     {'result': RESULT},
     ['result']),
    ('pow_scalar', 'pow_scalar', lambda L: L['x'] ** 2.5,
     {'exponent': 2.5, 'self': Leaf('x')},
     ['self']),
    ('rsub', 'rsub', lambda L: 2.0 - L['x'],
     {'alpha': 1},
     []),
    ('rpow', 'rpow', lambda L: 2.0 ** L['x'],
     {'exponent': Leaf('x'), 'result': RESULT, 'self': 2.0},
     ['exponent', 'result']),
    ('pow', 'pow', lambda L: L['x'] ** L['w'],
     {'exponent': Leaf('w'), 'result': RESULT, 'self': Leaf('x')},
     ['exponent', 'self', 'result']),
    ('remainder', 'remainder', lambda L: L['x'] % L['w'],
     {'other': Leaf('w'), 'self': Leaf('x')},
     ['other', 'self']),
    ('remainder_scalar', 'remainder_scalar', lambda L: L['x'] % 2.0,
     {},
     []),
    ('exp', 'exp', lambda L: L['x'].exp(),
     {'result': RESULT},
     ['result']),
    ('log', 'log', lambda L: L['x'].log(),
     {'self': Leaf('x')},
     ['self']),
    ('sin', 'sin', lambda L: L['x'].sin(),
     {'self': Leaf('x')},
     ['self']),
    ('cos', 'cos', lambda L: L['x'].cos(),
     {'self': Leaf('x')},
     ['self']),
    ('tanh', 'tanh', lambda L: L['x'].tanh(),
     {'result': RESULT},
     ['result']),
    ('sigmoid', 'sigmoid', lambda L: L['x'].sigmoid(),
     {'result': RESULT},
     ['result']),
    ('relu', 'relu', lambda L: L['x'].relu(),
     {'result': RESULT},
     ['result']),
    ('sqrt', 'sqrt', lambda L: L['x'].sqrt(),
     {'result': RESULT},
     ['result']),
    ('abs', 'abs', lambda L: L['x'].abs(),
     {'self': Leaf('x')},
     ['self']),
    ('sign', 'sign', lambda L: L['x'].sign(),
     {},
     []),
    ('floor', 'floor', lambda L: L['x'].floor(),
     {},
     []),
    ('ceil', 'ceil', lambda L: L['x'].ceil(),
     {},
     []),
    ('trunc', 'trunc', lambda L: L['x'].trunc(),
     {},
     []),
    ('round', 'round', lambda L: L['x'].round(),
     {},
     []),
    ('round_decimals', 'round_decimals', lambda L: L['x'].round(decimals=1),
     {},
     []),
    ('maximum', 'maximum', lambda L: tape.maximum(L['x'], L['w']),
     {'other': Leaf('w'), 'self': Leaf('x')},
     ['other', 'self']),
    ('minimum', 'minimum', lambda L: tape.minimum(L['x'], L['w']),
     {'other': Leaf('w'), 'self': Leaf('x')},
     ['other', 'self']),
    ('atan2', 'atan2', lambda L: tape.atan2(L['x'], L['w']),
     {'other': Leaf('w'), 'self': Leaf('x')},
     ['other', 'self']),
    ('erf', 'erf', lambda L: L['x'].erf(),
     {'self': Leaf('x')},
     ['self']),
    ('silu', 'silu', lambda L: tape.silu(L['x']),
     {'self': Leaf('x')},
     ['self']),
    ('gelu', 'gelu', lambda L: tape.gelu(L['x']),
     {'approximate': 'none', 'self': Leaf('x')},
     ['self']),
    ('gelu_tanh', 'gelu_tanh', lambda L: tape.gelu(L['x'], approximate='tanh'),
     {'approximate': 'tanh', 'self': Leaf('x')},
     ['self']),
    ('softplus', 'softplus', lambda L: tape.softplus(L['x']),
     {'beta': 1, 'self': Leaf('x'), 'threshold': 20},
     ['self']),
    ('tan', 'tan', lambda L: L['x'].tan(),
     {'result': RESULT},
     ['result']),
    ('asin', 'asin', lambda L: (L['x'] / 4).asin(),
     {'self': Value([0.125, 0.375, 0.5], 'float64', True)},
     ['self']),
    ('acos', 'acos', lambda L: (L['x'] / 4).acos(),
     {'self': Value([0.125, 0.375, 0.5], 'float64', True)},
     ['self']),
    ('atan', 'atan', lambda L: L['x'].atan(),
     {'self': Leaf('x')},
     ['self']),
    ('sinh', 'sinh', lambda L: L['x'].sinh(),
     {'self': Leaf('x')},
     ['self']),
    ('cosh', 'cosh', lambda L: L['x'].cosh(),
     {'self': Leaf('x')},
     ['self']),
    ('asinh', 'asinh', lambda L: L['x'].asinh(),
     {'self': Leaf('x')},
     ['self']),
    ('acosh', 'acosh', lambda L: (L['x'] + 1).acosh(),
     {'self': Value([1.5, 2.5, 3.0], 'float64', True)},
     ['self']),
    ('atanh', 'atanh', lambda L: (L['x'] / 4).atanh(),
     {'self': Value([0.125, 0.375, 0.5], 'float64', True)},
     ['self']),
    ('exp2', 'exp2', lambda L: L['x'].exp2(),
     {'result': RESULT},
     ['result']),
    ('expm1', 'expm1', lambda L: L['x'].expm1(),
     {'result': RESULT},
     ['result']),
    ('log2', 'log2', lambda L: L['x'].log2(),
     {'self': Leaf('x')},
     ['self']),
    ('log10', 'log10', lambda L: L['x'].log10(),
     {'self': Leaf('x')},
     ['self']),
    ('log1p', 'log1p', lambda L: L['x'].log1p(),
     {'self': Leaf('x')},
     ['self']),
    ('rsqrt', 'rsqrt', lambda L: L['x'].rsqrt(),
     {'result': RESULT},
     ['result']),
    ('square', 'square', lambda L: L['x'].square(),
     {'exponent': 2, 'self': Leaf('x')},
     ['self']),
    ('clone', 'clone', lambda L: L['x'].clone(),
     {},
     []),
    ('to_copy', 'to_copy', lambda L: L['x'].to(tape.float32),
     {},
     []),
    ('xlogy', 'xlogy', lambda L: tape.xlogy(L['x'], L['w']),
     {'other': Leaf('w'), 'self': Leaf('x')},
     ['other', 'self']),
    ('xlogy_scalar_other', 'xlogy_scalar_other', lambda L: tape.xlogy(L['x'], 2.0),
     {'other': 2.0, 'self': Leaf('x')},
     ['self']),
    ('xlogy_scalar_self', 'xlogy_scalar_self', lambda L: tape.xlogy(2.0, L['x']),
     {'other': Leaf('x'), 'self': 2.0},
     ['other']),
    ('hypot', 'hypot', lambda L: tape.hypot(L['x'], L['w']),
     {'other': Leaf('w'), 'result': RESULT, 'self': Leaf('x')},
     ['other', 'self', 'result']),
    ('logaddexp', 'logaddexp', lambda L: tape.logaddexp(L['x'], L['w']),
     {'other': Leaf('w'), 'self': Leaf('x')},
     ['other', 'self']),
    ('lerp', 'lerp', lambda L: tape.lerp(L['x'], L['w'], 0.3),
     {'weight': 0.3},
     []),
    ('clamp', 'clamp', lambda L: L['x'].clamp(0.7, 1.8),
     {'max': 1.8, 'min': 0.7, 'self': Leaf('x')},
     ['self']),
    ('clamp_min', 'clamp_min', lambda L: tape.clamp_min(L['x'], 0.7),
     {'min': 0.7, 'self': Leaf('x')},
     ['self']),
    ('clamp_max', 'clamp_max', lambda L: tape.clamp_max(L['x'], 1.8),
     {'max': 1.8, 'self': Leaf('x')},
     ['self']),
    ('clamp_tensor_lower', 'clamp_tensor_lower', lambda L: L['x'].clamp(L['w'], None),
     {'max': None, 'min': Leaf('w'), 'self': Leaf('x')},
     ['min', 'self']),
    ('clamp_tensor_upper', 'clamp_tensor_upper', lambda L: L['x'].clamp(None, L['w']),
     {'max': Leaf('w'), 'min': None, 'self': Leaf('x')},
     ['max', 'self']),
    ('clamp_min_tensor', 'clamp_min_tensor', lambda L: tape.clamp_min(L['x'], L['w']),
     {'min': Leaf('w'), 'self': Leaf('x')},
     ['min', 'self']),
    ('clamp_max_tensor', 'clamp_max_tensor', lambda L: tape.clamp_max(L['x'], L['w']),
     {'max': Leaf('w'), 'self': Leaf('x')},
     ['max', 'self']),
    ('rremainder', 'rremainder', lambda L: 2.0 % L['x'],
     {},
     []),
    ('floor_divide', 'floor_divide', lambda L: L['x'] // L['w'],
     {},
     []),
    ('scatter_reduce_legacy', 'scatter_reduce_legacy',
     lambda L: (L['x'] * 1).scatter(0, tape.tensor([1, 0]), 2.0, reduce='multiply'),
     {},
     []),
    ('expand', 'expand', lambda L: L['v'].expand(3, 2),
     {'self_sym_sizes': (2, )},
     []),
    ('view', 'view', lambda L: L['m'].view(4),
     {'self_sym_sizes': (2, 2, )},
     []),
    ('unsqueeze', 'unsqueeze', lambda L: L['x'].unsqueeze(0),
     {'dim': 0},
     []),
    ('squeeze', 'squeeze', lambda L: L['x'].view(1, 3).squeeze(),
     {'self_sym_sizes': (1, 3, )},
     []),
    ('squeeze_dim', 'squeeze_dim', lambda L: L['x'].view(1, 3).squeeze(0),
     {'dim': 0, 'self_sym_sizes': (1, 3, )},
     []),
    ('squeeze_dim_', 'squeeze_dim_', lambda L: L['x'] @ L['a'].t(),
     {'dim': 0, 'self_sym_sizes': (1, 2, )},
     []),
    ('permute', 'permute', lambda L: L['a'].permute(1, 0),
     {'dims': (1, 0, )},
     []),
    ('transpose', 'transpose', lambda L: L['a'].transpose(0, 1),
     {'dim0': 0, 'dim1': 1},
     []),
    ('t', 't', lambda L: L['a'].t(),
     {},
     []),
    ('select', 'select', lambda L: L['a'].select(1, 2),
     {'dim': 1, 'index': 2, 'self_sym_sizes': (2, 3, )},
     []),
    ('slice', 'slice', lambda L: L['a'][:, 1:],
     {'dim': 1, 'end': 9223372036854775807, 'self_sym_sizes': (2, 3, ), 'start': 1, 'step': 1},
     []),
    ('alias', 'alias', lambda L: L['a'][...],
     {},
     []),
    ('index_unsqueeze', 'index_unsqueeze', lambda L: L['a'][None],
     {'dim': 0},
     []),
    ('index', 'index', lambda L: L['a'][tape.tensor([1, 0, 1])],
     {'indices': (Value([1, 0, 1], 'int64', False), ), 'self_sym_sizes': (2, 3, )},
     ['indices']),
    ('cat', 'cat', lambda L: tape.cat([L['x'], L['w']]),
     {'dim': 0},
     []),
    ('stack', 'stack', lambda L: tape.stack([L['x'], L['w']]),
     {'dim': 0},
     []),
    ('repeat', 'repeat', lambda L: L['v'].repeat(2, 3),
     {'repeats': (2, 3, ), 'self_sym_sizes': (2, )},
     []),
    ('roll', 'roll', lambda L: L['a'].roll(1, 1),
     {'dims': (1, ), 'shifts': (1, )},
     []),
    ('sum', 'sum', lambda L: L['a'].sum(),
     {'self_sym_sizes': (2, 3, )},
     []),
    ('sum_dim', 'sum_dim', lambda L: L['a'].sum(1),
     {'dim': (1, ), 'keepdim': False, 'self_sym_sizes': (2, 3, )},
     []),
    ('mean', 'mean', lambda L: L['a'].mean(),
     {'self_sym_numel': 6, 'self_sym_sizes': (2, 3, )},
     []),
    ('mean_dim', 'mean_dim', lambda L: L['a'].mean(1),
     {'dim': (1, ), 'keepdim': False, 'self_sym_numel': 6, 'self_sym_sizes': (2, 3, )},
     []),
    ('amax', 'amax', lambda L: L['a'].amax(1),
     {'dim': (1, ), 'keepdim': False, 'result': RESULT, 'self': Leaf('a')},
     ['self', 'result']),
    ('amin', 'amin', lambda L: L['a'].amin(1),
     {'dim': (1, ), 'keepdim': False, 'result': RESULT, 'self': Leaf('a')},
     ['self', 'result']),
    ('max_all', 'max_all', lambda L: L['a'].max(),
     {'result': RESULT, 'self': Leaf('a')},
     ['self', 'result']),
    ('min_all', 'min_all', lambda L: L['a'].min(),
     {'result': RESULT, 'self': Leaf('a')},
     ['self', 'result']),
    ('max_dim', 'max_dim', lambda L: L['a'].max(1)[0],
     {'dim': 1, 'indices': Value([1, 0], 'int64', False), 'keepdim': False, 'self_sym_sizes': (2, 3, )},
     ['indices']),
    ('min_dim', 'min_dim', lambda L: L['a'].min(1)[0],
     {'dim': 1, 'indices': Value([2, 1], 'int64', False), 'keepdim': False, 'self_sym_sizes': (2, 3, )},
     ['indices']),
    ('logsumexp', 'logsumexp', lambda L: L['a'].logsumexp(1),
     {'dim': (1, ), 'keepdim': False, 'result': RESULT, 'self': Leaf('a')},
     ['self', 'result']),
    ('softmax', 'softmax', lambda L: L['a'].softmax(1),
     {'dim': 1, 'result': RESULT},
     ['result']),
    ('log_softmax', 'log_softmax', lambda L: L['a'].log_softmax(1),
     {'dim': 1, 'result': RESULT},
     ['result']),
    ('var', 'var', lambda L: L['a'].var(),
     {'correction': None, 'dim': None, 'keepdim': False, 'self': Leaf('a')},
     ['self']),
    ('std', 'std', lambda L: L['a'].std(),
     {'correction': None, 'dim': None, 'keepdim': False, 'result': RESULT, 'self': Leaf('a')},
     ['self', 'result']),
    ('norm', 'norm', lambda L: L['a'].norm(),
     {'dim': None, 'keepdim': False, 'ord': 2, 'result': RESULT, 'self': Leaf('a')},
     ['self', 'result']),
    ('norm0', 'norm0', lambda L: tape.linalg.vector_norm(L['a'], 0),
     {'dim': None, 'keepdim': False, 'ord': 0, 'result': RESULT, 'self': Leaf('a')},
     ['self', 'result']),
    ('norm_p', 'norm_p', lambda L: tape.linalg.vector_norm(L['a'], 3.0),
     {'dim': None, 'keepdim': False, 'ord': 3.0, 'result': RESULT, 'self': Leaf('a')},
     ['self', 'result']),
    ('norm_inf', 'norm_inf', lambda L: tape.linalg.vector_norm(L['a'], float('inf')),
     {'dim': None, 'keepdim': False, 'ord': float('inf'), 'result': RESULT, 'self': Leaf('a')},
     ['self', 'result']),
    ('norm_1', 'norm_p', lambda L: L['a'].norm(1),
     {'dim': None, 'keepdim': False, 'ord': 1, 'result': RESULT, 'self': Leaf('a')},
     ['self', 'result']),
    ('cumsum', 'cumsum', lambda L: L['a'].cumsum(1),
     {'dim': 1},
     []),
    ('cumprod', 'cumprod', lambda L: L['a'].cumprod(1),
     {'dim': 1, 'result': RESULT, 'self': Leaf('a')},
     ['self', 'result']),
    ('where', 'where', lambda L: tape.where(L['x'] > 1, L['x'], L['w']),
     {'condition': Value([False, True, True], 'bool', False)},
     ['condition']),
    ('masked_fill', 'masked_fill', lambda L: L['x'].masked_fill(L['x'] > 1, 0.0),
     {'mask': Value([False, True, True], 'bool', False)},
     ['mask']),
    ('masked_fill_tensor', 'masked_fill_tensor', lambda L: L['x'].masked_fill(L['x'] > 1, L['s']),
     {'mask': Value([False, True, True], 'bool', False)},
     ['mask']),
    ('masked_select', 'masked_select', lambda L: L['x'].masked_select(L['x'] > 1),
     {'mask': Value([False, True, True], 'bool', False), 'self': Leaf('x')},
     ['mask', 'self']),
    ('addmm', 'addmm', lambda L: tape.addmm(L['v'], L['m'], L['n'], beta=0.5, alpha=2.0),
     {'alpha': 2.0, 'beta': 0.5, 'mat1': Leaf('m'), 'mat1_sym_sizes': (2, 2), 'mat1_sym_strides': (2, 1),
      'mat2': Leaf('n'), 'mat2_sym_sizes': (2, 2), 'mat2_sym_strides': (2, 1)},
     ['mat1', 'mat2']),
    ('addmv', 'addmv', lambda L: tape.addmv(L['u'], L['m'], L['v'], beta=2.0),
     {'alpha': 1, 'beta': 2.0, 'mat': Leaf('m'), 'vec': Leaf('v')},
     ['mat', 'vec']),
    ('baddbmm', 'baddbmm', lambda L: tape.baddbmm(L['p'], L['b'], L['c'], alpha=0.5),
     {'alpha': 0.5, 'batch1': Leaf('b'), 'batch2': Leaf('c'), 'beta': 1},
     ['batch1', 'batch2']),
    ('addbmm', 'addbmm', lambda L: tape.addbmm(L['p'], L['b'], L['c'], beta=0.25),
     {'alpha': 1, 'batch1': Leaf('b'), 'batch1_sym_argsize_0': 2, 'batch1_sym_argsize_1': 2, 'batch2': Leaf('c'),
      'batch2_sym_argsize_2': 2, 'beta': 0.25},
     ['batch1', 'batch2']),
    ('addcmul', 'addcmul', lambda L: tape.addcmul(L['x'], L['w'], L['s'], value=0.5),
     {'tensor1': Leaf('w'), 'tensor2': Leaf('s'), 'value': 0.5},
     ['tensor1', 'tensor2']),
    ('addcdiv', 'addcdiv', lambda L: tape.addcdiv(L['x'], L['w'], L['x'] + 1, value=-2.0),
     {'tensor1': Leaf('w'), 'tensor2': Value([1.5, 2.5, 3.0], 'float64', True), 'value': -2.0},
     ['tensor1', 'tensor2']),
    ('lerp_tensor', 'lerp_tensor', lambda L: tape.lerp(L['x'], L['w'], L['s']),
     {'end': Leaf('w'), 'self': Leaf('x'), 'weight': Leaf('s')},
     ['end', 'self', 'weight']),
    ('reshape_alias', 'reshape_alias', lambda L: L['a'].t().reshape(3, 2, 1),
     {'self_sym_sizes': (3, 2)},
     []),
    ('unsafe_view', 'unsafe_view', lambda L: L['a'].t().reshape(-1),
     {'self_sym_sizes': (3, 2)},
     []),
    ('as_strided', 'as_strided', lambda L: _changed_view(L['a'] * 1, lambda b: b[0]),
     {'size': (3,), 'storage_offset': 0, 'stride': (1,)},
     []),
    ('as_strided_at', 'as_strided_at', lambda L: _changed_view(L['a'].t() * 1, lambda c: c[1]),
     {'size': (2,), 'storage_offset': 1, 'stride': (3,)},
     []),
    ('view_copy_slices', 'view_copy_slices', lambda L: _changed_base(L['a'] * 1, lambda b: b[0]),
     {},
     []),
    ('view_copy_slices_at', 'view_copy_slices_at', lambda L: _changed_base(L['a'].t() * 1, lambda c: c[1]),
     {},
     []),
    ('split', 'split', lambda L: L['a'].split(2, 1)[1],
     {'dim': 1, 'self_sym_sizes': (2, 3, ), 'split_size': 2},
     []),
    ('split_with_sizes', 'split_with_sizes', lambda L: L['a'].split([1, 2], 1)[1],
     {'dim': 1, 'self_sym_sizes': (2, 3, ), 'split_sizes': (1, 2, )},
     []),
    ('unbind', 'unbind', lambda L: L['a'].unbind(1)[1],
     {'dim': 1},
     []),
    ('flip', 'flip', lambda L: L['a'].flip(1),
     {'dims': (1, )},
     []),
    ('index_select', 'index_select', lambda L: L['a'].index_select(1, tape.tensor([2, 0])),
     {'dim': 1, 'index': Value([2, 0], 'int64', False), 'self_sym_sizes': (2, 3, )},
     ['index']),
    ('gather', 'gather', lambda L: L['a'].gather(1, tape.tensor([[0, 2], [1, 1]])),
     {'dim': 1, 'index': Value([[0, 2], [1, 1]], 'int64', False), 'self': Leaf('a'), 'sparse_grad': False},
     ['index', 'self']),
    ('diagonal', 'diagonal', lambda L: L['a'].diagonal(),
     {'dim1': 0, 'dim2': 1, 'offset': 0, 'self_sym_sizes': (2, 3, )},
     []),
    ('diag_embed', 'diag_embed', lambda L: tape.diag(L['v']),
     {'dim1': 18446744073709551614, 'dim2': 18446744073709551615, 'offset': 0},
     []),
    ('diag_copy', 'diag_copy', lambda L: tape.diag(L['m']),
     {'dim1': 0, 'dim2': 1, 'offset': 0, 'self_sym_sizes': (2, 2, )},
     []),
    ('trace', 'trace', lambda L: L['m'].trace(),
     {'self_sym_sizes': (2, 2, )},
     []),
    ('triu', 'triu', lambda L: L['a'].triu(),
     {'diagonal': 0},
     []),
    ('tril', 'tril', lambda L: L['a'].tril(),
     {'diagonal': 0},
     []),
    ('mm', 'mm', lambda L: tape.mm(L['m'], L['n']),
     {'mat2': Leaf('n'), 'mat2_sym_sizes': (2, 2, ), 'mat2_sym_strides': (2, 1, ), 'self': Leaf('m'), 'self_sym_sizes': (2, 2, ), 'self_sym_strides': (2, 1, )},
     ['mat2', 'self']),
    ('mv', 'mv', lambda L: tape.mv(L['m'], L['v']),
     {'self': Leaf('m'), 'vec': Leaf('v')},
     ['self', 'vec']),
    ('dot', 'dot', lambda L: tape.dot(L['v'], L['u']),
     {'self': Leaf('v'), 'tensor': Leaf('u')},
     ['self', 'tensor']),
    ('bmm', 'bmm', lambda L: tape.bmm(L['b'], L['c']),
     {'mat2': Leaf('c'), 'self': Leaf('b')},
     ['mat2', 'self']),
    ('inv', 'inv', lambda L: tape.linalg.inv(L['m']),
     {'inverse': RESULT},
     ['inverse']),
    ('det', 'det', lambda L: tape.linalg.det(L['m']),
     {'A': Leaf('m'), 'LU': Value([[2.0, 4.5], [0.5, 0.75]], 'float64', False), 'pivots': Value([2, 2], 'int32', False), 'result': RESULT},
     ['A', 'LU', 'pivots', 'result']),
    ('slogdet', 'slogdet', lambda L: tape.linalg.slogdet(L['m'])[1],
     {'A': Leaf('m'), 'LU': Value([[2.0, 4.5], [0.5, 0.75]], 'float64', False), 'pivots': Value([2, 2], 'int32', False), 'sign': Value(-1.0, 'float64', True)},
     ['A', 'LU', 'pivots', 'sign']),
    ('slogdet_sign', 'slogdet_sign', lambda L: tape.linalg.slogdet(L['m'])[0],
     {'A': Leaf('m'), 'LU': Value([[2.0, 4.5], [0.5, 0.75]], 'float64', False), 'pivots': Value([2, 2], 'int32', False), 'sign': RESULT},
     ['A', 'LU', 'pivots', 'sign']),
    ('solve', 'solve', lambda L: tape.linalg.solve(L['m'], L['n']),
     {'A': Leaf('m'), 'LU': Value([[3.0, 4.5], [0.3333333333333333, 0.5]], 'float64', False), 'left': True, 'pivots': Value([2, 2], 'int32', False), 'result': RESULT},
     ['A', 'LU', 'pivots', 'result']),
    ('cholesky', 'cholesky', lambda L: tape.linalg.cholesky(L['p']),
     {'L': RESULT, 'upper': False},
     ['L']),
    ('sort', 'sort', lambda L: L['x'].sort()[0],
     {'dim': 18446744073709551615, 'indices': Value([0, 1, 2], 'int64', False), 'self_sym_sizes': (3, )},
     ['indices']),
    ('topk', 'topk', lambda L: L['x'].topk(2)[0],
     {'dim': 18446744073709551615, 'indices': Value([2, 1], 'int64', False), 'self_sym_sizes': (3, )},
     ['indices']),
    ('zero_', 'zero_', lambda L: (L['x'] * 1).zero_(),
     {},
     []),
    ('fill_', 'fill_', lambda L: (L['x'] * 1).fill_(2.0),
     {},
     []),
    ('uniform_', 'uniform_', lambda L: (L['x'] * 1).uniform_(),
     {},
     []),
    ('normal_', 'normal_', lambda L: (L['x'] * 1).normal_(),
     {},
     []),
    ('copy', 'copy', lambda L: (L['x'] * 1).copy_(L['w']),
     {},
     []),
    ('copy_slices', 'copy_slices', lambda L: assigned(L['x'] * 1, slice(0, 2), L['w'][:2]),
     {},
     []),
    ('index_put_', 'index_put_', lambda L: assigned(L['x'] * 1, tape.tensor([0, 2]), L['w'][:2]),
     {'accumulate': False, 'indices': (Value([0, 2], 'int64', False), )},
     ['indices']),
    ('index_put_accumulate', 'index_put_accumulate',
     lambda L: (L['x'] * 1).index_put((tape.tensor([0, 2]),), L['w'][:2], accumulate=True),
     {'accumulate': True, 'indices': (Value([0, 2], 'int64', False), )},
     ['indices']),
    ('scatter_src', 'scatter_src', lambda L: (L['x'] * 1).scatter(0, tape.tensor([1, 0]), L['w'][:2]),
     {'dim': 0, 'index': Value([1, 0], 'int64', False)},
     ['index']),
    ('scatter_value', 'scatter_value', lambda L: (L['x'] * 1).scatter(0, tape.tensor([1, 0]), 2.0),
     {'dim': 0, 'index': Value([1, 0], 'int64', False)},
     ['index']),
    ('scatter_add', 'scatter_add', lambda L: (L['x'] * 1).scatter_add(0, tape.tensor([1, 1]), L['w'][:2]),
     {'dim': 0, 'index': Value([1, 1], 'int64', False)},
     ['index']),
    ('index_add', 'index_add', lambda L: (L['x'] * 1).index_add(0, tape.tensor([1, 1]), L['w'][:2], alpha=2),
     {'alpha': 2, 'dim': 0, 'index': Value([1, 1], 'int64', False), 'source_dim': 1},
     ['index']),
    # of a diagonal matrix (eigh reads the lower triangle), whose decomposition LAPACK gives exactly
    ('linalg_eigh', 'linalg_eigh', lambda L: tape.linalg.eigh(L['m'].triu())[0],
     {'eigenvalues': Value([1.0, 4.5], 'float64', False),
      'eigenvectors': Value([[1.0, 0.0], [0.0, 1.0]], 'float64', False)},
     ['eigenvalues', 'eigenvectors']),
    ('prod', 'prod', lambda L: L['a'].prod(),
     {'result': RESULT, 'self': Leaf('a')},
     ['self', 'result']),
    ('prod_dim', 'prod_dim', lambda L: L['a'].prod(1),
     {'dim': 1, 'keepdim': False, 'result': RESULT, 'self': Leaf('a')},
     ['self', 'result']),
    ('mm_self_only', 'mm', lambda L: tape.mm(L['m'], L['n'].detach()),
     {'mat2': Value([[0.5, 1.0], [2.0, 1.5]], 'float64', False), 'mat2_sym_sizes': (2, 2, ), 'mat2_sym_strides': (), 'self': None, 'self_sym_sizes': (2, 2, ), 'self_sym_strides': (2, 1, )},
     ['mat2']),
    ('mm_mat2_only', 'mm', lambda L: tape.mm(L['m'].detach(), L['n']),
     {'mat2': None, 'mat2_sym_sizes': (2, 2, ), 'mat2_sym_strides': (2, 1, ), 'self': Value([[1.0, 2.0], [3.0, 4.5]], 'float64', False), 'self_sym_sizes': (2, 2, ), 'self_sym_strides': ()},
     ['self']),
    ('mv_self_only', 'mv', lambda L: tape.mv(L['m'], L['v'].detach()),
     {'self': None, 'vec': Value([1.0, 2.0], 'float64', False)},
     ['vec']),
    ('mv_vec_only', 'mv', lambda L: tape.mv(L['m'].detach(), L['v']),
     {'self': Value([[1.0, 2.0], [3.0, 4.5]], 'float64', False), 'vec': None},
     ['self']),
    ('dot_self_only', 'dot', lambda L: tape.dot(L['v'], L['u'].detach()),
     {'self': None, 'tensor': Value([0.5, -1.0], 'float64', False)},
     ['tensor']),
    ('dot_tensor_only', 'dot', lambda L: tape.dot(L['v'].detach(), L['u']),
     {'self': Value([1.0, 2.0], 'float64', False), 'tensor': None},
     ['self']),
    ('bmm_self_only', 'bmm', lambda L: tape.bmm(L['b'], L['c'].detach()),
     {'mat2': Value([[[0.5, 1.0], [1.5, 2.0]], [[1.0, -1.0], [0.0, 2.0]]], 'float64', False), 'self': None},
     ['mat2']),
    ('bmm_mat2_only', 'bmm', lambda L: tape.bmm(L['b'].detach(), L['c']),
     {'mat2': None, 'self': Value([[[1.0, 2.0], [0.5, 1.0]], [[2.0, 0.0], [1.0, 3.0]]], 'float64', False)},
     ['self']),
    ('mul_self_only', 'mul', lambda L: L['x'] * L['w'].detach(),
     {'other': Value([1.25, 0.75, 3.0], 'float64', False), 'self': None},
     ['other']),
    ('div_other_only', 'div', lambda L: L['x'].detach() / L['w'],
     {'other': Leaf('w'), 'self': Value([0.5, 1.5, 2.0], 'float64', False)},
     ['other', 'self']),
    ('pow_self_only', 'pow', lambda L: L['x'] ** L['w'].detach(),
     {'exponent': Value([1.25, 0.75, 3.0], 'float64', False), 'result': RESULT, 'self': Leaf('x')},
     ['exponent', 'self', 'result']),
    ('pow_exponent_only', 'pow', lambda L: L['x'].detach() ** L['w'],
     {'exponent': Leaf('w'), 'result': RESULT, 'self': Value([0.5, 1.5, 2.0], 'float64', False)},
     ['exponent', 'self', 'result']),
    ('mul_number', 'mul', lambda L: L['x'] * 2.0,
     {'other': Value(2.0, 'float64', False), 'self': None},
     []),
    ('sum_negative_dims', 'sum_dim', lambda L: L['a'].sum((-1, 0), keepdim=True),
     {'dim': (18446744073709551615, 0, ), 'keepdim': True, 'self_sym_sizes': (2, 3, )},
     []),
    ('softmax_negative', 'softmax', lambda L: L['a'].softmax(-1),
     {'dim': 18446744073709551615, 'result': RESULT},
     ['result']),
    ('transpose_mT', 'transpose', lambda L: L['a'].mT,
     {'dim0': 18446744073709551614, 'dim1': 18446744073709551615},
     []),
    ('slice_negative_start', 'slice', lambda L: L['a'][:, -2:],
     {'dim': 1, 'end': 9223372036854775807, 'self_sym_sizes': (2, 3, ), 'start': 18446744073709551614, 'step': 1},
     []),
    ('select_negative', 'select', lambda L: L['a'].select(-1, -1),
     {'dim': 18446744073709551615, 'index': 18446744073709551615, 'self_sym_sizes': (2, 3, )},
     []),
    ('narrow', 'slice', lambda L: L['a'].narrow(-1, -2, 2),
     {'dim': 18446744073709551615, 'end': 3, 'self_sym_sizes': (2, 3, ), 'start': 1, 'step': 1},
     []),
    ('var_dim_unbiased', 'var', lambda L: L['a'].var(1, unbiased=False, keepdim=True),
     {'correction': 0, 'dim': (1, ), 'keepdim': True, 'self': Leaf('a')},
     ['self']),
    ('std_correction', 'std', lambda L: L['a'].std(-1, correction=0),
     {'correction': 0, 'dim': (18446744073709551615, ), 'keepdim': False, 'result': RESULT, 'self': Leaf('a')},
     ['self', 'result']),
    ('norm_dim', 'norm', lambda L: L['a'].norm(dim=-1, keepdim=True),
     {'dim': (18446744073709551615, ), 'keepdim': True, 'ord': 2, 'result': RESULT, 'self': Leaf('a')},
     ['self', 'result']),
    ('vector_norm_2.0', 'norm', lambda L: tape.linalg.vector_norm(L['a'], 2.0),
     {'dim': None, 'keepdim': False, 'ord': 2.0, 'result': RESULT, 'self': Leaf('a')},
     ['self', 'result']),
    ('getitem_select_then_slice', 'slice', lambda L: L['a'][1, 1:],
     {'dim': 0, 'end': 9223372036854775807, 'self_sym_sizes': (3, ), 'start': 1, 'step': 1},
     []),
    ('getitem_unsqueeze', 'index_unsqueeze', lambda L: L['a'][0, None],
     {'dim': 0},
     []),
    ('triu_negative', 'triu', lambda L: L['a'].triu(-1),
     {'diagonal': 18446744073709551615},
     []),
    ('where_broadcast', 'where', lambda L: tape.where(tape.tensor([[True], [False]]), L['a'], 0.0),
     {'condition': Value([[True], [False]], 'bool', False)},
     ['condition']),
    ('masked_fill_broadcast', 'masked_fill', lambda L: L['a'].masked_fill(tape.tensor([[False], [True]]), 0.0),
     {'mask': Value([[False], [True]], 'bool', False)},
     ['mask']),
    ('masked_select_broadcast', 'masked_select', lambda L: L['a'].masked_select(tape.tensor([True, False, True])),
     {'mask': Value([True, False, True], 'bool', False), 'self': Leaf('a')},
     ['mask', 'self']),
    ('sort_descending', 'sort', lambda L: L['a'].sort(0, descending=True)[0],
     {'dim': 0, 'indices': Value([[1, 0, 1], [0, 1, 0]], 'int64', False), 'self_sym_sizes': (2, 3)},
     ['indices']),
    ('max_keepdim', 'max_dim', lambda L: L['a'].max(-1, keepdim=True)[0],
     {'dim': 18446744073709551615, 'indices': Value([[1], [0]], 'int64', False), 'keepdim': True,
      'self_sym_sizes': (2, 3)},
     ['indices']),
    ('topk_smallest', 'topk', lambda L: L['a'].topk(2, 1, largest=False)[0],
     {'dim': 1, 'indices': Value([[2, 0], [1, 2]], 'int64', False), 'self_sym_sizes': (2, 3)},
     ['indices']),
    ('index_select_repeated', 'index_select', lambda L: L['a'].index_select(0, tape.tensor([1, 1, 0])),
     {'dim': 0, 'index': Value([1, 1, 0], 'int64', False), 'self_sym_sizes': (2, 3)},
     ['index']),
    ('amax_all', 'amax', lambda L: L['a'].amax(),
     {'dim': (), 'keepdim': False, 'result': RESULT, 'self': Leaf('a')},
     ['self', 'result']),
]

# What PyTorch's node shows that tape's does not, and why: (case -> names).
# Tape recomputes LU factors and pivots; slogdet's two results are two rows.
NOT_SHOWN = {
    "det": {"LU", "pivots"}, "slogdet": {"LU", "pivots", "sign"},
    "slogdet_sign": {"A", "LU", "pivots", "sign"}, "solve": {"LU", "pivots"},
    # a view of a base not in C order records flat positions, which have no strides
    "as_strided_at": {"storage_offset", "stride"},
}

# What PyTorch's hooks pack that tape's do not: the same, but slogdet's two
# results are two rows here, and the call packs A through the other one
NOT_PACKED = {**NOT_SHOWN, "slogdet_sign": {"LU", "pivots", "sign"}}
# how many tensors the call's other nodes pack before the case's node: a
# vector by a matrix is mm's product (packing mat2, then self) squeezed in place
PACKED_BEFORE = {"squeeze_dim_": 2}

# ops with no PyTorch node of their own: the engine's leaves and constants, a
# custom Function's rows (its ctx saves), the partials' vocabulary (step;
# floor_div, remainder's), div with a rounding mode (floor_div and trunc_div:
# DivBackward2 as PyTorch's, which also saves self and other; tape's shows
# rounding_mode alone) and the rows a create_graph backward of indexing records
NO_NODE = {"leaf", "const", "function", "delayed_error", "step", "floor_div", "trunc_div",
           "strided_scatter", "index_put"}


def _matches(got, want, t, y):
    if isinstance(want, Leaf):
        return got is t[want]
    if want is RESULT:
        return (isinstance(got, tape.Tensor) and got is not y and got.requires_grad
                and got.shape == y.shape and got.tolist() == y.tolist())
    if isinstance(want, Value):
        return (isinstance(got, tape.Tensor) and str(got.dtype).removeprefix("tape.") == want.dtype
                and got.requires_grad == want.requires_grad and got.tolist() == want.values)
    if isinstance(want, tuple):
        return isinstance(got, tuple) and len(got) == len(want) and all(
            _matches(g, w, t, y) for g, w in zip(got, want))
    return type(got) is type(want) and got == want


def _recorded_op(y):
    node = y.grad_fn
    return REGISTRY[node._ep.tape.op[node.row()]].name


@pytest.mark.parametrize("op, f, saved", [c[1:4] for c in CASES], ids=[c[0] for c in CASES])
def test_nodes_show_what_pytorchs_save(op, f, saved):
    case = next(c[0] for c in CASES if c[2] is f)
    t = leaves()
    y = f(t)
    assert _recorded_op(y) == op
    # a node type's attributes are those of every op recorded under its name: a row shows its own op's
    shown = {a[len("_saved_"):] for a in dir(y.grad_fn) if a.startswith("_saved_") and hasattr(y.grad_fn, a)}
    assert shown == set(saved) - NOT_SHOWN.get(case, set())
    for name in sorted(shown):
        got = getattr(y.grad_fn, f"_saved_{name}")
        assert _matches(got, saved[name], t, y), (name, got, saved[name])


@pytest.mark.parametrize("f, saved, packed", [c[2:] for c in CASES], ids=[c[0] for c in CASES])
def test_saved_tensors_hooks_pack_what_pytorchs_do_in_its_order(f, saved, packed):
    case = next(c[0] for c in CASES if c[2] is f)
    t = leaves()
    seen = []
    with saved_tensors_hooks(lambda s: seen.append(s) or s, lambda p: p):
        y = f(t)
    seen = seen[PACKED_BEFORE.get(case, 0):]
    # a list of tensors (advanced indexing's indices) packs each of them
    wanted = [w for n in packed if n not in NOT_PACKED.get(case, set())
              for w in (saved[n] if isinstance(saved[n], tuple) else (saved[n],)) if w is not None]
    assert len(seen) == len(wanted)
    for s, want in zip(seen, wanted):
        assert _matches(s, want, t, y) or want is RESULT and s.tolist() == y.tolist(), want


# The arguments PyTorch's nodes show, as given (a negative int as its
# unsigned twin), for calls with several dims, negative ones and indexing
# keys of several parts (whose last view op PyTorch's node is, or, with
# index arrays, whose views come first): (call on `a` of shape (2, 3, 4), the
# node's type, its non-tensor `_saved_*` and indices)
ARGUMENTS = [
    ('a[..., 1:]', 'SliceBackward0', {'dim': 2, 'end': 9223372036854775807, 'self_sym_sizes': (2, 3, 4), 'start': 1, 'step': 1}),
    ('a[1:, None]', 'UnsqueezeBackward0', {'dim': 1}),
    ('a[None, ..., 0]', 'SelectBackward0', {'dim': 3, 'index': 0, 'self_sym_sizes': (1, 2, 3, 4)}),
    ('a[:, ::2]', 'SliceBackward0', {'dim': 1, 'end': 9223372036854775807, 'self_sym_sizes': (2, 3, 4), 'start': 0, 'step': 2}),
    ('a[0:1, 2]', 'SelectBackward0', {'dim': 1, 'index': 2, 'self_sym_sizes': (1, 3, 4)}),
    ('a[..., 0, 1:]', 'SliceBackward0', {'dim': 1, 'end': 9223372036854775807, 'self_sym_sizes': (2, 4), 'start': 1, 'step': 1}),
    ('a[1, ..., None]', 'UnsqueezeBackward0', {'dim': 2}),
    ('a[:, :, -1]', 'SelectBackward0', {'dim': 2, 'index': 18446744073709551615, 'self_sym_sizes': (2, 3, 4)}),
    ('a[-1:, 1:2, ::3]', 'SliceBackward0', {'dim': 2, 'end': 9223372036854775807, 'self_sym_sizes': (1, 1, 4), 'start': 0, 'step': 3}),
    ('a[None]', 'UnsqueezeBackward0', {'dim': 0}),
    ('a[:, None, 1]', 'SelectBackward0', {'dim': 2, 'index': 1, 'self_sym_sizes': (2, 1, 3, 4)}),
    ('a[0][1]', 'SelectBackward0', {'dim': 0, 'index': 1, 'self_sym_sizes': (3, 4)}),
    ('a[..., 2:]', 'SliceBackward0', {'dim': 2, 'end': 9223372036854775807, 'self_sym_sizes': (2, 3, 4), 'start': 2, 'step': 1}),
    ('a.narrow(1, 1, 2)', 'SliceBackward0', {'dim': 1, 'end': 3, 'self_sym_sizes': (2, 3, 4), 'start': 1, 'step': 1}),
    ('a.select(2, -2)', 'SelectBackward0', {'dim': 2, 'index': 18446744073709551614, 'self_sym_sizes': (2, 3, 4)}),
    ('a.unsqueeze(-1)', 'UnsqueezeBackward0', {'dim': 18446744073709551615}),
    ('a.transpose(-1, 0)', 'TransposeBackward0', {'dim0': 18446744073709551615, 'dim1': 0}),
    ('a.permute(2, -3, 1)', 'PermuteBackward0', {'dims': (2, 18446744073709551613, 1)}),
    ('a.roll((1, -1), (0, 2))', 'RollBackward0', {'dims': (0, 2), 'shifts': (1, 18446744073709551615)}),
    ('a.flip((0, -1))', 'FlipBackward0', {'dims': (0, 18446744073709551615)}),
    ('a.repeat(1, 1, 2)', 'RepeatBackward0', {'repeats': (1, 1, 2), 'self_sym_sizes': (2, 3, 4)}),
    ('a.diagonal(1, -1, 0)', 'DiagonalBackward0', {'dim1': 18446744073709551615, 'dim2': 0, 'offset': 1, 'self_sym_sizes': (2, 3, 4)}),
    ('a.sum((0, -1))', 'SumBackward1', {'dim': (0, 18446744073709551615), 'keepdim': False, 'self_sym_sizes': (2, 3, 4)}),
    ('a.logsumexp(-2)', 'LogsumexpBackward0', {'dim': (18446744073709551614,), 'keepdim': False}),
    ('a.var(-1, keepdim=True)', 'VarBackward0', {'correction': 1, 'dim': (18446744073709551615,), 'keepdim': True}),
    ('a.std((0, 1), correction=2)', 'StdBackward0', {'correction': 2, 'dim': (0, 1), 'keepdim': False}),
    ('a.norm(3.0, dim=(1, 2))', 'LinalgVectorNormBackward0', {'dim': (1, 2), 'keepdim': False, 'ord': 3.0}),
    ('a.prod(-1, keepdim=True)', 'ProdBackward1', {'dim': 18446744073709551615, 'keepdim': True}),
    ('a.cumsum(-3)', 'CumsumBackward0', {'dim': 18446744073709551613}),
    ('a.log_softmax(-2)', 'LogSoftmaxBackward0', {'dim': 18446744073709551614}),
    ('a.amin((-1, -2), True)', 'AminBackward0', {'dim': (18446744073709551615, 18446744073709551614), 'keepdim': True}),
    ('a.mean(-1, True)', 'MeanBackward1', {'dim': (18446744073709551615,), 'keepdim': True, 'self_sym_numel': 24, 'self_sym_sizes': (2, 3, 4)}),
    ('a.tril(1)', 'TrilBackward0', {'diagonal': 1}),
    ('a.view(1, 24).squeeze(0)', 'SqueezeBackward1', {'dim': 0, 'self_sym_sizes': (1, 24)}),
    ('a[tape.tensor([1, 0])]', 'IndexBackward0', {'indices': ([1, 0],), 'self_sym_sizes': (2, 3, 4)}),
    ('a[[0, 1]]', 'IndexBackward0', {'indices': ([0, 1],), 'self_sym_sizes': (2, 3, 4)}),
    ('a[:, tape.tensor([1, 0])]', 'IndexBackward0', {'indices': (None, [1, 0]), 'self_sym_sizes': (2, 3, 4)}),
    ('a[a[:, :, 0] > 0]', 'IndexBackward0', {'indices': ([[True, True, True], [True, True, True]],), 'self_sym_sizes': (2, 3, 4)}),
    ('a[tape.tensor([1, 0]), 1:]', 'IndexBackward0', {'indices': ([1, 0],), 'self_sym_sizes': (2, 2, 4)}),
    ('a[1:, tape.tensor([1, 0])]', 'IndexBackward0', {'indices': (None, [1, 0]), 'self_sym_sizes': (1, 3, 4)}),
    ('a[tape.tensor([1, 0]), :, tape.tensor([1, 0])]', 'IndexBackward0', {'indices': ([1, 0], None, [1, 0]), 'self_sym_sizes': (2, 3, 4)}),
    ('a[..., tape.tensor([1, 0])]', 'IndexBackward0', {'indices': (None, None, [1, 0]), 'self_sym_sizes': (2, 3, 4)}),
    ('a[0, tape.tensor([1, 0])]', 'IndexBackward0', {'indices': ([1, 0],), 'self_sym_sizes': (3, 4)}),
    ('a[None, tape.tensor([1, 0])]', 'IndexBackward0', {'indices': (None, [1, 0]), 'self_sym_sizes': (1, 2, 3, 4)}),
    ('a[tape.tensor([1, 0]), None]', 'IndexBackward0', {'indices': ([1, 0],), 'self_sym_sizes': (2, 1, 3, 4)}),
    ('a[tape.tensor([1, 0]), 2]', 'IndexBackward0', {'indices': ([1, 0],), 'self_sym_sizes': (2, 4)}),
    ('a[True]', 'IndexBackward0', {'indices': ([0],), 'self_sym_sizes': (1, 2, 3, 4)}),
    ('a[..., [0, 2], 1]', 'IndexBackward0', {'indices': (None, [0, 2]), 'self_sym_sizes': (2, 3)}),
]


def _plain(value):
    """A saved value with its tensors as lists."""
    if isinstance(value, tape.Tensor):
        return value.tolist()
    return tuple(map(_plain, value)) if isinstance(value, tuple) else value


@pytest.mark.parametrize("call, grad_fn, saved", ARGUMENTS, ids=[c[0] for c in ARGUMENTS])
def test_nodes_show_the_arguments_of_the_call(call, grad_fn, saved):
    a = tape.ones(2, 3, 4, requires_grad=True)
    node = eval(call, {"a": a, "tape": tape}).grad_fn
    assert type(node).__name__ == grad_fn
    shown = {}
    for attr in dir(node):
        if attr.startswith("_saved_") and hasattr(node, attr):
            value = getattr(node, attr)
            if not isinstance(value, tape.Tensor) or attr in ("_saved_indices", "_saved_index"):
                shown[attr[len("_saved_"):]] = _plain(value)
    assert {k: (type(v), v) for k, v in shown.items()} == {k: (type(v), v) for k, v in saved.items()}


def test_every_op_with_a_node_has_a_case():
    ops = {d.name for d in opdefs()} - NO_NODE
    assert sorted(ops - {c[1] for c in CASES}) == []
    assert sorted(NO_NODE - {d.name for d in opdefs()}) == []


def test_the_cases_ids_are_unique_and_the_gaps_name_cases():
    ids = [c[0] for c in CASES]
    assert len(ids) == len(set(ids)) and set(NOT_SHOWN) <= set(ids)
