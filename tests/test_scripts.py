"""Beyond the notebook: sys.excepthook, python -m ipydevice run, torchrun, pytest, demo."""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import textwrap

import pytest
from mentions import mentions_ipydevice

import ipydevice
from ipydevice.integrations import excepthook

MISMATCH = """
import torch
import torch.nn as nn
model = nn.Linear(4, 2).to("meta")
batch = torch.randn(3, 4)
out = model(batch)
"""


def python(
    *args: str, env: dict | None = None, timeout: int = 120, cwd: str | None = None
) -> subprocess.CompletedProcess:
    environment = {**os.environ, "IPYDEVICE_DEBUG": "1", "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment,
        cwd=cwd,
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


def test_run_a_missing_script_as_python_does(tmp_path):
    missing = tmp_path / "missing.py"
    plain, ours = python(str(missing)), python("-m", "ipydevice", "run", str(missing))
    assert ours.returncode == plain.returncode == 2
    assert "can't open file" in ours.stderr and "Traceback" not in ours.stderr


def test_run_a_module(tmp_path):
    (tmp_path / "job.py").write_text(MISMATCH)
    result = python("-m", "ipydevice", "run", "-m", "job", env={"PYTHONPATH": str(tmp_path)})
    assert result.returncode == 1 and "`batch` is on cpu" in result.stderr


def test_run_puts_the_script_folder_first_on_sys_path(tmp_path):
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "helpers.py").write_text("VALUE = 42\n")
    (folder / "train.py").write_text(
        "import sys\nimport helpers\nprint(helpers.VALUE, sys.path[0])\n"
    )
    result = python("-m", "ipydevice", "run", str(folder / "train.py"), cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["42", str(folder)]


def test_run_a_module_from_the_current_folder(tmp_path):
    (tmp_path / "helpers.py").write_text("VALUE = 7\n")
    (tmp_path / "job.py").write_text("import helpers\nprint(helpers.VALUE)\n")
    result = python("-m", "ipydevice", "run", "-m", "job", cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "7"


def test_an_uncaught_keyboard_interrupt_ends_as_python_does(tmp_path):
    script = tmp_path / "stop.py"
    script.write_text(
        "import atexit\natexit.register(print, 'atexit ran', flush=True)\nraise KeyboardInterrupt\n"
    )
    plain = python(str(script))
    ours = python("-m", "ipydevice", "run", str(script))
    assert plain.returncode == -signal.SIGINT  # a shell shows 130
    assert ours.returncode == plain.returncode
    assert ours.stdout == plain.stdout == "atexit ran\n"
    assert ours.stderr.rstrip().endswith("KeyboardInterrupt")
    shell = subprocess.run(
        ["sh", "-c", f'"{sys.executable}" -m ipydevice run "{script}"; echo "status $?"'],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "IPYDEVICE_DEBUG": "1"},
    )
    assert shell.stdout.splitlines()[-1] == "status 130"


def test_run_reports_a_device_error_raised_in_a_thread(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(
        "import threading\n"
        + MISMATCH.replace("out = model(batch)", "")
        + "t = threading.Thread(target=lambda: model(batch))\nt.start()\nt.join()\nprint('done')\n"
    )
    result = python("-m", "ipydevice", "run", str(script))
    assert result.returncode == 0, result.stderr  # as python: a thread's error does not end it
    assert "done" in result.stdout
    assert "Exception in thread" in result.stderr  # the stock thread traceback comes first
    assert "ipydevice · device error" in result.stderr


def test_install_chains_threading_excepthook_and_uninstall_restores(monkeypatch):
    import threading

    seen = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(args.exc_type))
    previous = threading.excepthook
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    ipydevice.install()
    try:
        assert threading.excepthook is not previous

        def work():
            raise RuntimeError(
                "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
            )

        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
    finally:
        ipydevice.uninstall()
    assert threading.excepthook is previous
    assert seen == [RuntimeError]
    assert "ipydevice · device error" in stderr.getvalue()


def test_version_and_bare_command():
    version = python("-m", "ipydevice", "--version")
    assert (
        version.returncode == 0 and version.stdout.strip() == f"ipydevice {ipydevice.__version__}"
    )
    bare = python("-m", "ipydevice")
    assert bare.returncode == 0, bare.stderr
    assert "usage: python -m ipydevice" in bare.stdout and "run" in bare.stdout
    assert bare.stderr == ""


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


def torchrun(script, *options: str) -> subprocess.CompletedProcess:
    return python(
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        *options,
        str(script),
        timeout=180,
    )


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
    result = torchrun(script)
    assert result.returncode != 0
    lines = result.stderr.splitlines() + result.stdout.splitlines()
    for rank in (0, 1):
        # init_process_group labels every line of the hook's output with "[rank0]:";
        # ipydevice adds no second label.
        label = f"[rank{rank}]:"
        block = [i for i, line in enumerate(lines) if line.startswith(label)]
        assert block, f"no report from rank {rank}:\n{result.stderr[-3000:]}"
        # One contiguous block per rank (torch leaves blank lines bare): no interleaving.
        assert all(line.startswith(label) or not line for line in lines[block[0] : block[-1]])
        assert any("`batch` is on cpu" in lines[i] for i in block)
        assert any("ipydevice · device error" in lines[i] for i in block)
    assert "[rank 0/2" not in result.stderr and "[rank 1/2" not in result.stderr
    # The error file: torchrun's root-cause summary shows the diagnosis.
    summary = result.stderr[result.stderr.index("Root Cause (first observed failure)") :]
    assert "error_file: <N/A>" not in summary
    assert "ipydevice · device error" in summary and "`batch` is on cpu" in summary


@pytest.mark.slow
def test_torchrun_tee_labels_each_line_once(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text(MISMATCH)
    result = python(
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        "--tee=3",
        "-m",
        "ipydevice",
        "run",
        str(script),
        timeout=180,
    )
    assert result.returncode != 0
    shown = [line for line in result.stderr.splitlines() if line.startswith("[default")]
    reported = [line for line in shown if "`batch` is on cpu" in line]
    assert {line.split(":", 1)[0] for line in reported} == {"[default0]", "[default1]"}
    assert all("[rank " not in line for line in reported), reported


def test_under_a_launcher_that_labels_no_second_label(monkeypatch, tmp_path):
    error = RuntimeError(
        "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
    )
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert excepthook.rank_label() == "rank 1/2 (local 1)"
    assert excepthook.report_text(error).startswith("[rank 1/2 (local 1)] ")

    def torch_wrapper(*args):  # as init_process_group's sys.excepthook
        pass

    torch_wrapper.__module__ = "torch.distributed.distributed_c10d"
    monkeypatch.setattr(sys, "excepthook", torch_wrapper)
    assert excepthook.rank_label(in_excepthook=True) == ""
    assert excepthook.rank_label() == "rank 1/2 (local 1)"  # threads, pytest: not wrapped
    # torchrun --redirects/--tee: stderr is the rank's stderr.log beside its error file
    folder = tmp_path / "attempt_0" / "1"
    folder.mkdir(parents=True)
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(folder / "error.json"))
    with open(folder / "stderr.log", "w") as log:
        monkeypatch.setattr(sys, "stderr", log)
        assert excepthook.rank_label() == ""
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert excepthook.rank_label() == "rank 1/2 (local 1)"


def test_the_error_file_torchrun_reads(monkeypatch, tmp_path):
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    error_file = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(error_file))
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    monkeypatch.setattr(sys, "excepthook", lambda *args: None)
    ipydevice.install()
    try:
        sys.excepthook(ZeroDivisionError, ZeroDivisionError("x"), None)
        assert not error_file.exists()  # not a device error: torch's own handling stays
        error = RuntimeError(
            "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
        )
        sys.excepthook(RuntimeError, error, None)
    finally:
        ipydevice.uninstall()
    failure = ProcessFailure(local_rank=0, pid=1, exitcode=1, error_file=str(error_file))
    assert failure.message["message"].startswith("RuntimeError: Expected all tensors")
    summary = ChildFailedError("train.py", {0: failure}).format_msg()
    assert "ipydevice · device error" in summary and "cuda:0" in summary
    # Written by @record first: the report is added to its traceback, once.
    from torch.distributed.elastic.multiprocessing.errors import ErrorHandler

    try:
        raise error
    except RuntimeError as exc:
        ErrorHandler().record_exception(exc)
        excepthook.write_error_file(exc, "REPORT")
        excepthook.write_error_file(exc, "REPORT")
    stack = ProcessFailure(0, 1, 1, str(error_file)).message["extraInfo"]["py_callstack"]
    assert stack.startswith("Traceback") and stack.count("REPORT") == 1
    error_file.write_text("not JSON")  # a file of the user's: never overwritten
    excepthook.write_error_file(error, "REPORT")
    assert error_file.read_text() == "not JSON"


