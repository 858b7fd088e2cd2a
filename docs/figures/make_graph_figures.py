"""Draw the figures of docs/graph.md into docs/figures/graph/.

Run from the repository root:  python docs/figures/make_graph_figures.py [--out DIR]

Needs Graphviz's ``dot`` for the SVG drawings (``apt-get install graphviz``); the DOT text of
each drawing is written beside it too, so the figures can be checked without Graphviz. The
networks are the ones the page builds (same seeds, same sizes), float64 so the printed norms
do not depend on the BLAS:

* ``neuron``: one tanh neuron, the micrograd-sized example;
* ``elman_autograd_T8`` and ``elman_fused_T8``: an Elman RNN unrolled over 8 steps on each
  engine, the loss at the last step;
* ``lstm_autograd_T30``: an LSTM over 30 steps, each step collapsed to one node and shaded
  by the gradient it hands on, beside ``lstm_T30_norms.png``, the per-step norm plot of the
  same backward pass.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import numpy as np

import tinygrad_rnn as tr
from tinygrad_rnn.monitor import state_grad_norms
from tinygrad_rnn.viz import save_figure

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "graph")


def neuron() -> tr.viz.Graph:
    """o = tanh(w . x + b), backpropagated: every gradient recorded and drawn."""
    x = tr.Tensor([1.0, -2.0], dtype=np.float64)
    w = tr.Tensor([0.5, 0.25], dtype=np.float64, requires_grad=True)
    b = tr.Tensor(0.1, dtype=np.float64, requires_grad=True)
    o = ((x * w).sum() + b).tanh()
    with tr.viz.record_backward() as rec:
        o.backward()
    return tr.viz.graph(rec, params={"w": w, "b": b})


def unrolled(mode: str, T: int, engine: str, **options: Any) -> tuple[tr.viz.Graph, Any]:
    """A recurrent layer (D = 3, H = 4, N = 2) over T steps, loss = ||h_T||^2 at the last
    step; returns the drawing and the layer (its ``state_grads`` hold dL/dh_t)."""
    tr.manual_seed(0)
    layer = getattr(tr.nn, mode)(3, 4, engine=engine, dtype=np.float64)
    layer.track_state_grads = True
    x = tr.Tensor(np.random.default_rng(0).standard_normal((T, 2, 3)))
    out, _ = layer(x)
    loss = (out[-1] ** 2).sum()
    with tr.viz.record_backward() as rec:
        loss.backward()
    return tr.viz.graph(rec, params=layer, **options), layer


def norms_plot(layer: Any, drawing: tr.viz.Graph, path: str) -> None:
    """||dL/dh_t|| (track_state_grads) and the collapsed steps' norms, against t."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dh = state_grad_norms(layer.state_grads[(0, 0)]["h"])
    steps = {n.name: n.norm for n in drawing.nodes.values() if n.kind == "step"}
    pair = [steps[f"t = {t}"] for t in range(len(dh))]
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    ax.semilogy(range(len(dh)), dh, "o-", ms=3, label=r"$\|\partial L/\partial h_t\|$ "
                                                        "(track_state_grads)")
    ax.semilogy(range(len(pair)), pair, "s--", ms=3, alpha=0.7,
                label=r"graph: step $t$ hands on $(h_t, c_t)$")
    ax.set_xlabel("time step t (the loss is at the last step)")
    ax.set_ylabel("gradient norm")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=HERE, help="folder for the figures")
    args = parser.parse_args(argv)
    if tr.graph.find_dot() is None:
        print("make_graph_figures: Graphviz's dot is not on PATH (apt-get install graphviz)",
              file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    drawings = {"neuron": neuron()}
    drawings["elman_autograd_T8"], _ = unrolled("RNN", 8, "autograd", hide="small")
    drawings["elman_fused_T8"], _ = unrolled("RNN", 8, "fused")
    drawings["lstm_autograd_T30"], lstm = unrolled("LSTM", 30, "autograd")
    for name, drawing in drawings.items():
        drawing.save(os.path.join(args.out, f"{name}.svg"))
        drawing.save(os.path.join(args.out, f"{name}.dot"))
        print(f"{name}: {drawing!r}")
    norms_plot(lstm, drawings["lstm_autograd_T30"],
               os.path.join(args.out, "lstm_T30_norms.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
