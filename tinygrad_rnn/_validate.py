"""Scalar arguments, checked once for the whole package: integers, sizes, switches, reals.

Every function takes ``(value, name, owner)`` and returns the value as a plain Python
``int``/``bool``/``float``, or raises a TypeError (wrong kind of value) or ValueError (right
kind, out of range) whose message starts with ``owner`` (the function or class the user
called) and names the argument ``name`` and the value given. The rules, and why:

* a bool is not an integer here (``hidden_size=True`` is a mistake, not 1), and a float is
  refused rather than truncated (``2.5`` steps);
* a switch is a bool (Python or NumPy) or the integer 0 or 1 (torch-style ``bias=1``), never
  read by truthiness: ``reverse='no'`` would mean True;
* a real number is a Python or NumPy int or float (or a 0-d array of one), never a bool or a
  string, and ``finite_real`` refuses inf and nan.

This module depends on NumPy only, so any layer of the package may use it.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["integer", "size", "positive_int", "flag", "boolean", "finite_real", "probability"]


def integer(value: Any, name: str, owner: str) -> int:
    """``value`` as a Python int: a Python or NumPy integer, never a bool or a float (a float
    is refused, not truncated); the TypeError names ``owner`` and ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{owner}: {name} must be an integer, got {value!r} "
                        f"({type(value).__name__})")
    return int(value)


def size(value: Any, name: str, owner: str, minimum: int = 1) -> int:
    """``value`` as a Python int, checked by :func:`integer` and to be at least ``minimum``
    (positive by default); the ValueError names ``owner``, ``name`` and the value."""
    value = integer(value, name, owner)
    if value < minimum:
        least = "positive" if minimum == 1 else f">= {minimum}"
        raise ValueError(f"{owner}: {name} must be {least}, got {value}")
    return value


def positive_int(value: Any, name: str, owner: str) -> int:
    """``value`` as a Python int >= 1 (a count such as a batch size or a sequence length);
    anything else, a bool, a float or 0 included, is one ValueError naming ``owner``,
    ``name`` and the value."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{owner}: {name} must be a positive integer, got {value!r}")
    return int(value)


def flag(value: Any, name: str, owner: str) -> bool:
    """``value`` as a bool: ``True``/``False`` (Python or NumPy) or the integers 0 and 1
    (Python or NumPy, as torch-style layers take ``bias=1``); a TypeError naming ``owner``
    and ``name`` for anything else (``coupled='no'`` would be truthy and pick the variant;
    2, 1.0 and None are refused too)."""
    if not (isinstance(value, (bool, np.bool_))
            or isinstance(value, (int, np.integer)) and value in (0, 1)):
        raise TypeError(f"{owner}: {name} must be True or False, got {value!r} "
                        f"({type(value).__name__})")
    return bool(value)


def boolean(value: Any, name: str, owner: str) -> bool:
    """``value`` as a bool, where only ``True``/``False`` (Python or NumPy) are accepted (not
    0 and 1: for switches torch itself takes as bools only); a TypeError naming ``owner`` and
    ``name`` otherwise (``'no'`` would be truthy)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{owner}: {name} must be True or False, got {value!r} "
                        f"({type(value).__name__})")
    return bool(value)


def finite_real(value: Any, name: str, owner: str) -> float:
    """``value`` as a finite Python float: a TypeError naming ``owner`` and ``name`` unless it
    is a real number (a Python or NumPy int or float; a bool or a string is none), a
    ValueError when it is inf or nan."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
        value = value[()]  # a 0-d array of a number counts as the number
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{owner}: {name} must be a real number, got {value!r} "
                        f"({type(value).__name__})")
    try:
        number = float(value)
    except OverflowError:  # an int beyond the largest float
        number = math.inf
    if not math.isfinite(number):
        raise ValueError(f"{owner}: {name} must be a finite number, got {value!r}")
    return number


def probability(value: Any, name: str, owner: str) -> float:
    """``value`` as a float in [0, 1] (a dropout or sampling probability): a TypeError naming
    ``owner`` and ``name`` unless it is a real number (``'0.1'`` is a string, not a
    number), a ValueError when it is nan or outside [0, 1]."""
    p = finite_real(value, name, owner)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{owner}: {name} must be in [0, 1], got {value!r}")
    return p
