# ipydevice developer commands. `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
TORCH ?= torch==2.13.0
TORCH_INDEX ?=
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo tour test install browser docs-screenshots bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first and pinned. On Linux, PyPI's torch is the CUDA build: set
	# TORCH_INDEX=https://download.pytorch.org/whl/cpu for the CPU-only one.
	$(PY) -m pip install -q $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH)"
	# The developer tools (ruff, mypy, build, twine) are the `dev` dependency group
	# (pip 25.1 or later reads it), not part of the published extras.
	$(PY) -m pip install -q -e ".[test,notebook,browser,realworld]" --group dev
	touch $@

install: $(VENV)/.installed

# The main job: JupyterLab on the quickstart notebook (no GPU needed). As root (Docker,
# most cloud machines) JupyterLab needs --allow-root; JUPYTER_ARGS adds options
# (e.g. JUPYTER_ARGS="--no-browser --port 8899").
JUPYTER_ARGS ?=
demo: $(VENV)/.installed
	$(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) $(JUPYTER_ARGS) notebooks/01-quickstart.ipynb

# The same scenarios as a terminal tour.
tour: $(VENV)/.installed
	$(PY) -m ipydevice demo

# Everything: unit, IPython, kernel, notebook and browser tests. Chromium comes
# from apt when missing (the browser tests skip, with a reason, if it cannot).
test: $(VENV)/.installed
	scripts/install-browser.sh $(VENV)
	# Two processes for everything but the browser tests (they share one JupyterLab).
	IPYDEVICE_DEBUG=1 $(PY) -m pytest -n 2 -m "not browser"
	IPYDEVICE_DEBUG=1 $(PY) -m pytest -m browser

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
	rm -rf $(VENV) .pytest_cache .hypothesis artifacts
