"""The vanishing-gradient lab: watch gradients vanish and explode, and see why gates help.
Measures ||dL/dh_t|| at initialisation for tanh RNNs of several spectral radii, a ReLU RNN, a
GRU and an LSTM, then trains an LSTM and a tanh RNN on the adding problem; prints both tables
and writes the figures.

Run:  tinygrad-rnn demo vanishing_gradients [--quick] [--out DIR] [--seed N]
                                            [--device {cpu,cuda,standin}] [--no-progress]
                                            [--run-dir DIR]

Part 1, gradients at initialisation. For Elman tanh RNNs whose W_hh is a random orthogonal
matrix scaled to spectral radius rho (so sigma_max(W_hh) = rho too), an Elman ReLU RNN, a GRU
and an LSTM, the loss is put on the last step only and ||dL/dh_t|| is measured at every step
(the layers' per-step state gradients, identical for both engines). Printed: the fitted
decay rate per step beside rho and sigma_max, the gradient horizon (steps back until the norm
falls below 1% of its value at the last step), and, for the tanh RNNs, whether the measured
norms stay under the bound ||dL/dh_T|| (sigma_max * max tanh')^(T - t) of Pascanu et al.

Part 2, the adding problem (T = 100; 50 with --quick): an LSTM and a tanh Elman RNN trained
with the same budget. Printed: test MSE of each against the 0.167 of always predicting 1.

Figures (PNG and SVG) go to --out (default out/vanishing_gradients). The two heatmaps of
||dL/dh_t|| during training (LSTM and Elman) share one colour scale, so one colour is one norm
in both; white cells are norms that are exactly 0 (underflow), which a log scale cannot show.

Progress bars are shown only when stderr is a terminal; --no-progress or
TINYGRAD_RNN_PROGRESS=0 turns them off there too.

--device runs the networks on 'cpu' (the default), 'cuda' (a GPU through CuPy) or 'standin'
(the test device: NumPy under CuPy's rules, so its numbers equal the CPU's). The data are
drawn on the host from seeded generators and copied to the device, so every device sees the
same inputs; only the numbers printed or plotted come back to the host.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

# Small GEMMs: one BLAS thread is fastest (more cost synchronisation and spin on a busy
# machine). It must be set before NumPy loads, so `python demos/vanishing_gradients.py` sets
# OPENBLAS_NUM_THREADS=1 itself; set it in the environment for the other ways of running.

import numpy as np

import tinygrad_rnn as tr
from tinygrad_rnn.cli import (add_demo_options, out_folder, progress_enabled, run_demo,
                              whole_number)
from tinygrad_rnn import monitor as mon
from tinygrad_rnn import runs
from tinygrad_rnn import viz
from tinygrad_rnn.data import AddingBaseline, adding_problem

F = tr.functional


class Regressor(tr.nn.Module):
    """A recurrent layer with a linear readout of the last hidden state."""

    def __init__(self, kind: str, hidden: int, generator: np.random.Generator,
                 rho: float | None = None) -> None:
        super().__init__()
        self.rnn: tr.nn.RNNBase
        if kind == "lstm":
            self.rnn = tr.nn.LSTM(2, hidden, batch_first=True, forget_bias=1.0,
                                  generator=generator)
        elif kind == "gru":
            self.rnn = tr.nn.GRU(2, hidden, batch_first=True, generator=generator)
        else:
            nonlin = "relu" if kind == "relu" else "tanh"
            self.rnn = tr.nn.RNN(2, hidden, nonlinearity=nonlin, batch_first=True,
                                 generator=generator)
            if rho is not None:
                tr.nn.init.orthogonal_(self.rnn.weight_hh_l0, generator=generator)
                with tr.no_grad():
                    self.rnn.weight_hh_l0.mul_(rho)
        self.readout = tr.nn.Linear(hidden, 1, generator=generator)

    def forward(self, x: tr.Tensor) -> tr.Tensor:
        out, _ = self.rnn(x)
        return self.readout(out[:, -1])  # (N, 1): the prediction after the last step


def measure_norms(model: Regressor, x: tr.Tensor, y: tr.Tensor) -> np.ndarray:
    """||dL/dh_t|| for t = 0..T-1 with the loss on the last step only (x, y on the model's
    device; the T norms come back to the host)."""
    model.rnn.track_state_grads = True
    model.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    return mon.state_grad_norms(model.rnn.state_grads[(0, 0)]["h"])


def part1(args: argparse.Namespace, rng: np.random.Generator) -> tuple[list[dict], dict]:
    """Gradients at initialisation: the table's rows and the spectral sweep."""
    T, H, N = args.T, args.hidden, 32
    x_host, y_host = adding_problem(N, T, generator=rng)
    x, y = tr.Tensor(x_host, device=args.device), tr.Tensor(y_host, device=args.device)
    rows, curves, bounds = [], {}, {}
    models: list[tuple[str, str, float | None]] = [
        (f"tanh rho={r}", "tanh", r) for r in (0.5, 0.9, 1.0, 1.1, 1.5)]
    models += [("relu", "relu", None), ("GRU", "gru", None), ("LSTM", "lstm", None)]
    for label, kind, rho in models:
        model = Regressor(kind, H, rng, rho).to(args.device)
        norms = measure_norms(model, x, y)
        by_distance = norms[::-1]  # entry d = ||dL/dh_{T-1-d}||: d = 0 is the last step
        curves[label] = by_distance
        row = {"model": label, "rho": np.nan, "sigma": np.nan, "bound": ""}
        if kind in ("tanh", "relu"):
            W = model.rnn.weight_hh_l0
            row["rho"] = mon.spectral_radius(W)
            row["sigma"] = float(mon.singular_values(W)[0])
        if kind == "tanh":
            # ||dL/dh_t|| <= ||dL/dh_{T-1}|| (sigma_max * max tanh')^(T-1-t), max tanh' = 1
            b = by_distance[0] * mon.pascanu_bound(W, range(T), gamma=1.0)
            ok = bool(np.all(by_distance <= b * (1 + 1e-9)))
            row["bound"] = "holds" if ok else "VIOLATED"
            if rho is not None and rho < 1:
                bounds[label] = b
        if kind == "lstm":  # the same measurement through the autograd engine
            model.rnn.engine = "autograd"
            other = measure_norms(model, x, y)
            model.rnn.engine = "fused"
            row["engines"] = float(np.max(np.abs(other - norms) / np.maximum(norms, 1e-300)))
        tail = by_distance[1:]
        usable = tail[(tail > 1e-300) & np.isfinite(tail)]
        row["rate"] = mon.fit_decay_rate(usable) if usable.size >= 2 else np.nan
        row["horizon"] = mon.gradient_horizon(norms, 1e-2)
        rows.append(row)
    viz.plot_norms_vs_distance(curves, bounds, title=f"||dL/dh_t|| at initialisation (T={T}, "
                               f"H={H}); dotted: Pascanu et al. bound",
                               path=os.path.join(args.out, "norms_vs_distance.png"))
    viz.plot_norms_vs_distance(curves, bounds,
                               path=os.path.join(args.out, "norms_vs_distance.svg"))

    radii = np.round(np.linspace(0.3, 1.5, 7 if args.quick else 13), 2)
    rates, horizons = [], []
    for r in radii:
        model = Regressor("tanh", H, rng, float(r)).to(args.device)
        norms = measure_norms(model, x, y)
        tail = norms[::-1][1:]
        usable = tail[(tail > 1e-300) & np.isfinite(tail)]
        rates.append(mon.fit_decay_rate(usable))
        horizons.append(mon.gradient_horizon(norms, 1e-2))
    viz.plot_spectral_sweep(radii, {"fitted decay rate per step": rates,
                                    "rho (the bound's base)": radii},
                            ylabel="decay rate (factor per step)",
                            title="tanh RNN: decay rate vs spectral radius",
                            path=os.path.join(args.out, "spectral_sweep.png"))
    return rows, {"radii": radii, "rates": rates, "horizons": horizons}


