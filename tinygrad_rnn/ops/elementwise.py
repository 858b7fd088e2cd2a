"""Elementwise arithmetic primitives with broadcasting.

Each backward returns the gradient in the broadcast (output) shape; the engine reduces it to
the input's shape with the one central ``sum_to_shape``.
"""
from __future__ import annotations

from typing import Any

from ..backend import get_array_module
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
        broadcast_shape("add", a.shape, b.shape)
        return a + b

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        return g, g


class Sub(Function):
    """z = a - b.  VJP: dL/da = g, dL/db = -g."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        broadcast_shape("sub", a.shape, b.shape)
        return a - b

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        return g, -g


class Mul(Function):
    """z = a * b.  VJP: dL/da = g * b, dL/db = g * a."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        broadcast_shape("mul", a.shape, b.shape)
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        a, b = ctx.saved_arrays
        da = g * b if ctx.needs_input_grad[0] else None
        db = g * a if ctx.needs_input_grad[1] else None
        return da, db


class Div(Function):
    """z = a / b.  VJP: dL/da = g / b, dL/db = -g * a / b^2 = -g * z / b."""

    float_math = True

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        broadcast_shape("div", a.shape, b.shape)
        ctx.save_for_backward(a, b)
        return a / b

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        a, b = ctx.saved_arrays
        da = g / b if ctx.needs_input_grad[0] else None
        db = -g * a / (b * b) if ctx.needs_input_grad[1] else None
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

    float_math = True

    @staticmethod
    def forward(ctx: Context, x: Any) -> Any:
        y = get_array_module(x).exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (y,) = ctx.saved_arrays
        return g * y


class Log(Function):
    """y = log(x).  VJP: dL/dx = g / x."""

    float_math = True

    @staticmethod
    def forward(ctx: Context, x: Any) -> Any:
        ctx.save_for_backward(x)
        return get_array_module(x).log(x)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (x,) = ctx.saved_arrays
        return g / x


class Sqrt(Function):
    """y = sqrt(x).  VJP: dL/dx = g / (2 y) (saved output)."""

    float_math = True

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


class Clip(Function):
    """y = clip(x, lo, hi) with constant bounds (either may be None).  VJP: g where
    lo <= x <= hi (bounds inclusive, as torch.clamp), 0 outside."""

    @staticmethod
    def forward(ctx: Context, x: Any, lo: float | None, hi: float | None) -> Any:
        if lo is None and hi is None:
            raise ValueError("clip: at least one of min and max must be given")
        xp = get_array_module(x)
        keep = xp.ones(x.shape, dtype=bool)
        y = x
        if lo is not None:
            lo_a = xp.asarray(lo, dtype=x.dtype)
            keep &= x >= lo_a
            y = xp.maximum(y, lo_a)
        if hi is not None:
            hi_a = xp.asarray(hi, dtype=x.dtype)
            keep &= x <= hi_a
            y = xp.minimum(y, hi_a)
        ctx.save_for_backward(keep)
        return y if y is not x else x.copy()

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (keep,) = ctx.saved_arrays
        return g * keep.astype(g.dtype)
