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
    placeTags(root);
  }
  // A numbered equation too wide for the column beside its tag gets the tag on the line
  // below it (katex-layout.css), so the equation is read whole and the tag is never cut off.
  function placeTags(root) {
    root.querySelectorAll(".katex-display").forEach(function (d) {
      d.classList.remove("tag-below");
      if (d.querySelector(".tag") && d.scrollWidth > d.clientWidth + 1) {
        d.classList.add("tag-below");
      }
    });
  }
  window.addEventListener("resize", function () { placeTags(document.body); });
  // KaTeX's fonts arrive after the first layout and widen the formulas: measure again
  if (document.fonts) {
    document.fonts.addEventListener("loadingdone", function () { placeTags(document.body); });
  }
  if (typeof document$ !== "undefined") {
    document$.subscribe(function () { typeset(document.body); });  // material's page event
  } else {
    document.addEventListener("DOMContentLoaded", function () { typeset(document.body); });
  }
})();
