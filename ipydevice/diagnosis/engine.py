"""From an exception to a :class:`~ipydevice.model.Diagnosis`.

The pipeline: recognise the message (:mod:`ipydevice.diagnosis.recognise`), walk the
traceback's frames (:mod:`ipydevice.collect.frames`), scan the objects they and the failing
statements hold (:mod:`ipydevice.collect.scan`), name them from the user's namespace,
choose the target device, rank the culprits (:mod:`ipydevice.diagnosis.culprits`), propose
fixes (:mod:`ipydevice.fixes.propose`), and keep only text.

The live objects (frames, tensors, modules) are held by local variables of
:func:`diagnose` only and are dropped before it returns.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from ipydevice import (
    registry,
    render,  # noqa: F401  (registers the views a Diagnosis delegates to)
)
from ipydevice import settings as _settings
from ipydevice._debug import debug_enabled, describe_failure
from ipydevice.collect import compiled, probe
from ipydevice.collect.frames import FrameView, line_operands, source_location, walk_frames
from ipydevice.collect.namespace import user_namespace
from ipydevice.collect.scan import Scan
from ipydevice.diagnosis.advice import advice
from ipydevice.diagnosis.culprits import Analysis, analyse
from ipydevice.diagnosis.family import MessageFacts
from ipydevice.diagnosis.recognise import recognise
from ipydevice.fixes.propose import propose_fixes
from ipydevice.model import Diagnosis, Finding, Fix, Snapshot

__all__ = ["collect", "diagnose", "last_exception", "message_of", "recognise_exception"]

_MAX_MESSAGE = 2000


def last_exception() -> BaseException | None:
    """The exception IPython or ``sys`` recorded last, if any."""
    for name in ("last_exc", "last_value"):
        exc = getattr(sys, name, None)
        if isinstance(exc, BaseException):
            return exc
    return sys.exc_info()[1]


def message_of(exc: BaseException) -> str:
    """``str(exc)`` that survives a broken ``__str__``."""
    try:
        text = str(exc)
    except Exception:
        try:
            text = str(exc.args[0]) if exc.args else ""
        except Exception:
            text = ""
    return text


def recognise_exception(exc: BaseException) -> tuple[BaseException, MessageFacts]:
    """Recognises ``exc`` or, failing that, the first device error in its chain.

    torch.compile and some libraries wrap the real error; the chain
    (``__cause__``/``__context__``) is followed up to 8 links, cycles ignored.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    first = None
    while current is not None and id(current) not in seen and len(seen) < 8:
        seen.add(id(current))
        facts = recognise(message_of(current), type(current).__name__)
        if first is None:
            first = facts
        if facts.is_device_error:
            return current, facts
        current = current.__cause__ or (
            None if current.__suppress_context__ else current.__context__
        )
    assert first is not None
    return exc, first


def diagnose(
    exc: BaseException | None = None,
    *,
    namespace: Mapping[str, Any] | None = None,
) -> Diagnosis:
    """Explains a device error: who is on which device, where it should go, and how to fix it.

    Args:
        exc: the exception; by default the last one IPython or ``sys`` recorded.
            One without a traceback is diagnosed from its message alone.
        namespace: where the user's names live, for naming objects and applying
            fixes; by default IPython's ``user_ns`` in IPython, else the ``__main__``
            module's globals reached from the traceback.

    Returns:
        A :class:`~ipydevice.model.Diagnosis`; ``is_device_error`` is False for
        other errors (and then it has no culprits and no fixes).
    """
    if exc is None:
        exc = last_exception()
    if exc is None:
        return Diagnosis(is_device_error=False, notes=("no exception to diagnose",))
    original = exc
    exc, facts = recognise_exception(exc)
    base = _base_fields(exc, facts)
    if not facts.is_device_error:
        return Diagnosis(is_device_error=False, **base)
    settings = _settings.current()
    compiled_call = compiled.is_compile_error(original)
    if compiled_call:
        # Dynamo's 30-50 frames would push the user's call out of max_frames, and
        # its tracing frames hold FakeTensors: stop at the call into torch.compile.
        views = compiled.before_dynamo(walk_frames(exc.__traceback__, 10_000))
        views = views[-settings.max_frames :]
    else:
        views = walk_frames(exc.__traceback__, settings.max_frames)
    paused = gc.isenabled()
    # The scan allocates many small objects next to a heap full of tensors: a
    # full collection in the middle would cost more than the whole diagnosis.
    gc.disable()
    try:
        names = namespace if namespace is not None else default_namespace(views)
        scan = collect(views, names, settings)
        analysis = analyse(facts, scan, views)
        if _name_deeper(scan, analysis, names):
            analysis = analyse(facts, scan, views)
        fixes = propose_fixes(facts, analysis, scan, views)
        causes, fixes, failed = _with_audits(analysis, fixes, facts, names)
        notes = tuple(scan.notes) + analysis.notes + failed
        traced: tuple = ()
        if compiled_call:
            hints = compiled.eager_hint(original, names)
            # The move fixes first, then the eager re-run; keep room for one hint.
            room = max(settings.max_fixes - min(len(hints), 1), 1)
            fixes = tuple(fixes[:room]) + hints
            traced = compiled.user_code_locations(message_of(original))
            where = next((f for f in reversed(traced) if f.is_user), None)
            notes += (
                "raised while torch.compile traced the code"
                + (
                    f": it failed at {where.function}, {source_location(where.filename, where.lineno)} (`{where.line}`)"
                    if where
                    else ""
                )
                + "; run it without torch.compile to see the plain error",
            )
        return Diagnosis(
            is_device_error=True,
            target=analysis.target,
            advice=advice(facts, analysis.target),
            reference=_reference(analysis),
            failing_module=_module_label(analysis.failing_module),
            culprits=analysis.culprits,
            causes=causes,
            fixes=fixes[: settings.max_fixes],
            snapshot=Snapshot(scan.records(compact=True), tuple(scan.notes)),
            frames=tuple(v.summary for v in views) + traced,
            notes=notes,
            **base,
        )
    except Exception as failure:
        if debug_enabled():
            raise
        return Diagnosis(
            is_device_error=True,
            advice=advice(facts, ""),
            frames=tuple(v.summary for v in views),
            notes=(describe_failure("diagnosis", failure),),
            **base,
        )
    finally:
        if paused:
            gc.enable()
        del views


