"""A module registry wider than ``max_items`` (a ParameterList of 100,000
parameters): ``%devices`` and ``check()`` count all of it, name one tensor on
another device, and say what they did not read."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from shells import run, run_captured, singleton_shell

import ipydevice
from ipydevice import settings


@pytest.fixture(autouse=True)
def _settings() -> Iterator[None]:
    saved = settings.current()
    yield
    settings.configure(time_budget=saved.time_budget, max_items=saved.max_items)


def _wide(count: int, odd: int | None, buffers: bool = False) -> torch.nn.Module:
    model = torch.nn.Module()
    if buffers:  # a variation: buffers, registered one by one on a plain module
        for i in range(count):
            model.register_buffer(f"b{i}", torch.zeros(2, device="meta" if i == odd else "cpu"))
        return model
    params = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(2)) for _ in range(count)])
    if odd is not None:
        params[odd] = torch.nn.Parameter(torch.zeros(2, device="meta"))
    model.params = params
    return model


def test_a_parameterlist_of_100000_is_counted_whole_and_its_odd_one_named() -> None:
    settings.configure(time_budget=60.0)  # all of it counted, however loaded the machine
    model = _wide(100_000, 77_777)
    inv = ipydevice.inventory({"model": model})
    assert sum(s.count for s in inv.totals) == 100_000, inv.totals
    (row,) = inv.records
    assert "100000 parameters" in row.detail and row.device == "mixed"
    assert {s.device: s.count for s in row.shares} == {"cpu": 99_999, "meta": 1}
    check = ipydevice.check(namespace={"model": model})
    assert check and "77777" in check.problems[0].why, check


@pytest.mark.parametrize("buffers", [False, True], ids=["parameters", "buffers"])
def test_a_wide_registry_past_max_items(buffers: bool) -> None:
    settings.configure(max_items=10)
    model = _wide(500, 321, buffers=buffers)
    check = ipydevice.check(namespace={"model": model})
    assert check and "321" in check.problems[0].why, check
    total = sum(s.count for s in ipydevice.inventory({"model": model}).totals)
    assert total == 500


def test_what_was_not_read_is_said_and_check_does_not_claim_all_clear() -> None:
    settings.configure(time_budget=0.001)  # nothing past the first read ones is counted
    model = _wide(20_000, None)
    inv = ipydevice.inventory({"model": model})
    assert any("of 20,000 parameters were read" in n for n in inv.notes), inv.notes
    assert "note: model.params: the devices of" in str(inv)
    check = ipydevice.check(namespace={"model": model})
    text, html = str(check), check._repr_html_()
    assert "no device problems found in what was read" in text and "20,000 parameters" in text
    assert "in what was read" in html and "20,000 parameters" in html


def test_devices_magic_on_a_wide_model() -> None:
    with singleton_shell(reset=True) as shell:
        shell.run_line_magic("load_ext", "ipydevice")
        run(
            shell,
            "import torch\nmodel = torch.nn.Module()\n"
            "model.params = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(2)) for _ in range(3000)])\n"
            "model.params[2999] = torch.nn.Parameter(torch.zeros(2, device='meta'))\n",
        )
        shell.run_line_magic("config", "IPyDevice.time_budget = 60.0")
        cap, _ = run_captured(shell, "%devices")
        assert "3000 parameters" in cap.stdout and "2999" in cap.stdout, cap.stdout
        cap, result = run_captured(shell, "%devices --check")
        assert result.result and "2999" in cap.stdout, cap.stdout


def test_a_modulelist_wider_than_max_items_says_so() -> None:
    settings.configure(max_items=10)
    model = torch.nn.Module()
    model.experts = torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(30)])
    inv = ipydevice.inventory({"model": model})
    assert any("10 of 30 submodules" in n for n in inv.notes), inv.notes
    assert "in what was read" in str(ipydevice.check(namespace={"model": model}))
