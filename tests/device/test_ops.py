"""Every registered op on every device of ``DEVICES``, against the same op on the CPU.

Driven by ``tinygrad_rnn/testing/registry.py``: for each entry and hypothesis example,

* ``test_device_forward_<op>``: the forward pass on the device equals the CPU's (exactly on
  the stand-in, see ``_devices.assert_same``) in float64 and float32, its outputs live on the
  device, and the primitives the entry claims are in the recorded graph;
* ``test_device_vjp_<op>``: the input gradients for a random upstream gradient equal the
  CPU's and live on the device (float64 and float32);
* ``test_device_gradcheck_<op>``: ``tr.gradcheck`` (float64, full Jacobian) passes with the
  inputs on the device, and on the stand-in its report equals the CPU's field by field.

The constants of a case (masks, targets, index arrays, class weights) are host NumPy arrays,
as users pass them: the ops copy them to the device. A constant given as a Tensor on another
device is an error naming both devices. Further tests cover ``tr.jacobian`` and the explicit
Jacobian matrices, and the engine on a device (upstream gradients, hooks, ``retain_grad``,
accumulation). ``test_gradcheck.py`` covers the gradient checkers themselves.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn.testing.registry import (
    BY_NAME, HAS_WIDE_FLOAT, REGISTRY, Case, OpInfo, as_tuple, cast_case, graph_functions,
    random_upstream, run_forward, run_vjp,
)
from tinygrad_rnn import functional as F
from tinygrad_rnn import explicit_jacobians

from ._devices import DEVICES, assert_on_device, assert_same, host, on_device

EXAMPLES = settings(max_examples=10, deadline=None)
SEEDS = st.integers(0, 2**32 - 1)
DTYPES = (np.float64, np.float32)
# the same tolerances as tests/test_ops_gradients.py (derived there)
EPS = 1e-6
ATOL = 1e-6
RTOL = 1e-5


def _unsupported(op: OpInfo, case: Case, device: str) -> bool:
    """CuPy has no extended-precision float, so the astype entry's round trip through
    ``longdouble`` exists only on the CPU: the stand-in refuses it as CuPy does (asserted
    here; True tells the caller to stop), on a GPU the case is skipped."""
    if op.name != "astype" or not HAS_WIDE_FLOAT or device == "cpu":
        return False
    if device == "cuda":
        pytest.skip("CuPy has no longdouble dtype")
    with pytest.raises(TypeError, match="CuPy has no arrays of dtype"):
        run_forward(op, cast_case(case, np.float64), device=device)
    return True


# ------------------------------------------------------------------------------ forward
def check_forward(op: OpInfo, case: Case, device: str) -> None:
    for dtype in DTYPES:
        typed = cast_case(case, dtype)
        _, cpu_outputs = run_forward(op, typed)
        leaves, outputs = run_forward(op, typed, device=device)
        for leaf in leaves:
            assert_on_device(leaf, device)
        assert len(outputs) == len(cpu_outputs), op.name
        for k, (out, ref) in enumerate(zip(outputs, cpu_outputs)):
            assert_same(out, ref, device, f"{op.name} {np.dtype(dtype)}: output {k}")
        assert set(op.functions) <= graph_functions(outputs), op.name


# ------------------------------------------------------------------------------ VJP
def check_vjp(op: OpInfo, case: Case, device: str, seed: int) -> None:
    for dtype in DTYPES:
        typed = cast_case(case, dtype)
        upstream = random_upstream(op, typed, seed)
        cpu_outs, cpu_grads = run_vjp(op, typed, upstream)
        outs, grads = run_vjp(op, typed, [on_device(g, device) for g in upstream],
                              device=device)
        what = f"{op.name} {np.dtype(dtype)}"
        for k, (out, ref) in enumerate(zip(outs, cpu_outs)):
            assert_same(out, ref, device, f"{what}: output {k}")
        for k, (grad, ref) in enumerate(zip(grads, cpu_grads)):
            assert_same(grad, ref, device, f"{what}: gradient of input {k}")


# ------------------------------------------------------------------------------ gradcheck
def _output_scale(outputs: tuple) -> float:
    """max(1, largest finite |output entry|), computed on the host from explicit copies."""
    scale = 1.0
    for out in outputs:
        values = host(out).astype(np.float64)
        finite = values[np.isfinite(values)]
        if finite.size:
            scale = max(scale, float(np.abs(finite).max()))
    return scale


def _gradcheck(op: OpInfo, case: Case, device: str) -> tr.GradcheckReport:
    """The report of ``tr.gradcheck`` (float64, full) of ``op`` at ``case`` on ``device``;
    elements ``op.frozen`` marks are held constant (their gradient is defined to be 0)."""
    leaves = [tr.Tensor(a, requires_grad=True, device=device) for a in case.inputs]
    outputs = as_tuple(op.fn(*leaves, **case.consts))
    frozen = op.frozen(case) if op.frozen is not None else (None,) * len(leaves)
    if any(mask is not None for mask in frozen):
        constants = [tr.Tensor(a, device=device) for a in case.inputs]

        def fn(*xs: Any) -> Any:
            held = [x if m is None else tr.where(m, c, x)
                    for x, c, m in zip(xs, constants, frozen)]
            return op.fn(*held, **case.consts)
    else:
        def fn(*xs: Any) -> Any:
            return op.fn(*xs, **case.consts)

    return tr.gradcheck(fn, leaves, eps=EPS, atol=ATOL * _output_scale(outputs), rtol=RTOL,
                        mode="full", raise_exception=False)


def check_gradcheck(op: OpInfo, case: Case, device: str) -> None:
    report = _gradcheck(op, case, device)
    assert report.passed, f"{op.name} on {device}: {report}"
    if device == "standin":  # the same arithmetic as on the CPU, so the same report
        assert report == _gradcheck(op, case, "cpu"), op.name


# ------------------------------------------------------------------------------ generated
def _make_tests(op: OpInfo) -> dict:
    def forward(device: str, case: Case) -> None:
        if not _unsupported(op, case, device):
            check_forward(op, case, device)

    def vjp(device: str, case: Case, seed: int) -> None:
        if not _unsupported(op, case, device):
            check_vjp(op, case, device, seed)

    def gradcheck(device: str, case: Case) -> None:
        if not _unsupported(op, case, device):
            check_gradcheck(op, case, device)

    tests = {}
    for kind, body, doc, extra in (
        ("forward", forward, "forward (float64, float32) equals the CPU's", {}),
        ("vjp", vjp, "VJP (float64, float32) equals the CPU's", {"seed": SEEDS}),
        ("gradcheck", gradcheck, "gradcheck (float64, full) passes", {}),
    ):
        name = f"test_device_{kind}_{op.name}"
        body.__name__ = body.__qualname__ = name
        body.__doc__ = f"On each device, {op.name}: {doc}."
        for case in op.examples:
            body = example(case=case, **{key: 0 for key in extra})(body)
        test = EXAMPLES(given(case=op.cases, **extra)(body))
        tests[name] = pytest.mark.parametrize("device", DEVICES)(test)
    return tests


for _op in REGISTRY:
    globals().update(_make_tests(_op))
del _op


def test_every_registry_entry_is_covered() -> None:
    """Meta-test: each registry entry has its forward, VJP and gradcheck device tests."""
    names = set(globals())
    for kind in ("forward", "vjp", "gradcheck"):
        missing = sorted(op for op in BY_NAME if f"test_device_{kind}_{op}" not in names)
        assert not missing, f"registry entries without a device {kind} test: {missing}"
    assert {"add", "softmax", "cross_entropy", "embedding", "split"} <= set(BY_NAME)


# ------------------------------------------------------------------------------ constants
def _logits(device: str) -> tr.Tensor:
    data = np.random.default_rng(0).standard_normal((3, 4))
    return tr.Tensor(data, requires_grad=True, device=device)


# (name, call(x, constant), the constant as host data, whether a list works as well)
CONSTANT_CALLS = [
    ("cross_entropy target", lambda x, c: F.cross_entropy(x, c), np.array([0, 3, 1]), True),
    ("nll_loss target", lambda x, c: F.nll_loss(x, c), np.array([2, 0, 1]), True),
    ("cross_entropy weight", lambda x, c: F.cross_entropy(x, np.array([0, 1, 2]), weight=c),
     np.array([0.5, 1.0, 2.0, 1.5]), True),
    ("softmax mask", lambda x, c: F.softmax(x, axis=-1, mask=c),
     np.array([True, False, True, True]), True),
    ("log_softmax mask", lambda x, c: F.log_softmax(x, axis=0, mask=c),
     np.array([[True], [True], [False]]), True),
    ("Tensor.softmax mask", lambda x, c: x.softmax(-1, mask=c),
     np.array([True, True, False, True]), True),
    ("Tensor.log_softmax mask", lambda x, c: x.log_softmax(-1, mask=c),
     np.array([True, True, False, True]), True),
    ("masked_fill mask", lambda x, c: F.masked_fill(x, c, 0.0), np.array([False, True] * 2),
     True),
    ("Tensor.masked_fill mask", lambda x, c: x.masked_fill(c, -1.0),
     np.array([[True], [False], [True]]), True),
    ("where condition", lambda x, c: tr.where(c, x, 0.0), np.eye(3, 4, dtype=bool), True),
    ("embedding ids", lambda x, c: F.embedding(c, x), np.array([[2, 0], [1, 1]]), True),
    ("bce weight", lambda x, c: F.binary_cross_entropy_with_logits(x, x.detach(), weight=c),
     np.array([1.0, 2.0, 0.5, 1.0]), True),
    ("bce pos_weight",
     lambda x, c: F.binary_cross_entropy_with_logits(x, x.detach(), pos_weight=c),
     np.array([1.0, 2.0, 0.5, 1.0]), True),
    ("mse target", lambda x, c: F.mse_loss(x, c), np.zeros((3, 4)), True),
    ("bce target", lambda x, c: F.binary_cross_entropy_with_logits(x, c), np.ones((3, 4)),
     True),
    # a float list is not read as probabilities (only an array or Tensor of the input's shape)
    ("cross_entropy probabilities", lambda x, c: F.cross_entropy(x, c),
     np.full((3, 4), 0.25), False),
]
CONSTANT_IDS = [name for name, *_ in CONSTANT_CALLS]
# an index array is a constant too, but a CPU index Tensor is accepted for device data (as
# in torch): Tensor.__getitem__ copies host indices to the tensor's device
GETITEM = ("getitem index", lambda x, c: x[c], np.array([2, 0, 2]), True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name, call, constant, lists", CONSTANT_CALLS + [GETITEM],
                         ids=CONSTANT_IDS + [GETITEM[0]])
def test_host_constants_are_copied_to_the_device(device: str, name: str, call: Any,
                                                constant: np.ndarray, lists: bool) -> None:
    """A constant given as host data (NumPy array or list) is copied to the input's device:
    the results equal the CPU's and live on the device."""
    for const in (constant, constant.tolist()) if lists else (constant,):
        x_cpu, x_dev = _logits("cpu"), _logits(device)
        y_cpu, y_dev = call(x_cpu, const), call(x_dev, const)
        assert_same(y_dev, y_cpu, device, name)
        y_cpu.sum().backward()
        y_dev.sum().backward()
        assert_same(x_dev.grad, x_cpu.grad, device, f"{name}: gradient")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name, call, constant, lists", CONSTANT_CALLS, ids=CONSTANT_IDS)
