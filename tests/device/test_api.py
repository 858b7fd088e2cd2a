"""The device API: Tensor(device=), Tensor.to, Module.to, .numpy(), device-mixing errors and
the errors for 'cuda' without CuPy or without a GPU."""
from __future__ import annotations

import types

import numpy as np
import pytest

import tinygrad_rnn as tr
from tinygrad_rnn import backend

from ._devices import DEVICES, assert_on_device, assert_same, host

RNG = np.random.default_rng(0)
X64 = RNG.standard_normal((3, 4))


@pytest.mark.parametrize("device", DEVICES)
def test_tensor_on_a_device_keeps_the_dtype_policy(device):
    t = tr.tensor([[1.0, 2.0], [3.0, 4.0]], device=device)
    assert t.device == device and t.dtype == np.float32
    assert tr.tensor(X64, device=device).dtype == np.float64
    assert tr.tensor([1, 2, 3], device=device).dtype.kind == "i"
    np.testing.assert_array_equal(t.numpy(), [[1.0, 2.0], [3.0, 4.0]])


@pytest.mark.parametrize("device", DEVICES)
def test_creation_functions_take_a_device(device):
    made = [tr.zeros(2, 3, device=device), tr.ones((2, 3), device=device),
            tr.full((2, 3), 1.5, device=device), tr.arange(5, device=device),
            tr.randn(2, 3, generator=1, device=device), tr.rand(2, 3, generator=1, device=device)]
    for t in made:
        assert_on_device(t, device)
    ref = [tr.zeros(2, 3), tr.ones(2, 3), tr.full((2, 3), 1.5), tr.arange(5),
           tr.randn(2, 3, generator=1), tr.rand(2, 3, generator=1)]
    for t, r in zip(made, ref):  # a seed gives the same numbers on every device
        assert_same(t, r, device)
    like = tr.zeros_like(made[1]), tr.ones_like(made[1])
    for t in like:
        assert_on_device(t, device)
        assert t.dtype == np.float32
    assert tr.zeros(2, requires_grad=True, device=device).requires_grad


