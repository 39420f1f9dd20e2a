"""What a scan keeps about each object while a diagnosis runs (:class:`Entry`,
with a module's or an optimizer's view of its tensors), and the rows it leaves
(:func:`record_of`): plain strings and numbers.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ipydevice.collect import probe
from ipydevice.collect.paths import Path, format_path
from ipydevice.collect.probe import TensorFacts
from ipydevice.collect.walk import ATOM_IDS, container_items, dict_items, named_items
from ipydevice.model import DeviceShare, ObjectRecord
from ipydevice.wording import plural

__all__ = [
    "TENSOR_KINDS",
    "Entry",
    "FactsCache",
    "ModuleView",
    "OptimizerView",
    "record_of",
    "shares_of",
]

#: The kinds a scan gives a tensor's entry (its own, or as a module's part): the kind
#: says it, no type test needed on each of a namespace's 100,000 tensors.
TENSOR_KINDS = frozenset({"tensor", "parameter", "buffer", "attribute"})


class FactsCache:
    """:func:`probe.tensor_facts`, read once per tensor per scan: a layer's
    parameters are counted by its own view, its block's and its model's.

    Holds the tensors (which pins their ids) only as long as the scan: it is
    shared by the scan's module views and refers to nothing else (its budget and
    the scan's notes list), so no reference cycle keeps a scan, and its tensors,
    waiting for the collector.
    """

    __slots__ = ("_budget", "_note", "_placed", "_seen")

    def __init__(self, budget: probe.Budget | None = None, notes: list[str] | None = None) -> None:
        self._seen: dict[int, tuple[Any, TensorFacts]] = {}
        self._placed: dict[int, tuple[Any, tuple[str, int]]] = {}
        self._budget = budget
        #: the scan's notes list (the list, not the scan: no reference cycle)
        self._note = notes

    def _spent(self) -> bool:
        """The scan's time is up: nothing more is read (a subclass's ``device``
        property may be slow user code); the scan's notes say so, once."""
        budget = self._budget
        if budget is None or not budget.spent():
            return False
        if self._note is not None and budget.note not in self._note:
            self._note.append(budget.note)
        return True

    def __call__(self, tensor: Any) -> TensorFacts:
        found = self._seen.get(id(tensor))
        if found is None or found[0] is not tensor:
            if self._spent():
                return _UNREAD
            found = (tensor, probe.tensor_facts(tensor))
            self._seen[id(tensor)] = found
        return found[1]

    def placement(self, tensor: Any) -> tuple[str, int]:
        """``(device, nbytes)`` alone (:func:`probe.placement`): a model's hundreds
        of parameters are counted by device, and only the rows shown need more."""
        found = self._seen.get(id(tensor))
        if found is not None and found[0] is tensor:
            return found[1][0], found[1][3]
        placed = self._placed.get(id(tensor))
        if placed is None or placed[0] is not tensor:
            if self._spent():
                return probe.UNKNOWN, 0
            placed = (tensor, probe.placement(tensor))
            self._placed[id(tensor)] = placed
        return placed[1]


#: The facts of a tensor not read because the scan's time was up.
_UNREAD = probe.UNREAD


@dataclass(eq=False)
class ModuleView:
    """What a module holds, split the way ``.to()`` sees it (transient)."""

    registered: list[tuple[Path, Any, str]] = field(default_factory=list)
    attributes: list[tuple[Path, Any, Any]] = field(default_factory=list)
    plain_lists: list[tuple[Path, list[tuple[Path, Any]], Any]] = field(default_factory=list)
    dispatch_device: str = ""
    truncated: bool = False
    submodules: list[tuple[Path, Any]] = field(default_factory=list)
    #: public attributes (of the module or a submodule) that are lists, tuples,
    #: dicts or optimizers: what a naming walk must still look into.
    held: list[tuple[Path, Any]] = field(default_factory=list)
    placement: Callable[[Any], tuple[str, int]] = probe.placement
    #: a registry wider than ``max_items`` (see :mod:`ipydevice.collect.census`): the
    #: tensors past the read ones counted, ``(registry's module, kind, device, count,
    #: nbytes)``; a few kept, ``(path, tensor, kind, device, nbytes)``; and where the
    #: counting stopped, ``(registry's module, kind, read, total)``
    counted: list[tuple[Path, str, str, int, int]] = field(default_factory=list)
    examples: list[tuple[Path, Any, str, str, int]] = field(default_factory=list)
    unread: list[tuple[Path, str, int, int]] = field(default_factory=list)
    _shares: tuple[DeviceShare, ...] | None = None

    def shares(self) -> tuple[DeviceShare, ...]:
        """Registered parameters and buffers per device, biggest count first (those
        of a wide registry that were counted, not read, included)."""
        if self._shares is None:
            shares = shares_of((t for _, t, _ in self.registered), self.placement)
            if self.counted:
                shares = _with_counted(shares, self.counted)
            self._shares = shares
        return self._shares

    def reset(self) -> None:
        """Forgets the shares (what they are made of changed)."""
        self._shares = None

    def majority(self) -> str:
        """The device most registered tensors live on ('' when none), of those read."""
        known = [s for s in self.shares() if s.device != probe.UNKNOWN]
        return known[0].device if known else ""


