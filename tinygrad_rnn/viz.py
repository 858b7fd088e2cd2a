"""Plots for gradient experiments (matplotlib, Agg when headless), and the autograd graph
drawn with Graphviz: :func:`graph` and :func:`record_backward` (from
:mod:`tinygrad_rnn.graph`, see docs/graph.md).

Every function returns the :class:`matplotlib.figure.Figure` and writes a file only when given
``path`` (the extension picks the format: ``.png`` or ``.svg``; parent folders are created,
and the file is written to a temporary name first and then renamed, so a crash never leaves a
half-written figure under the name).

Inputs are checked before anything is drawn: a wrong shape, a length that does not match, a
non-finite coordinate or a path with another extension is a ``ValueError`` (``TypeError`` for
a value of the wrong kind) that names the function, the argument and the shapes involved, and
no figure is left open.
"""
from __future__ import annotations

import math
import numbers
import os
import tempfile
from typing import Any, Mapping, Sequence, Union

import numpy as np

from . import _validate
from .graph import BackwardRecord, Graph, graph, record_backward
from .tensor import Tensor

__all__ = ["plot_norms_vs_distance", "plot_state_grad_heatmap", "shared_log_limits",
           "plot_spectral_sweep", "plot_learning_curves", "plot_train_valid_curves",
           "plot_attention", "save_figure", "graph", "Graph", "record_backward",
           "BackwardRecord"]

#: a 1-D run of numbers, as the plots take it: a list, a tuple or a NumPy array
Numbers = Union[Sequence[float], np.ndarray]

_FORMATS = (".png", ".svg")
# one (colour, marker) per curve: tab10's colours, and a marker so that two curves that
# overlap (or a reader who cannot tell the colours apart) can still be told apart
_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown",
           "tab:pink", "tab:gray", "tab:olive", "tab:cyan")
_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "<", ">")
ZERO_COLOR = "white"        # heatmap cells that are exactly 0 (a log scale has no colour)
MISSING_COLOR = "0.75"      # heatmap cells that are NaN (no data, e.g. padding)


def pyplot() -> Any:
    """``matplotlib.pyplot``, on the Agg backend when there is no display (a headless machine
    or CI), so figures are written to files instead of failing to open a window."""
    import matplotlib

    if not os.environ.get("DISPLAY") and matplotlib.get_backend().lower() != "agg":
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _check_path(path: Any, where: str) -> str:
    """``path`` as a string, refused unless it ends in .png or .svg (any case)."""
    try:
        path = os.fspath(path)
    except TypeError:
        raise TypeError(f"{where}: path must be a str or os.PathLike ending in .png or .svg, "
                        f"got {type(path).__name__}") from None
    if os.path.splitext(path)[1].lower() not in _FORMATS:
        raise ValueError(f"{where}: use a .png or .svg path, got {path!r}")
    return path


def save_figure(fig: Any, path: str | os.PathLike, dpi: int = 120) -> str:
    """Save ``fig`` atomically to ``path`` (.png or .svg) at ``dpi`` dots per inch (a positive
    number); returns the path."""
    path = _check_path(path, "save_figure")
    if not callable(getattr(fig, "savefig", None)):
        raise TypeError(f"save_figure: fig must be a matplotlib Figure, got "
                        f"{type(fig).__name__}")
    if (isinstance(dpi, bool) or not isinstance(dpi, numbers.Real)
            or not (math.isfinite(dpi) and dpi > 0)):
        raise ValueError(f"save_figure: dpi must be a positive number, got {dpi!r}")
    ext = os.path.splitext(path)[1].lower()
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
    """Save ``fig`` when a path is given and return it; a failed save closes it."""
    if path is not None:
        try:
            save_figure(fig, path)
        except BaseException:
            pyplot().close(fig)
            raise
    return fig


# ------------------------------------------------------------------------ input checks
def _numbers(values: Any, where: str, what: str) -> np.ndarray:
    """``values`` as a float64 array; anything that is not an array of numbers (text, ragged
    lists, a tensor on another device) is a ValueError naming ``where`` and ``what``."""
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where}: {what} must be an array of numbers ({err})") from None


