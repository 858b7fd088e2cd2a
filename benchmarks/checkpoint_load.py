"""Benchmark ``tr.load`` against ``numpy.load`` of the same archive, by number of arrays.

A checkpoint written by ``tr.save`` is a ``.npz`` archive, so NumPy can read the very same
file: the reference is ``numpy.load(path, allow_pickle=False)`` followed by reading every
member (``{name: archive[name] for name in archive.files}``). ``tr.load`` does more (it
checks the manifest, the member list and the declared sizes, and rebuilds the saved
structure), so a ratio near 1 is the goal; what matters most is that the ratio does not grow
with the number of arrays (loading is linear; it was quadratic before: 16,000 arrays took
7.5 s against NumPy's 0.86 s).

Usage::

    python benchmarks/checkpoint_load.py                  # 1k, 4k, 16k arrays, 5 repetitions
    python benchmarks/checkpoint_load.py --counts 1000 --reps 3

Contestants run in the same process, interleaved (see ``benchmarks/_harness.py``); the
table gives median wall times and the median of the paired per-repetition ratios.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Sequence

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import numpy as np  # noqa: E402

import tinygrad_rnn as tr  # noqa: E402
from benchmarks import _harness as hz  # noqa: E402

__all__ = ["make_checkpoint", "numpy_load_all", "measure", "main"]


def make_checkpoint(path: str, n_arrays: int, size: int = 16) -> None:
    """A state dict of ``n_arrays`` small float32 arrays (``size`` values each)."""
    rng = np.random.default_rng(0)
    state = {f"layer{i}.weight": rng.standard_normal(size).astype(np.float32)
             for i in range(n_arrays)}
    tr.save(state, path)


def numpy_load_all(path: str) -> dict[str, np.ndarray]:
    """The reference: NumPy reads the same archive, every member."""
    with np.load(path, allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def measure(counts: Sequence[int], reps: int) -> list[dict[str, str]]:
    """One table row per array count: median times and the paired ratio."""
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for n in counts:
            path = os.path.join(folder, f"ckpt{n}.npz")
            make_checkpoint(path, n)
            times = hz.interleaved([("tr.load", lambda: tr.load(path)),
                                    ("numpy.load", lambda: numpy_load_all(path))], reps=reps)
            ours, ref = times["tr.load"].wall_ms, times["numpy.load"].wall_ms
            rows.append({
                "arrays": str(n),
                "tr.load ms": f"{hz.median(ours):.1f}",
                "numpy.load ms": f"{hz.median(ref):.1f}",
                "ratio": f"{hz.paired_ratio(ours, ref):.2f}",
                "tr.load us/array": f"{1e3 * hz.median(ours) / n:.1f}",
            })
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--counts", type=int, nargs="+", default=[1000, 4000, 16000])
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args(argv)
    tr.malloc_tuning.keep_freed_memory()  # freed memory stays in the process (its docstring)
    rows = measure(args.counts, args.reps)
    columns = list(rows[0])
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join("---" for _ in columns) + "|")
    for row in rows:
        print("| " + " | ".join(row[c] for c in columns) + " |")
    print(f"({hz.machine_info().get('cpu', 'cpu unknown')}; ratio = median of paired "
          f"tr.load / numpy.load times over {args.reps} repetitions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
