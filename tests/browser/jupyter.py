"""A throwaway JupyterLab 4 / Notebook 7 server and the Playwright steps the browser tests share.

Follows the verified recipe (shared/reference/testing.md, section 3): Debian's
``/usr/bin/chromium`` driven by Playwright for Python (never ``playwright install``),
a server with no token on a free port with ``port_retries=0``, fresh config, data,
runtime, IPython, settings and workspace folders per server, ``?reset`` on every URL,
locators scoped to the visible notebook, and a kernel wait that needs both the
kernel name and an idle indicator.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

CHROMIUM = Path(os.environ.get("IPYDEVICE_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
#: Cells of the notebook on screen only: JupyterLab may keep other notebooks in hidden tabs.
CELLS = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell"
KERNEL_IDLE = """() => {
    const k = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Toolbar-kernelName');
    const e = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator');
    return k && k.textContent.includes('ipykernel') && e && e.getAttribute('data-status') === 'idle';
}"""


def missing_requirements() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing (run scripts/install-browser.sh)"
    for module, package in (
        ("playwright", "playwright"),
        ("jupyterlab", "jupyterlab"),
        ("notebook", "notebook"),
    ):
        try:
            __import__(module)
        except ImportError:
            return f"{package} is not installed (run scripts/install-browser.sh)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_notebook(path: Path, cells: list[str], raises: tuple[int, ...] = ()) -> Path:
    """A notebook of code cells; the cells at ``raises`` are tagged raises-exception."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
        "name": "python3",
    }
    for i, source in enumerate(cells):
        cell = nbformat.v4.new_code_cell(source)
        if i in raises:
            cell.metadata["tags"] = ["raises-exception"]
        nb.cells.append(cell)
    nbformat.write(nb, path)
    return path


class JupyterServer:
    """``jupyter lab`` in the background; it also serves Notebook 7 at ``/notebooks/``."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "root"
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = base / "jupyter.log"

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}"

    def start(self, timeout: float = 60) -> JupyterServer:
        self.root.mkdir(parents=True, exist_ok=True)
        settings = self.base / "lab-user-settings" / "@jupyterlab" / "apputils-extension"
        settings.mkdir(parents=True, exist_ok=True)
        # No news or update toasts over the notebook in screenshots.
        (settings / "notification.jupyterlab-settings").write_text(
            '{"fetchNews": "false", "checkForUpdates": false}'
        )
        env = {
            **os.environ,
            "JUPYTER_CONFIG_DIR": str(self.base / "jupyter-config"),
            "JUPYTER_DATA_DIR": str(self.base / "jupyter-data"),
            "JUPYTER_RUNTIME_DIR": str(self.base / "jupyter-runtime"),
            "IPYTHONDIR": str(self.base / "ipython"),  # no user profile (auto-loaded extensions)
        }
        cmd = [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            "--allow-root",
            "--ip=127.0.0.1",
            f"--port={self.port}",
            "--ServerApp.port_retries=0",
            f"--ServerApp.root_dir={self.root}",
            "--IdentityProvider.token=",
            "--ServerApp.password=",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            f"--LabApp.user_settings_dir={self.base / 'lab-user-settings'}",
            f"--LabApp.workspaces_dir={self.base / 'lab-workspaces'}",
            "--LabApp.expose_app_in_browser=True",  # window.jupyterapp, for the theme command
        ]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"jupyter lab exited with {self.proc.returncode}:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(self.url("api/status"), timeout=1):
                    return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"jupyter lab did not answer within {timeout} s:\n{self.log_tail()}")

    def stop(self, timeout: float = 20) -> None:
        """SIGTERM to the server we started (by PID), then wait: kernels take seconds to stop."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def add(self, source: Path) -> str:
        """Copies a notebook into the server's root; returns its name."""
        shutil.copy(source, self.root / source.name)
        return source.name


# -- Playwright steps ----------------------------------------------------------------------


def open_notebook(page: Any, url: str, timeout: float = 60_000) -> None:
    """Opens ``url`` and waits until its kernel exists and is idle."""
    page.goto(url)
    page.wait_for_selector(CELLS, timeout=timeout)
    page.wait_for_function(KERNEL_IDLE, timeout=timeout)


def run_cell(page: Any, index: int, timeout: float = 60_000) -> Any:
    """Runs cell ``index`` with Shift+Enter; returns its locator once it has a prompt number."""
    from playwright.sync_api import expect

    cell = page.locator(CELLS).nth(index)
    prompt = cell.locator(".jp-InputArea-prompt")
    for attempt in range(2):
        cell.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Escape")
        page.keyboard.press("Shift+Enter")
        try:  # queued ("[*]:") or run: the key reached the cell
            expect(prompt).not_to_have_text("[ ]:", timeout=15_000)
            break
        except AssertionError:
            # (JupyterLab still settling after the page load took the key: once more;
            # a cell never queued cannot run twice)
            if attempt:
                raise
    expect(prompt).to_have_text(re.compile(r"\[\d+\]:"), timeout=timeout)
    return cell


def set_lab_theme(page: Any, theme: str) -> None:
    """Switches JupyterLab's theme with the ``apputils:change-theme`` command."""
    page.evaluate(
        "theme => window.jupyterapp.commands.execute('apputils:change-theme', {theme})", theme
    )
    light = "true" if "Light" in theme else "false"
    page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{light}'")
    page.wait_for_timeout(300)  # the theme's CSS swaps in after the attribute


def screenshot_around(
    page: Any,
    element: Any,
    path: Path,
    above: int = 150,
    pad: int = 12,
    block: str = "center",
    below: Any = None,
    after: int = 0,
) -> None:
    """A screenshot of ``element`` plus up to ``above`` pixels of the notebook above it,
    down to the bottom of ``below`` (another element, such as the buttons under the panel)
    and ``after`` pixels more.

    The element is scrolled into view first (``block`` as in ``scrollIntoView``: Notebook 7
    puts long outputs in their own scroll box, where "start" shows the panel's top); the
    clip never reaches above the notebook's scroll area (no menu or toolbar in the picture).
    """
    element.evaluate("(e, block) => e.scrollIntoView({block})", block)
    if block == "start" and above:
        # Show what is above too: scroll the notebook back by ``above`` pixels.
        element.evaluate(
            """(e, above) => {
                let box = e.parentElement;
                while (box && box.scrollHeight <= box.clientHeight) box = box.parentElement;
                if (box) box.scrollTop -= above;
            }""",
            above,
        )
    page.mouse.move(0, 0)  # no hover highlight on a button
    page.wait_for_timeout(200)
    box = element.bounding_box()
    bottom = box["y"] + box["height"]
    if below is not None:
        extra = below.bounding_box()
        if extra:
            bottom = max(bottom, extra["y"] + extra["height"])
    notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook").first
    area = notebook.bounding_box() if notebook.count() else None  # an exported page has none
    viewport = page.viewport_size
    top = max(area["y"] if area else 0, box["y"] - above)
    left = max(0, box["x"] - pad - 60)
    clip = {
        "x": left,
        "y": top,
        "width": min(viewport["width"] - left, box["width"] + 2 * pad + 60),
        "height": min(viewport["height"] - top, bottom - top + pad + after),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), clip=clip)
