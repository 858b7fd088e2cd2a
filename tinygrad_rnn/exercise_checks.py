"""The checks that grade the exercises (:mod:`tinygrad_rnn.exercises`): float64 central
differences and properties, each drawn from a seeded NumPy generator.

Two kinds of check live here:

* :func:`check_vjp`, the gradient check of ``docs/gradcheck.md`` on *raw arrays*: a
  hand-written forward/backward pair (a recurrent step, the textbook BPTT loop, an attention
  piece) is checked without the autograd engine, so a student who has not written the engine
  yet can still be graded on a step backward. L = sum_o <w_o, f_o(x)> for a fixed random
  upstream gradient w; the pair's backward(w) must equal the central differences of L entry
  by entry (eps 1e-6, ``|analytic - numeric| <= atol + rtol |numeric|`` with rtol 1e-5 and
  atol 1e-6 max(1, sum_o |w_o| . |f_o|), the tolerances of ``tinygrad-rnn gradcheck``).
* property functions ``prop_*(rng)``, one per behaviour that is not a Jacobian (the
  topological order on deep chains, the windows of truncated BPTT, clipping, Adam's step),
  each comparing the package with a definition written out here.

Every check raises :class:`PropertyFailure` with the message the scoreboard shows: the
shapes, the worst entry (analytic against numeric, or got against expected) and the equation
to revisit. Nothing here imports hypothesis: a student copy graded on a plain install gives
the same grade as the instructor's run (the same seeds give the same examples).
"""
from __future__ import annotations

import math
import sys
from typing import Any, Callable

import numpy as np

__all__ = ["PropertyFailure", "check_vjp", "PROPERTIES"]

EPS = 1e-6
RTOL = 1e-5
ATOL = 1e-6


