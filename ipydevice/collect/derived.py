"""Sources over derived locals: a tensor a user's function made on an earlier
line from one tensor the namespace holds is named by that tensor.

``a = self.alphas_cumprod[t].view(-1, 1, 1, 1)`` in ``Sampler.q_sample``: ``a``
is remade from ``sampler.alphas_cumprod`` on every call, so moving ``a`` (or
editing where it is made) treats a symptom; the held tensor is what the user
moves, once. Read from the function's source and its frame only (no code
runs): the statement that last assigned the local before the failing line,
and the tensors that statement reads (names and attribute or constant-key
chains). Exactly one of them on the local's device makes the source. Part of
the naming stage (:func:`ipydevice.pipeline.engine.name_in_depth`).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from ipydevice._debug import contain
from ipydevice.code.flow import cpu_arguments
from ipydevice.code.statements import iter_statements
from ipydevice.collect import probe
from ipydevice.collect.frames import FrameView, frame_tree, safe_value
from ipydevice.collect.owners import take_over
from ipydevice.collect.scan import Entry, Scan
from ipydevice.collect.wrapped import is_wrapped

__all__ = ["name_sources"]

_MAX_READS = 32  # chains read on one making statement


def name_sources(
    scan: Scan, views: list[FrameView], namespace: Mapping[str, Any], only: set[int]
) -> bool:
    """Gives the place of each wanted local derived from one held tensor to that
    tensor, once the namespace names it. Returns True when one was so named."""
    made: dict[int, Entry] = {}  # source id -> the local made from it
    reads: dict[int, tuple[Any, str, FrameView]] = {}  # source id -> (source, text, view)
    for key, entry in list(scan.entries.items()):
        if key not in only:
            continue
        if _a_local(entry):
            view = _view_of(entry, views)
        elif _a_global(entry):
            view = _exec_view(views, namespace)
        else:
            continue
        if view is None:
            continue
        read = _source(entry, view)
        if read is not None and id(read[0]) not in made:
            made[id(read[0])] = entry
            reads[id(read[0])] = (read[0], read[1], view)
    if not made:
        return False
    for key in list(made):
        held = scan.entries.get(key)
        value, text, view = reads[key]
        if held is None and not _a_global(made[key]) and _holds(namespace, text, value):
            # a global the function read (``memory.expand(...)`` in ``forward``)
            held = scan.add(value, (("name", text),), "namespace", named=True, user=True)
        if held is None and _a_global(made[key]):
            # code run by exec read it from the namespace: not scanned yet
            if _holds(namespace, text, value):  # (a top-level name: no walk needed)
                held = scan.add(value, (("name", text),), "namespace", named=True, user=True)
            else:
                held = scan.add(value, (("local", text),), view.label, user=True)
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


def _holds(namespace: Mapping[str, Any], name: str, value: Any) -> bool:
    try:
        return name.isidentifier() and name in namespace and namespace[name] is value
    except BaseException as caught:
        contain(caught)
        return False


def _a_global(entry: Entry) -> bool:
    """A tensor under a top-level name of the namespace."""
    path = entry.path
    return (
        entry.kind == "tensor"
        and entry.named
        and not entry.parent_kind
        and entry.owner is None
        and len(path) == 1
        and path[0][0] == "name"
        and isinstance(path[0][1], str)
        and path[0][1].isidentifier()
    )


def _exec_view(views: list[FrameView], namespace: Mapping[str, Any]) -> FrameView | None:
    """The innermost frame of text that ``exec``/``eval`` on a user's line ran in the
    namespace (its caller is that user frame: no library frame in between, as a
    magic's would be). Whether the text binds the name is :func:`_source`'s test."""
    for index in range(len(views) - 1, 0, -1):
        view, caller = views[index], views[index - 1]
        if not (view.is_user and view.is_module_level and view.source is not None):
            continue
        if not (caller.is_user and is_wrapped(view)) or view.frame.f_globals is not namespace:
            continue
        return view
    return None


def _view_of(entry: Entry, views: list[FrameView]) -> FrameView | None:
    for view in reversed(views):
        if view.is_user and view.label == entry.where and not view.is_module_level:
            return view
    return None


def _source(entry: Entry, view: FrameView) -> tuple[Any, str] | None:
    """The one tensor on ``entry``'s device that the statement making it reads,
    and the text that reads it."""
    parsed = frame_tree(view)
    if parsed is None:
        return None
    tree, offset = parsed
    stmt = _last_assignment(tree, str(entry.path[0][1]), view.lineno - offset)
    if stmt is None:
        return None
    device = entry.device
    stays = cpu_arguments(tree)  # (``lengths`` of ``pack_padded_sequence``: not moved)
    sources: dict[int, tuple[Any, str]] = {}
    for value, text in _reads(stmt.value, view):
        if value is entry.obj or not probe.is_tensor(value) or text in stays:
            continue
        if probe.placement(value)[0] == device:
            sources.setdefault(id(value), (value, text))
    return next(iter(sources.values())) if len(sources) == 1 else None


def _reads(node: ast.AST, view: FrameView) -> list[tuple[Any, str]]:
    """The values of the chains ``node`` reads that resolve without running code,
    each with its text."""
    out: list[tuple[Any, str]] = []
    for sub in ast.walk(node):
        if len(out) >= _MAX_READS:
            break
        if isinstance(sub, (ast.Name, ast.Attribute, ast.Subscript)) and isinstance(
            getattr(sub, "ctx", None), ast.Load
        ):
            ok, value = safe_value(sub, view.frame)
            if ok:
                out.append((value, ast.unparse(sub)))
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
