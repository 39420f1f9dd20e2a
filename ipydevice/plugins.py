"""Extending ipydevice: your own audits, device-error wordings, holder kinds and report consumers.

Registries, for code that knows things ipydevice cannot:

* :func:`audit` — a rule over the objects ipydevice audits (``ipydevice.check()``,
  ``%devices`` and ``%devices --check``, and, in the error panel, the model, the
  failing module, the culprits and their owners; not watch mode, which stays cheap). A cache class of your own that must sit on the model's
  device, a wrapper whose buffers ``.to()`` cannot reach::

      @ipydevice.audit("kv_cache")
      def kv_cache_device(obj, context):
          if isinstance(obj, KVCache) and context.device:
              device = str(obj.keys.device)
              if device != context.device:
                  yield ipydevice.Finding(
                      name=context.name, device=device, kind="KVCache",
                      where=context.where, target=context.device,
                      why=f"the cache is on {device}, the model on {context.device}",
                  )

  An audit gets each object and an :class:`AuditContext` (strings only) and returns
  (or yields) :class:`~ipydevice.model.Finding`\\ s, ``Problem``\\ s (a finding and
  its fixes, :class:`ipydevice.Problem`) or nothing. A finding left with the
  default ``rule`` takes the audit's name.
* :func:`message` — a device-error wording of your own (a CUDA extension's
  ``"flash_fwd: q on cuda:0 but k on cpu"``): a regular expression whose match makes
  the exception a device error, so that the panel names the tensors. Named groups
  ``offending`` and ``expected`` (devices), ``op`` and ``argument`` are read when
  present; otherwise the devices are those the message mentions.
* :func:`family` — a whole kind of device error of your own, as one
  :class:`~ipydevice.family.Family`: its wordings, summary, advice, how
  it chooses the target device, its cell fix and the objects whose audits explain
  it. ipydevice's own families (:mod:`ipydevice.diagnosis.families`) are
  registered the same way, and :func:`families` lists them all::

      from ipydevice.family import Family, wording

      ipydevice.plugins.family(Family(
          "flash_attention", "a FlashAttention kernel got tensors on two devices",
          (wording("flash_attention", 2000, "flash_fwd",
                   r"flash_fwd: q on (?P<d1>@D) but k on (?P<d2>@D)@E", exp="d1", off="d2"),),
      ))
* :func:`holder` — how a class of your own holds tensors (``bag[0]`` of a ``Bag``
  that keeps them in a private list), so that ``%devices``, ``check()`` and the
  panel find them, name them as you write them and move them; ipydevice's own
  holder kinds (:mod:`ipydevice.collect.holders`) are listed by :func:`holders`.
* :func:`on_diagnosis` — a function called with every device-error
  :class:`~ipydevice.model.Diagnosis` the IPython panel or the ``sys.excepthook``
  of :func:`ipydevice.install` reports (strings only: log it, count it, send it).

Registering again under the same name (an audit's or message's name; a function's
module and qualified name) replaces the earlier one, so re-running a notebook cell
does not stack copies; :func:`remove` takes one out.

Plugins run inside ipydevice's guards: one that raises, or returns something that is
not a finding, is skipped and reported in one line (a note of the checkup or the
diagnosis); with ``IPYDEVICE_DEBUG=1`` it raises. What a plugin returns is checked
(strings where strings belong, at most :data:`MAX_PER_CALL` problems per call) and
goes through the same escaping as everything else ipydevice shows. Apply performs a
plugin's fix only through its :class:`~ipydevice.model.Step`\\ s, by reference, like
any other fix: code is never run.

Imports nothing beyond the standard library, :mod:`ipydevice.model` and the
registry (:mod:`ipydevice.registry`); listing the families loads the built-in ones.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar, get_args

from ipydevice import registry as _registry
from ipydevice._debug import contain, failure_line
from ipydevice.family import Family, Wording
from ipydevice.model import Action, Finding, Fix, Problem, Step

__all__ = [
    "MAX_PER_CALL",
    "AuditContext",
    "Problem",
    "audit",
    "audits",
    "families",
    "family",
    "holder",
    "holders",
    "message",
    "messages",
    "on_diagnosis",
    "own_audits",
    "remove",
]

#: Problems kept from one audit for one object; the rest is dropped with a note.
MAX_PER_CALL = 20
#: Registrations kept in each registry.
MAX_REGISTERED = 64

_F = TypeVar("_F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class AuditContext:
    """What an audit knows besides the object itself (strings only).

    Attributes:
        name: how the user writes the object (``cache``, ``model.encoder``,
            ``object 1`` for an unnamed argument of ``check()``).
        where: ``namespace``, ``check()`` or the frame that holds it.
        device: the device of the model among the objects audited (its first
            execution device when dispatched), or ``""`` when there is no model.
        model: how the user writes that model, or ``""``.
    """

    name: str
    where: str
    device: str = ""
    model: str = ""


@dataclass(frozen=True, slots=True)
class _Message:
    name: str
    pattern: re.Pattern[str]
    exc_types: frozenset[str]


_AUDITS: dict[str, Callable[[Any, AuditContext], Any]] = {}
_MESSAGES: dict[str, _Message] = {}
_LISTENERS: dict[str, Callable[[Any], Any]] = {}


# -- registering ------------------------------------------------------------------------


def audit(name: str) -> Callable[[_F], _F]:
    """Registers the decorated function as an audit named ``name`` (see the module
    docstring); the name becomes its findings' ``rule``."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError("ipydevice.audit needs a name, such as @ipydevice.audit('kv_cache')")

    def register(func: _F) -> _F:
        if not callable(func):
            raise TypeError("ipydevice.audit decorates a function (obj, context)")
        _add(_AUDITS, name, func)
        return func

    return register


