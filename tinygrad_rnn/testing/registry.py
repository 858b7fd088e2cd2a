"""The op registry: every built-in differentiable op, how to call it, its NumPy reference and
the domain of its inputs. One list serves ``tinygrad-rnn gradcheck`` (:mod:`.suite`) and the
project's test suites (gradients, contract, forward values, devices).

(Long for a reason: one entry per op, each with its domain and reference, side by side.)

A domain is a sampler: ``sample(draw) -> Case`` makes every random choice through a
:class:`Draw`. Two sources of randomness drive the same samplers:

* :class:`NumpyDraw`, a seeded ``numpy.random.Generator``: the CLI's examples (no
  hypothesis needed, one seed reproduces a run, no shrinking to wait for);
* hypothesis, in the tests (``op.cases``, built by :func:`tinygrad_rnn.testing.strategies.
  cases_of`): each choice is a hypothesis draw, so the tests keep hypothesis's edge cases
  (size-0 and size-1 sides, bounds of ranges) and its shrinking to a minimal failing case.

The samplers encode each op's domain: inputs of ``log``/``sqrt`` are positive and away from
0, divisors are away from 0, inputs of ``relu``/``abs``/``clip``/``maximum`` are kept away
from kinks and ties (:data:`GRID`), ``tanh``/``sigmoid`` get bounded pre-activations. Shapes
cover broadcasting (rank promotion, size-1 dimensions), 0-d tensors and, where they mean
something, size-0 dimensions.

``functions`` lists the primitives whose backward an entry exercises; the gradient test
asserts they are in the recorded graph of every example, and the meta-tests
(``tests/test_ops_gradients.py``, ``tests/test_cli.py``) fail for a Function without an
entry. A new op gets one :class:`OpInfo` here, and it is then checked by the CLI and by
every op suite.

Why one module of about 1,330 lines: one ``OpInfo`` per differentiable op of the package, in
one list that the CLI's ``gradcheck`` and every op test suite read; splitting the list would
let an op go missing from one of them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from .. import engine, ops
from .. import functional as F
from ..creation import cat, split, stack, where
from ..engine import no_grad
from ..nn import functional as NF
from ..ops import Cast, Copy, ToDevice
from ..ops.base import Function
from ..ops.losses import BinaryCrossEntropy, takes_plain_path
from ..tensor import Tensor

__all__ = [
    "Draw", "NumpyDraw", "Case", "OpInfo", "REGISTRY", "BY_NAME", "GRID", "WIDE_FLOAT",
    "HAS_WIDE_FLOAT", "graph_functions", "exported_functions", "cast_case", "as_tuple",
    "run_forward", "run_vjp", "random_upstream", "gradient_fn",
]

# The ``astype`` entry casts up to the platform's extended precision (80-bit on x86-64) and
# back: both casts are exact, so finite differences of the float64 result are meaningful.
# float64 -> float32 is tested against float64 in tests/test_ops_contract.py.
WIDE_FLOAT = np.dtype(np.longdouble)
HAS_WIDE_FLOAT = np.finfo(WIDE_FLOAT).eps < np.finfo(np.float64).eps

GRID = 0.25  # kinks and ties are placed on multiples of GRID; inputs stay >= 0.05 off it
REDUCTIONS = ("none", "mean", "sum")


# ----------------------------------------------------------------------------- draws
class Rejected(Exception):
    """Raised by :meth:`NumpyDraw.assume` when a draw is outside the domain: the sampler is
    run again (hypothesis's ``assume`` in the tests)."""


class Draw(Protocol):
    """Where a domain's random choices come from. Every method draws one value; ranges are
    inclusive. :class:`NumpyDraw` draws from a NumPy generator; the tests' hypothesis
    version (:mod:`.strategies`) draws each value from the hypothesis strategy of the same
    name, so the two walk the same domain."""

    # scalars and choices
    def integers(self, lo: int, hi: int) -> int: ...
    def side(self, lo: int, hi: int) -> int: ...  # the length of an axis
    def boolean(self) -> bool: ...
    def choice(self, options: Sequence) -> Any: ...
    def floats(self, lo: float, hi: float) -> float: ...
    def permutation(self, items: Sequence) -> list: ...
    def integer_list(self, lo: int, hi: int, max_size: int, unique: bool = False) -> list: ...
    def assume(self, condition: bool) -> None: ...

    # shapes and indices
    def shape(self, min_dims: int = 0, max_dims: int = 3, min_side: int = 0,
              max_side: int = 3) -> tuple: ...
    def broadcastable_shapes(self, count: int, min_dims: int = 0, max_dims: int = 3,
                             min_side: int = 0, max_side: int = 3) -> tuple: ...
    def basic_index(self, shape: tuple) -> Any: ...

    # arrays
    def reals(self, shape: tuple, lo: float = -3.0, hi: float = 3.0) -> np.ndarray: ...
    def nonzero(self, shape: tuple, lo: float = 0.5, hi: float = 3.0) -> np.ndarray: ...
    def off_grid(self, shape: tuple) -> np.ndarray: ...
    def on_grid(self, shape: tuple) -> np.ndarray: ...
    def distinct(self, shape: tuple) -> np.ndarray: ...
    def signs(self, shape: tuple) -> np.ndarray: ...
    def bools(self, shape: tuple) -> np.ndarray: ...
    def int_array(self, shape: tuple, lo: int, hi: int) -> np.ndarray: ...


class NumpyDraw(Draw):
    """Draws from a seeded ``numpy.random.Generator`` (the CLI's examples).

    Its axes are never empty (:meth:`side` and :meth:`shape` draw lengths >= 1): an empty
    array has no Jacobian entry to compare, and the CLI checks a few examples per entry.
    The tests' hypothesis draws include the size-0 sides the domains allow.

    The array domains: ``reals`` uniform in [lo, hi]; ``nonzero`` magnitudes in [lo, hi]
    with random signs; ``off_grid`` at least 0.05 from every multiple of :data:`GRID` (0
    included); ``on_grid`` multiples of GRID in [-3, 3]; ``distinct`` pairwise at least 0.06
    apart (a random ranking spaced 0.1 apart plus jitter in [0, 0.04]).
    """

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def integers(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi + 1))

    def side(self, lo: int, hi: int) -> int:
        return self.integers(max(lo, 1), max(hi, 1))

    def boolean(self) -> bool:
        return bool(self.rng.random() < 0.5)

    def choice(self, options: Sequence) -> Any:
        return options[int(self.rng.integers(len(options)))]

    def floats(self, lo: float, hi: float) -> float:
        return float(self.rng.uniform(lo, hi))

    def permutation(self, items: Sequence) -> list:
        return [items[i] for i in self.rng.permutation(len(items))]

    def integer_list(self, lo: int, hi: int, max_size: int, unique: bool = False) -> list:
        if unique:
            size = self.integers(0, min(max_size, hi - lo + 1))
            return [int(v) for v in self.rng.choice(np.arange(lo, hi + 1), size, replace=False)]
        return [self.integers(lo, hi) for _ in range(self.integers(0, max_size))]

    def assume(self, condition: bool) -> None:
        if not condition:
            raise Rejected

    def shape(self, min_dims: int = 0, max_dims: int = 3, min_side: int = 0,
              max_side: int = 3) -> tuple:
        return tuple(self.side(min_side, max_side)
                     for _ in range(self.integers(min_dims, max_dims)))

    def broadcastable_shapes(self, count: int, min_dims: int = 0, max_dims: int = 3,
                             min_side: int = 0, max_side: int = 3) -> tuple:
        """Each shape drops leading axes of a common shape and sets some sides to 1."""
        full = self.shape(min_dims, max_dims, min_side, max_side)
        shapes = []
        for _ in range(count):
            tail = full[self.integers(0, len(full) - min_dims):]
            shapes.append(tuple(1 if self.rng.random() < 0.3 else s for s in tail))
        return tuple(shapes)

    def basic_index(self, shape: tuple) -> Any:
        """A tuple of ints, slices (any step sign), ``None`` and at most one ``Ellipsis``."""
        parts: list = []
        for side in shape:
            kind = self.choice(["int", "slice", "all"]) if side else self.choice(["slice", "all"])
            if kind == "int":
                parts.append(self.integers(-side, side - 1))
            elif kind == "slice":
                bound = [None] + list(range(-side - 1, side + 2))
                parts.append(slice(self.choice(bound), self.choice(bound),
                                   self.choice([None, 1, 2, -1, -2])))
            else:
                parts.append(slice(None))
        start = self.integers(0, len(parts))
        stop = self.integers(start, len(parts))
        if self.boolean():  # the axes start:stop taken by an Ellipsis
            parts[start:stop] = [Ellipsis]
        else:  # the trailing axes left out
            parts = parts[:start]
        for _ in range(self.integers(0, 1)):
            parts.insert(self.integers(0, len(parts)), None)
        return tuple(parts)

    def reals(self, shape: tuple, lo: float = -3.0, hi: float = 3.0) -> np.ndarray:
        return np.asarray(self.rng.uniform(lo, hi, size=shape), dtype=np.float64)

    def nonzero(self, shape: tuple, lo: float = 0.5, hi: float = 3.0) -> np.ndarray:
        return self.reals(shape, lo, hi) * self.signs(shape)

    def off_grid(self, shape: tuple) -> np.ndarray:
        return np.asarray(self._grid_steps(shape, -12, 11) + self.reals(shape, 0.05, 0.2))

    def on_grid(self, shape: tuple) -> np.ndarray:
        return self._grid_steps(shape, -12, 12)

    def _grid_steps(self, shape: tuple, lo: int, hi: int) -> np.ndarray:
        return np.asarray(GRID * self.int_array(shape, lo, hi).astype(np.float64))

    def distinct(self, shape: tuple) -> np.ndarray:
        size = math.prod(shape)
        ranks = self.rng.permutation(size).astype(np.float64)
        return ((ranks - size / 2) * 0.1 + self.reals((size,), 0.0, 0.04)).reshape(shape)

    def signs(self, shape: tuple) -> np.ndarray:
        return np.asarray(self.rng.choice([-1.0, 1.0], size=shape), dtype=np.float64)

    def bools(self, shape: tuple) -> np.ndarray:
        return np.asarray(self.rng.random(shape) < 0.5)

    def int_array(self, shape: tuple, lo: int, hi: int) -> np.ndarray:
        return np.asarray(self.rng.integers(lo, hi + 1, size=shape), dtype=np.int64)


