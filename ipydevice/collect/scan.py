"""Bounded walks over live objects: tensors, modules, optimizers, containers.

A :class:`Scan` is transient: while one diagnosis or inventory runs it holds the
objects it was given, then :meth:`Scan.records` turns what it saw into
:class:`~ipydevice.model.ObjectRecord` rows (strings and numbers) and the scan is
dropped. Every walk is bounded by :mod:`ipydevice.settings` (objects visited,
items per container, depth, modules per tree) and reports truncation in
``notes``. All facts come from :mod:`ipydevice.collect.probe`, which reads metadata only.

Names follow what the user would type: a namespace path when one reaches the
object (``batch['input_ids']``, ``model.encoder.layers[3].cache``), else the local
name and its function (``pos in PosEnc.forward``).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ipydevice._debug import contain
from ipydevice.collect import probe
from ipydevice.collect.entries import (
    Entry,
    FactsCache,
    ModuleView,
    OptimizerView,
    optimizer_view,
    reads_part_of,
    record_of,
    shares_of,
)
from ipydevice.collect.namespace import read_slice
from ipydevice.collect.paths import Path, format_path
from ipydevice.collect.views import ModuleWalks
from ipydevice.collect.walk import (
    ATOM_IDS,
    SKIP,
    UNWALKED_TYPES,
    WALK,
    classify,
    container_items,
    is_container,
    is_root_kind,
    is_to_batch,
    kind_of,
    module_children,
    plain_name,
)
from ipydevice.model import ObjectRecord
from ipydevice.settings import Settings

# fmt: off
__all__ = [
    "SKIP_NAMES", "Entry", "ModuleView", "OptimizerView", "Scan", "descends", "record_of",
    "shares_of",
]
# fmt: on

#: Namespace names that are IPython's own bookkeeping, never the user's objects.
SKIP_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython"})

_BUDGET_NOTE = "scan stopped after {} objects"


#: One type in this many decides how :meth:`Scan._picked` reads a namespace.
_SAMPLE = 64


#: Steps into a function's storage: named as it reads them (``keep in restrict``).
_FUNCTION_SLOTS = (("attr", "__closure__"), ("attr", "__defaults__"), ("attr", "__kwdefaults__"))


class Scan(ModuleWalks):
    """Collects entries from frames and namespaces, then names and records them."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.entries: dict[int, Entry] = {}
        self.notes: list[str] = []
        self._visits = 0
        self._warned: set[str] = set()
        self._walk_kinds: dict[int, tuple[type, int, bool]] = {}
        self._tensor_types: set[int] = set()
        #: module trees walked ahead (:meth:`prewalk`), and where their submodules are
        self._walked: dict[int, tuple[Any, ModuleView]] = {}
        self._within: dict[int, tuple[Any, Path]] = {}
        self._unwalked: dict[int, list[Path]] = {}
        #: wall-clock time for the whole scan (see probe.Budget): the diagnosis',
        #: inventory's or checkup's (probe.metadata_reads), else from now
        self.budget = probe.active_budget() or probe.Budget(settings.time_budget)
        self._facts = FactsCache(self.budget, self.notes)
        self._roots: tuple[Mapping[str, Any], list[tuple[str, Any, int]]] | None = None
        self._slice: tuple[Mapping[str, Any], list[Any], list[Any], int] | None = None
        self._types: tuple[list[Any], list[type]] | None = None  # the slice's value types
        self._classes: tuple[list[Any], list[int]] | None = None  # its roots' indexes
        #: the names the failing code reads (a cell's globals, its functions'):
        #: looked up in the namespace before any other name
        self.read_names: dict[str, None] = {}
        #: ids of the tensors the failing library line read, in order (collect.failing)
        self.met: list[int] = []
        #: the user's names this scan was named from (for families that look there)
        self.namespace: Mapping[str, Any] = {}

    # -- collecting ---------------------------------------------------------------

    def add(self, obj: Any, path: Path, where: str, **flags: Any) -> Entry | None:
        """Adds ``obj`` (and what it holds) unless already seen; returns its entry."""
        entry = self.entries.get(id(obj))
        if entry is not None:
            entry.operand |= bool(flags.get("operand"))
            entry.consumed |= bool(flags.get("consumed"))
            entry.on_line |= bool(flags.get("on_line"))
            entry.is_index |= bool(flags.get("is_index"))
            entry.frame = min(entry.frame, int(flags.get("frame", 1_000)))
            if (
                flags.get("user")
                and not entry.named
                and not entry.parent_kind
                and (not entry.user or _caller_names_self(entry.path, path))
            ):
                # A user's frame names it better than torch's (``batch in predict``, not
                # ``input in Linear.forward``), a caller's better than ``self``; its parts follow.
                for _, other in self._rebase(entry, path):
                    other.where = where
                entry.where, entry.user = where, True
            return entry
        kind = kind_of(obj)
        if kind is None:
            return None
        entry = Entry(obj, path, where, kind, order=len(self.entries), shared=self._facts, **flags)
        self.entries[id(obj)] = entry
        if kind == "module":
            entry.module = self._module_view(entry)
        elif kind == "optimizer":
            entry.optimizer = optimizer_view(obj)
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
            if id(type(child)) in ATOM_IDS:
                continue
            seen = self.entries.get(id(child))
            if seen is not None:
                self._claim(seen, parent, step, inherited)
                continue
            if self._spent():
                return
            if kind_of(child) is None:
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
                entry.owner, entry.container = parent, parent.obj

    def _claim(self, entry: Entry, parent: Entry, step: tuple[str, Any], flags: dict) -> None:
        """An object seen before (torch's frames hold ``batch[key]`` as ``input``)
        found again in a container of the user's: the container names it, as the
        user wrote it, and it shares the container's place on the failing line."""
        if entry is parent or entry.named or entry.parent_kind or entry.owner is not None:
            return
        if parent.user and not entry.user:
            entry.path, entry.where, entry.user = (*parent.path, step), parent.where, True
            entry.owner, entry.container = parent, parent.obj
        elif reads_part_of(entry, parent, step):
            # ``self.table`` of the failing line is the table ``self`` holds: one
            # path, so that naming ``self`` (``helper``) names it (``helper.table``).
            entry.path, entry.owner, entry.container = (*parent.path, step), parent, parent.obj
        entry.operand |= bool(flags.get("operand"))
        entry.on_line |= bool(flags.get("on_line"))

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
        # A module's buffer or parameter the user also holds under a name of their own
        # (``w`` of ``nn.CrossEntropyLoss(weight=w)``) is named through its owner
        # (``criterion.weight``), which is what moves it; the own name is an alias,
        # and the name when the owner has none.
        deferred: list[tuple[Entry, str]] = []
        if not deep:
            found = self._namespace_items(namespace, wanted)
            # A deep search of the same namespace (later in this diagnosis) starts
            # from its containers and modules: kept, so the namespace is read once.
            self._roots = (namespace, [item for item in found if item[2] == WALK])
            for name, value, _ in found:
                if id(value) in wanted:  # (two names for one object: the first wins)
                    entry = self.entries[id(value)]
                    if _owned_part(entry):
                        entry.alias = entry.alias or name
                        continue
                    wanted -= self._rename(entry, (("name", name),))
            return
        # Named when first reached (breadth first: the shortest path). Only what has
        # something below it is queued, once: an item costs one visit, the queue never
        # holds more than the visits left, and 10,000 tensors spend none.
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
            if key in wanted and category != SKIP:
                entry = self.entries[key]
                if _owned_part(entry):
                    entry.alias = entry.alias or name
                    deferred.append((entry, name))
                else:
                    wanted -= self._rename(entry, (("name", name),))
            if key in queued or category != WALK:
                continue
            if len(queue) >= room:
                dropped = True  # it could never be visited within the budget
                continue
            queued.add(key)
            queue.append((value, (("name", name),), 0))
        head = 0
        max_depth = self.settings.max_depth
        # Every child looked at costs: at most max_objects in one search, so a search
        # for what no name reaches costs the same in models of 10k and 100k modules.
        looks = self.settings.max_objects
        while head < len(queue) and wanted and looks > 0 and not self._spent():
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
                    if id(type(child)) not in ATOM_IDS  # an int is never wanted, holds nothing
                )
                # (a batch object with its own .to() holds its tensors too: the fix
                # moves it whole)
                container = obj if is_container(obj) or is_to_batch(obj) else None
            for steps, child in children:
                if looks <= 0:
                    dropped = True  # (a child left unread)
                    break
                looks -= 1
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
        if looks <= 0 and head < len(queue):
            dropped = True
        for entry, name in deferred:
            if not entry.named:  # its owner has no name of its own: the user's name it is
                self._rename(entry, (("name", name),))
        if dropped and wanted:
            self._note(_BUDGET_NOTE.format(self.settings.max_objects))

    def namespace_roots(self, namespace: Mapping[str, Any]) -> list[tuple[str, Any, int]] | None:
        """The public names of ``namespace`` with something inside (containers,
        modules, optimizers), as ``(name, value, category)``, as the top-level
        naming pass of this scan read them; None when no such pass read ``namespace``."""
        if self._roots is not None and self._roots[0] is namespace:
            return self._roots[1]
        return None

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
        """``(type, namespace category, walks)`` for ``obj`` (see :func:`classify`),
        decided once per type per scan: every test reads the type alone."""
        kind = type(obj)
        cached = self._walk_kinds.get(id(kind))
        if cached is None:
            # The type is kept beside its id so that the id cannot be reused
            # while this scan lives; the scan, and so the cache, is transient.
            cached = (kind, *classify(obj))
            self._walk_kinds[id(kind)] = cached
        return cached

    def _namespace_items(
        self, namespace: Mapping[str, Any], wanted: set[int]
    ) -> list[tuple[str, Any, int]]:
        """``(name, value, category)`` for the public names worth a look: the wanted
        objects and those with something inside (:data:`WALK`); the names the
        failing code reads first, then the rest in namespace order, as far as
        :meth:`_namespace_slice` reads.

        A namespace may hold 10,000 tensors beside a few models and batches, and
        this runs right after IPython's traceback has left the CPU caches cold:
        the names are picked at C speed (``map``/``compress``, no bytecode per
        name), each type classified once, and only the names picked cost Python.
        """
        keys, values, first = self._namespace_slice(namespace)
        types = self._slice_types(values)
        try:
            picked = self._picked(values, types, wanted)
        except BaseException as caught:  # a metaclass whose __hash__ raises: one name at a time
            contain(caught)
            picked = self._picked_slowly(values, wanted)
        kinds = self._walk_kinds
        out: list[tuple[str, Any, int]] = []
        for index in picked:
            key, value = keys[index], values[index]
            name = key if type(key) is str else plain_name(key)
            if name is None or name.startswith("_") or name in SKIP_NAMES:
                continue
            if index >= first and name in self.read_names:
                continue  # (read first already)
            out.append((name, value, kinds[id(types[index])][1]))
        return out

    def namespace_slice(
        self, namespace: Mapping[str, Any]
    ) -> tuple[list[Any], list[Any], list[type]]:
        """``(keys, values, types)`` of the names this scan reads of ``namespace`` (the
        failing code's first), read once per scan and namespace."""
        keys, values, _ = self._namespace_slice(namespace)
        return keys, values, self._slice_types(values)

    def root_indexes(self, values: list[Any]) -> list[int] | None:
        """Indexes of the classes, modules and caches in the slice's ``values`` the
        top-level naming pass found; None if no pass read them."""
        return self._classes[1] if self._classes and self._classes[0] is values else None

    def _slice_types(self, values: list[Any]) -> list[type]:
        cached = self._types
        if cached is None or cached[0] is not values:
            cached = self._types = (values, list(map(type, values)))
        return cached[1]

    def _namespace_slice(self, namespace: Mapping[str, Any]) -> tuple[list[Any], list[Any], int]:
        """``(keys, values, first)`` (:func:`~ipydevice.collect.namespace.read_slice`),
        read once per scan and namespace."""
        cached = self._slice
        if cached is not None and cached[0] is namespace:
            return cached[1], cached[2], cached[3]
        keys, values, first = read_slice(
            namespace, self.read_names, self.settings.max_names, self.budget, self.notes
        )
        self._slice = (namespace, keys, values, first)
        return keys, values, first

    def _picked(self, values: list[Any], types: list[type], wanted: set[int]) -> list[int]:
        """Indexes of the values that walk or are wanted, in namespace order, at C
        speed; hashes types. Where few names hold a walking or a wanted object's type
        (a million ints), only those get an ``id()`` (an int made for each: 20,000
        names, 0.8 ms); where most do (10,000 tensors), every name does, in one pass.
        A sample of the types decides which; both give the same indexes."""
        distinct = set(types)
        kinds = self._walk_kinds
        for kind in distinct:
            if id(kind) not in kinds:
                self._type_facts(values[types.index(kind)])  # one value decides a type
        walking = {kind for kind in distinct if kinds[id(kind)][1] == WALK}
        entries = self.entries
        sought = {type(entries[key].obj) for key in wanted if key in entries} & distinct
        # classes, modules and caches, which collect/reach.py looks in: found in this pass
        roots = {kind for kind in distinct if is_root_kind(kind)}
        looked, everywhere = walking | sought, range(len(values))
        if not looked and not roots:
            self._classes = (values, [])
            return []
        if sum(map(looked.__contains__, types[::_SAMPLE])) * 4 > len(types) // _SAMPLE:
            flags = map(wanted.__contains__, map(id, values))
            if walking or roots:
                flags = map(operator.or_, map((walking | roots).__contains__, types), flags)
            picked = list(itertools.compress(everywhere, flags))
        else:
            picked = list(itertools.compress(everywhere, map((looked | roots).__contains__, types)))
        self._classes = (values, [i for i in picked if types[i] in roots])
        return [i for i in picked if types[i] in walking or id(values[i]) in wanted]

    def _picked_slowly(self, values: list[Any], wanted: set[int]) -> list[int]:
        """:meth:`_picked` without hashing anything but ids."""
        picked = []
        for index, value in enumerate(values):
            category = self._type_facts(value)[1]
            if category == WALK or id(value) in wanted:
                picked.append(index)
        return picked

    def _rename(self, entry: Entry, path: Path) -> set[int]:
        old = entry.path
        if (
            len(old) == 1
            and old[0][0] == "local"
            and str(old[0][1]).isidentifier()
            and any(step in path for step in _FUNCTION_SLOTS)
            and "<" not in entry.where  # (a lambda has no name to say it by: its path)
        ):
            # a function's free variable or default, named as the function reads it
            entry.shown = f"{old[0][1]} in {entry.where}"
        # what held it on its old path does not on this one (a naming walk that
        # reaches it through a holder says so after)
        entry.named, entry.where, entry.container = True, "namespace", None
        renamed = {id(entry.obj)}
        for key, other in self._rebase(entry, path):
            other.named, other.where = True, "namespace"
            renamed.add(key)
        return renamed

    def _rebase(self, entry: Entry, path: Path) -> list[tuple[int, Entry]]:
        """Gives ``entry`` the path ``path``, and the unnamed entries it holds
        (recorded under its old path) the same prefix; returns those."""
        old = entry.path
        size = len(old)
        # Decided on the paths as they were, then moved: a chain is checked link by link.
        moved = [
            (key, other)
            for key, other in self.entries.items()
            if other is not entry
            and not other.named
            and other.path[:size] == old
            and _held_along(other, entry)
        ]
        entry.path = path
        for _, other in moved:
            other.path = (*path, *other.path[size:])
        return moved

    # -- children of one object -------------------------------------------------------

    def _children(self, obj: Any, path: Path) -> Iterator[tuple[tuple[str, Any], Any]]:
        if probe.is_tensor(obj) or probe.is_a(obj, UNWALKED_TYPES):
            return
        if probe.is_module(obj):
            yield from module_children(obj, self.settings.max_items)
            return
        if probe.is_optimizer(obj):
            yield ("attr", "state"), probe.module_dict(obj).get("state")
            return
        limit = self.settings.max_items
        items = container_items(obj, limit + 1)
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
        if self.budget.spent():
            if self.budget.note not in self.notes:  # (the facts cache may have noted it)
                self.notes.append(self.budget.note)
            return True
        return False

    def _facts_budget(self) -> probe.Budget:
        return self.budget

    def settled_notes(self) -> list[str]:
        """The notes, with what the time budget said since (a slow class, a stop
        in a later stage's read)."""
        for note in self.budget.said:
            if note not in self.notes:
                self.notes.append(note)
        return self.notes

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


