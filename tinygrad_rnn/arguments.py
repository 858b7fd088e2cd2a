"""Checks of the plain arguments that the Tensor methods, the creation functions and the
functional API share (axes, integer sizes, shapes, random generators, token ids), each
raising an error that names the function and the argument. They know nothing of tensors, so
every module of the tensor layer and above can import them.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .random import get_generator

__all__ = ["UNSET", "check_axis", "is_int", "int_arg", "check_shape", "generator_for",
           "axis_argument", "check_integer_ids"]

UNSET: Any = object()  # an argument that was not given (None is a value some take)


def check_axis(op: str, axis: int, ndim: int, shape: tuple) -> int:
    """``axis`` as a non-negative index into ``ndim`` positions; IndexError naming the op,
    the axis and the shape when it is out of range (plain ``%`` would wrap it silently)."""
    if not -ndim <= axis < ndim:
        raise IndexError(
            f"{op}: axis {axis} is out of range for a tensor of shape {tuple(shape)} "
            f"(valid: {-ndim} to {ndim - 1})"
        )
    return axis % ndim


def is_int(x: Any) -> bool:
    """A Python or NumPy integer, not a bool."""
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def int_arg(op: str, name: str, x: Any) -> int:
    """An integer argument (a Python or NumPy integer, a 0-d integer array); TypeError naming
    ``op`` and ``name`` for anything else (2.5, "3", True)."""
    if isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in "iu":
        return int(x)
    if not is_int(x):
        raise TypeError(f"{op}: {name} must be an integer, got {x!r} ({type(x).__name__})")
    return int(x)


def check_shape(op: str, shape: tuple) -> tuple:
    """The sizes given as ``f(2, 3)`` or ``f((2, 3))`` (or ``f([2, 3])``), checked to be
    non-negative integers."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    sizes = tuple(int_arg(op, "size", s) for s in shape)
    if any(s < 0 for s in sizes):
        raise ValueError(f"{op}: sizes must be non-negative, got shape {sizes}")
    return sizes


def generator_for(op: str, generator: Any) -> Any:
    """The NumPy Generator that ``generator`` (a seed, a NumPy or a tinygrad_rnn Generator,
    or None for the package's default) stands for; TypeError naming ``op`` otherwise."""
    try:
        return get_generator(generator)
    except TypeError as err:
        raise TypeError(f"{op}: generator: {err}") from None


def axis_argument(op: str, axis: Any, dim: Any, default: int = -1) -> int:
    """The axis given as NumPy's ``axis`` or torch's ``dim`` (not both): a Python or NumPy
    int (or a 0-d integer array), never a bool, a float or a string; a TypeError naming
    ``op`` otherwise. Its range is checked by the op, against the input's shape."""
    if dim is not None and axis is not None:
        raise TypeError(f"{op}: give axis or dim, not both (got axis={axis!r}, dim={dim!r})")
    given = dim if dim is not None else axis
    if given is None:
        return default
    value = given[()] if isinstance(given, np.ndarray) and given.ndim == 0 else given
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        name = "dim" if dim is not None else "axis"
        raise TypeError(f"{op}: {name} must be an int, got {given!r} ({type(given).__name__})")
    return int(value)


def check_integer_ids(op: str, ids: Any) -> None:
    """Ids must be integers: a TypeError naming ``op``, the dtype and the fix otherwise
    (float ids are never truncated, booleans never read as 0 and 1)."""
    dtype = getattr(ids, "dtype", None)
    if dtype is None:
        dtype = np.asarray(ids).dtype
    if dtype.kind not in "iu":
        raise TypeError(f"{op}: input must hold integer ids, got dtype {dtype} (convert "
                        f"whole-number ids with ids.astype(np.int64))")
