"""Render the number tables of the README, docs/benchmarks.md (every benchmark's) and the concept pages, and the
notebooks' reference figures, from benchmarks/results/; an executed copy whose code is its notebook's takes the
notebook's prose (``reports/executed.py``).

    python reports/render.py            # rewrite what sits between the report markers
    python reports/render.py --check    # exit 1 if a rendered file is out of date or a results file
                                           # has no sound provenance; list the stale results files
    python reports/render.py --stale    # list the stale results files only (exit 0)
    python reports/render.py --show demo   # print the tables one results file renders (a name, or a path)

A block in README.md, a docs page or a notebook's markdown cell looks like

    <!-- report:speed -->
    ...generated...
    <!-- /report:speed -->

and is rewritten from ``benchmarks/results/<file>.json`` (written by the bench_*.py scripts),
with the command, date, commit and machine that produced it. Nothing between markers is typed
by hand; ``tests/test_report.py`` fails when the committed text and the results disagree.
A number inside a sentence is a field, ``<!--f:sdpo.teacher_demo_acc-->1.000<!--/f-->``, computed
by ``FIELDS`` from one results file and rewritten the same way (``REPO_FIELDS``: from the repository's
own files instead, such as docs/install.md's version pins, ``reports/pins.py``).
A block whose results file does not exist yet says which command makes it.

A stale results file (its behaviour replay moved at the last ``make bench-check``: ``staleness.py``) still
renders; its blocks' provenance line says where the replay moved, its fields are not marked.
``--check`` lists stale files but exits 0 on staleness alone, as ``make test`` passes;
it exits 1 on what ``make test`` fails on: out-of-date text, or a results file from a dirty tree or
with no provenance. ``make bench-stale`` (``bench_stale.py``) re-measures the stale files. In a shallow
clone ``--check`` compares the text without the stale notes, and rendering is refused.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

# run as a script: the repository's root (this folder is the ``reports`` package) and the experiments' declarations
sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[1] / "benchmarks")]
from experiments import EXPERIMENTS, typed  # noqa: E402

from reports.algorithms import export_fields, export_table, ppo, ppo_fields, sdpo, sdpo_fields, vapor  # noqa: E402
from reports.code import (  # noqa: E402
    code_lab,
    code_lab_discovery,
    code_lab_discovery_fields,
    code_lab_fields,
    code_lab_heldout_fields,
    code_reward,
    sdpo_head_start,
    sdpo_head_start_fields,
)
from reports.course import first_run, first_run_fields, lab_heldout_fields  # noqa: E402
from reports.demo import demo, demo_plateau, demo_plateau_fields, demo_variant, lab, speed  # noqa: E402
from reports.docs import DOC_FIELDS  # noqa: E402
from reports.executed import with_notebook_prose  # noqa: E402
from reports.gpu import gpu_runs_table, gpu_status_fields  # noqa: E402
from reports.notebooks import fresh_clone, notebook_fields, notebook_reference, notebook_wall_fields, notebooks  # noqa: E402
from reports.pins import install_pip, pins_fields  # noqa: E402
from reports.real import (  # noqa: E402
    real_decode,
    real_fields,
    real_learn,
    real_sdpo,
    real_sdpo_fields,
    real_speed,
    real_speed_fields,
    real_tasks,
    real_tasks_fields,
)
from reports.sdpo_lab import (  # noqa: E402
    sdpo_lab,
    sdpo_lab_ablations,
    sdpo_lab_ablations_fields,
    sdpo_lab_discovery,
    sdpo_lab_discovery_fields,
    sdpo_lab_fields,
    sdpo_lab_signal,
    sdpo_lab_stability,
    sdpo_lab_summary,
)
from reports.sdpo_room import (  # noqa: E402
    sdpo_lab_headroom,
    sdpo_lab_headroom_fields,
    sdpo_lab_room,
    sdpo_lab_room_fields,
    sdpo_lab_transfer,
    sdpo_lab_transfer_fields,
)
from reports.staleness import STALE_NOTE, describe, scan, shallow  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
EXECUTED = RESULTS / "executed" / "notebooks"   # the full-size run's executed copies, shown on the docs site
BLOCK = re.compile(r"(<!-- report:([\w-]+) -->\n)(.*?)(\n?<!-- /report:\2 -->)", re.S)
# a number inside prose: <!--f:sdpo.teacher_demo_acc-->1.000<!--/f--> (FIELDS below computes it)
FIELD = re.compile(r"(<!--f:([\w-]+)\.(\w+)-->)(.*?)(<!--/f-->)", re.S)


def load(name: str) -> dict | None:
    """Results file ``name``, with its stem under ``"stem"`` (``provenance`` names the command that re-makes it)."""
    path = RESULTS / f"{name}.json"
    return {**json.loads(path.read_text()), "stem": name} if path.exists() else None


# ---------------------------------------------------------------------------------------
# one renderer per block name
# ---------------------------------------------------------------------------------------


# block name -> (results file, renderer)
BLOCKS = {
    "speed": ("speed", speed),
    "demo": ("demo", demo),
    "first_run": ("first_run", first_run),
    "own_task": ("own_task", first_run),
    "demo-constant-lr": ("demo_constant_lr", demo_variant),
    "demo-copy-warm-start": ("demo_copy_warm_start", demo_variant),
    "demo-top-k50": ("demo_top_k50", demo_variant),
    "notebooks-smoke": ("notebooks_smoke", notebooks),
    "notebooks-full": ("notebooks_full", notebooks),
    "notebooks-smoke-cold": ("notebooks_smoke_cold", notebooks),
    "lab": ("lab", lab),
    "vapor": ("vapor", vapor),
    "sdpo": ("sdpo", sdpo),
    "sdpo-lab": ("sdpo_lab", sdpo_lab),
    "sdpo-lab-summary": ("sdpo_lab", sdpo_lab_summary),
    "sdpo-lab-signal": ("sdpo_lab_signal", sdpo_lab_signal),
    "sdpo-lab-signal-1000": ("sdpo_lab_signal_1000", sdpo_lab_signal),
    "sdpo-lab-discovery": ("sdpo_lab_discovery", sdpo_lab_discovery),
    "sdpo-lab-ablations": ("sdpo_lab_ablations", sdpo_lab_ablations),
    "sdpo-lab-stability": ("sdpo_lab_stability", sdpo_lab_stability),
    "sdpo-lab-headroom": ("sdpo_lab_headroom", sdpo_lab_headroom),
    "sdpo-lab-room": ("sdpo_lab_room", sdpo_lab_room),
    "sdpo-lab-transfer": ("sdpo_lab_transfer", sdpo_lab_transfer),
    "ppo": ("ppo", ppo),
    "export": ("export", export_table),
    "code-reward": ("code_reward", code_reward),
    "code-lab": ("code_lab", code_lab),
    "code-lab-starving": ("code_lab_starving", code_lab),
    "code-lab-discovery": ("code_lab_discovery", code_lab_discovery),
    "sdpo-head-start": ("sdpo_head_start", sdpo_head_start),
    "fresh-clone": ("fresh_clone", fresh_clone),
    "demo-plateau": ("demo_plateau", demo_plateau),
    "real-tasks": ("real_tasks", real_tasks),
    "real-speed": ("real_speed", real_speed),
    "real-decode": ("real_decode", real_decode),
    "real-learn": ("real_learn", real_learn),
    "real-learn-bf16": ("real_learn_bf16", real_learn),
    "real-sdpo": ("real_sdpo", real_sdpo),
    "notebooks-smoke-real": ("notebooks_smoke_real", notebooks),
    **{f"nb{n:02d}": ("notebooks_full", notebook_reference(f"{n:02d}")) for n in range(100)},
}
MAKERS = {stem: e.command for stem, e in EXPERIMENTS.items()}   # results file -> the command that makes it


# ---------------------------------------------------------------------------------------
# fields: numbers inside prose, each computed from one results file
# ---------------------------------------------------------------------------------------


# field file name -> (results file, function of the results -> {field: text})
FIELDS = {"sdpo": ("sdpo", sdpo_fields), "sdpo_lab": ("sdpo_lab", sdpo_lab_fields),
          "sdpo_lab_ablations": ("sdpo_lab_ablations", sdpo_lab_ablations_fields),
          "sdpo_lab_headroom": ("sdpo_lab_headroom", sdpo_lab_headroom_fields),
          "sdpo_lab_room": ("sdpo_lab_room", sdpo_lab_room_fields),
          "sdpo_lab_transfer": ("sdpo_lab_transfer", sdpo_lab_transfer_fields),
          "sdpo_lab_discovery": ("sdpo_lab_discovery", sdpo_lab_discovery_fields), "ppo": ("ppo", ppo_fields),
          "export": ("export", export_fields), "real_learn": ("real_learn", real_fields),
          "real_tasks": ("real_tasks", real_tasks_fields), "real_speed": ("real_speed", real_speed_fields),
          "real_sdpo": ("real_sdpo", real_sdpo_fields),
          "demo_plateau": ("demo_plateau", demo_plateau_fields), "first_run": ("first_run", first_run_fields),
          "own_task": ("own_task", first_run_fields),
          "sdpo_head_start": ("sdpo_head_start", sdpo_head_start_fields), "code_lab": ("code_lab", code_lab_fields),
          "code_lab_starving": ("code_lab_starving", code_lab_fields),
          "code_lab_discovery": ("code_lab_discovery", code_lab_discovery_fields),
          "code_lab_heldout": ("code_lab_heldout", code_lab_heldout_fields),
          "nb_smoke_s": ("notebooks_smoke", notebook_wall_fields),
          "nb_full_s": ("notebooks_full", notebook_wall_fields),
          **DOC_FIELDS,   # the prose of notebooks 04, 07, 08 and the concept pages (reports/docs.py)
          **{f"nb{n:02d}": ("notebooks_full", notebook_fields(f"{n:02d}")) for n in range(100)}}


# fields and blocks from the repository's own files, not from a results file
REPO_FIELDS = {"pins": pins_fields, "gpu": gpu_status_fields, "lab": lab_heldout_fields}
REPO_BLOCKS = {"install-pip": install_pip, "gpu-runs": gpu_runs_table}


def render_field(name: str, key: str) -> str:
    if name in REPO_FIELDS:
        values = REPO_FIELDS[name]()
        if key not in values:
            raise KeyError(f"report field {name}.{key} is not computed; {name} has {sorted(values)}")
        return values[key]
    if name not in FIELDS:
        known = sorted(k for k in FIELDS if not k.startswith("nb"))
        raise KeyError(f"unknown report field file {name!r}; known: {known}")
    file, fields = FIELDS[name]

    def pick(res: dict) -> str:
        values = fields(res)
        if key not in values:
            raise KeyError(f"report field {name}.{key} is not computed; {name} has {sorted(values)}")
        return values[key]
    return from_results(file, pick)


def from_results(file: str, render) -> str:
    """``render(results)`` of ``benchmarks/results/<file>.json``, or the command that makes it."""
    res = load(file)
    if res is None:
        return f"(not measured yet: `{typed(MAKERS.get(file, file))}`)"
    return render(res)


def render_block(name: str) -> str:
    if name in REPO_BLOCKS:
        return REPO_BLOCKS[name]()
    if name not in BLOCKS:
        raise KeyError(f"unknown report block {name!r}; known: {sorted(k for k in BLOCKS if not k.startswith('nb'))}")
    file, renderer = BLOCKS[name]
    return from_results(file, renderer)


def render_text(text: str) -> str:
    text = BLOCK.sub(lambda m: m.group(1) + render_block(m.group(2)) + "\n" + m.group(4).lstrip("\n"), text)
    return FIELD.sub(lambda m: m.group(1) + render_field(m.group(2), m.group(3)) + m.group(5), text)


def targets() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
            *sorted((ROOT / "docs" / "concepts").glob("*.md")),
            *sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")),
            # the executed copies the site shows: their prose and its numbers are their notebooks'
            *sorted(EXECUTED.glob("[0-9][0-9]_*.ipynb"))]


def render_file(path: Path) -> tuple[str, str]:
    """(current text, rendered text) of README.md or a notebook."""
    old = path.read_text()
    if path.suffix != ".ipynb":
        return old, render_text(old)
    nb, changed = json.loads(old), False
    if path.parent == EXECUTED:   # a copy of a notebook takes the notebook's prose first (reports/executed.py)
        synced = with_notebook_prose(nb, json.loads((ROOT / "notebooks" / path.name).read_text()))
        if synced is not None and synced != nb:
            nb, changed = synced, True
    for cell in nb["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and ("<!-- report:" in text or "<!--f:" in text) \
                and render_text(text) != text:
            cell["source"] = render_text(text).splitlines(keepends=True)
            changed = True
    return old, (json.dumps(nb, indent=1, ensure_ascii=False) + "\n" if changed else old)


def show(file: str) -> str:
    """The blocks a results file renders, as the pages show them: ``file`` is a results file's name (``demo``,
    ``demo.json``) or the path a script's ``--out`` wrote; a name of one's own renders as its experiment's
    (``demo_my_try`` as ``demo``: ``experiments.experiment``)."""
    from experiments import experiment

    path = Path(file) if Path(file).suffix == ".json" and Path(file).exists() else RESULTS / f"{Path(file).stem}.json"
    if not path.exists():
        raise SystemExit(f"no results file {path}")
    res, stem = {**json.loads(path.read_text()), "stem": path.stem}, path.stem
    if not any(f == stem for f, _ in BLOCKS.values()):
        base = experiment(stem)
        stem = next(s for s, e in EXPERIMENTS.items() if e is base)
    shown = [f"{name}:\n{renderer(res)}" for name, (f, renderer) in BLOCKS.items() if f == stem
             and not (name.startswith("nb") and name[2:].isdigit())]
    if shown:
        return "\n\n".join(shown)
    return "\n".join(f"{name}.{k}: {v}" for name, (f, fields) in FIELDS.items() if f == stem   # the prose's numbers
                     and not (name.startswith("nb") and name[2:].isdigit()) for k, v in fields(res).items())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--show", metavar="RESULTS", help="print the tables one results file renders (a name, e.g. demo, "
                    "or a path a script's --out wrote); change nothing")
    ap.add_argument("--check", action="store_true", help="list what is out of date or stale; change nothing; exit 1 "
                    "on out-of-date text or a results file without sound provenance, not on staleness alone")
    ap.add_argument("--stale", action="store_true", help="list the stale results files only; change nothing")
    args = ap.parse_args(argv)
    if args.show:
        print(show(args.show))
        return 0
    findings = scan(RESULTS)
    stale = [f for f in findings if f.stale and not f.problems]
    if args.stale:
        print("\n".join(describe(f) for f in stale) if stale else "no stale results")
        return 0
    if shallow() and not args.check:
        print("a shallow clone lacks the history the stale notes come from: git fetch --unshallow, then render")
        return 1
    outdated = []
    for path in targets():
        old, new = render_file(path)
        if shallow():   # the text is checked without the notes it cannot compute
            old, new = STALE_NOTE.sub("", old), STALE_NOTE.sub("", new)
        if old != new:
            outdated.append(path.relative_to(ROOT))
            if not args.check:
                path.write_text(new)
    verb = "out of date" if args.check else "updated"
    print(f"{verb}: {', '.join(map(str, outdated))}" if outdated else "up to date")
    if stale:
        print(f"stale (still rendered, marked; re-measure with make bench-stale): {len(stale)}")
        print("\n".join("  " + describe(f) for f in stale))
    untrusted = [f for f in findings if f.problems]
    if untrusted:
        print("no sound provenance (make test fails; rerun these from a clean commit):")
        print("\n".join("  " + describe(f) for f in untrusted))
    return 1 if args.check and (outdated or untrusted) else 0


if __name__ == "__main__":
    sys.exit(main())
