"""Whole training steps of two real torch programs, run under torch and under tinygrad_rnn.

Issue 22's first goal: a training step of a whole program, not of one recurrent layer, within
1.3x of torch's. Two programs, each written once below and run twice, once with the torch
modules and once with ours (the same code; only the library object ``lib`` differs, which
is what renaming the imports does):

* ``word_lm``: the word-level language model of PyTorch's word_language_model example.
  Embedding -> dropout -> 2-layer LSTM (with dropout between the layers) -> dropout ->
  Linear with the embedding's weight (tied), cross entropy, ``clip_grad_norm_`` and SGD.
  The example's sizes: vocabulary 10,000, 200 embedding and hidden units, windows of
  35 steps, batch 20, dropout 0.2, clipping at 0.25, learning rate 20.
* ``seq2seq``: the "translation with a sequence to sequence network and attention"
  tutorial's model: a GRU encoder, a GRU decoder with Bahdanau (additive) attention over
  the encoder's outputs, fed the target (teacher forcing), log-softmax and NLLLoss, Adam.
  Vocabularies of 4,000 words, 256 units, batch 32, 12 source and 12 target steps.

Both start from the same weights (torch's, copied into ours through ``state_dict``) and the
same data. A check step with dropout off (``eval()``), before any update, must give the same
loss in both libraries (relative difference <= 1e-4), or the row says ``LOSS MISMATCH``.

Measured, in one process with 1 BLAS/OpenMP thread (set before NumPy and torch load) and
``torch.set_num_threads(1)``:

* **the ratio**: repetition r runs our step and torch's once each, in an order that
  alternates with r (``benchmarks/_harness.py::interleaved``); the printed ratio is the
  median over r of ``time_ours[r] / time_torch[r]`` (wall time, and CPU time beside it);
* **the breakdown** (further repetitions, interleaved the same way): the step's code calls
  a timer between its parts, and each part's time is the median over repetitions of the
  wall time spent in it: embedding lookup, dropout, the recurrent layers, attention (the
  seq2seq decoder), readout (the output Linear), loss, backward (all of it, one call),
  clipping, and the optimizer (``zero_grad`` and ``step``). The timer calls are left out of
  the ratio's repetitions (there every timer call is a no-op);
* **our backward by op** (``--backward-profile``, on by default): cProfile over our
  ``loss.backward()`` for a few more steps, each op class's ``backward`` with its
  cumulative time, and the rest ("engine") as the difference to the whole call. cProfile
  slows Python-heavy code more than array work, so read the shares, not the milliseconds.

Run ``python benchmarks/programs.py`` (full sizes) or ``--quick`` (smaller sizes, fewer
repetitions: about half a minute). See docs/performance.md for the results.
"""
from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    # BLAS and OpenMP read these once, when NumPy or torch first loads: set them before that
    for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                  "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS"):
        os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import cProfile  # noqa: E402
import importlib.util  # noqa: E402
import pstats  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, field, replace  # noqa: E402
from pathlib import Path  # noqa: E402
from types import SimpleNamespace  # noqa: E402
from typing import Any, Callable, Sequence  # noqa: E402

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import numpy as np  # noqa: E402

from benchmarks import _harness as hz  # noqa: E402
from benchmarks.recurrent import format_table  # noqa: E402
from tinygrad_rnn.malloc_tuning import keep_freed_memory  # noqa: E402

__all__ = ["Config", "QUICK", "PARTS", "libraries", "build", "run_program", "result_rows",
           "breakdown_rows", "backward_rows", "report", "main"]

#: The parts of a step, in the order the breakdown prints them.
PARTS = ("embedding", "dropout", "recurrent", "attention", "readout", "loss", "backward",
         "clipping", "optimizer")
LOSS_RTOL = 1e-4


