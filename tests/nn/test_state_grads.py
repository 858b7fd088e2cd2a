"""Per-step state gradients of the recurrent layers: ``track_state_grads`` / ``state_grads``.

With ``track_state_grads = True``, after ``backward()`` ``state_grads[(layer, direction)]['h']``
is dL/dh_t at every step as a (T, N, H) array (and ``['c']`` dL/dc_t for the LSTM): the total
gradient reaching the state, from the loss at t and from step t+1. Checked here:

* the two engines give identical arrays (1e-10) for every variant, lengths, directions, layers;
* both equal an independent reference: the layer rebuilt from the cells (RNNCell, GRUCell,
  LSTMCell) sharing its parameters, each sequence unrolled alone up to its length, with
  ``retain_grad()`` on every h_t and a hook on every c_t. The reference also checks the
  layer's outputs, final states and every gradient;
* at padded steps the state is carried, so its gradient is the carried one: dL/dh_n in the
  forward direction, dL/dh_0 in the reverse direction (which meets the padding first);
* nothing is recorded when tracking is off; the first forward after a backward starts a new
  record; several calls before one backward are joined along time (a sequence fed in two
  segments records what the whole sequence records), calls no backward reached are left
  out, and a forward under no_grad leaves the record alone.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn.nn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell

ENGINES = ("fused", "autograd")
SAME = 1e-10  # |a - b| <= SAME * max(1, |b|)


@dataclass(frozen=True)
class Variant:
    mode: str
    options: tuple = ()

    @property
    def kwargs(self) -> dict:
        return dict(self.options)

    @property
    def is_lstm(self) -> bool:
        return self.mode == "LSTM"

    def layer(self, *args: Any, **kwargs: Any) -> Any:
        cls = {"RNN": RNN, "GRU": GRU, "LSTM": LSTM}[self.mode]
        return cls(*args, **kwargs, **self.kwargs)

    def cell(self, D: int, H: int, bias: bool) -> Any:
        cls = {"RNN": RNNCell, "GRU": GRUCell, "LSTM": LSTMCell}[self.mode]
        return cls(D, H, bias=bias, dtype=np.float64, **self.kwargs)

    def __str__(self) -> str:
        return "-".join([self.mode.lower()] + [f"{k}={v}" for k, v in self.options])


VARIANTS = [
    Variant("RNN", (("nonlinearity", "tanh"),)), Variant("RNN", (("nonlinearity", "relu"),)),
    Variant("GRU", (("reset", "after"),)), Variant("GRU", (("reset", "before"),)),
    Variant("LSTM"), Variant("LSTM", (("peephole", True),)), Variant("LSTM", (("coupled", True),)),
    Variant("LSTM", (("peephole", True), ("coupled", True))),
]
VARIANT_IDS = [str(v) for v in VARIANTS]


@dataclass(frozen=True)
class Config:
    variant: Variant
    T: int = 4
    N: int = 2
    D: int = 2
    H: int = 2
    num_layers: int = 1
    bidirectional: bool = False
    bias: bool = True
    lengths: tuple | None = None
    given_state: bool = True
    seed: int = 0

    @property
    def dirs(self) -> int:
        return 2 if self.bidirectional else 1

    @property
    def L(self) -> int:
        return self.num_layers * self.dirs


@st.composite
def configs(draw: Any, min_T: int = 0, max_T: int = 8, min_N: int = 0, max_N: int = 3) -> Config:
    T = draw(st.integers(min_T, max_T))
    N = draw(st.integers(min_N, max_N))
    lengths = None
    if draw(st.booleans()):
        lengths = tuple(draw(st.lists(st.integers(0, T), min_size=N, max_size=N)))
    return Config(draw(st.sampled_from(VARIANTS)), T, N, draw(st.integers(1, 3)),
                  draw(st.integers(1, 3)), draw(st.integers(1, 2)), draw(st.booleans()),
                  draw(st.booleans()), lengths, draw(st.booleans()), draw(st.integers(0, 2**31)))


def build(cfg: Config, engine: str, track: bool = True) -> Any:
    model = cfg.variant.layer(cfg.D, cfg.H, num_layers=cfg.num_layers, bias=cfg.bias,
                              bidirectional=cfg.bidirectional, engine=engine,
                              dtype=np.float64, generator=cfg.seed)
    model.track_state_grads = track
    return model


@dataclass
class Data:
    x: np.ndarray               # (T, N, D), junk at padded steps
    h0: np.ndarray | None
    c0: np.ndarray | None
    lengths: np.ndarray | None
    v_out: np.ndarray
    v_h: np.ndarray
    v_c: np.ndarray | None

    @property
    def lens(self) -> np.ndarray:
        """Every sequence's length (T when no lengths were given)."""
        T, N = self.x.shape[:2]
        return self.lengths if self.lengths is not None else np.full(N, T)


