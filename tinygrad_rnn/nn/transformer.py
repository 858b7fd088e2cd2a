"""Transformer layers, as ``torch.nn``'s: encoder and decoder layers, their stacks and the
full encoder-decoder :class:`Transformer`.

Every class here is composed of modules that already exist (:class:`MultiheadAttention`,
:class:`Linear`, :class:`Dropout`, :class:`LayerNorm` and an activation), so autograd
differentiates it; nothing here has a hand-written backward. Signatures, attribute names,
``state_dict`` keys, input layouts and mask conventions are torch's, so a torch state dict
converted to NumPy loads and gives the same numbers (docs/attention.md, "Transformer
layers").

Sublayers (Vaswani et al. 2017), with LN a layer norm, SA self-attention, CA cross-attention
over the encoder's output ``memory`` and FF(x) = W_2 act(W_1 x + b_1) + b_2:

* post-norm (``norm_first=False``, the paper's): x <- LN(x + Sublayer(x)) for each sublayer;
* pre-norm (``norm_first=True``): x <- x + Sublayer(LN(x))  (docs/attention.md, eq. A16).

Each sublayer's output passes through its own dropout before the residual sum (``dropout1``,
``dropout2``, ``dropout3``); ``dropout`` acts inside FF, after the activation.

Masks (torch's conventions, as :class:`MultiheadAttention`)
-----------------------------------------------------------
* ``*_mask`` (L, S) or (N * nhead, L, S): boolean **True = not allowed**, or floating point,
  added to the scores (``-inf`` = not allowed). Any other dtype is a TypeError.
* ``*_key_padding_mask`` (N, S) ((S,) for unbatched input): boolean **True = padding**, or
  floating point, added to the scores of every query for that key (as torch).
* ``is_causal`` / ``*_is_causal``: torch takes it as a *hint* that the mask given is the causal
  one. Here it applies the causal mask (combined with any mask given), also when no mask is
  given, where torch raises an error; with the causal mask given, both agree.

A query whose keys are all masked gets zero attention weights and zero gradient (torch gives
NaN). Padded positions of the input are computed like any other: torch's nested-tensor fast
path (inference only) returns zeros there instead.

Why one module of about 800 lines: torch's five Transformer classes, which share their
argument checks, masks and sublayer construction; the attention itself is
:mod:`tinygrad_rnn.nn.attention`.
"""
from __future__ import annotations

import copy
import math
from typing import Any, Callable

import numpy as np

from .. import _validate
from ..backend import get_array_module, is_float_dtype
from ..tensor import Tensor
from . import functional as NF
from . import init
from .activation import GELU
from ._masks import as_array
from .attention import MultiheadAttention
from ._checks import check_generator, check_input_dtype, float_dtype
from .layers import Dropout, Linear, ModuleList, ReLU, dtype_note, as_input, place
from .module import Module
from .normalization import LayerNorm

__all__ = [
    "TransformerEncoderLayer", "TransformerDecoderLayer", "TransformerEncoder",
    "TransformerDecoder", "Transformer",
]


# ------------------------------------------------------------------------- argument checks
def _heads(who: str, d_model: Any, nhead: Any) -> tuple[int, int]:
    """``d_model`` and ``nhead`` as positive ints, the first divisible by the second."""
    d_model, nhead = _validate.size(d_model, "d_model", who), _validate.size(nhead, "nhead", who)
    if d_model % nhead:
        raise ValueError(
            f"{who}: d_model ({d_model}) must be divisible by nhead ({nhead}): each head "
            f"attends over d_model / nhead features"
        )
    return d_model, nhead


def _eps(who: str, value: Any) -> float:
    eps = _validate.finite_real(value, "layer_norm_eps", who)
    if eps <= 0.0:
        raise ValueError(f"{who}: layer_norm_eps must be positive, got {value!r}")
    return eps


def _activation(who: str, activation: Any) -> Callable[[Tensor], Tensor]:
    """``'relu'``/``'gelu'`` as the functions, a callable (function or module) as it is."""
    if isinstance(activation, str):
        if activation == "relu":
            return NF.relu
        if activation == "gelu":
            return NF.gelu
        raise ValueError(
            f"{who}: activation must be 'relu', 'gelu' or a callable, got {activation!r}"
        )
    if not callable(activation):
        raise TypeError(
            f"{who}: activation must be 'relu', 'gelu' or a callable, got {activation!r} "
            f"({type(activation).__name__})"
        )
    return activation