def test_constant_tensor_on_another_device_is_an_error(device: str, name: str, call: Any,
                                                       constant: np.ndarray,
                                                       lists: bool) -> None:
    """A constant given as a Tensor on another device than the input raises, naming both
    devices (either way round); nothing is copied behind the user's back."""
    for x_device, c_device in ((device, "cpu"), ("cpu", device)):
        x = _logits(x_device)
        with pytest.raises(RuntimeError) as info:
            call(x, tr.Tensor(constant, device=c_device))
        message = str(info.value)
        assert x_device in message and c_device in message, message


@pytest.mark.parametrize("device", DEVICES)
def test_constant_tensor_on_the_same_device_is_used(device: str) -> None:
    """A constant Tensor on the input's device is used in place (same result as the CPU)."""
    target = np.array([0, 3, 1])
    mask = np.array([True, False, True, True])
    x_cpu, x_dev = _logits("cpu"), _logits(device)
    y_cpu = F.cross_entropy(x_cpu.softmax(-1, mask=tr.Tensor(mask)), tr.Tensor(target))
    y_dev = F.cross_entropy(x_dev.softmax(-1, mask=tr.Tensor(mask, device=device)),
                            tr.Tensor(target, device=device))
    assert_same(y_dev, y_cpu, device)


@pytest.mark.parametrize("device", DEVICES)
def test_out_of_range_ids_on_device(device: str) -> None:
    """Ids and class targets are validated on the device with the same message as on the
    CPU (the offending id and its position)."""
    calls = [
        lambda x: F.embedding(np.array([[0, 1], [5, 2]]), x),
        lambda x: F.cross_entropy(x, np.array([0, -1, 2])),
        lambda x: F.nll_loss(x, np.array([1, 4, 0]), ignore_index=-1),
    ]
    for call in calls:
        messages = []
        for dev in ("cpu", device):
            with pytest.raises(IndexError) as info:
                call(_logits(dev))
            messages.append(str(info.value))
        assert messages[0] == messages[1] and "position" in messages[0], messages


