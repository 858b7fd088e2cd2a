"""Training machinery on devices: optimizers, schedulers, clipping, ``Module.to``, state
dicts, checkpoints and the training loops, each run on CPU and on every device in DEVICES.

What is checked, against the same computation on the CPU (``assert_same``: exact on the
stand-in, within the dtype's tolerance on a GPU):

* every optimizer and variant, several steps on a small model moved to the device: the
  parameters and every state entry equal the CPU's and live on the device (the step counter
  is a host array, as in torch); a step reads nothing back from the device;
* learning-rate schedulers drive a device optimizer exactly as a CPU one;
* ``optimizer.state_dict()`` / ``load_state_dict()`` across devices, both ways, and through
  ``tr.save`` / ``tr.load``: entries land on the parameter's device and dtype, and training
  resumed from the loaded state equals an uninterrupted run; an optimizer's state follows its
  parameters when the model is moved after a step;
* ``clip_grad_norm_`` returns a 0-d Tensor on the gradients' device (as torch) and, like
  ``clip_grad_value_``, ``get_total_norm`` and ``clip_grads_with_norm_``, reads nothing back
  from the device; NaN/inf norms behave as on the CPU; ``error_if_nonfinite`` raises before
  touching anything; gradients spread over two devices are an error naming both;
* ``Module.to``: the same Parameter objects, gradients moved, device and dtype together,
  integer buffers keep their dtype, ``Module.device``; errors for unknown devices, for a
  missing CuPy and for CuPy without a GPU (simulated) leave the module untouched;
* ``Module.state_dict()`` of a device module is made of NumPy host copies; ``load_state_dict``
  takes host arrays into a device module and device values into a CPU module;
* ``tr.save`` / ``tr.load`` of device tensors, arrays and state dicts store host arrays,
  and a failed save leaves the previous file intact;
* ``fit`` and ``train_stream`` on a device give the CPU's losses and parameters.

"Reads nothing back" is checked on the stand-in by making every explicit way back to the
host (``float()``, ``bool()``, ``.item()``, ``.get()`` ...) raise for the duration of the call.
"""
from __future__ import annotations

import contextlib
import math
import os
import types
from typing import Any, Callable, Iterator

import numpy as np
import pytest

import tinygrad_rnn as tr
from tinygrad_rnn import backend
from tinygrad_rnn.truncation import chunked
from tinygrad_rnn.nn.utils import (
    clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm, grad_norm,
)
from tinygrad_rnn.testing.cupy_emulator import StandInArray
from tinygrad_rnn.training import fit, train_stream

from ._devices import DEVICES, TOLERANCES, assert_on_device, assert_same, host

F = tr.functional
optim = tr.optim


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
@contextlib.contextmanager
def no_readback(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Inside the block, any copy of stand-in data back to the host raises AssertionError."""
    def refuse(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("device data was read back to the host")

    plain_getattr = StandInArray.__getattr__

    def guarded_getattr(self: Any, name: str) -> Any:
        if name in ("item", "tolist"):
            refuse(self)
        return plain_getattr(self, name)

    with monkeypatch.context() as m:
        for name in ("__float__", "__int__", "__bool__", "__complex__", "get"):
            m.setattr(StandInArray, name, refuse)
        m.setattr(StandInArray, "__getattr__", guarded_getattr)
        yield


def test_no_readback_guard_catches_every_way_back(monkeypatch: pytest.MonkeyPatch) -> None:
    x = tr.tensor(np.arange(3.0), device="standin").array
    with no_readback(monkeypatch):
        for back in (lambda: float(x.sum()), lambda: bool(x[0]), lambda: x.sum().item(),
                     lambda: x.get(), lambda: x.tolist(), lambda: int(x[1])):
            with pytest.raises(AssertionError, match="read back"):
                back()
    assert float(x.sum()) == 3.0  # restored afterwards


def same_numbers(got: list[float], want: list[float], device: str) -> None:
    """Python floats computed on ``device`` equal the CPU's (exactly on the stand-in)."""
    assert len(got) == len(want)
    if device == "standin":
        assert got == want
    else:
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def same_host(got: np.ndarray, want: np.ndarray, device: str, what: str = "") -> None:
    """Two host arrays, one of which went through ``device``: exact on the stand-in."""
    assert type(got) is np.ndarray and got.dtype == want.dtype, what
    if device == "standin":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        tol = TOLERANCES.get(got.dtype, 1e-4)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=what)


