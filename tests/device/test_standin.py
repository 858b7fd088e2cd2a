"""The stand-in device's array module: what it refuses (so the device suites can catch a
NumPy call on device data) and what it allows (CuPy's explicit ways back to the host)."""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from tinygrad_rnn import backend, standin
from tinygrad_rnn.standin import StandInArray

HOST = np.arange(6.0).reshape(2, 3)


@pytest.fixture
def dev() -> StandInArray:
    return standin.asarray(HOST)


# ---------------------------------------------------------------- refusals
@pytest.mark.parametrize("convert", [
    np.asarray, np.array, np.ascontiguousarray, lambda a: np.float64(a),
    lambda a: np.zeros((2, 3)).__setitem__(Ellipsis, a),
], ids=["asarray", "array", "ascontiguousarray", "float64", "setitem-into-host"])
def test_no_implicit_conversion_to_numpy(dev, convert):
    with pytest.raises(TypeError, match="Implicit conversion|not allowed"):
        convert(dev)


@pytest.mark.parametrize("call", [
    lambda a: np.exp(a), lambda a: np.add(a, 1.0), lambda a: np.maximum(a, 0),
    lambda a: np.matmul(a, a.T),
], ids=["exp", "add", "maximum", "matmul"])
def test_numpy_ufuncs_refuse_device_data(dev, call):
    with pytest.raises(TypeError, match="does not support ufuncs"):
        call(dev)


@pytest.mark.parametrize("call", [
    lambda a: np.sum(a), lambda a: np.concatenate([a, a]), lambda a: np.where(a > 1, a, 0),
    lambda a: np.linalg.norm(a),
], ids=["sum", "concatenate", "where", "linalg.norm"])
def test_numpy_functions_refuse_device_data(dev, call):
    with pytest.raises(TypeError, match=r"numpy\.\w+ was called on stand-in device data"):
        call(dev)


@pytest.mark.parametrize("call", [
    lambda a: a + HOST, lambda a: HOST + a, lambda a: a * HOST, lambda a: HOST @ a.T,
    lambda a: standin.where(HOST > 1, a, 0.0), lambda a: standin.concatenate([a, HOST]),
    lambda a: a[np.array([0, 1])], lambda a: a.__setitem__(0, HOST[0]),
    lambda a: standin.add.at(a, np.array([0]), 1.0),
], ids=["add", "radd", "mul", "rmatmul", "where", "concatenate", "index", "setitem",
        "add.at"])
def test_host_operands_are_refused(dev, call):
    with pytest.raises(TypeError, match="host numpy.ndarray was mixed with stand-in"):
        call(dev)


def test_no_array_interface_escape_hatch(dev):
    # __getattr__ forwards methods, but never the dunder protocols NumPy would use instead
    for name in ("__array_interface__", "__array_struct__"):
        assert not hasattr(dev, name)


# ---------------------------------------------------------------- what is allowed
def test_asarray_copies_host_data_onto_the_device():
    host = HOST.copy()
    dev = standin.asarray(host)
    host[0, 0] = 99.0
    assert type(dev) is StandInArray
    assert float(dev[0, 0]) == 0.0  # a real copy, as a host-to-GPU transfer is
    assert standin.asarray(dev) is dev  # already on the device: no copy


def test_reductions_and_scalar_indexing_give_0d_device_arrays(dev):
    for value in (dev.sum(), standin.sum(dev), dev[1, 2], standin.max(dev)):
        assert type(value) is StandInArray and value.shape == ()
    with pytest.raises(TypeError):
        np.sqrt(standin.sum(dev))  # what a GPU would refuse too


def test_explicit_ways_back_to_the_host(dev):
    host = dev.get()
    assert type(host) is np.ndarray
    np.testing.assert_array_equal(host, HOST)
    host[0, 0] = 7.0
    assert float(dev[0, 0]) == 0.0  # get() is a copy
    np.testing.assert_array_equal(standin.asnumpy(dev), HOST)
    assert float(dev[1, 1]) == 4.0 and int(dev[1, 1]) == 4 and bool(dev[0, 1])
    assert dev[1, 1].item() == 4.0 and dev.tolist() == HOST.tolist()


