"""The registries ipydevice runs from: error families and the built-in audits
(the user's audits, messages and listeners are kept by :mod:`ipydevice.plugins`).

The built-in families (:mod:`ipydevice.diagnosis.families`) and audits
(:mod:`ipydevice.audits`) register here when imported; a user's own family goes
through :func:`ipydevice.plugins.family`, which checks it first. Recognising,
choosing the target, fixing and auditing read only these registries, so removing
an entry (:func:`ipydevice.plugins.remove`) removes it everywhere: ``check()``,
``%devices`` and the error panel.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ipydevice.family import Family, Wording

__all__ = [
    "Audit",
    "add_audit",
    "add_family",
    "audit_of",
    "audits",
    "family_ids",
    "family_of",
    "remove_audit",
    "remove_family",
    "wordings",
]

_FAMILIES: dict[str, Family] = {}
_ORDERED: list[tuple[Wording, ...]] = []


def add_family(family: Family) -> None:
    """Registers ``family`` (replacing one of the same id; it then goes last)."""
    _FAMILIES.pop(family.id, None)
    _FAMILIES[family.id] = family
    _ORDERED.clear()


def remove_family(family_id: str) -> bool:
    """Takes a family out; True when there was one."""
    _ORDERED.clear()
    return _FAMILIES.pop(family_id, None) is not None


def family_of(family_id: str | None) -> Family | None:
    """The registered family ``family_id``, or None."""
    return _FAMILIES.get(family_id or "")


def family_ids() -> tuple[str, ...]:
    """The registered families' ids, in registration order."""
    return tuple(_FAMILIES)


def wordings() -> tuple[Wording, ...]:
    """Every registered wording, in ``order``.

    Sorted once per change of the registry: recognising runs on every warning and
    error, and sorting some 50 wordings each time would double its cost.
    """
    if not _ORDERED:
        every = [w for f in _FAMILIES.values() for w in f.wordings]
        _ORDERED.append(tuple(sorted(every, key=lambda w: w.order)))
    return _ORDERED[0]


# -- built-in audits ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Audit:
    """A built-in audit over scanned objects (:class:`~ipydevice.collect.scan.Entry`).

    Attributes:
        name: how :func:`ipydevice.plugins.audits` lists it and
            :func:`ipydevice.plugins.remove` takes it out.
        run: ``run(entry)`` returns :class:`~ipydevice.model.Problem`\\ s; for a
            ``companion`` audit, ``run(entry, device, model)`` with the model's
            device and name, on everything audited beside the model.
        companion: runs on what is used with the model (batches, losses, scalers).
        tensors: runs on tensors too; False for an audit of modules, optimizers or
            loaders, which ``%devices`` then never calls for each of 100,000 tensors.
    """

    name: str
    run: Callable[..., list[Any]]
    companion: bool = False
    tensors: bool = True


_AUDITS: dict[str, Audit] = {}


def add_audit(audit: Audit) -> None:
    """Registers a built-in audit (replacing one of the same name; it then goes last)."""
    _AUDITS.pop(audit.name, None)
    _AUDITS[audit.name] = audit


def remove_audit(name: str) -> bool:
    """Takes a built-in audit out; True when there was one."""
    return _AUDITS.pop(name, None) is not None


def audit_of(name: str) -> Audit | None:
    """The registered built-in audit ``name``, or None."""
    return _AUDITS.get(name)


def audits() -> tuple[Audit, ...]:
    """The registered built-in audits, in registration order."""
    return tuple(_AUDITS.values())
