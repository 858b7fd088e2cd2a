"""The dtype policy: which dtype user data, scalars and mixed inputs get.

The rules are stated in :mod:`tinygrad_rnn.backend` ("Dtype policy") and follow torch's
where torch has one, so a program gives the same dtypes here and there:

* Python data (numbers, lists) becomes the default float dtype (float32) or int64, and
  float64 only when the data holds float64 itself (:func:`to_array`);
* a scalar beside tensors takes their dtype when it is of the same category (bool <
  integer < float) or a lower one, and the higher category's default dtype otherwise
  (:func:`lift_inputs`; ``x32 * 2.5`` stays float32, ``ids * 0.5`` is float32);
* integer data beside float data, or in floating math, is cast as torch casts it
  (:func:`promote_non_float`);
* a value written into a tensor keeps the tensor's dtype, so one the dtype cannot hold
  exactly is refused, never truncated or wrapped (:func:`fill_scalar`, and the
  integer-scalar check inside :func:`lift_inputs`).

The engine applies these rules to every op's inputs (:func:`tinygrad_rnn.engine.record`);
the tensor applies them to its constructor and in-place writes.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from .backend import (
    get_array_module, get_default_dtype, is_float_dtype, result_float_dtype, to_device,
)

if TYPE_CHECKING:  # the op classes, for annotations only
    from .ops.base import Function

__all__ = [
    "SUPPORTED_KINDS", "check_dtype", "to_array", "holds_float64_data", "raw_like",
    "fill_scalar", "kind_rank", "lift_scalars_beside_floats", "check_real_operands",
    "lift_inputs", "promote_non_float", "is_real_scalar", "scalar_value", "exact_value",
    "array_of",
]


_PYTHON_NUMBERS = frozenset((float, int, bool))


def holds_float64_data(data: Any) -> bool:
    """Whether ``data`` (nested lists and tuples) holds a float64 value that is not a Python
    number: a NumPy float64 scalar or array, or a float64 tensor. Walked with a stack, not
    recursion; a list of Python numbers only is passed over with one type test per entry
    done in C (``np.float64`` subclasses Python's ``float``, hence exact types)."""
    stack = [data] if isinstance(data, (list, tuple)) else []
    while stack:
        seq = stack.pop()
        if set(map(type, seq)) <= _PYTHON_NUMBERS:
            continue
        for item in seq:
            if isinstance(item, (list, tuple)):
                stack.append(item)
            elif (type(item) not in _PYTHON_NUMBERS
                  and getattr(item, "dtype", None) == np.float64):
                return True
    return False


def to_array(data: Any, dtype: Any = None, copy: bool = True, device: Any = None) -> Any:
    """Array from user data under the dtype policy (see :mod:`tinygrad_rnn.backend`), on
    ``device`` (default: where the data already is; Python data goes to the CPU).

    Python data follows torch's rule. NumPy reads Python floats as float64, but they become
    the default float dtype (float32 unless ``set_default_dtype`` changed it), as does
    float64 that only NumPy's promotion made (an int64 and a float32 entry); float64 that the
    data holds itself (NumPy float64 scalars or arrays, float64 tensors inside the list)
    stays float64."""
    if isinstance(data, Tensor):
        data = data._data
    xp = get_array_module(data)
    if dtype is not None:
        dtype = check_dtype("Tensor", dtype)
        src_kind = getattr(data, "dtype", None)
        if src_kind is not None and np.dtype(src_kind).kind not in SUPPORTED_KINDS:
            raise TypeError(f"Tensor: cannot make a tensor from data of dtype {data.dtype} "
                            f"(booleans, integers and floats are supported)")
        try:
            arr = xp.array(data, dtype=dtype, copy=True) if copy else xp.asarray(data, dtype)
        except (TypeError, ValueError) as err:
            raise TypeError(f"Tensor: cannot convert the data to {dtype}: {err}") from None
    elif isinstance(data, (np.ndarray, np.generic)) or xp is not np:
        arr = xp.array(data, copy=True) if copy else xp.asarray(data)
    else:
        try:
            arr = np.asarray(data)
        except ValueError as err:  # a ragged list
            raise ValueError(f"Tensor: the data is not a rectangular array of numbers "
                             f"(lists of one length per level): {err}") from None
        if arr.dtype == np.float64 and not holds_float64_data(data):
            arr = arr.astype(get_default_dtype())
    if arr.dtype.kind not in SUPPORTED_KINDS:
        what = ("complex numbers (the imaginary part would be lost)" if arr.dtype.kind == "c"
                else f"data of dtype {arr.dtype}")
        raise TypeError(f"Tensor: cannot make a tensor from {what}; booleans, integers and "
                        f"floats are supported")
    if device is not None:
        arr = to_device(arr, device)  # the one explicit copy between devices
    return arr


SUPPORTED_KINDS = "biuf"  # bool, signed and unsigned integers, floats


def check_dtype(op: str, dtype: Any, floating: bool = False) -> np.dtype:
    """``dtype`` as a NumPy dtype that a tensor can hold (bool, integers, floats; floats only
    when ``floating``); TypeError naming ``op`` otherwise."""
    if dtype is None:
        return get_default_dtype()
    try:
        d = np.dtype(dtype)
    except TypeError as err:
        raise TypeError(f"{op}: dtype {dtype!r} is not a data type ({err})") from None
    if d.kind not in SUPPORTED_KINDS:
        raise TypeError(f"{op}: dtype {d} is not supported; a tensor holds booleans, integers "
                        f"or floats")
    if floating and d.kind != "f":
        raise TypeError(f"{op}: dtype must be a floating-point type (float32 or float64), got "
                        f"{d}")
    return d


def raw_like(x: Any, ref: Tensor) -> Any:
    """Raw operand combined with ``ref``: scalars become NumPy scalars of ref's float dtype
    (every backend takes those as kernel arguments: no host-to-device copy per call)."""
    if isinstance(x, Tensor):
        return x._data
    if isinstance(x, (bool, int, float, np.generic)) and is_float_dtype(ref.dtype):
        return ref.dtype.type(x)
    return x


def fill_scalar(value: Any, ref: Tensor) -> Any:
    """``value`` as a scalar of ``ref``'s dtype, for :meth:`Tensor.fill_`: TypeError when it
    is no real number, ValueError when ``ref``'s dtype cannot hold it exactly."""
    try:
        return exact_value("fill_", value, ref.dtype, ref.shape)
    except ValueError as err:
        raise ValueError(
            f"{err}. fill_ keeps the dtype: use tr.full(x.shape, value, dtype=...) for a new "
            f"tensor, or convert first (e.g. x = x.float())"
        ) from None


def kind_rank(dtype: Any) -> int:
    """0 for bool, 1 for integers, 2 for floats: the categories of type promotion."""
    kind = np.dtype(dtype).kind
    return 2 if kind in "fc" else (0 if kind == "b" else 1)


# Python and NumPy scalars of a real category (bool < integer < float); complex is none
_REAL_SCALARS = (int, float, np.integer, np.floating, np.bool_)


def lift_scalars_beside_floats(inputs: tuple) -> tuple | None:
    """The fast path of :func:`lift_inputs`, for its commonest case (``x * 2.0``,
    ``1.0 - z``, ``z / 3``): every tensor input holds float data and every other input is a
    Python or NumPy real scalar. Each scalar then takes the tensors' float dtype (float32
    with float64 is float64), which is what :func:`lift_inputs` gives too; this only skips
    its lists and its per-scalar ``np.result_type``. None when the case does not apply."""
    dtype = None
    for x in inputs:
        if isinstance(x, Tensor):
            d = x._data.dtype
            if d.kind != "f":
                return None
            if dtype is None:
                dtype, first = d, x._data
            elif d != dtype:
                dtype = np.promote_types(dtype, d)
        elif not isinstance(x, _REAL_SCALARS):
            return None
    if dtype is None:  # scalars only
        return None
    xp = np if type(first) is np.ndarray else get_array_module(first)
    return tuple([x if isinstance(x, Tensor) else Tensor._wrap(xp.asarray(x, dtype))
                  for x in inputs])


def check_real_operands(name: str, operands: list) -> None:
    """TypeError naming the operation ``name`` for an operand that is no real number or real
    array: a complex number would lose its imaginary part when cast to the tensor's dtype, a
    string would be parsed by NumPy, None or an object would fail deep inside the op."""
    for x in operands:
        if isinstance(x, Tensor):
            continue
        kind = getattr(x, "dtype", None)
        kind = np.dtype(kind).kind if kind is not None else None
        if isinstance(x, (complex, np.complexfloating)) or kind == "c":
            raise TypeError(f"{name}: complex operands are not supported (the "
                            f"imaginary part would be lost), got {x!r}"[:300])
        if kind is None and not isinstance(x, (bool, int, float, list, tuple)):
            raise TypeError(f"{name}: operands must be tensors, arrays or real "
                            f"numbers, got {x!r} ({type(x).__name__})"[:300])
        if kind is not None and kind not in SUPPORTED_KINDS:
            raise TypeError(f"{name}: operands of dtype {np.dtype(x.dtype)} are "
                            f"not supported (booleans, integers and floats are)")


_PUBLIC_NAMES = {"ReLU": "relu", "BCEWithLogits": "binary_cross_entropy_with_logits",
                 "MatMul": "matmul", "GetItem": "getitem"}


def _public_name(fn: type) -> str:
    """The op's public (snake_case) name: LogSoftmax -> log_softmax, MSELoss -> mse_loss."""
    if fn.__name__ in _PUBLIC_NAMES:
        return _PUBLIC_NAMES[fn.__name__]
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_",
                  fn.__name__.lstrip("_")).lower()


