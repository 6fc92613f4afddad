"""The shared machinery every algorithm runs on; it never imports an algorithm folder.

    logprobs.py    ``tempered`` (the one place a temperature meets the logits), per-token log-probs without a
                   (B, T, V) copy, masked reductions, KL k1 / k2 / k3
    sampling.py    on-policy sampling (a complete GenerationConfig), prompt encoding, completion log-probs
    decoding.py    the token-by-token loop sampling runs (generate's draws, a CPU's faster matmul layout)
    sampler_copy.py  a bf16 copy of the policy to sample from (``trainer.sampling_dtype``; GRPO corrects for it)
    scratch.py     the scaffold every scratch loop runs in: RunConfig, row sampler, optimizer and
                   schedule, evaluation schedule, metrics sink, checkpoints and resume
    precision.py   mixed precision chosen from the device (fp32 on a CPU, bf16 from compute
                   capability 8.0, else fp16 with a gradient scaler), for the scratch scaffold
    preflight.py   a GPU run's device, dtype and why, free memory and peak-memory estimate
    fast_generation.py  the vLLM option (TRL colocate, Unsloth fast_inference) and its fallback
    unsloth_patches.py  a model Unsloth did not load, made to run Unsloth's patched forward (GPU only)
    checkpoint.py  what a checkpoint holds and how it is written and read
    trl_base.py    what every TRL-backed trainer shares (presets, metrics callback, resume)
    metrics.py     metric names, TRL's names for them, the metrics.jsonl sink
    completions.py sampled completions to completions.jsonl and to the dashboard (both backends)
    trackers.py    report_to for the scratch loops: tensorboard, trackio, wandb through their own APIs
    config.py      the YAML run config, parsed and checked (the registry supplies the trainer classes)
    profiles.py    which model a notebook runs and which of its profiles goes with it (tiny lab, the real
                   CPU model, the T4), with the profile's smoke sizes
    algorithm.py   what the library knows about an algorithm (Algorithm, Backend), declared in its package
    verl_keys.py   what an algorithm's verl mapping writes into (VerlPaths, VerlSettings) and shared keys
    pieces.py      a learner's own piece of an algorithm (an advantage, a loss), checked where it runs
    user_code.py   a learner's own function named in a config ("my_rewards.py:name", "package.module:name")
    run_info.py    a run folder's state (run_info.json: running, finished, failed) and the checkpoint to resume
    progress.py    a tqdm bar on a terminal, plain lines elsewhere
    cache.py       the one model cache ($SDPO_KIT_CACHE, else ~/.cache/sdpo_kit)
    distributed.py which process this is under torchrun / accelerate launch (rank 0 writes the run's files)
    lazy.py        a package's public names imported on first use (``import sdpo_kit`` stays instant)
    utils.py       eval_mode, seed_everything, tolerances, quiet_progress_bars
"""

from sdpo_kit.core.lazy import lazy_exports

EXPORTS = {   # the machinery a notebook looks inside: sampling, log-probs, tolerances
    "sample": "sdpo_kit.core.sampling:sample",
    "generate_completions": "sdpo_kit.core.sampling:generate_completions",
    "completion_logprobs": "sdpo_kit.core.sampling:completion_logprobs",
    "completion_logits": "sdpo_kit.core.sampling:completion_logits",
    "encode_prompts": "sdpo_kit.core.sampling:encode_prompts",
    "render_prompts": "sdpo_kit.core.sampling:render_prompts",
    "tolerances": "sdpo_kit.core.utils:tolerances",
    "train_trl": "sdpo_kit.core.trl_base:train_trl",
}
__all__ = sorted(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