def _relu_or_gelu(activation: Any) -> int:
    """torch's ``activation_relu_or_gelu`` code: 1 relu, 2 gelu, 0 anything else."""
    if activation is NF.relu or isinstance(activation, ReLU):
        return 1
    if activation is NF.gelu or isinstance(activation, GELU):
        return 2
    return 0


def _causal_flag(who: str, name: str, value: Any) -> bool:
    """An ``is_causal`` argument as a bool; None (the stacks' default) is False."""
    return False if value is None else _validate.flag(value, name, who)


def _input(who: str, name: str, x: Any, d_model: int, dtype: np.dtype,
           batch_first: bool) -> Tensor:
    """``x`` as a floating-point Tensor of the parameters' dtype and shape (S, N, E),
    (N, S, E) with ``batch_first`` or (S, E) unbatched, E = d_model."""
    x = as_input(x, name, who)
    if not is_float_dtype(x.dtype):
        raise TypeError(f"{who}: {name} must be floating point, got dtype {x.dtype}")
    check_input_dtype(who, name, x, dtype)
    if x.ndim not in (2, 3) or x.shape[-1] != d_model:
        layout = "(N, S, E)" if batch_first else "(S, N, E)"
        raise ValueError(
            f"{who}: expected {name} of shape {layout} or (S, E) (unbatched) with "
            f"E = d_model = {d_model}, got shape {x.shape}"
        )
    return x


def _batch_and_length(x: Tensor, batch_first: bool) -> tuple[int, int]:
    """(N, S) of an input; N = 1 for unbatched (S, E) input."""
    if x.ndim == 2:
        return 1, x.shape[0]
    return (x.shape[0], x.shape[1]) if batch_first else (x.shape[1], x.shape[0])


def _fold_float_padding(pad: Any, attn_mask: Any, n: int, nhead: int, tq: int, tk: int,
                        xp: Any, dtype: Any) -> Any:
    """A floating-point key padding mask (N, S) added into one (N * nhead, L, S) float
    attention mask, as torch merges the two (a boolean attn_mask counts as -inf / 0)."""
    add = pad.astype(dtype).reshape(n, 1, 1, tk)
    if attn_mask is not None:
        if attn_mask.dtype == bool:
            am = xp.where(attn_mask, xp.asarray(-np.inf, dtype=dtype),
                          xp.zeros((), dtype=dtype))
        else:
            am = attn_mask.astype(dtype)
        am = am.reshape(n, nhead, tq, tk) if am.ndim == 3 else am.reshape(1, 1, tq, tk)
        add = add + am
    return xp.broadcast_to(add, (n, nhead, tq, tk)).reshape(n * nhead, tq, tk)


def _masks(who: str, x: Tensor, n: int, tq: int, tk: int, nhead: int, attn_mask: Any,
           attn_name: str, pad: Any, pad_name: str) -> tuple[Any, Any]:
    """Check one attention's masks against its shapes; returns (attn_mask, key_padding_mask)
    as arrays on ``x``'s device (None where not given), in the forms MultiheadAttention takes.

    A floating-point key padding mask whose entries are all 0 or -inf becomes the boolean
    mask it means; any other floating-point one is folded into the attention mask, as torch.
    """
    xp = get_array_module(x._data)
    batched = x.ndim == 3
    if attn_mask is not None:
        attn_mask = as_array(attn_mask, xp, who, attn_name)
        if attn_mask.dtype != bool and not is_float_dtype(attn_mask.dtype):
            raise TypeError(
                f"{who}: {attn_name} must be boolean (True = not allowed) or floating point "
                f"(added to the scores), got dtype {attn_mask.dtype}"
            )
        if attn_mask.shape not in ((tq, tk), (n * nhead, tq, tk)):
            raise ValueError(
                f"{who}: {attn_name} of shape {attn_mask.shape} does not match {tq} queries "
                f"and {tk} keys; expected shape {(tq, tk)} or {(n * nhead, tq, tk)} "
                f"(batch {n} x nhead {nhead})"
            )
    if pad is not None:
        pad = as_array(pad, xp, who, pad_name)
        if pad.dtype != bool and not is_float_dtype(pad.dtype):
            raise TypeError(
                f"{who}: {pad_name} must be boolean (True = padding) or floating point "
                f"(added to the scores), got dtype {pad.dtype}"
            )
        expected = (n, tk) if batched else (tk,)
        if pad.shape != expected:
            raise ValueError(
                f"{who}: {pad_name} of shape {pad.shape} does not match a batch of {n} "
                f"sequences of {tk} keys; expected shape {expected}"
            )
        if pad.dtype != bool:
            blocked = pad == -xp.inf
            if bool(xp.all(blocked | (pad == 0))):
                pad = blocked
            else:
                attn_mask = _fold_float_padding(pad, attn_mask, n, nhead, tq, tk, xp,
                                                x.dtype)
                pad = None
    return attn_mask, pad


