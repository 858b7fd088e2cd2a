"""Shared pieces of the explicit BPTT kernels: the sigmoid, argument checks, masks, state slots.

Everything here works on raw backend arrays (NumPy, CuPy or the stand-in device) and imports
nothing above :mod:`tinygrad_rnn.backend`.

Devices
-------
The kernels run on the device of their inputs: every array call goes through the inputs'
array module ``xp``, and all arguments of one call must live on one device (a RuntimeError
names the two devices otherwise). ``lengths`` is the one exception: like PyTorch, which wants
sequence lengths as a CPU tensor, the kernels take them on the host (a list or NumPy array),
validate them there, build the step mask there and copy the mask to the device once. Lengths
given as device data are refused with a TypeError rather than copied back silently.

The sigmoid used by every kernel
--------------------------------
All gates use the identity ``sigma(a) = 0.5 * tanh(0.5 * a) + 0.5``. It is branch-free, never
overflows (``tanh`` saturates at +-1), works in place, and costs one ``tanh`` plus two cheap
passes. Its error is *absolute*: at most about one ulp of 1 (1.1e-16 in float64, 6e-8 in
float32). Relative accuracy is lost only where sigma(a) itself drops below machine epsilon
(a < -37 in float64), where a gate value of 0 instead of 1e-17 changes nothing downstream.
The fused sequence kernels go one step further: they pre-scale the sigmoid rows of the weights
and biases by 0.5 (exact in binary floating point), so a single in-place ``tanh`` covers the
sigmoid gates and the ``tanh`` gate together and only ``0.5 * t + 0.5`` remains.

Padded steps
------------
With ``lengths``, the values a caller puts at padded steps (``x`` and the upstream ``dhs``
there) are dropped with *selects*, never with 0/1 multiplications: ``0 * inf`` and
``0 * nan`` are NaN, so a multiplication would let garbage in the padding turn every
gradient into NaN. The forward kernels replace the padded rows of ``x`` by 0 before the
input projection (:func:`select_valid`, on a copy; the cache keeps that copy, so the weight
gradient GEMM never sees them either), and the backward kernels select 0 for the padded
entries of ``dhs`` and of the gate-derivative factors (:meth:`StepMask.rows`). Inputs
without inf or NaN give the same numbers either way.

The recurrent GEMM in column form
---------------------------------
Per step the fused forward kernels compute W_hh h_{t-1}^T, a (G*H, N) product with the weight
as the *left* operand, into a preallocated buffer, and add its transpose into the gate rows.
The numbers are those of h_{t-1} W_hh^T; the point is speed: with a small batch N, OpenBLAS
runs this orientation up to 1.8x faster (measured on AVX-512 kernels; equal on AVX2 ones),
and the transposed add costs far less than the difference.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..backend import device_of, get_array_module

#: A NumPy or CuPy array (the kernels are written once for both).
Array = Any


# --------------------------------------------------------------------------------------------
# sigmoid
# --------------------------------------------------------------------------------------------
def sigmoid(a: Array, xp: Any) -> Array:
    """Return sigma(a) = 0.5 * tanh(0.5 * a) + 0.5 as a new array (stable for any ``a``)."""
    out = xp.multiply(a, 0.5)
    xp.tanh(out, out=out)
    out *= 0.5
    out += 0.5
    return out


def tanh_half_to_sigmoid_(t: Array) -> Array:
    """In place: turn t = tanh(0.5 * a) into sigma(a) = 0.5 * t + 0.5."""
    t *= 0.5
    t += 0.5
    return t


# --------------------------------------------------------------------------------------------
# argument checks
# --------------------------------------------------------------------------------------------
def _shape(a: Array) -> tuple[int, ...]:
    return tuple(int(s) for s in a.shape)


def _is_array(a: Any) -> bool:
    """True for a NumPy, CuPy or stand-in array (anything with a shape, a dtype and ndim)."""
    return all(hasattr(a, attr) for attr in ("shape", "dtype", "ndim"))


def check_array(fname: str, name: str, a: Any, hint: str = "", optional: bool = False) -> None:
    """An array argument must be an array (``optional``: an array or None, and None is not
    checked here); TypeError naming ``fname``, ``name`` and the type that was given otherwise
    (``hint`` is appended to the message)."""
    if not _is_array(a):
        what = "an array or None" if optional else "an array"
        raise TypeError(f"{fname}: {name} must be {what}, got {type(a).__name__}{hint}")


def check_flag(fname: str, name: str, value: Any) -> None:
    """A switch must be a bool (``bool`` or ``numpy.bool_``) or the integer 0 or 1 (Python or
    NumPy; ``reverse=1`` is a common spelling): plain truthiness would let ``reverse="no"``
    mean True, so strings, other integers, floats and None are a TypeError."""
    if not (isinstance(value, (bool, np.bool_))
            or isinstance(value, (int, np.integer)) and value in (0, 1)):
        raise TypeError(f"{fname}: {name} must be a bool (True or False), got {value!r} of "
                        f"type {type(value).__name__}")


def check_cache(fname: str, cache: Any, cls: type, producer: str) -> None:
    """A backward function must get the cache of its own forward function."""
    if not isinstance(cache, cls):
        raise TypeError(f"{fname}: cache must be the {cls.__name__} returned by {producer}, "
                        f"got {type(cache).__name__}")


class Sizes(NamedTuple):
    """Sizes read off validated arguments: T time (0 for a single step), N batch, D input,
    H hidden."""

    T: int
    N: int
    D: int
    H: int


def check_recurrent_args(
    fname: str,
    gates: int,
    x: Array,
    h0: Array,
    weight_ih: Array,
    weight_hh: Array,
    bias_ih: Array | None,
    bias_hh: Array | None,
    *,
    sequence: bool,
    cell: bool = False,
    c0: Array | None = None,
    weight_ch: Array | None = None,
    peepholes: int = 0,
    x_name: str = "x",
    h_name: str = "h0",
    c_name: str = "c0",
) -> Sizes:
    """Validate shapes and dtypes of a recurrent call; raise ValueError/TypeError naming
    ``fname`` and the full shapes involved. Returns the sizes (T, N, D, H).

    ``x`` is (T, N, D) when ``sequence`` else (N, D); ``h0`` is (N, H) and fixes H. ``x``,
    ``h0`` and the two weights must be arrays, and so must ``c0`` when ``cell`` (the LSTM):
    the kernels take explicit states, None is no zero state here (the layers make zeros).
    """
    state_hint = (" (the kernels take explicit states: pass zeros of shape (batch, "
                  "hidden_size) for a fresh start)")
    check_array(fname, x_name, x)
    check_array(fname, h_name, h0, state_hint if h0 is None else "")
    if cell:
        check_array(fname, c_name, c0, state_hint if c0 is None else "")
    check_array(fname, "weight_ih", weight_ih)
    check_array(fname, "weight_hh", weight_hh)
    gate_txt = f"{gates}*hidden_size" if gates > 1 else "hidden_size"
    want_x = "(T, N, D) = (time, batch, input_size)" if sequence else "(N, D) = (batch, input)"
    xdim = 3 if sequence else 2
    if x.ndim != xdim:
        raise ValueError(f"{fname}: {x_name} must be {xdim}-D {want_x} but has shape "
                         f"{_shape(x)}")
    xs = _shape(x)
    T = xs[0] if sequence else 0
    N, D = xs[-2], xs[-1]
    if h0.ndim != 2 or int(h0.shape[0]) != N:
        raise ValueError(f"{fname}: {h_name} has shape {_shape(h0)} but expected (batch, "
                         f"hidden_size) with batch = {N} for {x_name} of shape {xs}")
    H = int(h0.shape[1])
    ctx = f"for {x_name} of shape {xs} and {h_name} of shape {_shape(h0)}"
    if c0 is not None:
        check_array(fname, c_name, c0)
        if _shape(c0) != (N, H):
            raise ValueError(f"{fname}: {c_name} has shape {_shape(c0)} but expected "
                             f"(batch, hidden_size) = {(N, H)} {ctx}")
    if _shape(weight_ih) != (gates * H, D):
        raise ValueError(f"{fname}: weight_ih has shape {_shape(weight_ih)} but expected "
                         f"({gate_txt}, input_size) = {(gates * H, D)} {ctx}")
    if _shape(weight_hh) != (gates * H, H):
        raise ValueError(f"{fname}: weight_hh has shape {_shape(weight_hh)} but expected "
                         f"({gate_txt}, hidden_size) = {(gates * H, H)} {ctx}")
    for name, b in (("bias_ih", bias_ih), ("bias_hh", bias_hh), ("weight_ch", weight_ch)):
        if b is not None:
            check_array(fname, name, b, optional=True)
    for name, b in (("bias_ih", bias_ih), ("bias_hh", bias_hh)):
        if b is not None and _shape(b) != (gates * H,):
            raise ValueError(f"{fname}: {name} has shape {_shape(b)} but expected "
                             f"({gate_txt},) = {(gates * H,)} {ctx}")
    if weight_ch is not None and _shape(weight_ch) != (peepholes * H,):
        raise ValueError(f"{fname}: weight_ch has shape {_shape(weight_ch)} but expected "
                         f"({peepholes}*hidden_size,) = {(peepholes * H,)} {ctx}")
    named = [(x_name, x), (h_name, h0), (c_name, c0), ("weight_ih", weight_ih),
             ("weight_hh", weight_hh), ("bias_ih", bias_ih), ("bias_hh", bias_hh),
             ("weight_ch", weight_ch)]
    check_same_float_dtype(fname, named)
    check_same_device(fname, named)
    return Sizes(T, N, D, H)


def check_same_device(fname: str, named: list[tuple[str, Array | None]]) -> None:
    """All given arrays must live on one device (no implicit copies between devices)."""
    present = [(n, a) for n, a in named if a is not None]
    if not present:
        return
    first_name, first = present[0]
    xp = get_array_module(first)
    for n, a in present[1:]:
        if get_array_module(a) is not xp:
            raise RuntimeError(
                f"{fname}: {first_name} is on {device_of(first)} but {n} is on "
                f"{device_of(a)}; move them to one device first (backend.to_device)")


def check_same_float_dtype(fname: str, named: list[tuple[str, Array | None]]) -> None:
    """All given arrays must share one floating dtype (no silent up- or down-casts)."""
    present = [(n, a) for n, a in named if a is not None]
    if not present:
        return
    first_name, first = present[0]
    if np.dtype(first.dtype).kind != "f":
        raise TypeError(f"{fname}: {first_name} must have a floating dtype, got {first.dtype}")
    for n, a in present[1:]:
        if np.dtype(a.dtype) != np.dtype(first.dtype):
            raise TypeError(f"{fname}: dtypes differ: {first_name} is {first.dtype} but {n} is "
                            f"{a.dtype}; cast them to one float dtype first")


def check_grad_arg(fname: str, name: str, g: Array | None, shape: tuple[int, ...],
                   dtype: Any, ref: Array | None = None) -> None:
    """An upstream gradient must be None or have the forward output's shape and dtype, and
    live on the device of ``ref`` (an array of the forward pass) when that is given."""
    if g is None:
        return
    if not _is_array(g):
        raise TypeError(f"{fname}: {name} must be an array of shape {tuple(shape)} or None, "
                        f"got {type(g).__name__}")
    if _shape(g) != tuple(shape):
        raise ValueError(f"{fname}: {name} has shape {_shape(g)} but the forward output it "
                         f"belongs to has shape {tuple(shape)}")
    if np.dtype(g.dtype) != np.dtype(dtype):
        raise TypeError(f"{fname}: {name} has dtype {g.dtype} but the forward pass ran in "
                        f"{np.dtype(dtype)}")
    if ref is not None:
        check_same_device(fname, [("the forward pass's data", ref), (name, g)])


def check_lengths(fname: str, lengths: Any, T: int, N: int) -> np.ndarray | None:
    """Validate host ``lengths`` (shape (N,), integer dtype, values in [0, T]) and return them
    as a NumPy array; None stays None. Lengths on a device raise a TypeError: they are read
    on the host (validation, mask), and the caller copies them there explicitly. An empty
    list or tuple is the lengths of an empty batch (N = 0); an empty NumPy array must have an
    integer dtype like any other."""
    if lengths is None:
        return None
    if get_array_module(lengths) is not np:
        raise TypeError(
            f"{fname}: lengths must be on the host (a list or NumPy array), as PyTorch "
            f"requires CPU lengths, but they are on {device_of(lengths)}; copy them to the "
            f"host explicitly (.get(), or Tensor.numpy())")
    given = lengths
    try:
        lengths = np.asarray(given)
    except ValueError as err:                  # ragged nesting, such as [1, [2]]
        raise ValueError(f"{fname}: lengths must be a flat sequence of {N} integers (one per "
                         f"sequence of the batch), got {given!r}") from err
    if lengths.size == 0 and not isinstance(given, np.ndarray):
        lengths = lengths.astype(np.int64)     # [] has no dtype of its own: the empty batch
    if _shape(lengths) != (N,):
        raise ValueError(f"{fname}: lengths has shape {_shape(lengths)} but expected "
                         f"(batch,) = {(N,)}")
    if lengths.dtype.kind not in "iu":
        raise ValueError(f"{fname}: lengths must have an integer dtype, got {lengths.dtype}")
    if N > 0:
        lo, hi = int(lengths.min()), int(lengths.max())
        bad = lo if lo < 0 else hi if hi > T else None
        if bad is not None:
            raise ValueError(f"{fname}: lengths contains {bad} but every length must lie in "
                             f"[0, T] with T = {T} (the time size of x)")
    return lengths


# --------------------------------------------------------------------------------------------
# masks and state slots
# --------------------------------------------------------------------------------------------
class StepMask(NamedTuple):
    """Which (t, n) are padded (t >= lengths[n]), for variable-length batches.

    ``invalid`` is the boolean (T, N, 1) mask on the device of the data, True at padded
    steps; the per-step carries select with it (``xp.copyto(h_t, h_prev, where=invalid[t])``).
    ``pad`` (2, P) lists the time and batch index of every padded step on the device, sorted
    by time, and ``pad_t`` is a host copy of its time row. Zeroing whole padded rows through
    these indices (:meth:`rows`) is a select, like ``copyto(..., where=invalid)``, but
    touches only the padded rows, which is several times faster.
    """

    invalid: Array
    pad: Array
    pad_t: np.ndarray

    @property
    def padded(self) -> bool:
        """Whether any step is padded at all."""
        return self.pad_t.size > 0

    def rows(self, t0: int, t1: int) -> tuple[Array, Array] | None:
        """The index ``(t - t0, n)`` of every padded step with t0 <= t < t1, for a block
        ``a`` holding the time indices t0..t1-1 on its first axis and the batch on its
        second (``a[rows] = 0`` zeroes those steps, whatever they held); None when the
        block has no padded step."""
        lo, hi = (int(i) for i in np.searchsorted(self.pad_t, (t0, t1)))
        if lo == hi:
            return None
        t = self.pad[0, lo:hi]
        return (t - t0 if t0 else t), self.pad[1, lo:hi]


def make_mask(lengths: np.ndarray | None, T: int, xp: Any) -> StepMask | None:
    """Step t of sequence n is valid iff t < lengths[n]; None when ``lengths`` is None.

    The mask is built on the host from the host ``lengths`` and copied to ``xp``'s device
    once (no copy when ``xp`` is NumPy)."""
    if lengths is None:
        return None
    invalid = np.arange(T).reshape(T, 1) >= lengths.reshape(1, -1)  # (T, N)
    pad = np.stack(np.nonzero(invalid)).astype(np.int64)            # (2, P), sorted by t
    return StepMask(invalid=xp.asarray(invalid[:, :, None]), pad=xp.asarray(pad),
                    pad_t=pad[0])


def select_valid(a: Array, mask: StepMask | None) -> Array:
    """``a`` (T, N, ...) with 0 at the padded steps of ``mask``, as a new array (a select, so
    inf or NaN there is dropped too); ``a`` itself, never modified, when nothing is padded."""
    rows = None if mask is None else mask.rows(0, int(a.shape[0]))
    if rows is None:
        return a
    out = a.copy()
    out[rows] = 0
    return out


def copy_with(src: Array, rows: tuple | None, value: float, buf: Array) -> Array:
    """``src`` (a block of steps) copied into the first ``len(src)`` entries of ``buf``,
    with ``value`` written at the padded steps ``rows`` (from :meth:`StepMask.rows`): the
    backward kernels use it to pass a gradient on unchanged (value 1) or to drop an upstream
    gradient (value 0) at padded steps, by a select, without touching ``src``."""
    out = buf[:src.shape[0]]
    get_array_module(src).copyto(out, src)
    out[rows] = value
    return out


class StateSlots(NamedTuple):
    """Where states live in a (T + 1, N, H) buffer.

    Forward in time the buffer is [h0, h_0, ..., h_{T-1}]; with ``reverse`` it is
    [h_0, ..., h_{T-1}, h0], so that in both cases the state produced at time index t sits
    at ``t + out_offset`` and the state it consumed at ``t + prev_offset``. The stacked
    previous states of all steps are then the contiguous slice ``[prev_offset : prev_offset
    + T]``, which feeds one GEMM for dweight_hh.
    """

    prev_offset: int
    out_offset: int
    initial: int
    final: int

    def prev_all(self, buf: Array, T: int) -> Array:
        return buf[self.prev_offset:self.prev_offset + T]

    def out_all(self, buf: Array, T: int) -> Array:
        return buf[self.out_offset:self.out_offset + T]


def state_slots(T: int, reverse: bool) -> StateSlots:
    if reverse:
        return StateSlots(prev_offset=1, out_offset=0, initial=T, final=0)
    return StateSlots(prev_offset=0, out_offset=1, initial=0, final=T)


def forward_order(T: int, reverse: bool) -> range:
    """Time indices in the order the forward pass visits them."""
    return range(T - 1, -1, -1) if reverse else range(T)


def backward_order(T: int, reverse: bool) -> range:
    """Time indices in the order backpropagation through time visits them."""
    return range(T) if reverse else range(T - 1, -1, -1)


def backward_chunks(T: int, reverse: bool, step_elems: int) -> list[tuple[int, int]]:
    """Split the time indices into blocks ``(start, stop)`` of consecutive steps, listed in
    the order backpropagation through time visits them (:func:`backward_order`).

    The fused backward kernels compute their gate-derivative factors for one block at a time
    with whole-block array operations, then run the per-step loop over the block. A block
    holds about :data:`CHUNK_ELEMS` elements of a per-step array of ``step_elems`` elements
    (at least one step), so its scratch buffers stay small and in cache, while each
    whole-block operation still covers several steps (few calls per step).
    """
    size = max(1, min(T, CHUNK_ELEMS // max(1, step_elems)))
    blocks = [(start, min(start + size, T)) for start in range(0, T, size)]
    return blocks if reverse else blocks[::-1]


#: Elements of a per-step gate array that one block of :func:`backward_chunks` holds.
CHUNK_ELEMS = 1 << 17


def combined_bias(bias_ih: Array | None, bias_hh: Array | None) -> Array | None:
    """b_ih + b_hh (either may be None; None when both are)."""
    if bias_ih is None:
        return None if bias_hh is None else bias_hh
    if bias_hh is None:
        return bias_ih
    return bias_ih + bias_hh


def zeros_or_copy(g: Array | None, shape: tuple[int, ...], dtype: Any, xp: Any) -> Array:
    """A fresh, writable array: a copy of ``g``, or zeros when ``g`` is None."""
    if g is None:
        return xp.zeros(shape, dtype=dtype)
    return g.copy()


def bias_grads(db: Array, has_bias_ih: bool, has_bias_hh: bool,
               db_hh: Array | None = None) -> tuple[Array | None, Array | None]:
    """Gradients for (bias_ih, bias_hh), None where that bias was None. ``db`` is the summed
    gate pre-activation gradient; ``db_hh`` overrides it for bias_hh where the two differ
    (GRU with reset='after'). The two results never share memory."""
    dbias_ih = db if has_bias_ih else None
    if not has_bias_hh:
        return dbias_ih, None
    if db_hh is None:
        return dbias_ih, (db.copy() if has_bias_ih else db)
    return dbias_ih, db_hh
