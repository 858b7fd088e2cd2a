"""GRU: hand-derived forward and backward through time on raw arrays.

A per-step pair (:func:`gru_step_forward` / :func:`gru_step_backward`) that reads like the
derivation, and the fused sequence pair (:func:`gru_forward` / :func:`gru_backward`), the
fast engine, tested equal to a loop of the per-step pair.

Conventions (papers and frameworks disagree, so read this)
-----------------------------------------------------------
* Gate rows of weight_ih / weight_hh / biases are stacked in PyTorch's order **r, z, n**.
* The update gate z weights the **previous state**: h_t = (1 - z_t) * n_t + z_t * h_{t-1}
  (PyTorch, cuDNN, and Cho et al. 2014, eq. 7). Chung et al. 2014 and many lecture notes
  write h_t = (1 - z_t) * h_{t-1} + z_t * h~_t instead; that is the same model with z
  relabelled as 1 - z.
* Where the reset gate acts is selected by ``reset``:
  ``'after'`` (PyTorch/cuDNN, the default) applies r_t to the recurrent *product*,
  r_t * (W_hn h_{t-1} + b_hn); ``'before'`` (Cho et al. 2014, the lectures) applies it to the
  *state* before the product, W_hn (r_t * h_{t-1}) + b_hn. Both use the same parameter shapes.

Math
----
Forward (row-vector convention, sigma the logistic sigmoid; W_ir, W_iz, W_in are the row blocks
of weight_ih, W_hr, W_hz, W_hn those of weight_hh):

* (G1) r_t = sigma(x_t W_ir^T + b_ir + h_{t-1} W_hr^T + b_hr)
* (G2) z_t = sigma(x_t W_iz^T + b_iz + h_{t-1} W_hz^T + b_hz)
* (G3) reset='after':  hn_t = h_{t-1} W_hn^T + b_hn;
  n_t = tanh(x_t W_in^T + b_in + r_t * hn_t)
* (G3') reset='before': rh_t = r_t * h_{t-1};
  n_t = tanh(x_t W_in^T + b_in + rh_t W_hn^T + b_hn)
* (G4) h_t = (1 - z_t) * n_t + z_t * h_{t-1}

Backward (a_r, a_z, a_n are the pre-activations inside sigma / tanh):

* (G5) dh_t = dL_t/dh_t + carried_t       (gradient from the loss at t plus from step t+1)
* (G6) da_n = dh_t * (1 - z_t) * (1 - n_t^2)
* (G7) da_z = dh_t * (h_{t-1} - n_t) * z_t (1 - z_t)
* (G8) reset='after':  dhn_t = da_n * r_t;  da_r = da_n * hn_t * r_t (1 - r_t)
* (G8') reset='before': drh_t = da_n W_hn;  da_r = drh_t * h_{t-1} * r_t (1 - r_t)
* (G9) carried_{t-1} = dh_t * z_t + [da_r, da_z, dhn_t] W_hh                  (after)
  carried_{t-1} = dh_t * z_t + drh_t * r_t + [da_r, da_z] [W_hr; W_hz]       (before)
* (G10) dx_t = [da_r, da_z, da_n] W_ih
* (G11) dW_ih = sum_t [da_r, da_z, da_n]^T x_t;  db_ih = sum_t [da_r, da_z, da_n];
  after:  dW_hh = sum_t [da_r, da_z, dhn_t]^T h_{t-1},  db_hh = sum_t [da_r, da_z, dhn_t];
  before: d[W_hr; W_hz] = sum_t [da_r, da_z]^T h_{t-1},  dW_hn = sum_t da_n^T rh_t,
  db_hh = db_ih.

Shapes
------
N batch, T time, D input size, H hidden size. x (T, N, D) time-major; h0 (N, H);
weight_ih (3H, D); weight_hh (3H, H); bias_ih, bias_hh (3H,) or None.

References
----------
K. Cho et al., "Learning phrase representations using RNN encoder-decoder for statistical
machine translation", EMNLP 2014. J. Chung et al., "Empirical evaluation of gated recurrent
neural networks on sequence modeling", 2014. PyTorch ``torch.nn.GRU`` documentation.
docs/recurrent.md (the numbered equations).
"""
from __future__ import annotations

from typing import Any, NamedTuple