# ----------------------------------------------------------------------------- entries
@dataclass(eq=False)
class Case:
    """One example for an op: the differentiable inputs and the constants of the call."""

    inputs: tuple
    consts: dict = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class OpInfo:
    """How to call one op, its NumPy reference and the inputs it is checked on.

    Attributes
    ----------
    name : str
        Unique; names the tests (``test_gradcheck_<name>``) and the CLI's entry.
    fn : callable
        ``fn(*tensors, **case.consts)`` -> Tensor or tuple of Tensors.
    ref : callable
        ``ref(*arrays, **case.consts)`` -> ndarray or tuple of ndarrays (the NumPy forward).
    sample : callable
        ``sample(draw)`` -> :class:`Case`: float64 inputs inside the op's domain.
    functions : tuple of Function subclasses
        Primitives whose backward this entry exercises (all appear in every example's graph).
    what : str
        One line for ``tinygrad-rnn gradcheck --list``.
    examples : tuple of Case
        Regression examples, run as ``@example`` by every test suite.
    frozen : callable, optional
        ``frozen(case)`` -> one boolean mask (or None) per input: elements whose gradient is
        defined to be 0 rather than the derivative (embedding's ``padding_idx`` rows, as in
        torch). The gradient checks hold them constant (:func:`gradient_fn`), and the test
        suite asserts their gradient is exactly 0.
    """

    name: str
    fn: Callable[..., Any]
    ref: Callable[..., Any]
    sample: Callable[[Draw], Case]
    functions: tuple
    what: str = ""
    examples: tuple = ()
    frozen: Callable[[Case], tuple] | None = None

    def draw(self, rng: np.random.Generator) -> Case:
        """One case from a NumPy generator (drawn again while a sampler rejects it)."""
        for _ in range(1000):
            try:
                return self.sample(NumpyDraw(rng))
            except Rejected:
                continue
        raise RuntimeError(f"{self.name}: the sampler rejected 1000 draws in a row")

    @property
    def cases(self) -> Any:
        """The domain as a hypothesis strategy of :class:`Case` (for the tests; imports
        hypothesis)."""
        from .strategies import cases_of

        return cases_of(self)


# ------------------------------------------------------------------------------ helpers
def as_tuple(out: Any) -> tuple:
    """An op's result as a tuple of outputs (split returns several)."""
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def graph_functions(outputs: Sequence[Tensor]) -> set:
    """The Function classes of every node recorded in the graph behind ``outputs``."""
    found: set = set()
    seen: set = set()
    stack_ = [t.grad_fn for t in outputs if t.grad_fn is not None]
    while stack_:
        node = stack_.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        found.add(node.fn)
        stack_.extend(t.grad_fn for t in engine.node_inputs(node) if t.grad_fn is not None)
    return found


def exported_functions() -> set:
    """Every Function subclass exported by ``tinygrad_rnn.ops``."""
    found = set()
    for obj in (getattr(ops, name) for name in ops.__all__):
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
    with no_grad():
        outputs = as_tuple(op.fn(*[Tensor(a) for a in case.inputs], **case.consts))
    rng = np.random.default_rng(seed)
    return [np.array(rng.standard_normal(o.shape), dtype=o.dtype) for o in outputs]


