"""tr.viz.graph: the autograd graph drawn, grouped by time step, shaded by gradient size.

Structure, not pixels: node, edge and cluster counts of known graphs, the op count of one
time step, shading that darkens as the gradient norm grows, leaves named after parameters,
DOT text that Graphviz's ``dot`` accepts (those tests skip when ``dot`` is not installed),
gradients unchanged bit for bit by recording and drawing, no graph kept alive by a drawing,
the error when ``dot`` is missing, and clear errors for bad arguments.
"""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import time
import weakref
from typing import Any

import numpy as np
import pytest

import tinygrad_rnn as tr
from tinygrad_rnn import cli, engine
from tinygrad_rnn import graph as graph_module
from tinygrad_rnn.graph import GraphvizNotFoundError, brightness
from tinygrad_rnn.monitor import state_grad_norms
from tinygrad_rnn.nn.cells import rnn_step

needs_dot = pytest.mark.skipif(graph_module.find_dot() is None,
                               reason="Graphviz's dot is not installed")


def small_loss() -> tuple[tr.Tensor, dict]:
    """loss = sum(tanh(x @ W + b)): 4 ops (MatMul, Add, Tanh, Sum), 3 leaves."""
    rng = np.random.default_rng(0)
    x = tr.Tensor(rng.standard_normal((2, 3)))
    w = tr.Tensor(rng.standard_normal((3, 4)), requires_grad=True)
    b = tr.Tensor(rng.standard_normal(4), requires_grad=True)
    loss = (x @ w + b).tanh().sum()
    return loss, {"W": w, "b": b}


def recurrent(mode: str, T: int, engine_name: str = "autograd", track: bool = False,
              **kwargs: Any) -> tuple[Any, tr.Tensor]:
    """A small float64 recurrent layer run over T steps, and the loss at the last step."""
    tr.manual_seed(0)
    layer = getattr(tr.nn, mode)(3, 4, engine=engine_name, dtype=np.float64, **kwargs)
    layer.track_state_grads = track
    x = tr.Tensor(np.random.default_rng(1).standard_normal((T, 2, 3)))
    out, _ = layer(x)
    return layer, (out[-1] ** 2).sum()


def ops_of(g: tr.viz.Graph) -> list:
    return [n for n in g.nodes.values() if n.kind == "op"]


def first_line(node: Any) -> str:
    return node.label.split("\n")[0]


# ----------------------------------------------------------------------------- structure
def test_small_graph_nodes_edges_and_names() -> None:
    loss, params = small_loss()
    g = tr.viz.graph(loss, params=params)
    assert sorted(first_line(n) for n in g.nodes.values()) == \
        ["Add", "MatMul", "Sum", "Tanh", "W", "b", "input"]
    assert len(g.edges) == 6  # x, W -> MatMul -> Add <- b; Add -> Tanh -> Sum
    by_label = {first_line(n): n.id for n in g.nodes.values()}
    assert (by_label["W"], by_label["MatMul"]) in g.edges
    assert (by_label["b"], by_label["Add"]) in g.edges
    assert (by_label["Tanh"], by_label["Sum"]) in g.edges
    assert g.nodes["n0"].name == "Sum"  # the root first, marked
    assert g.nodes["n0"].attrs["peripheries"] == "2"
    assert "(2, 4) float64" in g.nodes[by_label["Add"]].label
    assert g.clusters == {} and g.elided == 0
    assert g.source.startswith("digraph autograd {")


def test_op_count_equals_the_engines_node_count() -> None:
    for mode in ("RNN", "GRU", "LSTM"):
        _, loss = recurrent(mode, 10)
        g = tr.viz.graph(loss, group="none", collapse=False, max_nodes=None)
        assert len(ops_of(g)) == engine.count_graph_nodes(loss), mode