DEVICE_ERROR = RuntimeError(
    "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
)


@pytest.mark.slow
def test_the_error_file_only_under_a_launcher(monkeypatch, tmp_path):
    """TORCHELASTIC_ERROR_FILE left in a shell's environment, without torchrun's
    RANK/WORLD_SIZE: `python -m ipydevice run` writes nothing there."""
    error_file = tmp_path / "error.json"
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(error_file))
    excepthook.write_error_file(DEVICE_ERROR, "REPORT")
    assert not error_file.exists()
    script = tmp_path / "train.py"
    script.write_text(MISMATCH)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    env["TORCHELASTIC_ERROR_FILE"] = str(error_file)
    result = subprocess.run(
        [sys.executable, "-m", "ipydevice", "run", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "NO_COLOR": "1"},
    )
    assert result.returncode == 1 and "`batch` is on cpu" in result.stderr
    assert not error_file.exists()


@pytest.mark.parametrize("kind", ["user file", "user JSON", "link", "dangling link", "folder"])
def test_the_error_file_is_never_the_users(monkeypatch, tmp_path, kind):
    """Under a launcher too: a file that is not torchelastic's is left as it is, and
    a symbolic link is never followed (neither to a file nor to where it points)."""
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    path = tmp_path / "error.json"
    target = tmp_path / "notes.txt"
    target.write_text("my notes")
    if kind == "user file":
        path.write_text("my notes")
    elif kind == "user JSON":
        path.write_text('{"mine": [1, 2]}')
    elif kind == "link":
        path.symlink_to(target)
    elif kind == "dangling link":
        path.symlink_to(tmp_path / "nowhere.json")
    else:
        path.mkdir()
    before = path.read_text() if path.is_file() else None
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(path))
    excepthook.write_error_file(DEVICE_ERROR, "REPORT")
    assert target.read_text() == "my notes"
    assert not (tmp_path / "nowhere.json").exists()
    if before is not None:
        assert path.read_text() == before