def _with_audits(
    analysis: Analysis, fixes: tuple[Fix, ...], facts: MessageFacts, namespace: Mapping[str, Any]
) -> tuple[tuple[Finding, ...], tuple[Fix, ...], tuple[str, ...]]:
    """Adds the audits that explain the error: the model's and the optimizers'
    (what sits off the target, layers ``.to()`` cannot see), for some families
    the namespace's DataLoaders, (D)DP wrappers or GradScalers, and the registered
    audits (:func:`ipydevice.audit`) over the model, the failing module and the
    culprits. Returns the causes, the fixes and the notes of failing plugins."""
    from ipydevice.audits.checkup import EXPLAINS_ANY_DEVICE, module_problems, problems_of

    causes = list(analysis.causes)
    extra = list(fixes)
    entries = [e for e in (analysis.top_module, analysis.failing_module) if e is not None]
    problems = [p for e in dict.fromkeys(entries) for p in module_problems(e, factories=False)]
    problems += [
        p
        for c in analysis.found
        if c.owner is not None and c.owner.optimizer is not None
        for p in problems_of([c.owner], plugins=False)
    ]
    problems += _family_problems(facts, namespace, analysis)
    notes: list[str] = []
    plugged = _plugin_problems(analysis, notes)
    known = {(c.name, c.rule) for c in causes} | {(c.name, c.rule) for c in analysis.culprits}
    own = {id(p) for p in plugged}
    for problem in [*problems, *plugged]:
        finding = problem.finding
        explains = finding.rule in EXPLAINS_ANY_DEVICE or (
            finding.device and finding.device != analysis.target
        )
        if (
            (finding.name, finding.rule) in known
            or not explains
            or finding.rule == "factory_without_device"
        ):
            continue
        causes.append(finding)
        known.add((finding.name, finding.rule))
        # A built-in audit's moves are the panel's own namespace fix already; a
        # plugin's fixes are its own, whatever their scope.
        scopes = ("namespace", "cell", "source") if id(problem) in own else ("source",)
        extra += [
            f for f in problem.fixes if f.scope in scopes and all(f.code != g.code for g in extra)
        ]
    return tuple(causes), tuple(extra), tuple(notes)


def _plugin_problems(analysis: Analysis, notes: list[str]) -> list[Any]:
    """The registered audits over the model, the failing module, the culprits and
    their owners, with the target as the device things should be on."""
    from ipydevice.audits.checkup import registered_audits

    top = analysis.top_module
    entries = [top, analysis.failing_module]
    for culprit in analysis.found:
        entries += [culprit.owner, *culprit.entries]
    model = top.name if top is not None else ""
    return registered_audits(entries, analysis.target, model, notes, display_names=True)


def _family_problems(
    facts: MessageFacts, namespace: Mapping[str, Any], analysis: Analysis
) -> list[Any]:
    """Audits of the top-level objects the error's family points at (a DataLoader
    for a generator error); the model comes along so that devices compare."""
    from ipydevice.audits.checkup import problems_of
    from ipydevice.collect.scan import Entry

    family = registry.family_of(facts.family)
    kinds = family.audited if family is not None else ()
    if not kinds:
        return []
    try:
        items = list(namespace.items())[: _settings.current().max_objects]
    except Exception:
        return []
    roots = [
        Entry(v, (("name", k),), "namespace", "object", named=True)
        for k, v in items
        if type(k) is str and probe.class_name(v) in kinds
    ]
    for root in roots:
        if probe.is_module(root.obj):  # a (D)DP wrapper is a module: give it its view
            added = Scan(_settings.current()).add(root.obj, root.path, "namespace", named=True)
            assert added is not None  # a module always gets an entry in a fresh scan
            root.kind, root.module = "module", added.module
    model = analysis.top_module
    if not roots:
        return []
    return problems_of(([model] if model is not None else []) + roots, plugins=False)


