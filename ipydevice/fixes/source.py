"""Source fixes: the line in a function or class that put a tensor on the wrong device.

Read with ``linecache`` and ``ast`` only (notebook cells are in ``linecache`` too);
nothing is imported or executed. Three rules:

* a local of a user function that is off-target: its assignment gets ``device=``
  when it is a factory call (``torch.arange(n)``), else ``.to(...)``;
* a tensor attribute that ``Module.to()`` cannot move: its assignment in the class
  becomes ``self.register_buffer(name, value, persistent=False)`` (non-persistent,
  so existing checkpoints still load);
* submodules kept in a plain list or dict: wrapped in ``nn.ModuleList`` /
  ``nn.ModuleDict`` so that ``.to()`` and ``.parameters()`` see them.

Each fix carries file, first and last line, the original text and the replacement.
"""

from __future__ import annotations

import ast
import linecache
from typing import Any

from ipydevice.code.rewrite import add_keyword, replace_span, segment
from ipydevice.code.statements import code_tree, iter_statements
from ipydevice.collect import probe
from ipydevice.collect.frames import FrameView, frame_tree, is_user_file
from ipydevice.collect.scan import Entry, Scan
from ipydevice.diagnosis.culprits import Analysis, Culprit
from ipydevice.fixes.caches import cache_fix
from ipydevice.fixes.factories import (
    apply_edit,
    chain_factory,
    factories_in,
)
from ipydevice.fixes.history import spell
from ipydevice.model import Finding, Fix

#: Locals of one caller frame looked at when following an argument outwards.
_MAX_LOCALS = 200

__all__ = ["factory_fixes", "module_list_fix", "register_buffer_fix", "source_fixes"]


def source_fixes(
    analysis: Analysis, scan: Scan, views: list[FrameView]
) -> tuple[list[Fix], list[Fix]]:
    """Source fixes for the culprits and their causes, best first, and those of
    them that are root fixes (``register_buffer``, ``nn.ModuleList``) of the first
    culprit: they rank above the moves."""
    fixes: list[Fix] = []
    roots: list[Fix] = []
    causes: list[Culprit] = []
    for index, culprit in enumerate(analysis.found):
        entry = culprit.entries[0] if culprit.entries else None
        if culprit.finding.kind == "module" and culprit.owner is not None:
            entry = culprit.owner
        if entry is None:
            continue
        root = True
        if not entry.named and len(entry.path) == 1 and entry.path[0][0] == "local":
            fix, root = _local_fix(entry, views, analysis.target), False
        elif entry.kind == "attribute":
            fix = _register_buffer_fix(entry, scan, causes, analysis.target)
            # (``self.rel_bias = None`` in the class: the tensor is set from outside,
            # maybe after ``.to()``, which a buffer does not go back and move)
            root = fix is None or not _declares_none(fix)
        elif entry.kind == "module":
            fix = _module_list_fix(entry, scan, causes, analysis.target)
        else:
            fix = None
        fix = fix or cache_fix(entry, scan.namespace, analysis)
        if fix is not None and fix not in fixes:
            fixes.append(fix)
            if root and index == 0:  # (another culprit's root fix leaves the first one)
                roots.append(fix)
    analysis.causes_found.extend(causes)
    return fixes, roots


# -- locals of user functions -------------------------------------------------------------


def _local_fix(entry: Entry, views: list[FrameView], target: str) -> Fix | None:
    name = str(entry.path[0][1])
    view = next(
        (
            v
            for v in reversed(views)
            if v.is_user and v.label == entry.where and not v.is_module_level
        ),
        None,
    )
    if view is None or not name.isidentifier():
        return None
    found = _assignment(view, name)
    if found is None:
        # An argument (``mask`` of ``Attention.forward``): made by a caller, where
        # it may have another name. The caller's frame that holds the very same
        # object and assigns it is where the fix goes.
        found = _caller_assignment(entry.obj, views, view)
    if found is None:
        return None
    view, name, stmt, offset = found
    # (a closure's variable is made by the function around it, where the arguments differ)
    free = name in view.frame.f_code.co_freevars
    device = spell(target) if free else _device_expression(view, target)
    value = stmt.value
    assert value is not None
    factory = chain_factory(value)
    if factory is not None and not any(k.arg == "device" for k in factory.keywords):
        title = f"Create {name} on the right device in {view.label}"
        if free:
            title = f"Create {name} on the right device where {view.label} is made"
        return _edit(
            view,
            stmt,
            offset,
            lambda lines, node: add_keyword(lines, chain_factory(node.value), f"device={device}"),
            title,
        )

    def wrap(lines: list[str], node: ast.Assign | ast.AnnAssign) -> list[str]:
        assert node.value is not None  # a copy of stmt, whose value is asserted above
        text = segment(lines, node.value)
        simple = isinstance(node.value, (ast.Call, ast.Name, ast.Attribute, ast.Subscript))
        moved = f"{text}.to({device})" if simple else f"({text}).to({device})"
        return replace_span(lines, node.value, moved)

    return _edit(view, stmt, offset, wrap, f"Move {name} to {target} where {view.label} makes it")


