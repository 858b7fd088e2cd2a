"""Fused losses with torch.nn.functional's signatures and hand-written backward passes.

Fusing log-softmax into cross entropy gives the famous gradient dL/dz = softmax(z) - y
(the "y_hat - y" form) without ever forming the softmax Jacobian, and the log-sum-exp form
keeps it finite for any logits.

Layout of the class losses (cross_entropy, nll_loss), exactly torch's: input (N, C, d1, ...,
dk) with class ids of shape (N, d1, ..., dk) (k >= 0), or an unbatched input (C,) with a 0-d
target (or a (1,) one, which torch takes too); the classes are always on axis 1 (axis 0
unbatched). Arguments are checked by the ``check_*`` helpers below, one line in each op, so
the op bodies read as their derivations.

Why one module of about 740 lines: the fused losses share their target and reduction
handling (one check each, at the top); each op's forward and backward stays a few lines
tagged with the docs' equations.
"""
from __future__ import annotations

import contextlib
import math
import numbers
from typing import Any

import numpy as np

from ..backend import get_array_module
from .activations import stable_sigmoid
from .base import Context, Function
from .reductions import divide_by_count
from .selection import check_token_ids

REDUCTIONS = ("none", "mean", "sum")


# ------------------------------------------------------------------------------ checks
def check_reduction(op: str, reduction: Any) -> None:
    """ValueError naming ``op`` unless ``reduction`` is the string 'none', 'mean' or 'sum'."""
    if not isinstance(reduction, str) or reduction not in REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {REDUCTIONS}, got {reduction!r}")


