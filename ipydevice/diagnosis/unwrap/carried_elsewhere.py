"""An exception that another process diagnosed and sent back as itself (Dask, a
custom queue, any transport that pickles the exception): its payload's ``pid`` is
not this process's. Its frames, if any came back, are not the objects that failed:
its own diagnosis is shown, and the namespace here is not scanned."""

from __future__ import annotations

import os

from ipydevice.diagnosis.carried import payload
from ipydevice.diagnosis.unwrap.inner import Inner

NAME = "carried_elsewhere"


def unwrap(exc: BaseException) -> list[Inner]:
    data = payload(exc)
    if data is None or data.get("pid") in (None, os.getpid()):
        return []
    where = str(data.get("where") or f"process {data['pid']}")
    return [Inner(where=where, exc=exc)]
