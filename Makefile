# torch2jax_ops — every set-up step lives here, so a fresh clone needs only
# `make parity` or `make test`.
#
# Overridable: make TORCH=2.13.0 PYTHON=python3.11 parity
PYTHON ?= python3
TORCH  ?= 2.13.0
VENV   ?= .venv
REPORT ?= parity_report
PY      = $(VENV)/bin/python
PIP     = $(PY) -m pip
STAMP   = $(VENV)/.installed-$(TORCH)

.PHONY: all setup kernels parity parity-quick test test-fast test-newest-jax lint bench bench-gpu clean pyg-examples

all: test

setup: $(STAMP) kernels

# The CPU kernel of the message-passing sum (torch2jax_ops/geometric/_core/_kernels/*.cc), an
# XLA FFI handler compiled with the system's C++ compiler against jaxlib's headers into the
# per-user cache (~/.cache/torch2jax_ops/kernels). A no-op when the library for this source
# and jaxlib is there (its name carries a fingerprint). Without a compiler: a warning, and
# the code keeps its XLA forms (same values, slower); set-up goes on.
kernels: $(STAMP)
	$(PY) -m torch2jax_ops build-kernels --optional

# Order matters: the CPU build of torch first (pinned, so nothing pulls the
# multi-GB CUDA build), then torch_scatter and torch_sparse (PyG samples
# heterogeneous neighbourhoods with it; SparseTensor inputs), which have only
# source releases and must be compiled against the torch already installed.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip setuptools wheel
	$(PIP) install -q "torch==$(TORCH)"
	$(PIP) install -q jax jaxlib numpy
	$(PY) -c "import torch_scatter" 2>/dev/null || \
	  $(PIP) install --no-build-isolation torch-scatter
	$(PY) -c "import torch_sparse" 2>/dev/null || \
	  $(PIP) install --no-build-isolation torch-sparse || \
	  echo "warning: torch_sparse did not build (a C++ compiler?): its SparseTensor cases skip"
	$(PIP) install -q -e ".[parity]"
	$(PY) -c "import torch, torch_scatter, torch_geometric, jax; print('torch', torch.__version__, '| torch_scatter', torch_scatter.__version__, '| torch_geometric', torch_geometric.__version__, '| jax', jax.__version__)"
	rm -f $(VENV)/.installed-*
	touch $@

parity: setup
	$(PY) -m torch2jax_ops parity --report $(REPORT)

# pytest-xdist: one worker per core (the suite is CPU-bound; two workers on the 2-core CI
# machine). XDIST= runs it in one process.
XDIST ?= -n auto
# The suite compiles thousands of small XLA programs and runs each once: XLA:CPU's backend
# optimisation costs more than it saves there (about a third of the suite's time). Tests only;
# benchmarks keep JAX's defaults. TEST_XLA= runs the tests with the defaults too.
TEST_XLA ?= --xla_backend_optimization_level=0
TEST_ENV = XLA_FLAGS="$(TEST_XLA) $$XLA_FLAGS"

test: setup
	$(TEST_ENV) $(PY) -m pytest -q -p no:cacheprovider $(XDIST) tests parity_tests

# The fast tier while editing: unit tests, one parity case per op and dtype family, the first
# variant of other parametrized tests, and the behaviour tests not marked slow
# (testkit/tiers.py): 1826 tests in 4 min 42 s on the 2-core machine (2026-11-25).
# `make test` stays the full suite.
test-fast: setup
	$(TEST_ENV) $(PY) -m pytest -q -p no:cacheprovider $(XDIST) -m "not slow" tests parity_tests

# The newest JAX: the torch-free tests/ in a venv of the newest Python 3.12+ on the machine
# (.ci/newest_python: pyenv's versions, else python3.12+ on PATH), where pip gives the newest
# jax (0.12.0.1 on 2026-11-26; on Python 3.11 pip stops at 0.10.2, which `make test` runs).
# Where there is no Python 3.12+ it says so and is skipped.
NEWEST_VENV ?= .venv-newest-jax
NEWEST_TESTS ?= tests
test-newest-jax:
	@py=$$(.ci/newest_python 2>/tmp/newest_python.$$$$) || { \
	  echo "test-newest-jax: skipped: $$(cat /tmp/newest_python.$$$$)"; exit 0; }; \
	test -x $(NEWEST_VENV)/bin/python || $$py -m venv $(NEWEST_VENV) || exit 1; \
	$(NEWEST_VENV)/bin/python -m pip install -q --upgrade pip jax jaxlib numpy equinox \
	  pytest pytest-xdist hypothesis || exit 1; \
	$(NEWEST_VENV)/bin/python -c "import sys, jax; print('newest-JAX lane: Python', \
	  sys.version.split()[0], '| jax', jax.__version__, '| jaxlib', jax.lib.__version__)"; \
	$(TEST_ENV) $(NEWEST_VENV)/bin/python -m pytest -q -p no:cacheprovider $(XDIST) $(NEWEST_TESTS)

# ruff (pyflakes, pycodestyle, import order, bugbear, pyupgrade) and mypy on the package
lint: setup
	$(PY) -m ruff check torch2jax_ops
	$(PY) -m mypy

parity-quick: setup
	$(PY) -m torch2jax_ops parity --quick

bench: setup
	$(PY) benchmarks/run.py --out benchmarks/RESULTS.md

# On a CUDA machine (migration_guide/gpu.md): its own Python with CUDA builds of jaxlib,
# torch and torch_scatter; writes the GPU section of benchmarks/RESULTS.md.
GPU_PY ?= python3
bench-gpu:
	rm -f benchmarks/gpu_rows.jsonl
	XLA_PYTHON_CLIENT_PREALLOCATE=false $(GPU_PY) benchmarks/gpu.py --out benchmarks/RESULTS.md \
	  --log benchmarks/gpu_rows.jsonl
	XLA_PYTHON_CLIENT_PREALLOCATE=false $(GPU_PY) benchmarks/bench_loader.py

clean:
	rm -rf $(VENV) $(NEWEST_VENV) $(REPORT) .pytest_cache .hypothesis
	rm -f torch2jax_ops/torch_scatter/_kernels/*.so  # where older versions built it

# PyG's own example models through from_torch + compare_modules (benchmarks/PYG_EXAMPLES.md).
# Needs a PyG source checkout: make pyg-examples PYG_SRC=/path/to/pytorch_geometric
# Not part of CI. EXAMPLES= reruns only those examples; JOBS= runs several at once.
PYG_SRC ?=
EXAMPLES ?=
JOBS ?= 1
pyg-examples:
	@if [ -z "$(PYG_SRC)" ] || [ ! -d "$(PYG_SRC)/examples" ]; then \
	  echo "pyg-examples needs PYG_SRC, a clone of pyg-team/pytorch_geometric:"; \
	  echo "  git clone --depth 1 https://github.com/pyg-team/pytorch_geometric /tmp/pyg"; \
	  echo "  make pyg-examples PYG_SRC=/tmp/pyg"; exit 2; fi
	PYG_SRC="$(PYG_SRC)" $(PY) benchmarks/pyg_examples.py --jobs $(JOBS) $(EXAMPLES)
