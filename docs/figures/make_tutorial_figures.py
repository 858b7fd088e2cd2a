"""Redraw the figures of the tutorial pages by running the pages themselves.

Each tutorial page (docs/tutorial_*.md) saves its figure into the current folder from one of
its own ```python blocks. This script runs all the Python blocks of a page in order, in one
namespace, with docs/figures/tutorials/ as the current folder, so the committed PNG files are
exactly what the page's code draws. Run it from anywhere:

    python docs/figures/make_tutorial_figures.py                 # tutorials 1-3
    python docs/figures/make_tutorial_figures.py tutorial_2_first_rnn

(The figures of tutorials 4-6 come from docs/figures/make_tutorial_figures_2.py.)
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # small matrices: one thread is faster

DOCS = Path(__file__).resolve().parents[1]
OUT = DOCS / "figures" / "tutorials"
OPEN = re.compile(r"^```(python|py|python3)\s*$")
PAGES = ("tutorial_1_tensors", "tutorial_2_first_rnn", "tutorial_3_bptt_by_hand")


def python_blocks(page: Path) -> list[tuple[int, str]]:
    """(first line, source) of each ```python block of a page (fences at the margin)."""
    blocks, lines, i = [], page.read_text(encoding="utf-8").splitlines(), 0
    while i < len(lines):
        if OPEN.match(lines[i]):
            j = i + 1
            while lines[j].strip() != "```":
                j += 1
            blocks.append((i + 2, "\n".join(lines[i + 1:j]) + "\n"))
            i = j
        i += 1
    return blocks


def run_page(page: Path) -> None:
    import tinygrad_rnn as tr

    tr.manual_seed(0)  # as the documentation tests do before a page's first block
    namespace = {"__name__": "__main__"}
    here = os.getcwd()
    os.chdir(OUT)
    try:
        for line, source in python_blocks(page):
            # padded so that a traceback shows the Markdown file's line numbers
            exec(compile("\n" * (line - 1) + source, str(page), "exec"), namespace)
    finally:
        os.chdir(here)


def main(names: list[str]) -> None:
    pages = [DOCS / f"{name}.md" for name in (names or PAGES)]
    for page in pages:
        print(f"== {page.name}")
        run_page(page)
    print(f"figures in {OUT}")


if __name__ == "__main__":
    main(sys.argv[1:])
