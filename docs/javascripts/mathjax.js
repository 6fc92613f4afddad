// MathJax 3 for pymdownx.arithmatex (generic mode: \( \) inline, \[ \] display) and for the
// markdown cells of notebooks rendered by mkdocs-jupyter ($ and $$), whose own template
// still configures MathJax 2. Only those two kinds of element are typeset.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"], ["$", "$"]],
    displayMath: [["\\[", "\\]"], ["$$", "$$"]],
    processEscapes: true,
    processEnvironments: true
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex|jp-MarkdownOutput"
  }
};

// re-typeset after material's instant navigation swaps the page
if (typeof document$ !== "undefined") {
  document$.subscribe(() => {
    if (window.MathJax && MathJax.typesetPromise) {
      MathJax.startup.output.clearCache();
      MathJax.typesetClear();
      MathJax.texReset();
      MathJax.typesetPromise();
    }
  });
}
