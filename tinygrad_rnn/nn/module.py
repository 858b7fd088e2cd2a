"""Modules and parameters: the containers models are built from, mirroring ``torch.nn``.

A :class:`Module` registers every :class:`Parameter` and sub-module assigned to one of its
attributes, in the order of assignment, so that

* ``named_parameters()`` lists them under dotted names (``"encoder.weight"``), each shared
  parameter once;
* ``state_dict()`` returns NumPy copies under the same keys as ``torch.nn`` would, so a
  checkpoint can be compared with (or loaded from) a torch model of the same layout;
* ``load_state_dict()`` copies values *into* the existing parameters, keeping their dtype and
  their identity (an optimizer holding them keeps working).

Example
-------
>>> import tinygrad_rnn as tr
>>> class Net(tr.nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.hidden = tr.nn.Linear(3, 4, generator=0)
...         self.out = tr.nn.Linear(4, 1, generator=1)
...     def forward(self, x):
...         return self.out(self.hidden(x).tanh())
>>> net = Net()
>>> [name for name, _ in net.named_parameters()]
['hidden.weight', 'hidden.bias', 'out.weight', 'out.bias']
>>> net.num_parameters()
21

Why one module of about 830 lines: ``torch.nn.Module``'s API (parameters, buffers,
submodules, hooks, ``state_dict``, ``train``/``eval``, ``to``) and its containers, which all
use the registration machinery defined here.
"""
from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from typing import Any, Callable, Iterator, Mapping, NamedTuple, TypeVar

import numpy as np

from .. import _validate
from ..backend import (
    get_array_module, is_float_dtype, module_for_device, normalize_device, to_device,
)
from ..engine import no_grad
from ..tensor import Tensor

__all__ = ["Parameter", "Module", "IncompatibleKeys", "RemovableHandle", "eval_no_grad"]


class Parameter(Tensor):
    """A tensor that is a trainable weight of a :class:`Module`.

    Assigning a Parameter to a module attribute registers it: it then appears in
    ``parameters()``, ``named_parameters()`` and ``state_dict()``.

    Parameters
    ----------
    data : Tensor or array-like
        The initial value, copied. A Parameter is always a leaf: made from a tensor that has a
        graph, it keeps only the values.
    requires_grad : bool
        Default True. Only floating-point parameters can require a gradient.

    Notes
    -----
    Operations on a Parameter return plain :class:`~tinygrad_rnn.Tensor` objects; only the
    stored weight itself is a Parameter.
    """

    __slots__ = ()

    def __init__(self, data: Any = None, requires_grad: bool = True) -> None:
        if data is None:
            data = np.empty((0,), dtype=np.float32)
        if isinstance(data, Tensor):
            data = data._data  # values only: a parameter is a leaf
        try:
            super().__init__(data, requires_grad=requires_grad)
        except (TypeError, ValueError) as err:  # name the class the user called
            message = str(err).removeprefix("Tensor: ")
            raise type(err)(f"Parameter: {message}") from None

    def __repr__(self) -> str:
        body = np.array2string(np.asarray(self.numpy()), separator=", ", prefix="Parameter(")
        flag = ", requires_grad=True" if self.requires_grad else ", requires_grad=False"
        where = f", device={self.device!r}" if self.device != "cpu" else ""
        return f"Parameter({body}, dtype={self.dtype}{where}{flag})"


class RemovableHandle:
    """What the ``register_*_hook`` methods return: ``handle.remove()`` unregisters the
    hook (a second call does nothing); as a context manager it removes the hook on exit."""

    _ids = itertools.count()

    def __init__(self, hooks: "OrderedDict[int, Any]") -> None:
        self._hooks = hooks
        self.id = next(RemovableHandle._ids)

    def remove(self) -> None:
        self._hooks.pop(self.id, None)

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def _check_hook(where: str, hook: Any) -> None:
    """A TypeError naming ``where`` unless ``hook`` is callable."""
    if not callable(hook):
        raise TypeError(f"{where}: hook must be callable, got {type(hook).__name__}")


class IncompatibleKeys(NamedTuple):
    """What :meth:`Module.load_state_dict` returns (as torch's ``_IncompatibleKeys``)."""

    missing_keys: list
    unexpected_keys: list


