"""The diagnosis travels with the exception: a PEP 678 note and a plain payload."""

from __future__ import annotations

import io
import pickle
import subprocess
import sys
import textwrap
import traceback
from fractions import Fraction
from typing import Any

import pytest
from mentions import mentions_ipydevice

import ipydevice
from ipydevice import settings
from ipydevice.diagnosis import carried
from ipydevice.integrations import excepthook

torch = pytest.importorskip("torch")
nn = torch.nn


def _device_error() -> BaseException:
    model = nn.Linear(4, 2).to("meta")
    batch = torch.randn(3, 4)
    try:
        model(batch)
    except RuntimeError as exc:
        return exc
    raise AssertionError("no device error")


class _PlainData(pickle.Unpickler):
    """Unpickles dicts, lists, strings and numbers only: any class is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"not plain data: {module}.{name}")


def test_the_plain_data_check_refuses_a_class() -> None:
    """The check above refuses what pickle would rebuild from a module, ipydevice's or not."""
    for value in ({"where": carried.payload}, {"fix": [textwrap.dedent]}, {"n": Fraction(1, 3)}):
        with pytest.raises(pickle.UnpicklingError, match="not plain data"):
            _PlainData(io.BytesIO(pickle.dumps(value))).load()


def _attached() -> BaseException:
    exc = _device_error()
    diagnosis = ipydevice.diagnose(exc, namespace={})
    assert carried.attach(exc, diagnosis, "rank 1/2")
    return exc


def test_the_note_and_payload_survive_pickling_and_show_in_the_traceback() -> None:
    exc = _attached()
    data = carried.payload(exc)
    assert data is not None and data["where"] == "rank 1/2" and data["family"]
    assert data["culprits"][0]["name"] == "batch in _device_error"
    assert data["culprits"][0]["device"] == "cpu"
    # plain data only (no class of ipydevice's, or of any module): it unpickles where
    # ipydevice is not even importable. Its text holds this file's path, which may hold
    # the word ipydevice (a clone named after the project).
    assert _PlainData(io.BytesIO(pickle.dumps(data))).load() == data
    back = pickle.loads(pickle.dumps(exc))
    assert carried.payload(back) == data
    text = "".join(traceback.format_exception(back))
    assert "ipydevice (rank 1/2): `batch` is on cpu" in text
    assert "  culprit: `batch in _device_error` on cpu, should be on meta" in text
    fix = data["fix"]
    at = f" [at {fix['location']}]" if fix["scope"] == "source" else ""
    # the fix's lines as they read in the code (a function's body), dedented once
    code = textwrap.dedent(fix["code"]).strip("\n")
    shown = "".join(f"    {line}\n" for line in code.splitlines())
    assert f"  fix: {fix['title']}{at}\n{shown}" in text
    if fix["scope"] == "source":  # the place to change, said once
        assert fix["location"] not in fix["title"] and text.count(fix["location"]) == 1
    # read back from the text alone (a worker's re-raised message, an error file)
    (parsed,) = carried.parse_notes(text)
    assert parsed["where"] == "rank 1/2" and parsed["headline"] == data["headline"]
    assert parsed["culprits"][0]["name"] == "batch in _device_error"
    assert parsed["fix"]["code"] == code
    if fix["scope"] == "source":  # a change to the code: where, in the note too
        assert parsed["fix"]["location"] == fix["location"] and fix["location"]


def test_attached_once() -> None:
    exc = _attached()
    assert not carried.attach(exc, ipydevice.diagnose(exc, namespace={}), "again")
    assert len(exc.__notes__) == 1


def test_not_a_device_error_gets_nothing() -> None:
    exc = ValueError("nothing about devices")
    assert not carried.attach(exc, ipydevice.diagnose(exc))
    assert carried.payload(exc) is None and not hasattr(exc, "__notes__")


def test_the_notes_list_before_python_3_11() -> None:
    class Old(Exception):
        add_note = None  # as on Python < 3.11, where add_note does not exist

    exc = Old("x")
    carried.add_note(exc, "first")
    carried.add_note(exc, "second")
    assert exc.__notes__ == ["first", "second"]


