"""Gradient monitoring and the vanishing-gradient analysis (tinygrad_rnn/monitor.py).

* ``state_grad_norms`` of the layers' per-step state gradients equal the norms of dL/dh_t (and
  dL/dc_t) read through ``retain_grad`` on a cell unrolled on the autograd path (1e-10);
* ``GradientMonitor``: history shapes; per-parameter norms are ``np.linalg.norm`` of the
  gradients; the global norm before and after ``clip_grad_norm_``; identical numbers for the
  fused and the autograd engines; rows of ``state_norms`` aligned with the steps (calls
  joined, no_grad passes ignored, NaN rows for steps without data); padded positions left
  out of the per-step norms; unknown module names, layers, directions and kinds refused;
* the analysis functions refuse what they cannot handle (stacked or empty matrices, the
  LSTM's (h0, c0) pair, wrong shapes, 2-D norms) with errors naming it;
* ``step_jacobians`` (Elman tanh/relu, GRU reset after/before, LSTM plain/peephole/coupled)
  equal ``tr.jacobian`` of one step, and ``jacobian_products`` equal the norms of
  ``tr.jacobian`` of the unrolled map from s_t to s_T (1e-10);
* the bound of Pascanu et al. 2013 holds for tanh RNNs, for hypothesis-drawn weights;
* ``fit_decay_rate`` and ``gradient_horizon`` recover the rate and the horizon of synthetic
  geometric sequences exactly;
* docs/vanishing.md numbers its equations (VG1)... and leaves its figures to the demo.
"""
from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn import monitor as mon
from tinygrad_rnn.nn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from tinygrad_rnn.testing import recurrent_weights

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "vanishing.md"
SAME = 1e-10
ENGINES = ("fused", "autograd")


@dataclass(frozen=True)
class Variant:
    mode: str
    options: tuple = ()

    @property
    def is_lstm(self) -> bool:
        return self.mode == "LSTM"

    def layer(self, D: int, H: int, engine: str = "fused", seed: int = 0) -> Any:
        cls = {"RNN": RNN, "GRU": GRU, "LSTM": LSTM}[self.mode]
        return cls(D, H, engine=engine, dtype=np.float64, generator=seed, **dict(self.options))

    def cell(self, D: int, H: int, seed: int = 0) -> Any:
        cls = {"RNN": RNNCell, "GRU": GRUCell, "LSTM": LSTMCell}[self.mode]
        return cls(D, H, dtype=np.float64, generator=seed, **dict(self.options))

    def __str__(self) -> str:
        return "-".join([self.mode.lower()] + [f"{k}={v}" for k, v in self.options])


VARIANTS = [
    Variant("RNN", (("nonlinearity", "tanh"),)), Variant("RNN", (("nonlinearity", "relu"),)),
    Variant("GRU", (("reset", "after"),)), Variant("GRU", (("reset", "before"),)),
    Variant("LSTM"), Variant("LSTM", (("peephole", True),)), Variant("LSTM", (("coupled", True),)),
    Variant("LSTM", (("peephole", True), ("coupled", True))),
]
VARIANT_IDS = [str(v) for v in VARIANTS]


def share(cell: Any, layer: Any) -> Any:
    """Make the cell use the layer's Parameter objects."""
    for name, p in layer._params(0, 0).items():
        setattr(cell, name, p)
    return cell


def inputs(variant: Variant, T: int, N: int, D: int, H: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, N, D))
    if dict(variant.options).get("nonlinearity") == "relu":
        x = x + 0.5                                     # keep pre-activations off the kink
    return {"x": x, "h0": 0.5 * rng.standard_normal((N, H)),
            "c0": 0.5 * rng.standard_normal((N, H)) if variant.is_lstm else None,
            "v_out": rng.standard_normal((T, N, H)), "v_h": rng.standard_normal((N, H)),
            "v_c": rng.standard_normal((N, H))}


# --------------------------------------------------------------------------------------------
# state_grad_norms == norms of retain_grad gradients
# --------------------------------------------------------------------------------------------
def test_state_grad_norms_is_the_per_step_frobenius_norm_in_float64() -> None:
    g = np.random.default_rng(0).standard_normal((5, 3, 4)).astype(np.float32)
    got = mon.state_grad_norms(g)
    assert got.shape == (5,) and got.dtype == np.float64
    want = [np.linalg.norm(g[t].astype(np.float64)) for t in range(5)]
    np.testing.assert_allclose(got, want, rtol=1e-15)
    # regression: T = 0 (an empty sequence) failed in a reshape to (0, -1)
    assert mon.state_grad_norms(np.zeros((0, 2, 3))).shape == (0,)


def reference_state_grads(variant: Variant, layer: Any, data: dict) -> tuple[list, list]:
    """dL/dh_t and dL/dc_t through retain_grad on a cell unrolled step by step."""
    cell = share(variant.cell(layer.input_size, layer.hidden_size), layer)
    h = tr.Tensor(data["h0"].copy())
    c = tr.Tensor(data["c0"].copy()) if variant.is_lstm else None
    hs, cs, loss = [], [], None
    for t in range(data["x"].shape[0]):
        if variant.is_lstm:
            h, c = cell(tr.Tensor(data["x"][t]), (h, c))
            c.retain_grad()
            cs.append(c)
        else:
            h = cell(tr.Tensor(data["x"][t]), h)
        h.retain_grad()
        hs.append(h)
        term = (h * tr.Tensor(data["v_out"][t])).sum()
        loss = term if loss is None else loss + term
    loss = loss + (h * tr.Tensor(data["v_h"])).sum()
    if variant.is_lstm:
        loss = loss + (c * tr.Tensor(data["v_c"])).sum()
    loss.backward()
    return ([np.linalg.norm(t.grad) for t in hs], [np.linalg.norm(t.grad) for t in cs])


