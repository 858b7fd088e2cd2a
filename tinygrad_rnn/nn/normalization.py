"""Normalization layers, as ``torch.nn``'s: :class:`LayerNorm`."""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import _validate
from ..tensor import Tensor
from . import functional as F
from . import init
from ._checks import float_dtype
from .layers import as_input, place
from .module import Module, Parameter

__all__ = ["LayerNorm"]


class LayerNorm(Module):
    """Layer normalization over the last ``len(normalized_shape)`` dimensions, as
    ``torch.nn.LayerNorm``.

    Parameters
    ----------
    normalized_shape : int or tuple of int
        The trailing shape normalized over (an int means one dimension of that size).
    eps : float
        Added to the variance inside the square root (default 1e-5).
    elementwise_affine : bool
        Learn ``weight`` (and, with ``bias``, ``bias``) of shape ``normalized_shape``
        (default True); without it both are None.
    bias : bool
        Learn the additive ``bias`` when ``elementwise_affine`` (default True).
    device, dtype
        As for :class:`~tinygrad_rnn.nn.Linear` (dtype None means the default dtype).

    Attributes
    ----------
    weight : Parameter of shape normalized_shape, or None
        Initialised to ones, as in torch.
    bias : Parameter of shape normalized_shape, or None
        Initialised to zeros, as in torch.

    Math
    ----
    Per row x of M = prod(normalized_shape) entries (docs/layernorm.md, (LN1)-(LN5)):
    y = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias, with the biased variance
    var(x) = mean((x - mean(x))^2). The backward pass is (LN8)-(LN10) of that page.

    Shapes
    ------
    input (*, *normalized_shape) -> output of the same shape.

    Examples
    --------
    >>> import numpy as np
    >>> import tinygrad_rnn as tr
    >>> norm = tr.nn.LayerNorm(3, dtype=np.float64)
    >>> y = norm(tr.tensor(np.array([[1.0, 2.0, 3.0]])))
    >>> bool(abs(y.mean().item()) < 1e-12)
    True
    >>> sorted(norm.state_dict())
    ['bias', 'weight']
    """

    def __init__(self, normalized_shape: Any, eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.normalized_shape = F.normalized_shape_tuple("LayerNorm", normalized_shape)
        self.eps = _validate.finite_real(eps, "eps", "LayerNorm")
        if self.eps < 0:
            raise ValueError(f"LayerNorm: eps must be >= 0, got {eps!r}")
        self.elementwise_affine = _validate.flag(elementwise_affine, "elementwise_affine",
                                                 "LayerNorm")
        bias = _validate.flag(bias, "bias", "LayerNorm")
        dt = float_dtype(dtype, "LayerNorm")
        if self.elementwise_affine:
            self.weight = Parameter(np.ones(self.normalized_shape, dtype=dt))
            if bias:
                self.bias = Parameter(np.zeros(self.normalized_shape, dtype=dt))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        place(self, device)

    def reset_parameters(self) -> None:
        """weight to ones and bias to zeros (torch's initialisation)."""
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        x = as_input(input, "input", "LayerNorm")
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")
