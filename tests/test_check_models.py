"""check() and %devices --check judge the batch against the model, not against a
stray CPU module beside it (a teacher, a baseline, an EMA copy)."""

from __future__ import annotations

import textwrap

from cells import Notebook

import ipydevice


def _check(setup: str, *names: str) -> ipydevice.Checkup:
    nb = Notebook()
    nb.run(textwrap.dedent(setup))
    objects = [nb.ns[n] for n in names]
    return ipydevice.check(*objects, namespace=nb.ns)


STRAY = """
import copy
import torch, torch.nn as nn
model = nn.Linear(4, 2).to('meta')
teacher = nn.Sequential(nn.Linear(4, 64), nn.Linear(64, 2))  # bigger, on the CPU
ema = copy.deepcopy(teacher)
xb = torch.randn(3, 4, device='meta')
yb = torch.randn(3, 2, device='meta')
"""


def test_a_bigger_cpu_teacher_is_not_the_target():
    checkup = _check(STRAY)
    assert not any(f.target == "cpu" for f in checkup.problems)
    assert not any(".to('cpu')" in f.code for f in checkup.fixes)


def test_a_batch_off_the_model_is_still_found_beside_a_teacher():
    checkup = _check(STRAY + "xb = torch.randn(3, 4)\n")
    assert [f.name for f in checkup.problems] == ["xb"]
    assert checkup.problems[0].target == "meta"
