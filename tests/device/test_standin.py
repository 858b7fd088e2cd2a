"""The stand-in device's array module: what it refuses (so the device suites can catch a
NumPy call on device data, or an argument, dtype or attribute CuPy lacks), what it allows
(CuPy's explicit ways back to the host) and where it follows CuPy rather than NumPy
(out-of-range index arrays wrap around). Where CuPy is importable, its lists of names and
parameters are checked against the real CuPy."""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import tinygrad_rnn as tr
from tinygrad_rnn import backend
from tinygrad_rnn.testing import cupy_emulator as standin
from tinygrad_rnn.testing.cupy_emulator import StandInArray

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


def test_accumulate_only_where_cupy_has_it():
    """CuPy implements ufunc.accumulate for add and multiply alone (cupy.maximum.accumulate
    raises NotImplementedError on a GPU: the Embedding backward once used it), so the
    stand-in refuses the others the same way."""
    x = standin.asarray(np.array([3.0, 1.0, 4.0, 1.0]))
    np.testing.assert_array_equal(standin.add.accumulate(x).get(), [3.0, 4.0, 8.0, 9.0])
    np.testing.assert_array_equal(standin.multiply.accumulate(x).get(), [3.0, 3.0, 12.0, 12.0])
    with pytest.raises(NotImplementedError, match=r"maximum\.accumulate: CuPy 14\.2"):
        standin.maximum.accumulate(x)


