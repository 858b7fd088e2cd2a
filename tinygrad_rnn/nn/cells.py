"""Recurrent cells on the autograd path: one time step, composed of primitive ops.

These are the *study path*: every intermediate (gates, candidate, cell state) is a Tensor in
the graph, so hooks and ``retain_grad`` see them, and autograd differentiates the equations
exactly as written. The hand-derived backward of the same equations lives in
:mod:`tinygrad_rnn.bptt`; both cite the numbered equations of docs/recurrent.md and the test
suite proves them equal.

Devices: a cell runs where its input and parameters are (move it with ``.to(device)``). The
default zero state is created on the input's device; a state given as a host NumPy array is
copied there (host to device), and a state Tensor on another device is an error naming both.

Conventions (PyTorch's, so torch weights load unchanged): ``weight_ih`` (G*H, D),
``weight_hh`` (G*H, H), ``bias_ih`` and ``bias_hh`` (G*H,), with gate blocks stacked in the
order r, z, n (GRU) and i, f, g, o (LSTM).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import functional as F
from ..backend import get_array_module
from ..engine import no_grad, record_scope
from ..random import get_generator
from ..creation import split
from ..tensor import Tensor
from . import _checks as checks
from .layers import as_input, place
from .module import Module, Parameter

__all__ = ["RNNCell", "GRUCell", "LSTMCell", "rnn_step", "gru_step", "lstm_step"]


def _hidden_proj(h: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    return F.linear(h, weight, bias)


def rnn_step(xw: Tensor, h_prev: Tensor, weight_hh: Tensor, bias_hh: Tensor | None,
             nonlinearity: str = "tanh") -> Tensor:
    """One Elman step given the input projection xw = W_ih x_t + b_ih:

    a_t = xw + W_hh h_{t-1} + b_hh                                        (E1)
    h_t = act(a_t)                                                        (E2)
    """
    a = xw + _hidden_proj(h_prev, weight_hh, bias_hh)  # (N, H)
    return a.tanh() if nonlinearity == "tanh" else a.relu()


def gru_step(xw: Tensor, h_prev: Tensor, weight_hh: Tensor, bias_hh: Tensor | None,
             reset: str = "after") -> Tensor:
    """One GRU step given xw = W_ih x_t + b_ih (blocks r, z, n):

    r_t = sigma(W_ir x_t + b_ir + W_hr h_{t-1} + b_hr)                    (G1)
    z_t = sigma(W_iz x_t + b_iz + W_hz h_{t-1} + b_hz)                    (G2)
    'after':  n_t = tanh(W_in x_t + b_in + r_t * (W_hn h_{t-1} + b_hn))    (G3)
    'before': n_t = tanh(W_in x_t + b_in + W_hn (r_t * h_{t-1}) + b_hn)    (G3')
    h_t = (1 - z_t) * n_t + z_t * h_{t-1}                                  (G4)
    """
    H = h_prev.shape[-1]
    xr, xz, xn = split(xw, H, axis=-1)
    if reset == "after":
        hw = _hidden_proj(h_prev, weight_hh, bias_hh)  # (N, 3H)
        hr, hz, hn = split(hw, H, axis=-1)
        r = (xr + hr).sigmoid()
        z = (xz + hz).sigmoid()
        n = (xn + r * hn).tanh()
    else:
        w_rz, w_n = split(weight_hh, [2 * H, H], axis=0)
        if bias_hh is not None:
            b_rz, b_n = split(bias_hh, [2 * H, H], axis=0)
        else:
            b_rz = b_n = None
        hr, hz = split(_hidden_proj(h_prev, w_rz, b_rz), H, axis=-1)
        r = (xr + hr).sigmoid()
        z = (xz + hz).sigmoid()
        n = (xn + _hidden_proj(r * h_prev, w_n, b_n)).tanh()
    return (1.0 - z) * n + z * h_prev


def lstm_step(xw: Tensor, h_prev: Tensor, c_prev: Tensor, weight_hh: Tensor,
              bias_hh: Tensor | None, weight_ch: Tensor | None = None,
              coupled: bool = False) -> tuple[Tensor, Tensor]:
    """One LSTM step given xw = W_ih x_t + b_ih (blocks i, f, g, o; f, g, o if coupled):

    i_t = sigma(a_i [+ w_ci * c_{t-1}])        f_t = sigma(a_f [+ w_cf * c_{t-1}])  (L1), (L2)
    g_t = tanh(a_g)                                                                (L3)
    c_t = f_t * c_{t-1} + i_t * g_t     (coupled: i_t = 1 - f_t)                     (L4)
    o_t = sigma(a_o [+ w_co * c_t])                                                (L5)
    h_t = o_t * tanh(c_t)                                                          (L6)

    where a = W_ih x_t + b_ih + W_hh h_{t-1} + b_hh and the bracketed peephole terms
    (Gers & Schmidhuber 2000) appear only when ``weight_ch`` is given.
    """
    H = h_prev.shape[-1]
    a = xw + _hidden_proj(h_prev, weight_hh, bias_hh)  # (N, G*H)
    if weight_ch is not None:
        peeps = split(weight_ch, H, axis=0)
    if coupled:
        a_f, a_g, a_o = split(a, H, axis=-1)
        if weight_ch is not None:
            w_cf, w_co = peeps
            a_f = a_f + w_cf * c_prev
        f = a_f.sigmoid()
        g = a_g.tanh()
        c = f * c_prev + (1.0 - f) * g
    else:
        a_i, a_f, a_g, a_o = split(a, H, axis=-1)
        if weight_ch is not None:
            w_ci, w_cf, w_co = peeps
            a_i = a_i + w_ci * c_prev
            a_f = a_f + w_cf * c_prev
        i = a_i.sigmoid()
        f = a_f.sigmoid()
        g = a_g.tanh()
        c = f * c_prev + i * g
    if weight_ch is not None:
        a_o = a_o + w_co * c
    o = a_o.sigmoid()
    h = o * c.tanh()
    return h, c


def _uniform(shape: tuple, bound: float, rng: np.random.Generator, dtype: Any) -> Parameter:
    return Parameter(rng.uniform(-bound, bound, size=shape).astype(dtype))


class CallScope:
    """The ``record_scope`` label of one call of a cell ("LSTMCell") or of one layer and
    direction of a recurrent layer on the autograd engine ("LSTM layer 0"): tr.viz.graph
    draws the ops recorded under it as one cluster. Labels are compared by identity, not by
    text, so two calls (one step after another, an encoder and a decoder) are two clusters."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"CallScope({self.text!r})"


class _CellBase(Module):
    gates = 1

    def __init__(self, input_size: int, hidden_size: int, bias: bool, dtype: Any,
                 generator: Any, extra_peephole: int = 0) -> None:
        super().__init__()
        input_size, hidden_size, dtype, bias = checks.check_cell_args(
            type(self).__name__, input_size, hidden_size, dtype, bias)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        rng = get_generator(generator)
        k = 1.0 / math.sqrt(hidden_size)
        G = self.gates
        self.weight_ih = _uniform((G * hidden_size, input_size), k, rng, dtype)
        self.weight_hh = _uniform((G * hidden_size, hidden_size), k, rng, dtype)
        self.bias_ih: Parameter | None
        self.bias_hh: Parameter | None
        self.weight_ch: Parameter | None
        if bias:
            self.bias_ih = _uniform((G * hidden_size,), k, rng, dtype)
            self.bias_hh = _uniform((G * hidden_size,), k, rng, dtype)
        else:
            self.bias_ih = None
            self.bias_hh = None
        if extra_peephole:
            self.weight_ch = _uniform((extra_peephole * hidden_size,), k, rng, dtype)

    def _check_input(self, x: Tensor, hx: Any) -> tuple[Tensor, bool]:
        checks.check_cell_input(type(self).__name__, x, self.input_size, self.weight_ih)
        unbatched = x.ndim == 1
        return (x.reshape(1, -1) if unbatched else x), unbatched

    def _state(self, hx: Any, x: Tensor, unbatched: bool, what: str = "hx") -> Tensor:
        N = x.shape[0]
        if hx is None:
            return zero_state((N, self.hidden_size), x)
        hx = as_state(hx, x, f"{type(self).__name__}: {what}")
        checks.check_cell_state(type(self).__name__, hx, x, self.hidden_size, unbatched, what)
        return hx.reshape(1, -1) if unbatched else hx

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(_CellBase):
    """Elman cell: h' = act(W_ih x + b_ih + W_hh h + b_hh), act tanh or relu (eqs. E1, E2).

    Parameters and shapes as torch.nn.RNNCell: weight_ih (H, D), weight_hh (H, H),
    bias_ih (H,), bias_hh (H,), initialised U(-1/sqrt(H), 1/sqrt(H)).
    """

    gates = 1

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device: Any = None, dtype: Any = None, *,
                 generator: Any = None) -> None:
        checks.check_nonlinearity("RNNCell", nonlinearity)
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, bias, dtype, generator)
        place(self, device)

    def forward(self, input: Any, hx: Any = None) -> Tensor:
        x, unbatched = self._check_input(as_input(input, "input", type(self).__name__), hx)
        h = self._state(hx, x, unbatched)
        with record_scope(CallScope(type(self).__name__)):  # one cluster per call
            xw = F.linear(x, self.weight_ih, self.bias_ih)
            h = rnn_step(xw, h, self.weight_hh, self.bias_hh, self.nonlinearity)
        return h.reshape(-1) if unbatched else h

    def extra_repr(self) -> str:
        return super().extra_repr() + (", nonlinearity='relu'"
                                       if self.nonlinearity == "relu" else "")


