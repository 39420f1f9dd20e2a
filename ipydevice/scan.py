"""Bounded walks over live objects: tensors, modules, optimizers, containers.

A :class:`Scan` is transient: while one diagnosis or inventory runs it holds the
objects it was given, then :meth:`Scan.records` turns what it saw into
:class:`~ipydevice.model.ObjectRecord` rows (strings and numbers) and the scan is
dropped. Every walk is bounded by :mod:`ipydevice.settings` (objects visited,
items per container, depth, modules per tree) and reports truncation in
``notes``. All facts come from :mod:`ipydevice.probe`, which reads metadata only.

Names follow what the user would type: a namespace path when one reaches the
object (``batch['input_ids']``, ``model.encoder.layers[3].cache``), else the local
name and its function (``pos in PosEnc.forward``).
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ipydevice import probe
from ipydevice.model import DeviceShare, ObjectRecord
from ipydevice.paths import Path, format_path, is_key
from ipydevice.render.text import plural
from ipydevice.settings import Settings

__all__ = ["SKIP_NAMES", "Entry", "ModuleView", "OptimizerView", "Scan", "record_of", "shares_of"]

#: Namespace names that are IPython's own bookkeeping, never the user's objects.
SKIP_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython"})

#: Module attributes that are torch's own machinery, not user state.
_MODULE_INTERNALS = frozenset({"_parameters", "_buffers", "_modules", "training"})

_UNWALKED_TYPES = (str, bytes, bytearray, int, float, complex, bool, type(None), range)

#: ids of those exact types: ``id(type(obj)) in _ATOM_IDS`` answers "nothing to
#: scan here" without comparing or hashing a (possibly hostile) class. The common
#: leaves of big containers (ints, floats, strings) take this fast path.
_ATOM_IDS = frozenset(id(kind) for kind in _UNWALKED_TYPES)

_BUDGET_NOTE = "scan stopped after {} objects"

_STR_ONLY = {str}
_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)


class _FactsCache:
    """:func:`probe.tensor_facts`, read once per tensor per scan: a layer's
    parameters are counted by its own view, its block's and its model's.

    Holds the tensors (which pins their ids) only as long as the scan: it is
    shared by the scan's module views and refers to nothing else, so no
    reference cycle keeps a scan, and its tensors, waiting for the collector.
    """

    __slots__ = ("_placed", "_seen")

    def __init__(self) -> None:
        self._seen: dict[int, tuple[Any, tuple[str, str, str, int, str]]] = {}
        self._placed: dict[int, tuple[Any, tuple[str, int]]] = {}

    def __call__(self, tensor: Any) -> tuple[str, str, str, int, str]:
        found = self._seen.get(id(tensor))
        if found is None or found[0] is not tensor:
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
            placed = (tensor, probe.placement(tensor))
            self._placed[id(tensor)] = placed
        return placed[1]


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
    _shares: tuple[DeviceShare, ...] | None = None

    def shares(self) -> tuple[DeviceShare, ...]:
        """Registered parameters and buffers per device, biggest count first."""
        if self._shares is None:
            self._shares = shares_of((t for _, t, _ in self.registered), self.placement)
        return self._shares

    def majority(self) -> str:
        """The device most registered tensors live on ('' when none)."""
        shares = self.shares()
        return shares[0].device if shares else ""


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
            state_dev = probe.tensor_facts(tensor)[0]
            param_dev = probe.tensor_facts(param)[0]
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
    on_line: bool = False
    is_index: bool = False
    order: int = 0
    named: bool = False
    owner: Entry | None = None
    user: bool = False
    frame: int = 1_000
    container: Any = None
    module: ModuleView | None = None
    optimizer: OptimizerView | None = None
    _facts: tuple[str, str, str, int, str] | None = None
    #: the scan's facts, shared with its module views (None: read alone)
    shared: _FactsCache | None = None

    @property
    def facts(self) -> tuple[str, str, str, int, str]:
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
            return self._facts[0]
        shared = self.shared
        return probe.placement(self.obj)[0] if shared is None else shared.placement(self.obj)[0]

    @property
    def name(self) -> str:
        text = format_path(self.path)
        if self.named or not self.path or self.path[0][0] != "local":
            return text
        return f"{text} in {self.where}"


class Scan:
    """Collects entries from frames and namespaces, then names and records them."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.entries: dict[int, Entry] = {}
        self.notes: list[str] = []
        self._visits = 0
        self._warned: set[str] = set()
        self._walk_kinds: dict[int, tuple[type, int, bool]] = {}
        self._tensor_types: set[int] = set()
        self._facts = _FactsCache()
        self._roots: tuple[Mapping[str, Any], list[tuple[str, Any, int]]] | None = None

    # -- collecting ---------------------------------------------------------------

    def add(self, obj: Any, path: Path, where: str, **flags: Any) -> Entry | None:
        """Adds ``obj`` (and what it holds) unless already seen; returns its entry."""
        entry = self.entries.get(id(obj))
        if entry is not None:
            entry.operand |= bool(flags.get("operand"))
            entry.on_line |= bool(flags.get("on_line"))
            entry.is_index |= bool(flags.get("is_index"))
            entry.frame = min(entry.frame, int(flags.get("frame", 1_000)))
            if flags.get("user") and not entry.user and not entry.named and not entry.parent_kind:
                # A user's frame names it better than torch's (``batch in predict``
                # rather than ``input in Linear.forward``).
                entry.path, entry.where, entry.user = path, where, True
            return entry
        kind = _kind_of(obj)
        if kind is None:
            return None
        entry = Entry(obj, path, where, kind, order=len(self.entries), shared=self._facts, **flags)
        self.entries[id(obj)] = entry
        if kind == "module":
            entry.module = self._module_view(entry)
        elif kind == "optimizer":
            entry.optimizer = _optimizer_view(obj)
        elif kind == "container":
            self._add_children(entry, flags)
        return entry

    def _add_children(self, parent: Entry, flags: dict) -> None:
        depth = sum(1 for step in parent.path if step[0] != "local")
        if depth >= self.settings.max_depth:
            return
        inherited = {k: v for k, v in flags.items() if k in ("operand", "on_line")}
        for step, child in self._children(parent.obj, parent.path):
            # Atoms first: up to max_objects x max_items children pass here.
            if id(type(child)) in _ATOM_IDS:
                continue
            seen = self.entries.get(id(child))
            if seen is not None:
                self._claim(seen, parent, step, inherited)
                continue
            if self._spent():
                return
            if _kind_of(child) is None:
                continue
            entry = self.add(
                child,
                (*parent.path, step),
                parent.where,
                owner=parent,
                user=parent.user,
                **inherited,
            )
            if entry is not None:
                entry.owner = parent

    def _claim(self, entry: Entry, parent: Entry, step: tuple[str, Any], flags: dict) -> None:
        """An object seen before (torch's frames hold ``batch[key]`` as ``input``)
        found again in a container of the user's: the container names it, as the
        user wrote it, and it shares the container's place on the failing line."""
        if entry is parent or entry.named or entry.parent_kind or entry.owner is not None:
            return
        if parent.user and not entry.user:
            entry.path, entry.where, entry.user = (*parent.path, step), parent.where, True
            entry.owner = parent
        entry.operand |= bool(flags.get("operand"))
        entry.on_line |= bool(flags.get("on_line"))

    def _module_view(self, owner: Entry) -> ModuleView:
        module, path = owner.obj, owner.path
        view = ModuleView(placement=self._facts.placement)
        count = 0
        stack: list[tuple[Any, Path]] = [(module, ())]
        seen: set[int] = set()
        while stack:
            current, rel = stack.pop()
            if id(current) in seen:
                continue
            seen.add(id(current))
            count += 1
            if count > self.settings.max_modules:
                view.truncated = True
                self._note(
                    f"{format_path(path)}: only the first {self.settings.max_modules} submodules were scanned"
                )
                break
            children = self._module_level(current, rel, view)
            if rel:
                view.submodules.append((rel, current))
            stack.extend(reversed(children))
        for rel, tensor, kind in view.registered:
            self._record_part(tensor, (*path, *rel), owner, kind)
        for rel, tensor, _ in view.attributes:
            self._record_part(tensor, (*path, *rel), owner, "attribute")
        held = [(rel, module) for _, members, _ in view.plain_lists for rel, module in members]
        for rel, module in [*view.submodules, *held]:
            self._adopt(module, (*path, *rel), owner)
        return view

    def _adopt(self, module: Any, path: Path, owner: Entry) -> None:
        """A submodule scanned on its own (a failing layer) belongs to its model."""
        entry = self.entries.get(id(module))
        if entry is not None and entry is not owner and entry.owner is None and not entry.named:
            entry.owner, entry.where = owner, owner.where
            # What it holds was recorded under its old path (``self`` of its own
            # frame, which every method frame shares): rebase it, or a layer's
            # attention would become ``model.self_attn`` instead of
            # ``model.layers[0].self_attn`` once ``model`` is named.
            self._rebase(entry, path)

    def _module_level(self, module: Any, rel: Path, view: ModuleView) -> list[tuple[Any, Path]]:
        """One module of a tree: its registered tensors and what ``.to()`` misses
        into ``view``; returns its submodules. Every module of a model pays this."""
        state = probe.module_dict(module)
        if not view.dispatch_device and not rel:
            view.dispatch_device = _dispatch_device(state.get("hf_device_map"))
        limit = self.settings.max_items
        registered = view.registered
        tensor_types = self._tensor_types
        for slot, kind in (("_parameters", "parameter"), ("_buffers", "buffer")):
            for name, tensor in _named_items(state.get(slot), limit):
                if id(type(tensor)) in tensor_types or self._is_tensor(tensor):
                    registered.append(((*rel, ("attr", name)), tensor, kind))
        children = []
        submodules = _named_items(state.get("_modules"), limit)
        if submodules:
            container = probe.class_name(module)
            for name, child in submodules:
                if child is not None:
                    children.append((child, (*rel, _child_step(container, name))))
        if _only_usual_attributes(module, state):
            return children  # nn.Linear & co. with nothing the user added
        for name, value in _public_items(state, self.settings.max_items):
            if probe.is_tensor(value):
                view.attributes.append(((*rel, ("attr", name)), value, module))
            elif probe.is_a(value, (list, tuple, dict)):
                view.held.append(((*rel, ("attr", name)), value))
                held = _held_modules(value, (*rel, ("attr", name)), self.settings.max_items)
                if held:
                    view.plain_lists.append(((*rel, ("attr", name)), held, module))
            elif probe.is_optimizer(value):
                view.held.append(((*rel, ("attr", name)), value))
        return children

    def _is_tensor(self, obj: Any) -> bool:
        """:func:`probe.is_tensor`, remembering the tensor types met (by id, the
        types kept alive by the scan's objects) so a model's next parameter costs
        one set lookup."""
        if probe.is_tensor(obj):
            self._tensor_types.add(id(type(obj)))
            return True
        return False

    def _record_part(self, tensor: Any, path: Path, owner: Entry, kind: str) -> None:
        entry = self.entries.get(id(tensor))
        if entry is None:
            self.entries[id(tensor)] = Entry(
                tensor,
                path,
                owner.where,
                kind,
                parent_kind="module",
                order=len(self.entries),
                owner=owner,
                shared=self._facts,
            )
        elif not entry.parent_kind:
            # First seen as a bare operand (``pos_weight`` of F.binary_cross_entropy_...):
            # it belongs to this module, which is how the user reaches and moves it.
            entry.kind, entry.parent_kind, entry.owner = kind, "module", owner
            if not entry.named:
                entry.path, entry.where = path, owner.where

    # -- naming from the namespace --------------------------------------------------

    def name_from(
        self, namespace: Mapping[str, Any], only: set[int] | None = None, deep: bool = True
    ) -> None:
        """Gives entries namespace paths, walking ``namespace`` breadth first.

        Args:
            namespace: the user's names.
            only: ids of the entries worth a deep search (default: all unnamed).
            deep: False looks at the top-level names only (one dict pass).

        Stops as soon as every wanted entry has a name, or when the visit budget
        is spent, so the cost follows the objects involved, not the namespace.
        """
        wanted = {key for key, entry in self.entries.items() if not entry.named}
        if only is not None:
            wanted &= only
        if not wanted:
            return
        if not deep:
            found = self._namespace_items(namespace, wanted)
            # A deep search of the same namespace (later in this diagnosis) starts
            # from its containers and modules: kept, so the namespace is read once.
            self._roots = (namespace, [item for item in found if item[2] == _WALK])
            for name, value, _ in found:
                if id(value) in wanted:  # (two names for one object: the first wins)
                    wanted -= self._rename(self.entries[id(value)], (("name", name),))
            return
        # Objects are named when first reached (breadth first: by their shortest
        # path). Only objects with something below them (containers, modules,
        # optimizers) are queued, each once, so every queued item costs exactly
        # one visit and the queue never holds more than the visits left: a wide
        # namespace (5,000 lists of 200 items) cannot grow it to a million
        # entries, and 10,000 tensors in the namespace spend no visits at all.
        queued: set[int] = set()
        queue: list[tuple[Any, Path, int]] = []
        dropped = False  # something was left unqueued for want of budget
        room = self.settings.max_objects - self._visits - len(self.entries)
        if self._roots is not None and self._roots[0] is namespace:
            roots = self._roots[1]  # what a top-level pass left: every wanted name is taken
        else:
            roots = self._namespace_items(namespace, wanted)
        for name, value, category in roots:
            key = id(value)
            if key in wanted and category != _SKIP:
                wanted -= self._rename(self.entries[key], (("name", name),))
            if key in queued or category != _WALK:
                continue
            if len(queue) >= room:
                dropped = True  # it could never be visited within the budget
                continue
            queued.add(key)
            queue.append((value, (("name", name),), 0))
        head = 0
        max_depth = self.settings.max_depth
        while head < len(queue) and wanted and not self._spent():
            obj, path, depth = queue[head]
            head += 1
            self._visits += 1
            room = (
                self.settings.max_objects - self._visits - len(self.entries) - (len(queue) - head)
            )
            scanned = self.entries.get(id(obj))
            view = scanned.module if scanned is not None and scanned.obj is obj else None
            children: Iterable[tuple[Path, Any]]
            if view is not None and not view.truncated:
                # A module this scan has walked already: what it holds is known,
                # by path, without reading a single __dict__ again.
                children = self._view_children(view, wanted)
                container = None
            else:
                children = (
                    ((step,), child)
                    for step, child in self._children(obj, path)
                    if id(type(child)) not in _ATOM_IDS  # an int is never wanted, holds nothing
                )
                container = obj if _is_container(obj) else None
            for steps, child in children:
                key = id(child)
                if key in wanted:
                    entry = self.entries[key]
                    wanted -= self._rename(entry, (*path, *steps))
                    if container is not None:
                        entry.container = container
                below = depth + len(steps)
                if below >= max_depth or key in queued or not self._walks(child):
                    continue  # nothing below it is looked at (or it is queued already)
                if room <= 0:
                    dropped = True
                    break
                queued.add(key)
                queue.append((child, (*path, *steps), below))
                room -= 1
        if dropped and wanted:
            self._note(_BUDGET_NOTE.format(self.settings.max_objects))

    def _view_children(self, view: ModuleView, wanted: set[int]) -> list[tuple[Path, Any]]:
        """What a scanned module holds that a naming walk needs, as (steps, object):
        its wanted parts and submodules, and the containers it holds."""
        parts = [
            (rel, obj)
            for rel, obj in (
                *((rel, t) for rel, t, _ in view.registered),
                *((rel, t) for rel, t, _ in view.attributes),
                *view.submodules,
            )
            if id(obj) in wanted
        ]
        return parts + view.held

    def _walks(self, obj: Any) -> bool:
        """Whether a naming walk looks inside ``obj``."""
        return self._type_facts(obj)[2]

    def _type_facts(self, obj: Any) -> tuple[type, int, bool]:
        """``(type, namespace category, walks)`` for ``obj`` (see :func:`_classify`),
        decided once per type per scan: every test reads the type alone."""
        kind = type(obj)
        cached = self._walk_kinds.get(id(kind))
        if cached is None:
            # The type is kept beside its id so that the id cannot be reused
            # while this scan lives; the scan, and so the cache, is transient.
            cached = (kind, *_classify(obj))
            self._walk_kinds[id(kind)] = cached
        return cached

    def _namespace_items(
        self, namespace: Mapping[str, Any], wanted: set[int]
    ) -> list[tuple[str, Any, int]]:
        """``(name, value, category)`` for the public names worth a look: the wanted
        objects and those with something inside (:data:`_WALK`), in namespace order.

        A namespace may hold 10,000 tensors beside a few models and batches, and
        this runs right after IPython's traceback has left the CPU caches cold:
        the names are picked at C speed (``map``/``compress``, no bytecode per
        name), each type classified once, and only the names picked cost Python.
        """
        try:
            if type(namespace) is dict:
                keys, values = list(namespace), list(namespace.values())
            else:
                items = list(namespace.items())
                keys, values = list(map(_FIRST, items)), list(map(_SECOND, items))
        except Exception:  # a hostile mapping: items() raised, or yielded no pairs
            return []
        if len(keys) != len(values):  # changed while read (another thread)
            return []
        types = list(map(type, values))
        try:
            picked = self._picked(values, types, wanted)
        except Exception:  # a metaclass whose __hash__ raises: one name at a time
            picked = self._picked_slowly(values, wanted)
        kinds = self._walk_kinds
        out: list[tuple[str, Any, int]] = []
        for index in picked:
            key, value = keys[index], values[index]
            name = key if type(key) is str else _plain_name(key)
            if name is None or name.startswith("_") or name in SKIP_NAMES:
                continue
            out.append((name, value, kinds[id(types[index])][1]))
        return out

    def _picked(self, values: list[Any], types: list[type], wanted: set[int]) -> list[int]:
        """Indexes of the values that walk or are wanted, at C speed; hashes types."""
        distinct = set(types)
        kinds = self._walk_kinds
        for kind in distinct:
            if id(kind) not in kinds:
                self._type_facts(values[types.index(kind)])  # one value decides a type
        walking = {kind for kind in distinct if kinds[id(kind)][1] == _WALK}
        everywhere = range(len(values))
        picked = set(itertools.compress(everywhere, map(walking.__contains__, types)))
        picked.update(itertools.compress(everywhere, map(wanted.__contains__, map(id, values))))
        return sorted(picked)

    def _picked_slowly(self, values: list[Any], wanted: set[int]) -> list[int]:
        """:meth:`_picked` without hashing anything but ids."""
        picked = []
        for index, value in enumerate(values):
            category = self._type_facts(value)[1]
            if category == _WALK or id(value) in wanted:
                picked.append(index)
        return picked

    def _rename(self, entry: Entry, path: Path) -> set[int]:
        entry.named, entry.where = True, "namespace"
        renamed = {id(entry.obj)}
        for key, other in self._rebase(entry, path):
            other.named, other.where = True, "namespace"
            renamed.add(key)
        return renamed

    def _rebase(self, entry: Entry, path: Path) -> list[tuple[int, Entry]]:
        """Gives ``entry`` the path ``path``, and the unnamed entries it holds
        (recorded under its old path) the same prefix; returns those."""
        old = entry.path
        entry.path = path
        size = len(old)
        moved = []
        for key, other in self.entries.items():
            if (
                other is not entry
                and not other.named
                and other.path[:size] == old
                and _descends(other, entry)
            ):
                other.path = (*path, *other.path[size:])
                moved.append((key, other))
        return moved

    # -- children of one object -------------------------------------------------------

    def _children(self, obj: Any, path: Path) -> Iterator[tuple[tuple[str, Any], Any]]:
        if probe.is_tensor(obj) or probe.is_a(obj, _UNWALKED_TYPES):
            return
        if probe.is_module(obj):
            yield from _module_children(obj, self.settings.max_items)
            return
        if probe.is_optimizer(obj):
            yield ("attr", "state"), probe.module_dict(obj).get("state")
            return
        limit = self.settings.max_items
        items = _container_items(obj, limit + 1)
        if items is None:
            return
        if len(items) > limit:
            self._note(f"{format_path(path)}: only the first {limit} items were scanned")
            items = items[:limit]
        yield from items

    def _spent(self) -> bool:
        if self._visits + len(self.entries) >= self.settings.max_objects:
            self._note(_BUDGET_NOTE.format(self.settings.max_objects))
            return True
        return False

    def _note(self, text: str) -> None:
        if text not in self._warned:
            self._warned.add(text)
            self.notes.append(text)

    # -- results ------------------------------------------------------------------------

    def records(self, compact: bool = False) -> tuple[ObjectRecord, ...]:
        """Every entry as a row of strings and numbers.

        ``compact`` leaves out module parameters and buffers that sit where their
        module does: a 32-block model then costs a row, not three hundred.
        """
        limit = self.settings.max_items
        entries = sorted(self.entries.values(), key=lambda e: e.order)
        if compact:
            entries = [e for e in entries if not _unremarkable_part(e)]
        rows = (record_of(e, limit) for e in entries)
        # A container that holds no tensor (``kwargs`` of a library frame) is noise.
        return tuple(r for r in rows if r.kind != "container" or r.shares)


