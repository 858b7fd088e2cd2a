"""The gradient checkers on every device of ``DEVICES``: ``tr.gradcheck`` (both modes, and
its failure reports) and the public harness of :mod:`tinygrad_rnn.testing`
(``check_function``, ``check_op``, ``check_module``, ``check_jacobian``).

Each check runs where its inputs live and must reach the same verdict as on the CPU; on the
stand-in, whose arithmetic is NumPy's, the reports are identical field by field. The
registry-wide gradchecks are in ``test_ops.py``.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tinygrad_rnn as tr
from tinygrad_rnn import functional as F
from tinygrad_rnn import explicit_jacobians
from tinygrad_rnn.backend import get_array_module
from tinygrad_rnn.testing import check_function, check_jacobian, check_module, check_op

from ._devices import DEVICES, assert_on_device, host


# ------------------------------------------------------------------------------ tr.gradcheck
def _model(x: tr.Tensor, w: tr.Tensor, b: tr.Tensor) -> tuple:
    h = (x @ w + b).tanh()
    return F.cross_entropy(h, np.array([0, 2, 1])), h.sum(0)


def _model_inputs(device: str) -> list:
    rng = np.random.default_rng(4)
    shapes = [(3, 5), (5, 3), (3,)]
    return [tr.Tensor(rng.standard_normal(s), requires_grad=True, device=device)
            for s in shapes]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["full", "directional"])
def test_gradcheck_modes_on_device(device: str, mode: str) -> None:
    """Both modes pass with every input on the device, leave the caller's tensors and their
    .grad alone, and on the stand-in report exactly what the CPU reports."""
    inputs = _model_inputs(device)
    report = tr.gradcheck(_model, inputs, mode=mode, n_directions=4, raise_exception=False)
    assert report.passed and report.mode == mode and report.entries > 0
    for x in inputs:
        assert x.grad is None
        assert_on_device(x, device)
    cpu = tr.gradcheck(_model, _model_inputs("cpu"), mode=mode, n_directions=4,
                       raise_exception=False)
    if device == "standin":
        assert report == cpu
    else:
        assert report.entries == cpu.entries


class _WrongTanh(tr.Function):
    """tanh with a backward that forgets the square: g * (1 - y)."""

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        y = tr.backend.get_array_module(x).tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:
        (y,) = ctx.saved_arrays
        return g * (1 - y)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["full", "directional"])
def test_gradcheck_failure_on_device(device: str, mode: str) -> None:
    """A wrong backward fails on the device as on the CPU: the same input is named, and on
    the stand-in the whole report (worst entry, errors) is identical."""
    def fn(a: tr.Tensor, b: tr.Tensor) -> tr.Tensor:
        return a.sigmoid() * _WrongTanh.apply(b)

    def inputs(dev: str) -> list:
        rng = np.random.default_rng(5)
        return [tr.Tensor(rng.standard_normal((2, 3)), requires_grad=True, device=dev)
                for _ in range(2)]

    with pytest.raises(tr.GradcheckError) as info:
        tr.gradcheck(fn, inputs(device), mode=mode)
    with pytest.raises(tr.GradcheckError) as cpu_info:
        tr.gradcheck(fn, inputs("cpu"), mode=mode)
    report, cpu = info.value.report, cpu_info.value.report
    assert not report.passed and report.input_index == 1 and report.label == "input 1"
    assert report.entries == cpu.entries
    if device == "standin":
        assert report == cpu
        assert str(info.value) == str(cpu_info.value)


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_refuses_float32_on_device(device: str) -> None:
    x = tr.Tensor(np.ones(3, np.float32), requires_grad=True, device=device)
    with pytest.raises(TypeError, match="float64"):
        tr.gradcheck(lambda t: t.tanh(), x)


# ------------------------------------------------------------------------------ the harness
def _same_verdict(report: Any, cpu: Any, device: str) -> None:
    """The same checks with the same outcome; on the stand-in the same details too."""
    assert [(r.name, r.passed) for r in report.results] == \
        [(r.name, r.passed) for r in cpu.results], f"{report}\n{cpu}"
    if device == "standin":
        assert report.results == cpu.results
        assert report.gradcheck == cpu.gradcheck


@pytest.mark.parametrize("device", DEVICES)
def test_check_function_on_device(device: str) -> None:
    """check_function runs on the inputs' device, passes, and leaves them where they were."""
    def fn(w: tr.Tensor, h: tr.Tensor, ids: Any) -> tr.Tensor:
        return F.cross_entropy((h @ w.T).tanh(), ids)

    def inputs(dev: str) -> list:
        rng = np.random.default_rng(8)
        return [tr.Tensor(rng.standard_normal((3, 2)), requires_grad=True, device=dev),
                tr.Tensor(rng.standard_normal((4, 2)), requires_grad=True, device=dev),
                np.array([0, 2, 1, 1])]

    args = inputs(device)
    report = check_function(fn, *args)
    assert report.passed, str(report)
    assert_on_device(args[:2], device)
    assert args[0].grad is None and args[1].grad is None
    _same_verdict(report, check_function(fn, *inputs("cpu")), device)


