"""Trainers: one readable file per algorithm and backend, and the registry that picks one.

    base.py        the scratch scaffold: RunConfig, row sampler, optimizer / schedule,
                   evaluation schedule, metrics sink, checkpoints and resume
    checkpoint.py  what a checkpoint holds and how it is written and read
    grpo.py        GRPO from scratch (GRPOSettings, GRPOConfig, GRPOLoop)
    trl_base.py    what every TRL-backed trainer shares (presets, metrics callback, resume)
    trl_grpo.py    GRPO on trl.GRPOTrainer (TRLGRPOConfig, build_trl_grpo_trainer)
    vapor_loop.py  VAPOR from scratch (VAPORFields, VAPORLoopConfig, VAPORLoop); vapor_parts.py its pieces
    vapor.py       VAPOR on TRL (VAPORConfig(trl.GRPOConfig), VAPORTrainer(trl.GRPOTrainer))
    sdpo_loop.py   SDPO from scratch (SDPOFields, SDPOLoopConfig, SDPOLoop)
    sdpo.py        SDPO on TRL (SDPOConfig(trl.GRPOConfig), SDPOTrainer(trl.GRPOTrainer))
    ppo.py         teacher-student PPO from scratch (TeacherStudentPPOTrainer; its config in ppo_config.py)
    registry.py    (algorithm, backend) -> config class, build, run

The registrations below are the whole list; a new algorithm adds its lines here.
"""

from .registry import TRAINERS, algorithms, backends, get_trainer, register

register("grpo", "scratch", config="sdpo_kit.trainers.grpo:GRPOConfig", build="sdpo_kit.trainers.grpo:GRPOLoop")
register("grpo", "trl", config="sdpo_kit.trainers.trl_grpo:TRLGRPOConfig",
         build="sdpo_kit.trainers.trl_grpo:build_from_config", run="sdpo_kit.trainers.trl_base:train_trl")
register("vapor", "scratch", config="sdpo_kit.trainers.vapor_loop:VAPORLoopConfig",
         build="sdpo_kit.trainers.vapor_loop:VAPORLoop")
register("sdpo", "scratch", config="sdpo_kit.trainers.sdpo_loop:SDPOLoopConfig",
         build="sdpo_kit.trainers.sdpo_loop:SDPOLoop")
register("sdpo", "trl", config="sdpo_kit.trainers.sdpo:TRLSDPOConfig",
         build="sdpo_kit.trainers.sdpo:build_sdpo_from_config", run="sdpo_kit.trainers.trl_base:train_trl")
register("vapor", "trl", config="sdpo_kit.trainers.vapor:TRLVAPORConfig",
         build="sdpo_kit.trainers.vapor:build_vapor_from_config", run="sdpo_kit.trainers.trl_base:train_trl")
register("ppo", "scratch", config="sdpo_kit.trainers.ppo_config:TeacherStudentPPOConfig",
         build="sdpo_kit.trainers.ppo:build_ppo_from_config")

__all__ = ["TRAINERS", "algorithms", "backends", "get_trainer", "register"]
