"""Rewards: verifiable rewards on tables of (completion, expected), the model-scored rewards
against reference code that runs one forward per example, batching, the zero-advantage pitfall and the factory.

Model-scored rewards run on the untrained tiny lab model (float32, CPU); batched and
per-example scores agree within atol=1e-5.
"""

from __future__ import annotations

import math
import random

import pytest
import torch

from sdpo_kit.core.sampling import render_prompts
from sdpo_kit.lab.model import build_model, build_tokenizer
from sdpo_kit.losses import group_advantages
from sdpo_kit.rewards import (
    REWARD_TYPES,
    answer_likelihood_reward,
    call_reward,
    coverage_weighted_ce_reward,
    exact_match_reward,
    format_and_match_reward,
    inverse_loss_reward,
    make_reward,
    reward_name,
    tag_format_reward,
)
from sdpo_kit.tasks import ArithmeticTask, completion_text

ATOL = 1e-5


def chat(text):
    return [{"role": "assistant", "content": text}]


def user(text):
    return [{"role": "user", "content": text}]


# ---------------------------------------------------------------------------------------
# verifiable rewards: tables
# ---------------------------------------------------------------------------------------
EXACT_PLAIN = [  # answer "9"
    ("9", 1.0),
    ("9\n", 1.0),
    (" 9 ", 1.0),
    ("9.", 1.0),               # a trailing full stop is not part of the number
    ("9\nbecause 3+5+1", 1.0),  # only the first line is the answer
    ("\n9", 1.0),              # leading whitespace is stripped before the first line is taken
    ("", 0.0),
    (None, 0.0),
    ("   \n\t ", 0.0),
    ("09", 0.0),
    ("9 9", 0.0),
    ("99", 0.0),
    ("8", 0.0),
    ("nine", 0.0),
    ("\uff19", 0.0),           # fullwidth digit nine
    ("9\ufe0f\u20e3", 0.0),    # keycap emoji
    ("\x00\xff\ud7ff", 0.0),
    ("<answer>9</answer>", 0.0),  # the plain reward does not read tags
    (chat("9"), 1.0),
    (chat(" 9\n"), 1.0),
    (chat(""), 0.0),
    (chat("8"), 0.0),
    ([], 0.0),
    ([{"role": "assistant"}], 0.0),  # a message without content
]

EXACT_TAGGED = [  # answer "9"
    ("<answer>9</answer>", 1.0),
    ("<answer> 9 </answer>", 1.0),
    ("<answer>\n9\n</answer>", 1.0),
    ("work: 3+5+1 <answer>9</answer> done", 1.0),
    ("\x00\xff<answer>9</answer>\ud7ff", 1.0),  # garbage around a good tag pair
    ("<answer>9</answer><answer>8</answer>", 1.0),  # the first tag pair is the answer
    ("<answer>8</answer><answer>9</answer>", 0.0),
    ("<answer><answer>9</answer></answer>", 0.0),  # nested: the first pair holds "<answer>9"
    ("<answer></answer>", 0.0),
    ("<answer>   </answer>", 0.0),
    ("<answer>9", 0.0),
    ("9</answer>", 0.0),
    ("</answer>9<answer>", 0.0),
    ("<ANSWER>9</ANSWER>", 0.0),
    ("<answer>09</answer>", 0.0),
    ("<answer>9 9</answer>", 0.0),
    ("9", 0.0),
    ("", 0.0),
    (None, 0.0),
    ("   ", 0.0),
    (chat("<answer>9</answer>"), 1.0),
    (chat("9"), 0.0),
    (chat(""), 0.0),
]

TAG_FORMAT = [
    ("<answer>9</answer>", 1.0),
    ("<answer>wrong but well formed</answer>", 1.0),  # format only, not correctness
    ("text <answer>9</answer> text", 1.0),
    ("<answer></answer>", 0.0),
    ("<answer> \n </answer>", 0.0),
    ("<answer>9</answer><answer>8</answer>", 0.0),
    ("<answer><answer>9</answer></answer>", 0.0),
    ("</answer>9<answer>", 0.0),
    ("<answer>9", 0.0),
    ("9</answer>", 0.0),
    ("9", 0.0),
    ("", 0.0),
    (None, 0.0),
    ("\x00\xff\ud7ff", 0.0),
    (chat("<answer>9</answer>"), 1.0),
    (chat(""), 0.0),
]

