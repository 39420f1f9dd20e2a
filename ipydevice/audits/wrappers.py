"""DataParallel / DistributedDataParallel: the wrapped module not on ``device_ids[0]``;
under ``torchrun``, ``device_ids`` not ``[LOCAL_RANK]``.
"""

from __future__ import annotations

import os

from ipydevice import registry
from ipydevice.audits.common import (
    module_to_fix,
)
from ipydevice.collect import probe
from ipydevice.collect.paths import format_path
from ipydevice.collect.scan import Entry
from ipydevice.diagnosis.culprits import same_device
from ipydevice.model import Finding, Problem

__all__ = ["AUDIT"]


def _wrapper_problems(entry: Entry) -> list[Problem]:
    """DataParallel / DDP: the module on ``device_ids[0]``; one GPU per rank."""
    kind = probe.class_name(entry.obj)
    if kind not in ("DataParallel", "DistributedDataParallel"):
        return []
    state = probe.module_dict(entry.obj)
    ids = state.get("device_ids")
    if not probe.is_a(ids, list) or not ids:
        return []
    first = probe.device_str(ids[0]) if not isinstance(ids[0], int) else f"cuda:{ids[0]}"
    out = []
    view = entry.module
    assert view is not None
    majority = view.majority()
    base = format_path(entry.path)
    if majority and not same_device(majority, first):
        why = f"{kind} needs its module on device_ids[0] = {first}, but it is on {majority}: move it before wrapping"
        finding = Finding(
            base, majority, "module", entry.where, why, rule="dataparallel", target=first
        )
        out.append(Problem(finding, (module_to_fix(entry, first),) if entry.named else ()))
    local = os.environ.get("LOCAL_RANK", "")
    if (
        kind == "DistributedDataParallel"
        and local.isascii()
        and local.isdigit()
        and first != f"cuda:{local}"
        and first.startswith("cuda")
    ):
        why = f"this is local rank {local} but its DDP uses {first}: the ranks would share one GPU (call torch.cuda.set_device(LOCAL_RANK) and use device_ids=[LOCAL_RANK])"
        out.append(
            Problem(
                Finding(
                    base, first, "module", entry.where, why, rule="ddp_rank", target=f"cuda:{local}"
                )
            )
        )
    return out


def _wrappers(entry: Entry) -> list[Problem]:
    return _wrapper_problems(entry) if entry.module is not None else []


AUDIT = registry.Audit("wrappers", _wrappers, tensors=False)
