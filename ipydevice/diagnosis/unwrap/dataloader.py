"""A DataLoader worker's error, re-raised in the main process as text:
"Caught RuntimeError in DataLoader worker process 0. Original Traceback ...".

The worker's objects are copies (fork) or unpickled copies (spawn) of the
notebook's: none of the notebook's is blamed for them. The Dataset's variable is
named from the iterator the failing ``next()`` ran on. The worker's own diagnosis
comes with the ``ExceptionWrapper`` it sent (``ipydevice.worker_init_fn``), never
from the text: a Dataset's error message may hold anything."""

from __future__ import annotations

import re
from typing import Any

from ipydevice.diagnosis.carried import ATTRIBUTE
from ipydevice.diagnosis.unwrap.inner import Inner

NAME = "dataloader_worker"
# The start of the message ``ExceptionWrapper.reraise`` builds; the worker's traceback follows.
_CAUGHT = re.compile(
    r"Caught (?P<type>\w+) in DataLoader worker process (?P<worker>\d+)\.\s*\nOriginal "
)
HINT = "DataLoader(..., worker_init_fn=ipydevice.worker_init_fn)"
_MAX_FRAMES = 200


def unwrap(exc: BaseException) -> list[Inner]:
    text = _message(exc)
    match = _CAUGHT.match(text)
    if match is None:
        return []
    dataset, sent = _from_frames(exc)
    extra: dict[str, Any] = {} if dataset is None else {"dataset": dataset}
    if sent is not None:
        extra["payload"] = sent
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


def _from_frames(exc: BaseException) -> tuple[Any, Any]:
    """The failing DataLoader's Dataset (held while diagnosing only), from the
    iterator whose ``__next__`` is in the traceback; and the payload the worker sent
    on its ``ExceptionWrapper`` (``ipydevice.worker_init_fn``), the ``self`` of the
    ``reraise`` that raised the error here."""
    dataset = sent = None
    tb = exc.__traceback__
    for _ in range(_MAX_FRAMES):
        if tb is None:
            break
        frame = tb.tb_frame
        name = frame.f_code.co_name
        if name in ("__next__", "reraise"):
            state = getattr(frame.f_locals.get("self"), "__dict__", None)
            if isinstance(state, dict):
                if name == "__next__" and "_dataset" in state and dataset is None:
                    dataset = state["_dataset"]
                elif name == "reraise" and ATTRIBUTE in state:
                    sent = state[ATTRIBUTE]
        tb = tb.tb_next
    return dataset, sent