def _series(values: Any, where: str, what: str) -> np.ndarray:
    """A 1-D float64 array (it may be empty)."""
    arr = _numbers(values, where, what)
    if arr.ndim != 1:
        raise ValueError(f"{where}: {what} must be 1-D (one number per point), got shape "
                         f"{arr.shape}")
    return arr


def _finite(arr: np.ndarray, where: str, what: str) -> np.ndarray:
    """``arr`` unchanged, refused if it holds NaN or an infinity (named by index)."""
    bad = np.flatnonzero(~np.isfinite(arr.ravel()))
    if bad.size:
        index = tuple(int(i) for i in np.unravel_index(bad[0], arr.shape))
        raise ValueError(f"{where}: {what} must be finite, got {arr[index]} at index "
                         f"{index if arr.ndim > 1 else index[0]}")
    return arr


def _named_series(curves: Any, where: str, what: str) -> dict[str, np.ndarray]:
    """A non-empty mapping label -> 1-D float64 array."""
    if not isinstance(curves, Mapping):
        raise TypeError(f"{where}: {what} must be a mapping from a label to a sequence of "
                        f"numbers, got {type(curves).__name__}")
    if not curves:
        raise ValueError(f"{where}: {what} is empty: nothing to plot")
    return {name: _series(y, where, f"{what}[{name!r}]") for name, y in curves.items()}


def _optional_mapping(values: Any, where: str, what: str) -> Mapping:
    """``values`` as a (possibly empty) mapping; None gives an empty one."""
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise TypeError(f"{where}: {what} must be a mapping from a label to a sequence of "
                        f"numbers or None, got {type(values).__name__}")
    return values


def _as_list(values: Any, where: str, what: str) -> list:
    """The items of an iterable (a list, tuple, string, array, ...) as a list."""
    try:
        return list(values)
    except TypeError:
        raise TypeError(f"{where}: {what} must be a sequence, got {type(values).__name__}"
                        ) from None


def _real(value: Any, where: str, what: str) -> float:
    """A finite real number as a float: a Python or NumPy int or float, or a 0-d integer or
    float array (``baseline.numpy()``) or 0-d Tensor on the CPU. Bools, strings, other shapes
    and NaN or infinities are a ValueError; a Tensor on another device is a ValueError that
    says to bring it to the CPU (no implicit copy)."""
    if isinstance(value, Tensor):
        if value.device != "cpu":
            raise ValueError(f"{where}: {what} is a Tensor on {value.device}; pass a number "
                             f"or a CPU tensor, e.g. {what}=t.item()")
        value = value.numpy()
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
        value = value[()]  # the NumPy scalar inside
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) \
            or not math.isfinite(value):
        raise ValueError(f"{where}: {what} must be a finite number, got {value!r}")
    return float(value)


