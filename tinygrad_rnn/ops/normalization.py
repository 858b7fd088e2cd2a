"""Layer normalization as one primitive with a hand-written backward (docs/layernorm.md).

The op normalizes each row of ``x`` over its last ``normalized_ndim`` axes (M entries per
row, all the leading axes are rows) and then applies an optional elementwise affine map:

    mu = mean(x)                           (LN1)
    var = mean((x - mu)^2)  (biased)       (LN2)
    sigma = sqrt(var + eps)                (LN3)
    x_hat = (x - mu) / sigma               (LN4)
    y = x_hat * weight + bias              (LN5)

Its explicit Jacobian is built by :func:`tinygrad_rnn.explicit_jacobians.layer_norm`, and the tests
check ``backward(g) == J^T g``.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..backend import get_array_module
from .base import Context, Function


# ------------------------------------------------------------------------------ checks
def check_layer_norm_args(x: Any, params: tuple, normalized_ndim: Any, eps: Any,
                          has_weight: bool, has_bias: bool) -> tuple:
    """The row axes and the count M of normalized entries per row, after checking the
    arguments of :class:`LayerNorm`; errors name the op and the argument."""
    if isinstance(normalized_ndim, bool) or not isinstance(normalized_ndim, int):
        raise TypeError(f"layer_norm: normalized_ndim must be an int, got "
                        f"{normalized_ndim!r}")
    if not 1 <= normalized_ndim <= x.ndim:
        raise ValueError(f"layer_norm: cannot normalize over the last {normalized_ndim} "
                         f"axes of an input of shape {x.shape}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps >= 0:
        raise ValueError(f"layer_norm: eps must be a number >= 0, got {eps!r}")
    if len(params) != int(has_weight) + int(has_bias):
        raise TypeError(f"layer_norm: got {len(params)} parameter arrays but has_weight="
                        f"{has_weight} and has_bias={has_bias}")
    normalized_shape = x.shape[x.ndim - normalized_ndim:]
    for name, p in zip([n for n, f in (("weight", has_weight), ("bias", has_bias)) if f],
                       params):
        if p.shape != normalized_shape:
            raise ValueError(f"layer_norm: {name} has shape {p.shape}, expected the "
                             f"normalized shape {normalized_shape} of an input of shape "
                             f"{x.shape}")
    axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
    return axes, math.prod(normalized_shape)


# ------------------------------------------------------------------------------ the op
class LayerNorm(Function):
    """y = (x - mu) / sqrt(var + eps) * weight + bias over the last ``normalized_ndim`` axes
    (torch's ``layer_norm``: biased variance, eps inside the square root).

    Math
    ----
    Forward: (LN1)-(LN5) of the module docstring, per row of M entries.

    Jacobian of x_hat with respect to one row x (docs/layernorm.md, (LN7)):
    J = (I - 1 1^T / M - x_hat x_hat^T / M) / sigma, symmetric; dy/dx = diag(weight) J.

    VJP, with g = dL/dy and g_hat = g * weight (LN8)-(LN10):

    * dL/dx = (g_hat - mean(g_hat) - x_hat * mean(g_hat * x_hat)) / sigma
    * dL/dweight = sum over rows of g * x_hat
    * dL/dbias = sum over rows of g

    Shapes
    ------
    x (*, S1, ..., Sk) with k = ``normalized_ndim``; weight and bias (S1, ..., Sk), each
    given only when ``has_weight`` / ``has_bias``, in that order after x; y like x.

    Notes
    -----
    float16 input is normalized in float32 and rounded once at the end (as torch does).
    Higher-order gradients are out of scope (backward runs on raw arrays).
    """

    int_inputs_as_float = True

    @staticmethod
    def forward(ctx: Context, x: Any, *params: Any, normalized_ndim: int, eps: float,
                has_weight: bool = False, has_bias: bool = False) -> Any:
        axes, count = check_layer_norm_args(x, params, normalized_ndim, eps, has_weight,
                                            has_bias)
        xp = get_array_module(x)
        out_dtype = x.dtype
        xc = x if x.dtype.itemsize >= 4 else x.astype(np.float32)
        mu = xp.mean(xc, axis=axes, keepdims=True)                      # (LN1)
        centered = xc - mu
        var = xp.mean(centered * centered, axis=axes, keepdims=True)    # (LN2)
        inv_sigma = 1 / xp.sqrt(var + xc.dtype.type(eps))               # 1 / (LN3)
        x_hat = centered * inv_sigma                                    # (LN4)
        weight = params[0] if has_weight else None
        bias = params[-1] if has_bias else None
        y = x_hat
        if weight is not None:
            y = y * weight                                              # (LN5)
        if bias is not None:
            y = y + bias
        ctx.save_for_backward(x_hat, inv_sigma, weight)
        ctx.axes, ctx.count = axes, count
        ctx.has_weight, ctx.has_bias = has_weight, has_bias
        return y.astype(out_dtype, copy=False)

    @staticmethod
    def backward(ctx: Context, grad_out: Any) -> tuple:
        x_hat, inv_sigma, weight = ctx.saved_arrays
        axes = ctx.axes
        rows = tuple(range(grad_out.ndim - len(axes)))  # the leading (row) axes
        g = grad_out if grad_out.dtype == x_hat.dtype else grad_out.astype(x_hat.dtype)
        grads = []
        if ctx.needs_input_grad[0]:
            g_hat = g * weight if weight is not None else g                    # (LN8)
            mean_g = g_hat.mean(axis=axes, keepdims=True)
            mean_gx = (g_hat * x_hat).mean(axis=axes, keepdims=True)
            dx = (g_hat - mean_g - x_hat * mean_gx) * inv_sigma                # (LN9)
            grads.append(dx.astype(grad_out.dtype, copy=False))
        else:
            grads.append(None)
        k = 1
        if ctx.has_weight:
            dweight = (g * x_hat).sum(axis=rows) if ctx.needs_input_grad[k] else None
            grads.append(None if dweight is None                               # (LN10)
                         else dweight.astype(grad_out.dtype, copy=False))
            k += 1
        if ctx.has_bias:
            dbias = g.sum(axis=rows) if ctx.needs_input_grad[k] else None      # (LN10)
            grads.append(None if dbias is None else dbias.astype(grad_out.dtype, copy=False))
        return tuple(grads)
