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

from typing import Any

from . import ops
from .backend import get_array_module
from .random import get_generator
from .tensor import Tensor, _constant, cat, split, stack, where  # noqa: F401  (re-exported)

__all__ = [
    "relu", "tanh", "sigmoid", "softmax", "log_softmax", "exp", "log", "sqrt", "abs",
    "maximum", "minimum", "clip", "matmul", "linear", "embedding", "dropout",
    "cross_entropy", "nll_loss", "mse_loss", "binary_cross_entropy_with_logits",
    "masked_fill", "where", "cat", "stack", "split",
]


def _target(target: Any, input: Any) -> Any:
    """A target that is an input of the op (mse_loss, binary cross entropy, probability
    targets): host data is copied to ``input``'s device; a Tensor is passed on as it is (the
    op checks that its inputs share a device)."""
    if isinstance(target, Tensor) or not isinstance(input, Tensor) or input.device == "cpu":
        return target
    return Tensor(target, device=input.device)


def _axis(axis: Any, dim: Any, default: Any = -1) -> Any:
    if dim is not None:
        if axis is not None:
            raise TypeError("give axis or dim, not both")
        return dim
    return default if axis is None else axis


def relu(x: Tensor) -> Tensor:
    """max(x, 0). Derivative 1[x > 0] (0 at x = 0). Jacobian: ``tr.jacobians.relu``."""
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
    return ops.Softmax.apply(x, axis=_axis(axis, dim), mask=_constant(mask, x, "softmax", "mask"))


def log_softmax(x: Tensor, axis: int | None = None, mask: Any = None, *,
                dim: int | None = None) -> Tensor:
    """log(softmax(x)) along ``axis`` in the log-sum-exp form.

    Math: y = x - logsumexp(x); Jacobian J = I - 1 p^T with p = softmax(x); VJP
    g - p * sum(g). Masked entries (mask False; the mask must be boolean, as for
    :func:`softmax`) are -inf with gradient 0.
    """
    return ops.LogSoftmax.apply(x, axis=_axis(axis, dim),
                                mask=_constant(mask, x, "log_softmax", "mask"))


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


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y = x W^T + b with W of shape (out_features, in_features), as torch's F.linear."""
    if weight.ndim != 2:
        raise ValueError(f"linear: weight must be 2-D, got shape {weight.shape}")
    if x.shape[-1:] != weight.shape[1:]:
        raise ValueError(
            f"linear: input of shape {x.shape} does not match weight of shape "
            f"{weight.shape} (input's last dimension must be {weight.shape[1]})"
        )
    y = ops.MatMul.apply(x, ops.Transpose.apply(weight, axes=(1, 0)))
    return y if bias is None else y + bias


def embedding(input: Any, weight: Tensor, padding_idx: int | None = None) -> Tensor:
    """Row lookup ``weight[input]`` for integer ids of any shape; output shape
    input.shape + (E,). Ids outside [0, V) raise IndexError naming the id, its position and
    V. The gradient scatter-adds into the rows used; the ``padding_idx`` row gets none.
    ``padding_idx`` must be an integer in [-V, V) (negative counts from the end, as in
    torch), else a ValueError naming it and V."""
    ids = _constant(input, weight, "embedding", "input (the ids)")
    return ops.Embedding.apply(weight, ids=ids, padding_idx=padding_idx)


def dropout(x: Tensor, p: float = 0.5, training: bool = True, generator: Any = None) -> Tensor:
    """Inverted dropout: zero each entry with probability p and scale the rest by 1/(1-p).

    The mask is drawn from ``generator`` (a seed or numpy Generator; default: the
    generator reset by ``tr.manual_seed``). Identity when not training or p = 0.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    rng = get_generator(generator)
    keep = rng.random(x.shape) >= p  # drawn on the host: the same mask on every device
    xp = get_array_module(x.data)
    return ops.Dropout.apply(x, keep=xp.asarray(keep), p=p)


def cross_entropy(input: Tensor, target: Any, weight: Any = None, ignore_index: int = -100,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy of logits against class ids (or class probabilities), fused with
    log-softmax: dL/dlogits = softmax(logits) - onehot(target) (per row, before reduction).

    Shapes: input (N, C) with target (N,); (N, C, d1, ...) with (N, d1, ...); (C,) with ().
    A float target of the input's shape is read as class probabilities. A target id outside
    [0, C) other than ``ignore_index`` raises IndexError naming the value, its position and C.
    See :class:`tinygrad_rnn.ops.CrossEntropy` for the full formula with weights and label
    smoothing.
    """
    weight = _constant(weight, input, "cross_entropy", "weight")
    dtype = getattr(target, "dtype", None)
    if dtype is not None and dtype.kind == "f" and tuple(target.shape) == input.shape:
        return ops.SoftCrossEntropy.apply(input, _target(target, input), weight=weight,
                                          reduction=reduction, label_smoothing=label_smoothing)
    ids = _constant(target, input, "cross_entropy", "target")
    return ops.CrossEntropy.apply(input, target=ids, weight=weight, ignore_index=ignore_index,
                                  reduction=reduction, label_smoothing=label_smoothing)


def nll_loss(input: Tensor, target: Any, weight: Any = None, ignore_index: int = -100,
             reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of log-probabilities: -input[i, target[i]] (weighted)."""
    return ops.NLLLoss.apply(input, target=_constant(target, input, "nll_loss", "target"),
                             weight=_constant(weight, input, "nll_loss", "weight"),
                             ignore_index=ignore_index, reduction=reduction)


def mse_loss(input: Tensor, target: Any, reduction: str = "mean") -> Tensor:
    """Mean squared error; dL/dinput = 2 (input - target) / n for 'mean'."""
    return ops.MSELoss.apply(input, _target(target, input), reduction=reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Any, weight: Any = None,
                                     reduction: str = "mean",
                                     pos_weight: Any = None) -> Tensor:
    """Binary cross entropy on logits, overflow-free; dL/dx = sigmoid(x) - t (no weights)."""
    op = "binary_cross_entropy_with_logits"
    return ops.BCEWithLogits.apply(input, _target(target, input),
                                   weight=_constant(weight, input, op, "weight"),
                                   pos_weight=_constant(pos_weight, input, op, "pos_weight"),
                                   reduction=reduction)


def masked_fill(x: Tensor, mask: Any, value: float) -> Tensor:
    """x with entries where mask is True set to ``value``; those get zero gradient."""
    return ops.MaskedFill.apply(x, mask=_constant(mask, x, "masked_fill", "mask"), value=value)
