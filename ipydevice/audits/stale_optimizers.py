"""Optimizers over parameters the model no longer has: training updates nothing.

Re-running the notebook cell that builds the model (not the one that builds the
optimizer), replacing a layer after the optimizer was made, or a ``.to()`` that
gives a model new parameters: the optimizer still steps the old tensors, the model
never changes, and nothing fails. An optimizer is stale when some of its
parameters belong to none of the models in scope (the models given to
``check()``, else those bound in the namespace) while a model in scope has
parameters of the same shapes that the optimizer does not hold: the look-alike it
was meant for. An optimizer over a subset of a model's live parameters (a head
being fine-tuned) is never flagged. Identity and shapes only: no tensor is read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from ipydevice import registry
from ipydevice.audits.common import models_in_scope
from ipydevice.collect import probe
from ipydevice.collect.paths import format_path, is_name
from ipydevice.collect.scan import Entry
from ipydevice.model import Finding, Fix, Problem, Step

__all__ = ["AUDIT", "RULE", "stale_problems"]

RULE = "stale_optimizer"
#: parameters looked at per module or optimizer (beyond: not judged)
_MAX_PARAMS = 20_000


def _shape(tensor: Any) -> str:
    return probe.tensor_facts(tensor).shape


def module_parameters(module: Any) -> dict[int, Any] | None:
    """``id -> parameter`` of ``module`` and its submodules, from the registries."""
    found: dict[int, Any] = {}
    stack, seen = [module], set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        state = probe.module_dict(current)
        table = state.get("_parameters")
        if type(table) is dict:
            for value in dict.values(table):
                if value is not None:
                    found[id(value)] = value
        children = state.get("_modules")
        if type(children) is dict:
            stack.extend(v for v in dict.values(children) if probe.is_module(v))
        if len(found) > _MAX_PARAMS:
            return None
    return found


def optimizer_parameters(optimizer: Any) -> list[Any] | None:
    """The optimizer's parameters, group by group, through list and dict's own methods."""
    groups: Any = probe.module_dict(optimizer).get("param_groups")
    out: list[Any] = []
    for group in list.__iter__(groups) if probe.is_a(groups, list) else []:
        params: Any = dict.get(group, "params") if probe.is_a(group, dict) else None
        out.extend(list.__iter__(params) if probe.is_a(params, list) else [])
        if len(out) > _MAX_PARAMS:
            return None
    return out


def stale_problems(
    name: str, where: str, optimizer: Any, models: Iterable[tuple[str, Any]]
) -> list[Problem]:
    """The problem of optimizer ``name`` against ``models`` (``(name, module)``,
    in the order they are preferred), if it holds parameters none of them has."""
    params = optimizer_parameters(optimizer)
    if not params:
        return []
    owned: list[tuple[str, Any, dict[int, Any]]] = []
    for model_name, module in models:
        table = module_parameters(module)
        if table:
            owned.append((model_name, module, table))
    live = {key for _, _, table in owned for key in table}
    stale = [p for p in params if id(p) not in live]
    if not stale or not owned:
        return []
    mine = {id(p) for p in params}
    wanted = Counter(_shape(p) for p in stale)
    for model_name, module, table in owned:
        free = Counter(_shape(p) for key, p in table.items() if key not in mine)
        if not wanted - free:  # each stale shape has an unheld look-alike here
            return [_problem(name, where, model_name, module, len(stale), len(params))]
    return []


def _problem(name: str, where: str, model: str, module: Any, stale: int, total: int) -> Problem:
    device = ""
    for param in (module_parameters(module) or {}).values():
        device = probe.tensor_facts(param).device
        break
    if stale == total:
        why = (
            f"none of its {total} parameters is `{model}`'s (`{model}` was rebuilt, or its "
            "parameters replaced, after the optimizer was made): training updates nothing"
        )
    else:
        why = (
            f"{stale} of its {total} parameters are no longer `{model}`'s (a layer replaced "
            "after the optimizer was made): those layers are not trained"
        )
    finding = Finding(
        name, device or "?", "optimizer", where, why, rule="stale_optimizer", target=device
    )
    code = (
        f"{name} = type({name})({model}.parameters(), **{name}.defaults)"
        "  # or as you made it, over the parameters you train"
    )
    steps: tuple[Step, ...] = ()
    if is_name(name) and is_name(model):
        steps = (Step("rebuild_optimizer", (("name", name),), "", source=(("name", model),)),)
    fix = Fix(f"Re-create {name} over {model}'s parameters", code, "namespace", steps=steps)
    return Problem(finding, (fix,))


def _stale_optimizers(entry: Entry) -> list[Problem]:
    if entry.optimizer is None or entry.module is not None:
        return []
    models = [(format_path(m.path), m.obj) for m in models_in_scope() if m.named]
    return stale_problems(format_path(entry.path), entry.where, entry.obj, models)


AUDIT = registry.Audit("stale_optimizers", _stale_optimizers, tensors=False)