def _scalar(value: Any) -> Any:
    """A 0-d NumPy array as the scalar it holds (``np.array(0.1)``); anything else as is."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value[()]
    return value


def check_unit_interval(op: str, name: str, value: Any) -> float:
    """``value`` as a Python float in [0, 1]: a real number (a Python or NumPy int or float,
    or a 0-d array of one). A bool, a string or None is a TypeError, NaN or a number outside
    [0, 1] a ValueError, each naming ``op`` and ``name`` (a string would otherwise fail
    inside a comparison, and NaN would pass every ``p > 0`` test as if it were 0)."""
    number = _scalar(value)
    if isinstance(number, (bool, np.bool_)) or not isinstance(number, numbers.Real):
        raise TypeError(f"{op}: {name} must be a real number in [0, 1], got {value!r} "
                        f"({type(value).__name__}); pass a number such as {name}=0.1")
    if not 0.0 <= float(number) <= 1.0:  # False for NaN too
        raise ValueError(f"{op}: {name} must be in [0, 1], got {value!r}")
    return float(number)


def check_ignore_index(op: str, ignore_index: Any) -> int:
    """``ignore_index`` as a Python int: a Python or NumPy integer or a 0-d integer array,
    as in torch. A float (1.5 would match no id and ignore nothing, silently), a bool, a
    string or None is a TypeError naming ``op``."""
    value = _scalar(ignore_index)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(
            f"{op}: ignore_index must be an int (the target value whose entries are left "
            f"out; torch's default is -100), got {ignore_index!r} "
            f"({type(ignore_index).__name__})"
        )
    return int(value)


#: Marks an option that a loss does not take (nll_loss has no label_smoothing).
_UNUSED = object()


def check_class_options(op: str, reduction: Any, ignore_index: Any = _UNUSED,
                        label_smoothing: Any = _UNUSED) -> tuple:
    """(ignore_index, label_smoothing) checked by :func:`check_ignore_index` and
    :func:`check_unit_interval`, after ``reduction``; an option the loss does not take is
    returned as None."""
    check_reduction(op, reduction)
    if ignore_index is not _UNUSED:
        ignore_index = check_ignore_index(op, ignore_index)
    if label_smoothing is not _UNUSED:
        label_smoothing = check_unit_interval(op, "label_smoothing", label_smoothing)
    return (None if ignore_index is _UNUSED else ignore_index,
            None if label_smoothing is _UNUSED else label_smoothing)


def _layout_hint(op: str, x_shape: tuple, t_shape: tuple) -> str:
    """The likely fix for a target whose shape does not fit the input (see
    :func:`_target_shape_error`), or ''."""
    expected = () if len(x_shape) == 1 else x_shape[:1] + x_shape[2:]
    if len(x_shape) >= 3 and t_shape == x_shape[:-1]:
        v = x_shape[-1]
        return (f". The target has the input's shape without its last axis: if that axis "
                f"holds the {v} classes (time-major (T, N, V) or batch-first (N, T, V) "
                f"logits), flatten both: F.{op}(logits.reshape(-1, {v}), "
                f"targets.reshape(-1))"
                + (", or put the classes on axis 1 with logits.transpose(1, 2)"
                   if len(x_shape) == 3 else ""))
    if t_shape == x_shape:
        probs = (" or class probabilities as a float target of the input's shape"
                 if op == "cross_entropy" else "")
        return (f". A target of the input's shape looks like one-hot labels: pass the class "
                f"ids targets.argmax({0 if len(x_shape) == 1 else 1}){probs}")
    if math.prod(t_shape) == math.prod(expected):
        return f". The sizes agree: reshape the target with targets.reshape({expected})"
    return ""


def _target_shape_error(op: str, x_shape: tuple, t_shape: tuple) -> ValueError:
    """ValueError naming ``op``, both shapes, torch's layout, the shape the input needs and,
    where the shapes suggest it, the fix (:func:`_layout_hint`)."""
    if len(x_shape) == 1:
        needs = (f"an input (C,) = {x_shape} needs a 0-d target (one class id; torch "
                 f"takes shape (1,) too)")
    else:
        expected = x_shape[:1] + x_shape[2:]
        needs = (f"this input has C = {x_shape[1]} classes on axis 1 and needs a target of "
                 f"shape {expected}")
    return ValueError(
        f"{op}: input of shape {x_shape} and target of shape {t_shape} do not fit torch's "
        f"layout, input (N, C, d1, ..., dk) with class ids of shape (N, d1, ..., dk), or "
        f"input (C,) with a 0-d target: {needs}{_layout_hint(op, x_shape, t_shape)}"
    )


def _class_last(op: str, x: Any, target: Any) -> Any:
    """``x`` with its class axis (1, or 0 for 1-D input) moved last, (..., C), after checking
    that ``target`` has the shape torch's layout gives: input (N, C, d1, ...) pairs with
    target (N, d1, ...), input (C,) with a 0-d target (:func:`_target_shape_error`)."""
    xp = get_array_module(x)
    if x.ndim == 0:
        raise ValueError(f"{op}: input must have a class dimension, got shape {x.shape} "
                         f"(torch's layout: (N, C, d1, ..., dk) or (C,))")
    expected = () if x.ndim == 1 else x.shape[:1] + x.shape[2:]
    if tuple(target.shape) != expected:
        raise _target_shape_error(op, tuple(x.shape), tuple(target.shape))
    return x if x.ndim == 1 else xp.moveaxis(x, 1, -1)  # (..., C)


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
    """Class weights as an array of ``x``'s dtype, checked to have shape (C,)."""
    if weight is None:
        return None
    xp = get_array_module(x)
    try:
        weight = xp.asarray(weight, dtype=x.dtype)
    except (TypeError, ValueError):
        raise TypeError(f"{op}: weight must be None or {num_classes} real numbers (one per "
                        f"class), got {type(weight).__name__} {weight!r}") from None
    if weight.shape != (num_classes,):
        raise ValueError(
            f"{op}: weight must have shape ({num_classes},) for input of shape {x.shape}, "
            f"got {weight.shape}"
        )
    return weight


def _one_id_of_shape_1(op: str, x: Any, target: Any) -> bool:
    """Whether ``target`` is one class id of shape (1,) for an unbatched input (C,), which
    torch takes as the 0-d id; except in cross_entropy when C = 1, where the target has the
    input's shape and torch reads it as probabilities (and refuses an integer one)."""
    same_as_probabilities = op == "cross_entropy" and x.shape == (1,)
    return x.ndim == 1 and target.shape == (1,) and not same_as_probabilities


