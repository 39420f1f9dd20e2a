"""How a scan walks objects: which are leaves, containers or modules, and their
children, read without running user code (no ``__getattr__``, ``__iter__`` or
``__len__`` of a user class, no ``repr``).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import types
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

from ipydevice._debug import contain
from ipydevice.code.statements import code_tree
from ipydevice.collect import holders, probe
from ipydevice.collect.holders.base import own_attribute
from ipydevice.collect.paths import Path, is_name
from ipydevice.collect.reading import dict_items, named_items, plain_name

SKIP_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython"})

#: the class of ``functools.lru_cache``'s (and ``functools.cache``'s) wrappers
CACHED: Any = type(functools.lru_cache(maxsize=None)(lambda: None))


def is_root_kind(kind: type) -> bool:
    """Whether a namespace value of type ``kind`` is a root no walk enters, looked in
    by name (collect/reach.py): a class, a module or a ``functools`` cache."""
    return kind is CACHED or kind is types.ModuleType or issubclass(kind, type)


#: Module attributes that are torch's own machinery, not user state.
_MODULE_INTERNALS = frozenset({"_parameters", "_buffers", "_modules", "training"})

UNWALKED_TYPES = (str, bytes, bytearray, int, float, complex, bool, type(None), range)

#: ids of those exact types: ``id(type(obj)) in ATOM_IDS`` answers "nothing to
#: scan here" without comparing or hashing a (possibly hostile) class. The common
#: leaves of big containers (ints, floats, strings) take this fast path.
ATOM_IDS = frozenset(id(kind) for kind in UNWALKED_TYPES)


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


def to_in_place(kind: type) -> bool:
    """Whether ``kind``'s own ``.to()`` moves the object in place and returns nothing
    (torch_pca's ``PCA.to(...) -> None``): declared to return None, or no ``return`` in
    its source gives a value. Read from the function and its source; nothing runs."""
    found = _IN_PLACE.get(id(kind))
    if found is not None and found[0] is kind:
        return found[1]
    method = own_attribute(kind, "to")
    answer = False
    try:
        if type(method) is types.FunctionType:
            declared = method.__annotations__.get("return", "?")
            parsed = code_tree(method.__code__, method.__globals__)
            answer = declared in (None, "None", type(None)) or (
                parsed is not None
                and not any(
                    isinstance(node, ast.Return)
                    and node.value is not None
                    and not (isinstance(node.value, ast.Constant) and node.value.value is None)
                    for node in ast.walk(parsed[0])
                )
            )
    except Exception as caught:  # an annotation that fails to evaluate: rebind, as before
        contain(caught)
    if len(_IN_PLACE) > 1024:
        _IN_PLACE.clear()
    _IN_PLACE[id(kind)] = (kind, answer)
    return answer


#: class id -> (the class, whether its own ``.to()`` moves it in place)
_IN_PLACE: dict[int, tuple[type, bool]] = {}


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
    """A holder kind applies (:mod:`ipydevice.collect.holders`): a list, dict,
    dataclass, attrs or pydantic model, closure, slotted or plain object."""
    if probe.is_tensor(obj) or probe.is_module(obj) or probe.is_optimizer(obj):
        return False
    return holders.holder_of(type(obj)) is not None


SKIP, LEAF, WALK = 0, 1, 2


def classify(obj: Any) -> tuple[int, bool]:
    """``(category, walks)``, from ``type(obj)`` only (``callable`` reads the type).

    ``walks``: :meth:`Scan._children` may find something inside (a module,
    optimizer or a holder kind). ``category``, for a namespace value:
    :data:`SKIP` for what is never named (atoms, classes, builtins), :data:`WALK`
    when it walks, else :data:`LEAF` (a tensor: named, not walked).
    """
    kind = type(obj)
    if id(kind) in ATOM_IDS:
        return SKIP, False
    walks = walkable(obj)
    if probe.is_a(obj, type) or (callable(obj) and not walks):
        return SKIP, walks
    return (WALK if walks else LEAF), walks


def walkable(obj: Any) -> bool:
    if probe.is_tensor(obj) or probe.is_a(obj, UNWALKED_TYPES):
        return False
    if probe.is_module(obj) or probe.is_optimizer(obj):
        return True
    return is_container(obj)


def container_items(obj: Any, limit: int) -> list[tuple[tuple[str, Any], Any]] | None:
    """Up to ``limit`` (step, child) pairs of a holder, or None if not one."""
    if probe.is_tensor(obj) or probe.is_module(obj) or probe.is_optimizer(obj):
        return None
    return holders.items_of(obj, limit)


#: module class id -> (a weak reference to the class, how its ``[]`` reads a submodule:
#: "number" (the name's number), "position", "key", or "" when it has no ``[]`` of
#: torch's containers). Weak: a class the user drops is not kept alive.
_INDEXING: dict[int, tuple[weakref.ref[type], str]] = {}


def indexing(kind: type) -> str:
    """How ``kind``'s ``[]`` finds a submodule, decided once per class by the
    ``__getitem__`` it inherits (no user code runs): torch's list-like containers
    take a number: a ``ModuleList`` (and its subclasses, such as the
    ``ParametrizationList`` of ``lin.parametrizations.weight``) reads the submodule
    registered under that number, a ``ParameterList`` the parameter, a
    ``Sequential`` the one at that position; a ``ModuleDict`` (and a
    ``ParameterDict``) takes the key; a class with a ``[]`` of its own,
    or none, is read through attributes (``getattr(block, '0')``)."""
    found = _INDEXING.get(id(kind))
    if found is not None and found[0]() is kind:
        return found[1]
    how = ""
    torch = probe.torch_module()
    getitem = own_attribute(kind, "__getitem__")
    if torch is not None and getitem is not None:
        nn = torch.nn
        if getitem in (nn.ModuleList.__getitem__, nn.ParameterList.__getitem__):
            how = "number"
        elif getitem is nn.Sequential.__getitem__:
            how = "position"
        elif getitem in (nn.ModuleDict.__getitem__, nn.ParameterDict.__getitem__):
            how = "key"
    if len(_INDEXING) > 1024:
        _INDEXING.clear()
    # (a class that takes no weak reference is decided again next time)
    with contextlib.suppress(TypeError):
        _INDEXING[id(kind)] = (weakref.ref(kind), how)
    return how


def child_step(
    kind: type, name: str, position: int, child: Any = None, how: str | None = None
) -> tuple[str, Any]:
    """The step from a module of class ``kind`` to its submodule registered as
    ``name``, the ``position``-th of its ``_modules``, as the user writes it and as
    it evaluates: ``layers[3]`` (a list-like container's position), ``heads['en']``
    (a dict-like one's key), ``encoder.block``, ``getattr(block, '0')``. ``how`` is
    ``indexing(kind)`` when the caller has it already."""
    if how is None:
        how = indexing(kind)
    if how == "number" and name.isdecimal() and str(int(name)) == name:
        return ("item", int(name))
    if how == "position" and not is_name(name):
        return ("item", position)
    if how == "key" and not (is_name(name) and _parametrizations(child)):
        return ("item", name)  # (torch's own ModuleDict of parametrizations reads by attribute:
    return ("attr", name)  # lin.parametrizations.weight[0], as its documentation writes it)


def registers(module: Any, tensor: Any) -> bool:
    """``tensor`` is one of ``module``'s own parameters or buffers (by identity)."""
    state = probe.module_dict(module)
    return any(
        type(table) is dict and any(t is tensor for t in dict.values(table))
        for table in (state.get("_parameters"), state.get("_buffers"))
    )


def tensor_step(how: str, name: str) -> tuple[str, Any]:
    """The step to a parameter registered as ``name`` in a module whose ``[]`` works
    as ``how`` says (:func:`indexing`): ``prompts[1]``, ``scales['en']``."""
    if how == "number" and name.isdecimal() and str(int(name)) == name:
        return ("item", int(name))
    return ("item", name) if how == "key" else ("attr", name)


def _parametrizations(child: Any) -> bool:
    """A ``ParametrizationList``: torch made the ``ModuleDict`` that holds it
    (``lin.parametrizations``), and its documentation reads it by attribute."""
    kind = type(child)
    return kind.__name__ == "ParametrizationList" and kind.__module__.startswith("torch.")


def module_children(module: Any, limit: int) -> Iterator[tuple[tuple[str, Any], Any]]:
    state = probe.module_dict(module)
    kind = type(module)
    for position, (name, child) in enumerate(named_items(state.get("_modules"), limit)):
        if child is not None:
            yield child_step(kind, name, position, child), child
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
