"""Every results file in ``benchmarks/results/``, declared once, in the order ``make bench-stale`` re-measures.

An ``Experiment`` says what makes the file (``command``: a script here and its arguments), which replays
fingerprint it (``replays``: names in ``fingerprint.REPLAYS`` or ``DIGESTS``), the code it measures (``rooms``:
a key of ``ROOMS``, written into the file as its provenance) and the results files its script reads
(``reads``: re-measured before it). ``reports/render.py``, ``fingerprint.py``, ``tools/bench_stale.py`` and
``_common.write_results`` all read this table; a new benchmark is one entry here. An experiment declared as
data (a ``Sweep``: config, overrides, seeds) needs no script: ``run.py`` runs it, and its fingerprint replays
the same config and overrides.

    python benchmarks/run.py NAME                     # make results file NAME as declared (run.py --list)
    make bench-stale                                  # re-measure what the last bench-check found moved
    python tools/bench_stale.py --force NAME          # re-measure NAME as declared, in a clean worktree of HEAD
"""

from __future__ import annotations

from dataclasses import dataclass, field

# the code each benchmark measures besides its own script: rooms, not single files
CORE = ("sdpo_kit/core", "sdpo_kit/text", "sdpo_kit/sandbox", "sdpo_kit/lab", "sdpo_kit/models.py",
        "sdpo_kit/registry.py", "sdpo_kit/training.py", "sdpo_kit/cli.py", "sdpo_kit/rewards",
        "benchmarks/_common.py")
ROOMS = {
    "demo": CORE + ("sdpo_kit/grpo", "configs/demo.yaml"),
    "first_run": CORE + ("sdpo_kit/grpo", "configs/first_run.yaml"),
    "own_task": CORE + ("sdpo_kit/grpo", "examples/own_task"),
    "vapor": CORE + ("sdpo_kit/grpo", "sdpo_kit/vapor", "configs/vapor.yaml"),
    "sdpo": CORE + ("sdpo_kit/grpo", "sdpo_kit/sdpo", "configs/sdpo.yaml", "configs/sdpo_feedback.yaml"),
    "sdpo_lab": CORE + ("sdpo_kit/grpo", "sdpo_kit/sdpo", "configs/sdpo_lab.yaml", "configs/sdpo_paper.yaml"),
    "ppo": CORE + ("sdpo_kit/ppo", "configs/teacher_student_ppo.yaml"),
    "export": CORE + ("sdpo_kit/grpo", "sdpo_kit/deploy", "configs/demo.yaml"),
    "notebooks": CORE + ("sdpo_kit", "notebooks", "configs"),
    "code_reward": ("sdpo_kit/sandbox", "sdpo_kit/rewards", "sdpo_kit/tasks/code.py", "benchmarks/_common.py"),
    "code_lab": CORE + ("sdpo_kit/grpo", "sdpo_kit/sdpo", "configs/sdpo_code_lab.yaml"),
    "real": CORE + ("sdpo_kit/grpo", "sdpo_kit/sdpo", "sdpo_kit/vapor", "sdpo_kit/ppo", "configs/real_grpo.yaml",
                    "configs/real_sdpo.yaml", "configs/real_vapor.yaml", "configs/real_ppo.yaml"),
    "fresh_clone": ("Makefile", ".ci/run", "pyproject.toml", "constraints.txt", "constraints-verl.txt",
                    "tests/conftest.py"),
}


@dataclass(frozen=True)
class Sweep:
    """A config trained once per seed (``run.py``): held-out accuracy before and after, and the run's best."""
    config: str                                   # from the repository's root
    set: dict = field(default_factory=dict)       # dotted overrides every run takes
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    backend: str = "scratch"


@dataclass(frozen=True)
class Experiment:
    command: str                  # a script in benchmarks/ (or a path from the root: tools/...) and its arguments
    replays: tuple[str, ...]      # fingerprint.REPLAYS / DIGESTS names its fingerprint holds
    rooms: str                    # a key of ROOMS
    reads: tuple[str, ...] = ()   # results files its script reads
    sweep: Sweep | None = None    # declared as data: run.py runs it (its command is ``run.py NAME``)


def sweep(name: str, config: str, rooms: str, **kw) -> Experiment:
    """An experiment declared as a ``Sweep``; its fingerprint is a replay of the same config and overrides."""
    return Experiment(f"run.py {name}", (name,), rooms, sweep=Sweep(config, **kw))


