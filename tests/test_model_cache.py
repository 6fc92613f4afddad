"""One model cache per machine: make, the CLI, the notebooks and the tests all unpack the real model and keep
the tiny lab's warm starts in ``core.cache.cache_dir()`` ($SDPO_KIT_CACHE, else the user's cache folder)."""

import re
from pathlib import Path

from sdpo_kit.core.cache import cache_dir
from sdpo_kit.lab.real_model import smollm2_root

ROOT = Path(__file__).resolve().parents[1]


def test_the_cache_is_the_variable_else_the_users_cache_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("SDPO_KIT_CACHE", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("SDPO_KIT_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "sdpo_kit"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "sdpo_kit"
    assert smollm2_root().parent == cache_dir()     # the real model is unpacked there too


def test_no_entry_point_moves_the_cache_elsewhere():
    """make, CI and the notebooks leave SDPO_KIT_CACHE to the user: one that set its own folder would unpack the
    model a second time (the Makefile once kept its own in ./.cache/sdpo_kit)."""
    places = [ROOT / "Makefile", *(ROOT / ".ci").glob("*"), *(ROOT / "notebooks").glob("*.ipynb")]
    setting = re.compile(r"SDPO_KIT_CACHE\s*[?:]?=|environ\[.SDPO_KIT_CACHE.\]\s*=|setenv\(.SDPO_KIT_CACHE")
    offenders = [p.name for p in places if p.is_file() and setting.search(p.read_text())]
    assert offenders == []
