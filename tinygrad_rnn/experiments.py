"""The experiments a sweep can run (``tinygrad-rnn sweep``, :mod:`tinygrad_rnn.sweep`).

An experiment is a function ``run(params, seed, run) -> results``: it builds everything it
needs from ``params`` (a dict holding every parameter, defaults filled in) and from one
``seed`` (all its random draws: the initial weights, the data, the batches), writes its
metrics into the run folder ``run`` (a :class:`tinygrad_rnn.runs.RunWriter`) and returns
its results as a dict of numbers. The same params and seed give the same results, in any
process on any machine with the same library versions (one BLAS thread).

Registered here:

``adding``
    the adding problem (Hochreiter & Schmidhuber 1997): an RNN/GRU/LSTM reads T steps of
    (value, marker) and predicts the sum of the two marked values; results ``test_mse``
    (against ``baseline`` 1/6, always predicting 1) and ``final_loss``.
``copy``
    the copy problem: reproduce ``length`` symbols after ``delay`` blanks; results
    ``test_loss`` (cross entropy per step, against ``baseline`` = length log(symbols) / T)
    and ``copy_accuracy`` (the copied symbols read back right).
``vanishing``
    the vanishing-gradient measurement at initialisation: ||dL/dh_t|| with the loss on the
    last step of the adding problem; results ``decay_rate`` (fitted factor per step),
    ``horizon`` (steps back until the norm falls below 1% of its last value), ``dh_first``
    and ``dh_last``. No training.
``char_lm``
    a character language model on Python's own documentation (chunked TBPTT); result
    ``test_ppl`` (perplexity per character on the test split).

Add your own with :func:`register`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from . import functional as F
from . import monitor as mon
from . import nn, optim
from .data import AddingBaseline, adding_problem, copy_problem
from .engine import no_grad
from .tensor import Tensor
from .training import fit, train_stream

__all__ = ["Experiment", "EXPERIMENTS", "register"]

CELLS = ("lstm", "gru", "rnn", "relu")


@dataclass(frozen=True)
class Experiment:
    """A registered experiment.

    ``defaults`` holds every parameter with its default value; a value's type is the
    parameter's type (an int parameter refuses 2.5, a float one takes 2). ``choices`` lists
    the allowed values of a parameter where only some are. ``metric`` is the result the
    summary table and figure show (smaller is better: ``lower_is_better``), ``x`` and
    ``line`` the parameters the figure puts on its x axis and draws as separate lines."""

    name: str
    run: Callable[[dict, int, Any], dict]
    defaults: Mapping[str, Any]
    choices: Mapping[str, tuple] = field(default_factory=dict)
    metric: str = "loss"
    x: str | None = None
    line: str | None = None
    description: str = ""


EXPERIMENTS: dict[str, Experiment] = {}


def register(experiment: Experiment) -> Experiment:
    """Add ``experiment`` to the registry under its name (replacing one of that name).
    Points run in other processes (``workers > 1``, Dask) look the name up there, so
    register it in a module those processes import (one of yours, imported by the config's
    experiment module, or this one)."""
    if not isinstance(experiment, Experiment):
        raise TypeError(f"register: expected an Experiment, got {type(experiment).__name__}")
    EXPERIMENTS[experiment.name] = experiment
    return experiment


# ----------------------------------------------------------------------------- models
class Regressor(nn.Module):
    """A recurrent layer (batch first) with a linear readout of its last hidden state (of
    every state with ``every_step=True``). ``rho > 0`` makes an Elman RNN's W_hh a random
    orthogonal matrix scaled to spectral radius ``rho``; 0 keeps the default init."""

    def __init__(self, cell: str, input_size: int, hidden: int, outputs: int,
                 generator: np.random.Generator, rho: float = 0.0) -> None:
        super().__init__()
        if rho > 0 and cell in ("lstm", "gru"):
            raise ValueError(f"Regressor: rho={rho} sets the spectral radius of an Elman "
                             f"RNN's W_hh (cell 'rnn' or 'relu'); the {cell.upper()}'s "
                             f"recurrent weight stacks one block per gate, so leave rho at 0 "
                             f"for cell={cell!r}")
        self.rnn: Any  # an LSTM, GRU or RNN
        if cell == "lstm":
            self.rnn = nn.LSTM(input_size, hidden, batch_first=True, forget_bias=1.0,
                               generator=generator)
        elif cell == "gru":
            self.rnn = nn.GRU(input_size, hidden, batch_first=True, generator=generator)
        else:
            self.rnn = nn.RNN(input_size, hidden, nonlinearity="relu" if cell == "relu"
                              else "tanh", batch_first=True, generator=generator)
            if rho > 0:  # an orthogonal W_hh scaled to spectral radius rho
                nn.init.orthogonal_(self.rnn.weight_hh_l0, generator=generator)
                with no_grad():
                    self.rnn.weight_hh_l0.mul_(rho)
        self.readout = nn.Linear(hidden, outputs, generator=generator)

    def forward(self, x: Tensor, every_step: bool = False) -> Tensor:
        out, _ = self.rnn(x)  # (N, T, H)
        return self.readout(out if every_step else out[:, -1])


# ----------------------------------------------------------------------------- adding
def _adding(p: dict, seed: int, run: Any) -> dict:
    rng = np.random.default_rng(seed)
    model = Regressor(p["cell"], 2, p["hidden"], 1, rng, p["rho"])
    opt = optim.Adam(model.parameters(), lr=p["lr"])
    monitor = mon.GradientMonitor(model) if p["monitor"] else None
    x_test, y_test = adding_problem(p["n_test"], p["T"], generator=rng)

    def step(i: int) -> Tensor:
        x, y = adding_problem(p["batch"], p["T"], generator=rng)
        return F.mse_loss(model(Tensor(x)), Tensor(y))

    result = fit(step, p["steps"], opt, clip=p["clip"] or None, monitor=monitor,
                 progress=False, run_dir=run)
    with no_grad():
        test = F.mse_loss(model(Tensor(x_test)), Tensor(y_test)).item()
    return {"test_mse": float(test), "final_loss": float(np.mean(result.losses[-10:])),
            "baseline": AddingBaseline}


register(Experiment(
    "adding", _adding,
    defaults={"cell": "lstm", "T": 50, "hidden": 32, "steps": 500, "batch": 64, "lr": 1e-2,
              "clip": 1.0, "rho": 0.0, "n_test": 1000, "monitor": False},
    choices={"cell": CELLS}, metric="test_mse", x="T", line="cell",
    description="the adding problem: test MSE (predicting 1 gives 1/6)"))


# ----------------------------------------------------------------------------- copy
def _copy(p: dict, seed: int, run: Any) -> dict:
    rng = np.random.default_rng(seed)
    V = p["num_symbols"] + 2
    model = Regressor(p["cell"], V, p["hidden"], V, rng, p["rho"])
    opt = optim.Adam(model.parameters(), lr=p["lr"])
    eye = np.eye(V, dtype=np.float32)

    def loss_of(x: np.ndarray, y: np.ndarray) -> Tensor:
        logits = model(Tensor(eye[x]), every_step=True)  # (N, T, V)
        return F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))

    def step(i: int) -> Tensor:
        x, y, _ = copy_problem(p["batch"], p["delay"], p["length"], p["num_symbols"],
                               generator=rng)
        return loss_of(x, y)

    fit(step, p["steps"], opt, clip=p["clip"] or None, progress=False, run_dir=run)
    x, y, _ = copy_problem(p["n_test"], p["delay"], p["length"], p["num_symbols"],
                           generator=rng)
    with no_grad():
        test = loss_of(x, y).item()
        guess = model(Tensor(eye[x]), every_step=True).numpy().argmax(-1)
    T = x.shape[1]
    copied = float((guess[:, -p["length"]:] == y[:, -p["length"]:]).mean())
    return {"test_loss": float(test), "copy_accuracy": copied,
            "baseline": p["length"] * float(np.log(p["num_symbols"])) / T}


register(Experiment(
    "copy", _copy,
    defaults={"cell": "lstm", "delay": 20, "length": 5, "num_symbols": 8, "hidden": 32,
              "steps": 500, "batch": 64, "lr": 1e-2, "clip": 1.0, "rho": 0.0,
              "n_test": 500},
    choices={"cell": CELLS}, metric="test_loss", x="delay", line="cell",
    description="the copy problem: cross entropy per step and accuracy of the copy"))


# ----------------------------------------------------------------------------- vanishing
def _vanishing(p: dict, seed: int, run: Any) -> dict:
    rng = np.random.default_rng(seed)
    model = Regressor(p["cell"], 2, p["hidden"], 1, rng, p["rho"])
    monitor = mon.GradientMonitor(model)
    x, y = adding_problem(p["batch"], p["T"], generator=rng)
    loss = F.mse_loss(model(Tensor(x)), Tensor(y))  # the loss at the last step only
    loss.backward()
    monitor.record()
    norms = monitor.state_norms()[-1]  # (T,): ||dL/dh_t||
    total = float(monitor.global_norms()[0][-1])
    if run is not None:
        run.log(loss.item(), grad_norm=total, clipped_norm=total, lr=0.0,
                state_norms={("rnn", 0, 0, "h"): norms})
    by_distance = norms[::-1][1:]  # distance 1, 2, ... back from the last step
    usable = by_distance[(by_distance > 1e-300) & np.isfinite(by_distance)]
    rate = mon.fit_decay_rate(usable) if usable.size >= 2 else float("nan")
    return {"decay_rate": float(rate), "horizon": int(mon.gradient_horizon(norms, 1e-2)),
            "dh_first": float(norms[0]), "dh_last": float(norms[-1])}


register(Experiment(
    "vanishing", _vanishing,
    defaults={"cell": "rnn", "rho": 1.0, "T": 50, "hidden": 32, "batch": 32},
    choices={"cell": CELLS}, metric="decay_rate", x="rho", line="cell",
    description="||dL/dh_t|| at initialisation: fitted decay rate and gradient horizon"))


# ----------------------------------------------------------------------------- char LM
def _char_lm(p: dict, seed: int, run: Any) -> dict:
    from .data import char_corpus, lm_stream
    from .lm import RNNLM, evaluate_perplexity, lm_loss
    from .truncation import chunked

    corpus = char_corpus(max_chars=p["max_chars"])
    model = RNNLM(len(corpus.vocab), p["emb"], p["hidden"], cell=p["cell"], generator=seed)
    x, y = lm_stream(corpus.train, batch_size=p["batch"])  # (N, L) contiguous streams
    opt = optim.Adam(model.parameters(), lr=p["lr"])

    def loss_fn(logits: Tensor, start: int, stop: int) -> Tensor:
        return lm_loss(logits, y[:, start:stop])

    result = train_stream(model, x, loss_fn, opt, chunked(p["bptt"]), epochs=p["epochs"],
                          clip=p["clip"] or None, time_axis=1, progress=False, run_dir=run)
    model.eval()
    ppl = evaluate_perplexity(model.token_log_probs, corpus.test[:p["n_eval"]])
    return {"test_ppl": float(ppl), "final_loss": float(np.mean(result.losses[-10:]))}


register(Experiment(
    "char_lm", _char_lm,
    defaults={"cell": "lstm", "hidden": 64, "emb": 32, "bptt": 32, "epochs": 1,
              "batch": 32, "lr": 5e-3, "clip": 1.0, "max_chars": 50_000, "n_eval": 5_000},
    choices={"cell": ("lstm", "gru", "rnn")}, metric="test_ppl", x="hidden", line="cell",
    description="a character LM on Python's documentation: test perplexity"))
