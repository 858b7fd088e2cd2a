"""Functional interface: lowercase functions named as in ``torch.nn.functional`` where it
has the function. Each is one differentiable primitive (see :mod:`tinygrad_rnn.ops`) or a
short composition of them; docstrings give the math and the gradient.

Axis arguments accept NumPy's ``axis`` or torch's ``dim``.

Devices: every function runs on the device of its tensor inputs. Constants (masks, class-id
targets, ids, class weights) and targets may be given as host data (NumPy arrays, lists),
which is copied to that device; a constant given as a Tensor on another device is a
RuntimeError naming both devices.
"""
from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from . import _validate
from . import ops
from .arguments import axis_argument, check_integer_ids
from .backend import get_array_module
from .ops.losses import (
    BinaryCrossEntropy, check_ignore_index, check_unit_interval, takes_plain_path,
)
from .random import get_generator
from .creation import cat, split, stack, where  # noqa: F401  (re-exported)
from .tensor import Tensor, constant_data

__all__ = [
    "relu", "tanh", "sigmoid", "softmax", "log_softmax", "exp", "log", "sqrt", "abs",
    "maximum", "minimum", "clip", "matmul", "linear", "embedding", "dropout",
    "cross_entropy", "nll_loss", "mse_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "masked_fill", "where", "cat", "stack", "split",
]


def target_on_device(target: Any, input: Any) -> Any:
    """A target that is an input of the op (mse_loss, binary cross entropy, probability
    targets): host data is copied to ``input``'s device; a Tensor is passed on as it is (the
    op checks that its inputs share a device)."""
    if isinstance(target, Tensor) or not isinstance(input, Tensor) or input.device == "cpu":
        return target
    return Tensor(target, device=input.device)


def as_tensor_argument(op: str, name: str, value: Any, dtype: Any = None) -> Tensor:
    """``value`` as a Tensor: a Tensor as it is, host data (a NumPy array, a list, a number)
    wrapped by the Tensor constructor (its dtype rules: a list of floats is float32), or in
    ``dtype`` when given and the data has no dtype of its own (a list, a Python number), as
    a scalar beside a tensor takes the tensor's dtype. Data that holds no numbers (a string,
    None) is a TypeError naming ``op`` and ``name``."""
    if isinstance(value, Tensor):
        return value
    if dtype is not None and hasattr(value, "dtype"):
        dtype = None
    try:
        return Tensor(value, dtype=dtype)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{op}: {name} must be a Tensor or an array of numbers, got "
                        f"{type(value).__name__} ({err})") from None


def relu(x: Tensor) -> Tensor:
    """max(x, 0). Derivative 1[x > 0] (0 at x = 0). Jacobian: ``tr.explicit_jacobians.relu``."""
    return ops.ReLU.apply(x)


def tanh(x: Tensor) -> Tensor:
    """tanh(x). Derivative 1 - tanh(x)^2, written in the output. Jacobian diag(1 - y^2)."""
    return ops.Tanh.apply(x)


def sigmoid(x: Tensor) -> Tensor:
    """1 / (1 + exp(-x)), overflow-free. Derivative y (1 - y) in the output y."""
    return ops.Sigmoid.apply(x)


def softmax(x: Tensor, axis: int | None = None, mask: Any = None, *,
            dim: int | None = None) -> Tensor:
    """Softmax along ``axis`` (default -1), max-shifted so it never overflows.

    Math: y_i = exp(x_i) / sum_j exp(x_j); Jacobian J = diag(y) - y y^T; VJP
    y * (g - <g, y>).

    Parameters
    ----------
    mask : bool array-like, optional
        Broadcastable to x; True marks entries that take part. Masked entries get
        probability exactly 0 and gradient 0; a fully masked row is all zeros, never NaN.
        A mask of any other dtype is a TypeError, never read as boolean: pass a 0/1 keep
        mask as ``mask != 0`` and an additive 0 / -inf mask as ``additive == 0``.
    """
    return ops.Softmax.apply(x, axis=axis_argument("softmax", axis, dim),
                             mask=constant_data(mask, x, "softmax", "mask"))


