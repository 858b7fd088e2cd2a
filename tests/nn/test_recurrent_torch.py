"""The recurrent layers and cells against torch.nn (skipped cleanly when torch is absent).

For every configuration torch supports (Elman tanh and relu, GRU, LSTM; 1 to 3 layers; bias on
or off; batch_first; bidirectional; unbatched input; initial states given or not; variable
lengths through torch.nn.utils.rnn.pack_padded_sequence(enforce_sorted=False) and
pad_packed_sequence), on both engines, in float64 and after loading torch's state dict converted
to NumPy:

* outputs and final states equal torch's to 1e-10;
* the gradients with respect to the input, h_0 / c_0 and every parameter equal torch's;
* state_dict keys are torch's, in torch's order, with the same shapes.

Also RNNCell / GRUCell / LSTMCell against torch's cells, and dropout between layers: no effect
in eval mode (equal to torch in eval mode), and dropout=0 in train mode equals torch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tinygrad_rnn import Tensor
from tinygrad_rnn.nn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell

torch = pytest.importorskip("torch")

ENGINES = ("fused", "autograd")
SAME = 1e-10  # |a - b| <= SAME * max(1, |b|)

# (name, our layer, torch layer, extra keywords for both)
MODES = {
    "rnn-tanh": (RNN, "RNN", {"nonlinearity": "tanh"}),
    "rnn-relu": (RNN, "RNN", {"nonlinearity": "relu"}),
    "gru": (GRU, "GRU", {}),
    "lstm": (LSTM, "LSTM", {}),
}


def assert_same(a: np.ndarray, b: np.ndarray, what: str) -> None:
    assert a.shape == b.shape, f"{what}: shapes {a.shape} vs {b.shape}"
    if a.size:
        err = np.abs(a - b) / np.maximum(1.0, np.abs(b))
        assert np.all(err <= SAME), f"{what}: max scaled difference {err.max():.3g}"


def as_array(a: Any) -> np.ndarray:
    """A NumPy copy of a torch tensor, one of our Tensors, or an array (our .grad)."""
    return np.array(a.detach().numpy() if hasattr(a, "detach") else a)


def to_numpy_state(module: Any) -> dict:
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


# --------------------------------------------------------------------------------------------
# layers
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TorchConfig:
    T: int = 3
    N: int = 2
    D: int = 2
    H: int = 3
    num_layers: int = 1
    bias: bool = True
    batch_first: bool = False
    bidirectional: bool = False
    unbatched: bool = False
    given_state: bool = True
    lengths: tuple | None = None
    seed: int = 0

    @property
    def L(self) -> int:
        return self.num_layers * (2 if self.bidirectional else 1)


@st.composite
def torch_configs(draw: Any) -> TorchConfig:
    T = draw(st.integers(1, 6))
    unbatched = draw(st.booleans())
    N = 1 if unbatched else draw(st.integers(1, 3))
    lengths = None
    if not unbatched and draw(st.booleans()):  # torch packs lengths in [1, T] only
        lengths = tuple(draw(st.lists(st.integers(1, T), min_size=N, max_size=N)))
    return TorchConfig(
        T=T, N=N, D=draw(st.integers(1, 3)), H=draw(st.integers(1, 3)),
        num_layers=draw(st.integers(1, 3)), bias=draw(st.booleans()),
        batch_first=draw(st.booleans()), bidirectional=draw(st.booleans()),
        unbatched=unbatched, given_state=draw(st.booleans()), lengths=lengths,
        seed=draw(st.integers(0, 2**31)))


def make_pair(mode: str, cfg: TorchConfig, engine: str, **extra: Any) -> tuple[Any, Any]:
    """A torch layer and ours with torch's parameters loaded."""
    ours_cls, torch_name, kw = MODES[mode]
    common = dict(num_layers=cfg.num_layers, bias=cfg.bias, batch_first=cfg.batch_first,
                  bidirectional=cfg.bidirectional, **kw, **extra)
    torch.manual_seed(cfg.seed)
    theirs = getattr(torch.nn, torch_name)(cfg.D, cfg.H, dtype=torch.float64, **common)
    ours = ours_cls(cfg.D, cfg.H, engine=engine, dtype=np.float64, generator=cfg.seed,
                    **common)
    state = to_numpy_state(theirs)
    assert list(ours.state_dict()) == list(state)
    ours.load_state_dict(state)
    return theirs, ours


@dataclass
class Inputs:
    x: np.ndarray
    h0: np.ndarray | None
    c0: np.ndarray | None
    lengths: np.ndarray | None


