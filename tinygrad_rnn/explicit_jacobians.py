"""Explicit Jacobian matrices, for study and for checking the hand-written VJPs
(``tr.explicit_jacobians``; named apart from the function ``tr.jacobian`` below).

Each function takes the quantity the derivative is written in (the op's *output* for
softmax, log_softmax, tanh and sigmoid; relu's output works since y > 0 exactly where x > 0),
an array with at least one axis (a 0-d scalar is refused: wrap it as ``y.reshape(1)``),
and returns, for the last axis of size n, an array of shape ``(..., n, n)`` with
``J[..., i, j] = dy_i / dx_j``. The ops' backward passes never build these matrices: the
tests prove ``backward(g) == J^T g`` for each.

:func:`jacobian` (``tr.jacobian``, as torch's ``torch.autograd.functional.jacobian``) builds
the full Jacobian of any function by reverse mode, one row per output element.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from .backend import get_array_module
from .gradcheck import grads_preserved
from .dtypes import array_of
from .tensor import Tensor

__all__ = ["softmax", "log_softmax", "tanh", "sigmoid", "relu", "layer_norm", "jacobian"]


def _raw(y: Any, where: str = "explicit_jacobians", name: str = "y") -> Any:
    """The array of a Tensor; arrays stay on their device; lists become NumPy arrays. A
    TypeError naming ``where`` and ``name`` unless it holds real numbers (a string, an
    object array, a complex array)."""
    return array_of(y, where, name)


def _last_axis(y: Any, name: str) -> Any:
    """The array of ``y``, which needs a last axis to take the Jacobian along."""
    y = _raw(y, f"explicit_jacobians.{name}")
    if y.ndim == 0:
        raise ValueError(
            f"explicit_jacobians.{name}: y is 0-d (a scalar), but the Jacobian is taken along "
            f"the last axis; pass an array of shape (..., n), e.g. y.reshape(1) for one value"
        )
    return y


def _diag(d: Any) -> Any:
    """(..., n) -> (..., n, n) with d on the diagonal."""
    xp = get_array_module(d)
    n = d.shape[-1]
    return d[..., :, None] * xp.eye(n, dtype=d.dtype)  # (AC1) J = diag(phi'(x))


def softmax(y: Any) -> Any:
    """Jacobian of y = softmax(x) along the last axis: J = diag(y) - y y^T.

    Derivation: y_i = e^{x_i} / S with S = sum_k e^{x_k}, so
    dy_i/dx_j = [i = j] e^{x_i} / S - e^{x_i} e^{x_j} / S^2 = y_i ([i = j] - y_j).
    J is symmetric, each row sums to 0 (softmax ignores a constant added to x), and it is
    unchanged by adding a constant to the logits since y is.
    """
    y = _last_axis(y, "softmax")
    return _diag(y) - y[..., :, None] * y[..., None, :]  # (SM4), (A8)


def log_softmax(y: Any) -> Any:
    """Jacobian of y = log_softmax(x): J = I - 1 p^T, p = exp(y) = softmax(x).

    Derivation: y_i = x_i - log S, dy_i/dx_j = [i = j] - e^{x_j} / S = [i = j] - p_j.
    """
    y = _last_axis(y, "log_softmax")
    xp = get_array_module(y)
    p = xp.exp(y)
    n = y.shape[-1]
    return xp.eye(n, dtype=y.dtype) - xp.ones_like(y)[..., :, None] * p[..., None, :]  # (SM7)


def tanh(y: Any) -> Any:
    """Jacobian of y = tanh(x) (elementwise): diag(1 - y^2)."""
    y = _last_axis(y, "tanh")
    return _diag(1 - y * y)


def sigmoid(y: Any) -> Any:
    """Jacobian of y = sigmoid(x) (elementwise): diag(y (1 - y))."""
    y = _last_axis(y, "sigmoid")
    return _diag(y * (1 - y))


def relu(y: Any) -> Any:
    """Jacobian of y = relu(x) (elementwise): diag(1[y > 0]) (0 at the kink x = 0)."""
    y = _last_axis(y, "relu")
    return _diag((y > 0).astype(y.dtype))


def layer_norm(x: Any, eps: float = 1e-5, weight: Any = None) -> Any:
    """Jacobian of y = layer_norm(x) * weight over the last axis (docs/layernorm.md, (LN7)).

    Unlike the elementwise builders above this one takes the *input* ``x`` (shape (..., M)):
    the derivative is written in x_hat = (x - mu) / sigma and sigma = sqrt(var + eps), which
    the output alone does not give back (the scale sigma is lost). For a layer normalized
    over several trailing axes, reshape those to one axis of M entries first.

    Derivation: dmu/dx_j = 1/M and dsigma/dx_j = (x_j - mu) / (M sigma) = x_hat_j / M, so
    dx_hat_i/dx_j = ([i = j] - 1/M) / sigma - (x_i - mu) x_hat_j / (M sigma^2), that is

        J = (I - 1 1^T / M - x_hat x_hat^T / M) / sigma,

    symmetric, with J 1 = 0 (a constant added to a row changes nothing) and J x_hat = 0
    (neither does scaling the centred row, up to eps). With ``weight`` (shape (M,)) the
    rows are scaled: dy/dx = diag(weight) J. The bias adds a constant and does not appear.
    """
    x = _raw(x, "explicit_jacobians.layer_norm", "x")
    if x.ndim == 0:
        raise ValueError("explicit_jacobians.layer_norm: x is 0-d (a scalar), but the rows are "
                         "normalized along the last axis; pass an array of shape (..., M), "
                         "e.g. x.reshape(1) for one value")
    if x.dtype.kind != "f":
        x = x.astype(float)
    xp = get_array_module(x)
    n = x.shape[-1]
    mu = x.mean(axis=-1, keepdims=True)
    sigma = xp.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + eps)
    x_hat = (x - mu) / sigma
    eye = xp.eye(n, dtype=x.dtype)
    # (LN6) dmu/dx_j = 1/M, dsigma/dx_j = x_hat_j / M, put into dx_hat_i/dx_j: (LN7)
    jac = (eye - 1.0 / n - x_hat[..., :, None] * x_hat[..., None, :] / n) / sigma[..., None]
    if weight is not None:
        w = _raw(weight, "explicit_jacobians.layer_norm", "weight")
        if w.shape != (n,):
            raise ValueError(f"explicit_jacobians.layer_norm: weight must have shape ({n},) to "
                             f"match the last axis of x (shape {x.shape}), got {w.shape}")
        jac = w[:, None] * jac
    return jac


def jacobian(fn: Callable[..., Tensor], inputs: Any) -> Any:
    """The full Jacobian of ``fn`` at ``inputs`` by reverse mode, row by row.

    ``inputs`` is a Tensor/array or a sequence of them. For output y and input x the result
    has shape ``y.shape + x.shape`` with entry ``[i..., j...] = dy_i / dx_j``; for a sequence
    of inputs a tuple with one such array per input, on the inputs' device. The inputs are
    copied, so the caller's tensors and their ``.grad`` are untouched; tensors that ``fn``
    captures (a module's parameters) get their ``.grad`` back after the backward passes.
    """
    if not callable(fn):
        raise TypeError(f"jacobian: fn must be a callable returning a Tensor, got "
                        f"{type(fn).__name__}")
    single = not isinstance(inputs, (list, tuple))
    seq: Sequence[Any] = (inputs,) if single else tuple(inputs)
    leaves = [Tensor(_raw(x, "jacobian", "inputs"), requires_grad=True) for x in seq]
    y = fn(*leaves)
    if not isinstance(y, Tensor):
        raise TypeError(f"jacobian: fn must return a Tensor, got {type(y).__name__}")
    xp = get_array_module(y._data)
    out = [xp.zeros((y.numel(),) + x.shape, dtype=x.dtype) for x in leaves]
    if y.requires_grad:
        with grads_preserved([y]):  # tensors fn captures (parameters) keep their .grad
            for i in range(y.numel()):
                for x in leaves:
                    x.grad = None
                onehot = xp.zeros(y.numel(), dtype=y.dtype)
                onehot[i] = 1
                y.backward(onehot.reshape(y.shape), retain_graph=True)
                for k, x in enumerate(leaves):
                    if x._grad is not None:
                        out[k][i] = x._grad
    result = tuple(o.reshape(y.shape + x.shape) for o, x in zip(out, leaves))
    return result[0] if single else result
