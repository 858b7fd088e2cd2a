"""Quick start: build a small network, backpropagate, and verify every gradient. Prints the
loss, every gradient's shape and dtype, one explicit softmax Jacobian and the result of a
float64 gradient check of the whole computation; the exit status is 1 if the check fails.

Run:  tinygrad-rnn demo quickstart [--seed N] [--device {cpu,cuda,standin}]
      (or: tinygrad-rnn demo quickstart)

With --device the tensors live on 'cuda' (a GPU through CuPy) or 'standin' (the test device)
instead of the CPU; the inputs are drawn on the host, so the printed numbers are the same on
every device.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import tinygrad_rnn as tr
from tinygrad_rnn.cli import whole_number

F = tr.functional


def build_parser() -> argparse.ArgumentParser:
    """The command line: the description is the first paragraph of this module's docstring."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=whole_number(0), default=0, metavar="N",
                   help="seed (>= 0) of the random inputs (default 0)")
    p.add_argument("--device", choices=("cpu", "cuda", "standin"), default="cpu",
                   help="where the tensors live (default cpu); cuda needs CuPy and a GPU")
    return p


def main(argv: list[str] | None = None) -> int:
    """Parse the options, check the device, run; exit status 2 for a bad option or a device
    that cannot be used, 1 if the gradient check fails."""
    tr.malloc_tuning.keep_freed_memory()  # freed memory stays for the next step
    args = build_parser().parse_args(argv)
    try:
        tr.backend.module_for_device(args.device)
    except RuntimeError as err:
        print(f"quickstart: error: {err}", file=sys.stderr)
        return 2
    device = args.device
    rng = np.random.default_rng(args.seed)
    x = tr.Tensor(rng.normal(size=(4, 3)), requires_grad=True, device=device)
    W = tr.Tensor(rng.normal(size=(3, 5)), requires_grad=True, device=device)
    b = tr.Tensor(np.zeros(5), requires_grad=True, device=device)
    target = np.array([0, 4, 1, 2])  # host class ids: the loss copies them to the device

    def model(x: tr.Tensor, W: tr.Tensor, b: tr.Tensor) -> tr.Tensor:
        return F.cross_entropy((x @ W + b).tanh(), target)

    loss = model(x, W, b)
    loss.backward()
    print(f"loss = {loss.item():.6f} (on {loss.device})")
    for name, t in (("x", x), ("W", W), ("b", b)):
        assert t.grad is not None  # backward filled it
        print(f"d loss / d {name}: shape {t.grad.shape}, dtype {t.grad.dtype}")

    p = F.softmax((x @ W + b).tanh())
    J = tr.backend.to_device(tr.explicit_jacobians.softmax(p)[0], "cpu")  # host copy, to print
    print("softmax Jacobian of row 0, diag(y) - y y^T:")
    print(np.array2string(J, precision=4))
    print(f"rows sum to zero: max |row sum| = {np.abs(J.sum(axis=1)).max():.2e}")

    report = tr.gradcheck(model, (x, W, b), raise_exception=False)
    print(f"gradcheck (float64, central differences): passed={report.passed}, "
          f"max abs error {report.max_abs_error:.2e} over {report.entries} entries")
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
