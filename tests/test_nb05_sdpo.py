"""Notebook 05 (SDPO)'s plumbing and the checks that moved out of it.

The notebook keeps the checks of its math (the reprompt, the three losses by hand, the EMA rule, one SDPO
step against ``SDPOScratchTrainer.objective``) and of its own runs. Here: its profile table agrees with the skill lab's
config, the settings it leaves at their defaults are the config's, and the checks of the analyses that moved to
the SDPO research pages, ``docs/sdpo_lab.md`` and ``docs/sdpo_head_start.md`` (sequence-level credit, the loss scale
under AdamW, the head-start fit, the token win that ``teacher_quality`` reports).
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import torch

from sdpo_kit.core.profiles import REAL_CPU_MODEL, T4_MODEL, TINY_LAB
from sdpo_kit.course import profile_table
from sdpo_kit.course.profiles.nb05 import PROFILES
from sdpo_kit.lab.skill import TEMPLATES
from sdpo_kit.losses import sdpo_loss, token_logprobs
from sdpo_kit.registry import load_config
from sdpo_kit.sdpo.config import SDPOScratchConfig

ROOT = Path(__file__).resolve().parents[1]
LAB_YAML = ROOT / "configs" / "sdpo_lab.yaml"
KEYS = {"lab", "dial", "warm_start", "task", "templates", "max_new_tokens", "temperature", "prompts", "group", "lr",
        "steps", "n_eval", "plain_spread", "collapse", "tie", "num_threads"}


def sizes(profile: dict, smoke: bool) -> dict:
    full = {k: v for k, v in profile.items() if k != "smoke"}
    return {**full, **profile.get("smoke", {})} if smoke else full


def test_a_profile_per_model_with_every_setting_the_notebook_reads():
    """Each of the three profiles, at full and at smoke size, holds every key the notebook reads, a template form
    the lab knows, and no outcome check (plain_spread, collapse, tie) except on the full-size skill lab."""
    assert profile_table("05") is PROFILES and set(PROFILES) == {TINY_LAB, REAL_CPU_MODEL, T4_MODEL}
    for name, profile in PROFILES.items():
        for smoke in (False, True):
            P = sizes(profile, smoke)
            assert set(P) == KEYS, (name, smoke, set(P) ^ KEYS)
            assert P["templates"] in TEMPLATES, (name, P["templates"])
            checked = name == TINY_LAB and not smoke
            assert all((P[k] is not None) == checked for k in ("plain_spread", "collapse", "tie")), (name, smoke)
            assert (P["dial"] is None) == (P["lab"] is None) == (name != TINY_LAB)


def test_the_tiny_lab_profile_is_the_skill_labs_config():
    """At full size the tiny lab's profile runs configs/sdpo_lab.yaml: its task, the top of its dial, its trainer's
    sizes and templates; and the SDPO settings the notebook leaves at SDPOScratchConfig's defaults (sampled-token
    loss, the EMA teacher at rate 0.05, successful siblings only, a constant learning rate) are the config's."""
    cfg = load_config(LAB_YAML)
    P, tr = sizes(PROFILES[TINY_LAB], smoke=False), cfg.trainer
    assert P["task"] == cfg.task and P["dial"] == (0, cfg.model.lab["context_steps"]) and P["warm_start"] == {}
    assert P["n_eval"] <= cfg.task["n_eval"]
    assert (P["max_new_tokens"], P["temperature"], P["prompts"], P["group"], P["lr"], P["steps"]) == (
        tr.max_completion_length, tr.temperature, tr.prompts_per_step, tr.num_generations, tr.learning_rate,
        tr.max_steps)
    assert {k: getattr(tr, k) for k in TEMPLATES["compact"]} == TEMPLATES[P["templates"]]
    default = SDPOScratchConfig()
    for key in ("distillation_mode", "distillation_alpha", "distillation_weight", "teacher_model_kind",
                "teacher_update_rate", "success_reward_threshold", "include_environment_feedback",
                "lr_scheduler_type", "max_reprompt_len", "distillation_is_clip"):
        mine, theirs = getattr(tr, key), getattr(default, key)
        if key == "include_environment_feedback":   # unset (None) means off when the task names no feedback column
            theirs = bool(theirs)
        assert mine == theirs, key
    assert default.teacher_update_rate == 0.05, "the notebook's TAU"


