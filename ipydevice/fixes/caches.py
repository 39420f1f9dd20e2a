"""The fix for a tensor a ``functools`` cache keeps: where the cached function
makes it.

A cached result (``get_table(4)``, :mod:`ipydevice.collect.caches`) cannot be moved
by assigning to a path: the cache hands the same tensor to every later call. The
fix is where the function creates it: its factory calls get ``device=`` (the
user's device variable, else the target), and running the edited definition again
makes a new function with an empty cache (``get_table.cache_clear()`` does the same
for a function defined in a file).
"""

from __future__ import annotations

import dataclasses
import itertools
import types
from collections.abc import Mapping
from typing import Any

from ipydevice.collect import probe
from ipydevice.collect.caches import CACHED, cached_results
from ipydevice.collect.frames import is_user_file
from ipydevice.collect.scan import Entry
from ipydevice.diagnosis.culprits import Analysis
from ipydevice.fixes.factories import factories_together
from ipydevice.model import Fix

__all__ = ["cache_fix"]

#: Namespace names looked at for the cache that holds a culprit.
_MAX_NAMES = 20_000


def cache_fix(
    entry: Entry,
    namespace: Mapping[str, Any],
    analysis: Analysis,
) -> Fix | None:
    """A source fix for ``entry`` when a ``functools`` cache of the namespace keeps it."""
    if not analysis.target or not probe.is_tensor(entry.obj) or type(namespace) is not dict:
        return None
    for name, value in itertools.islice(dict.items(namespace), _MAX_NAMES):
        if type(value) is not CACHED or type(name) is not str:
            continue
        if not any(result is entry.obj for _, result in cached_results(value, 1_000)):
            continue
        state = probe.module_dict(value)
        func = state.get("__wrapped__") if type(state) is dict else None
        if type(func) is not types.FunctionType or not is_user_file(func.__code__.co_filename):
            return None
        device = analysis.device_name or repr(analysis.target)
        fix = factories_together(func.__code__, name, device)
        if fix is None:
            return None
        title = (
            f"Create {name}()'s tensors on {analysis.target}: its cache keeps what it "
            "made; run the definition again (or call "
            f"{name}.cache_clear())"
        )
        return dataclasses.replace(fix, title=title)
    return None
