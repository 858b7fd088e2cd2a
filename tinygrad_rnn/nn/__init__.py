"""Neural-network building blocks, mirroring ``torch.nn``.

``tr.nn.Module`` and ``tr.nn.Parameter`` (module.py), the basic layers (layers.py), weight
initialisers as ``tr.nn.init`` (init.py), gradient utilities as ``tr.nn.utils`` and, as in
torch, ``tr.nn.functional`` (the same module as ``tr.functional``).
"""
from __future__ import annotations

import importlib.util

from .. import functional
from . import init
from .layers import (
    Dropout, Embedding, Identity, Linear, ModuleList, ReLU, Sequential, Sigmoid, Tanh,
)
from .module import IncompatibleKeys, Module, Parameter

# nn/utils.py (clip_grad_norm_, ...) is written separately; nn stays importable without it
if importlib.util.find_spec(f"{__name__}.utils") is not None:
    from . import utils

__all__ = [
    "Module", "Parameter", "IncompatibleKeys", "Linear", "Embedding", "Dropout", "Sequential",
    "ModuleList", "Tanh", "ReLU", "Sigmoid", "Identity", "init", "utils", "functional",
]

# ---------------------------------------------------------------------------------------------
# Recurrent layers and attention (cells.py, recurrent.py, attention.py) are imported here:
# from .cells import ...
# from .recurrent import ...
# from .attention import ...
# and their names added to __all__.
# ---------------------------------------------------------------------------------------------
