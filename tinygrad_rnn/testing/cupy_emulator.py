"""A CuPy emulator, the stand-in device ``'standin'``: NumPy underneath, CuPy's rules on top.

(Over 700 lines for a reason: about 250 of them are data, CuPy 14.2's API and parameter
lists, which tests/device/test_standin.py checks against an installed CuPy.)

A test double, not a backend: it lives in :mod:`tinygrad_rnn.testing` and joins the backend
through :func:`tinygrad_rnn.backend.register_device` when it is imported (``import
tinygrad_rnn.testing`` does that; so do the test suite's ``conftest.py`` and the CLI's
``--device standin``). The core package never imports it.

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
  so ``np.sqrt(xp.sum(x))`` fails here as it would on a GPU, and refuse an axis when
  reducing a 0-d array (``xp.max(x0d, axis=-1)``: NumPy accepts it, CuPy raises
  AxisError);
* copy to the host only through :meth:`StandInArray.get` or :func:`asnumpy` (CuPy's names),
  or through explicit Python conversions (``float(x)``, ``int(x)``, ``bool(x)``,
  ``x.item()``, ``x.tolist()``), which CuPy also allows;
* wrap out-of-range integer-array indices around, as CuPy does (NumPy raises): ``x[[0, 5]]``
  on 3 rows reads rows 0 and 2, in ``x[...]``, ``x[...] = v``, ``add.at``, ``take``,
  ``take_along_axis``, ``put_along_axis`` and ``put`` (whose default mode is ``'wrap'`` in
  CuPy). Each integer array of an index tuple (ints, slices, integer and boolean arrays,
  ``None``, one ``Ellipsis``) is reduced modulo the length of the axis it selects along; an
  index that cannot be mapped to axes that way (two Ellipses, too many indices) is left to
  NumPy, which raises, as does an index into an axis of length 0. Library code must
  therefore check its indices itself: a check that is missing shows up as a wrong result;
* accept only the arguments CuPy 14.2 takes: each function, ndarray method and ufunc method
  has CuPy's parameter list (:data:`CUPY_SIGNATURES`, :data:`CUPY_NDARRAY_METHODS`,
  :data:`CUPY_UFUNC_METHODS`, ufuncs :data:`CUPY_UFUNC_KEYWORDS`), so NumPy-only arguments
  (``xp.sum(x, where=m)``, ``x.max(initial=0)``, ``xp.sort(x, stable=True)``, a ufunc's
  ``where=``) and a missing required one (``xp.take_along_axis(x, i)`` without ``axis``) are
  a TypeError; ndarray attributes CuPy lacks or means differently (``x.resize``,
  ``x.setflags``, ``x.ctypes``, ``x.data``) are an AttributeError;
* refuse dtypes CuPy has no arrays of (long double and complex256, strings, bytes, objects,
  datetimes, void/structured) with a TypeError, and do not offer their scalar types.

This module is the array module (the ``xp``) of stand-in data: ``standin.zeros``,
``standin.matmul``, ``standin.add.at`` and the rest mirror NumPy's functions of the same name,
but only those CuPy has too (:data:`CUPY_API`): ``standin.errstate`` is an AttributeError,
as ``cupy.errstate`` is, so code that runs here does not call a function a GPU lacks.
Arithmetic is NumPy's, so results on the stand-in equal CPU results bit for bit; the tests
in ``tests/device/`` assert exactly that (apart from the wrap-around above, which only
out-of-range indices reach).
"""
from __future__ import annotations

import functools
import inspect
import types
from typing import Any, Callable, Literal

import numpy as np

from .. import backend
from ..backend import index_array_axes

__all__ = ["StandInArray", "asnumpy", "ndarray", "CUPY_API", "CUPY_LINALG", "CUPY_SIGNATURES",
           "CUPY_NDARRAY_METHODS", "CUPY_UFUNC_METHODS", "CUPY_UFUNC_KEYWORDS"]

DEVICE = "standin"

