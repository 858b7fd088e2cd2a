"""Elman RNN: hand-derived forward and backward through time on raw arrays.

Two ways in: a per-step pair (:func:`rnn_step_forward` / :func:`rnn_step_backward`) that reads
like the derivation, and the fused sequence pair (:func:`rnn_forward` / :func:`rnn_backward`),
the fast engine, which is tested equal to a loop of the per-step pair.

Math
----
Forward (row-vector convention: x_t is (N, D), weights are PyTorch's (out, in)):

* (E1) a_t = x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh
* (E2) h_t = phi(a_t),  phi = tanh or relu

Backward (``d<name>`` is dL/d<name>; "carried" is what step t+1 sends back):

* (E3) dh_t = dL_t/dh_t + carried_t       (gradient from the loss at t plus from step t+1)
* (E4) da_t = dh_t * phi'(a_t),  phi' = 1 - h_t^2 (tanh) or 1[a_t > 0] (relu)
* (E5) carried_{t-1} = da_t W_hh       (the part of dL/dh_{t-1} that flows through step t)
* (E6) dx_t = da_t W_ih
* (E7) dW_ih = sum_t da_t^T x_t,  dW_hh = sum_t da_t^T h_{t-1},  db_ih = db_hh = sum_t da_t

Shapes
------
N batch, T time, D input size, H hidden size. x (T, N, D) time-major; h0 (N, H);
weight_ih (H, D); weight_hh (H, H); bias_ih, bias_hh (H,) or None.

References
----------
J. L. Elman, "Finding structure in time", Cognitive Science 14 (1990).
P. J. Werbos, "Backpropagation through time: what it does and how to do it", Proc. IEEE (1990).
docs/recurrent.md (the numbered equations).
"""
from __future__ import annotations

from typing import Any, NamedTuple

from ..backend import get_array_module
from ..ops.base import pairwise_sum
from . import _checks as checks
from ._layout import (
    Array, StepMask, add_matmul, backward_order, bias_grads, combined_bias, copy_with,
    forward_order, gemm_block_budget, gemm_blocks, make_mask, select_valid, state_slots,
    zeros_or_copy,
)

__all__ = [
    "RNNStepCache", "RNNStepGrads", "RNNSequenceCache", "RNNGrads",
    "rnn_step_forward", "rnn_step_backward", "rnn_forward", "rnn_backward",
]

# --------------------------------------------------------------------------------------------
# per-step pair (the readable reference)
# --------------------------------------------------------------------------------------------
class RNNStepCache(NamedTuple):
    """What :func:`rnn_step_backward` needs from one Elman step."""

    x_t: Array           # (N, D)
    h_prev: Array        # (N, H)
    a_t: Array           # (N, H) pre-activation (E1)
    h_t: Array           # (N, H) new state (E2)
    weight_ih: Array     # (H, D)
    weight_hh: Array     # (H, H)
    has_bias_ih: bool
    has_bias_hh: bool
    nonlinearity: str


class RNNStepGrads(NamedTuple):
    """Gradients of one Elman step (dbias_* are None where the bias was None)."""

    dx_t: Array
    dh_prev: Array
    dweight_ih: Array
    dweight_hh: Array
    dbias_ih: Array | None
    dbias_hh: Array | None


def rnn_step_forward(
    x_t: Array, h_prev: Array, weight_ih: Array, weight_hh: Array,
    bias_ih: Array | None, bias_hh: Array | None, nonlinearity: str = "tanh",
) -> tuple[Array, RNNStepCache]:
    """One Elman step: h_t = phi(x_t W_ih^T + b_ih + h_prev W_hh^T + b_hh).

    Parameters
    ----------
    x_t : (N, D) input at this step.
    h_prev : (N, H) previous state.
    weight_ih, weight_hh : (H, D), (H, H).
    bias_ih, bias_hh : (H,) or None.
    nonlinearity : 'tanh' or 'relu'.

    Returns
    -------
    h_t : (N, H) and the :class:`RNNStepCache` for :func:`rnn_step_backward`.

    Math
    ----
    (E1) a_t = x_t W_ih^T + b_ih + h_prev W_hh^T + b_hh;  (E2) h_t = phi(a_t).
    """
    checks.rnn_step_forward(x_t, h_prev, weight_ih, weight_hh, bias_ih, bias_hh, nonlinearity)
    xp = get_array_module(x_t, h_prev, weight_ih, weight_hh)
    a_t = x_t @ weight_ih.T + h_prev @ weight_hh.T                    # (E1), (VG1) (N, H)
    if bias_ih is not None:
        a_t = a_t + bias_ih
    if bias_hh is not None:
        a_t = a_t + bias_hh
    if nonlinearity == "tanh":
        h_t = xp.tanh(a_t)                                            # (E2)
    else:
        h_t = xp.maximum(a_t, 0)                                      # (E2)
    cache = RNNStepCache(x_t, h_prev, a_t, h_t, weight_ih, weight_hh,
                         bias_ih is not None, bias_hh is not None, nonlinearity)
    return h_t, cache


