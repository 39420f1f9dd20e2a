"""What a DataLoader worker's failing line read from the Dataset the notebook holds.

A worker that diagnoses nothing itself (no ``ipydevice.worker_init_fn``) sends back
its traceback as text only: its objects stay in the worker. But its Dataset is a
copy of the notebook's (forked, or pickled for a spawned worker): the DataLoader
the notebook holds keeps the original as ``loader.dataset``. The frame of the
Dataset's own method in that text (``__getitem__``) names what it read
(``self.mean``); the same attributes of the notebook's Dataset are what the next
workers copy. So they are named as the notebook writes them (``dataset.mean``),
said to be read in the worker, and moved there.

The target is the CPU: a worker's tensors are batches the training loop moves to
the device (a worker cannot use the accelerator the notebook initialised, and the
message names the CPU as one of its devices). Nothing of the notebook's but the
Dataset's own attributes that the failing line reads is ever blamed.
"""

from __future__ import annotations

import ast
import linecache
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ipydevice._debug import contain
from ipydevice.code.cells import cell_index, cell_lines, source_location
from ipydevice.code.cells import is_cell_file as is_cell
from ipydevice.collect import probe
from ipydevice.collect.paths import Path, format_path
from ipydevice.diagnosis.devices import device_type
from ipydevice.model import Finding, Fix, FrameSummary, Step

__all__ = ["WorkerReads", "dataset_path", "history_fix", "worker_reads"]

TARGET = "cpu"
REASON = (
    f"{TARGET}: a DataLoader worker makes CPU batches, the training loop moves them to the device"
)
_CHAIN = re.compile(r"\bself((?:\.[A-Za-z_]\w*)+)")
_MAX_CLASSES = 16
_MAX_READS = 8
_MAX_WRAPS = 3  # Subset(Subset(ds)): the Dataset a wrapper's ``dataset`` holds


@dataclass(frozen=True)
class WorkerReads:
    """The culprits among what the worker's failing line read, and their fix."""

    culprits: tuple[Finding, ...]
    fixes: tuple[Fix, ...]
    target: str = TARGET
    target_reason: str = REASON


def dataset_path(dataset: Any, namespace: Mapping[str, Any] | None) -> Path:
    """How the notebook reaches ``dataset``: its own name, else the DataLoader's
    ``dataset`` attribute (``loader.dataset``); () when neither holds it."""
    items = [
        (key, value)
        for key, value in (namespace or {}).items()
        if isinstance(key, str) and not key.startswith("_")
    ]
    for key, value in items:
        if value is dataset:
            return (("name", key),)
    for key, value in items:
        if probe.module_dict(value).get("dataset") is dataset:
            return (("name", key), ("attr", "dataset"))
    return ()


def worker_reads(
    dataset: Any,
    path: Path,
    frames: tuple[FrameSummary, ...],
    devices: tuple[str, ...],
    where: str,
    namespace: Mapping[str, Any] | None = None,
) -> WorkerReads | None:
    """The Dataset's attributes that the worker's failing line read and that are
    not on the CPU; None when the message names no CPU, no frame of the text is
    the Dataset's own code, or it read nothing off the CPU."""
    if TARGET not in devices or not path:
        return None
    for obj, obj_path in _wrapped(dataset, path):
        frame = _own_frame(type(obj), frames)
        if frame is None:
            continue
        found = _reads(obj, obj_path, frame, where)
        if not found:
            return None
        culprits = tuple(f for f, _ in found)
        fixes = [_fix([s for _, s in found])]
        source = history_fix(path, {f.device for f in culprits}, namespace)
        if source is not None:
            # a meta tensor has no data to copy back: only building it again works
            meta = any(f.device == "meta" for f in culprits)
            fixes.insert(0 if meta else 1, source)
        return WorkerReads(culprits, tuple(fixes))
    return None


def _wrapped(dataset: Any, path: Path) -> list[tuple[Any, Path]]:
    out = [(dataset, path)]
    for _ in range(_MAX_WRAPS):
        inner = probe.module_dict(out[-1][0]).get("dataset")
        if inner is None or probe.is_tensor(inner):
            break
        out.append((inner, (*out[-1][1], ("attr", "dataset"))))
    return out[::-1]  # the innermost Dataset's code runs last


def _own_frame(cls: type, frames: tuple[FrameSummary, ...]) -> FrameSummary | None:
    """The innermost frame of the text that runs a method of ``cls`` (by file and line)."""
    spans = []
    for klass in cls.__mro__[:_MAX_CLASSES]:
        if klass.__module__.startswith("torch."):
            continue
        for value in vars(klass).values():
            code = getattr(value, "__code__", None) if callable(value) else None
            if code is not None:
                last = max((line for _, _, line in code.co_lines() if line), default=0)
                spans.append((code.co_filename, code.co_name, code.co_firstlineno, last))
    for frame in reversed(frames):
        for filename, name, first, last in spans:
            if (
                frame.filename == filename
                and frame.function == name
                and first <= frame.lineno <= last
            ):
                return frame
    return None


