"""Tests of the explicit BPTT kernels (tinygrad_rnn.bptt): Elman RNN, GRU, LSTM.

What is checked, for every family and variant (Elman tanh/relu, GRU reset after/before, LSTM
plain/peephole/coupled/peephole+coupled), with and without biases, lengths and reverse:

* central finite differences (float64, eps 1e-6) of L = sum(dhs_up * hs) + sum(dhn_up * h_n)
  (+ sum(dcn_up * c_n)) against every gradient the sequence backward returns;
* the fused sequence functions equal a loop of the per-step functions run on each sequence
  alone, truncated to its length (values, all gradients, dh_all and dc_all, to 1e-12);
* the per-step pair against finite differences;
* float32 in -> float32 out, close to the float64 result;
* outputs and gradients equal torch.nn.RNN / GRU / LSTM (uni- and bidirectional, packed
  variable-length batches) and dh_all / dc_all equal torch's retain_grad, when torch exists;
* inputs and upstream gradients are never mutated; empty time and batch work; bad shapes,
  dtypes and lengths raise errors that name the shapes.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from tinygrad_rnn.bptt import reference as bptt_reference
from tinygrad_rnn.bptt import (
    gru_backward, gru_forward, gru_step_backward, gru_step_forward, lstm_backward,
    lstm_forward, lstm_step_backward, lstm_step_forward, rnn_backward, rnn_forward,
    rnn_step_backward, rnn_step_forward,
)
from module_helpers import central_differences


def _examples(base: int) -> int:
    """Scale an example count with the hypothesis profile (dev/ci: base, nightly: 10x)."""
    return base * max(1, settings().max_examples // 100)


# --------------------------------------------------------------------------------------------
# one adapter over the three families, so each test body is written once
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Variant:
    family: str                 # 'rnn', 'gru', 'lstm'
    nonlinearity: str = "tanh"  # rnn
    reset: str = "after"        # gru
    peephole: bool = False      # lstm
    coupled: bool = False       # lstm

    @property
    def gates(self) -> int:
        return {"rnn": 1, "gru": 3}.get(self.family, 3 if self.coupled else 4)

    @property
    def has_cell(self) -> bool:
        return self.family == "lstm"

    def __str__(self) -> str:
        if self.family == "rnn":
            return f"rnn-{self.nonlinearity}"
        if self.family == "gru":
            return f"gru-{self.reset}"
        parts = ["lstm"] + (["peephole"] if self.peephole else []) + (
            ["coupled"] if self.coupled else [])
        return "-".join(parts)


VARIANTS = [
    Variant("rnn", nonlinearity="tanh"), Variant("rnn", nonlinearity="relu"),
    Variant("gru", reset="after"), Variant("gru", reset="before"),
    Variant("lstm"), Variant("lstm", peephole=True), Variant("lstm", coupled=True),
    Variant("lstm", peephole=True, coupled=True),
]
IDS = [str(v) for v in VARIANTS]
PARAM_NAMES = ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_ch")


def make_inputs(v: Variant, T: int, N: int, D: int, H: int, seed: int, bias: bool,
                dtype: Any = np.float64) -> dict[str, Any]:
    """Random inputs with moderate pre-activations (weights ~ N(0, 0.5^2))."""
    rng = np.random.default_rng(seed)
    G = v.gates
    inp: dict[str, Any] = {
        "x": rng.standard_normal((T, N, D)),
        "h0": 0.5 * rng.standard_normal((N, H)),
        "c0": rng.standard_normal((N, H)) if v.has_cell else None,
        "weight_ih": 0.5 * rng.standard_normal((G * H, D)),
        "weight_hh": 0.5 * rng.standard_normal((G * H, H)),
        "bias_ih": 0.5 * rng.standard_normal(G * H) if bias else None,
        "bias_hh": 0.5 * rng.standard_normal(G * H) if bias else None,
        "weight_ch": 0.5 * rng.standard_normal((G - 1) * H) if v.peephole else None,
    }
    return {k: (None if a is None else a.astype(dtype)) for k, a in inp.items()}


def make_upstream(v: Variant, T: int, N: int, H: int, seed: int,
                  dtype: Any = np.float64) -> dict[str, Any]:
    rng = np.random.default_rng(seed + 1)
    return {
        "hs": rng.standard_normal((T, N, H)).astype(dtype),
        "hn": rng.standard_normal((N, H)).astype(dtype),
        "cn": rng.standard_normal((N, H)).astype(dtype) if v.has_cell else None,
    }


def seq_forward(v: Variant, inp: dict, lengths: Any = None, reverse: bool = False):
    """(hs, h_n, c_n or None, cache)."""
    common = (inp["weight_ih"], inp["weight_hh"], inp["bias_ih"], inp["bias_hh"])
    if v.family == "rnn":
        hs, hn, cache = rnn_forward(inp["x"], inp["h0"], *common, nonlinearity=v.nonlinearity,
                                    lengths=lengths, reverse=reverse)
        return hs, hn, None, cache
    if v.family == "gru":
        hs, hn, cache = gru_forward(inp["x"], inp["h0"], *common, reset=v.reset,
                                    lengths=lengths, reverse=reverse)
        return hs, hn, None, cache
    return lstm_forward(inp["x"], inp["h0"], inp["c0"], *common, weight_ch=inp["weight_ch"],
                        coupled=v.coupled, lengths=lengths, reverse=reverse)


def seq_backward(v: Variant, up: dict, cache: Any) -> dict[str, Any]:
    """Gradients keyed like the inputs, plus dh_all (and dc_all)."""
    if v.family == "lstm":
        g = lstm_backward(up["hs"], up["hn"], up["cn"], cache)
        return {"x": g.dx, "h0": g.dh0, "c0": g.dc0, "weight_ih": g.dweight_ih,
                "weight_hh": g.dweight_hh, "bias_ih": g.dbias_ih, "bias_hh": g.dbias_hh,
                "weight_ch": g.dweight_ch, "dh_all": g.dh_all, "dc_all": g.dc_all}
    back = rnn_backward if v.family == "rnn" else gru_backward
    g = back(up["hs"], up["hn"], cache)
    return {"x": g.dx, "h0": g.dh0, "c0": None, "weight_ih": g.dweight_ih,
            "weight_hh": g.dweight_hh, "bias_ih": g.dbias_ih, "bias_hh": g.dbias_hh,
            "weight_ch": None, "dh_all": g.dh_all, "dc_all": None}


def step_forward(v: Variant, x_t, h, c, inp: dict):
    """(h_t, c_t or None, cache)."""
    common = (inp["weight_ih"], inp["weight_hh"], inp["bias_ih"], inp["bias_hh"])
    if v.family == "rnn":
        h_t, cache = rnn_step_forward(x_t, h, *common, nonlinearity=v.nonlinearity)
        return h_t, None, cache
    if v.family == "gru":
        h_t, cache = gru_step_forward(x_t, h, *common, reset=v.reset)
        return h_t, None, cache
    return lstm_step_forward(x_t, h, c, *common, weight_ch=inp["weight_ch"],
                             coupled=v.coupled)


def step_backward(v: Variant, dh, dc, cache) -> dict[str, Any]:
    """Step gradients keyed like the inputs (x -> dx_t, h0 -> dh_prev, c0 -> dc_prev)."""
    if v.family == "lstm":
        g = lstm_step_backward(dh, dc, cache)
        return {"x": g.dx_t, "h0": g.dh_prev, "c0": g.dc_prev, "weight_ih": g.dweight_ih,
                "weight_hh": g.dweight_hh, "bias_ih": g.dbias_ih, "bias_hh": g.dbias_hh,
                "weight_ch": g.dweight_ch}
    g = (rnn_step_backward if v.family == "rnn" else gru_step_backward)(dh, cache)
    return {"x": g.dx_t, "h0": g.dh_prev, "c0": None, "weight_ih": g.dweight_ih,
            "weight_hh": g.dweight_hh, "bias_ih": g.dbias_ih, "bias_hh": g.dbias_hh,
            "weight_ch": None}


def package_reference(v: Variant, x: np.ndarray, h0: np.ndarray, c0: np.ndarray, inp: dict,
                      dhs: np.ndarray, dh_n: np.ndarray, dc_n: np.ndarray) -> tuple:
    """(hs, h_n, c_n or None, caches, grads) of the package's textbook loop for ``v``
    (tinygrad_rnn/bptt/reference.py) on one sequence x (T >= 1, N, D)."""
    common = (inp["weight_ih"], inp["weight_hh"], inp["bias_ih"], inp["bias_hh"])
    if v.family == "rnn":
        hs, hn, caches = bptt_reference.elman_forward_reference(
            x, h0, *common, nonlinearity=v.nonlinearity)
        return hs, hn, None, caches, bptt_reference.elman_backward_reference(dhs, dh_n, caches)
    if v.family == "gru":
        hs, hn, caches = bptt_reference.gru_forward_reference(x, h0, *common, reset=v.reset)
        return hs, hn, None, caches, bptt_reference.gru_backward_reference(dhs, dh_n, caches)
    hs, hn, cn, caches = bptt_reference.lstm_forward_reference(
        x, h0, c0, *common, weight_ch=inp["weight_ch"], coupled=v.coupled)
    return hs, hn, cn, caches, bptt_reference.lstm_backward_reference(dhs, dh_n, dc_n, caches)


def reference(v: Variant, inp: dict, up: dict, lengths: Any, reverse: bool):
    """The package's textbook loops (:func:`package_reference`) run on each sequence alone,
    truncated to its length and, for ``reverse``, reversed in time.

    Returns (outputs, grads, pre_activation_min) where outputs = (hs, h_n, c_n) and grads is
    keyed like :func:`seq_backward`. Padded steps: outputs 0, states carried, so dh_all there
    equals the gradient of the state they carry (dh_n forward in time, dh0 in reverse).
    """
    x, h0 = inp["x"], inp["h0"]
    T, N, D = x.shape
    H = h0.shape[1]
    c0 = inp["c0"] if v.has_cell else np.zeros((N, H))
    hs = np.zeros((T, N, H))
    hn = np.zeros((N, H))
    cn = np.zeros((N, H))
    grads = {k: (None if inp[k] is None else np.zeros_like(inp[k])) for k in inp}
    dh_all = np.zeros((T, N, H))
    dc_all = np.zeros((T, N, H))
    min_pre = np.inf
    for n in range(N):
        L = T if lengths is None else int(lengths[n])
        order = list(range(L - 1, -1, -1) if reverse else range(L))    # the steps, as visited
        dh, dc = up["hn"][n], up["cn"][n] if v.has_cell else None        # L = 0: passed on
        hn[n], cn[n] = h0[n], c0[n]
        if order:
            rows = (order, slice(n, n + 1))
            out_hs, out_hn, out_cn, caches, g = package_reference(
                v, x[rows], h0[n:n + 1], c0[n:n + 1], inp, up["hs"][rows],
                up["hn"][n:n + 1], up["cn"][n:n + 1] if v.has_cell else None)
            hs[rows], hn[n] = out_hs, out_hn[0]
            grads["x"][rows], dh_all[rows] = g.dx, g.dh_all
            for name in PARAM_NAMES:
                if grads[name] is not None:
                    grads[name] += getattr(g, "d" + name)
            dh = g.dh0[0]
            if v.has_cell:
                cn[n], dc_all[rows], dc = out_cn[0], g.dc_all, g.dc0[0]
            if v.family == "rnn":
                min_pre = min([min_pre] + [float(np.abs(c.a_t).min()) for c in caches])
        grads["h0"][n] = dh
        if v.has_cell:
            grads["c0"][n] = dc
        dh_all[L:, n] = dh if reverse else up["hn"][n]
        if v.has_cell:
            dc_all[L:, n] = dc if reverse else up["cn"][n]
    grads["dh_all"] = dh_all
    grads["dc_all"] = dc_all if v.has_cell else None
    return (hs, hn, cn if v.has_cell else None), grads, min_pre


def scalar_loss(v: Variant, inp: dict, up: dict, lengths: Any, reverse: bool) -> float:
    hs, hn, cn, _ = seq_forward(v, inp, lengths, reverse)
    total = float(np.sum(up["hs"] * hs) + np.sum(up["hn"] * hn))
    if cn is not None:
        total += float(np.sum(up["cn"] * cn))
    return total


@st.composite
def cases(draw: Any, max_t: int = 6, max_n: int = 3, max_dh: int = 4) -> dict[str, Any]:
    T = draw(st.integers(0, max_t))
    N = draw(st.integers(0, max_n))
    D = draw(st.integers(1, max_dh))
    H = draw(st.integers(1, max_dh))
    use_lengths = draw(st.booleans())
    lengths = (np.array(draw(st.lists(st.integers(0, T), min_size=N, max_size=N)),
                        dtype=np.int64) if use_lengths else None)
    return {"T": T, "N": N, "D": D, "H": H, "lengths": lengths,
            "reverse": draw(st.booleans()), "bias": draw(st.booleans()),
            "seed": draw(st.integers(0, 2**31 - 1))}


def _big_case(reverse: bool) -> dict[str, Any]:
    """The largest case of the strategy, with every feature on (always run)."""
    return {"T": 6, "N": 3, "D": 4, "H": 4, "lengths": np.array([6, 2, 0]),
            "reverse": reverse, "bias": True, "seed": 1234}


def _input_names(v: Variant, inp: dict) -> list[str]:
    return [k for k in ("x", "h0", "c0") + PARAM_NAMES if inp[k] is not None]


def _assume_no_kinks(v: Variant, inp: dict, up: dict, case: dict) -> None:
    """ReLU is not differentiable at 0: keep every pre-activation 1e-4 away from it."""
    if v.family == "rnn" and v.nonlinearity == "relu":
        _, _, min_pre = reference(v, inp, up, case["lengths"], case["reverse"])
        assume(min_pre > 1e-4)


# --------------------------------------------------------------------------------------------
# finite differences
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("v", VARIANTS, ids=IDS)
@settings(max_examples=_examples(40), deadline=None)
@given(case=cases())
@example(case=_big_case(False))
@example(case=_big_case(True))
def test_sequence_gradients_match_finite_differences(v: Variant, case: dict) -> None:
    T, N, D, H = case["T"], case["N"], case["D"], case["H"]
    inp = make_inputs(v, T, N, D, H, case["seed"], case["bias"])
    up = make_upstream(v, T, N, H, case["seed"])
    _assume_no_kinks(v, inp, up, case)
    lengths, reverse = case["lengths"], case["reverse"]
    *_, cache = seq_forward(v, inp, lengths, reverse)
    analytic = seq_backward(v, up, cache)
    names = _input_names(v, inp)
    numeric = central_differences(lambda: scalar_loss(v, inp, up, lengths, reverse), inp, names)
    for name in names:
        assert analytic[name].shape == inp[name].shape, name
        assert analytic[name].dtype == inp[name].dtype, name
        np.testing.assert_allclose(analytic[name], numeric[name], rtol=1e-7, atol=1e-7,
                                   err_msg=f"{v} d{name}")
    for name in PARAM_NAMES:
        assert (analytic[name] is None) == (inp[name] is None), name


@pytest.mark.parametrize("v", VARIANTS, ids=IDS)
@settings(max_examples=_examples(20), deadline=None)
@given(case=cases(max_t=1))
def test_step_gradients_match_finite_differences(v: Variant, case: dict) -> None:
    N, D, H = case["N"], case["D"], case["H"]
    inp = make_inputs(v, 1, N, D, H, case["seed"], case["bias"])
    rng = np.random.default_rng(case["seed"] + 7)
    x_t = inp["x"][0].copy()
    inp["x"] = x_t
    dh = rng.standard_normal((N, H))
    dc = rng.standard_normal((N, H)) if v.has_cell else None
    h_t, c_t, cache = step_forward(v, x_t, inp["h0"], inp["c0"], inp)
    if v.family == "rnn" and v.nonlinearity == "relu":
        assume(cache.a_t.size == 0 or np.abs(cache.a_t).min() > 1e-4)
    analytic = step_backward(v, dh, dc, cache)

    def loss() -> float:
        h, c, _ = step_forward(v, inp["x"], inp["h0"], inp["c0"], inp)
        return float(np.sum(dh * h) + (np.sum(dc * c) if c is not None else 0.0))

    names = _input_names(v, inp)
    numeric = central_differences(loss, inp, names)
    for name in names:
        np.testing.assert_allclose(analytic[name], numeric[name], rtol=1e-7, atol=1e-7,
                                   err_msg=f"{v} step d{name}")


# --------------------------------------------------------------------------------------------
# fused sequence == loop of per-step functions on each sequence alone
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("v", VARIANTS, ids=IDS)
@settings(max_examples=_examples(50), deadline=None)
@given(case=cases(max_t=7, max_n=4, max_dh=5))
@example(case=_big_case(False))
@example(case=_big_case(True))
def test_sequence_equals_per_step_reference(v: Variant, case: dict) -> None:
    T, N, D, H = case["T"], case["N"], case["D"], case["H"]
    inp = make_inputs(v, T, N, D, H, case["seed"], case["bias"])
    up = make_upstream(v, T, N, H, case["seed"])
    lengths, reverse = case["lengths"], case["reverse"]
    hs, hn, cn, cache = seq_forward(v, inp, lengths, reverse)
    grads = seq_backward(v, up, cache)
    (r_hs, r_hn, r_cn), r_grads, _ = reference(v, inp, up, lengths, reverse)
    np.testing.assert_allclose(hs, r_hs, rtol=0, atol=1e-12)
    np.testing.assert_allclose(hn, r_hn, rtol=0, atol=1e-12)
    if v.has_cell:
        np.testing.assert_allclose(cn, r_cn, rtol=0, atol=1e-12)
    for name, ref in r_grads.items():
        if ref is None:
            assert grads[name] is None, name
        else:
            np.testing.assert_allclose(grads[name], ref, rtol=0, atol=1e-12,
                                       err_msg=f"{v} {name}")


@pytest.mark.parametrize("v", VARIANTS, ids=IDS)
def test_padding_changes_nothing(v: Variant) -> None:
    """Garbage in padded inputs and padded upstream gradients changes no output, final state
    or gradient; dx is 0 at padded steps."""
    T, N, D, H = 6, 4, 3, 5
    lengths = np.array([6, 3, 0, 1])
    for reverse in (False, True):
        inp = make_inputs(v, T, N, D, H, 11, True)
        up = make_upstream(v, T, N, H, 11)
        hs, hn, cn, cache = seq_forward(v, inp, lengths, reverse)
        grads = seq_backward(v, up, cache)
        pad = np.arange(T)[:, None] >= lengths[None, :]             # (T, N)
        inp2 = dict(inp, x=inp["x"].copy())
        inp2["x"][pad] = 1e3 * np.random.default_rng(0).standard_normal((int(pad.sum()), D))
        up2 = dict(up, hs=up["hs"].copy())
        up2["hs"][pad] = 7.0
        hs2, hn2, cn2, cache2 = seq_forward(v, inp2, lengths, reverse)
        grads2 = seq_backward(v, up2, cache2)
        assert np.all(hs[pad] == 0) and np.all(hs2[pad] == 0)
        np.testing.assert_allclose(hs2, hs, rtol=0, atol=1e-13)
        np.testing.assert_allclose(hn2, hn, rtol=0, atol=1e-13)
        if v.has_cell:
            np.testing.assert_allclose(cn2, cn, rtol=0, atol=1e-13)
        for name, g in grads.items():
            if g is not None:
                np.testing.assert_allclose(grads2[name], g, rtol=0, atol=1e-12, err_msg=name)
        assert np.all(grads["x"][pad] == 0)
        # a length-0 sequence keeps its initial state
        np.testing.assert_array_equal(hn[2], inp["h0"][2])


# --------------------------------------------------------------------------------------------
# float32
# --------------------------------------------------------------------------------------------
def _close_rel(a32: np.ndarray, a64: np.ndarray, tol: float, what: str) -> None:
    scale = max(1.0, float(np.abs(a64).max())) if a64.size else 1.0
    err = float(np.abs(a32.astype(np.float64) - a64).max()) if a64.size else 0.0
    assert err <= tol * scale, f"{what}: float32 differs from float64 by {err:.3g}"


@pytest.mark.parametrize("v", VARIANTS, ids=IDS)
@settings(max_examples=_examples(20), deadline=None)
@given(case=cases())
def test_float32_in_float32_out(v: Variant, case: dict) -> None:
    T, N, D, H = case["T"], case["N"], case["D"], case["H"]
    inp64 = make_inputs(v, T, N, D, H, case["seed"], case["bias"])
    up64 = make_upstream(v, T, N, H, case["seed"])
    inp32 = {k: (None if a is None else a.astype(np.float32)) for k, a in inp64.items()}
    up32 = {k: (None if a is None else a.astype(np.float32)) for k, a in up64.items()}
    lengths, reverse = case["lengths"], case["reverse"]
    out64 = seq_forward(v, inp64, lengths, reverse)
    out32 = seq_forward(v, inp32, lengths, reverse)
    g64 = seq_backward(v, up64, out64[-1])
    g32 = seq_backward(v, up32, out32[-1])
    for i, (a32, a64) in enumerate(zip(out32[:3], out64[:3])):
        if a64 is not None:
            assert a32.dtype == np.float32
            _close_rel(a32, a64, 1e-5, f"{v} output {i}")
    for name, a64 in g64.items():
        if a64 is not None:
            assert g32[name].dtype == np.float32, name
            _close_rel(g32[name], a64, 1e-5, f"{v} {name}")
    for field, a in out32[-1]._asdict().items():   # no float64 buffers in the cache
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            assert a.dtype == np.float32, field
    # the per-step pair keeps float32 too
    if T > 0:
        h_t, c_t, sc = step_forward(v, inp32["x"][0], inp32["h0"], inp32["c0"], inp32)
        sg = step_backward(v, up32["hn"], up32["cn"], sc)
        assert h_t.dtype == np.float32
        assert all(a.dtype == np.float32 for a in sg.values() if a is not None)


@pytest.mark.parametrize("v", VARIANTS, ids=IDS)
def test_float32_bias_gradients_stay_accurate_over_many_rows(v: Variant) -> None:
    """The bias gradients are sums over T*N rows (over N in a step). Summed row after row in
    float32 they were 10 to 100 times less accurate than the weight gradients (relative error
    about 1e-5 at 200,000 rows); summed pairwise, they stay below 1e-6."""
    T, N, D, H = 4, 50_000, 3, 4
    inp64 = make_inputs(v, T, N, D, H, seed=0, bias=True)
    up64 = make_upstream(v, T, N, H, seed=0)
    inp32 = {k: (None if a is None else a.astype(np.float32)) for k, a in inp64.items()}
    up32 = {k: (None if a is None else a.astype(np.float32)) for k, a in up64.items()}
    g64 = seq_backward(v, up64, seq_forward(v, inp64)[-1])
    g32 = seq_backward(v, up32, seq_forward(v, inp32)[-1])
    # one step over all T*N rows at once: the per-step pair's sum over N
    def f64(a: Any) -> Any:
        return None if a is None else a.astype(np.float64)
    x_rows = inp32["x"].reshape(T * N, D)
    h_rows = np.tile(inp32["h0"], (T, 1))
    c_rows = np.tile(inp32["c0"], (T, 1)) if v.has_cell else None
    dh_rows = up32["hs"].reshape(T * N, H)
    dc_rows = dh_rows if v.has_cell else None
    _, _, cache32 = step_forward(v, x_rows, h_rows, c_rows, inp32)
    _, _, cache64 = step_forward(v, f64(x_rows), f64(h_rows), f64(c_rows), inp64)
    s32 = step_backward(v, dh_rows, dc_rows, cache32)
    s64 = step_backward(v, f64(dh_rows), f64(dc_rows), cache64)
    for what, got, want in (("sequence", g32, g64), ("step", s32, s64)):
        for name in ("bias_ih", "bias_hh"):
            assert got[name].dtype == np.float32
            err = (np.linalg.norm(got[name].astype(np.float64) - want[name])
                   / np.linalg.norm(want[name]))
            assert err < 1e-6, f"{v} {what} {name}: relative error {err:.2e}"


# --------------------------------------------------------------------------------------------
# torch
# --------------------------------------------------------------------------------------------
def _torch_module(torch: Any, v: Variant, D: int, H: int, bias: bool, bidirectional: bool):
    kwargs = dict(bias=bias, bidirectional=bidirectional)
    if v.family == "rnn":
        m = torch.nn.RNN(D, H, nonlinearity=v.nonlinearity, **kwargs)
    elif v.family == "gru":
        m = torch.nn.GRU(D, H, **kwargs)
    else:
        m = torch.nn.LSTM(D, H, **kwargs)
    return m.double()


def _params_of(m: Any, suffix: str) -> dict[str, np.ndarray | None]:
    out: dict[str, np.ndarray | None] = {}
    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
        p = getattr(m, f"{name}_l0{suffix}", None)
        out[name] = None if p is None else p.detach().numpy().copy()
    out["weight_ch"] = None
    return out


TORCH_VARIANTS = [VARIANTS[0], VARIANTS[1], VARIANTS[2], VARIANTS[4]]


@pytest.mark.parametrize("v", TORCH_VARIANTS, ids=[str(v) for v in TORCH_VARIANTS])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("mode", ["plain", "bidirectional-packed"])
def test_matches_torch(v: Variant, bias: bool, mode: str) -> None:
    torch = pytest.importorskip("torch")
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    torch.manual_seed(0)
    T, N, D, H = 7, 4, 3, 5
    bidir = mode != "plain"
    m = _torch_module(torch, v, D, H, bias, bidir)
    nd = 2 if bidir else 1
    rng = np.random.default_rng(3)
    x = rng.standard_normal((T, N, D))
    h0 = 0.5 * rng.standard_normal((nd, N, H))
    c0 = rng.standard_normal((nd, N, H))
    up_out = rng.standard_normal((T, N, nd * H))
    up_hn = rng.standard_normal((nd, N, H))
    up_cn = rng.standard_normal((nd, N, H))
    lengths = np.array([7, 2, 5, 1]) if bidir else None

    xt = torch.tensor(x, requires_grad=True)
    h0t = torch.tensor(h0, requires_grad=True)
    c0t = torch.tensor(c0, requires_grad=True)
    state = (h0t, c0t) if v.has_cell else h0t
    if bidir:
        packed = pack_padded_sequence(xt, torch.tensor(lengths), enforce_sorted=False)
        out_p, st_n = m(packed, state)
        out, _ = pad_packed_sequence(out_p, total_length=T)
    else:
        out, st_n = m(xt, state)
    hn_t, cn_t = st_n if v.has_cell else (st_n, None)
    loss = (out * torch.tensor(up_out)).sum() + (hn_t * torch.tensor(up_hn)).sum()
    if v.has_cell:
        loss = loss + (cn_t * torch.tensor(up_cn)).sum()
    loss.backward()

    dx_total = np.zeros_like(x)
    for d, suffix in enumerate(["", "_reverse"][:nd]):
        inp = dict(_params_of(m, suffix), x=x, h0=h0[d], c0=c0[d] if v.has_cell else None)
        hs, hn, cn, cache = seq_forward(v, inp, lengths, reverse=(d == 1))
        np.testing.assert_allclose(hs, out.detach().numpy()[:, :, d * H:(d + 1) * H],
                                   rtol=0, atol=1e-10)
        np.testing.assert_allclose(hn, hn_t.detach().numpy()[d], rtol=0, atol=1e-10)
        if v.has_cell:
            np.testing.assert_allclose(cn, cn_t.detach().numpy()[d], rtol=0, atol=1e-10)
        up = {"hs": up_out[:, :, d * H:(d + 1) * H], "hn": up_hn[d],
              "cn": up_cn[d] if v.has_cell else None}
        g = seq_backward(v, up, cache)
        dx_total += g["x"]
        np.testing.assert_allclose(g["h0"], h0t.grad.numpy()[d], rtol=0, atol=1e-10)
        if v.has_cell:
            np.testing.assert_allclose(g["c0"], c0t.grad.numpy()[d], rtol=0, atol=1e-10)
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            p = getattr(m, f"{name}_l0{suffix}", None)
            if p is None:
                assert g[name] is None
            else:
                np.testing.assert_allclose(g[name], p.grad.numpy(), rtol=0, atol=1e-10,
                                           err_msg=f"{name}{suffix}")
    np.testing.assert_allclose(dx_total, xt.grad.numpy(), rtol=0, atol=1e-10)


@pytest.mark.parametrize("v", TORCH_VARIANTS, ids=[str(v) for v in TORCH_VARIANTS])
def test_dh_all_matches_torch_retain_grad(v: Variant) -> None:
    """dh_all[t] (and dc_all[t]) equal autograd's gradient of each state h_t (c_t)."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(1)
    T, N, D, H = 6, 3, 4, 5
    if v.family == "rnn":
        cell = torch.nn.RNNCell(D, H, nonlinearity=v.nonlinearity)
    elif v.family == "gru":
        cell = torch.nn.GRUCell(D, H)
    else:
        cell = torch.nn.LSTMCell(D, H)
    cell = cell.double()
    rng = np.random.default_rng(5)
    x = rng.standard_normal((T, N, D))
    h0 = 0.5 * rng.standard_normal((N, H))
    c0 = rng.standard_normal((N, H))
    up = {"hs": rng.standard_normal((T, N, H)), "hn": rng.standard_normal((N, H)),
          "cn": rng.standard_normal((N, H)) if v.has_cell else None}
    h = torch.tensor(h0)
    c = torch.tensor(c0)
    hs_t, cs_t = [], []
    for t in range(T):
        if v.has_cell:
            h, c = cell(torch.tensor(x[t]), (h, c))
            c.retain_grad()
            cs_t.append(c)
        else:
            h = cell(torch.tensor(x[t]), h)
        h.retain_grad()
        hs_t.append(h)
    loss = sum((hs_t[t] * torch.tensor(up["hs"][t])).sum() for t in range(T))
    loss = loss + (h * torch.tensor(up["hn"])).sum()
    if v.has_cell:
        loss = loss + (c * torch.tensor(up["cn"])).sum()
    loss.backward()

    inp = {name: getattr(cell, name).detach().numpy().copy()
           for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
    inp.update(x=x, h0=h0, c0=c0 if v.has_cell else None, weight_ch=None)
    *_, cache = seq_forward(v, inp)
    g = seq_backward(v, up, cache)
    for t in range(T):
        np.testing.assert_allclose(g["dh_all"][t], hs_t[t].grad.numpy(), rtol=0, atol=1e-10)
        if v.has_cell:
            np.testing.assert_allclose(g["dc_all"][t], cs_t[t].grad.numpy(), rtol=0,
                                       atol=1e-10)


# --------------------------------------------------------------------------------------------
# contract: no mutation, None upstream, empty sizes
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("v", VARIANTS, ids=IDS)
def test_inputs_and_upstream_never_mutated(v: Variant) -> None:
    T, N, D, H = 5, 3, 4, 3
    for lengths in (None, np.array([5, 2, 0])):
        for reverse in (False, True):
            inp = make_inputs(v, T, N, D, H, 2, True)
            up = make_upstream(v, T, N, H, 2)
            inp_copy = {k: (None if a is None else a.copy()) for k, a in inp.items()}
            up_copy = {k: (None if a is None else a.copy()) for k, a in up.items()}
            len_copy = None if lengths is None else lengths.copy()
            hs, hn, cn, cache = seq_forward(v, inp, lengths, reverse)
            g1 = seq_backward(v, up, cache)
            g2 = seq_backward(v, up, cache)             # backward twice: same answer
            h_t, c_t, sc = step_forward(v, inp["x"][0], inp["h0"], inp["c0"], inp)
            step_backward(v, up["hn"], up["cn"], sc)
            for k, a in inp.items():
                if a is not None:
                    np.testing.assert_array_equal(a, inp_copy[k], err_msg=k)
            for k, a in up.items():
                if a is not None:
                    np.testing.assert_array_equal(a, up_copy[k], err_msg=k)
            if lengths is not None:
                np.testing.assert_array_equal(lengths, len_copy)
            for k, a in g1.items():
                if a is not None:
                    np.testing.assert_array_equal(a, g2[k], err_msg=k)
            # outputs are fresh arrays, not views of the cache or of the inputs
            assert not np.shares_memory(hn, inp["h0"])
            assert g1["bias_ih"] is not g1["bias_hh"]


@pytest.mark.parametrize("v", VARIANTS, ids=IDS)
def test_none_upstream_means_zeros(v: Variant) -> None:
    T, N, D, H = 4, 2, 3, 3
    inp = make_inputs(v, T, N, D, H, 4, True)
    *_, cache = seq_forward(v, inp, np.array([4, 1]), True)
    zeros = {"hs": None, "hn": None, "cn": None}
    g = seq_backward(v, zeros, cache)
    for name, a in g.items():
        if a is not None:
            assert not np.any(a), name
    up = make_upstream(v, T, N, H, 4)
    only_hs = dict(up, hn=None, cn=None)
    explicit = dict(up, hn=np.zeros((N, H)), cn=np.zeros((N, H)) if v.has_cell else None)
    ga, gb = seq_backward(v, only_hs, cache), seq_backward(v, explicit, cache)
    for name, a in ga.items():
        if a is not None:
            np.testing.assert_array_equal(a, gb[name], err_msg=name)


@pytest.mark.parametrize("v", VARIANTS, ids=IDS)
@pytest.mark.parametrize("T,N", [(0, 3), (4, 0), (0, 0)])
def test_empty_time_or_batch(v: Variant, T: int, N: int) -> None:
    D, H = 3, 2
    inp = make_inputs(v, T, N, D, H, 0, True)
    up = make_upstream(v, T, N, H, 0)
    for lengths in (None, np.zeros(N, dtype=np.int64)):
        hs, hn, cn, cache = seq_forward(v, inp, lengths)
        assert hs.shape == (T, N, H)
        if T == 0 or lengths is not None:
            np.testing.assert_array_equal(hn, inp["h0"])
            assert not np.shares_memory(hn, inp["h0"])
        g = seq_backward(v, up, cache)
        assert g["x"].shape == (T, N, D)
        assert g["dh_all"].shape == (T, N, H)
        if T == 0:
            np.testing.assert_array_equal(g["h0"], up["hn"])
            for name in PARAM_NAMES:
                if g[name] is not None:
                    assert g[name].shape == inp[name].shape
                    assert not np.any(g[name])
        if N == 0:
            for name in PARAM_NAMES:
                if g[name] is not None:
                    assert not np.any(g[name])


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------
def _lstm_args(T: int = 7, N: int = 2, D: int = 3, H: int = 3) -> dict[str, Any]:
    return make_inputs(Variant("lstm"), T, N, D, H, 0, True)


def test_error_wrong_weight_ih_names_shapes() -> None:
    a = _lstm_args()
    bad = np.zeros((12, 5))
    msg = ("lstm_forward: weight_ih has shape (12, 5) but expected "
           "(4*hidden_size, input_size) = (12, 3) for x of shape (7, 2, 3)")
    with pytest.raises(ValueError, match=re.escape(msg)):
        lstm_forward(a["x"], a["h0"], a["c0"], bad, a["weight_hh"])


@pytest.mark.parametrize("v", VARIANTS, ids=IDS)
def test_errors_name_the_shapes(v: Variant) -> None:
    inp = make_inputs(v, 7, 2, 3, 3, 0, True)
    fname = {"rnn": "rnn_forward", "gru": "gru_forward", "lstm": "lstm_forward"}[v.family]

    def call(**changes: Any) -> None:
        seq_forward(v, dict(inp, **changes))

    with pytest.raises(ValueError, match=re.escape(f"{fname}: weight_hh has shape (5, 3)")):
        call(weight_hh=np.zeros((5, 3)))
    with pytest.raises(ValueError, match=re.escape(f"{fname}: h0 has shape (4, 3)") +
                       ".*" + re.escape("x of shape (7, 2, 3)")):
        call(h0=np.zeros((4, 3)))
    with pytest.raises(ValueError, match=re.escape(f"{fname}: bias_ih has shape (2,)")):
        call(bias_ih=np.zeros(2))
    with pytest.raises(ValueError, match=re.escape(f"{fname}: x must be 3-D")):
        call(x=np.zeros((2, 3)))
    with pytest.raises(TypeError, match="dtypes differ"):
        call(weight_ih=inp["weight_ih"].astype(np.float32))
    if v.has_cell:
        with pytest.raises(ValueError, match=re.escape(f"{fname}: c0 has shape (2, 4)")):
            call(c0=np.zeros((2, 4)))
        with pytest.raises(ValueError, match=re.escape(f"{fname}: weight_ch has shape (4,)")):
            call(weight_ch=np.zeros(4))
    *_, cache = seq_forward(v, inp)
    up = make_upstream(v, 7, 2, 3, 0)
    with pytest.raises(ValueError, match=re.escape("dhs has shape (7, 2, 4)")):
        seq_backward(v, dict(up, hs=np.zeros((7, 2, 4))), cache)


@pytest.mark.parametrize("v", VARIANTS, ids=IDS)
def test_lengths_are_validated(v: Variant) -> None:
    inp = make_inputs(v, 7, 2, 3, 3, 0, True)
    with pytest.raises(ValueError, match=r"lengths contains 8 .*T = 7"):
        seq_forward(v, inp, np.array([8, 1]))
    with pytest.raises(ValueError, match=r"lengths contains -1 .*T = 7"):
        seq_forward(v, inp, np.array([-1, 1]))
    with pytest.raises(ValueError, match=re.escape("lengths has shape (3,) but expected "
                                                   "(batch,) = (2,)")):
        seq_forward(v, inp, np.array([1, 1, 1]))
    with pytest.raises(ValueError, match="integer dtype"):
        seq_forward(v, inp, np.array([1.0, 2.0]))
    # a plain list of ints is accepted
    seq_forward(v, inp, [7, 3])


def test_bad_option_values() -> None:
    a = make_inputs(Variant("rnn"), 2, 1, 2, 2, 0, False)
    with pytest.raises(ValueError, match="nonlinearity"):
        rnn_forward(a["x"], a["h0"], a["weight_ih"], a["weight_hh"], nonlinearity="sigmoid")
    g = make_inputs(Variant("gru"), 2, 1, 2, 2, 0, False)
    with pytest.raises(ValueError, match="reset"):
        gru_forward(g["x"], g["h0"], g["weight_ih"], g["weight_hh"], reset="middle")


@pytest.mark.parametrize("family", ["rnn", "gru", "lstm"])
def test_input_grad_false_skips_only_dx(family: str) -> None:
    """input_grad=False returns dx=None and leaves every other gradient bit-identical."""
    from tinygrad_rnn import bptt

    rng = np.random.default_rng(3)
    T, N, D, H = 4, 2, 3, 5
    G = {"rnn": 1, "gru": 3, "lstm": 4}[family]
    x = rng.standard_normal((T, N, D))
    h0 = rng.standard_normal((N, H))
    w_ih = 0.5 * rng.standard_normal((G * H, D))
    w_hh = 0.5 * rng.standard_normal((G * H, H))
    b = 0.1 * rng.standard_normal(G * H)
    dhs = rng.standard_normal((T, N, H))
    if family == "lstm":
        hs, hn, cn, cache = bptt.lstm_forward(x, h0, h0.copy(), w_ih, w_hh, b, b)
        full = bptt.lstm_backward(dhs, None, None, cache)
        part = bptt.lstm_backward(dhs, None, None, cache, input_grad=False)
    else:
        fwd = getattr(bptt, f"{family}_forward")
        bwd = getattr(bptt, f"{family}_backward")
        hs, hn, cache = fwd(x, h0, w_ih, w_hh, b, b)
        full = bwd(dhs, None, cache)
        part = bwd(dhs, None, cache, input_grad=False)
    assert part.dx is None and full.dx.shape == x.shape
    for name in full._fields:
        if name != "dx" and getattr(full, name) is not None:
            np.testing.assert_array_equal(getattr(part, name), getattr(full, name))