def train_adding(kind: str, args: argparse.Namespace, seed: int) -> tuple[list, list, float,
                                                                          np.ndarray]:
    """Train on the adding problem; returns the training losses, the (step, validation MSE)
    pairs, the test MSE and the monitor's (steps, T) per-step state-gradient norms."""
    rng = np.random.default_rng(seed)
    T, device = args.T, args.device

    def on_device(*arrays: np.ndarray) -> list[tr.Tensor]:
        return [tr.Tensor(a, device=device) for a in arrays]

    model = Regressor(kind, args.hidden, rng).to(device)
    opt = tr.optim.Adam(model.parameters(), lr=args.lr)
    monitor = mon.GradientMonitor(model)
    x_val, y_val = on_device(*adding_problem(512, T, generator=rng))
    x_test, y_test = on_device(*adding_problem(1000, T, generator=rng))

    def step(i: int) -> tr.Tensor:
        xb, yb = on_device(*adding_problem(args.batch, T, generator=rng))
        return F.mse_loss(model(xb), yb)

    @tr.no_grad()
    def validate() -> float:
        return F.mse_loss(model(x_val), y_val).item()

    result = tr.training.fit(step, args.steps, opt, clip=1.0, monitor=monitor,
                             validate=validate, val_every=args.val_every,
                             desc=f"adding T={T} {kind}",
                             progress=progress_enabled(args.no_progress),
                             run_dir=runs.child(getattr(args, "run", None), kind))
    with tr.no_grad():
        test = F.mse_loss(model(x_test), y_test).item()
    return result.losses, result.val_losses, test, monitor.state_norms()


