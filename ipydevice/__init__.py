"""ipydevice: names the tensor on the wrong device when a PyTorch cell fails.

In IPython or Jupyter::

    %load_ext ipydevice      # a panel under every device error
    %devices                 # where everything in the namespace lives

From Python::

    import ipydevice
    d = ipydevice.diagnose(exc)   # who is on which device, where to move it, fixes
    ipydevice.inventory()         # the namespace, grouped by device
    ipydevice.check(model, batch) # preflight: every audit, before training

Worker processes and ranks: ``DataLoader(..., worker_init_fn=ipydevice.worker_init_fn)``
and ``@ipydevice.diagnosed`` on a launched function attach each error's diagnosis to it.

Your own rules: ``@ipydevice.audit(name)``, ``ipydevice.message(pattern)`` and
``@ipydevice.on_diagnosis`` (see :mod:`ipydevice.plugins`).

Importing this package is cheap: it imports neither torch, IPython, pandas nor
ipywidgets. Each is imported only where it is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "AuditContext",
    "Diagnosis",
    "Finding",
    "Fix",
    "Inventory",
    "Problem",
    "Step",
    "__version__",
    "audit",
    "check",
    "configure",
    "diagnose",
    "diagnosed",
    "install",
    "inventory",
    "load_ipython_extension",
    "message",
    "on_diagnosis",
    "override",
    "uninstall",
    "unload_ipython_extension",
    "worker_init_fn",
]

# ``pytest -p ipydevice``: pytest registers this package, then the plugin module
# named here (importing neither until pytest asks).
pytest_plugins = ["ipydevice.integrations.pytest_plugin"]

if TYPE_CHECKING:  # pragma: no cover
    from ipydevice.model import Diagnosis, Finding, Fix, Inventory, Problem, Step
    from ipydevice.plugins import AuditContext

if TYPE_CHECKING:  # pragma: no cover
    from contextlib import AbstractContextManager

    from ipydevice.settings import Settings


def configure(**changes: Any) -> Settings:
    """Changes ipydevice's limits for the rest of the process (``max_rows=30``...).

    See :func:`ipydevice.settings.configure`; the names are the fields of
    :class:`ipydevice.settings.Settings`.
    """
    from ipydevice.settings import configure as _configure

    return _configure(**changes)


def override(**changes: Any) -> AbstractContextManager[Settings]:
    """Changes ipydevice's limits inside a ``with`` block only.

    See :func:`ipydevice.settings.override`.
    """
    from ipydevice.settings import override as _override

    return _override(**changes)


def diagnose(exc: BaseException | None = None, *, namespace: Any = None) -> Diagnosis:
    """Explains a device error. See :func:`ipydevice.pipeline.engine.diagnose`."""
    from ipydevice.pipeline.engine import diagnose as _diagnose

    return _diagnose(exc, namespace=namespace)


def inventory(namespace: Any = None, names: Any = None) -> Inventory:
    """Where everything in a namespace lives. See :func:`ipydevice.pipeline.inventory.inventory`."""
    from ipydevice.pipeline.inventory import inventory as _inventory

    return _inventory(namespace, names=names)


def check(*objects: Any, namespace: Any = None, names: Any = None) -> Any:
    """Preflight: every device audit on a model, batch, optimizer, criterion...

    See :func:`ipydevice.audits.checkup.check`. The result is falsy when all is well.
    """
    from ipydevice.audits.checkup import check as _check

    return _check(*objects, namespace=namespace, names=names)


def audit(name: str) -> Any:
    """Registers your own audit (a decorator): see :func:`ipydevice.plugins.audit`."""
    from ipydevice.plugins import audit as _audit

    return _audit(name)


def message(pattern: Any, *, exc_types: Any = (), name: str | None = None) -> None:
    """Makes a wording of your own a device error: see :func:`ipydevice.plugins.message`."""
    from ipydevice.plugins import message as _message

    _message(pattern, exc_types=exc_types, name=name)


def on_diagnosis(func: Any) -> Any:
    """Calls ``func(diagnosis)`` for every device error reported (a decorator): see
    :func:`ipydevice.plugins.on_diagnosis`."""
    from ipydevice.plugins import on_diagnosis as _on_diagnosis

    return _on_diagnosis(func)


def install() -> None:
    """Adds the device report after uncaught tracebacks in plain Python
    (``sys.excepthook``, and ``threading.excepthook`` for threads)."""
    from ipydevice.integrations.excepthook import install as _install

    _install()


def uninstall() -> None:
    """Puts back the ``sys.excepthook`` and ``threading.excepthook`` that were there
    before :func:`install`."""
    from ipydevice.integrations.excepthook import uninstall as _uninstall

    _uninstall()


def worker_init_fn(worker_id: Any = None, *, then: Any = None) -> Any:
    """``DataLoader(..., worker_init_fn=ipydevice.worker_init_fn)``: a worker's device
    errors carry their diagnosis to the notebook; ``ipydevice.worker_init_fn(your_fn)``
    runs yours too. See :func:`ipydevice.integrations.workers.worker_init_fn`."""
    from ipydevice.integrations.workers import worker_init_fn as _worker_init_fn

    return _worker_init_fn(worker_id, then=then)


def diagnosed(func: Any = None, *, namespace: Any = None) -> Any:
    """Decorates a function launched in other processes (``torch.multiprocessing.spawn``,
    torchrun, ``accelerate.notebook_launcher``, Ray): its device errors carry their
    diagnosis. See :func:`ipydevice.integrations.workers.diagnosed`."""
    from ipydevice.integrations.workers import diagnosed as _diagnosed

    return _diagnosed(func, namespace=namespace)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext ipydevice``: installs the panel hook and ``%devices``."""
    from ipydevice.integrations.ipython import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext ipydevice``: puts the shell back exactly as it was."""
    from ipydevice.integrations.ipython import unload

    unload(ipython)


def __getattr__(name: str) -> Any:
    if name in ("Diagnosis", "Finding", "Fix", "Inventory", "Problem", "Step"):
        from ipydevice import fixes, model, render  # the records' views and apply

        del fixes, render

        return getattr(model, name)
    if name == "AuditContext":
        from ipydevice.plugins import AuditContext

        return AuditContext
    raise AttributeError(f"module 'ipydevice' has no attribute {name!r}")
