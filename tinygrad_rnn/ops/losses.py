"""Fused losses with torch.nn.functional's signatures and hand-written backward passes.

Fusing log-softmax into cross entropy gives the famous gradient dL/dz = softmax(z) - y
(the "y_hat - y" form) without ever forming the softmax Jacobian, and the log-sum-exp form
keeps it finite for any logits.
"""
from __future__ import annotations

from typing import Any

from ..backend import get_array_module
from .activations import stable_sigmoid
from .base import Context, Function
from .reductions import divide_by_count
from .selection import check_token_ids

REDUCTIONS = ("none", "mean", "sum")


def _check_reduction(op: str, reduction: str) -> None:
    if reduction not in REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {REDUCTIONS}, got {reduction!r}")


def _class_last(op: str, x: Any, target: Any) -> tuple:
    """Move the class axis (1, or 0 for 1-D input) of ``x`` last and check target's shape:
    input (N, C, d1, ...) pairs with target (N, d1, ...); input (C,) with a 0-d target."""
    xp = get_array_module(x)
    if x.ndim == 0:
        raise ValueError(f"{op}: input must have a class dimension, got shape {x.shape}")
    expected = () if x.ndim == 1 else x.shape[:1] + x.shape[2:]
    if tuple(target.shape) != expected:
        raise ValueError(
            f"{op}: input of shape {x.shape} needs a target of shape {expected}, got "
            f"target of shape {target.shape}"
        )
    z = x if x.ndim == 1 else xp.moveaxis(x, 1, -1)  # (..., C)
    return z


def _class_first(x_shape: tuple, g_last: Any) -> Any:
    xp = get_array_module(g_last)
    return g_last if len(x_shape) == 1 else xp.moveaxis(g_last, -1, 1)


def _log_softmax_last(z: Any) -> tuple:
    """(log_softmax(z), softmax(z)) along the last axis, in the log-sum-exp form."""
    xp = get_array_module(z)
    m = xp.max(z, axis=-1, keepdims=True) if z.shape[-1] else xp.zeros_like(z[..., :1])
    shifted = z - m
    e = xp.exp(shifted)
    s = xp.sum(e, axis=-1, keepdims=True)
    return shifted - xp.log(s), e / s


def _check_weight(op: str, weight: Any, num_classes: int, x: Any) -> Any:
    if weight is None:
        return None
    xp = get_array_module(x)
    weight = xp.asarray(weight, dtype=x.dtype)
    if weight.shape != (num_classes,):
        raise ValueError(
            f"{op}: weight must have shape ({num_classes},) for input of shape {x.shape}, "
            f"got {weight.shape}"
        )
    return weight


class _HardTargets:
    """Class-id targets checked and prepared once, shared by cross_entropy and nll_loss:
    ``z`` the input with classes last (..., C), ``safe`` the ids with ignored entries set to
    0, ``valid`` the non-ignored mask, ``w`` the class weights (or None) and ``w_y`` each
    entry's weight (0 where ignored)."""

    def __init__(self, op: str, x: Any, target: Any, weight: Any, ignore_index: int) -> None:
        xp = get_array_module(x)
        target = xp.asarray(target)
        if target.dtype.kind not in "iu":
            raise TypeError(
                f"{op}: target must hold integer class ids, got dtype {target.dtype} (for "
                f"class probabilities pass a float target of the input's shape {x.shape} to "
                f"cross_entropy)"
            )
        self.z = _class_last(op, x, target)
        self.num_classes = self.z.shape[-1]
        check_token_ids(op, target, self.num_classes, what="number of classes",
                        ignore=ignore_index)
        self.w = _check_weight(op, weight, self.num_classes, x)
        self.valid = target != ignore_index
        self.safe = xp.where(self.valid, target, 0)
        w_y = self.w[self.safe] if self.w is not None else xp.ones(target.shape, dtype=x.dtype)
        self.w_y = xp.where(self.valid, w_y, xp.zeros((), dtype=x.dtype))