class ClassIdTargets:
    """Class-id targets, checked once and prepared for the loss (shared by
    :class:`PlainCrossEntropy`, :class:`CrossEntropy` and :class:`NLLLoss`).

    Attributes: ``z`` the input with its classes last (..., C); ``num_classes`` C; ``w`` the
    class weights (C,) or None; ``valid`` the mask of rows whose target is not
    ``ignore_index``; ``safe`` the class ids with the ignored ones replaced by 0 (so that
    they can index); ``w_y`` each row's weight w_{y_n} (1 without weights, 0 where
    ignored); ``empty`` whether there are no rows at all."""

    def __init__(self, op: str, x: Any, target: Any, weight: Any, ignore_index: Any) -> None:
        xp = get_array_module(x)
        target = xp.asarray(target)
        if target.dtype.kind not in "iu":
            raise TypeError(
                f"{op}: target must hold integer class ids, got dtype {target.dtype} (target "
                f"shape {target.shape}, input shape {x.shape}; for class probabilities pass "
                f"a float target of the input's shape to cross_entropy)"
            )
        if _one_id_of_shape_1(op, x, target):
            target = target.reshape(())
        self.z = _class_last(op, x, target)
        self.num_classes = self.z.shape[-1]
        check_token_ids(op, target, self.num_classes, what="number of classes",
                        ignore=ignore_index)
        self.w = _check_weight(op, weight, self.num_classes, x)
        self.valid = target != ignore_index
        self.safe = xp.where(self.valid, target, 0)
        w_y = self.w[self.safe] if self.w is not None else xp.ones(target.shape, dtype=x.dtype)
        self.w_y = xp.where(self.valid, w_y, xp.zeros((), dtype=x.dtype))
        self.empty = target.size == 0


def takes_plain_path(target: Any, weight: Any, ignore_index: int,
                     label_smoothing: Any) -> bool:
    """Whether ``F.cross_entropy`` with class ids is the textbook loss, computed by
    :class:`PlainCrossEntropy`: no class weights, no label smoothing (exactly 0, a real
    number that is not a bool) and no target equal to ``ignore_index`` (one host read of a
    flag). Anything else, invalid arguments included, goes to :class:`CrossEntropy`, which
    gives the same numbers on the plain cases and checks every option."""
    smoothing = _scalar(label_smoothing)
    if weight is not None or isinstance(smoothing, (bool, np.bool_)):
        return False
    if not isinstance(smoothing, numbers.Real) or smoothing != 0:
        return False
    try:
        ids = get_array_module(target).asarray(target)
        return not bool((ids == ignore_index).any())
    except (TypeError, ValueError):  # ragged lists and the like: the general op explains
        return False


# ------------------------------------------------------------------------------ reductions
def _ieee(on: bool) -> Any:
    """A context in which, when ``on``, IEEE arithmetic runs without floating-point warnings
    (x / 0 = +-inf, 0 / 0 = 0 * inf = NaN): for a 'mean' whose counted weights sum to 0,
    where torch gives these values (a sign that the weights, not the data, are wrong:
    nothing is corrected silently). Everywhere else warnings stay as configured."""
    return np.errstate(divide="ignore", invalid="ignore") if on else contextlib.nullcontext()


def _zero_denominator(reduction: str, denom: Any) -> bool:
    """Whether a 'mean' divides by 0 (one host read of a flag, for 'mean' only)."""
    return reduction == "mean" and not bool(denom != 0)


def _divide(a: Any, b: Any) -> Any:
    """a / b with IEEE semantics and no floating-point warning (see :func:`_ieee`)."""
    with _ieee(True):
        return a / b


def _mean_of(total: Any, denom: Any, valid: Any, empty: bool) -> Any:
    """A weighted 'mean': ``total / denom`` (denom = the sum of the counted rows' class
    weights, torch's definition, whatever its sign); NaN for an empty batch, as in torch
    (0 / 0); and 0.0 when rows exist but every one is ignored (torch: NaN; a deliberate
    difference, so a batch of padding only adds nothing to a running loss)."""
    if empty or bool(valid.any()):
        return _divide(total, denom)
    return get_array_module(total).zeros((), dtype=total.dtype)


