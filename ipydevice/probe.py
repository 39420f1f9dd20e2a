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

import sys
from typing import Any

__all__ = [
    "class_name",
    "device_str",
    "format_bytes",
    "is_module",
    "is_optimizer",
    "is_tensor",
    "module_dict",
    "tensor_facts",
    "torch_module",
]

UNKNOWN = "?"

_DTYPE_NAMES = {"float": "float32", "double": "float64", "half": "float16", "long": "int64"}


def torch_module() -> Any:
    """torch if the user imported it, else None (importing it costs ~1.5 s)."""
    return sys.modules.get("torch")


def _is_sub(obj: Any, dotted: tuple[str, ...]) -> bool:
    torch = torch_module()
    if torch is None:
        return False
    base: Any = torch
    try:
        for part in dotted:
            base = getattr(base, part)
        return issubclass(type(obj), base)
    except Exception:
        return False


def is_tensor(obj: Any) -> bool:
    """True for torch.Tensor and its subclasses (Parameter, FakeTensor, ...)."""
    return _is_sub(obj, ("Tensor",))


def is_module(obj: Any) -> bool:
    """True for torch.nn.Module instances."""
    return _is_sub(obj, ("nn", "Module"))


def is_optimizer(obj: Any) -> bool:
    """True for torch.optim.Optimizer instances."""
    return _is_sub(obj, ("optim", "Optimizer"))


def class_name(obj: Any) -> str:
    """The real class name (``type(obj)``, never a lying ``__class__``)."""
    try:
        return str(type(obj).__name__)
    except Exception:
        return UNKNOWN


def device_str(device: Any) -> str:
    """``torch.device`` (or a string) as ``cuda:0`` / ``cpu`` / ``meta``."""
    try:
        kind = device.type
        index = device.index
    except Exception:
        return device if isinstance(device, str) else UNKNOWN
    if not isinstance(kind, str):
        return UNKNOWN
    return f"{kind}:{index}" if isinstance(index, int) else kind


def tensor_facts(tensor: Any) -> tuple[str, str, str, int, str]:
    """Device, shape, dtype, size in bytes and a short note, from metadata only.

    Returns:
        ``(device, shape, dtype, nbytes, detail)``; unreadable fields are ``?``
        (or 0 bytes) and ``detail`` says why.
    """
    notes: list[str] = []
    try:
        device = device_str(tensor.device)
    except Exception:
        device = UNKNOWN
    try:
        shape = shape_text(tuple(int(n) for n in tensor.shape))
    except Exception:
        shape = UNKNOWN
        notes.append(_unreadable_shape_note(tensor))
    try:
        dtype = str(tensor.dtype).removeprefix("torch.")
        dtype = _DTYPE_NAMES.get(dtype, dtype)
    except Exception:
        dtype = UNKNOWN
    nbytes = _nbytes(tensor) if shape != UNKNOWN else 0
    layout = _layout(tensor)
    if layout:
        notes.append(layout)
    if device == "meta":
        notes.append("no data")
    return device, shape, dtype, nbytes, ", ".join(n for n in notes if n)


def shape_text(dims: tuple[int, ...]) -> str:
    """``(3, 4)``, ``(3,)`` or ``()`` for a 0-dim tensor."""
    if len(dims) == 1:
        return f"({dims[0]},)"
    return "(" + ", ".join(str(n) for n in dims) + ")"


def _nbytes(tensor: Any) -> int:
    try:
        return int(tensor.numel()) * int(tensor.element_size())
    except Exception:
        return 0


def _layout(tensor: Any) -> str:
    try:
        layout = str(tensor.layout).removeprefix("torch.")
    except Exception:
        return ""
    if layout == "strided":
        return ""
    return layout


def _unreadable_shape_note(tensor: Any) -> str:
    name = class_name(tensor)
    if name.startswith("Uninitialized"):
        return "uninitialized (lazy)"
    if getattr(type(tensor), "is_nested", None) is not None:
        try:
            if tensor.is_nested:
                return "nested"
        except Exception:
            pass
    return "shape unreadable"


def module_dict(module: Any) -> dict[str, Any]:
    """A module's instance ``__dict__``, read without ``__getattr__`` tricks."""
    try:
        found = object.__getattribute__(module, "__dict__")
    except Exception:
        return {}
    return found if isinstance(found, dict) else {}


def format_bytes(nbytes: int) -> str:
    """``1.5 GB`` style, decimal units as PyTorch users read memory."""
    value = float(nbytes)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{nbytes} B"  # pragma: no cover
