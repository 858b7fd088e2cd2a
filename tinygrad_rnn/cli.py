"""The ``tinygrad-rnn`` command (also ``python -m tinygrad_rnn``).

Subcommands
-----------
``demo NAME``
    Run a demo of :mod:`tinygrad_rnn.demos` (``quickstart``, ``vanishing_gradients``, ...);
    ``--quick``, ``--out``, ``--seed`` and ``--device`` are passed on to the demos that accept
    them. The demos ship inside the package, so this works from any install (a wheel too).
``gradcheck``
    float64 central-difference checks of every built-in op, the recurrent cells and the
    recurrent layers on random inputs; prints a table and exits 1 when any check fails.
``bench``
    Run ``benchmarks/recurrent.py`` (source checkout only); other flags are passed through.
``graph MODEL``
    Draw the autograd graph of a small Elman/GRU/LSTM network (``elman``, ``gru``,
    ``lstm``) unrolled over ``--steps`` steps, on each engine, shaded by gradient norm
    (:func:`tinygrad_rnn.viz.graph`); .svg/.png/.pdf need Graphviz's ``dot``, .dot files
    need nothing.
``notebooks``
    Write ``notebooks/*.ipynb`` from the docs pages (``--execute`` stores their outputs from
    a fresh kernel; ``--check`` exits 1 when one is out of date): :mod:`tinygrad_rnn.notebooks`.
``info``
    Versions, array backends, BLAS and thread settings, whether Graphviz's ``dot`` is found:
    what to paste into a bug report.
``plot RUN_DIR``
    Redraw a run folder's figures from its CSV files alone (:mod:`tinygrad_rnn.runs`).
``sweep CONFIG.toml --out DIR``
    Run a grid of training runs, one run folder per point, on a local process pool or a
    Dask cluster (:mod:`tinygrad_rnn.sweep`).

``tinygrad-rnn`` with no command prints this help and exits 0, like ``--help``.

Progress bars (the training demos'): off with ``--no-progress`` or with the environment
variable ``TINYGRAD_RNN_PROGRESS=0``, forced on with ``TINYGRAD_RNN_PROGRESS=1``; by default
they are shown only when stderr is a terminal, so logs and pipes get no bar updates.

Exit codes: 0 success, 1 a failed check or demo, 2 a usage error (argparse's convention: bad
arguments, an unknown demo, ``bench`` outside a source checkout).

Why one module of about 830 lines: every subcommand's parser and dispatch, so ``tinygrad-rnn
--help`` and the code that answers it are read together; the work itself is done by the
modules each command calls.
"""
from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Sequence

# the progress-bar rule lives with the training loops; the demos import it from here
from .training import PROGRESS_ENV, progress_enabled

__all__ = ["main", "build_parser", "source_root", "available_demos", "demo_options",
           "add_demo_options",
           "progress_enabled"]

EPILOG = """\
examples:
  tinygrad-rnn demo quickstart                 # a small network, backward, gradcheck
  tinygrad-rnn demo vanishing_gradients --quick --out out/vg
  tinygrad-rnn gradcheck                       # every op, cell and layer (under a minute)
  tinygrad-rnn gradcheck --ops tanh,softmax,lstm_cell --examples 100 --seed 1
  tinygrad-rnn gradcheck --list                # the names --ops accepts
  tinygrad-rnn gradcheck --device cuda         # the same checks on the GPU (CuPy)
  tinygrad-rnn bench --quick                   # benchmarks/recurrent.py --quick
  tinygrad-rnn bench --quick --cells lstm --threads 1
  tinygrad-rnn graph lstm --steps 8 --out out/graph   # the unrolled graph, both engines
  tinygrad-rnn graph elman --steps 30 --engine autograd --format dot --out out/graph
  tinygrad-rnn info                            # versions, backends, BLAS, threads
  tinygrad-rnn demo vanishing_gradients --quick --run-dir runs/vg   # metrics + manifest
  tinygrad-rnn plot runs/vg                    # its figures again, from the CSV files
  tinygrad-rnn sweep sweeps/adding_small_sweep.toml --out runs/small --workers 2
  tinygrad-rnn exercises make hw1 --tasks tanh_backward,bptt_loop   # a student copy
  tinygrad-rnn exercises check hw1 --json grades.json                # grade it

bench needs the repository's benchmarks/ folder: run it from a source checkout installed with
`pip install -e .`; the demos ship inside the package.
"""

THREAD_ENV_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                   "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
OPTIONAL_PACKAGES = ("numpy", "matplotlib", "tqdm", "hypothesis", "torch", "cupy")
DEFAULT_EXAMPLES = 50


