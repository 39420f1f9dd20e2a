"""The harness of the real-library corpus (see README.md here).

A :class:`Case` is a notebook session modelled on a public user report: setup
cells, the cell that fails, and what a right answer is (the first culprit's name,
the target device, the tensors that must end up there). :func:`run_case` runs it
the way a user would meet it and scores three things:

* ``culprit``: the diagnosis names the expected object first;
* ``target``: the diagnosis moves things to the expected device;
* ``fix``: the first fix, applied the way the panel applies it (namespace fixes
  through ``Fix.apply``, by reference; cell fixes by running the rewritten cell;
  source fixes by re-running the session with the proposed lines), makes the WHOLE
  failed cell run, and the tensors it computes are on the target.

Cases whose setup says ``device='cuda'`` run under :func:`fakecuda.fake_cuda`
(FakeTensorMode: PyTorch's real device errors, no GPU); ``standin`` cases on
:mod:`standin`'s ``openreg`` device, a second device with data for the cases whose
fix or library reads tensor values. ``shell`` cases run in
IPython's in-process shell with ``%load_ext ipydevice`` and read the panel's
diagnosis, as a notebook user would. ``quiet`` cases are other errors: the
diagnosis must say they are not device errors.
"""

from __future__ import annotations

import contextlib
import dataclasses
import textwrap
import traceback
from collections.abc import Iterator
from typing import Any
from warnings import catch_warnings, simplefilter

from cells import Notebook
from fakecuda import fake_cuda
from standin import standin

import ipydevice
from ipydevice.model import Diagnosis, Fix

PRELUDE = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
"""


@dataclasses.dataclass(frozen=True)
class Case:
    """One corpus case (see module docstring).

    Attributes:
        id: a short name (the test id).
        url: the public report it is modelled on.
        classes: the classes of issue 12 it exercises (0: none, a baseline).
        setup: the cells run before the failing one (a string is one cell).
        cell: the cell that fails.
        culprit: the name the diagnosis must give first.
        target: the device the diagnosis must choose.
        checks: expressions the fixed cell leaves in the namespace, each a tensor (or
            a model output with ``.logits``/``.loss``) that must be on ``target``.
        fix_has: text the first fix's code must contain (the user's words).
        offers: text the code of one of the fixes must contain (a root fix).
        fake: run under fake CUDA (else plain CPU/meta tensors).
        standin: run on the ``openreg`` stand-in device (``standin.py``), which has data,
            rather than under fake CUDA; the case's setup says which GPU of its report it
            stands for.
        shell: run in IPython's in-process shell, read the panel's diagnosis.
        warns: the report's error is a device warning with the libraries of today (the
            library now copes, slowly or with its work on the wrong device): the cell
            must run, its warning's panel is the diagnosis, and the first fix must make
            the cell run again without a device warning (``shell`` cases only).
        quiet: a non-device error: the diagnosis must say so.
        clean: no row of the objects table may come from a library pass-through
            frame (issue 12, class 9).
        xfail: why the package gets it wrong today (``issue 12 class N: ...``).
        needs: the libraries the case imports (skipped where one is missing).
    """

    id: str
    url: str
    classes: tuple[int, ...]
    setup: str | tuple[str, ...]
    cell: str
    culprit: str = ""
    target: str = "cuda:0"
    checks: tuple[str, ...] = ()
    fix_has: str = ""
    offers: str = ""
    fake: bool = True
    standin: bool = False
    shell: bool = False
    warns: bool = False
    quiet: bool = False
    clean: bool = False
    xfail: str = ""
    needs: tuple[str, ...] = ()

    @property
    def cells(self) -> tuple[str, ...]:
        cells = (self.setup,) if isinstance(self.setup, str) else self.setup
        return (PRELUDE, *(textwrap.dedent(c) for c in cells))

    @property
    def failing(self) -> str:
        return textwrap.dedent(self.cell)


@dataclasses.dataclass
class Outcome:
    """How the package did on one case."""

    case: Case
    raised: bool = False
    device_error: bool = False
    culprit: str = ""
    target: str = ""
    culprit_ok: bool = False
    target_ok: bool = False
    fix_ok: bool = False
    fix_words_ok: bool = True
    clean_ok: bool = True
    fix_scope: str = ""
    fix_code: str = ""
    problem: str = ""
    report: str = ""

    @property
    def ok(self) -> bool:
        if self.case.quiet:
            return self.raised and not self.device_error
        return (
            self.device_error
            and self.culprit_ok
            and self.target_ok
            and self.fix_ok
            and self.fix_words_ok
            and self.clean_ok
        )

    def explain(self) -> str:
        if self.case.quiet:
            if not self.raised:
                return "the failing cell ran"
            return "quiet" if not self.device_error else "a non-device error was diagnosed"
        parts = [
            f"culprit {self.culprit!r} (want {self.case.culprit!r})",
            f"target {self.target!r} (want {self.case.target!r})",
            f"first fix [{self.fix_scope}] {'runs' if self.fix_ok else 'FAILS'}: {self.problem}",
        ]
        if not self.fix_words_ok:
            wanted = " / ".join(t for t in (self.case.fix_has, self.case.offers) if t)
            parts.append(f"fixes lack {wanted!r}: {self.fix_code!r}")
        if not self.clean_ok:
            parts.append("library pass-through frames in the objects table")
        return "; ".join(parts) + "\n" + self.report


#: Outcomes of the cases run in this session, by id (for the rates).
RESULTS: dict[str, Outcome] = {}

#: Library frames that only pass arguments through (issue 12, class 9).
PASS_THROUGH = (
    "wrapper",
    "capture_outputs",
    "new_forward",
    "decorate_context",
    "_call_impl",
    "_wrapped_call_impl",
    "inner",
)


# -- sessions -----------------------------------------------------------------------------


class _NotebookSession:
    """Cells in a dict namespace (tests/cells.py), diagnosed with ``ipydevice.diagnose``."""

    def __init__(self) -> None:
        self.nb = Notebook()
        self.ns = self.nb.ns

    def run(self, source: str) -> None:
        self.nb.run(source)

    def error(self, source: str) -> BaseException | None:
        return self.nb.error(source)

    def diagnose(self, exc: BaseException) -> Diagnosis:
        return ipydevice.diagnose(exc, namespace=self.ns)


class _ShellSession:
    """IPython's in-process shell with ``%load_ext ipydevice``: the panel's diagnosis."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.ns = shell.user_ns

    def run(self, source: str) -> None:
        from IPython.utils.capture import capture_output

        with capture_output():
            result = self.shell.run_cell(source, store_history=True)
        if not result.success:
            raise AssertionError(f"cell failed: {result.error_in_exec!r}")

    def error(self, source: str) -> BaseException | None:
        from IPython.utils.capture import capture_output

        with capture_output():
            result = self.shell.run_cell(source, store_history=True)
        return result.error_in_exec

    def warned(self, source: str) -> tuple[BaseException | None, list[Diagnosis]]:
        """Runs a cell: its error (None when it ran) and the diagnoses of the device
        warnings whose panels it showed."""
        from ipydevice.integrations.ipython import hook_of

        hook = hook_of(self.shell)
        assert hook is not None and hook.device_warnings is not None
        warnings, shown = hook.device_warnings, []
        report = warnings.report

        def record(diagnosis: Diagnosis) -> None:
            shown.append(diagnosis)
            report(diagnosis)

        warnings.report = record
        try:
            # every time, as on a first run: Python shows a warning once per location
            with catch_warnings():
                simplefilter("always")
                return self.error(source), shown
        finally:
            warnings.report = report

    def diagnose(self, exc: BaseException) -> Diagnosis:
        from ipydevice.integrations.ipython import hook_of

        hook = hook_of(self.shell)
        assert hook is not None
        # The panel keeps the diagnosis of a device error only; other errors get none.
        return hook.last if hook.last is not None else Diagnosis(is_device_error=False)


