"""The notebooks' install cell, run both ways with a stubbed shell: it picks what to install by the runtime.

Colab's GPU runtime gets the ``colab`` extra (Unsloth and trl 1.15, Unsloth's pin); a CPU runtime the
``cpu`` extra (trl 1.16: trl 1.15's GRPOTrainer cannot train on a CPU) and no Unsloth. Where sdpo_kit
already imports (locally, in CI) the cell installs nothing. When the install replaced a package the
runtime had already imported, the cell stops and asks for a restart. Each notebook's first code cell is
executed here with ``torch.cuda.is_available``, ``import sdpo_kit``, IPython's ``get_ipython`` and
``importlib.metadata.version`` stood in for; nothing is installed.
"""

from __future__ import annotations

import builtins
import json
import re
import sys
import types
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def install_cell(path: Path) -> str:
    cells = json.loads(path.read_text())["cells"]
    return "".join(next(c for c in cells if c["cell_type"] == "code")["source"])


class Shell:
    """A stand-in for IPython's shell: records the ``%pip`` lines it is given."""

    def __init__(self):
        self.magics: list[tuple[str, str]] = []

    def run_line_magic(self, name: str, line: str):
        self.magics.append((name, line))


def run_cell(source: str, monkeypatch, *, cuda: bool, installed: bool, versions_after: dict | None = None):
    """Execute the install cell; (the shell's magics, the namespace, the exception or None)."""
    shell = Shell()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: "Tesla T4")
    ipython = types.ModuleType("IPython")
    ipython.get_ipython = lambda: shell
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "sdpo_kit" and not installed and not shell.magics:
            raise ImportError("No module named 'sdpo_kit'")
        return real_import(name, *args, **kwargs)

    import importlib.metadata as md

    before = {"torch": "2.8.0", "numpy": "2.0.2", "transformers": "4.57.0"}
    after = versions_after or before
    monkeypatch.setattr(md, "version", lambda p: (after if shell.magics else before).get(p, "1.0"))
    monkeypatch.setattr(builtins, "__import__", fake_import)
    ns: dict = {}
    try:
        exec(compile(source, "install-cell", "exec"), ns)
        error = None
    except BaseException as e:   # SystemExit is what the cell raises to ask for a restart
        error = e
    finally:
        monkeypatch.setattr(builtins, "__import__", real_import)
    return shell.magics, ns, error


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_a_gpu_runtime_installs_the_colab_extra(path, monkeypatch):
    """With CUDA: one %pip line installing sdpo_kit[colab] from the repository."""
    magics, ns, error = run_cell(install_cell(path), monkeypatch, cuda=True, installed=False)
    assert error is None, error
    assert [m for m, _ in magics] == ["pip"] and len(magics) == 1
    assert re.search(r'install -q "sdpo_kit\[colab\] @ git\+https://github\.com/sdpo-kit/sdpo_kit"', magics[0][1])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_a_cpu_runtime_installs_a_trl_that_trains_on_a_cpu_and_no_unsloth(path, monkeypatch):
    """Without CUDA: the cpu extra, which pins trl 1.16 and brings no Unsloth (pyproject.toml says so)."""
    magics, ns, error = run_cell(install_cell(path), monkeypatch, cuda=False, installed=False)
    assert error is None, error
    assert len(magics) == 1 and '"sdpo_kit[cpu] @' in magics[0][1]
    assert "colab" not in magics[0][1] and "unsloth" not in magics[0][1].lower()
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "trl==1.16.0" in extras["cpu"] and not any("unsloth" in d for d in extras["cpu"])
    assert "trl==1.15.0" in extras["colab"] and any(d.startswith("unsloth==") for d in extras["colab"])


@pytest.mark.parametrize("cuda", [True, False])
def test_an_installed_sdpo_kit_installs_nothing(monkeypatch, cuda):
    """Locally and in CI the package imports: no %pip line at all."""
    magics, ns, error = run_cell(install_cell(NOTEBOOKS[0]), monkeypatch, cuda=cuda, installed=True)
    assert error is None and magics == []


def test_an_install_that_replaced_an_imported_package_asks_for_a_restart(monkeypatch):
    """torch already imported at 2.8.0, the install brings another: SystemExit naming it and the restart."""
    source = install_cell(NOTEBOOKS[0])
    magics, ns, error = run_cell(source, monkeypatch, cuda=False, installed=False,
                                 versions_after={"torch": "2.13.0", "numpy": "2.0.2", "transformers": "4.57.0"})
    assert isinstance(error, SystemExit) and "torch" in str(error) and "Restart session" in str(error)


def test_every_notebook_has_the_same_install_cell():
    """One install cell for the course: a fix reaches every notebook."""
    cells = {install_cell(p) for p in NOTEBOOKS}
    assert len(cells) == 1