from ..backend import get_array_module
from ..ops.activations import tanh_half_to_sigmoid_, tanh_sigmoid
from ..ops.base import pairwise_sum
from . import _checks as checks
from ._layout import (
    Array, StepMask, add_matmul, backward_chunks, backward_order, bias_grads, copy_with,
    forward_order, gemm_block_budget, gemm_blocks, make_mask, select_valid, state_slots,
    zeros_or_copy,
)

__all__ = [
    "GRUStepCache", "GRUStepGrads", "GRUSequenceCache", "GRUGrads",
    "gru_step_forward", "gru_step_backward", "gru_forward", "gru_backward",
]


# --------------------------------------------------------------------------------------------
# per-step pair (the readable reference)
# --------------------------------------------------------------------------------------------
class GRUStepCache(NamedTuple):
    """What :func:`gru_step_backward` needs from one GRU step."""

    x_t: Array              # (N, D)
    h_prev: Array           # (N, H)
    r_t: Array              # (N, H) reset gate (G1)
    z_t: Array              # (N, H) update gate (G2)
    n_t: Array              # (N, H) candidate (G3)
    hn_t: Array | None      # (N, H) h_prev W_hn^T + b_hn (reset='after'), else None
    rh_t: Array | None      # (N, H) r_t * h_prev (reset='before'), else None
    h_t: Array              # (N, H) new state (G4)
    weight_ih: Array        # (3H, D)
    weight_hh: Array        # (3H, H)
    has_bias_ih: bool
    has_bias_hh: bool
    reset: str


class GRUStepGrads(NamedTuple):
    """Gradients of one GRU step (dbias_* are None where the bias was None)."""

    dx_t: Array
    dh_prev: Array
    dweight_ih: Array
    dweight_hh: Array
    dbias_ih: Array | None
    dbias_hh: Array | None


def gru_step_forward(
    x_t: Array, h_prev: Array, weight_ih: Array, weight_hh: Array,
    bias_ih: Array | None, bias_hh: Array | None, reset: str = "after",
) -> tuple[Array, GRUStepCache]:
    """One GRU step, equations (G1)-(G4).

    Parameters
    ----------
    x_t : (N, D) input; h_prev : (N, H) previous state.
    weight_ih, weight_hh : (3H, D), (3H, H), gate rows r, z, n.
    bias_ih, bias_hh : (3H,) or None.
    reset : 'after' (PyTorch: r_t scales h_prev W_hn^T + b_hn) or 'before'
        (Cho et al.: r_t scales h_prev before the product).

    Returns
    -------
    h_t : (N, H) and the :class:`GRUStepCache`.

    Notes
    -----
    The update gate z_t weights h_prev: h_t = (1 - z_t) n_t + z_t h_prev.
    """
    _, N, D, H = checks.gru_step_forward(x_t, h_prev, weight_ih, weight_hh, bias_ih, bias_hh,
                                         reset)
    xp = get_array_module(x_t, h_prev, weight_ih, weight_hh)
    W_ir, W_iz, W_in = weight_ih[:H], weight_ih[H:2 * H], weight_ih[2 * H:]
    W_hr, W_hz, W_hn = weight_hh[:H], weight_hh[H:2 * H], weight_hh[2 * H:]
    zero = xp.zeros(3 * H, dtype=x_t.dtype)
    b_i = bias_ih if bias_ih is not None else zero
    b_h = bias_hh if bias_hh is not None else zero
    b_ir, b_iz, b_in = b_i[:H], b_i[H:2 * H], b_i[2 * H:]
    b_hr, b_hz, b_hn = b_h[:H], b_h[H:2 * H], b_h[2 * H:]

    r_t = tanh_sigmoid(x_t @ W_ir.T + b_ir + h_prev @ W_hr.T + b_hr, xp)      # (G1)
    z_t = tanh_sigmoid(x_t @ W_iz.T + b_iz + h_prev @ W_hz.T + b_hz, xp)      # (G2)
    if reset == "after":
        hn_t = h_prev @ W_hn.T + b_hn                                         # (G3)
        rh_t = None
        n_t = xp.tanh(x_t @ W_in.T + b_in + r_t * hn_t)                       # (G3)
    else:
        hn_t = None
        rh_t = r_t * h_prev                                                   # (G3')
        n_t = xp.tanh(x_t @ W_in.T + b_in + rh_t @ W_hn.T + b_hn)             # (G3')
    h_t = (1 - z_t) * n_t + z_t * h_prev                                      # (G4)
    cache = GRUStepCache(x_t, h_prev, r_t, z_t, n_t, hn_t, rh_t, h_t, weight_ih, weight_hh,
                         bias_ih is not None, bias_hh is not None, reset)
    return h_t, cache