class Net(tr.nn.Module):
    """Linear(3, 4) -> tanh -> Linear(4, 2), the same weights for the same seed."""

    def __init__(self, dtype: Any = np.float64, seed: int = 0) -> None:
        super().__init__()
        self.hidden = tr.nn.Linear(3, 4, dtype=dtype, generator=seed)
        self.out = tr.nn.Linear(4, 2, dtype=dtype, generator=seed + 1)

    def forward(self, x: Any) -> Any:
        return self.out(self.hidden(x).tanh())


def batch(i: int, dtype: Any = np.float64) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(100 + i)
    return (rng.standard_normal((5, 3)).astype(dtype),
            rng.standard_normal((5, 2)).astype(dtype))


def train(model: Net, opt: Any, steps: int, first: int = 0) -> None:
    """``steps`` updates on batches ``first, first + 1, ...``, on the model's device."""
    device = model.device
    for i in range(first, first + steps):
        x, y = batch(i, model.hidden.weight.dtype)
        opt.zero_grad()
        F.mse_loss(model(tr.tensor(x, device=device)), tr.tensor(y, device=device)).backward()
        opt.step()


def assert_state_same(dev_opt: Any, cpu_opt: Any, device: str) -> None:
    """Every state entry of ``dev_opt`` equals ``cpu_opt``'s and lives on the device; step
    counters are host float32 arrays, as torch keeps them."""
    dev_sd, cpu_sd = dev_opt.state_dict(), cpu_opt.state_dict()
    assert dev_sd["param_groups"] == cpu_sd["param_groups"]
    assert dev_sd["state"].keys() == cpu_sd["state"].keys()
    for index, entries in cpu_sd["state"].items():
        assert dev_sd["state"][index].keys() == entries.keys()
        for name, want in entries.items():
            got = dev_sd["state"][index][name]
            if name == "step":
                assert type(got) is np.ndarray and got.dtype == np.float32 and got == want
            else:
                assert_same(got, want, device, f"state[{index}][{name!r}]")


def assert_params_same(dev_model: Net, cpu_model: Net, device: str) -> None:
    for (name, p), q in zip(dev_model.named_parameters(), cpu_model.parameters()):
        assert_same(p, q, device, name)


OPTIMIZERS: dict[str, Callable[[Any], Any]] = {
    "sgd": lambda ps: optim.SGD(ps, lr=0.1),
    "sgd-momentum-dampening-wd": lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9,
                                                      dampening=0.1, weight_decay=0.01),
    "sgd-nesterov-maximize": lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True,
                                                  maximize=True),
    "adam": lambda ps: optim.Adam(ps, lr=0.01),
    "adam-amsgrad-l2": lambda ps: optim.Adam(ps, lr=0.01, weight_decay=0.1, amsgrad=True),
    "adam-decoupled": lambda ps: optim.Adam(ps, lr=0.01, weight_decay=0.1,
                                            decoupled_weight_decay=True),
    "adamw-amsgrad-maximize": lambda ps: optim.AdamW(ps, lr=0.01, amsgrad=True, maximize=True),
    "rmsprop": lambda ps: optim.RMSprop(ps, lr=0.01),
    "rmsprop-centered-momentum-wd": lambda ps: optim.RMSprop(ps, lr=0.01, centered=True,
                                                             momentum=0.5, weight_decay=0.01),
    "adagrad": lambda ps: optim.Adagrad(ps, lr=0.1),
    "adagrad-decay-wd-init": lambda ps: optim.Adagrad(ps, lr=0.1, lr_decay=0.01,
                                                      weight_decay=0.01,
                                                      initial_accumulator_value=0.1),
}