@pytest.mark.parametrize("device", DEVICES)
def test_to_is_differentiable_both_ways(device):
    x = tr.tensor(X64, requires_grad=True)
    y = x.to(device)
    assert y.device == device and y.requires_grad
    w = tr.tensor(RNG.standard_normal((4, 2)), device=device)
    z = (y @ w).tanh().to("cpu")
    assert z.device == "cpu"
    z.sum().backward()
    assert type(x.grad.array) is np.ndarray  # the gradient came back to the CPU leaf
    wh = host(w)
    expected = (1 - np.tanh(X64 @ wh) ** 2) @ wh.T
    np.testing.assert_allclose(x.grad, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_to_without_a_change_returns_self_and_converts_dtypes(device):
    x = tr.tensor(X64, device=device)
    assert x.to(device) is x and x.to(dtype=np.float64) is x
    y = x.to(np.float32)
    assert y.dtype == np.float32 and y.device == device
    z = x.to("cpu", np.float32)
    assert z.device == "cpu" and z.dtype == np.float32
    assert x.cpu().device == "cpu"


@pytest.mark.parametrize("device", DEVICES)
def test_numpy_is_an_explicit_host_copy(device):
    x = tr.tensor(X64, device=device)
    h = x.numpy()
    assert type(h) is np.ndarray
    h[0, 0] = 123.0
    assert x.numpy()[0, 0] == X64[0, 0]  # the device data did not change
    c = tr.tensor(X64)
    assert c.numpy() is c.array  # on the CPU it is the array itself


@pytest.mark.parametrize("device", DEVICES)
def test_no_implicit_conversion_of_a_device_tensor(device):
    x = tr.tensor(X64, device=device)
    with pytest.raises(TypeError, match=f"tensor on {device} to a NumPy array implicitly"):
        np.asarray(x)
    np.testing.assert_array_equal(np.asarray(tr.tensor(X64)), X64)  # CPU: allowed


@pytest.mark.parametrize("device", DEVICES)
def test_python_conversions_and_repr(device):
    x = tr.tensor([[2.5]], device=device)
    assert x.item() == 2.5 and float(x.sum().item()) == 2.5 and bool(x)
    assert x.tolist() == [[2.5]]
    assert f"device='{device}'" in repr(x)
    assert "device" not in repr(tr.tensor([1.0]))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("combine", [
    lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a @ b.T,
    lambda a, b: tr.cat([a, b]), lambda a, b: tr.stack([a, b]),
    lambda a, b: tr.where(a.array > 0, a, b), lambda a, b: a.maximum(b),
], ids=["add", "mul", "matmul", "cat", "stack", "where", "maximum"])
def test_mixing_devices_names_both(device, combine):
    a = tr.tensor(X64, device=device)
    b = tr.tensor(X64)
    with pytest.raises(RuntimeError, match=rf"on {device}.*on cpu|on cpu.*on {device}"):
        combine(a, b)
    with pytest.raises(RuntimeError, match=rf"on {device}.*on cpu|on cpu.*on {device}"):
        combine(b, a)


@pytest.mark.parametrize("device", DEVICES)
def test_mixing_error_names_the_op_and_shapes(device):
    a = tr.tensor(X64, device=device)
    with pytest.raises(RuntimeError) as info:
        a * tr.tensor(X64[:1])
    msg = str(info.value)
    assert msg.startswith("Mul:") and "(3, 4)" in msg and "(1, 4)" in msg


@pytest.mark.parametrize("device", DEVICES)
def test_a_device_array_constant_on_another_device_is_refused(device):
    x = tr.tensor(X64)
    mask = backend.to_device(np.ones((3, 4), dtype=bool), device)
    with pytest.raises(RuntimeError, match=rf"is on cpu but mask .* is on {device}"):
        x.masked_fill(mask, 0.0)


@pytest.mark.parametrize("device", DEVICES)
def test_indexing_with_host_indices_and_setitem(device):
    x = tr.tensor(X64, device=device)
    for index in ([0, 2], np.array([2, 0, 2]), tr.tensor([1, 1]), np.array([True, False, True])):
        assert_same(x[index], tr.tensor(X64)[index], device)
    y = tr.zeros(3, 4, dtype=np.float64, device=device)
    y[[0, 2]] = np.ones(4)  # host values are copied to the tensor's device
    y[1] = tr.full((4,), 2.0, dtype=np.float64, device=device)
    np.testing.assert_array_equal(y.numpy(), [[1.0] * 4, [2.0] * 4, [1.0] * 4])
    with pytest.raises(RuntimeError, match=f"is on {device} but the value is on cpu"):
        y[0] = tr.ones(4, dtype=np.float64)
    y.copy_(X64)  # copy_ is the explicit cross-device copy
    np.testing.assert_array_equal(y.numpy(), X64)


# (index, the offending value, its axis) for a tensor of shape (3, 4)
OUT_OF_RANGE = [
    ([0, 5], 5, 0),
    (np.array([-4]), -4, 0),
    ((slice(None), np.array([1, 4])), 4, 1),
    ((Ellipsis, [-5]), -5, 1),
    ((None, 1, np.array([[0], [9]])), 9, 1),
    ((np.array([True, False, True]), np.array([7, 0])), 7, 1),
    ((np.array([0, 1]), np.array([3, 4])), 4, 1),
    (tr.tensor([3]), 3, 0),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index, bad, axis", OUT_OF_RANGE)
def test_out_of_range_index_arrays_are_an_error_on_every_device(device, index, bad, axis):
    """CuPy wraps an out-of-range index array around (so does the stand-in); the library
    checks the indices of device data itself, so x[index] and x[index] = v raise NumPy's
    IndexError, naming the op, the index, the axis and the shape, on every device, and
    nothing is written."""
    for dev in ("cpu", device):
        x = tr.tensor(X64, device=dev, requires_grad=True)
        with pytest.raises(IndexError) as info:
            x[index]
        message = str(info.value)
        assert message.startswith("getitem: index (") and "for shape (3, 4): " in message
        assert message.endswith(f"index {bad} is out of bounds for axis {axis} with size "
                                f"{(3, 4)[axis]}"), message
        y = tr.zeros(3, 4, dtype=np.float64, device=dev)
        with pytest.raises(IndexError) as info:
            y[index] = 1.0
        message = str(info.value)
        assert message.startswith("__setitem__: index (") and "for shape (3, 4): " in message
        assert message.endswith(f"index {bad} is out of bounds for axis {axis} with size "
                                f"{(3, 4)[axis]}"), message
        assert not y.numpy().any()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index", [
    [0, 2, 2], np.array([-1, -3]), (slice(None), np.array([3, -4, 3])),
    (Ellipsis, [-1]), (np.array([[0], [2]]), np.array([1, -1])), tr.tensor([], dtype=np.int64),
], ids=["repeated", "negative", "columns", "ellipsis", "broadcast", "empty"])
def test_in_range_index_arrays_forward_and_backward(device, index):
    """In-range (and negative) index arrays pass the check: the forward pass, the gradient
    (repeated indices accumulate) and a write equal the CPU's."""
    x_cpu = tr.tensor(X64, requires_grad=True)
    x_dev = tr.tensor(X64, device=device, requires_grad=True)
    y_cpu, y_dev = x_cpu[index], x_dev[index]
    assert_same(y_dev, y_cpu, device)
    upstream = RNG.standard_normal(y_cpu.shape)
    y_cpu.backward(upstream)
    y_dev.backward(upstream)
    assert_same(x_dev.grad, x_cpu.grad, device)
    z_cpu = tr.zeros(3, 4, dtype=np.float64)
    z_dev = tr.zeros(3, 4, dtype=np.float64, device=device)
    z_cpu[index] = 2.0
    z_dev[index] = 2.0
    assert_same(z_dev, z_cpu, device)