def make_data(cfg: Config) -> Data:
    rng = np.random.default_rng(cfg.seed)
    x = rng.standard_normal((cfg.T, cfg.N, cfg.D))
    lengths = None if cfg.lengths is None else np.array(cfg.lengths, dtype=np.int64)
    if lengths is not None:
        pad = np.arange(cfg.T)[:, None] >= lengths[None, :]
        x[pad] = 1e6
    h0 = 0.5 * rng.standard_normal((cfg.L, cfg.N, cfg.H)) if cfg.given_state else None
    c0 = rng.standard_normal((cfg.L, cfg.N, cfg.H)) if cfg.given_state and \
        cfg.variant.is_lstm else None
    v_out = rng.standard_normal((cfg.T, cfg.N, cfg.dirs * cfg.H))
    v_h = rng.standard_normal((cfg.L, cfg.N, cfg.H))
    v_c = rng.standard_normal((cfg.L, cfg.N, cfg.H)) if cfg.variant.is_lstm else None
    return Data(x, h0, c0, lengths, v_out, v_h, v_c)


@dataclass
class Run:
    out: np.ndarray
    h_n: np.ndarray
    c_n: np.ndarray | None
    grads: dict
    state_grads: dict    # (layer, direction) -> {'h': (T, N, H)[, 'c': (T, N, H)]}


def _loss(out: Any, h_n: Any, c_n: Any, data: Data) -> Any:
    loss = (out * tr.Tensor(data.v_out)).sum() + (h_n * tr.Tensor(data.v_h)).sum()
    if c_n is not None:
        loss = loss + (c_n * tr.Tensor(data.v_c)).sum()
    return loss


def _grads(named: list) -> dict:
    return {n: np.zeros(t.shape) if t.grad is None else np.array(t.grad) for n, t in named}


def run_layer(cfg: Config, data: Data, engine: str, track: bool = True) -> Run:
    model = build(cfg, engine, track)
    x = tr.Tensor(data.x.copy(), requires_grad=True)
    named = [("x", x)]
    h0 = c0 = None
    if data.h0 is not None:
        h0 = tr.Tensor(data.h0.copy(), requires_grad=True)
        named.append(("h0", h0))
    if data.c0 is not None:
        c0 = tr.Tensor(data.c0.copy(), requires_grad=True)
        named.append(("c0", c0))
    if cfg.variant.is_lstm:
        out, (h_n, c_n) = model(x, None if h0 is None else (h0, c0), lengths=data.lengths)
    else:
        (out, h_n), c_n = model(x, h0, lengths=data.lengths), None
    loss = _loss(out, h_n, c_n, data)
    if loss.requires_grad:
        loss.backward()
    return Run(out.numpy(), h_n.numpy(), None if c_n is None else c_n.numpy(),
               _grads(named + list(model.named_parameters())),
               {k: dict(v) for k, v in model.state_grads.items()})


