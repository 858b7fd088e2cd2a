"""Plots for gradient experiments (matplotlib, Agg when headless).

Every function returns the :class:`matplotlib.figure.Figure` and writes a file only when given
``path`` (the extension picks the format: ``.png`` or ``.svg``; parent folders are created,
and the file is written to a temporary name first and then renamed, so a crash never leaves a
half-written figure under the name).
"""
from __future__ import annotations

import os
import tempfile
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["plot_norms_vs_distance", "plot_state_grad_heatmap", "plot_spectral_sweep",
           "plot_learning_curves", "plot_attention", "save_figure"]


def _pyplot() -> Any:
    import matplotlib

    if not os.environ.get("DISPLAY") and matplotlib.get_backend().lower() != "agg":
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str | os.PathLike, dpi: int = 120) -> str:
    """Save ``fig`` atomically to ``path`` (.png or .svg); returns the path."""
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".png", ".svg"):
        raise ValueError(f"save_figure: use a .png or .svg path, got {path!r}")
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=ext, dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fig.savefig(fh, format=ext[1:], dpi=dpi, bbox_inches="tight")
        os.chmod(tmp, _file_mode(path))  # mkstemp makes 0600; give a figure the usual mode
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


def _file_mode(path: str) -> int:
    """The permission bits a new file gets from open() under the current umask, or those of
    the file being replaced."""
    try:
        return os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _finish(fig: Any, path: Any) -> Any:
    if path is not None:
        save_figure(fig, path)
    return fig


def plot_norms_vs_distance(curves: Mapping[str, Sequence[float]], bounds: Mapping[str, Any]
                           | None = None, title: str = "Gradient norm vs distance",
                           ylabel: str = r"$\|\partial L / \partial h_t\|$",
                           path: Any = None) -> Any:
    """Norms against distance T - t on a log scale, one line per model; optional dashed
    bound curves (e.g. Pascanu et al.'s) in the same colour as the model of the same name.

    ``curves[name]`` is indexed by distance (entry 0 at the last step).
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    colors = {}
    for name, y in curves.items():
        y = np.asarray(y, dtype=np.float64)
        d = np.arange(y.size)
        keep = y > 0
        (line,) = ax.semilogy(d[keep], y[keep], label=name, lw=1.8)
        colors[name] = line.get_color()
    for name, b in (bounds or {}).items():
        b = np.asarray(b, dtype=np.float64)
        ax.semilogy(np.arange(b.size), b, ls="--", lw=1.0, color=colors.get(name, "gray"),
                    label=f"bound: {name}")
    ax.set_xlabel("distance T - t (steps back from the loss)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    return _finish(fig, path)


def plot_state_grad_heatmap(norms: Any, title: str = r"$\|\partial L/\partial h_t\|$ over training",
                            path: Any = None) -> Any:
    """Heatmap of ||dL/dh_t|| with training steps on the y axis and time t on the x axis
    (log colour scale). ``norms`` is (steps, T), as :meth:`GradientMonitor.state_norms`."""
    from matplotlib.colors import LogNorm

    plt = _pyplot()
    z = np.asarray(norms, dtype=np.float64)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    pos = z[np.isfinite(z) & (z > 0)]
    norm = LogNorm(vmin=pos.min(), vmax=pos.max()) if pos.size else None
    im = ax.imshow(np.where(z > 0, z, np.nan), aspect="auto", origin="lower", norm=norm,
                   cmap="viridis", interpolation="nearest")
    fig.colorbar(im, ax=ax, label="norm")
    ax.set_xlabel("time step t")
    ax.set_ylabel("training step")
    ax.set_title(title)
    return _finish(fig, path)


def plot_spectral_sweep(radii: Sequence[float], values: Mapping[str, Sequence[float]],
                        xlabel: str = r"spectral radius $\rho(W_{hh})$",
                        ylabel: str = "value", title: str = "Spectral-radius sweep",
                        logy: bool = True, path: Any = None) -> Any:
    """Quantities (fitted decay rate, horizon, ...) against the spectral radius of W_hh."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, v in values.items():
        (ax.semilogy if logy else ax.plot)(radii, v, marker="o", label=name)
    ax.axvline(1.0, color="gray", ls=":", lw=1)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _finish(fig, path)


def plot_learning_curves(curves: Mapping[str, Sequence[float]], xlabel: str = "step",
                         ylabel: str = "loss", title: str = "Learning curves",
                         logy: bool = False, hline: float | None = None,
                         hline_label: str = "", x: Mapping[str, Sequence[float]] | None = None,
                         path: Any = None) -> Any:
    """One line per run; an optional horizontal reference line (e.g. a baseline loss)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, y in curves.items():
        xs = np.asarray(x[name]) if x is not None and name in x else np.arange(len(y))
        (ax.semilogy if logy else ax.plot)(xs, y, label=name, lw=1.5)
    if hline is not None:
        ax.axhline(hline, color="gray", ls="--", lw=1, label=hline_label or None)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _finish(fig, path)


def plot_attention(weights: Any, source_tokens: Sequence[str], output_tokens: Sequence[str],
                   marked: Sequence[int] = (), title: str = "Attention weights",
                   path: Any = None) -> Any:
    """Heatmap of attention weights (outputs x source tokens); source positions listed in
    ``marked`` (e.g. noise tokens) get red tick labels."""
    plt = _pyplot()
    w = np.asarray(weights, dtype=np.float64)
    fig, ax = plt.subplots(figsize=(0.45 * max(len(source_tokens), 6) + 1.5,
                                    0.45 * max(len(output_tokens), 4) + 1.2))
    im = ax.imshow(w, cmap="Greys", vmin=0.0, vmax=1.0, aspect="auto")
    fig.colorbar(im, ax=ax, fraction=0.046)
    ax.set_xticks(range(len(source_tokens)))
    ax.set_xticklabels(source_tokens)
    ax.set_yticks(range(len(output_tokens)))
    ax.set_yticklabels(output_tokens)
    for i in marked:
        ax.get_xticklabels()[i].set_color("red")
    ax.set_xlabel("source")
    ax.set_ylabel("output")
    ax.set_title(title)
    return _finish(fig, path)