def _row_scale(g: Any, reduction: str, denom: Any, valid: Any) -> Any:
    """dL/dloss_i for every row i: g_i ('none'), g ('sum') or g / denom ('mean'), and
    exactly 0 on ignored rows whatever g and denom are (never 0 * inf = NaN there)."""
    xp = get_array_module(g)
    scale = _divide(g, denom) if reduction == "mean" else g
    return xp.where(valid, scale, xp.zeros((), dtype=g.dtype))


class PlainCrossEntropy(Function):
    """Cross entropy of logits against class ids, the textbook loss of docs/softmax.md
    section 4: no class weights, no label smoothing, no ignored rows.
    ``F.cross_entropy`` chooses it when none of those options is in use
    (:func:`takes_plain_path`) and :class:`CrossEntropy` otherwise; on these cases the two
    give the same bits.

    Math, for one row with logits z (C classes) and target class y:

        loss = -log p_y = -z_y + log sum_j exp(z_j)           (SM9), by log-sum-exp (SM6)
        dloss/dz = p - e_y                                     (SM10), "y_hat - y"

    'mean' divides by the number of rows N, so its gradient is (P - Y) / N row by row (NaN
    for N = 0, as in torch); 'sum' adds the rows; 'none' keeps them.

    Shapes: input (N, C, d1, ..., dk) with target (N, d1, ..., dk), or (C,) with a 0-d
    target (torch's layout; see :func:`_target_shape_error` for the errors).
    """

    float_math = True

    @staticmethod
    def forward(ctx: Context, x: Any, target: Any, reduction: str = "mean",
                ignore_index: int = -100) -> Any:
        # ignore_index: no target equals it on this path; it is named in the error for an
        # id outside [0, C), as on the general path
        check_reduction("cross_entropy", reduction)
        tg = ClassIdTargets("cross_entropy", x, target, None, ignore_index)
        xp = get_array_module(x)
        y = tg.safe                                                  # (...,) class ids
        z = tg.z                                                     # (..., C)
        # _log_softmax_last's arithmetic, with log p formed only at the targets and
        # exp and the division done in place: two passes over (..., C) fewer, same bits
        m = xp.max(z, axis=-1, keepdims=True) if z.shape[-1] else xp.zeros_like(z[..., :1])
        shifted = z - m                                              # (..., C)
        shifted_y = xp.take_along_axis(shifted, y[..., None], axis=-1)  # (..., 1)
        p = xp.exp(shifted, out=shifted)                             # exp(z - m), in place
        s = xp.sum(p, axis=-1, keepdims=True)                        # (..., 1)
        p /= s                                                       # (SM3) softmax
        nll = -(shifted_y - xp.log(s))[..., 0]                       # (SM9) by (SM6)
        ctx.save_for_backward(p, y)
        ctx.x_shape, ctx.reduction = x.shape, reduction
        ctx.rows = tg.w_y.sum()  # N, as a number of x's dtype (the general op's W with w = 1)
        if reduction == "none":
            return nll
        if reduction == "sum":
            return nll.sum()
        return _divide(nll.sum(), ctx.rows)  # 0 / 0 = NaN for an empty batch, as in torch

    @staticmethod
    def backward(ctx: Context, grad_out: Any) -> Any:
        p, y = ctx.saved_arrays
        xp = get_array_module(p)
        # exercise: cross_entropy_backward begin
        s = _divide(grad_out, ctx.rows) if ctx.reduction == "mean" else grad_out  # dL/dloss_n
        s = xp.broadcast_to(s, y.shape)[..., None]                   # (..., 1)
        # (SM10) (p - e_y) s: p s everywhere, then p_y s - s at the targets (the bits of
        # p s - onehot(y) s, without a (..., C) one-hot array)
        dz = p * s                                                   # (..., C)
        dz_y = xp.take_along_axis(dz, y[..., None], axis=-1)         # (..., 1)
        xp.put_along_axis(dz, y[..., None], dz_y - s, axis=-1)
        # exercise: end
        return _class_first(ctx.x_shape, dz)


