"""Making tensors (``tensor``, ``zeros``, ``ones``, ``full``, ``arange``, ``randn``, ``rand``,
the ``*_like`` forms, torch's typed constructors) and joining and splitting them (``cat``,
``stack``, ``split``, ``where``), with torch's signatures and dtype rules.

Random tensors are drawn on the host from a seed or a Generator and then copied to the
device, so a seed gives the same numbers on every device.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from .arguments import UNSET, check_axis, check_shape, generator_for, int_arg, is_int
from .backend import get_default_dtype, module_for_device
from .ops import Concatenate, Split, Stack, Where

__all__ = [
    "tensor", "zeros", "ones", "zeros_like", "ones_like", "full", "arange", "randn", "rand",
    "cat", "concatenate", "stack", "split", "where", "empty", "full_like", "empty_like",
    "rand_like", "randn_like", "linspace", "randint", "randperm", "from_numpy", "as_tensor",
    "is_tensor", "numel", "FloatTensor", "DoubleTensor", "LongTensor", "IntTensor",
    "BoolTensor", "ByteTensor",
]


# ------------------------------------------------------------------------- creation
def tensor(data: Any, requires_grad: bool = False, dtype: Any = None,
           device: Any = None) -> Tensor:
    """Same as ``Tensor(data, requires_grad, dtype, device)``."""
    return Tensor(data, requires_grad=requires_grad, dtype=dtype, device=device)


def _new(make: Callable[[Any], Any], requires_grad: bool, device: Any,
         op: str = "tensor") -> Tensor:
    """A tensor whose data ``make(xp)`` builds directly with the device's array module."""
    _check_flag(op, "requires_grad", requires_grad)
    xp = np if device is None else module_for_device(device)
    t = Tensor._wrap(make(xp))
    if requires_grad:
        t.requires_grad_(True)
    return t


def zeros(*shape: Any, dtype: Any = None, requires_grad: bool = False,
          device: Any = None) -> Tensor:
    """A tensor of zeros: ``zeros(2, 3)`` or ``zeros((2, 3))``."""
    shape, dtype = check_shape("zeros", shape), check_dtype("zeros", dtype)
    return _new(lambda xp: xp.zeros(shape, dtype=dtype), requires_grad, device, "zeros")


def ones(*shape: Any, dtype: Any = None, requires_grad: bool = False,
         device: Any = None) -> Tensor:
    """A tensor of ones: ``ones(2, 3)`` or ``ones((2, 3))``."""
    shape, dtype = check_shape("ones", shape), check_dtype("ones", dtype)
    return _new(lambda xp: xp.ones(shape, dtype=dtype), requires_grad, device, "ones")


def full(shape: Sequence[int], value: Any, dtype: Any = None,
         requires_grad: bool = False, device: Any = None) -> Tensor:
    """A tensor of ``shape`` filled with ``value``, a real number. Without ``dtype`` the
    dtype follows the value, as in torch: bool for a bool, int64 for an integer,
    the default float dtype (float32 unless ``set_default_dtype`` changed it) for a float. A
    value the dtype cannot hold exactly (2.5 in an integer dtype) is a ValueError, as for
    :meth:`Tensor.fill_`."""
    shape = check_shape("full", (shape,))
    if dtype is None:
        v = scalar_value("full", value)
        dtype = (np.bool_ if isinstance(v, (bool, np.bool_)) else np.int64
                 if isinstance(v, (int, np.integer)) else get_default_dtype())
    dtype = check_dtype("full", dtype)
    v = exact_value("full", value, dtype, shape)
    return _new(lambda xp: xp.full(shape, v, dtype=dtype), requires_grad, device, "full")


