"""A corpus of bad and odd inputs across the public API ("nothing fails silently").

Every row of the table is one call and what it must do:

* **must-raise** (``R``): the call raises a TypeError, ValueError, IndexError, RuntimeError
  or KeyError (never an AttributeError), raised from tinygrad_rnn code (the traceback's last
  frame is in the package, not in NumPy or the standard library), and its message names
  the function or class and the argument (the listed substrings);
* **must-accept** (``A``): a valid but odd input (a NumPy scalar, a 0-d array, a list, a
  non-contiguous or read-only array, an ``np.bool_`` flag, an empty batch) works and gives
  the same result as the plain equivalent input.

Cases that fail because of a file this corpus's author could not change are listed in
/work/corpus_todo.md; they stay here, neither skipped nor xfailed.
"""
from __future__ import annotations

import dataclasses
import math
import os
import traceback
from typing import Any, Callable

import numpy as np
import pytest

import tinygrad_rnn as tr

F = tr.functional
nn = tr.nn
PACKAGE_DIR = os.path.dirname(os.path.abspath(tr.__file__))
# a missing file is a FileNotFoundError (an OSError), as in open() and torch.load
RAISE_TYPES = (TypeError, ValueError, IndexError, RuntimeError, KeyError, FileNotFoundError)


# ----------------------------------------------------------------------------- the table
@dataclasses.dataclass
class Case:
    id: str
    call: Callable[[], Any]
    kind: str                              # "raise" or "accept"
    names: tuple = ()                      # substrings the error message must contain
    ref: Callable[[], Any] | None = None   # the plain equivalent call (accept)


CASES: list[Case] = []


def R(case_id: str, call: Callable[[], Any], *names: str | tuple) -> None:
    """A must-raise case: ``names`` are substrings the message must contain (the function
    or class first, then the argument); a tuple lists alternatives (an argument with two
    names, such as ``axis``/``dim``), one of which must appear."""
    assert names, case_id
    CASES.append(Case(case_id, call, "raise", tuple(names)))


def A(case_id: str, call: Callable[[], Any], ref: Callable[[], Any]) -> None:
    """A must-accept case: ``call()`` must give what ``ref()`` gives."""
    CASES.append(Case(case_id, call, "accept", ref=ref))


def assert_same(got: Any, want: Any, where: str = "result") -> None:
    """Recursive equality of results: Tensors and arrays by values and dtype (NaN equal to
    NaN), modules by their state dicts, dataclasses field by field."""
    if isinstance(want, tr.Tensor):
        assert isinstance(got, tr.Tensor), f"{where}: {type(got).__name__} is no Tensor"
        assert got.shape == want.shape and got.dtype == want.dtype, \
            f"{where}: {got.shape} {got.dtype} != {want.shape} {want.dtype}"
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=where)
    elif isinstance(want, np.ndarray):
        got_arr = np.asarray(got)
        assert got_arr.shape == want.shape and got_arr.dtype == want.dtype, \
            f"{where}: {got_arr.shape} {got_arr.dtype} != {want.shape} {want.dtype}"
        np.testing.assert_array_equal(got_arr, want, err_msg=where)
    elif isinstance(want, nn.Module):
        assert type(got) is type(want), where
        assert_same(dict(got.state_dict()), dict(want.state_dict()), where)
    elif dataclasses.is_dataclass(want) and not isinstance(want, type):
        assert type(got) is type(want), where
        for f in dataclasses.fields(want):
            assert_same(getattr(got, f.name), getattr(want, f.name), f"{where}.{f.name}")
    elif isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), f"{where}: keys differ"
        for k in want:
            assert_same(got[k], want[k], f"{where}[{k!r}]")
    elif isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), \
            f"{where}: {got!r} != {want!r}"
        for k, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{where}[{k}]")
    elif isinstance(want, float) and math.isnan(want):
        assert isinstance(got, (float, np.floating)) and math.isnan(got), where
    else:
        assert type(got) is type(want) and got == want, f"{where}: {got!r} != {want!r}"


def _last_frame_file(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    return os.path.abspath(frames[-1].filename) if frames else ""


# ----------------------------------------------------------------------------- fixtures
def arr(*shape: int, dtype: Any = np.float32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def ten(*shape: int, dtype: Any = np.float32, seed: int = 0, rg: bool = False) -> tr.Tensor:
    return tr.Tensor(arr(*shape, dtype=dtype, seed=seed), requires_grad=rg)


def readonly(a: np.ndarray) -> np.ndarray:
    a = np.array(a)
    a.flags.writeable = False
    return a


def strided(a: np.ndarray) -> np.ndarray:
    """The same values as ``a`` in a non-contiguous array (every other element of a wider
    buffer along the last axis)."""
    wide = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), dtype=a.dtype) if a.ndim else None
    if wide is None:
        return a
    wide[..., ::2] = a
    out = wide[..., ::2]
    assert not out.flags.c_contiguous or a.shape[-1] <= 1
    return out


def fortran(a: np.ndarray) -> np.ndarray:
    out = np.asfortranarray(a)
    return out


def linear(i: int = 3, o: int = 2, **kw: Any) -> nn.Linear:
    return nn.Linear(i, o, generator=0, **kw)


BAD_SIZES = {"float": 2.5, "str": "3", "none": None, "complex": 2j, "bool": True,
             "list": [2], "neg": -1}
BAD_FLAGS = {"str_no": "no", "none": None, "int2": 2, "float1": 1.0, "str_true": "True"}
BAD_RATES = {"str": "0.1", "nan": float("nan"), "neg": -0.1, "big": 1.5, "none": None,
             "complex": 0.1j, "list": [0.1]}


SIZE = ("size", "shape")      # torch calls the argument size, the signature *shape
AXIS = ("axis", "dim")        # one argument, two names


# ============================================================ tensor creation (tensor.py)
for fname in ("zeros", "ones", "randn", "rand"):
    fn = getattr(tr, fname)
    for label, bad in BAD_SIZES.items():
        if label == "list":
            continue  # zeros([2]) is a valid shape, as in torch
        R(f"{fname}-size-{label}", lambda fn=fn, bad=bad: fn(bad), fname, SIZE)
    R(f"{fname}-size-in-tuple-float", lambda fn=fn: fn((2, 2.5)), fname, SIZE)
    R(f"{fname}-dtype-foo", lambda fn=fn: fn(2, dtype="foo"), fname, "dtype")
    R(f"{fname}-dtype-object", lambda fn=fn: fn(2, dtype=object), fname, "dtype")
    R(f"{fname}-dtype-str", lambda fn=fn: fn(2, dtype=str), fname, "dtype")
    R(f"{fname}-requires_grad-str", lambda fn=fn: fn(2, requires_grad="yes"), fname,
      "requires_grad")
    R(f"{fname}-requires_grad-none", lambda fn=fn: fn(2, requires_grad=None), fname,
      "requires_grad")
    A(f"{fname}-size-np-int", lambda fn=fn, f=fname: fn(np.int64(2), 3, **_seed(f)),
      lambda fn=fn, f=fname: fn(2, 3, **_seed(f)))
    A(f"{fname}-size-list", lambda fn=fn, f=fname: fn([2, 3], **_seed(f)),
      lambda fn=fn, f=fname: fn(2, 3, **_seed(f)))
    A(f"{fname}-size-0d-array", lambda fn=fn, f=fname: fn(np.array(2), **_seed(f)),
      lambda fn=fn, f=fname: fn(2, **_seed(f)))
    A(f"{fname}-empty", lambda fn=fn, f=fname: fn(0, 3, **_seed(f)).shape, lambda: (0, 3))
    A(f"{fname}-requires_grad-np-bool",
      lambda fn=fn, f=fname: fn(2, requires_grad=np.True_, **_seed(f)).requires_grad,
      lambda: True)


def _seed(fname: str) -> dict:
    return {"generator": 0} if fname in ("randn", "rand") else {}


for fname in ("randn", "rand"):
    fn = getattr(tr, fname)
    R(f"{fname}-dtype-int64", lambda fn=fn: fn(2, dtype=np.int64), fname, "dtype")
    R(f"{fname}-dtype-bool", lambda fn=fn: fn(2, dtype=bool), fname, "dtype")
    R(f"{fname}-generator-str", lambda fn=fn: fn(2, generator="seed"), fname, "generator")

R("full-int-dtype-fraction", lambda: tr.full((2,), 2.5, dtype=np.int64), "full", "2.5")
R("full-value-str", lambda: tr.full((2,), "1"), "full", "value")
R("full-value-complex", lambda: tr.full((2,), 1 + 2j), "full", "value")
R("full-value-none", lambda: tr.full((2,), None), "full", "value")
R("full-shape-float", lambda: tr.full(2.5, 1.0), "full", SIZE)
R("full-shape-neg", lambda: tr.full((-1,), 1.0), "full", SIZE)
A("full-value-np-float", lambda: tr.full((2,), np.float64(1.5)), lambda: tr.full((2,), 1.5))
A("full-shape-list", lambda: tr.full([2, 3], 1.0), lambda: tr.full((2, 3), 1.0))
A("full-value-0d", lambda: tr.full((2,), np.array(1.5)), lambda: tr.full((2,), 1.5))

R("arange-str", lambda: tr.arange("3"), "arange")
R("arange-step-zero", lambda: tr.arange(0, 3, 0), "arange", "step")
R("arange-nan", lambda: tr.arange(float("nan")), "arange")
R("arange-inf", lambda: tr.arange(0, float("inf")), "arange")
R("arange-complex", lambda: tr.arange(3j), "arange")
A("arange-np-int", lambda: tr.arange(np.int64(4)), lambda: tr.arange(4))
A("arange-empty", lambda: tr.arange(0).shape, lambda: (0,))

# Tensor / tensor constructors
for cname in ("Tensor", "tensor"):
    ctor = getattr(tr, cname)
    who = ("Tensor", "tensor")  # tr.tensor is Tensor's factory: either name says which call
    R(f"{cname}-object-array-none", lambda c=ctor: c(np.array([1, None], dtype=object)),
      who, "object")
    R(f"{cname}-object-dtype", lambda c=ctor: c([1.0], dtype=object), who, "dtype")
    R(f"{cname}-datetime", lambda c=ctor: c(np.array(["2020-01-01"], dtype="datetime64[D]")),
      who, "datetime64")
    R(f"{cname}-structured", lambda c=ctor: c(np.zeros(2, dtype=[("a", "f4"), ("b", "i4")])),
      who, "dtype")
    R(f"{cname}-str-array", lambda c=ctor: c(np.array(["a", "b"])), who, "dtype")
    R(f"{cname}-list-with-str", lambda c=ctor: c([1.0, "a"]), who)
    R(f"{cname}-list-with-none", lambda c=ctor: c([1.0, None]), who)
    R(f"{cname}-ragged", lambda c=ctor: c([[1.0], [1.0, 2.0]]), who)
    R(f"{cname}-dtype-foo", lambda c=ctor: c([1.0], dtype="foo"), who, "dtype")
    R(f"{cname}-requires_grad-str", lambda c=ctor: c([1.0], requires_grad="yes"), who,
      "requires_grad")
    R(f"{cname}-requires_grad-2", lambda c=ctor: c([1.0], requires_grad=2), who,
      "requires_grad")
    R(f"{cname}-requires_grad-int-tensor", lambda c=ctor: c([1, 2], requires_grad=True),
      who, "requires_grad")
    R(f"{cname}-dict", lambda c=ctor: c({"a": 1.0}), who)
    R(f"{cname}-set", lambda c=ctor: c({1.0, 2.0}), who)
    A(f"{cname}-readonly", lambda c=ctor: c(readonly(arr(2, 3))), lambda c=ctor: c(arr(2, 3)))
    A(f"{cname}-strided", lambda c=ctor: c(strided(arr(2, 3))), lambda c=ctor: c(arr(2, 3)))
    A(f"{cname}-fortran", lambda c=ctor: c(fortran(arr(2, 3))), lambda c=ctor: c(arr(2, 3)))
    A(f"{cname}-np-scalar", lambda c=ctor: c(np.float32(1.5)),
      lambda c=ctor: c(np.array(1.5, dtype=np.float32)))
    A(f"{cname}-0d", lambda c=ctor: c(np.array(2.0)).shape, lambda: ())
    A(f"{cname}-list", lambda c=ctor: c([[1.0, 2.0]], dtype=np.float32),
      lambda c=ctor: c(np.array([[1.0, 2.0]], dtype=np.float32)))
    A(f"{cname}-requires_grad-np-bool",
      lambda c=ctor: c([1.0], requires_grad=np.True_).requires_grad, lambda: True)
    A(f"{cname}-empty", lambda c=ctor: c(np.zeros((0, 3), np.float32)).shape, lambda: (0, 3))

R("zeros_like-list", lambda: tr.zeros_like([1.0, 2.0]), "zeros_like")
R("ones_like-none", lambda: tr.ones_like(None), "ones_like")
R("zeros_like-requires_grad-str", lambda: tr.zeros_like(ten(2), requires_grad="no"),
  "zeros_like", "requires_grad")

# cat / stack / split / where
for fname in ("cat", "stack"):
    fn = getattr(tr, fname)
    R(f"{fname}-axis-float", lambda fn=fn: fn([ten(2), ten(2)], axis=0.0), fname, AXIS)
    R(f"{fname}-axis-str", lambda fn=fn: fn([ten(2), ten(2)], axis="0"), fname, AXIS)
    R(f"{fname}-axis-out-of-range", lambda fn=fn: fn([ten(2), ten(2)], axis=3), fname, AXIS)
    R(f"{fname}-empty-list", lambda fn=fn: fn([]), fname)
    R(f"{fname}-not-a-sequence", lambda fn=fn: fn(ten(2, 2)), fname)
    R(f"{fname}-item-str", lambda fn=fn: fn([ten(2), "ab"]), fname)
    R(f"{fname}-item-none", lambda fn=fn: fn([ten(2), None]), fname)
    R(f"{fname}-shape-mismatch", lambda fn=fn: fn([ten(2, 3), ten(3, 2)], axis=1 - (
        fname == "stack")), fname)
    R(f"{fname}-dim-and-axis-differ", lambda fn=fn: fn([ten(2, 2), ten(2, 2)], axis=0, dim=1),
      fname, AXIS)
    A(f"{fname}-axis-np-int", lambda fn=fn: fn([ten(2, 2), ten(2, 2, seed=1)],
                                               axis=np.int64(1)),
      lambda fn=fn: fn([ten(2, 2), ten(2, 2, seed=1)], axis=1))
    A(f"{fname}-tuple", lambda fn=fn: fn((ten(2), ten(2, seed=1))),
      lambda fn=fn: fn([ten(2), ten(2, seed=1)]))
    A(f"{fname}-readonly-arrays", lambda fn=fn: fn([readonly(arr(2)), ten(2, seed=1)]),
      lambda fn=fn: fn([ten(2), ten(2, seed=1)]))
    A(f"{fname}-negative-axis", lambda fn=fn: fn([ten(2, 2), ten(2, 2, seed=1)], axis=-1),
      lambda fn=fn, f=fname: fn([ten(2, 2), ten(2, 2, seed=1)], axis=1 if f == "cat" else 2))

R("split-size-zero", lambda: tr.split(ten(4), 0), "split")
R("split-size-float", lambda: tr.split(ten(4), 2.5), "split")
R("split-size-neg", lambda: tr.split(ten(4), -1), "split")
R("split-sections-sum", lambda: tr.split(ten(4), [1, 2]), "split")
R("split-sections-float", lambda: tr.split(ten(4), [2.0, 2.0]), "split")
R("split-axis-float", lambda: tr.split(ten(4), 2, axis=0.0), "split", AXIS)
R("split-axis-range", lambda: tr.split(ten(4), 2, axis=2), "split", AXIS)
R("split-x-str", lambda: tr.split("abcd", 2), "split")
A("split-np-int", lambda: tr.split(ten(4), np.int64(2)), lambda: tr.split(ten(4), 2))
A("split-sections-tuple", lambda: tr.split(ten(4), (1, 3)), lambda: tr.split(ten(4), [1, 3]))

R("where-shape-mismatch", lambda: tr.where(np.ones((2,), bool), ten(3), ten(3)), "where")
R("where-cond-str", lambda: tr.where("yes", ten(2), ten(2)), "where", "condition")
R("where-cond-float", lambda: tr.where(np.array([0.5, 1.0]), ten(2), ten(2)), "where",
  "condition")
R("where-b-str", lambda: tr.where(np.ones(2, bool), ten(2), "x"), "where")
A("where-cond-list", lambda: tr.where([True, False], ten(2), ten(2, seed=1)),
  lambda: tr.where(np.array([True, False]), ten(2), ten(2, seed=1)))
A("where-cond-readonly", lambda: tr.where(readonly(np.array([True, False])), ten(2),
                                          ten(2, seed=1)),
  lambda: tr.where(np.array([True, False]), ten(2), ten(2, seed=1)))

# Tensor methods
R("softmax-method-axis-float", lambda: ten(2, 3).softmax(1.0), "softmax", AXIS)
R("pow-str", lambda: ten(2) ** "2", "pow")
R("mul-complex", lambda: ten(2) * (1 + 2j), "mul", "complex")
R("add-complex", lambda: ten(2) + 1j, "add", "complex")
R("add-str", lambda: ten(2) + "1", "add")
R("reshape-float", lambda: ten(2, 3).reshape(3, 2.0), "reshape")
R("reshape-mismatch", lambda: ten(2, 3).reshape(4, 2), "reshape")
R("sum-axis-str", lambda: ten(2, 3).sum(axis="0"), "sum", AXIS)
R("sum-axis-range", lambda: ten(2, 3).sum(axis=2), "sum", AXIS)
R("backward-complex-grad", lambda: ten(2, rg=True).backward(np.array([1j, 1j])), "backward",
  "complex")
R("backward-nonscalar", lambda: (ten(2, rg=True) * 2).backward(), "backward")
R("backward-grad-shape", lambda: (ten(2, rg=True) * 2).backward(np.ones(3, np.float32)),
  "backward", "shape")
R("getitem-float-index", lambda: ten(3)[1.5], "index")
R("getitem-out-of-range", lambda: ten(3)[5], "index")
R("transpose-axis-range", lambda: ten(2, 3).transpose(0, 2), "transpose")
A("add-np-scalar", lambda: ten(2) + np.float32(1.0), lambda: ten(2) + 1.0)
A("add-0d-array", lambda: ten(2) + np.array(1.0, np.float32), lambda: ten(2) + 1.0)
A("mul-readonly", lambda: ten(2) * readonly(arr(2, seed=1)), lambda: ten(2) * ten(2, seed=1))
A("getitem-np-int", lambda: ten(3)[np.int64(1)], lambda: ten(3)[1])
A("sum-axis-np-int", lambda: ten(2, 3).sum(axis=np.int64(1)), lambda: ten(2, 3).sum(axis=1))

