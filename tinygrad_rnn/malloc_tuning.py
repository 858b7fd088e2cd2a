"""malloc tuning: keep freed array memory in the process instead of handing it back at once.

An explicit call, never made by ``import tinygrad_rnn`` (importing the package changes
nothing outside it)::

    import tinygrad_rnn as tr
    tr.malloc_tuning.keep_freed_memory()   # once, at the start of a training script

The demos (``tinygrad_rnn/demos/``), the command line (``tinygrad-rnn ...``) and the
benchmarks (``benchmarks/``) make this call; ``TINYGRAD_RNN_MALLOC=default`` in the
environment turns it into a no-op there and everywhere.

Why
---
A training step allocates the same large temporaries every time (gate pre-activations, the
(T, N, 4H) cache of a fused LSTM, logits, softmax outputs) and frees them before the next
step. With glibc's default settings an array of more than 128 KiB is often returned to the
operating system when it is freed (``munmap``, or trimming the top of the heap), so the next
step's array of the same size starts on fresh pages, and the kernel zero-fills every 4 KiB
page on first touch. Our fused LSTM step alone (H = 64, T = 64, N = 32, 1 thread, no torch in
the process) took 11.19 ms with 1722 page faults per step under glibc's defaults and 7.93 ms
with none under this setting, and one ``log_softmax`` of a (2048, 64) float32 array in a
fresh process takes about 500 page faults under the defaults and none under the setting
(docs/performance.md, section "Update: freed host memory stays in the process").

What
----
:func:`keep_freed_memory` raises two glibc ``malloc`` limits with ``mallopt``:

* ``M_MMAP_THRESHOLD`` to 32 MiB (glibc's maximum on 64-bit Linux): blocks below it come
  from the heap, where freed blocks are reused, instead of from a fresh ``mmap`` each time;
* ``M_TRIM_THRESHOLD`` to 64 MiB: up to that much free memory at the top of the heap stays
  with the process instead of being given back after every step.

The price: after a peak, up to about 64 MiB of freed memory (plus whatever heap
fragmentation holds) stays in the process's resident set; nothing is leaked, it is reused by
the next allocations. Arrays of 32 MiB and more are still mapped and unmapped one by one.

:func:`keep_freed_memory` acts only where it can and only when the user has not chosen: on
Linux with glibc, when the environment configures no ``malloc`` setting of glibc's own, and
unless ``TINYGRAD_RNN_MALLOC=default`` asks to leave ``malloc`` as it is (``keep``, or
leaving the variable unset, keeps freed memory; any other value is a ValueError from the
call, so a typo such as ``off`` cannot leave the setting on unnoticed). glibc reads its
settings from two places, and either one leaves ``malloc`` to the user: ``GLIBC_TUNABLES``
with any ``glibc.malloc.*`` tunable (glibc's recommended way, e.g.
``GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072``; other tunables, such as
``glibc.cpu.*``, do not count), or one of the older ``MALLOC_MMAP_THRESHOLD_``,
``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_TOP_PAD_`` variables. ``mallopt`` would otherwise
override what the user set. The settings apply to the whole process (NumPy's arrays and
everything else); :func:`status` says what was done.
"""
from __future__ import annotations

import ctypes
import os
import platform
import sys

__all__ = ["keep_freed_memory", "status", "MMAP_THRESHOLD", "TRIM_THRESHOLD", "ENV_VAR"]

MMAP_THRESHOLD = 32 * 1024 * 1024
TRIM_THRESHOLD = 64 * 1024 * 1024
ENV_VAR = "TINYGRAD_RNN_MALLOC"
GLIBC_ENV_VARS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")
#: glibc's tunables variable: colon-separated ``name=value`` pairs
TUNABLES_VAR = "GLIBC_TUNABLES"

# mallopt parameter numbers from glibc's <malloc.h>
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

_status = "malloc left as it is (keep_freed_memory() not called)"


def _glibc_mallopt():
    """glibc's ``mallopt`` through ctypes, or None where there is none (macOS, Windows,
    musl)."""
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return None
    try:
        fn = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_int)
    fn.restype = ctypes.c_int
    return fn


def _malloc_tunables(tunables: str) -> list[str]:
    """The names of the ``glibc.malloc.*`` tunables set in a ``GLIBC_TUNABLES`` value such as
    ``"glibc.malloc.mmap_threshold=131072:glibc.cpu.x86_shstk=off"``."""
    names = (item.partition("=")[0].strip() for item in tunables.split(":"))
    return [name for name in names if name.startswith("glibc.malloc.")]


def keep_freed_memory(environ: dict | None = None) -> str:
    """Raise glibc's mmap and trim thresholds (module docstring) unless the user chose
    otherwise; returns, and remembers for :func:`status`, one line saying what was done.

    ``environ`` defaults to ``os.environ`` (a parameter so tests can pass their own)."""
    global _status
    env = os.environ if environ is None else environ
    choice = env.get(ENV_VAR, "").strip().lower()
    if choice == "default":
        _status = f"glibc malloc left as it is ({ENV_VAR}=default)"
        return _status
    if choice not in ("", "keep"):
        # a typo such as 'off' must not leave the setting on while the user thinks it is off
        raise ValueError(f"{ENV_VAR}={env[ENV_VAR]!r} is not a setting: use 'default' (leave "
                         f"glibc malloc as it is) or 'keep' / unset (keep freed memory)")
    chosen = [name for name in GLIBC_ENV_VARS if name in env]
    chosen += [f"{TUNABLES_VAR} {name}" for name in _malloc_tunables(env.get(TUNABLES_VAR, ""))]
    if chosen:
        _status = f"glibc malloc left as it is (set by the environment: {', '.join(chosen)})"
        return _status
    mallopt = _glibc_mallopt()
    if mallopt is None:
        _status = "malloc left as it is (not glibc on Linux)"
        return _status
    ok = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    ok = mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1 and ok
    if not ok:
        _status = "glibc mallopt refused the thresholds; malloc left as it is"
        return _status
    _status = (f"glibc malloc keeps freed memory: mmap threshold {MMAP_THRESHOLD >> 20} MiB, "
               f"trim threshold {TRIM_THRESHOLD >> 20} MiB (turn off with {ENV_VAR}=default)")
    return _status


def status() -> str:
    """One line: what :func:`keep_freed_memory` did in this process."""
    return _status
