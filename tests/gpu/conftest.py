"""``make gpu-check``: the checks that need a CUDA GPU, and their JSON report.

Every test in this folder is marked ``gpu`` (``pytestmark`` in each file) and skips without CUDA,
so on a CPU the run ends with ``no CUDA: N checks skipped`` and exit status 0. On a GPU each check's
outcome (passed, skipped and why, the error, or unfinished when the run's time limit stopped it), its
seconds, its peak GPU memory (torch's allocator, ``max_memory_allocated``; a check run in a subprocess
reports its own) and what it recorded with ``record_property`` go to ``$SDPO_KIT_GPU_REPORT`` (default
``runs/gpu_check.json``) with the device and library versions, rewritten as each check ends.

Fixtures: ``lab_dir``, the tiny lab's warm start saved as a plain transformers folder, which
``load_policy`` loads as it would a hub model (4-bit through bitsandbytes, fp16, Unsloth); no hub
model can be fetched on a GPU machine without network.

Left out on purpose: a real 0.5B model (not downloadable there) and timing claims (the seconds are
what one run took, not a benchmark).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import time
from pathlib import Path

import pytest
import torch
from gpu_checks import CUDA  # tests/gpu is on sys.path, as pytest puts it

REPORT = Path(os.environ.get("SDPO_KIT_GPU_REPORT", "runs/gpu_check.json"))
_checks: dict[str, dict] = {}


@pytest.fixture(scope="session")
def lab_dir(tmp_path_factory) -> Path:
    """The tiny lab (warm-started, fp32) and its tokenizer saved with ``save_pretrained``."""
    from sdpo_kit.models import load_policy

    model, tok = load_policy("tiny-lab")
    path = tmp_path_factory.mktemp("tiny_lab_hf")
    model.save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return path


@pytest.fixture(autouse=True)
def _peak_memory(request):
    if CUDA:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    yield
    if CUDA:
        request.node.user_properties.append(("peak_gpu_mib", torch.cuda.max_memory_allocated() / 2**20))


def pytest_runtest_logreport(report):  # called for this folder's tests only (a conftest's runtest hooks)
    check = _checks.setdefault(report.nodeid, {"check": report.nodeid.split("/gpu/", 1)[-1], "outcome": "unfinished",
                                               "seconds": 0.0, "peak_gpu_mib": None})
    check["seconds"] = round(check["seconds"] + report.duration, 2)
    for key, value in report.user_properties:
        if key == "peak_gpu_mib":  # the largest of the in-process peak and a subprocess's own
            if value is not None:
                check[key] = round(max(value, check[key] or 0.0), 1)
        else:  # what a check records besides (record_property): its losses, a round trip, the precision
            check.setdefault("details", {})[key] = value
    if report.when == "call" and report.passed and check["outcome"] == "unfinished":
        check["outcome"] = "passed"  # a check stopped mid-run (the time limit) stays "unfinished"
    if report.skipped and check["outcome"] in ("passed", "unfinished"):
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        check.update(outcome="skipped", reason=reason.removeprefix("Skipped: "))
    elif report.failed:
        check.update(outcome="failed", error=report.longreprtext.strip().splitlines()[-1][:500] if report.longreprtext
                     else "failed")


def _write_report() -> None:
    versions = {"torch": torch.__version__, "python": platform.python_version()}
    for name in ("transformers", "trl", "peft", "bitsandbytes", "unsloth", "unsloth_zoo", "vllm"):
        try:  # the installed versions, read without importing them (an import can take a minute on a busy machine)
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps({
        "date": time.strftime("%Y-%m-%d %H:%M:%S"), "device": torch.cuda.get_device_name(0),
        "capability": ".".join(map(str, torch.cuda.get_device_capability(0))),
        "memory_gib": round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1), "versions": versions,
        "passed": sum(c["outcome"] == "passed" for c in _checks.values()),
        "failed": sum(c["outcome"] == "failed" for c in _checks.values()),
        "skipped": sum(c["outcome"] == "skipped" for c in _checks.values()),
        "unfinished": sum(c["outcome"] == "unfinished" for c in _checks.values()),
        "checks": list(_checks.values())}, indent=1))


_CONFIG: list = []   # the session's config (pytest_configure), for the hooks that are not given it


def pytest_configure(config):
    _CONFIG[:] = [config]


def _writes_report(config) -> bool:  # with pytest-xdist (-n N) the controller, which sees every worker's reports
    return CUDA and not hasattr(config, "workerinput")


@pytest.hookimpl(trylast=True)
def pytest_runtest_logfinish(nodeid, location):
    """The report is rewritten as each check ends, so a run stopped by its time limit keeps what finished."""
    check = _checks.get(nodeid)
    if check is not None and _CONFIG and _writes_report(_CONFIG[0]):
        _write_report()
        if check["outcome"] == "failed":  # named at once: the summary at the end may never be printed
            print(f"\nFAILED {check['check']}: {check.get('error', '')}", flush=True)


def pytest_sessionfinish(session, exitstatus):
    if _checks and _writes_report(session.config):
        _write_report()


def pytest_terminal_summary(terminalreporter):
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if "gpu" in getattr(r, "keywords", {})
               or "/gpu/" in str(getattr(r, "fspath", "")).replace("\\", "/")]
    if not CUDA and skipped:
        terminalreporter.write_line(f"no CUDA: {len(skipped)} checks skipped")
    elif CUDA and _checks:
        terminalreporter.write_line(f"gpu-check report: {REPORT}")