def message(
    pattern: str | re.Pattern[str],
    *,
    exc_types: Iterable[str] = (),
    name: str | None = None,
) -> None:
    """Makes exceptions whose message matches ``pattern`` (``re.search``, case
    insensitive when given as a string) device errors.

    Args:
        pattern: a regular expression; named groups ``offending``, ``expected``
            (devices such as ``cuda:0``), ``op`` and ``argument`` are read if present.
        exc_types: exception class names it applies to (``RuntimeError``); all when
            empty.
        name: the registration's name (default: the pattern's text).

    Built-in wordings are recognised first, and an ``OutOfMemoryError`` never is a
    device error, whatever a pattern says.
    """
    compiled = re.compile(pattern, re.I | re.S) if isinstance(pattern, str) else pattern
    if not isinstance(compiled, re.Pattern) or not isinstance(compiled.pattern, str):
        raise TypeError("ipydevice.message takes a str pattern or a compiled str pattern")
    types = frozenset(str(t).rsplit(".", 1)[-1] for t in exc_types)
    key = name if name is not None else compiled.pattern
    _add(_MESSAGES, key, _Message(key, compiled, types))


def family(rule: Family) -> Family:
    """Registers a device-error family (see the module docstring); a family of the
    same id is replaced. Its wordings are tried in their ``order`` among all
    families' (the built-in ones are numbered 10 to 470)."""
    if not isinstance(rule, Family) or not isinstance(rule.id, str) or not rule.id.strip():
        raise TypeError("ipydevice.plugins.family takes a Family with an id")
    if not all(isinstance(w, Wording) and w.family == rule.id for w in rule.wordings):
        raise ValueError(
            f"every wording of {rule.id!r} must be made with wording({rule.id!r}, ...)"
        )
    if _registry.family_of(rule.id) is None and len(_registry.family_ids()) >= MAX_REGISTERED:
        raise RuntimeError(f"ipydevice: at most {MAX_REGISTERED} plugins of one kind")
    _registry.add_family(rule)
    return rule


def families() -> tuple[str, ...]:
    """The ids of the registered device-error families, ipydevice's own first."""
    from ipydevice.diagnosis import families as builtin  # registers them on first use

    del builtin
    return _registry.family_ids()


