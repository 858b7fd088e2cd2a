"""Attention, MultiheadAttention and CausalSelfAttention (tinygrad_rnn/nn/attention.py).

* float64 ``tr.gradcheck`` of every score ('dot', 'scaled_dot', 'bilinear', 'additive') with
  no mask, a padding mask, a causal mask, both, a boolean attn_mask and fully masked rows,
  w.r.t. query, keys, values and every parameter (full mode on tiny shapes, directional on
  random shapes and masks drawn by hypothesis); the same for MultiheadAttention and
  CausalSelfAttention;
* masks: masked pairs get weight exactly 0, weights sum to 1 over the kept keys, a fully
  masked row gives exactly zero weights, context and gradients and no NaN even when the padded
  keys and values hold inf and NaN; padding equals dropping the padded keys; causal equals the
  explicit lower-triangular mask; the future never reaches the past;
* values: every score against a hand NumPy reference, the single-query (decoder) form against
  a sequence of one query;
* contract: float32 stays float32 and matches float64; an input of another dtype than the
  parameters (or, without parameters, than the query) is refused; inputs are never mutated;
  errors name the shapes involved;
* the docstring examples and docs/attention.md: the examples and the page's code block run,
  and the page's references name existing code and tests.
"""
from __future__ import annotations

import doctest
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn import nn

from tinygrad_rnn.testing import check_module

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "attention.md"
SCORES = ("dot", "scaled_dot", "bilinear", "additive")
MASK_CASES = ("none", "padding", "causal", "padding+causal", "attn_mask", "fully_masked")


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
class Called:
    """``call(module, *inputs)`` as a module-like object for ``tr.testing.check_module``
    (which checks the inputs and every parameter, on a float64 copy of the module): binds
    the masks and keyword arguments of an attention call."""

    def __init__(self, module: nn.Module, call: Any) -> None:
        self.module, self.call = module, call

    def named_parameters(self) -> Any:
        return self.module.named_parameters()

    def __call__(self, *inputs: Any) -> Any:
        return self.call(self.module, *inputs)


def make_attention(score: str, dq: int, dk: int, dtype: Any = np.float64,
                   seed: int = 0) -> nn.Attention:
    if score in ("dot", "scaled_dot"):
        dk = dq
    return nn.Attention(score, dq, dk, dtype=dtype, generator=seed)


def make_masks(case: str, n: int, tq: int, tk: int) -> dict:
    """Keyword masks for Attention.forward, in torch's conventions (True = padding /
    not allowed). Every case keeps at least one key for batch item 0, row 0."""
    kpm = np.zeros((n, tk), dtype=bool)
    if case == "none":
        return {}
    if case == "padding":
        kpm[0, tk - 1] = True                   # batch 0 has one padded key
        return {"key_padding_mask": kpm}
    if case == "causal":
        return {"causal": True}
    if case == "padding+causal":
        kpm[n - 1, 0] = True                    # with causal: row 0 of the last item is empty
        return {"key_padding_mask": kpm, "causal": True}
    if case == "attn_mask":
        am = np.zeros((tq, tk), dtype=bool)
        am[0, 1:] = True                        # row 0 sees key 0 only
        am[tq - 1, :] = True                    # the last row sees nothing
        return {"attn_mask": am}
    if case == "fully_masked":
        kpm[n - 1, :] = True                    # every key of the last item is padding
        return {"key_padding_mask": kpm}
    raise ValueError(case)


def keep_of(masks: dict, n: int, tq: int, tk: int) -> np.ndarray:
    """The keep mask (True = takes part) the masks describe, by hand."""
    keep = np.ones((n, tq, tk), dtype=bool)
    if "key_padding_mask" in masks:
        keep &= ~masks["key_padding_mask"][:, None, :]
    if "attn_mask" in masks:
        keep &= ~masks["attn_mask"]
    if masks.get("causal"):
        keep &= np.arange(tk)[None, :] <= np.arange(tq)[:, None]
    return keep


def numpy_attention(score: str, att: nn.Attention, q: np.ndarray, k: np.ndarray,
                    v: np.ndarray, keep: np.ndarray) -> tuple:
    """Hand NumPy reference: scores, masked softmax by loops over rows, weighted sum."""
    if score == "dot":
        s = np.einsum("nid,njd->nij", q, k)
    elif score == "scaled_dot":
        s = np.einsum("nid,njd->nij", q, k) / math.sqrt(q.shape[-1])
    elif score == "bilinear":
        s = np.einsum("nid,de,nje->nij", q, att.weight.numpy(), k)
    else:
        wq, wk = att.query_proj.weight.numpy(), att.key_proj.weight.numpy()
        b, vv = att.query_proj.bias.numpy(), att.v.numpy()
        n, tq, tk = q.shape[0], q.shape[1], k.shape[1]
        s = np.zeros((n, tq, tk))
        for a in range(n):
            for i in range(tq):
                for j in range(tk):
                    s[a, i, j] = vv @ np.tanh(wq @ q[a, i] + b + wk @ k[a, j])
    w = np.zeros_like(s)
    for a in range(s.shape[0]):
        for i in range(s.shape[1]):
            kept = keep[a, i]
            if kept.any():
                e = np.exp(s[a, i, kept] - s[a, i, kept].max())
                w[a, i, kept] = e / e.sum()
    return np.einsum("nij,njd->nid", w, v), w


def inputs(n: int, tq: int, tk: int, dq: int, dk: int, dv: int, seed: int,
           dtype: Any = np.float64) -> tuple:
    rng = np.random.default_rng(seed)
    q = rng.uniform(-1, 1, (n, tq, dq)).astype(dtype)
    k = rng.uniform(-1, 1, (n, tk, dk)).astype(dtype)
    v = rng.uniform(-1, 1, (n, tk, dv)).astype(dtype)
    return q, k, v


def leaves(*arrays: np.ndarray) -> list:
    return [tr.Tensor(a.copy(), requires_grad=True) for a in arrays]


# --------------------------------------------------------------------------------------------
# gradients of Attention
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", MASK_CASES)
@pytest.mark.parametrize("score", SCORES)
def test_attention_gradcheck_full(score: str, case: str) -> None:
    """Full-Jacobian gradcheck w.r.t. query, keys, values and every parameter."""
    n, tq, tk, dq, dk, dv = 2, 3, 4, 3, 2, 2
    att = make_attention(score, dq, dk)
    q, k, v = inputs(n, tq, tk, dq, att.key_size, dv, seed=1)
    masks = make_masks(case, n, tq, tk)
    check_module(Called(att, lambda m, a, b, c: m(a, b, c, **masks)), *leaves(q, k, v),
                 mode="full")


