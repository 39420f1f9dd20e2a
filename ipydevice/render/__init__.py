"""Renderers: a diagnosis or an inventory as text, HTML, a pandas table or a widget.

They take plain data (:mod:`ipydevice.model`) and return plain values; none of
them touches torch or IPython. Importing this package registers the views a
:class:`~ipydevice.model.Diagnosis` delegates to (``print(d)``, ``d._repr_html_()``,
``d.table()``, ``d.headline``) and an :class:`~ipydevice.model.Inventory` does;
a new render target is a module here plus one
:func:`~ipydevice.model.register_view` line below when records should use it.
"""

from html import escape

from ipydevice._debug import debug_enabled, describe_failure
from ipydevice.model import Inventory, register_view
from ipydevice.render import html, table, text


def _inventory_bundle(inventory: Inventory) -> dict[str, str]:
    """Text and HTML; a renderer's failure is one line in its place."""
    bundle = {}
    for mime, render in (
        ("text/plain", text.render_inventory),
        ("text/html", html.render_inventory_html),
    ):
        try:
            bundle[mime] = render(inventory)
        except Exception as failure:
            if debug_enabled():
                raise
            line = describe_failure("rendering", failure)
            bundle[mime] = escape(line) if mime == "text/html" else line
    return bundle


register_view("text", text.render_diagnosis)
register_view("headline", text.headline)
register_view("html", html.render_diagnosis_html)
register_view("result_html", html.render_apply_result_html)
register_view("table", table.diagnosis_table)
register_view("inventory_text", text.render_inventory)
register_view("inventory_html", html.render_inventory_html)
register_view("inventory_table", table.inventory_table)
register_view("inventory_bundle", _inventory_bundle)
