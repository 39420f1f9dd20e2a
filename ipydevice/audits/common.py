"""What several audits share: moving fixes, the devices a value holds off the model's, the model inside a wrapper."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ipydevice.collect import probe
from ipydevice.collect.paths import format_path
from ipydevice.collect.scan import Entry
from ipydevice.diagnosis.culprits import device_variable, same_device
from ipydevice.model import Action, Fix, Step

__all__ = [
    "BATCH_SIZE_LIMIT",
    "first_device",
    "models_in_scope",
    "module_to_fix",
    "move_fix",
    "say",
    "scope_of",
    "spelling_from",
    "stray_devices",
    "tensor_items",
    "unwrapped",
]


#: The namespace whose device variable (``device``, ``dev``) the fixes' code uses.
_NAMES: ContextVar[Mapping[str, Any] | None] = ContextVar("ipydevice_audit_names", default=None)


@contextmanager
def spelling_from(namespace: Mapping[str, Any]) -> Iterator[None]:
    """While audits run, their fixes say ``x.to(device)`` when ``namespace`` holds a
    device variable for the device, as the panel's fixes do."""
    token = _NAMES.set(namespace)
    try:
        yield
    finally:
        _NAMES.reset(token)


def say(device: str) -> str:
    """``device`` as the fixes' code writes it: the user's variable, else the literal."""
    names = _NAMES.get()
    name = device_variable(names, device) if names is not None else ""
    return name or repr(device)


#: The models an audit may compare an object with (those given to check(), else the namespace's).
_MODELS: ContextVar[tuple[Entry, ...]] = ContextVar("ipydevice_audit_models", default=())


@contextmanager
def scope_of(models: list[Entry]) -> Iterator[None]:
    """While audits run over a checkup's objects, the models among them."""
    token = _MODELS.set(tuple(models))
    try:
        yield
    finally:
        _MODELS.reset(token)


def models_in_scope() -> tuple[Entry, ...]:
    """The models of the checkup being run (see :func:`scope_of`)."""
    return _MODELS.get()


#: A container holding more tensors than this is data, not a batch.
BATCH_SIZE_LIMIT = 16


def module_to_fix(entry: Entry, device: str) -> Fix:
    text = format_path(entry.path)
    return Fix(
        f"Move all of {text} to {device}",
        f"{text}.to({say(device)})",
        "namespace",
        steps=(Step("module_to", entry.path, device),),
    )


def stray_devices(value: Any, device: str) -> list[str]:
    """Devices of the tensors ``value`` holds that are not ``device`` (CPU scalars exempt)."""
    tensors = [value] if probe.is_tensor(value) else tensor_items(value)
    off = []
    for tensor in tensors:
        dev, shape, *_ = probe.tensor_facts(tensor)
        if dev in ("?", "") or same_device(dev, device) or (shape == "()" and dev == "cpu"):
            continue
        if dev not in off:
            off.append(dev)
    return off


def tensor_items(value: Any) -> list[Any]:
    if probe.is_a(value, dict):
        items = list(dict.values(value))[:200]
    elif probe.is_a(value, (list, tuple)):
        items = list(tuple.__iter__(value) if probe.is_a(value, tuple) else list.__iter__(value))[
            :200
        ]
    else:
        data = probe.module_dict(value).get("data") if not probe.is_module(value) else None
        items = list(dict.values(data))[:200] if type(data) is dict else []
    return [item for item in items if probe.is_tensor(item)]


def move_fix(name: str, value: Any, device: str, path: tuple = ()) -> Fix:
    path = path or ((("name", name),) if name.isidentifier() else ())
    action: Action
    if probe.is_a(value, dict):
        code = f"{name} = {{k: v.to({say(device)}) if torch.is_tensor(v) else v for k, v in {name}.items()}}"
        action = "mapping"
    elif probe.is_a(value, (list, tuple)) and not probe.is_tensor(value):
        opener, closer = ("[", "]") if probe.is_a(value, list) else ("tuple(", ")")
        code = f"{name} = {opener}t.to({say(device)}) if torch.is_tensor(t) else t for t in {name}{closer}"
        action = "sequence"
    else:
        code = f"{name} = {name}.to({say(device)})"
        action = "reassign"
    return Fix(
        f"Move {name} to {device}",
        code,
        "namespace",
        steps=(Step(action, path, device),) if path else (),
    )


def unwrapped(module: Any) -> Any:
    """The model inside ``torch.compile``'s OptimizedModule or (Distributed)DataParallel."""
    for _ in range(4):
        state = probe.module_dict(module)
        modules = state.get("_modules")
        inner = state.get("_orig_mod") or (
            dict.get(modules, "_orig_mod") if type(modules) is dict else None
        )
        if (
            inner is None
            and probe.class_name(module) in ("DataParallel", "DistributedDataParallel")
            and type(modules) is dict
        ):
            inner = dict.get(modules, "module")
        if inner is None or not probe.is_module(inner):
            return module
        module = inner
    return module


def first_device(module: Any) -> str:
    """The device of a module's first parameter, read without walking them all."""
    stack = [module]
    seen = 0
    while stack and seen < 10_000:
        current_module = stack.pop()
        seen += 1
        state = probe.module_dict(current_module)
        params = state.get("_parameters")
        if type(params) is dict:
            for tensor in dict.values(params):
                if probe.is_tensor(tensor):
                    return probe.tensor_facts(tensor).device
        modules = state.get("_modules")
        if type(modules) is dict:
            stack.extend(reversed([m for m in dict.values(modules) if m is not None]))
    return ""
