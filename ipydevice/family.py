"""What an error family is made of: its wordings, and the rule object that
registers it (:class:`Family`).

A family is one file of :mod:`ipydevice.diagnosis.families`: the wordings that
recognise it (:func:`wording`), a one-line summary, advice, how it chooses the
target device, a cell fix and the objects whose audits explain it. The built-in
families and a user's own register the same way, with
:func:`ipydevice.plugins.family`. It names no stage: the registry and every stage
read it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ipydevice.model import Finding, Fix

__all__ = ["CONV_ROLES", "DEVICE", "END", "Blame", "Family", "MessageFacts", "Wording", "wording"]


@dataclass(frozen=True, slots=True)
class MessageFacts:
    """What a message states about device placement.

    Attributes:
        is_device_error: True for placement problems (a registered family).
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


# --------------------------------------------------------------------------- wordings
Parts = dict[str, Any]
Extra = Callable[[re.Match[str], Parts], Parts]


@dataclass(frozen=True, slots=True)
class Wording:
    """One wording of a family. Groups d1..d3 are devices and o1, o2 bare CUDA ordinals, in order;
    ``lst`` is a span to scan generically; ``arg``, ``op`` and ``role`` name themselves.
    ``off``/``exp`` name a device group or give a constant device. ``order`` ranks
    the wordings of all families (the first whose key and pattern match wins)."""

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
    order: int = 1000


#: A device or type-name token (``@D`` in a wording), normalised afterwards.
DEVICE = r"[A-Za-z_][\w.]*?(?::\d+)?"
#: Where a device token ends (``@E``): sentence punctuation allowed.
END = r"(?=[\s!.,)'\"]|$)"
#: The roles a convolution's message may name.
CONV_ROLES = frozenset({"weight", "bias"})
_I = re.I | re.S


def wording(family: str, order: int, key: str, pattern: str, **kw: Any) -> Wording:
    """A :class:`Wording`; in ``pattern`` a literal space means "some whitespace"
    (torch reflows long messages), ``@D`` a device and ``@E`` its end."""
    rx = re.compile(pattern.replace(" ", r"\s+").replace("@D", DEVICE).replace("@E", END), _I)
    groups = tuple(
        n
        for n, _ in sorted(rx.groupindex.items(), key=lambda kv: kv[1])
        if n[0] in "do" and n[1:].isdigit()
    )
    return Wording(family, key, rx, groups, order=order, **kw)


# --------------------------------------------------------------------------- families
Advice = Callable[[MessageFacts, str], str]
# The hooks' stage objects are typed ``Any`` here, so that this interface names no
# stage: the frames are :class:`~ipydevice.collect.frames.FrameView`\ s, the cell a
# :class:`~ipydevice.collect.cell.Cell`, the scan a :class:`~ipydevice.collect.scan.Scan`
# and a blamed entry a :class:`~ipydevice.collect.scan.Entry`.
Target = Callable[[MessageFacts, Sequence[Any]], str]
CellFix = Callable[[MessageFacts, Any, str], "Fix | None"]


class Blame(NamedTuple):
    """A culprit a family names itself: the finding and the scanned object."""

    finding: Finding
    entry: Any


BlameHook = Callable[[MessageFacts, Any, Sequence[Any], str], "list[Blame] | None"]


@dataclass(frozen=True, slots=True)
class Family:
    """One kind of device error, registered as one object.

    Attributes:
        id: the family's name (``Diagnosis.family``).
        summary: what the message means, in one line.
        wordings: the messages that recognise it (:func:`wording`).
        advice: one sentence from the message alone, given ``(facts, target)``;
            by default the generic advice about moving tensors.
        target: the device things should move to, given ``(facts, frames)``,
            or ``""`` to let the usual rules choose (the evidence of the objects).
        target_reason: why the family's target, in words ("NumPy arrays live on
            the CPU"), for ``Diagnosis.target_reason``.
        blame: the culprits, given ``(facts, scan, frames, target)``, when the
            family knows them better than the usual search (None: search as usual).
        cell_fix: the failed cell rewritten, given ``(facts, cell, target)``, or None.
        audited: class names of namespace objects whose audits explain this
            family (a ``DataLoader`` for a generator error).
        from_root_logger: worth a panel when logged on the root logger.
        about_meta: the error is about meta tensors (moving the rest to meta
            is then no advice to warn about).
        title: the kind of error in a few words, for the panel's title
            ("tensors on different devices"); the summary when empty.
        moves: moving objects fixes it (False: the advice says what does, and
            no moves or rewritten cells are proposed; its culprits are still named).
    """

    id: str
    summary: str
    wordings: tuple[Wording, ...] = ()
    advice: Advice | None = None
    target: Target | None = None
    target_reason: str = ""
    blame: BlameHook | None = None
    cell_fix: CellFix | None = None
    audited: tuple[str, ...] = ()
    from_root_logger: bool = False
    about_meta: bool = False
    title: str = ""
    moves: bool = True


def devices_text(facts: MessageFacts) -> str:
    """The message's devices for advice: ``cuda:0 and cpu``."""
    return " and ".join(dict.fromkeys(facts.devices)) or "two devices"


def to_target(target: str) -> str:
    """`` to cuda:0`` for advice ending "move them", nothing when no target is known."""
    return f" to {target}" if target else ""


__all__ += ["devices_text", "to_target"]