@dataclass
class Config:
    """Sizes and repetitions. The defaults are issue 22's programs."""

    programs: list[str] = field(default_factory=lambda: ["word_lm", "seq2seq"])
    reps: int = 21                 # timed repetitions for the ratio
    part_reps: int = 9             # repetitions for the breakdown
    profile_steps: int = 3         # cProfile'd backward calls (0: no backward profile)
    # word_lm
    lm_vocab: int = 10_000
    lm_hidden: int = 200           # embedding size = hidden size (tied weights)
    lm_layers: int = 2
    lm_bptt: int = 35
    lm_batch: int = 20
    lm_dropout: float = 0.2
    lm_clip: float = 0.25
    lm_lr: float = 20.0
    # seq2seq
    s2s_src_vocab: int = 4_000
    s2s_tgt_vocab: int = 4_000
    s2s_hidden: int = 256
    s2s_batch: int = 32
    s2s_src_len: int = 12
    s2s_tgt_len: int = 12
    s2s_dropout: float = 0.1
    s2s_lr: float = 1e-3
    seed: int = 0


#: ``--quick``: the same programs at smaller sizes.
QUICK = dict(reps=9, part_reps=5, profile_steps=2, lm_vocab=2_000, lm_hidden=64, lm_bptt=20,
             s2s_src_vocab=1_000, s2s_tgt_vocab=1_000, s2s_hidden=64, s2s_src_len=8,
             s2s_tgt_len=8)


# ------------------------------------------------------------------------------ libraries
def libraries(torch: Any = None) -> dict[str, SimpleNamespace]:
    """The two libraries as namespaces with torch's module names: ``torch``, ``nn``, ``F``,
    ``optim``, ``clip_grad_norm_``. Ours is what ``import tinygrad_rnn as torch`` (and the
    other renamed imports) would give; torch's is left out when ``torch`` is None."""
    import tinygrad_rnn
    import tinygrad_rnn.nn
    import tinygrad_rnn.nn.functional
    import tinygrad_rnn.optim

    libs = {"ours": SimpleNamespace(torch=tinygrad_rnn, nn=tinygrad_rnn.nn,
                                    F=tinygrad_rnn.nn.functional, optim=tinygrad_rnn.optim,
                                    clip_grad_norm_=tinygrad_rnn.nn.utils.clip_grad_norm_)}
    if torch is not None:
        import torch.nn.functional
        import torch.nn.utils
        import torch.optim
        libs["torch"] = SimpleNamespace(torch=torch, nn=torch.nn, F=torch.nn.functional,
                                        optim=torch.optim,
                                        clip_grad_norm_=torch.nn.utils.clip_grad_norm_)
    return libs


class PartTimer:
    """``mark(name)`` adds the wall time since the previous mark to ``name``'s total."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}
        self.last = time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.totals[name] = self.totals.get(name, 0.0) + (now - self.last)
        self.last = now


def _no_mark(name: str) -> None:
    """The timer of the ratio's repetitions: does nothing."""


# ------------------------------------------------------------------------------ word_lm
def _word_lm(lib: SimpleNamespace, cfg: Config) -> SimpleNamespace:
    nn = lib.nn

    class RNNModel(nn.Module):
        """Encoder (Embedding), a stacked LSTM and a decoder (Linear) tied to the encoder."""

        def __init__(self, ntoken: int, ninp: int, nhid: int, nlayers: int,
                     dropout: float) -> None:
            super().__init__()
            self.ntoken = ntoken
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(ntoken, ninp)
            self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
            self.decoder = nn.Linear(nhid, ntoken)
            self.decoder.weight = self.encoder.weight
            nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
            nn.init.zeros_(self.decoder.bias)
            self.nlayers, self.nhid = nlayers, nhid

    model = RNNModel(cfg.lm_vocab, cfg.lm_hidden, cfg.lm_hidden, cfg.lm_layers, cfg.lm_dropout)
    criterion = nn.CrossEntropyLoss()
    optimizer = lib.optim.SGD(model.parameters(), lr=cfg.lm_lr)
    return SimpleNamespace(model=model, criterion=criterion, optimizer=optimizer,
                           modules={"model": model})


def _word_lm_data(cfg: Config, rng: np.random.Generator) -> dict[str, np.ndarray]:
    ids = rng.integers(0, cfg.lm_vocab, size=(cfg.lm_bptt + 1, cfg.lm_batch))  # (T+1, N)
    return {"data": ids[:-1], "targets": ids[1:].reshape(-1)}


