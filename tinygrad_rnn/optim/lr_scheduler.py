"""Learning-rate schedules, with torch.optim.lr_scheduler's semantics.

A scheduler changes ``group['lr']`` of its optimizer's parameter groups. Call
``scheduler.step()`` once per epoch (or per iteration), *after* ``optimizer.step()``::

    opt = SGD(params, lr=0.1)
    sched = StepLR(opt, step_size=30, gamma=0.1)
    for epoch in range(100):
        train_one_epoch(opt)          # calls opt.step()
        sched.step()

Counting, as in torch: creating the scheduler performs an initial step, which sets
``last_epoch`` to 0 and leaves the learning rates at their initial values; the k-th call of
``step()`` then sets ``last_epoch = k`` and the learning rate for epoch k.

The schedules are computed recursively from the current ``group['lr']`` (the "chainable"
form torch uses), so they compose with other changes to the learning rate; each class also
has the closed form, used by the deprecated ``step(epoch)``.

Why one module of about 780 lines: ``torch.optim.lr_scheduler``'s schedules, which share the
base class's stepping, ``last_epoch`` and ``state_dict`` rules.
"""
from __future__ import annotations

import bisect
import math
import numbers
import types
import warnings
from collections import Counter
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from .optimizer import Optimizer

__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
           "LambdaLR", "ReduceLROnPlateau"]


def _check_int(where: str, name: str, value: Any, minimum: int) -> None:
    """TypeError unless ``value`` is an int (Python or NumPy; not a bool, not a float),
    ValueError when it is below ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{where}: {name} must be an int, got {type(value).__name__} "
                        f"{value!r}")
    if value < minimum:
        raise ValueError(f"{where}: invalid {name}: {value} (must be >= {minimum})")


def whole_number(where: str, name: str, value: Any, minimum: int) -> int:
    """``value`` as a Python int when it is an int (Python or NumPy) or a float that is exactly
    a whole number (``2.0``, ``np.ceil(7 / 2)``; torch accepts these too); a TypeError for
    anything else (bools and strings included), a ValueError for a float with a fractional
    part (``2.5`` is never rounded) or a value below ``minimum``."""
    if not _is_real(value):
        raise TypeError(f"{where}: {name} must be an int, got {type(value).__name__} "
                        f"{value!r}")
    if not isinstance(value, (int, np.integer)):
        if not (math.isfinite(value) and float(value).is_integer()):
            raise ValueError(f"{where}: invalid {name}: {value!r} (must be a whole number; "
                             f"a float is accepted only when it is exactly an integer)")
    if value < minimum:
        raise ValueError(f"{where}: invalid {name}: {value} (must be >= {minimum})")
    return int(value)


def _is_real(value: Any) -> bool:
    """A real number (int or float, Python or NumPy), not a bool. (A function rather than
    the isinstance test inline, so a type checker keeps the value's type: numbers.Real
    declares no arithmetic.)"""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _scalar(value: Any) -> Any:
    """A 0-d NumPy array of reals as its scalar (``gamma=np.array(0.5)``); anything else as
    it is."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
        return value[()]
    return value


def _check_positive(where: str, name: str, value: Any) -> float:
    """``value`` when it is a real number (int or float, Python or NumPy, or a 0-d array of
    one; not a bool), finite and > 0; a TypeError or ValueError naming ``where`` and ``name``
    otherwise."""
    value = _scalar(value)
    if not _is_real(value):
        raise TypeError(f"{where}: {name} must be a real number, got {type(value).__name__} "
                        f"{value!r}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{where}: invalid {name}: {value} (must be finite and > 0)")
    return value


def _check_factor(where: str, name: str, value: Any) -> float:
    """``value`` as a Python float: TypeError unless it is a real number (or a 0-d array of
    one; not a bool), ValueError unless it is finite and >= 0 (a negative factor or floor
    would make the learning rate negative). A Python float keeps the learning rates Python
    floats (a NumPy float32 factor would turn them into float32 scalars)."""
    value = _scalar(value)
    if not _is_real(value):
        raise TypeError(f"{where}: {name} must be a real number, got {type(value).__name__} "
                        f"{value!r}")
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{where}: invalid {name}: {value} (must be finite and >= 0)")
    return float(value)


