"""Where the user's names live: IPython's ``user_ns``, else ``__main__``'s globals.

IPython is looked up only when already imported (``sys.modules``), never imported.

A search bounded to the first names of the namespace looks at its public names only
(:func:`public_items`): IPython adds ``_i<N>`` for every cell run, so after a few
thousand cells the first names of a namespace are mostly IPython's own history.
"""

from __future__ import annotations

import itertools
import operator
import sys
from collections.abc import Mapping
from typing import Any

from ipydevice._debug import contain

__all__ = ["public_indexes", "public_items", "user_namespace"]

_FIRST = operator.itemgetter(0)


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


def public_indexes(keys: list[Any]) -> list[int] | None:
    """The indexes of the ``str`` keys without a leading underscore, picked at C speed
    (no bytecode per name); ``None`` when a key is not a ``str`` (the caller then looks
    at each)."""
    try:
        private = map(str.startswith, keys, itertools.repeat("_"))
        return list(itertools.compress(range(len(keys)), map(operator.not_, private)))
    except TypeError:  # a key that is not a str: str.startswith does not apply to it
        return None


def public_items(namespace: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """``namespace``'s items under public names, in order (all of them when a key is
    not a ``str``). Raises what ``namespace.items()`` raises."""
    items = list(namespace.items())
    picked = public_indexes(list(map(_FIRST, items)))
    return items if picked is None else list(map(items.__getitem__, picked))
