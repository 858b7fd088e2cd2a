"""Plots (tinygrad_rnn/viz.py) and the docs figure script, on the Agg backend.

* every plot returns a matplotlib Figure and writes nothing without ``path``;
* with a path it writes a PNG or an SVG (by extension; parent folders are created; other
  extensions are refused before anything is written);
* saving is atomic: no temporary file is left, after a success or a failure, and a failed save
  leaves an existing figure untouched; a new file gets the usual permissions, not mkstemp's
  0600;
* details: the bound curves take the colour of their model, non-positive norms are left out
  of log plots, marked attention tokens are red;
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
    assert lines["bound: m"].get_linestyle() == "--"
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