class GRUCell(_CellBase):
    """Gated recurrent unit cell (eqs. G1-G4), gate blocks r, z, n as torch.nn.GRUCell.

    The update gate z_t weights the *previous* state: h_t = (1 - z_t) n_t + z_t h_{t-1}
    (PyTorch, and Cho et al. 2014, eq. 7). Chung et al. 2014 and many lecture notes write
    h_t = (1 - z'_t) h_{t-1} + z'_t h~_t, the same model with z' = 1 - z (negate the z rows of
    the weights and biases to move between them).

    ``reset='after'`` (default; PyTorch/cuDNN): the reset gate scales the recurrent
    projection, n_t = tanh(W_in x + b_in + r_t * (W_hn h_{t-1} + b_hn)).
    ``reset='before'`` (Cho et al. 2014, the lectures): it scales the state first,
    n_t = tanh(W_in x + b_in + W_hn (r_t * h_{t-1}) + b_hn). Same parameters, different model.
    """

    gates = 3

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None, *, reset: str = "after",
                 generator: Any = None) -> None:
        checks.check_reset("GRUCell", reset)
        self.reset = reset
        super().__init__(input_size, hidden_size, bias, dtype, generator)
        place(self, device)

    def forward(self, input: Any, hx: Any = None) -> Tensor:
        x, unbatched = self._check_input(as_input(input, "input", type(self).__name__), hx)
        h = self._state(hx, x, unbatched)
        with record_scope(CallScope(type(self).__name__)):  # one cluster per call
            xw = F.linear(x, self.weight_ih, self.bias_ih)
            h = gru_step(xw, h, self.weight_hh, self.bias_hh, self.reset)
        return h.reshape(-1) if unbatched else h

    def extra_repr(self) -> str:
        return super().extra_repr() + (", reset='before'" if self.reset == "before" else "")


