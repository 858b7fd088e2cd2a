"""LSTM: hand-derived forward and backward through time on raw arrays.

A per-step pair (:func:`lstm_step_forward` / :func:`lstm_step_backward`) that reads like the
derivation, and the fused sequence pair (:func:`lstm_forward` / :func:`lstm_backward`), the
fast engine, tested equal to a loop of the per-step pair. Variants: peephole connections
(Gers & Schmidhuber 2000) and the coupled input-forget gate (i_t = 1 - f_t).

Conventions
-----------
* Gate rows of weight_ih / weight_hh / biases are stacked in PyTorch's order **i, f, g, o**;
  with ``coupled=True`` there is no input gate and the order is **f, g, o** (3H rows).
* Peepholes ``weight_ch`` are diagonal, shape (3H,) = (w_ci, w_cf, w_co), or (2H,) =
  (w_cf, w_co) when coupled. i and f look at the *previous* cell c_{t-1}; o looks at the
  *new* cell c_t.

Math
----
Forward (row-vector convention; a_i, a_f, a_g, a_o are the row blocks of
x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh; the bracketed terms exist only with peepholes):

* (L1) i_t = sigma(a_i + [w_ci * c_{t-1}])         (coupled: i_t = 1 - f_t)
* (L2) f_t = sigma(a_f + [w_cf * c_{t-1}])
* (L3) g_t = tanh(a_g)
* (L4) c_t = f_t * c_{t-1} + i_t * g_t
* (L5) o_t = sigma(a_o + [w_co * c_t])
* (L6) h_t = o_t * tanh(c_t)

Backward (carried dh and dc are what step t+1 sends back):

* (L7) dh_t = dL_t/dh_t + carried dh_t   (gradient from the loss at t plus from step t+1)
* (L8) da_o = dh_t * tanh(c_t) * o_t (1 - o_t)
* (L9) dc_t = carried dc_t + dh_t * o_t * (1 - tanh^2(c_t)) + [da_o * w_co]
* (L10) da_i = dc_t * g_t * i_t (1 - i_t);  da_f = dc_t * c_{t-1} * f_t (1 - f_t);
  da_g = dc_t * i_t * (1 - g_t^2).
  Coupled: da_f = dc_t * (c_{t-1} - g_t) * f_t (1 - f_t);  da_g = dc_t * (1 - f_t)(1 - g_t^2)
* (L11) carried dc_{t-1} = dc_t * f_t + [da_i * w_ci + da_f * w_cf]
* (L12) carried dh_{t-1} = da_t W_hh,  da_t = [da_i, da_f, da_g, da_o] (gate row order)
* (L13) dx_t = da_t W_ih;  dW_ih = sum_t da_t^T x_t;  dW_hh = sum_t da_t^T h_{t-1};
  db_ih = db_hh = sum_t da_t;  dw_ci = sum da_i * c_{t-1},  dw_cf = sum da_f * c_{t-1},
  dw_co = sum da_o * c_t  (sums over t and the batch)

Shapes
------
N batch, T time, D input size, H hidden size, G = 4 gates (3 when coupled). x (T, N, D)
time-major; h0, c0 (N, H); weight_ih (G*H, D); weight_hh (G*H, H); bias_ih, bias_hh (G*H,)
or None; weight_ch ((G-1)*H,) or None.

References
----------
S. Hochreiter and J. Schmidhuber, "Long short-term memory", Neural Computation 9 (1997).
F. Gers and J. Schmidhuber, "Recurrent nets that time and count", IJCNN 2000 (peepholes).
K. Greff et al., "LSTM: a search space odyssey", IEEE TNNLS 2017 (coupled input-forget gate).
PyTorch ``torch.nn.LSTM`` documentation. docs/recurrent.md (the numbered equations).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..backend import get_array_module
from ..ops.activations import tanh_half_to_sigmoid_, tanh_sigmoid
from ..ops.base import pairwise_sum
from . import _checks as checks
from . import _layout
from ._layout import (
    Array, StepMask, add_matmul, backward_chunks, backward_order, bias_grads, combined_bias,
    copy_with, forward_order, gemm_blocks, lstm_gates, make_mask, select_valid, state_slots,
    zeros_or_copy,
)

__all__ = [
    "LSTMStepCache", "LSTMStepGrads", "LSTMSequenceCache", "LSTMGrads",
    "lstm_step_forward", "lstm_step_backward", "lstm_forward", "lstm_backward",
]


# --------------------------------------------------------------------------------------------
# per-step pair (the readable reference)
# --------------------------------------------------------------------------------------------
class LSTMStepCache(NamedTuple):
    """What :func:`lstm_step_backward` needs from one LSTM step."""

    x_t: Array                 # (N, D)
    h_prev: Array              # (N, H)
    c_prev: Array              # (N, H)
    i_t: Array                 # (N, H) input gate (L1); 1 - f_t when coupled
    f_t: Array                 # (N, H) forget gate (L2)
    g_t: Array                 # (N, H) candidate (L3)
    o_t: Array                 # (N, H) output gate (L5)
    c_t: Array                 # (N, H) new cell (L4)
    tanh_c: Array              # (N, H) tanh(c_t)
    h_t: Array                 # (N, H) new state (L6)
    weight_ih: Array           # (G*H, D)
    weight_hh: Array           # (G*H, H)
    weight_ch: Array | None    # ((G-1)*H,) or None
    coupled: bool
    has_bias_ih: bool
    has_bias_hh: bool


class LSTMStepGrads(NamedTuple):
    """Gradients of one LSTM step (None for absent biases / peepholes)."""

    dx_t: Array
    dh_prev: Array
    dc_prev: Array
    dweight_ih: Array
    dweight_hh: Array
    dbias_ih: Array | None
    dbias_hh: Array | None
    dweight_ch: Array | None


def lstm_step_forward(
    x_t: Array, h_prev: Array, c_prev: Array, weight_ih: Array, weight_hh: Array,
    bias_ih: Array | None, bias_hh: Array | None, weight_ch: Array | None = None,
    coupled: bool = False,
) -> tuple[Array, Array, LSTMStepCache]:
    """One LSTM step, equations (L1)-(L6).

    Parameters
    ----------
    x_t : (N, D); h_prev, c_prev : (N, H) (arrays: None is refused, pass zeros).
    weight_ih, weight_hh : (G*H, D), (G*H, H), rows i, f, g, o (f, g, o when coupled).
    bias_ih, bias_hh : (G*H,) or None.
    weight_ch : peepholes (w_ci, w_cf, w_co) of shape (3H,), ((w_cf, w_co), (2H,) when
        coupled), or None.
    coupled : bool, tie the input gate to the forget gate, i_t = 1 - f_t.

    Returns
    -------
    h_t, c_t : (N, H) and the :class:`LSTMStepCache`.
    """
    _, N, D, H = checks.lstm_step_forward(x_t, h_prev, c_prev, weight_ih, weight_hh, bias_ih,
                                          bias_hh, weight_ch, coupled)
    G = lstm_gates(coupled)
    xp = get_array_module(x_t, h_prev, c_prev, weight_ih, weight_hh)
    a = x_t @ weight_ih.T + h_prev @ weight_hh.T            # (N, G*H) gate pre-activations
    if bias_ih is not None:
        a = a + bias_ih
    if bias_hh is not None:
        a = a + bias_hh
    blocks = [a[:, k * H:(k + 1) * H] for k in range(G)]
    if coupled:
        a_f, a_g, a_o = blocks
    else:
        a_i, a_f, a_g, a_o = blocks
    if weight_ch is not None:
        # peepholes: (w_ci, w_cf, w_co), or (w_cf, w_co) when coupled
        w_c = [weight_ch[k * H:(k + 1) * H] for k in range(G - 1)]
        if not coupled:
            a_i = a_i + w_c[0] * c_prev                                      # (L1)
        a_f = a_f + w_c[-2] * c_prev                                         # (L2)
    f_t = tanh_sigmoid(a_f, xp)                                              # (L2)
    i_t = 1 - f_t if coupled else tanh_sigmoid(a_i, xp)                      # (L1)
    g_t = xp.tanh(a_g)                                                       # (L3)
    c_t = f_t * c_prev + i_t * g_t                                           # (L4)
    if weight_ch is not None:
        a_o = a_o + w_c[-1] * c_t                                            # (L5)
    o_t = tanh_sigmoid(a_o, xp)                                              # (L5)
    tanh_c = xp.tanh(c_t)
    h_t = o_t * tanh_c                                                       # (L6)
    cache = LSTMStepCache(x_t, h_prev, c_prev, i_t, f_t, g_t, o_t, c_t, tanh_c, h_t,
                          weight_ih, weight_hh, weight_ch, bool(coupled), bias_ih is not None,
                          bias_hh is not None)
    return h_t, c_t, cache


def lstm_step_backward(dh_t: Array, dc_t: Array | None, cache: LSTMStepCache) -> LSTMStepGrads:
    """Backward through one LSTM step, equations (L8)-(L13).

    Parameters
    ----------
    dh_t : (N, H) total gradient dL/dh_t (loss at t plus what later steps sent back).
    dc_t : (N, H) gradient reaching c_t from later steps (carried dc), or None for zeros.
    cache : from :func:`lstm_step_forward`.

    Returns
    -------
    :class:`LSTMStepGrads` (dx_t, dh_prev, dc_prev, dweight_ih, dweight_hh, dbias_ih,
    dbias_hh, dweight_ch).
    """
    checks.step_backward("lstm_step_backward", cache, LSTMStepCache, dh_t=dh_t, dc_t=dc_t)
    # exercise: lstm_step_backward begin
    c = cache
    xp = get_array_module(dh_t, c.h_t)
    H = int(c.h_t.shape[1])
    i_t, f_t, g_t, o_t = c.i_t, c.f_t, c.g_t, c.o_t
    peep = c.weight_ch
    if dc_t is None:
        dc_t = xp.zeros_like(c.c_t)

    da_o = dh_t * c.tanh_c * o_t * (1 - o_t)                                 # (L8), (B2)
    dc = dc_t + dh_t * o_t * (1 - c.tanh_c * c.tanh_c)                       # (L9)
    if peep is not None:
        dc = dc + da_o * peep[-H:]                                           # (L9) w_co
    da_g_common = dc * (1 - g_t * g_t)
    if c.coupled:
        da_f = dc * (c.c_prev - g_t) * f_t * (1 - f_t)                       # (L10)
        da_g = da_g_common * (1 - f_t)                                       # (L10)
        da = xp.concatenate([da_f, da_g, da_o], axis=1)      # (N, 3H) rows f, g, o
    else:
        da_i = dc * g_t * i_t * (1 - i_t)                                    # (L10)
        da_f = dc * c.c_prev * f_t * (1 - f_t)                               # (L10)
        da_g = da_g_common * i_t                                             # (L10)
        da = xp.concatenate([da_i, da_f, da_g, da_o], axis=1)  # (N, 4H) rows i, f, g, o
    dc_prev = dc * f_t                                                       # (L11), (V2)
    dweight_ch = None
    if peep is not None:
        w_cf = peep[-2 * H:-H]
        dc_prev = dc_prev + da_f * w_cf                                      # (L11)
        d_cf = pairwise_sum(da_f * c.c_prev, (0,))                           # (L13)
        d_co = pairwise_sum(da_o * c.c_t, (0,))                              # (L13)
        if c.coupled:
            dweight_ch = xp.concatenate([d_cf, d_co])
        else:
            dc_prev = dc_prev + da_i * peep[:H]                              # (L11)
            d_ci = pairwise_sum(da_i * c.c_prev, (0,))                       # (L13)
            dweight_ch = xp.concatenate([d_ci, d_cf, d_co])
    dh_prev = da @ c.weight_hh                                               # (L12)
    dx_t = da @ c.weight_ih                                                  # (L13)
    dweight_ih = da.T @ c.x_t                                                # (L13)
    dweight_hh = da.T @ c.h_prev                                             # (L13)
    dbias_ih, dbias_hh = bias_grads(pairwise_sum(da, (0,)), c.has_bias_ih, c.has_bias_hh)
    return LSTMStepGrads(dx_t, dh_prev, dc_prev, dweight_ih, dweight_hh, dbias_ih, dbias_hh,
                         dweight_ch)
    # exercise: end


# --------------------------------------------------------------------------------------------
# fused sequence pair (the fast path)
# --------------------------------------------------------------------------------------------
def _to_internal_order(w: Array, H: int, xp: Any) -> Array:
    """Rows (i, f, g, o) -> (o, i, f, g), or (f, g, o) -> (o, f, g): move the o block first."""
    return xp.concatenate([w[-H:], w[:-H]], axis=0)


def _to_torch_order(w: Array, H: int, xp: Any) -> Array:
    """Inverse of :func:`_to_internal_order`: back to PyTorch's row order."""
    return xp.concatenate([w[H:], w[:H]], axis=0)


