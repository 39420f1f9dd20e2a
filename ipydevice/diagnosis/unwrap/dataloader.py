"""A DataLoader worker's error, re-raised in the main process as text:
"Caught RuntimeError in DataLoader worker process 0. Original Traceback ...".

The worker's objects are copies (fork) or unpickled copies (spawn) of the
notebook's: none of the notebook's is blamed for them. The Dataset's variable is
named from the iterator the failing ``next()`` ran on."""

from __future__ import annotations

import re
from typing import Any

from ipydevice.diagnosis.unwrap.inner import Inner

NAME = "dataloader_worker"
# The start of the message ``ExceptionWrapper.reraise`` builds; the worker's traceback follows.
_CAUGHT = re.compile(
    r"Caught (?P<type>\w+) in DataLoader worker process (?P<worker>\d+)\.\s*\nOriginal "
)
HINT = "DataLoader(..., worker_init_fn=ipydevice.worker_init_fn)"


def unwrap(exc: BaseException) -> list[Inner]:
    text = _message(exc)
    match = _CAUGHT.match(text)
    if match is None:
        return []
    dataset = _dataset(exc)
    extra: dict[str, Any] = {} if dataset is None else {"dataset": dataset}
    return [
        Inner(
            where=f"DataLoader worker {match['worker']}",
            text=text[match.end() :],
            hint=HINT,
            extra=extra,
        )
    ]


def _message(exc: BaseException) -> str:
    args = getattr(exc, "args", ())
    first = args[0] if args else ""
    return first if isinstance(first, str) else ""


def _dataset(exc: BaseException) -> Any:
    """The failing DataLoader's Dataset (held while diagnosing only), from the
    iterator whose ``__next__`` is in the traceback."""
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == "__next__":
            state = getattr(frame.f_locals.get("self"), "__dict__", None)
            if isinstance(state, dict) and "_dataset" in state:
                return state["_dataset"]
        tb = tb.tb_next
    return None
