"""Audits: the causes of device errors that are visible before anything fails.

Each rule is a small function over scanned objects that returns
:class:`Problem`\\ s (a :class:`~ipydevice.model.Finding` plus its fixes). The
same rules serve ``ipydevice.check(model, batch, opt)``, ``%devices --check``, the
problems ``%devices`` lists, and the causes an error panel shows.

* modules: parameters and buffers split across devices (outliers named by path);
  tensor attributes ``.to()`` never moves (``register_buffer``); submodules in
  plain lists or dicts (``nn.ModuleList``); in the methods of the user's module
  classes (read with ``ast``, never run), calls that leave tensors off the model's
  device: factories without ``device=``, ``torch.from_numpy`` and tokenizer calls
  not moved on the spot, ``torch.load`` without ``map_location`` (rule
  ``factory_without_device``);
* dispatched models (``hf_device_map``): never ``.to()``, inputs go to the first
  execution device;
* optimizers: state away from its parameters (``step`` exempt unless capturable
  or fused); GradScaler on another device type than the model; a learning-rate
  scheduler holding tensors elsewhere;
* DataLoaders whose generator is not on the CPU;
* DataParallel / DistributedDataParallel: the wrapped module not on
  ``device_ids[0]``; under ``torchrun``, ``device_ids`` not ``[LOCAL_RANK]``;
* batches (tensors, dicts, tuples) on another device than the model, CPU scalars
  and index tensors exempt.

A correct setup (all on one device, a dispatched model and its inputs, CPU
scalars, CPU ``step`` counters) gives no problem. Results hold text only.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from ipydevice import registry
from ipydevice._debug import contain, failure_line
from ipydevice.audits.common import (
    first_device,
    move_fix,
    scope_of,
    spelling_from,
    stray_devices,
    unwrapped,
)
from ipydevice.audits.stale_optimizers import stale_problems
from ipydevice.collect import probe
from ipydevice.collect.entries import TENSOR_KINDS
from ipydevice.collect.namespace import user_namespace
from ipydevice.collect.paths import format_path
from ipydevice.collect.scan import Entry, Scan
from ipydevice.fixes.fingerprint import stamp
from ipydevice.model import Finding, Fix, Problem
from ipydevice.settings import current
from ipydevice.wording import plural

#: Rules whose findings explain a device error whatever device they name: a
#: plain list of modules, a generator, a wrapper, a scaler or a scheduler.
EXPLAINS_ANY_DEVICE = frozenset(
    {
        "plain_list",
        "generator_device",
        "dataparallel",
        "ddp_rank",
        "scaler_device",
        "scheduler_device",
    }
)

__all__ = ["Checkup", "Problem", "check", "module_problems", "problems_of", "watch"]


@dataclass(frozen=True, slots=True)
class Checkup:
    """The result of :func:`check` or :func:`watch`: true when something is wrong.

    ``checked``: how many tensors, modules and optimizers were looked at (-1 when
    not counted); 0 means there was nothing to check."""

    problems: tuple[Finding, ...] = ()
    fixes: tuple[Fix, ...] = ()
    notes: tuple[str, ...] = ()
    checked: int = -1

    def __bool__(self) -> bool:
        return bool(self.problems)

    def table(self) -> Any:
        """The problems as a pandas DataFrame."""
        import pandas as pd

        return pd.DataFrame(
            [asdict(p) for p in self.problems],
            columns=["name", "device", "kind", "why", "rule", "target", "location", "where"],
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-ready)."""
        return asdict(self)

    def __str__(self) -> str:
        from ipydevice.render.text import render_checkup

        return render_checkup(self)

    def __repr__(self) -> str:
        return f"<Checkup: {plural(len(self.problems), 'problem')}>"

    def _repr_html_(self) -> str:
        from ipydevice.render.html import render_checkup_html

        return render_checkup_html(self)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": str(self), "text/html": self._repr_html_()}


# -- entry points ------------------------------------------------------------------------


def check(
    *objects: Any, namespace: Mapping[str, Any] | None = None, names: Iterable[str] | None = None
) -> Checkup:
    """Runs every audit on ``objects`` (or ``names`` in ``namespace``, or the whole
    namespace when neither is given) before training starts.

    Returns:
        A :class:`Checkup`, falsy when all is well.
    """
    if namespace is None:
        namespace = user_namespace()
    try:
        with probe.metadata_reads(current().time_budget), spelling_from(namespace):
            return _made_for(_check(objects, namespace, names), namespace)
    except BaseException as failure:
        # What the user's objects or audits raise (SystemExit included) is
        # contained; a Ctrl-C stops the checkup and reaches the caller.
        contain(failure)
        return Checkup(notes=(failure_line("check", failure),))


