"""DataLoaders with worker processes (or ``pin_memory=True``) whose Dataset or
``collate_fn`` moves data to a device.

With ``num_workers > 0`` each sample is made in a worker process. A ``.cuda()`` or
``.to(device)`` in ``Dataset.__getitem__`` (or ``__getitems__``) or in the
``collate_fn`` initialises CUDA in every worker: forked workers fail ("Cannot
re-initialize CUDA in forked subprocess"), spawned ones each hold a CUDA context,
and ``pin_memory=True`` then fails on the CUDA tensors they return. The fix is to
return CPU tensors and move each batch in the training loop. The source is read
(``linecache``, ``ast``; never run), bounded by :data:`MAX_LINES` per function.
"""

from __future__ import annotations

import ast
from typing import Any

from ipydevice import registry
from ipydevice._debug import contain
from ipydevice.code.statements import code_tree
from ipydevice.collect import probe
from ipydevice.collect.frames import is_user_file
from ipydevice.collect.paths import format_path
from ipydevice.collect.scan import Entry
from ipydevice.model import Finding, Fix, Problem

__all__ = ["AUDIT", "device_transfers"]

#: Lines of one function's source read at most.
MAX_LINES = 400
#: The Dataset methods that run in the workers.
_METHODS = ("__getitem__", "__getitems__", "__iter__")

_FIX = Fix(
    "Move device transfers out of the Dataset into the training loop",
    "# in the Dataset (and collate_fn): return CPU tensors, no .cuda()/.to(device)\n"
    "for batch, target in loader:\n"
    "    batch, target = batch.to(device, non_blocking=True), target.to(device, non_blocking=True)",
    "source",
)


def device_transfers(func: Any) -> list[tuple[int, str]]:
    """``(line, call)`` for each device transfer in ``func``'s source: ``.cuda()``,
    ``.to(<a device>)``, a call with ``device=`` other than the CPU."""
    code = getattr(func, "__code__", None)
    if code is None or not is_user_file(code.co_filename):
        return []
    last = max((line for _, _, line in code.co_lines() if line), default=0)
    parsed = code_tree(code) if last - code.co_firstlineno < MAX_LINES else None
    if parsed is None:
        return []
    tree, offset = parsed
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            text = _transfer(node)
            if text:
                found.append((node.lineno + offset, text))
    return sorted(found)


def _transfer(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "cuda":
        return ".cuda()"
    for keyword in call.keywords:
        if keyword.arg == "device" and not _is_cpu(keyword.value):
            return f"device={ast.unparse(keyword.value)}"
    if isinstance(func, ast.Attribute) and func.attr == "to" and call.args:
        first = call.args[0]
        if _names_a_device(first) and not _is_cpu(first):
            return f".to({ast.unparse(first)})"
    return ""


def _is_cpu(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == "cpu"


def _names_a_device(node: ast.AST) -> bool:
    """``device``, ``self.device``, ``'cuda'``, ``torch.device(...)``, ``x.device``."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (str, int)) and not isinstance(node.value, bool)
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Attribute) and node.func.attr == "device"
    text = ast.unparse(node) if isinstance(node, (ast.Name, ast.Attribute)) else ""
    return "device" in text.lower() or "cuda" in text.lower() or text.lower() in ("dev", "gpu")


def _workers(loader: Any) -> int:
    workers = probe.module_dict(loader).get("num_workers")
    return workers if isinstance(workers, int) and not isinstance(workers, bool) else 0


def _sources(loader: Any) -> list[tuple[str, str, Any]]:
    """``(attribute, label, function)``: the Dataset's worker-side methods and the collate_fn."""
    found: list[tuple[str, str, Any]] = []
    state = probe.module_dict(loader)
    dataset = state.get("dataset")
    if dataset is not None:
        kind = type(dataset)
        for method in _METHODS:
            func = probe.class_attribute(kind, method)
            if getattr(func, "__code__", None) is not None:
                found.append(("dataset", f"{probe.class_name(dataset)}.{method}", func))
    collate = state.get("collate_fn")
    if getattr(collate, "__code__", None) is not None:
        found.append(("collate_fn", str(getattr(collate, "__qualname__", "collate_fn")), collate))
    return found


def _worker_problems(entry: Entry) -> list[Problem]:
    if entry.module is not None or entry.optimizer is not None:
        return []
    if probe.class_name(entry.obj) != "DataLoader":
        return []
    workers = _workers(entry.obj)
    pinned = probe.module_dict(entry.obj).get("pin_memory") is True
    if workers <= 0 and not pinned:
        return []
    name = format_path(entry.path)
    out = []
    for attribute, label, func in _sources(entry.obj):
        try:
            transfers = device_transfers(func)
        except BaseException as caught:  # a hostile __code__ or linecache entry
            contain(caught)
            continue
        if not transfers:
            continue
        line, call = transfers[0]
        filename = func.__code__.co_filename
        if workers > 0:
            why = (
                f"{label} calls {call} in the DataLoader's {workers} worker processes: each one "
                "initialises CUDA (a forked one fails); return CPU tensors, move batches in the "
                "training loop"
            )
        else:
            why = (
                f"{label} calls {call} and the DataLoader has pin_memory=True: only CPU tensors "
                "can be pinned; return CPU tensors, move batches in the training loop"
            )
        finding = Finding(
            f"{name}.{attribute}",
            "cuda" if call == ".cuda()" else "?",
            "DataLoader",
            entry.where,
            why,
            rule="worker_transfers",
            target="cpu",
            location=f"{filename}:{line}",
        )
        out.append(Problem(finding, (_FIX,)))
    return out


AUDIT = registry.Audit("worker_transfers", _worker_problems, tensors=False)
