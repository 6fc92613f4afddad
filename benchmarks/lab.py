"""The SDPO skill lab's shared pieces: the dial, the methods, one training run, learning-rate tuning, and the
warm start with its teacher at one dial setting. ``bench_sdpo_lab.py`` and its satellites (``_headroom``,
``_signal``, ``_transfer``) and ``bench_code_lab.py`` (``pick_lrs``, ``SDPO_ONLY``) run on them.

The lab: ``long_addition`` (``configs/sdpo_lab.yaml``) with digit feedback, and a warm start whose in-context
skill is set by the dial, ``LabConfig.context_steps`` (``lab/skill.py``). A method is a change to that config
(``VARIANTS``); a run is ``sdpo_kit.training.train`` from the dial's warm start with a seed, a step count and a
learning rate; ``pick_lrs`` picks each method's rate by its median final accuracy on tuning seeds.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import fields

import runner
from _common import median

from sdpo_kit.sdpo.at_test_time import TEMPLATE_KEYS  # the teacher prompt's template keywords
from sdpo_kit.sdpo.config import SDPOFields

# the dial: SFT steps on teacher prompts (0: the model never saw one); the rest of the recipe is the config's
DIALS = [0, 500, 1000]
BASE_CONFIG = "configs/sdpo_lab.yaml"       # the skill lab with TRL's SDPO defaults (token-level, alpha 1, EMA)
PAPER_CONFIG = "configs/sdpo_paper.yaml"    # the SDPO authors' recipe (lasgroup/SDPO) on the same lab


def base() -> dict:
    from sdpo_kit.core.config import read_config_file

    return read_config_file(BASE_CONFIG)


# each method's run: a dict is the trainer keys it sets over BASE_CONFIG's (token-level credit, alpha 1, an EMA
# teacher, successful siblings only); a path is another config file; GRPO_RUN is BASE_CONFIG's lab and budget
# with algorithm grpo (SDPO's own keys dropped)
GRPO_RUN = None
VARIANTS = {
    "grpo": GRPO_RUN,
    "sdpo": {},                                   # successful siblings only
    "sdpo_feedback": {"include_environment_feedback": True},   # plus feedback, TRL's placement (and a demonstration)
    "sdpo_feedback_only_without_solution": {     # feedback only where no sibling succeeded
        "include_environment_feedback": True, "environment_feedback_only_without_solution": True},
    "sdpo_sequence": {"distillation_mode": "sequence"},        # sequence-level credit: one weight per completion
    "sdpo_topk": {"distillation_mode": "topk_logits", "distillation_topk": 100,   # logit-level: top-100, a tail bucket
                  "distillation_add_tail": True},
    "sdpo_full_logits": {"distillation_mode": "full_logits"},
    "sdpo_paper": PAPER_CONFIG,                   # the SDPO authors' recipe on the same lab
    "sdpo_frozen": {"teacher_model_kind": "base"},
    "sdpo_live": {"teacher_model_kind": "live"},
    "sdpo_loss_third": {"distillation_loss_scale": 1 / 3},     # the loss times 1/3 at the same learning rate
}
METHODS = tuple(VARIANTS)
SDPO_ONLY = tuple(f.name for f in fields(SDPOFields))   # the trainer keys only SDPO has, dropped for grpo


def method_config(method: str) -> dict:
    """The run config of ``method`` (the dial and the learning rate are set per run)."""
    from sdpo_kit.core.config import read_config_file

    if method not in VARIANTS:
        raise SystemExit(f"unknown method {method!r}; choose from {sorted(METHODS)}")
    change = VARIANTS[method]
    if isinstance(change, str):
        return read_config_file(change)
    data = base()
    if change is GRPO_RUN:
        data["algorithm"] = "grpo"
        data["trainer"] = {k: v for k, v in data["trainer"].items() if k not in SDPO_ONLY}
    else:
        data["trainer"].update(change)
    return data


def dial_values(raw: list[str] | None) -> list[int]:
    if not raw:
        return list(DIALS)
    out = []
    for d in raw:
        value = {"min": DIALS[0], "max": DIALS[-1]}.get(d, d)
        try:
            out.append(int(value))
        except ValueError:
            raise SystemExit(f"--dial takes step counts or min / max, got {d!r}") from None
    return out


def lab_data(method: str, dial: int, lab: dict | None = None) -> dict:
    """``method``'s run config from the warm start at dial setting ``dial`` (``model.lab.context_steps``),
    with ``lab``'s other warm-start fields over the config's (``{"sft_steps": 1500}``, say)."""
    data = method_config(method)
    data["model"]["lab"] = {**data["model"]["lab"], **(lab or {}), "context_steps": dial}
    return data


def train_run(method: str, dial: int, seed: int, steps: int, lr: float,
              config_path: str = "benchmarks/bench_sdpo_lab.py", lab: dict | None = None) -> tuple[dict, float]:
    """``sdpo_kit.training.train`` on ``lab_data(method, dial, lab)`` with ``seed``, ``steps`` and ``lr``, in
    a temporary output folder (``config_path`` names the caller in the run's log line). Returns the
    summary (the trained model included) and the run's wall time in seconds."""
    from sdpo_kit.registry import config_from_dict
    from sdpo_kit.training import train

    data = lab_data(method, dial, lab)
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        s = train(config_from_dict(data, {"trainer.seed": seed, "trainer.max_steps": steps,
                                          "trainer.learning_rate": lr, "output_dir": out}),
                  config_path=config_path)
        wall = time.perf_counter() - t0
    return s, wall


def run(method: str, dial: int, seed: int, steps: int, lr: float, lab: dict | None = None,
        config_path: str = "benchmarks/bench_sdpo_lab.py") -> dict:
    """One training run (``train_run``); its held-out accuracy by step, and ``lab``'s fields."""
    s, wall = train_run(method, dial, seed, steps, lr, config_path, lab)
    acc = [[r["step"], r["eval/accuracy"]] for r in s["history"] if r.get("eval/accuracy") is not None]
    norms = [[r["step"], round(r["sdpo/update_norm"], 6)] for r in s["history"] if "sdpo/update_norm" in r]
    return {"method": method, "dial": dial, **(lab or {}), "seed": seed, "lr": lr, "steps": steps,
            "start_acc": s["before"], "final_acc": s["after"], "acc_by_step": acc, "update_norm_by_step": norms,
            "wall_s": round(wall, 1)}


def _run(spec: tuple) -> dict:
    return run(*spec)


def run_all(specs: list[tuple], jobs: int, label: str, journal=None) -> list[dict]:
    """``run(*spec)`` for each spec, in order, on ``jobs`` processes (each training run uses one torch
    thread, the CLI's choice for the tiny lab; the warm starts are cached before any run starts); the runs
    the ``journal`` holds are kept (``runner.run_all``)."""
    def show(r):
        plain = f" (plain {r['sft_steps']})" if "sft_steps" in r else ""
        print(f"{label} dial {r['dial']}{plain} {r['method']} lr {r['lr']:g} seed {r['seed']}: {r['start_acc']:.3f} -> "
              f"{r['final_acc']:.3f} ({r['wall_s']} s)", flush=True)

    return runner.run_all(_run, specs, jobs=jobs, show=show, journal=journal)


def pick_lrs(tuning: list[dict], methods: list[str], grid: list[float]) -> dict:
    """Each method's learning rate: the one of ``grid`` with the best median final accuracy over its
    ``tuning`` runs (ties: the smaller step)."""
    lrs = {}
    for method in methods:
        scores = {lr: median([r["final_acc"] for r in tuning if r["method"] == method and r["lr"] == lr])
                  for lr in grid}
        print(f"tune {method}: median final by lr {scores}", flush=True)
        lrs[method] = max(scores, key=lambda lr: (scores[lr], -lr))
    return lrs


def warm_start_for(dial: int, lab: dict | None = None):
    """The warm start (model, tokenizer), the task and the config at one dial setting (``lab``: other
    warm-start fields, as in ``lab_data``)."""
    from sdpo_kit.lab.model import lab_config_for
    from sdpo_kit.models import load_policy
    from sdpo_kit.registry import config_from_dict, make_task

    cfg = config_from_dict(lab_data("sdpo", dial, lab))
    task = make_task(**cfg.task)
    model, tok = load_policy("tiny-lab", lab_config=lab_config_for(cfg, task))
    return model, tok, task, cfg


def teacher_row(dial: int, lab: dict | None = None) -> dict:
    """Build (or load) one warm start and measure its teacher on the held-out split, with its build time."""
    from sdpo_kit.sdpo.quality import teacher_quality

    t0 = time.perf_counter()
    model, tok, task, cfg = warm_start_for(dial, lab)
    templates = {k: getattr(cfg.trainer, k) for k in TEMPLATE_KEYS}
    return {**teacher_quality(model, tok, task, task.splits()[1], **templates),
            "warm_start_s": round(time.perf_counter() - t0, 1)}


def teacher_table(dials: list[int], lab: dict | None = None) -> dict:
    """``teacher_row`` at each dial setting (``lab``: other warm-start fields), keyed by the dial as a string."""
    out = {}
    for d in dials:
        out[str(d)] = teacher_row(d, lab)
        print(f"dial {d}{'' if not lab else f' ({lab})'}: {out[str(d)]}", flush=True)
    return out
