"""tinygrad_rnn: see and verify the gradients of recurrent networks.

A from-scratch reverse-mode autograd framework on NumPy whose derivatives are hand-written
and visible, with explicit BPTT beside the autograd path, gradient checks you can run on your
own code, and the recurrent models an NLP course teaches.
"""
from __future__ import annotations

from typing import Any

from . import backend, explicit_jacobians, functional, malloc_tuning, ops
from .engine import (
    enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled,
)
from .gradcheck import GradcheckError, GradcheckReport, gradcheck
from .explicit_jacobians import jacobian
from .ops.base import Function, sum_to_shape
from .random import Generator, get_generator, manual_seed
from .creation import (
    BoolTensor, ByteTensor, DoubleTensor, FloatTensor, IntTensor, LongTensor, arange, as_tensor,
    cat, concatenate, empty, empty_like, from_numpy, full, full_like, is_tensor, linspace, numel,
    ones, ones_like, rand, rand_like, randint, randn, randn_like, randperm, split, stack, tensor,
    where, zeros, zeros_like,
)
from .tensor import Size, Tensor
from .torch_functions import *  # noqa: F401,F403  (torch's names: tr.tanh, tr.long, ...)
from .torch_functions import __all__ as _torch_names
from . import optim
from . import onnx
from . import nn
from .io import load, save
from . import bptt, data, decoding, lm, monitor, runs, training, truncation, viz
from . import utils

__version__ = "0.2.0"

__all__ = [
    "Tensor", "tensor", "zeros", "ones", "zeros_like", "ones_like", "full", "arange",
    "randn", "rand", "cat", "concatenate", "stack", "split", "where", "no_grad",
    "enable_grad", "inference_mode", "set_grad_enabled", "is_grad_enabled", "gradcheck",
    "GradcheckError", "GradcheckReport", "jacobian", "explicit_jacobians",
    "functional", "ops", "backend", "malloc_tuning",
    "Function", "sum_to_shape", "manual_seed", "get_generator", "Generator", "__version__",
    "nn", "save", "load", "optim", "bptt", "data", "decoding", "lm", "monitor", "training",
    "truncation", "viz",
    "Size", "empty", "empty_like", "full_like", "rand_like", "randn_like", "linspace",
    "randint", "randperm", "from_numpy", "as_tensor", "is_tensor", "numel", "FloatTensor",
    "DoubleTensor", "LongTensor", "IntTensor", "BoolTensor", "ByteTensor", *_torch_names,
]


def __getattr__(name: str) -> Any:
    # tr.testing (checkers, strategies, the op registry, the CuPy emulator) sits above the
    # core, which never imports it: it is imported on first use of tr.testing only
    if name == "testing":
        import importlib

        return importlib.import_module(".testing", __name__)
    raise AttributeError(f"module 'tinygrad_rnn' has no attribute {name!r}")