def layer_state_grads(variant: Variant, layer: Any, data: dict) -> dict:
    layer.track_state_grads = True
    h0 = tr.Tensor(data["h0"][None].copy())
    if variant.is_lstm:
        out, (h_n, c_n) = layer(tr.Tensor(data["x"]), (h0, tr.Tensor(data["c0"][None].copy())))
    else:
        (out, h_n), c_n = layer(tr.Tensor(data["x"]), h0), None
    loss = (out * tr.Tensor(data["v_out"])).sum() + (h_n[0] * tr.Tensor(data["v_h"])).sum()
    if c_n is not None:
        loss = loss + (c_n[0] * tr.Tensor(data["v_c"])).sum()
    loss.backward()
    return layer.state_grads[(0, 0)]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_per_step_norms_equal_retain_grad_norms(variant: Variant, engine: str) -> None:
    data = inputs(variant, 7, 2, 3, 4, seed=1)
    layer = variant.layer(3, 4, engine, seed=2)
    slot = layer_state_grads(variant, layer, data)
    layer.zero_grad()
    want_h, want_c = reference_state_grads(variant, layer, data)
    np.testing.assert_allclose(mon.state_grad_norms(slot["h"]), want_h, rtol=SAME, atol=0)
    if variant.is_lstm:
        np.testing.assert_allclose(mon.state_grad_norms(slot["c"]), want_c, rtol=SAME, atol=0)
    else:
        assert "c" not in slot


# --------------------------------------------------------------------------------------------
# GradientMonitor
# --------------------------------------------------------------------------------------------
class Tagger(tr.nn.Module):
    """An LSTM with a linear readout at every step."""

    def __init__(self, engine: str, D: int = 3, H: int = 4) -> None:
        super().__init__()
        self.rnn = LSTM(D, H, engine=engine, dtype=np.float64, generator=5)
        self.out = tr.nn.Linear(H, 2, dtype=np.float64, generator=6)

    def forward(self, x: Any) -> Any:
        h, _ = self.rnn(x)
        return self.out(h)


def run_monitored(engine: str, Ts: tuple = (6, 6, 4, 6), max_norm: float = 0.5) -> dict:
    """Train-like steps (no update): forward, backward, record pre-clip norm, clip, record."""
    model = Tagger(engine)
    monitor = mon.GradientMonitor(model)
    assert model.rnn.track_state_grads
    rng = np.random.default_rng(7)
    log: dict = {"pre": [], "post": [], "params": [], "h": [], "c": []}
    for i, T in enumerate(Ts):
        model.zero_grad()
        x = rng.standard_normal((T, 2, 3))
        y = rng.standard_normal((T, 2, 2))
        scale = 1.0 if i % 2 else 0.01                  # some steps get clipped, some not
        loss = scale * ((model(tr.Tensor(x)) - tr.Tensor(y)) ** 2).sum()
        loss.backward()
        log["pre"].append(np.sqrt(sum(float((p.grad ** 2).sum()) for p in model.parameters())))
        log["h"].append(mon.state_grad_norms(model.rnn.state_grads[(0, 0)]["h"]))
        log["c"].append(mon.state_grad_norms(model.rnn.state_grads[(0, 0)]["c"]))
        if i % 2 == 0:
            monitor.before_clip()
            total = tr.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            monitor.record(clipped=True)
        else:
            total = tr.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            monitor.record(pre_clip_norm=total)
        assert abs(float(total.item()) - log["pre"][-1]) <= 1e-12 * log["pre"][-1]
        log["post"].append(np.sqrt(sum(float((p.grad ** 2).sum())
                                       for p in model.parameters())))
        log["params"].append({n: np.linalg.norm(p.grad) for n, p in model.named_parameters()})
    log["monitor"] = monitor
    return log


def test_gradient_monitor_history_shapes_and_values() -> None:
    Ts = (6, 6, 4, 6)
    log = run_monitored("fused", Ts)
    monitor = log["monitor"]
    assert monitor.steps == len(Ts)
    pre, post = monitor.global_norms()
    assert pre.shape == post.shape == (len(Ts),)
    np.testing.assert_allclose(pre, log["pre"], rtol=1e-12)
    np.testing.assert_allclose(post, log["post"], rtol=1e-12)
    assert np.all(post <= 0.5 * (1 + 1e-9))
    assert np.any(pre > 0.5) and np.any(pre < 0.5)     # both cases were exercised
    np.testing.assert_array_equal(post[pre < 0.5], pre[pre < 0.5])  # below: untouched
    norms = monitor.param_norms()
    assert list(norms) == [n for n, _ in Tagger("fused").named_parameters()]
    for name, series in norms.items():
        assert series.shape == (len(Ts),)
        np.testing.assert_allclose(series, [row[name] for row in log["params"]], rtol=1e-12)
    for kind in ("h", "c"):
        grid = monitor.state_norms(kind=kind)
        assert grid.shape == (len(Ts), max(Ts))
        for i, T in enumerate(Ts):
            np.testing.assert_array_equal(grid[i, :T], log[kind][i])
            assert np.all(np.isnan(grid[i, T:]))             # shorter sequences: NaN padding
    assert np.array_equal(monitor.state_norms("rnn"), monitor.state_norms(), equal_nan=True)


