"""Every limit ipydevice works under, in one place.

A scan, a diagnosis and a rendering are bounded by these numbers so that a huge
namespace, a million-item list or a 32-block model costs what is *shown*, not what
exists. Truncation is always reported to the user (see ``Snapshot.notes``).

Change them with :func:`configure` (process-wide) or :func:`override` (a block);
in IPython, ``%config IPyDevice.<name> = value`` does the same through traitlets.
Imports nothing beyond the standard library.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["VERBOSITIES", "Settings", "configure", "current", "override", "verbosity_for"]

#: How much a panel says, as IPython's ``%xmode`` names it: the headline and the best
#: fix; today's panel (culprits, objects involved, every fix); everything.
VERBOSITIES = ("Minimal", "Context", "Verbose")

#: Panels whose buttons stay alive in a kernel (one widget each); an older panel's
#: buttons are closed (its words and code stay). A few: each live widget outlives the
#: cells run after it, and what the kernel keeps for those cells then pins the free
#: space it leaves behind (in a 1,000-error session, 8 live widgets added 2.1-2.3 MB
#: of RSS over stock, all of it allocator free space; 4 add about 1.7 MB).
MAX_LIVE_BUTTONS = 4


@dataclass(frozen=True, slots=True)
class Settings:
    """Limits and switches for scanning, diagnosing and rendering.

    Attributes:
        max_rows: rows shown in a table before "… N more" is printed (8: a panel
            shows its culprit, which comes first, and its fix without scrolling).
        max_depth: how deep containers and attribute chains are followed.
        max_items: items looked at in one container (list, dict, ...).
        max_objects: objects visited in one scan, all roots together; also the
            objects one naming search looks at.
        max_frames: traceback frames walked, innermost first.
        max_modules: submodules walked in one module tree.
        max_names: names of the user's namespace looked at in one diagnosis beyond
            those the failing code reads (those come first, whatever their number).
        max_fixes: fixes proposed in one diagnosis.
        show_library_frames: also list tensors held only by library frames.
        verbosity: ``"Minimal"``, ``"Context"`` or ``"Verbose"``; ``None`` (the
            default) follows IPython's ``%xmode`` (see :func:`verbosity_for`).
        time_budget: wall-clock seconds the user code a scan cannot avoid (a
            tensor subclass's Python ``device`` property, a sizes policy of
            ``__torch_dispatch__``) may take in one diagnosis, inventory or
            checkup; after them the scan stops and the notes say so.
        note: :func:`ipydevice.diagnose` attaches the diagnosis to the exception it
            explains (a PEP 678 note and the ``__ipydevice__`` payload, see
            :mod:`ipydevice.diagnosis.carried`). Off by default, so a notebook's
            tracebacks stay as they are; scripts, workers, ranks and the pytest
            plugin attach it whatever this says.
    """

    max_rows: int = 8
    max_depth: int = 4
    max_items: int = 200
    max_objects: int = 5000
    max_frames: int = 40
    max_modules: int = 2000
    max_names: int = 20_000
    max_fixes: int = 6
    show_library_frames: bool = False
    verbosity: str | None = None
    time_budget: float = 2.0
    note: bool = False


_current = Settings()


def current() -> Settings:
    """Returns the settings in force."""
    return _current


def configure(**changes: Any) -> Settings:
    """Changes settings for the rest of the process and returns the new ones.

    Raises:
        TypeError: a name that is not a setting.
        ValueError: a limit that is not a positive integer.
    """
    global _current
    _current = _validated(dataclasses.replace(_current, **changes))
    return _current


@contextlib.contextmanager
def override(**changes: Any) -> Iterator[Settings]:
    """Changes settings inside a ``with`` block only."""
    global _current
    saved = _current
    _current = _validated(dataclasses.replace(saved, **changes))
    try:
        yield _current
    finally:
        _current = saved


def verbosity_for(setting: str | None, xmode: str | None = None) -> str:
    """The verbosity in force: ``setting`` when given, else the one ``%xmode`` implies.

    ``%xmode Minimal`` gives Minimal, ``%xmode Verbose`` Verbose, every other mode
    (Context, Plain, Docs, none at all) Context.
    """
    if setting is not None:
        return _canonical_verbosity(setting)
    return xmode if xmode in ("Minimal", "Verbose") else "Context"


def _canonical_verbosity(value: object) -> str:
    if isinstance(value, str):
        for name in VERBOSITIES:
            if value.strip().lower() == name.lower():
                return name
    raise ValueError(
        f"ipydevice setting verbosity must be one of {', '.join(VERBOSITIES)} or None, "
        f"not {value!r}"
    )


def _validated(settings: Settings) -> Settings:
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        if field.type == "int" and (not isinstance(value, int) or value < 1):
            raise ValueError(f"ipydevice setting {field.name} must be a positive integer")
        if field.type == "float" and (
            type(value) not in (int, float) or not 0 < value < float("inf")
        ):
            raise ValueError(f"ipydevice setting {field.name} must be a positive number (seconds)")
    if settings.verbosity is not None:
        canonical = _canonical_verbosity(settings.verbosity)
        if canonical != settings.verbosity:
            settings = dataclasses.replace(settings, verbosity=canonical)
    return settings
