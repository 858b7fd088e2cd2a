"""Multi-layer, optionally bidirectional recurrent layers: ``RNN``, ``GRU``, ``LSTM``.

Signatures, semantics, parameter names and shapes, state_dict keys and return layouts are
torch.nn's, so a torch state dict converted to NumPy loads and gives the same numbers.

Two engines compute the same equations (docs/recurrent.md):

* ``engine='fused'`` (default): each layer and direction is ONE op in the graph whose forward
  and backward are the hand-derived BPTT kernels of :mod:`tinygrad_rnn.bptt` (input
  projections for all steps in one GEMM, one recurrent GEMM per step, weight gradients in one
  GEMM over the stacked states).
* ``engine='autograd'``: the cells' step functions composed of primitive ops, step by step;
  every h_t is a Tensor that hooks and ``retain_grad`` see.

Variable-length batches: pass ``lengths`` (N,) to ``forward``, or, as in torch, a
:class:`~tinygrad_rnn.nn.utils.rnn.PackedSequence` as the input (the output is then packed
the same way, and ``h_n``/``c_n`` come from each sequence's last valid step). Step t of
sequence n is valid iff t < lengths[n]; padded steps carry the state unchanged, give zero
outputs, and change neither the valid outputs, nor the final states, nor any gradient. The
reverse direction of a bidirectional layer starts at each sequence's own last valid step.

Devices: a layer runs where its parameters are (``.to(device)``); the input must be there
too. Default initial states are created on that device; states given as host NumPy arrays
are copied there, state Tensors on another device are an error naming both. ``lengths`` must
be on the host (a list, a NumPy array or a CPU Tensor), as in PyTorch: they decide control
flow and are validated there; the (T, N) step mask is built from them on the host and copied
to the device once per call. Lengths on a device raise a TypeError (copy them explicitly with
``.numpy()``). Dropout masks are drawn on the host from the layer's generator and copied, so
a seed gives the same masks on every device.

Per-step state gradients: set ``track_state_grads = True`` and after ``backward()``
``state_grads[(layer, direction)]`` holds dL/dh_t for every step as a (T, N, H) array (and
dL/dc_t under key ``'c'`` for the LSTM): the total gradient reaching h_t, from the loss at t
and from step t+1, identical between the engines. Which calls it covers:

* every forward call made with gradients enabled gets its own per-call record, which
  backward fills in; a call under ``no_grad`` records nothing and leaves everything alone (a
  validation pass between ``backward()`` and reading the gradients loses nothing);
* ``state_grads`` joins the calls that backward passes reached since it last started
  afresh, and it starts afresh at the first forward call after a backward pass reached the
  layer. In a plain loop (forward, backward, read) that is the calls of the last iteration;
  calls no backward pass reached are left out;
* several calls before one backward pass (a sequence fed in segments, step-by-step
  decoding) are joined along time in call order: call 1's T1 steps, then call 2's T2 steps,
  ... (they must share the batch size; ``state_grad_segments`` has them one by one, with
  their ``lengths``).

Padded steps (``lengths``): the state is carried unchanged, so its gradient there is the
carried one (dL/dh_n in the forward direction, dL/dh_0 in the reverse direction, which meets
the padding first); ``state_grads`` keeps these values (they are dL/d(state at step t), what
``retain_grad`` would show). :func:`tinygrad_rnn.monitor.state_grad_norms` and the
:class:`~tinygrad_rnn.monitor.GradientMonitor` leave padded positions out of the per-step
norms.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import _validate
from .. import bptt
from .. import functional as F
from ..backend import get_array_module
from ..engine import record_scope
from ..monitor import StateGradRecorder, StateGradRecording
from ..ops.base import Context, Function
from ..random import get_generator
from ..creation import split, stack, where
from ..tensor import Tensor
from . import _checks as checks
from .cells import (
    CallScope, set_forget_bias, as_state, gru_step, lstm_step, rnn_step,
    zero_state,
)
from .layers import as_input, place
from .module import Module, Parameter
from .utils.rnn import PackedSequence, pad_packed_sequence, repack_like

__all__ = ["RNN", "GRU", "LSTM", "RNNBase", "PROJECTION_BLOCK_BYTES"]

#: The autograd engine's input projection covers blocks of steps of at most this many bytes
#: (one GEMM each; all T steps in one GEMM when they fit).
PROJECTION_BLOCK_BYTES = 8 << 20

_GRAD_FIELD = {
    "x": "dx", "h0": "dh0", "c0": "dc0", "weight_ih": "dweight_ih",
    "weight_hh": "dweight_hh", "bias_ih": "dbias_ih", "bias_hh": "dbias_hh",
    "weight_ch": "dweight_ch",
}


class FusedRecurrent(Function):
    """One layer and direction of an Elman/GRU/LSTM network as a single op whose backward
    is the explicit BPTT of :mod:`tinygrad_rnn.bptt` (eqs. E3-E7, G5-G11, L7-L13 of
    docs/recurrent.md).

    Tensor inputs, in order, named by ``names`` (a subset of x, h0, c0, weight_ih,
    weight_hh, bias_ih, bias_hh, weight_ch). Outputs: hs (T, N, H), h_n (N, H) and, for the
    LSTM, c_n (N, H). ``mode`` is the cell ('RNN', 'GRU' or 'LSTM', torch's name for it) and
    picks the kernel pair; ``options`` holds that cell's variant (``nonlinearity`` for the RNN,
    ``reset`` for the GRU, ``coupled`` for the LSTM); ``recorder`` is the call's
    :class:`~tinygrad_rnn.monitor.StateGradRecorder` (None when not tracking) and ``key`` its
    (layer, direction).
    """

    @staticmethod
    def forward(ctx: Context, *arrays: Any, names: tuple, mode: str, options: dict,
                lengths: Any, reverse: bool, recorder: StateGradRecorder | None,
                key: tuple) -> tuple:
        a = dict(zip(names, arrays))
        common = dict(lengths=lengths, reverse=reverse)
        cache: Any  # the kernel's named cache: LSTM's, GRU's or the Elman RNN's
        outs: tuple
        if mode == "LSTM":
            hs, h_n, c_n, cache = bptt.lstm_forward(
                a["x"], a["h0"], a["c0"], a["weight_ih"], a["weight_hh"], a.get("bias_ih"),
                a.get("bias_hh"), weight_ch=a.get("weight_ch"), coupled=options["coupled"],
                **common)
            outs = (hs, h_n, c_n)
        elif mode == "GRU":
            hs, h_n, cache = bptt.gru_forward(
                a["x"], a["h0"], a["weight_ih"], a["weight_hh"], a.get("bias_ih"),
                a.get("bias_hh"), reset=options["reset"], **common)
            outs = (hs, h_n)
        else:
            hs, h_n, cache = bptt.rnn_forward(
                a["x"], a["h0"], a["weight_ih"], a["weight_hh"], a.get("bias_ih"),
                a.get("bias_hh"), nonlinearity=options["nonlinearity"], **common)
            outs = (hs, h_n)
        ctx.cache, ctx.names, ctx.mode = cache, names, mode
        ctx.recorder, ctx.key = recorder, key
        if getattr(outs[0], "base", None) is not None:
            # hs is a view of the kernel's state buffer, which backward reads (no copy is
            # made when no step is padded): an in-place write to the output then raises at
            # backward (the engine's version counter) instead of corrupting the gradients
            ctx.save_for_backward(outs[0])
            ctx.version_hint = (
                f"The output of a fused {mode} layer is the state buffer its backward "
                f"reads (not a copy, to save a (T, N, H) array); torch.nn.RNN and "
                f"torch.nn.GRU accept a write into their output, tinygrad_rnn does not: "
                f"write into output.clone(), or build the layer with engine='autograd'.")
        return outs

    @staticmethod
    def backward(ctx: Context, *grad_outs: Any) -> tuple:
        need_dx = ctx.needs_input_grad[0]  # skip the dx GEMM for data that needs no gradient
        # the (T, N, H) per-step state gradients only when a recorder asks for them
        keep = dict(input_grad=need_dx, state_grads=ctx.recorder is not None)
        grads: Any  # LSTMGrads, GRUGrads or RNNGrads
        if ctx.mode == "LSTM":
            dhs, dh_n, dc_n = grad_outs
            grads = bptt.lstm_backward(dhs, dh_n, dc_n, ctx.cache, **keep)
        elif ctx.mode == "GRU":
            dhs, dh_n = grad_outs
            grads = bptt.gru_backward(dhs, dh_n, ctx.cache, **keep)
        else:
            dhs, dh_n = grad_outs
            grads = bptt.rnn_backward(dhs, dh_n, ctx.cache, **keep)
        if ctx.recorder is not None:
            ctx.recorder.store(ctx.key, "h", grads.dh_all)
            if ctx.mode == "LSTM":
                ctx.recorder.store(ctx.key, "c", grads.dc_all)
        return tuple(getattr(grads, _GRAD_FIELD[n]) for n in ctx.names)


class RNNBase(Module):
    """Shared machinery of :class:`RNN`, :class:`GRU` and :class:`LSTM`."""

    mode = "RNN"

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, *, engine: str = "fused",
                 dtype: Any = None, generator: Any = None,
                 nonlinearity: str = "tanh", reset: str = "after", peephole: bool = False,
                 coupled: bool = False, forget_bias: float = 0.0) -> None:
        super().__init__()
        name = type(self).__name__
        (input_size, hidden_size, num_layers, dtype, bias, batch_first, bidirectional, dropout,
         peephole, coupled, forget_bias) = checks.check_recurrent_layer_args(
            name, input_size, hidden_size, num_layers, dtype, bias, batch_first, bidirectional,
            dropout, engine, nonlinearity, reset, peephole, coupled, forget_bias)
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional = bidirectional
        self.engine = engine
        self.nonlinearity, self.reset = nonlinearity, reset
        self.peephole, self.coupled, self.forget_bias = peephole, coupled, forget_bias
        # per-step state gradients (track_state_grads, state_grads): the one hook point,
        # recorded by tinygrad_rnn.monitor
        kinds = ("h", "c") if self.mode == "LSTM" else ("h",)
        self.state_grad_recording = StateGradRecording(name, [
            (layer, direction, kind) for layer in range(num_layers)
            for direction in range(2 if bidirectional else 1) for kind in kinds])
        self._rng = get_generator(generator)
        gates = {"RNN": 1, "GRU": 3, "LSTM": 3 if coupled else 4}[self.mode]
        peeps = (2 if coupled else 3) if peephole else 0
        k = 1.0 / math.sqrt(hidden_size)
        dirs = 2 if bidirectional else 1
        for layer in range(num_layers):
            layer_in = input_size if layer == 0 else hidden_size * dirs
            for direction in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if direction else "")
                shapes: list[tuple[str, tuple[int, ...]]] = [
                    ("weight_ih", (gates * hidden_size, layer_in)),
                    ("weight_hh", (gates * hidden_size, hidden_size))]
                if bias:
                    shapes += [("bias_ih", (gates * hidden_size,)),
                               ("bias_hh", (gates * hidden_size,))]
                if peeps:
                    shapes.append(("weight_ch", (peeps * hidden_size,)))
                for base, shape in shapes:
                    data = self._rng.uniform(-k, k, size=shape).astype(dtype)
                    setattr(self, base + sfx, Parameter(data))
                if self.mode == "LSTM" and forget_bias and bias:
                    set_forget_bias(getattr(self, "bias_ih" + sfx),
                                     getattr(self, "bias_hh" + sfx), hidden_size,
                                     forget_bias, coupled)

    # ------------------------------------------------------------------ helpers
    @property
    def num_directions(self) -> int:
        return 2 if self.bidirectional else 1

    # ------------------------------------------------------------------ state gradients
    @property
    def state_grad_segments(self) -> list[StateGradRecorder]:
        """The records (:class:`~tinygrad_rnn.monitor.StateGradRecorder`, one per forward
        call) that make up :attr:`state_grads`, in call order; each has its own ``grads``,
        ``steps`` and ``lengths``."""
        return self.state_grad_recording.segments

    @property
    def state_grads(self) -> dict:
        """``(layer, direction) -> {'h': (T, N, H)[, 'c': ...]}``: dL/dh_t (and dL/dc_t) at
        every step of the forward calls that backward reached since the record last started
        afresh (in a plain loop: the calls of the last forward-backward iteration), joined
        along time in call order (T is the sum of their steps; see the module docstring);
        ``{}`` before a backward pass reached the layer, or when ``track_state_grads`` is
        off. Read-only."""
        return self.state_grad_recording.joined()

    def _params(self, layer: int, direction: int) -> dict[str, Tensor]:
        sfx = f"_l{layer}" + ("_reverse" if direction else "")
        out = {}
        for base in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_ch"):
            p = getattr(self, base + sfx, None)
            if p is not None:
                out[base] = p
        return out

    @property
    def track_state_grads(self) -> bool:
        """Record dL/dh_t per step in :attr:`state_grads` (a bool; see the module
        docstring)."""
        return self.state_grad_recording.track

    @track_state_grads.setter
    def track_state_grads(self, value: bool) -> None:
        self.state_grad_recording.track = _validate.flag(value, "track_state_grads",
                                                type(self).__name__)

    def _check_input(self, x: Tensor) -> tuple[Tensor, bool]:
        checks.check_recurrent_input(type(self).__name__, x, self.input_size,
                                     self.weight_ih_l0)
        unbatched = x.ndim == 2
        if unbatched:
            x = x.reshape(x.shape[0], 1, x.shape[1])
        elif self.batch_first:
            x = x.transpose(1, 0, 2)
        return x, unbatched  # (T, N, D)

    def _initial(self, hx: Any, x: Tensor, unbatched: bool, what: str) -> Tensor:
        """The (L, N, H) initial state on ``x``'s device: zeros, or ``hx`` checked."""
        L = self.num_layers * self.num_directions
        N = x.shape[1]
        shape = (L, N, self.hidden_size)
        if hx is None:
            return zero_state(shape, x)
        hx = as_state(hx, x, f"{type(self).__name__}: {what}")
        checks.check_initial_state(type(self).__name__, hx, x, shape, unbatched, what)
        if unbatched:
            hx = hx.reshape(L, 1, self.hidden_size)
        return hx

    # ------------------------------------------------------------------ forward
    def forward(self, input: Any, hx: Any = None, lengths: Any = None) -> Any:
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx, lengths)
        x, unbatched = self._check_input(as_input(input, "input", type(self).__name__))
        T, N = x.shape[0], x.shape[1]
        lens = checks.check_layer_lengths(type(self).__name__, lengths, T, N)
        valid = None
        if lens is not None:
            # (T, N) step mask, built on the host and copied to the input's device once
            valid = get_array_module(x._data).asarray(np.arange(T)[:, None] < lens[None, :])
            if self.engine == "autograd" and bool((lens < T).any()):
                # Padded steps are never read: select 0 there (a select, not a 0/1
                # multiply), so padding holding NaN or inf reaches neither the input GEMM
                # nor any gradient. (The fused kernels select their padded inputs away
                # themselves and give them gradient 0: a (T, N, D) copy less.)
                x = where(valid[:, :, None], x, 0.0)
        if self.mode == "LSTM":
            h0_all, c0_all = checks.split_lstm_state(type(self).__name__, hx)
            h0_all = self._initial(h0_all, x, unbatched, "h_0")
            c0_all = self._initial(c0_all, x, unbatched, "c_0")
        else:
            h0_all = self._initial(hx, x, unbatched, "hx")
            c0_all = None
        recorder = self.state_grad_recording.start_call(T, lens)

        layer_input = x
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0 and self.training:
                layer_input = F.dropout(layer_input, self.dropout, True, self._rng)
            outs = []
            for direction in range(self.num_directions):
                idx = layer * self.num_directions + direction
                h0 = h0_all[idx]
                c0 = c0_all[idx] if c0_all is not None else None
                params = self._params(layer, direction)
                if self.engine == "fused":
                    hs, hT, cT = self._run_fused(layer_input, h0, c0, params, lens,
                                                 bool(direction), recorder, (layer, direction))
                else:
                    # every op of the call is labelled with its layer (and, inside, its
                    # step) for tr.viz.graph; the labels change no result
                    label = f"{type(self).__name__} layer {layer}" + (
                        ", reverse" if direction else "")
                    with record_scope(CallScope(label)):
                        hs, hT, cT = self._run_autograd(layer_input, h0, c0, params, valid,
                                                        bool(direction), recorder,
                                                        (layer, direction))
                outs.append(hs)
                h_n.append(hT)
                if cT is not None:
                    c_n.append(cT)
            layer_input = outs[0] if len(outs) == 1 else F.cat(outs, axis=-1)

        output = layer_input
        h_n_t = stack(h_n, axis=0)
        c_n_t = stack(c_n, axis=0) if c_n else None
        if unbatched:
            output = output.reshape(T, -1)
            h_n_t = h_n_t.reshape(h_n_t.shape[0], -1)
            c_n_t = c_n_t.reshape(c_n_t.shape[0], -1) if c_n_t is not None else None
        elif self.batch_first:
            output = output.transpose(1, 0, 2)
        if self.mode == "LSTM":
            return output, (h_n_t, c_n_t)
        return output, h_n_t

    def _forward_packed(self, packed: PackedSequence, hx: Any, lengths: Any) -> Any:
        """torch's packed input: the padded batch (original order) run with its lengths,
        the output packed again in the input's layout. h_n (and c_n) are each sequence's
        last valid step, in the original batch order, as is ``hx``."""
        if lengths is not None:
            raise ValueError(f"{type(self).__name__}: lengths cannot be given with a "
                             f"PackedSequence input, which carries its own")
        padded, lens = pad_packed_sequence(packed, batch_first=self.batch_first)
        output, state = self.forward(padded, hx, lengths=lens)
        return repack_like(output, packed, batch_first=self.batch_first), state

    def _run_fused(self, x: Tensor, h0: Tensor, c0: Tensor | None, params: dict,
                   lengths: np.ndarray | None, reverse: bool, recorder: Any,
                   key: tuple) -> tuple:
        """One layer and direction as one :class:`FusedRecurrent` op (host ``lengths``)."""
        names = ["x", "h0"] + (["c0"] if c0 is not None else []) + list(params)
        inputs = [x, h0] + ([c0] if c0 is not None else []) + list(params.values())
        options = {"nonlinearity": self.nonlinearity, "reset": self.reset,
                   "coupled": self.coupled}
        outs = FusedRecurrent.apply(*inputs, names=tuple(names), mode=self.mode,
                                    options=options, lengths=lengths, reverse=reverse,
                                    recorder=recorder, key=key)
        if self.mode == "LSTM":
            return outs
        return outs[0], outs[1], None

    def _run_autograd(self, x: Tensor, h0: Tensor, c0: Tensor | None, params: dict,
                      valid: Any, reverse: bool, recorder: Any, key: tuple) -> tuple:
        """One layer and direction step by step with the cells' step functions; ``valid`` is
        the (T, N) boolean step mask on the input's device, or None."""
        T, N = x.shape[0], x.shape[1]
        H = self.hidden_size
        xp = get_array_module(x._data)
        w_ih, b_ih = params["weight_ih"], params.get("bias_ih")
        GH = int(w_ih.shape[0])
        # The input projection W_ih x_t + b_ih of a block of steps is one GEMM, made when the
        # loop reaches the block: a block's (K, N, G*H) result is freed once its steps ran,
        # so a long sequence never holds all T projections at once (one block, one GEMM, up
        # to PROJECTION_BLOCK_BYTES). Each block is unbound once into its steps' slices,
        # whose backward stacks them once (xw[t] would be T GetItem nodes, each scattering
        # its slice's gradient into a fresh zero array of the whole block: O(T^2) traffic).
        K = max(1, min(T, PROJECTION_BLOCK_BYTES // max(1, N * GH * x.dtype.itemsize)))
        x_blocks = [x] if K >= T else split(x, K, axis=0)
        xw_steps: list[Any] = []
        block = -1
        w_hh, b_hh = params["weight_hh"], params.get("bias_hh")
        h, c = h0, c0
        outs: list[Any] = [None] * T
        for t in (range(T - 1, -1, -1) if reverse else range(T)):
            if t // K != block:  # the loop enters a new block
                block = t // K
                xw_steps = list(F.linear(x_blocks[block], w_ih, b_ih).unbind(0))
            with record_scope(f"t = {t}"):  # tr.viz.graph draws one cluster per step
                xw_t = xw_steps[t % K]                            # (N, G*H)
                xw_steps[t % K] = None  # the block is freed after its last step
                if self.mode == "LSTM":
                    assert c is not None  # an LSTM carries its cell state
                    h_new, c_new = lstm_step(xw_t, h, c, w_hh, b_hh, params.get("weight_ch"),
                                             self.coupled)
                elif self.mode == "GRU":
                    h_new, c_new = gru_step(xw_t, h, w_hh, b_hh, self.reset), None
                else:
                    h_new, c_new = rnn_step(xw_t, h, w_hh, b_hh, self.nonlinearity), None
                if valid is not None:
                    m = valid[t][:, None]  # (N, 1): padded steps keep the state
                    h = where(m, h_new, h)
                    c = where(m, c_new, c) if c is not None else None
                    outs[t] = where(m, h, 0.0)
                else:
                    h, c = h_new, c_new
                    outs[t] = h
                if recorder is not None and h.requires_grad:
                    h.register_hook(recorder.hook(key, "h", t, (T, N, H), h.dtype))
                    if c is not None and valid is None:
                        c.register_hook(recorder.hook(key, "c", t, (T, N, H), c.dtype))
                    elif c is not None:
                        assert c_new is not None  # an LSTM step
                        # h_t is computed from c_new, not from the masked c, so the total
                        # dL/dc_t of a valid row reaches c_new; a padded row's only reaches c
                        c_new.register_hook(recorder.hook(key, "c", t, (T, N, H), c.dtype,
                                                          rows=valid[t]))
                        c.register_hook(recorder.hook(key, "c", t, (T, N, H), c.dtype,
                                                      rows=~valid[t]))
        if T == 0:
            hs = Tensor(xp.zeros((0, N, H), dtype=x.dtype))
            h = h0 * 1.0
            c = c0 * 1.0 if c0 is not None else None
            if recorder is not None:  # no step, no hook: record the empty (0, N, H) arrays
                recorder.empty(key, "h", (0, N, H), x.dtype, xp)
                if c is not None:
                    recorder.empty(key, "c", (0, N, H), x.dtype, xp)
        else:
            hs = stack(outs, axis=0)
        return hs, h, c

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        for name, default in (("bias", True), ("batch_first", False), ("dropout", 0.0),
                              ("bidirectional", False), ("engine", "fused")):
            value = getattr(self, name)
            if value != default:
                s += f", {name}={value!r}"
        return s


class RNN(RNNBase):
    """Elman RNN, h_t = act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh), act = tanh or relu
    (torch.nn.RNN). ``forward(input, hx=None, lengths=None) -> (output, h_n)``."""

    mode = "RNN"

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device: Any = None,
                 dtype: Any = None, *, engine: str = "fused", generator: Any = None) -> None:
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, engine=engine, dtype=dtype, generator=generator,
                         nonlinearity=nonlinearity)
        place(self, device)

    def extra_repr(self) -> str:
        s = super().extra_repr()
        return s + (", nonlinearity='relu'" if self.nonlinearity == "relu" else "")