# ============================================================ functional (functional.py)
UNARY = ("relu", "tanh", "sigmoid", "exp", "log", "sqrt", "abs")
for fname in UNARY:
    fn = getattr(F, fname)
    R(f"F.{fname}-none", lambda fn=fn: fn(None), fname)
    R(f"F.{fname}-str", lambda fn=fn: fn("abc"), fname)
    R(f"F.{fname}-object-array", lambda fn=fn: fn(np.array([1.0, None], dtype=object)), fname)
    A(f"F.{fname}-list", lambda fn=fn: fn([[0.5, 1.5]]),
      lambda fn=fn: fn(tr.Tensor([[0.5, 1.5]])))
    A(f"F.{fname}-readonly", lambda fn=fn: fn(readonly(np.abs(arr(2, 3)) + 0.5)),
      lambda fn=fn: fn(tr.Tensor(np.abs(arr(2, 3)) + 0.5)))
    A(f"F.{fname}-strided", lambda fn=fn: fn(tr.Tensor(strided(np.abs(arr(2, 3)) + 0.5))),
      lambda fn=fn: fn(tr.Tensor(np.abs(arr(2, 3)) + 0.5)))
    A(f"F.{fname}-0d", lambda fn=fn: fn(tr.Tensor(np.array(0.5, np.float32))),
      lambda fn=fn: fn(tr.Tensor(np.array([0.5], np.float32))).reshape(()))
    A(f"F.{fname}-empty", lambda fn=fn: fn(ten(0, 3)).shape, lambda: (0, 3))

for fname in ("softmax", "log_softmax"):
    fn = getattr(F, fname)
    R(f"F.{fname}-axis-float", lambda fn=fn: fn(ten(2, 3), axis=1.0), fname, AXIS)
    R(f"F.{fname}-axis-str", lambda fn=fn: fn(ten(2, 3), axis="1"), fname, AXIS)
    R(f"F.{fname}-axis-range", lambda fn=fn: fn(ten(2, 3), axis=2), fname, AXIS)
    R(f"F.{fname}-mask-shape", lambda fn=fn: fn(ten(2, 3), axis=1, mask=np.ones((2, 2), bool)),
      fname, "mask")
    R(f"F.{fname}-mask-float", lambda fn=fn: fn(ten(2, 3), axis=1, mask=np.ones((2, 3))),
      fname, "mask")
    R(f"F.{fname}-none", lambda fn=fn: fn(None, axis=0), fname)
    A(f"F.{fname}-axis-np-int", lambda fn=fn: fn(ten(2, 3), axis=np.int64(1)),
      lambda fn=fn: fn(ten(2, 3), axis=1))
    A(f"F.{fname}-dim", lambda fn=fn: fn(ten(2, 3), dim=1), lambda fn=fn: fn(ten(2, 3), axis=1))
    A(f"F.{fname}-mask-list", lambda fn=fn: fn(ten(1, 3), axis=1, mask=[[True, True, False]]),
      lambda fn=fn: fn(ten(1, 3), axis=1, mask=np.array([[True, True, False]])))

A("F.linear-list", lambda: F.linear([[1.0, 2.0, 3.0]], linear().weight),
  lambda: F.linear(tr.Tensor(np.array([[1.0, 2.0, 3.0]], np.float32)), linear().weight))
R("F.linear-none", lambda: F.linear(None, linear().weight), "linear")
R("F.linear-shape", lambda: F.linear(ten(2, 4), linear().weight), "linear", "(2, 4)")
A("F.linear-weight-1d", lambda: F.linear(ten(2, 3), ten(3)),
  lambda: F.linear(ten(2, 3), ten(3).reshape(1, 3)).reshape(2))
R("F.linear-bias-shape", lambda: F.linear(ten(2, 3), ten(2, 3), ten(3)), "linear", "bias")
R("F.matmul-str", lambda: F.matmul(ten(2, 2), "ab"), "matmul")
R("F.matmul-shape", lambda: F.matmul(ten(2, 3), ten(2, 3)), "matmul", "(2, 3)")
R("F.matmul-0d", lambda: F.matmul(ten(2), tr.Tensor(np.float32(2.0))), "matmul")
A("F.matmul-readonly", lambda: F.matmul(ten(2, 3), readonly(arr(3, 2, seed=1))),
  lambda: F.matmul(ten(2, 3), ten(3, 2, seed=1)))

for label, bad in BAD_RATES.items():
    R(f"F.dropout-p-{label}", lambda bad=bad: F.dropout(ten(4), bad, generator=0), "dropout",
      "p")
for label, bad in BAD_FLAGS.items():
    R(f"F.dropout-training-{label}", lambda bad=bad: F.dropout(ten(4), 0.5, training=bad,
                                                              generator=0),
      "dropout", "training")
A("F.dropout-training-np-bool", lambda: F.dropout(ten(6), 0.5, training=np.True_, generator=0),
  lambda: F.dropout(ten(6), 0.5, training=True, generator=0))
A("F.dropout-p-np-float", lambda: F.dropout(ten(6), np.float64(0.5), generator=0),
  lambda: F.dropout(ten(6), 0.5, generator=0))
A("F.dropout-p-int-zero", lambda: F.dropout(ten(6), 0, generator=0),
  lambda: F.dropout(ten(6), 0.0, generator=0))

LOGITS = lambda: ten(3, 4, rg=True)  # noqa: E731
TARGET = lambda: np.array([0, 3, 1])  # noqa: E731
R("F.cross_entropy-label_smoothing-str",
  lambda: F.cross_entropy(LOGITS(), TARGET(), label_smoothing="0.1"), "cross_entropy",
  "label_smoothing")
R("F.cross_entropy-label_smoothing-big",
  lambda: F.cross_entropy(LOGITS(), TARGET(), label_smoothing=1.5), "cross_entropy",
  "label_smoothing")
R("F.cross_entropy-ignore_index-float",
  lambda: F.cross_entropy(LOGITS(), TARGET(), ignore_index=1.5), "cross_entropy",
  "ignore_index")
R("F.cross_entropy-target-range",
  lambda: F.cross_entropy(LOGITS(), np.array([0, 4, 1])), "cross_entropy", "4")
R("F.cross_entropy-target-negative",
  lambda: F.cross_entropy(LOGITS(), np.array([0, -2, 1])), "cross_entropy", "-2")
R("F.cross_entropy-target-float",
  lambda: F.cross_entropy(LOGITS(), np.array([0.0, 1.5, 1.0])), "cross_entropy", "target")
R("F.cross_entropy-target-shape",
  lambda: F.cross_entropy(LOGITS(), np.array([0, 1])), "cross_entropy", "target")
R("F.cross_entropy-reduction", lambda: F.cross_entropy(LOGITS(), TARGET(), reduction="avg"),
  "cross_entropy", "reduction")
R("F.cross_entropy-weight-shape",
  lambda: F.cross_entropy(LOGITS(), TARGET(), weight=np.ones(3)), "cross_entropy", "weight")
A("F.cross_entropy-input-list", lambda: F.cross_entropy([[1.0, 2.0]], [0]),
  lambda: F.cross_entropy(tr.Tensor(np.array([[1.0, 2.0]], np.float32)), np.array([0])))
A("F.cross_entropy-target-list", lambda: F.cross_entropy(LOGITS(), [0, 3, 1]),
  lambda: F.cross_entropy(LOGITS(), TARGET()))
A("F.cross_entropy-target-readonly", lambda: F.cross_entropy(LOGITS(), readonly(TARGET())),
  lambda: F.cross_entropy(LOGITS(), TARGET()))
A("F.cross_entropy-target-int32", lambda: F.cross_entropy(LOGITS(), TARGET().astype(np.int32)),
  lambda: F.cross_entropy(LOGITS(), TARGET()))
A("F.cross_entropy-ignore_index-np-int",
  lambda: F.cross_entropy(LOGITS(), TARGET(), ignore_index=np.int64(3)),
  lambda: F.cross_entropy(LOGITS(), TARGET(), ignore_index=3))
R("F.nll_loss-target-range", lambda: F.nll_loss(LOGITS(), np.array([0, 9, 1])), "nll_loss",
  "9")
R("F.nll_loss-reduction", lambda: F.nll_loss(LOGITS(), TARGET(), reduction=None), "nll_loss",
  "reduction")
R("F.mse_loss-shape", lambda: F.mse_loss(ten(2, 3), np.ones((3, 2))), "mse_loss")
R("F.mse_loss-str", lambda: F.mse_loss(ten(2), "ab"), "mse_loss")
A("F.mse_loss-target-list", lambda: F.mse_loss(ten(2), [1.0, 2.0]),
  lambda: F.mse_loss(ten(2), np.array([1.0, 2.0], np.float32)))
R("F.bce-target-shape", lambda: F.binary_cross_entropy_with_logits(ten(2, 3), np.ones(4)),
  "binary_cross_entropy_with_logits")
R("F.bce-pos_weight-str",
  lambda: F.binary_cross_entropy_with_logits(ten(2), np.ones(2), pos_weight="2"),
  "binary_cross_entropy_with_logits", "pos_weight")
R("F.embedding-id-range", lambda: F.embedding(np.array([0, 5]), ten(4, 2)), "embedding", "5")
R("F.embedding-id-float", lambda: F.embedding(np.array([0.0, 1.5]), ten(4, 2)), "embedding")
R("F.embedding-padding_idx-range", lambda: F.embedding(np.array([0]), ten(4, 2), 7),
  "embedding", "padding_idx")
A("F.embedding-ids-list", lambda: F.embedding([0, 3], ten(4, 2)),
  lambda: F.embedding(np.array([0, 3]), ten(4, 2)))
R("F.masked_fill-value-str", lambda: F.masked_fill(ten(2), np.array([True, False]), "0"),
  "masked_fill", "value")
R("F.masked_fill-mask-shape", lambda: F.masked_fill(ten(2), np.ones(3, bool), 0.0),
  "masked_fill", "mask")
R("F.clip-min-str", lambda: F.clip(ten(2), "0", 1.0), "clip", "min")
A("F.clip-min-gt-max", lambda: F.clip(ten(2), 1.0, 0.0), lambda: tr.zeros(2))  # torch.clamp
A("F.clip-np-float", lambda: F.clip(ten(3), np.float32(-0.5), np.float32(0.5)),
  lambda: F.clip(ten(3), -0.5, 0.5))
R("F.maximum-str", lambda: F.maximum(ten(2), "a"), "maximum")
A("F.maximum-list", lambda: F.maximum(ten(2), [0.0, 0.0]),
  lambda: F.maximum(ten(2), tr.zeros(2)))

# ============================================================ nn layers (nn/layers.py)
for label, bad in BAD_SIZES.items():
    R(f"Linear-in_features-{label}", lambda bad=bad: nn.Linear(bad, 2), "Linear",
      "in_features")
    R(f"Linear-out_features-{label}", lambda bad=bad: nn.Linear(3, bad), "Linear",
      "out_features")
for label, bad in BAD_FLAGS.items():
    R(f"Linear-bias-{label}", lambda bad=bad: nn.Linear(2, 3, bias=bad), "Linear", "bias")
R("Linear-dtype-foo", lambda: nn.Linear(2, 3, dtype="foo"), "Linear", "dtype")
R("Linear-dtype-int", lambda: nn.Linear(2, 3, dtype=np.int64), "Linear", "dtype")
R("Linear-dtype-complex", lambda: nn.Linear(2, 3, dtype=np.complex64), "Linear", "dtype")
R("Linear-generator-str", lambda: nn.Linear(2, 3, generator="x"), "generator")
A("Linear-bias-np-false", lambda: linear(bias=np.False_), lambda: linear(bias=False))
A("Linear-bias-int-1", lambda: linear(bias=1), lambda: linear(bias=True))
A("Linear-sizes-np-int", lambda: nn.Linear(np.int32(3), np.int64(2), generator=0),
  lambda: linear())
A("Linear-forward-list", lambda: linear()([[1.0, 2.0, 3.0]]),
  lambda: linear()(tr.Tensor(np.array([[1.0, 2.0, 3.0]], np.float32))))
for label, bad in {"none": None, "float": 1.5, "str": "abc",
                   "dict": {"x": 1}}.items():
    R(f"Linear-forward-{label}", lambda bad=bad: linear()(bad), "Linear", "input")
R("Linear-forward-last-dim", lambda: linear()(ten(2, 4)), "Linear", "(2, 4)")
R("Linear-forward-float64", lambda: linear()(ten(2, 3, dtype=np.float64)), "Linear", "float64")
R("Linear-forward-int", lambda: linear()(tr.Tensor(np.ones((2, 3), np.int64))), "Linear",
  "int64")
R("Linear-forward-0d", lambda: linear()(tr.Tensor(np.float32(1.0))), "Linear", "input")
R("Linear-forward-ndarray-float64", lambda: linear()(arr(2, 3, dtype=np.float64)), "Linear",
  "float64")
A("Linear-forward-ndarray", lambda: linear()(arr(2, 3)), lambda: linear()(ten(2, 3)))
A("Linear-forward-readonly", lambda: linear()(readonly(arr(2, 3))), lambda: linear()(ten(2, 3)))
A("Linear-forward-strided", lambda: linear()(tr.Tensor(strided(arr(2, 3)))),
  lambda: linear()(ten(2, 3)))
A("Linear-forward-fortran", lambda: linear()(tr.Tensor(fortran(arr(2, 3)))),
  lambda: linear()(ten(2, 3)))
A("Linear-forward-empty-batch", lambda: linear()(ten(0, 3)).shape, lambda: (0, 2))
A("Linear-forward-1d", lambda: linear()(ten(3)), lambda: linear()(ten(1, 3)).reshape(2))

for label, bad in BAD_SIZES.items():
    R(f"Embedding-num_embeddings-{label}", lambda bad=bad: nn.Embedding(bad, 2), "Embedding",
      "num_embeddings")
R("Embedding-embedding_dim-float", lambda: nn.Embedding(4, 2.0), "Embedding", "embedding_dim")
R("Embedding-padding_idx-range", lambda: nn.Embedding(4, 2, padding_idx=4), "Embedding",
  "padding_idx")
R("Embedding-padding_idx-float", lambda: nn.Embedding(4, 2, padding_idx=1.0), "Embedding",
  "padding_idx")
R("Embedding-padding_idx-str", lambda: nn.Embedding(4, 2, padding_idx="0"), "Embedding",
  "padding_idx")
R("Embedding-dtype-int", lambda: nn.Embedding(4, 2, dtype=np.int32), "Embedding", "dtype")
EMB = lambda: nn.Embedding(5, 3, generator=0)  # noqa: E731
R("Embedding-forward-id-range", lambda: EMB()(np.array([1, 5])), "Embedding", "5")
R("Embedding-forward-id-negative", lambda: EMB()(np.array([1, -1])), "Embedding", "-1")
R("Embedding-forward-float-ids", lambda: EMB()(np.array([1.0, 2.0])), "Embedding", "float")
R("Embedding-forward-str", lambda: EMB()("ab"), "Embedding")
R("Embedding-forward-none", lambda: EMB()(None), "Embedding")
R("Embedding-forward-object", lambda: EMB()(np.array([1, None], dtype=object)), "Embedding")
R("Embedding-forward-bool-ids", lambda: EMB()(np.array([True, False])), "Embedding")
A("Embedding-forward-list", lambda: EMB()([[1, 4]]), lambda: EMB()(np.array([[1, 4]])))
A("Embedding-forward-int32", lambda: EMB()(np.array([1, 4], np.int32)),
  lambda: EMB()(np.array([1, 4])))
A("Embedding-forward-0d", lambda: EMB()(np.array(3)), lambda: EMB()(np.array([3])).reshape(3))
A("Embedding-forward-np-int", lambda: EMB()(np.int64(3)), lambda: EMB()(np.array(3)))
A("Embedding-forward-readonly", lambda: EMB()(readonly(np.array([0, 2]))),
  lambda: EMB()(np.array([0, 2])))
A("Embedding-forward-strided", lambda: EMB()(np.array([0, 9, 2, 9])[::2]),
  lambda: EMB()(np.array([0, 2])))
A("Embedding-forward-empty", lambda: EMB()(np.zeros((2, 0), np.int64)).shape,
  lambda: (2, 0, 3))

for label, bad in BAD_RATES.items():
    R(f"Dropout-p-{label}", lambda bad=bad: nn.Dropout(bad), "Dropout", "p")
A("Dropout-p-np-float", lambda: nn.Dropout(np.float32(0.5), generator=0)(ten(8)),
  lambda: nn.Dropout(0.5, generator=0)(ten(8)))
R("Sequential-not-module", lambda: nn.Sequential(linear(), 3), "Sequential")
R("ModuleList-not-module", lambda: nn.ModuleList([linear(), "x"]), "ModuleList")
R("Module-load_state_dict-none", lambda: linear().load_state_dict(None), "load_state_dict")
R("Module-load_state_dict-shape",
  lambda: linear().load_state_dict({"weight": np.ones((3, 3)), "bias": np.ones(2)}),
  "state_dict", "weight")
R("Module-load_state_dict-strict-str",
  lambda: linear().load_state_dict(linear().state_dict(), strict="no"), "load_state_dict",
  "strict")
R("Module-train-str", lambda: linear().train("no"), "train", "mode")
R("Module-requires_grad_-str", lambda: linear().requires_grad_("no"), "requires_grad_")
R("Module-to-bad", lambda: linear().to("tpu9"), "Linear.to", "tpu9")
R("Parameter-str", lambda: nn.Parameter("abc"), "Parameter")
R("Parameter-requires_grad-str", lambda: nn.Parameter(arr(2), requires_grad="no"),
  "Parameter", "requires_grad")

