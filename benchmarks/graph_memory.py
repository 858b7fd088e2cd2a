"""What the recorded graph of the autograd LSTM keeps alive until backward, by op class.

The allocator-level peak of the autograd LSTM's step (benchmarks/recurrent.py, T = 512,
H = 256) is several times torch's. This script splits the memory that the graph holds
between forward and backward into two kinds, walking the graph from the loss:

* **saved**: the arrays an op saved for its backward (``ctx.saved_arrays``), what the
  derivative is written in;
* **held as inputs**: the data of the input tensors an op keeps as graph edges
  (``ctx.inputs``) and did not also save. An ``Add``'s backward needs no data at all, yet
  its two inputs stayed alive until backward through these edges: 488 MiB of the step at
  T = 512, H = 256, against 150 MiB saved. Since the engine keeps an input made by an op as
  an :class:`tinygrad_rnn.engine.Edge` (node, output index, shape, dtype; no values), this
  part is 0 and only leaves (parameters, data) are held as inputs.

Each buffer is counted once, at its base array (views share their base's memory): as saved
if any op saved it, else as held as an input (under the first op of the walk that holds it).

    python benchmarks/graph_memory.py                      # T = 512, N = 32, H = 256
    python benchmarks/graph_memory.py --seq-len 64 --hidden 64
"""
from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path
from typing import Any, Sequence

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import numpy as np  # noqa: E402

import tinygrad_rnn as tr  # noqa: E402
from tinygrad_rnn.functional import cross_entropy  # noqa: E402
from tinygrad_rnn.nn.layers import Linear  # noqa: E402
from tinygrad_rnn.nn.recurrent import LSTM  # noqa: E402

__all__ = ["graph_memory", "main"]


def _base(array: Any) -> Any:
    """The array that owns ``array``'s memory (itself unless it is a view)."""
    while getattr(array, "base", None) is not None:
        array = array.base
    return array


def graph_memory(loss: Any) -> dict[str, dict[str, int]]:
    """Bytes per op class of the graph below ``loss``: {"saved": {op: bytes},
    "inputs": {op: bytes}, "nodes": {op: count}}. Iterative walk (no recursion)."""
    order, seen_nodes = [], set()
    stack = [loss._ctx] if loss._ctx is not None else []
    while stack:
        ctx = stack.pop()
        if id(ctx) in seen_nodes:
            continue
        seen_nodes.add(id(ctx))
        order.append(ctx)
        for tensor in getattr(ctx, "inputs", ()) or ():
            if getattr(tensor, "_ctx", None) is not None:
                stack.append(tensor._ctx)
    saved: collections.Counter = collections.Counter()
    held: collections.Counter = collections.Counter()
    nodes = collections.Counter(ctx.name for ctx in order)
    seen: set[int] = set()

    def count(array: Any, into: collections.Counter, name: str) -> None:
        if not hasattr(array, "nbytes"):
            return
        base = _base(array)
        if id(base) not in seen:
            seen.add(id(base))
            into[name] += int(base.nbytes)

    for ctx in order:                      # every saved buffer first, then the rest
        for array in ctx.saved_arrays or ():
            count(array, saved, ctx.name)
    for ctx in order:
        for tensor in getattr(ctx, "inputs", ()) or ():
            count(getattr(tensor, "_data", None), held, ctx.name)
    return {"saved": dict(saved), "inputs": dict(held), "nodes": dict(nodes)}


def lstm_step_graph(seq_len: int, batch: int, hidden: int, seed: int = 0) -> Any:
    """The loss of benchmarks/recurrent.py's step with the autograd LSTM (not yet
    backpropagated): LSTM(H, H) over (T, N, H), a readout to 64 classes, cross entropy."""
    rng = np.random.default_rng(seed)
    tr.manual_seed(seed)
    lstm = LSTM(hidden, hidden, engine="autograd")
    readout = Linear(hidden, 64)
    x = tr.Tensor(rng.standard_normal((seq_len, batch, hidden)).astype(np.float32))
    y = rng.integers(0, 64, (seq_len * batch,))
    out, _ = lstm(x)
    return cross_entropy(readout(out).reshape(seq_len * batch, 64), y)


def report(memory: dict[str, dict[str, int]], top: int = 8) -> str:
    """The two tables as text, MiB per op class, largest first."""
    lines = []
    for kind, title in (("saved", "saved for backward"), ("inputs", "held as input edges")):
        total = sum(memory[kind].values())
        lines.append(f"{title}: {total / 2**20:.1f} MiB")
        ranked = sorted(memory[kind].items(), key=lambda kv: -kv[1])[:top]
        for name, size in ranked:
            lines.append(f"  {name:<20} {memory['nodes'][name]:6d} nodes {size / 2**20:9.1f} MiB")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--hidden", type=int, default=256)
    args = p.parse_args(argv)
    loss = lstm_step_graph(args.seq_len, args.batch, args.hidden)
    print(f"autograd LSTM, T = {args.seq_len}, N = {args.batch}, H = {args.hidden}, float32")
    print(report(graph_memory(loss)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
