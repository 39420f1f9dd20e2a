"""A module registry wider than ``max_items`` (a ``ParameterList`` of 100,000
parameters): its first ``max_items`` tensors are read one by one, as every
registry's are; the devices and bytes of the rest are counted, so that ``%devices``
and ``check()`` speak of all of them, and a few of each device are kept so that
one on another device is named (``model.params[77777]``).

Counting costs two C-level reads per plain tensor (a subclass's within the time
budget), up to :data:`LIMIT` tensors per scan and half the time budget; what is
not counted by then is said (``the devices of 2,000 of 100,000 parameters were
read``).
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

from ipydevice.collect import probe
from ipydevice.collect.paths import Path

__all__ = ["LIMIT", "count_rest", "counts_by_kind", "settle", "unread_note"]

#: Tensors past ``max_items`` counted in one scan, every registry together.
LIMIT = 1_000_000
#: Tensors kept of each device of a registry (named when off the module's device).
_EXAMPLES = 8
#: The clock is read every so many tensors.
_EVERY = 4096


def count_rest(
    table: dict[str, Any],
    rel: Path,
    kind: str,
    limit: int,
    view: Any,
    is_tensor: Any,
    budget: probe.Budget,
    left: int,
) -> int:
    """Counts the tensors of ``table`` past its first ``limit`` into ``view``
    (``counted``, ``examples``, ``unread``); ``rel``: the registry's module. Returns
    how many were counted (at most ``left``)."""
    total = len(table)
    counted = 0
    devices: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    kept: dict[str, int] = {}
    try:
        for name, tensor in itertools.islice(dict.items(table), limit, None):
            if counted >= left or (counted % _EVERY == 0 and budget.left() < budget.seconds / 2):
                break  # half the budget stays for what the scan reads one by one
            counted += 1
            if tensor is None:
                continue
            placed = probe.plain_placement(tensor)
            if placed is None:
                if not is_tensor(tensor):
                    continue
                placed = probe.placement(tensor)
            device, nbytes = placed
            if device == probe.UNKNOWN:
                continue
            devices[device] += 1
            sizes[device] += nbytes
            if kept.get(device, 0) < _EXAMPLES:
                kept[device] = kept.get(device, 0) + 1
                view.examples.append(((*rel, ("attr", name)), tensor, kind, device, nbytes))
    except RuntimeError:  # the registry changed while it was read (another thread)
        pass
    for device, count in devices.items():
        view.counted.append((rel, kind, device, count, sizes[device]))
    if limit + counted < total:
        view.unread.append((rel, kind, limit + counted, total))
    return counted


def settle(view: Any) -> None:
    """Moves the kept tensors that are off the view's majority device into its
    registered ones (the audits name them), out of the counts."""
    if not view.examples:
        return
    view.reset()
    majority = view.majority()
    keep = []
    for rel, tensor, kind, device, nbytes in view.examples:
        if device == majority:
            keep.append((rel, tensor, kind, device, nbytes))
            continue
        view.registered.append((rel, tensor, kind))
        owner = rel[:-1]
        for index, (r, k, d, count, size) in enumerate(view.counted):
            if (r, k, d) == (owner, kind, device) and count:
                view.counted[index] = (r, k, d, count - 1, size - nbytes)
                break
    view.examples = keep
    view.reset()


def counts_by_kind(view: Any) -> Counter[str]:
    """Tensors counted past the read ones, by kind (``parameter``, ``buffer``)."""
    out: Counter[str] = Counter()
    for _, kind, _, count, _ in view.counted:
        out[kind] += count
    return out


def unread_note(path_text: str, kind: str, read: int, total: int) -> str:
    """What ``%devices`` and ``check()`` say of a registry not read to its end."""
    return f"{path_text}: the devices of {read:,} of {total:,} {kind}s were read"