def test_an_autograd_lstm_at_t10_has_146_nodes() -> None:
    """14 ops per step (the cell's 14: its step's input slice comes from one Unbind of the
    projection, no per-step Reshape) and 6 around them."""
    layer = tr.nn.LSTM(8, 16, engine="autograd")
    out, _ = layer(tr.randn(10, 4, 8))
    loss = out.sum()
    assert engine.count_graph_nodes(loss) == 146
    assert len(ops_of(tr.viz.graph(loss, collapse=False))) == 146


def test_one_cluster_per_time_step_with_one_steps_ops() -> None:
    T = 5
    _, loss = recurrent("RNN", T)
    g = tr.viz.graph(loss)
    steps = [c for c in g.clusters.values() if c.title.startswith("t = ")]
    assert sorted(c.title for c in steps) == [f"t = {t}" for t in range(T)]
    layer = [c for c in g.clusters.values() if c.title == "RNN layer 0"]
    assert len(layer) == 1 and all(c.parent == layer[0].id for c in steps)
    # one step alone: the ops rnn_step records (its input slice comes from the block's
    # one Unbind, outside the steps)
    xw = tr.Tensor(np.zeros((2, 4)), requires_grad=True)
    h = tr.Tensor(np.zeros((2, 4)), requires_grad=True)
    w = tr.Tensor(np.zeros((4, 4)), requires_grad=True)
    b = tr.Tensor(np.zeros(4), requires_grad=True)
    per_step = engine.count_graph_nodes(rnn_step(xw, h, w, b))
    assert all(c.ops == per_step for c in steps)
    assert all(len(c.members) == per_step for c in steps)


def test_clusters_nest_per_layer_and_direction() -> None:
    _, loss = recurrent("GRU", 3, num_layers=2, bidirectional=True)
    g = tr.viz.graph(loss)
    titles = sorted(c.title for c in g.clusters.values() if c.parent is None)
    assert titles == ["GRU layer 0", "GRU layer 0, reverse", "GRU layer 1",
                      "GRU layer 1, reverse"]
    assert sum(c.title.startswith("t = ") for c in g.clusters.values()) == 4 * 3


def test_cell_calls_are_one_cluster_each() -> None:
    cell = tr.nn.LSTMCell(3, 4)
    h = c = tr.zeros(2, 4)
    for _ in range(3):
        h, c = cell(tr.randn(2, 3), (h, c))
    g = tr.viz.graph(h.sum())
    assert [cl.title for cl in g.clusters.values()] == ["LSTMCell"] * 3


def test_user_scopes_group_any_graph() -> None:
    loss, _ = small_loss()
    x = tr.Tensor([1.0, 2.0], requires_grad=True)
    with engine.record_scope("encoder"):
        y = (x * 2).tanh()
    with engine.record_scope("decoder"):
        z = (y * y).sum()
    g = tr.viz.graph(z)
    assert sorted((c.title, c.ops) for c in g.clusters.values()) == \
        [("decoder", 2), ("encoder", 2)]
    assert tr.viz.graph(z, group="none").clusters == {}


def test_the_fused_engine_is_one_node_per_layer_and_direction() -> None:
    layer, loss = recurrent("LSTM", 6, "fused", track=True, num_layers=2,
                            bidirectional=True)
    with tr.viz.record_backward() as rec:
        loss.backward()
    g = tr.viz.graph(rec, params=layer)
    fused = [n for n in g.nodes.values() if n.name == "FusedRecurrent"]
    assert len(fused) == 4
    assert sorted(n.label.split("\n")[1] for n in fused) == [
        "LSTM, layer 0, forward", "LSTM, layer 0, reverse", "LSTM, layer 1, forward",
        "LSTM, layer 1, reverse"]
    # each with its per-step ||dL/dh_t|| strip, equal to the monitor's norms
    for n in fused:
        assert len(n.attrs["strip"]) == 6
    key_norms = {k: state_grad_norms(v["h"]) for k, v in layer.state_grads.items()}
    strips = sorted(tuple(n.attrs["strip"]) for n in fused)
    assert strips == sorted(tuple(v) for v in key_norms.values())
    assert g.source.count("<td bgcolor=") >= 4 * 6


