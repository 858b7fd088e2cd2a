"""Attention: four score functions, masked softmax over keys, and multi-head attention.

Everything here is composed of primitive ops (matmul, tanh, the masked
:class:`~tinygrad_rnn.ops.Softmax`, reshapes), so autograd differentiates it; the docstrings
write the derivatives out so they can be checked by hand. The derivation, with numbered
equations, is docs/attention.md.

* :class:`Attention`: one-head attention with a choice of score, for encoder-decoder models:
  ``'dot'`` and ``'bilinear'`` (Luong et al. 2015's "dot" and "general"), ``'scaled_dot'``
  (Vaswani et al. 2017) and ``'additive'`` (Bahdanau et al. 2015).
* :class:`MultiheadAttention`: ``torch.nn.MultiheadAttention``'s signature, parameters,
  ``state_dict`` keys and layouts.
* :class:`CausalSelfAttention`: batch-first causal self-attention for language models.

Mask conventions (torch's, for both classes)
--------------------------------------------
* ``key_padding_mask`` (N, Tk), boolean: **True marks a padding key**, one that no query may
  attend to.
* ``attn_mask`` (Tq, Tk), boolean: **True marks a pair that is not allowed** (query i may not
  attend to key j). A float ``attn_mask`` is added to the scores; its ``-inf`` entries count
  as not allowed.
* ``causal`` / ``is_causal``: query i may attend to keys j <= i (top-left aligned when
  Tq != Tk, as torch).

Internally these become one boolean *keep* mask (True = takes part), the convention of
:func:`tinygrad_rnn.functional.softmax`. A masked pair gets weight exactly 0 and its score
gradient exactly 0. A query whose keys are all masked (a fully masked row) gets all-zero
weights, a zero context and zero gradients, never NaN (torch gives NaN there). Keys and
values at padding positions are replaced by zeros before they are used, so whatever they
hold (inf and NaN included) reaches no output and no gradient; their gradient is exactly 0.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import _validate
from .. import functional as F
from ..backend import DEFAULT_FLOAT, get_array_module
from ..random import get_generator
from ..creation import cat, split
from ..tensor import Tensor
from . import _checks as checks
from . import _masks as masks
from . import init
from ._masks import keep_mask
from .layers import Linear, dtype_note
from .module import Module, Parameter

__all__ = [
    "Attention", "MultiheadAttention", "CausalSelfAttention", "dot_scores",
    "scaled_dot_scores", "bilinear_scores", "additive_scores", "attend", "keep_mask",
]

SCORES = ("dot", "scaled_dot", "bilinear", "additive")


# ------------------------------------------------------------------------- score functions
def dot_scores(q: Tensor, k: Tensor) -> Tensor:
    """Dot-product scores s_ij = q_i^T k_j (Luong's "dot").

    Math
    ----
    Forward: S = Q K^T, Q (.., Tq, D), K (.., Tk, D) -> S (.., Tq, Tk).

    Derivatives of one score: ds_ij/dq_i = k_j and ds_ij/dk_j = q_i (and 0 for every other
    query or key). With G = dL/dS:

    dL/dq_i = sum_j G_ij k_j, i.e. dQ = G K;    dL/dk_j = sum_i G_ij q_i, i.e. dK = G^T Q.

    The query and key sizes must be equal (docs/attention.md, eqs. A3-A4).
    """
    return q @ k.swapaxes(-1, -2)  # S = Q K^T; its backward (A4) by autograd


def scaled_dot_scores(q: Tensor, k: Tensor) -> Tensor:
    """Scaled dot-product scores s_ij = q_i^T k_j / sqrt(d), d the key size (Vaswani et al.).

    Math
    ----
    Forward: S = Q K^T / sqrt(d).

    Derivatives: ds_ij/dq_i = k_j / sqrt(d), ds_ij/dk_j = q_i / sqrt(d). With G = dL/dS:
    dQ = G K / sqrt(d), dK = G^T Q / sqrt(d).

    The 1/sqrt(d) keeps the scores' variance near 1 when q and k have unit-variance entries,
    so the softmax does not saturate as d grows (docs/attention.md, eq. A5).
    """
    d = q.shape[-1]
    return (q * (1.0 / math.sqrt(d))) @ k.swapaxes(-1, -2)


def bilinear_scores(q: Tensor, k: Tensor, weight: Tensor) -> Tensor:
    """Bilinear scores s_ij = q_i^T W k_j (Luong's "general"); W has shape (Dq, Dk).

    Math
    ----
    Forward: S = Q W K^T, computed as (Q W) K^T.

    Derivatives: ds_ij/dq_i = W k_j, ds_ij/dk_j = W^T q_i, ds_ij/dW = q_i k_j^T. With
    G = dL/dS: dQ = G K W^T, dK = G^T Q W, dW = sum over the batch of Q^T G K
    (docs/attention.md, eq. A6).
    """
    return (q @ weight) @ k.swapaxes(-1, -2)


def additive_scores(q: Tensor, k: Tensor, query_proj: Linear, key_proj: Linear,
                    v: Tensor) -> Tensor:
    """Additive scores s_ij = v^T tanh(W_q q_i + b + W_k k_j) (Bahdanau's, "concat").

    Math
    ----
    Forward: a_ij = W_q q_i + b + W_k k_j (hidden size H), u_ij = tanh(a_ij), s_ij = v^T u_ij.
    The query and key projections are computed once each (Tq + Tk products, not Tq * Tk);
    the broadcast sum a has shape (.., Tq, Tk, H).

    Derivatives of one score, with r_ij = v * (1 - u_ij^2) (elementwise; tanh' in the output):
    ds_ij/dq_i = W_q^T r_ij, ds_ij/dk_j = W_k^T r_ij, ds_ij/dv = u_ij, ds_ij/db = r_ij,
    ds_ij/dW_q = r_ij q_i^T, ds_ij/dW_k = r_ij k_j^T. With G = dL/dS:
    dq_i = W_q^T sum_j G_ij r_ij, dk_j = W_k^T sum_i G_ij r_ij (docs/attention.md, eq. A7).

    A bias added after v^T would shift every score of a query by the same amount, which the
    softmax cancels (its gradient is identically 0), so there is none; ``b`` is the bias of
    ``query_proj``.
    """
    qp = query_proj(q)                                  # (.., Tq, H)
    kp = key_proj(k)                                    # (.., Tk, H)
    a = qp.unsqueeze(-2) + kp.unsqueeze(-3)             # (.., Tq, Tk, H)
    return a.tanh() @ v                                 # (.., Tq, Tk)


# ------------------------------------------------------------------------- softmax and sum
def attend(scores: Tensor, values: Tensor, keep: Any = None, dropout: float = 0.0,
           training: bool = False, generator: Any = None) -> tuple[Tensor, Tensor]:
    """Softmax over keys, then the weighted sum of the values.

    Math
    ----
    alpha_i = softmax(s_i) over the kept keys of query i (masked keys get alpha_ij = 0),
    c_i = sum_j alpha_ij v_j, i.e. C = A V.

    Softmax-over-keys Jacobian (one query, kept keys): d alpha_j / d s_l = alpha_j
    (delta_jl - alpha_l), i.e. J = diag(alpha) - alpha alpha^T (symmetric; a masked key's row
    and column are 0). VJP with g = dL/dalpha_i: dL/ds_ij = alpha_ij (g_j - sum_l alpha_il
    g_l), exactly 0 where alpha_ij = 0, so masked pairs and fully masked rows send back exactly
    zero gradient. Weighted sum: dA = G_C V^T, dV = A^T G_C (docs/attention.md, eqs. A8-A11).

    Parameters
    ----------
    scores : Tensor (.., Tq, Tk)
    values : Tensor (.., Tk, Dv)
    keep : bool array broadcastable to scores, optional
        True = takes part.
    dropout, training, generator
        Dropout on the weights (inverted, in training mode only), before the weighted sum.

    Returns
    -------
    (context (.., Tq, Dv), weights (.., Tq, Tk))
        The weights returned are those used for the context (after dropout, as torch).
    """
    weights = F.softmax(scores, axis=-1, mask=keep)
    if dropout > 0.0 and training:
        weights = F.dropout(weights, dropout, True, generator=generator)
    return weights @ values, weights


def _own_generator(generator: Any) -> np.random.Generator:
    """A generator owned by a layer (see :class:`tinygrad_rnn.nn.Dropout`)."""
    if generator is not None:
        return get_generator(generator)
    default = get_generator(None)
    try:
        return default.spawn(1)[0]
    except (AttributeError, TypeError, ValueError):
        return np.random.default_rng(int(default.integers(2 ** 63)))


# ------------------------------------------------------------------------- Attention
class Attention(Module):
    """One-head attention of queries over keys and values, with a choice of score.

    Parameters
    ----------
    score : {'dot', 'scaled_dot', 'bilinear', 'additive'}
        ``'dot'``: s = q^T k (:func:`dot_scores`; needs query_size == key_size).
        ``'scaled_dot'``: s = q^T k / sqrt(d) (:func:`scaled_dot_scores`; same sizes).
        ``'bilinear'``: s = q^T W k, W (query_size, key_size) (:func:`bilinear_scores`).
        ``'additive'``: s = v^T tanh(W_q q + b + W_k k) (:func:`additive_scores`).
    query_size, key_size : int
        Dq and Dk.
    value_size : int, optional
        Dv; when given, values are checked to have it. Attention does not project values.
    hidden_size : int, optional
        H of the additive score (default key_size); only for ``'additive'``.
    bias : bool
        Learn the bias b of the additive score (default True). The other scores have no
        bias: a constant added to every score of a query is cancelled by the softmax.
    dtype, generator
        Parameter dtype (default float32) and the source of the initial values.

    Attributes
    ----------
    weight : Parameter (query_size, key_size)
        ``'bilinear'`` only; U(-1/sqrt(key_size), 1/sqrt(key_size)).
    query_proj : Linear(query_size, hidden_size, bias)
        ``'additive'`` only: W_q and b.
    key_proj : Linear(key_size, hidden_size, bias=False)
        ``'additive'`` only: W_k.
    v : Parameter (hidden_size,)
        ``'additive'`` only; U(-1/sqrt(H), 1/sqrt(H)).

    Math
    ----
    s_ij = score(q_i, k_j); alpha_i = softmax over the kept keys of s_i; c_i = sum_j alpha_ij
    v_j. Gradients of each score w.r.t. q and k are written in the score functions'
    docstrings; the softmax-over-keys Jacobian J = diag(alpha) - alpha alpha^T and the
    weighted sum's VJP in :func:`attend`. docs/attention.md derives them all.

    Shapes
    ------
    forward(query (N, Tq, Dq), keys (N, Tk, Dk), values (N, Tk, Dv)) -> (context (N, Tq, Dv),
    weights (N, Tq, Tk)). A single query (N, Dq) gives context (N, Dv) and weights (N, Tk)
    (one decoder step). query, keys and values share one dtype, the parameters' for
    ``'bilinear'`` and ``'additive'``: anything else is a TypeError (as in torch), not a
    silent float64 result from a float32 model.

    Masks (see the module docstring): ``key_padding_mask`` (N, Tk), **True = padding**;
    ``attn_mask`` (Tq, Tk) or (N, Tq, Tk), boolean, **True = not allowed**; ``causal=True``
    lets query i see keys j <= i. A fully masked row gives zero weights, a zero context and
    zero gradients, never NaN.

    Examples
    --------
    >>> import numpy as np
    >>> import tinygrad_rnn as tr
    >>> att = tr.nn.Attention("scaled_dot", 4, 4)
    >>> q, k = tr.randn(2, 3, 4, generator=0), tr.randn(2, 5, 4, generator=1)
    >>> context, weights = att(q, k, k, key_padding_mask=np.array([[0, 0, 0, 1, 1]] * 2, bool))
    >>> context.shape, weights.shape, float(weights.numpy()[..., 3:].max())
    ((2, 3, 4), (2, 3, 5), 0.0)
    """

    def __init__(self, score: str, query_size: int, key_size: int,
                 value_size: int | None = None, hidden_size: int | None = None,
                 bias: bool = True, dtype: Any = DEFAULT_FLOAT, generator: Any = None) -> None:
        super().__init__()
        bias, query_size, key_size, value_size, hidden_size, dt = checks.check_attention_args(
            score, SCORES, query_size, key_size, value_size, hidden_size, bias, dtype)
        self.score = score
        self.query_size, self.key_size = query_size, key_size
        self.value_size = value_size
        rng = get_generator(generator)
        if score == "bilinear":
            self.weight = Parameter(np.zeros((query_size, key_size), dtype=dt))
            bound = 1.0 / math.sqrt(key_size)
            init.uniform_(self.weight, -bound, bound, generator=rng)
        elif score == "additive":
            h = key_size if hidden_size is None else hidden_size
            self.hidden_size = h
            self.query_proj = Linear(query_size, h, bias=bias, dtype=dt, generator=rng)
            self.key_proj = Linear(key_size, h, bias=False, dtype=dt, generator=rng)
            self.v = Parameter(np.zeros((h,), dtype=dt))
            init.uniform_(self.v, -1.0 / math.sqrt(h), 1.0 / math.sqrt(h), generator=rng)

    def scores(self, query: Tensor, keys: Tensor) -> Tensor:
        """Raw scores s_ij (N, Tq, Tk) of the chosen score function (no mask applied)."""
        if self.score == "dot":
            return dot_scores(query, keys)
        if self.score == "scaled_dot":
            return scaled_dot_scores(query, keys)
        if self.score == "bilinear":
            return bilinear_scores(query, keys, self.weight)
        return additive_scores(query, keys, self.query_proj, self.key_proj, self.v)

    def forward(self, query: Tensor, keys: Tensor, values: Tensor,
                key_padding_mask: Any = None, attn_mask: Any = None,
                causal: bool = False) -> tuple[Tensor, Tensor]:
        """Attend ``query`` over ``keys``/``values``; returns (context, weights).

        Parameters
        ----------
        query : Tensor (N, Tq, Dq) or (N, Dq)
        keys : Tensor (N, Tk, Dk)
        values : Tensor (N, Tk, Dv)
        key_padding_mask : bool array (N, Tk), optional
            **True marks a padding key** (ignored by every query), as torch's
            ``key_padding_mask``. Padded keys and values may hold anything, inf and NaN
            included: they are zeroed before use and get exactly zero gradient.
        attn_mask : bool array (Tq, Tk) or (N, Tq, Tk), optional
            **True marks a pair that is not allowed**, as torch's boolean ``attn_mask``. A
            float mask is added to the scores (``-inf`` = not allowed).
            Both masks may be host arrays (NumPy, lists: copied to the inputs' device) or
            Tensors/arrays on the inputs' device; one on another device raises a
            RuntimeError naming both devices.
        causal : bool
            Query i attends to keys j <= i only (needs a query sequence).

        Returns
        -------
        (context (N, Tq, Dv), weights (N, Tq, Tk)), or (N, Dv) and (N, Tk) for a single query.
        """
        causal = checks.check_attention_inputs(self, query, keys, values, causal)
        keep, add, pad = masks.attention_masks("Attention", query, keys, key_padding_mask,
                                               attn_mask, causal)
        single = query.ndim == 2
        if single:
            query = query.unsqueeze(1)                                  # (N, 1, Dq)
        keys = masks.zero_padding(keys, pad)                            # (N, Tk, Dk)
        values = masks.zero_padding(values, pad)                        # (N, Tk, Dv)
        s = self.scores(query, keys)                                    # (N, Tq, Tk)
        if add is not None:
            s = s + Tensor._wrap(add)
        context, weights = attend(s, values, keep)
        if single:
            return context.squeeze(1), weights.squeeze(1)
        return context, weights

    def extra_repr(self) -> str:
        s = f"{self.score!r}, query_size={self.query_size}, key_size={self.key_size}"
        if self.value_size is not None:
            s += f", value_size={self.value_size}"
        if self.score == "additive":
            s += f", hidden_size={self.hidden_size}, bias={self.query_proj.bias is not None}"
        first = next(iter(self.parameters()), None)
        return s + ("" if first is None else dtype_note(first.dtype))


# ------------------------------------------------------------------------- multi-head
class MultiheadAttention(Module):
    """Multi-head attention, as ``torch.nn.MultiheadAttention`` (signature, parameter names
    and shapes, ``state_dict`` keys, input and output layouts).

    Parameters
    ----------
    embed_dim : int
        E, the size of queries and outputs.
    num_heads : int
        h; E must be divisible by it (head size d = E / h).
    dropout : float
        Dropout probability on the attention weights, in training mode only.
    bias : bool
        Learn ``in_proj_bias`` and ``out_proj.bias`` (default True).
    add_bias_kv : bool
        Learn ``bias_k`` and ``bias_v`` (1, 1, E), appended to the projected keys and values as
        one extra position that no mask hides.
    add_zero_attn : bool
        Append a zero key and a zero value (after ``bias_k``/``bias_v``), never masked.
    kdim, vdim : int, optional
        Sizes of the key and value inputs (default E).
    batch_first : bool
        Inputs and output are (N, L, E) instead of (L, N, E).
    dtype, generator
        Parameter dtype (default float32) and the source of the initial values (and of the
        dropout masks: the layer spawns its own generator, as :class:`~tinygrad_rnn.nn.Dropout`).

    Attributes
    ----------
    in_proj_weight : Parameter (3E, E)
        Rows [W_q; W_k; W_v], when kdim == vdim == E; otherwise ``q_proj_weight`` (E, E),
        ``k_proj_weight`` (E, kdim) and ``v_proj_weight`` (E, vdim). Xavier-uniform, as torch.
    in_proj_bias : Parameter (3E,)
        Zeros at initialisation (absent without bias).
    bias_k, bias_v : Parameter (1, 1, E)
        With ``add_bias_kv``; Xavier-normal.
    out_proj : Linear(E, E, bias)
        Its bias starts at zero, as torch's.

    Math
    ----
    Q = query W_q^T + b_q, K = key W_k^T + b_k, V = value W_v^T + b_v; for head m, with
    Q_m the columns m*d:(m+1)*d of Q: A_m = softmax_keys(Q_m K_m^T / sqrt(d)), O_m = A_m V_m;
    output = [O_1 .. O_h] W_o^T + b_o. The heads are reshapes, not loops: (N, L, E) ->
    (N, L, h, d) -> (N, h, L, d) (docs/attention.md, eqs. A12-A14).

    Shapes
    ------
    query (L, N, E), key (S, N, kdim), value (S, N, vdim) (or batch-first, or unbatched
    (L, E)) -> attn_output of query's layout, attn_weights (N, L, S) averaged over heads or
    (N, h, L, S) with ``average_attn_weights=False`` ((L, S) / (h, L, S) unbatched).

    Notes
    -----
    Masks as torch: ``key_padding_mask`` (N, S) True = padding ((S,) for unbatched input);
    ``attn_mask`` (L, S) or (N*h, L, S), boolean True = not allowed, or float (added; any
    other dtype is a TypeError, integers included); ``is_causal`` applies the
    causal mask (combined with ``attn_mask`` when both are given; torch takes ``is_causal``
    only as a hint that ``attn_mask`` is causal and requires it). A fully masked row gives
    zero weights and zero gradient (torch gives NaN); its output is ``out_proj.bias``. The
    returned weights are those after dropout, as torch's. query, key and value must have the
    parameters' dtype (a TypeError naming the input otherwise, as in torch).
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False,
                 kdim: int | None = None, vdim: int | None = None, batch_first: bool = False,
                 dtype: Any = DEFAULT_FLOAT, generator: Any = None) -> None:
        super().__init__()
        (embed_dim, num_heads, dropout, bias, add_bias_kv, add_zero_attn, kdim, vdim,
         batch_first, dt) = checks.check_multihead_args(
            embed_dim, num_heads, dropout, bias, add_bias_kv, add_zero_attn, kdim, vdim,
            batch_first, dtype)
        e = embed_dim
        self.embed_dim, self.num_heads, self.head_dim = e, num_heads, e // num_heads
        self.kdim = e if kdim is None else kdim
        self.vdim = e if vdim is None else vdim
        self._qkv_same_embed_dim = self.kdim == e and self.vdim == e
        self.dropout = float(dropout)
        self.batch_first = bool(batch_first)
        self.add_zero_attn = bool(add_zero_attn)
        rng = get_generator(generator)
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(np.zeros((3 * e, e), dtype=dt))
            init.xavier_uniform_(self.in_proj_weight, generator=rng)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.register_parameter("in_proj_weight", None)
            self.q_proj_weight = Parameter(np.zeros((e, e), dtype=dt))
            self.k_proj_weight = Parameter(np.zeros((e, self.kdim), dtype=dt))
            self.v_proj_weight = Parameter(np.zeros((e, self.vdim), dtype=dt))
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w, generator=rng)
        if bias:
            self.in_proj_bias = Parameter(np.zeros((3 * e,), dtype=dt))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(e, e, bias=bias, dtype=dt, generator=rng)
        if bias:
            init.zeros_(self.out_proj.bias)
        self.bias_k: Parameter | None
        self.bias_v: Parameter | None
        if add_bias_kv:
            self.bias_k = Parameter(np.zeros((1, 1, e), dtype=dt))
            self.bias_v = Parameter(np.zeros((1, 1, e), dtype=dt))
            init.xavier_normal_(self.bias_k, generator=rng)
            init.xavier_normal_(self.bias_v, generator=rng)
        else:
            self.bias_k = self.bias_v = None
        self._generator = _own_generator(None if generator is None else rng)

    # -------------------------------------------------------------- projections
    def in_projections(self, query: Tensor, key: Tensor, value: Tensor) -> tuple:
        """Q, K, V (N, *, E), each x W^T + b with its block of the weights and bias (a project
        method, not torch's: the Transformer LM's key/value cache projects one new token with
        it)."""
        e = self.embed_dim
        b = self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else (b[:e], b[e:2 * e], b[2 * e:])
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            if query is key and key is value:                    # self-attention: one GEMM
                qkv = F.linear(query, w, b)                      # (N, L, 3E)
                return split(qkv, e, axis=-1)
            wq, wk, wv = w[:e], w[e:2 * e], w[2 * e:]
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        # (A12); their backward, by autograd, is (A15)
        return F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)

    def split_heads(self, x: Tensor) -> Tensor:
        """(N, T, E) -> (N, h, T, d): the heads as a batch axis (a project method, not
        torch's)."""
        n, t = x.shape[0], x.shape[1]
        return x.reshape(n, t, self.num_heads, self.head_dim).transpose(0, 2, 1, 3)  # (A13)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Any = None,
                need_weights: bool = True, attn_mask: Any = None,
                average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        """Returns (attn_output, attn_weights), as torch's (weights None unless
        ``need_weights``)."""
        who = "MultiheadAttention"
        need_weights, average_attn_weights, is_causal, batched = checks.check_multihead_inputs(
            self, query, key, value, need_weights, average_attn_weights, is_causal)
        # masks given on the host are copied to the inputs' device once, here
        xp = get_array_module(query._data)
        if key_padding_mask is not None:
            key_padding_mask = masks.as_array(key_padding_mask, xp, who, "key_padding_mask")
        if attn_mask is not None:
            attn_mask = masks.as_array(attn_mask, xp, who, "attn_mask")
        if not batched:                                      # (L, E) -> (N=1, L, E)
            self_attn = query is key and key is value
            query = query.unsqueeze(0)
            key, value = (query, query) if self_attn else (key.unsqueeze(0), value.unsqueeze(0))
            if key_padding_mask is not None:                 # (S,) -> (1, S)
                checks.check_unbatched_padding_mask(who, key, key_padding_mask)
                key_padding_mask = key_padding_mask[None]
        elif not self.batch_first:                           # (L, N, E) -> (N, L, E)
            same_kv = key is value
            self_attn = query is key and same_kv
            query = query.swapaxes(0, 1)
            if self_attn:
                key = value = query
            else:
                key = key.swapaxes(0, 1)
                value = key if same_kv else value.swapaxes(0, 1)
        n, tgt, src = query.shape[0], query.shape[1], key.shape[1]
        extra = int(self.bias_k is not None) + int(self.add_zero_attn)   # appended keys
        keep, add = masks.multihead_masks(n, self.num_heads, tgt, src, key_padding_mask,
                                          attn_mask, is_causal, extra, xp, query.dtype)
        # padded key/value inputs are zeroed before the projections, so inf/NaN there reach
        # neither the outputs nor any gradient (their projected rows are then the biases,
        # which the softmax mask hides)
        key = masks.zero_padding(key, key_padding_mask)
        value = masks.zero_padding(value, key_padding_mask)
        q, k, v = self.in_projections(query, key, value)                  # (N, *, E)
        if self.bias_k is not None and self.bias_v is not None:  # add_bias_kv: both or none
            k = cat([k, self.bias_k.broadcast_to((n, 1, self.embed_dim))], axis=1)
            v = cat([v, self.bias_v.broadcast_to((n, 1, self.embed_dim))], axis=1)
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)       # (N, h, *, d)
        if self.add_zero_attn:
            zero = Tensor._wrap(xp.zeros((n, self.num_heads, 1, self.head_dim), k.dtype))
            k, v = cat([k, zero], axis=2), cat([v, zero], axis=2)
        s = scaled_dot_scores(q, k)                                     # (A14) (N, h, L, S')
        if add is not None:
            s = s + Tensor._wrap(add)
        o, weights = attend(s, v, keep, self.dropout, self.training, self._generator)
        o = o.transpose(0, 2, 1, 3).reshape(n, tgt, self.embed_dim)     # (N, L, E)
        out = self.out_proj(o)                                          # (A14) [O_1..O_h] W_o^T
        if not batched:
            out = out.squeeze(0)
        elif not self.batch_first:
            out = out.swapaxes(0, 1)
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = weights.mean(axis=1)                              # (N, L, S')
        return out, (weights.squeeze(0) if not batched else weights)

    def extra_repr(self) -> str:
        s = f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if not self._qkv_same_embed_dim:
            s += f", kdim={self.kdim}, vdim={self.vdim}"
        if self.batch_first:
            s += ", batch_first=True"
        return s + dtype_note(self.out_proj.weight.dtype)


class CausalSelfAttention(Module):
    """Causal multi-head self-attention over a batch-first sequence (a language-model layer).

    Query i attends to positions j <= i of the same sequence: :class:`MultiheadAttention`
    (held as ``attn``, so the ``state_dict`` keys are ``attn.in_proj_weight``, ...) called
    with ``is_causal=True`` and ``batch_first=True``.

    Parameters
    ----------
    embed_dim, num_heads, dropout, bias, dtype, generator
        As for :class:`MultiheadAttention`.

    Shapes
    ------
    x (N, T, E) -> output (N, T, E); with ``need_weights=True`` also the weights (N, T, T)
    (averaged over heads) or (N, h, T, T). x must have the parameters' dtype.
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 dtype: Any = DEFAULT_FLOAT, generator: Any = None) -> None:
        super().__init__()
        embed_dim, num_heads, dropout = checks.check_heads("CausalSelfAttention", embed_dim,
                                                           num_heads, dropout)
        bias = _validate.flag(bias, "bias", "CausalSelfAttention")
        self.attn = MultiheadAttention(embed_dim, num_heads, dropout=dropout, bias=bias,
                                       batch_first=True, dtype=dtype, generator=generator)

    def forward(self, x: Tensor, key_padding_mask: Any = None, need_weights: bool = False,
                average_attn_weights: bool = True) -> Any:
        """Returns the output (N, T, E), or (output, weights) when ``need_weights``."""
        x = checks.check_causal_self_attention_input(x, self.attn.out_proj.weight.dtype)
        out, weights = self.attn(x, x, x, key_padding_mask=key_padding_mask,
                                 need_weights=need_weights,
                                 average_attn_weights=average_attn_weights, is_causal=True)
        return (out, weights) if need_weights else out