# -- helpers ----------------------------------------------------------------------------


def _unremarkable_part(entry: Entry) -> bool:
    owner = entry.owner
    if entry.parent_kind != "module" or entry.operand or owner is None or owner.module is None:
        return False
    return entry.device == owner.module.majority()


def _descends(entry: Entry, ancestor: Entry) -> bool:
    seen = 0
    owner = entry.owner
    while owner is not None and seen < 64:
        if owner is ancestor:
            return True
        owner, seen = owner.owner, seen + 1
    return False


def _is_atom(obj: Any) -> bool:
    """An exact int, float, str, ...: nothing to scan, decided by type identity."""
    return id(type(obj)) in _ATOM_IDS


def _kind_of(obj: Any) -> str | None:
    if _is_atom(obj):
        return None
    if probe.is_tensor(obj):
        return "parameter" if probe.class_name(obj) == "Parameter" else "tensor"
    if probe.is_module(obj):
        return "module"
    if probe.is_optimizer(obj):
        return "optimizer"
    if _is_container(obj):
        return "container"
    return None


def _is_container(obj: Any) -> bool:
    kind = type(obj)
    if issubclass(kind, (dict, list, tuple)):
        return True
    try:
        if issubclass(kind, Mapping) and callable(getattr(kind, "to", None)):
            return True
        # is_dataclass reads a class attribute: a metaclass __getattr__ may raise.
        return dataclasses.is_dataclass(kind) and not probe.is_a(obj, type)
    except Exception:
        return False


