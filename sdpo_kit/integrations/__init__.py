"""Bridges to other training engines. ``verl.py``: data and reward for verl (Ray, FSDP, vLLM)."""
