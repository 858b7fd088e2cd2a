"""The package's layers (docs/architecture.md): no module imports a higher layer.

The layer table is read from docs/architecture.md itself, so the page and the rule cannot
drift apart. Every import of every module under tinygrad_rnn/ is read with ``ast``: at module
level and inside functions and methods alike (a deferred import is still a dependency), and
each one that reaches a higher layer is reported with its file, line and the two layers.

``testing`` (the test doubles and checkers: strategies, registry, the CuPy emulator) may
import anything; only the command-line layer (and the test suite, which is not in the
package) may import it.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tinygrad_rnn"
PAGE = ROOT / "docs" / "architecture.md"
TESTING = "testing"  # the row of docs/architecture.md's table that holds the test code

#: Imports that break the layering today, each with its reason. test_known_exceptions_are_
#: still_needed fails once one is no longer needed, so this list only shrinks.
KNOWN: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    """One import statement's target module, as found in ``path`` at ``line``."""

    path: str      # relative to the checkout, e.g. tinygrad_rnn/nn/recurrent.py
    line: int
    source: str    # the importing module, e.g. tinygrad_rnn.nn.recurrent
    target: str    # the imported module, e.g. tinygrad_rnn.monitor
    names: tuple   # the names imported from it (``from x import a, b``), or ()


# ----------------------------------------------------------------------------- the table
def layer_table(text: str) -> dict[str, int | str]:
    """Module name (relative to the package, '' for the package root) -> layer number, or
    'testing', from the table under "## The layers" of docs/architecture.md."""
    section = text.split("## The layers", 1)[1].split("\n## ", 1)[0]
    table: dict[str, int | str] = {}
    for row in re.findall(r"^\|([^|\n]*)\|([^|\n]*)\|", section, re.M):
        layer, modules = (cell.strip() for cell in row)
        if layer.isdigit():
            key: int | str = int(layer)
        elif layer == TESTING:
            key = TESTING
        else:  # the header and the --- line
            continue
        for name in re.findall(r"`([\w.]+)`", modules):
            name = "" if name == "tinygrad_rnn" else name
            assert name not in table, f"docs/architecture.md lists `{name}` twice"
            table[name] = key
    return table


def layer_of(module: str, table: dict[str, int | str]) -> int | str | None:
    """The layer of ``module`` (``tinygrad_rnn.nn.recurrent``): the entry of its longest
    dotted prefix in ``table`` (``nn`` covers ``nn.recurrent``); None when none matches."""
    parts = module.split(".")[1:]  # without the leading "tinygrad_rnn"
    for n in range(len(parts), -1, -1):
        name = ".".join(parts[:n])
        if name in table and (n or not parts):  # the root row covers the root only
            return table[name]
    return None


# ----------------------------------------------------------------------------- the imports
def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(path: Path, root: Path, modules: set[str]) -> list[Import]:
    """Every import of the package in the file ``path`` (anywhere in it: module level,
    functions, methods, ``if`` blocks), resolved to the module it loads: ``from . import x``
    is the submodule ``x`` when there is one, else the package; ``from .a import b`` is
    ``a`` (or ``a.b`` when that is a module)."""
    source = module_name(path, root)
    is_package = path.name == "__init__.py"
    rel = str(path.relative_to(root))
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
    for_checker = {id(n) for block in ast.walk(tree) if _is_type_checking(block)
                   for stmt in block.body for n in ast.walk(stmt)}
    found = []
    for node in ast.walk(tree):
        if id(node) in for_checker:
            continue  # under `if TYPE_CHECKING:`: read by type checkers, never run
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "tinygrad_rnn":
                    found.append(Import(rel, node.lineno, source, _known(alias.name, modules),
                                        ()))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = source.split(".") if is_package else source.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            elif (node.module or "").split(".")[0] == "tinygrad_rnn":
                prefix = node.module
            else:
                continue
            names = tuple(alias.name for alias in node.names)
            targets = {f"{prefix}.{n}" if f"{prefix}.{n}" in modules else prefix for n in names}
            for target in sorted(targets):
                found.append(Import(rel, node.lineno, source, _known(target, modules), names))
    return [imp for imp in found if imp.target != imp.source]


