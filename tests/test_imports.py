"""``import ipydevice`` is cheap, and a message-only diagnosis needs no heavy import.

Each check runs in a fresh interpreter (``sys.executable -c``) so that what this
test process already imported cannot hide an import. An import hook in the child
records, for every heavy module imported, the ipydevice file and line that
caused it, so a failure names the culprit module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Modules that cost seconds to import (torch) or are optional at runtime.
HEAVY = ("torch", "IPython", "pandas", "ipywidgets", "numpy")

# Runs first in the child: a meta-path finder that notes who imports a heavy
# module (the innermost ipydevice frame on the stack) and lets the import go on.
HOOK = """
import json, sys, traceback

HEAVY = set(json.loads(sys.argv[1]))
CULPRITS = {}

class Recorder:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in HEAVY and top not in CULPRITS:
            frames = [f for f in traceback.extract_stack() if "/ipydevice/" in f.filename.replace("\\\\", "/")]
            where = f"{frames[-1].filename}:{frames[-1].lineno} ({frames[-1].line})" if frames else "outside ipydevice"
            CULPRITS[top] = where
        return None

sys.meta_path.insert(0, Recorder())

def report():
    print("RESULT " + json.dumps({"loaded": sorted(m for m in HEAVY if m in sys.modules), "culprits": CULPRITS}))
"""


def run_child(body: str) -> dict[str, object]:
    """Runs ``body`` after the hook; returns what it reported."""
    code = HOOK + textwrap.dedent(body) + "\nreport()\n"
    env = {**os.environ, "IPYDEVICE_DEBUG": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(HEAVY)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def assert_light(result: dict[str, object]) -> None:
    loaded = result["loaded"]
    assert not loaded, f"heavy modules imported: {loaded}; by: {result['culprits']}"


def test_import_is_light() -> None:
    result = run_child(
        """
        import ipydevice
        import ipydevice.diagnosis.recognise, ipydevice.model, ipydevice.settings
        ipydevice.Diagnosis, ipydevice.Finding, ipydevice.Fix  # lazy attributes
        ipydevice.configure(max_rows=20)
        """
    )
    assert_light(result)


MESSAGES = {
    "two_devices": (
        "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
        ("cuda:0", "cpu"),
    ),
    "argument": (
        "Expected all tensors to be on the same device, but got mat1 is on cpu, different from "
        "other tensors on cuda:0 (when checking argument in method wrapper_CUDA_addmm)",
        ("cpu", "cuda:0"),
    ),
}


@pytest.mark.parametrize(("message", "devices"), list(MESSAGES.values()), ids=list(MESSAGES))
def test_message_only_diagnosis_needs_no_heavy_import(
    message: str, devices: tuple[str, ...]
) -> None:
    result = run_child(
        f"""
        import ipydevice
        d = ipydevice.diagnose(RuntimeError({message!r}))
        assert d.is_device_error and d.family == "op_mismatch", d
        assert d.devices == {devices!r}, d.devices
        assert not d.culprits and not d.fixes and not d.records and not d.frames, d
        text, html = str(d), d._repr_html_()
        repr(d), d.headline, d.to_dict()
        assert "ipydevice" in text and "ipydevice-panel" in html, (text, html)
        """
    )
    assert_light(result)


def test_message_only_diagnosis_facts() -> None:
    # The same diagnosis in this process, for readable assertions.
    import ipydevice

    message, devices = MESSAGES["two_devices"]
    d = ipydevice.diagnose(RuntimeError(message))
    assert d.is_device_error and d.family == "op_mismatch"
    assert d.devices == devices
    assert not d.culprits and not d.fixes and not d.records
    assert d.frames == ()


def test_hook_names_the_importer() -> None:
    # The recorder itself works: a heavy import through ipydevice is attributed to it.
    result = run_child(
        """
        import ipydevice
        ipydevice.diagnose(RuntimeError("boom")).table()  # the table needs pandas
        """
    )
    assert "pandas" in result["loaded"]
    assert "ipydevice" in str(result["culprits"]["pandas"]), result
