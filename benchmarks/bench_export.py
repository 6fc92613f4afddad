"""Export round trips: every format of one trained tiny-lab run, loaded back and compared.

    python benchmarks/bench_export.py [--steps 50]

Trains ``configs/demo.yaml`` for ``--steps`` steps twice (the full model, and with a LoRA adapter),
exports each run in every CPU format (LoRA adapter, merged fp32 / fp16 / bf16, GGUF f32 / f16 /
q8_0 through llama.cpp's converter), loads each export back (transformers; its GGUF loader for
GGUF) and compares with the run's model in fp32 on 200 held-out prompts: the largest next-token
logit difference, the share of greedy answers that are the same, the GGUF vocabulary id for id, the
size on disk and the export time. Writes ``benchmarks/results/export.json``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _common import ROOT, parse_args, write_results

FORMATS = [("lora", {}), ("merged", {"dtype": "fp32"}), ("merged", {"dtype": "fp16"}), ("merged", {"dtype": "bf16"}),
           ("gguf", {"quant": "f32"}), ("gguf", {"quant": "f16"}), ("gguf", {"quant": "q8_0"})]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    args = parse_args(ap)
    from sdpo_kit import cli, make_task
    from sdpo_kit.deploy.export import export, round_trip
    from sdpo_kit.deploy.gguf import gguf_round_trip

    prompts = [r["prompt"] for r in make_task("arithmetic", n_eval=200, seed=0).splits()[1]]
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind, extra in (("full", []), ("lora", ["--set", "model.lora=4"])):
            run = Path(tmp) / kind
            cli.main(["train", str(ROOT / "configs" / "demo.yaml"), "--max-steps", str(args.steps), "--output-dir",
                      str(run), "--set", "trainer.eval_every=0", *extra])
            for fmt, kw in FORMATS:
                if fmt == "lora" and kind == "full":
                    continue
                label = f"{fmt} {next(iter(kw.values()), '')}".strip()
                t0 = time.perf_counter()
                out = export(run, fmt, Path(tmp) / f"{kind}-{label.replace(' ', '-')}", **kw)
                seconds = time.perf_counter() - t0
                if fmt == "gguf":
                    rt = gguf_round_trip(run, next(out.glob("*.gguf")), prompts)
                else:
                    rt = round_trip(run, out, prompts)
                size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
                runs.append({"run": kind, "format": label, "export_s": seconds, "bytes": size,
                             "max_logit_diff": rt["max_logit_diff"], "greedy_agree": rt["greedy_agree"],
                             "vocab_equal": rt.get("vocab_equal")})
    write_results("export", config={"config": "configs/demo.yaml", "steps": args.steps, "prompts": len(prompts)},
                  runs=runs, summary={})


if __name__ == "__main__":
    main()
