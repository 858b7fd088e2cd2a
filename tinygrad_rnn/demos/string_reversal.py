"""String reversal with noise tokens: the same encoder-decoder trained with and without
Bahdanau attention. Prints the held-out exact-match accuracy of both models by string length
and writes figures of the accuracy against length, the learning curves and attention heatmaps.

Run:  tinygrad-rnn demo string_reversal [--quick] [--out DIR] [--seed N] [--steps N]
                                        [--device {cpu,cuda,standin}] [--no-progress]
                                        [--run-dir DIR]

The task (tinygrad_rnn.data.reversal): the source is random letters a-h with noise symbols
'#' and '*' mixed in, the target is the letters reversed with the noise dropped. Two models
with the same bidirectional GRU encoder are trained with the same budget (Adam, gradient
norm clipped to 1, teacher forcing):

* without attention: the decoder sees the encoder's final states only, as its initial state
  and as a fixed context fed to every step (Seq2Seq(decoder='input'));
* with attention: Bahdanau et al.'s additive attention over the encoder outputs
  (Seq2Seq(decoder='bahdanau')).

Printed: greedy exact-match accuracy on held-out strings by number of letters, for both
models (Bahdanau et al. 2015's comparison: without attention accuracy falls as the strings get
longer, with attention it stays high), including a bucket of lengths longer than any seen in
training, and the overall held-out exact match in the training length range.

Figures (in --out, default out/string_reversal): accuracy against length, the learning
curves, and attention heatmaps (source x output tokens, noise tokens in red) for a few test
strings, where the weights should form an anti-diagonal that skips the noise.

--device trains and decodes on 'cpu' (the default), 'cuda' (a GPU through CuPy) or
'standin' (the test device: NumPy under CuPy's rules, so its numbers equal the CPU's). The
padded id batches stay on the host (the embeddings and the loss copy them to the device) and
the batches are drawn from seeded host generators, so every device sees the same data.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

# Small GEMMs: one BLAS thread is fastest (more cost synchronisation and spin on a busy
# machine). It must be set before NumPy loads, so `python demos/string_reversal.py` sets
# OPENBLAS_NUM_THREADS=1 itself; set it in the environment for the other ways of running.

import numpy as np

import tinygrad_rnn as tr
from tinygrad_rnn.cli import (add_demo_options, out_folder, progress_enabled, run_demo,
                              whole_number)
from tinygrad_rnn import decoding, runs, viz
from tinygrad_rnn.data import ReversalTask, reversal_examples, reversal_task

CONFIGS = {
    # training strings, updates per model, batch size, embedding and hidden sizes, Adam's
    # learning rate, letters per training string, held-out strings (in range / longer)
    "quick": dict(n_train=4000, steps=600, batch=64, emb=24, hidden=48, lr=5e-3,
                  min_len=3, max_len=10, n_test=400, n_long=100),
    "full": dict(n_train=12000, steps=2500, batch=64, emb=32, hidden=64, lr=3e-3,
                 min_len=3, max_len=14, n_test=1000, n_long=300),
}
NOISE_PROB = 0.2
MODELS = (("no attention", "input"), ("attention", "bahdanau"))


def build(decoder: str, vocab_size: int, cfg: dict, seed: int) -> tr.nn.Seq2Seq:
    """A Seq2Seq with a bidirectional GRU encoder and the given decoder."""
    return tr.nn.Seq2Seq(vocab_size, vocab_size, cfg["emb"], cfg["hidden"], cell="gru",
                         bidirectional=True, decoder=decoder, generator=seed)


def train(model: tr.nn.Seq2Seq, task: ReversalTask, cfg: dict, seed: int, desc: str,
          progress: bool = False, run_dir: str | None = None) -> list:
    """Adam with clipping; returns the loss of every update (``progress``: show a bar;
    ``run_dir``: write a run folder there)."""
    rng = np.random.default_rng(seed)
    opt = tr.optim.Adam(model.parameters(), lr=cfg["lr"])
    # one decay step: the learning rate drops to 30% after 60% of the updates (after the
    # first update in a run of one update, where the schedule cannot matter)
    decay_after = max(1, int(0.6 * cfg["steps"]))
    sched = tr.optim.lr_scheduler.StepLR(opt, step_size=decay_after, gamma=0.3)
    data = task.train
    batch = cfg["batch"]

    def step_fn(i: int) -> tr.Tensor:
        idx = rng.integers(0, len(data), size=batch)
        b = task.batch([data[j] for j in idx])
        return model.loss(b.src, b.src_lengths, b.tgt_in, b.tgt_out)

    def after(step: int, loss: float) -> None:
        sched.step()

    result = tr.training.fit(step_fn, cfg["steps"], opt, clip=1.0, callback=after,
                             desc=desc, progress=progress, run_dir=run_dir)
    return result.losses


def exact_matches(model: tr.nn.Seq2Seq, task: ReversalTask, examples: list,
                  batch: int = 200) -> np.ndarray:
    """Greedy decoding; True where the output (up to EOS) equals the target exactly."""
    model.eval()
    hits = []
    for start in range(0, len(examples), batch):
        chunk = examples[start: start + batch]
        b = task.batch(chunk)
        max_len = int(b.tgt_lengths.max()) + 2
        res = decoding.greedy_decode(model, b.src, b.src_lengths, max_len=max_len)
        for ex, seq, fin in zip(chunk, res.sequences, res.finished):
            hits.append(bool(fin) and task.decode(seq) == list(ex.target))
    model.train()
    return np.array(hits, dtype=bool)


def buckets(lo: int, hi: int, width: int = 2) -> list[tuple[int, int]]:
    """Letter-count buckets [a, b] covering lo..hi."""
    return [(a, min(a + width - 1, hi)) for a in range(lo, hi + 1, width)]


def build_parser() -> argparse.ArgumentParser:
    """The command line: the description is the first paragraph of this module's docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="smaller data and models, 600 updates per model (< 3 min)")
    parser.add_argument("--out", type=out_folder, metavar="DIR",
                        default=os.path.join("out", "string_reversal"),
                        help="folder for the figures, created if missing (default "
                             "out/string_reversal)")
    parser.add_argument("--seed", type=whole_number(0), default=0, metavar="N",
                        help="seed (>= 0) of the data, the initial weights and the batches "
                             "(default 0)")
    parser.add_argument("--steps", type=whole_number(1), default=None, metavar="N",
                        help="updates per model (>= 1; default 600 with --quick, 2500 "
                             "without); a small number makes a fast smoke test")
    add_demo_options(parser, runs="the models")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command-line options; ``args.cfg`` holds the sizes they imply (see CONFIGS)."""
    args = build_parser().parse_args(argv)
    args.cfg = dict(CONFIGS["quick" if args.quick else "full"])
    if args.steps is not None:
        args.cfg["steps"] = args.steps
    return args


def run(args: argparse.Namespace) -> dict:
    """Train both models, print the tables, write the figures; returns the numbers
    reported: ``overall`` (model -> held-out exact match), ``by_length`` (model -> exact
    match per bucket of ``spans``), ``losses`` (model -> the loss of every update) and
    ``examples`` (the attention model's outputs for the plotted strings)."""
    cfg = args.cfg
    os.makedirs(args.out, exist_ok=True)
    t0 = time.perf_counter()

    task = reversal_task(cfg["n_train"], 200, cfg["n_test"], min_len=cfg["min_len"],
                         max_len=cfg["max_len"], noise_prob=NOISE_PROB, generator=args.seed)
    seen = {e.source for e in task.train + task.valid + task.test}
    longer = reversal_examples(cfg["n_long"], cfg["max_len"] + 1, cfg["max_len"] + 3,
                               noise_prob=NOISE_PROB, generator=args.seed + 1000,
                               exclude=seen)
    V = len(task.vocab)
    print(f"string reversal: {len(task.train)} training strings of {cfg['min_len']}-"
          f"{cfg['max_len']} letters (a-h) with noise p={NOISE_PROB} ('#', '*'); "
          f"{len(task.test)} held-out test strings, {len(longer)} longer ones "
          f"({cfg['max_len'] + 1}-{cfg['max_len'] + 3} letters); models on {args.device}")

    spans = buckets(cfg["min_len"], cfg["max_len"]) + [(cfg["max_len"] + 1,
                                                         cfg["max_len"] + 3)]
    models, curves, acc_rows, overall = {}, {}, {}, {}
    for name, decoder in MODELS:
        model = build(decoder, V, cfg, args.seed).to(args.device)
        t = time.perf_counter()
        losses = train(model, task, cfg, args.seed, name,
                       progress=progress_enabled(args.no_progress),
                       run_dir=runs.child(getattr(args, "run", None), name))
        print(f"{name:13s} ({decoder}): {cfg['steps']} updates in "
              f"{time.perf_counter() - t:.0f} s, final loss {np.mean(losses[-20:]):.4f}")
        models[name], curves[name] = model, losses
        hits_in = exact_matches(model, task, task.test)
        hits_long = exact_matches(model, task, longer)
        lengths_in = np.array([e.num_letters for e in task.test])
        lengths_long = np.array([e.num_letters for e in longer])
        lengths = np.concatenate([lengths_in, lengths_long])
        hits = np.concatenate([hits_in, hits_long])
        acc_rows[name] = [float(hits[(lengths >= a) & (lengths <= b)].mean())
                          for a, b in spans]
        overall[name] = float(hits_in.mean())

    print()
    print("greedy exact match on held-out strings, by number of letters")
    header = f"{'letters':>9s}" + "".join(f"{name:>15s}" for name, _ in MODELS)
    print(header)
    for k, (a, b) in enumerate(spans):
        tag = f"{a}-{b}" + ("*" if a > cfg["max_len"] else "")
        print(f"{tag:>9s}" + "".join(f"{acc_rows[name][k]:15.3f}" for name, _ in MODELS))
    print("(* longer than any training string)")
    print()
    for name, _ in MODELS:
        print(f"overall held-out exact match ({cfg['min_len']}-{cfg['max_len']} letters), "
              f"{name}: {overall[name]:.4f}")
    target = 0.99
    ok = overall["attention"] >= target
    print(f"attention target >= {target:.2f}: {'reached' if ok else 'NOT reached'}")

    # ------------------------------------------------------------------ figures
    plt = viz.pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    mids = [(a + b) / 2 for a, b in spans]
    for name, _ in MODELS:
        ax.plot(mids, acc_rows[name], marker="o", label=name)
    ax.axvline(cfg["max_len"] + 0.5, color="gray", ls="--", lw=1, label="longest in training")
    ax.set_xlabel("number of letters")
    ax.set_ylabel("exact match (greedy)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("String reversal: accuracy vs length")
    ax.grid(True, alpha=0.3)
    ax.legend()
    viz.save_figure(fig, os.path.join(args.out, "accuracy_vs_length.png"))
    plt.close(fig)
    fig = viz.plot_learning_curves(curves, xlabel="update", ylabel="cross entropy", logy=True,
                                   path=os.path.join(args.out, "learning_curves.png"))
    plt.close(fig)

    att = models["attention"]
    picks = sorted(task.test, key=lambda e: (-sum(t in task.noise for t in e.source),
                                             -len(e.source)))[:3]
    examples = []
    for k, ex in enumerate(picks):
        b = task.batch([ex])
        res = decoding.greedy_decode(att, b.src, b.src_lengths, max_len=len(ex.target) + 3)
        assert res.attention is not None  # an attention decoder returns its weights
        out_tokens = task.decode(res.sequences[0], strip=False)
        examples.append((''.join(ex.source), ''.join(out_tokens), res.attention[0]))
        marked = [i for i, t in enumerate(ex.source) if t in task.noise]
        fig = viz.plot_attention(res.attention[0], list(ex.source), out_tokens, marked=marked,
                                 title=f"attention: {''.join(ex.source)}",
                                 path=os.path.join(args.out, f"attention_{k}.png"))
        plt.close(fig)
        print(f"example {k}: {''.join(ex.source)} -> {''.join(task.decode(res.sequences[0]))}"
              f" (target {''.join(ex.target)})")
    print(f"figures in {args.out}; total {time.perf_counter() - t0:.0f} s")
    return {"overall": overall, "by_length": acc_rows, "spans": spans, "losses": curves,
            "examples": examples}


def main(argv: list[str] | None = None) -> int:
    """Parse the options, check the device, run; exit status 2 for a bad option (argparse's
    message names it) or a device that cannot be used (the library's message says what is
    missing)."""
    return run_demo("string_reversal", parse_args(argv), run)


if __name__ == "__main__":
    sys.exit(main())