def test_gradient_monitor_numbers_are_identical_for_both_engines() -> None:
    fused, auto = run_monitored("fused"), run_monitored("autograd")
    for a, b in zip(fused["monitor"].global_norms(), auto["monitor"].global_norms()):
        np.testing.assert_allclose(a, b, rtol=SAME)
    pf, pa = fused["monitor"].param_norms(), auto["monitor"].param_norms()
    for name in pf:
        np.testing.assert_allclose(pf[name], pa[name], rtol=SAME)
    for kind in ("h", "c"):
        np.testing.assert_allclose(fused["monitor"].state_norms(kind=kind),
                                   auto["monitor"].state_norms(kind=kind), rtol=SAME)


def test_record_reads_gradients_and_never_changes_them() -> None:
    model = Tagger("fused")
    monitor = mon.GradientMonitor(model)
    model(tr.Tensor(np.ones((3, 1, 3)))).sum().backward()
    before = {n: p.grad.array.copy() for n, p in model.named_parameters()}
    monitor.record()
    for n, p in model.named_parameters():
        np.testing.assert_array_equal(p.grad, before[n])
    pre, post = monitor.global_norms()
    assert pre[0] == post[0]                            # no clipping: one norm


def test_record_clipped_without_the_pre_clip_norm_raises() -> None:
    """Regression: record(clipped=True) without before_clip() used to store the clipped norm
    as the norm before clipping."""
    model = Tagger("fused")
    monitor = mon.GradientMonitor(model)
    model(tr.Tensor(np.ones((3, 1, 3)))).sum().backward()
    tr.nn.utils.clip_grad_norm_(model.parameters(), 1e-3)
    with pytest.raises(RuntimeError, match="before_clip"):
        monitor.record(clipped=True)
    assert monitor.steps == 0


def test_state_norms_needs_a_name_with_two_recurrent_modules() -> None:
    class Two(tr.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = RNN(2, 3, dtype=np.float64)
            self.b = GRU(3, 3, dtype=np.float64)

        def forward(self, x: Any) -> Any:
            return self.b(self.a(x)[0])[0]

    model = Two()
    monitor = mon.GradientMonitor(model)
    assert set(monitor.recurrent) == {"a", "b"}
    model(tr.Tensor(np.ones((4, 1, 2)))).sum().backward()
    monitor.record()
    with pytest.raises(ValueError, match="name one"):
        monitor.state_norms()
    assert monitor.state_norms("a").shape == monitor.state_norms("b").shape == (1, 4)


def test_monitor_of_a_bare_recurrent_layer() -> None:
    rnn = RNN(2, 3, dtype=np.float64)
    monitor = mon.GradientMonitor(rnn)
    out, _ = rnn(tr.Tensor(np.ones((5, 2, 2))))
    out.sum().backward()
    monitor.record()
    assert monitor.state_norms().shape == (1, 5)


@pytest.mark.parametrize("engine", ENGINES)
def test_monitor_records_an_empty_sequence(engine: str) -> None:
    """Regression: a T = 0 batch gives (0, N, H) state gradients; recording them crashed."""
    rnn = RNN(2, 3, dtype=np.float64, engine=engine)
    monitor = mon.GradientMonitor(rnn)
    h0 = tr.Tensor(np.ones((1, 2, 3)), requires_grad=True)
    _, h_n = rnn(tr.Tensor(np.ones((0, 2, 2))), h0)
    h_n.sum().backward()
    monitor.record()
    assert monitor.state_norms().shape == (1, 0)
    assert monitor.global_norms()[0].tolist() == [0.0]   # no parameter was used


def test_state_norms_refuses_unknown_keys_and_lists_the_valid_ones() -> None:
    """Regression: an unknown module, layer, direction or kind gave an empty (0, 0) array."""
    gru = GRU(3, 2, num_layers=2, dtype=np.float64)
    monitor = mon.GradientMonitor(gru)
    out, _ = gru(tr.Tensor(np.ones((4, 1, 3))))
    out.sum().backward()
    monitor.record()
    assert monitor.state_norms("(model)", layer=1).shape == (1, 4)   # a bare layer's name
    with pytest.raises(ValueError, match=r"no recurrent module named 'rnn'.*\['\(model\)'\]"):
        monitor.state_norms("rnn")
    valid = r"\[\(0, 0, 'h'\), \(1, 0, 'h'\)\]"
    for kwargs in ({"kind": "c"}, {"layer": 2}, {"direction": 1}):
        with pytest.raises(ValueError, match=valid):
            monitor.state_norms(**kwargs)
    with pytest.raises(TypeError, match="layer must be an integer"):
        monitor.state_norms(layer=1.0)
    empty = mon.GradientMonitor(tr.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="no recurrent module"):
        empty.state_norms()


@pytest.mark.parametrize("engine", ENGINES)
def test_state_norms_rows_stay_aligned_with_the_steps(engine: str) -> None:
    """Regression: two calls before one backward kept only the last call's steps, and a
    forward under no_grad between backward and record made that step record no row, so
    the rows of state_norms no longer matched the steps."""
    gru = GRU(2, 3, engine=engine, dtype=np.float64, generator=1)
    monitor = mon.GradientMonitor(gru)
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (6, 1, 2))
    out, _ = gru(tr.Tensor(x))                               # step 0: one call, 6 steps
    out.sum().backward()
    monitor.record()
    whole = monitor.state_norms()[0]
    gru.zero_grad()                                          # step 1: 4 + 2 steps, two calls
    o1, h1 = gru(tr.Tensor(x[:4]))
    o2, _ = gru(tr.Tensor(x[4:]), h1)
    (o1.sum() + o2.sum()).backward()
    with tr.no_grad():                                       # a validation pass
        gru(tr.Tensor(x))
    monitor.record()
    monitor.record()                                         # step 2: no new backward
    grid = monitor.state_norms()
    assert grid.shape == (monitor.steps, 6) == (3, 6)
    np.testing.assert_allclose(grid[1], whole, rtol=SAME)    # the segments, joined
    assert np.isnan(grid[2]).all()                           # no data: a NaN row
    assert monitor.global_norms()[0].shape == (3,)


