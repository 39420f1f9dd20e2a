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

Each family's wordings live in its own file (:mod:`ipydevice.diagnosis.families`); this
module tries the registered wordings in order, then the generic placement test. It
imports no torch, IPython, pandas or ipywidgets, so it can be imported in any process
and before torch is loaded.
"""

from __future__ import annotations

import re
import sys

from ipydevice import registry
from ipydevice.diagnosis import families
from ipydevice.diagnosis.devices import SCAN_LIMIT, device_tokens, normalise_device
from ipydevice.family import CONV_ROLES, MessageFacts, Parts, Wording

__all__ = ["FAMILIES", "MessageFacts", "device_tokens", "normalise_device", "recognise"]

#: The built-in families' ids (``ipydevice.plugins.families()`` lists the registered ones).
FAMILIES: tuple[str, ...] = tuple(f.id for f in families.BUILTIN)
#: The family of unknown placement wordings and of :func:`ipydevice.message`'s.
GENERIC = families.op_mismatch.ID
#: Where a message naming an index argument or op belongs, whatever its wording.
INDEX = families.index_mismatch.ID

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
    r"\b(?:tensors?|arguments?|inputs?|operands?|parameters?)\b[^.\n]{0,60}?"
    r"\b(?:on\s+(?:two\s+|multiple\s+)?different\s+(?:devices|gpus)|(?:must|should|need\s+to)"
    r"\s+(?:all\s+)?be\s+on\s+the\s+same\s+device|(?:are|were)\s+not\s+(?:all\s+)?on\s+the\s+same\s+device)"
)
_ALWAYS_DEVICE = frozenset({"FakeTensorDeviceMismatchError"})
_NEVER_DEVICE = frozenset({"OutOfMemoryError", "AcceleratorError", "CudaError"})
_NOT_DEVICE = MessageFacts(
    False, None, (), None, None, None, None, None, "not a device-placement error"
)


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


def _default_parts(rule: Wording, m: re.Match[str], text: str) -> Parts:
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
    registered = registry.family_of(family)
    summary = (registered.summary if registered is not None else family) + (
        f" ({'; '.join(detail)})" if detail else ""
    )
    return MessageFacts(True, family, devices, arg, op, off, exp, role, summary)


def _apply(rule: Wording, m: re.Match[str], text: str) -> MessageFacts | None:
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
    if family == GENERIC and (arg in ("index", "indices") or bare_op in _INDEX_OPS):
        family = INDEX  # the fix is about the index tensor
    conv = op is not None and "conv" in op
    role = parts["role"] if parts["role"] in rule.roles | (CONV_ROLES if conv else set()) else None
    if role is None and conv and arg in CONV_ROLES:
        role = arg
    return _facts(family, devices, arg, op, parts["offending"], parts["expected"], role)


def _recognise(message: str, exc_type: str) -> MessageFacts:
    text = (message if isinstance(message, str) else str(message))[:SCAN_LIMIT]
    exc = str(exc_type or "").replace("::", ".").rsplit(".", 1)[-1].strip()
    if exc in _NEVER_DEVICE:
        return _NOT_DEVICE
    low = text.lower()
    for rule in registry.wordings():
        if rule.key in low:
            m = rule.pattern.search(text)
            facts = _apply(rule, m, text) if m else None
            if facts is not None:
                return facts
    if exc in _ALWAYS_DEVICE:
        return _facts(GENERIC, device_tokens(text), op=_find_op(text))
    plugged = _registered(text, exc)
    if plugged is not None:
        return plugged
    if _NEAR_MISS_RE.search(low) or not _PLACEMENT_RE.search(low):
        return _NOT_DEVICE
    devices = device_tokens(text)
    if len(set(devices)) >= 2 or _DIFFERENT_RE.search(low):
        return _facts(GENERIC, devices, op=_find_op(text))
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
    return _facts(GENERIC, devices, groups.get("argument"), groups.get("op"), off, exp, None)


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
