"""The code stays as ruff and mypy (pinned in the ``test`` extra) want it: lint, format, types."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PATHS = ["ipydevice", "tests", "benchmarks", "scripts"]


def ruff() -> list[str]:
    beside = Path(sys.executable).with_name("ruff")
    found = str(beside) if beside.exists() else shutil.which("ruff")
    if found is None:
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    return [found]


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff(command: list[str]) -> None:
    done = subprocess.run(
        [*ruff(), *command, *PATHS], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def mypy() -> list[str]:
    beside = Path(sys.executable).with_name("mypy")
    found = str(beside) if beside.exists() else shutil.which("mypy")
    if found is None:
        pytest.skip("mypy is not installed (pip install -e '.[test]')")
    return [found]


def test_mypy() -> None:
    # No arguments: the [tool.mypy] section of pyproject.toml names the files and settings.
    done = subprocess.run(mypy(), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
