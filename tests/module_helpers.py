"""Helpers for gradient checks of modules, shared by the test suites.

:func:`tinygrad_rnn.gradcheck` differentiates w.r.t. its own copies of the inputs it is
given, so checking a module's gradient with respect to its parameters means running the
module with those copies in place of its parameters: :func:`swapped_parameters` does that
for the length of a ``with`` block and always puts the originals back.
:func:`central_differences` is the numeric gradient of a scalar function of raw arrays, for
the tests that check hand-written backwards on arrays (BPTT kernels, attention ops).
"""
from __future__ import annotations

import contextlib
from typing import Callable, Iterator

import numpy as np

import tinygrad_rnn as tr


@contextlib.contextmanager
def swapped_parameters(module: tr.nn.Module, tensors: dict) -> Iterator[None]:
    """Make ``module`` use ``tensors`` (dotted parameter name -> Tensor, as
    ``named_parameters`` names them) as its parameters inside the block."""
    saved = []
    try:
        for name, t in tensors.items():
            owner, _, leaf = name.rpartition(".")
            sub = module.get_submodule(owner)
            if leaf not in sub._parameters:
                raise KeyError(f"{type(module).__name__} has no parameter {name!r}")
            saved.append((sub, leaf, sub._parameters[leaf]))
            sub._parameters[leaf] = t
        yield
    finally:
        for sub, leaf, p in reversed(saved):
            sub._parameters[leaf] = p


def central_differences(f: Callable[[], float], arrays: dict, names: list | None = None,
                        eps: float = 1e-6) -> dict:
    """Central differences of ``f()`` with respect to every entry of ``arrays[name]`` for
    each name of ``names`` (all of ``arrays`` when None), perturbed in place and restored."""
    out = {}
    for name in (list(arrays) if names is None else names):
        a = arrays[name]
        grad = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            orig = a[idx]
            a[idx] = orig + eps
            fp = f()
            a[idx] = orig - eps
            fm = f()
            a[idx] = orig
            grad[idx] = (fp - fm) / (2 * eps)
        out[name] = grad
    return out