class LSTMSequenceCache(NamedTuple):
    """What :func:`lstm_backward` needs from :func:`lstm_forward`.

    ``gates`` (T, N, G*H) holds the gate activations of every step in the *internal* order
    (o, i, f, g) ((o, f, g) when coupled): the three sigmoid gates form one contiguous block
    (one in-place sigmoid per step) and the gates multiplied by dc_t in (L10) form another
    (one multiply per step in backward). ``weight_ih_o`` / ``weight_hh_o`` are the weights
    with rows in that order. ``h_states`` / ``c_states`` are (T + 1, N, H) buffers laid out as
    in :class:`tinygrad_rnn.bptt._layout.StateSlots`. ``x`` is the input with 0 at padded
    steps (a copy, made only when a step is padded). tanh(c_t) is not kept: backward
    recomputes it from ``c_states`` (the same ``tanh`` on the same numbers, so the same bits),
    which saves a (T, N, H) array for the whole time between forward and backward.
    """

    x: Array
    gates: Array
    h_states: Array
    c_states: Array
    weight_ih_o: Array
    weight_hh_o: Array
    weight_ch: Array | None
    coupled: bool
    has_bias_ih: bool
    has_bias_hh: bool
    mask: StepMask | None
    reverse: bool


class LSTMGrads(NamedTuple):
    """Gradients of a whole LSTM sequence.

    ``dh_all[t]`` / ``dc_all[t]`` are the total dL/dh_t and dL/dc_t at every time index t
    (both None when :func:`lstm_backward` ran with ``state_grads=False``).
    """

    dx: Array
    dh0: Array
    dc0: Array
    dweight_ih: Array
    dweight_hh: Array
    dbias_ih: Array | None
    dbias_hh: Array | None
    dweight_ch: Array | None
    dh_all: Array | None
    dc_all: Array | None


