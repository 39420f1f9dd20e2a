"""Beyond the notebook: sys.excepthook, python -m ipydevice run, torchrun, pytest, demo."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import textwrap

import pytest

import ipydevice
from ipydevice import excepthook

MISMATCH = """
import torch
import torch.nn as nn
model = nn.Linear(4, 2).to("meta")
batch = torch.randn(3, 4)
out = model(batch)
"""


def python(*args: str, env: dict | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    environment = {**os.environ, "IPYDEVICE_DEBUG": "1", "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=environment
    )


def test_install_chains_and_uninstall_restores(monkeypatch):
    seen = []

    def previous(exc_type, exc, tb):
        seen.append(exc_type)

    monkeypatch.setattr(sys, "excepthook", previous)
    ipydevice.install()
    ipydevice.install()  # twice is harmless
    assert excepthook.installed()
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    sys.excepthook(
        RuntimeError,
        RuntimeError(
            "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
        ),
        None,
    )
    sys.excepthook(ZeroDivisionError, ZeroDivisionError("x"), None)
    assert seen == [RuntimeError, ZeroDivisionError]  # the previous hook still prints tracebacks
    assert stderr.getvalue().count("ipydevice · device error") == 1
    ipydevice.uninstall()
    assert sys.excepthook is previous


def test_run_prints_the_report_and_keeps_the_exit_status(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import sys\nprint('argv', sys.argv[1:])\n" + MISMATCH)
    result = python("-m", "ipydevice", "run", str(script), "--lr", "3")
    assert result.returncode == 1
    assert "argv ['--lr', '3']" in result.stdout
    assert 'File "' + str(script) in result.stderr and "runner.py" not in result.stderr
    assert "`batch` is on cpu, `model` is on meta" in result.stderr
    assert "train.py:8" in result.stderr  # the fix points at the failing line of the script
    assert "\x1b[" not in result.stderr  # no colour when NO_COLOR is set / not a TTY


@pytest.mark.parametrize(
    ("body", "status"),
    [("import sys\nsys.exit(3)\n", 3), ("x = 1\n", 0), ("raise SystemExit('bye')\n", 1)],
)
def test_run_exit_statuses(tmp_path, body, status):
    script = tmp_path / "s.py"
    script.write_text(body)
    assert python("-m", "ipydevice", "run", str(script)).returncode == status


def test_run_a_module(tmp_path):
    (tmp_path / "job.py").write_text(MISMATCH)
    result = python("-m", "ipydevice", "run", "-m", "job", env={"PYTHONPATH": str(tmp_path)})
    assert result.returncode == 1 and "`batch` is on cpu" in result.stderr


def test_colour_only_on_a_tty(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert excepthook._use_color(Tty())
    assert not excepthook._use_color(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not excepthook._use_color(Tty())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_torchrun_two_ranks_on_gloo(tmp_path):
    script = tmp_path / "ddp.py"
    script.write_text(
        textwrap.dedent("""
        import torch
        import torch.distributed as dist
        import torch.nn as nn
        import ipydevice
        ipydevice.install()
        dist.init_process_group("gloo")
        model = nn.Linear(4, 2).to("meta")
        batch = torch.randn(3, 4)
        out = model(batch)
    """)
    )
    result = python(
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        str(script),
        timeout=180,
    )
    assert result.returncode != 0
    lines = result.stderr.splitlines() + result.stdout.splitlines()
    for rank in (0, 1):
        label = f"[rank {rank}/2 (local {rank})]"
        # torchrun may prefix each line with its own "[rank0]:" tag as well.
        block = [i for i, line in enumerate(lines) if label in line]
        assert block, f"no report from rank {rank}:\n{result.stderr[-3000:]}"
        # One contiguous block per rank: the reports do not interleave.
        assert block == list(range(block[0], block[0] + len(block)))
        assert any("`batch` is on cpu" in lines[i] for i in block)


def test_pytest_plugin_adds_the_diagnosis(pytester):
    pytester.makepyfile(
        test_model=textwrap.dedent("""
        import torch
        import torch.nn as nn

        def test_forward():
            model = nn.Linear(4, 2).to("meta")
            x = torch.randn(3, 4)
            model(x)

        def test_other_failure():
            assert 1 == 2
    """)
    )
    result = pytester.runpytest_subprocess("-p", "ipydevice")
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    assert text.count("- ipydevice -") == 1  # one section, for the device error only
    assert "`x` is on cpu, `model` is on meta (in test_forward)" in text


def test_demo_runs_to_the_end():
    result = python("-m", "ipydevice", "demo", timeout=180)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count("ipydevice · device error") == 5
    assert "`inputs` is on cpu, `model` is on cuda:0" in result.stdout
    assert "`hidden` is on cuda:1, `head` is on cuda:0" in result.stdout


def test_terminal_ipython_text_follows_the_terminal(monkeypatch, nb):
    from ipydevice.ipython import panel_bundle

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    nb.run(
        "import torch\nimport torch.nn as nn\nmodel = nn.Linear(4, 2).to('meta')\nx = torch.randn(3, 4)\n"
    )
    d = ipydevice.diagnose(nb.fails("out = model(x)\n"), namespace=nb.ns)
    monkeypatch.setattr(sys, "stdout", Tty())
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("COLUMNS", "72")
    coloured = panel_bundle(d, terminal=True)["text/plain"]
    assert "\x1b[1m" in coloured
    prose = [
        line
        for line in coloured.splitlines()
        if "\x1b" not in line and not line.startswith(" " * 9)
    ]
    assert max(len(line) for line in prose) <= 72  # code lines stay whole, to be copied
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" not in panel_bundle(d, terminal=True)["text/plain"]
    assert "\x1b[" not in panel_bundle(d)["text/plain"]  # notebooks: never


def test_under_torchrun_a_bare_cuda_target_is_the_local_rank(monkeypatch):
    message = "Expected all tensors to be on the same device, but found at least two devices, cuda and cpu!"
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert ipydevice.diagnose(RuntimeError(message)).target == "cuda:1"
    monkeypatch.delenv("LOCAL_RANK")
    assert ipydevice.diagnose(RuntimeError(message)).target == "cuda"
