"""Where the user's names live: IPython's ``user_ns``, else ``__main__``'s globals.

IPython is looked up only when already imported (``sys.modules``), never imported.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from ipydevice._debug import contain

__all__ = ["user_namespace"]


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
