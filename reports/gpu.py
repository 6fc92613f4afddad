"""What has run on a GPU, from ``benchmarks/results/gpu/``: one folder per lease, its checks' reports
(``gpu_check_<stage>.json``, written by tests/gpu/conftest.py), logs, notebook 00's full-size log
(``nb00_gpu.log``) and a ``run.json`` (``kind``: full or partial, ``commit``, ``stages``, ``note``). Folders
from before ``run.json`` are read by name: a date alone is a full run, ``<date>-partial`` a partial one. A stage
whose report was never written (its time limit stopped pytest before the end) is counted from its log's progress
line (``.`` passed, ``F``/``E`` failed, ``s`` skipped): how many passed, not which.

``gpu.status`` is the GPU runs page's account of them, ``gpu.summary`` the one sentence of at most 40 words that
README.md, docs/index.md and docs/install.md give; the ``gpu-runs`` block is docs/gpu_runs.md's table of every
run."""

from __future__ import annotations

import json
import re
from pathlib import Path

from reports.format import md_table

GPU_RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "gpu"
GPU_NOT_RUN = "a T4, the T4 profile's Qwen2.5-0.5B-Instruct (no hub on the lent machine) and vLLM"


def gpu_runs(root: Path = GPU_RESULTS) -> list[dict]:
    """Every lease's folder, oldest first (by its reports' dates): name, kind, commit, device, date, the
    checks (each ``{"check", "outcome", ...}``) and notebook 00's full-size run (``nb00_run``)."""
    runs = []
    for folder in (p for p in root.iterdir() if p.is_dir()) if root.exists() else ():
        meta = json.loads((folder / "run.json").read_text()) if (folder / "run.json").exists() else {}
        found = {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json")) if p.name != "run.json"}
        found = {stem: r for stem, r in found.items() if "checks" in r}   # a check report (tests/gpu/conftest.py)
        if not found:
            continue
        reports = list(found.values())
        stages = [(stem.removeprefix("gpu_check_").replace("_", " "), r["passed"],   # a check cut short ran, unpassed
                   r["passed"] + r["failed"] + r.get("unfinished", 0)) for stem, r in found.items()]
        lost = {p.stem: log_counts(p) for p in sorted(folder.glob("gpu_check_*.log")) if p.stem not in found}
        stages += [(stem.removeprefix("gpu_check_").replace("_", " ") + " (from its log)", *counts)
                   for stem, counts in lost.items() if counts]
        runs.append({"name": folder.name, "kind": meta.get("kind", "full" if len(folder.name) == 10 else "partial"),
                     "commit": meta.get("commit"), "note": meta.get("note", ""),
                     "device": reports[0]["device"], "date": max(r["date"] for r in reports),
                     "checks": [c for r in reports for c in r["checks"]], "stages": stages,
                     "nb00": nb00_run(folder / "nb00_gpu.log")})
    return sorted(runs, key=lambda r: r["date"])


def log_counts(log: Path) -> tuple[int, int] | None:
    """(passed, ran) from a pytest log's progress lines (``-q``: one character a check, then ``[NN%]``)."""
    marks = "".join(re.findall(r"^([.FEsx]+)\s+\[\s*\d+%\]", log.read_text(errors="replace"), re.M))
    ran = sum(marks.count(c) for c in ".FE")
    return (marks.count("."), ran) if ran else None


def nb00_run(log: Path) -> dict | None:
    """Notebook 00 at full size through the GPU path, from its log: the last step reached and the planned
    steps, the held-out accuracy before and after when training finished, and whether the script ran to
    its end (it prints its wall time there)."""
    text = log.read_text() if log.exists() else ""
    steps = re.findall(r"^step\s+(\d+)/(\d+)", text, re.M)
    if not steps:
        return None
    acc = re.search(r"held-out accuracy: before ([\d.]+) -> after ([\d.]+)", text)
    return {"step": int(steps[-1][0]), "steps": int(steps[-1][1]),
            "before": float(acc[1]) if acc else None, "after": float(acc[2]) if acc else None,
            "finished": "notebook 00, full size, GPU path:" in text}


def _counts(checks, real: bool) -> tuple[int, int]:
    mine = [c for c in checks if ("real-model" in c["check"]) == real and c["outcome"] != "skipped"]
    return sum(c["outcome"] == "passed" for c in mine), len(mine)


def _failed_notebooks(checks) -> list[str]:
    return sorted({c["check"].split("[")[-1][:2] for c in checks if "real-model" in c["check"]
                   and c["outcome"] == "failed"})


def _and(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else items[0]


def _nb00_words(nb: dict) -> str:
    if nb["after"] is None:
        return f"ran {nb['step']} of its {nb['steps']} GRPO steps before the session's GPU time ran out"
    words = (f"trained its {nb['steps']} GRPO steps (held-out accuracy {nb['before']:.2f} before, "
             f"{nb['after']:.2f} after)")
    return words if nb["finished"] else words + " and stopped in a later cell"


def gpu_status_fields() -> dict:
    """``gpu.status``: the latest full run's counts, notebook 00's full-size run, and what the partial runs
    after it say of its failures' fixes."""
    runs = gpu_runs()
    full = [r for r in runs if r["kind"] == "full"]
    if not full:
        return {"status": "The GPU checks (`make gpu-check`) have not run on a GPU yet."}
    last = full[-1]
    devices = {}
    for r in runs:
        devices.setdefault(r["device"], []).append(r["date"][:10])
    where = " and ".join(f"an {d} on {_and(sorted(set(days)))}" for d, days in devices.items())
    tiny, real = _counts(last["checks"], False), _counts(last["checks"], True)
    from_log = next(((p, n) for stage, p, n in last["stages"] if stage == "real (from its log)"), None)
    if from_log:  # the real-model stage's report was lost: its log's counts, without the checks' names
        real = (real[0] + from_log[0], real[1] + from_log[1])
    text = (f"On a GPU, `make gpu-check` (through `tools/gpu_lease.sh`) ran on lent machines, {where}: in the "
            f"latest full run ({last['device']}, commit {last['commit'] or 'not recorded'}) {tiny[0]} of {tiny[1]} "
            "checks on the tiny lab passed (Unsloth, 4-bit, 16-bit training, TRL on CUDA, the export merge, the "
            f"notebooks) and {real[0]} of {real[1]} notebooks on the real model")
    later = [r for r in runs if r["kind"] == "partial" and r["date"] > last["date"]]
    nb = next((r["nb00"] for r in [*later[::-1], last] if r["nb00"]), None)
    if nb:
        text += (", and notebook 00 at full size on the real model through the GPU path (Unsloth's 4-bit base, bf16) "
                 + _nb00_words(nb))
    failed = _failed_notebooks(last["checks"])
    if from_log and from_log[0] < from_log[1]:
        text += ("; which notebook failed is not known (the stage's time limit stopped pytest while it wrote its "
                 "report, which is now written as each check ends)")
    if failed:
        text += (f"; the failures (notebooks {_and(failed)}) led to fixes" if len(failed) > 1 else
                 f"; the failure (notebook {failed[0]}) led to a fix")
        if later:
            passed, ran = (sum(x) for x in zip(*[(p, n) for _, p, n in later[-1]["stages"]]))
            at = later[-1]["commit"] or "a later commit"
            text += (f", re-run at {at}: {passed} of {ran} passed" if passed == ran else
                     f", re-run in part at {at} ({passed} of {ran} passed), and the fixes since have not run on a GPU")
        else:
            text += " that have not run on a GPU"
    return {"status": f"{text}. Not run on a GPU: {GPU_NOT_RUN}; the reports are in `benchmarks/results/gpu/`.",
            "summary": gpu_summary(last, tiny, real, nb, failed, later)}


def gpu_summary(last: dict, tiny: tuple, real: tuple, nb: dict | None, failed: list, later: list) -> str:
    """``gpu.summary``: the landing pages' one sentence (at most 40 words) on what has run on a GPU and what not."""
    fixed = bool(failed) and bool(later) and all(p == n for _, p, n in later[-1]["stages"])
    notebooks = f"{real[0]} of {real[1]} notebooks on the real model" + (" (the rest after a fix)" if fixed else "")
    first = " and notebook 00 at full size" if nb and nb["finished"] else ""
    return (f"On a GPU ({last['device']}, {last['date'][:10]}) {tiny[0]} of {tiny[1]} tiny-lab checks, {notebooks}"
            f"{first} passed; not yet run: a T4, Qwen2.5-0.5B-Instruct and vLLM.")


def _short_nb00(nb: dict) -> str:
    if nb["after"] is None:
        return f"{nb['step']} of {nb['steps']} steps (GPU time ran out)"
    return (f"{nb['step']} of {nb['steps']} steps, held-out {nb['before']:.2f} -> {nb['after']:.2f}"
            + ("" if nb["finished"] else "; stopped in a later cell"))


def gpu_runs_table() -> str:
    """docs/gpu_runs.md's ``gpu-runs`` block: one row per lease (its folder, named by its date), the checks
    passed per report (stage)."""
    rows = [[f"`{r['name']}`", r["device"].removeprefix("NVIDIA ").replace(" 80GB HBM3", ""), r["commit"] or "",
             r["kind"], "; ".join(f"{stage}: {passed} of {ran}" for stage, passed, ran in r["stages"]),
             _short_nb00(r["nb00"]) if r["nb00"] else ""] for r in gpu_runs()]
    return md_table(["folder", "GPU", "commit", "run", "checks passed, per report", "notebook 00, full size"], rows)
