"""Recurrence, convolution and attention side by side: recurrent, causal convolutional and
Transformer language models of matched size, measured on one machine with the same data and
the same gradient instruments, to test the lectures' claims about the three kinds of
sequence model. Prints a table and writes a figure for each of four measurements.

Run:  tinygrad-rnn demo sequence_models [--quick] [--out DIR] [--seed N]
                                        [--device {cpu,cuda,standin}] [--no-progress]

The models: an Elman and an LSTM language model (tr.lm.RNNLM), a causal convolutional LM
(tr.lm.ConvLM: dilated causal convolutions with residuals, a TCN) and a Transformer LM
(tr.lm.TransformerLM: pre-norm blocks, causal self-attention), with parameter counts within
about 15% of each other (printed).

Part 1, training time per token against the sequence length T: one forward and backward
pass over a batch of random windows, the fastest of a few repetitions, divided by N T. The
recurrent layers take T sequential steps; the convolution and attention layers compute all
positions at once (attention's (T, T) score matrix makes its cost per token grow with T).

Part 2, generation: time and memory per generated token against the position. A recurrent
LM carries a state of fixed size; the convolutional LM a window of its last R ids; the
Transformer a key/value cache (tr.lm.KVCache) that grows by 2 L d numbers per token.

Part 3, gradient paths: ||dL/dx_t|| (x_t the input embedding at step t, the loss on the last
step) against the distance d = T - 1 - t, at initialisation and after training on the task of
part 4, in the style of the vanishing-gradient lab. Recurrence: a path of d steps, whose norm
decays geometrically (Elman); convolution: a path of about log2(d) blocks, and none beyond the
receptive field R; attention: one step at any distance.

Part 4, a long-dependency task: recall the first token after T - 1 distractors
(tr.data.recall_first, 5 keys: chance is 0.2), at growing T, with the same number of updates
for every model. Test accuracy per model and T.

The numbers also go to DIR/sequence_models.json. Progress bars are shown only when stderr is
a terminal; --no-progress or TINYGRAD_RNN_PROGRESS=0 turns them off there too. --device runs
the networks on 'cpu' (the default), 'cuda' (a GPU through CuPy) or 'standin' (the test
device); data are drawn on the host from seeded generators.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

# Small GEMMs: one BLAS thread is fastest (more cost synchronisation and spin on a busy
# machine). It must be set before NumPy loads, so `python demos/sequence_models.py` sets
# OPENBLAS_NUM_THREADS=1 itself; set it in the environment for the other ways of running.

import numpy as np

import tinygrad_rnn as tr
from tinygrad_rnn.cli import (add_demo_options, out_folder, progress_enabled, run_demo,
                              whole_number)
from tinygrad_rnn import viz
from tinygrad_rnn.data import recall_first
from tinygrad_rnn.lm import ConvLM, KVCache, RNNLM, TransformerLM, lm_loss

F = tr.functional
KINDS = ("Elman", "LSTM", "conv", "Transformer")
KEYS = 10  # recall_first's vocabulary: 5 keys, 5 distractor ids


# ----------------------------------------------------------------------------- models
def build(kind: str, V: int, max_len: int, seed: int, device: str) -> tr.nn.Module:
    """One of the four models, sized so their parameter counts are close (about 30k at
    V = 32); ``max_len`` is the Transformer's context."""
    model: tr.nn.Module
    if kind == "Elman":
        model = RNNLM(V, 32, 144, cell="rnn", generator=seed)
    elif kind == "LSTM":
        model = RNNLM(V, 32, 68, cell="lstm", generator=seed)
    elif kind == "conv":
        model = ConvLM(V, 40, kernel_size=3, num_layers=3, generator=seed)
    else:
        model = TransformerLM(V, 48, nhead=4, num_layers=1, dim_feedforward=192,
                              max_len=max_len, positional="sinusoidal", generator=seed)
    return model.to(device)


def logits_of(model: tr.nn.Module, ids: np.ndarray) -> tr.Tensor:
    """(N, T, V) logits of any of the four models (an RNNLM also returns its state)."""
    out = model(ids)
    return out[0] if isinstance(model, RNNLM) else out


def state_bytes(state) -> int:
    """Bytes of a generation state: a recurrent state (a Tensor or an LSTM's pair), a
    KVCache or the convolutional LM's window of ids."""
    if isinstance(state, KVCache):
        return state.nbytes
    if isinstance(state, tr.Tensor):
        return int(state._data.nbytes)
    if isinstance(state, (tuple, list)):
        return sum(state_bytes(s) for s in state)
    return int(np.asarray(state).nbytes)