def _reduce_weighted(loss: Any, reduction: str, denom: Any, counted: bool) -> Any:
    """'none' / 'sum' / weighted 'mean': divided by ``denom`` (the sum of the counted rows'
    class weights) as torch does, whatever its sign; 0.0 only when no row is counted (every
    target ignored), where torch gives NaN. A weight sum of exactly 0 over counted rows gives
    what the division gives (NaN or inf), as in torch: nothing is corrected silently."""
    if reduction == "none":
        return loss
    total = loss.sum()
    if reduction == "sum":
        return total
    return total / denom if counted else get_array_module(loss).zeros((), dtype=loss.dtype)


def _counted(valid: Any, reduction: str) -> bool:
    """Whether any row counts in a 'mean' (a host bool: one read from a device)."""
    return bool(valid.any()) if reduction == "mean" else True


class CrossEntropy(Function):
    """Cross entropy between logits and class ids (torch.nn.functional.cross_entropy).

    Math, for one row with logits z (C classes), target class y, class weights w (all 1 when
    not given) and label smoothing eps:

        log p = log_softmax(z)
        loss = (1 - eps) * w_y * (-log p_y) + (eps / C) * sum_c w_c * (-log p_c)
        dloss/dz = [(1 - eps) w_y + (eps / C) sum_c w_c] * p - [(1 - eps) w_y e_y + (eps / C) w]

    With eps = 0 and no weights this is p - onehot(y): "y_hat - y". Rows whose target equals
    ``ignore_index`` contribute 0 and get exactly 0 gradient. 'mean' divides by the sum of
    w_y over the non-ignored rows (torch's definition, negative weights included; a weight sum
    of 0 over counted rows gives NaN or inf, as in torch); when every row is ignored the mean
    is 0.0 with zero gradient (torch returns NaN there).
    """

    float_math = True

    @staticmethod
    def forward(ctx: Context, x: Any, target: Any, weight: Any = None,
                ignore_index: int = -100, reduction: str = "mean",
                label_smoothing: float = 0.0) -> Any:
        xp = get_array_module(x)
        _check_reduction("cross_entropy", reduction)
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(
                f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}"
            )
        tg = _HardTargets("cross_entropy", x, target, weight, ignore_index)
        num_classes, w, valid, safe, w_y = tg.num_classes, tg.w, tg.valid, tg.safe, tg.w_y
        logp, p = _log_softmax_last(tg.z)
        nll = -xp.take_along_axis(logp, safe[..., None], axis=-1)[..., 0]
        eps = x.dtype.type(label_smoothing)
        loss = (1 - eps) * w_y * nll
        if label_smoothing > 0:
            wc = w if w is not None else xp.ones(num_classes, dtype=x.dtype)
            smooth = -(logp * wc).sum(axis=-1)
            loss = loss + (eps / x.dtype.type(num_classes)) * xp.where(valid, smooth, 0)
        else:
            wc = None
        denom = w_y.sum() if reduction == "mean" else None
        counted = _counted(valid, reduction)
        ctx.save_for_backward(p, safe, valid, w_y)
        ctx.meta = (x.shape, reduction, eps, wc, denom, counted, num_classes)
        return _reduce_weighted(loss, reduction, denom, counted)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        p, safe, valid, w_y = ctx.saved_arrays
        x_shape, reduction, eps, wc, denom, counted, num_classes = ctx.meta
        xp = get_array_module(p)
        one = p.dtype.type(1)
        coef = (one - eps) * w_y  # (...,)
        if wc is not None:
            coef = coef + (eps / p.dtype.type(num_classes)) * wc.sum() * valid
        dz = coef[..., None] * p
        xp.put_along_axis(
            dz, safe[..., None],
            xp.take_along_axis(dz, safe[..., None], axis=-1) - ((one - eps) * w_y)[..., None],
            axis=-1,
        )
        if wc is not None:
            dz -= (eps / p.dtype.type(num_classes)) * wc * valid[..., None]
        if reduction == "none":
            dz *= g[..., None]
        elif reduction == "sum":
            dz *= g
        else:
            dz *= g / denom if counted else g.dtype.type(0)
        return _class_first(x_shape, dz)


