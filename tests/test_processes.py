"""Past one process, on Accelerate: the TRL backend trained by 2 processes on a CPU (gloo), started by torchrun
as ``accelerate launch`` starts them on GPUs. Every step trains the config's global batch (prompts_per_step x
num_generations completions, shared by the ranks), only the main process writes the run's files and
evaluates, and the saved adapter loads back to the accuracy the run ended on. (``accelerate launch --cpu``
starts one process: on CPUs Accelerate's launcher hands several to MPI; torchrun is what it runs on GPUs.)"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

STEPS, PROMPTS, G = 2, 4, 8


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or shutil.which("torchrun")
    if torchrun is None:
        pytest.skip("torchrun is not installed")
    out = tmp_path_factory.mktemp("ddp") / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [torchrun, "--nproc_per_node", "2", "--master_port", "29517", "-m", "sdpo_kit.cli", "train", "demo",
           "--backend", "trl", "--max-steps", str(STEPS), "--output-dir", str(out),
           "--set", "task.n_eval=16", "--set", f"trainer.prompts_per_step={PROMPTS}", "--set", f"trainer.num_generations={G}",
           "--set", "trainer.eval_every=0", "--set", "trainer.log_completions_every=1", "--set", "trainer.preset=cpu",
           "--set", "model.lora=true"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, proc.stdout


def test_two_ranks_ran(run):
    out, stdout = run
    assert "processes=2" in stdout
    checkpoint = max(out.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    assert sorted(p.name for p in checkpoint.glob("rng_state_*.pth")) == ["rng_state_0.pth", "rng_state_1.pth"]


def test_each_step_trains_the_configs_global_batch_once(run):
    out, _ = run
    rows = [json.loads(x) for x in (out / "completions.jsonl").read_text().splitlines()]
    assert collections.Counter(r["step"] for r in rows) == {s: PROMPTS * G for s in range(1, STEPS + 1)}


def test_only_the_main_process_writes_and_evaluates(run):
    out, stdout = run
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in metrics] == [0, *range(1, STEPS + 1)], "one row a step: one writer"
    assert [r["step"] for r in metrics if "eval/accuracy" in r] == [0, STEPS]
    assert stdout.count("held-out accuracy: before") == 1 and stdout.count("sdpo-kit train demo") == 1
    assert json.loads((out / "run_info.json").read_text())["status"] == "finished"


def test_the_saved_adapter_loads_back(run):
    from sdpo_kit.deploy.evaluate import evaluate
    from sdpo_kit.registry import load_config

    out, _ = run
    assert (out / "model" / "adapter_model.safetensors").exists()
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    result = evaluate(str(out), load_config(out / "config.yaml"), progress=False)
    assert result.kind == "run" and result.accuracy == metrics[-1]["eval/accuracy"]