def gru_step_backward(dh_t: Array, cache: GRUStepCache) -> GRUStepGrads:
    """Backward through one GRU step, equations (G6)-(G11).

    Parameters
    ----------
    dh_t : (N, H) total gradient dL/dh_t (loss at t plus what later steps sent back).
    cache : from :func:`gru_step_forward`.

    Returns
    -------
    :class:`GRUStepGrads` (dx_t, dh_prev, dweight_ih, dweight_hh, dbias_ih, dbias_hh).
    """
    checks.step_backward("gru_step_backward", cache, GRUStepCache, dh_t=dh_t)
    # exercise: gru_step_backward begin
    xp = get_array_module(dh_t, cache.h_t)
    c = cache
    H = int(c.h_t.shape[1])
    W_hr_z, W_hn = c.weight_hh[:2 * H], c.weight_hh[2 * H:]

    da_n = dh_t * (1 - c.z_t) * (1 - c.n_t * c.n_t)                          # (G6)
    da_z = dh_t * (c.h_prev - c.n_t) * c.z_t * (1 - c.z_t)                   # (G7)
    if c.reset == "after":
        dhn = da_n * c.r_t                                                   # (G8)
        da_r = da_n * c.hn_t * c.r_t * (1 - c.r_t)                           # (G8)
        da_h = xp.concatenate([da_r, da_z, dhn], axis=1)     # (N, 3H) rows of W_hh
        dh_prev = dh_t * c.z_t + da_h @ c.weight_hh                          # (G9)
        dweight_hh = da_h.T @ c.h_prev                                       # (G11)
        db_hh = pairwise_sum(da_h, (0,))
    else:
        drh = da_n @ W_hn                                                    # (G8')
        da_r = drh * c.h_prev * c.r_t * (1 - c.r_t)                          # (G8')
        da_rz = xp.concatenate([da_r, da_z], axis=1)         # (N, 2H)
        dh_prev = dh_t * c.z_t + drh * c.r_t + da_rz @ W_hr_z                # (G9)
        dweight_hh = xp.concatenate([da_rz.T @ c.h_prev, da_n.T @ c.rh_t], axis=0)  # (G11)
        db_hh = None
    da_x = xp.concatenate([da_r, da_z, da_n], axis=1)        # (N, 3H) rows of W_ih
    dx_t = da_x @ c.weight_ih                                                # (G10)
    dweight_ih = da_x.T @ c.x_t                                              # (G11)
    db_ih = pairwise_sum(da_x, (0,))
    dbias_ih, dbias_hh = bias_grads(db_ih, c.has_bias_ih, c.has_bias_hh, db_hh)
    return GRUStepGrads(dx_t, dh_prev, dweight_ih, dweight_hh, dbias_ih, dbias_hh)
    # exercise: end


# --------------------------------------------------------------------------------------------
# fused sequence pair (the fast path)
# --------------------------------------------------------------------------------------------
class GRUSequenceCache(NamedTuple):
    """What :func:`gru_backward` needs from :func:`gru_forward`.

    ``gates`` holds the activations r, z, n of every step (T, N, 3H) in the row order r, z, n;
    ``hn`` the recurrent n-term h_{t-1} W_hn^T + b_hn (reset='after') or ``rh`` the reset state
    r_t * h_{t-1} (reset='before'), (T, N, H); ``states`` the (T + 1, N, H) state buffer laid
    out as in :class:`tinygrad_rnn.bptt._layout.StateSlots`. ``x`` is the input with 0 at
    padded steps (a copy, made only when a step is padded), so every array here holds finite
    numbers at padded steps whenever the states and weights are finite.
    """

    x: Array
    gates: Array
    hn: Array | None
    rh: Array | None
    states: Array
    weight_ih: Array
    weight_hh: Array
    has_bias_ih: bool
    has_bias_hh: bool
    reset: str
    mask: StepMask | None
    reverse: bool


