"""Ranking the objects on the wrong device, once the target is chosen.

The target (where things *should* go) is chosen by :mod:`ipydevice.diagnosis.demands`
when the message demands a device for one argument, else by
:mod:`ipydevice.diagnosis.targets` from the evidence of the objects.

A culprit is an object that took part and sits elsewhere. Some mixes are legal
and never blamed: a 0-dim CPU tensor (a scalar), a CPU tensor used only as an
index, Adam's CPU ``step`` (unless capturable/fused). When operands of the failing
statement are off-target, only they (and the failing module's own misplaced
parts) are named, so locals that merely sit nearby do not drown the answer.

:class:`Analysis` holds live entries for :mod:`ipydevice.fixes.propose` and is transient.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ipydevice import registry
from ipydevice.collect import probe
from ipydevice.collect.frames import FrameView
from ipydevice.collect.holders.base import class_dicts
from ipydevice.collect.scan import Entry, Scan, descends
from ipydevice.diagnosis.demands import demanded
from ipydevice.diagnosis.indexed import indexed_follows
from ipydevice.diagnosis.materials import state_dict_for
from ipydevice.diagnosis.operands import kept_on_cpu, loaders_data, named_operands
from ipydevice.diagnosis.placed import placed_part
from ipydevice.diagnosis.split import split_part
from ipydevice.diagnosis.targets import choose_target, concrete, named_by_message, same_device
from ipydevice.family import MessageFacts
from ipydevice.model import OPTIMIZER_STATE, Finding
from ipydevice.wording import plural

__all__ = [
    "DEVICE_NAMES",
    "Analysis",
    "Culprit",
    "analyse",
    "choose_target",
    "device_variable",
    "named_by_message",
    "regrouped",
    "same_device",
]

_TENSOR_KINDS = ("tensor", "parameter", "buffer", "attribute")


@dataclass(eq=False)
class Culprit:
    """A finding plus the live entries behind it (transient)."""

    finding: Finding
    entries: list[Entry]
    owner: Entry | None = None


def regrouped(found: list[Culprit], merged: dict[int, Culprit]) -> list[Culprit]:
    """``found`` with each culprit ``merged`` maps (by id) replaced by its group, the
    group where the first of its members was."""
    out: list[Culprit] = []
    for culprit in found:
        group = merged.get(id(culprit), culprit)
        if group not in out:
            out.append(group)
    return out


@dataclass(eq=False)
class Analysis:
    """Target, culprits and causes, with live entries for the fixes (transient)."""

    target: str = ""
    #: why the target, in one line ("cuda:0: where `model`'s parameters are")
    target_reason: str = ""
    #: the user's variable holding the target (``device``), for the fixes' code
    device_name: str = ""
    found: list[Culprit] = field(default_factory=list)
    causes_found: list[Culprit] = field(default_factory=list)
    #: the namespace name of the state dict the meta model is to be loaded from
    state_dict: str = ""
    state_dict_device: str = ""
    #: the devices the message names: objects elsewhere did not meet in the operation
    message_devices: tuple[str, ...] = ()
    #: the one argument the target is for, when the message demands its device
    #: (``lengths``): the other tensors keep their devices
    argument: str = ""
    top_module: Entry | None = None
    failing_module: Entry | None = None
    #: the failing part's device, when the model is split across devices on purpose
    split: str = ""
    #: the user's statement that put the failing part there (``enc.to('cpu')``)
    placed: str = ""
    notes: tuple[str, ...] = ()

    @property
    def culprits(self) -> tuple[Finding, ...]:
        return tuple(c.finding for c in self.found)

    @property
    def causes(self) -> tuple[Finding, ...]:
        return tuple(c.finding for c in self.causes_found)


def analyse(
    facts: MessageFacts,
    scan: Scan,
    views: list[FrameView],
    namespace: Mapping[str, Any] | None = None,
) -> Analysis:
    """Chooses the target and finds culprits among what ``scan`` saw (``namespace``:
    where a meta model's state dict may be at hand)."""
    analysis = Analysis(message_devices=facts.devices)
    analysis.failing_module = _failing_module(scan, views)
    analysis.top_module = _top_module(scan)
    analysis.split = split_part(scan, analysis.failing_module, analysis.top_module, views)
    if not analysis.split:  # a part the user's own code put on the CPU
        analysis.split, analysis.placed = placed_part(
            _forward_owner(views), analysis.top_module, scan.namespace
        )
    applied = demanded(facts, scan, views)
    followed = indexed_follows(applied, scan, views) if applied is not None else None
    if followed is not None:  # the indexed tensor goes where the computation is
        target, because, applied = followed.target, followed.reason, None
    elif applied is not None:
        target, because = applied.target, applied.demand.rule.format(device=applied.target)
        analysis.argument = applied.demand.argument if applied.demand.only else ""
    else:
        target, because = choose_target(facts, scan, analysis, views)
        target, because = _materialised(facts, scan, analysis, namespace, target, because)
    analysis.target = concrete(target, scan, bool(views))
    if analysis.target and because:
        analysis.target_reason = f"{analysis.target}: {because}"
    _name_optimizer_state(scan)
    family = registry.family_of(facts.family)
    blamed = family.blame(facts, scan, views, analysis.target) if family and family.blame else None
    if blamed is not None:  # the family knows its culprits best (a generator passed)
        analysis.found = [Culprit(b.finding, [b.entry], owner=b.entry) for b in blamed]
    elif applied is not None and applied.demand.only:
        analysis.found = [
            _demanded_culprit(e, applied.demand.argument, analysis.target) for e in applied.entries
        ]
    elif analysis.target:
        met = named_operands(facts, views)
        found = _rank(_find(scan, analysis), analysis, scan, met)
        kept = set() if same_device(analysis.target, "cpu") else kept_on_cpu(views)
        kept |= loaders_data([e for c in found for e in c.entries])
        stays = [c for c in found if c.entries and all(id(e.obj) in kept for e in c.entries)]
        analysis.found = [c for c in found if c not in stays] or found
    if followed is not None:
        obj = followed.entry.obj
        same = [
            c
            for c in analysis.found
            if (c.owner is not None and c.owner.obj is obj) or any(e.obj is obj for e in c.entries)
        ]
        if same and followed.entry.kind == "module":
            first = same[0]  # (a module's own finding says what it holds, and where)
        else:
            first = Culprit(
                _finding(followed.entry, followed.why, analysis.target), [followed.entry]
            )
        analysis.found = [first, *(c for c in analysis.found if c not in same)]
    if analysis.target == "meta" and not (family and family.about_meta):
        analysis.notes = (
            "meta tensors hold no data: if the model should be real, materialise it "
            "(to_empty, then load its weights) rather than moving the rest to meta",
        )
    return analysis


def _materialised(
    facts: MessageFacts,
    scan: Scan,
    analysis: Analysis,
    namespace: Mapping[str, Any] | None,
    target: str,
    because: str,
) -> tuple[str, str]:
    """A model wholly on meta with its state dict at hand is not meant to stay on
    meta: the target is the other device the message names, and the fix loads the
    weights (``assign=True``) rather than allocating uninitialised memory."""
    top = analysis.top_module
    if namespace is None or top is None or top.module is None or not top.named:
        return target, because
    if top.module.majority() != "meta" or len(top.module.shares()) != 1:
        return target, because
    others = [d for d in dict.fromkeys(facts.devices) if d not in ("meta", "gpu")]
    if len(others) != 1:
        return target, because
    found = state_dict_for(top.obj, namespace, scan.namespace_roots(namespace))
    if found is None:
        return target, because
    analysis.state_dict, analysis.state_dict_device = found.name, found.device
    return others[0], f"the device besides meta: `{top.name}` is to be loaded from `{found.name}`"


# -- which modules take part -------------------------------------------------------------


def _module_entries(scan: Scan) -> list[Entry]:
    return [e for e in scan.entries.values() if e.module is not None]


def _failing_module(scan: Scan, views: list[FrameView]) -> Entry | None:
    """The module whose ``forward`` was running innermost (not a constructor or
    a helper of a wrapper such as DDP's ``_log_and_throw``)."""
    for view in reversed(views):
        owner = view.self_module
        if (
            owner is not None
            and view.frame.f_code.co_name == "forward"
            and id(owner) in scan.entries
        ):
            return scan.entries[id(owner)]
    return None


def _forward_owner(views: list[FrameView]) -> Any:
    """The module whose ``forward`` ran innermost, a scan entry or not (a layer of a
    ``ModuleDict`` called as ``m['dec'](h)`` is its model's part, not an entry)."""
    for view in reversed(views):
        owner = view.self_module
        if owner is not None and view.frame.f_code.co_name == "forward":
            return owner
    return None


def _top_module(scan: Scan) -> Entry | None:
    """The user's model: the biggest module with parameters that a user frame's
    failing line used, else the biggest module with parameters that took part."""

    def size(entry: Entry) -> int:
        assert entry.module is not None
        if entry.module.registered:
            return len(entry.module.registered)
        # A model whose layers all sit in a plain list (.to() misses them) is a model.
        return sum(len(members) for _, members, _ in entry.module.plain_lists)

    # (an alias's owner found in the namespace did not run: no model taking part)
    modules = [e for e in _module_entries(scan) if size(e) > 0 and not e.owns_alias]
    called = [e for e in modules if e.on_line]
    if called:
        outermost = min(e.frame for e in called)
        return max((e for e in called if e.frame == outermost), key=size)
    return max(modules, key=size, default=None)


# -- culprits -------------------------------------------------------------------------------


def _name_optimizer_state(scan: Scan) -> None:
    """State tensors are shown as ``opt.state[model.fc.weight]['exp_avg']``."""
    for entry in list(scan.entries.values()):
        if entry.optimizer is None:
            continue
        for param, key, tensor, _ in entry.optimizer.state:
            owner = scan.entries.get(id(param))
            label = owner.name if owner is not None else "…"
            state_name = f"{entry.name}.state[{label}][{key!r}]"
            found = scan.entries.get(id(tensor))
            if found is not None:
                found.path, found.named, found.kind = (
                    (("local", state_name),),
                    True,
                    "optimizer state",
                )
                found.where = entry.where


def _find(scan: Scan, analysis: Analysis) -> list[Culprit]:
    target = analysis.target
    found: list[Culprit] = []
    state_ids = _optimizer_state_ids(scan)
    grouped: set[int] = set()
    modules = []
    for entry in _module_entries(scan) if not analysis.split else ():  # (parts placed on purpose)
        culprit = _module_culprit(entry, target, scan, analysis)
        if culprit is not None and not _elsewhere(culprit.finding.device, analysis):
            modules.append(culprit)
            grouped.update(id(e.obj) for e in culprit.entries)
    # A block wholly off the target is named, not each of its layers: a layer held
    # in a plain list, or a block of several layers (a head added after .to()).
    listed = {id(m) for e in _module_entries(scan) for _, ms, _ in _plain(e) for _, m in ms}
    blocks = [
        c.owner
        for c in modules
        if c.owner is not None and (id(c.owner.obj) in listed or _layers(c.owner) > 1)
    ]
    found.extend(
        c
        for c in modules
        if c.owner is None or not any(o is not c.owner and descends(c.owner, o) for o in blocks)
    )
    for entry in scan.entries.values():
        if (
            entry.kind not in _TENSOR_KINDS
            or id(entry.obj) in grouped
            or id(entry.obj) in state_ids
            or (analysis.split and entry.parent_kind == "module")
        ):
            continue
        why = _tensor_problem(entry, target)
        if why and not _elsewhere(entry.device, analysis):
            if entry.alias and entry.alias != entry.name:
                why += f" (also held as `{entry.alias}`)"
            found.append(Culprit(_finding(entry, why, target), [entry]))
    for entry in list(scan.entries.values()):
        if entry.optimizer is not None:
            culprit = _optimizer_culprit(entry, scan)
            if culprit is not None:
                found.append(culprit)
    # A container is not blamed: its misplaced items are, by name.
    return [c for c in found if c.entries[0].kind != "container"]


def _demanded_culprit(entry: Entry, argument: str, target: str) -> Culprit:
    why = f"passed as `{argument}`, on {entry.device}: the error message demands it on {target}"
    return Culprit(_finding(entry, why, target, rule="demanded"), [entry])


def _elsewhere(device: str, analysis: Analysis) -> bool:
    """On a device the message does not name: it did not meet in the operation
    (a ``meta`` skeleton beside a cuda:0 and cpu error)."""
    return device != "mixed" and not named_by_message(device, analysis.message_devices)


def _plain(entry: Entry) -> list[Any]:
    return entry.module.plain_lists if entry.module is not None else []


def _layers(entry: Entry) -> int:
    """How many of a module's submodules (itself included) hold its tensors."""
    assert entry.module is not None
    return len({rel[:-1] for rel, _, _ in entry.module.registered})


def _optimizer_state_ids(scan: Scan) -> set[int]:
    ids: set[int] = set()
    for entry in scan.entries.values():
        if entry.optimizer is not None:
            ids.update(id(t) for _, _, t, _ in entry.optimizer.state)
    return ids


def _tensor_problem(entry: Entry, target: str) -> str:
    device = entry.device  # the common answer, "on target", needs no other fact
    if device == "?" or same_device(device, target):
        return ""
    shape = entry.facts.shape
    if shape == "()" and device == "cpu":
        return ""  # a CPU scalar takes part in any device's op
    if entry.is_index and device == "cpu":
        return ""  # CPU indices are allowed for any indexed tensor
    if entry.kind == "attribute":
        return f"a plain tensor attribute on {device}: module.to() never moves it, the model is on {target}"
    if entry.parent_kind == "module":
        return f"a {entry.kind} of its module, on {device}; the computation runs on {target}"
    return f"on {device}, but the computation runs on {target}"


def _finding(
    entry: Entry, why: str, target: str, kind: str | None = None, rule: str = "wrong_device"
) -> Finding:
    device = entry.device if entry.kind in _TENSOR_KINDS else (kind or "")
    return Finding(
        name=entry.name,
        device=device,
        kind=kind or entry.kind,
        where=entry.where,
        why=why,
        rule=rule,
        target=target,
    )


def _module_culprit(entry: Entry, target: str, scan: Scan, analysis: Analysis) -> Culprit | None:
    """A submodule wholly off-target (a head added after .to()) or off-target parts."""
    view = entry.module
    assert view is not None
    # A module whose class moves its own plain tensors (its own ``_apply``: a
    # torchmetrics Metric's states) holds them as its state, moved whole by .to().
    own = [(rel, t, "attribute") for rel, t, holder in view.attributes if moves_itself(holder)]
    state = [*view.registered, *own] if own else view.registered
    if not own and all(same_device(share.device, target) for share in view.shares()):
        return None  # the common case, answered from the cached per-device counts
    off = [
        (rel, t, kind) for rel, t, kind in state if not same_device(view.placement(t)[0], target)
    ]
    if not off:
        return None
    off_devices = sorted({probe.tensor_facts(t).device for _, t, _ in off})
    has_params = any(kind == "parameter" for _, _, kind in view.registered)
    if own and len(off) == len(state) and not has_params:
        why = (
            f"its state is on {', '.join(off_devices)}, the computation runs on {target}"
            f" ({probe.class_name(entry.obj)}.to() moves its state)"
        )
        return _whole_module(entry, off, off_devices, why, target, scan)
    if len(off) == len(view.registered) and (has_params or len(off) > 1):
        # (a module of buffers only, a vector quantizer's codebook, is one thing too)
        if entry is analysis.top_module:
            why = f"all its parameters and buffers are on {', '.join(off_devices)}, the data it is given on {target}"
        else:
            why = f"all its parameters and buffers are on {', '.join(off_devices)}, the rest of the model on {target}"
        if (
            entry.named
            and analysis.top_module is not None
            and _is_inside(entry, analysis.top_module)
        ):
            why += " (added or replaced after model.to()?)"
        return _whole_module(entry, off, off_devices, why, target, scan)
    return None  # parts of the model itself are reported one by one, as tensors


def _whole_module(
    entry: Entry, off: list, off_devices: list[str], why: str, target: str, scan: Scan
) -> Culprit:
    """The module named as one culprit, its tensors off the target as its parts."""
    device = off_devices[0] if len(off_devices) == 1 else "mixed"
    finding = Finding(entry.name, device, "module", entry.where, why, target=target)
    parts = [scan.entries[id(t)] for _, t, _ in off if id(t) in scan.entries]
    return Culprit(finding, parts, owner=entry)


def moves_itself(module: Any) -> bool:
    """The module's class, or one of its bases outside torch, defines its own
    ``_apply``: what ``.to()`` moves is more than its parameters and buffers."""
    for namespace in class_dicts(type(module)):
        if "_apply" in namespace:
            origin = namespace.get("__module__")
            return type(origin) is str and origin.split(".")[0] != "torch"
    return False


def off_target(entry: Entry, target: str) -> bool:
    """Some tensor that ``entry`` is, or that its ``.to()`` moves, is off ``target``."""
    if entry.module is not None:
        view = entry.module
        tensors = [t for _, t, _ in view.registered]
        tensors += [t for _, t, holder in view.attributes if moves_itself(holder)]
    elif entry.kind in _TENSOR_KINDS:
        tensors = [entry.obj]
    else:
        return False
    return any(not same_device(probe.placement(t)[0], target) for t in tensors)


def _is_inside(entry: Entry, top: Entry) -> bool:
    return len(entry.path) > len(top.path) and entry.path[: len(top.path)] == top.path


def _optimizer_culprit(entry: Entry, scan: Scan) -> Culprit | None:
    """The state away from its parameters, as one culprit (one fix moves it all), named
    for the state tensor the failing line met (``opt.state[model.weight]['exp_avg_sq']``),
    else the first one; ``opt.state`` when its parameter has no name."""
    assert entry.optimizer is not None
    misplaced = entry.optimizer.misplaced()
    if not misplaced:
        return None
    state_devices = sorted({s for _, _, s, _ in misplaced})
    param_devices = sorted({p for _, _, _, p in misplaced})
    tensors = {(id(p), k): t for p, k, t, _ in entry.optimizer.state}
    order = {tensor_id: i for i, tensor_id in enumerate(scan.met)}
    param, key, device, _ = min(
        misplaced, key=lambda m: order.get(id(tensors.get((id(m[0]), m[1]))), len(order))
    )
    # the parameter, named from the namespace in depth like the culprits' objects
    owner = scan.entries.get(id(param)) or scan.add(param, (("local", "…"),), entry.where)
    name = f"{entry.name}.state"
    if owner is not None and owner.named:
        name = f"{name}[{owner.name}][{key!r}]"
    others = len(misplaced) - 1
    why = (
        f"{plural(len(misplaced), 'state tensor')} {'is' if len(misplaced) == 1 else 'are'} on {', '.join(state_devices)}, "
        f"{'its parameter' if len(misplaced) == 1 else 'their parameters'} on {', '.join(param_devices)} (step counters excepted)"
    )
    if others and name != f"{entry.name}.state":
        why = (
            f"on {device}, its parameter on {param_devices[0]}; "
            f"{plural(others, 'more state tensor')} of `{entry.name}.state` too (step counters excepted)"
        )
    finding = Finding(
        name,
        device,
        "optimizer state",
        entry.where,
        why,
        rule=OPTIMIZER_STATE,
        target=param_devices[0],
    )
    return Culprit(finding, [entry] if owner is None else [entry, owner], owner=entry)


def _from_user(culprit: Culprit) -> bool:
    entry = culprit.entries[0] if culprit.entries else None
    return entry is not None and (entry.named or entry.user or entry.parent_kind == "module")


def _consumed(scan: Scan) -> set[int]:
    """Ids of the tensors the failing library call took, and of what they are views
    of: ``batch['input_ids']`` when the embedding failed on ``input_ids.view(-1, n)``."""
    ids: set[int] = set()
    for entry in scan.entries.values():
        if entry.consumed and entry.kind in _TENSOR_KINDS:
            ids.add(id(entry.obj))
            base = probe.tensor_base(entry.obj)
            if base is not None:
                ids.add(id(base))
    return ids


def _rank(
    found: list[Culprit], analysis: Analysis, scan: Scan | None = None, met: set[int] | None = None
) -> list[Culprit]:
    """Culprits best first: what the failing operation took as the argument its
    message names (``met``, by id: :mod:`ipydevice.diagnosis.operands`), then the
    operands of the failing lines, the failing module's parts and optimizer state."""
    ranked = _ranked(found, analysis, scan)
    if scan is not None and scan.met:
        # what the failing line itself met (a library's own update of a copy it keeps)
        # before what the user's line passed along to it
        hit = set(scan.met)
        ranked.sort(key=lambda c: not any(id(e.obj) in hit for e in c.entries))
    if not met:
        return ranked

    def took_it(culprit: Culprit) -> bool:
        return any(id(e.obj) in met for e in culprit.entries)

    # (the user's own before a library's local it was made into: ``mask`` before the
    # ``mask`` that ``Attend.forward`` rearranged from it)
    first = sorted((c for c in found if took_it(c)), key=lambda c: not _from_user(c))
    return first + [c for c in ranked if c not in first]


def _ranked(found: list[Culprit], analysis: Analysis, scan: Scan | None = None) -> list[Culprit]:
    consumed = _consumed(scan) if scan is not None else set()

    def score(culprit: Culprit) -> tuple[int, int, int, int]:
        entry = culprit.entries[0] if culprit.entries else None
        direct = 0 if entry is not None and (entry.operand or entry.on_line) else 1
        failing = analysis.failing_module
        if culprit.owner is not None and (
            culprit.owner is failing or (failing is not None and descends(failing, culprit.owner))
        ):
            direct = 0
        if culprit.finding.rule == OPTIMIZER_STATE:
            direct = 0
        named = 0 if culprit.finding.where == "namespace" else 1
        # Among them, what the failing call took first (the key the embedding consumed).
        took = 0 if entry is not None and id(entry.obj) in consumed else 1
        return (direct, took, named, entry.order if entry is not None else 0)

    ranked = sorted(found, key=score)
    direct = [c for c in ranked if score(c)[0] == 0]
    if any(_from_user(c) for c in direct):
        # A library frame's local that the user never wrote (GRU's ``hx`` made from
        # the input) is derived from a user culprit: name the user's, not torch's.
        direct = [c for c in direct if _from_user(c) or c.finding.kind != "tensor"]
    structural = [
        c for c in ranked if c.finding.kind in ("module", "attribute") and c not in direct
    ]
    if direct:
        return direct + structural
    return ranked


#: The names users give their device variable, in the order they are looked for.
DEVICE_NAMES = ("device", "dev", "DEVICE", "torch_device")


def device_variable(namespace: Mapping[str, Any], target: str) -> str:
    """The name of the user's device variable when it holds ``target`` (a
    ``torch.device`` or a string: ``device = torch.device('cuda')``), else ''."""
    if not target:
        return ""
    for name in DEVICE_NAMES:
        try:
            value = namespace.get(name) if isinstance(namespace, dict) else namespace[name]
        except Exception:
            continue
        if value is None or probe.class_name(value) not in ("device", "str"):
            continue
        spelled = probe.device_str(value)
        if spelled and spelled != probe.UNKNOWN and same_device(spelled, target):
            return name
    return ""
