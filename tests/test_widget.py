"""The panel's buttons without a front end: what they offer, Apply, Copy, Insert, failures.

A click in the browser is a message to the kernel (``{"action": ..., "index": n}``);
:func:`ipydevice.render.widget.click` sends the same message from Python.
"""

from __future__ import annotations

import pytest
from cells import Notebook

import ipydevice
from ipydevice.render.widget import build_panel, click, view_bundle

pytest.importorskip("anywidget")

SETUP = "import torch\nimport torch.nn as nn\nmodel = nn.Linear(4, 2).to('meta')\nx = torch.randn(3, 4)\n"


def diagnosis(nb: Notebook, cell: str = "out = model(x)\n"):
    nb.run(SETUP)
    return ipydevice.diagnose(nb.fails(cell), namespace=nb.ns)


def test_one_row_per_fix_with_the_buttons_it_can_have(nb):
    d = diagnosis(nb)
    panel = build_panel(d, lambda: nb.ns, insert=lambda code: None, cell_id="abc")
    assert len(panel.fixes) == len(d.fixes)
    first = panel.fixes[0]
    assert first["code"] == "x = x.to('meta')"
    assert first["apply"] and first["insert"] and first["label"] == "Fix 1"
    assert [row["apply"] for row in panel.fixes] == [f.can_apply for f in d.fixes]
    assert panel.cell_id == "abc" and panel.status == ""
    # Without a namespace there is nothing to apply; without insert, nothing to insert.
    bare = build_panel(d)
    assert not any(row["apply"] or row["insert"] for row in bare.fixes)


def test_a_selection_of_fixes_keeps_their_numbers(nb):
    d = diagnosis(nb)
    panel = build_panel(d, lambda: nb.ns, fixes=[d.fixes[-1]])
    assert [row["label"] for row in panel.fixes] == [f"Fix {len(d.fixes)}"]


def test_apply_moves_the_live_object_and_says_so(nb):
    panel = build_panel(diagnosis(nb), lambda: nb.ns)
    click(panel, "apply")
    assert "moved x to meta" in panel.status and "Re-run the cell" in panel.status
    assert panel.status_ok
    assert nb.ns["x"].device.type == "meta"
    nb.run("out = model(x)\n")


def test_failing_apply_reports_cleanly(nb):
    panel = build_panel(diagnosis(nb), lambda: nb.ns)
    del nb.ns["x"]
    click(panel, "apply")
    assert not panel.status_ok and "x no longer exists" in panel.status


def test_exception_in_a_callback_shows_in_the_widget(nb):
    def broken_namespace():
        raise RuntimeError("kernel state unavailable")

    panel = build_panel(diagnosis(nb), broken_namespace)
    click(panel, "apply")
    assert not panel.status_ok and "kernel state unavailable" in panel.status


def test_insert_in_the_browser_and_the_fallback(nb):
    queued: list[str] = []
    panel = build_panel(diagnosis(nb), lambda: nb.ns, insert=queued.append)
    click(panel, "inserted")  # the browser added the cell below the failed one
    assert queued == [] and "below this one: run it, then re-run this cell" in panel.status
    click(panel, "insert")  # it could not: the kernel queues the code
    assert queued == ["x = x.to('meta')"]
    assert "cannot add cells from a widget" in panel.status
    assert "the next cell you run" in panel.status and panel.status_ok


@pytest.mark.parametrize(
    ("frontend", "says"),
    [
        ("vscode", "VS Code adds it as a new cell below the next cell you run"),
        ("colab", "Colab adds it as a new cell below the next cell you run"),
    ],
)
def test_insert_says_where_each_front_end_puts_the_cell(nb, frontend, says):
    queued: list[str] = []
    panel = build_panel(diagnosis(nb), lambda: nb.ns, insert=queued.append)
    click(panel, "insert", frontend=frontend)
    assert queued == ["x = x.to('meta')"] and says in panel.status


def test_insert_of_a_rewritten_cell_says_it_replaces_the_cell(nb):
    # a cell that makes its own input: only the cell rewritten moves it (a cell of
    # one line gets the move alone, which says the same)
    d = diagnosis(nb, "h = x * 2\nout = model(h)\n")
    index = next(i for i, fix in enumerate(d.fixes) if fix.scope == "cell")
    queued: list[str] = []
    panel = build_panel(d, lambda: nb.ns, insert=queued.append)
    assert "instead of the failed one" in panel.fixes[index]["insert_tip"]
    click(panel, "inserted", index)
    assert "replacement: run the new cell instead of this one" in panel.status
    assert "re-run" not in panel.status  # re-running the failed cell fails again
    assert panel.status_index == index
    click(panel, "insert", index, frontend="vscode")
    assert "run it instead of the failed cell" in panel.status and "re-run" not in panel.status


def test_a_copy_that_failed_says_so(nb):
    panel = build_panel(diagnosis(nb), lambda: nb.ns)
    click(panel, "copy-failed", 1)
    assert not panel.status_ok and "could not copy" in panel.status
    assert panel.copies == 0 and panel.status_index == 1


def test_messages_that_make_no_sense_are_ignored(nb):
    panel = build_panel(diagnosis(nb), lambda: nb.ns)
    for content in ({"action": "apply", "index": 99}, {"action": "apply"}, "junk", None):
        panel._handle_custom_msg(content, [])
    assert panel.status == "" and nb.ns["x"].device.type == "cpu"


def test_copy_is_counted(nb):
    panel = build_panel(diagnosis(nb), lambda: nb.ns)
    click(panel, "copied")
    assert panel.copies == 1 and "copied" in panel.status


def test_widget_keeps_no_tensor(nb):
    import gc
    import sys
    import weakref

    d = diagnosis(nb)
    ref = weakref.ref(nb.ns["x"])
    panel = build_panel(d, lambda: nb.ns)
    nb.ns.clear()
    for name in ("last_exc", "last_value", "last_traceback"):
        if hasattr(sys, name):
            setattr(sys, name, None)
    gc.collect()
    kept = ref()
    holders = [type(r).__name__ for r in gc.get_referrers(kept)] if kept is not None else []
    del kept
    assert ref() is None, f"the tensor is still held by: {holders}"
    assert panel is not None


def test_the_view_is_the_widget_only(nb):
    bundle = view_bundle(build_panel(diagnosis(nb), lambda: nb.ns))
    assert set(bundle) == {"application/vnd.jupyter.widget-view+json", "text/plain"}
    assert bundle["text/plain"] == ""  # the words are the panel's own output


def test_the_browser_code_inserts_below_the_failed_cell_by_id():
    from ipydevice.render.widget import _ESM

    # The front end's notebook model, found through the widget manager's context.
    assert "manager.context.model" in _ESM and "sharedModel" in _ESM
    assert "cell.id === cellId" in _ESM and "insertCell(index + 1" in _ESM
    assert "innerHTML" not in _ESM  # every text goes in as text


def test_the_browser_code_claims_a_copy_only_when_it_happened():
    from ipydevice.render.widget import _ESM

    # execCommand's result is read, and a refusal is reported to the kernel.
    assert "return Boolean(done)" in _ESM and '"copy-failed"' in _ESM
    assert '"Copied"' not in _ESM  # no success painted before the kernel says so


def test_the_buttons_find_their_outputs_by_anchor(nb):
    panel = build_panel(diagnosis(nb), lambda: nb.ns, anchor="abc123")
    assert panel.anchor == "abc123"
    from ipydevice.render.widget import _ESM

    assert "data-ipydevice-anchor" in _ESM and "CSS.escape(anchor)" in _ESM
