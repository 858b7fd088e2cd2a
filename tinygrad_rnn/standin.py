"""A stand-in device: NumPy underneath, CuPy's rules on top.

``device='standin'`` behaves like a GPU for the one question a test without a GPU can ask:
does any code path hand device data to NumPy, or mix device and host arrays in one call?
Its arrays (:class:`StandInArray`) wrap a NumPy array and

* refuse implicit conversion to ``numpy.ndarray`` (``np.asarray(x)``, ``np.array(x)``) with a
  ``TypeError``, as CuPy arrays do;
* refuse NumPy's ufuncs and array functions (``np.exp(x)``, ``np.sum(x)``,
  ``np.concatenate([x, ...])``), which CuPy would quietly forward: the stand-in is stricter,
  so code that passes here calls the array module of its inputs everywhere;
* refuse host arrays as operands (``x + host``, ``xp.where(host_mask, x, 0)``,
  ``x[host_index]``, ``x[...] = host``), as CuPy does: only ``asarray``/``array``
  copy host data onto the device, explicitly;
* return 0-d arrays (not NumPy scalars) from reductions and scalar indexing, as CuPy does,
  so ``np.sqrt(xp.sum(x))`` fails here as it would on a GPU;
* copy to the host only through :meth:`StandInArray.get` or :func:`asnumpy` (CuPy's names),
  or through explicit Python conversions (``float(x)``, ``int(x)``, ``bool(x)``,
  ``x.item()``, ``x.tolist()``), which CuPy also allows.

This module is the array module (the ``xp``) of stand-in data: ``standin.zeros``,
``standin.matmul``, ``standin.add.at`` and the rest mirror NumPy's functions of the same name,
but only those CuPy has too (:data:`CUPY_API`): ``standin.errstate`` is an AttributeError,
as ``cupy.errstate`` is, so code that runs here does not call a function a GPU lacks.
Arithmetic is NumPy's, so results on the stand-in equal CPU results bit for bit; the tests
in ``tests/device/`` assert exactly that.
"""
from __future__ import annotations

import functools
import types
from typing import Any

import numpy as np

__all__ = ["StandInArray", "asnumpy", "ndarray", "CUPY_API", "CUPY_LINALG"]

DEVICE = "standin"

# The NumPy-named functions and constants the stand-in offers: a curated subset of CuPy's
# API (cupy.<name> exists for every one of them; checked against an installed CuPy 14.2.0 by
# tests/device/test_standin.py wherever CuPy is importable). Extend it only after checking
# CuPy's reference; dtypes and scalar types (float32, intp, ...) are always available.
# Newer CuPy releases also have isneginf, isposinf and linalg.eig/eigvals; they are left out
# so that code written against the stand-in runs on every CuPy release the gpu extra allows.
CUPY_API = frozenset("""
    empty empty_like eye identity ones ones_like zeros zeros_like full full_like array asarray
    asanyarray ascontiguousarray copy arange linspace logspace meshgrid diag diagflat tri tril
    triu copyto reshape ravel moveaxis rollaxis swapaxes transpose atleast_1d atleast_2d
    atleast_3d broadcast_to broadcast_arrays expand_dims squeeze concatenate stack vstack
    hstack dstack column_stack split array_split tile repeat flip fliplr flipud roll pad where
    nonzero argwhere flatnonzero take take_along_axis put_along_axis put choose compress
    diagonal select putmask fill_diagonal indices unique add subtract multiply divide
    true_divide floor_divide negative positive power float_power remainder mod fmod absolute
    abs fabs rint sign exp exp2 log log2 log10 expm1 log1p sqrt square cbrt reciprocal sin cos
    tan arcsin arccos arctan arctan2 hypot sinh cosh tanh arcsinh arccosh arctanh deg2rad
    rad2deg maximum minimum fmax fmin logaddexp logaddexp2 isfinite isinf isnan signbit
    copysign nextafter floor ceil trunc around round logical_and logical_or logical_xor
    logical_not greater greater_equal less less_equal equal not_equal bitwise_and bitwise_or
    bitwise_xor invert left_shift right_shift clip sum prod mean var std max min amax amin
    argmax argmin all any cumsum cumprod nansum nanmax nanmin nanmean median average
    count_nonzero sort argsort partition argpartition searchsorted dot vdot inner outer matmul
    tensordot einsum kron trace isclose allclose array_equal may_share_memory shares_memory
    linalg inf nan pi e newaxis dtype finfo iinfo result_type can_cast promote_types
    issubdtype isscalar ndim
""".split())
# cupy.linalg: the routines the stand-in offers (no general eig/eigvals: see above).
CUPY_LINALG = frozenset("""
    norm qr svd eigh eigvalsh inv pinv solve lstsq det slogdet cholesky matrix_power
    matrix_rank tensorinv tensorsolve
""".split())