def _word_lm_step(lib: SimpleNamespace, prog: SimpleNamespace, arrays: dict,
                  cfg: Config) -> Callable[..., Any]:
    torch = lib.torch
    model, criterion, optimizer = prog.model, prog.criterion, prog.optimizer
    data = torch.from_numpy(arrays["data"])
    targets = torch.from_numpy(arrays["targets"])
    shape = (cfg.lm_layers, cfg.lm_batch, cfg.lm_hidden)
    state = {"hidden": (torch.zeros(*shape), torch.zeros(*shape))}
    params = list(model.parameters())

    def step(mark: Callable[[str], None] = _no_mark, mode: str = "train") -> Any:
        hidden = tuple(h.detach() for h in state["hidden"])      # repackage_hidden
        optimizer.zero_grad()
        mark("optimizer")
        emb = model.encoder(data)                                  # (T, N, E)
        mark("embedding")
        emb = model.drop(emb)
        mark("dropout")
        output, hidden = model.rnn(emb, hidden)                    # (T, N, H)
        mark("recurrent")
        output = model.drop(output)
        mark("dropout")
        decoded = model.decoder(output).view(-1, model.ntoken)     # (T*N, V)
        mark("readout")
        loss = criterion(decoded, targets)
        mark("loss")
        if mode != "train":
            return loss.item() if mode == "eval" else loss
        loss.backward()
        mark("backward")
        lib.clip_grad_norm_(params, cfg.lm_clip)
        mark("clipping")
        optimizer.step()
        mark("optimizer")
        state["hidden"] = hidden
        return loss

    return step


# ------------------------------------------------------------------------------ seq2seq
def _seq2seq(lib: SimpleNamespace, cfg: Config) -> SimpleNamespace:
    torch, nn, F = lib.torch, lib.nn, lib.F

    class EncoderRNN(nn.Module):
        def __init__(self, input_size: int, hidden_size: int, dropout_p: float) -> None:
            super().__init__()
            self.embedding = nn.Embedding(input_size, hidden_size)
            self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
            self.dropout = nn.Dropout(dropout_p)

    class BahdanauAttention(nn.Module):
        def __init__(self, hidden_size: int) -> None:
            super().__init__()
            self.Wa = nn.Linear(hidden_size, hidden_size)
            self.Ua = nn.Linear(hidden_size, hidden_size)
            self.Va = nn.Linear(hidden_size, 1)

        def forward(self, query: Any, keys: Any) -> tuple[Any, Any]:
            scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))   # (N, S, 1)
            scores = scores.squeeze(2).unsqueeze(1)                         # (N, 1, S)
            weights = F.softmax(scores, dim=-1)
            context = torch.bmm(weights, keys)                              # (N, 1, H)
            return context, weights

    class AttnDecoderRNN(nn.Module):
        def __init__(self, hidden_size: int, output_size: int, dropout_p: float) -> None:
            super().__init__()
            self.embedding = nn.Embedding(output_size, hidden_size)
            self.attention = BahdanauAttention(hidden_size)
            self.gru = nn.GRU(2 * hidden_size, hidden_size, batch_first=True)
            self.out = nn.Linear(hidden_size, output_size)
            self.dropout = nn.Dropout(dropout_p)

    encoder = EncoderRNN(cfg.s2s_src_vocab, cfg.s2s_hidden, cfg.s2s_dropout)
    decoder = AttnDecoderRNN(cfg.s2s_hidden, cfg.s2s_tgt_vocab, cfg.s2s_dropout)
    params = list(encoder.parameters()) + list(decoder.parameters())
    return SimpleNamespace(encoder=encoder, decoder=decoder, criterion=nn.NLLLoss(),
                           optimizer=lib.optim.Adam(params, lr=cfg.s2s_lr),
                           modules={"encoder": encoder, "decoder": decoder})


