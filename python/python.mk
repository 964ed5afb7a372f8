# The Python package's targets, included by the top Makefile (which defines
# BUILD, TEST_MODULE and `all`).
# The Python package (python/: adag._adag, a CPython extension) built against
# this build folder into $(BUILD)/python, and its tests (python/tests, pytest)
# with the test actor module. PY: the first python3 that has numpy, pytest,
# setuptools and its own headers (setup.sh installs Debian's python3-dev,
# python3-numpy, python3-pytest, python3-setuptools for /usr/bin/python3,
# which another python3 earlier on PATH, e.g. pyenv's, does not see).
PY ?= $(shell for p in python3 /usr/bin/python3; do \
    $$p -c 'import numpy, pytest, setuptools, sysconfig, os, sys; \
            sys.exit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))' \
        2>/dev/null && { echo $$p; exit 0; }; done)
# The package built for BENCH_PY (the first python3 with Ray, numpy and
# setuptools: pip install ray) into $(BUILD)/python-bench, then
# python/bench/vs_ray.py: the same Python actors with adag and with Ray
# Compiled Graphs in one run (BENCH_ARGS=--quick for a short one).
BENCH_PY ?= $(shell for p in python3 /usr/bin/python3; do \
    $$p -c 'import ray, numpy, setuptools' 2>/dev/null && { echo $$p; exit 0; }; done)
PY_BENCH_BUILD := $(abspath $(BUILD))/python-bench
bench-python: all
	@if [ -z "$(BENCH_PY)" ]; then \
	    echo "bench-python: skipped: no python3 with ray, numpy and setuptools (pip install ray numpy)"; \
	    exit 0; \
	fi; \
	cd python && ADAG_BUILD_DIR=$(abspath $(BUILD)) $(BENCH_PY) setup.py -q build_py --build-lib $(PY_BENCH_BUILD) \
	    build_ext --build-lib $(PY_BENCH_BUILD) --build-temp $(PY_BENCH_BUILD)-tmp && cd .. && \
	PYTHONPATH=$(PY_BENCH_BUILD) $(BENCH_PY) python/bench/vs_ray.py $(BENCH_ARGS)

PY_BUILD := $(abspath $(BUILD))/python
test-python: all
	@if [ -z "$(PY)" ]; then \
	    echo "test-python: skipped: no python3 with numpy, pytest, setuptools and Python.h (./setup.sh installs them)"; \
	    exit 0; \
	fi; \
	cd python && ADAG_BUILD_DIR=$(abspath $(BUILD)) $(PY) setup.py -q build_py --build-lib $(PY_BUILD) \
	    build_ext --build-lib $(PY_BUILD) --build-temp $(PY_BUILD)-tmp && cd .. && \
	PYTHONPATH=$(PY_BUILD) ADAG_TEST_MODULE=$(abspath $(TEST_MODULE)) \
	    $(PY) -m pytest -p no:cacheprovider -q python/tests $(PYTEST_ARGS)
