"""A registry of every public differentiable op, for the per-op test suites.

Each :class:`OpInfo` names one way of calling an op on Tensors, a NumPy reference for its
forward pass, and a hypothesis strategy of :class:`Case` objects: float64 input arrays (the
differentiable inputs, in order) and the constants the call needs (axis, mask, index,
targets, ...). The strategies encode the op's domain: inputs of ``log``/``sqrt`` are positive
and away from 0, divisors are away from 0, inputs of ``relu``/``abs``/``clip``/``maximum``
are kept away from kinks and ties, ``tanh``/``sigmoid`` get bounded pre-activations. Shapes
cover broadcasting (rank promotion, size-1 dimensions), 0-d tensors and, where they mean
something, size-0 dimensions.

The suites built on it:

* ``test_ops_gradients.py``: ``tr.gradcheck`` (float64, central differences) per entry, and a
  meta-test that every :class:`~tinygrad_rnn.ops.base.Function` has an entry.
* ``test_ops_contract.py``: shapes, dtypes (float32 too), zero upstream, no mutation, no
  aliasing, linearity and determinism of the VJP, non-contiguous inputs.
* ``test_ops_forward.py``: forward values against the NumPy references, and the
  torch-signature ops against torch when it is installed.

``functions`` lists the primitives whose backward an entry exercises; the gradient test
asserts they are in the recorded graph of every example, so the meta-test's coverage claim
is checked, not just declared.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tinygrad_rnn as tr
from tinygrad_rnn import functional as F
from tinygrad_rnn import ops
from tinygrad_rnn.nn import functional as NF
from tinygrad_rnn.ops.base import Function
from tinygrad_rnn.ops.losses import BinaryCrossEntropy, takes_plain_path
from tinygrad_rnn.ops import Cast, Copy, ToDevice
from tinygrad_rnn.tensor import Tensor

__all__ = [
    "Case", "OpInfo", "REGISTRY", "BY_NAME", "graph_functions", "exported_functions",
    "cast_case", "as_tuple", "run_forward", "run_vjp", "random_upstream",
]

# The ``astype`` entry casts up to the platform's extended precision (80-bit on x86-64) and
# back: both casts are exact, so finite differences of the float64 result are meaningful.
# float64 -> float32 is tested against float64 in test_ops_contract.py.
WIDE_FLOAT = np.dtype(np.longdouble)
HAS_WIDE_FLOAT = np.finfo(WIDE_FLOAT).eps < np.finfo(np.float64).eps

GRID = 0.25  # kinks and ties are placed on multiples of GRID; inputs stay >= 0.05 off it


@dataclass(eq=False)
class Case:
    """One example for an op: the differentiable inputs and the constants of the call."""

    inputs: tuple
    consts: dict = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class OpInfo:
    """How to call one op, its NumPy reference and the inputs it is tested on.

    Attributes
    ----------
    name : str
        Unique; used in test names.
    fn : callable
        ``fn(*tensors, **case.consts)`` -> Tensor or tuple of Tensors.
    ref : callable
        ``ref(*arrays, **case.consts)`` -> ndarray or tuple of ndarrays (the NumPy forward).
    cases : SearchStrategy[Case]
        Float64 inputs inside the op's domain.
    functions : tuple of Function subclasses
        Primitives whose backward this entry exercises (all appear in every example's graph).
    examples : tuple of Case
        Regression examples, run as ``@example`` by every suite.
    frozen : callable, optional
        ``frozen(case)`` -> one boolean mask (or None) per input: elements whose gradient is
        defined to be 0 rather than the derivative (embedding's ``padding_idx`` rows, as in
        torch). The gradient test asserts those are exactly 0 and checks the rest.
    """

    name: str
    fn: Callable[..., Any]
    ref: Callable[..., Any]
    cases: Any
    functions: tuple
    examples: tuple = ()
    frozen: Callable[[Case], tuple] | None = None


# ------------------------------------------------------------------------------ helpers
def as_tuple(out: Any) -> tuple:
    """An op's result as a tuple of outputs (split returns several)."""
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def graph_functions(outputs: Sequence[Tensor]) -> set:
    """The Function classes of every node recorded in the graph behind ``outputs``."""
    found: set = set()
    seen: set = set()
    stack = [t.grad_fn for t in outputs if t.grad_fn is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        found.add(node.fn)
        stack.extend(t.grad_fn for t in tr.engine.node_inputs(node)
                     if t.grad_fn is not None)
    return found


def exported_functions() -> set:
    """Every Function subclass exported by ``tinygrad_rnn.ops``."""
    found = set()
    candidates = [getattr(ops, name) for name in ops.__all__]
    for obj in candidates:
        if isinstance(obj, type) and issubclass(obj, Function) and obj is not Function:
            found.add(obj)
    return found


def cast_case(case: Case, dtype: Any) -> Case:
    """The case with its float inputs and float array constants (class weights,
    pos_weight) converted to ``dtype``, and its Python float constants rounded to it (so a
    float64 run of the result computes on exactly the values a ``dtype`` run sees)."""
    inputs = tuple(np.asarray(a, dtype=dtype) for a in case.inputs)
    consts = {}
    for key, value in case.consts.items():
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            value = value.astype(dtype)
        elif isinstance(value, float):
            value = float(np.asarray(value, dtype=dtype))
        consts[key] = value
    return Case(inputs, consts)


def _leaf(array: np.ndarray) -> Tensor:
    """A leaf whose data is exactly ``array`` (no copy, so its layout is kept)."""
    leaf = Tensor(np.zeros((), dtype=array.dtype), requires_grad=True)
    leaf.data = array  # public setter: counts as a write, harmless on a fresh leaf
    return leaf


def run_forward(op: OpInfo, case: Case, layouts: Any = None,
                device: str | None = None) -> tuple:
    """(leaves, outputs) of one forward pass, leaves built from ``case.inputs`` (or from
    ``layouts``, views with the same values) on ``device`` (default: the CPU). The constants
    stay as the case holds them (host arrays), as a user would pass them."""
    arrays = case.inputs if layouts is None else layouts
    leaves = [_leaf(a) if layouts is not None else Tensor(a, requires_grad=True, device=device)
              for a in arrays]
    outputs = as_tuple(op.fn(*leaves, **case.consts))
    return leaves, outputs


def run_vjp(op: OpInfo, case: Case, upstream: list, layouts: Any = None,
            device: str | None = None) -> tuple:
    """(output arrays, input gradients) for upstream gradients ``upstream`` (one per
    output), from a fresh graph on ``device`` (default: the CPU). Several outputs are
    backpropagated one after another (the leaves accumulate), so only the op's own backward
    is involved."""
    leaves, outputs = run_forward(op, case, layouts, device)
    for k, (out, g) in enumerate(zip(outputs, upstream)):
        out.backward(g, retain_graph=k < len(outputs) - 1)
    grads = []
    for k, leaf in enumerate(leaves):
        assert leaf.grad is not None, f"{op.name}: input {k} received no gradient"
        grads.append(leaf.grad.array)  # the raw array (.grad is a Tensor)
    return [o.array for o in outputs], grads


def random_upstream(op: OpInfo, case: Case, seed: int) -> list:
    """Random standard-normal upstream gradients, one per output, in the output dtype
    (always ndarrays, 0-d ones too, so aliasing checks see the caller's own array)."""
    with tr.no_grad():
        outputs = as_tuple(op.fn(*[Tensor(a) for a in case.inputs], **case.consts))
    rng = np.random.default_rng(seed)
    return [np.array(rng.standard_normal(o.shape), dtype=o.dtype) for o in outputs]


def _floats(lo: float, hi: float) -> st.SearchStrategy:
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False, allow_subnormal=False)


def reals(shape: tuple, lo: float = -3.0, hi: float = 3.0) -> st.SearchStrategy:
    """Float64 arrays with entries in [lo, hi]."""
    return hnp.arrays(np.float64, shape, elements=_floats(lo, hi))


def positives(shape: tuple, lo: float = 0.2, hi: float = 4.0) -> st.SearchStrategy:
    """Float64 arrays with entries in [lo, hi], lo > 0 (log, sqrt, divisors, weights)."""
    return hnp.arrays(np.float64, shape, elements=_floats(lo, hi))


def nonzero(shape: tuple, lo: float = 0.5, hi: float = 3.0) -> st.SearchStrategy:
    """Float64 arrays with lo <= |entry| <= hi, either sign (divisors)."""
    return hnp.arrays(np.float64, shape, elements=_floats(-hi, -lo) | _floats(lo, hi))


def _off_grid_value(k: int, u: float) -> float:
    return GRID * k + u


def off_grid(shape: tuple) -> st.SearchStrategy:
    """Entries at distance >= 0.05 from every multiple of GRID (0 included), so relu, abs,
    clip with grid bounds and maximum against on-grid values never sit on a kink or tie."""
    value = st.builds(_off_grid_value, st.integers(-12, 11), _floats(0.05, 0.2))
    return hnp.arrays(np.float64, shape, elements=value)


def on_grid(shape: tuple) -> st.SearchStrategy:
    """Entries that are multiples of GRID in [-3, 3]."""
    return hnp.arrays(np.float64, shape, elements=st.integers(-12, 12).map(lambda k: GRID * k))


@st.composite
def distinct(draw: Any, shape: tuple) -> np.ndarray:
    """Entries pairwise at least 0.06 apart (no ties for max): a random ranking of the
    elements, spaced 0.1 apart, plus jitter in [0, 0.04]."""
    size = math.prod(shape)
    ranks = np.array(draw(st.permutations(range(size))), dtype=np.float64)
    jitter = draw(hnp.arrays(np.float64, (size,), elements=_floats(0.0, 0.04)))
    return ((ranks - size / 2) * 0.1 + jitter).reshape(shape)


def shapes(min_dims: int = 0, max_dims: int = 3, min_side: int = 0,
           max_side: int = 3) -> st.SearchStrategy:
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                            max_side=max_side)