@pytest.mark.parametrize("device", DEVICES)
def test_cpu_tensor_indexed_by_a_device_index_is_refused(device):
    with pytest.raises(RuntimeError, match=f"index on {device}"):
        tr.tensor(X64)[tr.tensor([0, 1], device=device)]


@pytest.mark.parametrize("device", DEVICES)
def test_module_to_moves_parameters_and_gradients_in_place(device):
    net = tr.nn.Sequential(tr.nn.Linear(4, 3, generator=0), tr.nn.Tanh(),
                           tr.nn.Linear(3, 2, generator=1)).double()
    ref = tr.nn.Sequential(tr.nn.Linear(4, 3, generator=0), tr.nn.Tanh(),
                           tr.nn.Linear(3, 2, generator=1)).double()
    params = list(net.parameters())
    net(tr.tensor(X64)).sum().backward()
    assert net.to(device) is net
    assert list(net.parameters()) == params and all(p is q for p, q in zip(net.parameters(),
                                                                          params))
    assert net.device == device
    for p in net.parameters():
        assert_on_device(p, device)
        assert_on_device(p.grad, device)
    net.zero_grad()
    out = net(tr.tensor(X64, device=device))
    out.sum().backward()
    want = ref(tr.tensor(X64))
    want.sum().backward()
    assert_same(out, want, device)
    for p, q in zip(net.parameters(), ref.parameters()):
        assert_same(p.grad, q.grad, device)
    net.to("cpu", np.float32)
    assert net.device == "cpu" and all(p.dtype == np.float32 for p in net.parameters())


def test_module_device_with_parameters_on_two_devices():
    net = tr.nn.Sequential(tr.nn.Linear(2, 2, generator=0), tr.nn.Linear(2, 2, generator=1))
    net[1].to("standin")
    with pytest.raises(RuntimeError, match="several devices"):
        _ = net.device
    with pytest.raises(RuntimeError, match="on cpu .* on standin|on standin .* on cpu"):
        net(tr.tensor(np.ones((1, 2), np.float32)))


# ---------------------------------------------------------------- unknown / missing devices
@pytest.mark.parametrize("bad", ["gpu", "cuda:1", "mps", 0])
def test_unknown_devices_are_named(bad):
    with pytest.raises(ValueError, match=f"unknown device {bad!r}"):
        tr.tensor([1.0], device=bad)


def test_cuda_without_cupy_says_cupy_is_missing(monkeypatch):
    monkeypatch.setattr(backend, "_try_cupy", lambda: None)
    monkeypatch.setattr(backend, "_cupy_error", "ModuleNotFoundError: No module named 'cupy'")
    with pytest.raises(RuntimeError, match=r"needs CuPy.*pip install \"tinygrad_rnn\[gpu\]\""):
        tr.tensor([1.0], device="cuda")
    with pytest.raises(RuntimeError, match="needs CuPy"):
        tr.nn.Linear(2, 2).to("cuda")
    with pytest.raises(RuntimeError, match="needs CuPy"):
        tr.tensor([1.0]).cuda()
    assert not backend.cuda_is_available()


def _fake_cupy(count_error: Exception | None, count: int = 0) -> types.ModuleType:
    def get_device_count() -> int:
        if count_error is not None:
            raise count_error
        return count

    runtime = types.SimpleNamespace(getDeviceCount=get_device_count)
    fake = types.ModuleType("cupy")
    fake.__version__ = "13.9.9"
    fake.cuda = types.SimpleNamespace(runtime=runtime)
    return fake


@pytest.mark.parametrize("count_error, count, reason", [
    (RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected"), 0,
     "no CUDA-capable device"),
    (None, 0, "reports 0 devices"),
])
def test_cuda_with_cupy_but_no_gpu_says_the_gpu_is_missing(monkeypatch, count_error, count,
                                                            reason):
    fake = _fake_cupy(count_error, count)
    monkeypatch.setattr(backend, "_try_cupy", lambda: fake)
    monkeypatch.setattr(backend, "_gpu_checked", False)
    monkeypatch.setattr(backend, "_gpu_error", None)
    with pytest.raises(RuntimeError, match=rf"CuPy 13\.9\.9 is installed but no CUDA GPU.*{reason}"):
        tr.zeros(2, device="cuda")
    assert not backend.cuda_is_available()


def test_importing_never_imports_cupy():
    import subprocess
    import sys

    code = ("import sys, tinygrad_rnn as tr, tinygrad_rnn.testing; "
            "tr.tensor([1.0]).to('standin').sum().backward; print('cupy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
