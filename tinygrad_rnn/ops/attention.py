"""Attention on raw arrays, forward and backward written out: the (A*) equations of
docs/attention.md, one tagged line each.

``nn.Attention`` composes attention from autograd ops (matmul, tanh, a masked softmax), so
no line of it computes a gradient. This module is the same computation with the backward
pass by hand, in pairs, like the recurrent step pairs of ``bptt/``: each ``*_forward`` returns
what its ``*_backward`` needs, and each backward takes the upstream gradient first. The
tests check every pair against the autograd path and against float64 finite differences
(tests/test_ops_attention.py).

The pieces, in the order the forward pass runs them:

* a score S (N, Tq, Tk) from queries Q (N, Tq, Dq) and keys K (N, Tk, Dk), one of four:
  dot (A4), scaled dot (A5), bilinear (A6) and additive (A7);
* the softmax over the kept keys, alpha (A2), whose VJP is (A9) and which gives a fully
  masked row zero weights and zero gradient (A10);
* the weighted sum of the values V (N, Tk, Dv), C = alpha V (A2), whose VJP is (A11).

:func:`attention_forward` / :func:`attention_backward` chain the three. Any number of
leading batch axes works (none included); parameter gradients are summed over them.

Names are the page's: ``G`` = dL/dS, ``g`` = dL/dalpha, ``r`` = v * (1 - u^2) of (A7).
The values are ``values`` (``v`` is the additive score's vector, as on the page). A padded
key or value should hold finite numbers: a masked weight is an exact 0, but 0 * NaN is NaN
in the weighted sum (nn.Attention zeroes padded keys and values first).
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

from ..backend import get_array_module

SCORES = ("dot", "scaled_dot", "bilinear", "additive")


def _t(a: Any) -> Any:
    """``a`` with its last two axes swapped (the transpose of each matrix in a batch)."""
    return a.swapaxes(-1, -2)


def _batch_sum(a: Any, ndim: int) -> Any:
    """``a`` summed over its leading axes down to ``ndim`` axes (a parameter's shape)."""
    return a.reshape((-1,) + a.shape[a.ndim - ndim:]).sum(axis=0)


# ----------------------------------------------------------------------------- scores
def dot_scores_forward(q: Any, k: Any) -> Any:
    """S = Q K^T, s_ij = q_i^T k_j (Luong's "dot"; Dq = Dk)."""
    return q @ _t(k)                                                     # (N, Tq, Tk)


def dot_scores_backward(G: Any, q: Any, k: Any) -> tuple:
    """(dQ, dK) of :func:`dot_scores_forward` for G = dL/dS."""
    dq = G @ k                                                           # (A4) dQ = G K
    dk = _t(G) @ q                                                       # (A4) dK = G^T Q
    return dq, dk


def scaled_dot_scores_forward(q: Any, k: Any) -> Any:
    """S = Q K^T / sqrt(d), d = Dk (Vaswani et al.)."""
    scale = 1.0 / math.sqrt(k.shape[-1])
    return (q * scale) @ _t(k)                                           # (N, Tq, Tk)


def scaled_dot_scores_backward(G: Any, q: Any, k: Any) -> tuple:
    """(dQ, dK) of :func:`scaled_dot_scores_forward` for G = dL/dS."""
    # exercise: scaled_dot_scores_backward begin
    scale = 1.0 / math.sqrt(k.shape[-1])
    dq = (G @ k) * scale                                                 # (A5) G K / sqrt(d)
    dk = _t(G) @ (q * scale)                                             # (A5) G^T Q / sqrt(d)
    return dq, dk
    # exercise: end


def bilinear_scores_forward(q: Any, k: Any, weight: Any) -> Any:
    """S = Q W K^T, s_ij = q_i^T W k_j (Luong's "general"), W (Dq, Dk)."""
    return (q @ weight) @ _t(k)                                          # (N, Tq, Tk)


def bilinear_scores_backward(G: Any, q: Any, k: Any, weight: Any) -> tuple:
    """(dQ, dK, dW) of :func:`bilinear_scores_forward` for G = dL/dS."""
    dq = (G @ k) @ _t(weight)                                            # (A6) dQ = G K W^T
    dk = (_t(G) @ q) @ weight                                            # (A6) dK = G^T Q W
    dweight = _batch_sum(_t(q) @ G @ k, 2)                               # (A6) dW = Q^T G K
    return dq, dk, dweight


class AdditiveCache(NamedTuple):
    """What :func:`additive_scores_backward` needs: the inputs and u = tanh(a)."""

    q: Any        # (N, Tq, Dq)
    k: Any        # (N, Tk, Dk)
    w_q: Any      # (H, Dq)
    w_k: Any      # (H, Dk)
    v: Any        # (H,)
    u: Any        # (N, Tq, Tk, H) tanh(a_ij), saved: tanh' is written with it


def additive_scores_forward(q: Any, k: Any, w_q: Any, b: Any, w_k: Any,
                            v: Any) -> tuple:
    """(S, cache) for s_ij = v^T tanh(W_q q_i + b + W_k k_j) (Bahdanau's); ``b`` may be
    None. The projections are computed once, (Tq + Tk) H D products, and broadcast."""
    qp = q @ _t(w_q) + (b if b is not None else 0.0)                    # (N, Tq, H) W_q q_i + b
    kp = k @ _t(w_k)                                                     # (N, Tk, H) W_k k_j
    a = qp[..., :, None, :] + kp[..., None, :, :]                        # (N, Tq, Tk, H) a_ij
    u = get_array_module(a).tanh(a)                                      # u_ij
    s = u @ v                                                            # (N, Tq, Tk) v^T u_ij
    return s, AdditiveCache(q, k, w_q, w_k, v, u)


def additive_scores_backward(G: Any, cache: AdditiveCache) -> tuple:
    """(dQ, dK, dW_q, db, dW_k, dv) of :func:`additive_scores_forward` for G = dL/dS."""
    # exercise: additive_scores_backward begin
    q, k, w_q, w_k, v, u = cache
    r = v * (1 - u * u)                                                  # (A7) r_ij = ds_ij/da_ij
    Gr = G[..., None] * r                                                # (N, Tq, Tk, H) G_ij r_ij
    Gr_i = Gr.sum(axis=-2)                                               # (A3) sum over j
    Gr_j = Gr.sum(axis=-3)                                               # (A3) sum over i
    dq = Gr_i @ w_q                                                      # (A7) W_q^T sum_j G r
    dk = Gr_j @ w_k                                                      # (A7) W_k^T sum_i G r
    dv = _batch_sum((G[..., None] * u).reshape((-1, u.shape[-1])), 1)    # (A7) sum G_ij u_ij
    db = _batch_sum(Gr_i.reshape((-1, u.shape[-1])), 1)                  # (A7) sum G_ij r_ij
    dw_q = _batch_sum(_t(Gr_i) @ q, 2)                                   # sum G_ij r_ij q_i^T
    dw_k = _batch_sum(_t(Gr_j) @ k, 2)                                   # sum G_ij r_ij k_j^T
    return dq, dk, dw_q, db, dw_k, dv
    # exercise: end


# ----------------------------------------------------------------------- masked softmax
def masked_softmax_forward(s: Any, keep: Any = None) -> Any:
    """alpha = softmax over the kept keys of each row of ``s`` (..., Tq, Tk); ``keep`` is a
    boolean array broadcastable to ``s`` (True = takes part) or None (all kept). A masked
    entry is an exact 0 whatever its score; a fully masked row is all 0 (A10)."""
    xp = get_array_module(s)
    if keep is None:
        keep = xp.ones(s.shape, dtype=bool)
    kept = xp.where(keep, s, -xp.inf)                                    # masked: out of the max
    mu = kept.max(axis=-1, keepdims=True, initial=-xp.inf)               # (A2) mu_i
    mu = xp.where(mu == -xp.inf, 0.0, mu)                                # a row with no key
    e = xp.where(keep, xp.exp(kept - mu), 0.0)                           # (A2) m_ij e^(s_ij - mu_i)
    total = e.sum(axis=-1, keepdims=True)
    return e / xp.where(total > 0, total, 1.0)                           # (A2); (A10) row of 0


def masked_softmax_backward(g: Any, alpha: Any) -> Any:
    """dL/ds for g = dL/dalpha: the VJP of J = diag(alpha) - alpha alpha^T (A8), row by row.
    A masked entry has alpha = 0 and gets exactly 0."""
    # exercise: masked_softmax_backward begin
    return alpha * (g - (alpha * g).sum(axis=-1, keepdims=True))         # (A9)
    # exercise: end


# ------------------------------------------------------------------------- weighted sum
def weighted_sum_forward(alpha: Any, values: Any) -> Any:
    """C = alpha V: c_i = sum_j alpha_ij v_j, alpha (..., Tq, Tk), V (..., Tk, Dv)."""
    return alpha @ values                                                # (A2) C = A V


def weighted_sum_backward(dc: Any, alpha: Any, values: Any) -> tuple:
    """(dalpha, dV) of :func:`weighted_sum_forward` for dc = dL/dC."""
    # exercise: weighted_sum_backward begin
    dalpha = dc @ _t(values)                                             # (A11) dA = dC V^T
    dvalues = _t(alpha) @ dc                                             # (A11) dV = A^T dC
    return dalpha, dvalues
    # exercise: end


# ------------------------------------------------------------------------ the whole pass
class ScoreParams(NamedTuple):
    """The parameters of a score: ``weight`` (Dq, Dk) for 'bilinear'; ``w_q`` (H, Dq),
    ``b`` (H,) or None, ``w_k`` (H, Dk) and ``v`` (H,) for 'additive' (nn.Attention's
    ``weight``, ``query_proj.weight``, ``query_proj.bias``, ``key_proj.weight``, ``v``)."""

    weight: Any = None
    w_q: Any = None
    b: Any = None
    w_k: Any = None
    v: Any = None


class AttentionCache(NamedTuple):
    """What :func:`attention_backward` needs from :func:`attention_forward`."""

    score: str
    q: Any              # (N, Tq, Dq)
    k: Any              # (N, Tk, Dk)
    values: Any         # (N, Tk, Dv)
    params: ScoreParams
    additive: Any       # AdditiveCache for 'additive', else None
    alpha: Any          # (N, Tq, Tk) the weights


class AttentionGrads(NamedTuple):
    """Gradients of the loss; a parameter the score does not have is None."""

    dq: Any
    dk: Any
    dvalues: Any
    dweight: Any = None
    dw_q: Any = None
    db: Any = None
    dw_k: Any = None
    dv: Any = None


def _check_score(score: Any, params: ScoreParams) -> None:
    """ValueError naming the score and the parameters it needs, if any is missing."""
    needs = {"dot": (), "scaled_dot": (), "bilinear": ("weight",),
             "additive": ("w_q", "w_k", "v")}
    if score not in needs:
        raise ValueError(f"attention_forward: score must be one of {SCORES}, got {score!r}")
    missing = [name for name in needs[score] if getattr(params, name) is None]
    if missing:
        raise ValueError(f"attention_forward: score {score!r} needs ScoreParams "
                         f"{', '.join(missing)}, got None")


def attention_forward(q: Any, k: Any, values: Any, score: str = "dot",
                      params: ScoreParams = ScoreParams(), keep: Any = None) -> tuple:
    """(context C (N, Tq, Dv), weights alpha (N, Tq, Tk), cache): score, masked softmax over
    the keys, weighted sum of the values (docs/attention.md sections 2-4)."""
    _check_score(score, params)
    additive = None
    if score == "dot":
        s = dot_scores_forward(q, k)
    elif score == "scaled_dot":
        s = scaled_dot_scores_forward(q, k)
    elif score == "bilinear":
        s = bilinear_scores_forward(q, k, params.weight)
    else:
        s, additive = additive_scores_forward(q, k, params.w_q, params.b, params.w_k,
                                              params.v)
    alpha = masked_softmax_forward(s, keep)                              # (A2)
    c = weighted_sum_forward(alpha, values)                              # (A2)
    return c, alpha, AttentionCache(score, q, k, values, params, additive, alpha)


def attention_backward(dc: Any, cache: AttentionCache, dalpha: Any = None) -> AttentionGrads:
    """Gradients for dc = dL/dC and, optionally, an upstream dL/dalpha on the returned
    weights too: (A11), then (A9), then the score's rule of (A4)-(A7)."""
    da, dvalues = weighted_sum_backward(dc, cache.alpha, cache.values)  # (A11)
    if dalpha is not None:
        da = da + dalpha                                                 # both uses of alpha
    G = masked_softmax_backward(da, cache.alpha)                         # (A9) G = dS
    q, k, params = cache.q, cache.k, cache.params
    if cache.score == "dot":
        dq, dk = dot_scores_backward(G, q, k)
        return AttentionGrads(dq, dk, dvalues)
    if cache.score == "scaled_dot":
        dq, dk = scaled_dot_scores_backward(G, q, k)
        return AttentionGrads(dq, dk, dvalues)
    if cache.score == "bilinear":
        dq, dk, dweight = bilinear_scores_backward(G, q, k, params.weight)
        return AttentionGrads(dq, dk, dvalues, dweight=dweight)
    dq, dk, dw_q, db, dw_k, dv = additive_scores_backward(G, cache.additive)
    return AttentionGrads(dq, dk, dvalues, dw_q=dw_q, db=db if params.b is not None else None,
                          dw_k=dw_k, dv=dv)
