"""torch.distributed.elastic's ``ChildFailedError`` (torchrun, ``elastic_launch``,
``accelerate.notebook_launcher``): one failure per rank, each with the error file
the rank's ``@record`` (or ipydevice's hook) wrote; its ``py_callstack`` is the
rank's traceback as text, with ipydevice's note when the rank attached one (its
words), and the payload beside it when ipydevice's hook wrote the file (its fix)."""

from __future__ import annotations

from typing import Any

from ipydevice.diagnosis.unwrap.inner import Inner

NAME = "elastic_child_failed"
HINT = "@ipydevice.diagnosed on the launched function (or ipydevice.install() in the script)"
_MAX = 64


def unwrap(exc: BaseException) -> list[Inner]:
    failures = getattr(exc, "failures", None)
    if not isinstance(failures, dict) or type(exc).__name__ != "ChildFailedError":
        return []
    out = []
    for rank, failure in sorted(failures.items(), key=lambda item: str(item[0]))[:_MAX]:
        text = _callstack(failure)
        if text:
            sent = _sent(failure)
            extra = {"payload": sent} if sent is not None else {}
            out.append(Inner(where=f"rank {rank}", text=text, hint=HINT, extra=extra))
    return out


def _sent(failure: Any) -> Any:
    """The payload ipydevice's hook wrote beside the traceback in the rank's error
    file (``extraInfo.ipydevice``): data, where the traceback is text."""
    message = getattr(failure, "message", None)
    extra = message.get("extraInfo") if isinstance(message, dict) else None
    return extra.get("ipydevice") if isinstance(extra, dict) else None


def _callstack(failure: Any) -> str:
    message = getattr(failure, "message", None)
    if isinstance(message, dict):
        extra = message.get("extraInfo")
        stack = extra.get("py_callstack") if isinstance(extra, dict) else None
        if isinstance(stack, str):
            return stack
        message = message.get("message")
    return message if isinstance(message, str) and "Traceback" in message else ""