def _check_integer_scalars(fn: type, scalars: list, dtype: np.dtype,
                           tensors_in: list) -> None:
    """ValueError naming op ``fn``, the scalar and the integer tensors when an integer
    scalar lies outside the integer ``dtype`` it takes (``uint8_ids + 300``): casting it to
    ``dtype`` would raise NumPy's bare OverflowError for a Python int and wrap a NumPy
    integer around silently, torch wraps; a scalar changed silently is refused."""
    info = np.iinfo(dtype)
    for x in scalars:
        if isinstance(x, (int, np.integer)) and not info.min <= int(x) <= info.max:
            tensors = ", ".join(f"shape {t.shape} dtype {t.dtype}" for t in tensors_in)
            raise ValueError(
                f"{fn.__name__}: the integer scalar {x!r} is outside the range of {dtype} "
                f"(integers from {info.min} to {info.max}), the dtype it takes beside the "
                f"tensor input(s) ({tensors}); it would wrap around, so it is refused: "
                f"convert the tensor first (e.g. x.astype(np.int64) or x.float())"
            )


def lift_inputs(fn: type[Function], inputs: Sequence[Any]) -> tuple:
    """The inputs of op ``fn``, some of them scalars or host arrays, as Tensors, with torch's
    rule for a scalar beside tensors: the scalar takes the tensors' dtype when it is of the
    same category (bool < integer < float) or a lower one, so ``x32 * 2.5`` stays float32;
    when it is of a higher category the result is that category's default dtype: an integer
    or boolean tensor with a float scalar computes in the default float dtype (``ids * 0.5`` is
    float32, not NumPy's float64), a boolean tensor with an integer scalar in int64
    (``mask * 2`` counts, it is not ``True``). Beside integer tensors of several dtypes an
    integer scalar takes their promoted dtype (int8 with int64 gives int64), and one outside
    that dtype's range is a ValueError (``uint8_ids + 300``), never wrapped around. A 0-d
    host array counts as a scalar (NumPy 2 would otherwise promote float32 with a float64
    0-d array to float64). :func:`lift_scalars_beside_floats` is the fast path of the
    all-float case."""
    tensors_in = [x for x in inputs if isinstance(x, Tensor)]
    scalars = [x[()] if type(x) is np.ndarray and x.ndim == 0 else x for x in inputs]
    check_real_operands(_public_name(fn), scalars)
    if not tensors_in:
        return tuple(x if isinstance(x, Tensor) else Tensor._wrap(to_array(x, copy=False))
                     for x in scalars)
    top_rank = max(kind_rank(t.dtype) for t in tensors_in)
    scalar_rank = max((kind_rank(np.result_type(x)) for x in scalars
                       if isinstance(x, (bool, int, float, np.generic))), default=-1)
    if scalar_rank == 2 and top_rank < 2:
        # no gradient flows through integer data, so the cast needs no graph node
        inputs = tuple(Tensor._wrap(x._data.astype(get_default_dtype())) if isinstance(x, Tensor)
                       else x for x in scalars)
        scalar_dtype = get_default_dtype()
    elif scalar_rank > top_rank:
        inputs, scalar_dtype = scalars, np.dtype(np.int64)
    elif top_rank == 2:
        inputs = scalars
        scalar_dtype = result_float_dtype(*(t.dtype for t in tensors_in))
    else:  # integer or boolean tensors only: their promoted dtype (bool beside int8 is int8)
        inputs = scalars
        scalar_dtype = np.result_type(*(t.dtype for t in tensors_in))
    if scalar_dtype.kind in "iu":
        _check_integer_scalars(fn, scalars, scalar_dtype, tensors_in)
    xp = get_array_module(tensors_in[0]._data)
    return tuple(
        x if isinstance(x, Tensor)
        else Tensor._wrap(xp.asarray(x, scalar_dtype))
        if isinstance(x, (bool, int, float, np.generic))
        else Tensor._wrap(to_array(x, copy=False))
        for x in inputs
    )


