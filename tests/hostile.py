"""A corpus of hostile objects: what a real notebook namespace may hold.

ipydevice scans frames and namespaces it does not control. Everything here is
legal Python that someone, somewhere, keeps in a namespace: properties and
``__getattr__`` that raise or never end, lying ``__class__`` attributes, dunders
that raise, cycles, huge and deep containers, odd tensor subclasses, broken
modules and optimizers. A scan must neither crash, hang nor read data.

Tripwires. Every dunder that would read an object's *value* (``__repr__``,
``__str__``, ``__format__``, ``__bool__``, ``__eq__``, ``__hash__``, ``__len__``,
``__iter__``, ...) on the plain-Python hostiles records itself in
:data:`TOUCHED` and raises :class:`Touched`. The counter survives even when
ipydevice's guards swallow the exception, so a test asserts ``not TOUCHED``.

Growing the corpus: write a zero-argument factory and decorate it with
``@case("readable_id", *tags)``. Factories run once per test, so every test gets
fresh objects (and fresh big ones: nothing big is built at import time).

Tags:
    ``module``: the object is (or holds at top level) an nn.Module.
    ``tensor``: the object is a torch.Tensor (of some subclass).
    ``big``: large or deep; cheap to build but worth knowing about.

torch is imported here: this module is test-only.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import itertools
import sys
import types
import warnings
import weakref
from collections import Counter, UserDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import torch
from torch import nn

__all__ = [
    "CASES",
    "METADATA",
    "TOUCHED",
    "Case",
    "HostileStr",
    "KeyTripwire",
    "Spy",
    "Touched",
    "Tripwire",
    "Unwind",
    "assert_plain",
    "case",
    "plain_violations",
    "spy",
    "tripwired",
]


# -- tripwires ----------------------------------------------------------------------------

#: ``"ClassName.__dunder__" -> calls`` for every tripwire hit since the last clear.
TOUCHED: Counter[str] = Counter()


class Touched(Exception):
    """Raised by a tripwire. An ``Exception`` on purpose: ipydevice's guards may
    swallow it, and :data:`TOUCHED` still records the touch."""


def _trip(obj: Any, dunder: str) -> Any:
    TOUCHED[f"{type(obj).__qualname__}.{dunder}"] += 1
    raise Touched(f"{type(obj).__qualname__}.{dunder} was called")


#: Dunders that read or compare an object's value: a scan must call none of them.
TRIPWIRE_DUNDERS = (
    "__repr__",
    "__str__",
    "__format__",
    "__bool__",
    "__eq__",
    "__ne__",
    "__lt__",
    "__le__",
    "__gt__",
    "__ge__",
    "__hash__",
    "__len__",
    "__iter__",
    "__reversed__",
    "__contains__",
    "__getitem__",
    "__int__",
    "__float__",
    "__index__",
    "__bytes__",
    "__array__",
    "__dir__",
    "__reduce__",
    "__reduce_ex__",
    "__copy__",
    "__deepcopy__",
)


def _tripwire(name: str) -> Callable[..., Any]:
    def dunder(self: Any, *args: Any, **kwargs: Any) -> Any:
        return _trip(self, name)

    dunder.__name__ = name
    return dunder


def tripwired(cls: type) -> type:
    """Class decorator: every dunder in :data:`TRIPWIRE_DUNDERS` (not defined by
    the class itself) becomes a tripwire."""
    for name in TRIPWIRE_DUNDERS:
        if name not in cls.__dict__:
            setattr(cls, name, _tripwire(name))
    return cls


@tripwired
class Tripwire:
    """A plain object whose value-reading dunders are tripwires."""


class KeyTripwire(Tripwire):
    """A tripwire that can be a dict key (hashed by identity, as objects are)."""

    __hash__ = object.__hash__


@tripwired
class HostileStr(str):
    """A ``str`` subclass (a dict key, a device name) whose formatting trips.

    Hashing and equality stay ``str``'s so that it can be a dict key."""

    __hash__ = str.__hash__
    __eq__ = str.__eq__  # type: ignore[assignment]
    __ne__ = str.__ne__  # type: ignore[assignment]
    __contains__ = str.__contains__  # type: ignore[assignment]
    __len__ = str.__len__  # type: ignore[assignment]
    __iter__ = str.__iter__  # type: ignore[assignment]
    __getitem__ = str.__getitem__  # type: ignore[assignment]
    __reduce__ = str.__reduce__
    __reduce_ex__ = str.__reduce_ex__


# -- the registry ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One corpus entry: a readable id, a factory and tags."""

    id: str
    build: Callable[[], Any]
    tags: frozenset[str] = frozenset()


CASES: list[Case] = []


def case(name: str, *tags: str) -> Callable[[Callable[[], Any]], Callable[[], Any]]:
    """Registers a factory under ``name`` (ids must be unique)."""

    def register(factory: Callable[[], Any]) -> Callable[[], Any]:
        if any(c.id == name for c in CASES):
            raise ValueError(f"duplicate hostile case {name!r}")
        CASES.append(Case(name, factory, frozenset(tags)))
        return factory

    return register


#: Referents of weak proxies, kept alive for the process (small tensors).
_KEEP: list[Any] = []


