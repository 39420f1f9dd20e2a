"""Diagnoses and inventories as tidy pandas DataFrames (pandas is imported here only).

One row per object, one value per cell: text columns use pandas' ``string`` dtype
with ``pd.NA`` where a value is missing or unreadable (never ``''`` or ``'?'``),
shapes are tuples of ints (``(8, 16)``, ``()`` for a 0-dim tensor), sizes are
integers. The per-device breakdown of modules, optimizers and containers is a long
table of its own (``breakdown=True``): one row per object and device, with the
count of tensors and their bytes as numbers.
"""

from __future__ import annotations

from typing import Any

from ipydevice.model import Diagnosis, Inventory, ObjectRecord
from ipydevice.render.rows import ordered_records

__all__ = ["breakdown_table", "diagnosis_table", "parse_shape", "records_table"]

COLUMNS = [
    "name",
    "kind",
    "type",
    "device",
    "shape",
    "dtype",
    "nbytes",
    "where",
    "detail",
    "culprit",
]
TEXT_COLUMNS = ["name", "kind", "type", "device", "dtype", "where", "detail"]
BREAKDOWN_COLUMNS = ["name", "kind", "type", "device", "count", "nbytes", "culprit"]
_MISSING = ("", "?")


def parse_shape(text: str) -> tuple[int, ...] | None:
    """``"(8, 16)"`` -> ``(8, 16)``, ``"()"`` -> ``()``; None when there is no shape or
    it was unreadable."""
    if len(text) < 2 or text[0] != "(" or text[-1] != ")":
        return None
    parts = [p.strip() for p in text[1:-1].split(",") if p.strip()]
    try:
        return tuple(int(p) for p in parts)
    except ValueError:
        return None


def _text(value: str) -> Any:
    import pandas as pd

    return pd.NA if value in _MISSING else value


def records_table(records: list[ObjectRecord], culprits: set[str] | None = None) -> Any:
    """One row per record; ``culprit`` marks the objects on the wrong device."""
    import pandas as pd

    culprits = culprits or set()
    rows = []
    for r in records:
        shape = parse_shape(r.shape)
        rows.append(
            {
                "name": r.name,
                "kind": _text(r.kind),
                "type": _text(r.type_name),
                "device": _text(r.device),
                "shape": pd.NA if shape is None else shape,
                "dtype": _text(r.dtype),
                "nbytes": r.nbytes if r.nbytes or shape is not None or r.shares else pd.NA,
                "where": _text(r.where),
                "detail": _text(r.detail),
                "culprit": r.name in culprits,
            }
        )
    frame = pd.DataFrame(rows, columns=COLUMNS)
    return frame.astype(
        {**dict.fromkeys(TEXT_COLUMNS, "string"), "nbytes": "Int64", "culprit": "boolean"}
    )


def breakdown_table(records: list[ObjectRecord], culprits: set[str] | None = None) -> Any:
    """One row per object and device: how many tensors of it live there, and their
    bytes. A tensor is one row (count 1); a module, optimizer or container one row
    per device it spans."""
    import pandas as pd

    culprits = culprits or set()
    rows = []
    for r in records:
        shares = r.shares or ()
        base = {"name": r.name, "kind": _text(r.kind), "type": _text(r.type_name)}
        culprit = r.name in culprits
        if shares:
            for share in shares:
                rows.append(
                    {
                        **base,
                        "device": _text(share.device),
                        "count": share.count,
                        "nbytes": share.nbytes,
                        "culprit": culprit,
                    }
                )
        else:
            rows.append(
                {
                    **base,
                    "device": _text(r.device),
                    "count": 1 if parse_shape(r.shape) is not None else pd.NA,
                    "nbytes": r.nbytes if parse_shape(r.shape) is not None else pd.NA,
                    "culprit": culprit,
                }
            )
    frame = pd.DataFrame(rows, columns=BREAKDOWN_COLUMNS)
    return frame.astype(
        {
            **dict.fromkeys(["name", "kind", "type", "device"], "string"),
            "count": "Int64",
            "nbytes": "Int64",
            "culprit": "boolean",
        }
    )


def diagnosis_table(d: Diagnosis, breakdown: bool = False) -> Any:
    """Every object of the diagnosis, culprits first (``breakdown``: per device).

    Why the target was chosen is in ``attrs["target_reason"]`` and, in the wide
    table, on the row of the object that decided it (the model whose parameters
    are there) in the ``target`` column (``pd.NA`` elsewhere)."""
    import pandas as pd

    records, culprits = ordered_records(d), {f.name for f in d.culprits}
    if breakdown:
        table = breakdown_table(records, culprits)
    else:
        table = records_table(records, culprits)
        table["target"] = pd.Series(pd.NA, index=table.index, dtype="string")
        evidence = _evidence_name(d.target_reason)
        if evidence and len(table):
            table.loc[table["name"] == evidence, "target"] = d.target_reason
    table.attrs["target"] = d.target
    table.attrs["target_reason"] = d.target_reason
    return table


def _evidence_name(reason: str) -> str:
    """The first `name` a target reason quotes."""
    start = reason.find("`")
    end = reason.find("`", start + 1) if start >= 0 else -1
    return reason[start + 1 : end] if end > start >= 0 else ""


def inventory_table(inventory: Inventory, breakdown: bool = False) -> Any:
    """``Inventory.table()``: one row per object, or per object and device."""
    build = breakdown_table if breakdown else records_table
    return build(list(inventory.records), {p.name for p in inventory.problems})
