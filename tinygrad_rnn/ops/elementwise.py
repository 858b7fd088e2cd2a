"""Elementwise arithmetic primitives with broadcasting.

Each backward returns the gradient in the broadcast (output) shape; the engine reduces it to
the input's shape with the one central ``sum_to_shape``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..backend import get_array_module, get_default_dtype
from .base import Context, Function


def broadcast_shape(op: str, *shapes: tuple) -> tuple:
    """The broadcast shape of ``shapes``, or a ``ValueError`` naming the op and every shape."""
    out: list[int] = []
    for shape in shapes:
        shape = tuple(shape)
        if len(shape) > len(out):
            out = [1] * (len(shape) - len(out)) + out
        padded = (1,) * (len(out) - len(shape)) + shape
        for i, (a, b) in enumerate(zip(out, padded)):
            if a == 1:
                out[i] = b
            elif b != 1 and a != b:
                joined = " and ".join(str(tuple(s)) for s in shapes)
                raise ValueError(
                    f"{op}: shapes {joined} cannot be broadcast together "
                    f"(size {a} vs {b} in aligned dimension {i - len(out)})"
                )
    return tuple(out)


class Add(Function):
    """z = a + b.  VJP: dL/da = g, dL/db = g (then summed to each input's shape)."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        if a.shape != b.shape:  # (equal shapes broadcast: no check needed)
            broadcast_shape("add", a.shape, b.shape)
        return a + b

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        return g, g


class Sub(Function):
    """z = a - b.  VJP: dL/da = g, dL/db = -g."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        if a.shape != b.shape:  # (equal shapes broadcast: no check needed)
            broadcast_shape("sub", a.shape, b.shape)
        return a - b

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        return g, -g


class Mul(Function):
    """z = a * b.  VJP: dL/da = g * b, dL/db = g * a."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        if a.shape != b.shape:  # (equal shapes broadcast: no check needed)
            broadcast_shape("mul", a.shape, b.shape)
        needs_a, needs_b = ctx.needs_input_grad
        # each factor is kept only if the other one's gradient needs it (as torch does), so
        # writing in place into a factor that no gradient needs is no error: x * 2.0 keeps
        # nothing of x
        ctx.save_for_backward(a if needs_b else None, b if needs_a else None)
        return a * b

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        a, b = ctx.saved_arrays
        da = g * b if ctx.needs_input_grad[0] else None
        db = g * a if ctx.needs_input_grad[1] else None
        return da, db


class Div(Function):
    """z = a / b.  VJP: dL/da = g / b, dL/db = -g * a / b^2 = -g * z / b.

    dL/db is computed as -g * (a / b) / b, never with b^2: in float32, b^2 loses precision
    for |b| below about 1e-19 (and is 0 below 4e-23) and overflows to inf above about 1.8e19,
    where the gradient itself is an ordinary number (a = 1e-30, b = 1e-23 gives -1e16, not
    -inf; a = b = 1e20 gives -1e-20, not -0)."""

    int_inputs_as_float = True

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        if a.shape != b.shape:  # (equal shapes broadcast: no check needed)
            broadcast_shape("div", a.shape, b.shape)
        ctx.save_for_backward(a if ctx.needs_input_grad[1] else None, b)  # (as Mul)
        return a / b

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        a, b = ctx.saved_arrays
        da = g / b if ctx.needs_input_grad[0] else None
        db = -g * (a / b) / b if ctx.needs_input_grad[1] else None
        return da, db


class Neg(Function):
    """z = -x.  VJP: dL/dx = -g."""

    @staticmethod
    def forward(ctx: Context, x: Any) -> Any:
        return -x

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        return -g


class Pow(Function):
    """z = x ** p for a constant scalar exponent p.  VJP: dL/dx = g * p * x^(p-1).

    For p = 0, z is the constant 1 and the gradient is exactly 0, also at x = 0 (where
    p * x^(p-1) would be 0 * inf = NaN), as in torch.
    """

    @staticmethod
    def forward(ctx: Context, x: Any, exponent: float) -> Any:
        xp = get_array_module(x)
        p = xp.asarray(exponent, dtype=x.dtype)
        ctx.save_for_backward(x)
        ctx.exponent = p
        return x**p

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (x,) = ctx.saved_arrays
        p = ctx.exponent
        if p == 0:
            return get_array_module(g).zeros_like(g)
        return g * p * x ** (p - 1)


class Exp(Function):
    """y = exp(x).  Jacobian diag(y); VJP: dL/dx = g * y (saved output)."""

    int_inputs_as_float = True

    @staticmethod
    def forward(ctx: Context, x: Any) -> Any:
        y = get_array_module(x).exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        # exercise: exp_backward begin
        (y,) = ctx.saved_arrays
        return g * y
        # exercise: end


class Log(Function):
    """y = log(x).  VJP: dL/dx = g / x."""

    int_inputs_as_float = True

    @staticmethod
    def forward(ctx: Context, x: Any) -> Any:
        ctx.save_for_backward(x)
        return get_array_module(x).log(x)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        # exercise: log_backward begin
        (x,) = ctx.saved_arrays
        return g / x
        # exercise: end


class Sqrt(Function):
    """y = sqrt(x).  VJP: dL/dx = g / (2 y) (saved output)."""

    int_inputs_as_float = True

    @staticmethod
    def forward(ctx: Context, x: Any) -> Any:
        y = get_array_module(x).sqrt(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (y,) = ctx.saved_arrays
        return g / (y + y)


class Abs(Function):
    """y = |x|.  VJP: dL/dx = g * sign(x), with sign(0) = 0 (the subgradient torch uses)."""

    @staticmethod
    def forward(ctx: Context, x: Any) -> Any:
        ctx.save_for_backward(x)
        return get_array_module(x).abs(x)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (x,) = ctx.saved_arrays
        return g * get_array_module(x).sign(x)


class Maximum(Function):
    """z = maximum(a, b) elementwise.  VJP: g goes to the larger input; at a tie each input
    gets g / 2 (the symmetric subgradient, as in torch)."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        broadcast_shape("maximum", a.shape, b.shape)
        ctx.save_for_backward(a, b)
        return get_array_module(a, b).maximum(a, b)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        a, b = ctx.saved_arrays
        return _select_grads(g, a > b, a == b)


class Minimum(Function):
    """z = minimum(a, b) elementwise.  VJP: g goes to the smaller input; ties split g / 2."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        broadcast_shape("minimum", a.shape, b.shape)
        ctx.save_for_backward(a, b)
        return get_array_module(a, b).minimum(a, b)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        a, b = ctx.saved_arrays
        return _select_grads(g, a < b, a == b)


def _select_grads(g: Any, a_wins: Any, tie: Any) -> tuple:
    xp = get_array_module(g)
    half = g * g.dtype.type(0.5)
    zero = xp.zeros((), dtype=g.dtype)
    da = xp.where(a_wins, g, xp.where(tie, half, zero))
    db = xp.where(a_wins, zero, xp.where(tie, half, g))
    return da, db


def clip_bounds(op: str, x: Any, lo: Any, hi: Any) -> tuple:
    """(dtype, lo, hi) for clipping ``x``: the dtype of the result and the bounds as NumPy
    scalars of that dtype (None stays None), with torch's dtype rule for scalars.

    A float tensor keeps its dtype. An integer or boolean tensor with a float bound computes
    in the default float dtype (casting 0.5 to the tensor's integers would truncate it: [0, 1, 2, 3]
    clipped to [0.5, 2.5] is float32 [0.5, 1, 2, 2.5]), a boolean tensor with integer bounds
    in int64, an integer tensor with integer bounds in its own dtype. Raises ValueError when
    both bounds are None or an integer bound lies outside the result's integer range, and
    TypeError for a bound that is not a number."""
    if lo is None and hi is None:
        raise ValueError(f"{op}: at least one of min and max must be given")
    kinds = []
    for name, bound in (("min", lo), ("max", hi)):
        if bound is None:
            continue
        is_scalar = isinstance(bound, (bool, int, float, np.generic)) or (
            isinstance(bound, np.ndarray) and bound.ndim == 0)
        kind = np.result_type(bound).kind if is_scalar else ""
        if kind not in ("b", "i", "u", "f"):
            raise TypeError(
                f"{op}: {name} must be a real number or None, got {bound!r} "
                f"({type(bound).__name__}); for elementwise bounds use maximum/minimum"
            )
        kinds.append(kind)
    dtype = x.dtype
    if dtype.kind != "f" and "f" in kinds:
        dtype = get_default_dtype()
    elif dtype.kind == "b" and any(k in "iu" for k in kinds):
        dtype = np.dtype(np.int64)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        for name, bound in (("min", lo), ("max", hi)):
            if bound is not None and not info.min <= int(bound) <= info.max:
                raise ValueError(
                    f"{op}: {name}={bound} is outside the range [{info.min}, {info.max}] of "
                    f"the tensor's dtype {dtype} (shape {tuple(x.shape)})"
                )
    return (dtype, None if lo is None else dtype.type(lo),
            None if hi is None else dtype.type(hi))


class Clip(Function):
    """y = clip(x, lo, hi) with constant scalar bounds (either may be None).  VJP: g where
    lo <= x <= hi (bounds inclusive, as torch.clamp), 0 outside.

    The result's dtype follows torch (see :func:`clip_bounds`): an integer tensor with a
    float bound is clipped in float32, never with truncated bounds."""

    @staticmethod
    def forward(ctx: Context, x: Any, lo: Any, hi: Any) -> Any:
        dtype, lo, hi = clip_bounds("clip", x, lo, hi)
        if dtype != x.dtype:  # integer data: no gradient flows, the cast needs no node
            x = x.astype(dtype)
        xp = get_array_module(x)
        keep = xp.ones(x.shape, dtype=bool)
        y = x
        if lo is not None:
            keep &= x >= lo
            y = xp.maximum(y, lo)
        if hi is not None:
            keep &= x <= hi
            y = xp.minimum(y, hi)
        ctx.save_for_backward(keep)
        return y  # a new array: at least one bound was applied

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (keep,) = ctx.saved_arrays
        return g * keep.astype(g.dtype)
