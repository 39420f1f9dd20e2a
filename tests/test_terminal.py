"""The panel in terminal IPython: readable plain text, no HTML.

``ipython --ext ipydevice -c ...`` and ``ipython_config.py`` auto-loading run in
a subprocess with a fresh ``IPYTHONDIR``; one test drives an interactive session
under tmux (skipped without tmux). ``display(bundle, raw=True)`` in a
``TerminalInteractiveShell`` prints the bundle's ``text/plain``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from mentions import mentions_ipydevice

pytestmark = pytest.mark.slow

SETUP = "import torch; model = torch.nn.Linear(4, 2).to('meta'); x = torch.randn(3, 4)"
MISMATCH = SETUP + "; model(x)"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def ipython_command() -> list[str]:
    script = Path(sys.executable).with_name("ipython")
    return [str(script)] if script.exists() else [sys.executable, "-m", "IPython"]


def run_ipython(ipython_dir: Path, *args: str) -> tuple[int, str]:
    """Runs terminal IPython; returns its exit code and stdout+stderr without colours."""
    env = {**os.environ, "IPYTHONDIR": str(ipython_dir)}
    done = subprocess.run(
        [*ipython_command(), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    return done.returncode, ANSI.sub("", done.stdout + done.stderr)


def assert_text_panel(output: str) -> None:
    traceback = output.index(
        "RuntimeError: Tensor on device meta is not on the expected device cpu!"
    )
    panel = output.index("ipydevice · device error")
    assert traceback < panel
    assert "`x` is on cpu" in output[panel:]
    assert "x = x.to('meta')" in output[panel:]
    assert "<div" not in output and "<table" not in output and "&lt;" not in output


@pytest.mark.slow
def test_ext_flag_and_a_failing_command(tmp_path: Path) -> None:
    code, output = run_ipython(tmp_path, "--ext", "ipydevice", "-c", MISMATCH)
    assert code == 1  # as without ipydevice
    assert_text_panel(output)
    assert "ipydevice:" not in output  # no failure line


@pytest.mark.parametrize(("scheme", "coloured"), [("NoColor", False), ("Linux", True)])
@pytest.mark.slow
def test_the_report_follows_ipythons_colour_scheme(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scheme: str, coloured: bool
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")  # colour even though stdout is a pipe...
    monkeypatch.delenv("NO_COLOR", raising=False)
    env = {**os.environ, "IPYTHONDIR": str(tmp_path)}
    done = subprocess.run(
        [*ipython_command(), f"--colors={scheme}", "--ext", "ipydevice", "-c", MISMATCH],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    report = done.stdout[done.stdout.index("ipydevice") :]
    assert bool(ANSI.search(report)) is coloured  # ...but never under %colors NoColor


@pytest.mark.slow
def test_autoload_from_ipython_config_and_a_failing_script(tmp_path: Path) -> None:
    profile = tmp_path / "profile_default"
    profile.mkdir()
    (profile / "ipython_config.py").write_text('c.InteractiveShellApp.extensions = ["ipydevice"]\n')
    script = tmp_path / "train.py"
    script.write_text(SETUP.replace("; ", "\n") + "\nmodel(x)\n")
    _, output = run_ipython(tmp_path, "-c", f"%run {script}")
    assert_text_panel(output)
    other = tmp_path / "other.py"
    other.write_text("1 / 0\n")
    _, output = run_ipython(tmp_path, "-c", f"%run {other}")
    assert "ZeroDivisionError" in output
    assert not mentions_ipydevice(output)


class Tmux:
    """One detached tmux session running interactive IPython, named uniquely."""

    def __init__(self, ipython_dir: Path) -> None:
        self.name = f"ipydevice-test-{uuid.uuid4().hex[:8]}"
        argv = [
            "env",
            f"IPYTHONDIR={ipython_dir}",
            *ipython_command(),
            "--ext",
            "ipydevice",
            "--no-banner",
        ]
        command = " ".join(shlex.quote(arg) for arg in argv)
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", self.name, "-x", "160", "-y", "60", command],
            check=True,
        )

    def send(self, line: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, "-l", line], check=True)
        subprocess.run(["tmux", "send-keys", "-t", self.name, "Enter"], check=True)

    def screen(self) -> str:
        done = subprocess.run(
            ["tmux", "capture-pane", "-p", "-J", "-S", "-2000", "-t", self.name],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout

    def wait_for(self, text: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{text!r} did not appear:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], check=False, capture_output=True)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
@pytest.mark.slow
def test_interactive_session_under_tmux(tmp_path: Path) -> None:
    session = Tmux(tmp_path)
    try:
        session.wait_for("In [1]:")
        session.send(SETUP)
        session.send("model(x)")
        screen = session.wait_for("x = x.to('meta')")
        assert_text_panel(screen)
        session.send("%devices")
        screen = session.wait_for("Problem")
        assert "ipydevice · 2 objects" in screen
        session.send("exit")
    finally:
        session.close()