# Functions that copy host data onto the device (everything else refuses host arrays).
_TRANSFER = frozenset({"asarray", "array", "asanyarray", "ascontiguousarray"})
# Pure dtype/introspection helpers: passed through from NumPy unchanged.
_PASS = frozenset({
    "dtype", "finfo", "iinfo", "result_type", "can_cast", "promote_types", "issubdtype",
    "errstate", "ndim", "shape", "isscalar", "newaxis", "inf", "nan", "pi", "e",
})


def _host_error(what: str) -> TypeError:
    return TypeError(
        f"{what}: a host numpy.ndarray was mixed with stand-in device data; copy it to the "
        f"device first with the array module's asarray (xp.asarray), or copy the device data "
        f"to the host explicitly with .get()"
    )


def _unwrap(x: Any, what: str) -> Any:
    """The NumPy array inside ``x``; containers are unwrapped element by element."""
    t = type(x)
    if t is StandInArray:
        return x._a
    if t is np.ndarray:
        raise _host_error(what)
    if t is tuple or t is list:
        return t(_unwrap(v, what) for v in x)
    return x


def _wrap(x: Any) -> Any:
    """Wrap NumPy results: arrays and NumPy scalars become (0-d) stand-in arrays."""
    t = type(x)
    if t is np.ndarray:
        return StandInArray(x)
    if isinstance(x, np.generic):
        return StandInArray(np.asarray(x))
    if t is tuple or t is list:
        return t(_wrap(v) for v in x)
    return x


def _call(fn: Any, name: str, args: tuple, kwargs: dict) -> Any:
    uargs = _unwrap(args, name)
    ukw = {k: _unwrap(v, name) for k, v in kwargs.items()}
    out = kwargs.get("out")
    result = fn(*uargs, **ukw)
    if out is not None:  # in-place into a stand-in array: hand back that very object
        return out
    return _wrap(result)