def promote_non_float(fn: type[Function], tensors: tuple) -> tuple:
    """Inputs of op ``fn`` some of which hold integer or boolean data, cast as torch would:
    beside float inputs they take the float inputs' dtype (``ids * x32`` is float32, where
    NumPy gives float64); with no float input, an op whose math is floating
    (``fn.int_inputs_as_float``: exp, log, division, mean, softmax, losses) computes in
    the default float dtype; any other op (add, sum, max, indexing) keeps them as they are. Integer
    data never requires a gradient, so the casts need no graph node."""
    floats = [t._data.dtype for t in tensors if t._data.dtype.kind == "f"]
    if floats:
        dtype = result_float_dtype(*floats)
    elif fn.int_inputs_as_float:
        dtype = get_default_dtype()
    else:
        return tensors
    return tuple(t if t._data.dtype.kind == "f" else Tensor._wrap(t._data.astype(dtype))
                 for t in tensors)


def is_real_scalar(x: Any) -> bool:
    """A Python or NumPy real number (bool included), or a 0-d real array."""
    if isinstance(x, np.ndarray):
        return x.ndim == 0 and x.dtype.kind in "biuf"
    return isinstance(x, (bool, int, float, np.bool_, np.integer, np.floating))


def scalar_value(op: str, value: Any) -> Any:
    """``value`` (a real scalar, 0-d array or one-element tensor) as a Python/NumPy scalar;
    TypeError naming ``op`` otherwise."""
    given = value
    if isinstance(value, Tensor):
        value = value._data
    if hasattr(value, "shape") and not isinstance(value, np.generic):
        if value.ndim != 0:
            raise ValueError(f"{op}: the value must be a single number (a scalar or a 0-d "
                             f"tensor), got an array of shape {tuple(value.shape)}")
        value = value.item()
    if not isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        raise TypeError(f"{op}: the value must be a real number, got {given!r} "
                        f"({type(given).__name__})")
    return value


