"""The notebooks' own runs (``bench_notebooks.py``) in the report: each notebook's reference figures (the
``RESULTS`` dict of its full-size run) as a block and as fields, and how long each notebook takes, so a
notebook's **Runtime** line quotes a measured time (``render.py`` registers them in ``BLOCKS`` / ``FIELDS``); and
what CI takes on a fresh clone (``bench_fresh_clone.py``), leg by leg."""

from __future__ import annotations

from reports.format import fmt, md_table, provenance


def notebook_wall_fields(res: dict) -> dict:
    """Each notebook's wall seconds in one bench_notebooks.py run, by number: ``{"n01": "51", ...}``."""
    return {f"n{r['notebook'][:2]}": f"{r['wall_s']:.0f}" for r in res["runs"]}


def notebook_reference(nb: str):
    """The reference figures of one notebook's full-size run (its RESULTS dict)."""
    def render(res: dict) -> str:
        run = next((r for r in res["runs"] if r["notebook"].startswith(nb)), None)
        if run is None or not run.get("results"):
            return f"(no full-size run of notebook {nb} recorded yet: `python benchmarks/bench_notebooks.py --full`)"
        rows = [[k.replace("_", " "), fmt(v)] for k, v in run["results"].items()]
        # this notebook's run
        own = {**res, **{k: run[k] for k in ("command", "date", "commit") if k in run}, "runs": [run]}
        return "\n".join([md_table(["figure", "value"], rows), "",
                          f"Full size in {run['wall_s']:.0f} s. {provenance(own)}"])
    return render


def notebook_fields(nb: str):
    """A notebook's full-size RESULTS (bench_notebooks.py --full) as fields."""
    def fields(res: dict) -> dict:
        run = next((r for r in res["runs"] if r["notebook"].startswith(nb)), None)
        return {k: fmt(v) for k, v in ((run or {}).get("results") or {}).items()}
    return fields


def notebooks(res: dict) -> str:
    rows = [[f"`{r['notebook']}`", f"{r['wall_s']:.1f}"] for r in res["runs"]]
    rows.append(["total", f"**{res['summary']['total_s']:.1f}**"])
    return "\n".join([md_table(["notebook", "wall s"], rows), "", provenance(res)])


LEG_NAMES = {"test": "`make test`: ruff, unit tests, notebooks (nbmake), TRL-path tests on trl 1.15 "
                     "(laid over `.venv`)",
             "test-verl": "`make test-verl`: `.venv-verl` (verl 0.9.1) and the cross-checks against it",
             "test-export": "`make test-export`: llama.cpp's converter fetched, GGUF round trips",
             "docs": "`make docs`: the docs site, `mkdocs build --strict`"}


def fresh_clone(res: dict) -> str:
    s, run = res["summary"], res["runs"][0]
    detail = "; ".join(f"{p['tests']} passed in {p['seconds']:.1f} s" for p in run["pytest_phases"])
    if run.get("docs_build_s") is not None:
        detail += f"; docs built in {run['docs_build_s']:.1f} s"
    if "leg_s" in run:
        rows = [[LEG_NAMES.get(leg, f"`make {leg}`"), f"{t:.1f}"] for leg, t in run["leg_s"].items()]
        if s["ci_run_s"] < sum(run["leg_s"].values()) - 1:   # legs that ran side by side
            rows.append(["`bash .ci/run`, its wall time (legs side by side overlap)", f"{s['ci_run_s']:.1f}"])
    else:  # older results: .ci/run timed as one
        rows = [[f"`bash .ci/run` ({', '.join(f'`make {leg}`' for leg in run.get('ci_legs', ['test']))})",
                 f"{s['ci_run_s']:.1f}"]]
    return "\n".join([
        md_table(["phase", "wall s"], [["`make install` (fresh `.venv`)", f"{s['install_s']:.1f}"], *rows,
                                       ["total", f"**{s['total_s']:.1f}** ({s['total_s'] / 60:.1f} min)"]]), "",
        f"pytest phases, in order: {detail}.", "", provenance(res)])
