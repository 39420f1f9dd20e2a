"""Safe, metadata-only facts about one live object.

Contract: reads ``.device``, ``.shape``, ``.dtype``, ``numel()``, ``element_size()``
and the registration dicts of modules, nothing else. Never ``repr``, ``str``,
``.item()``, ``.cpu()``, ``bool()`` or comparisons of tensors: those read data,
synchronise a GPU, or fail after a CUDA error. Every read is guarded, so raising
properties, lying ``__class__`` attributes and odd tensor subclasses give ``?``
instead of an exception. Type tests use ``type(obj)``, which cannot lie.

torch is never imported here: it is taken from ``sys.modules`` when the user has
imported it (if they have not, they hold no tensors).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from ipydevice._debug import contain
from ipydevice.collect.budget import _ACTIVE, Budget, active_budget

__all__ = [
    "Budget",
    "TensorFacts",
    "active_budget",
    "class_name",
    "device_of",
    "device_str",
    "is_a",
    "is_generator",
    "is_module",
    "is_optimizer",
    "is_tensor",
    "module_dict",
    "plain_placement",
    "tensor_facts",
    "torch_module",
]

UNKNOWN = "?"

_DTYPE_NAMES = {"float": "float32", "double": "float64", "half": "float16", "long": "int64"}

#: More dimensions than any real tensor has: a longer "shape" is not read.
_MAX_DIMS = 256


@contextlib.contextmanager
def metadata_reads(seconds: float | None = None) -> Iterator[None]:
    """A scan's metadata reads, with tensor subclasses' ``__torch_function__`` off,
    within one time budget of ``seconds`` (the ``time_budget`` setting).

    Reading ``.device`` or ``.shape`` of a tensor subclass goes through its
    ``__torch_function__`` (a dozen calls per tensor, each the user's code);
    ``torch._C.DisableTorchFunctionSubclass`` reads them as torch does for a
    plain tensor. Entered once per diagnosis, inventory or checkup (entering it
    costs about a microsecond), never per tensor. Without torch, a no-op.

    The budget (:class:`Budget`, :func:`active_budget`) is the whole diagnosis',
    inventory's or checkup's, every scan's and every stage's: what a tensor
    subclass's own Python reads cost is bounded by it, plus one read. A nested
    entry keeps the outer budget.
    """
    outer = getattr(_ACTIVE, "budget", None)
    if seconds is not None and outer is None:
        _ACTIVE.budget = Budget(seconds)
    try:
        torch = sys.modules.get("torch")
        disable = getattr(getattr(torch, "_C", None), "DisableTorchFunctionSubclass", None)
        if disable is None:
            yield
            return
        with disable():
            yield
    finally:
        _ACTIVE.budget = outer


def torch_module() -> Any:
    """torch if the user imported it, else None (importing it costs ~1.5 s)."""
    return sys.modules.get("torch")


#: torch classes by dotted name, with the torch module they came from. A scan asks
#: about every object it meets (a million-item walk asks a million times): the
#: getattr chain is resolved once per torch module, not once per question.
_CLASSES: dict[tuple[str, ...], tuple[Any, Any]] = {}


def _torch_class(dotted: tuple[str, ...]) -> Any:
    torch = sys.modules.get("torch")  # torch_module(), inlined: this is the hot path
    if torch is None:
        return None
    cached = _CLASSES.get(dotted)
    if cached is not None and cached[0] is torch:
        return cached[1]
    base: Any = torch
    try:
        for part in dotted:
            base = getattr(base, part)
    except BaseException as caught:
        contain(caught)
        return None
    _CLASSES[dotted] = (torch, base)
    return base


def _is_sub(obj: Any, dotted: tuple[str, ...]) -> bool:
    base = _torch_class(dotted)
    if base is None:
        return False
    kind = type(obj)
    if kind is base:
        return True
    try:
        return issubclass(kind, base)
    except BaseException as caught:
        contain(caught)
        return False


_TENSOR, _MODULE, _OPTIMIZER = ("Tensor",), ("nn", "Module"), ("optim", "Optimizer")
_GENERATOR = ("Generator",)


def is_a(obj: Any, types: type | tuple[type, ...]) -> bool:
    """``isinstance`` that cannot be lied to or made to raise.

    ``isinstance(obj, T)`` falls back to reading ``obj.__class__`` when
    ``type(obj)`` is no ``T``: a ``__class__`` property can fake the answer or
    raise (and a dead ``weakref.proxy`` raises ``ReferenceError``).
    """
    return issubclass(type(obj), types)


def is_tensor(obj: Any) -> bool:
    """True for torch.Tensor and its subclasses (Parameter, FakeTensor, ...)."""
    return _is_sub(obj, _TENSOR)


def is_module(obj: Any) -> bool:
    """True for torch.nn.Module instances."""
    return _is_sub(obj, _MODULE)


def is_optimizer(obj: Any) -> bool:
    """True for torch.optim.Optimizer instances."""
    return _is_sub(obj, _OPTIMIZER)


def is_generator(obj: Any) -> bool:
    """True for torch.Generator instances."""
    return _is_sub(obj, _GENERATOR)


def device_of(obj: Any) -> str:
    """A tensor's or ``torch.Generator``'s ``.device`` (a C-level attribute), or ``?``."""
    try:
        return device_str(obj.device)
    except BaseException as caught:
        contain(caught)
        return UNKNOWN


#: type's own descriptors: a class's ``__dict__``, ``__mro__`` and ``__name__`` read
#: from the type slots, where a metaclass's ``__getattribute__`` or ``__getattr__``
#: (which may raise, exit or sleep) is never asked.
_CLASS_DICT = type.__dict__["__dict__"]
_CLASS_MRO = type.__dict__["__mro__"]
_CLASS_NAME = type.__dict__["__name__"]
_ABC_META = type(Mapping)


def class_attribute(kind: Any, name: str, default: Any = None) -> Any:
    """``kind.name`` as stored in the class dicts along its MRO, or ``default``.

    What ``getattr(kind, name)`` finds among the class's own attributes, with no
    metaclass involved: ``hasattr(cls, ...)`` and ``dataclasses.is_dataclass``
    run a metaclass's ``__getattribute__`` (which may raise, exit or sleep).
    Under a metaclass of its own, descriptors are returned as stored (a
    property, not its value) and no user code runs at all.
    """
    meta = type(kind)
    if meta is type or meta is _ABC_META:
        # No metaclass hook to go around (the common case): type's own lookup,
        # at C speed. Only the stored value's own __get__ could run, and what is
        # asked for (dataclass fields, namedtuple fields, a ``to`` method) is
        # plain data or a function.
        try:
            return getattr(kind, name, default)
        except BaseException as caught:
            contain(caught)
            return default
    try:
        mro = _CLASS_MRO.__get__(kind)
        for base in tuple.__iter__(mro) if type(mro) is tuple else ():
            namespace = _CLASS_DICT.__get__(base)
            if name in namespace:
                return namespace[name]
    except BaseException as caught:  # not a class
        contain(caught)
    return default


def class_module(kind: Any) -> str:
    """``kind.__module__`` from the class's own dict ('' if none or not a str)."""
    try:
        module = _CLASS_DICT.__get__(kind).get("__module__", "")
    except BaseException as caught:
        contain(caught)
        return ""
    return str.__str__(module) if is_a(module, str) else ""


def is_dataclass_type(kind: Any) -> bool:
    """``dataclasses.is_dataclass(kind)`` for a class, without its metaclass."""
    return class_attribute(kind, "__dataclass_fields__") is not None


def dataclass_field_names(kind: Any) -> list[str]:
    """The field names ``dataclasses.fields(kind)`` gives, read without the
    metaclass (``fields()`` reads a class attribute through it)."""
    fields = class_attribute(kind, "__dataclass_fields__")
    if type(fields) is not dict:
        return []
    import dataclasses

    plain = getattr(dataclasses, "_FIELD", None)  # not ClassVar or InitVar pseudo-fields
    return [
        name
        for name, field in dict.items(fields)
        if type(name) is str
        and type(field) is dataclasses.Field
        and (plain is None or field._field_type is plain)  # type: ignore[attr-defined]
    ]


def class_name(obj: Any) -> str:
    """The real class name (``type(obj)``, never a lying ``__class__``)."""
    try:
        # type.__name__ read from the type slot: a metaclass cannot override it.
        return str(_CLASS_NAME.__get__(type(obj)))
    except BaseException as caught:
        contain(caught)
        return UNKNOWN


def device_str(device: Any) -> str:
    """``torch.device`` (or a string) as ``cuda:0`` / ``cpu`` / ``meta``.

    Only a real ``torch.device`` or ``str`` is read: a tensor subclass's ``.device``
    may return anything, and formatting it would run its ``__str__``/``__format__``.
    """
    if is_a(device, str):
        return str.__str__(device)  # a plain copy of a str subclass, no user code
    torch = torch_module()
    if torch is None or type(device) is not getattr(torch, "device", None):
        return UNKNOWN
    # torch.device hashes by value in C: a model's few devices are formatted once.
    name = _DEVICE_NAMES.get(device)
    if name is not None:
        return name
    try:
        kind, index = device.type, device.index
    except BaseException as caught:
        contain(caught)
        return UNKNOWN
    if type(kind) is not str:
        return UNKNOWN
    name = f"{kind}:{index}" if type(index) is int else kind
    if len(_DEVICE_NAMES) < _MAX_CACHED:
        _DEVICE_NAMES[device] = name
    return name


#: ``torch.device`` -> ``cuda:0``; keys are torch's own device objects only.
_DEVICE_NAMES: dict[Any, str] = {}
#: Entries kept in each formatting cache (devices, shapes): bounded, never cleared.
_MAX_CACHED = 4096


class TensorFacts(NamedTuple):
    """A tensor's metadata, as text: unreadable fields are ``?`` (or 0 bytes) and
    ``detail`` says why."""

    device: str
    shape: str
    dtype: str
    nbytes: int
    detail: str


#: The facts of a tensor not read: the time budget was spent, or its class is slow.
UNREAD = TensorFacts(UNKNOWN, UNKNOWN, UNKNOWN, 0, "not read (time budget)")


def tensor_facts(tensor: Any) -> TensorFacts:
    """Device, shape, dtype, size in bytes and a short note, from metadata only;
    a subclass's within the active budget (:class:`Budget`)."""
    if not is_tensor(tensor):
        # Not a tensor (a module passed by mistake, a lying ``__class__``): its
        # ``.device`` or ``.shape`` would be user code (a property, __getattr__).
        return TensorFacts(UNKNOWN, UNKNOWN, UNKNOWN, 0, "not a tensor")
    budget = getattr(_ACTIVE, "budget", None)
    if budget is None or _plain_kind(type(tensor)):
        return _tensor_facts(tensor)
    return budget.read(tensor, "facts", _tensor_facts, UNREAD)


def _plain_kind(kind: type) -> bool:
    """``torch.Tensor`` or ``nn.Parameter`` itself: C-level reads, no user code."""
    plain = _plain_tensor_types()
    return bool(plain) and (kind is plain[0] or kind is plain[1])


def _tensor_facts(tensor: Any) -> TensorFacts:
    notes: list[str] = []
    device = device_of(tensor)
    try:
        shape = shape_text(_dims(tensor.shape))
    except BaseException as caught:
        contain(caught)
        shape = UNKNOWN
        notes.append(_unreadable_shape_note(tensor))
    try:
        dtype = _torch_enum(tensor.dtype, "dtype")
        dtype = _DTYPE_NAMES.get(dtype, dtype)
    except BaseException as caught:
        contain(caught)
        dtype = UNKNOWN
    nbytes = _nbytes(tensor) if shape != UNKNOWN else 0
    layout = _layout(tensor)
    if layout:
        notes.append(layout)
    if device == "meta":
        notes.append("no data")
    return TensorFacts(device, shape, dtype, nbytes, ", ".join(n for n in notes if n))


def tensor_base(tensor: Any) -> Any:
    """The tensor a view was made from (``ids.view(-1, n)`` -> ``ids``), or None.
    Metadata only: ``_base`` is a pointer, no data is read."""
    try:
        return tensor._base if is_tensor(tensor) else None
    except Exception:
        return None


def shape_text(dims: tuple[int, ...]) -> str:
    """``(3, 4)``, ``(3,)`` or ``()`` for a 0-dim tensor."""
    text = _SHAPES.get(dims)
    if text is None:
        text = f"({dims[0]},)" if len(dims) == 1 else "(" + ", ".join(map(str, dims)) + ")"
        if len(_SHAPES) < _MAX_CACHED:
            _SHAPES[dims] = text
    return text


def _plain_tensor_types() -> tuple[type, ...]:
    """``(torch.Tensor, torch.nn.Parameter)`` of the torch imported (none without it)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return ()
    if _PLAIN[0] is not torch:
        try:
            _PLAIN[:] = [torch, (torch.Tensor, torch.nn.Parameter)]
            _STRIDED[0] = torch.strided
        except BaseException as caught:
            contain(caught)
            return ()
    return _PLAIN[1]


_PLAIN: list[Any] = [None, ()]
_STRIDED: list[Any] = [None]


#: ``(4096, 4096)`` -> ``"(4096, 4096)"``: a model repeats a few shapes (keys: tuples of ints).
_SHAPES: dict[tuple[int, ...], str] = {}


def placement(tensor: Any) -> tuple[str, int]:
    """``(device, nbytes)``: what a module's device breakdown needs, at about half
    the cost of :func:`tensor_facts` (and always equal to its two fields)."""
    plain = _plain_tensor_types()
    kind = type(tensor)
    # By identity: ``in`` would compare classes, and a metaclass's __eq__ may raise.
    if plain and (kind is plain[0] or kind is plain[1]):
        # torch.Tensor and nn.Parameter themselves (no subclass's properties to
        # distrust): C-level reads. A dense tensor's nbytes is numel x itemsize;
        # anything else (sparse, nested, symbolic sizes) takes the careful path.
        try:
            nbytes = tensor.nbytes
            if type(nbytes) is int and tensor.layout is _STRIDED[0] and not tensor.is_nested:
                return device_str(tensor.device), nbytes
        except BaseException as caught:
            contain(caught)
            pass
    if not is_tensor(tensor):
        return UNKNOWN, 0
    budget = getattr(_ACTIVE, "budget", None)
    if budget is None:
        return _placement(tensor)
    return budget.read(tensor, "placement", _placement, (UNKNOWN, 0))


def plain_placement(tensor: Any) -> tuple[str, int] | None:
    """``(device, nbytes)`` of a ``torch.Tensor`` or ``nn.Parameter`` itself, by two
    C-level reads (what counting 100,000 parameters affords); None for any other
    object, or where they raise (read it with :func:`placement`)."""
    plain = _plain_tensor_types()
    kind = type(tensor)
    if not plain or (kind is not plain[0] and kind is not plain[1]):
        return None
    try:
        nbytes = tensor.nbytes
        return (device_str(tensor.device), nbytes) if type(nbytes) is int else None
    except BaseException as caught:
        contain(caught)
        return None


def _placement(tensor: Any) -> tuple[str, int]:
    device = device_of(tensor)
    try:
        _dims(tensor.shape)
    except BaseException as caught:
        contain(caught)
        return device, 0
    return device, _nbytes(tensor)


def _dims(shape: Any) -> tuple[int, ...]:
    """A ``torch.Size`` (a tuple subclass) as plain ints.

    Anything else raises: a subclass's ``.shape`` may be an endless iterator
    (``tuple(...)`` would never return) or objects with their own ``__int__``.
    ``tuple.__iter__`` bypasses an overridden ``__iter__``.
    """
    if not is_a(shape, tuple) or tuple.__len__(shape) > _MAX_DIMS:
        raise TypeError("not a torch.Size")
    dims = tuple(tuple.__iter__(shape))
    for n in dims:
        if type(n) is not int:  # a SymInt (or worse): each made concrete, or refused
            return tuple(_as_int(n) for n in dims)
    return dims


def _as_int(value: Any) -> int:
    """An exact int, or a ``torch.SymInt`` (fake and nested tensors) made concrete."""
    if type(value) is int:
        return value
    torch = torch_module()
    if torch is not None and type(value) is getattr(torch, "SymInt", None):
        return int(value)  # raises for an unbacked or nested size: shape unreadable
    raise TypeError("not an int")


def _torch_enum(value: Any, name: str) -> str:
    """``float32`` for a real ``torch.dtype`` (``strided`` for a ``torch.layout``).

    ``str()`` is called on torch's own types only: a subclass's ``.dtype`` may
    return an object whose ``__str__`` raises or reads data.
    """
    kind = _torch_class((name,))
    if kind is None or type(value) is not kind:
        raise TypeError(f"not a torch.{name}")
    # dtypes and layouts are a few singletons of torch's own (C) type, hashed by
    # identity: their names are formatted once.
    text = _ENUM_NAMES.get(value)
    if text is None:
        text = _ENUM_NAMES[value] = str(value).removeprefix("torch.")
    return text


#: ``torch.float32 -> "float32"``; keys are torch's own dtype and layout objects only.
_ENUM_NAMES: dict[Any, str] = {}


def _nbytes(tensor: Any) -> int:
    try:
        return _as_int(tensor.numel()) * _as_int(tensor.element_size())
    except BaseException as caught:
        contain(caught)
        return 0


def _layout(tensor: Any) -> str:
    try:
        layout = _torch_enum(tensor.layout, "layout")
    except BaseException as caught:
        contain(caught)
        return ""
    if layout == "strided":
        return ""
    return layout


def _unreadable_shape_note(tensor: Any) -> str:
    name = class_name(tensor)
    if name.startswith("Uninitialized"):
        return "uninitialized (lazy)"
    if class_attribute(type(tensor), "is_nested") is not None:
        try:
            if tensor.is_nested is True:  # never bool() of what a subclass returns
                return "nested"
        except BaseException as caught:
            contain(caught)
            pass
    return "shape unreadable"


def module_dict(module: Any) -> dict[str, Any]:
    """A module's (or any object's) instance ``__dict__``, read without ``__getattr__``
    tricks; ``{}`` when it has none."""
    try:
        found = object.__getattribute__(module, "__dict__")
    except BaseException as caught:
        contain(caught)
        return {}
    if type(found) is dict:
        return found
    if is_a(found, dict):
        # ``obj.__dict__ = SomeDictSubclass()`` is legal; its get/items/__contains__
        # may be overridden. Copy it through dict's own C-level view instead.
        try:
            return dict(dict.items(found))
        except BaseException as caught:
            contain(caught)
            return {}
    return {}
