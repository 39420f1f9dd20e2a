"""Module views cut and spliced: a model's tree walked once per diagnosis.

The frames of a failing call hold the model, its block, its layer: each gets the
view :class:`~ipydevice.collect.scan.Scan` keeps of a module, but their trees
are walked once, the outermost first, the others cut out of its view (or, walked
before it, spliced into it). The failing chain is named by identity over the
registries (:func:`path_to`), however big the model.
"""

from __future__ import annotations

import itertools
from typing import Any

from ipydevice.collect import census, probe
from ipydevice.collect.entries import Entry, FactsCache, ModuleView, dispatch_device
from ipydevice.collect.paths import Path, format_path
from ipydevice.collect.walk import (
    child_step,
    held_modules,
    indexing,
    named_items,
    only_usual_attributes,
    public_items,
    tensor_step,
)
from ipydevice.settings import Settings

__all__ = ["ModuleWalks", "cut_view", "path_to", "splice"]

#: A module's registries of tensors, and the kind each gives its tensors.
_REGISTRIES = (("_parameters", "parameter"), ("_buffers", "buffer"))


class ModuleWalks:
    """The module walks of a :class:`~ipydevice.collect.scan.Scan` (its base)."""

    settings: Settings
    entries: dict[int, Entry]
    _facts: FactsCache
    _tensor_types: set[int]
    _walked: dict[int, tuple[Any, ModuleView]]
    _within: dict[int, tuple[Any, Path]]
    _unwalked: dict[int, list[Path]]

    def _note(self, text: str) -> None:
        raise NotImplementedError

    def _rebase(self, entry: Entry, path: Path) -> list[tuple[int, Entry]]:
        raise NotImplementedError

    def _module_view(self, owner: Entry) -> ModuleView:
        module, path = owner.obj, owner.path
        view = self._known_view(module)
        if view is None:
            view = self._walk_module(module)
        if view.truncated:
            limit = self.settings.max_modules
            self._note(f"{format_path(path)}: only the first {limit} submodules were scanned")
        for rel, kind, read, total in view.unread:
            self._note(census.unread_note(format_path((*path, *rel)), kind, read, total))
        for rel, tensor, kind in view.registered:
            self._record_part(tensor, (*path, *rel), owner, kind)
        for rel, tensor, _ in view.attributes:
            self._record_part(tensor, (*path, *rel), owner, "attribute")
        held = [(rel, module) for _, members, _ in view.plain_lists for rel, module in members]
        entries = self.entries  # (few of a model's modules are entries: the frames' own)
        for rel, module in [*view.submodules, *held]:
            if id(module) in entries:
                self._adopt(module, (*path, *rel), owner)
        return view

    def _walk_module(self, module: Any) -> ModuleView:
        """The tree of ``module``, depth first, up to ``max_modules`` submodules."""
        view = ModuleView(placement=self._facts.placement)
        count = 0
        stack: list[tuple[Any, Path]] = [(module, ())]
        seen: set[int] = set()
        limit = self.settings.max_modules
        entries, level, submodules = self.entries, self._module_level, view.submodules
        while stack:
            current, rel = stack.pop()
            key = id(current)
            if key in seen:
                continue
            seen.add(key)
            # A submodule this scan has walked already (the frames are scanned
            # innermost first: a layer, then its block, then the model) is spliced
            # in, not walked again: a model costs its modules once, however deep
            # the failing chain.
            inner = entries.get(key) if rel else None
            done = inner.module if inner is not None and inner.obj is current else None
            if done is not None:
                submodules.append((rel, current))
                splice(view, done, rel)
                seen.update(id(m) for _, m in done.submodules)
                view.truncated |= done.truncated
                continue
            count += 1
            if count > limit:
                view.truncated = True
                # where the walk stopped: a subtree above none of them is whole
                self._unwalked[id(view)] = [rel, *(r for _, r in stack)]
                break
            children = level(current, rel, view)
            if rel:
                submodules.append((rel, current))
            if children:
                stack.extend(reversed(children))
        census.settle(view)
        return view

    def prewalk(self, module: Any) -> None:
        """Walks ``module``, the outermost module of the failing call, before the
        frames inside it are scanned: the views of the modules it holds (the
        failing block, its layer) are then cut out of its view, not walked again,
        so a model costs ``max_modules`` however deep the failing chain."""
        if id(module) in self._walked or id(module) in self.entries or not probe.is_module(module):
            return
        view = self._walk_module(module)
        self._walked[id(module)] = (module, view)
        for rel, sub in view.submodules:
            self._within.setdefault(id(sub), (module, rel))

    def _known_view(self, module: Any) -> ModuleView | None:
        """The view :meth:`prewalk` made of ``module``, or cut out of the one it made
        of a module holding it; None when neither holds it."""
        walked = self._walked.get(id(module))
        if walked is not None and walked[0] is module:
            return walked[1]
        within = self._within.get(id(module))
        if within is None:
            return None
        top, rel = within
        whole = self._walked[id(top)][1]
        cut = any(r[: len(rel)] == rel for r in self._unwalked.get(id(whole), ()))
        return cut_view(whole, rel, module, cut)

    def adopt_chain(self, modules: list[Any]) -> None:
        """Names the modules of the failing call from its frames' ``self`` chain,
        outermost first: each is found among the submodules of the one before (two
        levels down at most: ``self.layers[3]``), by identity, at C speed, however
        big the model. A model walked only up to ``max_modules`` still names the
        layer that failed (``model.layers[31]``)."""
        for outer, inner in itertools.pairwise(modules):
            entry = self.entries.get(id(inner))
            above = self.entries.get(id(outer))
            if entry is None or above is None or entry.owner is not None or entry.named:
                continue
            rel = path_to(outer, inner, self.settings.max_items)
            if rel is not None:
                self._adopt(inner, (*above.path, *rel), above)

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
            view.dispatch_device = dispatch_device(state.get("hf_device_map"))
        limit = self.settings.max_items
        registered = view.registered
        tensor_types = self._tensor_types
        cls = type(module)
        indexed = indexing(cls)  # (``prompts[1]`` of a ParameterList, ``layers[3]``)
        for slot, kind in _REGISTRIES:
            table = state.get(slot)
            if type(table) is dict and not table:
                continue  # an empty registry (most modules' buffers): no call
            how = indexed if kind == "parameter" else ""
            for name, tensor in named_items(table, limit):
                if tensor is None:
                    continue  # ``bias=False`` registers None
                if id(type(tensor)) in tensor_types or self._is_tensor(tensor):
                    step = tensor_step(how, name) if how else ("attr", name)
                    registered.append(((*rel, step), tensor, kind))
            if type(table) is dict and len(table) > limit:
                self._count_rest(table, rel, kind, limit, view)
        children: list[tuple[Any, Path]] = []
        table = state.get("_modules")
        submodules = named_items(table, limit) if type(table) is not dict or table else ()
        if type(table) is dict and len(table) > limit:
            view.unread.append((rel, "submodule", limit, len(table)))
        if submodules:
            for position, (name, child) in enumerate(submodules):
                if child is not None:
                    step = child_step(cls, name, position, child, indexed)
                    children.append((child, (*rel, step)))
        if only_usual_attributes(module, state):
            return children  # nn.Linear & co. with nothing the user added
        for name, value in public_items(state, limit):
            if probe.is_tensor(value):
                view.attributes.append(((*rel, ("attr", name)), value, module))
            elif probe.is_a(value, (list, tuple, dict)):
                view.held.append(((*rel, ("attr", name)), value))
                held = held_modules(value, (*rel, ("attr", name)), limit)
                if held:
                    view.plain_lists.append(((*rel, ("attr", name)), held, module))
            elif probe.is_optimizer(value):
                view.held.append(((*rel, ("attr", name)), value))
        return children

    def _count_rest(
        self, table: dict[str, Any], rel: Path, kind: str, limit: int, view: ModuleView
    ) -> None:
        """The tensors of a registry past ``limit``, counted (:mod:`ipydevice.collect.census`)."""
        done = getattr(self, "_counted_tensors", 0)
        budget = self._facts_budget()
        fast = self._tensor_types

        def is_tensor(obj: Any) -> bool:
            return id(type(obj)) in fast or self._is_tensor(obj)

        left = census.LIMIT - done
        self._counted_tensors = done + census.count_rest(
            table, rel, kind, limit, view, is_tensor, budget, left
        )

    def _facts_budget(self) -> probe.Budget:
        raise NotImplementedError

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