def log_softmax(x: Tensor, axis: int | None = None, mask: Any = None, *,
                dim: int | None = None) -> Tensor:
    """log(softmax(x)) along ``axis`` in the log-sum-exp form.

    Math: y = x - logsumexp(x); Jacobian J = I - 1 p^T with p = softmax(x); VJP
    g - p * sum(g). Masked entries (mask False; the mask must be boolean, as for
    :func:`softmax`) are -inf with gradient 0.
    """
    return ops.LogSoftmax.apply(x, axis=axis_argument("log_softmax", axis, dim),
                                mask=constant_data(mask, x, "log_softmax", "mask"))


def exp(x: Tensor) -> Tensor:
    """exp(x); derivative exp(x), written in the output."""
    return ops.Exp.apply(x)


def log(x: Tensor) -> Tensor:
    """Natural log; derivative 1 / x."""
    return ops.Log.apply(x)


def sqrt(x: Tensor) -> Tensor:
    """Square root; derivative 1 / (2 sqrt(x))."""
    return ops.Sqrt.apply(x)


def abs(x: Tensor) -> Tensor:  # noqa: A001  (mirrors torch.abs)
    """|x|; derivative sign(x), taken as 0 at 0."""
    return ops.Abs.apply(x)


def maximum(a: Any, b: Any) -> Tensor:
    """Elementwise maximum; at ties the gradient is split equally."""
    return ops.Maximum.apply(a, b)


def minimum(a: Any, b: Any) -> Tensor:
    """Elementwise minimum; at ties the gradient is split equally."""
    return ops.Minimum.apply(a, b)


def clip(x: Tensor, min: float | None = None, max: float | None = None) -> Tensor:
    """Clamp to [min, max] (numbers; either may be None); the gradient passes where
    min <= x <= max. An integer tensor with a float bound gives float32, as in torch (the
    bounds are never truncated to integers)."""
    return ops.Clip.apply(x, lo=min, hi=max)


clamp = clip


def matmul(a: Any, b: Any) -> Tensor:
    """Matrix product with NumPy's rules (1-D, 2-D, batched with broadcasting).
    dL/dA = G B^T, dL/dB = A^T G."""
    return ops.MatMul.apply(a, b)


def linear(x: Any, weight: Any, bias: Any = None) -> Tensor:
    """y = x W^T + b, as torch's F.linear.

    Math: y = x W^T + b; dL/dx = G W, dL/dW = G^T x (summed over the leading axes),
    dL/db = G summed down to b's shape.

    Shapes: x (*, in_features), W (out_features, in_features), b (out_features,) or any
    shape that broadcasts to the output (*, out_features). A 1-D W (in_features,) gives
    y = x w of shape (*), with no bias, as in torch.

    Raises TypeError when the arguments do not share one dtype (torch refuses mixed dtypes;
    NumPy would silently compute float32 with float64 in float64) and ValueError for wrong
    ranks or shapes, each naming the arguments' shapes and dtypes
    (:func:`_check_linear`). Host data is wrapped as :func:`as_tensor_argument` does; a list or a
    number given as input or bias takes the weight's dtype.
    """
    if not _plain_linear_call(x, weight, bias):  # the checks, with their messages
        x, weight, bias = _check_linear(x, weight, bias)
    w_t = ops.Transpose.apply(weight, axes=(1, 0)) if weight.ndim == 2 else weight
    y = ops.MatMul.apply(x, w_t)  # (*, out_features); its backward is (BC6), (B1)
    return y if bias is None else y + bias


def _plain_linear_call(x: Any, weight: Any, bias: Any) -> bool:
    """True for the call :func:`_check_linear` would pass unchanged and that most calls are
    (tensors of one dtype, a 2-D weight matching the input, a bias of shape (out_features,)
    or None), tested in a few attribute reads: a recurrent layer calls linear at every step."""
    if not (isinstance(x, Tensor) and isinstance(weight, Tensor)):
        return False
    xd, wd = x._data, weight._data
    if wd.ndim != 2 or xd.ndim == 0 or xd.shape[-1] != wd.shape[1] or xd.dtype != wd.dtype:
        return False
    if bias is None:
        return True
    return (isinstance(bias, Tensor) and bias._data.dtype == wd.dtype
            and bias._data.shape == wd.shape[:1])