@pytest.mark.parametrize("name", ["sum", "max", "min", "mean", "prod", "any", "all", "var"])
def test_an_axis_on_a_0d_reduction_is_refused_as_in_cupy(name):
    """NumPy reduces a 0-d array over axis 0 or -1, CuPy raises AxisError (softmax of a 0-d
    tensor once failed so on a GPU only): the stand-in refuses it too, as a function and as a
    method, and reduces with axis=None or over a real axis as before."""
    x0 = standin.asarray(np.array(2.0))
    for axis in (0, -1):
        with pytest.raises(np.exceptions.AxisError, match=rf"standin\.{name}: axis"):
            getattr(standin, name)(x0, axis=axis)
        with pytest.raises(np.exceptions.AxisError, match=rf"standin\.{name}: axis"):
            getattr(x0, name)(axis)
    assert getattr(standin, name)(x0).get() == getattr(np, name)(np.array(2.0))
    x = standin.asarray(np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(getattr(x, name)(axis=-1).get(),
                                  getattr(np, name)(np.arange(6.0).reshape(2, 3), axis=-1))


def test_softmax_of_a_0d_tensor_runs_on_the_standin():
    """The regression the rule above catches: softmax/log_softmax of a 0-d tensor reduce over
    axis None, never over axis -1, which CuPy refuses."""
    for fn in (tr.softmax, tr.log_softmax):
        x = tr.Tensor(np.array(0.7), requires_grad=True, device="standin")
        y = fn(x, dim=-1)
        y.backward()
        assert float(y.item()) == (1.0 if fn is tr.softmax else 0.0)
        assert float(x.grad.item()) == 0.0


def test_the_accumulate_list_is_cupys():
    """On a machine with CuPy and a GPU: the ufuncs of CUPY_ACCUMULATE accumulate, maximum
    does not (the list the stand-in enforces is CuPy's)."""
    cupy = pytest.importorskip("cupy")
    try:
        x = cupy.arange(4.0)
    except Exception:  # noqa: BLE001  (CuPy without a usable GPU)
        pytest.skip("CuPy is installed but no GPU is usable")
    for name in standin.CUPY_ACCUMULATE:
        getattr(cupy, name).accumulate(x)
    with pytest.raises(NotImplementedError):
        cupy.maximum.accumulate(x)


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


# ---------------------------------------------------------------- CuPy's out-of-range indices
GRID = np.arange(12.0).reshape(3, 4)


def _i(*values: int) -> StandInArray:
    return standin.asarray(np.array(values))


@pytest.mark.parametrize("index, wrapped", [
    (lambda: _i(0, 5), ([0, 2],)),
    (lambda: _i(-4), ([2],)),
    (lambda: [0, 5], ([0, 2],)),
    (lambda: (slice(None), _i(4, -5)), (slice(None), [0, 3])),
    (lambda: (Ellipsis, _i(6)), (Ellipsis, [2])),
    (lambda: (None, _i(3)), (None, [0])),
    (lambda: (_i(3), _i(7)), ([0], [3])),
    (lambda: (1, _i(9)), (1, [1])),
    (lambda: (standin.asarray(np.array([True, False, True])), _i(5)),
     (np.array([True, False, True]), [1])),
    (lambda: standin.asarray(np.array([[0, 3], [-1, -6]])), (np.array([[0, 0], [2, 0]]),)),
], ids=["array", "negative", "list", "slice-then-array", "ellipsis", "newaxis", "two-arrays",
        "int-then-array", "mask-then-array", "2-d-array"])
def test_integer_array_indices_wrap_around_as_in_cupy(index, wrapped):
    """CuPy wraps out-of-range integer-array indices around instead of raising ("Differences
    between CuPy and NumPy"); the stand-in does too, so a library that relies on NumPy's
    IndexError gives a wrong result on the stand-in, as it would on a GPU."""
    dev = standin.asarray(GRID)
    want = GRID[wrapped]
    np.testing.assert_array_equal(dev[index()].get(), want)
    target = standin.zeros((3, 4))
    target[index()] = 1.0
    expected = np.zeros((3, 4))
    expected[wrapped] = 1.0
    np.testing.assert_array_equal(target.get(), expected)


def test_index_functions_wrap_around_as_in_cupy():
    dev = standin.asarray(GRID)
    z = standin.zeros(3)
    standin.add.at(z, _i(3, -1, 5), 1.0)
    np.testing.assert_array_equal(z.get(), [1.0, 0.0, 2.0])
    np.testing.assert_array_equal(standin.take(dev, _i(5), axis=1).get(), GRID[:, [1]])
    np.testing.assert_array_equal(dev.take(_i(13)).get(), [1.0])
    picked = standin.take_along_axis(dev, standin.asarray(np.array([[4], [5], [-5]])), axis=1)
    np.testing.assert_array_equal(picked.get(), [[0.0], [5.0], [11.0]])
    put = standin.zeros((3, 4))
    standin.put_along_axis(put, standin.asarray(np.array([[4], [5], [6]])), 1.0, axis=1)
    np.testing.assert_array_equal(put.get().nonzero(), ([0, 1, 2], [0, 1, 2]))
    flat = standin.zeros(3)
    standin.put(flat, _i(4), 1.0)  # CuPy's default mode is 'wrap'
    flat.put(_i(-3), 2.0)
    np.testing.assert_array_equal(flat.get(), [2.0, 1.0, 0.0])


@pytest.mark.parametrize("index", [
    lambda: 5, lambda: (0, 9), lambda: (_i(0), 1, 2), lambda: (Ellipsis, Ellipsis, _i(0)),
], ids=["int", "int-pair", "too-many", "two-ellipses"])
def test_indices_the_stand_in_does_not_wrap_still_raise(index):
    """CuPy raises for an out-of-range Python int; forms that cannot be mapped to axes are
    left to NumPy, which raises."""
    with pytest.raises(IndexError):
        standin.asarray(GRID)[index()]


def test_an_empty_axis_is_not_wrapped_into():
    with pytest.raises(IndexError):
        standin.zeros((0, 2))[_i(0)]


def test_index_array_axes_maps_each_integer_array_to_its_axis():
    a, m = np.array([1]), np.ones((2, 2), dtype=bool)
    assert backend.index_array_axes((a,), 2) == [(0, 0)]
    assert backend.index_array_axes((Ellipsis, a), 3) == [(1, 2)]
    assert backend.index_array_axes((None, 1, a, None), 2) == [(2, 1)]
    assert backend.index_array_axes((m, a), 3) == [(1, 2)]
    assert backend.index_array_axes((True, slice(None), a), 2) == [(2, 1)]
    assert backend.index_array_axes((m,), 2) == []
    for unmappable in ((Ellipsis, Ellipsis), (1, 2, 3), (1.5,)):
        assert backend.index_array_axes(unmappable, 2) is None


# ---------------------------------------------------------------- CuPy's arguments and dtypes
@pytest.mark.parametrize("call", [
    lambda a: standin.sum(a, where=a > 1), lambda a: standin.max(a, initial=10.0),
    lambda a: a.max(initial=10.0), lambda a: standin.clip(a, min=1.0, max=2.0),
    lambda a: standin.sort(a, stable=True), lambda a: standin.mean(a, where=a > 1),
    lambda a: standin.take_along_axis(a, standin.zeros((2, 1), dtype=np.intp)),
    lambda a: a.sum(0, None, None, False, 0.0), lambda a: a.item(0),
    lambda a: standin.add.reduce(a, initial=1.0), lambda a: standin.argmax(a, 1, None),
    lambda a: standin.linalg.svd(a, hermitian=False),
], ids=["sum-where", "max-initial", "method-max-initial", "clip-min-max", "sort-stable",
        "mean-where", "take_along_axis-no-axis", "method-sum-positional-initial",
        "item-with-index", "reduce-initial", "argmax-positional-out", "svd-hermitian"])
def test_arguments_cupy_lacks_are_refused(dev, call):
    with pytest.raises(TypeError, match=r"CuPy 14\.2's cupy\.\S+ takes \(.*would fail on a GPU"):
        call(dev)


@pytest.mark.parametrize("keyword", [{"where": HOST > 1}, {"order": "K"}, {"subok": True}])
def test_ufunc_keywords_cupy_lacks_are_refused(dev, keyword):
    if "where" in keyword:
        keyword = {"where": standin.asarray(keyword["where"])}
    with pytest.raises(TypeError, match=r"CuPy 14\.2's ufuncs take only the keywords out="):
        standin.add(dev, 1.0, **keyword)


def test_the_arguments_cupy_takes_still_work(dev):
    np.testing.assert_array_equal(standin.clip(dev, 1.0, 2.0).get(), np.clip(HOST, 1.0, 2.0))
    np.testing.assert_array_equal(dev.clip(min=1.0, max=2.0).get(), np.clip(HOST, 1.0, 2.0))
    np.testing.assert_array_equal(standin.sum(dev, axis=0, keepdims=True).get(),
                                  HOST.sum(axis=0, keepdims=True))
    np.testing.assert_array_equal(dev.max(axis=1).get(), HOST.max(axis=1))
    np.testing.assert_array_equal(standin.argmax(dev, 1, keepdims=True).get(),
                                  np.argmax(HOST, 1, keepdims=True))
    out = standin.empty((2, 3))
    assert standin.add(dev, 1.0, out=out, dtype=np.float64, casting="same_kind") is out
    np.testing.assert_array_equal(out.get(), HOST + 1.0)
    np.testing.assert_array_equal(dev.reshape(3, 2).get(), HOST.reshape(3, 2))
    np.testing.assert_array_equal(dev.astype(np.float32, copy=True).get(), HOST.astype(np.float32))


@pytest.mark.parametrize("make", [
    lambda: standin.asarray(np.ones(2, dtype=np.longdouble)),
    lambda: standin.zeros(2, dtype=np.clongdouble),
    lambda: standin.asarray(HOST).astype(np.longdouble),
    lambda: standin.sum(standin.asarray(HOST), dtype=np.longdouble),
    lambda: standin.asarray(np.array(["a", "b"])),
    lambda: standin.asarray(np.array([b"a"])),
    lambda: standin.asarray(np.array([object()], dtype=object)),
    lambda: standin.asarray(np.array(["2020-01-01"], dtype="datetime64[D]")),
    lambda: standin.asarray(np.array([1], dtype="timedelta64[s]")),
    lambda: standin.zeros(2, dtype="V4"),
    lambda: tr.tensor(np.ones(3), dtype=np.longdouble, device="standin"),
], ids=["longdouble", "clongdouble", "astype", "reduction-dtype", "str", "bytes", "object",
        "datetime", "timedelta", "void", "tensor"])
def test_dtypes_cupy_lacks_are_refused(make):
    with pytest.raises(TypeError, match="CuPy has no arrays of dtype"):
        make()


@pytest.mark.parametrize("name", ["longdouble", "clongdouble", "str_", "bytes_", "object_",
                                  "datetime64", "timedelta64", "void"])
def test_scalar_types_cupy_lacks_are_missing(name):
    with pytest.raises(AttributeError, match=f"CuPy has no cupy.{name}"):
        getattr(standin, name)


@pytest.mark.parametrize("name", ["resize", "setflags", "ctypes", "data", "getfield",
                                  "setfield", "to_device", "flat", "ptp"])
def test_ndarray_attributes_cupy_lacks_or_means_differently_are_missing(dev, name):
    with pytest.raises(AttributeError, match=f"stand-in arrays have no attribute '{name}'"):
        getattr(dev, name)


def test_result_type_can_cast_and_ndim_take_device_arrays_as_in_cupy():
    x32 = standin.asarray(np.ones((2, 3), dtype=np.float32))
    assert standin.result_type(x32, 1.0) == np.float32
    assert standin.result_type(x32, np.float64) == np.float64
    assert standin.result_type(x32, standin.asarray(np.ones(2))) == np.float64
    assert standin.can_cast(x32, np.float64) and not standin.can_cast(x32, np.int32)
    assert standin.ndim(x32) == 2 and standin.ndim(3.0) == 0


def test_every_function_has_cupys_parameters():
    """Every function the stand-in wraps has its entry in CUPY_SIGNATURES (and no entry is
    left over), so none of them takes NumPy-only arguments."""
    wrapped = {f"linalg.{n}" for n in standin.CUPY_LINALG}
    for name in standin.CUPY_API:
        obj = getattr(np, name)
        if (callable(obj) and not isinstance(obj, (np.ufunc, type)) and name not in standin._PASS
                and name not in ("result_type", "can_cast", "ndim")):
            wrapped.add(name)
    assert set(standin.CUPY_SIGNATURES) == wrapped
    for name in standin.CUPY_API - {"linalg"}:
        getattr(standin, name)  # every entry parses
    for name in standin.CUPY_LINALG:
        getattr(standin.linalg, name)


def _parameters_from_doc(obj) -> list:
    """The parameters of a Cython method from the signature on its docstring's first line
    (``_ndarray_base.sum(self, axis=None, dtype=None, out=None, keepdims=False)``)."""
    import inspect

    line = obj.__doc__.strip().splitlines()[0]
    inner = line[line.index("(") + 1:line.rindex(")")]
    params, kind = [], inspect.Parameter.POSITIONAL_OR_KEYWORD
    for part in (p.strip() for p in inner.split(",")):
        name, has_default = part.split("=")[0].split()[-1], "=" in part
        if name == "self":
            continue
        if name == "*":
            kind = inspect.Parameter.KEYWORD_ONLY
        elif name.startswith("**"):
            params.append(inspect.Parameter(name[2:], inspect.Parameter.VAR_KEYWORD))
        elif name.startswith("*"):
            params.append(inspect.Parameter(name[1:], inspect.Parameter.VAR_POSITIONAL))
            kind = inspect.Parameter.KEYWORD_ONLY
        else:
            default = 0 if has_default else inspect.Parameter.empty
            params.append(inspect.Parameter(name, kind, default=default))
    return params


def _agrees_with_cupy(what: str, spec: str, theirs: list, doc: str) -> list:
    """The ways the stand-in's parameter list ``spec`` would accept a call CuPy refuses."""
    import inspect

    P = inspect.Parameter
    positional = [p for p in theirs if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    by_name = {p.name: p for p in theirs}
    var_pos = any(p.kind is P.VAR_POSITIONAL for p in theirs)
    var_kw = any(p.kind is P.VAR_KEYWORD for p in theirs)
    problems, position = [], 0
    for p in standin._signature(spec).parameters.values():
        if p.kind is P.VAR_POSITIONAL:
            if not var_pos:
                problems.append(f"{what}: *{p.name} but CuPy takes no *args")
        elif p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD):
            if position >= len(positional):
                problems.append(f"{what}: CuPy has no positional parameter {position} ({p.name})")
            else:
                tp = positional[position]
                if p.kind is P.POSITIONAL_OR_KEYWORD and tp.name != p.name:
                    problems.append(f"{what}: parameter {position} is {tp.name} in CuPy, "
                                    f"not {p.name}")
                if p.default is not P.empty and tp.default is P.empty:
                    problems.append(f"{what}: {p.name} is required in CuPy")
            position += 1
        else:
            tp = by_name.get(p.name)
            if tp is None:
                if not (var_kw and p.name in doc):
                    problems.append(f"{what}: CuPy takes no keyword {p.name}")
            elif tp.kind not in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY):
                problems.append(f"{what}: {p.name} is not a keyword in CuPy")
            elif p.default is not P.empty and tp.default is P.empty:
                problems.append(f"{what}: {p.name} is required in CuPy")
    return problems