# ============================================================ recurrent layers and cells
LAYERS = {"RNN": nn.RNN, "GRU": nn.GRU, "LSTM": nn.LSTM}
for lname, cls in LAYERS.items():
    for label, bad in BAD_SIZES.items():
        R(f"{lname}-input_size-{label}", lambda cls=cls, bad=bad: cls(bad, 4), lname,
          "input_size")
        R(f"{lname}-hidden_size-{label}", lambda cls=cls, bad=bad: cls(3, bad), lname,
          "hidden_size")
    R(f"{lname}-num_layers-zero", lambda cls=cls: cls(3, 4, num_layers=0), lname, "num_layers")
    R(f"{lname}-num_layers-float", lambda cls=cls: cls(3, 4, num_layers=2.0), lname,
      "num_layers")
    for label, bad in BAD_RATES.items():
        R(f"{lname}-dropout-{label}", lambda cls=cls, bad=bad: cls(3, 4, dropout=bad), lname,
          "dropout")
    for flag in ("bias", "batch_first", "bidirectional"):
        for label in ("str_no", "none", "int2"):
            R(f"{lname}-{flag}-{label}",
              lambda cls=cls, flag=flag, label=label: cls(3, 4, **{flag: BAD_FLAGS[label]}),
              lname, flag)
    R(f"{lname}-engine", lambda cls=cls: cls(3, 4, engine="fast"), lname, "engine")
    R(f"{lname}-dtype-int", lambda cls=cls: cls(3, 4, dtype=np.int64), lname, "dtype")
    make = (lambda cls=cls, **kw: cls(3, 4, generator=0, **kw))
    R(f"{lname}-forward-rank", lambda make=make: make()(ten(5, 2, 1, 3)), lname, "input")
    R(f"{lname}-forward-size", lambda make=make: make()(ten(5, 2, 4)), lname, "input")
    R(f"{lname}-forward-str", lambda make=make: make()("abc"), lname, "input")
    R(f"{lname}-forward-none", lambda make=make: make()(None), lname, "input")
    R(f"{lname}-forward-float64", lambda make=make: make()(ten(5, 2, 3, dtype=np.float64)),
      lname, "float64")
    R(f"{lname}-forward-lengths-long", lambda make=make: make()(ten(5, 2, 3), lengths=[5, 6]),
      lname, "lengths")
    R(f"{lname}-forward-lengths-neg", lambda make=make: make()(ten(5, 2, 3), lengths=[5, -1]),
      lname, "lengths")
    R(f"{lname}-forward-lengths-float",
      lambda make=make: make()(ten(5, 2, 3), lengths=[5.0, 2.5]), lname, "lengths")
    R(f"{lname}-forward-lengths-shape",
      lambda make=make: make()(ten(5, 2, 3), lengths=[5, 4, 3]), lname, "lengths")
    R(f"{lname}-forward-lengths-str",
      lambda make=make: make()(ten(5, 2, 3), lengths="55"), lname, "lengths")
    bad_h = ((tr.zeros(1, 3, 4), tr.zeros(1, 3, 4)) if lname == "LSTM" else tr.zeros(1, 3, 4))
    R(f"{lname}-forward-hx-shape", lambda make=make, h=bad_h: make()(ten(5, 2, 3), h), lname,
      "(1, 3, 4)")
    R(f"{lname}-forward-hx-str", lambda make=make: make()(ten(5, 2, 3), "h0"), lname)

    def _run(make=make, x=None, **kw: Any) -> Any:
        return make()(ten(5, 2, 3) if x is None else x, **kw)

    A(f"{lname}-forward-list", lambda _run=_run: _run(x=arr(5, 2, 3).tolist()),
      lambda _run=_run: _run())
    A(f"{lname}-forward-ndarray", lambda _run=_run: _run(x=arr(5, 2, 3)),
      lambda _run=_run: _run())
    A(f"{lname}-forward-readonly", lambda _run=_run: _run(x=readonly(arr(5, 2, 3))),
      lambda _run=_run: _run())
    A(f"{lname}-forward-strided", lambda _run=_run: _run(x=tr.Tensor(strided(arr(5, 2, 3)))),
      lambda _run=_run: _run())
    A(f"{lname}-forward-lengths-np", lambda _run=_run: _run(lengths=np.array([5, 3])),
      lambda _run=_run: _run(lengths=[5, 3]))
    A(f"{lname}-forward-lengths-int32-readonly",
      lambda _run=_run: _run(lengths=readonly(np.array([5, 3], np.int32))),
      lambda _run=_run: _run(lengths=[5, 3]))
    A(f"{lname}-batch_first-np-bool", lambda cls=cls: cls(3, 4, batch_first=np.True_,
                                                          generator=0),
      lambda cls=cls: cls(3, 4, batch_first=True, generator=0))
    A(f"{lname}-dropout-np-float", lambda cls=cls: cls(3, 4, 2, dropout=np.float64(0.25),
                                                       generator=0).dropout,
      lambda: 0.25)
    A(f"{lname}-sizes-np-int", lambda cls=cls: cls(np.int64(3), np.int32(4), generator=0),
      lambda cls=cls: cls(3, 4, generator=0))

CELLS = {"RNNCell": nn.RNNCell, "GRUCell": nn.GRUCell, "LSTMCell": nn.LSTMCell}
for cname, cls in CELLS.items():
    for label in ("float", "str", "none", "neg"):
        R(f"{cname}-input_size-{label}", lambda cls=cls, label=label: cls(BAD_SIZES[label], 4),
          cname, "input_size")
        R(f"{cname}-hidden_size-{label}",
          lambda cls=cls, label=label: cls(3, BAD_SIZES[label]), cname, "hidden_size")
    for label in ("str_no", "none", "int2"):
        R(f"{cname}-bias-{label}", lambda cls=cls, label=label: cls(3, 4, bias=BAD_FLAGS[label]),
          cname, "bias")
    make = (lambda cls=cls: cls(3, 4, generator=0))
    R(f"{cname}-forward-size", lambda make=make: make()(ten(2, 5)), cname, "input")
    R(f"{cname}-forward-rank", lambda make=make: make()(ten(2, 2, 3)), cname, "input")
    R(f"{cname}-forward-str", lambda make=make: make()("x"), cname, "input")
    R(f"{cname}-forward-float64", lambda make=make: make()(ten(2, 3, dtype=np.float64)), cname,
      "float64")
    bad_h = ((tr.zeros(3, 4), tr.zeros(3, 4)) if cname == "LSTMCell" else tr.zeros(3, 4))
    R(f"{cname}-forward-hx-shape", lambda make=make, h=bad_h: make()(ten(2, 3), h), cname,
      "(3, 4)")
    A(f"{cname}-forward-list", lambda make=make: make()(arr(2, 3).tolist()),
      lambda make=make: make()(ten(2, 3)))
    A(f"{cname}-forward-readonly", lambda make=make: make()(readonly(arr(2, 3))),
      lambda make=make: make()(ten(2, 3)))
    A(f"{cname}-forward-1d", lambda make=make: make()(ten(3)),
      lambda make=make: _squeeze0(make()(ten(1, 3))))
    A(f"{cname}-forward-empty", lambda make=make: _shapes(make()(ten(0, 3))),
      lambda cname=cname: ((0, 4), (0, 4)) if cname == "LSTMCell" else (0, 4))


def _squeeze0(out: Any) -> Any:
    if isinstance(out, tuple):
        return tuple(o.reshape(o.shape[1:]) for o in out)
    return out.reshape(out.shape[1:])


def _shapes(out: Any) -> Any:
    return tuple(o.shape for o in out) if isinstance(out, tuple) else out.shape


for label in ("str_no", "none", "int2"):
    R(f"LSTMCell-peephole-{label}", lambda label=label: nn.LSTMCell(3, 4,
                                                                    peephole=BAD_FLAGS[label]),
      "LSTMCell", "peephole")
    R(f"LSTM-coupled-{label}", lambda label=label: nn.LSTM(3, 4, coupled=BAD_FLAGS[label]),
      "LSTM", "coupled")
R("RNNCell-nonlinearity", lambda: nn.RNNCell(3, 4, nonlinearity="sigmoid"), "RNNCell",
  "nonlinearity")
R("RNN-nonlinearity", lambda: nn.RNN(3, 4, nonlinearity=None), "RNN", "nonlinearity")
R("GRUCell-reset", lambda: nn.GRUCell(3, 4, reset="middle"), "GRUCell", "reset")
R("GRU-reset", lambda: nn.GRU(3, 4, reset=1), "GRU", "reset")
R("LSTM-forget_bias-str", lambda: nn.LSTM(3, 4, forget_bias="1"), "LSTM", "forget_bias")
R("LSTM-forget_bias-nan", lambda: nn.LSTM(3, 4, forget_bias=float("nan")), "LSTM",
  "forget_bias")
R("LSTMCell-forget_bias-inf", lambda: nn.LSTMCell(3, 4, forget_bias=float("inf")), "LSTMCell",
  "forget_bias")
R("RNN-track_state_grads-str", lambda: setattr(nn.RNN(3, 4), "track_state_grads", "no"),
  "track_state_grads")

# ============================================================ attention
ATT = lambda score="dot", **kw: nn.Attention(score, 4, 4, generator=0, **kw)  # noqa: E731
R("Attention-score", lambda: nn.Attention("cosine", 4, 4), "Attention", "score")
R("Attention-score-none", lambda: nn.Attention(None, 4, 4), "Attention", "score")
R("Attention-query_size-float", lambda: nn.Attention("bilinear", 4.0, 4), "Attention",
  "query_size")
R("Attention-key_size-str", lambda: nn.Attention("bilinear", 4, "4"), "Attention", "key_size")
R("Attention-dot-sizes", lambda: nn.Attention("dot", 3, 4), "Attention", "query_size")
R("Attention-bias-str", lambda: nn.Attention("additive", 4, 4, bias="no"), "Attention", "bias")
R("Attention-hidden-non-additive", lambda: nn.Attention("dot", 4, 4, hidden_size=3),
  "Attention", "hidden_size")
R("Attention-forward-key-shape", lambda: ATT()(ten(2, 4), ten(2, 5, 3), ten(2, 5, 4)),
  "Attention", "keys")
R("Attention-forward-batch", lambda: ATT()(ten(2, 4), ten(3, 5, 4), ten(3, 5, 4)),
  "Attention")
R("Attention-forward-float64", lambda: ATT()(ten(2, 4, dtype=np.float64), ten(2, 5, 4),
                                              ten(2, 5, 4)), "Attention", "float64")
R("Attention-forward-mask-shape",
  lambda: ATT()(ten(2, 4), ten(2, 5, 4), ten(2, 5, 4), key_padding_mask=np.zeros((2, 4), bool)),
  "Attention", "key_padding_mask")
R("Attention-forward-mask-float",
  lambda: ATT()(ten(2, 4), ten(2, 5, 4), ten(2, 5, 4), key_padding_mask=np.zeros((2, 5))),
  "Attention", "key_padding_mask")
R("Attention-forward-causal-str",
  lambda: ATT()(ten(2, 3, 4), ten(2, 3, 4), ten(2, 3, 4), causal="no"), "Attention", "causal")
R("Attention-forward-str", lambda: ATT()("q", ten(2, 5, 4), ten(2, 5, 4)), "Attention")
A("Attention-forward-mask-list",
  lambda: ATT()(ten(1, 4), ten(1, 3, 4), ten(1, 3, 4), key_padding_mask=[[False, False, True]]),
  lambda: ATT()(ten(1, 4), ten(1, 3, 4), ten(1, 3, 4),
                key_padding_mask=np.array([[False, False, True]])))
A("Attention-forward-readonly",
  lambda: ATT()(tr.Tensor(readonly(arr(2, 4))), ten(2, 5, 4), ten(2, 5, 4)),
  lambda: ATT()(ten(2, 4), ten(2, 5, 4), ten(2, 5, 4)))
A("Attention-forward-strided",
  lambda: ATT()(tr.Tensor(strided(arr(2, 4))), ten(2, 5, 4), ten(2, 5, 4)),
  lambda: ATT()(ten(2, 4), ten(2, 5, 4), ten(2, 5, 4)))
MHA = lambda **kw: nn.MultiheadAttention(4, 2, generator=0, **kw)  # noqa: E731
R("MultiheadAttention-heads-divide", lambda: nn.MultiheadAttention(5, 2), "MultiheadAttention",
  "num_heads")
R("MultiheadAttention-heads-zero", lambda: nn.MultiheadAttention(4, 0), "MultiheadAttention",
  "num_heads")
R("MultiheadAttention-embed_dim-float", lambda: nn.MultiheadAttention(4.0, 2),
  "MultiheadAttention", "embed_dim")
for label, bad in BAD_RATES.items():
    R(f"MultiheadAttention-dropout-{label}", lambda bad=bad: nn.MultiheadAttention(4, 2,
                                                                                   dropout=bad),
      "MultiheadAttention", "dropout")
for flag in ("bias", "add_bias_kv", "add_zero_attn", "batch_first"):
    R(f"MultiheadAttention-{flag}-str", lambda flag=flag: nn.MultiheadAttention(
        4, 2, **{flag: "no"}), "MultiheadAttention", flag)
R("MultiheadAttention-forward-shape", lambda: MHA()(ten(3, 2, 4), ten(3, 2, 5), ten(3, 2, 4)),
  "MultiheadAttention", "key")
R("MultiheadAttention-forward-float64",
  lambda: MHA()(ten(3, 2, 4, dtype=np.float64), ten(3, 2, 4), ten(3, 2, 4)),
  "MultiheadAttention", "float64")
R("MultiheadAttention-forward-need_weights-str",
  lambda: MHA()(ten(3, 2, 4), ten(3, 2, 4), ten(3, 2, 4), need_weights="no"),
  "MultiheadAttention", "need_weights")
R("MultiheadAttention-forward-mask-shape",
  lambda: MHA()(ten(3, 2, 4), ten(3, 2, 4), ten(3, 2, 4), key_padding_mask=np.zeros((3, 2), bool)),
  "MultiheadAttention", "key_padding_mask")
A("MultiheadAttention-forward-readonly",
  lambda: MHA()(tr.Tensor(readonly(arr(3, 2, 4))), ten(3, 2, 4), ten(3, 2, 4)),
  lambda: MHA()(ten(3, 2, 4), ten(3, 2, 4), ten(3, 2, 4)))
A("MultiheadAttention-batch_first-np-bool",
  lambda: MHA(batch_first=np.True_)(ten(2, 3, 4), ten(2, 3, 4), ten(2, 3, 4)),
  lambda: MHA(batch_first=True)(ten(2, 3, 4), ten(2, 3, 4), ten(2, 3, 4)))
R("CausalSelfAttention-heads", lambda: nn.CausalSelfAttention(5, 2), "CausalSelfAttention",
  "num_heads")
R("CausalSelfAttention-dropout-str", lambda: nn.CausalSelfAttention(4, 2, dropout="0.1"),
  "CausalSelfAttention", "dropout")
R("CausalSelfAttention-forward-rank",
  lambda: nn.CausalSelfAttention(4, 2, generator=0)(ten(3, 4)), "CausalSelfAttention")

# ============================================================ seq2seq and classifiers
S2S = lambda **kw: nn.Seq2Seq(8, 9, 4, 4, generator=0, **kw)  # noqa: E731
SRC = lambda: np.array([[4, 5, 6], [7, 4, 0]])  # noqa: E731
SRC_LEN = lambda: np.array([3, 2])  # noqa: E731
TGT = lambda: np.array([[2, 4, 5], [2, 6, 0]])  # noqa: E731
R("Seq2Seq-cell", lambda: nn.Seq2Seq(8, 9, 4, 4, cell="transformer"), "Seq2Seq", "cell")
R("Seq2Seq-decoder", lambda: nn.Seq2Seq(8, 9, 4, 4, decoder="x"), "Seq2Seq", "decoder")
R("Seq2Seq-bidirectional-str", lambda: nn.Seq2Seq(8, 9, 4, 4, bidirectional="no"), "Seq2Seq",
  "bidirectional")
R("Seq2Seq-src_vocab-float", lambda: nn.Seq2Seq(8.0, 9, 4, 4), "Seq2Seq", "src_vocab")
R("Seq2Seq-tgt_vocab-zero", lambda: nn.Seq2Seq(8, 0, 4, 4), "Seq2Seq", "tgt_vocab")
R("Seq2Seq-hidden-str", lambda: nn.Seq2Seq(8, 9, 4, "4"), "Seq2Seq", "hidden")
R("Seq2Seq-bos_id-range", lambda: nn.Seq2Seq(8, 9, 4, 4, bos_id=9), "Seq2Seq", "bos_id")
R("Seq2Seq-eos_id-float", lambda: nn.Seq2Seq(8, 9, 4, 4, eos_id=3.0), "Seq2Seq", "eos_id")
R("Seq2Seq-pad_id-neg", lambda: nn.Seq2Seq(8, 9, 4, 4, pad_id=-1), "Seq2Seq", "pad_id")
R("Seq2Seq-score", lambda: nn.Seq2Seq(8, 9, 4, 4, score="cosine"), "Seq2Seq", "score")
R("Seq2Seq-forward-src-range", lambda: S2S()(np.array([[4, 8, 6]]), [3], TGT()[:1]),
  "Seq2Seq", "8")
R("Seq2Seq-forward-tgt-range", lambda: S2S()(SRC(), SRC_LEN(), np.array([[2, 9, 1], [2, 1, 1]])),
  "Seq2Seq", "9")
R("Seq2Seq-forward-src-float", lambda: S2S()(SRC().astype(float), SRC_LEN(), TGT()), "Seq2Seq",
  "src")
R("Seq2Seq-forward-lengths-long", lambda: S2S()(SRC(), [3, 4], TGT()), "Seq2Seq",
  "src_lengths")
R("Seq2Seq-forward-batch", lambda: S2S()(SRC(), SRC_LEN(), TGT()[:1]), "Seq2Seq", "tgt_in")
R("Seq2Seq-forward-ratio-str",
  lambda: S2S()(SRC(), SRC_LEN(), TGT(), teacher_forcing_ratio="1"), "Seq2Seq",
  "teacher_forcing_ratio")
R("Seq2Seq-forward-ratio-big",
  lambda: S2S()(SRC(), SRC_LEN(), TGT(), teacher_forcing_ratio=1.5), "Seq2Seq",
  "teacher_forcing_ratio")
A("Seq2Seq-forward-lists", lambda: S2S()(SRC().tolist(), SRC_LEN().tolist(), TGT().tolist()),
  lambda: S2S()(SRC(), SRC_LEN(), TGT()))
A("Seq2Seq-forward-readonly", lambda: S2S()(readonly(SRC()), readonly(SRC_LEN()), TGT()),
  lambda: S2S()(SRC(), SRC_LEN(), TGT()))
