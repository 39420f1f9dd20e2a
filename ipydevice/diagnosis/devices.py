"""Device spellings in error text: ``CUDA``, ``cuda:0``, ``torch.cuda.HalfTensor``,
``CPUFloatType``, ``device(type='cuda', index=1)`` -> ``cuda``, ``cuda:0``, ``cpu``...

Standard library only; used by the wordings of every error family. A PrivateUse1
backend renamed in this process (``torch.utils.rename_privateuse1_backend``) is a device
type too, whatever its name: torch is asked, if it is imported, never imported here.
"""

from __future__ import annotations

import re
import sys

__all__ = [
    "SCAN_LIMIT",
    "device_tokens",
    "device_type",
    "normalise_device",
    "same_device",
    "with_index",
]

SCAN_LIMIT = 20_000
# Every device type normalise_device accepts (torch's DeviceType names plus common
# privateuse1 renames). The generic scan uses a shorter list: words such as "lazy", "ve",
# "hip" or "ort" occur in prose far more often than as devices.
_KNOWN_TYPES = frozenset(
    {
        "cpu",
        "cuda",
        "mps",
        "xla",
        "xpu",
        "npu",
        "hpu",
        "mtia",
        "maia",
        "ipu",
        "meta",
        "gpu",
        "privateuseone",
        "mlu",
        "musa",
        "hip",
        "ve",
        "lazy",
        "vulkan",
        "fpga",
        "ort",
        "mkldnn",
        "opengl",
        "opencl",
        "ideep",
    }
)
_SCAN_TYPES = "privateuseone|cuda|cpu|mps|xla|xpu|npu|hpu|mtia|maia|meta|mlu|musa"
_DEFAULT_PRIVATEUSE1 = "privateuseone"
_DTYPES = (
    r"(?:float|double|half|bfloat16|long|int|short|char|byte|bool|complex[a-z]*"
    r"|qu?int\d+|float8\w*?)"
)
_I = re.I | re.S

_PLAIN_RE = re.compile(r"(?P<t>[a-z][a-z0-9_]*)(?::(?P<i>\d+))?", re.I)
_REPR_RE = re.compile(
    r"(?:torch\.)?device\(\s*(?:type\s*=\s*)?['\"](?P<t>[\w:]+)['\"]"
    r"(?:\s*,\s*(?:index\s*=\s*)?(?P<i>\d+))?\s*\)",
    re.I,
)
_TORCH_TYPE_RE = re.compile(
    rf"torch\.(?:(?!sparse\.)(?P<t>[a-z]\w*)\.)?(?:sparse\.)?"
    rf"{_DTYPES}Tensor",
    re.I,
)
_LAYOUT = r"(?:sparse|quantized|mkldnn)"
_ATEN_TYPE_RE = re.compile(rf"{_LAYOUT}?(?P<t>[a-z]+?|PrivateUse1){_DTYPES}Type", re.I)
_BACKEND_RE = re.compile(rf"{_LAYOUT}(?P<t>[a-z]+)", re.I)


# Runs on lower-cased text without re.I: case-insensitive alternations are several times
# slower in CPython's re. Every branch starts with a literal, and the "not glued to a word,
# attribute, path or hyphen" test is done in Python on the preceding character.
def _scan_re(types: str) -> re.Pattern[str]:
    return re.compile(
        r"(?P<skip>https?://\S+|torch\.device\([^)]*\))"  # URLs; advice like map_location=
        r"|device\(type=[^)]*\)"
        rf"|torch\.(?:\w+\.)?(?:sparse\.)?{_DTYPES}tensor\b"
        rf"|{_LAYOUT}?(?:{types})(?:{_DTYPES}type\b|(?::\d+)?(?![\w\-(]))"
    )


_SCAN_RE = _scan_re(_SCAN_TYPES)
#: The scan with a renamed PrivateUse1 backend's name added (made once it is seen).
_renamed_scan: re.Pattern[str] | None = None
_GLUE = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_.-/")


def device_type(device: str) -> str:
    """``cuda`` of ``cuda:1``: the type without the index."""
    return device.split(":")[0]


def same_device(a: str, b: str) -> bool:
    """``cuda`` matches ``cuda:1``; ``cuda:0`` does not match ``cuda:1``."""
    if a == b:
        return True
    if ":" in a and ":" in b:
        return False
    return device_type(a) == device_type(b)


