"""The documentation site (mkdocs.yml), built and read in a real browser.

* every docs/*.md page is in the nav, and the nav's API pages are the ones the build hook
  generates (no tools needed);
* ``mkdocs build --strict`` passes: broken links and anchors, docstrings the API reference
  cannot parse, pages outside the nav all fail it (needs the ``docs`` extra and KaTeX);
* headless Chromium loads every page from a local HTTP server with every other host blocked,
  and finds every formula typeset by KaTeX (no raw ``$...$`` or ``\\(...\\)`` left, no KaTeX
  error), every image loaded, every internal link and anchor resolving and no console error;
  it saves screenshots of three pages under build/site-screenshots/ (needs Playwright, from
  the ``docs`` extra, and a Chromium: Debian's ``chromium`` package, or ``$CHROMIUM``).

Each tool that is missing skips its tests with a message that says how to install it; CI
(.ci/run) installs them all.
"""
from __future__ import annotations

import functools
import http.server
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
MKDOCS_YML = ROOT / "mkdocs.yml"
SCREENSHOTS = ROOT / "build" / "site-screenshots"
#: page (URL path under the site) -> screenshot name; the recurrent page is scrolled to its
#: first numbered display equation
SCREENSHOT_PAGES = {"": "index.png", "recurrent/": "recurrent.png", "api/nn/": "api_nn.png"}


def nav_pages() -> list[str]:
    """The Markdown files mkdocs.yml's nav lists, in order (read without a YAML library)."""
    text = MKDOCS_YML.read_text(encoding="utf-8")
    nav = text[text.index("\nnav:"):]
    return re.findall(r"^\s*-\s*(?:[^:\n]+:\s*)?([\w/.-]+\.md)\s*$", nav, re.M)


def hook_module():
    spec = importlib.util.spec_from_file_location("docs_site_hooks",
                                                  ROOT / "docs_site" / "hooks.py")
    assert spec and spec.loader
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed: pip install -e \".[docs]\"")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ----------------------------------------------------------------------------- the nav
def test_every_docs_page_is_in_the_nav() -> None:
    listed = nav_pages()
    pages = sorted(p.name for p in DOCS.glob("*.md"))
    missing = [p for p in pages if p not in listed]
    assert not missing, (f"docs pages missing from mkdocs.yml's nav (add each where it belongs "
                         f"in the reading order): {missing}")
    assert len(listed) == len(set(listed)), "a page is listed twice in mkdocs.yml's nav"
    generated = {"notebooks.md"} | {p for p in listed if p.startswith("api/")}
    stale = [p for p in listed if p not in generated and not (DOCS / p).is_file()]
    assert not stale, f"mkdocs.yml's nav lists pages that do not exist: {stale}"


def test_nav_api_pages_are_the_generated_ones() -> None:
    hooks = hook_module()
    generated = [("api/index.md" if "." not in m else f"api/{m.split('.', 1)[1]}.md")
                 for m in hooks.API_MODULES]
    assert [p for p in nav_pages() if p.startswith("api/")] == generated


# ----------------------------------------------------------------------------- the build
@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    hooks = hook_module()
    try:
        hooks.katex_dir()
    except Exception as err:  # the hook's PluginError, with the install commands
        pytest.skip(f"no KaTeX to serve with the site: {err}")
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(out)], cwd=ROOT, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stderr[-6000:]}"
    return out


def test_site_builds_with_warnings_as_errors(site: Path) -> None:
    for page in nav_pages():
        stem = page[:-3]
        html = site / (stem[:-5] if stem.endswith("index") else stem + "/") / "index.html"
        assert html.is_file(), f"{page} was not built ({html})"
    assert (site / "assets/katex/katex.min.js").is_file()
    assert list((site / "assets/katex/fonts").glob("*.woff2")), "KaTeX's fonts were not copied"
    notebooks = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks and notebooks == sorted(p.name for p in (site / "notebooks").glob("*.ipynb"))
    # the math is marked for KaTeX and nothing in the pages fetches from another host
    recurrent = (site / "recurrent/index.html").read_text(encoding="utf-8")
    assert recurrent.count('class="arithmatex"') > 100
    for html in site.rglob("*.html"):
        text = html.read_text(encoding="utf-8")
        external = re.findall(r"<(?:script|link|img)\b[^>]*(?:src|href)=\"(https?:)?//", text)
        assert not external, f"{html.relative_to(site)} loads something from another host"


# ----------------------------------------------------------------------------- the browser
def chromium_path() -> str | None:
    for cand in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if cand and (found := shutil.which(cand)):
            return found
    return None


# Chromium as root in a container needs --no-sandbox; the rest keep it off the network
# (this machine has none beyond the package registries) and quiet
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-quic", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]

