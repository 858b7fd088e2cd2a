"""The textbook BPTT loops: each cell's per-step pair run in a plain ``for`` loop.

This is the middle rung between the step pair (``*_step_forward`` / ``*_step_backward``,
one step, every line tagged) and the fused kernels (``rnn_forward`` / ``rnn_backward`` and
friends, the whole sequence at once, fast). It is the loop of docs/recurrent.md section 2,
written the way a course writes it:

    carried = dh_n
    for t in reversed(range(T)):
        dh_t = dhs[t] + carried           # (B3): the loss at t plus what step t+1 sent back
        step = step_backward(dh_t, caches[t])
        carried = step.dh_prev
        dW += step.dW                      # (B4), one step at a time

The tests use these loops as the oracle of the fused kernels (tests/bptt/test_kernels.py):
the kernels must give the same numbers. The results are the kernels' own named tuples
(:class:`RNNGrads`, :class:`GRUGrads`, :class:`LSTMGrads`), with every per-step total
``dh_all`` (and ``dc_all``).

What the loop leaves out, on purpose: ``lengths`` (a shorter sequence is a shorter ``x``)
and ``reverse`` (a reversed sequence is ``x[::-1]``). Shapes: x (T, N, D), states (N, H),
``dhs`` (T, N, H) the gradient of the loss at every output (None: zeros), ``dh_n`` / ``dc_n``
(N, H) the gradient of the final states (None: zeros).
"""
from __future__ import annotations

from typing import Any

from ..backend import get_array_module
from .elman import RNNGrads, rnn_step_backward, rnn_step_forward
from .gru import GRUGrads, gru_step_backward, gru_step_forward
from .lstm import LSTMGrads, lstm_step_backward, lstm_step_forward

Array = Any


def _or_zeros(a: Array | None, like: Array) -> Array:
    """``a``, or zeros of ``like``'s shape and dtype when ``a`` is None."""
    return get_array_module(like).zeros_like(like) if a is None else a


def _sum_steps(steps: list, name: str) -> Array | None:
    """The sum over the steps of one parameter's step gradient (None if it has none)."""
    if getattr(steps[0], name) is None:
        return None
    total = getattr(steps[0], name).copy()
    for step in steps[1:]:
        total += getattr(step, name)
    return total


# ------------------------------------------------------------------------------ Elman
def elman_forward_reference(x: Array, h0: Array, weight_ih: Array, weight_hh: Array,
                            bias_ih: Array | None, bias_hh: Array | None,
                            nonlinearity: str = "tanh") -> tuple:
    """(hs (T, N, H), h_n (N, H), caches): :func:`rnn_step_forward` at t = 0, ..., T-1."""
    xp = get_array_module(x)
    h, hs, caches = h0, [], []
    for t in range(x.shape[0]):
        h, cache = rnn_step_forward(x[t], h, weight_ih, weight_hh, bias_ih, bias_hh,
                                    nonlinearity=nonlinearity)              # (E1), (E2)
        hs.append(h)
        caches.append(cache)
    return xp.stack(hs), h, caches


def elman_backward_reference(dhs: Array | None, dh_n: Array | None, caches: list) -> RNNGrads:
    """Backpropagation through time over the steps of :func:`elman_forward_reference`."""
    xp = get_array_module(caches[0].h_t)
    T = len(caches)
    carried = _or_zeros(dh_n, caches[-1].h_t)           # carried_{T-1} = dh_n (B3)
    dh_all: list[Any] = [None] * T
    dx: list[Any] = [None] * T
    steps: list[Any] = [None] * T
    # exercise: bptt_loop_elman begin
    for t in reversed(range(T)):
        dy_t = _or_zeros(None if dhs is None else dhs[t], carried)
        dh_t = dy_t + carried                           # (E3) loss at t + carried from t+1
        steps[t] = rnn_step_backward(dh_t, caches[t])   # (E4)-(E7), one step
        carried = steps[t].dh_prev                      # (E5) what step t sends to t-1; (VG4)
        dh_all[t], dx[t] = dh_t, steps[t].dx_t
    # exercise: end
    return RNNGrads(xp.stack(dx), carried,
                    _sum_steps(steps, "dweight_ih"), _sum_steps(steps, "dweight_hh"),  # (E7)
                    _sum_steps(steps, "dbias_ih"), _sum_steps(steps, "dbias_hh"),
                    xp.stack(dh_all))


# -------------------------------------------------------------------------------- GRU
def gru_forward_reference(x: Array, h0: Array, weight_ih: Array, weight_hh: Array,
                          bias_ih: Array | None, bias_hh: Array | None,
                          reset: str = "after") -> tuple:
    """(hs (T, N, H), h_n (N, H), caches): :func:`gru_step_forward` at t = 0, ..., T-1."""
    xp = get_array_module(x)
    h, hs, caches = h0, [], []
    for t in range(x.shape[0]):
        h, cache = gru_step_forward(x[t], h, weight_ih, weight_hh, bias_ih, bias_hh,
                                    reset=reset)                            # (G1)-(G4)
        hs.append(h)
        caches.append(cache)
    return xp.stack(hs), h, caches


