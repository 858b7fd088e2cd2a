"""tr.save / tr.load called as torch.save / torch.load: file objects, every kind of object,
map_location, weights_only and the pickle arguments (decided: refused or ignored, never a
silent difference)."""
from __future__ import annotations

import io
import os
from collections import OrderedDict

import numpy as np
import pytest

import tinygrad_rnn as tr
from tinygrad_rnn import io as trio
from tinygrad_rnn import nn

from test_io import assert_same


def roundtrip(obj, **load_kwargs):
    buffer = io.BytesIO()
    tr.save(obj, buffer)
    buffer.seek(0)
    return tr.load(buffer, **load_kwargs)


# ------------------------------------------------------------------ what can be saved
@pytest.mark.parametrize("obj", [
    tr.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True),
    tr.tensor(np.arange(3, dtype=np.float32)),
    tr.tensor(np.array([1, 2], dtype=np.int32)),
    nn.Parameter(np.ones(2, dtype=np.float64)),
    np.arange(4.0), np.float32(2.5), np.int64(-3),
    3, 2.5, float("nan"), -0.0, True, None, "text", 2 ** 80,
    [1, 2.0, "a", None], (1, (2, [3])), {"a": 1}, OrderedDict([("b", 2), ("a", 1)]),
    {0: np.ones(2), 1: {"step": 3}}, [], (), {},
    {"model": OrderedDict([("w", tr.tensor(np.ones((2, 2))))]), "epoch": 7,
     "losses": [0.5, 0.25], "best": (0.25, None)},
], ids=lambda o: type(o).__name__)
def test_every_kind_of_object_round_trips_with_its_type(obj):
    assert_same(obj, roundtrip(obj))


def test_a_model_state_dict_round_trips_through_a_file_object_and_restores_the_model():
    src = nn.Linear(3, 2, dtype=np.float64, generator=0)
    dst = nn.Linear(3, 2, dtype=np.float64, generator=1)
    state = src.state_dict()
    loaded = roundtrip(state)
    assert_same(state, loaded)
    dst.load_state_dict(loaded)
    x = tr.tensor(np.random.default_rng(0).standard_normal((4, 3)))
    np.testing.assert_array_equal(dst(x).numpy(), src(x).numpy())


@pytest.mark.parametrize("name", ["SGD", "Adam", "RMSprop", "Adagrad", "LBFGS"])
def test_an_optimizer_state_dict_round_trips_and_training_continues_identically(name):
    def make(seed):
        model = nn.Linear(3, 2, dtype=np.float64, generator=seed)
        kwargs = {"lr": 0.1} if name != "LBFGS" else {"lr": 0.5, "history_size": 3}
        if name == "SGD":
            kwargs["momentum"] = 0.9
        return model, getattr(tr.optim, name)(model.parameters(), **kwargs)

    x = tr.tensor(np.random.default_rng(1).standard_normal((5, 3)))

    def train(model, opt, steps):
        for _ in range(steps):
            def closure():
                opt.zero_grad()
                loss = (model(x) * model(x)).mean()
                loss.backward()
                return loss
            opt.step(closure)

    model, opt = make(0)
    train(model, opt, 3)
    buffer = io.BytesIO()
    tr.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, buffer)
    buffer.seek(0)
    ckpt = tr.load(buffer)
    assert_same(opt.state_dict(), ckpt["optimizer"])
    fresh, fresh_opt = make(1)
    fresh.load_state_dict(ckpt["model"])
    fresh_opt.load_state_dict(ckpt["optimizer"])
    train(model, opt, 2)
    train(fresh, fresh_opt, 2)
    np.testing.assert_array_equal(fresh.weight.numpy(), model.weight.numpy())


@pytest.mark.parametrize("obj", [
    nn.Linear(2, 2), {"model": nn.Linear(2, 2)},
    tr.optim.SGD([tr.tensor(np.ones(2), requires_grad=True)], lr=0.1),
])
def test_a_module_or_optimizer_itself_is_refused_with_a_pointer_to_state_dict(obj):
    buffer = io.BytesIO()
    with pytest.raises(TypeError, match=r"save: cannot save the (Linear|SGD) object at .*"
                                        r"never pickles.*state_dict\(\)"):
        tr.save(obj, buffer)
    assert buffer.getvalue() == b""  # nothing written: everything is checked first


# ------------------------------------------------------------------ paths and file objects
def test_real_files_opened_in_binary_mode(tmp_path):
    path = tmp_path / "ckpt.pt"
    obj = {"w": tr.tensor(np.arange(3.0)), "n": 1}
    with open(path, "wb") as f:
        tr.save(obj, f)
        assert not f.closed  # left open, as torch does
    with open(path, "rb") as f:
        assert_same(obj, tr.load(f))
    assert_same(obj, tr.load(path))
    assert_same(obj, tr.load(str(path)))