def lstm_forward(
    x: Array, h0: Array, c0: Array, weight_ih: Array, weight_hh: Array,
    bias_ih: Array | None = None, bias_hh: Array | None = None, *,
    weight_ch: Array | None = None, coupled: bool = False, lengths: Any = None,
    reverse: bool = False,
) -> tuple[Array, Array, Array, LSTMSequenceCache]:
    """Run an LSTM over a whole sequence (fast path), equations (L1)-(L6).

    Parameters
    ----------
    x : (T, N, D) time-major inputs; h0, c0 : (N, H) initial states (arrays: None is
        refused, pass zeros for a fresh start).
    weight_ih, weight_hh, bias_ih, bias_hh : PyTorch layout, rows i, f, g, o (f, g, o when
        coupled).
    weight_ch : peepholes, (3H,) = (w_ci, w_cf, w_co) or (2H,) = (w_cf, w_co) when coupled.
    coupled : bool, coupled input-forget gate, i_t = 1 - f_t.
    lengths : optional int array (N,) on the host (list or NumPy); step t of sequence n is
        valid iff t < lengths[n]. Padded steps carry h and c unchanged and output 0; the
        entries of ``x`` there are never used (selected away, so inf or NaN changes nothing).
    reverse : bool, process t = T-1 down to 0.

    Returns
    -------
    hs : (T, N, H), h_n : (N, H), c_n : (N, H), cache : :class:`LSTMSequenceCache`. When no
    step is padded, ``hs`` is a view of ``cache.h_states`` (no copy): do not write into it
    before :func:`lstm_backward` (through :class:`tinygrad_rnn.nn.LSTM` such a write raises
    at backward).

    Notes
    -----
    The gate rows are permuted once per call to (o, i, f, g) and the sigmoid rows of the
    weights, biases and peepholes are pre-scaled by 0.5 (exact), so that
    sigma(a) = 0.5 * tanh(0.5 a) + 0.5 turns into one in-place tanh over all gate rows and an
    in-place multiply-add over them all, by 0.5 and 0.5 on the sigmoid rows and by 1 and 0
    on the g rows (exact: the same numbers as 0.5 * t + 0.5 over the sigmoid block alone, in
    two passes over whole contiguous rows instead of over a strided block). One GEMM
    projects the inputs of all T steps; per step only the recurrent GEMM runs, into a
    preallocated buffer.

    Examples
    --------
    >>> import numpy as np
    >>> from tinygrad_rnn.bptt import lstm_forward, lstm_backward
    >>> rng = np.random.default_rng(0)
    >>> T, N, D, H = 5, 2, 3, 4
    >>> x = rng.standard_normal((T, N, D)).astype(np.float32)
    >>> h0 = np.zeros((N, H), np.float32)
    >>> c0 = np.zeros((N, H), np.float32)
    >>> w_ih = (0.3 * rng.standard_normal((4 * H, D))).astype(np.float32)
    >>> w_hh = (0.3 * rng.standard_normal((4 * H, H))).astype(np.float32)
    >>> hs, h_n, c_n, cache = lstm_forward(x, h0, c0, w_ih, w_hh, lengths=[5, 3])
    >>> hs.shape, hs.dtype
    ((5, 2, 4), dtype('float32'))
    >>> bool(np.all(h_n[1] == hs[2, 1]))          # sequence 1 ends at its step 2
    True
    >>> grads = lstm_backward(np.ones_like(hs), None, None, cache)
    >>> grads.dweight_ih.shape, float(np.abs(grads.dx[3:, 1]).max())   # padded steps: 0
    ((16, 3), 0.0)
    """
    (T, N, D, H), lengths = checks.lstm_forward(x, h0, c0, weight_ih, weight_hh, bias_ih,
                                                bias_hh, weight_ch, coupled, lengths, reverse)
    G = lstm_gates(coupled)
    xp = get_array_module(x, h0, c0, weight_ih, weight_hh)
    dtype = x.dtype
    mask = make_mask(lengths, T, xp)
    slots = state_slots(T, reverse)
    x = select_valid(x, mask)               # padded inputs: 0 (a copy; caller's x kept)
    n_sig = (G - 1) * H                 # end of the sigmoid block (o, i, f) / (o, f)

    # internal row order: o first, then PyTorch's order without o
    w_ih_o = _to_internal_order(weight_ih, H, xp)
    w_hh_o = _to_internal_order(weight_hh, H, xp)
    scale = xp.ones((G * H, 1), dtype=dtype)
    scale[:n_sig] = 0.5                         # (S2) the sigmoid rows halved, exactly
    w_ih_s = w_ih_o * scale
    w_hh_s = w_hh_o * scale                               # (G*H, H)

    # (P1), the input half of (L1)-(L5), for all T steps in one GEMM: (T*N, D) @ (D, G*H)
    gates = xp.matmul(x.reshape(T * N, D), w_ih_s.T).reshape(T, N, G * H)
    bias = combined_bias(bias_ih, bias_hh)
    if bias is not None:
        gates += _to_internal_order(bias, H, xp) * scale[:, 0]

    h_states = xp.empty((T + 1, N, H), dtype=dtype)
    c_states = xp.empty((T + 1, N, H), dtype=dtype)
    h_states[slots.initial] = h0
    c_states[slots.initial] = c0
    rec = xp.empty((G * H, N), dtype=dtype)   # recurrent GEMM output, column form
    # (S1) on the gate rows after the tanh: t * 0.5 + 0.5 on the sigmoid rows, t * 1 + 0 on g
    sig_scale = xp.ones(G * H, dtype=dtype)
    sig_scale[:n_sig] = 0.5
    sig_shift = xp.zeros(G * H, dtype=dtype)
    sig_shift[:n_sig] = 0.5
    tmp = xp.empty((N, H), dtype=dtype)
    tanh_c = xp.empty((N, H), dtype=dtype)    # tanh(c_t) of the current step
    if weight_ch is not None:
        # 0.5-scaled peepholes for the gates that see c_{t-1} (i, f or f) and for o
        w_c_prev = (weight_ch[:-H] * 0.5).reshape(G - 2, H)
        w_co = weight_ch[-H:] * 0.5
        peep_tmp = xp.empty((N, G - 2, H), dtype=dtype)

    for t in forward_order(T, reverse):
        h_prev = h_states[t + slots.prev_offset]
        c_prev = c_states[t + slots.prev_offset]
        h_t = h_states[t + slots.out_offset]
        c_t = c_states[t + slots.out_offset]
        a = gates[t]                                      # (N, G*H), becomes the activations
        o = a[:, :H]
        f = a[:, n_sig - H:n_sig]
        g = a[:, n_sig:]
        xp.matmul(w_hh_s, h_prev.T, out=rec)              # W_hh h_{t-1}, (G*H, N)
        a += rec.T
        if weight_ch is None:
            xp.tanh(a, out=a)                                        # (L3)
            a *= sig_scale
            a += sig_shift                                           # (L1), (L2), (L5)
        else:
            a_cprev = a[:, H:n_sig]                                  # i, f (or f) pre-acts
            xp.multiply(c_prev[:, None, :], w_c_prev, out=peep_tmp)
            a_cprev += peep_tmp.reshape(N, n_sig - H)                # (L1), (L2) peepholes
            xp.tanh(a[:, H:], out=a[:, H:])                          # (L3)
            tanh_half_to_sigmoid_(a[:, H:n_sig])                     # (L1), (L2)
        # (L4) c_t = f * c_prev + i * g   (coupled: c_t = g + f * (c_prev - g))
        if coupled:
            xp.subtract(c_prev, g, out=c_t)
            c_t *= f
            c_t += g
        else:
            xp.multiply(f, c_prev, out=c_t)
            xp.multiply(a[:, H:2 * H], g, out=tmp)
            c_t += tmp
        if weight_ch is not None:
            xp.multiply(c_t, w_co, out=tmp)
            o += tmp                                                 # (L5) peephole on c_t
            xp.tanh(o, out=o)
            tanh_half_to_sigmoid_(o)                                 # (L5)
        xp.tanh(c_t, out=tanh_c)
        xp.multiply(o, tanh_c, out=h_t)                                  # (L6)
        if mask is not None:
            xp.copyto(h_t, h_prev, where=mask.invalid[t])            # (M1) padded: carry h, c
            xp.copyto(c_t, c_prev, where=mask.invalid[t])

    hs = select_valid(slots.out_all(h_states, T), mask)          # padded outputs: 0
    h_n = h_states[slots.final].copy()
    c_n = c_states[slots.final].copy()
    cache = LSTMSequenceCache(x, gates, h_states, c_states, w_ih_o, w_hh_o, weight_ch,
                              bool(coupled), bias_ih is not None, bias_hh is not None, mask,
                              bool(reverse))
    return hs, h_n, c_n, cache


