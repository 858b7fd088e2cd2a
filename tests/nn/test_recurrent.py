"""The recurrent layers RNN, GRU and LSTM (tinygrad_rnn/nn/recurrent.py) on both engines.

Hypothesis draws the cell type and variant (Elman tanh/relu, GRU reset after/before, LSTM
plain/peephole/coupled/peephole+coupled, with or without biases), T in 0..12, N in 0..4, one or
two layers, one or two directions, batch_first, lengths (None or random in [0, T]) and given or
default initial states. For every drawn configuration:

* float64 gradient checks of the outputs and final states with respect to the input, the
  initial states and every parameter (full Jacobian for tiny configurations, random
  directions v^T J u otherwise); for relu the data is redrawn until every pre-activation is
  away from the kink, tolerances are never loosened;
* ``engine='fused'`` equals ``engine='autograd'`` to 1e-10: outputs, final states and every
  gradient (input and initial states included);
* variable-length semantics: each sequence run alone, truncated to its length, gives the same
  valid outputs, final states and gradients as the padded batch; padded input steps hold junk
  (1e6, inf or NaN) that is never read, and padded outputs are exactly 0.

Also: float32 in -> float32 out and gradients on both engines, close to float64; T = 0 and
N = 0; clear errors naming shapes, dtypes and values; dropout between layers; a checkpoint round
trip through tr.save / tr.load. torch comparisons are in test_recurrent_torch.py, per-step state
gradients in test_state_grads.py.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn.gradcheck import check_leaves
from tinygrad_rnn.nn import GRU, LSTM, RNN

ENGINES = ("fused", "autograd")
RELU_MARGIN = 1e-4     # smallest |pre-activation| allowed at a relu (eps = 1e-6 is 100x smaller)
SAME = 1e-10           # "equal" between engines / groupings: |a - b| <= SAME * max(1, |b|)


# --------------------------------------------------------------------------------------------
# variants and configurations
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Variant:
    mode: str                       # 'RNN', 'GRU', 'LSTM'
    options: tuple = ()             # constructor keywords as (name, value) pairs

    @property
    def kwargs(self) -> dict:
        return dict(self.options)

    @property
    def layer(self) -> type:
        return {"RNN": RNN, "GRU": GRU, "LSTM": LSTM}[self.mode]

    @property
    def is_lstm(self) -> bool:
        return self.mode == "LSTM"

    @property
    def relu(self) -> bool:
        return self.kwargs.get("nonlinearity") == "relu"

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
    T: int = 3
    N: int = 2
    D: int = 2
    H: int = 2
    num_layers: int = 1
    bidirectional: bool = False
    batch_first: bool = False
    bias: bool = True
    lengths: tuple | None = None
    given_state: bool = True
    seed: int = 0

    @property
    def dirs(self) -> int:
        return 2 if self.bidirectional else 1


@st.composite
def configs(draw: Any, variants: Any = st.sampled_from(VARIANTS), max_T: int = 12,
            max_N: int = 4, max_layers: int = 2, lengths: str = "maybe") -> Config:
    """A drawn layer configuration. ``lengths``: 'maybe', 'always' or 'never'."""
    # the empty cases are drawn (and have their own tests), but hypothesis favours small
    # values, so half the draws come from ranges without them
    T = draw(st.integers(0, max_T) | st.integers(min(2, max_T), max_T))
    N = draw(st.integers(0, max_N) | st.integers(1, max_N))
    with_lengths = {"maybe": draw(st.booleans()), "always": True, "never": False}[lengths]
    lens = tuple(draw(st.lists(st.integers(0, T), min_size=N, max_size=N))) \
        if with_lengths else None
    return Config(
        variant=draw(variants), T=T, N=N, D=draw(st.integers(1, 3)), H=draw(st.integers(1, 3)),
        num_layers=draw(st.integers(1, max_layers)), bidirectional=draw(st.booleans()),
        batch_first=draw(st.booleans()), bias=draw(st.booleans()), lengths=lens,
        given_state=draw(st.booleans()), seed=draw(st.integers(0, 2**31)),
    )


def build(cfg: Config, engine: str, seed: int | None = None, dtype: Any = np.float64,
          **extra: Any) -> Any:
    return cfg.variant.layer(
        cfg.D, cfg.H, num_layers=cfg.num_layers, bias=cfg.bias, batch_first=cfg.batch_first,
        bidirectional=cfg.bidirectional, engine=engine, dtype=dtype,
        generator=cfg.seed if seed is None else seed, **cfg.variant.kwargs, **extra)


# --------------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------------
@dataclass
class Data:
    """Everything a run needs; ``x`` is time-major (T, N, D), padded steps hold ``junk``."""

    seed: int                         # the seed the model parameters are drawn from
    x: np.ndarray
    h0: np.ndarray | None             # (L * dirs, N, H)
    c0: np.ndarray | None
    lengths: np.ndarray | None
    v_out: np.ndarray                 # upstream weights of the loss
    v_h: np.ndarray
    v_c: np.ndarray | None


def valid_mask(lengths: np.ndarray | None, T: int, N: int) -> np.ndarray:
    """(T, N) True at valid steps."""
    if lengths is None:
        return np.ones((T, N), dtype=bool)
    return np.arange(T)[:, None] < lengths[None, :]


def relu_margin(model: Any, x: np.ndarray, h0: np.ndarray, lengths: np.ndarray | None) -> float:
    """Smallest |pre-activation| of a relu RNN stack over the valid steps (NumPy forward)."""
    T, N, _ = x.shape
    valid = valid_mask(lengths, T, N)
    margin = np.inf
    layer_in = x
    for layer in range(model.num_layers):
        outs = []
        for d in range(model.num_directions):
            p = model._params(layer, d)
            w_ih, w_hh = p["weight_ih"].numpy(), p["weight_hh"].numpy()
            b = sum((p[k].numpy() for k in ("bias_ih", "bias_hh") if k in p), np.zeros(1))
            h = h0[layer * model.num_directions + d].copy()
            out = np.zeros((T, N, model.hidden_size))
            for t in (range(T - 1, -1, -1) if d else range(T)):
                a = layer_in[t] @ w_ih.T + h @ w_hh.T + b
                m = valid[t]
                if m.any():
                    margin = min(margin, float(np.abs(a[m]).min()))
                h = np.where(m[:, None], np.maximum(a, 0.0), h)
                out[t] = np.where(m[:, None], h, 0.0)
            outs.append(out)
        layer_in = np.concatenate(outs, axis=-1)
    return margin


def make_data(cfg: Config, junk: float = 1e6) -> Data:
    """Inputs and upstream weights from ``cfg.seed``. For relu the seed is advanced
    (deterministically) until every valid pre-activation is RELU_MARGIN away from the kink."""
    L = cfg.num_layers * cfg.dirs
    lengths = None if cfg.lengths is None else np.array(cfg.lengths, dtype=np.int64)
    for attempt in range(100):
        seed = cfg.seed + 7919 * attempt
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((cfg.T, cfg.N, cfg.D))
        h0 = 0.5 * rng.standard_normal((L, cfg.N, cfg.H)) if cfg.given_state else None
        c0 = (rng.standard_normal((L, cfg.N, cfg.H))
              if cfg.given_state and cfg.variant.is_lstm else None)
        if not cfg.variant.relu:
            break
        model = build(cfg, "fused", seed=seed)
        h_init = h0 if h0 is not None else np.zeros((L, cfg.N, cfg.H))
        if relu_margin(model, x, h_init, lengths) >= RELU_MARGIN:
            break
    else:  # pragma: no cover - 100 unlucky draws in a row
        raise AssertionError("could not draw relu data away from the kink")
    pad = ~valid_mask(lengths, cfg.T, cfg.N)
    if pad.any():
        x[pad] = junk if np.isnan(junk) else junk * rng.uniform(-1, 1, (int(pad.sum()), cfg.D))
    v_out = rng.standard_normal((cfg.T, cfg.N, cfg.dirs * cfg.H))
    v_h = rng.standard_normal((L, cfg.N, cfg.H))
    v_c = rng.standard_normal((L, cfg.N, cfg.H)) if cfg.variant.is_lstm else None
    return Data(seed, x, h0, c0, lengths, v_out, v_h, v_c)


def batch_layout(cfg: Config, a: np.ndarray) -> np.ndarray:
    """A time-major (T, N, ...) array in the layout the layer takes."""
    return np.ascontiguousarray(a.transpose(1, 0, 2)) if cfg.batch_first else a


# --------------------------------------------------------------------------------------------
# running a layer
# --------------------------------------------------------------------------------------------
@dataclass
class Result:
    out: np.ndarray                   # time-major (T, N, dirs * H)
    h_n: np.ndarray
    c_n: np.ndarray | None
    grads: dict                       # name -> array (zeros where no gradient arrived)
    state_grads: dict


def leaves_of(cfg: Config, data: Data) -> list[tuple[str, tr.Tensor]]:
    leaves = [("x", tr.Tensor(batch_layout(cfg, data.x).copy(), requires_grad=True))]
    if data.h0 is not None:
        leaves.append(("h0", tr.Tensor(data.h0.copy(), requires_grad=True)))
    if data.c0 is not None:
        leaves.append(("c0", tr.Tensor(data.c0.copy(), requires_grad=True)))
    return leaves


def forward(model: Any, cfg: Config, data: Data, leaves: dict) -> tuple:
    """Call the layer; returns (output, h_n, c_n) as given by the layer."""
    h0, c0 = leaves.get("h0"), leaves.get("c0")
    if cfg.variant.is_lstm:
        hx = None if h0 is None else (h0, c0)
        out, (h_n, c_n) = model(leaves["x"], hx, lengths=data.lengths)
    else:
        out, h_n = model(leaves["x"], h0, lengths=data.lengths)
        c_n = None
    return out, h_n, c_n


def run(model: Any, cfg: Config, data: Data) -> Result:
    """Forward, L = <v_out, out> + <v_h, h_n> (+ <v_c, c_n>), backward, collect everything."""
    named = leaves_of(cfg, data)
    leaves = dict(named)
    before = {name: np.array(t.numpy()) for name, t in named}
    out, h_n, c_n = forward(model, cfg, data, leaves)
    loss = (out * tr.Tensor(batch_layout(cfg, data.v_out))).sum()
    loss = loss + (h_n * tr.Tensor(data.v_h)).sum()
    if c_n is not None:
        loss = loss + (c_n * tr.Tensor(data.v_c)).sum()
    if loss.requires_grad:
        loss.backward()
    for name, t in named:  # the layer never writes into its inputs
        np.testing.assert_array_equal(t.numpy(), before[name], err_msg=f"{name} was mutated")
    grads = {}
    for name, t in named + list(model.named_parameters()):
        g = np.zeros(t.shape, dtype=t.dtype) if t.grad is None else np.array(t.grad)
        assert g.shape == t.shape and g.dtype == t.dtype, name
        grads[name] = g
    grads["x"] = batch_layout(cfg, grads["x"])
    return Result(batch_layout(cfg, out.numpy()), h_n.numpy(),
                  None if c_n is None else c_n.numpy(), grads,
                  {k: dict(v) for k, v in model.state_grads.items()})


def assert_same(a: np.ndarray, b: np.ndarray, what: str, tol: float = SAME) -> None:
    assert a.shape == b.shape, f"{what}: shapes {a.shape} vs {b.shape}"
    if a.size:
        err = np.abs(a - b) / np.maximum(1.0, np.abs(b))
        assert np.all(err <= tol), f"{what}: max scaled difference {err.max():.3g} > {tol:g}"


def assert_results_same(a: Result, b: Result, tol: float = SAME) -> None:
    assert_same(a.out, b.out, "output", tol)
    assert_same(a.h_n, b.h_n, "h_n", tol)
    if b.c_n is not None:
        assert_same(a.c_n, b.c_n, "c_n", tol)
    assert a.grads.keys() == b.grads.keys()
    for name in b.grads:
        assert_same(a.grads[name], b.grads[name], f"d{name}", tol)


# --------------------------------------------------------------------------------------------
# the main properties
# --------------------------------------------------------------------------------------------
# Regression: NaN/inf padding used to reach the input GEMM and, through 0 * NaN, every weight
# gradient (and with the autograd engine the input gradient too).
NAN_PADDED = Config(Variant("LSTM"), T=4, N=2, D=2, H=2, lengths=(4, 2), seed=1)


@given(cfg=configs(), junk=st.sampled_from([1e6, np.inf, np.nan]))
@example(cfg=NAN_PADDED, junk=np.nan)
@example(cfg=replace(NAN_PADDED, variant=VARIANTS[0], bidirectional=True), junk=np.inf)
def test_fused_equals_autograd(cfg: Config, junk: float):
    """Outputs, final states and every gradient (input, initial states, parameters) agree to
    1e-10; nothing is NaN even when the padding is; run() checks that the inputs are never
    mutated."""
    data = make_data(cfg, junk)
    fused = run(build(cfg, "fused", data.seed), cfg, data)
    auto = run(build(cfg, "autograd", data.seed), cfg, data)
    assert_results_same(fused, auto)
    for res in (fused, auto):
        assert res.out.shape == (cfg.T, cfg.N, cfg.dirs * cfg.H)
        assert res.h_n.shape == (cfg.num_layers * cfg.dirs, cfg.N, cfg.H)
        for name, g in res.grads.items():
            assert np.all(np.isfinite(g)), f"d{name} is not finite"


@given(cfg=configs(), block_steps=st.integers(1, 4), junk=st.sampled_from([1e6, np.nan]))
def test_autograd_projection_in_blocks_of_steps_equals_fused(cfg: Config, block_steps: int,
                                                             junk: float):
    """The autograd engine projects the inputs in blocks of steps (one GEMM per block, made
    when the loop reaches it, so a long sequence never holds all T projections): with blocks
    of 1 to 4 steps (T not a multiple of the block, reverse directions, lengths, two layers)
    every output and gradient still equals the fused engine's to 1e-10."""
    from tinygrad_rnn.nn import recurrent

    data = make_data(cfg, junk)
    fused = run(build(cfg, "fused", data.seed), cfg, data)
    gates = {"RNN": 1, "GRU": 3, "LSTM": 3 if cfg.variant.kwargs.get("coupled") else 4}
    step_bytes = max(1, cfg.N) * gates[cfg.variant.mode] * cfg.H * 8  # float64: one step
    old = recurrent.PROJECTION_BLOCK_BYTES
    recurrent.PROJECTION_BLOCK_BYTES = block_steps * step_bytes
    try:
        auto = run(build(cfg, "autograd", data.seed), cfg, data)
    finally:
        recurrent.PROJECTION_BLOCK_BYTES = old
    assert_results_same(fused, auto)