FORMAT_AND_MATCH = [  # 0.2 * format + 0.8 * tagged exact match, answer "9"
    ("<answer>9</answer>", 1.0),
    ("<answer>8</answer>", 0.2),
    ("<answer>9</answer><answer>8</answer>", 0.8),  # two tags: format fails, the first tag matches
    ("<answer></answer>", 0.0),
    ("9", 0.0),
    ("", 0.0),
    (None, 0.0),
    (chat("<answer>9</answer>"), 1.0),
]


def _score(fn, completions, answer="9"):
    n = len(completions)
    return fn(prompts=[user("3+5+1=")] * n, completions=completions, answer=[answer] * n)


@pytest.mark.parametrize(
    "fn, table",
    [
        (exact_match_reward(), EXACT_PLAIN),
        (exact_match_reward(tagged=True), EXACT_TAGGED),
        (tag_format_reward(), TAG_FORMAT),
        (format_and_match_reward(), FORMAT_AND_MATCH),
    ],
    ids=["exact_match", "tagged_exact_match", "tag_format", "format_and_match"],
)
def test_verifiable_reward_tables(fn, table):
    """Each verifiable reward gives the tabled score for every completion, string or chat,
    including empty, None, whitespace, garbage, multiple / nested / empty tags; one batch
    call scores the whole table (the rows do not influence each other)."""
    completions = [c for c, _ in table]
    got = _score(fn, completions)
    for (c, want), g in zip(table, got):
        assert isinstance(g, float)
        assert g == pytest.approx(want), f"{reward_name(fn)} on {c!r}: got {g}, want {want}"


def test_verifiable_rewards_never_raise_on_random_text():
    """500 random strings over ASCII, tag fragments and non-ASCII code points score in
    [0, 1] under every verifiable reward, and none raises."""
    rng = random.Random(0)
    alphabet = list("0123456789 \n\t.,<>/") + ["<answer>", "</answer>", "\x00", "\xff", "\u00e9", "\U0001f600"]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12))) for _ in range(500)]
    for fn in (exact_match_reward(), exact_match_reward(tagged=True), tag_format_reward(), format_and_match_reward()):
        got = _score(fn, texts, answer=str(rng.randrange(30)))
        assert len(got) == len(texts) and all(0.0 <= g <= 1.0 for g in got)


def test_exact_match_reads_the_configured_column():
    """``answer_field`` picks the column: the reward reads ``target``, ignores ``answer``, and
    declares ``target`` as the column it requires."""
    fn = exact_match_reward(answer_field="target")
    assert fn.required_columns == ("target",)
    got = fn(prompts=["q"] * 2, completions=["9", "8"], target=["9", "9"], answer=["8", "8"])
    assert got == [1.0, 0.0]


def test_verifiable_names_and_required_columns():
    """Readable names (logged as reward/<name>) and the columns each reward requires."""
    assert reward_name(exact_match_reward()) == "exact_match"
    assert reward_name(exact_match_reward(tagged=True)) == "tagged_exact_match"
    assert reward_name(tag_format_reward()) == "answer_format"
    assert reward_name(format_and_match_reward()) == "format_and_match"
    assert exact_match_reward().required_columns == ("answer",)
    assert format_and_match_reward("gold").required_columns == ("gold",)
    assert getattr(tag_format_reward(), "required_columns", ()) == ()


# ---------------------------------------------------------------------------------------
# model-scored rewards: naive references (each formula read literally, one forward per example)
# ---------------------------------------------------------------------------------------
def reference_inverse_loss(model, tokenizer, prompts, completions):
    """The inverse loss's plain form, one forward per example (prompts already rendered)."""
    rewards = []
    for prompt, completion in zip(prompts, completions):
        text = prompt + completion
        inputs = tokenizer(text, return_tensors="pt").to(model.device)
        prompt_length = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
        with torch.no_grad():
            outputs = model(**inputs)
            shift_logits = outputs.logits[..., :-1, :]
            shift_labels = inputs["input_ids"][..., 1:]
            loss_fct = torch.nn.CrossEntropyLoss(reduction="none")
            token_losses = loss_fct(shift_logits.reshape(-1, shift_logits.size(-1)), shift_labels.reshape(-1))
            completion_losses = token_losses[prompt_length - 1:]
            if len(completion_losses) == 0:
                rewards.append(0.0)
            else:
                rewards.append(-completion_losses.mean().item())
    return rewards