def _spawn(generator: np.random.Generator) -> np.random.Generator:
    """An independent child of ``generator`` (deterministic given its seed)."""
    try:
        return generator.spawn(1)[0]
    except (AttributeError, TypeError, ValueError):  # no seed sequence to spawn from
        return np.random.default_rng(int(generator.integers(2 ** 63)))


def _clones(who: str, layer: Any, num_layers: Any) -> ModuleList:
    """``num_layers`` deep copies of ``layer`` (as torch's), each with its own random
    generators: a plain deep copy would give every layer the same dropout masks."""
    if not isinstance(layer, Module):
        raise TypeError(f"{who}: the layer to stack must be a Module, got "
                        f"{type(layer).__name__}")
    num_layers = _validate.size(num_layers, "num_layers", who, minimum=0)
    clones = []
    for _ in range(num_layers):
        clone = copy.deepcopy(layer)
        for original, copied in zip(layer.modules(), clone.modules()):
            for name, value in vars(original).items():
                if isinstance(value, np.random.Generator):
                    object.__setattr__(copied, name, _spawn(value))
        clones.append(clone)
    return ModuleList(clones)


# ------------------------------------------------------------------------- shared parts
class _Sublayers(Module):
    """What the encoder and decoder layers share: the argument checks, the attention,
    feed-forward, norm and dropout modules (in torch's attribute order, so state_dict keys
    come out in torch's order) and the self-attention and feed-forward blocks."""

    def _build(self, who: str, cross: bool, d_model: int, nhead: int, dim_feedforward: int,
               dropout: float, activation: str | Callable, layer_norm_eps: float,
               batch_first: bool, norm_first: bool, bias: bool, dtype: Any,
               generator: Any) -> None:
        """Check the arguments and make the modules: self_attn, multihead_attn (when
        ``cross``), linear1, dropout, linear2, norm1..k, dropout1..k (k = 2, or 3 with
        ``cross``)."""
        d_model, nhead = _heads(who, d_model, nhead)
        dim_feedforward = _validate.size(dim_feedforward, "dim_feedforward", who)
        p = _validate.probability(dropout, "dropout", who)
        eps = _eps(who, layer_norm_eps)
        batch_first = _validate.flag(batch_first, "batch_first", who)
        self.norm_first = _validate.flag(norm_first, "norm_first", who)
        bias = _validate.flag(bias, "bias", who)
        dt = float_dtype(dtype, who)
        activation = _activation(who, activation)
        rng = check_generator(generator, who)
        own = None if generator is None else rng
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=p, bias=bias,
                                            batch_first=batch_first, dtype=dt, generator=rng)
        if cross:
            self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=p, bias=bias,
                                                     batch_first=batch_first, dtype=dt,
                                                     generator=rng)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dt, generator=rng)
        self.dropout = Dropout(p, generator=own)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dt, generator=rng)
        k = 3 if cross else 2
        for i in range(1, k + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=eps, bias=bias, dtype=dt))
        for i in range(1, k + 1):
            setattr(self, f"dropout{i}", Dropout(p, generator=own))
        self._last_dropout = f"dropout{k}"
        self.activation = activation

    def _sa_block(self, x: Tensor, attn_mask: Any, key_padding_mask: Any,
                  is_causal: bool) -> Tensor:
        """dropout1(SA(x))."""
        out = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                             need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(out)

    def _ff_block(self, x: Tensor) -> Tensor:
        """dropout_k(W_2 dropout(act(W_1 x + b_1)) + b_2), k the last sublayer's number."""
        hidden = self.dropout(self.activation(self.linear1(x)))
        return getattr(self, self._last_dropout)(self.linear2(hidden))