def lstm_backward(
    dhs: Array | None, dh_n: Array | None, dc_n: Array | None, cache: LSTMSequenceCache,
    *, input_grad: bool = True, state_grads: bool = True,
) -> LSTMGrads:
    """Backpropagation through time for :func:`lstm_forward`, equations (L7)-(L13).

    Parameters
    ----------
    dhs : (T, N, H) or None (zeros); entries at padded steps are ignored (selected away:
        inf or NaN there changes nothing).
    dh_n, dc_n : (N, H) upstream gradients of the final states, or None (zeros).
    cache : from :func:`lstm_forward`; only read, so backward can run on it again.
    input_grad : bool
        Compute ``dx`` (one GEMM); with False, ``dx`` is None (an input that needs no
        gradient, such as the data of a first layer).
    state_grads : bool
        Return ``dh_all`` and ``dc_all``, the (T, N, H) total dL/dh_t and dL/dc_t of every
        step; with False they are None and the loop keeps only the current step's (N, H)
        gradients (two (T, N, H) arrays less).

    Returns
    -------
    :class:`LSTMGrads` (dx, dh0, dc0, dweight_ih, dweight_hh, dbias_ih, dbias_hh, dweight_ch,
    dh_all, dc_all), weight gradients in PyTorch's row order.

    Notes
    -----
    Time is processed in blocks of consecutive steps (:func:`gemm_blocks`), last block first,
    and each block in smaller chunks (:func:`backward_chunks`). For a chunk, the
    gate-derivative factors of (L8)-(L10) are computed with whole-chunk operations straight
    into the chunk's rows of the block's ``da`` buffer, and the factor ``p`` of (L9) into a
    small scratch buffer. The loop over the chunk's steps then turns the factors into
    gradients in place: (L7), (L9), one multiply for da_o, one for (da_i, da_f, da_g) (they
    are contiguous in the internal order), (L11) and the recurrent GEMM (L12). After a
    block's steps, its share of the input and weight gradients is one GEMM each over the
    block's stacked rows, added to the sums over blocks; so the backward holds no (T, N, G*H)
    array of gradients, whatever T. When all T steps fit in one block (T * N * G * H at most
    4 * :data:`tinygrad_rnn.bptt._layout.GEMM_BLOCK_ELEMS` on the host, 64 times it on a GPU,
    or T * N at most :data:`tinygrad_rnn.bptt._layout.GEMM_MIN_ROWS`), these are single GEMMs
    over all T*N rows.
    """
    T, N, D, H = checks.sequence_backward("lstm_backward", cache, LSTMSequenceCache, input_grad,
                                          state_grads, dhs=dhs, dh_n=dh_n, dc_n=dc_n)
    c = cache
    x, mask, coupled = c.x, c.mask, c.coupled
    G = lstm_gates(coupled)
    n_sig = (G - 1) * H                 # end of the sigmoid block (o, i, f) / (o, f)
    dtype = c.h_states.dtype
    xp = get_array_module(c.h_states, dhs, dh_n, dc_n)
    slots = state_slots(T, c.reverse)
    peep = c.weight_ch
    c_prev_all = slots.prev_all(c.c_states, T)           # (T, N, H)
    c_out_all = slots.out_all(c.c_states, T)             # (T, N, H)
    h_prev_all = slots.prev_all(c.h_states, T)           # (T, N, H)
    gates = c.gates
    step_elems = N * G * H

    # the Elman/GRU block budget (at least GEMM_MIN_ROWS stacked rows; 64x on a GPU, where
    # 2-step blocks made the step 9% slower at H = 1024, N = 256 on an H100), and on the
    # host at least 4x GEMM_BLOCK_ELEMS (8 MiB of float32 gradients): all T = 64 steps in
    # one block up to H = 256 at N = 32, the single GEMMs over all T*N rows
    budget = _layout.gemm_block_budget(xp, N, step_elems)
    if xp is np:
        budget = max(budget, 4 * _layout.GEMM_BLOCK_ELEMS)
    blocks = gemm_blocks(T, c.reverse, step_elems, budget)
    size = max(t1 - t0 for t0, t1 in blocks)
    # da[tb] (the block's row of time index t0 + tb) first holds the factors k of that
    # step, then (in the loop) its gradients: da_o = dh_t * k_o and
    # (da_i, da_f, da_g) = dc_t * (k_i, k_f, k_g), in the internal order
    da_buf = xp.empty((size, N, G, H), dtype=dtype)
    if state_grads:
        dh_all = xp.empty((T, N, H), dtype=dtype)
        dc_all = xp.empty((T, N, H), dtype=dtype)
    else:
        dh_all = dc_all = None
        dh_step = xp.empty((N, H), dtype=dtype)
        dc_step = xp.empty((N, H), dtype=dtype)
    dh_carried = zeros_or_copy(dh_n, (N, H), dtype, xp)
    dc_carried = zeros_or_copy(dc_n, (N, H), dtype, xp)
    tmp = xp.empty((N, H), dtype=dtype)
    w_hh_o = c.weight_hh_o
    if peep is not None:
        w_co = peep[-H:]
        w_c_prev = peep[:-H].reshape(G - 2, H)           # (w_ci, w_cf) or (w_cf,)
        peep_tmp = xp.empty((N, G - 2, H), dtype=dtype)
        d_co_blocks = xp.empty((len(blocks), H), dtype=dtype)
        d_c_prev_blocks = xp.empty((len(blocks), G - 2, H), dtype=dtype)
    chunk = max(c1 - c0 for c0, c1 in backward_chunks(size, False, step_elems)) if size else 0
    # k (the factors of (L8), (L10), in da's rows) and p (the factor of (L9)) are named in
    # docs/recurrent.md section 7; f_pass is the factor of (L11): f_t, or 1 at padded steps
    tanh_c_buf = xp.empty((chunk, N, H), dtype=dtype)
    p_buf = xp.empty((chunk, N, H), dtype=dtype)
    if mask is not None and mask.padded:
        f_pass_buf = xp.empty((chunk, N, H), dtype=dtype)
        dhs_buf = xp.empty((chunk, N, H), dtype=dtype) if dhs is not None else None
    # sigma (1 - sigma) on the sigmoid rows and 1 - g^2 on the g rows, both as (u - a) a + v
    # over whole gate rows: u = 1, v = 0 on the sigmoid rows; u = 0, v = 1 on the g rows
    # (the same numbers as 1 - sigma, times sigma, and 1 - g * g: -(g * g) + 1 is exact)
    k_u = xp.zeros(G * H, dtype=dtype)
    k_u[:n_sig] = 1
    k_v = xp.zeros(G * H, dtype=dtype)
    k_v[n_sig:] = 1
    dx = xp.empty((T, N, D), dtype=dtype) if input_grad else None
    db_blocks = xp.empty((len(blocks), G * H), dtype=dtype)
    dweight_ih = dweight_hh = None

    for b, (g0, g1) in enumerate(blocks):
        da_blocks = da_buf[:g1 - g0]                      # row ts - g0 holds time index ts
        da = da_blocks.reshape(g1 - g0, N, G * H)
        da_dc = da_blocks[:, :, 1:]                       # the gates multiplied by dc
        for c0, c1 in backward_chunks(g1 - g0, c.reverse, step_elems):
            t0, t1 = g0 + c0, g0 + c1
            # ---- factors of the chunk's steps: da = k * (dh for o, dc for the rest) -------
            k = da[c0:c1]
            a = gates[t0:t1]
            o = a[:, :, :H]
            f = a[:, :, n_sig - H:n_sig]
            g = a[:, :, n_sig:]
            tanh_c = tanh_c_buf[:t1 - t0]
            xp.tanh(c_out_all[t0:t1], out=tanh_c)             # tanh(c_t), as in forward
            xp.subtract(k_u, a, out=k)
            k *= a
            k += k_v                                          # sigma (1 - sigma); 1 - g^2
            k[:, :, :H] *= tanh_c                             # (L8)  da_o = dh * k_o
            k_g = k[:, :, n_sig:]
            if coupled:
                k_g *= 1 - f                                  # (L10) da_g = dc * (1 - f)(1 - g^2)
                k[:, :, H:2 * H] *= c_prev_all[t0:t1] - g     # (L10) da_f
            else:
                k_g *= a[:, :, H:2 * H]                       # (L10) da_g = dc * i (1 - g^2)
                k[:, :, H:2 * H] *= g                         # (L10) da_i = dc * g i (1 - i)
                k[:, :, 2 * H:3 * H] *= c_prev_all[t0:t1]     # (L10) da_f = dc * c_prev f (1 - f)
            p = p_buf[:t1 - t0]
            xp.multiply(tanh_c, tanh_c, out=p)
            xp.subtract(1, p, out=p)
            p *= o                                            # (L9)  dc += dh * p
            f_pass = f                                        # (L11) dc_prev = dc * f_pass
            dhs_b = dhs[t0:t1] if dhs is not None else None
            pad = mask.rows(t0, t1) if mask is not None else None     # the chunk's padded steps
            if pad is not None:                               # selects, not 0/1 multiplies:
                k[pad] = 0                                    # padded steps make no gradient ...
                p[pad] = 0
                f_pass = copy_with(f, pad, 1, f_pass_buf)     # ... and pass dc on
                if dhs is not None:                           # upstream at padded outputs ignored
                    dhs_b = copy_with(dhs[t0:t1], pad, 0, dhs_buf)

            for t in backward_order(t1 - t0, c.reverse):
                ts = t0 + t                                   # the time index of this step
                dh_t = dh_step if dh_all is None else dh_all[ts]
                dc_t = dc_step if dc_all is None else dc_all[ts]
                # (L7) total dL/dh_t = gradient from the loss at t + gradient from step t+1
                if dhs_b is None:
                    xp.copyto(dh_t, dh_carried)
                else:
                    xp.add(dhs_b[t], dh_carried, out=dh_t)
                da_o = k[t, :, :H]
                da_o *= dh_t                                             # (L8)
                # (L9) total dL/dc_t = carried dc + path through h_t (+ through o's peephole)
                xp.multiply(dh_t, p[t], out=dc_t)
                dc_t += dc_carried
                if peep is not None:
                    xp.multiply(da_o, w_co, out=tmp)
                    dc_t += tmp
                da_dc[c0 + t] *= dc_t[:, None, :]                        # (L10) da_i, da_f, da_g
                xp.multiply(dc_t, f_pass[t], out=dc_carried)             # (L11)
                if peep is not None:
                    xp.multiply(da_dc[c0 + t, :, :G - 2], w_c_prev, out=peep_tmp)
                    for j in range(G - 2):
                        dc_carried += peep_tmp[:, j]                     # (L11) peepholes
                xp.matmul(k[t], w_hh_o, out=dh_carried)                  # (L12)
                if mask is not None:
                    xp.copyto(dh_carried, dh_t, where=mask.invalid[ts])  # (M2) padded: pass on

        # (B4) the block's steps stacked: one GEMM each, added to the sums over blocks
        da2 = da.reshape(-1, G * H)
        dweight_ih = add_matmul(dweight_ih, da2.T, x[g0:g1].reshape(-1, D))               # (L13)
        dweight_hh = add_matmul(dweight_hh, da2.T, h_prev_all[g0:g1].reshape(-1, H))      # (L13)
        if dx is not None:
            xp.matmul(da2, c.weight_ih_o, out=dx[g0:g1].reshape(-1, D))                   # (L13)
        db_blocks[b] = pairwise_sum(da2, (0,))                                            # (L13)
        if peep is not None:
            d_co_blocks[b] = pairwise_sum(da[:, :, :H] * c_out_all[g0:g1], (0, 1))       # (L13)
            d_c_prev_blocks[b] = pairwise_sum(                                            # (L13)
                da_dc[:, :, :G - 2] * c_prev_all[g0:g1, :, None, :], (0, 1))

    # the sums of the blocks' sums, each added pairwise: float32 error not growing with T*N
    dweight_ih = _to_torch_order(dweight_ih, H, xp)
    dweight_hh = _to_torch_order(dweight_hh, H, xp)
    db = _to_torch_order(pairwise_sum(db_blocks, (0,)), H, xp)                            # (L13)
    dbias_ih, dbias_hh = bias_grads(db, c.has_bias_ih, c.has_bias_hh)
    dweight_ch = None
    if peep is not None:
        d_co = pairwise_sum(d_co_blocks, (0,))                                            # (L13)
        d_c_prev = pairwise_sum(d_c_prev_blocks, (0,))
        dweight_ch = xp.concatenate([d_c_prev.reshape(-1), d_co])                        # (L13)
    return LSTMGrads(dx, dh_carried, dc_carried, dweight_ih, dweight_hh, dbias_ih, dbias_hh,
                     dweight_ch, dh_all, dc_all)
