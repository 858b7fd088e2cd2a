"""MultiheadAttention and Attention against torch (skipped cleanly when torch is absent).

After loading torch.nn.MultiheadAttention's state dict converted to NumPy, in float64:

* the output, the head-averaged and the per-head weights equal torch's to 1e-10;
* the gradients w.r.t. query, key, value and every parameter equal torch's to 1e-10;

for batch_first True and False, kdim/vdim different from embed_dim, bias=False,
add_bias_kv, add_zero_attn, key_padding_mask, boolean and float attn_mask (2-D and the 3-D
(N*h, L, S) form), is_causal (given with the causal attn_mask, as torch requires),
self-attention inputs, unbatched inputs; state_dict keys and shapes are torch's, in torch's
order. Also the 'scaled_dot' Attention against torch's scaled_dot_product_attention.

Masks here never empty a whole row: torch gives NaN there (we give zeros, tested in
test_attention.py).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn import nn

torch = pytest.importorskip("torch")

SAME = 1e-10  # |a - b| <= SAME * max(1, |b|)

CONFIGS = {
    "default": {},
    "kdim_vdim": {"kdim": 3, "vdim": 5},
    "no_bias": {"bias": False},
    "no_bias_kdim_vdim": {"bias": False, "kdim": 2, "vdim": 3},
    "bias_kv": {"add_bias_kv": True},
    "zero_attn": {"add_zero_attn": True},
    "bias_kv_zero_attn_kdim": {"add_bias_kv": True, "add_zero_attn": True, "kdim": 3},
}
MASKS = ("none", "padding", "bool_mask", "float_mask", "mask_3d", "causal", "all")


def assert_same(a: Any, b: Any, what: str) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, f"{what}: shapes {a.shape} vs {b.shape}"
    if a.size:
        err = np.abs(a - b) / np.maximum(1.0, np.abs(b))
        assert np.all(err <= SAME), f"{what}: max scaled difference {err.max():.3g}"


def pair(e: int, h: int, seed: int, **kw: Any) -> tuple:
    """A torch layer and ours holding torch's (float64) state."""
    torch.manual_seed(seed)
    theirs = torch.nn.MultiheadAttention(e, h, dtype=torch.float64, **kw)
    ours = nn.MultiheadAttention(e, h, dtype=np.float64, **kw)
    ours.load_state_dict({k: v.detach().numpy().copy() for k, v in theirs.state_dict().items()})
    return theirs, ours


def make_masks(case: str, n: int, h: int, tgt: int, src: int, rng: np.random.Generator
               ) -> dict:
    """Masks in torch's conventions; no row is left without a key."""
    masks: dict = {}
    if case in ("padding", "all"):
        kpm = np.zeros((n, src), dtype=bool)
        kpm[0, -1] = True
        if n > 1:
            kpm[1, -2:] = True
        masks["key_padding_mask"] = kpm
    if case == "bool_mask":
        am = rng.random((tgt, src)) < 0.4
        am[:, 0] = False                                # key 0 stays visible to every query
        masks["attn_mask"] = am
    if case == "float_mask":
        am = rng.standard_normal((tgt, src))
        am[rng.random((tgt, src)) < 0.3] = -np.inf
        am[:, 0] = 0.25
        masks["attn_mask"] = am
    if case == "mask_3d":
        am = rng.random((n * h, tgt, src)) < 0.4
        am[..., 0] = False
        masks["attn_mask"] = am
    if case in ("causal", "all"):
        masks["attn_mask"] = np.triu(np.ones((tgt, src), dtype=bool), 1)
        masks["is_causal"] = True
    return masks


def run_both(theirs: Any, ours: Any, q: np.ndarray, k: np.ndarray, v: np.ndarray,
             masks: dict, average: bool, self_attention: bool = False) -> None:
    """Forward and backward through both layers; compare outputs, weights and gradients."""
    rng = np.random.default_rng(0)
    if self_attention:
        tq = torch.tensor(q, requires_grad=True)
        tk = tv = tq
        oq = tr.Tensor(q, requires_grad=True)
        ok = ov = oq
    else:
        tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
        oq, ok, ov = (tr.Tensor(a, requires_grad=True) for a in (q, k, v))
    tmasks = {key: (torch.tensor(m) if isinstance(m, np.ndarray) else m)
              for key, m in masks.items()}
    t_out, t_w = theirs(tq, tk, tv, average_attn_weights=average, **tmasks)
    o_out, o_w = ours(oq, ok, ov, average_attn_weights=average, **masks)
    assert_same(o_out.numpy(), t_out.detach().numpy(), "attn_output")
    assert_same(o_w.numpy(), t_w.detach().numpy(), "attn_weights")
    g_out = rng.standard_normal(o_out.shape)
    g_w = rng.standard_normal(o_w.shape)
    (t_out * torch.tensor(g_out)).sum().add((t_w * torch.tensor(g_w)).sum()).backward()
    o_out.backward(g_out, retain_graph=True)
    o_w.backward(g_w)
    for name, o, t in (("query", oq, tq), ("key", ok, tk), ("value", ov, tv)):
        assert_same(o.grad, t.grad.numpy(), f"d{name}")
    t_params = dict(theirs.named_parameters())
    names = [name for name, _ in ours.named_parameters()]
    assert sorted(names) == sorted(t_params)
    for name, p in ours.named_parameters():
        assert_same(p.grad, t_params[name].grad.numpy(), f"d{name}")


