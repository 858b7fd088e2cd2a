"""How the fused backward kernels use memory, checked on their results.

* ``state_grads=False`` returns None for ``dh_all`` (and ``dc_all``) and every other gradient
  exactly (bit for bit) as with ``state_grads=True``;
* the block size of the backward loop (``_layout.CHUNK_ELEMS``) changes no bit of any result:
  one step per block, a few steps, and all steps in one block agree exactly;
* backward only reads its cache: the cache arrays are unchanged afterwards, and a second
  backward on the same cache gives exactly the same gradients (what ``retain_graph=True``
  relies on).

Every family and variant runs with biases, variable lengths (including a zero length) and
both directions, in float32 and float64, small sizes.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable

import numpy as np
import pytest

import tinygrad_rnn.bptt._layout as layout
from tinygrad_rnn.bptt import (
    gru_backward, gru_forward, lstm_backward, lstm_forward, rnn_backward, rnn_forward,
)

VARIANTS = ["rnn-tanh", "rnn-relu", "gru-after", "gru-before", "lstm", "lstm-peephole",
            "lstm-coupled", "lstm-peephole-coupled"]


def _run(variant: str, dtype: type, lengths: Any, reverse: bool,
         seed: int = 0) -> tuple[Any, Callable[..., Any], tuple]:
    """Forward one sequence (T=7, N=3, D=4, H=5); return the cache, the backward function
    and its upstream gradients (dhs, dh_n[, dc_n])."""
    rng = np.random.default_rng(seed)
    T, N, D, H = 7, 3, 4, 5
    family = variant.split("-")[0]
    coupled = "coupled" in variant
    G = {"rnn": 1, "gru": 3}.get(family, 3 if coupled else 4)

    def r(*shape: int) -> np.ndarray:
        return (0.6 * rng.standard_normal(shape)).astype(dtype)

    x, h0, w_ih, w_hh, b_ih, b_hh = r(T, N, D), r(N, H), r(G * H, D), r(G * H, H), r(G * H), \
        r(G * H)
    common_kw = dict(lengths=lengths, reverse=reverse)
    if family == "rnn":
        *_, cache = rnn_forward(x, h0, w_ih, w_hh, b_ih, b_hh,
                                nonlinearity=variant.split("-")[1], **common_kw)
        return cache, rnn_backward, (r(T, N, H), r(N, H))
    if family == "gru":
        *_, cache = gru_forward(x, h0, w_ih, w_hh, b_ih, b_hh, reset=variant.split("-")[1],
                                **common_kw)
        return cache, gru_backward, (r(T, N, H), r(N, H))
    w_ch = r((G - 1) * H) if "peephole" in variant else None
    *_, cache = lstm_forward(x, h0, r(N, H), w_ih, w_hh, b_ih, b_hh, weight_ch=w_ch,
                             coupled=coupled, **common_kw)
    return cache, lstm_backward, (r(T, N, H), r(N, H), r(N, H))


def _assert_grads_identical(a: Any, b: Any, skip: tuple = ()) -> None:
    for name in a._fields:
        if name in skip:
            continue
        u, v = getattr(a, name), getattr(b, name)
        assert (u is None) == (v is None), name
        if u is not None:
            assert u.dtype == v.dtype and u.shape == v.shape, name
            np.testing.assert_array_equal(u, v, err_msg=name)


CASES = list(itertools.product(VARIANTS, [np.float32, np.float64],
                               [None, [7, 0, 4]], [False, True]))


@pytest.mark.parametrize("variant,dtype,lengths,reverse", CASES)
def test_state_grads_false_drops_only_the_per_step_state_gradients(
        variant: str, dtype: type, lengths: Any, reverse: bool) -> None:
    cache, backward, ups = _run(variant, dtype, lengths, reverse)
    full = backward(*ups, cache)
    lean = backward(*ups, cache, state_grads=False)
    state_fields = ("dh_all", "dc_all") if variant.startswith("lstm") else ("dh_all",)
    for name in state_fields:
        assert getattr(full, name) is not None and getattr(lean, name) is None
    _assert_grads_identical(full, lean, skip=state_fields)


@pytest.mark.parametrize("variant,dtype,lengths,reverse", CASES)
def test_block_size_of_the_backward_loop_changes_no_bit(
        variant: str, dtype: type, lengths: Any, reverse: bool,
        monkeypatch: pytest.MonkeyPatch) -> None:
    cache, backward, ups = _run(variant, dtype, lengths, reverse)
    results = []
    for elems in (1, 3 * 5 * 4 * 2, 1 << 40):   # one step, a few steps, all steps per block
        monkeypatch.setattr(layout, "CHUNK_ELEMS", elems)
        results.append(backward(*ups, cache))
    for other in results[1:]:
        _assert_grads_identical(results[0], other)


@pytest.mark.parametrize("variant,dtype,lengths,reverse", CASES)
def test_backward_leaves_its_cache_unchanged_and_repeats_exactly(
        variant: str, dtype: type, lengths: Any, reverse: bool) -> None:
    cache, backward, ups = _run(variant, dtype, lengths, reverse)
    before = {name: np.array(v, copy=True) for name, v in cache._asdict().items()
              if isinstance(v, np.ndarray)}
    first = backward(*ups, cache, state_grads=False)
    for name, v in before.items():
        np.testing.assert_array_equal(getattr(cache, name), v, err_msg=f"cache.{name}")
    second = backward(*ups, cache, state_grads=False)
    _assert_grads_identical(first, second)
