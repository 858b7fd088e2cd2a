"""A placeholder for ``torch.onnx``, so that programs which import it (the word language
model example does, at import time) run with their imports renamed.

tinygrad_rnn has no ONNX exporter: :func:`export` raises a NotImplementedError that says
so. Save weights with ``tr.save(model.state_dict(), path)`` instead.
"""
from __future__ import annotations

from typing import Any

__all__ = ["export", "is_in_onnx_export"]


def export(model: Any = None, args: Any = None, f: Any = None, *more: Any,
           **options: Any) -> None:
    """Not supported: always raises NotImplementedError (see the module docstring)."""
    raise NotImplementedError(
        "tinygrad_rnn does not provide ONNX export (torch.onnx.export); save the weights "
        "with tr.save(model.state_dict(), path) and export from torch if you need ONNX"
    )


def is_in_onnx_export() -> bool:
    """False: tinygrad_rnn never exports (torch's query, used to switch code paths)."""
    return False
