"""Activation and reshaping modules with ``torch.nn``'s names, arguments and reprs.

Each forwards to :mod:`tinygrad_rnn.nn.functional`, where the math and the gradient are
documented; the modules only hold their options, checked when built (an error names the
class and the argument). ``Tanh``, ``ReLU``, ``Sigmoid`` and ``Identity`` live in
:mod:`tinygrad_rnn.nn.layers`.
"""
from __future__ import annotations

import math
from typing import Any

from .. import _validate
from ..tensor import Tensor
from . import functional as F
from .module import Module

__all__ = [
    "Softmax", "LogSoftmax", "GELU", "LeakyReLU", "Softplus", "LogSigmoid", "ELU", "SiLU",
    "Flatten", "Unflatten",
]


def _optional_dim(owner: str, dim: Any) -> int | None:
    """``dim`` as an int or None (checked again, with the reason, when forward runs)."""
    return None if dim is None else _validate.integer(dim, "dim", owner)


class Softmax(Module):
    """Softmax along ``dim``: y_i = exp(x_i) / sum_j exp(x_j) (``F.softmax``).

    ``dim`` is required when the module is called (torch guesses one with a warning; here
    the call raises and says so)."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = _optional_dim("Softmax", dim)

    def forward(self, input: Tensor) -> Tensor:
        return F.softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """log softmax along ``dim`` in the log-sum-exp form (``F.log_softmax``); ``dim`` is
    required when the module is called."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = _optional_dim("LogSoftmax", dim)

    def forward(self, input: Tensor) -> Tensor:
        return F.log_softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class GELU(Module):
    """x Phi(x), exact (``approximate='none'``) or torch's tanh form (``'tanh'``)."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got "
                             f"{approximate!r}")
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class LeakyReLU(Module):
    """x for x > 0, ``negative_slope`` x otherwise (``F.leaky_relu``)."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = _validate.finite_real(negative_slope, "negative_slope", "LeakyReLU")
        self.inplace = _validate.flag(inplace, "inplace", "LeakyReLU")

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (
            ", inplace=True" if self.inplace else "")


class Softplus(Module):
    """log(1 + exp(beta x)) / beta, x above ``threshold`` (``F.softplus``)."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = _validate.finite_real(beta, "beta", "Softplus")
        self.threshold = _validate.finite_real(threshold, "threshold", "Softplus")

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class LogSigmoid(Module):
    """log sigmoid(x), overflow-free (``F.logsigmoid``)."""

    def forward(self, input: Tensor) -> Tensor:
        return F.logsigmoid(input)


class ELU(Module):
    """x for x > 0, alpha (exp(x) - 1) otherwise (``F.elu``)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = _validate.finite_real(alpha, "alpha", "ELU")
        self.inplace = _validate.flag(inplace, "inplace", "ELU")

    def forward(self, input: Tensor) -> Tensor:
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class SiLU(Module):
    """x sigmoid(x) (``F.silu``)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = _validate.flag(inplace, "inplace", "SiLU")

    def forward(self, input: Tensor) -> Tensor:
        return F.silu(input, self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Flatten(Module):
    """Merge dimensions ``start_dim`` .. ``end_dim`` (inclusive, negative counts from the
    end) into one, as ``torch.nn.Flatten``: (N, C, L) -> (N, C * L) by default. A
    reshape, so the gradient is reshaped back."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = _validate.integer(start_dim, "start_dim", "Flatten")
        self.end_dim = _validate.integer(end_dim, "end_dim", "Flatten")

    def forward(self, input: Tensor) -> Tensor:
        shape = tuple(input.shape)
        ndim = max(len(shape), 1)
        start, end = self.start_dim, self.end_dim
        for name, value in (("start_dim", start), ("end_dim", end)):
            if not -ndim <= value < ndim:
                raise IndexError(f"Flatten: {name}={value} is out of range for an input of "
                                 f"shape {shape}")
        start, end = start % ndim, end % ndim
        if start > end:
            raise ValueError(f"Flatten: start_dim ({self.start_dim}) comes after end_dim "
                             f"({self.end_dim}) for an input of shape {shape}")
        if not shape:
            return input.reshape(1)
        merged = math.prod(shape[start:end + 1])
        return input.reshape(shape[:start] + (merged,) + shape[end + 1:])

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dimension ``dim`` into ``unflattened_size`` (a tuple of ints, one may be -1),
    as ``torch.nn.Unflatten``."""

    def __init__(self, dim: int, unflattened_size: Any) -> None:
        super().__init__()
        self.dim = _validate.integer(dim, "dim", "Unflatten")
        if not isinstance(unflattened_size, (tuple, list)) or not unflattened_size:
            raise TypeError(f"Unflatten: unflattened_size must be a non-empty tuple of ints, "
                            f"got {unflattened_size!r}")
        self.unflattened_size = tuple(_validate.integer(n, "unflattened_size", "Unflatten")
                                      for n in unflattened_size)

    def forward(self, input: Tensor) -> Tensor:
        shape = tuple(input.shape)
        if not -len(shape) <= self.dim < len(shape):
            raise IndexError(f"Unflatten: dim={self.dim} is out of range for an input of "
                             f"shape {shape}")
        d = self.dim % len(shape)
        return input.reshape(shape[:d] + self.unflattened_size + shape[d + 1:])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