class StandInArray:
    """A device array of the stand-in backend (see the module docstring)."""

    __slots__ = ("_a",)
    __array_ufunc__ = None  # NumPy ufuncs refuse; binary operators defer to ours
    __array_priority__ = 500  # below Tensor's, so Tensor's reflected operators win

    def __init__(self, array: np.ndarray) -> None:
        if type(array) is not np.ndarray:
            raise TypeError(f"StandInArray wraps a numpy.ndarray, got {type(array).__name__}")
        self._a = array

    # ---------------------------------------------------------------- refusals
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(
            "Implicit conversion of stand-in device data to a NumPy array is not allowed; "
            "copy it to the host explicitly with .get() (or Tensor.numpy())"
        )

    def __array_function__(self, func: Any, types_: Any, args: Any, kwargs: Any) -> Any:
        raise TypeError(
            f"numpy.{func.__name__} was called on stand-in device data; call the array "
            f"module of the data instead (tinygrad_rnn.backend.get_array_module(x).{func.__name__})"
        )

    # ---------------------------------------------------------------- transfers
    def get(self) -> np.ndarray:
        """A host copy (CuPy's name)."""
        return self._a.copy()

    @property
    def device(self) -> str:
        return DEVICE

    # ---------------------------------------------------------------- attributes
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    itemsize = property(lambda self: self._a.itemsize)
    nbytes = property(lambda self: self._a.nbytes)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: self._a.flags)
    T = property(lambda self: StandInArray(self._a.T))
    mT = property(lambda self: StandInArray(self._a.mT))
    real = property(lambda self: _wrap(self._a.real))

    @property
    def base(self) -> "StandInArray | None":
        b = self._a.base
        return None if b is None or type(b) is not np.ndarray else StandInArray(b)

    def __getattr__(self, name: str) -> Any:
        # methods: reshape, astype, sum, max, transpose, copy, fill, ravel, item, tolist, ...
        if name.startswith("__"):  # __array_interface__, __array_struct__, ... : no way out
            raise AttributeError(f"'StandInArray' object has no attribute {name!r}")
        attr = getattr(self._a, name)
        if not callable(attr):
            return _wrap(attr)

        @functools.wraps(attr)
        def method(*args: Any, **kwargs: Any) -> Any:
            return _call(attr, f"StandInArray.{name}", args, kwargs)

        return method

    # ---------------------------------------------------------------- Python protocol
    def __len__(self) -> int:
        return len(self._a)

    def __iter__(self) -> Any:
        return (_wrap(v) for v in self._a)

    def __bool__(self) -> bool:
        return bool(self._a)

    def __float__(self) -> float:
        return float(self._a)

    def __int__(self) -> int:
        return int(self._a)

    def __complex__(self) -> complex:
        return complex(self._a)

    def __repr__(self) -> str:
        return "standin." + repr(self._a)

    __hash__ = None  # type: ignore[assignment]

    def __copy__(self) -> "StandInArray":
        return StandInArray(self._a.copy())

    def __deepcopy__(self, memo: dict) -> "StandInArray":
        return StandInArray(self._a.copy())

    def __reduce__(self) -> tuple:
        return (StandInArray, (self._a,))

    def __getitem__(self, index: Any) -> Any:
        return _wrap(self._a[_unwrap(index, "StandInArray.__getitem__")])

    def __setitem__(self, index: Any, value: Any) -> None:
        self._a[_unwrap(index, "StandInArray.__setitem__")] = _unwrap(
            value, "StandInArray.__setitem__")


def _operand(other: Any, name: str) -> Any:
    t = type(other)
    if t is StandInArray:
        return other._a
    if t is np.ndarray:
        raise _host_error(f"StandInArray.{name}")
    if isinstance(other, (bool, int, float, complex, np.generic)):
        return other
    return NotImplemented


def _binary(name: str) -> Any:
    op = getattr(np.ndarray, name)

    def method(self: StandInArray, other: Any) -> Any:
        o = _operand(other, name)
        if o is NotImplemented:
            return NotImplemented
        return _wrap(op(self._a, o))

    method.__name__ = name
    return method


def _inplace(name: str) -> Any:
    op = getattr(np.ndarray, name)

    def method(self: StandInArray, other: Any) -> Any:
        o = _operand(other, name)
        if o is NotImplemented:
            return NotImplemented
        op(self._a, o)
        return self

    method.__name__ = name
    return method


def _unary(name: str) -> Any:
    op = getattr(np.ndarray, name)

    def method(self: StandInArray) -> Any:
        return _wrap(op(self._a))

    method.__name__ = name
    return method


for _n in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or",
           "xor", "lshift", "rshift"):
    setattr(StandInArray, f"__{_n}__", _binary(f"__{_n}__"))
    setattr(StandInArray, f"__r{_n}__", _binary(f"__r{_n}__"))
    setattr(StandInArray, f"__i{_n}__", _inplace(f"__i{_n}__"))
for _n in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(StandInArray, f"__{_n}__", _binary(f"__{_n}__"))
for _n in ("neg", "pos", "abs", "invert"):
    setattr(StandInArray, f"__{_n}__", _unary(f"__{_n}__"))
del _n

ndarray = StandInArray


def asnumpy(a: Any) -> np.ndarray:
    """A host copy of ``a`` (CuPy's ``cupy.asnumpy``)."""
    if type(a) is StandInArray:
        return a.get()
    return np.asarray(a)


