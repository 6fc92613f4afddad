"""tests/plugins/kernels_over_ipc.py, the notebook runs' pytest plugin: two kernels started side by side talk
over IPC sockets in folders of their own (no TCP port to collide on) and answer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = """
import kernels_over_ipc
from jupyter_client.manager import start_new_kernel

started = [start_new_kernel(kernel_name="python3") for _ in range(2)]
for km, kc in started:
    reply = kc.execute_interactive("x = 6 * 7", user_expressions={"x": "x"}, timeout=60)
    print(km.transport, km.ip, reply["content"]["user_expressions"]["x"]["data"]["text/plain"])
for km, kc in started:
    kc.stop_channels()
    km.shutdown_kernel(now=True)
"""


def test_two_kernels_answer_over_ipc_sockets_of_their_own(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests" / "plugins")}
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [line.split() for line in out.stdout.splitlines()]
    assert [(t, x) for t, _, x in lines] == [("ipc", "42"), ("ipc", "42")]
    assert len({os.path.dirname(ip) for _, ip, _ in lines}) == 2, lines   # a folder each, not kernel-ipc in the cwd
