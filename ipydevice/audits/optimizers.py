"""Optimizers: state away from its parameters (``step`` exempt unless capturable or fused)."""

from __future__ import annotations

from ipydevice import registry
from ipydevice.collect.paths import format_path
from ipydevice.collect.scan import Entry
from ipydevice.model import OPTIMIZER_STATE, Finding, Fix, Problem, Step
from ipydevice.wording import plural

__all__ = ["AUDIT"]


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
        rule=OPTIMIZER_STATE,
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
        steps=(Step(OPTIMIZER_STATE, entry.path, ""),) if entry.named else (),
    )
    return [Problem(finding, (fix,))]


def _optimizers(entry: Entry) -> list[Problem]:
    return (
        _optimizer_problems(entry) if entry.module is None and entry.optimizer is not None else []
    )


AUDIT = registry.Audit("optimizers", _optimizers, tensors=False)
