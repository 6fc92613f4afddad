"""The course's configs ship inside the package: found by name in a checkout and after a non-editable install.

``sdpo_kit.presets`` holds the YAML files (``configs/`` in a checkout is a link to that folder); ``load_config``,
``sdpo-kit train`` and the notebooks take a preset's name; ``sdpo-kit presets`` lists them, a line each. The wheel
is built here and installed into a folder of its own, then run from outside the checkout with the checkout's
editable install taken out of the import system: ``sdpo-kit train demo`` finds its file in the installed package.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from sdpo_kit import cli, load_config
from sdpo_kit.core.config import ConfigError
from sdpo_kit.presets import FOLDER, preset_names, preset_path

ROOT = Path(__file__).resolve().parents[1]


def test_every_preset_loads_by_name_and_configs_is_the_same_folder():
    names = preset_names()
    assert {"first_run", "demo", "real_grpo", "sdpo", "teacher_student_ppo"} <= set(names)
    assert (ROOT / "configs").resolve() == FOLDER
    for name in names:
        cfg = load_config(name)
        assert cfg.to_dict() == load_config(ROOT / "configs" / f"{name}.yaml").to_dict(), name
    assert preset_path("first_run.yaml") == preset_path("first_run") == FOLDER / "first_run.yaml"


def test_a_path_that_is_not_there_names_the_preset_it_may_mean(tmp_path, monkeypatch):
    """Outside a checkout ``configs/demo.yaml`` is no file: the error names the preset ``demo`` (it is not
    silently taken in its place); a name that is neither lists the presets."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"configs/demo.yaml: no such file; the preset of that name is `demo`"):
        load_config("configs/demo.yaml")
    with pytest.raises(ConfigError, match=r"no preset of that name \(the presets: default, demo, first_run"):
        load_config("frist_run")


def test_sdpo_kit_presets_prints_a_line_each(capsys):
    assert cli.main(["presets"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == preset_names()
    first = next(line for line in lines if line.startswith("first_run "))
    assert "a real instruct model learns to answer" in first


OUTSIDE = """
import sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in getattr(f, "__module__", "")]   # the checkout's
sys.path.insert(0, {site!r})
import sdpo_kit
assert sdpo_kit.__file__.startswith({site!r}), sdpo_kit.__file__
from sdpo_kit.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_the_wheel_holds_the_presets_and_an_install_trains_one_by_name(tmp_path):
    """Build the wheel, find every preset in it, install it alone into a folder, and from a folder outside the
    checkout run ``sdpo-kit presets`` and ``sdpo-kit train demo`` (one step, a few held-out questions)."""
    src, wheels = tmp_path / "src", tmp_path / "wheels"   # a copy: an in-place build would leave build/ behind
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "sdpo_kit", src / "sdpo_kit", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels),
                    str(src)], check=True, capture_output=True)
    (wheel,) = wheels.glob("sdpo_kit-*.whl")
    inside = {n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("sdpo_kit/presets/")}
    assert {f"sdpo_kit/presets/{name}.yaml" for name in preset_names()} <= inside
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target", str(site),
                    str(wheel)], check=True, capture_output=True)
    work = tmp_path / "elsewhere"
    work.mkdir()
    script = OUTSIDE.format(site=str(site))
    run = lambda *args: subprocess.run([sys.executable, "-c", script, *args], cwd=work, capture_output=True,  # noqa: E731
                                       text=True, env={**os.environ, "MPLBACKEND": "Agg"})
    listed = run("presets")
    assert listed.returncode == 0, listed.stderr
    assert "first_run" in listed.stdout and "demo" in listed.stdout
    trained = run("train", "demo", "--max-steps", "1", "--set", "task.n_eval=8", "--set", "trainer.prompts_per_step=2",
                  "--set", "trainer.num_generations=2")
    assert trained.returncode == 0, trained.stdout[-2000:] + trained.stderr[-2000:]
    assert "sdpo-kit train demo: algorithm=grpo" in trained.stdout and "held-out accuracy: before" in trained.stdout
    assert (work / "runs" / "demo" / "metrics.jsonl").exists()
