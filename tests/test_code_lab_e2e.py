"""CI runs the tiny-lab code task end to end: ``configs/sdpo_code_lab.yaml`` (SDPO with the code
reward's feedback) for a few steps from a small warm start, every completion run in the sandbox."""

import json
from pathlib import Path

from sdpo_kit import cli
from sdpo_kit.sandbox import batch

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "sdpo_code_lab.yaml"


def test_sdpo_trains_on_lab_code_with_sandbox_feedback(tmp_path, monkeypatch):
    """Three SDPO steps: the rewards come from sandboxed runs of the model's programs (counted),
    the tests' feedback reaches the teacher (``sdpo/feedback_frac`` > 0 on some step: a small warm
    start writes wrong programs), the metrics and the model are written, and the run ends with a
    held-out accuracy in [0, 1]. That SDPO improves anything here is measured
    (benchmarks/bench_code_lab.py), not tested."""
    runs = []

    def counted(*args, **kwargs):
        runs.append(1)
        return real(*args, **kwargs)

    real = batch.run_program
    monkeypatch.setattr(batch, "run_program", counted)
    out = tmp_path / "run"
    rc = cli.main(["train", str(CONFIG), "--max-steps", "3", "--output-dir", str(out),
                   "--set", "model.lab.sft_steps=40", "--set", "model.lab.context_steps=20",
                   "--set", "task.n_eval=12", "--set", "trainer.prompts_per_step=4",
                   "--set", "trainer.num_generations=4", "--set", "trainer.eval_every=3"])
    assert rc == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if r["step"] > 0]
    assert [r["step"] for r in steps] == [1, 2, 3]
    assert runs, "no program ran in the sandbox"
    assert max(r["sdpo/feedback_frac"] for r in steps) > 0
    assert 0.0 <= rows[-1]["eval/accuracy"] <= 1.0
    assert (out / "model" / "model.safetensors").exists()