A("Seq2Seq-forward-int32", lambda: S2S()(SRC().astype(np.int32), SRC_LEN(), TGT()),
  lambda: S2S()(SRC(), SRC_LEN(), TGT()))
R("teacher_forcing_schedule-kind", lambda: nn.teacher_forcing_schedule(1, 10, kind="x"),
  "teacher_forcing_schedule", "kind")
R("teacher_forcing_schedule-step-neg", lambda: nn.teacher_forcing_schedule(-1, 10),
  "teacher_forcing_schedule", "step")
R("teacher_forcing_schedule-total-zero", lambda: nn.teacher_forcing_schedule(0, 0),
  "teacher_forcing_schedule", "total_steps")
R("teacher_forcing_schedule-start-str", lambda: nn.teacher_forcing_schedule(0, 10, start="1"),
  "teacher_forcing_schedule", "start")
R("teacher_forcing_schedule-step-float", lambda: nn.teacher_forcing_schedule(1.5, 10),
  "teacher_forcing_schedule", "step")
A("teacher_forcing_schedule-np-int", lambda: nn.teacher_forcing_schedule(np.int64(3), 10),
  lambda: nn.teacher_forcing_schedule(3, 10))

CLS = lambda **kw: nn.SequenceClassifier(6, 3, 4, 2, generator=0, **kw)  # noqa: E731
R("SequenceClassifier-cell", lambda: nn.SequenceClassifier(6, 3, 4, 2, cell="cnn"),
  "SequenceClassifier", "cell")
R("SequenceClassifier-pooling", lambda: nn.SequenceClassifier(6, 3, 4, 2, pooling="avg"),
  "SequenceClassifier", "pooling")
R("SequenceClassifier-bidirectional-str",
  lambda: nn.SequenceClassifier(6, 3, 4, 2, bidirectional="no"), "SequenceClassifier",
  "bidirectional")
R("SequenceClassifier-dropout-str", lambda: nn.SequenceClassifier(6, 3, 4, 2, dropout="0.1"),
  "SequenceClassifier", "dropout")
R("SequenceClassifier-num_classes-float", lambda: nn.SequenceClassifier(6, 3, 4, 2.0),
  "SequenceClassifier", "num_classes")
R("SequenceClassifier-forward-id-range", lambda: CLS()(np.array([[1, 6]])),
  "SequenceClassifier", "6")
R("SequenceClassifier-forward-lengths", lambda: CLS()(np.array([[1, 2]]), [3]),
  "SequenceClassifier", "lengths")
R("SequenceClassifier-loss-labels-range",
  lambda: CLS().loss(np.array([[1, 2]]), np.array([2])), "SequenceClassifier", "2")
A("SequenceClassifier-forward-list", lambda: CLS()([[1, 2, 3]]),
  lambda: CLS()(np.array([[1, 2, 3]])))
A("SequenceClassifier-forward-lengths-np", lambda: CLS()(np.array([[1, 2, 3]]), np.array([2])),
  lambda: CLS()(np.array([[1, 2, 3]]), [2]))
TAG = lambda **kw: nn.SequenceTagger(6, 3, 4, 2, generator=0, **kw)  # noqa: E731
R("SequenceTagger-cell", lambda: nn.SequenceTagger(6, 3, 4, 2, cell=None), "SequenceTagger",
  "cell")
R("SequenceTagger-bidirectional-str", lambda: nn.SequenceTagger(6, 3, 4, 2,
                                                               bidirectional="yes"),
  "SequenceTagger", "bidirectional")
R("SequenceTagger-forward-id-range", lambda: TAG()(np.array([[1, 9]])), "SequenceTagger", "9")
A("SequenceTagger-forward-list", lambda: TAG()([[1, 2, 3]]), lambda: TAG()(np.array([[1, 2, 3]])))
R("accuracy-shape", lambda: nn.accuracy(ten(3, 2), np.array([0, 1])), "accuracy")
R("accuracy-targets-float", lambda: nn.accuracy(ten(3, 2), np.array([0.0, 1.0, 1.0])),
  "accuracy", "targets")
R("accuracy-ignore_index-str", lambda: nn.accuracy(ten(3, 2), np.array([0, 1, 1]),
                                                   ignore_index="x"), "accuracy",
  "ignore_index")
A("accuracy-targets-list", lambda: nn.accuracy(ten(3, 2), [0, 1, 1]),
  lambda: nn.accuracy(ten(3, 2), np.array([0, 1, 1])))
A("accuracy-logits-ndarray", lambda: nn.accuracy(arr(3, 2), [0, 1, 1]),
  lambda: nn.accuracy(ten(3, 2), np.array([0, 1, 1])))

# ============================================================ nn.init
init = nn.init
P = lambda *shape: nn.Parameter(np.zeros(shape or (4, 3), np.float32))  # noqa: E731
R("init.calculate_gain-unknown", lambda: init.calculate_gain("swish"), "calculate_gain",
  "nonlinearity")
R("init.calculate_gain-param-str", lambda: init.calculate_gain("leaky_relu", "0.1"),
  "calculate_gain", "param")
R("init.uniform_-a-str", lambda: init.uniform_(P(), "0", 1), "uniform_", "a")
R("init.uniform_-b-nan", lambda: init.uniform_(P(), 0, float("nan")), "uniform_", "b")
R("init.uniform_-a-gt-b", lambda: init.uniform_(P(), 1, 0), "uniform_")
R("init.uniform_-t-list", lambda: init.uniform_([1.0, 2.0]), "uniform_")
R("init.normal_-std-neg", lambda: init.normal_(P(), 0, -1), "normal_", "std")
R("init.normal_-mean-str", lambda: init.normal_(P(), "0"), "normal_", "mean")
R("init.normal_-std-inf", lambda: init.normal_(P(), 0, float("inf")), "normal_", "std")
R("init.constant_-val-str", lambda: init.constant_(P(), "1"), "constant_", "val")
R("init.constant_-val-complex", lambda: init.constant_(P(), 1j), "constant_", "val")
R("init.constant_-t-none", lambda: init.constant_(None, 1.0), "constant_")
R("init.eye_-3d", lambda: init.eye_(P(2, 2, 2)), "eye_")
R("init.xavier_uniform_-1d", lambda: init.xavier_uniform_(P(4)), "xavier_uniform_")
R("init.xavier_normal_-gain-str", lambda: init.xavier_normal_(P(), gain="1"), "xavier_normal_",
  "gain")
R("init.kaiming_uniform_-mode", lambda: init.kaiming_uniform_(P(), mode="fan_avg"),
  "kaiming_uniform_", "mode")
R("init.kaiming_normal_-nonlinearity", lambda: init.kaiming_normal_(P(), nonlinearity="x"),
  "kaiming_normal_", "nonlinearity")
R("init.kaiming_uniform_-a-str", lambda: init.kaiming_uniform_(P(), a="0"), "kaiming_uniform_",
  "a")
R("init.orthogonal_-1d", lambda: init.orthogonal_(P(4)), "orthogonal_")
R("init.orthogonal_-gain-nan", lambda: init.orthogonal_(P(), gain=float("nan")), "orthogonal_",
  "gain")
R("init.orthogonal_blocks_-num_blocks", lambda: init.orthogonal_blocks_(P(6, 2), 4),
  "orthogonal_blocks_", "num_blocks")
R("init.orthogonal_blocks_-num_blocks-float", lambda: init.orthogonal_blocks_(P(6, 2), 3.0),
  "orthogonal_blocks_", "num_blocks")
R("init.rnn_default_-hidden-zero", lambda: init.rnn_default_(P(), 0), "rnn_default_",
  "hidden_size")
R("init.rnn_default_-hidden-str", lambda: init.rnn_default_(P(), "4"), "rnn_default_",
  "hidden_size")
R("init.set_forget_bias_-gate_order", lambda: init.set_forget_bias_(P(16), 4, gate_order="x"),
  "set_forget_bias_", "gate_order")
R("init.set_forget_bias_-size", lambda: init.set_forget_bias_(P(15), 4), "set_forget_bias_")
R("init.set_forget_bias_-value-str", lambda: init.set_forget_bias_(P(16), 4, value="1"),
  "set_forget_bias_", "value")
R("init.spectral_radius-nonsquare", lambda: init.spectral_radius(arr(3, 4)), "spectral_radius")
R("init.spectral_radius-nan", lambda: init.spectral_radius(np.full((2, 2), np.nan)),
  "spectral_radius")
R("init.spectral_radius-str", lambda: init.spectral_radius("W"), "spectral_radius")
R("init.scale_to_spectral_radius_-rho-nan",
  lambda: init.scale_to_spectral_radius_(nn.Parameter(arr(3, 3)), float("nan")),
  "scale_to_spectral_radius_", "rho")
R("init.scale_to_spectral_radius_-rho-str",
  lambda: init.scale_to_spectral_radius_(nn.Parameter(arr(3, 3)), "1"),
  "scale_to_spectral_radius_", "rho")
R("init.scale_to_spectral_radius_-zero-matrix",
  lambda: init.scale_to_spectral_radius_(nn.Parameter(np.zeros((3, 3), np.float32)), 1.0),
  "scale_to_spectral_radius_")
A("init.uniform_-np-bounds",
  lambda: init.uniform_(P(), np.float32(-0.5), np.float64(0.5), generator=0),
  lambda: init.uniform_(P(), -0.5, 0.5, generator=0))
A("init.normal_-int-std", lambda: init.normal_(P(), 0, 1, generator=0),
  lambda: init.normal_(P(), 0.0, 1.0, generator=0))
A("init.spectral_radius-list", lambda: init.spectral_radius([[0.5, 0.0], [0.0, 0.25]]),
  lambda: init.spectral_radius(np.array([[0.5, 0.0], [0.0, 0.25]])))
A("init.constant_-np-float", lambda: init.constant_(P(), np.float64(0.5)),
  lambda: init.constant_(P(), 0.5))

# ============================================================ nn.utils


def params_with_grad(readonly_grad: bool = False) -> list:
    ps = [nn.Parameter(arr(3)), nn.Parameter(arr(2, 2, seed=1))]
    for k, p in enumerate(ps):
        g = np.full(p.shape, 3.0 + k, np.float32)
        if readonly_grad:
            g.flags.writeable = False
        p.grad = g
    return ps


def clipped(max_norm: Any, **kw: Any) -> tuple:
    ps = params_with_grad()
    total = nn.utils.clip_grad_norm_(ps, max_norm, **kw)
    return total, [p.grad.array.copy() for p in ps]


R("clip_grad_norm_-readonly-grad", lambda: nn.utils.clip_grad_norm_(
    params_with_grad(readonly_grad=True), 1.0), "clip_grad_norm_", "read-only")
R("clip_grad_value_-readonly-grad", lambda: nn.utils.clip_grad_value_(
    params_with_grad(readonly_grad=True), 1.0), "clip_grad_value_", "read-only")
for label, bad in {"str": "1", "nan": float("nan"), "neg": -1.0, "none": None,
                   "complex": 1j}.items():
    R(f"clip_grad_norm_-max_norm-{label}",
      lambda bad=bad: nn.utils.clip_grad_norm_(params_with_grad(), bad), "clip_grad_norm_",
      "max_norm")
    R(f"clip_grad_value_-clip_value-{label}",
      lambda bad=bad: nn.utils.clip_grad_value_(params_with_grad(), bad), "clip_grad_value_",
      "clip_value")
R("clip_grad_norm_-norm_type-str", lambda: nn.utils.clip_grad_norm_(params_with_grad(), 1.0,
                                                                    norm_type="fro"),
  "clip_grad_norm_", "norm_type")
R("clip_grad_norm_-norm_type-zero", lambda: nn.utils.clip_grad_norm_(params_with_grad(), 1.0,
                                                                     norm_type=0),
  "clip_grad_norm_", "norm_type")
R("clip_grad_norm_-error_if_nonfinite-str",
  lambda: nn.utils.clip_grad_norm_(params_with_grad(), 1.0, error_if_nonfinite="no"),
  "clip_grad_norm_", "error_if_nonfinite")
R("clip_grad_norm_-params-int", lambda: nn.utils.clip_grad_norm_(3, 1.0), "clip_grad_norm_",
  "parameters")
R("clip_grad_norm_-params-ndarray", lambda: nn.utils.clip_grad_norm_([arr(3)], 1.0),
  "clip_grad_norm_", "parameters")
# .grad is a Tensor property now: a list is refused where it is assigned, naming .grad
R("clip_grad_norm_-grad-list", lambda: _set_grad_and(lambda p: nn.utils.clip_grad_norm_([p], 1),
                                                     [1.0, 2.0, 3.0]),
  "grad", "list")
R("clip_grad_norm_-nonfinite", lambda: _set_grad_and(
    lambda p: nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True),
    np.array([1.0, np.nan, 0.0], np.float32)), "clip_grad_norm_", "non-finite")
R("get_total_norm-str", lambda: nn.utils.get_total_norm("abc"), "get_total_norm")
R("grad_norm-norm_type-str", lambda: nn.utils.grad_norm(params_with_grad(), "x"), "grad_norm",
  "norm_type")
R("clip_grads_with_norm_-total-neg",
  lambda: nn.utils.clip_grads_with_norm_(params_with_grad(), 1.0, -1.0),
  "clip_grads_with_norm_", "total_norm")
R("clip_grads_with_norm_-total-str",
  lambda: nn.utils.clip_grads_with_norm_(params_with_grad(), 1.0, "2"),
  "clip_grads_with_norm_", "total_norm")
R("parameters_to_vector-empty", lambda: nn.utils.parameters_to_vector([]),
  "parameters_to_vector")
R("parameters_to_vector-int", lambda: nn.utils.parameters_to_vector(3), "parameters_to_vector")
R("vector_to_parameters-size", lambda: nn.utils.vector_to_parameters(ten(4), [P(2, 3)]),
  "vector_to_parameters")
R("vector_to_parameters-list", lambda: nn.utils.vector_to_parameters([1.0, 2.0], [P(2)]),
  "vector_to_parameters", "vec")
A("clip_grad_norm_-max_norm-np-float", lambda: clipped(np.float32(1.0)), lambda: clipped(1.0))
A("clip_grad_norm_-max_norm-0d", lambda: clipped(np.array(1.0)), lambda: clipped(1.0))
A("clip_grad_norm_-max_norm-int", lambda: clipped(1), lambda: clipped(1.0))
A("clip_grad_norm_-norm_type-str-inf", lambda: clipped(1.0, norm_type="inf"),
  lambda: clipped(1.0, norm_type=float("inf")))
A("clip_grad_norm_-error_if_nonfinite-np-bool",
  lambda: clipped(1.0, error_if_nonfinite=np.True_),
  lambda: clipped(1.0, error_if_nonfinite=True))
A("clip_grad_norm_-generator", lambda: _clip_gen(), lambda: clipped(1.0))
A("clip_grad_norm_-strided-grad", lambda: _clip_strided(), lambda: clipped(1.0))
A("clip_grad_norm_-no-grads", lambda: nn.utils.clip_grad_norm_([P(3)], 1.0).item(),
  lambda: 0.0)


def _set_grad_and(fn: Callable, grad: Any) -> Any:
    p = nn.Parameter(np.zeros(3, np.float32))
    p.grad = grad
    return fn(p)


def _clip_gen() -> tuple:
    ps = params_with_grad()
    total = nn.utils.clip_grad_norm_((p for p in ps), 1.0)
    return total, [p.grad.array.copy() for p in ps]


def _clip_strided() -> tuple:
    ps = params_with_grad()
    for p in ps:
        p.grad = strided(p.grad.reshape(-1)).reshape(p.shape) if p.grad.ndim == 1 else \
            np.asfortranarray(p.grad)
    total = nn.utils.clip_grad_norm_(ps, 1.0)
    return total, [p.grad.array.copy() for p in ps]

# ============================================================ optim (optim/*)
optim = tr.optim
OPTIMS = {"SGD": optim.SGD, "Adam": optim.Adam, "AdamW": optim.AdamW, "RMSprop": optim.RMSprop,
          "Adagrad": optim.Adagrad}
for oname, cls in OPTIMS.items():
    for label, bad in {"str": "0.1", "nan": float("nan"), "neg": -0.1, "none": None,
                       "complex": 0.1j, "inf": float("inf")}.items():
        R(f"{oname}-lr-{label}", lambda cls=cls, bad=bad: cls([P(2)], lr=bad), oname, "lr")
    R(f"{oname}-weight_decay-neg", lambda cls=cls: cls([P(2)], lr=0.1, weight_decay=-1),
      oname, "weight_decay")
    R(f"{oname}-weight_decay-str", lambda cls=cls: cls([P(2)], lr=0.1, weight_decay="0"),
      oname, "weight_decay")
    R(f"{oname}-params-empty", lambda cls=cls: cls([], lr=0.1), oname, "parameter")
    R(f"{oname}-params-tensor", lambda cls=cls: cls(P(2), lr=0.1), oname, "params")
    R(f"{oname}-params-ndarray-item", lambda cls=cls: cls([arr(2)], lr=0.1), oname, "parameter")
    R(f"{oname}-params-none", lambda cls=cls: cls(None, lr=0.1), oname, "params")
    R(f"{oname}-maximize-str", lambda cls=cls: cls([P(2)], lr=0.1, maximize="no"), oname,
      "maximize")
    R(f"{oname}-load_state_dict-empty", lambda cls=cls: cls([P(2)], lr=0.1).load_state_dict({}),
      "load_state_dict", "param_groups")
    R(f"{oname}-load_state_dict-none",
      lambda cls=cls: cls([P(2)], lr=0.1).load_state_dict(None), "load_state_dict")
    R(f"{oname}-step-closure-int", lambda cls=cls: cls([P(2)], lr=0.1).step(closure=3),
      "step", "closure")
    R(f"{oname}-zero_grad-set_to_none-str",
      lambda cls=cls: cls([P(2)], lr=0.1).zero_grad(set_to_none="no"), "zero_grad",
      "set_to_none")
    A(f"{oname}-lr-np-float", lambda cls=cls: _one_step(cls, np.float32(0.5)),
      lambda cls=cls: _one_step(cls, 0.5))
    A(f"{oname}-lr-int", lambda cls=cls: _one_step(cls, 1), lambda cls=cls: _one_step(cls, 1.0))
    A(f"{oname}-params-generator", lambda cls=cls: _one_step(cls, 0.5, gen=True),
      lambda cls=cls: _one_step(cls, 0.5))
    A(f"{oname}-readonly-grad", lambda cls=cls: _one_step(cls, 0.5, ro=True),
      lambda cls=cls: _one_step(cls, 0.5))


