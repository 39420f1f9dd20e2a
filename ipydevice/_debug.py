"""Fail safe for users, fail loud in tests.

``IPYDEVICE_DEBUG=1`` makes every guarded stage re-raise instead of degrading to a
one-line notice (the test suite sets it). Standard library only.
"""

from __future__ import annotations

import os

__all__ = ["debug_enabled", "describe_failure"]


def debug_enabled() -> bool:
    """True when ``IPYDEVICE_DEBUG`` is set to anything but ``0``/empty."""
    return os.environ.get("IPYDEVICE_DEBUG", "") not in ("", "0")


def describe_failure(stage: str, exc: BaseException) -> str:
    """The one line a user sees when ipydevice itself fails."""
    try:
        detail = " ".join(str(exc).split())[:160]  # one line, whatever the message
    except Exception:
        detail = "?"
    return f"ipydevice: {stage} failed ({type(exc).__name__}: {detail}); set IPYDEVICE_DEBUG=1 for details"
