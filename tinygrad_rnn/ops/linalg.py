"""Matrix multiplication: 1-D, 2-D and batched with broadcasting (NumPy's matmul rules)."""
from __future__ import annotations

import math
from typing import Any

from .base import Context, Function, sum_to_shape
from .elementwise import broadcast_shape


def _swap(a: Any) -> Any:
    return a.swapaxes(-1, -2)


def _rows(a: Any) -> Any:
    """A stack (..., n, k) as its rows (rows, k); an explicit count, as k may be 0."""
    return a.reshape(math.prod(a.shape[:-1]), a.shape[-1])


class MatMul(Function):
    """C = A @ B.

    Math: for 2-D A (n, k) and B (k, m), dL/dA = G B^T and dL/dB = A^T G. Batched operands
    use the same formula on their last two axes; batch axes broadcast, and their gradients are
    summed back over the broadcast axes. A 1-D left operand is treated as a row (1, k) and a
    1-D right operand as a column (k, 1), the added axis removed from the result (NumPy rules).

    A stack A (..., n, k) times a matrix B (k, m), the linear layer on a (T, N, k) input, is
    computed on the stacked rows, A as (rows, k): one GEMM forward, one for dL/dA and one for
    dL/dB = sum over the stack of A_i^T G_i (BC5), instead of one small product per stack entry
    and, for dL/dB, a (stack, k, m) array of products summed afterwards.
    """

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError(
                f"matmul: both operands need at least 1 dimension, got shapes {a.shape} and "
                f"{b.shape} (use * for scalars)"
            )
        ka = a.shape[-1]
        kb = b.shape[-2] if b.ndim >= 2 else b.shape[0]
        if ka != kb:
            dim_b = b.ndim - 2 if b.ndim >= 2 else 0
            raise ValueError(
                f"matmul: shapes {a.shape} and {b.shape} are not aligned: {ka} (dim "
                f"{a.ndim - 1} of the first) != {kb} (dim {dim_b} of the second)"
            )
        if a.ndim > 2 or b.ndim > 2:
            try:
                broadcast_shape("matmul", a.shape[:-2], b.shape[:-2])
            except ValueError as err:
                # name both full shapes, not only their batch parts
                raise ValueError(
                    f"matmul: shapes {a.shape} and {b.shape} have batch dimensions "
                    f"{a.shape[:-2]} and {b.shape[:-2]} that cannot be broadcast together "
                    f"({err})"
                ) from None
        ctx.save_for_backward(a, b)
        if a.ndim > 2 and b.ndim == 2:
            return (_rows(a) @ b).reshape(*a.shape[:-1], b.shape[1])  # (BC1) on the rows
        return a @ b  # (BC1)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        # exercise: matmul_backward begin
        a, b = ctx.saved_arrays
        a2 = a[None, :] if a.ndim == 1 else a  # (.., n, k)  (BC4): a vector is a row
        b2 = b[:, None] if b.ndim == 1 else b  # (.., k, m)  (BC4): or a column
        g2 = g
        # restore the column axis first: for vector @ vector g is 0-d, and g[..., None, :]
        # needs the axis that g[..., None] adds
        if b.ndim == 1:
            g2 = g2[..., None]
        if a.ndim == 1:
            g2 = g2[..., None, :]
        da = db = None
        if a.ndim > 2 and b.ndim == 2:
            g_rows = _rows(g)                                          # (rows, m)
            if ctx.needs_input_grad[0]:
                da = (g_rows @ b.T).reshape(a.shape)                   # (BC2) G B^T
            if ctx.needs_input_grad[1]:
                db = _rows(a).T @ g_rows                               # (BC5)
            return da, db
        if ctx.needs_input_grad[0]:
            da = sum_to_shape(g2 @ _swap(b2), a2.shape).reshape(a.shape)  # (BC2) G B^T
        if ctx.needs_input_grad[1]:
            # (BC3) A^T G; a weight shared by a batch sums over it (BC5)
            db = sum_to_shape(_swap(a2) @ g2, b2.shape).reshape(b.shape)
        return da, db
        # exercise: end
