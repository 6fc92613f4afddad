"""mkdocs hooks: the notebooks and the API reference follow the repository, not a list.

* Notebooks: every ``notebooks/NN_*.ipynb`` at the repo root becomes a page (mkdocs-jupyter
  renders it) and an entry of the "Notebooks" nav section, titled by its first H1. The page shows
  the notebook as its full-size CPU run left it, outputs and plots included, when that run's copy
  exists (``benchmarks/results/executed/notebooks/NN_*.ipynb``, written by ``bench_notebooks.py --full``
  with the commit it ran at in its first cell); otherwise the notebook as committed, outputs
  cleared. Nothing is copied into ``docs/``; the build is the same whether 2 or 4 notebooks exist.
* API reference: every module of ``sdpo_kit`` gets a page under ``reference/``; a hand-written
  ``docs/reference/<module path>.md`` (``reference/grpo/loss.md`` for ``sdpo_kit.grpo.loss``) wins,
  otherwise a page holding ``::: sdpo_kit.<module>`` is generated. A new module therefore shows up in the reference without touching the docs.
* ``<!-- notebook-list -->``, ``<!-- module-list -->`` and ``<!-- config-list -->`` in a page
  become tables of the notebooks, modules and ``configs/*.yaml`` that exist.

Left out on purpose: executing notebooks while building (CI runs them under nbmake; the full-size
run that fills the pages is a benchmark, ``make bench-stale`` or ``bench_notebooks.py --full``).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
EXECUTED = ROOT / "benchmarks" / "results" / "executed"   # notebooks/NN_*.ipynb: the full-size run's copies
PACKAGE = ROOT / "sdpo_kit"
CONFIGS = ROOT / "configs"
NOTEBOOK_RE = re.compile(r"^\d\d_.+\.ipynb$")
# reading order of the reference, room by room in notebook order; modules not named here follow alphabetically
MODULE_ORDER = ["core.logprobs", "core.sampling", "core.scratch", "core.checkpoint", "core.trl_base", "core.metrics",
                "viz.plots", "core.config", "core.utils",
                "text.answers", "text.reprompt",
                "lab.model", "lab.skill", "tasks.base", "tasks.arithmetic", "tasks.feedback", "tasks.environments", "models",
                "grpo.loss", "grpo.config", "grpo.loop", "grpo.trl",
                "rewards.core", "rewards.verifiable", "rewards.model_scored", "rewards.learned", "rewards.code",
                "rewards.registry",
                "vapor.loss", "vapor.spans", "vapor.parts", "vapor.config", "vapor.loop", "vapor.trl",
                "sdpo.loss", "sdpo.config", "sdpo.teacher", "sdpo.quality", "sdpo.loop", "sdpo.trl",
                "sdpo.multi_turn", "sdpo.at_test_time",
                "ppo.loss", "ppo.value_head", "ppo.config", "ppo.trainer",
                "deploy.run_model", "deploy.export", "deploy.gguf", "deploy.gguf_convert", "deploy.verl", "deploy.verl_config",
                "registry", "training", "cli"]
HIDDEN: tuple[str, ...] = ()  # package folders kept off the reference (the exercises' answers live in notebooks/solutions)
# old module paths kept as pure re-exports (none now): their contents have a page under their new names
ALIASES: tuple[str, ...] = ()


def notebooks() -> list[Path]:
    """The numbered notebooks that exist now, in teaching order."""
    if not NOTEBOOKS.is_dir():
        return []
    return sorted(p for p in NOTEBOOKS.iterdir() if NOTEBOOK_RE.match(p.name))


def notebook_source(nb: Path) -> Path:
    """The folder holding ``notebooks/<name>`` a notebook's page is rendered from: the full-size run's
    executed copies when there is one, else the repository (the notebook as committed, outputs cleared)."""
    return EXECUTED if (EXECUTED / "notebooks" / nb.name).exists() else ROOT


def notebook_title(path: Path) -> str:
    """The first markdown H1 of the notebook, or a title made from its file name."""
    try:
        cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    except (OSError, ValueError):
        cells = []
    for cell in cells:
        if cell.get("cell_type") != "markdown":
            continue
        source = cell.get("source", "")
        for line in (source if isinstance(source, str) else "".join(source)).splitlines():
            if line.startswith("# "):
                return line[2:].strip()
    number, _, rest = path.stem.partition("_")
    return f"{number} {rest.replace('_', ' ')}"


def modules() -> list[str]:
    """Dotted module names under sdpo_kit (without the package prefix), in reading order."""
    found = []
    for p in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in p.parts or p.relative_to(PACKAGE).parts[0] in HIDDEN or p.parent == PACKAGE and p.name == "__init__.py":
            continue
        if p.name == "__init__.py" and not defines_code(p):   # a package's docstring and imports: its modules have pages
            continue
        parts = p.relative_to(PACKAGE).with_suffix("").parts
        module = ".".join(parts[:-1] if p.name == "__init__.py" else parts)
        if module not in ALIASES:
            found.append(module)
    rank = {m: i for i, m in enumerate(MODULE_ORDER)}
    return sorted(found, key=lambda m: (rank.get(m, len(rank)), m))


def defines_code(path: Path) -> bool:
    """Whether a package's ``__init__.py`` defines a function or a class of its own (``presets``, ``course``)."""
    return any(isinstance(n, (ast.FunctionDef, ast.ClassDef)) for n in ast.parse(path.read_text(encoding="utf-8")).body)


def module_path(module: str) -> Path:
    path = PACKAGE.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def module_summary(module: str) -> str:
    """First line of the module's docstring, read without importing it."""
    path = module_path(module)
    try:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    except (OSError, SyntaxError):
        doc = ""
    return doc.strip().splitlines()[0].replace("|", "\\|") if doc.strip() else ""