def exact_value(op: str, value: Any, dtype: np.dtype, shape: tuple) -> Any:
    """``value`` as a scalar of ``dtype``: TypeError when it is no real number, ValueError
    when ``dtype`` cannot hold it exactly (2.5 or nan in an integer dtype, 300 in uint8, 2 in
    bool)."""
    given, value = value, scalar_value(op, value)
    if dtype.kind == "f":  # any real fits, rounded to the dtype's precision
        return value
    whole = isinstance(value, (int, np.integer, np.bool_)) or float(value).is_integer()
    if dtype.kind == "b":
        if whole and int(value) in (0, 1):
            return np.bool_(value)
        holds = "only 0, 1, True and False"
    else:
        info = np.iinfo(dtype)
        if whole and info.min <= int(value) <= info.max:
            return dtype.type(int(value))
        holds = f"only the integers from {info.min} to {info.max}"
    raise ValueError(
        f"{op}: a tensor of dtype {dtype} (shape {shape}) holds {holds}, so the value "
        f"{given!r} would change; use a float dtype, or a value the dtype holds"
    )


def array_of(value: Any, where: str, what: str, kinds: str = "biuf",
             holds: str = "real numbers") -> Any:
    """The raw array behind ``value`` (a Tensor, a device array or host array-like; lists
    become NumPy arrays, device arrays stay on their device), checked to hold ``kinds`` (NumPy
    dtype kinds: real numbers by default). A TypeError naming ``where`` and ``what`` for a
    string, an object or ragged array, or a dtype outside ``kinds`` (NumPy would fail deep
    inside, or drop a complex value's imaginary part)."""
    raw = value._data if isinstance(value, Tensor) else value
    if get_array_module(raw) is np:
        try:
            raw = np.asarray(raw)
        except (TypeError, ValueError):
            raise TypeError(f"{where}: {what} must be a Tensor or an array of {holds}, got a "
                            f"{type(value).__name__} that is not one") from None
    if raw.dtype.kind not in kinds:
        raise TypeError(f"{where}: {what} must hold {holds}, got {type(value).__name__} of "
                        f"dtype {raw.dtype}")
    return raw


# Tensor is built on this policy and imported last, so that this module and the tensor
# module find each other's names defined whichever is imported first (the functions above
# use Tensor only when called).
from .tensor import Tensor  # noqa: E402
