"""Module and Parameter: registration, traversal, state dicts, modes, dtypes, printing."""
from __future__ import annotations

import copy
import re
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn import nn


class Block(nn.Module):
    def __init__(self, d: int, h: int, seed: int) -> None:
        super().__init__()
        self.proj = nn.Linear(d, h, generator=seed)
        self.scale = nn.Parameter(np.full((h,), 0.5, dtype=np.float32))
        self.register_buffer("steps", np.zeros((), dtype=np.int64))
        self.register_buffer("running", np.zeros((h,), dtype=np.float32))

    def forward(self, x: tr.Tensor) -> tr.Tensor:
        return self.proj(x).tanh() * self.scale


class Net(nn.Module):
    def __init__(self, seed: int = 0, dtype=np.float32) -> None:
        super().__init__()
        self.embed = nn.Embedding(7, 3, dtype=dtype, generator=seed)
        self.block = Block(3, 4, seed + 1)
        self.head = nn.Sequential(nn.Linear(4, 5, dtype=dtype, generator=seed + 2), nn.Tanh(),
                                  nn.Linear(5, 2, dtype=dtype, generator=seed + 3))
        self.offset = nn.Parameter(np.zeros((2,), dtype=dtype))

    def forward(self, ids):
        return self.head(self.block(self.embed(ids))) + self.offset


NET_KEYS = [  # torch's order: a module's own parameters, its buffers, then its children
    "offset", "embed.weight", "block.scale", "block.steps", "block.running",
    "block.proj.weight", "block.proj.bias", "head.0.weight", "head.0.bias", "head.2.weight",
    "head.2.bias",
]
NET_PARAMS = [k for k in NET_KEYS if k not in ("block.steps", "block.running")]
IDS = np.array([[0, 3, 6], [2, 2, 5]])


# ------------------------------------------------------------------------- Parameter
def test_parameter_is_a_leaf_tensor_that_requires_grad():
    x = tr.Tensor(np.ones(3), requires_grad=True)
    p = nn.Parameter(x * 2.0)  # made from a non-leaf: keeps only the values
    assert isinstance(p, tr.Tensor) and isinstance(p, nn.Parameter)
    assert p.is_leaf and p.requires_grad and p.grad_fn is None
    np.testing.assert_array_equal(p.numpy(), [2.0, 2.0, 2.0])
    assert p.dtype == np.float64
    assert nn.Parameter(np.zeros(2), requires_grad=False).requires_grad is False
    assert repr(p).startswith("Parameter(") and "requires_grad=True" in repr(p)
    y = p * 3.0  # ops give plain tensors
    assert type(y) is tr.Tensor and not y.is_leaf
    with pytest.raises(TypeError, match="floating-point"):
        nn.Parameter(np.arange(3))


def test_parameter_has_no_instance_dict():
    # Tensor uses __slots__; the subclass must too, or every parameter grows a __dict__
    p = nn.Parameter(np.zeros(2))
    assert not hasattr(p, "__dict__")


def test_parameter_gets_gradients():
    p = nn.Parameter(np.array([1.0, -2.0]))
    (p * p).sum().backward()
    np.testing.assert_array_equal(p.grad, [2.0, -4.0])


# ------------------------------------------------------------------------- registration
def test_registration_order_and_dotted_names():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == NET_PARAMS
    assert list(net.state_dict()) == NET_KEYS
    assert [n for n, _ in net.named_buffers()] == ["block.steps", "block.running"]
    assert [n for n, _ in net.named_children()] == ["embed", "block", "head"]
    assert [n for n, _ in net.named_modules()] == [
        "", "embed", "block", "block.proj", "head", "head.0", "head.1", "head.2"]
    assert list(net.children()) == [net.embed, net.block, net.head]
    assert next(iter(net.modules())) is net
    assert [n for n, _ in net.named_parameters(recurse=False)] == ["offset"]
    assert [n for n, _ in net.block.named_parameters(prefix="x")] == [
        "x.scale", "x.proj.weight", "x.proj.bias"]
    assert net.get_submodule("head.2") is net.head[2]
    with pytest.raises(AttributeError, match="nope"):
        net.get_submodule("head.nope")


