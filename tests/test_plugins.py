"""Plugins: your own audits, device-error wordings and diagnosis listeners.

Each extension point is shown working end to end (check(), %devices --check, the error
panel, the IPython hook, the scripts' hook), and each is shown unable to hurt: a plugin
that raises or returns junk is reported in one line and skipped, what it returns is
escaped, Apply follows only well-formed steps, and re-registering replaces.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from cells import Notebook
from IPython.core.interactiveshell import InteractiveShell
from shells import panels, run, run_captured, singleton_shell

import ipydevice
from ipydevice import plugins
from ipydevice.diagnosis.recognise import recognise
from ipydevice.model import Finding, Fix, Problem, Step

SETUP = """
import torch
import torch.nn as nn

class KVCache:
    def __init__(self, n, device='cpu'):
        self.keys = torch.zeros(n, 4, device=device)  # rows for a batch of up to n

    def to(self, device):
        return KVCache(self.keys.shape[0], device=device)

class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.cache = KVCache(3)

    def forward(self, x):
        return self.proj(x) + self.cache.keys[: x.shape[0]]

model = Decoder().to('meta')   # .to() cannot see the cache: it is no module nor tensor
x = torch.zeros(2, 4, device='meta')
cache = KVCache(3)
"""


@pytest.fixture(autouse=True)
def clean() -> Iterator[None]:
    """Every test starts and ends with empty registries."""
    saved = (dict(plugins._AUDITS), dict(plugins._MESSAGES), dict(plugins._LISTENERS))
    for registry in (plugins._AUDITS, plugins._MESSAGES, plugins._LISTENERS):
        registry.clear()
    yield
    for registry, before in zip(
        (plugins._AUDITS, plugins._MESSAGES, plugins._LISTENERS), saved, strict=True
    ):
        registry.clear()
        registry.update(before)


@pytest.fixture
def ipshell() -> Iterator[InteractiveShell]:
    """The in-process shell, ipydevice unloaded before and after, SETUP's names removed."""
    with singleton_shell() as shell:
        yield shell
        for name in ("KVCache", "Decoder", "model", "x", "cache", "out"):
            shell.user_ns.pop(name, None)


def kv_cache_audit() -> Any:
    """The audit of the module docstring, for the KVCache of SETUP."""

    @ipydevice.audit("kv_cache")
    def kv_cache_device(obj: Any, context: plugins.AuditContext) -> Iterator[Any]:
        holders = [(context.name, obj)] if type(obj).__name__ == "KVCache" else []
        if isinstance(obj, torch.nn.Module):
            holders += [
                (f"{context.name}.{k}", v)
                for k, v in vars(obj).items()
                if type(v).__name__ == "KVCache"
            ]
        for name, cache in holders:
            device = str(cache.keys.device)
            if context.device and device != context.device:
                path = tuple(
                    ("name" if i == 0 else "attr", part) for i, part in enumerate(name.split("."))
                )
                yield Problem(
                    Finding(
                        name=name,
                        device=device,
                        kind="KVCache",
                        where=context.where,
                        why=f"the cache is on {device}, the model on {context.device}",
                        target=context.device,
                    ),
                    (
                        Fix(
                            title=f"Move {name} to {context.device}",
                            code=f"{name} = {name}.to({context.device!r})",
                            scope="namespace",
                            steps=(Step("reassign", path, context.device),),
                        ),
                    ),
                )

    return kv_cache_device


def notebook() -> Notebook:
    nb = Notebook()
    nb.run(textwrap.dedent(SETUP))
    return nb


# -- audits -----------------------------------------------------------------------------------


def test_an_audit_joins_check_and_its_fix_applies() -> None:
    kv_cache_audit()
    nb = notebook()
    checkup = ipydevice.check(namespace=nb.ns, names=["model", "cache"])
    found = [f for f in checkup.problems if f.rule == "kv_cache"]
    assert [(f.name, f.device, f.target) for f in found] == [
        ("model.cache", "cpu", "meta"),
        ("cache", "cpu", "meta"),
    ]
    assert "kv_cache" in plugins.audits()
    for fix in [f for f in checkup.fixes if "cache" in f.code]:
        assert fix.apply(nb.ns).ok
    after = ipydevice.check(namespace=nb.ns, names=["model", "cache"])
    assert not [f for f in after.problems if f.rule == "kv_cache"]
    assert str(nb.ns["cache"].keys.device) == "meta"


def test_an_audit_explains_the_error_panel() -> None:
    kv_cache_audit()
    nb = notebook()
    d = ipydevice.diagnose(nb.fails("out = model(x)\n"), namespace=nb.ns)
    assert d.is_device_error and d.target == "meta"
    causes = [c for c in d.causes if c.rule == "kv_cache"]
    assert [c.name for c in causes] == ["model.cache"]
    fix = next(f for f in d.fixes if f.code == "model.cache = model.cache.to('meta')")
    assert fix.apply(nb.ns).ok
    nb.run("out = model(x)\n")  # the fix made the failed cell run


