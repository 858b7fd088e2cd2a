"""The recurrent cells of the autograd path: RNNCell, GRUCell, LSTMCell (tinygrad_rnn/nn/cells.py).

Covered here:

* forward against hand-written NumPy formulas for every variant: Elman tanh/relu, GRU with the
  reset gate after the product (PyTorch's formula) and before it (Cho et al. 2014, eqs. 5-8),
  LSTM plain, peephole (Gers & Schmidhuber 2000), coupled input-forget gate, and both;
  batched (N = 0..4) and unbatched (D,) input, initial states given or not, biases on or off;
* float64 gradient checks (full Jacobian, central differences) with respect to the input, the
  initial states and every parameter;
* ``forget_bias`` sets exactly the forget-gate slice (block f of i,f,g,o, or of f,g,o when
  coupled) of ``bias_ih`` and zeroes that of ``bias_hh``;
* parameter names, shapes and state_dict order (torch's, plus ``weight_ch`` for peepholes);
* errors for a wrong input size, dtype or state shape name the shapes and dtypes involved.

The comparison with torch.nn.RNNCell/GRUCell/LSTMCell is in test_recurrent_torch.py.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn.gradcheck import check_leaves
from tinygrad_rnn.nn import GRUCell, LSTMCell, RNNCell

RELU_MARGIN = 1e-4  # smallest |pre-activation| allowed at a relu (eps = 1e-6 is 100x smaller)


# --------------------------------------------------------------------------------------------
# variants and the NumPy formulas they must match
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CellVariant:
    kind: str               # 'rnn', 'gru', 'lstm'
    nonlinearity: str = "tanh"
    reset: str = "after"
    peephole: bool = False
    coupled: bool = False

    def make(self, D: int, H: int, bias: bool, seed: int, dtype: Any = np.float64) -> Any:
        if self.kind == "rnn":
            return RNNCell(D, H, bias=bias, nonlinearity=self.nonlinearity, dtype=dtype,
                           generator=seed)
        if self.kind == "gru":
            return GRUCell(D, H, bias=bias, reset=self.reset, dtype=dtype, generator=seed)
        return LSTMCell(D, H, bias=bias, peephole=self.peephole, coupled=self.coupled,
                        dtype=dtype, generator=seed)

    @property
    def gates(self) -> int:
        return {"rnn": 1, "gru": 3}.get(self.kind, 3 if self.coupled else 4)

    def __str__(self) -> str:
        if self.kind == "rnn":
            return f"rnn-{self.nonlinearity}"
        if self.kind == "gru":
            return f"gru-{self.reset}"
        return "-".join(["lstm"] + ["peephole"] * self.peephole + ["coupled"] * self.coupled)


CELL_VARIANTS = [
    CellVariant("rnn"), CellVariant("rnn", nonlinearity="relu"),
    CellVariant("gru"), CellVariant("gru", reset="before"),
    CellVariant("lstm"), CellVariant("lstm", peephole=True), CellVariant("lstm", coupled=True),
    CellVariant("lstm", peephole=True, coupled=True),
]
CELL_IDS = [str(v) for v in CELL_VARIANTS]


def np_sigmoid(a: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-a))


def params_of(cell: Any) -> dict[str, np.ndarray]:
    """The cell's parameters as NumPy arrays; absent biases become zeros."""
    G, H = cell.weight_ih.shape[0] // cell.hidden_size, cell.hidden_size
    p = {name: t.numpy() for name, t in cell.named_parameters()}
    p.setdefault("bias_ih", np.zeros(G * H))
    p.setdefault("bias_hh", np.zeros(G * H))
    return p


def blocks(a: np.ndarray, k: int) -> list[np.ndarray]:
    return np.split(a, k, axis=-1)


def np_rnn(x: np.ndarray, h: np.ndarray, p: dict, nonlinearity: str) -> np.ndarray:
    """Elman: h' = act(W_ih x + b_ih + W_hh h + b_hh)."""
    a = x @ p["weight_ih"].T + p["bias_ih"] + h @ p["weight_hh"].T + p["bias_hh"]
    return np.tanh(a) if nonlinearity == "tanh" else np.maximum(a, 0.0)


