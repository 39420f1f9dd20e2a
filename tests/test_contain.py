"""Containment: what user code raises while ipydevice works stays inside ipydevice.

A hostile object (its metaclass, a property, a tensor subclass), an audit, a
message pattern or an ``@ipydevice.on_diagnosis`` listener may raise anything:
``SystemExit`` from ``sys.exit()``, a ``BaseException`` of its own. The user's
session, test run or script then behaves exactly as without ipydevice, and
ipydevice says what happened in one line. ``KeyboardInterrupt`` keeps its
meaning: ipydevice stops and says so, never folding it into a report.

The per-object half of the rule is exercised by the hostile corpus
(``tests/hostile.py``: ``metaclass_getattribute_exits``, ``tensor_properties_exit``,
``module_buffer_exits``, ``optimizer_state_exits``...) through every path of
``tests/test_hostile.py``; this file covers the entry points, with
``IPYDEVICE_DEBUG`` unset as for a user.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import hostile
import pytest
import torch
from cells import Notebook
from IPython.utils.capture import capture_output
from shells import singleton_shell

import ipydevice
from ipydevice import _debug, plugins
from ipydevice.integrations import excepthook

SETUP = "import torch\nmodel = torch.nn.Linear(4, 2).to('meta')\nx = torch.randn(3, 4)\n"


@pytest.fixture(autouse=True)
def _user(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """As for a user: no IPYDEVICE_DEBUG; and no plugin left behind."""
    monkeypatch.delenv("IPYDEVICE_DEBUG", raising=False)
    before = (set(plugins.own_audits()), set(plugins.messages()), set(plugins._LISTENERS))
    yield
    for name in set(plugins.own_audits()) - before[0]:
        plugins.remove(name)
    for name in set(plugins.messages()) - before[1]:
        plugins.remove(name)
    for key in set(plugins._LISTENERS) - before[2]:
        plugins._LISTENERS.pop(key, None)


def hostile_error() -> tuple[Notebook, BaseException]:
    """A device error with exiting objects beside it, in the namespace and the frame."""
    nb = Notebook()
    nb.ns.update(meta_obj=hostile.ExitingMetaInstance(), odd=hostile.exiting_tensor(2))
    nb.run(SETUP)
    nb.run("def run(model, x):\n    held = [meta_obj, odd, {'t': odd}]\n    return model(x)\n")
    return nb, nb.fails("out = run(model, x)\n")


def exits(*args: Any, **kwargs: Any) -> Any:
    sys.exit(3)


def unwinds(*args: Any, **kwargs: Any) -> Any:
    raise hostile.Unwind("a framework unwinding")


def interrupts(*args: Any, **kwargs: Any) -> Any:
    raise KeyboardInterrupt


# -- the rule ---------------------------------------------------------------------------------


def test_the_rule_contains_everything_but_an_interrupt(monkeypatch: pytest.MonkeyPatch) -> None:
    for exc in (SystemExit(3), hostile.Unwind("x"), GeneratorExit(), ValueError("x")):
        _debug.contain(exc)  # returns: contained
        line = _debug.failure_line("scan", exc)
        assert line.startswith("ipydevice: scan failed (") and "\n" not in line
    with pytest.raises(KeyboardInterrupt):
        _debug.contain(KeyboardInterrupt())
    assert "interrupted" in _debug.failure_line("scan", KeyboardInterrupt())
    said: list[str] = []
    with _debug.contained("report", said.append):
        sys.exit(4)
    assert said == ["ipydevice: report failed (SystemExit: 4); set IPYDEVICE_DEBUG=1 for details"]
    with pytest.raises(KeyboardInterrupt), _debug.contained("check", said.append, interrupt=True):
        raise KeyboardInterrupt
    monkeypatch.setenv("IPYDEVICE_DEBUG", "1")
    with pytest.raises(SystemExit), _debug.contained("report", said.append):
        sys.exit(5)


@pytest.mark.parametrize("value", ["", "0", "false", "False", "FALSE", "no", "No", "off", " off "])
def test_debug_off_spellings(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """``IPYDEVICE_DEBUG=false`` (or no, off, 0, empty) is off: contained, one line."""
    monkeypatch.setenv("IPYDEVICE_DEBUG", value)
    assert not _debug.debug_enabled()
    said: list[str] = []
    with _debug.contained("report", said.append):
        raise ValueError("x")
    assert said and said[0].startswith("ipydevice: report failed")


@pytest.mark.parametrize("value", ["1", "true", "True", "yes", "on", "2"])
def test_debug_on_spellings(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("IPYDEVICE_DEBUG", value)
    assert _debug.debug_enabled()
    with pytest.raises(ValueError, match="injected"), _debug.contained("report", print):
        raise ValueError("injected")


def test_force_color_reads_the_same_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every on/off variable ipydevice reads goes through one parser."""
    from ipydevice.render.text import use_color

    monkeypatch.delenv("NO_COLOR", raising=False)
    for value, expected in (("false", False), ("off", False), ("0", False), ("1", True)):
        monkeypatch.setenv("FORCE_COLOR", value)
        assert use_color(None, Tty()) or not expected  # a TTY: colour whatever
        assert use_color(None, NotTty()) is expected, value


