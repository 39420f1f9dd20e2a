"""Error families are plugins: one file each, registered through plugins.

A toy family written in one module of its own (``tests/toy_family.py``) is
recognised, diagnosed, fixed and rendered with no other edit; each built-in
family's id is spelled in at most three package files.
"""

from __future__ import annotations

import importlib
import linecache
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import ipydevice
from ipydevice import plugins, registry
from ipydevice.diagnosis.families import BUILTIN
from ipydevice.diagnosis.recognise import recognise

torch = pytest.importorskip("torch")

PACKAGE = Path(ipydevice.__file__).parent


@pytest.fixture
def toy() -> Any:
    sys.modules.pop("toy_family", None)
    module = importlib.import_module("toy_family")
    yield module
    plugins.remove(module.ID)
    sys.modules.pop("toy_family", None)


def _cell(source: str, namespace: dict[str, Any], number: int) -> BaseException:
    name = f"<ipython-input-{number}-toyfamily>"
    linecache.cache[name] = (len(source), None, source.splitlines(keepends=True), name)
    try:
        exec(compile(source, name, "exec"), namespace)
    except Exception as exc:
        return exc
    raise AssertionError("the cell did not fail")


def _toykernel(q: Any, k: Any) -> Any:
    if q.device != k.device:
        raise RuntimeError(f"toykernel: q on {q.device} but k on {k.device}")
    return q + k


def test_builtin_families_are_listed_by_plugins() -> None:
    listed = plugins.families()
    assert [f.id for f in BUILTIN] == list(listed[: len(BUILTIN)])


def test_a_toy_family_from_one_module(toy: Any) -> None:
    assert toy.ID in plugins.families()
    facts = recognise("toykernel: q on meta but k on cpu")
    assert (facts.family, facts.expected, facts.offending) == (toy.ID, "meta", "cpu")

    namespace: dict[str, Any] = {"__name__": "__main__", "toykernel": _toykernel}
    namespace["q"] = torch.empty(4, device="meta")
    namespace["k"] = torch.ones(4)
    exc = _cell("out = toykernel(q, k)\n", namespace, 1)
    d = ipydevice.diagnose(exc, namespace=namespace)
    # diagnosed
    assert d.is_device_error and d.family == toy.ID
    assert d.summary.startswith("a toykernel call got q and k on different devices")
    assert d.target == "meta"
    assert [c.name for c in d.culprits] == ["k"]
    assert d.advice == "toykernel needs q and k together: move k to meta"
    # fixed: the usual move, and the family's own cell rewrite
    scopes = {f.scope: f for f in d.fixes}
    assert scopes["cell"].code == "out = toykernel(q, k.to(q.device))\n"
    assert d.fixes[0].apply(namespace).ok
    assert namespace["k"].device.type == "meta"
    # rendered
    assert toy.ID in str(d) and "k.to(q.device)" in str(d)
    assert "toykernel" in d._repr_html_()


def test_removing_a_family_removes_it_everywhere(toy: Any) -> None:
    assert plugins.remove(toy.ID)
    assert toy.ID not in plugins.families()
    assert not recognise("toykernel: q on meta but k on cpu").is_device_error


def test_a_family_must_be_a_family() -> None:
    with pytest.raises(TypeError):
        plugins.family("toy")  # type: ignore[arg-type]


@pytest.mark.parametrize("family", [f.id for f in BUILTIN])
def test_each_builtin_family_id_is_in_at_most_three_package_files(family: str) -> None:
    literal = re.compile(rf"""['"]{family}['"]""")
    files = sorted(
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if literal.search(path.read_text(encoding="utf-8"))
    )
    assert f"diagnosis/families/{family}.py" in files
    assert len(files) <= 3, files


def test_the_registry_orders_wordings_across_families() -> None:
    orders = [w.order for w in registry.wordings()]
    assert orders == sorted(orders)