def _is_type_checking(node: ast.AST) -> bool:
    """An ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``) block."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _known(name: str, modules: set[str]) -> str:
    """``name`` cut back to the longest prefix that is a module of the package."""
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def package_imports(root: Path = ROOT, package: str = "tinygrad_rnn") -> list[Import]:
    paths = sorted(p for p in (root / package).rglob("*.py") if "__pycache__" not in p.parts)
    modules = {module_name(p, root) for p in paths}
    return [imp for p in paths for imp in imports_of(p, root, modules)]


# ----------------------------------------------------------------------------- the rules
def violations(imports: list[Import], table: dict[str, int | str]) -> list[str]:
    """One line per import that breaks the rules of docs/architecture.md."""
    problems = []
    top = max(v for v in table.values() if isinstance(v, int))
    for imp in imports:
        if imp.target == "tinygrad_rnn" and imp.names == ("__version__",):
            continue  # a constant of the package root, allowed everywhere
        src, dst = layer_of(imp.source, table), layer_of(imp.target, table)
        if src is None or dst is None or src == TESTING:
            continue  # unplaced modules are test_every_module_has_a_layer's failure
        if dst == TESTING:
            if src != top:
                problems.append(f"{imp.path}:{imp.line} imports {imp.target} (test code) from "
                                f"layer {src}; only layer {top} may import testing")
        elif dst > src:
            problems.append(f"{imp.path}:{imp.line} imports {imp.target} (layer {dst}) from "
                            f"{imp.source} (layer {src}): a lower layer imports a higher one")
    return problems


def _table() -> dict[str, int | str]:
    return layer_table(PAGE.read_text(encoding="utf-8"))


def _unexplained(problems: list[str]) -> list[str]:
    return [p for p in problems
            if not any(p.startswith(f"{path}:") and f" imports {target} " in p
                       for path, target in KNOWN)]


# ----------------------------------------------------------------------------- the tests
def test_no_module_imports_a_higher_layer() -> None:
    problems = [p for p in _unexplained(violations(package_imports(), _table()))
                if "(test code)" not in p]
    assert not problems, "\n".join(problems)


def test_nothing_below_the_command_line_imports_testing() -> None:
    problems = [p for p in _unexplained(violations(package_imports(), _table()))
                if "(test code)" in p]
    assert not problems, "\n".join(problems)


def test_every_module_has_a_layer() -> None:
    table = _table()
    paths = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)
    unplaced = [str(p.relative_to(ROOT)) for p in paths
                if layer_of(module_name(p, ROOT), table) is None]
    assert not unplaced, ("modules in no layer of docs/architecture.md (add each to the row "
                          "where it belongs): " + ", ".join(unplaced))


def test_known_exceptions_are_still_needed() -> None:
    problems = violations(package_imports(), _table())
    stale = [f"{path} -> {target}" for path, target in KNOWN
             if not any(p.startswith(f"{path}:") and f" imports {target} " in p
                        for p in problems)]
    assert not stale, "KNOWN lists exceptions that no longer occur; remove: " + ", ".join(stale)


def test_the_checker_reports_file_line_and_layers(tmp_path: Path) -> None:
    """A small package written to break each rule once: a module-level import of a higher
    layer, one deferred into a function, one of the test code; the package's own layers, an
    allowed downward import and an import for type checkers only pass."""
    pkg = tmp_path / "tinygrad_rnn"
    (pkg / "ops").mkdir(parents=True)
    (pkg / "testing").mkdir()
    for name in ("__init__.py", "ops/__init__.py", "testing/__init__.py", "nn.py",
                 "testing/fake.py"):
        (pkg / name).write_text("")
    (pkg / "backend.py").write_text("import numpy as np\n")
    (pkg / "ops" / "base.py").write_text(
        "from ..backend import np\n"          # downward: fine
        "from .. import nn\n"                 # line 2: ops imports nn
        "def f():\n"
        "    from ..testing import fake\n"    # line 4: deferred, and test code
        "    import tinygrad_rnn.nn.x\n"      # line 5: absolute, cut back to tinygrad_rnn.nn
    )
    (pkg / "cli.py").write_text("from .testing import fake\nfrom . import __version__\n")
    (pkg / "backend_types.py").write_text(  # annotations only: never imported at run time
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .nn import Module\n")
    table = {"backend": 1, "backend_types": 1, "ops": 2, "nn": 6, "cli": 11, "": 11,
             "testing": TESTING}
    problems = violations(package_imports(tmp_path), table)
    assert problems == [
        "tinygrad_rnn/ops/base.py:2 imports tinygrad_rnn.nn (layer 6) from tinygrad_rnn.ops.base "
        "(layer 2): a lower layer imports a higher one",
        "tinygrad_rnn/ops/base.py:4 imports tinygrad_rnn.testing.fake (test code) from layer 2; "
        "only layer 11 may import testing",
        "tinygrad_rnn/ops/base.py:5 imports tinygrad_rnn.nn (layer 6) from tinygrad_rnn.ops.base "
        "(layer 2): a lower layer imports a higher one",
    ]


def test_the_table_is_read_from_the_page() -> None:
    table = _table()
    assert table["backend"] == 1 and table["ops"] == 2 and table["bptt"] == 3
    assert table["tensor"] == table["engine"] == table["dtypes"] == table["creation"] == 4
    assert table["nn"] == table["monitor"] < table["optim"] < table["lm"] < table["cli"]
    assert table[""] == table["cli"] and table["testing"] == TESTING
    assert layer_of("tinygrad_rnn.nn.recurrent", table) == table["nn"]
    assert layer_of("tinygrad_rnn.testing.cupy_emulator", table) == TESTING
    assert layer_of("tinygrad_rnn", table) == table["cli"]
    with pytest.raises(AssertionError, match="twice"):
        layer_table("## The layers\n| 1 | `ops` | a |\n| 2 | `ops` | b |\n")


# ----------------------------------------------------------------------------- private names
def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_crossings(root: Path) -> list[str]:
    """Every use, in the package under ``root``, of another module's underscore name: a
    ``from M import _name`` and an ``M._name`` through a module alias. A private *module*
    (``from .. import _validate``: a package's internal module) is allowed; a private name
    inside another module is not (give it a public, documented name, or keep it at home)."""
    def is_module(dotted: str) -> bool:
        path = root.joinpath(*dotted.split("."))
        return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()

    problems = []
    for path in sorted((root / "tinygrad_rnn").rglob("*.py")):
        here = _module_name(path, root)
        package = here.split(".") if path.name == "__init__.py" else here.split(".")[:-1]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else []
                source = ".".join(base + ([node.module] if node.module else []))
                if not source.startswith("tinygrad_rnn"):
                    continue
                for alias in node.names:
                    if is_module(f"{source}.{alias.name}"):
                        aliases[alias.asname or alias.name] = f"{source}.{alias.name}"
                    elif _is_private(alias.name) and source != here:
                        problems.append(f"{path.relative_to(root)}:{node.lineno} imports "
                                        f"{alias.name} from {source}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("tinygrad_rnn") and alias.asname:
                        aliases[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases and _is_private(node.attr)
                    and aliases[node.value.id] != here
                    and not is_module(f"{aliases[node.value.id]}.{node.attr}")):
                problems.append(f"{path.relative_to(root)}:{node.lineno} uses "
                                f"{node.value.id}.{node.attr} of {aliases[node.value.id]}")
    return problems


def test_no_private_name_crosses_a_module() -> None:
    assert not private_crossings(ROOT), "\n".join(private_crossings(ROOT))


def test_the_private_name_check_finds_both_forms(tmp_path: Path) -> None:
    pkg = tmp_path / "tinygrad_rnn"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "_internal.py").write_text("x = 1\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("def _helper():\n    return 1\n")
    (pkg / "sub" / "b.py").write_text(
        "from .a import _helper\nfrom . import a\nfrom .. import _internal\n"
        "def f():\n    return a._helper() + _internal.x + _helper()\n")
    assert private_crossings(tmp_path) == [
        "tinygrad_rnn/sub/b.py:1 imports _helper from tinygrad_rnn.sub.a",
        "tinygrad_rnn/sub/b.py:5 uses a._helper of tinygrad_rnn.sub.a",
    ]


# ----------------------------------------------------------------------------- module length
#: A module longer than this says at the top of its docstring why it is one module.
LONG_MODULE = 700
REASON = re.compile(r"Why (?:one|this) module|Over 700 lines for a reason")


def test_every_long_module_states_why_it_is_one_module() -> None:
    """Issue 15's reading target: a module reads as one idea; one over LONG_MODULE lines
    states, in its docstring, why it is not split (tensor.py: torch's Tensor API is one
    class; graph.py: one feature whose stages share one record; ...)."""
    silent = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > LONG_MODULE:
            doc = ast.get_docstring(ast.parse(text)) or ""
            if not REASON.search(doc):
                silent.append(f"{path.relative_to(ROOT)} ({len(text.splitlines())} lines)")
    assert not silent, "long modules that do not say why they are one module: " + \
        ", ".join(silent)