def test_collapsed_step_norm_is_the_state_gradient_norm() -> None:
    """For the Elman RNN a step hands on h_t only: its norm is ||dL/dh_t||, the number the
    per-step norm plot shows (track_state_grads)."""
    T = 12
    layer, loss = recurrent("RNN", T, track=True)
    with tr.viz.record_backward() as rec:
        loss.backward()
    g = tr.viz.graph(rec, collapse=True)
    steps = {n.name: n for n in g.nodes.values() if n.kind == "step"}
    assert len(steps) == T
    expected = state_grad_norms(layer.state_grads[(0, 0)]["h"])
    got = np.array([steps[f"t = {t}"].norm for t in range(T)])
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_large_graph_collapses_by_default() -> None:
    layer = tr.nn.LSTM(8, 16, engine="autograd")
    out, _ = layer(tr.randn(100, 4, 8))
    loss = (out[-1] ** 2).sum()
    total = engine.count_graph_nodes(loss)
    assert total > graph_module.AUTO_COLLAPSE_OPS
    start = time.perf_counter()
    with tr.viz.record_backward() as rec:
        loss.backward()
    g = tr.viz.graph(rec, params=layer)
    elapsed = time.perf_counter() - start
    steps = [n for n in g.nodes.values() if n.kind == "step"]
    assert len(steps) == 100
    assert sum(n.ops for n in steps) + len(ops_of(g)) == total
    # the weights used at every step: one labelled edge each, not 100
    assert sum(label == "to 100 steps" for label in g.edge_labels.values()) >= 2
    assert elapsed < 30


def test_hide_small_ops_draws_through_them() -> None:
    _, loss = recurrent("LSTM", 3)
    full = tr.viz.graph(loss, collapse=False)
    small = tr.viz.graph(loss, collapse=False, hide="small")
    names = [n.name for n in ops_of(small)]
    assert not set(names) & set(graph_module.SMALL_OPS)
    hidden = sum(n.name in graph_module.SMALL_OPS for n in ops_of(full))
    assert hidden > 0 and len(ops_of(small)) == len(ops_of(full)) - hidden
    only = tr.viz.graph(loss, collapse=False, hide=["Sigmoid"])
    assert "Sigmoid" not in {n.name for n in ops_of(only)}


def test_show_saved_draws_each_saved_array() -> None:
    loss, _ = small_loss()
    g = tr.viz.graph(loss, show_saved=True)
    saved = [n for n in g.nodes.values() if n.kind == "saved"]
    tanh = next(n for n in g.nodes.values() if n.name == "Tanh")
    assert any((s.id, tanh.id) in g.edges for s in saved)  # tanh saves its output
    assert all(n.label.startswith("saved (") for n in saved)
    assert not any(n.kind == "saved" for n in tr.viz.graph(loss).nodes.values())


def test_cap_keeps_the_nodes_nearest_the_root_and_says_what_was_left_out() -> None:
    _, loss = recurrent("RNN", 20)
    g = tr.viz.graph(loss, collapse=False, max_nodes=10)
    drawn = [n for n in g.nodes.values() if n.kind in ("op", "leaf", "step")]
    assert len(drawn) == 10
    note = g.nodes["elided"]
    total = engine.count_graph_nodes(loss) + 6  # 6 leaves: x, h0 and 4 parameters
    assert g.elided == total - 10
    assert f"{g.elided} more nodes not drawn (max_nodes=10)" in note.label
    assert any(src == "elided" for src, _ in g.edges)


def test_ten_thousand_steps_at_the_default_recursion_limit() -> None:
    tr.manual_seed(0)
    layer = tr.nn.RNN(2, 3, engine="autograd")
    out, _ = layer(tr.randn(10_000, 1, 2))
    loss = out[-1].sum()
    limit = sys.getrecursionlimit()
    start = time.perf_counter()
    g = tr.viz.graph(loss, max_nodes=500)
    elapsed = time.perf_counter() - start
    assert sys.getrecursionlimit() == limit
    assert sum(n.kind in ("op", "leaf", "step") for n in g.nodes.values()) == 500
    assert "elided" in g.nodes and g.elided > 9000
    assert elapsed < 60