def gru_backward_reference(dhs: Array | None, dh_n: Array | None, caches: list) -> GRUGrads:
    """Backpropagation through time over the steps of :func:`gru_forward_reference`."""
    xp = get_array_module(caches[0].h_t)
    T = len(caches)
    carried = _or_zeros(dh_n, caches[-1].h_t)           # carried_{T-1} = dh_n (B3)
    dh_all: list[Any] = [None] * T
    dx: list[Any] = [None] * T
    steps: list[Any] = [None] * T
    # exercise: bptt_loop_gru begin
    for t in reversed(range(T)):
        dy_t = _or_zeros(None if dhs is None else dhs[t], carried)
        dh_t = dy_t + carried                           # (G5) loss at t + carried from t+1
        steps[t] = gru_step_backward(dh_t, caches[t])   # (G6)-(G11), one step
        carried = steps[t].dh_prev                      # (G9) what step t sends to t-1
        dh_all[t], dx[t] = dh_t, steps[t].dx_t
    # exercise: end
    return GRUGrads(xp.stack(dx), carried,
                    _sum_steps(steps, "dweight_ih"), _sum_steps(steps, "dweight_hh"),  # (G11)
                    _sum_steps(steps, "dbias_ih"), _sum_steps(steps, "dbias_hh"),
                    xp.stack(dh_all))


# ------------------------------------------------------------------------------- LSTM
def lstm_forward_reference(x: Array, h0: Array, c0: Array, weight_ih: Array,
                           weight_hh: Array, bias_ih: Array | None, bias_hh: Array | None,
                           weight_ch: Array | None = None, coupled: bool = False) -> tuple:
    """(hs (T, N, H), h_n, c_n (N, H), caches): :func:`lstm_step_forward` at t = 0..T-1."""
    xp = get_array_module(x)
    h, c, hs, caches = h0, c0, [], []
    for t in range(x.shape[0]):
        h, c, cache = lstm_step_forward(x[t], h, c, weight_ih, weight_hh, bias_ih, bias_hh,
                                        weight_ch=weight_ch, coupled=coupled)  # (L1)-(L6)
        hs.append(h)
        caches.append(cache)
    return xp.stack(hs), h, c, caches


def lstm_total_dc(cache: Any, dh_t: Array, dc_carried: Array) -> Array:
    """The total dL/dc_t of (L9), as the step backward forms it: the gradient carried from
    step t+1, plus the path through h_t = o_t tanh(c_t), plus (with peepholes) the path
    through the output gate's peephole w_co."""
    o, tanh_c = cache.o_t, cache.tanh_c
    dc = dc_carried + dh_t * o * (1 - tanh_c * tanh_c)                       # (L9)
    if cache.weight_ch is not None:
        H = o.shape[1]
        dc = dc + dh_t * tanh_c * o * (1 - o) * cache.weight_ch[-H:]         # (L9) w_co
    return dc


def lstm_backward_reference(dhs: Array | None, dh_n: Array | None, dc_n: Array | None,
                            caches: list) -> LSTMGrads:
    """Backpropagation through time over the steps of :func:`lstm_forward_reference`."""
    xp = get_array_module(caches[0].h_t)
    T = len(caches)
    carried_h = _or_zeros(dh_n, caches[-1].h_t)         # carried_{T-1} = dh_n (B3)
    carried_c = _or_zeros(dc_n, caches[-1].c_t)         # and dc_n for the cell
    dh_all: list[Any] = [None] * T
    dc_all: list[Any] = [None] * T
    dx: list[Any] = [None] * T
    steps: list[Any] = [None] * T
    # exercise: bptt_loop_lstm begin
    for t in reversed(range(T)):
        dy_t = _or_zeros(None if dhs is None else dhs[t], carried_h)
        dh_t = dy_t + carried_h                         # (L7) loss at t + carried from t+1
        dc_all[t] = lstm_total_dc(caches[t], dh_t, carried_c)                # (L9)
        steps[t] = lstm_step_backward(dh_t, carried_c, caches[t])           # (L8)-(L13)
        carried_h, carried_c = steps[t].dh_prev, steps[t].dc_prev           # (L12), (L11)
        dh_all[t], dx[t] = dh_t, steps[t].dx_t
    # exercise: end
    return LSTMGrads(xp.stack(dx), carried_h, carried_c,
                     _sum_steps(steps, "dweight_ih"), _sum_steps(steps, "dweight_hh"),  # (L13)
                     _sum_steps(steps, "dbias_ih"), _sum_steps(steps, "dbias_hh"),
                     _sum_steps(steps, "dweight_ch"), xp.stack(dh_all), xp.stack(dc_all))
