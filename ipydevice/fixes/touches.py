"""The other owners a move touches: models sharing a layer, optimizers holding the
parameters.

``model.to(t)`` moves every submodule of ``model``, also one that a second model in
the namespace holds (``model2.enc is model.enc``): that model's layer moves too,
and Apply says so. An optimizer over the moved parameters keeps its state (Adam's
``exp_avg``, SGD's ``momentum_buffer``) on the old device: when the parameters are
still the same objects, their state moves with them (as the optimizer-state fix
does); when the move made new ``Parameter`` objects (``load_state_dict(...,
assign=True)``, a move to or from ``meta``), the optimizer holds none of the
model's parameters any more, and Apply says that instead.

Looked at before the steps run (what is shared) and after (what the optimizers
hold now). Bounded: the first names of the namespace, the first tensors of each.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ipydevice.collect import probe
from ipydevice.collect.paths import Path, format_path, resolve
from ipydevice.collect.walk import child_step
from ipydevice.fixes.transaction import Undo
from ipydevice.model import OPTIMIZER_STATE, Step

__all__ = ["MODULE_STEPS", "Touches", "move_state"]

_MAX_NAMES = 2_000
_MAX_TENSORS = 100_000
_MAX_OTHERS = 200  # models and optimizers looked into
MODULE_STEPS = ("module_to", "to_empty", "load_state_dict")


class Touches:
    """What a fix's steps touch beyond their own paths (see module docstring)."""

    def __init__(
        self,
        steps: tuple[Step, ...],
        namespace: Mapping[str, Any],
        read: Callable[[Path, Mapping[str, Any]], Any] = resolve,
    ) -> None:
        self.shared: list[tuple[str, str, str, int]] = []  # (layers, model, owner, count)
        self._namespace = namespace
        self._moved: list[tuple[str, Any]] = []  # (label, module or tensor)
        self._paths: dict[str, Any] = {}
        self._optimizers: list[tuple[str, Any, str, set[int]]] = []
        stated = {s.path for s in steps if s.action == OPTIMIZER_STATE}
        roots: dict[int, str] = {}
        for step in steps:
            if step.action in MODULE_STEPS or step.action == "reassign":
                try:
                    obj = read(step.path, namespace)
                except LookupError:
                    continue
                if probe.is_module(obj) or probe.is_tensor(obj):
                    self._moved.append((format_path(step.path), obj))
                    self._paths[format_path(step.path)] = step.path
                    roots[id(obj)] = format_path(step.path)
        if not self._moved:
            return
        modules = {id(m) for _, obj in self._moved if probe.is_module(obj) for m in _subs(obj)}
        tensors: dict[int, str] = {}
        for label, obj in self._moved:
            for tensor in _tensors(obj):
                tensors.setdefault(id(tensor), label)
        others = 0
        for name, value in _names(namespace):
            if id(value) in roots or id(value) in modules:
                continue
            others += probe.is_module(value) or probe.is_optimizer(value)
            if others > _MAX_OTHERS:
                break
            if probe.is_module(value):
                self._shared(name, value, modules, tensors)
            elif probe.is_optimizer(value) and (("name", name),) not in stated:
                held = _held(value) & tensors.keys()
                if held:
                    owner = tensors[next(iter(held))]
                    self._optimizers.append((name, value, owner, held))

    def _shared(self, name: str, other: Any, modules: set[int], tensors: dict[int, str]) -> None:
        """``other`` holds some of what moves and keeps tensors that stay: say which."""
        own = {id(t): t for t in _tensors(other)}
        if not own.keys() & tensors.keys() or not own.keys() - tensors.keys():
            return
        found, owner = _within(name, other, modules, tensors)
        if not found:
            return
        shown = found[:3]
        if len(found) > 3:
            shown.append(f"{len(found) - 3} more")
        self.shared.append((_and(shown), name, owner, len(found)))

    @property
    def notes(self) -> list[str]:
        """The shared layers, once moved (for the result)."""
        return [
            f"{shown} moved too: {name} shares {_them(count)} with {owner} "
            f"(the rest of {name} did not move)"
            for shown, name, owner, count in self.shared
        ]

    def warnings(self) -> list[str]:
        """The shared layers, before the move (for the fix's code)."""
        return [
            f"# this moves {shown} too: {name} shares {_them(count)} with {owner}"
            for shown, name, owner, count in self.shared
        ]

    def after(self, undo: Undo) -> list[str]:
        """Once the steps ran: each optimizer's state follows its parameters, or the
        optimizer is said to hold none of them any more."""
        notes = list(self.notes)
        now: set[int] = set()
        for path in self._paths.values():
            try:
                now.update(id(t) for t in _tensors(resolve(path, self._namespace)))
            except (LookupError, AttributeError):
                continue
        for name, optimizer, owner, held in self._optimizers:
            if not held & now:
                notes.append(
                    f"{name} no longer holds {owner}'s parameters (the move made new ones): "
                    f"make it again over {owner}.parameters() before training"
                    if probe.is_module(dict(self._moved).get(owner))
                    else f"{name} still holds the old {owner}, not the moved one: "
                    f"make it again over the moved {owner} before training"
                )
                continue
            count = move_state(optimizer, undo, f"{name}.state")
            if count:
                notes.append(
                    f"moved {count} state tensors of {name} (it holds {owner}'s parameters) "
                    "to their parameters' devices"
                )
        return notes