class UsageError(Exception):
    """A request the command cannot carry out as given (exit code 2)."""


# ----------------------------------------------------------------------------- locating
def source_root() -> Path | None:
    """The repository root when tinygrad_rnn runs from a source checkout, else None.

    A checkout is recognised by its packaging files next to the package folder; an installed
    wheel (site-packages/tinygrad_rnn) has none, so a stray ``demos`` folder in
    site-packages is never mistaken for ours.
    """
    root = Path(__file__).resolve().parent.parent
    if (root / "setup.cfg").is_file() or (root / "pyproject.toml").is_file():
        return root
    return None


def _folder(name: str) -> Path:
    """``<root>/<name>``, or a UsageError explaining that it only exists in a checkout."""
    root = source_root()
    folder = root / name if root is not None else None
    if folder is None or not folder.is_dir():
        where = f" (looked for {folder})" if folder is not None else (
            f" (tinygrad_rnn is imported from {Path(__file__).resolve().parent}, an "
            f"installed copy)")
        raise UsageError(
            f"the {name}/ folder was not found{where}. It ships with the source repository, "
            f"not inside the installed package: clone the repository and install it with "
            f"`pip install -e .`, then run this command again (or run the scripts in "
            f"{name}/ directly)."
        )
    return folder


def demos_folder() -> Path:
    """The folder of the package's demos, ``tinygrad_rnn/demos/`` (installed with it)."""
    return Path(__file__).resolve().parent / "demos"


def available_demos(folder: Path | None = None) -> list[str]:
    """Names of the demos (``tinygrad_rnn/demos/*.py`` except private ``_*.py`` files such
    as ``__init__.py``), sorted."""
    folder = demos_folder() if folder is None else folder
    return sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))


def demo_options(path: Path) -> set[str]:
    """The option strings (``--quick``, ...) a demo's command line declares: the options of
    its ``build_parser()`` when it has one (the shared ones come from
    :func:`add_demo_options`), else those its source passes to ``add_argument`` (read with
    :mod:`ast`; the script is not run). ``-h``/``--help`` are left out."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, filename=str(path))
    if any(isinstance(node, ast.FunctionDef) and node.name == "build_parser"
           for node in tree.body):
        parser = _load_script(path, "_tinygrad_rnn_options_").build_parser()
        return {option for action in parser._actions for option in action.option_strings
                if option not in ("-h", "--help")}
    options: set[str] = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) \
                        and arg.value.startswith("-"):
                    options.add(arg.value)
    return options


def add_demo_options(parser: argparse.ArgumentParser, *, runs: str,
                     run_dir: bool = True, progress: bool = True) -> None:
    """The options the training demos share, in one wording: ``--device`` (``runs``: what
    runs there, e.g. "the networks"), ``--run-dir`` and ``--no-progress``."""
    parser.add_argument("--device", choices=("cpu", "cuda", "standin"), default="cpu",
                        help=f"where {runs} run (default cpu); cuda needs CuPy and a GPU")
    if run_dir:
        parser.add_argument("--run-dir", metavar="DIR", default=None,
                            help="write a run folder here: the demo's manifest, and one run "
                                 "folder per trained model (metrics.csv); redraw with "
                                 "tinygrad-rnn plot DIR")
    if progress:
        parser.add_argument("--no-progress", action="store_true",
                            help="no progress bars (TINYGRAD_RNN_PROGRESS=0 does the same; "
                                 "they are off anyway when stderr is not a terminal)")


def _load_script(path: Path, prefix: str) -> ModuleType:
    """Import a script by path (registered in sys.modules, so dataclasses work)."""
    name = f"{prefix}{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    if not callable(getattr(module, "main", None)):
        raise UsageError(f"{path} has no main(argv) function")
    return module


def _call_main(fn: Callable[[list[str]], Any], argv: list[str], prog: str) -> int:
    """Run a script's ``main(argv)``; its SystemExit (argparse errors, --help) becomes the
    return code instead of ending the process. ``sys.argv[0]`` is ``prog`` meanwhile, so
    the script's argparse messages name the command the user typed."""
    saved = sys.argv
    sys.argv = [prog, *argv]
    try:
        code = fn(argv)
    except SystemExit as exc:
        code = exc.code
    finally:
        sys.argv = saved
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


