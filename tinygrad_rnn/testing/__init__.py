"""Testing your own ops, cells and modules the way the built-in ones are tested.

``tinygrad_rnn`` imports this package only on first use of ``tr.testing``; nothing in the core
package imports it (the CLI does, for ``tinygrad-rnn gradcheck`` and ``--device standin``).

Modules
-------
:mod:`.checks`
    The checkers (NumPy only): :func:`check_function`, :func:`check_op`,
    :func:`check_module`, :func:`check_jacobian`, each returning a :class:`CheckReport` or
    raising :class:`CheckFailure` (an ``AssertionError``) that names every failed check.
:mod:`.strategies`
    Hypothesis strategies (:func:`arrays`, :func:`tensors`, :func:`broadcastable_shapes`,
    :func:`shape_pairs`, :func:`recurrent_weights`, :func:`padded_sequences`,
    :func:`token_ids`) and :func:`gradient_property`, a ``given``-style decorator. They need
    `hypothesis <https://hypothesis.readthedocs.io>`_ (a test dependency), which is imported
    when one of these names is first used.
:mod:`.registry`
    Every built-in differentiable op: how to call it, its NumPy reference and a sampler of
    its domain, written once against a ``Draw`` that is a seeded NumPy generator for the CLI
    and hypothesis in the tests: the one list that ``tinygrad-rnn gradcheck`` and the
    project's test suites check.
:mod:`.suite`
    ``tinygrad-rnn gradcheck``: the registry's ops, the recurrent cells and layers, checked
    by float64 central differences on seeded examples.
:mod:`.cupy_emulator`
    The stand-in device ``'standin'``: NumPy underneath, CuPy's rules on top, so that a test
    without a GPU shows whether code hands device data to NumPy. Importing this package
    registers it (:func:`tinygrad_rnn.backend.register_device`).

Example: a property test of your own op
---------------------------------------
>>> import numpy as np
>>> import tinygrad_rnn as tr
>>> from tinygrad_rnn.testing import check_op, gradient_property, tensors
>>> class Softsign(tr.Function):
...     '''y = x / (1 + |x|);  dy/dx = 1 / (1 + |x|)^2.'''
...     @staticmethod
...     def forward(ctx, x):
...         ctx.save_for_backward(x)
...         return x / (1 + np.abs(x))
...     @staticmethod
...     def backward(ctx, grad_out):
...         (x,) = ctx.saved_arrays
...         return grad_out / (1 + np.abs(x)) ** 2
>>> @gradient_property(tensors(shape=(2, 3), min_value=-3, max_value=3, min_magnitude=0.1))
... def test_softsign(x):
...     return Softsign.apply(x)
>>> test_softsign()  # pytest would call it: hypothesis draws x, check_function checks it
>>> check_op(Softsign, tr.Tensor(np.array([0.5, -2.0]), requires_grad=True)).passed
True

Every check runs in float64: finite differences in float32 are meaningless
(``docs/gradcheck.md`` derives why). Test float32 code by comparing it with the float64 result.
"""
from __future__ import annotations

import importlib
from typing import Any

from . import cupy_emulator
from .checks import (
    CheckFailure, CheckOptions, CheckReport, CheckResult, check_function, check_jacobian,
    check_module, check_op,
)

# the names of .strategies, imported on first use (they need hypothesis)
_STRATEGIES = (
    "arrays", "tensors", "broadcastable_shapes", "shape_pairs", "recurrent_weights",
    "RecurrentWeights", "padded_sequences", "PaddedSequences", "token_ids", "gradient_property",
)

__all__ = [
    "arrays", "tensors", "broadcastable_shapes", "shape_pairs", "recurrent_weights",
    "RecurrentWeights", "padded_sequences", "PaddedSequences", "token_ids",
    "check_function", "check_op", "check_module", "check_jacobian", "gradient_property",
    "CheckOptions", "CheckReport", "CheckResult", "CheckFailure",
]


def __getattr__(name: str) -> Any:  # PEP 562: the strategies on first use
    if name in _STRATEGIES:
        return getattr(importlib.import_module(".strategies", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list:
    return sorted(set(globals()) | set(_STRATEGIES))


cupy_emulator.register()  # the device 'standin' (done on its import too; harmless again)