def _reference(analysis: Analysis) -> str:
    top = analysis.top_module
    if top is not None and top.module is not None and top.module.majority() == analysis.target:
        return top.name
    return ""


def _module_label(entry: Any) -> str:
    if entry is None:
        return ""
    from ipydevice.collect.probe import class_name

    return f"{entry.name} ({class_name(entry.obj)})"


def _base_fields(exc: BaseException, facts: MessageFacts) -> dict[str, Any]:
    return {
        "family": facts.family,
        "exc_type": type(exc).__name__,
        "message": message_of(exc)[:_MAX_MESSAGE],
        "summary": facts.summary,
        "devices": facts.devices,
        "argument": facts.argument,
        "op": facts.op,
    }


def default_namespace(views: list[FrameView]) -> Mapping[str, Any]:
    """IPython's ``user_ns`` in IPython, else the ``__main__`` globals the traceback
    went through (a script run by ``runpy`` has its own), else ``__main__``'s."""
    if sys.modules.get("IPython") is None or not _in_ipython():
        for view in views:
            if view.frame.f_globals.get("__name__") == "__main__":
                return view.frame.f_globals
    return user_namespace()


def _in_ipython() -> bool:
    try:
        return sys.modules["IPython"].get_ipython() is not None
    except Exception:
        return False


def _name_deeper(scan: Scan, analysis: Analysis, namespace: Mapping[str, Any]) -> bool:
    """Searches the namespace in depth for the objects the report is about.

    Returns True when a name changed (the findings must then be rebuilt).
    """
    wanted = {id(e.obj) for c in analysis.found for e in c.entries}
    wanted |= {id(c.owner.obj) for c in analysis.found if c.owner is not None}
    for entry in (analysis.top_module, analysis.failing_module):
        if entry is not None:
            wanted.add(id(entry.obj))
    before = {key for key, entry in scan.entries.items() if entry.named}
    scan.name_from(namespace, only=wanted)
    return any(entry.named and key not in before for key, entry in scan.entries.items())


def collect(
    views: list[FrameView], namespace: Mapping[str, Any], settings: _settings.Settings
) -> Scan:
    """Scans what the frames hold, innermost first, then names it from ``namespace``."""
    scan = Scan(settings)
    user_indexes = [i for i, v in enumerate(views) if v.is_user]
    innermost_user = user_indexes[-1] if user_indexes else -1
    for index in range(len(views) - 1, -1, -1):
        view = views[index]
        if view.is_user:
            _collect_user_frame(scan, view, index, innermost=index == innermost_user)
        elif index > innermost_user:
            _collect_library_frame(scan, view)
    scan.name_from(namespace, deep=False)  # deeper names: see _name_deeper
    return scan


def _collect_user_frame(scan: Scan, view: FrameView, index: int, innermost: bool) -> None:
    for text, value, is_index in line_operands(view):
        path = (("local", text),)
        scan.add(
            value,
            path,
            view.label,
            on_line=True,
            operand=innermost,
            is_index=is_index,
            user=True,
            frame=index,
        )
    owner = view.self_object
    if owner is not None:
        scan.add(owner, (("local", "self"),), view.label, user=True)
    for name, value in view.local_items(scan.settings.max_items):
        scan.add(value, (("local", name),), view.label, user=True)


def _collect_library_frame(scan: Scan, view: FrameView) -> None:
    """Library frames add the module or optimizer they run and, for module and
    ``torch.nn.functional`` calls, the tensors passed in; torch's deeper
    internals only hold temporaries the user never named."""
    owner = view.self_object
    if owner is not None and (probe.is_module(owner) or probe.is_optimizer(owner)):
        scan.add(owner, (("local", "self"),), view.label)
    elif not _is_functional(view):
        return
    for name, value in view.arguments():
        if probe.is_a(value, (tuple, list)) and name in _varargs(view):
            items = tuple.__iter__(value) if probe.is_a(value, tuple) else list.__iter__(value)
            for index, item in zip(range(scan.settings.max_items), items, strict=False):
                if probe.is_tensor(item):
                    scan.add(item, (("local", f"{name}[{index}]"),), view.label, operand=True)
        else:
            scan.add(value, (("local", name),), view.label, operand=True)


def _is_functional(view: FrameView) -> bool:
    # torch.nn.functional's arguments are the user's tensors; the optimizers'
    # are lists of lists of every parameter and state tensor (noise, not operands).
    return view.summary.filename.replace("\\", "/").endswith("/nn/functional.py")


def _varargs(view: FrameView) -> set[str]:
    code = view.frame.f_code
    count = code.co_argcount + code.co_kwonlyargcount
    names = set()
    if code.co_flags & 0x04:
        names.add(code.co_varnames[count])
    return names


def diagnose_traceback(exc_type: type, value: BaseException, tb: TracebackType | None) -> Diagnosis:
    """:func:`diagnose` for ``sys.excepthook``-style arguments."""
    if value.__traceback__ is None and tb is not None:
        value = value.with_traceback(tb)
    return diagnose(value)
