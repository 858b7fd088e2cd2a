"""Shape primitives: reshape, transpose, broadcast, concatenate, stack, split, indexing.

Their backward passes move gradient entries back to where the values came from; nothing is
computed, so each VJP is exact.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..backend import get_array_module, index_array_axes, to_device
from .base import Context, Function
from .elementwise import broadcast_shape


class Reshape(Function):
    """y = x.reshape(shape).  VJP: dL/dx = g.reshape(x.shape)."""

    @staticmethod
    def forward(ctx: Context, x: Any, shape: tuple) -> Any:
        try:
            y = x.reshape(shape)
        except ValueError:
            raise ValueError(
                f"reshape: cannot reshape a tensor of shape {x.shape} ({x.size} elements) "
                f"into shape {tuple(shape)}"
            ) from None
        ctx.in_shape = x.shape
        return y

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        return g.reshape(ctx.in_shape)


class Transpose(Function):
    """y = x.transpose(axes) (a permutation, NumPy's meaning: output axis i is input axis
    axes[i]; negative axes count from the end).  VJP: g transposed by the inverse
    permutation.

    There must be ndim axes, together a permutation (ValueError), each in [-ndim, ndim)
    (IndexError naming the axis as given): an axis is never wrapped with ``%``, which would
    make ``transpose(0, 5)`` of a 2-D tensor a silent identity. ``op`` is the public name
    the errors give (``permute`` calls this op too)."""

    @staticmethod
    def forward(ctx: Context, x: Any, axes: tuple | None = None,
                op: str = "transpose") -> Any:
        if axes is None:
            axes = tuple(reversed(range(x.ndim)))
        given = tuple(axes)
        if len(given) != x.ndim:
            raise ValueError(
                f"{op}: axes {given} are not a permutation of the {x.ndim} dimensions "
                f"of a tensor of shape {x.shape} (give {x.ndim} axes)"
            )
        for a in given:
            if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
                raise TypeError(f"{op}: axes must be integers, got {given!r}")
            if not -x.ndim <= a < x.ndim:
                raise IndexError(
                    f"{op}: axis {a} in {given} is out of range for a tensor of shape "
                    f"{x.shape}" + (f" (valid: {-x.ndim} to {x.ndim - 1})" if x.ndim
                                    else " (a 0-d tensor has no axes)")
                )
        axes = tuple(int(a) % x.ndim for a in given)
        if sorted(axes) != list(range(x.ndim)):
            raise ValueError(
                f"{op}: axes {given} are not a permutation of the {x.ndim} dimensions "
                f"of a tensor of shape {x.shape}"
            )
        ctx.inverse = tuple(sorted(range(len(axes)), key=lambda i: axes[i]))
        return x.transpose(axes)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        return g.transpose(ctx.inverse)


class BroadcastTo(Function):
    """y = broadcast_to(x, shape).  VJP: sum_to_shape(g, x.shape), done by the engine."""

    @staticmethod
    def forward(ctx: Context, x: Any, shape: tuple) -> Any:
        shape = tuple(shape)
        if broadcast_shape("broadcast_to", x.shape, shape) != shape:
            raise ValueError(f"broadcast_to: cannot broadcast shape {x.shape} to {shape}")
        # a read-only view, as torch's expand: entries share memory, so writing is refused
        return get_array_module(x).broadcast_to(x, shape)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        return g  # the engine's sum_to_shape then sums the copies: (BC8)


def _check_same_but(op: str, arrays: Sequence[Any], axis: int, stacking: bool) -> int:
    if not arrays:
        raise ValueError(f"{op}: expected a non-empty sequence of tensors")
    ref = arrays[0]
    ndim = ref.ndim + (1 if stacking else 0)
    if not -ndim <= axis < ndim:
        shapes = ", ".join(str(a.shape) for a in arrays)
        raise IndexError(
            f"{op}: axis {axis} is out of range for {ndim}-d results (valid: {-ndim} to "
            f"{ndim - 1}) of tensors of shapes {shapes}"
        )
    axis %= ndim
    for k, a in enumerate(arrays[1:], start=1):
        if stacking and a.shape != ref.shape:
            raise ValueError(
                f"{op}: all tensors must have the same shape, but tensor 0 has shape "
                f"{ref.shape} and tensor {k} has shape {a.shape}"
            )
        if not stacking:
            same = a.ndim == ref.ndim and all(
                s == r for i, (s, r) in enumerate(zip(a.shape, ref.shape)) if i != axis
            )
            if not same:
                raise ValueError(
                    f"{op}: tensor 0 has shape {ref.shape} and tensor {k} has shape "
                    f"{a.shape}; sizes must match except in dimension {axis}"
                )
    return axis


class Concatenate(Function):
    """y = concatenate(xs, axis).  VJP: g split back into the pieces' sizes along axis."""

    @staticmethod
    def forward(ctx: Context, *xs: Any, axis: int = 0) -> Any:
        axis = _check_same_but("cat", xs, axis, stacking=False)
        ctx.axis = axis
        ctx.sizes = [x.shape[axis] for x in xs]
        return get_array_module(*xs).concatenate(xs, axis=axis)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        out, start = [], 0
        index: list[Any] = [slice(None)] * g.ndim
        for size in ctx.sizes:
            index[ctx.axis] = slice(start, start + size)
            out.append(g[tuple(index)])
            start += size
        return tuple(out)


