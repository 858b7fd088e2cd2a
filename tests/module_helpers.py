"""Helpers for gradient checks of modules, shared by the test suites.

:func:`tinygrad_rnn.gradcheck` differentiates w.r.t. its own copies of the inputs it is
given, so checking a module's gradient with respect to its parameters means running the
module with those copies in place of its parameters: :func:`swapped_parameters` does that
for the length of a ``with`` block and always puts the originals back.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

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