def test_the_parameter_lists_match_an_installed_cupy():
    """Where CuPy is installed (no GPU is needed to import it), every allowlisted parameter
    exists in the real CuPy signature, in the same position when positional, and is
    required wherever CuPy requires it. Checked by hand against CuPy 14.2.0."""
    import inspect

    cupy = pytest.importorskip("cupy")
    problems = []
    for key, spec in standin.CUPY_SIGNATURES.items():
        obj = cupy
        for part in key.split("."):
            obj = getattr(obj, part)
        theirs = list(inspect.signature(obj).parameters.values())
        problems += _agrees_with_cupy(f"cupy.{key}", spec, theirs, obj.__doc__ or "")
    for name, spec in standin.CUPY_NDARRAY_METHODS.items():
        obj = getattr(cupy.ndarray, name)
        problems += _agrees_with_cupy(f"cupy.ndarray.{name}", spec, _parameters_from_doc(obj),
                                      obj.__doc__)
    for name, spec in standin.CUPY_UFUNC_METHODS.items():
        obj = getattr(cupy.add, name)
        problems += _agrees_with_cupy(f"cupy.add.{name}", spec, _parameters_from_doc(obj),
                                      obj.__doc__)
    for name in ("result_type", "can_cast", "ndim"):
        ours = inspect.signature(getattr(standin, name)).parameters
        theirs = inspect.signature(getattr(cupy, name)).parameters
        if [(p.name, p.kind) for p in ours.values()] != [(p.name, p.kind) for p in theirs.values()]:
            problems.append(f"standin.{name}{inspect.signature(getattr(standin, name))} is not "
                            f"cupy.{name}{inspect.signature(getattr(cupy, name))}")
    assert not problems, "\n".join(problems)