DEVICE_TESTS = textwrap.dedent("""
    import torch
    import torch.nn as nn

    def test_forward():
        model = nn.Linear(4, 2).to("meta")
        x = torch.randn(3, 4)
        model(x)

    def test_other_failure():
        assert 1 == 2
""")


@pytest.mark.slow
def test_pytest_plugin_adds_the_diagnosis(pytester):
    pytester.makepyfile(test_model=DEVICE_TESTS)
    result = pytester.runpytest_subprocess("-p", "ipydevice")
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    assert text.count("- ipydevice -") == 1  # one section, for the device error only
    assert "`x` is on cpu, `model` is on meta (in test_forward)" in text


@pytest.mark.slow
def test_pytest_plugin_reports_under_xdist_and_in_junit_xml(pytester):
    pytester.makepyfile(test_model=DEVICE_TESTS)
    junit = pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess("-p", "ipydevice", "-n", "2", f"--junitxml={junit}")
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    assert "2 workers" in text  # the tests ran in xdist workers
    assert text.count("- ipydevice -") == 1
    assert "`x` is on cpu, `model` is on meta (in test_forward)" in text
    import xml.etree.ElementTree as ET

    cases = {case.get("name"): case for case in ET.parse(junit).iter("testcase")}
    failure = cases["test_forward"].find("failure")
    assert failure is not None and "ipydevice · device error" in (failure.text or "")
    assert "`x` is on cpu, `model` is on meta (in test_forward)" in (failure.text or "")
    other = cases["test_other_failure"].find("failure")
    assert other is not None and not mentions_ipydevice(other.text or "")


@pytest.mark.slow
def test_pytest_plugin_through_its_entry_point(pytester, tmp_path, monkeypatch):
    """As installed: the pytest11 entry point loads the plugin in every run, once,
    `-p ipydevice` is harmless beside it and `-p no:ipydevice` turns it off."""
    site = tmp_path / "site"
    info = site / "ipydevice_entry-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ipydevice-entry\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        "[pytest11]\nipydevice = ipydevice.integrations.pytest_plugin\n"
    )
    pytester.makepyfile(test_model=DEVICE_TESTS)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    for args, sections in (((), 1), (("-p", "ipydevice"), 1), (("-p", "no:ipydevice"), 0)):
        result = pytester.runpytest_subprocess(*args)
        result.assert_outcomes(failed=2)
        assert result.stdout.str().count("- ipydevice -") == sections, args


def test_pytest_plugin_is_declared_for_pytest():
    from pathlib import Path

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {
        "ipydevice": "ipydevice.integrations.pytest_plugin"
    }
    assert "Framework :: Pytest" in project["classifiers"]


@pytest.mark.slow
def test_demo_runs_to_the_end():
    result = python("-m", "ipydevice", "demo", timeout=180)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count("ipydevice · device error") == 5
    assert "`inputs` is on cpu, `model` is on cuda:0" in result.stdout
    assert "`hidden` is on cuda:1, `head` is on cuda:0" in result.stdout


def test_terminal_ipython_text_follows_the_terminal(monkeypatch, nb):
    from ipydevice.integrations.ipython import panel_bundle

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


SCALE_NET = """
import torch
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.scale = torch.ones(4)

    def forward(self, x):
        return self.fc(x) * self.scale
"""


@pytest.mark.parametrize(
    ("calls", "name"),
    [
        (
            "def main():\n    net = Net().to('meta')\n    net(torch.randn(2, 4, device='meta'))\n\nmain()\n",
            "net",
        ),
        # a variation: the model reaches the failing call as another function's argument
        (
            "def train(encoder, data):\n    return encoder(data)\n\n"
            "def main():\n    train(Net().to('meta'), torch.randn(2, 4, device='meta'))\n\nmain()\n",
            "encoder",
        ),
    ],
    ids=["local", "argument"],
)
def test_a_script_names_the_model_as_its_caller_does_and_says_each_finding_once(
    tmp_path, calls, name
):
    import linecache

    source = SCALE_NET + calls
    filename = str(tmp_path / "train.py")
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": "__main__"}
    try:
        exec(compile(source, filename, "exec"), namespace)
    except RuntimeError as exc:
        d = ipydevice.diagnose(exc, namespace=namespace)
    text = str(d)
    assert d.reference.partition(" in ")[0] == name, d.reference
    assert d.target_reason == f"meta: where `{name}`'s parameters are"
    assert "self in Net.forward" not in text and f"`{name}.scale` is on cpu" in text
    assert text.count("never move") == 1, text  # one line says .to() never moves it
