"""The gradient-check suite run by ``tinygrad-rnn gradcheck``: every built-in op, the recurrent
cells and the recurrent layers, checked by float64 central differences.

This module is the one list of what the command checks (:data:`SUITE`). Each
:class:`SuiteEntry` draws random problems from a seeded NumPy generator: float64 inputs inside
the op's domain (away from the kinks of relu, abs, clip, maximum/minimum and max, bounded
tanh/sigmoid pre-activations, positive inputs for log and sqrt, divisors away from 0), with
random shapes, broadcasting, axes, masks, class weights, ignored targets and label smoothing.
Every example is checked with :func:`tinygrad_rnn.gradcheck.check_leaves` in full mode (every
Jacobian entry; eps = 1e-6), with respect to every floating-point input and, for cells and
layers, every parameter.

Why a seeded NumPy sampler and not hypothesis: the command must work in a plain install
(hypothesis is a test extra), it prints exactly ``--examples`` checks per entry, a failure is
reproduced by re-running with the same ``--seed`` (the examples of an entry do not depend on
which other entries run), and there is no shrinking phase to wait for. The property-based
(hypothesis) versions of these checks live in the test suite (``tests/test_ops_gradients.py``,
``tests/nn/``).

Tolerance: an entry passes when ``|analytic - numeric| <= atol + rtol |numeric|`` with
``rtol = 1e-5`` and ``atol = 1e-6 * max(1, max |f|)`` (``docs/gradcheck.md`` derives why
float64 central differences are good to about 1e-10 |f| here).
"""
from __future__ import annotations

import math
import time
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from . import functional as F
from .backend import normalize_device, to_device
from .creation import cat, split, stack, where
from .engine import no_grad
from .gradcheck import check_leaves, flatten_outputs
from .nn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from .nn import functional as NF
from .ops import Cast
from .tensor import Tensor

__all__ = [
    "EPS", "RTOL", "ATOL", "Problem", "SuiteEntry", "EntryResult", "SUITE", "BY_NAME",
    "example_rng", "check_problem", "run_entry", "run_suite", "format_table",
]

EPS = 1e-6  # central-difference step
RTOL = 1e-5
ATOL = 1e-6  # scaled by max(1, max |f|)
GAP = 0.05  # distance kept from kinks and ties
GRID = 0.25  # kinks and ties are put on multiples of GRID


@dataclass
class Problem:
    """One example: ``fn(*inputs)`` returns a Tensor or a (nested) tuple of Tensors.

    ``inputs`` holds float64 Tensors with ``requires_grad=True`` (checked) and constants
    (passed through). ``params`` are ``(name, Tensor)`` pairs that ``fn`` reads from a
    module (float64 leaves, also checked, perturbed in place and restored).
    """

    fn: Callable[..., Any]
    inputs: tuple
    params: tuple = ()


@dataclass(frozen=True)
class SuiteEntry:
    """A named family of problems: ``sample(rng)`` draws one :class:`Problem`."""

    name: str
    group: str  # 'op', 'cell' or 'layer'
    sample: Callable[[np.random.Generator], Problem]
    what: str


@dataclass
class EntryResult:
    """The outcome of the checks of one entry."""

    name: str
    group: str
    examples: int = 0
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    passed: bool = True
    failure: str = ""
    seconds: float = 0.0
    entries: int = 0  # Jacobian entries compared over all examples


# ----------------------------------------------------------------------------- samplers
def _leaf(a: Any) -> Tensor:
    return Tensor(np.asarray(a, dtype=np.float64), requires_grad=True)


def _shape(rng: np.random.Generator, min_dims: int = 0, max_dims: int = 3,
           max_side: int = 3) -> tuple:
    ndim = int(rng.integers(min_dims, max_dims + 1))
    return tuple(int(s) for s in rng.integers(1, max_side + 1, size=ndim))


def _reals(rng: np.random.Generator, shape: tuple, lo: float = -3.0,
           hi: float = 3.0) -> np.ndarray:
    return rng.uniform(lo, hi, size=shape)


def _signed(rng: np.random.Generator, shape: tuple, lo: float = 0.5,
            hi: float = 3.0) -> np.ndarray:
    """Magnitudes in [lo, hi] with random signs (divisors; inputs of abs)."""
    return rng.uniform(lo, hi, size=shape) * rng.choice([-1.0, 1.0], size=shape)