def test_the_ufunc_keywords_exist_in_an_installed_cupy():
    """CuPy's ufuncs take their keywords through **kwargs and answer "Wrong arguments" for
    any other (before touching a GPU): probe each allowlisted keyword on cupy.add, and
    check that the ufuncs the stand-in offers are of that same class (or, for matmul, have
    the keyword in their signature)."""
    import inspect

    cupy = pytest.importorskip("cupy")
    with pytest.raises(TypeError, match="Wrong arguments"):
        cupy.add(1.0, 2.0, where=True)  # the probe can fail
    probes = {"out": None, "dtype": None, "casting": "same_kind"}
    assert set(probes) == set(standin.CUPY_UFUNC_KEYWORDS)
    for keyword, value in probes.items():
        try:
            cupy.add(1.0, 2.0, **{keyword: value})
        except TypeError as err:
            assert "Wrong arguments" not in str(err), keyword
        except Exception:  # no GPU here: the keyword was accepted, the launch was not
            pass
    for name in sorted(standin.CUPY_API):
        if isinstance(getattr(np, name), np.ufunc):
            obj = getattr(cupy, name)
            if type(obj) is not type(cupy.add):
                params = inspect.signature(obj).parameters
                assert set(standin.CUPY_UFUNC_KEYWORDS) <= set(params), name