class SoftCrossEntropy(Function):
    """Cross entropy against class probabilities q of the input's shape (torch's
    probability-target form): loss = -sum_c w_c q_c log p_c per row.

    VJP: dloss/dz = p * sum_c w_c q_c - w * q;  dloss/dq = -w * log p. With label smoothing
    the target is first mixed: q' = (1 - eps) q + eps / C. 'mean' divides by the number of
    rows.
    """

    float_math = True

    @staticmethod
    def forward(ctx: Context, x: Any, q: Any, weight: Any = None, reduction: str = "mean",
                label_smoothing: float = 0.0) -> Any:
        xp = get_array_module(x)
        _check_reduction("cross_entropy", reduction)
        if q.shape != x.shape:
            raise ValueError(
                f"cross_entropy: probability target of shape {q.shape} must match the "
                f"input shape {x.shape}"
            )
        z = x if x.ndim == 1 else xp.moveaxis(x, 1, -1)
        qz = q if q.ndim == 1 else xp.moveaxis(q, 1, -1)
        num_classes = z.shape[-1]
        eps = x.dtype.type(label_smoothing)
        if label_smoothing:
            qz = (1 - eps) * qz + eps / x.dtype.type(num_classes)
        w = _check_weight("cross_entropy", weight, num_classes, x)
        wc = w if w is not None else xp.ones(num_classes, dtype=x.dtype)
        logp, p = _log_softmax_last(z)
        loss = -(wc * qz * logp).sum(axis=-1)
        rows = loss.size
        ctx.save_for_backward(p, logp, qz)
        ctx.meta = (x.shape, reduction, eps, wc, rows)
        if reduction == "none":
            return loss
        total = loss.sum()
        if reduction == "sum":
            return total
        return divide_by_count(total, rows) if rows else xp.zeros((), dtype=x.dtype)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        p, logp, qz = ctx.saved_arrays
        x_shape, reduction, eps, wc, rows = ctx.meta
        if reduction == "none":
            scale = g[..., None]
        elif reduction == "sum":
            scale = g
        else:
            scale = divide_by_count(g, rows) if rows else g.dtype.type(0)
        wq = wc * qz
        dz = (p * wq.sum(axis=-1, keepdims=True) - wq) * scale
        dq = (-wc * logp) * scale
        if eps:
            dq = dq * (1 - eps)
        return _class_first(x_shape, dz), _class_first(x_shape, dq)


class NLLLoss(Function):
    """Negative log-likelihood of log-probabilities (torch.nn.functional.nll_loss):
    loss_i = -w_{y_i} x_{i, y_i}.  VJP: -w_{y_i} at the target entry, 0 elsewhere (divided by
    sum_i w_{y_i} for 'mean'). ignore_index rows give 0 and zero gradient."""

    float_math = True

    @staticmethod
    def forward(ctx: Context, x: Any, target: Any, weight: Any = None,
                ignore_index: int = -100, reduction: str = "mean") -> Any:
        xp = get_array_module(x)
        _check_reduction("nll_loss", reduction)
        tg = _HardTargets("nll_loss", x, target, weight, ignore_index)
        z, safe, w_y = tg.z, tg.safe, tg.w_y
        picked = xp.take_along_axis(z, safe[..., None], axis=-1)[..., 0]
        loss = -w_y * picked
        denom = w_y.sum() if reduction == "mean" else None
        counted = _counted(tg.valid, reduction)
        ctx.save_for_backward(safe, w_y)
        ctx.meta = (x.shape, z.shape, reduction, denom, counted)
        return _reduce_weighted(loss, reduction, denom, counted)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        safe, w_y = ctx.saved_arrays
        x_shape, z_shape, reduction, denom, counted = ctx.meta
        xp = get_array_module(g)
        if reduction == "none":
            coef = -w_y * g
        elif reduction == "sum":
            coef = -w_y * g
        else:
            coef = -w_y * (g / denom if counted else g.dtype.type(0))
        dz = xp.zeros(z_shape, dtype=g.dtype)
        xp.put_along_axis(dz, safe[..., None], coef[..., None].astype(g.dtype), axis=-1)
        return _class_first(x_shape, dz)