class Tty:
    def isatty(self) -> bool:
        return True


class NotTty:
    def isatty(self) -> bool:
        return False


# -- diagnose(), check(), inventory() ----------------------------------------------------------


def test_diagnose_contains_what_hostile_objects_raise() -> None:
    nb, exc = hostile_error()
    d = ipydevice.diagnose(exc, namespace=nb.ns)
    assert d.is_device_error and [c.name for c in d.culprits][:1] == ["x"]


@pytest.mark.parametrize("raiser", [exits, unwinds], ids=["SystemExit", "own BaseException"])
def test_diagnose_reports_an_escaped_failure_in_one_note(
    monkeypatch: pytest.MonkeyPatch, raiser: Any
) -> None:
    nb, exc = hostile_error()
    monkeypatch.setattr("ipydevice.pipeline.engine.analyse_named", raiser)
    d = ipydevice.diagnose(exc, namespace=nb.ns)
    assert d.is_device_error and len(d.notes) == 1
    assert d.notes[0].startswith("ipydevice: diagnosis failed (")
    monkeypatch.setattr("ipydevice.pipeline.engine.recognise_exception", raiser)
    d = ipydevice.diagnose(exc, namespace=nb.ns)
    assert not d.is_device_error and d.notes[0].startswith("ipydevice: diagnosis failed (")


def test_an_interrupt_stops_diagnose_check_and_inventory(monkeypatch: pytest.MonkeyPatch) -> None:
    odd = torch.ones(2).as_subclass(Interrupting)
    nb = Notebook()
    nb.ns["odd"] = odd
    nb.run(SETUP + "def run(model, x):\n    held = [odd]\n    return model(x)\n")
    exc = nb.fails("out = run(model, x)\n")
    with pytest.raises(KeyboardInterrupt):
        ipydevice.diagnose(exc, namespace=nb.ns)
    with pytest.raises(KeyboardInterrupt):
        ipydevice.check(nb.ns["model"], odd, namespace={})
    with pytest.raises(KeyboardInterrupt):
        ipydevice.inventory({"odd": odd})


class Interrupting(torch.Tensor):
    """Ctrl-C lands while its device is read."""

    @property
    def device(self) -> Any:  # type: ignore[override]
        raise KeyboardInterrupt


def test_check_and_inventory_contain_hostile_objects_and_audits() -> None:
    namespace = {
        "meta_obj": hostile.ExitingMetaInstance(),
        "odd": hostile.exiting_tensor(2),
        "x": torch.ones(2),
    }
    inv = ipydevice.inventory(namespace)
    assert "x" in [r.name for r in inv.records]
    ipydevice.audit("exits")(exits)
    checkup = ipydevice.check(namespace=namespace)
    assert any(
        n.startswith("ipydevice: audit 'exits' failed (SystemExit: 3)") for n in checkup.notes
    )
    inv = ipydevice.inventory(namespace)
    assert any("audit 'exits' failed (SystemExit" in n for n in inv.notes)