# ------------------------------------------------------------------------------ plots
def plot_norms_vs_distance(curves: Mapping[str, Numbers], bounds: Mapping[str, Any]
                           | None = None, title: str = "Gradient norm vs distance",
                           ylabel: str = r"$\|\partial L / \partial h_t\|$",
                           path: Any = None) -> Any:
    """Norms against the distance d from the last step on a log scale, one line per model;
    optional dotted bound curves (e.g. Pascanu et al.'s) in the colour of the model of the
    same name (grey for a bound with no model of its name).

    ``curves[name]`` and ``bounds[name]`` are 1-D and indexed by distance: entry d belongs
    to h_t with t = T - 1 - d for steps t = 0, ..., T - 1, so entry 0 is the last step
    (where the loss is read) and d = 0 is a distance of zero steps. They may differ in
    length. Entries a log axis cannot show (zero after underflow, negative, NaN) are left out
    of the model curves. Each model gets its own colour and marker (markers staggered
    along the line), so curves stay apart where they overlap; bounds are dotted and carry
    no marker.
    """
    where = "plot_norms_vs_distance"
    ys = _named_series(curves, where, "curves")
    bs = {name: _series(b, where, f"bounds[{name!r}]")
          for name, b in _optional_mapping(bounds, where, "bounds").items()}
    if path is not None:
        _check_path(path, where)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    colors = {}
    for i, (name, y) in enumerate(ys.items()):
        d = np.arange(y.size)
        keep = y > 0
        color = _COLORS[i % len(_COLORS)]
        every = max(len(ys), y.size // 8)  # >= one marker slot per curve: no two coincide
        (line,) = ax.semilogy(d[keep], y[keep], label=name, lw=1.6, color=color,
                              marker=_MARKERS[i % len(_MARKERS)], markersize=5,
                              markevery=(i * every // len(ys), every))
        colors[name] = line.get_color()
    for name, b in bs.items():
        ax.semilogy(np.arange(b.size), b, ls=":", lw=1.4, color=colors.get(name, "gray"),
                    label=f"bound: {name}")
    ax.set_xlabel("distance d = T - 1 - t from the last step, where the loss is (steps)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    return _finish(fig, path)


def shared_log_limits(*norms: Any) -> tuple[float, float]:
    """``(vmin, vmax)``: the smallest and largest positive finite entry over all ``norms``
    (arrays of any shape), for heatmaps that must share one log colour scale.

    ValueError when no array holds a positive finite entry (nothing a log scale can show).
    """
    where = "shared_log_limits"
    if not norms:
        raise ValueError(f"{where}: give at least one array of norms")
    low, high = math.inf, -math.inf
    for i, values in enumerate(norms):
        z = _numbers(values, where, f"norms[{i}]")
        pos = z[np.isfinite(z) & (z > 0)]
        if pos.size:
            low, high = min(low, float(pos.min())), max(high, float(pos.max()))
    if not math.isfinite(low):
        raise ValueError(f"{where}: no positive finite entry in any of the {len(norms)} "
                         f"arrays: a log colour scale has nothing to show")
    return low, high


def plot_state_grad_heatmap(norms: Any, title: str = r"$\|\partial L/\partial h_t\|$ over training",
                            vmin: float | None = None, vmax: float | None = None,
                            path: Any = None) -> Any:
    """Heatmap of ||dL/dh_t|| with training updates on the y axis and time t on the x axis
    (log colour scale). ``norms`` is 2-D (updates, T), as :meth:`GradientMonitor.state_norms`.

    ``vmin`` and ``vmax`` fix the colour scale (both positive, ``vmin < vmax``); give two
    heatmaps the same limits, e.g. from :func:`shared_log_limits`, so that one colour means
    one norm in both. Left as None, each comes from the data (its smallest or largest
    positive finite entry); entries outside the given limits take the end colours, and the
    colour bar shows an arrow at that end.

    A log scale has no colour for 0: cells that are exactly 0 (the gradient underflowed to
    zero, e.g. below float32's smallest subnormal, about 1.4e-45) are drawn white, and NaN
    cells (no data: padding) light grey; a legend under the plot names each kind present.
    """
    from matplotlib.colors import LogNorm
    from matplotlib.patches import Patch

    where = "plot_state_grad_heatmap"
    z = _numbers(norms, where, "norms")
    if z.ndim != 2:
        raise ValueError(f"{where}: norms must be 2-D (training steps, time steps), got shape "
                         f"{z.shape}; a single row of T norms is norms[None, :]")
    if z.size == 0:
        raise ValueError(f"{where}: norms is empty (shape {z.shape}): nothing to plot")
    limits = {}
    for name, value in (("vmin", vmin), ("vmax", vmax)):
        if value is not None:
            limits[name] = _real(value, where, name)
            if limits[name] <= 0:
                raise ValueError(f"{where}: {name} must be > 0 on a log colour scale, got "
                                 f"{value!r}")
    if len(limits) == 2 and limits["vmin"] >= limits["vmax"]:
        raise ValueError(f"{where}: vmin must be below vmax, got vmin={vmin!r}, "
                         f"vmax={vmax!r}")
    shown = np.isfinite(z) & (z > 0)
    pos = z[shown]
    low = limits.get("vmin", float(pos.min()) if pos.size else None)
    high = limits.get("vmax", float(pos.max()) if pos.size else None)
    if low is not None and high is not None and low > high:
        raise ValueError(f"{where}: the colour scale would run from {low!r} down to "
                         f"{high!r}; give vmin below vmax (one limit given, the other "
                         f"taken from the data)")
    if path is not None:
        _check_path(path, where)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.8))
    norm = None if low is None or high is None else LogNorm(vmin=low, vmax=high)
    ax.set_facecolor(ZERO_COLOR)  # masked cells are transparent: zeros show this colour
    im = ax.imshow(np.where(shown, z, np.nan), aspect="auto", origin="lower", norm=norm,
                   cmap="viridis", interpolation="nearest")
    missing = np.isnan(z)
    if missing.any():  # NaN cells: one grey layer over the transparent gaps
        ax.imshow(np.where(missing, 1.0, np.nan), aspect="auto", origin="lower",
                  cmap=_single_color_map(MISSING_COLOR), interpolation="nearest")
    extend = "neither"
    if pos.size and low is not None and high is not None:
        below, above = bool(pos.min() < low), bool(pos.max() > high)
        extend = {(True, True): "both", (True, False): "min", (False, True): "max"}.get(
            (below, above), "neither")
    fig.colorbar(im, ax=ax, extend=extend,
                 label=r"$\|\partial L/\partial h_t\|$ (log scale)")
    ax.set_xlabel("time step t (input position, steps)")
    ax.set_ylabel("training update (optimizer steps)")
    ax.set_title(title)
    handles = []
    if np.any(z == 0):
        handles.append(Patch(facecolor=ZERO_COLOR, edgecolor="black",
                             label="white: exactly 0 (underflow; no colour on a log scale)"))
    if missing.any():
        handles.append(Patch(facecolor=MISSING_COLOR, edgecolor="black",
                             label="grey: no data (NaN, e.g. padding)"))
    if handles:
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.13),
                  fontsize=8, frameon=False, ncol=len(handles))
    return _finish(fig, path)


