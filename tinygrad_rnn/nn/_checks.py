"""Argument checks of the nn layers, kept beside the math rather than inside it."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..backend import device_of, get_array_module
from ..tensor import Tensor


def host_lengths(lengths: Any, owner: str, what: str = "lengths") -> np.ndarray:
    """Sequence lengths as a host NumPy integer array, for ``owner`` (named in errors).

    Lengths decide which steps run and which positions are masked, so they are read on the
    host, and as in PyTorch they must be given there (a list, a NumPy array or a CPU Tensor):
    lengths on a device raise a TypeError asking for the explicit copy (``.numpy()``)
    instead of being copied back silently. A non-integer dtype is a ValueError (2.5 steps
    would otherwise be truncated to 2)."""
    raw = lengths._data if isinstance(lengths, Tensor) else lengths
    if get_array_module(raw) is not np:
        raise TypeError(
            f"{owner}: {what} must be on the host (a list, NumPy array or CPU Tensor), as in "
            f"PyTorch, but they are on {device_of(raw)}; copy them explicitly with .numpy() "
            f"(they decide which steps run, so they are read on the host)"
        )
    arr = np.asarray(raw)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{owner}: {what} must be integers, got dtype {arr.dtype} "
                         f"(shape {arr.shape})")
    return arr