def _transfer(name: str) -> Any:
    fn = getattr(np, name)

    def transfer(a: Any, *args: Any, **kwargs: Any) -> StandInArray:
        if type(a) is StandInArray:  # already on the device: NumPy's copy/no-copy rules
            result = fn(a._a, *args, **kwargs)
            return a if result is a._a else _wrap(result)
        if isinstance(a, (list, tuple)):
            a = _unwrap(a, name) if not any(type(v) is np.ndarray for v in a) else a
        kwargs.pop("copy", None)
        host = np.array(a, *args, copy=True, **kwargs)  # host -> device always copies
        return StandInArray(host)

    transfer.__name__ = name
    return transfer


class _UFunc:
    """A NumPy ufunc over stand-in arrays, with its methods (``at``, ``reduce``, ...)."""

    def __init__(self, uf: np.ufunc) -> None:
        self._uf = uf
        self.__name__ = uf.__name__
        self.nin, self.nout = uf.nin, uf.nout

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _call(self._uf, self.__name__, args, kwargs)

    def at(self, a: Any, indices: Any, b: Any = None) -> None:
        name = f"{self.__name__}.at"
        if type(a) is not StandInArray:
            raise _host_error(name) if type(a) is np.ndarray else TypeError(
                f"{name}: expected a stand-in array, got {type(a).__name__}")
        args = (indices,) if b is None else (indices, b)
        self._uf.at(a._a, *_unwrap(args, name))

    def __getattr__(self, name: str) -> Any:  # reduce, accumulate, outer, reduceat
        fn = getattr(self._uf, name)
        return lambda *args, **kwargs: _call(fn, f"{self.__name__}.{name}", args, kwargs)


class _Namespace(types.ModuleType):
    """A NumPy submodule (linalg, fft, ...) over stand-in arrays."""

    def __init__(self, name: str, mod: types.ModuleType) -> None:
        super().__init__(name)
        self._mod = mod

    def __getattr__(self, name: str) -> Any:
        if self._mod is np.linalg and name not in CUPY_LINALG:
            raise AttributeError(f"{self.__name__}.{name}: cupy.linalg has no {name} (see "
                                 f"tinygrad_rnn.standin.CUPY_LINALG)")
        return _lookup(self._mod, f"{self.__name__}.{name}", name)


def _lookup(mod: types.ModuleType, qualname: str, name: str) -> Any:
    obj = getattr(mod, name)
    if isinstance(obj, np.ufunc):
        return _UFunc(obj)
    if isinstance(obj, type) or name in _PASS or not callable(obj):
        if isinstance(obj, types.ModuleType):
            return _Namespace(qualname, obj)
        return obj
    if name in _TRANSFER and mod is np:
        return _transfer(name)

    @functools.wraps(obj)
    def fn(*args: Any, **kwargs: Any) -> Any:
        return _call(obj, qualname, args, kwargs)

    return fn


_cache: dict = {}


def __getattr__(name: str) -> Any:  # PEP 562: ``standin.zeros`` etc.
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        return _cache[name]
    except KeyError:
        pass
    if not hasattr(np, name):
        raise AttributeError(f"module 'tinygrad_rnn.standin' (NumPy) has no attribute {name!r}")
    obj = getattr(np, name)
    if name not in CUPY_API and not (isinstance(obj, type) and issubclass(obj, np.generic)):
        raise AttributeError(
            f"standin.{name}: CuPy has no cupy.{name} (the stand-in offers only NumPy "
            f"functions CuPy has too: tinygrad_rnn.standin.CUPY_API); write it with "
            f"functions from that list"
        )
    obj = _lookup(np, f"standin.{name}", name)
    _cache[name] = obj
    return obj


def _register() -> None:
    """Tell the backend which array type this module owns (on import, so stand-in arrays
    made directly with ``standin.asarray`` are recognised too)."""
    import sys

    from . import backend

    module = sys.modules[__name__]
    backend._DEVICE_MODULES[StandInArray] = module
    backend._MODULE_DEVICE[module] = DEVICE


_register()
