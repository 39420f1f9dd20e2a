"""Device *warnings* get the panel too: transformers, accelerate and torch's meta no-op.

Some device problems do not raise, they warn, and the computation carries on
slowly or wrongly:

* transformers' ``UserWarning`` "You are calling .generate() with the
  `input_ids` being on a device type different than your model's device";
* accelerate's logger warnings "You shouldn't move a model that is dispatched
  using accelerate hooks." and "Some parameters are on the meta device because
  they were offloaded to the cpu." (older releases logged the latter on the root
  logger, as "meta device device");
* torch's ``load_state_dict`` ``UserWarning`` "copying from a non-meta parameter
  in the checkpoint to a meta parameter in the current model, which is a no-op".

:class:`DeviceWarnings` hooks three places and changes nothing they print:

* ``warnings.showwarning`` is chained: the previous one prints first, exactly as
  before; only then is a device warning (:func:`ipydevice.diagnosis.recognise.recognise`
  with ``"UserWarning"``) diagnosed. ``warnings.catch_warnings(record=True)``,
  ``simplefilter("ignore")`` and ``-W error`` all act before ``showwarning`` is
  called, so they keep working: with ``-W error`` the warning is an exception
  and the ordinary error panel applies.
* a :class:`logging.Handler` on the ``accelerate`` and ``transformers`` loggers.
  A handler there means :data:`logging.lastResort` no longer fires for their
  records, so when no other handler would print a record, this one prints it
  with ``lastResort`` itself: the stock output is unchanged.
* a :class:`logging.Filter` on the root logger (it never drops a record) for the
  old root-logged accelerate wording.

A warning has no traceback: :mod:`ipydevice.pipeline.live_warning` builds one from
the live stack at the moment of the warning and diagnoses it like an exception's
(imported with the first device warning, not when the hooks are installed). The
diagnosis (text only) is reported right away, under
the stock output; when the stock output comes later (a root handler set up by
``logging.basicConfig`` runs after the ``accelerate`` one, and the root filter
runs before every handler) it is kept until :meth:`DeviceWarnings.flush`, which
the IPython hook calls after the cell. One report per distinct message per cell
(:meth:`DeviceWarnings.new_cell`): a warning in a loop gives one panel, and the
meta no-op warning, raised once per parameter, gives one per load.

Pure except what it hooks: no IPython here. Importing this module imports
neither torch nor the engine (both only when a device warning is diagnosed).
"""

from __future__ import annotations

import logging
import re
import sys
import threading
import warnings
from collections.abc import Callable, Mapping
from types import FrameType
from typing import TYPE_CHECKING, Any

from ipydevice._debug import failure_line

if TYPE_CHECKING:  # pragma: no cover
    from ipydevice.model import Diagnosis

__all__ = ["LOGGERS", "DeviceWarnings"]

#: The library loggers whose records are read (children included).
LOGGERS = ("accelerate", "transformers")
_MAX_KEYS = 1000
_MAX_TEXTS = 16  # device warnings kept per cell for the error that may follow

Report = Callable[["Diagnosis"], None]


def _is_device_text(text: str, root_logger: bool = False) -> bool:
    """A device error's text; on the *root* logger, only of the families worth a
    panel there (anything else logged there is the user's own business)."""
    from ipydevice import registry
    from ipydevice.diagnosis.recognise import recognise

    facts = recognise(text, "UserWarning")
    if not facts.is_device_error or not root_logger:
        return facts.is_device_error
    family = registry.family_of(facts.family)
    return family is not None and family.from_root_logger


def _key(text: str) -> str:
    """One key per message, whatever parameter the meta no-op names (the patterns are
    compiled with the first device warning, not when the hooks are installed)."""
    text = re.sub(r"^for [\w.\[\]]+: ", "", text.strip())
    return re.sub(r"\s+", " ", text)[:500]


# -- the hooks -----------------------------------------------------------------------


class _Handler(logging.Handler):
    """On the library loggers: reads records, prints what ``lastResort`` would have."""

    def __init__(self, owner: DeviceWarnings) -> None:
        super().__init__(logging.NOTSET)
        self.owner = owner

    def emit(self, record: logging.LogRecord) -> None:
        self.owner.on_record(record, self)


class _RootFilter(logging.Filter):
    """On the root logger: notes records logged there; never drops one."""

    def __init__(self, owner: DeviceWarnings) -> None:
        super().__init__()
        self.owner = owner

    def filter(self, record: logging.LogRecord) -> bool:
        self.owner.on_root_record(record)
        return True


