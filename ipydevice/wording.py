"""Words shared by every stage that writes for people: counts with their nouns.

Standard library only, imports nothing of the package (the collectors, the
diagnosis and the renderers all use it).
"""

from __future__ import annotations

__all__ = ["plural"]


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``1 tensor``, ``2 tensors``; ``plural_form`` for irregular nouns."""
    if count == 1:
        return f"{count} {noun}"
    return f"{count} {plural_form or noun + 's'}"
