"""Where the fused BPTT kernels keep things: padding masks, state slots, time order, blocks of
steps, bias sums. Raw backend arrays only; nothing above :mod:`tinygrad_rnn.backend`.

(The kernels' argument checks are in :mod:`tinygrad_rnn.bptt._checks`; the sigmoid they use,
in its tanh-identity form, is :func:`tinygrad_rnn.ops.activations.tanh_sigmoid`.)

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

from ..backend import get_array_module

#: A NumPy or CuPy array (the kernels are written once for both).
Array = Any


def lstm_gates(coupled: bool) -> int:
    """Gate blocks G of an LSTM: 4 (i, f, g, o), or 3 (f, g, o) with the coupled input gate."""
    return 3 if coupled else 4


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
    return range(T - 1, -1, -1) if reverse else range(T)  # (M3) reverse: T-1, ..., 0


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


def gemm_blocks(T: int, reverse: bool, step_elems: int,
                elems: int | None = None) -> list[tuple[int, int]]:
    """Split the time indices into blocks ``(start, stop)`` of about equal length, listed in
    the order backpropagation through time visits them, for the weight-gradient GEMMs.

    A fused backward kernel (Elman, GRU, LSTM) keeps the pre-activation gradients of one
    block at a time, at most ``elems`` (default :data:`GEMM_BLOCK_ELEMS`) elements of a
    per-step array of ``step_elems`` elements (at least one step); after the block's steps it adds the block's share to the
    weight and bias gradients (one GEMM each over the block's stacked rows) and computes
    the block's rows of dx, then reuses the buffer for the next block. So the backward
    holds no (T, N, G*H) array of gradients, whatever T. When the whole sequence fits in
    one block the GEMMs are exactly those over all T*N rows. ``[(0, 0)]`` when T is 0.
    The kernels take ``elems`` from :func:`gemm_block_budget` (the LSTM's at least four
    times larger on the host).
    """
    if T == 0:
        return [(0, 0)]
    budget = GEMM_BLOCK_ELEMS if elems is None else elems
    most = max(1, budget // max(1, step_elems))             # steps a block may hold
    count = -(-T // most)                                   # as few blocks as fit (ceil)
    size = -(-T // count)                                   # about equal, at most `most`
    blocks = [(start, min(start + size, T)) for start in range(0, T, size)]
    return blocks if reverse else blocks[::-1]


#: Elements of a per-step gate-gradient array that one block of :func:`gemm_blocks` holds
#: (2 MiB of float32): each block's GEMMs then still stack hundreds of rows, which run
#: about as fast per row as one GEMM over all steps.
GEMM_BLOCK_ELEMS = 1 << 19

#: The fewest stacked rows (steps x batch) the Elman and GRU kernels give a block's weight
#: GEMMs: with a wide step (large N*G*H) the element budget alone would leave a few steps a
#: block, and GEMMs over a few hundred rows run slower per row (8% at H = 1024, N = 32).
GEMM_MIN_ROWS = 512


def gemm_block_budget(xp: Any, batch: int, step_elems: int) -> int:
    """The ``elems`` budget of :func:`gemm_blocks` for the Elman and GRU backward kernels:
    :data:`GEMM_BLOCK_ELEMS` on the host (64 times it on a GPU, where every block's GEMMs
    and sums are kernel launches), raised where needed so that a block holds at least
    :data:`GEMM_MIN_ROWS` rows of ``batch`` each."""
    budget = GEMM_BLOCK_ELEMS if xp is np else 64 * GEMM_BLOCK_ELEMS
    steps = -(-GEMM_MIN_ROWS // max(1, batch))
    return max(budget, steps * step_elems)


def add_matmul(total: Array | None, a: Array, b: Array) -> Array:
    """``total + a @ b``, in place into ``total``; ``a @ b`` itself (a new array) when
    ``total`` is None (the first block of :func:`gemm_blocks`)."""
    product = get_array_module(a).matmul(a, b)
    if total is None:
        return product
    total += product
    return total


def combined_bias(bias_ih: Array | None, bias_hh: Array | None) -> Array | None:
    """b_ih + b_hh (either may be None; None when both are)."""
    if bias_ih is None:
        return None if bias_hh is None else bias_hh
    if bias_hh is None:
        return bias_ih
    return bias_ih + bias_hh  # (P1) b = b_ih + b_hh


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