# ------------------------------------------------------------------------- encoder layer
class TransformerEncoderLayer(_Sublayers):
    """Self-attention and a feed-forward block, each with a residual connection and a layer
    norm, as ``torch.nn.TransformerEncoderLayer``.

    Parameters
    ----------
    d_model : int
        E, the size of every position's features.
    nhead : int
        Number of attention heads; d_model must be divisible by it.
    dim_feedforward : int
        Hidden size F of the feed-forward block (default 2048).
    dropout : float
        Dropout probability of the attention weights, the feed-forward hidden layer and each
        sublayer's output (default 0.1; active in training mode only).
    activation : {'relu', 'gelu'} or callable
        The feed-forward activation (default :func:`tinygrad_rnn.nn.functional.relu`); a
        function or a module such as ``nn.GELU()``.
    layer_norm_eps : float
        The layer norms' epsilon (default 1e-5).
    batch_first : bool
        Inputs and output are (N, S, E) instead of (S, N, E).
    norm_first : bool
        Pre-norm (layer norm before each sublayer) instead of the paper's post-norm.
    bias : bool
        Biases in the attention, the linear layers and the layer norms (default True).
    device, dtype
        Where the parameters live and their dtype (default ``tr.get_default_dtype()``).
    generator : int, numpy Generator or None
        Source of the initial values and of the dropout masks (keyword only).

    Attributes
    ----------
    self_attn : MultiheadAttention(d_model, nhead)
    linear1 : Linear(d_model, dim_feedforward)
    linear2 : Linear(dim_feedforward, d_model)
    norm1, norm2 : LayerNorm(d_model)
    dropout, dropout1, dropout2 : Dropout
    activation : callable

    Math
    ----
    SA(x) = MultiheadAttention(x, x, x), FF(x) = W_2 act(W_1 x + b_1) + b_2.
    Post-norm: y = LN_1(x + SA(x)), out = LN_2(y + FF(y)).
    Pre-norm: y = x + SA(LN_1(x)), out = y + FF(LN_2(y)).
    The residual sums give dL/dx = G + (dSublayer/dx)^T G for each sublayer: the identity
    path carries the upstream gradient through unchanged, whatever the sublayer does.

    Shapes
    ------
    src (S, N, E), (N, S, E) with ``batch_first``, or (S, E) unbatched -> the same shape.
    src_mask (S, S) or (N * nhead, S, S); src_key_padding_mask (N, S), (S,) unbatched.

    Examples
    --------
    >>> import numpy as np
    >>> import tinygrad_rnn as tr
    >>> layer = tr.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0,
    ...                                       batch_first=True, generator=0)
    >>> src = tr.randn(3, 5, 8, generator=1)
    >>> mask = tr.nn.Transformer.generate_square_subsequent_mask(5)
    >>> layer(src, src_mask=mask).shape
    (3, 5, 8)
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable = NF.relu,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None, *, generator: Any = None) -> None:
        super().__init__()
        self._build("TransformerEncoderLayer", False, d_model, nhead, dim_feedforward, dropout,
                    activation, layer_norm_eps, batch_first, norm_first, bias, dtype, generator)
        self.activation_relu_or_gelu = _relu_or_gelu(self.activation)
        place(self, device)

    def forward(self, src: Tensor, src_mask: Any = None, src_key_padding_mask: Any = None,
                is_causal: bool = False) -> Tensor:
        """The layer's output, of ``src``'s shape (see the class docstring for the masks)."""
        who = "TransformerEncoderLayer"
        is_causal = _causal_flag(who, "is_causal", is_causal)
        attn = self.self_attn
        x = _input(who, "src", src, attn.embed_dim, self.linear1.weight.dtype,
                   attn.batch_first)
        n, s = _batch_and_length(x, attn.batch_first)
        src_mask, src_key_padding_mask = _masks(
            who, x, n, s, s, attn.num_heads, src_mask, "src_mask", src_key_padding_mask,
            "src_key_padding_mask")
        if self.norm_first:
            # (A16) pre-norm
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            # (A16) post-norm
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def extra_repr(self) -> str:
        s = f"norm_first={self.norm_first}"
        if not isinstance(self.activation, Module):
            s += f", activation={getattr(self.activation, '__name__', self.activation)}"
        return s + dtype_note(self.linear1.weight.dtype)


# ------------------------------------------------------------------------- decoder layer
class TransformerDecoderLayer(_Sublayers):
    """Self-attention, cross-attention over the encoder's output and a feed-forward block,
    each with a residual connection and a layer norm, as ``torch.nn.TransformerDecoderLayer``.

    Parameters
    ----------
    d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
    norm_first, bias, device, dtype, generator
        As for :class:`TransformerEncoderLayer`.

    Attributes
    ----------
    self_attn, multihead_attn : MultiheadAttention(d_model, nhead)
        Self-attention over ``tgt`` and cross-attention of ``tgt`` over ``memory``.
    linear1, linear2, dropout, activation
        The feed-forward block, as in the encoder layer.
    norm1, norm2, norm3 : LayerNorm(d_model)
    dropout1, dropout2, dropout3 : Dropout
        On the outputs of the three sublayers.

    Math
    ----
    SA(x) = MHA_1(x, x, x), CA(x, m) = MHA_2(x, m, m), FF as in the encoder layer.
    Post-norm: y = LN_1(x + SA(x)), z = LN_2(y + CA(y, m)), out = LN_3(z + FF(z)).
    Pre-norm: y = x + SA(LN_1(x)), z = y + CA(LN_2(y), m), out = z + FF(LN_3(z)).
    ``memory`` enters only through the keys and values of CA, so dL/dm collects
    (dCA/dm)^T G from every decoder layer it feeds.

    Shapes
    ------
    tgt (T, N, E), memory (S, N, E) (batch-first: (N, T, E), (N, S, E); unbatched: (T, E),
    (S, E)) -> output of tgt's shape. tgt_mask (T, T) or (N * nhead, T, T); memory_mask
    (T, S) or (N * nhead, T, S); tgt_key_padding_mask (N, T); memory_key_padding_mask (N, S).
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable = NF.relu,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None, *, generator: Any = None) -> None:
        super().__init__()
        self._build("TransformerDecoderLayer", True, d_model, nhead, dim_feedforward, dropout,
                    activation, layer_norm_eps, batch_first, norm_first, bias, dtype, generator)
        place(self, device)

    def _mha_block(self, x: Tensor, memory: Tensor, attn_mask: Any, key_padding_mask: Any,
                   is_causal: bool) -> Tensor:
        """dropout2(CA(x, memory))."""
        out = self.multihead_attn(x, memory, memory, attn_mask=attn_mask,
                                  key_padding_mask=key_padding_mask, need_weights=False,
                                  is_causal=is_causal)[0]
        return self.dropout2(out)

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Any = None,
                memory_mask: Any = None, tgt_key_padding_mask: Any = None,
                memory_key_padding_mask: Any = None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False) -> Tensor:
        """The layer's output, of ``tgt``'s shape (see the class docstring for the masks)."""
        who = "TransformerDecoderLayer"
        tgt_is_causal = _causal_flag(who, "tgt_is_causal", tgt_is_causal)
        memory_is_causal = _causal_flag(who, "memory_is_causal", memory_is_causal)
        x, m = _pair_inputs(who, tgt, memory, self.self_attn, self.linear1.weight.dtype)
        bf, h = self.self_attn.batch_first, self.self_attn.num_heads
        n, t = _batch_and_length(x, bf)
        s = _batch_and_length(m, bf)[1]
        tgt_mask, tgt_key_padding_mask = _masks(
            who, x, n, t, t, h, tgt_mask, "tgt_mask", tgt_key_padding_mask,
            "tgt_key_padding_mask")
        memory_mask, memory_key_padding_mask = _masks(
            who, x, n, t, s, h, memory_mask, "memory_mask", memory_key_padding_mask,
            "memory_key_padding_mask")
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask,
                                   tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), m, memory_mask, memory_key_padding_mask,
                                    memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask,
                                              tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, m, memory_mask, memory_key_padding_mask,
                                               memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    def extra_repr(self) -> str:
        s = f"norm_first={self.norm_first}"
        if not isinstance(self.activation, Module):
            s += f", activation={getattr(self.activation, '__name__', self.activation)}"
        return s + dtype_note(self.linear1.weight.dtype)