def run_reference(cfg: Config, data: Data) -> Run:
    """The layer rebuilt from cells that share its parameters; each sequence unrolled alone
    up to its length; retain_grad() on every h_t, a hook on every c_t. Needs T, N >= 1."""
    model = build(cfg, "fused", track=False)  # holds the parameters
    H, lstm = cfg.H, cfg.variant.is_lstm
    cells = {}
    for layer in range(cfg.num_layers):
        for d in range(cfg.dirs):
            cell = cfg.variant.cell(cfg.D if layer == 0 else cfg.dirs * H, H, cfg.bias)
            for name, p in model._params(layer, d).items():
                setattr(cell, name, p)
            cells[layer, d] = cell
    x = tr.Tensor(data.x.copy(), requires_grad=True)
    # the initial states are always leaves here, so that dL/dh_0 can be read off
    h0 = tr.Tensor(data.h0.copy() if data.h0 is not None else np.zeros((cfg.L, cfg.N, H)),
                   requires_grad=True)
    c0 = tr.Tensor(data.c0.copy() if data.c0 is not None else np.zeros((cfg.L, cfg.N, H)),
                   requires_grad=True)
    kept_h: dict = {}      # (layer, d, t, n) -> the h_t tensor (retain_grad)
    c_grads: dict = {}     # (layer, d, t, n) -> dL/dc_t from a hook
    rows_out, rows_h, rows_c = [], [[None] * cfg.N for _ in range(cfg.L)], \
        [[None] * cfg.N for _ in range(cfg.L)]

    def c_hook(key: tuple) -> Any:
        def hook(grad: Any) -> None:
            c_grads[key] = np.array(grad)
        return hook

    for n in range(cfg.N):
        length = int(data.lens[n])
        layer_in = [x[t, n:n + 1] for t in range(length)]
        for layer in range(cfg.num_layers):
            per_dir = []
            for d in range(cfg.dirs):
                idx = layer * cfg.dirs + d
                h, c = h0[idx, n:n + 1], c0[idx, n:n + 1]
                hs: list = [None] * length
                for t in (range(length - 1, -1, -1) if d else range(length)):
                    if lstm:
                        h, c = cells[layer, d](layer_in[t], (h, c))
                        c.register_hook(c_hook((layer, d, t, n)))
                    else:
                        h = cells[layer, d](layer_in[t], h)
                    h.retain_grad()
                    kept_h[layer, d, t, n] = h
                    hs[t] = h
                rows_h[idx][n], rows_c[idx][n] = h, c
                per_dir.append(hs)
            layer_in = [tr.cat([p[t] for p in per_dir], axis=-1) for t in range(length)]
        zeros = tr.Tensor(np.zeros((1, cfg.dirs * H)))
        rows_out.append([layer_in[t] if t < length else zeros for t in range(cfg.T)])
    out = tr.stack([tr.cat([rows_out[n][t] for n in range(cfg.N)], axis=0)
                    for t in range(cfg.T)], axis=0)
    h_n = tr.stack([tr.cat(r, axis=0) for r in rows_h], axis=0)
    c_n = tr.stack([tr.cat(r, axis=0) for r in rows_c], axis=0) if lstm else None
    _loss(out, h_n, c_n, data).backward()

    named = [("x", x)]
    if data.h0 is not None:
        named.append(("h0", h0))
    if data.c0 is not None:
        named.append(("c0", c0))
    grads = _grads(named + list(model.named_parameters()))
    state_grads: dict = {}
    for layer in range(cfg.num_layers):
        for d in range(cfg.dirs):
            idx = layer * cfg.dirs + d
            # padded steps carry the state: forward direction h_n, reverse direction h_0
            sh = np.empty((cfg.T, cfg.N, H))
            sc = np.empty((cfg.T, cfg.N, H))
            for n in range(cfg.N):
                length = int(data.lens[n])
                sh[length:, n] = h0.grad[idx, n] if d else data.v_h[idx, n]
                if lstm:
                    sc[length:, n] = c0.grad[idx, n] if d else data.v_c[idx, n]
                for t in range(length):
                    sh[t, n] = kept_h[layer, d, t, n].grad[0]
                    if lstm:
                        sc[t, n] = c_grads[layer, d, t, n][0]
            state_grads[layer, d] = {"h": sh, "c": sc} if lstm else {"h": sh}
    return Run(out.numpy(), h_n.numpy(), None if c_n is None else c_n.numpy(), grads,
               state_grads)