def reference_coverage_ce(model, tokenizer, answer, completion):
    """The coverage-weighted CE's plain form, one forward per example."""
    answer_tokens = tokenizer(answer, add_special_tokens=False)["input_ids"]
    completion_tokens = tokenizer(completion, add_special_tokens=False)["input_ids"]
    inputs = tokenizer(completion, return_tensors="pt").to(model.device)
    with torch.no_grad():
        outputs = model(**inputs)
        logits = outputs.logits[..., :-1, :]
    min_len = min(logits.shape[1], len(answer_tokens))
    if min_len == 0:
        return 0.0
    target = torch.tensor(answer_tokens[:min_len]).to(model.device)
    loss_fct = torch.nn.CrossEntropyLoss(reduction="mean")
    ce_loss = loss_fct(logits[0, :min_len], target).item()
    coverage = min(1.0, len(completion_tokens) / len(answer_tokens))
    return -ce_loss * coverage


def naive_answer_likelihood(model, tokenizer, prompt, completion, answer, separator="\nAnswer: "):
    """mean log p(answer | prompt, completion, separator), one unpadded forward."""
    ctx = tokenizer(prompt + completion + separator, add_special_tokens=False)["input_ids"]
    ans = tokenizer(answer, add_special_tokens=False)["input_ids"]
    if not ans:
        return 0.0
    ids = torch.tensor([ctx + ans])
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids).logits[0], -1)
    return sum(logp[len(ctx) + k - 1, a].item() for k, a in enumerate(ans)) / len(ans)


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


@pytest.fixture(scope="module")
def model(tok):
    return build_model(tok, seed=0).float().eval()


PROMPTS = [user("3+5+1="), user("7+0+2="), user("1+1+1="), user("9+9+9="), user("0+0+0="),
           user("4+4+1="), user("2+3+5="), user("6+1+0="), user("8+8+8="), user("5+5+5=")]
COMPLETIONS = ["9", "19", "9\nbecause", "27 27 27 27", "0", "<answer>9</answer>", "10", "7.",
               "abc def ghi jkl", "\u00e9\U0001f600 15"]  # the last one is out of vocabulary
ANSWERS = ["9", "9", "3", "27", "0", "9", "10", "7", "24", "15"]


def test_inverse_loss_matches_the_seed_loop(model, tok):
    """Batched inverse loss == the one-forward-per-example reference on chat prompts
    (rendered with the chat template) and chat-format completions, atol=1e-5."""
    fn = inverse_loss_reward(model, tok, micro_batch_size=4)
    got = fn(prompts=PROMPTS, completions=[chat(c) for c in COMPLETIONS])
    want = reference_inverse_loss(model, tok, render_prompts(tok, PROMPTS), COMPLETIONS)
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=0, atol=ATOL)
    assert all(w < 0 for w in want)  # every completion here is non-empty: a real score


def test_inverse_loss_matches_the_seed_loop_on_string_prompts(model, tok):
    """Plain string prompts are used as they are (no template) and still match the reference."""
    prompts = ["3+5+1=", "Q: 7+0+2=\nA:", "x"] * 2
    comps = ["9", " 9", "yz", "99", "hello world", "0"]
    got = inverse_loss_reward(model, tok, micro_batch_size=4)(prompts=prompts, completions=comps)
    want = reference_inverse_loss(model, tok, prompts, comps)
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=0, atol=ATOL)


def test_coverage_ce_matches_the_seed_loop(model, tok):
    """Batched coverage-weighted CE == the per-example reference, atol=1e-5, on
    completions shorter, as long as and longer than the answer."""
    fn = coverage_weighted_ce_reward(model, tok, micro_batch_size=4)
    got = fn(prompts=PROMPTS, completions=[chat(c) for c in COMPLETIONS], answer=ANSWERS)
    want = [reference_coverage_ce(model, tok, a, c) for a, c in zip(ANSWERS, COMPLETIONS)]
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=0, atol=ATOL)
    # "9" (one token) cannot be scored, "<answer>9</answer>" can: both cases are in the table
    assert want[0] == 0.0 and want[5] < 0


def test_coverage_ce_hand_case(model, tok):
    """Completion "12", answer "345": n=2 so m = min(2-1, 3) = 1, coverage = 2/3, and
    R = (2/3) * log softmax(logits after reading "1")["3"]."""
    ids = tok("1", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0, -1], -1)
    want = (2 / 3) * logp[tok.convert_tokens_to_ids("3")].item()
    got = coverage_weighted_ce_reward(model, tok)(prompts=["q"], completions=["12"], answer=["345"])
    assert got[0] == pytest.approx(want, abs=ATOL)


