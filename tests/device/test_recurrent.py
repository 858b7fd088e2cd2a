"""The recurrent stack on a device gives the CPU's numbers.

Every test builds one computation twice, on the CPU and on a device from ``DEVICES`` (the
same seeded model, deep-copied and moved with ``.to(device)``, or the same host arrays
copied with ``on_device``), runs the same inputs, and compares every output, final state and
gradient with ``assert_same`` (exact on the stand-in, within the dtype's tolerance on a GPU),
which also checks that the device results live on the device.

Covered: ``nn.RNN``/``GRU``/``LSTM`` (both engines, layers, directions, batch_first,
unbatched input, given states, lengths, dropout, ``track_state_grads``), the cells, the
``tr.bptt`` kernels called on device arrays, truncated BPTT, ``Linear``/``Embedding``/
``Dropout``/``Sequential``, ``tr.nn.init``, ``tr.monitor``, a float64 gradcheck of the fused
op, and the device errors (lengths on a device, states or inputs on the wrong device).
"""
from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

import tinygrad_rnn as tr
from tinygrad_rnn import bptt
from tinygrad_rnn.backend import module_for_device
from tinygrad_rnn import truncation
from tinygrad_rnn.nn import init
from tinygrad_rnn.nn.recurrent import FusedRecurrent

from ._devices import DEVICES, TOLERANCES, assert_on_device, assert_same, on_device

T, N, D, H = 5, 3, 4, 3
LENGTHS = [5, 2, 4]          # sequence 1 is padded after 2 steps; lengths live on the host
F32, F64 = np.float32, np.float64


# ----------------------------------------------------------------------------- helpers
def _pair(make: Any, device: str) -> tuple[Any, Any]:
    """A seeded module on the CPU and an exact copy of it moved to ``device``."""
    cpu = make()
    return cpu, copy.deepcopy(cpu).to(device)


def _flatten(obj: Any) -> list:
    if isinstance(obj, (tuple, list)):
        return [leaf for item in obj for leaf in _flatten(item)]
    return [obj]


def _weighted_loss(outputs: list, seed: int = 1) -> Any:
    """sum_k <W_k, output_k> with fixed random W_k (made on the host, moved to each output's
    device), so every output gets its own nonzero upstream gradient."""
    rng = np.random.default_rng(seed)
    loss = None
    for out in outputs:
        w = tr.tensor(rng.standard_normal(out.shape).astype(out.dtype), device=out.device)
        term = (out * w).sum()
        loss = term if loss is None else loss + term
    return loss


def _tensor(a: Any, device: str) -> Any:
    """A leaf tensor requiring a gradient made from host data on ``device`` (None stays)."""
    if a is None:
        return None
    if isinstance(a, tuple):
        return tuple(_tensor(v, device) for v in a)
    return tr.tensor(a, requires_grad=True, device=device)


def _run_module(model: Any, device: str, x: np.ndarray, state: Any = None,
                **kwargs: Any) -> dict:
    """Forward and backward of ``model`` on ``device``; every output and gradient by name."""
    xt = _tensor(x, device)
    st = _tensor(state, device)
    outs = _flatten(model(xt, st, **kwargs) if st is not None else model(xt, **kwargs))
    _weighted_loss(outs).backward()
    res = {f"output[{k}]": o.array for k, o in enumerate(outs)}
    res["grad x"] = xt.grad
    for k, s in enumerate(_flatten(st) if st is not None else []):
        res[f"grad state[{k}]"] = s.grad
    for name, p in model.named_parameters():
        res[f"grad {name}"] = p.grad
    return res


def _assert_same_results(dev: dict, cpu: dict, device: str) -> None:
    assert dev.keys() == cpu.keys()
    for key in cpu:
        assert cpu[key] is not None, f"{key} is None on the CPU"
        assert_same(dev[key], cpu[key], device, key)