def test_the_note_setting_is_off_by_default_and_attaches_when_on() -> None:
    assert settings.Settings().note is False
    exc = _device_error()
    ipydevice.diagnose(exc, namespace={})
    assert carried.payload(exc) is None and not getattr(exc, "__notes__", None)
    with settings.override(note=True):
        ipydevice.diagnose(exc, namespace={})
    assert carried.payload(exc) is not None and len(exc.__notes__) == 1


def test_the_scripts_hook_attaches(monkeypatch) -> None:
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.delenv("TORCHELASTIC_ERROR_FILE", raising=False)
    exc = _device_error()
    assert excepthook.report_text(exc, namespace={})
    assert carried.payload(exc)["where"] == "rank 0/2"


@pytest.mark.slow
def test_a_script_run_shows_the_note_in_the_printed_traceback(tmp_path) -> None:
    script = tmp_path / "fail.py"
    script.write_text(
        textwrap.dedent("""
        import traceback, torch, torch.nn as nn
        import ipydevice
        ipydevice.configure(note=True)
        model = nn.Linear(4, 2).to("meta")
        batch = torch.randn(3, 4)
        try:
            model(batch)
        except RuntimeError as exc:
            ipydevice.diagnose(exc)
            traceback.print_exc()
        """)
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert "ipydevice: `batch` is on cpu" in done.stderr, done.stderr[-2000:]


@pytest.mark.slow
def test_pytest_shows_the_note_under_the_exception(pytester) -> None:
    pytester.makepyfile(
        test_model="""
        import torch
        import torch.nn as nn

        def test_forward():
            model = nn.Linear(4, 2).to("meta")
            x = torch.randn(3, 4)
            model(x)
        """
    )
    result = pytester.runpytest_subprocess("-p", "ipydevice")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "ipydevice: `x` is on cpu" in text  # the note, in pytest's traceback
    assert "- ipydevice -" in text  # the full section, as before


@pytest.mark.slow
def test_in_a_shell_the_note_is_a_setting_off_by_default() -> None:
    import sys

    from shells import run, run_captured, singleton_shell

    with singleton_shell(reset=True) as shell:
        shell.run_line_magic("load_ext", "ipydevice")
        run(shell, "import torch, torch.nn as nn\nmodel = nn.Linear(4, 2).to('meta')")
        run_captured(shell, "model(torch.randn(3, 4))")
        assert not getattr(sys.last_value, "__notes__", None)  # the stock traceback, as it was
        shell.run_line_magic("config", "IPyDevice.note = True")
        run_captured(shell, "model(torch.randn(3, 4))")
        assert carried.payload(sys.last_value) is not None
        assert sys.last_value.__notes__[0].startswith("ipydevice: ")


def test_notes_are_read_back_under_a_launchers_prefix() -> None:
    note = carried.note_text(carried.payload(_attached()) | {"where": "rank 1/2 (local 1)"})
    for prefix in ("", "    ", "[rank1]: ", "[default1]:", "[rank 1/2 (local 1)] "):
        text = "\n".join(
            prefix + line for line in f"Traceback\nRuntimeError: x\n{note}".split("\n")
        )
        (parsed,) = carried.parse_notes(text + "\nafter")
        assert parsed["where"] == "rank 1/2 (local 1)", prefix
        assert parsed["fix"]["code"].startswith("batch = "), prefix


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("ipydevice: scan failed (budget)", True),
        ("ipydevice · device error", True),
        ("- ipydevice -", True),
        ("ipydevice (rank 1/2): `batch` is on cpu", True),
        ('  File "/home/me/ipydevice/tests/test_x.py", line 3', False),
        ("/srv/ipydevice/.venv/lib/python3.12/site-packages/torch/nn.py:12: UserWarning", False),
        (r"C:\work\ipydevice\train.py", False),
        ("ipydevice.integrations.ipython", False),
        ("ipydevice-panel", False),
    ],
)
def test_a_clone_named_ipydevice_is_not_ipydevice_speaking(text: str, said: bool) -> None:
    """The tests' check that ipydevice said nothing looks past paths into a clone (or
    a venv) named after the project."""
    assert mentions_ipydevice(text) is said
