"""tr.save / tr.load: exact round trips, refusal of unsafe or foreign files, atomic writes."""
from __future__ import annotations

import os
import pickle
import stat
import sys
import zipfile
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn import io as trio
from tinygrad_rnn import nn

DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int32, np.int64, np.uint8,
          np.uint64, np.bool_, np.complex64]


class Sentinel:
    """Unpickling this creates the file at ``path`` (stands in for arbitrary code)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def assert_same(a, b, where="obj"):
    """Exact equality: same types, same keys in the same order, arrays bit for bit."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, tr.Tensor):
        assert a.requires_grad == b.requires_grad and a.device == b.device, where
        assert a.is_leaf and b.is_leaf, where
        assert_same(a.numpy(), b.numpy(), where)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert a.tobytes() == b.tobytes(), where
    elif isinstance(a, np.generic):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), where
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, float):
        assert repr(a) == repr(b), where  # nan == nan, -0.0 != 0.0
    else:
        assert a == b, where


@st.composite
def raw_arrays(draw):
    """Arrays of any bit pattern (NaN payloads, -0.0, infinities, subnormals)."""
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = tuple(draw(st.lists(st.integers(0, 4), max_size=3)))
    n = int(np.prod(shape))
    if dtype == np.bool_:
        data = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    else:
        raw = draw(st.binary(min_size=n * dtype.itemsize, max_size=n * dtype.itemsize))
        data = np.frombuffer(raw, dtype=dtype).copy()
    arr = data.reshape(shape)
    if draw(st.booleans()) and arr.ndim >= 2:
        arr = np.asfortranarray(arr)
    return arr


NAN_PAYLOADS = OrderedDict([
    ("nan32", np.array([0x7FC00001, 0xFFC01234, 0x7F800001], dtype=np.uint32).view(np.float32)),
    ("nan64", np.array([0x7FF8000000000ABC, 0xFFF0000000000001],
                       dtype=np.uint64).view(np.float64)),
    ("neg_zero", np.array([-0.0, 0.0, -0.0], dtype=np.float64)),
    ("neg_zero32", np.array(-0.0, dtype=np.float32)),
    ("ints", np.array([-(2 ** 63), 2 ** 63 - 1], dtype=np.int64)),
])


@given(state=st.dictionaries(st.text(max_size=12), raw_arrays(), max_size=6))
@example(state=NAN_PAYLOADS)
@example(state={"a/b": np.zeros((0, 3)), "": np.ones(2), "encoder.weight": np.eye(2)})
def test_round_trip_is_bit_exact(state, tmp_path_factory):
    path = tmp_path_factory.mktemp("rt") / "ckpt.npz"
    tr.save(state, path)
    loaded = tr.load(path)
    assert_same(state, loaded, "state")


def test_round_trip_of_a_model_gives_identical_outputs(tmp_path):
    src = nn.Sequential(nn.Embedding(9, 4, generator=0), nn.Linear(4, 3, generator=1),
                        nn.Tanh())
    src.register_buffer("count", np.array(5, dtype=np.int64))
    dst = nn.Sequential(nn.Embedding(9, 4, generator=7), nn.Linear(4, 3, generator=8),
                        nn.Tanh())
    dst.register_buffer("count", np.array(0, dtype=np.int64))
    path = tmp_path / "model.npz"
    tr.save(src.state_dict(), path)
    loaded = tr.load(path)
    assert isinstance(loaded, OrderedDict) and list(loaded) == list(src.state_dict())
    dst.load_state_dict(loaded)
    ids = np.array([[1, 8, 3]])
    np.testing.assert_array_equal(dst(ids).numpy(), src(ids).numpy())
    assert dst.count.item() == 5