_SELF: Path = (("local", "self"),)


def _caller_names_self(old: Path, new: Path) -> bool:
    """``old`` is a method's ``self`` and ``new`` a name of a frame further out (the
    caller's ``net`` of ``net(x)``): the name the user wrote."""
    return old == _SELF and len(new) == 1 and new != _SELF


def _unremarkable_part(entry: Entry) -> bool:
    owner = entry.owner
    if entry.parent_kind != "module" or entry.operand or owner is None or owner.module is None:
        return False
    return entry.device == owner.module.majority()


def _owned_part(entry: Entry) -> bool:
    """A module's registered tensor, reached from that module."""
    return entry.parent_kind == "module" and entry.owner is not None and entry.kind != "attribute"


def _held_along(entry: Entry, ancestor: Entry) -> bool:
    """``entry`` is held by ``ancestor`` along its path: each owner on the way up
    has a path that begins the path of what it holds. Frames share names (every
    method's ``self``): a layer recorded under its Sequential's ``self`` is not
    under the model's ``self`` just because both paths begin with ``self``."""
    current, seen = entry, 0
    while current is not ancestor:
        owner = current.owner
        if owner is None or seen >= 64 or current.path[: len(owner.path)] != owner.path:
            return False
        current, seen = owner, seen + 1
    return True


def descends(entry: Entry, ancestor: Entry) -> bool:
    """``ancestor`` is among the owners of ``entry``."""
    seen = 0
    owner = entry.owner
    while owner is not None and seen < 64:
        if owner is ancestor:
            return True
        owner, seen = owner.owner, seen + 1
    return False


#: What a naming walk does with a namespace value (see :func:`classify`).
