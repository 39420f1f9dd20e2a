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

import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ipydevice import probe
from ipydevice.culprits import same_device
from ipydevice.model import Finding, Fix, Problem, Step
from ipydevice.paths import format_path
from ipydevice.render.text import plural
from ipydevice.scan import Entry, Scan
from ipydevice.session import user_namespace
from ipydevice.settings import current

#: A container holding more tensors than this is data, not a batch.
BATCH_SIZE_LIMIT = 16

__all__ = ["Checkup", "Problem", "check", "module_problems", "problems_of", "watch"]


@dataclass(frozen=True, slots=True)
class Checkup:
    """The result of :func:`check` or :func:`watch`: true when something is wrong."""

    problems: tuple[Finding, ...] = ()
    fixes: tuple[Fix, ...] = ()
    notes: tuple[str, ...] = ()

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
    notes = list(scan.notes)
    return _checkup(problems_of(roots, notes), notes)


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
    models: dict[int, tuple[str, Any]] = {}
    for name, value in _names_values(namespace):
        if probe.is_module(value) and _first_device(value):
            inner = _unwrapped(value)  # torch.compile and (D)DP wrap the same model
            if id(inner) not in models or inner is value:
                models[id(inner)] = (name, inner)
    if len(models) != 1:
        return Checkup()
    model_name, model = next(iter(models.values()))
    state = probe.module_dict(model)
    from ipydevice.scan import _dispatch_device

    device = _dispatch_device(state.get("hf_device_map")) or _first_device(model)
    problems = []
    for name in names:
        value = namespace.get(name) if isinstance(name, str) else None
        off = _stray_devices(value, device)
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
            problems.append(Problem(finding, (_move_fix(name, value, device),)))
    return _checkup(problems, [])


def _checkup(problems: list[Problem], notes: Iterable[str]) -> Checkup:
    fixes: list[Fix] = []
    for problem in problems:
        fixes.extend(f for f in problem.fixes if f not in fixes)
    return Checkup(tuple(p.finding for p in problems), tuple(fixes), tuple(notes))


def _names_values(namespace: Mapping[str, Any]) -> list[tuple[str, Any]]:
    try:
        items = list(namespace.items())
    except Exception:
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
        if (not isinstance(value, type) and not callable(value)) or probe.is_module(value)
    ]


# -- the rules ---------------------------------------------------------------------------


def problems_of(
    roots: list[Entry], notes: list[str] | None = None, plugins: bool = True
) -> list[Problem]:
    """Every rule over the scanned roots and, unless ``plugins`` is False, the
    registered audits (:func:`ipydevice.audit`); their failures go to ``notes``."""
    problems: list[Problem] = []
    modules = [e for e in roots if e.module is not None and e.module.registered]
    for entry in roots:
        if entry.module is not None:
            problems.extend(module_problems(entry))
            problems.extend(_wrapper_problems(entry))
        elif entry.optimizer is not None:
            problems.extend(_optimizer_problems(entry))
        elif probe.class_name(entry.obj) == "DataLoader":
            problems.extend(
                _loader_problems(entry, format_path(entry.path))
            )  # wrong with or without a model
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
                problems.extend(_companion_problems(entry, device, label))
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
    if plugins is None or not plugins.audits():
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


def _the_model(modules: list[Entry]) -> Entry | None:
    """The biggest module with parameters, if the others agree on its device."""
    with_params = [e for e in modules if any(k == "parameter" for _, _, k in e.module.registered)]  # type: ignore[union-attr]
    if not with_params:
        return None
    return max(with_params, key=lambda e: len(e.module.registered))  # type: ignore[union-attr]


def module_problems(entry: Entry, factories: bool = True) -> list[Problem]:
    """Split devices, unregistered tensors, plain lists, factories, dispatch.

    ``factories=False`` skips reading the classes' source (the error path finds
    factory calls from the failing frame instead)."""
    view = entry.module
    assert view is not None
    base = format_path(entry.path)
    majority = view.majority()
    out: list[Problem] = []
    if view.dispatch_device:
        return out  # spread over devices on purpose; see _companion_problems for inputs
    if len(view.shares()) > 1:
        out.append(_split(entry, majority))
    for rel, tensor, owner in view.attributes:
        out.append(_unregistered(entry, rel, tensor, owner, majority))
    for rel, members, owner in view.plain_lists:
        out.append(_plain_list(entry, rel, members, owner, majority))
    if factories:
        out.extend(_factories(entry, base))
    return out


