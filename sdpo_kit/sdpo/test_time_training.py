# alias until notebook 06 moves: test-time SDPO lives in sdpo_kit.sdpo.at_test_time
from sdpo_kit.sdpo.at_test_time import *  # noqa: F401,F403
from sdpo_kit.sdpo.at_test_time import (  # noqa: F401
    discovery_curves,
    feedback_teacher_prompts,
    sdpo_step,
    success_rates,
    test_time_sdpo,
)
