"""Loss modules with ``torch.nn``'s names, constructor arguments and ``forward(input,
target)``; each calls its function in :mod:`tinygrad_rnn.nn.functional`, where the math
and the gradient are documented (docs/softmax.md derives them).

As in torch, class weights (``weight``) and ``pos_weight`` are buffers: they follow
``.to(device/dtype)`` and appear in ``state_dict`` when given. The options are checked
when the loss is built, so a wrong ``reduction`` or ``ignore_index`` fails at the line
that made it, naming the class and the argument. The deprecated ``size_average`` and
``reduce`` flags are mapped to ``reduction`` as torch maps them.

Example
-------
>>> import numpy as np
>>> import tinygrad_rnn as tr
>>> loss_fn = tr.nn.CrossEntropyLoss()
>>> logits = tr.tensor(np.zeros((2, 3)), requires_grad=True)
>>> round(loss_fn(logits, np.array([0, 2])).item(), 6)
1.098612
"""
from __future__ import annotations

from typing import Any

from ..ops.losses import REDUCTIONS, check_ignore_index, check_unit_interval
from ..tensor import Tensor
from . import functional as F
from .module import Module

__all__ = ["CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "BCELoss", "BCEWithLogitsLoss"]


def _module_reduction(owner: str, size_average: Any, reduce: Any, reduction: Any) -> str:
    """The reduction a loss module uses: torch's mapping of the deprecated flags
    (:func:`tinygrad_rnn.nn.functional.legacy_reduction`), then checked to be 'none', 'mean' or
    'sum' (a ValueError naming ``owner`` and ``reduction``)."""
    reduction = F.legacy_reduction(owner, size_average, reduce, reduction)
    if not isinstance(reduction, str) or reduction not in REDUCTIONS:
        raise ValueError(f"{owner}: reduction must be one of {REDUCTIONS}, got {reduction!r}")
    return reduction


class _Loss(Module):
    """Holds ``reduction`` and the optional buffers; subclasses implement forward."""

    def __init__(self, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = _module_reduction(type(self).__name__, size_average, reduce, reduction)

    def _buffer(self, name: str, value: Any) -> None:
        """Register ``value`` (None, a Tensor or host data) as the buffer ``name``."""
        if value is not None and not isinstance(value, Tensor):
            try:
                value = Tensor(value)
            except (TypeError, ValueError) as err:
                raise TypeError(f"{type(self).__name__}: {name} must be None or a Tensor of "
                                f"numbers, got {type(value).__name__} ({err})") from None
        self.register_buffer(name, value)

    def extra_repr(self) -> str:
        return "" if self.reduction == "mean" else f"reduction={self.reduction!r}"


class CrossEntropyLoss(_Loss):
    """Cross entropy of logits with class ids or class probabilities, fused with
    log-softmax: dL/dlogits = softmax - onehot per row (``F.cross_entropy``).

    Parameters
    ----------
    weight : Tensor (C,), optional
        Class weights (a buffer).
    ignore_index : int
        Targets equal to it contribute nothing (default -100).
    reduction : {'mean', 'sum', 'none'}
    label_smoothing : float in [0, 1]

    Notes
    -----
    Shapes: input (N, C, d1, ...) with targets (N, d1, ...), or (C,) with a 0-d target;
    sequence logits (T, N, V) are flattened to (T * N, V) first (the error says so).
    """

    def __init__(self, weight: Any = None, size_average: Any = None, ignore_index: int = -100,
                 reduce: Any = None, reduction: str = "mean",
                 label_smoothing: float = 0.0) -> None:
        super().__init__(size_average, reduce, reduction)
        name = "CrossEntropyLoss"
        self.ignore_index = check_ignore_index(name, ignore_index)
        self.label_smoothing = check_unit_interval(name, "label_smoothing", label_smoothing)
        self._buffer("weight", weight)

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.cross_entropy(input, target, weight=self.weight,
                               ignore_index=self.ignore_index, reduction=self.reduction,
                               label_smoothing=self.label_smoothing)


class NLLLoss(_Loss):
    """Negative log-likelihood of log-probabilities (e.g. the output of
    :class:`~tinygrad_rnn.nn.LogSoftmax`): -w_y x_y per row (``F.nll_loss``). Arguments
    and shapes as :class:`CrossEntropyLoss`, without label smoothing."""

    def __init__(self, weight: Any = None, size_average: Any = None, ignore_index: int = -100,
                 reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.ignore_index = check_ignore_index("NLLLoss", ignore_index)
        self._buffer("weight", weight)

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class MSELoss(_Loss):
    """Squared error (x - t)^2, reduced (``F.mse_loss``); input and target of one shape."""

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """Absolute error |x - t|, reduced (``F.l1_loss``); input and target of one shape."""

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.l1_loss(input, target, reduction=self.reduction)


class BCELoss(_Loss):
    """Binary cross entropy of probabilities in [0, 1] (``F.binary_cross_entropy``):
    -w [t log x + (1 - t) log(1 - x)], each log clamped at -100 as in torch. ``weight``
    (a buffer) multiplies each element and must broadcast to the input's shape."""

    def __init__(self, weight: Any = None, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self._buffer("weight", weight)

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.binary_cross_entropy(input, target, weight=self.weight,
                                      reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross entropy on logits, overflow-free
    (``F.binary_cross_entropy_with_logits``); ``weight`` scales each element and
    ``pos_weight`` the positive term (both buffers, broadcasting to the input's shape)."""

    def __init__(self, weight: Any = None, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean", pos_weight: Any = None) -> None:
        super().__init__(size_average, reduce, reduction)
        self._buffer("weight", weight)
        self._buffer("pos_weight", pos_weight)

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.binary_cross_entropy_with_logits(input, target, weight=self.weight,
                                                  reduction=self.reduction,
                                                  pos_weight=self.pos_weight)
