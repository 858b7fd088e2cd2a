"""Shared measuring helpers for the benchmarks: interleaved timing, paired ratios, peak memory,
BLAS thread control and a description of the machine.

Nothing here imports torch: functions that need it take the module as an argument, so the
benchmarks run (printing only our numbers) where torch is not installed.

Timing protocol
---------------
Contestants run in the same process, interleaved: repetition r runs every contestant once,
in an order rotated by r, so slow drifts of the machine (other processes, thermal state,
frequency) hit every contestant alike. Over k consecutive repetitions (k contestants) each
contestant runs once in every position; :func:`interleaved` says what a count of repetitions
that is not a multiple of k does. Each repetition gives one time per contestant, and a
ratio is the median over repetitions of the *paired* ratio time_a[r] / time_b[r].

Peak memory
-----------
Two methods, both "the largest amount of memory that is live at once during one step, above
what was live before it":

* allocator level: for our code, :mod:`tracemalloc` (NumPy reports every array buffer to it,
  and it also sees the Python objects of the graph); for torch, the profiler's allocation
  events (``profile_memory=True``), whose ``total_allocated`` is a running total of the
  bytes live in torch's CPU allocator. Both count only blocks allocated inside the window:
  the frees of older blocks are ignored by both.
* process level: the growth of the resident set (``VmHWM - VmRSS`` after resetting the
  high-water mark through ``/proc/self/clear_refs``), meant to run in a fresh process with
  glibc's mmap threshold pinned, so that large blocks go to and from the kernel at once.
"""
from __future__ import annotations

import ctypes
import gc
import os
import platform
import resource
import statistics
import sys
import time
import tracemalloc
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

__all__ = [
    "THREAD_ENV_VARS", "thread_env", "blas_threads", "blas_corename", "Timing", "interleaved",
    "median", "paired_ratio", "peak_tracemalloc", "peak_torch_alloc", "rss_supported",
    "peak_rss_delta", "rss_env", "machine_info",
]

#: Environment variables read by the BLAS/OpenMP runtimes when they are first loaded.
THREAD_ENV_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                   "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