def holder(
    kind: type | Callable[[type], bool],
    items: Callable[[Any], Iterable[tuple[Any, Any]]],
    *,
    name: str | None = None,
) -> None:
    """Tells ipydevice how instances of a class of yours hold tensors, so that
    ``%devices``, ``inventory()``, ``check()`` and the error panel find them and
    name them as you write them::

        ipydevice.plugins.holder(Bag, lambda bag: enumerate(bag._things))  # bag[0], bag[1]

    Args:
        kind: the class (its subclasses too), or a function of a class that says
            whether this holder kind applies to it.
        items: ``items(obj)`` yields ``(key, child)`` pairs: a ``str`` key that
            is an identifier is an attribute (``obj.key``), an ``int`` or another
            ``str`` an item (``obj[key]``); ``(('attr' | 'item', key), child)``
            says which. The scan takes at most its ``max_items`` of them.
        name: the registration's name (default: the class's qualified name).

    Your kinds are tried before ipydevice's own (:mod:`ipydevice.collect.holders`);
    one that raises is skipped for that object (``IPYDEVICE_DEBUG=1`` raises).
    """
    from ipydevice.collect import holders as _holders

    if not callable(items) or not callable(kind):
        raise TypeError("ipydevice.plugins.holder takes a class (or predicate) and items(obj)")
    key = name if name is not None else _qualified(kind)
    known = [h.name for h in _holders.holders() if h.order == 0]
    if key not in known and len(known) >= MAX_REGISTERED:
        raise RuntimeError(f"ipydevice: at most {MAX_REGISTERED} plugins of one kind")
    _holders.add(_holders.user_holder(key, kind, items))


def holders() -> tuple[str, ...]:
    """The names of the registered holder kinds, in the order they are tried
    (yours first, then ipydevice's own)."""
    from ipydevice.collect import holders as _holders

    return tuple(h.name for h in _holders.holders())


def on_diagnosis(func: _F) -> _F:
    """Registers ``func(diagnosis)``, called with every device-error diagnosis the
    IPython panel or :func:`ipydevice.install`'s hook reports."""
    if not callable(func):
        raise TypeError("ipydevice.on_diagnosis decorates a function (diagnosis)")
    _add(_LISTENERS, _qualified(func), func)
    return func


def remove(what: str | Callable[..., Any]) -> bool:
    """Takes out an audit (ipydevice's own too), message, family or holder kind (by name) or a listener (the function,
    or its qualified name); True when something was removed."""
    key = what if isinstance(what, str) else _qualified(what)
    found = False
    if isinstance(what, str):
        found = _registry.remove_family(what) | _registry.remove_audit(what)
        if what in holders():
            from ipydevice.collect import holders as _holders

            found |= _holders.remove(what)
    for registry in (_AUDITS, _MESSAGES, _LISTENERS):
        if key in registry:
            del registry[key]
            found = True
    if not isinstance(what, str):
        for registry in (_AUDITS, _LISTENERS):  # an audit removed by its function
            for name, func in list(registry.items()):
                if func is what:
                    del registry[name]
                    found = True
    return found


def audits() -> tuple[str, ...]:
    """The names of the registered audits: ipydevice's own (:mod:`ipydevice.audits`,
    which :func:`remove` takes out too), then those registered with :func:`audit`."""
    from ipydevice import audits as builtin  # registers them on first use

    del builtin
    return tuple(a.name for a in _registry.audits()) + own_audits()


def own_audits() -> tuple[str, ...]:
    """The names of the audits registered with :func:`audit`."""
    return tuple(_AUDITS)


def messages() -> tuple[str, ...]:
    """The names of the registered messages."""
    return tuple(_MESSAGES)


def _add(registry: dict[str, Any], key: str, value: Any) -> None:
    if key not in registry and len(registry) >= MAX_REGISTERED:
        raise RuntimeError(f"ipydevice: at most {MAX_REGISTERED} plugins of one kind")
    registry.pop(key, None)  # a re-run cell's new version goes last, like a new one
    registry[key] = value


def _qualified(func: Callable[..., Any]) -> str:
    """A listener's key: ``module.qualname`` for a function (a re-run cell's new
    version replaces the old one), that plus its object for a bound method (the
    registry keeps the object alive, so its id stays its own), else the callable's
    id (the registry keeps it alive too)."""
    module = getattr(func, "__module__", None)
    qualname = getattr(func, "__qualname__", None)
    owner = getattr(func, "__self__", None)
    if isinstance(qualname, str) and owner is not None and not isinstance(owner, type):
        prefix = f"{module}." if isinstance(module, str) else ""
        return f"{prefix}{qualname} of {id(owner)}"
    if isinstance(module, str) and isinstance(qualname, str):
        return f"{module}.{qualname}"
    return f"listener {id(func)}"


