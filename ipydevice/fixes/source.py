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

from ipydevice.code.cells import source_location
from ipydevice.code.rewrite import add_keyword, drop_device_comments, replace_span, segment
from ipydevice.code.statements import code_tree, iter_statements
from ipydevice.collect import probe
from ipydevice.collect.frames import FrameView, frame_tree, is_user_file
from ipydevice.collect.scan import Entry, Scan
from ipydevice.diagnosis.culprits import Analysis, Culprit
from ipydevice.fixes.caches import cache_fix
from ipydevice.model import Finding, Fix

#: Locals of one caller frame looked at when following an argument outwards.
_MAX_LOCALS = 200

__all__ = ["FACTORIES", "factory_fixes", "module_list_fix", "register_buffer_fix", "source_fixes"]

#: torch functions that create a tensor and take ``device=``.
FACTORIES = frozenset(
    [
        "zeros",
        "ones",
        "empty",
        "full",
        "arange",
        "range",
        "linspace",
        "logspace",
        "eye",
        "rand",
        "randn",
        "randint",
        "randperm",
        "tensor",
        "as_tensor",
        "scalar_tensor",
        "tril_indices",
        "triu_indices",
        "empty_strided",
        "normal",
    ]
)


def source_fixes(
    analysis: Analysis, scan: Scan, views: list[FrameView]
) -> tuple[list[Fix], list[Fix]]:
    """Source fixes for the culprits and their causes, best first, and those of
    them that are root fixes (``register_buffer``, ``nn.ModuleList``): they rank
    above the moves."""
    fixes: list[Fix] = []
    roots: list[Fix] = []
    causes: list[Culprit] = []
    for culprit in analysis.found:
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
        elif entry.kind == "module":
            fix = _module_list_fix(entry, scan, causes, analysis.target)
        else:
            fix = None
        fix = fix or cache_fix(entry, scan.namespace, analysis, factories_together)
        if fix is not None and fix not in fixes:
            fixes.append(fix)
            if root:
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
    device = _device_expression(view, target)
    value = stmt.value
    assert value is not None
    factory = _chain_factory(value)
    if factory is not None and not any(k.arg == "device" for k in factory.keywords):
        title = f"Create {name} on the right device in {view.label}"
        return _edit(
            view,
            stmt,
            offset,
            lambda lines, node: add_keyword(lines, _chain_factory(node.value), f"device={device}"),
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
    parsed = frame_tree(view)
    if parsed is None:
        return None
    tree, offset = parsed
    stmt = _last_assignment(tree, name, view.lineno - offset)
    return None if stmt is None else (view, name, stmt, offset)


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


def _is_factory(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    # ``torch.`` spelled out: a bare ``range(3)`` is Python's, ``np.random.rand`` NumPy's.
    name, base = _call_name(node)
    return name in FACTORIES and base == "torch"


def _call_name(call: ast.Call) -> tuple[str, str]:
    """``("full", "torch")`` for ``torch.full(...)``, ``("full", "")`` for a bare
    ``full(...)``, ``("", "")`` for anything else called."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id, ""
    if isinstance(func, ast.Attribute):
        return func.attr, func.value.id if isinstance(func.value, ast.Name) else ""
    return "", ""


def _chain_factory(node: Any) -> Any:
    """The factory call a value starts from: ``torch.full(...)`` itself, or at the
    head of a method chain (``torch.full(...).triu(1)``, ``torch.arange(n).float()``),
    where ``device=`` belongs. None for anything else."""
    while isinstance(node, ast.Call):
        if _is_factory(node):
            return node
        if not isinstance(node.func, ast.Attribute):
            return None
        node = node.func.value
    return None


def copy_node(node: Any) -> Any:
    """A copy of an AST node: its fields and positions, the expression contexts shared.

    The parser shares one ``ast.Load()`` (and ``Store``, ``Del``) between every
    tree it builds, and IPython's tracebacks (``executing``, through stack_data)
    set ``.parent`` on every node they walk, shared contexts included: a plain
    deepcopy then follows ``Load().parent`` into a whole foreign module tree
    (100,000 nodes of torch's source, ~150 ms) on every copy. Only what the
    grammar defines is copied (no ``.parent``), without ``copy``'s memo and
    reductions (a few times faster: a fix's statement is copied on every error).
    """
    if isinstance(node, list):
        return [copy_node(item) for item in node]
    if not isinstance(node, ast.AST) or isinstance(node, ast.expr_context):
        return node  # constants' values, names, numbers: immutable
    kind = type(node)
    new = kind.__new__(kind)
    for name in (*node._fields, *node._attributes):
        value = getattr(node, name, _ABSENT)
        if value is not _ABSENT:
            setattr(new, name, copy_node(value))
    return new


_ABSENT = object()


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
    return _apply_edit(filename, lines, stmt, offset, change, title)


def _apply_edit(
    filename: str, lines: list[str], stmt: ast.stmt, offset: int, change: Any, title: str
) -> Fix | None:
    node = copy_node(stmt)
    ast.increment_lineno(node, offset)
    start, end = node.lineno, node.end_lineno or node.lineno
    try:
        changed = change(lines, node)
    except Exception:
        return None
    grown = len(changed) - len(lines)
    changed = drop_device_comments(changed, start, end + grown)
    original = "".join(lines[start - 1 : end])
    replacement = "".join(changed[start - 1 : end + grown])
    return Fix(
        title=title,
        code=replacement,
        scope="source",
        location=source_location(filename, start),
        original=original,
        filename=filename,
        lineno=start,
        end_lineno=end,
    )


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
    return _apply_edit(where.filename, lines, stmt, offset, change, title)


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


def factories_in(code: Any, label: str, device: str = "") -> list[tuple[str, Fix]]:
    parsed = code_tree(code)
    if parsed is None:
        return []
    tree, offset = parsed
    lines = [ln if ln.endswith("\n") else ln + "\n" for ln in linecache.getlines(code.co_filename)]
    args = [a for a in code.co_varnames[1 : code.co_argcount] if a.isidentifier()]
    device = device or (f"{args[0]}.device" if args else "next(self.parameters()).device")
    out = []
    moved = _moved_calls(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        edit = _stray_source(node, moved, device)
        stmt = _statement_of(tree, node) if edit is not None else None
        if edit is None or stmt is None:
            continue
        change, title = edit
        fix = _apply_edit(
            code.co_filename,
            lines,
            stmt,
            offset,
            _shifted(change, node, stmt),
            f"{title} in {label}",
        )
        if fix is not None:
            out.append((label, fix))
    return out


def factories_together(code: Any, label: str, device: str) -> Fix | None:
    """Every stray factory of the function ``code`` given ``device=`` in one edit
    (``inv`` and ``angles`` of a cached table both): a fix of one call leaves the
    others where they were, and the function's own arithmetic then mixes devices."""
    parsed = code_tree(code)
    if parsed is None:
        return None
    tree, offset = parsed
    lines = [ln if ln.endswith("\n") else ln + "\n" for ln in linecache.getlines(code.co_filename)]
    moved = _moved_calls(tree)
    edits: list[tuple[ast.stmt, ast.Call, tuple[str, str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            edit = _stray_source(node, moved, device)
            stmt = _statement_of(tree, node) if edit is not None else None
            if edit is not None and stmt is not None:
                edits.append((stmt, node, edit[0]))
    if not edits:
        return None
    changed, first, last = list(lines), None, None
    # the last call first: the lines above an edit keep their numbers
    for stmt, call, change in sorted(
        edits, key=lambda e: (e[1].lineno, e[1].col_offset), reverse=True
    ):
        node = copy_node(stmt)
        ast.increment_lineno(node, offset)
        try:
            changed = _shifted(change, call, stmt)(changed, node)
        except Exception:
            return None
        first = node.lineno if first is None else min(first, node.lineno)
        last = (
            (node.end_lineno or node.lineno)
            if last is None
            else max(last, node.end_lineno or node.lineno)
        )
    assert first is not None and last is not None
    grown = len(changed) - len(lines)
    changed = drop_device_comments(changed, first, last + grown)
    return Fix(
        title=f"Create the tensors on {device} in {label}",
        code="".join(changed[first - 1 : last + grown]),
        scope="source",
        location=source_location(code.co_filename, first),
        original="".join(lines[first - 1 : last]),
        filename=code.co_filename,
        lineno=first,
        end_lineno=last,
    )


def _moved_calls(tree: ast.AST) -> set[int]:
    """Calls whose result is moved on the spot (``f(...).to(d)``, ``.cuda()``)."""
    out = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("to", "cuda")
        ):
            out.add(id(node.func.value))
    return out


def _stray_source(call: ast.Call, moved: set[int], device: str) -> tuple[Any, str] | None:
    """How a call can leave a tensor off the model's device, and the edit that fixes it.

    Factories without ``device=``; ``torch.from_numpy`` and tokenizer calls
    (``return_tensors=...``), which always give CPU tensors; ``torch.load``
    without ``map_location``. Calls moved on the spot are fine.
    """
    if id(call) in moved:
        return None
    keywords = {k.arg for k in call.keywords}
    name, base = _call_name(call)
    if _is_factory(call) and "device" not in keywords:
        return ("keyword", f"device={device}"), "Create the tensor on the input's device"
    if base == "torch" and name == "from_numpy":
        return ("move", device), "Move the array's tensor (always on the CPU) to the model's device"
    if "return_tensors" in keywords:
        return (
            "move",
            device,
        ), "Move the tokenizer's tensors (always on the CPU) to the model's device"
    if base == "torch" and name == "load" and "map_location" not in keywords:
        return (
            "keyword",
            f"map_location={device}",
        ), "Load the checkpoint onto the model's device, not where it was saved"
    return None


def _shifted(change: tuple[str, str], call: ast.Call, stmt: ast.stmt) -> Any:
    """An edit for :func:`_apply_edit`, applied to ``call`` moved with ``stmt``."""
    kind, text = change

    def edit(lines: list[str], node: ast.stmt) -> list[str]:
        moved_call = copy_node(call)
        ast.increment_lineno(moved_call, node.lineno - stmt.lineno)
        if kind == "keyword":
            return add_keyword(lines, moved_call, text)
        return replace_span(lines, moved_call, f"{segment(lines, moved_call)}.to({text})")

    return edit


def _statement_of(tree: ast.AST, target: ast.AST) -> ast.stmt | None:
    best = None
    for node in ast.walk(tree):
        compound = isinstance(node, (ast.FunctionDef, ast.If, ast.For, ast.While, ast.With))
        if (
            isinstance(node, ast.stmt)
            and not compound
            and any(child is target for child in ast.walk(node))
        ):
            best = node
    return best


def _has_nn(owner: Any) -> bool:
    init = getattr(type(owner), "__init__", None)
    globals_ = getattr(init, "__globals__", {})
    nn = globals_.get("nn") if probe.is_a(globals_, dict) else None
    return nn is not None and getattr(nn, "__name__", "") == "torch.nn"
