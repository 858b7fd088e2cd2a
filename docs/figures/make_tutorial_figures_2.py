"""Write the figures of tutorials 4-6 (docs/tutorial_4_vanishing.md, ...) from the pages' own
code.

Run:  python docs/figures/make_tutorial_figures_2.py

Each page's ```python blocks run in order, in one namespace, in a temporary folder (as the
docs tests run them). The PNG files a page shows as ``figures/tutorials/<name>.png`` are then
copied from that folder into docs/figures/tutorials/.
"""
from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

DOCS = Path(__file__).resolve().parents[1]
OUT = DOCS / "figures" / "tutorials"
PAGES = ("tutorial_4_vanishing.md", "tutorial_5_attention.md", "tutorial_6_check_your_op.md")
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
FIGURE = re.compile(r"\(figures/tutorials/([\w.-]+\.png)\)")


def run_page(page: Path) -> list[str]:
    """Run the page's Python blocks in a fresh folder; copy its figures; return their names."""
    import tinygrad_rnn as tr

    text = page.read_text(encoding="utf-8")
    names = list(dict.fromkeys(FIGURE.findall(text)))
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        try:
            tr.manual_seed(0)
            namespace = {"__name__": "__main__"}
            for k, source in enumerate(BLOCK.findall(text)):
                exec(compile(source, f"{page.name}, block {k}", "exec"), namespace)
            OUT.mkdir(parents=True, exist_ok=True)
            for name in names:
                shutil.copyfile(name, OUT / name)
        finally:
            os.chdir(here)
    return names


def main() -> int:
    for name in PAGES:
        page = DOCS / name
        if not page.exists():
            print(f"{name}: not written yet, skipped")
            continue
        print(f"{name}: wrote {', '.join(run_page(page))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
