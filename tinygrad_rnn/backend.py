"""Array backends and the dtype policy.

Every array call in tinygrad_rnn goes through the array module of its inputs, found by
:func:`get_array_module`: NumPy by default, CuPy when the data lives on a GPU, and the module
of any device added with :func:`register_device`. Nothing here imports CuPy at module import
time, so CuPy stays optional.

Devices
-------
``'cpu'`` (NumPy) and ``'cuda'`` (CuPy; :func:`module_for_device` raises a RuntimeError
saying whether CuPy or a GPU is missing) are built in. :func:`register_device` adds others:
the test suite and the CLI's ``--device standin`` register ``'standin'``, a CuPy emulator
(NumPy underneath, CuPy's rules on top: :mod:`tinygrad_rnn.testing.cupy_emulator`, which
registers itself when ``tinygrad_rnn.testing`` is imported). Data moves between devices only
through :func:`to_device` (``Tensor.to``, ``Module.to``, ``Tensor.numpy``), never
implicitly.

Dtype policy
------------
* Python floats and lists of floats become ``float32`` (:data:`DEFAULT_FLOAT`).
* A NumPy array keeps its dtype (a float64 array stays float64).
* A Python or NumPy scalar combined with a tensor takes the tensor's float dtype, so a scalar
  never silently promotes a float32 computation to float64 (NumPy 2 would promote
  ``float32_array * np.float64(2.0)`` to float64).
"""
from __future__ import annotations

import types
from typing import Any

import numpy as np

#: The float dtype at import (float32); the current one is :func:`get_default_dtype`.
DEFAULT_FLOAT = np.float32


class _Default:
    """The default float dtype: what Python floats become, and what integer data computes in
    where the math is floating (torch's ``get_default_dtype``)."""

    float = np.dtype(np.float32)


def get_default_dtype() -> np.dtype:
    """The default float dtype (float32 unless :func:`set_default_dtype` changed it)."""
    return _Default.float


def set_default_dtype(dtype: Any) -> None:
    """Set the default float dtype, as torch's ``set_default_dtype``: float32, float64 or
    float16 (anything else is a TypeError: the default must be a floating-point type)."""
    try:
        d = np.dtype(dtype)
    except TypeError:
        d = None
    if d is None or d.kind != "f" or d.itemsize not in (2, 4, 8):
        raise TypeError(f"set_default_dtype: only float16, float32 and float64 can be the "
                        f"default dtype, got {dtype!r}")
    _Default.float = d


class device:
    """torch's ``device``: ``tr.device('cpu')``, ``tr.device('cuda')``, ``tr.device('cuda',
    0)``; usable wherever a device is taken, and equal to its name (``device('cpu') ==
    'cpu'``). Only the device kinds of this package exist ('cpu', 'cuda' (index 0) and the
    registered ones: :func:`registered_devices`)."""

    def __init__(self, type: Any, index: int | None = None) -> None:
        if isinstance(type, device):
            type, index = type.type, type.index if index is None else index
        if not isinstance(type, str):
            raise TypeError(f"device: expected a device name such as 'cpu' or 'cuda', got "
                            f"{type!r}")
        name, _, number = type.partition(":")
        if number:
            if index is not None:
                raise ValueError(f"device: the index is given twice ({type!r} and {index})")
            parsed: Any = int(number) if number.isdigit() else number  # a str is refused
            index = parsed
        if index not in (None, 0):
            raise ValueError(f"device: only one device of each kind exists here, got index "
                             f"{index!r} (use {name!r} or '{name}:0')")
        self.type: str = normalize_device(name)
        self.index: int | None = index

    def __str__(self) -> str:
        return self.type

    def __repr__(self) -> str:
        return f"device(type={self.type!r}" + (f", index={self.index})" if self.index
                                                 is not None else ")")

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, (device, str)):
            try:
                return normalize_device(str(other)) == self.type
            except ValueError:
                return False
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.type)

#: The devices that are always there; :func:`register_device` adds others.
BUILTIN_DEVICES = ("cpu", "cuda")

_cupy: types.ModuleType | None = None
_cupy_error: str | None = None
_cupy_checked = False
_gpu_checked = False
_gpu_error: str | None = None

