"""Reductions over axes: sum, mean, max (with keepdims)."""
from __future__ import annotations

from typing import Any

from ..backend import get_array_module
from .base import Context, Function


def normalize_axes(op: str, axis: Any, ndim: int) -> tuple:
    """Axis argument (None, int or tuple, negatives allowed) as a sorted tuple of
    non-negative axes; IndexError naming the op for an axis out of range."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    if ndim == 0:  # a 0-d tensor accepts axis 0 / -1, like torch
        if any(ax not in (0, -1) for ax in axes):
            raise IndexError(f"{op}: axis {axis} is out of range for a 0-d tensor")
        return ()
    out = []
    for ax in axes:
        if not -ndim <= ax < ndim:
            raise IndexError(f"{op}: axis {ax} is out of range for a {ndim}-d tensor")
        out.append(ax % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axis in {axis}")
    return tuple(sorted(out))


def _expand(g: Any, in_shape: tuple, axes: tuple, keepdims: bool) -> Any:
    """Broadcast a reduced gradient back to the input shape (the VJP of a reduction)."""
    xp = get_array_module(g)
    if not keepdims:
        for ax in axes:
            g = xp.expand_dims(g, ax)
    return xp.broadcast_to(g, in_shape)


class Sum(Function):
    """y = sum of x over ``axis``.  VJP: dL/dx = g broadcast back over the summed axes."""

    @staticmethod
    def forward(ctx: Context, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        axes = normalize_axes("sum", axis, x.ndim)
        ctx.axes, ctx.keepdims, ctx.in_shape = axes, keepdims, x.shape
        return get_array_module(x).sum(x, axis=axes, keepdims=keepdims)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        return _expand(g, ctx.in_shape, ctx.axes, ctx.keepdims)


class Mean(Function):
    """y = mean of x over ``axis``.  VJP: dL/dx = g / n broadcast back (n = number of
    averaged elements). The mean over zero elements is NaN, as in NumPy and torch."""

    float_math = True

    @staticmethod
    def forward(ctx: Context, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        xp = get_array_module(x)
        axes = normalize_axes("mean", axis, x.ndim)
        n = 1
        for ax in axes:
            n *= x.shape[ax]
        ctx.axes, ctx.keepdims, ctx.in_shape, ctx.n = axes, keepdims, x.shape, n
        total = xp.sum(x, axis=axes, keepdims=keepdims)
        if n == 0:
            return xp.full(total.shape, xp.nan, dtype=x.dtype)
        return total / x.dtype.type(n)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        scale = g.dtype.type(1.0 / ctx.n) if ctx.n else g.dtype.type(0.0)
        return _expand(g * scale, ctx.in_shape, ctx.axes, ctx.keepdims)


class Max(Function):
    """y = max of x over ``axis``.  VJP: g goes to the maximal entries; when several entries
    tie for the maximum, each gets an equal share g / (number of ties)."""

    @staticmethod
    def forward(ctx: Context, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        xp = get_array_module(x)
        axes = normalize_axes("max", axis, x.ndim)
        if any(x.shape[ax] == 0 for ax in axes):
            raise ValueError(f"max: cannot reduce over an empty axis of shape {x.shape}")
        y = xp.max(x, axis=axes, keepdims=True)
        hit = x == y
        count = xp.sum(hit, axis=axes, keepdims=True)
        ctx.save_for_backward(hit, count)
        ctx.axes, ctx.keepdims = axes, keepdims
        return y if keepdims else y.reshape(tuple(s for i, s in enumerate(x.shape)
                                                     if i not in axes))

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        hit, count = ctx.saved_arrays
        xp = get_array_module(g)
        if not ctx.keepdims:
            for ax in ctx.axes:
                g = xp.expand_dims(g, ax)
        return xp.where(hit, g / count.astype(g.dtype), xp.zeros((), dtype=g.dtype))