#: What a naming walk does with a namespace value (see :func:`_classify`).
_SKIP, _LEAF, _WALK = 0, 1, 2


def _classify(obj: Any) -> tuple[int, bool]:
    """``(category, walks)``, from ``type(obj)`` only (``callable`` reads the type).

    ``walks``: :meth:`Scan._children` may find something inside (a module,
    optimizer, container, mapping or dataclass). ``category``, for a namespace
    value: :data:`_SKIP` for what is never named (atoms, classes, functions),
    :data:`_WALK` when it walks, else :data:`_LEAF` (a tensor: named, not walked).
    """
    kind = type(obj)
    if id(kind) in _ATOM_IDS:
        return _SKIP, False
    walks = _walkable(obj)
    if probe.is_a(obj, type) or (callable(obj) and not probe.is_module(obj)):
        return _SKIP, walks
    return (_WALK if walks else _LEAF), walks


def _walkable(obj: Any) -> bool:
    if probe.is_tensor(obj) or probe.is_a(obj, _UNWALKED_TYPES):
        return False
    if probe.is_module(obj) or probe.is_optimizer(obj):
        return True
    kind = type(obj)
    try:
        return issubclass(kind, (list, tuple, dict, Mapping)) or dataclasses.is_dataclass(kind)
    except Exception:
        return False


