"""A culprit torch.compile's traced code reads from its globals, closure cells or
``self`` is named and moved (:mod:`ipydevice.collect.traced`); the eager re-run
stays a way to see the plain error, after the moves, never the fix itself."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from shells import loaded_shell, panels

from ipydevice.integrations import ipython as ext
from ipydevice.model import Diagnosis

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(
    not hasattr(torch, "compile") or sys.version_info >= (3, 14), reason="needs torch.compile"
)

SETUP = """\
import torch, torch.nn as nn
x = torch.randn(2, 4, device='meta')
scale = torch.randn(3)
model = nn.Linear(4, 3, device='meta')

@torch.compile(backend='eager')
def scaled(a):
    return model(a) * scale

def make():
    shift = torch.randn(3)
    def shifted(a):
        return model(a) + shift
    return torch.compile(shifted, backend='eager')
shifted = make()

head = nn.Linear(4, 3)
@torch.compile(backend='eager')
def two_heads(a):
    return model(a) + head(a)

class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3, device='meta')
    def forward(self, a):
        return self.lin(a) * scale
cmodule = torch.compile(Scaled(), backend='eager')

class Decorated(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3, device='meta')
    @torch.compile(backend='eager')
    def forward(self, a):
        return self.lin(a) * scale
decorated = Decorated()

class InPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3, device='meta')
        self.table = torch.randn(3)
    def forward(self, a):
        return self.lin(a) + self.table
in_place = InPlace()
in_place.compile(backend='eager')

class Lookup:
    def __init__(self):
        self.table = torch.randn(3)
    def run(self, a):
        return model(a) + self.table
lookup = Lookup()
compiled_method = torch.compile(lookup.run, backend='eager')

class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3, device='meta')
        self.offset = torch.randn(3)
    def forward(self, a):
        return self.lin(a) - self.offset
class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()
    def forward(self, a):
        return self.inner(a)
net = Outer()
fast_net = torch.compile(net, backend='eager')

def make_affine(w_scale, w_shift):
    def affine(a):
        return model(a) * w_scale + w_shift
    return torch.compile(affine, backend='eager')
gain = torch.randn(3)
affine = make_affine(gain, torch.zeros(3, device='meta'))
"""

CASES = {
    "a decorated function reading a global": (
        "out = scaled(x)",
        "scale",
        "scale = scale.to('meta')",
    ),
    "a closure cell": (
        "out = shifted(x)",
        "shifted._torchdynamo_orig_callable.__closure__[0].cell_contents",
        "shifted._torchdynamo_orig_callable.__closure__[0].cell_contents = "
        "shifted._torchdynamo_orig_callable.__closure__[0].cell_contents.to('meta')",
    ),
    "a captured module": ("out = two_heads(x)", "head", "head.to('meta')"),
    "a compiled module's forward reading a global": (
        "out = cmodule(x)",
        "scale",
        "scale = scale.to('meta')",
    ),
    "a decorated forward reading a global": (
        "out = decorated(x)",
        "scale",
        "scale = scale.to('meta')",
    ),
    "a module compiled in place reading its attribute": (
        "out = in_place(x)",
        "in_place.table",
        "in_place.table = in_place.table.to('meta')",
    ),
    "a compiled method of a plain object reading self": (
        "out = compiled_method(x)",
        "lookup.table",
        "lookup.table = lookup.table.to('meta')",
    ),
    # named by the module the user holds, not through the wrapper's ``_orig_mod``
    "a compiled module the user also holds, reading a submodule's attribute": (
        "out = fast_net(x)",
        "net.inner.offset",
        "net.inner.offset = net.inner.offset.to('meta')",
    ),
    # a closure cell whose tensor the user holds by a name: that name, and the cell set too
    "a closure cell the user also holds by a name": (
        "out = affine(x)",
        "gain",
        "gain = gain.to('meta')",
    ),
}


@pytest.fixture
def ip() -> Iterator[InteractiveShell]:
    with loaded_shell(SETUP) as shell:
        yield shell


def diagnosed(ip: InteractiveShell, source: str) -> tuple[int, Diagnosis]:
    hook = ext.hook_of(ip)
    assert hook is not None
    hook.last = None
    with capture_output() as cap:
        ip.run_cell(source)
    assert hook.last is not None
    return len(panels(cap)), hook.last


@pytest.mark.parametrize(("source", "name", "move"), list(CASES.values()), ids=list(CASES))
@pytest.mark.slow
def test_what_the_traced_code_reads_is_named_and_moved(
    ip: InteractiveShell, source: str, name: str, move: str
) -> None:
    count, diagnosis = diagnosed(ip, source)
    assert count == 1
    assert diagnosis.target == "meta"
    assert name in [c.name for c in diagnosis.culprits]
    fixes = diagnosis.fixes
    first = next(i for i, f in enumerate(fixes) if f.scope == "namespace")
    assert move in fixes[first].code.splitlines()
    # The eager re-run is offered, after the moves, to see the plain error.
    eager = [i for i, f in enumerate(fixes) if "without torch.compile" in f.title]
    assert eager and min(eager) > first
    assert fixes[first].apply(ip.user_ns).ok
    with capture_output():
        result = ip.run_cell(source)
    assert result.success, result.error_in_exec


def test_a_held_closure_tensor_is_named_so_and_its_cell_set(ip: InteractiveShell) -> None:
    _, diagnosis = diagnosed(ip, "out = affine(x)")
    assert diagnosis.culprits[0].name == "gain"
    (fix,) = [f for f in diagnosis.fixes if f.scope == "namespace"][:1]
    assert "affine._torchdynamo_orig_callable.__closure__[0].cell_contents = gain" in fix.code
    assert fix.apply(ip.user_ns).ok
    assert ip.user_ns["gain"].device.type == "meta"


def test_a_closure_culprit_says_its_variable(ip: InteractiveShell) -> None:
    _, diagnosis = diagnosed(ip, "out = shifted(x)")
    assert "`shift`" in diagnosis.culprits[0].why
