"""Claims of docs/recurrent.md that no other test states on its own.

* (S1), (S2): the sigmoid identity sigma(a) = 0.5 tanh(0.5 a) + 0.5 that every kernel uses is
  within one ulp of 1 of the exact logistic function, never overflows, and the 0.5
  pre-scaling of weight rows is exact;
* (E3)-(E5), (E7), (B4): the Elman kernel's dh_all obeys the BPTT recursion written in the
  page, in both directions, and its weight gradients equal the per-step sums;
* (R1), (R2): the lecture form of the GRU (update gate on the candidate) is PyTorch's form with
  the z rows of the weights and biases negated;
* (L11), (V2): along the LSTM cell path the gradient is the upstream dc times a product of
  forget gates, so it survives many steps when the gates stay near 1;
* the page itself: its code blocks run, every "Implemented by" and "Tested by" reference
  names a function that exists, and its equation tags E1-E7, G1-G11, L1-L13 are exactly
  those of the kernels' docstrings.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import tinygrad_rnn as tr
from tinygrad_rnn.bptt import (
    gru_forward, lstm_backward, lstm_forward, lstm_step_forward, rnn_backward, rnn_forward,
)
from tinygrad_rnn.ops.activations import tanh_sigmoid as sigmoid

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "recurrent.md"


# --------------------------------------------------------------------------------------------
# (S1), (S2) the sigmoid every kernel uses
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sigmoid_identity_is_within_one_ulp_and_never_overflows(dtype: type) -> None:
    rng = np.random.default_rng(0)
    a = np.concatenate([np.linspace(-40.0, 40.0, 20001), 10.0 * rng.standard_normal(20000)])
    a = a.astype(dtype)
    exact = 1.0 / (1.0 + np.exp(-a.astype(np.longdouble)))       # extended precision
    got = sigmoid(a, np)
    assert got.dtype == dtype
    # one ulp of 1 in the tested dtype, plus the reference's own rounding where long double
    # is plain float64 (some platforms)
    tol = np.finfo(dtype).eps + 2 * float(np.finfo(np.longdouble).eps)
    assert float(np.abs(got.astype(np.longdouble) - exact).max()) <= tol
    big = np.finfo(dtype).max
    with np.errstate(all="raise"):                                  # no overflow warning
        ends = sigmoid(np.array([-big, -1e3, 1e3, big], dtype=dtype), np)
    np.testing.assert_array_equal(ends, np.array([0.0, 0.0, 1.0, 1.0], dtype=dtype))


def test_half_scaling_of_weight_rows_is_exact() -> None:
    """(S2): (0.5 w) x = 0.5 (w x) bit for bit (a power of two only shifts the exponent), so
    pre-scaling the sigmoid rows changes no rounding."""
    rng = np.random.default_rng(1)
    for dtype in (np.float64, np.float32):
        w = rng.standard_normal(10000).astype(dtype)
        x = rng.standard_normal(10000).astype(dtype)
        np.testing.assert_array_equal((w * dtype(0.5)) * x, dtype(0.5) * (w * x))
        np.testing.assert_array_equal(w * dtype(0.5) + x * dtype(0.5), dtype(0.5) * (w + x))


# --------------------------------------------------------------------------------------------
# (E3)-(E5), (E7): the Elman recursion, written out by hand
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
@pytest.mark.parametrize("reverse", [False, True])
def test_elman_dh_all_follows_the_bptt_recursion(nonlinearity: str, reverse: bool) -> None:
    rng = np.random.default_rng(2)
    T, N, D, H = 6, 3, 4, 5
    x = rng.standard_normal((T, N, D))
    h0 = 0.5 * rng.standard_normal((N, H))
    w_ih, w_hh = 0.5 * rng.standard_normal((H, D)), 0.5 * rng.standard_normal((H, H))
    b_ih, b_hh = 0.5 * rng.standard_normal(H), 0.5 * rng.standard_normal(H)
    dhs, dh_n = rng.standard_normal((T, N, H)), rng.standard_normal((N, H))
    hs, h_n, cache = rnn_forward(x, h0, w_ih, w_hh, b_ih, b_hh, nonlinearity=nonlinearity,
                                 reverse=reverse)
    g = rnn_backward(dhs, dh_n, cache)

    order = list(range(T - 1, -1, -1)) if reverse else list(range(T))  # forward visit order
    prev = {t: (h0 if k == 0 else hs[order[k - 1]]) for k, t in enumerate(order)}

    def dphi(h: np.ndarray) -> np.ndarray:                            # phi'(a_t) from h_t
        return 1.0 - h * h if nonlinearity == "tanh" else (h > 0).astype(h.dtype)

    da = {t: g.dh_all[t] * dphi(hs[t]) for t in order}                # (E4)
    last = order[-1]
    np.testing.assert_allclose(g.dh_all[last], dhs[last] + dh_n, rtol=0, atol=1e-12)  # (E3)
    for k in range(len(order) - 1, 0, -1):
        t, t_before = order[k], order[k - 1]
        carried = da[t] @ w_hh                                        # (E5)
        np.testing.assert_allclose(g.dh_all[t_before], dhs[t_before] + carried,
                                   rtol=0, atol=1e-12)                # (E3)
    np.testing.assert_allclose(g.dh0, da[order[0]] @ w_hh, rtol=0, atol=1e-12)
    # (E7) as per-step sums; the kernel computes each as one GEMM over stacked rows (B4)
    dw_ih = sum(da[t].T @ x[t] for t in order)
    dw_hh = sum(da[t].T @ prev[t] for t in order)
    db = sum(da[t].sum(axis=0) for t in order)
    np.testing.assert_allclose(g.dweight_ih, dw_ih, rtol=0, atol=1e-12)
    np.testing.assert_allclose(g.dweight_hh, dw_hh, rtol=0, atol=1e-12)
    np.testing.assert_allclose(g.dbias_ih, db, rtol=0, atol=1e-12)
    np.testing.assert_allclose(g.dbias_hh, db, rtol=0, atol=1e-12)
    for t in order:                                                   # (E6)
        np.testing.assert_allclose(g.dx[t], da[t] @ w_ih, rtol=0, atol=1e-12)


# --------------------------------------------------------------------------------------------
# (R1), (R2): the lecture GRU is PyTorch's GRU with the z rows negated
# --------------------------------------------------------------------------------------------
def _lecture_gru(x: np.ndarray, h0: np.ndarray, p: dict) -> np.ndarray:
    """h_t = (1 - u_t) h_{t-1} + u_t h~_t, reset before the product; written with the
    lecture's own names so that nothing is shared with the code under test."""
    def sig(a: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-a))

    h, out = h0, []
    for x_t in x:
        r = sig(x_t @ p["W_r"].T + h @ p["U_r"].T + p["b_r"])
        u = sig(x_t @ p["W_u"].T + h @ p["U_u"].T + p["b_u"])
        h_tilde = np.tanh(x_t @ p["W"].T + (r * h) @ p["U"].T + p["b"])
        h = (1.0 - u) * h + u * h_tilde
        out.append(h)
    return np.stack(out)