# The NumPy-named functions and constants the stand-in offers: a curated subset of CuPy's
# API (cupy.<name> exists for every one of them; checked against an installed CuPy 14.2.0 by
# tests/device/test_standin.py wherever CuPy is importable). Extend it only after checking
# CuPy's reference, and give every new function its entry in CUPY_SIGNATURES. The scalar
# types CuPy has (float32, intp, ...) are always available.
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

# The arguments each function takes: CuPy 14.2's parameter list, cut down to what NumPy
# accepts too (the stand-in runs NumPy). Written like a Python parameter list without
# default values: "name=" has a default, "/" ends the positional-only parameters (a name
# CuPy and NumPy spell differently), "*" starts the keyword-only ones (a parameter that
# sits at another position in NumPy). A call that would not bind to it is a TypeError, so
# NumPy-only arguments (where=, initial=, stable=, ...) fail here as they would on a GPU.
# tests/device/test_standin.py checks every entry against an installed CuPy. (The dtype
# helpers are NumPy's own, and result_type, can_cast and ndim are defined below, each with
# CuPy's parameters.)
CUPY_SIGNATURES = {
    # creation
    "empty": "shape, dtype=, order=",
    "empty_like": "prototype, /, dtype=, order=, *, shape=",
    "eye": "N, M=, k=, dtype=, order=",
    "identity": "n, dtype=",
    "ones": "shape, dtype=, order=",
    "ones_like": "a, dtype=, order=, *, shape=",
    "zeros": "shape, dtype=, order=",
    "zeros_like": "a, dtype=, order=, *, shape=",
    "full": "shape, fill_value, dtype=, order=",
    "full_like": "a, fill_value, dtype=, order=, *, shape=",
    "array": "obj, /, dtype=, *, copy=, order=, ndmin=",
    "asarray": "a, dtype=, order=, *, copy=",
    "asanyarray": "a, dtype=, order=, *, copy=",
    "ascontiguousarray": "a, dtype=",
    "copy": "a, order=",
    "arange": "start, /, stop=, step=, *, dtype=",
    "linspace": "start, stop, num=, endpoint=, retstep=, dtype=, axis=",
    "logspace": "start, stop, num=, endpoint=, base=, dtype=, axis=",
    "meshgrid": "*xi, copy=, sparse=, indexing=",
    "diag": "v, k=",
    "diagflat": "v, k=",
    "tri": "N, M=, k=, dtype=",
    "tril": "m, k=",
    "triu": "m, k=",
    "indices": "dimensions, dtype=",
    # shapes
    "copyto": "dst, src, casting=, where=",
    "reshape": "a, newshape, /, order=, *, copy=",
    "ravel": "a, order=",
    "moveaxis": "a, source, destination",
    "rollaxis": "a, axis, start=",
    "swapaxes": "a, axis1, axis2",
    "transpose": "a, axes=",
    "atleast_1d": "*arys",
    "atleast_2d": "*arys",
    "atleast_3d": "*arys",
    "broadcast_to": "array, shape",
    "broadcast_arrays": "*args",
    "expand_dims": "a, axis",
    "squeeze": "a, axis=",
    "concatenate": "tup, /, axis=, out=, *, dtype=, casting=",
    "stack": "tup, /, axis=, out=, *, dtype=, casting=",
    "vstack": "tup, *, dtype=, casting=",
    "hstack": "tup, *, dtype=, casting=",
    "dstack": "tup",
    "column_stack": "tup",
    "split": "ary, indices_or_sections, axis=",
    "array_split": "ary, indices_or_sections, axis=",
    "tile": "A, reps",
    "repeat": "a, repeats, axis=",
    "flip": "a, /, axis=",
    "fliplr": "a, /",
    "flipud": "a, /",
    "roll": "a, shift, axis=",
    "pad": "array, pad_width, mode=, *, stat_length=, constant_values=, end_values=, "
           "reflect_type=",
    # indexing
    "where": "condition, x=, y=, /",
    "nonzero": "a",
    "argwhere": "a",
    "flatnonzero": "a",
    "take": "a, indices, axis=, out=",
    "take_along_axis": "a, /, indices, axis",
    "put_along_axis": "arr, indices, values, axis",
    "put": "a, ind, v, mode=",
    "choose": "a, choices, out=, mode=",
    "compress": "condition, a, axis=, out=",
    "diagonal": "a, offset=, axis1=, axis2=",
    "select": "condlist, choicelist, default=",
    "putmask": "a, /, mask, values",
    "fill_diagonal": "a, val, wrap=",
    "unique": "ar, return_index=, return_inverse=, return_counts=, axis=, *, equal_nan=",
    # arithmetic and reductions (the ufuncs take CUPY_UFUNC_KEYWORDS)
    "around": "a, decimals=, out=",
    "round": "a, decimals=, out=",
    "clip": "a, a_min, a_max, out=",
    "sum": "a, axis=, dtype=, out=, keepdims=",
    "prod": "a, axis=, dtype=, out=, keepdims=",
    "mean": "a, axis=, dtype=, out=, keepdims=",
    "var": "a, axis=, dtype=, out=, ddof=, keepdims=",
    "std": "a, axis=, dtype=, out=, ddof=, keepdims=",
    "max": "a, axis=, out=, keepdims=",
    "min": "a, axis=, out=, keepdims=",
    "amax": "a, axis=, out=, keepdims=",
    "amin": "a, axis=, out=, keepdims=",
    "argmax": "a, axis=, *, out=, keepdims=",
    "argmin": "a, axis=, *, out=, keepdims=",
    "all": "a, axis=, out=, keepdims=",
    "any": "a, axis=, out=, keepdims=",
    "cumsum": "a, axis=, dtype=, out=",
    "cumprod": "a, axis=, dtype=, out=",
    "nansum": "a, axis=, dtype=, out=, keepdims=",
    "nanmax": "a, axis=, out=, keepdims=",
    "nanmin": "a, axis=, out=, keepdims=",
    "nanmean": "a, axis=, dtype=, out=, keepdims=",
    "median": "a, axis=, out=, overwrite_input=, keepdims=",
    "average": "a, axis=, weights=, returned=, *, keepdims=",
    "count_nonzero": "a, axis=",
    "sort": "a, axis=, kind=",
    "argsort": "a, axis=, kind=",
    "partition": "a, kth, axis=",
    "argpartition": "a, kth, axis=",
    "searchsorted": "a, v, side=, sorter=",
    # products
    "dot": "a, b, out=",
    "vdot": "a, b, /",
    "inner": "a, b, /",
    "outer": "a, b, out=",
    "tensordot": "a, b, axes=",
    "einsum": "*operands, dtype=, optimize=",
    "kron": "a, b",
    "trace": "a, offset=, axis1=, axis2=, dtype=, out=",
    # comparison and introspection
    "isclose": "a, b, rtol=, atol=, equal_nan=",
    "allclose": "a, b, rtol=, atol=, equal_nan=",
    "array_equal": "a1, a2, equal_nan=",
    "may_share_memory": "a, b, /",
    "shares_memory": "a, b, /",
    # cupy.linalg
    "linalg.norm": "x, ord=, axis=, keepdims=",
    "linalg.qr": "a, mode=",
    "linalg.svd": "a, full_matrices=, compute_uv=",
    "linalg.eigh": "a, UPLO=",
    "linalg.eigvalsh": "a, UPLO=",
    "linalg.inv": "a",
    "linalg.pinv": "a, rcond=",
    "linalg.solve": "a, b",
    "linalg.lstsq": "a, b, rcond=",
    "linalg.det": "a",
    "linalg.slogdet": "a",
    "linalg.cholesky": "a, /",
    "linalg.matrix_power": "M, /, n",
    "linalg.matrix_rank": "M, /, tol=",
    "linalg.tensorinv": "a, ind=",
    "linalg.tensorsolve": "a, b, axes=",
}
# The methods of cupy.ndarray the stand-in offers, with their parameters (after self). Its
# other attributes are the properties of StandInArray. NumPy's ndarray.resize, setflags,
# ctypes, getfield, setfield and to_device have no CuPy counterpart; .data (a device memory
# pointer in CuPy, a host memoryview in NumPy) and .flat are left out too.
CUPY_NDARRAY_METHODS = {
    "all": "axis=, out=, keepdims=",
    "any": "axis=, out=, keepdims=",
    "argmax": "axis=, out=, *, keepdims=",
    "argmin": "axis=, out=, *, keepdims=",
    "argpartition": "kth, axis=",
    "argsort": "axis=, kind=",
    "astype": "dtype, order=, casting=, *, copy=",
    "choose": "choices, out=, mode=",
    "clip": "min=, max=, out=",
    "compress": "condition, axis=, out=",
    "conj": "",
    "conjugate": "",
    "copy": "order=",
    "cumprod": "axis=, dtype=, out=",
    "cumsum": "axis=, dtype=, out=",
    "diagonal": "offset=, axis1=, axis2=",
    "dot": "b, out=",
    "fill": "value",
    "flatten": "order=",
    "item": "",
    "max": "axis=, out=, keepdims=",
    "mean": "axis=, dtype=, out=, keepdims=",
    "min": "axis=, out=, keepdims=",
    "nonzero": "",
    "partition": "kth, axis=",
    "prod": "axis=, dtype=, out=, keepdims=",
    "put": "indices, values, mode=",
    "ravel": "order=",
    "repeat": "repeats, axis=",
    "reshape": "*shape, order=, copy=",
    "round": "decimals=, out=",
    "searchsorted": "v, side=, sorter=",
    "sort": "axis=, kind=",
    "squeeze": "axis=",
    "std": "axis=, dtype=, out=, ddof=, keepdims=",
    "sum": "axis=, dtype=, out=, keepdims=",
    "swapaxes": "axis1, axis2",
    "take": "indices, axis=, out=",
    "tobytes": "order=",
    "tolist": "",
    "trace": "offset=, axis1=, axis2=, dtype=, out=",
    "transpose": "*axes",
    "var": "axis=, dtype=, out=, ddof=, keepdims=",
    "view": "dtype=",
}
# The methods of CuPy's ufuncs (``xp.add.at`` and the rest), and the keywords a ufunc call
# takes (no where=, order=, subok= or signature=: CuPy answers "Wrong arguments").
CUPY_UFUNC_METHODS = {
    "reduce": "array, axis=, dtype=, out=, keepdims=",
    "accumulate": "array, axis=, dtype=, out=",
    "reduceat": "array, indices, axis=, dtype=, out=",
    "outer": "A, B, /",
    "at": "a, indices, b=",
}
CUPY_UFUNC_KEYWORDS = ("out", "dtype", "casting")
# The ufuncs whose ``accumulate`` CuPy implements (through cumsum and cumprod); any other
# (``xp.maximum.accumulate``) raises NotImplementedError on a GPU.
CUPY_ACCUMULATE = frozenset({"add", "multiply"})