@pytest.mark.parametrize("engine", ENGINES)
def test_padded_positions_are_left_out_of_the_per_step_norms(engine: str) -> None:
    """The layer stores the carried gradient at padded steps (test_state_grads.py); the
    norms leave those positions out, so a short sequence's final-state gradient does not
    show up at late steps, and a step no sequence reaches is NaN."""
    gru = GRU(3, 2, engine=engine, dtype=np.float64, generator=2)
    monitor = mon.GradientMonitor(gru)
    rng = np.random.default_rng(3)
    lengths = np.array([4, 2, 0])
    _, h_n = gru(tr.Tensor(rng.uniform(-1, 1, (5, 3, 3))), lengths=lengths)
    (h_n * tr.Tensor(rng.standard_normal(h_n.shape))).sum().backward()
    monitor.record()
    g = gru.state_grads[(0, 0)]["h"]
    want = [np.linalg.norm(g[t, t < lengths]) for t in range(4)] + [np.nan]
    got = monitor.state_norms()[0]
    np.testing.assert_allclose(got, want, rtol=1e-15)
    np.testing.assert_allclose(mon.state_grad_norms(g, lengths), want, rtol=1e-15)
    # counted, the carried gradients would dominate: the full norm at t = 3 includes the
    # final-state gradients of the sequences of length 2 and 0
    assert mon.state_grad_norms(g)[3] > 1.5 * got[3]
    assert mon.gradient_horizon(got, 1e-2) == mon.gradient_horizon(got[:4], 1e-2)
    with pytest.raises(ValueError, match=r"lengths of shape \(2,\) do not match"):
        mon.state_grad_norms(g, [1, 2])


# --------------------------------------------------------------------------------------------
# step Jacobians and their products against tr.jacobian
# --------------------------------------------------------------------------------------------
def step_map(variant: Variant, cell: Any, x_t: np.ndarray, H: int) -> Any:
    """s_{t-1} -> s_t for one sample: s = h (H,), or (h, c) flattened to (2H,) for the LSTM."""
    def fn(s: Any) -> Any:
        if variant.is_lstm:
            h, c = cell(tr.Tensor(x_t), (s[:H], s[H:]))
            return tr.cat([h, c])
        return cell(tr.Tensor(x_t), s)
    return fn


def trajectory(variant: Variant, cell: Any, xs: np.ndarray, s0: np.ndarray) -> list:
    H = cell.hidden_size
    states = [s0]
    with tr.no_grad():
        for t in range(xs.shape[0]):
            states.append(step_map(variant, cell, xs[t], H)(tr.Tensor(states[-1])).numpy())
    return states


@pytest.mark.parametrize("as_layer", [False, True], ids=["cell", "layer"])
@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_step_jacobians_equal_autograd_jacobian_of_one_step(variant: Variant,
                                                             as_layer: bool) -> None:
    T, N, D, H, sample = 6, 3, 2, 4, 1
    data = inputs(variant, T, N, D, H, seed=3)
    cell = variant.cell(D, H, seed=4)
    if variant.is_lstm:
        with tr.no_grad():                                # peepholes of a visible size
            if cell.weight_ch is not None:
                cell.weight_ch.mul_(3.0)
    module = cell
    h0, c0 = data["h0"], data["c0"]
    if as_layer:
        module = variant.layer(D, H)
        for name, p in module._params(0, 0).items():
            p.data = getattr(cell, name).array.copy()
        h0 = h0[None]
        c0 = None if c0 is None else c0[None]
    J = mon.step_jacobians(module, tr.Tensor(data["x"]), tr.Tensor(h0),
                           None if c0 is None else tr.Tensor(c0), sample=sample)
    assert len(J) == T
    xs = data["x"][:, sample]
    s0 = data["h0"][sample]
    if variant.is_lstm:
        s0 = np.concatenate([s0, data["c0"][sample]])
    states = trajectory(variant, cell, xs, s0)
    for t in range(T):
        want = tr.jacobian(step_map(variant, cell, xs[t], H), states[t])
        assert J[t].shape == want.shape == (s0.size, s0.size)
        np.testing.assert_allclose(J[t], want, rtol=SAME, atol=SAME)


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_jacobian_products_equal_norms_of_the_unrolled_map(variant: Variant) -> None:
    T, D, H = 6, 2, 3
    data = inputs(variant, T, 1, D, H, seed=8)
    cell = variant.cell(D, H, seed=9)
    J = mon.step_jacobians(cell, data["x"], data["h0"], data["c0"])
    xs = data["x"][:, 0]
    s0 = data["h0"][0] if not variant.is_lstm else np.concatenate([data["h0"][0],
                                                                   data["c0"][0]])
    states = trajectory(variant, cell, xs, s0)
    for ord in (2, "fro"):
        got = mon.jacobian_products(J, ord=ord)
        assert got.shape == (T + 1,)
        assert got[T] == np.linalg.norm(np.eye(s0.size), ord)
        for t in range(T):
            def unrolled(s: Any, t: int = t) -> Any:
                for u in range(t, T):
                    s = step_map(variant, cell, xs[u], H)(s)
                return s
            want = np.linalg.norm(tr.jacobian(unrolled, states[t]), ord)
            assert abs(got[t] - want) <= SAME * max(1.0, want), (ord, t)