class GRUGrads(NamedTuple):
    """Gradients of a whole GRU sequence; ``dh_all[t]`` is the total dL/dh_t at each t (None
    when :func:`gru_backward` ran with ``state_grads=False``)."""

    dx: Array
    dh0: Array
    dweight_ih: Array
    dweight_hh: Array
    dbias_ih: Array | None
    dbias_hh: Array | None
    dh_all: Array | None


def gru_forward(
    x: Array, h0: Array, weight_ih: Array, weight_hh: Array,
    bias_ih: Array | None = None, bias_hh: Array | None = None, *,
    reset: str = "after", lengths: Any = None, reverse: bool = False,
) -> tuple[Array, Array, GRUSequenceCache]:
    """Run a GRU over a whole sequence (fast path), equations (G1)-(G4).

    Parameters
    ----------
    x : (T, N, D) time-major inputs; h0 : (N, H) initial state.
    weight_ih, weight_hh, bias_ih, bias_hh : PyTorch layout, gate rows r, z, n.
    reset : 'after' (PyTorch, default) or 'before' (Cho et al.); see the module docstring.
    lengths : optional int array (N,) on the host (list or NumPy); step t of sequence n is
        valid iff t < lengths[n]. Padded steps carry the state and output 0; the entries of
        ``x`` there are never used (selected away, so inf or NaN changes nothing).
    reverse : bool, process t = T-1 down to 0.

    Returns
    -------
    hs : (T, N, H), h_n : (N, H), cache : :class:`GRUSequenceCache`. When no step is padded,
    ``hs`` is a view of ``cache.states`` (no copy): do not write into it before
    :func:`gru_backward` (through :class:`tinygrad_rnn.nn.GRU` such a write raises at
    backward).

    Notes
    -----
    One GEMM projects the inputs of all T steps. The r and z rows of the weights and biases
    are pre-scaled by 0.5 (exact), so one in-place tanh plus 0.5 * t + 0.5 gives both sigmoid
    gates. With reset='after' the recurrent GEMM covers all 3H rows at once; with 'before'
    the n rows must wait for r_t, so the recurrent GEMM is split into the r, z rows and the
    n rows acting on r_t * h_{t-1}. As in PyTorch, z_t weights the previous state:
    h_t = (1 - z_t) n_t + z_t h_{t-1}.

    Examples
    --------
    >>> import numpy as np
    >>> from tinygrad_rnn.bptt import gru_forward, gru_backward
    >>> rng = np.random.default_rng(0)
    >>> x = rng.standard_normal((6, 2, 3))
    >>> h0 = np.zeros((2, 4))
    >>> w_ih, w_hh = 0.3 * rng.standard_normal((12, 3)), 0.3 * rng.standard_normal((12, 4))
    >>> hs, h_n, cache = gru_forward(x, h0, w_ih, w_hh, reset="before", reverse=True)
    >>> bool(np.allclose(h_n, hs[0]))             # reverse: the last state is at t = 0
    True
    >>> g = gru_backward(None, np.ones_like(h_n), cache)
    >>> g.dh_all.shape, g.dbias_ih is None
    ((6, 2, 4), True)
    """
    (T, N, D, H), lengths = checks.gru_forward(x, h0, weight_ih, weight_hh, bias_ih, bias_hh,
                                               reset, lengths, reverse)
    xp = get_array_module(x, h0, weight_ih, weight_hh)
    dtype = x.dtype
    mask = make_mask(lengths, T, xp)
    slots = state_slots(T, reverse)
    x = select_valid(x, mask)               # padded inputs: 0 (a copy; caller's x kept)
    after = reset == "after"

    # 0.5 on the r, z rows: sigma(a) = 0.5 * tanh(0.5 a) + 0.5
    scale = xp.ones((3 * H, 1), dtype=dtype)
    scale[:2 * H] = 0.5
    w_ih_s = weight_ih * scale
    w_hh_s = weight_hh * scale
    # Biases that sit outside the reset gate go into the input projection. With 'after',
    # b_hn is multiplied by r_t and stays in the per-step recurrent term.
    b_x = xp.zeros(3 * H, dtype=dtype)
    if bias_ih is not None:
        b_x += bias_ih
    b_hn = None
    if bias_hh is not None:
        if after:
            b_x[:2 * H] += bias_hh[:2 * H]
            b_hn = bias_hh[2 * H:]
        else:
            b_x += bias_hh
    b_x *= scale[:, 0]

    # (G1)-(G3), input half, for all T steps in one GEMM: (T*N, D) @ (D, 3H)
    gates = xp.matmul(x.reshape(T * N, D), w_ih_s.T).reshape(T, N, 3 * H)
    gates += b_x
    states = xp.empty((T + 1, N, H), dtype=dtype)
    states[slots.initial] = h0
    side = xp.empty((T, N, H), dtype=dtype)     # hn_t ('after') or rh_t ('before')
    tmp = xp.empty((N, H), dtype=dtype)
    # recurrent GEMM outputs in column form: W h_{t-1} is (rows, N)
    if after:
        rec = xp.empty((3 * H, N), dtype=dtype)
    else:
        w_hrz_s = w_hh_s[:2 * H]                 # (2H, H)
        w_hn = weight_hh[2 * H:]                 # (H, H)
        rec = xp.empty((2 * H, N), dtype=dtype)
        rec_n = xp.empty((H, N), dtype=dtype)

    for t in forward_order(T, reverse):
        h_prev = states[t + slots.prev_offset]
        h_t = states[t + slots.out_offset]
        g_t = gates[t]
        rz = g_t[:, :2 * H]
        n_t = g_t[:, 2 * H:]
        if after:
            xp.matmul(w_hh_s, h_prev.T, out=rec)
            rz += rec[:2 * H].T
            xp.tanh(rz, out=rz)
            tanh_half_to_sigmoid_(rz)                                # (G1), (G2)
            hn_t = side[t]
            if b_hn is None:
                xp.copyto(hn_t, rec[2 * H:].T)
            else:
                xp.add(rec[2 * H:].T, b_hn, out=hn_t)                # (G3) hn_t
            xp.multiply(rz[:, :H], hn_t, out=tmp)
            n_t += tmp
        else:
            xp.matmul(w_hrz_s, h_prev.T, out=rec)
            rz += rec.T
            xp.tanh(rz, out=rz)
            tanh_half_to_sigmoid_(rz)                                # (G1), (G2)
            rh_t = side[t]
            xp.multiply(rz[:, :H], h_prev, out=rh_t)                 # (G3') rh_t
            xp.matmul(w_hn, rh_t.T, out=rec_n)
            n_t += rec_n.T
        xp.tanh(n_t, out=n_t)                                        # (G3)
        # (G4) h_t = (1 - z) n + z h_prev = n + z (h_prev - n)
        xp.subtract(h_prev, n_t, out=h_t)
        h_t *= rz[:, H:]
        h_t += n_t
        if mask is not None:
            xp.copyto(h_t, h_prev, where=mask.invalid[t])            # padded: carry the state

    # hs is the states' own memory (no copy) unless a step is padded (then a copy with 0
    # there); the cache keeps the states, so hs must not be written into before backward
    hs = select_valid(slots.out_all(states, T), mask)            # padded outputs: 0
    h_n = states[slots.final].copy()
    cache = GRUSequenceCache(x, gates, side if after else None, None if after else side,
                             states, weight_ih, weight_hh, bias_ih is not None,
                             bias_hh is not None, reset, mask, bool(reverse))
    return hs, h_n, cache