def test_tensors_and_parameters_load_as_tensors_and_parameters(tmp_path):
    """As torch: a Tensor comes back as a Tensor, a Parameter as a Parameter, with dtype,
    shape, bytes and requires_grad; NumPy arrays stay NumPy arrays."""
    t = tr.Tensor(np.arange(4.0), requires_grad=True)
    p = nn.Parameter(np.ones((2, 2), dtype=np.float32))
    frozen = nn.Parameter(np.zeros(3), requires_grad=False)
    ints = tr.tensor(np.arange(3, dtype=np.int64))
    flags = tr.tensor(np.array([True, False]))
    obj = {"t": t, "p": p, "frozen": frozen, "ints": ints, "flags": flags, "a": np.ones(2)}
    tr.save(obj, tmp_path / "t.npz")
    loaded = tr.load(tmp_path / "t.npz")
    assert_same(obj, loaded)
    assert type(loaded["p"]) is nn.Parameter and loaded["p"].dtype == np.float32
    assert loaded["ints"].dtype == np.int64 and not loaded["ints"].requires_grad
    assert loaded["t"] is not t and not np.shares_memory(loaded["t"].numpy(), t.numpy())


@pytest.mark.parametrize("reduce", [lambda t: t.sum(), lambda t: t.mean(),
                                    lambda t: (t * 2.0).sum()])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_zero_d_tensor_from_a_reduction_round_trips_as_a_0d_tensor(tmp_path, reduce, dtype):
    """A loss (a reduction's 0-d result, with or without a graph) loads as a 0-d leaf Tensor
    with its dtype, value and requires_grad (as torch.save of a non-leaf gives a leaf)."""
    t = tr.tensor(np.arange(1.0, 4.0, dtype=dtype), requires_grad=True)
    loss = reduce(t)
    with tr.no_grad():
        detached = reduce(t)
    tr.save({"loss": loss, "detached": detached}, tmp_path / "loss.npz")
    loaded = tr.load(tmp_path / "loss.npz")
    for key, value in (("loss", loss), ("detached", detached)):
        assert type(loaded[key]) is tr.Tensor, key
        assert loaded[key].dtype == dtype and loaded[key].shape == (), key
        assert loaded[key].is_leaf and loaded[key].requires_grad == value.requires_grad, key
        assert loaded[key].numpy().tobytes() == np.asarray(value.numpy()).tobytes(), key


class ScalarTensorLike:
    """A Tensor-like whose .numpy() returns a NumPy scalar, not a 0-d array."""

    def numpy(self):
        return np.float32(2.5)


def test_a_tensor_like_whose_numpy_gives_a_scalar_is_saved_as_a_0d_array(tmp_path):
    tr.save({"x": ScalarTensorLike()}, tmp_path / "s.npz")
    assert_same(tr.load(tmp_path / "s.npz")["x"], np.array(2.5, dtype=np.float32))


OPTIMIZER_LIKE = {
    "state": {
        0: {"step": np.array(3.0, dtype=np.float32), "exp_avg": np.arange(4.0).reshape(2, 2),
            "exp_avg_sq": np.full((2, 2), 1e-8)},
        1: {"step": np.array(3.0, dtype=np.float32), "momentum_buffer": None},
    },
    "param_groups": [
        {"lr": 0.001, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0,
         "amsgrad": False, "maximize": False, "foreach": None, "params": [0, 1],
         "name": "encoder", "big": 2 ** 80, "odd": [float("nan"), -0.0, float("inf")],
         "np_scalar": np.float64(0.5), "nested": OrderedDict([("b", 1), ("a", [()])])},
    ],
}


def test_nested_optimizer_like_dict_round_trips(tmp_path):
    tr.save(OPTIMIZER_LIKE, tmp_path / "opt.npz")
    assert_same(OPTIMIZER_LIKE, tr.load(tmp_path / "opt.npz"))


def test_real_optimizer_state_round_trips(tmp_path):
    model = nn.Linear(3, 2, dtype=np.float64, generator=0)
    opt = tr.optim.Adam(model.parameters(), lr=0.01)
    x = tr.Tensor(np.random.default_rng(0).standard_normal((4, 3)))
    for _ in range(2):
        opt.zero_grad()
        (model(x) * model(x)).sum().backward()
        opt.step()
    state = opt.state_dict()
    tr.save({"model": model.state_dict(), "optimizer": state}, tmp_path / "train.npz")
    loaded = tr.load(tmp_path / "train.npz")
    assert_same(state, loaded["optimizer"])
    fresh = nn.Linear(3, 2, dtype=np.float64, generator=1)
    fresh.load_state_dict(loaded["model"])
    fresh_opt = tr.optim.Adam(fresh.parameters(), lr=0.5)
    fresh_opt.load_state_dict(loaded["optimizer"])
    for m, o in ((model, opt), (fresh, fresh_opt)):  # both continue identically
        o.zero_grad()
        (m(x) * m(x)).sum().backward()
        o.step()
    np.testing.assert_array_equal(fresh.weight.numpy(), model.weight.numpy())