# Functions that copy host data onto the device (everything else refuses host arrays).
_TRANSFER = frozenset({"asarray", "array", "asanyarray", "ascontiguousarray"})
# Dtype helpers and constants: passed through from NumPy unchanged.
_PASS = frozenset({
    "dtype", "finfo", "iinfo", "promote_types", "issubdtype", "isscalar", "newaxis", "inf",
    "nan", "pi", "e",
})
# Scalar types (and so dtypes) CuPy has no arrays of: long double and its complex,
# strings and bytes (np.flexible also covers void/structured), objects, datetimes.
_NO_CUPY_TYPES = (np.longdouble, np.clongdouble, np.flexible, np.object_, np.datetime64,
                  np.timedelta64)


def _host_error(what: str) -> TypeError:
    return TypeError(
        f"{what}: a host numpy.ndarray was mixed with stand-in device data; copy it to the "
        f"device first with the array module's asarray (xp.asarray), or copy the device data "
        f"to the host explicitly with .get()"
    )


def _check_dtype(dtype: np.dtype, what: str) -> None:
    """A TypeError for a dtype CuPy has no arrays of."""
    if issubclass(dtype.type, _NO_CUPY_TYPES):
        raise TypeError(
            f"{what}: CuPy has no arrays of dtype {dtype} (it has bool, integers, float16, "
            f"float32, float64, complex64 and complex128; no long double, complex256, "
            f"strings, bytes, objects, datetimes or structured dtypes)"
        )