def _as_buffer(value: Any) -> Tensor | None:
    """A buffer value as a Tensor that never requires a gradient (or None)."""
    if value is None:
        return None
    if isinstance(value, Parameter):
        raise TypeError("a Parameter cannot be a buffer; assign it as a parameter instead")
    if isinstance(value, Tensor):
        if value.requires_grad:
            value = value.detach()
        return value
    return Tensor(value)


#: the type of self in methods that return it (m.to(...) keeps the subclass's type)
_M = TypeVar("_M", bound="Module")


class Module:
    """Base class of every layer and model; subclasses implement :meth:`forward`.

    Call ``super().__init__()`` first in a subclass ``__init__``, then assign parameters and
    sub-modules as attributes. Calling the module calls ``forward``.

    Attributes
    ----------
    training : bool
        Set by :meth:`train` / :meth:`eval` on the module and all its sub-modules; layers such
        as :class:`~tinygrad_rnn.nn.Dropout` behave differently in training mode.
    """

    training: bool

    def __init__(self) -> None:
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())
        # hook id -> (hook, with_kwargs); see register_forward_pre_hook / _hook
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())

    # ---------------------------------------------------------------- calling
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the forward pre-hooks, :meth:`forward` and the forward hooks, as torch."""
        pre_hooks: Any = self.__dict__.get("_forward_pre_hooks")
        hooks: Any = self.__dict__.get("_forward_hooks")
        if not pre_hooks and not hooks:
            return self.forward(*args, **kwargs)
        for hook, with_kwargs in list(pre_hooks.values()):
            if with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError(
                            f"{type(self).__name__}: a forward pre-hook registered with "
                            f"with_kwargs=True must return None or (args, kwargs), got "
                            f"{type(result).__name__}")
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        output = self.forward(*args, **kwargs)
        for hook, with_kwargs in list(hooks.values()):
            result = hook(self, args, kwargs, output) if with_kwargs else hook(self, args,
                                                                               output)
            if result is not None:
                output = result
        return output

    def _add_hook(self, registry: str, where: str, hook: Any, prepend: Any,
                  with_kwargs: Any) -> RemovableHandle:
        _check_hook(where, hook)
        _validate.boolean(prepend, "prepend", where)
        _validate.boolean(with_kwargs, "with_kwargs", where)
        self._check_initialised("hooks")
        hooks = self.__dict__[registry]
        handle = RemovableHandle(hooks)
        hooks[handle.id] = (hook, bool(with_kwargs))
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """Call ``hook(module, args)`` before every forward; a non-None result replaces the
        positional arguments (a single value is wrapped in a tuple). With ``with_kwargs``
        the hook is ``hook(module, args, kwargs)`` and may return ``(args, kwargs)``.
        ``prepend`` runs it before the hooks registered earlier. Returns a
        :class:`RemovableHandle`."""
        return self._add_hook("_forward_pre_hooks", "register_forward_pre_hook", hook,
                              prepend, with_kwargs)

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False,
                              with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """Call ``hook(module, args, output)`` after every forward (``hook(module, args,
        kwargs, output)`` with ``with_kwargs``); a non-None result replaces the output.
        The output is the Tensor of the graph, so ``output.register_hook`` can watch its
        gradient. ``always_call`` (run even when forward raised) is not supported. Returns
        a :class:`RemovableHandle`."""
        _validate.boolean(always_call, "always_call", "register_forward_hook")
        if always_call:
            raise NotImplementedError("register_forward_hook: always_call=True is not "
                                      "supported by tinygrad_rnn")
        return self._add_hook("_forward_hooks", "register_forward_hook", hook, prepend,
                              with_kwargs)

    def register_full_backward_hook(self, hook: Callable, prepend: bool = False) -> Any:
        """Not supported: register a hook on the output tensor instead (a forward hook that
        calls ``output.register_hook(fn)`` sees dL/doutput)."""
        raise NotImplementedError(
            "register_full_backward_hook is not supported by tinygrad_rnn; use a forward "
            "hook that calls output.register_hook(fn) to see the gradient of the output")

    register_backward_hook = register_full_backward_hook

    # ---------------------------------------------------------------- registration
    def _check_initialised(self, what: str) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(
                f"cannot assign {what} before Module.__init__() is called; call "
                f"super().__init__() first in {type(self).__name__}.__init__"
            )

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, (Parameter, Module)):
            self._check_initialised("parameters and sub-modules")
            self.__dict__.pop(name, None)  # a plain attribute of that name is replaced
            if isinstance(value, Parameter):
                self.register_parameter(name, value)
            else:
                self.add_module(name, value)
        elif "_parameters" in self.__dict__ and name in self._parameters:
            if value is not None:
                raise TypeError(
                    f"cannot assign {type(value).__name__} to parameter '{name}' of "
                    f"{type(self).__name__}: assign a Parameter or None"
                )
            self._parameters[name] = None
        elif "_modules" in self.__dict__ and name in self._modules:
            if value is not None:
                raise TypeError(
                    f"cannot assign {type(value).__name__} to sub-module '{name}' of "
                    f"{type(self).__name__}: assign a Module or None"
                )
            self._modules[name] = None
        elif "_buffers" in self.__dict__ and name in self._buffers:
            self._buffers[name] = _as_buffer(value)
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        # only called when normal lookup fails: parameters, buffers and sub-modules live in
        # their registries, not in __dict__
        d = self.__dict__
        for registry in ("_parameters", "_buffers", "_modules"):
            if registry in d and name in d[registry]:
                return d[registry][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for registry in (self._parameters, self._buffers, self._modules):
            if name in registry:
                del registry[name]
                self._non_persistent.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self) -> list:
        extra = list(self._parameters) + list(self._buffers) + list(self._modules)
        return sorted(set(super().__dir__()) | set(extra))

    def _check_name(self, name: str, kind: str) -> None:
        if not isinstance(name, str):
            raise TypeError(f"{kind} name must be a str, got {type(name).__name__}")
        if name == "" or "." in name:
            raise KeyError(f"{kind} name must be non-empty and contain no '.', got {name!r}")
        if name in self.__dict__:
            raise KeyError(f"attribute '{name}' already exists on {type(self).__name__}")

    def _unregister(self, name: str) -> None:
        for registry in (self._parameters, self._buffers, self._modules):
            registry.pop(name, None)
        self._non_persistent.discard(name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Register ``param`` under ``name`` (``None`` registers an absent parameter, as a
        Linear without bias has ``bias = None``)."""
        self._check_initialised("parameters")
        self._check_name(name, "parameter")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot register {type(param).__name__} as parameter '{name}': wrap it in "
                f"tr.nn.Parameter"
            )
        if name not in self._parameters:  # a re-assignment keeps its slot, as in torch
            self._unregister(name)
        self._parameters[name] = param

    def add_module(self, name: str, module: "Module | None") -> None:
        """Register sub-module ``module`` under ``name``."""
        self._check_initialised("sub-modules")
        self._check_name(name, "module")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(self).__name__}: sub-module {name!r} is not a Module (got "
                            f"{type(module).__name__})")
        if name not in self._modules:
            self._unregister(name)
        self._modules[name] = module

    register_module = add_module

    def register_buffer(self, name: str, value: Any, persistent: bool = True) -> None:
        """Register non-trainable state (an array or Tensor, or None) under ``name``.

        Buffers are converted by :meth:`to` like parameters and, when ``persistent``, saved in
        ``state_dict()``; they never require a gradient.
        """
        self._check_initialised("buffers")
        self._check_name(name, "buffer")
        buf = _as_buffer(value)
        self._unregister(name)
        self._buffers[name] = buf
        if not persistent:
            self._non_persistent.add(name)

    # ---------------------------------------------------------------- traversal
    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, "Module"]]:
        """This module and all sub-modules (pre-order), with dotted names ('' for self).

        Iterative (an explicit stack), so deep nesting never hits the recursion limit.
        """
        if memo is None:
            memo = set()
        stack: list[tuple[str, Module]] = [(prefix, self)]
        while stack:
            name, module = stack.pop()
            if remove_duplicate:
                if id(module) in memo:
                    continue
                memo.add(id(module))
            yield name, module
            children = [(name + ("." if name else "") + child_name, child)
                        for child_name, child in module._modules.items() if child is not None]
            stack.extend(reversed(children))

    def modules(self) -> Iterator["Module"]:
        for _, module in self.named_modules():
            yield module

    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        """Direct sub-modules with their names (each module once)."""
        seen: set[int] = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self) -> Iterator["Module"]:
        for _, module in self.named_children():
            yield module

    def _named_members(self, registry: str, prefix: str, recurse: bool,
                       remove_duplicate: bool = True) -> Iterator[tuple[str, Any]]:
        # Any: Parameters from "_parameters", Tensors from "_buffers"
        seen: set[int] = set()
        if recurse:
            mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
        else:
            mods = iter([(prefix, self)])
        for mod_prefix, module in mods:
            for name, value in getattr(module, registry).items():
                if value is None:
                    continue
                if remove_duplicate:
                    if id(value) in seen:
                        continue
                    seen.add(id(value))
                yield mod_prefix + ("." if mod_prefix else "") + name, value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """Parameters with dotted names in registration order; a shared parameter is listed
        once, under the first name it was found by."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target: str) -> "Module":
        """The sub-module at dotted path ``target`` ('' is self)."""
        module = self
        if target == "":
            return module
        walked: list[str] = []
        for part in target.split("."):
            child = module._modules.get(part) if isinstance(module, Module) else None
            if child is None:
                where = ".".join(walked) or type(self).__name__
                raise AttributeError(f"{where} has no sub-module '{part}' (target {target!r})")
            walked.append(part)
            module = child
        return module

    def num_parameters(self, trainable_only: bool = False) -> int:
        """Number of scalar parameters (shared parameters counted once)."""
        return sum(math.prod(p.shape) for p in self.parameters()
                   if p.requires_grad or not trainable_only)

    def get_parameter(self, target: str) -> "Parameter":
        """The parameter at dotted path ``target`` (``'encoder.weight'``)."""
        return self._get_member(target, "_parameters", "parameter")

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at dotted path ``target``."""
        return self._get_member(target, "_buffers", "buffer")

    def _get_member(self, target: str, registry: str, kind: str) -> Any:
        path, _, name = target.rpartition(".")
        module = self.get_submodule(path)
        members = getattr(module, registry)
        if name not in members:
            raise AttributeError(f"{type(module).__name__} has no {kind} {name!r} (target "
                                 f"{target!r})")
        return members[name]

    # ---------------------------------------------------------------- state
    def _state_modules(self, prefix: str) -> Iterator[tuple[str, "Module"]]:
        """Every (dotted name, sub-module) pair, pre-order, a shared sub-module under every
        name that reaches it (unlike :meth:`named_modules`, which lists it once), as torch's
        ``state_dict`` walks them.

        Iterative like :meth:`named_modules`. A module that contains itself (a cycle of
        sub-modules) would give infinitely many names: that is a RuntimeError naming the path.
        """
        on_path: dict[int, str] = {}  # id -> name of the modules from the root to here
        stack: list[tuple[str, Module, bool]] = [(prefix, self, False)]
        while stack:
            name, module, leaving = stack.pop()
            if leaving:
                del on_path[id(module)]
                continue
            if id(module) in on_path:
                outer = on_path[id(module)]
                outer = f"the module '{outer}'" if outer else "the root module"
                raise RuntimeError(
                    f"state_dict of {type(self).__name__}: sub-module '{name}' is {outer}, "
                    f"which contains it; a cycle of sub-modules has no finite state dict"
                )
            on_path[id(module)] = name
            yield name, module
            stack.append((name, module, True))  # popped after all of its descendants
            children = [(name + ("." if name else "") + child_name, child)
                        for child_name, child in module._modules.items() if child is not None]
            stack.extend((n, c, False) for n, c in reversed(children))

    def state_dict(self, prefix: str = "", keep_vars: bool = False) -> "OrderedDict[str, Any]":
        """Parameters and persistent buffers by dotted key, as NumPy array copies.

        The copies are on the host whatever the module's device (for a module on a GPU each
        value is an explicit device-to-host copy), so a state dict can be saved, compared or
        loaded into a module on any device. The keys are exactly those of the torch module
        with the same layout. As in torch, whatever is shared appears under every name that
        reaches it: a parameter shared by two sub-modules under both keys, and a sub-module
        registered under two names (``self.a = self.b = lin``, ``Sequential(lin, lin)``) with
        all its keys under both prefixes (``named_parameters`` lists each once). With
        ``keep_vars=True`` the values are the Parameter/buffer tensors themselves (no copy, on
        the module's device), so shared keys hold the same object.
        """
        out: OrderedDict[str, Any] = OrderedDict()
        for mod_prefix, module in self._state_modules(prefix):
            dot = mod_prefix + ("." if mod_prefix else "")
            for name, p in module._parameters.items():
                if p is not None:
                    out[dot + name] = p if keep_vars else _host_copy(p._data)
            for name, b in module._buffers.items():
                if b is not None and name not in module._non_persistent:
                    out[dot + name] = b if keep_vars else _host_copy(b._data)
        return out

    def load_state_dict(self, state_dict: Mapping[str, Any],
                        strict: bool = True) -> IncompatibleKeys:
        """Copy values from ``state_dict`` into this module's parameters and buffers.

        Values (NumPy arrays, device arrays or Tensors, on any device) are copied into the
        existing arrays, on each parameter's device and converted to its dtype: the Parameter
        objects stay the same objects and keep their device and dtype (float64 host values
        loaded into a float32 model on a GPU become float32 on the GPU). Every check runs before
        anything is copied, so a failed load leaves the module untouched.

        A shared parameter or buffer has several keys (see :meth:`state_dict`); each key
        present must hold the same values (compared after conversion to the tensor's dtype),
        which are then loaded once. Keys of one shared tensor with different values are an
        error rather than "the last key wins" (torch copies them in order, so there the last
        one wins silently): such a checkpoint comes from a model in which the tensors were
        not shared. Load it with the keys of the copy you want (``strict=False`` and the others
        left out), or untie the model first.

        Parameters
        ----------
        state_dict : mapping
            Dotted key -> array or Tensor, e.g. from :meth:`state_dict` or
            ``tr.load(path)``, or a torch state dict converted with ``.numpy()``.
        strict : bool
            When True, keys missing from ``state_dict`` and keys the module does not have are
            errors. A shape mismatch is always an error.

        Returns
        -------
        IncompatibleKeys
            ``(missing_keys, unexpected_keys)``, as torch returns.

        Raises
        ------
        RuntimeError
            Listing every missing/unexpected key (strict), every shape mismatch with the key
            and both shapes, every value whose dtype cannot be cast within its kind (float
            values into an integer buffer), and every shared tensor whose keys hold different
            values.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(
                f"load_state_dict: expected a mapping of key -> array, got "
                f"{type(state_dict).__name__}"
            )
        _validate.boolean(strict, "strict", "load_state_dict")
        targets = self.state_dict(keep_vars=True)
        missing = [k for k in targets if k not in state_dict]
        unexpected = [k for k in state_dict if k not in targets]
        errors: list[str] = []
        updates: list[tuple[Tensor, Any]] = []
        first_key: dict[int, tuple[str, Any]] = {}  # id(target) -> its first key and value
        for key, target in targets.items():
            if key not in state_dict:
                continue
            value = _value_array(key, state_dict[key])
            if value.shape != target.shape:
                errors.append(
                    f"size mismatch for '{key}': the checkpoint has shape {value.shape}, "
                    f"the module's {'parameter' if isinstance(target, Parameter) else 'buffer'}"
                    f" has shape {target.shape}"
                )
                continue
            if not np.can_cast(value.dtype, target.dtype, casting="same_kind"):
                errors.append(
                    f"dtype mismatch for '{key}': cannot load {value.dtype} values into a "
                    f"{target.dtype} tensor without losing their kind (e.g. float into int)"
                )
                continue
            if id(target) in first_key:  # a shared tensor: load it once, from equal values
                other_key, other = first_key[id(target)]
                if not _same_values(other, value, target.dtype):
                    errors.append(
                        f"'{other_key}' and '{key}' name the same shared "
                        f"{'parameter' if isinstance(target, Parameter) else 'buffer'} but "
                        f"hold different values in the state dict; keep only the key to load"
                        f" (with strict=False) or untie the module"
                    )
                continue
            first_key[id(target)] = (key, value)
            updates.append((target, value))
        if strict and unexpected:
            errors.insert(0, "unexpected key(s) in state_dict: "
                          + ", ".join(repr(k) for k in unexpected))
        if strict and missing:
            errors.insert(0, "missing key(s) in state_dict: "
                          + ", ".join(repr(k) for k in missing))
        if errors:
            raise RuntimeError(
                f"error(s) in loading state_dict for {type(self).__name__} (nothing was "
                f"loaded):\n\t" + "\n\t".join(errors)
            )
        with no_grad():
            for target, value in updates:
                # copy_ copies the value to the target's device (an explicit copy, from the
                # host or from another device), casts it to the target's dtype, bumps version
                target.copy_(value)
        return IncompatibleKeys(missing, unexpected)

    # ---------------------------------------------------------------- modes and dtypes
    def train(self: _M, mode: bool = True) -> _M:
        """Set training mode on this module and every sub-module; returns self.

        ``mode`` is True or False, a Python bool or a NumPy one (``np.bool_``, stored as a
        Python bool); anything else is a TypeError (``train('no')`` would be truthy)."""
        if not isinstance(mode, (bool, np.bool_)):
            kind = type(mode)
            name = kind.__name__ if kind.__module__ == "builtins" else \
                f"{kind.__module__}.{kind.__name__}"
            raise TypeError(f"train(mode): mode must be a bool, got {mode!r} ({name})")
        mode = bool(mode)
        for module in self.modules():
            object.__setattr__(module, "training", mode)
        return self

    def eval(self: _M) -> _M:
        """Evaluation mode (``train(False)``); returns self."""
        return self.train(False)

    def requires_grad_(self: _M, requires_grad: bool = True) -> _M:
        """Switch gradient recording of every parameter on or off (freezing); returns self."""
        _validate.boolean(requires_grad, "requires_grad", "requires_grad_")
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter: to None (default) or to zeros in place."""
        for p in self.parameters():
            if set_to_none or p._grad is None:
                p.grad = None
            else:
                p._grad[...] = 0

    def to(self: _M, *args: Any, device: Any = None, dtype: Any = None,
           non_blocking: bool = False) -> _M:
        """Move and/or convert every parameter and buffer in place; returns self.

        ``to('cuda')``, ``to('standin')``, ``to('cpu')``, ``to(np.float64)``,
        ``to('cuda', np.float32)``, ``to(device=..., dtype=...)``. The Parameter objects stay
        the same objects, so an optimizer holding them stays valid (its state follows them to
        the new device and dtype at its next ``step()``); gradients move and convert too.
        Only floating-point tensors change dtype; integer and boolean buffers keep theirs. A
        move is an explicit copy (``backend.to_device``). Every argument is checked before
        anything moves: an unknown device, or ``'cuda'`` without CuPy or without a GPU
        (the RuntimeError says which), leaves the module as it was.

        As torch, a device may be given as a device object (anything whose ``str`` is a
        device name, such as ``tr.device('cpu')``), and ``to(tensor)`` takes the tensor's
        device and dtype. ``non_blocking`` is accepted and has no effect (copies are
        synchronous).
        """
        for a in args:
            if isinstance(a, Tensor):
                a_device, a_dtype = a.device, a.dtype
                device = a_device if device is None else device
                dtype = a_dtype if dtype is None else dtype
            elif _is_device(a):
                if device is not None:
                    raise TypeError("to(): device given twice")
                device = a
            else:
                if dtype is not None:
                    raise TypeError("to(): dtype given twice")
                dtype = a
        if device is not None and not isinstance(device, str):
            device = str(device)
        if device is not None:
            try:
                device = normalize_device(device)
            except (TypeError, ValueError) as err:
                raise type(err)(f"{type(self).__name__}.to: {err}") from None
            module_for_device(device)  # a clear error now if CuPy or a GPU is missing
        if dtype is not None:
            dtype = np.dtype(dtype)
            if not is_float_dtype(dtype):
                raise TypeError(f"to(): only floating-point dtypes are supported, got {dtype}")
        for t in list(self.parameters()) + list(self.buffers()):
            data, grad = t._data, t._grad
            if device is not None and t.device != device:
                data = to_device(data, device)
                grad = None if grad is None else to_device(grad, device)
            if dtype is not None and is_float_dtype(t.dtype) and t.dtype != dtype:
                data = data.astype(dtype)
                grad = None if grad is None else grad.astype(dtype)
            if data is not t._data:
                t.data = data  # the data setter bumps the version
                t._grad = grad
        return self

    def cpu(self: _M) -> _M:
        """``to('cpu')``."""
        return self.to("cpu")

    def cuda(self: _M, device: Any = None) -> _M:
        """``to('cuda')`` (needs CuPy and a GPU); ``device`` (a GPU index) is accepted as
        in torch, and only GPU 0 is used."""
        return self.to("cuda")

    @property
    def device(self) -> str:
        """The device of the parameters (and buffers); a RuntimeError when they are spread
        over several devices, ``'cpu'`` for a module without any."""
        devices = {t.device for t in list(self.parameters()) + list(self.buffers())}
        if len(devices) > 1:
            raise RuntimeError(f"{type(self).__name__}: parameters on several devices: "
                               f"{sorted(devices)}")
        return devices.pop() if devices else "cpu"

    def double(self: _M) -> _M:
        """Convert floating-point parameters and buffers to float64 in place."""
        return self.to(np.float64)

    def float(self: _M) -> _M:
        """Convert floating-point parameters and buffers to float32 in place."""
        return self.to(np.float32)

    def apply(self: _M, fn: Callable[["Module"], Any]) -> _M:
        """Call ``fn(module)`` on every sub-module (children first) and then on self, as
        torch does; e.g. a custom initialisation. Returns self."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # ---------------------------------------------------------------- printing
    def extra_repr(self) -> str:
        """The text inside this module's parentheses in ``repr`` (override in layers)."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        for name, module in self._modules.items():
            child = repr(module).replace("\n", "\n  ")
            lines.append(f"({name}): {child}")
        count = self.num_parameters()
        note = ""
        if count:
            note = f"  # {count:,} parameter{'s' if count != 1 else ''}"
        head = type(self).__name__ + "("
        if not lines:
            return head + ")" + note
        if len(lines) == 1 and not self._modules:
            return head + lines[0] + ")" + note
        return head + note + "\n  " + "\n  ".join(lines) + "\n)"