def gradient_fn(op: OpInfo, case: Case) -> Callable[..., Any]:
    """``op`` at ``case`` as a function of its differentiable inputs alone, for a gradient
    check: the elements ``op.frozen`` marks (whose gradient is defined to be 0, not the
    derivative) are held at their values, on the device of the input."""
    frozen = op.frozen(case) if op.frozen is not None else (None,) * len(case.inputs)
    if all(mask is None for mask in frozen):
        return lambda *xs: op.fn(*xs, **case.consts)

    def fn(*xs: Any) -> Any:
        held = [x if m is None else where(m, Tensor(c, device=x.device), x)
                for x, c, m in zip(xs, case.inputs, frozen)]
        return op.fn(*held, **case.consts)

    return fn


# ----------------------------------------------------------------------------- helpers
def _broadcasting_to(d: Draw, shape: tuple) -> tuple:
    """A shape that broadcasts to ``shape`` (a suffix of it, some sides replaced by 1)."""
    k = d.integers(0, len(shape))
    return tuple(d.choice([1, side]) for side in shape[len(shape) - k:])


def _axes(d: Draw, ndim: int) -> Any:
    """An axis argument: None, an int, or a tuple of distinct axes (negatives allowed)."""
    if ndim == 0:
        return d.choice([None, 0, -1, (0,), ()])
    kind = d.choice(["none", "int", "tuple"])
    if kind == "none":
        return None
    if kind == "int":
        return d.integers(-ndim, ndim - 1)
    chosen = d.integer_list(0, ndim - 1, ndim, unique=True)
    return tuple(ax - ndim if d.boolean() else ax for ax in chosen)


def _norm_axes(axis: Any, ndim: int) -> tuple:
    """The reference's own axis normalisation (independent of the op's)."""
    if axis is None:
        return tuple(range(ndim))
    if ndim == 0:
        return ()
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(sorted(ax % ndim for ax in axes))


def _reals(d: Draw, shape: tuple) -> np.ndarray:
    return d.reals(shape)


def _nonzero(d: Draw, shape: tuple) -> np.ndarray:
    return d.nonzero(shape)


def _off_grid(d: Draw, shape: tuple) -> np.ndarray:
    return d.off_grid(shape)


def _on_grid(d: Draw, shape: tuple) -> np.ndarray:
    return d.on_grid(shape)


def _within(lo: float, hi: float) -> Callable[[Draw, tuple], np.ndarray]:
    """Reals in [lo, hi] (lo > 0: log, sqrt; bounded: sigmoid)."""
    return lambda d, shape: d.reals(shape, lo, hi)


def _optional_positives(d: Draw, shape: tuple, lo: float, hi: float) -> np.ndarray | None:
    return None if d.boolean() else d.reals(shape, lo, hi)


# ------------------------------------------------------------------------------ elementwise
def _binary_cases(values_a: Callable, values_b: Callable, swap: bool = False) -> Callable:
    def sample(d: Draw) -> Case:
        shape_a, shape_b = d.broadcastable_shapes(2)
        a, b = values_a(d, shape_a), values_b(d, shape_b)
        if swap and d.boolean():
            a, b = b, a
        return Case((a, b))

    return sample


def _unary_cases(values: Callable) -> Callable:
    return lambda d: Case((values(d, d.shape()),))


def _scalar_cases(values: Callable) -> Callable:
    def sample(d: Draw) -> Case:
        x = values(d, d.shape())
        return Case((x,), {"c": d.floats(-3.0, 3.0)})

    return sample


def _pow_cases(d: Draw) -> Case:
    exponent = d.choice([0.0, 1.0, 2.0, 3.0, 0.5, 1.5, 2.5, -0.5, -1.0, -2.0])
    shape = d.shape()
    if float(exponent).is_integer() and exponent >= 0:
        x = d.reals(shape)  # x ** n for n = 0, 1, 2, ... is smooth everywhere, 0 included
    else:
        x = d.reals(shape, 0.3, 3.0)
    return Case((x,), {"exponent": exponent, "method": d.boolean()})


def _pow(x: Tensor, exponent: float, method: bool) -> Tensor:
    return x.pow(exponent) if method else x**exponent


def _clip_cases(d: Draw) -> Case:
    x = d.off_grid(d.shape())
    lo = None if d.boolean() else GRID * d.integers(-8, 8)
    hi = None if d.boolean() else GRID * d.integers(-8, 8)
    if lo is None and hi is None:
        lo = GRID * d.integers(-8, 8)
    return Case((x,), {"lo": lo, "hi": hi})


def _ref_clip(x: np.ndarray, lo: float | None, hi: float | None) -> np.ndarray:
    y = x if lo is None else np.maximum(x, lo)
    return y if hi is None else np.minimum(y, hi)


# ------------------------------------------------------------------------------ activations
def _softmax_cases(d: Draw) -> Case:
    shape = d.shape(max_side=4)
    ndim = len(shape)
    axis = d.integers(-ndim, ndim - 1) if ndim else d.choice([0, -1])
    mask = d.bools(_broadcasting_to(d, shape)) if d.boolean() else None
    x = d.reals(shape, -5.0, 5.0)
    return Case((x,), {"axis": axis, "mask": mask})


