"""Training loops: the lectures' SGD loop with validation and early stopping, for
minibatch tasks (:func:`fit`) and for long streams under a truncation schedule
(:func:`train_stream`). Both show a tqdm progress bar (by default only when stderr is a
terminal and ``TINYGRAD_RNN_PROGRESS`` does not say otherwise: :func:`progress_enabled`;
``progress=True``/``False`` forces it), call a callback after every update,
optionally clip the gradient norm and record gradient norms in a
:class:`~tinygrad_rnn.monitor.GradientMonitor`. With ``run_dir=`` they write a run folder
(:mod:`tinygrad_rnn.runs`): a manifest, and one metrics row per update (loss, validation
loss, gradient norm before and after clipping, learning rate, and the per-step
||dL/dh_t|| of the monitor when there is one).

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

import contextlib
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .truncation import Truncation, Window, run_truncated, windows
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
        value = _loss_number(value, "EarlyStopping.update", "value")
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


def _check_flag(where: str, name: str, value: Any) -> bool:
    """``value`` as a bool: True/False, Python or NumPy (``progress='no'`` would be
    truthy); a TypeError naming ``where`` and ``name`` otherwise."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{where}: {name} must be True or False, got {value!r} "
                        f"({type(value).__name__})")
    return bool(value)


def _check_callable(where: str, name: str, value: Any, what: str, optional: bool) -> None:
    if (value is not None or not optional) and not callable(value):
        raise TypeError(f"{where}: {name} must be {what}, got {type(value).__name__}")


def _check_optimizer(where: str, optimizer: Any) -> list:
    """The parameters of ``optimizer`` (anything with ``param_groups``, ``step()`` and
    ``zero_grad()``, e.g. tr.optim.SGD); a TypeError naming ``where`` otherwise."""
    groups = getattr(optimizer, "param_groups", None)
    if not (isinstance(groups, list) and callable(getattr(optimizer, "step", None))
            and callable(getattr(optimizer, "zero_grad", None))):
        raise TypeError(f"{where}: optimizer must be an optimizer with param_groups, step() "
                        f"and zero_grad() (e.g. tr.optim.SGD(model.parameters(), lr=0.1)), "
                        f"got {type(optimizer).__name__}")
    return [p for g in groups for p in g["params"]]


def _check_clip(where: str, clip: Any) -> float | None:
    """``clip`` as a max norm: None (no clipping) or a finite real number >= 0."""
    if clip is None:
        return None
    if isinstance(clip, np.ndarray) and clip.ndim == 0 and clip.dtype.kind in "iuf":
        clip = clip[()]
    if isinstance(clip, (bool, np.bool_)) or not isinstance(
            clip, (int, float, np.integer, np.floating)):
        raise TypeError(f"{where}: clip must be a real number (the max gradient norm) or "
                        f"None, got {clip!r} ({type(clip).__name__})")
    if not 0.0 <= float(clip) < float("inf"):
        raise ValueError(f"{where}: clip must be a finite number >= 0 (the max gradient "
                         f"norm), got {clip!r}")
    return float(clip)


def _check_monitor(where: str, monitor: Any) -> None:
    if monitor is not None and not (callable(getattr(monitor, "record", None))
                                    and callable(getattr(monitor, "before_clip", None))):
        raise TypeError(f"{where}: monitor must be a tr.monitor.GradientMonitor (with record() "
                        f"and before_clip()) or None, got {type(monitor).__name__}")


def _check_loop_args(where: str, optimizer: Any, clip: Any, monitor: Any, callback: Any,
                     progress: Any, desc: Any) -> tuple[list, float | None]:
    """The checks :func:`fit` and :func:`train_stream` share; returns (params, clip)."""
    params = _check_optimizer(where, optimizer)
    clip = _check_clip(where, clip)
    _check_monitor(where, monitor)
    _check_callable(where, "callback", callback, "a callable callback(step, loss) or None",
                    optional=True)
    if progress is not None:  # None: bars on a terminal only (progress_enabled)
        _check_flag(where, "progress", progress)
    if not isinstance(desc, str):
        raise TypeError(f"{where}: desc must be a str (the progress bar's label), got "
                        f"{type(desc).__name__}")
    return params, clip


