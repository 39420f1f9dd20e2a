"""Performing a fix's steps on live objects, by reference.

Each :class:`~ipydevice.model.Step` is resolved from the namespace *at the time of
the click* (so a panel never holds the objects), then moved with the objects' own
methods: ``Tensor.to`` (reassigned, since it is not in place), ``Module.to`` and
``Module.to_empty`` (in place), optimizer state rebuilt per parameter device.
Generated code is never executed. Failures (the object is gone, out of memory,
a CUDA error) come back as an :class:`~ipydevice.model.ApplyResult`.

A transaction: refused before anything moves when a path holds something else
than the fix was made for (:mod:`ipydevice.fixes.fingerprint`); on a failure or
Ctrl-C, what was moved is put back (:mod:`ipydevice.fixes.transaction`); the other
owners the move touches are named, optimizer state moved with its parameters
(:mod:`ipydevice.fixes.touches`). A dict or list subclass is updated in place (its
type, attributes, order and factory stay); other holders are rebuilt as the same
kind (:mod:`ipydevice.fixes.immutable`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ipydevice._debug import contain
from ipydevice.collect import probe
from ipydevice.collect.paths import format_path, resolve
from ipydevice.collect.walk import to_in_place
from ipydevice.fixes.fingerprint import changed
from ipydevice.fixes.immutable import assign_rebuilding as assign
from ipydevice.fixes.immutable import in_place, same_kind
from ipydevice.fixes.remake import remake
from ipydevice.fixes.touches import Touches, move_state
from ipydevice.fixes.transaction import Undo
from ipydevice.model import OPTIMIZER_STATE, ApplyResult, Mark, Step, register_view

__all__ = ["apply_steps"]


def apply_steps(
    steps: tuple[Step, ...], namespace: Mapping[str, Any], made_for: tuple[Mark, ...] = ()
) -> ApplyResult:
    """Runs ``steps`` in order, all or nothing: refused when a path holds something
    else than ``made_for`` says; at the first failure (or Ctrl-C), what the earlier
    steps moved is put back, and the result says what happened."""
    if not steps:
        return ApplyResult(False, "this fix cannot be applied automatically: run or adapt its code")
    undo = Undo(namespace)
    done: list[str] = []
    name = ""
    try:
        refused = changed(made_for, namespace)
        if refused:
            return ApplyResult(False, refused)
        touches = _touches(steps, namespace)
        for step in steps:
            name = format_path(step.path)
            done.append(_ACTIONS[step.action](step, namespace, undo))
        notes = touches.after(undo)
    except BaseException as exc:  # Ctrl-C too: put back, then say so
        return ApplyResult(False, _failed(exc, name, undo))
    return ApplyResult(True, "; ".join(done + notes), tuple(done))


def _touches(steps: tuple[Step, ...], namespace: Mapping[str, Any]) -> Touches:
    """What else the steps touch; an object that cannot be looked at only goes unnamed."""
    try:
        return Touches(steps, namespace)
    except Exception as exc:
        contain(exc)
        return Touches((), namespace)


def _failed(exc: BaseException, name: str, undo: Undo) -> str:
    if isinstance(exc, KeyboardInterrupt):
        said = f"interrupted while moving {name}" if name else "interrupted"
    elif isinstance(exc, LookupError):
        said = f"could not apply: {_short(exc)}"
    else:
        said = f"could not move {name}: {type(exc).__name__}: {_short(exc)}"
    restored, failed = undo.rollback()
    parts = [p for label in restored for p in (undo.parts(label) or [label])]
    if failed:
        said += (
            f"; could not put back {', '.join(failed)}: some of it is on the new device, "
            "some on the old one; check it with %devices"
        )
        if parts:
            said += f" (put back {_listed(parts)})"
    elif parts:
        said += f"; put back {_listed(parts)} as {'it was' if len(parts) == 1 else 'they were'}: nothing was moved"
    else:
        said += "; nothing was moved"
    if undo.held_interrupt:
        said += " (Ctrl-C waited for this)"
    return said


def _listed(names: list[str]) -> str:
    shown = ", ".join(dict.fromkeys(names[:6]))
    return f"{shown} and {len(names) - 6} more" if len(names) > 6 else shown


def _short(exc: BaseException) -> str:
    try:
        return str(exc).splitlines()[0][:200] if str(exc) else ""
    except Exception:
        return ""


def _move(value: Any, target: str) -> Any:
    return value.to(target) if probe.is_tensor(value) else value


def _reassign(step: Step, namespace: Any, undo: Undo) -> str:
    value = resolve(step.path, namespace)
    if not probe.is_tensor(value) and to_in_place(type(value)):
        undo.attributes(format_path(step.path), value)
        value.to(step.target)  # its own .to() moves it and returns nothing: keep it
        return f"moved {format_path(step.path)} to {step.target}"
    moved = value.to(step.target)
    undo.path(step.path)
    assign(step.path, namespace, moved)
    return f"moved {format_path(step.path)} to {step.target}"


def _module_to(step: Step, namespace: Any, undo: Undo) -> str:
    module = resolve(step.path, namespace)
    undo.module(step.path, module)
    module.to(step.target)
    return f"moved {format_path(step.path)} to {step.target}"


def _to_empty(step: Step, namespace: Any, undo: Undo) -> str:
    module = resolve(step.path, namespace)
    undo.module(step.path, module)
    module.to_empty(device=step.target)
    return (
        f"materialised {format_path(step.path)} on {step.target} (uninitialised: load its weights)"
    )


def _mapping(step: Step, namespace: Any, undo: Undo) -> str:
    value = resolve(step.path, namespace)
    text = format_path(step.path)
    if in_place(value):  # a dict subclass: its type, attributes, order and factory stay
        for key, item in list(dict.items(value)):
            if probe.is_tensor(item):
                undo.item(text, value, key)
                value[key] = item.to(step.target)
    else:
        moved = {key: _move(item, step.target) for key, item in dict.items(value)}
        undo.path(step.path)
        assign(step.path, namespace, moved)
    return f"moved the tensors of {text} to {step.target}"


def _sequence(step: Step, namespace: Any, undo: Undo) -> str:
    value = resolve(step.path, namespace)
    text = format_path(step.path)
    if in_place(value):  # a list subclass: its type and attributes stay
        for index, item in enumerate(list(list.__iter__(value))):
            if probe.is_tensor(item):
                undo.item(text, value, index)
                value[index] = item.to(step.target)
    else:
        items = [_move(item, step.target) for item in value]
        undo.path(step.path)
        assign(step.path, namespace, same_kind(value, items))
    return f"moved the tensors of {text} to {step.target}"


def _optimizer_state(step: Step, namespace: Any, undo: Undo) -> str:
    text = format_path(step.path)
    count = move_state(resolve(step.path, namespace), undo, f"{text}.state")
    return f"moved {count} state tensors of {text} to their parameters' devices"


def _load_state_dict(step: Step, namespace: Any, undo: Undo) -> str:
    module = resolve(step.path, namespace)
    undo.module(step.path, module)
    module.load_state_dict(resolve(step.source, namespace), assign=True)
    return f"loaded {format_path(step.source)} into {format_path(step.path)} (assign=True)"


def _rebuild_optimizer(step: Step, namespace: Any, undo: Undo) -> str:
    optimizer = resolve(step.path, namespace)
    model = resolve(step.source, namespace)
    rebuilt = type(optimizer)(model.parameters(), **optimizer.defaults)
    undo.path(step.path)
    assign(step.path, namespace, rebuilt)
    return f"made {format_path(step.path)} again over {format_path(step.source)}'s parameters"


def _share(step: Step, namespace: Any, undo: Undo) -> str:
    undo.path(step.path)
    assign(step.path, namespace, resolve(step.source, namespace))
    return f"stored {format_path(step.source)} as {format_path(step.path)}"


_ACTIONS: dict[str, Callable[[Step, Any, Undo], str]] = {
    "reassign": _reassign,
    "module_to": _module_to,
    "to_empty": _to_empty,
    "mapping": _mapping,
    "sequence": _sequence,
    OPTIMIZER_STATE: _optimizer_state,
    "load_state_dict": _load_state_dict,
    "rebuild_optimizer": _rebuild_optimizer,
    "share": _share,
    "remake_generator": remake,
}


register_view("apply", apply_steps)