# Array type -> array module, for every backend loaded so far. NumPy's own types are absent:
# get_array_module falls back to numpy for anything not listed here. The engine reads it when
# it records an op with an array constant (empty: no device array can exist yet).
DEVICE_MODULES: dict[type, types.ModuleType] = {}
_MODULE_DEVICE: dict[Any, str] = {np: "cpu"}
# Device name -> array module, for the devices added with register_device.
_REGISTERED: dict[str, types.ModuleType] = {}


def _try_cupy() -> types.ModuleType | None:
    """Import CuPy once, on demand; ``None`` when it is not installed (the reason is kept)."""
    global _cupy, _cupy_checked, _cupy_error
    if not _cupy_checked:
        _cupy_checked = True
        try:
            import cupy

            _cupy = cupy
            DEVICE_MODULES[cupy.ndarray] = cupy
            _MODULE_DEVICE[cupy] = "cuda"
        except Exception as exc:  # ImportError, or a CUDA runtime that fails to load
            _cupy = None
            _cupy_error = f"{type(exc).__name__}: {exc}"
    return _cupy


def register_device(name: str, module: types.ModuleType, array_type: type) -> None:
    """Add the device ``name``, whose arrays are of ``array_type`` and whose array module is
    ``module``: after this, ``Tensor(..., device=name)``, ``.to(name)`` and every op work on
    it, and :func:`get_array_module` returns ``module`` for its arrays.

    ``module`` offers NumPy's functions under NumPy's names (as CuPy does), ``asarray``
    copies host data onto the device, and its arrays copy back with ``.get()``. Registering
    the same device again is a no-op; 'cpu' and 'cuda', and a name taken by another module,
    are a ValueError. ``tinygrad_rnn.testing.cupy_emulator`` registers ``'standin'`` this
    way when it is imported.
    """
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(f"register_device: the device name must be a non-empty string "
                         f"without ':', got {name!r}")
    if name in BUILTIN_DEVICES:
        raise ValueError(f"register_device: {name!r} is built in and cannot be replaced")
    if _REGISTERED.get(name, module) is not module:
        raise ValueError(f"register_device: {name!r} is already the device of "
                         f"{_REGISTERED[name].__name__}")
    _REGISTERED[name] = module
    DEVICE_MODULES[array_type] = module
    _MODULE_DEVICE[module] = name


def registered_devices() -> tuple[str, ...]:
    """The names of every device: 'cpu', 'cuda', then those added by
    :func:`register_device`, in order."""
    return BUILTIN_DEVICES + tuple(_REGISTERED)


def _require_cuda() -> types.ModuleType:
    """CuPy with a usable GPU, or a RuntimeError saying which of the two is missing."""
    global _gpu_checked, _gpu_error
    cp = _try_cupy()
    if cp is None:
        raise RuntimeError(
            "device 'cuda' needs CuPy, which could not be imported "
            f"({_cupy_error}); install it with: pip install \"tinygrad_rnn[gpu]\" "
            "(CuPy for CUDA 12)"
        )
    if not _gpu_checked:
        _gpu_checked = True
        try:
            n = cp.cuda.runtime.getDeviceCount()
            if n < 1:
                _gpu_error = "the CUDA runtime reports 0 devices"
        except Exception as exc:  # no driver, no device
            _gpu_error = f"{type(exc).__name__}: {exc}"
    if _gpu_error is not None:
        raise RuntimeError(
            f"device 'cuda': CuPy {cp.__version__} is installed but no CUDA GPU is usable "
            f"({_gpu_error})"
        )
    return cp


def cuda_is_available() -> bool:
    """True when CuPy imports and sees at least one CUDA GPU (never raises)."""
    try:
        _require_cuda()
    except RuntimeError:
        return False
    return True


def normalize_device(device: Any) -> str:
    """``'cpu'``, ``'cuda'`` or a registered device's name from a device name (``'cuda:0'`` is
    ``'cuda'``); a ValueError names an unknown device and lists the known ones."""
    name = str(device) if not isinstance(device, str) else device
    if name == "cuda:0":
        return "cuda"
    if name not in BUILTIN_DEVICES and name not in _REGISTERED:
        known = ", ".join(["'cpu'", "'cuda' (or 'cuda:0')"] + [repr(d) for d in _REGISTERED])
        hint = ""
        if name == "standin":
            hint = ("; 'standin', the CuPy emulator that plays a GPU on the CPU, is registered "
                    "by importing tinygrad_rnn.testing (the test suite and the CLI's --device "
                    "standin do)")
        raise ValueError(f"unknown device {device!r}; expected one of {known}{hint}")
    return name