def _loss_number(value: Any, where: str, what: str) -> float:
    """A validation loss as a float: a real number, a NumPy scalar or a one-element
    Tensor/array; a TypeError naming ``where`` for a string or None."""
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise TypeError(f"{where}: {what} must be one number, got a Tensor of shape "
                            f"{value.shape}")
        return float(value.item())
    if isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind in "iuf":
        return float(value.reshape(()))
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{where}: {what} must be a number, got {value!r} "
                        f"({type(value).__name__})")
    return float(value)


def _loss_tensor(loss: Any, where: str, what: str) -> Tensor:
    """Check the loss a step function returned: a Tensor holding one number (the backward
    pass needs it; a float has no graph)."""
    if not isinstance(loss, Tensor):
        raise TypeError(f"{where}: {what} must return the loss as a Tensor (one number, with "
                        f"its graph), got {type(loss).__name__}; return the loss Tensor, "
                        f"not loss.item()")
    if loss.numel() != 1:
        raise ValueError(f"{where}: {what} must return a loss holding one number, got a "
                         f"Tensor of shape {loss.shape}; reduce it first (e.g. .mean())")
    return loss


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


PROGRESS_ENV = "TINYGRAD_RNN_PROGRESS"
_ON_WORDS = ("1", "true", "yes", "on")
_OFF_WORDS = ("0", "false", "no", "off")


def progress_enabled(no_progress: bool = False, stream: Any = None) -> bool:
    """Whether to show progress bars: the demos' ``--no-progress`` switch, then the
    environment variable ``TINYGRAD_RNN_PROGRESS``, then whether ``stream`` (default
    ``sys.stderr``, where tqdm writes) is a terminal.

    ``no_progress=True`` always turns them off. ``TINYGRAD_RNN_PROGRESS`` set to 0, false,
    no or off (any case) turns them off, and 1, true, yes or on turns them on even into a
    file or pipe; any other non-empty value is a ValueError naming the variable. Unset or
    empty, bars are shown only on a terminal, so a log file gets no carriage-return updates.
    """
    if no_progress:
        return False
    value = os.environ.get(PROGRESS_ENV, "").strip().lower()
    if value in _OFF_WORDS:
        return False
    if value in _ON_WORDS:
        return True
    if value:
        raise ValueError(f"environment variable {PROGRESS_ENV}={os.environ[PROGRESS_ENV]!r} "
                         f"is not understood: use 0 (no progress bars) or 1 (always show "
                         f"them), or unset it (bars on a terminal only)")
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (OSError, ValueError):  # a closed or detached stream
        return False


def progress_bar(total: int, desc: str, enabled: bool | None) -> Any:
    """A tqdm bar; ``enabled=None`` decides by :func:`progress_enabled` (the environment
    variable, then whether stderr is a terminal)."""
    from tqdm.auto import tqdm

    if enabled is None:
        enabled = progress_enabled()

    return tqdm(total=total, desc=desc, disable=not enabled, leave=False, dynamic_ncols=True)


def _global_grad_norm(params: list) -> float:
    """||dL/dtheta|| over all parameters (float64 on their device; one number comes back)."""
    total = 0.0
    for p in params:
        if p._grad is not None:
            g = p._grad.astype(np.float64)
            total += float((g * g).sum())
    return float(np.sqrt(total))


def _monitor_keys(monitor: Any) -> list[tuple]:
    """The (module, layer, direction, kind) of every per-step norm a GradientMonitor
    records, from its public ``recurrent`` modules."""
    keys = []
    for name, module in monitor.recurrent.items():
        kinds = ("h", "c") if getattr(module, "mode", "") == "LSTM" else ("h",)
        for layer in range(module.num_layers):
            for direction in range(module.num_directions):
                keys += [(name, layer, direction, kind) for kind in kinds]
    return keys