@contextlib.contextmanager
def _distributions_validated() -> Iterator[None]:
    """torch's default argument validation of distributions for the case, put back
    after it: a library imported by an earlier case may have turned it off for the
    whole process (zuko does, on import), and a case about a bad ``scale`` needs it."""
    from torch.distributions import Distribution

    before = Distribution._validate_args
    Distribution.set_default_validate_args(__debug__)
    try:
        yield
    finally:
        Distribution._validate_args = before


@contextlib.contextmanager
def _session(case: Case) -> Iterator[Any]:
    with _distributions_validated(), _device_session(case) as session:
        yield session


@contextlib.contextmanager
def _device_session(case: Case) -> Iterator[Any]:
    device = standin() if case.standin else fake_cuda() if case.fake else contextlib.nullcontext()
    if not case.shell:
        with device:
            yield _NotebookSession()
        return
    from shells import singleton_shell

    with singleton_shell(reset=True) as shell:
        shell.history_manager.reset(new_session=True)
        shell.execution_count = 1
        shell.run_line_magic("load_ext", "ipydevice")
        with device:
            yield _ShellSession(shell)


# -- running a case -------------------------------------------------------------------------


def run_case(case: Case) -> Outcome:
    """Runs ``case`` (see module docstring) and records its outcome."""
    outcome = _run(case)
    RESULTS[case.id] = outcome
    return outcome


def _run(case: Case) -> Outcome:
    outcome = Outcome(case)
    with _session(case) as session:
        for source in case.cells:
            session.run(source)
        diagnosis = _failing_cell(case, session, outcome)
        if diagnosis is None:
            return outcome
        outcome.device_error = diagnosis.is_device_error
        if not case.quiet and diagnosis.is_device_error:
            _score(outcome, diagnosis)
    if not case.quiet and diagnosis.is_device_error and diagnosis.fixes:
        outcome.fix_ok, outcome.problem = _first_fix_runs(case, diagnosis.fixes[0])
    elif not case.quiet:
        outcome.problem = "no fix"
    return outcome


