"""Character-level language models on the CPython documentation text, from unigram counts to
an LSTM, compared on one test split. Prints a table of test perplexities and samples from the
LSTM at two temperatures, and writes a figure of the recurrent models' train and validation
perplexity.

Run:  tinygrad-rnn demo char_lm [--quick] [--out DIR] [--seed N] [--epochs E] [--max-chars N]
                                [--device {cpu,cuda,standin}] [--no-progress]
                                [--run-dir DIR]

The corpus ships with Python (``pydoc_data.topics``, about 0.5 MB of English): no download.
It is split contiguously into train / valid / test (80/10/10). Trained and evaluated on it:

* count-based n-grams (unigram, bigram, trigram) with interpolated Kneser-Ney smoothing;
* the feed-forward neural LM of Bengio et al. 2003 (a window of previous characters);
* Elman, GRU and LSTM language models trained with stateful truncated BPTT (chunked
  TBPTT(k): the hidden state is carried across windows and batches, detached);
* a causal convolutional LM (a TCN: dilated causal convolutions with residuals) and a
  Transformer LM (causal pre-norm blocks), trained on random windows of 64 characters with
  the recurrent models' budget of characters per epoch, and scored through windows (the
  TCN with its exact receptive field, the Transformer with windows of 64 that overlap by 32).

Every model is scored by the same evaluation (``tr.lm.evaluate_perplexity``: the exp of the
mean negative log-likelihood in nats per character, equal to 2 ** bits per character).
Printed: one perplexity table on the test split, and samples from the LSTM at two
temperatures. Figures: train and validation perplexity of the recurrent models (one colour
per model: train solid, validation dashed).

Progress bars are shown only when stderr is a terminal; --no-progress or
TINYGRAD_RNN_PROGRESS=0 turns them off there too.

--device runs the neural models on 'cpu' (the default), 'cuda' (a GPU through CuPy) or
'standin' (the test device: NumPy under CuPy's rules, so its numbers equal the CPU's); the
n-gram baselines are counts and always run on the CPU. Token ids stay on the host: the
embeddings and losses copy them to the device, and random draws (batches, samples) come from
seeded host generators, so every device sees the same data.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

# Small GEMMs: one BLAS thread is fastest (more cost synchronisation and spin on a busy
# machine). It must be set before NumPy loads, so `python demos/char_lm.py` sets
# OPENBLAS_NUM_THREADS=1 itself; set it in the environment for the other ways of running.

import numpy as np

import tinygrad_rnn as tr
from tinygrad_rnn.cli import (add_demo_options, out_folder, progress_enabled, run_demo,
                              whole_number)
from tinygrad_rnn import runs, viz
from tinygrad_rnn.truncation import chunked
from tinygrad_rnn.data import char_corpus, lm_stream
from tinygrad_rnn.lm import (
    ConvLM, FeedForwardLM, NGramLM, RNNLM, TransformerLM, evaluate_perplexity, lm_loss,
    lm_windows, make_contexts,
)

F = tr.functional
# the smallest --max-chars: a few dozen characters is the hard limit (the 10% validation and
# test splits need characters to score, the 80% training split one per TBPTT stream and
# more); 1,000 keeps every split meaningful and still runs in seconds
MIN_CHARS = 1000
CELL_NAMES = {"rnn": "Elman", "gru": "GRU", "lstm": "LSTM"}


def ngram_rows(corpus, test_ids: np.ndarray) -> list[tuple]:
    rows = []
    for order, name in ((1, "unigram (KN)"), (2, "bigram (KN)"), (3, "trigram (KN)")):
        t0 = time.time()
        model = NGramLM(order=order, smoothing="kneser_ney").fit(corpus.train, len(corpus.vocab))
        ppl = evaluate_perplexity(model.token_log_probs, test_ids)
        rows.append((name, ppl, 0, time.time() - t0))
    return rows


def train_ffnn(corpus, args: argparse.Namespace, rng: np.random.Generator,
               test_ids: np.ndarray) -> tuple:
    V = len(corpus.vocab)
    model = FeedForwardLM(V, context_size=5, embedding_dim=24, hidden_size=args.hidden,
                          generator=rng).to(args.device)
    contexts, targets = make_contexts(corpus.train, 5)
    opt = tr.optim.Adam(model.parameters(), lr=3e-3)
    batch = 256

    def step(i: int) -> tr.Tensor:
        idx = rng.integers(0, len(targets), size=batch)
        return F.cross_entropy(model(contexts[idx]), targets[idx])

    t0 = time.time()
    tr.training.fit(step, args.ffnn_steps, opt, clip=1.0, desc="feed-forward LM",
                    progress=progress_enabled(args.no_progress),
                    run_dir=runs.child(getattr(args, "run", None), "feed-forward"))
    model.eval()
    ppl = evaluate_perplexity(model.token_log_probs, test_ids)
    return ("feed-forward (5 chars)", ppl, model.num_parameters(), time.time() - t0)


def train_rnn(cell: str, corpus, args: argparse.Namespace, seed: int,
              valid_ids: np.ndarray, test_ids: np.ndarray) -> tuple:
    V = len(corpus.vocab)
    model = RNNLM(V, 32, args.hidden, cell=cell, generator=seed).to(args.device)
    x, y = lm_stream(corpus.train, batch_size=32)  # (32, L): 32 contiguous streams
    opt = tr.optim.Adam(model.parameters(), lr=args.lr)
    train_ppl, val_ppl, val_x = [], [], []
    window_losses: list[float] = []

    def loss_fn(logits: tr.Tensor, start: int, stop: int) -> tr.Tensor:
        return lm_loss(logits, y[:, start:stop])  # mean NLL (nats) per character

    def validate() -> float:
        model.eval()
        ppl = evaluate_perplexity(model.token_log_probs, valid_ids)
        model.train()
        return float(np.log(ppl))

    def callback(step: int, loss: float) -> None:
        window_losses.append(loss)

    t0 = time.time()
    result = tr.training.train_stream(
        model, x, loss_fn, opt, chunked(args.bptt), epochs=args.epochs, clip=1.0,
        callback=callback, validate=validate, val_every=args.val_every, time_axis=1,
        desc=f"{cell.upper()} LM, TBPTT({args.bptt})",
        progress=progress_enabled(args.no_progress),
        run_dir=runs.child(getattr(args, "run", None), cell))
    for step, val in result.val_losses:
        lo = max(0, step - args.val_every)
        train_ppl.append(float(np.exp(np.mean(window_losses[lo:step]))))
        val_ppl.append(float(np.exp(val)))
        val_x.append(step)
    model.eval()
    ppl = evaluate_perplexity(model.token_log_probs, test_ids)
    elapsed = time.time() - t0
    name = f"{CELL_NAMES[cell]} (H={args.hidden})"
    return (name, ppl, model.num_parameters(), elapsed), model, (val_x, train_ppl, val_ppl)


def train_window_lm(kind: str, corpus, args: argparse.Namespace, seed: int,
                    test_ids: np.ndarray) -> tuple:
    """The convolutional (``kind='conv'``) or Transformer LM: width hidden / 2, trained on
    random windows of ``args.context`` characters, as many characters per epoch as the
    recurrent models read, then scored by the same evaluation."""
    V = len(corpus.vocab)
    width = args.hidden // 2
    model: tr.nn.Module
    if kind == "conv":
        model = ConvLM(V, width, kernel_size=3, num_layers=4, generator=seed)
        name = f"TCN (R={model.receptive_field})"
    else:
        model = TransformerLM(V, width, nhead=4, num_layers=2, max_len=args.context,
                              generator=seed)
        name = f"Transformer (ctx={args.context})"
    model = model.to(args.device)
    opt = tr.optim.Adam(model.parameters(), lr=args.window_lr)
    rng = np.random.default_rng(seed)
    steps = max(1, args.epochs * len(corpus.train) // (args.window_batch * args.context))

    def step(i: int) -> tr.Tensor:
        x, y = lm_windows(corpus.train, args.window_batch, args.context, generator=rng)
        return lm_loss(model(x), y)

    t0 = time.time()
    tr.training.fit(step, steps, opt, clip=1.0, desc=f"{name}, {steps} updates",
                    progress=progress_enabled(args.no_progress))
    model.eval()
    ppl = evaluate_perplexity(model.token_log_probs, test_ids)
    return (name, ppl, model.num_parameters(), time.time() - t0)


def plot_curves(curves: dict, args: argparse.Namespace) -> None:
    """The figure: ``curves`` maps a model to (updates, train perplexities, validation
    perplexities); one colour per model, train solid, validation dashed."""
    viz.plot_train_valid_curves(
        curves, xlabel="update (Adam steps)", ylabel="perplexity per character", logy=True,
        title="Character LMs: train and validation perplexity",
        note=(f"train: mean over the {args.val_every} updates before each point, while the "
              f"weights were still improving; validation: the weights at the point. That is "
              f"why train can lie above validation."),
        path=os.path.join(args.out, "perplexity_curves.png"))


def build_parser() -> argparse.ArgumentParser:
    """The command line: the description is the first paragraph of this module's docstring."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="a slice of the corpus and smaller models, under 3 min")
    p.add_argument("--out", type=out_folder, metavar="DIR",
                   default=os.path.join("out", "char_lm"),
                   help="folder for the figure, created if missing (default out/char_lm)")
    p.add_argument("--seed", type=whole_number(0), default=0, metavar="N",
                   help="seed (>= 0) of the initial weights, the batches and the samples "
                        "(default 0)")
    p.add_argument("--epochs", type=whole_number(1), default=None, metavar="E",
                   help="passes (>= 1) over the training stream (default 4 quick, 6 full)")
    p.add_argument("--max-chars", type=whole_number(MIN_CHARS), default=None, metavar="N",
                   help=f"use only the first N characters of the corpus (N >= {MIN_CHARS:,}; "
                        "default 300,000 quick, all full)")
    add_demo_options(p, runs="the neural models")
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command-line options, with the sizes they imply (hidden, ffnn_steps, n_eval, ...)."""
    args = build_parser().parse_args(argv)
    args.hidden = 128 if args.quick else 256
    if args.epochs is None:
        args.epochs = 4 if args.quick else 6
    args.bptt = 32
    args.context, args.window_batch, args.window_lr = 64, 32, 3e-3
    args.lr = 5e-3
    args.val_every = 50 if args.quick else 200
    args.ffnn_steps = 2000 if args.quick else 6000
    if args.max_chars is None and args.quick:
        args.max_chars = 300_000
    # evaluation slices (characters of valid and test): the whole splits in the full run
    args.n_eval = 10_000 if args.quick else None
    return args


def run(args: argparse.Namespace) -> dict:
    """Train and score every model, print the table and the samples, write the figure;
    returns the numbers reported: ``perplexity`` (model name -> test perplexity),
    ``parameters`` (model name -> count), ``curves`` (recurrent model -> (updates, train
    perplexities, validation perplexities)) and ``samples`` (temperature -> text)."""
    os.makedirs(args.out, exist_ok=True)
    tr.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    t_start = time.time()

    corpus = char_corpus(max_chars=args.max_chars)
    valid_ids, test_ids = corpus.valid[:args.n_eval], corpus.test[:args.n_eval]
    print(f"corpus: {len(corpus.train):,} train / {len(corpus.valid):,} valid / "
          f"{len(corpus.test):,} test characters, vocabulary {len(corpus.vocab)}; "
          f"scoring {len(test_ids):,} test characters; neural models on {args.device}")

    rows = ngram_rows(corpus, test_ids)
    rows.append(train_ffnn(corpus, args, rng, test_ids))
    curves = {}
    lstm = None
    for i, cell in enumerate(("rnn", "gru", "lstm")):
        row, model, (vx, tp, vp) = train_rnn(cell, corpus, args, args.seed + 10 + i,
                                              valid_ids, test_ids)
        rows.append(row)
        curves[row[0]] = (vx, tp, vp)
        if cell == "lstm":
            lstm = model
    for i, kind in enumerate(("conv", "transformer")):
        rows.append(train_window_lm(kind, corpus, args, args.seed + 20 + i, test_ids))

    print("\nTest perplexity per character (same split, same evaluation):")
    print(f"{'model':<24}{'perplexity':>11}{'bits/char':>10}{'parameters':>12}{'seconds':>9}")
    for name, ppl, n_params, secs in rows:
        print(f"{name:<24}{ppl:>11.3f}{np.log2(ppl):>10.3f}{n_params:>12,}{secs:>9.1f}")

    plot_curves(curves, args)

    prompt = "The "
    prompt_ids = corpus.vocab.encode(list(prompt))
    print(f"\nLSTM samples from the prompt {prompt!r}:")
    samples = {}
    for temperature in (0.5, 1.0):
        ids = tr.lm.generate(lstm, prompt_ids, 160, strategy="sample", temperature=temperature,
                             generator=args.seed)
        text = prompt + corpus.vocab.decode(ids, as_string=True)
        samples[temperature] = text
        print(f"  temperature {temperature}: {text!r}")
    print(f"\nFigure written to {args.out}/ in {time.time() - t_start:.0f} s")
    return {"perplexity": {name: ppl for name, ppl, _, _ in rows},
            "parameters": {name: n for name, _, n, _ in rows},
            "curves": curves, "samples": samples}


def main(argv: list[str] | None = None) -> int:
    """Parse the options, check the device, run; exit status 2 for a bad option (argparse's
    message names it) or a device that cannot be used (the library's message says what is
    missing)."""
    return run_demo("char_lm", parse_args(argv), run)


if __name__ == "__main__":
    sys.exit(main())
