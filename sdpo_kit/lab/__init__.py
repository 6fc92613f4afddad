"""The offline tiny lab: everything a CPU needs to run the notebooks with no download.

    model.py         the character tokenizer, the tiny Llama, its cached SFT warm start, and
                     ``lab_config_for`` (the warm-start recipe that follows a run's task)
    tasks.py         the Task protocol and the synthetic verifiable tasks (arithmetic, tagged
                     answers), split into train and held-out problems by what makes two prompts the
                     same problem
    feedback.py      checkers' feedback on a number: too large / too small, or which digits are wrong
    skill.py         the SDPO skill lab's dial: SFT rows whose prompt is SDPO's teacher prompt
    environments.py  the Environment protocol (a step returns score and feedback), ArithmeticEnvironment
    code_task.py     the code task (``lab_code``): an expression in x, run by the code reward's sandbox
"""

from sdpo_kit.lab import code_task  # noqa: F401 (registers "lab_code" in tasks.TASKS)
