"""The ``forked_cuda`` family. A process forked after CUDA was initialised cannot use CUDA.

``notebook_launcher`` (accelerate), Lightning's notebook strategies and
``torch.multiprocessing`` with ``fork`` start their workers by forking the
notebook's process; if that process initialised CUDA first (a model moved to
the GPU, a CUDA tensor, a ``torch.cuda`` call), the children fail with "Cannot
re-initialize CUDA in forked subprocess". Moving tensors does not help: CUDA stays
initialised until the kernel restarts. The panel lists the notebook's objects on
CUDA (what initialised it, where it can tell) and says to restart the kernel and
do all CUDA work inside the launched function.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ipydevice.collect import probe
from ipydevice.family import Blame, Family, MessageFacts, wording
from ipydevice.model import Finding

if TYPE_CHECKING:  # pragma: no cover
    from ipydevice.collect.frames import FrameView
    from ipydevice.collect.scan import Scan

ID = "forked_cuda"

#: The accelerators whose runtimes cannot be re-initialised after a fork.
_ACCEL = r"(?P<d1>CUDA|XPU|HIP|ROCm)"

WORDINGS = (
    # torch.cuda._lazy_init in the child (and torch.xpu's twin)
    wording(ID, 5, "forked subprocess", rf"Cannot re-initialize {_ACCEL} in forked subprocess"),
    # accelerate's notebook_launcher, before and during the launch
    wording(
        ID,
        6,
        "notebook_launcher",
        rf"{_ACCEL} has been initialized before the `?notebook_launcher`? could create a "
        r"forked subprocess",
    ),
    wording(
        ID,
        7,
        "notebook launcher",
        rf"stable environment for the notebook launcher.{{0,400}}?causing {_ACCEL} to be initialized",
    ),
    # Lightning (older PyTorch): its own words for the same state
    wording(
        ID,
        8,
        "lightning",
        r"Lightning can't create new processes if (?P<d1>CUDA) is already initialized",
    ),
)

#: At most this many of the notebook's objects are named as having initialised CUDA.
_LISTED = 5


def _advice(facts: MessageFacts, target: str) -> str:
    accel = (facts.devices[0] if facts.devices else "cuda").upper()
    return (
        f"restart the kernel, then create models and tensors on {accel} only inside the function "
        f"you launch: {accel} was initialised in this process before the launcher forked, and "
        "moving objects back does not undo it"
    )


def _target(facts: MessageFacts, views: Sequence[FrameView]) -> str:
    return "cpu"  # in the notebook's process: nothing should be on the accelerator


def _blame(
    facts: MessageFacts, scan: Scan, views: Sequence[FrameView], target: str
) -> list[Blame] | None:
    """The notebook's top-level objects on the accelerator: what initialised it."""
    accel = facts.devices[0] if facts.devices else "cuda"
    found: list[Blame] = []
    try:
        names = list(
            itertools.islice(
                dict.items(scan.namespace)
                if type(scan.namespace) is dict
                else scan.namespace.items(),
                scan.settings.max_objects,
            )
        )
    except Exception:  # a namespace that cannot be listed: nothing to name
        return []
    for name, value in names:
        if name.startswith("_") or not (probe.is_tensor(value) or probe.is_module(value)):
            continue
        new = id(value) not in scan.entries
        entry = scan.add(value, (("name", name),), "namespace")
        if entry is None:
            continue
        device = _device_of(entry)
        if not device.startswith(accel):
            if new:  # looked at, not involved: not listed among the objects
                scan.entries.pop(id(value), None)
            continue
        why = (
            f"on {device} in the notebook's process: it initialised {accel.upper()} before the fork"
        )
        found.append(
            Blame(
                Finding(name, device, entry.kind, "namespace", why, rule="initialised_cuda"),
                entry,
            )
        )
        if len(found) >= _LISTED:
            break
    return found


def _device_of(entry: object) -> str:
    module = getattr(entry, "module", None)
    if module is not None:
        return str(module.majority())
    return str(getattr(entry, "device", ""))


FAMILY = Family(
    ID,
    "a forked worker could not use CUDA: the notebook's process initialised it before the fork",
    WORDINGS,
    advice=_advice,
    title="CUDA initialised before a forked worker started",
    target=_target,
    target_reason="the notebook's process must not touch the accelerator before a fork",
    blame=_blame,
    audited=("DataLoader",),
    moves=False,
)