class PropertyFailure(AssertionError):
    """A failed check: ``message`` for the scoreboard, ``equation`` the one to revisit (or
    None: the task's equations)."""

    def __init__(self, message: str, equation: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.equation = equation


def _shapes(arrays: dict) -> str:
    return ", ".join(f"{name} {tuple(np.shape(a))}" for name, a in arrays.items()
                     if a is not None)


def _index(idx: tuple) -> str:
    return "[" + ", ".join(str(int(i)) for i in idx) + "]"


def _row_name(gates: tuple | None, idx: tuple, rows: int) -> str:
    """' (gate f, unit 1)' for row ``idx[0]`` of a weight with stacked gate rows."""
    if not gates or not idx or rows % len(gates):
        return ""
    size = rows // len(gates)
    return f" (gate {gates[idx[0] // size]}, unit {idx[0] % size})"


# ------------------------------------------------------------------ raw-array gradient check
def check_vjp(what: str, forward: Callable[[dict], tuple], backward: Callable[[tuple], dict],
              inputs: dict, rng: np.random.Generator, equations: dict | None = None,
              gates: dict | None = None) -> None:
    """Check ``backward`` against central differences of ``forward`` on float64 arrays.

    ``forward(inputs)`` returns a tuple of arrays (it may keep a cache for ``backward``);
    ``backward(upstream)`` takes one upstream array per output and returns a dict of
    gradients, one per key of ``inputs`` whose value is not None. ``equations`` maps an
    input name to the equation its gradient comes from; ``gates`` maps a weight's name to
    its stacked gate rows, so a failure names the gate.
    """
    equations, gates = equations or {}, gates or {}
    outs = forward(inputs)
    upstream = tuple(rng.standard_normal(np.shape(o)) for o in outs)
    grads = backward(upstream)
    scale = max(1.0, sum(float(np.sum(np.abs(w * o))) for w, o in zip(upstream, outs)))
    atol = ATOL * scale

    def loss() -> float:
        return sum(float(np.sum(w * o)) for w, o in zip(upstream, forward(inputs)))

    worst = None  # (margin, name, idx, analytic, numeric)
    for name, x in inputs.items():
        if x is None or not isinstance(x, np.ndarray) or x.dtype.kind != "f":
            continue
        got = grads.get(name)
        eq = equations.get(name)
        if got is None:
            raise PropertyFailure(f"{what}: no gradient for {name} of shape {x.shape} "
                                  f"(inputs: {_shapes(inputs)})", eq)
        got = np.asarray(got)
        if got.shape != x.shape:
            raise PropertyFailure(f"{what}: the gradient of {name} has shape {got.shape}, "
                                  f"{name} has shape {x.shape} (inputs: {_shapes(inputs)})",
                                  eq)
        for idx in np.ndindex(x.shape):
            old = x[idx]
            x[idx] = old + EPS
            up = loss()
            x[idx] = old - EPS
            down = loss()
            x[idx] = old
            numeric = (up - down) / (2 * EPS)
            analytic = float(got[idx])
            margin = abs(analytic - numeric) - (atol + RTOL * abs(numeric))
            if not math.isfinite(analytic):
                margin = math.inf
            if worst is None or margin > worst[0]:
                worst = (margin, name, idx, analytic, numeric)
    if worst is not None and worst[0] > 0:
        _, name, idx, analytic, numeric = worst
        rows = _row_name(gates.get(name), idx, inputs[name].shape[0])
        raise PropertyFailure(
            f"{what}: worst entry dL/d{name}{_index(idx)}{rows}: analytic {analytic:.10g}, "
            f"numeric {numeric:.10g} (abs error {abs(analytic - numeric):.3g}); inputs: "
            f"{_shapes(inputs)}", equations.get(name))


def _reals(rng: np.random.Generator, *shape: int, lo: float = -1.0,
           hi: float = 1.0) -> np.ndarray:
    return rng.uniform(lo, hi, size=shape)


def _maybe(rng: np.random.Generator, *shape: int) -> np.ndarray | None:
    return _reals(rng, *shape) if rng.random() < 0.75 else None


def _grad_of(p: Any) -> np.ndarray:
    """``p.grad`` as a host array; a failure naming the parameter when it has none."""
    if p.grad is None:
        raise PropertyFailure(f"a parameter of shape {tuple(p.shape)} received no gradient")
    return p.grad.numpy()


def _elman_step(a: dict, nonlinearity: str) -> tuple:
    from tinygrad_rnn.bptt import rnn_step_forward

    return rnn_step_forward(a["x_t"], a["h_prev"], a["weight_ih"], a["weight_hh"],
                            a["bias_ih"], a["bias_hh"], nonlinearity=nonlinearity)


# ------------------------------------------------------------------- recurrent step pairs
def prop_rnn_step(rng: np.random.Generator) -> None:
    """rnn_step_backward against central differences of rnn_step_forward (tanh and relu,
    with and without biases); relu pre-activations kept away from 0."""
    from tinygrad_rnn.bptt import rnn_step_backward

    N, D, H = 2, int(rng.integers(1, 4)), int(rng.integers(1, 4))
    nonlinearity = "tanh" if rng.random() < 0.5 else "relu"
    for _ in range(100):
        ins = {"x_t": _reals(rng, N, D), "h_prev": _reals(rng, N, H),
               "weight_ih": _reals(rng, H, D), "weight_hh": _reals(rng, H, H),
               "bias_ih": _maybe(rng, H), "bias_hh": _maybe(rng, H)}
        h, cache = _elman_step(ins, nonlinearity)
        if nonlinearity == "tanh" or np.abs(cache.a_t).min() > 0.05:
            break
    box: list = []

    def forward(a: dict) -> tuple:
        h_t, cache = _elman_step(a, nonlinearity)
        box[:] = [cache]
        return (h_t,)

    def backward(up: tuple) -> dict:
        forward(ins)
        g = rnn_step_backward(up[0], box[0])
        return {"x_t": g.dx_t, "h_prev": g.dh_prev, "weight_ih": g.dweight_ih,
                "weight_hh": g.dweight_hh, "bias_ih": g.dbias_ih, "bias_hh": g.dbias_hh}

    check_vjp(f"rnn_step_backward ({nonlinearity})", forward, backward, ins, rng,
              {"x_t": "E6", "h_prev": "E5", "weight_ih": "E7", "weight_hh": "E7",
               "bias_ih": "E7", "bias_hh": "E7"})


GRU_GATES = ("r", "z", "n")


def prop_gru_step(rng: np.random.Generator) -> None:
    """gru_step_backward against central differences of gru_step_forward (reset after and
    before, with and without biases)."""
    from tinygrad_rnn.bptt import gru_step_backward, gru_step_forward

    N, D, H = 2, int(rng.integers(1, 4)), int(rng.integers(1, 4))
    reset = "after" if rng.random() < 0.5 else "before"
    ins = {"x_t": _reals(rng, N, D), "h_prev": _reals(rng, N, H),
           "weight_ih": _reals(rng, 3 * H, D), "weight_hh": _reals(rng, 3 * H, H),
           "bias_ih": _maybe(rng, 3 * H), "bias_hh": _maybe(rng, 3 * H)}
    box: list = []

    def forward(a: dict) -> tuple:
        h_t, cache = gru_step_forward(a["x_t"], a["h_prev"], a["weight_ih"], a["weight_hh"],
                                      a["bias_ih"], a["bias_hh"], reset=reset)
        box[:] = [cache]
        return (h_t,)

    def backward(up: tuple) -> dict:
        forward(ins)
        g = gru_step_backward(up[0], box[0])
        return {"x_t": g.dx_t, "h_prev": g.dh_prev, "weight_ih": g.dweight_ih,
                "weight_hh": g.dweight_hh, "bias_ih": g.dbias_ih, "bias_hh": g.dbias_hh}

    gates = {name: GRU_GATES for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
    check_vjp(f"gru_step_backward (reset {reset})", forward, backward, ins, rng,
              {"x_t": "G10", "h_prev": "G9", "weight_ih": "G11", "weight_hh": "G11",
               "bias_ih": "G11", "bias_hh": "G11"}, gates)


def prop_lstm_step(rng: np.random.Generator) -> None:
    """lstm_step_backward against central differences of lstm_step_forward (plain,
    peepholes, coupled input-forget gate; with and without biases), both outputs h_t and
    c_t carrying an upstream gradient."""
    from tinygrad_rnn.bptt import lstm_step_backward, lstm_step_forward

    N, D, H = 2, int(rng.integers(1, 4)), int(rng.integers(1, 4))
    coupled = bool(rng.random() < 0.3)
    peephole = bool(rng.random() < 0.4)
    G = 3 if coupled else 4
    gate_rows: tuple = ("f", "g", "o") if coupled else ("i", "f", "g", "o")
    ins = {"x_t": _reals(rng, N, D), "h_prev": _reals(rng, N, H), "c_prev": _reals(rng, N, H),
           "weight_ih": _reals(rng, G * H, D), "weight_hh": _reals(rng, G * H, H),
           "bias_ih": _maybe(rng, G * H), "bias_hh": _maybe(rng, G * H),
           "weight_ch": _reals(rng, (G - 1) * H) if peephole else None}
    box: list = []

    def forward(a: dict) -> tuple:
        h_t, c_t, cache = lstm_step_forward(
            a["x_t"], a["h_prev"], a["c_prev"], a["weight_ih"], a["weight_hh"], a["bias_ih"],
            a["bias_hh"], weight_ch=a["weight_ch"], coupled=coupled)
        box[:] = [cache]
        return h_t, c_t

    def backward(up: tuple) -> dict:
        forward(ins)
        g = lstm_step_backward(up[0], up[1], box[0])
        return {"x_t": g.dx_t, "h_prev": g.dh_prev, "c_prev": g.dc_prev,
                "weight_ih": g.dweight_ih, "weight_hh": g.dweight_hh, "bias_ih": g.dbias_ih,
                "bias_hh": g.dbias_hh, "weight_ch": g.dweight_ch}

    gates = {name: gate_rows for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
    gates["weight_ch"] = ("f", "o") if coupled else ("i", "f", "o")
    what = "lstm_step_backward" + (" (coupled)" if coupled else "") + \
        (" (peepholes)" if peephole else "")
    check_vjp(what, forward, backward, ins, rng,
              {"x_t": "L13", "h_prev": "L12", "c_prev": "L11", "weight_ih": "L13",
               "weight_hh": "L13", "bias_ih": "L13", "bias_hh": "L13", "weight_ch": "L13"},
              gates)


# ------------------------------------------------------------------ the textbook BPTT loop
def _loop_check(rng: np.random.Generator, cell: str) -> None:
    from tinygrad_rnn.bptt import reference as ref

    T, N, D, H = int(rng.integers(1, 5)), 2, int(rng.integers(1, 3)), int(rng.integers(1, 3))
    G = {"elman": 1, "gru": 3, "lstm": 4}[cell]
    ins = {"x": _reals(rng, T, N, D), "h0": _reals(rng, N, H),
           "weight_ih": _reals(rng, G * H, D), "weight_hh": _reals(rng, G * H, H),
           "bias_ih": _reals(rng, G * H), "bias_hh": _reals(rng, G * H)}
    if cell == "lstm":
        ins["c0"] = _reals(rng, N, H)
    box: list = []

    def forward(a: dict) -> tuple:
        w = (a["weight_ih"], a["weight_hh"], a["bias_ih"], a["bias_hh"])
        if cell == "elman":
            hs, h_n, caches = ref.elman_forward_reference(a["x"], a["h0"], *w)
            box[:] = [caches]
            return hs, h_n
        if cell == "gru":
            hs, h_n, caches = ref.gru_forward_reference(a["x"], a["h0"], *w)
            box[:] = [caches]
            return hs, h_n
        hs, h_n, c_n, caches = ref.lstm_forward_reference(a["x"], a["h0"], a["c0"], *w)
        box[:] = [caches]
        return hs, h_n, c_n

    def backward(up: tuple) -> dict:
        forward(ins)
        if cell == "elman":
            g: Any = ref.elman_backward_reference(up[0], up[1], box[0])
        elif cell == "gru":
            g = ref.gru_backward_reference(up[0], up[1], box[0])
        else:
            g = ref.lstm_backward_reference(up[0], up[1], up[2], box[0])
        out = {"x": g.dx, "h0": g.dh0, "weight_ih": g.dweight_ih, "weight_hh": g.dweight_hh,
               "bias_ih": g.dbias_ih, "bias_hh": g.dbias_hh}
        if cell == "lstm":
            out["c0"] = g.dc0
        return out

    eq = {"elman": "E3", "gru": "G5", "lstm": "L7"}[cell]
    rows = {"elman": None, "gru": GRU_GATES, "lstm": ("i", "f", "g", "o")}[cell]
    gates = {name: rows for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
    check_vjp(f"{cell}_backward_reference over T={T} steps (loss at every step and on the "
              f"final state)", forward, backward, ins, rng,
              {name: eq for name in ins}, gates)


def prop_elman_loop(rng: np.random.Generator) -> None:
    """elman_backward_reference against central differences of the whole sequence."""
    _loop_check(rng, "elman")


def prop_gru_loop(rng: np.random.Generator) -> None:
    """gru_backward_reference against central differences of the whole sequence."""
    _loop_check(rng, "gru")


def prop_lstm_loop(rng: np.random.Generator) -> None:
    """lstm_backward_reference against central differences of the whole sequence."""
    _loop_check(rng, "lstm")


# ------------------------------------------------------------------------------ attention
def prop_additive_scores(rng: np.random.Generator) -> None:
    """additive_scores_backward against central differences of additive_scores_forward."""
    from tinygrad_rnn.ops import attention as att

    N, Tq, Tk = 2, int(rng.integers(1, 4)), int(rng.integers(1, 4))
    Dq, Dk, H = int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
    ins = {"q": _reals(rng, N, Tq, Dq), "k": _reals(rng, N, Tk, Dk),
           "w_q": _reals(rng, H, Dq), "b": _maybe(rng, H), "w_k": _reals(rng, H, Dk),
           "v": _reals(rng, H)}
    box: list = []

    def forward(a: dict) -> tuple:
        s, cache = att.additive_scores_forward(*a.values())
        box[:] = [cache]
        return (s,)

    def backward(up: tuple) -> dict:
        forward(ins)
        names = ("q", "k", "w_q", "b", "w_k", "v")
        return dict(zip(names, att.additive_scores_backward(up[0], box[0])))

    check_vjp("additive_scores_backward", forward, backward, ins, rng,
              {name: "A7" for name in ins})


def _keep_mask(rng: np.random.Generator, N: int, Tq: int, Tk: int) -> np.ndarray | None:
    """None, or a boolean mask with some keys dropped and, now and then, a fully masked row
    (whose weights and gradients must be exactly 0, (A10))."""
    if rng.random() < 0.3:
        return None
    keep = rng.random((N, Tq, Tk)) < 0.7
    if rng.random() < 0.3:
        keep[0, 0, :] = False
    return keep


def prop_scaled_dot_scores(rng: np.random.Generator) -> None:
    """scaled_dot_scores_backward against central differences of its forward."""
    from tinygrad_rnn.ops import attention as att

    N, Tq, Tk, Dk = 2, int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
    ins = {"q": _reals(rng, N, Tq, Dk), "k": _reals(rng, N, Tk, Dk)}
    check_vjp("scaled_dot_scores_backward",
              lambda a: (att.scaled_dot_scores_forward(a["q"], a["k"]),),
              lambda up: dict(zip(("q", "k"),
                                  att.scaled_dot_scores_backward(up[0], ins["q"], ins["k"]))),
              ins, rng, {"q": "A5", "k": "A5"})


def prop_masked_softmax(rng: np.random.Generator) -> None:
    """masked_softmax_backward against central differences, with masks and fully masked
    rows (their gradient must be exactly 0)."""
    from tinygrad_rnn.ops import attention as att

    N, Tq, Tk = 2, int(rng.integers(1, 4)), int(rng.integers(1, 5))
    keep = _keep_mask(rng, N, Tq, Tk)
    ins = {"s": _reals(rng, N, Tq, Tk, lo=-3.0, hi=3.0)}

    def backward(up: tuple) -> dict:
        alpha = att.masked_softmax_forward(ins["s"], keep)
        ds = att.masked_softmax_backward(up[0], alpha)
        if keep is not None and np.any(np.asarray(ds)[~keep] != 0):
            raise PropertyFailure("masked_softmax_backward: a masked score got a nonzero "
                                  f"gradient (mask shape {keep.shape})", "A10")
        return {"s": ds}

    check_vjp("masked_softmax_backward" + (" with a mask" if keep is not None else ""),
              lambda a: (att.masked_softmax_forward(a["s"], keep),), backward, ins, rng,
              {"s": "A9"})


def prop_weighted_sum(rng: np.random.Generator) -> None:
    """weighted_sum_backward against central differences of C = alpha V."""
    from tinygrad_rnn.ops import attention as att

    N, Tq, Tk, Dv = 2, int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
    ins = {"alpha": _reals(rng, N, Tq, Tk), "values": _reals(rng, N, Tk, Dv)}
    check_vjp("weighted_sum_backward",
              lambda a: (att.weighted_sum_forward(a["alpha"], a["values"]),),
              lambda up: dict(zip(("alpha", "values"), att.weighted_sum_backward(
                  up[0], ins["alpha"], ins["values"]))),
              ins, rng, {"alpha": "A11", "values": "A11"})


def prop_scaled_dot_attention(rng: np.random.Generator) -> None:
    """The whole pass, score -> masked softmax -> weighted sum, with scaled dot scores: the
    gradients of Q, K and V against central differences of attention_forward."""
    from tinygrad_rnn.ops import attention as att

    N, Tq, Tk = 2, int(rng.integers(1, 4)), int(rng.integers(1, 4))
    Dk, Dv = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    keep = _keep_mask(rng, N, Tq, Tk)
    ins = {"q": _reals(rng, N, Tq, Dk), "k": _reals(rng, N, Tk, Dk),
           "values": _reals(rng, N, Tk, Dv)}
    box: list = []

    def forward(a: dict) -> tuple:
        c, _, cache = att.attention_forward(a["q"], a["k"], a["values"], "scaled_dot",
                                            keep=keep)
        box[:] = [cache]
        return (c,)

    def backward(up: tuple) -> dict:
        forward(ins)
        g = att.attention_backward(up[0], box[0])
        return {"q": g.dq, "k": g.dk, "values": g.dvalues}

    check_vjp("attention_backward (scaled dot" + (", masked)" if keep is not None else ")"),
              forward, backward, ins, rng, {"q": "A5", "k": "A5", "values": "A11"})


# ------------------------------------------------------------------------- sum_to_shape
def prop_sum_to_shape(rng: np.random.Generator) -> None:
    """sum_to_shape(g, shape) = J^T g for J the matrix of broadcasting ``shape`` to g's shape
    (built explicitly here: each output entry copies one input entry)."""
    from tinygrad_rnn.ops.base import sum_to_shape

    big = tuple(int(s) for s in rng.integers(1, 4, size=int(rng.integers(1, 4))))
    drop = int(rng.integers(0, len(big) + 1))
    small = tuple(1 if rng.random() < 0.4 else s for s in big[drop:])
    g = rng.standard_normal(big)
    n = math.prod(small)
    # J: (prod(big), n), row k has one 1, in the column of the input entry output k copies
    J = np.broadcast_to(np.eye(n).reshape(small + (n,)), big + (n,)).reshape(-1, n)
    want = (J.T @ g.reshape(-1)).reshape(small)
    got = np.asarray(sum_to_shape(g, small))
    if got.shape != small:
        raise PropertyFailure(f"sum_to_shape: a gradient of shape {big} reduced to shape "
                              f"{small} came back with shape {got.shape}", "BC8")
    err = np.abs(got - want)
    if err.max(initial=0.0) > 1e-12 * max(1.0, float(np.abs(g).sum())):
        idx = np.unravel_index(int(np.argmax(err)), small)
        raise PropertyFailure(
            f"sum_to_shape: gradient of shape {big} reduced to {small}: worst entry "
            f"{_index(idx)}: got {got[idx]:.10g}, expected {want[idx]:.10g} (the sum of the "
            f"gradient over the axes broadcasting added and the size-1 axes it copied)", "BC8")


# ---------------------------------------------------------------- the topological order
def _gradcheck(what: str, fn: Callable, *leaves: Any, equation: str) -> None:
    import tinygrad_rnn as tr

    report = tr.gradcheck(fn, leaves, eps=EPS, atol=ATOL * 10, rtol=RTOL,
                          raise_exception=False)
    assert not isinstance(report, bool)  # raise_exception=False: always the report
    if not report.passed:
        raise PropertyFailure(
            f"{what}: worst entry d output{list(report.output_element)} / d "
            f"{report.label}{list(report.element)}: analytic {report.analytic:.10g}, "
            f"numeric {report.numeric:.10g}; input shapes "
            f"{[tuple(t.shape) for t in leaves]}", equation)


def prop_diamond_graphs(rng: np.random.Generator) -> None:
    """A random graph of adds and products in which every value is reused (diamonds, a
    weight used at several steps): every node's backward must run after all its consumers
    have added their gradient (docs/engine.md section 3, equation (3))."""
    import tinygrad_rnn as tr

    n = int(rng.integers(2, 4))
    leaves = [tr.Tensor(rng.uniform(-1, 1, size=(2,)), requires_grad=True) for _ in range(n)]
    plan = [(int(rng.integers(0, 3)), int(rng.integers(0, n + k)), int(rng.integers(0, n + k)))
            for k in range(int(rng.integers(4, 9)))]

    def fn(*xs: Any) -> Any:
        vals = list(xs)
        for op, i, j in plan:
            a, b = vals[i], vals[j]
            vals.append(a + b if op == 0 else a * b * 0.5 if op == 1 else a - b * 0.5)
        return vals[-1] + vals[-2] * 0.5

    _gradcheck(f"a graph of {len(plan)} ops over {n} leaves, values reused", fn, *leaves,
               equation="3")


def prop_deep_chain(rng: np.random.Generator) -> None:
    """A chain of 20,000 ops, backward at Python's default recursion limit: the order must
    be found without recursion (engine rule 1), and the gradient is known in closed form."""
    import tinygrad_rnn as tr

    steps = 20_000
    c = float(rng.uniform(0.9999, 1.0001))
    x = tr.Tensor(np.array([0.5, -1.0]), requires_grad=True)
    y = x
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        for _ in range(steps // 2):
            y = y * c + 0.25
        try:
            y.sum().backward()
        except RecursionError:
            raise PropertyFailure(
                f"backward over a chain of {steps} ops hit Python's recursion limit: find "
                f"the order with an explicit stack, not recursion (docs/engine.md section 3)",
                "3") from None
    finally:
        sys.setrecursionlimit(old)
    want = c ** (steps // 2)
    got = None if x.grad is None else x.grad.numpy()
    if got is None or not np.allclose(got, want, rtol=1e-9, atol=0):
        raise PropertyFailure(f"a chain y <- y * c + 0.25 repeated {steps // 2} times: "
                              f"dL/dx = {got}, expected c^{steps // 2} = {want:.12g} at both "
                              f"entries (shape (2,))", "3")


# ---------------------------------------------------------------------- truncated BPTT
def _windows_by_definition(T: int, k1: int, k2: int) -> list:
    """(start, loss_start, stop) of every window: updates at k1, 2 k1, ... and T; each
    window backpropagates from its update k2 - k1 steps past the start of its loss range."""
    stops = list(range(k1, T + 1, k1))
    if not stops or stops[-1] != T:
        stops.append(T)
    out, prev = [], 0
    for stop in stops:
        out.append((max(0, prev - (k2 - k1)), prev, stop))
        prev = stop
    return out if T else []


def prop_truncation_windows(rng: np.random.Generator) -> None:
    """windows(T, schedule): loss ranges partition [0, T), updates every k1 steps, each
    window starts k2 - k1 steps before its loss range ((TB3), (TB4))."""
    import tinygrad_rnn as tr

    T, k1 = int(rng.integers(0, 13)), int(rng.integers(1, 6))
    k2 = k1 + int(rng.integers(0, 5))
    got = [(w.start, w.loss_start, w.stop) for w in tr.truncation.windows(
        T, tr.truncation.williams_peng(k1, k2))]
    want = _windows_by_definition(T, k1, k2)
    if got != want:
        raise PropertyFailure(f"windows(T={T}, TBPTT(k1={k1}, k2={k2})): got (start, "
                              f"loss_start, stop) = {got}, expected {want}", "TB3")


def prop_truncated_gradient(rng: np.random.Generator) -> None:
    """run_truncated's accumulated gradient equals the sum over windows, each computed by
    brute force: the state at the window's start (from an untruncated forward pass,
    detached), the window's steps, the loss of its loss range ((TB1), (TB6))."""
    import tinygrad_rnn as tr

    T, N, D, H = int(rng.integers(2, 9)), 2, 2, 3
    k1 = int(rng.integers(1, 4))
    k2 = k1 + int(rng.integers(0, 3))
    rnn = tr.nn.RNN(D, H, dtype=np.float64, generator=rng)
    x = tr.Tensor(rng.uniform(-1, 1, size=(T, N, D)))
    w = rng.standard_normal((T, N, H))

    def loss_fn(out: Any, a: int, b: int) -> Any:
        return (out * tr.Tensor(w[a:b])).sum()

    tr.truncation.run_truncated(lambda xs, h: rnn(xs, h), x,
                                tr.truncation.williams_peng(k1, k2), loss_fn)
    got = {name: _grad_of(p).copy() for name, p in rnn.named_parameters()}
    rnn.zero_grad()
    with tr.no_grad():
        states = [None] + [rnn(x[:t])[1] for t in range(1, T + 1)]
    for start, loss_start, stop in _windows_by_definition(T, k1, k2):
        h0 = None if states[start] is None else states[start].detach()
        out, _ = rnn(x[start:stop], h0)
        (out[loss_start - start:] * tr.Tensor(w[loss_start:stop])).sum().backward()
    for name, p in rnn.named_parameters():
        want = _grad_of(p)
        err = np.abs(got[name] - want)
        if err.max() > 1e-10 * max(1.0, float(np.abs(want).max())):
            idx = np.unravel_index(int(np.argmax(err)), want.shape)
            raise PropertyFailure(
                f"run_truncated with TBPTT(k1={k1}, k2={k2}) over T={T} steps: "
                f"d{name}{_index(idx)} = {got[name][idx]:.10g}, the sum over the windows "
                f"gives {want[idx]:.10g} (x shape {(T, N, D)}, H={H})", "TB6")


# ------------------------------------------------------------------------------ clipping
def prop_clip_grad_norm(rng: np.random.Generator) -> None:
    """clip_grad_norm_: returns the total p-norm of all gradients; when it exceeds max_norm
    every gradient is scaled by max_norm / (norm + 1e-6) (direction kept), else untouched."""
    import tinygrad_rnn as tr

    shapes = [tuple(int(s) for s in rng.integers(1, 4, size=int(rng.integers(1, 3))))
              for _ in range(int(rng.integers(1, 4)))]
    grads = [rng.standard_normal(s) for s in shapes]
    norm_type = [2.0, 1.0, 3.0, math.inf][int(rng.integers(0, 4))]
    flat = np.concatenate([g.ravel() for g in grads])
    total = float(np.abs(flat).max() if norm_type == math.inf
                  else (np.abs(flat) ** norm_type).sum() ** (1 / norm_type))
    max_norm = float(total * (rng.uniform(0.2, 0.9) if rng.random() < 0.7
                              else rng.uniform(1.1, 2.0)))
    params = []
    for g in grads:
        p = tr.Tensor(np.zeros(g.shape), requires_grad=True)
        p.grad = tr.Tensor(g.copy())
        params.append(p)
    got_total = float(tr.nn.utils.clip_grad_norm_(params, max_norm, norm_type=norm_type))
    where = (f"clip_grad_norm_(max_norm={max_norm:.6g}, norm_type={norm_type}) on gradients "
             f"of shapes {shapes}")
    if not math.isclose(got_total, total, rel_tol=1e-12):
        raise PropertyFailure(f"{where}: returned total norm {got_total:.12g}, expected "
                              f"{total:.12g} (the norm of all gradients joined, before "
                              f"clipping)")
    coef = min(1.0, max_norm / (total + 1e-6))
    for k, (p, g) in enumerate(zip(params, grads)):
        got = _grad_of(p)
        err = np.abs(got - g * coef)
        if err.max() > 1e-12 * max(1.0, float(np.abs(g).max())):
            idx = np.unravel_index(int(np.argmax(err)), g.shape)
            raise PropertyFailure(f"{where}: gradient {k}{_index(idx)} is {got[idx]:.10g}, "
                                  f"expected {g[idx] * coef:.10g} (scaled by min(1, max_norm "
                                  f"/ (norm + 1e-6)) = {coef:.10g})")


# ---------------------------------------------------------------------------------- Adam
def _adam_by_the_equations(theta: np.ndarray, grads: list, lr: float, b1: float, b2: float,
                           eps: float, wd: float, amsgrad: bool, decoupled: bool) -> list:
    """theta after each of the steps of Adam's docstring, written out from its equations."""
    m, v, vmax, out = np.zeros_like(theta), np.zeros_like(theta), np.zeros_like(theta), []
    theta = theta.copy()
    for t, g in enumerate(grads, start=1):
        if decoupled:
            theta = theta - lr * wd * theta
        elif wd:
            g = g + wd * theta
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        vmax = np.maximum(vmax, v)
        m_hat = m / (1 - b1 ** t)
        v_hat = (vmax if amsgrad else v) / (1 - b2 ** t)
        theta = theta - lr * m_hat / (np.sqrt(v_hat) + eps)
        out.append(theta.copy())
    return out


def prop_adam_step(rng: np.random.Generator) -> None:
    """Adam's parameters after 4 steps equal the equations of its docstring (bias-corrected
    moments; L2 or decoupled weight decay; amsgrad)."""
    import tinygrad_rnn as tr

    shape = tuple(int(s) for s in rng.integers(1, 4, size=2))
    theta0 = rng.standard_normal(shape)
    grads = [rng.standard_normal(shape) for _ in range(4)]
    lr = float(rng.uniform(1e-3, 1e-1))
    b1, b2 = float(rng.uniform(0.5, 0.95)), float(rng.uniform(0.9, 0.9999))
    eps = float(10.0 ** rng.uniform(-8, -3))
    wd = float(rng.uniform(0, 0.1)) if rng.random() < 0.5 else 0.0
    amsgrad, decoupled = bool(rng.random() < 0.4), bool(rng.random() < 0.3)
    p = tr.Tensor(theta0.copy(), requires_grad=True)
    opt = tr.optim.Adam([p], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd,
                        amsgrad=amsgrad, decoupled_weight_decay=decoupled)
    want = _adam_by_the_equations(theta0, grads, lr, b1, b2, eps, wd, amsgrad, decoupled)
    settings = (f"Adam(lr={lr:.4g}, betas=({b1:.4g}, {b2:.4g}), eps={eps:.3g}, "
                f"weight_decay={wd:.3g}, amsgrad={amsgrad}, decoupled_weight_decay="
                f"{decoupled}) on a parameter of shape {shape}")
    for t, (g, w) in enumerate(zip(grads, want), start=1):
        p.grad = tr.Tensor(g.copy())
        opt.step()
        got = p.numpy()
        err = np.abs(got - w)
        if not np.all(err <= 1e-9 * np.maximum(1.0, np.abs(w))):
            idx = np.unravel_index(int(np.argmax(err)), shape)
            raise PropertyFailure(f"{settings}: after step {t}, theta{_index(idx)} = "
                                  f"{got[idx]:.12g}, the equations give {w[idx]:.12g}")


PROPERTIES: dict[str, Callable[[np.random.Generator], None]] = {
    name[len("prop_"):]: fn for name, fn in sorted(globals().items())
    if name.startswith("prop_") and callable(fn)
}