class LRScheduler:
    """Base class of the learning-rate schedulers.

    Parameters
    ----------
    optimizer : Optimizer
        The optimizer whose ``param_groups[i]['lr']`` are scheduled.
    last_epoch : int
        Index of the last epoch: -1 (default) to start; a value >= 0 only to resume, and
        then every group must have an ``'initial_lr'`` entry (restored with the optimizer's
        state dict).

    Raises
    ------
    TypeError
        ``optimizer`` is not an :class:`Optimizer`; an argument has the wrong type (a count
        given as a str or bool, ``last_epoch`` as a float; a factor that is not a real
        number).
    ValueError
        An argument is out of range (``last_epoch < -1``, ``step_size < 1`` or not a whole
        number, ``T_max <= 0`` or not finite, a negative or non-finite ``gamma`` or
        ``eta_min``); the message names it.

    Attributes
    ----------
    base_lrs : list of float
        The initial learning rate of each group (``group['initial_lr']``).
    last_epoch : int
        Number of ``step()`` calls since creation (0 right after creation).

    Notes
    -----
    Creating a scheduler sets ``group['initial_lr']`` (if missing) and may change
    ``group['lr']``: create schedulers before loading an optimizer checkpoint.
    """

    _get_lr_called_within_step: bool = False
    _is_initial: bool = False

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(
                f"{type(self).__name__}: optimizer must be an Optimizer (an instance of "
                f"tinygrad_rnn.optim.Optimizer, e.g. SGD or Adam), got "
                f"{type(optimizer).__name__}: {type(optimizer).__name__} is not an Optimizer"
            )
        _check_int(type(self).__name__, "last_epoch", last_epoch, -1)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when "
                        f"resuming a scheduler with last_epoch={last_epoch}; load the "
                        f"optimizer's state dict first (or start with last_epoch=-1)"
                    )
        self.base_lrs: list[float] = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    # ---------------------------------------------------------------- the schedule
    def get_lr(self) -> list[float]:
        """The learning rates of the next epoch (``last_epoch``), computed from the current
        ones. Called by :meth:`step`; to read the current rates use :meth:`get_last_lr`."""
        raise NotImplementedError

    def _get_closed_form_lr(self) -> list[float]:
        """The learning rates at ``last_epoch`` from ``base_lrs`` alone."""
        raise NotImplementedError

    def get_last_lr(self) -> list[float]:
        """The learning rates set by the last :meth:`step` (one per parameter group)."""
        return self._last_lr

    def _warn_if_outside_step(self) -> None:
        if not self._get_lr_called_within_step:
            warnings.warn(
                "To get the last learning rate computed by the scheduler, use get_last_lr()",
                UserWarning, stacklevel=3,
            )

    def step(self, epoch: int | None = None) -> None:
        """Advance the schedule by one epoch and set the optimizer's learning rates.

        Parameters
        ----------
        epoch : int, optional
            Deprecated (as in torch): jump to this epoch using the closed form. A real
            number (int or float, Python or NumPy), finite; anything else is a TypeError or
            ValueError naming ``step`` and ``epoch``.
        """
        if epoch is not None:
            epoch = _scalar(epoch)
            where = f"{type(self).__name__}.step"
            if not _is_real(epoch):
                raise TypeError(f"{where}: epoch must be a number (or None), got "
                                f"{type(epoch).__name__} {epoch!r}")
            if not math.isfinite(epoch):
                raise ValueError(f"{where}: invalid epoch: {epoch} (must be finite)")
        if self._step_count == 1 and not getattr(self.optimizer, "_opt_called", False):
            warnings.warn(
                "lr_scheduler.step() was called before optimizer.step(); call them in the "
                "order optimizer.step(), then lr_scheduler.step(), or the first value of "
                "the schedule is skipped",
                UserWarning, stacklevel=2,
            )
        self._step_count += 1
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                warnings.warn(
                    "passing an epoch to lr_scheduler.step() is deprecated; call step() "
                    "once per epoch instead",
                    UserWarning, stacklevel=2,
                )
                self.last_epoch = epoch
                values = self._get_closed_form_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _current_lrs(self) -> list[float]:
        return [group["lr"] for group in self.optimizer.param_groups]

    # ---------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Every attribute except the optimizer, as torch's schedulers save it (lists are
        copied, so the dict is a snapshot)."""
        return {
            key: (list(value) if isinstance(value, list) else value)
            for key, value in self.__dict__.items() if key != "optimizer"
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the attributes saved by :meth:`state_dict`.

        Raises
        ------
        TypeError
            ``state_dict`` is not a dict, or it would set the optimizer (never saved).
        """
        where = f"{type(self).__name__}.load_state_dict"
        if not isinstance(state_dict, dict):
            raise TypeError(f"{where}: state_dict must be the dict returned by state_dict(), "
                            f"got {type(state_dict).__name__}")
        if "optimizer" in state_dict:
            raise TypeError(f"{where}: the state dict has an 'optimizer' entry; a "
                            f"scheduler's state never includes its optimizer")
        self.__dict__.update(
            {k: (list(v) if isinstance(v, list) else v) for k, v in state_dict.items()}
        )


class StepLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` every ``step_size`` epochs.

    Math
    ----
    ::

        lr_epoch = base_lr * gamma ** (epoch // step_size)

    Parameters
    ----------
    optimizer : Optimizer
    step_size : int
        Period of the decay, in epochs (>= 1). A float is accepted when it is exactly a
        whole number (``2.0``, as in torch) and stored as an int; ``2.5`` is a ValueError.
    gamma : float
        Multiplicative factor (default 0.1; finite, >= 0).
    last_epoch : int
        See :class:`LRScheduler`.
    """

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.step_size = whole_number("StepLR", "step_size", step_size, 1)
        self.gamma = _check_factor("StepLR", "gamma", gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_if_outside_step()
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._current_lrs()
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size)
                for base_lr in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` every epoch.

    Math
    ----
    ::

        lr_epoch = base_lr * gamma ** epoch

    Parameters
    ----------
    optimizer : Optimizer
    gamma : float
        Multiplicative factor per epoch (finite, >= 0).
    last_epoch : int
        See :class:`LRScheduler`.
    """

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = _check_factor("ExponentialLR", "gamma", gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_if_outside_step()
        if self._is_initial:
            return self._current_lrs()
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * self.gamma ** self.last_epoch for base_lr in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    r"""Anneal the learning rate along a cosine from ``base_lr`` to ``eta_min`` in ``T_max``
    epochs (SGDR's schedule without the restarts).

    Math
    ----
    The closed form, with T = ``T_max`` and epoch e::

        lr_e = eta_min + (base_lr - eta_min) * (1 + cos(pi * e / T)) / 2

    It reaches eta_min at e = T and, past T_max, climbs back to base_lr at e = 2T (it is
    periodic with period 2T; there is no restart). ``step()`` computes it recursively from
    the current rate, as torch does::

        lr_e = eta_min + (lr_{e-1} - eta_min) * (1 + cos(pi e / T)) / (1 + cos(pi (e-1) / T))

    and where the denominator vanishes ((e - 1 - T) a multiple of 2T, so lr_{e-1} = eta_min,
    or the denominator rounds to 0, as with T = 1/3, where torch divides by zero)
    ``lr_e = lr_{e-1} + (base_lr - eta_min) * (1 - cos(pi / T)) / 2``. Without other changes
    to the learning rate both forms agree up to rounding.

    Parameters
    ----------
    optimizer : Optimizer
    T_max : int or float
        Number of epochs of the half period: any finite real number > 0 (the formula is
        continuous in T, so ``T_max=3.5`` is a valid schedule, as in torch).
    eta_min : float
        Minimum learning rate (default 0; finite, >= 0).
    last_epoch : int
        See :class:`LRScheduler`.

    References
    ----------
    I. Loshchilov and F. Hutter, "SGDR: Stochastic Gradient Descent with Warm Restarts",
    ICLR 2017.
    """

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,
                 last_epoch: int = -1) -> None:
        self.T_max = _check_positive("CosineAnnealingLR", "T_max", T_max)
        self.eta_min = _check_factor("CosineAnnealingLR", "eta_min", eta_min)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_if_outside_step()
        e, T, eta_min = self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return self._current_lrs()
        ratio_den = 1 + math.cos(math.pi * (e - 1) / T)
        # with a non-integer T_max (e.g. 1/3) the denominator can round to exactly 0 although
        # the exact test below fails: take the same branch then, never divide by zero
        if (e - 1 - T) % (2 * T) == 0 or ratio_den == 0:
            return [group["lr"] + (base_lr - eta_min) * (1 - math.cos(math.pi / T)) / 2
                    for base_lr, group in zip(self.base_lrs, self.optimizer.param_groups)]
        ratio_num = 1 + math.cos(math.pi * e / T)
        return [ratio_num / ratio_den * (group["lr"] - eta_min) + eta_min
                for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        e, T, eta_min = self.last_epoch, self.T_max, self.eta_min
        return [eta_min + (base_lr - eta_min) * (1 + math.cos(math.pi * e / T)) / 2
                for base_lr in self.base_lrs]


def _check_milestones(where: str, milestones: Any) -> Counter:
    """``milestones`` as a Counter of whole epochs (a milestone listed twice multiplies the
    learning rate by ``gamma ** 2`` there, as in torch)."""
    if isinstance(milestones, (str, bytes, Mapping)) or not isinstance(milestones, Iterable):
        raise TypeError(f"{where}: milestones must be a list of epoch indices (ints), got "
                        f"{type(milestones).__name__} {milestones!r}")
    return Counter(whole_number(where, f"milestones (entry {m!r})", m, 0) for m in milestones)


class MultiStepLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` at each milestone epoch.

    Math
    ----
    ::

        lr_epoch = base_lr * gamma ** (number of milestones <= epoch)

    Parameters
    ----------
    optimizer : Optimizer
    milestones : iterable of int
        Epoch indices (whole numbers >= 0, in any order; one listed k times decays by
        ``gamma ** k``). Stored as a :class:`collections.Counter`, as torch stores them.
    gamma : float
        Multiplicative factor (default 0.1; finite, >= 0).
    last_epoch : int
        See :class:`LRScheduler`.

    Examples
    --------
    >>> import numpy as np
    >>> import tinygrad_rnn as tr
    >>> opt = tr.optim.SGD([tr.tensor(np.ones(2), requires_grad=True)], lr=1.0)
    >>> sched = MultiStepLR(opt, milestones=[2, 4], gamma=0.5)
    >>> lrs = []
    >>> for epoch in range(5):
    ...     opt.step()
    ...     sched.step()
    ...     lrs.append(sched.get_last_lr()[0])
    >>> lrs
    [1.0, 0.5, 0.5, 0.25, 0.25]
    """

    def __init__(self, optimizer: Optimizer, milestones: Iterable[int], gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.milestones = _check_milestones("MultiStepLR", milestones)
        self.gamma = _check_factor("MultiStepLR", "gamma", gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_if_outside_step()
        if self.last_epoch not in self.milestones:
            return self._current_lrs()
        factor = self.gamma ** self.milestones[self.last_epoch]
        return [group["lr"] * factor for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        passed = bisect.bisect_right(sorted(self.milestones.elements()), self.last_epoch)
        return [base_lr * self.gamma ** passed for base_lr in self.base_lrs]

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """As :meth:`LRScheduler.load_state_dict`; ``milestones`` (a dict after
        :func:`tinygrad_rnn.load`) becomes a Counter again."""
        super().load_state_dict(state_dict)
        self.milestones = Counter(
            {int(k): int(v) for k, v in dict(self.milestones).items()})


class LambdaLR(LRScheduler):
    """Set the learning rate to ``base_lr`` times a function of the epoch.

    Math
    ----
    ::

        lr_epoch = base_lr * lr_lambda(epoch)

    Parameters
    ----------
    optimizer : Optimizer
    lr_lambda : callable or list of callables
        ``lr_lambda(epoch) -> factor`` (a real number), or one function per parameter group.
        The factor is not checked for sign, as in torch (a negative learning rate is then
        refused by the optimizer at its next ``step()``).
    last_epoch : int
        See :class:`LRScheduler`.

    Notes
    -----
    ``state_dict()`` saves, as torch does, ``None`` for each plain function (code is not
    saved) and the attribute dict of each callable object; ``load_state_dict`` restores
    those attributes into this scheduler's objects.

    Examples
    --------
    >>> import numpy as np
    >>> import tinygrad_rnn as tr
    >>> opt = tr.optim.SGD([tr.tensor(np.ones(2), requires_grad=True)], lr=0.5)
    >>> sched = LambdaLR(opt, lambda epoch: 1.0 / (epoch + 1))
    >>> opt.step(); sched.step(); sched.get_last_lr()
    [0.25]
    """

    def __init__(self, optimizer: Optimizer,
                 lr_lambda: Callable[[int], float] | list[Callable[[int], float]],
                 last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            super().__init__(optimizer, last_epoch)   # raises the base class's TypeError
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(f"LambdaLR: expected {len(optimizer.param_groups)} "
                                 f"lr_lambdas (one per parameter group), but got "
                                 f"{len(lr_lambda)}")
            lambdas = list(lr_lambda)
        else:
            lambdas = [lr_lambda] * len(optimizer.param_groups)
        for k, fn in enumerate(lambdas):
            if not callable(fn):
                raise TypeError(f"LambdaLR: lr_lambda must be a function of the epoch (or a "
                                f"list of them), but entry {k} is {type(fn).__name__} {fn!r}")
        self.lr_lambdas = lambdas
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_if_outside_step()
        return self._get_closed_form_lr()

    def _get_closed_form_lr(self) -> list[float]:
        lrs = []
        for k, (fn, base_lr) in enumerate(zip(self.lr_lambdas, self.base_lrs)):
            factor = _scalar(fn(self.last_epoch))
            if not _is_real(factor):
                raise TypeError(f"LambdaLR: lr_lambda (for parameter group {k}) must return "
                                f"a real number, returned {type(factor).__name__} "
                                f"{factor!r} at epoch {self.last_epoch}")
            lrs.append(base_lr * factor)
        return lrs

    def state_dict(self) -> dict[str, Any]:
        """The attributes except the optimizer, with ``lr_lambdas`` as torch saves them."""
        state = {key: (list(value) if isinstance(value, list) else value)
                 for key, value in self.__dict__.items()
                 if key not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType)
                               else dict(fn.__dict__) for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`: the attributes, and those of callable objects."""
        where = "LambdaLR.load_state_dict"
        if not isinstance(state_dict, dict):
            raise TypeError(f"{where}: state_dict must be the dict returned by state_dict(), "
                            f"got {type(state_dict).__name__}")
        saved = state_dict.get("lr_lambdas", [None] * len(self.lr_lambdas))
        if not isinstance(saved, (list, tuple)) or len(saved) != len(self.lr_lambdas):
            raise ValueError(f"{where}: 'lr_lambdas' must be a list of {len(self.lr_lambdas)} "
                             f"entries (None or a dict of attributes), got {saved!r}")
        rest = {k: v for k, v in state_dict.items() if k != "lr_lambdas"}
        super().load_state_dict(rest)
        for fn, attributes in zip(self.lr_lambdas, saved):
            if attributes is not None:
                fn.__dict__.update(attributes)


class ReduceLROnPlateau(LRScheduler):
    """Reduce the learning rate when a metric has stopped improving.

    Call ``scheduler.step(metric)`` once per epoch with the validation loss (or accuracy,
    with ``mode='max'``). When the metric has not improved for more than ``patience``
    epochs, every group's learning rate becomes ``max(lr * factor, min_lr)`` (a change
    smaller than ``eps`` is skipped), and ``cooldown`` epochs follow in which bad epochs are
    not counted.

    Math
    ----
    With the best value so far ``best``, a new value ``a`` is an improvement when::

        mode='min', 'rel':  a < best * (1 - threshold)      'abs':  a < best - threshold
        mode='max', 'rel':  a > best * (1 + threshold)      'abs':  a > best + threshold

    Parameters
    ----------
    optimizer : Optimizer
    mode : {'min', 'max'}
        Whether the metric should decrease (default) or increase.
    factor : float
        The factor of a reduction, 0 <= factor < 1 (default 0.1).
    patience : int
        Epochs without improvement tolerated before a reduction (default 10; >= 0).
    threshold : float
        The least improvement that counts (default 1e-4; finite).
    threshold_mode : {'rel', 'abs'}
        Whether ``threshold`` is relative to ``best`` (default) or absolute.
    cooldown : int
        Epochs after a reduction in which bad epochs are not counted (default 0; >= 0).
    min_lr : float or list of float
        The lowest learning rate, for every group or one per group (default 0; >= 0).
    eps : float
        The smallest change of a learning rate that is applied (default 1e-8; >= 0).

    Attributes
    ----------
    best, num_bad_epochs, cooldown_counter, last_epoch
        As torch names them (``last_epoch`` counts the ``step`` calls).

    Notes
    -----
    Like torch's, this scheduler does not take a step at construction and its ``step``
    needs the metric: ``step()`` without one is a TypeError that says so.

    Examples
    --------
    >>> import numpy as np
    >>> import tinygrad_rnn as tr
    >>> opt = tr.optim.SGD([tr.tensor(np.ones(2), requires_grad=True)], lr=1.0)
    >>> sched = ReduceLROnPlateau(opt, patience=1, factor=0.5)
    >>> for val_loss in [3.0, 2.0, 2.0, 2.0, 2.0]:
    ...     sched.step(val_loss)
    >>> sched.get_last_lr()
    [0.5]
    """

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1,
                 patience: int = 10, threshold: float = 1e-4, threshold_mode: str = "rel",
                 cooldown: int = 0, min_lr: float | list[float] = 0,
                 eps: float = 1e-8) -> None:
        where = "ReduceLROnPlateau"
        self.factor = _check_factor(where, "factor", factor)
        if not self.factor < 1.0:
            raise ValueError(f"{where}: invalid factor: {factor} (must be < 1.0: it "
                             f"multiplies the learning rate at each reduction)")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(
                f"{where}: optimizer must be an Optimizer (an instance of "
                f"tinygrad_rnn.optim.Optimizer, e.g. SGD or Adam), got "
                f"{type(optimizer).__name__}: {type(optimizer).__name__} is not an Optimizer"
            )
        self.optimizer = optimizer
        groups = len(optimizer.param_groups)
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != groups:
                raise ValueError(f"{where}: expected {groups} min_lrs (one per parameter "
                                 f"group), got {len(min_lr)}")
            self.default_min_lr = None
            self.min_lrs = [_check_factor(where, f"min_lr[{k}]", v)
                            for k, v in enumerate(min_lr)]
        else:
            self.default_min_lr = _check_factor(where, "min_lr", min_lr)
            self.min_lrs = [self.default_min_lr] * groups
        self.patience = whole_number(where, "patience", patience, 0)
        self.cooldown = whole_number(where, "cooldown", cooldown, 0)
        self.eps = _check_factor(where, "eps", eps)
        self.last_epoch = 0
        self._last_lr = self._current_lrs()
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()

    def _init_is_better(self, mode: Any, threshold: Any, threshold_mode: Any) -> None:
        where = "ReduceLROnPlateau"
        if mode not in ("min", "max"):
            raise ValueError(f"{where}: mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"{where}: threshold_mode must be 'rel' or 'abs', got "
                             f"{threshold_mode!r}")
        threshold = _scalar(threshold)
        if not _is_real(threshold):
            raise TypeError(f"{where}: threshold must be a real number, got "
                            f"{type(threshold).__name__} {threshold!r}")
        if not math.isfinite(threshold):
            raise ValueError(f"{where}: invalid threshold: {threshold} (must be finite)")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def _reset(self) -> None:
        """Forget the best value and the counters."""
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def is_better(self, a: float, best: float) -> bool:
        """Whether ``a`` improves on ``best`` (see Math)."""
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min":
            return a < best - self.threshold
        if self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    # torch's signature: the metric comes first, unlike LRScheduler.step(epoch)
    def step(self, metrics: Any = None, epoch: int | None = None) -> None:  # type: ignore[override]
        """Record the metric of one epoch and reduce the learning rates if it has stopped
        improving.

        Parameters
        ----------
        metrics : float or one-element Tensor
            The value to watch (e.g. the validation loss).
        epoch : int, optional
            Deprecated (as in torch): the epoch number to record instead of counting.
        """
        where = "ReduceLROnPlateau.step"
        if metrics is None:
            raise TypeError(f"{where}: metrics is required: pass the value to watch, e.g. "
                            f"scheduler.step(val_loss)")
        if isinstance(metrics, (bool, np.bool_, str, bytes)):
            raise TypeError(f"{where}: metrics must be a number or a one-element Tensor, got "
                            f"{type(metrics).__name__} {metrics!r}")
        try:
            current = float(metrics)
        except (TypeError, ValueError) as err:
            raise TypeError(f"{where}: metrics must be a number or a one-element Tensor, got "
                            f"{type(metrics).__name__} {metrics!r}") from err
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            epoch = whole_number(where, "epoch", epoch, 0)
            warnings.warn("passing an epoch to lr_scheduler.step() is deprecated; call "
                          "step(metrics) once per epoch instead", UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self.is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0        # bad epochs in the cooldown are not counted
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = self._current_lrs()

    def _reduce_lr(self) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"ReduceLROnPlateau.step: the optimizer has {len(groups)} parameter "
                    f"groups but min_lr gave {len(self.min_lrs)} (a group was added after "
                    f"the scheduler was made); set scheduler.min_lrs to one value per group"
                )
            self.min_lrs = [self.default_min_lr] * len(groups)
        for group, min_lr in zip(groups, self.min_lrs):
            old_lr = float(group["lr"])
            new_lr = max(old_lr * self.factor, min_lr)
            if old_lr - new_lr > self.eps:
                group["lr"] = new_lr

    def get_lr(self) -> list[float]:
        """The current learning rates (this scheduler changes them only in :meth:`step`)."""
        return self._current_lrs()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` and check its mode and threshold."""
        super().load_state_dict(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)
