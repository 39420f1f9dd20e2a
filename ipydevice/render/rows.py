"""The object table's rows, as every renderer writes them: the text report's table,
the HTML panel's grid and its folded rows, ``%devices`` and the pandas tables.

Which records a table lists and in what order (culprits first), what each cell says,
and whether the ``where`` column is shown (only when it adds to the names) live here
once. Takes model objects only.
"""

from __future__ import annotations

from collections.abc import Sequence

from ipydevice.model import Diagnosis, ObjectRecord
from ipydevice.render.layout import columns
from ipydevice.wording import format_bytes, visible_record

__all__ = [
    "device_text",
    "flagged_first",
    "ordered_records",
    "record_row",
    "row_lines",
    "shares_text",
    "shows_where",
    "table_records",
    "where_adds",
]

_MAX_CELL = {1: 32, 3: 24}  # name and device columns, in display columns


def shares_text(record: ObjectRecord) -> str:
    """``cuda:0 ×12 (1.2 GB), cpu ×2 (16 B)`` for a module or container."""
    return ", ".join(f"{s.device} ×{s.count} ({format_bytes(s.nbytes)})" for s in record.shares)


def device_text(record: ObjectRecord, sizes: bool = False) -> str:
    """``cuda:0``, or ``cuda:0 ×12, cpu ×2`` for an object on several devices (the
    size column has the total; ``sizes`` adds each device's bytes, for ``%devices``);
    ``-`` when unknown."""
    if len(record.shares) > 1:
        return (
            shares_text(record)
            if sizes
            else ", ".join(f"{s.device} ×{s.count}" for s in record.shares)
        )
    return record.device or "-"


def record_row(
    record: ObjectRecord, culprit_names: set[str], sizes: bool = False, made_visible: bool = False
) -> list[str]:
    """One table row as strings: mark, name, kind, device, shape, dtype, size, where
    (``made_visible``: the record is a visible copy already, a diagnosis' row)."""
    mark = "✗" if record.name in culprit_names else " "
    if not made_visible:
        record = visible_record(record)
    device = device_text(record, sizes)
    size = format_bytes(record.nbytes) if record.nbytes else ""
    return [
        mark,
        record.name,
        record.kind,
        device,
        record.shape,
        record.dtype,
        size,
        record.where,
    ]


def where_adds(record: ObjectRecord) -> bool:
    """Whether a row's ``where`` says something its name does not: not for
    ``mask in Attention.forward`` in ``Attention.forward``, nor for a namespace
    path (a name without `` in ``) in ``namespace``; yes for ``DataLoader worker 0``,
    ``rank 1`` or ``In [3]``."""
    where = record.where
    if not where or record.name.endswith(f" in {where}"):
        return False
    return not (where == "namespace" and " in " not in record.name)


def shows_where(records: Sequence[ObjectRecord]) -> bool:
    """Whether a table of ``records`` has its ``where`` column: only when some row's
    ``where`` adds to its name (:func:`where_adds`), so that no row says a fact twice.
    The text and the HTML tables both ask this."""
    return any(where_adds(r) for r in records)


def ordered_records(d: Diagnosis) -> list[ObjectRecord]:
    """Culprits first, then the rest in discovery order."""
    culprit_names = {f.name for f in d.culprits}
    first = [r for r in d.records if r.name in culprit_names]
    return first + [r for r in d.records if r.name not in culprit_names]


def flagged_first(
    groups: dict[str, list[ObjectRecord]], flagged: set[str]
) -> dict[str, list[ObjectRecord]]:
    """``%devices``' rows by device, problems first: the devices that hold a flagged
    row come first, and in each device its flagged rows, so that however many rows a
    table shows before it folds the rest, the objects a problem names are among them."""
    ranked = {
        device: [r for r in rows if r.name in flagged] + [r for r in rows if r.name not in flagged]
        for device, rows in groups.items()
    }
    return dict(
        sorted(ranked.items(), key=lambda item: not any(r.name in flagged for r in item[1]))
    )


def table_records(d: Diagnosis, verbosity: str = "context") -> list[ObjectRecord]:
    """The objects a report lists: none when they would only repeat the headline
    (every row a culprit) below ``verbose``."""
    records = ordered_records(d)
    culprit_names = {f.name for f in d.culprits}
    if verbosity != "verbose" and all(r.name in culprit_names for r in records):
        return []
    return records


def row_lines(
    records: Sequence[ObjectRecord],
    culprit_names: set[str],
    width: int = 96,
    sizes: bool = False,
    where: bool | None = None,
    made_visible: bool = False,
) -> list[str]:
    """The object table as text lines, a header row first: the text report's table
    and the HTML panel's folded rows (its ``<pre>``) both write rows this way.
    ``where``: whether the where column is shown (default: :func:`shows_where`)."""
    header = ["", "name", "kind", "device", "shape", "dtype", "size", "where"]
    rows = [header] + [record_row(r, culprit_names, sizes, made_visible) for r in records]
    if not (shows_where(records) if where is None else where):
        rows = [row[:-1] for row in rows]
    return columns(rows, width, _MAX_CELL)