def test_the_stand_in_joins_the_backend_through_register_device():
    """The core package does not know the stand-in: 'standin' is an unknown device (whose
    message says how to register it) until tinygrad_rnn.testing is imported, which
    registers it through the public hook backend.register_device."""
    import subprocess
    import sys

    code = (
        "import sys, tinygrad_rnn as tr\n"
        "assert 'tinygrad_rnn.testing' not in sys.modules\n"
        "assert tr.backend.registered_devices() == ('cpu', 'cuda')\n"
        "try:\n"
        "    tr.tensor([1.0], device='standin')\n"
        "except ValueError as err:\n"
        "    print(err)\n"
        "import tinygrad_rnn.testing\n"
        "print(tr.backend.registered_devices(), tr.tensor([1.0], device='standin').device)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "unknown device 'standin'" in out and "importing tinygrad_rnn.testing" in out
    assert out.splitlines()[-1] == "('cpu', 'cuda', 'standin') standin"


def test_register_device_refuses_builtin_and_taken_names():
    assert "standin" in backend.registered_devices()
    assert backend.module_for_device("standin") is standin
    standin.register()  # again: harmless
    with pytest.raises(ValueError, match="'cpu' is built in"):
        backend.register_device("cpu", standin, StandInArray)
    with pytest.raises(ValueError, match="'standin' is already the device of"):
        backend.register_device("standin", np, StandInArray)
    with pytest.raises(ValueError, match="without ':'"):
        backend.register_device("tpu:0", standin, StandInArray)
    with pytest.raises(ValueError, match=r"unknown device 'tpu'; expected one of 'cpu', "
                                         r"'cuda' \(or 'cuda:0'\), 'standin'"):
        backend.module_for_device("tpu")
