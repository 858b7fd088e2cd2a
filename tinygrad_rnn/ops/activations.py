"""Activation primitives with hand-written, visible derivatives.

The explicit Jacobian matrices of these ops are built by :mod:`tinygrad_rnn.explicit_jacobians`, and
the tests check ``backward(g) == J^T g`` for each.
"""
from __future__ import annotations

from typing import Any

from ..backend import get_array_module
from .base import Context, Function


class ReLU(Function):
    """y = max(x, 0).  Jacobian diag(1[x > 0]); VJP: dL/dx = g * 1[x > 0] (0 at x = 0)."""

    @staticmethod
    def forward(ctx: Context, x: Any) -> Any:
        xp = get_array_module(x)
        y = xp.maximum(x, xp.zeros((), dtype=x.dtype))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        # exercise: relu_backward begin
        (y,) = ctx.saved_arrays
        return g * (y > 0).astype(g.dtype)  # (AC7): (AC2) with relu' = 1[y > 0]
        # exercise: end


class Tanh(Function):
    """y = tanh(x).  Jacobian diag(1 - y^2); VJP: dL/dx = g * (1 - y^2) (saved output)."""

    int_inputs_as_float = True

    @staticmethod
    def forward(ctx: Context, x: Any) -> Any:
        y = get_array_module(x).tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        # exercise: tanh_backward begin
        (y,) = ctx.saved_arrays
        return g * (1 - y * y)  # (AC3): (AC2) with tanh' = 1 - y^2
        # exercise: end


def stable_sigmoid(x: Any) -> Any:
    """sigma(x) = 1 / (1 + exp(-x)) without overflow, branch-free.

    With e = exp(-|x|) (always in (0, 1], so it never overflows):
    sigma(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0. Both are accurate to a few
    ulps, including the far tails (sigma(-40) keeps its 4.2e-18, it does not round to 0).
    """
    xp = get_array_module(x)
    e = xp.exp(-xp.abs(x))
    inv = 1 / (1 + e)
    return xp.where(x >= 0, inv, e * inv)  # (AC5)


# The sigmoid family: stable_sigmoid above (the exp form, for the Sigmoid op and the autograd
# path) and the tanh-identity form below (for the hand-written BPTT kernels, in place).
def tanh_sigmoid(a: Any, xp: Any = None) -> Any:
    """sigma(a) = 0.5 * tanh(0.5 * a) + 0.5 as a new array, stable for any ``a``.  (S1)

    The tanh identity of docs/recurrent.md section 7, used by every BPTT kernel: branch-free,
    never overflows (``tanh`` saturates at +-1), works in place, and costs one ``tanh`` plus
    two cheap passes. Its error is *absolute*: at most about one ulp of 1 (1.1e-16 in float64,
    6e-8 in float32). Relative accuracy is lost only where sigma(a) itself drops below machine
    epsilon (a < -37 in float64), where a gate value of 0 instead of 1e-17 changes nothing
    downstream; :func:`stable_sigmoid` keeps those tails. ``xp`` is the array module of ``a``
    (looked up when None).
    """
    xp = get_array_module(a) if xp is None else xp
    out = xp.multiply(a, 0.5)
    xp.tanh(out, out=out)
    out *= 0.5
    out += 0.5  # (S1): (AC6) read backwards, sigma(a) = (tanh(a / 2) + 1) / 2
    return out


def tanh_half_to_sigmoid_(t: Any) -> Any:
    """In place: turn t = tanh(0.5 * a) into sigma(a) = 0.5 * t + 0.5.  (S2)

    The fused sequence kernels pre-scale the sigmoid rows of the weights and biases by 0.5
    (exact in binary floating point), so one in-place ``tanh`` covers the sigmoid gates and the
    ``tanh`` gate together and only this step remains for the sigmoid block.
    """
    t *= 0.5
    t += 0.5  # (S1) on rows pre-scaled by 0.5 (S2)
    return t


