"""Whether a text says ipydevice's name as a word, not inside a path.

A clone of the project is often a folder named ``ipydevice``: every path into it (the
tests' own files, its ``.venv``'s site-packages in a traceback or a warning) holds
the name too, wherever the clone is. A test that checks that ipydevice said nothing
checks for the name as ipydevice writes it ("ipydevice: ...", "ipydevice · ...").
"""

from __future__ import annotations

import re

_WORD = re.compile(r"(?<![\w./\\-])ipydevice(?![\w./\\-])")


def mentions_ipydevice(text: str) -> bool:
    """``ipydevice`` as a word: not part of a path, a module name or a file name."""
    return _WORD.search(text) is not None
