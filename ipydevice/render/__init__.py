"""Renderers: a diagnosis or an inventory as text, HTML, a pandas table or a widget.

They take plain data (:mod:`ipydevice.model`) and return plain values; none of
them touches torch or IPython. Importing this package registers the views a
:class:`~ipydevice.model.Diagnosis` delegates to (``print(d)``, ``d._repr_html_()``,
``d.table()``, ``d.headline``); a new render target is a module here plus one
:func:`~ipydevice.model.register_view` line below when records should use it.
"""

from ipydevice.model import register_view
from ipydevice.render import html, table, text

register_view("text", text.render_diagnosis)
register_view("headline", text.headline)
register_view("html", html.render_diagnosis_html)
register_view("result_html", html.render_apply_result_html)
register_view("table", table.diagnosis_table)
