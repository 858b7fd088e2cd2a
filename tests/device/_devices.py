"""Devices the device suites run on, and how their results are compared with the CPU's.

``standin`` (always available) runs NumPy under CuPy's rules (see
:mod:`tinygrad_rnn.testing.cupy_emulator`), so its results must equal the CPU's bit for bit: the suites
assert exact equality there. ``cuda`` runs only where CuPy and a GPU are present (the case
is skipped otherwise, naming what is missing); its kernels round differently, so results are
compared to the CPU's within float64 1e-10 / float32 1e-4 (the issue's tolerances).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tinygrad_rnn as tr
from tinygrad_rnn import backend


def _cuda_reason() -> str:
    try:
        backend.module_for_device("cuda")
    except RuntimeError as exc:
        return str(exc)
    return ""


DEVICES = [
    "standin",
    pytest.param("cuda", marks=pytest.mark.skipif(bool(_cuda_reason()), reason=_cuda_reason()
                                                   or "cuda available")),
]

TOLERANCES = {np.dtype(np.float64): 1e-10, np.dtype(np.float32): 1e-4}


def host(x: Any) -> Any:
    """A host (NumPy) copy of a Tensor or device array; None stays None; tuples map."""
    if x is None:
        return None
    if isinstance(x, (tuple, list)):
        return type(x)(host(v) for v in x)
    if isinstance(x, tr.Tensor):
        return x.numpy()
    return backend.to_device(x, "cpu")


def on_device(x: Any, device: str) -> Any:
    """The raw array ``x`` on ``device`` (Tensors: ``.to(device)``)."""
    if isinstance(x, tr.Tensor):
        return x.to(device)
    return backend.to_device(np.asarray(x), device)


def assert_on_device(x: Any, device: str) -> None:
    """``x`` (a Tensor, a raw array, or a tuple of them) lives on ``device``."""
    if x is None:
        return
    if isinstance(x, (tuple, list)):
        for v in x:
            assert_on_device(v, device)
        return
    got = x.device if isinstance(x, tr.Tensor) else backend.device_of(x)
    assert got == device, f"expected data on {device}, found it on {got}"


def assert_same(device_value: Any, cpu_value: Any, device: str, what: str = "") -> None:
    """A device result equals the CPU result: exactly on the stand-in, within the dtype's
    tolerance on a GPU. Checks the device placement and the dtype too."""
    if cpu_value is None:
        assert device_value is None, what
        return
    if isinstance(cpu_value, (tuple, list)):
        assert len(device_value) == len(cpu_value), what
        for k, (d, c) in enumerate(zip(device_value, cpu_value)):
            assert_same(d, c, device, f"{what}[{k}]")
        return
    assert_on_device(device_value, device)
    got = host(device_value)
    want = host(cpu_value)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} on {device}, {want.dtype} on cpu"
    assert got.shape == want.shape, f"{what}: shape {got.shape} on {device}, {want.shape} on cpu"
    if device == "standin" or got.dtype.kind not in "fc":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        tol = TOLERANCES.get(got.dtype, 1e-4)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=what)
