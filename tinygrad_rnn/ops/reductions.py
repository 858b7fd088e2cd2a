"""Reductions over axes: sum, mean, max, min (with keepdims).

``axis`` is None, an int or a tuple or list of ints (Python or NumPy integers, as in torch
and NumPy); ``keepdims`` is True or False (Python or NumPy bools, or 0 and 1)."""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..backend import get_array_module
from .base import Context, Function, pairwise_sum


def _type_name(value: Any) -> str:
    """The type of ``value`` as written in code: ``'float'``, ``'str'``, ``'numpy.bool'``
    (NumPy 2 names its bool type plain ``bool``, which would read like Python's)."""
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


def _axis_index(op: str, ax: Any, axis: Any) -> int:
    """One axis as a Python int: a Python or NumPy integer (anything ``operator.index``
    takes), never a bool or a float; a TypeError naming the op and the axis argument."""
    if not isinstance(ax, (bool, np.bool_)):
        try:
            return operator.index(ax)
        except TypeError:
            pass
    raise TypeError(f"{op}: axis must be an int or a tuple of ints, got {axis!r} (an axis "
                    f"of type {_type_name(ax)})")


def normalize_axes(op: str, axis: Any, shape: tuple) -> tuple:
    """Axis argument (None, an int or a tuple or list of ints, Python or NumPy, negatives
    allowed) as a sorted tuple of non-negative axes of a tensor of ``shape``; a TypeError
    for a bool, a float or anything else that is not an integer, an IndexError naming the
    op, the axis and the shape for an axis out of range."""
    ndim = len(shape)
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        axes = tuple(_axis_index(op, ax, axis) for ax in axis)
    else:
        axes = (_axis_index(op, axis, axis),)
    if ndim == 0:  # a 0-d tensor accepts axis 0 / -1, like torch
        if any(ax not in (0, -1) for ax in axes):
            raise IndexError(f"{op}: axis {axis} is out of range for a 0-d tensor "
                             f"(valid: 0 or -1)")
        return ()
    out = []
    for ax in axes:
        if not -ndim <= ax < ndim:
            raise IndexError(f"{op}: axis {ax} is out of range for a tensor of shape "
                             f"{tuple(shape)} (valid: {-ndim} to {ndim - 1})")
        out.append(ax % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axis in {axis}")
    return tuple(sorted(out))


def keepdims_flag(op: str, keepdims: Any) -> bool:
    """``keepdims`` as a Python bool: True or False (Python or NumPy), or the integers 0 and
    1; anything else (``'no'``, ``2``, ``None``, ``1.0``) is a TypeError naming the op, since
    its truthiness would pick a shape by accident."""
    if isinstance(keepdims, (bool, np.bool_)) or (
            isinstance(keepdims, (int, np.integer)) and keepdims in (0, 1)):
        return bool(keepdims)
    raise TypeError(f"{op}: keepdims must be True or False, got {keepdims!r} "
                    f"({_type_name(keepdims)})")


def divide_by_count(a: Any, n: int) -> Any:
    """``a / n`` in ``a``'s float dtype, rounded once, for a count ``n`` of any size.

    Dividing by ``a.dtype.type(n)`` would round the count first: float16 holds integers
    exactly only up to 2048 and overflows to inf above 65504 (a float16 mean of 70,000
    numbers would be 0), float32 only up to 2**24. Narrower floats are therefore divided in
    float64, where the count is exact, and rounded back. That double rounding gives the
    correctly rounded quotient (float64 has more than 2p + 2 bits for a p-bit float32 or
    float16), so a float32 result is bit for bit the float32 division by any count below
    2**24. float64 and wider divide directly."""
    if a.dtype.itemsize >= 8:
        return a / a.dtype.type(n)
    return (a.astype(np.float64) / np.float64(n)).astype(a.dtype)


def _expand(g: Any, in_shape: tuple, axes: tuple, keepdims: bool) -> Any:
    """Broadcast a reduced gradient back to the input shape (the VJP of a reduction)."""
    xp = get_array_module(g)
    if not keepdims:
        for ax in axes:
            g = xp.expand_dims(g, ax)
    return xp.broadcast_to(g, in_shape)


class Sum(Function):
    """y = sum of x over ``axis``.  VJP: dL/dx = g broadcast back over the summed axes.

    float32 and float16 are added with :func:`~tinygrad_rnn.ops.base.pairwise_sum`, whose
    rounding error does not grow with the number of terms (NumPy's sum over a batch axis
    does); float64 and integers are NumPy's sum."""

    @staticmethod
    def forward(ctx: Context, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        axes = normalize_axes("sum", axis, x.shape)
        keepdims = keepdims_flag("sum", keepdims)
        ctx.axes, ctx.keepdims, ctx.in_shape = axes, keepdims, x.shape
        return pairwise_sum(x, axes, keepdims)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        return _expand(g, ctx.in_shape, ctx.axes, ctx.keepdims)


class Mean(Function):
    """y = mean of x over ``axis``.  VJP: dL/dx = g / n broadcast back (n = number of
    averaged elements). The mean over zero elements is NaN, as in NumPy and torch.

    The sum is divided by the count with :func:`divide_by_count` (the count is never
    rounded to the input's dtype), and a float16 input is summed in float32, as torch does:
    its sum overflows float16 long before its mean could. float32 (and that float16) sum is
    :func:`~tinygrad_rnn.ops.base.pairwise_sum`, whose error does not grow with the count."""

    int_inputs_as_float = True

    @staticmethod
    def forward(ctx: Context, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        xp = get_array_module(x)
        axes = normalize_axes("mean", axis, x.shape)
        keepdims = keepdims_flag("mean", keepdims)
        n = 1
        for ax in axes:
            n *= x.shape[ax]
        ctx.axes, ctx.keepdims, ctx.in_shape, ctx.n = axes, keepdims, x.shape, n
        total = pairwise_sum(x if x.dtype.itemsize >= 4 else x.astype(np.float32),
                             axes, keepdims)
        if n == 0:
            return xp.full(total.shape, xp.nan, dtype=x.dtype)
        return divide_by_count(total, n).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        if not ctx.n:  # nothing was averaged: the gradient is empty, any scale will do
            g = g * g.dtype.type(0.0)
        elif g.dtype.itemsize < 4:  # float16: 1 / n would lose bits or underflow to 0
            g = divide_by_count(g, ctx.n)
        else:
            g = g * g.dtype.type(1.0 / ctx.n)
        return _expand(g, ctx.in_shape, ctx.axes, ctx.keepdims)


def _extremum_forward(ctx: Context, op: str, x: Any, axis: Any, keepdims: bool) -> Any:
    """Forward of max or min (``op``): the extreme value over the axes, with what the
    backward needs saved: the mask of the entries that reach it and their number."""
    xp = get_array_module(x)
    axes = normalize_axes(op, axis, x.shape)
    keepdims = keepdims_flag(op, keepdims)
    if any(x.shape[ax] == 0 for ax in axes):
        raise ValueError(f"{op}: cannot reduce over an empty axis of shape {x.shape}")
    reduce = xp.max if op == "max" else xp.min
    y = reduce(x, axis=axes, keepdims=True)
    hit = x == y
    count = xp.sum(hit, axis=axes, keepdims=True)
    ctx.save_for_backward(hit, count)
    ctx.axes, ctx.keepdims = axes, keepdims
    return y if keepdims else y.reshape(tuple(s for i, s in enumerate(x.shape)
                                                 if i not in axes))


def _extremum_backward(ctx: Context, g: Any) -> Any:
    """g shared equally among the entries that reached the extreme value, 0 elsewhere."""
    hit, count = ctx.saved_arrays
    xp = get_array_module(g)
    if not ctx.keepdims:
        for ax in ctx.axes:
            g = xp.expand_dims(g, ax)
    return xp.where(hit, g / count.astype(g.dtype), xp.zeros((), dtype=g.dtype))


class Max(Function):
    """y = max of x over ``axis``.  VJP: g goes to the maximal entries; when several entries
    tie for the maximum, each gets an equal share g / (number of ties)."""

    @staticmethod
    def forward(ctx: Context, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return _extremum_forward(ctx, "max", x, axis, keepdims)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        return _extremum_backward(ctx, g)


class Min(Function):
    """y = min of x over ``axis``.  VJP: g goes to the minimal entries; when several entries
    tie for the minimum, each gets an equal share g / (number of ties), as for :class:`Max`.

    A reduction of its own, not -max(-x): negation is not exact for integers (unsigned
    integers wrap around, the most negative int64 has no positive) and not defined for
    booleans."""

    @staticmethod
    def forward(ctx: Context, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return _extremum_forward(ctx, "min", x, axis, keepdims)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        return _extremum_backward(ctx, g)


class Norm(Function):
    """y = ||x||_p over ``axis`` = (sum_i |x_i|^p)^(1/p), for a real p > 0 (torch's
    ``norm(p, dim)``; p = 2 is the Euclidean norm).

    VJP: dL/dx_i = g * sign(x_i) |x_i|^(p-1) / y^(p-1), which for p = 2 is g * x_i / y.
    Where y = 0 (every x_i is 0) the norm has no derivative; the gradient is 0 there, as in
    torch (a subgradient), never the NaN of 0/0."""

    int_inputs_as_float = True

    @staticmethod
    def forward(ctx: Context, x: Any, p: float = 2.0, axis: Any = None,
                keepdims: bool = False) -> Any:
        xp = get_array_module(x)
        axes = normalize_axes("norm", axis, x.shape)
        a = xp.abs(x)
        if p == 2.0:
            y = xp.sqrt(pairwise_sum(a * a, axes, keepdims=True))
        else:  # the powers in float64, rounded once (the same bits on every device)
            # (exponents as arrays: NumPy's scalar fast paths would differ between devices)
            total = pairwise_sum(a.astype(np.float64) ** xp.asarray(p, np.float64), axes,
                                 keepdims=True)
            y = (total ** xp.asarray(1.0 / p, np.float64)).astype(x.dtype)
        ctx.save_for_backward(x, y)
        ctx.p, ctx.axes, ctx.keepdims = p, axes, keepdims
        return y if keepdims else y.reshape(tuple(n for k, n in enumerate(y.shape)
                                                  if k not in axes))

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        xp = get_array_module(g)
        x, y = ctx.saved_arrays
        if not ctx.keepdims:
            g = g.reshape(y.shape)
        safe = xp.where(y == 0, 1, y)
        if ctx.p == 2.0:
            dx = g * x / safe
        else:  # |x|^(p-1) / y^(p-1) = (|x| / y)^(p-1), in float64, rounded once
            ratio = (xp.abs(x).astype(np.float64) / safe) ** xp.asarray(ctx.p - 1, np.float64)
            dx = g * xp.sign(x) * ratio.astype(x.dtype)
        return xp.where(y == 0, 0, dx).astype(x.dtype, copy=False)