def public_api() -> list[tuple[str, str, str]]:
    """(name, module, first docstring line) for each name ``sdpo_kit.__all__`` exports, read without importing."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    exports = next(ast.literal_eval(n.value) for n in tree.body
                   if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "EXPORTS")
    out = []
    for name, target in exports.items():
        module, _, attr = target.partition(":")
        module = module.removeprefix("sdpo_kit.")
        path = PACKAGE.joinpath(*module.split("."))
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        node = ast.parse(path.read_text(encoding="utf-8"))
        if attr:
            node = next((n for n in node.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == attr), None)
        doc = (ast.get_docstring(node) or "").strip() if node is not None else ""
        first = " ".join(doc.split("\n\n")[0].split())                  # the first paragraph, on one line
        sentence = re.split(r"(?<=[.:;])\s", first)[0] if first else ""
        out.append((name, module, sentence.rstrip(";:").replace("|", "\\|")))
    return out


def config_summary(path: Path) -> tuple[str, str]:
    """(reward types, first paragraph of the leading comment) of a YAML config."""
    text = path.read_text(encoding="utf-8")
    lines = []
    for line in text.splitlines():
        body = line[1:] if line.startswith("#") else None
        if body is None or not body.strip() or body.startswith("   "):
            break  # the summary ends at the first blank or indented comment line
        lines.append(body.strip())
    summary = " ".join(lines)
    try:
        import yaml

        reward = (yaml.safe_load(text) or {}).get("reward")
        reward = reward if isinstance(reward, list) else [reward]
        types = ", ".join(f"`{r['type']}`" if isinstance(r, dict) else f"`{r}`" for r in reward if r)
    except Exception:  # a broken config still gets a row; the CLI reports the error itself
        types = ""
    for ch in "|[]":
        summary = summary.replace(ch, "\\" + ch)
    return types, summary


def reference_page(module: str) -> str:
    return "reference/" + module.replace(".", "/") + ".md"


def _nav_section(nav: list, title: str) -> list:
    """The entries of the nav section called ``title``, at any depth."""
    for item in nav:
        if isinstance(item, dict) and title in item:
            return item[title]
        if isinstance(item, dict):
            for value in item.values():
                if isinstance(value, list):
                    try:
                        return _nav_section(value, title)
                    except KeyError:
                        pass
    raise KeyError(f"mkdocs.yml nav has no {title!r} section for docs/hooks.py to fill")


def on_config(config):
    nav = config["nav"]
    section = _nav_section(nav, "Notebooks")
    have = {next(iter(e.values())) if isinstance(e, dict) else e for e in section}
    missing = [{notebook_title(nb): f"notebooks/{nb.name}"} for nb in notebooks() if f"notebooks/{nb.name}" not in have]
    section[:0] = missing          # in teaching order, notebook 00 first; the overview page after them
    section = _nav_section(nav, "API reference")
    have = {next(iter(e.values())) if isinstance(e, dict) else e for e in section}
    for module in modules():
        if reference_page(module) not in have:
            section.append({module: reference_page(module)})
    return config


@event_priority(100)  # before mkdocs-jupyter's on_files, which wraps the .ipynb files
def on_files(files, config):
    for nb in notebooks():
        files.append(File(f"notebooks/{nb.name}", src_dir=str(notebook_source(nb)), dest_dir=config["site_dir"],
                          use_directory_urls=config["use_directory_urls"]))
    docs = Path(config["docs_dir"])
    for module in modules():
        page = reference_page(module)
        if not (docs / page).exists():
            files.append(File.generated(config, page, content=f"# sdpo_kit.{module}\n\n::: sdpo_kit.{module}\n"))
    return files


def _table(header: str, rows: list[str], empty: str) -> str:
    rule = "|---" * header.count(" | ") + "|---|"
    return "\n".join([header, rule, *rows]) if rows else empty


def on_page_markdown(markdown, page, config, files):
    rel = "../" * page.file.src_uri.count("/")  # links are relative to the page's folder
    if "<!-- notebook-list -->" in markdown:
        rows = [f"| [`{nb.stem}`]({rel}notebooks/{nb.name}) | {notebook_title(nb)} |" for nb in notebooks()]
        markdown = markdown.replace("<!-- notebook-list -->",
                                    _table("| notebook | title |", rows, "*No notebooks yet.*"))
    if "<!-- module-list -->" in markdown:
        rows = [f"| [`sdpo_kit.{m}`]({rel}{reference_page(m)}) | {module_summary(m)} |" for m in modules()]
        markdown = markdown.replace("<!-- module-list -->",
                                    _table("| module | what it holds |", rows, "*No modules found.*"))
    if "<!-- public-api -->" in markdown:
        pages = set(modules())
        rows = [f"| [`sk.{name}`]({rel}{reference_page(module)}) | {summary} |" if module in pages else
                f"| `sk.{name}` | {summary} |" for name, module, summary in public_api()]
        markdown = markdown.replace("<!-- public-api -->", _table("| name | what it is |", rows, "*No public API.*"))
    if "<!-- config-list -->" in markdown:
        paths = sorted(CONFIGS.glob("*.yaml")) if CONFIGS.is_dir() else []
        rows = [f"| `configs/{p.name}` | {' | '.join(config_summary(p))} |" for p in paths]
        markdown = markdown.replace("<!-- config-list -->",
                                    _table("| config | reward | what it runs |", rows, "*No configs yet.*"))
    return markdown


def on_serve(server, config, builder):
    for path in (NOTEBOOKS, PACKAGE, CONFIGS):
        if path.is_dir():
            server.watch(str(path))
    return server
