"""Fixes for a diagnosis: code the user can read, and moves ipydevice can apply.

Three scopes, best first:

* ``namespace``: run once after the error, then re-run the failed cell. Tensors are
  reassigned (``Tensor.to`` is not in place), modules moved in place, batches rebuilt,
  optimizer state follows its parameters, a meta model is materialised (``to_empty``).
  Offered only when the name survives a re-run (not ``xb`` of ``for xb, yb in loader``).
* ``cell``: the failed cell rewritten so that it works from scratch.
* ``source``: the line to change in a function or class (``device=`` on a factory
  call, ``register_buffer``, ``nn.ModuleList``), with file and line.

Code is built from paths (:mod:`ipydevice.collect.paths`), checked with ``ast.parse``;
applying a fix follows its steps on live objects, never executing the code text.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ipydevice import registry
from ipydevice.code.rewrite import insert_lines_before, parses, replace_span
from ipydevice.code.statements import encloses
from ipydevice.code.treefacts import tree_facts
from ipydevice.collect import probe
from ipydevice.collect.cell import Cell, cell_result, failed_cell
from ipydevice.collect.frames import FrameView, owns_name
from ipydevice.collect.paths import format_path, is_name
from ipydevice.collect.scan import Entry, Scan, descends
from ipydevice.collect.walk import is_to_batch, to_in_place
from ipydevice.diagnosis.culprits import (
    Analysis,
    Culprit,
    device_variable,
    named_by_message,
    same_device,
)
from ipydevice.diagnosis.discarded import Discarded, discarded, dropping_function, mends_locally
from ipydevice.diagnosis.families.meta_device import meta_subtrees
from ipydevice.family import MessageFacts
from ipydevice.fixes.checked import FixCheck
from ipydevice.fixes.history import SPELLING, history_fixes, spell
from ipydevice.fixes.immutable import (
    dataclass_tensors,
    field_value,
    frozen_fields,
    in_place,
    replace_is_safe,
)
from ipydevice.fixes.module_paths import meta_subtree, on_meta, outermost_module, plain_list_holding
from ipydevice.fixes.own_to import own_to_fixes
from ipydevice.fixes.remake import UNMOVABLE, remake_fixes
from ipydevice.fixes.source import source_fixes
from ipydevice.model import OPTIMIZER_STATE, Fix, Step

__all__ = ["propose_fixes"]


@dataclass
class _Plan:
    steps: list[Step] = field(default_factory=list)
    code: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    def add(self, step: Step, code: str, name: str) -> None:
        if step not in self.steps:
            self.steps.append(step)
            self.code.append(code)
            self.names.append(name)


def propose_fixes(
    facts: MessageFacts, analysis: Analysis, scan: Scan, views: list[FrameView]
) -> tuple[Fix, ...]:
    """Every applicable fix, best first (see module docstring)."""
    token = SPELLING.set((analysis.target, analysis.device_name))
    try:
        return _propose(facts, analysis, scan, views)
    finally:
        SPELLING.reset(token)


def _propose(
    facts: MessageFacts, analysis: Analysis, scan: Scan, views: list[FrameView]
) -> tuple[Fix, ...]:
    target = analysis.target
    family = registry.family_of(facts.family)
    if not target or (family is not None and not family.moves):
        return ()
    cell = failed_cell(views)
    if cell is not None and not cell.view.is_module_level and not analysis.device_name:
        # A script's function (``def main(): device = ...``): its own device variable
        # is in scope for the rewritten lines, as a notebook's is for a cell.
        SPELLING.set((target, device_variable(_frame_locals(cell.view.frame), target)))
    fixes: list[Fix] = []
    # the error family's own rewrite of the failed cell (``map_location=``...)
    own = family.cell_fix if family is not None and cell is not None else None
    family_fix = own(facts, cell, target) if own is not None else None
    # each move fix checked against the rest of the code (not a demand on one argument)
    check = FixCheck(views, target) if not analysis.argument else None
    steps_of: dict[int, tuple[Step, ...]] = {}
    plan = _plan_moves(analysis, scan, target, cell)
    moves = _namespace_fix(plan, target) if plan.steps else None
    if moves is not None:
        fixes.append(moves)
    fixes.extend(remake_fixes(analysis, target, scan.namespace))  # made again, not moved
    fixes[:0] = own_to_fixes(analysis, scan.namespace)  # a holder's .to() that drops a move
    if family_fix is not None:
        fixes.append(family_fix)
    # A loop in a function an earlier cell defined: its locals are moved there.
    inner = dropping_function(views, analysis.found)
    cell_fix = (
        _cell_fix(analysis, scan, target, inner, locals_only=True) if inner is not None else None
    )
    # ... unless a fix where the tensor is made (``torch.zeros(..., device=x.device)``
    # in that function) says it better.
    later = cell_fix if cell_fix is not None and family_fix is None else None
    if later is not None and later.title.startswith(_ASSIGN):
        fixes.insert(0, later)  # the function's dropped ``x.to(device)`` mended: the cause
        later = None
    if cell_fix is None:
        cell_fix = _cell_fix(analysis, scan, target, cell, steps_of=steps_of)
        if cell_fix is not None and family_fix is None and not _repeats(cell_fix, moves):
            # the cell's own dropped ``x.to(device)`` assigned: the user's line, mended
            fixes.insert(0 if cell_fix.title.startswith(_ASSIGN) else len(fixes), cell_fix)
    found, roots = source_fixes(analysis, scan, views)
    # A root fix (register_buffer, nn.ModuleList) ranks above the moves, which last
    # only until the model is made again.
    fixes = roots + fixes + [f for f in found if f not in roots]
    if later is not None and not found:
        fixes.append(later)
    # device= where an earlier cell made the culprit: beside the moves, not above
    # them (the move works now, this one when the cells are run again).
    fixes.extend(history_fixes(analysis, views, steps_of))
    meta_fix = _meta_note_fix(analysis, target)
    if meta_fix is not None and not any(s.action == "to_empty" for s in plan.steps):
        fixes.append(meta_fix)
    if check is not None:
        fixes = check.rank(fixes, steps_of)
    return tuple(f for f in fixes if parses(f.code) or f.scope == "source")


# -- namespace moves ---------------------------------------------------------------------


def _plan_moves(analysis: Analysis, scan: Scan, target: str, cell: Cell | None) -> _Plan:
    plan = _Plan()
    rebound = cell.bound if cell is not None else set()
    by_path = {e.path: e for e in scan.entries.values() if e.named}
    for culprit in analysis.found:
        if not _plan_load(plan, culprit, analysis, target):
            _plan_one(plan, culprit, by_path, target, rebound, scan)
    if plan.steps and cell is not None and not analysis.argument:
        aliases = {e.alias for c in analysis.found for e in c.entries if e.alias}
        for name in _also_needed(cell, target, loops=False):
            if not cell.view.is_module_level and owns_name(cell.view.frame, name):
                continue  # a function's local or closure cell is no name of the namespace
            roots = {n.split(".")[0].split("[")[0] for n in plan.names}
            if name not in plan.names and name not in roots and name not in aliases:
                step = Step("reassign", (("name", name),), target)
                plan.add(step, f"{name} = {name}.to({spell(target)})", name)
    return plan


def _also_needed(cell: Cell, target: str, loops: bool) -> list[str]:
    """Tensors the rest of the cell uses, off the target: the loop variables of the
    loops around the failing statement (``loops``), and names the cell reads from
    the namespace at or after it. 0-dim tensors (scalars) stay."""
    stmt = cell.stmt
    names: list[str] = []
    read = tree_facts(cell.tree)  # walked once per tree, not per diagnosis (code/treefacts)
    if loops:
        for node in read.loops:
            if encloses(node, stmt):
                names += [n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)]
    bound = cell.bound
    names += [name for name in read.loads_from(stmt.lineno) if name not in bound]
    frame = cell.view.frame
    scopes = (frame.f_locals, frame.f_globals)  # (a function's f_locals is made on each read)
    out: list[str] = []
    for name in dict.fromkeys(names):
        value = _frame_value(scopes, name)
        if not probe.is_tensor(value):
            continue
        facts = probe.tensor_facts(value)
        if facts.shape == "()" or facts.device in ("?", "") or same_device(facts.device, target):
            continue
        out.append(name)
    return out


def _frame_value(scopes: tuple[Any, Any], name: str) -> Any:
    for scope in scopes:
        try:
            if name in scope:
                return scope[name]
        except Exception:
            return None
    return None


def _plan_one(
    plan: _Plan, culprit: Culprit, by_path: dict, target: str, rebound: set[str], scan: Scan
) -> None:
    if culprit.finding.kind in UNMOVABLE:
        return
    if (
        culprit.finding.rule == OPTIMIZER_STATE
        and culprit.owner is not None
        and culprit.owner.named
    ):
        _plan_optimizer(plan, culprit.owner)
        return
    if culprit.finding.rule == "meta_model" and culprit.owner is not None:
        if culprit.owner.named and culprit.owner.path[0][0] == "name":
            for path in meta_subtrees(culprit.owner):
                text = format_path(path)
                code = f"{text}.to_empty(device={spell(target)})  # uninitialised: load the weights next"
                plan.add(Step("to_empty", path, target), code, text)
        return
    entries = (
        [culprit.owner]
        if culprit.finding.kind == "module" and culprit.owner is not None
        else culprit.entries
    )
    for entry in entries:
        if not entry.named or not entry.path or entry.path[0][0] != "name":
            continue
        if entry.path[0][1] in rebound:
            continue  # the cell rebinds it: only a cell fix survives a re-run
        if entry.kind == "module" or (entry.parent_kind == "module" and entry.kind != "attribute"):
            _plan_module(plan, entry, by_path, target, scan)
        else:
            _plan_tensor(plan, entry, by_path, target)


def _plan_load(plan: _Plan, culprit: Culprit, analysis: Analysis, target: str) -> bool:
    """A meta model with its state dict at hand: ``load_state_dict(sd, assign=True)``
    (then ``.to()`` when the weights are elsewhere), not ``to_empty``."""
    top = analysis.top_module
    if not analysis.state_dict or top is None or not top.named:
        return False
    owner = culprit.owner if culprit.owner is not None else culprit.entries[0]
    if owner is not top and not descends(owner, top):
        return False
    text, sd = format_path(top.path), analysis.state_dict
    step = Step("load_state_dict", top.path, target, source=(("name", sd),))
    if step in plan.steps:
        return True
    code = f"{text}.load_state_dict({sd}, assign=True)  # the weights replace the meta tensors"
    plan.add(step, code, text)
    if not same_device(analysis.state_dict_device, target):
        plan.steps.append(Step("module_to", top.path, target))
        plan.code.append(f"{text}.to({spell(target)})")
    return True


def _plan_tensor(plan: _Plan, entry: Entry, by_path: dict, target: str) -> None:
    path = entry.path
    container = entry.container
    if container is None and len(path) == 2 and path[1][0] == "item":
        # ``inputs['input_ids']`` named through its holder's name: the holder is the batch.
        holder = by_path.get(path[:1])
        if holder is not None and probe.is_a(holder.obj, Mapping):
            container = holder.obj
    batch = container is not None and (probe.is_a(container, (dict, list, tuple)) or is_to_batch(container))  # fmt: skip
    if batch and len(path) == 2:
        # ``batch['x']``: rebuild (or .to()) the whole batch, as the user would.
        holder = by_path.get(path[:1]) or Entry(
            container, path[:1], "namespace", "container", named=True
        )
        _plan_container(plan, holder, target)
        return
    holder = by_path.get(path[:-1])
    if holder is None and container is not None and len(path) > 1:
        holder = Entry(container, path[:-1], "namespace", "container", named=True)
    fields = frozen_fields(holder.obj) if holder is not None and len(path) > 1 else None
    if holder is not None and fields:
        _plan_frozen(plan, holder, fields, target)
        return
    if container is not None and probe.is_a(container, tuple):
        # An item of a tuple (a namedtuple's field) takes no assignment: the tuple is
        # rebuilt with its tensors moved and stored where it was.
        holder = by_path.get(path[:-1]) or Entry(
            container, path[:-1], "namespace", "container", named=True
        )
        _plan_container(plan, holder, target)
        return
    # A plain attribute or item (``batch.inputs`` of a dataclass, ``cfg['x']``); a
    # dataclass's other tensor fields off the target go with it, as a dict batch's do.
    siblings = dataclass_tensors(container) if len(path) > 1 and path[-1][0] == "attr" else []
    for moved in [path, *((*path[:-1], ("attr", f)) for f, t in siblings if not same_device(probe.placement(t)[0], target) and f != path[-1][1])]:  # fmt: skip
        text = format_path(moved)
        plan.add(Step("reassign", moved, target), f"{text} = {text}.to({spell(target)})", text)
    text = format_path(path)
    for slot in entry.slots:  # where the failing code reads it (a closure's cell)
        step = Step("share", slot, target, source=path)
        if step not in plan.steps:
            plan.steps.append(step)
            plan.code.append(f"{format_path(slot)} = {text}")


def _plan_frozen(plan: _Plan, holder: Entry, fields: tuple[str, ...], target: str) -> None:
    """A frozen dataclass is rebuilt with its tensors moved (it takes no assignment):
    ``dataclasses.replace`` where that runs nothing the instance did not have
    (:func:`~ipydevice.fixes.immutable.replace_is_safe`), else a copy given the
    moved fields, as Apply does."""
    text = format_path(holder.path)
    moved = [f for f in fields if is_name(f) and probe.is_tensor(field_value(holder.obj, f))]
    if not moved:
        return
    for name in moved:
        plan.steps.append(Step("reassign", (*holder.path, ("attr", name)), target))
    if replace_is_safe(holder.obj):
        changes = ", ".join(f"{f}={text}.{f}.to({spell(target)})" for f in moved)
        plan.code.append(f"import dataclasses\n{text} = dataclasses.replace({text}, {changes})")
    else:  # __post_init__ or init=False fields: a copy keeps them as they are
        sets = "".join(
            f"\nobject.__setattr__({text}, {f!r}, {text}.{f}.to({spell(target)}))" for f in moved
        )
        plan.code.append(f"import copy\n{text} = copy.copy({text}){sets}")
    plan.names.append(text)


def _plan_container(plan: _Plan, entry: Entry, target: str) -> None:
    text = format_path(entry.path)
    obj = entry.obj
    if not probe.is_a(obj, (dict, list, tuple)) and is_to_batch(obj):
        call = f"{text}.to({spell(target)})"  # (an own .to() that returns nothing: in place)
        plan.add(Step("reassign", entry.path, target), call if to_in_place(type(obj)) else f"{text} = {call}", text)  # fmt: skip
        return
    if in_place(obj):  # OrderedDict, defaultdict, a user's subclass: kept as it is
        plan.add(
            Step("mapping" if probe.is_a(obj, dict) else "sequence", entry.path, target),
            _in_place_code(text, obj, target),
            text,
        )
        return
    if probe.is_a(obj, dict):
        code = f"{text} = {{k: v.to({spell(target)}) if torch.is_tensor(v) else v for k, v in {text}.items()}}"
        plan.add(Step("mapping", entry.path, target), code, text)
        return
    fields = probe.class_attribute(type(obj), "_fields") if probe.is_a(obj, tuple) else None
    if type(fields) is tuple:
        values = tuple.__iter__(obj)
        moved = ", ".join(
            f"{f}={text}.{f}.to({spell(target)})"
            if is_name(f)
            else f"**{{{f!r}: getattr({text}, {f!r}).to({spell(target)})}}"
            for f, v in zip(fields, values, strict=False)
            if probe.is_tensor(v) and isinstance(f, str)
        )
        plan.add(Step("sequence", entry.path, target), f"{text} = {text}._replace({moved})", text)
        return
    opener, closer = ("[", "]") if probe.is_a(obj, list) else ("tuple(", ")")
    if type(obj) is not tuple and opener != "[":
        opener = f"type({text})("  # a tuple subclass stays one
    code = f"{text} = {opener}t.to({spell(target)}) if torch.is_tensor(t) else t for t in {text}{closer}"
    plan.add(Step("sequence", entry.path, target), code, text)


def _in_place_code(text: str, obj: Any, target: str) -> str:
    """The loop that replaces a dict or list subclass's tensors in place."""
    if probe.is_a(obj, dict):
        return (
            f"for k, v in list({text}.items()):\n"
            f"    if torch.is_tensor(v):\n        {text}[k] = v.to({spell(target)})"
        )
    return (
        f"for i, t in enumerate({text}):\n"
        f"    if torch.is_tensor(t):\n        {text}[i] = t.to({spell(target)})"
    )


