"""``ExceptionGroup``/``BaseExceptionGroup`` (``raise ExceptionGroup(...)``, also
outside an ``except`` block) and ``asyncio.TaskGroup``, whose failed tasks come back
as a group: the members were raised in this process, their frames are alive."""

from __future__ import annotations

from ipydevice.diagnosis.unwrap.inner import Inner

NAME = "exception_group"
_MAX = 16


def unwrap(exc: BaseException) -> list[Inner]:
    members = getattr(exc, "exceptions", None)
    if not isinstance(members, tuple) or not _is_group(exc):
        return []
    label = "TaskGroup" if "TaskGroup" in str(getattr(exc, "message", "")) else type(exc).__name__
    count = len(members)
    return [
        Inner(where=f"exception {i + 1} of {count} in the {label}", exc=member, remote=False)
        for i, member in enumerate(members[:_MAX])
        if isinstance(member, BaseException)
    ]


def _is_group(exc: BaseException) -> bool:
    # the builtin (Python 3.11+) or the exceptiongroup backport's class
    return any(c.__name__ == "BaseExceptionGroup" for c in type(exc).__mro__)