def _container_items(obj: Any, limit: int) -> list[tuple[tuple[str, Any], Any]] | None:
    """Up to ``limit`` (step, child) pairs of a container, or None if not one."""
    kind = type(obj)
    try:
        if issubclass(kind, tuple) and hasattr(kind, "_fields"):
            # range() bounds the walk: _fields may be endless, the tuple huge.
            triples = zip(range(limit), kind._fields, tuple.__iter__(obj), strict=False)
            named = ((_plain_name(name), value) for _, name, value in triples)
            return [(("attr", n), value) for n, value in named if n is not None]
        if issubclass(kind, (list, tuple)):
            values = list.__iter__(obj) if issubclass(kind, list) else tuple.__iter__(obj)
            # zip stops at range's end without pulling an item past the limit.
            pairs = zip(range(limit), values, strict=False)
            return [(("item", index), value) for index, value in pairs]
        if issubclass(kind, dict):
            return [(("item", k), v) for k, v in _keyed_items(obj, limit)]
        if issubclass(kind, Mapping):
            data = probe.module_dict(obj).get("data")
            if probe.is_a(data, dict):
                return [(("item", k), v) for k, v in _keyed_items(data, limit)]
            return None
        if dataclasses.is_dataclass(kind):
            names = [f.name for f in dataclasses.fields(kind)][:limit]
            state = probe.module_dict(obj)
            return [(("attr", n), state[n]) for n in names if n in state]
    except Exception:
        return None
    return None