class CrossEntropy(Function):
    """Cross entropy between logits and class ids (torch.nn.functional.cross_entropy), with
    every option: class weights, label smoothing and ``ignore_index``. Without them
    ``F.cross_entropy`` computes the same numbers with :class:`PlainCrossEntropy`, whose
    backward is the textbook p - e_y (SM10).

    Math, for one row with logits z (C classes), target class y, class weights w (all 1 when
    not given) and label smoothing eps:

        log p = log_softmax(z)
        loss = (1 - eps) * w_y * (-log p_y) + (eps / C) * sum_c w_c * (-log p_c)
        dloss/dz = (1 - eps) w_y (p - e_y) + (eps / C) (sum_c w_c p - w)      (SM13)

    With eps = 0 and no weights this is p - onehot(y) (SM10); with no weights it is p - q,
    q the smoothed target (SM12). Rows whose target equals ``ignore_index`` contribute 0 and
    get exactly 0 gradient, whatever the upstream gradient.

    'mean' divides each of the two terms by W = the sum of w_y over the non-ignored rows
    (SM14; torch's definition, negative weights included): (1 - eps) sum(w_y nll) / W +
    (eps / C) sum(smooth) / W. Where the counted weights sum to W = 0 this gives torch's NaN
    or inf, and NaN gradients on the counted rows (the ignored ones still get 0). An empty
    batch gives NaN, as in torch; a batch whose rows are all ignored gives 0.0 with zero
    gradient (torch: NaN; a deliberate difference).

    Shapes: input (N, C, d1, ..., dk) with target (N, d1, ..., dk), or (C,) with a 0-d target
    (torch's layout; see :func:`_target_shape_error` for the errors).

    Saved on ``ctx`` besides the arrays: ``x_shape``, ``reduction``, ``eps``, ``eps_c``
    (eps / C), ``wc`` (the class weights of the smoothing term, None without smoothing),
    ``denom`` (W, for 'mean') and ``zero_denom`` (whether W = 0).
    """

    float_math = True

    @staticmethod
    def forward(ctx: Context, x: Any, target: Any, weight: Any = None,
                ignore_index: int = -100, reduction: str = "mean",
                label_smoothing: float = 0.0) -> Any:
        xp = get_array_module(x)
        ignore_index, label_smoothing = check_class_options(
            "cross_entropy", reduction, ignore_index, label_smoothing)
        tg = ClassIdTargets("cross_entropy", x, target, weight, ignore_index)
        num_classes, w, valid, safe, w_y = tg.num_classes, tg.w, tg.valid, tg.safe, tg.w_y
        zero = xp.zeros((), dtype=x.dtype)
        logp, p = _log_softmax_last(tg.z)                            # (SM6), (SM3)
        nll = -xp.take_along_axis(logp, safe[..., None], axis=-1)[..., 0]   # (SM9)
        eps = x.dtype.type(label_smoothing)
        eps_c = eps / x.dtype.type(num_classes)
        hard = xp.where(valid, w_y * nll, zero)  # w_y * (-log p_y), 0 where ignored
        wc = None
        if label_smoothing > 0:
            wc = w if w is not None else xp.ones(num_classes, dtype=x.dtype)
            smooth = xp.where(valid, -(logp * wc).sum(axis=-1), zero)  # sum_c w_c (-log p_c)
        ctx.save_for_backward(p, safe, valid, w_y)
        denom = w_y.sum() if reduction == "mean" else None           # W of (SM14)
        zero_denom = _zero_denominator(reduction, denom)
        ctx.x_shape, ctx.reduction, ctx.eps, ctx.eps_c = x.shape, reduction, eps, eps_c
        ctx.wc, ctx.denom, ctx.zero_denom = wc, denom, zero_denom
        if reduction == "none":
            return (1 - eps) * hard + eps_c * smooth if wc is not None else hard
        if reduction == "sum":
            return ((1 - eps) * hard + eps_c * smooth).sum() if wc is not None else hard.sum()
        mean = _mean_of(hard.sum(), denom, valid, tg.empty)          # (SM14)
        if wc is not None:
            with _ieee(zero_denom):  # NaN + inf is NaN, as in torch
                mean = (1 - eps) * mean + eps_c * _mean_of(smooth.sum(), denom, valid,
                                                           tg.empty)
        return mean

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        p, safe, valid, w_y = ctx.saved_arrays
        eps, eps_c, wc = ctx.eps, ctx.eps_c, ctx.wc
        xp = get_array_module(p)
        s = _row_scale(g, ctx.reduction, ctx.denom, valid)  # (...,) dL/dloss, 0 if ignored
        with _ieee(ctx.zero_denom):  # W = 0: 0 * inf is NaN on the counted rows, as in torch
            a = ((1 - eps) * s) * w_y  # (...,) the factor of the hard term
            dz = a[..., None] * p
            picked = xp.take_along_axis(dz, safe[..., None], axis=-1)
            xp.put_along_axis(dz, safe[..., None], picked - a[..., None], axis=-1)  # a(p - e_y)
            if wc is not None:
                b = eps_c * s  # (...,)
                dz += b[..., None] * (wc.sum() * p - wc)  # (SM13) (eps / C) (sum_c w_c p - w)
        return _class_first(ctx.x_shape, dz)