def test_gru_lecture_form_is_the_pytorch_form_with_negated_z_rows() -> None:
    rng = np.random.default_rng(3)
    T, N, D, H = 5, 2, 3, 4
    p = {k: 0.6 * rng.standard_normal((H, D)) for k in ("W_r", "W_u", "W")}
    p.update({k: 0.6 * rng.standard_normal((H, H)) for k in ("U_r", "U_u", "U")})
    p.update({k: 0.6 * rng.standard_normal(H) for k in ("b_r", "b_u", "b")})
    x = rng.standard_normal((T, N, D))
    h0 = rng.standard_normal((N, H))
    want = _lecture_gru(x, h0, p)

    # (R2): weight_ih = [W_r; -W_u; W], weight_hh = [U_r; -U_u; U], one bias in bias_ih
    weight_ih = np.concatenate([p["W_r"], -p["W_u"], p["W"]])
    weight_hh = np.concatenate([p["U_r"], -p["U_u"], p["U"]])
    bias_ih = np.concatenate([p["b_r"], -p["b_u"], p["b"]])
    hs, _, _ = gru_forward(x, h0, weight_ih, weight_hh, bias_ih, None, reset="before")
    np.testing.assert_allclose(hs, want, rtol=0, atol=1e-13)

    cell = tr.nn.GRUCell(D, H, reset="before", dtype=np.float64)
    cell.load_state_dict({"weight_ih": weight_ih, "weight_hh": weight_hh, "bias_ih": bias_ih,
                          "bias_hh": np.zeros(3 * H)})
    h = tr.Tensor(h0)
    for t in range(T):
        h = cell(x[t], h)
        np.testing.assert_allclose(h.numpy(), want[t], rtol=0, atol=1e-13)
    # without the sign flip the two forms are different models
    wrong, _, _ = gru_forward(x, h0, np.concatenate([p["W_r"], p["W_u"], p["W"]]),
                              np.concatenate([p["U_r"], p["U_u"], p["U"]]),
                              np.concatenate([p["b_r"], p["b_u"], p["b"]]), None,
                              reset="before")
    assert np.abs(wrong - want).max() > 1e-2