def make_inputs(cfg: TorchConfig, lstm: bool) -> Inputs:
    rng = np.random.default_rng(cfg.seed)
    x_shape = (cfg.T, cfg.D) if cfg.unbatched else (
        (cfg.N, cfg.T, cfg.D) if cfg.batch_first else (cfg.T, cfg.N, cfg.D))
    s_shape = (cfg.L, cfg.H) if cfg.unbatched else (cfg.L, cfg.N, cfg.H)
    x = rng.standard_normal(x_shape)
    h0 = 0.5 * rng.standard_normal(s_shape) if cfg.given_state else None
    c0 = rng.standard_normal(s_shape) if cfg.given_state and lstm else None
    lengths = None if cfg.lengths is None else np.array(cfg.lengths, dtype=np.int64)
    if lengths is not None:  # junk at the padded steps (torch never reads them either)
        pad = np.arange(cfg.T)[None, :] >= lengths[:, None]  # (N, T)
        x[pad if cfg.batch_first else pad.T] = 1e6
    return Inputs(x, h0, c0, lengths)


def run_ours(model: Any, inp: Inputs, lstm: bool, upstream: Any) -> tuple:
    x = Tensor(inp.x.copy(), requires_grad=True)
    leaves = {"input": x}
    hx = None
    if inp.h0 is not None:
        leaves["h0"] = Tensor(inp.h0.copy(), requires_grad=True)
        if lstm:
            leaves["c0"] = Tensor(inp.c0.copy(), requires_grad=True)
            hx = (leaves["h0"], leaves["c0"])
        else:
            hx = leaves["h0"]
    out, hn = model(x, hx, lengths=inp.lengths)
    finals = list(hn) if lstm else [hn]
    vs = upstream(out.shape, [f.shape for f in finals])
    loss = (out * Tensor(vs[0])).sum()
    for f, v in zip(finals, vs[1:]):
        loss = loss + (f * Tensor(v)).sum()
    loss.backward()
    grads = {k: t.grad for k, t in leaves.items()}
    grads.update({k: p.grad for k, p in model.named_parameters()})
    return out.numpy(), [f.numpy() for f in finals], grads


def run_torch(model: Any, cfg: TorchConfig, inp: Inputs, lstm: bool, upstream: Any) -> tuple:
    pack = torch.nn.utils.rnn
    x = torch.tensor(inp.x, requires_grad=True)
    leaves = {"input": x}
    hx = None
    if inp.h0 is not None:
        leaves["h0"] = torch.tensor(inp.h0, requires_grad=True)
        if lstm:
            leaves["c0"] = torch.tensor(inp.c0, requires_grad=True)
            hx = (leaves["h0"], leaves["c0"])
        else:
            hx = leaves["h0"]
    if inp.lengths is None:
        out, hn = model(x, hx)
    else:
        packed = pack.pack_padded_sequence(x, torch.tensor(inp.lengths),
                                           batch_first=cfg.batch_first, enforce_sorted=False)
        out_packed, hn = model(packed, hx)
        out, _ = pack.pad_packed_sequence(out_packed, batch_first=cfg.batch_first,
                                          total_length=cfg.T)
    finals = list(hn) if lstm else [hn]
    vs = upstream(tuple(out.shape), [tuple(f.shape) for f in finals])
    loss = (out * torch.tensor(vs[0])).sum()
    for f, v in zip(finals, vs[1:]):
        loss = loss + (f * torch.tensor(v)).sum()
    loss.backward()
    grads = {k: t.grad.numpy() for k, t in leaves.items()}
    grads.update({k: p.grad.numpy() for k, p in model.named_parameters()})
    return out.detach().numpy(), [f.detach().numpy() for f in finals], grads


def upstream_weights(seed: int) -> Any:
    def draw(out_shape: tuple, final_shapes: list) -> list:
        rng = np.random.default_rng(seed + 1)
        return [rng.standard_normal(out_shape)] + [rng.standard_normal(s) for s in final_shapes]
    return draw


def compare_with_torch(mode: str, cfg: TorchConfig, engine: str) -> None:
    lstm = mode == "lstm"
    theirs, ours = make_pair(mode, cfg, engine)
    inp = make_inputs(cfg, lstm)
    t_out, t_finals, t_grads = run_torch(theirs, cfg, inp, lstm, upstream_weights(cfg.seed))
    o_out, o_finals, o_grads = run_ours(ours, inp, lstm, upstream_weights(cfg.seed))
    assert_same(o_out, t_out, "output")
    for name, a, b in zip(("h_n", "c_n"), o_finals, t_finals):
        assert_same(a, b, name)
    assert o_grads.keys() == t_grads.keys()
    for name in t_grads:
        assert o_grads[name] is not None, name
        assert_same(o_grads[name], t_grads[name], f"d{name}")


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", list(MODES))
@given(cfg=torch_configs())
@example(cfg=TorchConfig(T=5, N=3, num_layers=3, bidirectional=True, batch_first=True,
                         lengths=(5, 1, 3), seed=1))
@example(cfg=TorchConfig(T=4, N=1, num_layers=2, bidirectional=True, unbatched=True,
                         bias=False, seed=2))