class Stack(Function):
    """y = stack(xs, axis) (a new axis).  VJP: piece k gets g indexed at k along axis."""

    @staticmethod
    def forward(ctx: Context, *xs: Any, axis: int = 0) -> Any:
        axis = _check_same_but("stack", xs, axis, stacking=True)
        ctx.axis = axis
        return get_array_module(*xs).stack(xs, axis=axis)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = get_array_module(g)
        return tuple(xp.take(g, k, axis=ctx.axis) for k in range(g.shape[ctx.axis]))


class Split(Function):
    """ys = split(x, sizes, axis) (torch semantics: a piece size or a list of sizes).
    VJP: the pieces' gradients concatenated along axis (zeros for unused pieces)."""

    @staticmethod
    def forward(ctx: Context, x: Any, sizes: Sequence[int], axis: int = 0) -> tuple:
        if x.ndim == 0 or not -x.ndim <= axis < x.ndim:
            raise IndexError(f"split: axis {axis} is out of range for shape {x.shape}")
        axis %= x.ndim
        if sum(sizes) != x.shape[axis] or any(s < 0 for s in sizes):
            raise ValueError(
                f"split: sizes {list(sizes)} do not add up to {x.shape[axis]}, the size of "
                f"dimension {axis} of shape {x.shape}"
            )
        ctx.axis = axis
        out, start = [], 0
        index: list[Any] = [slice(None)] * x.ndim
        for size in sizes:
            index[axis] = slice(start, start + size)
            out.append(x[tuple(index)].copy())
            start += size
        return tuple(out)

    @staticmethod
    def backward(ctx: Context, *gs: Any) -> Any:
        return get_array_module(*gs).concatenate(gs, axis=ctx.axis)


class Unbind(Function):
    """ys = the slices of x along ``axis`` (torch's ``unbind``): y_k = x[..., k, ...], each a
    view of x.  VJP: the slices' gradients stacked along axis (zeros for unused slices).

    One node for all slices: a loop over ``x[t]`` makes T ``GetItem`` nodes, each of whose
    backward scatters its slice's gradient into a zero array of x's whole shape, T times
    x's size of memory traffic; this backward stacks the T gradients once."""

    @staticmethod
    def forward(ctx: Context, x: Any, axis: int = 0) -> tuple:
        if x.ndim == 0 or not -x.ndim <= axis < x.ndim:
            raise IndexError(f"unbind: dim {axis} is out of range for a tensor of shape "
                             f"{x.shape}")
        axis %= x.ndim
        ctx.axis = axis
        lead = (slice(None),) * axis
        return tuple(x[lead + (k,)] for k in range(x.shape[axis]))

    @staticmethod
    def backward(ctx: Context, *gs: Any) -> Any:
        return get_array_module(*gs).stack(gs, axis=ctx.axis)