class SoftCrossEntropy(Function):
    """Cross entropy against class probabilities q of the input's shape (torch's
    probability-target form): loss = -sum_c w_c q_c log p_c per row.

    VJP: dloss/dz = p * sum_c w_c q_c - w * q;  dloss/dq = -w * log p. With label smoothing
    the target is first mixed: q' = (1 - eps) q + eps / C. 'mean' divides by the number of
    rows N * d1 * ... * dk (NaN for an empty batch, as in torch).
    """

    float_math = True

    @staticmethod
    def forward(ctx: Context, x: Any, q: Any, weight: Any = None, reduction: str = "mean",
                label_smoothing: float = 0.0) -> Any:
        xp = get_array_module(x)
        _, label_smoothing = check_class_options("cross_entropy", reduction,
                                                 label_smoothing=label_smoothing)
        _check_probability_target(x, q)
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
        ctx.x_shape, ctx.reduction, ctx.eps, ctx.wc = x.shape, reduction, eps, wc
        ctx.rows = rows
        if reduction == "none":
            return loss
        total = loss.sum()
        if reduction == "sum":
            return total
        return divide_by_count(total, rows) if rows else xp.full((), x.dtype.type("nan"))

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        p, logp, qz = ctx.saved_arrays
        rows = ctx.rows
        if ctx.reduction == "none":
            scale = g[..., None]
        elif ctx.reduction == "sum":
            scale = g
        else:
            scale = divide_by_count(g, rows) if rows else g.dtype.type(0)  # (no rows at all)
        wq = ctx.wc * qz
        dz = (p * wq.sum(axis=-1, keepdims=True) - wq) * scale  # (SM12) p - q, weighted
        dq = (-ctx.wc * logp) * scale
        if ctx.eps:
            dq = dq * (1 - ctx.eps)
        return _class_first(ctx.x_shape, dz), _class_first(ctx.x_shape, dq)


def _check_probability_target(x: Any, q: Any) -> None:
    """A probability target must have the input's shape (and a class axis)."""
    if x.ndim == 0:
        raise ValueError(f"cross_entropy: input must have a class dimension, got shape "
                         f"{x.shape} (torch's layout: (N, C, d1, ..., dk) or (C,))")
    if q.shape != x.shape:
        raise ValueError(
            f"cross_entropy: probability target of shape {q.shape} must match the "
            f"input shape {x.shape}"
        )


