"""Training loops: the lectures' SGD loop with validation and early stopping, for
minibatch tasks (:func:`fit`) and for long streams under a truncation schedule
(:func:`train_stream`). Both show a tqdm progress bar, call a callback after every update,
optionally clip the gradient norm and record gradient norms in a
:class:`~tinygrad_rnn.monitor.GradientMonitor`.

Devices
-------
Both loops run wherever the optimizer's parameters are (``model.to('cuda')`` before making
the optimizer, or after: the optimizer's state follows its parameters). Host data reaches
the device explicitly:

* :func:`fit` never sees the batches: ``step_fn`` makes each one and puts it on the model's
  device itself, e.g. ``tr.tensor(x_batch, device=model.device)`` (targets given to the
  losses as NumPy arrays are copied to the device by the loss);
* :func:`train_stream` copies a stream given on the host (a NumPy array or a CPU Tensor) to
  the parameters' device once, before the first window.

Clipping stays on the device. The one device-to-host copy per update is the loss value
(``loss.item()``), which the history, the progress bar and the callback need as a number.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .bptt.truncation import Truncation, Window, run_truncated, windows
from .tensor import Tensor

__all__ = ["EarlyStopping", "TrainResult", "fit", "train_stream"]


class EarlyStopping:
    """Stop when the validation loss has not improved by more than ``tol`` for
    ``patience`` consecutive validations. ``patience`` is an int >= 1 (Python or NumPy; a
    bool or a float such as 2.5 is a TypeError), ``tol`` a finite real number >= 0 (a
    TypeError when it is no number, a ValueError when it is negative, inf or nan)."""

    def __init__(self, patience: int = 3, tol: float = 0.0) -> None:
        _check_count("EarlyStopping", "patience", patience, 1)
        if isinstance(tol, (bool, np.bool_)) or not isinstance(
                tol, (int, float, np.integer, np.floating)):
            raise TypeError(f"EarlyStopping: tol must be a real number, got "
                            f"{type(tol).__name__} {tol!r}")
        if not 0.0 <= float(tol) < float("inf"):
            raise ValueError(f"EarlyStopping: tol must be a finite number >= 0, got {tol!r}")
        self.patience, self.tol = int(patience), float(tol)
        self.best = float("inf")
        self.bad = 0

    def update(self, value: float) -> bool:
        """Record a validation loss; True when training should stop."""
        if value < self.best - self.tol:
            self.best, self.bad = value, 0
        else:
            self.bad += 1
        return self.bad >= self.patience


@dataclass
class TrainResult:
    """What a training run produced: the loss of every update, the validation history as
    (update index, loss) pairs, whether early stopping ended it, and the number of updates."""

    losses: list[float] = field(default_factory=list)
    val_losses: list[tuple[int, float]] = field(default_factory=list)
    stopped_early: bool = False
    steps: int = 0


class _Stop(Exception):
    pass


def _check_count(where: str, name: str, value: Any, minimum: int) -> None:
    """TypeError unless ``value`` is an int (Python or NumPy; not a bool or a float),
    ValueError when it is below ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{where}: {name} must be an int, got {type(value).__name__} "
                        f"{value!r}")
    if value < minimum:
        raise ValueError(f"{where}: {name} must be >= {minimum}, got {value}")


def _check_validation(where: str, validate: Any, val_every: Any, patience: Any) -> None:
    """Validation runs when ``validate`` is given and ``val_every >= 1``; early stopping
    needs both. A ``validate`` that would never run and a ``patience`` with nothing to stop
    on are errors. ``val_every`` without ``validate`` is allowed and means no validation, so
    that ``validate=val if use_val else None, val_every=50`` switches validation off."""
    _check_count(where, "val_every", val_every, 0)
    if patience is not None:
        _check_count(where, "patience", patience, 1)
    if validate is not None and not callable(validate):
        raise TypeError(f"{where}: validate must be a callable returning the validation "
                        f"loss, got {type(validate).__name__}")
    if validate is not None and val_every == 0:
        raise ValueError(f"{where}: validate is given but val_every={val_every}, so it would "
                         f"never run; pass val_every >= 1 (validate every that many updates)")
    if patience is not None and validate is None:
        raise ValueError(f"{where}: patience={patience} needs validation to stop on; pass "
                         f"validate=... and val_every >= 1 (or leave patience at None)")


def _progress(total: int, desc: str, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, disable=not enabled, leave=False, dynamic_ncols=True)


class _Updater:
    """Shared per-update logic: clip, monitor, step, zero, callback, validate, stop."""

    def __init__(self, params: list, optimizer: Any, clip: float | None, monitor: Any,
                 callback: Callable | None, validate: Callable[[], float] | None,
                 val_every: int, stopper: EarlyStopping | None, bar: Any,
                 result: TrainResult) -> None:
        self.params, self.optimizer, self.clip, self.monitor = params, optimizer, clip, monitor
        self.callback, self.validate, self.val_every = callback, validate, val_every
        self.stopper, self.bar, self.result = stopper, bar, result

    def __call__(self, loss_value: float) -> None:
        if self.clip is not None:
            from .nn.utils import clip_grad_norm_

            if self.monitor is not None:
                self.monitor.before_clip()
            clip_grad_norm_(self.params, self.clip)
        if self.monitor is not None:
            self.monitor.record(clipped=self.clip is not None)
        self.optimizer.step()
        self.optimizer.zero_grad()
        r = self.result
        r.losses.append(loss_value)
        r.steps += 1
        self.bar.update(1)
        postfix = {"loss": f"{loss_value:.4g}"}
        stop = False
        if self.validate is not None and r.steps % self.val_every == 0:
            val = float(self.validate())
            r.val_losses.append((r.steps, val))
            postfix["val"] = f"{val:.4g}"
            if self.stopper is not None and self.stopper.update(val):
                r.stopped_early = stop = True
        self.bar.set_postfix(postfix)
        if self.callback is not None:  # also for the update that triggers early stopping
            self.callback(r.steps, loss_value)
        if stop:
            raise _Stop