def _assignment(
    view: FrameView, name: str
) -> tuple[FrameView, str, ast.Assign | ast.AnnAssign, int] | None:
    """The statement of ``view``'s function that last assigned ``name`` before the
    failing line, with the function's line offset."""
    if name in view.frame.f_code.co_freevars:
        return _enclosing_assignment(view, name)
    parsed = frame_tree(view)
    if parsed is None:
        return None
    tree, offset = parsed
    stmt = _last_assignment(tree, name, view.lineno - offset)
    return None if stmt is None else (view, name, stmt, offset)


def _enclosing_assignment(
    view: FrameView, name: str
) -> tuple[FrameView, str, ast.Assign | ast.AnnAssign, int] | None:
    """A closure's free variable (``gamma`` of a hook made by ``make_film``): its last
    assignment in the function around the failing one, before the inner ``def``."""
    code = view.frame.f_code
    try:
        tree = ast.parse("".join(linecache.getlines(code.co_filename, view.frame.f_globals)))
    except (SyntaxError, ValueError):
        return None
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    inner = [
        n for n in ast.walk(tree) if isinstance(n, functions) and n.name == code.co_name
        and n.lineno <= code.co_firstlineno <= (n.end_lineno or n.lineno)
    ]  # fmt: skip
    if len(inner) != 1:
        return None
    around = [
        n for n in ast.walk(tree) if isinstance(n, functions) and n is not inner[0]
        and n.lineno < inner[0].lineno and (n.end_lineno or 0) >= (inner[0].end_lineno or 0)
    ]  # fmt: skip
    if not around:
        return None
    stmt = _last_assignment(max(around, key=lambda n: n.lineno), name, inner[0].lineno)
    return None if stmt is None else (view, name, stmt, 0)


def _caller_assignment(
    obj: Any, views: list[FrameView], inner: FrameView
) -> tuple[FrameView, str, ast.Assign | ast.AnnAssign, int] | None:
    """The nearest user function outside ``inner`` whose local holding ``obj``
    (by identity) was assigned there."""
    index = next((i for i, v in enumerate(views) if v is inner), len(views))
    for view in reversed(views[:index]):
        if not view.is_user or view.is_module_level:
            continue
        for local, value in view.local_items(_MAX_LOCALS):
            if value is obj and local.isidentifier():
                found = _assignment(view, local)
                if found is not None:
                    return found
    return None


def _last_assignment(tree: ast.AST, name: str, before: int) -> ast.Assign | ast.AnnAssign | None:
    best: ast.Assign | ast.AnnAssign | None = None
    for node in iter_statements(tree):
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        if (
            node is not tree
            and isinstance(node, (ast.Assign, ast.AnnAssign))
            and len(targets) == 1
            and any(isinstance(t, ast.Name) and t.id == name for t in targets)
            and node.lineno <= before
            and getattr(node, "value", None) is not None
            and (best is None or node.lineno > best.lineno)
        ):
            best = node
    return best


def _device_expression(view: FrameView, target: str) -> str:
    """``x.device`` when an argument of the function is already there, else a literal."""
    for arg, value in view.arguments():
        if (
            probe.is_tensor(value)
            and probe.tensor_facts(value).device == target
            and arg.isidentifier()
        ):
            return f"{arg}.device"
    return repr(target)


def _edit(view: FrameView, stmt: ast.stmt, offset: int, change: Any, title: str) -> Fix | None:
    filename = view.frame.f_code.co_filename
    lines = [
        ln if ln.endswith("\n") else ln + "\n"
        for ln in linecache.getlines(filename, view.frame.f_globals)
    ]
    return apply_edit(filename, lines, stmt, offset, change, title)


# -- classes: register_buffer and ModuleList ------------------------------------------------


def _owner_of(entry: Entry, scan: Scan, attribute: bool) -> tuple[Any, str] | None:
    for other in scan.entries.values():
        view = other.module
        if view is None:
            continue
        if attribute:
            for rel, tensor, owner in view.attributes:
                if tensor is entry.obj:
                    return owner, str(rel[-1][1])
        else:
            for rel, members, owner in view.plain_lists:
                if any(m is entry.obj for _, m in members):
                    return owner, str(rel[-1][1])
    return None


def _assignment_in_class(cls: type, name: str) -> tuple[FrameLike, ast.stmt, int] | None:
    for klass in cls.__mro__:
        for func in list(vars(klass).values()):
            code = getattr(func, "__code__", None)
            if code is None or not is_user_file(code.co_filename):
                continue
            found = _self_assignment(code, name)
            if found is not None:
                return found
    return None


class FrameLike:
    """Where a class's method lives: enough of a frame for :func:`_edit`."""

    def __init__(self, code: Any, globals_: dict) -> None:
        self.filename = code.co_filename
        self.globals = globals_