def is_advanced_index(index: tuple) -> bool:
    """Whether ``index`` (a tuple) holds an index array or a boolean mask: NumPy's
    advanced indexing, which copies, where integers, slices, None and ... give a view."""
    return any(not isinstance(i, (int, slice, type(None), type(Ellipsis))) for i in index)


def check_index_bounds(op: str, index: tuple, shape: tuple) -> None:
    """Raise NumPy's IndexError for an out-of-range entry of an integer index array on a
    device, where CuPy would wrap it around silently (``x[[0, 5]]`` on 3 rows would read
    row 2; a backward ``add.at`` would add into it).

    ``index`` is a normalised index tuple for an array of ``shape`` whose integer arrays
    live on a device. The check costs one small device-to-host copy: the minimum and the
    maximum of every non-empty integer array, read together. NumPy arrays need no check
    (NumPy raises itself); call this only for device data. The message has NumPy's words,
    so it is the same on every device: the op, the index, the shape, the offending value
    (the largest out of range, or else the smallest) and its axis."""
    axes = [(pos, axis) for pos, axis in index_array_axes(index, len(shape)) or ()
            if index[pos].size]
    if not axes:
        return
    xp = get_array_module(*(index[pos] for pos, _ in axes))
    ends = xp.stack([e for pos, _ in axes for e in (index[pos].min(), index[pos].max())])
    ends = to_device(ends, "cpu").tolist()  # the one host read
    for k, (pos, axis) in enumerate(axes):
        lo, hi, n = int(ends[2 * k]), int(ends[2 * k + 1]), shape[axis]
        bad = hi if hi >= n else lo if lo < -n else None
        if bad is not None:
            raise IndexError(f"{op}: index {index!r} for shape {shape}: index {bad} is out of "
                             f"bounds for axis {axis} with size {n}")


class GetItem(Function):
    """y = x[index] for basic (ints, slices, None, ...) and advanced (integer or boolean
    arrays) indices.  VJP: scatter g back into zeros of x's shape; repeated integer indices
    accumulate (``add.at``), they do not overwrite.

    An out-of-range integer is an IndexError naming the index, its axis and the shape, on
    every device: NumPy raises it itself, device data is checked first
    (:func:`check_index_bounds`), since CuPy would wrap the index around."""

    @staticmethod
    def forward(ctx: Context, x: Any, index: tuple) -> Any:
        if get_array_module(x) is not np:
            check_index_bounds("getitem", index, x.shape)
        try:
            y = x[index]
        except IndexError as err:
            raise IndexError(f"getitem: index {index!r} for shape {x.shape}: {err}") from None
        ctx.index, ctx.in_shape, ctx.advanced = index, x.shape, is_advanced_index(index)
        if ctx.advanced:
            return get_array_module(x).asarray(y)  # a copy, as in torch and NumPy
        return basic_view(x, index)  # a view: writes through it reach x (torch's rule)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        xp = get_array_module(g)
        dx = xp.zeros(ctx.in_shape, dtype=g.dtype)
        if ctx.advanced:
            xp.add.at(dx, ctx.index, g)
        else:
            dx[ctx.index] = g
        return dx


# ------------------------------------------------------------------------- views
# A view is described by the steps that make it from its base's array: ("index", index)
# for basic indexing, ("reshape", shape), ("transpose", axes), ("expand", shape). The
# tensor layer records them on every view (tinygrad_rnn/tensor.py, "Views"); the two ops
# below use them to route gradients when a write through a view is recorded.


def basic_view(x: Any, index: tuple) -> Any:
    """``x[index]`` for a basic index (ints, slices, None, ...), always a view of ``x``, also
    when every axis gets an integer (NumPy would return a copied scalar there; a trailing
    ``...`` keeps the 0-d result a view)."""
    if not any(i is Ellipsis for i in index):
        index = index + (Ellipsis,)
    return x[index]


