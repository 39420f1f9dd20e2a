"""One-line hooks that make worker processes and ranks diagnose their own errors.

The frames that explain a device error raised in a DataLoader worker or a rank exist
only there; the notebook that launched them gets text, or a wrapper. These hooks
diagnose the error where it happens and attach the diagnosis to the exception (a
note and a payload, :mod:`ipydevice.diagnosis.carried`), so that it reaches the
notebook's panel, torchrun's root-cause summary, Ray and any traceback printed:

* :func:`worker_init_fn`: ``DataLoader(..., worker_init_fn=ipydevice.worker_init_fn)``,
  or ``ipydevice.worker_init_fn(your_init_fn)`` to run your own first;
* :func:`diagnosed`: a decorator for a function launched by
  ``torch.multiprocessing.spawn``, torchrun, ``accelerate.notebook_launcher`` or Ray.

Nothing here is imported by ``%load_ext`` and nothing imports torch: the worker's
own ``torch.utils.data`` is read from ``sys.modules``.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ipydevice._debug import contained

__all__ = ["carry", "diagnosed", "process_label", "worker_init_fn"]

_F = TypeVar("_F", bound=Callable[..., Any])
_WORKER = "torch.utils.data._utils.worker"


def process_label() -> str:
    """Where this process stands: ``DataLoader worker 0``, ``rank 1/2`` or ``process 4242``."""
    info = _worker_info()
    if info is not None:
        return f"DataLoader worker {info.id}"
    from ipydevice.integrations.excepthook import environment_text

    rank, world = environment_text("RANK"), environment_text("WORLD_SIZE")
    if rank is None:
        dist = sys.modules.get("torch.distributed")
        with contained("rank"):
            if dist is not None and dist.is_available() and dist.is_initialized():
                rank, world = str(dist.get_rank()), str(dist.get_world_size())
    if rank is not None:
        return f"rank {rank}/{world}" if world else f"rank {rank}"
    return f"process {os.getpid()}"


def _worker_info() -> Any:
    data = sys.modules.get("torch.utils.data")
    get = getattr(data, "get_worker_info", None)
    return get() if callable(get) else None


def carry(exc: BaseException, namespace: Mapping[str, Any] | None = None, where: str = "") -> None:
    """Diagnoses ``exc`` here and attaches the diagnosis to it (contained: never raises)."""
    with contained("diagnosis"):
        from ipydevice.diagnosis.carried import attach, payload
        from ipydevice.pipeline.engine import diagnose, recognise_exception

        if payload(exc) is not None or not recognise_exception(exc)[1].is_device_error:
            return
        attach(exc, diagnose(exc, namespace=namespace), where or process_label())


def diagnosed(func: _F | None = None, *, namespace: Mapping[str, Any] | None = None) -> Any:
    """Decorates a launched function: an exception it raises carries its diagnosis.

    ``@ipydevice.diagnosed`` above ``def train(rank, ...)`` for
    ``torch.multiprocessing.spawn``, torchrun, ``accelerate.notebook_launcher`` or a
    Ray task: the error is diagnosed in the rank, against the function's module
    globals (or ``namespace``), and re-raised unchanged but for its note and payload.
    """
    if func is None:
        return functools.partial(diagnosed, namespace=namespace)

    @functools.wraps(func)
    def launched(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except Exception as exc:
            carry(exc, namespace if namespace is not None else _globals_of(func))
            raise

    return launched


def _globals_of(func: Callable[..., Any]) -> Mapping[str, Any] | None:
    inner = getattr(func, "__wrapped__", func)
    names = getattr(inner, "__globals__", None)
    return names if isinstance(names, dict) else None


def worker_init_fn(worker_id: Any = None, *, then: Callable[[int], Any] | None = None) -> Any:
    """``DataLoader(..., worker_init_fn=ipydevice.worker_init_fn)``: the worker's errors
    (in the Dataset, the sampler's indices, ``collate_fn``) carry their diagnosis.

    Given your own init function instead of a worker id,
    ``ipydevice.worker_init_fn(seed_worker)`` returns one that runs both (picklable,
    for the ``spawn`` start method too)."""
    if callable(worker_id):
        return functools.partial(worker_init_fn, then=worker_id)
    _diagnose_in_worker()
    if then is not None:
        return then(worker_id)
    return None


def _diagnose_in_worker() -> None:
    """Wraps the worker loop's ``ExceptionWrapper`` in this worker process only: the
    error is diagnosed while its frames are alive, before it is formatted as text,
    and its payload goes with the wrapper."""
    module = sys.modules.get(_WORKER)
    original = getattr(module, "ExceptionWrapper", None)
    if original is None or getattr(original, "_ipydevice", False) or _worker_info() is None:
        return  # not in a worker: the main process's loader stays as it is

    def wrapping(exc_info: Any = None, where: str = "in background") -> Any:
        if exc_info is None:
            exc_info = sys.exc_info()
        if exc_info[1] is not None:
            carry(exc_info[1], _worker_namespace())
        wrapper = original(exc_info, where)
        if exc_info[1] is not None:
            _send_with(wrapper, exc_info[1])
        return wrapper

    wrapping._ipydevice = True  # type: ignore[attr-defined]
    module.ExceptionWrapper = wrapping  # type: ignore[union-attr]


def _send_with(wrapper: Any, exc: BaseException) -> None:
    """Puts the payload on the ``ExceptionWrapper`` the worker sends: the main process
    gets the error back as text only, and the wrapper (pickled with its attributes)
    is the ``self`` of the ``reraise`` that raises it there
    (:mod:`ipydevice.diagnosis.unwrap.dataloader` reads it)."""
    with contained("diagnosis"):
        from ipydevice.diagnosis.carried import ATTRIBUTE

        data = vars(exc).get(ATTRIBUTE)
        if isinstance(data, dict):
            setattr(wrapper, ATTRIBUTE, data)


def _worker_namespace() -> dict[str, Any]:
    """The names a worker's objects go by: the launching program's (a forked worker
    has the notebook's own, copied), and ``dataset`` for the worker's Dataset when
    no name there is it."""
    names: dict[str, Any] = {}
    main = sys.modules.get("__main__")
    if main is not None:
        names.update(vars(main))
    info = _worker_info()
    dataset = getattr(info, "dataset", None)
    if dataset is not None and not any(value is dataset for value in names.values()):
        names["dataset"] = dataset
    return names
