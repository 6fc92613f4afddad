"""Notebook 07 (teacher-student PPO): the plumbing its cells rely on, checked here so the notebook keeps
only the facts it teaches.

* its profile table holds every setting the notebook reads, at sizes the trainer accepts, smoke sizes no
  bigger than the full ones, the preflight's ``group`` / ``prompts`` matching the batch (one answer per
  prompt), and no outcome promised in smoke mode;
* the notebook's three variants, restarted from one snapshot of the student, each begin from the same
  student (the first held-out evaluation equals the start's), keep their losses finite, distil only where
  asked, and leave the student restorable exactly;
* the teacher's forward gets its batch on the teacher's device (``encode_prompts(..., device)``);
* the temperature explorer, headless, returns the figure drawn at the default temperature.
"""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import pytest
import torch
from test_resume import char_reward

from sdpo_kit.core.profiles import REAL_CPU_MODEL, T4_MODEL, TINY_LAB, pick_profile
from sdpo_kit.course.profiles.nb07 import PROFILES
from sdpo_kit.lab.model import build_model, build_tokenizer
from sdpo_kit.ppo.config import PPOScratchConfig
from sdpo_kit.ppo.trainer import PPOScratchTrainer
from sdpo_kit.tasks import ArithmeticTask

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "07_teacher_student_ppo.ipynb"
READ = {"task", "max_new_tokens", "teacher", "teacher_demo", "reward_model", "batch_size", "mini_batch_size",
        "ppo_epochs", "lr", "steps", "eval_every", "probe_steps", "rm_steps", "rm_eval_every", "seeds", "n_eval",
        "num_threads", "kd_temperature", "min_kd_gap_closed"}
SIZES = ("batch_size", "mini_batch_size", "ppo_epochs", "steps", "probe_steps", "rm_steps", "n_eval", "max_new_tokens")


def notebook_variants() -> dict:
    """The ``VARIANTS`` dict as the notebook defines it (its code cell, evaluated with ``dict`` only)."""
    for cell in json.loads(NOTEBOOK.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        for node in ast.parse("".join(cell["source"])).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "VARIANTS" for t in node.targets):
                return eval(compile(ast.Expression(node.value), "VARIANTS", "eval"), {"__builtins__": {}, "dict": dict})
    raise AssertionError("the notebook defines no VARIANTS")


