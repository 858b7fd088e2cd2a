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
"""
from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

import numpy as np

from .optimizer import Optimizer

__all__ = ["LRScheduler", "StepLR", "ExponentialLR", "CosineAnnealingLR"]


def _check_int(where: str, name: str, value: Any, minimum: int) -> None:
    """TypeError unless ``value`` is an int (Python or NumPy; not a bool, not a float),
    ValueError when it is below ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{where}: {name} must be an int, got {type(value).__name__} "
                        f"{value!r}")
    if value < minimum:
        raise ValueError(f"{where}: invalid {name}: {value} (must be >= {minimum})")


def _whole_number(where: str, name: str, value: Any, minimum: int) -> int:
    """``value`` as a Python int when it is an int (Python or NumPy) or a float that is exactly
    a whole number (``2.0``, ``np.ceil(7 / 2)``; torch accepts these too); a TypeError for
    anything else (bools and strings included), a ValueError for a float with a fractional
    part (``2.5`` is never rounded) or a value below ``minimum``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where}: {name} must be an int, got {type(value).__name__} "
                        f"{value!r}")
    if not isinstance(value, (int, np.integer)):
        if not (math.isfinite(value) and float(value).is_integer()):
            raise ValueError(f"{where}: invalid {name}: {value!r} (must be a whole number; "
                             f"a float is accepted only when it is exactly an integer)")
    if value < minimum:
        raise ValueError(f"{where}: invalid {name}: {value} (must be >= {minimum})")
    return int(value)


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
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
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
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
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
            if isinstance(epoch, (bool, np.bool_)) or not isinstance(epoch, numbers.Real):
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
        self.step_size = _whole_number("StepLR", "step_size", step_size, 1)
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