def _one_step(cls: type, lr: Any, gen: bool = False, ro: bool = False) -> np.ndarray:
    p = nn.Parameter(np.array([1.0, -2.0, 3.0], np.float32))
    g = np.array([0.5, 0.25, -1.0], np.float32)
    if ro:
        g.flags.writeable = False
    p.grad = g
    opt = cls((q for q in [p]) if gen else [p], lr=lr)
    opt.step()
    return p.numpy().copy()


R("SGD-momentum-nan", lambda: optim.SGD([P(2)], lr=0.1, momentum=float("nan")), "SGD",
  "momentum")
R("SGD-nesterov-str", lambda: optim.SGD([P(2)], lr=0.1, momentum=0.9, nesterov="no"), "SGD",
  "nesterov")
R("SGD-nesterov-no-momentum", lambda: optim.SGD([P(2)], lr=0.1, nesterov=True), "SGD",
  "Nesterov")
for oname in ("Adam", "AdamW"):
    cls = OPTIMS[oname]
    R(f"{oname}-betas-float", lambda cls=cls: cls([P(2)], betas=0.9), oname, "betas")
    R(f"{oname}-betas-one", lambda cls=cls: cls([P(2)], betas=(0.9,)), oname, "betas")
    R(f"{oname}-betas-big", lambda cls=cls: cls([P(2)], betas=(1.5, 0.9)), oname, "betas")
    R(f"{oname}-betas-str", lambda cls=cls: cls([P(2)], betas=("0.9", 0.99)), oname, "betas")
    R(f"{oname}-eps-neg", lambda cls=cls: cls([P(2)], eps=-1e-8), oname, "eps")
    R(f"{oname}-amsgrad-str", lambda cls=cls: cls([P(2)], amsgrad="no"), oname, "amsgrad")
    A(f"{oname}-betas-list", lambda cls=cls: _adam_step(cls, [0.8, 0.9]),
      lambda cls=cls: _adam_step(cls, (0.8, 0.9)))
    A(f"{oname}-betas-np", lambda cls=cls: _adam_step(cls, np.array([0.8, 0.9])),
      lambda cls=cls: _adam_step(cls, (0.8, 0.9)))


def _adam_step(cls: type, betas: Any) -> np.ndarray:
    p = nn.Parameter(np.array([1.0, -2.0], np.float32))
    p.grad = np.array([0.5, -0.25], np.float32)
    cls([p], lr=0.1, betas=betas).step()
    return p.numpy().copy()


R("RMSprop-alpha-neg", lambda: optim.RMSprop([P(2)], alpha=-0.5), "RMSprop", "alpha")
R("RMSprop-centered-str", lambda: optim.RMSprop([P(2)], centered="no"), "RMSprop", "centered")
R("Adagrad-lr_decay-neg", lambda: optim.Adagrad([P(2)], lr_decay=-1), "Adagrad", "lr_decay")
R("Adagrad-initial_accumulator_value-str",
  lambda: optim.Adagrad([P(2)], initial_accumulator_value="0"), "Adagrad",
  "initial_accumulator_value")
sched = optim.lr_scheduler
OPT = lambda: optim.SGD([P(2)], lr=0.1)  # noqa: E731
R("StepLR-step_size-float", lambda: sched.StepLR(OPT(), 2.5), "StepLR", "step_size")
R("StepLR-step_size-zero", lambda: sched.StepLR(OPT(), 0), "StepLR", "step_size")
R("StepLR-gamma-str", lambda: sched.StepLR(OPT(), 2, gamma="0.1"), "StepLR", "gamma")
R("StepLR-gamma-nan", lambda: sched.StepLR(OPT(), 2, gamma=float("nan")), "StepLR", "gamma")
R("StepLR-optimizer-none", lambda: sched.StepLR(None, 2), "StepLR", "optimizer")
R("ExponentialLR-gamma-neg", lambda: sched.ExponentialLR(OPT(), -0.5), "ExponentialLR", "gamma")
R("ExponentialLR-last_epoch-float", lambda: sched.ExponentialLR(OPT(), 0.5, last_epoch=1.5),
  "ExponentialLR", "last_epoch")
R("CosineAnnealingLR-T_max-zero", lambda: sched.CosineAnnealingLR(OPT(), 0),
  "CosineAnnealingLR", "T_max")
R("CosineAnnealingLR-eta_min-str", lambda: sched.CosineAnnealingLR(OPT(), 5, eta_min="0"),
  "CosineAnnealingLR", "eta_min")
R("StepLR-str-lr-optimizer", lambda: _steplr_str_lr(), "lr")
R("MultiStepLR-milestones-int", lambda: sched.MultiStepLR(OPT(), 3), "MultiStepLR", "milestones")
R("MultiStepLR-milestones-float", lambda: sched.MultiStepLR(OPT(), [2.5]), "MultiStepLR",
  "milestones")
R("LambdaLR-lr_lambda-float", lambda: sched.LambdaLR(OPT(), 0.5), "LambdaLR", "lr_lambda")
R("ReduceLROnPlateau-factor-one", lambda: sched.ReduceLROnPlateau(OPT(), factor=1.0),
  "ReduceLROnPlateau", "factor")
R("ReduceLROnPlateau-mode-str", lambda: sched.ReduceLROnPlateau(OPT(), mode="low"),
  "ReduceLROnPlateau", "mode")
R("ReduceLROnPlateau-step-no-metrics", lambda: sched.ReduceLROnPlateau(OPT()).step(),
  "ReduceLROnPlateau.step", "metrics")
R("LBFGS-history_size-zero", lambda: optim.LBFGS([P(2)], history_size=0), "LBFGS",
  "history_size")
R("LBFGS-line_search_fn-str", lambda: optim.LBFGS([P(2)], line_search_fn="armijo"), "LBFGS",
  "line_search_fn")
R("LBFGS-step-no-closure", lambda: optim.LBFGS([P(2)]).step(), "LBFGS.step", "closure")
R("SGD-fused-true", lambda: optim.SGD([P(2)], lr=0.1, fused=True), "SGD", "fused")
R("Adam-differentiable-true", lambda: optim.Adam([P(2)], differentiable=True), "Adam",
  "differentiable")
A("SGD-foreach-true", lambda: _sgd_step(foreach=True), lambda: _sgd_step())
A("MultiStepLR-milestones-np", lambda: _sched_lrs(lambda o: sched.MultiStepLR(o, np.array([1, 3]))),
  lambda: _sched_lrs(lambda o: sched.MultiStepLR(o, [1, 3])))


def _sgd_step(**kw: Any) -> np.ndarray:
    p = P(2)
    o = optim.SGD([p], lr=0.1, **kw)
    p.grad = np.ones(2, dtype=p.dtype)
    o.step()
    return p.numpy()
A("StepLR-step_size-np-int", lambda: _sched_lrs(lambda o: sched.StepLR(o, np.int64(2))),
  lambda: _sched_lrs(lambda o: sched.StepLR(o, 2)))
A("ExponentialLR-gamma-np", lambda: _sched_lrs(lambda o: sched.ExponentialLR(o, np.float32(0.5))),
  lambda: _sched_lrs(lambda o: sched.ExponentialLR(o, 0.5)))


def _steplr_str_lr() -> None:
    o = optim.SGD([P(2)], lr="0.1")
    s = sched.StepLR(o, 1)
    o.step()
    s.step()


def _sched_lrs(make: Callable) -> list:
    o = optim.SGD([P(2)], lr=1.0)
    s = make(o)
    out = []
    for _ in range(4):
        o.step()
        s.step()
        out.append(o.param_groups[0]["lr"])
    return out


# ============================================================ save / load (io.py)
def _tmp(name: str) -> str:
    import tempfile

    d = tempfile.mkdtemp(prefix="corpus_")
    return os.path.join(d, name)


def _selfref() -> dict:
    d: dict = {"a": np.ones(2)}
    d["self"] = d
    return d


R("save-module", lambda: tr.save(linear(), _tmp("a.npz")), "save", "state_dict")
R("save-pickle_module", lambda: tr.save({"a": 1}, _tmp("a.npz"), pickle_module=os),
  "save", "pickle_module")
R("save-path-none", lambda: tr.save({"a": np.ones(2)}, None), "save", "path")
R("save-path-int", lambda: tr.save({"a": np.ones(2)}, 3), "save", "path")
R("save-self-reference", lambda: tr.save(_selfref(), _tmp("a.npz")), "save")
R("save-object-array", lambda: tr.save({"a": np.array([1, None], dtype=object)}, _tmp("a.npz")),
  "save", "object")
R("save-key-float", lambda: tr.save({1.5: np.ones(2)}, _tmp("a.npz")), "save", "key")
R("save-compress-str", lambda: tr.save({"a": np.ones(2)}, _tmp("a.npz"), compress="no"),
  "save", "compress")
R("save-value-lambda", lambda: tr.save({"a": lambda: 1}, _tmp("a.npz")), "save")
R("load-missing", lambda: tr.load(_tmp("missing.npz")), "load")
R("load-path-none", lambda: tr.load(None), "load", "path")
R("load-not-npz", lambda: tr.load(_write_text(_tmp("bad.npz"), "hello")), "load")
R("load-directory", lambda: tr.load(os.path.dirname(_tmp("x"))), "load")
R("load-weights_only-false", lambda: tr.load(_tmp("x.npz"), weights_only=False), "load",
  "weights_only")
R("load-map_location-mps", lambda: tr.load(_tmp("x.npz"), map_location="mps"), "load",
  "map_location")


def _write_text(path: str, text: str) -> str:
    with open(path, "w") as fh:
        fh.write(text)
    return path


def _roundtrip(obj: Any) -> Any:
    path = _tmp("r.npz")
    tr.save(obj, path)
    return tr.load(path)


A("save-readonly-array", lambda: _roundtrip({"a": readonly(arr(2, 3))})["a"],
  lambda: arr(2, 3))
A("save-strided-array", lambda: _roundtrip({"a": strided(arr(2, 3))})["a"], lambda: arr(2, 3))
A("save-0d-array", lambda: _roundtrip({"a": np.array(2.5)})["a"], lambda: np.array(2.5))
A("save-empty-array", lambda: _roundtrip({"a": np.zeros((0, 3))})["a"],
  lambda: np.zeros((0, 3)))
A("save-pathlike", lambda: _roundtrip_pathlike(), lambda: arr(2))
A("save-list-top-level", lambda: _roundtrip([arr(2)])[0], lambda: arr(2))
A("save-int-key-top-level", lambda: _roundtrip({1: arr(2)})[1], lambda: arr(2))


def _roundtrip_pathlike() -> np.ndarray:
    import pathlib

    path = pathlib.Path(_tmp("p.npz"))
    tr.save({"a": arr(2)}, path)
    return tr.load(path)["a"]

# ============================================================ decoding (decoding.py)
dec = tr.decoding
S2S_SRC = lambda: np.array([[4, 5, 6], [7, 4, 1]])  # noqa: E731
DECODERS = {
    "greedy_decode": lambda m, s, **kw: dec.greedy_decode(m, s, max_len=4, **kw),
    "sample_decode": lambda m, s, **kw: dec.sample_decode(m, s, max_len=4, generator=0, **kw),
    "beam_search": lambda m, s, **kw: dec.beam_search(m, s, max_len=4, beam_width=2, **kw),
}
for dname, run in DECODERS.items():
    R(f"{dname}-model-linear", lambda run=run: run(linear(), S2S_SRC()), dname, "model")
    R(f"{dname}-model-none", lambda run=run: run(None, S2S_SRC()), dname, "model")
    R(f"{dname}-src-range", lambda run=run: run(S2S(), np.array([[4, 8, 6]])), dname, "8")
    R(f"{dname}-src-negative", lambda run=run: run(S2S(), np.array([[4, -1, 6]])), dname, "-1")
    R(f"{dname}-src-float", lambda run=run: run(S2S(), S2S_SRC().astype(float)), dname, "src")
    R(f"{dname}-src-str", lambda run=run: run(S2S(), "abc"), dname, "src")
    R(f"{dname}-src-3d", lambda run=run: run(S2S(), S2S_SRC()[None]), dname, "src")
    R(f"{dname}-src_lengths-long", lambda run=run: run(S2S(), S2S_SRC(), src_lengths=[3, 4]),
      dname, "src_lengths")
    R(f"{dname}-src_lengths-shape", lambda run=run: run(S2S(), S2S_SRC(), src_lengths=[3]),
      dname, "src_lengths")
    R(f"{dname}-src_lengths-float", lambda run=run: run(S2S(), S2S_SRC(),
                                                        src_lengths=[3.0, 2.5]),
      dname, "src_lengths")
    A(f"{dname}-src-list", lambda run=run: run(S2S(), S2S_SRC().tolist()),
      lambda run=run: run(S2S(), S2S_SRC()))
    A(f"{dname}-src-readonly", lambda run=run: run(S2S(), readonly(S2S_SRC())),
      lambda run=run: run(S2S(), S2S_SRC()))
    A(f"{dname}-src-strided", lambda run=run: run(S2S(), np.repeat(S2S_SRC(), 2, axis=1)[:, ::2]),
      lambda run=run: run(S2S(), S2S_SRC()))
    A(f"{dname}-src-int32", lambda run=run: run(S2S(), S2S_SRC().astype(np.int32)),
      lambda run=run: run(S2S(), S2S_SRC()))
    A(f"{dname}-src_lengths-np", lambda run=run: run(S2S(), S2S_SRC(),
                                                     src_lengths=np.array([3, 2])),
      lambda run=run: run(S2S(), S2S_SRC(), src_lengths=[3, 2]))
for dname in DECODERS:
    fn = getattr(dec, dname)
    for label, bad in {"zero": 0, "float": 2.5, "str": "4", "none": None, "bool": True}.items():
        R(f"{dname}-max_len-{label}", lambda fn=fn, bad=bad: fn(S2S(), S2S_SRC(), max_len=bad),
          dname, "max_len")
    A(f"{dname}-max_len-np-int", lambda fn=fn: _dec(fn, max_len=np.int64(3)),
      lambda fn=fn: _dec(fn, max_len=3))


def _dec(fn: Callable, **kw: Any) -> Any:
    if fn is dec.sample_decode:
        kw.setdefault("generator", 0)
    return fn(S2S(), S2S_SRC(), **kw)


for label, bad in {"nan": float("nan"), "inf": float("inf"), "str": "0.5", "neg": -1.0,
                   "none": None}.items():
    R(f"beam_search-alpha-{label}", lambda bad=bad: dec.beam_search(S2S(), S2S_SRC(),
                                                                    max_len=3, alpha=bad),
      "beam_search", "alpha")
for label, bad in {"zero": 0, "float": 2.0, "str": "2", "neg": -1}.items():
    R(f"beam_search-beam_width-{label}",
      lambda bad=bad: dec.beam_search(S2S(), S2S_SRC(), max_len=3, beam_width=bad),
      "beam_search", "beam_width")
for label, bad in {"zero": 0.0, "neg": -1.0, "nan": float("nan"), "str": "1"}.items():
    R(f"sample_decode-temperature-{label}",
      lambda bad=bad: dec.sample_decode(S2S(), S2S_SRC(), max_len=3, temperature=bad),
      "sample_decode", "temperature")
R("sample_decode-top_k-zero", lambda: dec.sample_decode(S2S(), S2S_SRC(), top_k=0),
  "sample_decode", "top_k")
R("sample_decode-top_k-float", lambda: dec.sample_decode(S2S(), S2S_SRC(), top_k=2.5),
  "sample_decode", "top_k")
A("beam_search-alpha-np", lambda: _dec(dec.beam_search, max_len=3, alpha=np.float32(0.5)),
  lambda: _dec(dec.beam_search, max_len=3, alpha=0.5))
A("beam_search-alpha-int", lambda: _dec(dec.beam_search, max_len=3, alpha=1),
  lambda: _dec(dec.beam_search, max_len=3, alpha=1.0))
A("beam_search-beam_width-np", lambda: _dec(dec.beam_search, max_len=3,
                                            beam_width=np.int32(2)),
  lambda: _dec(dec.beam_search, max_len=3, beam_width=2))
A("sample_decode-temperature-np", lambda: _dec(dec.sample_decode, temperature=np.float64(0.5)),
  lambda: _dec(dec.sample_decode, temperature=0.5))
A("sample_decode-top_k-np", lambda: _dec(dec.sample_decode, top_k=np.int64(3)),
  lambda: _dec(dec.sample_decode, top_k=3))

# ============================================================ monitor (monitor.py)
mon = tr.monitor
W3 = lambda: np.array([[0.5, 0.1, 0.0], [0.0, 0.4, 0.2], [0.1, 0.0, 0.3]])  # noqa: E731
R("GradientMonitor-int", lambda: mon.GradientMonitor(42), "GradientMonitor", "model")
R("GradientMonitor-none", lambda: mon.GradientMonitor(None), "GradientMonitor", "model")
R("GradientMonitor-tensor", lambda: mon.GradientMonitor(ten(2)), "GradientMonitor", "model")
R("GradientMonitor-record-pre-str", lambda: mon.GradientMonitor(linear()).record(
    pre_clip_norm="1"), "record", "pre_clip_norm")
R("GradientMonitor-record-clipped-str", lambda: mon.GradientMonitor(linear()).record(
    clipped="no"), "record", "clipped")
R("GradientMonitor-state_norms-kind", lambda: mon.GradientMonitor(nn.GRU(3, 4)).state_norms(
    kind="c"), "state_norms", "kind")
R("GradientMonitor-state_norms-layer-float", lambda: mon.GradientMonitor(
    nn.GRU(3, 4)).state_norms(layer=0.0), "state_norms", "layer")
R("pascanu_bound-negative-distance", lambda: mon.pascanu_bound(W3(), [-1]), "pascanu_bound",
  "distances")
R("pascanu_bound-nonsquare", lambda: mon.pascanu_bound(arr(3, 4), [1, 2]), "pascanu_bound",
  "W_hh")
R("pascanu_bound-float-distance", lambda: mon.pascanu_bound(W3(), [1.5]), "pascanu_bound",
  "distances")
R("pascanu_bound-distances-str", lambda: mon.pascanu_bound(W3(), "12"), "pascanu_bound",
  "distances")
R("pascanu_bound-distances-int", lambda: mon.pascanu_bound(W3(), 3), "pascanu_bound",
  "distances")
R("pascanu_bound-gamma-str", lambda: mon.pascanu_bound(W3(), [1], gamma="1"), "pascanu_bound",
  "gamma")