# --------------------------------------------------------------------------------------------
# optimizers and schedulers
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer_steps_equal_cpu(device: str, dtype: Any, name: str,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    make = OPTIMIZERS[name]
    cpu_model = Net(dtype)
    dev_model = Net(dtype).to(device)
    cpu_opt, dev_opt = make(cpu_model.parameters()), make(dev_model.parameters())
    for i in range(4):
        for model, opt in ((cpu_model, cpu_opt), (dev_model, dev_opt)):
            x, y = batch(i, dtype)
            opt.zero_grad(set_to_none=(i % 2 == 0))   # both ways of zeroing, on the device
            loss = F.mse_loss(model(tr.tensor(x, device=model.device)),
                              tr.tensor(y, device=model.device))
            loss.backward()
            if opt is dev_opt:
                with no_readback(monkeypatch):
                    opt.step()
            else:
                opt.step()
        assert_params_same(dev_model, cpu_model, device)
    assert_state_same(dev_opt, cpu_opt, device)
    for p in dev_model.parameters():
        assert p.dtype == dtype and p.grad.dtype == dtype
        assert_on_device((p, p.grad), device)


SCHEDULERS: dict[str, Callable[[Any], Any]] = {
    "step": lambda opt: optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5),
    "exponential": lambda opt: optim.lr_scheduler.ExponentialLR(opt, gamma=0.8),
    "cosine": lambda opt: optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=0.01),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_scheduler_drives_a_device_optimizer(device: str, name: str) -> None:
    runs = {}
    for where in ("cpu", device):
        model = Net().to(where)
        opt = optim.SGD(model.parameters(), lr=0.2, momentum=0.5)
        sched = SCHEDULERS[name](opt)
        lrs = []
        for epoch in range(6):
            train(model, opt, 1, first=epoch)
            sched.step()
            lrs.append(sched.get_last_lr())
        runs[where] = (model, opt, lrs)
    (cpu_model, cpu_opt, cpu_lrs), (dev_model, dev_opt, dev_lrs) = runs["cpu"], runs[device]
    assert dev_lrs == cpu_lrs                      # Python floats, no device involved
    assert len(set(map(tuple, cpu_lrs))) > 1       # the schedule did change the rate
    assert_params_same(dev_model, cpu_model, device)
    assert_state_same(dev_opt, cpu_opt, device)


STATEFUL = ["sgd-momentum-dampening-wd", "adam-amsgrad-l2", "rmsprop-centered-momentum-wd",
            "adagrad-decay-wd-init"]


def reference_run(name: str, steps: int) -> Net:
    model = Net()
    train(model, OPTIMIZERS[name](model.parameters()), steps)
    return model


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", STATEFUL)
def test_optimizer_state_saved_on_device_loads_on_cpu(device: str, name: str) -> None:
    make = OPTIMIZERS[name]
    dev_model = Net().to(device)
    dev_opt = make(dev_model.parameters())
    train(dev_model, dev_opt, 3)
    sd, model_sd = dev_opt.state_dict(), dev_model.state_dict()
    snapshot = {}
    for index, entries in sd["state"].items():
        for key, value in entries.items():
            assert_on_device(value, "cpu" if key == "step" else device)
            snapshot[index, key] = host(value).copy()
    train(dev_model, dev_opt, 1, first=3)          # the state dict is a snapshot
    for (index, key), value in snapshot.items():
        np.testing.assert_array_equal(host(sd["state"][index][key]), value)

    cpu_model = Net(seed=7)                        # other weights, overwritten here
    cpu_model.load_state_dict(model_sd)
    cpu_opt = make(cpu_model.parameters())
    cpu_opt.load_state_dict(sd)
    for p in cpu_model.parameters():
        for key, value in cpu_opt.state[p].items():
            assert type(value) is np.ndarray
            assert value.dtype == (np.float32 if key == "step" else p.dtype)
    train(cpu_model, cpu_opt, 2, first=3)
    want = reference_run(name, 5)
    for (key, p), q in zip(cpu_model.named_parameters(), want.parameters()):
        same_host(p.numpy(), q.numpy(), device, key)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", STATEFUL)
def test_optimizer_state_saved_on_cpu_loads_on_device(device: str, name: str,
                                                      tmp_path: Any) -> None:
    make = OPTIMIZERS[name]
    cpu_model = Net()
    cpu_opt = make(cpu_model.parameters())
    train(cpu_model, cpu_opt, 3)

    direct = Net(seed=7).to(device)
    direct.load_state_dict(cpu_model.state_dict())
    direct_opt = make(direct.parameters())
    direct_opt.load_state_dict(cpu_opt.state_dict())

    path = tmp_path / "opt.npz"                    # and through a checkpoint file
    tr.save({"model": cpu_model.state_dict(), "opt": cpu_opt.state_dict()}, path)
    loaded = tr.load(path)
    via_file = Net(seed=7).to(device)
    via_file.load_state_dict(loaded["model"])
    file_opt = make(via_file.parameters())
    file_opt.load_state_dict(loaded["opt"])

    train(cpu_model, cpu_opt, 2, first=3)
    for model, opt in ((direct, direct_opt), (via_file, file_opt)):
        for p in model.parameters():
            for key, value in opt.state[p].items():
                assert_on_device(value, "cpu" if key == "step" else device)
        train(model, opt, 2, first=3)
        assert_params_same(model, cpu_model, device)
        assert_state_same(opt, cpu_opt, device)