def _open_run(where: str, run_dir: Any, config: dict, params: list) -> Any:
    """A context manager giving the RunWriter to log to (or None): a new run folder for a
    path, which it finalises on leaving (finished, or failed with the exception), or the
    caller's RunWriter (or None), which it leaves open."""
    from .runs import RunWriter

    if run_dir is None or isinstance(run_dir, RunWriter):
        return contextlib.nullcontext(run_dir)
    if not isinstance(run_dir, (str, os.PathLike)):
        raise TypeError(f"{where}: run_dir must be a folder path, a tr.runs.RunWriter or "
                        f"None, got {type(run_dir).__name__}")
    device = ",".join(sorted({str(p.device) for p in params})) or "cpu"
    return RunWriter(run_dir, config=config, device=device)


def _loop_config(where: str, optimizer: Any, clip: float | None, **settings: Any) -> dict:
    """What the manifest of a run folder made by :func:`fit` or :func:`train_stream`
    records about the loop."""
    hyper = [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]
    return {"loop": where, "optimizer": type(optimizer).__name__, "param_groups": hyper,
            "clip": clip, **settings}


class _Updater:
    """Shared per-update logic: clip, monitor, step, zero, callback, validate, stop, and
    the run folder's row."""

    def __init__(self, params: list, optimizer: Any, clip: float | None, monitor: Any,
                 callback: Callable | None, validate: Callable[[], float] | None,
                 val_every: int, stopper: EarlyStopping | None, bar: Any,
                 result: TrainResult, where: str, run: Any = None) -> None:
        self.where = where
        self.params, self.optimizer, self.clip, self.monitor = params, optimizer, clip, monitor
        self.callback, self.validate, self.val_every = callback, validate, val_every
        self.stopper, self.bar, self.result = stopper, bar, result
        self.run = run
        if run is not None:
            run.start_metrics(monitored=monitor is not None)
            self.keys = _monitor_keys(monitor) if monitor is not None else []

    def __call__(self, loss_value: float) -> None:
        pre = post = None  # the run folder's norms (float64, as the monitor's)
        if self.clip is not None:
            from .nn.utils import clip_grad_norm_

            if self.monitor is not None:
                pre = self.monitor.before_clip()
            elif self.run is not None:
                pre = _global_grad_norm(self.params)
            clip_grad_norm_(self.params, self.clip)
            if self.run is not None:
                post = _global_grad_norm(self.params)
        elif self.run is not None:
            pre = post = _global_grad_norm(self.params)
        if self.monitor is not None:
            self.monitor.record(clipped=self.clip is not None)
        lr = self.optimizer.param_groups[0].get("lr") if self.run is not None else None
        self.optimizer.step()
        self.optimizer.zero_grad()
        r = self.result
        r.losses.append(loss_value)
        r.steps += 1
        self.bar.update(1)
        postfix = {"loss": f"{loss_value:.4g}"}
        stop = False
        if self.validate is not None and r.steps % self.val_every == 0:
            val = _loss_number(self.validate(), self.where, "validate()")
            r.val_losses.append((r.steps, val))
            postfix["val"] = f"{val:.4g}"
            if self.stopper is not None and self.stopper.update(val):
                r.stopped_early = stop = True
        self.bar.set_postfix(postfix)
        if self.run is not None:
            states = None
            if self.monitor is not None:  # this update's row of each per-step norm
                states = {key: self.monitor.latest_state_norms(*key) for key in self.keys}
            val_now = r.val_losses[-1][1] if r.val_losses and \
                r.val_losses[-1][0] == r.steps else None
            self.run.log(loss_value, grad_norm=pre, clipped_norm=post, lr=lr,
                         val_loss=val_now, state_norms=states)
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
        patience: int | None = None, tol: float = 0.0, progress: bool | None = None,
        desc: str = "train", run_dir: Any = None) -> TrainResult:
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
    copies nothing between devices except each loss value, read back as a Python float
    (with ``run_dir``, also the two gradient norms of each update).

    ``run_dir`` (a folder path or a :class:`tinygrad_rnn.runs.RunWriter`) writes a run
    folder: one row of metrics.csv per update. A path makes a new run folder (an existing
    run there is an error) whose manifest ``fit`` finalises as finished or failed; a
    RunWriter is written to and left open for its owner to close."""
    _check_callable("fit", "step_fn", step_fn, "a callable step_fn(i) returning the loss",
                    optional=False)
    _check_count("fit", "steps", steps, 0)
    _check_validation("fit", validate, val_every, patience)
    params, clip = _check_loop_args("fit", optimizer, clip, monitor, callback, progress, desc)
    result = TrainResult()
    stopper = EarlyStopping(patience, tol) if patience is not None else None
    with _open_run("fit", run_dir, _loop_config(
            "fit", optimizer, clip, steps=steps, val_every=val_every, patience=patience,
            tol=tol), params) as run, progress_bar(steps, desc, progress) as bar:
        update = _Updater(params, optimizer, clip, monitor, callback, validate,
                          val_every, stopper, bar, result, "fit", run)
        try:
            for i in range(steps):
                loss = _loss_tensor(step_fn(i), "fit", "step_fn")
                loss.backward()
                update(float(loss.item()))
        except _Stop:
            pass
    return result


def train_stream(forward: Callable[[Tensor, Any], tuple], x: Tensor | np.ndarray,
                 loss_fn: Callable[[Any, int, int], Tensor], optimizer: Any,
                 schedule: Truncation, *, state: Any = None, epochs: int = 1,
                 clip: float | None = None, monitor: Any = None,
                 callback: Callable[[int, float], None] | None = None,
                 validate: Callable[[], float] | None = None, val_every: int = 0,
                 patience: int | None = None, tol: float = 0.0, progress: bool | None = None,
                 desc: str = "train", time_axis: int = 0,
                 run_dir: Any = None) -> TrainResult:
    """Train on a long stream ``x`` with a truncation schedule (stateful TBPTT): the hidden
    state is carried across windows (detached) and reset to ``state`` at each epoch. One
    optimizer update per window; see :func:`tinygrad_rnn.bptt.truncation.run_truncated` for
    ``forward`` and ``loss_fn``.

    ``x`` (a Tensor or a NumPy array) is copied to the parameters' device once, before the
    first window, when it is on the host; a stream on another device is an error.
    ``validate``, ``val_every``, ``patience`` and ``run_dir`` follow the rules of
    :func:`fit`; ``epochs`` is an int >= 0."""
    where = "train_stream"
    _check_callable(where, "forward", forward, "a callable forward(x_window, state)",
                    optional=False)
    _check_callable(where, "loss_fn", loss_fn, "a callable loss_fn(out, start, stop)",
                    optional=False)
    if not isinstance(schedule, Truncation):
        raise TypeError(f"{where}: schedule must be a Truncation (e.g. "
                        f"tr.bptt.truncation.chunked(k) or williams_peng(k1, k2)), got "
                        f"{type(schedule).__name__}")
    _check_count(where, "epochs", epochs, 0)
    _check_validation(where, validate, val_every, patience)
    params, clip = _check_loop_args(where, optimizer, clip, monitor, callback, progress, desc)
    result = TrainResult()
    x = _stream_on_device(x, params)
    _check_count(where, "time_axis", time_axis, -x.ndim)
    if time_axis >= x.ndim:
        raise ValueError(f"{where}: time_axis={time_axis} is out of range for x of shape "
                         f"{x.shape} ({x.ndim} axes)")
    stopper = EarlyStopping(patience, tol) if patience is not None else None
    per_epoch = len(windows(x.shape[time_axis], schedule))
    with _open_run(where, run_dir, _loop_config(
            where, optimizer, clip, schedule=repr(schedule), epochs=epochs,
            windows_per_epoch=per_epoch, val_every=val_every, patience=patience, tol=tol),
            params) as run, progress_bar(per_epoch * epochs, desc, progress) as bar:
        update = _Updater(params, optimizer, clip, monitor, callback, validate,
                          val_every, stopper, bar, result, where, run)

        def on_window(w: Window, loss: Tensor) -> None:
            update(float(loss.item()))

        try:
            for _ in range(epochs):
                run_truncated(forward, x, schedule, loss_fn, state=state,
                              on_window=on_window, time_axis=time_axis)
        except _Stop:
            pass
    return result