def np_gru_torch(x: np.ndarray, h: np.ndarray, p: dict) -> np.ndarray:
    """torch.nn.GRUCell's documented formula (reset gate on the recurrent product)."""
    xr, xz, xn = blocks(x @ p["weight_ih"].T + p["bias_ih"], 3)
    hr, hz, hn = blocks(h @ p["weight_hh"].T + p["bias_hh"], 3)
    r = np_sigmoid(xr + hr)
    z = np_sigmoid(xz + hz)
    n = np.tanh(xn + r * hn)
    return (1.0 - z) * n + z * h


def np_gru_cho(x: np.ndarray, h: np.ndarray, p: dict) -> np.ndarray:
    """Cho et al. 2014, eqs. (5)-(8), with the biases added to each pre-activation:

    r = sigma(W_r x + U_r h),  z = sigma(W_z x + U_z h),
    h~ = tanh(W x + U (r * h)),  h' = z * h + (1 - z) * h~.
    Written with separately named matrices so nothing is shared with the code under test.
    """
    H = h.shape[-1]
    W_r, W_z, W = (p["weight_ih"][k * H:(k + 1) * H] for k in range(3))
    U_r, U_z, U = (p["weight_hh"][k * H:(k + 1) * H] for k in range(3))
    b_r, b_z, b = (p["bias_ih"][k * H:(k + 1) * H] + p["bias_hh"][k * H:(k + 1) * H]
                   for k in range(3))
    r = np_sigmoid(x @ W_r.T + h @ U_r.T + b_r)
    z = np_sigmoid(x @ W_z.T + h @ U_z.T + b_z)
    h_tilde = np.tanh(x @ W.T + (r * h) @ U.T + b)
    return z * h + (1.0 - z) * h_tilde


def np_lstm(x: np.ndarray, h: np.ndarray, c: np.ndarray, p: dict, peephole: bool,
            coupled: bool) -> tuple[np.ndarray, np.ndarray]:
    """LSTM; peepholes: i, f see c_{t-1}, o sees c_t; coupled: i = 1 - f, rows f, g, o."""
    a = x @ p["weight_ih"].T + p["bias_ih"] + h @ p["weight_hh"].T + p["bias_hh"]
    H = h.shape[-1]
    if coupled:
        a_f, a_g, a_o = blocks(a, 3)
        w_cf, w_co = (blocks(p["weight_ch"], 2) if peephole else (0.0, 0.0))
        f = np_sigmoid(a_f + w_cf * c)
        i = 1.0 - f
    else:
        a_i, a_f, a_g, a_o = blocks(a, 4)
        w_ci, w_cf, w_co = (blocks(p["weight_ch"], 3) if peephole else (0.0, 0.0, 0.0))
        i = np_sigmoid(a_i + w_ci * c)
        f = np_sigmoid(a_f + w_cf * c)
    assert a.shape[-1] == (3 if coupled else 4) * H
    g = np.tanh(a_g)
    c_new = f * c + i * g
    o = np_sigmoid(a_o + w_co * c_new)
    return o * np.tanh(c_new), c_new


def np_cell(v: CellVariant, x: np.ndarray, h: np.ndarray, c: np.ndarray | None,
            p: dict) -> tuple[np.ndarray, np.ndarray | None]:
    if v.kind == "rnn":
        return np_rnn(x, h, p, v.nonlinearity), None
    if v.kind == "gru":
        return (np_gru_torch if v.reset == "after" else np_gru_cho)(x, h, p), None
    return np_lstm(x, h, c, p, v.peephole, v.coupled)


def rnn_pre_activation(x: np.ndarray, h: np.ndarray, p: dict) -> np.ndarray:
    return x @ p["weight_ih"].T + p["bias_ih"] + h @ p["weight_hh"].T + p["bias_hh"]


# --------------------------------------------------------------------------------------------
# one drawn case
# --------------------------------------------------------------------------------------------
@dataclass
class CellCase:
    variant: CellVariant
    cell: Any
    x: np.ndarray             # (N, D) or (D,) when unbatched
    h: np.ndarray | None      # initial state(s) given to the cell, or None
    c: np.ndarray | None
    unbatched: bool