def _reads(obj: Any, path: Path, frame: FrameSummary, where: str) -> list[tuple[Finding, Step]]:
    out: list[tuple[Finding, Step]] = []
    seen: set[int] = set()
    for match in _CHAIN.finditer(frame.line):
        steps = tuple(("attr", name) for name in match[1].split(".")[1:])
        value = _attribute_chain(obj, steps)
        if value is None or id(value) in seen or len(out) >= _MAX_READS:
            continue
        seen.add(id(value))
        device = _device(value)
        if not device or device == TARGET:
            continue
        full = (*path, *steps)
        name = format_path(full)
        module = probe.is_module(value)
        why = (
            f"`self{match[1]}` read by {frame.function} in {where}: on {device}, "
            f"the worker's batches on {TARGET}"
        )
        finding = Finding(
            name=name,
            device=device,
            kind="module" if module else "tensor",
            where=where,
            why=why,
            rule="worker_dataset",
            target=TARGET,
        )
        out.append((finding, Step("module_to" if module else "reassign", full, TARGET)))
    return out


def _attribute_chain(obj: Any, steps: tuple[tuple[str, str], ...]) -> Any:
    """``obj.a.b`` read through instance dicts and a module's registries only."""
    value = obj
    for _, name in steps:
        state = probe.module_dict(value)
        found = state.get(name)
        if found is None and probe.is_module(value):
            for registry in ("_parameters", "_buffers", "_modules"):
                table = state.get(registry)
                if isinstance(table, dict) and table.get(name) is not None:
                    found = table[name]
                    break
        if found is None:
            return None
        value = found
    return value


def _device(value: Any) -> str:
    if probe.is_tensor(value):
        return probe.tensor_facts(value).device
    if probe.is_module(value):
        devices = set()
        try:
            tensors = [*value.parameters(), *value.buffers()][:256]
        except Exception as caught:  # a module of the user's own may override them
            contain(caught)
            tensors = []
        for tensor in tensors:
            devices.add(probe.tensor_facts(tensor).device)
        others = sorted(devices - {TARGET})
        return others[0] if others else (TARGET if devices else "")
    return ""


def _fix(steps: list[Step]) -> Fix:
    code = []
    for step in steps:
        text = format_path(step.path)
        if step.action == "module_to":
            code.append(f"{text}.to({TARGET!r})")
        else:
            code.append(f"{text} = {text}.to({TARGET!r})")
    names = [format_path(s.path) for s in steps]
    shown = names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" and {names[-1]}"
    return Fix(
        title=f"Move {shown} to {TARGET}: the Dataset the workers copy (then iterate again)",
        code="\n".join(code),
        scope="namespace",
        steps=tuple(steps),
    )


def history_fix(path: Path, devices: set[str], namespace: Mapping[str, Any] | None) -> Fix | None:
    """The earlier cell that built the Dataset (``dataset = Normalised(x, m.to(device))``)
    without the moves of its arguments to the worker's wrong devices: the Dataset
    keeps CPU tensors, the training loop moves the batches. One line, its moves
    (``.to(d)``, ``.cuda()``) dropped; None when there is no such line."""
    if len(path) != 1 or path[0][0] != "name":
        return None
    name = str(path[0][1])
    found = None
    for filename in reversed([f for f in list(linecache.cache) if is_cell(f)][-100:]):
        found = cell_index(filename).get(name)
        if found is not None:
            break
    if found is None or found.lineno != found.end_lineno or not isinstance(found.value, ast.Call):
        return None
    lines = cell_lines(filename)
    line = lines[found.lineno - 1].encode()
    call = found.value
    spans: set[tuple[int, int, ast.expr]] = set()
    for arg in (*call.args, *(k.value for k in call.keywords)):
        for node in ast.walk(arg):
            if _moves_to(node, devices, namespace or {}):
                assert isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                spans.add((node.col_offset, node.end_col_offset or 0, node.func.value))
    edited, last = line, len(line) + 1
    for start, end, receiver in sorted(spans, key=lambda span: -span[0]):
        if end > last:
            continue  # inside a move already dropped
        inner = line[receiver.col_offset : receiver.end_col_offset]
        edited, last = edited[:start] + inner + edited[end:], start
    if edited == line:
        return None
    where = source_location(filename, found.lineno)
    return Fix(
        title=f"Build {name} with CPU tensors where {where} makes it: the training loop "
        "moves the batches to the device",
        code=edited.decode(),
        scope="source",
        location=where,
        original=line.decode(),
        filename=filename,
        lineno=found.lineno,
        end_lineno=found.lineno,
    )


def _moves_to(node: ast.AST, devices: set[str], namespace: Mapping[str, Any]) -> bool:
    """``x.cuda()``, or ``x.to(d)`` with ``d`` one of ``devices`` (never a dtype)."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    if node.func.attr == "cuda":
        return any(d.startswith("cuda") for d in devices)
    if node.func.attr != "to":
        return False
    given = [*node.args[:1], *(k.value for k in node.keywords if k.arg == "device")]
    kinds = {device_type(d) for d in devices}
    for arg in given:
        value: Any = None
        if isinstance(arg, ast.Constant):
            value = arg.value
        elif isinstance(arg, ast.Name):
            value = namespace.get(arg.id)
        text = (
            value
            if isinstance(value, str)
            else str(value)
            if type(value).__name__ == "device"
            else ""
        )
        if text and device_type(text) in kinds:
            return True
    return False
