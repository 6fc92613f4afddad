"""``import sdpo_kit as sk`` is the public API: the names below, each with one home, loaded on first use.

The list is held here on purpose: a name added to or dropped from ``sdpo_kit.__all__`` is a change to the
public API, made in both places. Importing the package imports neither torch nor TRL (TRL must come after
Unsloth on a GPU), and every name resolves.
"""

from __future__ import annotations

import subprocess
import sys

import sdpo_kit as sk

PUBLIC = [
    "Algorithm", "Backend", "register_algorithm", "Config", "ConfigError", "GRPOScratchConfig", "GRPOScratchTrainer", "GRPOTRLConfig", "PPOScratchConfig",
    "PPOScratchTrainer", "PieceError", "RewardError", "SDPOScratchConfig", "SDPOScratchTrainer", "SDPOTRLConfig",
    "SDPOTRLTrainer", "VAPORScratchConfig", "VAPORScratchTrainer", "VAPORTRLConfig", "VAPORTRLTrainer",
    "build_trl_grpo_trainer", "evaluate", "export", "export_verl", "load_config", "load_policy", "losses",
    "make_reward", "make_task", "preset_names", "preset_path", "train",
]


def test_all_is_the_public_api():
    assert sorted(sk.__all__) == sorted(PUBLIC)


def test_every_public_name_resolves_to_one_object():
    """Each name loads; the trainers and configs are named ``<ALGORITHM><Backend>Trainer`` / ``...Config``."""
    for name in PUBLIC:
        value = getattr(sk, name)
        assert value is getattr(sk, name), name
        if name.endswith(("Trainer", "Config")) and name != "Config":
            assert value.__name__ == name, (name, value.__name__)
    assert sk.losses.grpo_loss is sk.losses.grpo_loss and callable(sk.train)
    assert sk.rewards.make_reward is sk.make_reward and sk.tasks.ArithmeticTask is not None


def test_importing_the_package_imports_neither_torch_nor_trl():
    code = "import sys, sdpo_kit; print('torch' in sys.modules, 'trl' in sys.modules, len(sdpo_kit.__all__))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False", str(len(PUBLIC))], out


def test_an_unknown_name_is_an_attribute_error():
    import pytest

    name = "GRPOConfig"   # TRL's class name, never ours
    with pytest.raises(AttributeError, match="has no attribute 'GRPOConfig'"):
        getattr(sk, name)


def test_no_exported_name_is_also_a_module_of_its_package():
    """``from sdpo_kit.viz import explore`` must give the function whatever was imported before: a module of the
    same name would replace the package's attribute once anything imported it (``viz/explorers.py``, not
    ``explore.py``)."""
    import importlib
    import pkgutil

    for package in ("sdpo_kit", "sdpo_kit.core", "sdpo_kit.viz", "sdpo_kit.sdpo", "sdpo_kit.vapor", "sdpo_kit.deploy",
                    "sdpo_kit.lab", "sdpo_kit.tasks", "sdpo_kit.course", "sdpo_kit.rewards"):
        pkg = importlib.import_module(package)
        modules = {m.name for m in pkgutil.iter_modules(pkg.__path__)}
        clash = (set(getattr(pkg, "__all__", ())) & modules) - {"losses"}   # sk.losses is the module on purpose
        assert not clash, (package, clash)