class MSELoss(Function):
    """Mean squared error (torch.nn.functional.mse_loss): loss = (a - b)^2, reduced.
    VJP: dL/da = 2 (a - b) g / n for 'mean' (n elements), dL/db = -dL/da."""

    float_math = True

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any, reduction: str = "mean") -> Any:
        _check_reduction("mse_loss", reduction)
        if a.shape != b.shape:
            raise ValueError(
                f"mse_loss: input of shape {a.shape} and target of shape {b.shape} must "
                f"have the same shape"
            )
        diff = a - b
        ctx.save_for_backward(diff)
        ctx.reduction = reduction
        sq = diff * diff
        if reduction == "none":
            return sq
        if reduction == "sum":
            return sq.sum()
        return sq.mean() if sq.size else get_array_module(a).full((), a.dtype.type("nan"))

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        (diff,) = ctx.saved_arrays
        two = diff.dtype.type(2)
        if ctx.reduction == "mean":
            g = divide_by_count(g, max(diff.size, 1))
        da = two * diff * g
        return da, -da


def _broadcasting_to(op: str, name: str, value: Any, x: Any) -> Any:
    """``value`` (None, or an array-like of elementwise factors) as an array of ``x``'s
    dtype and device, checked to broadcast to ``x``'s shape: a larger shape would silently
    widen the loss beyond the input (ValueError naming ``op``, ``name`` and both shapes)."""
    if value is None:
        return None
    arr = get_array_module(x).asarray(value, dtype=x.dtype)
    fits = arr.ndim <= x.ndim and all(
        a in (1, s) for a, s in zip(reversed(arr.shape), reversed(x.shape)))
    if not fits:
        raise ValueError(
            f"{op}: {name} of shape {arr.shape} must broadcast to the input shape {x.shape}"
        )
    return arr


def _softplus(x: Any) -> Any:
    """log(1 + exp(x)) without overflow: max(x, 0) + log1p(exp(-|x|))."""
    xp = get_array_module(x)
    return xp.maximum(x, xp.zeros((), dtype=x.dtype)) + xp.log1p(xp.exp(-xp.abs(x)))


class BCEWithLogits(Function):
    """Binary cross entropy on logits (torch.nn.functional.binary_cross_entropy_with_logits).

    Math, per element with logit x, target t, pos_weight pw (1 if not given) and
    l_w = 1 + (pw - 1) t:

        loss = (1 - t) x + l_w * softplus(-x)      (= -[pw t log s(x) + (1-t) log(1-s(x))])
        dloss/dx = (1 - t) - l_w * s(-x)           (= s(x) - t when pw = 1)
        dloss/dt = -x + (pw - 1) softplus(-x)

    softplus and s are evaluated in their overflow-free forms, so any finite logit is safe.
    An optional elementwise ``weight`` multiplies the loss. ``weight`` and ``pos_weight``
    must broadcast to the input's shape (a ValueError names both shapes otherwise, as torch
    refuses them): the loss always has the input's shape, so 'mean' divides by the number
    of inputs in both directions.
    """

    float_math = True

    @staticmethod
    def forward(ctx: Context, x: Any, t: Any, weight: Any = None, pos_weight: Any = None,
                reduction: str = "mean") -> Any:
        xp = get_array_module(x)
        op = "binary_cross_entropy_with_logits"
        _check_reduction(op, reduction)
        if x.shape != t.shape:
            raise ValueError(
                f"{op}: input of shape {x.shape} and target of shape {t.shape} must have the "
                f"same shape"
            )
        w = _broadcasting_to(op, "weight", weight, x)
        pw = _broadcasting_to(op, "pos_weight", pos_weight, x)
        sp = _softplus(-x)
        lw = 1 + (pw - 1) * t if pw is not None else None
        loss = (1 - t) * x + (lw * sp if lw is not None else sp)
        if w is not None:
            loss = loss * w
        ctx.save_for_backward(x, t, sp)
        ctx.meta = (pw, lw, w, reduction)
        if reduction == "none":
            return loss
        if reduction == "sum":
            return loss.sum()
        return loss.mean() if loss.size else xp.full((), x.dtype.type("nan"))

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        x, t, sp = ctx.saved_arrays
        pw, lw, w, reduction = ctx.meta
        if reduction == "mean":
            g = divide_by_count(g, max(x.size, 1))
        s_neg = stable_sigmoid(-x)
        dx = (1 - t) - (lw * s_neg if lw is not None else s_neg)
        dt = -x + ((pw - 1) * sp if pw is not None else 0)
        if w is not None:
            dx, dt = dx * w, dt * w
        return dx * g, dt * g