def move_state(optimizer: Any, undo: Undo, label: str) -> int:
    """Moves ``optimizer``'s state tensors to their parameters' devices (``step``
    stays where it is, unless the group is ``capturable`` or ``fused``)."""
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
                undo.item(label, state, key)
                state[key] = value.to(device)
                count += 1
    return count


def _within(
    name: str, other: Any, modules: set[int], tensors: dict[int, str]
) -> tuple[list[str], str]:
    """The outermost layers (or tied parameters) of ``other`` that move, as the user
    writes them (``model2.blocks[0]``), and the moved object they belong to."""
    found: list[str] = []
    owner = ""
    stack: list[tuple[Path, Any]] = [((("name", name),), other)]
    seen = 0
    while stack and seen < _MAX_TENSORS:
        path, module = stack.pop()
        seen += 1
        state = probe.module_dict(module)
        for key, param in dict.items(state.get("_parameters") or {}):
            if param is not None and id(param) in tensors:  # a tied parameter
                found.append(format_path((*path, ("attr", key))))
                owner = owner or tensors[id(param)]
        children = list(dict.items(state.get("_modules") or {}))
        for position, (key, sub) in reversed(list(enumerate(children))):
            if sub is None:
                continue
            at = (*path, child_step(type(module), key, position, sub))
            if id(sub) in modules:
                found.append(format_path(at))
                owner = owner or next(
                    (tensors[id(t)] for t in _tensors(sub) if id(t) in tensors), ""
                )
            else:
                stack.append((at, sub))
    return found, owner


def _names(namespace: Mapping[str, Any]) -> list[tuple[str, Any]]:
    try:
        items = list(itertools.islice(namespace.items(), _MAX_NAMES))
    except Exception:
        return []
    return [(n, v) for n, v in items if isinstance(n, str) and not n.startswith("_")]


def _subs(module: Any) -> list[Any]:
    """``module`` and its submodules, read from their ``_modules`` tables (no
    method of the user's runs), each once, at most ``_MAX_TENSORS``."""
    out: list[Any] = []
    seen: set[int] = set()
    stack = [module]
    while stack and len(out) < _MAX_TENSORS:
        sub = stack.pop()
        if id(sub) in seen or not probe.is_module(sub):
            continue
        seen.add(id(sub))
        out.append(sub)
        stack.extend(v for _, v in _table(sub, "_modules") if v is not None)
    return out


def _tensors(obj: Any) -> list[Any]:
    """A tensor itself, or a module's parameters and buffers (its submodules' too)."""
    if probe.is_tensor(obj):
        return [obj]
    if not probe.is_module(obj):
        return []
    found = (
        t
        for sub in _subs(obj)
        for table in ("_parameters", "_buffers")
        for _, t in _table(sub, table)
        if t is not None
    )
    return _unique(found)


def _unique(found: Iterator[Any]) -> list[Any]:
    out: dict[int, Any] = {}
    for tensor in itertools.islice(found, _MAX_TENSORS):
        out.setdefault(id(tensor), tensor)
    return list(out.values())


def _table(module: Any, name: str) -> list[tuple[Any, Any]]:
    found: Any = probe.module_dict(module).get(name)
    return list(dict.items(found)) if probe.is_a(found, dict) else []


def _held(optimizer: Any) -> set[int]:
    """The ids of the tensors ``optimizer`` updates, from its instance dict."""
    held: set[int] = set()
    groups: Any = probe.module_dict(optimizer).get("param_groups")
    if not probe.is_a(groups, list):
        return held
    for group in itertools.islice(list.__iter__(groups), _MAX_NAMES):
        params: Any = dict.get(group, "params") if probe.is_a(group, dict) else None
        if probe.is_a(params, list):
            held.update(id(p) for p in itertools.islice(list.__iter__(params), _MAX_TENSORS))
    return held


def _them(count: int) -> str:
    return "it" if count == 1 else "them"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" and {items[-1]}"
