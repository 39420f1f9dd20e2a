"""The panel widget without a frontend: structure, Apply, Copy, Insert, failures."""

from __future__ import annotations

import pytest
from cells import Notebook

import ipydevice
from ipydevice.render.widget import build_panel, panel_bundle

w = pytest.importorskip("ipywidgets")

SETUP = "import torch\nimport torch.nn as nn\nmodel = nn.Linear(4, 2).to('meta')\nx = torch.randn(3, 4)\n"


def diagnosis(nb: Notebook):
    nb.run(SETUP)
    return ipydevice.diagnose(nb.fails("out = model(x)\n"), namespace=nb.ns)


def walk(widget) -> list:
    return [widget, *(w for child in getattr(widget, "children", ()) for w in walk(child))]


def with_class(widget, name: str) -> list:
    found = [widget] if name in getattr(widget, "_dom_classes", ()) else []
    for child in getattr(widget, "children", ()):
        found.extend(with_class(child, name))
    return found


def test_panel_structure(nb):
    panel = build_panel(diagnosis(nb), lambda: nb.ns, insert=lambda code: None)
    assert "ipydevice-panel" in panel._dom_classes
    header = panel.children[0].value
    assert "<code" in header and "x</code> is on cpu" in header
    assert len(with_class(panel, "ipydevice-apply")) == 1  # only the namespace fix applies
    assert len(with_class(panel, "ipydevice-status")) == 1
    assert with_class(panel, "ipydevice-insert")


def test_apply_moves_the_live_object_and_says_so(nb):
    d = diagnosis(nb)
    panel = build_panel(d, lambda: nb.ns)
    with_class(panel, "ipydevice-apply")[0].click()
    status = with_class(panel, "ipydevice-status")[0].value
    assert "moved x to meta" in status and "Re-run the cell" in status
    assert nb.ns["x"].device.type == "meta"
    nb.run("out = model(x)\n")


def test_failing_apply_reports_cleanly(nb):
    d = diagnosis(nb)
    panel = build_panel(d, lambda: nb.ns)
    del nb.ns["x"]
    with_class(panel, "ipydevice-apply")[0].click()
    status = with_class(panel, "ipydevice-status")[0].value
    assert "✘" in status and "x no longer exists" in status


def test_exception_in_a_callback_shows_in_the_widget(nb):
    d = diagnosis(nb)

    def broken_namespace():
        raise RuntimeError("kernel state unavailable")

    panel = build_panel(d, broken_namespace)
    with_class(panel, "ipydevice-apply")[0].click()
    assert "kernel state unavailable" in with_class(panel, "ipydevice-status")[0].value


def test_insert_queues_the_code(nb):
    queued = []
    panel = build_panel(diagnosis(nb), lambda: nb.ns, insert=queued.append)
    with_class(panel, "ipydevice-insert")[0].click()
    assert queued == ["x = x.to('meta')"]
    assert "next cell runs" in with_class(panel, "ipydevice-status")[0].value


def test_copy_button_carries_the_code(nb):
    pytest.importorskip("anywidget")
    panel = build_panel(diagnosis(nb), lambda: nb.ns)
    copies = [w for w in walk(panel) if hasattr(w, "copies")]
    assert copies[0].text == "x = x.to('meta')"


def test_widget_keeps_no_tensor(nb):
    import gc
    import weakref

    d = diagnosis(nb)
    ref = weakref.ref(nb.ns["x"])
    panel = build_panel(d, lambda: nb.ns)
    nb.ns.clear()
    import sys

    for name in ("last_exc", "last_value", "last_traceback"):
        if hasattr(sys, name):
            setattr(sys, name, None)
    gc.collect()
    assert ref() is None
    assert panel is not None


def test_bundle_has_widget_html_and_text(nb):
    bundle = panel_bundle(diagnosis(nb), lambda: nb.ns)
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "ipydevice-panel" in bundle["text/html"] and "<script" not in bundle["text/html"]
    assert bundle["text/plain"].startswith("ipydevice · device error")
