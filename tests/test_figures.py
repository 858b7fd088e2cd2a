"""The figures teach what they claim (issue #17): read the matplotlib objects, not pixels.

* the two vanishing-gradient heatmaps share one log colour scale, and cells that are exactly
  0 (underflow) are named in a legend;
* norms_vs_distance labels its axis with the distance it plots (d = T - 1 - t, starting at
  0) and gives every curve its own colour and marker;
* the train/validation figure pairs a model's two curves by colour (solid train, dashed
  validation);
* every figure has a title, labelled axes and, where it shows several lines, a legend;
* the figures the demos write share these properties (the demos' own calls, at a tiny
  size, with the plotting functions spied on).
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from tinygrad_rnn import viz  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _close_figures() -> Any:
    yield
    plt.close("all")


def _decaying(n: int, rate: float) -> np.ndarray:
    return rate ** np.arange(n, dtype=np.float64)


def _legend_texts(ax: Any) -> list[str]:
    legend = ax.get_legend()
    assert legend is not None, f"no legend on {ax.get_title()!r}"
    return [t.get_text() for t in legend.get_texts()]


def _assert_labelled(fig: Any) -> Any:
    """The main axes (the first) has a title and both axis labels; returns it."""
    ax = fig.axes[0]
    assert ax.get_title().strip(), "figure without a title"
    assert ax.get_xlabel().strip() and ax.get_ylabel().strip(), "unlabelled axis"
    return ax


# ------------------------------------------------------------------------------ heatmaps
def _elman_and_lstm() -> tuple[np.ndarray, np.ndarray]:
    """Elman: large early, then underflow to exact 0 far back; LSTM: a narrower range."""
    elman = np.outer(np.ones(6), _decaying(10, 1e-5)[::-1])  # 1e-45 .. 1 across t
    elman[3:, :4] = 0.0                                        # underflowed later on
    lstm = np.outer(np.ones(6), _decaying(10, 0.5)[::-1])
    return elman, lstm


def test_shared_log_limits_span_every_array() -> None:
    elman, lstm = _elman_and_lstm()
    low, high = viz.shared_log_limits(elman, lstm)
    positive = np.concatenate([elman[elman > 0], lstm[lstm > 0]])
    assert (low, high) == (positive.min(), positive.max())
    with pytest.raises(ValueError, match="shared_log_limits: no positive finite entry"):
        viz.shared_log_limits(np.zeros(3), np.full(2, np.nan))
    with pytest.raises(ValueError, match="at least one array"):
        viz.shared_log_limits()


def test_heatmaps_given_shared_limits_have_identical_colour_scales() -> None:
    elman, lstm = _elman_and_lstm()
    low, high = viz.shared_log_limits(elman, lstm)
    figs = [viz.plot_state_grad_heatmap(z, title=name, vmin=low, vmax=high)
            for name, z in (("Elman", elman), ("LSTM", lstm))]
    scales = []
    for fig in figs:
        image = fig.axes[0].get_images()[0]
        assert image.norm.__class__.__name__ == "LogNorm"
        scales.append((image.norm.vmin, image.norm.vmax))
        _assert_labelled(fig)
        assert fig.axes[1].get_ylabel().strip()  # the colour bar says what the colour is
    assert scales[0] == scales[1] == (low, high)


def test_heatmap_explains_white_zero_cells_and_grey_missing_cells() -> None:
    elman, _ = _elman_and_lstm()
    fig = viz.plot_state_grad_heatmap(elman)
    ax = fig.axes[0]
    texts = _legend_texts(ax)
    assert any("white" in t and "0" in t and "underflow" in t for t in texts), texts
    assert to_rgba(ax.get_facecolor()) == to_rgba(viz.ZERO_COLOR)
    # with NaN cells (padding) a second, grey entry appears
    padded = elman.copy()
    padded[0, -2:] = np.nan
    texts = _legend_texts(viz.plot_state_grad_heatmap(padded).axes[0])
    assert any("white" in t for t in texts) and any("NaN" in t for t in texts), texts
    # nothing to explain: no legend
    assert viz.plot_state_grad_heatmap(np.ones((2, 3)) + 1).axes[0].get_legend() is None


def test_heatmap_colour_bar_marks_values_outside_the_given_limits() -> None:
    z = np.array([[1e-6, 1e-3], [1e-2, 1.0]])
    fig = viz.plot_state_grad_heatmap(z, vmin=1e-4, vmax=0.1)
    assert fig.axes[0].get_images()[0].norm.vmin == 1e-4
    assert fig.axes[1].get_label() == "<colorbar>"
    colorbar = fig.axes[0].get_images()[0].colorbar
    assert colorbar.extend == "both"


@pytest.mark.parametrize("kwargs, message", [
    ({"vmin": 0.0}, "vmin must be > 0"),
    ({"vmax": -1.0}, "vmax must be > 0"),
    ({"vmin": 1.0, "vmax": 0.5}, "vmin must be below vmax"),
    ({"vmin": 10.0}, "give vmin below vmax"),
    ({"vmin": "small"}, "vmin must be a finite number"),
])
def test_heatmap_refuses_bad_limits(kwargs: dict, message: str) -> None:
    before = plt.get_fignums()
    with pytest.raises(ValueError, match=f"plot_state_grad_heatmap: .*{message}"):
        viz.plot_state_grad_heatmap(np.array([[0.1, 1.0]]), **kwargs)
    assert plt.get_fignums() == before  # checked before anything is drawn


# ------------------------------------------------------------------------ norms vs distance
def test_norms_vs_distance_axis_starts_at_distance_zero_and_says_so() -> None:
    curve = _decaying(5, 0.5)
    fig = viz.plot_norms_vs_distance({"m": curve})
    ax = _assert_labelled(fig)
    (line,) = ax.get_lines()
    assert list(line.get_xdata()) == [0, 1, 2, 3, 4]  # entry d = 0 is the last step
    label = ax.get_xlabel()
    assert "T - 1 - t" in label and "T - t " not in label, label
    assert "(steps)" in label


def test_norms_vs_distance_curves_differ_in_colour_and_marker() -> None:
    names = [f"model {i}" for i in range(8)]
    curves = {name: _decaying(40, 0.9) for name in names}  # identical: they overlap exactly
    bounds = {"model 1": _decaying(40, 0.95), "unknown": _decaying(40, 0.99)}
    ax = viz.plot_norms_vs_distance(curves, bounds).axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    models = [lines[name] for name in names]
    styles = {(to_rgba(line.get_color()), line.get_marker()) for line in models}
    assert len(styles) == len(names)
    assert len({line.get_marker() for line in models}) == len(names)
    # staggered markers: no two curves put their markers on the same points
    starts = {line.get_markevery()[0] for line in models}
    assert len(starts) == len(names)
    bound = lines["bound: model 1"]
    assert bound.get_linestyle() == ":" and bound.get_marker() in ("None", "", None)
    assert to_rgba(bound.get_color()) == to_rgba(lines["model 1"].get_color())
    assert to_rgba(lines["bound: unknown"].get_color()) == to_rgba("gray")
    assert set(_legend_texts(ax)) == set(lines)


# ------------------------------------------------------------------- train / validation
def test_train_valid_curves_pair_by_colour_solid_and_dashed() -> None:
    x = [50, 100, 150]
    curves = {"Elman": (x, [9.0, 7.0, 6.0], [8.0, 6.5, 5.9]),
              "GRU": (x, [8.0, 6.0, 5.0], [7.5, 5.5, 4.9]),
              "LSTM": (x, [7.0, 5.0, 4.0], [6.5, 4.5, 3.9])}
    fig = viz.plot_train_valid_curves(curves, ylabel="perplexity", logy=True,
                                      note="train: a running mean")
    ax = _assert_labelled(fig)
    lines = {line.get_label(): line for line in ax.get_lines()}
    colors = set()
    for name in curves:
        train, valid = lines[f"{name}, train"], lines[f"{name}, validation"]
        assert to_rgba(train.get_color()) == to_rgba(valid.get_color())
        assert train.get_linestyle() == "-" and valid.get_linestyle() == "--"
        colors.add(to_rgba(train.get_color()))
    assert len(colors) == len(curves)  # one colour per model
    assert set(_legend_texts(ax)) == set(lines)
    assert any("running mean" in t.get_text() for t in ax.texts)
    # a log axis spanning under a decade reads 4, 5, 6, not 4x10^0
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert labels and not any("times" in t or "^" in t for t in labels), labels


@pytest.mark.parametrize("curves, error, message", [
    ({}, ValueError, "curves is empty"),
    ([1, 2], TypeError, "must be a mapping"),
    ({"a": ([1, 2], [1.0, 2.0])}, ValueError, r"must be \(x, train, valid\), got 2 items"),
    ({"a": ([1, 2], [1.0, 2.0], [1.0])}, ValueError, "2 x values, 2 train and 1 valid"),
    ({"a": ([1, np.nan], [1.0, 2.0], [1.0, 2.0])}, ValueError, "must be finite"),
])
def test_train_valid_curves_refuse_bad_input(curves: Any, error: type, message: str) -> None:
    with pytest.raises(error, match=f"plot_train_valid_curves: .*{message}"):
        viz.plot_train_valid_curves(curves)


# --------------------------------------------------------- every figure: title, labels, legend
def test_every_plot_has_a_title_labelled_axes_and_a_legend_where_needed() -> None:
    radii = [0.5, 1.0, 1.5]
    figs = {
        "norms_vs_distance": viz.plot_norms_vs_distance({"a": _decaying(6, 0.5),
                                                         "b": _decaying(6, 0.8)}),
        "spectral_sweep": viz.plot_spectral_sweep(radii, {"rate": [0.4, 0.9, 1.0],
                                                          "rho": radii}),
        "learning_curves": viz.plot_learning_curves({"a": [1.0, 0.5], "b": [1.0, 0.8]},
                                                    hline=0.9, hline_label="baseline"),
        "train_valid": viz.plot_train_valid_curves({"a": ([1, 2], [2.0, 1.0], [2.5, 1.5])}),
    }
    for name, fig in figs.items():
        ax = _assert_labelled(fig)
        assert _legend_texts(ax), name
    sweep = figs["spectral_sweep"].axes[0]
    assert any("rho = 1" in t for t in _legend_texts(sweep))  # the dotted line is named
    assert figs["learning_curves"].axes[0].get_xlabel() == "update (optimizer steps)"


# ------------------------------------------------------------------ the demos' own figures
def _load_demo(name: str) -> ModuleType:
    path = ROOT / "tinygrad_rnn" / "demos" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_figures_demo_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _spy(monkeypatch: pytest.MonkeyPatch, demo: ModuleType, names: list[str]) -> dict:
    """Record the figure each of viz's ``names`` returns when the demo calls it."""
    made: dict[str, list] = {name: [] for name in names}
    for name in names:
        original = getattr(demo.viz, name)

        def wrapper(*args: Any, _original: Any = original, _name: str = name,
                    **kwargs: Any) -> Any:
            fig = _original(*args, **kwargs)
            made[_name].append((kwargs, fig))
            return fig

        monkeypatch.setattr(demo.viz, name, wrapper)
    return made


