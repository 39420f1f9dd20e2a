"""The device flow of the failed cell and of the user's functions on the stack, read live.

:mod:`ipydevice.code.flow` follows the devices through a block of code from what a
lookup says of the names it reads; here that lookup reads the frames' values with the
project's safe readers (:func:`ipydevice.collect.frames.safe_value`: no property, no
``__getattr__``, no user code) and only their metadata (a tensor's device and shape,
a module's parameters' device). A fix is a set of objects moved, by identity: the
model then tells whether the rest of each user frame, from its failing statement on,
would meet two devices again (:meth:`DeviceFlow.clash`), and where the computation of
those statements lives (:meth:`DeviceFlow.computation`).

Bounded: at most ``_STATEMENTS`` statements per frame, ``_FRAMES`` user frames, and a
module's device is read from at most ``_MODULES`` of its submodules.
"""

from __future__ import annotations

import ast
import inspect
import types
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ipydevice.code.flow import Clash, Flow, Known
from ipydevice.code.order import statements_from
from ipydevice.code.statements import header_nodes, load_chains
from ipydevice.collect import probe
from ipydevice.collect.frames import FrameView, failing_statement, frame_tree, safe_value
from ipydevice.diagnosis.devices import same_device

__all__ = ["DeviceFlow", "Moves", "device_flow", "known", "moved_module"]

_STATEMENTS = 48
_FRAMES = 4
_MODULES = 64
_SUBMODULES = 256  # modules a move fix moves in place, for the flow to see


def known(value: Any, moved: dict[int, str] | None = None) -> Known | None:
    """What the flow reads of ``value``: metadata only (``moved``: object id -> the
    device a fix leaves it on)."""
    if moved and id(value) in moved:
        return Known("module" if probe.is_module(value) else "tensor", moved[id(value)])
    if probe.is_tensor(value):
        facts = probe.tensor_facts(value)
        if facts.device == probe.UNKNOWN:
            return None
        if facts.shape == "()" and facts.device == "cpu":
            return Known("scalar")
        return Known("tensor", facts.device)
    if probe.is_module(value):
        return Known("module", module_device(value, moved))
    cls = type(value)  # compared by identity: a metaclass's ``__eq__`` is user code
    if cls is int or cls is float or cls is bool or cls is complex:
        return Known("scalar")
    if cls is types.ModuleType:
        return Known("library")
    if probe.is_a(value, str):
        text = probe.device_str(value)
        return Known("device", text) if 0 < len(text) < 40 else None
    spelled = probe.device_str(value) if probe.class_name(value) == "device" else ""
    if spelled and spelled != probe.UNKNOWN:
        return Known("device", spelled)
    if probe.class_name(value) == "Generator" and probe.class_module(cls).startswith("torch"):
        device = probe.device_of(value)
        return Known("generator", "" if device == probe.UNKNOWN else device)
    return None


def moved_module(module: Any, target: str, objects: dict[int, str]) -> None:
    """A module and (at most ``_SUBMODULES`` of) its submodules, moved in place, with
    their parameters and buffers (``self.proxies`` read in its ``forward``); plain
    tensor attributes stay (``Module.to`` never moves them)."""
    objects[id(module)] = target
    queue = [module]
    while queue and len(objects) < _SUBMODULES:
        attributes = probe.module_dict(queue.pop(0))
        for registered in (attributes.get("_parameters"), attributes.get("_buffers")):
            if type(registered) is dict:
                objects.update((id(t), target) for t in dict.values(registered) if t is not None)
        children = attributes.get("_modules")
        if type(children) is dict:
            for child in dict.values(children):
                if child is not None and id(child) not in objects:
                    objects[id(child)] = target
                    queue.append(child)


def module_device(module: Any, moved: dict[int, str] | None = None) -> str:
    """The device of a module's first parameter or buffer, its submodules read
    breadth first (at most ``_MODULES``); ``""`` when it holds none."""
    queue, seen = [module], 0
    while queue and seen < _MODULES:
        current = queue.pop(0)
        seen += 1
        if moved and id(current) in moved:
            return moved[id(current)]
        state = probe.module_dict(current)
        for slot in ("_parameters", "_buffers"):
            held = state.get(slot)
            if type(held) is dict:
                for tensor in dict.values(held):
                    if probe.is_tensor(tensor):
                        device = probe.placement(tensor)[0]
                        if device != probe.UNKNOWN:
                            return device
        children = state.get("_modules")
        if type(children) is dict:
            queue.extend(m for m in dict.values(children) if m is not None)
    return ""