def _seq2seq_data(cfg: Config, rng: np.random.Generator) -> dict[str, np.ndarray]:
    n = cfg.s2s_batch
    return {"source": rng.integers(2, cfg.s2s_src_vocab, size=(n, cfg.s2s_src_len)),
            "target": rng.integers(2, cfg.s2s_tgt_vocab, size=(n, cfg.s2s_tgt_len)),
            "sos": np.zeros((n, 1), dtype=np.int64)}


def _seq2seq_step(lib: SimpleNamespace, prog: SimpleNamespace, arrays: dict,
                  cfg: Config) -> Callable[..., Any]:
    torch, F = lib.torch, lib.F
    enc, dec = prog.encoder, prog.decoder
    source = torch.from_numpy(arrays["source"])                     # (N, S)
    target = torch.from_numpy(arrays["target"])                     # (N, T)
    sos = torch.from_numpy(arrays["sos"])                           # (N, 1)

    def step(mark: Callable[[str], None] = _no_mark, mode: str = "train") -> Any:
        prog.optimizer.zero_grad()
        mark("optimizer")
        embedded = enc.embedding(source)
        mark("embedding")
        embedded = enc.dropout(embedded)
        mark("dropout")
        keys, hidden = enc.gru(embedded)                            # (N, S, H), (1, N, H)
        mark("recurrent")
        decoder_input, outputs = sos, []
        for i in range(cfg.s2s_tgt_len):
            embedded = dec.embedding(decoder_input)                 # (N, 1, H)
            mark("embedding")
            embedded = dec.dropout(embedded)
            mark("dropout")
            query = hidden.permute(1, 0, 2)                         # (N, 1, H)
            context, _ = dec.attention(query, keys)
            input_gru = torch.cat((embedded, context), dim=2)       # (N, 1, 2H)
            mark("attention")
            output, hidden = dec.gru(input_gru, hidden)
            mark("recurrent")
            outputs.append(dec.out(output))                         # (N, 1, V)
            decoder_input = target[:, i].unsqueeze(1)               # teacher forcing
            mark("readout")
        decoder_outputs = torch.cat(outputs, dim=1)                 # (N, T, V)
        mark("readout")
        log_probs = F.log_softmax(decoder_outputs, dim=-1)
        loss = prog.criterion(log_probs.view(-1, log_probs.size(-1)), target.view(-1))
        mark("loss")
        if mode != "train":
            return loss.item() if mode == "eval" else loss
        loss.backward()
        mark("backward")
        prog.optimizer.step()
        mark("optimizer")
        return loss

    return step


PROGRAMS = {"word_lm": (_word_lm, _word_lm_data, _word_lm_step),
            "seq2seq": (_seq2seq, _seq2seq_data, _seq2seq_step)}


def build(name: str, libs: dict[str, SimpleNamespace], cfg: Config) -> dict[str, Any]:
    """Each library's step function for program ``name``, all from torch's initial weights
    (or, without torch, ours). Returns {library: step}; ``step(mark, mode)`` runs one
    training step (mode "train"), or the forward pass only: "forward" returns the loss
    tensor with its graph, "eval" the loss as a float."""
    make, make_data, make_step = PROGRAMS[name]
    arrays = make_data(cfg, np.random.default_rng(cfg.seed))
    progs, weights = {}, None
    for lib_name in sorted(libs, key=lambda n: n != "torch"):       # torch first
        lib = libs[lib_name]
        lib.torch.manual_seed(cfg.seed)
        prog = make(lib, cfg)
        if lib_name == "torch":
            weights = {key: {k: v.detach().cpu().numpy().copy()
                             for k, v in module.state_dict().items()}
                       for key, module in prog.modules.items()}
        elif weights is not None:
            for key, module in prog.modules.items():
                module.load_state_dict({k: lib.torch.tensor(v)
                                        for k, v in weights[key].items()})
        progs[lib_name] = make_step(lib, prog, arrays, cfg)
        progs[lib_name].modules = prog.modules
    return progs


def _set_train(step: Any, train: bool) -> None:
    for module in step.modules.values():
        module.train(train)


def check_losses(steps: dict[str, Any]) -> dict[str, float]:
    """Every library's loss of one forward pass with dropout off, before any update."""
    losses = {}
    for name, step in steps.items():
        _set_train(step, False)
        losses[name] = float(step(mode="eval"))
        _set_train(step, True)
    return losses


