"""The indexed tensor follows its indices when the computation lives where they are.

"indices should be either on cpu or on the same device as the indexed tensor (cpu)"
demands the indices on the CPU (:mod:`ipydevice.diagnosis.demands`). When the rest of
the computation lives on the indices' accelerator (a lookup table, a loss's per-class
weight or a schedule left on the CPU, indexed with ids or timesteps that came with the
batch), moving the indices gets past the failing line and the next line fails: the
table is what was left behind. The device flow (:mod:`ipydevice.diagnosis.flow`)
decides, by what it predicts of the failing statements and the ones after them:

* with the indexed tensor moved to the indices, no clash follows; and
* with the indices moved to the CPU instead a clash follows, or everything else those
  statements read (tensors, modules) lives on the indices' device.

Then the target is the indices' device and the indexed tensor is the culprit. The
indexing is a subscript (``table[idx]``) or a tensor method taking indices
(``acc.index_put_((idx,), v, accumulate=True)``, ``acc.index_add_(0, idx, src)``).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

from ipydevice.code.flow import indexing_operands
from ipydevice.collect import probe
from ipydevice.collect.frames import FrameView, failing_statement, safe_value
from ipydevice.collect.scan import Entry, Scan
from ipydevice.collect.walk import registers
from ipydevice.diagnosis.demands import Demanded
from ipydevice.diagnosis.devices import same_device
from ipydevice.diagnosis.flow import device_flow, moved_module, predicted

__all__ = ["Followed", "indexed_follows"]


@dataclass(eq=False)
class Followed:
    """The indexed tensor moves to its indices: the target, why, and the tensor."""

    target: str
    reason: str
    why: str
    entry: Entry


def indexed_follows(applied: Demanded, scan: Scan, views: Sequence[FrameView]) -> Followed | None:
    """The indexed tensor as the culprit, when the computation lives on its indices'
    device (see module docstring); None: the message's demand stands."""
    if not applied.demand.subscript or not applied.target:
        return None
    demanded_ids = {id(e.obj) for e in applied.entries}
    for index in range(len(views) - 1, -1, -1):
        view = views[index]
        found = failing_statement(view)
        if found is None:
            continue
        for held, indices, _ in indexing_operands(found[0]):
            ok, table = safe_value(held, view.frame)
            if not ok or not probe.is_tensor(table):
                continue
            if not same_device(probe.placement(table)[0], applied.target):
                continue
            read = [(n, *safe_value(n, view.frame)) for n in indices]
            values = [v for _, ok, v in read if ok and probe.is_tensor(v)]
            # an index computed in the statement (``labels.argmax(1)``): where the flow says
            made = [predicted(view, n) for n, ok, _ in read if not ok]
            made_on = {k.device for k in made if k is not None and k.kind == "tensor"}
            if not values and not made_on and applied.entries:
                values = [e.obj for e in applied.entries]
            there = {probe.placement(v)[0] for v in values} | made_on
            there -= {"cpu", probe.UNKNOWN, ""}
            if len(there) != 1 or not (
                {id(v) for v in values} & demanded_ids or not demanded_ids or made_on
            ):
                continue
            device = there.pop()
            # a module's own parameter or buffer (``self.start_transitions``): the
            # module follows, with all it registers
            owner = _registering(held, table, view)
            reason = _follows(table, values, device, applied.target, views, owner)
            if reason is None:
                return None
            if owner is not None:
                held, table = held.value, owner  # type: ignore[attr-defined]
            # (a cell's own name is the namespace's: ``conf``, not ``conf in In [3]``)
            own = view.is_module_level and isinstance(held, ast.Name)
            entry = scan.add(
                table,
                (("name" if own else "local", ast.unparse(held)),),
                "namespace" if own else view.label,
                on_line=True,
                operand=True,
                user=view.is_user,
                frame=index,
            )
            if entry is None:
                return None
            entry.named |= own
            what = (
                "the module whose tensor is indexed" if owner is not None else "the tensor indexed"
            )
            why = (
                f"{what}, on {applied.target}: its indices and the rest of the "
                f"computation are on {device}"
            )
            return Followed(device, reason, why, entry)
    return None


def _registering(held: ast.expr, table: object, view: FrameView) -> object | None:
    """The module ``held`` (``<module>.<name>``) reads ``table`` from as one of its
    registered parameters or buffers; None otherwise."""
    if not isinstance(held, ast.Attribute):
        return None
    ok, owner = safe_value(held.value, view.frame)
    return owner if ok and probe.is_module(owner) and registers(owner, table) else None


def _follows(
    table: object,
    indices: list,
    device: str,
    demanded: str,
    views: Sequence[FrameView],
    owner: object | None = None,
) -> str | None:
    flow = device_flow(views)
    if not flow.blocks:
        return None
    moved = {id(table): device}
    if owner is not None:  # the module with all it registers
        moved_module(owner, device, moved)
    if flow.clash(moved) is not None:
        return None  # moving the table would not settle it either
    after = flow.clash({id(v): demanded for v in indices}) if indices else None
    if after is not None:
        return (
            f"where the indices and the rest of the computation are: with the indices on "
            f"{demanded}, `{after.text}` would meet {' and '.join(after.devices)}"
        )
    # the table's siblings (a schedule's other tables, on its holder) go with it
    where, witness = flow.computation(
        {*moved, *(id(v) for v in indices)}, beside=flow.holders(table)
    )
    if where and same_device(where, device):
        return f"where the indices and the rest of the computation are (`{witness}` is there)"
    return None