def _gradcheck_layer(model: Any, cfg: Config, data: Data, mode: str) -> None:
    named = leaves_of(cfg, data) + list(model.named_parameters())
    names = [n for n, _ in named]
    args = [t for _, t in named]

    def fn(*a: Any) -> Any:
        leaves = dict(zip(names, a))
        out, h_n, c_n = forward(model, cfg, data, leaves)
        return out, h_n, c_n

    labels = dict(enumerate(names))
    assert check_leaves(fn, args, list(range(len(args))), labels, mode=mode,
                        n_directions=6, seed=cfg.seed % 1000) is True


def _is_tiny(cfg: Config) -> bool:
    return cfg.T <= 3 and cfg.N <= 2 and cfg.num_layers == 1 and cfg.D * cfg.H <= 4


@given(cfg=configs(), engine=st.sampled_from(ENGINES))
@example(cfg=Config(VARIANTS[1], T=3, N=2, D=2, H=2, lengths=(3, 1), seed=3), engine="fused")
@example(cfg=Config(VARIANTS[7], T=2, N=2, D=1, H=2, bias=False, lengths=(0, 2),
                    bidirectional=True), engine="autograd")
def test_gradcheck(cfg: Config, engine: str):
    """float64 central differences against the engine's gradients of the outputs and final
    states with respect to the input, the initial states and every parameter. Full Jacobian
    when tiny, otherwise 6 random directions v^T J u (each one costs 3 runs of the layer)."""
    data = make_data(cfg)
    model = build(cfg, engine, data.seed)
    _gradcheck_layer(model, cfg, data, "full" if _is_tiny(cfg) else "directional")


