"""What a sandboxed program can read: the standard library, and not sdpo_kit's package (its problem
file holds every test's expected output) nor any site-packages of the interpreter.

The program is handed the paths outright (the problem file by the path of sdpo_kit's package, each
private directory's listing, a file in each), so hiding the paths is no part of the claim. It runs
in whatever isolation this machine gives (Landlock, as root a mount namespace too); as root it also
runs with Landlock alone (``drop_root=False``) and with the mount namespace alone (the child script
with its Landlock step removed). Where neither holds, the program reads them all: that test skips
and says so, as the isolation table in docs/concepts/code_rewards.md does.
"""

from __future__ import annotations

import json
import os
import site
import sysconfig
from pathlib import Path

import pytest

from sdpo_kit.rewards.code_problems import PROBLEMS_PATH
from sdpo_kit.sandbox import process
from sdpo_kit.sandbox.process import python_paths, run_program

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the sandbox needs a POSIX system")

PROBE = """
import json, os, sys
got = {}
for path in json.loads(sys.stdin.read()):
    try:
        got[path] = len(os.listdir(path)) if os.path.isdir(path) else len(open(path, "rb").read())
    except OSError as e:
        got[path] = type(e).__name__
print(json.dumps(got))
import collections, decimal, fractions, heapq, json.decoder  # the standard library still imports
"""


def private_targets() -> list[str]:
    """The problem file and its folder by the package's path, each private directory, and the
    first file in each (read here, in the parent, to prove the paths are real)."""
    targets = [str(PROBLEMS_PATH), str(PROBLEMS_PATH.parent)]
    for d in python_paths()["private"]:
        targets.append(d)
        first = next((e for e in sorted(os.scandir(d), key=lambda e: e.name) if e.is_file()), None)
        if first is not None:
            targets.append(first.path)
    assert PROBLEMS_PATH.stat().st_size > 0 and all(os.path.exists(t) for t in targets)
    return targets


def readable(**kwargs) -> tuple[dict, dict]:
    """(what the program got per path: a byte or entry count, or the error's name; the isolation)."""
    run = run_program(PROBE, json.dumps(private_targets()), timeout_s=5.0, **kwargs)
    assert run.returncode == 0 and not run.record("error"), (run.stderr, run.records)
    got = json.loads(run.stdout)
    return {p: n for p, n in got.items() if isinstance(n, int) and n > 0}, run.isolation


def test_the_private_paths_are_what_they_should_be():
    """Private: sdpo_kit's package and every site-packages this interpreter reads (its own and,
    for a venv, the base's); readable: the standard library, and no private directory is one."""
    paths = python_paths()
    assert os.path.realpath(PROBLEMS_PATH.parents[2]) in paths["private"]
    for d in (sysconfig.get_path("purelib"), *site.getsitepackages()):
        if os.path.isdir(d):
            assert os.path.realpath(d) in paths["private"], d
    assert os.path.realpath(os.path.dirname(os.__file__)) in paths["stdlib"]
    assert not set(paths["stdlib"]) & set(paths["private"])


@pytest.mark.parametrize("drop_root", [True, False], ids=["default", "no-root-drop"])
def test_a_program_cannot_read_the_package_or_site_packages(drop_root):
    """Handed the paths, the program reads nothing of them (a file fails to open, a folder fails to
    list or lists empty), while the standard library imports; ``packages`` in the isolation report
    names what held. As root without the drop to nobody only Landlock stands."""
    if drop_root is False and os.geteuid() != 0:
        pytest.skip("not root: drop_root changes nothing")
    got, isolation = readable(drop_root=drop_root)
    if isolation["packages"] == "readable":
        assert got, "nothing held, yet nothing was read: the probe is broken"
        pytest.skip(f"no Landlock and no mount namespace here ({isolation}): the program reads the package "
                    "and site-packages (the weakest fallback cannot prevent it)")
    assert got == {}, (isolation, got)


def test_the_mount_namespace_alone_hides_them(tmp_path, monkeypatch):
    """As root without Landlock (the child script with that step removed), the mount namespace
    alone covers the package and site-packages with empty read-only tmpfs."""
    if os.geteuid() != 0:
        pytest.skip("the mount namespace is for root only")
    source = process.CHILD.read_text()
    head = "def landlock(lib, workdir, stdlib, private) -> int:\n"
    assert source.count(head) == 1
    patched = tmp_path / process.CHILD.name
    patched.write_text(source.replace(head, head + "    return 0\n"))
    monkeypatch.setattr(process, "CHILD", Path(patched))
    got, isolation = readable()
    assert isolation["landlock_abi"] == 0
    if "mounts" not in isolation["packages"]:
        pytest.skip(f"no mount namespace here ({isolation}): without Landlock the program reads them")
    assert got == {}, (isolation, got)