def _plan_module(plan: _Plan, entry: Entry, by_path: dict, target: str, scan: Scan) -> None:
    held = plain_list_holding(entry, scan)
    if held is not None:
        list_path, members = held
        text = format_path(list_path)
        for member_path, _ in members:
            step = Step("module_to", member_path, target)
            if step not in plan.steps:
                plan.steps.append(step)
        each = f"{text}.values()" if any(type(p[-1][1]) is str for p, _ in members) else text
        plan.code.append(f"for m in {each}:\n    m.to({spell(target)})")
        plan.names.append(text)
        return
    owner = outermost_module(entry, by_path, scan)
    if owner is None or (owner.module is not None and owner.module.dispatch_device):
        return
    if entry.kind in ("module", "parameter", "buffer") and on_meta(entry) and target != "meta":
        # A meta tensor has no data to copy: Module.to() raises, to_empty() allocates,
        # and only the meta part must be materialised, not the real weights around it.
        path = meta_subtree(entry, owner)
        text = format_path(path)
        code = f"{text}.to_empty(device={spell(target)})  # uninitialised: load the weights next"
        plan.add(Step("to_empty", path, target), code, text)
        return
    text = format_path(owner.path)
    plan.add(Step("module_to", owner.path, target), f"{text}.to({spell(target)})", text)