class GRU(RNNBase):
    """Gated recurrent unit layer (torch.nn.GRU), gate blocks r, z, n; see
    :class:`~tinygrad_rnn.nn.GRUCell` for the equations, the update-gate convention and
    ``reset='after'|'before'``. ``forward(input, hx=None, lengths=None) -> (output, h_n)``."""

    mode = "GRU"

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, device: Any = None, dtype: Any = None, *,
                 reset: str = "after", engine: str = "fused", generator: Any = None) -> None:
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, engine=engine, dtype=dtype, generator=generator,
                         reset=reset)
        place(self, device)

    def extra_repr(self) -> str:
        return super().extra_repr() + (", reset='before'" if self.reset == "before" else "")


class LSTM(RNNBase):
    """Long short-term memory layer (torch.nn.LSTM), gate blocks i, f, g, o; see
    :class:`~tinygrad_rnn.nn.LSTMCell` for the equations and the ``peephole``, ``coupled``
    and ``forget_bias`` options. ``forward(input, (h_0, c_0)=None, lengths=None) ->
    (output, (h_n, c_n))``."""

    mode = "LSTM"

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device: Any = None,
                 dtype: Any = None, *, peephole: bool = False, coupled: bool = False,
                 forget_bias: float = 0.0, engine: str = "fused",
                 generator: Any = None) -> None:
        checks.check_no_projection(proj_size)
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, engine=engine, dtype=dtype, generator=generator,
                         peephole=peephole, coupled=coupled, forget_bias=forget_bias)
        place(self, device)

    def extra_repr(self) -> str:
        s = super().extra_repr()
        for name in ("peephole", "coupled"):
            if getattr(self, name):
                s += f", {name}=True"
        if self.forget_bias:
            s += f", forget_bias={self.forget_bias}"
        return s
