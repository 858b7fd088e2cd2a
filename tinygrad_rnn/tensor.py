"""The :class:`Tensor`: an array, its gradient, and the op that created it.

A tensor that requires a gradient and was made by an op points to that op's node
(``_ctx``); the node points to its input tensors. Nodes never point to their outputs, so a
graph is a tree of references from the loss down to the leaves and is freed by reference
counting alone.

Why this module is longer than the others (about 1,700 lines): it is one class, torch's
``Tensor`` API (about 190 methods, operators and aliases: properties, conversions, in-place
writes, arithmetic, comparisons, reductions, shape methods), which torch programs call on
the tensor itself. Split into mixin classes in other modules, the methods would have to
import Tensor and the engine inside each call (a mixin module loads before Tensor exists),
about 1 microsecond per call, a third of an in-place ``add_``. Everything the methods build
on lives beside it, in the other modules of the tensor layer:

* :mod:`tinygrad_rnn.engine`: recording an op (every ``Function.apply``) and recorded
  in-place writes, and the backward walk;
* :mod:`tinygrad_rnn.grad_mode`: whether ops are recorded (``no_grad``);
* :mod:`tinygrad_rnn.dtypes`: the dtype policy (what data, scalars and mixed inputs become);
* :mod:`tinygrad_rnn.creation`: ``zeros``, ``arange``, ``randn``, ``cat``, ``stack``, ...;
* :mod:`tinygrad_rnn.arguments`: the argument checks shared with the creation functions.

The methods are thin: each checks its arguments and calls a primitive op of
:mod:`tinygrad_rnn.ops`, where the derivative is written.
"""
from __future__ import annotations

import math
import weakref
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from .arguments import UNSET, check_axis, check_shape, generator_for, int_arg, is_int
from .backend import (
    device_of, get_array_module, get_default_dtype, is_float_dtype, normalize_device, to_device,
)
from .grad_mode import GRAD_MODE
from .ops import (
    Abs, Add, BroadcastTo, Cast, Clip, Copy, Div, Exp, GetItem, Log, LogSoftmax, MaskedFill,
    MatMul, Max, Maximum, Mean, Min, Minimum, Mul, Neg, Norm, Pow, ReLU, Reshape, Sigmoid,
    Softmax, Sqrt, Sub, Sum, Tanh, ToDevice, Transpose, Unbind,
)
from .ops.base import Context
from .ops.elementwise import clip_bounds
from .ops.shape import is_advanced_index, check_index_bounds

# Tensor has methods named bool, int and float (torch's casts): inside the class those names
# are the methods, so annotations there name the builtin types by these aliases
_bool = bool
_int = int
_float = float

__all__ = ["Tensor", "Size", "ValuesIndices", "RemovableHandle", "check_tensor", "constant_data"]