def _close_host(got: Any, want: Any, device: str, dtype: Any, what: str = "") -> None:
    """Host results derived from device data (norms, Jacobians, losses): exact on the
    stand-in, within the data dtype's tolerance on a GPU."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, what
    if device == "standin":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        tol = TOLERANCES[np.dtype(dtype)]
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=what)


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _states(mode: str, layers: int, dtype: Any, rng: np.random.Generator,
            batch: int | None = N) -> Any:
    shape = (layers, batch, H) if batch is not None else (layers, H)
    h0 = (0.5 * rng.standard_normal(shape)).astype(dtype)
    if mode == "LSTM":
        return h0, (0.5 * rng.standard_normal(shape)).astype(dtype)
    return h0


# ----------------------------------------------------------------------------- layers
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [F64, F32], ids=["f64", "f32"])
@pytest.mark.parametrize("engine", ["fused", "autograd"])
@pytest.mark.parametrize("mode", ["RNN", "GRU", "LSTM"])
def test_layer_two_layers_bidirectional_states_lengths(mode: str, engine: str, dtype: Any,
                                                       device: str) -> None:
    """The full configuration: 2 layers, both directions, given initial states (their
    gradients compared too) and host lengths."""
    def make() -> Any:
        return getattr(tr.nn, mode)(D, H, num_layers=2, bidirectional=True, engine=engine,
                                    dtype=dtype, generator=0)
    cpu, dev = _pair(make, device)
    assert dev.device == device
    rng = _rng(1)
    x = rng.standard_normal((T, N, D)).astype(dtype)
    state = _states(mode, 4, dtype, rng)
    lengths = np.array(LENGTHS)
    want = _run_module(cpu, "cpu", x, state, lengths=lengths)
    got = _run_module(dev, device, x, state, lengths=lengths)
    _assert_same_results(got, want, device)


VARIANTS = [
    pytest.param("RNN", dict(nonlinearity="relu"), {}, id="rnn-relu"),
    pytest.param("RNN", dict(bias=False), dict(lengths=LENGTHS), id="rnn-nobias-lengths"),
    pytest.param("GRU", dict(reset="before", batch_first=True), dict(lengths=LENGTHS),
                 id="gru-before-batch-first"),
    pytest.param("LSTM", dict(peephole=True, coupled=True, forget_bias=1.0,
                              bidirectional=True), dict(lengths=LENGTHS),
                 id="lstm-peephole-coupled-forget-bias"),
    pytest.param("LSTM", dict(peephole=True, num_layers=2, batch_first=True), {},
                 id="lstm-peephole-2layer-batch-first"),
    pytest.param("GRU", {}, dict(lengths=[5, 5, 5]), id="gru-full-lengths"),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("engine", ["fused", "autograd"])
@pytest.mark.parametrize("mode, ctor, fwd", VARIANTS)
def test_layer_variants(mode: str, ctor: dict, fwd: dict, engine: str, device: str) -> None:
    """Options of the layers, default (zero) initial states created on the device."""
    def make() -> Any:
        return getattr(tr.nn, mode)(D, H, engine=engine, dtype=F64, generator=2, **ctor)
    cpu, dev = _pair(make, device)
    shape = (N, T, D) if ctor.get("batch_first") else (T, N, D)
    x = _rng(3).standard_normal(shape)
    _assert_same_results(_run_module(dev, device, x, **fwd), _run_module(cpu, "cpu", x, **fwd),
                         device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("with_state", [False, True], ids=["zero-state", "given-state"])
@pytest.mark.parametrize("engine", ["fused", "autograd"])
@pytest.mark.parametrize("mode", ["GRU", "LSTM"])
def test_layer_unbatched(mode: str, engine: str, with_state: bool, device: str) -> None:
    """(T, D) input with (L, H) states."""
    def make() -> Any:
        return getattr(tr.nn, mode)(D, H, bidirectional=True, engine=engine, dtype=F32,
                                    generator=4)
    cpu, dev = _pair(make, device)
    rng = _rng(5)
    x = rng.standard_normal((T, D)).astype(F32)
    state = _states(mode, 2, F32, rng, batch=None) if with_state else None
    _assert_same_results(_run_module(dev, device, x, state), _run_module(cpu, "cpu", x, state),
                         device)


@pytest.mark.parametrize("device", DEVICES)
def test_layer_loaded_with_load_state_dict(device: str) -> None:
    """A layer moved first and then given the CPU layer's weights by load_state_dict."""
    cpu = tr.nn.LSTM(D, H, num_layers=2, dtype=F64, generator=6)
    dev = tr.nn.LSTM(D, H, num_layers=2, dtype=F64, generator=7).to(device)
    dev.load_state_dict(cpu.state_dict())
    assert dev.device == device
    x = _rng(8).standard_normal((T, N, D))
    _assert_same_results(_run_module(dev, device, x), _run_module(cpu, "cpu", x), device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("engine", ["fused", "autograd"])
@pytest.mark.parametrize("mode", ["GRU", "LSTM"])
def test_layer_dropout_between_layers(mode: str, engine: str, device: str) -> None:
    """Dropout masks come from the layer's seeded host generator, so both devices drop the
    same units; two passes compare two different draws."""
    def make() -> Any:
        return getattr(tr.nn, mode)(D, H, num_layers=3, dropout=0.5, engine=engine,
                                    dtype=F32, generator=9)
    cpu, dev = _pair(make, device)
    cpu.train()
    dev.train()
    x = _rng(10).standard_normal((T, N, D)).astype(F32)
    first_cpu = _run_module(cpu, "cpu", x)
    _assert_same_results(_run_module(dev, device, x), first_cpu, device)
    cpu.zero_grad()
    dev.zero_grad()
    second_cpu = _run_module(cpu, "cpu", x)
    _assert_same_results(_run_module(dev, device, x), second_cpu, device)
    assert not np.array_equal(first_cpu["output[0]"], second_cpu["output[0]"])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("engine", ["fused", "autograd"])
@pytest.mark.parametrize("mode", ["RNN", "LSTM"])
def test_layer_track_state_grads(mode: str, engine: str, device: str) -> None:
    """Per-step dL/dh_t (and dL/dc_t) recorded on the device equal the CPU's."""
    def make() -> Any:
        m = getattr(tr.nn, mode)(D, H, num_layers=2, bidirectional=True, engine=engine,
                                 dtype=F64, generator=11)
        m.track_state_grads = True
        return m
    cpu, dev = _pair(make, device)
    x = _rng(12).standard_normal((T, N, D))
    _run_module(cpu, "cpu", x, lengths=LENGTHS)
    _run_module(dev, device, x, lengths=LENGTHS)
    assert dev.state_grads.keys() == cpu.state_grads.keys() == {(0, 0), (0, 1), (1, 0), (1, 1)}
    for key, slot in cpu.state_grads.items():
        assert dev.state_grads[key].keys() == slot.keys()
        for kind, arr in slot.items():
            assert_same(dev.state_grads[key][kind], arr, device, f"state_grads {key} {kind}")


# ----------------------------------------------------------------------------- states, lengths
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("engine", ["fused", "autograd"])
def test_host_state_and_cpu_tensor_lengths_are_accepted(engine: str, device: str) -> None:
    """States given as host NumPy arrays are copied to the device (as constants are), and
    lengths given as a CPU Tensor are host data: both give the CPU results."""
    def make() -> Any:
        return tr.nn.LSTM(D, H, engine=engine, dtype=F64, generator=13)
    cpu, dev = _pair(make, device)
    rng = _rng(14)
    x = rng.standard_normal((T, N, D))
    h0, c0 = _states("LSTM", 1, F64, rng)
    lengths = tr.tensor(np.array(LENGTHS))
    want = cpu(tr.tensor(x), (h0, c0), lengths=lengths)
    got = dev(tr.tensor(x, device=device), (h0, c0), lengths=lengths)
    assert_same(_flatten(got), _flatten(want), device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("engine", ["fused", "autograd"])
@pytest.mark.parametrize("as_tensor", [True, False], ids=["tensor", "raw-array"])
def test_lengths_on_the_device_are_refused(as_tensor: bool, engine: str, device: str) -> None:
    """Lengths decide which steps run, so they are read on the host; device lengths raise a
    TypeError asking for an explicit copy instead of being copied back silently."""
    model = tr.nn.GRU(D, H, engine=engine, dtype=F64, generator=15).to(device)
    x = tr.tensor(_rng(16).standard_normal((T, N, D)), device=device)
    lengths = on_device(tr.tensor(np.array(LENGTHS)) if as_tensor else np.array(LENGTHS),
                        device)
    with pytest.raises(TypeError, match=f"lengths must be on the host.*{device}"):
        model(x, lengths=lengths)
    explicit = lengths.numpy() if as_tensor else lengths.get()  # the documented copy
    out, _ = model(x, lengths=explicit)
    assert_on_device(out, device)


@pytest.mark.parametrize("device", DEVICES)
def test_state_or_input_on_another_device_is_an_error(device: str) -> None:
    model = tr.nn.LSTM(D, H, dtype=F64, generator=17).to(device)
    x = _rng(18).standard_normal((T, N, D))
    h0 = tr.zeros(1, N, H, dtype=F64)                      # a CPU tensor
    c0 = tr.zeros(1, N, H, dtype=F64, device=device)
    with pytest.raises(RuntimeError, match=f"h_0 is on cpu but the input is on {device}"):
        model(tr.tensor(x, device=device), (h0, c0))
    with pytest.raises(RuntimeError, match=f"(cpu.*{device}|{device}.*cpu)"):
        model(tr.tensor(x))                                # input left on the CPU
    cell = tr.nn.GRUCell(D, H, dtype=F64, generator=19).to(device)
    with pytest.raises(RuntimeError, match=f"hx is on cpu but the input is on {device}"):
        cell(tr.tensor(x[0], device=device), tr.zeros(N, H, dtype=F64))


# ----------------------------------------------------------------------------- cells
CELLS = [
    pytest.param(lambda dt: tr.nn.RNNCell(D, H, dtype=dt, generator=20), id="rnn-tanh"),
    pytest.param(lambda dt: tr.nn.RNNCell(D, H, nonlinearity="relu", dtype=dt, generator=21),
                 id="rnn-relu"),
    pytest.param(lambda dt: tr.nn.GRUCell(D, H, dtype=dt, generator=22), id="gru-after"),
    pytest.param(lambda dt: tr.nn.GRUCell(D, H, reset="before", dtype=dt, generator=23),
                 id="gru-before"),
    pytest.param(lambda dt: tr.nn.LSTMCell(D, H, dtype=dt, generator=24), id="lstm"),
    pytest.param(lambda dt: tr.nn.LSTMCell(D, H, peephole=True, dtype=dt, generator=25),
                 id="lstm-peephole"),
    pytest.param(lambda dt: tr.nn.LSTMCell(D, H, peephole=True, coupled=True, dtype=dt,
                                           generator=26), id="lstm-peephole-coupled"),
    pytest.param(lambda dt: tr.nn.LSTMCell(D, H, forget_bias=1.0, bias=True, dtype=dt,
                                           generator=27), id="lstm-forget-bias"),
]


def _run_cell(cell: Any, device: str, xs: np.ndarray, state: Any) -> dict:
    """Two chained steps from ``state`` (None: the default zero state)."""
    xt = [_tensor(x, device) for x in xs]
    st = _tensor(state, device)
    outs = []
    s = st
    for x in xt:
        s = cell(x, s)
        outs += _flatten(s)
    _weighted_loss(outs).backward()
    res = {f"output[{k}]": o.array for k, o in enumerate(outs)}
    for k, x in enumerate(xt):
        res[f"grad x[{k}]"] = x.grad
    for k, v in enumerate(_flatten(st) if st is not None else []):
        res[f"grad state[{k}]"] = v.grad
    for name, p in cell.named_parameters():
        res[f"grad {name}"] = p.grad
    return res


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [F64, F32], ids=["f64", "f32"])
@pytest.mark.parametrize("make", CELLS)
def test_cells_given_state(make: Any, dtype: Any, device: str) -> None:
    cpu, dev = _pair(lambda: make(dtype), device)
    rng = _rng(28)
    xs = rng.standard_normal((2, N, D)).astype(dtype)
    h0 = (0.5 * rng.standard_normal((N, H))).astype(dtype)
    state = (h0, (0.5 * rng.standard_normal((N, H))).astype(dtype)) \
        if isinstance(cpu, tr.nn.LSTMCell) else h0
    _assert_same_results(_run_cell(dev, device, xs, state), _run_cell(cpu, "cpu", xs, state),
                         device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("unbatched", [False, True], ids=["batched", "unbatched"])
@pytest.mark.parametrize("make", CELLS)
def test_cells_zero_state(make: Any, unbatched: bool, device: str) -> None:
    cpu, dev = _pair(lambda: make(F64), device)
    shape = (2, D) if unbatched else (2, N, D)
    xs = _rng(29).standard_normal(shape)
    _assert_same_results(_run_cell(dev, device, xs, None), _run_cell(cpu, "cpu", xs, None),
                         device)


# ----------------------------------------------------------------------------- bptt kernels
KERNELS = [
    pytest.param("rnn", dict(nonlinearity="tanh"), id="rnn-tanh"),
    pytest.param("rnn", dict(nonlinearity="relu"), id="rnn-relu"),
    pytest.param("gru", dict(reset="after"), id="gru-after"),
    pytest.param("gru", dict(reset="before"), id="gru-before"),
    pytest.param("lstm", {}, id="lstm"),
    pytest.param("lstm", dict(peephole=True), id="lstm-peephole"),
    pytest.param("lstm", dict(peephole=True, coupled=True), id="lstm-peephole-coupled"),
]


def _kernel_arrays(kind: str, opts: dict, dtype: Any, seed: int, step: bool) -> dict:
    """Host arrays for one kernel call: inputs, states, weights (PyTorch layout)."""
    rng = _rng(seed)
    G = {"rnn": 1, "gru": 3, "lstm": 3 if opts.get("coupled") else 4}[kind]

    def draw(*shape: int, scale: float = 0.5) -> np.ndarray:
        return (scale * rng.standard_normal(shape)).astype(dtype)
    a = {"x": draw(N, D, scale=1.0) if step else draw(T, N, D, scale=1.0),
         "h0": draw(N, H), "weight_ih": draw(G * H, D), "weight_hh": draw(G * H, H),
         "bias_ih": draw(G * H), "bias_hh": draw(G * H)}
    if kind == "lstm":
        a["c0"] = draw(N, H)
        a["weight_ch"] = draw((G - 1) * H) if opts.get("peephole") else None
    return a


def _kernel_forward(kind: str, opts: dict, a: dict, **kw: Any) -> tuple:
    args = (a["x"], a["h0"])
    if kind == "lstm":
        return bptt.lstm_forward(*args, a["c0"], a["weight_ih"], a["weight_hh"], a["bias_ih"],
                                 a["bias_hh"], weight_ch=a["weight_ch"],
                                 coupled=opts.get("coupled", False), **kw)
    fn = bptt.rnn_forward if kind == "rnn" else bptt.gru_forward
    return fn(*args, a["weight_ih"], a["weight_hh"], a["bias_ih"], a["bias_hh"], **opts, **kw)


def _kernel_backward(kind: str, upstream: list, cache: Any, input_grad: bool) -> Any:
    fn = {"rnn": bptt.rnn_backward, "gru": bptt.gru_backward, "lstm": bptt.lstm_backward}[kind]
    return fn(*upstream, cache, input_grad=input_grad)


def _upstream(outs: list, seed: int) -> list:
    rng = _rng(seed)
    return [rng.standard_normal(o.shape).astype(o.dtype) for o in outs]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("setting", [
    pytest.param(dict(dtype=F64, reverse=False, lengths=None), id="f64-forward"),
    pytest.param(dict(dtype=F32, reverse=True, lengths=LENGTHS), id="f32-reverse-lengths"),
    pytest.param(dict(dtype=F64, reverse=False, lengths=np.array(LENGTHS)),
                 id="f64-array-lengths"),
])
@pytest.mark.parametrize("kind, opts", KERNELS)
def test_sequence_kernels(kind: str, opts: dict, setting: dict, device: str) -> None:
    """rnn/gru/lstm_forward and _backward on device arrays: every output and every field of
    the gradients (including dh_all/dc_all) equals the CPU's."""
    dtype = setting["dtype"]
    host = _kernel_arrays(kind, opts, dtype, seed=30, step=False)
    dev = {k: (on_device(v, device) if v is not None else None) for k, v in host.items()}
    kw = dict(reverse=setting["reverse"], lengths=setting["lengths"])
    kopts = {k: v for k, v in opts.items() if k != "peephole"}
    *outs_cpu, cache_cpu = _kernel_forward(kind, kopts, host, **kw)
    *outs_dev, cache_dev = _kernel_forward(kind, kopts, dev, **kw)
    assert_same(outs_dev, outs_cpu, device, f"{kind} forward")
    up = _upstream(outs_cpu, seed=31)
    g_cpu = _kernel_backward(kind, up, cache_cpu, True)
    g_dev = _kernel_backward(kind, [on_device(u, device) for u in up], cache_dev, True)
    for field in type(g_cpu)._fields:
        assert_same(getattr(g_dev, field), getattr(g_cpu, field), device, field)
    # no upstream at all for the outputs (None) and no input gradient
    g_cpu = _kernel_backward(kind, [None] + up[1:], cache_cpu, False)
    g_dev = _kernel_backward(kind, [None] + [on_device(u, device) for u in up[1:]],
                             cache_dev, False)
    assert g_dev.dx is None and g_cpu.dx is None
    for field in type(g_cpu)._fields:
        assert_same(getattr(g_dev, field), getattr(g_cpu, field), device, field)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind, opts", KERNELS)
def test_step_kernels(kind: str, opts: dict, device: str) -> None:
    """The per-step forward/backward pairs on device arrays."""
    host = _kernel_arrays(kind, opts, F64, seed=32, step=True)
    dev = {k: (on_device(v, device) if v is not None else None) for k, v in host.items()}

    def run(a: dict, to: Any) -> tuple:
        weights = (a["weight_ih"], a["weight_hh"], a["bias_ih"], a["bias_hh"])
        if kind == "lstm":
            h, c, cache = bptt.lstm_step_forward(a["x"], a["h0"], a["c0"], *weights,
                                                 a["weight_ch"], opts.get("coupled", False))
            up = _upstream([h, c], seed=33)
            return (h, c), bptt.lstm_step_backward(to(up[0]), to(up[1]), cache)
        if kind == "rnn":
            h, cache = bptt.rnn_step_forward(a["x"], a["h0"], *weights, opts["nonlinearity"])
            return (h,), bptt.rnn_step_backward(to(_upstream([h], seed=33)[0]), cache)
        h, cache = bptt.gru_step_forward(a["x"], a["h0"], *weights, opts["reset"])
        return (h,), bptt.gru_step_backward(to(_upstream([h], seed=33)[0]), cache)

    outs_cpu, g_cpu = run(host, lambda u: u)
    outs_dev, g_dev = run(dev, lambda u: on_device(u, device))
    assert_same(outs_dev, outs_cpu, device, f"{kind} step forward")
    for field in type(g_cpu)._fields:
        assert_same(getattr(g_dev, field), getattr(g_cpu, field), device, field)


@pytest.mark.parametrize("device", DEVICES)
def test_kernel_device_errors(device: str) -> None:
    """Mixed devices and device lengths are refused by the kernels with clear errors."""
    host = _kernel_arrays("rnn", {}, F64, seed=34, step=False)
    dev = {k: on_device(v, device) for k, v in host.items()}
    mixed = dict(dev, h0=host["h0"])
    with pytest.raises(RuntimeError, match=f"rnn_forward: x is on {device} but h0 is on cpu"):
        bptt.rnn_forward(mixed["x"], mixed["h0"], mixed["weight_ih"], mixed["weight_hh"])
    with pytest.raises(TypeError, match=f"lengths must be on the host.*{device}"):
        bptt.rnn_forward(dev["x"], dev["h0"], dev["weight_ih"], dev["weight_hh"],
                         lengths=on_device(np.array(LENGTHS), device))
    hs, h_n, cache = bptt.rnn_forward(dev["x"], dev["h0"], dev["weight_ih"], dev["weight_hh"])
    with pytest.raises(RuntimeError, match=f"rnn_backward: .* on {device} but dh_n is on cpu"):
        bptt.rnn_backward(None, np.ones((N, H)), cache)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["GRU", "LSTM"])
def test_gradcheck_fused_op_on_device(mode: str, device: str) -> None:
    """float64 central differences of the fused op on the device, with respect to every
    input (data, states, weights, biases), with lengths and in reverse."""
    rng = _rng(35)
    t, n, d, h = 3, 2, 2, 2
    G = 4 if mode == "LSTM" else 3
    names = ["x", "h0"] + (["c0"] if mode == "LSTM" else []) + [
        "weight_ih", "weight_hh", "bias_ih", "bias_hh"]
    shapes = {"x": (t, n, d), "h0": (n, h), "c0": (n, h), "weight_ih": (G * h, d),
              "weight_hh": (G * h, h), "bias_ih": (G * h,), "bias_hh": (G * h,)}
    inputs = [tr.tensor(0.6 * rng.standard_normal(shapes[k]), requires_grad=True,
                        device=device) for k in names]
    options = {"nonlinearity": "tanh", "reset": "after", "coupled": False}

    def fn(*arrays: Any) -> Any:
        return FusedRecurrent.apply(*arrays, names=tuple(names), mode=mode, options=options,
                                    lengths=np.array([3, 2]), reverse=True, recorder=None,
                                    key=(0, 1))

    outs = fn(*inputs)
    assert_on_device(outs, device)
    assert tr.gradcheck(fn, inputs)


# ----------------------------------------------------------------------------- truncation
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode, engine", [("LSTM", "fused"), ("GRU", "autograd")])
def test_truncation_on_a_device_model(mode: str, engine: str, device: str) -> None:
    """run_truncated (chunked and Williams-Peng) and the truncation-bias meter on a device
    model: losses, final states, accumulated gradients and bias figures equal the CPU's."""
    def make() -> Any:
        return getattr(tr.nn, mode)(D, H, engine=engine, dtype=F64, generator=36)
    cpu, dev = _pair(make, device)
    steps = 7
    rng = _rng(37)
    x_host = rng.standard_normal((steps, N, D))
    w_host = rng.standard_normal((steps, N, H))

    def setup(model: Any, where: str) -> tuple:
        w = tr.tensor(w_host, device=where)

        def loss_fn(out: Any, a: int, b: int) -> Any:
            return (out * w[a:b]).sum()
        return (lambda xw, st: model(xw, st)), tr.tensor(x_host, device=where), loss_fn

    for schedule in (truncation.chunked(3), truncation.williams_peng(2, 3)):
        results = []
        for model, where in ((cpu, "cpu"), (dev, device)):
            model.zero_grad()
            forward, x, loss_fn = setup(model, where)
            losses, state = truncation.run_truncated(forward, x, schedule, loss_fn)
            results.append((losses, state, [p.grad for p in model.parameters()]))
        (l_cpu, s_cpu, g_cpu), (l_dev, s_dev, g_dev) = results
        _close_host(l_dev, l_cpu, device, F64, f"{schedule.name} losses")
        assert_same(_flatten(s_dev), _flatten(s_cpu), device, f"{schedule.name} final state")
        assert_same(g_dev, g_cpu, device, f"{schedule.name} gradients")

    ks = [2, truncation.williams_peng(2, 4), steps]
    bias = []
    for model, where in ((cpu, "cpu"), (dev, device)):
        forward, x, loss_fn = setup(model, where)
        bias.append(truncation.truncation_bias(forward, x, loss_fn, model.parameters(), ks))
    for b_cpu, b_dev in zip(*bias):
        assert b_dev.schedule == b_cpu.schedule
        _close_host([b_dev.relative_error, b_dev.cosine],
                    [b_cpu.relative_error, b_cpu.cosine], device, F64, b_cpu.schedule.name)
    assert bias[1][-1].relative_error < 1e-12  # k >= T is full BPTT


# ----------------------------------------------------------------------------- basic layers
def _run_layer(layer: Any, device: str, x: np.ndarray) -> dict:
    xt = _tensor(x, device)
    out = layer(xt)
    _weighted_loss([out]).backward()
    res = {"output": out.array, "grad x": xt.grad}
    for name, p in layer.named_parameters():
        res[f"grad {name}"] = p.grad
    return res


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [F64, F32], ids=["f64", "f32"])
def test_linear_dropout_sequential(dtype: Any, device: str) -> None:
    x = _rng(38).standard_normal((2, N, D)).astype(dtype)
    cpu, dev = _pair(lambda: tr.nn.Linear(D, 5, dtype=dtype, generator=39), device)
    _assert_same_results(_run_layer(dev, device, x), _run_layer(cpu, "cpu", x), device)

    cpu, dev = _pair(lambda: tr.nn.Dropout(0.4, generator=40), device)
    _assert_same_results(_run_layer(dev, device, x), _run_layer(cpu, "cpu", x), device)
    dev.eval()
    assert_same(dev(tr.tensor(x, device=device)), tr.tensor(x), device, "dropout in eval")

    def make() -> Any:
        return tr.nn.Sequential(
            tr.nn.Linear(D, 6, dtype=dtype, generator=41), tr.nn.Tanh(),
            tr.nn.Dropout(0.3, generator=42), tr.nn.Linear(6, 4, dtype=dtype, generator=43),
            tr.nn.ReLU(), tr.nn.Sigmoid(), tr.nn.Identity())
    cpu, dev = _pair(make, device)
    _assert_same_results(_run_layer(dev, device, x), _run_layer(cpu, "cpu", x), device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("ids_kind", ["host-array", "host-list", "device-tensor"])
def test_embedding(ids_kind: str, device: str) -> None:
    """Ids given on the host (copied to the table's device) or as a device tensor; repeated
    ids accumulate and the padding row gets no gradient on both devices."""
    ids = np.array([[1, 4, 4], [0, 2, 1]])
    cpu, dev = _pair(lambda: tr.nn.Embedding(6, 3, padding_idx=0, dtype=F64, generator=44),
                     device)
    given = {"host-array": ids, "host-list": ids.tolist(),
             "device-tensor": tr.tensor(ids, device=device)}[ids_kind]
    out_cpu = cpu(ids)
    out_dev = dev(given)
    _weighted_loss([out_cpu]).backward()
    _weighted_loss([out_dev]).backward()
    assert_same(out_dev, out_cpu, device, "embedding output")
    assert_same(dev.weight.grad, cpu.weight.grad, device, "embedding weight grad")
    assert not np.any(cpu.weight.grad[0])

    table = tr.tensor(_rng(45).standard_normal((6, 3)), device=device)
    emb = tr.nn.Embedding.from_pretrained(table)
    assert_on_device(emb.weight, device)
    assert not emb.weight.requires_grad
    assert_same(emb(given), tr.tensor(table.numpy()[ids]), device, "from_pretrained lookup")


# ----------------------------------------------------------------------------- init
INITS = [  # (initialiser, shape of the target)
    pytest.param(lambda t: init.uniform_(t, -0.3, 0.2, generator=1), (8, 4), id="uniform_"),
    pytest.param(lambda t: init.normal_(t, 0.1, 0.5, generator=2), (8, 4), id="normal_"),
    pytest.param(lambda t: init.constant_(t, 0.7), (8, 4), id="constant_"),
    pytest.param(init.zeros_, (8, 4), id="zeros_"),
    pytest.param(init.ones_, (8, 4), id="ones_"),
    pytest.param(init.eye_, (8, 4), id="eye_"),
    pytest.param(lambda t: init.xavier_uniform_(t, gain=1.5, generator=3), (8, 4),
                 id="xavier_uniform_"),
    pytest.param(lambda t: init.xavier_normal_(t, generator=4), (8, 4), id="xavier_normal_"),
    pytest.param(lambda t: init.kaiming_uniform_(t, a=5 ** 0.5, generator=5), (8, 4),
                 id="kaiming_uniform_"),
    pytest.param(lambda t: init.kaiming_normal_(t, mode="fan_out", generator=6), (8, 4),
                 id="kaiming_normal_"),
    pytest.param(lambda t: init.orthogonal_(t, gain=2.0, generator=7), (8, 4),
                 id="orthogonal_"),
    pytest.param(lambda t: init.orthogonal_blocks_(t, 2, generator=8), (8, 4),
                 id="orthogonal_blocks_"),
    pytest.param(lambda t: init.rnn_default_(t, 4, generator=9), (8, 4), id="rnn_default_"),
    pytest.param(lambda t: init.set_forget_bias_(t, 2, value=1.5), (8,),
                 id="set_forget_bias_"),
    pytest.param(lambda t: init.scale_to_spectral_radius_(t, 0.9), (4, 4),
                 id="scale_to_spectral_radius_"),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("target", ["parameter", "raw-array"])
@pytest.mark.parametrize("dtype", [F64, F32], ids=["f64", "f32"])
@pytest.mark.parametrize("fn, shape", INITS)
def test_init_on_device(fn: Any, shape: tuple, dtype: Any, target: str, device: str) -> None:
    """An initialiser applied to a device Parameter (or a raw device array) gives the values
    it gives on the CPU for the same seed, in place, in the target's dtype."""
    start = _rng(46).standard_normal(shape).astype(dtype)
    if target == "parameter":
        cpu_t = tr.nn.Parameter(start)
        dev_t = tr.nn.Parameter(tr.tensor(start, device=device))
        cpu_data, dev_data = cpu_t.array, dev_t.array
    else:
        cpu_t = cpu_data = start.copy()
        dev_t = dev_data = module_for_device(device).asarray(start)
    assert fn(cpu_t) is cpu_t
    assert fn(dev_t) is dev_t
    if target == "parameter":
        assert dev_t.array is dev_data  # written in place
    assert_same(dev_data, cpu_data, device, "values")
    assert not np.array_equal(cpu_data, start)


@pytest.mark.parametrize("device", DEVICES)
def test_spectral_radius_of_a_device_matrix(device: str) -> None:
    w = _rng(47).standard_normal((5, 5))
    assert init.spectral_radius(tr.tensor(w, device=device)) == init.spectral_radius(w)
    assert init.spectral_radius(on_device(w, device)) == init.spectral_radius(w)


# ----------------------------------------------------------------------------- monitor
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("engine", ["fused", "autograd"])
def test_gradient_monitor_on_a_device_model(engine: str, device: str) -> None:
    """Norm histories recorded from a device model (with clipping) equal the CPU's."""
    def make() -> Any:
        return tr.nn.LSTM(D, H, num_layers=2, bidirectional=True, engine=engine, dtype=F64,
                          generator=48)
    cpu, dev = _pair(make, device)
    monitors = []
    for model, where in ((cpu, "cpu"), (dev, device)):
        monitor = tr.monitor.GradientMonitor(model)
        for step in range(2):
            model.zero_grad()
            x = _rng(49 + step).standard_normal((T, N, D))
            _run_module(model, where, x, lengths=LENGTHS)
            monitor.before_clip()
            tr.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            monitor.record(clipped=True)
        monitors.append(monitor)
    m_cpu, m_dev = monitors
    for a, b in zip(m_dev.global_norms(), m_cpu.global_norms()):
        _close_host(a, b, device, F64, "global norms")
    for name, norms in m_cpu.param_norms().items():
        _close_host(m_dev.param_norms()[name], norms, device, F64, name)
    for layer in range(2):
        for direction in range(2):
            for kind in ("h", "c"):
                want = m_cpu.state_norms(layer=layer, direction=direction, kind=kind)
                assert want.shape == (2, T)
                _close_host(m_dev.state_norms(layer=layer, direction=direction, kind=kind),
                            want, device, F64, f"state norms {layer} {direction} {kind}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("make", [
    pytest.param(lambda: tr.nn.RNNCell(D, H, dtype=F64, generator=50), id="rnn-cell"),
    pytest.param(lambda: tr.nn.GRU(D, H, reset="before", dtype=F64, generator=51), id="gru"),
    pytest.param(lambda: tr.nn.LSTMCell(D, H, peephole=True, dtype=F64, generator=52),
                 id="lstm-cell-peephole"),
])
def test_step_jacobians_of_a_device_model(make: Any, device: str) -> None:
    """The explicit step Jacobians (a float64 host analysis) of a device model equal the
    CPU's; inputs and states may be device tensors or raw device arrays."""
    cpu, dev = _pair(make, device)
    rng = _rng(53)
    x = rng.standard_normal((T, N, D))
    h0 = 0.5 * rng.standard_normal((N, H))
    c0 = 0.5 * rng.standard_normal((N, H))
    kw_cpu = dict(h0=h0, c0=c0) if isinstance(cpu, tr.nn.LSTMCell) else dict(h0=h0)
    kw_dev = {k: on_device(v, device) for k, v in kw_cpu.items()}
    want = tr.monitor.step_jacobians(cpu, x, sample=1, **kw_cpu)
    got = tr.monitor.step_jacobians(dev, tr.tensor(x, device=device), sample=1, **kw_dev)
    got_raw = tr.monitor.step_jacobians(dev, on_device(x, device), sample=1, **kw_dev)
    assert len(got) == len(want) == T
    for k in range(T):
        assert isinstance(got[k], np.ndarray)
        _close_host(got[k], want[k], device, F64, f"J_{k}")
        _close_host(got_raw[k], want[k], device, F64, f"J_{k} (raw input)")
    _close_host(tr.monitor.jacobian_products(got), tr.monitor.jacobian_products(want), device,
                F64, "products")
    w_cpu = cpu.weight_hh if hasattr(cpu, "weight_hh") else cpu.weight_hh_l0
    w_dev = dev.weight_hh if hasattr(dev, "weight_hh") else dev.weight_hh_l0
    _close_host(tr.monitor.singular_values(w_dev), tr.monitor.singular_values(w_cpu), device,
                F64, "singular values")
    _close_host(tr.monitor.spectral_radius(w_dev[:H]), tr.monitor.spectral_radius(w_cpu[:H]),
                device, F64, "spectral radius")
    # (one gate's square block: a stacked GRU/LSTM weight is refused by name)
    _close_host(tr.monitor.pascanu_bound(w_dev[:H], range(4)),
                tr.monitor.pascanu_bound(w_cpu[:H], range(4)), device, F64, "Pascanu bound")