def thread_env(threads: int, base: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of ``base`` (default ``os.environ``) with every BLAS/OpenMP thread count set.

    These are read once, when NumPy (OpenBLAS) or torch (MKL, OpenMP) is first imported, so
    they must be in the environment of a process *before* it imports either: the benchmark
    runs each thread setting in its own child process.
    """
    env = dict(os.environ if base is None else base)
    for name in THREAD_ENV_VARS:
        env[name] = str(int(threads))
    return env


_BLAS_THREAD_SYMBOLS = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
                        "openblas_get_num_threads64_", "openblas_get_num_threads",
                        "MKL_Get_Max_Threads")


def blas_threads() -> int | None:
    """Threads NumPy's BLAS will use, asked from the loaded OpenBLAS/MKL library itself.

    Returns None when the library or its query function cannot be found (then the
    environment variables are the only record of the setting).
    """
    lib = _blas_library()
    if lib is None:
        return None
    for symbol in _BLAS_THREAD_SYMBOLS:
        fn = getattr(lib, symbol, None)
        if fn is not None:
            fn.restype = ctypes.c_int
            return int(fn())
    return None


def _blas_library() -> Any:
    """The OpenBLAS/MKL shared library NumPy loaded, opened with ctypes (Linux), or None."""
    import numpy  # noqa: F401  (the BLAS library is loaded with NumPy)

    try:
        with open("/proc/self/maps", encoding="utf-8") as fh:
            paths = {line.split()[-1] for line in fh if len(line.split()) >= 6}
    except OSError:
        return None
    names = ("openblas", "mkl_rt")
    for path in sorted(p for p in paths if any(n in os.path.basename(p).lower() for n in names)):
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


# --------------------------------------------------------------------------------------------
# timing
# --------------------------------------------------------------------------------------------
@dataclass
class Timing:
    """Per-repetition times of one contestant, in milliseconds.

    ``wall_ms`` is elapsed time (``time.perf_counter``); ``cpu_ms`` is the CPU time of the
    whole process over the same interval (``time.process_time``, all threads), which other
    processes on the machine disturb much less than the wall time. ``faults`` counts the
    minor page faults of the process during the step (first touches of freshly mapped
    memory; each costs kernel time).
    """

    wall_ms: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)
    faults: list[int] = field(default_factory=list)


def interleaved(steps: Sequence[tuple[str, Callable[[], Any]]], reps: int, warmup: int = 1,
                sync: Callable[[], None] | None = None,
                progress: Callable[[str], None] | None = None) -> dict[str, Timing]:
    """Time every step function ``reps`` times, interleaved and in rotating order.

    Parameters
    ----------
    steps : (name, fn) pairs; ``fn()`` runs one complete step.
    reps : timed repetitions; repetition r runs the contestants in the order
        ``names[r % k:] + names[:r % k]`` (k contestants). Every k consecutive repetitions
        put each contestant once in every position, so when ``reps`` is a multiple of k each
        one is first, second, ... equally often; otherwise the first ``reps % k`` orders
        occur once more than the others (with 15 repetitions of 4 contestants, the first
        three contestants are first 4 times, the last one 3 times).
    warmup : untimed calls of each contestant first (first-call costs: allocations, JIT
        primitive creation in oneDNN, import-time caches).
    sync : called after each step before the clock stops (a GPU synchronisation).
    progress : called with a short message after each repetition.

    Returns
    -------
    dict name -> :class:`Timing`, with ``reps`` entries each.
    """
    if reps < 1:
        raise ValueError(f"interleaved: reps must be >= 1, got {reps}")
    names = [name for name, _ in steps]
    if len(set(names)) != len(names):
        raise ValueError(f"interleaved: contestant names must be unique, got {names}")
    fns = dict(steps)
    for _ in range(warmup):
        for name in names:
            fns[name]()
            if sync is not None:
                sync()
    out = {name: Timing() for name in names}
    k = len(names)
    for r in range(reps):
        gc.collect()
        order = names[r % k:] + names[:r % k]
        for name in order:
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            c0 = time.process_time()
            t0 = time.perf_counter()
            fns[name]()
            if sync is not None:
                sync()
            t1 = time.perf_counter()
            c1 = time.process_time()
            f1 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            out[name].wall_ms.append((t1 - t0) * 1e3)
            out[name].cpu_ms.append((c1 - c0) * 1e3)
            out[name].faults.append(f1 - f0)
        if progress is not None:
            progress(f"rep {r + 1}/{reps}")
    return out


def median(values: Sequence[float]) -> float:
    """The median (the mean of the middle two for an even count)."""
    if not values:
        raise ValueError("median of an empty sequence")
    return float(statistics.median(values))


def paired_ratio(a: Sequence[float], b: Sequence[float]) -> float:
    """Median over repetitions of a[r] / b[r] (the two lists come from the same repetitions)."""
    if len(a) != len(b) or not a:
        raise ValueError(f"paired_ratio: need two equally long non-empty lists, got "
                         f"{len(a)} and {len(b)}")
    return median([x / y for x, y in zip(a, b)])


# --------------------------------------------------------------------------------------------
# peak memory
# --------------------------------------------------------------------------------------------
def peak_tracemalloc(fn: Callable[[], Any]) -> int:
    """Peak bytes traced by :mod:`tracemalloc` while ``fn()`` runs, above the start.

    NumPy reports the data buffer of every array it allocates to tracemalloc (and removes it
    when freed); Python objects (tensors, graph nodes) are traced as well. Blocks allocated
    before the call are not traced, and neither are their frees.
    """
    if tracemalloc.is_tracing():
        raise RuntimeError("peak_tracemalloc: tracemalloc is already tracing")
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return int(peak)


def peak_torch_alloc(torch: Any, fn: Callable[[], Any]) -> int | None:
    """Peak bytes live in torch's CPU allocator while ``fn()`` runs, above the start.

    Runs ``fn`` under ``torch.profiler.profile(profile_memory=True)``. Every allocation event
    carries ``total_allocated``, the running total of live bytes that torch's CPU memory
    reporter keeps for blocks allocated while profiling; the peak is the largest total
    minus the total just before the first event. Returns None where this torch build does
    not expose the events (the profiler's ``experimental_event_tree``).
    """
    from torch.profiler import ProfilerActivity, profile

    gc.collect()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    try:
        roots = prof.profiler.kineto_results.experimental_event_tree()
    except AttributeError:
        return None
    events = []
    stack = list(roots)
    while stack:
        ev = stack.pop()
        extra = ev.extra_fields
        if type(extra).__name__ == "_ExtraFields_Allocation" and extra.device.type == "cpu":
            events.append((ev.start_time_ns, int(extra.alloc_size), int(extra.total_allocated)))
        stack.extend(ev.children)
    if not events:
        return 0
    events.sort()
    _, first_size, first_total = events[0]
    base = first_total - first_size
    return max(0, max(total for _, _, total in events) - base)


def rss_supported() -> bool:
    """True where the resident-set high-water mark can be reset (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        return "VmHWM" in _proc_status()
    except OSError:
        return False


def _proc_status() -> dict[str, int]:
    out = {}
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            key, _, rest = line.partition(":")
            parts = rest.split()
            if len(parts) == 2 and parts[1] == "kB":
                out[key] = int(parts[0]) * 1024
    return out


def rss_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a process-level memory measurement: glibc's mmap threshold pinned at
    128 KiB (which also turns off its dynamic growth), so every block of 128 KiB or more is
    mapped from the kernel when allocated and unmapped when freed, by NumPy and torch alike."""
    env = dict(os.environ if base is None else base)
    env["MALLOC_MMAP_THRESHOLD_"] = str(128 * 1024)
    env["MALLOC_TRIM_THRESHOLD_"] = str(128 * 1024)
    return env


def peak_rss_delta(fn: Callable[[], Any]) -> int:
    """Growth of the resident set while ``fn()`` runs: the high-water mark ``VmHWM`` (reset
    just before) minus ``VmRSS`` at the start. Linux only; see :func:`rss_supported`."""
    gc.collect()
    with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
        fh.write("5")  # resets VmHWM to the current VmRSS
    before = _proc_status()["VmRSS"]
    fn()
    return max(0, _proc_status()["VmHWM"] - before)


# --------------------------------------------------------------------------------------------
# the machine
# --------------------------------------------------------------------------------------------
def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _numpy_blas() -> str:
    import numpy as np

    try:
        config = np.show_config(mode="dicts")
        blas = config["Build Dependencies"]["blas"]
        text = f"{blas.get('name', '?')} {blas.get('version', '?')}"
    except Exception:  # older NumPy without mode='dicts'
        text = "unknown BLAS"
    core = blas_corename()
    return text + (f", kernels for core {core}" if core else "")


def blas_corename() -> str | None:
    """The CPU core type whose kernels OpenBLAS chose at run time (DYNAMIC_ARCH builds),
    e.g. 'Haswell' (AVX2) or 'SkylakeX' (AVX-512); None when it cannot be asked."""
    lib = _blas_library()
    if lib is None:
        return None
    for symbol in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename",
                   "openblas_get_corename64_", "openblas_get_corename"):
        fn = getattr(lib, symbol, None)
        if fn is not None:
            fn.restype = ctypes.c_char_p
            return fn().decode("ascii", "replace")
    return None


def machine_info(torch: Any = None) -> dict[str, str]:
    """CPU model and count, Python, NumPy and its BLAS, torch and its BLAS/oneDNN, load."""
    import numpy as np

    info = {
        "cpu": f"{_cpu_model()} ({os.cpu_count()} logical CPUs)",
        "python": sys.version.split()[0],
        "numpy": f"{np.__version__} ({_numpy_blas()})",
    }
    if "tinygrad_rnn" in sys.modules:  # the host allocator setting the timings ran with
        info["allocator"] = sys.modules["tinygrad_rnn"].malloc_tuning.status()
    if torch is not None:
        extra = []
        cfg = torch.__config__.show()
        if "BLAS_INFO=mkl" in cfg:
            extra.append("MKL")
        for line in cfg.splitlines():
            if "MKL-DNN" in line or "oneDNN" in line:
                extra.append(line.strip(" -").split(" (Git")[0])
        info["torch"] = f"{torch.__version__}" + (f" ({', '.join(extra)})" if extra else "")
    else:
        info["torch"] = "not installed"
    try:
        load = os.getloadavg()
        info["load"] = ", ".join(f"{x:.2f}" for x in load)
    except OSError:
        info["load"] = "unknown"
    return info
