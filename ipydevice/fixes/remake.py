"""Objects bound to one device for good: a ``torch.Generator`` cannot be moved, only
made again on the target. The fix makes it again from its initial seed (a generator's
stream differs between devices, so the numbers drawn change; the seed, and so
reproducible runs, stay); :mod:`ipydevice.fixes.history` adds ``device=`` where an
earlier cell made it, for the next run of the notebook."""

from __future__ import annotations

from typing import Any

from ipydevice.collect.paths import format_path, resolve
from ipydevice.diagnosis.culprits import Analysis
from ipydevice.fixes.history import spell
from ipydevice.fixes.immutable import assign_rebuilding as assign
from ipydevice.fixes.transaction import Undo
from ipydevice.model import Fix, Step

__all__ = ["UNMOVABLE", "remake", "remake_fixes"]

#: Kinds of culprits no move fixes (the move plans skip them).
UNMOVABLE = frozenset({"generator"})


def remake_fixes(analysis: Analysis, target: str) -> list[Fix]:
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
        step = Step("remake_generator", entry.path, target)
        title = f"Make {text} again on {target}, from its seed"
        fixes.append(Fix(title=title, code=code, scope="namespace", steps=(step,)))
    return fixes


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
