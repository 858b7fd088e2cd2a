"""Array backends and the dtype policy.

Every array call in tinygrad_rnn goes through the array module of its inputs, found by
:func:`get_array_module`: NumPy by default, CuPy when the data lives on a GPU. Nothing here
imports CuPy at module import time, so CuPy stays optional.

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

DEFAULT_FLOAT = np.float32

_cupy: types.ModuleType | None = None
_cupy_checked = False


def _try_cupy() -> types.ModuleType | None:
    """Import CuPy once, on demand; ``None`` when it is not installed."""
    global _cupy, _cupy_checked
    if not _cupy_checked:
        _cupy_checked = True
        try:
            import cupy  # type: ignore[import-not-found]

            _cupy = cupy
        except Exception:  # ImportError, or a CUDA runtime that fails to load
            _cupy = None
    return _cupy


def get_array_module(*arrays: Any) -> types.ModuleType:
    """Return the array module (``numpy`` or ``cupy``) that owns ``arrays``.

    Non-array arguments (Python scalars, ``None``) are ignored. NumPy is returned when no
    argument is a device array.
    """
    for a in arrays:
        mod = type(a).__module__
        if mod.startswith("cupy"):
            cp = _try_cupy()
            if cp is not None:
                return cp
    return np


def is_float_dtype(dtype: Any) -> bool:
    """True for floating-point dtypes (the only ones that can carry gradients)."""
    return np.dtype(dtype).kind == "f"


def result_float_dtype(*dtypes: Any) -> np.dtype:
    """The float dtype a computation on ``dtypes`` produces: NumPy promotion among the
    float dtypes present, :data:`DEFAULT_FLOAT` when none is a float."""
    floats = [np.dtype(d) for d in dtypes if is_float_dtype(d)]
    if not floats:
        return np.dtype(DEFAULT_FLOAT)
    return np.result_type(*floats)