def test_a_file_object_is_written_and_read_at_its_current_position():
    buffer = io.BytesIO()
    buffer.write(b"header")
    tr.save([np.ones(2)], buffer)
    end = buffer.tell()
    buffer.write(b"")
    buffer.seek(6)
    assert_same([np.ones(2)], tr.load(buffer))
    assert buffer.getvalue()[:6] == b"header" and end == len(buffer.getvalue())


def test_bad_file_objects_are_refused_by_name(tmp_path):
    with pytest.raises(TypeError, match="save: the file object .* is open in text mode"):
        tr.save({"a": 1}, io.StringIO())
    with open(tmp_path / "t.txt", "w") as f:
        with pytest.raises(TypeError, match="save: the file object .*t.txt.* text mode"):
            tr.save({"a": 1}, f)
    (tmp_path / "r.bin").write_bytes(b"")
    with open(tmp_path / "r.bin", "rb") as f:
        with pytest.raises(ValueError, match="save: the file object .* not open for writing"):
            tr.save({"a": 1}, f)
    closed = io.BytesIO()
    closed.close()
    with pytest.raises(ValueError, match="save: the file object .* is closed"):
        tr.save({"a": 1}, closed)
    with pytest.raises(ValueError, match="load: the file object .* is closed"):
        tr.load(closed)
    with pytest.raises(TypeError, match="load: the file object .* text mode"):
        tr.load(io.StringIO("x"))
    with open(tmp_path / "w.bin", "wb") as f:
        with pytest.raises(ValueError, match="load: the file object .* not open for reading"):
            tr.load(f)

    class Pipe(io.RawIOBase):
        def readable(self):
            return True

        def seekable(self):
            return False

    with pytest.raises(ValueError, match=r"load: .* not seekable.*io.BytesIO\(f.read\(\)\)"):
        tr.load(Pipe())
    with pytest.raises(TypeError, match="load: f must be a path .* or a binary file object"):
        tr.load(3)


def test_file_objects_get_the_same_refusals_as_paths():
    with pytest.raises(ValueError, match="load: '<BytesIO>' is empty"):
        tr.load(io.BytesIO())
    with pytest.raises(ValueError, match="pickle"):
        tr.load(io.BytesIO(b"\x80\x04K\x01."))
    bomb = io.BytesIO()
    tr.save({"z": np.zeros(10 ** 6)}, bomb, compress=True)
    bomb.seek(0)
    with pytest.raises(ValueError, match="max_bytes=1000000.*decompression bomb"):
        tr.load(bomb, max_bytes=10 ** 6)
    bomb.seek(0)
    assert tr.load(bomb, max_bytes=None)["z"].shape == (10 ** 6,)


def test_a_failed_write_to_a_file_object_is_not_atomic(tmp_path):
    """Documented: a file object gets what was written before the error (a path would keep
    its previous content)."""
    class Failing(io.BytesIO):
        def write(self, data):
            if self.tell() > 100:
                raise OSError("disk full")
            return super().write(data)

    buffer = Failing()
    with pytest.raises(OSError, match="disk full"):
        tr.save({"a": np.zeros(1000)}, buffer)
    assert 0 < len(buffer.getvalue())
    assert "cannot be atomic" in " ".join(tr.save.__doc__.split())


# ------------------------------------------------------------------ map_location
def on_standin():
    return tr.tensor(np.arange(3.0), device="standin", requires_grad=True)


def test_map_location_none_keeps_the_saved_device_and_a_name_moves_every_tensor():
    obj = {"s": on_standin(), "c": tr.tensor(np.ones(2))}
    loaded = roundtrip(obj)
    assert loaded["s"].device == "standin" and loaded["c"].device == "cpu"
    assert_same(obj, loaded)
    for where in ("cpu", "standin"):
        for given in (where, type("Device", (), {"__str__": lambda self: where})()):
            moved = roundtrip(obj, map_location=given)
            assert moved["s"].device == where and moved["c"].device == where
            assert moved["s"].requires_grad
            np.testing.assert_array_equal(moved["s"].numpy(), np.arange(3.0))


def test_map_location_dict_moves_the_listed_devices_only():
    obj = {"s": on_standin(), "c": tr.tensor(np.ones(2))}
    loaded = roundtrip(obj, map_location={"standin": "cpu"})
    assert loaded["s"].device == "cpu" and loaded["c"].device == "cpu"
    loaded = roundtrip(obj, map_location={"cpu": "standin"})
    assert loaded["s"].device == "standin" and loaded["c"].device == "standin"
    loaded = roundtrip(obj, map_location={"cuda:0": "cpu"})  # nothing saved on cuda
    assert loaded["s"].device == "standin" and loaded["c"].device == "cpu"