def make_case(v: CellVariant, N: int | None, D: int, H: int, bias: bool, given_hx: bool,
              seed: int) -> CellCase:
    """Cell and data from ``seed``; for relu, redrawn (deterministically) until every
    pre-activation is at least RELU_MARGIN away from the kink."""
    unbatched = N is None
    rows = 1 if unbatched else N
    for attempt in range(100):
        s = seed + 7919 * attempt
        cell = v.make(D, H, bias, s)
        rng = np.random.default_rng(s)
        x = rng.standard_normal((rows, D))
        h = 0.5 * rng.standard_normal((rows, H)) if given_hx else None
        c = rng.standard_normal((rows, H)) if given_hx and v.kind == "lstm" else None
        if v.nonlinearity != "relu" or rows == 0:
            break
        a = rnn_pre_activation(x, h if h is not None else np.zeros((rows, H)), params_of(cell))
        if np.abs(a).min() >= RELU_MARGIN:
            break
    else:  # pragma: no cover - would need 100 unlucky draws in a row
        raise AssertionError("could not draw relu data away from the kink")
    if unbatched:
        x = x[0]
        h = h[0] if h is not None else None
        c = c[0] if c is not None else None
    return CellCase(v, cell, x, h, c, unbatched)


def call_cell(case: CellCase, x: Any, h: Any, c: Any) -> Any:
    if case.variant.kind == "lstm":
        return case.cell(x, None if h is None else (h, c))
    return case.cell(x, h)


cases = st.builds(
    make_case,
    v=st.sampled_from(CELL_VARIANTS),
    N=st.one_of(st.none(), st.integers(0, 4)),
    D=st.integers(1, 3), H=st.integers(1, 3), bias=st.booleans(), given_hx=st.booleans(),
    seed=st.integers(0, 2**31),
)


# --------------------------------------------------------------------------------------------
# forward and gradients
# --------------------------------------------------------------------------------------------
@given(case=cases)
def test_cell_forward_equals_numpy_formula(case: CellCase):
    v, cell = case.variant, case.cell
    p = params_of(cell)
    H = cell.hidden_size
    x2 = case.x.reshape(-1, case.x.shape[-1])
    rows = x2.shape[0]
    h2 = case.h.reshape(rows, H) if case.h is not None else np.zeros((rows, H))
    c2 = case.c.reshape(rows, H) if case.c is not None else np.zeros((rows, H))
    want_h, want_c = np_cell(v, x2, h2, c2, p)

    out = call_cell(case, case.x, case.h, case.c)
    got_h, got_c = out if v.kind == "lstm" else (out, None)
    shape = (H,) if case.unbatched else (rows, H)
    assert got_h.shape == shape and got_h.dtype == np.float64
    np.testing.assert_allclose(got_h.numpy().reshape(rows, H), want_h, rtol=1e-12, atol=1e-13)
    if v.kind == "lstm":
        assert got_c.shape == shape and got_c.dtype == np.float64
        np.testing.assert_allclose(got_c.numpy().reshape(rows, H), want_c, rtol=1e-12,
                                   atol=1e-13)


@given(case=cases)
@example(case=make_case(CellVariant("rnn", nonlinearity="relu"), 3, 2, 3, False, False, 5))
def test_cell_gradcheck(case: CellCase):
    """Full float64 Jacobian of the new state(s) with respect to the input, the initial
    state(s) and every parameter."""
    v = case.variant
    leaves = [tr.Tensor(case.x.copy(), requires_grad=True)]
    if case.h is not None:
        leaves.append(tr.Tensor(case.h.copy(), requires_grad=True))
        if v.kind == "lstm":
            leaves.append(tr.Tensor(case.c.copy(), requires_grad=True))
    n_state = len(leaves) - 1
    names = ["x", "h", "c"][:len(leaves)]
    for name, prm in case.cell.named_parameters():
        leaves.append(prm)
        names.append(name)

    def fn(*args: Any) -> Any:
        h = args[1] if n_state >= 1 else None
        c = args[2] if n_state == 2 else None
        return call_cell(case, args[0], h, c)

    labels = dict(enumerate(names))
    assert check_leaves(fn, leaves, list(range(len(leaves))), labels, mode="full") is True


