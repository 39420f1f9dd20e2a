"""Tensors that go together: a culprit kept by an object that has no ``.to()`` but
behaviour of its own (its class defines methods that read its tensors: a
``torch.distributions`` object's ``log_prob``, a user's helper) is one of the
tensors that object computes with. Moving that one alone leaves the others on the
old device (a ``Normal``'s ``scale`` beside its ``loc``, a ``Categorical``'s
cached ``logits`` beside its ``probs``): the next method call fails. So the
object's other public tensors off the target are culprits too, each named from
the user's root (``vae.prior.scale``), and one fix moves them all, in place.

A plain record (``SimpleNamespace``, a dict, a dataclass without methods of its
own) is not such an object: its fields are independent, and only what the
failing code read moves. Part of the naming stage
(:func:`ipydevice.pipeline.engine.name_in_depth`).
"""

from __future__ import annotations

import types
from collections.abc import Callable

from ipydevice.collect import probe
from ipydevice.collect.frames import is_user_file
from ipydevice.collect.holders.base import class_dicts, instance_dict, public_attributes
from ipydevice.collect.reading import dict_items
from ipydevice.collect.scan import Entry, Scan

__all__ = ["add_together", "has_behaviour", "users_class"]

#: class id -> (the class, whether it defines methods of its own)
_BEHAVIOUR: dict[int, tuple[type, bool]] = {}


def has_behaviour(kind: type) -> bool:
    """``kind`` (or a base class but ``object``) defines a method that is not a
    dunder: its instances compute with what they hold."""
    found = _BEHAVIOUR.get(id(kind))
    if found is not None and found[0] is kind:
        return found[1]
    answer = any(
        type(value) is types.FunctionType and not (key.startswith("__") and key.endswith("__"))
        for namespace in class_dicts(kind)
        for key, value in list(namespace.items())[:500]
        if type(key) is str
    )
    if len(_BEHAVIOUR) > 4096:
        _BEHAVIOUR.clear()
    _BEHAVIOUR[id(kind)] = (kind, answer)
    return answer


def add_together(scan: Scan, only: set[int], off_target: Callable[[Entry], bool]) -> bool:
    """Adds, as named entries, the other public tensors of the holders (without
    ``.to()``, with behaviour) that hold a wanted, named tensor attribute, when
    ``off_target`` says they are off the target too. True when one was added."""
    holders: dict[int, Entry] = {}
    for key, entry in scan.entries.items():
        container = entry.container
        if (
            key in only
            and entry.named
            and container is not None
            and len(entry.path) > 1
            and entry.path[-1][0] == "attr"
            and probe.is_tensor(entry.obj)
        ):
            holders.setdefault(id(container), entry)
    found = False
    for entry in holders.values():
        holder = entry.container
        kind = type(holder)
        if (
            probe.is_module(holder)
            or probe.class_attribute(kind, "to") is not None
            or not has_behaviour(kind)
            or scan._spent()
        ):
            continue
        state = instance_dict(holder)
        if state is None:
            continue
        # a library's object computes with its private tensors too (a
        # MultivariateNormal's cached ``_unbroadcasted_scale_tril``): all move with it
        read = public_attributes if users_class(kind) else _tensor_attributes
        for step, child in read(state, scan.settings.max_items):
            if not probe.is_tensor(child) or id(child) in scan.entries:
                continue
            sibling = scan.add(child, (*entry.path[:-1], step), "namespace", named=True, user=True)
            if sibling is None:
                continue
            if not off_target(sibling):
                del scan.entries[id(child)]
                continue
            sibling.owner, sibling.container = entry.owner, holder
            # the holder's method that read one reads the others: on the line alike
            sibling.on_line, sibling.frame = entry.on_line, entry.frame
            found = True
    return found


def users_class(kind: type) -> bool:
    """A method of ``kind`` itself (read from its class dict) is the user's code: a
    cell's, a script's, a module of their own (a class with no method of its own
    counts as theirs)."""
    state = next(iter(class_dicts(kind)), None)  # (read without a metaclass hook)
    if state is None:
        return True
    for value in list(state.values())[:200]:
        if type(value) is types.FunctionType:
            return is_user_file(value.__code__.co_filename)
    return True


def _tensor_attributes(state: dict, limit: int) -> list[tuple[tuple[str, str], object]]:
    """The instance dict's tensors, private names too (not dunders)."""
    return [
        (("attr", key), value)
        for key, value in dict_items(state, limit)
        if type(key) is str
        and key.isidentifier()
        and not key.startswith("__")
        and probe.is_tensor(value)
    ]