def _valid(x: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    if mask is None:
        return np.ones(x.shape, dtype=bool)
    return np.broadcast_to(mask, x.shape)


def _ref_softmax(x: np.ndarray, axis: int | None, mask: np.ndarray | None) -> np.ndarray:
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
    # explicitly in tests/test_ops_forward.py.
    return where(np.broadcast_to(mask, x.shape), y, 0.0)


def _ref_log_softmax(x: np.ndarray, axis: int, mask: np.ndarray | None) -> np.ndarray:
    valid = _valid(x, mask)
    ax = axis if x.ndim else None
    s = np.sum(np.where(valid, np.exp(x), 0.0), axis=ax, keepdims=True)
    y = x - np.log(np.where(s > 0, s, 1.0))
    return np.where(valid, y, 0.0)


def _ref_gelu(x: np.ndarray) -> np.ndarray:
    """x Phi(x) with Phi(x) = (1 + erf(x / sqrt 2)) / 2."""
    erf = np.vectorize(math.erf, otypes=[np.float64])
    return x * 0.5 * (1.0 + erf(x / math.sqrt(2.0)))


# ------------------------------------------------------------------------------ linear algebra
def _matmul_cases(d: Draw) -> Case:
    n, k, m = d.side(0, 3), d.side(0, 3), d.side(0, 3)
    kind = d.choice(["vv", "vm", "mv", "mm", "batched", "batched_v", "v_batched"])
    if kind in ("batched", "batched_v", "v_batched"):
        batch_a, batch_b = d.broadcastable_shapes(2, min_dims=0, max_dims=2)
    else:
        batch_a = batch_b = ()
    shape_a = {"vv": (k,), "vm": (k,), "v_batched": (k,)}.get(kind, batch_a + (n, k))
    shape_b = {"vv": (k,), "mv": (k,), "batched_v": (k,)}.get(kind, batch_b + (k, m))
    return Case((d.reals(shape_a, -2, 2), d.reals(shape_b, -2, 2)))


def _linear_cases(d: Draw) -> Case:
    batch = d.shape(max_dims=2)
    d_in, d_out = d.side(0, 3), d.side(0, 3)
    x = d.reals(batch + (d_in,), -2, 2)
    w = d.reals((d_out, d_in), -2, 2)
    if d.boolean():
        return Case((x, w, d.reals((d_out,))))
    return Case((x, w))


def _linear(x: Tensor, w: Tensor, b: Tensor | None = None) -> Tensor:
    return F.linear(x, w, b)


def _ref_linear(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    y = np.matmul(x, w.T)
    return y if b is None else y + b


# ------------------------------------------------------------------------------ reductions
def _reduce_cases(max_like: bool = False) -> Callable:
    def sample(d: Draw) -> Case:
        shape = d.shape()
        axis = _axes(d, len(shape))
        if max_like:  # max over an empty axis is an error; keep reduced sides >= 1
            reduced = _norm_axes(axis, len(shape))
            shape = tuple(max(s, 1) if i in reduced else s for i, s in enumerate(shape))
            x = d.distinct(shape)
        else:
            x = d.reals(shape)
        return Case((x,), {"axis": axis, "keepdims": d.boolean()})

    return sample


def _norm_cases(d: Draw) -> Case:
    """Entries away from 0 (|x| in [0.3, 3], random signs), so |x|^(p-1) is smooth."""
    shape = d.shape(min_side=1)
    x = d.reals(shape, 0.3, 3.0) * d.signs(shape)
    return Case((x,), {"p": d.choice([2.0, 3.0, 1.5, "fro"]), "dim": _axes(d, len(shape)),
                       "keepdim": d.boolean()})


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
    reducers: dict[str, Callable[..., Any]] = {"sum": np.sum, "max": np.max, "min": np.min}
    fn = reducers[name]

    def ref(x: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
        return fn(x, axis=_norm_axes(axis, x.ndim), keepdims=keepdims)

    return ref


# ------------------------------------------------------------------------------ shape ops
def _reshape_cases(d: Draw) -> Case:
    shape = d.shape()
    x = d.reals(shape)
    target: list = []
    for side in d.permutation([s for s in shape if s != 1]):
        if target and d.boolean():
            target[-1] *= side
        else:
            target.append(side)
    for _ in range(d.integers(0, 2)):
        target.insert(d.integers(0, len(target)), 1)
    if target and x.size and d.boolean():
        target[d.integers(0, len(target) - 1)] = -1
    return Case((x,), {"shape": tuple(target), "as_args": d.boolean()})


def _reshape(x: Tensor, shape: tuple, as_args: bool) -> Tensor:
    return x.reshape(*shape) if as_args and shape else x.reshape(shape)


def _transpose_cases(d: Draw) -> Case:
    shape = d.shape()
    ndim = len(shape)
    how = d.choice(["T", "transpose", "permute", "swapaxes"])
    axes = tuple(d.permutation(list(range(ndim))))
    if d.boolean():
        axes = tuple(a - ndim for a in axes)
    if how == "swapaxes":
        axes = (d.integers(0, max(ndim - 1, 0)), d.integers(0, max(ndim - 1, 0)))
        if ndim == 0:
            how = "T"
    return Case((d.reals(shape),), {"how": how, "axes": axes})


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


def _broadcast_cases(d: Draw) -> Case:
    shape = d.shape()
    lead = tuple(d.side(0, 3) for _ in range(d.integers(0, 2)))
    target = lead + tuple(d.side(0, 3) if side == 1 else side for side in shape)
    return Case((d.reals(shape),), {"shape": target, "expand": d.boolean()})


def _broadcast_to(x: Tensor, shape: tuple, expand: bool) -> Tensor:
    return x.expand(shape) if expand else x.broadcast_to(shape)


def _basic_index_cases(d: Draw) -> Case:
    shape = d.shape()
    index = d.basic_index(shape)
    return Case((d.reals(shape),), {"index": index})


def _advanced_index_cases(d: Draw) -> Case:
    shape = d.shape(min_dims=1, min_side=1)
    x = d.reals(shape)
    kind = d.choice(["first", "second", "pair", "bool", "list"])
    idx_shape = d.shape(max_dims=2, max_side=4)

    def ids(n: int) -> np.ndarray:  # small ranges, so repeated indices are common
        return d.int_array(idx_shape, -n, n - 1)

    if kind == "second" and len(shape) >= 2:
        index: Any = (slice(None), ids(shape[1]))
    elif kind == "pair" and len(shape) >= 2:
        index = (ids(shape[0]), ids(shape[1]))
    elif kind == "bool":
        index = d.bools(shape[:d.integers(1, len(shape))])
    elif kind == "list":
        index = d.integer_list(-shape[0], shape[0] - 1, 5)
    else:
        index = ids(shape[0])
    return Case((x,), {"index": index})


def _getitem(x: Tensor, index: Any) -> Tensor:
    return x[index]


def _ref_getitem(x: np.ndarray, index: Any) -> np.ndarray:
    if isinstance(index, list):
        index = np.asarray(index, dtype=np.intp)
    return np.asarray(x[index])


def _write_cases(d: Draw) -> Case:
    shape = d.shape(min_dims=1)
    index = d.basic_index(shape)
    x = d.reals(shape)
    return Case((x, d.reals(np.empty(shape)[index].shape)), {"index": index})


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


def _cat_cases(d: Draw) -> Case:
    base = d.shape(min_dims=1)
    ndim = len(base)
    axis = d.integers(-ndim, ndim - 1)
    ax = axis % ndim
    count = d.integers(1, 3)
    pieces = tuple(d.reals(base[:ax] + (d.side(0, 3),) + base[ax + 1:])
                   for _ in range(count))
    return Case(pieces, {"axis": axis})


def _stack_cases(d: Draw) -> Case:
    shape = d.shape()
    ndim = len(shape) + 1
    axis = d.integers(-ndim, ndim - 1)
    count = d.integers(1, 3)
    return Case(tuple(d.reals(shape) for _ in range(count)), {"axis": axis})


def _split_cases(d: Draw) -> Case:
    shape = d.shape(min_dims=1, max_side=4)
    ndim = len(shape)
    axis = d.integers(-ndim, ndim - 1)
    n = shape[axis]
    if d.boolean():
        sizes: Any = d.integers(1, n + 1)
    else:
        cuts = sorted(d.integer_list(0, n, 3))
        sizes = [b - a for a, b in zip([0] + cuts, cuts + [n])]
    return Case((d.reals(shape),), {"sizes": sizes, "axis": axis})


def _ref_split(x: np.ndarray, sizes: Any, axis: int) -> tuple:
    n = x.shape[axis]
    if isinstance(sizes, int):
        sizes = [min(sizes, n - s) for s in range(0, n, sizes)] or [0]
    bounds = np.cumsum(sizes)[:-1]
    return tuple(np.split(x, bounds, axis=axis))


def _unbind_cases(d: Draw) -> Case:
    # (sides >= 1: unbinding a dimension of size 0 gives () without any op, as in torch)
    shape = d.shape(min_dims=1, min_side=1, max_side=4)
    return Case((d.reals(shape),), {"axis": d.integers(-len(shape), len(shape) - 1)})


def _ref_unbind(x: np.ndarray, axis: int) -> tuple:
    return tuple(np.moveaxis(x, axis, 0))


# ------------------------------------------------------------------------------ selection
def _where_cases(d: Draw) -> Case:
    cond_shape, shape_a, shape_b = d.broadcastable_shapes(3)
    cond = d.bools(cond_shape)
    return Case((d.reals(shape_a), d.reals(shape_b)), {"cond": cond})


def _masked_fill_cases(d: Draw) -> Case:
    shape = d.shape()
    mask = d.bools(_broadcasting_to(d, shape))
    value = d.floats(-5.0, 5.0)
    return Case((d.reals(shape),), {"mask": mask, "value": value, "method": d.boolean()})


def _masked_fill(x: Tensor, mask: np.ndarray, value: float, method: bool) -> Tensor:
    return x.masked_fill(mask, value) if method else F.masked_fill(x, mask, value)


def _embedding_cases(d: Draw) -> Case:
    rows, dim = d.side(1, 4), d.side(0, 3)
    ids = d.int_array(d.shape(max_dims=2), 0, rows - 1)
    padding_idx = None if d.boolean() else d.integers(-rows, rows - 1)
    return Case((d.reals((rows, dim)),), {"ids": ids, "padding_idx": padding_idx})


def _embedding_frozen(case: Case) -> tuple:
    weight = case.inputs[0]
    pad = case.consts["padding_idx"]
    if pad is None:
        return (None,)
    frozen = np.zeros(weight.shape, dtype=bool)
    frozen[pad % weight.shape[0]] = True
    return (frozen,)


def _dropout_cases(d: Draw) -> Case:
    x = d.reals(d.shape())
    return Case((x,), {"p": d.choice([0.1, 0.3, 0.5, 0.8]), "seed": d.integers(0, 2**16)})


def _dropout(x: Tensor, p: float, seed: int) -> Tensor:
    # an int generator is a fresh Generator(seed) on every call: the same mask every time
    return F.dropout(x, p=p, training=True, generator=seed)


def _ref_dropout(x: np.ndarray, p: float, seed: int) -> np.ndarray:
    keep = np.random.default_rng(seed).random(x.shape) >= p
    return np.where(keep, x / (1.0 - p), 0.0)


# ------------------------------------------------------------------------------ losses
def _class_layout(d: Draw) -> tuple:
    """(input shape, target shape): (C,) with (); (N, C) with (N,); (N, C, d1[, d2]) with
    (N, d1[, d2]). N and the spatial sides may be 0."""
    num_classes = d.integers(1, 4)
    layout = d.choice(["C", "NC", "NCd", "NCdd"])
    if layout == "C":
        return (num_classes,), ()
    batch = d.side(0, 3)
    if layout == "NC":
        spatial: tuple = ()
    elif layout == "NCd":
        spatial = (d.side(0, 3),)
    else:
        spatial = (d.side(0, 2), d.side(1, 2))
    return (batch, num_classes) + spatial, (batch,) + spatial


def _class_targets(d: Draw, num_classes: int, target_shape: tuple) -> dict:
    """Class-id targets with an ignore_index (torch's default, another negative, or a class
    id) that some targets take, and optional class weights."""
    target = d.int_array(target_shape, 0, num_classes - 1)
    ignore_index = d.choice([-100, -1]) if d.boolean() else d.integers(0, num_classes - 1)
    ignored = d.bools(target_shape)
    target = np.where(ignored, ignore_index, target).astype(np.int64)
    weight = _optional_positives(d, (num_classes,), 0.2, 2.0)
    return {"target": target, "weight": weight, "ignore_index": ignore_index,
            "reduction": d.choice(REDUCTIONS)}


def _smoothing(d: Draw) -> float:
    kind = d.integers(0, 2)
    if kind == 0:
        return 0.0
    return d.choice([0.1, 1.0]) if kind == 1 else d.floats(0.0, 1.0)


def _num_classes(x_shape: tuple) -> int:
    return x_shape[0 if len(x_shape) == 1 else 1]


def _cross_entropy_cases(d: Draw) -> Case:
    """Cases F.cross_entropy sends to the general op: some option in use (class weights,
    label smoothing or an ignored target); the others are the plain entry's."""
    x_shape, t_shape = _class_layout(d)
    consts = _class_targets(d, _num_classes(x_shape), t_shape)
    consts["label_smoothing"] = _smoothing(d)
    d.assume(not takes_plain_path(consts["target"], consts["weight"], consts["ignore_index"],
                                  consts["label_smoothing"]))
    return Case((d.reals(x_shape, -4.0, 4.0),), consts)


def _plain_cross_entropy_cases(d: Draw) -> Case:
    """The textbook loss: class ids in range, no weights, no smoothing, nothing ignored."""
    x_shape, t_shape = _class_layout(d)
    target = d.int_array(t_shape, 0, _num_classes(x_shape) - 1)
    return Case((d.reals(x_shape, -4.0, 4.0),),
                {"target": target, "reduction": d.choice(REDUCTIONS)})


def _cross_entropy(x: Tensor, *q: Tensor, **consts: Any) -> Tensor:
    target = q[0] if q else consts.pop("target")
    return F.cross_entropy(x, target, **consts)


def _soft_cross_entropy_cases(d: Draw) -> Case:
    x_shape, _ = _class_layout(d)
    x = d.reals(x_shape, -4.0, 4.0)
    q = d.reals(x_shape, 0.0, 1.0)
    return Case((x, q), {"weight": _optional_positives(d, (_num_classes(x_shape),), 0.2, 2.0),
                         "reduction": d.choice(REDUCTIONS), "label_smoothing": _smoothing(d)})


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
    num_classes = _num_classes(x.shape)
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
    num_classes = _num_classes(x.shape)
    w = np.ones(num_classes) if weight is None else weight
    q_rows = dict(_class_rows(q))
    losses = np.zeros(x.shape[:1] + x.shape[2:] if x.ndim > 1 else ())
    for idx, row in _class_rows(x):
        q_mixed = (1 - label_smoothing) * q_rows[idx] + label_smoothing / num_classes
        losses[idx] = -np.sum(w * q_mixed * _ref_log_probs(row))
    return _reduce_loss(losses, reduction, float(losses.size))


def _nll_cases(d: Draw) -> Case:
    x_shape, t_shape = _class_layout(d)
    consts = _class_targets(d, _num_classes(x_shape), t_shape)
    return Case((d.reals(x_shape, -4.0, 1.0),), consts)


def _ref_nll(x: np.ndarray, target: np.ndarray, weight: np.ndarray | None,
             ignore_index: int, reduction: str) -> np.ndarray:
    num_classes = _num_classes(x.shape)
    w = np.ones(num_classes) if weight is None else weight
    losses = np.zeros(target.shape)
    denom = 0.0
    for idx, row in _class_rows(x):
        t = int(target[idx])
        if t != ignore_index:
            losses[idx] = -w[t] * row[t]
            denom += w[t]
    return _reduce_loss(losses, reduction, denom)


def _mse_cases(d: Draw) -> Case:
    shape = d.shape()
    return Case((d.reals(shape), d.reals(shape)), {"reduction": d.choice(REDUCTIONS)})


def _mean_of(loss: np.ndarray, reduction: str) -> np.ndarray:
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.sum(loss)
    return np.asarray(np.sum(loss) / loss.size if loss.size else np.nan)


def _ref_mse(a: np.ndarray, b: np.ndarray, reduction: str) -> np.ndarray:
    return _mean_of((a - b) ** 2, reduction)


def _bce_cases(d: Draw) -> Case:
    shape = d.shape()
    x = d.reals(shape, -6.0, 6.0)
    t = d.reals(shape, 0.0, 1.0)
    weight = _optional_positives(d, _broadcasting_to(d, shape), 0.2, 3.0)
    pos_weight = _optional_positives(d, _broadcasting_to(d, shape), 0.2, 3.0)
    return Case((x, t), {"weight": weight, "pos_weight": pos_weight,
                         "reduction": d.choice(REDUCTIONS)})


def _ref_bce(x: np.ndarray, t: np.ndarray, weight: np.ndarray | None,
             pos_weight: np.ndarray | None, reduction: str) -> np.ndarray:
    log_s = -np.log1p(np.exp(-x))        # log sigma(x); |x| <= 6, no overflow
    log_1ms = -np.log1p(np.exp(x))       # log (1 - sigma(x))
    pw = 1.0 if pos_weight is None else pos_weight
    w = 1.0 if weight is None else weight
    loss = -w * (pw * t * log_s + (1 - t) * log_1ms)
    return _mean_of(np.broadcast_to(loss, x.shape), reduction)


def _bce_probability_cases(d: Draw) -> Case:
    """Probabilities and targets kept inside (0, 1): the floors of torch's formula are
    kinks, and a central difference must not step outside [0, 1], which is an error."""
    shape = d.shape()
    x = d.reals(shape, 0.05, 0.95)
    t = d.reals(shape, 0.01, 0.99)
    weight = _optional_positives(d, _broadcasting_to(d, shape), 0.2, 3.0)
    return Case((x, t), {"weight": weight, "reduction": d.choice(REDUCTIONS)})


def _ref_bce_probabilities(x: np.ndarray, t: np.ndarray, weight: np.ndarray | None,
                           reduction: str) -> np.ndarray:
    w = 1.0 if weight is None else weight
    loss = np.broadcast_to(-w * (t * np.log(x) + (1 - t) * np.log(1 - x)), x.shape)
    return _mean_of(loss, reduction)


# ------------------------------------------------------------------------------ conversions
def _cast_round_trip(x: Tensor) -> Tensor:
    return x.astype(WIDE_FLOAT).astype(x.dtype)


def _device_round_trip(x: Tensor) -> Tensor:
    """x copied to another device and back (to the stand-in from the CPU, else to the CPU):
    two explicit copies, so the result is on x's device with x's values."""
    away = "standin" if x.device == "cpu" else "cpu"
    return x.to(away).to(x.device)


# ------------------------------------------------------------------------------ layer norm
def _layer_norm_cases(d: Draw) -> Case:
    """Rows of distinct entries (pairwise >= 0.06 apart, so the variance is bounded away
    from 0), normalized over 1 or 2 trailing axes, with or without weight and bias."""
    normalized = d.shape(min_dims=1, max_dims=2, min_side=1)
    lead = d.shape(min_dims=0, max_dims=2)
    rows = [d.distinct(normalized) * d.floats(1.0, 3.0) for _ in range(math.prod(lead))]
    x = np.stack(rows).reshape(lead + normalized) if rows else np.zeros(lead + normalized)
    has_weight, has_bias = d.boolean(), d.boolean()
    inputs = [x]
    if has_weight:
        inputs.append(d.nonzero(normalized))
    if has_bias:
        inputs.append(d.reals(normalized))
    return Case(tuple(inputs), {"normalized_ndim": len(normalized),
                                "eps": d.choice([1e-5, 0.1, 1.0]),
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
def _conv1d_cases(d: Draw) -> Case:
    """x (N, C_in, L), weight (C_out, C_in, K) and maybe a bias, with stride, dilation and
    (left, right) zero padding (unequal too, as a causal convolution pads) leaving at least
    one output step (docs/sequence_models.md, (CV1))."""
    n, c_in, c_out = d.integers(1, 2), d.integers(1, 3), d.integers(1, 3)
    k, stride, dilation = d.integers(1, 3), d.integers(1, 3), d.integers(1, 2)
    left, right = d.integers(0, 3), d.integers(0, 2)
    length = d.integers(max(1, dilation * (k - 1) + 1 - left - right), 7)
    inputs = [d.reals((n, c_in, length)), d.reals((c_out, c_in, k))]
    if d.boolean():
        inputs.append(d.reals((c_out,)))
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
           what: str, examples: tuple = ()) -> OpInfo:
    return OpInfo(name, fn, ref, _unary_cases(values), functions, what, examples)


def _binary(name: str, fn: Callable, ref: Callable, values_a: Callable, values_b: Callable,
            functions: tuple, what: str, swap: bool = False) -> OpInfo:
    return OpInfo(name, fn, ref, _binary_cases(values_a, values_b, swap), functions, what)


REGISTRY: tuple[OpInfo, ...] = (
    # arithmetic, with broadcasting
    _binary("add", lambda a, b: a + b, np.add, _reals, _reals, (ops.Add,), "a + b"),
    _binary("sub", lambda a, b: a - b, np.subtract, _reals, _reals, (ops.Sub,), "a - b"),
    _binary("mul", lambda a, b: a * b, np.multiply, _reals, _reals, (ops.Mul,), "a * b"),
    _binary("div", lambda a, b: a / b, np.divide, _reals, _nonzero, (ops.Div,),
            "a / b, |b| >= 0.5"),
    _binary("maximum", F.maximum, np.maximum, _off_grid, _on_grid, (ops.Maximum,),
            "maximum, no ties", swap=True),
    _binary("minimum", lambda a, b: a.minimum(b), np.minimum, _off_grid, _on_grid,
            (ops.Minimum,), "minimum, no ties", swap=True),
    # a Python scalar on either side takes the tensor's dtype
    OpInfo("add_scalar", lambda x, c: x + c, lambda x, c: x + c, _scalar_cases(_reals),
           (ops.Add,), "x + c, c a Python float"),
    OpInfo("rsub_scalar", lambda x, c: c - x, lambda x, c: c - x, _scalar_cases(_reals),
           (ops.Sub,), "c - x"),
    OpInfo("rmul_scalar", lambda x, c: c * x, lambda x, c: c * x, _scalar_cases(_reals),
           (ops.Mul,), "c * x"),
    OpInfo("rdiv_scalar", lambda x, c: c / x, lambda x, c: c / x, _scalar_cases(_nonzero),
           (ops.Div,), "c / x, |x| >= 0.5"),
    _unary("neg", lambda x: -x, np.negative, _reals, (ops.Neg,), "-x"),
    OpInfo("pow", _pow, lambda x, exponent, method: np.power(x, exponent), _pow_cases,
           (ops.Pow,), "x ** p for integer and fractional p",
           examples=(
               # x ** 0 at x = 0: the gradient is 0, not 0 * 0 ** -1 = NaN (bug fixed)
               Case((np.array([0.0, -1.5, 2.0]),), {"exponent": 0.0, "method": False}),
           )),
    _unary("exp", F.exp, np.exp, _reals, (ops.Exp,), "exp(x), |x| <= 3"),
    _unary("log", lambda x: x.log(), np.log, _within(0.2, 5.0), (ops.Log,),
           "log(x), x >= 0.2"),
    _unary("sqrt", F.sqrt, np.sqrt, _within(0.2, 5.0), (ops.Sqrt,), "sqrt(x), x >= 0.2"),
    _unary("abs", lambda x: x.abs(), np.abs, _off_grid, (ops.Abs,), "|x| away from 0"),
    OpInfo("clip", lambda x, lo, hi: x.clip(lo, hi), _ref_clip, _clip_cases, (ops.Clip,),
           "clip(x, lo, hi) away from the bounds"),
    # activations
    _unary("relu", F.relu, lambda x: np.maximum(x, 0.0), _off_grid, (ops.ReLU,),
           "relu away from 0"),
    _unary("tanh", lambda x: x.tanh(), np.tanh, _reals, (ops.Tanh,), "tanh, |x| <= 3"),
    _unary("sigmoid", F.sigmoid, lambda x: 1.0 / (1.0 + np.exp(-x)), _within(-5.0, 5.0),
           (ops.Sigmoid,), "sigmoid, |x| <= 5"),
    _unary("gelu", lambda x: NF.gelu(x), _ref_gelu, _reals, (NF.GELU,), "exact GELU (erf)"),
    OpInfo("softmax", lambda x, axis, mask: F.softmax(x, axis=axis, mask=mask),
           _ref_softmax, _softmax_cases, (ops.Softmax,),
           "softmax along any axis, optional mask",
           examples=(
               # a fully masked row: zeros and zero gradient, never NaN
               Case((np.array([[1.0, 2.0, -1.0], [0.5, 3.0, 2.0]]),),
                    {"axis": -1, "mask": np.array([[True, False, True], [False] * 3])}),
               # a 0-d tensor with axis -1 (a one-element row), as torch (bug fixed)
               Case((np.array(0.7),), {"axis": -1, "mask": None}),
           )),
    OpInfo("log_softmax", _log_softmax, _ref_log_softmax, _softmax_cases,
           (ops.LogSoftmax,), "log_softmax along any axis, optional mask",
           examples=(
               Case((np.array([[1.0, 2.0, -1.0], [0.5, 3.0, 2.0]]),),
                    {"axis": 0, "mask": np.array([[True, False, False], [True, False, True]])}),
               Case((np.array(-1.3),), {"axis": 0, "mask": None}),  # 0-d (bug fixed)
               # an empty softmax axis: empty output, no log(0) warning (bug fixed)
               Case((np.zeros((2, 0)),), {"axis": 1, "mask": None}),
           )),
    # linear algebra
    OpInfo("matmul", lambda a, b: a @ b, np.matmul, _matmul_cases, (ops.MatMul,),
           "a @ b: 1-D, 2-D, batched with broadcasting",
           examples=(
               # vector @ vector: the upstream gradient is 0-d (backward crashed; fixed)
               Case((np.array([1.0, -2.0, 0.5]), np.array([0.3, 0.7, -1.1]))),
           )),
    OpInfo("linear", _linear, _ref_linear, _linear_cases, (ops.MatMul, ops.Transpose),
           "x W^T + b"),
    # reductions
    OpInfo("sum", lambda x, axis, keepdims: x.sum(axis, keepdims), _ref_reduce("sum"),
           _reduce_cases(), (ops.Sum,), "sum over axes, keepdims"),
    OpInfo("mean", lambda x, axis, keepdims: x.mean(axis=axis, keepdims=keepdims), _ref_mean,
           _reduce_cases(), (ops.Mean,), "mean over axes, keepdims"),
    OpInfo("max", lambda x, axis, keepdims: x.max(axis=axis, keepdims=keepdims),
           _ref_reduce("max"), _reduce_cases(max_like=True), (ops.Max,),
           "max over axes, distinct values"),
    OpInfo("min", lambda x, axis, keepdims: x.min(axis=axis, keepdims=keepdims),
           _ref_reduce("min"), _reduce_cases(max_like=True), (ops.Min,),
           "min over axes, distinct values"),
    OpInfo("norm", lambda x, p, dim, keepdim: x.norm(p, dim, keepdim), _ref_norm,
           _norm_cases, (ops.Norm,), "p-norm over axes (p = 2, 3, 1.5, 'fro')",
           examples=(
               # an all-zero row: the gradient there is 0, not 0/0 (as torch)
               Case((np.array([[0.0, 0.0], [3.0, -4.0]]),), {"p": 2.0, "dim": 1,
                                                           "keepdim": False}),
           )),
    # shapes
    OpInfo("reshape", _reshape, lambda x, shape, as_args: np.reshape(x, shape),
           _reshape_cases, (ops.Reshape,), "reshape"),
    OpInfo("transpose", _transpose, _ref_transpose, _transpose_cases, (ops.Transpose,),
           "T, transpose, permute, swapaxes"),
    OpInfo("broadcast_to", _broadcast_to,
           lambda x, shape, expand: np.broadcast_to(x, shape), _broadcast_cases,
           (ops.BroadcastTo,), "broadcast_to and expand"),
    OpInfo("getitem_basic", _getitem, _ref_getitem, _basic_index_cases, (ops.GetItem,),
           "ints, slices, None, Ellipsis"),
    OpInfo("getitem_advanced", _getitem, _ref_getitem, _advanced_index_cases,
           (ops.GetItem,), "repeated ids, pairs of id arrays, boolean masks, lists",
           examples=(
               Case((np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]),),
                    {"index": np.array([0, 2, 0, -3, 2])}),
               # an empty list selects nothing (it was read as a float index; fixed)
               Case((np.array([[1.0, 2.0], [3.0, 4.0]]),), {"index": []}),
           )),
    OpInfo("write_through_view", _write_through_view, _ref_write, _write_cases,
           (ops.WriteRegion, ops.ViewOf), "recorded write into a graph, stale view",
           examples=(
               # an empty region: nothing written, the base keeps its gradient (bug fixed)
               Case((np.array([[1.0, 2.0]]), np.zeros((1, 0))),
                    {"index": (slice(None), slice(2, 2))}),
               Case((np.array([1.0, -2.0, 3.0]), np.array(5.0)), {"index": (1,)}),
           )),
    OpInfo("cat", lambda *xs, axis: cat(xs, axis=axis),
           lambda *xs, axis: np.concatenate(xs, axis=axis), _cat_cases, (ops.Concatenate,),
           "concatenate"),
    OpInfo("stack", lambda *xs, axis: stack(xs, axis=axis),
           lambda *xs, axis: np.stack(xs, axis=axis), _stack_cases, (ops.Stack,), "stack"),
    OpInfo("split", lambda x, sizes, axis: split(x, sizes, axis=axis), _ref_split,
           _split_cases, (ops.Split,), "split by size or sections"),
    OpInfo("unbind", lambda x, axis: x.unbind(axis), _ref_unbind, _unbind_cases,
           (ops.Unbind,), "the slices along a dimension (views), one node"),
    # selection
    OpInfo("where", lambda a, b, cond: where(cond, a, b),
           lambda a, b, cond: np.where(cond, a, b), _where_cases, (ops.Where,),
           "where(cond, a, b) with broadcasting"),
    OpInfo("masked_fill", _masked_fill,
           lambda x, mask, value, method: np.where(mask, value, x), _masked_fill_cases,
           (ops.MaskedFill,), "masked_fill"),
    OpInfo("embedding", lambda w, ids, padding_idx: F.embedding(ids, w, padding_idx),
           lambda w, ids, padding_idx: w[ids], _embedding_cases, (ops.Embedding,),
           "embedding lookup, repeated ids, padding_idx",
           frozen=_embedding_frozen,
           examples=(
               # embedding size 0: backward's reshape(-1, 0) was ambiguous (fixed)
               Case((np.zeros((3, 0)),), {"ids": np.array([[0, 2], [1, 1]]),
                                          "padding_idx": None}),
               Case((np.array([[0.5, -1.0], [2.0, 0.0], [1.5, 3.0]]),),
                    {"ids": np.array([2, 0, 2, 1]), "padding_idx": -1}),
           )),
    OpInfo("dropout", _dropout, _ref_dropout, _dropout_cases, (ops.Dropout,),
           "dropout with a fixed mask"),
    # normalization
    OpInfo("layer_norm", _layer_norm, _ref_layer_norm, _layer_norm_cases, (ops.LayerNorm,),
           "layer_norm over 1-2 trailing axes, weight/bias or not",
           examples=(
               # one entry per row: x_hat is exactly 0, and so is the gradient of x
               Case((np.array([[1.5], [-2.0]]),), {"normalized_ndim": 1, "eps": 1e-5,
                                                   "has_weight": False, "has_bias": False}),
           )),
    # convolution
    OpInfo("conv1d", _conv1d, _ref_conv1d, _conv1d_cases, (ops.Conv1d,),
           "conv1d: stride, dilation, left/right zero padding, bias or not",
           examples=(
               # one output step from a window that is all padding on the left
               Case((np.array([[[0.5, -1.0]]]), np.array([[[2.0, -0.5, 1.5]]])),
                    {"stride": 2, "padding": (2, 0), "dilation": 1}),
           )),
    # losses (torch.nn.functional signatures)
    OpInfo("cross_entropy", _cross_entropy, _ref_cross_entropy, _cross_entropy_cases,
           (ops.CrossEntropy,), "class ids; weights, ignore_index, smoothing",
           examples=(
               # every row ignored: the documented mean is 0.0 with zero gradient
               Case((np.array([[0.5, -1.0, 2.0], [1.0, 0.0, -2.0]]),),
                    {"target": np.array([-100, -100]), "weight": None, "ignore_index": -100,
                     "reduction": "mean", "label_smoothing": 0.2}),
           )),
    OpInfo("cross_entropy_plain", _cross_entropy, _ref_plain_cross_entropy,
           _plain_cross_entropy_cases, (ops.PlainCrossEntropy,),
           "class ids, no options: backward p - onehot(y)"),
    OpInfo("cross_entropy_probs", _cross_entropy, _ref_soft_cross_entropy,
           _soft_cross_entropy_cases, (ops.SoftCrossEntropy,),
           "class probabilities (both inputs)"),
    OpInfo("nll_loss", lambda x, **kw: F.nll_loss(x, **kw), _ref_nll, _nll_cases,
           (ops.NLLLoss,), "weights, ignored targets"),
    OpInfo("mse_loss", lambda a, b, reduction: F.mse_loss(a, b, reduction=reduction),
           _ref_mse, _mse_cases, (ops.MSELoss,), "mean squared error"),
    OpInfo("bce_with_logits",
           lambda x, t, **kw: F.binary_cross_entropy_with_logits(x, t, **kw),
           _ref_bce, _bce_cases, (ops.BCEWithLogits,), "weight and pos_weight"),
    OpInfo("bce", lambda x, t, **kw: F.binary_cross_entropy(x, t, **kw),
           _ref_bce_probabilities, _bce_probability_cases, (BinaryCrossEntropy,),
           "binary cross entropy of probabilities, every reduction",
           examples=(
               # confident predictions, weights broadcast along the last axis
               Case((np.array([[0.98, 0.03], [0.5, 0.3]]), np.array([[0.9, 0.1], [0.5, 0.2]])),
                    {"weight": np.array([2.0, 0.5]), "reduction": "mean"}),
           )),
    # copies, casts and device moves
    _unary("clone", lambda x: x.clone(), np.copy, _reals, (Copy,), "differentiable copy"),
    OpInfo("astype", _cast_round_trip, lambda x: x.copy(), _unary_cases(_reals),
           (Cast,) if HAS_WIDE_FLOAT else (), "float64 -> longdouble -> float64 cast"),
    OpInfo("to_device", _device_round_trip, lambda x: x.copy(), _unary_cases(_reals),
           (ToDevice,), "copy to another device and back"),
)

BY_NAME: dict[str, OpInfo] = {op.name: op for op in REGISTRY}
assert len(BY_NAME) == len(REGISTRY), "registry names must be unique"
