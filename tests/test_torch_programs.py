"""Real PyTorch RNN programs run with only their imports renamed (issue #14).

Each program in tests/torch_programs/ is written for torch. It runs twice: as written, under
torch, and with its import lines (and nothing else) rewritten to tinygrad_rnn::

    import torch                      -> import tinygrad_rnn as torch
    import torch.nn as nn             -> import tinygrad_rnn.nn as nn
    import torch.nn.functional as F   -> import tinygrad_rnn.nn.functional as F
    import torch.optim as optim       -> import tinygrad_rnn.optim as optim
    from torch.utils.data import ...  -> from tinygrad_rnn.utils.data import ...

Both runs start from the same weights (the runner copies each torch module's state_dict into
the renamed program's module through the program's ``init_hook``) and work in float64; the
losses they return must agree to 1e-10.
"""
from __future__ import annotations

import importlib.util
import re
import sys
import types
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

PROGRAM_DIR = Path(__file__).parent / "torch_programs"
PROGRAMS = sorted(p.stem for p in PROGRAM_DIR.glob("*.py") if not p.stem.startswith("_"))
STEPS = 3
RTOL, ATOL = 1e-10, 1e-12

# the renames of issue #14, one whole import line each
_RENAMES = [
    (re.compile(r"^import torch$"), "import tinygrad_rnn as torch"),
    (re.compile(r"^import torch\.([\w.]+) as (\w+)$"), r"import tinygrad_rnn.\1 as \2"),
    (re.compile(r"^from torch\.([\w.]+) import (.+)$"), r"from tinygrad_rnn.\1 import \2"),
]


def rename_imports(source: str) -> str:
    """``source`` with its torch import lines rewritten to tinygrad_rnn, nothing else.

    Raises
    ------
    ValueError
        If an import of torch has a form the renames do not cover.
    """
    lines = []
    for number, line in enumerate(source.splitlines(), 1):
        for pattern, replacement in _RENAMES:
            if pattern.match(line):
                line = pattern.sub(replacement, line)
                break
        else:
            if re.match(r"^\s*(import|from)\s+torch\b", line):
                raise ValueError(f"rename_imports: line {number} imports torch in a form the "
                                 f"renames do not cover: {line!r}")
        lines.append(line)
    return "\n".join(lines) + "\n"


def load_program(name: str, renamed: bool) -> types.ModuleType:
    """The program as a fresh module, its source renamed or not (line numbers unchanged)."""
    path = PROGRAM_DIR / f"{name}.py"
    source = path.read_text()
    if renamed:
        source = rename_imports(source)
    module_name = f"torch_program_{name}_{'renamed' if renamed else 'torch'}"
    module = types.ModuleType(module_name)
    module.__file__ = str(path)
    sys.modules[module_name] = module  # dataclasses and pickling look modules up
    exec(compile(source, str(path), "exec"), module.__dict__)
    return module


def _run(module: types.ModuleType, lib: Any, init_hook: Callable) -> list[float]:
    """``module.main`` with the library's default dtype restored afterwards."""
    get_default = getattr(lib, "get_default_dtype", None)
    old = get_default() if get_default is not None else None
    try:
        return module.main(steps=STEPS, seed=0, init_hook=init_hook)
    finally:
        if old is not None:
            lib.set_default_dtype(old)


def run_under_torch(name: str) -> tuple[list[float], dict[str, dict[str, np.ndarray]]]:
    """The program's losses under torch and the initial weights of each of its modules."""
    torch = pytest.importorskip("torch")
    weights: dict[str, dict[str, np.ndarray]] = {}

    def capture(module_name: str, module: Any) -> None:
        weights[module_name] = {
            key: value.detach().cpu().numpy().copy()
            for key, value in module.state_dict().items()
        }

    losses = _run(load_program(name, renamed=False), torch, capture)
    return losses, weights


@pytest.mark.parametrize("name", PROGRAMS)
def test_program_runs_under_torch(name: str) -> None:
    losses, weights = run_under_torch(name)
    assert weights, f"{name}: main() never called init_hook"
    assert len(losses) >= STEPS and all(np.isfinite(losses))


@pytest.mark.parametrize("name", PROGRAMS)
def test_program_matches_torch_with_imports_renamed(name: str) -> None:
    expected, weights = run_under_torch(name)
    import tinygrad_rnn as tr

    def load(module_name: str, module: Any) -> None:
        state = {key: tr.tensor(value) for key, value in weights[module_name].items()}
        module.load_state_dict(state)

    got = _run(load_program(name, renamed=True), tr, load)
    assert len(got) == len(expected)
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), expected, rtol=RTOL,
                               atol=ATOL, err_msg=f"{name}: losses differ from torch's")


def test_rename_imports_rewrites_only_import_lines() -> None:
    source = ("import math\nimport torch\nimport torch.nn as nn\n"
              "import torch.nn.functional as F\nimport torch.optim as optim\n"
              "from torch.utils.data import DataLoader, TensorDataset\n"
              "x = torch.zeros(2)  # import torch\n")
    assert rename_imports(source) == (
        "import math\nimport tinygrad_rnn as torch\nimport tinygrad_rnn.nn as nn\n"
        "import tinygrad_rnn.nn.functional as F\nimport tinygrad_rnn.optim as optim\n"
        "from tinygrad_rnn.utils.data import DataLoader, TensorDataset\n"
        "x = torch.zeros(2)  # import torch\n")
    with pytest.raises(ValueError, match="line 1"):
        rename_imports("import torch as T\n")
