r"""Positional encodings: the order information that attention lacks (a project extension;
torch has no such modules, its tutorials write them by hand).

Self-attention is permutation-equivariant: permuting the tokens of a sequence permutes its
outputs the same way, so without help it cannot tell "dog bites man" from "man bites dog".
Adding a vector that depends on the position to each token's embedding breaks the symmetry
(docs/sequence_models.md, (PE1)-(PE2)):

* :class:`SinusoidalPositionalEncoding` (Vaswani et al. 2017), a fixed buffer, nothing
  learned:

      PE[p, 2i] = sin(p / 10000^(2i / E)),   PE[p, 2i + 1] = cos(p / 10000^(2i / E))   (PE1)

  Each pair of columns is a rotation by the angle p w_i, so PE[p + k] is a fixed linear map
  (rotation by k w_i per pair) of PE[p], for every p: relative offsets are linear functions.
* :class:`LearnedPositionalEncoding`, one learned vector per position, an
  :class:`~tinygrad_rnn.nn.Embedding` of the positions 0 .. max_len - 1 (GPT's):

      out[n, t] = x[n, t] + P[offset + t]                                                (PE2)

  whose gradient dL/dP[p] is the sum over the batch of dL/dout at position p.

Both take ``offset``, the position of the first step of ``x``, so that a generator with a
key/value cache adds the encoding of the position the new token really has.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import _validate
from ..tensor import Tensor
from . import init
from ._checks import check_generator, check_input_dtype, float_dtype
from .layers import Dropout, Embedding, as_input, place
from .module import Module

__all__ = ["SinusoidalPositionalEncoding", "LearnedPositionalEncoding", "sinusoidal_table"]


def sinusoidal_table(max_len: int, d_model: int, dtype: Any = np.float64) -> np.ndarray:
    """The table PE of (PE1), shape (max_len, d_model): sines in the even columns, cosines in
    the odd ones, frequencies w_i = 10000^(-2i / d_model) (an odd d_model has one sine more
    than cosines)."""
    positions = np.arange(max_len, dtype=np.float64)[:, None]                # (P, 1)
    freqs = np.exp(-math.log(10000.0) * np.arange(0, d_model, 2) / d_model)  # (ceil(E/2),)
    angles = positions * freqs                                               # (P, ceil(E/2))
    table = np.zeros((max_len, d_model))
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles[:, : d_model // 2])
    return table.astype(dtype)


class _PositionalEncoding(Module):
    """What both encodings share: the checks, the offset and the dropout."""

    def _setup(self, who: str, d_model: Any, max_len: Any, dropout: Any,
               batch_first: Any, generator: Any) -> np.random.Generator:
        """Check the shared arguments, make the dropout; returns the generator."""
        self.d_model = _validate.size(d_model, "d_model", who)
        self.max_len = _validate.size(max_len, "max_len", who)
        self.batch_first = _validate.flag(batch_first, "batch_first", who)
        rng = check_generator(generator, who)
        self.dropout = Dropout(_validate.probability(dropout, "dropout", who),
                               generator=int(rng.integers(2 ** 63)))
        return rng

    def _rows(self, x: Any, offset: Any) -> tuple[Tensor, int, int]:
        """x checked, its sequence length T and the first position (offset)."""
        who = type(self).__name__
        x = as_input(x, "x", who)
        if x.ndim not in (2, 3) or x.shape[-1] != self.d_model:
            layout = "(N, T, E)" if self.batch_first else "(T, N, E)"
            raise ValueError(f"{who}: expected x of shape {layout} or (T, E) with E = d_model "
                             f"= {self.d_model}, got shape {x.shape}")
        if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or offset < 0:
            raise ValueError(f"{who}: offset must be an integer >= 0, got {offset!r}")
        t = x.shape[1] if (x.ndim == 3 and self.batch_first) else x.shape[0]
        if offset + t > self.max_len:
            raise ValueError(f"{who}: positions {offset} .. {offset + t - 1} are beyond "
                             f"max_len = {self.max_len}; build the encoding with a larger "
                             f"max_len (or feed shorter windows)")
        return x, t, int(offset)

    def _add(self, x: Tensor, rows: Tensor) -> Tensor:
        """x + rows (T, E), broadcast over the batch in either layout, then dropout."""
        if x.ndim == 3 and not self.batch_first:
            rows = rows.reshape(rows.shape[0], 1, rows.shape[1])              # (T, 1, E)
        return self.dropout(x + rows)


class SinusoidalPositionalEncoding(_PositionalEncoding):
    """x + PE[offset : offset + T] with the fixed sinusoids of (PE1), then dropout.

    Parameters
    ----------
    d_model : int
        E, the feature size.
    max_len : int
        The number of positions tabulated (default 5000).
    dropout : float
        On the sum, in training mode (default 0).
    batch_first : bool
        x is (N, T, E) (default True) or (T, N, E); (T, E) unbatched either way.
    device, dtype
        Of the buffer ``pe`` (dtype default ``tr.get_default_dtype()``).
    generator : int, numpy Generator or None
        Source of the dropout masks (keyword only).

    Attributes
    ----------
    pe : buffer (max_len, d_model), saved in the state dict; never trained.

    Examples
    --------
    >>> import numpy as np
    >>> import tinygrad_rnn as tr
    >>> pos = tr.nn.SinusoidalPositionalEncoding(4, max_len=8, dtype=np.float64)
    >>> pos(tr.zeros(1, 2, 4, dtype=np.float64)).numpy()[0, 1].round(4).tolist()
    [0.8415, 0.5403, 0.01, 1.0]
    """

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0,
                 batch_first: bool = True, device: Any = None, dtype: Any = None, *,
                 generator: Any = None) -> None:
        super().__init__()
        who = "SinusoidalPositionalEncoding"
        self._setup(who, d_model, max_len, dropout, batch_first, generator)
        self.register_buffer("pe", sinusoidal_table(self.max_len, self.d_model,
                                                    float_dtype(dtype, who)))
        place(self, device)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        x, t, offset = self._rows(x, offset)
        check_input_dtype("SinusoidalPositionalEncoding", "x", x, self.pe.dtype)
        return self._add(x, self.pe[offset:offset + t])                       # (PE1)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}"


class LearnedPositionalEncoding(_PositionalEncoding):
    """x + P[offset : offset + T] with P a learned table (an Embedding of the positions),
    eq. (PE2), then dropout.

    Parameters
    ----------
    d_model, max_len, dropout, batch_first, device, dtype
        As for :class:`SinusoidalPositionalEncoding` (max_len is the number of learned rows).
    init_std : float
        The rows start from N(0, init_std^2) (default 0.02, GPT-2's; torch's Embedding would
        draw N(0, 1), far larger than token embeddings of a small model).
    generator : int, numpy Generator or None
        Source of the initial values (keyword only).

    Attributes
    ----------
    embedding : Embedding (max_len, d_model)
        ``state_dict`` key ``embedding.weight``.
    """

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.0,
                 batch_first: bool = True, device: Any = None, dtype: Any = None,
                 init_std: float = 0.02, *, generator: Any = None) -> None:
        super().__init__()
        who = "LearnedPositionalEncoding"
        rng = self._setup(who, d_model, max_len, dropout, batch_first, generator)
        if isinstance(init_std, bool) or not isinstance(init_std, (int, float)) \
                or not init_std > 0:
            raise ValueError(f"{who}: init_std must be a positive number, got {init_std!r}")
        self.embedding = Embedding(self.max_len, self.d_model, dtype=float_dtype(dtype, who),
                                   generator=rng)
        init.normal_(self.embedding.weight, 0.0, float(init_std), generator=rng)
        place(self, device)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        x, t, offset = self._rows(x, offset)
        check_input_dtype("LearnedPositionalEncoding", "x", x, self.embedding.weight.dtype)
        positions = np.arange(offset, offset + t)
        return self._add(x, self.embedding(positions))                        # (PE2)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}"