def rnn_step_backward(dh_t: Array, cache: RNNStepCache) -> RNNStepGrads:
    """Backward through one Elman step.

    Parameters
    ----------
    dh_t : (N, H) total gradient dL/dh_t (loss at t plus what later steps sent back).
    cache : from :func:`rnn_step_forward`.

    Returns
    -------
    :class:`RNNStepGrads` with dx_t (N, D), dh_prev (N, H), dweight_ih (H, D),
    dweight_hh (H, H), dbias_ih / dbias_hh (H,) or None.

    Math
    ----
    (E4) da_t = dh_t * phi'(a_t); (E5) dh_prev = da_t W_hh; (E6) dx_t = da_t W_ih;
    (E7) dW_ih = da_t^T x_t, dW_hh = da_t^T h_prev, db = sum_n da_t.
    """
    checks.step_backward("rnn_step_backward", cache, RNNStepCache, dh_t=dh_t)
    # exercise: rnn_step_backward begin
    if cache.nonlinearity == "tanh":
        da_t = dh_t * (1 - cache.h_t * cache.h_t)                     # (E4)
    else:
        da_t = dh_t * (cache.a_t > 0).astype(dh_t.dtype)              # (E4)
    dh_prev = da_t @ cache.weight_hh                                  # (E5)
    dx_t = da_t @ cache.weight_ih                                     # (E6)
    dweight_ih = da_t.T @ cache.x_t                                   # (E7)
    dweight_hh = da_t.T @ cache.h_prev                                # (E7)
    db = pairwise_sum(da_t, (0,))                                   # (E7)
    dbias_ih = db if cache.has_bias_ih else None
    dbias_hh = db.copy() if cache.has_bias_hh else None
    return RNNStepGrads(dx_t, dh_prev, dweight_ih, dweight_hh, dbias_ih, dbias_hh)
    # exercise: end


# --------------------------------------------------------------------------------------------
# fused sequence pair (the fast path)
# --------------------------------------------------------------------------------------------
class RNNSequenceCache(NamedTuple):
    """What :func:`rnn_backward` needs from :func:`rnn_forward`.

    ``states`` is the (T + 1, N, H) buffer of carried states laid out as described by
    :class:`tinygrad_rnn.bptt._layout.StateSlots` (h0 first, or last when ``reverse``).
    ``x`` is the input with 0 at padded steps (a copy, made only when a step is padded).
    """

    x: Array                 # (T, N, D)
    states: Array            # (T + 1, N, H)
    weight_ih: Array         # (H, D)
    weight_hh: Array         # (H, H)
    has_bias_ih: bool
    has_bias_hh: bool
    nonlinearity: str
    mask: StepMask | None    # None when lengths was None
    reverse: bool


class RNNGrads(NamedTuple):
    """Gradients of a whole Elman sequence.

    ``dh_all[t]`` is the total dL/dh_t at every time index t (loss at t plus everything that
    flowed back through later steps); padded steps carry the gradient through unchanged. It is
    None when :func:`rnn_backward` ran with ``state_grads=False``.
    """

    dx: Array
    dh0: Array
    dweight_ih: Array
    dweight_hh: Array
    dbias_ih: Array | None
    dbias_hh: Array | None
    dh_all: Array | None