def _check_linear(x: Any, weight: Any, bias: Any) -> tuple:
    """(x, weight, bias) as Tensors, checked for :func:`linear` (see there)."""
    weight = as_tensor_argument("linear", "weight", weight)
    x = as_tensor_argument("linear", "input", x, weight.dtype)
    bias = None if bias is None else as_tensor_argument("linear", "bias", bias, weight.dtype)
    if weight.ndim not in (1, 2):
        raise ValueError(f"linear: weight must be 2-D (out_features, in_features) or 1-D "
                         f"(in_features,), got shape {weight.shape}")
    if x.ndim == 0 or x.shape[-1] != weight.shape[-1]:
        raise ValueError(
            f"linear: input of shape {x.shape} does not match weight of shape "
            f"{weight.shape} (the input's last dimension must be in_features = "
            f"{weight.shape[-1]})"
        )
    for name, t in (("input", x), ("bias", bias)):
        if t is not None and t.dtype != weight.dtype:
            fix = (f"weight.to(np.{t.dtype})" if weight.dtype.kind != "f" == t.dtype.kind
                   else f"{name}.to(np.{weight.dtype})")
            raise TypeError(
                f"linear: {name} dtype {t.dtype} does not match weight dtype {weight.dtype} "
                f"({name} shape {t.shape}, weight shape {weight.shape}); torch refuses mixed "
                f"dtypes: convert with {fix}"
            )
    if weight.ndim == 1 and bias is not None:
        raise ValueError(f"linear: a 1-D weight (in_features,) = {weight.shape} takes no bias "
                         f"(as in torch), got bias of shape {bias.shape}; add it afterwards")
    out_shape = x.shape[:-1] + weight.shape[:-1]
    if bias is not None and not _broadcasts_to(bias.shape, out_shape):
        raise ValueError(f"linear: bias of shape {bias.shape} does not broadcast to the output "
                         f"shape {out_shape} (input {x.shape}, weight {weight.shape}; a bias "
                         f"has shape (out_features,) = {weight.shape[:1]})")
    return x, weight, bias


def _broadcasts_to(shape: tuple, target: tuple) -> bool:
    """Whether an array of ``shape`` broadcasts to ``target`` without widening it."""
    return len(shape) <= len(target) and all(
        a in (1, b) for a, b in zip(reversed(shape), reversed(target)))


def embedding(input: Any, weight: Tensor, padding_idx: int | None = None) -> Tensor:
    """Row lookup ``weight[input]`` for integer ids of any shape; output shape
    input.shape + (E,). Ids outside [0, V) raise IndexError naming the id, its position and
    V. The gradient scatter-adds into the rows used; the ``padding_idx`` row gets none.
    ``padding_idx`` must be an integer in [-V, V) (negative counts from the end, as in
    torch), else a ValueError naming it and V."""
    ids = constant_data(input, weight, "embedding", "input (the ids)")
    check_integer_ids("embedding", ids)
    return ops.Embedding.apply(weight, ids=ids, padding_idx=padding_idx)


def dropout(x: Any, p: float = 0.5, training: bool = True, generator: Any = None) -> Tensor:
    """Inverted dropout: zero each entry with probability p and scale the rest by 1/(1-p).

    Math: y = x * m / (1 - p) with m ~ Bernoulli(1 - p) per entry; dL/dx = G * m / (1 - p).

    The mask is drawn from ``generator`` (a seed or numpy Generator; default: the
    generator reset by ``tr.manual_seed``). Identity when not training or p = 0.
    ``p`` must be a real number in [0, 1] (a 0-d array too; NaN, a bool or a string is an
    error) and ``training`` a bool (or the int 0 or 1, as the layers take flags): a string
    such as ``"no"`` would be truthy and drop (:func:`_check_dropout`).
    """
    x, p, rng = _check_dropout(x, p, training, generator)
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    keep = rng.random(x.shape) >= p  # drawn on the host: the same mask on every device
    xp = get_array_module(x._data)
    return ops.Dropout.apply(x, keep=xp.asarray(keep), p=p)