# ----------------------------------------------------------------------------- part 1
def part1_training_time(args: argparse.Namespace, rng: np.random.Generator) -> dict:
    """Microseconds per token of one forward + backward pass, per model and T."""
    V, N = 32, args.batch
    models = {k: build(k, V, max(args.train_lengths), args.seed, args.device) for k in KINDS}
    table: dict[str, list] = {k: [] for k in KINDS}
    for T in args.train_lengths:
        ids = rng.integers(0, V, size=(N, T + 1))
        x, y = ids[:, :-1], ids[:, 1:]
        for kind, model in models.items():
            best = np.inf
            for rep in range(args.reps + 1):            # the first is a warm-up
                t0 = time.perf_counter()
                loss = lm_loss(logits_of(model, x), y)
                loss.backward()
                float(loss.item())                      # the device finishes its work
                elapsed = time.perf_counter() - t0
                model.zero_grad()
                if rep:
                    best = min(best, elapsed)
            table[kind].append(1e6 * best / (N * T))
    params = {k: m.num_parameters() for k, m in models.items()}
    return {"T": list(args.train_lengths), "us_per_token": table, "parameters": params}


def plot_part1(res: dict, args: argparse.Namespace) -> None:
    plt = viz.pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for kind in KINDS:
        ax.loglog(res["T"], res["us_per_token"][kind], marker="o",
                  label=f"{kind} ({res['parameters'][kind]:,} parameters)")
    ax.set_xlabel("sequence length T (tokens per window)")
    ax.set_ylabel("training time per token (µs, forward + backward)")
    ax.set_title(f"Training cost per token, batch {args.batch}, device {args.device}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    viz.save_figure(fig, os.path.join(args.out, "training_time.png"))
    plt.close(fig)


# ----------------------------------------------------------------------------- part 2
def part2_generation(args: argparse.Namespace, rng: np.random.Generator) -> dict:
    """Per model: seconds and state bytes of each generated token, positions 1 .. P."""
    V, P = 32, args.positions
    out = {}
    for kind in KINDS:
        model = build(kind, V, P + 1, args.seed, args.device)
        model.eval()
        times, sizes = [], []
        with tr.no_grad():
            logits, state = model.prime(np.array([int(rng.integers(V))]))
            for _ in range(P):
                token = int(np.argmax(logits))
                t0 = time.perf_counter()
                logits, state = model.advance(token, state)
                times.append(time.perf_counter() - t0)
                sizes.append(state_bytes(state))
        out[kind] = {"seconds": times, "bytes": sizes}
    return out


def plot_part2(res: dict, args: argparse.Namespace) -> None:
    plt = viz.pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    for kind in KINDS:
        pos = np.arange(2, len(res[kind]["seconds"]) + 2)   # the prompt is position 0
        ax1.plot(pos, 1e6 * _smooth(res[kind]["seconds"]), label=kind)
        ax2.plot(pos, res[kind]["bytes"], label=kind)
    ax1.set_xlabel("position of the generated token")
    ax1.set_ylabel("time per token (µs, running median of 9)")
    ax2.set_xlabel("position of the generated token")
    ax2.set_ylabel("state carried to the next token (bytes)")
    for ax in (ax1, ax2):
        ax.set_yscale("log")
    for ax in (ax1, ax2):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Generation: a recurrent state of fixed size against a growing key/value cache")
    viz.save_figure(fig, os.path.join(args.out, "generation.png"))
    plt.close(fig)


def _smooth(values, k: int = 9) -> np.ndarray:
    """Running median of ``values`` over windows of k (shorter at the ends)."""
    v = np.asarray(values)
    return np.array([np.median(v[max(0, i - k // 2):i + k // 2 + 1]) for i in range(v.size)])


# ----------------------------------------------------------------------------- parts 3-4
def gradient_path(model: tr.nn.Module, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """||dL/dx_t|| for the input embeddings x_t (mean over the batch), indexed by distance
    d = T - 1 - t, with L the cross entropy of the last step's prediction."""
    kept = []

    def keep(module: tr.nn.Module, inputs: tuple, output: tr.Tensor) -> None:
        output.retain_grad()                        # the embeddings x_t keep their gradient
        kept.append(output)

    handle = model.embedding.register_forward_hook(keep)
    try:
        logits = logits_of(model, x)
        F.cross_entropy(logits[:, -1], y).backward()
    finally:
        handle.remove()
    assert kept[0].grad is not None  # the retained gradient of the embedded input
    grad = kept[0].grad.numpy().astype(np.float64)                     # (N, T, D)
    model.zero_grad()
    norms = np.sqrt((grad ** 2).sum(axis=-1)).mean(axis=0)             # (T,)
    return norms[::-1].copy()


def train_recall(kind: str, T: int, args: argparse.Namespace, seed: int) -> tuple:
    """Train one model on recall_first at length T; returns (test accuracy, the model, a
    test batch)."""
    data_rng = np.random.default_rng([seed, T])
    model = build(kind, KEYS, T, seed, args.device)
    opt = tr.optim.Adam(model.parameters(), lr=args.lr)
    x_test, y_test = recall_first(args.n_test, T - 1, KEYS, generator=data_rng)

    def step(i: int) -> tr.Tensor:
        x, y = recall_first(args.batch, T - 1, KEYS, generator=data_rng)
        return F.cross_entropy(logits_of(model, x)[:, -1], y)

    tr.training.fit(step, args.steps, opt, clip=1.0, desc=f"{kind}, recall T={T}",
                    progress=progress_enabled(args.no_progress))
    model.eval()
    with tr.no_grad():
        predicted = logits_of(model, x_test)[:, -1].numpy().argmax(axis=-1)
    model.train()
    return float(np.mean(predicted == y_test)), model, (x_test[:64], y_test[:64])


def parts3_4(args: argparse.Namespace) -> dict:
    """Accuracy on recall_first per model and T; gradient paths at the longest T at
    initialisation and after training."""
    accuracy: dict[str, list] = {k: [] for k in KINDS}
    paths = {}
    T_long = args.task_lengths[-1]
    probe_x, probe_y = recall_first(64, T_long - 1, KEYS, generator=args.seed + 7)
    for kind in KINDS:
        init_model = build(kind, KEYS, T_long, args.seed, args.device)
        paths[f"{kind}, initial"] = gradient_path(init_model, probe_x, probe_y)
        for T in args.task_lengths:
            acc, model, _ = train_recall(kind, T, args, args.seed)
            accuracy[kind].append(acc)
        paths[f"{kind}, trained"] = gradient_path(model, probe_x, probe_y)
    receptive = build("conv", KEYS, T_long, args.seed, "cpu").receptive_field
    return {"T": list(args.task_lengths), "accuracy": accuracy,
            "paths": {k: v.tolist() for k, v in paths.items()},
            "conv_receptive_field": receptive}


def plot_parts3_4(res: dict, args: argparse.Namespace) -> None:
    T = res["T"][-1]
    for stage in ("initial", "trained"):
        curves = {k.split(",")[0]: v for k, v in res["paths"].items() if k.endswith(stage)}
        when = "at initialisation" if stage == "initial" else \
            f"after {args.steps} updates on the task"
        viz.plot_norms_vs_distance(
            curves, title=f"||dL/dx_t|| {when} (T={T}; conv receptive field "
                          f"R={res['conv_receptive_field']})",
            ylabel=r"$\|\partial L / \partial x_t\|$ (input embeddings)",
            path=os.path.join(args.out, f"gradient_paths_{stage}.png"))
    plt = viz.pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for i, kind in enumerate(KINDS):
        ax.plot(res["T"], res["accuracy"][kind], marker="osv^"[i], label=kind)
    ax.axhline(1 / (KEYS // 2), color="gray", ls="--", lw=1, label="chance (0.2)")
    ax.axvline(res["conv_receptive_field"], color="gray", ls=":", lw=1,
               label=f"conv receptive field R = {res['conv_receptive_field']}")
    ax.set_xlabel("sequence length T (the key is T - 1 steps before the answer)")
    ax.set_ylabel("test accuracy")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"Recall the first token, {args.steps} updates of batch {args.batch}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    viz.save_figure(fig, os.path.join(args.out, "recall_accuracy.png"))
    plt.close(fig)


# ----------------------------------------------------------------------------- command line
def build_parser() -> argparse.ArgumentParser:
    """The command line: the description is the first paragraph of this module's docstring."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="fewer lengths, positions and updates, under about 90 seconds")
    p.add_argument("--out", type=out_folder, metavar="DIR",
                   default=os.path.join("out", "sequence_models"),
                   help="folder for the figures and sequence_models.json, created if missing "
                        "(default out/sequence_models)")
    p.add_argument("--seed", type=whole_number(0), default=0, metavar="N",
                   help="seed (>= 0) of the data and the initial weights (default 0)")
    add_demo_options(p, runs="the networks", run_dir=False)
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command-line options, with the sizes they imply."""
    args = build_parser().parse_args(argv)
    args.batch = 32
    args.train_lengths = (16, 32, 64, 128) if args.quick else (16, 32, 64, 128, 256, 512)
    args.reps = 2 if args.quick else 4
    args.positions = 128 if args.quick else 512
    args.task_lengths = (8, 16, 40) if args.quick else (8, 16, 32, 48, 64, 96)
    args.steps = 150 if args.quick else 600
    args.n_test = 500
    args.lr = 3e-3
    return args


def run(args: argparse.Namespace) -> dict:
    """Run the four parts, print the tables, write the figures and the JSON; returns the
    numbers: ``training`` (part 1), ``generation`` (part 2), ``task`` (parts 3-4)."""
    os.makedirs(args.out, exist_ok=True)
    tr.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    t_start = time.time()

    train = part1_training_time(args, rng)
    print(f"Part 1: training time per token (µs, forward + backward, batch {args.batch}, "
          f"device {args.device}); parameters: "
          + ", ".join(f"{k} {n:,}" for k, n in train["parameters"].items()))
    print(f"{'T':>6}" + "".join(f"{k:>13}" for k in KINDS))
    for i, T in enumerate(train["T"]):
        print(f"{T:>6}" + "".join(f"{train['us_per_token'][k][i]:>13.2f}" for k in KINDS))
    plot_part1(train, args)

    gen = part2_generation(args, rng)
    print(f"\nPart 2: generation, time per token (µs, median of the 8 tokens up to the "
          f"position) and state carried (bytes)")
    print(f"{'position':>9}" + "".join(f"{k + ' µs':>16}{k + ' B':>15}" for k in KINDS))
    marks = [p for p in (2, 8, 32, 128, 512) if p <= args.positions + 1]
    for p in marks:
        i = p - 2
        row = "".join(f"{1e6 * np.median(gen[k]['seconds'][max(0, i - 7):i + 1]):>16.1f}"
                      f"{gen[k]['bytes'][i]:>15,}" for k in KINDS)
        print(f"{p:>9}{row}")
    plot_part2(gen, args)

    task = parts3_4(args)
    print(f"\nPart 3: ||dL/dx_t|| at distance d / at d = 1, T = {task['T'][-1]} (conv "
          f"receptive field R = {task['conv_receptive_field']})")
    dists = [d for d in (1, 4, 16, task['conv_receptive_field'] - 1,
                         task['conv_receptive_field'], task["T"][-1] - 1)
             if d < task["T"][-1]]
    print(f"{'model':<24}" + "".join(f"{'d=' + str(d):>10}" for d in dists))
    for name, path in task["paths"].items():
        ref = path[1] if path[1] > 0 else 1.0
        print(f"{name:<24}" + "".join(f"{path[d] / ref:>10.2e}" for d in dists))
    print(f"\nPart 4: recall the first token, test accuracy ({args.steps} updates of batch "
          f"{args.batch}; chance 0.2)")
    print(f"{'T':>6}" + "".join(f"{k:>13}" for k in KINDS))
    for i, T in enumerate(task["T"]):
        print(f"{T:>6}" + "".join(f"{task['accuracy'][k][i]:>13.3f}" for k in KINDS))
    plot_parts3_4(task, args)

    results = {"training": train, "generation": gen, "task": task,
               "seconds": time.time() - t_start}
    with open(os.path.join(args.out, "sequence_models.json"), "w") as fh:
        json.dump(results, fh, indent=1)
    print(f"\nFigures and sequence_models.json written to {args.out}/ in "
          f"{time.time() - t_start:.0f} s")
    return results


def main(argv: list[str] | None = None) -> int:
    """Parse the options, check the device, run; exit status 2 for a bad option (argparse's
    message names it) or a device that cannot be used (the library's message says what is
    missing)."""
    return run_demo("sequence_models", parse_args(argv), run)


if __name__ == "__main__":
    sys.exit(main())
