"""The real-library corpus (see README.md here): each case, then the rates."""

from __future__ import annotations

import pytest
from realworld import RESULTS, format_rates, rates, run_case
from realworld_cases import CASES

pytest.importorskip("transformers")
pytest.importorskip("peft")
pytest.importorskip("accelerate")

pytestmark = pytest.mark.realworld

#: The rates the corpus must keep (they only go up).
FLOORS = {
    "first culprit right": 0.95,
    "target right": 1.0,
    "first fix runs": 0.95,
    "other errors quiet": 1.0,
}


def _param(case):
    marks = [pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else []
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_case(case):
    outcome = run_case(case)
    assert outcome.ok, outcome.explain()


def test_cases_cite_public_reports():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    assert len([c for c in CASES if not c.quiet]) >= 30
    assert all(c.url.startswith("https://") for c in CASES)
    covered = {n for c in CASES for n in c.classes}
    assert covered >= set(range(1, 10))


def test_rates(capsys):
    """The corpus's rates (printed for CI); cases not run in this session run now."""
    outcomes = [RESULTS.get(c.id) or run_case(c) for c in CASES]
    with capsys.disabled():
        print("\n" + format_rates(outcomes))
    for name, (right, total) in rates(outcomes).items():
        if name in FLOORS and total:
            assert right / total >= FLOORS[name], format_rates(outcomes)
