"""How a scan walks objects: which are leaves, containers or modules, and their
children, read without running user code (no ``__getattr__``, ``__iter__`` or
``__len__`` of a user class, no ``repr``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ipydevice._debug import contain
from ipydevice.collect import probe
from ipydevice.collect.paths import Path, is_key

SKIP_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython"})

#: Module attributes that are torch's own machinery, not user state.
_MODULE_INTERNALS = frozenset({"_parameters", "_buffers", "_modules", "training"})

UNWALKED_TYPES = (str, bytes, bytearray, int, float, complex, bool, type(None), range)

#: ids of those exact types: ``id(type(obj)) in ATOM_IDS`` answers "nothing to
#: scan here" without comparing or hashing a (possibly hostile) class. The common
#: leaves of big containers (ints, floats, strings) take this fast path.
ATOM_IDS = frozenset(id(kind) for kind in UNWALKED_TYPES)

_STR_ONLY = {str}


def is_atom(obj: Any) -> bool:
    """An exact int, float, str, ...: nothing to scan, decided by type identity."""
    return id(type(obj)) in ATOM_IDS


def kind_of(obj: Any) -> str | None:
    if is_atom(obj):
        return None
    if probe.is_tensor(obj):
        return "parameter" if probe.class_name(obj) == "Parameter" else "tensor"
    if probe.is_module(obj):
        return "module"
    if probe.is_optimizer(obj):
        return "optimizer"
    if is_container(obj):
        return "container"
    return None


def _own_to(kind: type) -> bool:
    """The class defines ``to`` (found in the class dicts along its MRO, no metaclass
    asked): a batch object whose ``.to()`` returns it moved."""
    return callable(probe.class_attribute(kind, "to"))


def is_to_batch(obj: Any) -> bool:
    """An object of the user's or a library's with its own ``.to()`` and tensors in
    its ``__dict__`` (not a tensor, module or optimizer, not a class): naming walks
    look inside it, and a fix moves it whole (``inputs = inputs.to(device)``)."""
    return (
        not probe.is_tensor(obj)
        and not probe.is_module(obj)
        and not probe.is_optimizer(obj)
        and not probe.is_a(obj, type)
        and _own_to(type(obj))
    )


def is_container(obj: Any) -> bool:
    kind = type(obj)
    if issubclass(kind, (dict, list, tuple)):
        return True
    try:
        if issubclass(kind, Mapping) and callable(probe.class_attribute(kind, "to")):
            return True
        # Class attributes read from the class dicts: a metaclass's
        # __getattribute__ may raise, exit or sleep (is_dataclass would run it).
        return probe.is_dataclass_type(kind) and not probe.is_a(obj, type)
    except BaseException as caught:
        contain(caught)
        return False


SKIP, LEAF, WALK = 0, 1, 2


def classify(obj: Any) -> tuple[int, bool]:
    """``(category, walks)``, from ``type(obj)`` only (``callable`` reads the type).

    ``walks``: :meth:`Scan._children` may find something inside (a module,
    optimizer, container, mapping or dataclass). ``category``, for a namespace
    value: :data:`SKIP` for what is never named (atoms, classes, functions),
    :data:`WALK` when it walks, else :data:`LEAF` (a tensor: named, not walked).
    """
    kind = type(obj)
    if id(kind) in ATOM_IDS:
        return SKIP, False
    walks = walkable(obj)
    if probe.is_a(obj, type) or (callable(obj) and not probe.is_module(obj)):
        return SKIP, walks
    return (WALK if walks else LEAF), walks


def walkable(obj: Any) -> bool:
    if probe.is_tensor(obj) or probe.is_a(obj, UNWALKED_TYPES):
        return False
    if probe.is_module(obj) or probe.is_optimizer(obj):
        return True
    kind = type(obj)
    try:
        return (
            issubclass(kind, (list, tuple, dict, Mapping))
            or probe.is_dataclass_type(kind)
            or is_to_batch(obj)
        )
    except BaseException as caught:
        contain(caught)
        return False


def container_items(obj: Any, limit: int) -> list[tuple[tuple[str, Any], Any]] | None:
    """Up to ``limit`` (step, child) pairs of a container, or None if not one."""
    kind = type(obj)
    try:
        fields = probe.class_attribute(kind, "_fields") if issubclass(kind, tuple) else None
        if fields is not None:
            # range() bounds the walk: _fields may be endless, the tuple huge.
            triples = zip(range(limit), fields, tuple.__iter__(obj), strict=False)
            named = ((plain_name(name), value) for _, name, value in triples)
            return [(("attr", n), value) for n, value in named if n is not None]
        if issubclass(kind, (list, tuple)):
            values = list.__iter__(obj) if issubclass(kind, list) else tuple.__iter__(obj)
            # zip stops at range's end without pulling an item past the limit.
            pairs = zip(range(limit), values, strict=False)
            return [(("item", index), value) for index, value in pairs]
        if issubclass(kind, dict):
            return [(("item", k), v) for k, v in keyed_items(obj, limit)]
        if issubclass(kind, Mapping):
            data = probe.module_dict(obj).get("data")
            if probe.is_a(data, dict):
                return [(("item", k), v) for k, v in keyed_items(data, limit)]
            return None
        if probe.is_dataclass_type(kind):
            names = probe.dataclass_field_names(kind)[:limit]
            state = probe.module_dict(obj)
            return [(("attr", n), state[n]) for n in names if n in state]
        if is_to_batch(obj):
            state = probe.module_dict(obj)
            return [
                (("attr", n), v)
                for n, v in keyed_items(state, limit)
                if type(n) is str and n.isidentifier() and not n.startswith("_")
            ]
    except BaseException as caught:
        contain(caught)
        return None
    return None


def plain_key(key: Any) -> str | int | None:
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


def plain_name(key: Any) -> str | None:
    """An attribute or namespace name as an exact ``str``, else None."""
    name = plain_key(key)
    return name if type(name) is str else None


def keyed_items(mapping: Any, limit: int) -> list[tuple[str | int, Any]]:
    """Dict items whose keys can be written as literals, keys made plain."""
    out = []
    for key, value in dict_items(mapping, limit):
        plain = plain_key(key)
        if plain is not None and is_key(plain):
            out.append((plain, value))
    return out


def named_items(mapping: Any, limit: int) -> list[tuple[str, Any]]:
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
        except BaseException as caught:  # changed while read, or a key type with a hostile __hash__
            contain(caught)
            pass
    out = []
    for key, value in dict_items(mapping, limit):
        if type(key) is str:  # the common case, without a call
            out.append((key, value))
        else:
            name = plain_name(key)
            if name is not None:
                out.append((name, value))
    return out


def dict_items(mapping: Any, limit: int) -> list[tuple[Any, Any]]:
    if not probe.is_a(mapping, dict):
        return []
    try:
        # dict's own C-level view: a subclass's items() is never called.
        return list(itertools.islice(dict.items(mapping), limit))
    except BaseException as caught:
        contain(caught)
        pass
    out: list[tuple[Any, Any]] = []  # changed during iteration (another thread)
    try:
        for key, value in dict.items(mapping):
            if len(out) >= limit:
                break
            out.append((key, value))
    except BaseException as caught:
        contain(caught)
        return out
    return out


def child_step(container: str, name: str) -> tuple[str, Any]:
    if container in ("ModuleList", "Sequential") and name.isdigit():
        return ("item", int(name))
    if container == "ModuleDict" or not name.isidentifier():
        return ("item", name)
    return ("attr", name)


def module_children(module: Any, limit: int) -> Iterator[tuple[tuple[str, Any], Any]]:
    state = probe.module_dict(module)
    container = probe.class_name(module)
    for name, child in named_items(state.get("_modules"), limit):
        if child is not None:
            yield child_step(container, name), child
    for slot in ("_parameters", "_buffers"):
        for name, tensor in named_items(state.get(slot), limit):
            if tensor is not None:
                yield ("attr", name), tensor
    for name, value in public_items(state, limit):
        if (
            probe.is_tensor(value)
            or probe.is_a(value, (list, tuple, dict))
            or probe.is_optimizer(value)
        ):
            yield ("attr", name), value


#: torch module class id -> (the class, its instances' usual attribute names).
USUAL_ATTRIBUTES: dict[int, tuple[type, frozenset[str]]] = {}


def only_usual_attributes(module: Any, state: dict) -> bool:
    """True when a torch module class's instance holds only the attributes its
    class always sets (``in_features``, ``eps``...): nothing for the attribute
    walk to find. Most modules of a big model are such (``nn.Linear``), and the
    check is one C-level key-set comparison.

    The usual set of a class is learnt from its first instance seen holding no
    tensor, list or dict outside the registries; an instance with any other
    attribute (``model.cache = ...`` on an ``nn.Linear``) is walked.
    """
    kind = type(module)
    known = USUAL_ATTRIBUTES.get(id(kind))
    if known is not None and known[0] is kind:
        return state.keys() <= known[1]
    if not probe.class_module(kind).startswith("torch."):
        return False
    if all(
        key[:1] == "_" or id(type(value)) in ATOM_IDS
        for key, value in dict_items(state, 256)
        if type(key) is str
    ):
        USUAL_ATTRIBUTES[id(kind)] = (kind, frozenset(k for k in state if type(k) is str))
    return False


def public_items(state: Any, limit: int) -> list[tuple[str, Any]]:
    """A module's public instance attributes that may hold something: names not
    starting with ``_`` nor torch's machinery, atoms (ints, floats, strings)
    left out. Every module of a model pays this: ``nn.Module``'s own two dozen
    attributes (hooks, registries) are set aside in C, and only the rest is read."""
    base = module_base_keys()
    if base and type(state) is dict:
        try:
            extra = state.keys() - base
        except BaseException as caught:  # a key with a hostile __hash__: the plain walk below
            contain(caught)
            extra = None
        if extra is not None:
            # In the __dict__'s order, so that names and reports do not depend on
            # string hashing.
            keys = list(extra) if len(extra) < 2 else [k for k in state if k in extra]
            return public_of((k, state.get(k)) for k in keys[:limit])
    return public_of(dict_items(state, limit))


def public_of(items: Iterable[tuple[Any, Any]]) -> list[tuple[str, Any]]:
    out = []
    for key, value in items:
        if type(key) is not str:
            key = plain_name(key)
            if key is None:
                continue
        if key[:1] != "_" and id(type(value)) not in ATOM_IDS and key not in _MODULE_INTERNALS:
            out.append((key, value))
    return out


BASE_KEYS: list[Any] = [None, frozenset()]


def module_base_keys() -> frozenset[Any]:
    """The attributes every ``nn.Module`` instance has (``training``, ``_parameters``,
    the hook dicts...), learnt from a bare ``nn.Module()`` of the torch imported."""
    torch = probe.torch_module()
    if torch is None:
        return frozenset()
    if BASE_KEYS[0] is not torch:
        try:
            keys = frozenset(k for k in vars(torch.nn.Module()) if type(k) is str)
        except BaseException as caught:
            contain(caught)
            keys = frozenset()
        BASE_KEYS[:] = [torch, keys]
    return BASE_KEYS[1]


def held_modules(value: Any, path: Path, limit: int) -> list[tuple[Path, Any]]:
    items = container_items(value, limit) or []
    return [((*path, step), child) for step, child in items if probe.is_module(child)]
