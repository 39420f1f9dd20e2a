"""Where a module culprit's move goes: the outermost module along its path (moved with
``Module.to``), the all-meta subtree to materialise, or the members of a plain list or
dict that ``Module.to()`` never reaches. Read from the scan's entries and paths; used by
:mod:`ipydevice.fixes.propose`."""

from __future__ import annotations

import dataclasses
from typing import Any

from ipydevice.collect.paths import Path
from ipydevice.collect.roots import follow_path
from ipydevice.collect.scan import Entry, Scan
from ipydevice.collect.walk import registers
from ipydevice.diagnosis.families.meta_device import meta_subtrees

__all__ = ["meta_subtree", "on_meta", "outermost_module", "plain_list_holding"]


def on_meta(entry: Entry) -> bool:
    """The entry (a module: its majority) is on ``meta``."""
    if entry.module is not None:
        return entry.module.majority() == "meta"
    return entry.device == "meta"


def meta_subtree(entry: Entry, owner: Entry) -> Path:
    """The all-meta subtree of ``owner`` that holds ``entry``."""
    rel = entry.path[len(owner.path) :]
    for path in meta_subtrees(owner):
        if entry.path[: len(path)] == path or path[: len(entry.path)] == entry.path:
            return path
    return owner.path if not rel else entry.path


def outermost_module(entry: Entry, by_path: dict, scan: Scan) -> Entry | None:
    """The outermost module along ``entry``'s path: as the scan named it, else the
    module the path reaches (``criterion``, scanned first as ``lr_finder.criterion``)."""
    for size in range(1, len(entry.path) + 1):
        candidate = by_path.get(entry.path[:size])
        if candidate is not None and candidate.module is not None:
            return candidate
    for size in range(1, len(entry.path)):
        found = scan.entries.get(id(follow_path(entry.path[:size], scan.namespace)))
        if found is not None and found.module is not None:
            return dataclasses.replace(found, path=entry.path[:size])
    return None


def plain_list_holding(entry: Entry, scan: Scan) -> tuple[Path, list[tuple[Path, Any]]] | None:
    """The plain list (or dict) of a scanned module that holds ``entry``'s module, and
    its members' paths: ``Module.to()`` never reaches them, the fix moves each."""
    for other in scan.entries.values():
        if other.module is None or not other.named:
            continue
        for list_rel, members, _ in other.module.plain_lists:
            # the module itself, one whose own parameter or buffer it is, or one below it
            base = other.path
            at = [((*base, *rel), m) for rel, m in members]
            if any(
                m is entry.obj or registers(m, entry.obj) or entry.path[: len(p)] == p
                for p, m in at
            ):
                return (*base, *list_rel), at
    return None
