"""Ray's ``RayTaskError`` (and Ray Train's failures that carry one): ``.cause`` is the
task's exception, unpickled in the driver with the payload the task attached. The
driver raises it as an instance of the cause's class too, ``RayTaskError(RuntimeError)``,
whose text starts with the task and its process: "ray::step() (pid=4242, ip=...)"."""

from __future__ import annotations

import re

from ipydevice.diagnosis.unwrap.inner import Inner

NAME = "ray_task"
HINT = "@ipydevice.diagnosed under @ray.remote"
_TITLE = re.compile(
    r"(?:\x1b\[[0-9;]*m)?(?P<name>[\w.:-]+)\(\)(?:\x1b\[[0-9;]*m)? \(pid=(?P<pid>\d+)"
)
_COLOR = re.compile(r"\x1b\[[0-9;]*m")


def unwrap(exc: BaseException) -> list[Inner]:
    if not any(c.__name__ in ("RayTaskError", "RayActorError") for c in type(exc).__mro__):
        return []
    cause = vars(exc).get("cause")
    text = _COLOR.sub("", _text(exc))
    title = _TITLE.match(text)
    if title is not None:
        where = f"Ray {title['name'].removeprefix('ray::')} (pid {title['pid']})"
    else:
        where = "a Ray task"
    return [
        Inner(
            where=where,
            exc=cause if isinstance(cause, BaseException) else None,
            text=text,
            hint=HINT,
        )
    ]


def _text(exc: BaseException) -> str:
    text = vars(exc).get("traceback_str")
    if isinstance(text, str):
        return text
    try:
        return str(exc)
    except Exception:
        return ""