TINY = ("demo", "vapor", "sdpo", "ppo")          # the replays of what the tiny-lab notebooks train
SDPO_LAB = ("sdpo_lab", "sdpo_paper")
LR = "--lr " + " ".join(f"{m}=1e-05" for m in ("sdpo", "sdpo_loss_third", "sdpo_sequence", "sdpo_topk",
                                                "sdpo_full_logits", "sdpo_paper", "sdpo_frozen", "sdpo_live",
                                                "sdpo_feedback_only_without_solution"))
EXPERIMENTS = {
    "speed": Experiment("bench_speed.py", ("demo",), "demo"),
    "demo": sweep("demo", "configs/demo.yaml", "demo"),
    "first_run": Experiment("bench_first_run.py --seeds 71 72 73 74 75 76 77 78 79 80", ("first_run",), "first_run"),
    "own_task": Experiment("bench_first_run.py --config examples/own_task/config.yaml --name own_task", ("own_task",),
                           "own_task"),
    "demo_constant_lr": sweep("demo_constant_lr", "configs/demo.yaml", "demo",
                              set={"trainer.lr_scheduler_type": "constant"}),
    "demo_top_k50": sweep("demo_top_k50", "configs/demo.yaml", "demo", set={"trainer.top_k": 50}),
    "demo_copy_warm_start": sweep("demo_copy_warm_start", "configs/demo.yaml", "demo", seeds=(0, 1, 2),
                                  set={"model.lab.copy_steps": 300}),
    "demo_plateau": Experiment("bench_demo_plateau.py", ("demo",), "demo"),
    "lab": Experiment("bench_lab.py", ("demo", "demo_copy_warm_start"), "demo"),
    "code_reward": Experiment("bench_code_reward.py", ("code_lab",), "code_reward"),
    "export": Experiment("bench_export.py", ("demo",), "export"),
    "vapor": Experiment("bench_vapor.py", ("vapor",), "vapor"),
    "sdpo": Experiment("bench_sdpo.py", ("sdpo", "sdpo_feedback"), "sdpo"),
    "ppo": Experiment("bench_ppo.py", ("ppo",), "ppo"),
    "sdpo_lab": Experiment("bench_sdpo_lab.py", SDPO_LAB, "sdpo_lab"),
    "sdpo_lab_discovery": Experiment("bench_sdpo_lab.py --no-runs --discovery --out sdpo_lab_discovery.json",
                                     SDPO_LAB, "sdpo_lab"),
    "sdpo_lab_signal": Experiment("bench_sdpo_lab_signal.py", SDPO_LAB, "sdpo_lab", reads=("sdpo_lab",)),
    "sdpo_lab_signal_1000": Experiment("bench_sdpo_lab_signal.py --dial max --steps 1000 --out "
                                       "sdpo_lab_signal_1000.json", SDPO_LAB, "sdpo_lab", reads=("sdpo_lab",)),
    "sdpo_lab_ablations": Experiment("bench_sdpo_lab.py --dial max --methods sdpo sdpo_loss_third sdpo_sequence "
                                     "sdpo_topk sdpo_full_logits sdpo_paper sdpo_frozen sdpo_live "
                                     f"sdpo_feedback_only_without_solution {LR} --out sdpo_lab_ablations.json --jobs 2",
                                     SDPO_LAB, "sdpo_lab"),
    "sdpo_lab_stability": Experiment("bench_sdpo_lab.py --dial max --methods sdpo sdpo_frozen sdpo_live grpo --steps "
                                     "600 --seeds 0 1 2 --lr sdpo=1e-05 sdpo_frozen=1e-05 sdpo_live=1e-05 grpo=1e-05 "
                                     "--out sdpo_lab_stability.json --jobs 2", SDPO_LAB, "sdpo_lab"),
    "sdpo_lab_headroom": Experiment("bench_sdpo_lab_headroom.py --jobs 2", SDPO_LAB, "sdpo_lab"),
    "sdpo_lab_room": Experiment("bench_sdpo_lab.py --sft-steps 1500 --dial 1000 1250 1500 --runs-at top --out "
                                "sdpo_lab_room.json --jobs 2", SDPO_LAB, "sdpo_lab"),
    "sdpo_lab_transfer": Experiment("bench_sdpo_lab_transfer.py", SDPO_LAB, "sdpo_lab"),
    # each method at the rate it scored best at on the tuning seeds 100-102 (the grid 1e-5 to 1e-4, then probes
    # at 1e-6 and 3e-6 below it); the five reporting seeds run at those rates, none tuned on them
    "code_lab": Experiment("bench_code_lab.py --jobs 2 --lr grpo=1e-6 sdpo=1e-5 sdpo_feedback=1e-6 blend=3e-6",
                           ("code_lab",), "code_lab"),
    "code_lab_starving": Experiment("bench_code_lab.py --variant starving --jobs 2", ("code_lab",), "code_lab"),
    "code_lab_discovery": Experiment("bench_code_lab.py --dial 1000 --no-runs --discovery --tts-lr-grid 1e-4 3e-4 "
                                     "1e-3 3e-3 --out code_lab_discovery.json", ("code_lab",), "code_lab"),
    "code_lab_heldout": Experiment("bench_code_lab_heldout.py", ("code_lab",), "code_lab"),
    "real_tasks": Experiment("bench_real.py tasks", ("real_grpo_fp32",), "real"),   # no training: fp32 decoding
    "real_speed": Experiment("bench_real.py speed", ("real_grpo", "real_grpo_fp32", "real_grpo_trl", "real_sdpo",
                                                     "real_vapor", "real_ppo"), "real"),
    "real_decode": Experiment("bench_decode.py", ("real_grpo",), "real"),
    # the policy samples (fp32); as shipped (auto), a CPU that multiplies bf16 samples as real_learn_bf16
    "real_learn": sweep("real_learn", "configs/real_grpo.yaml", "real", seeds=(1, 2, 3),
                        set={"trainer.sampling_dtype": "float32"}),
    "real_learn_bf16": sweep("real_learn_bf16", "configs/real_grpo.yaml", "real", seeds=(1, 2, 3),
                             set={"trainer.sampling_dtype": "bfloat16"}),
    "real_sdpo": Experiment("bench_real.py sdpo", ("real_grpo_fp32", "real_sdpo", "real_sdpo_rlhf_book"), "real"),
    "sdpo_head_start": Experiment("bench_sdpo_head_start.py", ("sdpo_lab", "code_lab", "real_sdpo"), "sdpo",
                                  reads=("sdpo_lab", "sdpo_lab_room", "code_lab", "code_lab_starving",
                                         "code_lab_discovery", "real_sdpo")),
    "notebooks_smoke": Experiment("bench_notebooks.py", ("notebooks", *TINY), "notebooks"),
    "notebooks_smoke_cold": Experiment("bench_notebooks.py --cold", ("notebooks", *TINY), "notebooks"),
    "notebooks_full": Experiment("bench_notebooks.py --full", ("notebooks", *TINY, "first_run"), "notebooks"),
    "notebooks_smoke_real": Experiment("bench_notebooks.py --model smollm2-135m", ("notebooks", "first_run"),
                                       "notebooks"),
    "fresh_clone": Experiment("tools/bench_fresh_clone.py", ("ci",), "fresh_clone"),
}


def script_path(command: str) -> str:
    """The script of a declared ``command`` as a path from the repository's root: ``bench_real.py speed`` ->
    ``benchmarks/bench_real.py``; a command naming a folder (``tools/bench_fresh_clone.py``) is one already."""
    script = command.split()[0]
    return script if "/" in script else f"benchmarks/{script}"


def typed(command: str) -> str:
    """A declared ``command`` as typed from the repository's root: ``python benchmarks/bench_real.py speed``."""
    return " ".join(["python", script_path(command), *command.split()[1:]])


def experiment(name: str) -> Experiment:
    """``EXPERIMENTS[name]``; a name not declared here (a script's ``--name`` of one's own) takes the entry
    whose name is its longest prefix (``demo_my_try`` -> ``demo``). KeyError when none is."""
    if name in EXPERIMENTS:
        return EXPERIMENTS[name]
    base = next((k for k in sorted(EXPERIMENTS, key=len, reverse=True) if name.startswith(k)), None)
    if base is None:
        raise KeyError(f"results file {name!r} is not declared: add it to EXPERIMENTS in benchmarks/experiments.py")
    return EXPERIMENTS[base]
