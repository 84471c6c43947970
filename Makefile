# Two commands set everything up on a fresh machine: `make demo` and `make test`.
# the venv's base interpreter: the first of these that every user can run (tools/make-venv)
PYTHON ?= python3 /usr/bin/python3 /usr/local/bin/python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
JOBS   ?= 2

.PHONY: setup system-packages venv demo test test-fast test-stress test-template lint typecheck format bench clean

# The grader's own bytecode is compiled here (cheap when up to date): a shell with
# PYTHONDONTWRITEBYTECODE set would otherwise compile ~50 modules from source in every
# `autograder grade` process, about 0.1 s before the kernel could start.
setup: system-packages venv
	@$(PY) -m compileall -q autograder assignments/*/grading >/dev/null \
	  || echo "note: could not write the grader's bytecode here; each process compiles it in memory"

# Debian packages the jail needs (bubblewrap, setpriv from util-linux), shellcheck for the
# Gradescope scripts' tests, chromium for the summary page's browser test, and for the simulated
# Gradescope container (`autograder gradescope simulate`, tests/gradescope/): libseccomp's Python
# bindings for Debian's python3 (Docker's seccomp profile) and mmdebstrap (a fresh Debian root
# file system for setup.sh), and python3-venv: the venv is made from Debian's python3 where the
# default one lies in a private home (tools/make-venv). Installed only where missing, and only
# where apt may be used.
system-packages:
	@missing=""; \
	command -v bwrap >/dev/null 2>&1 || missing="$$missing bubblewrap"; \
	command -v setpriv >/dev/null 2>&1 || missing="$$missing util-linux"; \
	command -v shellcheck >/dev/null 2>&1 || missing="$$missing shellcheck"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	/usr/bin/python3 -c "import seccomp" >/dev/null 2>&1 || missing="$$missing python3-seccomp"; \
	/usr/bin/python3 -c "import ensurepip, venv" >/dev/null 2>&1 || missing="$$missing python3-venv"; \
	command -v mmdebstrap >/dev/null 2>&1 || missing="$$missing mmdebstrap"; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing system packages:$$missing"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null) \
	    || echo "warning: could not install$$missing; the jail falls back to the layers it finds"; \
	else \
	  echo "note: not root or no apt: skipping system packages ($$missing); install them for the full jail"; \
	fi

# The venv, made from a Python every user can run (the fallback jail's sandbox uids run the kernel
# with it, without a mount namespace to show them a private one); made again when its base was
# another, packages installed when pyproject.toml or constraints.txt changed.
venv:
	@sh tools/make-venv $(VENV) $(PYTHON)

# the lesson 07 examples; `autograder demo` without --assignment grades every assignment's
demo: setup
	$(VENV)/bin/autograder demo --assignment 07-quantization

# xdist: each test goes to whichever worker is free (a module whose module-scoped fixture starts a
# kernel, a container or Dask stays on one worker: tests/needs.py); the 20 slowest tests are listed
DIST := --dist loadgroup
test: setup
	$(PY) -m pytest -n $(JOBS) $(DIST) -q --durations=20

# ruff's rules and format (pyproject.toml's [tool.ruff]); CI runs `lint` before the tests
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# the loop while you work: every test that needs no root, simulated container, Dask, real kernel and
# is not slow (markers in pyproject.toml, set by tests/needs.py and tests/conftest.py); a test here
# that starts a jail, a kernel or a template anyway fails (AUTOGRADER_TEST_NO_JAIL: tests/needs.py)
FAST_TESTS := not (root or container or dask or kernel or slow)
test-fast: setup
	AUTOGRADER_TEST_NO_JAIL=1 $(PY) -m pytest -n $(JOBS) $(DIST) -q -m "$(FAST_TESTS)"

# the suite on an overloaded machine: 4 workers on the cores, beside one CPU hog per core (bounded,
# stopped when pytest ends); tests asserting which limit fires must still pass (tests/stress.py)
test-stress: setup
	$(PY) tests/stress.py -- -n 4 $(DIST) -q

# the adversarial suite's runs with every kernel a child of the kernel template (SECURITY.md, "The
# kernel template"): `make test` runs them too, beside the fresh-kernel and fallback runs of each
# test (tests/adversarial/conftest.py); each pytest worker keeps one template per slot it grades in
test-template: setup
	$(PY) -m pytest -n $(JOBS) $(DIST) -q -m kernel_template tests/adversarial

bench: setup
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) build dist *.egg-info demo-out

# the type checker over the package ([tool.mypy] in pyproject.toml); CI runs it beside `lint`
typecheck: setup
	$(VENV)/bin/mypy