@pytest.mark.parametrize("coupled", [False, True])
def test_lstm_cell_block_of_the_step_jacobian_is_the_forget_gate(coupled: bool) -> None:
    """Without peepholes dc_t/dc_{t-1} = diag(f_t) exactly: the cell path has no weight
    matrix and no tanh' factor (docs/vanishing.md)."""
    T, D, H = 8, 2, 3
    cell = LSTMCell(D, H, coupled=coupled, dtype=np.float64, generator=12)
    rng = np.random.default_rng(13)
    x = rng.standard_normal((T, 1, D))
    h0, c0 = rng.standard_normal((1, H)), rng.standard_normal((1, H))
    J = mon.step_jacobians(cell, x, h0, c0)
    f_rows = slice(0, H) if coupled else slice(H, 2 * H)      # gate order (f,g,o) / (i,f,g,o)
    w_ih, w_hh = cell.weight_ih.numpy()[f_rows], cell.weight_hh.numpy()[f_rows]
    b = cell.bias_ih.numpy()[f_rows] + cell.bias_hh.numpy()[f_rows]
    h, c = tr.Tensor(h0), tr.Tensor(c0)
    for t in range(T):
        f = 1 / (1 + np.exp(-(w_ih @ x[t, 0] + w_hh @ h.numpy()[0] + b)))
        np.testing.assert_allclose(J[t][H:, H:], np.diag(f), rtol=1e-13, atol=1e-15)
        with tr.no_grad():
            h, c = cell(tr.Tensor(x[t]), (h, c))


def test_gru_update_gate_near_one_keeps_the_identity_path() -> None:
    """J_t = diag(z_t) + diag(1 - z_t) dn/dh + diag(h - n) dz/dh: with z near 1 the first,
    weight-free term dominates and ||dh_T/dh_0|| stays near 1 over 50 steps; with z near 0
    only the n path is left, which vanishes like the Elman RNN's."""
    T, D, H = 50, 2, 4
    rng = np.random.default_rng(14)
    x = rng.standard_normal((T, 1, D))
    ends = {}
    for bias in (8.0, -8.0):
        cell = GRUCell(D, H, dtype=np.float64, generator=15)
        with tr.no_grad():
            cell.weight_hh.mul_(0.5)
            cell.bias_hh.array[H:2 * H] = bias                 # z rows (gate order r, z, n)
        J = mon.step_jacobians(cell, x)
        if bias > 0:                                          # z near 1: almost diag(z)
            for J_t in J:
                assert np.linalg.norm(J_t - np.diag(np.diag(J_t)), 2) < 0.01
        ends[bias] = mon.jacobian_products(J)[0]
    assert 0.9 < ends[8.0] <= 1.0 + 1e-9
    assert ends[-8.0] < 1e-3


def test_step_jacobians_refuse_unsupported_modules() -> None:
    with pytest.raises(TypeError, match="Linear"):
        mon.step_jacobians(tr.nn.Linear(2, 2), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="one layer"):
        mon.step_jacobians(RNN(2, 2, num_layers=2), np.zeros((3, 1, 2)))
    with pytest.raises(ValueError, match="one layer"):
        mon.step_jacobians(GRU(2, 2, bidirectional=True), np.zeros((3, 1, 2)))


def test_jacobian_products_of_no_steps() -> None:
    np.testing.assert_array_equal(mon.jacobian_products([]), [1.0])


def test_step_jacobians_validate_states_shapes_and_sample() -> None:
    """Regression: the (h0, c0) pair LSTM.forward takes was turned into one array (c0
    ignored, Jacobians off by 0.1), a state for the wrong batch size was accepted, wrong
    sizes gave raw NumPy errors and a bad sample a bare IndexError."""
    lstm = LSTM(3, 4, dtype=np.float64)
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (5, 2, 3))
    h0, c0 = rng.uniform(-1, 1, (1, 2, 4)), rng.uniform(-1, 1, (1, 2, 4))
    with pytest.raises(TypeError, match=r"step_jacobians: h0 must be one array.*c0=\.\.\."):
        mon.step_jacobians(lstm, x, h0=(h0, c0), sample=1)
    with pytest.raises(ValueError, match=r"h0 of shape \(7, 4\) .* N = 2"):
        mon.step_jacobians(lstm, x, h0=np.zeros((7, 4)))
    with pytest.raises(ValueError, match=r"c0 of shape \(1, 2, 5\)"):
        mon.step_jacobians(lstm, x, c0=np.zeros((1, 2, 5)))
    with pytest.raises(ValueError, match=r"x of shape \(5, 2, 7\) .* input size 3"):
        mon.step_jacobians(lstm, rng.uniform(-1, 1, (5, 2, 7)))
    with pytest.raises(ValueError, match=r"sample 2 is out of range .* N = 2"):
        mon.step_jacobians(lstm, x, sample=2)
    with pytest.raises(TypeError, match="sample must be an integer"):
        mon.step_jacobians(lstm, x, sample=1.0)
    with pytest.raises(ValueError, match="GRU has none"):
        mon.step_jacobians(GRU(3, 4), x, c0=c0)
    # the accepted forms of one state give the same Jacobians
    want = mon.step_jacobians(lstm, x, h0=h0, c0=c0, sample=1)
    for h, c in ((h0[0], c0[0]), (h0[0, 1], c0[0, 1]), (tr.Tensor(h0), tr.Tensor(c0))):
        got = mon.step_jacobians(lstm, x, h0=h, c0=c, sample=1)
        assert all(np.array_equal(a, b) for a, b in zip(got, want))