def test_devices_check_runs_the_audits(ipshell: InteractiveShell) -> None:
    kv_cache_audit()
    ipshell.run_line_magic("load_ext", "ipydevice")
    run(ipshell, textwrap.dedent(SETUP))
    checkup = ipshell.run_line_magic("devices", "--check model cache")
    assert "kv_cache" in {f.rule for f in checkup.problems}
    assert "model.cache" in str(checkup)


def test_a_finding_keeps_its_own_rule_and_takes_the_audit_name_by_default() -> None:
    @ipydevice.audit("named")
    def named(obj: Any, context: plugins.AuditContext) -> list[Finding]:
        base = {"device": "cpu", "kind": "thing", "where": context.where, "why": "w"}
        return [Finding(name="a", **base), Finding(name="b", rule="my_rule", **base)]

    checkup = ipydevice.check(object(), namespace={})
    assert [(f.name, f.rule) for f in checkup.problems] == [("a", "named"), ("b", "my_rule")]


def test_registering_again_replaces() -> None:
    for word in ("first", "second"):

        @ipydevice.audit("same")
        def same(obj: Any, context: plugins.AuditContext, word: str = word) -> Finding:
            return Finding(name=word, device="cpu", kind="k", where="w", why="y")

    assert plugins.own_audits() == ("same",) and plugins.audits()[-1] == "same"
    assert [f.name for f in ipydevice.check(object(), namespace={}).problems] == ["second"]
    assert plugins.remove("same") and plugins.own_audits() == ()
    assert "same" not in plugins.audits()
    assert not plugins.remove("same")