def _quiet(factory: Callable[[], Any]) -> Any:
    """Runs ``factory`` with torch's prototype/deprecation warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return factory()


# -- attribute access ---------------------------------------------------------------------


@tripwired
class RaisingProperties:
    """``.device``, ``.shape``, ``.to`` and ``.data`` raise, like a half-built wrapper."""

    @property
    def device(self) -> Any:
        raise RuntimeError("device is not ready")

    @property
    def shape(self) -> Any:
        raise RuntimeError("shape is not ready")

    @property
    def to(self) -> Any:
        raise RuntimeError("to is not ready")

    @property
    def data(self) -> Any:
        raise RuntimeError("data is not ready")


@tripwired
class GetattrRaises:
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"no {name} here (and not an AttributeError)")


@tripwired
class GetattributeRaises:
    """Even ``obj.__dict__`` and ``obj.__class__`` raise through normal access."""

    def __getattribute__(self, name: str) -> Any:
        raise RuntimeError(f"__getattribute__({name!r})")


@tripwired
class GetattrSelf:
    """Every attribute is the object itself: ``obj.a.b.c... is obj``."""

    def __getattr__(self, name: str) -> Any:
        return self


@tripwired
class GetattrNew:
    """Every attribute is a new object of the same kind, forever."""

    def __getattr__(self, name: str) -> Any:
        return GetattrNew()


@tripwired
class LyingTensor:
    """Claims to be a tensor (``isinstance(obj, torch.Tensor)`` is True)."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return torch.Tensor

    device = "cuda:0"
    shape = (2,)


@tripwired
class LyingModule:
    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return nn.Module


@tripwired
class LyingDict:
    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return dict


@tripwired
class LyingClassRaises:
    """``isinstance(obj, X)`` reads ``__class__`` when ``type(obj)`` is no X: it raises."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        raise RuntimeError("who am I")


@tripwired
class DictPropertyRaises:
    @property  # type: ignore[misc]
    def __dict__(self) -> Any:
        raise RuntimeError("no __dict__ for you")


@tripwired
class HostileDict(dict):
    """A dict subclass whose Python-level methods all trip (C-level access is fine)."""

    def _trip_method(self, *args: Any, **kwargs: Any) -> Any:
        return _trip(self, "method")

    get = items = keys = values = copy = pop = setdefault = update = _trip_method  # type: ignore[assignment]

    __hash__ = None  # type: ignore[assignment]


class _Meta(type):
    """A metaclass whose class-level lookups raise: ``hasattr(cls, x)`` raises too."""

    def __getattr__(cls, name: str) -> Any:
        raise RuntimeError(f"class attribute {name!r} unavailable")


@tripwired
class HostileMetaInstance(metaclass=_Meta):
    pass


class _NamedMeta(type):
    """A metaclass whose classes report a tripwire as their ``__name__``."""

    @property
    def __name__(cls) -> Any:  # type: ignore[override]
        return HostileStr("Lying")


@tripwired
class HostileNameInstance(metaclass=_NamedMeta):
    pass


class _UnhashableMeta(type):
    """A metaclass whose classes cannot be hashed or compared: a set of types raises."""

    def __hash__(cls) -> int:
        raise RuntimeError("class hash unavailable")

    def __eq__(cls, other: object) -> bool:
        raise RuntimeError("class comparison unavailable")


@tripwired
class UnhashableClassInstance(metaclass=_UnhashableMeta):
    pass


@tripwired
class SimpleHolder:
    pass


@case("raising_properties")
def _raising_properties() -> Any:
    return RaisingProperties()


@case("getattr_raises")
def _getattr_raises() -> Any:
    return GetattrRaises()


@case("getattribute_raises")
def _getattribute_raises() -> Any:
    return GetattributeRaises()


@case("getattr_returns_self")
def _getattr_self() -> Any:
    return GetattrSelf()


@case("getattr_returns_new_forever")
def _getattr_new() -> Any:
    return GetattrNew()


@case("lying_class_tensor")
def _lying_tensor() -> Any:
    return LyingTensor()


@case("lying_class_module")
def _lying_module() -> Any:
    return LyingModule()


@case("lying_class_dict")
def _lying_dict() -> Any:
    return LyingDict()


@case("lying_class_raises")
def _lying_raises() -> Any:
    return LyingClassRaises()


@case("dunders_raise")
def _dunders() -> Any:
    return Tripwire()


@case("dict_property_raises")
def _dict_property() -> Any:
    return DictPropertyRaises()


@case("instance_dict_is_hostile_dict")
def _instance_dict_hostile() -> Any:
    obj = SimpleHolder()
    hostile = HostileDict()
    dict.__setitem__(hostile, "t", torch.ones(2))
    object.__setattr__(obj, "__dict__", hostile)
    return obj


@case("metaclass_getattr_raises")
def _meta_instance() -> Any:
    return HostileMetaInstance()


@case("metaclass_hash_raises")
def _unhashable_class_instance() -> Any:
    return UnhashableClassInstance()


@case("metaclass_name_property")
def _meta_name() -> Any:
    return [HostileNameInstance(), torch.ones(2)]


@case("class_with_hostile_metaclass")
def _meta_class_in_list() -> Any:
    # A class is skipped as a namespace value, but not inside a list.
    return [HostileMetaInstance, torch.ones(2)]


# -- dataclasses ----------------------------------------------------------------------------


@tripwired
@dataclass(eq=False)
class BatchWithRaisingProperty:
    inputs: Any
    labels: Any

    @property
    def device(self) -> Any:
        raise RuntimeError("mixed batch")


@tripwired
@dataclass(eq=False)
class BatchLyingList:
    """A dataclass whose ``__class__`` says ``list``."""

    inputs: Any

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return list


@tripwired
@dataclass(eq=False)
class BatchLyingRaises:
    inputs: Any

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        raise RuntimeError("who am I")


@tripwired
@dataclass(eq=False, slots=True)
class SlottedBatch:
    inputs: Any


@tripwired
@dataclass(eq=False)
class BatchDictRaises:
    inputs: Any

    @property  # type: ignore[misc]
    def __dict__(self) -> Any:
        raise RuntimeError("no __dict__")


@case("dataclass_raising_property")
def _dc_raising() -> Any:
    return BatchWithRaisingProperty(torch.ones(2, 3), torch.zeros(2, dtype=torch.long))


@case("dataclass_lying_class_list")
def _dc_lying_list() -> Any:
    return BatchLyingList(torch.ones(2))


@case("dataclass_lying_class_raises")
def _dc_lying_raises() -> Any:
    return BatchLyingRaises(torch.ones(2))


@case("dataclass_slots")
def _dc_slots() -> Any:
    return SlottedBatch(torch.ones(2))


@case("dataclass_dict_raises")
def _dc_dict_raises() -> Any:
    return BatchDictRaises(torch.ones(2))


@case("dataclass_hostile_instance_dict")
def _dc_hostile_dict() -> Any:
    batch = BatchWithRaisingProperty(torch.ones(2), torch.ones(2))
    hostile = HostileDict()
    dict.update(hostile, {"inputs": torch.ones(2), "labels": Tripwire()})
    object.__setattr__(batch, "__dict__", hostile)
    return batch


# -- containers -----------------------------------------------------------------------------


class Pair(NamedTuple):
    inputs: Any
    labels: Any


@tripwired
class HostileList(list):
    """A list subclass whose Python-level protocol trips."""

    __hash__ = None  # type: ignore[assignment]


@tripwired
class HostileTuple(tuple):
    """A tuple subclass pretending to be a namedtuple with endless ``_fields``."""

    _fields = itertools.repeat("field")


@tripwired
class HostileMapping(Mapping):
    """A Mapping with ``.to`` (so scans treat it as a batch) and tripping protocol."""

    # Defined in the body: ABCMeta decides abstractness when the class is made.
    __getitem__ = _tripwire("__getitem__")
    __iter__ = _tripwire("__iter__")
    __len__ = _tripwire("__len__")

    def to(self, *args: Any, **kwargs: Any) -> Any:
        return _trip(self, "to")


class BatchDict(UserDict):
    """transformers' BatchEncoding in miniature: a UserDict with ``.to``."""

    def to(self, device: Any) -> BatchDict:
        return BatchDict({k: v.to(device) for k, v in self.data.items()})


