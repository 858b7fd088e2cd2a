"""Selection primitives: where, masked_fill, embedding lookup, dropout."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..backend import get_array_module, to_device
from .base import Context, Function
from .elementwise import broadcast_shape


class Where(Function):
    """z = where(cond, a, b).  VJP: dL/da = g where cond else 0; dL/db = g where not cond.

    The branch not taken contributes an exact 0 (selected with ``where``, never by
    multiplying by a 0/1 mask), so an inf or NaN there never reaches a gradient.
    """

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any, cond: Any) -> Any:
        xp = get_array_module(a, b)
        cond = xp.asarray(cond)
        if cond.dtype != bool:
            raise TypeError(f"where: condition must be boolean, got dtype {cond.dtype} "
                            f"(condition shape {cond.shape})")
        broadcast_shape("where", cond.shape, a.shape, b.shape)
        ctx.save_for_backward(cond)
        return xp.where(cond, a, b)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        (cond,) = ctx.saved_arrays
        xp = get_array_module(g)
        zero = xp.zeros((), dtype=g.dtype)
        return xp.where(cond, g, zero), xp.where(cond, zero, g)


class MaskedFill(Function):
    """y = x with entries where ``mask`` is True replaced by a constant ``value``.
    VJP: dL/dx = g where mask is False, exactly 0 where it is True."""

    @staticmethod
    def forward(ctx: Context, x: Any, mask: Any, value: float) -> Any:
        xp = get_array_module(x)
        mask = xp.asarray(mask)
        if mask.dtype != bool:
            raise TypeError(f"masked_fill: mask must be boolean, got dtype {mask.dtype} "
                            f"(mask shape {mask.shape}, input shape {x.shape})")
        if broadcast_shape("masked_fill", x.shape, mask.shape) != x.shape:
            raise ValueError(
                f"masked_fill: mask of shape {mask.shape} does not broadcast to the input "
                f"shape {x.shape}"
            )
        ctx.save_for_backward(mask)
        return xp.where(mask, xp.asarray(value, dtype=x.dtype), x)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (mask,) = ctx.saved_arrays
        xp = get_array_module(g)
        return xp.where(mask, xp.zeros((), dtype=g.dtype), g)


def check_token_ids(op: str, ids: Any, size: int, what: str = "vocabulary size",
                    ignore: int | None = None) -> None:
    """Raise TypeError for non-integer ids and IndexError for an id outside [0, size)
    (other than ``ignore``), naming the first offending value and its position. NumPy would
    silently wrap negative ids around."""
    xp = get_array_module(ids)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{op}: expected integer ids, got dtype {ids.dtype}")
    bad = (ids < 0) | (ids >= size)
    if ignore is not None:
        bad &= ids != ignore
    if bool(xp.any(bad)):  # one explicit device-to-host copy of a flag; the mask only on error
        pos = tuple(int(i) for i in np.argwhere(to_device(bad, "cpu"))[0])
        value = int(ids[pos])
        raise IndexError(
            f"{op}: id {value} at position {pos} is out of range for {what} {size}"
            + (f" (ignore_index is {ignore})" if ignore is not None else "")
        )


def check_padding_idx(op: str, padding_idx: Any, num_embeddings: int) -> int | None:
    """``padding_idx`` as a row index in [0, num_embeddings), or None. As in torch it must
    lie in [-num_embeddings, num_embeddings), a negative value counting from the end; a
    value outside is a ValueError and a non-integer (a float, a bool) a TypeError, each
    naming ``op``, the value and num_embeddings (NumPy would wrap -10 silently onto some row
    and fail only in backward for 7)."""
    if padding_idx is None:
        return None
    if isinstance(padding_idx, (bool, np.bool_)) or not isinstance(padding_idx,
                                                                    (int, np.integer)):
        raise TypeError(f"{op}: padding_idx must be an integer or None, got {padding_idx!r} "
                        f"({type(padding_idx).__name__})")
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(
            f"{op}: padding_idx {padding_idx} is out of range for num_embeddings "
            f"{num_embeddings} (valid: {-num_embeddings} to {num_embeddings - 1})"
        )
    return int(padding_idx) % num_embeddings


#: Occurrences of one id that :func:`_scatter_add_rows` adds by rank; later ones go to add.at.
SCATTER_RANKS = 4


def _scatter_add_rows(xp: Any, dw: Any, ids: Any, rows: Any) -> None:
    """dw[ids[i]] += rows[i] for every i, in that order: what ``xp.add.at(dw, ids, rows)``
    computes, bit for bit, with fewer of add.at's slow element-by-element updates.

    A stable sort groups the positions of each id in their order of occurrence and numbers
    them: rank 0 for an id's first occurrence, 1 for its second, ... The ids of one rank are
    distinct, so ``dw[ids] += rows`` adds a whole rank at once (a fancy-indexed ``+=`` with a
    repeated index would keep only one of its rows). The first ``SCATTER_RANKS`` ranks go this
    way, one rank after the other; add.at adds the rest (frequent ids) in their order. Every
    row of dw thus receives its rows in order of occurrence, as add.at adds them.

    Shapes: dw (V, E), ids (n,) in [0, V), rows (n, E); n >= 1.
    """
    n = ids.shape[0]
    order = xp.argsort(ids, kind="stable")                      # (n,) grouped by id
    sorted_ids = ids[order]
    first = xp.empty(n, dtype=bool)                             # an id's first occurrence
    first[0] = True
    xp.not_equal(sorted_ids[1:], sorted_ids[:-1], out=first[1:])
    starts = xp.flatnonzero(first)                              # where each id's run starts
    run_start = starts[xp.cumsum(first) - 1]                    # (n,) its run's start
    rank = xp.arange(n) - run_start                             # (n,) rank in sorted order
    for r in range(min(SCATTER_RANKS, int(rank.max()) + 1)):
        at = order[rank == r]                                   # positions of rank r
        dw[ids[at]] += rows[at]
    rest = order[rank >= SCATTER_RANKS]                         # each id's in its order
    if rest.size:
        xp.add.at(dw, ids[rest], rows[rest])


class Embedding(Function):
    """y = weight[ids]: row lookup.  VJP: dL/dweight[v] = sum of g at every position whose id
    is v (scatter-add; repeated ids accumulate). The row at ``padding_idx`` (checked by
    :func:`check_padding_idx`; negative counts from the end) gets zero gradient."""

    @staticmethod
    def forward(ctx: Context, weight: Any, ids: Any, padding_idx: int | None = None) -> Any:
        xp = get_array_module(weight)
        ids = xp.asarray(ids)
        if weight.ndim != 2:
            raise ValueError(f"embedding: weight must be 2-D (V, E), got shape {weight.shape}")
        padding_idx = check_padding_idx("embedding", padding_idx, weight.shape[0])
        check_token_ids("embedding", ids, weight.shape[0])
        ctx.save_for_backward(ids)
        ctx.num_rows, ctx.padding_idx = weight.shape[0], padding_idx
        return weight[ids]

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (ids,) = ctx.saved_arrays
        xp = get_array_module(g)
        dw = xp.zeros((ctx.num_rows, g.shape[-1]), dtype=g.dtype)  # (V, E)
        flat = ids.reshape(-1)                                     # (n,)
        # (ids.size, E), not (-1, E): -1 is ambiguous when E = 0
        rows = g.reshape(ids.size, g.shape[-1])                    # (n, E)
        if flat.size:
            _scatter_add_rows(xp, dw, flat, rows)
        if ctx.padding_idx is not None:
            dw[ctx.padding_idx] = 0
        return dw


class Dropout(Function):
    """y = x * m / (1 - p) with a fixed 0/1 mask m drawn by the caller (inverted dropout).
    VJP: dL/dx = g * m / (1 - p)."""

    int_inputs_as_float = True

    @staticmethod
    def forward(ctx: Context, x: Any, keep: Any, p: float) -> Any:
        scale = keep.astype(x.dtype) * x.dtype.type(1.0 / (1.0 - p))
        ctx.save_for_backward(scale)
        return x * scale

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (scale,) = ctx.saved_arrays
        return g * scale
