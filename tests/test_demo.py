"""``make demo`` starts JupyterLab, as root (Docker, cloud machines) and as other users,
on copies of the notebooks in ``.demo/`` (git-ignored): what JupyterLab saves there
never changes the tracked notebooks, and the tree stays as it was."""

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
    # -o: the venv is there already; never install into it from a test.
    return ["make", "-C", str(ROOT), f"VENV={VENV}", "-o", f"{VENV}/.demo-installed", *args]


def git_status() -> str | None:
    """``git status --porcelain`` of the checkout, or None outside a git checkout (an sdist)."""
    try:
        done = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=all"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except OSError:
        return None
    return done.stdout if done.returncode == 0 else None


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


def test_demo_runs_on_copies_and_installs_the_demos_extra_only(tmp_path):
    """The notebooks are copied into the demo's folder and JupyterLab runs there; the
    venv gets the ``notebook`` extra, not the test's (no ``realworld``, no ``dev``)."""
    demo = tmp_path / "demo"
    done = subprocess.run(
        ["make", "-C", str(ROOT), f"VENV={tmp_path / 'venv'}", f"DEMO={demo}", "-n", "demo"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    said = done.stdout
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert f"cp notebooks/{notebook.name} {demo}/{notebook.name}" in said, said
    assert f"cd {demo} && " in said and "jupyter lab" in said
    assert '-e ".[notebook]"' in said
    for other in ("realworld", "test,", "--group dev", "browser"):
        assert other not in said, (other, said)


@pytest.mark.skipif(git_status() is None, reason="not a git checkout")
def test_the_demo_folder_is_ignored_by_git():
    done = subprocess.run(
        ["git", "-C", str(ROOT), "check-ignore", "-q", ".demo/01-quickstart.ipynb"], timeout=60
    )
    assert done.returncode == 0, ".demo/ is not in .gitignore"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_make_demo_starts_jupyterlab(tmp_path):
    """Started as the current user (root in containers and CI), it answers, serves the
    demo's copy of the quickstart, saves it where it is (as JupyterLab's autosave
    does), then stops: the tracked notebooks and the tree are as before."""
    if not (VENV / "bin" / "jupyter-lab").exists():
        pytest.fail("JupyterLab is not installed in the venv (pip install -e '.[notebook]')")
    port = free_port()
    args = f"--no-browser --port={port} --ip=127.0.0.1 --IdentityProvider.token=ipydevice-test"
    env = {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
    }
    notebook = ROOT / "notebooks" / "01-quickstart.ipynb"
    tracked, before = notebook.read_bytes(), git_status()
    server = subprocess.Popen(
        make("demo", f"JUPYTER_ARGS={args}"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,  # one process group: make and JupyterLab stop together
    )
    answered = saved = None
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
        if answered == 200:
            saved = _save_with_outputs(port, "01-quickstart.ipynb")
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
    assert saved == 200, output[-3000:]
    assert notebook.read_bytes() == tracked
    assert git_status() == before


def _save_with_outputs(port: int, name: str) -> int:
    """What JupyterLab's autosave does after a run: the notebook, with an execution
    count, written back through the server's contents API."""
    import json

    url = f"http://127.0.0.1:{port}/api/contents/{name}?token=ipydevice-test"
    with urllib.request.urlopen(url, timeout=30) as reply:
        model = json.load(reply)
    cell = next(c for c in model["content"]["cells"] if c["cell_type"] == "code")
    cell["execution_count"] = 1
    body = json.dumps({"type": "notebook", "format": "json", "content": model["content"]})
    request = urllib.request.Request(url, data=body.encode(), method="PUT")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as reply:
        return int(reply.status)