def test_vanishing_demo_heatmaps_share_limits_and_every_figure_is_labelled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    demo = _load_demo("vanishing_gradients")
    args = demo.parse_args(["--quick", "--out", str(tmp_path), "--no-progress"])
    args.T, args.hidden, args.steps, args.val_every, args.batch = 12, 8, 6, 3, 8
    made = _spy(monkeypatch, demo, ["plot_state_grad_heatmap", "plot_norms_vs_distance",
                                    "plot_spectral_sweep", "plot_learning_curves"])
    demo.run(args)
    heatmaps = made["plot_state_grad_heatmap"]
    assert len(heatmaps) == 2
    scales = [(fig.axes[0].get_images()[0].norm.vmin, fig.axes[0].get_images()[0].norm.vmax)
              for _, fig in heatmaps]
    assert scales[0] == scales[1]
    assert all("same colour scale" in fig.axes[0].get_title() for _, fig in heatmaps)
    for name, calls in made.items():
        for _, fig in calls:
            ax = _assert_labelled(fig)
            if name != "plot_state_grad_heatmap":
                assert _legend_texts(ax), name
    for name in ("heatmap_lstm.png", "heatmap_elman.png", "norms_vs_distance.png"):
        assert (tmp_path / name).stat().st_size > 1000


def test_char_lm_demo_figure_pairs_train_and_validation(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    demo = _load_demo("char_lm")
    args = demo.parse_args(["--quick", "--epochs", "1", "--max-chars", "3000", "--out",
                            str(tmp_path), "--no-progress"])
    args.hidden, args.ffnn_steps, args.val_every, args.bptt = 8, 2, 2, 8
    made = _spy(monkeypatch, demo, ["plot_train_valid_curves"])
    result = demo.run(args)
    (kwargs, fig), = made["plot_train_valid_curves"]
    ax = _assert_labelled(fig)
    lines = {line.get_label(): line for line in ax.get_lines()}
    for model in result["curves"]:
        train, valid = lines[f"{model}, train"], lines[f"{model}, validation"]
        assert to_rgba(train.get_color()) == to_rgba(valid.get_color())
        assert (train.get_linestyle(), valid.get_linestyle()) == ("-", "--")
    assert "why train can lie above validation" in kwargs["note"]
    assert all(isinstance(text, str) for text in result["samples"].values())