def cut_view(whole: ModuleView, rel: Path, module: Any, cut: bool) -> ModuleView:
    """The view of ``module``, the submodule at ``rel`` of the module ``whole``
    views, out of ``whole``; ``cut``: the walk stopped inside it."""
    size = len(rel)
    view = ModuleView(placement=whole.placement, truncated=cut)
    view.dispatch_device = dispatch_device(probe.module_dict(module).get("hf_device_map"))
    view.registered = [(r[size:], t, k) for r, t, k in whole.registered if r[:size] == rel]
    view.attributes = [(r[size:], t, m) for r, t, m in whole.attributes if r[:size] == rel]
    view.submodules = [
        (r[size:], m) for r, m in whole.submodules if r[:size] == rel and len(r) > size
    ]
    view.held = [(r[size:], v) for r, v in whole.held if r[:size] == rel]
    view.plain_lists = [
        (r[size:], [(p[size:], m) for p, m in members], holder)
        for r, members, holder in whole.plain_lists
        if r[:size] == rel
    ]
    view.counted = [(r[size:], k, d, c, b) for r, k, d, c, b in whole.counted if r[:size] == rel]
    view.unread = [(r[size:], k, n, t) for r, k, n, t in whole.unread if r[:size] == rel]
    view.examples = [(r[size:], t, k, d, b) for r, t, k, d, b in whole.examples if r[:size] == rel]
    census.settle(view)
    return view