def test_answer_likelihood_matches_naive_loop(model, tok):
    """Batched answer likelihood == one unpadded forward per example, atol=1e-5, with the
    default separator and a custom one."""
    rendered = render_prompts(tok, PROMPTS)
    for sep in ("\nAnswer: ", " => "):
        fn = answer_likelihood_reward(model, tok, separator=sep, micro_batch_size=3)
        got = fn(prompts=PROMPTS, completions=[chat(c) for c in COMPLETIONS], answer=ANSWERS)
        want = [naive_answer_likelihood(model, tok, p, c, a, sep) for p, c, a in zip(rendered, COMPLETIONS, ANSWERS)]
        torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=0, atol=ATOL)


def _model_scored(model, tok, mb):
    return [inverse_loss_reward(model, tok, micro_batch_size=mb),
            coverage_weighted_ce_reward(model, tok, micro_batch_size=mb),
            answer_likelihood_reward(model, tok, micro_batch_size=mb)]


def test_batched_equals_unbatched_for_any_micro_batch_size(model, tok):
    """Scores do not depend on micro_batch_size (1 = no padding at all, 3 and 4 = ragged
    micro-batches, 64 = everything padded together), atol=1e-5. An empty string prompt
    (its first completion token has nothing to be predicted from, so it is not scored) gives
    the same score alone in its micro-batch as padded among chat prompts."""
    comps = COMPLETIONS + ["", "x", "12 34"]
    prompts, answers = PROMPTS + PROMPTS[:2] + [""], ANSWERS + ["", "5", "7"]
    ref = [fn(prompts=prompts, completions=comps, answer=answers) for fn in _model_scored(model, tok, 1)]
    for mb in (3, 4, 64):
        got = [fn(prompts=prompts, completions=comps, answer=answers) for fn in _model_scored(model, tok, mb)]
        torch.testing.assert_close(torch.tensor(got), torch.tensor(ref), rtol=0, atol=ATOL)


def test_empty_completion_scores_zero(model, tok):
    """An empty completion (string or chat) scores exactly 0.0 under the inverse loss and the
    coverage CE; an empty answer scores 0.0 under the answer likelihood, while an empty
    completion there is scored like any other (the answer right after the prompt)."""
    comps = ["", chat(""), "9", None]
    n = len(comps)
    inv = inverse_loss_reward(model, tok)(prompts=PROMPTS[:n], completions=comps)
    cov = coverage_weighted_ce_reward(model, tok)(prompts=PROMPTS[:n], completions=comps, answer=["9"] * n)
    assert inv[0] == inv[1] == inv[3] == 0.0 and inv[2] < 0
    assert cov == [0.0, 0.0, 0.0, 0.0]  # "9" is one token: nothing to score either
    al = answer_likelihood_reward(model, tok)
    assert al(prompts=PROMPTS[:2], completions=["9", "abc"], answer=["", ""]) == [0.0, 0.0]
    assert al(prompts=PROMPTS[:1], completions=[""], answer=["9"])[0] < 0


class ForwardCounter:
    """Counts forward calls of a module with a forward hook."""

    def __init__(self, module):
        self.calls = 0
        self.handle = module.register_forward_hook(self)

    def __call__(self, module, args, output):
        self.calls += 1

    def close(self):
        self.handle.remove()


@pytest.mark.parametrize("B, mb", [(10, 3), (10, 64), (10, 10), (7, 1)])
def test_model_scored_rewards_really_batch(model, tok, B, mb):
    """Each model-scored reward runs exactly ceil(B / micro_batch_size) forward passes for B
    scorable completions, never one per completion (unless micro_batch_size is 1)."""
    # every completion here has >= 2 tokens, so every row is scorable under every reward
    pairs = [(c, a) for c, a in zip(COMPLETIONS, ANSWERS) if len(c) > 1] * 2
    prompts, comps, answers = (PROMPTS * 2)[:B], [c for c, _ in pairs][:B], [a for _, a in pairs][:B]
    assert len(comps) == B
    for fn in _model_scored(model, tok, mb):
        counter = ForwardCounter(model)
        try:
            fn(prompts=prompts, completions=comps, answer=answers)
        finally:
            counter.close()
        assert counter.calls == math.ceil(B / mb), reward_name(fn)


