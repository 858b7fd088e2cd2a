"""The package as it ships: metadata that agrees with itself, and a wheel that holds what an
install needs (the demos, ``py.typed``, the LICENSE).

The wheel smoke run (install it in a fresh environment outside the checkout and run the
command line from a temporary folder) is in .ci/run: it needs a new virtual environment.
"""
from __future__ import annotations

import ast
import configparser
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tinygrad_rnn"


def setup_cfg() -> configparser.ConfigParser:
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(ROOT / "setup.cfg", encoding="utf-8")
    return cfg


def module_constant(path: Path, name: str) -> str:
    """A string constant assigned at the top level of a module (read, not imported)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets):
            assert isinstance(node.value, ast.Constant), f"{path}: {name} is not a constant"
            return str(node.value.value)
    raise AssertionError(f"{path} assigns no {name}")


def version() -> str:
    return module_constant(PACKAGE / "__init__.py", "__version__")


def cff_fields() -> dict[str, str]:
    """The top-level scalar fields of CITATION.cff (a YAML subset is enough here)."""
    text = (ROOT / "CITATION.cff").read_text(encoding="utf-8")
    return {k: v.strip().strip("\"'") for k, v in
            re.findall(r"^([a-z][a-z-]*):[ \t]*(\S.*)?$", text, re.M) if v}


def test_one_repository_address() -> None:
    url = setup_cfg()["metadata"]["url"].strip()
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", url), url
    assert module_constant(PACKAGE / "notebooks.py", "REPO_URL") == url
    assert cff_fields()["repository-code"] == url
    urls = [line.split("=", 1)[1].strip() for line in
            setup_cfg()["metadata"]["project_urls"].strip().splitlines()]
    assert urls and all(u.startswith(url) for u in urls), urls


def test_version_is_the_latest_changelog_release() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$", text, re.M)
    assert releases, "CHANGELOG.md has no release headings '## [X.Y.Z] - YYYY-MM-DD'"
    assert releases[0][0] == version(), (
        f"__version__ is {version()}, CHANGELOG.md's latest release is {releases[0][0]}")
    assert re.search(r"^## \[Unreleased\]$", text, re.M)
    assert cff_fields()["version"] == version()
    assert cff_fields()["date-released"] == releases[0][1]
    # every release heading has its comparison link at the end of the file
    for release, _ in releases:
        assert re.search(rf"^\[{re.escape(release)}\]: https://", text, re.M), release


def test_citation_file_has_cff_1_2_required_fields() -> None:
    fields = cff_fields()
    assert fields["cff-version"] == "1.2.0"
    for key in ("message", "title", "license"):
        assert fields.get(key), key
    text = (ROOT / "CITATION.cff").read_text(encoding="utf-8")
    assert re.search(r"^authors:\n  - (name|family-names): \S", text, re.M)


def test_license_and_type_marker_ship() -> None:
    meta = setup_cfg()
    assert meta["metadata"]["license"].strip() == "MIT"
    assert meta["metadata"]["license_files"].strip() == "LICENSE"
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    assert "py.typed" in meta["options.package_data"]["tinygrad_rnn"]
    assert (PACKAGE / "py.typed").is_file()


def test_new_extras_are_pinned_to_a_major_version() -> None:
    extras = setup_cfg()["options.extras_require"]
    for name in ("dev", "docs", "notebooks"):
        for req in filter(None, (r.strip() for r in extras[name].splitlines())):
            assert re.search(r">=[\d.]+,<\d+$", req), f"extra {name}: {req} needs >=X,<Y"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("build", reason="building the wheel needs the build package: "
                        "pip install -e \".[dev]\"")
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--skip-dependency-check",
                           "--outdir", str(out), str(ROOT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (whl,) = out.glob("*.whl")
    return whl


def test_wheel_holds_demos_license_and_type_marker(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert wheel.name == f"tinygrad_rnn-{version()}-py3-none-any.whl"
    assert "tinygrad_rnn/py.typed" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith(".dist-info/LICENSE")
               for n in names), "LICENSE is not in the wheel"
    demos = {p.name for p in (PACKAGE / "demos").glob("*.py")}
    assert demos >= {"quickstart.py", "vanishing_gradients.py", "string_reversal.py",
                     "char_lm.py"}
    assert {f"tinygrad_rnn/demos/{d}" for d in demos} <= names
    # only the package: no tests, docs or benchmarks inside the wheel
    assert not [n for n in names if n.split("/")[0] in ("tests", "docs", "benchmarks")]
    metadata = zipfile.ZipFile(wheel).read(
        f"tinygrad_rnn-{version()}.dist-info/METADATA").decode()
    assert "Project-URL: Source, " in metadata
    assert "](docs/" not in metadata, "the long description has relative links"