@pytest.mark.parametrize("model,cuda", [(TINY_LAB, False), (REAL_CPU_MODEL, False), (T4_MODEL, True)])
def test_every_profile_holds_what_the_notebook_reads(model, cuda):
    """Each profile, full and smoke, has every key the notebook reads; its batch splits into mini-batches as the
    trainer requires; the preflight's group / prompts are one answer per prompt of the batch; smoke sizes are no
    bigger than the full ones; smoke mode promises no outcome."""
    full = pick_profile(PROFILES, model, smoke=False, cuda=cuda, verbose=False)
    smoke = pick_profile(PROFILES, model, smoke=True, cuda=cuda, verbose=False)
    for P in (full, smoke):
        assert READ <= set(P), f"{model}: missing {sorted(READ - set(P))}"
        PPOScratchConfig(batch_size=P["batch_size"], mini_batch_size=P["mini_batch_size"],
                                ppo_epochs=P["ppo_epochs"], learning_rate=P["lr"], max_steps=P["steps"],
                                kd_temperature=P["kd_temperature"])   # raises on a batch the trainer cannot split
        assert P["batch_size"] >= 1 and len(P["seeds"]) >= 1 and P["eval_every"] >= 1 and P["rm_eval_every"] >= 1
        name, kwargs = P["teacher"]
        assert isinstance(name, str) and isinstance(kwargs, dict)
        roles = [m["role"] for m in P["teacher_demo"]]
        assert roles == ["user", "assistant"] * (len(roles) // 2), "a demonstration is whole question-answer turns"
        assert P["group"] == 1 and P["prompts"] == P["batch_size"], "the preflight sizes one answer per prompt"
    for key in SIZES:
        assert smoke[key] <= full[key], f"{model}: smoke {key} {smoke[key]} > full {full[key]}"
    assert len(smoke["seeds"]) <= len(full["seeds"])
    assert smoke["min_kd_gap_closed"] is None, "a smoke run is too short to promise an outcome"


@pytest.fixture(scope="module")
def lab():
    tok = build_tokenizer()
    task = ArithmeticTask(n_eval=16, seed=0)
    return tok, task, task.splits()


@torch.no_grad()
def restore(model, snapshot):   # as the notebook's section 9
    for n, p in model.named_parameters():
        if n in snapshot:
            p.copy_(snapshot[n])


def test_every_variant_starts_from_the_same_student_and_distils_only_where_asked(lab):
    """The notebook's three variants, each restarted from one snapshot of the student's trainable weights: the
    first held-out evaluation (step 0) equals the start's accuracy, every step's loss and value loss are
    finite, the distillation loss is positive exactly where the variant distils, and restoring gives back the
    start's weights exactly."""
    tok, task, (rows, heldout) = lab
    variants = notebook_variants()
    assert set(variants) == {"ppo", "kd", "teacher_ppo"}
    student, teacher = build_model(tok, seed=0), build_model(tok, seed=99)
    start = {n: p.detach().clone() for n, p in student.named_parameters() if p.requires_grad}
    assert start, "the snapshot holds the weights that train"

    def accuracy(model):
        return task.evaluate(model, tok, heldout, max_new_tokens=3)

    acc_start = accuracy(student)
    for name, kw in variants.items():
        restore(student, start)
        cfg = PPOScratchConfig(**{**dict(batch_size=8, mini_batch_size=4, ppo_epochs=1, max_steps=2,
                                                learning_rate=1e-3, max_completion_length=3, eval_every=1, seed=0), **kw})
        history = PPOScratchTrainer(student, tok, [char_reward], rows, cfg,
                                           teacher=teacher if cfg.kd_coef > 0 else None, eval_fn=accuracy).train()
        evals = [(h["step"], h["eval/accuracy"]) for h in history if "eval/accuracy" in h]
        assert evals[0] == (0, acc_start), f"{name}: every run starts from the same student"
        steps = [h for h in history if "loss" in h]
        assert steps and all(math.isfinite(h["loss"]) and math.isfinite(h["loss/value"]) for h in steps), name
        assert (max(h["loss/kd"] for h in steps) > 0) == (cfg.kd_coef > 0), f"{name}: distillation only where asked"
        assert any(not torch.equal(p, start[n]) for n, p in student.named_parameters() if n in start), \
            f"{name}: the run trained the student"
    restore(student, start)
    assert all(torch.equal(p, start[n]) for n, p in student.named_parameters() if n in start)


def test_encode_prompts_puts_the_batch_on_the_model_device(lab):
    """``encode_prompts(tok, prompts, device)`` returns every tensor on ``device`` (the notebook passes the
    teacher's: on a GPU the model is on CUDA and CPU input ids fail in its embedding)."""
    from sdpo_kit.core.sampling import encode_prompts

    tok, _, (rows, _) = lab
    enc = encode_prompts(tok, [rows[0]["prompt"], rows[1]["prompt"]], torch.device("meta"))
    assert enc and all(v.device.type == "meta" for v in enc.values())
    assert all(v.device.type == "cpu" for v in encode_prompts(tok, [rows[0]["prompt"]]).values())


def test_the_temperature_explorer_returns_the_default_drawing(monkeypatch):
    """Headless, ``explore(draw, T=(lo, hi, step, default))`` returns ``draw(T=default)``: the notebook's check
    cell reads the soft targets at the profile's temperature from it."""
    from sdpo_kit.viz import explorers as explore_module

    monkeypatch.setattr(explore_module, "in_notebook", lambda: False)
    calls = []

    def draw(T=1.0):
        calls.append(T)
        return None, torch.softmax(torch.tensor([2.0, 1.0, 0.0]) / T, -1)

    _, soft = explore_module.explore(draw, T=(0.25, 8.0, 0.25, 2.0))
    assert calls == [2.0]
    torch.testing.assert_close(soft, torch.softmax(torch.tensor([2.0, 1.0, 0.0]) / 2.0, -1))