def _on_grid(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    return GRID * rng.integers(-8, 9, size=shape).astype(np.float64)


def _off_grid(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """Values at least GAP away from every multiple of GRID (0 included)."""
    return _on_grid(rng, shape) + rng.uniform(GAP, GRID - GAP, size=shape)


def _distinct(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """All entries at least 2 * GAP apart (no ties for max/min)."""
    n = math.prod(shape)
    values = GRID * (rng.permutation(n) - n / 2) + rng.uniform(0.0, GRID - 2 * GAP, size=n)
    return values.reshape(shape)


def _broadcast_shapes(rng: np.random.Generator, count: int) -> list:
    """``count`` shapes that broadcast together: each drops leading axes of a common shape
    and sets some sides to 1."""
    full = _shape(rng, 0, 3)
    shapes = []
    for _ in range(count):
        drop = int(rng.integers(0, len(full) + 1))
        shape = [1 if rng.random() < 0.3 else s for s in full[drop:]]
        shapes.append(tuple(shape))
    return shapes


def _axis(rng: np.random.Generator, ndim: int) -> Any:
    """None, one axis (maybe negative) or a tuple of distinct axes."""
    if ndim == 0 or rng.random() < 0.25:
        return None
    if rng.random() < 0.5:
        return int(rng.integers(-ndim, ndim))
    k = int(rng.integers(1, ndim + 1))
    return tuple(int(a) for a in rng.choice(ndim, size=k, replace=False))


def _unary(fn: Callable[[Tensor], Tensor],
           values: Callable[[np.random.Generator, tuple], np.ndarray]) -> Callable:
    def sample(rng: np.random.Generator) -> Problem:
        return Problem(fn, (_leaf(values(rng, _shape(rng))),))

    return sample


def _binary(fn: Callable[[Tensor, Tensor], Tensor],
            values_a: Callable[[np.random.Generator, tuple], np.ndarray],
            values_b: Callable[[np.random.Generator, tuple], np.ndarray],
            swap: bool = False) -> Callable:
    def sample(rng: np.random.Generator) -> Problem:
        shape_a, shape_b = _broadcast_shapes(rng, 2)
        a, b = values_a(rng, shape_a), values_b(rng, shape_b)
        if swap and rng.random() < 0.5:
            a, b = b, a
        return Problem(fn, (_leaf(a), _leaf(b)))

    return sample


# ------------------------------------------------------------------------- op problems
def _pow(rng: np.random.Generator) -> Problem:
    exponent = float(rng.choice([0.0, 1.0, 2.0, 3.0, 0.5, 1.5, -0.5, -1.0, -2.0]))
    shape = _shape(rng)
    if exponent.is_integer() and exponent >= 0:
        x = _reals(rng, shape, -2.0, 2.0)
    else:
        x = _reals(rng, shape, 0.3, 3.0)
    return Problem(lambda t: t ** exponent, (_leaf(x),))


def _clip(rng: np.random.Generator) -> Problem:
    bounds = sorted(GRID * rng.choice(np.arange(-8, 9), size=2, replace=False))
    lo: float | None = float(bounds[0])
    hi: float | None = float(bounds[1])
    kind = str(rng.choice(["lower", "upper", "both"]))
    if kind == "lower":
        hi = None
    elif kind == "upper":
        lo = None
    return Problem(lambda t: t.clip(lo, hi), (_leaf(_off_grid(rng, _shape(rng))),))


def _softmax_like(log: bool) -> Callable:
    def sample(rng: np.random.Generator) -> Problem:
        shape = _shape(rng, 1, 3, 4)
        axis = int(rng.integers(-len(shape), len(shape)))
        mask = None
        if rng.random() < 0.5:
            mask_shape = tuple(1 if rng.random() < 0.3 else s for s in shape)
            mask = rng.random(mask_shape) < 0.7

        def fn(t: Tensor) -> Tensor:
            if not log:
                return F.softmax(t, axis=axis, mask=mask)
            y = F.log_softmax(t, axis=axis, mask=mask)
            if mask is None:
                return y
            # masked entries are -inf, where a finite difference is inf - inf: compare 0
            return where(np.broadcast_to(mask, shape), y, 0.0)

        return Problem(fn, (_leaf(_reals(rng, shape, -5.0, 5.0)),))

    return sample


def _matmul(rng: np.random.Generator) -> Problem:
    n, k, m = (int(v) for v in rng.integers(1, 4, size=3))
    kind = str(rng.choice(["mm", "batched", "vm", "mv", "vv"]))
    if kind == "batched":
        batch_a, batch_b = _broadcast_shapes(rng, 2)
        batch_a, batch_b = batch_a[-2:], batch_b[-2:]
    else:
        batch_a = batch_b = ()
    shape_a = (k,) if kind in ("vm", "vv") else batch_a + (n, k)
    shape_b = (k,) if kind in ("mv", "vv") else batch_b + (k, m)
    a, b = _reals(rng, shape_a, -2.0, 2.0), _reals(rng, shape_b, -2.0, 2.0)
    return Problem(lambda x, y: x @ y, (_leaf(a), _leaf(b)))


def _linear(rng: np.random.Generator) -> Problem:
    lead = _shape(rng, 0, 2)
    d_in, d_out = (int(v) for v in rng.integers(1, 4, size=2))
    x = _leaf(_reals(rng, lead + (d_in,), -2.0, 2.0))
    w = _leaf(_reals(rng, (d_out, d_in), -2.0, 2.0))
    if rng.random() < 0.5:
        return Problem(lambda a, b: F.linear(a, b), (x, w))
    return Problem(lambda a, b, c: F.linear(a, b, c), (x, w, _leaf(_reals(rng, (d_out,)))))


def _reduction(name: str) -> Callable:
    def sample(rng: np.random.Generator) -> Problem:
        shape = _shape(rng)
        axis = _axis(rng, len(shape))
        keepdims = bool(rng.random() < 0.5)
        x = _distinct(rng, shape) if name in ("max", "min") else _reals(rng, shape)

        def fn(t: Tensor) -> Tensor:
            return getattr(t, name)(axis, keepdims)

        return Problem(fn, (_leaf(x),))

    return sample


def _reshape(rng: np.random.Generator) -> Problem:
    shape = _shape(rng)
    sides = [s for s in shape if s != 1]
    rng.shuffle(sides)
    target: list = []
    for side in sides:
        if target and rng.random() < 0.5:
            target[-1] *= side
        else:
            target.append(side)
    for _ in range(int(rng.integers(0, 2))):
        target.insert(int(rng.integers(0, len(target) + 1)), 1)
    if target and rng.random() < 0.5:
        target[int(rng.integers(0, len(target)))] = -1
    new_shape = tuple(target)
    return Problem(lambda t: t.reshape(new_shape), (_leaf(_reals(rng, shape)),))


def _transpose(rng: np.random.Generator) -> Problem:
    shape = _shape(rng, 1, 3)
    axes = tuple(int(a) for a in rng.permutation(len(shape)))
    return Problem(lambda t: t.transpose(axes), (_leaf(_reals(rng, shape)),))


def _broadcast_to(rng: np.random.Generator) -> Problem:
    shape = _shape(rng, 0, 2)
    lead = _shape(rng, 0, 2)
    target = lead + tuple(int(rng.integers(1, 4)) if s == 1 else s for s in shape)
    return Problem(lambda t: t.broadcast_to(target), (_leaf(_reals(rng, shape)),))


def _getitem(rng: np.random.Generator) -> Problem:
    shape = _shape(rng, 1, 3)
    kind = str(rng.choice(["slice", "int", "ids", "bool"]))
    if kind == "slice":
        index: Any = tuple(slice(int(rng.integers(0, s)), None, int(rng.integers(1, 3)))
                           for s in shape)
    elif kind == "int":
        index = (int(rng.integers(-shape[0], shape[0])), Ellipsis)
    elif kind == "ids":  # repeated ids: the gradient must scatter-add
        index = rng.integers(-shape[0], shape[0], size=int(rng.integers(1, 6)))
    else:
        index = rng.random(shape[:1]) < 0.6
    return Problem(lambda t: t[index], (_leaf(_reals(rng, shape)),))


def _write_through_view(rng: np.random.Generator) -> Problem:
    """out[k] = v on a tensor in a graph (WriteRegion), and a view made before the write used
    after it (ViewOf): both gradients, to the base and to the value written."""
    shape = _shape(rng, 1, 3)
    k = int(rng.integers(-shape[0], shape[0]))

    def fn(x: Tensor, v: Tensor) -> Tensor:
        b = x * 1.0
        seen = b.T  # a view from before the write
        b[k] = v * 2.0
        return seen * 1.0

    return Problem(fn, (_leaf(_reals(rng, shape)), _leaf(_reals(rng, shape[1:]))))


def _cat(rng: np.random.Generator) -> Problem:
    base = _shape(rng, 1, 3)
    axis = int(rng.integers(-len(base), len(base)))
    ax = axis % len(base)
    pieces = tuple(
        _leaf(_reals(rng, base[:ax] + (int(rng.integers(1, 4)),) + base[ax + 1:]))
        for _ in range(int(rng.integers(1, 4))))
    return Problem(lambda *xs: cat(xs, axis=axis), pieces)


def _stack(rng: np.random.Generator) -> Problem:
    shape = _shape(rng, 0, 2)
    axis = int(rng.integers(-len(shape) - 1, len(shape) + 1))
    pieces = tuple(_leaf(_reals(rng, shape)) for _ in range(int(rng.integers(1, 4))))
    return Problem(lambda *xs: stack(xs, axis=axis), pieces)


def _split(rng: np.random.Generator) -> Problem:
    shape = _shape(rng, 1, 3, 4)
    axis = int(rng.integers(-len(shape), len(shape)))
    n = shape[axis]
    if rng.random() < 0.5:
        sizes: Any = int(rng.integers(1, n + 1))
    else:
        cuts = sorted(int(c) for c in rng.integers(0, n + 1, size=int(rng.integers(0, 3))))
        sizes = [b - a for a, b in zip([0] + cuts, cuts + [n])]
    return Problem(lambda t: split(t, sizes, axis=axis), (_leaf(_reals(rng, shape)),))


def _where(rng: np.random.Generator) -> Problem:
    cond_shape, shape_a, shape_b = _broadcast_shapes(rng, 3)
    cond = rng.random(cond_shape) < 0.5
    return Problem(lambda a, b: where(cond, a, b),
                   (_leaf(_reals(rng, shape_a)), _leaf(_reals(rng, shape_b))))


def _masked_fill(rng: np.random.Generator) -> Problem:
    shape = _shape(rng)
    mask = rng.random(tuple(1 if rng.random() < 0.3 else s for s in shape)) < 0.5
    value = float(rng.uniform(-5.0, 5.0))
    return Problem(lambda t: t.masked_fill(mask, value), (_leaf(_reals(rng, shape)),))


def _embedding(rng: np.random.Generator) -> Problem:
    # padding_idx rows get a gradient of exactly 0 by definition (not the derivative), so
    # they are left to the test suite; repeated ids check the scatter-add
    rows, dim = int(rng.integers(1, 5)), int(rng.integers(1, 4))
    ids = rng.integers(0, rows, size=_shape(rng, 1, 2, 4))
    return Problem(lambda w: F.embedding(ids, w), (_leaf(_reals(rng, (rows, dim))),))


def _dropout(rng: np.random.Generator) -> Problem:
    p = float(rng.choice([0.1, 0.3, 0.5, 0.8]))
    seed = int(rng.integers(0, 2**16))
    # an int generator is a fresh Generator(seed) on every call: the same mask every time
    return Problem(lambda t: F.dropout(t, p=p, training=True, generator=seed),
                   (_leaf(_reals(rng, _shape(rng))),))


def _class_layout(rng: np.random.Generator) -> tuple:
    """(input shape, target shape, C): (C,) with (); (N, C) with (N,); (N, C, d) with (N, d)."""
    classes = int(rng.integers(1, 5))
    layout = str(rng.choice(["C", "NC", "NCd"]))
    n = int(rng.integers(1, 4))
    if layout == "C":
        return (classes,), (), classes
    if layout == "NC":
        return (n, classes), (n,), classes
    d = int(rng.integers(1, 3))
    return (n, classes, d), (n, d), classes


def _loss_options(rng: np.random.Generator, classes: int) -> dict:
    weight = rng.uniform(0.2, 2.0, size=classes) if rng.random() < 0.5 else None
    return {"weight": weight, "reduction": str(rng.choice(["none", "mean", "sum"]))}


def _cross_entropy(rng: np.random.Generator) -> Problem:
    x_shape, t_shape, classes = _class_layout(rng)
    target = rng.integers(0, classes, size=t_shape)
    ignore_index = int(rng.choice([-100, -1, int(rng.integers(0, classes))]))
    target = np.where(rng.random(t_shape) < 0.25, ignore_index, target).astype(np.int64)
    smoothing = float(rng.choice([0.0, 0.1, float(rng.uniform(0.0, 1.0))]))
    opts = _loss_options(rng, classes)
    return Problem(
        lambda z: F.cross_entropy(z, target, ignore_index=ignore_index,
                                  label_smoothing=smoothing, **opts),
        (_leaf(_reals(rng, x_shape, -4.0, 4.0)),))


def _plain_cross_entropy(rng: np.random.Generator) -> Problem:
    """The textbook loss (ops.PlainCrossEntropy): ids in range, no weights, no smoothing."""
    x_shape, t_shape, classes = _class_layout(rng)
    target = rng.integers(0, classes, size=t_shape).astype(np.int64)
    reduction = str(rng.choice(["none", "mean", "sum"]))
    return Problem(lambda z: F.cross_entropy(z, target, reduction=reduction),
                   (_leaf(_reals(rng, x_shape, -4.0, 4.0)),))


def _cross_entropy_probs(rng: np.random.Generator) -> Problem:
    x_shape, _, classes = _class_layout(rng)
    smoothing = float(rng.choice([0.0, 0.1, float(rng.uniform(0.0, 1.0))]))
    opts = _loss_options(rng, classes)
    return Problem(lambda z, q: F.cross_entropy(z, q, label_smoothing=smoothing, **opts),
                   (_leaf(_reals(rng, x_shape, -4.0, 4.0)),
                    _leaf(_reals(rng, x_shape, 0.0, 1.0))))


def _nll_loss(rng: np.random.Generator) -> Problem:
    x_shape, t_shape, classes = _class_layout(rng)
    target = rng.integers(0, classes, size=t_shape)
    target = np.where(rng.random(t_shape) < 0.25, -100, target).astype(np.int64)
    opts = _loss_options(rng, classes)
    return Problem(lambda z: F.nll_loss(z, target, **opts), (_leaf(_reals(rng, x_shape)),))


def _norm(rng: np.random.Generator) -> Problem:
    """p-norms over axes, entries away from 0 (where |x|^(p-1) is not smooth for p < 2)."""
    shape = _shape(rng, 1, 3)
    p = float(rng.choice([2.0, 3.0, 1.5]))
    dim, keepdim = _axis(rng, len(shape)), bool(rng.random() < 0.5)
    return Problem(lambda x: x.norm(p, dim, keepdim), (_leaf(_signed(rng, shape)),))


def _binary_cross_entropy(rng: np.random.Generator) -> Problem:
    """Probabilities in [0.05, 0.95], targets in [0, 1]."""
    shape = _shape(rng)
    target = _reals(rng, shape, 0.0, 1.0)
    reduction = str(rng.choice(["none", "mean", "sum"]))
    return Problem(lambda q: NF.binary_cross_entropy(q, target, reduction=reduction),
                   (_leaf(_reals(rng, shape, 0.05, 0.95)),))


def _mse_loss(rng: np.random.Generator) -> Problem:
    shape = _shape(rng)
    reduction = str(rng.choice(["none", "mean", "sum"]))
    return Problem(lambda a, b: F.mse_loss(a, b, reduction=reduction),
                   (_leaf(_reals(rng, shape)), _leaf(_reals(rng, shape))))


def _bce_with_logits(rng: np.random.Generator) -> Problem:
    shape = _shape(rng, 1, 2)
    weight = rng.uniform(0.2, 2.0, size=shape) if rng.random() < 0.5 else None
    pos_weight = rng.uniform(0.2, 3.0, size=shape[-1:]) if rng.random() < 0.5 else None
    reduction = str(rng.choice(["none", "mean", "sum"]))
    return Problem(
        lambda x, t: F.binary_cross_entropy_with_logits(x, t, weight=weight,
                                                        pos_weight=pos_weight,
                                                        reduction=reduction),
        (_leaf(_reals(rng, shape, -4.0, 4.0)), _leaf(_reals(rng, shape, 0.0, 1.0))))


def _layer_norm(rng: np.random.Generator) -> Problem:
    """x (*, S) normalized over its last 1 or 2 axes (entries distinct, so every row has a
    variance well above 0), with weight and bias each present or not; eps 1e-5 or 0.1."""
    normalized = _shape(rng, 1, 2)
    lead = _shape(rng, 0, 2)
    eps = float(rng.choice([1e-5, 0.1]))
    inputs = [_leaf(_distinct(rng, lead + normalized))]
    has_weight, has_bias = bool(rng.random() < 0.7), bool(rng.random() < 0.7)
    if has_weight:
        inputs.append(_leaf(_signed(rng, normalized)))
    if has_bias:
        inputs.append(_leaf(_reals(rng, normalized)))

    def fn(x: Tensor, *params: Tensor) -> Tensor:
        weight = params[0] if has_weight else None
        bias = params[-1] if has_bias else None
        return NF.layer_norm(x, normalized, weight, bias, eps)

    return Problem(fn, tuple(inputs))


def _conv1d(rng: np.random.Generator) -> Problem:
    """x (N, C_in, L), weight (C_out, C_in, K), maybe a bias; stride 1-3, dilation 1-2 and
    zero padding (left, right), unequal too (a causal convolution's)."""
    n, c_in, c_out = (int(v) for v in rng.integers(1, 4, size=3))
    k, stride, dilation = int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(
        rng.integers(1, 3))
    left, right = int(rng.integers(0, 4)), int(rng.integers(0, 3))
    length = int(rng.integers(max(1, dilation * (k - 1) + 1 - left - right), 8))
    inputs = [_leaf(_reals(rng, (n, c_in, length))), _leaf(_reals(rng, (c_out, c_in, k)))]
    if rng.random() < 0.7:
        inputs.append(_leaf(_reals(rng, (c_out,))))

    def fn(x: Tensor, w: Tensor, *bias: Tensor) -> Tensor:
        return NF.conv1d_padded(x, w, bias[0] if bias else None, stride, left, right,
                                dilation)

    return Problem(fn, tuple(inputs))


# ------------------------------------------------------------------- cells and layers
def _module_problem(module: Any, fn: Callable[..., Any], inputs: tuple) -> Problem:
    return Problem(fn, inputs, tuple(module.named_parameters()))


def _rnn_cell(nonlinearity: str) -> Callable:
    def sample(rng: np.random.Generator) -> Problem:
        n, d, h = 2, int(rng.integers(1, 4)), int(rng.integers(1, 4))
        cell = RNNCell(d, h, nonlinearity=nonlinearity, dtype=np.float64, generator=rng)
        for _ in range(100):  # relu: keep every pre-activation GAP away from the kink
            x, h0 = _reals(rng, (n, d), -1.0, 1.0), _reals(rng, (n, h), -1.0, 1.0)
            pre = (x @ cell.weight_ih._data.T + cell.bias_ih._data + h0 @ cell.weight_hh._data.T
                   + cell.bias_hh._data)
            if nonlinearity == "tanh" or np.abs(pre).min() >= GAP:
                break
        return _module_problem(cell, lambda a, b: cell(a, b), (_leaf(x), _leaf(h0)))

    return sample


def _gru_cell(reset: str) -> Callable:
    def sample(rng: np.random.Generator) -> Problem:
        n, d, h = 2, int(rng.integers(1, 4)), int(rng.integers(1, 4))
        cell = GRUCell(d, h, reset=reset, dtype=np.float64, generator=rng)
        x, h0 = _reals(rng, (n, d), -1.0, 1.0), _reals(rng, (n, h), -1.0, 1.0)
        return _module_problem(cell, lambda a, b: cell(a, b), (_leaf(x), _leaf(h0)))

    return sample


def _lstm_cell(peephole: bool = False, coupled: bool = False) -> Callable:
    def sample(rng: np.random.Generator) -> Problem:
        n, d, h = 2, int(rng.integers(1, 4)), int(rng.integers(1, 4))
        cell = LSTMCell(d, h, peephole=peephole, coupled=coupled, dtype=np.float64,
                        generator=rng)
        x = _reals(rng, (n, d), -1.0, 1.0)
        h0, c0 = _reals(rng, (n, h), -1.0, 1.0), _reals(rng, (n, h), -1.0, 1.0)
        return _module_problem(cell, lambda a, b, c: cell(a, (b, c)),
                               (_leaf(x), _leaf(h0), _leaf(c0)))

    return sample


def _layer(kind: str) -> Callable:
    def sample(rng: np.random.Generator) -> Problem:
        t, n, d, h = 3, 2, int(rng.integers(1, 3)), int(rng.integers(1, 3))
        bidirectional = bool(rng.random() < 0.5)
        if kind == "rnn":
            layer: Any = RNN(d, h, bidirectional=bidirectional, dtype=np.float64,
                             generator=rng)
        elif kind == "gru":
            layer = GRU(d, h, bidirectional=bidirectional, dtype=np.float64, generator=rng,
                        reset=str(rng.choice(["after", "before"])))
        else:
            layer = LSTM(d, h, bidirectional=bidirectional, dtype=np.float64, generator=rng,
                         peephole=bool(rng.random() < 0.5), coupled=bool(rng.random() < 0.5))
        lengths = rng.integers(1, t + 1, size=n) if rng.random() < 0.5 else None
        states = 2 if bidirectional else 1
        x = _leaf(_reals(rng, (t, n, d), -1.0, 1.0))
        h0 = _leaf(_reals(rng, (states, n, h), -1.0, 1.0))
        if kind == "lstm":
            c0 = _leaf(_reals(rng, (states, n, h), -1.0, 1.0))
            return _module_problem(layer, lambda a, b, c: layer(a, (b, c), lengths=lengths),
                                   (x, h0, c0))
        return _module_problem(layer, lambda a, b: layer(a, b, lengths=lengths), (x, h0))

    return sample


def _astype(t: Tensor) -> Tensor:
    """An exact cast up to longdouble (x86-64's 80-bit floats) on the CPU. Device array
    modules have no longdouble (CuPy's widest float is float64), so there the entry checks
    the same cast op float64 -> float64."""
    if t.device == "cpu":
        return t.astype(np.longdouble)
    return Cast.apply(t, dtype=np.dtype(np.float64))


def _round_trip(t: Tensor) -> Tensor:
    """``t`` copied to another device and back: two differentiable copies."""
    other = "standin" if t.device != "standin" else "cpu"
    return t.to(other).to(t.device) * 2.0


# ----------------------------------------------------------------------------- the suite
def _op(name: str, sample: Callable, what: str) -> SuiteEntry:
    return SuiteEntry(name, "op", sample, what)


SUITE: tuple[SuiteEntry, ...] = (
    # elementwise arithmetic, with broadcasting
    _op("add", _binary(lambda a, b: a + b, _reals, _reals), "a + b"),
    _op("sub", _binary(lambda a, b: a - b, _reals, _reals), "a - b"),
    _op("mul", _binary(lambda a, b: a * b, _reals, _reals), "a * b"),
    _op("div", _binary(lambda a, b: a / b, _reals, _signed), "a / b, |b| >= 0.5"),
    _op("neg", _unary(lambda t: -t, _reals), "-x"),
    _op("pow", _pow, "x ** p for integer and fractional p"),
    _op("exp", _unary(F.exp, _reals), "exp(x)"),
    _op("log", _unary(F.log, lambda rng, s: _reals(rng, s, 0.2, 5.0)), "log(x), x >= 0.2"),
    _op("sqrt", _unary(F.sqrt, lambda rng, s: _reals(rng, s, 0.2, 5.0)), "sqrt(x), x >= 0.2"),
    _op("abs", _unary(F.abs, _off_grid), "|x| away from 0"),
    _op("maximum", _binary(F.maximum, _off_grid, _on_grid, swap=True), "maximum, no ties"),
    _op("minimum", _binary(F.minimum, _off_grid, _on_grid, swap=True), "minimum, no ties"),
    _op("clip", _clip, "clip(x, lo, hi) away from the bounds"),
    # activations
    _op("relu", _unary(F.relu, _off_grid), "relu away from 0"),
    _op("tanh", _unary(F.tanh, _reals), "tanh, |x| <= 3"),
    _op("sigmoid", _unary(F.sigmoid, lambda rng, s: _reals(rng, s, -5.0, 5.0)),
        "sigmoid, |x| <= 5"),
    _op("softmax", _softmax_like(log=False), "softmax along any axis, optional mask"),
    _op("log_softmax", _softmax_like(log=True), "log_softmax along any axis, optional mask"),
    # linear algebra
    _op("matmul", _matmul, "a @ b: 1-D, 2-D, batched with broadcasting"),
    _op("linear", _linear, "x W^T + b"),
    # reductions
    _op("sum", _reduction("sum"), "sum over axes, keepdims"),
    _op("mean", _reduction("mean"), "mean over axes, keepdims"),
    _op("max", _reduction("max"), "max over axes, distinct values"),
    _op("min", _reduction("min"), "min over axes, distinct values"),
    # shapes and indexing
    _op("reshape", _reshape, "reshape"),
    _op("transpose", _transpose, "transpose by a permutation"),
    _op("broadcast_to", _broadcast_to, "broadcast_to"),
    _op("getitem", _getitem, "slices, integers, repeated ids, boolean masks"),
    _op("write_through_view", _write_through_view, "recorded write into a graph, stale view"),
    _op("cat", _cat, "concatenate"),
    _op("stack", _stack, "stack"),
    _op("split", _split, "split by size or sections"),
    _op("where", _where, "where(cond, a, b) with broadcasting"),
    _op("masked_fill", _masked_fill, "masked_fill"),
    _op("embedding", _embedding, "embedding lookup, repeated ids"),
    _op("dropout", _dropout, "dropout with a fixed mask"),
    _op("clone", _unary(lambda t: t.clone(), _reals), "differentiable copy"),
    _op("astype", _unary(_astype, _reals), "float64 -> longdouble cast"),
    _op("to_device", _unary(_round_trip, _reals), "copy to another device and back"),
    # losses
    _op("cross_entropy", _cross_entropy, "class ids; weights, ignore_index, smoothing"),
    _op("cross_entropy_plain", _plain_cross_entropy, "class ids; no options (p - e_y)"),
    _op("cross_entropy_probs", _cross_entropy_probs, "class probabilities (both inputs)"),
    _op("nll_loss", _nll_loss, "weights, ignored targets"),
    _op("mse_loss", _mse_loss, "mean squared error"),
    _op("binary_cross_entropy", _binary_cross_entropy, "probabilities, every reduction"),
    _op("norm", _norm, "p-norm over axes (p = 2, 3, 1.5)"),
    _op("gelu", _unary(lambda t: NF.gelu(t), _reals), "exact GELU (erf)"),
    _op("bce_with_logits", _bce_with_logits, "weight and pos_weight"),
    # normalization
    _op("layer_norm", _layer_norm, "layer_norm over 1-2 trailing axes, weight/bias or not"),
    # convolution
    _op("conv1d", _conv1d, "conv1d: stride, dilation, left/right zero padding, bias or not"),
    # recurrent cells (autograd path), inputs, states and every parameter
    SuiteEntry("rnn_cell_tanh", "cell", _rnn_cell("tanh"), "RNNCell, tanh"),
    SuiteEntry("rnn_cell_relu", "cell", _rnn_cell("relu"), "RNNCell, relu, away from 0"),
    SuiteEntry("gru_cell_after", "cell", _gru_cell("after"), "GRUCell, reset after"),
    SuiteEntry("gru_cell_before", "cell", _gru_cell("before"), "GRUCell, reset before"),
    SuiteEntry("lstm_cell", "cell", _lstm_cell(), "LSTMCell"),
    SuiteEntry("lstm_cell_peephole", "cell", _lstm_cell(peephole=True),
               "LSTMCell with peepholes"),
    SuiteEntry("lstm_cell_coupled", "cell", _lstm_cell(coupled=True),
               "LSTMCell, coupled input-forget gate"),
    # recurrent layers (fused engine: the hand-derived BPTT kernels)
    SuiteEntry("rnn_layer", "layer", _layer("rnn"), "nn.RNN, T=3, maybe bidirectional/lengths"),
    SuiteEntry("gru_layer", "layer", _layer("gru"), "nn.GRU, T=3, either reset"),
    SuiteEntry("lstm_layer", "layer", _layer("lstm"), "nn.LSTM, T=3, peephole/coupled"),
)

BY_NAME: dict[str, SuiteEntry] = {entry.name: entry for entry in SUITE}
assert len(BY_NAME) == len(SUITE), "suite names must be unique"


# ----------------------------------------------------------------------------- running
def _output_scale(outputs: Sequence[Tensor]) -> float:
    """max(1, largest finite |output entry|): the scale of the round-off in f."""
    scale = 1.0
    for out in outputs:
        values = out.numpy().astype(np.float64)  # an explicit host copy from a device
        finite = values[np.isfinite(values)]
        if finite.size:
            scale = max(scale, float(np.abs(finite).max()))
    return scale


def example_rng(seed: int, name: str, k: int) -> np.random.Generator:
    """The generator of example ``k`` of entry ``name``: independent of the other entries,
    so ``--ops`` reproduces exactly the examples of a full run with the same seed."""
    return np.random.default_rng([seed, zlib.crc32(name.encode()), k])


def check_problem(problem: Problem, device: str = "cpu") -> Any:
    """Run the float64 full-mode check of one problem on ``device`` (inputs and module
    parameters are copied there; host constants such as masks and targets are copied by the
    ops themselves); returns the GradcheckReport."""
    device = normalize_device(device)
    inputs = [_leaf(x._data) if isinstance(x, Tensor) and x.requires_grad else x
              for x in problem.inputs]
    if device != "cpu":
        inputs = [Tensor(x._data, requires_grad=True, device=device)
                  if isinstance(x, Tensor) and x.requires_grad else x for x in inputs]
        for _, p in problem.params:
            p.data = to_device(p._data, device)
    n_in = len(inputs)
    args = inputs + [p for _, p in problem.params]
    diff = [k for k, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
    labels = {k: f"input {k}" for k in range(n_in)}
    labels.update({n_in + j: f"parameter {name!r}" for j, (name, _) in
                   enumerate(problem.params)})

    def fn(*a: Any) -> Any:
        return problem.fn(*a[:n_in])

    with no_grad():
        scale = _output_scale(flatten_outputs(fn(*args)))
    return check_leaves(fn, args, diff, labels, eps=EPS, atol=ATOL * scale, rtol=RTOL,
                        mode="full", raise_exception=False)


def run_entry(entry: SuiteEntry, examples: int, seed: int = 0,
              device: str = "cpu") -> EntryResult:
    """Check ``examples`` random problems of ``entry`` on ``device``; stops at the first
    failure. The examples are the same on every device (drawn on the host)."""
    result = EntryResult(entry.name, entry.group)
    start = time.perf_counter()
    for k in range(examples):
        result.examples += 1
        try:
            report = check_problem(entry.sample(example_rng(seed, entry.name, k)), device)
        except Exception as exc:  # a backward that raises is a failed check, not a crash
            result.passed = False
            result.failure = f"example {k}: {type(exc).__name__}: {exc}"
            break
        result.entries += report.entries
        result.max_abs_error = max(result.max_abs_error, report.max_abs_error)
        result.max_rel_error = max(result.max_rel_error, report.max_rel_error)
        if not report.passed:
            result.passed = False
            result.failure = (
                f"example {k}: d output {report.output_index}{list(report.output_element)}"
                f" / d {report.label}{list(report.element)}: analytic {report.analytic:.10g}"
                f", numeric {report.numeric:.10g}")
            break
    result.seconds = time.perf_counter() - start
    return result


def run_suite(names: Sequence[str] | None = None, examples: int = 5, seed: int = 0,
              progress: Callable[[EntryResult], None] | None = None,
              device: str = "cpu") -> list[EntryResult]:
    """Run the entries named in ``names`` (all when None), in suite order, on ``device``."""
    entries = SUITE if names is None else [BY_NAME[name] for name in names]
    results = []
    for entry in entries:
        res = run_entry(entry, examples, seed, device)
        results.append(res)
        if progress is not None:
            progress(res)
    return results


def format_table(results: Sequence[EntryResult]) -> str:
    """A fixed-width table: op, group, examples, max abs error, max rel error, pass."""
    header = f"{'op':<22}{'group':<7}{'examples':>9}{'max abs err':>13}{'max rel err':>13}" \
             f"  pass"
    lines = [header, "-" * len(header)]
    for r in results:
        lines.append(f"{r.name:<22}{r.group:<7}{r.examples:>9}{r.max_abs_error:>13.2e}"
                     f"{r.max_rel_error:>13.2e}  {'ok' if r.passed else 'FAIL'}")
    return "\n".join(lines)

