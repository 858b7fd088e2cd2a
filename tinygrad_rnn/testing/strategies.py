"""Hypothesis strategies for property tests of ops, cells and modules, and
:func:`gradient_property`, a ``given``-style decorator around
:func:`~tinygrad_rnn.testing.check_function`.

This module needs `hypothesis <https://hypothesis.readthedocs.io>`_ (a test dependency);
``tinygrad_rnn.testing`` imports it only when one of its names is first used.

Each strategy returns a hypothesis ``SearchStrategy``:

:func:`arrays`, :func:`tensors`
    float64 (by default) NumPy arrays / Tensors with bounded elements, optionally kept away
    from a kink at 0 (``min_magnitude``).
:func:`broadcastable_shapes`, :func:`shape_pairs`
    Shapes that broadcast together, size-0 sides included.
:func:`recurrent_weights`
    Well-conditioned recurrent weights with a spectral radius in a chosen range, plus
    matching input weights and biases (torch layout, gates stacked).
:func:`padded_sequences`
    A padded batch ``x`` (``(T, N, D)`` or batch-first) and its ``lengths``; the padded steps
    hold junk so that code that reads them gives visibly wrong results.
:func:`token_ids`
    Integer ids in ``[0, vocab_size)``, optionally with invalid ones.
:func:`gradient_property`
    A ``given``-style decorator: a property test in a few lines.
:func:`cases_of`
    The domain of an op of the registry (:mod:`.registry`) as a strategy of cases: its
    sampler run on :class:`HypothesisDraw`, whose every choice is a hypothesis draw.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import hypothesis
import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ..backend import is_float_dtype
from ..tensor import Tensor
from .checks import CheckOptions, check_function
from .registry import GRID, Case, Draw, OpInfo

__all__ = [
    "arrays", "tensors", "broadcastable_shapes", "shape_pairs", "recurrent_weights",
    "RecurrentWeights", "padded_sequences", "PaddedSequences", "token_ids",
    "gradient_property", "HypothesisDraw", "cases_of",
]

SearchStrategy = st.SearchStrategy
_Shape = Any  # None, int, tuple of ints, or a strategy of tuples


# ============================================================================= strategies
def _as_strategy(value: Any) -> SearchStrategy:
    return value if isinstance(value, SearchStrategy) else st.just(value)


def _shape_strategy(shape: _Shape, min_dims: int, max_dims: int, min_side: int,
                    max_side: int) -> SearchStrategy:
    if shape is None:
        return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                                max_side=max_side)
    if isinstance(shape, SearchStrategy):
        return shape
    if isinstance(shape, (int, np.integer)):
        return st.just((int(shape),))
    return st.just(tuple(int(s) for s in shape))


def _representable(value: float, dtype: np.dtype, inward: float) -> float:
    """``value`` rounded to ``dtype`` and, if rounding moved it outward, stepped back in."""
    v = dtype.type(value)
    # compare as Python floats: under NEP 50 `float32 < float` would round the float first
    if (inward > 0 and float(v) < value) or (inward < 0 and float(v) > value):
        v = np.nextafter(v, dtype.type(inward * np.inf))
    return float(v)


def _float_range(dtype: np.dtype, lo: float, hi: float) -> SearchStrategy:
    width: Any = dtype.itemsize * 8  # 16, 32 or 64: st.floats takes these literals
    lo_r = _representable(lo, dtype, +1)
    hi_r = _representable(hi, dtype, -1)
    return st.floats(min_value=lo_r, max_value=hi_r, width=width, allow_nan=False,
                     allow_infinity=False, allow_subnormal=False)


def _elements(dtype: np.dtype, min_value: float, max_value: float,
              min_magnitude: float) -> SearchStrategy:
    if min_value > max_value:
        raise ValueError(f"min_value {min_value} is larger than max_value {max_value}")
    if dtype.kind == "b":
        return st.booleans()
    if dtype.kind in "iu":
        lo, hi = int(np.ceil(min_value)), int(np.floor(max_value))
        if min_magnitude > 0:
            m = int(np.ceil(min_magnitude))
            parts = []
            if hi >= max(lo, m):
                parts.append(st.integers(max(lo, m), hi))
            if lo <= min(hi, -m):
                parts.append(st.integers(lo, min(hi, -m)))
            if not parts:
                raise ValueError(f"no integer in [{lo}, {hi}] has magnitude >= {m}")
            return st.one_of(*parts)
        return st.integers(lo, hi)
    if dtype.kind != "f":
        raise TypeError(f"arrays: unsupported dtype {dtype}")
    if min_magnitude < 0:
        raise ValueError(f"min_magnitude must be >= 0, got {min_magnitude}")
    if min_magnitude == 0:
        return _float_range(dtype, min_value, max_value)
    parts = []
    if max_value >= max(min_value, min_magnitude):
        parts.append(_float_range(dtype, max(min_value, min_magnitude), max_value))
    if min_value <= min(max_value, -min_magnitude):
        parts.append(_float_range(dtype, min_value, min(max_value, -min_magnitude)))
    if not parts:
        raise ValueError(
            f"no value in [{min_value}, {max_value}] has magnitude >= {min_magnitude}"
        )
    return st.one_of(*parts)


def arrays(shape: _Shape = None, *, dtype: Any = np.float64, min_value: float = -1.0,
           max_value: float = 1.0, min_magnitude: float = 0.0,
           elements: SearchStrategy | None = None, min_dims: int = 1, max_dims: int = 3,
           min_side: int = 1, max_side: int = 4, unique: bool = False) -> SearchStrategy:
    """NumPy arrays with bounded, finite elements: float64 unless told otherwise.

    Parameters
    ----------
    shape : None, int, tuple of int, or strategy of tuples
        The shape; ``None`` draws one with ``min_dims..max_dims`` axes of
        ``min_side..max_side`` elements (``min_side=0`` allows empty arrays).
    dtype : dtype
        Float (default float64), integer or bool. Float bounds are rounded inward to values
        representable in ``dtype``.
    min_value, max_value : float
        Bounds of the elements (inclusive). Keep tanh/sigmoid pre-activations modest (a few
        units) so gradient checks do not sit on saturated, nearly flat regions.
    min_magnitude : float
        Draw only elements with ``|x| >= min_magnitude``: keeps inputs away from a kink at 0
        (relu, abs, maximum) instead of loosening tolerances.
    elements : strategy, optional
        Overrides the three bounds above.
    unique : bool
        All elements distinct (useful for max/argmax, whose gradient is ambiguous at ties).

    Returns
    -------
    SearchStrategy of numpy.ndarray

    Examples
    --------
    >>> from hypothesis import given
    >>> @given(arrays((2, 3), min_value=-2, max_value=2, min_magnitude=0.1))
    ... def test_bounds(a):
    ...     assert a.shape == (2, 3) and a.dtype == np.float64
    ...     assert np.all((np.abs(a) >= 0.1) & (np.abs(a) <= 2))
    >>> test_bounds()
    """
    dt = np.dtype(dtype)
    elems = elements if elements is not None else _elements(dt, min_value, max_value,
                                                            min_magnitude)
    shapes = _shape_strategy(shape, min_dims, max_dims, min_side, max_side)
    return hnp.arrays(dt, shapes, elements=elems, unique=unique)


def tensors(shape: _Shape = None, *, requires_grad: bool = True, dtype: Any = np.float64,
            **array_kwargs: Any) -> SearchStrategy:
    """Like :func:`arrays`, but each draw is a :class:`~tinygrad_rnn.Tensor`.

    ``requires_grad`` (default True) applies to floating-point dtypes only; integer and bool
    tensors never require a gradient. All other keyword arguments are those of
    :func:`arrays`.

    Examples
    --------
    >>> from hypothesis import given
    >>> @given(tensors((3,), min_value=-1, max_value=1))
    ... def test_tensor(x):
    ...     assert x.requires_grad and x.dtype == np.float64 and x.shape == (3,)
    >>> test_tensor()
    """
    grad = bool(requires_grad) and is_float_dtype(dtype)
    return arrays(shape, dtype=dtype, **array_kwargs).map(
        lambda a: Tensor(a, requires_grad=grad)
    )


def broadcastable_shapes(num_shapes: int = 2, *, min_dims: int = 0, max_dims: int = 3,
                         min_side: int = 0, max_side: int = 4,
                         base_shape: tuple = ()) -> SearchStrategy:
    """``num_shapes`` shapes that broadcast together, and the shape they broadcast to.

    A thin wrapper over ``hypothesis.extra.numpy.mutually_broadcastable_shapes`` with
    defaults suited to gradient tests: up to 3 axes of up to 4 elements, size-0 sides
    allowed (``min_side=0``), which exercises ``sum_to_shape`` on empty gradients.

    Returns
    -------
    SearchStrategy of ``BroadcastableShapes(input_shapes, result_shape)`` (a named tuple).

    Examples
    --------
    >>> from hypothesis import given
    >>> @given(broadcastable_shapes(3))
    ... def test_shapes(s):
    ...     out = np.broadcast_shapes(*s.input_shapes)
    ...     assert out == s.result_shape
    >>> test_shapes()
    """
    return hnp.mutually_broadcastable_shapes(
        num_shapes=num_shapes, base_shape=tuple(base_shape), min_dims=min_dims,
        max_dims=max_dims, min_side=min_side, max_side=max_side,
    )


def shape_pairs(*, min_dims: int = 0, max_dims: int = 3, min_side: int = 0,
                max_side: int = 4) -> SearchStrategy:
    """Pairs ``(shape_a, shape_b)`` that broadcast together (e.g. ``(N, H)`` and ``(H,)``).

    Examples
    --------
    >>> from hypothesis import given
    >>> @given(shape_pairs())
    ... def test_pair(pair):
    ...     np.broadcast_shapes(*pair)  # never raises
    >>> test_pair()
    """
    return broadcastable_shapes(2, min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                                max_side=max_side).map(lambda s: tuple(s.input_shapes))


class RecurrentWeights(NamedTuple):
    """Weights drawn by :func:`recurrent_weights` (names and layout as in ``torch.nn.RNN``).

    Attributes
    ----------
    weight_ih : ndarray, (G*H, D)
        Input weights, gate blocks stacked along axis 0 (G = ``num_gates``).
    weight_hh : ndarray, (G*H, H)
        Recurrent weights; each of the G blocks ``(H, H)`` has spectral radius
        ``spectral_radius``.
    bias_ih, bias_hh : ndarray (G*H,) or None
    spectral_radius : float
        The spectral radius (largest eigenvalue modulus) of every recurrent block.
    """

    weight_ih: np.ndarray
    weight_hh: np.ndarray
    bias_ih: np.ndarray | None
    bias_hh: np.ndarray | None
    spectral_radius: float


def random_orthogonal(n: int, rng: np.random.Generator) -> np.ndarray:
    """A random ``(n, n)`` orthogonal matrix, uniformly distributed (Haar measure).

    QR of a Gaussian matrix, with the signs of R's diagonal moved into Q so that the
    distribution does not depend on the QR routine's sign convention.
    """
    a = rng.standard_normal((n, n))
    q, r = np.linalg.qr(a)
    signs = np.sign(np.diag(r))
    signs[signs == 0] = 1.0
    return q * signs  # scales column j by signs[j]


def spectral_radius(w: np.ndarray) -> float:
    """Largest eigenvalue modulus of a square matrix."""
    return float(np.max(np.abs(np.linalg.eigvals(w))))


def _recurrent_block(rng: np.random.Generator, h: int, radius: float, kind: str) -> np.ndarray:
    if kind == "orthogonal":
        return radius * random_orthogonal(h, rng)
    a = rng.standard_normal((h, h))
    rho = spectral_radius(a)
    if rho < 1e-6:  # (practically never) a near-nilpotent draw: fall back to orthogonal
        return radius * random_orthogonal(h, rng)
    return a * (radius / rho)


def recurrent_weights(hidden_size: int | SearchStrategy, input_size: Any = None, *,
                      spectral_radius: float | tuple[float, float] = (0.5, 1.0),
                      num_gates: int = 1, kind: str = "orthogonal", input_scale: float = 1.0,
                      bias: bool = True, bias_scale: float = 0.1,
                      dtype: Any = np.float64) -> SearchStrategy:
    """Well-conditioned recurrent weights with a spectral radius in a chosen range.

    Parameters
    ----------
    hidden_size, input_size : int or strategy of int
        H and D; ``input_size=None`` uses ``hidden_size``.
    spectral_radius : float or (low, high)
        The spectral radius r of each recurrent block is drawn from ``[low, high]``. Below 1
        gradients through time vanish geometrically, above 1 they can explode: sweep it.
    num_gates : int
        G blocks stacked along axis 0: 1 for Elman RNN, 3 for GRU, 4 for LSTM (torch order).
    kind : {'orthogonal', 'rescaled'}
        ``'orthogonal'``: r times a random orthogonal matrix; every eigenvalue *and* every
        singular value equals r, so ``||W^k|| = r^k`` exactly (the cleanest case for
        studying vanishing gradients). ``'rescaled'``: a Gaussian matrix divided by its own
        spectral radius and multiplied by r; non-normal, so powers can grow transiently
        before decaying like r^k (closer to a trained network).
    input_scale : float
        ``weight_ih`` is Gaussian with standard deviation ``input_scale / sqrt(D)``.
    bias, bias_scale : bool, float
        Biases uniform in ``[-bias_scale, bias_scale]`` (or ``None`` when ``bias=False``).
    dtype : dtype
        float64 by default (the spectral radius is exact in float64).

    Returns
    -------
    SearchStrategy of :class:`RecurrentWeights`

    Examples
    --------
    >>> from hypothesis import given
    >>> @given(recurrent_weights(4, 3, spectral_radius=(0.9, 1.1)))
    ... def test_radius(w):
    ...     rho = np.max(np.abs(np.linalg.eigvals(w.weight_hh)))
    ...     assert 0.9 <= w.spectral_radius <= 1.1 and np.isclose(rho, w.spectral_radius)
    ...     assert w.weight_ih.shape == (4, 3)
    >>> test_radius()
    """
    if isinstance(spectral_radius, (int, float, np.floating)):
        lo = hi = float(spectral_radius)
    else:
        lo, hi = (float(v) for v in spectral_radius)
    if not 0 <= lo <= hi:
        raise ValueError(f"spectral_radius range must satisfy 0 <= low <= high, got {lo, hi}")
    if kind not in ("orthogonal", "rescaled"):
        raise ValueError(f"kind must be 'orthogonal' or 'rescaled', got {kind!r}")
    if num_gates < 1:
        raise ValueError(f"num_gates must be >= 1, got {num_gates}")
    hs = _as_strategy(hidden_size)
    ds = hs if input_size is None else _as_strategy(input_size)
    radii = st.just(lo) if lo == hi else st.floats(lo, hi, allow_nan=False)
    dt = np.dtype(dtype)

    @st.composite
    def draw_weights(draw: Callable) -> RecurrentWeights:
        h = draw(hs)
        d = h if input_size is None else draw(ds)
        radius = draw(radii)
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        w_hh = np.concatenate([_recurrent_block(rng, h, radius, kind)
                               for _ in range(num_gates)], axis=0)  # (G*H, H)
        w_ih = rng.standard_normal((num_gates * h, d)) * (input_scale / np.sqrt(max(d, 1)))
        b_ih = b_hh = None
        if bias:
            b_ih = rng.uniform(-bias_scale, bias_scale, num_gates * h).astype(dt)
            b_hh = rng.uniform(-bias_scale, bias_scale, num_gates * h).astype(dt)
        return RecurrentWeights(w_ih.astype(dt), w_hh.astype(dt), b_ih, b_hh, radius)

    return draw_weights()


class PaddedSequences(NamedTuple):
    """A padded batch drawn by :func:`padded_sequences`.

    Attributes
    ----------
    x : ndarray
        ``(T, N, D)``, or ``(N, T, D)`` when ``batch_first``. Steps ``t >= lengths[n]`` hold
        junk.
    lengths : ndarray of int64, (N,)
        Valid length of each sequence, ``0 <= lengths[n] <= T``.
    batch_first : bool
    """

    x: np.ndarray
    lengths: np.ndarray
    batch_first: bool

    @property
    def mask(self) -> np.ndarray:
        """Boolean mask, True at valid steps: ``(T, N)``, or ``(N, T)`` when batch_first."""
        t_axis = 1 if self.batch_first else 0
        steps = np.arange(self.x.shape[t_axis])
        mask_nt = steps[None, :] < self.lengths[:, None]  # (N, T)
        return mask_nt if self.batch_first else mask_nt.T


def padded_sequences(max_batch: int = 4, max_time: int = 6, input_size: Any = 3, *,
                     min_batch: int = 1, min_time: int = 1, min_length: int = 0,
                     batch_first: bool = False, enforce_sorted: bool = False,
                     min_value: float = -1.0, max_value: float = 1.0,
                     junk: float | str = 1e6, dtype: Any = np.float64) -> SearchStrategy:
    """Padded batches of variable-length sequences whose padding holds junk.

    Parameters
    ----------
    max_batch, min_batch : int
        Range of the batch size N.
    max_time, min_time : int
        Range of the padded length T.
    input_size : int or strategy of int
        D.
    min_length : int
        Smallest valid length (default 0: empty sequences are included). At most
        ``min_time``.
    batch_first : bool
        ``x`` is ``(N, T, D)`` instead of ``(T, N, D)``.
    enforce_sorted : bool
        Lengths in decreasing order (what a packed-sequence routine may require).
    min_value, max_value : float
        Bounds of the valid entries.
    junk : float or 'nan'
        Padded entries are uniform in ``[-junk, junk]`` (default 1e6: reading them saturates
        every activation and changes results visibly), or NaN with ``'nan'`` (which poisons
        anything that touches them, even ``0 * x``).
    dtype : dtype
        Of ``x`` (float64 by default).

    Returns
    -------
    SearchStrategy of :class:`PaddedSequences` ``(x, lengths, batch_first)``

    Examples
    --------
    >>> from hypothesis import given
    >>> @given(padded_sequences(max_batch=3, max_time=5, input_size=2))
    ... def test_padding(batch):
    ...     x, lengths, _ = batch
    ...     assert x.shape[2] == 2 and np.all((0 <= lengths) & (lengths <= x.shape[0]))
    ...     assert np.all(np.abs(x[batch.mask]) <= 1)  # valid steps hold real data
    >>> test_padding()
    """
    if not 1 <= min_batch <= max_batch:
        raise ValueError(f"need 1 <= min_batch <= max_batch, got {min_batch}, {max_batch}")
    if not 1 <= min_time <= max_time:
        raise ValueError(f"need 1 <= min_time <= max_time, got {min_time}, {max_time}")
    if not 0 <= min_length <= min_time:
        raise ValueError(f"need 0 <= min_length <= min_time, got {min_length}, {min_time}")
    if isinstance(junk, str) and junk != "nan":
        raise ValueError(f"junk must be a float or 'nan', got {junk!r}")
    dt = np.dtype(dtype)
    if dt.kind != "f":
        raise TypeError(f"padded_sequences: dtype must be a float dtype, got {dt}")
    elems = _elements(dt, min_value, max_value, 0.0)
    sizes = _as_strategy(input_size)

    @st.composite
    def draw_batch(draw: Callable) -> PaddedSequences:
        n = draw(st.integers(min_batch, max_batch))
        t = draw(st.integers(min_time, max_time))
        d = draw(sizes)
        lengths = np.array(draw(st.lists(st.integers(min_length, t), min_size=n,
                                         max_size=n)), dtype=np.int64)
        if enforce_sorted:
            lengths = np.sort(lengths)[::-1].copy()
        x = draw(hnp.arrays(dt, (t, n, d), elements=elems))  # (T, N, D)
        pad = np.arange(t)[:, None] >= lengths[None, :]  # (T, N)
        if pad.any():
            rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
            if junk == "nan":
                x[pad] = np.nan
            else:
                scale = float(junk)
                x[pad] = rng.uniform(-scale, scale, size=(int(pad.sum()), d)).astype(dt)
        if batch_first:
            x = np.ascontiguousarray(x.transpose(1, 0, 2))  # (N, T, D)
        return PaddedSequences(x, lengths, batch_first)

    return draw_batch()


def token_ids(vocab_size: int, shape: _Shape = None, *, min_dims: int = 1, max_dims: int = 2,
              min_side: int = 1, max_side: int = 5, allow_invalid: bool = False,
              require_invalid: bool = False, dtype: Any = np.int64) -> SearchStrategy:
    """Integer token ids for an embedding or a loss.

    Parameters
    ----------
    vocab_size : int
        V; valid ids are ``0 .. V-1``.
    shape, min_dims, max_dims, min_side, max_side
        As in :func:`arrays`.
    allow_invalid : bool
        Ids may also be negative (down to ``-V - 2``) or ``>= V`` (up to ``2V + 2``), for
        testing that invalid ids are refused. Both ranges are clipped to what ``dtype`` can
        hold (``int8`` with ``V = 100``: invalid ids are -102..-1 and 100..127); a dtype that
        holds no invalid id at all (``uint8`` with ``V = 256``) is a ``ValueError``.
    require_invalid : bool
        Every draw holds at least one invalid id (implies ``allow_invalid``; needs
        non-empty arrays).
    dtype : integer dtype
        Must hold every valid id ``0 .. V-1``.

    Examples
    --------
    >>> from hypothesis import given
    >>> @given(token_ids(7, (2, 3)))
    ... def test_ids(ids):
    ...     assert ids.shape == (2, 3) and ids.min() >= 0 and ids.max() < 7
    >>> test_ids()
    """
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)):
        raise TypeError(f"token_ids: vocab_size must be an integer, got "
                        f"{type(vocab_size).__name__} {vocab_size!r}")
    vocab_size = int(vocab_size)
    if vocab_size < 1:
        raise ValueError(f"token_ids: vocab_size must be >= 1, got {vocab_size}")
    dt = np.dtype(dtype)
    if dt.kind not in "iu":
        raise TypeError(f"token_ids: dtype must be an integer dtype, got {dt}")
    info = np.iinfo(dt)
    if vocab_size - 1 > info.max:
        raise ValueError(f"token_ids: vocab_size {vocab_size} needs ids up to "
                         f"{vocab_size - 1}, but the largest {dt} is {info.max}; use a wider "
                         f"dtype")
    valid = st.integers(0, vocab_size - 1)
    allow_invalid = allow_invalid or require_invalid
    # the invalid ranges, clipped to what dt can hold
    lowest, highest = max(-vocab_size - 2, int(info.min)), min(2 * vocab_size + 2, int(info.max))
    ranges = [(lo, hi) for lo, hi in ((lowest, -1), (vocab_size, highest)) if lo <= hi]
    if allow_invalid and not ranges:
        raise ValueError(f"token_ids: with vocab_size {vocab_size} every {dt} from 0 to "
                         f"{info.max} is a valid id, so there is no invalid id to draw; use "
                         f"a wider dtype")
    invalid = st.one_of(*(st.integers(lo, hi) for lo, hi in ranges)) if ranges else None
    elements = st.one_of(valid, invalid) if allow_invalid and invalid is not None else valid
    shapes = _shape_strategy(shape, min_dims, max_dims, max(min_side, int(require_invalid)),
                             max_side)
    base = hnp.arrays(dt, shapes, elements=elements)
    if not require_invalid:
        return base

    @st.composite
    def with_invalid(draw: Callable) -> np.ndarray:
        ids = draw(base)
        hypothesis.assume(ids.size > 0)
        if not np.any((ids < 0) | (ids >= vocab_size)):
            pos = draw(st.integers(0, ids.size - 1))
            ids.reshape(-1)[pos] = draw(invalid)
        return ids

    return with_invalid()


# ============================================================================= given-style
def gradient_property(*strategies: SearchStrategy, **check_kwargs: Any) -> Callable:
    """Decorator: a hypothesis property test that :func:`check_function` passes.

    The decorated function receives one drawn value per strategy and returns the output(s)
    to differentiate; the decorator turns it into a zero-argument test (pytest collects it
    like any ``test_*`` function) that, for every draw, runs
    ``check_function(fn, *drawn, **check_kwargs)``. Stack ``@hypothesis.settings(...)`` on
    top to change the number of examples.

    Examples
    --------
    >>> import tinygrad_rnn as tr
    >>> @gradient_property(tensors((3, 2), min_value=-2, max_value=2),
    ...                    tensors((2,), min_value=-1, max_value=1))
    ... def test_bias_tanh(x, b):
    ...     return (x + b).tanh()  # (N, H) + (H,): the RNN bias case
    >>> test_bias_tanh()
    """
    if not strategies:
        raise TypeError("gradient_property needs at least one strategy")
    CheckOptions(**{k: v for k, v in check_kwargs.items() if k in CheckOptions.__annotations__})

    def decorate(fn: Callable) -> Callable:
        def test(drawn: tuple) -> None:
            check_function(fn, *drawn, **check_kwargs)

        # name the test after fn (what pytest reports), but keep its own signature: no
        # functools.wraps, whose __wrapped__ would make hypothesis see fn's parameters
        for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(test, attr, getattr(fn, attr, getattr(test, attr)))
        return hypothesis.given(st.tuples(*strategies))(test)

    return decorate


# ============================================================================= the registry
def _floats(lo: float, hi: float) -> SearchStrategy:
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False, allow_subnormal=False)


def _off_grid_value(k: int, u: float) -> float:
    return GRID * k + u


class HypothesisDraw(Draw):
    """The registry's :class:`~tinygrad_rnn.testing.registry.Draw` on hypothesis: each value
    is drawn from the hypothesis strategy that describes it (``hnp.array_shapes``,
    ``hnp.mutually_broadcastable_shapes``, ``hnp.basic_indices``, ``hnp.arrays`` of bounded
    floats...), so the samplers get hypothesis's edge cases and shrinking."""

    def __init__(self, draw: Callable) -> None:
        self.draw = draw

    def integers(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def side(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def boolean(self) -> bool:
        return self.draw(st.booleans())

    def choice(self, options: Any) -> Any:
        return self.draw(st.sampled_from(options))

    def floats(self, lo: float, hi: float) -> float:
        return self.draw(_floats(lo, hi))

    def permutation(self, items: Any) -> list:
        return list(self.draw(st.permutations(items)))

    def integer_list(self, lo: int, hi: int, max_size: int, unique: bool = False) -> list:
        return self.draw(st.lists(st.integers(lo, hi), max_size=max_size, unique=unique))

    def assume(self, condition: bool) -> None:
        hypothesis.assume(condition)

    def shape(self, min_dims: int = 0, max_dims: int = 3, min_side: int = 0,
              max_side: int = 3) -> tuple:
        return self.draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims,
                                          min_side=min_side, max_side=max_side))

    def broadcastable_shapes(self, count: int, min_dims: int = 0, max_dims: int = 3,
                             min_side: int = 0, max_side: int = 3) -> tuple:
        return tuple(self.draw(hnp.mutually_broadcastable_shapes(
            num_shapes=count, min_dims=min_dims, max_dims=max_dims, min_side=min_side,
            max_side=max_side)).input_shapes)

    def basic_index(self, shape: tuple) -> Any:
        return self.draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))

    def reals(self, shape: tuple, lo: float = -3.0, hi: float = 3.0) -> np.ndarray:
        return self.draw(hnp.arrays(np.float64, shape, elements=_floats(lo, hi)))

    def nonzero(self, shape: tuple, lo: float = 0.5, hi: float = 3.0) -> np.ndarray:
        return self.draw(hnp.arrays(np.float64, shape,
                                    elements=_floats(-hi, -lo) | _floats(lo, hi)))

    def off_grid(self, shape: tuple) -> np.ndarray:
        value = st.builds(_off_grid_value, st.integers(-12, 11), _floats(0.05, 0.2))
        return self.draw(hnp.arrays(np.float64, shape, elements=value))

    def on_grid(self, shape: tuple) -> np.ndarray:
        value = st.integers(-12, 12).map(lambda k: GRID * k)
        return self.draw(hnp.arrays(np.float64, shape, elements=value))

    def distinct(self, shape: tuple) -> np.ndarray:
        size = int(np.prod(shape, dtype=np.int64))
        ranks = np.array(self.permutation(range(size)), dtype=np.float64)
        jitter = self.draw(hnp.arrays(np.float64, (size,), elements=_floats(0.0, 0.04)))
        return ((ranks - size / 2) * 0.1 + jitter).reshape(shape)

    def signs(self, shape: tuple) -> np.ndarray:
        return self.draw(hnp.arrays(np.float64, shape, elements=st.sampled_from([-1.0, 1.0])))

    def bools(self, shape: tuple) -> np.ndarray:
        return self.draw(hnp.arrays(np.bool_, shape))

    def int_array(self, shape: tuple, lo: int, hi: int) -> np.ndarray:
        return self.draw(hnp.arrays(np.int64, shape, elements=st.integers(lo, hi)))


_CASES: dict = {}


def cases_of(op: OpInfo) -> SearchStrategy:
    """The hypothesis strategy of :class:`~tinygrad_rnn.testing.registry.Case` objects of
    ``op``: its sampler driven by :class:`HypothesisDraw` (``op.cases`` is this)."""
    if op.name not in _CASES or _CASES[op.name][0] is not op:

        @st.composite
        def cases(draw: Callable) -> Case:
            return op.sample(HypothesisDraw(draw))

        _CASES[op.name] = (op, cases())
    return _CASES[op.name][1]