def _failing_cell(case: Case, session: Any, outcome: Outcome) -> Diagnosis | None:
    """Runs the case's cell: the diagnosis of its error or, in a ``warns`` case, of its
    first device warning (the cell must then run); None, with the problem noted, when
    the cell did not do what the case says."""
    if case.warns:
        exc, shown = session.warned(case.failing)
        if exc is not None or not shown:
            outcome.problem = f"the cell raised {exc!r}" if exc else "no device warning"
            return None
        outcome.report = str(shown[0])
        return shown[0]
    exc = session.error(case.failing)
    if exc is None:
        outcome.problem = "the failing cell ran"
        return None
    outcome.raised = True
    diagnosis = session.diagnose(exc)
    outcome.report = f"{type(exc).__name__}: {str(exc)[:300]}\n{diagnosis}"
    return diagnosis


def _score(outcome: Outcome, diagnosis: Diagnosis) -> None:
    case = outcome.case
    outcome.culprit = diagnosis.culprits[0].name if diagnosis.culprits else ""
    outcome.target = diagnosis.target
    outcome.culprit_ok = outcome.culprit == case.culprit
    outcome.target_ok = outcome.target == case.target
    if diagnosis.fixes:
        first = diagnosis.fixes[0]
        outcome.fix_scope, outcome.fix_code = first.scope, first.code
        outcome.fix_words_ok = not case.fix_has or case.fix_has in first.code
        if case.offers and not any(case.offers in f.code for f in diagnosis.fixes):
            outcome.fix_words_ok = False
    else:
        outcome.fix_words_ok = not case.fix_has
    if case.clean:
        outcome.clean_ok = not any(
            r.where.split(",")[0].split(".")[-1] in PASS_THROUGH for r in diagnosis.records
        )


def _first_fix_runs(case: Case, fix: Fix) -> tuple[bool, str]:
    """Replays the session from scratch, applies ``fix`` and re-runs the failed
    cell; then every ``checks`` tensor must be on the target."""
    try:
        with _session(case) as session:
            cells = list(case.cells)
            if fix.scope == "source":
                index = next((i for i, c in enumerate(cells) if fix.original in c), -1)
                if not fix.original or index < 0:
                    return False, "the source fix's original text is in no cell"
                cells[index] = cells[index].replace(fix.original, fix.code, 1)
            for source in cells:
                session.run(source)
            if fix.scope == "namespace" and case.warns:
                if not session.warned(case.failing)[1]:
                    return False, "no device warning before the fix"
                result = dataclasses.replace(fix, made_for=()).apply(session.ns)  # cells run again
                if not result.ok:
                    return False, f"apply: {result.message}"
                exc, shown = session.warned(case.failing)
                if exc is not None or shown:
                    return False, f"after the fix: {exc!r}" if exc else "still a device warning"
            elif fix.scope == "namespace":
                if session.error(case.failing) is None:
                    return False, "the failed cell ran before the fix"
                if not fix.can_apply:
                    return False, "the namespace fix cannot be applied"
                result = dataclasses.replace(fix, made_for=()).apply(session.ns)  # cells run again
                if not result.ok:
                    return False, f"apply: {result.message}"
                session.run(case.failing)
            elif fix.scope == "cell":
                session.run(fix.code)
            elif fix.scope == "source":
                session.run(case.failing)
            else:
                return False, f"unknown scope {fix.scope!r}"
            return _on_target(case, session.ns)
    except AssertionError as failure:
        return False, str(failure).splitlines()[0][:300]
    except Exception:
        return False, traceback.format_exc(limit=-2)[-600:]


def _on_target(case: Case, ns: dict[str, Any]) -> tuple[bool, str]:
    for expression in case.checks:
        value = eval(expression, ns)  # test code: the case's own expressions
        for attr in ("logits", "loss", "last_hidden_state"):
            inner = getattr(value, attr, None)
            if inner is not None:
                value = inner
                break
        device = str(getattr(value, "device", "?"))
        if device != case.target:
            return False, f"{expression} is on {device}, not {case.target}"
    return True, ""


# -- rates ---------------------------------------------------------------------------------


def rates(outcomes: list[Outcome]) -> dict[str, tuple[int, int]]:
    """(right, total) per measure, over device cases; quiet cases apart."""
    device = [o for o in outcomes if not o.case.quiet]
    quiet = [o for o in outcomes if o.case.quiet]
    return {
        "first culprit right": (sum(o.culprit_ok for o in device), len(device)),
        "target right": (sum(o.target_ok for o in device), len(device)),
        "first fix runs": (sum(o.fix_ok for o in device), len(device)),
        "whole case right": (sum(o.ok for o in device), len(device)),
        "other errors quiet": (sum(o.ok for o in quiet), len(quiet)),
    }


def format_rates(outcomes: list[Outcome], title: str = "real-library corpus") -> str:
    lines = [f"{title}: {len(outcomes)} cases"]
    for name, (right, total) in rates(outcomes).items():
        percent = 100.0 * right / total if total else 100.0
        lines.append(f"  {name:<22} {right:>3}/{total:<3} {percent:5.1f}%")
    failing = [o for o in outcomes if not o.ok]
    if failing:
        lines.append("  wrong: " + ", ".join(o.case.id for o in failing))
    return "\n".join(lines)
