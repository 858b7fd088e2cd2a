"""Figures of a run folder drawn from its CSV files alone (``tinygrad-rnn plot RUN_DIR``):
nothing of the run needs to be in memory, so a figure can be redrawn, restyled or compared
long after the run, on another machine. The files are those of :mod:`tinygrad_rnn.runs`.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from . import viz
from .runs import run_path, find_runs, read_metrics, read_state_norms

__all__ = ["plot_run"]


def plot_run(path: str | os.PathLike, out: str | os.PathLike | None = None) -> list[str]:
    """Draw a run folder's figures from its CSV files alone (nothing of the run needs to be
    in memory): ``learning_curves.png`` (training loss per update, validation loss as
    points, one colour per run), ``grad_norms.png`` (the global gradient norm before and
    after clipping), ``lr.png`` (the learning rate) and, for each run with a monitor,
    ``heatmap_<run>.png`` (||dL/dh_t|| over training, :func:`tinygrad_rnn.viz.
    plot_state_grad_heatmap`). ``path`` may be a run folder or a folder of run folders;
    ``out`` defaults to ``path/figures``. Returns the files written."""
    folder = run_path(path, "plot_run")
    runs = find_runs(folder)
    if not runs:
        raise FileNotFoundError(f"plot_run: no metrics.csv in {folder} or its subfolders; "
                                f"is it a run folder (run_dir= of tr.training.fit, --run-dir "
                                f"of the demos)?")
    out = Path(out) if out is not None else folder / "figures"
    out.mkdir(parents=True, exist_ok=True)
    plt = viz.pyplot()
    names = {run: (run.name if run != folder else folder.name) for run in runs}
    metrics = {run: read_metrics(run) for run in runs}
    written = []

    fig, ax = plt.subplots(figsize=(7, 4.2))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    positive = True
    for k, run in enumerate(runs):
        m, color = metrics[run], colors[k % len(colors)]
        ax.plot(m["step"], m["loss"], color=color, lw=1.2, alpha=0.85,
                label=f"{names[run]} (train)")
        val = ~np.isnan(m["val_loss"])
        if val.any():
            ax.plot(m["step"][val], m["val_loss"][val], "o--", color=color, ms=3.5,
                    label=f"{names[run]} (validation)")
        positive &= bool(np.all(m["loss"][np.isfinite(m["loss"])] > 0))
    if positive:
        ax.set_yscale("log")
    written.append(_finish(fig, ax, out / "learning_curves.png", ylabel="loss",
                           title=f"Learning curves: {folder.name}"))

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for k, run in enumerate(runs):
        m, color = metrics[run], colors[k % len(colors)]
        ax.plot(m["step"], m["grad_norm"], color=color, lw=1.2,
                label=f"{names[run]}: before clipping")
        if not np.allclose(m["clipped_norm"], m["grad_norm"], equal_nan=True):
            ax.plot(m["step"], m["clipped_norm"], "--", color=color, lw=1.0,
                    label=f"{names[run]}: after clipping")
    norms = np.concatenate([metrics[r]["grad_norm"] for r in runs])
    if np.all(norms[np.isfinite(norms)] > 0):
        ax.set_yscale("log")
    written.append(_finish(fig, ax, out / "grad_norms.png",
                           ylabel=r"$\|\partial L/\partial\theta\|$",
                           title="Global gradient norm"))

    fig, ax = plt.subplots(figsize=(7, 3.2))
    for k, run in enumerate(runs):
        ax.plot(metrics[run]["step"], metrics[run]["lr"], color=colors[k % len(colors)],
                label=names[run])
    written.append(_finish(fig, ax, out / "lr.png", ylabel="learning rate",
                           title="Learning rate"))

    for run in runs:
        states = read_state_norms(run)
        if not states:
            continue
        (module, layer, direction, kind), (_, table) = next(iter(states.items()))
        if table.size == 0 or not np.any(np.isfinite(table) & (table > 0)):
            continue
        what = "h" if kind == "h" else "c"
        fig = viz.plot_state_grad_heatmap(
            table, title=rf"{names[run]}: $\|\partial L/\partial {what}_t\|$ over training "
                         f"({module}, layer {layer})")
        written.append(viz.save_figure(fig, out / f"heatmap_{names[run]}.png"))
        plt.close(fig)
    return written


def _finish(fig: Any, ax: Any, path: Path, ylabel: str, title: str) -> str:
    """Label a per-update plot (integer update numbers on x, a grid, the legend), save it to
    ``path`` and close it; returns the file written."""
    from matplotlib.ticker import MaxNLocator

    ax.set(xlabel="update", ylabel=ylabel, title=title)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    written = viz.save_figure(fig, path)
    viz.pyplot().close(fig)
    return written
