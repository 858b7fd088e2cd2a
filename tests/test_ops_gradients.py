"""Gradient checks of every registered op: ``tr.gradcheck`` in float64, full Jacobian by
central differences (eps 1e-6), on hypothesis-generated inputs inside each op's domain.

``test_gradcheck_<name>`` is made for each entry ``<name>`` of the op registry,
``tinygrad_rnn/testing/registry.py`` (the list ``tinygrad-rnn gradcheck`` checks too): grep
the registry for ``"<name>"`` to find the op, its reference and its domain.

Tolerances: an entry passes when |analytic - numeric| <= atol + rtol |numeric| with
rtol = 1e-5 and atol = 1e-6 * max(1, max |f|). The central difference has truncation error
about eps^2 |f'''| / 6 (below 1e-9 for these bounded inputs) and round-off about
u |f| / eps ~ 1e-10 |f|, so these bounds have a wide margin and are never loosened.

A meta-test fails when a Function subclass exported by ``tinygrad_rnn.ops`` (the
conversion ops ``Copy`` / ``Cast`` among them) has no registry entry, and every example
asserts that the primitives its entry claims to cover are really in the recorded graph.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import example, given

import tinygrad_rnn as tr
from tinygrad_rnn.testing.registry import (
    HAS_WIDE_FLOAT, REGISTRY, Case, OpInfo, as_tuple, exported_functions, graph_functions,
)
from tinygrad_rnn.ops import Cast

EPS = 1e-6
ATOL = 1e-6  # scaled by max(1, max |f|)
RTOL = 1e-5


def _output_scale(outputs: tuple) -> float:
    """max(1, largest finite |output entry|): the scale of the round-off in f."""
    scale = 1.0
    for out in outputs:
        values = np.asarray(out.array, dtype=np.float64)
        finite = values[np.isfinite(values)]
        if finite.size:
            scale = max(scale, float(np.abs(finite).max()))
    return scale


def check_gradients(op: OpInfo, case: Case) -> None:
    """gradcheck ``op`` at ``case``; elements ``op.frozen`` marks must get exactly 0."""
    leaves = [tr.Tensor(a, requires_grad=True) for a in case.inputs]
    outputs = as_tuple(op.fn(*leaves, **case.consts))
    missing = set(op.functions) - graph_functions(outputs)
    assert not missing, f"{op.name}: {sorted(f.__name__ for f in missing)} not in the graph"

    frozen = op.frozen(case) if op.frozen is not None else (None,) * len(leaves)
    if any(mask is not None for mask in frozen):
        # the op defines these gradients as 0 (not the derivative): assert that exactly,
        # then check the derivative with those elements held constant
        rng = np.random.default_rng(0)
        for out in outputs:
            out.backward(rng.standard_normal(out.shape), retain_graph=True)
        for leaf, mask in zip(leaves, frozen):
            if mask is not None:
                assert leaf.grad is not None
                assert np.all(leaf.grad[mask] == 0.0), f"{op.name}: frozen gradient not 0"
        constants = [tr.Tensor(a) for a in case.inputs]

        def fn(*xs: Any) -> Any:
            held = [x if m is None else tr.where(m, c, x)
                    for x, c, m in zip(xs, constants, frozen)]
            return op.fn(*held, **case.consts)
    else:
        def fn(*xs: Any) -> Any:
            return op.fn(*xs, **case.consts)

    atol = ATOL * _output_scale(outputs)
    tr.gradcheck(fn, leaves, eps=EPS, atol=atol, rtol=RTOL, mode="full")


def _make_test(op: OpInfo) -> Any:
    def test(case: Case) -> None:
        check_gradients(op, case)

    test.__name__ = test.__qualname__ = f"test_gradcheck_{op.name}"
    test.__doc__ = f"gradcheck (float64, full Jacobian) of {op.name}."
    for case in op.examples:
        test = example(case=case)(test)
    return given(case=op.cases)(test)


for _op in REGISTRY:
    globals()[f"test_gradcheck_{_op.name}"] = _make_test(_op)
del _op


def test_every_function_has_a_registry_entry() -> None:
    """Meta-test: a new primitive without a gradient test fails here."""
    covered = set()
    for op in REGISTRY:
        covered.update(op.functions)
    if not HAS_WIDE_FLOAT:
        # no float wider than float64 to cast to losslessly: Cast is then checked only
        # against float64 in test_ops_contract.py (test_cast_to_float32_vjp)
        covered.add(Cast)
    exported = exported_functions()
    missing = sorted(f.__name__ for f in exported - covered)
    assert not missing, f"Function subclasses with no registry entry: {missing}"
    # the scan itself must see the known primitives, or the check above would be vacuous
    assert {"Add", "Softmax", "CrossEntropy", "Copy", "Cast"} <= {
        f.__name__ for f in exported
    }