def _single_color_map(color: str) -> Any:
    """A colormap that paints every value ``color`` (for an overlay of flagged cells)."""
    from matplotlib.colors import ListedColormap

    return ListedColormap([color])


def plot_spectral_sweep(radii: Numbers, values: Mapping[str, Numbers],
                        xlabel: str = r"spectral radius $\rho(W_{hh})$",
                        ylabel: str = "value", title: str = "Spectral-radius sweep",
                        logy: bool = True, path: Any = None) -> Any:
    """Quantities (fitted decay rate, horizon, ...) against the spectral radius of W_hh.

    ``radii`` is 1-D, non-empty and finite; every ``values[name]`` is 1-D with one entry per
    radius (a NaN entry, or a non-positive one with ``logy``, leaves a gap)."""
    where = "plot_spectral_sweep"
    _validate.boolean(logy, "logy", where)
    x = _finite(_series(radii, where, "radii"), where, "radii")
    if x.size == 0:
        raise ValueError(f"{where}: radii is empty: nothing to plot")
    ys = _named_series(values, where, "values")
    for name, v in ys.items():
        if v.shape != x.shape:
            raise ValueError(f"{where}: values[{name!r}] has {v.size} entries but radii has "
                             f"{x.size}; give one value per radius")
    if path is not None:
        _check_path(path, where)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for i, (name, v) in enumerate(ys.items()):
        (ax.semilogy if logy else ax.plot)(x, v, marker=_MARKERS[i % len(_MARKERS)],
                                           color=_COLORS[i % len(_COLORS)], label=name)
    ax.axvline(1.0, color="gray", ls=":", lw=1, label=r"$\rho = 1$")
    if logy:
        _plain_log_ticks(ax)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _finish(fig, path)


