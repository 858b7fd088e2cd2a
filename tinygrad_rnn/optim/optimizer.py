"""The :class:`Optimizer` base class: parameter groups, per-parameter state, ``zero_grad``,
``step`` and checkpointing with ``state_dict`` / ``load_state_dict``.

The structure mirrors ``torch.optim.Optimizer`` so that code, checkpoints and numbers can be
compared between the two:

* ``param_groups`` is a list of dicts, each with a ``'params'`` list and one value per
  hyperparameter (the optimizer's ``defaults`` fill in what a group leaves out);
* ``state`` maps a parameter tensor to a dict of its buffers (momentum, moment estimates,
  step counter);
* ``state_dict()`` returns ``{'state': {index: {...}}, 'param_groups': [{..., 'params':
  [indices]}]}`` where parameters are numbered in the order they appear across the groups.

A subclass implements :meth:`Optimizer._update` (one parameter's update on raw backend
arrays) and, if it has any, :meth:`Optimizer._check_group` (hyperparameter validation).

Every update runs inside :class:`tinygrad_rnn.no_grad` and writes into the parameter's array
in place through the tensor's in-place methods (``add_``, ``mul_``), which bump the tensor's
version counter: a graph that saved the old value for backward raises at ``backward()``
instead of silently using the new value.

Devices
-------
State arrays (momentum, moment estimates) are created with the parameter's array module, on
its device and in its dtype; hyperparameters stay Python floats, which every backend takes
as scalars of the array's dtype, so a step never reads device data back to the host. The
step counter is the exception, as in torch: a 0-d float32 *host* array, because the bias
corrections are computed from it on the host. If a parameter is moved (``Module.to``) after
its state was created, the state follows it to its device and dtype at the next ``step()``
(an explicit copy). ``state_dict()`` returns copies on the parameters' devices;
``load_state_dict`` copies every entry to its parameter's device and dtype, so a state saved
on one device loads on another.
"""
from __future__ import annotations

import copy
import itertools
from collections import defaultdict
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from ..backend import device_of, get_array_module, to_device
from ..engine import enable_grad, no_grad
from ..tensor import Tensor

__all__ = ["Optimizer", "ParamsT"]

ParamsT = Iterable[Tensor] | Iterable[dict[str, Any]]

# The step counter is kept like torch keeps it: a 0-d float32 array on the host.
_STEP_DTYPE = np.float32


def _new_step_counter() -> np.ndarray:
    """A fresh step counter (0-d float32 host array holding 0), as torch stores ``step``."""
    return np.zeros((), dtype=_STEP_DTYPE)


def _lerp_(start: Any, end: Any, weight: float) -> None:
    """In place: ``start <- start + weight * (end - start)`` (linear interpolation).

    Written in the form that is exact at both ends: ``start + w (end - start)`` for
    ``w < 0.5`` and ``end - (1 - w)(end - start)`` otherwise.
    """
    if weight < 0.5:
        start += weight * (end - start)
    else:
        start[...] = end - (1.0 - weight) * (end - start)