# run in each page: what a reader would see wrong
PAGE_CHECK = r"""() => {
  const marked = [...document.querySelectorAll('.arithmatex')];
  const untypeset = marked.filter(el => !el.querySelector('.katex'))
                          .map(el => el.textContent.slice(0, 80));
  const errors = [...document.querySelectorAll('.katex-error')]
                   .map(el => (el.getAttribute('title') || '') + ' in ' + el.textContent.slice(0, 80));
  const raw = [];
  const walker = document.createTreeWalker(document.querySelector('article') || document.body,
                                           NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (n.parentElement.closest('code, pre, script, style, .katex, .arithmatex')) continue;
    const t = n.textContent;
    const m = t.match(/\$[^$\n]+\$|\\\(|\\\)|\\\[|\\\]/);
    if (m) raw.push(t.slice(Math.max(0, m.index - 30), m.index + 50));
  }
  // a numbered display equation whose tag is drawn on the equation (KaTeX's absolute tag),
  // or cut off by the column's edge
  const overlaps = [];
  for (const tag of document.querySelectorAll('.katex-display .tag')) {
    const t = tag.getBoundingClientRect();
    const hit = [...tag.parentElement.querySelectorAll(':scope > .base')].some(b => {
      const r = b.getBoundingClientRect();
      return t.left < r.right - 0.5 && r.left < t.right - 0.5
             && t.top < r.bottom - 0.5 && r.top < t.bottom - 0.5;
    });
    const box = tag.closest('.katex-display').getBoundingClientRect();
    if (hit || t.right > box.right + 0.5) overlaps.push(tag.textContent);
  }
  const images = [...document.images].filter(im => !(im.complete && im.naturalWidth > 0))
                                     .map(im => im.getAttribute('src'));
  const links = [...document.querySelectorAll('a[href]')].map(a => a.href);
  const ids = [...document.querySelectorAll('[id]')].map(el => el.id);
  const names = [...document.querySelectorAll('a[name]')].map(el => el.getAttribute('name'));
  return {formulas: marked.length, untypeset, errors, raw, overlaps, images, links,
          ids: ids.concat(names)};
}"""


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the stdlib's name)
        pass


@pytest.fixture(scope="module")
def served(site: Path):
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def site_pages(site: Path) -> list[str]:
    """URL paths of every page of the built site ('' is the home page)."""
    pages = []
    for html in sorted(site.rglob("index.html")):
        rel = html.parent.relative_to(site).as_posix()
        pages.append("" if rel == "." else rel + "/")
    return pages


def test_every_page_reads_right_in_chromium(site: Path, served: str) -> None:
    pytest.importorskip("playwright.sync_api",
                        reason="Playwright is not installed: pip install -e \".[docs]\"")
    from playwright.sync_api import sync_playwright

    exe = chromium_path()
    if exe is None:
        pytest.skip("no Chromium found: apt-get install chromium (Debian/Ubuntu), or set "
                    "CHROMIUM to a Chrome or Chromium executable")
    pages = site_pages(site)
    assert len(pages) >= len(nav_pages())
    problems: list[str] = []
    seen_ids: dict[str, set[str]] = {}
    links: dict[str, list[str]] = {}
    formulas = 0
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        messages: list[str] = []

        def block_other_hosts(route):  # the site must read offline
            if urlparse(route.request.url).hostname == "127.0.0.1":
                return route.continue_()
            messages.append(f"request to another host: {route.request.url}")
            return route.abort()

        context.route("**/*", block_other_hosts)
        page = context.new_page()
        page.on("console", lambda m: messages.append(f"console {m.type}: {m.text}")
                if m.type == "error" else None)
        page.on("pageerror", lambda e: messages.append(f"script error: {e}"))
        page.on("response", lambda r: messages.append(f"HTTP {r.status}: {r.url}")
                if r.status >= 400 else None)
        for path in pages:
            messages.clear()
            page.goto(served + path, wait_until="load")
            # as a reader sees it: KaTeX's fonts loaded, the page laid out again with them
            page.evaluate("() => document.fonts.ready.then(() => new Promise(done => "
                          "requestAnimationFrame(() => requestAnimationFrame(done))))")
            found = page.evaluate(PAGE_CHECK)
            where = f"/{path}"
            formulas += found["formulas"]
            problems += [f"{where}: {m}" for m in messages]
            problems += [f"{where}: formula not typeset: {t!r}" for t in found["untypeset"]]
            problems += [f"{where}: KaTeX error: {t!r}" for t in found["errors"]]
            problems += [f"{where}: raw TeX left in the text: {t!r}" for t in found["raw"]]
            problems += [f"{where}: equation tag over its equation or cut off: {t}"
                         for t in found["overlaps"]]
            problems += [f"{where}: image did not load: {s}" for s in found["images"]]
            seen_ids[path] = set(found["ids"])
            links[path] = found["links"]
            if path in SCREENSHOT_PAGES:
                if path == "recurrent/":
                    page.evaluate("() => { const t = [...document.querySelectorAll("
                                  "'div.arithmatex')].find(el => el.textContent.includes("
                                  "'\\\\tag')); if (t) t.scrollIntoView(); }")
                page.screenshot(path=str(SCREENSHOTS / SCREENSHOT_PAGES[path]))
        browser.close()

    # every internal link reaches a page of the site (or a file in it), and its anchor exists
    for path, hrefs in links.items():
        for href in hrefs:
            url, fragment = urldefrag(href)
            if not url.startswith(served):
                continue
            target = unquote(url[len(served):])
            if target in seen_ids:
                if fragment and unquote(fragment) not in seen_ids[target]:
                    problems.append(f"/{path}: link to a missing anchor: /{target}#{fragment}")
            elif not (site / target).is_file():
                problems.append(f"/{path}: link to a missing page or file: /{target}")
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:80])
    # the pages hold over a thousand formulas; the check must have seen them
    assert formulas > 1000, formulas
    for name in SCREENSHOT_PAGES.values():
        assert (SCREENSHOTS / name).stat().st_size > 10_000, name
