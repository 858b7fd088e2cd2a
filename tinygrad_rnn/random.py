"""Seeding. Every random choice in tinygrad_rnn takes a seed or a ``numpy.random.Generator``;
when neither is given it draws from one module-level generator that :func:`manual_seed`
resets, so a whole program is reproducible from one seed.

Random numbers are always drawn on the host, from these NumPy generators, whatever the
device of the data they are used with (dropout masks, initial weights, sampling); a layer
on a GPU copies them there with its array module's ``asarray``. So one seed gives the same
numbers, and the same results, on every device."""
from __future__ import annotations

from typing import Any

import numpy as np

_default = np.random.default_rng(0)


def manual_seed(seed: int) -> np.random.Generator:
    """Reset the default generator to ``seed``; returns it."""
    global _default
    _default = np.random.default_rng(seed)
    return _default


def default_generator() -> np.random.Generator:
    return _default


def get_generator(generator: Any = None) -> np.random.Generator:
    """A Generator from ``None`` (the default generator), an int seed, or a Generator."""
    if generator is None:
        return _default
    if isinstance(generator, np.random.Generator):
        return generator
    if isinstance(generator, (int, np.integer)):
        return np.random.default_rng(int(generator))
    raise TypeError(
        f"expected a seed (int) or numpy.random.Generator, got {type(generator).__name__}"
    )
