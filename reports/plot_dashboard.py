"""The dashboard's picture for the README and the docs, from a real run of the demo config.

    python reports/plot_dashboard.py [--steps 150] [--out docs/img/dashboard.png]

Trains configs/demo.yaml (the tiny lab, GRPO, scratch loop) for ``--steps`` steps with a
``viz.dashboard.Dashboard`` among the callbacks, then writes ``Dashboard.snapshot``: the status line,
the plot panels and the last sampled completions as the headless run shows them (a browser's view of
the widget holds the same three parts, with a live stop button).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--out", default=str(ROOT / "docs" / "img" / "dashboard.png"))
    args = ap.parse_args()

    import torch

    from sdpo_kit.core.utils import seed_everything
    from sdpo_kit.grpo.loop import GRPOScratchTrainer
    from sdpo_kit.lab.model import lab_config_for
    from sdpo_kit.models import load_policy
    from sdpo_kit.registry import load_config, make_task, panels_for
    from sdpo_kit.rewards import make_reward
    from sdpo_kit.viz.dashboard import Dashboard

    torch.set_num_threads(1)
    cfg = load_config(ROOT / "configs" / "demo.yaml", {"trainer.max_steps": args.steps, "output_dir": "runs/dashboard"})
    seed_everything(cfg.trainer.seed)
    task = make_task(**cfg.task)
    rows, heldout = task.splits()
    model, tok = load_policy(cfg.model.name, lab_config=lab_config_for(cfg, task))
    rewards = make_reward(cfg.reward, model=model, tokenizer=tok, task=task)
    dash = Dashboard(panels=panels_for("grpo"), title=f"GRPO, tiny lab, configs/demo.yaml ({args.steps} steps)",
                     every=10, table_size=8, table_every=0)
    loop = GRPOScratchTrainer(model, tok, rewards, rows, cfg.trainer, callbacks=[dash],
                    eval_fn=lambda m: task.evaluate(m, tok, heldout))
    t0 = time.perf_counter()
    dash.train(loop)
    out = Path(args.out)
    dash.snapshot(out)
    print(f"{args.steps} steps in {time.perf_counter() - t0:.0f} s; {dash.status_text(final=True)}; wrote {out}")


if __name__ == "__main__":
    main()