class _Version:
    """A counter shared by a tensor and its detached views; bumped by every in-place write."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


class RemovableHandle:
    """Returned by :meth:`Tensor.register_hook`; ``remove()`` unregisters the hook."""

    def __init__(self, hooks: list, hook: Callable) -> None:
        self._hooks, self._hook = hooks, hook

    def remove(self) -> None:
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)


class Tensor:
    """An n-dimensional array that can record the operations applied to it.

    Parameters
    ----------
    data : array-like
        Python numbers and lists become ``float32`` (floats) or ``int64`` (ints); NumPy
        arrays keep their dtype (float64 stays float64). A list follows the same rule, as in
        torch: one of Python numbers only is float32 (or int64), one that holds NumPy float64
        scalars or arrays (or float64 tensors) is float64 (``tensor([np.float64(1), 2.0])``,
        ``tensor([np.zeros(2)])``), otherwise NumPy's dtype of the entries with float64
        turned into float32 (``tensor([np.float32(1), 2])`` is float32). The data is copied.
    requires_grad : bool
        Record operations on this tensor so ``backward()`` can compute ``.grad``. Only
        floating-point tensors can require a gradient.
    dtype : dtype, optional
        Convert the data to this dtype.
    device : {'cpu', 'cuda', 'standin'}, optional
        Where the data lives (default: where ``data`` already is; Python and NumPy data are
        on the CPU). ``'cuda'`` needs CuPy and a GPU; ``'standin'`` is the test device that
        plays a GPU on the CPU (:mod:`tinygrad_rnn.testing.cupy_emulator`, registered when
        ``tinygrad_rnn.testing`` is imported). Ops run on their inputs' device; mixing
        devices in one op is an error naming both.

    Notes
    -----
    ``.grad`` and ``.data`` are Tensors, as in torch (``p.data.add_(p.grad, alpha=-lr)``);
    the raw backend array (NumPy or CuPy) is :attr:`array`. ``.grad`` is accumulated over
    backward passes until
    zeroed. Operations with a Python or NumPy scalar keep the tensor's float dtype.
    """

    __slots__ = ("_data", "_grad", "_grad_view", "_requires_grad", "_ctx", "_out_index", "_version",
                 "_hooks", "name", "_base", "_view_steps", "_gen", "_history", "__weakref__")
    __array_priority__ = 1000  # ndarray (op) Tensor defers to Tensor's reflected operators

    def __init__(self, data: Any, requires_grad: bool = False, dtype: Any = None,
                 device: Any = None) -> None:
        self._data = to_array(data, dtype, device=device)
        self._grad: Any = None  # the gradient's raw array (engine.py writes it)
        self._grad_view: Tensor | None = None  # the Tensor .grad last returned for it
        self._ctx: Context | None = None
        self._out_index = 0
        self._version = _Version()
        self._hooks: list[Callable] = []
        self.name: str | None = None
        self._requires_grad = False
        self._base: Tensor | None = None  # views: the tensor whose memory they show
        self._view_steps: tuple = ()  # views: how they are made from _base's array
        self._gen = 0  # bases: rebases so far; views: their base's count at their graph
        self._history: tuple | None = None  # (clocks, earlier states) after rebases
        if not isinstance(requires_grad, (bool, np.bool_)):
            raise TypeError(f"Tensor: requires_grad must be a bool, got {requires_grad!r} "
                            f"({type(requires_grad).__name__})")
        if requires_grad:
            if not is_float_dtype(self._data.dtype):
                raise TypeError(f"Tensor: requires_grad=True needs a floating-point dtype, got "
                                f"{self._data.dtype} (give float data or dtype=np.float32)")
            self.requires_grad_(True)

    @classmethod
    def _wrap(cls, array: Any) -> "Tensor":
        """A tensor around an existing array, without copying (for ops and kernels). A NumPy
        scalar (what NumPy's full reductions return) becomes a 0-d array, so every tensor's
        data is an array: ``.numpy()`` returns an ndarray and in-place ops work on 0-d
        tensors too."""
        t = cls.__new__(cls)
        if isinstance(array, np.generic):
            array = np.asarray(array)
        t._data = array
        t._grad = None
        t._grad_view = None
        t._ctx = None
        t._out_index = 0
        t._version = _Version()
        t._hooks = []
        t.name = None
        t._requires_grad = False
        t._base = None
        t._view_steps = ()
        t._gen = 0
        t._history = None
        return t

    # ---------------------------------------------------------------- basic properties
    @property
    def array(self) -> Any:
        """The raw backend array that holds the data (a NumPy array on the CPU, a CuPy array
        on a GPU), shared, not copied. Writing into it bypasses the version counter, so
        prefer the tensor's own in-place methods; ``numpy()`` gives a host array."""
        return self._data

    @property
    def data(self) -> "Tensor":
        """torch's ``.data``: this tensor's values as a new tensor that shares the memory and
        is cut from the graph (``p.data.add_(p.grad, alpha=-lr)`` updates ``p``). Unlike
        torch, it shares the version counter too, so a write through it that would corrupt a
        saved tensor is caught at backward instead of giving a wrong gradient. Assigning
        ``t.data = other`` replaces the values (shape and dtype may change) and counts as an
        in-place write."""
        t = Tensor._wrap(self._data)
        t._version = self._version
        return t

    @data.setter
    def data(self, value: Any) -> None:
        self._data = value._data if isinstance(value, Tensor) else to_array(value, copy=False)
        self._version.value += 1

    @property
    def grad(self) -> "Tensor | None":
        """dL/dself after ``backward()``, a Tensor of this tensor's shape, dtype and device
        that has no history (None until a backward reaches this tensor). It shares memory
        with the gradient the engine accumulates, so ``p.grad.zero_()`` and
        ``p.grad.data.zero_()`` work as in torch. Assign a Tensor, an array or None."""
        raw = self._grad
        if raw is None:
            return None
        view = self._grad_view
        if view is None or view._data is not raw:
            view = self._grad_view = Tensor._wrap(raw)
        return view

    @grad.setter
    def grad(self, value: Any) -> None:
        if value is None:
            self._grad = self._grad_view = None
            return
        if isinstance(value, Tensor):
            if value.requires_grad:
                raise RuntimeError(
                    f"grad: cannot assign a tensor that requires a gradient as .grad (shape "
                    f"{value.shape}); assign value.detach()")
            raw = value._data
        else:
            raw = value
        if not hasattr(raw, "shape") or not hasattr(raw, "dtype"):
            raise TypeError(f"grad: assign a Tensor, an array or None, got "
                            f"{type(value).__name__}")
        if tuple(raw.shape) != self.shape:
            raise RuntimeError(f"grad: assigned grad has shape {tuple(raw.shape)}, the tensor "
                               f"has shape {self.shape}")
        if raw.dtype != self.dtype:
            raise RuntimeError(f"grad: assigned grad has dtype {raw.dtype}, the tensor has "
                               f"dtype {self.dtype}")
        if device_of(raw) != self.device:
            raise RuntimeError(f"grad: assigned grad is on {device_of(raw)}, the tensor is on "
                               f"{self.device}")
        self._grad = raw
        self._grad_view = value if isinstance(value, Tensor) else None

    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Set ``requires_grad`` in place on a leaf tensor; returns self."""
        if not isinstance(requires_grad, (bool, np.bool_)):
            raise TypeError(f"requires_grad_: requires_grad must be a bool, got "
                            f"{requires_grad!r} ({type(requires_grad).__name__})")
        if requires_grad and not is_float_dtype(self.dtype):
            raise TypeError(
                f"only floating-point tensors can require a gradient, got dtype {self.dtype}"
            )
        if self._ctx is not None and not requires_grad:
            raise RuntimeError(
                "requires_grad can only be switched off on a leaf tensor; use detach()"
            )
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def shape(self) -> tuple:
        """The shape, a tuple of ints (``x.size()`` gives it as a :class:`Size`, torch's
        tuple subclass; both compare equal to plain tuples)."""
        return tuple(self._data.shape)

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def size(self, dim: int | None = None) -> Any:
        """torch's ``size``: the shape as a :class:`Size` (a tuple), or with ``dim`` the size
        of that dimension as an int (negative dims count from the end). The number of
        elements (NumPy's ``size`` attribute) is :meth:`numel`."""
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[check_axis("size", int_arg("size", "dim", dim), self.ndim,
                                            self.shape)]

    def numel(self) -> int:
        """The number of elements (``sum(p.numel() for p in model.parameters())``)."""
        return int(self._data.size)

    nelement = numel

    def dim(self) -> int:
        """The number of dimensions (torch's ``dim()``; NumPy's ``ndim``)."""
        return self._data.ndim

    ndimension = dim

    def element_size(self) -> int:
        """Bytes per element."""
        return int(self._data.itemsize)

    @property
    def is_leaf(self) -> bool:
        """True for tensors not made by a recorded op (parameters, inputs)."""
        return self._ctx is None

    @property
    def grad_fn(self) -> Context | None:
        """The node of the op that made this tensor (None for leaves)."""
        return self._ctx

    @property
    def device(self) -> str:
        """``'cpu'``, ``'cuda'`` or ``'standin'``."""
        return device_of(self._data)

    @property
    def T(self) -> "Tensor":
        """The transpose (all axes reversed)."""
        return self.transpose()

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self) -> Iterator["Tensor"]:
        for i in range(len(self)):
            yield self[i]

    def __repr__(self) -> str:
        body = np.array2string(np.asarray(self.numpy()), separator=", ", prefix="Tensor(")
        extra = f", dtype={self.dtype}"
        if self.device != "cpu":
            extra += f", device={self.device!r}"
        if self._ctx is not None:
            extra += f", grad_fn={self._ctx.name}"
        elif self.requires_grad:
            extra += ", requires_grad=True"
        return f"Tensor({body}{extra})"

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise ValueError(
                f"the truth value of a tensor of shape {self.shape} is ambiguous"
            )
        return bool(self._data)

    __hash__ = object.__hash__

    # ---------------------------------------------------------------- conversion
    def numpy(self) -> np.ndarray:
        """The data as a NumPy array (shares memory on the CPU; an explicit copy from a
        device).

        For a tensor that requires a gradient the array is read-only: a write into it would
        bypass the version counter and silently change what backward computes (torch
        refuses ``numpy()`` on such a tensor altogether). Write through the tensor
        (``with tr.no_grad(): x[0] = 9``), or take ``x.detach().numpy()`` for an array you
        may change."""
        arr = to_device(self._data, "cpu")
        return _read_only(arr) if self._requires_grad else arr

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """``np.asarray(t)`` for a CPU tensor; a TypeError for a device tensor, whose data
        reaches the host only through the explicit :meth:`numpy`."""
        if type(self._data) is not np.ndarray and get_array_module(self._data) is not np:
            raise TypeError(
                f"cannot convert a tensor on {self.device} to a NumPy array implicitly; "
                f"copy it to the host explicitly with .numpy() or .cpu()"
            )
        arr = np.asarray(self._data, dtype=dtype)
        if copy:
            return arr.copy()
        return _read_only(arr) if self._requires_grad else arr  # (as numpy())

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """NumPy ufuncs on tensors. Arithmetic between NumPy data and tensors (``arr * t``,
        ``np.float64(2) + t``) is the tensors' own recorded op, as the operators are. Any
        other ufunc (``np.exp(t)``, ``np.maximum(t, 0)``, ``arr += t``) computes on the raw
        arrays and returns a NumPy array, which is no longer part of any graph: for a tensor
        that requires a gradient while gradients are recorded that would cut the graph
        silently, so it is a TypeError naming the package's function to use instead (torch
        refuses the conversion too)."""
        op = _UFUNC_OPS.get(ufunc.__name__) if method == "__call__" and not kwargs else None
        if op is not None and len(inputs) == 2:
            return op(*inputs)
        tensors = [x for x in inputs + tuple(kwargs.get("out", ()) or ())
                   if isinstance(x, Tensor)]
        if GRAD_MODE.enabled and any(t._requires_grad for t in tensors):
            raise TypeError(
                f"numpy.{ufunc.__name__}{'' if method == '__call__' else '.' + method} on a "
                f"tensor that requires a gradient would return a NumPy array outside the "
                f"graph; use the tensor's own op (x.exp(), tr.maximum(x, y), F.relu(x), ...), "
                f"or x.detach().numpy() for plain numbers"
            )
        raw = [np.asarray(x) if isinstance(x, Tensor) else x for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(np.asarray(x) if isinstance(x, Tensor) else x
                                  for x in kwargs["out"])
        return getattr(ufunc, method)(*raw, **kwargs)

    def to(self, device: Any = None, dtype: Any = None, non_blocking: bool = False,
           copy: bool = False) -> "Tensor":
        """This tensor on ``device`` and/or in ``dtype``: ``self`` when nothing changes, else
        a differentiable copy (the gradient flows back to this tensor's device and dtype).
        ``t.to('cuda')``, ``t.to(np.float64)``, ``t.to('cpu', np.float64)``."""
        if isinstance(device, Tensor):  # to(other): other's device and dtype
            device, dtype = device.device, device.dtype
        elif dtype is None and device is not None and not _is_device(device):
            device, dtype = None, device  # to(np.float64)
        out = self if not copy else self.clone()
        if device is not None and normalize_device(device) != self.device:
            out = ToDevice.apply(out, device=normalize_device(device))
        if dtype is not None:
            out = out.astype(dtype)
        return out

    def cpu(self) -> "Tensor":
        """``to('cpu')``."""
        return self.to("cpu")

    def cuda(self) -> "Tensor":
        """``to('cuda')`` (needs CuPy and a GPU)."""
        return self.to("cuda")

    def item(self) -> Any:
        """The value of a one-element tensor as a Python number (float, int or bool, by the
        dtype); from a device, an explicit copy to the host. A ValueError for any other
        number of elements."""
        return self._python_scalar("item()")

    def __float__(self) -> float:
        """``float(t)``: the value of a one-element tensor as a Python float, as ``item()``
        (an explicit host read on a device)."""
        return float(self._python_scalar("float()"))

    def __int__(self) -> int:
        """``int(t)``: the value of a one-element tensor as a Python int, as ``item()`` (an
        explicit host read on a device). A float is truncated toward zero, as Python's
        ``int(2.7)`` and torch's ``int(t)`` do; NaN and inf raise Python's ValueError and
        OverflowError."""
        return int(self._python_scalar("int()"))

    def _python_scalar(self, caller: str) -> Any:
        """The one element as a Python number; a ValueError naming ``caller`` and the shape
        when the tensor does not have exactly one element (torch's rule: only one-element
        tensors can be converted to Python scalars)."""
        if self.numel() != 1:
            raise ValueError(
                f"{caller}: only one-element tensors can be converted to Python scalars; got "
                f"a tensor of shape {self.shape} with {self.numel()} elements"
            )
        return self._data.reshape(()).item()

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def detach(self) -> "Tensor":
        """A new leaf sharing this tensor's data (and version counter), cut from the graph."""
        t = Tensor._wrap(self._data)
        t._version = self._version
        return t

    def detach_(self) -> "Tensor":
        """Cut this tensor from the graph in place (torch's ``detach_``): from now on it is
        a leaf that does not require a gradient; nodes that used it before keep their path
        to its old place in the graph."""
        if self._ctx is None:
            self._requires_grad = False
            return self
        rebase(self, Tensor._wrap(self._data))
        return self

    def clone(self) -> "Tensor":
        """A differentiable copy (gradient flows back to this tensor)."""
        return Copy.apply(self)

    def astype(self, dtype: Any) -> "Tensor":
        """A copy in another dtype; differentiable between float dtypes."""
        if np.dtype(dtype) == self.dtype:
            return self
        return Cast.apply(self, dtype=np.dtype(dtype))

    def float(self) -> "Tensor":
        """float32 (differentiable for float tensors; ``self`` when already float32)."""
        return self.astype(np.float32)

    def double(self) -> "Tensor":
        return self.astype(np.float64)

    def half(self) -> "Tensor":
        return self.astype(np.float16)

    def long(self) -> "Tensor":
        """int64 (no gradient flows through integers)."""
        return self.astype(np.int64)

    def int(self) -> "Tensor":
        return self.astype(np.int32)

    def bool(self) -> "Tensor":
        return self.astype(np.bool_)

    def type(self, dtype: Any = None) -> Any:
        """Without ``dtype``, the type name as torch spells it (``'tinygrad_rnn.FloatTensor'``);
        with one (a dtype or a name such as ``'torch.LongTensor'``), the tensor in it."""
        if dtype is None:
            return f"tinygrad_rnn.{_TYPE_NAMES.get(self.dtype, str(self.dtype))}"
        if isinstance(dtype, str) and dtype.rsplit(".", 1)[-1] in _NAMED_TYPES:
            dtype = _NAMED_TYPES[dtype.rsplit(".", 1)[-1]]
        elif callable(dtype) and getattr(dtype, "__name__", None) in _NAMED_TYPES:
            dtype = _NAMED_TYPES[dtype.__name__]  # x.type(torch.FloatTensor)
        return self.astype(check_dtype("type", dtype))

    def type_as(self, other: "Tensor") -> "Tensor":
        return self.astype(other.dtype)

    # new tensors with this tensor's dtype and device (torch's new_*)
    def new_zeros(self, *size: Any, dtype: Any = None, requires_grad: _bool = False) -> "Tensor":
        return zeros(*size, dtype=dtype or self.dtype, requires_grad=requires_grad,
                     device=self.device)

    def new_ones(self, *size: Any, dtype: Any = None, requires_grad: _bool = False) -> "Tensor":
        return ones(*size, dtype=dtype or self.dtype, requires_grad=requires_grad,
                    device=self.device)

    def new_full(self, size: Any, fill_value: Any, dtype: Any = None,
                 requires_grad: _bool = False) -> "Tensor":
        return full(size, fill_value, dtype=dtype or self.dtype, requires_grad=requires_grad,
                    device=self.device)

    def new_empty(self, *size: Any, dtype: Any = None, requires_grad: _bool = False) -> "Tensor":
        return self.new_zeros(*size, dtype=dtype, requires_grad=requires_grad)

    def new_tensor(self, data: Any, dtype: Any = None, requires_grad: _bool = False) -> "Tensor":
        return Tensor(data, dtype=dtype or self.dtype, requires_grad=requires_grad,
                      device=self.device)

    # ---------------------------------------------------------------- autograd
    def backward(self, grad: Any = None, retain_graph: _bool = False) -> None:
        """Compute dL/dleaf for every leaf that requires a gradient, L being this tensor.

        ``grad`` is dL/dself; it may be omitted only for a one-element tensor (then 1).
        The graph's saved state is freed afterwards unless ``retain_graph=True``.
        """
        if not self.requires_grad:
            raise RuntimeError(
                "backward(): this tensor does not require a gradient and has no graph "
                "(no input had requires_grad=True, or it was computed under no_grad)"
            )
        xp = get_array_module(self._data)
        if grad is None:
            if self.numel() != 1:
                raise RuntimeError(
                    f"backward(): grad can be omitted only for a one-element tensor, this one "
                    f"has shape {self.shape}; pass grad=dL/dself or reduce it (e.g. .sum())"
                )
            grad = xp.ones(self.shape, dtype=self.dtype)
        else:
            grad = grad._data if isinstance(grad, Tensor) else grad
            grad_device = device_of(grad)
            if grad_device != "cpu" and grad_device != self.device:
                raise RuntimeError(
                    f"backward(): grad is on {grad_device} but the tensor is on {self.device}; "
                    f"move it with .to({self.device!r})"
                )
            grad = xp.asarray(grad)  # host data (an array, a list) is copied to the device
            if grad.dtype.kind not in "biuf":
                raise TypeError(f"backward(): grad must hold real numbers, got dtype "
                                f"{grad.dtype}" + (" (the imaginary part would be lost)"
                                                   if grad.dtype.kind == "c" else ""))
            if grad.shape != self.shape:
                raise ValueError(
                    f"backward(): grad has shape {grad.shape} but the tensor has shape "
                    f"{self.shape}"
                )
            if grad.dtype != self.dtype:
                grad = grad.astype(self.dtype)
        run_backward(self, grad, retain_graph=retain_graph)

    def retain_grad(self) -> None:
        """Keep ``.grad`` on this non-leaf tensor after backward (leaves always keep it)."""
        if self._ctx is None:
            return
        ctx = self._ctx
        if ctx.out_retain is None:
            ctx.out_retain = {}
        ctx.out_retain[self._out_index] = weakref.ref(self)

    def register_hook(self, hook: Callable[[Any], Any]) -> RemovableHandle:
        """Call ``hook(grad)`` when dL/dself has been computed; a non-None return value
        replaces the gradient that flows on. Returns a handle with ``remove()``."""
        if not self.requires_grad:
            raise RuntimeError("register_hook: this tensor does not require a gradient")
        if self._ctx is None:
            hooks = self._hooks
        else:
            if self._ctx.out_hooks is None:
                self._ctx.out_hooks = {}
            hooks = self._ctx.out_hooks.setdefault(self._out_index, [])
        hooks.append(hook)
        return RemovableHandle(hooks, hook)

    def zero_grad(self) -> None:
        self._grad = self._grad_view = None

    # ---------------------------------------------------------------- in-place writes
    # Every in-place write (add_, -=, x[i] = v, fill_, copy_, ...) takes one of two paths:
    # * a plain write into the memory, when nothing needs recording (no_grad, or neither the
    #   tensor nor the value requires a gradient): the version counter is bumped, so a node
    #   that saved the old values refuses to run backward instead of computing a wrong
    #   gradient;
    # * a recorded write, when gradients are on and the tensor or the value requires one
    #   (``h += x`` on an activation, ``out[t] = h_t``, ``z[0][1] = w``): the new values
    #   are computed by the ordinary ops, then written (engine.record_write, the op
    #   WriteRegion) into the memory of the base tensor (the tensor itself, or the one a
    #   view shows), which is rebased onto that node. Nodes recorded earlier keep reaching
    #   the old state (engine.as_seen_by); views of the base are re-recorded on their next
    #   use (engine.refresh_view). docs/engine.md, section 11, "Views and in-place writes".
    # A leaf that requires a gradient (a parameter), or a view of one, is written only
    # inside no_grad, as in torch.

    def _bump(self) -> "Tensor":
        self._version.value += 1
        return self

    def _mark_view(self, out: "Tensor", step: tuple, always: _bool = False) -> "Tensor":
        """Record that ``out`` (made from this tensor by ``step``) is a view of this tensor's
        memory, when it is one (``always``: the step always makes a view, no need to ask)."""
        o = out._data
        # (an empty array shares no memory with anything, but is still made by a view step)
        if (always or o is self._data or o.size == 0
                or get_array_module(o).may_share_memory(o, self._data)):
            if self._base is None:
                out._base, out._view_steps = self, (step,)
            else:
                out._base, out._view_steps = self._base, self._view_steps + (step,)
            out._gen = out._base._gen
        return out

    def _raw_write(self, op: str, write: Callable[[], Any]) -> "Tensor":
        """Run ``write`` (a plain in-place NumPy write) and bump the version; NumPy's error for
        an expanded (read-only) tensor becomes one that names the op."""
        try:
            write()
        except ValueError as err:
            if "read-only" not in str(err):
                raise
            raise RuntimeError(
                f"{op}: this tensor (shape {self.shape}) is read-only: it is an expanded view "
                f"(expand/broadcast_to) whose entries share memory, or it wraps a read-only "
                f"array; write into a copy (x = x.clone())"
            ) from None
        return self._bump()

    def __setitem__(self, index: Any, value: Any) -> None:
        xp = get_array_module(self._data)
        if isinstance(value, Tensor):
            if value.device != self.device:
                raise RuntimeError(
                    f"__setitem__: the tensor written to is on {self.device} but the value is "
                    f"on {value.device}; move one with .to()"
                )
        elif xp is not np and type(value) is np.ndarray:
            value = xp.asarray(value)  # host values are copied to the tensor's device
        index = _index(index, xp)
        if xp is not np:  # CuPy would wrap an out-of-range index array around
            check_index_bounds("__setitem__", index, self.shape)
        self._inplace_operand("__setitem__", value, "x = x.clone(); x[index] = value")
        if write_is_recorded(self, "__setitem__", value):
            record_write(self, "__setitem__", value, index)
            return
        raw = value._data if isinstance(value, Tensor) else value

        def write() -> None:
            try:
                self._data[index] = raw
            except IndexError as err:
                raise IndexError(f"__setitem__: index {index!r} for shape {self.shape}: "
                                 f"{err}") from None

        self._raw_write("__setitem__", write)

    def _inplace_operand(self, op: str, other: Any, instead: str) -> Any:
        """The raw operand of the in-place op ``op``, checked to fit this tensor's dtype.

        An in-place write cannot change the dtype, so an operand of a higher category
        (bool < integer < float) than this tensor is a TypeError, as in torch: ``ids.mul_(0.5)``
        would otherwise truncate, and NumPy's own error names no op. ``instead`` names the
        out-of-place way, for the message. A complex operand is a TypeError (its imaginary
        part would be dropped silently)."""
        raw = raw_like(other, self)
        if isinstance(raw, (complex, np.complexfloating)) or (
                hasattr(raw, "dtype") and raw.dtype.kind == "c"):
            raise TypeError(f"{op}: complex operands are not supported (the imaginary part "
                            f"would be dropped), got {other!r}")
        if self._data.dtype.kind == "f":  # the common case: anything real fits a float
            return raw
        if isinstance(raw, (bool, int, float, np.generic)) or type(raw) is np.ndarray:
            other_dtype = np.result_type(raw)
        elif hasattr(raw, "dtype"):  # a device array
            other_dtype = raw.dtype
        else:
            raw = np.asarray(raw)
            other_dtype = raw.dtype
        if kind_rank(other_dtype) > kind_rank(self.dtype):
            raise TypeError(
                f"{op}: an operand of dtype {other_dtype} gives a result that cannot be "
                f"written in place into this tensor of dtype {self.dtype} (shape "
                f"{self.shape}); use {instead}, which returns a new tensor, or convert "
                f"first (e.g. x = x.float())"
            )
        return raw

    def add_(self, other: Any, alpha: _float = 1, *, _op: str = "add_") -> "Tensor":
        """self += alpha * other, in place. On an integer or boolean tensor ``alpha`` must
        not be a float (it would be truncated; torch refuses it too)."""
        if not is_float_dtype(self.dtype) and np.result_type(alpha).kind == "f":
            raise TypeError(
                f"{_op}: alpha must not be a floating point number for integer tensors, got "
                f"alpha={alpha!r} for a tensor of dtype {self.dtype} (shape {self.shape})"
            )
        o = self._inplace_operand(_op, other, "x + y")
        if write_is_recorded(self, _op, other):
            return record_update(self, _op, self + (other if alpha == 1 else other * alpha))

        def write() -> None:
            self._data += o if alpha == 1 else o * self.dtype.type(alpha)

        return self._raw_write(_op, write)

    def sub_(self, other: Any, *, _op: str = "sub_") -> "Tensor":
        o = self._inplace_operand(_op, other, "x - y")
        if write_is_recorded(self, _op, other):
            return record_update(self, _op, self - other)
        return self._raw_write(_op, lambda: self._data.__isub__(o))

    def mul_(self, other: Any, *, _op: str = "mul_") -> "Tensor":
        o = self._inplace_operand(_op, other, "x * y")
        if write_is_recorded(self, _op, other):
            return record_update(self, _op, self * other)
        return self._raw_write(_op, lambda: self._data.__imul__(o))

    def div_(self, other: Any, *, _op: str = "div_") -> "Tensor":
        """self /= other, in place: only for float tensors (true division of integers gives
        floats, which an integer tensor cannot hold)."""
        if not is_float_dtype(self.dtype):
            raise TypeError(
                f"{_op}: true division gives floats, which cannot be written in place into "
                f"this tensor of dtype {self.dtype} (shape {self.shape}); use x / y, which "
                f"returns a new float tensor, or convert first (e.g. x = x.float())"
            )
        o = self._inplace_operand(_op, other, "x / y")
        if write_is_recorded(self, _op, other):
            return record_update(self, _op, self / other)
        return self._raw_write(_op, lambda: self._data.__itruediv__(o))

    def pow_(self, exponent: Any, *, _op: str = "pow_") -> "Tensor":
        """self **= exponent (a constant scalar), in place; float tensors, or an integer
        tensor with a non-negative integer exponent."""
        result = self ** exponent  # checks the exponent as ** does
        if result.dtype != self.dtype:
            raise TypeError(
                f"{_op}: the power {exponent!r} of a tensor of dtype {self.dtype} has dtype "
                f"{result.dtype}, which cannot be written in place; use x ** {exponent!r}"
            )
        if write_is_recorded(self, _op):
            return record_update(self, _op, result)
        return self._raw_write(_op, lambda: self._data.__setitem__(Ellipsis, result._data))

    # the augmented assignments act in place, as in torch (Python would rebind the name)
    def __iadd__(self, other: Any) -> "Tensor":
        return self.add_(other, _op="+= (in-place add)")

    def __isub__(self, other: Any) -> "Tensor":
        return self.sub_(other, _op="-= (in-place subtract)")

    def __imul__(self, other: Any) -> "Tensor":
        return self.mul_(other, _op="*= (in-place multiply)")

    def __itruediv__(self, other: Any) -> "Tensor":
        return self.div_(other, _op="/= (in-place divide)")

    def __ipow__(self, exponent: Any) -> "Tensor":
        return self.pow_(exponent, _op="**= (in-place power)")

    def copy_(self, other: Any) -> "Tensor":
        """Copy ``other``'s values into this tensor (broadcast to its shape); differentiable
        with respect to ``other`` when gradients are recorded. The explicit way to copy
        across devices."""
        src = other if isinstance(other, Tensor) else None
        raw = other._data if isinstance(other, Tensor) else other
        if not hasattr(raw, "shape"):
            raw = np.asarray(raw)
        self._inplace_operand("copy_", raw, "x = y.clone()")
        if tuple(raw.shape) != self.shape and raw.ndim != 0:
            try:
                shape = np.broadcast_shapes(tuple(raw.shape), self.shape)
            except ValueError:
                shape = None
            if shape != self.shape:
                raise ValueError(f"copy_: source shape {tuple(raw.shape)} cannot be broadcast "
                                 f"to the tensor's shape {self.shape}")
        if write_is_recorded(self, "copy_", other):
            if src is not None and src.device != self.device:
                src = src.to(self.device)
            value = src if src is not None else to_device(raw, self.device)
            return record_write(self, "copy_", value)
        raw = to_device(raw, self.device)  # copy_ is the explicit way to copy across devices
        return self._raw_write("copy_", lambda: self._data.__setitem__(Ellipsis, raw))

    def fill_(self, value: Any) -> "Tensor":
        """Set every entry to ``value``, a real number (a Python or NumPy scalar, a 0-d array
        or a 0-d tensor) that this tensor's dtype holds exactly: any real into a float tensor
        (rounded to its precision as any float is), an integer in range into an integer
        tensor (``2.0`` counts as 2), 0, 1, True or False into a boolean tensor.

        fill_ keeps the tensor's dtype, so it does not promote as ``x + value`` does; a value
        the dtype would change (2.5 or nan into an integer tensor, 300 into uint8, 2 into
        bool) is a ValueError instead of being truncated, wrapped or squashed silently, and
        a value that is no real number is a TypeError. Nothing is written then. On a tensor
        in a graph the write is recorded (the old values get a zero gradient)."""
        v = fill_scalar(value, self)
        if write_is_recorded(self, "fill_", value):
            xp = get_array_module(self._data)
            src = value if isinstance(value, Tensor) else Tensor._wrap(
                xp.asarray(v, dtype=self.dtype))
            return record_write(self, "fill_", src)
        return self._raw_write("fill_", lambda: self._data.__setitem__(Ellipsis, v))

    def zero_(self) -> "Tensor":
        """Set every entry to zero (False for a boolean tensor); works for every dtype."""
        return self.fill_(0)

    def clip_(self, min: _float | None = None, max: _float | None = None) -> "Tensor":
        """Clamp to [min, max] in place. The result must keep this tensor's dtype, so float
        bounds on an integer tensor are a TypeError (``clip`` returns a float32 tensor
        there; see :func:`tinygrad_rnn.ops.elementwise.clip_bounds`)."""
        dtype, lo, hi = clip_bounds("clip_", self._data, min, max)
        if dtype != self.dtype:
            raise TypeError(
                f"clip_: bounds min={min!r}, max={max!r} give a result of dtype {dtype}, which "
                f"cannot be written in place into this tensor of dtype {self.dtype} (shape "
                f"{self.shape}); use clip(), which returns a new tensor, or integer bounds"
            )
        if write_is_recorded(self, "clip_"):
            return record_update(self, "clip_", self.clip(min, max))
        xp = get_array_module(self._data)
        return self._raw_write("clip_", lambda: xp.clip(self._data, lo, hi, out=self._data))

    clamp_ = clip_

    def uniform_(self, a: _float = 0.0, b: _float = 1.0, *, generator: Any = None) -> "Tensor":
        """Fill with samples of U(a, b), in place, from ``generator`` (a seed, a NumPy or a
        tinygrad_rnn Generator; the package's default generator when None). Drawn on the
        host, as every random number here, then copied to the tensor's device."""
        self._check_float("uniform_")
        u = generator_for("uniform_", generator).uniform(float(a), float(b), size=self.shape)
        return self.copy_(u.astype(self.dtype))

    def normal_(self, mean: _float = 0.0, std: _float = 1.0, *,
                generator: Any = None) -> "Tensor":
        """Fill with samples of N(mean, std^2), in place (see :meth:`uniform_`)."""
        self._check_float("normal_")
        z = generator_for("normal_", generator).normal(float(mean), float(std), size=self.shape)
        return self.copy_(z.astype(self.dtype))

    def _check_float(self, op: str) -> None:
        if not is_float_dtype(self.dtype):
            raise TypeError(f"{op}: fills a floating-point tensor, got dtype {self.dtype}")

    def flip(self, *dims: Any) -> "Tensor":
        """The entries in reverse order along ``dims`` (a copy, as torch's ``flip``)."""
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = tuple(dims[0])
        axes = {check_axis("flip", int_arg("flip", "dims", d), self.ndim, self.shape)
                for d in dims}
        index = tuple(slice(None, None, -1) if k in axes else slice(None)
                      for k in range(self.ndim))
        return self[index].clone()

    def masked_fill_(self, mask: Any, value: _float) -> "Tensor":
        """Set the entries where ``mask`` is True to ``value``, in place (recorded on a
        tensor in a graph, as :meth:`masked_fill`)."""
        result = self.masked_fill(mask, value)
        if result.dtype != self.dtype:
            raise TypeError(f"masked_fill_: the value {value!r} gives dtype {result.dtype}, "
                            f"which cannot be written into a tensor of dtype {self.dtype}")
        if write_is_recorded(self, "masked_fill_"):
            return record_update(self, "masked_fill_", result)
        return self._raw_write("masked_fill_",
                               lambda: self._data.__setitem__(Ellipsis, result._data))

    # ---------------------------------------------------------------- arithmetic sugar
    def __add__(self, o: Any) -> "Tensor":
        return Add.apply(self, o)

    def __radd__(self, o: Any) -> "Tensor":
        return Add.apply(o, self)

    def __sub__(self, o: Any) -> "Tensor":
        return Sub.apply(self, o)

    def __rsub__(self, o: Any) -> "Tensor":
        return Sub.apply(o, self)

    def __mul__(self, o: Any) -> "Tensor":
        return Mul.apply(self, o)

    def __rmul__(self, o: Any) -> "Tensor":
        return Mul.apply(o, self)

    def __truediv__(self, o: Any) -> "Tensor":
        return Div.apply(self, o)

    def __rtruediv__(self, o: Any) -> "Tensor":
        return Div.apply(o, self)

    def __neg__(self) -> "Tensor":
        return Neg.apply(self)

    def __pow__(self, exponent: Any) -> "Tensor":
        if isinstance(exponent, Tensor) or not is_real_scalar(exponent):
            raise TypeError(f"pow: the exponent must be a constant real number (a Python or "
                            f"NumPy scalar or a 0-d array), got {exponent!r} "
                            f"({type(exponent).__name__}); for a tensor exponent use "
                            f"(y * x.log()).exp()")
        if is_float_dtype(self.dtype):
            return Pow.apply(self, exponent=float(exponent))
        # integer data: an integer power stays integer (torch, NumPy); a float power computes
        # in DEFAULT_FLOAT (NumPy would take the exponent in the tensor's integer dtype)
        if isinstance(exponent, np.ndarray):
            exponent = exponent[()]
        if not isinstance(exponent, (bool, int, np.integer, np.bool_)):
            return Pow.apply(Tensor._wrap(self._data.astype(get_default_dtype())),
                             exponent=float(exponent))
        if exponent < 0:
            raise ValueError(
                f"pow: an integer tensor (dtype {self.dtype}) to the negative integer power "
                f"{exponent} is not an integer; convert it first, e.g. x.float() ** {exponent}"
            )
        x = self if self.dtype.kind != "b" else Tensor._wrap(self._data.astype(np.int64))
        return Pow.apply(x, exponent=int(exponent))

    # floor division and remainder (NumPy's and torch's sign rules: the result takes the
    # divisor's sign); no gradient flows through them, so a tensor in a graph is refused
    # rather than silently cut from it
    def _integer_division(self, o: Any, name: str, ufunc: str, reflected: _bool) -> "Tensor":
        for t in (self, o):
            if isinstance(t, Tensor) and t.requires_grad and GRAD_MODE.enabled:
                raise RuntimeError(f"{name}: not differentiable here; compute it on "
                                   f"x.detach() or inside tr.no_grad()")
        check_real_operands(name, [o])
        a, b = self._data, o._data if isinstance(o, Tensor) else raw_like(o, self)
        if reflected:
            a, b = b, a
        return Tensor._wrap(getattr(get_array_module(self._data), ufunc)(a, b))

    def __floordiv__(self, o: Any) -> "Tensor":
        return self._integer_division(o, "floor_divide (//)", "floor_divide", False)

    def __rfloordiv__(self, o: Any) -> "Tensor":
        return self._integer_division(o, "floor_divide (//)", "floor_divide", True)

    def __mod__(self, o: Any) -> "Tensor":
        return self._integer_division(o, "remainder (%)", "remainder", False)

    def __rmod__(self, o: Any) -> "Tensor":
        return self._integer_division(o, "remainder (%)", "remainder", True)

    def __matmul__(self, o: Any) -> "Tensor":
        return MatMul.apply(self, o)

    def __rmatmul__(self, o: Any) -> "Tensor":
        return MatMul.apply(o, self)

    def __getitem__(self, index: Any) -> "Tensor":
        """``x[index]``, as in torch: a basic index (integers, slices, ``None``, ``...``)
        gives a view that shares memory with ``x`` (a write through it changes ``x``);
        integer-array and boolean indices give a copy."""
        index = _index(index, get_array_module(self._data))
        out = GetItem.apply(self, index=index)
        if not is_advanced_index(index):
            self._mark_view(out, ("index", index), always=True)
        return out

    # ---------------------------------------------------------------- comparisons
    # Elementwise, as in torch and NumPy, giving boolean tensors without gradient. Tensors
    # stay hashable by identity (sets and dicts of parameters work), and nothing in the
    # package compares tensors with == for identity (it uses `is` and id()).
    def _compare(self, o: Any, name: str, ufunc: Callable) -> "Tensor":
        if isinstance(o, Tensor) and o.device != self.device:
            raise RuntimeError(f"{name}: the tensors are on {self.device} and {o.device}; "
                               f"move one with .to()")
        raw = raw_like(o, self)
        if isinstance(raw, (str, bytes)) or (hasattr(raw, "dtype") and raw.dtype == object):
            raise TypeError(f"{name}: cannot compare a tensor of dtype {self.dtype} with "
                            f"{o!r} ({type(o).__name__})")
        try:
            return Tensor._wrap(ufunc(self._data, raw))
        except ValueError as err:
            raise ValueError(f"{name}: shapes {self.shape} and {getattr(raw, 'shape', ())} do "
                             f"not broadcast: {err}") from None

    def __eq__(self, o: Any) -> Any:
        if o is None:
            return False  # as torch: `t == None` is False, not a tensor
        return self._compare(o, "eq (==)", _ufunc("equal", self))

    def __ne__(self, o: Any) -> Any:
        if o is None:
            return True
        return self._compare(o, "ne (!=)", _ufunc("not_equal", self))

    def __lt__(self, o: Any) -> "Tensor":
        return self._compare(o, "lt (<)", _ufunc("less", self))

    def __le__(self, o: Any) -> "Tensor":
        return self._compare(o, "le (<=)", _ufunc("less_equal", self))

    def __gt__(self, o: Any) -> "Tensor":
        return self._compare(o, "gt (>)", _ufunc("greater", self))

    def __ge__(self, o: Any) -> "Tensor":
        return self._compare(o, "ge (>=)", _ufunc("greater_equal", self))

    __hash__ = object.__hash__  # defining __eq__ would remove it: tensors hash by identity

    def eq(self, o: Any) -> "Tensor":
        """Elementwise ==, as a boolean tensor (the same as ``self == o``)."""
        return self._compare(o, "eq", _ufunc("equal", self))

    def ne(self, o: Any) -> "Tensor":
        return self._compare(o, "ne", _ufunc("not_equal", self))

    def lt(self, o: Any) -> "Tensor":
        return self._compare(o, "lt", _ufunc("less", self))

    def le(self, o: Any) -> "Tensor":
        return self._compare(o, "le", _ufunc("less_equal", self))

    def gt(self, o: Any) -> "Tensor":
        return self._compare(o, "gt", _ufunc("greater", self))

    def ge(self, o: Any) -> "Tensor":
        return self._compare(o, "ge", _ufunc("greater_equal", self))

    def equal(self, o: Any) -> _bool:
        """True when ``o`` is a tensor of the same shape with equal entries (torch.equal)."""
        if not isinstance(o, Tensor):
            raise TypeError(f"equal: expected a Tensor, got {type(o).__name__}")
        xp = get_array_module(self._data)
        return self.shape == o.shape and bool(xp.all((self == o)._data))


    # logical and bitwise operators on boolean and integer tensors (no gradient)
    def _logical(self, o: Any, name: str, ufunc: str) -> "Tensor":
        raw = o._data if isinstance(o, Tensor) else o
        kinds = [self.dtype.kind, np.result_type(raw).kind if not hasattr(raw, "dtype")
                 else raw.dtype.kind]
        if any(k not in "biu" for k in kinds):
            raise TypeError(f"{name}: only boolean and integer tensors, got dtype "
                            f"{self.dtype} with {type(o).__name__} {o!r}"[:300])
        return Tensor._wrap(getattr(get_array_module(self._data), ufunc)(self._data, raw))

    def __and__(self, o: Any) -> "Tensor":
        return self._logical(o, "& (and)", "bitwise_and")

    __rand__ = __and__

    def __or__(self, o: Any) -> "Tensor":
        return self._logical(o, "| (or)", "bitwise_or")

    __ror__ = __or__

    def __xor__(self, o: Any) -> "Tensor":
        return self._logical(o, "^ (xor)", "bitwise_xor")

    __rxor__ = __xor__

    def __invert__(self) -> "Tensor":
        if self.dtype.kind not in "biu":
            raise TypeError(f"~ (invert): only boolean and integer tensors, got dtype "
                            f"{self.dtype}")
        return Tensor._wrap(~self._data)

    def _logical_(self, o: Any, name: str, ufunc: str) -> "Tensor":
        result = self._logical(o, name, ufunc)
        if result.dtype != self.dtype:
            raise TypeError(f"{name}: the result has dtype {result.dtype}, which cannot be "
                            f"written in place into a tensor of dtype {self.dtype}")
        return self._raw_write(name, lambda: self._data.__setitem__(Ellipsis, result._data))

    def __iand__(self, o: Any) -> "Tensor":
        return self._logical_(o, "&= (in-place and)", "bitwise_and")

    def __ior__(self, o: Any) -> "Tensor":
        return self._logical_(o, "|= (in-place or)", "bitwise_or")

    def __ixor__(self, o: Any) -> "Tensor":
        return self._logical_(o, "^= (in-place xor)", "bitwise_xor")

    # ---------------------------------------------------------------- NumPy-named methods
    # Reductions take torch's (dim, keepdim) and NumPy's (axis, keepdims) spellings.
    def sum(self, dim: Any = None, keepdim: _bool = False, *, axis: Any = None,
            keepdims: Any = UNSET, dtype: Any = None, out: Any = None) -> "Tensor":
        _no_out("sum", out)
        out = Sum.apply(self, axis=_axis(axis, dim), keepdims=_keep(keepdim, keepdims))
        return out if dtype is None else out.astype(check_dtype("sum", dtype))

    def mean(self, dim: Any = None, keepdim: _bool = False, *, axis: Any = None,
             keepdims: Any = UNSET, dtype: Any = None, out: Any = None) -> "Tensor":
        _no_out("mean", out)
        x = self if dtype is None else self.astype(check_dtype("mean", dtype))
        return Mean.apply(x, axis=_axis(axis, dim), keepdims=_keep(keepdim, keepdims))

    def max(self, dim: Any = None, keepdim: _bool = False, *, axis: Any = None,
            keepdims: Any = UNSET, out: Any = None) -> Any:
        """The maximum, with torch's three forms and NumPy's:

        * ``x.max()``: the largest entry (tied maxima share the gradient equally);
        * ``x.max(dim)`` / ``x.max(dim=1, keepdim=True)``: torch's pair ``(values, indices)``
          (a named tuple); the gradient goes to the entry at ``indices``;
        * ``x.max(other_tensor)``: the elementwise maximum;
        * ``x.max(axis=1)`` (or several dims, ``x.max(dim=(0, 1))``): NumPy's reduction, a
          tensor (ties share the gradient)."""
        _no_out("max", out)
        if isinstance(dim, Tensor):
            return Maximum.apply(self, dim)
        if dim is None or isinstance(dim, (tuple, list)):  # over all or several dims
            return Max.apply(self, axis=_axis(axis, dim), keepdims=_keep(keepdim, keepdims))
        if axis is not None:
            raise TypeError("max: give dim or axis, not both")
        return self._extremum_at("max", dim, keepdim)

    def min(self, dim: Any = None, keepdim: _bool = False, *, axis: Any = None,
            keepdims: Any = UNSET, out: Any = None) -> Any:
        """The minimum, in the forms of :meth:`max` (any dtype, bool included)."""
        _no_out("min", out)
        if isinstance(dim, Tensor):
            return Minimum.apply(self, dim)
        if dim is None or isinstance(dim, (tuple, list)):  # over all or several dims
            return Min.apply(self, axis=_axis(axis, dim), keepdims=_keep(keepdim, keepdims))
        if axis is not None:
            raise TypeError("min: give dim or axis, not both")
        return self._extremum_at("min", dim, keepdim)

    def _extremum_at(self, op: str, dim: Any, keepdim: _bool) -> "ValuesIndices":
        indices = (self.argmax if op == "max" else self.argmin)(dim, keepdim=True)
        values = self.gather(dim, indices)
        if not keepdim:
            d = check_axis(op, int_arg(op, "dim", dim), self.ndim, self.shape)
            values, indices = values.squeeze(d), indices.squeeze(d)
        return ValuesIndices(values, indices)

    def argmax(self, dim: Any = None, keepdim: _bool = False, *, axis: Any = None,
               out: Any = None) -> "Tensor":
        """Index of the largest entry (of the flattened tensor when ``dim`` is None; the
        first one among ties), int64, no gradient."""
        _no_out("argmax", out)
        return self._arg("argmax", _axis(axis, dim), keepdim)

    def argmin(self, dim: Any = None, keepdim: _bool = False, *, axis: Any = None,
               out: Any = None) -> "Tensor":
        _no_out("argmin", out)
        return self._arg("argmin", _axis(axis, dim), keepdim)

    def _arg(self, op: str, dim: Any, keepdim: _bool) -> "Tensor":
        xp = get_array_module(self._data)
        if self.numel() == 0:
            raise IndexError(f"{op}: an empty tensor (shape {self.shape}) has no {op[3:]}imum")
        if dim is None:
            out = getattr(xp, op)(self._data)
            shape = (1,) * self.ndim if keepdim else ()
            return Tensor._wrap(xp.asarray(out, dtype=np.int64).reshape(shape))
        d = check_axis(op, int_arg(op, "dim", dim), max(self.ndim, 1), self.shape)
        data = self._data if self.ndim else self._data.reshape(1)
        out = getattr(xp, op)(data, axis=d, keepdims=bool(keepdim)).astype(np.int64)
        return Tensor._wrap(out if self.ndim else out.reshape(()))

    def gather(self, dim: _int, index: Any) -> "Tensor":
        """torch's ``gather``: ``out[i][j][k] = self[index[i][j][k]][j][k]`` for dim 0 (and
        likewise for other dims); ``index`` has this tensor's number of dimensions and is no
        larger in the other dims. Differentiable (repeated indices accumulate)."""
        d = check_axis("gather", int_arg("gather", "dim", dim), max(self.ndim, 1),
                        self.shape)
        idx = index._data if isinstance(index, Tensor) else np.asarray(index)
        if idx.dtype.kind not in "iu":
            raise TypeError(f"gather: index must hold integers, got dtype {idx.dtype}")
        if idx.ndim != self.ndim:
            raise ValueError(f"gather: index of shape {tuple(idx.shape)} must have as many "
                             f"dimensions as the input of shape {self.shape}")
        for k, (n_i, n_x) in enumerate(zip(idx.shape, self.shape)):
            if k != d and n_i > n_x:
                raise ValueError(f"gather: index of shape {tuple(idx.shape)} is larger than "
                                 f"the input of shape {self.shape} in dimension {k}")
        xp = get_array_module(self._data)
        coords = [xp.arange(n).reshape((1,) * k + (n,) + (1,) * (idx.ndim - k - 1))
                  for k, n in enumerate(idx.shape)]
        coords[d] = idx
        return self[tuple(coords)]

    def index_select(self, dim: _int, index: Any) -> "Tensor":
        """The entries at ``index`` (1-D integers) along ``dim``; a copy, differentiable."""
        d = check_axis("index_select", int_arg("index_select", "dim", dim), self.ndim,
                        self.shape)
        idx = index._data if isinstance(index, Tensor) else np.asarray(index)
        if idx.ndim > 1 or (idx.size and idx.dtype.kind not in "iu"):
            raise TypeError(f"index_select: index must be a 1-D integer tensor, got shape "
                            f"{tuple(idx.shape)} dtype {idx.dtype}")
        return self[(slice(None),) * d + (idx.reshape(-1).astype(np.int64),)]

    def topk(self, k: _int, dim: _int = -1, largest: _bool = True,
             sorted: _bool = True) -> "ValuesIndices":
        """The ``k`` largest (or smallest) entries along ``dim`` and their indices, largest
        first (ties in index order)."""
        k = int_arg("topk", "k", k)
        d = check_axis("topk", int_arg("topk", "dim", dim), max(self.ndim, 1), self.shape)
        n = self.shape[d] if self.ndim else 1
        if not 0 <= k <= n:
            raise IndexError(f"topk: k={k} is out of range for dimension {d} of size {n}")
        order = self.sort(d, descending=bool(largest)).indices
        indices = order.narrow(d, 0, k) if self.ndim else order
        return ValuesIndices(self.gather(d, indices), indices.contiguous())

    def sort(self, dim: _int = -1, descending: _bool = False,
             stable: _bool = False) -> "ValuesIndices":
        """Sorted values along ``dim`` and their indices (a stable sort: ties keep their
        order)."""
        xp = get_array_module(self._data)
        d = check_axis("sort", int_arg("sort", "dim", dim), max(self.ndim, 1), self.shape)
        data = self._data if self.ndim else self._data.reshape(1)
        if descending:  # stable for ties: sort the reversed axis ascending, then flip back
            flipped = xp.flip(data, axis=d)
            idx = xp.flip(xp.argsort(flipped, axis=d, kind="stable"), axis=d)
            idx = data.shape[d] - 1 - idx
        else:
            idx = xp.argsort(data, axis=d, kind="stable")
        idx = Tensor._wrap(xp.ascontiguousarray(idx.astype(np.int64)).reshape(self.shape))
        return ValuesIndices(self.gather(d, idx) if self.ndim else self * 1, idx)

    def argsort(self, dim: _int = -1, descending: _bool = False) -> "Tensor":
        return self.sort(dim, descending).indices

    def norm(self, p: Any = "fro", dim: Any = None, keepdim: _bool = False) -> "Tensor":
        """The p-norm over ``dim`` (all entries by default): p = 2 or 'fro' (Euclidean), 1,
        inf or any real p > 0. The gradient at an all-zero input is 0, as in torch."""
        if p == "fro":
            p = 2.0
        if isinstance(p, (bool, str)) or not is_real_scalar(p) or not float(p) > 0:
            raise ValueError(f"norm: p must be 'fro' or a real number > 0, got {p!r}")
        p = float(p)
        if p == float("inf"):
            return self.abs().max(axis=dim, keepdims=keepdim)
        if p == 1.0:
            return self.abs().sum(dim, keepdim)
        return Norm.apply(self, p=p, axis=dim, keepdims=bool(keepdim))

    def any(self, dim: Any = None, keepdim: _bool = False, *, axis: Any = None,
            keepdims: Any = UNSET, out: Any = None) -> "Tensor":
        """True where some entry along ``dim`` (every entry by default) is nonzero."""
        xp = get_array_module(self._data)
        _no_out("any", out)
        keep = bool(_keep(keepdim, keepdims))
        return Tensor._wrap(xp.asarray(xp.any(self._data, axis=_axis(axis, dim), keepdims=keep)))

    def all(self, dim: Any = None, keepdim: _bool = False, *, axis: Any = None,
            keepdims: Any = UNSET, out: Any = None) -> "Tensor":
        """True where every entry along ``dim`` (every entry by default) is nonzero."""
        xp = get_array_module(self._data)
        _no_out("all", out)
        keep = bool(_keep(keepdim, keepdims))
        return Tensor._wrap(xp.asarray(xp.all(self._data, axis=_axis(axis, dim), keepdims=keep)))

    def std(self, dim: Any = None, unbiased: _bool = True, keepdim: _bool = False, *,
            correction: Any = None) -> "Tensor":
        """Standard deviation (torch's default: the unbiased estimate, n - 1)."""
        return self.var(dim, unbiased, keepdim, correction=correction).sqrt()

    def var(self, dim: Any = None, unbiased: _bool = True, keepdim: _bool = False, *,
            correction: Any = None) -> "Tensor":
        """Variance (torch's default: the unbiased estimate, n - 1)."""
        ddof = (1 if unbiased else 0) if correction is None else correction
        centered = self - self.mean(dim, keepdim=True)
        n = self.numel() if dim is None else math.prod(
            self.shape[a] for a in ((dim,) if is_int(dim) else dim))
        return (centered * centered).sum(dim, keepdim) / max(n - ddof, 0)

    def chunk(self, chunks: _int, dim: _int = 0) -> tuple:
        """Split into ``chunks`` pieces of ceil(n / chunks) along ``dim`` (the last may be
        smaller, and there may be fewer pieces, as in torch)."""
        chunks = int_arg("chunk", "chunks", chunks)
        if chunks <= 0:
            raise ValueError(f"chunk: chunks must be positive, got {chunks}")
        n = self.shape[check_axis("chunk", int_arg("chunk", "dim", dim), self.ndim,
                                   self.shape)]
        return split(self, max(-(-n // chunks), 1) if n else 1, dim=dim)

    def split(self, split_size_or_sections: Any, dim: _int = 0) -> tuple:
        return split(self, split_size_or_sections, dim=dim)

    def unbind(self, dim: _int = 0) -> tuple:
        """The slices along ``dim``, each a view (as torch's ``unbind``), made by one op
        (:class:`~tinygrad_rnn.ops.shape.Unbind`) whose backward stacks their gradients."""
        d = check_axis("unbind", int_arg("unbind", "dim", dim), self.ndim, self.shape)
        if self.shape[d] == 0:
            return ()
        outs = Unbind.apply(self, axis=d)
        lead = (slice(None),) * d
        for k, out in enumerate(outs):
            self._mark_view(out, ("index", lead + (k,)), always=True)
        return outs

    def repeat(self, *sizes: Any) -> "Tensor":
        """torch's ``repeat``: tile the tensor ``sizes[i]`` times along dimension i (leading
        new dimensions when more sizes than dimensions are given)."""
        sizes = check_shape("repeat", sizes)
        if len(sizes) < self.ndim:
            raise ValueError(f"repeat: {len(sizes)} sizes for a tensor of shape {self.shape}; "
                             f"give at least {self.ndim}")
        shape = (1,) * (len(sizes) - self.ndim) + tuple(self.shape)
        pairs = tuple(v for n in shape for v in (1, n))  # (1, n0, 1, n1, ...)
        wide = tuple(v for r, n in zip(sizes, shape) for v in (r, n))
        return self.reshape(pairs).broadcast_to(wide).reshape(
            tuple(r * n for r, n in zip(sizes, shape)))

    def t(self) -> "Tensor":
        """The transpose of a matrix (a 0-d or 1-D tensor is returned as it is), a view."""
        if self.ndim > 2:
            raise RuntimeError(f"t: expects a tensor with <= 2 dimensions, got shape "
                               f"{self.shape}; use transpose(dim0, dim1)")
        return self.transpose() if self.ndim == 2 else self

    def mm(self, other: "Tensor") -> "Tensor":
        """Matrix product of two 2-D tensors (torch's ``mm``: no broadcasting)."""
        _check_ranks("mm", self, other, 2)
        return MatMul.apply(self, other)

    def bmm(self, other: "Tensor") -> "Tensor":
        """Batched matrix product of (B, n, m) and (B, m, p) tensors (no broadcasting)."""
        _check_ranks("bmm", self, other, 3)
        if self.shape[0] != other.shape[0]:
            raise RuntimeError(f"bmm: batch sizes differ: {self.shape} and {other.shape}")
        return MatMul.apply(self, other)

    def reshape(self, *shape: Any) -> "Tensor":
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = tuple(int_arg("reshape", "shape", s) for s in shape)
        return self._mark_view(Reshape.apply(self, shape=shape), ("reshape", shape))

    def view(self, *shape: Any) -> "Tensor":
        """The same data seen with another shape: always a view, as torch's ``view``. When
        the memory layout does not allow one (a transposed tensor), a RuntimeError says to
        use :meth:`reshape` (which copies then) or ``contiguous()`` first."""
        out = self.reshape(*shape)
        if out._base is None and self.numel():
            raise RuntimeError(
                f"view: a tensor of shape {self.shape} with this memory layout (strides "
                f"{self._data.strides}) cannot be viewed as shape {out.shape} without a copy; "
                f"use .reshape(...) (copies when needed) or .contiguous().view(...)"
            )
        return out

    def contiguous(self) -> "Tensor":
        """This tensor when its data is C-contiguous, else a differentiable contiguous
        copy."""
        return self if self._data.flags.c_contiguous else self.clone()

    def is_contiguous(self) -> _bool:
        return bool(self._data.flags.c_contiguous)

    def narrow(self, dim: _int, start: _int, length: _int) -> "Tensor":
        """The view ``self[..., start:start+length, ...]`` along ``dim`` (torch's narrow)."""
        axis = check_axis("narrow", dim, self.ndim, self.shape)
        n = self.shape[axis]
        if not -n <= start <= n or length < 0 or start % max(n, 1) + length > n:
            raise IndexError(f"narrow: start {start} and length {length} do not fit dimension "
                             f"{axis} of size {n} (shape {self.shape})")
        start = start + n if start < 0 else start
        return self[(slice(None),) * axis + (slice(start, start + length),)]

    def flatten(self, start_dim: _int = 0, end_dim: _int = -1) -> "Tensor":
        """Merge dimensions ``start_dim`` to ``end_dim`` into one (all by default)."""
        if self.ndim == 0:
            return self.reshape(1)
        a = check_axis("flatten", int_arg("flatten", "start_dim", start_dim), self.ndim,
                        self.shape)
        b = check_axis("flatten", int_arg("flatten", "end_dim", end_dim), self.ndim,
                        self.shape)
        if a > b:
            raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
        merged = math.prod(self.shape[a:b + 1])
        return self.reshape(self.shape[:a] + (merged,) + self.shape[b + 1:])

    def transpose(self, *axes: Any) -> "Tensor":
        """Reorder axes; the three spellings of torch and NumPy all mean what they mean there:

        * ``t.transpose(dim0, dim1)``, two integers: swap those two axes (torch's
          ``transpose``; on a 2-D tensor also NumPy's ``transpose(1, 0)``);
        * ``t.transpose((2, 0, 1))`` or ``t.transpose(2, 0, 1)`` with every axis: the
          permutation (NumPy's ``transpose``, torch's ``permute``), output axis i is
          input axis ``axes[i]``;
        * ``t.transpose()``: all axes reversed (``t.T``).

        Two integers always swap, also on a 2-D tensor, where NumPy would read
        ``transpose(0, 1)`` as the identity permutation and torch swaps: the torch
        meaning wins, since a silent no-op would hide the bug."""
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            return self._permuted(tuple(axes[0]), "transpose")
        if len(axes) == 2:
            return self._swap("transpose", *axes)
        return self._permuted(tuple(axes) if axes else None, "transpose")

    def _permuted(self, axes: tuple | None, op: str) -> "Tensor":
        """The view of this tensor with its axes permuted (Transpose, a view)."""
        out = Transpose.apply(self, axes=axes, op=op)
        if axes is None:
            axes = tuple(reversed(range(self.ndim)))
        return self._mark_view(out, ("transpose", tuple(int(a) % self.ndim for a in axes)),
                               always=True)

    def permute(self, *axes: Any, dims: Any = None) -> "Tensor":
        """The permutation ``axes`` (every axis once): ``t.permute(2, 0, 1)`` or
        ``t.permute((2, 0, 1))``, as torch's ``permute`` and NumPy's ``transpose``."""
        if dims is not None:
            axes = (dims,)
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        return self._permuted(tuple(axes), "permute")

    def swapaxes(self, a: _int, b: _int) -> "Tensor":
        """Swap axes ``a`` and ``b`` (NumPy's ``swapaxes``, torch's ``transpose(a, b)``)."""
        return self._swap("swapaxes", a, b)

    def _swap(self, op: str, a: Any, b: Any) -> "Tensor":
        for axis in (a, b):
            if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
                raise TypeError(f"{op}: axes must be integers, got {a!r} and {b!r}")
        a = check_axis(op, a, self.ndim, self.shape)
        b = check_axis(op, b, self.ndim, self.shape)
        axes = list(range(self.ndim))
        axes[a], axes[b] = axes[b], axes[a]
        return self._permuted(tuple(axes), op)

    def unsqueeze(self, dim: _int) -> "Tensor":
        axis = check_axis("unsqueeze", int_arg("unsqueeze", "dim", dim), self.ndim + 1,
                           self.shape)
        return self.reshape(self.shape[:axis] + (1,) + self.shape[axis:])

    def squeeze(self, dim: _int | None = None) -> "Tensor":
        axis = dim
        if axis is None:
            return self.reshape(tuple(s for s in self.shape if s != 1))
        if self.ndim == 0 and axis in (0, -1):  # as torch: squeezing a 0-d tensor is a no-op
            return self
        axis = check_axis("squeeze", axis, self.ndim, self.shape)
        if self.shape[axis] != 1:
            return self
        return self.reshape(self.shape[:axis] + self.shape[axis + 1:])

    def broadcast_to(self, shape: Sequence[_int]) -> "Tensor":
        """A read-only view with ``shape`` (as torch's ``expand``: entries share memory, so an
        in-place write into the result is refused)."""
        shape = tuple(shape)
        return self._mark_view(BroadcastTo.apply(self, shape=shape), ("expand", shape),
                               always=True)

    def expand(self, *shape: Any) -> "Tensor":
        """torch's ``expand``: ``x.expand(3, 4)`` or ``x.expand((3, 4))``; -1 keeps a size."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        lead = len(shape) - self.ndim
        if lead < 0:
            raise ValueError(f"expand: {len(shape)} sizes given for a tensor of shape "
                             f"{self.shape}; give at least {self.ndim}")
        sizes = tuple(self.shape[i - lead] if s == -1 and i >= lead else s
                      for i, s in enumerate(shape))
        return self.broadcast_to(sizes)

    def exp(self) -> "Tensor":
        return Exp.apply(self)

    def log(self) -> "Tensor":
        return Log.apply(self)

    def sqrt(self) -> "Tensor":
        return Sqrt.apply(self)

    def abs(self) -> "Tensor":
        return Abs.apply(self)

    def tanh(self) -> "Tensor":
        return Tanh.apply(self)

    def sigmoid(self) -> "Tensor":
        return Sigmoid.apply(self)

    def relu(self) -> "Tensor":
        return ReLU.apply(self)

    def softmax(self, dim: _int = -1, mask: Any = None, *, axis: Any = None) -> "Tensor":
        axis = int_arg("softmax", "dim", dim if axis is None else axis)
        return Softmax.apply(self, axis=axis, mask=constant_data(mask, self, "softmax", "mask"))

    def log_softmax(self, dim: _int = -1, mask: Any = None, *, axis: Any = None) -> "Tensor":
        axis = int_arg("log_softmax", "dim", dim if axis is None else axis)
        return LogSoftmax.apply(self, axis=axis,
                                mask=constant_data(mask, self, "log_softmax", "mask"))

    def clip(self, min: _float | None = None, max: _float | None = None) -> "Tensor":
        """Clamp to [min, max]; see :func:`tinygrad_rnn.functional.clip` (an integer tensor
        with a float bound gives float32)."""
        return Clip.apply(self, lo=min, hi=max)

    clamp = clip

    def maximum(self, other: Any) -> "Tensor":
        return Maximum.apply(self, other)

    def minimum(self, other: Any) -> "Tensor":
        return Minimum.apply(self, other)

    def pow(self, exponent: _float) -> "Tensor":
        return self ** exponent

    def matmul(self, other: Any) -> "Tensor":
        return MatMul.apply(self, other)

    def masked_fill(self, mask: Any, value: _float) -> "Tensor":
        return MaskedFill.apply(self, mask=constant_data(mask, self, "masked_fill", "mask"),
                                value=value)


def _no_out(op: str, out: Any) -> None:
    """``out=`` (torch's and NumPy's output argument) is accepted only as None: results are
    always new tensors here (np.sum(t) passes out=None)."""
    if out is not None:
        raise TypeError(f"{op}: out= is not supported; assign the result instead "
                        f"(y = x.{op}(...))")


def _keep(keepdim: Any, keepdims: Any) -> bool:
    """torch's ``keepdim`` or NumPy's ``keepdims`` (either spelling, not two different
    values)."""
    if keepdims is UNSET:
        return keepdim
    if keepdim and not keepdims:
        raise TypeError("give keepdim or keepdims, not both")
    return keepdims


def _check_ranks(op: str, a: Any, b: Any, rank: int) -> None:
    for name, t in (("input", a), ("mat2", b)):
        if not isinstance(t, Tensor) or t.ndim != rank:
            shape = t.shape if isinstance(t, Tensor) else type(t).__name__
            raise RuntimeError(f"{op}: {name} must be a {rank}-D tensor, got {shape}")


class Size(tuple):
    """torch's ``Size``: a shape, a tuple of ints (``x.size()``, ``x.shape``)."""

    def numel(self) -> int:
        """The number of elements of a tensor of this shape."""
        return math.prod(self)


    # printed as a plain tuple, (3, 4), so shapes read the same in every message


class ValuesIndices(tuple):
    """``(values, indices)`` as torch's ``max(dim)``, ``min(dim)``, ``topk`` and ``sort``
    return them: a pair that also has the fields ``values`` and ``indices``."""

    def __new__(cls, values: Tensor, indices: Tensor) -> "ValuesIndices":
        return super().__new__(cls, (values, indices))

    @property
    def values(self) -> Tensor:
        return self[0]

    @property
    def indices(self) -> Tensor:
        return self[1]


_TYPE_NAMES = {np.dtype(np.float32): "FloatTensor", np.dtype(np.float64): "DoubleTensor",
               np.dtype(np.float16): "HalfTensor", np.dtype(np.int64): "LongTensor",
               np.dtype(np.int32): "IntTensor", np.dtype(np.int16): "ShortTensor",
               np.dtype(np.int8): "CharTensor", np.dtype(np.uint8): "ByteTensor",
               np.dtype(np.bool_): "BoolTensor"}


_NAMED_TYPES = {name: dtype for dtype, name in _TYPE_NAMES.items()}


def _is_device(value: Any) -> bool:
    """Whether ``value`` names a device (a string or a ``tr.device``), not a dtype."""
    from .backend import device as device_class

    return isinstance(value, (str, device_class))


def _axis(axis: Any, dim: Any) -> Any:
    if dim is not None:
        if axis is not None:
            raise TypeError("give axis or dim, not both")
        return dim
    return axis


def constant_data(value: Any, ref: Any, op: str, name: str) -> Any:
    """The raw data of a constant argument (mask, target, ids, class weights) of ``op`` on
    the tensor ``ref``. Host data (NumPy arrays, lists) is returned as it is: the op copies
    it to ``ref``'s device. A Tensor must be on ``ref``'s device; one on another device is a
    RuntimeError naming both (nothing moves between devices behind the user's back)."""
    if not isinstance(value, Tensor):
        return value
    if isinstance(ref, Tensor) and value.device != ref.device:
        raise RuntimeError(
            f"{op}: the input is on {ref.device} but {name} is a tensor on {value.device}; "
            f"move it with .to({ref.device!r})"
        )
    return value._data


def _index(index: Any, xp: Any = np) -> Any:
    """Normalise an index for an array of module ``xp``: tensors and lists become arrays
    (index arrays given on the host are copied to ``xp``'s device); always a tuple."""
    if not isinstance(index, tuple):
        index = (index,)
    out = []
    for i in index:
        if isinstance(i, Tensor):
            i = i._data
        elif isinstance(i, list):
            # an empty list selects nothing (NumPy, torch); asarray would make it float
            i = np.asarray(i) if i else np.asarray(i, dtype=np.intp)
        if hasattr(i, "dtype") and hasattr(i, "shape") and not isinstance(i, np.generic):
            if i.dtype.kind not in "iub":
                raise IndexError(f"tensors used as indices must be integer or boolean, got "
                                 f"dtype {i.dtype}")
            if xp is not np and type(i) is np.ndarray:
                i = xp.asarray(i)
            elif xp is np and type(i) is not np.ndarray:
                raise RuntimeError(
                    f"indexing a cpu tensor with an index on {device_of(i)}; copy the index "
                    f"to the host first (.numpy() / .cpu())"
                )
        out.append(i)
    return tuple(out)


# NumPy's arithmetic ufuncs with a tensor operand, as the tensors' recorded ops (so that
# ``ndarray * tensor`` is a tensor with a graph, as ``tensor * ndarray`` is)
_UFUNC_OPS: dict[str, Callable] = {
    "add": lambda a, b: Add.apply(a, b),
    "subtract": lambda a, b: Sub.apply(a, b),
    "multiply": lambda a, b: Mul.apply(a, b),
    "true_divide": lambda a, b: Div.apply(a, b),
    "divide": lambda a, b: Div.apply(a, b),
    "matmul": lambda a, b: MatMul.apply(a, b),
}


def _elementwise_comparison(name: str) -> Callable:
    """``ndarray == tensor`` and friends: a boolean tensor, as ``tensor == ndarray`` gives."""
    def compare(a: Any, b: Any) -> Tensor:
        t = a if isinstance(a, Tensor) else b
        raw_a = a._data if isinstance(a, Tensor) else a
        raw_b = b._data if isinstance(b, Tensor) else b
        return Tensor._wrap(getattr(get_array_module(t._data), name)(raw_a, raw_b))

    return compare


for _name in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"):
    _UFUNC_OPS[_name] = _elementwise_comparison(_name)


def _read_only(arr: np.ndarray) -> np.ndarray:
    """A read-only view of ``arr`` (the tensor's own array keeps its flags)."""
    view = arr.view()
    view.flags.writeable = False
    return view


def _ufunc(name: str, t: Tensor) -> Callable:
    """The ufunc ``name`` of the array module of ``t``'s data."""
    return getattr(get_array_module(t._data), name)


def check_tensor(op: str, name: str, value: Any) -> None:
    if not isinstance(value, Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(value).__name__}")


# ------------------------------------------------------------------------- the tensor layer
# The dtype policy, the engine (recording, the backward walk) and the creation functions
# build on Tensor and import it from here, so they are imported last: each module of the
# layer then finds the others' names defined whichever of them is imported first (the
# methods above use these names only when called).
from .creation import full, ones, split, zeros  # noqa: E402
from .dtypes import (  # noqa: E402
    check_dtype, check_real_operands, fill_scalar, is_real_scalar, kind_rank, raw_like,
    to_array,
)
from .engine import (  # noqa: E402
    rebase, record_update, record_write, run_backward, write_is_recorded,
)