# ----------------------------------------------------------------------------- commands
def _cmd_demo(args: argparse.Namespace) -> int:
    folder = demos_folder()
    names = available_demos(folder)
    listing = ", ".join(names) if names else "(none)"
    if args.list:
        print("\n".join(names))
        return 0
    if args.name is None:
        raise UsageError(f"name a demo to run; available demos: {listing}")
    if args.name not in names:
        raise UsageError(f"unknown demo {args.name!r}; available demos: {listing}")
    path = folder / f"{args.name}.py"
    accepted = demo_options(path)
    argv: list[str] = []
    given: tuple[tuple[str, list[str] | None], ...] = (
        ("--quick", [] if args.quick else None),
        ("--out", [args.out] if args.out is not None else None),
        ("--seed", [str(args.seed)] if args.seed is not None else None),
        ("--device", [args.device] if args.device is not None else None),
        ("--run-dir", [args.run_dir] if args.run_dir is not None else None),
        ("--no-progress", [] if args.no_progress else None),
    )
    for flag, value in given:
        if value is None:
            continue
        if flag in accepted:
            argv += [flag, *value]
        else:
            print(f"note: demo {args.name!r} has no {flag} option; ignored", file=sys.stderr)
    register_standin(args.device)
    module = _load_script(path, "_tinygrad_rnn_demo_")
    return _call_main(module.main, argv, f"tinygrad-rnn demo {args.name}")


def _select_entries(spec: str | None) -> list[str] | None:
    """Names from a comma-separated --ops value (entry names or the groups op/cell/layer)."""
    from .testing import suite

    if spec is None:
        return None
    groups = {e.group for e in suite.SUITE}
    chosen: list[str] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if item in suite.BY_NAME:
            picked = [item]
        elif item in groups:
            picked = [e.name for e in suite.SUITE if e.group == item]
        else:
            raise UsageError(
                f"unknown op {item!r} in --ops; known: {', '.join(suite.BY_NAME)} (or a "
                f"group: {', '.join(sorted(groups))}); see `tinygrad-rnn gradcheck --list`"
            )
        chosen += [name for name in picked if name not in chosen]
    if not chosen:
        raise UsageError("--ops names no op")
    return chosen


def _cmd_gradcheck(args: argparse.Namespace) -> int:
    from .testing import suite

    if args.list:
        for entry in suite.SUITE:
            print(f"{entry.name:<22}{entry.group:<7}{entry.what}")
        return 0
    names = _select_entries(args.ops)
    register_standin(args.device)
    if args.device != "cpu":
        from .backend import module_for_device

        try:
            module_for_device(args.device)
        except RuntimeError as exc:
            raise UsageError(str(exc)) from None
    count = len(suite.SUITE) if names is None else len(names)
    print(f"gradcheck: {count} ops/cells/layers x {args.examples} random float64 examples "
          f"(seed {args.seed}) on {args.device}, central differences eps={suite.EPS:g}, "
          f"every Jacobian entry")
    print(f"an entry passes when |analytic - numeric| <= atol + rtol |numeric| with "
          f"rtol={suite.RTOL:g}, atol={suite.ATOL:g} * max(1, max |f|); the max rel err "
          f"column is over the entries with |numeric| > atol\n")
    lines = suite.format_table([]).splitlines()
    print("\n".join(lines), flush=True)
    start = time.perf_counter()

    def show(result: Any) -> None:
        print(suite.format_table([result]).splitlines()[-1], flush=True)

    results = suite.run_suite(names, examples=args.examples, seed=args.seed, progress=show,
                              device=args.device)
    failed = [r for r in results if not r.passed]
    elapsed = time.perf_counter() - start
    if failed:
        print(f"\n{len(failed)} of {len(results)} FAILED:")
        for r in failed:
            print(f"  {r.name}: {r.failure}")
        where = f" --device {args.device}" if args.device != "cpu" else ""
        print(f"reproduce with: tinygrad-rnn gradcheck --ops {','.join(r.name for r in failed)}"
              f" --examples {args.examples} --seed {args.seed}{where}")
    else:
        print(f"\nall {len(results)} passed")
    print(f"({elapsed:.1f} s)")
    return 1 if failed else 0


def _cmd_bench(args: argparse.Namespace, extra: list[str]) -> int:
    path = _folder("benchmarks") / "recurrent.py"
    if not path.is_file():
        raise UsageError(f"{path} was not found; the benchmark ships with the source "
                         f"repository")
    argv = (["--quick"] if args.quick else []) + extra
    module = _load_script(path, "_tinygrad_rnn_bench_")
    return _call_main(module.main, argv, "tinygrad-rnn bench")