def _self_assignment(code: Any, name: str) -> tuple[FrameLike, ast.stmt, int] | None:
    parsed = code_tree(code)
    if parsed is None:
        return None
    tree, offset = parsed
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if (
                    isinstance(t, ast.Attribute)
                    and t.attr == name
                    and isinstance(t.value, ast.Name)
                    and t.value.id == "self"
                    and len(targets) == 1
                    and node.value is not None
                ):
                    return FrameLike(code, {}), node, offset
    return None


def _class_edit(owner: Any, name: str, change: Any, title: str) -> Fix | None:
    found = _assignment_in_class(type(owner), name)
    if found is None:
        return None
    where, stmt, offset = found
    lines = [ln if ln.endswith("\n") else ln + "\n" for ln in linecache.getlines(where.filename)]
    return apply_edit(where.filename, lines, stmt, offset, change, title)


def _declares_none(fix: Fix) -> bool:
    """The class line the fix changes assigns ``None``: a placeholder."""
    try:
        tree = ast.parse(fix.original.strip())
    except SyntaxError:
        return False
    stmt = tree.body[0] if len(tree.body) == 1 else None
    value = getattr(stmt, "value", ...)
    return isinstance(value, ast.Constant) and value.value is None


def register_buffer_fix(owner: Any, name: str) -> Fix | None:
    """``self.<name> = value`` in ``owner``'s class becomes a non-persistent buffer."""

    def change(lines: list[str], node: ast.Assign | ast.AnnAssign) -> list[str]:
        assert node.value is not None  # a copy of the assignment _self_assignment found
        value = segment(lines, node.value)
        return replace_span(
            lines, node, f"self.register_buffer({name!r}, {value}, persistent=False)"
        )

    cls = probe.class_name(owner)
    return _class_edit(
        owner, name, change, f"Register {cls}.{name} as a buffer so that .to() moves it"
    )


def module_list_fix(owner: Any, name: str) -> Fix | None:
    """``self.<name> = [modules]`` becomes an ``nn.ModuleList`` (or ``ModuleDict``)."""
    value = probe.module_dict(owner).get(name)
    wrapper = "ModuleDict" if probe.is_a(value, dict) else "ModuleList"
    prefix = "nn." if _has_nn(owner) else "torch.nn."

    def change(lines: list[str], node: ast.Assign | ast.AnnAssign) -> list[str]:
        assert node.value is not None  # a copy of the assignment _self_assignment found
        text = segment(lines, node.value)
        return replace_span(lines, node.value, f"{prefix}{wrapper}({text})")

    cls = probe.class_name(owner)
    return _class_edit(
        owner, name, change, f"Hold {cls}.{name} in an nn.{wrapper} so that .to() moves its modules"
    )


def _register_buffer_fix(
    entry: Entry, scan: Scan, causes: list[Culprit], target: str
) -> Fix | None:
    found = _owner_of(entry, scan, attribute=True)
    if found is None:
        return None
    owner, name = found
    fix = register_buffer_fix(owner, name)
    cls = probe.class_name(owner)
    why = f"self.{name} is a plain tensor attribute of {cls}: module.to() never moves it"
    location = fix.location if fix else ""
    finding = Finding(
        entry.name,
        entry.facts.device,
        "attribute",
        entry.where,
        why,
        rule="unregistered_tensor",
        target=target,
        location=location,
    )
    causes.append(Culprit(finding, [entry]))
    return fix


def _module_list_fix(entry: Entry, scan: Scan, causes: list[Culprit], target: str) -> Fix | None:
    found = _owner_of(entry, scan, attribute=False)
    if found is None:
        return None
    owner, name = found
    fix = module_list_fix(owner, name)
    value = probe.module_dict(owner).get(name)
    why = f"self.{name} is a plain {type(value).__name__} of modules: module.to() and .parameters() never see them"
    list_name = entry.name.rsplit("[", 1)[0] if "[" in entry.name else entry.name
    location = fix.location if fix else ""
    finding = Finding(
        list_name,
        "",
        "plain list",
        entry.where,
        why,
        rule="plain_list",
        target=target,
        location=location,
    )
    causes.append(Culprit(finding, [entry]))
    return fix


# -- factory calls in a class's methods ---------------------------------------------------


def factory_fixes(cls: type) -> list[tuple[str, Fix]]:
    """Tensor factories called without ``device=`` in ``cls``'s methods (not
    ``__init__``, whose tensors become parameters or buffers), as source fixes.

    Returns ``(method qualname, fix)`` pairs; the fix adds ``device=<first
    tensor argument>.device``, or of the module's first parameter.
    """
    out: list[tuple[str, Fix]] = []
    for klass in cls.__mro__:
        for attr, func in list(vars(klass).items()):
            code = getattr(func, "__code__", None)
            if attr == "__init__" or code is None or not is_user_file(code.co_filename):
                continue
            out.extend(factories_in(code, f"{klass.__name__}.{attr}"))
    return out


def _has_nn(owner: Any) -> bool:
    init = getattr(type(owner), "__init__", None)
    globals_ = getattr(init, "__globals__", {})
    nn = globals_.get("nn") if probe.is_a(globals_, dict) else None
    return nn is not None and getattr(nn, "__name__", "") == "torch.nn"