def _split(entry: Entry, majority: str) -> Problem:
    view = entry.module
    assert view is not None
    outliers = _outlier_groups(entry, majority)
    shown = ", ".join(outliers[:3]) + (
        f" and {len(outliers) - 3} more" if len(outliers) > 3 else ""
    )
    why = f"split across devices: most of it is on {majority}, but {shown} {'is' if len(outliers) == 1 else 'are'} not"
    base = format_path(entry.path)
    finding = Finding(
        base, "mixed", "module", entry.where, why, rule="split_module", target=majority
    )
    return Problem(finding, (_module_to_fix(entry, majority),) if entry.named else ())


def _outlier_groups(entry: Entry, majority: str) -> list[str]:
    """Off-majority tensors by name, a whole submodule named once (``model.head``)."""
    view = entry.module
    assert view is not None
    off = [rel for rel, t, _ in view.registered if probe.tensor_facts(t)[0] != majority]
    names: list[str] = []
    for rel in off:
        owner = rel[:-1]
        whole = owner and all(r in off for r, _, _ in view.registered if r[: len(owner)] == owner)
        name = format_path((*entry.path, *(owner if whole else rel)))
        if name not in names:
            names.append(name)
    return names


def _module_to_fix(entry: Entry, device: str) -> Fix:
    text = format_path(entry.path)
    return Fix(
        f"Move all of {text} to {device}",
        f"{text}.to({device!r})",
        "namespace",
        steps=(Step("module_to", entry.path, device),),
    )


def _unregistered(entry: Entry, rel: tuple, tensor: Any, owner: Any, majority: str) -> Problem:
    from ipydevice.sources import register_buffer_fix

    name = format_path((*entry.path, *rel))
    device = probe.tensor_facts(tensor)[0]
    where = (
        "" if same_device(device, majority) else f" (it is on {device}, the module on {majority})"
    )
    why = f"a plain tensor attribute: .to() will never move it{where}"
    source = register_buffer_fix(owner, str(rel[-1][1]))
    finding = Finding(
        name,
        device,
        "attribute",
        entry.where,
        why,
        rule="unregistered_tensor",
        target=majority,
        location=source.location if source else "",
    )
    fixes = [f for f in (source,) if f is not None]
    if entry.named and not same_device(device, majority):
        path = (*entry.path, *rel)
        title = f"For now, move {name} to {majority} (the next .to() will leave it behind again)"
        fixes.append(
            Fix(
                title,
                f"{name} = {name}.to({majority!r})",
                "namespace",
                steps=(Step("reassign", path, majority),),
            )
        )
    return Problem(finding, tuple(fixes))


def _plain_list(entry: Entry, rel: tuple, members: list, owner: Any, majority: str) -> Problem:
    from ipydevice.sources import module_list_fix

    name = format_path((*entry.path, *rel))
    why = f"a plain list of {plural(len(members), 'module')}: .to() and .parameters() never see them (nor does the optimizer)"
    source = module_list_fix(owner, str(rel[-1][1]))
    finding = Finding(
        name,
        "",
        "plain list",
        entry.where,
        why,
        rule="plain_list",
        target=majority,
        location=source.location if source else "",
    )
    return Problem(finding, tuple(f for f in (source,) if f is not None))


def _factories(entry: Entry, base: str) -> list[Problem]:
    """Factory calls without ``device=`` in the methods of each user module class (once per class)."""
    from ipydevice.sources import factory_fixes

    view = entry.module
    assert view is not None
    classes = {type(entry.obj)} | {type(module) for _, module in view.submodules}
    out = []
    for cls in sorted(classes, key=lambda c: c.__qualname__)[:50]:
        for label, fix in factory_fixes(cls):
            why = f"`{fix.original.strip()}` can leave a tensor off the model's device: {fix.title.split(' in ')[0].lower()}"
            finding = Finding(
                label,
                "",
                "source",
                entry.where,
                why,
                rule="factory_without_device",
                location=fix.location,
            )
            out.append(Problem(finding, (fix,)))
    return out


def _optimizer_problems(entry: Entry) -> list[Problem]:
    view = entry.optimizer
    assert view is not None
    misplaced = view.misplaced()
    if not misplaced:
        return []
    state = sorted({s for _, _, s, _ in misplaced})
    params = sorted({p for _, _, _, p in misplaced})
    name = f"{format_path(entry.path)}.state"
    why = f"{plural(len(misplaced), 'state tensor')} on {', '.join(state)}, {'its parameter' if len(misplaced) == 1 else 'their parameters'} on {', '.join(params)} (step counters excepted)"
    finding = Finding(
        name,
        state[0],
        "optimizer state",
        entry.where,
        why,
        rule="optimizer_state",
        target=params[0],
    )
    text = format_path(entry.path)
    code = (
        f"for p, state in {text}.state.items():\n    for k, v in state.items():\n"
        '        if torch.is_tensor(v) and k != "step":\n            state[k] = v.to(p.device)'
    )
    fix = Fix(
        f"Move {name} to its parameters' devices",
        code,
        "namespace",
        steps=(Step("optimizer_state", entry.path, ""),) if entry.named else (),
    )
    return [Problem(finding, (fix,))]