def test_sequence_level_credit_puts_one_weight_on_every_token():
    """distillation_mode="sequence" (the paper's sequence-level ablation) is sg(S_i) log s on every token of row i,
    with S_i the row's summed log-ratio under the mask, averaged per sequence then over sequences: the same value
    as the inline version, and the same weight on a wrong answer's right tokens as on its wrong ones."""
    g = torch.Generator().manual_seed(0)
    s_logits, t_logits = (torch.randn(4, 6, 9, generator=g, dtype=torch.float64) for _ in range(2))   # (B, T, V)
    ids = torch.randint(0, 9, (4, 6), generator=g)                                                  # (B, T)
    mask = (torch.arange(6)[None] < torch.tensor([6, 4, 1, 3])[:, None]).double()                   # (B, T)
    log_s, log_t = token_logprobs(s_logits, ids), token_logprobs(t_logits, ids)                      # (B, T)
    S = ((log_s - log_t) * mask).sum(1)                                                              # (B,)
    mine = ((S[:, None] * log_s * mask).sum(1) / mask.sum(1)).mean()                                 # scalar
    lib, _ = sdpo_loss(s_logits, t_logits, ids, mask, mode="sequence")
    torch.testing.assert_close(lib, mine, rtol=1e-10, atol=1e-12)
    token, _ = sdpo_loss(s_logits, t_logits, ids, mask, mode="sampled_token")
    assert not torch.isclose(token, lib), "token and sequence credit differ on a batch with several tokens"