def _plain_key(key: Any) -> str | int | None:
    """``key`` as an exact ``str`` or ``int`` (bool excluded), else None.

    Paths are rendered with ``repr``/``format`` and kept in snapshots: a key of a
    ``str`` or ``int`` subclass (an enum member, a class with its own ``__repr__``)
    becomes the plain value, which dicts look up alike. Other keys are not named.
    """
    kind = type(key)
    if kind is str or kind is int:
        return key
    if issubclass(kind, str):
        return str.__str__(key)  # the plain characters: no user __str__ runs
    if issubclass(kind, int) and not issubclass(kind, bool):
        return int.__index__(key)
    return None


def _plain_name(key: Any) -> str | None:
    """An attribute or namespace name as an exact ``str``, else None."""
    name = _plain_key(key)
    return name if type(name) is str else None


def _keyed_items(mapping: Any, limit: int) -> list[tuple[str | int, Any]]:
    """Dict items whose keys can be written as literals, keys made plain."""
    out = []
    for key, value in _dict_items(mapping, limit):
        plain = _plain_key(key)
        if plain is not None and is_key(plain):
            out.append((plain, value))
    return out


def _named_items(mapping: Any, limit: int) -> list[tuple[str, Any]]:
    """Dict items with plain ``str`` keys (module registries, ``__dict__``)."""
    if type(mapping) is dict and len(mapping) <= limit:
        # The common case (a module's registries): dict's own C-level items, and
        # the keys' types checked in C.
        if not mapping:
            return []
        try:
            items = list(mapping.items())
            if set(map(type, mapping)) == _STR_ONLY:
                return items
        except Exception:  # changed while read, or a key type with a hostile __hash__
            pass
    out = []
    for key, value in _dict_items(mapping, limit):
        if type(key) is str:  # the common case, without a call
            out.append((key, value))
        else:
            name = _plain_name(key)
            if name is not None:
                out.append((name, value))
    return out