def apply_view_steps(a: Any, steps: tuple) -> Any:
    """The array the view ``steps`` make from ``a`` (a view where NumPy can make one)."""
    xp = get_array_module(a)
    for kind, arg in steps:
        if kind == "index":
            a = a[arg] if is_advanced_index(arg) else basic_view(a, arg)
        elif kind == "reshape":
            a = a.reshape(arg)
        elif kind == "transpose":
            a = a.transpose(arg)
        else:  # "expand"
            a = xp.broadcast_to(a, arg)
    return a


def _region_of(g: Any, steps: tuple) -> tuple:
    """(flat, positions): ``g`` as a flat C-ordered copy and the flat positions of the
    entries the view ``steps`` select, in the view's shape. Exact whatever the memory layout
    (a reshape that copies still carries the positions)."""
    xp = get_array_module(g)
    positions = apply_view_steps(xp.arange(g.size).reshape(g.shape), steps)
    return xp.ascontiguousarray(g).reshape(-1).copy(), positions


class ViewOf(Function):
    """y = the view ``steps`` of x, recorded again after x was rebased by a recorded in-place
    write (the view's values changed with x's, so its graph must lead to the new x).
    VJP: dL/dx = g scattered into zeros at the view's entries (summed where an expanded
    view repeats one)."""

    @staticmethod
    def forward(ctx: Context, x: Any, steps: tuple) -> Any:
        ctx.steps, ctx.in_shape = steps, x.shape
        return apply_view_steps(x, steps)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        xp = get_array_module(g)
        dx, positions = _region_of(xp.zeros(ctx.in_shape, dtype=g.dtype), ctx.steps)
        xp.add.at(dx, positions.reshape(-1), xp.broadcast_to(g, positions.shape).reshape(-1))
        return dx.reshape(ctx.in_shape)


class WriteRegion(Function):
    """base' = base with the region ``steps`` (a view's steps, then the written index)
    replaced by ``value`` (broadcast to the region), written into base's own memory: the
    recorded form of ``base[index] = value``, of ``view.fill_``/``copy_`` and of an in-place
    operator on a view or a tensor in a graph (``h += x``, ``out[t] = h_t``).

    The output is base's array itself, so every view of base sees the write.
    VJP: dL/dbase = g with the region set to 0 (those entries were overwritten);
    dL/dvalue = g at the region (summed to value's shape by the engine)."""

    @staticmethod
    def forward(ctx: Context, base: Any, value: Any, steps: tuple, op: str) -> Any:
        if steps and steps[-1][0] == "index" and is_advanced_index(steps[-1][1]):
            target, last = apply_view_steps(base, steps[:-1]), steps[-1][1]
            _check_distinct(op, target.shape, last)
        else:
            target, last = apply_view_steps(base, steps), (Ellipsis,)
        if (target is not base and target.size
                and not get_array_module(base).may_share_memory(target, base)):
            raise RuntimeError(f"{op}: the region written is not a view of its base "
                               f"(shape {base.shape}); write into the base directly")
        try:
            target[last] = value
        except ValueError as err:
            raise ValueError(f"{op}: cannot write a value of shape {value.shape} into a region "
                             f"of shape {target[last].shape}: {err}") from None
        ctx.steps, ctx.shape = steps, base.shape
        return base

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        flat, positions = _region_of(g, ctx.steps)
        dvalue = flat[positions]
        flat[positions] = 0
        return flat.reshape(ctx.shape), dvalue


def _check_distinct(op: str, shape: tuple, index: tuple) -> None:
    """ValueError when an advanced index written into selects one entry twice: only the last
    write survives, so the gradient of the overwritten values is not defined."""
    xp = get_array_module(*[i for i in index if hasattr(i, "dtype")] or [np.empty(0)])
    positions = xp.arange(math.prod(shape)).reshape(shape)[index]
    if positions.size and xp.unique(positions).size != positions.size:
        raise ValueError(
            f"{op}: the index {index!r} selects some entries of shape {shape} more than once; "
            f"a recorded write needs distinct entries (only the last write of a repeated "
            f"entry survives, so its gradient is undefined). Deduplicate the index, or add "
            f"with index_add-style code: base = base + scattered values"
        )