def test_unscorable_rows_cost_no_forward(model, tok):
    """Empty completions are scored 0.0 without running the model at all."""
    counter = ForwardCounter(model)
    try:
        inverse_loss_reward(model, tok)(prompts=PROMPTS[:3], completions=["", "", chat("")])
        coverage_weighted_ce_reward(model, tok)(prompts=PROMPTS[:3], completions=["", "1", ""], answer=["9"] * 3)
    finally:
        counter.close()
    assert counter.calls == 0


def test_scoring_runs_without_grad_and_restores_train_mode(tok):
    """Scoring builds no autograd graph (scores are plain floats, no parameter gets a grad)
    and a model that was in train mode is back in train mode afterwards."""
    m = build_model(tok, seed=1).train()
    for fn in _model_scored(m, tok, 4):
        out = fn(prompts=PROMPTS[:5], completions=COMPLETIONS[1:6], answer=ANSWERS[1:6])
        assert all(type(v) is float for v in out)
        assert m.training
    assert all(p.grad is None for p in m.parameters())


def test_frozen_scorer_is_a_fixed_copy(tok):
    """scorer="frozen" scores with a deep copy taken at construction: eval mode, no
    gradients, never calls the policy, and its scores do not move when the policy's weights
    change, while the self-scored reward's do."""
    policy = build_model(tok, seed=2).float()
    frozen = inverse_loss_reward(policy, tok, scorer="frozen")
    selfscored = inverse_loss_reward(policy, tok)
    assert reward_name(frozen) == "inverse_loss_frozen" and reward_name(selfscored) == "inverse_loss"
    assert frozen.scorer_model is not policy and selfscored.scorer_model is policy
    assert not frozen.scorer_model.training
    assert not any(p.requires_grad for p in frozen.scorer_model.parameters())
    kw = {"prompts": PROMPTS[:4], "completions": COMPLETIONS[:4]}
    before_frozen, before_self = frozen(**kw), selfscored(**kw)
    counter = ForwardCounter(policy)
    try:
        frozen(**kw)
    finally:
        counter.close()
    assert counter.calls == 0
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(0.05 * torch.randn_like(p))
    torch.testing.assert_close(torch.tensor(frozen(**kw)), torch.tensor(before_frozen), rtol=0, atol=0)
    assert max(abs(a - b) for a, b in zip(selfscored(**kw), before_self)) > 1e-3


def test_model_scored_names_and_required_columns(model, tok):
    """Readable names and required columns: the supervised rewards need their answer column,
    the inverse loss needs none."""
    inv, cov, al = _model_scored(model, tok, 8)
    assert [reward_name(f) for f in (inv, cov, al)] == ["inverse_loss", "coverage_ce", "answer_likelihood"]
    assert getattr(inv, "required_columns", ()) == ()
    assert cov.required_columns == ("answer",) and al.required_columns == ("answer",)
    assert coverage_weighted_ce_reward(model, tok, "gold").required_columns == ("gold",)
    assert answer_likelihood_reward(model, tok, "gold").required_columns == ("gold",)


# ---------------------------------------------------------------------------------------
# the zero-advantage pitfall
# ---------------------------------------------------------------------------------------
def test_answer_perplexity_gives_a_group_zero_advantage(model, tok):
    """ppl(prompt + answer) ignores the completion: the G=4 completions of one prompt get
    identical rewards and group_advantages is exactly zero. The coverage CE and the answer
    likelihood vary across the same group, so their advantages are not all zero."""
    G = 4
    prompts, answers = [PROMPTS[0]] * G, ["9"] * G
    comps = ["9", "19", "<answer>9</answer>", "3+5+1 is 9"]
    # the naive supervised reward: minus the answer's perplexity given the prompt, completion unused
    ppl_reward = [-math.exp(-naive_answer_likelihood(model, tok, p, "", a, separator=""))
                  for p, a in zip(render_prompts(tok, prompts), answers)]
    assert len(set(ppl_reward)) == 1
    assert torch.count_nonzero(group_advantages(torch.tensor(ppl_reward), G)) == 0
    for fn in (coverage_weighted_ce_reward(model, tok), answer_likelihood_reward(model, tok)):
        r = torch.tensor(fn(prompts=prompts, completions=comps, answer=answers))  # (G,)
        assert r.std() > 1e-3, reward_name(fn)
        assert group_advantages(r, G).abs().max() > 0.5, reward_name(fn)