def _plan_optimizer(plan: _Plan, owner: Entry) -> None:
    text = format_path(owner.path)
    code = (
        f"for p, state in {text}.state.items():\n"
        "    for k, v in state.items():\n"
        '        if torch.is_tensor(v) and k != "step":\n'
        "            state[k] = v.to(p.device)"
    )
    plan.add(Step(OPTIMIZER_STATE, owner.path, ""), code, f"{text}.state")


def _namespace_fix(plan: _Plan, target: str) -> Fix:
    names = plan.names
    shown = names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" and {names[-1]}"
    if len(names) > 3:
        shown = f"{len(names)} objects"
    title = f"Move {shown} to {target}" if target else f"Move {shown}"
    return Fix(title=title, code="\n".join(plan.code), scope="namespace", steps=tuple(plan.steps))


# -- cell rewrites -----------------------------------------------------------------------


def _cell_fix(
    analysis: Analysis,
    scan: Scan,
    target: str,
    cell: Cell | None,
    locals_only: bool = False,
    steps_of: dict[int, tuple[Step, ...]] | None = None,
) -> Fix | None:
    """Moves the culprits right before the failing statement, inside any loop, and
    every other tensor the rest of the cell needs (``yb`` of ``for xb, yb in loader``
    beside ``xb``): the whole cell runs, not only the line that failed. With
    ``locals_only`` (a function of another cell), only the function's own locals:
    rebinding a global there would make it a local of the function."""
    if cell is None:
        return None
    plan = _Plan()
    by_path = {e.path: e for e in scan.entries.values() if e.named}
    dropped = _dropped(cell, analysis)
    if locals_only:  # a function's own local only: assigning a global makes it a local
        dropped = {k: m for k, m in dropped.items() if mends_locally(cell, m)}
    for culprit in analysis.found:
        if culprit.finding.kind in UNMOVABLE:
            continue
        if not locals_only and _plan_load(plan, culprit, analysis, target):
            continue
        if culprit.entries and id(culprit.entries[0].obj) in dropped:
            continue  # its own line is mended below
        local = _cell_local(cell, culprit)
        if local:
            step = Step("reassign", (("name", local),), target)
            plan.add(step, f"{local} = {local}.to({spell(target)})", local)
        elif not locals_only:
            _plan_one(plan, culprit, by_path, target, set(), scan)
    if not plan.code and not dropped:
        return None
    # An alias of what the plan moves (``p2`` of ``zip(..., m2.parameters())``) is
    # moved with its owner: rebinding it would leave an in-place update unseen.
    aliases = {e.alias for c in analysis.found for e in c.entries if e.alias}
    aliases |= {m.held for m in dropped.values()}
    for name in _also_needed(cell, target, loops=True) if not analysis.argument else ():
        if name not in plan.names and name not in aliases:
            if locals_only and not owns_name(cell.view.frame, name):
                continue
            step = Step("reassign", (("name", name),), target)
            plan.add(step, f"{name} = {name}.to({spell(target)})", name)
    new_lines: list[str] = []
    for code in plan.code:
        new_lines.extend(code.splitlines())
    rewritten = insert_lines_before(cell.lines, cell.stmt, new_lines) if new_lines else cell.lines
    mends = list({id(m.stmt): m for m in dropped.values()}.values())  # (a loop's: one line)
    for move in sorted(mends, key=lambda m: -m.stmt.lineno):
        rewritten = replace_span(rewritten, move.stmt, move.assigned)  # (lines above the insert)
    names = ", ".join(plan.names)
    if dropped:
        assigned = " and ".join(f"`{m.assigned}`" for m in mends)
        also = f", and move {names} to {target}" if names else ""
        fix = cell_result(cell, rewritten, f"{_ASSIGN} {assigned} in the cell{also}")
        moved = [
            Step("mapping", (("name", m.holder),), target)
            if m.holder
            else Step("reassign", (("name", m.held),), target)
            for m in mends
        ]
    else:
        fix = cell_result(
            cell, rewritten, f"Move {names} to {target} in the cell, before the line that failed"
        )
        moved = []
    if steps_of is not None:
        steps_of[id(fix)] = (*plan.steps, *moved)
    return fix


