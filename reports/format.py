"""The report's formatting pieces: numbers, markdown tables and the provenance line
(``render.py`` and its per-benchmark renderers share them)."""

from __future__ import annotations

from experiments import EXPERIMENTS

from reports.staleness import stale_note


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
    """Who made the numbers, where and when; the one command that re-makes them (``run.py NAME``, as
    ``experiments.py`` declares it) when it is not the one that made them; a stale result's line ends with what
    changed since (``staleness.stale_note``: a function of HEAD, so the rendered text is too)."""
    m = res["machine"]
    again = f"python benchmarks/run.py {res['stem']}" if res.get("stem") in EXPERIMENTS else res["command"]
    remake = "" if res["command"] == again else f" Re-measure: `{again}`."
    return (f"Made by `{res['command']}` on {res['date']} at commit `{res['commit']}` "
            f"({m['arch']}{', ' + m['cpu'] if m.get('cpu') else ''}, {m['cores']} cores, torch {m['torch']}, "
            f"trl {m['trl']}).{remake}{stale_note(res)}")


def discovery_table(d: dict | None) -> str:
    """Discovery rate within k attempts per test-time method (``at_test_time.discovery_curves``)."""
    if not d:
        return "Discovery curves: not measured in this results file."
    names = {"best_of_k": "best-of-k (plain samples)", "multi_turn": "multi-turn reprompting (no training)",
             "test_time_sdpo": "test-time SDPO (trains a copy)"}
    rows = [[names.get(m, m), *v["discovery"]] for m, v in d["methods"].items()]
    return "\n".join([f"Discovery rate within k attempts on the {d['rows']} hard held-out problems (under 10% of 32 "
                      f"samples right), batches of {d['batch_size']}, every method at {d['max_attempts']} "
                      "attempts:", "",
                      md_table(["method", *[f"k={k}" for k in d["budgets"]]], rows)])


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95% for z = 1.96): the interval that a rate measured on n
    questions supports, honest near 0 and 1 where the normal interval is not (Wilson 1927)."""
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5 / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def rate_ci(rate: float, n: int) -> str:
    """A rate measured on n questions with its 95% Wilson interval: "[0.26, 0.69]"."""
    lo, hi = wilson(round(rate * n), n)
    return f"[{lo:.2f}, {hi:.2f}]"


def lr_tag(lr: float) -> str:
    """A learning rate as a field-name part: 3e-05 -> 3em5, 0.0001 -> 1em4."""
    return f"{lr:.0e}".replace("e-0", "em").replace("e-", "em").replace("e+0", "e")
