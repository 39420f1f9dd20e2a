"""The ``op_mismatch`` family. The classic: an operation got tensors on two devices (``Expected all tensors to be on
the same device``), in its many wordings since torch 0.4. Also the family of wordings
registered with :func:`ipydevice.message` and of unknown placement messages."""

from __future__ import annotations

import re

from ipydevice.diagnosis.devices import normalise_device
from ipydevice.family import CONV_ROLES, Family, Parts, wording

ID = "op_mismatch"

_IS_ON_RE = re.compile(r"is\s+on\s+(\w+)", re.I)
_A = r"expected all tensors to be on the same (?:common )?device,? but "


def _check_same_gpu(m: re.Match[str], parts: Parts) -> Parts:
    # "Tensor for 'out' is on CPU, Tensor for argument #1 'self' is on CPU, but expected
    # them to be on GPU": every "is on X", then the expected device.
    parts["devices"] = [normalise_device(d) for d in _IS_ON_RE.findall(m.group())]
    parts["devices"].append(normalise_device(m["dx"]))
    return parts


WORDINGS = (
    # B4 (PR #155085): names the odd argument, then the common device
    wording(
        ID,
        10,
        "different from other tensors",
        _A + r"got (?P<arg>\w+) is on (?P<d1>@D),"
        r"\s*different from other tensors on (?P<d2>@D)@E",
        off="d1",
        exp="d2",
    ),
    # A, B1-B3 (any "arugment" spelling), F', Dynamo wrappers: the order is not reliable
    wording(
        ID,
        20,
        "two",
        _A + r"found (?:at least )?two (?:different )?devices,?\s+(?P<d1>@D)"
        r"\s*(?:and|,)\s*(?P<d2>@D)@E(?:!?\s*\(when checking ar\w* for argument (?P<arg>\w+))?",
        need=2,
    ),
    wording(
        ID,
        30,
        "fake",
        r"Unhandled FakeTensor Device Propagation for (?P<op>aten\.\w+"
        r"(?:\.\w+)?),\s*found two different devices (?P<d1>@D),\s*(?P<d2>@D)@E",
    ),
    wording(
        ID,
        40,
        "expected device",
        r"Tensor on device (?P<d1>@D) is not on the expected "
        r"device (?P<d2>@D)@E",
        off="d1",
        exp="d2",
    ),
    # C legacy: type names / backends / device types, then short forms
    wording(
        ID,
        50,
        "expected object of",
        r"Expected object of (?:device )?(?:type|backend) "
        r"(?P<d1>@D) but (?:got|found) (?:device )?(?:type|backend) (?P<d2>@D) for argument #\d+ "
        r"'(?P<arg>\w+)'",
        exp="d1",
        off="d2",
        differ=True,
    ),
    wording(
        ID,
        60,
        "expected device",
        r"expected device (?P<d1>@D) but got device (?P<d2>@D)@E",
        exp="d1",
        off="d2",
        differ=True,
    ),
    wording(ID, 70, "different gpus", r"arguments are located on different GPUs", devs=()),
    wording(
        ID,
        80,
        "current device",
        r"Input, output and indices must be on the current device",
        devs=(),
    ),
    wording(
        ID,
        90,
        "received",
        r"All input tensors must be on the same device\. Received "
        r"(?P<d1>@D) and (?P<d2>@D)@E",
        op="cat",
    ),
    # D checkSameGPU (still raised by MPS mm in 2.x): GPU stays 'gpu', it may mean MPS
    wording(
        ID,
        100,
        "but expected",
        r"Tensor for (?:argument #\d+ )?'(?P<arg>\w+)' is on "
        r"(?P<d1>\w+).{0,300}?but expected (?:it|them) to be on (?P<dx>\w+)",
        off="d1",
        exp="dx",
        extra=_check_same_gpu,
    ),
    wording(
        ID,
        110,
        "does not equal",
        r"Expected tensor for argument #\d+ '(?P<arg>\w+)' to have"
        r" the same device as tensor for argument #\d+ '(?P<role>\w+)';\s*but device (?P<o1>\d+) "
        r"does not equal (?P<o2>\d+)",
        off="o1",
        exp="o2",
        roles=CONV_ROLES,
    ),
    wording(
        ID,
        140,
        "expected on",
        r"Tensor for argument (?P<arg>\w+) is on (?P<d1>@D) but "
        r"expected on (?P<d2>@D)@E",
        off="d1",
        exp="d2",
    ),
    # R op-specific wordings (observed on 2.13)
    wording(
        ID,
        360,
        "stft",
        r"stft input and (?P<arg>\w+) must be on the same device but got "
        r"self on (?P<d1>@D) and \w+ on (?P<d2>@D)@E",
        op="stft",
        exp="d1",
        off="d2",
    ),
    wording(
        ID,
        370,
        "but tensor",
        r"all tensors must be on the same device but tensor \d+ is on "
        r"(?P<d1>@D) and tensor \d+ on (?P<d2>@D)@E",
        exp="d1",
        off="d2",
    ),
    wording(
        ID,
        380,
        "input tensors must all",
        r"Input tensors must all be on the same device\. "
        r"Input \d+ is on device (?P<d1>@D) and input \d+ is on device (?P<d2>@D)@E",
        exp="d1",
        off="d2",
    ),
    wording(
        ID,
        390,
        "meshgrid",
        r"meshgrid expects all tensors to have the same device",
        devs=(),
        op="meshgrid",
    ),
    wording(
        ID,
        410,
        "dividend",
        r"Expected divisor \((?P<arg>\w+)\) to be on the same device "
        r"\((?P<d1>@D)\) as dividend \(\w+\),\s*but it is found on (?P<d2>@D)@E",
        exp="d1",
        off="d2",
    ),
    wording(
        ID,
        420,
        "expected tensor to have",
        r"Expected tensor to have (?P<d1>@D) Device"
        r"(?:Type)?,\s*but got tensor with (?P<d2>@D) Device",
        exp="d1",
        off="d2",
    ),
    wording(
        ID,
        430,
        "query.device",
        r"Expected query,\s*key,\s*and value to have the same device"
        r" type,\s*but got query\.device:\s*(?P<d1>@D) key\.device:\s*(?P<d2>@D) and "
        r"value\.device:\s*(?P<d3>@D)@E",
        op="scaled_dot_product_attention",
    ),
    wording(
        ID,
        440,
        "cross-device",
        r"copy from device (?P<d1>@D) to device (?P<d2>@D),\s*but "
        r"cross-device copies are not allowed",
    ),
    # proposed conv wording (pytorch PR #168064, not released)
    wording(
        ID,
        450,
        "same device (got",
        r"Expected (?P<arg>\w+) and (?P<role>\w+) to be on the "
        r"same device \(got (?P<d1>@D) and (?P<d2>@D)\)",
        roles=CONV_ROLES,
        differ=True,
    ),
)


FAMILY = Family(
    ID,
    "an operation received tensors on different devices",
    WORDINGS,
    title="tensors on different devices",
)
