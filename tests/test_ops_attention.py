"""The attention forward/backward pair on raw arrays (tinygrad_rnn/ops/attention.py), the
(A*) equations of docs/attention.md written out:

* the whole pass equals the autograd path of ``nn.Attention`` (float64, 1e-12): context,
  weights and every gradient, for every score and mask, with an upstream gradient on the
  weights too;
* each pair is checked by float64 central differences on shapes, masks and values drawn by
  hypothesis (``test_attention_pair_matches_finite_differences``);
* the masked softmax's VJP (A9) is J^T g with the explicit Jacobian (A8), and a fully masked
  row gives exact zeros (A10); the score rules (A4)-(A7) each against autograd on their own.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn import nn
from tinygrad_rnn.ops import attention as am
from module_helpers import central_differences

SCORES = am.SCORES
TOL = dict(rtol=1e-12, atol=1e-12)


def _module(score: str, dq: int, dk: int, seed: int) -> nn.Attention:
    return nn.Attention(score, dq, dk, hidden_size=3 if score == "additive" else None,
                        dtype=np.float64, generator=seed)


def _params(att: nn.Attention) -> am.ScoreParams:
    if att.score == "bilinear":
        return am.ScoreParams(weight=att.weight.numpy().copy())
    if att.score == "additive":
        return am.ScoreParams(w_q=att.query_proj.weight.numpy().copy(),
                              b=att.query_proj.bias.numpy().copy(),
                              w_k=att.key_proj.weight.numpy().copy(), v=att.v.numpy().copy())
    return am.ScoreParams()


def _problem(score: str, seed: int, n: int = 2, tq: int = 3, tk: int = 4,
             fully_masked: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    d = 3
    dq, dk = (d, d) if score in ("dot", "scaled_dot") else (2, 3)
    keep = rng.random((n, tq, tk)) < 0.7
    if fully_masked:
        keep[0, 1] = False                                  # one row keeps no key: (A10)
    return {"q": rng.normal(size=(n, tq, dq)), "k": rng.normal(size=(n, tk, dk)),
            "values": rng.normal(size=(n, tk, 2)), "keep": keep,
            "dc": rng.normal(size=(n, tq, 2)), "dalpha": rng.normal(size=(n, tq, tk)),
            "dq": dq, "dk": dk}


# ----------------------------------------------------------------------- equal to autograd
@pytest.mark.parametrize("score", SCORES)
@pytest.mark.parametrize("masked", [False, True])
def test_attention_pair_equals_the_autograd_path(score: str, masked: bool) -> None:
    p = _problem(score, seed=SCORES.index(score), fully_masked=masked)
    keep = p["keep"] if masked else None
    att = _module(score, p["dq"], p["dk"], seed=1)
    q, k, values = (tr.Tensor(p[name], requires_grad=True) for name in ("q", "k", "values"))
    context, weights = att(q, k, values, attn_mask=None if keep is None else ~keep)
    loss = (context * tr.Tensor(p["dc"])).sum() + (weights * tr.Tensor(p["dalpha"])).sum()
    loss.backward()

    params = _params(att)
    c, alpha, cache = am.attention_forward(p["q"], p["k"], p["values"], score, params, keep)
    g = am.attention_backward(p["dc"], cache, dalpha=p["dalpha"])
    np.testing.assert_allclose(c, context.numpy(), **TOL)
    np.testing.assert_allclose(alpha, weights.numpy(), **TOL)
    np.testing.assert_allclose(g.dq, q.grad.numpy(), **TOL)
    np.testing.assert_allclose(g.dk, k.grad.numpy(), **TOL)
    np.testing.assert_allclose(g.dvalues, values.grad.numpy(), **TOL)
    autograd = {"dweight": "weight", "dw_q": "query_proj.weight", "db": "query_proj.bias",
                "dw_k": "key_proj.weight", "dv": "v"}
    named = dict(att.named_parameters())
    for field, name in autograd.items():
        ours = getattr(g, field)
        assert (ours is None) == (name not in named), field
        if ours is not None:
            np.testing.assert_allclose(ours, named[name].grad.numpy(), **TOL, err_msg=field)
    if masked:                                              # (A10): the empty row is 0
        assert np.all(alpha[0, 1] == 0.0) and np.all(c[0, 1] == 0.0)


# ------------------------------------------------------------------ finite differences
def _loss(score: str, arrays: dict, keep: Any, up: dict) -> float:
    params = am.ScoreParams(**{name: arrays[name] for name in am.ScoreParams._fields
                               if name in arrays})
    c, alpha, _ = am.attention_forward(arrays["q"], arrays["k"], arrays["values"], score,
                                       params, keep)
    return float(np.sum(up["dc"] * c) + np.sum(up["dalpha"] * alpha))


@given(score=st.sampled_from(SCORES), n=st.integers(1, 2), tq=st.integers(1, 3),
       tk=st.integers(1, 3), seed=st.integers(0, 2**32 - 1))
def test_attention_pair_matches_finite_differences(score: str, n: int, tq: int, tk: int,
                                                   seed: int) -> None:
    """float64 central differences (eps 1e-6) of L = <dC, C> + <dalpha, alpha> w.r.t. every
    input and parameter, random masks (fully masked rows included), against
    attention_backward: (A4)-(A7), (A9) and (A11) together."""
    rng = np.random.default_rng(seed)
    dq, dk, h = (3, 3, 2) if score in ("dot", "scaled_dot") else (2, 3, 2)
    arrays = {"q": rng.normal(size=(n, tq, dq)), "k": rng.normal(size=(n, tk, dk)),
              "values": rng.normal(size=(n, tk, 2))}
    if score == "bilinear":
        arrays["weight"] = rng.normal(size=(dq, dk))
    if score == "additive":
        arrays.update(w_q=0.5 * rng.normal(size=(h, dq)), b=0.5 * rng.normal(size=h),
                      w_k=0.5 * rng.normal(size=(h, dk)), v=rng.normal(size=h))
    keep = rng.random((n, tq, tk)) < 0.7
    up = {"dc": rng.normal(size=(n, tq, 2)), "dalpha": rng.normal(size=(n, tq, tk))}
    numeric = central_differences(lambda: _loss(score, arrays, keep, up), arrays)

    params = am.ScoreParams(**{f: arrays[f] for f in am.ScoreParams._fields if f in arrays})
    _, _, cache = am.attention_forward(arrays["q"], arrays["k"], arrays["values"], score,
                                       params, keep)
    g = am.attention_backward(up["dc"], cache, dalpha=up["dalpha"])
    analytic = {"q": g.dq, "k": g.dk, "values": g.dvalues, "weight": g.dweight,
                "w_q": g.dw_q, "b": g.db, "w_k": g.dw_k, "v": g.dv}
    for name, want in numeric.items():
        np.testing.assert_allclose(analytic[name], want, rtol=1e-6, atol=1e-8, err_msg=name)


# --------------------------------------------------------------------- the pieces alone
@given(tk=st.integers(1, 5), seed=st.integers(0, 2**32 - 1))
def test_masked_softmax_vjp_is_the_explicit_jacobian_A8(tk: int, seed: int) -> None:
    """(A9) equals J^T g with J = diag(alpha) - alpha alpha^T (A8), masked rows included."""
    rng = np.random.default_rng(seed)
    s, g = rng.normal(size=(3, tk)), rng.normal(size=(3, tk))
    keep = rng.random((3, tk)) < 0.6
    keep[2] = False
    alpha = am.masked_softmax_forward(s, keep)
    ds = am.masked_softmax_backward(g, alpha)
    for row in range(3):
        J = np.diag(alpha[row]) - np.outer(alpha[row], alpha[row])      # (A8)
        np.testing.assert_allclose(ds[row], J.T @ g[row], rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(alpha.sum(axis=-1)[keep.any(axis=-1)], 1.0, rtol=1e-14)
    assert np.all(alpha[~keep] == 0.0) and np.all(ds[~keep] == 0.0)     # exact zeros (A10)


def test_masked_scores_may_hold_inf_and_nan() -> None:
    """A masked score is never read: inf and NaN there give the same weights as 0 (A2)."""
    s = np.array([[1.0, np.nan, 2.0, np.inf], [np.nan, np.nan, np.nan, np.nan]])
    keep = np.array([[True, False, True, False], [False] * 4])
    clean = np.where(keep, s, 0.0)
    np.testing.assert_array_equal(am.masked_softmax_forward(s, keep),
                                  am.masked_softmax_forward(clean, keep))
    assert np.all(am.masked_softmax_forward(s, keep)[1] == 0.0)


@pytest.mark.parametrize("score", SCORES)
def test_each_score_rule_equals_autograd_of_its_forward(score: str) -> None:
    """The score rules (A4), (A5), (A6), (A7) alone: for G = dL/dS, the backward of each
    *_scores_backward equals autograd through nn.attention's score function."""
    p = _problem(score, seed=7)
    att = _module(score, p["dq"], p["dk"], seed=2)
    G = np.random.default_rng(8).normal(size=(2, 3, 4))
    q, k = tr.Tensor(p["q"], requires_grad=True), tr.Tensor(p["k"], requires_grad=True)
    (att.scores(q, k) * tr.Tensor(G)).sum().backward()
    params = _params(att)
    if score == "dot":
        dq, dk = am.dot_scores_backward(G, p["q"], p["k"])
    elif score == "scaled_dot":
        dq, dk = am.scaled_dot_scores_backward(G, p["q"], p["k"])
    elif score == "bilinear":
        dq, dk, dweight = am.bilinear_scores_backward(G, p["q"], p["k"], params.weight)
        np.testing.assert_allclose(dweight, att.weight.grad.numpy(), **TOL)
    else:
        s, cache = am.additive_scores_forward(p["q"], p["k"], *params[1:])
        np.testing.assert_allclose(s, att.scores(q, k).numpy(), **TOL)
        dq, dk, dw_q, db, dw_k, dv = am.additive_scores_backward(G, cache)
        np.testing.assert_allclose(dv, att.v.grad.numpy(), **TOL)
        np.testing.assert_allclose(db, att.query_proj.bias.grad.numpy(), **TOL)
        np.testing.assert_allclose(dw_q, att.query_proj.weight.grad.numpy(), **TOL)
        np.testing.assert_allclose(dw_k, att.key_proj.weight.grad.numpy(), **TOL)
    np.testing.assert_allclose(dq, q.grad.numpy(), **TOL)
    np.testing.assert_allclose(dk, k.grad.numpy(), **TOL)


def test_unbatched_arrays_and_float32_stay_in_their_dtype() -> None:
    """No batch axis works (parameter sums over none); float32 in, float32 out."""
    rng = np.random.default_rng(3)
    q, k, values = (rng.normal(size=shape).astype(np.float32)
                    for shape in ((2, 3), (4, 3), (4, 2)))
    c, alpha, cache = am.attention_forward(q, k, values, "scaled_dot")
    g = am.attention_backward(np.ones_like(c), cache)
    assert c.dtype == alpha.dtype == g.dq.dtype == g.dk.dtype == g.dvalues.dtype == np.float32
    assert c.shape == (2, 2) and g.dq.shape == q.shape and g.dk.shape == k.shape


def test_missing_parameters_and_unknown_scores_are_named() -> None:
    q = np.zeros((1, 2, 3))
    with pytest.raises(ValueError, match="score must be one of"):
        am.attention_forward(q, q, q, "cosine")
    with pytest.raises(ValueError, match="'additive' needs ScoreParams w_q, w_k, v"):
        am.attention_forward(q, q, q, "additive")