def _pair_inputs(who: str, tgt: Any, memory: Any, attn: MultiheadAttention,
                 dtype: np.dtype) -> tuple[Tensor, Tensor]:
    """tgt and memory checked as inputs of one layout, with the same batch size."""
    bf = attn.batch_first
    x = _input(who, "tgt", tgt, attn.embed_dim, dtype, bf)
    m = _input(who, "memory", memory, attn.embed_dim, dtype, bf)
    if x.ndim != m.ndim:
        raise ValueError(
            f"{who}: tgt of shape {x.shape} and memory of shape {m.shape} must both be "
            f"batched (3-D) or both unbatched (2-D)"
        )
    if _batch_and_length(x, bf)[0] != _batch_and_length(m, bf)[0]:
        raise ValueError(
            f"{who}: tgt of shape {x.shape} and memory of shape {m.shape} have different "
            f"batch sizes (batch_first={bf})"
        )
    return x, m


# ------------------------------------------------------------------------- stacks
def _first_attention(layers: ModuleList) -> MultiheadAttention | None:
    """The first layer's ``self_attn`` when it is a MultiheadAttention (for mask checks)."""
    if len(layers) == 0:
        return None
    attn = getattr(layers[0], "self_attn", None)
    return attn if isinstance(attn, MultiheadAttention) else None