def test_compressed_and_any_suffix(tmp_path):
    state = {"w": np.zeros((50, 50))}
    tr.save(state, tmp_path / "small.ckpt", compress=True)
    assert os.path.exists(tmp_path / "small.ckpt")  # the name is used as given
    assert not os.path.exists(tmp_path / "small.ckpt.npz")
    assert_same(state, tr.load(str(tmp_path / "small.ckpt")))
    assert os.path.getsize(tmp_path / "small.ckpt") < 50 * 50 * 8 / 10


# ------------------------------------------------------------------------- refused at save
@pytest.mark.parametrize("value, dtype", [
    (np.array([1, "a"], dtype=object), "object"),
    (np.array(["x", "yz"]), "<U2"),
    (np.array([b"x"]), "|S1"),
    (np.zeros(2, dtype=[("a", "f4")]), "[('a', '<f4')]"),
])
def test_non_numeric_arrays_are_refused_at_save(tmp_path, value, dtype):
    path = tmp_path / "bad.npz"
    with pytest.raises(ValueError) as info:
        tr.save({"good": np.ones(2), "layer.bad": value}, path)
    assert "'layer.bad'" in str(info.value) and dtype in str(info.value)
    assert not os.path.exists(path) and os.listdir(tmp_path) == []


def test_nested_refusals_name_the_location(tmp_path):
    with pytest.raises(ValueError, match=r"\['state'\]\[0\]\['buf'\].*object"):
        tr.save({"state": {0: {"buf": np.array([None])}}}, tmp_path / "x.npz")
    with pytest.raises(TypeError, match=r"keys must be str or int; got float key 0.5"):
        tr.save({0.5: np.ones(1)}, tmp_path / "x.npz")
    with pytest.raises(TypeError, match=r"keys must be str or int; got tuple key .* \['a'\]"):
        tr.save({"a": {(1, 2): np.ones(1)}}, tmp_path / "x.npz")
    with pytest.raises(TypeError, match="set"):
        tr.save({"a": {1, 2}}, tmp_path / "x.npz")
    assert os.listdir(tmp_path) == []


def test_missing_paths():
    with pytest.raises(FileNotFoundError, match="nowhere.npz"):
        tr.load("/nonexistent-dir/nowhere.npz")
    with pytest.raises(FileNotFoundError, match="nonexistent-dir"):
        tr.save({"a": np.ones(1)}, "/nonexistent-dir/x.npz")


def test_save_refuses_a_directory_path_before_writing_anything(tmp_path):
    (tmp_path / "sub").mkdir()
    for target in (tmp_path, str(tmp_path) + os.sep, tmp_path / "sub",
                   str(tmp_path / "new") + os.sep):
        with pytest.raises(IsADirectoryError, match="save: path .* is a directory"):
            tr.save({"a": np.ones(1)}, target)
    assert os.listdir(tmp_path) == ["sub"] and os.listdir(tmp_path / "sub") == []


