"""tinygrad_rnn: see and verify the gradients of recurrent networks.

A from-scratch reverse-mode autograd framework on NumPy whose derivatives are hand-written
and visible, with explicit BPTT beside the autograd path, gradient checks you can run on your
own code, and the recurrent models an NLP course teaches.
"""
from __future__ import annotations

from typing import Any

from . import allocator, backend, functional, jacobians, ops
from .engine import (
    enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled,
)
from .gradcheck import GradcheckError, GradcheckReport, gradcheck
from .jacobians import jacobian
from .ops.base import Function, sum_to_shape
from .random import get_generator, manual_seed
from .tensor import (
    Tensor, arange, cat, concatenate, full, ones, ones_like, rand, randn, split, stack,
    tensor, where, zeros, zeros_like,
)
from . import optim
from . import onnx
from . import nn
from .io import load, save
from . import bptt, data, decoding, lm, monitor, training, viz
from . import utils

__version__ = "0.1.0"

# freed array memory stays in the process for the next step (tinygrad_rnn/allocator.py)
allocator.keep_freed_memory()

__all__ = [
    "Tensor", "tensor", "zeros", "ones", "zeros_like", "ones_like", "full", "arange",
    "randn", "rand", "cat", "concatenate", "stack", "split", "where", "no_grad",
    "enable_grad", "inference_mode", "set_grad_enabled", "is_grad_enabled", "gradcheck",
    "GradcheckError",
    "GradcheckReport", "jacobian", "jacobians", "functional", "ops", "backend", "allocator",
    "Function", "sum_to_shape", "manual_seed", "get_generator", "__version__",
    "nn", "save", "load", "optim", "bptt", "data", "decoding", "lm", "monitor", "training", "viz",
]


def __getattr__(name: str) -> Any:
    # tr.testing needs hypothesis (a test dependency), so it is imported on first use only
    if name == "testing":
        import importlib

        return importlib.import_module(".testing", __name__)
    raise AttributeError(f"module 'tinygrad_rnn' has no attribute {name!r}")