class Key(enum.IntEnum):
    INPUTS = 0
    LABELS = 1


@case("self_referencing_list")
def _self_list() -> Any:
    items: list[Any] = [torch.ones(2)]
    items.append(items)
    return items


@case("self_referencing_dict")
def _self_dict() -> Any:
    found: dict[str, Any] = {"t": torch.ones(2)}
    found["self"] = found
    return found


@case("tuple_in_list_cycle")
def _tuple_cycle() -> Any:
    items: list[Any] = [torch.ones(2)]
    items.append((items, Tripwire()))
    return items


@case("mutual_cycle")
def _mutual() -> Any:
    a: list[Any] = [torch.ones(2)]
    b: dict[str, Any] = {"a": a, "t": torch.zeros(3)}
    a.append(b)
    a.append((b, a))
    return a


@case("list_1m_ints", "big")
def _million_ints() -> Any:
    return list(range(1_000_000))


@case("list_1m_scalar_tensors", "big")
def _million_scalars() -> Any:
    # 1,000 distinct 0-dim views of one storage, repeated: cheap, yet every
    # item is a real tensor and the first thousand are distinct objects.
    views = list(torch.zeros(1000).unbind())
    return views * 1000


@case("dict_200k", "big")
def _big_dict() -> Any:
    found: dict[Any, Any] = {i: i for i in range(200_000)}
    found["last"] = torch.ones(2)  # beyond any item limit
    return found


@case("wide_tree_5000_lists", "big")
def _wide() -> Any:
    # 25 x 200 distinct lists of 200 items: a breadth-first walk that enqueues
    # every child meets a million entries before its visit budget runs out.
    return [[[0] * 200 for _ in range(200)] for _ in range(25)]


@case("nested_lists_10k_deep", "big")
def _deep_lists() -> Any:
    node: list[Any] = [torch.ones(2)]
    for _ in range(10_000):
        node = [node, Tripwire()]
    return node


@case("nested_dicts_10k_deep", "big")
def _deep_dicts() -> Any:
    node: dict[str, Any] = {"t": torch.ones(2)}
    for _ in range(10_000):
        node = {"child": node}
    return node


