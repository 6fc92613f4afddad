"""The course's run configs, shipped inside the package: ``sdpo-kit train first_run`` works wherever sdpo_kit is
installed, in a checkout or not (``configs/`` in a checkout is this folder).

    preset_names()        every preset, sorted: ``["default", "demo", "first_run", ...]``
    preset_path(name)     the YAML file of a preset (ValueError naming the presets there are)
    preset_summary(name)  the first line of its leading comment, what ``sdpo-kit presets`` prints
    resolve(config)       a preset's path when ``config`` is a preset's bare name, else None

``sdpo_kit.load_config`` takes a preset's name wherever it takes a YAML file's path; a path that is not there is an
error that names the preset it may have meant (``configs/demo.yaml`` outside a checkout: ``demo``). Each YAML file here is a complete config (one file per run); the
notebooks read them from here, so a pip-installed copy needs nothing from the repository.

Left out on purpose: user presets; a YAML file of one's own is a path.
"""

from __future__ import annotations

import os
from pathlib import Path

FOLDER = Path(__file__).resolve().parent
SUFFIXES = (".yaml", ".yml")


def preset_names() -> list[str]:
    """The shipped presets' names, sorted (what ``sdpo-kit presets`` lists)."""
    return sorted(p.stem for p in FOLDER.iterdir() if p.suffix in SUFFIXES)


def preset_path(name: str) -> Path:
    """The YAML file of preset ``name`` (``"first_run"``; ``"first_run.yaml"`` and ``"configs/first_run.yaml"`` name
    it too)."""
    stem = Path(str(name)).name.removesuffix(".yaml").removesuffix(".yml")
    path = FOLDER / f"{stem}.yaml"
    if not path.is_file():
        raise ValueError(f"no preset {name!r}; the presets are {', '.join(preset_names())} (sdpo-kit presets)")
    return path


def preset_summary(name: str, width: int = 100) -> str:
    """The first sentence of the preset's leading comment (what it runs), cut to ``width`` characters; or ''."""
    words = []
    for line in preset_path(name).read_text(encoding="utf-8").splitlines():
        text = line.lstrip("#").strip() if line.startswith("#") else None
        if not text:
            if text is None or words:
                break
            continue
        words.append(text)
    sentence = " ".join(words).split(". ")[0].rstrip(".")
    return sentence if len(sentence) <= width else sentence[:width - 1].rsplit(" ", 1)[0] + "…"


def resolve(config) -> Path | None:
    """``config``'s preset file when it is a preset's bare name (``"first_run"`` or ``"first_run.yaml"``, with no
    folder) and no file of that name is in the working directory; None otherwise (a path is a path)."""
    if not isinstance(config, (str, os.PathLike)) or Path(config).exists() or Path(config).name != str(config):
        return None
    stem = str(config).removesuffix(".yaml").removesuffix(".yml")
    return FOLDER / f"{stem}.yaml" if stem in preset_names() else None


def missing(config) -> str:
    """What to say of a config path that is not there: the preset it may have meant, else the presets."""
    stem = Path(str(config)).name.removesuffix(".yaml").removesuffix(".yml")
    if stem in preset_names():
        return f"{config}: no such file; the preset of that name is `{stem}` (sdpo-kit train {stem})"
    return f"{config}: no such file, and no preset of that name (the presets: {', '.join(preset_names())})"
