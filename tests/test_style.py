"""The code stays as ruff and mypy (pinned in the ``dev`` dependency group) want it: lint, format, types."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PATHS = ["ipydevice", "tests", "benchmarks", "scripts"]


def tool(name: str) -> list[str]:
    """The pinned tool beside this interpreter (the venv's), else on PATH, else skip."""
    beside = Path(sys.executable).with_name(name)
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install --group dev)")
    return [found]


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff(command: list[str]) -> None:
    done = subprocess.run(
        [*tool("ruff"), *command, *PATHS], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_mypy() -> None:
    # No arguments: the [tool.mypy] section of pyproject.toml names the files and settings.
    done = subprocess.run(tool("mypy"), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