def test_save_refuses_an_empty_or_non_path_argument(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="save: path is empty"):
        tr.save({"a": np.ones(1)}, "")
    for bad in (None, 3):
        with pytest.raises(TypeError, match=f"save: f must be a path .str or path-like. or a "
                                            f"binary file object opened for writing, got "
                                            f"{type(bad).__name__}"):
            tr.save({"a": np.ones(1)}, bad)
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------------- refused at load
def test_pickle_is_refused_and_never_executed(tmp_path):
    sentinel = tmp_path / "pwned"
    payload = pickle.dumps({"weight": Sentinel(str(sentinel))}, protocol=pickle.HIGHEST_PROTOCOL)
    # the payload is live: unpickling it really would create the file
    probe = tmp_path / "probe"
    pickle.loads(pickle.dumps(Sentinel(str(probe)))).close()
    assert probe.exists()
    for protocol in (0, 2, pickle.HIGHEST_PROTOCOL):
        path = tmp_path / f"evil{protocol}.pt"
        path.write_bytes(pickle.dumps({"w": Sentinel(str(sentinel))}, protocol=protocol))
        with pytest.raises(ValueError, match="pickle|not a tinygrad_rnn checkpoint"):
            tr.load(path)
    (tmp_path / "evil.npz").write_bytes(payload)
    with pytest.raises(ValueError, match="pickle"):
        tr.load(tmp_path / "evil.npz")
    assert not sentinel.exists()