def rnn_forward(
    x: Array, h0: Array, weight_ih: Array, weight_hh: Array,
    bias_ih: Array | None = None, bias_hh: Array | None = None, *,
    nonlinearity: str = "tanh", lengths: Any = None, reverse: bool = False,
) -> tuple[Array, Array, RNNSequenceCache]:
    """Run an Elman RNN over a whole sequence (fast path).

    Parameters
    ----------
    x : (T, N, D) time-major inputs.
    h0 : (N, H) initial state.
    weight_ih, weight_hh, bias_ih, bias_hh : PyTorch layout, see the module docstring.
    nonlinearity : 'tanh' or 'relu'.
    lengths : optional int array (N,) on the host (list or NumPy), 0 <= lengths[n] <= T.
        Step t of sequence n is valid iff t < lengths[n]; invalid steps carry the state
        unchanged and output 0. Device arrays are refused (see ``bptt._checks``). The
        entries of ``x`` at padded steps are never used (selected away, so inf or NaN there
        changes no output and no gradient).
    reverse : bool, process t = T-1 down to 0 (the backward half of a bidirectional layer).

    Returns
    -------
    hs : (T, N, H) outputs (0 at padded steps), h_n : (N, H) state after the last valid step,
    cache : :class:`RNNSequenceCache`.

    Math
    ----
    (E1), (E2) of the module docstring at every step.

    Notes
    -----
    The input projection of all T steps is one GEMM, written into the state buffer; per
    step only the recurrent GEMM runs, into a preallocated buffer, is added in the state's
    slot, and the nonlinearity is applied there in place. When no step is padded, ``hs`` is
    a view of the state buffer that the cache keeps (no copy): do not write into it before
    :func:`rnn_backward` (through :class:`tinygrad_rnn.nn.RNN` such a write raises at
    backward). The dtype of the inputs is kept (float32 in, float32 out).

    Examples
    --------
    A vanishing-gradient probe: the norm of dL/dh_t when only the last output is scored.

    >>> import numpy as np
    >>> from tinygrad_rnn.bptt import rnn_forward, rnn_backward
    >>> rng = np.random.default_rng(0)
    >>> x = rng.standard_normal((20, 1, 3))
    >>> w_ih, w_hh = rng.standard_normal((8, 3)), 0.2 * rng.standard_normal((8, 8))
    >>> hs, h_n, cache = rnn_forward(x, np.zeros((1, 8)), w_ih, w_hh)
    >>> g = rnn_backward(None, np.ones_like(h_n), cache)
    >>> norms = np.linalg.norm(g.dh_all[:, 0], axis=1)
    >>> bool(norms[0] < 1e-3 * norms[-1])
    True
    """
    (T, N, D, H), lengths = checks.rnn_forward(x, h0, weight_ih, weight_hh, bias_ih, bias_hh,
                                               nonlinearity, lengths, reverse)
    xp = get_array_module(x, h0, weight_ih, weight_hh)
    dtype = x.dtype
    mask = make_mask(lengths, T, xp)
    slots = state_slots(T, reverse)
    x = select_valid(x, mask)               # padded inputs: 0 (a copy; caller's x kept)

    # (E1), input half, for all T steps in one GEMM: (T*N, D) @ (D, H), written straight
    # into the slots of the states: step t adds its recurrent half there and applies phi in
    # place, so no separate (T, N, H) buffer of pre-activations is needed
    states = xp.empty((T + 1, N, H), dtype=dtype)
    out_states = slots.out_all(states, T)                            # (T, N, H)
    xp.matmul(x.reshape(T * N, D), weight_ih.T, out=out_states.reshape(T * N, H))
    bias = combined_bias(bias_ih, bias_hh)
    if bias is not None:
        out_states += bias
    states[slots.initial] = h0
    rec = xp.empty((H, N), dtype=dtype)         # recurrent GEMM output, column form
    for t in forward_order(T, reverse):
        h_prev = states[t + slots.prev_offset]
        h_t = states[t + slots.out_offset]      # holds the input half of a_t until (E2)
        xp.matmul(weight_hh, h_prev.T, out=rec)                      # W_hh h_{t-1}, (H, N)
        h_t += rec.T                                                 # (E1) a_t  (N, H)
        if nonlinearity == "tanh":
            xp.tanh(h_t, out=h_t)                                    # (E2)
        else:
            xp.maximum(h_t, 0, out=h_t)                              # (E2)
        if mask is not None:
            xp.copyto(h_t, h_prev, where=mask.invalid[t])            # (M1) padded: carry h

    # hs is the states' own memory (no copy) unless a step is padded (then a copy with 0
    # there); the cache keeps the states, so hs must not be written into before backward
    hs = select_valid(out_states, mask)                          # padded outputs: 0
    h_n = states[slots.final].copy()
    cache = RNNSequenceCache(x, states, weight_ih, weight_hh, bias_ih is not None,
                             bias_hh is not None, nonlinearity, mask, bool(reverse))
    return hs, h_n, cache


