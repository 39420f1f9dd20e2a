"""Stage 4, audit: causes of device errors that are visible before anything fails.

One file per audit, each registered as an :class:`~ipydevice.registry.Audit` when
this package is imported; :func:`ipydevice.plugins.audits` lists them beside the
user's own and :func:`ipydevice.plugins.remove` takes one out of ``check()``,
``%devices`` and the error panel. ``checkup`` runs them all. To add one, copy a
small file (``loaders.py``) and list it below.
"""

from ipydevice import registry
from ipydevice.audits import (
    companions,
    loaders,
    modules,
    optimizers,
    stale_optimizers,
    worker_transfers,
    wrappers,
)

#: In the order they run on each object (a module's own problems, then its wrapper's).
BUILTIN = (
    modules.AUDIT,
    wrappers.AUDIT,
    optimizers.AUDIT,
    stale_optimizers.AUDIT,
    loaders.AUDIT,
    worker_transfers.AUDIT,
    companions.AUDIT,
)

for _audit in BUILTIN:
    registry.add_audit(_audit)
