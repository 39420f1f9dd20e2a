"""The audits that explain a device error, for the error panel: the model's and the
failing module's (what sits off the target, layers ``.to()`` cannot see), the
optimizers' behind culprits, the namespace's objects of the classes the error's
family names (:attr:`~ipydevice.family.Family.audited`), and the
registered audits (:func:`ipydevice.audit`) over the model, the failing module
and the culprits.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from ipydevice import registry
from ipydevice import settings as _settings
from ipydevice._debug import contain
from ipydevice.audits.checkup import (
    EXPLAINS_ANY_DEVICE,
    module_problems,
    problems_of,
    registered_audits,
)
from ipydevice.collect import probe
from ipydevice.collect.scan import Entry, Scan
from ipydevice.diagnosis.culprits import Analysis
from ipydevice.family import MessageFacts
from ipydevice.model import Finding, Fix

__all__ = ["explaining_audits", "family_causes"]


def explaining_audits(
    analysis: Analysis, fixes: tuple[Fix, ...], facts: MessageFacts, namespace: Mapping[str, Any]
) -> tuple[tuple[Finding, ...], tuple[Fix, ...], tuple[str, ...]]:
    """Adds the audits that explain the error: the model's and the optimizers'
    (what sits off the target, layers ``.to()`` cannot see), for some families
    the namespace's DataLoaders, (D)DP wrappers or GradScalers, and the registered
    audits (:func:`ipydevice.audit`) over the model, the failing module and the
    culprits. Returns the causes, the fixes and the notes of failing plugins."""
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
    model = analysis.top_module
    roots = _audited_roots(facts.family, namespace)
    if not roots:
        return []
    return problems_of(([model] if model is not None else []) + roots, plugins=False)


def family_causes(
    family_id: str | None, namespace: Mapping[str, Any] | None, target: str
) -> tuple[tuple[Finding, ...], tuple[Fix, ...]]:
    """The causes and source fixes that the namespace's objects of the classes
    ``family_id`` names give for an error raised in another process: a DataLoader
    whose Dataset moves samples to the GPU explains a worker's fork error, though
    none of the notebook's objects is the worker's culprit."""
    roots = _audited_roots(family_id, namespace or {})
    causes: list[Finding] = []
    fixes: list[Fix] = []
    for problem in problems_of(roots, plugins=False) if roots else []:
        finding = problem.finding
        if finding.rule not in EXPLAINS_ANY_DEVICE and finding.device == target:
            continue
        if any((c.name, c.rule) == (finding.name, finding.rule) for c in causes):
            continue
        causes.append(finding)
        fixes += [
            f for f in problem.fixes if f.scope == "source" and all(f.code != g.code for g in fixes)
        ]
    return tuple(causes), tuple(fixes)


def _audited_roots(family_id: str | None, namespace: Mapping[str, Any]) -> list[Entry]:
    """The namespace's top-level objects of the classes the family names, as roots."""
    family = registry.family_of(family_id) if family_id else None
    kinds = family.audited if family is not None else ()
    if not kinds:
        return []
    try:
        items = list(itertools.islice(namespace.items(), _settings.current().max_objects))
    except BaseException as caught:
        contain(caught)
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
    return roots
