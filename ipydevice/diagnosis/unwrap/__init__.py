"""Exceptions that wrap the device error: one unwrapper per file, tried in order.

An unwrapper takes an exception and returns the :class:`Inner` errors it wraps, or
an empty list when the exception is not its kind. Two kinds of inner error:

* **in this process** (``exc`` set, ``remote`` False): an ``ExceptionGroup`` member, a
  failed ``asyncio.TaskGroup`` task. Its frames are alive: the engine diagnoses it
  against the notebook's namespace, as if it were raised alone;
* **from another process** (``remote`` True): a DataLoader worker's re-raised text,
  a torchrun rank's error file, a ``torch.multiprocessing.spawn`` process, a Ray
  task, a process pool's ``RemoteTraceback``. Its objects live in that process: the
  notebook's namespace is never scanned for it. The process's own diagnosis comes
  from the payload the exception carries, or from the note in its traceback's text
  (:mod:`ipydevice.diagnosis.carried`); without either, from its message.

To add one, write a module with ``NAME`` and ``unwrap(exc) -> list[Inner]`` here and
list it in ``UNWRAPPERS`` below; :class:`Inner` is in ``inner.py``.
"""

from __future__ import annotations

from collections.abc import Callable

from ipydevice._debug import contain
from ipydevice.diagnosis.unwrap import (
    carried_elsewhere,
    dataloader,
    elastic,
    groups,
    pools,
    ray,
    spawn,
)
from ipydevice.diagnosis.unwrap.inner import Inner, last_line

__all__ = ["UNWRAPPERS", "Inner", "last_line", "unwrap"]

#: The unwrappers, tried in order (the first that knows the exception answers).
UNWRAPPERS: list[Callable[[BaseException], list[Inner]]] = [
    dataloader.unwrap,
    elastic.unwrap,
    spawn.unwrap,
    ray.unwrap,
    pools.unwrap,
    groups.unwrap,
    carried_elsewhere.unwrap,
]


def unwrap(exc: BaseException) -> list[Inner]:
    """The errors ``exc`` wraps, by the first unwrapper that knows it; else []."""
    for unwrapper in UNWRAPPERS:
        try:
            inners = unwrapper(exc)
        except BaseException as failure:  # an exception's own attributes may raise
            contain(failure)
            continue
        if inners:
            return inners
    return []
