"""A model split across devices on purpose: the inputs follow the part that failed.

Offloading keeps a part of a model where the user put it (an embedding in RAM, the
body on the GPU), and the model's own code carries the activations across:
``self.body(h.to(self.body.weight.device))``. When the part that failed is such a
part, moving it (or the whole model) to the accelerator undoes the offload; what was
wrong is the input given to it. The split is taken as meant when the user's function
that called the failing part moves a tensor, itself, to the device of *another* part
of the same model (a ``.to(<chain>.device)`` whose chain is a parameter or buffer of
the model on another device than the failing part: ``x.device``, an input's, is not). Then the target is the failing part's device, and the
model's parts are not culprits.
"""

from __future__ import annotations

import ast
import functools
import types
from collections.abc import Sequence

from ipydevice.code.statements import code_tree
from ipydevice.collect import probe
from ipydevice.collect.frames import FrameView, safe_value
from ipydevice.collect.scan import Entry, Scan
from ipydevice.diagnosis.devices import same_device

__all__ = ["split_part"]


def split_part(
    scan: Scan, failing: Entry | None, top: Entry | None, views: Sequence[FrameView]
) -> str:
    """The failing part's device when the model ``top`` is split on purpose (see
    module docstring), else ''."""
    if failing is None or failing.module is None or top is None or top.module is None:
        return ""
    view = next(
        (
            v
            for v in reversed(views)
            if v.is_user and not v.is_module_level and probe.is_module(v.self_object)
        ),
        None,
    )  # (the innermost method of the user's model decides)
    moves = _moves_to_devices(view.frame.f_code) if view is not None else ()
    if view is None or not moves:
        return ""
    device = failing.module.majority()
    if not device or device in ("mixed", "?") or same_device(top.module.majority(), device):
        return ""  # (the part is where most of the model is: no split to keep)
    owner = scan.entries.get(id(view.self_object))
    for moved_to in moves:
        ok, there = safe_value(moved_to, view.frame)
        if (
            ok
            and probe.is_tensor(there)
            and owner is not None
            and _inside(there, owner)  # a part of the model, not an input (x.device)
            and not _inside(there, failing)
        ):
            other = probe.placement(there)[0]
            if other not in ("", probe.UNKNOWN) and not same_device(other, device):
                return device
    return ""


@functools.lru_cache(maxsize=64)
def _moves_to_devices(code: types.CodeType) -> tuple[ast.expr, ...]:
    """``X`` of each ``t.to(X.device)`` in the function ``code`` (read once per code)."""
    parsed = code_tree(code)
    if parsed is None:
        return ()
    found = (_moved_to(node) for node in ast.walk(parsed[0]))
    return tuple(node for node in found if node is not None)


def _moved_to(node: ast.AST) -> ast.expr | None:
    """``X`` of ``t.to(X.device)``: the tensor whose device a move reads."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "to"
        and node.args
    ):
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Attribute) and arg.attr == "device":
        return arg.value
    return None


def _inside(tensor: object, part: Entry) -> bool:
    """``tensor`` is a parameter or buffer of the module ``part`` (or of its parts)."""
    return part.module is not None and any(t is tensor for _, t, _ in part.module.registered)