def plot_learning_curves(curves: Mapping[str, Numbers],
                         xlabel: str = "update (optimizer steps)",
                         ylabel: str = "loss", title: str = "Learning curves",
                         logy: bool = False, hline: float | None = None,
                         hline_label: str = "", x: Mapping[str, Numbers] | None = None,
                         path: Any = None) -> Any:
    """One line per run; an optional horizontal reference line (e.g. a baseline loss).

    ``curves[name]`` is 1-D (it may be empty, e.g. a run too short to be validated); it is
    drawn against ``x[name]`` (finite, one entry per point) where given, else against
    0, 1, 2, ... Every label of ``x`` must be one of ``curves``. A NaN or infinite loss (a
    diverged run), or a non-positive one with ``logy``, leaves a gap. ``hline`` is None or
    a finite number: a Python or NumPy number, or a 0-d array or 0-d CPU Tensor of integers
    or floats (``hline=baseline.numpy()``); bools and strings are refused.
    """
    where = "plot_learning_curves"
    _validate.boolean(logy, "logy", where)
    ys = _named_series(curves, where, "curves")
    given_x = _optional_mapping(x, where, "x")
    unknown = [name for name in given_x if name not in ys]
    if unknown:
        raise ValueError(f"{where}: x has labels that are not in curves: {unknown}; "
                         f"curves has {list(ys)}")
    xs = {}
    for name, y in ys.items():
        if name in given_x:
            xs[name] = _finite(_series(given_x[name], where, f"x[{name!r}]"), where,
                               f"x[{name!r}]")
            if xs[name].shape != y.shape:
                raise ValueError(f"{where}: x[{name!r}] has {xs[name].size} entries but "
                                 f"curves[{name!r}] has {y.size}; give one x per point")
        else:
            xs[name] = np.arange(y.size)
    if hline is not None:
        hline = _real(hline, where, "hline")
    if path is not None:
        _check_path(path, where)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (name, y) in enumerate(ys.items()):
        (ax.semilogy if logy else ax.plot)(xs[name], y, label=name, lw=1.5,
                                           color=_COLORS[i % len(_COLORS)])
    if hline is not None:
        ax.axhline(hline, color="gray", ls="--", lw=1, label=hline_label or None)
    if logy:
        _plain_log_ticks(ax)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _finish(fig, path)


def plot_train_valid_curves(curves: Mapping[str, tuple[Any, Any, Any]],
                            xlabel: str = "update (optimizer steps)", ylabel: str = "loss",
                            title: str = "Training and validation curves",
                            logy: bool = False, note: str = "", path: Any = None) -> Any:
    """Training and validation curves of several models, paired by colour: each model has
    one colour, its training curve solid and its validation curve dashed (with markers).

    ``curves[name]`` is ``(x, train, valid)``: three 1-D sequences of the same length (the
    updates at which both were recorded, finite). A NaN or infinite value, or a
    non-positive one with ``logy``, leaves a gap. ``note`` (optional) is printed under the
    plot, e.g. how the training value was averaged.
    """
    where = "plot_train_valid_curves"
    _validate.boolean(logy, "logy", where)
    if not isinstance(curves, Mapping):
        raise TypeError(f"{where}: curves must be a mapping from a model name to (x, train, "
                        f"valid), got {type(curves).__name__}")
    if not curves:
        raise ValueError(f"{where}: curves is empty: nothing to plot")
    if not isinstance(note, str):
        raise TypeError(f"{where}: note must be a str, got {type(note).__name__}")
    data = {}
    for name, triple in curves.items():
        parts = _as_list(triple, where, f"curves[{name!r}]")
        if len(parts) != 3:
            raise ValueError(f"{where}: curves[{name!r}] must be (x, train, valid), got "
                             f"{len(parts)} items")
        x = _finite(_series(parts[0], where, f"curves[{name!r}] x"), where,
                    f"curves[{name!r}] x")
        train = _series(parts[1], where, f"curves[{name!r}] train")
        valid = _series(parts[2], where, f"curves[{name!r}] valid")
        if not x.shape == train.shape == valid.shape:
            raise ValueError(f"{where}: curves[{name!r}] has {x.size} x values, "
                             f"{train.size} train and {valid.size} valid values; give one "
                             f"of each per point")
        data[name] = (x, train, valid)
    if path is not None:
        _check_path(path, where)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.8))
    draw = ax.semilogy if logy else ax.plot
    for i, (name, (x, train, valid)) in enumerate(data.items()):
        color = _COLORS[i % len(_COLORS)]
        draw(x, train, color=color, ls="-", lw=1.6, label=f"{name}, train")
        draw(x, valid, color=color, ls="--", lw=1.6, marker=_MARKERS[i % len(_MARKERS)],
             markersize=4, label=f"{name}, validation")
    if logy:
        _plain_log_ticks(ax)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=2 if len(data) > 2 else 1)
    if note:
        ax.text(0.0, -0.16, note, transform=ax.transAxes, fontsize=8, va="top", wrap=True)
    return _finish(fig, path)