def _version_of(name: str) -> str:
    """The installed version of a distribution providing import name ``name``, without
    importing it (importing torch or cupy takes seconds)."""
    from importlib import metadata

    if importlib.util.find_spec(name) is None:
        return "not installed"
    dists = [name]
    try:
        dists = metadata.packages_distributions().get(name, []) + [name]
    except Exception:  # noqa: BLE001  (old or broken metadata: fall back to the name)
        pass
    for dist in dists:
        try:
            return f"{metadata.version(dist)}" + (f" ({dist})" if dist != name else "")
        except metadata.PackageNotFoundError:
            continue
    module = importlib.import_module(name)
    return str(getattr(module, "__version__", "installed (version unknown)"))


def _backends() -> list[str]:
    lines = ["numpy (CPU): available (default)",
             "standin: available (the test device: NumPy under CuPy's rules)"]
    if importlib.util.find_spec("cupy") is None:
        lines.append("cupy (GPU): not installed (optional: pip install \"tinygrad_rnn[gpu]\")")
        return lines
    try:
        import cupy

        count = int(cupy.cuda.runtime.getDeviceCount())
        lines.append(f"cupy (GPU): available, {count} CUDA device(s)" if count else
                     "cupy (GPU): installed, but no CUDA device is visible")
    except Exception as exc:  # noqa: BLE001  (a driver or runtime that fails to load)
        lines.append(f"cupy (GPU): installed, but unusable ({type(exc).__name__}: {exc})")
    return lines


def _blas() -> list[str]:
    """What BLAS NumPy uses: threadpoolctl's view when it is installed, else NumPy's
    build configuration."""
    import numpy as np

    lines: list[str] = []
    if importlib.util.find_spec("threadpoolctl") is not None:
        try:
            from threadpoolctl import threadpool_info

            for pool in threadpool_info():
                lines.append(f"{pool.get('internal_api', '?')} {pool.get('version', '?')}, "
                             f"{pool.get('num_threads', '?')} threads "
                             f"({pool.get('filepath', '?')})")
        except Exception as exc:  # noqa: BLE001
            lines.append(f"threadpoolctl failed: {type(exc).__name__}: {exc}")
    if not lines:
        try:
            config: Any = np.show_config(mode="dicts")  # typed as returning None
            deps = config.get("Build Dependencies", {})
            for key in ("blas", "lapack"):
                dep = deps.get(key, {})
                lines.append(f"{key}: {dep.get('name', '?')} {dep.get('version', '?')}")
            lines.append("(from NumPy's build configuration; install threadpoolctl to see "
                         "the loaded library and its thread count)")
        except Exception as exc:  # noqa: BLE001  (older NumPy without mode='dicts')
            lines.append(f"unknown ({type(exc).__name__}: {exc})")
    return lines


def _graphviz_line() -> str:
    """Whether Graphviz's ``dot`` (which tr.viz.graph needs for .svg/.png/.pdf) is found,
    and its version."""
    from .graph import find_dot

    dot = find_dot()
    if dot is None:
        return ("dot not found on PATH: tr.viz.graph(...).save() can write .dot only "
                "(install Graphviz: apt-get install graphviz, conda install -c conda-forge "
                "graphviz, brew install graphviz)")
    try:
        done = subprocess.run([dot, "-V"], capture_output=True, text=True, timeout=10)
        version = (done.stderr or done.stdout).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        version = "version unknown"
    return f"dot {dot} ({version})"


# ----------------------------------------------------------------------------- graph
GRAPH_MODELS = {"elman": "RNN", "gru": "GRU", "lstm": "LSTM"}


def _cmd_graph(args: argparse.Namespace) -> int:
    """Draw a small recurrent network's graph on each engine asked for."""
    import tinygrad_rnn as tr

    from .graph import find_dot

    if args.format != "dot" and find_dot() is None:
        raise UsageError(f"writing .{args.format} files needs Graphviz's `dot`, which is "
                         f"not on PATH: install Graphviz (apt-get install graphviz, conda "
                         f"install -c conda-forge graphviz, brew install graphviz) or pass "
                         f"--format dot")
    os.makedirs(args.out, exist_ok=True)
    engines = ("autograd", "fused") if args.engine == "both" else (args.engine,)
    collapse = {"auto": "auto", "on": True, "off": False}[args.collapse]
    for engine in engines:
        tr.manual_seed(args.seed)
        layer_class = getattr(tr.nn, GRAPH_MODELS[args.model])
        model = layer_class(args.input_size, args.hidden, engine=engine)
        model.track_state_grads = True  # the fused op's per-step ||dL/dh_t|| strip
        x = tr.randn(args.steps, args.batch, args.input_size)
        out, _ = model(x)
        loss = (out[-1] ** 2).sum()  # the loss at the last step only: watch it fade
        with tr.viz.record_backward() as rec:
            loss.backward()
        drawing = tr.viz.graph(rec, params=model, collapse=collapse,
                               hide="small" if args.hide_small else None)
        name = f"{args.model}_{engine}_T{args.steps}.{args.format}"
        path = drawing.save(os.path.join(args.out, name))
        print(f"{path}: {drawing!r}")
    return 0


