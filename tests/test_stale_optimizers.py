"""The optimizer's parameters are not the model's: re-running the model's cell (or
replacing a layer) after the optimizer was made leaves training updating nothing."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator

import pytest
from cells import Notebook
from IPython.core.interactiveshell import InteractiveShell
from shells import run, run_captured, singleton_shell

import ipydevice

BUILT = """
import copy
import torch, torch.nn as nn
model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
"""
AGAIN = "model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))\n"


def _nb(*cells: str) -> Notebook:
    nb = Notebook()
    for cell in cells:
        nb.run(textwrap.dedent(cell))
    return nb


def _rules(checkup: ipydevice.Checkup) -> list[str]:
    return [p.rule for p in checkup.problems]


def test_a_live_optimizer_is_not_flagged():
    nb = _nb(BUILT)
    assert "stale_optimizer" not in _rules(ipydevice.check(namespace=nb.ns))


def test_the_model_cell_run_again_leaves_the_optimizer_stale():
    nb = _nb(BUILT, AGAIN)
    checkup = ipydevice.check(namespace=nb.ns)
    (problem,) = [p for p in checkup.problems if p.rule == "stale_optimizer"]
    assert problem.name == "opt"
    assert "none of its 4 parameters is `model`'s" in problem.why
    assert "training updates nothing" in problem.why
    fix = next(f for f in checkup.fixes if "opt = " in f.code)
    assert fix.code.startswith("opt = type(opt)(model.parameters(), **opt.defaults)")
    assert fix.apply(nb.ns).ok  # Apply: made again, by reference
    assert nb.ns["opt"].defaults["lr"] == 0.1
    assert "stale_optimizer" not in _rules(ipydevice.check(namespace=nb.ns))
    nb.run(fix.code + "\n")  # the code says the same
    assert "stale_optimizer" not in _rules(ipydevice.check(namespace=nb.ns))


def test_a_replaced_layer_is_flagged_in_part():
    nb = _nb(BUILT, "model[1] = nn.Linear(8, 2)\n")
    (problem,) = [
        p for p in ipydevice.check(namespace=nb.ns).problems if p.rule == "stale_optimizer"
    ]
    assert "2 of its 4 parameters are no longer `model`'s" in problem.why


def test_an_optimizer_over_a_live_subset_is_never_flagged():
    nb = _nb(BUILT, "head_opt = torch.optim.SGD(model[1].parameters(), lr=0.1)\nopt = head_opt\n")
    assert "stale_optimizer" not in _rules(ipydevice.check(namespace=nb.ns))


def test_an_optimizer_over_other_tensors_is_not_flagged():
    nb = _nb(BUILT, "w = torch.zeros(3, requires_grad=True)\nopt = torch.optim.SGD([w], lr=0.1)\n")
    assert "stale_optimizer" not in _rules(ipydevice.check(namespace=nb.ns))


def test_the_model_given_to_check_is_the_one_named():
    """Two look-alikes (the rebuilt model and an EMA copy of it): the one given wins."""
    nb = _nb(BUILT, AGAIN, "ema = copy.deepcopy(model)\n")
    ns = nb.ns
    checkup = ipydevice.check(ns["ema"], ns["opt"], namespace=ns)
    (problem,) = [p for p in checkup.problems if p.rule == "stale_optimizer"]
    assert "`ema`'s" in problem.why
    checkup = ipydevice.check(ns["model"], ns["opt"], namespace=ns)
    (problem,) = [p for p in checkup.problems if p.rule == "stale_optimizer"]
    assert "`model`'s" in problem.why


def test_an_optimizer_given_alone_is_not_judged():
    """check(opt) alone has no model to compare with: no guess."""
    nb = _nb(BUILT, AGAIN)
    assert "stale_optimizer" not in _rules(ipydevice.check(nb.ns["opt"], namespace=nb.ns))


@pytest.fixture
def ip() -> Iterator[InteractiveShell]:
    with singleton_shell(reset=True) as shell:
        shell.run_line_magic("load_ext", "ipydevice")
        run(shell, BUILT)
        yield shell


def test_devices_check_magic_shows_it(ip: InteractiveShell) -> None:
    run(ip, AGAIN)
    _, result = run_captured(ip, "%devices --check")
    assert "stale_optimizer" in [p.rule for p in result.result.problems]


@pytest.mark.slow
def test_watch_mode_warns_when_the_model_cell_runs_again(ip: InteractiveShell) -> None:
    run(ip, "%config IPyDevice.watch = True")
    cap, _ = run_captured(ip, AGAIN)
    shown = [
        o.data["text/plain"]
        for o in cap.outputs
        if "ipydevice-watch" in o.data.get("text/html", "")
    ]
    assert len(shown) == 1 and "opt" in shown[0] and "training updates nothing" in shown[0]
    cap, _ = run_captured(ip, "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n")
    assert not [o for o in cap.outputs if "ipydevice-watch" in o.data.get("text/html", "")]