R("pascanu_bound-gamma-nan", lambda: mon.pascanu_bound(W3(), [1], gamma=float("nan")),
  "pascanu_bound", "gamma")
R("pascanu_bound-gamma-neg", lambda: mon.pascanu_bound(W3(), [1], gamma=-1.0), "pascanu_bound",
  "gamma")
R("pascanu_bound-W-nan", lambda: mon.pascanu_bound(np.full((2, 2), np.nan), [1]),
  "pascanu_bound", "W_hh")
R("pascanu_bound-W-str", lambda: mon.pascanu_bound("W", [1]), "pascanu_bound", "W_hh")
R("spectral_radius-nonsquare", lambda: mon.spectral_radius(arr(3, 4)), "spectral_radius", "W")
R("spectral_radius-nan", lambda: mon.spectral_radius(np.full((2, 2), np.nan)),
  "spectral_radius", "W")
R("spectral_radius-inf", lambda: mon.spectral_radius(np.array([[np.inf, 0], [0, 1.0]])),
  "spectral_radius", "W")
R("spectral_radius-complex", lambda: mon.spectral_radius(np.eye(2) * 1j), "spectral_radius",
  "W")
R("spectral_radius-object", lambda: mon.spectral_radius(np.array([[1, None], [0, 1]],
                                                                 dtype=object)),
  "spectral_radius", "W")
R("spectral_radius-str", lambda: mon.spectral_radius("W"), "spectral_radius", "W")
R("singular_values-nan", lambda: mon.singular_values(np.full((2, 3), np.nan)),
  "singular_values", "W")
R("singular_values-1d", lambda: mon.singular_values(np.ones(3)), "singular_values", "W")
R("state_grad_norms-lengths-long", lambda: mon.state_grad_norms(arr(4, 2, 3), [4, 5]),
  "state_grad_norms", "lengths")
R("state_grad_norms-lengths-neg", lambda: mon.state_grad_norms(arr(4, 2, 3), [4, -1]),
  "state_grad_norms", "lengths")
R("state_grad_norms-lengths-shape", lambda: mon.state_grad_norms(arr(4, 2, 3), [4]),
  "state_grad_norms", "lengths")
R("state_grad_norms-lengths-float", lambda: mon.state_grad_norms(arr(4, 2, 3), [4.0, 2.5]),
  "state_grad_norms", "lengths")
R("state_grad_norms-grads-str", lambda: mon.state_grad_norms("abc"), "state_grad_norms",
  "grads")
R("state_grad_norms-grads-1d", lambda: mon.state_grad_norms(arr(4)), "state_grad_norms",
  "grads")
R("state_grad_norms-grads-object",
  lambda: mon.state_grad_norms(np.array([[1.0, None]], dtype=object)), "state_grad_norms",
  "grads")
R("state_grad_norms-grads-complex", lambda: mon.state_grad_norms(arr(2, 2) * 1j),
  "state_grad_norms", "grads")
A("state_grad_norms-lengths-np", lambda: mon.state_grad_norms(arr(4, 2, 3), np.array([4, 2])),
  lambda: mon.state_grad_norms(arr(4, 2, 3), [4, 2]))
A("state_grad_norms-tensor", lambda: mon.state_grad_norms(ten(4, 2, 3)),
  lambda: mon.state_grad_norms(arr(4, 2, 3)))
A("state_grad_norms-list", lambda: mon.state_grad_norms(arr(4, 2, 3).tolist()),
  lambda: mon.state_grad_norms(arr(4, 2, 3).astype(np.float64)))
A("state_grad_norms-strided", lambda: mon.state_grad_norms(strided(arr(4, 2, 3))),
  lambda: mon.state_grad_norms(arr(4, 2, 3)))
A("state_grad_norms-empty", lambda: mon.state_grad_norms(np.zeros((0, 2, 3))),
  lambda: np.zeros(0))
A("pascanu_bound-np-ints", lambda: mon.pascanu_bound(W3(), np.array([0, 1, 2])),
  lambda: mon.pascanu_bound(W3(), [0, 1, 2]))
A("pascanu_bound-range", lambda: mon.pascanu_bound(W3(), range(3)),
  lambda: mon.pascanu_bound(W3(), [0, 1, 2]))
A("pascanu_bound-tensor", lambda: mon.pascanu_bound(tr.Tensor(W3()), [1, 2]),
  lambda: mon.pascanu_bound(W3(), [1, 2]))
A("pascanu_bound-empty", lambda: mon.pascanu_bound(W3(), []), lambda: np.zeros(0))
A("spectral_radius-list", lambda: mon.spectral_radius(W3().tolist()),
  lambda: mon.spectral_radius(W3()))
A("spectral_radius-readonly", lambda: mon.spectral_radius(readonly(W3())),
  lambda: mon.spectral_radius(W3()))
A("spectral_radius-parameter", lambda: mon.spectral_radius(nn.Parameter(W3())),
  lambda: mon.spectral_radius(W3()))
R("jacobian_products-ord-str", lambda: mon.jacobian_products([W3()], ord="x"),
  "jacobian_products", "ord")
R("jacobian_products-nonsquare", lambda: mon.jacobian_products([arr(3, 2)]),
  "jacobian_products", "jacobians")
R("jacobian_products-mixed", lambda: mon.jacobian_products([W3(), np.eye(2)]),
  "jacobian_products", "jacobians")
R("jacobian_products-not-list", lambda: mon.jacobian_products(3), "jacobian_products",
  "jacobians")
A("jacobian_products-tuple", lambda: mon.jacobian_products((W3(), W3())),
  lambda: mon.jacobian_products([W3(), W3()]))
A("jacobian_products-array-stack", lambda: mon.jacobian_products(np.stack([W3(), W3()])),
  lambda: mon.jacobian_products([W3(), W3()]))
R("gradient_horizon-fraction-str", lambda: mon.gradient_horizon([1.0, 0.5], fraction="0.1"),
  "gradient_horizon", "fraction")
R("gradient_horizon-fraction-nan", lambda: mon.gradient_horizon([1.0, 0.5],
                                                                fraction=float("nan")),
  "gradient_horizon", "fraction")
R("gradient_horizon-2d", lambda: mon.gradient_horizon(np.ones((2, 2))), "gradient_horizon",
  "norms")
R("gradient_horizon-str", lambda: mon.gradient_horizon("abc"), "gradient_horizon", "norms")
A("gradient_horizon-np-fraction", lambda: mon.gradient_horizon([0.001, 0.5, 1.0],
                                                               np.float32(0.01)),
  lambda: mon.gradient_horizon([0.001, 0.5, 1.0], 0.01))
R("fit_decay_rate-2d", lambda: mon.fit_decay_rate(np.ones((2, 2))), "fit_decay_rate", "norms")
R("fit_decay_rate-str", lambda: mon.fit_decay_rate(["a", "b"]), "fit_decay_rate", "norms")
R("fit_decay_rate-one", lambda: mon.fit_decay_rate([1.0]), "fit_decay_rate", "norms")
A("fit_decay_rate-tensor", lambda: mon.fit_decay_rate(tr.Tensor(np.array([1.0, 0.5, 0.25]))),
  lambda: mon.fit_decay_rate([1.0, 0.5, 0.25]))
R("step_jacobians-linear", lambda: mon.step_jacobians(linear(), arr(4, 3)), "step_jacobians",
  "module")
R("step_jacobians-none", lambda: mon.step_jacobians(None, arr(4, 3)), "step_jacobians",
  "module")
R("step_jacobians-x-size", lambda: mon.step_jacobians(nn.RNN(3, 4), arr(4, 2)),
  "step_jacobians", "x")
R("step_jacobians-sample-range", lambda: mon.step_jacobians(nn.RNN(3, 4), arr(4, 2, 3),
                                                            sample=2),
  "step_jacobians", "sample")
R("step_jacobians-sample-float", lambda: mon.step_jacobians(nn.RNN(3, 4), arr(4, 2, 3),
                                                            sample=0.0),
  "step_jacobians", "sample")
R("step_jacobians-two-layers", lambda: mon.step_jacobians(nn.GRU(3, 4, 2), arr(4, 2, 3)),
  "step_jacobians")
R("step_jacobians-x-str", lambda: mon.step_jacobians(nn.RNN(3, 4), "abc"), "step_jacobians",
  "x")
R("step_jacobians-h0-shape", lambda: mon.step_jacobians(nn.RNN(3, 4), arr(4, 2, 3),
                                                        h0=np.zeros(5)),
  "step_jacobians", "h0")
A("step_jacobians-list", lambda: mon.step_jacobians(nn.RNN(3, 4, generator=0),
                                                    arr(4, 3).tolist()),
  lambda: mon.step_jacobians(nn.RNN(3, 4, generator=0), arr(4, 3)))
A("step_jacobians-sample-np", lambda: mon.step_jacobians(nn.GRU(3, 4, generator=0),
                                                         arr(4, 2, 3), sample=np.int64(1)),
  lambda: mon.step_jacobians(nn.GRU(3, 4, generator=0), arr(4, 2, 3), sample=1))

# ============================================================ training (training.py)
trn = tr.training


def _setup() -> tuple:
    model = linear()
    opt = optim.SGD(model.parameters(), lr=0.1)
    x, y = arr(4, 3), arr(4, 2, seed=1)

    def step_fn(i: int) -> tr.Tensor:
        return F.mse_loss(model(x), y)
    return model, opt, step_fn


def _fit(**kw: Any) -> Any:
    model, opt, step_fn = _setup()
    kw.setdefault("progress", False)
    steps = kw.pop("steps", 2)
    res = trn.fit(kw.pop("step_fn", step_fn), steps, kw.pop("optimizer", opt), **kw)
    return res, model


R("fit-step_fn-returns-float", lambda: _fit(step_fn=lambda i: 1.5), "fit", "step_fn")
R("fit-step_fn-returns-none", lambda: _fit(step_fn=lambda i: None), "fit", "step_fn")
R("fit-step_fn-returns-ndarray", lambda: _fit(step_fn=lambda i: np.float32(1.0)), "fit",
  "step_fn")
R("fit-step_fn-nonscalar", lambda: _fit(step_fn=lambda i: linear()(ten(4, 3))), "fit",
  "step_fn")
R("fit-step_fn-not-callable", lambda: _fit(step_fn=3), "fit", "step_fn")
R("fit-optimizer-none", lambda: _fit(optimizer=None), "fit", "optimizer")
R("fit-optimizer-str", lambda: _fit(optimizer="sgd"), "fit", "optimizer")
R("fit-optimizer-module", lambda: _fit(optimizer=linear()), "fit", "optimizer")
for label, bad in {"float": 2.5, "str": "3", "neg": -1, "none": None, "bool": True}.items():
    R(f"fit-steps-{label}", lambda bad=bad: _fit(steps=bad), "fit", "steps")
for label, bad in {"str": "1", "nan": float("nan"), "neg": -1.0, "zero-list": [1.0]}.items():
    R(f"fit-clip-{label}", lambda bad=bad: _fit(clip=bad), "fit", "clip")
for label in ("str_no", "int2"):
    R(f"fit-progress-{label}", lambda label=label: _fit(progress=BAD_FLAGS[label]), "fit",
      "progress")
# progress=None is the default now: bars on a terminal only (training.progress_enabled)
A("fit-progress-none", lambda: _fit(progress=None), lambda: _fit(progress=False))
R("fit-callback-int", lambda: _fit(callback=3), "fit", "callback")
R("fit-monitor-int", lambda: _fit(monitor=3), "fit", "monitor")
R("fit-validate-int", lambda: _fit(validate=3, val_every=1), "fit", "validate")
R("fit-validate-returns-str", lambda: _fit(validate=lambda: "x", val_every=1), "fit",
  "validate")
R("fit-validate-no-val_every", lambda: _fit(validate=lambda: 1.0), "fit", "val_every")
R("fit-val_every-float", lambda: _fit(validate=lambda: 1.0, val_every=1.5), "fit", "val_every")
R("fit-patience-zero", lambda: _fit(validate=lambda: 1.0, val_every=1, patience=0), "fit",
  "patience")
R("fit-patience-no-validate", lambda: _fit(patience=2), "fit", "patience")
R("fit-tol-str", lambda: _fit(validate=lambda: 1.0, val_every=1, patience=2, tol="0"),
  "tol")
R("fit-desc-int", lambda: _fit(desc=3), "fit", "desc")
R("EarlyStopping-patience-float", lambda: trn.EarlyStopping(2.5), "EarlyStopping", "patience")
R("EarlyStopping-tol-nan", lambda: trn.EarlyStopping(2, float("nan")), "EarlyStopping", "tol")
R("EarlyStopping-update-str", lambda: trn.EarlyStopping(2).update("1.0"), "EarlyStopping",
  "value")
A("fit-steps-np-int", lambda: _fit(steps=np.int64(2)), lambda: _fit(steps=2))
A("fit-clip-np-float", lambda: _fit(clip=np.float32(0.5)), lambda: _fit(clip=0.5))
A("fit-clip-int", lambda: _fit(clip=1), lambda: _fit(clip=1.0))
A("fit-progress-np-bool", lambda: _fit(progress=np.False_), lambda: _fit(progress=False))
A("fit-steps-zero", lambda: _fit(steps=0), lambda: _fit(steps=0))
A("fit-step_fn-0d-tensor-shape-1", lambda: _fit_loss_shape((1,)), lambda: _fit_loss_shape(()))
A("fit-validate-np-float", lambda: _fit(validate=lambda: np.float32(1.0), val_every=1),
  lambda: _fit(validate=lambda: 1.0, val_every=1))


def _fit_loss_shape(shape: tuple) -> Any:
    model, opt, _ = _setup()
    x, y = arr(4, 3), arr(4, 2, seed=1)
    return trn.fit(lambda i: F.mse_loss(model(x), y).reshape(shape), 2, opt, progress=False), \
        model


trunc = tr.truncation


def _stream(**kw: Any) -> Any:
    rnn = nn.RNN(1, 3, generator=0)
    head = linear(3, 1)
    params = list(rnn.parameters()) + list(head.parameters())
    opt = optim.SGD(params, lr=0.1)
    x = kw.pop("x", arr(8, 1, 1))

    def forward(xw: Any, h: Any) -> tuple:
        out, h = rnn(xw, h)
        return out, h

    def loss_fn(out: Any, start: int, stop: int) -> Any:
        return F.mse_loss(head(out), np.zeros(head(out).shape, np.float32))
    kw.setdefault("progress", False)
    res = trn.train_stream(kw.pop("forward", forward), x, kw.pop("loss_fn", loss_fn),
                           kw.pop("optimizer", opt), kw.pop("schedule", trunc.chunked(4)), **kw)
    return res, rnn


R("train_stream-x-list", lambda: _stream(x=arr(8, 1, 1).tolist()), "train_stream", "x")
R("train_stream-x-str", lambda: _stream(x="abc"), "train_stream", "x")
R("train_stream-schedule-int", lambda: _stream(schedule=4), "train_stream", "schedule")
R("train_stream-schedule-none", lambda: _stream(schedule=None), "train_stream", "schedule")
R("train_stream-optimizer-none", lambda: _stream(optimizer=None), "train_stream", "optimizer")
R("train_stream-epochs-float", lambda: _stream(epochs=1.5), "train_stream", "epochs")
R("train_stream-epochs-neg", lambda: _stream(epochs=-1), "train_stream", "epochs")
R("train_stream-time_axis-range", lambda: _stream(time_axis=5), "train_stream", "time_axis")
R("train_stream-time_axis-float", lambda: _stream(time_axis=0.0), "train_stream", "time_axis")
R("train_stream-loss_fn-returns-float", lambda: _stream(loss_fn=lambda o, a, b: 1.0),
  "loss_fn")
R("train_stream-forward-not-callable", lambda: _stream(forward=3), "train_stream", "forward")
R("train_stream-clip-str", lambda: _stream(clip="1"), "train_stream", "clip")
R("train_stream-progress-str", lambda: _stream(progress="no"), "train_stream", "progress")
A("train_stream-x-readonly", lambda: _stream(x=readonly(arr(8, 1, 1))), lambda: _stream())
A("train_stream-x-strided", lambda: _stream(x=strided(arr(8, 1, 1).reshape(8, 1, 1))),
  lambda: _stream())
A("train_stream-epochs-np", lambda: _stream(epochs=np.int64(1)), lambda: _stream())
A("train_stream-time_axis-np", lambda: _stream(time_axis=np.int64(0)), lambda: _stream())
R("chunked-k-zero", lambda: trunc.chunked(0), "chunked", "k")
R("chunked-k-float", lambda: trunc.chunked(2.5), "chunked", "k")
R("williams_peng-k2-lt-k1", lambda: trunc.williams_peng(4, 2), "williams_peng", "k2")
R("williams_peng-k1-str", lambda: trunc.williams_peng("4", 4), "williams_peng", "k1")
R("windows-T-neg", lambda: trunc.windows(-1, trunc.chunked(2)), "windows", "T")
R("windows-schedule-int", lambda: trunc.windows(8, 2), "windows", "schedule")
A("windows-T-np", lambda: trunc.windows(np.int64(8), trunc.chunked(3)),
  lambda: trunc.windows(8, trunc.chunked(3)))

# ============================================================ bptt kernels
bp = tr.bptt
R("rnn_forward-x-rank", lambda: bp.rnn_forward(arr(2, 3), arr(2, 4), arr(4, 3), arr(4, 4)),
  "rnn_forward", "x")
R("rnn_forward-h0-shape", lambda: bp.rnn_forward(arr(5, 2, 3), arr(3, 4), arr(4, 3),
                                                 arr(4, 4)), "rnn_forward", "h0")
R("rnn_forward-nonlinearity", lambda: bp.rnn_forward(arr(5, 2, 3), arr(2, 4), arr(4, 3),
                                                     arr(4, 4), nonlinearity="sigmoid"),
  "rnn_forward", "nonlinearity")
R("rnn_forward-reverse-str", lambda: bp.rnn_forward(arr(5, 2, 3), arr(2, 4), arr(4, 3),
                                                    arr(4, 4), reverse="no"),
  "rnn_forward", "reverse")
R("rnn_forward-lengths-long", lambda: bp.rnn_forward(arr(5, 2, 3), arr(2, 4), arr(4, 3),
                                                     arr(4, 4), lengths=[6, 1]),
  "rnn_forward", "lengths")