# -- running (for ipydevice's own modules) ---------------------------------------------------


def run_audits(obj: Any, context: AuditContext, notes: list[str]) -> list[Problem]:
    """Every registered audit on ``obj``: the problems kept, failures noted."""
    out: list[Problem] = []
    for name, func in list(_AUDITS.items()):
        try:
            out.extend(_problems(name, func(obj, context), notes))
        except BaseException as failure:  # sys.exit() in an audit too (see _debug)
            contain(failure)
            notes.append(failure_line(f"audit {name!r}", failure))
    return out


def _problems(name: str, result: Any, notes: list[str]) -> Iterator[Problem]:
    if result is None:
        return
    items = [result] if isinstance(result, (Problem, Finding)) else result
    kept = 0
    for item in items:
        if kept >= MAX_PER_CALL:
            notes.append(f"audit {name!r}: only its first {MAX_PER_CALL} problems are shown")
            return
        problem = _checked(name, item)
        if problem is None:
            notes.append(
                f"audit {name!r} returned a {type(item).__name__}, not a Finding or Problem"
            )
            continue
        kept += 1
        yield problem


def _checked(name: str, item: Any) -> Problem | None:
    """A well-formed problem from what an audit returned, or None."""
    fixes: Any = ()
    if type(item) is Finding:
        finding = item
    elif type(item) is Problem and type(item.finding) is Finding:
        finding, fixes = item.finding, item.fixes
    else:
        return None
    if not all(type(getattr(finding, f.name)) is str for f in dataclasses.fields(finding)):
        return None
    if finding.rule == "wrong_device":
        finding = dataclasses.replace(finding, rule=name)
    good = tuple(fix for fix in _as_tuple(fixes) if _well_formed(fix))
    return Problem(finding, good)


def _as_tuple(fixes: Any) -> tuple[Any, ...]:
    try:
        return tuple(fixes)[:MAX_PER_CALL]
    except TypeError:
        return ()


def _well_formed(fix: Any) -> bool:
    if type(fix) is not Fix or fix.scope not in ("namespace", "cell", "source"):
        return False
    texts = (fix.title, fix.code, fix.scope, fix.location, fix.original, fix.filename)
    if not all(type(t) is str for t in texts) or not isinstance(fix.steps, tuple):
        return False
    return all(_well_formed_step(step) for step in fix.steps)


#: What :meth:`Fix.apply` knows how to do (see :mod:`ipydevice.fixes.apply`).
_ACTIONS = frozenset(get_args(Action))


def _well_formed_step(step: Any) -> bool:
    """A :class:`Step` of a known action, a path of (kind, str or int) steps from a
    name, and a device string: what Apply can follow without running any code."""
    if type(step) is not Step or type(step.action) is not str or type(step.target) is not str:
        return False
    path = step.path
    if step.action not in _ACTIONS or type(path) is not tuple or not path:
        return False
    for part in path:  # exact types only: a str subclass could compare as anything
        if type(part) is not tuple or len(part) != 2 or type(part[0]) is not str:
            return False
        if part[0] not in ("name", "attr", "item"):
            return False
        if type(part[1]) is not str and type(part[1]) is not int:
            return False
    return path[0][0] == "name"


def match_message(text: str, exc_type: str) -> tuple[dict[str, str], str] | None:
    """The first registered message matching ``text``: its named groups and the
    matched text; None when none does (or a pattern fails)."""
    for registered in list(_MESSAGES.values()):
        if registered.exc_types and exc_type not in registered.exc_types:
            continue
        try:
            found = registered.pattern.search(text)
        except BaseException as caught:  # a pattern that cannot run on this text: not a match
            contain(caught)
            continue
        if found is not None:
            groups = {k: v for k, v in found.groupdict().items() if isinstance(v, str)}
            return groups, found.group(0)
    return None


def notify(diagnosis: Any) -> None:
    """Calls every :func:`on_diagnosis` listener; a failing one is reported in one
    line on stderr (raised when debugging)."""
    import sys

    for key, func in list(_LISTENERS.items()):
        try:
            func(diagnosis)
        except BaseException as failure:  # sys.exit() in a listener too (see _debug)
            contain(failure)
            print(failure_line(f"listener {key}", failure), file=sys.stderr)
