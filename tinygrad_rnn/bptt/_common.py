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
    c0: Array | None = None,
    weight_ch: Array | None = None,
    peepholes: int = 0,
    x_name: str = "x",
    h_name: str = "h0",
    c_name: str = "c0",
) -> Sizes:
    """Validate shapes and dtypes of a recurrent call; raise ValueError/TypeError naming
    ``fname`` and the full shapes involved. Returns the sizes (T, N, D, H).

    ``x`` is (T, N, D) when ``sequence`` else (N, D); ``h0`` is (N, H) and fixes H.
    """
    gate_txt = f"{gates}*hidden_size" if gates > 1 else "hidden_size"
    want_x = "(T, N, D) = (time, batch, input_size)" if sequence else "(N, D) = (batch, input)"
    xdim = 3 if sequence else 2
    if getattr(x, "ndim", None) != xdim:
        raise ValueError(f"{fname}: {x_name} must be {xdim}-D {want_x} but has shape "
                         f"{_shape(x) if hasattr(x, 'shape') else type(x).__name__}")
    xs = _shape(x)
    T = xs[0] if sequence else 0
    N, D = xs[-2], xs[-1]
    if getattr(h0, "ndim", None) != 2 or int(h0.shape[0]) != N:
        hs = _shape(h0) if hasattr(h0, "shape") else type(h0).__name__
        raise ValueError(f"{fname}: {h_name} has shape {hs} but expected (batch, hidden_size) "
                         f"with batch = {N} for {x_name} of shape {xs}")
    H = int(h0.shape[1])
    ctx = f"for {x_name} of shape {xs} and {h_name} of shape {_shape(h0)}"
    if c0 is not None and _shape(c0) != (N, H):
        raise ValueError(f"{fname}: {c_name} has shape {_shape(c0)} but expected "
                         f"(batch, hidden_size) = {(N, H)} {ctx}")
    if getattr(weight_ih, "ndim", None) != 2 or _shape(weight_ih) != (gates * H, D):
        raise ValueError(f"{fname}: weight_ih has shape {_shape(weight_ih)} but expected "
                         f"({gate_txt}, input_size) = {(gates * H, D)} {ctx}")
    if getattr(weight_hh, "ndim", None) != 2 or _shape(weight_hh) != (gates * H, H):
        raise ValueError(f"{fname}: weight_hh has shape {_shape(weight_hh)} but expected "
                         f"({gate_txt}, hidden_size) = {(gates * H, H)} {ctx}")
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
    on the host (validation, mask), and the caller copies them there explicitly."""
    if lengths is None:
        return None
    if get_array_module(lengths) is not np:
        raise TypeError(
            f"{fname}: lengths must be on the host (a list or NumPy array), as PyTorch "
            f"requires CPU lengths, but they are on {device_of(lengths)}; copy them to the "
            f"host explicitly (.get(), or Tensor.numpy())")
    lengths = np.asarray(lengths)
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
    """Validity of each (t, n) for variable-length batches.

    ``valid`` is the float 0/1 mask (T, N, 1) in the data dtype (multiplies gradients and
    outputs); ``invalid`` is the boolean (T, N, 1) complement (selects carried states).
    """

    valid: Array
    invalid: Array


def make_mask(lengths: np.ndarray | None, T: int, dtype: Any, xp: Any) -> StepMask | None:
    """Step t of sequence n is valid iff t < lengths[n]; None when ``lengths`` is None.

    The mask is built on the host from the host ``lengths`` and copied to ``xp``'s device
    once (no copy when ``xp`` is NumPy)."""
    if lengths is None:
        return None
    valid_b = np.arange(T).reshape(T, 1) < lengths.reshape(1, -1)  # (T, N)
    valid_b = valid_b[:, :, None]  # (T, N, 1)
    return StepMask(valid=xp.asarray(valid_b.astype(dtype)), invalid=xp.asarray(~valid_b))


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
