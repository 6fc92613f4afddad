"""Checkpoints and resume: a run cut off after step N and resumed from ``checkpoint-N`` logs the
same rows for steps N+1.. as the run that was never interrupted (same seed, same config)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from sdpo_kit import cli
from sdpo_kit.core.checkpoint import list_checkpoints
from sdpo_kit.grpo.config import GRPOScratchConfig
from sdpo_kit.grpo.loop import GRPOScratchTrainer
from sdpo_kit.lab.model import build_model, build_tokenizer
from sdpo_kit.models import add_peft_lora, lora_kwargs
from sdpo_kit.registry import load_config
from sdpo_kit.rewards import exact_match_reward
from sdpo_kit.tasks import ArithmeticTask

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
FP32 = {"rel": 1e-5, "abs": 1e-6}


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def comparable(rows):
    """The rows without wall-clock timings (``time/step_s`` and its parts)."""
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in rows]


def assert_same_rows(a, b):
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for ra, rb in zip(comparable(a), comparable(b)):
        assert ra.keys() == rb.keys(), (ra.keys() ^ rb.keys())
        for k in ra:
            if isinstance(ra[k], float) and not math.isnan(ra[k]):
                assert ra[k] == pytest.approx(rb[k], **FP32), (ra["step"], k, ra[k], rb[k])
            else:
                assert ra[k] == rb[k], (ra["step"], k)


def char_reward(prompts, completions, **kwargs):
    """Varies within every group (an untrained model is never right), so the loss is not zero."""
    return [sum(map(ord, c[0]["content"])) % 7 / 7 for c in completions]


def make_loop(tok, out, lora=False, **cfg):
    task = ArithmeticTask(n_eval=16, seed=0)
    rows, heldout = task.splits()
    model = build_model(tok, seed=0)
    if lora:
        model = add_peft_lora(model, lora_kwargs(4))
    config = GRPOScratchConfig(**{**dict(max_steps=6, prompts_per_step=3, num_generations=4, num_iterations=2, beta=0.05,
                                  max_completion_length=3, learning_rate=3e-3, lr_scheduler_type="linear",
                                  eval_every=2, save_steps=2, seed=3, output_dir=str(out)), **cfg})
    return GRPOScratchTrainer(model, tok, [exact_match_reward(), char_reward], rows, config,
                    eval_fn=lambda m: task.evaluate(m, tok, heldout))


@pytest.mark.parametrize("lora", [False, True])
def test_resumed_run_logs_the_same_rows_as_the_uninterrupted_one(tok, tmp_path, lora):
    """6 steps straight through vs. 4 steps, then a fresh trainer (same start model, same
    config) resumed from checkpoint-4: steps 5 and 6 have equal rewards, losses, clip stats,
    KL to the reference and eval accuracy (fp32 tolerance), the final weights are equal, and
    the resumed run's metrics.jsonl holds the whole run. Full model and LoRA adapter."""
    full = make_loop(tok, tmp_path / "full", lora)
    full_rows = full.train()
    assert [p.name for p in list_checkpoints(tmp_path / "full")] == ["checkpoint-2", "checkpoint-4", "checkpoint-6"]
    ckpt = tmp_path / "full" / "checkpoint-4"
    assert (ckpt / ("adapter_model.safetensors" if lora else "model.safetensors")).exists()

    resumed = make_loop(tok, tmp_path / "resumed", lora)
    resumed_rows = resumed.train(resume_from_checkpoint=ckpt)
    assert_same_rows(resumed_rows, full_rows)  # steps 0-4 carried over, 5-6 recomputed
    assert all(abs(r["loss/policy"]) > 0 and r["loss/kl"] > 0 for r in full_rows if r["step"] > 4), \
        "a zero loss or KL would make the comparison prove little"
    for a, b in zip(full.model.parameters(), resumed.model.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    on_disk = [json.loads(x) for x in (tmp_path / "resumed" / "metrics.jsonl").read_text().splitlines()]
    assert_same_rows(on_disk, full_rows)


def test_resume_without_restoring_state_would_differ(tok, tmp_path):
    """The control: a fresh run of steps 5-6 from the checkpoint's weights alone (optimizer, schedule,
    sampler and random state not restored) logs different rows, so the test above can fail."""
    full = make_loop(tok, tmp_path / "full")
    full_rows = full.train()
    naive = make_loop(tok, tmp_path / "naive")
    from sdpo_kit.core.checkpoint import load_model_weights

    load_model_weights(naive.model, tmp_path / "full" / "checkpoint-4")
    naive.config.max_steps = 2
    naive.config.save_steps = 0
    rows = [r for r in naive.train() if r["step"] > 0]
    later = [r for r in full_rows if r["step"] > 4]
    assert any(abs(a["loss"] - b["loss"]) > 1e-4 or a["reward/mean"] != b["reward/mean"] for a, b in zip(rows, later))


def test_bad_checkpoint_paths_are_named(tok, tmp_path):
    """A folder that is not a checkpoint is refused with its name; the CLI says so and exits 2."""
    loop = make_loop(tok, tmp_path / "x")
    with pytest.raises(FileNotFoundError, match="not an sdpo_kit checkpoint"):
        loop.train(resume_from_checkpoint=tmp_path)
    rc = cli.main(["train", str(CONFIGS / "demo.yaml"), "--resume-from", str(tmp_path / "nope")])
    assert rc == 2


def test_save_total_limit_keeps_the_newest(tok, tmp_path):
    """save_total_limit=2 keeps checkpoint-4 and checkpoint-6 only."""
    make_loop(tok, tmp_path, save_total_limit=2).train()
    assert [p.name for p in list_checkpoints(tmp_path)] == ["checkpoint-4", "checkpoint-6"]


@pytest.mark.parametrize("backend", ["scratch", "trl"])
def test_cli_resume_from(backend, tmp_path, capsys):
    """``sdpo-kit train CONFIG --resume-from OUT/checkpoint-2 --output-dir OUT2`` continues at
    step 3 on both backends (TRL: ``Trainer.train(resume_from_checkpoint=...)``) and the new
    metrics.jsonl has every step, the rows of steps 3-4 equal to the uninterrupted run's."""
    args = ["--backend", backend, "--max-steps", "4", "--set", "task.n_eval=16", "--set", "trainer.prompts_per_step=4",
            "--set", "trainer.save_steps=2", "--set", "trainer.eval_every=2"]
    assert cli.main(["train", str(CONFIGS / "demo.yaml"), "--output-dir", str(tmp_path / "a"), *args]) == 0
    ckpt = tmp_path / "a" / "checkpoint-2"
    if backend == "trl":  # TRL counts optimizer passes: mu = 2 in the demo config
        ckpt = tmp_path / "a" / "checkpoint-4"
    assert ckpt.is_dir(), sorted(p.name for p in (tmp_path / "a").iterdir())
    rc = cli.main(["train", str(CONFIGS / "demo.yaml"), "--output-dir", str(tmp_path / "b"),
                   "--resume-from", str(ckpt), *args])
    assert rc == 0
    read = [json.loads(x) for x in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    first = [json.loads(x) for x in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in read if "loss" in r] == [1, 2, 3, 4]
    assert read[0]["step"] == 0 and "eval/accuracy" in read[-1]
    assert_same_rows(read, first)
    assert load_config(tmp_path / "b" / "config.yaml").backend == backend
    assert "resume_from=" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------
# a changed max_steps under a schedule laid out over it
# ---------------------------------------------------------------------------------------
def test_resume_refuses_another_max_steps_under_a_linear_schedule(tok, tmp_path):
    """The linear schedule decays to 0 over max_steps x mu updates, so resuming checkpoint-2 of a
    4-step run with max_steps=6 would follow another schedule: refused before any weight is
    loaded, naming both values. A constant schedule does not depend on max_steps: the same
    change extends the run (steps 3-6 logged)."""
    make_loop(tok, tmp_path / "linear", max_steps=4, eval_every=0).train()
    longer = make_loop(tok, tmp_path / "linear_again", max_steps=6, eval_every=0)
    before = [p.detach().clone() for p in longer.model.parameters()]
    with pytest.raises(ValueError, match="max_steps=4, this run has max_steps=6"):
        longer.train(resume_from_checkpoint=tmp_path / "linear" / "checkpoint-2")
    assert all(torch.equal(a, b) for a, b in zip(before, longer.model.parameters())), "nothing was loaded"

    kw = dict(lr_scheduler_type="constant", eval_every=0, num_iterations=1, save_steps=2)
    make_loop(tok, tmp_path / "constant", max_steps=2, **kw).train()
    rows = make_loop(tok, tmp_path / "constant_again", max_steps=4, **kw).train(
        resume_from_checkpoint=tmp_path / "constant" / "checkpoint-2")
    assert [r["step"] for r in rows if "loss" in r] == [1, 2, 3, 4]


def test_trl_resume_refuses_another_max_steps_under_a_decaying_schedule(tmp_path):
    """TRL backend: transformers restores the scheduler's step but lays the schedule out over the
    new max_steps. ``train_trl`` reads the checkpoint's max_steps (TRL steps, mu = 2 here) and
    refuses another one, naming both in sdpo_kit and TRL steps, when the schedule depends on it
    (linear, cosine, constant_with_warmup with a fractional warmup); constant passes."""
    from types import SimpleNamespace

    from trl import GRPOConfig as GRPOTRLConfig

    from sdpo_kit.core.trl_base import MetricsCallback, check_resume_max_steps, train_trl

    ckpt = tmp_path / "checkpoint-4"
    ckpt.mkdir()
    (ckpt / "trainer_state.json").write_text(json.dumps({"max_steps": 8, "global_step": 4}))

    def args(**kw):
        return GRPOTRLConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", max_steps=12, **kw)

    trainer = SimpleNamespace(args=args(lr_scheduler_type="linear"), metrics_callback=MetricsCallback(num_iterations=2),
                              train=lambda **kw: pytest.fail("train() must not start"))
    with pytest.raises(ValueError, match=r"max_steps=4 \(TRL's 8\), this run has max_steps=6 \(TRL's 12\)"):
        train_trl(trainer, ckpt)
    for kw in ({"lr_scheduler_type": "cosine"}, {"lr_scheduler_type": "constant_with_warmup", "warmup_steps": 0.1}):
        with pytest.raises(ValueError, match="laid out over max_steps"):
            check_resume_max_steps(8, args(**kw), 2)
    for kw in ({"lr_scheduler_type": "constant"}, {"lr_scheduler_type": "constant_with_warmup", "warmup_steps": 2}):
        check_resume_max_steps(8, args(**kw), 2)
    check_resume_max_steps(12, args(lr_scheduler_type="linear"), 2)  # the same max_steps: fine