def _is_device(value: Any) -> bool:
    """Whether an argument of :meth:`Module.to` names a device: a str, or a device object
    (a class named ``device``, as torch's and ``tr.device``) rather than a dtype."""
    return isinstance(value, str) or type(value).__name__ == "device"


def _host_copy(a: Any) -> np.ndarray:
    """A NumPy copy of a backend array (an explicit device-to-host copy for device data)."""
    if get_array_module(a) is np:
        return np.array(a, copy=True)
    return to_device(a, "cpu")


def _same_values(a: Any, b: Any, dtype: Any) -> bool:
    """Whether two state-dict arrays (on any devices) hold the same values once converted to
    ``dtype`` (NaN equal to NaN): the test for the keys of one shared tensor."""
    a = _host_copy(a).astype(dtype, copy=False)
    b = _host_copy(b).astype(dtype, copy=False)
    return bool(np.array_equal(a, b, equal_nan=is_float_dtype(np.dtype(dtype))))


def _value_array(key: str, value: Any) -> Any:
    """A state-dict value as an array, refusing non-numeric data."""
    if isinstance(value, Tensor):
        arr = value._data
    elif isinstance(value, np.ndarray) or get_array_module(value) is not np:
        arr = value
    elif isinstance(value, (np.generic, int, float, bool)):
        arr = np.asarray(value)
    else:
        raise TypeError(
            f"load_state_dict: value for '{key}' must be an array or Tensor, got "
            f"{type(value).__name__} (convert torch tensors with .detach().numpy())"
        )
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"load_state_dict: value for '{key}' has non-numeric dtype {arr.dtype}")
    return arr


class eval_no_grad:
    """Run a block with ``model`` in eval mode and no graph recorded, then put every
    sub-module's training flag back as it was (what ``model.eval()`` plus
    ``with tr.no_grad():`` would do, undone on exit)::

        with eval_no_grad(model):
            logits = model(x)        # dropout off, nothing recorded

    Used by the predict methods of the classifiers and language models and by generation
    (:func:`tinygrad_rnn.decoding.generate`)."""

    def __init__(self, model: Module) -> None:
        self.model = model
        self.flags: list[tuple[Module, bool]] = []
        self.no_grad: Any = None

    def __enter__(self) -> Module:
        self.flags = [(m, m.training) for m in self.model.modules()]
        self.model.eval()
        self.no_grad = no_grad()
        self.no_grad.__enter__()
        return self.model

    def __exit__(self, *exc: Any) -> None:
        self.no_grad.__exit__(*exc)
        for m, flag in self.flags:
            object.__setattr__(m, "training", flag)
