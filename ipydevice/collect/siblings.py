"""Loops over a holder: a culprit that is one element of a container the failing
code loops over (``for head in heads``, ``{k: m(x) for k, m in metrics.items()}``)
is met there first; the loop reaches the container's other elements next, so
those off the target are culprits too and one fix moves them all.

The loops are read from the failing statement of each user frame (its
comprehensions) and the ``for`` statements around it; the container is the
object a name or attribute chain of the loop's iterable resolves to, without
running code (``metrics`` of ``metrics.items()``, ``a`` and ``b`` of
``zip(a, b)``). Part of the naming stage
(:func:`ipydevice.pipeline.engine.name_in_depth`).

A loop variable of a cell's own loop is a namespace name too (``for acc, p in
zip(grad_accum, params)`` leaves ``acc`` bound), but only for the round that
failed: :func:`name_loop_items` names the element by the container the loop runs
over (``grad_accum[0]``), where a fix reaches every round's element.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from ipydevice.code.statements import chain_path, iter_statements, statement_at
from ipydevice.collect.frames import FrameView, frame_tree, safe_value
from ipydevice.collect.scan import Entry, Scan
from ipydevice.collect.walk import container_items

__all__ = ["add_siblings", "name_loop_items"]


def add_siblings(
    scan: Scan, views: list[FrameView], only: set[int], off_target: Callable[[Entry], bool]
) -> bool:
    """Adds the other elements of the containers the failing code loops over
    that hold a wanted, named entry, when ``off_target`` says they are off the
    target too. Returns True when one was added."""
    holders: dict[int, list[Entry]] = {}
    for key, entry in scan.entries.items():
        container = entry.container
        if key in only and entry.named and container is not None and len(entry.path) > 1:
            holders.setdefault(id(container), []).append(entry)
    if not holders:
        return False
    looped = _looped_over(views)
    found = False
    for key, entries in holders.items():
        if key not in looped or scan._spent():
            continue
        container, path = entries[0].container, entries[0].path[:-1]
        for step, child in container_items(container, scan.settings.max_items) or []:
            if id(child) in scan.entries:
                continue
            before = set(scan.entries)
            sibling = scan.add(child, (*path, step), "namespace", named=True, user=True)
            if sibling is None or not off_target(sibling):
                for added in set(scan.entries) - before:
                    del scan.entries[added]
                continue
            sibling.container = container
            found = True
    return found


def _looped_over(views: list[FrameView]) -> set[int]:
    """Ids of the objects the failing statements' loops iterate over."""
    ids: set[int] = set()
    for view in views:
        if not view.is_user:
            continue
        parsed = frame_tree(view)
        if parsed is None:
            continue
        tree, offset = parsed
        stmt = statement_at(tree, view.lineno - offset)
        if stmt is None:
            continue
        iterables = [g.iter for g in ast.walk(stmt) if isinstance(g, ast.comprehension)]
        iterables += [
            node.iter
            for node in iter_statements(tree)
            if isinstance(node, (ast.For, ast.AsyncFor))
            and node is not stmt
            and node.lineno <= stmt.lineno <= (node.end_lineno or node.lineno)
        ]
        for iterable in iterables:
            ids.update(id(value) for value in _chains(iterable, view))
    return ids


def _chains(node: ast.AST, view: FrameView) -> list[Any]:
    out = []
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Name, ast.Attribute, ast.Subscript)) and isinstance(
            getattr(sub, "ctx", None), ast.Load
        ):
            ok, value = safe_value(sub, view.frame)
            if ok and value is not None:
                out.append(value)
    return out


def name_loop_items(scan: Scan, views: list[FrameView], only: set[int]) -> bool:
    """Renames each wanted entry named by a loop variable of a cell's loop around
    its failing statement to its place in the container the loop runs over (see
    module docstring). Returns True when one was renamed."""
    renamed = False
    for view in views:
        if not view.is_user or not view.is_module_level:
            continue
        parsed = frame_tree(view)
        stmt = statement_at(parsed[0], view.lineno - parsed[1]) if parsed is not None else None
        if parsed is None or stmt is None:
            continue
        for loop in iter_statements(parsed[0]):
            if not isinstance(loop, (ast.For, ast.AsyncFor)) or not (
                loop.lineno <= stmt.lineno <= (loop.end_lineno or loop.lineno)
            ):
                continue
            names = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
            for key, entry in list(scan.entries.items()):
                if key not in only or len(entry.path) != 1 or entry.path[0][0] != "name":
                    continue
                if entry.path[0][1] not in names:
                    continue
                place = _place_in(entry.obj, loop.iter, view, scan.settings.max_items)
                if place is not None:
                    path, container = place
                    scan._rename(entry, path)
                    entry.container, renamed = container, True
    return renamed


def _place_in(obj: Any, iterable: ast.expr, view: FrameView, limit: int) -> Any:
    """``(path, container)`` of ``obj`` in a container the loop's iterable names
    (``xs`` of ``xs``, ``zip(xs, ys)``, ``enumerate(xs)``), by identity."""
    for node in ast.walk(iterable):
        path = chain_path(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if path is None:
            continue
        ok, container = safe_value(node, view.frame)
        if not ok:
            continue
        for step, child in container_items(container, limit) or []:
            if child is obj:
                return (*path, step), container
    return None