@dataclass(eq=False)
class Moves:
    """What a fix changes, as the code will read it afterwards.

    Attributes:
        objects: moved in place, by identity (``model.to(device)``): every read of
            the object, under any name, sees the new device.
        names: names of ``namespace`` bound again (``w = w.to(device)``, a batch
            rebuilt): only code that reads the name from those globals sees the moved
            tensor; a function that holds the old one (a closure cell, a default, a
            local) still reads the old.
        attrs: ``(id(holder), step)`` assigned again (``helper.table = ...``): reads
            through that holder see the moved tensor, other aliases the old.
    """

    objects: dict[int, str] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    attrs: dict[tuple[int, Any], str] = field(default_factory=dict)
    namespace: Any = None

    def device_of(self, node: ast.expr, frame: Any) -> str:
        """The device a read of ``node`` in ``frame`` gets from these moves, or ''."""
        root = node
        while isinstance(root, (ast.Attribute, ast.Subscript)):
            if self.attrs:
                ok, base = safe_value(root.value, frame)
                step = root.attr if isinstance(root, ast.Attribute) else _constant(root.slice)
                if ok and (id(base), step) in self.attrs:
                    return self.attrs[(id(base), step)]
            root = root.value
        if not isinstance(root, ast.Name) or root.id not in self.names:
            return ""
        if frame.f_globals is not self.namespace:
            return ""
        try:
            local = frame.f_locals is not frame.f_globals and root.id in frame.f_locals
        except BaseException:
            return ""
        return "" if local else self.names[root.id]


def _constant(node: ast.expr) -> Any:
    return node.value if isinstance(node, ast.Constant) else object()


@dataclass(eq=False)
class _Block:
    view: FrameView
    stmts: list[ast.stmt]
    #: the call on the next outer frame's failing statement that made this frame,
    #: and the parameter each positional argument binds (None: not found)
    call: ast.Call | None = None
    params: tuple[str, ...] = ()
    outer: _Block | None = None

    def bound(self, moved: Moves) -> dict[str, Known | None]:
        """The parameters as the caller passes them once ``moved`` are moved: what
        the re-run passes, not what the failed run did. A parameter not passed keeps
        its default (read live); a function whose call was not found gets its
        parameters unknown when a name is bound again (the caller may pass the new
        one), live otherwise."""
        code = self.view.frame.f_code
        if self.outer is None or code.co_flags & inspect.CO_VARARGS:
            return {}
        if self.call is None:
            if not (moved.names or moved.attrs) or self.view.is_module_level:
                return {}
            if moved.attrs:
                return dict.fromkeys(code.co_varnames[: code.co_argcount])
            # (a hook or forward that a library called): a parameter is unknown when
            # it holds what a name bound again held, live otherwise (``output`` of a
            # forward hook is not the ``mask`` the fix rebinds)
            rebound = _held(moved)
            return {
                name: None
                for name in code.co_varnames[: code.co_argcount]
                if _holds(self.view.frame, name, rebound)
            }
        caller = Flow(_lookup(self.outer.view, moved), same_device)
        out: dict[str, Known | None] = {}
        for name, arg in zip(self.params, self.call.args, strict=False):
            out[name] = caller.value(arg)
        for keyword in self.call.keywords:
            if keyword.arg:
                out[keyword.arg] = caller.value(keyword.value)
        return out


def _root(node: ast.expr) -> ast.expr:
    """The name a chain of reads and calls starts from (``scores`` of
    ``scores.topk(2).indices``)."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def _held(moved: Moves) -> set[int] | None:
    """Ids of what the names ``moved`` binds again hold now (None: not known)."""
    namespace = moved.namespace
    if type(namespace) is not dict:
        return None
    return {id(namespace[n]) for n in moved.names if n in namespace}


def _holds(frame: Any, name: str, rebound: set[int] | None) -> bool:
    """The frame's parameter ``name`` is, or shallowly holds, one of ``rebound``."""
    if rebound is None:
        return True
    try:
        value = frame.f_locals[name]
    except BaseException:
        return True
    if id(value) in rebound:
        return True
    if type(value) in (tuple, list):
        return any(id(v) in rebound for v in value[:64])
    if type(value) is dict:
        return any(id(v) in rebound for v in list(value.values())[:64])
    return False


