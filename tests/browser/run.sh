#!/usr/bin/env bash
# Runs the browser tests (JupyterLab 4 + Notebook 7 in headless Chromium).
#
#   tests/browser/run.sh            install what is missing, run, screenshots in artifacts/browser/
#   tests/browser/run.sh --docs     the same, then copy the screenshots the README shows to docs/
#   tests/browser/run.sh --no-install   skip scripts/install-browser.sh
#
# Extra arguments go to pytest. Needs .venv (make install).
set -euo pipefail
cd "$(dirname "$0")/../.."
docs=0 install=1 args=()
for a in "$@"; do
    case "$a" in
        --docs) docs=1 ;;
        --no-install) install=0 ;;
        *) args+=("$a") ;;
    esac
done
[ "$install" = 1 ] && scripts/install-browser.sh
export IPYDEVICE_SCREENSHOTS="${IPYDEVICE_SCREENSHOTS:-$PWD/artifacts/browser}"
rm -f "$IPYDEVICE_SCREENSHOTS"/*.png
IPYDEVICE_DEBUG=1 .venv/bin/python -m pytest -m browser tests/test_browser.py -p no:cacheprovider \
    --durations=5 "${args[@]+"${args[@]}"}"
if [ "$docs" = 1 ]; then
    mkdir -p docs
    for shot in first-screen panel-light panel-dark panel-minimal; do cp "$IPYDEVICE_SCREENSHOTS/$shot.png" docs/; done
    echo "run.sh: docs/first-screen.png, panel-light.png, panel-dark.png and panel-minimal.png updated"
fi