def gru_backward(dhs: Array | None, dh_n: Array | None, cache: GRUSequenceCache, *,
                 input_grad: bool = True, state_grads: bool = True) -> GRUGrads:
    """Backpropagation through time for :func:`gru_forward`, equations (G5)-(G11).

    Parameters
    ----------
    dhs : (T, N, H) or None (zeros); entries at padded steps are ignored (selected away:
        inf or NaN there changes nothing).
    dh_n : (N, H) or None (zeros).
    cache : from :func:`gru_forward`.
    input_grad : bool
        Compute ``dx`` (one GEMM); with False, ``dx`` is None (an input that needs no
        gradient, such as the data of a first layer).
    state_grads : bool
        Return ``dh_all``, the (T, N, H) total dL/dh_t of every step; with False it is None
        and the loop keeps only the current step's (N, H) gradient.

    Returns
    -------
    :class:`GRUGrads` (dx, dh0, dweight_ih, dweight_hh, dbias_ih, dbias_hh, dh_all).

    Notes
    -----
    Time is processed in blocks of consecutive steps (:func:`gemm_blocks`), last block
    first, each in smaller chunks (:func:`backward_chunks`). The gate-derivative factors of
    (G6)-(G8) are computed for a whole chunk at once into small scratch buffers; the loop
    over the chunk's steps keeps only what depends on the recurrence and writes the gate
    gradients into the block's buffers; after each block the weight and input gradients of
    its steps are single GEMMs over its stacked rows, added to the sums of the blocks
    before. No (T, N, 3H) array of gradients is held, whatever T.
    """
    T, N, D, H = checks.sequence_backward("gru_backward", cache, GRUSequenceCache, input_grad,
                                          state_grads, dhs=dhs, dh_n=dh_n)
    x, states, gates, mask = cache.x, cache.states, cache.gates, cache.mask
    dtype = states.dtype
    xp = get_array_module(states, dhs, dh_n)
    slots = state_slots(T, cache.reverse)
    after = cache.reset == "after"
    h_prev_all = slots.prev_all(states, T)               # (T, N, H)
    r_all = gates[:, :, :H]
    weight_hh = cache.weight_hh
    if not after:
        w_hrz = weight_hh[:2 * H]
        w_hn = weight_hh[2 * H:]
        drh = xp.empty((N, H), dtype=dtype)

    step_elems = N * 3 * H
    blocks = gemm_blocks(T, cache.reverse, step_elems, gemm_block_budget(xp, N, step_elems))
    size = max(t1 - t0 for t0, t1 in blocks)
    # the gate pre-activation gradients of one block of steps
    da_x_buf = xp.empty((size, N, 3 * H), dtype=dtype)     # [da_r, da_z, da_n] for W_ih
    da_h_buf = xp.empty((size, N, 3 * H), dtype=dtype) if after else None  # [.., dhn] W_hh
    dh_all = xp.empty((T, N, H), dtype=dtype) if state_grads else None
    dh_step = xp.empty((N, H), dtype=dtype) if dh_all is None else None
    carried = zeros_or_copy(dh_n, (N, H), dtype, xp)
    tmp = xp.empty((N, H), dtype=dtype)
    chunk = max(c1 - c0 for c0, c1 in backward_chunks(size, False, step_elems)) if size else 0
    # the gate-derivative factors k_n, k_z, k_r of (G6)-(G8): docs/recurrent.md section 7
    k_n_buf, k_z_buf, k_r_buf, omz_buf = (xp.empty((chunk, N, H), dtype=dtype)
                                          for _ in range(4))
    if mask is not None and mask.padded:
        z_pass_buf = xp.empty((chunk, N, H), dtype=dtype)
        dhs_buf = xp.empty((chunk, N, H), dtype=dtype) if dhs is not None else None
    dx = xp.empty((T, N, D), dtype=dtype) if input_grad else None
    db_ih_blocks = xp.empty((len(blocks), 3 * H), dtype=dtype)
    db_hh_blocks = xp.empty((len(blocks) if after else 0, 3 * H), dtype=dtype)
    dweight_ih = dweight_hh = dweight_hn = None

    for b, (g0, g1) in enumerate(blocks):
        da_x = da_x_buf[:g1 - g0]          # row ts - g0 holds time index ts
        da_h = da_h_buf[:g1 - g0] if da_h_buf is not None else None
        for c0, c1 in backward_chunks(g1 - g0, cache.reverse, step_elems):
            t0, t1 = g0 + c0, g0 + c1
            # gate-derivative factors of the chunk's steps
            r = r_all[t0:t1]
            z = gates[t0:t1, :, H:2 * H]
            n = gates[t0:t1, :, 2 * H:]
            k_n, k_z, k_r = k_n_buf[:t1 - t0], k_z_buf[:t1 - t0], k_r_buf[:t1 - t0]
            omz = xp.subtract(1, z, out=omz_buf[:t1 - t0])   # 1 - z_t
            xp.multiply(n, n, out=k_n)
            xp.subtract(1, k_n, out=k_n)
            k_n *= omz                                        # (G6): da_n = dh * k_n
            xp.subtract(h_prev_all[t0:t1], n, out=k_z)
            k_z *= z
            k_z *= omz                                        # (G7): da_z = dh * k_z
            xp.subtract(1, r, out=k_r)
            k_r *= r
            # (G8): da_r = (da_n | drh) * k_r; the cache holds hn ('after'), rh ('before')
            k_r *= cache.hn[t0:t1] if after else h_prev_all[t0:t1]  # type: ignore[index]
            z_pass = z                                        # dh_prev gets dh * z (G9)
            dhs_b = dhs[t0:t1] if dhs is not None else None
            pad = mask.rows(t0, t1) if mask is not None else None  # the chunk's padded steps
            if pad is not None:                               # selects, not 0/1 multiplies:
                k_n[pad] = 0                                  # padded steps make no gradient
                k_z[pad] = 0
                z_pass = copy_with(z, pad, 1, z_pass_buf)     # ... and pass dh on
                if dhs_b is not None:                         # upstream at padded outputs
                    dhs_b = copy_with(dhs_b, pad, 0, dhs_buf)     # is ignored

            for t in backward_order(t1 - t0, cache.reverse):
                ts = t0 + t                                   # the time index of this step
                tb = ts - g0                                  # its row in the block
                dh_t = dh_step if dh_all is None else dh_all[ts]
                # (G5) total dL/dh_t = gradient from the loss at t + gradient from step t+1
                if dhs_b is None:
                    xp.copyto(dh_t, carried)
                else:
                    xp.add(dhs_b[t], carried, out=dh_t)
                da_n = da_x[tb, :, 2 * H:]
                xp.multiply(dh_t, k_n[t], out=da_n)                          # (G6)
                if da_h is not None:                                         # reset 'after'
                    xp.multiply(dh_t, k_z[t], out=da_h[tb, :, H:2 * H])      # (G7)
                    xp.multiply(da_n, k_r[t], out=da_h[tb, :, :H])           # (G8) da_r
                    xp.multiply(da_n, r[t], out=da_h[tb, :, 2 * H:])         # (G8) dhn
                    xp.matmul(da_h[tb], weight_hh, out=carried)              # (G9)
                else:
                    xp.multiply(dh_t, k_z[t], out=da_x[tb, :, H:2 * H])      # (G7)
                    xp.matmul(da_n, w_hn, out=drh)                           # (G8') d(r*h)
                    xp.multiply(drh, k_r[t], out=da_x[tb, :, :H])            # (G8') da_r
                    xp.matmul(da_x[tb, :, :2 * H], w_hrz, out=carried)       # (G9)
                    xp.multiply(drh, r[t], out=tmp)
                    carried += tmp                                           # (G9)
                xp.multiply(dh_t, z_pass[t], out=tmp)
                carried += tmp                                               # (G9) direct

        # the block's steps stacked: one GEMM each, added to the sums over blocks
        h_prev2 = h_prev_all[g0:g1].reshape(-1, H)
        da_x2 = da_x.reshape(-1, 3 * H)
        if da_h is not None:
            da_x[:, :, :2 * H] = da_h[:, :, :2 * H]           # r, z rows are shared
            da_h2 = da_h.reshape(-1, 3 * H)
            dweight_hh = add_matmul(dweight_hh, da_h2.T, h_prev2)                   # (G11)
            db_hh_blocks[b] = pairwise_sum(da_h2, (0,))                             # (G11)
        else:
            rh2 = cache.rh[g0:g1].reshape(-1, H)  # type: ignore[index]
            dweight_hh = add_matmul(dweight_hh, da_x2[:, :2 * H].T, h_prev2)       # (G11)
            dweight_hn = add_matmul(dweight_hn, da_x2[:, 2 * H:].T, rh2)           # (G11)
        dweight_ih = add_matmul(dweight_ih, da_x2.T, x[g0:g1].reshape(-1, D))       # (G11)
        if dx is not None:
            xp.matmul(da_x2, cache.weight_ih, out=dx[g0:g1].reshape(-1, D))        # (G10)
        db_ih_blocks[b] = pairwise_sum(da_x2, (0,))                                 # (G11)

    if dweight_hn is not None:                            # reset 'before': [W_hr; W_hz], W_hn
        dweight_hh = xp.concatenate([dweight_hh, dweight_hn])
    # the sums of the blocks' sums, each added pairwise: float32 error not growing with T*N
    db_ih = pairwise_sum(db_ih_blocks, (0,))                                        # (G11)
    db_hh = pairwise_sum(db_hh_blocks, (0,)) if after else None                     # (G11)
    dbias_ih, dbias_hh = bias_grads(db_ih, cache.has_bias_ih, cache.has_bias_hh, db_hh)
    return GRUGrads(dx, carried, dweight_ih, dweight_hh, dbias_ih, dbias_hh, dh_all)
