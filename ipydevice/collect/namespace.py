"""Where the user's names live: IPython's ``user_ns``, else ``__main__``'s globals.

IPython is looked up only when already imported (``sys.modules``), never imported.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from types import CodeType
from typing import Any

from ipydevice._debug import contain

__all__ = ["code_names", "user_namespace"]

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
