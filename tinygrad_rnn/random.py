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


class Generator:
    """torch's ``Generator``: ``tr.Generator().manual_seed(42)`` wherever a ``generator=``
    is taken. It holds a NumPy generator (:attr:`rng`), so the numbers it gives are NumPy's,
    not torch's: the same seed gives the same numbers here on every run and device, but not
    the numbers torch would draw."""

    def __init__(self, device: Any = "cpu") -> None:
        self._seed = 0
        self.rng = np.random.default_rng(0)

    def manual_seed(self, seed: int) -> "Generator":
        if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
            raise TypeError(f"Generator.manual_seed: seed must be an int, got {seed!r}")
        self._seed = int(seed)
        self.rng = np.random.default_rng(self._seed)
        return self

    def initial_seed(self) -> int:
        return self._seed

    def seed(self) -> int:
        """Re-seed from fresh entropy (not reproducible, as torch's ``seed()``)."""
        entropy = np.random.SeedSequence().entropy  # an int when drawn fresh
        assert isinstance(entropy, int)
        return self.manual_seed(entropy % 2 ** 63).initial_seed()


def get_generator(generator: Any = None) -> np.random.Generator:
    """A Generator from ``None`` (the default generator), an int seed, a
    ``numpy.random.Generator`` or a :class:`Generator`."""
    if generator is None:
        return _default
    if isinstance(generator, np.random.Generator):
        return generator
    if isinstance(generator, Generator):
        return generator.rng
    if isinstance(generator, (int, np.integer)):
        return np.random.default_rng(int(generator))
    raise TypeError(
        f"expected a seed (int), a numpy.random.Generator or a tinygrad_rnn.Generator, got "
        f"{type(generator).__name__}"
    )