def test_under_adamw_a_third_of_the_loss_takes_the_same_step():
    """The loss-scale ablation: multiplying the SDPO loss by 1/3 at the same learning rate changes no AdamW update
    (Adam divides each gradient by its running scale), over several steps, to within Adam's eps."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 5, generator=g)
    t_logits = torch.randn(8, 1, 7, generator=g)
    ids = torch.randint(0, 7, (8, 1), generator=g)
    updates = {}
    for scale in (1.0, 1 / 3):
        torch.manual_seed(0)
        net = torch.nn.Linear(5, 7)
        opt = torch.optim.AdamW(net.parameters(), lr=1e-2)
        steps = []
        for _ in range(5):
            before = torch.cat([p.detach().flatten().clone() for p in net.parameters()])
            loss, _ = sdpo_loss(net(x)[:, None], t_logits, ids, torch.ones(8, 1), mode="sampled_token")
            opt.zero_grad()
            (scale * loss).backward()
            opt.step()
            steps.append(torch.cat([p.detach().flatten() for p in net.parameters()]) - before)
        updates[scale] = torch.stack(steps)
    assert updates[1.0].norm() > 0
    torch.testing.assert_close(updates[1 / 3], updates[1.0], rtol=1e-4, atol=1e-7)


def test_the_head_start_fit_is_the_least_squares_line_of_its_points():
    """benchmarks/results/sdpo_head_start.json (the SDPO page's head-start table): its fit is the least-squares line
    of gain on head start over its points (the residuals sum to zero and are orthogonal to the head start), its
    zero crossing is -intercept / slope, and its medians by sign are the points' medians."""
    res = json.loads((ROOT / "benchmarks" / "results" / "sdpo_head_start.json").read_text())
    points = res["points"]
    x = torch.tensor([p["head_start"] for p in points], dtype=torch.float64)   # (n,)
    y = torch.tensor([p["gain"] for p in points], dtype=torch.float64)         # (n,)
    X = torch.stack([torch.ones_like(x), x], dim=1)                            # (n, 2)
    a, b = torch.linalg.lstsq(X, y.unsqueeze(1)).solution.squeeze(1).tolist()
    resid = y - (a + b * x)                                                    # (n,)
    assert abs(resid.sum().item()) < 1e-9 and abs((resid * x).sum().item()) < 1e-9
    fit = res["fit"]
    assert fit["n"] == len(points) and abs(a - fit["intercept"]) < 1e-3 and abs(b - fit["slope"]) < 1e-3
    assert abs(-a / b - fit["zero_crossing"]) < 1e-2
    for sign, gains in (("head_start <= 0", [p["gain"] for p in points if p["head_start"] <= 0]),
                        ("head_start > 0", [p["gain"] for p in points if p["head_start"] > 0])):
        assert fit["by_sign"][sign]["n"] == len(gains)
        assert abs(fit["by_sign"][sign]["median_gain"] - statistics.median(gains)) < 1e-4, sign


@torch.no_grad()
def right_token_logprobs(model, tok, prompts, completions, rights):
    """(B, T) log p(right token y_t | prompt, o_<t), teacher-forced on each same-length completion o."""
    from sdpo_kit.core.sampling import completion_logits, encode_prompts

    enc = encode_prompts(tok, prompts)
    o = [tok(c, add_special_tokens=False)["input_ids"] for c in completions]
    y = [tok(r, add_special_tokens=False)["input_ids"] for r in rights]
    T = max(map(len, o))
    ids = torch.tensor([c + [tok.pad_token_id] * (T - len(c)) for c in o])                  # (B, T) right-padded
    right = torch.tensor([c + [tok.pad_token_id] * (T - len(c)) for c in y])                # (B, T)
    mask = torch.tensor([[1] * len(c) + [0] * (T - len(c)) for c in o])                     # (B, T)
    logits = completion_logits(model, enc["input_ids"], enc["attention_mask"], ids, mask)   # (B, T, V)
    return token_logprobs(logits, right)                                                    # (B, T)


def test_teacher_qualitys_token_win_is_the_naive_count(tmp_path, monkeypatch):
    """teacher_quality's token_win_demo is the share of the student's wrong tokens (in wrong greedy answers as long
    as the right one) where the teacher shown the right answer puts more probability on the right token than the
    student does; counted here position by position, it agrees to within one token (the library compares
    probabilities, this log-probabilities)."""
    monkeypatch.setenv("SDPO_KIT_CACHE", str(tmp_path))
    from sdpo_kit import make_task
    from sdpo_kit.core.sampling import generate_completions
    from sdpo_kit.lab.model import LabConfig, warm_start
    from sdpo_kit.sdpo.quality import teacher_quality
    from sdpo_kit.text.reprompt import reprompt

    cfg = LabConfig(task="long_addition", digits=2, terms=2, n_eval=40, sft_steps=300, copy_fraction=0.0,
                    max_position_embeddings=256, hidden_size=32, intermediate_size=64, sft_batch_size=16,
                    context_steps=150, context_templates="compact")   # a small lab: about 10 s to build
    model, tok = warm_start(cfg, verbose=False)
    task = make_task("long_addition", digits=2, n_eval=40)
    rows = task.splits()[1]
    q = teacher_quality(model, tok, task, rows, **TEMPLATES["compact"])
    greedy = [g.strip() for g in generate_completions(model, tok, [r["prompt"] for r in rows],
                                                      max_new_tokens=task.max_completion_tokens())]
    rights = [task.format_answer(r["answer"]) for r in rows]
    same = [i for i, (g, y) in enumerate(zip(greedy, rights)) if not task.is_correct(g, rows[i]["answer"])
            and len(g) == len(y)]
    assert same, "the test needs wrong answers as long as the right ones"
    o, y = [greedy[i] for i in same], [rights[i] for i in same]
    log_s = right_token_logprobs(model, tok, [rows[i]["prompt"] for i in same], o, y)                 # (B, T)
    demo = [reprompt(rows[i]["prompt"], rights[i], None, **TEMPLATES["compact"]) for i in same]
    log_t = right_token_logprobs(model, tok, demo, o, y)                                              # (B, T)
    wrong = torch.tensor([[a != b for a, b in zip(oi, yi)] + [False] * (log_s.size(1) - len(yi))
                          for oi, yi in zip(o, y)])                                                   # (B, T)
    n_wrong = int(wrong.sum())
    mine = (log_t > log_s)[wrong].float().mean().item()
    assert q["n_wrong_same_length"] == len(same) and not math.isnan(q["token_win_demo"])
    assert abs(mine - q["token_win_demo"]) <= 1 / n_wrong + 1e-9, (mine, q["token_win_demo"], n_wrong)
