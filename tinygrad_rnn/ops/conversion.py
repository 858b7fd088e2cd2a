"""Conversions that gradients flow through: a copy, a move to another device, a cast to
another float dtype. Each VJP undoes the conversion: the gradient of a copy is the upstream
gradient itself, that of a device move is moved back, that of a cast is cast back (so a
float32 tensor gets a float32 gradient even when it was used in float64).

These are what ``Tensor.clone``, ``Tensor.to(device)`` and ``Tensor.astype`` record.
"""
from __future__ import annotations

from typing import Any

from ..backend import device_of, to_device
from .base import Context, Function

__all__ = ["Copy", "ToDevice", "Cast"]


class Copy(Function):
    """y = a copy of x.  VJP: dL/dx = g."""

    @staticmethod
    def forward(ctx: Context, x: Any) -> Any:
        return x.copy()

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        return g


class ToDevice(Function):
    """y = x copied to another device.  VJP: g copied back to x's device."""

    @staticmethod
    def forward(ctx: Context, x: Any, device: str) -> Any:
        ctx.in_device = device_of(x)
        return to_device(x, device)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        return to_device(g, ctx.in_device)


class Cast(Function):
    """y = x converted to another float dtype.  VJP: g converted back to x's dtype."""

    @staticmethod
    def forward(ctx: Context, x: Any, dtype: Any) -> Any:
        ctx.in_dtype = x.dtype
        return x.astype(dtype)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        return g.astype(ctx.in_dtype)
