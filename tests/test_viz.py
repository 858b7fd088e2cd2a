"""Plots (tinygrad_rnn/viz.py) and the docs figure script, on the Agg backend.

* every plot returns a matplotlib Figure and writes nothing without ``path``;
* with a path it writes a PNG or an SVG (by extension; parent folders are created; other
  extensions are refused before anything is written);
* saving is atomic: no temporary file is left, after a success or a failure, and a failed save
  leaves an existing figure untouched; a new file gets the usual permissions, not mkstemp's
  0600;
* details: the bound curves take the colour of their model, non-positive norms are left out
  of log plots, marked attention tokens are red;
* bad input (a batch of attention weights, token lists or marked positions that do not match
  the weights, wrong shapes, mismatched lengths, non-finite coordinates, another extension)
  is a clear error naming the function and the shapes, raised before any figure is drawn or
  file written; a failed save closes its figure;
* docs/figures/make_truncation_timeline.py writes its PNG and SVG, reproducibly; the committed
  PNG stays under 200 KB.
"""
from __future__ import annotations

import os

os.environ.setdefault("MPLBACKEND", "Agg")

import importlib.util  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable, Iterator  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import tinygrad_rnn as tr  # noqa: E402
from tinygrad_rnn import viz  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "docs" / "figures"


@pytest.fixture(autouse=True)
def _close_figures() -> Iterator[None]:
    yield
    plt.close("all")


def _norms(T: int = 20) -> np.ndarray:
    return 0.8 ** np.arange(T, dtype=np.float64)


PLOTS: dict[str, Callable[..., Any]] = {
    "norms_vs_distance": lambda path=None: viz.plot_norms_vs_distance(
        {"tanh": _norms(), "lstm": 0.99 ** np.arange(20.0)}, {"tanh": 0.9 ** np.arange(20.0)},
        path=path),
    "state_grad_heatmap": lambda path=None: viz.plot_state_grad_heatmap(
        np.outer(np.linspace(1, 2, 5), _norms()), path=path),
    "spectral_sweep": lambda path=None: viz.plot_spectral_sweep(
        [0.5, 1.0, 1.5], {"rate": [0.5, 0.9, 1.4], "horizon": [5, 40, 100]}, path=path),
    "learning_curves": lambda path=None: viz.plot_learning_curves(
        {"a": [1.0, 0.5, 0.2], "b": [1.0, 0.8, 0.7]}, hline=1 / 6, hline_label="baseline",
        x={"a": [0, 10, 20]}, logy=True, path=path),
    "attention": lambda path=None: viz.plot_attention(
        np.full((3, 4), 0.25), ["a", "b", "#", "c"], ["c", "b", "a"], marked=[2], path=path),
}


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*"))