def build_parser() -> argparse.ArgumentParser:
    """The command line: the description is the first paragraph of this module's docstring."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="small sizes (T=50, H=32, 800 updates), under 2 minutes")
    p.add_argument("--out", type=out_folder, metavar="DIR",
                   default=os.path.join("out", "vanishing_gradients"),
                   help="folder for the figures, created if missing (default "
                        "out/vanishing_gradients)")
    p.add_argument("--seed", type=whole_number(0), default=0, metavar="N",
                   help="seed (>= 0) of the data and the initial weights (default 0)")
    add_demo_options(p, runs="the networks")
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command-line options, with the sizes they imply (T, hidden, steps, ...)."""
    args = build_parser().parse_args(argv)
    args.T = 50 if args.quick else 100
    args.hidden = 32 if args.quick else 64
    args.steps = 800 if args.quick else 2000
    args.batch = 64
    args.lr = 1e-2
    args.val_every = 50 if args.quick else 100
    return args


def run(args: argparse.Namespace) -> dict:
    """Run both parts, print the tables, write the figures; returns the numbers reported:
    ``part1`` (the table's rows), ``sweep`` (radii, fitted rates, horizons) and ``adding``
    (per model: training losses, validation curve, test MSE, state-gradient norms)."""
    os.makedirs(args.out, exist_ok=True)
    tr.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    t0 = time.time()

    rows, sweep = part1(args, rng)
    print(f"\nPart 1: ||dL/dh_t|| at initialisation, loss on the last step "
          f"(T={args.T}, H={args.hidden}, device {args.device})")
    print(f"{'model':<14}{'rho(W_hh)':>10}{'sigma_max':>10}{'fitted rate':>12}"
          f"{'horizon':>9}  bound")
    for r in rows:
        print(f"{r['model']:<14}{r['rho']:>10.3f}{r['sigma']:>10.3f}{r['rate']:>12.4f}"
              f"{r['horizon']:>9d}  {r['bound']}")

    gap = next(r["engines"] for r in rows if "engines" in r)
    print(f"(fused and autograd engines: max relative difference of the LSTM's per-step norms "
          f"{gap:.1e})")

    print(f"\nPart 2: adding problem, T={args.T}, {args.steps} Adam steps of batch "
          f"{args.batch}, clip 1.0 (always predicting 1 gives MSE {AddingBaseline:.3f})")
    curves, xs, heat = {}, {}, {}
    adding = {}
    for kind, label in (("lstm", "LSTM"), ("tanh", "Elman tanh")):
        losses, val, test, norms = train_adding(kind, args, args.seed + 1)
        adding[label] = {"losses": losses, "val_losses": val, "test": test,
                         "state_norms": norms}
        curves[label] = [v for _, v in val]
        xs[label] = [s for s, _ in val]
        heat[label] = norms
        print(f"  {label:<11} test MSE {test:.4f}")
    viz.plot_learning_curves(curves, x=xs, xlabel="update (Adam steps)",
                             ylabel="validation MSE", logy=True,
                             hline=AddingBaseline, hline_label="predict 1 (0.167)",
                             title=f"Adding problem, T={args.T}",
                             path=os.path.join(args.out, "adding_learning_curves.png"))
    vmin, vmax = viz.shared_log_limits(*heat.values())  # one colour scale for both
    for label, norms in heat.items():
        slug = label.split()[0].lower()
        other = next(name for name in heat if name != label)
        viz.plot_state_grad_heatmap(norms, title=f"{label}: ||dL/dh_t|| during training "
                                    f"(T={args.T})\nsame colour scale as the {other} heatmap",
                                    vmin=vmin, vmax=vmax,
                                    path=os.path.join(args.out, f"heatmap_{slug}.png"))
    print(f"\nFigures written to {args.out}/ in {time.time() - t0:.0f} s")
    return {"part1": rows, "sweep": sweep, "adding": adding}


def main(argv: list[str] | None = None) -> int:
    """Parse the options, check the device, run; exit status 2 for a bad option (argparse's
    message names it) or a device that cannot be used (the library's message says what is
    missing)."""
    return run_demo("vanishing_gradients", parse_args(argv), run)


if __name__ == "__main__":
    sys.exit(main())