# --------------------------------------------------------------------------------------------
# (L11), (V2): the cell-state path
# --------------------------------------------------------------------------------------------
def test_lstm_cell_path_is_a_product_of_forget_gates() -> None:
    """With W_hh = 0 and no peepholes, dh never flows back, so only the cell path is left:
    dc_t = dc_n * prod_{s > t} f_s and dc0 = dc_n * prod_s f_s (L11 unrolled). With forget
    gates near 1 (bias 6) the gradient keeps most of its size over 50 steps."""
    rng = np.random.default_rng(4)
    T, N, D, H = 50, 2, 3, 4
    x = rng.standard_normal((T, N, D))
    h0, c0 = rng.standard_normal((N, H)), rng.standard_normal((N, H))
    w_ih = 0.1 * rng.standard_normal((4 * H, D))
    w_hh = np.zeros((4 * H, H))
    b_ih = np.zeros(4 * H)
    b_ih[H:2 * H] = 6.0                                   # forget-gate rows (order i, f, g, o)
    dc_n = rng.standard_normal((N, H))
    _, _, _, cache = lstm_forward(x, h0, c0, w_ih, w_hh, b_ih, None)
    g = lstm_backward(None, None, dc_n, cache)

    f = []                                                # f_t from the per-step reference
    h, c = h0, c0
    for t in range(T):
        h, c, step = lstm_step_forward(x[t], h, c, w_ih, w_hh, b_ih, None)
        f.append(step.f_t)
    running = dc_n.copy()
    for t in range(T - 1, -1, -1):
        np.testing.assert_allclose(g.dc_all[t], running, rtol=1e-13, atol=0)
        assert not np.any(g.dh_all[t])
        running = running * f[t]                          # (L11): dc_{t-1} = dc_t * f_t
    np.testing.assert_allclose(g.dc0, running, rtol=1e-13, atol=0)
    assert np.all(np.abs(g.dc0) > 0.5 * np.abs(dc_n))     # the gradient survived 50 steps


# --------------------------------------------------------------------------------------------
# the page itself
# --------------------------------------------------------------------------------------------
def _page() -> str:
    return PAGE.read_text(encoding="utf-8")


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_page_code_blocks_run() -> None:
    blocks = _python_blocks(_page())
    assert len(blocks) >= 2
    for i, block in enumerate(blocks):
        exec(compile(block, f"docs/recurrent.md[python block {i}]", "exec"), {})


def _defines(path: Path, qualname: str) -> bool:
    """Whether ``path`` defines ``qualname`` (a function, a class, or Class.method)."""
    src = path.read_text(encoding="utf-8")
    parts = qualname.split(".")
    if len(parts) == 1:
        return re.search(rf"^(def|class) {re.escape(parts[0])}\b", src, flags=re.M) is not None
    cls = re.search(rf"^class {re.escape(parts[0])}\b.*?(?=^\S|\Z)", src,
                    flags=re.M | re.S)
    return cls is not None and re.search(rf"^\s+def {re.escape(parts[1])}\b", cls.group(0),
                                         flags=re.M) is not None


def test_page_references_name_existing_code_and_tests() -> None:
    text = _page()
    tested = re.findall(r"(tests/[\w/]+\.py)::(\w+)", text)
    implemented = re.findall(r"(tinygrad_rnn/[\w/]+\.py)::([\w.]+)", text)
    assert len(tested) >= 20 and len(implemented) >= 15
    for path, name in tested:
        assert (ROOT / path).is_file(), path
        src = (ROOT / path).read_text(encoding="utf-8")
        assert re.search(rf"^def {name}\(", src, flags=re.M), f"{path}::{name}"
    for path, name in implemented:
        assert (ROOT / path).is_file(), path
        assert _defines(ROOT / path, name), f"{path}::{name}"


def test_page_equation_numbers_are_the_kernels() -> None:
    """Each E/G/L number of a kernel docstring is tagged exactly once on the page, and the
    page tags no E/G/L number the kernels do not have."""
    text = _page()
    tags = re.findall(r"\\tag\{([^}]*)\}", text)
    assert len(tags) == len(set(tags)), "an equation number is used twice"
    page_egl = {t for t in tags if re.fullmatch(r"[EGL]\d+'?", t)}
    code_egl: set[str] = set()
    for name in ("elman", "gru", "lstm"):
        doc = (ROOT / "tinygrad_rnn" / "bptt" / f"{name}.py").read_text(encoding="utf-8")
        doc = doc.split('"""')[1]                         # the module docstring
        code_egl |= set(re.findall(r"\(([EGL]\d+'?)\)", doc))
    assert code_egl == {f"E{k}" for k in range(1, 8)} | {f"G{k}" for k in range(1, 12)} | {
        f"L{k}" for k in range(1, 14)} | {"G3'", "G8'"}
    assert page_egl == code_egl