# --------------------------------------------------------------------------------------------
# spectrum and the Pascanu bound
# --------------------------------------------------------------------------------------------
def test_spectral_radius_and_singular_values() -> None:
    rng = np.random.default_rng(10)
    q, _ = np.linalg.qr(rng.standard_normal((5, 5)))
    assert mon.spectral_radius(0.7 * q) == pytest.approx(0.7, rel=1e-13)
    np.testing.assert_allclose(mon.singular_values(tr.Tensor(0.7 * q)), np.full(5, 0.7),
                               rtol=1e-13)
    a = np.array([[0.5, 10.0], [0.0, 0.5]])              # non-normal: rho 0.5, sigma ~ 10
    assert mon.spectral_radius(a) == pytest.approx(0.5, rel=1e-13)
    s = mon.singular_values(a)
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), rtol=1e-13)
    assert s[0] > s[1] and s[0] > 10
    b = mon.pascanu_bound(a, [0, 1, 2, 5], gamma=0.25)
    np.testing.assert_allclose(b, (0.25 * s[0]) ** np.array([0.0, 1.0, 2.0, 5.0]), rtol=1e-13)


def test_spectrum_functions_refuse_stacked_empty_and_batched_matrices() -> None:
    """Regression: a stacked GRU weight_hh gave NumPy's "must be square", an empty (0, 3)
    matrix 0.0 and a (2, 3, 3) batch 3.0 silently; pascanu_bound of an empty matrix a bare
    IndexError."""
    gru = GRU(3, 4)
    with pytest.raises(ValueError, match=r"spectral_radius: W of shape \(12, 4\) is not "
                                         r"square.*one 4 x 4 block per gate"):
        mon.spectral_radius(gru.weight_hh_l0)
    assert mon.spectral_radius(gru.weight_hh_l0[4:8]) > 0          # one gate's block
    for shape in ((0, 3), (0, 0), (2, 3, 3), (3,)):
        with pytest.raises(ValueError, match=rf"spectral_radius: .*{re.escape(str(shape))}"):
            mon.spectral_radius(np.ones(shape))
        with pytest.raises(ValueError, match=rf"singular_values: .*{re.escape(str(shape))}"):
            mon.singular_values(np.ones(shape))
        with pytest.raises(ValueError, match=rf"pascanu_bound: .*{re.escape(str(shape))}"):
            mon.pascanu_bound(np.ones(shape), [1])


@given(w=recurrent_weights(st.integers(1, 5), 2, spectral_radius=(0.2, 1.6), kind="rescaled",
                           input_scale=2.0),
       seed=st.integers(0, 2**31), T=st.integers(1, 25))
@example(w=None, seed=0, T=25)
def test_pascanu_bound_holds_for_tanh_rnns(w: Any, seed: int, T: int) -> None:
    H = 3 if w is None else w.weight_hh.shape[0]
    cell = RNNCell(2, H, dtype=np.float64, generator=seed)
    if w is not None:
        cell.weight_ih.data, cell.weight_hh.data = w.weight_ih.copy(), w.weight_hh.copy()
        cell.bias_ih.data, cell.bias_hh.data = w.bias_ih.copy(), w.bias_hh.copy()
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, 1, 2))
    h0 = rng.standard_normal((1, H))
    J = mon.step_jacobians(cell, x, h0)
    norms = mon.jacobian_products(J)                     # ||dh_T/dh_t||_2, t = 0..T
    distances = T - np.arange(T + 1)
    bound = mon.pascanu_bound(cell.weight_hh, distances)
    assert np.all(norms <= bound * (1 + 1e-12) + 1e-300)
    # the tighter bound: gamma = the largest tanh' met on this trajectory
    hs = []
    with tr.no_grad():
        h = tr.Tensor(h0)
        for t in range(T):
            h = cell(tr.Tensor(x[t]), h)
            hs.append(h.numpy()[0])
    gamma = float(np.max(1 - np.square(hs)))
    tight = mon.pascanu_bound(cell.weight_hh, distances, gamma=gamma)
    assert np.all(tight <= bound * (1 + 1e-15))
    assert np.all(norms <= tight * (1 + 1e-12) + 1e-300)


@given(w=recurrent_weights(3, 2, spectral_radius=(0.3, 1.3), kind="rescaled"),
       seed=st.integers(0, 2**31))