def _cmd_notebooks(args: argparse.Namespace) -> int:
    """Write (or with --check, only compare) notebooks/*.ipynb from the docs pages."""
    from . import notebooks

    root = _folder("docs").parent
    if args.check:
        if args.execute or args.pages:
            raise UsageError("--check compares every notebook and runs none: use it alone")
        problems = notebooks.check(root)
        for line in problems:
            print(line)
        if problems:
            print(f"regenerate them with `{notebooks.REGENERATE_COMMAND}` (needs pip install "
                  f'-e ".[notebooks]")')
            return 1
        print(f"{len(notebooks.expected_cells(root))} notebooks are up to date")
        return 0
    needed = ("nbformat", "nbclient", "ipykernel") if args.execute else ("nbformat",)
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        raise UsageError(f"needs {', '.join(missing)}: pip install -e \".[notebooks]\"")
    only = [name.strip().removesuffix(".md") for name in args.pages.split(",")] \
        if args.pages else None
    known = [name.removesuffix(".ipynb") for name in notebooks.expected_cells(root)]
    unknown = [name for name in only or () if name not in known]
    if unknown:
        raise UsageError(f"no notebook is made from {', '.join(unknown)}; pages with "
                         f"notebooks: {', '.join(known)}")
    start = time.perf_counter()
    timings = notebooks.write(root, execute=args.execute, only=only)
    if args.execute:
        print(f"executed {len(timings)} notebooks in {sum(timings.values()):.1f} s of kernel "
              f"time ({time.perf_counter() - start:.1f} s in all)")
    return 0


def _cmd_info(args: argparse.Namespace) -> int:
    from . import __version__

    package = Path(__file__).resolve().parent
    root = source_root()
    print(f"tinygrad_rnn {__version__} ({package})")
    print(f"Python {platform.python_version()} ({sys.executable})")
    print(f"platform {platform.platform()}, machine {platform.machine()}")
    print("\npackages:")
    for name in OPTIONAL_PACKAGES:
        print(f"  {name:<11} {_version_of(name)}")
    print("\nbackends:")
    for line in _backends():
        print(f"  {line}")
    print("\nBLAS:")
    for line in _blas():
        print(f"  {line}")
    print("\nhost allocator:")
    from . import malloc_tuning

    print(f"  {malloc_tuning.status()}")
    print("\ngraphviz:")
    print(f"  {_graphviz_line()}")
    print("\nthreads:")
    for var in THREAD_ENV_VARS:
        print(f"  {var:<23} {os.environ.get(var, '(unset)')}")
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    print(f"  CPU count {os.cpu_count()}" + (f", usable by this process {usable}"
                                            if usable is not None else ""))
    print(f"\ndemos:\n  {len(available_demos())} in {demos_folder()}")
    print("\nsource checkout:")
    if root is None:
        print("  no (installed package): `bench` needs a clone of the repository")
    else:
        for name in ("benchmarks", "docs"):
            state = "found" if (root / name).is_dir() else "missing"
            print(f"  {name + '/':<12}{state} ({root / name})")
    return 0