@pytest.mark.parametrize("device", DEVICES)
def test_check_op_on_device(device: str) -> None:
    """check_op calls forward and backward on the raw device arrays (a host mask is copied
    as apply would) and agrees with the CPU."""
    x = np.random.default_rng(9).standard_normal((2, 4))
    mask = np.array([True, False, True, True])
    report = check_op(tr.ops.Softmax, tr.Tensor(x, requires_grad=True, device=device),
                      axis=-1, mask=mask)
    assert report.passed, str(report)
    cpu = check_op(tr.ops.Softmax, tr.Tensor(x, requires_grad=True), axis=-1, mask=mask)
    _same_verdict(report, cpu, device)


class _HostTanh(tr.Function):
    """tanh whose backward calls NumPy on its arrays: right on the CPU, an error on a
    device."""

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        y = get_array_module(x).tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:
        (y,) = ctx.saved_arrays
        return np.multiply(g, 1 - y * y)


class _ScribblingTanh(_HostTanh):
    """tanh whose backward writes into its upstream gradient."""

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:
        (y,) = ctx.saved_arrays
        g *= 1 - y * y
        return g


def test_check_op_finds_numpy_calls_on_the_standin() -> None:
    """A backward that hands device data to NumPy passes on the CPU and fails on the
    stand-in (backward raises). Stand-in only: CuPy forwards NumPy's ufuncs to itself."""
    x = np.array([0.3, -1.2, 0.8])
    assert check_op(_HostTanh, tr.Tensor(x, requires_grad=True)).passed
    report = check_op(_HostTanh, tr.Tensor(x, requires_grad=True, device="standin"),
                      options=tr.testing.CheckOptions(raise_exception=False))
    assert not report["backward runs"].passed
    assert "StandInArray" in report["backward runs"].detail


@pytest.mark.parametrize("device", DEVICES)
def test_check_op_finds_writes_into_grad_out_on_device(device: str) -> None:
    """A backward that writes into its upstream gradient fails on the device as on the CPU:
    the harness hands it the device copy it then inspects."""
    x = np.array([0.3, -1.2, 0.8])
    for dev in ("cpu", device):
        report = check_op(_ScribblingTanh, tr.Tensor(x, requires_grad=True, device=dev),
                          options=tr.testing.CheckOptions(raise_exception=False))
        assert not report["upstream gradient not mutated"].passed, dev


@pytest.mark.parametrize("device", DEVICES)
def test_check_function_finds_writes_into_grad_out_on_device(device: str) -> None:
    """The same through the engine (check_function): the upstream gradient is copied to the
    device first, and that device array is the one inspected."""
    x = tr.Tensor(np.array([0.3, -1.2, 0.8]), requires_grad=True, device=device)
    report = check_function(_ScribblingTanh.apply, x, raise_exception=False)
    assert not report["upstream gradient not mutated"].passed


class _Affine:
    """A module-like object (``named_parameters`` and ``__call__``) with float32 weights."""

    def __init__(self, device: str) -> None:
        rng = np.random.default_rng(10)
        self.weight = tr.Tensor(rng.standard_normal((3, 2)).astype(np.float32),
                                requires_grad=True, device=device)
        self.bias = tr.Tensor(np.zeros(3, np.float32), requires_grad=True, device=device)

    def named_parameters(self) -> list:
        return [("weight", self.weight), ("bias", self.bias)]

    def __call__(self, x: tr.Tensor) -> tr.Tensor:
        return (x @ self.weight.T + self.bias).sigmoid()


@pytest.mark.parametrize("device", DEVICES)
def test_check_module_on_device(device: str) -> None:
    """check_module checks float64 copies of a float32 module on its device; the original
    keeps its values, dtype, device and (absent) gradients."""
    x = np.random.default_rng(11).standard_normal((4, 2))
    module = _Affine(device)
    before = host(module.weight)
    report = check_module(module, tr.Tensor(x, device=device))
    assert report.passed, str(report)
    assert module.weight.dtype == np.float32 and module.weight.grad is None
    assert_on_device(module.weight, device)
    np.testing.assert_array_equal(host(module.weight), before)
    _same_verdict(report, check_module(_Affine("cpu"), tr.Tensor(x)), device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op, build", [(tr.ops.Softmax, explicit_jacobians.softmax),
                                       (tr.ops.Tanh, explicit_jacobians.tanh)])
def test_check_jacobian_on_device(device: str, op: type, build: Any) -> None:
    """check_jacobian builds the Jacobian on the device (the builder sees device data) and
    agrees with the CPU."""
    seen = []

    def jacobian_fn(y: Any) -> Any:
        seen.append(y)
        return build(y)

    x = np.random.default_rng(12).standard_normal((2, 3))
    report = check_jacobian(op, jacobian_fn, tr.Tensor(x, device=device))
    assert report.passed, str(report)
    assert_on_device(seen[0], device)
    _same_verdict(report, check_jacobian(op, build, x), device)