# ------------------------------------------------------------------------------ profiling
def _backward_profile(step: Any, steps: int) -> dict[str, float]:
    """Milliseconds per call of our ``loss.backward()`` by op class (the cumulative time of
    each ``Function.backward`` under cProfile), and the rest of the call as the engine's."""
    from tinygrad_rnn.ops.base import Function

    where: dict[tuple[str, int], str] = {}
    todo = list(Function.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        backward = cls.__dict__.get("backward")
        code = getattr(getattr(backward, "__func__", backward), "__code__", None)
        if code is not None:
            where[(code.co_filename, code.co_firstlineno)] = cls.__name__
    profiler = cProfile.Profile()
    whole = 0.0
    for _ in range(steps):
        loss = step(mode="forward")          # the graph of one step, dropout on
        t0 = time.perf_counter()
        profiler.enable()
        loss.backward()
        profiler.disable()
        whole += time.perf_counter() - t0
    out: dict[str, float] = {}
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    for (filename, line, func), (_cc, _nc, _tt, cumulative, _callers) in stats.items():
        name = where.get((filename, line))
        if func == "backward" and name is not None:
            out[name] = out.get(name, 0.0) + cumulative * 1e3 / steps
    out["engine (rest of backward)"] = max(whole * 1e3 / steps - sum(out.values()), 0.0)
    return out


# ------------------------------------------------------------------------------ running
def run_program(name: str, cfg: Config, torch: Any = None,
                progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Time program ``name``: the ratio's repetitions, the breakdown and our backward
    profile. Returns a record (plain data) for :func:`result_rows` and friends."""
    libs = libraries(torch)
    steps = build(name, libs, cfg)
    losses = check_losses(steps)
    ref = losses.get("torch", losses["ours"])
    loss_ok = all(abs(v - ref) <= LOSS_RTOL * abs(ref) for v in losses.values())
    timing = hz.interleaved([(k, steps[k]) for k in sorted(steps, key=lambda n: n != "ours")],
                            reps=cfg.reps, warmup=1, progress=progress)
    parts: dict[str, dict[str, list[float]]] = {k: {} for k in steps}

    def timed(lib_name: str) -> Callable[[], None]:
        def run() -> None:
            timer = PartTimer()
            steps[lib_name](mark=timer)
            for part, seconds in timer.totals.items():
                parts[lib_name].setdefault(part, []).append(seconds * 1e3)
        return run

    hz.interleaved([(k, timed(k)) for k in steps], reps=cfg.part_reps, warmup=0)
    backward = _backward_profile(steps["ours"], cfg.profile_steps) if cfg.profile_steps else {}
    return {"program": name, "losses": losses, "loss_ok": loss_ok,
            "wall_ms": {k: t.wall_ms for k, t in timing.items()},
            "cpu_ms": {k: t.cpu_ms for k, t in timing.items()},
            "parts_ms": parts, "backward_ms": backward}


def result_rows(records: Sequence[dict]) -> list[dict[str, str]]:
    """One row per program: medians and the median paired ratio, wall and CPU time."""
    rows = []
    for rec in records:
        ours, theirs = rec["wall_ms"]["ours"], rec["wall_ms"].get("torch")
        row = {"program": rec["program"], "ours ms": f"{hz.median(ours):.2f}",
               "torch ms": "-", "x torch": "-", "cpu x torch": "-", "reps": str(len(ours)),
               "target": "<= 1.30x", "check": ""}
        if theirs is not None:
            ratio = hz.paired_ratio(ours, theirs)
            row["torch ms"] = f"{hz.median(theirs):.2f}"
            row["x torch"] = f"{ratio:.2f}x"
            cpu = hz.paired_ratio(rec["cpu_ms"]["ours"], rec["cpu_ms"]["torch"])
            row["cpu x torch"] = f"{cpu:.2f}x"
            if not rec["loss_ok"]:
                row["check"] = "LOSS MISMATCH " + ", ".join(
                    f"{k} {v:.6g}" for k, v in rec["losses"].items())
            else:
                row["check"] = ("PASS" if ratio <= 1.3 else "MISS") + f" ({ratio:.2f}x)"
        rows.append(row)
    return rows


def breakdown_rows(record: dict) -> list[dict[str, str]]:
    """One row per part of the step: each library's median ms and their ratio."""
    parts = record["parts_ms"]
    has_torch = "torch" in parts
    rows = []
    for part in PARTS:
        if part not in parts["ours"]:
            continue
        ours = parts["ours"][part]
        row = {"part": part, "ours ms": f"{hz.median(ours):.2f}"}
        if has_torch:
            theirs = parts["torch"].get(part, [])
            row["torch ms"] = f"{hz.median(theirs):.2f}" if theirs else "-"
            row["ours - torch ms"] = (f"{hz.median(ours) - hz.median(theirs):+.2f}"
                                      if theirs else "-")
            row["x torch"] = (f"{hz.paired_ratio(ours, theirs):.2f}x"
                              if theirs and min(theirs) > 0 else "-")
        rows.append(row)
    return rows


def backward_rows(record: dict, top: int = 8) -> list[dict[str, str]]:
    """Our backward by op class, the largest first (``top`` of them, then the rest)."""
    items = sorted(record["backward_ms"].items(), key=lambda kv: -kv[1])
    total = sum(v for _, v in items) or 1.0
    shown, rest = items[:top], items[top:]
    if rest:
        shown.append((f"{len(rest)} other ops", sum(v for _, v in rest)))
    return [{"op backward (cProfile)": k, "ms": f"{v:.2f}", "share": f"{100 * v / total:.0f}%"}
            for k, v in shown]


def report(records: Sequence[dict], info: dict[str, str], command: str,
           markdown: bool = False) -> str:
    """The whole printed report: header, the ratio table, a breakdown per program."""
    lines = [f"# {command}", "# " + ", ".join(f"{k}: {v}" for k, v in info.items()), "",
             format_table(result_rows(records), markdown), ""]
    for rec in records:
        lines += [f"## {rec['program']}: the step by part (median ms of "
                  f"{len(next(iter(rec['parts_ms']['ours'].values())))} timed steps)", "",
                  format_table(breakdown_rows(rec), markdown), ""]
        if rec["backward_ms"]:
            lines += [f"## {rec['program']}: our backward by op", "",
                      format_table(backward_rows(rec), markdown), ""]
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller sizes, fewer repetitions")
    p.add_argument("--programs", nargs="+", choices=sorted(PROGRAMS),
                   default=["word_lm", "seq2seq"])
    p.add_argument("--reps", type=int, help="timed repetitions for the ratio")
    p.add_argument("--no-torch", action="store_true", help="only our numbers")
    p.add_argument("--markdown", action="store_true", help="Markdown tables")
    return p


def config_from_args(args: argparse.Namespace) -> Config:
    cfg = Config(programs=list(args.programs))
    if args.quick:
        cfg = replace(cfg, **QUICK)  # type: ignore[arg-type]
    if args.reps:
        cfg = replace(cfg, reps=args.reps)
    return cfg


def main(argv: Sequence[str] | None = None) -> int:
    """Parse flags, run each program, print the report."""
    args = _parser().parse_args(argv)
    keep_freed_memory()  # freed memory stays for the next step (tinygrad_rnn/malloc_tuning.py)
    cfg = config_from_args(args)
    torch = None
    if not args.no_torch and importlib.util.find_spec("torch") is not None:
        import torch
        torch.set_num_threads(1)
    info = hz.machine_info(torch)
    info["BLAS threads"] = str(hz.blas_threads())
    if torch is not None:
        info["torch threads"] = str(torch.get_num_threads())
    records = []
    for name in cfg.programs:
        print(f"[programs] {name} ...", file=sys.stderr, flush=True)
        records.append(run_program(name, cfg, torch))
    shown = list(sys.argv[1:] if argv is None else argv)
    info["load"] = info.get("load", "?") + f" (start) / {hz.machine_info()['load']} (end)"
    print(report(records, info, " ".join(["python benchmarks/programs.py", *shown]),
                 args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