def _stream_on_device(x: Any, params: list) -> Tensor:
    """The stream ``x`` as a Tensor on the parameters' device (one explicit host-to-device
    copy when it is on the host); a RuntimeError names both devices otherwise."""
    if not isinstance(x, (Tensor, np.ndarray)):
        raise TypeError(f"train_stream: x must be a Tensor or a NumPy array, got "
                        f"{type(x).__name__}; convert it first, e.g. tr.tensor(x)")
    devices = sorted({p.device for p in params})
    if len(devices) > 1:
        raise RuntimeError(f"train_stream: the parameters are on several devices {devices}; "
                           f"move the model to one device first (Module.to)")
    device = devices[0] if devices else "cpu"
    if isinstance(x, np.ndarray):
        return Tensor(x, device=device)
    if x.device == device:
        return x
    if x.device != "cpu":
        raise RuntimeError(f"train_stream: the stream is on {x.device} but the parameters are "
                           f"on {device}; move one of them with .to()")
    return x.to(device)


def fit(step_fn: Callable[[int], Tensor], steps: int, optimizer: Any, *,
        clip: float | None = None, monitor: Any = None,
        callback: Callable[[int, float], None] | None = None,
        validate: Callable[[], float] | None = None, val_every: int = 0,
        patience: int | None = None, tol: float = 0.0, progress: bool = True,
        desc: str = "train") -> TrainResult:
    """Minibatch training: for each update i, ``loss = step_fn(i)`` (forward on a batch),
    then backward, optional clipping to ``clip``, monitor, ``optimizer.step()`` and
    ``zero_grad()``. Every ``val_every`` updates ``validate()`` is called; with ``patience``
    set, training stops once the validation loss has not improved by ``tol`` for that many
    validations.

    Validation runs only when ``validate`` is given and ``val_every >= 1``: with
    ``validate=None`` no validation runs, whatever ``val_every`` is (so
    ``validate=val if use_val else None, val_every=50`` switches it off). ``validate`` with
    ``val_every=0`` (the default) would never run and raises ``ValueError``. ``patience``
    is an int >= 1, or None (the default) for no early stopping; it needs validation, so
    ``patience`` without ``validate`` raises ``ValueError``, as do a negative ``steps`` or
    ``val_every`` and ``patience < 1`` (a non-int one raises ``TypeError``).

    ``step_fn`` puts its batch on the model's device (see the module docstring); ``fit``
    copies nothing between devices except each loss value, read back as a Python float."""
    _check_count("fit", "steps", steps, 0)
    _check_validation("fit", validate, val_every, patience)
    result = TrainResult()
    params = [p for g in optimizer.param_groups for p in g["params"]]
    stopper = EarlyStopping(patience, tol) if patience is not None else None
    with _progress(steps, desc, progress) as bar:
        update = _Updater(params, optimizer, clip, monitor, callback, validate, val_every,
                          stopper, bar, result)
        try:
            for i in range(steps):
                loss = step_fn(i)
                loss.backward()
                update(float(loss.item()))
        except _Stop:
            pass
    return result


def train_stream(forward: Callable[[Tensor, Any], tuple], x: Tensor,
                 loss_fn: Callable[[Any, int, int], Tensor], optimizer: Any,
                 schedule: Truncation, *, state: Any = None, epochs: int = 1,
                 clip: float | None = None, monitor: Any = None,
                 callback: Callable[[int, float], None] | None = None,
                 validate: Callable[[], float] | None = None, val_every: int = 0,
                 patience: int | None = None, tol: float = 0.0, progress: bool = True,
                 desc: str = "train", time_axis: int = 0) -> TrainResult:
    """Train on a long stream ``x`` with a truncation schedule (stateful TBPTT): the hidden
    state is carried across windows (detached) and reset to ``state`` at each epoch. One
    optimizer update per window; see :func:`tinygrad_rnn.bptt.truncation.run_truncated` for
    ``forward`` and ``loss_fn``.

    ``x`` (a Tensor or a NumPy array) is copied to the parameters' device once, before the
    first window, when it is on the host; a stream on another device is an error.
    ``validate``, ``val_every`` and ``patience`` follow the rules of :func:`fit`; ``epochs``
    is an int >= 0."""
    _check_count("train_stream", "epochs", epochs, 0)
    _check_validation("train_stream", validate, val_every, patience)
    result = TrainResult()
    params = [p for g in optimizer.param_groups for p in g["params"]]
    x = _stream_on_device(x, params)
    stopper = EarlyStopping(patience, tol) if patience is not None else None
    per_epoch = len(windows(x.shape[time_axis], schedule))
    with _progress(per_epoch * epochs, desc, progress) as bar:
        update = _Updater(params, optimizer, clip, monitor, callback, validate, val_every,
                          stopper, bar, result)

        def on_window(w: Window, loss: Tensor) -> None:
            update(float(loss.item()))

        try:
            for _ in range(epochs):
                run_truncated(forward, x, schedule, loss_fn, state=state,
                              on_window=on_window, time_axis=time_axis)
        except _Stop:
            pass
    return result
