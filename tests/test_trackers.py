"""report_to on both backends, offline: the scratch loop writes its rows (sdpo_kit's names, one point
per step) through TensorBoard's SummaryWriter, trackio and wandb (offline mode); the TRL backend
hands report_to to TRL, whose TensorBoard callback writes TRL's names. Each test skips when its
library is not installed (``pip install 'sdpo_kit[trackers]'``: the dev extra has them)."""

from __future__ import annotations

import time

import pytest

from sdpo_kit.core.trackers import Trackers, check_report_to, scalars
from sdpo_kit.grpo.config import GRPOScratchConfig
from sdpo_kit.grpo.loop import GRPOScratchTrainer
from sdpo_kit.grpo.trl import build_trl_grpo_trainer
from sdpo_kit.lab.model import build_model, build_tokenizer
from sdpo_kit.tasks import ArithmeticTask

STEPS = 3
FP32 = {"rel": 1e-5, "abs": 1e-6}


def char_reward(prompts, completions, **kwargs):
    return [sum(map(ord, c[0]["content"])) % 7 / 7 for c in completions]


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def run(tok, out, report_to):
    rows = ArithmeticTask(n_eval=8, seed=0).splits()[0]
    cfg = GRPOScratchConfig(max_steps=STEPS, prompts_per_step=2, num_generations=4, max_completion_length=3,
                     output_dir=str(out), report_to=report_to, log_completions_every=0)
    return [r for r in GRPOScratchTrainer(build_model(tok, seed=0), tok, [char_reward], rows, cfg).train() if "loss" in r]


def event_scalars(folder) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_report_to_names():
    """TRL's names, alone or in a list; "none" means no tracker; anything else is refused."""
    assert check_report_to("none") == [] and check_report_to(None) == []
    assert check_report_to(["tensorboard", "wandb"]) == ["tensorboard", "wandb"]
    with pytest.raises(ValueError, match="report_to"):
        check_report_to("mlflow")
    with pytest.raises(ValueError, match="report_to"):
        GRPOScratchConfig(report_to="tensorbord")
    assert scalars({"step": 2, "loss": 0.5, "eval/accuracy": None, "x": float("nan"), "flag": True}) == {"loss": 0.5}


def test_scratch_tensorboard_event_files(tok, tmp_path):
    """output_dir/runs/<time>_<host>/ holds reward/mean and loss at steps 1..3, equal to the rows."""
    pytest.importorskip("tensorboard")
    rows = run(tok, tmp_path, "tensorboard")
    (folder,) = list((tmp_path / "runs").iterdir())
    tags = event_scalars(folder)
    for key in ("reward/mean", "loss", "loss/kl", "stats/clip_frac"):
        assert [s for s, _ in tags[key]] == [1, 2, 3], key
        assert [v for _, v in tags[key]] == pytest.approx([r[key] for r in rows], **FP32), key


def test_scratch_trackio_local(tok, tmp_path, monkeypatch):
    """trackio, local (no Space): the project's database holds the rows, one per step."""
    monkeypatch.setenv("TRACKIO_DIR", str(tmp_path / "trackio"))
    pytest.importorskip("trackio")
    from trackio.sqlite_storage import SQLiteStorage

    rows = run(tok, tmp_path / "run", "trackio")
    logs = SQLiteStorage.get_logs("huggingface", "run")
    assert [x["step"] for x in logs] == [1, 2, 3]
    assert [x["reward/mean"] for x in logs] == pytest.approx([r["reward/mean"] for r in rows], **FP32)
    assert [x["loss"] for x in logs] == pytest.approx([r["loss"] for r in rows], **FP32)


def test_scratch_wandb_offline(tok, tmp_path, monkeypatch):
    """wandb with WANDB_MODE=offline (no network, no login): an offline run under output_dir/wandb
    whose history records carry the metric names (``wandb sync`` uploads it later)."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    pytest.importorskip("wandb")
    run(tok, tmp_path, "wandb")
    (log,) = list((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))
    deadline = time.monotonic() + 30  # wandb's service process may still be writing the file after finish()
    while b"loss/kl" not in log.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.2)
    data = log.read_bytes()
    assert b"reward/mean" in data and b"loss/kl" in data


def test_trl_passes_report_to_through(tok, tmp_path):
    """The TRL backend: report_to reaches TRL's arguments, and transformers' TensorBoard callback
    writes TRL's own names (train/reward, train/loss) in output_dir/runs/."""
    pytest.importorskip("tensorboard")
    rows = ArithmeticTask(n_eval=8, seed=0).splits()[0]
    trainer = build_trl_grpo_trainer(build_model(tok, seed=0), tok, [char_reward], rows, preset="cpu",
                                     output_dir=tmp_path, verbose=False, max_steps=2, prompts_per_step=2,
                                     num_generations=4, max_completion_length=3, report_to="tensorboard")
    assert trainer.args.report_to == ["tensorboard"]
    trainer.train()
    (folder,) = list((tmp_path / "runs").iterdir())
    tags = event_scalars(folder)
    assert [s for s, _ in tags["train/reward"]] == [1, 2] and [s for s, _ in tags["train/loss"]] == [1, 2]
    assert [v for _, v in tags["train/reward"]] == pytest.approx([r["reward/mean"] for r in trainer.history
                                                                  if "reward/mean" in r], **FP32)


def test_none_opens_nothing(tmp_path):
    """report_to="none": start, log and close do nothing (no folder, no import)."""
    t = Trackers("none", tmp_path)
    t.start()
    t({"step": 1, "loss": 1.0})
    t.close()
    assert not any(tmp_path.iterdir())


# (loss, reward/mean, loss/kl) of steps 1-4 of unchanged_run(), as the code before trackers, completions.jsonl
# and the dashboard existed (commit 8365832) computed them on this CPU build (torch 2.13.0, one thread)
BEFORE = [(-0.1374938189983368, 0.4464285671710968, 0.0851229801774025),
          (-0.11402586102485657, 0.267857164144516, 0.04551945626735687),
          (-0.12373090535402298, 0.2857142984867096, 0.06665649265050888),
          (-0.09373849630355835, 0.4464285969734192, 0.041614070534706116)]


def unchanged_run(tok, callbacks=(), **cfg):
    rows = ArithmeticTask(n_eval=8, seed=0).splits()[0]
    config = GRPOScratchConfig(**{**dict(max_steps=4, prompts_per_step=2, num_generations=4, max_completion_length=3,
                                  num_iterations=2, beta=0.05, learning_rate=3e-3, seed=1), **cfg})
    loop = GRPOScratchTrainer(build_model(tok, seed=0), tok, [char_reward], rows, config, callbacks=callbacks)
    return [(r["loss"], r["reward/mean"], r["loss/kl"]) for r in loop.train()]


def test_numbers_are_unchanged_with_trackers_off(tok, tmp_path):
    """report_to="none" and no dashboard, with or without completions.jsonl: a short CPU run's losses,
    rewards and KL are the ones the code computed before any of these existed (fp32 tolerance), so
    the benchmarks' numbers stand. (Trackers and the dashboard only read rows: tests/test_dashboard.py
    checks a run with them on gives the same numbers too.)"""
    for got in (unchanged_run(tok), unchanged_run(tok, output_dir=str(tmp_path), log_completions_every=1)):
        assert len(got) == len(BEFORE)
        for g, b in zip(got, BEFORE):
            assert g == pytest.approx(b, **FP32)