@case("namedtuple_of_tensors")
def _namedtuple() -> Any:
    return Pair(torch.ones(2, 3), torch.zeros(2, dtype=torch.long))


@case("userdict_with_to")
def _userdict() -> Any:
    return BatchDict({"input_ids": torch.ones(2, 3, dtype=torch.long), "note": Tripwire()})


@case("mapping_with_to_and_tripping_protocol")
def _mapping() -> Any:
    return HostileMapping()


@case("userdict_with_hostile_data")
def _userdict_hostile() -> Any:
    batch = BatchDict()
    data = HostileDict()
    dict.update(data, {"key": torch.ones(2), "attr": torch.ones(3)})
    object.__setattr__(batch, "data", data)
    return batch


@case("dict_subclass_tripping_methods")
def _dict_subclass() -> Any:
    found = HostileDict()
    dict.update(found, {"t": torch.ones(2), "w": Tripwire()})
    return found


@case("list_subclass_tripping_protocol")
def _list_subclass() -> Any:
    found = HostileList()
    list.extend(found, [torch.ones(2), Tripwire()])
    return found


@case("tuple_subclass_endless_fields")
def _tuple_subclass() -> Any:
    return HostileTuple((torch.ones(2), Tripwire()))


@case("dict_with_hostile_str_key")
def _hostile_key() -> Any:
    return {HostileStr("inputs"): torch.ones(2), "ok": torch.ones(3)}


@case("dict_with_intenum_keys")
def _enum_keys() -> Any:
    return {Key.INPUTS: torch.ones(2), Key.LABELS: torch.zeros(2)}


@case("dict_with_tensor_keys")
def _tensor_keys() -> Any:
    return {torch.ones(1): torch.ones(2), KeyTripwire(): torch.zeros(2)}


@case("simple_namespace_of_tensors")
def _namespace() -> Any:
    return types.SimpleNamespace(inputs=torch.ones(2), labels=torch.zeros(2), hostile=Tripwire())


# -- tensors ----------------------------------------------------------------------------------


class RaisingTorchFunction(torch.Tensor):
    """Every torch function on it raises (``.device`` and ``.shape`` included)."""

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        raise RuntimeError(f"__torch_function__ refused {getattr(func, '__name__', func)}")


class RaisingDevice(torch.Tensor):
    @property
    def device(self) -> Any:  # type: ignore[override]
        raise RuntimeError("device lost")


class HostileMetadata(torch.Tensor):
    """``.device`` is a str subclass, ``.dtype`` and ``.layout`` are tripwires."""

    @property
    def device(self) -> Any:  # type: ignore[override]
        return HostileStr("cpu")

    @property
    def dtype(self) -> Any:  # type: ignore[override]
        return Tripwire()

    @property
    def layout(self) -> Any:  # type: ignore[override]
        return Tripwire()


class EndlessShape(torch.Tensor):
    """``.shape`` never ends: ``tuple(t.shape)`` would run until memory runs out."""

    @property
    def shape(self) -> Any:  # type: ignore[override]
        return itertools.repeat(1)


class RaisingShape(torch.Tensor):
    @property
    def shape(self) -> Any:  # type: ignore[override]
        raise RuntimeError("shape lost")

    @property
    def is_nested(self) -> Any:  # type: ignore[override]
        raise RuntimeError("is_nested lost")


class RaisingDispatch(torch.Tensor):
    """A wrapper subclass whose every aten op raises (metadata is on the wrapper)."""

    @staticmethod
    def __new__(cls) -> Any:
        return torch.Tensor._make_wrapper_subclass(cls, (2, 3), dtype=torch.float32, device="meta")

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        raise RuntimeError(f"__torch_dispatch__ refused {func}")


#: Names of torch functions a metadata-only reader may call on a tensor.
METADATA = frozenset(
    {
        "device",
        "shape",
        "dtype",
        "numel",
        "element_size",
        "layout",
        "is_nested",
        "size",
        "dim",
        "ndim",
    }
)


class Spy(torch.Tensor):
    """Counts every torch function called on it (see :func:`torch_function_name`)."""

    calls: ClassVar[Counter[str]] = Counter()

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        Spy.calls[torch_function_name(func)] += 1
        return super().__torch_function__(func, types, args, kwargs or {})


def torch_function_name(func: Any) -> str:
    """``device`` for the ``Tensor.device`` getter, ``item`` for ``Tensor.item``."""
    name = getattr(func, "__name__", None)
    if name == "__get__":
        name = getattr(getattr(func, "__self__", None), "__name__", None)
    return name if isinstance(name, str) else "?"


def spy(tensor: torch.Tensor) -> Spy:
    return tensor.as_subclass(Spy)  # type: ignore[return-value]


@case("parameter", "tensor")
def _parameter() -> Any:
    return nn.Parameter(torch.ones(2, 3))


@case("uninitialized_parameter", "tensor")
def _uninit_param() -> Any:
    return nn.parameter.UninitializedParameter()


@case("uninitialized_buffer", "tensor")
def _uninit_buffer() -> Any:
    return nn.parameter.UninitializedBuffer()


@case("fake_tensor", "tensor")
def _fake() -> Any:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        return torch.ones(3, 4)  # returned after the mode exits: the tensor outlives it