def module_for_device(device: str) -> types.ModuleType:
    """The array module of ``device`` (loading CuPy on demand)."""
    device = normalize_device(device)
    if device == "cpu":
        return np
    if device == "cuda":
        return _require_cuda()
    return _REGISTERED[device]


def get_array_module(*arrays: Any) -> types.ModuleType:
    """Return the array module (``numpy``, ``cupy`` or a registered one) that owns ``arrays``.

    Non-array arguments (Python scalars, ``None``) are ignored. NumPy is returned when no
    argument is a device array.
    """
    for a in arrays:
        t = type(a)
        xp = DEVICE_MODULES.get(t)
        if xp is not None:
            return xp
        if t is not np.ndarray and t.__module__.startswith("cupy"):
            cp = _try_cupy()
            if cp is not None:
                return cp
    return np


def device_of(array: Any) -> str:
    """The device an array (or scalar) lives on: ``'cpu'``, ``'cuda'`` or a registered one."""
    return device_of_module(get_array_module(array))


def device_of_module(xp: types.ModuleType) -> str:
    """The device whose array module is ``xp`` (one returned by :func:`get_array_module`)."""
    return _MODULE_DEVICE[xp]


def to_device(array: Any, device: str) -> Any:
    """``array`` on ``device``: the same object when it is already there, else an explicit
    copy (device to host with ``.get()``, host to device with the device's ``asarray``; a
    move between two devices goes through the host)."""
    device = normalize_device(device)
    src = device_of(array)
    if src == device:
        return array
    host = array.get() if src != "cpu" else array
    if device == "cpu":
        return host
    return module_for_device(device).asarray(host)


def is_float_dtype(dtype: Any) -> bool:
    """True for floating-point dtypes (the only ones that can carry gradients)."""
    return np.dtype(dtype).kind == "f"


def result_float_dtype(*dtypes: Any) -> np.dtype:
    """The float dtype a computation on ``dtypes`` produces: NumPy promotion among the
    float dtypes present, :data:`DEFAULT_FLOAT` when none is a float."""
    floats = [np.dtype(d) for d in dtypes if is_float_dtype(d)]
    if not floats:
        return _Default.float
    return np.result_type(*floats)


def index_array_axes(index: tuple, ndim: int) -> list[tuple[int, int]] | None:
    """Where the integer arrays of an index tuple point: ``(position in the tuple, axis of
    the indexed array)`` for each integer-array component, in order.

    ``index`` is a tuple of ints, slices, ``None``, ``Ellipsis``, booleans and arrays (NumPy,
    CuPy or a registered device's; lists already converted to arrays), for an array of ``ndim``
    dimensions. An int, a slice and an integer array each take one axis, a boolean array as
    many axes as it has dimensions, ``None`` and a Python boolean none, and ``Ellipsis`` the
    axes the rest leaves over. ``None`` when the form cannot be mapped (more than one
    Ellipsis, more indices than axes, a component that is no index): indexing with it
    raises anyway.

    >>> import numpy as np
    >>> index_array_axes((Ellipsis, np.array([0, 2])), 3)
    [(1, 2)]
    """
    taken = []
    for i in index:
        if i is None or i is Ellipsis or isinstance(i, (bool, np.bool_)):
            taken.append(0)
        elif isinstance(i, (int, np.integer, slice)):
            taken.append(1)
        elif hasattr(i, "dtype") and hasattr(i, "ndim") and i.dtype.kind in "iub":
            taken.append(i.ndim if i.dtype.kind == "b" else 1)
        else:
            return None
    ellipses = sum(1 for i in index if i is Ellipsis)
    if ellipses > 1 or sum(taken) > ndim:
        return None
    axes, axis = [], 0
    for pos, (i, n) in enumerate(zip(index, taken)):
        if i is Ellipsis:
            axis += ndim - sum(taken)
        elif n and hasattr(i, "dtype") and i.dtype.kind in "iu":
            axes.append((pos, axis))
        axis += n
    return axes
