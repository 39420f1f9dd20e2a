"""The command line: a script given without ``run``, and ``python -m ipydevice torchrun``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest
from test_scripts import MISMATCH, free_port, python


def test_a_script_without_run_gets_the_command_to_type(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('ran')\n")
    result = python("-m", "ipydevice", str(script), "--lr", "3e-4")
    assert result.returncode == 2 and "ran" not in result.stdout
    assert "invalid choice" not in result.stderr
    assert f"python -m ipydevice run {script} --lr 3e-4" in result.stderr
    # a name that is neither a command nor a file: the commands, and run's form
    other = python("-m", "ipydevice", "tarin")
    assert other.returncode == 2 and "invalid choice" not in other.stderr
    assert "demo, run, torchrun" in other.stderr and "python -m ipydevice run tarin" in other.stderr
    module = python("-m", "ipydevice", "-m", "mypackage.train")
    assert module.returncode == 2 and "python -m ipydevice run -m mypackage.train" in module.stderr
    # the commands themselves are untouched
    assert python("-m", "ipydevice", "run", str(script)).stdout == "ran\n"


def test_torchrun_bad_options_are_torchruns(tmp_path):
    result = python("-m", "ipydevice", "torchrun", "--no-python", "train.py")
    assert result.returncode == 2 and "--no-python" in result.stderr


@pytest.mark.slow
def test_torchrun_summary_is_titled_with_the_script(tmp_path):
    """Each rank that fails reports once; torchrun's root-cause summary carries the
    diagnosis and is titled with the script's name (never "ipydevice FAILED").

    Both ranks fail, but torchrun stops the others as soon as one has failed: on a
    busy machine the second rank can be stopped before it reaches its report."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(MISMATCH))
    result = python(
        "-m",
        "ipydevice",
        "torchrun",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        str(script),
        "--lr",
        "3e-4",
        timeout=180,
        cwd=os.fspath(tmp_path),
    )
    assert result.returncode != 0
    assert f"{script} FAILED" in result.stderr, result.stderr[-3000:]
    assert "ipydevice FAILED" not in result.stderr
    summary = result.stderr[result.stderr.index("Root Cause (first observed failure)") :]
    assert "ipydevice · device error" in summary and "`batch` is on cpu" in summary
    reports = [
        result.stderr.count(f"[rank {rank}/2 (local {rank})] ipydevice · device error")
        for rank in (0, 1)
    ]
    assert sum(reports) >= 1 and max(reports) == 1, reports


def test_help_lists_torchrun():
    done = subprocess.run(
        [sys.executable, "-m", "ipydevice", "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "torchrun" in done.stdout


@pytest.mark.parametrize("command", [[], ["run"], ["demo"]])
def test_help_is_plain_text(command):
    done = subprocess.run(
        [sys.executable, "-m", "ipydevice", *command, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "usage: python -m ipydevice" in done.stdout
    assert "``" not in done.stdout and ":func:" not in done.stdout and "`" not in done.stdout


def test_demo_shows_cells_a_user_would_type_and_names_them(capsys):
    pytest.importorskip("torch")
    from ipydevice.integrations.demo import main

    assert main() == 0
    out = capsys.readouterr().out
    assert "with mode" not in out and "FakeTensorMode(" not in out  # the fake GPU is not shown
    assert "FakeTensorMode" in out.split("━")[0]  # but said once, before the scenarios
    assert "ipython-input" not in out and "<" not in out.replace("<ApplyResult", "")
    assert out.count("    In [1]: ") == out.count("    In [2]: ") >= 5
    assert "where In [1], line 2 makes it" in out  # the classic's inputs
    assert re.search(r"change the code at In \[1\],\s+line \d+", out)  # a class in In [1]