def _wrapper_problems(entry: Entry) -> list[Problem]:
    """DataParallel / DDP: the module on ``device_ids[0]``; one GPU per rank."""
    kind = probe.class_name(entry.obj)
    if kind not in ("DataParallel", "DistributedDataParallel"):
        return []
    state = probe.module_dict(entry.obj)
    ids = state.get("device_ids")
    if not probe.is_a(ids, list) or not ids:
        return []
    first = probe.device_str(ids[0]) if not isinstance(ids[0], int) else f"cuda:{ids[0]}"
    out = []
    view = entry.module
    assert view is not None
    majority = view.majority()
    base = format_path(entry.path)
    if majority and not same_device(majority, first):
        why = f"{kind} needs its module on device_ids[0] = {first}, but it is on {majority}: move it before wrapping"
        finding = Finding(
            base, majority, "module", entry.where, why, rule="dataparallel", target=first
        )
        out.append(Problem(finding, (_module_to_fix(entry, first),) if entry.named else ()))
    local = os.environ.get("LOCAL_RANK", "")
    if (
        kind == "DistributedDataParallel"
        and local.isdigit()
        and first != f"cuda:{local}"
        and first.startswith("cuda")
    ):
        why = f"this is local rank {local} but its DDP uses {first}: the ranks would share one GPU (call torch.cuda.set_device(LOCAL_RANK) and use device_ids=[LOCAL_RANK])"
        out.append(
            Problem(
                Finding(
                    base, first, "module", entry.where, why, rule="ddp_rank", target=f"cuda:{local}"
                )
            )
        )
    return out


def _companion_problems(entry: Entry, device: str, model: str) -> list[Problem]:
    """Things used with the model: batches, losses, scalers, DataLoaders."""
    name = format_path(entry.path)
    kind = probe.class_name(entry.obj)
    if kind == "DataLoader":
        return []  # see problems_of
    if _is_scheduler(entry.obj):
        return _scheduler_problems(entry, name, device, model)
    if kind == "GradScaler":
        scaler_device = probe.module_dict(entry.obj).get("_device")
        if isinstance(scaler_device, str) and scaler_device != device.split(":")[0]:
            why = f"GradScaler for {scaler_device}, but {model} is on {device}"
            kind = device.split(":")[0]
            hint = Fix(
                f"Create the scaler for {kind}",
                f"{name} = torch.amp.GradScaler({kind!r})",
                "source",
            )
            return [
                Problem(
                    Finding(
                        name,
                        scaler_device,
                        "GradScaler",
                        entry.where,
                        why,
                        rule="scaler_device",
                        target=device,
                    ),
                    (hint,),
                )
            ]
        return []
    if (
        entry.module is not None
        and entry.module.registered
        and not any(k == "parameter" for _, _, k in entry.module.registered)
    ):
        majority = entry.module.majority()  # a loss with class weights, pos_weight, ...
        if not same_device(majority, device):
            why = f"its buffers are on {majority}, {model} is on {device}"
            finding = Finding(
                name, majority, "module", entry.where, why, rule="stray_tensor", target=device
            )
            return [Problem(finding, (_module_to_fix(entry, device),) if entry.named else ())]
        return []
    if entry.kind == "container" and len(_tensor_items(entry.obj)) > BATCH_SIZE_LIMIT:
        return []  # a dataset kept on the CPU, moved batch by batch: fine
    off = _stray_devices(entry.obj, device)
    if not off:
        return []
    why = f"on {', '.join(off)}, but {model} is on {device}"
    finding = Finding(
        name, off[0], entry.kind, entry.where, why, rule="stray_tensor", target=device
    )
    return [
        Problem(finding, (_move_fix(name, entry.obj, device, entry.path if entry.named else ()),))
    ]


def _is_scheduler(obj: Any) -> bool:
    module_name = type(obj).__dict__.get("__module__", "")
    return isinstance(module_name, str) and module_name.startswith("torch.optim.lr_scheduler")


