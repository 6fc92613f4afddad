"""The dashboard in a real Jupyter kernel (ipykernel, started with jupyter_client): it displays one
widget, ``train`` returns at once with the run going on in a thread, and a click on the stop button,
sent as the frontend sends it (a ``comm_msg`` to the button's model), stops the run after the step in
progress with a checkpoint; ``wait()`` in a later cell returns the rows."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
jupyter_client = pytest.importorskip("jupyter_client")
pytest.importorskip("ipykernel")

SETUP = """
import sys; sys.path.insert(0, {root!r})
import torch; torch.set_num_threads(1)
from sdpo_kit.viz.dashboard import Dashboard
from sdpo_kit.grpo.loop import GRPOScratchTrainer
from sdpo_kit.grpo.config import GRPOScratchConfig
from sdpo_kit.lab.model import build_model, build_tokenizer
from sdpo_kit.tasks import ArithmeticTask
tok = build_tokenizer(); rows = ArithmeticTask(n_eval=8, seed=0).splits()[0]
def reward(prompts, completions, **kw): return [len(c[0]['content']) % 3 / 2 for c in completions]
dash = Dashboard(every=10**9)
loop = GRPOScratchTrainer(build_model(tok, seed=0), tok, [reward], rows,
                GRPOScratchConfig(max_steps=100000, prompts_per_step=2, num_generations=4, max_completion_length=3,
                           output_dir={out!r}), callbacks=[dash])
print(dash.in_notebook, dash.train(loop))
"""


def execute(kc, code: str, timeout: float = 120) -> tuple[str, list[str]]:
    """Run a cell; (its printed text, the mime types it displayed). Errors fail the test."""
    msg_id = kc.execute(code)
    text, shown = [], []
    while True:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            text.append(content["text"])
        elif kind == "display_data":
            shown += list(content["data"])
        elif kind == "error":
            pytest.fail(f"{content['ename']}: {content['evalue']}")
        elif kind == "status" and content["execution_state"] == "idle":
            return "".join(text), shown


def test_stop_button_in_a_live_kernel(tmp_path):
    km, kc = jupyter_client.manager.start_new_kernel(kernel_name="python3", cwd=str(tmp_path))
    try:
        printed, shown = execute(kc, SETUP.format(root=str(ROOT), out=str(tmp_path / "run")))
        assert printed.split() == ["True", "None"], printed      # in a kernel; train() returned at once
        assert "application/vnd.jupyter.widget-view+json" in shown
        deadline = time.monotonic() + 60
        while int(execute(kc, "print(dash.step)")[0]) < 2:        # the kernel is free while it trains
            assert time.monotonic() < deadline, "no step logged"
            time.sleep(0.2)
        button = execute(kc, "print(dash.stop_button.model_id, end='')")[0]
        kc.session.send(kc.shell_channel.socket, "comm_msg",       # what a click in the browser sends
                        content={"comm_id": button, "data": {"method": "custom", "content": {"event": "click"}}})
        printed, _ = execute(kc, "h = dash.wait(); print(loop.stopped_at, dash.stopped_at, h[-1]['step'])")
        stopped, shown_at, last = map(int, printed.split())
        assert 2 <= stopped == shown_at == last < 100000
        assert (tmp_path / "run" / f"checkpoint-{stopped}").is_dir()
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
