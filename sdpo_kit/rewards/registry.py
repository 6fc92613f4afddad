"""``make_reward``: reward functions from config entries (``{"type": ..., **options}``).

The registry ``REWARD_BUILDERS`` maps a type name to ``(builder(model, tokenizer, task,
**options), needs_model)``; a new reward is one entry. Options are checked against the
builder's signature, so a typo is an error naming the valid options.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

from sdpo_kit.rewards.code import code_reward
from sdpo_kit.rewards.core import RewardFunc
from sdpo_kit.rewards.model_scored import (
    ANSWER_SEPARATOR,
    answer_likelihood_reward,
    coverage_weighted_ce_reward,
    inverse_loss_reward,
)
from sdpo_kit.rewards.verifiable import (
    answer_format_reward,
    exact_match_reward,
    feedback_reward,
    format_and_match_reward,
    tag_format_reward,
    task_feedback_reward,
)
from sdpo_kit.text.answers import rule_for


def task_rule(task, tagged=None, rule=None) -> str | None:
    """The answer rule a reward reads with: ``rule`` when given, ``tagged`` when given, else the
    task's own (``task.rule``: a tagged task's answers live in <answer> tags, a real model's task
    reads free text)."""
    if rule is not None or tagged is not None:
        return rule_for(bool(tagged), rule)
    return getattr(task, "rule", None) or rule_for(bool(getattr(task, "tagged", False)))


def _exact_match_from_config(model, tokenizer, task, answer_field="answer", tagged=None, rule=None):
    return exact_match_reward(answer_field, rule=task_rule(task, tagged, rule))


def _feedback_from_config(model, tokenizer, task, answer_field="answer", tagged=None, style=None, rule=None):
    """The task's own checker when it has one (``task.scored``, the lab's code task), else exact match
    with the arithmetic checker's feedback in the task's style and answer rule."""
    if hasattr(task, "scored"):
        return task_feedback_reward(task, answer_field)
    if hasattr(task, "feedback_reward"):   # a dataset task: its feedback column's text, or a generic line
        return task.feedback_reward(answer_field)
    style = getattr(task, "feedback_style", "direction") if style is None else style
    return feedback_reward(answer_field, style=style, rule=task_rule(task, tagged, rule))


def _reward_model_from_config(model, tokenizer, task, name="tiny-lab", micro_batch_size=256):
    """A sequence-classification reward model: the tiny lab's (built and cached in code, for the
    task's digits / terms) or a local directory / hub id with its own tokenizer."""
    from sdpo_kit.rewards.learned import RewardModelConfig, build_reward_model, sequence_classifier_reward

    if name == "tiny-lab":
        rm, rm_tok = build_reward_model(RewardModelConfig(digits=getattr(task, "digits", 1),
                                                          terms=getattr(task, "terms", 3)))
    else:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        rm, rm_tok = AutoModelForSequenceClassification.from_pretrained(name).eval(), AutoTokenizer.from_pretrained(name)
    return sequence_classifier_reward(rm, rm_tok, micro_batch_size)


def _probe_reward_model_from_config(model, tokenizer, task, n_questions=200, wrong_per_question=3, max_offset=5,
                                    completion_format="{answer}", steps=300, micro_batch_size=16, seed=0):
    """A reward model on the policy's own starting features (``learned.build_probe_reward_model``), fitted on
    the task's training questions: a LoRA policy is read with its adapter off (its base never trains), any
    other through a frozen copy taken now."""
    import copy

    from sdpo_kit.rewards.learned import ProbeRewardModelConfig, build_probe_reward_model

    trunk = model if hasattr(model, "disable_adapter") else copy.deepcopy(model).eval().requires_grad_(False)
    cfg = ProbeRewardModelConfig(n_questions=n_questions, wrong_per_question=wrong_per_question, max_offset=max_offset,
                                 completion_format=completion_format, steps=steps, micro_batch_size=micro_batch_size,
                                 seed=seed)
    return build_probe_reward_model(trunk, tokenizer, task.splits()[0], cfg).as_reward()