@pytest.mark.parametrize("device", DEVICES)
def test_loaded_state_takes_the_parameter_dtype(device: str) -> None:
    cpu_model = Net(np.float64)
    cpu_opt = optim.Adam(cpu_model.parameters(), amsgrad=True)
    train(cpu_model, cpu_opt, 2)
    dev_model = Net(np.float32).to(device)
    dev_opt = optim.Adam(dev_model.parameters(), amsgrad=True)
    dev_opt.load_state_dict(cpu_opt.state_dict())
    for p, q in zip(dev_model.parameters(), cpu_model.parameters()):
        for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
            got = dev_opt.state[p][key]
            assert_on_device(got, device)
            assert got.dtype == np.float32
            np.testing.assert_array_equal(host(got), cpu_opt.state[q][key].astype(np.float32))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", STATEFUL)
def test_state_follows_its_parameters_to_the_device(device: str, name: str) -> None:
    """Model moved to the device after the optimizer made its state on the CPU."""
    make = OPTIMIZERS[name]
    model = Net()
    opt = make(model.parameters())
    train(model, opt, 2)
    model.to(device)
    train(model, opt, 2, first=2)
    ref = Net()
    ref_opt = make(ref.parameters())
    train(ref, ref_opt, 4)
    assert_params_same(model, ref, device)
    assert_state_same(opt, ref_opt, device)

    model.to(np.float32)                           # and follows a dtype change
    train(model, opt, 1, first=4)
    for p in model.parameters():
        for key, value in opt.state[p].items():
            if key != "step":
                assert_on_device(value, device)
                assert value.dtype == np.float32


@pytest.mark.parametrize("device", DEVICES)
def test_step_refuses_a_gradient_on_another_device(device: str) -> None:
    w = tr.tensor(np.ones(3), requires_grad=True, device=device)
    with pytest.raises(RuntimeError, match=f"grad: assigned grad is on cpu, the tensor is on "
                                           f"{device}"):
        w.grad = np.full(3, 0.5)                   # a host gradient for a device parameter
    assert w.grad is None
    w._grad = np.full(3, 0.5)                      # past the setter: step checks it again
    opt = optim.SGD([w], lr=0.1)
    with pytest.raises(ValueError, match=f"on {device} has a gradient .* on cpu"):
        opt.step()
    np.testing.assert_array_equal(host(w), np.ones(3))


# --------------------------------------------------------------------------------------------
# gradient clipping
# --------------------------------------------------------------------------------------------
SHAPES = [(3, 4), (4,), (), (0, 2), (2, 3)]