@pytest.mark.parametrize("name", list(PLOTS))
def test_every_plot_returns_a_figure_and_writes_nothing_without_path(
        name: str, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    fig = PLOTS[name]()
    assert isinstance(fig, Figure)
    assert len(fig.axes) >= 1
    assert _listing(tmp_path) == []


@pytest.mark.parametrize("name", list(PLOTS))
def test_every_plot_writes_png_and_svg_when_given_a_path(name: str, tmp_path: Path) -> None:
    png = tmp_path / "deep" / "er" / f"{name}.png"
    svg = tmp_path / f"{name}.svg"
    assert isinstance(PLOTS[name](path=png), Figure)
    assert isinstance(PLOTS[name](path=str(svg)), Figure)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in svg.read_bytes()[:2000]
    assert _listing(tmp_path) == sorted(["deep", "er", png.name, svg.name])   # no temp files


def test_save_figure_refuses_other_extensions_before_writing(tmp_path: Path) -> None:
    fig = PLOTS["spectral_sweep"]()
    for bad in ("plot.pdf", "plot", "plot.png.txt"):
        with pytest.raises(ValueError, match=".png or .svg"):
            viz.save_figure(fig, tmp_path / "sub" / bad)
    assert _listing(tmp_path) == []
    assert viz.save_figure(fig, tmp_path / "UPPER.PNG") == str(tmp_path / "UPPER.PNG")


def test_failed_save_leaves_the_old_figure_and_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "figure.png"
    target.write_bytes(b"the previous figure")
    fig = PLOTS["learning_curves"]()

    def broken_savefig(fh: Any, **kwargs: Any) -> None:
        fh.write(b"half a PNG")
        raise RuntimeError("disk full")

    fig.savefig = broken_savefig
    with pytest.raises(RuntimeError, match="disk full"):
        viz.save_figure(fig, target)
    assert target.read_bytes() == b"the previous figure"
    assert _listing(tmp_path) == ["figure.png"]


def test_saved_figure_gets_the_umask_mode_not_0600(tmp_path: Path) -> None:
    """Regression: the temporary file of mkstemp is 0600, and the rename kept that mode."""
    old = os.umask(0o022)
    try:
        path = Path(viz.save_figure(PLOTS["spectral_sweep"](), tmp_path / "f.png"))
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644
    path.chmod(0o640)                                    # an existing file keeps its mode
    viz.save_figure(PLOTS["spectral_sweep"](), path)
    assert path.stat().st_mode & 0o777 == 0o640


def test_bounds_share_their_models_colour_and_nonpositive_norms_are_dropped() -> None:
    curve = np.array([1.0, 0.5, 0.0, 0.25, -1.0, 0.1])
    fig = viz.plot_norms_vs_distance({"m": curve, "other": _norms(6)}, {"m": _norms(6)})
    ax = fig.axes[0]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    np.testing.assert_array_equal(lines["m"].get_xdata(), [0, 1, 3, 5])
    assert to_rgba(lines["bound: m"].get_color()) == to_rgba(lines["m"].get_color())
    assert lines["bound: m"].get_linestyle() == ":"  # dotted: never read as a model
    assert ax.get_yscale() == "log"


def test_heatmap_of_all_zero_or_nan_padded_norms() -> None:
    assert isinstance(viz.plot_state_grad_heatmap(np.zeros((3, 4))), Figure)
    grid = np.outer([1.0, 2.0], _norms(5))
    grid[1, 3:] = np.nan
    fig = viz.plot_state_grad_heatmap(grid)
    assert fig.axes[0].get_images()[0].get_array().shape == (2, 5)


def test_attention_marks_tokens_in_red() -> None:
    fig = PLOTS["attention"]()
    labels = fig.axes[0].get_xticklabels()
    assert [t.get_text() for t in labels] == ["a", "b", "#", "c"]
    assert to_rgba(labels[2].get_color()) == to_rgba("red")
    assert to_rgba(labels[0].get_color()) != to_rgba("red")


# --------------------------------------------------------------------------------------------
# the docs figure script
# --------------------------------------------------------------------------------------------
def _load_script() -> Any:
    spec = importlib.util.spec_from_file_location(
        "make_truncation_timeline", FIGURES / "make_truncation_timeline.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_truncation_timeline_script_writes_png_and_svg_reproducibly(tmp_path: Path,
                                                                    monkeypatch: Any) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")         # restored after the test
    monkeypatch.setitem(matplotlib.rcParams, "svg.hashsalt", None)
    script = _load_script()
    paths = script.main(["--out", str(tmp_path)])
    assert sorted(Path(p).name for p in paths) == ["truncation_timeline.png",
                                                   "truncation_timeline.svg"]
    assert _listing(tmp_path) == ["truncation_timeline.png", "truncation_timeline.svg"]
    first = {p: Path(p).read_bytes() for p in paths}
    script.main(["--out", str(tmp_path)])
    assert {p: Path(p).read_bytes() for p in paths} == first
    assert len(first[paths[0]]) < 200_000


def test_committed_truncation_timeline_is_small() -> None:
    png = FIGURES / "truncation_timeline.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size < 200_000
    assert (FIGURES / "truncation_timeline.svg").is_file()


# --------------------------------------------------------------------------------------------
# bad input: a ValueError (TypeError for the wrong kind of value) that names the function
# and the shapes, raised before anything is drawn or written
# --------------------------------------------------------------------------------------------
def _attention(weights: Any, source: Any = "abcd", output: Any = "abc", **kw: Any) -> Any:
    return viz.plot_attention(weights, list(source), list(output), **kw)


BAD_INPUTS: list[tuple[str, Callable[[], Any], type, str]] = [
    # plot_attention: a batch drawn as an RGB(A) image, mislabelled axes, wrapped indices
    ("attention batch of 4", lambda: _attention(np.full((1, 3, 4), 0.25)), ValueError,
     r"plot_attention: weights must be 2-D \(T_out, T_in\), got shape \(1, 3, 4\); for a "
     r"batch .* weights\[i\]"),
    ("attention batch of 3", lambda: _attention(np.full((1, 3, 3), 0.3), "abc"), ValueError,
     r"plot_attention: .*shape \(1, 3, 3\).*weights\[i\]"),
    ("attention 1-D", lambda: _attention(np.full(4, 0.25)), ValueError,
     r"plot_attention: weights must be 2-D .*shape \(4,\)"),
    ("attention token counts", lambda: _attention(np.eye(3), "abcd", "ab"), ValueError,
     r"plot_attention: weights of shape \(3, 3\) need 3 source_tokens and 3 output_tokens "
     r".*got 4 source_tokens and 2 output_tokens"),
    ("attention output count", lambda: _attention(np.full((3, 4), 0.25), "abcd", "ab"),
     ValueError, r"plot_attention: .*\(3, 4\).*got 4 source_tokens and 2 output_tokens"),
    ("attention marked -1", lambda: _attention(np.full((3, 4), 0.25), marked=[-1]),
     ValueError, r"plot_attention: marked position -1 is out of range for 4 source tokens "
                 r"\(valid: 0 to 3\)"),
    ("attention marked 5", lambda: _attention(np.full((3, 4), 0.25), marked=[1, 5]),
     ValueError, r"plot_attention: marked position 5 is out of range for 4"),
    ("attention marked float", lambda: _attention(np.full((3, 4), 0.25), marked=[1.0]),
     ValueError, r"plot_attention: marked must hold integer positions .*1\.0 \(float\)"),
    ("attention marked bool", lambda: _attention(np.full((3, 4), 0.25), marked=[True]),
     ValueError, r"plot_attention: marked must hold integer positions .*True \(bool\)"),
    ("attention negative", lambda: _attention(np.array([[0.5, 0.5, 0.0, -1e-7]] * 3)),
     ValueError, r"plot_attention: weights must be >= 0 \(attention weights\), got -1e-07 "
                 r"at index \(0, 3\) \(values from -1e-07 to 0.5\)"),
    ("attention barely negative", lambda: _attention(np.full((3, 4), -1e-300)), ValueError,
     r"plot_attention: weights must be >= 0 .*got -1e-300 .*from -1e-300 to -1e-300"),
    ("attention NaN", lambda: _attention(np.array([[0.5, np.nan, 0.5, 0.0]] * 3)),
     ValueError, r"plot_attention: weights must be finite, got nan at index \(0, 1\)"),
    ("attention empty", lambda: _attention(np.zeros((0, 4)), "abcd", ""), ValueError,
     r"plot_attention: weights is empty \(shape \(0, 4\)\)"),
    ("attention text", lambda: _attention([["a", "b"]], "ab", "a"), ValueError,
     r"plot_attention: weights must be an array of numbers"),
    ("attention tokens not a sequence",
     lambda: viz.plot_attention(np.full((1, 1), 1.0), 3, ["a"]), TypeError,
     r"plot_attention: source_tokens must be a sequence, got int"),
    # plot_state_grad_heatmap
    ("heatmap 1-D", lambda: viz.plot_state_grad_heatmap(np.ones(6)), ValueError,
     r"plot_state_grad_heatmap: norms must be 2-D \(training steps, time steps\), got shape "
     r"\(6,\)"),
    ("heatmap 3-D", lambda: viz.plot_state_grad_heatmap(np.ones((2, 3, 4))), ValueError,
     r"plot_state_grad_heatmap: .*\(2, 3, 4\)"),
    ("heatmap empty", lambda: viz.plot_state_grad_heatmap(np.ones((0, 4))), ValueError,
     r"plot_state_grad_heatmap: norms is empty \(shape \(0, 4\)\)"),
    ("heatmap ragged", lambda: viz.plot_state_grad_heatmap([[1.0, 2.0], [1.0]]), ValueError,
     r"plot_state_grad_heatmap: norms must be an array of numbers"),
    # plot_norms_vs_distance
    ("norms 2-D", lambda: viz.plot_norms_vs_distance({"a": np.ones((2, 3))}), ValueError,
     r"plot_norms_vs_distance: curves\['a'\] must be 1-D .*got shape \(2, 3\)"),
    ("norms bound 2-D",
     lambda: viz.plot_norms_vs_distance({"a": _norms(3)}, {"a": np.ones((3, 1))}),
     ValueError, r"plot_norms_vs_distance: bounds\['a'\] must be 1-D .*\(3, 1\)"),
    ("norms not a mapping", lambda: viz.plot_norms_vs_distance([_norms(3)]), TypeError,
     r"plot_norms_vs_distance: curves must be a mapping .*got list"),
    ("norms empty mapping", lambda: viz.plot_norms_vs_distance({}), ValueError,
     r"plot_norms_vs_distance: curves is empty"),
    # plot_spectral_sweep
    ("sweep lengths", lambda: viz.plot_spectral_sweep([0.5, 1.0, 1.5], {"rate": [0.4, 0.9]}),
     ValueError, r"plot_spectral_sweep: values\['rate'\] has 2 entries but radii has 3"),
    ("sweep 2-D values",
     lambda: viz.plot_spectral_sweep([0.5, 1.0], {"rate": [[0.4, 0.9]]}), ValueError,
     r"plot_spectral_sweep: values\['rate'\] must be 1-D .*\(1, 2\)"),
    ("sweep NaN radius", lambda: viz.plot_spectral_sweep([0.5, np.nan], {"r": [1.0, 2.0]}),
     ValueError, r"plot_spectral_sweep: radii must be finite, got nan at index 1"),
    ("sweep no radii", lambda: viz.plot_spectral_sweep([], {"r": []}), ValueError,
     r"plot_spectral_sweep: radii is empty"),
    # plot_learning_curves
    ("curves x length", lambda: viz.plot_learning_curves({"a": [3, 2, 1]}, x={"a": [0, 10]}),
     ValueError, r"plot_learning_curves: x\['a'\] has 2 entries but curves\['a'\] has 3"),
    ("curves x label", lambda: viz.plot_learning_curves({"a": [3, 2, 1]}, x={"b": [0, 1, 2]}),
     ValueError, r"plot_learning_curves: x has labels that are not in curves: \['b'\]"),
    ("curves x inf",
     lambda: viz.plot_learning_curves({"a": [3, 2, 1]}, x={"a": [0, 1, np.inf]}),
     ValueError, r"plot_learning_curves: x\['a'\] must be finite, got inf at index 2"),
    ("curves 2-D", lambda: viz.plot_learning_curves({"a": [[3, 2, 1]]}), ValueError,
     r"plot_learning_curves: curves\['a'\] must be 1-D .*\(1, 3\)"),
    ("curves hline NaN", lambda: viz.plot_learning_curves({"a": [3, 2]}, hline=float("nan")),
     ValueError, r"plot_learning_curves: hline must be a finite number, got nan"),
    ("curves hline text", lambda: viz.plot_learning_curves({"a": [3, 2]}, hline="0.5"),
     ValueError, r"plot_learning_curves: hline must be a finite number, got '0.5'"),
    ("curves hline bool", lambda: viz.plot_learning_curves({"a": [3, 2]}, hline=True),
     ValueError, r"plot_learning_curves: hline must be a finite number, got True"),
    ("curves hline 0-d bool",
     lambda: viz.plot_learning_curves({"a": [3, 2]}, hline=np.array(True)),
     ValueError, r"plot_learning_curves: hline must be a finite number, got array\(True\)"),
    ("curves hline 0-d text",
     lambda: viz.plot_learning_curves({"a": [3, 2]}, hline=np.array("0.5")),
     ValueError, r"plot_learning_curves: hline must be a finite number, got array\('0.5'"),
    ("curves hline 0-d inf",
     lambda: viz.plot_learning_curves({"a": [3, 2]}, hline=np.array(np.inf)),
     ValueError, r"plot_learning_curves: hline must be a finite number, got .*inf"),
    ("curves hline 0-d Tensor NaN",
     lambda: viz.plot_learning_curves({"a": [3, 2]}, hline=tr.tensor(float("nan"))),
     ValueError, r"plot_learning_curves: hline must be a finite number, got .*nan"),
    ("curves hline device Tensor",
     lambda: viz.plot_learning_curves({"a": [3, 2]}, hline=tr.tensor(0.5, device="standin")),
     ValueError, r"plot_learning_curves: hline is a Tensor on standin; .*hline=t\.item\(\)"),
    ("curves hline 1-D", lambda: viz.plot_learning_curves({"a": [3, 2]}, hline=np.ones(1)),
     ValueError, r"plot_learning_curves: hline must be a finite number, got array\(\[1\.\]\)"),
    # a path with another extension, refused before drawing
    ("attention pdf", lambda: PLOTS["attention"](path="fig.pdf"), ValueError,
     r"plot_attention: use a .png or .svg path, got 'fig.pdf'"),
    ("heatmap pdf", lambda: PLOTS["state_grad_heatmap"](path="fig.jpg"), ValueError,
     r"plot_state_grad_heatmap: use a .png or .svg path"),
    ("curves no extension", lambda: PLOTS["learning_curves"](path="fig"), ValueError,
     r"plot_learning_curves: use a .png or .svg path"),
    ("sweep pdf", lambda: PLOTS["spectral_sweep"](path="fig.pdf"), ValueError,
     r"plot_spectral_sweep: use a .png or .svg path"),
    ("norms pdf", lambda: PLOTS["norms_vs_distance"](path="fig.pdf"), ValueError,
     r"plot_norms_vs_distance: use a .png or .svg path"),
    ("save not a figure", lambda: viz.save_figure("figure", "f.png"), TypeError,
     r"save_figure: fig must be a matplotlib Figure, got str"),
]


@pytest.mark.parametrize("case", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_is_a_clear_error_before_anything_is_drawn_or_written(
        case: tuple, tmp_path: Path, monkeypatch: Any) -> None:
    _, call, error, message = case
    monkeypatch.chdir(tmp_path)
    opened = set(plt.get_fignums())
    with pytest.raises(error, match=message):
        call()
    assert set(plt.get_fignums()) == opened      # no figure left open
    assert _listing(tmp_path) == []


@pytest.mark.parametrize("dpi", [0, -72, float("nan"), True, "120"])
def test_save_figure_refuses_a_bad_dpi_before_writing(dpi: Any, tmp_path: Path) -> None:
    fig = PLOTS["spectral_sweep"]()
    with pytest.raises(ValueError, match=r"save_figure: dpi must be a positive number"):
        viz.save_figure(fig, tmp_path / "f.png", dpi=dpi)
    assert _listing(tmp_path) == []


def test_failed_save_closes_the_figure(tmp_path: Path) -> None:
    (tmp_path / "a_file").write_text("not a folder")
    opened = set(plt.get_fignums())
    with pytest.raises(OSError):
        PLOTS["learning_curves"](path=tmp_path / "a_file" / "fig.png")
    assert set(plt.get_fignums()) == opened


@pytest.mark.parametrize("weights", [
    np.array([[1.0000001, 0.0]], np.float32),   # float32 rounding above 1
    np.array([[0.0, 1.25], [2.5, 0.0]]),       # dropout's 1 / (1 - p) scaling
], ids=["rounding", "dropout"])
def test_attention_weights_above_one_are_drawn_on_a_wider_scale(weights: np.ndarray) -> None:
    """Weights slightly above 1 (rounding) or scaled by dropout were refused with a message
    that printed 1.0000001 as 1; now the colour scale runs from 0 to max(1, max weight)."""
    fig = viz.plot_attention(weights, ["a", "b"], ["x"] * weights.shape[0])
    image = fig.axes[0].get_images()[0]
    assert image.get_clim() == (0.0, float(weights.astype(np.float64).max()))
    np.testing.assert_array_equal(image.get_array(), weights.astype(np.float64))
    plt.close(fig)
    fig = viz.plot_attention(np.array([[0.25, 0.75]]), ["a", "b"], ["x"])
    assert fig.axes[0].get_images()[0].get_clim() == (0.0, 1.0)   # probabilities: 0..1
    plt.close(fig)


@pytest.mark.parametrize("hline", [
    np.array(0.69), np.array(0.69, np.float32), np.array(2), np.float32(0.69), np.int64(2),
    tr.tensor(0.69), tr.tensor(0.69).numpy(), tr.Tensor(np.array(0.69, np.float64)),
], ids=["0-d f64", "0-d f32", "0-d int", "np.float32", "np.int64", "0-d Tensor",
        "Tensor.numpy()", "0-d f64 Tensor"])
def test_hline_accepts_numpy_scalars_0d_arrays_and_0d_cpu_tensors(hline: Any) -> None:
    """hline=baseline.numpy() of a 0-d Tensor (a 0-d array) used to be refused as "must be a
    finite number, got array(0.69)"."""
    fig = viz.plot_learning_curves({"lstm": [1.2, 0.9]}, hline=hline, hline_label="base")
    lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
    want = float(np.asarray(hline.numpy() if isinstance(hline, tr.Tensor) else hline))
    assert list(lines["base"].get_ydata()) == [want, want]
    plt.close(fig)


def test_edge_inputs_that_are_valid_still_plot() -> None:
    # integer positions of any NumPy integer type, tokens as any sequence
    fig = viz.plot_attention(np.eye(2), ("x", "y"), "ab", marked=np.array([1], np.int32))
    assert to_rgba(fig.axes[0].get_xticklabels()[1].get_color()) == to_rgba("red")
    # a single output step, a single source token
    assert isinstance(viz.plot_attention([[1.0]], ["a"], ["b"]), Figure)
    # an empty learning curve (a run too short to be validated) draws no points
    fig = viz.plot_learning_curves({"train": [2.0, 1.0], "valid": []}, x={"valid": []})
    lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
    assert len(lines["valid"].get_xdata()) == 0 and len(lines["train"].get_xdata()) == 2
    # a bound without a model of its name is drawn in grey
    fig = viz.plot_norms_vs_distance({"m": _norms(4)}, {"other": _norms(4)})
    lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
    assert to_rgba(lines["bound: other"].get_color()) == to_rgba("gray")