def test_pascanu_bound_holds_for_measured_state_gradients(w: Any, seed: int) -> None:
    """Loss on the last step only: ||dL/dh_t|| <= ||dL/dh_T|| (sigma_max)^(T - t)."""
    T = 15
    rnn = RNN(2, 3, dtype=np.float64)
    rnn.weight_ih_l0.data, rnn.weight_hh_l0.data = w.weight_ih.copy(), w.weight_hh.copy()
    rnn.bias_ih_l0.data, rnn.bias_hh_l0.data = w.bias_ih.copy(), w.bias_hh.copy()
    rnn.track_state_grads = True
    rng = np.random.default_rng(seed)
    out, _ = rnn(tr.Tensor(rng.standard_normal((T, 1, 2))))
    (out[-1] * tr.Tensor(rng.standard_normal((1, 3)))).sum().backward()
    norms = mon.state_grad_norms(rnn.state_grads[(0, 0)]["h"])    # t = 0..T-1
    bound = norms[-1] * mon.pascanu_bound(rnn.weight_hh_l0, T - 1 - np.arange(T))
    assert np.all(norms <= bound * (1 + 1e-12) + 1e-300)


# --------------------------------------------------------------------------------------------
# decay rate and gradient horizon on synthetic geometric sequences
# --------------------------------------------------------------------------------------------
@given(rate=st.floats(0.05, 3.0), C=st.floats(1e-3, 1e3), n=st.integers(2, 60))
@example(rate=0.5, C=1.0, n=2)
def test_fit_decay_rate_recovers_the_rate_of_a_geometric_sequence(rate: float, C: float,
                                                                   n: int) -> None:
    norms = C * rate ** np.arange(n, dtype=np.float64)
    assert mon.fit_decay_rate(norms) == pytest.approx(rate, rel=1e-10)


@given(rate=st.floats(0.1, 0.99), data=st.data())
def test_fit_decay_rate_with_distances_and_unusable_entries(rate: float, data: Any) -> None:
    d = np.array(sorted(data.draw(st.sets(st.integers(0, 80), min_size=2, max_size=20))),
                 dtype=np.float64)
    norms = 3.0 * rate ** d
    assert mon.fit_decay_rate(norms, d) == pytest.approx(rate, rel=1e-10)
    # zeros, NaN, inf and negatives are left out, not fitted
    spoiled = np.concatenate([norms, [0.0, np.nan, np.inf, -1.0]])
    dd = np.concatenate([d, [1.0, 2.0, 3.0, 4.0]])
    assert mon.fit_decay_rate(spoiled, dd) == pytest.approx(rate, rel=1e-10)


def test_fit_decay_rate_needs_two_positive_norms() -> None:
    with pytest.raises(ValueError, match="two positive"):
        mon.fit_decay_rate([1.0, 0.0, np.nan])


@given(rate=st.floats(0.05, 0.95), fraction=st.floats(1e-6, 0.5), T=st.integers(1, 80),
       C=st.floats(1e-3, 1e3))
@example(rate=0.5, fraction=1e-2, T=40, C=1.0)
def test_gradient_horizon_of_a_geometric_sequence(rate: float, fraction: float, T: int,
                                                  C: float) -> None:
    q = math.log(fraction) / math.log(rate)
    assume(abs(q - round(q)) > 1e-6)                     # stay off the rounding boundary
    norms = C * rate ** (T - np.arange(T + 1, dtype=np.float64))   # norms[-1] = C at T
    d_star = math.floor(q) + 1                           # first d with rate^d < fraction
    want = d_star if d_star <= T else T + 1
    assert mon.gradient_horizon(norms, fraction) == want
    if rate == 0.5 and fraction == 1e-2:
        assert want == 7                                 # 0.5^6 = 0.0156, 0.5^7 = 0.0078


def test_gradient_horizon_when_the_norm_never_falls() -> None:
    assert mon.gradient_horizon(1.1 ** np.arange(30.0)[::-1]) == 30   # exploding
    assert mon.gradient_horizon(np.ones(12)) == 12
    assert mon.gradient_horizon([]) == 0