def test_a_failing_audit_is_one_note(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("IPYDEVICE_DEBUG", raising=False)

    @ipydevice.audit("boom")
    def boom(obj: Any, context: plugins.AuditContext) -> None:
        raise RuntimeError("the audit itself is broken")

    checkup = ipydevice.check(object(), namespace={})
    assert not checkup.problems
    (note,) = checkup.notes
    assert "audit 'boom' failed (RuntimeError: the audit itself is broken)" in note
    nb = notebook()
    d = ipydevice.diagnose(nb.fails("out = model(x)\n"), namespace=nb.ns)
    assert d.culprits and any("audit 'boom' failed" in n for n in d.notes)


def test_a_failing_audit_raises_when_debugging(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IPYDEVICE_DEBUG", "1")

    @ipydevice.audit("boom")
    def boom(obj: Any, context: plugins.AuditContext) -> None:
        raise RuntimeError("loud")

    with pytest.raises(RuntimeError, match="loud"):
        ipydevice.check(object(), namespace={})


def test_what_is_not_a_finding_is_dropped_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("IPYDEVICE_DEBUG", raising=False)
    good = Finding(name="ok", device="cpu", kind="k", where="w", why="y")
    bad_fixes = (
        Fix(title="t", code="c", scope="everywhere"),  # no such scope
        Fix(title="t", code="c", scope="namespace", steps=(Step("exec", (("name", "x"),), "cpu"),)),
        Fix(title="t", code="c", scope="namespace", steps=(Step("reassign", (), "cpu"),)),
        Fix(title=1, code="c", scope="cell"),  # type: ignore[arg-type]
    )
    kept_fix = Fix(title="move", code="x = x.to('cpu')", scope="namespace")

    @ipydevice.audit("junk")
    def junk(obj: Any, context: plugins.AuditContext) -> list[Any]:
        return [
            42,
            Finding(name=object(), device="cpu", kind="k", where="w", why="y"),  # type: ignore[arg-type]
            Problem(good, (*bad_fixes, kept_fix)),
        ]

    checkup = ipydevice.check(object(), namespace={})
    assert [f.name for f in checkup.problems] == ["ok"]
    assert checkup.fixes == (kept_fix,)
    assert sum("returned a" in n for n in checkup.notes) == 2


def test_an_audit_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("IPYDEVICE_DEBUG", raising=False)

    @ipydevice.audit("chatty")
    def chatty(obj: Any, context: plugins.AuditContext) -> Iterator[Finding]:
        for index in range(10**9):  # endless: only the first MAX_PER_CALL are read
            yield Finding(name=f"t{index}", device="cpu", kind="k", where="w", why="y")

    checkup = ipydevice.check(object(), namespace={})
    assert len(checkup.problems) == plugins.MAX_PER_CALL
    assert any("only its first" in n for n in checkup.notes)


def test_plugin_text_is_escaped() -> None:
    evil = "<img src=x onerror=alert(1)>"

    @ipydevice.audit("evil")
    def evil_audit(obj: Any, context: plugins.AuditContext) -> Problem:
        finding = Finding(name=evil, device="cpu", kind=evil, where=evil, why=evil)
        return Problem(finding, (Fix(title=evil, code=evil, scope="cell"),))

    html = ipydevice.check(object(), namespace={})._repr_html_()
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_registering_needs_a_name_and_a_function() -> None:
    with pytest.raises(ValueError, match="needs a name"):
        ipydevice.audit("")
    with pytest.raises(TypeError):
        ipydevice.audit("x")(42)
    with pytest.raises(TypeError):
        ipydevice.on_diagnosis(42)


# -- messages ---------------------------------------------------------------------------------

FLASH = "mylib kernel: operand k resides in cpu memory, expected meta"


def test_a_registered_wording_makes_a_device_error() -> None:
    assert not recognise(FLASH).is_device_error
    ipydevice.message(
        r"mylib kernel: operand \w+ resides in (?P<offending>\S+) memory, expected (?P<expected>\S+)"
    )
    facts = recognise(FLASH)
    assert facts.is_device_error and facts.family == "op_mismatch"
    assert (facts.expected, facts.offending, facts.devices) == ("meta", "cpu", ("cpu", "meta"))
    oom = "CUDA out of memory. " + FLASH
    assert not recognise(oom, "OutOfMemoryError").is_device_error


def test_a_registered_wording_names_the_culprit() -> None:
    ipydevice.message(r"mylib kernel: operand \w+ resides in", exc_types=["RuntimeError"])
    nb = Notebook()
    nb.run(
        "import torch\n"
        "def flash(q, k):\n"
        f"    raise RuntimeError({FLASH!r})\n"
        "q = torch.zeros(2, device='meta')\n"
        "k = torch.zeros(2)\n"
    )
    d = ipydevice.diagnose(nb.fails("out = flash(q, k)\n"), namespace=nb.ns)
    assert d.is_device_error and d.target == "meta"
    assert [c.name for c in d.culprits] == ["k"]
    assert not recognise(FLASH, "ValueError").is_device_error  # exc_types filter


def test_a_builtin_wording_wins_and_a_pattern_can_be_removed() -> None:
    builtin = (
        "Expected all tensors to be on the same device, but found at least two devices, "
        "cuda:0 and cpu!"
    )
    before = recognise(builtin)
    ipydevice.message(r"same device", name="greedy")
    assert recognise(builtin) == before
    assert recognise("a same device story").is_device_error
    assert plugins.messages() == ("greedy",) and plugins.remove("greedy")
    assert not recognise("a same device story").is_device_error


# -- listeners --------------------------------------------------------------------------------


def test_a_listener_gets_every_panel_diagnosis(ipshell: InteractiveShell) -> None:
    seen: list[Any] = []

    @ipydevice.on_diagnosis
    def record(diagnosis: Any) -> None:
        seen.append(diagnosis)

    ipshell.run_line_magic("load_ext", "ipydevice")
    run(ipshell, textwrap.dedent(SETUP))
    cap, _ = run_captured(ipshell, "out = model(x)\n")
    assert panels(cap)
    assert len(seen) == 1 and seen[0].is_device_error and seen[0].target == "meta"
    run_captured(ipshell, "1 / 0\n")  # not a device error: no call
    assert len(seen) == 1


def test_a_failing_listener_is_one_line(
    ipshell: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("IPYDEVICE_DEBUG", raising=False)

    @ipydevice.on_diagnosis
    def broken(diagnosis: Any) -> None:
        raise ValueError("listener down")

    ipshell.run_line_magic("load_ext", "ipydevice")
    run(ipshell, textwrap.dedent(SETUP))
    cap, result = run_captured(ipshell, "out = model(x)\n")
    assert isinstance(result.error_in_exec, RuntimeError) and panels(cap)
    lines = [line for line in cap.stderr.splitlines() if "ipydevice" in line]
    assert len(lines) == 1 and "listener" in lines[0] and "listener down" in lines[0]


def test_the_scripts_hook_notifies_too() -> None:
    from ipydevice.integrations.excepthook import report_text

    seen: list[Any] = []
    ipydevice.on_diagnosis(seen.append)
    nb = notebook()
    assert report_text(nb.fails("out = model(x)\n"), namespace=nb.ns)
    assert len(seen) == 1 and seen[0].is_device_error
    assert plugins.remove(seen.append)


def test_devices_lists_an_audits_problems_and_notes_its_failures(
    ipshell: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("IPYDEVICE_DEBUG", raising=False)
    kv_cache_audit()
    ipshell.run_line_magic("load_ext", "ipydevice")
    run(ipshell, textwrap.dedent(SETUP))
    # By name: the singleton shell may hold other tests' models, and the whole
    # namespace's model is the one its modules agree on.
    inventory = ipshell.run_line_magic("devices", "model")
    assert "model.cache" in {p.name for p in inventory.problems if p.rule == "kv_cache"}

    @ipydevice.audit("boom")
    def boom(obj: Any, context: plugins.AuditContext) -> None:
        raise RuntimeError("down")

    inventory = ipshell.run_line_magic("devices", "model")
    assert any("audit 'boom' failed" in note for note in inventory.notes)


def test_the_namespace_inventory_runs_the_audits() -> None:
    """On what it lists (tensors, modules, optimizers, and every object holding
    tensors): ``model``, whose cache the audit finds, and the bare ``cache``
    object, listed since it holds tensors (as ``check()`` audits it)."""
    kv_cache_audit()
    nb = notebook()
    inventory = ipydevice.inventory(nb.ns)
    found = {p.name for p in inventory.problems if p.rule == "kv_cache"}
    assert found == {"model.cache", "cache"}