def splice(view: ModuleView, done: ModuleView, rel: Path) -> None:
    """What ``done`` (the view of the submodule at ``rel``) holds, into ``view``."""
    view.registered += [((*rel, *r), t, kind) for r, t, kind in done.registered]
    view.attributes += [((*rel, *r), t, m) for r, t, m in done.attributes]
    view.submodules += [((*rel, *r), m) for r, m in done.submodules]
    view.held += [((*rel, *r), v) for r, v in done.held]
    view.plain_lists += [
        ((*rel, *r), [((*rel, *p), m) for p, m in members], holder)
        for r, members, holder in done.plain_lists
    ]
    view.counted += [((*rel, *r), k, d, c, b) for r, k, d, c, b in done.counted]
    view.unread += [((*rel, *r), k, n, t) for r, k, n, t in done.unread]
    view.examples += [((*rel, *r), t, k, d, b) for r, t, k, d, b in done.examples]
    view.reset()


def path_to(outer: Any, inner: Any, limit: int) -> Path | None:
    """The steps from module ``outer`` to its submodule ``inner``, one or two levels
    down, found by identity over the registries (no user code, no ``__eq__``)."""
    level: list[tuple[Path, Any]] = [((), outer)]
    for _ in range(2):
        below: list[tuple[Path, Any]] = []
        for rel, module in level:
            children = probe.module_dict(module).get("_modules")
            if type(children) is not dict:
                continue
            try:
                index = list(map(id, dict.values(children))).index(id(inner))
            except ValueError:
                if not rel:  # the containers one level down (a ModuleList of layers)
                    kind = type(module)
                    below += [
                        ((child_step(kind, name, position, child),), child)
                        for position, (name, child) in enumerate(
                            itertools.islice(dict.items(children), limit)
                        )
                        if child is not None
                    ]
                continue
            name = list(dict.keys(children))[index]
            return (*rel, child_step(type(module), name, index))
        level = below
    return None