# ----------------------------------------------------------------------------- parser
def whole_number(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number >= ``minimum``; anything else is a usage error
    (argparse prints the message and exits with status 2). Used by this CLI and the demos."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a whole number >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


def out_folder(text: str) -> str:
    """An argparse type for a demo's --out: a folder that exists or can be created (its
    nearest existing ancestor is a folder we may write in)."""
    if not text:
        raise argparse.ArgumentTypeError("expected a folder, got an empty path")
    probe = os.path.abspath(text)
    while not os.path.lexists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise argparse.ArgumentTypeError(
            f"cannot use {text!r} as a folder: {probe!r} exists and is not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(
            f"cannot write the figures to {text!r}: no permission to write in {probe!r}")
    return text


def register_standin(device: str | None) -> None:
    """Register the stand-in device (the CuPy emulator of :mod:`tinygrad_rnn.testing`) when
    ``device`` is ``'standin'``: the core package never imports the testing package, so the
    CLI does it for ``--device standin``."""
    if device == "standin":
        from .testing import cupy_emulator

        cupy_emulator.register()


def run_demo(name: str, args: argparse.Namespace, run: Callable[[argparse.Namespace], Any]
             ) -> int:
    """A demo's ``main`` after parsing: keep freed memory in the process for the next step
    (:func:`tinygrad_rnn.malloc_tuning.keep_freed_memory`), check that ``args.device`` can
    be used, then ``run(args)``. Exit status 0, or 2 with the library's message (it says
    what is missing) for a device that cannot be used, as argparse does for a bad option."""
    from . import backend, malloc_tuning

    malloc_tuning.keep_freed_memory()

    register_standin(args.device)
    try:
        backend.module_for_device(args.device)
    except RuntimeError as err:
        print(f"{name}: error: {err}", file=sys.stderr)
        return 2
    from .runs import RunWriter

    # --run-dir: a run folder for the whole demo (its manifest); each fit writes its own
    # run folder inside it (tr.runs.child(args.run, name))
    writer = None
    if getattr(args, "run_dir", None) is not None:
        try:
            writer = RunWriter(args.run_dir, config=vars(args),
                               seed=getattr(args, "seed", None), device=args.device)
        except (FileExistsError, NotADirectoryError) as err:
            print(f"{name}: error: --run-dir: {err}", file=sys.stderr)
            return 2
    args.run = writer
    if args.run is None:
        run(args)
        return 0
    with args.run:  # finished, or failed with the error
        run(args)
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    """Redraw a run folder's figures from its CSV files."""
    from .run_figures import plot_run

    try:
        written = plot_run(args.run_dir, args.out)
    except (FileNotFoundError, ValueError) as err:
        raise UsageError(str(err)) from None
    for path in written:
        print(path)
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    """Run (or resume) a sweep; exit 1 when a point failed twice."""
    from . import sweep

    try:
        report = sweep.run_sweep(args.config, args.out, workers=args.workers,
                                 scheduler=args.scheduler,
                                 progress=progress_enabled(args.no_progress))
    except sweep.SweepError as err:
        raise UsageError(str(err)) from None
    return 1 if report.failed else 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``tinygrad-rnn`` (exposed for the tests and the docs)."""
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="tinygrad-rnn",
        description="See and verify the gradients of recurrent networks: run the demos, "
                    "check every op's gradient, benchmark, describe the installation.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"tinygrad_rnn {__version__}")
    # not required: a bare `tinygrad-rnn` prints the help (main) instead of an error
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser(
        "demo", help="run one of the package's demos (tinygrad_rnn/demos/)",
        description="Run tinygrad_rnn/demos/NAME.py. --quick, --out, --seed and "
                    "--device are passed on when the demo accepts them.",
        epilog="examples:\n  tinygrad-rnn demo quickstart --seed 3\n"
               "  tinygrad-rnn demo vanishing_gradients --quick --out out/vg\n"
               "  tinygrad-rnn demo char_lm --quick --device cuda\n"
               "  tinygrad-rnn demo --list",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_argument("name", nargs="?", metavar="NAME", help="the demo (see --list)")
    demo.add_argument("--list", action="store_true", help="list the demos and exit")
    demo.add_argument("--quick", action="store_true", help="small sizes (if the demo has it)")
    demo.add_argument("--out", metavar="DIR", help="where figures go (if the demo has it)")
    demo.add_argument("--seed", type=int, metavar="N", help="random seed")
    demo.add_argument("--device", choices=("cpu", "cuda", "standin"),
                      help="where the demo's networks run (the demo's default: cpu); cuda "
                           "needs CuPy and a GPU, standin is the test device")
    demo.add_argument("--run-dir", metavar="DIR",
                      help="write a run folder (manifest, metrics.csv; if the demo has it)")
    demo.add_argument("--no-progress", action="store_true",
                      help=f"no progress bars (if the demo has them); {PROGRESS_ENV}=0 "
                           f"does the same, and bars are off anyway when stderr is not a "
                           f"terminal")

    grad = sub.add_parser(
        "gradcheck", help="float64 gradient checks of every op, cell and layer",
        description="Check the gradient of every built-in op, the recurrent cells (RNNCell "
                    "tanh/relu, GRUCell reset after/before, LSTMCell plain/peephole/"
                    "coupled) and tiny RNN/GRU/LSTM layers (fused engine) against float64 "
                    "central differences on random inputs drawn from a seeded NumPy "
                    "generator. Exits 1 when any check fails.",
        epilog="examples:\n  tinygrad-rnn gradcheck\n"
               "  tinygrad-rnn gradcheck --ops softmax,cross_entropy --examples 200\n"
               "  tinygrad-rnn gradcheck --ops cell,layer --seed 7\n"
               "  tinygrad-rnn gradcheck --device cuda",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    grad.add_argument("--examples", type=whole_number(1), default=DEFAULT_EXAMPLES, metavar="N",
                      help=f"random examples per entry (default {DEFAULT_EXAMPLES})")
    grad.add_argument("--ops", metavar="A,B,...",
                      help="comma-separated entry names or groups (op, cell, layer); "
                           "default all")
    grad.add_argument("--seed", type=whole_number(0), default=0, metavar="N",
                      help="seed of the random examples (default 0)")
    grad.add_argument("--list", action="store_true", help="list the entries and exit")
    grad.add_argument("--device", choices=("cpu", "cuda", "standin"), default="cpu",
                      help="where the checks run (default cpu); cuda needs CuPy and a GPU; "
                           "standin runs them under CuPy's rules on the CPU")

    bench = sub.add_parser(
        "bench", help="run benchmarks/recurrent.py (other flags are passed through)",
        description="Run benchmarks/recurrent.py from a source checkout and print its "
                    "tables. Every flag other than --quick is passed to the benchmark; "
                    "`tinygrad-rnn bench -- --help` lists them.",
        epilog="examples:\n  tinygrad-rnn bench --quick\n"
               "  tinygrad-rnn bench --quick --cells lstm --hidden 64 --threads 1 "
               "--no-memory",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    bench.add_argument("--quick", action="store_true", help="the benchmark's quick mode")

    draw = sub.add_parser(
        "graph", help="draw the autograd graph of a small recurrent network",
        description="Build a small Elman/GRU/LSTM layer, unroll it over --steps steps, take "
                    "the loss at the last step, backpropagate, and draw the graph on each "
                    "engine (autograd: one cluster per step; fused: one node per layer "
                    "with its per-step ||dL/dh_t|| strip), shaded by gradient norm. Writes "
                    "DIR/MODEL_ENGINE_TT.FORMAT; svg, png and pdf need Graphviz's dot.",
        epilog="examples:\n  tinygrad-rnn graph lstm --steps 8 --out out/graph\n"
               "  tinygrad-rnn graph gru --steps 100 --engine autograd --out out/graph\n"
               "  tinygrad-rnn graph elman --format dot --out out/graph",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    draw.add_argument("model", choices=tuple(GRAPH_MODELS), metavar="MODEL",
                      help="elman, gru or lstm")
    draw.add_argument("--steps", type=whole_number(1), default=8, metavar="T",
                      help="time steps (default 8)")
    draw.add_argument("--out", type=out_folder, default=".", metavar="DIR",
                      help="folder for the drawings (created; default the current folder)")
    draw.add_argument("--engine", choices=("autograd", "fused", "both"), default="both",
                      help="which engine to draw (default both)")
    draw.add_argument("--format", choices=("svg", "png", "pdf", "dot"), default="svg",
                      help="file type (default svg; dot needs no Graphviz)")
    draw.add_argument("--collapse", choices=("auto", "on", "off"), default="auto",
                      help="draw each step as one node (auto: above "
                           "tr.graph.AUTO_COLLAPSE_OPS ops)")
    draw.add_argument("--hide-small", action="store_true",
                      help="draw through reshapes and transposes")
    draw.add_argument("--hidden", type=whole_number(1), default=4, metavar="H",
                      help="hidden size (default 4)")
    draw.add_argument("--input-size", type=whole_number(1), default=3, metavar="D",
                      help="input size (default 3)")
    draw.add_argument("--batch", type=whole_number(1), default=2, metavar="N",
                      help="batch size (default 2)")
    draw.add_argument("--seed", type=whole_number(0), default=0, metavar="N",
                      help="random seed (default 0)")

    books = sub.add_parser(
        "notebooks", help="write notebooks/*.ipynb from the docs pages (source checkout)",
        description="Turn every docs page in docs/index.md's reading order that has Python "
                    "blocks into notebooks/PAGE.ipynb: prose as Markdown cells, each "
                    "```python block as a code cell, after a Colab badge and a cell that "
                    "installs tinygrad_rnn when it is missing. --execute runs each in a "
                    "fresh kernel (in a temporary folder) and stores the outputs; it needs "
                    "nbformat, nbclient and ipykernel: pip install -e \".[notebooks]\". "
                    "--check needs nothing and exits 1 when a notebook is out of date.",
        epilog="examples:\n  tinygrad-rnn notebooks --execute        # what is committed\n"
               "  tinygrad-rnn notebooks --check\n"
               "  tinygrad-rnn notebooks --execute --pages engine,tutorial_1_tensors",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    books.add_argument("--check", action="store_true",
                       help="write nothing; list out-of-date notebooks, exit 1 if any")
    books.add_argument("--execute", action="store_true",
                       help="run each notebook in a fresh kernel and keep the outputs")
    books.add_argument("--pages", metavar="A,B,...",
                       help="only these pages (names without .md); default all")

    plot = sub.add_parser(
        "plot", help="redraw a run folder's figures from its CSV files",
        description="Draw the learning curves, gradient norms (before and after clipping), "
                    "learning rate and, when the run had a gradient monitor, the heatmap of "
                    "||dL/dh_t|| over training, from RUN_DIR's metrics.csv and "
                    "state_norms.csv alone (and from each run folder directly inside it).",
        epilog="examples:\n  tinygrad-rnn plot runs/vg\n"
               "  tinygrad-rnn plot runs/small/points/cell=lstm__T=10__rep=0 --out figs",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    plot.add_argument("run_dir", metavar="RUN_DIR", help="a run folder")
    plot.add_argument("--out", metavar="DIR",
                      help="folder for the figures (default RUN_DIR/figures)")

    sweep = sub.add_parser(
        "sweep", help="run a grid of experiments, one run folder per point",
        description="Run every point of CONFIG.toml's grid (and random samples) of a "
                    "registered experiment, each in its own run folder under "
                    "DIR/points/, with a seed derived from the config's seed and the "
                    "point. Finished points are skipped when the command is run again; a "
                    "failed point is retried once and reported. Writes DIR/results.csv, "
                    "prints a summary table and draws DIR/summary.png. --scheduler "
                    "ADDRESS runs the points on a Dask cluster (pip install "
                    "\"tinygrad_rnn[sweep]\").",
        epilog="examples:\n"
               "  tinygrad-rnn sweep sweeps/adding_small_sweep.toml --out runs/small\n"
               "  tinygrad-rnn sweep sweeps/adding_full_sweep.toml --out runs/full "
               "--workers 8\n"
               "  tinygrad-rnn sweep sweeps/adding_full_sweep.toml --out runs/full "
               "--scheduler tcp://SCHEDULER:8786",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sweep.add_argument("config", metavar="CONFIG.toml", help="the sweep's TOML file")
    sweep.add_argument("--out", required=True, metavar="DIR",
                       help="the sweep's folder (created; run again to resume)")
    sweep.add_argument("--workers", type=whole_number(1), default=None, metavar="N",
                       help="local worker processes (default: the config's workers, else "
                            "the usable CPUs); 1 runs the points in this process")
    sweep.add_argument("--scheduler", metavar="ADDRESS",
                       help="a Dask scheduler address (tcp://host:8786) to run the points on")
    sweep.add_argument("--no-progress", action="store_true",
                       help=f"no progress bar ({PROGRESS_ENV}=0 does the same)")

    from . import exercises  # stdlib imports only: the parser stays fast to build
    exercises.add_parser(sub)

    parser.set_defaults(commands=sub.choices)
    sub.add_parser("info", help="versions, backends, BLAS, threads, Graphviz",
                   description="Print versions (tinygrad_rnn, Python, NumPy, matplotlib, "
                               "tqdm, hypothesis, torch, cupy), the array backends, BLAS "
                               "and thread settings, whether Graphviz's dot is found, and "
                               "the CPU count.")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``tinygrad-rnn`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code.

    Usage errors print argparse's message and return 2 instead of raising SystemExit, so the
    function can be called in-process.
    """
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args, extra = parser.parse_known_args(argv)
        if extra and args.command != "bench":
            which = parser if args.command is None else args.commands[args.command]
            which.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # --help, --version, or a usage error (code 2)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    if args.command is None:  # bare `tinygrad-rnn`: the help, as --help gives it
        parser.print_help()
        return 0
    if extra and extra[0] == "--":
        extra = extra[1:]
    from . import malloc_tuning
    malloc_tuning.keep_freed_memory()  # freed memory stays for the next step (its docstring)
    try:
        if args.command == "demo":
            return _cmd_demo(args)
        if args.command == "gradcheck":
            return _cmd_gradcheck(args)
        if args.command == "bench":
            return _cmd_bench(args, extra)
        if args.command == "graph":
            return _cmd_graph(args)
        if args.command == "notebooks":
            return _cmd_notebooks(args)
        if args.command == "plot":
            return _cmd_plot(args)
        if args.command == "sweep":
            return _cmd_sweep(args)
        if args.command == "exercises":
            from . import exercises
            return exercises.run_cli(args)
        return _cmd_info(args)
    except UsageError as err:
        print(f"tinygrad-rnn {args.command}: error: {err}", file=sys.stderr)
        return 2
