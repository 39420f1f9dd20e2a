"""The namespace grouped by device: ``ipydevice.inventory()`` and ``%devices``.

One row per top-level name (a module is one row with its device breakdown),
totals per device counted once per tensor even when several names share it, and
the problems visible before anything fails: a module split across devices,
tensor attributes ``.to()`` will not move, submodules in plain lists, optimizer
state away from its parameters, tensors on another device than the model beside
them. ``names=[...]`` gives the in-depth view instead: a module's device map by
submodule path, a container's items, an optimizer's state.

Bounded like every scan (:mod:`ipydevice.settings`), with truncation in ``notes``.
The result holds strings and numbers only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ipydevice._debug import contain, failure_line
from ipydevice.collect import probe
from ipydevice.collect.entries import TENSOR_KINDS
from ipydevice.collect.namespace import user_namespace
from ipydevice.collect.paths import format_path
from ipydevice.collect.scan import SKIP_NAMES, Entry, Scan, record_of, shares_of
from ipydevice.model import DeviceShare, Finding, ObjectRecord
from ipydevice.settings import current
from ipydevice.wording import plural

__all__ = ["Inventory", "inventory"]


@dataclass(frozen=True, slots=True)
class Inventory:
    """Where everything lives. See :func:`inventory`.

    Attributes:
        records: one row per object (per submodule or item for ``names=``).
        totals: per device, the tensors counted once each and their bytes.
        problems: findings with the object, its device and what is wrong.
        notes: truncation and caveats.
        names: the names inspected in depth, when ``names=`` was given.
    """

    records: tuple[ObjectRecord, ...] = ()
    totals: tuple[DeviceShare, ...] = ()
    problems: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()
    names: tuple[str, ...] = ()

    def by_device(self) -> dict[str, list[ObjectRecord]]:
        """Rows grouped by device (``mixed`` for objects spanning several)."""
        groups: dict[str, list[ObjectRecord]] = {}
        for record in self.records:
            groups.setdefault(record.device or "-", []).append(record)
        return groups

    def table(self, breakdown: bool = False) -> Any:
        """The rows as a pandas DataFrame: one row per object, missing values as
        ``pd.NA``, shapes as tuples. ``breakdown=True``: one row per object and
        device, with the count of tensors and their bytes (a long table)."""
        from ipydevice.render.table import breakdown_table, records_table

        build = breakdown_table if breakdown else records_table
        return build(list(self.records), {p.name for p in self.problems})

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-ready)."""
        return asdict(self)

    def __str__(self) -> str:
        from ipydevice.render.text import render_inventory

        return render_inventory(self)

    def __repr__(self) -> str:
        devices = ", ".join(f"{t.device} ×{t.count}" for t in self.totals)
        return f"<Inventory {plural(len(self.records), 'object')} ({devices}); {plural(len(self.problems), 'problem')}>"

    def _repr_html_(self) -> str:
        from ipydevice.render.html import render_inventory_html

        return render_inventory_html(self)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        """Text and HTML; a renderer's failure shows as one line in its place
        (IPython would print a traceback per failing mime type)."""
        from html import escape

        from ipydevice._debug import debug_enabled, describe_failure

        bundle = {}
        for mime, render in (("text/plain", self.__str__), ("text/html", self._repr_html_)):
            try:
                bundle[mime] = render()
            except Exception as failure:
                if debug_enabled():
                    raise
                line = describe_failure("rendering", failure)
                bundle[mime] = escape(line) if mime == "text/html" else line
        return bundle


def inventory(
    namespace: Mapping[str, Any] | None = None, names: Any = None, include_private: bool = False
) -> Inventory:
    """Where everything in ``namespace`` lives, grouped by device.

    Args:
        namespace: by default IPython's ``user_ns``, else ``__main__``'s globals.
        names: names (or dotted/indexed paths such as ``model.encoder``) to inspect in
            depth instead of listing the whole namespace.
        include_private: also list names starting with ``_``.

    Raises:
        KeyError: a name in ``names`` that the namespace does not hold (an object
            that holds nothing on a device is reported in ``notes`` instead).
    """
    if namespace is None:
        namespace = user_namespace()
    try:
        with probe.metadata_reads(current().time_budget):
            return _inventory(namespace, names, include_private)
    except KeyError:
        raise
    except BaseException as failure:
        # What the user's objects raise (SystemExit included) is contained; a
        # Ctrl-C stops the inventory and reaches the caller.
        contain(failure)
        return Inventory(notes=(failure_line("inventory", failure),))


def _inventory(namespace: Mapping[str, Any], names: Any, include_private: bool) -> Inventory:
    settings = current()
    scan = Scan(settings)
    if names:
        return _in_depth(scan, namespace, [names] if isinstance(names, str) else list(names))
    roots = _roots(scan, namespace, include_private, settings.max_objects)
    held = _held_tensors(scan)
    rows = (record_of(e, settings.max_items, held.get(id(e))) for e in roots)
    # A container or dataclass that holds no tensor (a Diagnosis kept in ``d``) is not news.
    records = tuple(r for r in rows if r.kind != "container" or r.shares)
    return Inventory(
        records=records,
        totals=_totals(scan),
        problems=tuple(_problems(scan, roots)),
        notes=tuple(scan.settled_notes()),
    )


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


# -- problems ------------------------------------------------------------------------------


def _problems(scan: Scan, roots: list[Entry]) -> list[Finding]:
    """The audits' findings (see :mod:`ipydevice.audits`; registered ones included,
    their failures in the notes), source fixes left to ``--check``."""
    from ipydevice.audits.checkup import problems_of

    found = problems_of(roots, scan.notes)
    return [p.finding for p in found if p.finding.rule != "factory_without_device"]


# -- in depth ------------------------------------------------------------------------------


def _in_depth(scan: Scan, namespace: Mapping[str, Any], names: list[str]) -> Inventory:
    from ipydevice.collect.paths import resolve

    records: list[ObjectRecord] = []
    problems: list[Finding] = []
    for text in names:
        path = _parse_path(text)
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
        problems.extend(_problems(scan, [entry]))
    return Inventory(
        tuple(records), _totals(scan), tuple(problems), tuple(scan.settled_notes()), tuple(names)
    )


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


def _parse_path(text: str) -> tuple | None:
    """``model.encoder.layers[3]`` or ``batch['x']`` as path steps (literals only)."""
    import ast

    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return None
    steps: list[tuple[str, Any]] = []
    while True:
        if isinstance(node, ast.Name):
            return (("name", node.id), *reversed(steps))
        if isinstance(node, ast.Attribute):
            steps.append(("attr", node.attr))
            node = node.value
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            steps.append(("item", node.slice.value))
            node = node.value
        else:
            return None
