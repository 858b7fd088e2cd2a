"""Benchmark the host allocator setting (tinygrad_rnn/malloc_tuning.py): our training step
with glibc's thresholds raised by ``keep_freed_memory()`` (what the demos, the CLI and the
benchmarks call) against glibc's own defaults (``TINYGRAD_RNN_MALLOC=default``).

The setting is process-wide and made at the start, so the two cannot share a process: each
round starts one child process per setting, in an order that alternates between rounds, and
each child times ``--steps`` training steps after ``--warmup`` untimed ones. The table gives
the median step time of each setting, the minor page faults per step, and the median over
rounds of the paired ratio tuned / default. torch is never imported here: a process that has
run torch usually has glibc's *dynamic* thresholds raised already by torch's own large
frees, which hides the effect (and is why benchmarks/recurrent.py, which runs torch in the
same process, shows no page faults for our step either way).

The step is the one of benchmarks/recurrent.py: forward of a one-layer recurrent network
(fused engine) over T steps, a linear readout to 64 classes at every step, the mean cross
entropy, backward; float32, D = H.

Usage::

    python benchmarks/host_allocator.py                       # LSTM, H in {64, 256}
    python benchmarks/host_allocator.py --cells lstm gru rnn --hidden 64 --rounds 7
    python benchmarks/host_allocator.py --markdown
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks import _harness as hz  # noqa: E402

SETTINGS = ("tuned", "default")
CLASSES = 64


def child_env(setting: str, threads: int) -> dict[str, str]:
    """The environment of a child: BLAS threads pinned, glibc's own MALLOC_* variables and
    GLIBC_TUNABLES removed (they would make tinygrad_rnn leave malloc alone in both
    settings, and set thresholds of their own), and ``TINYGRAD_RNN_MALLOC=default`` for the
    untuned one."""
    env = hz.thread_env(threads)
    for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_",
                 "GLIBC_TUNABLES", "TINYGRAD_RNN_MALLOC"):
        env.pop(name, None)
    if setting == "default":
        env["TINYGRAD_RNN_MALLOC"] = "default"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_ROOT), env.get("PYTHONPATH")) if p)
    return env


def measure(cell: str, hidden: int, seq_len: int, batch: int, steps: int,
            warmup: int) -> dict[str, Any]:
    """In this process: ``steps`` timed training steps; median ms, faults per step."""
    import resource
    import time

    import numpy as np

    import tinygrad_rnn as tr
    tr.malloc_tuning.keep_freed_memory()  # a no-op under TINYGRAD_RNN_MALLOC=default
    from tinygrad_rnn.functional import cross_entropy
    from tinygrad_rnn.nn.layers import Linear

    layer = {"lstm": tr.nn.LSTM, "gru": tr.nn.GRU, "rnn": tr.nn.RNN}[cell]
    rng = np.random.default_rng(0)
    x = tr.Tensor(rng.standard_normal((seq_len, batch, hidden)).astype(np.float32))
    y = tr.Tensor(rng.integers(0, CLASSES, seq_len * batch))
    model = layer(hidden, hidden, generator=0)
    readout = Linear(hidden, CLASSES, generator=1)

    def step() -> float:
        model.zero_grad()
        readout.zero_grad()
        out, _ = model(x)
        loss = cross_entropy(readout(out).reshape(seq_len * batch, CLASSES), y)
        loss.backward()
        return float(loss.item())

    for _ in range(warmup):
        step()
    times, faults = [], []
    for _ in range(steps):
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.perf_counter()
        loss = step()
        times.append((time.perf_counter() - t0) * 1e3)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    return {"ms": hz.median(times), "faults": hz.median(faults), "loss": loss,
            "allocator": tr.malloc_tuning.status()}


def run_child(setting: str, args: argparse.Namespace, cell: str, hidden: int) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--cells", cell,
           "--hidden", str(hidden), "--seq-len", str(args.seq_len), "--batch",
           str(args.batch), "--steps", str(args.steps), "--warmup", str(args.warmup)]
    out = subprocess.run(cmd, env=child_env(setting, args.threads), capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every (cell, H): ``rounds`` rounds of one child per setting; one row per setting."""
    rows = []
    for cell in args.cells:
        for hidden in args.hidden:
            got: dict[str, list[dict]] = {s: [] for s in SETTINGS}
            for r in range(args.rounds):
                order = SETTINGS if r % 2 == 0 else SETTINGS[::-1]
                for setting in order:
                    got[setting].append(run_child(setting, args, cell, hidden))
            said = {s: {g["allocator"] for g in got[s]} for s in SETTINGS}
            if not all(a.startswith("glibc malloc keeps") for a in said["tuned"]):
                raise RuntimeError(f"the tuned children did not tune malloc: {said['tuned']}")
            losses = {round(g["loss"], 6) for s in SETTINGS for g in got[s]}
            if len(losses) != 1:  # the setting must not change a single number
                raise RuntimeError(f"{cell} H={hidden}: the losses differ: {sorted(losses)}")
            ratio = hz.paired_ratio([g["ms"] for g in got["tuned"]],
                                    [g["ms"] for g in got["default"]])
            for setting in SETTINGS:
                runs = got[setting]
                rows.append({
                    "cell": cell.upper() if cell != "rnn" else "Elman", "H": str(hidden),
                    "allocator": setting,
                    "ms": f"{hz.median([g['ms'] for g in runs]):.2f}",
                    "faults/step": f"{hz.median([g['faults'] for g in runs]):.0f}",
                    "x default": f"{ratio:.2f}x" if setting == "tuned" else "1.00x",
                    "rounds": str(len(runs)),
                })
    return rows


def format_table(rows: Sequence[dict[str, str]], markdown: bool) -> str:
    cols = list(rows[0])
    width = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}
    line = (lambda vals: "| " + " | ".join(v.rjust(width[c]) for c, v in zip(cols, vals)) + " |")
    if markdown:
        out = [line(cols), "|" + "|".join("-" * (width[c] + 2) for c in cols) + "|"]
    else:
        out = [line(cols)]
    out += [line([r[c] for c in cols]) for r in rows]
    return "\n".join(out)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cells", nargs="+", default=["lstm"], choices=["lstm", "gru", "rnn"])
    p.add_argument("--hidden", nargs="+", type=int, default=[64, 256])
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=15, help="timed steps in each child")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps in each child first")
    p.add_argument("--rounds", type=int, default=5, help="child processes per setting")
    p.add_argument("--threads", type=int, default=1, help="BLAS threads of the children")
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.cells[0], args.hidden[0], args.seq_len, args.batch,
                                 args.steps, args.warmup)))
        return 0
    rows = run(args)
    command = "python benchmarks/host_allocator.py " + " ".join(
        sys.argv[1:] if argv is None else argv)
    print(f"host allocator: {command.strip()}")
    print(f"T={args.seq_len}, N={args.batch}, D=H, fused engine, float32, "
          f"{args.threads} BLAS thread(s); {args.rounds} child processes per setting, "
          f"{args.steps} timed steps each; x default = median of paired ratios")
    info = hz.machine_info()
    print(f"cpu: {info['cpu']}; numpy: {info['numpy']}; load: {info['load']}")
    print()
    print(format_table(rows, args.markdown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
