"""``%devices --check``: the preflight, wiring :func:`ipydevice.audits.checkup.check` into IPython.

``meta`` stands in for the accelerator: a correct setup has the model, the batch,
the optimizer state and the loss weights all on meta, with the CPU scalars that
are fine on any device (a 0-dim ``lr``, Adam's ``step`` counters).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from shells import run, run_captured, singleton_shell

from ipydevice.audits import checkup as audits

GOOD = """\
import torch, torch.nn as nn
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).to('meta')
batch = {'x': torch.randn(2, 4, device='meta'), 'y': torch.zeros(2, dtype=torch.long, device='meta')}
criterion = nn.CrossEntropyLoss(weight=torch.ones(3, device='meta'))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for p in model.parameters():
    opt.state[p] = {'step': torch.tensor(3.0), 'exp_avg': torch.zeros_like(p), 'exp_avg_sq': torch.zeros_like(p)}
lr = torch.tensor(0.1)
"""
BREAK = """\
batch = {'x': torch.randn(2, 4), 'y': torch.zeros(2, dtype=torch.long)}
criterion = nn.CrossEntropyLoss(weight=torch.ones(3))
p0 = next(model.parameters())
opt.state[p0]['exp_avg'] = torch.zeros(p0.shape)
model.cache = torch.zeros(3)
"""


@pytest.fixture
def ip() -> Iterator[InteractiveShell]:
    with singleton_shell(reset=True) as shell:
        shell.run_line_magic("load_ext", "ipydevice")
        run(shell, GOOD)
        yield shell


def test_a_correct_setup_has_no_problems(ip: InteractiveShell) -> None:
    cap, result = run_captured(ip, "%devices --check")
    checkup = result.result
    assert isinstance(checkup, audits.Checkup)
    assert not checkup and checkup.problems == () and checkup.fixes == ()
    assert "no device problems found" in cap.stdout  # shown as the cell's output
    assert "no device problems found" in checkup._repr_html_()
    assert cap.stderr == ""


def test_a_broken_setup_lists_every_problem_with_fixes(ip: InteractiveShell) -> None:
    run(ip, BREAK)
    cap, result = run_captured(ip, "%devices --check")
    checkup = result.result
    assert checkup
    names = {p.name for p in checkup.problems}
    assert {"batch", "criterion", "opt.state", "model.cache"} <= names
    rules = {p.name: p.rule for p in checkup.problems}
    assert rules["opt.state"] == "optimizer_state"
    assert rules["model.cache"] == "unregistered_tensor"
    assert "lr" not in names  # a CPU scalar is fine
    assert "batch = {k: v.to('meta')" in str(checkup)
    assert "ipydevice · check: 4 problems" in cap.stdout
    assert "ipydevice-panel" in checkup._repr_html_()


def test_fixes_listed_by_check_can_be_applied(ip: InteractiveShell) -> None:
    run(ip, BREAK)
    checkup = ip.run_line_magic("devices", "--check")
    for fix in checkup.fixes:
        if fix.can_apply:
            assert fix.apply(ip.user_ns).ok, fix.title
    again = ip.run_line_magic("devices", "--check")
    assert {p.name for p in again.problems} <= {"model.cache"}  # .to() will leave it behind again


def test_assignment_keeps_the_checkup(ip: InteractiveShell) -> None:
    run(ip, BREAK)
    cap, _ = run_captured(ip, "c = %devices --check")
    checkup = ip.user_ns["c"]
    assert isinstance(checkup, audits.Checkup) and len(checkup.problems) == 4
    assert cap.stdout == "" and cap.outputs == []  # assigned, not displayed
    assert list(checkup.table()["name"]) == [p.name for p in checkup.problems]


def test_names_limit_the_check(ip: InteractiveShell) -> None:
    run(ip, BREAK)
    checkup = ip.run_line_magic("devices", "--check model batch")
    assert {p.name for p in checkup.problems} == {"model.cache", "batch"}
    checkup = ip.run_line_magic("devices", "--check model lr")
    assert {p.name for p in checkup.problems} == {"model.cache"}
    checkup = ip.run_line_magic("devices", "--check model[0] batch")  # paths are resolved
    assert [p.name for p in checkup.problems] == ["batch"]
    assert "model[0]" in checkup.problems[0].why


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("--check nope", "no variable named 'nope'"),
        ("--check model nope", "no variable named 'nope'"),
        ("--check model.nope", "'model.nope' has no such attribute or item"),
        ("--check batch['zz']", "has no such attribute or item"),
        ("--check --last", "--check takes neither --last nor --all"),
        ("--check -a", "--check takes neither --last nor --all"),
    ],
)
def test_bad_names_are_usage_errors(ip: InteractiveShell, line: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        ip.run_line_magic("devices", line)
    cap, result = run_captured(ip, f"%devices {line}")
    assert isinstance(result.error_in_exec, UsageError)
    assert message.split("'")[0] in cap.stderr + cap.stdout


def test_check_is_documented_in_the_help(ip: InteractiveShell) -> None:
    doc = ip.find_line_magic("devices").__doc__
    assert "--check" in doc and "c = %devices --check" in doc


def failing_check(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("audit exploded")


def test_a_failing_check_is_one_line_on_stderr(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audits, "check", failing_check)
    monkeypatch.setenv("IPYDEVICE_DEBUG", "0")
    cap, result = run_captured(ip, "%devices --check")
    assert result.success and result.result is None
    assert cap.stderr.strip() == (
        "ipydevice: check failed (RuntimeError: audit exploded); set IPYDEVICE_DEBUG=1 for details"
    )


def test_a_failing_check_raises_when_debugging(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audits, "check", failing_check)
    with pytest.raises(RuntimeError, match="audit exploded"):
        ip.run_line_magic("devices", "--check")


def test_devices_shows_max_rows_problems_and_counts_the_rest(ip: InteractiveShell) -> None:
    """400 stray tensors beside a model: ``%devices`` lists ``max_rows`` problems, says
    how many more there are (all of them are in ``.problems``), in text and HTML."""
    from ipydevice.settings import current

    run(
        ip,
        "import torch\nmodel = torch.nn.Linear(2, 2).to('meta')\n"
        "for _i in range(400):\n    globals()[f'stray{_i}'] = torch.zeros(1)",
    )
    try:
        inv = ip.run_line_magic("devices", "")
        limit = current().max_rows
        assert len(inv.problems) == 400
        text, html = str(inv), inv._repr_html_()
        assert text.count("✗ stray") == limit and html.count("<li><code") == limit
        more = f"{400 - limit} more problems (.problems lists all)"
        assert more in text and more in html
    finally:
        run(ip, "for _i in range(400):\n    del globals()[f'stray{_i}']")