# ---------------------------------------------------------------------------------------
# factory
# ---------------------------------------------------------------------------------------
def test_make_reward_builds_every_type(model, tok):
    """Every listed type builds, from a dict or a bare name, into one TRL-signature function
    with the expected name; a list builds one function per entry, in order."""
    names = {"exact_match": "exact_match", "tagged_exact_match": "tagged_exact_match",
             "tag_format": "answer_format", "format_and_match": "format_and_match",
             "inverse_loss": "inverse_loss", "supervised": "coverage_ce", "coverage_ce": "coverage_ce",
             "answer_likelihood": "answer_likelihood", "feedback": "feedback", "reward_model": "reward_model",
             "probe_reward_model": "reward_model", "environment": "env_reward", "code": "code",
             "format": "first_line_format", "python": "python"}
    assert set(REWARD_TYPES) == set(names)
    for rtype, name in names.items():
        if rtype == "python":  # a function of one's own, from a file: tests/test_dataset_task.py
            continue
        if rtype in ("reward_model", "probe_reward_model"):  # train a reward model: tests/test_reward_model.py
            continue
        if rtype == "code":  # runs programs in the sandbox on a `tests` column: tests/test_code_runner.py
            continue
        for cfg in (rtype, {"type": rtype}):
            (fn,) = make_reward(cfg, model=model, tokenizer=tok)
            assert reward_name(fn) == name
            out = call_reward(fn, PROMPTS[:2], ["<answer>9</answer>", "19"], answer=["9", "9"])
            assert len(out) == 2 and all(math.isfinite(v) for v in out)
    fns = make_reward([{"type": "exact_match"}, "tag_format", {"type": "inverse_loss", "scorer": "frozen"}],
                      model=model, tokenizer=tok)
    assert [reward_name(f) for f in fns] == ["exact_match", "answer_format", "inverse_loss_frozen"]


def test_make_reward_passes_options(model, tok):
    """Options reach the builders: answer_field sets the required column, supervised and its
    alias coverage_ce score identically, micro_batch_size changes the forward count only,
    tag and format_weight take effect."""
    (sup,) = make_reward({"type": "supervised", "answer_field": "gold"}, model=model, tokenizer=tok)
    (alias,) = make_reward({"type": "coverage_ce", "answer_field": "gold", "micro_batch_size": 2},
                           model=model, tokenizer=tok)
    assert sup.required_columns == alias.required_columns == ("gold",)
    kw = {"prompts": PROMPTS, "completions": COMPLETIONS, "gold": ANSWERS}
    counter = ForwardCounter(model)
    try:
        a = alias(**kw)
    finally:
        counter.close()
    scorable = sum(len(c) > 1 for c in COMPLETIONS)  # one-character completions are not scored
    assert counter.calls == math.ceil(scorable / 2)
    torch.testing.assert_close(torch.tensor(a), torch.tensor(sup(**kw)), rtol=0, atol=ATOL)
    (fmt,) = make_reward({"type": "tag_format", "tag": "think"})
    assert fmt(prompts=["q"], completions=["<think>x</think>"]) == [1.0]
    (fm,) = make_reward({"type": "format_and_match", "format_weight": 0.5})
    assert fm(prompts=["q"], completions=["<answer>8</answer>"], answer=["9"]) == [0.5]


def test_make_reward_exact_match_follows_the_task():
    """``exact_match`` reads tags when the task is tagged (unless ``tagged`` is given), so a
    perfect tagged completion scores 1 on a tagged task and a plain one on a plain task."""
    kw = {"prompts": ["q"] * 2, "completions": ["<answer>9</answer>", "9"], "answer": ["9", "9"]}
    (tagged,) = make_reward("exact_match", task=ArithmeticTask(tagged=True))
    (plain,) = make_reward("exact_match", task=ArithmeticTask())
    (forced,) = make_reward({"type": "exact_match", "tagged": False}, task=ArithmeticTask(tagged=True))
    assert tagged(**kw) == [1.0, 0.0] and plain(**kw) == [0.0, 1.0] and forced(**kw) == [0.0, 1.0]


def test_completion_text_of_chat_and_strings():
    """The helper every reward uses: strings pass through, chat lists join their contents."""
    assert completion_text("a") == "a" and completion_text(None) == ""
    assert completion_text([{"role": "assistant", "content": "x"}, {"role": "assistant", "content": "y"}]) == "xy"
