"""What a message demands of one argument: the wording fixes that argument's device.

Most device errors say only that two devices met; the target is then read from the
objects (the model's parameters, the data). Some wordings say more: the device one
argument must be on, whatever device the model is on.

* ``pack_padded_sequence``: "'lengths' argument should be a 1D CPU int64 tensor" --
  ``lengths`` must be on the CPU even when the model and the batch are on the GPU;
* advanced indexing: "indices should be either on cpu or on the same device as the
  indexed tensor (cpu)" -- the indices go where the indexed tensor is (or the CPU);
* a random generator: "Expected a 'cuda' device type for generator but found 'cpu'";
* transformers' ``generate()``: "`input_ids` is on cuda, whereas the model is on cpu" --
  the inputs go where the warning says the model is (the model is not moved to them).

For such a message the demanded device is the target *for that argument*, and the
tensor the failing line passes as that argument is the culprit. Each demand is one
:class:`Demand` in :data:`DEMANDS`, keyed by the argument the wording names
(``MessageFacts.argument``); a new wording with its own demand is one more row.
"""

from __future__ import annotations

import ast
import types
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ipydevice._debug import contain
from ipydevice.code.flow import indexing_operands
from ipydevice.collect import probe
from ipydevice.collect.frames import FrameView, failing_statement, safe_value
from ipydevice.collect.scan import Entry, Scan
from ipydevice.diagnosis.devices import same_device
from ipydevice.family import MessageFacts

__all__ = ["DEMANDS", "Demand", "Demanded", "demand_of", "demanded", "positional_names"]


@dataclass(frozen=True, slots=True)
class Demand:
    """One wording's demand on one argument.

    Attributes:
        argument: the argument the message names (``MessageFacts.argument``).
        params: what that argument is called in the Python call that takes it.
        subscript: the argument is the index of a subscript (``table[idx]``).
        device: the demanded device; ``""``: the device the message expects.
        also: devices the argument may be on as well (indices may stay on the CPU).
        rule: the demand in words, for ``Diagnosis.target_reason`` (``{device}``:
            the demanded device).
        only: the demand is on that argument alone (the other tensors keep their
            devices); False: everything goes to the demanded device, and the usual
            search names what is elsewhere.
    """

    argument: str
    params: tuple[str, ...]
    rule: str
    subscript: bool = False
    device: str = ""
    also: tuple[str, ...] = ()
    only: bool = True

    def target(self, facts: MessageFacts) -> str:
        return self.device or facts.expected or ""


DEMANDS: tuple[Demand, ...] = (
    Demand(
        "lengths",
        ("lengths",),
        "the message demands `lengths` on the CPU (pack_padded_sequence reads it there)",
        device="cpu",
    ),
    Demand(
        "indices",
        ("indices", "index"),
        "the message demands the indices on the CPU or where the indexed tensor is",
        subscript=True,
        also=("cpu",),
    ),
    Demand(
        "generator",
        ("generator",),
        "the message demands the generator on the device type it names",
    ),
    # transformers' generate(): "`input_ids` is on cuda, whereas the model is on cpu"
    Demand(
        "input_ids",
        ("input_ids", "inputs"),
        "the warning says the model is on {device}: its inputs go there",
        only=False,
    ),
)


def demand_of(facts: MessageFacts) -> Demand | None:
    """The demand the message's wording makes, if any."""
    if not facts.argument:
        return None
    for demand in DEMANDS:
        if demand.argument == facts.argument:
            return demand
    return None


@dataclass(eq=False)
class Demanded:
    """A demand applied: its target, the rule in words, and the culprits (live entries)."""

    demand: Demand
    target: str
    entries: list[Entry]


def demanded(facts: MessageFacts, scan: Scan, views: Sequence[FrameView]) -> Demanded | None:
    """The demand of ``facts`` applied to the failing frames: what is passed as
    the argument, off the demanded device, is the culprit."""
    demand = demand_of(facts)
    if demand is None:
        return None
    target = demand.target(facts)
    if not target:
        return None
    entries: list[Entry] = []
    if not demand.only:
        return Demanded(demand, target, entries)
    for index, text, value in _passed(demand, views):
        if not probe.is_tensor(value) or _allowed(probe.placement(value)[0], target, demand):
            continue
        entry = scan.add(
            value,
            (("local", text),),
            views[index].label,
            on_line=True,
            operand=True,
            user=True,
            frame=index,
        )
        if entry is not None and entry not in entries:
            entries.append(entry)
    return Demanded(demand, target, entries)


def _allowed(device: str, target: str, demand: Demand) -> bool:
    if device == "?":
        return True
    return any(same_device(device, ok) for ok in (target, *demand.also))


def _passed(demand: Demand, views: Sequence[FrameView]) -> Iterator[tuple[int, str, Any]]:
    """``(frame index, text, value)`` of what the user's failing lines pass as the
    argument, innermost first; else the library frames' own parameter of that name."""
    passed = False
    for index in range(len(views) - 1, -1, -1):
        view = views[index]
        if not view.is_user:
            continue
        found = failing_statement(view)
        if found is None:
            continue
        for index_node in _index_nodes(found[0], demand, view):
            ok, value = safe_value(index_node, view.frame)
            if ok:
                passed = True
                yield index, ast.unparse(index_node), value
        for node in ast.walk(found[0]):
            for arg in _argument_nodes(node, demand, view):
                ok, value = safe_value(arg, view.frame)
                if ok:
                    passed = True
                    yield index, ast.unparse(arg), value
    if passed:
        return
    for index in range(len(views) - 1, -1, -1):
        view = views[index]
        if view.is_user:
            continue
        for name, value in view.arguments():
            if name in demand.params:
                yield index, name, value


def _index_nodes(stmt: ast.stmt, demand: Demand, view: FrameView) -> list[ast.expr]:
    """The indices of what the statement indexes (``table[idx]``, ``acc.index_put_((idx,),
    v)``, ``acc.index_add_(0, idx, src)``): of a tensor only (``torch.index_add(acc, ...)``
    is read with ``acc`` as the tensor indexed)."""
    if not demand.subscript:
        return []
    out: list[ast.expr] = []
    for held, indices, _ in indexing_operands(stmt):
        ok, value = safe_value(held, view.frame)
        if ok and probe.is_tensor(value):
            out.extend(i for i in indices if all(i is not o for o in out))
    return out


def _argument_nodes(node: ast.AST, demand: Demand, view: FrameView) -> list[ast.AST]:
    if not isinstance(node, ast.Call):
        return []
    out: list[ast.AST] = [k.value for k in node.keywords if k.arg in demand.params]
    names = positional_names(node.func, view)
    for position, arg in enumerate(node.args):
        if isinstance(arg, ast.Starred) or position >= len(names):
            break
        if names[position] in demand.params:
            out.append(arg)
    return out


def positional_names(func: ast.AST, view: FrameView) -> tuple[str, ...]:
    """The positional parameter names of the called function, read from its code
    object (a plain function or a bound method; nothing of the user's is called)."""
    ok, callee = safe_value(func, view.frame)
    if not ok:
        return ()
    try:
        skip = 0
        if type(callee) is types.MethodType:
            callee, skip = callee.__func__, 1
        if type(callee) is not types.FunctionType:
            return ()
        code = callee.__code__
        return tuple(code.co_varnames[skip : code.co_argcount])
    except BaseException as caught:
        contain(caught)
        return ()
