#!/usr/bin/env bash
# The kernel tests on Google Colab's versions: a venv with exactly Colab's IPython,
# ipykernel, ipywidgets, anywidget and traitlets (and torch's CPU build), ipydevice
# installed into it as a user would, a check that the install changed none of
# those versions, then the tests that drive a real kernel through the protocol
# (header before the traceback, panel after, Apply through the buttons' comm,
# %devices): tests/test_kernel.py and tests/test_kernel_protocol.py; and the tests of
# the in-process shell, watch mode and the buttons (test_ipython, test_watch,
# test_widget), which see IPython 7's differences (a cell's code is named
# "<cell line: 0>", %debug is given a traceback).
#
# The pins are the lower bounds in pyproject.toml (tests/test_pins.py checks it):
# the oldest versions ipydevice supports are the ones Colab ships.
#
# Usage: scripts/test-colab-pins.sh [VENV]     (default: .venv-colab next to this repo)
# PYTHON chooses the interpreter (default python3); TORCH the torch requirement.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.venv-colab}"
# Absolute: the tests run from a temporary folder, where a relative path would not resolve.
VENV="$(realpath -m "$VENV")"
PYTHON="${PYTHON:-python3}"
TORCH="${TORCH:-torch==2.13.0}"

# Colab's versions (the same as pyproject.toml's lower bounds).
PINS=(
    "ipython==7.34.0"
    "ipykernel==6.17.1"
    "ipywidgets==7.7.1"
    "anywidget==0.9.21"
    "traitlets==5.7.1"
)

echo "test-colab-pins: venv $VENV with ${PINS[*]}"
"$PYTHON" -m venv --clear "$VENV"
PY="$VENV/bin/python"
"$PY" -m pip install -q --upgrade pip
"$PY" -m pip install -q "$TORCH" "${PINS[@]}"
# What the kernel tests need beside the pins; pip keeps the pins (its default
# strategy upgrades nothing that already satisfies a requirement).
"$PY" -m pip install -q "${PINS[@]}" "pytest>=8" "hypothesis>=6.100" "jupyter_client>=6.1.12"

# ipydevice itself, as a user installs it (not editable), keeping the pins.
"$PY" -m pip install -q "${PINS[@]}" .

# The pins are still there: installing ipydevice upgraded nothing.
"$PY" - "${PINS[@]}" <<'PYEOF'
import sys
from importlib.metadata import version

changed = []
for pin in sys.argv[1:]:
    name, wanted = pin.split("==")
    found = version(name)
    print(f"  {name} {found}")
    if found != wanted:
        changed.append(f"{name} {wanted} -> {found}")
if changed:
    sys.exit("test-colab-pins: installing ipydevice changed " + ", ".join(changed))
PYEOF

# The tests run from a folder without the source tree, against the installed package.
RUN="$(mktemp -d)"
trap 'rm -rf "$RUN"' EXIT
cp -r tests pyproject.toml "$RUN"/
cd "$RUN"
"$PY" -c "import ipydevice, sys; assert 'site-packages' in ipydevice.__file__, ipydevice.__file__"
IPYDEVICE_DEBUG=1 HYPOTHESIS_PROFILE=ci "$PY" -m pytest -q -p no:cacheprovider \
    tests/test_kernel.py tests/test_kernel_protocol.py \
    tests/test_ipython.py tests/test_watch.py tests/test_widget.py