class Optimizer:
    """Base class of the optimizers in :mod:`tinygrad_rnn.optim`.

    Parameters
    ----------
    params : iterable of Tensor, or iterable of dict
        The tensors to optimize, or parameter groups: dicts with a ``'params'`` entry (a list
        of tensors) and optional hyperparameter overrides, e.g.
        ``[{'params': enc, 'lr': 1e-2}, {'params': dec}]``. Sets are refused (their order
        is not reproducible, so ``state_dict`` indices would not be either).
    defaults : dict
        Default hyperparameters, used for every key a group does not give.

    Attributes
    ----------
    param_groups : list of dict
        The groups; change ``group['lr']`` here to change a learning rate (schedulers do).
    state : dict
        ``state[p]`` is the dict of buffers of parameter ``p`` (created on its first update).
    defaults : dict

    Notes
    -----
    Parameters whose ``.grad`` is ``None`` are skipped by ``step()``: they are not updated and
    get no state (so their step counters do not advance), as in torch.
    """

    def __init__(self, params: ParamsT, defaults: dict[str, Any]) -> None:
        self.defaults = dict(defaults)
        self.state: defaultdict[Any, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        self._opt_called = False
        if isinstance(params, Tensor):
            raise TypeError(
                "params given to the optimizer should be an iterable of Tensors or dicts, "
                "but got a single Tensor; wrap it in a list"
            )
        if isinstance(params, (set, frozenset)):
            raise TypeError(
                "optimizer parameters must be an ordered collection (a list), not a set: "
                "the order of a set changes between runs"
            )
        groups = list(params)
        if len(groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    # ---------------------------------------------------------------- groups
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a parameter group (e.g. layers unfrozen during fine-tuning).

        Parameters
        ----------
        param_group : dict
            ``'params'`` (a Tensor or a list of Tensors) and optional hyperparameters; the
            missing ones are taken from ``self.defaults``.

        Raises
        ------
        TypeError
            When ``param_group`` is not a dict, its params are a set or contain a non-Tensor.
        ValueError
            For a non-leaf tensor, a parameter listed twice or already in another group, or
            an invalid hyperparameter.
        """
        if not isinstance(param_group, dict):
            raise TypeError(
                f"a parameter group must be a dict, got {type(param_group).__name__}"
            )
        if "params" not in param_group:
            raise ValueError("a parameter group needs a 'params' entry")
        group = dict(param_group)
        params = group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError(
                "optimizer parameters must be an ordered collection (a list), not a set: "
                "the order of a set changes between runs"
            )
        else:
            params = list(params)
        for k, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(
                    f"optimizer can only optimize Tensors, but parameter {k} of the group is "
                    f"a {type(p).__name__}"
                )
            if not p.is_leaf:
                raise ValueError(
                    f"can't optimize a non-leaf Tensor (parameter {k} of the group, shape "
                    f"{p.shape}, made by {p.grad_fn.name if p.grad_fn else '?'})"
                )
        if len({id(p) for p in params}) != len(params):
            raise ValueError(
                "a parameter group lists the same tensor more than once; it would be "
                "updated several times per step"
            )
        group["params"] = params
        for name, default in self.defaults.items():
            group.setdefault(name, copy.deepcopy(default))
        self._check_group(group)

        existing = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in existing for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def _check_group(self, group: dict[str, Any]) -> None:
        """Raise ``ValueError`` naming the bad value when a hyperparameter is invalid.
        The base class checks the learning rate; subclasses extend it."""
        _check_nonneg("learning rate", group["lr"])

    # ---------------------------------------------------------------- gradients
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all optimized tensors.

        Parameters
        ----------
        set_to_none : bool
            ``True`` (default): set ``p.grad = None``, which frees the memory and makes the
            next ``step()`` skip parameters that get no gradient. ``False``: fill the existing
            gradient arrays with zeros in place.
        """
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad[...] = 0

    def _params_with_grad(self, group: dict[str, Any],
                          group_index: int) -> Iterator[tuple[Tensor, Any]]:
        """The ``(param, grad)`` pairs of a group whose grad is not None, after checking that
        each gradient is a raw backend array (TypeError otherwise) with its parameter's
        shape, dtype and device (ValueError otherwise)."""
        where = f"{type(self).__name__}.step"
        for k, p in enumerate(group["params"]):
            grad = p.grad
            if grad is None:
                continue
            described = (f"parameter {k} of param group {group_index}, of shape {p.shape}, "
                         f"dtype {p.dtype} on {p.device}")
            if not _is_raw_array(grad):
                raise TypeError(f"{where}: {described}, {_not_an_array_message(grad)}")
            if (tuple(grad.shape) != p.shape or grad.dtype != p.dtype
                    or type(grad) is not type(p.data)):
                raise ValueError(
                    f"{where}: {described} has a gradient of shape {tuple(grad.shape)}, "
                    f"dtype {grad.dtype} on {device_of(grad)}"
                )
            yield p, grad

    # ---------------------------------------------------------------- the update
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient, once.

        Parameters
        ----------
        closure : callable, optional
            Re-evaluates the model and returns the loss (run with gradients enabled, before
            the update); its return value is returned.

        Raises
        ------
        TypeError
            A ``p.grad`` that is not a raw backend array (a Tensor, list or scalar assigned
            by hand), naming the parameter and the gradient's type.
        ValueError
            A gradient whose shape, dtype or device differs from its parameter's.
        """
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        # every gradient is checked before any parameter moves: a bad one changes nothing
        checked = [list(self._params_with_grad(group, i))
                   for i, group in enumerate(self.param_groups)]
        with no_grad():
            for group, pairs in zip(self.param_groups, checked):
                hyper = {k: v for k, v in group.items() if k != "params"}
                for p, grad in pairs:
                    state = self.state[p]
                    if state:
                        _follow_parameter(state, p)
                    self._update(p, grad, state, hyper)
        self._opt_called = True
        return loss

    def _update(self, p: Tensor, grad: Any, state: dict[str, Any],
                group: dict[str, Any]) -> None:
        """Update one parameter in place (under ``no_grad``). ``grad`` is the raw gradient
        array and must not be modified; ``state`` is the parameter's state dict."""
        raise NotImplementedError

    # ---------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The optimizer's state as a dict, with torch's structure.

        Returns
        -------
        dict
            ``{'state': {index: {name: value}}, 'param_groups': [{hyperparameters...,
            'params': [index, ...]}]}``. Parameters are numbered 0, 1, ... in the order they
            appear in ``param_groups``.

        Notes
        -----
        Unlike torch, the arrays are copies, so the dict is a snapshot: training on does not
        change a state dict taken earlier (no ``copy.deepcopy`` needed before saving). They
        stay on the parameters' device; :func:`tinygrad_rnn.save` copies them to the host.
        """
        index_of: dict[int, int] = {}
        packed_groups = []
        counter = itertools.count()
        for group in self.param_groups:
            packed = {k: copy.deepcopy(v) for k, v in group.items() if k != "params"}
            for p in group["params"]:
                if id(p) not in index_of:
                    index_of[id(p)] = next(counter)
            packed["params"] = [index_of[id(p)] for p in group["params"]]
            packed_groups.append(packed)
        packed_state = {}
        for key, value in self.state.items():
            index = index_of.get(id(key), key) if isinstance(key, Tensor) else key
            packed_state[index] = _copy_state(value)
        return {"state": packed_state, "param_groups": packed_groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state from :meth:`state_dict` (ours, or torch's with the same layout).

        The groups must list the same number of parameters as this optimizer's groups;
        parameters are matched by position. State arrays (NumPy arrays, device arrays or
        Tensors, from any device) are copied to each parameter's device and converted to its
        dtype; step counters become 0-d float32 host arrays.
        Hyperparameters (``lr`` ...) are taken from the state dict (a group that lacks one
        gets the optimizer's default) and checked as the constructor checks them.

        Raises
        ------
        ValueError
            When the number of groups or of parameters in a group differs, a state array's
            shape differs from its parameter's (a state dict made for other parameters, or
            for these in another order), or a loaded hyperparameter is invalid. Nothing is
            changed then: the state and the groups are replaced only once all checks pass.
        """
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(
                f"loaded state dict has {len(saved_groups)} parameter groups, the optimizer "
                f"has {len(self.param_groups)}"
            )
        for k, (group, saved) in enumerate(zip(self.param_groups, saved_groups)):
            if len(group["params"]) != len(saved["params"]):
                raise ValueError(
                    f"loaded state dict's parameter group {k} has {len(saved['params'])} "
                    f"parameters, the optimizer's has {len(group['params'])}"
                )
        param_of = {
            _as_index(i): p
            for i, p in zip(
                itertools.chain.from_iterable(g["params"] for g in saved_groups),
                itertools.chain.from_iterable(g["params"] for g in self.param_groups),
            )
        }
        state: defaultdict[Any, dict[str, Any]] = defaultdict(dict)
        for key, value in state_dict["state"].items():
            p = param_of.get(_as_index(key))
            if p is None:
                state[key] = copy.deepcopy(value)
            else:
                self._check_state_shapes(_as_index(key), value, p)
                state[p] = {name: _cast_state_value(name, v, p) for name, v in value.items()}
        new_groups = []
        for group, saved in zip(self.param_groups, saved_groups):
            saved["params"] = group["params"]
            for name, default in self.defaults.items():   # a dict from an older version
                saved.setdefault(name, copy.deepcopy(default))
            self._check_group(saved)
            new_groups.append(saved)
        self.state = state
        self.param_groups = new_groups

    def _check_state_shapes(self, index: int, entries: dict[str, Any], p: Tensor) -> None:
        """Every state array of a parameter (momentum, moment estimates, ...) has the
        parameter's shape; the step counter is a number. A mismatch means the state dict was
        made for other parameters, or for the same ones in another order."""
        for name, value in entries.items():
            if name == "step" or not hasattr(value, "shape"):
                continue
            shape = tuple(value.shape)
            if shape != p.shape:
                raise ValueError(
                    f"{type(self).__name__}.load_state_dict: parameter {index} has shape "
                    f"{p.shape} but its state entry {name!r} has shape {shape}; the state "
                    f"dict was made for other parameters, or for these in another order"
                )

    # ---------------------------------------------------------------- display
    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(k for k in group if k != "params"):
                lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)


# ------------------------------------------------------------------------- helpers
def _check_nonneg(what: str, value: Any) -> None:
    """ValueError unless ``value`` is a number >= 0 (NaN is refused too)."""
    try:
        ok = float(value) >= 0.0
    except (TypeError, ValueError):
        raise ValueError(f"Invalid {what}: {value!r} (expected a number)") from None
    if not ok:
        raise ValueError(f"Invalid {what}: {value} (must be >= 0)")


def _check_unit_interval(what: str, value: Any) -> None:
    """ValueError unless 0 <= value < 1."""
    try:
        ok = 0.0 <= float(value) < 1.0
    except (TypeError, ValueError):
        raise ValueError(f"Invalid {what}: {value!r} (expected a number)") from None
    if not ok:
        raise ValueError(f"Invalid {what}: {value} (must be in [0, 1))")


def _is_raw_array(value: Any) -> bool:
    """True for the arrays ``p.grad`` may hold: a ``numpy.ndarray`` (not a subclass) or a
    device array (CuPy's, the stand-in's)."""
    return type(value) is np.ndarray or get_array_module(value) is not np


def _not_an_array_message(grad: Any) -> str:
    """The end of the error for a ``p.grad`` that is not a raw backend array."""
    hint = (" (assign its array, p.grad = g.data)" if isinstance(grad, Tensor)
            else " (convert it, e.g. p.grad = np.asarray(g, dtype=p.dtype))")
    return (f"has a gradient of type {type(grad).__module__}.{type(grad).__name__}; p.grad "
            f"must be a raw backend array (a numpy.ndarray, or a CuPy array on the GPU), not "
            f"a Tensor, list or scalar{hint}")


def _as_index(key: Any) -> Any:
    """State-dict keys are ints; accept their string form too (as some file formats
    store dict keys)."""
    if isinstance(key, str) and key.isdigit():
        return int(key)
    if isinstance(key, (np.integer,)):
        return int(key)
    return key


def _copy_state(value: Any) -> Any:
    """A copy of a state dict entry: arrays are copied, containers recursed into."""
    if isinstance(value, dict):
        return {k: _copy_state(v) for k, v in value.items()}
    if hasattr(value, "shape") and hasattr(value, "copy"):
        return value.copy()
    return copy.deepcopy(value)


def _cast_state_value(name: str, value: Any, param: Tensor) -> Any:
    """A loaded state entry on the parameter's device and in its dtype (always a copy). The
    step counter stays a 0-d float32 host array, as torch keeps it on the CPU."""
    if isinstance(value, Tensor):
        value = value.data
    if name == "step":
        return np.array(float(value), dtype=_STEP_DTYPE)  # explicit: a device 0-d is read back
    if hasattr(value, "shape") or hasattr(value, "__array__"):
        if isinstance(value, np.generic) or (
                get_array_module(value) is np and not isinstance(value, np.ndarray)):
            value = np.asarray(value)     # a NumPy scalar, or a foreign array (torch's)
        moved = to_device(value, param.device)
        return moved.astype(param.dtype, copy=moved is value)
    return copy.deepcopy(value)


def _follow_parameter(state: dict[str, Any], param: Tensor) -> None:
    """Move the state arrays of ``param`` to its device and dtype if it has moved since they
    were created (``Module.to`` after a step). The arrays of one parameter are created and
    moved together, so when the first one is in place (the usual case) all are: one type
    and one dtype comparison per parameter and step."""
    data = param.data
    for name, value in state.items():
        if name != "step" and hasattr(value, "shape"):
            if type(value) is type(data) and value.dtype == data.dtype:
                return
            break
    else:
        return                                    # no state arrays (yet)
    for name, value in state.items():
        if name != "step" and hasattr(value, "shape"):
            state[name] = to_device(value, device_of(data)).astype(data.dtype, copy=False)