class LSTMCell(_CellBase):
    """Long short-term memory cell (eqs. L1-L6), gate blocks i, f, g, o as torch.nn.LSTMCell.

    Options beyond torch:

    ``peephole=True`` adds ``weight_ch`` of shape (3H,) = (w_ci, w_cf, w_co) (Gers &
    Schmidhuber 2000): the input and forget gates see c_{t-1}, the output gate sees c_t.
    ``coupled=True`` ties the input gate to the forget gate, c_t = f_t c_{t-1} + (1 - f_t) g_t;
    there is no input gate, so the weights hold the blocks f, g, o (3H rows) and the peephole
    vector is (w_cf, w_co).
    ``forget_bias`` initialises the forget-gate slice of ``bias_ih`` to this value and that of
    ``bias_hh`` to 0 (their sum is what the gate sees); 0.0 keeps torch's initialisation.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None, *, peephole: bool = False,
                 coupled: bool = False, forget_bias: float = 0.0,
                 generator: Any = None) -> None:
        peephole, coupled, forget_bias = checks.check_lstm_variant("LSTMCell", peephole,
                                                                   coupled, forget_bias)
        self.peephole, self.coupled, self.forget_bias = peephole, coupled, forget_bias
        self.gates = 3 if coupled else 4
        peep = (2 if coupled else 3) if peephole else 0
        super().__init__(input_size, hidden_size, bias, dtype, generator, extra_peephole=peep)
        if not peephole:
            self.weight_ch = None
        if forget_bias and bias:
            assert self.bias_ih is not None and self.bias_hh is not None  # bias=True made them
            set_forget_bias(self.bias_ih, self.bias_hh, hidden_size, forget_bias, coupled)
        place(self, device)

    def forward(self, input: Any, hx: Any = None) -> tuple[Tensor, Tensor]:
        x, unbatched = self._check_input(as_input(input, "input", type(self).__name__), hx)
        h0, c0 = checks.split_lstm_state("LSTMCell", hx)
        h = self._state(h0, x, unbatched, "h_0")
        c = self._state(c0, x, unbatched, "c_0")
        with record_scope(CallScope(type(self).__name__)):  # one cluster per call
            xw = F.linear(x, self.weight_ih, self.bias_ih)
            h, c = lstm_step(xw, h, c, self.weight_hh, self.bias_hh, self.weight_ch,
                             self.coupled)
        if unbatched:
            return h.reshape(-1), c.reshape(-1)
        return h, c

    def extra_repr(self) -> str:
        s = super().extra_repr()
        if self.peephole:
            s += ", peephole=True"
        if self.coupled:
            s += ", coupled=True"
        if self.forget_bias:
            s += f", forget_bias={self.forget_bias}"
        return s


def set_forget_bias(bias_ih: Tensor, bias_hh: Tensor, H: int, value: float,
                     coupled: bool) -> None:
    """Forget-gate slice (block 1 in i,f,g,o; block 0 in f,g,o) of b_ih = value, b_hh = 0."""
    start = 0 if coupled else H
    with no_grad():  # Tensor.__setitem__ counts the writes (version counter)
        bias_ih[start:start + H] = value
        bias_hh[start:start + H] = 0


def zero_state(shape: tuple, x: Tensor) -> Tensor:
    """A zero state of ``shape`` in ``x``'s dtype, created directly on ``x``'s device."""
    xp = get_array_module(x._data)
    return Tensor(xp.zeros(shape, dtype=x.dtype))


def as_state(hx: Any, x: Tensor, what: str) -> Tensor:
    """A user-given state as a Tensor on ``x``'s device.

    Host data (a NumPy array or list) is copied to the input's device, as constants are; a
    Tensor or device array on another device raises a RuntimeError naming both devices
    (moving it silently would hide a bug, and would cut its gradient)."""
    if not isinstance(hx, Tensor):
        owner, _, name = what.partition(": ")
        hx = as_input(hx, name or "state", owner)  # None, a str: a TypeError naming what
        if hx.device != x.device and get_array_module(hx._data) is np:
            return hx.to(x.device)
    if hx.device != x.device:
        raise RuntimeError(f"{what} is on {hx.device} but the input is on {x.device}; move "
                           f"one with .to({x.device!r}) or .to({hx.device!r})")
    return hx