def _check_dropout(x: Any, p: Any, training: Any, generator: Any) -> tuple:
    """(x as a Tensor, p as a float, the generator) for :func:`dropout` (see there)."""
    p = check_unit_interval("dropout", "p", p)
    _validate.flag(training, "training", "dropout")
    if isinstance(generator, (bool, np.bool_)):
        raise TypeError(f"dropout: generator must be None, a seed (int) or a "
                        f"numpy.random.Generator, got {generator!r}")
    try:
        rng = get_generator(generator)
    except TypeError as err:
        raise TypeError(f"dropout: generator: {err}") from None
    return as_tensor_argument("dropout", "input", x), p, rng


def cross_entropy(input: Tensor, target: Any, weight: Any = None, ignore_index: int = -100,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy of logits against class ids (or class probabilities), fused with
    log-softmax: dL/dlogits = softmax(logits) - onehot(target) (per row, before reduction).

    Shapes, torch's layout exactly: input (N, C, d1, ..., dk) with class ids of shape
    (N, d1, ..., dk) (k >= 0; (N, C) with (N,) is k = 0), or an unbatched input (C,) with a
    0-d target; 'none' returns shape (N, d1, ..., dk). A float target of the input's shape
    is read as class probabilities (``ignore_index`` does not apply to it, as in torch).
    The classes are on axis 1: time-major logits (T, N, V) with targets (T, N) are not that
    layout; flatten them, ``F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))``
    (the error for such shapes says so). Only when N == V do those shapes fit torch's
    layout, and then they are read as torch reads them (C = N classes on axis 1).

    A target id outside [0, C) other than ``ignore_index`` raises IndexError naming the
    value, its position and C. 'mean' divides by the summed weights of the non-ignored
    targets: an empty batch gives NaN, as in torch; a batch whose targets are all ignored
    gives 0.0 with zero gradient (torch: NaN; a deliberate difference). ``ignore_index``
    must be an int and ``label_smoothing`` a number in [0, 1]. See
    :class:`tinygrad_rnn.ops.CrossEntropy` for the full formula with weights and label
    smoothing; without those options and ignored targets the textbook op
    :class:`tinygrad_rnn.ops.PlainCrossEntropy` (backward p - e_y) computes the same bits.
    """
    input = as_tensor_argument("cross_entropy", "input", input)
    ignore_index = check_ignore_index("cross_entropy", ignore_index)
    weight = constant_data(weight, input, "cross_entropy", "weight")
    probabilities = _probabilities(target, input)
    if probabilities is not None:
        return ops.SoftCrossEntropy.apply(input, target_on_device(probabilities, input),
                                          weight=weight, reduction=reduction,
                                          label_smoothing=label_smoothing)
    ids = constant_data(target, input, "cross_entropy", "target")
    if takes_plain_path(ids, weight, ignore_index, label_smoothing):  # p - e_y (SM10)
        return ops.PlainCrossEntropy.apply(input, target=ids, reduction=reduction,
                                           ignore_index=ignore_index)
    return ops.CrossEntropy.apply(input, target=ids, weight=weight, ignore_index=ignore_index,
                                  reduction=reduction, label_smoothing=label_smoothing)


def _probabilities(target: Any, input: Tensor) -> Any:
    """``target`` when it holds class probabilities, torch's second target form: floats of
    ``input``'s shape (a list of floats becomes an array of the input's dtype, as a number
    beside a tensor takes the tensor's dtype); None for anything else (class ids)."""
    if not hasattr(target, "dtype"):
        try:
            values = np.asarray(target)
        except (TypeError, ValueError):  # ragged lists: left to the class-id checks
            return None
        if values.dtype.kind != "f" or values.shape != input.shape:
            return None
        return values.astype(input.dtype if input.dtype.kind == "f" else values.dtype)
    fits = target.dtype.kind == "f" and tuple(target.shape) == input.shape
    return target if fits else None


