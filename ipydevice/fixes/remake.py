"""Objects bound to one device for good: a ``torch.Generator`` cannot be moved, only
made again on the target. The fix makes it again from its initial seed (a generator's
stream differs between devices, so the numbers drawn change; the seed, and so
reproducible runs, stay); :mod:`ipydevice.fixes.history` adds ``device=`` where an
earlier cell made it, for the next run of the notebook.

The fix replaces the generator at its own path only. Another holder of the same
generator (a ``DataLoader`` or its sampler given ``generator=g``, another model) keeps
the old one: the new one may not suit it (a sampler draws on the CPU), so the fix's
code says which holders keep it, found by identity in a bounded look through the
namespace's objects (two attribute levels deep)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ipydevice.collect import probe
from ipydevice.collect.paths import Path, format_path, resolve
from ipydevice.diagnosis.culprits import Analysis
from ipydevice.fixes.history import spell
from ipydevice.fixes.immutable import assign_rebuilding as assign
from ipydevice.fixes.transaction import Undo
from ipydevice.model import Fix, Step

__all__ = ["UNMOVABLE", "remake", "remake_fixes"]

#: Kinds of culprits no move fixes (the move plans skip them).
UNMOVABLE = frozenset({"generator"})

_NAMES = 2_000  # namespace names looked into for other holders
_ATTRIBUTES = 64  # attributes of each object looked at
_HOLDERS = 3  # other holders named


def remake_fixes(
    analysis: Analysis, target: str, namespace: Mapping[str, Any] | None = None
) -> list[Fix]:
    """A fix per generator culprit the user's namespace reaches."""
    fixes = []
    for culprit in analysis.found:
        entry = culprit.entries[0] if culprit.entries else None
        if culprit.finding.kind != "generator" or entry is None or not entry.named:
            continue
        text = format_path(entry.path)
        code = (
            f"{text} = torch.Generator(device={spell(target)}).manual_seed({text}.initial_seed())"
        )
        others = [format_path(p) for p in _holders(entry.obj, entry.path, namespace or {})]
        if others:
            keep = " and ".join(f"`{o}`" for o in others)
            code += f"\n# {keep} still hold{'s' if len(others) == 1 else ''} the old generator"
        step = Step("remake_generator", entry.path, target)
        title = f"Make {text} again on {target}, from its seed (its numbers start over)"
        fixes.append(Fix(title=title, code=code, scope="namespace", steps=(step,)))
    return fixes


def _holders(generator: Any, own: Path, namespace: Mapping[str, Any]) -> list[Path]:
    """Other paths to ``generator``: names, and attributes two levels deep."""
    found: list[Path] = []
    for name, value in _bounded(namespace.items(), _NAMES):
        if not isinstance(name, str) or name.startswith("_"):
            continue
        for path in _reach(value, (("name", name),), generator, 2):
            if path != own and len(found) < _HOLDERS:
                found.append(path)
    return found


def _reach(value: Any, path: Path, generator: Any, depth: int) -> Iterator[Path]:
    if value is generator:
        yield path
        return
    if depth == 0 or probe.is_tensor(value) or type(value) in _ATOMS:
        return
    for name, attribute in _bounded(probe.module_dict(value).items(), _ATTRIBUTES):
        if isinstance(name, str) and not name.startswith("__"):
            yield from _reach(attribute, (*path, ("attr", name)), generator, depth - 1)


def _bounded(items: Any, limit: int) -> list[Any]:
    try:
        return [item for _, item in zip(range(limit), items, strict=False)]
    except Exception:  # a namespace changed size while read
        return []


_ATOMS = (type(None), bool, int, float, complex, str, bytes, type)


def remake(step: Step, namespace: Any, undo: Undo) -> str:
    """Apply's ``remake_generator``: a new generator on the target, given the old
    one's initial seed, stored where the old one was (put back on undo)."""
    import torch  # (a fix is applied: torch is loaded)

    old = resolve(step.path, namespace)
    seed = old.initial_seed()
    new = torch.Generator(device=step.target)
    new.manual_seed(seed)
    undo.path(step.path)
    assign(step.path, namespace, new)
    return f"made {format_path(step.path)} again on {step.target} (seed {seed})"