R("rnn_forward-x-list", lambda: bp.rnn_forward(arr(5, 2, 3).tolist(), arr(2, 4), arr(4, 3),
                                               arr(4, 4)), "rnn_forward", "x")
R("rnn_forward-dtype-mix", lambda: bp.rnn_forward(arr(5, 2, 3, dtype=np.float64), arr(2, 4),
                                                  arr(4, 3), arr(4, 4)), "rnn_forward")
R("gru_forward-reset", lambda: bp.gru_forward(arr(5, 2, 3), arr(2, 4), arr(12, 3), arr(12, 4),
                                              reset="x"), "gru_forward", "reset")
R("gru_forward-weight-shape", lambda: bp.gru_forward(arr(5, 2, 3), arr(2, 4), arr(8, 3),
                                                     arr(12, 4)), "gru_forward", "weight_ih")
R("lstm_forward-c0-shape", lambda: bp.lstm_forward(arr(5, 2, 3), arr(2, 4), arr(2, 5),
                                                   arr(16, 3), arr(16, 4)),
  "lstm_forward", "c0")
R("lstm_forward-coupled-str", lambda: bp.lstm_forward(arr(5, 2, 3), arr(2, 4), arr(2, 4),
                                                      arr(16, 3), arr(16, 4), coupled="no"),
  "lstm_forward", "coupled")
R("rnn_backward-cache-wrong", lambda: bp.rnn_backward(arr(5, 2, 4), None, "cache"),
  "rnn_backward", "cache")
R("rnn_step_backward-cache-wrong", lambda: bp.rnn_step_backward(arr(2, 4), None),
  "rnn_step_backward", "cache")
A("rnn_forward-readonly", lambda: bp.rnn_forward(readonly(arr(5, 2, 3)), arr(2, 4), arr(4, 3),
                                                 arr(4, 4))[:2],
  lambda: bp.rnn_forward(arr(5, 2, 3), arr(2, 4), arr(4, 3), arr(4, 4))[:2])
A("rnn_forward-strided", lambda: bp.rnn_forward(strided(arr(5, 2, 3)), arr(2, 4), arr(4, 3),
                                                arr(4, 4))[:2],
  lambda: bp.rnn_forward(arr(5, 2, 3), arr(2, 4), arr(4, 3), arr(4, 4))[:2])
A("rnn_forward-reverse-np-bool", lambda: bp.rnn_forward(arr(5, 2, 3), arr(2, 4), arr(4, 3),
                                                        arr(4, 4), reverse=np.True_)[:2],
  lambda: bp.rnn_forward(arr(5, 2, 3), arr(2, 4), arr(4, 3), arr(4, 4), reverse=True)[:2])

# ============================================================ lm (lm/*)
lm = tr.lm
RNNLM = lambda **kw: lm.RNNLM(7, 3, 4, generator=0, **kw)  # noqa: E731
FFLM = lambda **kw: lm.FeedForwardLM(7, 2, 3, 4, generator=0, **kw)  # noqa: E731
IDS = lambda: np.array([[4, 5, 6, 1], [2, 3, 4, 5]])  # noqa: E731
R("RNNLM-vocab_size-float", lambda: lm.RNNLM(7.0, 3, 4), "RNNLM", "vocab_size")
R("RNNLM-hidden_size-str", lambda: lm.RNNLM(7, 3, "4"), "RNNLM", "hidden_size")
R("RNNLM-cell", lambda: lm.RNNLM(7, 3, 4, cell="transformer"), "RNNLM", "cell")
R("RNNLM-dropout-str", lambda: lm.RNNLM(7, 3, 4, dropout="0.1"), "RNNLM", "dropout")
R("RNNLM-dropout-big", lambda: lm.RNNLM(7, 3, 4, dropout=1.5), "RNNLM", "dropout")
R("RNNLM-tie_weights-str", lambda: lm.RNNLM(7, 4, 4, tie_weights="no"), "RNNLM", "tie_weights")
R("RNNLM-tie_weights-sizes", lambda: lm.RNNLM(7, 3, 4, tie_weights=True), "RNNLM",
  "tie_weights")
R("RNNLM-init_range-neg", lambda: lm.RNNLM(7, 3, 4, init_range=-0.1), "RNNLM", "init_range")
R("RNNLM-init_range-str", lambda: lm.RNNLM(7, 3, 4, init_range="0.1"), "RNNLM", "init_range")
R("RNNLM-padding_idx-range", lambda: lm.RNNLM(7, 3, 4, padding_idx=7), "RNNLM", "padding_idx")
R("RNNLM-forward-id-range", lambda: RNNLM()(np.array([[1, 7]])), "RNNLM", "7")
R("RNNLM-forward-id-neg", lambda: RNNLM()(np.array([[1, -3]])), "RNNLM", "-3")
R("RNNLM-forward-float-ids", lambda: RNNLM()(np.array([[1.0, 2.0]])), "RNNLM", "ids")
R("RNNLM-forward-str", lambda: RNNLM()("abc"), "RNNLM", "ids")
R("RNNLM-forward-lengths-long", lambda: RNNLM()(IDS(), lengths=[4, 5]), "RNNLM", "lengths")
R("RNNLM-forward-state-str", lambda: RNNLM()(IDS(), state="h"), "RNNLM", "state")
A("RNNLM-forward-list", lambda: RNNLM()(IDS().tolist()), lambda: RNNLM()(IDS()))
A("RNNLM-forward-readonly", lambda: RNNLM()(readonly(IDS())), lambda: RNNLM()(IDS()))
A("RNNLM-forward-int32", lambda: RNNLM()(IDS().astype(np.int32)), lambda: RNNLM()(IDS()))
A("RNNLM-forward-strided", lambda: RNNLM()(np.repeat(IDS(), 2, axis=1)[:, ::2]),
  lambda: RNNLM()(IDS()))
A("RNNLM-tie_weights-np-bool", lambda: lm.RNNLM(7, 4, 4, tie_weights=np.True_, generator=0),
  lambda: lm.RNNLM(7, 4, 4, tie_weights=True, generator=0))
R("FeedForwardLM-context_size-zero", lambda: lm.FeedForwardLM(7, 0, 3, 4), "FeedForwardLM",
  "context_size")
R("FeedForwardLM-direct-str", lambda: lm.FeedForwardLM(7, 2, 3, 4, direct="no"),
  "FeedForwardLM", "direct")
R("FeedForwardLM-bos_id-range", lambda: lm.FeedForwardLM(7, 2, 3, 4, bos_id=7),
  "FeedForwardLM", "bos_id")
R("FeedForwardLM-forward-shape", lambda: FFLM()(np.array([[1, 2, 3]])), "FeedForwardLM",
  "contexts")
R("FeedForwardLM-forward-range", lambda: FFLM()(np.array([[1, 9]])), "FeedForwardLM", "9")
A("FeedForwardLM-forward-list", lambda: FFLM()([[1, 2]]), lambda: FFLM()(np.array([[1, 2]])))
R("lm_loss-logits-rank", lambda: lm.lm_loss(ten(2, 7), np.zeros(2, int)), "lm_loss", "logits")
R("lm_loss-targets-shape", lambda: lm.lm_loss(ten(2, 3, 7), np.zeros((2, 2), int)), "lm_loss",
  "targets")
R("lm_loss-targets-range", lambda: lm.lm_loss(ten(1, 2, 7), np.array([[1, 7]])), "lm_loss",
  "7")
R("lm_loss-logits-list", lambda: lm.lm_loss([[[1.0, 2.0]]], [[0]]), "lm_loss", "logits")
A("lm_loss-targets-list", lambda: lm.lm_loss(ten(1, 2, 7), [[1, 6]]),
  lambda: lm.lm_loss(ten(1, 2, 7), np.array([[1, 6]])))
R("make_contexts-context_size-zero", lambda: lm.make_contexts([1, 2, 3], 0), "make_contexts",
  "context_size")
R("make_contexts-ids-neg", lambda: lm.make_contexts([1, -2, 3], 2), "make_contexts", "ids")
R("make_contexts-ids-float", lambda: lm.make_contexts([1.5, 2.0], 2), "make_contexts", "ids")
R("make_contexts-ids-2d", lambda: lm.make_contexts(np.ones((2, 2), int), 2), "make_contexts",
  "ids")
A("make_contexts-np", lambda: lm.make_contexts(np.array([1, 2, 3]), np.int64(2)),
  lambda: lm.make_contexts([1, 2, 3], 2))
R("generate-max_new_tokens-neg", lambda: lm.generate(RNNLM(), [2, 4], -1), "generate",
  "max_new_tokens")
R("generate-max_new_tokens-float", lambda: lm.generate(RNNLM(), [2, 4], 2.5), "generate",
  "max_new_tokens")
R("generate-strategy", lambda: lm.generate(RNNLM(), [2, 4], 3, strategy="beam"), "generate",
  "strategy")
R("generate-temperature-zero", lambda: lm.generate(RNNLM(), [2, 4], 3, strategy="sample",
                                                   temperature=0), "generate", "temperature")
R("generate-prompt-range", lambda: lm.generate(RNNLM(), [2, 9], 3), "generate", "9")
R("generate-prompt-empty", lambda: lm.generate(RNNLM(), [], 3), "generate", "prompt_ids")
R("generate-model-linear", lambda: lm.generate(linear(), [2, 4], 3), "generate", "model")
R("generate-eos_id-range", lambda: lm.generate(RNNLM(), [2, 4], 3, eos_id=9), "generate",
  "eos_id")
R("generate-return_log_probs-str", lambda: lm.generate(RNNLM(), [2, 4], 3,
                                                       return_log_probs="no"),
  "generate", "return_log_probs")
A("generate-prompt-np", lambda: lm.generate(RNNLM(), np.array([2, 4]), np.int64(3)),
  lambda: lm.generate(RNNLM(), [2, 4], 3))
A("generate-prompt-readonly", lambda: lm.generate(RNNLM(), readonly(np.array([2, 4])), 3),
  lambda: lm.generate(RNNLM(), [2, 4], 3))
A("generate-zero-tokens", lambda: lm.generate(RNNLM(), [2, 4], 0),
  lambda: lm.generate(RNNLM(), [2, 4], 0))
R("sample_logits-strategy", lambda: lm.sample_logits(arr(5), strategy="x"), "sample_logits",
  "strategy")
R("sample_logits-top_k-zero", lambda: lm.sample_logits(arr(5), top_k=0), "sample_logits",
  "top_k")
R("sample_logits-temperature-str", lambda: lm.sample_logits(arr(5), temperature="1"),
  "sample_logits", "temperature")
R("sample_logits-logits-3d", lambda: lm.sample_logits(arr(2, 2, 5)), "sample_logits", "logits")
R("sample_logits-logits-str", lambda: lm.sample_logits("abc"), "sample_logits", "logits")
R("sample_logits-logits-nan", lambda: lm.sample_logits(np.full(5, np.nan), generator=0),
  "sample_logits", "logits")
A("sample_logits-list", lambda: lm.sample_logits(arr(5).tolist(), strategy="greedy"),
  lambda: lm.sample_logits(arr(5).astype(np.float64), strategy="greedy"))
A("sample_logits-temperature-0d", lambda: lm.sample_logits(arr(5), temperature=np.array(0.5),
                                                           generator=0),
  lambda: lm.sample_logits(arr(5), temperature=0.5, generator=0))
R("perplexity-num_tokens-zero", lambda: lm.perplexity(3.0, 0), "perplexity", "num_tokens")
R("perplexity-num_tokens-float", lambda: lm.perplexity(3.0, 2.5), "perplexity", "num_tokens")
R("perplexity-nll-str", lambda: lm.perplexity("3", 2), "perplexity", "NLL")
R("perplexity-nll-nan", lambda: lm.perplexity(float("nan"), 2), "perplexity", "NLL")
R("perplexity-nll-neg", lambda: lm.perplexity(-1.0, 2), "perplexity", "NLL")
R("bits_per_token-num_tokens-str", lambda: lm.bits_per_token(3.0, "2"), "bits_per_token",
  "num_tokens")
A("perplexity-np", lambda: lm.perplexity(np.float32(3.0), np.int64(2)),
  lambda: lm.perplexity(3.0, 2))
R("with_boundaries-bos-neg", lambda: lm.with_boundaries([[4, 5]], bos_id=-1), "with_boundaries",
  "bos_id")
R("with_boundaries-sentence-float", lambda: lm.with_boundaries([[4.5, 5]]), "with_boundaries")
R("with_boundaries-not-list", lambda: lm.with_boundaries(5), "with_boundaries", "sentences")
A("with_boundaries-np", lambda: lm.with_boundaries([np.array([4, 5])]),
  lambda: lm.with_boundaries([[4, 5]]))
R("NGramLM-order-zero", lambda: lm.NGramLM(0), "NGramLM", "order")
R("NGramLM-order-float", lambda: lm.NGramLM(2.5), "NGramLM", "order")
R("NGramLM-smoothing", lambda: lm.NGramLM(2, smoothing="x"), "NGramLM", "smoothing")
R("NGramLM-k-neg", lambda: lm.NGramLM(2, smoothing="add_k", k=-1), "NGramLM", "k")
R("NGramLM-discount-big", lambda: lm.NGramLM(2, discount=1.5), "NGramLM", "discount")
R("NGramLM-discount-str", lambda: lm.NGramLM(2, discount="0.5"), "NGramLM", "discount")
NG = lambda: lm.NGramLM(2).fit([np.array([4, 5, 6, 4, 5])], 7)  # noqa: E731
R("NGramLM-fit-ids-range", lambda: lm.NGramLM(2).fit([np.array([4, 9])], 7), "NGramLM", "9")
R("NGramLM-fit-ids-float", lambda: lm.NGramLM(2).fit([np.array([4.5, 5.0])], 7), "NGramLM")
R("NGramLM-fit-vocab-str", lambda: lm.NGramLM(2).fit([np.array([4, 5])], "7"), "NGramLM",
  "vocab_size")
R("NGramLM-prob-unfitted", lambda: lm.NGramLM(2).prob([4], 5), "NGramLM", "fit")
R("NGramLM-prob-next-range", lambda: NG().prob([4], 7), "NGramLM.prob", "7")
R("NGramLM-log_probs-range", lambda: NG().log_probs(np.array([4, 8])), "NGramLM", "8")
A("NGramLM-log_probs-list", lambda: NG().log_probs([4, 5]),
  lambda: NG().log_probs(np.array([4, 5])))
A("NGramLM-prob-np-int", lambda: NG().prob(np.array([4]), np.int64(5)),
  lambda: NG().prob([4], 5))
R("evaluate_lm-model_fn-int", lambda: lm.evaluate_lm(3, [np.array([4, 5])]), "evaluate_lm",
  "model_fn")
R("evaluate_lm-data-float", lambda: lm.evaluate_lm(lambda ids: np.zeros((len(ids), 7)),
                                                   [np.array([4.5, 5.0])]), "evaluate_lm")
R("evaluate_lm-output-shape", lambda: lm.evaluate_lm(lambda ids: np.zeros((2, 3)),
                                                     [np.array([4, 5, 6])]), "evaluate_lm")
R("evaluate_lm-check_normalized-str",
  lambda: lm.evaluate_lm(lambda ids: np.full((len(ids), 7), -np.log(7.0)), [np.array([4, 5])],
                         check_normalized="no"), "evaluate_lm", "check_normalized")

# ============================================================ data (data/*)
data = tr.data
for fname, call in {
    "adding_problem-n": lambda bad: data.adding_problem(bad, 5),
    "adding_problem-T": lambda bad: data.adding_problem(4, bad),
    "copy_problem-n": lambda bad: data.copy_problem(bad, 3),
    "copy_problem-delay": lambda bad: data.copy_problem(4, bad),
    "recall_first-n": lambda bad: data.recall_first(bad, 3),
    "recall_first-distractors": lambda bad: data.recall_first(4, bad),
    "parity_task-n": lambda bad: data.parity_task(bad),
    "balanced_parens_task-n": lambda bad: data.balanced_parens_task(bad),
    "repeat_tagging_task-n": lambda bad: data.repeat_tagging_task(bad),
    "batchify-batch_size": lambda bad: data.batchify(np.arange(10), bad),
    "lm_stream-batch_size": lambda bad: data.lm_stream(np.arange(10), bad),
}.items():
    func, arg = fname.split("-")
    for label in ("float", "str", "none"):
        R(f"{fname}-{label}", lambda call=call, label=label: call(BAD_SIZES[label]), func, arg)
R("adding_problem-dtype-int", lambda: data.adding_problem(4, 5, dtype=np.int64),
  "adding_problem", "dtype")
R("adding_problem-T-one", lambda: data.adding_problem(4, 1), "adding_problem", "T")
A("adding_problem-np-int", lambda: data.adding_problem(np.int64(4), np.int32(5), generator=0),
  lambda: data.adding_problem(4, 5, generator=0))
R("copy_problem-num_symbols-zero", lambda: data.copy_problem(4, 3, num_symbols=0),
  "copy_problem", "num_symbols")
R("recall_first-vocab_size-one", lambda: data.recall_first(4, 3, vocab_size=1), "recall_first",
  "vocab_size")
R("Vocab-tokens-int", lambda: data.Vocab(3), "Vocab", "tokens")
R("Vocab-tokens-non-str", lambda: data.Vocab(["a", 3]), "Vocab")
R("Vocab-decode-range", lambda: data.Vocab(["a", "b"]).decode([0, 99]), "decode", "99")
R("Vocab-decode-float", lambda: data.Vocab(["a", "b"]).decode([0.5]), "decode")
R("Vocab-id_to_token-range", lambda: data.Vocab(["a"]).id_to_token(50), "id_to_token", "50")
R("Vocab-encode-str-tokens", lambda: data.Vocab(["a"]).encode(3), "encode", "tokens")
R("Vocab-build-min_freq-zero", lambda: data.Vocab.build(["a", "b"], min_freq=0), "build",
  "min_freq")
R("Vocab-build-max_size-float", lambda: data.Vocab.build(["a", "b"], max_size=2.5), "build",
  "max_size")
A("Vocab-decode-np", lambda: data.Vocab(["a", "b"]).decode(np.array([4, 5])),
  lambda: data.Vocab(["a", "b"]).decode([4, 5]))
A("Vocab-decode-readonly", lambda: data.Vocab(["a", "b"]).decode(readonly(np.array([4, 5]))),
  lambda: data.Vocab(["a", "b"]).decode([4, 5]))
A("Vocab-tokens-tuple", lambda: data.Vocab(("a", "b")).tokens,
  lambda: data.Vocab(["a", "b"]).tokens)