def _check(
    objects: tuple[Any, ...], namespace: Mapping[str, Any], names: Iterable[str] | None
) -> Checkup:
    scan = Scan(current())
    roots: list[Entry] = []
    for index, obj in enumerate(objects):
        roots.append(_root(scan, obj, (("local", f"object {index + 1}"),), "check()", named=False))
    if objects:
        scan.name_from(namespace, only={id(e.obj) for e in roots})
        _name_bare(roots, namespace)
    for name in names if names is not None else ([] if objects else _names(namespace)):
        if name in namespace:
            entry = _root(scan, namespace[name], (("name", name),), "namespace", named=True)
            if entry not in roots:
                roots.append(entry)
    notes = list(scan.settled_notes())
    problems = problems_of(roots, notes)
    notes += [n for n in scan.settled_notes() if n not in notes]  # the audits' reads too
    checkup = _checkup(problems, notes)
    checked = sum(1 for e in scan.entries.values() if e.kind not in ("container", "object"))
    checked += sum(1 for e in roots if e.kind in ("container", "object") and _audited(e.obj))
    return replace(checkup, checked=checked)


def _audited(obj: Any) -> bool:
    """A DataLoader, a GradScaler, a scheduler: an object that may hold no tensor
    but whose own rules were run (the classes the error families audit), so that
    ``check(loader)`` counts it as checked."""
    from ipydevice.diagnosis import families  # noqa: F401  (registers the built-in ones)

    name = probe.class_name(obj)
    for family_id in registry.family_ids():
        family = registry.family_of(family_id)
        if family is not None and name in family.audited:
            return True
    return False


def _name_bare(roots: list[Entry], namespace: Mapping[str, Any]) -> None:
    """Objects a scan ignores (DataLoader, GradScaler) get their top-level name."""
    bare = {id(e.obj): e for e in roots if not e.named}
    if not bare:
        return
    for name, value in _names_values(namespace):
        entry = bare.pop(id(value), None)
        if entry is not None:
            entry.path, entry.named, entry.where = (("name", name),), True, "namespace"


def _root(scan: Scan, obj: Any, path: tuple, where: str, named: bool) -> Entry:
    """A scanned entry, or a bare one for objects a scan ignores (DataLoader,
    GradScaler): their rules read a few attributes of their own."""
    entry = scan.add(obj, path, where, named=named)
    if entry is None:
        entry = Entry(obj, path, where, "object", named=named)
    return entry


def watch(namespace: Mapping[str, Any], names: Iterable[str]) -> Checkup:
    """The cheap after-cell check: the model and the batch-like ``names`` a cell
    bound. Reads one parameter of the model, never all of them."""
    with probe.metadata_reads(current().time_budget), spelling_from(namespace):
        return _made_for(_watch(namespace, names), namespace)


def _made_for(checkup: Checkup, namespace: Mapping[str, Any]) -> Checkup:
    """Each fix told what it was made for: Apply refuses when a path holds another object."""
    return replace(checkup, fixes=stamp(checkup.fixes, namespace)) if checkup.fixes else checkup


def _watch(namespace: Mapping[str, Any], names: Iterable[str]) -> Checkup:
    models: dict[int, tuple[str, Any]] = {}
    for name, value in _names_values(namespace):
        if probe.is_module(value) and first_device(value):
            inner = unwrapped(value)  # torch.compile and (D)DP wrap the same model
            if id(inner) not in models or inner is value:
                models[id(inner)] = (name, inner)
    stale = _stale_after(namespace, names, list(models.values()))
    if len(models) != 1:
        return _checkup(stale, [])
    model_name, model = next(iter(models.values()))
    state = probe.module_dict(model)
    from ipydevice.collect.entries import dispatch_device

    device = dispatch_device(state.get("hf_device_map")) or first_device(model)
    problems = []
    for name in names:
        value = namespace.get(name) if isinstance(name, str) else None
        off = stray_devices(value, device)
        if off:
            why = f"defined on {', '.join(off)}, but {model_name} is on {device}: move it before using them together"
            finding = Finding(
                name,
                off[0],
                probe.class_name(value),
                "namespace",
                why,
                rule="stray_tensor",
                target=device,
            )
            problems.append(Problem(finding, (move_fix(name, value, device),)))
    return _checkup(stale + problems, [])


def _stale_after(
    namespace: Mapping[str, Any], names: Iterable[str], models: list[tuple[str, Any]]
) -> list[Problem]:
    """When a cell (re)binds a model or an optimizer: optimizers over parameters
    the namespace's models no longer have (see :mod:`ipydevice.audits.stale_optimizers`)."""
    if registry.audit_of("stale_optimizers") is None:
        return []
    bound = [namespace.get(n) for n in names if isinstance(n, str)]
    if not any(probe.is_module(v) or probe.is_optimizer(v) for v in bound):
        return []
    problems: list[Problem] = []
    for name, value in _names_values(namespace):
        if probe.is_optimizer(value):
            problems.extend(stale_problems(name, "namespace", value, models))
    return problems