@pytest.mark.parametrize("v", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("engine", ENGINES)
def test_gradcheck_full_bidirectional_two_layers(v: Variant, engine: str):
    """Every Jacobian entry of a small two-layer bidirectional layer with lengths (smaller
    for the autograd engine, whose runs cost about 10x more)."""
    if engine == "fused":
        cfg = Config(v, T=3, N=2, D=2, H=2, num_layers=2, bidirectional=True, lengths=(3, 2),
                     seed=21)
    else:
        cfg = Config(v, T=2, N=2, D=1, H=1, num_layers=2, bidirectional=True, lengths=(2, 1),
                     seed=21)
    data = make_data(cfg)
    _gradcheck_layer(build(cfg, engine, data.seed), cfg, data, "full")


# --------------------------------------------------------------------------------------------
# variable-length semantics
# --------------------------------------------------------------------------------------------
@given(cfg=configs(max_T=6, max_N=3, lengths="always"), engine=st.sampled_from(ENGINES),
       junk=st.sampled_from([1e6, -1e6, np.inf, np.nan]))
@example(cfg=replace(NAN_PADDED, bidirectional=True), engine="fused", junk=np.nan)
@example(cfg=replace(NAN_PADDED, variant=VARIANTS[3], num_layers=2), engine="autograd",
         junk=np.nan)
def test_padded_steps_change_nothing(cfg: Config, engine: str, junk: float):
    """Each sequence run alone, truncated to its length, gives the batch's outputs at its
    valid steps, its final states and its gradients (parameter gradients sum over the
    sequences); padded outputs and the input gradient at padded steps are exactly 0."""
    data = make_data(cfg, junk)
    batch = run(build(cfg, engine, data.seed), cfg, data)
    L = cfg.num_layers * cfg.dirs
    summed = {name: np.zeros_like(g) for name, g in batch.grads.items() if name not in
              ("x", "h0", "c0")}
    for n, length in enumerate(data.lengths):
        one = Data(
            data.seed, data.x[:length, n:n + 1].copy(),
            None if data.h0 is None else data.h0[:, n:n + 1].copy(),
            None if data.c0 is None else data.c0[:, n:n + 1].copy(), None,
            data.v_out[:length, n:n + 1].copy(), data.v_h[:, n:n + 1].copy(),
            None if data.v_c is None else data.v_c[:, n:n + 1].copy())
        alone = run(build(cfg, engine, data.seed), replace(cfg, T=int(length), N=1), one)
        assert_same(batch.out[:length, n], alone.out[:, 0], f"output of sequence {n}")
        assert np.all(batch.out[length:, n] == 0.0), f"padded outputs of sequence {n}"
        assert_same(batch.h_n[:, n], alone.h_n[:, 0], f"h_n of sequence {n}")
        if cfg.variant.is_lstm:
            assert_same(batch.c_n[:, n], alone.c_n[:, 0], f"c_n of sequence {n}")
        assert_same(batch.grads["x"][:length, n], alone.grads["x"][:, 0], f"dx of seq {n}")
        assert np.all(batch.grads["x"][length:, n] == 0.0), f"dx at padding of sequence {n}"
        for name in ("h0", "c0"):
            if name in batch.grads:
                assert_same(batch.grads[name][:, n], alone.grads[name][:, 0], f"d{name}[{n}]")
        for name in summed:
            summed[name] += alone.grads[name]
    for name, g in summed.items():
        assert_same(batch.grads[name], g, f"d{name} (sum over the sequences)")
    assert batch.h_n.shape == (L, cfg.N, cfg.H)


@pytest.mark.parametrize("v", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("engine", ENGINES)
def test_full_lengths_equal_no_lengths(v: Variant, engine: str):
    cfg = Config(v, T=5, N=3, D=3, H=2, num_layers=2, bidirectional=True, seed=4)
    data = make_data(cfg)
    with_lengths = make_data(replace(cfg, lengths=(5, 5, 5)))
    a = run(build(cfg, engine, data.seed), cfg, data)
    b = run(build(cfg, engine, data.seed), cfg, with_lengths)
    assert_results_same(a, b)
    np.testing.assert_array_equal(a.out, b.out)  # the forward values are bit-identical


@pytest.mark.parametrize("engine", ENGINES)
def test_zero_length_sequence_keeps_its_initial_state(engine: str):
    cfg = Config(Variant("LSTM"), T=4, N=3, D=2, H=3, bidirectional=True,
                 lengths=(4, 0, 2), seed=8)
    data = make_data(cfg)
    res = run(build(cfg, engine, data.seed), cfg, data)
    np.testing.assert_array_equal(res.h_n[:, 1], data.h0[:, 1])
    np.testing.assert_array_equal(res.c_n[:, 1], data.c0[:, 1])
    assert np.all(res.out[:, 1] == 0.0)
    # its initial states only pass their upstream gradient through
    np.testing.assert_array_equal(res.grads["h0"][:, 1], data.v_h[:, 1])
    np.testing.assert_array_equal(res.grads["c0"][:, 1], data.v_c[:, 1])
    assert np.all(res.grads["x"][:, 1] == 0.0)


def test_reverse_direction_starts_at_each_sequences_last_valid_step():
    """The backward half of a bidirectional layer, at step t of a sequence of length l, has
    seen x_{l-1}, ..., x_t: its output at t = 0 equals a unidirectional layer run on the
    sequence reversed up to its length."""
    cfg = Config(Variant("GRU"), T=5, N=2, D=2, H=3, bidirectional=True, lengths=(5, 3),
                 given_state=False, seed=6)
    data = make_data(cfg)
    bi = build(cfg, "fused", data.seed)
    out, h_n = bi(data.x, lengths=data.lengths)
    uni = GRU(2, 3, dtype=np.float64, generator=0)
    uni.load_state_dict({k[:-len("_reverse")]: v for k, v in bi.state_dict().items()
                         if k.endswith("_reverse")})
    for n, length in enumerate(data.lengths):
        rev = data.x[:length, n:n + 1][::-1].copy()
        u_out, u_h = uni(rev)
        np.testing.assert_allclose(out.numpy()[:length, n, 3:], u_out.numpy()[::-1, 0],
                                   rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(h_n.numpy()[1, n], u_h.numpy()[0, 0], rtol=1e-13,
                                   atol=1e-14)


def test_lengths_accept_a_list_an_array_and_a_tensor():
    cfg = Config(Variant("RNN"), T=4, N=3, lengths=(4, 1, 3), seed=2)
    data = make_data(cfg)
    model = build(cfg, "fused", data.seed)
    want = model(data.x, lengths=data.lengths)[0].numpy()
    for lengths in ([4, 1, 3], np.array([4, 1, 3], dtype=np.int32),
                    tr.Tensor(np.array([4, 1, 3]))):
        np.testing.assert_array_equal(model(data.x, lengths=lengths)[0].numpy(), want)


# --------------------------------------------------------------------------------------------
# float32
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("v", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("engine", ENGINES)
def test_float32_in_float32_out_close_to_float64(v: Variant, engine: str):
    cfg = Config(v, T=6, N=3, D=3, H=4, num_layers=2, bidirectional=True, lengths=(6, 2, 4),
                 seed=13)
    data = make_data(cfg)
    ref = run(build(cfg, engine, data.seed), cfg, data)
    m32 = build(cfg, engine, data.seed, dtype=np.float32)
    assert all(p.dtype == np.float32 for p in m32.parameters())
    as32 = {k: None if a is None else a.astype(np.float32) for k, a in (
        ("x", data.x), ("h0", data.h0), ("c0", data.c0), ("v_out", data.v_out),
        ("v_h", data.v_h), ("v_c", data.v_c))}
    data32 = replace(data, **as32)
    res = run(m32, cfg, data32)  # run() asserts every gradient's dtype equals its leaf's
    assert res.out.dtype == np.float32 and res.h_n.dtype == np.float32
    if v.is_lstm:
        assert res.c_n.dtype == np.float32
    pairs = [("output", res.out, ref.out), ("h_n", res.h_n, ref.h_n)]
    pairs += [(f"d{k}", res.grads[k], ref.grads[k]) for k in ref.grads]
    for what, got, want in pairs:
        assert got.dtype == np.float32, what
        scale = max(1.0, float(np.abs(want).max()))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale, err_msg=what)


# --------------------------------------------------------------------------------------------
# T = 0 and N = 0
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("v", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("bidirectional", [False, True])
def test_empty_time(v: Variant, engine: str, bidirectional: bool):
    """T = 0: output (0, N, dirs * H), h_n = h0 (c_n = c0), dL/dh0 = dL/dh_n, every other
    gradient zero (or absent)."""
    cfg = Config(v, T=0, N=3, D=2, H=3, num_layers=2, bidirectional=bidirectional, seed=5)
    data = make_data(cfg)
    res = run(build(cfg, engine, data.seed), cfg, data)
    assert res.out.shape == (0, 3, cfg.dirs * 3)
    np.testing.assert_array_equal(res.h_n, data.h0)
    np.testing.assert_array_equal(res.grads["h0"], data.v_h)
    if v.is_lstm:
        np.testing.assert_array_equal(res.c_n, data.c0)
        np.testing.assert_array_equal(res.grads["c0"], data.v_c)
    assert res.grads["x"].shape == (0, 3, 2)
    for name, g in res.grads.items():
        if name not in ("h0", "c0"):
            assert np.all(g == 0.0), name
    # batch_first and default states
    model = build(replace(cfg, batch_first=True), engine, data.seed)
    out, hn = model(np.zeros((3, 0, 2)))
    h_n = hn[0] if v.is_lstm else hn
    assert out.shape == (3, 0, cfg.dirs * 3) and np.all(h_n.numpy() == 0.0)


@pytest.mark.parametrize("v", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("engine", ENGINES)
def test_empty_batch(v: Variant, engine: str):
    cfg = Config(v, T=4, N=0, D=2, H=3, num_layers=2, bidirectional=True, lengths=(), seed=5)
    data = make_data(cfg)
    res = run(build(cfg, engine, data.seed), cfg, data)
    assert res.out.shape == (4, 0, 6) and res.h_n.shape == (4, 0, 3)
    assert res.grads["x"].shape == (4, 0, 2) and res.grads["h0"].shape == (4, 0, 3)
    for name, g in res.grads.items():
        assert np.all(g == 0.0), name  # an empty batch gives an empty sum


# --------------------------------------------------------------------------------------------
# unbatched input and layouts
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("v", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("engine", ENGINES)
def test_unbatched_and_batch_first_equal_the_time_major_batch(v: Variant, engine: str):
    cfg = Config(v, T=4, N=1, D=3, H=2, num_layers=2, bidirectional=True, seed=9)
    data = make_data(cfg)
    model = build(cfg, engine, data.seed)
    hx = (data.h0, data.c0) if v.is_lstm else data.h0
    out, hn = model(data.x, hx)
    hx1 = (data.h0[:, 0], data.c0[:, 0]) if v.is_lstm else data.h0[:, 0]
    out1, hn1 = model(data.x[:, 0], hx1)  # unbatched (T, D), states (L, H)
    assert out1.shape == (4, 4)
    np.testing.assert_array_equal(out1.numpy(), out.numpy()[:, 0])
    for a, b in zip(hn1 if v.is_lstm else (hn1,), hn if v.is_lstm else (hn,)):
        assert a.shape == (4, 2)
        np.testing.assert_array_equal(a.numpy(), b.numpy()[:, 0])
    bf = build(replace(cfg, batch_first=True), engine, data.seed)
    out_bf, hn_bf = bf(data.x.transpose(1, 0, 2), hx)
    np.testing.assert_array_equal(out_bf.numpy(), out.numpy().transpose(1, 0, 2))
    for a, b in zip(hn_bf if v.is_lstm else (hn_bf,), hn if v.is_lstm else (hn,)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())  # states stay (L, N, H)


@pytest.mark.parametrize("v", VARIANTS, ids=VARIANT_IDS)
def test_parameter_names_and_shapes(v: Variant):
    model = v.layer(3, 4, num_layers=2, bidirectional=True, dtype=np.float64, generator=0,
                    **v.kwargs)
    G = {"RNN": 1, "GRU": 3}.get(v.mode, 3 if v.kwargs.get("coupled") else 4)
    want = []
    for layer in range(2):
        for sfx in ("", "_reverse"):
            d_in = 3 if layer == 0 else 8
            want += [(f"weight_ih_l{layer}{sfx}", (G * 4, d_in)),
                     (f"weight_hh_l{layer}{sfx}", (G * 4, 4)),
                     (f"bias_ih_l{layer}{sfx}", (G * 4,)), (f"bias_hh_l{layer}{sfx}", (G * 4,))]
            if v.kwargs.get("peephole"):
                want.append((f"weight_ch_l{layer}{sfx}", ((G - 1) * 4,)))
    assert [(k, a.shape) for k, a in model.state_dict().items()] == want


def test_forget_bias_on_every_layer_and_direction():
    plain = LSTM(2, 3, num_layers=2, bidirectional=True, dtype=np.float64, generator=1)
    fb = LSTM(2, 3, num_layers=2, bidirectional=True, forget_bias=1.0, dtype=np.float64,
              generator=1)
    for key, want in plain.state_dict().items():
        got = fb.state_dict()[key]
        if key.startswith("bias_"):
            want = want.copy()
            want[3:6] = 1.0 if key.startswith("bias_ih") else 0.0
        np.testing.assert_array_equal(got, want, err_msg=key)


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("v", VARIANTS, ids=VARIANT_IDS)
def test_wrong_input_size_or_rank(v: Variant):
    model = v.layer(3, 4, dtype=np.float64, **v.kwargs)
    name = v.mode
    with pytest.raises(ValueError, match=f"{name}: input of shape "
                       + re.escape("(5, 2, 2)") + ".*input_size=3"):
        model(np.zeros((5, 2, 2)))
    with pytest.raises(ValueError, match=f"{name}: .*3 dimensions.*" + re.escape("(5,)")):
        model(np.zeros(5))
    with pytest.raises(ValueError, match=re.escape("(1, 2, 3, 3)")):
        model(np.zeros((1, 2, 3, 3)))


@pytest.mark.parametrize("v", VARIANTS, ids=VARIANT_IDS)
def test_wrong_state_shape(v: Variant):
    model = v.layer(3, 4, num_layers=2, dtype=np.float64, **v.kwargs)
    x = np.zeros((5, 2, 3))
    good, bad = np.zeros((2, 2, 4)), np.zeros((1, 2, 4))
    if v.is_lstm:
        with pytest.raises(ValueError, match="h_0 must have shape " + re.escape("(2, 2, 4)")
                           + ".*got " + re.escape("(1, 2, 4)")):
            model(x, (bad, good))
        with pytest.raises(ValueError, match="c_0 must have shape " + re.escape("(2, 2, 4)")
                           + ".*got " + re.escape("(2, 3, 4)")):
            model(x, (good, np.zeros((2, 3, 4))))
        with pytest.raises(TypeError, match=r"LSTM: the state must be a pair \(h_0, c_0\)"):
            model(x, good)
    else:
        with pytest.raises(ValueError, match="hx must have shape " + re.escape("(2, 2, 4)")
                           + ".*got " + re.escape("(1, 2, 4)")):
            model(x, bad)
        # unbatched input: (L, H) state; the message names the caller's shapes
        with pytest.raises(ValueError, match="hx must have shape " + re.escape("(2, 4)")
                           + ".*unbatched.*got " + re.escape("(2, 5)")):
            model(np.zeros((5, 3)), np.zeros((2, 5)))


@pytest.mark.parametrize("lengths, pattern", [
    ([6, 1], r"lengths\[0\] = 6 is outside \[0, 5\]"),
    ([2, -1], r"lengths\[1\] = -1 is outside \[0, 5\]"),
    ([2, 3, 4], re.escape("shape (2,)") + ".*" + re.escape("shape (3,)")),
    ([[2, 3]], re.escape("shape (2,)") + ".*" + re.escape("shape (1, 2)")),
    ([2.0, 3.0], "integer.*float64"),
])
@pytest.mark.parametrize("engine", ENGINES)
def test_bad_lengths(lengths: Any, pattern: str, engine: str):
    model = GRU(3, 4, engine=engine, dtype=np.float64)
    with pytest.raises(ValueError, match=pattern):
        model(np.zeros((5, 2, 3)), lengths=lengths)


@pytest.mark.parametrize("v", VARIANTS, ids=VARIANT_IDS)
def test_dtype_mismatch(v: Variant):
    m64 = v.layer(3, 4, dtype=np.float64, **v.kwargs)
    m32 = v.layer(3, 4, dtype=np.float32, **v.kwargs)
    with pytest.raises(TypeError, match="float32.*float64"):
        m64(np.zeros((2, 1, 3), dtype=np.float32))
    with pytest.raises(TypeError, match="float64.*float32"):
        m32(np.zeros((2, 1, 3)))
    h32 = np.zeros((1, 1, 4), dtype=np.float32)
    with pytest.raises(TypeError, match="float32.*float64"):
        m64(np.zeros((2, 1, 3)), (h32, h32) if v.is_lstm else h32)


def test_constructor_errors():
    with pytest.raises(ValueError, match="engine.*'cuda'"):
        LSTM(2, 3, engine="cuda")
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\], got 1.5"):
        GRU(2, 3, dropout=1.5)
    with pytest.raises(ValueError, match="nonlinearity.*'gelu'"):
        RNN(2, 3, nonlinearity="gelu")
    with pytest.raises(ValueError, match="reset.*'sometimes'"):
        GRU(2, 3, reset="sometimes")
    with pytest.raises(ValueError, match="LSTM: num_layers must be positive, got 0"):
        LSTM(2, 3, num_layers=0)
    with pytest.raises(ValueError, match="GRU: input_size must be positive, got -2"):
        GRU(-2, 3)


@pytest.mark.parametrize("layer", [RNN, GRU, LSTM])
@pytest.mark.parametrize("kwargs, name, shown", [
    (dict(input_size=2, hidden_size=3.5), "hidden_size", "3.5"),  # was a bare NumPy error
    (dict(input_size=2.0, hidden_size=3), "input_size", "2.0"),   # refused, not truncated
    (dict(input_size=2, hidden_size=3, num_layers=1.0), "num_layers", "1.0"),
    (dict(input_size=2, hidden_size=3, num_layers=True), "num_layers", "True"),
    (dict(input_size=2, hidden_size=None), "hidden_size", "None"),
])
def test_non_integer_sizes_are_refused(layer: type, kwargs: dict, name: str, shown: str):
    with pytest.raises(TypeError, match=f"{layer.__name__}: {name} must be an integer, got "
                       + re.escape(shown)):
        layer(**kwargs)


@pytest.mark.parametrize("layer", [RNN, GRU, LSTM])
def test_numpy_integer_sizes_are_accepted(layer: type):
    model = layer(np.int64(2), np.int32(3), num_layers=np.int16(2), dtype=np.float64)
    assert (model.input_size, model.hidden_size, model.num_layers) == (2, 3, 2)
    assert all(type(v) is int for v in (model.input_size, model.hidden_size,
                                         model.num_layers))
    out, _ = model(np.zeros((4, 1, 2)))
    assert out.shape == (4, 1, 3)


@pytest.mark.parametrize("layer", [RNN, GRU, LSTM])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, bool, "not a dtype"])
def test_non_float_dtype_is_refused_naming_the_layer(layer: type, dtype: Any):
    """Used to fail in Parameter with "only floating-point tensors can require a gradient",
    naming neither the layer nor the argument."""
    with pytest.raises(TypeError, match=f"{layer.__name__}: dtype must be a floating-point "
                       "dtype, got "):
        layer(2, 3, dtype=dtype)


@pytest.mark.parametrize("v", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("engine", ENGINES)
def test_unbatched_input_refuses_a_3d_state(v: Variant, engine: str):
    """An (L, 1, H) state with unbatched (T, D) input used to be accepted (as torch refuses
    it): the state of an unbatched input is (L, H)."""
    model = v.layer(3, 4, num_layers=2, engine=engine, dtype=np.float64, **v.kwargs)
    x = np.zeros((5, 3))
    good, bad = np.zeros((2, 4)), np.zeros((2, 1, 4))
    what = "h_0" if v.is_lstm else "hx"
    pattern = (f"{v.mode}: for unbatched 2-D input of shape " + re.escape("(5, 3)") + ", "
               + what + " must also be 2-D of shape " + re.escape("(2, 4)")
               + ".*3-D state of shape " + re.escape("(2, 1, 4)"))
    with pytest.raises(ValueError, match=pattern):
        model(x, (bad, good) if v.is_lstm else bad)
    if v.is_lstm:
        with pytest.raises(ValueError, match="c_0 must also be 2-D.*" + re.escape("(2, 1, 4)")):
            model(x, (good, bad))
    out, state = model(x, (good, good) if v.is_lstm else good)  # the (L, H) state works
    assert out.shape == (5, 4)
    assert (state[0] if v.is_lstm else state).shape == (2, 4)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("missing", ["h_0", "c_0", "h_0 and c_0"])
def test_lstm_state_pair_with_none_is_refused(missing: str, batched: bool, engine: str):
    """(h_0, None) used to run with a zero c_0 put in silently."""
    model = LSTM(3, 4, engine=engine, dtype=np.float64, generator=0)
    x = np.zeros((5, 2, 3)) if batched else np.zeros((5, 3))
    state = np.ones((1, 2, 4)) if batched else np.ones((1, 4))
    hx = (None if "h_0" in missing else state, None if "c_0" in missing else state)
    with pytest.raises(TypeError, match=r"LSTM: the state must be None or a pair "
                       + re.escape(f"(h_0, c_0) of two states, got {missing} = None")):
        model(x, hx)


# --------------------------------------------------------------------------------------------
# dropout between layers
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("v", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("engine", ENGINES)
def test_dropout_eval_has_no_effect_and_train_is_seeded(v: Variant, engine: str):
    cfg = Config(v, T=5, N=3, D=3, H=4, num_layers=3, bidirectional=True, seed=17)
    data = make_data(cfg)
    plain = build(cfg, engine, data.seed)
    want = plain(data.x)[0].numpy()

    def with_dropout(seed: int) -> Any:
        model = build(cfg, engine, seed, dropout=0.5)
        model.load_state_dict(plain.state_dict())
        return model

    model = with_dropout(100).eval()
    np.testing.assert_array_equal(model(data.x)[0].numpy(), want)
    # train mode: masks from the layer's generator; same seed -> same outputs
    a = with_dropout(100).train()
    b = with_dropout(100).train()
    c = with_dropout(101).train()
    out_a, out_b, out_c = (m(data.x)[0].numpy() for m in (a, b, c))
    np.testing.assert_array_equal(out_a, out_b)
    assert not np.allclose(out_a, want) and not np.allclose(out_a, out_c)
    # layer 0 sees the raw input: its final states are untouched; the layers above are not
    h_a, h_plain = a(data.x)[1], plain(data.x)[1]
    if v.is_lstm:
        h_a, h_plain = h_a[0], h_plain[0]
    np.testing.assert_array_equal(h_a.numpy()[:2], h_plain.numpy()[:2])
    assert not np.allclose(h_a.numpy()[2:], h_plain.numpy()[2:])


def test_dropout_one_layer_has_no_effect():
    """Dropout acts between layers only, as in torch."""
    plain = LSTM(2, 3, dtype=np.float64, generator=3)
    drop = LSTM(2, 3, dropout=0.9, dtype=np.float64, generator=3)
    x = np.random.default_rng(0).standard_normal((4, 2, 2))
    np.testing.assert_array_equal(drop.train()(x)[0].numpy(), plain(x)[0].numpy())


@pytest.mark.parametrize("v", VARIANTS, ids=VARIANT_IDS)
def test_dropout_in_train_mode_engines_agree(v: Variant):
    """Same seed, same masks: the engines agree in train mode too (outputs and gradients)."""
    cfg = Config(v, T=4, N=3, D=2, H=3, num_layers=2, bidirectional=True, lengths=(4, 1, 3),
                 seed=23)
    data = make_data(cfg)
    fused = run(build(cfg, "fused", data.seed, dropout=0.3), cfg, data)
    auto = run(build(cfg, "autograd", data.seed, dropout=0.3), cfg, data)
    assert_results_same(fused, auto)
    clean = run(build(cfg, "fused", data.seed), cfg, data)
    assert not np.allclose(fused.out, clean.out)


# --------------------------------------------------------------------------------------------
# checkpoints
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("engine", ENGINES)
def test_checkpoint_round_trip_is_bit_identical(tmp_path: Any, dtype: Any, engine: str):
    kw = dict(num_layers=2, bidirectional=True, peephole=True, dtype=dtype, engine=engine)
    model = LSTM(3, 4, generator=1, **kw)
    x = np.random.default_rng(0).standard_normal((5, 2, 3)).astype(dtype)
    lengths = np.array([5, 3])
    out, (h_n, c_n) = model(x, lengths=lengths)
    path = tmp_path / "lstm.npz"
    tr.save(model.state_dict(), path)
    fresh = LSTM(3, 4, generator=2, **kw)
    assert not np.array_equal(fresh(x)[0].numpy(), out.numpy())
    state = tr.load(path)
    assert list(state) == list(model.state_dict())
    fresh.load_state_dict(state)
    out2, (h2, c2) = fresh(x, lengths=lengths)
    for a, b in ((out2, out), (h2, h_n), (c2, c_n)):
        assert a.dtype == dtype
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("make", [
    lambda **kw: tr.nn.LSTM(2, 3, **kw), lambda **kw: tr.nn.LSTMCell(2, 3, **kw)],
    ids=["LSTM", "LSTMCell"])
@pytest.mark.parametrize("name, value, error", [
    ("coupled", 2, "coupled must be True or False, got 2"),
    ("coupled", None, "coupled must be True or False, got None"),
    ("coupled", 1.0, "coupled must be True or False, got 1.0"),
    ("peephole", "no", "peephole must be True or False, got 'no'"),
    ("peephole", np.int64(2), r"peephole must be True or False, got np.int64\(2\)"),
    ("forget_bias", "1", r"forget_bias must be a real number, got '1' \(str\)"),
    ("forget_bias", True, r"forget_bias must be a real number, got True \(bool\)"),
])
def test_lstm_variant_flags_are_checked(make, name, value, error):
    """coupled='no' is truthy: without the check it would silently pick the variant."""
    with pytest.raises(TypeError, match=error):
        make(**{name: value})
    assert make(coupled=np.bool_(True), forget_bias=np.float32(1.0)).coupled is True


@pytest.mark.parametrize("make", [
    lambda **kw: tr.nn.LSTM(2, 3, **kw), lambda **kw: tr.nn.LSTMCell(2, 3, **kw)],
    ids=["LSTM", "LSTMCell"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -np.inf, np.float32("nan"),
                                   10 ** 400])
def test_a_non_finite_forget_bias_is_a_value_error(make, value):
    """Regression: inf and nan were a TypeError; they are numbers with a bad value."""
    with pytest.raises(ValueError, match=re.escape(
            f"forget_bias must be a finite number, got {value!r}")):
        make(forget_bias=value)


@pytest.mark.parametrize("cls", [RNN, GRU, LSTM])
@pytest.mark.parametrize("name", ["bidirectional", "batch_first", "bias"])
@pytest.mark.parametrize("value, shown", [("no", "'no' (str)"), (2, "2 (int)"),
                                          (None, "None (NoneType)"), (1.0, "1.0 (float)"),
                                          (np.int64(-1), "np.int64(-1) (int64)")])
def test_layer_switches_are_checked(cls, name, value, shown):
    """Regression: they were read by truthiness, so bidirectional='no' built two
    directions."""
    with pytest.raises(TypeError, match=re.escape(
            f"{cls.__name__}: {name} must be True or False, got {shown}")):
        cls(2, 3, **{name: value})


@pytest.mark.parametrize("cls", [RNN, GRU, LSTM])
@pytest.mark.parametrize("one, zero", [(1, 0), (np.int64(1), np.int32(0)),
                                       (np.bool_(True), np.bool_(False))])
def test_layer_switches_accept_0_and_1(cls, one, zero):
    """torch code often passes 0/1; they mean False/True and are stored as bools."""
    on = cls(2, 3, bidirectional=one, batch_first=one, bias=one, generator=0)
    off = cls(2, 3, bidirectional=zero, batch_first=zero, bias=zero, generator=0)
    assert (on.bidirectional, on.batch_first, on.bias) == (True, True, True)
    assert all(type(v) is bool for v in (on.bidirectional, on.batch_first, on.bias,
                                         off.bidirectional, off.batch_first, off.bias))
    assert on.num_directions == 2 and off.num_directions == 1
    assert "bias_ih_l0_reverse" in dict(on.named_parameters())
    assert not any("bias" in k or "reverse" in k for k, _ in off.named_parameters())
    ref = cls(2, 3, bidirectional=True, batch_first=True, bias=True, generator=0)
    x = tr.tensor(np.random.default_rng(0).standard_normal((4, 5, 2)).astype(np.float32))
    np.testing.assert_array_equal(on(x)[0].numpy(), ref(x)[0].numpy())


@pytest.mark.parametrize("make", [
    lambda **kw: tr.nn.LSTM(2, 3, generator=0, **kw),
    lambda **kw: tr.nn.LSTMCell(2, 3, generator=0, **kw)], ids=["LSTM", "LSTMCell"])
@pytest.mark.parametrize("one, zero", [(1, 0), (np.int64(1), np.int32(0))])
def test_lstm_variant_flags_accept_0_and_1(make, one, zero):
    """peephole=1 / coupled=1 were refused by the bool-only check; torch-style layers take
    truthy ints for their switches (bias=1), so 0 and 1 mean False and True."""
    for flags, bools in (({"peephole": one, "coupled": zero}, (True, False)),
                         ({"peephole": zero, "coupled": one}, (False, True))):
        m = make(**flags)
        ref = make(peephole=bools[0], coupled=bools[1])
        assert (m.peephole, m.coupled) == bools
        assert m.peephole is bools[0] and m.coupled is bools[1]
        got, want = m.state_dict(), ref.state_dict()
        assert list(got) == list(want)
        for key in want:
            np.testing.assert_array_equal(got[key], want[key])
