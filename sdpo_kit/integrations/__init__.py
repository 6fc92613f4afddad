"""Bridges to other training engines: verl (Ray, FSDP, vLLM).

``verl.py``: the task as verl parquet, the reward as verl's ``compute_score`` module, and
``export_verl`` (``sdpo-kit export-verl``); ``verl_config.py``: our settings in verl's Hydra keys.
"""