@functools.lru_cache(maxsize=None)
def _signature(spec: str) -> inspect.Signature:
    """The Python signature of a parameter list written as in CUPY_SIGNATURES."""
    P = inspect.Parameter
    tokens = [t.strip() for t in spec.split(",") if t.strip()]
    kind: inspect._ParameterKind = (P.POSITIONAL_ONLY if "/" in tokens
                                    else P.POSITIONAL_OR_KEYWORD)
    params = []
    for tok in tokens:
        if tok == "/":
            kind = P.POSITIONAL_OR_KEYWORD
        elif tok == "*":
            kind = P.KEYWORD_ONLY
        elif tok.startswith("*"):
            params.append(P(tok[1:], P.VAR_POSITIONAL))
            kind = P.KEYWORD_ONLY
        else:
            default = None if tok.endswith("=") else P.empty
            params.append(P(tok.rstrip("="), kind, default=default))
    return inspect.Signature(params)


@functools.lru_cache(maxsize=None)
def _refusal(spec: str, n_args: int, keywords: tuple) -> str | None:
    """Why a call with ``n_args`` positional arguments and these keywords does not bind to
    ``spec`` (None when it does). Only the count and the names matter, so it is cached."""
    try:
        _signature(spec).bind(*range(n_args), **dict.fromkeys(keywords))
    except TypeError as err:
        return str(err)
    return None


