"""Performing a fix's steps on live objects, by reference.

Each :class:`~ipydevice.model.Step` is resolved from the namespace *at the time of
the click* (so a panel never holds the objects), then moved with the objects' own
methods: ``Tensor.to`` (reassigned, since it is not in place), ``Module.to`` and
``Module.to_empty`` (in place), optimizer state rebuilt per parameter device.
Generated code is never executed. Failures (the object is gone, out of memory,
a CUDA error) come back as an :class:`~ipydevice.model.ApplyResult`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

from ipydevice.collect import probe
from ipydevice.collect.paths import format_path, resolve
from ipydevice.fixes.immutable import assign_rebuilding as assign
from ipydevice.model import OPTIMIZER_STATE, ApplyResult, Step, register_view

__all__ = ["apply_steps"]


def apply_steps(steps: tuple[Step, ...], namespace: Mapping[str, Any]) -> ApplyResult:
    """Runs ``steps`` in order; stops at the first failure and says why."""
    if not steps:
        return ApplyResult(False, "this fix cannot be applied automatically: run or adapt its code")
    done: list[str] = []
    for step in steps:
        name = format_path(step.path)
        try:
            message = _ACTIONS[step.action](step, namespace)
        except LookupError as exc:
            return ApplyResult(False, f"could not apply: {exc}", tuple(done))
        except Exception as exc:  # out of memory, CUDA errors, odd objects
            return ApplyResult(
                False, f"could not move {name}: {type(exc).__name__}: {_short(exc)}", tuple(done)
            )
        done.append(message)
    return ApplyResult(True, "; ".join(done), tuple(done))


def _short(exc: BaseException) -> str:
    try:
        return str(exc).splitlines()[0][:200] if str(exc) else ""
    except Exception:
        return ""


def _move(value: Any, target: str) -> Any:
    return value.to(target) if probe.is_tensor(value) else value


def _reassign(step: Step, namespace: Any) -> str:
    value = resolve(step.path, namespace)
    assign(step.path, namespace, value.to(step.target))
    return f"moved {format_path(step.path)} to {step.target}"


def _module_to(step: Step, namespace: Any) -> str:
    resolve(step.path, namespace).to(step.target)
    return f"moved {format_path(step.path)} to {step.target}"


def _to_empty(step: Step, namespace: Any) -> str:
    resolve(step.path, namespace).to_empty(device=step.target)
    return (
        f"materialised {format_path(step.path)} on {step.target} (uninitialised: load its weights)"
    )


def _mapping(step: Step, namespace: Any) -> str:
    value = resolve(step.path, namespace)
    moved = {key: _move(item, step.target) for key, item in dict.items(value)}
    rebuilt = moved if type(value) is dict else type(value)(moved)
    assign(step.path, namespace, rebuilt)
    return f"moved the tensors of {format_path(step.path)} to {step.target}"


def _sequence(step: Step, namespace: Any) -> str:
    value = resolve(step.path, namespace)
    items = [_move(item, step.target) for item in value]
    if isinstance(value, tuple) and hasattr(type(value), "_make"):
        rebuilt: Any = cast(Any, type(value))._make(items)
    elif isinstance(value, list):
        rebuilt = items if type(value) is list else type(value)(items)
    else:
        rebuilt = tuple(items) if type(value) is tuple else type(value)(items)
    assign(step.path, namespace, rebuilt)
    return f"moved the tensors of {format_path(step.path)} to {step.target}"


def _optimizer_state(step: Step, namespace: Any) -> str:
    optimizer = resolve(step.path, namespace)
    exempt = {}
    for group in optimizer.param_groups:
        keep_step = not (group.get("capturable") or group.get("fused"))
        for param in group["params"]:
            exempt[id(param)] = keep_step
    count = 0
    for param, state in optimizer.state.items():
        device = param.device
        for key, value in list(state.items()):
            if key == "step" and exempt.get(id(param), True):
                continue
            if probe.is_tensor(value) and value.device != device:
                state[key] = value.to(device)
                count += 1
    return f"moved {count} state tensors of {format_path(step.path)} to their parameters' devices"


def _load_state_dict(step: Step, namespace: Any) -> str:
    module = resolve(step.path, namespace)
    module.load_state_dict(resolve(step.source, namespace), assign=True)
    return f"loaded {format_path(step.source)} into {format_path(step.path)} (assign=True)"


def _rebuild_optimizer(step: Step, namespace: Any) -> str:
    optimizer = resolve(step.path, namespace)
    model = resolve(step.source, namespace)
    rebuilt = type(optimizer)(model.parameters(), **optimizer.defaults)
    assign(step.path, namespace, rebuilt)
    return f"made {format_path(step.path)} again over {format_path(step.source)}'s parameters"


def _share(step: Step, namespace: Any) -> str:
    assign(step.path, namespace, resolve(step.source, namespace))
    return f"stored {format_path(step.source)} as {format_path(step.path)}"


_ACTIONS: dict[str, Callable[[Step, Any], str]] = {
    "reassign": _reassign,
    "module_to": _module_to,
    "to_empty": _to_empty,
    "mapping": _mapping,
    "sequence": _sequence,
    OPTIMIZER_STATE: _optimizer_state,
    "load_state_dict": _load_state_dict,
    "rebuild_optimizer": _rebuild_optimizer,
    "share": _share,
}


register_view("apply", apply_steps)
