// Typeset every formula that pymdownx.arithmatex (generic mode) marked: inline spans hold
// \( ... \), display blocks \[ ... \]. KaTeX is served from the site itself (assets/katex/).
// A formula KaTeX cannot parse is shown in red with its error (class katex-error), which
// tests/docs/test_site.py looks for.
(function () {
  function typeset(root) {
    root.querySelectorAll(".arithmatex").forEach(function (el) {
      var tex = el.textContent.trim();
      var display = el.tagName === "DIV";
      if (tex.startsWith("\\(") || tex.startsWith("\\[")) tex = tex.slice(2, -2);
      katex.render(tex, el, {displayMode: display, throwOnError: false, strict: false});
    });
  }
  if (typeof document$ !== "undefined") {
    document$.subscribe(function () { typeset(document.body); });  // material's page event
  } else {
    document.addEventListener("DOMContentLoaded", function () { typeset(document.body); });
  }
})();
