"""torch's function forms of tensor methods, dtype names and device helpers, so a torch
program runs with ``import tinygrad_rnn as torch``.

Each function here is the method of the same name called on its first argument
(``tr.tanh(x)`` is ``x.tanh()``, ``tr.max(x, 1)`` is ``x.max(1)``); the derivations live with
the ops the methods call (tinygrad_rnn/ops/). What torch has and this package does not is
listed in docs/from_torch.md.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .backend import device, get_default_dtype, set_default_dtype
from .tensor import Tensor, check_tensor

__all__ = [
    # dtype names (NumPy dtypes: ``x.dtype == tr.float32`` and ``dtype=tr.long`` work)
    "float32", "float", "float64", "double", "float16", "half", "int64", "long", "int32",
    "int", "int16", "short", "int8", "uint8", "bool", "get_default_dtype",
    "set_default_dtype", "device", "is_floating_point",
    # function forms
    "tanh", "sigmoid", "relu", "exp", "log", "sqrt", "abs", "softmax", "log_softmax",
    "matmul", "mm", "bmm", "sum", "mean", "max", "min", "argmax", "argmin", "topk", "sort",
    "argsort", "gather", "index_select", "chunk", "unbind", "flatten", "squeeze",
    "unsqueeze", "transpose", "permute", "reshape", "clamp", "clip", "pow", "norm",
    "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "equal", "allclose",
    "masked_fill", "flip", "t", "std", "var", "any", "all", "clone", "detach",
]

# the builtins, for annotations below: this module rebinds float, int and bool to dtypes
_float = float
_bool = bool

float32 = float = np.dtype(np.float32)  # noqa: A001  (torch's names)
float64 = double = np.dtype(np.float64)
float16 = half = np.dtype(np.float16)
int64 = long = np.dtype(np.int64)
int32 = int = np.dtype(np.int32)  # noqa: A001
int16 = short = np.dtype(np.int16)
int8 = np.dtype(np.int8)
uint8 = np.dtype(np.uint8)
bool = np.dtype(np.bool_)  # noqa: A001


def is_floating_point(x: Tensor) -> Any:
    check_tensor("is_floating_point", "input", x)
    return x.dtype.kind == "f"


def _method(name: str) -> Any:
    """The function form of ``Tensor.<name>``: its first argument must be a tensor."""

    def call(input: Any, *args: Any, **kwargs: Any) -> Any:
        check_tensor(name, "input", input)
        return getattr(input, name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"``{name}(input, ...)`` is ``input.{name}(...)``: see Tensor.{name}."
    return call


tanh = _method("tanh")
sigmoid = _method("sigmoid")
relu = _method("relu")
exp = _method("exp")
log = _method("log")
sqrt = _method("sqrt")
abs = _method("abs")  # noqa: A001
softmax = _method("softmax")
log_softmax = _method("log_softmax")
mm = _method("mm")
bmm = _method("bmm")
sum = _method("sum")  # noqa: A001
mean = _method("mean")
max = _method("max")  # noqa: A001
min = _method("min")  # noqa: A001
argmax = _method("argmax")
argmin = _method("argmin")
topk = _method("topk")
sort = _method("sort")
argsort = _method("argsort")
gather = _method("gather")
index_select = _method("index_select")
chunk = _method("chunk")
unbind = _method("unbind")
flatten = _method("flatten")
squeeze = _method("squeeze")
unsqueeze = _method("unsqueeze")
transpose = _method("transpose")
permute = _method("permute")
reshape = _method("reshape")
clamp = clip = _method("clip")
pow = _method("pow")  # noqa: A001
norm = _method("norm")
eq = _method("eq")
ne = _method("ne")
lt = _method("lt")
le = _method("le")
gt = _method("gt")
ge = _method("ge")
equal = _method("equal")
masked_fill = _method("masked_fill")
t = _method("t")
std = _method("std")
var = _method("var")
any = _method("any")  # noqa: A001
all = _method("all")  # noqa: A001
clone = _method("clone")
flip = _method("flip")
maximum = _method("maximum")
minimum = _method("minimum")
detach = _method("detach")


def matmul(input: Any, other: Any) -> Tensor:
    """The matrix product with NumPy/torch broadcasting (``input @ other``)."""
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError(f"matmul: expected tensors, got {type(input).__name__} and "
                        f"{type(other).__name__}")
    return input @ other


def allclose(input: Tensor, other: Tensor, rtol: _float = 1e-05, atol: _float = 1e-08,
             equal_nan: _bool = False) -> Any:
    """True when every entry satisfies |input - other| <= atol + rtol * |other|."""
    check_tensor("allclose", "input", input)
    check_tensor("allclose", "other", other)
    return np.allclose(input.numpy(), other.numpy(), rtol=rtol, atol=atol,
                       equal_nan=equal_nan)


class _Cuda:
    """``tr.cuda``: whether the 'cuda' device (CuPy and a GPU) can be used."""

    @staticmethod
    def is_available() -> Any:
        from .backend import module_for_device

        try:
            module_for_device("cuda")
        except RuntimeError:
            return False
        return True

    @staticmethod
    def device_count() -> Any:
        return 1 if _Cuda.is_available() else 0

    @staticmethod
    def manual_seed(seed: Any) -> None:
        """Seeds nothing extra: every device draws from the host generators
        (tr.manual_seed)."""

    manual_seed_all = manual_seed


cuda = _Cuda()


class _Namespace:
    """A plain namespace of attributes (for torch's ``backends`` and ``accelerator``)."""

    def __init__(self, **attrs: Any) -> None:
        self.__dict__.update(attrs)


#: ``torch.backends``: programs ask ``torch.backends.mps.is_available()`` or set
#: ``torch.backends.cudnn.deterministic``; there is no MPS device, and the cuDNN flags are
#: recorded and change nothing (the 'cuda' device runs CuPy, which is deterministic here).
backends = _Namespace(
    mps=_Namespace(is_available=lambda: False, is_built=lambda: False),
    cudnn=_Namespace(deterministic=False, benchmark=False, enabled=True,
                     is_available=lambda: False),
)


def _current_accelerator() -> Any:
    return device("cuda") if cuda.is_available() else None


#: ``torch.accelerator``: the 'cuda' device when CuPy and a GPU are there, else none.
accelerator = _Namespace(is_available=lambda: cuda.is_available(),
                         current_accelerator=_current_accelerator)


def set_default_device(target: Any) -> None:
    """torch's ``set_default_device``: only the CPU can be the default here (tensors are made
    on the CPU unless a ``device=`` is given); another device is a ValueError that says so,
    rather than tensors silently staying on the CPU."""
    if target is None or device(target).type == "cpu":
        return
    raise ValueError(f"set_default_device: only 'cpu' can be the default device here, got "
                     f"{target!r}; pass device={str(target)!r} where tensors are made, or "
                     f"move them with .to({str(target)!r})")


__all__ += ["cuda", "backends", "accelerator", "set_default_device"]
_ = (device, get_default_dtype, set_default_dtype)
