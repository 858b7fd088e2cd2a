r"""Text generation from a language model: greedy decoding and sampling with temperature and
top-k.

At each step the model gives logits z (V,) for the next token, and the token is chosen by:

(D1)  greedy:        w = argmax_v z_v
(D2)  sample:        w ~ q,   q_v = exp(z_v / tau) / sum_{u in K} exp(z_u / tau)  for v in K,
                     q_v = 0 otherwise

with temperature tau > 0 and K the ``top_k`` largest logits (all V when ``top_k`` is None).
As tau -> 0, q puts all its mass on the argmax, so sampling becomes greedy decoding; as
tau -> infinity, q tends to the uniform distribution over K. top_k = 1 is greedy decoding.

A recurrent LM reads the prompt once and then carries its hidden state one token at a time;
a feed-forward LM slides its window of n - 1 ids. Any model with the two methods of that
protocol works:

* ``prime(prompt_ids) -> (logits (V,), state)``: the next-token logits after the prompt;
* ``advance(token_id, state) -> (logits (V,), state)``: feed one chosen token.

Generation runs in eval mode (no dropout) under ``tr.no_grad()``, and puts every module's
training flag back afterwards.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..nn.classify import _Inference
from ..random import get_generator

__all__ = ["generate", "sample_logits", "STRATEGIES"]

#: The decoding strategies of :func:`generate`.
STRATEGIES = ("greedy", "sample")


def check_temperature(temperature: Any, where: str,
                      greedy: str = "strategy='greedy'") -> float:
    """tau of (D2) as a float: a finite number > 0 (TypeError for a non-number, ValueError
    otherwise). ``greedy`` names the caller's greedy alternative, the tau -> 0 limit.
    Shared by :func:`generate`, :func:`sample_logits` and
    :func:`tinygrad_rnn.decoding.sample_decode`."""
    if isinstance(temperature, np.ndarray) and temperature.ndim == 0:
        temperature = temperature[()]  # a 0-d array of a number, as the other knobs take
    if isinstance(temperature, (bool, np.bool_)) or not isinstance(
            temperature, (int, float, np.integer, np.floating)):
        raise TypeError(f"{where}: temperature must be a number, got "
                        f"{type(temperature).__name__}")
    tau = float(temperature)
    if not (tau > 0 and math.isfinite(tau)):
        raise ValueError(f"{where}: temperature must be a finite number > 0, got {temperature!r}"
                         f" (use {greedy} for the tau -> 0 limit)")
    return tau


def check_top_k(top_k: Any, V: int, where: str) -> int:
    """k of (D2): None means all V ids; otherwise an integer in [1, V] (not a bool)."""
    if top_k is None:
        return V
    if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) \
            or not 1 <= top_k <= V:
        raise ValueError(f"{where}: top_k must be None or an integer in [1, V] = [1, {V}], "
                         f"got {top_k!r}")
    return int(top_k)


def top_k_mask(z: Any, k: int, xp: Any = np) -> Any:
    """(N, V) bool, True at exactly the ``k`` largest entries of each row of ``z`` (N, V),
    ties broken towards the lower id; ``xp`` is the array module of ``z`` (NumPy or CuPy).

    With the k-th largest value ``kth`` of a row, every entry above ``kth`` is kept, and of
    the entries equal to ``kth`` the first ``k - (number above)`` in id order."""
    kth = xp.sort(z, axis=-1)[:, -k][:, None]                        # (N, 1)
    above = z > kth
    tied = z == kth
    room = k - above.sum(axis=-1, keepdims=True)                      # tied entries that fit
    return above | (tied & (xp.cumsum(tied, axis=-1) <= room))


def _log_softmax(z: np.ndarray) -> np.ndarray:
    """log softmax along the last axis, float64, log-sum-exp form."""
    peak = np.max(z, axis=-1, keepdims=True)
    shifted = z - peak
    return shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))


def sample_rows(z: Any, tau: float, k: int, u: Any, xp: Any = np) -> Any:
    """One draw of (D2) per row of float64 logits ``z`` (N, V), on their device.

    ``u`` (N,) are uniform numbers in [0, 1) on the same device as ``z``: the draw is the
    first id whose cumulative probability exceeds ``u`` times the row's total (inverse CDF),
    so an id outside the top k (probability 0) is never drawn. Returns the ids (N,).
    Shared by :func:`sample_logits` and :func:`tinygrad_rnn.decoding.sample_decode`.
    """
    scaled = z / tau
    if k < z.shape[-1]:
        scaled = xp.where(top_k_mask(z, k, xp), scaled, -np.inf)
    scaled = scaled - scaled.max(axis=-1, keepdims=True)              # max-shifted softmax
    q = xp.exp(scaled)                                                # (N, V), unnormalised
    cdf = xp.cumsum(q, axis=-1)
    threshold = u * cdf[:, -1]                                        # (N,) in [0, total)
    return xp.argmax(cdf > threshold[:, None], axis=-1)


def sample_logits(logits: Any, strategy: str = "sample", temperature: float = 1.0,
                  top_k: int | None = None, generator: Any = None) -> Any:
    """Choose token ids from logits by (D1) or (D2).

    Parameters
    ----------
    logits : array-like (V,) or (N, V)
        Unnormalised scores (a Tensor is accepted); one draw per row.
    strategy : {'greedy', 'sample'}
    temperature : float
        tau > 0 of (D2); checked for both strategies, used by sampling only.
    top_k : int, optional
        Sample among exactly the k largest logits (ties broken towards the lower id).
    generator : int, numpy Generator or None
        The source of the draws (one uniform number per row).

    Returns
    -------
    int for (V,) logits, an int64 array (N,) for (N, V).
    """
    where = "sample_logits"
    if strategy not in STRATEGIES:
        raise ValueError(f"{where}: strategy must be one of {STRATEGIES}, got {strategy!r}")
    tau = check_temperature(temperature, where)
    z = np.asarray(logits.numpy() if hasattr(logits, "numpy") else logits)
    if z.dtype.kind not in "biuf":
        raise TypeError(f"{where}: logits must be an array of real numbers, got "
                        f"{type(logits).__name__} of dtype {z.dtype}")
    z = z.astype(np.float64)
    if z.ndim not in (1, 2) or z.shape[-1] == 0:
        raise ValueError(f"{where}: expected logits of shape (V,) or (N, V) with V >= 1, got "
                         f"{z.shape}")
    if np.isnan(z).any() or (z == np.inf).any():
        raise ValueError(f"{where}: logits contain NaN or +inf")
    if (z == -np.inf).all(axis=-1).any():
        raise ValueError(f"{where}: a row of logits is all -inf (no token has probability)")
    k = check_top_k(top_k, z.shape[-1], where)
    single = z.ndim == 1
    rows = z[None] if single else z                                   # (N, V)
    if strategy == "greedy":
        chosen = rows.argmax(axis=-1)
    else:
        rng = get_generator(generator)
        chosen = sample_rows(rows, tau, k, rng.random(rows.shape[0]))
    chosen = chosen.astype(np.int64)
    return int(chosen[0]) if single else chosen


def generate(model: Any, prompt_ids: Any, max_new_tokens: int, strategy: str = "greedy",
             temperature: float = 1.0, top_k: int | None = None, eos_id: int | None = None,
             generator: Any = None, return_log_probs: bool = False) -> Any:
    """Continue ``prompt_ids`` with up to ``max_new_tokens`` ids from ``model``.

    Parameters
    ----------
    model : RNNLM, FeedForwardLM, or any model with ``prime``/``advance`` and ``vocab_size``
    prompt_ids : 1-D ids
        At least one id, each in [0, V) (start from ``[BOS_ID]`` to generate from nothing).
    max_new_tokens : int
        The most ids to generate (>= 0).
    strategy : {'greedy', 'sample'}
        (D1) or (D2) of the module docstring.
    temperature : float
        tau > 0 for sampling.
    top_k : int, optional
        Sample among the k most probable ids, 1 <= k <= V.
    eos_id : int, optional
        Stop after generating this id (e.g. ``EOS_ID`` for ``</s>``), which is included in the
        result. None (the default) always generates ``max_new_tokens`` ids.
    generator : int, numpy Generator or None
        Seed of the draws: the same seed gives the same continuation.
    return_log_probs : bool
        Also return, for every generated id, its log-probability under the model itself
        (log softmax of the raw logits: temperature 1, no top-k), so that their sum is the
        model's log-likelihood of the continuation given the prompt.

    Returns
    -------
    ids : int64 array (M,), M <= max_new_tokens: the generated ids only, without the prompt.
    log_probs : float64 array (M,), when ``return_log_probs``.

    Examples
    --------
    >>> import numpy as np
    >>> from tinygrad_rnn.lm import RNNLM
    >>> model = RNNLM(8, 6, 6, cell='gru', generator=0)
    >>> ids = generate(model, [2, 4], 5, strategy='sample', temperature=0.8, generator=1)
    >>> ids.shape, bool(np.array_equal(ids, generate(model, [2, 4], 5, strategy='sample',
    ...                                                temperature=0.8, generator=1)))
    ((5,), True)
    """
    where = "generate"
    if not isinstance(return_log_probs, (bool, np.bool_)):
        raise TypeError(f"{where}: return_log_probs must be True or False, got "
                        f"{return_log_probs!r} ({type(return_log_probs).__name__})")
    if not (hasattr(model, "prime") and hasattr(model, "advance")
            and hasattr(model, "vocab_size")):
        raise TypeError(f"{where}: the model needs prime(prompt_ids), advance(token_id, state) "
                        f"and vocab_size (RNNLM and FeedForwardLM have them); got "
                        f"{type(model).__name__}")
    V = int(model.vocab_size)
    if strategy not in STRATEGIES:
        raise ValueError(f"{where}: strategy must be one of {STRATEGIES}, got {strategy!r}")
    tau = check_temperature(temperature, where)
    k = check_top_k(top_k, V, where)
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int, np.integer)) \
            or max_new_tokens < 0:
        raise ValueError(f"{where}: max_new_tokens must be an integer >= 0, got "
                         f"{max_new_tokens!r}")
    prompt = np.asarray(prompt_ids.numpy() if hasattr(prompt_ids, "numpy") else prompt_ids)
    if prompt.ndim != 1 or prompt.size == 0:
        raise ValueError(f"{where}: prompt_ids must be a non-empty 1-D sequence of ids, got "
                         f"shape {prompt.shape} (start from [BOS_ID] to generate from "
                         f"nothing)")
    if prompt.dtype.kind not in "iu":
        raise TypeError(f"{where}: prompt ids must be integers, got dtype {prompt.dtype}")
    bad = np.flatnonzero((prompt < 0) | (prompt >= V))
    if bad.size:
        raise IndexError(f"{where}: prompt id {int(prompt[bad[0]])} at position {int(bad[0])} "
                         f"is out of range for vocabulary size {V}")
    if eos_id is not None and (isinstance(eos_id, bool)
                               or not isinstance(eos_id, (int, np.integer))
                               or not 0 <= eos_id < V):
        raise ValueError(f"{where}: eos_id must be None or an id in [0, {V}), got {eos_id!r}")
    rng = get_generator(generator)
    ids: list[int] = []
    log_probs: list[float] = []
    if max_new_tokens > 0:
        with _Inference(model):
            logits, state = model.prime(prompt.astype(np.int64))
            for step in range(int(max_new_tokens)):
                z = np.asarray(logits, dtype=np.float64)              # (V,)
                token = sample_logits(z, strategy, tau, k, rng)
                ids.append(token)
                log_probs.append(float(_log_softmax(z)[token]))
                if eos_id is not None and token == eos_id:
                    break
                if step + 1 < max_new_tokens:
                    logits, state = model.advance(token, state)
    out = np.array(ids, dtype=np.int64)
    if return_log_probs:
        return out, np.array(log_probs, dtype=np.float64)
    return out