for tname in ("CharTokenizer", "WordTokenizer"):
    cls = getattr(data, tname)
    for label in ("str_no", "none", "int2"):
        R(f"{tname}-lowercase-{label}", lambda cls=cls, label=label: cls(
            lowercase=BAD_FLAGS[label]), tname, "lowercase")
    R(f"{tname}-tokenize-int", lambda cls=cls: cls().tokenize(3), "tokenize", "text")
    R(f"{tname}-tokenize-bytes", lambda cls=cls: cls().tokenize(b"ab"), "tokenize", "text")
    A(f"{tname}-lowercase-np-bool", lambda cls=cls: cls(lowercase=np.True_).tokenize("Ab C"),
      lambda cls=cls: cls(lowercase=True).tokenize("Ab C"))
R("batchify-ids-2d", lambda: data.batchify(np.ones((2, 5), int), 2), "batchify", "ids")
R("batchify-ids-float", lambda: data.batchify(np.ones(5), 2), "batchify", "ids")
R("batchify-too-short", lambda: data.batchify(np.arange(3), 5), "batchify")
A("batchify-list", lambda: data.batchify(list(range(10)), 2),
  lambda: data.batchify(np.arange(10), 2))
A("batchify-np-int", lambda: data.batchify(np.arange(10), np.int64(2)),
  lambda: data.batchify(np.arange(10), 2))
A("batchify-readonly", lambda: data.batchify(readonly(np.arange(10)), 2),
  lambda: data.batchify(np.arange(10), 2))
A("batchify-strided", lambda: data.batchify(np.arange(20)[::2] // 2, 2),
  lambda: data.batchify(np.arange(10), 2))
R("lm_stream_batches-bptt_len-zero", lambda: list(data.lm_stream_batches(np.arange(20), 2, 0)),
  "lm_stream_batches", "bptt_len")
R("lm_stream_batches-bptt_len-float",
  lambda: list(data.lm_stream_batches(np.arange(20), 2, 2.5)), "lm_stream_batches", "bptt_len")
A("lm_stream_batches-np", lambda: list(data.lm_stream_batches(np.arange(20), np.int64(2),
                                                              np.int64(3))),
  lambda: list(data.lm_stream_batches(np.arange(20), 2, 3)))
R("pad_batch-pad_id-str", lambda: data.pad_batch([[1, 2], [3]], pad_id="0"), "pad_batch",
  "pad_id")
A("pad_batch-pad_id-neg", lambda: data.pad_batch([[1, 2], [3]], pad_id=np.int64(-100)),
  lambda: (np.array([[1, 2], [3, -100]]), np.array([2, 1]),
           np.array([[True, True], [True, False]])))
R("pad_batch-sequences-int", lambda: data.pad_batch(5), "pad_batch", "sequences")
R("pad_batch-sequence-2d", lambda: data.pad_batch([np.ones((2, 2), int)]), "pad_batch")
R("pad_batch-sequence-float", lambda: data.pad_batch([[1.5, 2.0]]), "pad_batch")
R("pad_batch-empty", lambda: data.pad_batch([]), "pad_batch", "sequence")
A("pad_batch-np-seqs", lambda: data.pad_batch([np.array([1, 2]), np.array([3])]),
  lambda: data.pad_batch([[1, 2], [3]]))
A("pad_batch-readonly", lambda: data.pad_batch([readonly(np.array([1, 2])), [3]]),
  lambda: data.pad_batch([[1, 2], [3]]))
A("pad_batch-pad_id-np", lambda: data.pad_batch([[1, 2], [3]], pad_id=np.int64(0)),
  lambda: data.pad_batch([[1, 2], [3]], pad_id=0))
R("train_valid_test_split-sum", lambda: data.train_valid_test_split(list(range(10)),
                                                                    (0.5, 0.1, 0.1)),
  "train_valid_test_split", "fractions")
R("train_valid_test_split-neg", lambda: data.train_valid_test_split(list(range(10)),
                                                                    (1.2, -0.1, -0.1)),
  "train_valid_test_split", "fractions")
R("train_valid_test_split-str", lambda: data.train_valid_test_split(list(range(10)), "abc"),
  "train_valid_test_split", "fractions")
R("train_valid_test_split-nan", lambda: data.train_valid_test_split(
    list(range(10)), (float("nan"), 0.5, 0.5)), "train_valid_test_split", "fractions")
A("train_valid_test_split-np-fractions",
  lambda: data.train_valid_test_split(list(range(10)), np.array([0.8, 0.1, 0.1])),
  lambda: data.train_valid_test_split(list(range(10)), (0.8, 0.1, 0.1)))
R("split_stream-ids-2d", lambda: data.split_stream(np.ones((2, 5), int)), "split_stream", "ids")
R("split_stream-fractions", lambda: data.split_stream(np.arange(10), (0.9, 0.9)),
  "split_stream", "fractions")
A("split_stream-list", lambda: data.split_stream(list(range(10))),
  lambda: data.split_stream(np.arange(10)))
R("load_corpus-missing", lambda: data.load_corpus("/nonexistent/corpus.txt"), "load_corpus")
R("load_corpus-int", lambda: data.load_corpus(3), "load_corpus", "name_or_path")
R("char_corpus-min_freq-zero", lambda: data.char_corpus(min_freq=0, max_chars=500),
  "char_corpus", "min_freq")
R("char_corpus-lowercase-str", lambda: data.char_corpus(lowercase="no", max_chars=500),
  "char_corpus", "lowercase")
R("char_corpus-max_chars-float", lambda: data.char_corpus(max_chars=500.5), "char_corpus",
  "max_chars")
R("word_corpus-max_size-zero", lambda: data.word_corpus(max_size=0, max_chars=500),
  "word_corpus", "max_size")
R("parity_task-min_length-gt-max", lambda: data.parity_task(4, min_length=8, max_length=3),
  "parity_task", "max_length")
R("balanced_parens_task-min_length-odd", lambda: data.balanced_parens_task(4, min_length=-2),
  "balanced_parens_task", "min_length")
R("repeat_tagging_task-repeat_prob-big", lambda: data.repeat_tagging_task(4, repeat_prob=1.5),
  "repeat_tagging_task", "repeat_prob")
R("repeat_tagging_task-repeat_prob-str", lambda: data.repeat_tagging_task(4, repeat_prob="0.4"),
  "repeat_tagging_task", "repeat_prob")
R("repeat_tagging_task-compare", lambda: data.repeat_tagging_task(4, compare="x"),
  "repeat_tagging_task", "compare")
R("is_balanced-int", lambda: data.is_balanced(3), "is_balanced")
A("parity_task-np-int", lambda: data.parity_task(np.int64(5), generator=0),
  lambda: data.parity_task(5, generator=0))
A("is_balanced-list", lambda: data.is_balanced(list("(())")), lambda: data.is_balanced("(())"))
R("reversal_examples-n-float", lambda: data.reversal_examples(2.5), "reversal_examples", "n")
R("reversal_examples-noise_prob-big", lambda: data.reversal_examples(3, noise_prob=1.5),
  "reversal_examples", "noise_prob")
R("reversal_examples-letters-empty", lambda: data.reversal_examples(3, letters=""),
  "reversal_examples", "letters")
R("reversal_examples-letters-overlap", lambda: data.reversal_examples(3, letters="ab#",
                                                                      noise="#"),
  "reversal_examples")
R("reversal_examples-max_len-lt-min", lambda: data.reversal_examples(3, min_len=5, max_len=2),
  "reversal_examples", "max_len")
R("reversal_task-n_train-neg", lambda: data.reversal_task(n_train=-1, n_valid=2, n_test=2),
  "reversal_task", "n_train")
R("reverse_letters-int", lambda: data.reverse_letters(3), "reverse_letters", "source")
A("reversal_examples-np-int", lambda: data.reversal_examples(np.int64(3)),
  lambda: data.reversal_examples(3))
A("reverse_letters-tuple", lambda: data.reverse_letters(("a", "#", "b")),
  lambda: data.reverse_letters(["a", "#", "b"]))

# ============================================================ viz (errors come before plotting)
viz = tr.viz
R("plot_norms_vs_distance-curves-list", lambda: viz.plot_norms_vs_distance([1.0, 2.0]),
  "plot_norms_vs_distance", "curves")
R("plot_norms_vs_distance-curves-empty", lambda: viz.plot_norms_vs_distance({}),
  "plot_norms_vs_distance", "curves")
R("plot_norms_vs_distance-values-str", lambda: viz.plot_norms_vs_distance({"a": "xyz"}),
  "plot_norms_vs_distance", "curves")
R("plot_norms_vs_distance-values-2d", lambda: viz.plot_norms_vs_distance({"a": np.ones((2, 2))}),
  "plot_norms_vs_distance", "curves")
R("plot_norms_vs_distance-path-int", lambda: viz.plot_norms_vs_distance({"a": [1.0]}, path=3),
  "plot_norms_vs_distance", "path")
R("plot_norms_vs_distance-path-ext", lambda: viz.plot_norms_vs_distance({"a": [1.0]},
                                                                        path="a.txt"),
  "plot_norms_vs_distance", "path")
R("plot_state_grad_heatmap-1d", lambda: viz.plot_state_grad_heatmap(np.ones(3)),
  "plot_state_grad_heatmap", "norms")
R("plot_state_grad_heatmap-empty", lambda: viz.plot_state_grad_heatmap(np.zeros((0, 3))),
  "plot_state_grad_heatmap", "norms")
R("plot_state_grad_heatmap-str", lambda: viz.plot_state_grad_heatmap("abc"),
  "plot_state_grad_heatmap", "norms")
R("plot_spectral_sweep-radii-empty", lambda: viz.plot_spectral_sweep([], {"a": []}),
  "plot_spectral_sweep", "radii")
R("plot_spectral_sweep-length", lambda: viz.plot_spectral_sweep([0.5, 1.0], {"a": [1.0]}),
  "plot_spectral_sweep", "values")
R("plot_spectral_sweep-logy-str", lambda: viz.plot_spectral_sweep([0.5], {"a": [1.0]},
                                                                  logy="no"),
  "plot_spectral_sweep", "logy")
R("plot_learning_curves-x-unknown", lambda: viz.plot_learning_curves({"a": [1.0]},
                                                                     x={"b": [0]}),
  "plot_learning_curves", "x")
R("plot_learning_curves-hline-str", lambda: viz.plot_learning_curves({"a": [1.0]}, hline="1"),
  "plot_learning_curves", "hline")
R("plot_learning_curves-logy-str", lambda: viz.plot_learning_curves({"a": [1.0]}, logy="yes"),
  "plot_learning_curves", "logy")
R("plot_attention-1d", lambda: viz.plot_attention(np.ones(3), ["a"], ["b"]), "plot_attention",
  "weights")
R("plot_attention-tokens-mismatch", lambda: viz.plot_attention(np.ones((2, 3)), ["a"], ["b"]),
  "plot_attention", "tokens")
R("plot_attention-tokens-str", lambda: viz.plot_attention(np.ones((1, 1)), 3, ["b"]),
  "plot_attention", "source_tokens")
R("plot_attention-marked-range", lambda: viz.plot_attention(np.ones((1, 1)), ["a"], ["b"],
                                                            marked=[5]),
  "plot_attention", "marked")
R("save_figure-not-figure", lambda: viz.save_figure(3, "a.png"), "save_figure", "fig")

# ============================================================ gradcheck and jacobians
def _gc(**kw: Any) -> Any:
    x = tr.Tensor(np.array([0.3, -0.2, 0.5]), requires_grad=True)
    return tr.gradcheck(lambda a: (a * a).sum(), [x], **kw)


R("gradcheck-fn-int", lambda: tr.gradcheck(3, [ten(2, dtype=np.float64, rg=True)]), "gradcheck",
  "fn")
R("gradcheck-float32", lambda: tr.gradcheck(lambda a: a.sum(), [ten(2, rg=True)]), "gradcheck",
  "float64")
R("gradcheck-eps-str", lambda: _gc(eps="1e-6"), "gradcheck", "eps")
R("gradcheck-eps-neg", lambda: _gc(eps=-1e-6), "gradcheck", "eps")
R("gradcheck-eps-nan", lambda: _gc(eps=float("nan")), "gradcheck", "eps")
R("gradcheck-atol-neg", lambda: _gc(atol=-1.0), "gradcheck", "atol")
R("gradcheck-rtol-str", lambda: _gc(rtol="0.1"), "gradcheck", "rtol")
R("gradcheck-mode", lambda: _gc(mode="fast"), "gradcheck", "mode")
R("gradcheck-n_directions-zero", lambda: _gc(mode="directional", n_directions=0), "gradcheck",
  "n_directions")
R("gradcheck-n_directions-float", lambda: _gc(mode="directional", n_directions=2.5),
  "gradcheck", "n_directions")
R("gradcheck-seed-str", lambda: _gc(seed="0"), "gradcheck", "seed")
R("gradcheck-raise_exception-str", lambda: _gc(raise_exception="no"), "gradcheck",
  "raise_exception")
R("gradcheck-no-leaves", lambda: tr.gradcheck(lambda a: a.sum(), [np.ones(2)]), "gradcheck")
R("gradcheck-fn-returns-float", lambda: tr.gradcheck(lambda a: 1.0,
                                                     [ten(2, dtype=np.float64, rg=True)]),
  "gradcheck")
A("gradcheck-eps-np", lambda: _gc(eps=np.float64(1e-6)), lambda: _gc(eps=1e-6))
A("gradcheck-single-tensor", lambda: tr.gradcheck(
    lambda a: (a * a).sum(), tr.Tensor(np.array([0.3, 0.4]), requires_grad=True)),
  lambda: tr.gradcheck(lambda a: (a * a).sum(),
                       [tr.Tensor(np.array([0.3, 0.4]), requires_grad=True)]))
A("gradcheck-raise_exception-np-bool", lambda: _gc(raise_exception=np.True_), lambda: _gc())
A("gradcheck-n_directions-np", lambda: _gc(mode="directional", n_directions=np.int64(2)),
  lambda: _gc(mode="directional", n_directions=2))
jac = tr.explicit_jacobians
for jname in ("softmax", "log_softmax", "tanh", "sigmoid", "relu"):
    jf = getattr(jac, jname)
    R(f"jacobians.{jname}-str", lambda jf=jf: jf("abc"), jname, "y")
    A(f"jacobians.{jname}-batch", lambda jf=jf: jf(np.array([[0.25, 0.5], [0.1, 0.7]])),
      lambda jf=jf: np.stack([jf(np.array([0.25, 0.5])), jf(np.array([0.1, 0.7]))]))
    R(f"jacobians.{jname}-object", lambda jf=jf: jf(np.array([0.5, None], dtype=object)), jname,
      "y")
    A(f"jacobians.{jname}-list", lambda jf=jf: jf([0.25, 0.5]),
      lambda jf=jf: jf(np.array([0.25, 0.5])))
    A(f"jacobians.{jname}-tensor", lambda jf=jf: jf(tr.Tensor(np.array([0.25, 0.5]))),
      lambda jf=jf: jf(np.array([0.25, 0.5])))
    A(f"jacobians.{jname}-readonly", lambda jf=jf: jf(readonly(np.array([0.25, 0.5]))),
      lambda jf=jf: jf(np.array([0.25, 0.5])))
R("jacobian-fn-int", lambda: tr.jacobian(3, [ten(2, dtype=np.float64, rg=True)]), "jacobian",
  "fn")
R("jacobian-inputs-str", lambda: tr.jacobian(lambda a: a * 2, "abc"), "jacobian", "inputs")
R("jacobian-fn-returns-float", lambda: tr.jacobian(lambda a: 1.0,
                                                   [ten(2, dtype=np.float64, rg=True)]),
  "jacobian")
A("jacobian-single-tensor", lambda: tr.jacobian(lambda a: a * 2, tr.Tensor(np.ones(2))),
  lambda: tr.jacobian(lambda a: a * 2, [tr.Tensor(np.ones(2))])[0])


# ============================================================ the tests
@pytest.mark.parametrize("case", [c for c in CASES if c.kind == "raise"], ids=lambda c: c.id)
def test_must_raise(case: Case) -> None:
    with pytest.raises(Exception) as info:
        case.call()
    err = info.value
    msg = str(err)
    assert not isinstance(err, AttributeError), f"AttributeError leaked: {err!r}"
    assert isinstance(err, RAISE_TYPES), f"{type(err).__name__} is not a clear error: {msg}"
    where = _last_frame_file(err)
    assert where.startswith(PACKAGE_DIR + os.sep), \
        f"raised outside tinygrad_rnn ({where}): {type(err).__name__}: {msg}"
    for part in case.names:
        alternatives = part if isinstance(part, tuple) else (part,)
        assert any(alt in msg for alt in alternatives), \
            f"{part!r} missing from {type(err).__name__}: {msg!r}"


@pytest.mark.parametrize("case", [c for c in CASES if c.kind == "accept"], ids=lambda c: c.id)
def test_must_accept(case: Case) -> None:
    assert case.ref is not None
    got = case.call()
    want = case.ref()
    assert_same(got, want)


def test_corpus_size_and_unique_ids() -> None:
    ids = [c.id for c in CASES]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    assert not dupes, dupes
    raising = sum(c.kind == "raise" for c in CASES)
    accepting = sum(c.kind == "accept" for c in CASES)
    assert raising + accepting >= 500 and accepting >= 100, (raising, accepting)


def test_the_checker_can_fail() -> None:
    """The must-raise check refuses a raw NumPy error and a message without the names; the
    must-accept comparison sees a different value."""
    with pytest.raises(AssertionError):
        test_must_raise(Case("numpy-own", lambda: np.zeros(-1), "raise", ("zeros",)))
    with pytest.raises(AssertionError):
        test_must_raise(Case("wrong-names", lambda: nn.Linear(2.5, 2), "raise", ("nowhere",)))
    with pytest.raises(pytest.fail.Exception):  # pytest's "DID NOT RAISE"
        test_must_raise(Case("no-error", lambda: None, "raise", ("x",)))
    with pytest.raises(AssertionError):
        test_must_raise(Case("attribute", lambda: None.shape, "raise", ("shape",)))
    with pytest.raises(AssertionError):
        test_must_accept(Case("differs", lambda: tr.zeros(2), "accept", ref=lambda: tr.ones(2)))
    with pytest.raises(AssertionError):
        test_must_accept(Case("dtype", lambda: np.zeros(2), "accept",
                              ref=lambda: np.zeros(2, np.float32)))
