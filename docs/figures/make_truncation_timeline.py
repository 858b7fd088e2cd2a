"""Draw docs/figures/truncation_timeline.png and .svg: both truncation variants on one timeline.

Run from the repository root:  python docs/figures/make_truncation_timeline.py [--out DIR]

Each row is one backward pass (a window of :func:`tinygrad_rnn.truncation.windows`):
the pale bar spans the steps that are run and backpropagated, the dark bar the steps whose
loss the window counts, and the scissors line the step whose state the next window starts
from, detached. Top: chunked TBPTT(k); bottom: Williams & Peng's TBPTT(k1, k2).
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from tinygrad_rnn.truncation import Truncation, chunked, williams_peng, windows
from tinygrad_rnn.viz import save_figure

T = 16
PANELS = ((chunked(4), "chunked TBPTT(4): detach every 4 steps, loss on every step"),
          (williams_peng(3, 6), "TBPTT(3, 6) (Williams & Peng): every 3 steps, "
                                "backpropagate 6; loss on the last 3"))
RUN_COLOR, LOSS_COLOR, CUT_COLOR = "#c6dbef", "#2171b5", "#d94801"


def _panel(ax: Any, schedule: Truncation, title: str) -> None:
    ws = windows(T, schedule)
    for row, w in enumerate(ws):
        y = len(ws) - 1 - row                               # first window on top
        ax.broken_barh([(w.start, w.stop - w.start)], (y - 0.35, 0.7), color=RUN_COLOR)
        ax.broken_barh([(w.loss_start, w.stop - w.loss_start)], (y - 0.2, 0.4),
                       color=LOSS_COLOR)
        ax.annotate("", xy=(w.start, y), xytext=(w.stop, y),
                    arrowprops=dict(arrowstyle="->", color="black", lw=0.8))
        ax.text(w.stop + 0.15, y, f"update at t={w.stop}", va="center", fontsize=7)
        if w.carry is not None:                             # down to the next window's bar
            ax.plot([w.carry, w.carry], [y - 0.35, y - 0.65], color=CUT_COLOR, lw=1.6,
                    ls="--")
            ax.text(w.carry - 0.12, y - 0.5, "\u2702", color=CUT_COLOR, fontsize=9,
                    ha="right", va="center")
    ax.set_yticks(range(len(ws)))
    ax.set_yticklabels([f"window {len(ws) - i}" for i in range(len(ws))], fontsize=7)
    ax.set_xlim(-0.8, T + 3.2)
    ax.set_ylim(-0.7, len(ws) - 0.3)
    ax.set_xticks(range(0, T + 1, 1))
    ax.tick_params(axis="x", labelsize=7)
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_title(title, fontsize=9, loc="left")


def draw() -> Any:
    """The figure (matplotlib Figure), not saved."""
    import matplotlib

    if matplotlib.get_backend().lower() != "agg" and not os.environ.get("DISPLAY"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    fig, axes = plt.subplots(2, 1, figsize=(8, 5.2), sharex=True,
                             gridspec_kw={"height_ratios": [3, 5]})
    for ax, (schedule, title) in zip(axes, PANELS):
        _panel(ax, schedule, title)
    axes[-1].set_xlabel("time step t (the window covers steps [start, stop); "
                        "arrows: direction of backpropagation)", fontsize=8)
    handles = [Patch(color=RUN_COLOR, label="steps run and backpropagated"),
               Patch(color=LOSS_COLOR, label="steps whose loss the window counts"),
               Line2D([], [], color=CUT_COLOR, ls="--",
                      label="state carried to the next window (detached)")]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def main(argv: list[str] | None = None) -> list[str]:
    """Write truncation_timeline.png and .svg into ``--out``; returns the paths."""
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=here, help="folder for the PNG and SVG")
    args = p.parse_args(argv)
    # byte-for-byte reproducible SVG: a fixed date and fixed element ids
    os.environ.setdefault("SOURCE_DATE_EPOCH", "0")
    import matplotlib

    matplotlib.rcParams["svg.hashsalt"] = "truncation_timeline"
    fig = draw()
    paths = [save_figure(fig, os.path.join(args.out, f"truncation_timeline.{ext}"), dpi=110)
             for ext in ("png", "svg")]
    import matplotlib.pyplot as plt

    plt.close(fig)
    return paths


if __name__ == "__main__":
    for path in main():
        print(path)
    sys.exit(0)