@case("sparse_coo", "tensor")
def _coo() -> Any:
    return torch.eye(3).to_sparse()


@case("sparse_csr", "tensor")
def _csr() -> Any:
    return torch.eye(3).to_sparse_csr()


@case("nested_tensor", "tensor")
def _nested() -> Any:
    return _quiet(lambda: torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]))


@case("nested_tensor_jagged", "tensor")
def _jagged() -> Any:
    return _quiet(
        lambda: torch.nested.nested_tensor(
            [torch.ones(2, 4), torch.ones(3, 4)], layout=torch.jagged
        )
    )


@case("quantized_tensor", "tensor")
def _quantized() -> Any:
    return _quiet(lambda: torch.quantize_per_tensor(torch.ones(3), 0.1, 0, torch.qint8))


@case("complex_tensor", "tensor")
def _complex() -> Any:
    return torch.ones(2, dtype=torch.complex64)


@case("meta_tensor_1e12_elements", "tensor")
def _huge_meta() -> Any:
    return torch.empty(10**12, device="meta")


@case("tensor_torch_function_raises", "tensor")
def _tf_raises() -> Any:
    return torch.ones(2).as_subclass(RaisingTorchFunction)


@case("tensor_device_property_raises", "tensor")
def _device_raises() -> Any:
    return torch.ones(2).as_subclass(RaisingDevice)


@case("tensor_hostile_metadata_objects", "tensor")
def _hostile_metadata() -> Any:
    return torch.ones(2).as_subclass(HostileMetadata)


@case("tensor_endless_shape", "tensor")
def _endless_shape() -> Any:
    return torch.ones(2).as_subclass(EndlessShape)


@case("tensor_shape_and_is_nested_raise", "tensor")
def _shape_raises() -> Any:
    return torch.ones(2).as_subclass(RaisingShape)


@case("tensor_torch_dispatch_raises", "tensor")
def _dispatch_raises() -> Any:
    return RaisingDispatch()


@case("spy_tensor", "tensor")
def _spy() -> Any:
    return spy(torch.ones(2, 3))


@case("weakref_proxy_to_tensor")
def _proxy() -> Any:
    tensor = torch.ones(2)
    _KEEP.append(tensor)
    return weakref.proxy(tensor)


@case("weakref_proxy_dead")
def _dead_proxy() -> Any:
    tensor = torch.ones(2)
    proxy = weakref.proxy(tensor)
    del tensor
    return proxy


# -- modules and optimizers -------------------------------------------------------------------