@dataclass(eq=False)
class DeviceFlow:
    """The user's frames (innermost first), each with its statements from the failing
    one on (transient: holds frames)."""

    blocks: list[_Block] = field(default_factory=list)

    def clash(self, moved: dict[int, str] | Moves) -> Clash | None:
        """The first clash the rest of the code meets once ``moved`` (object id ->
        device, or :class:`Moves`) are moved, innermost frame first."""
        found = self.clash_in(moved)
        return found[0] if found is not None else None

    def clash_in(self, moved: dict[int, str] | Moves) -> tuple[Clash, FrameView] | None:
        """:meth:`clash`, with the frame whose code meets it."""
        if not isinstance(moved, Moves):
            moved = Moves(objects=moved)
        for block in self.blocks:
            lookup = _lookup(block.view, moved)
            found = Flow(lookup, same_device, block.bound(moved)).run(block.stmts)
            if found is not None:
                return found, block.view
        return None

    def computation(self, leave: Iterable[int] = (), beside: Iterable[int] = ()) -> tuple[str, str]:
        """Where the tensors and modules the failing statements and the ones after
        them read live (``leave``: ids left out; ``beside``: ids of holders whose
        attributes are left out too), and the text of one of them: ``("", "")``
        unless they all live on one device."""
        skip, holders = set(leave), set(beside)
        counts: Counter[str] = Counter()
        witness: dict[str, str] = {}
        for block in self.blocks:
            for stmt in block.stmts:
                for node in load_chains(stmt):
                    ok, value = safe_value(node, block.view.frame)
                    if not ok:  # ``h[:, None]``, ``scores.topk(2).indices``: where ``h`` is
                        node = _root(node)
                        ok, value = safe_value(node, block.view.frame)
                    if not ok or id(value) in skip or self._beside(node, block, holders):
                        continue
                    found = known(value)
                    if found is None or found.kind not in ("tensor", "module") or not found.device:
                        continue
                    device = _settled(found.device, counts)
                    counts[device] += 1
                    witness.setdefault(device, ast.unparse(node))
        if len(counts) != 1:
            return "", ""
        device = next(iter(counts))
        return device, witness[device]

    @staticmethod
    def _beside(node: ast.expr, block: _Block, holders: set[int]) -> bool:
        if not holders or not isinstance(node, ast.Attribute):
            return False
        ok, base = safe_value(node.value, block.view.frame)
        return ok and id(base) in holders

    def holders(self, obj: object) -> set[int]:
        """Ids of the objects whose attribute the statements read ``obj`` as
        (``self.sqrt_alphas_cumprod``: the schedule's holder)."""
        found: set[int] = set()
        for block in self.blocks:
            for stmt in block.stmts:
                for node in load_chains(stmt):
                    if isinstance(node, ast.Attribute):
                        ok, value = safe_value(node, block.view.frame)
                        if ok and value is obj:
                            ok, base = safe_value(node.value, block.view.frame)
                            if ok:
                                found.add(id(base))
        return found

    def reads(self, text: str) -> bool:
        """Some statement of the flow reads the chain ``text``."""
        return any(
            ast.unparse(node) == text
            for block in self.blocks
            for stmt in block.stmts
            for node in load_chains(stmt)
        )


def _settled(device: str, counts: Counter[str]) -> str:
    for other in counts:
        if same_device(other, device):
            return other
    return device


def _lookup(view: FrameView, moved: Moves) -> Any:
    frame = view.frame

    def lookup(node: ast.expr) -> Known | None:
        ok, value = safe_value(node, frame)
        if not ok:
            return None
        found = known(value, moved.objects)
        device = moved.device_of(node, frame) if moved.names or moved.attrs else ""
        if device and found is not None and found.kind in ("tensor", "scalar", "module"):
            return Known("module" if found.kind == "module" else "tensor", device)
        return found

    return lookup


def predicted(view: FrameView, node: ast.expr) -> Known | None:
    """What the expression ``node`` of ``view``'s frame holds, as the flow predicts it
    without running it (``labels.argmax(1)``: a tensor where ``labels`` is)."""
    return Flow(_lookup(view, Moves()), same_device).value(node)


def device_flow(views: Sequence[FrameView]) -> DeviceFlow:
    """The device flow of the user's frames on the stack, innermost first, each
    tied to the call of the next outer one that made it."""
    flow = DeviceFlow()
    for view in reversed(views):
        if not view.is_user or len(flow.blocks) >= _FRAMES:
            continue
        parsed, found = frame_tree(view), failing_statement(view)
        if parsed is None or found is None:
            continue
        block = _Block(view, statements_from(parsed[0], found[0], _STATEMENTS))
        if flow.blocks:
            inner = flow.blocks[-1]
            inner.outer = block
            inner.call, inner.params = _call_of(inner.view.frame.f_code, block)
        flow.blocks.append(block)
    return flow


def _call_of(code: types.CodeType, outer: _Block) -> tuple[ast.Call | None, tuple[str, ...]]:
    """The call on ``outer``'s failing statement whose callee runs ``code`` (a
    function, a bound method, a module's ``forward``, an object's ``__call__``),
    and the parameters its positional arguments bind. Read from the callee's
    class dicts and code object: nothing is called."""
    if not outer.stmts:
        return None, ()
    for part in header_nodes(outer.stmts[0]):
        for node in ast.walk(part):
            if not isinstance(node, ast.Call) or any(isinstance(a, ast.Starred) for a in node.args):
                continue
            ok, callee = safe_value(node.func, outer.view.frame)
            skip = _runs(callee, code) if ok else None
            if skip is not None:
                names = code.co_varnames[: code.co_argcount]
                return node, tuple(names[skip:])
    return None, ()


def _runs(callee: Any, code: types.CodeType) -> int | None:
    """How many leading parameters the call fills itself (``self``) when ``callee``
    runs ``code``; None when it does not."""
    kind = type(callee)
    if kind is types.FunctionType:
        return 0 if callee.__code__ is code else None
    if kind is types.MethodType:
        func = callee.__func__
        return 1 if type(func) is types.FunctionType and func.__code__ is code else None
    for name in ("forward", "__call__"):
        func = probe.class_attribute(kind, name)
        if type(func) is types.FunctionType and func.__code__ is code:
            return 1
    return None
