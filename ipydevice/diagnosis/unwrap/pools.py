"""``multiprocessing.Pool`` and ``concurrent.futures.ProcessPoolExecutor``: the
worker's exception is unpickled and re-raised in the caller with the worker's
traceback as text in ``__cause__`` (a ``RemoteTraceback``); the payload the worker
attached came with it."""

from __future__ import annotations

from ipydevice.diagnosis.unwrap.inner import Inner

NAME = "process_pool"
HINT = "@ipydevice.diagnosed on the function the pool runs"


def unwrap(exc: BaseException) -> list[Inner]:
    cause = exc.__cause__
    text = getattr(cause, "tb", None)
    if cause is None or "RemoteTraceback" not in type(cause).__name__ or not isinstance(text, str):
        return []
    return [Inner(where="a pool worker process", exc=exc, text=text, hint=HINT)]
