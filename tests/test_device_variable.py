"""check(), the script runner and the pytest plugin write the user's device variable
(``device``, ``dev``...) in their fixes, as the panel does; a loop inside a script's
function gets its fix at ``file:line`` as the same loop at top level does."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cells import Notebook

import ipydevice

ROOT = Path(__file__).resolve().parent.parent


def _run_script(path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "ipydevice", "run", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_check_uses_the_device_variable():
    nb = Notebook()
    nb.run(
        textwrap.dedent(
            """
            import torch, torch.nn as nn
            dev = torch.device('meta')
            model = nn.Linear(4, 2).to(dev)
            xb = torch.randn(3, 4)
            """
        )
    )
    checkup = ipydevice.check(namespace=nb.ns)
    assert [f.code for f in checkup.fixes] == ["xb = xb.to(dev)"]
    assert checkup.fixes[0].apply(nb.ns).ok
    assert nb.ns["xb"].device.type == "meta"


LOOP = """
import torch
import torch.nn as nn
{prefix}
device = torch.device("meta")
model = nn.Linear(4, 2).to(device)
loader = [(torch.randn(3, 4), torch.randn(3, 2))]
for xb, yb in loader:
    out = model(xb)
    loss = (out - yb).sum()
{suffix}"""


@pytest.mark.slow
def test_a_loop_inside_main_gets_its_fix_at_file_line(tmp_path):
    body = textwrap.indent(LOOP.format(prefix="", suffix="").split("\n", 3)[3], "    ")
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nimport torch.nn as nn\n\n\ndef main():\n" + body + "\n\nmain()\n"
    )
    result = _run_script(script)
    assert result.returncode == 1
    lines = script.read_text().splitlines()
    failing = next(i for i, line in enumerate(lines, 1) if "out = model(xb)" in line)
    assert f"train.py:{failing}" in result.stderr
    assert "xb = xb.to(device)" in result.stderr and "yb = yb.to(device)" in result.stderr


def test_the_same_loop_at_top_level_gets_the_same_fix(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(LOOP.format(prefix="", suffix=""))
    result = _run_script(script)
    assert "xb = xb.to(device)" in result.stderr and "yb = yb.to(device)" in result.stderr


@pytest.mark.slow
def test_the_pytest_plugin_uses_the_test_device_variable(pytester):
    pytester.makepyfile(
        test_model=textwrap.dedent(
            """
            import torch
            import torch.nn as nn

            def test_forward():
                device = torch.device("meta")
                model = nn.Linear(4, 2).to(device)
                x = torch.randn(3, 4)
                model(x)
            """
        )
    )
    result = pytester.runpytest_subprocess("-p", "ipydevice")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "x = x.to(device)" in text
    assert "test_model.py:8" in text