def nll_loss(input: Tensor, target: Any, weight: Any = None, ignore_index: int = -100,
             reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of log-probabilities: -input[i, target[i]] (weighted).

    Layout, weights, ``ignore_index`` and 'mean' (NaN over an empty batch, 0.0 when every
    target is ignored) as in :func:`cross_entropy`; see :class:`tinygrad_rnn.ops.NLLLoss`.
    """
    input = as_tensor_argument("nll_loss", "input", input)
    return ops.NLLLoss.apply(input, target=constant_data(target, input, "nll_loss", "target"),
                             weight=constant_data(weight, input, "nll_loss", "weight"),
                             ignore_index=ignore_index, reduction=reduction)


def mse_loss(input: Tensor, target: Any, reduction: str = "mean") -> Tensor:
    """Mean squared error; dL/dinput = 2 (input - target) / n for 'mean'."""
    return ops.MSELoss.apply(input, target_on_device(target, input), reduction=reduction)


def binary_cross_entropy(input: Tensor, target: Any, weight: Any = None,
                         reduction: str = "mean") -> Tensor:
    """Binary cross entropy of probabilities ``input`` in [0, 1] against ``target`` in
    [0, 1], as torch's: -w [t log x + (1 - t) log(1 - x)] with each log clamped at -100.

    dL/dx = w (x - t) / max(x (1 - x), 1e-12) per element (before reduction); see
    :class:`tinygrad_rnn.ops.losses.BinaryCrossEntropy` for the floors and the target's
    gradient. Input and target must have the same shape; values outside [0, 1] (or NaN)
    are a ValueError, as in torch. On logits prefer
    :func:`binary_cross_entropy_with_logits`, which never saturates.
    """
    op = "binary_cross_entropy"
    input = as_tensor_argument(op, "input", input)
    return BinaryCrossEntropy.apply(input, target_on_device(target, input),
                                    weight=constant_data(weight, input, op, "weight"),
                                    reduction=reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Any, weight: Any = None,
                                     reduction: str = "mean",
                                     pos_weight: Any = None) -> Tensor:
    """Binary cross entropy on logits, overflow-free; dL/dx = sigmoid(x) - t (no weights)."""
    op = "binary_cross_entropy_with_logits"
    return ops.BCEWithLogits.apply(input, target_on_device(target, input),
                                   weight=constant_data(weight, input, op, "weight"),
                                   pos_weight=constant_data(pos_weight, input, op, "pos_weight"),
                                   reduction=reduction)


def masked_fill(x: Tensor, mask: Any, value: float) -> Tensor:
    """x with entries where mask is True set to ``value``; those get zero gradient.

    ``value`` is one real number (Python or NumPy, a 0-d array, or a 0-d Tensor that needs
    no gradient; -inf and NaN are allowed, -inf is the usual attention mask); anything else
    is a TypeError (:func:`_fill_value`)."""
    value = _fill_value("masked_fill", value)
    return ops.MaskedFill.apply(x, mask=constant_data(mask, x, "masked_fill", "mask"), value=value)


def _fill_value(op: str, value: Any) -> Any:
    """``value`` for ``op`` as one real number (a scalar or the raw 0-d array); a TypeError
    naming ``op`` for None, a string, an array with more dimensions or a Tensor that requires
    a gradient (no gradient reaches ``value``: ``tr.where(mask, value, x)`` gives one)."""
    if isinstance(value, Tensor) and value.requires_grad:
        raise TypeError(f"{op}: value is a Tensor that requires a gradient, which {op} does "
                        f"not give it; use tr.where(mask, value, x) instead")
    raw = value._data if isinstance(value, Tensor) else value
    dtype = getattr(raw, "dtype", None)
    if dtype is None:
        ok = isinstance(raw, numbers.Real)
    else:  # a NumPy scalar or an array
        ok = getattr(raw, "ndim", 0) == 0 and dtype.kind in "biuf"
    if not ok:
        raise TypeError(f"{op}: value must be one real number, got {type(value).__name__} "
                        f"{value!r} (for elementwise values use tr.where(mask, values, x))")
    return raw
