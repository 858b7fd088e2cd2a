"""Attention masks: torch's mask conventions turned into one boolean keep mask.

``key_padding_mask`` (N, Tk), True = padding key; ``attn_mask`` (Tq, Tk) or (N, Tq, Tk),
True = pair not allowed, or a float mask added to the scores (``-inf`` = not allowed);
``causal``: query i sees keys j <= i. :func:`keep_mask` combines them into the keep mask of
:func:`tinygrad_rnn.functional.softmax` (True = takes part), built on the inputs' device;
:func:`zero_padding` zeroes padded keys and values before use, so whatever they hold reaches
no output and no gradient. The layers in :mod:`tinygrad_rnn.nn.attention` call
:func:`attention_masks` and :func:`multihead_masks` in one line each.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..backend import device_of, device_of_module, get_array_module, is_float_dtype
from ..tensor import Tensor

__all__ = ["keep_mask", "as_array", "split_float_mask", "zero_padding", "attention_masks",
           "multihead_masks"]


def as_array(mask: Any, xp: Any, who: str = "attention", name: str = "mask") -> Any:
    """A mask as an array of the array module ``xp`` (the inputs' device).

    Host data (a NumPy array or a list) is copied to that device with ``xp.asarray``, the one
    allowed host -> device copy. A Tensor or device array that lives on another device (a
    cpu Tensor included) is a RuntimeError naming both devices: it is never moved silently.
    """
    data = mask._data if isinstance(mask, Tensor) else mask
    src = get_array_module(data)
    if src is not xp and (src is not np or isinstance(mask, Tensor)):
        here, there = device_of(data), device_of_module(xp)
        raise RuntimeError(
            f"{who}: {name} is on {here} but the inputs are on {there}; move it with "
            f".to({there!r}) (or pass it as a host NumPy array)"
        )
    return xp.asarray(data)


def keep_mask(n: int, tq: int, tk: int, key_padding_mask: Any = None, attn_mask: Any = None,
              causal: bool = False, xp: Any = np, who: str = "attention") -> Any:
    """The boolean keep mask (True = takes part) of shape (N, 1 or Tq, Tk), or None.

    Parameters
    ----------
    n, tq, tk : int
        Batch size, number of queries, number of keys.
    key_padding_mask : bool array (N, Tk), optional
        True marks padding keys (torch's convention).
    attn_mask : bool array (Tq, Tk) or (N, Tq, Tk), optional
        True marks a pair that is not allowed (torch's boolean convention).
    causal : bool
        Query i may attend to keys j <= i only.
    xp : array module
        The module of the inputs (``numpy``, the stand-in or CuPy); the mask is built on its
        device. Host masks (NumPy arrays, lists) are copied there; a mask Tensor or array on
        another device is a RuntimeError naming both devices.

    Returns
    -------
    array or None
        ``~padding[:, None, :] & ~attn_mask & causal``, broadcast together; None when no mask
        is given.
    """
    keep = None
    if key_padding_mask is not None:
        pad = as_array(key_padding_mask, xp, who, "key_padding_mask")
        if pad.dtype != bool:
            raise TypeError(
                f"{who}: key_padding_mask must be boolean (True = padding), got dtype "
                f"{pad.dtype}"
            )
        if pad.shape != (n, tk):
            raise ValueError(
                f"{who}: key_padding_mask of shape {pad.shape} does not match keys of batch "
                f"{n} and length {tk}; expected shape {(n, tk)}"
            )
        keep = ~pad[:, None, :]                                 # (A1) (N, 1, Tk)
    if attn_mask is not None:
        am = as_array(attn_mask, xp, who, "attn_mask")
        if am.dtype != bool:
            raise TypeError(f"{who}: keep_mask takes a boolean attn_mask, got dtype {am.dtype}")
        if am.shape not in ((tq, tk), (n, tq, tk)):
            raise ValueError(
                f"{who}: attn_mask of shape {am.shape} does not match {tq} queries and {tk} "
                f"keys; expected shape {(tq, tk)} or {(n, tq, tk)}"
            )
        allowed = ~am
        keep = allowed if keep is None else keep & allowed
    if causal:
        lower = xp.tril(xp.ones((tq, tk), dtype=bool))                  # j <= i
        keep = lower if keep is None else keep & lower                  # (A1)
    if keep is None:
        return None
    return xp.broadcast_to(keep, (n,) + keep.shape[-2:]) if keep.ndim == 2 else keep


def split_float_mask(am: Any, xp: Any, dtype: Any, who: str,
                      given_shape: tuple | None = None) -> tuple[Any, Any]:
    """An attn_mask array of module ``xp`` as (not-allowed boolean mask, finite additive part
    or None for a boolean mask).

    Any other dtype (integers included: 0/1 would be ambiguous between "blocked" and "add 1")
    is a TypeError naming ``who`` and the mask's shape as the caller gave it (``given_shape``,
    default ``am.shape``).
    """
    if am.dtype == bool:
        return am, None
    if not is_float_dtype(am.dtype):
        shape = tuple(am.shape) if given_shape is None else tuple(given_shape)
        raise TypeError(
            f"{who}: attn_mask of shape {shape} must be boolean (True = not allowed) or "
            f"floating point (added to the scores), got dtype {am.dtype}"
        )
    blocked = am == -xp.inf  # (isneginf is not in every array module)
    add = xp.where(blocked, xp.zeros((), dtype=am.dtype), am).astype(dtype)
    return blocked, add


def zero_padding(x: Tensor, pad: Any) -> Tensor:
    """x (N, Tk, D) with padded rows replaced by 0 (their gradient is exactly 0); ``pad`` is
    the (N, Tk) padding mask on x's device, or None."""
    if pad is None:
        return x
    return x.masked_fill(pad[..., None], 0.0)



def attention_masks(who: str, query: Tensor, keys: Tensor, key_padding_mask: Any,
                    attn_mask: Any, causal: bool) -> tuple[Any, Any, Any]:
    """The masks of one-head attention (:class:`tinygrad_rnn.nn.Attention`) on the inputs'
    device: (keep (N, Tq, Tk) or None, additive float part or None, padding (N, Tk) or
    None). A single query (``query`` (N, Dq)) counts as Tq = 1."""
    # masks given on the host are copied to the inputs' device once, here
    xp = get_array_module(query._data)
    pad = None
    if key_padding_mask is not None:
        pad = as_array(key_padding_mask, xp, who, "key_padding_mask")
    mask_shape = None
    if attn_mask is not None:
        attn_mask = as_array(attn_mask, xp, who, "attn_mask")
        mask_shape = tuple(attn_mask.shape)  # as given, before a single query's reshape
    if query.ndim == 2:
        if causal:
            raise ValueError(
                f"{who}: causal=True needs a query sequence (N, Tq, Dq), got a "
                f"single query of shape {query.shape}"
            )
        if attn_mask is not None and attn_mask.ndim == 1:
            attn_mask = attn_mask[None, :]                          # (1, Tk)
    n, tq, tk = query.shape[0], 1 if query.ndim == 2 else query.shape[1], keys.shape[1]
    add = None
    if attn_mask is not None:
        attn_mask, add = split_float_mask(attn_mask, xp, query.dtype, who, mask_shape)
    return keep_mask(n, tq, tk, pad, attn_mask, causal, xp, who), add, pad


def multihead_masks(n: int, h: int, tgt: int, src: int, key_padding_mask: Any,
                    attn_mask: Any, is_causal: bool, extra: int, xp: Any,
                    dtype: Any) -> tuple[Any, Any]:
    """(keep (N, 1 or h, L, S'), additive float part or None) of multi-head attention with
    ``h`` heads, S' = S + ``extra`` (the appended keys of add_bias_kv / add_zero_attn, never
    masked); the masks are arrays on the inputs' device (``xp``)."""
    add = None
    blocked = None
    if attn_mask is not None:
        blocked, add = split_float_mask(attn_mask, xp, dtype, "MultiheadAttention")
        if blocked.shape == (n * h, tgt, src):
            blocked = blocked.reshape(n, h, tgt, src)
            add = None if add is None else add.reshape(n, h, tgt, src)
        elif blocked.shape != (tgt, src):
            raise ValueError(
                f"MultiheadAttention: attn_mask of shape {blocked.shape} does not match "
                f"{tgt} queries and {src} keys; expected {(tgt, src)} or "
                f"{(n * h, tgt, src)}"
            )
    keep = None
    if key_padding_mask is not None:
        keep = keep_mask(n, tgt, src, key_padding_mask, None, False, xp,
                         "MultiheadAttention")[:, None]             # (N, 1, 1, S)
    if blocked is not None:
        keep = ~blocked if keep is None else keep & ~blocked
    if is_causal:
        lower = xp.tril(xp.ones((tgt, src), dtype=bool))
        keep = lower if keep is None else keep & lower
    if extra:                                            # appended keys: never masked
        if keep is not None:
            keep = xp.broadcast_to(keep, keep.shape[:-1] + (src,))
            ones = xp.ones(keep.shape[:-1] + (extra,), dtype=bool)
            keep = xp.concatenate([keep, ones], axis=-1)
        if add is not None:
            zeros = xp.zeros(add.shape[:-1] + (extra,), dtype=add.dtype)
            add = xp.concatenate([add, zeros], axis=-1)
    if keep is not None and keep.ndim == 2:
        keep = keep[None, None]
    if add is not None and add.ndim == 2:
        add = add[None, None]
    return keep, add
