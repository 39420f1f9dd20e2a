# ipydevice developer commands. `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
TORCH ?= torch==2.13.0
TORCH_INDEX ?=
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo demo-prepare tour test test-slow install browser docs-screenshots bench clean

# The venv, with torch first and pinned (a venv whose torch install failed is removed,
# so the next run starts again). On Linux, PyPI's torch is the CUDA build: set
# TORCH_INDEX=https://download.pytorch.org/whl/cpu for the CPU-only one.
$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH)" \
		|| { rm -rf $(VENV); exit 1; }

# What the demo needs: ipydevice and JupyterLab (the `notebook` extra), nothing more.
$(VENV)/.demo-installed: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e ".[notebook]"
	touch $@

# What the tests need: the `test`, `notebook`, `browser` and `realworld` extras, and
# the developer tools (ruff, mypy, build, twine), the `dev` dependency group (pip
# 25.1 or later reads it), not part of the published extras.
$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e ".[test,notebook,browser,realworld]" --group dev
	touch $@

install: $(VENV)/.installed

# The main job: JupyterLab on the quickstart notebook (no GPU needed). It runs on copies
# of the notebooks in $(DEMO) (git-ignored), made when missing or older than the
# repository's, so JupyterLab's autosave and your own notebooks never touch the tracked
# ones. As root (Docker, most cloud machines) JupyterLab needs --allow-root; JUPYTER_ARGS
# adds options (e.g. JUPYTER_ARGS="--no-browser --port 8899").
JUPYTER_ARGS ?=
DEMO ?= .demo
DEMO_COPIES := $(patsubst notebooks/%,$(DEMO)/%,$(wildcard notebooks/*.ipynb))

$(DEMO)/%.ipynb: notebooks/%.ipynb
	@mkdir -p $(DEMO)
	cp $< $@

demo-prepare: $(VENV)/.demo-installed $(DEMO_COPIES)

demo: demo-prepare
	cd $(DEMO) && $(abspath $(VENV))/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) $(JUPYTER_ARGS) 01-quickstart.ipynb

# The same scenarios as a terminal tour.
tour: $(VENV)/.demo-installed
	$(PY) -m ipydevice demo

# Unit, IPython, kernel, notebook and browser tests, all but those marked slow (each
# over about ten seconds on two cores: `make test-slow`; CI runs both). Chromium comes
# from apt when missing (the browser tests skip, with a reason, if it cannot).
test: $(VENV)/.installed
	scripts/install-browser.sh $(VENV)
	# Two processes for everything but the browser tests (they share one JupyterLab).
	IPYDEVICE_DEBUG=1 $(PY) -m pytest -n 2 -m "not browser and not slow" --durations=25
	IPYDEVICE_DEBUG=1 $(PY) -m pytest -m browser --durations=25

# The slow tests: launchers, pytest and IPython in processes of their own, the timed
# shell sessions of the corpora.
test-slow: $(VENV)/.installed
	IPYDEVICE_DEBUG=1 $(PY) -m pytest -n 2 -m "slow and not browser" --durations=25

browser: $(VENV)/.installed
	scripts/install-browser.sh $(VENV)
	tests/browser/run.sh --no-install

docs-screenshots: $(VENV)/.installed
	scripts/install-browser.sh $(VENV)
	tests/browser/run.sh --no-install --docs

# Load, idle, error-path, %devices, memory, session, kernel-path and scaling benchmarks (about 6 minutes on 2 cores): the table,
# benchmarks/results.json and the figures of benchmarks/RESULTS.md.
bench: $(VENV)/.installed
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis artifacts $(DEMO)
