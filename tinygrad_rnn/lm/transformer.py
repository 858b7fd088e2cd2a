r"""A Transformer language model (a decoder-only Transformer, as GPT) and its key/value cache
for generation.

For ids w_0 .. w_{T-1} (T <= ``max_len``), d = ``d_model``:

(TF1) x^0_t = E[w_t] + P[t]                      embedding plus a positional encoding
(TF2) x^{l+1} = block_l(x^l), causal             TransformerEncoderLayer, norm_first, with
                                                query t attending to positions s <= t only
(TF3) z_t = W dropout(LN(x^L_t)) + b             logits (V,); W = E with ``tie_weights``

Every position is computed at once in training (the attention is a (T, T) matrix product
under a causal mask), and the loss at t reaches the input at any s <= t through one
attention step: the gradient path has length O(1) whatever t - s.

Key/value cache (incremental decoding)
--------------------------------------
At generation step t, the new token's query attends to the keys and values of every earlier
position. Those depend only on positions <= s (the mask), so they never change once computed:

(TF4) K_l[:t+1] = [K_l[:t]; k_l(x^l_t)],  V_l[:t+1] = [V_l[:t]; v_l(x^l_t)]

and each step computes the new token's row only, reading the cache: O(t d) time and
2 L d numbers more memory per generated token, where a recurrent LM keeps a state of fixed
size. :meth:`TransformerLM.forward_cached` runs (TF1)-(TF3) for new tokens against a
:class:`KVCache`; ``prime``/``advance`` (the protocol of :func:`~tinygrad_rnn.lm.generate`)
use it, and tests/lm/test_sequence_lms.py checks that the logits equal those of the full
forward pass to float64 rounding.

Scoring a long stream uses windows of ``max_len`` ids that overlap by half
(:func:`~tinygrad_rnn.lm.windows.window_log_probs`): the model never sees more than its
context.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import _validate
from ..backend import DEFAULT_FLOAT, get_array_module
from .. import functional as F
from ..nn import init
from ..nn.attention import attend, scaled_dot_scores
from ..nn.module import eval_no_grad
from ..nn._checks import check_ids
from ..nn.layers import Dropout, Embedding, Linear
from ..nn.module import Module
from ..nn.normalization import LayerNorm
from ..nn.positional import LearnedPositionalEncoding, SinusoidalPositionalEncoding
from ..nn.transformer import TransformerEncoder, TransformerEncoderLayer
from ..random import get_generator
from ..creation import cat
from ..tensor import Tensor
from .models import (
    check_vocab_range, check_dropout, host_row, id_array, check_init_range,
)
from .windows import window_log_probs

__all__ = ["TransformerLM", "KVCache"]

POSITIONAL = ("learned", "sinusoidal")


class KVCache:
    """The keys and values (N, nhead, t, d / nhead) of every layer for the t positions read
    so far, eq. (TF4). Made empty by :meth:`TransformerLM.new_cache`; each
    :meth:`TransformerLM.forward_cached` returns a new cache one call longer (the old one is
    left as it was)."""

    def __init__(self, keys: list, values: list, length: int) -> None:
        self.keys, self.values, self.length = keys, values, length

    @property
    def nbytes(self) -> int:
        """Bytes held: 2 L t d numbers, growing linearly with the position t."""
        return sum(int(a._data.nbytes) for a in self.keys + self.values if a is not None)

    def __repr__(self) -> str:
        return f"KVCache(layers={len(self.keys)}, length={self.length}, nbytes={self.nbytes})"


class TransformerLM(Module):
    """A causal Transformer language model, eqs. (TF1)-(TF3), with a key/value cache (TF4).

    Parameters
    ----------
    vocab_size : int
        V.
    d_model : int
        d, the embedding and model width.
    nhead : int
        Attention heads (d divisible by it; default 4).
    num_layers : int
        Transformer blocks (default 2).
    dim_feedforward : int, optional
        Hidden size of the feed-forward blocks (default 4 d).
    dropout : float
        In the blocks (attention weights, feed-forward, residual branches) and on the
        decoder input, training mode only.
    max_len : int
        The context: the longest window the model reads (positions 0 .. max_len - 1).
    positional : {'learned', 'sinusoidal'}
        :class:`~tinygrad_rnn.nn.LearnedPositionalEncoding` (default) or the fixed
        :class:`~tinygrad_rnn.nn.SinusoidalPositionalEncoding`.
    norm_first : bool
        Pre-norm blocks (default True; the final LayerNorm (TF3) is then applied) or the
        paper's post-norm ones (no final norm).
    activation : {'gelu', 'relu'} or callable
        Of the feed-forward blocks (default 'gelu').
    tie_weights : bool
        Use the embedding matrix as the decoder weight.
    init_range, dtype, generator
        As for :class:`~tinygrad_rnn.lm.RNNLM`; every weight matrix of the blocks is drawn
        Xavier-uniform, independently for each block (as ``nn.Transformer`` re-initialises).

    Attributes
    ----------
    embedding : Embedding (V, d)
    positional : LearnedPositionalEncoding or SinusoidalPositionalEncoding
    encoder : TransformerEncoder of TransformerEncoderLayer(batch_first=True), with its final
        LayerNorm when ``norm_first``
    decoder : Linear (d -> V)

    Shapes
    ------
    ids (N, T), T <= max_len -> logits (N, T, V); ``logits[:, t]`` predicts the id after
    ``ids[:, t]``.

    Examples
    --------
    >>> import numpy as np
    >>> model = TransformerLM(vocab_size=10, d_model=8, nhead=2, num_layers=1, max_len=16,
    ...                       generator=0, dtype=np.float64)
    >>> ids = np.array([[1, 2, 3, 4]])
    >>> logits = model(ids)
    >>> cached, cache = model.forward_cached(ids[:, :3], model.new_cache(1))
    >>> step, cache = model.forward_cached(ids[:, 3:], cache)
    >>> bool(np.allclose(step.numpy()[0, 0], logits.numpy()[0, 3], rtol=1e-12)), cache.length
    (True, 4)
    """

    def __init__(self, vocab_size: int, d_model: int, nhead: int = 4, num_layers: int = 2,
                 dim_feedforward: int | None = None, dropout: float = 0.0, max_len: int = 256,
                 positional: str = "learned", norm_first: bool = True,
                 activation: Any = "gelu", tie_weights: bool = False,
                 init_range: float = 0.1, dtype: Any = DEFAULT_FLOAT,
                 generator: Any = None) -> None:
        super().__init__()
        owner = "TransformerLM"
        V = _validate.positive_int(vocab_size, "vocab_size", owner)
        d = _validate.positive_int(d_model, "d_model", owner)
        L = _validate.positive_int(num_layers, "num_layers", owner)
        ff = 4 * d if dim_feedforward is None else _validate.positive_int(
            dim_feedforward, "dim_feedforward", owner)
        p = check_dropout(dropout, owner)
        self.max_len = _validate.positive_int(max_len, "max_len", owner)
        if positional not in POSITIONAL:
            raise ValueError(f"{owner}: positional must be one of {POSITIONAL}, got "
                             f"{positional!r}")
        self.norm_first = _validate.flag(norm_first, "norm_first", owner)
        self.tie_weights = _validate.flag(tie_weights, "tie_weights", owner)
        init_range = check_init_range(init_range, owner)
        rng = get_generator(generator)
        self.vocab_size, self.d_model, self.num_layers = V, d, L
        self.embedding = Embedding(V, d, dtype=dtype, generator=rng)
        init.uniform_(self.embedding.weight, -init_range, init_range, generator=rng)
        self.positional: LearnedPositionalEncoding | SinusoidalPositionalEncoding
        if positional == "learned":
            self.positional = LearnedPositionalEncoding(d, self.max_len, dtype=dtype,
                                                        generator=rng)
        else:
            self.positional = SinusoidalPositionalEncoding(d, self.max_len, dtype=dtype,
                                                           generator=rng)
        layer = TransformerEncoderLayer(d, nhead, ff, dropout=p, activation=activation,
                                        batch_first=True, norm_first=self.norm_first,
                                        dtype=dtype, generator=rng)
        self.encoder = TransformerEncoder(layer, L, norm=LayerNorm(d, dtype=dtype)
                                          if self.norm_first else None,
                                          enable_nested_tensor=False)
        for param in self.encoder.parameters():      # the clones start equal: redraw each
            if param.ndim > 1:
                init.xavier_uniform_(param, generator=rng)
        self.drop = Dropout(p, generator=int(rng.integers(2 ** 63)))
        self.decoder = Linear(d, V, dtype=dtype, generator=rng)
        if self.tie_weights:
            self.decoder.weight = self.embedding.weight        # one Parameter, two uses
        else:
            init.uniform_(self.decoder.weight, -init_range, init_range, generator=rng)
        init.zeros_(self.decoder.bias)

    # ------------------------------------------------------------------ forward
    def _check(self, ids: Any, offset: int, who: str) -> tuple:
        shape = tuple(ids.shape) if hasattr(ids, "shape") else np.shape(ids)
        if len(shape) != 2:
            raise ValueError(f"{who}: expected token ids of shape (N, T), got shape {shape}; "
                             "use ids[None] for one sequence")
        check_ids(who, "ids", ids, self.vocab_size)
        if offset + shape[1] > self.max_len:
            raise ValueError(
                f"{who}: positions {offset} .. {offset + shape[1] - 1} do not fit the context "
                f"max_len = {self.max_len}; feed windows of at most max_len ids (generation: "
                f"prime again with the last ids)")
        return shape

    def forward(self, ids: Any) -> Tensor:
        """Logits (N, T, V) of eqs. (TF1)-(TF3), every position at once under the causal
        mask."""
        self._check(ids, 0, "TransformerLM")
        x = self.positional(self.embedding(ids))                        # (TF1) (N, T, d)
        h = self.encoder(x, is_causal=True)                             # (TF2)
        return self.decoder(self.drop(h))                               # (TF3) (N, T, V)

    def log_probs(self, ids: Any) -> Tensor:
        """log_softmax of the logits: ids (T,) give (T, V), ids (N, T) give (N, T, V).
        Differentiable, run in the current mode."""
        arr = ids if isinstance(ids, Tensor) else np.asarray(ids)
        single = arr.ndim == 1
        lp = F.log_softmax(self(arr.reshape(1, -1) if single else arr), axis=-1)
        return lp[0] if single else lp

    def token_log_probs(self, ids: Any, overlap: int | None = None) -> np.ndarray:
        """log p(ids[t] | window before t) for t = 1 .. T - 1 (nats), (T - 1,) float64:
        windows of ``max_len`` ids overlapping by ``overlap`` (default max_len // 2), so every
        token after the first window has at least ``overlap`` tokens of context; eval mode,
        no graph."""
        owner = "TransformerLM.token_log_probs"
        arr = id_array(ids, owner, (1,))
        check_vocab_range(arr, self.vocab_size, owner)
        k = self.max_len // 2 if overlap is None else overlap
        with eval_no_grad(self):
            return window_log_probs(self, arr, self.max_len, k)

    # ------------------------------------------------------------------ the cache
    def new_cache(self, batch_size: int) -> KVCache:
        """An empty cache for ``batch_size`` sequences (no position read yet)."""
        _validate.positive_int(batch_size, "batch_size", "TransformerLM.new_cache")
        return KVCache([None] * self.num_layers, [None] * self.num_layers, 0)

    def _attend_cached(self, layer: Module, h: Tensor, k_old: Any, v_old: Any,
                       offset: int) -> tuple:
        """The layer's self-attention of the new rows h (N, t, d) over the cached keys and
        values plus their own, (TF4); returns (output (N, t, d), keys, values)."""
        attn = layer.self_attn
        n, t = h.shape[0], h.shape[1]
        q, k, v = attn.in_projections(h, h, h)                             # (N, t, d) each
        q, k, v = attn.split_heads(q), attn.split_heads(k), attn.split_heads(v)        # (N, nh, t, dh)
        keys = k if k_old is None else cat([k_old, k], axis=2)          # (TF4)
        values = v if v_old is None else cat([v_old, v], axis=2)
        xp = get_array_module(h._data)
        # query i sits at position offset + i and may read keys at positions <= it
        keep = xp.arange(offset + t)[None, :] <= (offset + xp.arange(t))[:, None]
        o, _ = attend(scaled_dot_scores(q, keys), values, keep[None, None])
        o = o.transpose(0, 2, 1, 3).reshape(n, t, self.d_model)
        return attn.out_proj(o), keys, values

    def forward_cached(self, ids: Any, cache: KVCache) -> tuple[Tensor, KVCache]:
        """Logits (N, t, V) of ``t`` new ids (N, t) that follow the ``cache.length`` positions
        in ``cache``, and the cache extended by them, eq. (TF4): equal to the last t rows of
        the full forward pass over all the ids (to rounding).

        For generation and scoring: run it in eval mode (dropout in training mode would
        differ from the full pass, so a model in training mode with dropout is refused)."""
        who = "TransformerLM.forward_cached"
        if not isinstance(cache, KVCache):
            raise TypeError(f"{who}: cache must be a KVCache (model.new_cache(N) or one "
                            f"returned by a previous call), got {type(cache).__name__}")
        if self.training and self.drop.p > 0:
            raise RuntimeError(f"{who}: the model is in training mode with dropout "
                               f"{self.drop.p}; call model.eval() first")
        n, t = self._check(ids, cache.length, who)
        for k_old in cache.keys:
            if k_old is not None and k_old.shape[0] != n:
                raise ValueError(f"{who}: the cache holds {k_old.shape[0]} sequences, ids "
                                 f"have {n}")
        offset = cache.length
        x = self.positional(self.embedding(ids), offset=offset)         # (TF1)
        keys, values = [], []
        for i, layer in enumerate(self.encoder.layers):
            if self.norm_first:
                a, k, v = self._attend_cached(layer, layer.norm1(x), cache.keys[i],
                                              cache.values[i], offset)
                x = x + layer.dropout1(a)
                x = x + layer._ff_block(layer.norm2(x))
            else:
                a, k, v = self._attend_cached(layer, x, cache.keys[i], cache.values[i],
                                              offset)
                x = layer.norm1(x + layer.dropout1(a))
                x = layer.norm2(x + layer._ff_block(x))
            keys.append(k)
            values.append(v)
        if self.encoder.norm is not None:
            x = self.encoder.norm(x)
        return self.decoder(self.drop(x)), KVCache(keys, values, offset + t)    # (TF3)

    # ------------------------------------------------------------------ generation protocol
    def prime(self, prompt_ids: np.ndarray) -> tuple[np.ndarray, KVCache]:
        """Read a 1-D prompt into an empty cache; the logits (V,) for the next token and the
        cache (the state of :func:`~tinygrad_rnn.lm.generate`)."""
        ids = np.asarray(prompt_ids, dtype=np.int64)[None]
        with eval_no_grad(self):
            logits, cache = self.forward_cached(ids, self.new_cache(1))
        return host_row(logits._data[0, -1]), cache

    def advance(self, token_id: int, cache: KVCache) -> tuple[np.ndarray, KVCache]:
        """Feed one token: its query attends to the cached keys and values; returns the next
        logits (V,) and the cache one position longer."""
        with eval_no_grad(self):
            logits, cache = self.forward_cached(np.array([[token_id]], dtype=np.int64), cache)
        return host_row(logits._data[0, -1]), cache

    def extra_repr(self) -> str:
        return (f"vocab_size={self.vocab_size}, d_model={self.d_model}, "
                f"num_layers={self.num_layers}, max_len={self.max_len}, "
                f"norm_first={self.norm_first}, tie_weights={self.tie_weights}")