@pytest.mark.parametrize("v", CELL_VARIANTS, ids=CELL_IDS)
def test_cell_backward_reaches_every_leaf_with_its_shape_and_dtype(v: CellVariant):
    case = make_case(v, 3, 2, 4, True, True, 11)
    x = tr.Tensor(case.x, requires_grad=True)
    h = tr.Tensor(case.h, requires_grad=True)
    c = tr.Tensor(case.c, requires_grad=True) if v.kind == "lstm" else None
    x_before, h_before = case.x.copy(), case.h.copy()
    out = call_cell(case, x, h, c)
    loss = (out[0] * out[1]).sum() if v.kind == "lstm" else (out * out).sum()
    loss.backward()
    for name, t in [("x", x), ("h", h)] + ([("c", c)] if c is not None else []) + list(
            case.cell.named_parameters()):
        assert t.grad is not None, name
        assert t.grad.shape == t.shape and t.grad.dtype == t.dtype, name
        assert np.all(np.isfinite(t.grad)), name
    np.testing.assert_array_equal(x.numpy(), x_before)  # inputs never mutated
    np.testing.assert_array_equal(h.numpy(), h_before)


@pytest.mark.parametrize("v", CELL_VARIANTS, ids=CELL_IDS)
def test_unbatched_input_equals_a_batch_of_one(v: CellVariant):
    case = make_case(v, None, 3, 2, True, True, 3)
    cell = case.cell
    batched = call_cell(case, case.x[None], case.h[None],
                        case.c[None] if case.c is not None else None)
    single = call_cell(case, case.x, case.h, case.c)
    if v.kind == "lstm":
        for b, s in zip(batched, single):
            assert s.shape == (cell.hidden_size,)
            np.testing.assert_array_equal(s.numpy(), b.numpy()[0])
    else:
        assert single.shape == (cell.hidden_size,)
        np.testing.assert_array_equal(single.numpy(), batched.numpy()[0])


@pytest.mark.parametrize("v", CELL_VARIANTS, ids=CELL_IDS)
def test_missing_state_means_zeros(v: CellVariant):
    case = make_case(v, 2, 3, 2, True, True, 4)
    zeros = np.zeros((2, 2))
    implicit = call_cell(case, case.x, None, None)
    explicit = call_cell(case, case.x, zeros, zeros if v.kind == "lstm" else None)
    for a, b in zip(*(o if v.kind == "lstm" else (o,) for o in (implicit, explicit))):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_gru_reset_placement_matters():
    """'before' and 'after' are different models with the same parameters (they agree only
    when the state is zero, where both reset terms vanish)."""
    after = GRUCell(3, 4, reset="after", dtype=np.float64, generator=2)
    before = GRUCell(3, 4, reset="before", dtype=np.float64, generator=2)
    rng = np.random.default_rng(0)
    x, h = rng.standard_normal((2, 3)), rng.standard_normal((2, 4))
    assert np.abs(after(x, h).numpy() - before(x, h).numpy()).max() > 1e-3
    # with no recurrent biases and h = 0 both reduce to the same function of x
    after0 = GRUCell(3, 4, bias=False, reset="after", dtype=np.float64, generator=2)
    before0 = GRUCell(3, 4, bias=False, reset="before", dtype=np.float64, generator=2)
    np.testing.assert_allclose(after0(x).numpy(), before0(x).numpy(), rtol=1e-14, atol=0)


