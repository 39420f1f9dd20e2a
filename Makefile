# ipydevice developer commands. `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
TORCH ?= torch==2.13.0
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test install clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first and pinned: a bare `torch` requirement would pull the CUDA build.
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[test]"
	touch $@

install: $(VENV)/.installed

demo: $(VENV)/.installed
	$(PY) -m ipydevice demo

test: $(VENV)/.installed
	IPYDEVICE_DEBUG=1 $(PY) -m pytest

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