def assert_same(a: np.ndarray, b: np.ndarray, what: str) -> None:
    assert a.shape == b.shape, f"{what}: shapes {a.shape} vs {b.shape}"
    if a.size:
        err = np.abs(a - b) / np.maximum(1.0, np.abs(b))
        assert np.all(err <= SAME), f"{what}: max scaled difference {err.max():.3g}"


def assert_state_grads_same(a: dict, b: dict, cfg: Config) -> None:
    keys = {(layer, d) for layer in range(cfg.num_layers) for d in range(cfg.dirs)}
    assert set(a) == keys and set(b) == keys
    names = {"h", "c"} if cfg.variant.is_lstm else {"h"}
    for key in keys:
        assert set(a[key]) == names and set(b[key]) == names, key
        for name in names:
            assert a[key][name].shape == (cfg.T, cfg.N, cfg.H)
            assert a[key][name].dtype == np.float64
            assert_same(a[key][name], b[key][name], f"state_grads[{key}][{name!r}]")


# Regression: with lengths, the autograd engine recorded for the LSTM cell state only the
# gradient flowing back from step t+1 (its hook sat on the masked c_t, while h_t is computed
# from the unmasked one), so state_grads[...]['c'] differed from the fused engine.
LSTM_LENGTHS = Config(Variant("LSTM"), T=3, N=2, D=2, H=2, lengths=(3, 2), seed=0)


@given(cfg=configs())
@example(cfg=LSTM_LENGTHS)
@example(cfg=replace(LSTM_LENGTHS, variant=VARIANTS[7], bidirectional=True, num_layers=2))
@example(cfg=replace(LSTM_LENGTHS, T=0, lengths=(0, 0)))
def test_state_grads_identical_between_engines(cfg: Config):
    data = make_data(cfg)
    fused = run_layer(cfg, data, "fused")
    auto = run_layer(cfg, data, "autograd")
    assert_state_grads_same(fused.state_grads, auto.state_grads, cfg)


@given(cfg=configs(min_T=1, max_T=6, min_N=1, max_N=3))
@example(cfg=LSTM_LENGTHS)
@example(cfg=replace(LSTM_LENGTHS, variant=VARIANTS[5], bidirectional=True, lengths=(1, 3),
                     given_state=False))
def test_state_grads_equal_retain_grad_on_the_cells(cfg: Config):
    """Both engines against the cell-by-cell reference: outputs, final states, every
    gradient, and dL/dh_t, dL/dc_t at every step."""
    data = make_data(cfg)
    ref = run_reference(cfg, data)
    for engine in ENGINES:
        res = run_layer(cfg, data, engine)
        assert_same(res.out, ref.out, f"{engine}: output")
        assert_same(res.h_n, ref.h_n, f"{engine}: h_n")
        if cfg.variant.is_lstm:
            assert_same(res.c_n, ref.c_n, f"{engine}: c_n")
        assert res.grads.keys() == ref.grads.keys()
        for name in ref.grads:
            assert_same(res.grads[name], ref.grads[name], f"{engine}: d{name}")
        assert_state_grads_same(res.state_grads, ref.state_grads, cfg)