# ------------------------------------------------------------------------------ jacobians
@pytest.mark.parametrize("device", DEVICES)
def test_jacobian_on_device(device: str) -> None:
    """tr.jacobian of a two-input function: device results equal the CPU's, on the device,
    for inputs given as Tensors and as raw device arrays."""
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3,))

    def fn(x: tr.Tensor, w: tr.Tensor) -> tr.Tensor:
        return (x * w).tanh().softmax(-1)

    want = tr.jacobian(fn, [a, b])
    got = tr.jacobian(fn, [tr.Tensor(a, device=device), on_device(b, device)])
    assert_same(got, want, device, "jacobian")
    assert got[0].shape == (2, 3, 2, 3) and got[1].shape == (2, 3, 3)
    single = tr.jacobian(lambda x: x.sigmoid(), on_device(b, device))
    assert_same(single, tr.jacobian(lambda x: x.sigmoid(), b), device, "single input")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "tanh", "sigmoid", "relu"])
def test_explicit_jacobians_on_device(device: str, name: str) -> None:
    """The explicit Jacobian matrices build on the device (from a Tensor or a raw array) and
    equal the CPU's, and J^T g equals the op's backward there."""
    x = np.random.default_rng(2).standard_normal((2, 4)) + 0.1
    g = np.random.default_rng(3).standard_normal((2, 4))
    op = {"softmax": F.softmax, "log_softmax": F.log_softmax, "tanh": F.tanh,
          "sigmoid": F.sigmoid, "relu": F.relu}[name]
    build = getattr(explicit_jacobians, name)
    y_cpu = op(tr.Tensor(x))
    xd = tr.Tensor(x, requires_grad=True, device=device)
    y_dev = op(xd)
    for arg in (y_dev, y_dev.array):
        assert_same(build(arg), build(y_cpu), device, name)
    g_dev = on_device(g, device)
    y_dev.backward(g_dev)
    jt_g = (build(y_dev) * g_dev[..., :, None]).sum(axis=-2)  # (J^T g)_j = sum_i J_ij g_i
    assert_on_device((xd.grad, jt_g), device)
    np.testing.assert_allclose(host(xd.grad), host(jt_g), rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------ engine
@pytest.mark.parametrize("device", DEVICES)
def test_backward_with_host_upstream_is_copied_to_the_device(device: str) -> None:
    """Tensor.backward(grad=host array or list) on a device tensor copies the upstream
    gradient to the device (an explicit argument, like a constant)."""
    x_cpu, x_dev = _logits("cpu"), _logits(device)
    g = np.random.default_rng(6).standard_normal((3, 4))
    x_cpu.tanh().backward(g)
    x_dev.tanh().backward(g)
    assert_same(x_dev.grad, x_cpu.grad, device)
    x_dev.grad = None
    x_dev.tanh().backward(g.tolist())
    assert_same(x_dev.grad, x_cpu.grad, device)


@pytest.mark.parametrize("device", DEVICES)
def test_backward_of_a_cpu_tensor_with_a_device_upstream_is_an_error(device: str) -> None:
    """A device array (or device Tensor) as the upstream gradient of a CPU tensor is never
    copied to the host implicitly: RuntimeError naming both devices."""
    g = np.ones((3, 4))
    for upstream in (on_device(g, device), tr.Tensor(g, device=device)):
        y = _logits("cpu").tanh()
        with pytest.raises(RuntimeError) as info:
            y.backward(upstream)
        assert device in str(info.value) and "cpu" in str(info.value)


@pytest.mark.parametrize("device", DEVICES)
def test_hooks_see_and_return_device_arrays(device: str) -> None:
    """Hooks on leaves and on intermediate tensors receive device arrays; a device array they
    return replaces the gradient; a host array returned for device data is an error."""
    seen = []

    def double(g: Any) -> Any:
        seen.append(g)
        return g * 2

    results = {}
    for dev in ("cpu", device):
        x = _logits(dev)
        h = x * 3.0
        h.register_hook(double)
        x.register_hook(double)
        h.tanh().sum().backward()
        results[dev] = x.grad
    assert_same(results[device], results["cpu"], device)
    assert len(seen) == 4
    assert_on_device(seen[2:], device)

    for x_device, returned in ((device, host), ("cpu", lambda g: on_device(g, device))):
        y = _logits(x_device).tanh()
        y.register_hook(returned)
        with pytest.raises(RuntimeError, match="hook") as info:
            y.sum().backward()
        assert device in str(info.value) and "cpu" in str(info.value)


class _HostGradient(tr.Function):
    """Identity whose backward (wrongly) copies its gradient to the host."""

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return x.copy()

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:
        return host(g)


@pytest.mark.parametrize("device", DEVICES)
def test_a_gradient_on_the_wrong_device_is_an_error(device: str) -> None:
    """The engine refuses a backward that returns its gradient on another device than the
    input's (it would silently move .grad to the host), naming the op and both devices."""
    x = _logits(device)
    with pytest.raises(RuntimeError, match="_HostGradient") as info:
        _HostGradient.apply(x).sum().backward()
    assert device in str(info.value) and "cpu" in str(info.value)
    assert x.grad is None


@pytest.mark.parametrize("device", DEVICES)
def test_retain_grad_on_device(device: str) -> None:
    """retain_grad keeps an intermediate gradient, on the device, equal to the CPU's."""
    grads = {}
    for dev in ("cpu", device):
        x = _logits(dev)
        h = (x * x).sigmoid()
        h.retain_grad()
        (h * h).sum().backward()
        grads[dev] = (h.grad, x.grad)
    assert_same(grads[device], grads["cpu"], device)


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_accumulate_on_device(device: str) -> None:
    """A weight used twice, a diamond, two backward passes, and an output left unused by
    the loss (its zero gradient is made on the device): sums equal the CPU's."""
    grads = {}
    for dev in ("cpu", device):
        rng = np.random.default_rng(7)
        w = tr.Tensor(rng.standard_normal((4, 4)), requires_grad=True, device=dev)
        h = tr.Tensor(rng.standard_normal((2, 4)), device=dev)
        for _ in range(2):
            h1 = (h @ w).tanh()
            h2 = (h1 @ w).tanh()              # w used twice
            a, b = tr.split(h2 + h1 * h2, [1, 1], axis=0)  # a diamond; b is unused
            a.sum().backward()
            grads.setdefault(dev, []).append(w.grad.array.copy())
    assert_same(grads[device], grads["cpu"], device)
    assert_same(grads[device][1], grads[device][0] * 2, device, "second pass adds")


@pytest.mark.parametrize("device", DEVICES)
def test_backward_of_a_device_leaf(device: str) -> None:
    """backward() on a leaf itself: its .grad is the (copied) upstream, on the device."""
    x = tr.Tensor(np.arange(3.0), requires_grad=True, device=device)
    x.backward(np.array([1.0, 2.0, 3.0]))
    x.backward(on_device(np.ones(3), device))
    assert_same(x.grad, np.array([2.0, 3.0, 4.0]), device)