@given(score=st.sampled_from(SCORES), n=st.integers(1, 3), tq=st.integers(1, 5),
       tk=st.integers(1, 6), dq=st.integers(1, 4), dk=st.integers(1, 4), dv=st.integers(1, 3),
       seed=st.integers(0, 2 ** 16), pad_p=st.sampled_from([0.0, 0.3, 0.7, 1.0]),
       causal=st.booleans(), blocked_p=st.sampled_from([0.0, 0.3]))
@example(score="additive", n=2, tq=4, tk=4, dq=3, dk=2, dv=2, seed=0, pad_p=1.0, causal=True,
         blocked_p=0.3)
def test_attention_gradcheck_directional_random_masks(score, n, tq, tk, dq, dk, dv, seed,
                                                      pad_p, causal, blocked_p) -> None:
    """Directional gradcheck on random shapes and random padding/attn/causal masks
    (fully masked rows included whenever the draws make them)."""
    rng = np.random.default_rng(seed)
    att = make_attention(score, dq, dk, seed=seed)
    q, k, v = inputs(n, tq, tk, dq, att.key_size, dv, seed)
    masks: dict = {"causal": causal}
    if pad_p:
        masks["key_padding_mask"] = rng.random((n, tk)) < pad_p
    if blocked_p:
        masks["attn_mask"] = rng.random((tq, tk)) < blocked_p
    check_module(Called(att, lambda m, a, b, c: m(a, b, c, **masks)), *leaves(q, k, v),
                 mode="directional", n_directions=4)


@pytest.mark.parametrize("score", SCORES)
def test_attention_gradcheck_single_query(score: str) -> None:
    """The decoder form: one query (N, Dq) per sequence, with a padding mask."""
    att = make_attention(score, 3, 2)
    rng = np.random.default_rng(4)
    q = rng.uniform(-1, 1, (2, 3))
    _, k, v = inputs(2, 1, 4, 3, att.key_size, 2, seed=4)
    kpm = np.array([[False, False, True, True], [False, False, False, False]])
    check_module(Called(att, lambda m, a, b, c: m(a, b, c, key_padding_mask=kpm)),
                 *leaves(q, k, v), mode="full")


# --------------------------------------------------------------------------------------------
# masks
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("score", SCORES)
def test_fully_masked_rows_are_exactly_zero_even_with_nan_keys(score: str) -> None:
    """Padded keys and values hold inf and NaN; the fully masked rows (every key of item 1
    padded, and query row 2 blocked by attn_mask) give exactly zero weights, context and
    gradients; nothing anywhere is NaN; padded keys and values get exactly zero gradient."""
    n, tq, tk = 2, 3, 4
    att = make_attention(score, 3, 2)
    q, k, v = inputs(n, tq, tk, 3, att.key_size, 2, seed=2)
    kpm = np.array([[False, False, True, True], [True, True, True, True]])
    am = np.zeros((tq, tk), dtype=bool)
    am[2] = True
    k[kpm] = np.array([np.nan, np.inf, -np.inf, np.nan])[: att.key_size]
    k[0, 3] = np.inf
    v[kpm] = np.nan
    v[1, 0] = np.inf
    Q, K, V = leaves(q, k, v)
    with np.errstate(all="raise"):                      # no invalid/overflow warning either
        context, weights = att(Q, K, V, key_padding_mask=kpm, attn_mask=am)
        rng = np.random.default_rng(0)
        (context * tr.Tensor(rng.standard_normal(context.shape))).sum().backward(
            retain_graph=True)
        (weights * tr.Tensor(rng.standard_normal(weights.shape))).sum().backward()
    c, w = context.numpy(), weights.numpy()
    assert np.isfinite(c).all() and np.isfinite(w).all()
    empty = np.zeros((n, tq), dtype=bool)
    empty[1, :] = True
    empty[:, 2] = True
    assert np.array_equal(w[empty], np.zeros_like(w[empty]))
    assert np.array_equal(c[empty], np.zeros_like(c[empty]))
    assert np.array_equal(Q.grad[empty], np.zeros_like(Q.grad[empty]))
    assert np.array_equal(K.grad[kpm], np.zeros_like(K.grad[kpm]))
    assert np.array_equal(V.grad[kpm], np.zeros_like(V.grad[kpm]))
    for g in [Q.grad, K.grad, V.grad] + [p.grad for p in att.parameters()]:
        assert g is not None and np.isfinite(g).all()
    assert np.abs(Q.grad[0, :2]).max() > 0                      # the kept rows do learn
    np.testing.assert_allclose(w[0, :2].sum(-1), 1.0, rtol=1e-14)


@given(score=st.sampled_from(SCORES), seed=st.integers(0, 2 ** 16), n=st.integers(1, 3),
       tq=st.integers(1, 5), tk=st.integers(1, 6), causal=st.booleans())
def test_weights_sum_to_one_over_kept_keys(score, seed, n, tq, tk, causal) -> None:
    rng = np.random.default_rng(seed)
    att = make_attention(score, 3, 2, seed=seed)
    q, k, v = inputs(n, tq, tk, 3, att.key_size, 2, seed)
    masks = {"key_padding_mask": rng.random((n, tk)) < 0.4,
             "attn_mask": rng.random((tq, tk)) < 0.2, "causal": causal}
    _, w = att(tr.Tensor(q), tr.Tensor(k), tr.Tensor(v), **masks)
    keep = keep_of(masks, n, tq, tk)
    w = w.numpy()
    assert np.array_equal(w[~keep], np.zeros_like(w[~keep]))       # masked: exactly 0
    assert (w[keep] > 0).all()
    sums = w.sum(-1)
    rows = keep.any(-1)
    np.testing.assert_allclose(sums[rows], 1.0, rtol=1e-14)
    assert np.array_equal(sums[~rows], np.zeros_like(sums[~rows]))