@pytest.mark.parametrize("v", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("engine", ENGINES)
def test_state_grad_at_the_last_step_is_the_upstream_plus_the_output_gradient(v: Variant,
                                                                             engine: str):
    """One layer, one direction, no lengths: dL/dh_{T-1} = dL/dout_{T-1} + dL/dh_n, while
    dL/dh_t at t < T-1 differs from the output gradient alone (step t+1 adds to it)."""
    cfg = Config(v, T=4, N=3, D=2, H=3, seed=2)
    data = make_data(cfg)
    res = run_layer(cfg, data, engine)
    sg = res.state_grads[0, 0]["h"]
    assert_same(sg[-1], data.v_out[-1] + data.v_h[0], "dL/dh_{T-1}")
    assert np.abs(sg[:-1] - data.v_out[:-1]).max() > 1e-6


@pytest.mark.parametrize("engine", ENGINES)
def test_padded_steps_carry_the_state_gradient(engine: str):
    cfg = Config(Variant("LSTM"), T=5, N=3, D=2, H=2, bidirectional=True, lengths=(5, 2, 0),
                 seed=3)
    data = make_data(cfg)
    res = run_layer(cfg, data, engine)
    fwd, rev = res.state_grads[0, 0], res.state_grads[0, 1]
    for n, length in enumerate(cfg.lengths):
        for t in range(length, cfg.T):
            np.testing.assert_array_equal(fwd["h"][t, n], data.v_h[0, n])
            np.testing.assert_array_equal(fwd["c"][t, n], data.v_c[0, n])
            np.testing.assert_array_equal(rev["h"][t, n], res.grads["h0"][1, n])
            np.testing.assert_array_equal(rev["c"][t, n], res.grads["c0"][1, n])


@pytest.mark.parametrize("engine", ENGINES)
def test_nothing_recorded_when_tracking_is_off(engine: str):
    cfg = Config(Variant("GRU"), T=3, N=2, num_layers=2, bidirectional=True, seed=1)
    res = run_layer(cfg, make_data(cfg), engine, track=False)
    assert res.state_grads == {}


@pytest.mark.parametrize("engine", ENGINES)
def test_each_forward_starts_a_new_record(engine: str):
    cfg = Config(Variant("LSTM"), T=3, N=2, seed=1)
    data = make_data(cfg)
    model = build(cfg, engine)
    x = tr.Tensor(data.x, requires_grad=True)
    out, _ = model(x)
    (out * out).sum().backward()
    first = {k: v.copy() for k, v in model.state_grads[0, 0].items()}
    out, _ = model(x)
    assert model.state_grads == {}  # nothing until the new backward
    (out * 2.0).sum().backward()
    second = model.state_grads[0, 0]
    assert not np.allclose(first["h"], second["h"])
    # the new record is that of the new loss alone (not accumulated on the old one)
    fresh = build(cfg, engine)
    out2, _ = fresh(tr.Tensor(data.x, requires_grad=True))
    (out2 * 2.0).sum().backward()
    for name in ("h", "c"):
        assert_same(second[name], fresh.state_grads[0, 0][name], name)


@pytest.mark.parametrize("engine", ENGINES)
def test_state_grads_are_time_major_with_batch_first(engine: str):
    """batch_first changes the layout of the input and output only: state_grads stay
    (T, N, H) and equal those of the time-major layer."""
    cfg = Config(Variant("GRU"), T=4, N=3, D=2, H=2, num_layers=2, bidirectional=True, seed=5)
    data = make_data(cfg)
    want = run_layer(cfg, data, engine).state_grads
    model = cfg.variant.layer(cfg.D, cfg.H, num_layers=2, bidirectional=True, batch_first=True,
                              engine=engine, dtype=np.float64, generator=cfg.seed)
    model.track_state_grads = True
    x = tr.Tensor(data.x.transpose(1, 0, 2).copy(), requires_grad=True)
    out, h_n = model(x, tr.Tensor(data.h0))
    loss = (out * tr.Tensor(data.v_out.transpose(1, 0, 2))).sum()
    (loss + (h_n * tr.Tensor(data.v_h)).sum()).backward()
    assert_state_grads_same(model.state_grads, want, cfg)


# ------------------------------------------------------------------ which calls a record covers
def _gru_segments(engine: str) -> tuple:
    cfg = Config(Variant("GRU"), T=5, N=2, D=2, H=3, num_layers=2, seed=7)
    data = make_data(cfg)
    return cfg, data, build(cfg, engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_calls_before_one_backward_are_joined_along_time(engine: str):
    """A sequence fed in two segments (the state carried between the calls) records the
    same dL/dh_t at all T steps as the whole sequence fed in one call. Regression: each
    call replaced the record, so only the last segment's steps were kept."""
    cfg, data, model = _gru_segments(engine)
    x = tr.Tensor(data.x)
    v = tr.Tensor(data.v_out)
    out_a, h_a = model(x[:3])
    out_b, _ = model(x[3:], h_a)
    ((out_a * v[:3]).sum() + (out_b * v[3:]).sum()).backward()
    assert [r.steps for r in model.state_grad_segments] == [3, 2]
    joined = {k: dict(s) for k, s in model.state_grads.items()}
    whole = build(cfg, engine)
    out, _ = whole(x)
    (out * v).sum().backward()
    assert_state_grads_same(joined, whole.state_grads, cfg)


@pytest.mark.parametrize("engine", ENGINES)
def test_forward_under_no_grad_keeps_the_record(engine: str):
    """Regression: a validation pass under no_grad between backward() and reading the
    gradients emptied state_grads."""
    cfg, data, model = _gru_segments(engine)
    out, _ = model(tr.Tensor(data.x))
    (out * tr.Tensor(data.v_out)).sum().backward()
    before = {k: {n: a.copy() for n, a in s.items()} for k, s in model.state_grads.items()}
    with tr.no_grad():
        model(tr.Tensor(data.x[:2]))
    assert_state_grads_same(model.state_grads, before, cfg)


@pytest.mark.parametrize("engine", ENGINES)
def test_calls_no_backward_reached_are_left_out(engine: str):
    cfg, data, model = _gru_segments(engine)
    model(tr.Tensor(data.x[:2]))                     # graph built, never backpropagated
    out, _ = model(tr.Tensor(data.x))
    (out * tr.Tensor(data.v_out)).sum().backward()
    assert [r.steps for r in model.state_grad_segments] == [cfg.T]
    alone = build(cfg, engine)
    out, _ = alone(tr.Tensor(data.x))
    (out * tr.Tensor(data.v_out)).sum().backward()
    assert_state_grads_same(model.state_grads, alone.state_grads, cfg)


def test_calls_with_different_batch_sizes_cannot_be_joined():
    cfg, data, model = _gru_segments("fused")
    out_a, _ = model(tr.Tensor(data.x))
    out_b, _ = model(tr.Tensor(data.x[:, :1]))
    (out_a.sum() + out_b.sum()).backward()
    with pytest.raises(ValueError, match=r"batch sizes \[2, 1\].*state_grad_segments"):
        model.state_grads
    a, b = model.state_grad_segments
    assert a.grads[0, 0]["h"].shape == (5, 2, 3) and b.grads[0, 0]["h"].shape == (5, 1, 3)


def test_segments_keep_their_lengths():
    cfg, data, model = _gru_segments("autograd")
    out, _ = model(tr.Tensor(data.x), lengths=[5, 2])
    out.sum().backward()
    (record,) = model.state_grad_segments
    assert record.lengths.tolist() == [5, 2] and record.steps == 5


@pytest.mark.parametrize("engine", ENGINES)
def test_a_backward_that_reaches_an_earlier_call_joins_it(engine: str):
    """Overlapping truncation windows: after a backward over call 1, call 2 starts a fresh
    record, and a backward from call 2's loss that flows back into call 1 (whose graph was
    retained) brings call 1 back in, with this backward's gradients."""
    cfg, data, model = _gru_segments(engine)
    x, v = tr.Tensor(data.x), tr.Tensor(data.v_out)
    out_a, h_a = model(x[:3])
    (out_a * v[:3]).sum().backward(retain_graph=True)
    out_b, _ = model(x[3:], h_a)
    (out_b * v[3:]).sum().backward()
    assert [r.steps for r in model.state_grad_segments] == [3, 2]
    whole = build(cfg, engine)
    out, _ = whole(x)
    (out[3:] * v[3:]).sum().backward()                    # the second loss alone
    assert_state_grads_same(model.state_grads, whole.state_grads, cfg)
