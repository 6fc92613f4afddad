"""Text helpers that need nothing above them: the second floor, under the lab, the rewards and every algorithm.

    answers.py   reading an answer out of a completion: the answer rules (``first_line``, ``answer_tag``,
                 ``boxed``, ``hashes``, ``last_number``, ``first_number``, ``auto``, or a function of one's own),
                 ``extract_answer``, ``is_correct``, and ``completion_text`` (a string or TRL's chat messages)
    shown.py     text as a console shows it: a prompt's question, a reply on one line
    reprompt.py  SDPO's teacher prompts: the prompt plus a sibling's solution that worked and / or feedback
                 (TRL's templates and selection), which SDPO trains with and the tiny lab's warm start teaches

Both are plain functions of text (``reprompt`` builds a (B,) mask with torch): no model, no task, no reward.
Left out on purpose: tokenising (``core.sampling``) and grading programs (``sandbox``).
"""