def test_arithmetic_equals_numpy_bit_for_bit(dev):
    y = standin.tanh(dev @ dev.T * np.float32(0.5) - 1.0) / 3.0
    np.testing.assert_array_equal(y.get(), np.tanh(HOST @ HOST.T * np.float32(0.5) - 1.0) / 3.0)
    assert y.dtype == np.float64


def test_out_argument_and_in_place_ops_keep_the_object(dev):
    out = standin.empty((2, 3))
    assert standin.multiply(dev, 2.0, out=out) is out
    np.testing.assert_array_equal(out.get(), HOST * 2.0)
    view = out[0]
    view += 1.0  # a view writes through to its base, as on a GPU
    np.testing.assert_array_equal(out.get()[0], HOST[0] * 2.0 + 1.0)


def test_ufunc_at_accumulates_repeated_indices():
    z = standin.zeros(3)
    standin.add.at(z, standin.asarray(np.array([0, 0, 2])), 1.0)
    np.testing.assert_array_equal(z.get(), [2.0, 0.0, 1.0])


def test_copy_deepcopy_and_pickle_round_trip(dev):
    for clone in (copy.copy(dev), copy.deepcopy(dev), pickle.loads(pickle.dumps(dev))):
        assert type(clone) is StandInArray and clone is not dev
        np.testing.assert_array_equal(clone.get(), HOST)


def test_backend_recognises_the_device(dev):
    assert backend.get_array_module(dev) is standin
    assert backend.device_of(dev) == "standin" and backend.device_of(HOST) == "cpu"
    assert backend.get_array_module(1.0, None, dev) is standin
    back = backend.to_device(dev, "cpu")
    assert type(back) is np.ndarray
    np.testing.assert_array_equal(back, HOST)
    assert backend.to_device(dev, "standin") is dev


# ---------------------------------------------------------------- CuPy's API, not NumPy's
@pytest.mark.parametrize("name", ["errstate", "nditer", "frompyfunc", "block", "spacing"])
def test_numpy_functions_outside_cupys_api_are_missing(name):
    """NumPy has them and CuPy 14.2 does not (errstate lives in cupyx), so the stand-in
    refuses them as a GPU run would."""
    assert hasattr(np, name)
    with pytest.raises(AttributeError, match=f"standin.{name}: CuPy has no cupy.{name}"):
        getattr(standin, name)


def test_linalg_offers_only_cupys_routines():
    assert standin.linalg.norm(standin.asarray(np.array([3.0, 4.0]))).item() == 5.0
    with pytest.raises(AttributeError, match="cupy.linalg has no eigvals"):
        standin.linalg.eigvals


def test_dtypes_are_always_available():
    assert standin.float32 is np.float32 and standin.intp is np.intp and standin.bool_ is np.bool_


def _xp_names_used_by_the_package() -> set:
    """Every ``xp.<name>`` (and ``xp.<name>.<attr>``) the package's source reads."""
    import ast
    from pathlib import Path

    import tinygrad_rnn

    names = set()
    for path in Path(tinygrad_rnn.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id == "xp" and not node.attr.startswith("__")):
                names.add(node.attr)
    return names


def test_every_array_function_the_package_calls_exists_in_cupy():
    """A static check beside the dynamic suites: even a code path no test reaches may only
    call array-module functions that CuPy has (``standin`` offers exactly those)."""
    used = _xp_names_used_by_the_package()
    assert {"matmul", "zeros", "tanh", "where"} <= used  # the scan sees the kernels
    missing = sorted(n for n in used if not hasattr(standin, n))
    assert not missing, f"xp functions CuPy lacks (per standin.CUPY_API): {missing}"


def test_the_curated_api_exists_in_an_installed_cupy():
    """Where CuPy is installed (no GPU is needed to import it), every name the stand-in
    offers exists in it. Checked by hand against CuPy 14.2.0 on a machine without a GPU."""
    cupy = pytest.importorskip("cupy")
    assert not sorted(n for n in standin.CUPY_API if not hasattr(cupy, n))
    assert not sorted(n for n in standin.CUPY_LINALG if not hasattr(cupy.linalg, n))
