"""One-dimensional convolution as one primitive with a hand-written backward
(docs/sequence_models.md, section "Convolution as a matrix product").

For an input x (N, C, L) (C input channels along a sequence of L steps), a weight W
(O, C, K) (O output channels, kernel of K taps) and a bias b (O,), with stride s, dilation d
and P_l, P_r zeros added on the left and the right of the sequence (x_pad, length
L_p = P_l + L + P_r), the output has L_out = floor((L_p - d (K - 1) - 1) / s) + 1 steps and

    y[n, o, l] = b[o] + sum_{c, k} W[o, c, k] x_pad[n, c, l s + k d]              (CV1)

(a cross-correlation, as in torch: the kernel is not flipped). Gathering, for every output
step, the C K input values it reads into one row gives the unfolded matrix U ("im2col"):

    U[(n, l), (c, k)] = x_pad[n, c, l s + k d]        (N L_out, C K)              (CV2)
    Y = U W_2^T + b,   W_2 = W reshaped to (O, C K)   (N L_out, O)                (CV3)

so the forward pass is one GEMM. Its backward pass is that of a matrix product, with
G = dL/dY (N L_out, O):

    dL/dW_2 = G^T U            (O, C K): a sum over every window (n, l)          (CV4)
    dL/db   = sum over (n, l) of G                                                (CV5)
    dL/dU   = G W_2            (N L_out, C K)                                     (CV6)

and dL/dx_pad is dL/dU folded back onto the positions the windows read ("col2im"): entry
(n, l, c, k) of dL/dU adds into x_pad[n, c, l s + k d]. For one tap k the positions l s + k d
are distinct for different l, so the fold is one strided slice addition per tap (K in all):

    dL/dx_pad[n, c, k d + l s] += dL/dU[n, l, c, k]    for k = 0 .. K - 1         (CV7)

and dL/dx is dL/dx_pad without its P_l + P_r padded positions (they are constants).

The unfolding (CV2) and the fold (CV7) are mirror images: each is K strided slices of x_pad,
one per kernel tap, and no Python loop runs over elements.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..backend import get_array_module
from .base import Context, Function


# ------------------------------------------------------------------------------ checks
def conv1d_output_length(length: int, kernel_size: int, stride: int, left: int, right: int,
                         dilation: int) -> int:
    """L_out of (CV1): the number of windows of span d (K - 1) + 1 that fit, every s steps,
    in the padded length; may be <= 0 when none fits (the caller reports it)."""
    span = dilation * (kernel_size - 1) + 1
    return (left + length + right - span) // stride + 1


def check_conv1d_args(x: Any, w: Any, bias: Any, stride: Any, padding: Any,
                      dilation: Any) -> int:
    """L_out after checking the arrays and the integers of :class:`Conv1d`; errors name the
    op, the argument and the shapes."""
    for name, value, minimum in (("stride", stride, 1), ("dilation", dilation, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
                or value < minimum:
            raise ValueError(f"conv1d: {name} must be an integer >= {minimum}, got {value!r}")
    if (not isinstance(padding, tuple) or len(padding) != 2
            or any(isinstance(p, bool) or not isinstance(p, (int, np.integer)) or p < 0
                   for p in padding)):
        raise ValueError(f"conv1d: padding must be a pair (left, right) of integers >= 0, "
                         f"got {padding!r}")
    if x.ndim != 3:
        raise ValueError(f"conv1d: expected input of shape (N, C_in, L), got {x.shape}")
    if w.ndim != 3:
        raise ValueError(f"conv1d: expected weight of shape (C_out, C_in, kernel_size), got "
                         f"{w.shape}")
    if x.shape[1] != w.shape[1]:
        raise ValueError(f"conv1d: input of shape {x.shape} has {x.shape[1]} channels but the "
                         f"weight of shape {w.shape} expects C_in = {w.shape[1]}")
    if w.shape[2] < 1:
        raise ValueError(f"conv1d: the weight of shape {w.shape} has kernel_size 0")
    if x.dtype != w.dtype or (bias is not None and bias.dtype != w.dtype):
        dts = f"input {x.dtype}, weight {w.dtype}" + ("" if bias is None
                                                      else f", bias {bias.dtype}")
        raise TypeError(f"conv1d: input, weight and bias must have one dtype, got {dts}; "
                        f"convert the input with .to(weight.dtype)")
    if bias is not None and bias.shape != (w.shape[0],):
        raise ValueError(f"conv1d: bias has shape {bias.shape}, expected ({w.shape[0]},) "
                         f"for a weight of shape {w.shape}")
    out_len = conv1d_output_length(x.shape[2], w.shape[2], int(stride), int(padding[0]),
                                   int(padding[1]), int(dilation))
    if out_len < 1:
        span = int(dilation) * (w.shape[2] - 1) + 1
        raise ValueError(
            f"conv1d: the padded input has {x.shape[2] + padding[0] + padding[1]} steps "
            f"(L = {x.shape[2]} plus padding {tuple(int(p) for p in padding)}), fewer than "
            f"the kernel's span dilation * (kernel_size - 1) + 1 = {span}: no output step")
    return out_len


def unfold(x_pad: Any, kernel_size: int, stride: int, dilation: int, out_len: int) -> Any:
    """U of (CV2) as an array (N, L_out, C, K): entry [n, l, c, k] is x_pad[n, c, l s + k d].

    Filled one kernel tap at a time: for tap k the values x_pad[n, c, k d + l s] for all l
    are the strided slice ``x_pad[:, :, k d : k d + (L_out - 1) s + 1 : s]``, so this is K
    slice copies (the mirror image of the fold (CV7)), with no loop over elements; slicing
    is the one strided view every array module has (a GPU's too)."""
    xp = get_array_module(x_pad)
    n, c, _ = x_pad.shape
    u = xp.empty((n, out_len, c, kernel_size), dtype=x_pad.dtype)
    last = (out_len - 1) * stride + 1
    for tap in range(kernel_size):
        start = tap * dilation
        u[:, :, :, tap] = x_pad[:, :, start:start + last:stride].transpose(0, 2, 1)
    return u


# ------------------------------------------------------------------------------ the op
class Conv1d(Function):
    """y = conv1d(x, W) + b over the last axis of x (torch's ``conv1d``, groups = 1).

    Math
    ----
    Forward: (CV1), computed as the GEMM (CV3) over the unfolded windows (CV2).
    VJP, with G = dL/dY in the (N L_out, O) layout of (CV3):

    * dL/dW = G^T U, summed over every window (CV4); dL/db = sum of G (CV5);
    * dL/dx: dL/dU = G W_2 (CV6) folded back onto the input, one slice addition per
      kernel tap (CV7), the padded positions dropped.

    Shapes
    ------
    x (N, C_in, L), weight (C_out, C_in, K), bias (C_out,) (given only when ``has_bias``),
    y (N, C_out, L_out). ``padding`` is a pair (left, right) of zero counts.

    Notes
    -----
    Input, weight and bias share one float dtype (no silent upcast). Higher-order
    gradients are out of scope (backward runs on raw arrays).
    """

    @staticmethod
    def forward(ctx: Context, x: Any, w: Any, *bias: Any, stride: int = 1,
                padding: tuple = (0, 0), dilation: int = 1, has_bias: bool = False) -> Any:
        b = bias[0] if has_bias else None
        if len(bias) != int(has_bias):
            raise TypeError(f"conv1d: got {len(bias)} bias arrays but has_bias={has_bias}")
        out_len = check_conv1d_args(x, w, b, stride, padding, dilation)
        xp = get_array_module(x)
        n, c, length = x.shape
        o, _, k = w.shape
        left, right = int(padding[0]), int(padding[1])
        if left or right:
            x_pad = xp.zeros((n, c, left + length + right), dtype=x.dtype)
            x_pad[:, :, left:left + length] = x
        else:
            x_pad = x
        u = unfold(x_pad, k, stride, dilation, out_len).reshape(n * out_len, c * k)  # (CV2)
        w2 = w.reshape(o, c * k)
        y = u @ w2.T                                                # (CV1) as the GEMM (CV3)
        if b is not None:
            y += b
        ctx.save_for_backward(u, w)
        ctx.geometry = (n, c, length, left, right, stride, dilation, out_len)
        ctx.has_bias = has_bias
        return y.reshape(n, out_len, o).transpose(0, 2, 1)                      # (N, O, Lo)

    @staticmethod
    def backward(ctx: Context, grad_out: Any) -> tuple:
        u, w = ctx.saved_arrays
        n, c, length, left, right, stride, dilation, out_len = ctx.geometry
        o, _, k = w.shape
        xp = get_array_module(u)
        g = grad_out.transpose(0, 2, 1).reshape(n * out_len, o)                 # G (N Lo, O)
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            du = (g @ w.reshape(o, c * k)).reshape(n, out_len, c, k)            # (CV6)
            dx_pad = xp.zeros((n, c, left + length + right), dtype=u.dtype)
            last = (out_len - 1) * stride + 1
            for tap in range(k):                                                # (CV7)
                start = tap * dilation
                dx_pad[:, :, start:start + last:stride] += du[:, :, :, tap].transpose(0, 2, 1)
            dx = dx_pad[:, :, left:left + length]
        if ctx.needs_input_grad[1]:
            dw = (g.T @ u).reshape(o, c, k)                                     # (CV4)
        grads = [dx, dw]
        if ctx.has_bias:
            grads.append(g.sum(axis=0) if ctx.needs_input_grad[2] else None)    # (CV5)
        return tuple(grads)
