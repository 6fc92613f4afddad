"""The report's formatting pieces: numbers, markdown tables and the provenance line
(``report.py`` and its per-benchmark renderers share them)."""

from __future__ import annotations

from staleness import stale_note


def fmt(v, digits: int = 3) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    if isinstance(v, list):
        return ", ".join(fmt(x, digits) for x in v)
    return str(v)


def md_table(headers, rows) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return "\n".join(lines + ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows])


def provenance(res: dict) -> str:
    """Who made the numbers, where and when; a stale result's line ends with what changed since
    (``staleness.stale_note``: a function of HEAD, so the rendered text is too)."""
    m = res["machine"]
    return (f"Made by `{res['command']}` on {res['date']} at commit `{res['commit']}` "
            f"({m['arch']}, {m['cores']} cores, torch {m['torch']}, trl {m['trl']}).{stale_note(res)}")


def discovery_table(d: dict | None) -> str:
    """Discovery rate within k attempts per test-time method (``test_time_training.discovery_curves``)."""
    if not d:
        return "Discovery curves: not measured in this results file."
    names = {"best_of_k": "best-of-k (plain samples)", "multi_turn": "multi-turn reprompting (no training)",
             "test_time_sdpo": "test-time SDPO (trains a copy)"}
    rows = [[names.get(m, m), *v["discovery"]] for m, v in d["methods"].items()]
    return "\n".join([f"Discovery rate within k attempts on the {d['rows']} hard held-out problems (under 10% of 32 "
                      f"samples right), batches of {d['batch_size']}, every method at {d['max_attempts']} attempts:", "",
                      md_table(["method", *[f"k={k}" for k in d["budgets"]]], rows)])


def lr_tag(lr: float) -> str:
    """A learning rate as a field-name part: 3e-05 -> 3em5, 0.0001 -> 1em4."""
    return f"{lr:.0e}".replace("e-0", "em").replace("e-", "em").replace("e+0", "e")
