#!/usr/bin/env bash
# Installs what the browser tests (tests/test_browser.py) need, idempotently:
#   * Debian's Chromium (+ a font), when /usr/bin/chromium is missing and apt is usable;
#   * Playwright for Python, JupyterLab 4 and Notebook 7 into the venv.
# Never runs `playwright install`: that downloads Playwright's own browser build,
# which is not reachable here; the tests drive /usr/bin/chromium instead.
#
# Usage: scripts/install-browser.sh [VENV]     (default: .venv next to this repo)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.venv}"
PY="$VENV/bin/python"

if [ ! -x "$PY" ]; then
    echo "install-browser: no virtual environment at $VENV (run 'make install' first)" >&2
    exit 1
fi

if [ -x /usr/bin/chromium ]; then
    echo "install-browser: /usr/bin/chromium present ($(/usr/bin/chromium --version 2>/dev/null || echo '?'))"
else
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            SUDO="sudo -n"
        else
            SUDO="unusable"
        fi
    fi
    if command -v apt-get >/dev/null 2>&1 && [ "$SUDO" != "unusable" ]; then
        echo "install-browser: installing chromium with apt-get"
        export DEBIAN_FRONTEND=noninteractive
        $SUDO apt-get update -qq
        $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
    else
        echo "install-browser: /usr/bin/chromium missing and apt-get unusable; browser tests will skip" >&2
    fi
fi

need=()
"$PY" -c "import playwright" 2>/dev/null || need+=("playwright>=1.45")
"$PY" -c "import jupyterlab" 2>/dev/null || need+=("jupyterlab>=4.2")
"$PY" -c "import notebook" 2>/dev/null || need+=("notebook>=7")
if [ "${#need[@]}" -gt 0 ]; then
    echo "install-browser: pip install ${need[*]}"
    "$PY" -m pip install -q "${need[@]}"
else
    echo "install-browser: playwright, jupyterlab and notebook already installed"
fi