@pytest.mark.parametrize("score", SCORES)
def test_padding_equals_dropping_the_padded_keys(score: str) -> None:
    """Attending over keys padded at the end (with the padding masked) gives the context,
    the weights of the kept keys and the gradients of a batch of the unpadded keys alone."""
    att = make_attention(score, 3, 2)
    q, k, v = inputs(1, 3, 5, 3, att.key_size, 2, seed=3)
    kpm = np.array([[False, False, False, True, True]])
    Q1, K1, V1 = leaves(q, k, v)
    c1, w1 = att(Q1, K1, V1, key_padding_mask=kpm)
    Q2, K2, V2 = leaves(q, k[:, :3], v[:, :3])
    c2, w2 = att(Q2, K2, V2)
    np.testing.assert_allclose(c1.numpy(), c2.numpy(), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(w1.numpy()[..., :3], w2.numpy(), rtol=1e-13, atol=1e-15)
    c1.sum().backward()
    c2.sum().backward()
    np.testing.assert_allclose(Q1.grad, Q2.grad, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(K1.grad[:, :3], K2.grad, rtol=1e-12, atol=1e-14)
    assert np.array_equal(K1.grad[:, 3:], np.zeros((1, 2, att.key_size)))


@pytest.mark.parametrize("score", SCORES)
def test_causal_equals_the_explicit_mask_and_hides_the_future(score: str) -> None:
    att = make_attention(score, 3, 2)
    tq = tk = 4
    q, k, v = inputs(2, tq, tk, 3, att.key_size, 2, seed=5)
    upper = np.triu(np.ones((tq, tk), dtype=bool), 1)           # True = not allowed
    c1, w1 = att(tr.Tensor(q), tr.Tensor(k), tr.Tensor(v), causal=True)
    c2, w2 = att(tr.Tensor(q), tr.Tensor(k), tr.Tensor(v), attn_mask=upper)
    assert np.array_equal(c1.numpy(), c2.numpy()) and np.array_equal(w1.numpy(), w2.numpy())
    assert np.array_equal(w1.numpy()[:, upper], np.zeros((2, int(upper.sum()))))
    # the context at step t has exactly zero gradient w.r.t. keys and values after t
    K, V = leaves(k, v)
    c, _ = att(tr.Tensor(q), K, V, causal=True)
    c[:, 1].sum().backward()
    assert np.array_equal(K.grad[:, 2:], np.zeros_like(K.grad[:, 2:]))
    assert np.array_equal(V.grad[:, 2:], np.zeros_like(V.grad[:, 2:]))
    assert np.abs(V.grad[:, :2]).min() > 0


def test_causal_is_top_left_aligned_when_lengths_differ() -> None:
    """As torch: with Tq != Tk query i sees keys j <= i."""
    att = nn.Attention("dot", 2, 2, dtype=np.float64)
    q, k, v = inputs(1, 2, 4, 2, 2, 1, seed=6)
    _, w = att(tr.Tensor(q), tr.Tensor(k), tr.Tensor(v), causal=True)
    assert np.array_equal(w.numpy()[0] > 0, np.array([[1, 0, 0, 0], [1, 1, 0, 0]], bool))


def test_float_attn_mask_is_added_and_minus_inf_blocks() -> None:
    att = nn.Attention("scaled_dot", 3, 3, dtype=np.float64)
    q, k, v = inputs(2, 2, 3, 3, 3, 2, seed=7)
    bias = np.array([[0.5, -np.inf, 0.0], [-np.inf, -np.inf, -np.inf]])
    c, w = att(tr.Tensor(q), tr.Tensor(k), tr.Tensor(v), attn_mask=bias)
    s = np.einsum("nid,njd->nij", q, k) / math.sqrt(3) + np.where(np.isinf(bias), 0, bias)
    keep = np.broadcast_to(~np.isinf(bias), s.shape)
    e = np.where(keep, np.exp(s - np.where(keep, s, -np.inf).max(-1, keepdims=True)), 0)
    sums = e.sum(-1, keepdims=True)
    expected = np.where(sums > 0, e / np.where(sums > 0, sums, 1), 0)
    np.testing.assert_allclose(w.numpy(), expected, rtol=1e-13, atol=0)
    assert np.array_equal(c.numpy()[:, 1], np.zeros((2, 2)))


# --------------------------------------------------------------------------------------------
# values
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", MASK_CASES)
@pytest.mark.parametrize("score", SCORES)
def test_attention_matches_numpy_reference(score: str, case: str) -> None:
    n, tq, tk = 2, 3, 4
    att = make_attention(score, 3, 2, seed=8)
    q, k, v = inputs(n, tq, tk, 3, att.key_size, 2, seed=8)
    masks = make_masks(case, n, tq, tk)
    c, w = att(tr.Tensor(q), tr.Tensor(k), tr.Tensor(v), **masks)
    c_ref, w_ref = numpy_attention(score, att, q, k, v, keep_of(masks, n, tq, tk))
    np.testing.assert_allclose(w.numpy(), w_ref, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(c.numpy(), c_ref, rtol=1e-13, atol=1e-15)


@given(seed=st.integers(0, 2 ** 16), n=st.integers(1, 3), tq=st.integers(1, 5),
       tk=st.integers(1, 6), d=st.integers(1, 6), dv=st.integers(1, 4))
def test_scaled_dot_matches_hand_numpy(seed, n, tq, tk, d, dv) -> None:
    """'scaled_dot' against softmax(Q K^T / sqrt(d)) V written in NumPy, with a random
    padding mask, at random shapes."""
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal(s) for s in ((n, tq, d), (n, tk, d), (n, tk, dv)))
    kpm = rng.random((n, tk)) < 0.3
    att = nn.Attention("scaled_dot", d, d, value_size=dv, dtype=np.float64)
    c, w = att(tr.Tensor(q), tr.Tensor(k), tr.Tensor(v), key_padding_mask=kpm)
    s = q @ k.transpose(0, 2, 1) / np.sqrt(d)
    s = np.where(kpm[:, None, :], -np.inf, s)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    total = e.sum(-1, keepdims=True)
    w_ref = e / np.where(total > 0, total, 1)
    np.testing.assert_allclose(w.numpy(), w_ref, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(c.numpy(), w_ref @ v, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("score", SCORES)
def test_single_query_equals_a_sequence_of_one(score: str) -> None:
    att = make_attention(score, 3, 2)
    q, k, v = inputs(2, 1, 4, 3, att.key_size, 2, seed=9)
    kpm = np.array([[False, True, False, False], [False, False, False, True]])
    Q1, K1 = leaves(q[:, 0], k)
    c1, w1 = att(Q1, K1, tr.Tensor(v), key_padding_mask=kpm)
    Q2, K2 = leaves(q, k)
    c2, w2 = att(Q2, K2, tr.Tensor(v), key_padding_mask=kpm)
    assert c1.shape == (2, 2) and w1.shape == (2, 4)
    assert np.array_equal(c1.numpy(), c2.numpy()[:, 0])
    assert np.array_equal(w1.numpy(), w2.numpy()[:, 0])
    c1.sum().backward()
    c2.sum().backward()
    assert np.array_equal(Q1.grad, Q2.grad[:, 0]) and np.array_equal(K1.grad, K2.grad)


def test_scores_scale_and_parameter_layout() -> None:
    """'scaled_dot' is 'dot' divided by sqrt(d); parameter names and shapes per score."""
    q, k, v = inputs(1, 2, 3, 4, 4, 2, seed=10)
    att = nn.Attention("scaled_dot", 4, 4)
    np.testing.assert_allclose(att.scores(tr.Tensor(q), tr.Tensor(k)).numpy(),
                               nn.Attention("dot", 4, 4).scores(tr.Tensor(q),
                                                                tr.Tensor(k)).numpy() / 2,
                               rtol=1e-14)
    assert list(nn.Attention("dot", 4, 4).state_dict()) == []
    assert {k: v.shape for k, v in nn.Attention("bilinear", 4, 3).state_dict().items()} == {
        "weight": (4, 3)}
    shapes = {k: v.shape for k, v in
              nn.Attention("additive", 4, 3, hidden_size=5).state_dict().items()}
    assert shapes == {"query_proj.weight": (5, 4), "query_proj.bias": (5,),
                      "key_proj.weight": (5, 3), "v": (5,)}
    no_bias = nn.Attention("additive", 4, 3, bias=False)
    # as in torch, a module's own parameters come before its sub-modules'
    assert [k for k, _ in no_bias.named_parameters()] == [
        "v", "query_proj.weight", "key_proj.weight"]


# --------------------------------------------------------------------------------------------
# dtype, contract, errors
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("score", SCORES)
def test_float32_stays_float32_and_matches_float64(score: str) -> None:
    att64 = make_attention(score, 3, 2, dtype=np.float64, seed=11)
    att32 = make_attention(score, 3, 2, dtype=np.float32, seed=11)
    att32.load_state_dict(att64.state_dict())
    q, k, v = inputs(2, 3, 4, 3, att64.key_size, 2, seed=11)
    masks = make_masks("padding+causal", 2, 3, 4)
    results = {}
    for dtype, att in ((np.float64, att64), (np.float32, att32)):
        Q, K, V = leaves(q.astype(dtype), k.astype(dtype), v.astype(dtype))
        c, w = att(Q, K, V, **masks)
        assert c.dtype == dtype and w.dtype == dtype
        (c.sum() + (w * w).sum()).backward()
        grads = [Q.grad, K.grad, V.grad] + [p.grad for p in att.parameters()]
        assert all(g.dtype == dtype for g in grads)
        results[dtype] = [c.numpy(), w.numpy()] + grads
    for a32, a64 in zip(results[np.float32], results[np.float64]):
        np.testing.assert_allclose(a32, a64, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("score", ["bilinear", "additive"])
@pytest.mark.parametrize("position", [0, 1, 2])
def test_attention_refuses_inputs_of_another_dtype_than_its_parameters(score: str,
                                                                        position: int) -> None:
    """A float64 query, keys or values for a float32 layer used to give float64 results
    silently; torch and the recurrent layers refuse."""
    att = make_attention(score, 3, 2, dtype=np.float32)
    xs = [tr.Tensor(a) for a in inputs(2, 3, 4, 3, 2, 2, seed=0, dtype=np.float32)]
    xs[position] = xs[position].to(np.float64)
    name = ("query", "keys", "values")[position]
    message = (f"Attention: {name} dtype float64 does not match the parameters' dtype "
               f"float32 (convert the input with {name}.to(np.float32), or the module with "
               f"model.to(np.float64))")
    with pytest.raises(TypeError, match=re.escape(message)):
        att(*xs)
    xs[position] = xs[position].to(np.float32)
    assert att(*xs)[0].dtype == np.float32


@pytest.mark.parametrize("score", ["dot", "scaled_dot"])
def test_attention_without_parameters_refuses_mixed_input_dtypes(score: str) -> None:
    att = make_attention(score, 3, 3)
    q, k, v = (tr.Tensor(a) for a in inputs(2, 3, 4, 3, 3, 2, seed=0, dtype=np.float32))
    with pytest.raises(TypeError, match=re.escape(
            "Attention: keys dtype float64 does not match the query's dtype float32")):
        att(q, k.to(np.float64), v)
    with pytest.raises(TypeError, match=re.escape(
            "Attention: values dtype float64 does not match the query's dtype float32")):
        att(q, k, v.to(np.float64))
    # one dtype throughout is fine, whichever it is
    assert att(q, k, v)[0].dtype == np.float32
    assert att(*(x.to(np.float64) for x in (q, k, v)))[0].dtype == np.float64


def test_inputs_are_not_mutated_and_grads_have_input_shapes() -> None:
    att = make_attention("additive", 3, 2)
    q, k, v = inputs(2, 3, 4, 3, 2, 2, seed=12)
    kpm = make_masks("padding", 2, 3, 4)["key_padding_mask"]
    k[kpm] = np.nan
    copies = [a.copy() for a in (q, k, v, kpm)]
    Q, K, V = leaves(q, k, v)
    snap = [Q.numpy().copy(), K.numpy().copy(), V.numpy().copy()]
    c, w = att(Q, K, V, key_padding_mask=kpm)
    upstream = np.ones(c.shape)
    c.backward(upstream)
    for a, b in zip((Q.numpy(), K.numpy(), V.numpy()), snap):
        np.testing.assert_array_equal(a, b)
    for a, b in zip((q, k, v, kpm), copies):
        np.testing.assert_array_equal(a, b)
    assert np.array_equal(upstream, np.ones(c.shape))
    for x in (Q, K, V):
        assert x.grad.shape == x.shape and x.grad.dtype == x.dtype


def test_zero_upstream_gives_zero_gradient() -> None:
    att = make_attention("bilinear", 3, 2)
    Q, K, V = leaves(*inputs(2, 3, 4, 3, 2, 2, seed=13))
    c, _ = att(Q, K, V, causal=True)
    c.backward(np.zeros(c.shape))
    for g in (Q.grad, K.grad, V.grad, att.weight.grad):
        assert np.array_equal(g, np.zeros_like(g))


def test_attention_errors_name_the_shapes() -> None:
    with pytest.raises(ValueError, match=r"query_size == key_size.*query_size=3.*key_size=2"):
        nn.Attention("dot", 3, 2)
    with pytest.raises(ValueError, match="score must be one of"):
        nn.Attention("cosine", 3, 3)
    with pytest.raises(ValueError, match="hidden_size is only used by the 'additive'"):
        nn.Attention("bilinear", 3, 2, hidden_size=4)
    att = nn.Attention("bilinear", 3, 2, value_size=2, dtype=np.float64)
    q, k, v = (tr.Tensor(a) for a in inputs(2, 3, 4, 3, 2, 2, seed=0))
    with pytest.raises(ValueError, match=r"\(2, 3, 4\).*query_size is 3"):
        att(tr.Tensor(np.zeros((2, 3, 4))), k, v)
    with pytest.raises(ValueError, match=r"keys of shape \(2, 4, 3\).*key_size is 2"):
        att(q, tr.Tensor(np.zeros((2, 4, 3))), v)
    with pytest.raises(ValueError, match=r"keys of shape \(2, 4, 2\) and values of shape "
                                         r"\(2, 5, 2\)"):
        att(q, k, tr.Tensor(np.zeros((2, 5, 2))))
    with pytest.raises(ValueError, match=r"batch sizes differ: query of shape \(3, 3, 3\), "
                                         r"keys of shape \(2, 4, 2\)"):
        att(tr.Tensor(np.zeros((3, 3, 3))), k, v)
    with pytest.raises(ValueError, match=r"values of shape \(2, 4, 3\).*value_size is 2"):
        att(q, k, tr.Tensor(np.zeros((2, 4, 3))))
    with pytest.raises(ValueError, match=r"key_padding_mask of shape \(2, 3\).*\(2, 4\)"):
        att(q, k, v, key_padding_mask=np.zeros((2, 3), dtype=bool))
    with pytest.raises(TypeError, match="key_padding_mask must be boolean"):
        att(q, k, v, key_padding_mask=np.zeros((2, 4)))
    with pytest.raises(ValueError, match=r"attn_mask of shape \(4, 3\).*\(3, 4\)"):
        att(q, k, v, attn_mask=np.zeros((4, 3), dtype=bool))
    with pytest.raises(ValueError, match="causal=True needs a query sequence"):
        att(tr.Tensor(np.zeros((2, 3))), k, v, causal=True)


# --------------------------------------------------------------------------------------------
# MultiheadAttention and CausalSelfAttention
# --------------------------------------------------------------------------------------------
MHA_CONFIGS = {
    "default": {},
    "kdim_vdim": {"kdim": 3, "vdim": 5},
    "no_bias": {"bias": False},
    "bias_kv_zero_attn": {"add_bias_kv": True, "add_zero_attn": True},
}


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("config", sorted(MHA_CONFIGS))
def test_multihead_gradcheck(config: str, batch_first: bool) -> None:
    """Directional gradcheck w.r.t. query, key, value and every parameter, with a padding
    mask, a boolean attn_mask and is_causal (a fully masked row included), on the output
    and the per-head weights."""
    kw = MHA_CONFIGS[config]
    e, h, n, tgt, src = 4, 2, 2, 3, 4
    mha = nn.MultiheadAttention(e, h, batch_first=batch_first, dtype=np.float64, generator=1,
                                **kw)
    rng = np.random.default_rng(14)

    def shaped(t: int, d: int) -> np.ndarray:
        return rng.uniform(-1, 1, (n, t, d) if batch_first else (t, n, d))

    q, k, v = shaped(tgt, e), shaped(src, kw.get("kdim", e)), shaped(src, kw.get("vdim", e))
    kpm = np.array([[False, False, False, True], [True, False, False, False]])
    am = np.zeros((tgt, src), dtype=bool)
    am[2, 0] = True

    def call(m, a, b, c):
        return m(a, b, c, key_padding_mask=kpm, attn_mask=am, is_causal=True,
                 average_attn_weights=False)

    check_module(Called(mha, call), *leaves(q, k, v), mode="directional", n_directions=6)


def test_multihead_gradcheck_full_self_attention_tiny() -> None:
    """Full-Jacobian gradcheck of the one-GEMM self-attention path (query is key is value)."""
    mha = nn.MultiheadAttention(2, 2, batch_first=True, dtype=np.float64, generator=2)
    (x,) = leaves(np.random.default_rng(15).uniform(-1, 1, (1, 3, 2)))
    check_module(Called(mha, lambda m, t: m(t, t, t, is_causal=True)), x, mode="full")


def test_multihead_fully_masked_rows_are_zero_with_nan_padding() -> None:
    mha = nn.MultiheadAttention(4, 2, batch_first=True, dtype=np.float64, generator=3)
    rng = np.random.default_rng(16)
    q, k = rng.uniform(-1, 1, (2, 3, 4)), rng.uniform(-1, 1, (2, 4, 4))
    kpm = np.array([[False, False, True, True], [True, True, True, True]])
    k[kpm] = np.nan
    v = k.copy()
    v[0, 2] = np.inf
    Q, K, V = leaves(q, k, v)
    with np.errstate(all="raise"):
        out, w = mha(Q, K, V, key_padding_mask=kpm, average_attn_weights=False)
        out.sum().backward()
    assert np.isfinite(out.numpy()).all()
    assert np.array_equal(w.numpy()[1], np.zeros((2, 3, 4)))
    np.testing.assert_array_equal(out.numpy()[1], np.broadcast_to(mha.out_proj.bias.numpy(),
                                                                  (3, 4)))
    assert np.array_equal(Q.grad[1], np.zeros((3, 4)))
    assert np.array_equal(K.grad[kpm], np.zeros((6, 4)))
    assert np.array_equal(V.grad[kpm], np.zeros((6, 4)))
    for g in [K.grad, V.grad] + [p.grad for p in mha.parameters()]:
        assert np.isfinite(g).all()


def test_multihead_heads_are_reshapes_of_single_head_attention() -> None:
    """Each head equals Attention('scaled_dot') on that head's slice of the projections
    (the multi-head layer is reshapes around one-head attention)."""
    e, h = 6, 3
    d = e // h
    mha = nn.MultiheadAttention(e, h, batch_first=True, dtype=np.float64, generator=4)
    rng = np.random.default_rng(17)
    q, k, v = (rng.standard_normal((2, t, e)) for t in (3, 4, 4))
    kpm = np.array([[False, False, False, True], [False, False, False, False]])
    _, w = mha(tr.Tensor(q), tr.Tensor(k), tr.Tensor(v), key_padding_mask=kpm,
               average_attn_weights=False)
    wi, bi = mha.in_proj_weight.numpy(), mha.in_proj_bias.numpy()
    proj = [x @ wi[j * e:(j + 1) * e].T + bi[j * e:(j + 1) * e] for j, x in enumerate((q, k, v))]
    single = nn.Attention("scaled_dot", d, d, dtype=np.float64)
    heads = []
    for m in range(h):
        cols = slice(m * d, (m + 1) * d)
        c, wm = single(*(tr.Tensor(p[..., cols]) for p in proj), key_padding_mask=kpm)
        np.testing.assert_allclose(w.numpy()[:, m], wm.numpy(), rtol=1e-13, atol=1e-16)
        heads.append(c.numpy())
    concat = np.concatenate(heads, axis=-1)
    expected = concat @ mha.out_proj.weight.numpy().T + mha.out_proj.bias.numpy()
    out, w_avg = mha(tr.Tensor(q), tr.Tensor(k), tr.Tensor(v), key_padding_mask=kpm)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(w_avg.numpy(), w.numpy().mean(1), rtol=1e-14)


def test_multihead_layouts_unbatched_and_need_weights() -> None:
    mha = nn.MultiheadAttention(4, 2, dtype=np.float64, generator=5)
    rng = np.random.default_rng(18)
    x = rng.standard_normal((3, 2, 4))                      # (L, N, E), seq-first
    out, w = mha(tr.Tensor(x), tr.Tensor(x), tr.Tensor(x))
    assert out.shape == (3, 2, 4) and w.shape == (2, 3, 3)
    out_none, none = mha(tr.Tensor(x), tr.Tensor(x), tr.Tensor(x), need_weights=False)
    assert none is None and np.array_equal(out_none.numpy(), out.numpy())
    _, per_head = mha(tr.Tensor(x), tr.Tensor(x), tr.Tensor(x), average_attn_weights=False)
    assert per_head.shape == (2, 2, 3, 3)
    out1, w1 = mha(tr.Tensor(x[:, 1]), tr.Tensor(x[:, 1]), tr.Tensor(x[:, 1]))  # unbatched
    assert out1.shape == (3, 4) and w1.shape == (3, 3)
    np.testing.assert_allclose(out1.numpy(), out.numpy()[:, 1], rtol=1e-13, atol=1e-15)
    bf = nn.MultiheadAttention(4, 2, batch_first=True, dtype=np.float64)
    bf.load_state_dict(mha.state_dict())
    xb = tr.Tensor(x.transpose(1, 0, 2))
    out_bf, _ = bf(xb, xb, xb)
    np.testing.assert_allclose(out_bf.numpy(), out.numpy().transpose(1, 0, 2), rtol=1e-13,
                               atol=1e-15)


def test_multihead_parameters_and_init() -> None:
    mha = nn.MultiheadAttention(8, 2, generator=6)
    shapes = {k: v.shape for k, v in mha.state_dict().items()}
    assert shapes == {"in_proj_weight": (24, 8), "in_proj_bias": (24,),
                      "out_proj.weight": (8, 8), "out_proj.bias": (8,)}
    assert all(v.dtype == np.float32 for v in mha.state_dict().values())
    bound = math.sqrt(6.0 / (24 + 8))                         # xavier_uniform_ of (3E, E)
    w = mha.in_proj_weight.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    assert not mha.in_proj_bias.numpy().any() and not mha.out_proj.bias.numpy().any()
    sep = nn.MultiheadAttention(8, 2, kdim=3, vdim=5, bias=False, add_bias_kv=True)
    assert list(sep.state_dict()) == ["q_proj_weight", "k_proj_weight", "v_proj_weight",
                                      "bias_k", "bias_v", "out_proj.weight"]
    assert sep.in_proj_weight is None and sep.in_proj_bias is None
    a, b = nn.MultiheadAttention(8, 2, generator=7), nn.MultiheadAttention(8, 2, generator=7)
    assert all(np.array_equal(x, y) for x, y in zip(a.state_dict().values(),
                                                     b.state_dict().values()))


def test_multihead_dropout_is_seeded_and_training_only() -> None:
    rng = np.random.default_rng(19)
    x = tr.Tensor(rng.standard_normal((2, 5, 4)))
    kpm = np.array([[False] * 4 + [True], [False] * 5])

    def run(seed: int, train: bool) -> tuple:
        mha = nn.MultiheadAttention(4, 2, dropout=0.5, batch_first=True, dtype=np.float64,
                                    generator=seed)
        mha.train(train)
        return mha(x, x, x, key_padding_mask=kpm, average_attn_weights=False)

    out_a, w_a = run(8, True)
    out_b, w_b = run(8, True)
    assert np.array_equal(out_a.numpy(), out_b.numpy())          # same seed, same masks
    out_e, w_e = run(8, False)
    clean = w_e.numpy()
    assert not np.array_equal(out_a.numpy(), out_e.numpy())
    dropped = w_a.numpy()
    # every weight is either dropped (0) or kept and scaled by 1 / (1 - p)
    kept = dropped != 0
    assert 0 < kept.sum() < kept.size
    np.testing.assert_allclose(dropped[kept], 2.0 * clean[kept], rtol=1e-14)
    assert np.array_equal(dropped[..., 4][0], np.zeros_like(dropped[..., 4][0]))  # padding
    nodrop = nn.MultiheadAttention(4, 2, dropout=0.0, batch_first=True, dtype=np.float64,
                                   generator=8)
    np.testing.assert_array_equal(nodrop(x, x, x, key_padding_mask=kpm)[0].numpy(),
                                  out_e.numpy())


def test_multihead_float32_stays_float32() -> None:
    m64 = nn.MultiheadAttention(4, 2, kdim=3, vdim=2, dtype=np.float64, generator=9)
    m32 = nn.MultiheadAttention(4, 2, kdim=3, vdim=2, dtype=np.float32)
    m32.load_state_dict(m64.state_dict())
    rng = np.random.default_rng(20)
    arrays = [rng.standard_normal(s) for s in ((3, 2, 4), (5, 2, 3), (5, 2, 2))]
    kpm = np.array([[False] * 4 + [True], [False] * 5])
    res = {}
    for dtype, m in ((np.float64, m64), (np.float32, m32)):
        xs = leaves(*(a.astype(dtype) for a in arrays))
        out, w = m(*xs, key_padding_mask=kpm, is_causal=True)
        assert out.dtype == dtype and w.dtype == dtype
        out.sum().backward()
        grads = [x.grad for x in xs] + [p.grad for p in m.parameters()]
        assert all(g.dtype == dtype for g in grads)
        res[dtype] = [out.numpy(), w.numpy()] + grads
    for a32, a64 in zip(res[np.float32], res[np.float64]):
        np.testing.assert_allclose(a32, a64, rtol=2e-5, atol=2e-6)


def test_multihead_errors_name_the_shapes() -> None:
    with pytest.raises(ValueError, match="embed_dim=6 is not divisible by num_heads=4"):
        nn.MultiheadAttention(6, 4)
    mha = nn.MultiheadAttention(4, 2, kdim=3, dtype=np.float64)
    q, k, v = tr.Tensor(np.zeros((3, 2, 4))), tr.Tensor(np.zeros((5, 2, 3))), tr.Tensor(
        np.zeros((5, 2, 4)))
    with pytest.raises(ValueError, match=r"key of shape \(5, 2, 4\) has last dimension 4, "
                                         r"expected 3"):
        mha(q, v, v)
    with pytest.raises(ValueError, match=r"all be 3-D.*query of shape \(3, 2, 4\), key of "
                                         r"shape \(5, 2\)"):
        mha(q, tr.Tensor(np.zeros((5, 2))), v)
    with pytest.raises(ValueError, match=r"key of shape \(5, 2, 3\) and value of shape "
                                         r"\(4, 2, 4\)"):
        mha(q, k, tr.Tensor(np.zeros((4, 2, 4))))
    with pytest.raises(ValueError, match=r"batch sizes differ: query of shape \(3, 1, 4\), "
                                         r"key of shape \(5, 2, 3\)"):
        mha(tr.Tensor(np.zeros((3, 1, 4))), k, v)
    with pytest.raises(ValueError, match=r"attn_mask of shape \(5, 3\).*\(3, 5\)"):
        mha(q, k, v, attn_mask=np.zeros((5, 3), dtype=bool))
    with pytest.raises(ValueError, match=r"key_padding_mask of shape \(2, 4\).*\(2, 5\)"):
        mha(q, k, v, key_padding_mask=np.zeros((2, 4), dtype=bool))


@pytest.mark.parametrize("position", [0, 1, 2])
def test_multihead_refuses_inputs_of_another_dtype_than_its_parameters(position: int) -> None:
    mha = nn.MultiheadAttention(4, 2, generator=0)                       # float32
    rng = np.random.default_rng(0)
    xs = [tr.Tensor(rng.standard_normal((3, 2, 4)).astype(np.float32)) for _ in range(3)]
    xs[position] = xs[position].to(np.float64)
    name = ("query", "key", "value")[position]
    with pytest.raises(TypeError, match=re.escape(
            f"MultiheadAttention: {name} dtype float64 does not match the parameters' dtype "
            f"float32 (convert the input with {name}.to(np.float32), or the module with "
            f"model.to(np.float64))")):
        mha(*xs)
    # the case that used to mix silently: self-attention on one float64 tensor
    x64 = tr.Tensor(rng.standard_normal((5, 3, 4)))
    with pytest.raises(TypeError, match="MultiheadAttention: query dtype float64"):
        mha(x64, x64, x64)
    assert mha(x64.to(np.float32), x64.to(np.float32), x64.to(np.float32))[0].dtype == \
        np.float32


def test_causal_self_attention_refuses_an_input_of_another_dtype() -> None:
    layer = nn.CausalSelfAttention(4, 2, generator=0)                    # float32
    x = tr.Tensor(np.random.default_rng(0).standard_normal((2, 5, 4)))   # float64
    with pytest.raises(TypeError, match=re.escape(
            "CausalSelfAttention: x dtype float64 does not match the parameters' dtype "
            "float32 (convert the input with x.to(np.float32), or the module with "
            "model.to(np.float64))")):
        layer(x)
    assert layer(x.to(np.float32)).dtype == np.float32
    assert layer.to(np.float64)(x).dtype == np.float64


@pytest.mark.parametrize("bad", [(1, 5), (5, 1), (4,), (6,), ()])
def test_multihead_unbatched_key_padding_mask_names_the_given_shape(bad: tuple) -> None:
    """The message used to name the mask after the batch axis was added ("shape (1, 1, 5)
    ... expected shape (1, 5)"); an unbatched input takes an (S,) mask, as in torch."""
    mha = nn.MultiheadAttention(4, 2, dtype=np.float64, generator=0)
    q, k = tr.Tensor(np.zeros((3, 4))), tr.Tensor(np.zeros((5, 4)))
    with pytest.raises(ValueError, match=re.escape(
            f"MultiheadAttention: for unbatched input (key of shape (5, 4)), key_padding_mask "
            f"must be 1-D of shape (5,) (S,), got shape {bad}")):
        mha(q, k, k, key_padding_mask=np.zeros(bad, dtype=bool))


def test_multihead_unbatched_key_padding_mask_matches_the_batched_one() -> None:
    mha = nn.MultiheadAttention(4, 2, dtype=np.float64, generator=3)
    rng = np.random.default_rng(4)
    q, k, v = rng.standard_normal((3, 4)), rng.standard_normal((5, 4)), rng.standard_normal(
        (5, 4))
    pad = np.array([False, False, True, False, True])
    out, w = mha(tr.Tensor(q), tr.Tensor(k), tr.Tensor(v), key_padding_mask=pad)
    ref, w_ref = mha(tr.Tensor(q[:, None]), tr.Tensor(k[:, None]), tr.Tensor(v[:, None]),
                     key_padding_mask=pad[None])
    np.testing.assert_array_equal(out.numpy(), ref.numpy()[:, 0])
    np.testing.assert_array_equal(w.numpy(), w_ref.numpy()[0])
    assert np.all(w.numpy()[:, pad] == 0)


@pytest.mark.parametrize("dtype", [np.int64, np.int8, np.uint8])
def test_integer_attn_mask_error_names_the_layer_and_the_shape(dtype: Any) -> None:
    """Used to be "attn_mask must be boolean or floating point, got dtype int64", naming
    neither the layer nor the mask's shape."""
    mha = nn.MultiheadAttention(4, 2, dtype=np.float64, generator=0)
    q, k = tr.Tensor(np.zeros((3, 4))), tr.Tensor(np.zeros((5, 4)))
    with pytest.raises(TypeError, match=re.escape(
            "MultiheadAttention: attn_mask of shape (3, 5) must be boolean") + ".*"
            + f"got dtype {np.dtype(dtype)}"):
        mha(q, k, k, attn_mask=np.zeros((3, 5), dtype=dtype))
    att = nn.Attention("dot", 4, 4, dtype=np.float64)
    with pytest.raises(TypeError, match=re.escape(
            "Attention: attn_mask of shape (3, 5) must be boolean") + ".*"
            + f"got dtype {np.dtype(dtype)}"):
        att(q[None], k[None], k[None], attn_mask=np.zeros((3, 5), dtype=dtype))
    # a single query: the shape named is the one given, (Tk,), not (1, Tk)
    with pytest.raises(TypeError, match=re.escape("Attention: attn_mask of shape (5,) must")):
        att(tr.Tensor(np.zeros((1, 4))), k[None], k[None], attn_mask=np.zeros(5, dtype=dtype))


@pytest.mark.parametrize("make, message", [
    (lambda: nn.MultiheadAttention(4.0, 2), "MultiheadAttention: embed_dim must be an integer, "
                                            "got 4.0"),
    (lambda: nn.MultiheadAttention(4, 2.5), "MultiheadAttention: num_heads must be an integer"),
    (lambda: nn.MultiheadAttention(4, True), "MultiheadAttention: num_heads must be an integer"),
    (lambda: nn.MultiheadAttention(4, 2, kdim=3.0), "MultiheadAttention: kdim must be an "
                                                    "integer"),
    (lambda: nn.MultiheadAttention(4, 2, vdim="3"), "MultiheadAttention: vdim must be an "
                                                    "integer"),
    (lambda: nn.Attention("dot", 3.5, 3.5), "Attention: query_size must be an integer, got "
                                            "3.5"),
    (lambda: nn.Attention("bilinear", 3, 2.0), "Attention: key_size must be an integer"),
    (lambda: nn.Attention("dot", 3, 3, value_size=2.0), "Attention: value_size must be an "
                                                        "integer"),
    (lambda: nn.Attention("additive", 3, 3, hidden_size=4.5), "Attention: hidden_size must be "
                                                              "an integer"),
])
def test_attention_non_integer_sizes_are_refused(make: Any, message: str) -> None:
    """``int(size)`` used to truncate 4.5 to 4 silently (Attention), or fail with NumPy's
    message (MultiheadAttention)."""
    with pytest.raises(TypeError, match=re.escape(message)):
        make()


def test_attention_sizes_must_be_positive() -> None:
    with pytest.raises(ValueError, match="MultiheadAttention: num_heads must be positive, got 0"):
        nn.MultiheadAttention(4, 0)
    with pytest.raises(ValueError, match="MultiheadAttention: kdim must be positive, got 0"):
        nn.MultiheadAttention(4, 2, kdim=0)
    with pytest.raises(ValueError, match="Attention: hidden_size must be positive, got 0"):
        nn.Attention("additive", 3, 3, hidden_size=0)
    mha = nn.MultiheadAttention(np.int64(4), np.int32(2), kdim=np.int64(3))
    assert (mha.embed_dim, mha.num_heads, mha.kdim, mha.head_dim) == (4, 2, 3, 2)
    assert all(type(x) is int for x in (mha.embed_dim, mha.num_heads, mha.kdim))


def test_causal_self_attention_is_multihead_with_is_causal() -> None:
    csa = nn.CausalSelfAttention(4, 2, dtype=np.float64, generator=10)
    assert list(csa.state_dict()) == ["attn.in_proj_weight", "attn.in_proj_bias",
                                      "attn.out_proj.weight", "attn.out_proj.bias"]
    x = np.random.default_rng(21).standard_normal((2, 5, 4))
    out, w = csa(tr.Tensor(x), need_weights=True)
    mha = nn.MultiheadAttention(4, 2, batch_first=True, dtype=np.float64)
    mha.load_state_dict({k[len("attn."):]: v for k, v in csa.state_dict().items()})
    upper = np.triu(np.ones((5, 5), dtype=bool), 1)
    ref, w_ref = mha(tr.Tensor(x), tr.Tensor(x), tr.Tensor(x), attn_mask=upper)
    np.testing.assert_array_equal(out.numpy(), ref.numpy())
    np.testing.assert_array_equal(w.numpy(), w_ref.numpy())
    assert np.array_equal(w.numpy()[:, upper], np.zeros((2, int(upper.sum()))))
    assert isinstance(csa(tr.Tensor(x)), tr.Tensor)                 # weights only on request


def test_causal_self_attention_future_never_reaches_the_past() -> None:
    csa = nn.CausalSelfAttention(4, 2, dtype=np.float64, generator=11)
    x = np.random.default_rng(22).standard_normal((2, 5, 4))
    changed = x.copy()
    changed[:, 3:] = 1e3 * np.random.default_rng(0).standard_normal((2, 2, 4))  # the future
    np.testing.assert_array_equal(csa(tr.Tensor(changed)).numpy()[:, :3],
                                  csa(tr.Tensor(x)).numpy()[:, :3])
    (X,) = leaves(x)
    csa(X)[:, 2].sum().backward()
    assert np.array_equal(X.grad[:, 3:], np.zeros((2, 2, 4)))
    assert np.abs(X.grad[:, :3]).max() > 0


def test_causal_self_attention_gradcheck() -> None:
    csa = nn.CausalSelfAttention(4, 2, dtype=np.float64, generator=12)
    (x,) = leaves(np.random.default_rng(23).uniform(-1, 1, (2, 4, 4)))
    kpm = np.array([[False, False, False, True], [True, False, False, False]])
    check_module(Called(csa, lambda m, t: m(t, key_padding_mask=kpm, need_weights=True)), x,
                 mode="directional", n_directions=6)


# --------------------------------------------------------------------------------------------
# docstring examples and docs/attention.md
# --------------------------------------------------------------------------------------------
def test_docstring_examples_run() -> None:
    from tinygrad_rnn.nn import attention

    result = doctest.testmod(attention)
    assert result.attempted > 0 and result.failed == 0


def _page() -> str:
    return PAGE.read_text(encoding="utf-8")


def test_page_code_blocks_run() -> None:
    blocks = re.findall(r"^```python\n(.*?)^```", _page(), flags=re.S | re.M)
    assert len(blocks) >= 1
    for i, block in enumerate(blocks):
        assert "assert" in block
        exec(compile(block, f"docs/attention.md[python block {i}]", "exec"), {})


def _defines(path: Path, qualname: str) -> bool:
    src = path.read_text(encoding="utf-8")
    parts = qualname.split(".")
    if len(parts) == 1:
        return re.search(rf"^(def|class) {re.escape(parts[0])}\b", src, flags=re.M) is not None
    cls = re.search(rf"^class {re.escape(parts[0])}\b.*?(?=^\S|\Z)", src, flags=re.M | re.S)
    return cls is not None and re.search(rf"^\s+def {re.escape(parts[1])}\b", cls.group(0),
                                         flags=re.M) is not None


def test_page_references_name_existing_code_and_tests() -> None:
    text = _page()
    tested = re.findall(r"(tests/[\w/]+\.py)::(\w+)", text)
    implemented = re.findall(r"(tinygrad_rnn/[\w/]+\.py)::([\w.]+)", text)
    assert len(tested) >= 8 and len(implemented) >= 6
    for path, name in tested:
        assert (ROOT / path).is_file(), path
        src = (ROOT / path).read_text(encoding="utf-8")
        assert re.search(rf"^def {name}\(", src, flags=re.M), f"{path}::{name}"
    for path, name in implemented:
        assert (ROOT / path).is_file(), path
        assert _defines(ROOT / path, name), f"{path}::{name}"


def test_page_equation_numbers_are_unique_and_cited_by_the_code() -> None:
    """Every (A<k>) the module cites is tagged on the page, each tag once."""
    tags = re.findall(r"\\tag\{([^}]*)\}", _page())
    assert len(tags) == len(set(tags)) and len(tags) >= 10
    src = (ROOT / "tinygrad_rnn" / "nn" / "attention.py").read_text(encoding="utf-8")
    cited = set()
    for first, last in re.findall(r"eqs?\. (A\d+)(?:-(A\d+))?", src):
        lo, hi = int(first[1:]), int((last or first)[1:])
        cited |= {f"A{j}" for j in range(lo, hi + 1)}
    assert cited and cited <= set(tags), sorted(cited - set(tags))
