"""ipydevice's own audits are plugins: ``ipydevice.plugins`` lists them, and removing
one takes it out of ``check()``, ``%devices`` (and ``--check``) and the error panel."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from shells import panels, run, run_captured, singleton_shell

import ipydevice
from ipydevice import plugins, registry
from ipydevice.audits import BUILTIN, modules
from ipydevice.model import Finding, Problem

torch = pytest.importorskip("torch")

SETUP = """
import torch, torch.nn as nn

class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(4, 4)
        self.layers = [nn.Linear(4, 4)]

    def forward(self, x):
        x = self.inp(x)
        for layer in self.layers:
            x = layer(x)
        return x

model = Stack().to('meta')
x = torch.randn(2, 4, device='meta')
"""
RULE = "plain_list"  # what the "modules" audit says about model.layers
WHY = "a plain list of 1 module"


@pytest.fixture
def restore() -> Iterator[None]:
    saved = registry.audits()
    yield
    for audit in registry.audits():
        registry.remove_audit(audit.name)
    for audit in saved:
        registry.add_audit(audit)


@pytest.fixture
def shell() -> Iterator[Any]:
    with singleton_shell(reset=True) as ip:
        ip.run_line_magic("load_ext", "ipydevice")
        run(ip, SETUP)
        yield ip


def _namespace() -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(SETUP, namespace)
    return namespace


def test_plugins_lists_the_builtin_audits() -> None:
    names = plugins.audits()
    assert names[: len(BUILTIN)] == tuple(a.name for a in BUILTIN)
    assert set(names) >= {"modules", "wrappers", "optimizers", "loaders", "companions"}


@pytest.mark.usefixtures("restore")
def test_removing_an_audit_removes_it_from_check_and_inventory() -> None:
    namespace = _namespace()
    assert RULE in {p.rule for p in ipydevice.check(namespace["model"], namespace={}).problems}
    assert RULE in {p.rule for p in ipydevice.inventory(namespace).problems}
    assert plugins.remove("modules")
    assert "modules" not in plugins.audits()
    assert RULE not in {p.rule for p in ipydevice.check(namespace["model"], namespace={}).problems}
    assert RULE not in {p.rule for p in ipydevice.inventory(namespace).problems}


@pytest.mark.usefixtures("restore")
@pytest.mark.slow
def test_removing_an_audit_removes_it_from_the_panel_and_devices(shell: Any) -> None:
    def marked(entry: Any, factories: bool = True) -> list[Problem]:
        """The "modules" audit, with a finding no other stage would make."""
        found = modules.module_problems(entry, factories)
        if entry.module is None:
            return found
        why = "MARK: seen by the modules audit"
        return [
            *found,
            Problem(Finding("model", "cpu", "module", entry.where, why, rule="plain_list")),
        ]

    registry.add_audit(registry.Audit("modules", marked))
    cap, _ = run_captured(shell, "out = model(x)")
    assert "MARK" in panels(cap)[0]["text/html"]
    assert RULE in {p.rule for p in shell.run_line_magic("devices", "--check").problems}
    assert plugins.remove("modules")
    cap, _ = run_captured(shell, "out = model(x)")
    assert "MARK" not in panels(cap)[0]["text/html"]
    assert RULE not in {p.rule for p in shell.run_line_magic("devices", "--check").problems}
    assert RULE not in {p.rule for p in shell.run_line_magic("devices", "").problems}


@pytest.mark.usefixtures("restore")
def test_an_audit_runs_on_tensors_unless_it_says_it_does_not() -> None:
    """``tensors=False`` (the built-in audits of modules, optimizers and loaders):
    ``%devices`` over a namespace of tensors never calls it for each tensor; an audit
    registered without it sees every object, tensors included."""
    import torch

    seen: dict[str, list[str]] = {"all": [], "objects": []}

    def record(label: str) -> Any:
        def run(entry: Any) -> list[Problem]:
            seen[label].append(entry.kind)
            return []

        return run

    registry.add_audit(registry.Audit("sees_all", record("all")))
    registry.add_audit(registry.Audit("sees_objects", record("objects"), tensors=False))
    namespace = {"a": torch.zeros(2), "b": torch.ones(3), "net": torch.nn.Linear(2, 2)}
    ipydevice.inventory(namespace)
    assert sorted(seen["all"]) == ["module", "tensor", "tensor"]
    assert seen["objects"] == ["module"]
    assert all(not a.tensors for a in BUILTIN if not a.companion)