def _dict_items(mapping: Any, limit: int) -> list[tuple[Any, Any]]:
    if not probe.is_a(mapping, dict):
        return []
    try:
        # dict's own C-level view: a subclass's items() is never called.
        return list(itertools.islice(dict.items(mapping), limit))
    except Exception:
        pass
    out: list[tuple[Any, Any]] = []  # changed during iteration (another thread)
    try:
        for key, value in dict.items(mapping):
            if len(out) >= limit:
                break
            out.append((key, value))
    except Exception:
        return out
    return out


def _child_step(container: str, name: str) -> tuple[str, Any]:
    if container in ("ModuleList", "Sequential") and name.isdigit():
        return ("item", int(name))
    if container == "ModuleDict" or not name.isidentifier():
        return ("item", name)
    return ("attr", name)


def _module_children(module: Any, limit: int) -> Iterator[tuple[tuple[str, Any], Any]]:
    state = probe.module_dict(module)
    container = probe.class_name(module)
    for name, child in _named_items(state.get("_modules"), limit):
        if child is not None:
            yield _child_step(container, name), child
    for slot in ("_parameters", "_buffers"):
        for name, tensor in _named_items(state.get(slot), limit):
            if tensor is not None:
                yield ("attr", name), tensor
    for name, value in _public_items(state, limit):
        if (
            probe.is_tensor(value)
            or probe.is_a(value, (list, tuple, dict))
            or probe.is_optimizer(value)
        ):
            yield ("attr", name), value