class NLLLoss(Function):
    """Negative log-likelihood of log-probabilities (torch.nn.functional.nll_loss):
    loss_i = -w_{y_i} x_{i, y_i}.  VJP: -w_{y_i} at the target entry, 0 elsewhere (divided by
    W = sum_i w_{y_i} over the non-ignored rows for 'mean'). Ignored rows give 0 and exactly
    zero gradient. Layout, 'mean' over an empty or an all-ignored batch, and W = 0 as in
    :class:`CrossEntropy` (W = 0: NaN at the counted rows' target entries, as in torch)."""

    float_math = True

    @staticmethod
    def forward(ctx: Context, x: Any, target: Any, weight: Any = None,
                ignore_index: int = -100, reduction: str = "mean") -> Any:
        xp = get_array_module(x)
        ignore_index, _ = check_class_options("nll_loss", reduction, ignore_index)
        tg = ClassIdTargets("nll_loss", x, target, weight, ignore_index)
        z, safe, w_y, valid = tg.z, tg.safe, tg.w_y, tg.valid
        picked = xp.take_along_axis(z, safe[..., None], axis=-1)[..., 0]
        loss = xp.where(valid, -w_y * picked, xp.zeros((), dtype=x.dtype))
        denom = w_y.sum() if reduction == "mean" else None
        ctx.save_for_backward(safe, w_y, valid)
        ctx.x_shape, ctx.z_shape, ctx.reduction, ctx.denom = x.shape, z.shape, reduction, denom
        ctx.zero_denom = _zero_denominator(reduction, denom)
        if reduction == "none":
            return loss
        if reduction == "sum":
            return loss.sum()
        return _mean_of(loss.sum(), denom, valid, tg.empty)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        safe, w_y, valid = ctx.saved_arrays
        xp = get_array_module(g)
        with _ieee(ctx.zero_denom):  # W = 0: 0 * inf is NaN at the counted targets, as torch
            coef = -w_y * _row_scale(g, ctx.reduction, ctx.denom, valid)  # (...,)
        dz = xp.zeros(ctx.z_shape, dtype=g.dtype)
        xp.put_along_axis(dz, safe[..., None], coef[..., None].astype(g.dtype), axis=-1)
        return _class_first(ctx.x_shape, dz)


class MSELoss(Function):
    """Mean squared error (torch.nn.functional.mse_loss): loss = (a - b)^2, reduced.
    VJP: dL/da = 2 (a - b) g / n for 'mean' (n elements), dL/db = -dL/da."""

    float_math = True

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any, reduction: str = "mean") -> Any:
        check_reduction("mse_loss", reduction)
        if a.shape != b.shape:
            raise ValueError(
                f"mse_loss: input of shape {a.shape} and target of shape {b.shape} must "
                f"have the same shape"
            )
        diff = a - b
        ctx.save_for_backward(diff)
        ctx.reduction = reduction
        sq = diff * diff
        return _reduce_elementwise(sq, reduction)

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
    kind = getattr(value, "dtype", None)
    kind = np.dtype(kind).kind if kind is not None else np.asarray(value).dtype.kind
    if kind not in "biuf":
        raise TypeError(f"{op}: {name} must be real numbers (an array, a list or a scalar), "
                        f"got {value!r} ({type(value).__name__})"[:300])
    arr = get_array_module(x).asarray(value, dtype=x.dtype)
    fits = arr.ndim <= x.ndim and all(
        a in (1, s) for a, s in zip(reversed(arr.shape), reversed(x.shape)))
    if not fits:
        raise ValueError(
            f"{op}: {name} of shape {arr.shape} must broadcast to the input shape {x.shape}"
        )
    return arr


def _reduce_elementwise(loss: Any, reduction: str) -> Any:
    """An elementwise loss reduced: as it is ('none'), summed, or averaged ('mean'; NaN over
    an empty input, as torch)."""
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.mean() if loss.size else get_array_module(loss).full((), loss.dtype.type("nan"))


def _check_binary_target(op: str, reduction: str, x: Any, t: Any) -> None:
    """The reduction is known and the target has the input's shape (as torch requires of the
    binary losses); a ValueError naming ``op`` and both shapes otherwise."""
    check_reduction(op, reduction)
    if x.shape != t.shape:
        raise ValueError(
            f"{op}: input of shape {x.shape} and target of shape {t.shape} must have the "
            f"same shape (as torch requires)"
        )


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
        op = "binary_cross_entropy_with_logits"
        _check_binary_target(op, reduction, x, t)
        w = _broadcasting_to(op, "weight", weight, x)
        pw = _broadcasting_to(op, "pos_weight", pos_weight, x)
        sp = _softplus(-x)
        lw = 1 + (pw - 1) * t if pw is not None else None
        loss = (1 - t) * x + (lw * sp if lw is not None else sp)
        if w is not None:
            loss = loss * w
        ctx.save_for_backward(x, t, sp)
        ctx.pw, ctx.lw, ctx.w, ctx.reduction = pw, lw, w, reduction
        return _reduce_elementwise(loss, reduction)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        x, t, sp = ctx.saved_arrays
        pw, lw, w = ctx.pw, ctx.lw, ctx.w
        if ctx.reduction == "mean":
            g = divide_by_count(g, max(x.size, 1))
        s_neg = stable_sigmoid(-x)
        dx = (1 - t) - (lw * s_neg if lw is not None else s_neg)
        dt = -x + ((pw - 1) * sp if pw is not None else 0)
        if w is not None:
            dx, dt = dx * w, dt * w
        return dx * g, dt * g