class TransformerEncoder(Module):
    """A stack of ``num_layers`` copies of an encoder layer, then an optional norm, as
    ``torch.nn.TransformerEncoder``.

    Parameters
    ----------
    encoder_layer : Module
        Usually a :class:`TransformerEncoderLayer`; deep-copied ``num_layers`` times (the
        copies start with equal parameters, as torch's, and own independent dropout
        generators).
    num_layers : int
        Number of copies (0 gives a stack that only applies ``norm``).
    norm : Module, optional
        Applied to the last layer's output (``nn.Transformer`` passes a LayerNorm).
    enable_nested_tensor, mask_check : bool
        Accepted for torch's signature; there are no nested tensors here, so neither changes
        a result (``use_nested_tensor`` is always False).

    Attributes
    ----------
    layers : ModuleList
        ``state_dict`` keys ``layers.0.self_attn.in_proj_weight``, ..., as torch's.
    num_layers, norm, enable_nested_tensor, use_nested_tensor, mask_check

    Math
    ----
    x_0 = src, x_l = layer_l(x_{l-1}) with the same masks for every layer, out = norm(x_L).
    """

    def __init__(self, encoder_layer: Module, num_layers: int, norm: Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True) -> None:
        super().__init__()
        who = "TransformerEncoder"
        self.layers = _clones(who, encoder_layer, num_layers)
        self.num_layers = len(self.layers)
        if norm is not None and not isinstance(norm, Module):
            raise TypeError(f"{who}: norm must be a Module or None, got {type(norm).__name__}")
        self.norm = norm
        self.enable_nested_tensor = _validate.flag(enable_nested_tensor, "enable_nested_tensor",
                                                   who)
        self.use_nested_tensor = False
        self.mask_check = _validate.flag(mask_check, "mask_check", who)

    def forward(self, src: Tensor, mask: Any = None, src_key_padding_mask: Any = None,
                is_causal: bool | None = None) -> Tensor:
        """Run ``src`` through every layer with the same ``mask`` (the layers'
        ``src_mask``), ``src_key_padding_mask`` and ``is_causal``; returns src's shape."""
        who = "TransformerEncoder"
        is_causal = _causal_flag(who, "is_causal", is_causal)
        attn = _first_attention(self.layers)
        output = src
        if attn is not None:
            dtype = attn.out_proj.weight.dtype
            output = _input(who, "src", src, attn.embed_dim, dtype, attn.batch_first)
            n, s = _batch_and_length(output, attn.batch_first)
            mask, src_key_padding_mask = _masks(
                who, output, n, s, s, attn.num_heads, mask, "mask", src_key_padding_mask,
                "src_key_padding_mask")
        for layer in self.layers:
            output = layer(output, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                           is_causal=is_causal)
        if self.norm is not None:
            output = self.norm(output)
        return output


