"""Turn the text of a PyTorch device-placement error into plain facts.

Role: the first, purely textual step of a diagnosis. Given an exception message (and its
class name), :func:`recognise` says whether it is a device-placement error, which message
family it belongs to, and what the text itself states: the devices, the schema argument,
the op, which device is wrong and which is expected. It gives no advice; callers combine
these facts with the live objects they inspect.

Contract:

* :func:`recognise` never raises, scans at most the first ``20_000`` characters, and is
  cheap (a literal keyword filter runs before each precompiled regex).
* ``MessageFacts.devices`` only holds strings that :func:`normalise_device` returns for
  itself (``normalise_device(d) == d``), in the order the message states them.
* Environment, resource, dtype and shape errors that merely mention CUDA or a device
  (out of memory, device-side assert, missing driver, ...) are *not* device errors.
* Wordings registered with :func:`ipydevice.message` (a library's own) are tried after
  the built-in ones, as ``op_mismatch``.

Families and wordings are documented in ``shared/reference/messages.md``. This module
imports nothing beyond the standard library (no torch, IPython, pandas or ipywidgets), so
it can be imported in any process and before torch is loaded.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["FAMILIES", "MessageFacts", "device_tokens", "normalise_device", "recognise"]

FAMILIES: tuple[str, ...] = (
    "op_mismatch",
    "index_mismatch",
    "conv_type_mismatch",
    "rnn_mismatch",
    "generator_mismatch",
    "load_location",
    "numpy_conversion",
    "meta_device",
    "dataparallel",
    "optimizer_state",
    "mps",
    "hf_warning",
    "xla",
)

_SCAN_LIMIT = 20_000
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
_SCAN_RE = re.compile(
    r"(?P<skip>https?://\S+|torch\.device\([^)]*\))"  # URLs; advice like map_location=
    r"|device\(type=[^)]*\)"
    rf"|torch\.(?:\w+\.)?(?:sparse\.)?{_DTYPES}tensor\b"
    rf"|{_LAYOUT}?(?:{_SCAN_TYPES})(?:{_DTYPES}type\b|(?::\d+)?(?![\w\-(]))"
)
_GLUE = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_.-/")


@dataclass(frozen=True, slots=True)
class MessageFacts:
    """What a message states about device placement.

    Attributes:
        is_device_error: True for placement problems (families in :data:`FAMILIES`).
        family: The message family, or None when ``is_device_error`` is False.
        devices: Normalised devices in the order the message states them, duplicates kept.
        argument: The schema argument the message names (``mat1``, ``index``, ``tensors``).
        op: The op the message names (``addmm``, ``aten.mm.default``, ``matmul``).
        offending: The device the wording says is wrong; None where it does not say.
        expected: The device the wording says things should be on.
        role: ``hidden``/``parameter`` for RNNs, ``weight``/``bias`` for convolutions.
        summary: One plain-English line.
    """

    is_device_error: bool
    family: str | None
    devices: tuple[str, ...]
    argument: str | None
    op: str | None
    offending: str | None
    expected: str | None
    role: str | None
    summary: str


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
    return low if low in _KNOWN_TYPES else None


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
    low = text[:_SCAN_LIMIT].lower()
    for m in _SCAN_RE.finditer(low):
        if m["skip"] or (m.start() and low[m.start() - 1] in _GLUE):
            continue  # a URL, torch.device(...) advice, x.cuda, non-meta, /usr/local/cuda
        dev = normalise_device(m.group())
        if dev is not None:
            found.append(dev)
    return tuple(found)


# --------------------------------------------------------------------------- rules
Parts = dict[str, Any]
Extra = Callable[[re.Match[str], Parts], Parts]


@dataclass(frozen=True, slots=True)
class _Rule:
    """One wording. Groups d1..d3 are devices and o1, o2 bare CUDA ordinals, in order;
    ``lst`` is a span to scan generically; ``arg``, ``op`` and ``role`` name themselves.
    ``off``/``exp`` name a device group or give a constant device."""

    family: str
    key: str  # lowercase literal that must occur: a cheap filter before the regex
    pattern: re.Pattern[str]
    dev_groups: tuple[str, ...]
    devs: tuple[str, ...] | None = None  # fixed devices; None = from the groups
    arg: str | None = None
    op: str | None = None
    off: str | None = None
    exp: str | None = None
    differ: bool = False  # need two devices that are not all equal (G, legacy type names)
    need: int = 0
    roles: frozenset[str] = frozenset({"hidden", "parameter"})
    extra: Extra | None = None


_D = r"[A-Za-z_][\w.]*?(?::\d+)?"  # a device or type-name token, normalised afterwards
_END = r"(?=[\s!.,)'\"]|$)"  # a device token ends here (sentence punctuation allowed)
_CONV = frozenset({"weight", "bias"})
_IS_ON_RE = re.compile(r"is\s+on\s+(\w+)", re.I)
_PAIR_RE = re.compile(rf"\((\w+)\)\s+({_D})(?=[,\s]|$)")


def _r(family: str, key: str, pattern: str, **kw: Any) -> _Rule:
    # A literal space means "some whitespace": torch reflows long messages.
    rx = re.compile(pattern.replace(" ", r"\s+").replace("@D", _D).replace("@E", _END), _I)
    groups = tuple(
        n
        for n, _ in sorted(rx.groupindex.items(), key=lambda kv: kv[1])
        if n[0] in "do" and n[1:].isdigit()
    )
    return _Rule(family, key, rx, groups, **kw)


def _check_same_gpu(m: re.Match[str], parts: Parts) -> Parts:
    # "Tensor for 'out' is on CPU, Tensor for argument #1 'self' is on CPU, but expected
    # them to be on GPU": every "is on X", then the expected device.
    parts["devices"] = [normalise_device(d) for d in _IS_ON_RE.findall(m.group())]
    parts["devices"].append(normalise_device(m["dx"]))
    return parts


def _odd_one_out(m: re.Match[str], parts: Parts) -> Parts:
    # "index_add(): ... but got (self) cpu, (index) meta, and (source) cpu": the argument
    # is the one operand whose device no other operand shares.
    pairs = [(n, normalise_device(d)) for n, d in _PAIR_RE.findall(m["lst"])]
    devs = [d for _, d in pairs]
    parts["devices"] = devs
    odd = [(n, d) for n, d in pairs if devs.count(d) == 1]
    if len(odd) == 1 and len(pairs) > 2:
        parts["argument"], parts["offending"] = odd[0]
        parts["expected"] = next(d for _, d in pairs if d != odd[0][1])
    return parts


def _cuda_ordinal(m: re.Match[str], parts: Parts) -> Parts:
    base = normalise_device(m["dt"])  # "on CUDA device 1" -> cuda:1
    dev = f"{base}:{int(m['di'])}" if base and ":" not in base else None
    parts["devices"], parts["offending"] = [dev], dev
    return parts


_A = r"expected all tensors to be on the same (?:common )?device,? but "
_RULES: tuple[_Rule, ...] = (
    # B4 (PR #155085): names the odd argument, then the common device
    _r(
        "op_mismatch",
        "different from other tensors",
        _A + r"got (?P<arg>\w+) is on (?P<d1>@D),"
        r"\s*different from other tensors on (?P<d2>@D)@E",
        off="d1",
        exp="d2",
    ),
    # A, B1-B3 (any "arugment" spelling), F', Dynamo wrappers: the order is not reliable
    _r(
        "op_mismatch",
        "two",
        _A + r"found (?:at least )?two (?:different )?devices,?\s+(?P<d1>@D)"
        r"\s*(?:and|,)\s*(?P<d2>@D)@E(?:!?\s*\(when checking ar\w* for argument (?P<arg>\w+))?",
        need=2,
    ),
    _r(
        "op_mismatch",
        "fake",
        r"Unhandled FakeTensor Device Propagation for (?P<op>aten\.\w+"
        r"(?:\.\w+)?),\s*found two different devices (?P<d1>@D),\s*(?P<d2>@D)@E",
    ),
    _r(
        "op_mismatch",
        "expected device",
        r"Tensor on device (?P<d1>@D) is not on the expected "
        r"device (?P<d2>@D)@E",
        off="d1",
        exp="d2",
    ),
    # C legacy: type names / backends / device types, then short forms
    _r(
        "op_mismatch",
        "expected object of",
        r"Expected object of (?:device )?(?:type|backend) "
        r"(?P<d1>@D) but (?:got|found) (?:device )?(?:type|backend) (?P<d2>@D) for argument #\d+ "
        r"'(?P<arg>\w+)'",
        exp="d1",
        off="d2",
        differ=True,
    ),
    _r(
        "op_mismatch",
        "expected device",
        r"expected device (?P<d1>@D) but got device (?P<d2>@D)@E",
        exp="d1",
        off="d2",
        differ=True,
    ),
    _r("op_mismatch", "different gpus", r"arguments are located on different GPUs", devs=()),
    _r(
        "op_mismatch",
        "current device",
        r"Input, output and indices must be on the current device",
        devs=(),
    ),
    _r(
        "op_mismatch",
        "received",
        r"All input tensors must be on the same device\. Received "
        r"(?P<d1>@D) and (?P<d2>@D)@E",
        op="cat",
    ),
    # D checkSameGPU (still raised by MPS mm in 2.x): GPU stays 'gpu', it may mean MPS
    _r(
        "op_mismatch",
        "but expected",
        r"Tensor for (?:argument #\d+ )?'(?P<arg>\w+)' is on "
        r"(?P<d1>\w+).{0,300}?but expected (?:it|them) to be on (?P<dx>\w+)",
        off="d1",
        exp="dx",
        extra=_check_same_gpu,
    ),
    _r(
        "op_mismatch",
        "does not equal",
        r"Expected tensor for argument #\d+ '(?P<arg>\w+)' to have"
        r" the same device as tensor for argument #\d+ '(?P<role>\w+)';\s*but device (?P<o1>\d+) "
        r"does not equal (?P<o2>\d+)",
        off="o1",
        exp="o2",
        roles=_CONV,
    ),
    # Q MPS wordings; the same shape with another expected device is generic
    _r(
        "mps",
        "placeholder storage",
        r"Placeholder storage has not been allocated on MPS device",
        devs=(),
        exp="mps",
    ),
    _r(
        "mps",
        "expected on",
        r"Tensor for argument (?P<arg>\w+) is on (?P<d1>@D) but expected on "
        r"(?P<d2>mps(?::\d+)?)\b",
        off="d1",
        exp="d2",
    ),
    _r(
        "op_mismatch",
        "expected on",
        r"Tensor for argument (?P<arg>\w+) is on (?P<d1>@D) but "
        r"expected on (?P<d2>@D)@E",
        off="d1",
        exp="d2",
    ),
    _r(
        "mps",
        "_mps",
        r"(?P<op>\w+_mps):\s*(?P<arg>\w+)\(device='?(?P<d1>[\w:]+)'?\) and "
        r"(?P<role>\w+)\(device='?(?P<d2>[\w:]+)'?\) must be on the same device",
        roles=_CONV,
    ),
    # G: a device mismatch reported as a type mismatch, only when the devices differ
    _r(
        "conv_type_mismatch",
        "type (",
        r"Input type \((?P<d1>[^()]+)\) and (?P<role>weight|bias) "
        r"type \((?P<d2>[^()]+)\) should be the same",
        differ=True,
        roles=_CONV,
    ),
    # H; pack_padded_sequence lengths (a CPU tensor with the wrong dtype is not a device error)
    _r(
        "rnn_mismatch",
        "not at the same device",
        r"Input and (?P<role>parameter|hidden) tensors "
        r"are not at the same device,\s*found input tensor at (?P<d1>@D) and \w+ tensor at "
        r"(?P<d2>@D)@E",
    ),
    _r(
        "rnn_mismatch",
        "'lengths'",
        r"'(?P<arg>lengths)' argument should be a 1D (?P<d1>\w+) "
        r"int64 tensor,\s*but got \d+D (?P<d2>@D) \w+ tensor",
        exp="d1",
        off="d2",
        differ=True,
    ),
    # I, J
    _r(
        "index_mismatch",
        "indexed tensor",
        r"indices should be either on \w+ or on the same "
        r"device as the indexed tensor\s*\((?P<d1>@D)\)",
        arg="indices",
        exp="d1",
    ),
    _r(
        "generator_mismatch",
        "for generator",
        r"Expected an? '(?P<d1>@D)' device type for "
        r"generator but found '(?P<d2>@D)'",
        arg="generator",
        exp="d1",
        off="d2",
    ),
    # K torch.load: the tagged device, then the map_location target when one is suggested
    _r(
        "load_location",
        "deserialize",
        r"deserialize object on an? (?P<d1>\w+) device but "
        r"torch\.\w+\.is_available\(\) is False(?:.{0,300}?map_location\s*=\s*torch\.device\(\s*"
        r"'(?P<d2>[\w:]+)'\s*\))?",
        off="d1",
        exp="d2",
    ),
    _r(
        "load_location",
        "deserialize",
        r"deserialize object on (?P<dt>\w+) device (?P<di>\d+) "
        r"but torch\.\w+\.device_count\(\) is \d+",
        extra=_cuda_ordinal,
    ),
    _r(
        "load_location",
        "restore data location",
        r"restore data location of \S+ \(tagged with "
        r"(?P<d1>[\w:]+)\)",
        off="d1",
    ),
    _r(
        "load_location",
        "storage device not recognized",
        r"Storage device not recognized:\s*"
        r"(?P<d1>@D)@E",
        off="d1",
    ),
    # L numpy (pre-1.5 said "CUDA tensor"; FakeTensor has its own wording)
    _r(
        "numpy_conversion",
        "numpy",
        r"can't convert (?P<d1>@D) (?:device type )?tensor to numpy",
        off="d1",
        exp="cpu",
        need=1,
    ),
    _r(
        "numpy_conversion",
        "tensor subclasses",
        r"\.numpy\(\) is not supported for tensor "
        r"subclasses",
        devs=(),
    ),
    # M meta: the fix is to materialise, not to move
    _r(
        "meta_device",
        "meta",
        r"Cannot copy out of meta tensor|cannot be called on meta tensors|"
        r"non-meta parameter.{0,80}?to a meta parameter|Cannot inplace into non-meta tensor "
        r"with meta tensor",
        devs=("meta",),
        off="meta",
    ),
    # N DataParallel / DDP
    _r(
        "dataparallel",
        "device_ids[0]",
        r"module must have its parameters and buffers on device "
        r"(?P<d1>@D) \(device_ids\[0\]\) but found one of them on device:\s*(?P<d2>@D)@E",
        exp="d1",
        off="d2",
    ),
    _r(
        "dataparallel",
        "same type of devices",
        r"same type of devices,\s*but input module "
        r"parameters locate in \{(?P<lst>[^}]*)\}",
    ),
    _r(
        "dataparallel",
        "device_ids and output_device",
        r"device_ids and output_device arguments "
        r"only work with.{0,200}?module parameters \{(?P<lst>[^}]*)\}",
        arg="device_ids",
    ),
    # O optimizer: foreach names no device ("CPU" there is about `step`); capturable lists
    _r(
        "optimizer_state",
        "same index",
        r"Tensors of the same index must be on the same device",
        devs=(),
    ),
    _r(
        "optimizer_state",
        "capturable",
        r"capturable=(?:True|False),\s*(?:params and )?"
        r"state_steps (?:must|should)[^\[]*?(?:\[(?P<lst>[^\]]*)\]|tensors)",
    ),
    # P Hugging Face generate() warning and accelerate dispatch/offload messages
    _r(
        "hf_warning",
        "generate()",
        r"\.generate\(\) with the `(?P<arg>\w+)` being on a device type"
        r" different.{0,200}?is on (?P<d1>@D),\s*whereas the model is on (?P<d2>@D)@E",
        off="d1",
        exp="d2",
    ),
    _r(
        "hf_warning",
        "a model that",
        r"move a model that (?:is dispatched|has some modules "
        r"offloaded)|a model that has been loaded in \d+-bit precision on a different device",
    ),
    _r(
        "hf_warning",
        "offloaded",
        r"parameters are on the meta device(?: device)? because they "
        r"were offloaded",
    ),
    # R op-specific wordings (observed on 2.13)
    _r(
        "op_mismatch",
        "stft",
        r"stft input and (?P<arg>\w+) must be on the same device but got "
        r"self on (?P<d1>@D) and \w+ on (?P<d2>@D)@E",
        op="stft",
        exp="d1",
        off="d2",
    ),
    _r(
        "op_mismatch",
        "but tensor",
        r"all tensors must be on the same device but tensor \d+ is on "
        r"(?P<d1>@D) and tensor \d+ on (?P<d2>@D)@E",
        exp="d1",
        off="d2",
    ),
    _r(
        "op_mismatch",
        "input tensors must all",
        r"Input tensors must all be on the same device\. "
        r"Input \d+ is on device (?P<d1>@D) and input \d+ is on device (?P<d2>@D)@E",
        exp="d1",
        off="d2",
    ),
    _r(
        "op_mismatch",
        "meshgrid",
        r"meshgrid expects all tensors to have the same device",
        devs=(),
        op="meshgrid",
    ),
    _r(
        "index_mismatch",
        "in the same device",
        r"(?P<op>\w+)\(\):\s*[\w\s,]*?expected to be in "
        r"the same device,\s*but got (?P<lst>[^\n]+)",
        extra=_odd_one_out,
    ),
    _r(
        "op_mismatch",
        "dividend",
        r"Expected divisor \((?P<arg>\w+)\) to be on the same device "
        r"\((?P<d1>@D)\) as dividend \(\w+\),\s*but it is found on (?P<d2>@D)@E",
        exp="d1",
        off="d2",
    ),
    _r(
        "op_mismatch",
        "expected tensor to have",
        r"Expected tensor to have (?P<d1>@D) Device"
        r"(?:Type)?,\s*but got tensor with (?P<d2>@D) Device",
        exp="d1",
        off="d2",
    ),
    _r(
        "op_mismatch",
        "query.device",
        r"Expected query,\s*key,\s*and value to have the same device"
        r" type,\s*but got query\.device:\s*(?P<d1>@D) key\.device:\s*(?P<d2>@D) and "
        r"value\.device:\s*(?P<d3>@D)@E",
        op="scaled_dot_product_attention",
    ),
    _r(
        "op_mismatch",
        "cross-device",
        r"copy from device (?P<d1>@D) to device (?P<d2>@D),\s*but "
        r"cross-device copies are not allowed",
    ),
    # proposed conv wording (pytorch PR #168064, not released)
    _r(
        "op_mismatch",
        "same device (got",
        r"Expected (?P<arg>\w+) and (?P<role>\w+) to be on the "
        r"same device \(got (?P<d1>@D) and (?P<d2>@D)\)",
        roles=_CONV,
        differ=True,
    ),
    _r(
        "xla",
        "not an xla tensor",
        r"Input tensor is not an XLA tensor:\s*(?P<d1>[\w.]+)",
        off="d1",
        exp="xla",
    ),
)


# ------------------------------------------------------------------ ops, near misses
_OP_RES: tuple[re.Pattern[str], ...] = (
    # wrapper_<KEY>_<name>: drop the dispatch key and the one separating underscore, so
    # wrapper_CUDA___slow_conv2d_forward -> _slow_conv2d_forward (case-sensitive on purpose)
    re.compile(r"\bin\s+method\s+wrapper_(?:[A-Z][A-Za-z0-9]*_)?_?(\w+)"),
    re.compile(r"\bin\s+call\s+to\s+(?:_thnn_|_th_)?(\w+)"),
    re.compile(r"while\s+checking\s+arguments\s+for\s+(?:torch\.)?(\w+)"),
    re.compile(r"\b(aten\.\w+(?:\.\w+)?)"),
    re.compile(r"^\s*(\w+)\(\):"),
    re.compile(r"call_function\s+<(?:built-in\s+)?(?:function|method)\s+(\w+)"),
    re.compile(r"call_method\s+(\w+)"),
)
_INDEX_OPS = frozenset(
    {
        "index_select",
        "index_add",
        "index_copy",
        "index_fill",
        "index_put",
        "index_reduce",
        "_index_put_impl",
        "index",
    }
)
# Resource, environment, dtype and shape errors that mention CUDA or a device in passing.
# Checked only when no family matched, so a real mismatch followed by a CUDA hint stays one.
# "invalid device ordinal" (cuda:1 on a one-GPU machine) is an environment error too.
_NEAR_MISS_RE = re.compile(
    r"out\s+of\s+memory|outofmemory|device-side\s+assert|no\s+kernel\s+image|no\s+nvidia\s+"
    r"driver|not\s+compiled\s+with\s+\w+\s+enabled|not\s+linked\s+with\s+support|invalid\s+"
    r"device\s+ordinal|cuda\s+error:|cublas_status|cudnn_status|illegal\s+memory\s+access|"
    r"scalar\s+types?\b|same\s+dtype|dtype\b.{0,80}?\bdoes\s+not\s+match|should\s+be\s+the\s+same"
    r"|requires\s+grad|shapes\s+cannot\s+be\s+multiplied|size\s+mismatch|unknown\s+device|"
    r"device\s+string|invalid\s+device|device\s+index|expected\s+one\s+of\s+cpu",
    re.S,
)
# Fallback (run on lower-cased text): placement wording, then two distinct devices or an
# explicit "tensors ... on different devices"
_PLACEMENT_RE = re.compile(
    r"same\s+(?:common\s+)?device|different\s+(?:devices?|gpus)|expected\s+(?:on\s+)?(?:the\s+)?"
    r"device|another\s+device|must\s+(?:all\s+)?be\s+on|not\s+on\s+the\s+expected|located\s+"
    r"on|device\s+type|device\s+mismatch|is\s+on\s+\w+(?::\d+)?\s*,?\s+but"
)
_DIFFERENT_RE = re.compile(
    r"\b(?:tensors?|arguments?|inputs?|operands?)\b[^.\n]{0,60}?"
    r"\bon\s+(?:two\s+|multiple\s+)?different\s+(?:devices|gpus)"
)
_ALWAYS_DEVICE = frozenset({"FakeTensorDeviceMismatchError"})
_NEVER_DEVICE = frozenset({"OutOfMemoryError", "AcceleratorError", "CudaError"})
_NOT_DEVICE = MessageFacts(
    False, None, (), None, None, None, None, None, "not a device-placement error"
)
_SUMMARIES = {
    "op_mismatch": "an operation received tensors on different devices",
    "index_mismatch": "an indexing op got indices on another device than the indexed tensor",
    "conv_type_mismatch": "a convolution's input and parameters are on different devices",
    "rnn_mismatch": "an RNN's input and its weights, hidden state or lengths disagree on device",
    "generator_mismatch": "a random generator is on another device than the tensors it fills",
    "load_location": "a checkpoint names a device that is not available (use map_location)",
    "numpy_conversion": "a tensor that is not on the CPU was converted to NumPy",
    "meta_device": "a meta tensor (shape only, no data) was used where data is needed",
    "dataparallel": "a (Distributed)DataParallel model's parameters are on unexpected devices",
    "optimizer_state": "optimizer state is on a different device from the parameters",
    "mps": "an op on Apple MPS got a tensor that is not on the MPS device",
    "hf_warning": "a Hugging Face / accelerate model and its inputs or dispatch disagree",
    "xla": "a non-XLA tensor was passed where an XLA tensor was expected",
}


# ------------------------------------------------------------------------ recognise
def _find_op(text: str) -> str | None:
    for pattern in _OP_RES:
        m = pattern.search(text)
        if m:
            return m.group(1)
    return None


def _group_device(m: re.Match[str], name: str) -> str | None:
    raw = m.groupdict().get(name)
    if raw is None:
        return None
    return f"cuda:{int(raw)}" if name.startswith("o") else normalise_device(raw)


def _default_parts(rule: _Rule, m: re.Match[str], text: str) -> Parts:
    if rule.devs is not None:
        devices: list[str | None] = list(rule.devs)
    elif rule.dev_groups:
        devices = [_group_device(m, n) for n in rule.dev_groups]
    else:  # a list such as {'cuda', 'cpu'}, or else the whole message
        span = m.groupdict().get("lst")
        devices = list(device_tokens(span if span else text))

    def pick(spec: str | None) -> str | None:  # a group name or a constant device
        if spec is not None and spec in m.re.groupindex:
            return _group_device(m, spec)
        return spec

    groups = m.groupdict()
    role = groups.get("role")
    return {
        "devices": devices,
        "argument": groups.get("arg") or rule.arg,
        "op": groups.get("op") or rule.op,
        "offending": pick(rule.off),
        "expected": pick(rule.exp),
        "role": role.lower() if role else None,
    }


def _facts(
    family: str,
    devices: tuple[str, ...],
    arg: str | None = None,
    op: str | None = None,
    off: str | None = None,
    exp: str | None = None,
    role: str | None = None,
) -> MessageFacts:
    detail = [f"devices {', '.join(devices)}"] if devices else []
    detail += [f"argument '{arg}'"] if arg else []
    detail += [f"op {op}"] if op else []
    summary = _SUMMARIES[family] + (f" ({'; '.join(detail)})" if detail else "")
    return MessageFacts(True, family, devices, arg, op, off, exp, role, summary)


def _apply(rule: _Rule, m: re.Match[str], text: str) -> MessageFacts | None:
    parts = _default_parts(rule, m, text)
    if rule.extra is not None:
        parts = rule.extra(m, parts)
    devices = tuple(d for d in parts["devices"] if d)
    if len(devices) < rule.need or (rule.differ and len(set(devices)) < 2):
        return None  # e.g. G with the same device on both sides is a dtype error
    arg: str | None = parts["argument"]
    op: str | None = parts["op"] or _find_op(text)
    family = rule.family
    bare_op = op.removeprefix("aten.").split(".")[0] if op else None
    if family == "op_mismatch" and (arg in ("index", "indices") or bare_op in _INDEX_OPS):
        family = "index_mismatch"  # the fix is about the index tensor
    conv = op is not None and "conv" in op
    role = parts["role"] if parts["role"] in rule.roles | (_CONV if conv else set()) else None
    if role is None and conv and arg in _CONV:
        role = arg
    return _facts(family, devices, arg, op, parts["offending"], parts["expected"], role)


def _recognise(message: str, exc_type: str) -> MessageFacts:
    text = (message if isinstance(message, str) else str(message))[:_SCAN_LIMIT]
    exc = str(exc_type or "").replace("::", ".").rsplit(".", 1)[-1].strip()
    if exc in _NEVER_DEVICE:
        return _NOT_DEVICE
    low = text.lower()
    for rule in _RULES:
        if rule.key in low:
            m = rule.pattern.search(text)
            facts = _apply(rule, m, text) if m else None
            if facts is not None:
                return facts
    if exc in _ALWAYS_DEVICE:
        return _facts("op_mismatch", device_tokens(text), op=_find_op(text))
    plugged = _registered(text, exc)
    if plugged is not None:
        return plugged
    if _NEAR_MISS_RE.search(low) or not _PLACEMENT_RE.search(low):
        return _NOT_DEVICE
    devices = device_tokens(text)
    if len(set(devices)) >= 2 or _DIFFERENT_RE.search(low):
        return _facts("op_mismatch", devices, op=_find_op(text))
    return _NOT_DEVICE


def _registered(text: str, exc: str) -> MessageFacts | None:
    """A wording registered with :func:`ipydevice.message`, as an ``op_mismatch``."""
    plugins = sys.modules.get("ipydevice.plugins")  # never imported: nothing registered
    found = plugins.match_message(text, exc) if plugins is not None else None
    if found is None:
        return None
    groups, matched = found
    off, exp = (normalise_device(groups.get(k, "")) for k in ("offending", "expected"))
    named = tuple(d for d in (off, exp) if d)
    devices = named if len(named) == 2 else device_tokens(matched) or device_tokens(text)
    return _facts("op_mismatch", devices, groups.get("argument"), groups.get("op"), off, exp, None)


def recognise(message: str, exc_type: str = "RuntimeError") -> MessageFacts:
    """Recognise a PyTorch device-placement message and extract what it states.

    Args:
        message: The exception text (after ``ExceptionType: ``), a warning or log line.
            Any string is accepted; only the first 20,000 characters are read.
        exc_type: The exception class name, possibly dotted
            (``torch._dynamo.exc.TorchRuntimeError``); only the last part is used.
            ``OutOfMemoryError`` is never a device error; ``FakeTensorDeviceMismatchError``
            always is.

    Returns:
        A :class:`MessageFacts`. ``is_device_error`` is False and ``family`` None for
        anything that is not a placement problem. Never raises.
    """
    try:
        return _recognise(message, exc_type)
    except Exception:  # the contract is "never raises": an error hook must not fail
        return _NOT_DEVICE
