"""All or nothing: what Apply changed, so that it can be put back.

Before a step changes anything it records what it is about to change: the objects
along a path it assigns (:meth:`Undo.path`), an item of a mutable holder
(:meth:`Undo.item`), or every parameter, gradient, buffer and tensor attribute of a
module it moves (:meth:`Undo.module`: ``Module.to`` sets ``param.data`` in place,
or puts new ``Parameter`` objects and new buffers in the module's tables, module by
module). When a step raises (out of memory in the fifth layer of seven, a hostile
``__setitem__``) or Ctrl-C arrives, :meth:`Undo.rollback` puts every one of them
back, last first, and says which were changed; Ctrl-C during the rollback waits
for it to end.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ipydevice.collect import probe
from ipydevice.collect.holders.base import instance_dict
from ipydevice.collect.paths import Path, assign, format_path, resolve
from ipydevice.collect.walk import child_step

__all__ = ["Undo"]


class Undo:
    """The log of one Apply: what each step is about to change."""

    def __init__(self, namespace: Mapping[str, Any]) -> None:
        self.namespace = namespace
        self._undo: list[tuple[str, Callable[[], bool]]] = []
        self._parts: dict[str, list[str]] = {}
        #: Ctrl-C came during the rollback, and waited for it
        self.held_interrupt = False

    def path(self, path: Path) -> None:
        """``path`` is about to be assigned (holders rebuilt on the way up)."""
        chain: list[Any] = []
        for size in range(1, len(path) + 1):
            try:
                chain.append(resolve(path[:size], self.namespace))
            except LookupError:
                break
        namespace = self.namespace

        def undo() -> bool:
            for size, was in enumerate(chain, 1):
                try:
                    now = resolve(path[:size], namespace)
                except LookupError:
                    now = None
                if now is not was:
                    assign(path[:size], namespace, was)  # type: ignore[arg-type]
                    return True
            return False

        self._undo.append((format_path(path), undo))

    def item(self, label: str, holder: Any, key: Any) -> None:
        """``holder[key]`` is about to be replaced in place."""
        was = holder[key]

        def undo() -> bool:
            if holder[key] is was:
                return False
            holder[key] = was
            return True

        self._undo.append((label, undo))

    def attributes(self, label: str, obj: Any) -> None:
        """The tensors in ``obj``'s instance dict are about to be replaced in place (an
        object whose own ``.to()`` moves it)."""
        state = instance_dict(obj) or {}
        saved = {k: v for k, v in dict.items(state) if probe.is_tensor(v)}

        def undo() -> bool:
            changed = [k for k, v in saved.items() if dict.get(state, k) is not v]
            for key in changed:
                dict.__setitem__(state, key, saved[key])
            return bool(changed)

        self._undo.append((label, undo))

    def module(self, path: Path, module: Any) -> None:
        """Every tensor of the module at ``path`` and its submodules is about to move."""
        label = format_path(path)
        saved = [(text, sub, _ModuleState(sub)) for text, sub in _submodules(path, module)]

        def undo() -> bool:
            put_back = [text for text, sub, state in saved if state.restore(sub)]
            self._parts[label] = put_back
            return bool(put_back)

        self._undo.append((label, undo))

    def rollback(self) -> tuple[list[str], list[str]]:
        """Puts back everything recorded, last first: (what was put back, what could
        not be, with why)."""
        restored: list[str] = []
        failed: list[str] = []
        with _interrupts_wait() as caught:
            for label, undo in reversed(self._undo):
                try:
                    if undo():
                        restored.append(label)
                except Exception as exc:
                    failed.append(f"{label} ({type(exc).__name__}: {_first_line(exc)})")
        self.held_interrupt = bool(caught)
        return restored, failed

    def parts(self, label: str) -> list[str]:
        """The submodules of the module ``label`` that the rollback put back."""
        return self._parts.get(label, [])


def _submodules(path: Path, module: Any) -> list[tuple[str, Any]]:
    """``module`` and every submodule (each once), named as the user writes them
    (``model.blocks[0].attn``), parents first."""
    out: list[tuple[str, Any]] = []
    seen: set[int] = set()
    stack: list[tuple[Path, Any]] = [(path, module)]
    while stack:
        at, sub = stack.pop()
        if id(sub) in seen:
            continue
        seen.add(id(sub))
        out.append((format_path(at), sub))
        children = list(dict.items(probe.module_dict(sub).get("_modules") or {}))
        for position, (key, child) in reversed(list(enumerate(children))):
            if child is not None:
                stack.append(((*at, child_step(type(sub), key, position, child)), child))
    return out


class _ModuleState:
    """One module's own tensors: its parameters (the objects and their data), their
    gradients, its buffers and its other tensor attributes (the states of a module
    with its own ``_apply``)."""

    __slots__ = ("attrs", "buffers", "params")

    def __init__(self, module: Any) -> None:
        self.params = [
            (key, p, _data(p), p.grad if p is not None else None, _data(_grad(p)))
            for key, p in dict.items(module._parameters)
        ]
        self.buffers = list(dict.items(module._buffers))
        own = probe.module_dict(module)
        self.attrs = [(key, v) for key, v in own.items() if probe.is_tensor(v)]

    def restore(self, module: Any) -> bool:
        """Puts the module's tensors back; True when any had changed."""
        changed = False
        for key, param, data, grad, grad_data in self.params:
            if module._parameters.get(key) is not param:
                module._parameters[key] = param
                changed = True
            if param is None:
                continue
            if grad is not None and grad.device != grad_data.device:
                # first: a gradient must be on its parameter's device; and alone, to be swapped
                if param.grad is grad:
                    param.grad = None
                _restore_data(grad, grad_data)
                changed = True
            changed |= _restore_data(param, data)
            if param.grad is not grad:
                param.grad = grad
                changed = True
        for key, buffer in self.buffers:
            if module._buffers.get(key) is not buffer:
                module._buffers[key] = buffer
                changed = True
        own = probe.module_dict(module)
        for key, value in self.attrs:
            if own.get(key) is not value:
                own[key] = value
                changed = True
        return changed


def _grad(param: Any) -> Any:
    return param.grad if param is not None else None


def _data(tensor: Any) -> Any:
    """An alias of the tensor's storage as it is now (``param.data`` set later
    leaves it as it was)."""
    return tensor.data if tensor is not None else None


def _restore_data(tensor: Any, data: Any) -> bool:
    if data is None or tensor.device == data.device:
        return False
    try:
        tensor.data = data
    except RuntimeError:
        # Moved by swapping (``torch.utils.swap_tensors``: the conversion flag, a
        # tensor subclass): swap back with a tensor that holds the old data.
        import torch

        holder = data
        if isinstance(tensor, torch.nn.Parameter):
            holder = torch.nn.Parameter(data, tensor.requires_grad)
        torch.utils.swap_tensors(tensor, holder)
    return True


def _first_line(exc: BaseException) -> str:
    try:
        return str(exc).splitlines()[0][:200] if str(exc) else ""
    except Exception:
        return ""


@contextlib.contextmanager
def _interrupts_wait() -> Iterator[list[int]]:
    """Ctrl-C during the rollback is held until it ends (in the main thread; the
    others get no signals): the list yielded says whether one came."""
    caught: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    except (ValueError, TypeError, OSError):
        yield caught
        return
    try:
        yield caught
    finally:
        signal.signal(signal.SIGINT, previous)
