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

Order of operations
-------------------
Every update performs torch's operations (its single-tensor, ``foreach=False`` path) in
torch's order, each rounded to the parameter's dtype, so extreme gradients (1e19 .. 3.4e38,
inf, nan, subnormals) give the same finite/inf/nan pattern and the same values to rounding:
``addcmul_(g, g, value=c)`` is ``(c g) g``, ``addcdiv_(m, d, value=c)`` is ``(c m) / d``,
``lerp_`` is exact at both ends with the weight rounded to the dtype, and scalars are
rounded to the dtype before use (NumPy's rule for Python scalars, as torch's kernels do).
tests/optim/test_extreme_gradients.py checks this step by step against torch.

One difference remains: torch's CPU kernels fuse ``a + c b`` (``add`` with ``alpha``,
``addcmul``, ``lerp``) into one rounding (a fused multiply-add), while NumPy rounds the
product first. The results then differ by about one rounding, and a product can overflow
to inf where torch's fused sum stays finite only when its factor exceeds 1 in magnitude (a
learning rate, momentum or weight decay above 1, or negative dampening). The one place where
this changes the outcome with ordinary hyperparameters, ``v - gbar^2`` in centered RMSprop,
reproduces torch's result explicitly.

Validation
----------
Hyperparameters must be real numbers (Python or NumPy ints and floats, or 0-d arrays of
them, stored as their scalar; a bool, a str, None or a sequence is a TypeError), finite and
in the range torch checks (a ValueError otherwise); flags (``nesterov``, ``amsgrad``,
``maximize``, ``centered``...) are ``True``/``False`` (NumPy's too) or the integers 0 and 1,
stored as bools. They are checked when a group is added or loaded and again at every
``step()``, so a value written into ``param_groups`` by hand (a scheduler's, a user's) is
checked too. Each message names the class (and method), the argument and the value.

torch's implementation switches
-------------------------------
The constructors take torch's keyword arguments ``foreach``, ``fused``, ``capturable`` and
``differentiable`` (where torch's constructor has them), so torch programs run unchanged.
``foreach`` (a speed switch) is accepted and has no effect; the other three are accepted at
their defaults (None or False) and refused when True (a ValueError that says why). None of
them is stored in ``param_groups``; a torch state dict that holds them loads (its extra
entries are kept).

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

Why one module of about 730 lines: the ``Optimizer`` base class (parameter groups, state,
``state_dict``, hooks) and the update helpers every optimizer of :mod:`tinygrad_rnn.optim`
uses.
"""
from __future__ import annotations

import copy
import itertools
import math
import numbers
from collections import defaultdict
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from .. import _validate
from ..backend import device_of, get_array_module, to_device
from ..engine import enable_grad, no_grad
from ..tensor import Tensor

__all__ = ["Optimizer", "ParamsT"]

ParamsT = Iterable[Tensor] | Iterable[dict[str, Any]]

# The step counter is kept like torch keeps it: a 0-d float32 array on the host.
_STEP_DTYPE = np.float32


def new_step_counter() -> np.ndarray:
    """A fresh step counter (0-d float32 host array holding 0), as torch stores ``step``."""
    return np.zeros((), dtype=_STEP_DTYPE)


def grad_array(param: Tensor) -> Any:
    """The gradient of ``param`` as the optimizers read it: a raw backend array, or None.

    The one place in :mod:`tinygrad_rnn.optim` that reads the gradient. Where ``p.grad`` is
    a Tensor (torch's ``.grad``) the raw array the engine accumulates into is ``p._grad``;
    before that change ``p.grad`` held the raw array itself (both are read here)."""
    return param._grad


def lerp_(start: Any, end: Any, weight: float) -> None:
    """In place: ``start <- start + weight * (end - start)`` (linear interpolation), in
    torch's order of operations (``Tensor.lerp_`` on the CPU).

    The weight is first rounded to the arrays' dtype, as torch does. The form is exact at
    both ends: ``start + w (end - start)`` for ``|w| < 0.5`` and ``end + (w - 1)(end -
    start)`` otherwise, where ``w - 1`` is computed in the arrays' dtype (exact there).
    """
    w = start.dtype.type(weight)
    diff = end - start                      # (end - start), one temporary
    if abs(w) < 0.5:
        diff *= w
        start += diff
    else:
        diff *= w - 1
        get_array_module(start).add(end, diff, out=start)


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

    Raises
    ------
    TypeError
        ``params`` is a single Tensor, a set or not iterable, holds something other than
        Tensors or dicts, or a hyperparameter or flag has the wrong type (see Validation in
        the module docstring); the message names the class and the argument.
    ValueError
        An empty parameter list, a non-leaf tensor, a tensor listed twice, or a
        hyperparameter out of range.

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
        name = type(self).__name__
        if isinstance(params, Tensor):
            raise TypeError(
                f"{name}: params given to the optimizer should be an iterable of Tensors or "
                f"dicts, but got a single Tensor; wrap it in a list"
            )
        if isinstance(params, (set, frozenset)):
            raise TypeError(
                f"{name}: optimizer parameters must be an ordered collection (a list), not a "
                f"set: the order of a set changes between runs"
            )
        if isinstance(params, (str, bytes, dict)) or not isinstance(params, Iterable):
            raise TypeError(
                f"{name}: params must be an iterable of Tensors or of dicts (parameter "
                f"groups), got {type(params).__name__}"
            )
        groups: list[Any] = list(params)
        if len(groups) == 0:
            raise ValueError(f"{name}: optimizer got an empty parameter list")
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
        where = type(self).__name__
        if not isinstance(param_group, dict):
            raise TypeError(
                f"{where}: a parameter group must be a dict, got {type(param_group).__name__}"
            )
        if "params" not in param_group:
            raise ValueError(f"{where}: a parameter group needs a 'params' entry")
        group = dict(param_group)
        params = group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError(
                f"{where}: optimizer parameters must be an ordered collection (a list), not "
                f"a set: the order of a set changes between runs"
            )
        elif isinstance(params, (str, bytes, dict)) or not isinstance(params, Iterable):
            raise TypeError(
                f"{where}: a parameter group's 'params' must be a Tensor or a list of "
                f"Tensors, got {type(params).__name__}"
            )
        else:
            params = list(params)
        for k, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(
                    f"{where}: optimizer can only optimize Tensors, but parameter {k} of the "
                    f"group is a {type(p).__name__}"
                )
            if not p.is_leaf:
                raise ValueError(
                    f"{where}: can't optimize a non-leaf Tensor (parameter {k} of the group, "
                    f"shape {p.shape}, made by {p.grad_fn.name if p.grad_fn else '?'})"
                )
        if len({id(p) for p in params}) != len(params):
            raise ValueError(
                f"{where}: a parameter group lists the same tensor more than once; it would "
                f"be updated several times per step"
            )
        group["params"] = params
        for name, default in self.defaults.items():
            group.setdefault(name, copy.deepcopy(default))
        self._check_group(group, where)

        existing = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in existing for p in params):
            raise ValueError(
                f"{where}: some parameters appear in more than one parameter group"
            )
        self.param_groups.append(group)

    def _check_group(self, group: dict[str, Any], where: str) -> None:
        """Check the hyperparameters of ``group`` and store them normalized (a 0-d array as
        its scalar, a flag as a bool): a TypeError for a value of the wrong type (a str, a
        bool for a number, None...), a ValueError for one out of range, each naming
        ``where`` (the class, or the method and the group), the argument and the value.

        The base class checks the learning rate; subclasses extend it. It runs when a group
        is added or loaded and again at every ``step()`` (a few scalar checks per group), so
        a value written into ``param_groups`` by hand is checked too."""
        group["lr"] = check_nonneg(where, "learning rate", "lr", group["lr"])

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
        set_to_none = _validate.flag(set_to_none, "set_to_none",
                                  f"{type(self).__name__}.zero_grad")
        for group in self.param_groups:
            for p in group["params"]:
                grad = grad_array(p)
                if grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    grad[...] = 0

    def _params_with_grad(self, group: dict[str, Any],
                          group_index: int) -> Iterator[tuple[Tensor, Any]]:
        """The ``(param, grad)`` pairs of a group whose grad is not None, after checking that
        each gradient is a raw backend array (TypeError otherwise) with its parameter's
        shape, dtype and device (ValueError otherwise)."""
        where = f"{type(self).__name__}.step"
        for k, p in enumerate(group["params"]):
            grad = grad_array(p)
            if grad is None:
                continue
            described = (f"parameter {k} of param group {group_index}, of shape {p.shape}, "
                         f"dtype {p.dtype} on {p.device}")
            if not _is_raw_array(grad):
                raise TypeError(f"{where}: {described}, {_not_an_array_message(grad)}")
            if (tuple(grad.shape) != p.shape or grad.dtype != p.dtype
                    or type(grad) is not type(p._data)):
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
            A ``closure`` that is not callable; a ``p.grad`` that is not a raw backend array
            (a Tensor, list or scalar assigned by hand), naming the parameter and the
            gradient's type; a hyperparameter of the wrong type in ``param_groups``.
        ValueError
            A gradient whose shape, dtype or device differs from its parameter's; a
            hyperparameter out of range in ``param_groups``.
        """
        where = f"{type(self).__name__}.step"
        if closure is not None and not callable(closure):
            raise TypeError(
                f"{where}: closure must be a callable that re-evaluates the model and "
                f"returns the loss (or None), got {type(closure).__name__} {closure!r}"
            )
        # every hyperparameter and gradient is checked before any parameter moves: a bad
        # one changes nothing (the closure runs first, as in torch, since it makes them)
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for i, group in enumerate(self.param_groups):
            self._check_group(group, f"{where}: parameter group {i}")
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

        Every entry is checked before anything changes: the state of a parameter is either
        empty (no step taken yet) or holds every buffer the update reads (``exp_avg`` and
        ``exp_avg_sq`` for Adam, ``square_avg`` for RMSprop, ``sum`` for Adagrad, and
        ``step``); ``step`` is a whole number >= 0; each buffer is a floating-point array of
        its parameter's shape, and second-moment estimates and sums of squares are >= 0
        (nan and inf, which a diverged run stores, are kept).

        Raises
        ------
        TypeError
            ``state_dict`` is not a dict, or an entry has the wrong type (a buffer that is
            not a floating-point array, a ``step`` that is not a number, a hyperparameter
            of the wrong type).
        ValueError
            When ``'state'`` or ``'param_groups'`` is missing, the number of groups or of
            parameters in a group differs, a buffer is missing, a state array's shape
            differs from its parameter's (a state dict made for other parameters, or for
            these in another order), a ``step`` is nan, negative or fractional, a second
            moment is negative, or a loaded hyperparameter is invalid. The message names
            the parameter's index and the entry. Nothing is changed then: the state and
            the groups are replaced only once all checks pass.
        """
        where = f"{type(self).__name__}.load_state_dict"
        if not isinstance(state_dict, dict):
            raise TypeError(
                f"{where}: state_dict must be a dict with 'state' and 'param_groups' entries "
                f"(as returned by state_dict()), got {type(state_dict).__name__}"
            )
        for key in ("state", "param_groups"):
            if key not in state_dict:
                raise ValueError(
                    f"{where}: the state dict has no {key!r} entry (expected the dict "
                    f"returned by state_dict(), with 'state' and 'param_groups'; got the "
                    f"keys {sorted(map(str, state_dict))})"
                )
        raw_groups, raw_state = state_dict["param_groups"], state_dict["state"]
        if not isinstance(raw_groups, (list, tuple)):
            raise TypeError(f"{where}: 'param_groups' must be a list of dicts, got "
                            f"{type(raw_groups).__name__}")
        if not isinstance(raw_state, dict):
            raise TypeError(f"{where}: 'state' must be a dict (parameter index -> dict of "
                            f"buffers), got {type(raw_state).__name__}")
        for k, saved in enumerate(raw_groups):
            if not isinstance(saved, dict):
                raise TypeError(f"{where}: parameter group {k} must be a dict, got "
                                f"{type(saved).__name__}")
            if not isinstance(saved.get("params"), (list, tuple)):
                raise ValueError(f"{where}: parameter group {k} needs a 'params' list of "
                                 f"parameter indices, got {saved.get('params')!r}")
        saved_groups = copy.deepcopy(list(raw_groups))
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(
                f"{where}: loaded state dict has {len(saved_groups)} parameter groups, the "
                f"optimizer has {len(self.param_groups)}"
            )
        for k, (group, saved) in enumerate(zip(self.param_groups, saved_groups)):
            if len(group["params"]) != len(saved["params"]):
                raise ValueError(
                    f"{where}: loaded state dict's parameter group {k} has "
                    f"{len(saved['params'])} parameters, the optimizer's has "
                    f"{len(group['params'])}"
                )
        new_groups = []
        for k, (group, saved) in enumerate(zip(self.param_groups, saved_groups)):
            saved["params"] = group["params"]
            for name, default in self.defaults.items():   # a dict from an older version
                saved.setdefault(name, copy.deepcopy(default))
            self._check_group(saved, f"{where}: parameter group {k}")
            new_groups.append(saved)
        param_of: dict[Any, tuple[Tensor, dict[str, Any]]] = {}
        for group, saved in zip(new_groups, raw_groups):
            for i, p in zip(saved["params"], group["params"]):
                index = _as_index(i)
                if index in param_of:
                    raise ValueError(f"{where}: parameter index {i!r} is listed twice in "
                                     f"'param_groups'")
                param_of[index] = (p, group)
        state: defaultdict[Any, dict[str, Any]] = defaultdict(dict)
        for key, value in raw_state.items():
            found = param_of.get(_as_index(key))
            if found is None:
                state[key] = copy.deepcopy(value)
            else:
                p, group = found
                state[p] = self._load_param_state(where, _as_index(key), value, p, group)
        self.state = state
        self.param_groups = new_groups

    # The buffers of a parameter's state (subclasses fill these in): all the arrays an
    # update reads, the ones every non-empty state holds (``step`` included where there is
    # one), the ones that are sums or averages of squares (>= 0), and the ones that may be
    # None (SGD's momentum buffer before its first step, as torch may store it).
    _state_buffers: tuple[str, ...] = ()
    _required_state: tuple[str, ...] = ()
    _nonneg_state: tuple[str, ...] = ()
    _nullable_state: tuple[str, ...] = ()

    def _load_param_state(self, where: str, index: Any, entries: Any, p: Tensor,
                          group: dict[str, Any]) -> dict[str, Any]:
        """The loaded state of parameter ``index`` (``p``), checked and copied to its device
        and dtype; a TypeError or ValueError naming ``where``, the index and the entry."""
        at = f"{where}: parameter {index}"
        if not isinstance(entries, dict):
            raise TypeError(f"{at}: its state must be a dict of buffers, got "
                            f"{type(entries).__name__}")
        if entries:
            missing = [name for name in self._required_state if name not in entries]
            if missing:
                raise ValueError(
                    f"{at}: the state has no {missing[0]!r} entry ({type(self).__name__} "
                    f"keeps {', '.join(map(repr, self._required_state))}); the state dict "
                    f"is incomplete or was made by another optimizer"
                )
        loaded: dict[str, Any] = {}
        for name, value in entries.items():
            if name == "step":
                loaded[name] = _load_step(at, value)
            elif value is None and name in self._nullable_state:
                loaded[name] = None
            else:
                array = state_array(value)
                if array is None:
                    if name not in self._state_buffers:
                        loaded[name] = copy.deepcopy(value)   # an entry no update reads
                        continue
                    raise TypeError(f"{at}: state entry {name!r} must be an array of shape "
                                    f"{p.shape}, got {type(value).__name__} {value!r}")
                if tuple(array.shape) != p.shape:
                    raise ValueError(
                        f"{at} has shape {p.shape} but its state entry {name!r} has shape "
                        f"{tuple(array.shape)}; the state dict was made for other "
                        f"parameters, or for these in another order"
                    )
                if np.dtype(array.dtype).kind != "f":
                    raise TypeError(f"{at}: state entry {name!r} has dtype {array.dtype}; "
                                    f"it must be a floating-point array")
                moved = to_device(array, p.device)
                moved = moved.astype(p.dtype, copy=moved is array or moved is value)
                if name in self._nonneg_state and bool((moved < 0).any()):
                    raise ValueError(
                        f"{at}: state entry {name!r} has negative values (min "
                        f"{float(moved.min())}); it is an average of squares, >= 0"
                    )
                loaded[name] = moved
        return loaded

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
def _real(where: str, name: str, value: Any) -> Any:
    """``value`` when it is a real number (a Python or NumPy int or float; a 0-d NumPy array
    of one is returned as its scalar), else a TypeError naming ``where`` and ``name``: a
    str, None, a bool, a sequence or a Tensor is refused (``float('0.1')`` would silently
    accept a string)."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where}: {name} must be a real number, got "
                        f"{type(value).__name__} {value!r}")
    return value


def _as_float(value: Any) -> float:
    """A real number as a float (an int too large for a float is inf)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def check_nonneg(where: str, what: str, name: str, value: Any) -> Any:
    """``value`` checked to be a finite real number >= 0 and returned (see :func:`_real`);
    a ValueError naming ``where``, ``what`` and ``name`` when it is negative, inf or nan
    (torch refuses negative values and nan; an infinite one only makes the parameters inf
    or nan, so it is refused too)."""
    value = _real(where, name, value)
    number = _as_float(value)
    if not number >= 0.0:
        raise ValueError(f"{where}: Invalid {what}: {value} ({name} must be >= 0)")
    if not math.isfinite(number):
        raise ValueError(f"{where}: Invalid {what}: {value} ({name} must be finite)")
    return value


def check_finite(where: str, what: str, name: str, value: Any) -> Any:
    """``value`` checked to be a finite real number (any sign) and returned."""
    value = _real(where, name, value)
    if not math.isfinite(_as_float(value)):
        raise ValueError(f"{where}: Invalid {what}: {value} ({name} must be finite)")
    return value


def check_unit_interval(where: str, what: str, name: str, value: Any) -> Any:
    """``value`` checked to be a real number with 0 <= value < 1 and returned."""
    value = _real(where, name, value)
    if not 0.0 <= _as_float(value) < 1.0:
        raise ValueError(f"{where}: Invalid {what}: {value} ({name} must be in [0, 1))")
    return value


def check_torch_flags(where: str, foreach: Any = None, fused: Any = None,
                       capturable: Any = False, differentiable: Any = False) -> None:
    """Check torch's implementation switches, accepted so that torch programs run unchanged.

    ``foreach`` (None, True or False) picks torch's multi-tensor kernels, a speed switch:
    accepted and without effect (every update here is the single-tensor one, in torch's
    order of operations). ``fused=True`` (torch's fused kernels, rounded differently),
    ``capturable=True`` (CUDA graphs) and ``differentiable=True`` (gradients through the
    update, i.e. higher-order gradients, out of scope) are refused with a ValueError; their
    defaults (None or False) are accepted. None of them is stored in ``param_groups``."""
    if foreach is not None:
        _validate.flag(foreach, "foreach", where)
    for name, value, why in (
            ("fused", fused, "torch's fused kernels do not exist here (there is one "
                             "implementation, torch's single-tensor order of operations)"),
            ("capturable", capturable, "CUDA graph capture is not supported"),
            ("differentiable", differentiable, "differentiating through the update would "
                                               "need higher-order gradients, which are out "
                                               "of scope")):
        if value is None and name == "fused":
            continue
        if _validate.flag(value, name, where):
            raise ValueError(f"{where}: {name}=True is not supported: {why}; leave {name} "
                             f"out (or pass {name}={None if name == 'fused' else False})")


def _is_raw_array(value: Any) -> bool:
    """True for the arrays ``p.grad`` may hold: a ``numpy.ndarray`` (not a subclass) or a
    device array (CuPy's, the stand-in's)."""
    return type(value) is np.ndarray or get_array_module(value) is not np


def _not_an_array_message(grad: Any) -> str:
    """The end of the error for a ``p.grad`` that is not a raw backend array."""
    return (f"has a gradient of type {type(grad).__module__}.{type(grad).__name__}; assign "
            f"p.grad a Tensor or an array of the parameter's shape and dtype")


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


def state_array(value: Any) -> Any:
    """A state entry as a raw array (a NumPy array, a device array, the data of a Tensor, a
    NumPy scalar as a 0-d array, a foreign array such as torch's through ``__array__``), or
    None when it is no array (a number, a list, None)."""
    if isinstance(value, Tensor):
        return value._data
    if isinstance(value, np.generic):
        return np.asarray(value)
    if not hasattr(value, "shape") or not hasattr(value, "dtype"):
        return None
    if isinstance(value, np.ndarray) or get_array_module(value) is not np:
        return value
    if hasattr(value, "__array__"):
        return np.asarray(value)              # a foreign host array (torch's)
    return None


def _load_step(at: str, value: Any) -> np.ndarray:
    """A loaded step counter as a 0-d float32 host array (as torch keeps it); a TypeError
    unless it is a real number (or a one-element array or Tensor of one), a ValueError
    unless it is a whole number >= 0, each naming ``at`` and ``'step'``."""
    array = state_array(value)
    if array is not None:
        if int(np.prod(array.shape)) != 1 or np.dtype(array.dtype).kind not in "iuf":
            raise TypeError(f"{at}: state entry 'step' must be a number (or a one-element "
                            f"array of one), got an array of shape {tuple(array.shape)} and "
                            f"dtype {array.dtype}")
        number = float(array.reshape(()))     # explicit: a device 0-d is read back
    else:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise TypeError(f"{at}: state entry 'step' must be a number, got "
                            f"{type(value).__name__} {value!r}")
        number = _as_float(value)
    if not (math.isfinite(number) and number >= 0 and number.is_integer()):
        raise ValueError(f"{at}: invalid state entry 'step': {number} (the number of steps "
                         f"taken must be a whole number >= 0)")
    return np.array(number, dtype=_STEP_DTYPE)


def _follow_parameter(state: dict[str, Any], param: Tensor) -> None:
    """Move the state arrays of ``param`` to its device and dtype if it has moved since they
    were created (``Module.to`` after a step). The arrays of one parameter are created and
    moved together, so when the first one is in place (the usual case) all are: one type
    and one dtype comparison per parameter and step."""
    data = param._data
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