def test_numpy_arrays_are_left_alone_by_map_location():
    loaded = roundtrip({"a": np.ones(2)}, map_location="standin")
    assert type(loaded["a"]) is np.ndarray


def test_an_unavailable_saved_device_says_to_pass_map_location(monkeypatch):
    buffer = io.BytesIO()
    tr.save({"s": on_standin()}, buffer)

    def unavailable(device):
        if device == "standin":
            raise RuntimeError("no such device here")
        return np

    monkeypatch.setattr(trio, "module_for_device", unavailable)
    buffer.seek(0)
    with pytest.raises(RuntimeError, match=r"load: the tensor at \['s'\] would load on "
                                           r"'standin'.*no such device.*map_location='cpu'"):
        tr.load(buffer)
    buffer.seek(0)
    assert tr.load(buffer, map_location="cpu")["s"].device == "cpu"


@pytest.mark.parametrize("bad, error, message", [
    ("mps", ValueError, "map_location names the unknown device 'mps'"),
    ("cuda:1", ValueError, "unknown device 'cuda:1'"),
    ({"cuda:0": "tpu"}, ValueError, r"map_location\['cuda:0'\] names the unknown device"),
    ({"xla": "cpu"}, ValueError, "a key of map_location names the unknown device 'xla'"),
    (lambda storage, location: storage, TypeError, "map_location as a function"),
    (3, TypeError, "map_location must be a device name"),
    ({"cpu": None}, TypeError, r"map_location\['cpu'\] must be a device name"),
])
def test_bad_map_locations_are_refused_before_the_file_is_read(tmp_path, bad, error, message):
    with pytest.raises(error, match=f"load: .*{message}"):
        tr.load(tmp_path / "does-not-exist.npz", map_location=bad)


# ------------------------------------------------------------------ torch's other arguments
def test_weights_only_true_or_none_loads_and_false_is_refused():
    for flag in (True, None, np.bool_(True)):
        assert roundtrip({"a": 1}, weights_only=flag) == {"a": 1}
    with pytest.raises(ValueError, match="load: weights_only=False is not supported.*never "
                                         "unpickles"):
        roundtrip({"a": 1}, weights_only=False)
    with pytest.raises(TypeError, match="load: weights_only must be True, False or None"):
        roundtrip({"a": 1}, weights_only="yes")


def test_pickle_arguments_are_refused_or_ignored_as_documented():
    import pickle

    buffer = io.BytesIO()
    with pytest.raises(ValueError, match="save: pickle_module=.* not supported.*never pickles"):
        tr.save({"a": 1}, buffer, pickle_module=pickle)
    with pytest.raises(ValueError, match="load: pickle_module=.* not supported"):
        tr.load(buffer, pickle_module=pickle)
    with pytest.raises(TypeError, match="save: pickle_protocol must be an int"):
        tr.save({"a": 1}, buffer, pickle_protocol="2")
    assert buffer.getvalue() == b""
    for protocol in (2, 4, np.int64(5)):  # accepted and ignored: no pickle is written
        assert_same({"a": [1.5]}, _with_protocol({"a": [1.5]}, protocol))
    with pytest.raises(TypeError, match=r"load: unexpected keyword arguments \(encoding\)"):
        tr.load(buffer, encoding="latin1")
    with pytest.raises(ValueError, match="load: mmap=True is not supported"):
        tr.load(buffer, mmap=True)
    with pytest.raises(TypeError, match="load: mmap must be a bool or None"):
        tr.load(buffer, mmap="r")
    assert roundtrip([1], mmap=False) == [1]


def _with_protocol(obj, protocol):
    buffer = io.BytesIO()
    tr.save(obj, buffer, pickle_protocol=protocol)
    buffer.seek(0)
    return tr.load(buffer)


def test_torch_style_positional_and_keyword_calls(tmp_path):
    """The calls a torch program makes, unchanged."""
    path = os.fspath(tmp_path / "model.pt")
    state = {"w": tr.tensor(np.ones(2), requires_grad=True)}
    tr.save(state, path)
    for loaded in (tr.load(path), tr.load(path, "cpu"), tr.load(path, map_location="cpu"),
                   tr.load(path, weights_only=True),
                   tr.load(path, map_location="cpu", weights_only=True)):
        assert_same(state, loaded)


def test_a_torch_device_is_a_map_location():
    torch = pytest.importorskip("torch")
    loaded = roundtrip({"s": on_standin()}, map_location=torch.device("cpu"))
    assert loaded["s"].device == "cpu"
    with pytest.raises(ValueError, match="unknown device"):
        roundtrip({"s": on_standin()}, map_location=torch.device("meta"))
