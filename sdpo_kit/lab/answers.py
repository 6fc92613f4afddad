# alias until notebook 00 moves: the answer rules live in sdpo_kit.text.answers
from sdpo_kit.text.answers import *  # noqa: F401,F403
from sdpo_kit.text.answers import extract_answer  # noqa: F401