def _plain_log_ticks(ax: Any) -> None:
    """Label a log y axis with plain numbers (4, 6, 10, 20) instead of 4x10^0 and 2x10^1,
    when it spans less than three decades."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    low, high = ax.get_ylim()
    if not (low > 0 and high / low < 1e3):
        return
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def plot_attention(weights: Any, source_tokens: Sequence[str], output_tokens: Sequence[str],
                   marked: Sequence[int] = (), title: str = "Attention weights",
                   path: Any = None) -> Any:
    """Heatmap of one example's attention weights, outputs x source tokens; source positions
    listed in ``marked`` (e.g. noise tokens) get red tick labels.

    ``weights`` is 2-D (T_out, T_in), finite and non-negative; for a batch of shape
    (N, T_out, T_in) pass one example, ``weights[i]``. The colour scale runs from 0 to
    max(1, largest weight): softmax probabilities fill [0, 1], and weights slightly above 1
    (rounding, or dropout's 1 / (1 - p) scaling, as in torch's MultiheadAttention) are
    drawn, not refused. ``source_tokens`` has T_in
    labels, ``output_tokens`` T_out, and ``marked`` holds integer positions 0..T_in - 1.
    """
    where = "plot_attention"
    w = _numbers(weights, where, "weights")
    if w.ndim != 2:
        hint = ("; for a batch (N, T_out, T_in) pass one example, weights[i]"
                if w.ndim == 3 else "")
        raise ValueError(f"{where}: weights must be 2-D (T_out, T_in), got shape "
                         f"{w.shape}{hint}")
    if w.size == 0:
        raise ValueError(f"{where}: weights is empty (shape {w.shape}): nothing to plot")
    _finite(w, where, "weights")
    if w.min() < 0.0:
        index = tuple(int(i) for i in np.unravel_index(np.argmin(w), w.shape))
        raise ValueError(f"{where}: weights must be >= 0 (attention weights), got "
                         f"{float(w.min())!r} at index {index} (values from "
                         f"{float(w.min())!r} to {float(w.max())!r})")
    source = _as_list(source_tokens, where, "source_tokens")
    output = _as_list(output_tokens, where, "output_tokens")
    t_out, t_in = w.shape
    if len(source) != t_in or len(output) != t_out:
        raise ValueError(f"{where}: weights of shape {w.shape} need {t_in} source_tokens and "
                         f"{t_out} output_tokens (one label per column and per row), got "
                         f"{len(source)} source_tokens and {len(output)} output_tokens")
    marks = _as_list(marked, where, "marked")
    for i in marks:
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise ValueError(f"{where}: marked must hold integer positions of source tokens, "
                             f"got {i!r} ({type(i).__name__})")
        if not 0 <= i < t_in:
            raise ValueError(f"{where}: marked position {i} is out of range for {t_in} "
                             f"source tokens (valid: 0 to {t_in - 1})")
    if path is not None:
        _check_path(path, where)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(0.45 * max(t_in, 6) + 1.5, 0.45 * max(t_out, 4) + 1.2))
    im = ax.imshow(w, cmap="Greys", vmin=0.0, vmax=max(1.0, float(w.max())), aspect="auto")
    fig.colorbar(im, ax=ax, fraction=0.046)
    ax.set_xticks(range(t_in))
    ax.set_xticklabels(source)
    ax.set_yticks(range(t_out))
    ax.set_yticklabels(output)
    for i in marks:
        ax.get_xticklabels()[i].set_color("red")
    ax.set_xlabel("source")
    ax.set_ylabel("output")
    ax.set_title(title)
    return _finish(fig, path)
