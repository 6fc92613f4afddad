"""The notebooks' own runs (``bench_notebooks.py``) in the report: each notebook's reference figures (the
``RESULTS`` dict of its full-size run) as a block and as fields, and how long each notebook takes, so a
notebook's **Runtime** line quotes a measured time (``report.py`` registers them in ``BLOCKS`` / ``FIELDS``)."""

from __future__ import annotations

from report_format import fmt, md_table, provenance


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
        own = {**res, **{k: run[k] for k in ("command", "date", "commit") if k in run}, "runs": [run]}  # this notebook's run
        return "\n".join([md_table(["figure", "value"], rows), "",
                          f"Full size in {run['wall_s']:.0f} s. {provenance(own)}"])
    return render


def notebook_fields(nb: str):
    """A notebook's full-size RESULTS (bench_notebooks.py --full) as fields."""
    def fields(res: dict) -> dict:
        run = next((r for r in res["runs"] if r["notebook"].startswith(nb)), None)
        return {k: fmt(v) for k, v in ((run or {}).get("results") or {}).items()}
    return fields