def test_check_reports_an_escaped_failure_in_one_note(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ipydevice.audits.checkup.problems_of", unwinds)
    checkup = ipydevice.check(torch.ones(2), namespace={})
    assert checkup.notes == (
        "ipydevice: check failed (Unwind: a framework unwinding); set IPYDEVICE_DEBUG=1 for details",
    )
    monkeypatch.setattr("ipydevice.collect.inventory._totals", exits)
    assert (
        ipydevice.inventory({"x": torch.ones(2)})
        .notes[0]
        .startswith("ipydevice: inventory failed (SystemExit: 3)")
    )


def test_a_message_pattern_that_exits_is_no_match() -> None:
    class Exiting(str):
        pass

    class Pattern:
        """Not re's: a compiled pattern stand-in whose search exits."""

        pattern = "exits"

        def search(self, text: str) -> Any:
            sys.exit(9)

    plugins._MESSAGES["exits"] = plugins._Message("exits", Pattern(), frozenset())  # type: ignore[arg-type]
    assert plugins.match_message("anything", "RuntimeError") is None


# -- listeners and the excepthook -----------------------------------------------------------


def test_a_listener_that_exits_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    ipydevice.on_diagnosis(exits)
    nb, exc = hostile_error()
    text = excepthook.report_text(exc, namespace=nb.ns)
    assert "device error" in text
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "listener" in err[0] and "(SystemExit: 3)" in err[0], err


def test_the_excepthook_contains_and_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(sys, "excepthook", lambda *args: seen.append(args[0]))
    ipydevice.install()
    try:
        monkeypatch.setattr("ipydevice.integrations.excepthook._report_texts", unwinds)
        _, exc = hostile_error()
        sys.excepthook(type(exc), exc, exc.__traceback__)
        err = capsys.readouterr().err.splitlines()
        assert seen == [RuntimeError] and len(err) == 1 and "(Unwind:" in err[0], err
        monkeypatch.setattr("ipydevice.integrations.excepthook._report_texts", interrupts)
        sys.excepthook(type(exc), exc, exc.__traceback__)  # Ctrl-C while reporting: one line
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and "report interrupted (KeyboardInterrupt)" in err[0], err
    finally:
        ipydevice.uninstall()


# -- IPython ------------------------------------------------------------------------------------


def test_ipython_session_carries_on() -> None:
    with singleton_shell() as shell:
        shell.run_line_magic("load_ext", "ipydevice")
        shell.user_ns.update(meta_obj=hostile.ExitingMetaInstance(), odd=hostile.exiting_tensor(2))
        shell.run_cell(SETUP + "held = [meta_obj, odd]\n")
        ipydevice.on_diagnosis(exits)
        with capture_output() as cap:
            result = shell.run_cell("model(x)")  # SystemExit would end a terminal session
        assert isinstance(result.error_in_exec, RuntimeError)
        assert cap.stdout.count("Traceback") == 1 or "RuntimeError" in cap.stdout
        err = cap.stderr.splitlines()
        assert len(err) == 1 and "listener" in err[0] and "SystemExit" in err[0], err
        assert shell.run_cell("1 + 1").result == 2
        for name in ("meta_obj", "odd", "held"):
            shell.user_ns.pop(name, None)


# -- scripts and pytest -----------------------------------------------------------------------

SCRIPT = textwrap.dedent("""
    import sys
    import torch
    import ipydevice

    def hostile():
        # Built in a function: pytest's collection reads module-level classes itself.
        class Meta(type):
            def __getattribute__(cls, name):
                raise SystemExit(f"metaclass refused {name}")

        class Odd(torch.Tensor):
            @property
            def device(self):
                raise SystemExit(7)

        class Hostile(metaclass=Meta):
            pass

        odd = torch.ones(2).as_subclass(Odd)
        return [Hostile(), odd, {"t": odd}]

    @ipydevice.on_diagnosis
    def listener(diagnosis):
        sys.exit(5)

    held = hostile()
    model = torch.nn.Linear(4, 2).to("meta")
    x = torch.randn(3, 4)
    model(x)
""")


def run_python(*args: str, cwd: Any) -> subprocess.CompletedProcess[str]:
    import os

    env = {k: v for k, v in os.environ.items() if k != "IPYDEVICE_DEBUG"}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=120, env=env, cwd=cwd
    )


@pytest.mark.slow
def test_a_script_exits_as_plain_python_does(tmp_path: Any) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    plain = run_python(str(script), cwd=tmp_path)
    ours = run_python("-m", "ipydevice", "run", str(script), cwd=tmp_path)
    assert plain.returncode == ours.returncode == 1, (ours.returncode, ours.stderr[-2000:])
    assert "RuntimeError" in ours.stderr and "device error" in ours.stderr
    extra = [line for line in ours.stderr.splitlines() if line.startswith("ipydevice:")]
    assert len(extra) == 1 and "listener" in extra[0] and "SystemExit" in extra[0], extra


@pytest.mark.slow
def test_pytest_gets_no_internal_error(pytester: pytest.Pytester) -> None:
    body = SCRIPT.replace("model(x)\n", "")
    pytester.makepyfile(
        test_model=body
        + textwrap.dedent("""
            def test_forward():
                local = hostile()
                model(x)
        """)
    )
    result = pytester.runpytest_subprocess("-p", "ipydevice")
    result.assert_outcomes(failed=1)
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text
    assert "device error" in text
