# alias until notebook 05 moves: the teacher prompts live in sdpo_kit.text.reprompt
from sdpo_kit.text.reprompt import *  # noqa: F401,F403
from sdpo_kit.text.reprompt import (  # noqa: F401
    FEEDBACK_TEMPLATE,
    REPROMPT_TEMPLATE,
    SOLUTION_TEMPLATE,
    build_teacher_prompts,
    reprompt,
)