def broadcastable(num_shapes: int) -> st.SearchStrategy:
    """``num_shapes`` mutually broadcastable shapes (rank promotion, size-1 and size-0
    dimensions, 0-d)."""
    return hnp.mutually_broadcastable_shapes(num_shapes=num_shapes, min_dims=0, max_dims=3,
                                             min_side=0, max_side=3)


@st.composite
def broadcasting_to(draw: Any, shape: tuple) -> tuple:
    """A shape that broadcasts to ``shape`` (a suffix of it, some sides replaced by 1)."""
    k = draw(st.integers(0, len(shape)))
    tail = shape[len(shape) - k:]
    return tuple(draw(st.sampled_from([1, d])) for d in tail)


@st.composite
def _axes(draw: Any, ndim: int) -> Any:
    """An axis argument: None, an int, or a tuple of distinct axes (negatives allowed)."""
    if ndim == 0:
        return draw(st.sampled_from([None, 0, -1, (0,), ()]))
    kind = draw(st.sampled_from(["none", "int", "tuple"]))
    if kind == "none":
        return None
    if kind == "int":
        return draw(st.integers(-ndim, ndim - 1))
    chosen = draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim))
    return tuple(ax - ndim if draw(st.booleans()) else ax for ax in chosen)


def _norm_axes(axis: Any, ndim: int) -> tuple:
    """The reference's own axis normalisation (independent of the op's)."""
    if axis is None:
        return tuple(range(ndim))
    if ndim == 0:
        return ()
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(sorted(ax % ndim for ax in axes))


REDUCTIONS = st.sampled_from(["none", "mean", "sum"])


# ------------------------------------------------------------------------------ elementwise
@st.composite
def _binary_cases(draw: Any, values_a: Callable, values_b: Callable,
                  swap: bool = False) -> Case:
    bshapes = draw(broadcastable(2))
    shape_a, shape_b = bshapes.input_shapes
    a = draw(values_a(shape_a))
    b = draw(values_b(shape_b))
    if swap and draw(st.booleans()):
        a, b = b, a
    return Case((a, b))


@st.composite
def _unary_cases(draw: Any, values: Callable) -> Case:
    return Case((draw(values(draw(shapes()))),))


@st.composite
def _scalar_cases(draw: Any, values: Callable) -> Case:
    x = draw(values(draw(shapes())))
    return Case((x,), {"c": draw(_floats(-3.0, 3.0))})


def _pow_input(exponent: float) -> Callable:
    if float(exponent).is_integer() and exponent >= 0:
        return reals  # x ** n for n = 0, 1, 2, ... is smooth everywhere, 0 included
    return lambda shape: positives(shape, 0.3, 3.0)


@st.composite
def _pow_cases(draw: Any) -> Case:
    exponent = draw(st.sampled_from([0.0, 1.0, 2.0, 3.0, 0.5, 1.5, 2.5, -0.5, -1.0, -2.0]))
    x = draw(_pow_input(exponent)(draw(shapes())))
    return Case((x,), {"exponent": exponent, "method": draw(st.booleans())})


def _pow(x: Tensor, exponent: float, method: bool) -> Tensor:
    return x.pow(exponent) if method else x**exponent


@st.composite
def _clip_cases(draw: Any) -> Case:
    x = draw(off_grid(draw(shapes())))
    bound = st.integers(-8, 8).map(lambda k: GRID * k)
    lo, hi = draw(st.none() | bound), draw(st.none() | bound)
    if lo is None and hi is None:
        lo = draw(bound)
    return Case((x,), {"lo": lo, "hi": hi})


def _ref_clip(x: np.ndarray, lo: float | None, hi: float | None) -> np.ndarray:
    y = x if lo is None else np.maximum(x, lo)
    return y if hi is None else np.minimum(y, hi)


