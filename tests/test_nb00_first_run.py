"""Notebook 00's helpers (read, not run): the group of answers section 6 shows from the learner's run.

``group_to_show`` reads the run's ``completions.jsonl`` (one row per sampled answer, a step's groups one after
another) and picks a group whose rewards differ, from the latest step that has one, so the advantages it shows
are not all zero; a run with no such group gets its last step's first group, and the notebook says why.
"""

from __future__ import annotations

import json

import pytest

from sdpo_kit.course import group_to_show

G = 4


def write(path, steps: dict[int, list[list[float]]]) -> None:
    """``completions.jsonl`` with, per step, one group of ``G`` answers per list of rewards."""
    rows = [{"step": step, "prompt": f"What is {step} + {g}?", "completion": f"answer {i}", "reward": r,
             "answer": str(step + g)}
            for step, groups in steps.items() for g, rewards in enumerate(groups) for i, r in enumerate(rewards)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_it_shows_a_group_with_mixed_rewards_from_the_latest_step_that_has_one(tmp_path):
    """The last step's first group scored alike (all right): the group shown is the first mixed one of the
    latest step with one, not that one."""
    path = tmp_path / "completions.jsonl"
    write(path, {1: [[0, 1, 0, 0], [0, 0, 0, 0]],
                 2: [[1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 1, 1], [0, 1, 1, 1]],
                 3: [[1, 1, 1, 1], [0, 0, 0, 0]]})
    group = group_to_show(path, G)
    assert [r["step"] for r in group] == [2] * G and [r["reward"] for r in group] == [1, 0, 1, 1]
    assert len({r["prompt"] for r in group}) == 1


def test_with_no_mixed_group_it_shows_the_last_step_s_first_group(tmp_path):
    """No group had mixed rewards: the last step's first group, whose rewards tell the caller so."""
    path = tmp_path / "completions.jsonl"
    write(path, {1: [[0, 0, 0, 0]], 2: [[1, 1, 1, 1], [0, 0, 0, 0]]})
    group = group_to_show(path, G)
    assert [r["step"] for r in group] == [2] * G and {r["reward"] for r in group} == {1}


def test_a_run_that_logged_nothing_is_an_error_that_says_why(tmp_path):
    """An empty log names the setting that turns logging on; no whole group names the group size."""
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ValueError, match="log_completions_every"):
        group_to_show(empty, G)
    partial = tmp_path / "partial.jsonl"
    write(partial, {1: [[0, 1, 0]]})
    with pytest.raises(ValueError, match="whole group of 4"):
        group_to_show(partial, G)


def test_the_lift_notebook_00_prints_against_is_the_measured_smallest():
    """The real model's profile prints the learner's lift beside ``min_lift``: the smallest lift of the first
    run's benchmark over seeds not used to pick the config (``benchmarks/results/first_run.json``), not a
    number typed apart from it."""
    from pathlib import Path

    from sdpo_kit.core.profiles import REAL_CPU_MODEL
    from sdpo_kit.course.profiles.nb00 import PROFILES

    results = json.loads((Path(__file__).resolve().parents[1] / "benchmarks/results/first_run.json").read_text())
    assert PROFILES[REAL_CPU_MODEL]["min_lift"] == round(results["summary"]["min_lift"], 2)
