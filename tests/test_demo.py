"""``make demo`` starts JupyterLab, as root (Docker, cloud machines) and as other users."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(sys.executable).parent.parent  # the venv running the tests (make's VENV)


def make(*args: str) -> list[str]:
    # -o: the venv is there already; never rebuild it from a test.
    return ["make", "-C", str(ROOT), f"VENV={VENV}", "-o", f"{VENV}/.installed", *args]


def dry_run_as(uid: int, tmp_path: Path) -> str:
    """``make -n demo`` with ``id -u`` answering ``uid``."""
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    (fake / "id").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        make("-n", "demo"), capture_output=True, text=True, env=env, timeout=60, check=True
    )
    return done.stdout


def test_demo_allows_root_only_for_root(tmp_path):
    assert "jupyter lab --allow-root" in dry_run_as(0, tmp_path)
    as_user = dry_run_as(1000, tmp_path)
    assert "jupyter lab" in as_user and "--allow-root" not in as_user


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_make_demo_starts_jupyterlab(tmp_path):
    """Started as the current user (root in containers and CI), it answers, then stops."""
    if not (VENV / "bin" / "jupyter-lab").exists():
        pytest.fail("JupyterLab is not installed in the venv (pip install -e '.[notebook]')")
    port = free_port()
    args = f"--no-browser --port={port} --ip=127.0.0.1 --IdentityProvider.token=ipydevice-test"
    env = {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
    }
    server = subprocess.Popen(
        make("demo", f"JUPYTER_ARGS={args}"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,  # one process group: make and JupyterLab stop together
    )
    answered = None
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and server.poll() is None:
            try:
                url = f"http://127.0.0.1:{port}/api/status?token=ipydevice-test"
                with urllib.request.urlopen(url, timeout=2) as reply:
                    answered = reply.status
                    break
            except OSError:
                time.sleep(0.5)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(timeout=20)
        output = server.stdout.read() if server.stdout else ""
    # As root without --allow-root, JupyterLab exits at once: "Running as root is not
    # recommended. Use --allow-root to bypass."
    assert answered == 200, output[-3000:]