def test_fit_decay_rate_refuses_what_it_cannot_fit() -> None:
    """Regression: mismatched distances gave an IndexError, and norms all at one distance
    a number with only a RankWarning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")                     # no RankWarning on the way
        with pytest.raises(ValueError, match="two distinct distances"):
            mon.fit_decay_rate([1.0, 0.5], distances=[1, 1])
        with pytest.raises(ValueError, match="2 distances for 3 norms"):
            mon.fit_decay_rate([1.0, 0.5, 0.25], distances=[0, 1])
        with pytest.raises(ValueError, match=r"norms must be 1-D .* shape \(2, 3\)"):
            mon.fit_decay_rate(np.ones((2, 3)))
        with pytest.raises(ValueError, match="distances must be finite"):
            mon.fit_decay_rate([1.0, 0.5], distances=[0, np.nan])


def test_gradient_horizon_of_a_nan_padded_row() -> None:
    """Regression: state_norms pads shorter rows with NaN, and the horizon took the NaN
    padding as its reference value; a (steps, T) array gave a raw NumPy error."""
    rows = np.array([[0.04, 0.24, 0.34, 0.44, 0.82, 1.73],
                     [0.31, 0.81, 1.73, np.nan, np.nan, np.nan]])
    assert mon.gradient_horizon(rows[1], 0.2) == mon.gradient_horizon(rows[1, :3], 0.2) == 2
    assert mon.gradient_horizon(rows[0], 0.2) == 3
    with pytest.raises(ValueError, match=r"norms must be 1-D .* shape \(2, 6\).*norms\[i\]"):
        mon.gradient_horizon(rows)
    with pytest.raises(ValueError, match="NaN at step 1, before the last value"):
        mon.gradient_horizon([1.0, np.nan, 1.0])
    with pytest.raises(ValueError, match="all 3 norms are NaN"):
        mon.gradient_horizon(np.full(3, np.nan))
    with pytest.raises(ValueError, match="fraction must be a positive number"):
        mon.gradient_horizon([1.0, 2.0], fraction=0.0)


# --------------------------------------------------------------------------------------------
# the layers' one hook point: StateGradRecording
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls, kinds", [(RNN, ("h",)), (GRU, ("h",)), (LSTM, ("h", "c"))])
def test_state_grad_recording_is_the_layers_one_hook_point(cls: type, kinds: tuple) -> None:
    """A recurrent layer holds one monitor.StateGradRecording: track_state_grads reads and sets
    its switch, it lists every (layer, direction, kind) the layer records, it hands out one
    StateGradRecorder per forward call with gradients enabled (none under no_grad or when
    tracking is off), and state_grads / state_grad_segments read it."""
    layer = cls(3, 4, num_layers=2, bidirectional=True, dtype=np.float64, generator=0)
    recording = layer.state_grad_recording
    assert isinstance(recording, mon.StateGradRecording)
    assert recording.owner == cls.__name__
    assert recording.keys == [(l, d, k) for l in range(2) for d in range(2) for k in kinds]
    assert recording.track is False and layer.track_state_grads is False
    assert recording.start_call(5, None) is None                  # tracking off
    layer.track_state_grads = 1                                    # torch-style 0/1 switch
    assert recording.track is True and layer.track_state_grads is True
    with tr.no_grad():
        assert recording.start_call(5, None) is None              # no graph, no record
    x = tr.Tensor(np.random.default_rng(1).standard_normal((5, 2, 3)))
    out = layer(x)[0]
    assert layer.state_grads == {} and layer.state_grad_segments == []   # before backward
    out.sum().backward()
    (record,) = layer.state_grad_segments
    assert isinstance(record, mon.StateGradRecorder)
    assert (record.index, record.steps, record.lengths) == (0, 5, None) and record.writes > 0
    assert layer.state_grads is record.grads
    assert sorted(record.grads) == [(l, d) for l in range(2) for d in range(2)]
    assert all(tuple(slot) == kinds for slot in record.grads.values())
    assert all(g.shape == (5, 2, 4) for slot in record.grads.values() for g in slot.values())


def test_gradient_monitor_finds_layers_by_their_recording() -> None:
    """GradientMonitor switches on each recurrent layer's recording and takes its rows from
    recording.keys; a module that merely has a track_state_grads attribute is not a
    recurrent layer to it."""

    class Lookalike(tr.nn.Module):
        track_state_grads = False                 # the old duck-typed protocol, nothing more

        def forward(self, x: Any) -> Any:
            return x

    model = tr.nn.Sequential(LSTM(3, 4, bidirectional=True, generator=0), Lookalike())
    monitor = mon.GradientMonitor(model)
    assert list(monitor.recurrent) == ["0"]
    assert model[0].track_state_grads is True and model[1].track_state_grads is False
    for direction in (0, 1):
        for kind in ("h", "c"):
            assert monitor.state_norms("0", 0, direction, kind).shape == (0, 0)
    with pytest.raises(ValueError, match="direction=2"):
        monitor.state_norms("0", 0, 2, "h")


# --------------------------------------------------------------------------------------------
# docs/vanishing.md
# --------------------------------------------------------------------------------------------
def test_vanishing_page_numbers_its_equations_and_leaves_figures_to_the_demo() -> None:
    """Page-specific checks; tests/docs/test_docs.py runs the page's code blocks and checks
    that every "Implemented by" / "Tested by" reference exists."""
    text = PAGE.read_text(encoding="utf-8")
    tags = re.findall(r"\\tag\{([^}]*)\}", text)
    assert tags == [f"VG{k}" for k in range(1, len(tags) + 1)] and len(tags) >= 12
    assert "../out/" not in text                         # demo output is not committed
    assert "demos/vanishing_gradients.py" in text
    tested = set(re.findall(r"tests/test_monitor\.py::(\w+)", text))
    assert len(tested) >= 10
    src = Path(__file__).read_text(encoding="utf-8")
    for name in tested:
        assert re.search(rf"^def {name}\(", src, flags=re.M), name


@pytest.mark.parametrize("engine", ENGINES)
def test_latest_state_norms_is_the_last_recorded_row(engine: str) -> None:
    """What a training loop logs per update: the newest step's ||dL/dh_t|| alone, equal to the
    last row of state_norms() where every step has the same length, unpadded where the last
    step is shorter (state_norms pads it with NaN to the longest), and the same key checks."""
    lstm = tr.nn.LSTM(2, 3, dtype=np.float64, engine=engine)
    monitor = mon.GradientMonitor(lstm)
    assert monitor.latest_state_norms().shape == (0,)           # nothing recorded yet
    rng = np.random.default_rng(0)
    for T in (6, 6, 4):
        out, _ = lstm(tr.Tensor(rng.normal(size=(T, 2, 2))))
        (out ** 2).sum().backward()
        monitor.record()
        lstm.zero_grad()
        for kind in ("h", "c"):
            full = monitor.state_norms(kind=kind)
            latest = monitor.latest_state_norms(kind=kind)
            assert latest.shape == (T,)
            np.testing.assert_array_equal(latest, full[-1, :T])
            assert np.isnan(full[-1, T:]).all()
    with pytest.raises(ValueError, match=r"latest_state_norms: .*has no layer=1"):
        monitor.latest_state_norms(layer=1)