def _check_call(what: str, cupy_name: str, spec: str, args: tuple, kwargs: dict) -> None:
    """A TypeError when CuPy's ``cupy_name(spec)`` would not accept ``(*args, **kwargs)``."""
    reason = _refusal(spec, len(args), tuple(kwargs))
    if reason is not None:
        shown = ", ".join(t.strip().replace("=", "=...") for t in spec.split(",") if t.strip())
        raise TypeError(
            f"{what}: {reason}; CuPy 14.2's {cupy_name} takes ({shown}), so this call would "
            f"fail on a GPU (NumPy-only arguments such as where=, initial= or stable= are "
            f"not there)"
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


def _wrap(x: Any, what: str = "StandInArray") -> Any:
    """Wrap NumPy results: arrays and NumPy scalars become (0-d) stand-in arrays."""
    t = type(x)
    if t is np.ndarray:
        return StandInArray(x, what)
    if isinstance(x, np.generic):
        return StandInArray(np.asarray(x), what)
    if t is tuple or t is list:
        return t(_wrap(v, what) for v in x)
    return x


# ---------------------------------------------------------------- CuPy's out-of-range indices
def _index_part(i: Any) -> Any:
    """A list inside an index as the array NumPy makes of it (an empty list selects
    nothing); other parts unchanged."""
    if type(i) is not list:
        return i
    try:
        arr = np.asarray(i) if i else np.asarray(i, dtype=np.intp)
    except ValueError:  # ragged: NumPy's indexing raises for it
        return i
    return arr if arr.dtype.kind in "iub" else i


def _wrap_index(index: Any, shape: tuple) -> Any:
    """``index`` (unwrapped) with each integer array reduced modulo the length of the axis
    it selects along: CuPy's wrap-around. Forms that cannot be mapped to axes, and axes of
    length 0, are left to NumPy, which raises."""
    parts = index if type(index) is tuple else (index,)
    if not any(type(i) is np.ndarray or type(i) is list for i in parts):
        return index  # basic indexing: nothing to wrap
    parts = tuple(_index_part(i) for i in parts)
    axes = index_array_axes(parts, len(shape))
    if not axes:
        return index
    wrapped = list(parts)
    for pos, axis in axes:
        if shape[axis]:
            wrapped[pos] = np.mod(parts[pos], shape[axis])
    return tuple(wrapped)


def _wrap_along(a: np.ndarray, indices: Any, axis: Any) -> Any:
    """Integer-array ``indices`` along ``axis`` of ``a`` (None: the flattened array)
    wrapped around as CuPy's ``take``, ``take_along_axis`` and ``put_along_axis`` do."""
    if type(indices) is not np.ndarray or indices.dtype.kind not in "iu":
        return indices
    n = a.size if axis is None else a.shape[axis] if -a.ndim <= axis < a.ndim else 0
    return np.mod(indices, n) if n else indices


def _take(a: np.ndarray, indices: Any, axis: Any = None, out: Any = None) -> Any:
    return np.take(a, _wrap_along(a, indices, axis), axis=axis, out=out)


def _take_along_axis(a: np.ndarray, indices: Any, axis: Any) -> Any:
    return np.take_along_axis(a, _wrap_along(a, indices, axis), axis=axis)


def _put_along_axis(arr: np.ndarray, indices: Any, values: Any, axis: Any) -> None:
    np.put_along_axis(arr, _wrap_along(arr, indices, axis), values, axis)


def _put(a: np.ndarray, ind: Any, v: Any, mode: Literal["raise", "wrap", "clip"] = "wrap"
         ) -> None:
    np.put(a, ind, v, mode=mode)  # CuPy's default mode is 'wrap', NumPy's 'raise'


def _put_method(a: np.ndarray, indices: Any, values: Any,
                mode: Literal["raise", "wrap", "clip"] = "wrap") -> None:
    np.put(a, indices, values, mode=mode)  # ndarray.put: the same, with the method's names


# NumPy functions and ndarray methods replaced by CuPy's behaviour (on unwrapped arrays;
# a method's replacement takes the array first).
def _reduction(name: str) -> Callable[..., Any]:
    """NumPy's reduction ``name``, refusing an axis on a 0-d array as CuPy does: NumPy
    reduces a 0-d array over axis 0 or -1 (its one element), CuPy raises AxisError (seen on
    a GPU with softmax of a 0-d tensor); reducing over ``axis=None`` works on both."""
    reduce = getattr(np, name)

    def rule(a: np.ndarray, *args: Any, **kwargs: Any) -> Any:
        axis = kwargs.get("axis", args[0] if args else None)
        if a.ndim == 0 and axis is not None and axis != ():
            raise np.exceptions.AxisError(
                f"standin.{name}: axis {axis!r} is out of bounds for an array of dimension 0 "
                f"(CuPy refuses an axis on a 0-d array, where NumPy accepts 0 and -1; reduce "
                f"with axis=None)")
        return reduce(a, *args, **kwargs)

    return rule


#: the reductions that check their axis as CuPy does (:func:`_reduction`)
_REDUCTIONS = ("sum", "prod", "mean", "var", "std", "max", "min", "amax", "amin", "all",
               "any")
_CUPY_RULES = {"take": _take, "take_along_axis": _take_along_axis,
               "put_along_axis": _put_along_axis, "put": _put,
               **{name: _reduction(name) for name in _REDUCTIONS}}
_CUPY_METHOD_RULES: dict[str, Callable[..., Any]] = {
    "take": _take, "put": _put_method,
    **{name: _reduction(name) for name in _REDUCTIONS if hasattr(np.ndarray, name)}}


def _call(fn: Any, name: str, args: tuple, kwargs: dict) -> Any:
    uargs = _unwrap(args, name)
    ukw = {k: _unwrap(v, name) for k, v in kwargs.items()}
    out = kwargs.get("out")
    result = fn(*uargs, **ukw)
    if out is not None:  # in-place into a stand-in array: hand back that very object
        return out
    return _wrap(result, name)


class StandInArray:
    """A device array of the stand-in backend (see the module docstring)."""

    __slots__ = ("_a",)
    __array_ufunc__ = None  # NumPy ufuncs refuse; binary operators defer to ours
    __array_priority__ = 500  # below Tensor's, so Tensor's reflected operators win

    def __init__(self, array: np.ndarray, what: str = "StandInArray") -> None:
        if type(array) is not np.ndarray:
            raise TypeError(f"StandInArray wraps a numpy.ndarray, got {type(array).__name__}")
        _check_dtype(array.dtype, what)
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
    imag = property(lambda self: _wrap(self._a.imag))

    @property
    def base(self) -> "StandInArray | None":
        b = self._a.base
        return None if b is None or type(b) is not np.ndarray else StandInArray(b)

    def __getattr__(self, name: str) -> Any:
        # the methods of CUPY_NDARRAY_METHODS: reshape, astype, sum, max, item, tolist, ...
        spec = CUPY_NDARRAY_METHODS.get(name)
        if spec is None:
            raise AttributeError(
                f"stand-in arrays have no attribute {name!r}: the stand-in offers only the "
                f"cupy.ndarray attributes that behave as NumPy's (the properties of "
                f"StandInArray and tinygrad_rnn.testing.cupy_emulator.CUPY_NDARRAY_METHODS); "
                f"CuPy 14.2 has no ndarray.resize, setflags, ctypes, getfield or setfield, and "
                f"its .data is a device pointer"
            )
        rule = _CUPY_METHOD_RULES.get(name)
        attr = getattr(self._a, name) if rule is None else functools.partial(rule, self._a)
        what = f"StandInArray.{name}"

        @functools.wraps(getattr(np.ndarray, name))
        def method(*args: Any, **kwargs: Any) -> Any:
            _check_call(what, f"cupy.ndarray.{name}", spec, args, kwargs)
            return _call(attr, what, args, kwargs)

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
        index = _unwrap(index, "StandInArray.__getitem__")
        return _wrap(self._a[_wrap_index(index, self._a.shape)])

    def __setitem__(self, index: Any, value: Any) -> None:
        index = _unwrap(index, "StandInArray.__setitem__")
        self._a[_wrap_index(index, self._a.shape)] = _unwrap(
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


def result_type(*arrays_and_dtypes: Any) -> np.dtype:
    """NumPy's type promotion, with a stand-in array counting as its dtype (as in CuPy)."""
    return np.result_type(*(a.dtype if type(a) is StandInArray else a
                            for a in arrays_and_dtypes))


def can_cast(from_: Any, to: Any,
             casting: Literal["no", "equiv", "safe", "same_kind", "unsafe"] = "safe") -> bool:
    """NumPy's ``can_cast``, with a stand-in array counting as its dtype (as in CuPy)."""
    return np.can_cast(from_.dtype if type(from_) is StandInArray else from_, to,
                       casting=casting)


def ndim(a: Any) -> int:
    """The number of dimensions of ``a`` (a stand-in array's own, as in CuPy)."""
    return a.ndim if type(a) is StandInArray else np.ndim(a)


def _transfer(name: str) -> Any:
    fn = getattr(np, name)
    spec = CUPY_SIGNATURES[name]
    what = f"standin.{name}"

    def transfer(*args: Any, **kwargs: Any) -> StandInArray:
        _check_call(what, f"cupy.{name}", spec, args, kwargs)
        a, args = args[0], args[1:]
        if type(a) is StandInArray:  # already on the device: NumPy's copy/no-copy rules
            result = fn(a._a, *args, **kwargs)
            return a if result is a._a else _wrap(result, what)
        if isinstance(a, (list, tuple)):
            a = _unwrap(a, name) if not any(type(v) is np.ndarray for v in a) else a
        kwargs.pop("copy", None)
        host = np.array(a, *args, copy=True, **kwargs)  # host -> device always copies
        return StandInArray(host, what)

    transfer.__name__ = name
    return transfer


class _UFunc:
    """A NumPy ufunc over stand-in arrays, with CuPy's keywords and methods (``at``,
    ``reduce``, ``accumulate``, ``reduceat``, ``outer``)."""

    def __init__(self, uf: np.ufunc) -> None:
        self._uf = uf
        self.__name__ = uf.__name__
        self.nin, self.nout = uf.nin, uf.nout

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for k in kwargs:
            if k not in CUPY_UFUNC_KEYWORDS:
                raise TypeError(
                    f"standin.{self.__name__}: got an unexpected keyword argument {k!r}; "
                    f"CuPy 14.2's ufuncs take only the keywords out=, dtype= and casting= "
                    f"(no where=, order=, subok= or signature=), so this call would fail on "
                    f"a GPU"
                )
        return _call(self._uf, self.__name__, args, kwargs)

    def at(self, *args: Any, **kwargs: Any) -> None:
        name = f"{self.__name__}.at"
        spec = CUPY_UFUNC_METHODS["at"]
        _check_call(f"standin.{name}", f"cupy.{name}", spec, args, kwargs)
        bound = _signature(spec).bind(*args, **kwargs).arguments
        a, indices, b = bound["a"], bound["indices"], bound.get("b")
        if type(a) is not StandInArray:
            raise _host_error(name) if type(a) is np.ndarray else TypeError(
                f"{name}: expected a stand-in array, got {type(a).__name__}")
        indices = _wrap_index(_unwrap(indices, name), a._a.shape)
        if b is None:
            self._uf.at(a._a, indices)
        else:
            self._uf.at(a._a, indices, _unwrap(b, name))

    def __getattr__(self, name: str) -> Any:  # reduce, accumulate, reduceat, outer
        spec = CUPY_UFUNC_METHODS.get(name)
        if spec is None:
            raise AttributeError(f"standin.{self.__name__}.{name}: the stand-in's ufuncs offer "
                                 f"only CuPy's methods {sorted(CUPY_UFUNC_METHODS)}")
        if name == "accumulate" and self.__name__ not in CUPY_ACCUMULATE:
            raise NotImplementedError(
                f"standin.{self.__name__}.accumulate: CuPy 14.2 implements accumulate only for "
                f"{sorted(CUPY_ACCUMULATE)} (cumsum, cumprod), so this call would fail on a GPU"
            )
        fn = getattr(self._uf, name)
        what = f"standin.{self.__name__}.{name}"

        def method(*args: Any, **kwargs: Any) -> Any:
            _check_call(what, f"cupy.{self.__name__}.{name}", spec, args, kwargs)
            return _call(fn, what, args, kwargs)

        return method


class _Namespace(types.ModuleType):
    """A NumPy submodule (linalg) over stand-in arrays."""

    def __init__(self, name: str, mod: types.ModuleType) -> None:
        super().__init__(name)
        self._mod = mod

    def __getattr__(self, name: str) -> Any:
        if self._mod is np.linalg and name not in CUPY_LINALG:
            raise AttributeError(f"{self.__name__}.{name}: cupy.linalg has no {name} (see "
                                 f"tinygrad_rnn.testing.cupy_emulator.CUPY_LINALG)")
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
    key = qualname[len("standin."):]
    spec = CUPY_SIGNATURES[key]
    fn = _CUPY_RULES.get(name, obj) if mod is np else obj
    cupy_name = f"cupy.{key}"

    @functools.wraps(obj)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _check_call(qualname, cupy_name, spec, args, kwargs)
        return _call(fn, qualname, args, kwargs)

    return wrapper


_cache: dict = {}


def __getattr__(name: str) -> Any:  # PEP 562: ``standin.zeros`` etc.
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        return _cache[name]
    except KeyError:
        pass
    if not hasattr(np, name):
        raise AttributeError(f"module 'tinygrad_rnn.testing.cupy_emulator' (NumPy) has no "
                             f"attribute {name!r}")
    obj = getattr(np, name)
    scalar_type = isinstance(obj, type) and issubclass(obj, np.generic)
    if scalar_type and issubclass(obj, _NO_CUPY_TYPES):
        raise AttributeError(
            f"standin.{name}: CuPy has no cupy.{name} (it has no arrays of this type: no long "
            f"double, complex256, strings, bytes, objects, datetimes or structured dtypes)"
        )
    if name not in CUPY_API and not scalar_type:
        raise AttributeError(
            f"standin.{name}: CuPy has no cupy.{name} (the stand-in offers only NumPy "
            f"functions CuPy has too: tinygrad_rnn.testing.cupy_emulator.CUPY_API); write it with "
            f"functions from that list"
        )
    obj = _lookup(np, f"standin.{name}", name)
    _cache[name] = obj
    return obj


def register() -> None:
    """Register the device ``'standin'`` with :func:`tinygrad_rnn.backend.register_device`
    (done on import, so stand-in arrays made directly with ``asarray`` are recognised too;
    calling it again is harmless)."""
    import sys

    backend.register_device(DEVICE, sys.modules[__name__], StandInArray)


register()