class DeviceWarnings:
    """Chains ``warnings.showwarning`` and watches the library loggers.

    Args:
        report: called with each device warning's
            :class:`~ipydevice.model.Diagnosis` (displays the panel).
        namespace: returns the user's names when a warning comes.
        loggers: the logger names to watch (children included).
        touched: called when a device warning is seen (the shell's hook then has
            work for the cell's end and the next cell's start).
    """

    def __init__(
        self,
        report: Report,
        namespace: Callable[[], Mapping[str, Any] | None] = lambda: None,
        loggers: tuple[str, ...] = LOGGERS,
        touched: Callable[[], None] = lambda: None,
    ) -> None:
        self.report = report
        self.touched = touched
        self.namespace = namespace
        self.loggers = loggers
        self.previous: Any = None
        self.installed = False
        self.active = False
        self.seen: set[str] = set()
        self.pending: list[Diagnosis] = []
        #: the cell's device warnings, for the error that may follow them
        #: (:mod:`ipydevice.diagnosis.warned`)
        self.texts: list[str] = []
        self.handler = _Handler(self)
        self.root_filter = _RootFilter(self)
        self._local = threading.local()
        # One object, so that unloading can tell whether it is still the one installed.
        self._showwarning = self.showwarning

    # -- install / remove --

    def install(self) -> None:
        """Chains ``showwarning``, adds the handler and the root filter; twice is harmless."""
        if self.installed:
            return
        self.previous = warnings.showwarning
        warnings.showwarning = self._showwarning
        for name in self.loggers:
            logging.getLogger(name).addHandler(self.handler)
        logging.getLogger().addFilter(self.root_filter)
        self.installed = self.active = True

    def remove(self) -> None:
        """Puts back the previous ``showwarning`` and removes the handler and the filter.

        When something chained its own ``showwarning`` after this one, that one is
        left in place (it calls this one, which then only passes warnings on).
        """
        if not self.installed:
            return
        if warnings.showwarning is self._showwarning:
            warnings.showwarning = self.previous
        for name in self.loggers:
            logging.getLogger(name).removeHandler(self.handler)
        logging.getLogger().removeFilter(self.root_filter)
        self.installed = self.active = False
        self.seen.clear()
        self.pending.clear()
        self.texts.clear()

    # -- cells --

    @property
    def busy(self) -> bool:
        """This cell has device warnings to look after (seen, kept, or read by an error)."""
        return bool(self.seen or self.pending or self.texts)

    def new_cell(self) -> None:
        """A new cell starts: every message may be reported once again."""
        self.seen.clear()
        self.pending.clear()
        self.texts.clear()

    def flush(self) -> None:
        """Reports the diagnoses kept until the stock output was printed."""
        pending, self.pending = self.pending, []
        for diagnosis in pending:
            self.report(diagnosis)

    # -- the hooks themselves --

    def showwarning(
        self,
        message: Any,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: Any = None,
        line: str | None = None,
    ) -> None:
        """The chained ``warnings.showwarning``: the stock output, then the panel."""
        previous = self.previous if self.previous is not None else warnings._showwarning_orig  # type: ignore[attr-defined]
        previous(message, category, filename, lineno, file, line)
        if not self.active or file is not None:
            return  # an explicit file: someone printing warnings on purpose, not a warning
        name = getattr(category, "__name__", "Warning")
        self._consider(_text(message), name, sys._getframe(1), immediate=True)

    def on_record(self, record: logging.LogRecord, handler: logging.Handler) -> None:
        """A record reached the library loggers' handler."""
        alone, later = _other_handlers(record, handler)
        if alone:  # what logging would have done without this handler
            last = logging.lastResort
            if last is not None and record.levelno >= last.level:
                last.handle(record)
        if not self.active or record.levelno < logging.WARNING:
            return
        origin = f"{record.name} {record.levelname}"
        self._consider(_record_text(record), origin, sys._getframe(1), immediate=not later)

    def on_root_record(self, record: logging.LogRecord) -> None:
        """A record logged on the root logger itself (the old accelerate wording)."""
        if not self.active or record.levelno < logging.WARNING:
            return
        origin = f"{record.name} {record.levelname}"
        self._consider(
            _record_text(record), origin, sys._getframe(1), immediate=False, root_logger=True
        )

    def _consider(
        self,
        text: str,
        origin: str,
        frame: FrameType,
        immediate: bool,
        root_logger: bool = False,
    ) -> None:
        if getattr(self._local, "busy", False):
            return  # a warning raised while diagnosing one
        self._local.busy = True
        try:
            self._guarded(self._handle, text, origin, frame, immediate, root_logger)
        finally:
            self._local.busy = False
            del frame

    def _handle(
        self,
        text: str,
        origin: str,
        frame: FrameType,
        immediate: bool,
        root_logger: bool,
    ) -> None:
        if not text or not _is_device_text(text, root_logger):
            return
        self.touched()  # the cell has a device warning to look after
        if text not in self.texts and len(self.texts) < _MAX_TEXTS:
            self.texts.append(text)
        key = _key(text)
        if key in self.seen:
            return
        if len(self.seen) < _MAX_KEYS:
            self.seen.add(key)
        from ipydevice.pipeline import live_warning  # the engine: only for a device warning

        diagnosis = live_warning.diagnose_warning(text, origin, self.namespace(), frame)
        if not diagnosis.is_device_error:
            return
        if immediate:
            self.report(diagnosis)
        else:
            self.pending.append(diagnosis)

    @staticmethod
    def _guarded(func: Callable[..., Any], *args: Any) -> None:
        try:
            func(*args)
        except BaseException as failure:  # contained, whatever it is (see ipydevice._debug)
            print(failure_line("warning panel", failure), file=sys.stderr)


def _text(message: Any) -> str:
    try:
        return str(message)
    except Exception:
        return ""


def _record_text(record: logging.LogRecord) -> str:
    try:
        return record.getMessage()
    except Exception:
        return ""


def _other_handlers(record: logging.LogRecord, ours: logging.Handler) -> tuple[bool, bool]:
    """``(alone, later)``: no other handler sees ``record`` (so ``lastResort``
    would print it); another one that prints it runs after ``ours``."""
    logger = logging.Logger.manager.loggerDict.get(record.name)
    current: Any = logger if isinstance(logger, logging.Logger) else None
    if current is None:
        return True, False
    found = later = 0
    passed = False
    while current is not None:
        for handler in current.handlers:
            if handler is ours:
                passed = True
                continue
            found += 1
            if passed and record.levelno >= handler.level:
                later += 1
        current = current.parent if current.propagate else None
    return found == 0, later > 0