def _scheduler_problems(entry: Entry, name: str, device: str, model: str) -> list[Problem]:
    """A learning-rate scheduler holding tensors elsewhere (``ReduceLROnPlateau.best``
    set from a metric tensor, a tensor ``base_lrs``): they are compared or multiplied
    with values on the model's device later."""
    state = probe.module_dict(entry.obj)
    off = []
    for key, value in list(state.items())[:64]:
        values = [value] if probe.is_tensor(value) else _tensor_items(value)
        for tensor in values:
            dev, shape, *_ = probe.tensor_facts(tensor)
            if (
                dev not in ("?", "")
                and not same_device(dev, device)
                and not (shape == "()" and dev == "cpu")
            ):
                off.append((str(key), dev))
    if not off:
        return []
    held = ", ".join(f"{key} on {dev}" for key, dev in off[:3])
    why = f"holds tensors away from {model} ({device}): {held}"
    hint = Fix(
        "Give the scheduler plain numbers",
        f"{name}.step(metric.item())  # a Python float, not a tensor",
        "source",
    )
    return [
        Problem(
            Finding(
                name,
                off[0][1],
                probe.class_name(entry.obj),
                entry.where,
                why,
                rule="scheduler_device",
                target=device,
            ),
            (hint,),
        )
    ]


def _loader_problems(entry: Entry, name: str) -> list[Problem]:
    generator = probe.module_dict(entry.obj).get("generator")
    if generator is None:
        return []
    try:
        device = probe.device_str(generator.device)
    except Exception:
        return []
    if device == "cpu":
        return []
    why = f"its generator is on {device}: the DataLoader's sampler draws indices on the CPU"
    hint = Fix(
        "Give the DataLoader a CPU generator",
        "generator=torch.Generator()  # in DataLoader(...)",
        "source",
    )
    return [
        Problem(
            Finding(
                name, device, "DataLoader", entry.where, why, rule="generator_device", target="cpu"
            ),
            (hint,),
        )
    ]


def _stray_devices(value: Any, device: str) -> list[str]:
    """Devices of the tensors ``value`` holds that are not ``device`` (CPU scalars exempt)."""
    tensors = [value] if probe.is_tensor(value) else _tensor_items(value)
    off = []
    for tensor in tensors:
        dev, shape, *_ = probe.tensor_facts(tensor)
        if dev in ("?", "") or same_device(dev, device) or (shape == "()" and dev == "cpu"):
            continue
        if dev not in off:
            off.append(dev)
    return off


def _tensor_items(value: Any) -> list[Any]:
    if probe.is_a(value, dict):
        items = list(dict.values(value))[:200]
    elif probe.is_a(value, (list, tuple)):
        items = list(tuple.__iter__(value) if probe.is_a(value, tuple) else list.__iter__(value))[
            :200
        ]
    else:
        data = probe.module_dict(value).get("data") if not probe.is_module(value) else None
        items = list(dict.values(data))[:200] if type(data) is dict else []
    return [item for item in items if probe.is_tensor(item)]


def _move_fix(name: str, value: Any, device: str, path: tuple = ()) -> Fix:
    path = path or ((("name", name),) if name.isidentifier() else ())
    if probe.is_a(value, dict):
        code = f"{name} = {{k: v.to({device!r}) if torch.is_tensor(v) else v for k, v in {name}.items()}}"
        action = "mapping"
    elif probe.is_a(value, (list, tuple)) and not probe.is_tensor(value):
        opener, closer = ("[", "]") if probe.is_a(value, list) else ("tuple(", ")")
        code = f"{name} = {opener}t.to({device!r}) if torch.is_tensor(t) else t for t in {name}{closer}"
        action = "sequence"
    else:
        code = f"{name} = {name}.to({device!r})"
        action = "reassign"
    return Fix(
        f"Move {name} to {device}",
        code,
        "namespace",
        steps=(Step(action, path, device),) if path else (),
    )


def _unwrapped(module: Any) -> Any:
    """The model inside ``torch.compile``'s OptimizedModule or (Distributed)DataParallel."""
    for _ in range(4):
        state = probe.module_dict(module)
        modules = state.get("_modules")
        inner = state.get("_orig_mod") or (
            dict.get(modules, "_orig_mod") if type(modules) is dict else None
        )
        if (
            inner is None
            and probe.class_name(module) in ("DataParallel", "DistributedDataParallel")
            and type(modules) is dict
        ):
            inner = dict.get(modules, "module")
        if inner is None or not probe.is_module(inner):
            return module
        module = inner
    return module


def _first_device(module: Any) -> str:
    """The device of a module's first parameter, read without walking them all."""
    stack = [module]
    seen = 0
    while stack and seen < 10_000:
        current_module = stack.pop()
        seen += 1
        state = probe.module_dict(current_module)
        params = state.get("_parameters")
        if type(params) is dict:
            for tensor in dict.values(params):
                if probe.is_tensor(tensor):
                    return probe.tensor_facts(tensor)[0]
        modules = state.get("_modules")
        if type(modules) is dict:
            stack.extend(reversed([m for m in dict.values(modules) if m is not None]))
    return ""
