"""Metric names, TRL's names for them, and the sink every trainer writes its rows to.

One naming scheme everywhere (``METRICS`` documents each key): the scratch trainers log these
keys, the TRL path maps TRL's log names onto them (``metrics_from_trl_logs``), the live plot
and the CLI read them. A row is a dict with ``step`` and any of these keys.

``MetricsSink(output_dir, callbacks, watch)`` keeps the rows (``history``), appends each one to
``output_dir/metrics.jsonl`` and hands it to every callback (a ``LivePlot``, a printer...).
``ZeroSignalWatch`` reads the rows as they pass and warns, on either backend, when a run has had
nothing to learn from for ``steps`` steps in a row (``stats/frac_zero_std`` at or above ``fraction``).

Left out on purpose: experiment trackers (wandb, tensorboard); pass a callback that forwards rows.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

# key -> what it means, for the keys every algorithm shares; an algorithm declares its own (``Algorithm.metric_keys``,
# in its package's algorithm.py) and ``sdpo_kit.registry.metric_keys()`` gives them all
METRICS: dict[str, str] = {
    "step": "sdpo_kit step: one sampled batch and its num_iterations optimizer passes",
    "reward/mean": "mean total reward of the step's completions",
    "reward/std": "std of the total reward over the step's completions",
    "reward/<name>": "mean of one reward function (its __name__)",
    "loss": "the loss minimised on the step's last pass (policy loss + beta * KL term)",
    "loss/policy": "the clipped surrogate alone, without beta * KL",
    "loss/kl": "raw k3 estimate of KL(pi || pi_ref), masked token mean (0 without a reference)",
    "stats/clip_frac": "fraction of tokens where the clip is active (gradient zero), TRL's region ratio",
    "stats/clip_frac_low": "fraction clipped below (ratio < 1 - epsilon, A < 0)",
    "stats/clip_frac_high": "fraction clipped above (ratio > 1 + epsilon_high, A > 0)",
    "stats/ratio_mean": "masked mean of pi / pi_old on the last pass",
    "stats/frac_zero_std": "fraction of groups whose rewards are all equal (no learning signal)",
    "stats/learning_rate": "learning rate after the step",
    "stats/sampler_weight_mean": "mean correction weight pi / pi_sampler on the completion tokens (sampling_dtype)",
    "stats/sampler_weight_min": "smallest correction weight on a completion token (sampling_dtype)",
    "stats/sampler_weight_max": "largest correction weight on a completion token (sampling_dtype)",
    "stats/sampler_dropped_frac": "fraction of completion tokens whose weight the *_mask correction set to 0",
    "stats/share_prompt": "1 when the step ran each prompt once for its G completions, else 0 (scratch)",
    "completion/mean_length": "mean completion length in tokens, eos included",
    "time/step_s": "wall seconds of the step (evaluation excluded)",
    "time/sample_s": "seconds of the step spent sampling completions (the scratch loops)",
    "time/score_s": "seconds of the step spent in the reward functions (the scratch loops)",
    "time/forward_s": "seconds of the step in the log-prob forwards (the scratch loops)",
    "time/backward_s": "seconds of the step in backward, gradient clipping and the optimizer step (the scratch loops)",
    "time/eval_s": "seconds of held-out evaluation on the rows that have it (the scratch loops)",
    "eval/accuracy": "held-out greedy accuracy (step 0, every eval_every steps, the last step)",
    # logged by the TRL backend only (TRL computes them; the scratch loop does not; PPO logs entropy)
    "reward/<name>/std": "std of one reward function (TRL only)",
    "stats/clip_frac_low_min": "smallest per-process low clip fraction (TRL only)",
    "stats/clip_frac_high_max": "largest per-process high clip fraction (TRL only)",
    "stats/entropy": "mean token entropy of the policy on its completions (TRL GRPO and PPO)",
    "stats/grad_norm": "gradient norm before clipping (TRL only)",
    "completion/<stat>": "TRL's completion statistics: min/max/mean length, clipped ratio, ... (TRL only)",
}

# classic trl 0.11.4 PPOTrainer stat names -> ours (for readers coming from its logs)
PPO_CLASSIC_NAMES: dict[str, str] = {
    "env/reward_mean": "reward/mean", "env/reward_std": "reward/std", "objective/kl": "stats/kl",
    "objective/kl_coef": "stats/kl_coef", "ppo/loss/policy": "loss/policy", "ppo/loss/value": "loss/value",
    "ppo/loss/total": "loss", "ppo/policy/entropy": "stats/entropy", "ppo/policy/approxkl": "stats/approx_kl",
    "ppo/policy/policykl": "stats/policy_kl", "ppo/policy/clipfrac": "stats/clip_frac",
    "ppo/val/clipfrac": "stats/vf_clip_frac", "ppo/learning_rate": "stats/learning_rate",
    "tokens/responses_len_mean": "completion/mean_length", "time/ppo/total": "time/step_s",
}

# ---------------------------------------------------------------------------------------
# TRL: log names -> sdpo_kit names, and a TrainerCallback
# ---------------------------------------------------------------------------------------

# names as TRL 1.16 GRPOTrainer writes them (self._metrics[mode][...]) plus transformers'
# Trainer (loss, grad_norm, learning_rate); see trl/trainer/grpo_trainer.py
TRL_TO_SDPO: dict[str, str] = {
    "reward": "reward/mean",
    "reward_std": "reward/std",
    "loss": "loss",
    "policy_loss": "loss/policy",
    "kl": "loss/kl",
    "clip_ratio/region_mean": "stats/clip_frac",
    "clip_ratio/low_mean": "stats/clip_frac_low",
    "clip_ratio/high_mean": "stats/clip_frac_high",
    "clip_ratio/low_min": "stats/clip_frac_low_min",
    "clip_ratio/high_max": "stats/clip_frac_high_max",
    "cispo_clip_ratio": "stats/clip_frac",  # loss_type="cispo" logs this instead of region_mean
    "frac_reward_zero_std": "stats/frac_zero_std",
    "entropy": "stats/entropy",
    "grad_norm": "stats/grad_norm",
    "learning_rate": "stats/learning_rate",
    "step_time": "time/step_s",
    "sampling/importance_sampling_ratio/mean": "stats/sampler_weight_mean",   # with vLLM's correction
    "sampling/importance_sampling_ratio/min": "stats/sampler_weight_min",
    "sampling/importance_sampling_ratio/max": "stats/sampler_weight_max",
}
_REWARD_FN = re.compile(r"^rewards/(?P<name>.+)/(?P<stat>mean|std)$")

# the end-of-training summary (Trainer._finalize_training) and speed / memory metrics
SUMMARY_KEY = re.compile(
    r"^(train|eval|test)_(runtime|samples_per_second|steps_per_second|tokens_per_second)$"
    r"|^total_flos$|^train_loss$|_mem_(cpu|gpu)_(alloc|peaked)_delta$"
)
_BOOKKEEPING = {"epoch", "num_input_tokens_seen", "step"}


def _trl_name(key: str) -> str:
    if key in TRL_TO_SDPO:
        return TRL_TO_SDPO[key]
    m = _REWARD_FN.match(key)
    if m:  # rewards/<fn>/mean -> reward/<fn>, rewards/<fn>/std -> reward/<fn>/std
        return f"reward/{m['name']}" + ("/std" if m["stat"] == "std" else "")
    if key.startswith("completions/"):  # completions/mean_length -> completion/mean_length, ...
        return "completion/" + key[len("completions/"):]
    return key


def metrics_from_trl_logs(logs: Mapping, step: int) -> dict:
    """Map a TRL ``GRPOTrainer`` log dict to sdpo_kit's metric names, plus ``"step": step``.

    ``reward -> reward/mean``, ``reward_std -> reward/std``, ``rewards/<fn>/mean -> reward/<fn>``,
    ``rewards/<fn>/std -> reward/<fn>/std``, ``loss -> loss``, ``policy_loss -> loss/policy``,
    ``kl -> loss/kl``, ``clip_ratio/{region,low,high}_mean -> stats/clip_frac{,_low,_high}``,
    ``completions/* -> completion/*``, ``frac_reward_zero_std -> stats/frac_zero_std``,
    ``entropy -> stats/entropy``, ``step_time -> time/step_s``; TRL's eval-mode keys
    (``eval_<key>``) become ``eval/<mapped key>``; ``eval/accuracy`` and unknown keys pass
    through under their own name. Values are not changed (TRL writes None for an all-NaN metric).
    """
    out = {}
    for key, value in logs.items():
        if key.startswith("eval_"):
            out["eval/" + _trl_name(key[len("eval_"):])] = value
        else:
            out[_trl_name(key)] = value
    out["step"] = step
    return out


def is_train_summary(logs: Mapping) -> bool:
    """True for a log with nothing to plot: only the end-of-training summary (``train_runtime``,
    ``train_loss``, ``total_flos``, ...), speed / memory metrics and ``epoch``."""
    return all(SUMMARY_KEY.search(k) or k in _BOOKKEEPING for k in logs)




def write_jsonl(path: Path, rows: Iterable[Mapping]) -> None:
    """(Over)write ``path`` with one JSON row per line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps(dict(row)) + "\n")


def read_jsonl(path) -> list[dict]:
    """The rows of a ``metrics.jsonl`` file (blank lines skipped)."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


LOGGER = logging.getLogger("sdpo_kit")


class ZeroSignalWatch:
    """Says when a run cannot learn: in ``steps`` steps in a row, at least ``fraction`` of the groups
    gave every completion the same reward (``stats/frac_zero_std``), so every group-relative
    advantage is zero and GRPO's gradient with it. It warns once per run (``LOGGER``, printed to
    stderr unless logging is configured otherwise), naming the likely causes and where to read the
    completions; ``message`` keeps the text. ``steps=0`` turns it off.
    """

    def __init__(self, fraction: float = 0.9, steps: int = 10, output_dir=None, completions_every: int = 10):
        if not 0.0 < fraction <= 1.0 or steps < 0:
            raise ValueError(f"zero_signal_fraction must be in (0, 1] and zero_signal_steps >= 0, got {fraction}, {steps}")
        self.fraction, self.steps = float(fraction), int(steps)
        self.where = (f"{Path(output_dir) / 'completions.jsonl'} (every {completions_every}th step's batch; "
                      "log_completions_every=1 keeps every step's)" if output_dir and completions_every > 0
                      else "the sampled completions (set output_dir and log_completions_every to keep them)")
        self.run = 0                      # steps in a row at or above the fraction
        self.rewards: list[float] = []    # their mean rewards
        self.message: str | None = None   # the warning, once given

    def __call__(self, row: Mapping) -> str | None:
        """Read one metrics row; the warning's text on the step it fires, else None."""
        frac = row.get("stats/frac_zero_std")
        if not self.steps or frac is None or self.message is not None:
            return None
        if frac >= self.fraction:
            self.run += 1
            self.rewards.append(row.get("reward/mean", float("nan")))
        else:
            self.run, self.rewards = 0, []
        if self.run < self.steps:
            return None
        mean = sum(self.rewards) / len(self.rewards)
        self.message = (
            f"no learning signal: for {self.steps} steps in a row (to step {row.get('step', '?')}) at least "
            f"{self.fraction:.0%} of the groups gave every completion the same reward (stats/frac_zero_std >= "
            f"{self.fraction}; mean reward {mean:.3f}), so the group-relative advantages are zero and the policy "
            "does not move. Likely causes: the reward does not read this model's answers (check the task's "
            "answer_rule and instruction: a right answer must score), the temperature is too low for a group's "
            "samples to differ, or the task is too hard (every completion scores 0) or too easy (every one scores "
            f"the maximum) for this model. Read {self.where}.")
        LOGGER.warning(self.message)
        return self.message


class MetricsSink:
    """Where every trainer's rows go: ``history``, ``output_dir/metrics.jsonl`` and callbacks.

    ``start(rows=())`` (over)writes the file with the rows already logged (a resumed run's
    history, or nothing); ``log(row)`` appends one row everywhere. ``watch`` (a ``ZeroSignalWatch``)
    reads every row first; ``warnings`` keeps what it said.
    """

    def __init__(self, output_dir=None, callbacks: Sequence[Callable] = (), watch: Callable | None = None):
        self.path = Path(output_dir) / "metrics.jsonl" if output_dir else None
        self.callbacks = list(callbacks)
        self.history: list[dict] = []
        self.watch = watch
        self.warnings: list[str] = []

    def start(self, rows: Iterable[Mapping] = ()) -> None:
        self.history[:] = [dict(r) for r in rows]
        if self.path is not None:
            write_jsonl(self.path, self.history)

    def log(self, row: Mapping) -> None:
        row = dict(row)
        said = self.watch(row) if self.watch is not None else None
        if said:
            self.warnings.append(said)
        self.history.append(row)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as f:
                f.write(json.dumps(row) + "\n")
        for cb in self.callbacks:
            cb(row)