def zeros_like(t: Tensor, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Zeros with ``t``'s shape, dtype (unless given) and device."""
    check_tensor("zeros_like", "t", t)
    dtype = t.dtype if dtype is None else check_dtype("zeros_like", dtype)
    return _new(lambda xp: xp.zeros(t.shape, dtype=dtype), requires_grad, t.device,
                "zeros_like")


def ones_like(t: Tensor, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Ones with ``t``'s shape, dtype (unless given) and device."""
    check_tensor("ones_like", "t", t)
    dtype = t.dtype if dtype is None else check_dtype("ones_like", dtype)
    return _new(lambda xp: xp.ones(t.shape, dtype=dtype), requires_grad, t.device,
                "ones_like")


def empty(*shape: Any, dtype: Any = None, requires_grad: bool = False,
          device: Any = None) -> Tensor:
    """torch's ``empty``. Here the entries are zeros, never leftover memory: an
    uninitialised value would be a silent source of wrong numbers."""
    shape, dtype = check_shape("empty", shape), check_dtype("empty", dtype)
    return _new(lambda xp: xp.zeros(shape, dtype=dtype), requires_grad, device, "empty")


def full_like(t: Tensor, fill_value: Any, dtype: Any = None,
              requires_grad: bool = False) -> Tensor:
    """``full`` with ``t``'s shape, dtype (unless given) and device."""
    check_tensor("full_like", "t", t)
    return full(t.shape, fill_value, dtype=dtype or t.dtype, requires_grad=requires_grad,
                device=t.device)


def empty_like(t: Tensor, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    check_tensor("empty_like", "t", t)
    return empty(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad,
                 device=t.device)


def rand_like(t: Tensor, generator: Any = None, dtype: Any = None,
              requires_grad: bool = False) -> Tensor:
    check_tensor("rand_like", "t", t)
    return rand(t.shape, generator=generator, dtype=dtype or t.dtype,
                requires_grad=requires_grad, device=t.device)


def randn_like(t: Tensor, generator: Any = None, dtype: Any = None,
               requires_grad: bool = False) -> Tensor:
    check_tensor("randn_like", "t", t)
    return randn(t.shape, generator=generator, dtype=dtype or t.dtype,
                 requires_grad=requires_grad, device=t.device)


def linspace(start: float, end: float, steps: int, dtype: Any = None,
             requires_grad: bool = False, device: Any = None) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive (computed in
    float64, rounded once to the dtype)."""
    steps = int_arg("linspace", "steps", steps)
    if steps < 0:
        raise ValueError(f"linspace: steps must be >= 0, got {steps}")
    for name, v in (("start", start), ("end", end)):
        if not is_real_scalar(v) or not math.isfinite(float(v)):
            raise TypeError(f"linspace: {name} must be a finite real number, got {v!r}")
    dtype = check_dtype("linspace", dtype, floating=True)
    values = np.linspace(float(start), float(end), steps).astype(dtype)
    return Tensor(values, requires_grad=requires_grad, device=device)


def randint(low: int, high: Any = None, size: Any = None, *, generator: Any = None,
            dtype: Any = np.int64, device: Any = None) -> Tensor:
    """Integers drawn uniformly from [low, high): ``randint(high, size)`` or
    ``randint(low, high, size)``, from ``generator`` (a seed or numpy Generator)."""
    if size is None:  # randint(high, size)
        low, high, size = 0, low, high
    low, high = int_arg("randint", "low", low), int_arg("randint", "high", high)
    if high <= low:
        raise ValueError(f"randint: need low < high, got low={low}, high={high}")
    shape = check_shape("randint", (size,))
    dtype = check_dtype("randint", dtype)
    data = generator_for("randint", generator).integers(low, high, size=shape).astype(dtype)
    return Tensor(data, device=device)


def randperm(n: int, *, generator: Any = None, dtype: Any = np.int64,
             device: Any = None) -> Tensor:
    """A random permutation of 0 .. n-1 from ``generator`` (a seed or numpy Generator)."""
    n = int_arg("randperm", "n", n)
    if n < 0:
        raise ValueError(f"randperm: n must be >= 0, got {n}")
    data = generator_for("randperm", generator).permutation(n).astype(
        check_dtype("randperm", dtype))
    return Tensor(data, device=device)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor that shares memory with the NumPy ``array`` (writes through either are seen
    by the other), as torch's ``from_numpy``."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(array).__name__}")
    if array.dtype.kind not in SUPPORTED_KINDS:
        raise TypeError(f"from_numpy: arrays of dtype {array.dtype} are not supported "
                        f"(booleans, integers and floats are)")
    return Tensor._wrap(array)


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """``data`` as a tensor, without a copy where possible (a tensor of the same dtype and
    device is returned as it is; a NumPy array of the right dtype is shared)."""
    if isinstance(data, Tensor):
        if dtype is not None:
            data = data.astype(check_dtype("as_tensor", dtype))
        return data if device is None else data.to(device)
    if (isinstance(data, np.ndarray) and device in (None, "cpu")
            and (dtype is None or np.dtype(dtype) == data.dtype)):
        return from_numpy(data)
    return Tensor(data, dtype=dtype, device=device)


def is_tensor(obj: Any) -> bool:
    return isinstance(obj, Tensor)


def numel(t: Tensor) -> int:
    check_tensor("numel", "input", t)
    return t.numel()


def _typed_tensor(name: str, dtype: Any) -> Callable:
    def make(*data: Any) -> Tensor:
        """A tensor of this type from data (``LongTensor([1, 2])``) or of this shape
        (``FloatTensor(2, 3)``: zeros here, never uninitialised memory)."""
        if len(data) == 1 and not is_int(data[0]):
            return Tensor(data[0], dtype=dtype)
        return zeros(*data, dtype=dtype)

    make.__name__ = make.__qualname__ = name
    return make


FloatTensor = _typed_tensor("FloatTensor", np.float32)


DoubleTensor = _typed_tensor("DoubleTensor", np.float64)


LongTensor = _typed_tensor("LongTensor", np.int64)


IntTensor = _typed_tensor("IntTensor", np.int32)


BoolTensor = _typed_tensor("BoolTensor", np.bool_)


ByteTensor = _typed_tensor("ByteTensor", np.uint8)


def arange(*args: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """Evenly spaced values in [start, stop): ``arange(stop)``, ``arange(start, stop)`` or
    ``arange(start, stop, step)``.

    The dtype follows torch, not NumPy: when ``dtype`` is not given, any float argument
    gives the default float dtype (``arange(0., 1., .25)`` is float32; NumPy would give float64),
    integer arguments give int64. The values are computed in float64 and rounded once to
    the dtype, so a float32 result has no error accumulated over the steps."""
    if not 1 <= len(args) <= 3:
        raise TypeError(f"arange: expected 1 to 3 arguments (start, stop, step), got "
                        f"{len(args)}")
    kinds = []
    for a in args:
        number = isinstance(a, (int, float, np.generic)) and not isinstance(a, (bool, np.bool_))
        kinds.append(np.result_type(a).kind if number else "")
        if kinds[-1] not in ("i", "u", "f"):
            raise TypeError(f"arange: start, stop and step must be real numbers, got {a!r} "
                            f"({type(a).__name__})")
    for a in args:
        if not math.isfinite(a):
            raise ValueError(f"arange: start, stop and step must be finite, got {args}")
    if len(args) == 3 and args[2] == 0:
        raise ValueError("arange: step must not be zero")
    if dtype is None:
        dtype = get_default_dtype() if "f" in kinds else np.int64
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return _new(lambda xp: xp.arange(*args, dtype=np.float64).astype(dtype, copy=False),
                    False, device)
    return _new(lambda xp: xp.arange(*args, dtype=dtype), False, device)


def randn(*shape: Any, generator: Any = None, dtype: Any = None,
          requires_grad: bool = False, device: Any = None) -> Tensor:
    """Standard normal samples from ``generator`` (a seed or numpy Generator). The samples
    are drawn on the host and copied to ``device``, so a seed gives the same numbers on
    every device."""
    shape = check_shape("randn", shape)
    dtype = check_dtype("randn", dtype, floating=True)
    _check_flag("randn", "requires_grad", requires_grad)
    data = generator_for("randn", generator).standard_normal(shape).astype(dtype)
    return Tensor(data, requires_grad=requires_grad, device=device)


def rand(*shape: Any, generator: Any = None, dtype: Any = None,
         requires_grad: bool = False, device: Any = None) -> Tensor:
    """Uniform [0, 1) samples from ``generator`` (a seed or numpy Generator), drawn on the
    host and copied to ``device``."""
    shape = check_shape("rand", shape)
    dtype = check_dtype("rand", dtype, floating=True)
    _check_flag("rand", "requires_grad", requires_grad)
    data = generator_for("rand", generator).random(shape).astype(dtype)
    return Tensor(data, requires_grad=requires_grad, device=device)


# ------------------------------------------------------------------------- joining
def cat(tensors: Sequence[Any], axis: Any = UNSET, *, dim: int | None = None) -> Tensor:
    """Concatenate along an existing axis (torch.cat / numpy.concatenate)."""
    axis = int_arg("cat", "dim", _dim_or_axis("cat", dim, axis))
    return Concatenate.apply(*_tensor_sequence("cat", tensors), axis=axis)


concatenate = cat


def stack(tensors: Sequence[Any], axis: Any = UNSET, *, dim: int | None = None) -> Tensor:
    """Stack along a new axis."""
    axis = int_arg("stack", "dim", _dim_or_axis("stack", dim, axis))
    return Stack.apply(*_tensor_sequence("stack", tensors), axis=axis)


def split(x: Tensor, split_size_or_sections: Any, axis: Any = UNSET, *,
          dim: int | None = None) -> tuple:
    """Split into pieces (torch semantics): an int gives pieces of that size (the last may be
    smaller); a list gives the sizes of the pieces."""
    check_tensor("split", "x", x)
    axis = int_arg("split", "dim", _dim_or_axis("split", dim, axis))
    n = x.shape[check_axis("split", axis, x.ndim, x.shape)]
    if is_int(split_size_or_sections):
        step = int(split_size_or_sections)
        if step <= 0:
            raise ValueError(f"split: split size must be positive, got {step}")
        sizes = [min(step, n - s) for s in range(0, n, step)] or [0]
    elif isinstance(split_size_or_sections, (list, tuple)):
        sizes = [int_arg("split", "split_size_or_sections", s)
                 for s in split_size_or_sections]
    else:
        raise TypeError(f"split: split_size_or_sections must be an int or a list of ints, got "
                        f"{split_size_or_sections!r}")
    out = Split.apply(x, sizes=sizes, axis=axis)
    return out if isinstance(out, tuple) else (out,)


def where(condition: Any, a: Any, b: Any) -> Tensor:
    """Elementwise choice: ``a`` where condition is True, else ``b``. The condition must
    be boolean (a float mask would be read as nonzero-is-True silently)."""
    ref = a if isinstance(a, Tensor) else b
    cond = constant_data(condition, ref, "where", "condition")
    if not hasattr(cond, "dtype"):
        cond = np.asarray(cond)
    if cond.dtype.kind != "b":
        raise TypeError(f"where: condition must be boolean, got dtype {cond.dtype} of shape "
                        f"{tuple(cond.shape)} (compare first, e.g. mask > 0)")
    return Where.apply(a, b, cond=cond)


# ------------------------------------------------------------------------- argument checks
def _dim_or_axis(op: str, dim: Any, axis: Any) -> Any:
    """torch's ``dim`` or NumPy's ``axis`` (default 0); both given and different is an
    error."""
    if dim is None:
        return 0 if axis is UNSET else axis
    if axis is not UNSET and axis is not dim and axis != dim:
        raise TypeError(f"{op}: give dim or axis, not both (got dim={dim!r}, axis={axis!r})")
    return dim


def _check_flag(op: str, name: str, value: Any) -> None:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{op}: {name} must be a bool, got {value!r} ({type(value).__name__})")


def _tensor_sequence(op: str, tensors: Any) -> list:
    """The tensors of a cat/stack call: a list or tuple of tensors (or arrays)."""
    if isinstance(tensors, (Tensor, np.ndarray, str, bytes)) or not hasattr(tensors, "__iter__"):
        raise TypeError(f"{op}: tensors must be a list or tuple of tensors, got "
                        f"{type(tensors).__name__}")
    items = list(tensors)
    for k, t in enumerate(items):
        if not isinstance(t, Tensor) and not hasattr(t, "shape") and not is_real_scalar(t):
            raise TypeError(f"{op}: tensors[{k}] must be a Tensor, got {type(t).__name__}")
    return items


# Tensor and the dtype policy are imported last, so that the modules of the tensor layer
# find each other's names defined whichever is imported first (the functions above use
# them only when called).
from .dtypes import (  # noqa: E402
    SUPPORTED_KINDS, check_dtype, exact_value, is_real_scalar, scalar_value,
)
from .tensor import Tensor, check_tensor, constant_data  # noqa: E402
