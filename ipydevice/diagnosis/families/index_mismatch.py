"""The ``index_mismatch`` family. Indices on another device than the tensor they index (``index_select``, an
``Embedding``'s token ids). Messages of other families that name an index argument
or op are reclassified here by :mod:`ipydevice.diagnosis.recognise`."""

from __future__ import annotations

import re

from ipydevice.diagnosis.devices import normalise_device
from ipydevice.family import DEVICE, Family, MessageFacts, Parts, to_target, wording

ID = "index_mismatch"

_PAIR_RE = re.compile(rf"\((\w+)\)\s+({DEVICE})(?=[,\s]|$)")


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


WORDINGS = (
    # I, J
    wording(
        ID,
        190,
        "indexed tensor",
        r"indices should be either on \w+ or on the same "
        r"device as the indexed tensor\s*\((?P<d1>@D)\)",
        arg="indices",
        exp="d1",
    ),
    wording(
        ID,
        400,
        "in the same device",
        r"(?P<op>\w+)\(\):\s*[\w\s,]*?expected to be in "
        r"the same device,\s*but got (?P<lst>[^\n]+)",
        extra=_odd_one_out,
    ),
)


def _advice(facts: MessageFacts, target: str) -> str:
    return f"the indices must be on the CPU or where the indexed tensor is: move them{to_target(target)}"


FAMILY = Family(
    ID,
    "an indexing op got indices on another device than the indexed tensor",
    WORDINGS,
    advice=_advice,
    title="indices on another device",
)