def test_object_array_inside_an_archive_is_refused_and_never_executed(tmp_path):
    sentinel = tmp_path / "pwned"
    good = tmp_path / "good.npz"
    tr.save({"w": np.ones(2)}, good)
    with zipfile.ZipFile(good) as zf:
        manifest = zf.read(trio.MANIFEST + ".npy")
    evil = tmp_path / "evil.npz"
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr(trio.MANIFEST + ".npy", manifest)  # a genuine manifest
        with zf.open("a0.npy", "w") as f:
            np.lib.format.write_array(f, np.array([Sentinel(str(sentinel))], dtype=object),
                                      allow_pickle=True)
    with pytest.raises(ValueError, match="object array"):
        tr.load(evil)
    assert not sentinel.exists()
    npy = tmp_path / "evil.npy"
    np.save(npy, np.array([Sentinel(str(sentinel))], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match=".npy"):
        tr.load(npy)
    assert not sentinel.exists()


def test_torch_checkpoint_is_refused_and_never_executed(tmp_path):
    torch = pytest.importorskip("torch")
    sentinel = tmp_path / "pwned"
    path = tmp_path / "model.pt"
    torch.save({"weight": torch.zeros(2), "evil": Sentinel(str(sentinel))}, path)
    with pytest.raises(ValueError, match="not written by tinygrad_rnn"):
        tr.load(path)
    assert not sentinel.exists()


def test_foreign_files_are_refused(tmp_path):
    np.savez(tmp_path / "plain.npz", w=np.ones(3))
    with pytest.raises(ValueError, match="not written by tinygrad_rnn"):
        tr.load(tmp_path / "plain.npz")
    np.save(tmp_path / "plain.npy", np.ones(3))
    with pytest.raises(ValueError, match=".npy"):
        tr.load(tmp_path / "plain.npy")
    (tmp_path / "text.txt").write_text("hello")
    with pytest.raises(ValueError, match="not a tinygrad_rnn checkpoint"):
        tr.load(tmp_path / "text.txt")
    (tmp_path / "empty.npz").write_bytes(b"")
    with pytest.raises(ValueError, match="empty"):
        tr.load(tmp_path / "empty.npz")


def _rewrite_manifest(src, dst, manifest: bytes, extra: dict | None = None):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for name in zin.namelist():
            if name == trio.MANIFEST + ".npy":
                with zout.open(name, "w") as f:
                    np.lib.format.write_array(f, np.frombuffer(manifest, dtype=np.uint8))
            else:
                zout.writestr(name, zin.read(name))
        for name, arr in (extra or {}).items():
            with zout.open(name + ".npy", "w") as f:
                np.lib.format.write_array(f, arr)


def test_manifest_checks(tmp_path):
    good = tmp_path / "good.npz"
    tr.save({"w": np.ones(2)}, good)
    cases = {
        b'{"format": "someone.else", "version": 1, "tree": {}}': "not a tinygrad_rnn",
        b'{"format": "tinygrad_rnn.checkpoint", "version": 99, "tree": {}}': "version 99",
        b'{"format": "tinygrad_rnn.checkpoint", "version": 1, "tree": {"t": "zzz"}}':
            "unknown entry type",
        b'{"format": "tinygrad_rnn.checkpoint", "version": 1, "tree": {"t": "array", '
        b'"ref": "a7"}}': "missing entry",
        b"{not json": "unreadable manifest",
    }
    for i, (manifest, message) in enumerate(cases.items()):
        bad = tmp_path / f"bad{i}.npz"
        _rewrite_manifest(good, bad, manifest)
        with pytest.raises(ValueError, match=message):
            tr.load(bad)
    with zipfile.ZipFile(good) as zf:
        manifest = np.lib.format.read_array(zf.open(trio.MANIFEST + ".npy")).tobytes()
    smuggled = tmp_path / "smuggled.npz"
    _rewrite_manifest(good, smuggled, manifest, extra={"a1": np.zeros(1)})
    with pytest.raises(ValueError, match="does not list"):
        tr.load(smuggled)


def test_truncated_files_are_refused(tmp_path):
    path = tmp_path / "full.npz"
    tr.save({"w": np.arange(1000.0), "b": np.ones(3)}, path)
    data = path.read_bytes()
    for cut in (1, 4, 30, len(data) // 2, len(data) - 22, len(data) - 1):
        bad = tmp_path / f"cut{cut}.npz"
        bad.write_bytes(data[:cut])
        with pytest.raises(ValueError):
            tr.load(bad)


def test_corrupted_array_bytes_are_refused(tmp_path):
    path = tmp_path / "full.npz"
    marker = np.arange(1000.0) + 0.125
    tr.save({"w": marker}, path)
    data = bytearray(path.read_bytes())
    offset = bytes(data).find(marker.tobytes())
    assert offset > 0
    data[offset + 4000] ^= 0x10  # one flipped bit inside the array data
    bad = tmp_path / "flipped.npz"
    bad.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="corrupt"):
        tr.load(bad)


# ------------------------------------------------------------------------- atomic writes
def _previous(tmp_path):
    path = tmp_path / "ckpt.npz"
    tr.save({"old": np.arange(5.0)}, path)
    return path, path.read_bytes()


@pytest.mark.parametrize("exc", [OSError("disk full"), KeyboardInterrupt()])
def test_interrupted_write_leaves_previous_file_and_no_temp_files(tmp_path, monkeypatch, exc):
    path, before = _previous(tmp_path)
    original = np.lib.format.write_array
    calls = []

    def failing_write(fp, array, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:  # manifest and first array written; fail inside the second
            fp.write(b"\x93NUMPY partial bytes of the header")
            raise exc
        return original(fp, array, *args, **kwargs)

    monkeypatch.setattr(np.lib.format, "write_array", failing_write)
    with pytest.raises(type(exc)):
        tr.save({"new": np.ones(1000), "other": np.ones(1000)}, path)
    monkeypatch.undo()
    assert len(calls) == 3
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["ckpt.npz"]
    assert_same(tr.load(path), {"old": np.arange(5.0)})


@pytest.mark.parametrize("target", ["fsync", "replace"])
def test_failure_at_fsync_or_rename_leaves_previous_file(tmp_path, monkeypatch, target):
    path, before = _previous(tmp_path)

    def boom(*args, **kwargs):
        raise OSError(f"{target} failed")

    monkeypatch.setattr(trio.os, target, boom)
    with pytest.raises(OSError, match=target):
        tr.save({"new": np.ones(3)}, path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["ckpt.npz"]


def test_successful_overwrite_replaces_the_file(tmp_path):
    path, before = _previous(tmp_path)
    tr.save({"new": np.ones(3)}, path)
    assert list(tr.load(path)) == ["new"]
    assert sorted(os.listdir(tmp_path)) == ["ckpt.npz"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_new_file_permissions_follow_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        tr.save({"a": np.ones(1)}, tmp_path / "a.npz")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "a.npz").st_mode) == 0o640
    os.chmod(tmp_path / "a.npz", 0o600)
    tr.save({"a": np.zeros(1)}, tmp_path / "a.npz")  # an overwrite keeps the mode
    assert stat.S_IMODE(os.stat(tmp_path / "a.npz").st_mode) == 0o600