@dataclass(eq=False)
class OptimizerView:
    """An optimizer's parameters and state, state compared per parameter (transient)."""

    params: list[Any] = field(default_factory=list)
    state: list[tuple[Any, str, Any, bool]] = field(default_factory=list)

    def misplaced(self) -> list[tuple[Any, str, str, str]]:
        """``(param, key, state_device, param_device)`` for state away from its param.

        ``step`` is exempt unless the group is capturable or fused: PyTorch keeps it
        as a CPU scalar on purpose.
        """
        out = []
        for param, key, tensor, step_exempt in self.state:
            if key == "step" and step_exempt:
                continue
            state_dev = probe.tensor_facts(tensor).device
            param_dev = probe.tensor_facts(param).device
            # An unreadable device ("?") is no evidence of a misplacement, and
            # would otherwise become the diagnosis' target.
            if state_dev != param_dev and probe.UNKNOWN not in (state_dev, param_dev):
                out.append((param, key, state_dev, param_dev))
        return out


@dataclass(eq=False)
class Entry:
    """One object seen by a scan (transient: holds the live object)."""

    obj: Any
    path: Path
    where: str
    kind: str
    parent_kind: str = ""
    operand: bool = False
    #: an argument of the library function that failed (``input`` of F.embedding)
    consumed: bool = False
    on_line: bool = False
    is_index: bool = False
    order: int = 0
    named: bool = False
    owner: Entry | None = None
    user: bool = False
    frame: int = 1_000
    container: Any = None
    #: another name the user holds it under (``w`` for ``criterion.weight``)
    alias: str = ""
    #: other places the failing code reads it from, which a move must set too
    #: (a closure's cell, when the user holds the tensor by a name of their own)
    slots: tuple[Path, ...] = ()
    #: a module found in the namespace as the owner of such an alias (it did
    #: not run: its device is no evidence of the target)
    owns_alias: bool = False
    #: read by the failing cell's (or script's) top-level code, whose expressions are
    #: written in the user's names: shown as written (``band_mask(6, 2)``)
    top: bool = False
    #: the name shown when the path is not how the user reads it: a closure's cell,
    #: ``keep in restrict`` for ``restrict.__closure__[0].cell_contents`` (the path the
    #: fix sets)
    shown: str = ""
    module: ModuleView | None = None
    optimizer: OptimizerView | None = None
    _facts: TensorFacts | None = None
    #: the scan's facts, shared with its module views (None: read alone)
    shared: FactsCache | None = None

    @property
    def facts(self) -> TensorFacts:
        """:func:`probe.tensor_facts` of the object, read once."""
        if self._facts is None:
            shared = self.shared
            self._facts = probe.tensor_facts(self.obj) if shared is None else shared(self.obj)
        return self._facts

    @property
    def device(self) -> str:
        """The object's device alone (the first of :attr:`facts`), read cheaply
        when the other facts were not needed yet."""
        if self._facts is not None:
            return self._facts.device
        shared = self.shared
        return probe.placement(self.obj)[0] if shared is None else shared.placement(self.obj)[0]

    @property
    def name(self) -> str:
        if self.shown:
            return self.shown
        text = format_path(self.path)
        if self.named or self.top or not self.path or self.path[0][0] != "local":
            return text
        return f"{text} in {self.where}"


def reads_part_of(entry: Entry, parent: Entry, step: tuple[str, Any]) -> bool:
    """``entry`` was recorded as the expression that reads ``step`` of
    ``parent`` in the same frame (``self.table``, ``h.weights['w']``)."""
    path = entry.path
    if len(path) != 1 or path[0][0] != "local" or entry.where != parent.where:
        return False
    if not parent.path or parent.path[0][0] != "local":
        return False
    return format_path((*parent.path, step)) == path[0][1]


def dispatch_device(device_map: Any) -> str:
    """The first execution device of an accelerate/transformers ``hf_device_map``."""
    if not probe.is_a(device_map, dict):
        return ""
    for value in dict.values(device_map):
        if type(value) is int:
            return f"cuda:{value}"
        if type(value) is str and value not in ("disk",):
            return value
        return probe.device_str(value)
    return ""


