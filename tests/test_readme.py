"""README.md works wherever it is shown: on the repository host, and as the long description
of a package index page, where relative links and images break (the index has no files
beside the README). So every link and image in README is absolute, built on the repository
address of setup.cfg's ``url``, and each one that points into the repository names a file of
this checkout (and a heading that exists, for an ``#anchor``).

README keeps its prose readable with reference-style links (``[text][label]``) whose
definitions sit at the end of the file.
"""
from __future__ import annotations

import configparser
import re
from pathlib import Path

import pytest

from tests.docs.test_docs import anchors  # GitHub's heading ids of a page, one parser

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

INLINE = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_USE = re.compile(r"!?\[((?:[^\]\[]|\[[^\]]*\])*)\]\[([^\]]*)\]")
REF_DEF = re.compile(r"^[ \t]{0,3}\[([^\]]+)\]:[ \t]*<?(\S+?)>?(?:[ \t]+.*)?$", re.M)
HTML = re.compile(r"<(?:img|a|source)\b[^>]*?\b(?:src|href|srcset)\s*=\s*\"([^\"]+)\"", re.I)


def repository_url() -> str:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg", encoding="utf-8")
    return cfg["metadata"]["url"].strip().rstrip("/")


def without_code_blocks(text: str) -> str:
    """Markdown without fenced code blocks and HTML comments."""
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.M | re.S)
    return re.sub(r"<!--.*?-->", "", text, flags=re.S)


def prose(text: str) -> str:
    """Markdown without code (blocks and inline) and HTML comments: where links live."""
    return re.sub(r"`[^`\n]*`", "", without_code_blocks(text))


def definitions(text: str) -> dict[str, str]:
    return {label.strip().lower(): url for label, url in REF_DEF.findall(text)}


def targets(text: str) -> list[str]:
    body = prose(text)
    return INLINE.findall(body) + list(definitions(body).values()) + HTML.findall(body)


def in_checkout(url: str, base: str) -> tuple[Path, str]:
    """The checkout's file (and anchor) an absolute repository address points to."""
    blob, raw = f"{base}/blob/main/", base.replace("https://github.com/",
                                                   "https://raw.githubusercontent.com/") + "/main/"
    address, _, anchor = url.partition("#")
    if url.startswith(base + "#") or address in (base, base + "/"):
        return README, anchor
    for prefix in (blob, raw, f"{base}/tree/main/"):
        if address.startswith(prefix):
            return ROOT / address[len(prefix):], anchor
    raise AssertionError(f"README links into the repository by an address this test cannot "
                         f"map to a file ({url}); use {blob}PATH, or {raw}PATH for images")


TEXT = README.read_text(encoding="utf-8")
TARGETS = list(dict.fromkeys(targets(TEXT)))


def test_the_checks_see_readmes_links() -> None:
    assert len(TARGETS) >= 15, TARGETS
    assert any(t.endswith(".png") for t in TARGETS), "README's figures were not found"


@pytest.mark.parametrize("target", TARGETS)
def test_link_is_absolute(target: str) -> None:
    assert re.match(r"^(https?|mailto):", target), (
        f"README.md links to {target!r}: a relative link breaks on a package index page. "
        f"Write it as a reference link, [text][{target}], and define it at the end of "
        f"README.md as {repository_url()}/blob/main/{target} (an image: "
        f"https://raw.githubusercontent.com/.../main/{target})")


def test_reference_links_are_defined() -> None:
    defined = definitions(prose(TEXT))
    used = {(label or text).strip().lower() for text, label in REF_USE.findall(prose(TEXT))}
    assert not used - set(defined), f"undefined reference labels in README: {used - set(defined)}"
    assert not set(defined) - used, f"README defines links it never uses: {set(defined) - used}"


@pytest.mark.parametrize("target", [t for t in TARGETS if "OWNER" in t or "tinygrad_rnn" in t])
def test_repository_link_names_an_existing_file(target: str) -> None:
    base = repository_url()
    raw_base = base.replace("https://github.com/", "https://raw.githubusercontent.com/")
    if not (target.startswith(base) or target.startswith(raw_base)):
        pytest.fail(f"README links to {target}, which is not under setup.cfg's url ({base})")
    path, anchor = in_checkout(target, base)
    assert path.exists(), f"README links to {target}, but {path.relative_to(ROOT)} does not exist"
    if anchor and path.suffix == ".md":
        assert anchor in anchors(path), (
            f"README links to {target}, but {path.relative_to(ROOT)} has no heading with id "
            f"{anchor!r}")
    if raw_base in target:
        assert path.suffix in (".png", ".svg", ".jpg", ".gif"), (
            f"{target}: raw addresses are for images; link pages with {base}/blob/main/")


def test_rendered_readme_has_no_relative_address() -> None:
    """As a package index renders it (Markdown to HTML), README has only absolute addresses."""
    markdown = pytest.importorskip("markdown", reason="the markdown package comes with the "
                                   "docs extra: pip install -e \".[docs]\"")
    html = markdown.markdown(TEXT, extensions=["tables", "fenced_code"])
    addresses = re.findall(r"\b(?:href|src)=\"([^\"]*)\"", html)
    assert len(addresses) >= 15
    relative = [a for a in addresses if not re.match(r"^(https?|mailto):", a)]
    assert not relative, f"relative addresses in the rendered README: {relative}"
    assert "][" not in re.sub(r"<code>.*?</code>", "", html, flags=re.S), \
        "a reference link was left unresolved"


def test_link_checks_catch_relative_links() -> None:
    text = ("See [a](docs/a.md) and ![f][docs/f.png] and <img src=\"x.svg\">.\n\n"
            "```\n[in](code.md)\n```\n\n[docs/f.png]: docs/f.png\n")
    assert targets(text) == ["docs/a.md", "docs/f.png", "x.svg"]