def test_layer_equals_torch(mode: str, engine: str, cfg: TorchConfig):
    compare_with_torch(mode, cfg, engine)


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("bias", [True, False])
def test_state_dict_keys_and_order_equal_torch(mode: str, bias: bool):
    _, torch_name, kw = MODES[mode]
    for num_layers, bidirectional in ((1, False), (3, True)):
        theirs = getattr(torch.nn, torch_name)(4, 5, num_layers=num_layers, bias=bias,
                                               bidirectional=bidirectional, **kw)
        ours = MODES[mode][0](4, 5, num_layers=num_layers, bias=bias,
                              bidirectional=bidirectional, **kw)
        t_state, o_state = theirs.state_dict(), ours.state_dict()
        assert list(o_state) == list(t_state)
        assert [tuple(v.shape) for v in t_state.values()] == [v.shape for v in o_state.values()]
        assert [k for k, _ in ours.named_parameters()] == [k for k, _ in
                                                           theirs.named_parameters()]


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("engine", ENGINES)
def test_dropout_eval_equals_torch_eval_and_zero_dropout_train_equals_torch(mode: str,
                                                                           engine: str):
    cfg = TorchConfig(T=5, N=3, D=3, H=4, num_layers=3, bidirectional=True, lengths=(5, 2, 4),
                      seed=7)
    lstm = mode == "lstm"
    inp = make_inputs(cfg, lstm)
    for p, train in ((0.5, False), (0.0, True)):
        theirs, ours = make_pair(mode, cfg, engine, dropout=p)
        theirs.train(train)
        ours.train(train)
        t_out, t_finals, t_grads = run_torch(theirs, cfg, inp, lstm, upstream_weights(7))
        o_out, o_finals, o_grads = run_ours(ours, inp, lstm, upstream_weights(7))
        assert_same(o_out, t_out, f"output (dropout={p}, train={train})")
        for a, b in zip(o_finals, t_finals):
            assert_same(a, b, "final state")
        for name in t_grads:
            assert_same(o_grads[name], t_grads[name], f"d{name}")


# --------------------------------------------------------------------------------------------
# cells
# --------------------------------------------------------------------------------------------
CELLS = {
    "rnn-tanh": (RNNCell, "RNNCell", {"nonlinearity": "tanh"}),
    "rnn-relu": (RNNCell, "RNNCell", {"nonlinearity": "relu"}),
    "gru": (GRUCell, "GRUCell", {}),
    "lstm": (LSTMCell, "LSTMCell", {}),
}


@pytest.mark.parametrize("kind", list(CELLS))
@given(N=st.one_of(st.none(), st.integers(1, 4)), D=st.integers(1, 4), H=st.integers(1, 4),
       bias=st.booleans(), given_state=st.booleans(), seed=st.integers(0, 2**31))
def test_cell_equals_torch(kind: str, N: int | None, D: int, H: int, bias: bool,
                           given_state: bool, seed: int):
    """N = None is an unbatched (D,) input with (H,) states."""
    ours_cls, torch_name, kw = CELLS[kind]
    torch.manual_seed(seed)
    theirs = getattr(torch.nn, torch_name)(D, H, bias=bias, dtype=torch.float64, **kw)
    ours = ours_cls(D, H, bias=bias, dtype=np.float64, **kw)
    state = to_numpy_state(theirs)
    assert list(ours.state_dict()) == list(state)
    ours.load_state_dict(state)
    rng = np.random.default_rng(seed)
    lead = () if N is None else (N,)
    x = rng.standard_normal(lead + (D,))
    states = [rng.standard_normal(lead + (H,)) for _ in range(2 if kind == "lstm" else 1)]
    v = [rng.standard_normal(lead + (H,)) for _ in range(2)]

    def go(lib: Any, model: Any, make: Any) -> tuple:
        xt = make(x)
        st_ = [make(s) for s in states] if given_state else None
        hx = None if st_ is None else (tuple(st_) if kind == "lstm" else st_[0])
        out = model(xt, hx)
        outs = list(out) if kind == "lstm" else [out]
        loss = sum((o * lib(w)).sum() for o, w in zip(outs, v))
        loss.backward()
        leaves = [xt] + (st_ or [])
        return ([as_array(o) for o in outs], [as_array(t.grad) for t in leaves],
                [as_array(p.grad) for _, p in model.named_parameters()])

    t_res = go(torch.tensor, theirs, lambda a: torch.tensor(a, requires_grad=True))
    o_res = go(Tensor, ours, lambda a: Tensor(a.copy(), requires_grad=True))
    for what, mine, ref in zip(("output", "input/state grad", "parameter grad"), o_res, t_res):
        assert len(mine) == len(ref)
        for a, b in zip(mine, ref):
            assert_same(a, b, what)