def _environment_from_config(model, tokenizer, task, factory=None, answer_field="answer"):
    """An ``Environment`` (``sdpo_kit.tasks.environments``) as a reward: ``factory`` is an import path
    ``"package.module:callable"`` returning a fresh environment; None: the tiny lab's
    ``ArithmeticEnvironment`` on the config's task. Scores and feedback: ``environment_reward``."""
    import importlib

    from sdpo_kit.tasks.arithmetic import ArithmeticTask
    from sdpo_kit.tasks.environments import ArithmeticEnvironment, environment_reward

    if factory is None:
        task = ArithmeticTask() if task is None else task
        if not isinstance(task, ArithmeticTask):
            raise ValueError(f"reward type 'environment' needs factory='module:callable' for task {type(task).__name__}")
        return environment_reward(lambda: ArithmeticEnvironment(task=task), answer_field)
    module, _, name = str(factory).partition(":")
    try:
        make_env = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as e:
        raise ValueError(f"reward type 'environment': cannot import factory {factory!r} "
                         f"(expected 'package.module:callable'): {e}") from None
    return environment_reward(make_env, answer_field)


def _python_from_config(model, tokenizer, task, function=None, base_dir=None):
    """A reward function of one's own: ``function: "my_rewards.py:larger"`` (a file, relative to the config's
    folder, else the working directory) or ``"package.module:name"``, with TRL's signature
    ``fn(prompts, completions, **columns) -> list[float]``. Loaded here, so a missing file or name fails
    before training; what it returns is checked at every call (``core.call_reward_with_feedback``)."""
    from sdpo_kit.core.user_code import UserCodeError, load_function

    if not function:
        raise ValueError("reward type 'python' needs function: 'my_rewards.py:name' or 'package.module:name'")
    try:
        fn = load_function(function, base_dir, what="reward function")
    except UserCodeError as e:
        raise ValueError(str(e)) from None
    return fn


# type -> (builder(model, tokenizer, task, **options), needs a model and tokenizer)
REWARD_BUILDERS: dict[str, tuple[Callable, bool]] = {
    "exact_match": (_exact_match_from_config, False),
    "feedback": (_feedback_from_config, False),
    "tagged_exact_match": (lambda model, tokenizer, task, answer_field="answer":
                           exact_match_reward(answer_field, tagged=True), False),
    "tag_format": (lambda model, tokenizer, task, tag="answer": tag_format_reward(tag), False),
    "format": (lambda model, tokenizer, task, rule=None: answer_format_reward(task_rule(task, None, rule)), False),
    "format_and_match": (lambda model, tokenizer, task, answer_field="answer", format_weight=0.2:
                         format_and_match_reward(answer_field, format_weight), False),
    "inverse_loss": (lambda model, tokenizer, task, scorer="policy", micro_batch_size=64:
                     inverse_loss_reward(model, tokenizer, scorer=scorer, micro_batch_size=micro_batch_size),
                     True),
    "supervised": (lambda model, tokenizer, task, answer_field="answer", scorer="policy", micro_batch_size=64:
                   coverage_weighted_ce_reward(model, tokenizer, answer_field, scorer=scorer,
                                               micro_batch_size=micro_batch_size), True),
    "answer_likelihood": (lambda model, tokenizer, task, answer_field="answer", separator=ANSWER_SEPARATOR,
                          scorer="policy", micro_batch_size=64:
                          answer_likelihood_reward(model, tokenizer, answer_field, separator=separator,
                                                   scorer=scorer, micro_batch_size=micro_batch_size), True),
    "reward_model": (_reward_model_from_config, False),
    "probe_reward_model": (_probe_reward_model_from_config, True),
    "environment": (_environment_from_config, False),
    "python": (_python_from_config, False),
    "code": (lambda model, tokenizer, task, tests_field="tests", partial=False, test_fraction=1.0, split_seed=0,
             timeout_s=2.0, memory_mb=1024, workers=None:
             code_reward(tests_field, partial, test_fraction, split_seed, timeout_s, memory_mb, workers), False),
}
REWARD_BUILDERS["coverage_ce"] = REWARD_BUILDERS["supervised"]  # alias: "supervised" names what it needs, this what it computes
REWARD_TYPES = tuple(sorted(REWARD_BUILDERS))


