"""Taking a trained run elsewhere (notebook 08).

    run_model.py    a run's model loaded back, and two models compared on held-out prompts
    evaluate.py     ``sdpo-kit eval``: held-out accuracy of a run, an export or a model on a config's task
    export.py       ``sdpo-kit export``: LoRA adapter, merged fp32 / fp16 / bf16, 4-bit, GGUF
    gguf.py         GGUF through llama.cpp's own converter (gguf_convert.py: the converter run as a script)
    verl.py         ``sdpo-kit export-verl``: parquet, reward module, run_verl.sh
    verl_config.py  our settings as verl's Hydra overrides, and what verl's config cannot say
"""

from sdpo_kit.core.lazy import lazy_exports

EXPORTS = {   # sk.export and sk.export_verl are the front door; these check what they wrote
    "round_trip": "sdpo_kit.deploy.export:round_trip",
    "base_model": "sdpo_kit.deploy.run_model:base_model",
    "gguf_round_trip": "sdpo_kit.deploy.gguf:gguf_round_trip",
    "ExportError": "sdpo_kit.deploy.run_model:ExportError",
}
__all__ = sorted(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
