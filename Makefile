# Two commands for a fresh machine: `make demo` and `make test` (both install if needed).
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.sdpo_kit-installed
export SDPO_KIT_CACHE ?= $(CURDIR)/.cache/sdpo_kit

.PHONY: install demo test unit notebooks lint docs bench bench-clone clean

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e ".[dev]"
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/sdpo-kit train configs/demo.yaml --output-dir runs/demo

unit: $(STAMP)
	$(BIN)/pytest -q tests

notebooks: $(STAMP)
	SDPO_KIT_SMOKE=1 MPLBACKEND=Agg $(BIN)/pytest -q --nbmake --nbmake-timeout=900 notebooks

test: $(STAMP)
	$(BIN)/ruff check sdpo_kit tests benchmarks
	$(BIN)/pytest -q tests
	SDPO_KIT_SMOKE=1 MPLBACKEND=Agg $(BIN)/pytest -q --nbmake --nbmake-timeout=900 notebooks

lint: $(STAMP)
	$(BIN)/ruff check sdpo_kit tests benchmarks

docs: $(STAMP)
	$(BIN)/pip install -q -c constraints.txt -e ".[docs]"
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: $(STAMP)  ## the README numbers: s/step scratch vs TRL, demo lift over seeds, notebook times
	$(BIN)/python benchmarks/bench_speed.py
	$(BIN)/python benchmarks/bench_demo.py
	$(BIN)/python benchmarks/bench_notebooks.py
	$(BIN)/python benchmarks/bench_lab.py

bench-clone: $(STAMP)  ## CI on a fresh clone of HEAD: install and `make test` timed apart
	$(BIN)/python benchmarks/bench_fresh_clone.py

clean:
	rm -rf $(VENV) runs site .cache