def _checkup(problems: list[Problem], notes: Iterable[str]) -> Checkup:
    fixes: list[Fix] = []
    for problem in problems:
        fixes.extend(f for f in problem.fixes if f not in fixes)
    return Checkup(tuple(p.finding for p in problems), tuple(fixes), tuple(notes))


def _names_values(namespace: Mapping[str, Any]) -> list[tuple[str, Any]]:
    try:
        items = list(namespace.items())
    except BaseException as caught:
        contain(caught)
        return []
    return [
        (k, v)
        for k, v in items[: current().max_objects]
        if type(k) is str and not k.startswith("_")
    ]


def _names(namespace: Mapping[str, Any]) -> list[str]:
    return [
        name
        for name, value in _names_values(namespace)
        # type() tests only: isinstance() would read a proxy's __class__ (a load).
        if (not probe.is_a(value, type) and not callable(value)) or probe.is_module(value)
    ]


# -- the rules ---------------------------------------------------------------------------


def problems_of(
    roots: list[Entry], notes: list[str] | None = None, plugins: bool = True
) -> list[Problem]:
    """Every rule over the scanned roots and, unless ``plugins`` is False, the
    registered audits (:func:`ipydevice.audit`); their failures go to ``notes``."""
    problems: list[Problem] = []
    modules = [e for e in roots if e.module is not None and e.module.registered]
    audits = registry.audits()
    alone = [a for a in audits if not a.companion]
    objects = [a for a in alone if a.tensors]
    with scope_of(modules):
        for entry in roots:
            for audit in objects if entry.kind in TENSOR_KINDS else alone:
                problems.extend(audit.run(entry))
    model = _the_model(modules)
    if model is not None:
        view = model.module
        assert view is not None
        device = view.dispatch_device or view.majority()
        label = format_path(model.path)
        if view.dispatch_device:
            label = f"{label}'s first device (hf_device_map)"
        for entry in roots:
            if entry is not model:
                for audit in audits:
                    if audit.companion:
                        problems.extend(audit.run(entry, device, label))
    if plugins:
        problems.extend(plugin_problems(roots, model, notes))
    return problems


def plugin_problems(
    roots: list[Entry], model: Entry | None, notes: list[str] | None = None
) -> list[Problem]:
    """The registered audits (:func:`ipydevice.audit`) over ``roots``, with the
    model's device and name as their context."""
    device, label = "", ""
    if model is not None and model.module is not None:
        device = model.module.dispatch_device or model.module.majority()
        label = format_path(model.path)
    return registered_audits(roots, device, label, notes if notes is not None else [])


def registered_audits(
    entries: Iterable[Entry | None],
    device: str,
    model: str,
    notes: list[str],
    display_names: bool = False,
) -> list[Problem]:
    """The registered audits over ``entries`` (each object once, ``None`` skipped),
    ``device`` and ``model`` as their context; failures go to ``notes``.

    ``display_names`` names an object in the context as a report does (``mask in
    Attention.forward``), else by its path (``model.encoder``, ``object 1``)."""
    plugins = sys.modules.get("ipydevice.plugins")
    if plugins is None or not plugins.own_audits():
        return []  # nothing registered (the module is imported by registering)
    out: list[Problem] = []
    seen: set[int] = set()
    for entry in entries:
        if entry is None or id(entry.obj) in seen:
            continue
        seen.add(id(entry.obj))
        name = entry.name if display_names else format_path(entry.path)
        context = plugins.AuditContext(name, entry.where, device, model)
        out.extend(plugins.run_audits(entry.obj, context, notes))
    return out


def module_problems(entry: Entry, factories: bool = True) -> list[Problem]:
    """The ``modules`` audit on one module (nothing once it is removed); see
    :mod:`ipydevice.audits.modules`."""
    audit = registry.audit_of("modules")
    return audit.run(entry, factories=factories) if audit is not None else []


def _the_model(modules: list[Entry]) -> Entry | None:
    """The model the others are checked against: among modules with parameters, one
    on an accelerator before one on ``meta`` before one on the CPU (a teacher, a
    baseline or an EMA copy kept on the CPU beside a GPU model is not where the
    batch should go), then the biggest."""
    with_params = [e for e in modules if any(k == "parameter" for _, _, k in e.module.registered)]  # type: ignore[union-attr]
    if not with_params:
        return None

    def rank(entry: Entry) -> tuple[int, int]:
        view = entry.module
        assert view is not None
        device = view.dispatch_device or view.majority()
        placed = 2 if device == "cpu" else 1 if device == "meta" else 0
        return placed, -len(view.registered)

    return min(with_params, key=rank)