class Sigmoid(Function):
    """y = sigma(x).  Jacobian diag(y (1 - y)); VJP: dL/dx = g * y * (1 - y) (saved output).
    Forward uses :func:`stable_sigmoid`."""

    int_inputs_as_float = True

    @staticmethod
    def forward(ctx: Context, x: Any) -> Any:
        y = stable_sigmoid(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        # exercise: sigmoid_backward begin
        (y,) = ctx.saved_arrays
        return g * y * (1 - y)  # (AC4): (AC2) with sigma' = y (1 - y)
        # exercise: end


def _mask_dtype_error(op: str, mask: Any, x_shape: tuple) -> TypeError:
    """The TypeError for a softmax mask that is not boolean, with a hint fitted to its dtype.

    The mask is never converted, because the two common non-boolean masks mean opposite
    things: a 0/1 integer mask is a *keep* mask (1 = takes part), so ``mask.astype(bool)``
    is what it means, while an additive float mask (0 = takes part, -inf = masked) cast to
    bool would keep exactly the entries it drops and needs ``additive == 0``. A hint for one
    applied to the other would invert the mask silently, so each dtype gets its own hint.
    """
    head = (f"{op}: mask must be boolean (True = takes part), got dtype {mask.dtype} "
            f"(mask shape {mask.shape}, input shape {x_shape})")
    kind = mask.dtype.kind
    if kind in "iu":
        hint = ("for a 0/1 integer keep mask (nonzero = takes part) pass mask.astype(bool) "
                "or (mask != 0)")
    elif kind == "f":
        hint = ("for an additive float mask of 0 (takes part) and -inf (masked) pass "
                "(additive == 0); for a 0/1 float keep mask (1 = takes part) pass (mask != 0)")
    else:
        hint = "pass a boolean array, True where the entry takes part"
    return TypeError(f"{head}; {hint}")


def _row_axis(x: Any, axis: int, op: str) -> int | None:
    """``axis`` checked against x's shape; None for a 0-d x, which accepts axis 0 / -1 (a
    one-element row) like torch and tr.sum: NumPy reduces a 0-d array over axis -1, CuPy
    refuses to, and reducing over None is the same one element on both."""
    if x.ndim == 0 and axis in (0, -1):
        return None
    if not -x.ndim <= axis < x.ndim:
        raise IndexError(f"{op}: axis {axis} is out of range for a tensor of shape {x.shape}")
    return axis


def _masked_shift(x: Any, axis: int | None, mask: Any, op: str = "softmax") -> tuple:
    """Return (x - m, valid) where m is the max of the valid entries along ``axis``.

    Masked entries of the shifted array are set to 0 (not -inf and never the input's value,
    which may be inf or NaN), so nothing downstream overflows; ``valid`` is the boolean mask
    broadcast to x's shape (None when no mask was given). A fully masked row gets m = 0.
    A mask that is not boolean is a TypeError (never cast: an additive 0 / -inf mask cast to
    bool would keep exactly the entries it drops); its hint depends on the mask's dtype, see
    :func:`_mask_dtype_error`.
    """
    xp = get_array_module(x)
    if mask is None:
        m = xp.max(x, axis=axis, keepdims=True) if x.size else x.sum(axis, keepdims=True)
        return x - m, None
    mask = xp.asarray(mask)
    if mask.dtype != bool:
        raise _mask_dtype_error(op, mask, x.shape)
    try:
        valid = xp.broadcast_to(mask, x.shape)
    except ValueError:
        raise ValueError(
            f"{op}: mask of shape {mask.shape} does not broadcast to the input shape {x.shape}"
        ) from None
    neg_inf = xp.asarray(-xp.inf, dtype=x.dtype)
    if x.size:
        m = xp.max(xp.where(valid, x, neg_inf), axis=axis, keepdims=True)
        m = xp.where(xp.isfinite(m), m, xp.zeros((), dtype=x.dtype))
    else:
        m = x.sum(axis, keepdims=True)
    shifted = xp.where(valid, x - m, xp.zeros((), dtype=x.dtype))
    return shifted, valid


class Softmax(Function):
    """y = softmax(x) along ``axis``, y_i = exp(x_i - m) / sum_j exp(x_j - m), m = max_j x_j.

    Jacobian (per row): J = diag(y) - y y^T (symmetric, rows sum to 0).
    VJP: dL/dx = J^T g = y * (g - sum_j g_j y_j).

    ``mask`` (boolean, broadcastable to x; True = takes part): masked entries get probability
    exactly 0 and gradient exactly 0, whatever their value (inf and NaN included); a fully
    masked row gives all zeros and zero gradient, never NaN.
    """

    int_inputs_as_float = True

    @staticmethod
    def forward(ctx: Context, x: Any, axis: int = -1, mask: Any = None) -> Any:
        xp = get_array_module(x)
        axis = _row_axis(x, axis, "softmax")  # type: ignore[assignment]  # None if 0-d
        shifted, valid = _masked_shift(x, axis, mask)  # x - m: (SM3), harmless by (SM2)
        e = xp.exp(shifted)
        if valid is not None:
            e = xp.where(valid, e, xp.zeros((), dtype=x.dtype))
        s = xp.sum(e, axis=axis, keepdims=True)
        if valid is not None:
            s = xp.where(s > 0, s, xp.ones((), dtype=x.dtype))
        # e is this op's own array: divided in place (0-d: NumPy's scalars cannot be)
        y = xp.divide(e, s, out=e) if e.ndim else e / s  # (SM1), (SM3)
        ctx.save_for_backward(y)
        ctx.axis = axis
        return y

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        # exercise: softmax_backward begin
        (y,) = ctx.saved_arrays
        gy = g * y
        return gy - y * gy.sum(axis=ctx.axis, keepdims=True)  # (SM5), (A9)
        # exercise: end


class LogSoftmax(Function):
    """y = log_softmax(x) = x - m - log sum_j exp(x_j - m) along ``axis`` (log-sum-exp form).

    Jacobian (per row): J = I - 1 p^T with p = exp(y) = softmax(x).
    VJP: dL/dx = J^T g = g - p * sum_j g_j.

    ``mask`` (True = takes part): masked entries get -inf (log of probability 0) and
    gradient exactly 0; a fully masked row is all -inf with zero gradient, never NaN. The
    upstream gradient at masked (-inf) outputs is ignored: the op is the log-softmax of the
    valid entries alone, so g is taken as 0 there (torch's masked_fill(-inf) composition would
    instead pass -p * g from those outputs into the valid inputs).
    """

    int_inputs_as_float = True

    @staticmethod
    def forward(ctx: Context, x: Any, axis: int = -1, mask: Any = None) -> Any:
        xp = get_array_module(x)
        axis = _row_axis(x, axis, "log_softmax")  # type: ignore[assignment]  # None if 0-d
        shifted, valid = _masked_shift(x, axis, mask, "log_softmax")
        e = xp.exp(shifted)
        if valid is not None:
            e = xp.where(valid, e, xp.zeros((), dtype=x.dtype))
            s = xp.sum(e, axis=axis, keepdims=True)
            lse = xp.log(xp.where(s > 0, s, xp.ones((), dtype=x.dtype)))
            y = xp.where(valid, shifted - lse, xp.asarray(-xp.inf, dtype=x.dtype))
            p = e / xp.where(s > 0, s, xp.ones((), dtype=x.dtype))
        else:
            s = xp.sum(e, axis=axis, keepdims=True)
            # s >= 1 unless the axis is empty (s = 0, nothing to output): no log(0) warning
            lse = xp.log(xp.where(s > 0, s, xp.ones((), dtype=x.dtype)))
            if shifted.ndim:  # fresh arrays of this op: written in place, no new buffers
                y = xp.subtract(shifted, lse, out=shifted)                       # (SM6)
                p = xp.divide(e, s, out=e)
            else:  # (0-d: NumPy's results are scalars, which cannot be written into)
                y = shifted - lse                                                # (SM6)
                p = e / s
        ctx.save_for_backward(p)
        ctx.valid = valid
        ctx.axis = axis
        return y

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        # exercise: log_softmax_backward begin
        (p,) = ctx.saved_arrays
        xp = get_array_module(g)
        if ctx.valid is not None:
            g = xp.where(ctx.valid, g, xp.zeros((), dtype=g.dtype))
        return g - p * g.sum(axis=ctx.axis, keepdims=True)  # (SM8)
        # exercise: end
