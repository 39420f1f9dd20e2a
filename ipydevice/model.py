"""The plain data ipydevice produces: records, findings, fixes, snapshots.

Contract: every class here is a frozen, slotted dataclass whose fields hold only
``str``, ``int``, ``float``, ``bool``, ``None`` and tuples of those or of other model
objects. No tensor, module, frame, traceback or exception is ever stored, so a
diagnosis kept in ``Out`` or in a widget keeps no GPU memory alive.

Records do not render or apply themselves: their ``__str__``, ``_repr_html_``,
``table()``, ``headline`` and ``Fix.apply`` call the function registered for that
view (:func:`register_view`). :mod:`ipydevice.render` registers the renderers and
:mod:`ipydevice.fixes.apply` the applier when they are imported, so this module
imports nothing beyond the standard library and no import cycle runs through it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = [
    "OPTIMIZER_STATE",
    "Action",
    "ApplyResult",
    "DeviceShare",
    "Diagnosis",
    "Finding",
    "Fix",
    "FrameSummary",
    "Inventory",
    "Mark",
    "ObjectRecord",
    "Problem",
    "Scope",
    "Snapshot",
    "Step",
    "View",
    "register_view",
]

Path = tuple[tuple[str, Any], ...]

#: What a :class:`Step` does (see :class:`Step`).
Action = Literal[
    "reassign",
    "module_to",
    "to_empty",
    "optimizer_state",
    "mapping",
    "sequence",
    "load_state_dict",
    "rebuild_optimizer",
    "share",
    "remake_generator",
]
#: The rule of findings about optimizer state away from its parameters, and the
#: :class:`Step` action that moves it.
OPTIMIZER_STATE: Action = "optimizer_state"
#: Where a fix applies (see :class:`Fix`).
Scope = Literal["namespace", "cell", "source"]

#: What a record delegates: ``text``, ``html``, ``table`` and ``headline`` of a
#: :class:`Diagnosis` and the ``inventory_*`` views of an :class:`Inventory` (filled
#: by :mod:`ipydevice.render`), ``apply`` of a :class:`Fix` (filled by
#: :mod:`ipydevice.fixes.apply`), ``result_html`` of an :class:`ApplyResult`
#: (:mod:`ipydevice.render`).
View = Literal[
    "text",
    "html",
    "table",
    "headline",
    "apply",
    "result_html",
    "inventory_text",
    "inventory_html",
    "inventory_table",
    "inventory_bundle",
]

_VIEWS: dict[str, Callable[..., Any]] = {}


def register_view(view: View, func: Callable[..., Any]) -> None:
    """Makes ``func`` the function records call for ``view``."""
    _VIEWS[view] = func


def _view(view: View) -> Callable[..., Any]:
    func = _VIEWS.get(view)
    if func is None:  # neither the engine nor the renderers were imported
        raise LookupError(f"no {view!r} view registered: import ipydevice.render first")
    return func


@dataclass(frozen=True, slots=True)
class DeviceShare:
    """How much of a module, optimizer or container lives on one device."""

    device: str
    count: int
    nbytes: int


@dataclass(frozen=True, slots=True)
class ObjectRecord:
    """One row of a device table: a tensor, module, optimizer or container.

    Attributes:
        name: the object as the user would write it (``batch['input_ids']``,
            ``model.encoder.layers[3].cache``), or ``pos in PosEnc.forward`` when
            only a frame holds it.
        kind: ``tensor``, ``parameter``, ``buffer``, ``attribute`` (a tensor attribute
            of a module that is not registered), ``module``, ``optimizer``,
            ``optimizer state``, ``container``.
        type_name: the class name (``Tensor``, ``Parameter``, ``Linear``, ``dict``).
        device: ``cuda:0``, ``cpu``, ``meta``; for modules and containers the single
            device they live on, or ``mixed``.
        shape: ``(32, 128)``; empty for non-tensors.
        dtype: ``float32``; empty for non-tensors.
        nbytes: size in bytes (metadata: numel x element size), 0 when unknown.
        where: ``namespace`` or the frame, e.g. ``PosEnc.forward, line 12``.
        shares: per-device breakdown for modules, optimizers and containers.
        detail: a short note (``3 parameters, 1 buffer``; ``0-dim``).
        path: the namespace path as accessor steps, for fixes; empty when only a
            frame holds the object. Each step is ``('name'|'attr'|'item', key)``.
        parent_kind: ``module`` for parameters, buffers and attributes, else empty.
        is_index: the failing line uses it only as an index (``x[idx]``).
    """

    name: str
    kind: str
    type_name: str
    device: str
    shape: str = ""
    dtype: str = ""
    nbytes: int = 0
    where: str = "namespace"
    shares: tuple[DeviceShare, ...] = ()
    detail: str = ""
    path: Path = ()
    parent_kind: str = ""
    is_index: bool = False

    @property
    def is_scalar(self) -> bool:
        """A 0-dim tensor: PyTorch lets a CPU one take part in any device's op."""
        return self.shape == "()"

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-ready)."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class FrameSummary:
    """One traceback frame, as text."""

    filename: str
    lineno: int
    function: str
    line: str
    is_user: bool

    @property
    def label(self) -> str:
        """``PosEnc.forward, line 12`` style."""
        return f"{self.function}, line {self.lineno}"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a scan saw: rows, in discovery order, plus truncation notes."""

    records: tuple[ObjectRecord, ...] = ()
    notes: tuple[str, ...] = field(default=())

    def by_device(self) -> dict[str, list[ObjectRecord]]:
        """Records grouped by device, devices in first-seen order."""
        groups: dict[str, list[ObjectRecord]] = {}
        for record in self.records:
            groups.setdefault(record.device, []).append(record)
        return groups


@dataclass(frozen=True, slots=True)
class Finding:
    """An object on the wrong device, or a cause that will put one there.

    Attributes:
        name: how the user would write the object (``x``, ``model.fc``, ``opt.state``).
        device: where it is now.
        kind: as in :class:`ObjectRecord` (``tensor``, ``module``, ``optimizer state``, ...).
        where: ``namespace`` or the frame holding it.
        why: one line saying what is wrong, in plain words.
        rule: the rule that found it (``wrong_device``, ``unregistered_tensor``,
            ``plain_list``, ``factory_without_device``, ``optimizer_state``, ...).
        target: the device it should be on.
        location: ``file:line`` of the code to change, for source findings.
    """

    name: str
    device: str
    kind: str
    where: str
    why: str
    rule: str = "wrong_device"
    target: str = ""
    location: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-ready)."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Step:
    """One move that :meth:`Fix.apply` performs on a live object, by reference.

    Attributes:
        action: ``reassign`` (``x = x.to(t)``), ``module_to`` (in place),
            ``to_empty`` (materialise a meta module), ``optimizer_state`` (state
            tensors to their parameters' devices, ``step`` kept), ``mapping``
            (rebuild a dict with its tensors moved), ``sequence`` (rebuild a tuple
            or list with its tensors moved), ``load_state_dict`` (a meta module
            given the state dict at ``source`` with ``assign=True``),
            ``rebuild_optimizer`` (the optimizer made again, with its ``defaults``,
            over the parameters of the model at ``source``), ``share`` (the object at
            ``source``, moved by an earlier step, stored at ``path`` too: a closure's cell),
            ``remake_generator`` (a ``torch.Generator`` made again on the target from
            its initial seed).
        path: where the object is, from the user's namespace.
        target: the device to move to.
        source: where the step's other object is (the state dict to load, the model).
    """

    action: Action
    path: Path
    target: str
    source: Path = ()


@dataclass(frozen=True, slots=True)
class Mark:
    """What a fix was made for at one path: Apply checks it at the click.

    Attributes:
        path: where the object was, from the user's namespace.
        token: the key of a weak reference to the object (0: it takes none), so
            that the object itself, not only one like it, is recognised.
        ident: ``id()`` of the object then (a different one now means another object).
        kind: the class, ``module.qualname``.
        shape: for tensors, ``(3, 4)``; else empty.
        dtype: for tensors; else empty.
        device: for tensors; else empty.
        size: ``len()`` of a dict, list or tuple; -1 for anything else.
    """

    path: Path
    token: int = 0
    ident: int = 0
    kind: str = ""
    shape: str = ""
    dtype: str = ""
    device: str = ""
    size: int = -1


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """What :meth:`Fix.apply` did.

    Attributes:
        ok: every move was made.
        message: what was done (``moved x to cuda:0``), or why not.
        moved: each move made, in order (some may be made before a failure).

    ``str()`` is the line the Apply button's status shows (``moved x to cuda:0.
    Re-run the cell.``); the repr and the notebook's display say it with a mark.
    """

    ok: bool
    message: str
    moved: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.message}. Re-run the cell." if self.ok else self.message

    def __repr__(self) -> str:
        return f"<ApplyResult {'✓' if self.ok else '✗'} {self}>"

    def _repr_html_(self) -> str:
        return str(_view("result_html")(self))


@dataclass(frozen=True, slots=True)
class Fix:
    """A way out, as code the user can read, copy, insert or apply.

    Attributes:
        title: what the fix does, in plain words.
        code: Python to run. For ``cell`` fixes, the whole rewritten cell; for
            ``source`` fixes, the replacement for lines ``lineno..end_lineno``.
        scope: ``namespace`` (run once after the error, then re-run the cell),
            ``cell`` (the failed cell rewritten) or ``source`` (change a function or
            class where ``location`` says).
        location: ``file:line`` for source fixes, the cell's name for cell fixes.
        steps: the moves :meth:`apply` performs; empty when it cannot be applied.
        original: the text that ``code`` replaces (cell and source fixes).
        filename: the file of a source or cell fix.
        lineno: first line replaced (1-based), 0 when not applicable.
        end_lineno: last line replaced.
        made_for: what the steps were made for (see :class:`Mark`): Apply refuses
            when a path now holds something else. Not part of equality.
    """

    title: str
    code: str
    scope: Scope
    location: str = ""
    steps: tuple[Step, ...] = ()
    original: str = ""
    filename: str = ""
    lineno: int = 0
    end_lineno: int = 0
    made_for: tuple[Mark, ...] = field(default=(), compare=False)

    @property
    def can_apply(self) -> bool:
        """True when :meth:`apply` can perform this fix on live objects."""
        return bool(self.steps)

    def apply(self, namespace: Mapping[str, Any]) -> ApplyResult:
        """Performs the fix on the live objects found through ``namespace``.

        Objects are moved by reference (``.to()``, ``to_empty()``, reassignment into
        the namespace or the owning container); no generated code is ever run.
        All or nothing: a path that holds something else than the fix was made
        for is refused before anything moves, and a step that fails (or Ctrl-C)
        puts back what the earlier ones moved. Never raises: a failure is
        reported in the result.
        """
        result: ApplyResult = _view("apply")(self.steps, namespace, self.made_for)
        return result

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-ready)."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Problem:
    """A finding and the fixes that remove it (what an audit reports)."""

    finding: Finding
    fixes: tuple[Fix, ...] = ()


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """ipydevice's answer to one exception. See :func:`ipydevice.diagnose`.

    Attributes:
        is_device_error: the exception is a device-placement error.
        family: which kind of device error (see ``ipydevice.diagnosis.recognise.FAMILIES``).
        kind: ``error`` for an exception, ``warning`` for a warning or log record.
        exc_type: the exception's class name.
        message: the exception's message (first 2,000 characters).
        summary: what the message means, in one line.
        devices: the devices the message names.
        argument: the argument the message names (``mat1``, ``index``, ``weight``).
        op: the operation the message names.
        target: the device things should move to (``cuda:0``), or empty.
        target_reason: why that device, in one line ("cuda:0: where `model`'s
            parameters are"), or empty.
        advice: one sentence of advice for this family, from the message alone.
        reference: the object already on the target, usually the model (``model``).
        failing_module: the module whose forward failed (``model.fc (Linear)``).
        culprits: objects on the wrong device, best first.
        causes: findings about why (unregistered buffers, factory calls, ...).
        fixes: ways out, best first.
        snapshot: every object involved, as rows.
        frames: the traceback, as text, innermost last.
        notes: truncations and caveats.
        family_title: the kind of device error in words, for a title ("an
            operation received tensors on different devices"), or empty.
    """

    is_device_error: bool
    family: str | None = None
    kind: str = "error"
    exc_type: str = ""
    message: str = ""
    summary: str = ""
    devices: tuple[str, ...] = ()
    argument: str | None = None
    op: str | None = None
    target: str = ""
    target_reason: str = ""
    advice: str = ""
    reference: str = ""
    failing_module: str = ""
    culprits: tuple[Finding, ...] = ()
    causes: tuple[Finding, ...] = ()
    fixes: tuple[Fix, ...] = ()
    snapshot: Snapshot = field(default_factory=Snapshot)
    frames: tuple[FrameSummary, ...] = ()
    notes: tuple[str, ...] = ()
    family_title: str = ""

    @property
    def records(self) -> tuple[ObjectRecord, ...]:
        """The rows of the snapshot."""
        return self.snapshot.records

    @property
    def headline(self) -> str:
        """One sentence: who is where, and where it should go."""
        return str(_view("headline")(self))

    def table(self, breakdown: bool = False) -> Any:
        """Every object in the snapshot as a pandas DataFrame (culprits first);
        ``breakdown=True``: one row per object and device (see :mod:`ipydevice.render.table`)."""
        return _view("table")(self, breakdown=breakdown)

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-ready)."""
        return asdict(self)

    def __str__(self) -> str:
        return str(_view("text")(self))

    def __repr__(self) -> str:
        if not self.is_device_error:
            return f"<Diagnosis: not a device error ({self.exc_type})>"
        return f"<Diagnosis {self.family}: {self.headline}>"

    def _repr_html_(self) -> str:
        return str(_view("html")(self))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": str(self), "text/html": self._repr_html_()}


@dataclass(frozen=True, slots=True)
class Inventory:
    """Where everything lives. See :func:`ipydevice.inventory`.

    Attributes:
        records: one row per object (per submodule or item for ``names=``).
        totals: per device, the tensors counted once each and their bytes.
        problems: findings with the object, its device and what is wrong.
        notes: truncation and caveats.
        names: the names inspected in depth, when ``names=`` was given.
    """

    records: tuple[ObjectRecord, ...] = ()
    totals: tuple[DeviceShare, ...] = ()
    problems: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()
    names: tuple[str, ...] = ()

    def by_device(self) -> dict[str, list[ObjectRecord]]:
        """Rows grouped by device (``mixed`` for objects spanning several)."""
        groups: dict[str, list[ObjectRecord]] = {}
        for record in self.records:
            groups.setdefault(record.device or "-", []).append(record)
        return groups

    def table(self, breakdown: bool = False) -> Any:
        """The rows as a pandas DataFrame: one row per object, missing values as
        ``pd.NA``, shapes as tuples. ``breakdown=True``: one row per object and
        device, with the count of tensors and their bytes (a long table)."""
        return _view("inventory_table")(self, breakdown)

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-ready)."""
        return asdict(self)

    def __str__(self) -> str:
        return str(_view("inventory_text")(self))

    def __repr__(self) -> str:
        devices = ", ".join(f"{t.device} ×{t.count}" for t in self.totals)
        objects, problems = len(self.records), len(self.problems)
        return (
            f"<Inventory {objects} object{'s' * (objects != 1)} ({devices});"
            f" {problems} problem{'s' * (problems != 1)}>"
        )

    def _repr_html_(self) -> str:
        return str(_view("inventory_html")(self))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        """Text and HTML; a renderer's failure shows as one line in its place
        (IPython would print a traceback per failing mime type)."""
        return dict(_view("inventory_bundle")(self))