#: torch module class id -> (the class, its instances' usual attribute names).
_USUAL_ATTRIBUTES: dict[int, tuple[type, frozenset[str]]] = {}


def _only_usual_attributes(module: Any, state: dict) -> bool:
    """True when a torch module class's instance holds only the attributes its
    class always sets (``in_features``, ``eps``...): nothing for the attribute
    walk to find. Most modules of a big model are such (``nn.Linear``), and the
    check is one C-level key-set comparison.

    The usual set of a class is learnt from its first instance seen holding no
    tensor, list or dict outside the registries; an instance with any other
    attribute (``model.cache = ...`` on an ``nn.Linear``) is walked.
    """
    kind = type(module)
    known = _USUAL_ATTRIBUTES.get(id(kind))
    if known is not None and known[0] is kind:
        return state.keys() <= known[1]
    module_name = kind.__dict__.get("__module__", "")
    if not (isinstance(module_name, str) and module_name.startswith("torch.")):
        return False
    if all(
        key[:1] == "_" or id(type(value)) in _ATOM_IDS
        for key, value in _dict_items(state, 256)
        if type(key) is str
    ):
        _USUAL_ATTRIBUTES[id(kind)] = (kind, frozenset(k for k in state if type(k) is str))
    return False


def _public_items(state: Any, limit: int) -> list[tuple[str, Any]]:
    """A module's public instance attributes that may hold something: names not
    starting with ``_`` nor torch's machinery, atoms (ints, floats, strings)
    left out. Every module of a model pays this: ``nn.Module``'s own two dozen
    attributes (hooks, registries) are set aside in C, and only the rest is read."""
    base = _module_base_keys()
    if base and type(state) is dict:
        try:
            extra = state.keys() - base
        except Exception:  # a key with a hostile __hash__: the plain walk below
            extra = None
        if extra is not None:
            # In the __dict__'s order, so that names and reports do not depend on
            # string hashing.
            keys = list(extra) if len(extra) < 2 else [k for k in state if k in extra]
            return _public_of((k, state.get(k)) for k in keys[:limit])
    return _public_of(_dict_items(state, limit))


