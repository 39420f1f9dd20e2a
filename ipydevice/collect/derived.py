"""Sources over derived locals: a tensor a user's function made on an earlier
line from one tensor the namespace holds is named by that tensor.

``a = self.alphas_cumprod[t].view(-1, 1, 1, 1)`` in ``Sampler.q_sample``: ``a``
is remade from ``sampler.alphas_cumprod`` on every call, so moving ``a`` (or
editing where it is made) treats a symptom; the held tensor is what the user
moves, once. Read from the function's source and its frame only (no code
runs): the statement that last assigned the local before the failing line,
and the tensors that statement reads (names and attribute or constant-key
chains). Exactly one of them on the local's device makes the source. Part of
the naming stage (:func:`ipydevice.diagnosis.engine.name_in_depth`).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from ipydevice.collect import probe
from ipydevice.collect.frames import FrameView, frame_tree, iter_statements, safe_value
from ipydevice.collect.owners import take_over
from ipydevice.collect.scan import Entry, Scan

__all__ = ["name_sources"]

_MAX_READS = 32  # chains read on one making statement


def name_sources(
    scan: Scan, views: list[FrameView], namespace: Mapping[str, Any], only: set[int]
) -> bool:
    """Gives the place of each wanted local derived from one held tensor to that
    tensor, once the namespace names it. Returns True when one was so named."""
    made: dict[int, Entry] = {}  # source id -> the local made from it
    for key, entry in list(scan.entries.items()):
        if key not in only or not _a_local(entry):
            continue
        view = _view_of(entry, views)
        source = _source(entry, view) if view is not None else None
        if source is not None and id(source) not in made:
            made[id(source)] = entry
    if not made:
        return False
    for key in list(made):
        held = scan.entries.get(key)
        if held is None or held.kind not in ("tensor", "attribute", "parameter", "buffer"):
            del made[key]
    scan.name_from(namespace, only={key for key, e in made.items() if not scan.entries[key].named})
    found = False
    for key, local in made.items():
        if scan.entries[key].named and id(local.obj) in scan.entries:
            source = scan.entries[key].obj
            # (a view shares its source's data: an alias; a copy made from it is not)
            shares = probe.tensor_base(local.obj) is source
            found |= take_over(scan, local, source, alias=shares)
    return found


def _a_local(entry: Entry) -> bool:
    path = entry.path
    return (
        entry.kind == "tensor"
        and not entry.named
        and not entry.parent_kind
        and entry.owner is None
        and len(path) == 1
        and path[0][0] == "local"
        and isinstance(path[0][1], str)
        and path[0][1].isidentifier()
    )


def _view_of(entry: Entry, views: list[FrameView]) -> FrameView | None:
    for view in reversed(views):
        if view.is_user and view.label == entry.where and not view.is_module_level:
            return view
    return None


def _source(entry: Entry, view: FrameView) -> Any:
    """The one tensor on ``entry``'s device that the statement making it reads."""
    parsed = frame_tree(view)
    if parsed is None:
        return None
    tree, offset = parsed
    stmt = _last_assignment(tree, str(entry.path[0][1]), view.lineno - offset)
    if stmt is None:
        return None
    device = entry.device
    sources: dict[int, Any] = {}
    for value in _reads(stmt.value, view):
        if value is entry.obj or not probe.is_tensor(value):
            continue
        if probe.placement(value)[0] == device:
            sources[id(value)] = value
    return next(iter(sources.values())) if len(sources) == 1 else None


def _reads(node: ast.AST, view: FrameView) -> list[Any]:
    """The values of the chains ``node`` reads that resolve without running code."""
    out: list[Any] = []
    for sub in ast.walk(node):
        if len(out) >= _MAX_READS:
            break
        if isinstance(sub, (ast.Name, ast.Attribute, ast.Subscript)) and isinstance(
            getattr(sub, "ctx", None), ast.Load
        ):
            ok, value = safe_value(sub, view.frame)
            if ok:
                out.append(value)
    return out


def _last_assignment(tree: ast.AST, name: str, before: int) -> ast.Assign | None:
    best: ast.Assign | None = None
    for node in iter_statements(tree):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == name
            and node.lineno < before
            and (best is None or node.lineno > best.lineno)
        ):
            best = node
    return best
