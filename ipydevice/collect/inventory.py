"""The namespace grouped by device, collected for ``ipydevice.inventory()`` and ``%devices``.

One row per top-level name (a module is one row with its device breakdown),
totals per device counted once per tensor even when several names share it, and
the problems visible before anything fails: a module split across devices,
tensor attributes ``.to()`` will not move, submodules in plain lists, optimizer
state away from its parameters, tensors on another device than the model beside
them. ``names=[...]`` gives the in-depth view instead: a module's device map by
submodule path, a container's items, an optimizer's state.

Bounded like every scan (:mod:`ipydevice.settings`), with truncation in ``notes``.
The audits (:mod:`ipydevice.audits`) then read the roots collected here
(:mod:`ipydevice.pipeline.inventory`); the record holds strings and numbers only.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from ipydevice._debug import contain
from ipydevice.code.statements import chain_path
from ipydevice.collect import probe
from ipydevice.collect.entries import TENSOR_KINDS
from ipydevice.collect.paths import format_path, resolve
from ipydevice.collect.scan import SKIP_NAMES, Entry, Scan, record_of, shares_of
from ipydevice.model import DeviceShare, Inventory, ObjectRecord
from ipydevice.settings import current
from ipydevice.wording import plural

__all__ = ["Census", "census", "parse_path"]


class Census(NamedTuple):
    """What the namespace holds, before the audits read it (transient): the record
    without problems, the groups of scanned roots the audits read (one for the
    listing, one per name inspected in depth), and the scan (its notes)."""

    inventory: Inventory
    audited: list[list[Entry]]
    scan: Scan


def census(namespace: Mapping[str, Any], names: Any, include_private: bool) -> Census:
    """The namespace (or the ``names`` inspected in depth) collected; see
    :func:`ipydevice.pipeline.inventory.inventory`, which audits it.

    Raises:
        KeyError: a name in ``names`` that the namespace does not hold.
    """
    settings = current()
    scan = Scan(settings)
    if names:
        return _in_depth(scan, namespace, [names] if isinstance(names, str) else list(names))
    roots = _roots(scan, namespace, include_private, settings.max_objects)
    held = _held_tensors(scan)
    rows = (record_of(e, settings.max_items, held.get(id(e))) for e in roots)
    # A container or dataclass that holds no tensor (a Diagnosis kept in ``d``) is not news.
    records = tuple(r for r in rows if r.kind != "container" or r.shares)
    return Census(Inventory(records=records, totals=_totals(scan)), [roots], scan)


def _roots(
    scan: Scan, namespace: Mapping[str, Any], include_private: bool, limit: int
) -> list[Entry]:
    roots: list[Entry] = []
    try:
        items = list(namespace.items())
    except BaseException as caught:
        contain(caught)
        return roots
    for count, (name, value) in enumerate(items):
        if (
            type(name) is not str
            or name in SKIP_NAMES
            or (name.startswith("_") and not include_private)
        ):
            continue
        if len(roots) >= limit or count >= 20 * limit:
            scan.notes.append(
                f"only the first {len(roots)} names were scanned ({len(items)} in the namespace)"
            )
            break
        entry = scan.add(value, (("name", name),), "namespace", named=True)
        if entry is not None and entry.path == (("name", name),):
            roots.append(entry)
    return roots


def _held_tensors(scan: Scan) -> dict[int, list[Any]]:
    """id(holder entry) -> the tensors it holds at any depth (``pair['a'][1]``,
    ``fn.__closure__[0].cell_contents``), each counted for its outermost
    holders only (a module's own parts are its view's)."""
    held: dict[int, list[Any]] = {}
    for entry in list(scan.entries.values()):
        if entry.owner is None or entry.parent_kind == "module" or entry.kind not in TENSOR_KINDS:
            continue
        for owner in _owners(entry):
            if owner.kind == "container":
                held.setdefault(id(owner), []).append(entry.obj)
    return held


def _owners(entry: Entry) -> Iterator[Entry]:
    """The holders ``entry`` is reached through, innermost first (64 at most)."""
    owner, seen = entry.owner, 0
    while owner is not None and seen < 64:
        yield owner
        owner, seen = owner.owner, seen + 1


def _totals(scan: Scan) -> tuple[DeviceShare, ...]:
    counts: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    seen: set[int] = set()
    for entry in list(scan.entries.values()):
        tensors = [entry.obj] if entry.kind in TENSOR_KINDS else []
        if entry.optimizer is not None:
            tensors = [t for _, _, t, _ in entry.optimizer.state]
        for tensor in tensors:
            if id(tensor) in seen:
                continue
            seen.add(id(tensor))
            # The entry's facts were read for its row already: read once, used twice.
            facts = entry.facts if tensor is entry.obj else probe.tensor_facts(tensor)
            device, _, _, nbytes, _ = facts
            counts[device] += 1
            sizes[device] += nbytes
    for entry in list(scan.entries.values()):  # a wide registry's counted tensors
        if entry.module is not None and entry.owner is None:
            for _, _, device, count, nbytes in entry.module.counted:
                counts[device] += count
                sizes[device] += nbytes
    order = sorted((d for d in counts if counts[d]), key=lambda d: (-sizes[d], d))
    return tuple(DeviceShare(d, counts[d], sizes[d]) for d in order)


# -- in depth ------------------------------------------------------------------------------


def _in_depth(scan: Scan, namespace: Mapping[str, Any], names: list[str]) -> Census:
    records: list[ObjectRecord] = []
    audited: list[list[Entry]] = []
    for text in names:
        path = parse_path(text)
        if path is None:
            raise KeyError(text)
        try:
            obj = resolve(path, namespace)
        except LookupError as exc:
            raise KeyError(text) from exc
        entry = scan.add(obj, path, "namespace", named=True)
        if entry is None:
            # It exists but holds nothing on a device (a str, a plain object).
            scan.notes.append(
                f"{text} ({probe.class_name(obj)}) holds no tensor, module or optimizer"
            )
            continue
        records.extend(_depth_rows(entry, scan))
        audited.append([entry])
    inventory = Inventory(records=tuple(records), totals=_totals(scan), names=tuple(names))
    return Census(inventory, audited, scan)


def _depth_rows(entry: Entry, scan: Scan) -> list[ObjectRecord]:
    """``entry`` and what it holds: a module's device map by submodule, or a holder's
    contents at any depth (``h.store['pair'][1]``), each holder with the tensors it
    holds counted, as the namespace listing counts them (:func:`_held_tensors`)."""
    limit = scan.settings.max_items
    held = _held_tensors(scan)
    rows = [record_of(entry, limit, held.get(id(entry)))]
    if entry.module is not None:
        rows.extend(_module_map(entry))
    else:
        rows.extend(
            record_of(e, limit, held.get(id(e)))
            for e in list(scan.entries.values())
            if e is not entry and _within(e, entry)
        )
    return rows


def _within(entry: Entry, holder: Entry) -> bool:
    """``entry`` is reached through ``holder``, at any depth (a module's own parts are
    its device map's)."""
    return entry.parent_kind != "module" and any(o is holder for o in _owners(entry))


def _module_map(entry: Entry) -> list[ObjectRecord]:
    """One row per submodule holding tensors directly: the device map by path."""
    view = entry.module
    assert view is not None
    groups: dict[tuple, list[Any]] = {}
    for rel, tensor, _ in view.registered:
        groups.setdefault(rel[:-1], []).append(tensor)
    rows = []
    for rel, tensors in groups.items():
        if not rel:
            continue
        shares = shares_of(tensors)
        device = shares[0].device if len(shares) == 1 else "mixed"
        name = format_path((*entry.path, *rel))
        detail = plural(len(tensors), "tensor")
        rows.append(
            ObjectRecord(
                name,
                "submodule",
                "",
                device,
                nbytes=sum(s.nbytes for s in shares),
                shares=shares,
                detail=detail,
            )
        )
    return rows


def parse_path(text: str) -> tuple | None:
    """``model.encoder.layers[3]`` or ``batch['x']`` as path steps (literals only)."""
    try:
        return chain_path(ast.parse(text.strip(), mode="eval").body)
    except SyntaxError:
        return None
