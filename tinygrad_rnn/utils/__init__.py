"""Utilities mirroring ``torch.utils``: :mod:`tinygrad_rnn.utils.data` (datasets, samplers,
``DataLoader`` and the collate functions), so ``from torch.utils.data import DataLoader``
becomes ``from tinygrad_rnn.utils.data import DataLoader``."""
from __future__ import annotations

from . import data

__all__ = ["data"]
