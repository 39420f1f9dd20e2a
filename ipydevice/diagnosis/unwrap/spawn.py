"""``torch.multiprocessing.spawn``'s ``ProcessRaisedException``: "-- Process 1
terminated with the following error:" and that process's traceback as text."""

from __future__ import annotations

import re

from ipydevice.diagnosis.unwrap.inner import Inner

NAME = "multiprocessing_spawn"
HINT = "@ipydevice.diagnosed on the spawned function"
_HEAD = re.compile(r"-- Process (?P<index>\d+) terminated with the following error:\s*\n")


def unwrap(exc: BaseException) -> list[Inner]:
    if type(exc).__name__ != "ProcessRaisedException":
        return []
    text = str(getattr(exc, "msg", "") or "")
    match = _HEAD.search(text)
    if match is None:
        return []
    return [Inner(where=f"process {match['index']}", text=text[match.end() :], hint=HINT)]