def optimizer_view(opt: Any) -> OptimizerView:
    view = OptimizerView()
    state = probe.module_dict(opt)
    groups: Any = state.get("param_groups")
    exempt: dict[int, bool] = {}
    # list.__iter__ and dict.get, not the objects' own: param_groups may be any
    # list or dict subclass, and flags are compared with ``is True``, never bool().
    for group in list.__iter__(groups) if probe.is_a(groups, list) else []:
        if not probe.is_a(group, dict):
            continue
        step_exempt = not (
            dict.get(group, "capturable") is True or dict.get(group, "fused") is True
        )
        params: Any = dict.get(group, "params")
        for param in list.__iter__(params) if probe.is_a(params, list) else []:
            view.params.append(param)
            exempt[id(param)] = step_exempt
    for param, per_param in dict_items(state.get("state"), 100_000):
        # State is keyed by parameter: any other key has no device to compare with.
        if not probe.is_tensor(param) or not probe.is_a(per_param, dict):
            continue
        for key, value in named_items(per_param, 64):
            if probe.is_tensor(value):
                view.state.append((param, key, value, exempt.get(id(param), True)))
    return view


def shares_of(
    tensors: Any, placement: Callable[[Any], tuple[str, int]] = probe.placement
) -> tuple[DeviceShare, ...]:
    """Tensors counted per device, biggest count first (ties: most bytes)."""
    counts: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    for tensor in tensors:
        device, nbytes = placement(tensor)
        counts[device] += 1
        sizes[device] += nbytes
    ordered = sorted(counts, key=lambda d: (-counts[d], -sizes[d], d))
    return tuple(DeviceShare(d, counts[d], sizes[d]) for d in ordered)


def _with_counted(
    shares: tuple[DeviceShare, ...], counted: list[tuple[Path, str, str, int, int]]
) -> tuple[DeviceShare, ...]:
    counts: Counter[str] = Counter({s.device: s.count for s in shares})
    sizes: Counter[str] = Counter({s.device: s.nbytes for s in shares})
    for _, _, device, count, nbytes in counted:
        counts[device] += count
        sizes[device] += nbytes
    ordered = sorted((d for d in counts if counts[d]), key=lambda d: (-counts[d], -sizes[d], d))
    return tuple(DeviceShare(d, counts[d], sizes[d]) for d in ordered)


def record_of(entry: Entry, limit: int = 200, held: list[Any] | None = None) -> ObjectRecord:
    """Turns one transient entry into a row of strings and numbers; ``held``: the
    tensors a holder holds at any depth (else its direct items are counted)."""
    obj = entry.obj
    base: dict[str, Any] = {
        "name": entry.name,
        "kind": entry.kind,
        "type_name": probe.class_name(obj),
        "where": entry.where,
    }
    base.update(
        path=entry.path if entry.named else (),
        parent_kind=entry.parent_kind,
        is_index=entry.is_index,
    )
    if entry.kind in ("tensor", "parameter", "buffer", "attribute", "optimizer state", "generator"):
        device, shape, dtype, nbytes, detail = entry.facts
        return ObjectRecord(
            device=device, shape=shape, dtype=dtype, nbytes=nbytes, detail=detail, **base
        )
    if entry.module is not None:
        shares = entry.module.shares()
        detail = module_detail(entry.module)
        return ObjectRecord(
            device=one_device(shares),
            nbytes=sum(s.nbytes for s in shares),
            shares=shares,
            detail=detail,
            **base,
        )
    placement = entry.shared.placement if entry.shared is not None else probe.placement
    if entry.optimizer is not None:
        shares = shares_of(entry.optimizer.params, placement)
        params, state = len(entry.optimizer.params), len(entry.optimizer.state)
        detail = f"{plural(params, 'parameter')}, {plural(state, 'state tensor')}"
        return ObjectRecord(device=one_device(shares), shares=shares, detail=detail, **base)
    items = container_items(obj, limit + 1) or []
    if held is None:
        children = (child for _, child in items[:limit] if id(type(child)) not in ATOM_IDS)
        held = [child for child in children if probe.is_tensor(child)]
    shares = shares_of(held, placement)
    size = safe_len(obj)
    detail = plural(size, "item") if size >= 0 else ""
    if len(items) > limit:
        detail += f" (first {limit} scanned)"
    return ObjectRecord(
        device=one_device(shares),
        nbytes=sum(s.nbytes for s in shares),
        shares=shares,
        detail=detail,
        **base,
    )


def safe_len(obj: Any) -> int:
    for base in (list, tuple, dict, deque):
        if probe.is_a(obj, base):
            return base.__len__(obj)
    return -1


def one_device(shares: tuple[DeviceShare, ...]) -> str:
    if not shares:
        return ""
    return shares[0].device if len(shares) == 1 else "mixed"


def module_detail(view: ModuleView) -> str:
    params = sum(1 for _, _, kind in view.registered if kind == "parameter")
    buffers = len(view.registered) - params
    for _, kind, read, total in view.unread:  # (those counted are in the counts below)
        if kind == "parameter":
            params += total - read
        else:
            buffers += total - read
    for _, kind, _, count, _ in view.counted:
        if kind == "parameter":
            params += count
        else:
            buffers += count
    parts = [plural(params, "parameter")]
    if buffers:
        parts.append(plural(buffers, "buffer"))
    if view.attributes:
        parts.append(plural(len(view.attributes), "unregistered tensor"))
    if view.dispatch_device:
        parts.append("dispatched (hf_device_map)")
    return ", ".join(parts)