# ------------------------------------------------------------------------------ gradients
def test_norms_after_retain_graph_and_recorded_norms_agree() -> None:
    loss, params = small_loss()
    loss.backward(retain_graph=True)
    g = tr.viz.graph(loss, params=params)
    named = {n.name: n for n in g.nodes.values()}
    assert named["W"].norm == pytest.approx(np.linalg.norm(params["W"].grad.numpy()))
    assert "||grad||" in named["W"].label
    assert named["Tanh"].norm is None  # intermediate gradients are not kept by default
    for t in params.values():
        t.grad = None
    with tr.viz.record_backward() as rec:
        loss.backward()
    g2 = tr.viz.graph(rec, params=params)
    named2 = {n.name: n for n in g2.nodes.values()}
    assert named2["W"].norm == pytest.approx(named["W"].norm, rel=1e-12)
    assert named2["Sum"].norm == 1.0  # dL/dL
    assert named2["Tanh"].norm == pytest.approx(np.sqrt(8.0))  # dL/dtanh = ones (2, 4)


def test_shading_darkens_monotonically_with_the_norm() -> None:
    _, loss = recurrent("LSTM", 12)
    with tr.viz.record_backward() as rec:
        loss.backward()
    g = tr.viz.graph(rec, collapse=False)
    shaded = sorted((n.norm, brightness(n.fill)) for n in g.nodes.values()
                    if n.kind in ("op", "leaf") and n.norm)
    assert len(shaded) > 50
    lights = [b for _, b in shaded]
    assert all(a >= b for a, b in zip(lights, lights[1:]))
    assert lights[0] > lights[-1]
    lo, hi = g.scale
    assert lo <= shaded[0][0] and hi >= shaded[-1][0]
    # the step clusters fade with the vanishing gradient (loss at the last step only)
    steps = {c.title: c for c in g.clusters.values() if c.title.startswith("t = ")}
    pairs = sorted((c.norm, brightness(c.fill)) for c in steps.values())
    tints = [b for _, b in pairs]
    assert all(a >= b for a, b in zip(tints, tints[1:]))
    assert "legend" in g.source
    plain = tr.viz.graph(rec, color="none", collapse=False)
    assert all(n.fill == "#ffffff" for n in plain.nodes.values() if n.kind == "op")
    assert "legend" not in plain.source


def _grads(model: Any) -> dict:
    return {k: p.grad.numpy().copy() for k, p in model.named_parameters()}


@pytest.mark.parametrize("engine_name", ["autograd", "fused"])
def test_recording_and_drawing_change_no_gradient_bit_for_bit(engine_name: str) -> None:
    layer, loss = recurrent("LSTM", 7, engine_name, track=True)
    loss.backward()
    plain = _grads(layer)
    layer2, loss2 = recurrent("LSTM", 7, engine_name, track=True)
    tr.viz.graph(loss2, show_saved=True)  # drawing before backward
    with tr.viz.record_backward() as rec:
        loss2.backward(retain_graph=True)
    tr.viz.graph(rec, params=layer2, show_saved=True)
    tr.viz.graph(loss2, params=layer2)  # and the retained graph after backward
    recorded = _grads(layer2)
    for name in plain:
        assert plain[name].tobytes() == recorded[name].tobytes(), name


def test_a_drawing_keeps_no_graph_alive() -> None:
    gc.disable()
    try:
        layer, loss = recurrent("GRU", 5, track=True)
        node = weakref.ref(loss.grad_fn)
        with tr.viz.record_backward() as rec:
            loss.backward(retain_graph=True)
        hidden = weakref.ref(loss.grad_fn.inputs[0])
        drawings = [tr.viz.graph(rec, params=layer), tr.viz.graph(loss, params=layer)]
        del loss
        assert node() is None and hidden() is None
        assert len(drawings) == 2
    finally:
        gc.enable()


