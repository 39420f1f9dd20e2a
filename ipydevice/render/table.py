"""Diagnoses and inventories as pandas DataFrames (pandas is imported here only)."""

from __future__ import annotations

from typing import Any

from ipydevice.model import Diagnosis, ObjectRecord
from ipydevice.render.text import ordered_records, shares_text

__all__ = ["diagnosis_table", "records_table"]

COLUMNS = [
    "name",
    "kind",
    "type",
    "device",
    "shape",
    "dtype",
    "nbytes",
    "where",
    "devices",
    "detail",
    "culprit",
]


def records_table(records: list[ObjectRecord], culprits: set[str] | None = None) -> Any:
    """One row per record; ``culprit`` marks the objects on the wrong device."""
    import pandas as pd

    culprits = culprits or set()
    rows = [
        {
            "name": r.name,
            "kind": r.kind,
            "type": r.type_name,
            "device": r.device,
            "shape": r.shape,
            "dtype": r.dtype,
            "nbytes": r.nbytes,
            "where": r.where,
            "devices": shares_text(r),
            "detail": r.detail,
            "culprit": r.name in culprits,
        }
        for r in records
    ]
    return pd.DataFrame(rows, columns=COLUMNS)


def diagnosis_table(d: Diagnosis) -> Any:
    """Every object of the diagnosis, culprits first."""
    return records_table(ordered_records(d), {f.name for f in d.culprits})
