"""What a ``functools.lru_cache``/``cache`` function keeps: its results, read
without calling it.

A helper that builds a tensor once and caches it (``@functools.cache def
get_table(n): return torch.arange(n)``) hands the failing line a tensor no
variable names: the call's result. :func:`cached_results` reads the cache through
the garbage collector's referents of the wrapper (no call, no ``repr``), and
:func:`cached_operands` adds, as operands of a user frame's failing statement, the
cached result of each call there to such a function (``get_table(4)``: the
arguments matched by value when they are plain literals or names bound to them,
else the cache's only result), shown as ``get_table(4)`` in ``get_table``'s cache.
"""

from __future__ import annotations

import ast
import gc
import itertools
import types
from typing import Any

from ipydevice.collect import probe
from ipydevice.collect.frames import FrameView, failing_statement, safe_value
from ipydevice.collect.scan import Scan
from ipydevice.collect.walk import CACHED

__all__ = ["CACHED", "cached_operands", "cached_results"]

_LITERALS = (int, float, str, bool, type(None))


def cached_results(wrapper: Any, limit: int) -> list[tuple[str, Any]]:
    """``(arguments as written, result)`` for the results a ``functools`` cache
    holds (``'4'`` for ``get_table(4)``; ``'…'`` when an argument is not a plain
    literal), read from the garbage collector's referents of the wrapper: its cache
    dict (key -> result, or key -> a link when the cache is bounded, whose key and
    result the wrapper's referents list next to each other)."""
    refs = gc.get_referents(wrapper)
    own = probe.module_dict(wrapper)
    caches = [r for r in refs if type(r) is dict and r is not own]
    if not caches:
        return []
    cache = caches[0]
    marks = [r for r in refs if type(r) is object]
    out: list[tuple[str, Any]] = []
    values = list(itertools.islice(dict.values(cache), limit))
    links = {id(type(v)) for v in values}
    if links and all(type(v).__module__ == "functools" for v in values):
        # bounded: the wrapper visits each link's key and result, then the link's type
        keys = {id(k) for k in itertools.islice(dict.keys(cache), limit)}
        pairs = [
            (refs[i], refs[i + 1])
            for i in range(len(refs) - 2)
            if id(refs[i]) in keys and id(refs[i + 2]) in links
        ]
    else:
        pairs = list(itertools.islice(dict.items(cache), limit))
    for key, result in pairs:
        out.append((_arguments(key, marks[0] if marks else None), result))
    return out


def _arguments(key: Any, mark: Any) -> str:
    """A cache key written back as the call's arguments (``4``, ``'en', n=2``)."""
    if type(key) in _LITERALS:
        return repr(key)
    if type(key) is not tuple and type(key).__module__ != "functools":
        return "…"
    items = list(tuple.__iter__(key))
    split = next((i for i, item in enumerate(items) if item is mark), len(items))
    args, rest = items[:split], items[split + 1 :]
    if not all(type(a) in _LITERALS for a in args + rest[1::2]):
        return "…"
    words = [repr(a) for a in args]
    words += [f"{k}={v!r}" for k, v in zip(rest[::2], rest[1::2], strict=False) if type(k) is str]
    return ", ".join(words)


def cached_operands(scan: Scan, view: FrameView, index: int, innermost: bool) -> None:
    """Adds the cached results the failing statement of ``view`` gets from calls
    to ``functools`` caches (see module docstring)."""
    found = failing_statement(view)
    if found is None:
        return
    limit = scan.settings.max_items
    for node in ast.walk(found[0]):
        if not isinstance(node, ast.Call) or not _may_be_cached(node.func, view):
            continue
        ok, wrapper = safe_value(node.func, view.frame)
        if not ok or type(wrapper) is not CACHED:
            continue
        results = cached_results(wrapper, limit)
        text = _written(node, view)
        chosen = [r for t, r in results if t == text] if text is not None else []
        if not chosen and len(results) == 1:
            chosen = [results[0][1]]
        for result in chosen[:1]:
            entry = scan.add(
                result,
                (("local", ast.unparse(node)),),
                view.label,
                on_line=True,
                operand=innermost,
                user=True,
                frame=index,
            )
            if entry is not None and view.is_module_level:
                entry.top = True


def _may_be_cached(func: ast.expr, view: FrameView) -> bool:
    """A call's callee that may be a cache's wrapper: a name, or an attribute of a
    module or a class (a cached function, a cached static method). A method's cache
    is bound when read through an instance (``self.table``), and is no wrapper then:
    such callees (most of a ``forward``'s) are not resolved at all."""
    if isinstance(func, ast.Name):
        return True
    if not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Name):
        return False
    ok, base = safe_value(func.value, view.frame)
    return ok and (type(base) is types.ModuleType or probe.is_a(base, type))


def _written(call: ast.Call, view: FrameView) -> str | None:
    """The call's arguments as :func:`cached_results` writes a cache key, when each
    is a literal or a name bound to a plain literal."""
    values: list[Any] = []
    for arg in call.args:
        if isinstance(arg, ast.Constant):
            values.append(arg.value)
            continue
        ok, value = safe_value(arg, view.frame) if isinstance(arg, ast.Name) else (False, None)
        if not ok or type(value) not in _LITERALS:
            return None
        values.append(value)
    words = [repr(v) for v in values]
    for keyword in call.keywords:
        if keyword.arg is None or not isinstance(keyword.value, ast.Constant):
            return None
        words.append(f"{keyword.arg}={keyword.value.value!r}")
    return ", ".join(words)