def test_drawing_after_a_plain_backward_says_how() -> None:
    loss, _ = small_loss()
    loss.backward()
    with pytest.raises(RuntimeError, match=r"graph: .*freed by backward.*"
                                           r"retain_graph=True.*record_backward"):
        tr.viz.graph(loss)


def test_each_backward_pass_is_recorded() -> None:
    loss, params = small_loss()
    with tr.viz.record_backward() as rec:
        loss.backward(retain_graph=True)
        (params["b"] * 3).sum().backward()
    assert len(rec.passes) == 2
    assert len(ops_of(tr.viz.graph(rec))) == 2  # Mul, Sum: the last pass
    assert len(ops_of(tr.viz.graph(rec.passes[0]))) == 4
    assert "2 passes" in repr(rec)


def test_the_observer_is_restored_and_checked() -> None:
    with tr.viz.record_backward():
        with tr.viz.record_backward() as inner:
            pass
        assert engine._OBSERVER.current is not inner
    assert engine._OBSERVER.current is None
    with pytest.raises(TypeError, match="observe_backward: observer must have a begin"):
        engine.observe_backward(object())


def test_other_graphs_attention_and_in_place_writes() -> None:
    attn = tr.nn.MultiheadAttention(8, 2)
    q = tr.randn(3, 2, 8)
    out, _ = attn(q, q, q)
    loss = out.sum()
    g = tr.viz.graph(loss, params=attn)
    assert len(ops_of(g)) == engine.count_graph_nodes(loss)
    assert any(n.name == "in_proj_weight" for n in g.nodes.values())
    x = tr.Tensor([1.0, 2.0], requires_grad=True)
    h = x * 1.0
    h += x  # a recorded in-place write
    loss = (h * h).sum()
    g = tr.viz.graph(loss)
    assert len(ops_of(g)) == engine.count_graph_nodes(loss)