def make_reward(config: dict | str | Sequence[dict | str], model=None, tokenizer=None, task=None) -> list[RewardFunc]:
    """Reward functions from config entries; always returns a list (one per entry).

    An entry is a type name or a dict ``{"type": ..., **options}``:

        exact_match          answer_field="answer", rule=None (text/answers.py: first_line | answer_tag |
                             boxed | hashes | last_number | auto; None: the task's answer_rule),
                             tagged=None (True: rule answer_tag)
        feedback             exact match returning {"score", "feedback"} (SDPO's reprompts read the text);
                             style: direction | digits (default: the task's feedback_style), rule and
                             tagged as exact_match; a task with its own checker (``task.scored``, the
                             lab's code task) scores instead
        format               rule=None (the task's): 1.0 when the completion gives an answer the rule can
                             read, else 0.0 (a small weight teaches a real model where to put it)
        tagged_exact_match   answer_field="answer"
        tag_format           tag="answer"
        format_and_match     answer_field="answer", format_weight=0.2
        inverse_loss         scorer="policy" | "frozen", micro_batch_size=64     (needs model, tokenizer)
        supervised           answer_field="answer", scorer, micro_batch_size     (needs model, tokenizer)
        coverage_ce          alias of supervised (the coverage-weighted CE, model_scored.py)
        answer_likelihood    answer_field="answer", separator="\\nAnswer: ", scorer, micro_batch_size
                                                                                  (needs model, tokenizer)
        reward_model         name="tiny-lab" (built in code) | a sequence-classification model dir / hub id,
                             micro_batch_size=256
        probe_reward_model   n_questions=200, wrong_per_question=3, max_offset=5, completion_format="{answer}",
                             steps=300, micro_batch_size=16, seed=0: a linear head on the policy's own frozen
                             features, fitted on the task's training questions (needs model, tokenizer)
        environment          factory=None (the task's ArithmeticEnvironment) | "package.module:callable",
                             answer_field="answer"; {"score", "feedback"} from Environment.step
        python               function="my_rewards.py:name" (relative to the config's folder, else the working
                             directory) or "package.module:name": your own, TRL's signature
        code                 tests_field="tests" (a list or a JSON string per row), partial=False (True: the
                             share of tests passed), test_fraction=1.0 (the column as it is: load_code_problems'
                             train rows hold the reward's half; 0.5 splits rows holding every test),
                             split_seed=0, timeout_s=2.0 per test, memory_mb=1024, workers=None (the cores);
                             runs the completion's last ```python block in the sandbox, {"score", "feedback"}

    Weights are not an option here: pass them to ``compute_rewards`` / the trainers
    (``reward_weights``). Unknown types or options raise ``ValueError`` listing the valid ones.
    """
    entries = list(config) if isinstance(config, (list, tuple)) else [config]
    if not entries:
        raise ValueError("make_reward got an empty list of reward configs")
    out = []
    for i, entry in enumerate(entries):
        if isinstance(entry, str):
            entry = {"type": entry}
        if not isinstance(entry, dict) or "type" not in entry:
            raise ValueError(f"reward config {i} must be a type name or a dict with a 'type' key, got {entry!r}")
        options = {k: v for k, v in entry.items() if k != "type"}
        rtype = entry["type"]
        if rtype not in REWARD_BUILDERS:
            raise ValueError(f"unknown reward type {rtype!r}; valid types: {', '.join(REWARD_TYPES)}")
        builder, needs_model = REWARD_BUILDERS[rtype]
        accepted = [p for p in inspect.signature(builder).parameters if p not in ("model", "tokenizer", "task")]
        unknown = sorted(set(options) - set(accepted))
        if unknown:
            hint = " (weights go to compute_rewards / reward_weights)" if "weight" in unknown else ""
            raise ValueError(f"reward type {rtype!r} got unknown option(s) {unknown}; "
                             f"accepted: {accepted}{hint}")
        if needs_model and (model is None or tokenizer is None):
            raise ValueError(f"reward type {rtype!r} is scored by a model: pass model= and tokenizer= to make_reward")
        out.append(builder(model, tokenizer, task, **options))
    return out