def with_index(device: str) -> str:
    """Where torch puts a tensor asked for on ``device``: an accelerator type without an
    index (``cuda``, ``openreg``) means that backend's current device, ``cuda:0`` unless
    the backend is initialised and says otherwise. Nothing here initialises a backend:
    an uninitialised one is at index 0, as torch would start it."""
    if not device.isidentifier() or device in ("cpu", "meta"):
        return device  # indexed already, or not a device
    torch = sys.modules.get("torch")
    backend = getattr(torch, device, None) if torch is not None else None
    index = 0
    try:
        if backend is not None and backend.is_initialized():
            index = int(backend.current_device())
    except Exception:  # a backend without the calls, or one broken by the error
        index = 0
    return f"{device}:{index}"


def normalise_device(token: str) -> str | None:
    """Normalise one device spelling to a torch device string.

    Args:
        token: A device as printed by torch: ``'CUDA'``, ``'cuda:0'``, a type name
            (``torch.cuda.HalfTensor``, ``CPUFloatType``), a repr
            (``device(type='cuda', index=1)``), a quoted type or checkSameGPU's ``GPU``.

    Returns:
        ``'cuda'``, ``'cuda:1'``, ``'cpu'``, ``'mps'``, ``'gpu'`` ..., or ``None`` when the
        token is not a device.
    """
    if not isinstance(token, str):
        return None
    tok = token.strip()[:200]
    m = _REPR_RE.fullmatch(tok)
    if m:
        base = normalise_device(m["t"])
        if base is None or not m["i"]:
            return base
        return None if ":" in base else f"{base}:{int(m['i'])}"
    tok = tok.strip("'\"`!.,;: ")
    m = _TORCH_TYPE_RE.fullmatch(tok)
    if m:  # torch.FloatTensor is the CPU type; torch.cuda.FloatTensor the CUDA one
        return "cpu" if m["t"] is None else _known(m["t"])
    m = _ATEN_TYPE_RE.fullmatch(tok)
    if m:
        return _known(m["t"])
    m = _PLAIN_RE.fullmatch(tok)
    if not m:
        return None
    b = _BACKEND_RE.fullmatch(m["t"])  # legacy backends: SparseCUDA, QuantizedCPU
    base = _known(b["t"] if b else m["t"])
    return None if base is None else (f"{base}:{int(m['i'])}" if m["i"] else base)


def _known(name: str) -> str | None:
    low = name.lower()
    low = "privateuseone" if low == "privateuse1" else low
    return low if low in _KNOWN_TYPES or low == _privateuse1_name() else None


#: The PrivateUse1 backend's new name, once torch says it was renamed (it is set once
#: per process, so it is kept).
_renamed: str | None = None


def _privateuse1_name() -> str | None:
    """The name torch's PrivateUse1 backend has in this process when an out-of-tree
    backend renamed it (torch_npu's ``npu``, OpenReg's ``openreg``), else None."""
    global _renamed
    if _renamed is not None:
        return _renamed
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        name = torch._C._get_privateuse1_backend_name()
    except Exception:  # a torch without the call, or torch half imported
        return None
    if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        return None
    if name == _DEFAULT_PRIVATEUSE1:
        return None
    _renamed = name
    return name


def _scan() -> re.Pattern[str]:
    global _renamed_scan
    renamed = _privateuse1_name()
    if renamed is None:
        return _SCAN_RE
    if _renamed_scan is None:
        _renamed_scan = _scan_re(f"{_SCAN_TYPES}|{re.escape(renamed)}")
    return _renamed_scan


def device_tokens(text: str) -> tuple[str, ...]:
    """Scan free text for devices, normalised, in order of appearance.

    Skips URLs (``meta-pytorch.github.io``), attribute and call spellings
    (``Tensor.cpu()``, ``x.cuda``, ``torch.cuda.is_available()``), advice such as
    ``torch.device('cpu')`` and hyphenated words (``non-meta``, ``CPU-only``). The bare
    ``GPU`` of checkSameGPU is left to that family: in prose it is not a device type.

    Args:
        text: Any text; only the first 20,000 characters are read.

    Returns:
        The normalised devices, duplicates kept.
    """
    if not isinstance(text, str):
        return ()
    found: list[str] = []
    low = text[:SCAN_LIMIT].lower()
    for m in _scan().finditer(low):
        if m["skip"] or (m.start() and low[m.start() - 1] in _GLUE):
            continue  # a URL, torch.device(...) advice, x.cuda, non-meta, /usr/local/cuda
        dev = normalise_device(m.group())
        if dev is not None:
            found.append(dev)
    return tuple(found)
