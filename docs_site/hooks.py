"""MkDocs hooks of the documentation site (mkdocs.yml ``hooks:``).

1. KaTeX served from the site itself (no CDN, so the site reads offline): its script,
   stylesheet and WOFF2 fonts are copied from a local KaTeX into ``assets/katex/``. Where from:
   ``$KATEX_DIR`` if set, else Debian's ``libjs-katex`` (``/usr/share/javascript/katex``), else
   npm's ``node_modules/katex/dist``; the build stops with the install commands when none is
   found.
2. The notebooks (``notebooks/*.ipynb``, generated from these pages) ship as downloads under
   ``notebooks/``, listed on a generated page ``notebooks.md`` with their Colab links.
3. The API reference: one generated page per module in ``API_MODULES`` (``api/NAME.md``, a
   mkdocstrings ``:::`` block), listed in mkdocs.yml's nav.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
KATEX_CANDIDATES = (Path("/usr/share/javascript/katex"), ROOT / "node_modules/katex/dist")
KATEX_FILES = ("katex.min.css",)
KATEX_SCRIPT = ("katex.min.js", "katex.js")  # Debian ships katex.min.js as a link to katex.js

#: module -> page title of the API reference (mkdocs.yml's nav lists the same pages)
API_MODULES = {
    "tinygrad_rnn": "tinygrad_rnn (tensors, gradcheck, save/load)",
    "tinygrad_rnn.functional": "tinygrad_rnn.functional",
    "tinygrad_rnn.nn": "tinygrad_rnn.nn",
    "tinygrad_rnn.bptt": "tinygrad_rnn.bptt",
    "tinygrad_rnn.optim": "tinygrad_rnn.optim",
    "tinygrad_rnn.training": "tinygrad_rnn.training",
    "tinygrad_rnn.truncation": "tinygrad_rnn.truncation",
    "tinygrad_rnn.monitor": "tinygrad_rnn.monitor",
    "tinygrad_rnn.explicit_jacobians": "tinygrad_rnn.explicit_jacobians",
    "tinygrad_rnn.testing": "tinygrad_rnn.testing",
    "tinygrad_rnn.lm": "tinygrad_rnn.lm",
    "tinygrad_rnn.decoding": "tinygrad_rnn.decoding",
    "tinygrad_rnn.data": "tinygrad_rnn.data",
    "tinygrad_rnn.viz": "tinygrad_rnn.viz",
}


def katex_dir() -> Path:
    env = os.environ.get("KATEX_DIR")
    for cand in ([Path(env)] if env else []) + list(KATEX_CANDIDATES):
        if (cand / "katex.min.css").is_file() and (cand / "fonts").is_dir():
            return cand
    raise PluginError(
        "the documentation site serves KaTeX itself and none was found: install it with "
        "`apt-get install libjs-katex` (Debian/Ubuntu) or `npm install katex` in the "
        "repository root, or set KATEX_DIR to a folder holding katex.min.css, katex(.min).js "
        "and fonts/")


def _static(config: MkDocsConfig, dest: str, src: Path) -> File:
    return File.generated(config, dest, abs_src_path=str(src))


def on_files(files: Files, config: MkDocsConfig, **kwargs: Any) -> Files:
    kdir = katex_dir()
    script = next(kdir / n for n in KATEX_SCRIPT if (kdir / n).is_file())
    files.append(_static(config, "assets/katex/katex.min.js", script.resolve()))
    files.append(_static(config, "assets/katex/katex.min.css", kdir / "katex.min.css"))
    files.append(_static(config, "assets/katex-render.js", HERE / "katex-render.js"))
    files.append(_static(config, "assets/katex-layout.css", HERE / "katex-layout.css"))
    for font in sorted((kdir / "fonts").glob("*.woff2")):
        files.append(_static(config, f"assets/katex/fonts/{font.name}", font.resolve()))

    rows = []
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        files.append(_static(config, f"notebooks/{nb.name}", nb))
        rows.append(nb)
    files.append(File.generated(config, "notebooks.md", content=_notebooks_page(rows)))

    for module, title in API_MODULES.items():
        name = module.split(".", 1)[1] if "." in module else "index"
        text = (f"# {title}\n\n::: {module}\n")
        files.append(File.generated(config, f"api/{name}.md", content=text))
    return files


def _notebooks_page(notebooks: list[Path]) -> str:
    from tinygrad_rnn import notebooks as nbmod

    order = {page.stem: i for i, page in enumerate(nbmod.notebook_pages(ROOT / "docs"))}
    notebooks = sorted(notebooks, key=lambda p: (order.get(p.stem, len(order)), p.stem))
    lines = ["# Notebooks", "",
             "Every page with code, as a Jupyter notebook with its outputs. They are generated "
             "from these pages (the Markdown is the source) by `tinygrad-rnn notebooks "
             "--execute`. The first code cell installs tinygrad_rnn when it is missing, so "
             "each one also runs on Colab.", "",
             "| page | notebook (download) | Colab |", "|---|---|---|"]
    for nb in notebooks:
        page = ROOT / "docs" / f"{nb.stem}.md"
        title = _title(page) if page.is_file() else nb.stem
        link = f"[{title}]({nb.stem}.md)" if page.is_file() else title
        lines.append(f"| {link} | [{nb.name}](notebooks/{nb.name}) "
                     f"| [open in Colab]({nbmod.colab_url(nb.name)}) |")
    return "\n".join(lines) + "\n"


def _title(page: Path) -> str:
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return page.stem