def _public_of(items: Iterable[tuple[Any, Any]]) -> list[tuple[str, Any]]:
    out = []
    for key, value in items:
        if type(key) is not str:
            key = _plain_name(key)
            if key is None:
                continue
        if key[:1] != "_" and id(type(value)) not in _ATOM_IDS and key not in _MODULE_INTERNALS:
            out.append((key, value))
    return out


_BASE_KEYS: list[Any] = [None, frozenset()]


def _module_base_keys() -> frozenset[Any]:
    """The attributes every ``nn.Module`` instance has (``training``, ``_parameters``,
    the hook dicts...), learnt from a bare ``nn.Module()`` of the torch imported."""
    torch = probe.torch_module()
    if torch is None:
        return frozenset()
    if _BASE_KEYS[0] is not torch:
        try:
            keys = frozenset(k for k in vars(torch.nn.Module()) if type(k) is str)
        except Exception:
            keys = frozenset()
        _BASE_KEYS[:] = [torch, keys]
    return _BASE_KEYS[1]


def _held_modules(value: Any, path: Path, limit: int) -> list[tuple[Path, Any]]:
    items = _container_items(value, limit) or []
    return [((*path, step), child) for step, child in items if probe.is_module(child)]


def _dispatch_device(device_map: Any) -> str:
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


def _optimizer_view(opt: Any) -> OptimizerView:
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
    for param, per_param in _dict_items(state.get("state"), 100_000):
        # State is keyed by parameter: any other key has no device to compare with.
        if not probe.is_tensor(param) or not probe.is_a(per_param, dict):
            continue
        for key, value in _named_items(per_param, 64):
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


def record_of(entry: Entry, limit: int = 200) -> ObjectRecord:
    """Turns one transient entry into a row of strings and numbers."""
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
    if entry.kind in ("tensor", "parameter", "buffer", "attribute", "optimizer state"):
        device, shape, dtype, nbytes, detail = entry.facts
        return ObjectRecord(
            device=device, shape=shape, dtype=dtype, nbytes=nbytes, detail=detail, **base
        )
    if entry.module is not None:
        shares = entry.module.shares()
        detail = _module_detail(entry.module)
        return ObjectRecord(
            device=_one_device(shares),
            nbytes=sum(s.nbytes for s in shares),
            shares=shares,
            detail=detail,
            **base,
        )
    if entry.optimizer is not None:
        shares = shares_of(entry.optimizer.params)
        params, state = len(entry.optimizer.params), len(entry.optimizer.state)
        detail = f"{plural(params, 'parameter')}, {plural(state, 'state tensor')}"
        return ObjectRecord(device=_one_device(shares), shares=shares, detail=detail, **base)
    items = _container_items(obj, limit + 1) or []
    children = (child for _, child in items[:limit] if id(type(child)) not in _ATOM_IDS)
    shares = shares_of(child for child in children if probe.is_tensor(child))
    size = _safe_len(obj)
    detail = plural(size, "item") if size >= 0 else ""
    if len(items) > limit:
        detail += f" (first {limit} scanned)"
    return ObjectRecord(
        device=_one_device(shares),
        nbytes=sum(s.nbytes for s in shares),
        shares=shares,
        detail=detail,
        **base,
    )


def _safe_len(obj: Any) -> int:
    for base in (list, tuple, dict):
        if probe.is_a(obj, base):
            return base.__len__(obj)
    return -1


def _one_device(shares: tuple[DeviceShare, ...]) -> str:
    if not shares:
        return ""
    return shares[0].device if len(shares) == 1 else "mixed"


def _module_detail(view: ModuleView) -> str:
    params = sum(1 for _, _, kind in view.registered if kind == "parameter")
    buffers = len(view.registered) - params
    parts = [plural(params, "parameter")]
    if buffers:
        parts.append(plural(buffers, "buffer"))
    if view.attributes:
        parts.append(plural(len(view.attributes), "unregistered tensor"))
    if view.dispatch_device:
        parts.append("dispatched (hf_device_map)")
    return ", ".join(parts)