def test_float32_cell_keeps_float32_and_matches_float64():
    for v in CELL_VARIANTS:
        c64 = v.make(3, 4, True, 9)
        c32 = v.make(3, 4, True, 9, dtype=np.float32)
        for p in c32.parameters():
            assert p.dtype == np.float32
        c32.load_state_dict(c64.state_dict())
        x = np.random.default_rng(1).standard_normal((2, 3))
        x32 = tr.Tensor(x.astype(np.float32), requires_grad=True)
        x64 = tr.Tensor(x, requires_grad=True)
        o32 = c32(x32)
        o64 = c64(x64)
        o32 = o32[0] if v.kind == "lstm" else o32
        o64 = o64[0] if v.kind == "lstm" else o64
        assert o32.dtype == np.float32
        (o32 * o32).sum().backward()
        (o64 * o64).sum().backward()
        assert x32.grad.dtype == np.float32
        np.testing.assert_allclose(o32.numpy(), o64.numpy(), rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(x32.grad, x64.grad, rtol=1e-4, atol=1e-6)
        for p32, p64 in zip(c32.parameters(), c64.parameters()):
            assert p32.grad.dtype == np.float32
            np.testing.assert_allclose(p32.grad, p64.grad, rtol=1e-4, atol=1e-6)


# --------------------------------------------------------------------------------------------
# parameters, initialisation, forget_bias
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("v", CELL_VARIANTS, ids=CELL_IDS)
@pytest.mark.parametrize("bias", [True, False])
def test_parameter_names_shapes_and_order(v: CellVariant, bias: bool):
    D, H = 3, 5
    cell = v.make(D, H, bias, 0)
    G = v.gates
    want = [("weight_ih", (G * H, D)), ("weight_hh", (G * H, H))]
    if bias:
        want += [("bias_ih", (G * H,)), ("bias_hh", (G * H,))]
    if v.peephole:
        want.append(("weight_ch", ((G - 1) * H,)))
    got = [(k, a.shape) for k, a in cell.state_dict().items()]
    assert got == want
    bound = 1.0 / np.sqrt(H)
    for name, p in cell.named_parameters():
        assert np.all(np.abs(p.numpy()) <= bound), name  # U(-1/sqrt(H), 1/sqrt(H))
    if not bias:
        assert cell.bias_ih is None and cell.bias_hh is None


@pytest.mark.parametrize("coupled", [False, True])
@pytest.mark.parametrize("peephole", [False, True])
def test_forget_bias_sets_the_forget_slice_only(coupled: bool, peephole: bool):
    H = 3
    plain = LSTMCell(2, H, peephole=peephole, coupled=coupled, dtype=np.float64, generator=7)
    fb = LSTMCell(2, H, peephole=peephole, coupled=coupled, forget_bias=1.5, dtype=np.float64,
                  generator=7)
    f = slice(0, H) if coupled else slice(H, 2 * H)
    want_ih, want_hh = plain.bias_ih.numpy().copy(), plain.bias_hh.numpy().copy()
    want_ih[f], want_hh[f] = 1.5, 0.0
    np.testing.assert_array_equal(fb.bias_ih.numpy(), want_ih)
    np.testing.assert_array_equal(fb.bias_hh.numpy(), want_hh)
    for name in ("weight_ih", "weight_hh") + (("weight_ch",) if peephole else ()):
        np.testing.assert_array_equal(getattr(fb, name).numpy(), getattr(plain, name).numpy())


def test_forget_bias_reaches_the_forget_gate():
    """Keep only the forget slice of the biases and zero the weights: then
    c' = sigma(b_f) c + sigma(0) tanh(0) = sigma(b_f) c."""
    cell = LSTMCell(2, 3, forget_bias=2.0, dtype=np.float64, generator=0)
    forget = np.zeros(12)
    forget[3:6] = 1.0
    cell.load_state_dict({"weight_ih": np.zeros((12, 2)), "weight_hh": np.zeros((12, 3)),
                          "bias_ih": cell.bias_ih.numpy() * forget,
                          "bias_hh": cell.bias_hh.numpy() * forget})
    c_prev = np.array([[1.0, -2.0, 0.5]])
    _, c = cell(np.zeros((1, 2)), (np.zeros((1, 3)), c_prev))
    np.testing.assert_allclose(c.numpy(), np_sigmoid(2.0) * c_prev, rtol=1e-15)


def test_forget_bias_without_bias_is_ignored():
    cell = LSTMCell(2, 3, bias=False, forget_bias=1.0, dtype=np.float64, generator=0)
    assert cell.bias_ih is None and cell.bias_hh is None
    assert list(cell.state_dict()) == ["weight_ih", "weight_hh"]


def test_same_generator_seed_gives_same_cell():
    a = GRUCell(3, 4, dtype=np.float64, generator=123)
    b = GRUCell(3, 4, dtype=np.float64, generator=123)
    c = GRUCell(3, 4, dtype=np.float64, generator=124)
    for k in a.state_dict():
        np.testing.assert_array_equal(a.state_dict()[k], b.state_dict()[k])
    assert any(not np.array_equal(a.state_dict()[k], c.state_dict()[k]) for k in a.state_dict())


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("v", CELL_VARIANTS, ids=CELL_IDS)
def test_wrong_input_size_names_the_shapes(v: CellVariant):
    cell = v.make(3, 4, True, 0)
    name = type(cell).__name__
    with pytest.raises(ValueError, match=re.escape("(N, 3)") + ".*" + re.escape("(2, 5)")):
        cell(np.zeros((2, 5)))
    with pytest.raises(ValueError, match=name + ".*" + re.escape("(2, 1, 3)")):
        cell(np.zeros((2, 1, 3)))
    with pytest.raises(ValueError, match=re.escape("(4,)")):
        cell(np.zeros(4))


@pytest.mark.parametrize("v", CELL_VARIANTS, ids=CELL_IDS)
def test_wrong_input_dtype_names_both_dtypes(v: CellVariant):
    cell = v.make(3, 4, True, 0)
    with pytest.raises(TypeError, match="float32.*float64"):
        cell(np.zeros((2, 3), dtype=np.float32))
    cell32 = v.make(3, 4, True, 0, dtype=np.float32)
    with pytest.raises(TypeError, match="float64.*float32"):
        cell32(np.zeros((2, 3)))


@pytest.mark.parametrize("v", CELL_VARIANTS, ids=CELL_IDS)
def test_wrong_state_shape_names_the_shapes(v: CellVariant):
    cell = v.make(3, 4, True, 0)
    x = np.zeros((2, 3))
    good, bad = np.zeros((2, 4)), np.zeros((3, 4))
    if v.kind == "lstm":
        with pytest.raises(ValueError, match="h_0.*" + re.escape("(2, 4)") + ".*"
                           + re.escape("(3, 4)")):
            cell(x, (bad, good))
        with pytest.raises(ValueError, match="c_0.*" + re.escape("(2, 4)") + ".*"
                           + re.escape("(2, 5)")):
            cell(x, (good, np.zeros((2, 5))))
    else:
        with pytest.raises(ValueError, match="hx.*" + re.escape("(2, 4)") + ".*"
                           + re.escape("(3, 4)")):
            cell(x, bad)
        # unbatched (D,) input: the state is (H,); the message names the caller's shapes
        msg = re.escape("hx must have shape (4,) for input of shape (3,), got (5,)")
        with pytest.raises(ValueError, match=msg):
            cell(np.zeros(3), np.zeros(5))
        with pytest.raises(ValueError, match=re.escape("(4,)") + ".*" + re.escape("(1, 4)")):
            cell(np.zeros(3), np.zeros((1, 4)))


@pytest.mark.parametrize("v", CELL_VARIANTS, ids=CELL_IDS)
def test_wrong_state_dtype_is_refused(v: CellVariant):
    cell = v.make(3, 4, True, 0)
    x = np.zeros((2, 3))
    h32 = np.zeros((2, 4), dtype=np.float32)
    with pytest.raises(TypeError, match="float32.*float64|float64.*float32"):
        if v.kind == "lstm":
            cell(x, (h32, np.zeros((2, 4))))
        else:
            cell(x, h32)


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("missing", ["h_0", "c_0", "h_0 and c_0"])
def test_lstm_cell_state_pair_with_none_is_refused(missing: str, batched: bool):
    """(h_0, None) used to run with a zero c_0 put in silently (and (None, c_0) with a zero
    h_0): the state is either None or two states."""
    cell = LSTMCell(3, 4, dtype=np.float64, generator=0)
    x = np.zeros((2, 3)) if batched else np.zeros(3)
    state = np.ones((2, 4)) if batched else np.ones(4)
    hx = (None if "h_0" in missing else state, None if "c_0" in missing else state)
    with pytest.raises(TypeError, match=r"LSTMCell: the state must be None or a pair "
                       + re.escape(f"(h_0, c_0) of two states, got {missing} = None")):
        cell(x, hx)
    h, c = cell(x, (state, state))  # a full pair still works
    assert h.shape == c.shape == state.shape


@pytest.mark.parametrize("hx", [np.zeros((2, 4)), (np.zeros(4),)])
def test_lstm_cell_state_must_be_a_pair(hx: Any):
    """A single (2, H) array used to be split silently into h = hx[0], c = hx[1]."""
    cell = LSTMCell(3, 4, dtype=np.float64, generator=0)
    with pytest.raises(TypeError, match=r"LSTMCell: the state must be a pair \(h_0, c_0\)"):
        cell(np.zeros(3), hx)


def test_constructor_errors():
    with pytest.raises(ValueError, match="nonlinearity.*'sigmoid'"):
        RNNCell(2, 3, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="reset.*'middle'"):
        GRUCell(2, 3, reset="middle")
    with pytest.raises(ValueError, match="LSTMCell: input_size must be positive, got 0"):
        LSTMCell(0, 3)
    with pytest.raises(ValueError, match="RNNCell: hidden_size must be positive, got -1"):
        RNNCell(2, -1)


@pytest.mark.parametrize("cls", [RNNCell, GRUCell, LSTMCell])
@pytest.mark.parametrize("sizes, name, shown", [
    ((3.5, 4), "input_size", "3.5"),      # used to fail deep inside NumPy without a name
    ((3, 4.0), "hidden_size", "4.0"),     # a float is refused, not truncated
    ((True, 4), "input_size", "True"),    # a bool is not a size
    ((3, "4"), "hidden_size", "'4'"),
])
def test_non_integer_sizes_are_refused(cls: type, sizes: tuple, name: str, shown: str):
    with pytest.raises(TypeError, match=f"{cls.__name__}: {name} must be an integer, got "
                       + re.escape(shown)):
        cls(*sizes)


@pytest.mark.parametrize("cls", [RNNCell, GRUCell, LSTMCell])
def test_numpy_integer_sizes_are_accepted(cls: type):
    cell = cls(np.int64(3), np.int32(4), dtype=np.float64)
    assert type(cell.input_size) is int and type(cell.hidden_size) is int
    assert cell.weight_hh.shape[1] == 4


@pytest.mark.parametrize("cls", [RNNCell, GRUCell, LSTMCell])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, bool])
def test_non_float_dtype_is_refused_naming_the_cell(cls: type, dtype: Any):
    """Used to fail in Parameter with "only floating-point tensors can require a gradient",
    naming neither the cell nor the argument."""
    with pytest.raises(TypeError, match=f"{cls.__name__}: dtype must be a floating-point "
                       f"dtype, got {np.dtype(dtype)}"):
        cls(3, 4, dtype=dtype)