def params_with_grads(device: str, dtype: Any, bad: float | None = None,
                      scale: float = 1.0) -> list[tr.Tensor]:
    """Parameters of several shapes (a 0-d and an empty one included) with gradients on
    ``device``; the last has none. ``bad`` is written into the first gradient, and then a
    huge finite entry into the second."""
    rng = np.random.default_rng(5)
    out = []
    for k, shape in enumerate(SHAPES):
        p = tr.tensor(np.zeros(shape, dtype=dtype), requires_grad=True, device=device)
        if k < len(SHAPES) - 1:
            g = np.asarray(rng.standard_normal(shape) * scale, dtype=dtype)
            if bad is not None and k == 0:
                g[1, 2] = bad
            if bad is not None and k == 1:
                g[0] = 1e300                       # overflows if squared unscaled
            p.grad = backend.to_device(g, device)
        out.append(p)
    return out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_equals_cpu_without_readback(device: str, dtype: Any,
                                                    norm_type: float, max_norm: float,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = params_with_grads("cpu", dtype)
    dev = params_with_grads(device, dtype)
    before = [host(p.grad) for p in dev]
    held = [p.grad for p in dev]
    with no_readback(monkeypatch):
        total = clip_grad_norm_(dev, max_norm, norm_type=norm_type)
    cpu_total = clip_grad_norm_(cpu, max_norm, norm_type=norm_type)
    assert isinstance(total, tr.Tensor) and total.shape == () and total.dtype == dtype
    assert_same(total, cpu_total, device, "total norm")
    for k, (p, q) in enumerate(zip(dev, cpu)):
        assert p.grad is held[k]                   # in place (None stays None)
        assert_same(p.grad, q.grad, device, f"grad {k}")
    if max_norm == 100.0:                          # below max_norm: exactly unchanged
        for p, g0 in zip(dev, before):
            if g0 is not None:
                np.testing.assert_array_equal(host(p.grad), g0)
    else:
        assert grad_norm(dev, norm_type) <= max_norm * (1 + 1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bad", [math.nan, math.inf])
@pytest.mark.parametrize("norm_type", [2.0, math.inf])
def test_nonfinite_norm_on_device(device: str, bad: float, norm_type: float,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = params_with_grads("cpu", np.float64, bad)
    dev = params_with_grads(device, np.float64, bad)
    with no_readback(monkeypatch):                 # NaN/inf handled on the device, silently
        total = clip_grad_norm_(dev, 1.0, norm_type=norm_type)
    cpu_total = clip_grad_norm_(cpu, 1.0, norm_type=norm_type)
    assert_same(total, cpu_total, device, "total norm")
    assert math.isnan(total.item()) if math.isnan(bad) else total.item() == math.inf
    for k, (p, q) in enumerate(zip(dev, cpu)):
        assert_same(p.grad, q.grad, device, f"grad {k}")   # NaN (nan) or 0 (inf), as torch

    dev = params_with_grads(device, np.float64, bad)
    before = [host(p.grad) for p in dev]
    with pytest.raises(RuntimeError, match=f"order {float(norm_type)}.*non-finite"):
        clip_grad_norm_(dev, 1.0, norm_type=norm_type, error_if_nonfinite=True)
    for p, g0 in zip(dev, before):                 # raised before touching anything
        np.testing.assert_array_equal(host(p.grad), g0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("scale", [1e-200, 1e200])
def test_norm_rescaling_on_device(device: str, scale: float) -> None:
    """The m * ||g / m|| form (no underflow/overflow) runs on the device as on the CPU."""
    cpu = params_with_grads("cpu", np.float64, scale=scale)
    dev = params_with_grads(device, np.float64, scale=scale)
    total = clip_grad_norm_(dev, 1.0)
    assert_same(total, clip_grad_norm_(cpu, 1.0), device)
    assert 0 < total.item() < math.inf
    assert grad_norm(dev) <= 1.0 + 1e-6


@pytest.mark.parametrize("device", DEVICES)
def test_total_norm_and_value_clipping_without_readback(
        device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = params_with_grads("cpu", np.float32)
    dev = params_with_grads(device, np.float32)
    with no_readback(monkeypatch):
        norm = get_total_norm([p.grad for p in dev if p.grad is not None])
        clip_grads_with_norm_(dev, 0.3, norm)      # a 0-d device Tensor: stays there
        clip_grad_value_(dev, 0.05)
    cpu_norm = get_total_norm([p.grad for p in cpu if p.grad is not None])
    clip_grads_with_norm_(cpu, 0.3, cpu_norm)
    clip_grad_value_(cpu, 0.05)
    assert_same(norm, cpu_norm, device, "get_total_norm")
    for k, (p, q) in enumerate(zip(dev, cpu)):
        assert_same(p.grad, q.grad, device, f"grad {k}")

    cpu, dev = params_with_grads("cpu", np.float32), params_with_grads(device, np.float32)
    clip_grads_with_norm_(dev, 0.3, 4.5)           # a Python number as the norm
    clip_grads_with_norm_(cpu, 0.3, 4.5)
    for k, (p, q) in enumerate(zip(dev, cpu)):
        assert_same(p.grad, q.grad, device, f"grad {k}")

    value = grad_norm(dev, 3.0)                    # a Python float: read back on purpose
    assert isinstance(value, float) and value == pytest.approx(grad_norm(cpu, 3.0), rel=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_clipping_refuses_gradients_on_two_devices(device: str) -> None:
    a = params_with_grads("cpu", np.float64)[0]
    b = params_with_grads(device, np.float64)[0]
    before = [host(a.grad), host(b.grad)]
    for clip in (lambda: clip_grad_norm_([a, b], 1.0), lambda: grad_norm([a, b]),
                 lambda: get_total_norm([a.grad, b.grad])):
        with pytest.raises(RuntimeError, match=f"several devices.*{device}"):
            clip()
    with pytest.raises(RuntimeError, match=f"total_norm is on cpu.*gradients are on {device}"):
        clip_grads_with_norm_([b], 1.0, tr.tensor(np.array(3.0)))
    np.testing.assert_array_equal(host(a.grad), before[0])
    np.testing.assert_array_equal(host(b.grad), before[1])


# --------------------------------------------------------------------------------------------
# Module.to, Module.device, state dicts
# --------------------------------------------------------------------------------------------
class WithBuffers(tr.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = tr.nn.Linear(3, 2, generator=0)                    # float32
        self.register_buffer("running", np.linspace(0, 1, 4, dtype=np.float32))
        self.register_buffer("count", np.arange(3, dtype=np.int64))


@pytest.mark.parametrize("device", DEVICES)
def test_module_to_moves_everything_in_place(device: str) -> None:
    m = WithBuffers()
    params = list(m.parameters())
    rng = np.random.default_rng(0)
    for p in params:
        p.grad = rng.standard_normal(p.shape).astype(np.float32)
    values = {k: v.copy() for k, v in m.state_dict().items()}
    grads = [p.grad.array.copy() for p in params]
    assert m.device == "cpu"

    assert m.to(device) is m
    assert m.device == device
    assert all(a is b for a, b in zip(m.parameters(), params))       # the same objects
    for p, g in zip(params, grads):
        assert_on_device((p, p.grad), device)
        np.testing.assert_array_equal(host(p.grad), g)               # moves are exact copies
    for key, value in m.state_dict(keep_vars=True).items():
        assert_on_device(value, device)
        np.testing.assert_array_equal(host(value), values[key])
    assert m.count.dtype == np.int64 and m.running.dtype == np.float32

    m.to(device=device, dtype=np.float64)                            # dtype on the device
    for p in params:
        assert p.dtype == p.grad.dtype == np.float64
        assert_on_device((p, p.grad), device)
    assert m.running.dtype == np.float64 and m.count.dtype == np.int64
    assert_on_device((m.running, m.count), device)

    m.to("cpu", np.float32)                                          # back, both at once
    assert m.device == "cpu"
    for key, value in m.state_dict().items():
        np.testing.assert_array_equal(value, values[key])
        assert value.dtype == values[key].dtype
    for p, g in zip(params, grads):
        assert type(p.array) is np.ndarray and type(p.grad.array) is np.ndarray
        np.testing.assert_array_equal(p.grad, g)


@pytest.mark.parametrize("device", DEVICES)
def test_module_device_refuses_a_split_module(device: str) -> None:
    m = WithBuffers()
    m.lin.bias.data = backend.to_device(m.lin.bias.array, device)
    with pytest.raises(RuntimeError, match=f"several devices.*{device}"):
        m.device
    m.to(device)                                                     # .to mends it
    assert m.device == device


def test_module_to_unknown_device_changes_nothing() -> None:
    m = WithBuffers()
    for bad in ("tpu", "gpu", "mps"):
        with pytest.raises(ValueError, match=f"unknown device {bad!r}"):
            m.to(bad)
    with pytest.raises(TypeError, match="floating-point"):
        m.to("cpu", np.int32)
    assert m.device == "cpu" and m.lin.weight.dtype == np.float32


def _fail(message: str) -> Callable[[], int]:
    def raise_() -> int:
        raise RuntimeError(message)
    return raise_


@pytest.mark.parametrize("gpu_count, reason", [
    (_fail("cudaErrorNoDevice: no CUDA-capable device is detected"), "cudaErrorNoDevice"),
    (lambda: 0, "reports 0 devices"),
])
def test_cuda_errors_say_what_is_missing(monkeypatch: pytest.MonkeyPatch,
                                         gpu_count: Callable[[], int], reason: str) -> None:
    m = WithBuffers()
    # CuPy missing (whatever this machine has)
    monkeypatch.setattr(backend, "_cupy_checked", True)
    monkeypatch.setattr(backend, "_cupy", None)
    monkeypatch.setattr(backend, "_cupy_error", "ModuleNotFoundError: No module named 'cupy'")
    for move in (lambda: m.to("cuda"), m.cuda, lambda: m.to("cuda:0", np.float64)):
        with pytest.raises(RuntimeError, match=r"needs CuPy.*No module named 'cupy'.*pip"):
            move()
    assert m.device == "cpu" and m.lin.weight.dtype == np.float32

    # CuPy present, no usable GPU
    runtime = types.SimpleNamespace(getDeviceCount=gpu_count)
    fake = types.SimpleNamespace(__version__="13.9.9", cuda=types.SimpleNamespace(runtime=runtime))
    monkeypatch.setattr(backend, "_cupy", fake)
    monkeypatch.setattr(backend, "_gpu_checked", False)
    monkeypatch.setattr(backend, "_gpu_error", None)
    with pytest.raises(RuntimeError, match=f"CuPy 13.9.9 is installed but no CUDA GPU.*{reason}"):
        m.to("cuda")
    assert m.device == "cpu"
    assert not backend.cuda_is_available()


@pytest.mark.parametrize("device", DEVICES)
def test_state_dict_of_a_device_module_is_host_copies(device: str) -> None:
    cpu_model, dev_model = Net(), Net().to(device)
    sd = dev_model.state_dict()
    want = cpu_model.state_dict()
    assert list(sd) == list(want)
    for key in sd:
        assert type(sd[key]) is np.ndarray
        np.testing.assert_array_equal(sd[key], want[key])
    sd["hidden.weight"][...] = 0.0                 # a copy: the module is untouched
    np.testing.assert_array_equal(dev_model.hidden.weight.numpy(), want["hidden.weight"])
    for key, value in dev_model.state_dict(keep_vars=True).items():
        assert_on_device(value, device)            # keep_vars: the tensors themselves


@pytest.mark.parametrize("device", DEVICES)
def test_load_state_dict_across_devices(device: str) -> None:
    source = Net(seed=3)
    host_sd = source.state_dict()

    dev_model = Net(np.float32).to(device)         # float64 host arrays -> float32 device
    weight = dev_model.hidden.weight
    dev_model.load_state_dict(host_sd)
    assert dev_model.hidden.weight is weight
    for key, value in dev_model.state_dict(keep_vars=True).items():
        assert_on_device(value, device)
        assert value.dtype == np.float32
        np.testing.assert_array_equal(host(value), host_sd[key].astype(np.float32))

    on_device = Net(seed=3).to(device).state_dict(keep_vars=True)   # device Tensors
    raw = {k: v.array for k, v in on_device.items()}                 # raw device arrays
    for values in (on_device, raw):
        cpu_model = Net(seed=9)
        cpu_model.load_state_dict(values)
        assert cpu_model.device == "cpu"
        for key, value in cpu_model.state_dict().items():
            np.testing.assert_array_equal(value, host_sd[key])
        other = Net(seed=9).to(device)
        other.load_state_dict(values)
        assert other.device == device
        for key, value in other.state_dict().items():
            np.testing.assert_array_equal(value, host_sd[key])

    bad = dict(host_sd, **{"out.bias": np.zeros(3)})
    with pytest.raises(RuntimeError, match="size mismatch for 'out.bias'"):
        dev_model.load_state_dict(bad)             # checked first: nothing loaded
    np.testing.assert_array_equal(host(dev_model.out.bias), host_sd["out.bias"].astype(np.float32))


# --------------------------------------------------------------------------------------------
# checkpoints
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
def test_save_and_load_device_data(device: str, tmp_path: Any) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3)).astype(np.float32)
    ids = np.array([3, 1, 2], dtype=np.int64)
    model = Net().to(device)
    obj = {
        "tensor": tr.tensor(a, device=device),
        "array": backend.to_device(ids, device),
        "scalar": tr.tensor(a, device=device).array.sum(),          # a 0-d device array
        "nested": {"params": model.state_dict(keep_vars=True), "step": 4},
        "model": model.state_dict(),
    }
    path = tmp_path / "device.npz"
    tr.save(obj, path)
    back = tr.load(path)
    # a Tensor comes back as a Tensor on the device it was saved from (torch.load's rule)
    assert isinstance(back["tensor"], tr.Tensor) and back["tensor"].dtype == np.float32
    assert back["tensor"].device == device
    np.testing.assert_array_equal(host(back["tensor"]), a)
    np.testing.assert_array_equal(back["array"], ids)
    assert back["array"].dtype == np.int64
    assert back["scalar"].shape == () and back["scalar"] == a.sum()
    assert back["nested"]["step"] == 4
    for key, value in Net().state_dict().items():
        kept = back["nested"]["params"][key]      # saved with keep_vars: a Parameter again
        assert isinstance(kept, tr.Tensor) and kept.device == device
        np.testing.assert_array_equal(host(kept), value)
        assert type(back["model"][key]) is np.ndarray   # state_dict() holds host copies
        np.testing.assert_array_equal(back["model"][key], value)

    fresh = Net(seed=5).to(device)                 # load a checkpoint into a device module
    fresh.load_state_dict(back["model"])
    assert fresh.device == device
    for p, q in zip(fresh.parameters(), model.parameters()):
        assert_same(p, q, device)

    with pytest.raises(TypeError, match="state_dict"):
        tr.save(model, tmp_path / "module.npz")    # a module itself is not a checkpoint
    assert not (tmp_path / "module.npz").exists()


@pytest.mark.parametrize("device", DEVICES)
def test_failed_save_of_device_data_leaves_the_old_file(device: str, tmp_path: Any) -> None:
    path = tmp_path / "ckpt.npz"
    tr.save({"w": np.arange(3.0)}, path)
    old = path.read_bytes()
    bad = {"w": tr.tensor(np.ones(3), device=device), "names": np.array(["a", "b"])}
    with pytest.raises(ValueError, match="'names'.*dtype <U1"):
        tr.save(bad, path)
    assert path.read_bytes() == old
    assert os.listdir(tmp_path) == ["ckpt.npz"]    # no temporary file left behind


# --------------------------------------------------------------------------------------------
# training loops
# --------------------------------------------------------------------------------------------
def run_fit(device: str, clip: float | None) -> tuple[Net, Any]:
    model = Net().to(device)
    opt = optim.Adam(model.parameters(), lr=0.05)
    x_val, y_val = batch(99)

    def step_fn(i: int) -> tr.Tensor:
        x, y = batch(i)                            # host batches: step_fn moves the input,
        return F.mse_loss(model(tr.tensor(x, device=model.device)), y)  # the loss the target

    def validate() -> float:
        with tr.no_grad():
            return F.mse_loss(model(tr.tensor(x_val, device=device)),
                              tr.tensor(y_val, device=device)).item()

    result = fit(step_fn, 8, opt, clip=clip, validate=validate, val_every=3, progress=False)
    return model, result


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("clip", [None, 0.5])
def test_fit_on_device_equals_cpu(device: str, clip: float | None) -> None:
    cpu_model, cpu_result = run_fit("cpu", clip)
    dev_model, dev_result = run_fit(device, clip)
    assert dev_result.steps == cpu_result.steps == 8
    same_numbers(dev_result.losses, cpu_result.losses, device)
    assert [s for s, _ in dev_result.val_losses] == [3, 6]
    same_numbers([v for _, v in dev_result.val_losses],
                 [v for _, v in cpu_result.val_losses], device)
    assert_params_same(dev_model, cpu_model, device)
    assert dev_result.losses[-1] < dev_result.losses[0]


class Elman(tr.nn.Module):
    """h_t = tanh(x_t W_xh + h_{t-1} W_hh + b), y_t = h_t W_hy, step by step with autograd."""

    def __init__(self, H: int = 5) -> None:
        super().__init__()
        rng = np.random.default_rng(0)
        self.W_xh = tr.nn.Parameter(rng.normal(0, 0.5, (1, H)))
        self.W_hh = tr.nn.Parameter(rng.normal(0, 0.3, (H, H)))
        self.b = tr.nn.Parameter(np.zeros(H))
        self.W_hy = tr.nn.Parameter(rng.normal(0, 0.5, (H, 1)))

    def step(self, xw: tr.Tensor, h: Any) -> tuple[tr.Tensor, tr.Tensor]:
        if h is None:                              # created on the input's device
            h = tr.zeros((xw.shape[1], self.b.shape[0]), dtype=xw.dtype, device=xw.device)
        outs = []
        for t in range(xw.shape[0]):
            h = (xw[t] @ self.W_xh + h @ self.W_hh + self.b).tanh()    # (N, H)
            outs.append(h @ self.W_hy)                                  # (N, 1)
        return tr.stack(outs), h


def run_stream(device: str, as_tensor: bool) -> tuple[Elman, Any]:
    t = np.arange(31)
    s = np.sin(0.4 * t) + 0.3 * np.cos(0.9 * t)
    stream, target = s[:-1].reshape(30, 1, 1), s[1:].reshape(30, 1, 1)
    model = Elman().to(device)
    opt = optim.RMSprop(model.parameters(), lr=0.01, momentum=0.5)

    def loss_fn(pred: tr.Tensor, a: int, b: int) -> tr.Tensor:
        diff = pred - tr.tensor(target[a:b], device=pred.device)
        return (diff * diff).sum() / (b - a)

    x = tr.tensor(stream) if as_tensor else stream                # on the host either way
    result = train_stream(model.step, x, loss_fn, opt, chunked(7), epochs=2, clip=1.0,
                          progress=False)
    return model, result


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("as_tensor", [False, True])
def test_train_stream_on_device_equals_cpu(device: str, as_tensor: bool) -> None:
    cpu_model, cpu_result = run_stream("cpu", as_tensor)
    dev_model, dev_result = run_stream(device, as_tensor)
    assert dev_result.steps == cpu_result.steps == 10          # ceil(30 / 7) windows x 2
    same_numbers(dev_result.losses, cpu_result.losses, device)
    assert_params_same(dev_model, cpu_model, device)


@pytest.mark.parametrize("device", DEVICES)
def test_train_stream_refuses_a_stream_on_another_device(device: str) -> None:
    model = Elman()
    opt = optim.SGD(model.parameters(), lr=0.1)
    x = tr.tensor(np.zeros((6, 1, 1)), device=device)
    with pytest.raises(RuntimeError, match=f"stream is on {device}.*parameters are on cpu"):
        train_stream(model.step, x, lambda p, a, b: p.sum(), opt, chunked(3), progress=False)