@pytest.mark.parametrize("average", [True, False])
@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_multihead_matches_torch(config: str, batch_first: bool, mask: str,
                                 average: bool) -> None:
    kw = CONFIGS[config]
    e, h, n, tgt, src = 4, 2, 2, 3, 5
    theirs, ours = pair(e, h, seed=len(config) + 7 * MASKS.index(mask),
                        batch_first=batch_first, **kw)
    rng = np.random.default_rng(MASKS.index(mask))

    def shaped(t: int, d: int) -> np.ndarray:
        return rng.standard_normal((n, t, d) if batch_first else (t, n, d))

    q, k, v = shaped(tgt, e), shaped(src, kw.get("kdim", e)), shaped(src, kw.get("vdim", e))
    run_both(theirs, ours, q, k, v, make_masks(mask, n, h, tgt, src, rng), average)


@pytest.mark.parametrize("mask", ("none", "padding", "causal"))
@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_self_attention_matches_torch(batch_first: bool, mask: str) -> None:
    """query is key is value: our one-GEMM projection path, torch's self-attention path."""
    theirs, ours = pair(6, 3, seed=1, batch_first=batch_first)
    rng = np.random.default_rng(2)
    n, t = 2, 4
    x = rng.standard_normal((n, t, 6) if batch_first else (t, n, 6))
    run_both(theirs, ours, x, x, x, make_masks(mask, n, 3, t, t, rng), average=False,
             self_attention=True)


@pytest.mark.parametrize("config", ("default", "kdim_vdim", "bias_kv"))
def test_multihead_unbatched_matches_torch(config: str) -> None:
    kw = CONFIGS[config]
    theirs, ours = pair(4, 2, seed=3, **kw)
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal(s) for s in ((3, 4), (5, kw.get("kdim", 4)),
                                                (5, kw.get("vdim", 4))))
    masks = {"key_padding_mask": np.array([False, False, False, False, True])}
    for average in (True, False):
        run_both(theirs, ours, q, k, v, masks, average)


@given(n=st.integers(1, 3), tgt=st.integers(1, 5), src=st.integers(1, 5),
       h=st.integers(1, 3), d=st.integers(1, 3), batch_first=st.booleans(),
       bias=st.booleans(), seed=st.integers(0, 2 ** 16), padding=st.booleans())
def test_multihead_matches_torch_random_shapes(n, tgt, src, h, d, batch_first, bias, seed,
                                               padding) -> None:
    e = h * d
    theirs, ours = pair(e, h, seed=seed, batch_first=batch_first, bias=bias)
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n, tgt, e) if batch_first else (tgt, n, e))
    k = rng.standard_normal((n, src, e) if batch_first else (src, n, e))
    v = rng.standard_normal(k.shape)
    masks = {}
    if padding:
        kpm = rng.random((n, src)) < 0.4
        kpm[:, 0] = False                                   # never an empty row
        masks["key_padding_mask"] = kpm
    run_both(theirs, ours, q, k, v, masks, average=bool(seed % 2))


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_state_dict_keys_and_shapes_are_torchs(config: str) -> None:
    kw = CONFIGS[config]
    theirs = torch.nn.MultiheadAttention(8, 4, **kw)
    ours = nn.MultiheadAttention(8, 4, **kw)
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    assert [name for name, _ in ours.named_parameters()] == [
        name for name, _ in theirs.named_parameters()]


def test_need_weights_false_and_eval_dropout_match_torch() -> None:
    theirs, ours = pair(4, 2, seed=4, dropout=0.3, batch_first=True)
    theirs.eval()
    ours.eval()
    x = np.random.default_rng(4).standard_normal((2, 3, 4))
    t_out, t_w = theirs(*(torch.tensor(x),) * 3, need_weights=False)
    o_out, o_w = ours(*(tr.Tensor(x),) * 3, need_weights=False)
    assert t_w is None and o_w is None
    assert_same(o_out.numpy(), t_out.detach().numpy(), "attn_output")


@pytest.mark.parametrize("masked", [False, True])
def test_scaled_dot_attention_matches_torch_sdpa(masked: bool) -> None:
    """Attention('scaled_dot') against torch.nn.functional.scaled_dot_product_attention (whose
    boolean mask means the opposite: True = takes part)."""
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal(s) for s in ((2, 3, 4), (2, 5, 4), (2, 5, 3)))
    kpm = np.array([[False, False, True, False, True], [False] * 5]) if masked else None
    att = nn.Attention("scaled_dot", 4, 4, dtype=np.float64)
    Q, K, V = (tr.Tensor(a, requires_grad=True) for a in (q, k, v))
    c, _ = att(Q, K, V, key_padding_mask=kpm, causal=masked)
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    keep = None
    if masked:
        keep = torch.tensor(~kpm[:, None, :] & np.tril(np.ones((3, 5), dtype=bool)))
    tc = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=keep)
    assert_same(c.numpy(), tc.detach().numpy(), "context")
    g = rng.standard_normal(c.shape)
    c.backward(g)
    (tc * torch.tensor(g)).sum().backward()
    for name, o, t in (("query", Q, tq), ("keys", K, tk), ("values", V, tv)):
        assert_same(o.grad, t.grad.numpy(), f"d{name}")