def rnn_backward(dhs: Array | None, dh_n: Array | None, cache: RNNSequenceCache, *,
                 input_grad: bool = True, state_grads: bool = True) -> RNNGrads:
    """Backpropagation through time for :func:`rnn_forward`.

    Parameters
    ----------
    dhs : (T, N, H) upstream gradient of the outputs, or None (zeros). Entries at padded
        steps are ignored (selected away: inf or NaN there changes nothing).
    dh_n : (N, H) upstream gradient of the final state, or None (zeros).
    cache : from :func:`rnn_forward`.
    input_grad : bool
        Compute ``dx`` (one GEMM); with False, ``dx`` is None (an input that needs no
        gradient, such as the data of a first layer).
    state_grads : bool
        Return ``dh_all``, the (T, N, H) total dL/dh_t of every step; with False it is None
        and the loop keeps only the current step's (N, H) gradient.

    Returns
    -------
    :class:`RNNGrads` (dx, dh0, dweight_ih, dweight_hh, dbias_ih, dbias_hh, dh_all).

    Math
    ----
    (E3)-(E7). Time is processed in blocks of consecutive steps (:func:`gemm_blocks`), the
    last block first. The factors phi'(a_t) of a block's steps are computed before its time
    loop, straight into the block's buffer of the gradients da; the loop does only (E3),
    (E4) (in place: da_t = phi'(a_t) * dh_t) and the recurrent GEMM (E5); then (E6) and (E7)
    are one GEMM each over the block's stacked rows, (E7) added to the sums of the blocks
    before. No (T, N, H) array of gradients is held (besides ``dh_all`` when asked for).
    """
    T, N, D, H = checks.sequence_backward("rnn_backward", cache, RNNSequenceCache, input_grad,
                                          state_grads, dhs=dhs, dh_n=dh_n)
    x, states, mask = cache.x, cache.states, cache.mask
    dtype = states.dtype
    xp = get_array_module(states, dhs, dh_n)
    slots = state_slots(T, cache.reverse)
    h_out = slots.out_all(states, T)            # (T, N, H) state produced at each t
    h_prev_all = slots.prev_all(states, T)      # (T, N, H) state consumed at each t
    w_hh = cache.weight_hh

    blocks = gemm_blocks(T, cache.reverse, N * H, gemm_block_budget(xp, N, N * H))
    size = max(t1 - t0 for t0, t1 in blocks)
    da_buf = xp.empty((size, N, H), dtype=dtype)   # gate pre-activation gradients, one block
    padded = mask is not None and mask.padded
    dhs_buf = xp.empty((size, N, H), dtype=dtype) if padded and dhs is not None else None
    dh_all = xp.empty((T, N, H), dtype=dtype) if state_grads else None
    dh_step = xp.empty((N, H), dtype=dtype) if dh_all is None else None
    carried = zeros_or_copy(dh_n, (N, H), dtype, xp)   # what the step after t sends back
    dx = xp.empty((T, N, D), dtype=dtype) if input_grad else None
    db_blocks = xp.empty((len(blocks), H), dtype=dtype)
    dweight_ih = dweight_hh = None

    for b, (t0, t1) in enumerate(blocks):
        # da first holds phi'(a_t) for the block's steps (E4), zero at padded steps so they
        # make no gradient; the loop multiplies each step's by dh_t in place
        da = da_buf[:t1 - t0]
        if cache.nonlinearity == "tanh":
            xp.multiply(h_out[t0:t1], h_out[t0:t1], out=da)
            xp.subtract(1, da, out=da)
        else:
            xp.copyto(da, h_out[t0:t1] > 0)
        dhs_b = dhs[t0:t1] if dhs is not None else None
        pad = mask.rows(t0, t1) if mask is not None else None     # the block's padded steps
        if pad is not None:
            da[pad] = 0                         # a select: the step's factor is dropped
            if dhs_b is not None:               # upstream at padded outputs is ignored
                dhs_b = copy_with(dhs_b, pad, 0, dhs_buf)

        for t in backward_order(t1 - t0, cache.reverse):
            ts = t0 + t                         # the time index of this step
            dh_t = dh_step if dh_all is None else dh_all[ts]
            # (E3) total dL/dh_t = gradient from the loss at t + gradient from step t+1
            if dhs_b is None:
                xp.copyto(dh_t, carried)
            else:
                xp.add(dhs_b[t], carried, out=dh_t)
            da[t] *= dh_t                                            # (E4)
            xp.matmul(da[t], w_hh, out=carried)                      # (E5)
            if mask is not None:
                xp.copyto(carried, dh_t, where=mask.invalid[ts])     # padded: pass through

        # the block's steps stacked: one GEMM each, added to the sums over blocks
        da2 = da.reshape(-1, H)
        dweight_ih = add_matmul(dweight_ih, da2.T, x[t0:t1].reshape(-1, D))         # (E7)
        dweight_hh = add_matmul(dweight_hh, da2.T, h_prev_all[t0:t1].reshape(-1, H))  # (E7)
        if dx is not None:
            xp.matmul(da2, cache.weight_ih, out=dx[t0:t1].reshape(-1, D))           # (E6)
        db_blocks[b] = pairwise_sum(da2, (0,))                                      # (E7)
    # db = sum of the blocks' sums, each added pairwise: float32 error not growing with T*N
    db = pairwise_sum(db_blocks, (0,))                                              # (E7)
    dbias_ih, dbias_hh = bias_grads(db, cache.has_bias_ih, cache.has_bias_hh)
    return RNNGrads(dx, carried, dweight_ih, dweight_hh, dbias_ih, dbias_hh, dh_all)
