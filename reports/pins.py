"""The install page's version pins, read from the files that set them (``render.py`` renders them).

``docs/install.md`` quotes pins that live elsewhere: the ``colab`` extra and the supported ranges in
``pyproject.toml``, the CI set in ``constraints.txt``, and the wheels ``tools/gpu_wheels.py``
carries to an offline GPU machine. Each is a field, ``<!--f:pins.colab_unsloth-->2026.10.9<!--/f-->``,
or the ``install-pip`` block, so the page cannot name a pin the files do not. What the pins are *for*
(the prose around them) is written by hand; only the versions are rendered.
"""

from __future__ import annotations

import re
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
SPEC = re.compile(r"^\s*([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?\s*(.*?)\s*$")   # "name[extra] >=1,<2" -> name, spec


def requirements(lines) -> dict[str, str]:
    """{name: version spec} of requirement strings (``"trl==1.15.0"`` -> ``{"trl": "==1.15.0"}``),
    names lowercased with ``-`` as ``_``; comments and blank lines skipped."""
    out = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        m = SPEC.match(line) if line else None
        if m:
            out[m.group(1).lower().replace("-", "_")] = m.group(2).replace(" ", "")
    return out


def exact(spec: str) -> str:
    """The version of an exact pin (``==1.15.0`` -> ``1.15.0``); ValueError for anything looser."""
    if not spec.startswith("==") or any(c in spec[2:] for c in ",<>=!~*"):
        raise ValueError(f"not an exact pin: {spec!r}")
    return spec[2:]


def gpu_wheels(root: Path = ROOT) -> dict[str, str]:
    """{name: version} of ``tools/gpu_wheels.py``'s ``WHEELS`` (read as text: no import needed)."""
    path = root / "tools" / "gpu_wheels.py"
    if not path.exists():
        return {}
    text = path.read_text()
    body = re.search(r"^WHEELS = \((.*?)^\)", text, flags=re.S | re.M).group(1)
    return {k: exact(v) for k, v in requirements(re.findall(r'"([^"]+)"', body)).items()}


def pins_fields(root: Path = ROOT) -> dict[str, str]:
    """Every pin docs/install.md quotes, by field name."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    deps = requirements(project["dependencies"])
    colab = requirements(project["optional-dependencies"]["colab"])
    ci = requirements((root / "constraints.txt").read_text().splitlines())
    fields = {f"colab_{k}": exact(v) for k, v in colab.items() if v}            # colab_unsloth: 2026.10.9
    cpu = requirements(project["optional-dependencies"]["cpu"])
    fields.update({f"cpu_{k}": exact(v) for k, v in cpu.items() if v})          # cpu_trl: 1.16.0
    fields.update({f"dep_{k}": v for k, v in deps.items() if v})               # dep_trl: >=1.15,<1.17
    fields.update({k: (exact(v) if v.startswith("==") else v) for k, v in ci.items()})   # torch: 2.13.0
    fields.update({f"gpu_wheels_{k}": v for k, v in gpu_wheels(root).items()})   # gpu_wheels_unsloth: 2026.10.7
    return fields


def install_pip(root: Path = ROOT) -> str:
    """The pip install snippet: a CPU machine takes constraints.txt's torch as the CPU wheel first."""
    torch = pins_fields(root)["torch"]
    return "\n".join([
        "```bash",
        "git clone <this repository> && cd sdpo_kit",
        "python3 -m venv .venv && . .venv/bin/activate",
        "# CPU-only machine: take the CPU wheel of torch first (skips several GB of CUDA libraries)",
        f"pip install torch=={torch} --index-url https://download.pytorch.org/whl/cpu",
        'pip install -c constraints.txt -e ".[dev]"',
        "```"])