#: The title of a cell fix that assigns a dropped ``.to()``'s result.
_ASSIGN = "Keep what .to() returns:"


def _dropped(cell: Cell, analysis: Analysis) -> dict[int, Discarded]:
    """The culprits the cell moved with a dropped ``x.to(device)`` (by id), each with
    that statement: the fix assigns its result there."""
    objects = {id(e.obj): e.obj for c in analysis.found for e in c.entries[:1]}
    return dict(discarded(cell, objects)) if objects else {}


def _frame_locals(frame: Any) -> dict[str, Any]:
    try:
        found = frame.f_locals
    except Exception:
        return {}
    return found if type(found) is dict else {}


def _cell_local(cell: Cell, culprit: Culprit) -> str:
    """The name of a tensor culprit that is a local of the failed function (a
    script's ``def main()``), which the rewritten function can move."""
    entry = culprit.entries[0] if culprit.entries else None
    if cell.view.is_module_level or entry is None or entry.kind not in ("tensor", "parameter"):
        return ""
    if len(entry.path) != 1 or entry.path[0][0] != "local" or entry.where != cell.view.label:
        return ""
    name = str(entry.path[0][1])
    return name if is_name(name) and owns_name(cell.view.frame, name) else ""


def _repeats(cell_fix: Fix, moves: Fix | None) -> bool:
    """The cell rewritten is the moves followed by the cell as it was (a cell of
    one line): running the moves, then the cell, says the same."""
    if moves is None or cell_fix.scope != "cell":
        return False
    said = [line.rstrip() for line in (moves.code + "\n" + cell_fix.original).splitlines()]
    return [line.rstrip() for line in cell_fix.code.splitlines()] == [line for line in said if line]


def _meta_note_fix(analysis: Analysis, target: str) -> Fix | None:
    top = analysis.top_module
    if top is None or top.module is None or not top.named or len(top.path) != 1:
        return None
    if top.module.majority() != "meta" or target == "meta":
        return None
    if not named_by_message("meta", analysis.message_devices) or analysis.state_dict:
        # a stateless skeleton (functional_call): its own tensors never met; a
        # model with its state dict at hand is loaded, not left uninitialised
        return None
    text = format_path(top.path)
    code = f"{text}.to_empty(device={spell(target)})\n# to_empty allocates uninitialised memory: load the weights next, e.g.\n# {text}.load_state_dict(state_dict)"
    return Fix(
        title=f"Materialise {text} on {target} (it is on the meta device and holds no data)",
        code=code,
        scope="namespace",
        steps=(Step("to_empty", top.path, target),),
    )