class Small(nn.Module):
    """At most one parameter: it must never outrank the test's own model."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(1))


def _recast(module: nn.Module, cls: type) -> Any:
    """``module`` as an instance of ``cls`` (whose hooks would break ``__init__``)."""
    object.__setattr__(module, "__class__", cls)
    return module


class RaisingPropertyModule(Small):
    @property
    def device(self) -> Any:  # HF models have one; a broken one raises
        raise RuntimeError("no single device")


class GetattrModule(Small):
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"{name}: not an AttributeError")


class GetattrSelfModule(Small):
    def __getattr__(self, name: str) -> Any:
        return self


class LyingClassModule(Small):
    @property  # type: ignore[misc]
    def __class__(self) -> type:
        raise RuntimeError("who am I")


@case("module_raising_property", "module")
def _module_property() -> Any:
    return RaisingPropertyModule()


@case("module_getattr_raises", "module")
def _module_getattr() -> Any:
    return _recast(Small(), GetattrModule)


@case("module_getattr_returns_self", "module")
def _module_getattr_self() -> Any:
    return _recast(Small(), GetattrSelfModule)


@case("module_lying_class_raises", "module")
def _module_lying() -> Any:
    return _recast(Small(), LyingClassModule)


@case("module_parameters_with_none", "module")
def _module_none() -> Any:
    module = Small()
    module.register_parameter("bias", None)
    module._parameters["ghost"] = None
    module._buffers["nothing"] = None
    module._modules["missing"] = None
    return module


@case("module_is_its_own_child", "module")
def _module_cycle() -> Any:
    module = Small()
    module._modules["me"] = module
    inner = nn.Module()
    inner._modules["outer"] = module
    module._modules["inner"] = inner
    return module


@case("module_hostile_registries", "module")
def _module_registries() -> Any:
    module = Small()
    params = HostileDict()
    dict.update(params, {"w": module.w})
    object.__setattr__(module, "_parameters", params)
    modules = HostileDict()
    dict.update(modules, {"child": nn.Module()})
    object.__setattr__(module, "_modules", modules)
    return module


@case("module_hostile_instance_dict", "module")
def _module_hostile_dict() -> Any:
    module = Small()
    hostile = HostileDict()
    dict.update(hostile, dict.items(module.__dict__))
    hostile_items = {"cache": torch.ones(2), "hf_device_map": Tripwire()}
    dict.update(hostile, hostile_items)
    object.__setattr__(module, "__dict__", hostile)
    return module


@case("module_hostile_attribute_names", "module")
def _module_names() -> Any:
    module = Small()
    dict.__setitem__(module.__dict__, HostileStr("cache"), torch.ones(2))
    dict.__setitem__(module._parameters, HostileStr("odd name"), nn.Parameter(torch.ones(1)))
    return module


@case("module_list_3000_children", "module", "big")
def _many_children() -> Any:
    return nn.ModuleList(nn.Identity() for _ in range(3000))


@case("module_plain_list_of_hostiles", "module")
def _plain_list() -> Any:
    module = Small()
    module.blocks = [Tripwire(), LyingModule(), _recast(Small(), GetattrSelfModule)]
    module.table = {"a": Tripwire(), HostileStr("b"): nn.Identity()}
    return module


@case("optimizer_empty_state")
def _optimizer() -> Any:
    return torch.optim.SGD([nn.Parameter(torch.ones(2))], lr=0.1)


@case("optimizer_hostile_groups")
def _optimizer_groups() -> Any:
    opt = torch.optim.Adam([nn.Parameter(torch.ones(2))], lr=0.1)
    group = HostileDict()
    dict.update(group, dict.items(opt.param_groups[0]))
    groups = HostileList()
    list.append(groups, group)
    list.append(groups, Tripwire())
    object.__setattr__(opt, "param_groups", groups)
    state = HostileDict()
    dict.__setitem__(state, KeyTripwire(), {"exp_avg": torch.ones(2)})
    object.__setattr__(opt, "state", state)
    return opt


@case("script_module", "module")
def _script() -> Any:
    return torch.jit.script(nn.Linear(1, 1, bias=False))


# -- other things people keep -------------------------------------------------------------------


def _endless() -> Iterator[int]:
    while True:
        yield 1


@case("numpy_array")
def _numpy() -> Any:
    import numpy as np

    return np.ones((3, 4))


@case("pandas_dataframe")
def _frame() -> Any:
    import pandas as pd

    return pd.DataFrame({"a": [1, 2], "t": [torch.ones(1), torch.ones(1)]})


@case("endless_generator")
def _generator() -> Any:
    return _endless()


@case("module_object_with_hostile_getattr")
def _module_object() -> Any:
    module = types.ModuleType("hostile_module")
    module.__getattr__ = lambda name: Tripwire()  # type: ignore[method-assign]  # PEP 562
    module.weights = torch.ones(2)  # type: ignore[attr-defined]
    return module


@case("module_object_torch")
def _torch_module() -> Any:
    return torch


@case("plain_class")
def _a_class() -> Any:
    return Tripwire


@case("magicmock_spec_tensor")
def _mock_tensor() -> Any:
    from unittest import mock

    return _mock_tripwires(mock.MagicMock(spec=torch.Tensor))


@case("magicmock_spec_module")
def _mock_module() -> Any:
    from unittest import mock

    return _mock_tripwires(mock.MagicMock(spec=nn.Module))


def _mock_tripwires(fake: Any) -> Any:
    # A mock answers everything; make its value dunders trip like the others.
    for name in ("__str__", "__bool__", "__len__", "__iter__", "__eq__", "__int__", "__format__"):
        try:
            getattr(fake, name).side_effect = lambda *a, _n=name, **k: _trip(fake, _n)
        except AttributeError:
            continue
    return fake


@case("exception_with_traceback")
def _exception() -> Any:
    try:
        raise ValueError(Tripwire())
    except ValueError as exc:
        return exc


@case("frame_object")
def _frame_object() -> Any:
    return sys._getframe()


@case("deque_and_defaultdict")
def _collections() -> Any:
    return [
        collections.deque([torch.ones(2)]),
        collections.defaultdict(Tripwire, {"t": torch.ones(2)}),
    ]


@case("dataclass_fields_are_tripwires")
def _dc_tripwire_fields() -> Any:
    return BatchWithRaisingProperty(Tripwire(), [Tripwire(), torch.ones(2)])


# -- more of what notebooks hold (issue 6) ----------------------------------------------------


@tripwired
class ForwardingProxy:
    """A wrapt-style ``ObjectProxy``: ``__class__`` and every attribute are the
    wrapped object's (``isinstance(proxy, torch.Tensor)`` is True), found through
    ``__getattr__``; only ``type(proxy)`` tells the truth."""

    def __init__(self, wrapped: Any) -> None:
        object.__setattr__(self, "__wrapped__", wrapped)

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return type(object.__getattribute__(self, "__wrapped__"))

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "__wrapped__"), name)


@case("proxy_forwarding_to_tensor")
def _proxy_tensor() -> Any:
    return ForwardingProxy(torch.ones(2, 3))


@case("proxy_forwarding_to_module")
def _proxy_module() -> Any:
    return ForwardingProxy(Small())


@case("proxy_forwarding_to_dict_of_tensors")
def _proxy_dict() -> Any:
    return ForwardingProxy({"inputs": torch.ones(2), "hostile": Tripwire()})


@case("numpy_object_array_of_tensors")
def _numpy_objects() -> Any:
    import numpy as np

    array = np.empty(4, dtype=object)
    for index, item in enumerate((torch.ones(2), Tripwire(), torch.zeros(3), None)):
        array[index] = item  # one by one: a slice assignment would read each as an array
    return array


@case("memoryview")
def _memoryview() -> Any:
    return memoryview(bytearray(b"x" * 4096))


@case("array_array")
def _array() -> Any:
    import array

    return array.array("d", range(100_000))


@case("pandas_tensor_column_10k", "big")
def _frame_big() -> Any:
    import pandas as pd

    column = pd.Series([torch.ones(1) for _ in range(10_000)], dtype=object)
    return pd.DataFrame({"t": column, "n": range(10_000)})


@case("generator_mid_iteration")
def _generator_mid() -> Any:
    def batches() -> Iterator[Any]:
        held = [torch.ones(2), Tripwire()]  # alive in the suspended frame
        for index in range(10):
            yield held[0] + index

    gen = batches()
    next(gen)
    return gen


@case("module_list_10000_children", "module", "big")
def _ten_thousand_children() -> Any:
    # Identity layers (a Linear costs 0.1 ms to build), the last one with a parameter:
    # beyond max_modules, where a walk must stop.
    layers = nn.ModuleList(nn.Identity() for _ in range(9_999))
    layers.append(Small())
    return layers


class RaisingHooks(Small):
    pass


@case("module_forward_hooks_raise", "module")
def _hooks_raise() -> Any:
    module = RaisingHooks()

    def hook(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a hook that must never run")

    module.register_forward_hook(hook)
    module.register_forward_pre_hook(hook)
    module.register_full_backward_hook(hook)
    return module


@case("torch_size")
def _size() -> Any:
    return torch.Size([3, 4, 5])


@case("torch_dtype_and_device_objects")
def _dtype_device() -> Any:
    return [torch.float32, torch.device("cuda:0"), torch.device("meta"), torch.strided]


@case("grad_fn_chain_10k", "tensor", "big")
def _grad_chain() -> Any:
    leaf = torch.ones(2, requires_grad=True)
    node = leaf
    for _ in range(10_000):
        node = node * 1.0
    return node


class GetattributeTensor(torch.Tensor):
    """Every public attribute read through ``__getattribute__`` raises; torch's
    C-level getters (``type(t).device.__get__``) still work."""

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("_"):
            raise RuntimeError(f"__getattribute__ refused {name}")
        return super().__getattribute__(name)


@case("tensor_overriding_getattribute", "tensor")
def _getattribute_tensor() -> Any:
    return torch.ones(2).as_subclass(GetattributeTensor)


class _Fields(NamedTuple):
    inputs: Any
    labels: Any


class RaisingFields(_Fields):
    """A namedtuple whose field access raises (a property over each field)."""

    @property  # type: ignore[misc]
    def inputs(self) -> Any:
        raise RuntimeError("inputs refused")

    @property  # type: ignore[misc]
    def labels(self) -> Any:
        raise RuntimeError("labels refused")


@case("namedtuple_field_access_raises")
def _raising_fields() -> Any:
    return RaisingFields(torch.ones(2), torch.zeros(2))


@tripwired
class Unequal:
    """``__eq__``, ``__hash__`` and ``__len__`` raise (tripwires) but it is hashable
    by identity for dict values and list items."""


@case("raising_eq_hash_len_in_containers")
def _unequal() -> Any:
    items = [Unequal(), torch.ones(2), Unequal()]
    return {"list": items, "tuple": tuple(items), "dict": {"a": Unequal(), "t": torch.ones(3)}}


@case("dict_1m_int_keys", "big")
def _million_keys() -> Any:
    found: dict[Any, Any] = dict.fromkeys(range(1_000_000), 0)
    found["tensor"] = torch.ones(2)
    return found


@case("set_of_tensors")
def _set() -> Any:
    return {torch.ones(2), torch.zeros(3), KeyTripwire()}


@case("frozenset_of_tensors")
def _frozenset() -> Any:
    return frozenset({torch.ones(2), KeyTripwire()})


@case("deque_of_10k_tensors", "big")
def _deque() -> Any:
    return collections.deque(torch.zeros(1000).unbind() * 10)


class Colour(enum.Enum):
    RED = 1
    GREEN = (2, "green")


@case("enum_member")
def _enum() -> Any:
    return [Colour.RED, Colour.GREEN, Key.INPUTS]


@tripwired
class Slotted:
    """``__slots__`` and no ``__dict__``: ``vars()`` raises, attributes are descriptors."""

    __slots__ = ("hostile", "inputs")

    def __init__(self) -> None:
        self.inputs = torch.ones(2)
        self.hostile = Tripwire()


@case("slots_without_dict")
def _slots() -> Any:
    return Slotted()


class ReplacedDict(Small):
    pass


@case("module_dict_replaced", "module")
def _module_dict_replaced() -> Any:
    module = ReplacedDict()
    # No _parameters, _buffers or _modules any more: torch's own code would fail.
    object.__setattr__(module, "__dict__", {"weight": torch.ones(2), "training": True})
    return module


@case("module_dict_replaced_by_subclass", "module")
def _module_dict_subclass() -> Any:
    module = ReplacedDict()
    replacement = HostileDict()
    dict.update(replacement, dict.items(module.__dict__))
    dict.__setitem__(replacement, "extra", [Tripwire(), torch.ones(2)])
    object.__setattr__(module, "__dict__", replacement)
    return module


@case("weakkeydictionary_of_tensors")
def _weak_keys() -> Any:
    found: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
    key = torch.ones(1)
    _KEEP.append(key)
    found[key] = torch.ones(2)
    return found


@case("chainmap_and_mappingproxy")
def _chain() -> Any:
    return [
        collections.ChainMap({"a": torch.ones(2)}, {"b": Tripwire()}),
        types.MappingProxyType({"t": torch.ones(2)}),
    ]


@case("bound_method_of_module", "module")
def _bound_method() -> Any:
    return Small().forward


@case("functools_partial_holding_tensors")
def _partial() -> Any:
    import functools

    return functools.partial(torch.add, torch.ones(2), alpha=2)


@case("lambda_closing_over_tensor")
def _closure() -> Any:
    held = torch.ones(2)
    return lambda: held


# -- code that exits: SystemExit and BaseExceptions of their own (issue 14) -------------------


class Unwind(BaseException):
    """A ``BaseException`` of a framework's own (as some raise to unwind a stack):
    ``except Exception`` lets it through."""


#: Set once the exiting classes are built: their hooks raise from then on.
_ARMED: list[bool] = []


class _ExitingMeta(type):
    """Every class-level attribute read through the metaclass exits: what
    ``dataclasses.is_dataclass`` and ``hasattr(cls, ...)`` do."""

    def __getattribute__(cls, name: str) -> Any:
        if _ARMED:
            raise SystemExit(f"metaclass refused {name}")
        return super().__getattribute__(name)


class _UnwindingHashMeta(type):
    """Classes that cannot be hashed or compared: a set of types unwinds."""

    def __hash__(cls) -> int:
        if _ARMED:
            raise Unwind("class hash")
        return type.__hash__(cls)

    def __eq__(cls, other: object) -> bool:
        if _ARMED:
            raise Unwind("class comparison")
        return cls is other


@tripwired
class ExitingMetaInstance(metaclass=_ExitingMeta):
    pass


@tripwired
class UnwindingHashInstance(metaclass=_UnwindingHashMeta):
    pass


class ExitingTensor(torch.Tensor):
    """``.device``, ``.shape`` and ``.dtype`` exit, like a half-built wrapper calling
    ``sys.exit()`` on a bad state."""

    @property
    def device(self) -> Any:  # type: ignore[override]
        raise SystemExit("device")

    @property
    def shape(self) -> Any:  # type: ignore[override]
        raise Unwind("shape")

    @property
    def dtype(self) -> Any:  # type: ignore[override]
        raise SystemExit("dtype")


def exiting_tensor(*size: int) -> Any:
    return torch.ones(*size).as_subclass(ExitingTensor)


_ARMED.append(True)


@case("metaclass_getattribute_exits")
def _exiting_meta() -> Any:
    return [ExitingMetaInstance(), torch.ones(2)]


@case("metaclass_class_in_namespace_exits")
def _exiting_meta_class() -> Any:
    return ExitingMetaInstance()


@case("metaclass_hash_unwinds")
def _unwinding_hash() -> Any:
    return UnwindingHashInstance()


@case("tensor_properties_exit", "tensor")
def _exiting_tensor() -> Any:
    return exiting_tensor(2)


@case("container_of_exiting_objects")
def _exiting_container() -> Any:
    return {"t": exiting_tensor(2), "meta": ExitingMetaInstance(), "items": [exiting_tensor(1)]}


@case("module_buffer_exits", "module")
def _exiting_module() -> Any:
    module = Small()
    module.register_buffer("odd", exiting_tensor(2))
    module.cache = exiting_tensor(3)
    return module


@case("optimizer_state_exits")
def _exiting_optimizer() -> Any:
    param = nn.Parameter(torch.ones(2))
    opt = torch.optim.Adam([param])
    opt.state[param] = {"step": torch.tensor(1.0), "exp_avg": exiting_tensor(2)}
    return opt


# -- checks -----------------------------------------------------------------------------------

#: Leaf types a snapshot may hold: exactly these (a ``str`` subclass is a user object).
PLAIN = (str, int, float, bool, type(None))

#: Modules whose dataclasses are ipydevice's plain data.
MODEL_MODULES = ("ipydevice.model",)


def plain_violations(value: Any, where: str = "d", depth: int = 0) -> list[str]:
    """Where ``value`` (a result, recursively) holds anything but plain data.

    Walks dataclass fields of ipydevice's model classes and tuples; every leaf
    must be exactly ``str``/``int``/``float``/``bool``/``None``.
    """
    kind = type(value)
    if kind in PLAIN:
        return []
    if depth > 50:
        return [f"{where}: nested deeper than 50"]
    if kind is tuple:
        out: list[str] = []
        for index, item in enumerate(value):
            out += plain_violations(item, f"{where}[{index}]", depth + 1)
        return out
    if dataclasses.is_dataclass(kind) and kind.__module__ in MODEL_MODULES:
        out = []
        for f in dataclasses.fields(kind):
            out += plain_violations(getattr(value, f.name), f"{where}.{f.name}", depth + 1)
        return out
    return [f"{where}: {kind.__module__}.{kind.__qualname__}"]


def assert_plain(value: Any) -> None:
    """Asserts the snapshot principle: strings, numbers and model objects only."""
    found = plain_violations(value)
    assert not found, "not plain data: " + "; ".join(found[:10])


# Checked at import: the corpus size is part of the contract (see module docstring).
assert len(CASES) >= 100, len(CASES)
assert len({c.id for c in CASES}) == len(CASES)