# ------------------------------------------------------------------------------- rendering
@needs_dot
def test_dot_accepts_every_drawing(tmp_path: Any) -> None:
    loss, params = small_loss()
    layer, rnn_loss = recurrent("LSTM", 6, "fused", track=True)
    with tr.viz.record_backward() as rec:
        rnn_loss.backward()
    _, auto_loss = recurrent("GRU", 4)
    cases = [tr.viz.graph(loss, params=params, show_saved=True),
             tr.viz.graph(rec, params=layer),
             tr.viz.graph(auto_loss, max_nodes=15),
             tr.viz.graph(auto_loss, collapse=True, hide="small")]
    for g in cases:
        done = subprocess.run([graph_module.find_dot(), "-Tsvg"], input=g.source.encode(),
                              capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr.decode()
        assert done.stdout.startswith(b"<?xml")
    for suffix in (".svg", ".png", ".pdf", ".dot"):
        path = cases[1].save(tmp_path / f"g{suffix}")
        assert os.path.getsize(path) > 0
    assert cases[0]._repr_svg_().lstrip().startswith("<?xml")
    assert cases[0]._repr_markdown_() is None


def test_without_dot_svg_is_a_clear_error_and_dot_still_works(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    assert graph_module.find_dot() is None
    loss, _ = small_loss()
    g = tr.viz.graph(loss)
    for suffix in (".svg", ".png", ".pdf"):
        with pytest.raises(GraphvizNotFoundError,
                           match="apt-get install graphviz.*conda.*brew install graphviz"):
            g.save(tmp_path / f"g{suffix}")
    assert os.listdir(tmp_path) == []  # nothing written
    path = g.save(tmp_path / "g.dot")
    assert open(path, encoding="utf-8").read() == g.source
    assert g._repr_svg_() is None
    assert g.source in g._repr_markdown_()


def test_a_failed_render_leaves_nothing_on_disk(tmp_path: Any,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    loss, _ = small_loss()
    g = tr.viz.graph(loss)
    (tmp_path / "old.svg").write_text("old")

    def broken(fmt: str) -> bytes:
        raise RuntimeError("Graph.render: `dot -Tsvg` failed")

    monkeypatch.setattr(g, "render", broken)
    with pytest.raises(RuntimeError, match="dot -Tsvg"):
        g.save(tmp_path / "old.svg")
    assert (tmp_path / "old.svg").read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["old.svg"]


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("kwargs, error, message", [
    (dict(group="step"), ValueError, r"graph: group must be one of 'time', 'none', got 'step'"),
    (dict(color="red"), ValueError, r"graph: color must be one of 'grad', 'none', got 'red'"),
    (dict(max_nodes=0), ValueError, r"graph: max_nodes must be a whole number >= 1"),
    (dict(max_nodes=2.5), ValueError, r"graph: max_nodes must be a whole number >= 1"),
    (dict(max_nodes=True), ValueError, r"graph: max_nodes must be a whole number >= 1"),
    (dict(collapse="yes"), ValueError, r"graph: collapse must be True, False or 'auto'"),
    (dict(hide="tiny"), ValueError, r"graph: hide must be None, 'small'"),
    (dict(hide=[1]), TypeError, r"graph: hide must hold op names"),
    (dict(rankdir="XY"), ValueError, r"graph: rankdir must be one of"),
    (dict(show_saved="yes"), TypeError, r"graph: show_saved must be True or False"),
    (dict(params=[1, 2]), TypeError, r"graph: params must be a mapping"),
    (dict(params={"w": np.ones(2)}), TypeError, r"graph: params\['w'\] must be a Tensor"),
])
def test_bad_arguments_name_the_function_and_argument(kwargs: dict, error: type,
                                                      message: str) -> None:
    loss, _ = small_loss()
    with pytest.raises(error, match=message):
        tr.viz.graph(loss, **kwargs)


@pytest.mark.parametrize("root", [np.ones(3), [1.0], None, "loss"])
def test_a_non_tensor_root_is_refused(root: Any) -> None:
    with pytest.raises(TypeError, match="graph: root must be a Tensor or a BackwardRecord"):
        tr.viz.graph(root)


def test_an_empty_record_is_refused() -> None:
    with tr.viz.record_backward() as rec:
        pass
    with pytest.raises(ValueError, match="graph: the BackwardRecord holds no backward pass"):
        tr.viz.graph(rec)


def test_save_refuses_bad_suffixes_and_missing_folders(tmp_path: Any) -> None:
    loss, _ = small_loss()
    g = tr.viz.graph(loss)
    with pytest.raises(ValueError, match=r"Graph.save: path must end in .svg, .png, .pdf or "
                                         r".dot, got '.*g.jpg'"):
        g.save(tmp_path / "g.jpg")
    with pytest.raises(FileNotFoundError, match="Graph.save: the folder .* does not exist"):
        g.save(tmp_path / "missing" / "g.dot")
    with pytest.raises(TypeError, match="Graph.save: path must be a str or os.PathLike"):
        g.save(3)
    assert os.listdir(tmp_path) == []


def test_leaf_root_and_repr() -> None:
    w = tr.Tensor([1.0, 2.0], requires_grad=True)
    g = tr.viz.graph(w, params={"w": w})
    assert [n.name for n in g.nodes.values()] == ["w"]
    assert repr(g) == "Graph(0 ops, 1 leaves, 0 edges, 0 clusters)"


# ------------------------------------------------------------------------------------ CLI
def test_cli_graph_writes_one_drawing_per_engine(tmp_path: Any,
                                                 capsys: pytest.CaptureFixture) -> None:
    code = cli.main(["graph", "elman", "--steps", "4", "--format", "dot",
                     "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == 0
    assert sorted(os.listdir(tmp_path / "out")) == ["elman_autograd_T4.dot",
                                                    "elman_fused_T4.dot"]
    assert "Graph(" in out
    text = (tmp_path / "out" / "elman_autograd_T4.dot").read_text()
    assert text.count('label="t = ') == 4
    fused = (tmp_path / "out" / "elman_fused_T4.dot").read_text()
    assert "FusedRecurrent" in fused and "||dL/dh_t||" in fused


def test_cli_graph_without_dot_is_a_usage_error(tmp_path: Any, capsys: pytest.CaptureFixture,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    code = cli.main(["graph", "lstm", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "needs Graphviz's `dot`" in err and "--format dot" in err
    assert os.listdir(tmp_path) == []


def test_cli_info_reports_graphviz(capsys: pytest.CaptureFixture,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert "graphviz:" in out
    monkeypatch.setenv("PATH", "")
    assert cli.main(["info"]) == 0
    assert "dot not found on PATH" in capsys.readouterr().out


def test_docstring_examples_run() -> None:
    import doctest

    result = doctest.testmod(graph_module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted >= 5


def _cuda_missing() -> str:
    try:
        tr.backend.module_for_device("cuda")
    except RuntimeError as err:
        return str(err)
    return ""


@pytest.mark.parametrize("device", [
    "standin",
    pytest.param("cuda", marks=pytest.mark.skipif(bool(_cuda_missing()),
                                                  reason=_cuda_missing() or "cuda")),
])
@pytest.mark.parametrize("engine_name", ["autograd", "fused"])
def test_graphs_on_a_device_equal_the_cpus(device: str, engine_name: str) -> None:
    """Norms are computed where the arrays live (the stand-in device refuses any silent
    copy to the host) and equal the CPU's."""
    drawings = {}
    for where in ("cpu", device):
        layer, _ = recurrent("GRU", 5, engine_name, track=True)
        layer.to(where)
        x = tr.Tensor(np.random.default_rng(1).standard_normal((5, 2, 3))).to(where)
        out, _ = layer(x)
        with tr.viz.record_backward() as rec:
            (out[-1] ** 2).sum().backward()
        drawings[where] = tr.viz.graph(rec, params=layer, collapse=True)
    cpu, dev = drawings["cpu"], drawings[device]
    assert [n.label.split("\n")[0] for n in cpu.nodes.values()] == \
        [n.label.split("\n")[0] for n in dev.nodes.values()]
    for a, b in zip(cpu.nodes.values(), dev.nodes.values()):
        assert (a.norm is None) == (b.norm is None)
        if a.norm is not None:
            assert b.norm == pytest.approx(a.norm, rel=1e-10)


def test_the_cap_keeps_the_steps_nearest_the_loss() -> None:
    """All steps feed the stack of outputs, so they are equally near the root; the cap keeps
    the last ones (nearest the loss in time), not the first."""
    _, loss = recurrent("RNN", 40)
    g = tr.viz.graph(loss, collapse=True, max_nodes=12)
    kept = sorted(int(n.name.split(" = ")[1]) for n in g.nodes.values() if n.kind == "step")
    assert kept and kept[-1] == 39
    assert kept == list(range(40 - len(kept), 40))


def test_committed_figures_match_the_figure_script() -> None:
    """docs/figures/graph/*.dot were drawn by docs/figures/make_graph_figures.py from the
    networks it builds: the same nodes (first label line) and edges (the printed norms may
    differ in the last digit on another BLAS, so they are not compared)."""
    import importlib.util
    import re
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "docs" / "figures"
    spec = importlib.util.spec_from_file_location("make_graph_figures",
                                                  folder / "make_graph_figures.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    drawings = {"neuron": script.neuron(),
                "elman_autograd_T8": script.unrolled("RNN", 8, "autograd", hide="small")[0],
                "elman_fused_T8": script.unrolled("RNN", 8, "fused")[0]}

    def structure(source: str) -> tuple:
        nodes = re.findall(r'^\s*(n\d+) \[label="([^"\\]*)', source, re.M)
        edges = re.findall(r"^\s*(n\d+) -> (n\d+)", source, re.M)
        return sorted(nodes), sorted(edges)

    for name, drawing in drawings.items():
        committed = (folder / "graph" / f"{name}.dot").read_text(encoding="utf-8")
        assert structure(committed) == structure(drawing.source), name
        assert structure(committed)[0], name