class TransformerDecoder(Module):
    """A stack of ``num_layers`` copies of a decoder layer, then an optional norm, as
    ``torch.nn.TransformerDecoder``.

    Parameters
    ----------
    decoder_layer : Module
        Usually a :class:`TransformerDecoderLayer`; deep-copied ``num_layers`` times (equal
        initial parameters, independent dropout generators).
    num_layers : int
    norm : Module, optional
        Applied to the last layer's output.

    Attributes
    ----------
    layers : ModuleList
    num_layers, norm

    Math
    ----
    y_0 = tgt, y_l = layer_l(y_{l-1}, memory) (every layer attends over the same memory),
    out = norm(y_L).
    """

    def __init__(self, decoder_layer: Module, num_layers: int,
                 norm: Module | None = None) -> None:
        super().__init__()
        who = "TransformerDecoder"
        self.layers = _clones(who, decoder_layer, num_layers)
        self.num_layers = len(self.layers)
        if norm is not None and not isinstance(norm, Module):
            raise TypeError(f"{who}: norm must be a Module or None, got {type(norm).__name__}")
        self.norm = norm

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Any = None,
                memory_mask: Any = None, tgt_key_padding_mask: Any = None,
                memory_key_padding_mask: Any = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Tensor:
        """Run ``tgt`` through every layer over the same ``memory`` and masks; returns
        tgt's shape."""
        who = "TransformerDecoder"
        tgt_is_causal = _causal_flag(who, "tgt_is_causal", tgt_is_causal)
        memory_is_causal = _causal_flag(who, "memory_is_causal", memory_is_causal)
        attn = _first_attention(self.layers)
        output = tgt
        if attn is not None:
            output, memory = _pair_inputs(who, tgt, memory, attn, attn.out_proj.weight.dtype)
            n, t = _batch_and_length(output, attn.batch_first)
            s = _batch_and_length(memory, attn.batch_first)[1]
            tgt_mask, tgt_key_padding_mask = _masks(
                who, output, n, t, t, attn.num_heads, tgt_mask, "tgt_mask",
                tgt_key_padding_mask, "tgt_key_padding_mask")
            memory_mask, memory_key_padding_mask = _masks(
                who, output, n, t, s, attn.num_heads, memory_mask, "memory_mask",
                memory_key_padding_mask, "memory_key_padding_mask")
        for layer in self.layers:
            output = layer(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                           tgt_key_padding_mask=tgt_key_padding_mask,
                           memory_key_padding_mask=memory_key_padding_mask,
                           tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        if self.norm is not None:
            output = self.norm(output)
        return output


# ------------------------------------------------------------------------- Transformer
class Transformer(Module):
    """The encoder-decoder Transformer (Vaswani et al. 2017), as ``torch.nn.Transformer``.

    Parameters
    ----------
    d_model : int
        E (default 512); divisible by ``nhead`` (default 8).
    nhead : int
    num_encoder_layers, num_decoder_layers : int
        Depths of the two stacks (default 6 each).
    dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first, bias
        As for :class:`TransformerEncoderLayer`, used by every layer.
    custom_encoder, custom_decoder : Module, optional
        Used instead of the built stacks.
    device, dtype, generator
        As for :class:`TransformerEncoderLayer`.

    Attributes
    ----------
    encoder : TransformerEncoder
        ``num_encoder_layers`` layers and a final LayerNorm (``encoder.norm``).
    decoder : TransformerDecoder
        ``num_decoder_layers`` layers and a final LayerNorm (``decoder.norm``).
    d_model, nhead, batch_first

    Every parameter with more than one dimension (custom stacks' included) is then
    re-initialised Xavier-uniform, as torch does; biases and layer norms keep their values.

    Math
    ----
    memory = encoder(src), out = decoder(tgt, memory). Subclasses may use ``self.encoder``
    alone (a language model) and replace ``self.decoder`` with their own module, as
    PyTorch's word language model example does.

    Shapes
    ------
    src (S, N, E), tgt (T, N, E) ((N, S, E), (N, T, E) with ``batch_first``; (S, E),
    (T, E) unbatched) -> output (T, N, E) (tgt's layout). Masks as for the layers:
    src_mask (S, S), tgt_mask (T, T), memory_mask (T, S), each also (N * nhead, ., .);
    src/tgt/memory_key_padding_mask (N, S), (N, T), (N, S).

    Examples
    --------
    >>> import numpy as np
    >>> import tinygrad_rnn as tr
    >>> model = tr.nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1,
    ...                           num_decoder_layers=1, dim_feedforward=16, dropout=0.0,
    ...                           generator=0)
    >>> src, tgt = tr.randn(6, 2, 8, generator=1), tr.randn(4, 2, 8, generator=2)
    >>> tgt_mask = model.generate_square_subsequent_mask(4)
    >>> model(src, tgt, tgt_mask=tgt_mask).shape
    (4, 2, 8)
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable = NF.relu,
                 custom_encoder: Module | None = None, custom_decoder: Module | None = None,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None, *, generator: Any = None) -> None:
        super().__init__()
        who = "Transformer"
        d_model, nhead = _heads(who, d_model, nhead)
        num_encoder_layers = _validate.size(num_encoder_layers, "num_encoder_layers", who,
                                            minimum=0)
        num_decoder_layers = _validate.size(num_decoder_layers, "num_decoder_layers", who,
                                            minimum=0)
        dim_feedforward = _validate.size(dim_feedforward, "dim_feedforward", who)
        dropout = _validate.probability(dropout, "dropout", who)
        activation = _activation(who, activation)
        batch_first = _validate.flag(batch_first, "batch_first", who)
        norm_first = _validate.flag(norm_first, "norm_first", who)
        bias = _validate.flag(bias, "bias", who)
        eps = _eps(who, layer_norm_eps)
        dt = float_dtype(dtype, who)
        rng = check_generator(generator, who)
        layer_args: dict[str, Any] = dict(
            dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
            layer_norm_eps=eps, batch_first=batch_first, norm_first=norm_first, bias=bias,
            dtype=dt, generator=None if generator is None else rng)
        for name, custom in (("custom_encoder", custom_encoder),
                             ("custom_decoder", custom_decoder)):
            if custom is not None and not isinstance(custom, Module):
                raise TypeError(f"{who}: {name} must be a Module or None, got "
                                f"{type(custom).__name__}")
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, **layer_args)
            self.encoder = TransformerEncoder(layer, num_encoder_layers,
                                              LayerNorm(d_model, eps=eps, bias=bias, dtype=dt))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            decoder_layer = TransformerDecoderLayer(d_model, nhead, **layer_args)
            self.decoder = TransformerDecoder(decoder_layer, num_decoder_layers,
                                              LayerNorm(d_model, eps=eps, bias=bias, dtype=dt))
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p, generator=rng)
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        place(self, device)

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Any = None, tgt_mask: Any = None,
                memory_mask: Any = None, src_key_padding_mask: Any = None,
                tgt_key_padding_mask: Any = None, memory_key_padding_mask: Any = None,
                src_is_causal: bool | None = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Tensor:
        """decoder(tgt, encoder(src)); returns tgt's shape (see the class docstring)."""
        who = "Transformer"
        src = as_input(src, "src", who)
        tgt = as_input(tgt, "tgt", who)
        if src.ndim != tgt.ndim or src.ndim not in (2, 3):
            raise ValueError(
                f"{who}: src of shape {src.shape} and tgt of shape {tgt.shape} must both be "
                f"batched (3-D) or both unbatched (2-D)"
            )
        if src.ndim == 3:
            b = 0 if self.batch_first else 1
            if src.shape[b] != tgt.shape[b]:
                raise ValueError(
                    f"{who}: the batch sizes of src (shape {src.shape}) and tgt (shape "
                    f"{tgt.shape}) must be equal (batch_first={self.batch_first})"
                )
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ValueError(
                f"{who}: the feature sizes of src (shape {src.shape}) and tgt (shape "
                f"{tgt.shape}) must equal d_model = {self.d_model}"
            )
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: Any = None,
                                        dtype: Any = None) -> Tensor:
        """The causal float mask (sz, sz): -inf above the diagonal (position i may not attend
        to j > i), 0 on and below it, as torch's (float32 unless ``dtype`` is given, not the
        default dtype; on ``device``, default the host).

        Examples
        --------
        >>> import tinygrad_rnn as tr
        >>> tr.nn.Transformer.generate_square_subsequent_mask(3).numpy()
        array([[  0., -inf, -inf],
               [  0.,   0., -inf],
               [  0.,   0.,   0.]], dtype=float32)
        """
        who = "Transformer.generate_square_subsequent_mask"
        sz = _validate.size(sz, "sz", who, minimum=0)
        dt = float_dtype(np.float32 if dtype is None else dtype, who)
        mask = np.triu(np.full((sz, sz), -math.inf, dtype=dt), k=1)
        out = Tensor(mask)
        return out if device is None else out.to(device)