def _check_unit_values(op: str, name: str, a: Any) -> None:
    """ValueError naming ``op`` and ``name`` unless every entry of ``a`` lies in [0, 1]
    (NaN does not): torch refuses such probabilities too, and log(x) of a negative x would
    only give NaN later (one host read of a flag)."""
    xp = get_array_module(a)
    outside = ~((a >= 0) & (a <= 1))
    if bool(xp.any(outside)):
        first = a[outside].ravel()[0]
        raise ValueError(f"{op}: every element of {name} must be between 0 and 1 (a "
                         f"probability), got {first!r}; for logits use "
                         f"binary_cross_entropy_with_logits")


#: torch's bound on log(p) in binary cross entropy: a probability of exactly 0 or 1 costs
#: at most 100 nats instead of inf.
LOG_FLOOR = -100.0
#: torch's floor under x (1 - x) in the gradient of binary cross entropy: 1e-12 rounded to
#: float32 (9.99999996e-13), as torch stores it, in every dtype.
BCE_EPSILON = float(np.float32(1e-12))


class BinaryCrossEntropy(Function):
    """Binary cross entropy of probabilities (torch.nn.functional.binary_cross_entropy).

    Math, per element with probability x in [0, 1], target t in [0, 1] and an optional
    elementwise weight w (1 when not given):

        loss = -w [t max(log x, -100) + (1 - t) max(log(1 - x), -100)]
        dloss/dx = w (x - t) / max(x (1 - x), 1e-12)
        dloss/dt = w [log(1 - x) - log x]

    Notes
    -----
    The floors are torch's: the log is clamped at -100, so x = 0 or 1 gives a finite loss
    (at most 100 w), and the denominator of dloss/dx at 1e-12, so its gradient is finite
    too (about 1e12, a sign that the model saturated: prefer
    :class:`BCEWithLogits` on logits). Away from 0 and 1 dloss/dx is the exact derivative of
    the loss; at the floors it is torch's value, not the derivative of the clamped loss
    (which would be 0). dloss/dt is not clamped (inf at x = 0 or 1), as in torch.

    ``x`` and ``t`` must have the same shape and hold values in [0, 1] (a ValueError
    otherwise, as torch raises); ``weight`` must broadcast to that shape. 'mean' divides by
    the number of elements (NaN for none, as in torch).
    """

    float_math = True

    @staticmethod
    def forward(ctx: Context, x: Any, t: Any, weight: Any = None,
                reduction: str = "mean") -> Any:
        xp = get_array_module(x)
        op = "binary_cross_entropy"
        _check_binary_target(op, reduction, x, t)
        _check_unit_values(op, "input", x)
        _check_unit_values(op, "target", t)
        w = _broadcasting_to(op, "weight", weight, x)
        floor = x.dtype.type(LOG_FLOOR)
        with np.errstate(divide="ignore"):  # log(0) = -inf, then clamped
            log_x = xp.maximum(xp.log(x), floor)
            log_1mx = xp.maximum(xp.log1p(-x), floor)
        loss = -(t * log_x + (1 - t) * log_1mx)  # (SM15)
        if w is not None:
            loss = loss * w
        ctx.save_for_backward(x, t)
        ctx.w, ctx.reduction = w, reduction
        return _reduce_elementwise(loss, reduction)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        x, t = ctx.saved_arrays
        w = ctx.w
        xp = get_array_module(x)
        if ctx.reduction == "mean":
            g = divide_by_count(g, max(x.size, 1))
        denom = xp.maximum(x * (1 - x), x.dtype.type(BCE_EPSILON))
        dx = (x - t) / denom  # (SM16)
        with np.errstate(divide="ignore"):  # x = 0 or 1: an infinite dloss/dt, as in torch
            dt = xp.log1p(-x) - xp.log(x)  # (SM16)
        if w is not None:
            dx, dt = dx * w, dt * w
        return dx * g, dt * g