def test_attribute_access_reassignment_and_deletion():
    net = Net()
    assert net.block.proj.weight is net.block.proj._parameters["weight"]
    new = nn.Parameter(np.zeros((4, 3), dtype=np.float32))
    net.block.proj.weight = new
    assert net.block.proj.weight is new
    # reassigning keeps the original registration slot
    assert [n for n, _ in net.named_parameters()] == NET_PARAMS
    with pytest.raises(TypeError, match="Parameter or None"):
        net.block.proj.weight = tr.Tensor(np.zeros((4, 3)))
    with pytest.raises(TypeError, match="Module or None"):
        net.head = 3
    net.block.proj.bias = None
    assert net.block.proj.bias is None
    assert "block.proj.bias" not in net.state_dict()
    del net.offset
    assert "offset" not in dict(net.named_parameters())
    with pytest.raises(AttributeError):
        net.offset
    assert "embed" in dir(net)


def test_plain_attribute_replaced_by_parameter_and_back():
    m = nn.Module()
    m.w = 3
    m.w = nn.Parameter(np.ones(2))
    assert [n for n, _ in m.named_parameters()] == ["w"]
    m.plain = [1, 2]
    assert m.plain == [1, 2] and "plain" not in m.state_dict()


def test_assigning_before_init_is_a_clear_error():
    class Bad(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(np.ones(1))

    with pytest.raises(AttributeError, match="super\\(\\).__init__"):
        Bad()


def test_bad_names_are_refused():
    m = nn.Module()
    with pytest.raises(KeyError, match="'.'"):
        m.register_parameter("a.b", nn.Parameter(np.ones(1)))
    with pytest.raises(TypeError, match="Parameter"):
        m.register_parameter("a", tr.Tensor(np.ones(1)))
    with pytest.raises(TypeError, match="not a Module"):
        m.add_module("a", 3)
    m.x = 1
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("x", np.ones(1))


def test_shared_parameter_appears_once():
    a, b = nn.Linear(3, 3, generator=0), nn.Linear(3, 3, generator=1)
    b.weight = a.weight
    model = nn.Sequential(a, b)
    names = [n for n, _ in model.named_parameters()]
    assert names == ["0.weight", "0.bias", "1.bias"]
    assert len(list(model.parameters())) == 3
    assert model.num_parameters() == 9 + 3 + 3
    # as in torch, the state dict has every key (the tied values twice)
    assert list(model.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias"]
    # the weight is used twice: its gradient is the sum of both uses
    x = tr.Tensor(np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32))
    model(x).sum().backward()
    assert a.weight.grad.shape == (3, 3)


def test_shared_module_listed_once():
    lin = nn.Linear(2, 2, generator=0)
    model = nn.Sequential(lin, nn.Tanh(), lin)
    assert [n for n, _ in model.named_modules()] == ["", "0", "1"]
    assert len(list(model.parameters())) == 2


class SharedNet(nn.Module):
    """One Linear registered under two names, and a buffer-holding block inside a Sequential
    that holds the same Linear twice."""

    def __init__(self):
        super().__init__()
        lin = nn.Linear(2, 2, generator=0)
        self.a = lin
        self.b = lin
        self.seq = nn.Sequential(lin, nn.Tanh(), lin)


def test_state_dict_lists_a_shared_module_under_every_name():
    """state_dict used to list a sub-module registered under two names once (under its first
    name), so a checkpoint of the same layout from torch failed a strict load."""
    net = SharedNet()
    assert list(net.state_dict()) == [
        "a.weight", "a.bias", "b.weight", "b.bias",
        "seq.0.weight", "seq.0.bias", "seq.2.weight", "seq.2.bias"]
    assert [n for n, _ in net.named_parameters()] == ["a.weight", "a.bias"]  # still once
    sd = net.state_dict(keep_vars=True)
    assert sd["a.weight"] is sd["b.weight"] is sd["seq.2.weight"] is net.a.weight


def test_load_state_dict_with_shared_module_keys():
    net, other = SharedNet(), SharedNet()
    with tr.no_grad():
        other.a.weight.copy_(np.arange(4.0).reshape(2, 2))
    weight = net.a.weight
    assert tuple(net.load_state_dict(other.state_dict())) == ([], [])
    assert net.a.weight is weight and net.b is net.a  # loaded into the one shared module
    np.testing.assert_array_equal(net.b.weight.numpy(), np.arange(4.0).reshape(2, 2))
    # the same values in another dtype compare equal after conversion
    sd = other.state_dict()
    sd["b.weight"] = sd["b.weight"].astype(np.float64)
    net.load_state_dict(sd)
    # one key of a shared tensor is enough without strict; strict names the others missing
    only_a = {k: v for k, v in other.state_dict().items() if k.startswith("a.")}
    result = net.load_state_dict(only_a, strict=False)
    assert result.missing_keys == ["b.weight", "b.bias", "seq.0.weight", "seq.0.bias",
                                   "seq.2.weight", "seq.2.bias"]
    with pytest.raises(RuntimeError, match="missing key.*'b.weight'"):
        net.load_state_dict(only_a)


@pytest.mark.parametrize("strict", [True, False])
def test_shared_keys_with_different_values_are_an_error(strict):
    """torch copies the keys of a shared tensor in order (the last wins, silently); here the
    load is refused, naming both keys, and nothing is written."""
    net = SharedNet()
    before = {k: v.copy() for k, v in net.state_dict().items()}
    sd = net.state_dict()
    sd["seq.2.bias"] = sd["seq.2.bias"] + 1.0
    with pytest.raises(RuntimeError, match=r"(?s)nothing was loaded.*'a.bias' and 'seq.2.bias' "
                       r"name the same shared parameter but hold different values"):
        net.load_state_dict(sd, strict=strict)
    for key, value in net.state_dict().items():
        np.testing.assert_array_equal(value, before[key])
    # the same for a tied parameter (shared between two modules, not a shared module)
    tied = nn.Sequential(nn.Linear(3, 3, generator=0), nn.Linear(3, 3, generator=1))
    tied[1].weight = tied[0].weight
    sd = tied.state_dict()
    sd["1.weight"] = np.zeros((3, 3), np.float32)
    with pytest.raises(RuntimeError, match="'0.weight' and '1.weight' name the same shared "
                                           "parameter"):
        tied.load_state_dict(sd)


def test_shared_buffer_keys_compare_nan_equal():
    net = nn.Module()
    block = nn.Module()
    block.register_buffer("stat", np.array([np.nan, 1.0]))
    net.x, net.y = block, block
    assert list(net.state_dict()) == ["x.stat", "y.stat"]
    net.load_state_dict({"x.stat": np.array([np.nan, 2.0]), "y.stat": np.array([np.nan, 2.0])})
    np.testing.assert_array_equal(block.stat.numpy(), [np.nan, 2.0])
    with pytest.raises(RuntimeError, match="same shared buffer"):
        net.load_state_dict({"x.stat": np.array([np.nan, 2.0]), "y.stat": np.array([0.0, 2.0])})


def test_state_dict_of_a_module_cycle_is_a_clear_error():
    outer, inner = nn.Module(), nn.Module()
    inner.w = nn.Parameter(np.ones(1))
    outer.inner = inner
    inner.back = outer
    with pytest.raises(RuntimeError, match="sub-module 'inner.back' is the root module, which "
                                           "contains it"):
        outer.state_dict()
    assert [n for n, _ in outer.named_parameters()] == ["inner.w"]
    root = nn.Module()
    root.body = outer  # the cycle below the root: named by the module it comes back to
    with pytest.raises(RuntimeError, match="sub-module 'body.inner.back' is the module 'body'"):
        root.state_dict()


def test_shared_module_state_dict_matches_torch():
    torch = pytest.importorskip("torch")

    class TNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            lin = torch.nn.Linear(2, 2)
            self.a = lin
            self.b = lin
            self.seq = torch.nn.Sequential(lin, torch.nn.Tanh(), lin)

    t, o = TNet(), SharedNet()
    assert list(o.state_dict()) == list(t.state_dict())
    assert [n for n, _ in o.named_parameters()] == [n for n, _ in t.named_parameters()]
    result = o.load_state_dict({k: v.detach().numpy() for k, v in t.state_dict().items()})
    assert tuple(result) == ([], [])
    np.testing.assert_array_equal(o.b.weight.numpy(), t.a.weight.detach().numpy())
    # and back: our state dict loads strictly into torch
    t2 = TNet()
    t2.load_state_dict({k: torch.from_numpy(v) for k, v in o.state_dict().items()})
    np.testing.assert_array_equal(t2.seq[2].bias.detach().numpy(), o.a.bias.numpy())
    seq, tseq = nn.Sequential(nn.Linear(2, 2)), torch.nn.Sequential(torch.nn.Linear(2, 2))
    seq.append(seq[0])
    tseq.append(tseq[0])
    assert list(seq.state_dict()) == list(tseq.state_dict())
    seq.load_state_dict({k: v.detach().numpy() for k, v in tseq.state_dict().items()})


def test_deep_nesting_does_not_recurse():
    model = nn.Linear(1, 1, generator=0)
    for _ in range(3000):
        model = nn.Sequential(model)
    assert len(list(model.parameters())) == 2
    assert len(model.state_dict()) == 2


# ------------------------------------------------------------------------- buffers
def test_buffers_are_state_but_not_parameters():
    net = Net()
    assert all(not isinstance(b, nn.Parameter) for b in net.buffers())
    assert all(not b.requires_grad for b in net.buffers())
    assert net.block.steps.dtype == np.int64
    net.block.register_buffer("scratch", np.ones(2), persistent=False)
    net.block.register_buffer("absent", None)
    sd = net.state_dict()
    assert "block.scratch" not in sd and "block.absent" not in sd
    assert "block.scratch" in dict(net.named_buffers())
    net.block.running = np.full(4, 2.0, dtype=np.float32)  # assigning to a buffer name
    assert isinstance(net.block.running, tr.Tensor)
    np.testing.assert_array_equal(net.state_dict()["block.running"], np.full(4, 2.0))


# ------------------------------------------------------------------------- state dicts
def test_state_dict_values_are_copies():
    net = Net()
    sd = net.state_dict()
    assert all(isinstance(v, np.ndarray) for v in sd.values())
    sd["embed.weight"][...] = 99.0
    assert not np.any(net.embed.weight.numpy() == 99.0)
    kept = net.state_dict(keep_vars=True)
    assert kept["embed.weight"] is net.embed.weight


@given(seed=st.integers(0, 2 ** 31 - 1))
def test_state_dict_round_trip_gives_identical_outputs(seed):
    src, dst = Net(seed), Net(seed + 12345)
    src.block.steps = np.array(seed % 97)
    assert not np.array_equal(src(IDS).numpy(), dst(IDS).numpy())
    result = dst.load_state_dict(src.state_dict())
    assert result == ([], []) and result.missing_keys == [] and result.unexpected_keys == []
    np.testing.assert_array_equal(dst(IDS).numpy(), src(IDS).numpy())
    for key, value in src.state_dict().items():
        assert dst.state_dict()[key].tobytes() == value.tobytes(), key
    assert int(dst.block.steps.item()) == seed % 97


def test_load_keeps_parameter_identity_and_dtype():
    src = Net(1, dtype=np.float64)
    dst = Net(2)  # float32
    before = {n: p for n, p in dst.named_parameters()}
    versions = {n: p._version.value for n, p in dst.named_parameters()}
    dst.load_state_dict(src.state_dict())
    for n, p in dst.named_parameters():
        assert p is before[n]
        assert p.dtype == np.float32
        assert p._version.value > versions[n]  # an in-place write: stale graphs must notice
    np.testing.assert_array_equal(dst.embed.weight.numpy(),
                                  src.embed.weight.numpy().astype(np.float32))


def test_load_accepts_tensors():
    src, dst = Net(1), Net(2)
    sd = {k: tr.Tensor(v) for k, v in src.state_dict().items()}
    dst.load_state_dict(sd)
    np.testing.assert_array_equal(dst(IDS).numpy(), src(IDS).numpy())


def test_load_into_a_stale_graph_is_detected():
    lin = nn.Linear(3, 2, generator=0)
    x = tr.Tensor(np.ones((1, 3), dtype=np.float32), requires_grad=True)
    y = lin(x)
    lin.load_state_dict(nn.Linear(3, 2, generator=1).state_dict())
    with pytest.raises(RuntimeError, match="modified in place"):
        y.sum().backward()


def test_strict_missing_and_unexpected_keys_are_named():
    dst = Net(2)
    before = dst.state_dict()
    sd = Net(1).state_dict()
    del sd["head.0.bias"], sd["block.steps"]
    sd["extra.weight"] = np.zeros(3, dtype=np.float32)
    with pytest.raises(RuntimeError) as info:
        dst.load_state_dict(sd)
    msg = str(info.value)
    assert "missing" in msg and "'head.0.bias'" in msg and "'block.steps'" in msg
    assert "unexpected" in msg and "'extra.weight'" in msg
    # nothing was loaded
    for k, v in dst.state_dict().items():
        np.testing.assert_array_equal(v, before[k])


def test_non_strict_returns_the_incompatible_keys_and_loads_the_rest():
    dst = Net(2)
    src = Net(1)
    sd = src.state_dict()
    del sd["offset"]
    sd["unused"] = np.zeros(1)
    result = dst.load_state_dict(sd, strict=False)
    assert isinstance(result, nn.IncompatibleKeys)
    assert result.missing_keys == ["offset"] and result.unexpected_keys == ["unused"]
    np.testing.assert_array_equal(dst.embed.weight.numpy(), src.embed.weight.numpy())


@pytest.mark.parametrize("strict", [True, False])
def test_shape_mismatch_names_the_key_and_both_shapes(strict):
    dst = Net(2)
    before = dst.state_dict()
    sd = Net(1).state_dict()
    sd["head.2.weight"] = np.zeros((3, 5), dtype=np.float32)
    with pytest.raises(RuntimeError) as info:
        dst.load_state_dict(sd, strict=strict)
    msg = str(info.value)
    assert "'head.2.weight'" in msg and "(3, 5)" in msg and "(2, 5)" in msg
    for k, v in dst.state_dict().items():  # atomic: nothing was loaded
        np.testing.assert_array_equal(v, before[k])


def test_load_refuses_lossy_kind_changes():
    dst = Net()
    sd = dst.state_dict()
    sd["block.steps"] = np.array(2.5)  # float into an int64 buffer would truncate
    with pytest.raises(RuntimeError, match="'block.steps'.*float64.*int64"):
        dst.load_state_dict(sd)
    sd["block.steps"] = np.array(3, dtype=np.int32)  # within the kind: fine
    sd["offset"] = np.array([1, 2])  # int values into a float parameter: fine
    dst.load_state_dict(sd)
    assert dst.block.steps.dtype == np.int64 and dst.block.steps.item() == 3
    np.testing.assert_array_equal(dst.offset.numpy(), np.array([1.0, 2.0], dtype=np.float32))


def test_load_refuses_non_arrays():
    dst = Net()
    sd = dst.state_dict()
    sd["offset"] = "zeros"
    with pytest.raises(TypeError, match="offset"):
        dst.load_state_dict(sd)
    sd["offset"] = np.array(["a", "b"])
    with pytest.raises(TypeError, match="non-numeric"):
        dst.load_state_dict(sd)
    with pytest.raises(TypeError, match="mapping"):
        dst.load_state_dict([("offset", np.zeros(2))])


def test_deepcopy_gives_an_independent_model():
    net = Net()
    twin = copy.deepcopy(net)
    np.testing.assert_array_equal(twin(IDS).numpy(), net(IDS).numpy())
    with tr.no_grad():
        twin.offset.add_(1.0)
    assert not np.array_equal(twin(IDS).numpy(), net(IDS).numpy())
    assert isinstance(twin.offset, nn.Parameter)


# ------------------------------------------------------------------------- modes, dtypes
def test_train_and_eval_recurse():
    net = Net()
    assert all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    net.head.train(False)
    assert net.training and not net.head.training and not net.head[0].training
    with pytest.raises(TypeError, match="bool"):
        net.train("no")


def test_train_accepts_numpy_bools_and_names_refused_types():
    """train(np.bool_(False)) was refused with "mode must be a bool, got bool" (NumPy 2 calls
    its bool type ``bool``); it is a bool, stored as a Python one."""
    net = Net()
    assert net.train(np.bool_(False)) is net
    assert all(m.training is False for m in net.modules())
    net.train(np.bool_(True))
    assert all(m.training is True for m in net.modules())
    for mode, kind in (("no", "str"), (1, "int"), (None, "NoneType"),
                       (np.int64(0), "numpy.int64")):
        with pytest.raises(TypeError, match=re.escape(
                f"train(mode): mode must be a bool, got {mode!r} ({kind})")):
            net.train(mode)
        assert all(m.training is True for m in net.modules())


def test_to_float64_keeps_identity_and_converts_grads_and_float_buffers():
    net = Net()
    net(IDS).sum().backward()
    params = {n: p for n, p in net.named_parameters()}
    expected = {n: p.numpy().astype(np.float64) for n, p in params.items()}
    assert net.to(np.float64) is net
    for n, p in net.named_parameters():
        assert p is params[n] and p.dtype == np.float64
        assert p.grad.dtype == np.float64
        np.testing.assert_array_equal(p.numpy(), expected[n])
    assert net.block.running.dtype == np.float64
    assert net.block.steps.dtype == np.int64  # integer buffers keep their dtype
    assert net(IDS).dtype == np.float64
    net.float()
    assert all(p.dtype == np.float32 for p in net.parameters())
    net.double()
    assert all(p.dtype == np.float64 for p in net.parameters())
    net.to(dtype=np.float32)
    assert all(p.dtype == np.float32 for p in net.parameters())


def test_to_device():
    net = Net()
    assert net.to("cpu") is net
    with pytest.raises(ValueError, match="unknown device 'gpu'"):
        net.to("gpu")
    with pytest.raises(TypeError, match="floating-point"):
        net.to(np.int32)


def test_zero_grad_apply_requires_grad():
    net = Net()
    net(IDS).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(not np.any(p.grad) for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())

    visited = []
    assert net.apply(lambda m: visited.append(type(m).__name__)) is net
    assert visited == ["Embedding", "Linear", "Block", "Linear", "Tanh", "Linear",
                       "Sequential", "Net"]
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    assert net.num_parameters(trainable_only=True) == 0
    assert net.num_parameters() == 7 * 3 + (4 * 3 + 4 + 4) + (5 * 4 + 5) + (2 * 5 + 2) + 2


def test_forward_not_implemented_names_the_class():
    class Empty(nn.Module):
        pass

    with pytest.raises(NotImplementedError, match="Empty"):
        Empty()(1)


# ------------------------------------------------------------------------- printing
def test_repr_is_nested_with_parameter_counts():
    text = repr(Net())
    lines = text.split("\n")
    assert lines[0] == f"Net(  # {Net().num_parameters():,} parameters"
    assert "  (embed): Embedding(7, 3)  # 21 parameters" in lines
    assert "  (block): Block(  # 20 parameters" in lines
    assert "    (proj): Linear(in_features=3, out_features=4, bias=True)  # 16 parameters" \
        in lines
    assert "    (1): Tanh()" in lines
    assert lines[-1] == ")"
    one = nn.Module()
    one.p = nn.Parameter(np.ones(1))
    assert repr(one) == "Module()  # 1 parameter"
    big = nn.Linear(1000, 1000, generator=0)
    assert repr(big).endswith("# 1,001,000 parameters")


def test_multiline_extra_repr():
    class Two(nn.Module):
        def extra_repr(self):
            return "a=1\nb=2"

    assert repr(Two()) == "Two(\n  a=1\n  b=2\n)"


def test_repr_matches_torch_apart_from_the_counts():
    torch = pytest.importorskip("torch")
    ours = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Sequential(nn.Embedding(5, 2,
                         padding_idx=1), nn.ReLU()), nn.Sigmoid(), nn.Identity())
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Sequential(
        torch.nn.Embedding(5, 2, padding_idx=1), torch.nn.ReLU()), torch.nn.Sigmoid(),
        torch.nn.Identity())
    stripped = "\n".join(line.split("  #")[0] for line in repr(ours).split("\n"))
    assert stripped == repr(theirs)


def test_state_dict_keys_and_shared_parameters_match_torch():
    torch = pytest.importorskip("torch")

    class TNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(3, 3)
            self.b = torch.nn.Linear(3, 3)
            self.b.weight = self.a.weight
            self.register_buffer("count", torch.zeros(()))

    class ONet(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 3)
            self.b = nn.Linear(3, 3)
            self.b.weight = self.a.weight
            self.register_buffer("count", np.zeros(()))

    t, o = TNet(), ONet()
    assert list(o.state_dict()) == list(t.state_dict())
    assert [n for n, _ in o.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert [n for n, _ in o.named_modules()] == [n for n, _ in t.named_modules()]
    result = o.load_state_dict({k: v.numpy() for k, v in t.state_dict().items()})
    assert tuple(result) == tuple(t.load_state_dict(t.state_dict()))


def test_sequential_from_ordered_dict():
    model = nn.Sequential(OrderedDict([("enc", nn.Linear(2, 3)), ("act", nn.ReLU())]))
    assert list(model.state_dict()) == ["enc.weight", "enc.bias"]
    assert model[0] is model.enc
