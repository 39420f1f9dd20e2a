"""Where the user's names live: IPython's ``user_ns``, else ``__main__``'s globals.

IPython is looked up only when already imported (``sys.modules``), never imported.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterable, Mapping
from types import CodeType
from typing import Any

from ipydevice._debug import contain
from ipydevice.collect.frames import FrameView

__all__ = ["code_names", "default_namespace", "read_slice", "user_namespace"]

#: code objects looked at for the names one frame's code reads (its nested ones too)
_MAX_CODES = 64


def user_namespace() -> Mapping[str, Any]:
    """The namespace the user types names into."""
    ipython = sys.modules.get("IPython")
    if ipython is not None:
        try:
            shell = ipython.get_ipython()
        except BaseException as caught:
            contain(caught)
            shell = None
        if shell is not None:
            return shell.user_ns
    main = sys.modules.get("__main__")
    return vars(main) if main is not None else {}


def code_names(codes: Iterable[CodeType]) -> dict[str, None]:
    """The names ``codes`` read or write (globals, attributes), theirs and their
    nested functions', comprehensions' and lambdas', in order of first use: the
    namespace's names a failing cell or function can be about, looked up first."""
    names: dict[str, None] = {}
    for code in codes:
        stack, seen = [code], 0
        while stack and seen < _MAX_CODES:
            current = stack.pop()
            seen += 1
            names.update(dict.fromkeys(current.co_names))
            stack.extend(c for c in reversed(current.co_consts) if type(c) is CodeType)
    return names


_MISSING = object()
#: namespace names read at C speed between two looks at the clock
_CHUNK = 8192


def read_slice(
    namespace: Mapping[str, Any],
    read_names: Iterable[str],
    limit: int,
    budget: Any,
    notes: list[str],
) -> tuple[list[Any], list[Any], int]:
    """``(keys, values, first)``: the names the failing code reads (the first
    ``first``), then the namespace's names in order, up to ``limit`` of them and
    while ``budget`` (a :class:`~ipydevice.collect.probe.Budget`) lasts.

    The cost follows what the code reads, not what the namespace holds: a
    million names cost ``limit``, and ``notes`` says what was left out.
    """
    keys: list[Any] = []
    values: list[Any] = []
    plain = type(namespace) is dict
    for name in read_names:
        try:
            value = dict.get(namespace, name, _MISSING) if plain else namespace[name]  # type: ignore[call-overload]
        except BaseException as caught:  # a hostile mapping, or a name it does not hold
            contain(caught)
            continue
        if value is not _MISSING:
            keys.append(name)
            values.append(value)
    first = len(keys)
    stopped = False  # by the limit or the time budget, with names left
    try:
        if plain:
            # in chunks at C speed, the budget asked between them
            names, held = iter(namespace), iter(namespace.values())
            while True:
                size = min(_CHUNK, limit - (len(keys) - first))
                if size <= 0 or budget.spent():
                    stopped = len(keys) - first < len(namespace)
                    break
                chunk = list(itertools.islice(names, size))
                if not chunk:
                    break
                keys += chunk
                values += itertools.islice(held, len(chunk))
        else:  # a mapping of its own: each item may run its code, the budget asked for each
            for key, value in namespace.items():
                if len(keys) - first >= limit or budget.spent():
                    stopped = True
                    break
                keys.append(key)
                values.append(value)
    except BaseException as caught:  # a hostile mapping, or one changed while read
        contain(caught)
        del keys[first:], values[first:]
    if len(keys) != len(values):  # changed while read (another thread)
        del keys[first:], values[first:]
    if stopped:
        setting = "max_names"
        if budget.spent():
            setting = "time_budget"
            if budget.note not in notes:
                notes.append(budget.note)
        note = (
            f"namespace: only {len(keys) - first:,} of its names were looked at, after "
            f"the names the failing code reads (the {setting} setting)"
        )
        if note not in notes:
            notes.append(note)
    return keys, values, first


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