@pytest.mark.parametrize("cls", [RNNCell, GRUCell, LSTMCell])
@pytest.mark.parametrize("bias, shown", [("no", "'no' (str)"), (2, "2 (int)"),
                                         (None, "None (NoneType)"), (0.0, "0.0 (float)")])
def test_bias_switch_is_checked(cls: type, bias: Any, shown: str):
    """Regression: bias was read by truthiness, so bias='no' gave a cell with biases."""
    with pytest.raises(TypeError, match=re.escape(
            f"{cls.__name__}: bias must be True or False, got {shown}")):
        cls(3, 4, bias=bias)


@pytest.mark.parametrize("cls", [RNNCell, GRUCell, LSTMCell])
@pytest.mark.parametrize("on, off", [(1, 0), (np.int64(1), np.int8(0)),
                                     (np.bool_(True), np.bool_(False))])
def test_bias_switch_accepts_0_and_1(cls: type, on: Any, off: Any):
    """torch code often passes bias=0/1; stored as a bool, it means what True/False mean."""
    with_bias, without = cls(3, 4, bias=on), cls(3, 4, bias=off)
    assert with_bias.bias is True and without.bias is False
    assert with_bias.bias_ih is not None and without.bias_ih is None
    assert "bias=False" in repr(without) and "bias" not in repr(with_bias).split("(", 1)[1]