# ------------------------------------------------------------------------------ activations
@st.composite
def _softmax_cases(draw: Any) -> Case:
    shape = draw(shapes(max_side=4))
    ndim = len(shape)
    axis = draw(st.integers(-ndim, ndim - 1)) if ndim else draw(st.sampled_from([0, -1]))
    mask = None
    if draw(st.booleans()):
        mask = draw(hnp.arrays(np.bool_, draw(broadcasting_to(shape))))
    x = draw(reals(shape, -5.0, 5.0))
    return Case((x,), {"axis": axis, "mask": mask})


def _valid(x: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    if mask is None:
        return np.ones(x.shape, dtype=bool)
    return np.broadcast_to(mask, x.shape)


def _ref_softmax(x: np.ndarray, axis: int, mask: np.ndarray | None) -> np.ndarray:
    # inputs are bounded, so the plain (unshifted) formula is exact enough and independent
    # of the op's max-shifted form; a fully masked row is all zeros (documented)
    axis = axis if x.ndim else None
    e = np.where(_valid(x, mask), np.exp(x), 0.0)
    s = np.sum(e, axis=axis, keepdims=True)
    return e / np.where(s > 0, s, 1.0)


def _log_softmax(x: Tensor, axis: int, mask: np.ndarray | None) -> Tensor:
    y = F.log_softmax(x, axis=axis, mask=mask)
    if mask is None:
        return y
    # masked entries are -inf, where finite differences are undefined (inf - inf); the
    # check sees them as 0 through where. That their upstream gradient is ignored is tested
    # explicitly in test_ops_forward.py.
    return tr.where(np.broadcast_to(mask, x.shape), y, 0.0)


def _ref_log_softmax(x: np.ndarray, axis: int, mask: np.ndarray | None) -> np.ndarray:
    valid = _valid(x, mask)
    ax = axis if x.ndim else None
    s = np.sum(np.where(valid, np.exp(x), 0.0), axis=ax, keepdims=True)
    y = x - np.log(np.where(s > 0, s, 1.0))
    return np.where(valid, y, 0.0)


# ------------------------------------------------------------------------------ linear algebra
@st.composite
def _matmul_cases(draw: Any) -> Case:
    side = st.integers(0, 3)
    n, k, m = draw(side), draw(side), draw(side)
    kind = draw(st.sampled_from(["vv", "vm", "mv", "mm", "batched", "batched_v", "v_batched"]))
    if kind in ("batched", "batched_v", "v_batched"):
        batch_a, batch_b = draw(hnp.mutually_broadcastable_shapes(
            num_shapes=2, min_dims=0, max_dims=2, min_side=0, max_side=3)).input_shapes
    else:
        batch_a = batch_b = ()
    shape_a = {"vv": (k,), "vm": (k,), "v_batched": (k,)}.get(kind, batch_a + (n, k))
    shape_b = {"vv": (k,), "mv": (k,), "batched_v": (k,)}.get(kind, batch_b + (k, m))
    return Case((draw(reals(shape_a, -2, 2)), draw(reals(shape_b, -2, 2))))


@st.composite
def _linear_cases(draw: Any) -> Case:
    batch = draw(shapes(max_dims=2))
    d_in, d_out = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    x = draw(reals(batch + (d_in,), -2, 2))
    w = draw(reals((d_out, d_in), -2, 2))
    if draw(st.booleans()):
        return Case((x, w, draw(reals((d_out,)))))
    return Case((x, w))


def _linear(x: Tensor, w: Tensor, b: Tensor | None = None) -> Tensor:
    return F.linear(x, w, b)


def _ref_linear(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    y = np.matmul(x, w.T)
    return y if b is None else y + b


# ------------------------------------------------------------------------------ reductions
@st.composite
def _reduce_cases(draw: Any, max_like: bool = False) -> Case:
    shape = draw(shapes())
    axis = draw(_axes(len(shape)))
    if max_like:  # max over an empty axis is an error; keep reduced sides >= 1
        reduced = _norm_axes(axis, len(shape))
        shape = tuple(max(s, 1) if i in reduced else s for i, s in enumerate(shape))
        x = draw(distinct(shape))
    else:
        x = draw(reals(shape))
    return Case((x,), {"axis": axis, "keepdims": draw(st.booleans())})


@st.composite
def _norm_cases(draw: Any) -> Case:
    """Entries away from 0 (|x| in [0.3, 3], random signs), so |x|^(p-1) is smooth."""
    shape = draw(shapes(min_side=1))
    magnitude = draw(positives(shape, lo=0.3, hi=3.0))
    signs = draw(hnp.arrays(np.float64, shape, elements=st.sampled_from([-1.0, 1.0])))
    return Case((magnitude * signs,), {"p": draw(st.sampled_from([2.0, 3.0, 1.5, "fro"])),
                                       "dim": draw(_axes(len(shape))),
                                       "keepdim": draw(st.booleans())})


def _ref_norm(x: np.ndarray, p: Any, dim: Any, keepdim: bool) -> np.ndarray:
    q = 2.0 if p == "fro" else p
    axes = _norm_axes(dim, x.ndim)
    return np.sum(np.abs(x) ** q, axis=axes, keepdims=keepdim) ** (1.0 / q)


def _ref_mean(x: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
    axes = _norm_axes(axis, x.ndim)
    total = np.sum(x, axis=axes, keepdims=keepdims)
    n = math.prod(x.shape[ax] for ax in axes)
    return total / n if n else np.full(np.shape(total), np.nan)


def _ref_reduce(name: str) -> Callable:
    fn = {"sum": np.sum, "max": np.max, "min": np.min}[name]

    def ref(x: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
        return fn(x, axis=_norm_axes(axis, x.ndim), keepdims=keepdims)

    return ref


# ------------------------------------------------------------------------------ shape ops
@st.composite
def _reshape_cases(draw: Any) -> Case:
    shape = draw(shapes())
    x = draw(reals(shape))
    target: list = []
    for dim in draw(st.permutations([d for d in shape if d != 1])):
        if target and draw(st.booleans()):
            target[-1] *= dim
        else:
            target.append(dim)
    for _ in range(draw(st.integers(0, 2))):
        target.insert(draw(st.integers(0, len(target))), 1)
    if target and x.size and draw(st.booleans()):
        target[draw(st.integers(0, len(target) - 1))] = -1
    return Case((x,), {"shape": tuple(target), "as_args": draw(st.booleans())})


def _reshape(x: Tensor, shape: tuple, as_args: bool) -> Tensor:
    return x.reshape(*shape) if as_args and shape else x.reshape(shape)


@st.composite
def _transpose_cases(draw: Any) -> Case:
    shape = draw(shapes())
    ndim = len(shape)
    how = draw(st.sampled_from(["T", "transpose", "permute", "swapaxes"]))
    axes = tuple(draw(st.permutations(range(ndim))))
    if draw(st.booleans()):
        axes = tuple(a - ndim for a in axes)
    if how == "swapaxes":
        axes = (draw(st.integers(0, max(ndim - 1, 0))), draw(st.integers(0, max(ndim - 1, 0))))
        if ndim == 0:
            how = "T"
    return Case((draw(reals(shape)),), {"how": how, "axes": axes})


def _transpose(x: Tensor, how: str, axes: tuple) -> Tensor:
    if how == "T":
        return x.T
    if how == "transpose":
        return x.transpose(axes)
    if how == "permute":
        return x.permute(*axes)
    return x.swapaxes(*axes)


def _ref_transpose(x: np.ndarray, how: str, axes: tuple) -> np.ndarray:
    if how == "T":
        return x.T
    if how == "swapaxes":
        return np.swapaxes(x, *axes)
    return np.transpose(x, axes)


@st.composite
def _broadcast_cases(draw: Any) -> Case:
    shape = draw(shapes())
    lead = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
    target = lead + tuple(draw(st.integers(0, 3)) if d == 1 else d for d in shape)
    return Case((draw(reals(shape)),), {"shape": target, "expand": draw(st.booleans())})


def _broadcast_to(x: Tensor, shape: tuple, expand: bool) -> Tensor:
    return x.expand(shape) if expand else x.broadcast_to(shape)


@st.composite
def _basic_index_cases(draw: Any) -> Case:
    shape = draw(shapes())
    index = draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    return Case((draw(reals(shape)),), {"index": index})


@st.composite
def _advanced_index_cases(draw: Any) -> Case:
    shape = draw(shapes(min_dims=1, min_side=1))
    x = draw(reals(shape))
    kind = draw(st.sampled_from(["first", "second", "pair", "bool", "list"]))
    idx_shape = draw(shapes(max_dims=2, max_side=4))

    def ids(n: int) -> np.ndarray:  # small ranges, so repeated indices are common
        return draw(hnp.arrays(np.int64, idx_shape, elements=st.integers(-n, n - 1)))

    if kind == "second" and len(shape) >= 2:
        index: Any = (slice(None), ids(shape[1]))
    elif kind == "pair" and len(shape) >= 2:
        index = (ids(shape[0]), ids(shape[1]))
    elif kind == "bool":
        index = draw(hnp.arrays(np.bool_, shape[:draw(st.integers(1, len(shape)))]))
    elif kind == "list":
        index = draw(st.lists(st.integers(-shape[0], shape[0] - 1), max_size=5))
    else:
        index = ids(shape[0])
    return Case((x,), {"index": index})


def _getitem(x: Tensor, index: Any) -> Tensor:
    return x[index]


@st.composite
def _write_cases(draw: Any) -> Case:
    shape = draw(shapes(min_dims=1))
    index = draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    x = draw(reals(shape))
    return Case((x, draw(reals(np.empty(shape)[index].shape))), {"index": index})


def _write_through_view(x: Tensor, v: Tensor, index: Any) -> Tensor:
    """A recorded write (WriteRegion) into a tensor in a graph, through a view made before
    the write, and a view made before the write used after it (ViewOf)."""
    b = x * 1.0
    seen = b.T  # a view of b from before the write
    b.T.T[index] = v  # written through a view: recorded in b
    return seen.T * 1.0


def _ref_write(x: np.ndarray, v: np.ndarray, index: Any) -> np.ndarray:
    out = x.copy()
    out[index] = v
    return out


def _ref_getitem(x: np.ndarray, index: Any) -> np.ndarray:
    if isinstance(index, list):
        index = np.asarray(index, dtype=np.intp)
    return np.asarray(x[index])


@st.composite
def _cat_cases(draw: Any) -> Case:
    base = draw(shapes(min_dims=1))
    ndim = len(base)
    axis = draw(st.integers(-ndim, ndim - 1))
    ax = axis % ndim
    count = draw(st.integers(1, 3))
    pieces = tuple(
        draw(reals(base[:ax] + (draw(st.integers(0, 3)),) + base[ax + 1:]))
        for _ in range(count)
    )
    return Case(pieces, {"axis": axis})


@st.composite
def _stack_cases(draw: Any) -> Case:
    shape = draw(shapes())
    ndim = len(shape) + 1
    axis = draw(st.integers(-ndim, ndim - 1))
    count = draw(st.integers(1, 3))
    return Case(tuple(draw(reals(shape)) for _ in range(count)), {"axis": axis})


@st.composite
def _split_cases(draw: Any) -> Case:
    shape = draw(shapes(min_dims=1, max_side=4))
    ndim = len(shape)
    axis = draw(st.integers(-ndim, ndim - 1))
    n = shape[axis]
    if draw(st.booleans()):
        sizes: Any = draw(st.integers(1, n + 1))
    else:
        cuts = sorted(draw(st.lists(st.integers(0, n), max_size=3)))
        sizes = [b - a for a, b in zip([0] + cuts, cuts + [n])]
    return Case((draw(reals(shape)),), {"sizes": sizes, "axis": axis})


def _ref_split(x: np.ndarray, sizes: Any, axis: int) -> tuple:
    n = x.shape[axis]
    if isinstance(sizes, int):
        sizes = [min(sizes, n - s) for s in range(0, n, sizes)] or [0]
    bounds = np.cumsum(sizes)[:-1]
    return tuple(np.split(x, bounds, axis=axis))


# ------------------------------------------------------------------------------ selection
@st.composite
def _where_cases(draw: Any) -> Case:
    cond_shape, shape_a, shape_b = draw(broadcastable(3)).input_shapes
    cond = draw(hnp.arrays(np.bool_, cond_shape))
    return Case((draw(reals(shape_a)), draw(reals(shape_b))), {"cond": cond})


@st.composite
def _masked_fill_cases(draw: Any) -> Case:
    shape = draw(shapes())
    mask = draw(hnp.arrays(np.bool_, draw(broadcasting_to(shape))))
    value = draw(_floats(-5.0, 5.0))
    return Case((draw(reals(shape)),), {"mask": mask, "value": value,
                                        "method": draw(st.booleans())})


def _masked_fill(x: Tensor, mask: np.ndarray, value: float, method: bool) -> Tensor:
    return x.masked_fill(mask, value) if method else F.masked_fill(x, mask, value)


@st.composite
def _embedding_cases(draw: Any) -> Case:
    rows, dim = draw(st.integers(1, 4)), draw(st.integers(0, 3))
    ids = draw(hnp.arrays(np.int64, draw(shapes(max_dims=2)),
                          elements=st.integers(0, rows - 1)))
    padding_idx = draw(st.none() | st.integers(-rows, rows - 1))
    return Case((draw(reals((rows, dim))),), {"ids": ids, "padding_idx": padding_idx})


def _embedding_frozen(case: Case) -> tuple:
    weight = case.inputs[0]
    pad = case.consts["padding_idx"]
    if pad is None:
        return (None,)
    frozen = np.zeros(weight.shape, dtype=bool)
    frozen[pad % weight.shape[0]] = True
    return (frozen,)


@st.composite
def _dropout_cases(draw: Any) -> Case:
    x = draw(reals(draw(shapes())))
    return Case((x,), {"p": draw(st.sampled_from([0.1, 0.3, 0.5, 0.8])),
                       "seed": draw(st.integers(0, 2**16))})


def _dropout(x: Tensor, p: float, seed: int) -> Tensor:
    # an int generator is a fresh Generator(seed) on every call: the same mask every time
    return F.dropout(x, p=p, training=True, generator=seed)


def _ref_dropout(x: np.ndarray, p: float, seed: int) -> np.ndarray:
    keep = np.random.default_rng(seed).random(x.shape) >= p
    return np.where(keep, x / (1.0 - p), 0.0)


# ------------------------------------------------------------------------------ losses
@st.composite
def _class_layout(draw: Any) -> tuple:
    """(input shape, target shape): (C,) with (); (N, C) with (N,); (N, C, d1[, d2]) with
    (N, d1[, d2]). N and the spatial sides may be 0."""
    num_classes = draw(st.integers(1, 4))
    layout = draw(st.sampled_from(["C", "NC", "NCd", "NCdd"]))
    if layout == "C":
        return (num_classes,), ()
    batch = draw(st.integers(0, 3))
    spatial = {"NC": (), "NCd": (draw(st.integers(0, 3)),),
               "NCdd": (draw(st.integers(0, 2)), draw(st.integers(1, 2)))}[layout]
    return (batch, num_classes) + spatial, (batch,) + spatial


@st.composite
def _class_targets(draw: Any, num_classes: int, target_shape: tuple) -> dict:
    """Class-id targets with an ignore_index (torch's default, another negative, or a class
    id) that some targets take, and optional class weights."""
    target = draw(hnp.arrays(np.int64, target_shape,
                             elements=st.integers(0, num_classes - 1)))
    ignore_index = draw(st.sampled_from([-100, -1]) | st.integers(0, num_classes - 1))
    ignored = draw(hnp.arrays(np.bool_, target_shape))
    target = np.where(ignored, ignore_index, target).astype(np.int64)
    weight = draw(st.none() | positives((num_classes,), 0.2, 2.0))
    return {"target": target, "weight": weight, "ignore_index": ignore_index,
            "reduction": draw(REDUCTIONS)}


def _smoothing() -> st.SearchStrategy:
    return st.just(0.0) | st.sampled_from([0.1, 1.0]) | _floats(0.0, 1.0)


@st.composite
def _cross_entropy_cases(draw: Any) -> Case:
    """Cases F.cross_entropy sends to the general op: some option in use (class weights,
    label smoothing or an ignored target); the others are the plain entry's."""
    x_shape, t_shape = draw(_class_layout())
    consts = draw(_class_targets(x_shape[0 if len(x_shape) == 1 else 1], t_shape))
    consts["label_smoothing"] = draw(_smoothing())
    assume(not takes_plain_path(consts["target"], consts["weight"], consts["ignore_index"],
                                consts["label_smoothing"]))
    return Case((draw(reals(x_shape, -4.0, 4.0)),), consts)


@st.composite
def _plain_cross_entropy_cases(draw: Any) -> Case:
    """The textbook loss: class ids in range, no weights, no smoothing, nothing ignored."""
    x_shape, t_shape = draw(_class_layout())
    num_classes = x_shape[0 if len(x_shape) == 1 else 1]
    target = draw(hnp.arrays(np.int64, t_shape, elements=st.integers(0, num_classes - 1)))
    return Case((draw(reals(x_shape, -4.0, 4.0)),),
                {"target": target, "reduction": draw(REDUCTIONS)})


def _cross_entropy(x: Tensor, *q: Tensor, **consts: Any) -> Tensor:
    target = q[0] if q else consts.pop("target")
    return F.cross_entropy(x, target, **consts)


@st.composite
def _soft_cross_entropy_cases(draw: Any) -> Case:
    x_shape, _ = draw(_class_layout())
    num_classes = x_shape[0 if len(x_shape) == 1 else 1]
    x = draw(reals(x_shape, -4.0, 4.0))
    q = draw(reals(x_shape, 0.0, 1.0))
    return Case((x, q), {"weight": draw(st.none() | positives((num_classes,), 0.2, 2.0)),
                         "reduction": draw(REDUCTIONS), "label_smoothing": draw(_smoothing())})


def _class_rows(x: np.ndarray) -> list:
    """[(target index, row of class scores)] for the class axis 1 (0 for 1-D input)."""
    if x.ndim == 1:
        return [((), x)]
    rows = []
    for idx in np.ndindex(x.shape[:1] + x.shape[2:]):
        rows.append((idx, x[(idx[0], slice(None)) + idx[1:]]))
    return rows


def _reduce_loss(losses: np.ndarray, reduction: str, denom: float) -> np.ndarray:
    if reduction == "none":
        return losses
    total = np.sum(losses)
    if reduction == "sum":
        return total
    if losses.size == 0:
        return np.asarray(np.nan)  # an empty batch: NaN, as in torch
    return np.asarray(total / denom if denom > 0 else 0.0)  # documented: all ignored -> 0


def _ref_log_probs(row: np.ndarray) -> np.ndarray:
    return row - np.log(np.sum(np.exp(row)))


def _ref_cross_entropy(x: np.ndarray, target: np.ndarray, weight: np.ndarray | None,
                       ignore_index: int, reduction: str,
                       label_smoothing: float) -> np.ndarray:
    num_classes = x.shape[0 if x.ndim == 1 else 1]
    w = np.ones(num_classes) if weight is None else weight
    eps = label_smoothing
    losses = np.zeros(target.shape)
    denom = 0.0
    for idx, row in _class_rows(x):
        t = int(target[idx])
        if t == ignore_index:
            continue
        logp = _ref_log_probs(row)
        losses[idx] = -(1 - eps) * w[t] * logp[t] - eps / num_classes * np.sum(w * logp)
        denom += w[t]
    return _reduce_loss(losses, reduction, denom)


def _ref_plain_cross_entropy(x: np.ndarray, target: np.ndarray,
                             reduction: str) -> np.ndarray:
    return _ref_cross_entropy(x, target, None, -100, reduction, 0.0)


def _ref_soft_cross_entropy(x: np.ndarray, q: np.ndarray, weight: np.ndarray | None,
                            reduction: str, label_smoothing: float) -> np.ndarray:
    num_classes = x.shape[0 if x.ndim == 1 else 1]
    w = np.ones(num_classes) if weight is None else weight
    q_rows = dict(_class_rows(q))
    losses = np.zeros(x.shape[:1] + x.shape[2:] if x.ndim > 1 else ())
    for idx, row in _class_rows(x):
        q_mixed = (1 - label_smoothing) * q_rows[idx] + label_smoothing / num_classes
        losses[idx] = -np.sum(w * q_mixed * _ref_log_probs(row))
    return _reduce_loss(losses, reduction, float(losses.size))


@st.composite
def _nll_cases(draw: Any) -> Case:
    x_shape, t_shape = draw(_class_layout())
    consts = draw(_class_targets(x_shape[0 if len(x_shape) == 1 else 1], t_shape))
    return Case((draw(reals(x_shape, -4.0, 1.0)),), consts)


def _ref_nll(x: np.ndarray, target: np.ndarray, weight: np.ndarray | None,
             ignore_index: int, reduction: str) -> np.ndarray:
    num_classes = x.shape[0 if x.ndim == 1 else 1]
    w = np.ones(num_classes) if weight is None else weight
    losses = np.zeros(target.shape)
    denom = 0.0
    for idx, row in _class_rows(x):
        t = int(target[idx])
        if t != ignore_index:
            losses[idx] = -w[t] * row[t]
            denom += w[t]
    return _reduce_loss(losses, reduction, denom)


@st.composite
def _mse_cases(draw: Any) -> Case:
    shape = draw(shapes())
    return Case((draw(reals(shape)), draw(reals(shape))), {"reduction": draw(REDUCTIONS)})


def _ref_mse(a: np.ndarray, b: np.ndarray, reduction: str) -> np.ndarray:
    sq = (a - b) ** 2
    if reduction == "none":
        return sq
    if reduction == "sum":
        return np.sum(sq)
    return np.asarray(np.sum(sq) / sq.size if sq.size else np.nan)


@st.composite
def _bce_cases(draw: Any) -> Case:
    shape = draw(shapes())
    x = draw(reals(shape, -6.0, 6.0))
    t = draw(reals(shape, 0.0, 1.0))
    weight = draw(st.none() | positives(draw(broadcasting_to(shape)), 0.2, 3.0))
    pos_weight = draw(st.none() | positives(draw(broadcasting_to(shape)), 0.2, 3.0))
    return Case((x, t), {"weight": weight, "pos_weight": pos_weight,
                         "reduction": draw(REDUCTIONS)})


def _ref_bce(x: np.ndarray, t: np.ndarray, weight: np.ndarray | None,
             pos_weight: np.ndarray | None, reduction: str) -> np.ndarray:
    log_s = -np.log1p(np.exp(-x))        # log sigma(x); |x| <= 6, no overflow
    log_1ms = -np.log1p(np.exp(x))       # log (1 - sigma(x))
    pw = 1.0 if pos_weight is None else pos_weight
    w = 1.0 if weight is None else weight
    loss = -w * (pw * t * log_s + (1 - t) * log_1ms)
    loss = np.broadcast_to(loss, x.shape)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.sum(loss)
    return np.asarray(np.sum(loss) / loss.size if loss.size else np.nan)


@st.composite
def _bce_probability_cases(draw: Any) -> Case:
    """Probabilities and targets kept inside (0, 1): the floors of torch's formula are
    kinks, and a central difference must not step outside [0, 1], which is an error."""
    shape = draw(shapes())
    x = draw(reals(shape, 0.05, 0.95))
    t = draw(reals(shape, 0.01, 0.99))
    weight = draw(st.none() | positives(draw(broadcasting_to(shape)), 0.2, 3.0))
    return Case((x, t), {"weight": weight, "reduction": draw(REDUCTIONS)})


def _ref_bce_probabilities(x: np.ndarray, t: np.ndarray, weight: np.ndarray | None,
                           reduction: str) -> np.ndarray:
    w = 1.0 if weight is None else weight
    loss = np.broadcast_to(-w * (t * np.log(x) + (1 - t) * np.log(1 - x)), x.shape)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.sum(loss)
    return np.asarray(np.sum(loss) / loss.size if loss.size else np.nan)


def _cast_round_trip(x: Tensor) -> Tensor:
    return x.astype(WIDE_FLOAT).astype(x.dtype)


def _device_round_trip(x: Tensor) -> Tensor:
    """x copied to another device and back (to the stand-in from the CPU, else to the CPU):
    two explicit copies, so the result is on x's device with x's values."""
    away = "standin" if x.device == "cpu" else "cpu"
    return x.to(away).to(x.device)


# ------------------------------------------------------------------------------ layer norm
@st.composite
def _layer_norm_cases(draw: Any) -> Case:
    """Rows of distinct entries (pairwise >= 0.06 apart, so the variance is bounded away
    from 0), normalized over 1 or 2 trailing axes, with or without weight and bias."""
    normalized = draw(shapes(min_dims=1, max_dims=2, min_side=1))
    lead = draw(shapes(min_dims=0, max_dims=2))
    rows = [draw(distinct(normalized)) * draw(_floats(1.0, 3.0))
            for _ in range(math.prod(lead))]
    x = np.stack(rows).reshape(lead + normalized) if rows else np.zeros(lead + normalized)
    has_weight, has_bias = draw(st.booleans()), draw(st.booleans())
    inputs = [x]
    if has_weight:
        inputs.append(draw(nonzero(normalized)))
    if has_bias:
        inputs.append(draw(reals(normalized)))
    return Case(tuple(inputs), {"normalized_ndim": len(normalized),
                                "eps": draw(st.sampled_from([1e-5, 0.1, 1.0])),
                                "has_weight": has_weight, "has_bias": has_bias})


def _layer_norm(x: Tensor, *params: Tensor, normalized_ndim: int, eps: float,
                has_weight: bool, has_bias: bool) -> Tensor:
    weight = params[0] if has_weight else None
    bias = params[-1] if has_bias else None
    return NF.layer_norm(x, x.shape[x.ndim - normalized_ndim:], weight, bias, eps)


def _ref_layer_norm(x: np.ndarray, *params: np.ndarray, normalized_ndim: int, eps: float,
                    has_weight: bool, has_bias: bool) -> np.ndarray:
    axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    if has_weight:
        y = y * params[0]
    if has_bias:
        y = y + params[-1]
    return y


# ------------------------------------------------------------------------------ conv1d
@st.composite
def _conv1d_cases(draw: Any) -> Case:
    """x (N, C_in, L), weight (C_out, C_in, K) and maybe a bias, with stride, dilation and
    (left, right) zero padding (unequal too, as a causal convolution pads) leaving at least
    one output step (docs/sequence_models.md, (CV1))."""
    n, c_in, c_out = draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    k, stride, dilation = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(
        st.integers(1, 2))
    left, right = draw(st.integers(0, 3)), draw(st.integers(0, 2))
    length = draw(st.integers(max(1, dilation * (k - 1) + 1 - left - right), 7))
    inputs = [draw(reals((n, c_in, length))), draw(reals((c_out, c_in, k)))]
    has_bias = draw(st.booleans())
    if has_bias:
        inputs.append(draw(reals((c_out,))))
    return Case(tuple(inputs), {"stride": stride, "padding": (left, right),
                                "dilation": dilation})


def _conv1d(x: Tensor, w: Tensor, *bias: Tensor, stride: int, padding: tuple,
            dilation: int) -> Tensor:
    return NF.conv1d_padded(x, w, bias[0] if bias else None, stride, padding[0], padding[1],
                            dilation)


def _ref_conv1d(x: np.ndarray, w: np.ndarray, *bias: np.ndarray, stride: int, padding: tuple,
                dilation: int) -> np.ndarray:
    """(CV1) as a plain sum over output steps and taps (the reference, not the GEMM)."""
    x_pad = np.pad(x, ((0, 0), (0, 0), padding))
    k = w.shape[2]
    out_len = (x_pad.shape[2] - dilation * (k - 1) - 1) // stride + 1
    y = np.zeros((x.shape[0], w.shape[0], out_len))
    for step in range(out_len):
        for tap in range(k):
            y[:, :, step] += x_pad[:, :, step * stride + tap * dilation] @ w[:, :, tap].T
    return y + (bias[0][:, None] if bias else 0.0)


# ------------------------------------------------------------------------------ the registry
def _unary(name: str, fn: Callable, ref: Callable, values: Callable, functions: tuple,
           examples: tuple = ()) -> OpInfo:
    return OpInfo(name, fn, ref, _unary_cases(values), functions, examples)


def _binary(name: str, fn: Callable, ref: Callable, values_a: Callable, values_b: Callable,
            functions: tuple, swap: bool = False) -> OpInfo:
    return OpInfo(name, fn, ref, _binary_cases(values_a, values_b, swap), functions)


REGISTRY: tuple[OpInfo, ...] = (
    # arithmetic, with broadcasting
    _binary("add", lambda a, b: a + b, np.add, reals, reals, (ops.Add,)),
    _binary("sub", lambda a, b: a - b, np.subtract, reals, reals, (ops.Sub,)),
    _binary("mul", lambda a, b: a * b, np.multiply, reals, reals, (ops.Mul,)),
    _binary("div", lambda a, b: a / b, np.divide, reals, nonzero, (ops.Div,)),
    _binary("maximum", F.maximum, np.maximum, off_grid, on_grid, (ops.Maximum,), swap=True),
    _binary("minimum", lambda a, b: a.minimum(b), np.minimum, off_grid, on_grid,
            (ops.Minimum,), swap=True),
    # a Python scalar on either side takes the tensor's dtype
    OpInfo("add_scalar", lambda x, c: x + c, lambda x, c: x + c, _scalar_cases(reals),
           (ops.Add,)),
    OpInfo("rsub_scalar", lambda x, c: c - x, lambda x, c: c - x, _scalar_cases(reals),
           (ops.Sub,)),
    OpInfo("rmul_scalar", lambda x, c: c * x, lambda x, c: c * x, _scalar_cases(reals),
           (ops.Mul,)),
    OpInfo("rdiv_scalar", lambda x, c: c / x, lambda x, c: c / x, _scalar_cases(nonzero),
           (ops.Div,)),
    _unary("neg", lambda x: -x, np.negative, reals, (ops.Neg,)),
    OpInfo("pow", _pow, lambda x, exponent, method: np.power(x, exponent), _pow_cases(),
           (ops.Pow,),
           examples=(
               # x ** 0 at x = 0: the gradient is 0, not 0 * 0 ** -1 = NaN (bug fixed)
               Case((np.array([0.0, -1.5, 2.0]),), {"exponent": 0.0, "method": False}),
           )),
    _unary("exp", F.exp, np.exp, reals, (ops.Exp,)),
    _unary("log", lambda x: x.log(), np.log, lambda s: positives(s, 0.2, 5.0), (ops.Log,)),
    _unary("sqrt", F.sqrt, np.sqrt, lambda s: positives(s, 0.2, 5.0), (ops.Sqrt,)),
    _unary("abs", lambda x: x.abs(), np.abs, off_grid, (ops.Abs,)),
    OpInfo("clip", lambda x, lo, hi: x.clip(lo, hi), _ref_clip, _clip_cases(), (ops.Clip,)),
    # activations
    _unary("relu", F.relu, lambda x: np.maximum(x, 0.0), off_grid, (ops.ReLU,)),
    _unary("tanh", lambda x: x.tanh(), np.tanh, reals, (ops.Tanh,)),
    _unary("sigmoid", F.sigmoid, lambda x: 1.0 / (1.0 + np.exp(-x)),
           lambda s: reals(s, -5.0, 5.0), (ops.Sigmoid,)),
    OpInfo("softmax", lambda x, axis, mask: F.softmax(x, axis=axis, mask=mask),
           _ref_softmax, _softmax_cases(), (ops.Softmax,),
           examples=(
               # a fully masked row: zeros and zero gradient, never NaN
               Case((np.array([[1.0, 2.0, -1.0], [0.5, 3.0, 2.0]]),),
                    {"axis": -1, "mask": np.array([[True, False, True], [False] * 3])}),
               # a 0-d tensor with axis -1 (a one-element row), as torch (bug fixed)
               Case((np.array(0.7),), {"axis": -1, "mask": None}),
           )),
    OpInfo("log_softmax", _log_softmax, _ref_log_softmax, _softmax_cases(),
           (ops.LogSoftmax,),
           examples=(
               Case((np.array([[1.0, 2.0, -1.0], [0.5, 3.0, 2.0]]),),
                    {"axis": 0, "mask": np.array([[True, False, False], [True, False, True]])}),
               Case((np.array(-1.3),), {"axis": 0, "mask": None}),  # 0-d (bug fixed)
               # an empty softmax axis: empty output, no log(0) warning (bug fixed)
               Case((np.zeros((2, 0)),), {"axis": 1, "mask": None}),
           )),
    # linear algebra
    OpInfo("matmul", lambda a, b: a @ b, np.matmul, _matmul_cases(), (ops.MatMul,),
           examples=(
               # vector @ vector: the upstream gradient is 0-d (backward crashed; fixed)
               Case((np.array([1.0, -2.0, 0.5]), np.array([0.3, 0.7, -1.1]))),
           )),
    OpInfo("linear", _linear, _ref_linear, _linear_cases(), (ops.MatMul, ops.Transpose)),
    # reductions
    OpInfo("sum", lambda x, axis, keepdims: x.sum(axis, keepdims), _ref_reduce("sum"),
           _reduce_cases(), (ops.Sum,)),
    OpInfo("mean", lambda x, axis, keepdims: x.mean(axis=axis, keepdims=keepdims), _ref_mean,
           _reduce_cases(), (ops.Mean,)),
    OpInfo("max", lambda x, axis, keepdims: x.max(axis=axis, keepdims=keepdims),
           _ref_reduce("max"),
           _reduce_cases(max_like=True), (ops.Max,)),
    OpInfo("min", lambda x, axis, keepdims: x.min(axis=axis, keepdims=keepdims),
           _ref_reduce("min"),
           _reduce_cases(max_like=True), (ops.Min,)),
    OpInfo("norm", lambda x, p, dim, keepdim: x.norm(p, dim, keepdim), _ref_norm,
           _norm_cases(), (ops.Norm,),
           examples=(
               # an all-zero row: the gradient there is 0, not 0/0 (as torch)
               Case((np.array([[0.0, 0.0], [3.0, -4.0]]),), {"p": 2.0, "dim": 1,
                                                           "keepdim": False}),
           )),
    # shapes
    OpInfo("reshape", _reshape, lambda x, shape, as_args: np.reshape(x, shape),
           _reshape_cases(), (ops.Reshape,)),
    OpInfo("transpose", _transpose, _ref_transpose, _transpose_cases(), (ops.Transpose,)),
    OpInfo("broadcast_to", _broadcast_to,
           lambda x, shape, expand: np.broadcast_to(x, shape), _broadcast_cases(),
           (ops.BroadcastTo,)),
    OpInfo("getitem_basic", _getitem, _ref_getitem, _basic_index_cases(), (ops.GetItem,)),
    OpInfo("getitem_advanced", _getitem, _ref_getitem, _advanced_index_cases(),
           (ops.GetItem,),
           examples=(
               Case((np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]),),
                    {"index": np.array([0, 2, 0, -3, 2])}),
               # an empty list selects nothing (it was read as a float index; fixed)
               Case((np.array([[1.0, 2.0], [3.0, 4.0]]),), {"index": []}),
           )),
    OpInfo("write_through_view", _write_through_view, _ref_write, _write_cases(),
           (ops.WriteRegion, ops.ViewOf),
           examples=(
               # an empty region: nothing written, the base keeps its gradient (bug fixed)
               Case((np.array([[1.0, 2.0]]), np.zeros((1, 0))),
                    {"index": (slice(None), slice(2, 2))}),
               Case((np.array([1.0, -2.0, 3.0]), np.array(5.0)), {"index": (1,)}),
           )),
    OpInfo("cat", lambda *xs, axis: tr.cat(xs, axis=axis),
           lambda *xs, axis: np.concatenate(xs, axis=axis), _cat_cases(), (ops.Concatenate,)),
    OpInfo("stack", lambda *xs, axis: tr.stack(xs, axis=axis),
           lambda *xs, axis: np.stack(xs, axis=axis), _stack_cases(), (ops.Stack,)),
    OpInfo("split", lambda x, sizes, axis: tr.split(x, sizes, axis=axis), _ref_split,
           _split_cases(), (ops.Split,)),
    # selection
    OpInfo("where", lambda a, b, cond: tr.where(cond, a, b),
           lambda a, b, cond: np.where(cond, a, b), _where_cases(), (ops.Where,)),
    OpInfo("masked_fill", _masked_fill,
           lambda x, mask, value, method: np.where(mask, value, x), _masked_fill_cases(),
           (ops.MaskedFill,)),
    OpInfo("embedding", lambda w, ids, padding_idx: F.embedding(ids, w, padding_idx),
           lambda w, ids, padding_idx: w[ids], _embedding_cases(), (ops.Embedding,),
           frozen=_embedding_frozen,
           examples=(
               # embedding size 0: backward's reshape(-1, 0) was ambiguous (fixed)
               Case((np.zeros((3, 0)),), {"ids": np.array([[0, 2], [1, 1]]), "padding_idx": None}),
               Case((np.array([[0.5, -1.0], [2.0, 0.0], [1.5, 3.0]]),),
                    {"ids": np.array([2, 0, 2, 1]), "padding_idx": -1}),
           )),
    OpInfo("dropout", _dropout, _ref_dropout, _dropout_cases(), (ops.Dropout,)),
    # normalization
    OpInfo("layer_norm", _layer_norm, _ref_layer_norm, _layer_norm_cases(), (ops.LayerNorm,),
           examples=(
               # one entry per row: x_hat is exactly 0, and so is the gradient of x
               Case((np.array([[1.5], [-2.0]]),), {"normalized_ndim": 1, "eps": 1e-5,
                                                   "has_weight": False, "has_bias": False}),
           )),
    # convolution
    OpInfo("conv1d", _conv1d, _ref_conv1d, _conv1d_cases(), (ops.Conv1d,),
           examples=(
               # one output step from a window that is all padding on the left
               Case((np.array([[[0.5, -1.0]]]), np.array([[[2.0, -0.5, 1.5]]])),
                    {"stride": 2, "padding": (2, 0), "dilation": 1}),
           )),
    # losses (torch.nn.functional signatures)
    OpInfo("cross_entropy", _cross_entropy, _ref_cross_entropy, _cross_entropy_cases(),
           (ops.CrossEntropy,),
           examples=(
               # every row ignored: the documented mean is 0.0 with zero gradient
               Case((np.array([[0.5, -1.0, 2.0], [1.0, 0.0, -2.0]]),),
                    {"target": np.array([-100, -100]), "weight": None, "ignore_index": -100,
                     "reduction": "mean", "label_smoothing": 0.2}),
           )),
    OpInfo("cross_entropy_plain", _cross_entropy, _ref_plain_cross_entropy,
           _plain_cross_entropy_cases(), (ops.PlainCrossEntropy,)),
    OpInfo("cross_entropy_probs", _cross_entropy, _ref_soft_cross_entropy,
           _soft_cross_entropy_cases(), (ops.SoftCrossEntropy,)),
    OpInfo("nll_loss", lambda x, **kw: F.nll_loss(x, **kw), _ref_nll, _nll_cases(),
           (ops.NLLLoss,)),
    OpInfo("mse_loss", lambda a, b, reduction: F.mse_loss(a, b, reduction=reduction), _ref_mse,
           _mse_cases(), (ops.MSELoss,)),
    OpInfo("bce_with_logits", lambda x, t, **kw: F.binary_cross_entropy_with_logits(x, t, **kw),
           _ref_bce, _bce_cases(), (ops.BCEWithLogits,)),
    OpInfo("bce", lambda x, t, **kw: F.binary_cross_entropy(x, t, **kw),
           _ref_bce_probabilities, _bce_probability_cases(), (BinaryCrossEntropy,),
           examples=(
               # confident predictions, weights broadcast along the last axis
               Case((np.array([[0.98, 0.03], [0.5, 0.3]]), np.array([[0.9, 0.1], [0.5, 0.2]])),
                    {"weight": np.array([2.0, 0.5]), "reduction": "mean"}),
           )),
    # the private Tensor-level ops
    _unary("clone", lambda x: x.clone(), np.copy, reals, (Copy,)),
    OpInfo("astype", _cast_round_trip, lambda x: x.copy(), _unary_cases(reals),
           (Cast,) if HAS_WIDE_FLOAT else ()),
    OpInfo("to_device", _device_round_trip, lambda x: x.copy(), _unary_cases(reals),
           (ToDevice,)),
)

BY_NAME: dict[str, OpInfo] = {op.name: op for op in REGISTRY}
assert len(BY_NAME) == len(REGISTRY), "registry names must be unique"
