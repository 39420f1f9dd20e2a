"""``torch.compile`` errors that wrap a device mismatch: ``ipydevice.collect.compiled``.

On a CPU-only machine, Dynamo turns a meta/CPU mix into an error even where eager
mode accepts it (``x @ w`` with a meta ``w``), and a meta ``Linear`` with a CPU
input fails in both: ``torch.compile(model)(x)`` raises Dynamo's
``TorchRuntimeError: Tensor device mismatch``, ``model(x)`` the plain
``Tensor on device meta is not on the expected device cpu!``.

Checked here: recognition (the wrapped error is family ``op_mismatch`` with
devices meta and cpu), the ``from user code:`` location, and the eager hints run
as cells: the plain error they reproduce gets the ordinary diagnosis naming the
culprit, and ``set_stance("force_eager")`` leaves compilation on afterwards.
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from shells import panels, singleton_shell
from shells import run_captured as run_quiet

import ipydevice
from ipydevice.collect import compiled
from ipydevice.diagnosis.recognise import recognise
from ipydevice.integrations import ipython as ext

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(
    not hasattr(torch, "compile") or sys.version_info >= (3, 14), reason="needs torch.compile"
)

SETUP = """\
import torch, torch.nn as nn
w = torch.randn(4, 3, device='meta')
x = torch.randn(2, 4)
def fn(a, b):
    return a @ b
cfn = torch.compile(fn, backend='eager')
model = nn.Linear(4, 3, device='meta')
cmodel = torch.compile(model, backend='eager')
def step(batch):
    return cfn(batch, w).sum()
"""


@pytest.fixture
def ip() -> Iterator[InteractiveShell]:
    with singleton_shell() as shell:
        shell.run_line_magic("load_ext", "ipydevice")
        run_quiet(shell, SETUP)
        yield shell


def failure(shell: InteractiveShell, source: str) -> BaseException:
    _, result = run_quiet(shell, source)
    assert result.error_in_exec is not None
    return result.error_in_exec


# -- recognition -----------------------------------------------------------------------------


def test_the_dynamo_error_is_a_compile_error_and_a_device_error(ip: InteractiveShell) -> None:
    exc = failure(ip, "y = cfn(x, w)")
    assert type(exc).__name__ == "TorchRuntimeError"
    assert compiled.is_compile_error(exc)
    facts = recognise(str(exc), type(exc).__name__)
    assert facts.family == "op_mismatch" and set(facts.devices) == {"meta", "cpu"}
    diagnosis = ipydevice.diagnose(exc, namespace=ip.user_ns)
    assert diagnosis.is_device_error and diagnosis.family == "op_mismatch"
    assert set(diagnosis.devices) == {"meta", "cpu"}


def test_plain_errors_are_not_compile_errors(ip: InteractiveShell) -> None:
    exc = failure(ip, "model(x)")
    assert "is not on the expected device cpu" in str(exc)
    assert not compiled.is_compile_error(exc)
    assert not compiled.is_compile_error(ValueError("x"))
    assert compiled.eager_hint(exc, ip.user_ns) == ()


def test_a_wrapped_or_re_raised_compile_error_is_recognised() -> None:
    text = (
        "Tensor device mismatch\n  Explanation: Expected all tensors to be on the same device, "
        'but found at least two devices, cpu and meta!\n\nfrom user code:\n   File "train.py", '
        "line 5, in fn\n    return x @ w\n"
    )
    assert compiled.is_compile_error(RuntimeError(text))
    outer = ValueError("training failed")
    outer.__cause__ = RuntimeError("Dynamo failed to run FX node with fake tensors")
    assert compiled.is_compile_error(outer)


def test_from_user_code_names_the_traced_line(ip: InteractiveShell) -> None:
    exc = failure(ip, "y = cfn(x, w)")
    (where,) = compiled.user_code_locations(str(exc))
    assert where.function == "fn" and where.line == "return a @ b" and where.is_user
    assert where.lineno == 5


# -- the eager hints, run ----------------------------------------------------------------------


def test_compiled_module_hints_reproduce_the_plain_error_and_its_diagnosis(
    ip: InteractiveShell,
) -> None:
    exc = failure(ip, "out = cmodel(x)")
    fixes = compiled.eager_hint(exc, ip.user_ns)
    assert [f.scope for f in fixes] == ["cell", "cell"]
    stance, original = fixes
    assert stance.code == (
        'with torch.compiler.set_stance("force_eager"):  # without torch.compile, to see the plain error\n'
        "    out = cmodel(x)\n"
    )
    assert original.code == "out = cmodel._orig_mod(x)\n"
    assert "uncompiled cmodel._orig_mod" in original.title
    for fix in fixes:
        cap, result = run_quiet(ip, fix.code)
        plain = result.error_in_exec
        assert isinstance(plain, RuntimeError) and not compiled.is_compile_error(plain)
        assert "Tensor on device meta is not on the expected device cpu" in str(plain)
        (bundle,) = panels(cap)  # the ordinary panel, naming the culprit
        last = ext.hook_of(ip).last
        assert last is not None and last.culprits[0].name == "x"
        assert "`x` is on cpu" in bundle["text/plain"]


def test_compiled_function_hints_run_eagerly(ip: InteractiveShell) -> None:
    exc = failure(ip, "y = cfn(x, w)")
    stance, original = compiled.eager_hint(exc, ip.user_ns)
    assert original.code == "y = cfn._torchdynamo_orig_callable(x, w)\n"
    for fix in (stance, original):
        _, result = run_quiet(ip, fix.code)
        assert result.success  # eager matmul accepts meta and cpu; compile did not
        assert ip.user_ns["y"].device.type == "cpu"


def test_set_stance_leaves_compilation_on(ip: InteractiveShell) -> None:
    exc = failure(ip, "y = cfn(x, w)")
    stance = compiled.eager_hint(exc, ip.user_ns)[0]
    run_quiet(ip, stance.code)
    again = failure(ip, "y = cfn(x, w)")
    assert compiled.is_compile_error(again)  # compiled again, failing the same way


def test_a_compiled_call_inside_a_function(ip: InteractiveShell) -> None:
    exc = failure(ip, "loss = step(x)")
    stance, original = compiled.eager_hint(exc, ip.user_ns)
    assert stance.code.endswith("    loss = step(x)\n")  # the failed line, wherever compile is
    assert "return cfn._torchdynamo_orig_callable(batch, w).sum()" in original.code
    assert "(in step; then re-run the failed line)" in original.title
    _, result = run_quiet(ip, stance.code)
    assert result.success


def test_a_loop_and_a_line_with_two_compiled_calls(ip: InteractiveShell) -> None:
    exc = failure(ip, "for i in range(2):\n    pair = (cfn(x, w), cmodel(x))")
    stance, original = compiled.eager_hint(exc, ip.user_ns)
    assert stance.code.splitlines()[1].startswith(
        '    with torch.compiler.set_stance("force_eager")'
    )
    assert original.code.splitlines()[1] == (
        "    pair = (cfn._torchdynamo_orig_callable(x, w), cmodel._orig_mod(x))"
    )


def test_model_compiled_in_place_gets_the_stance_hint(ip: InteractiveShell) -> None:
    run_quiet(
        ip,
        "class Net(nn.Module):\n    def forward(self, a):\n        return a @ w\n"
        "net = Net()\nnet.compile(backend='eager')",
    )
    exc = failure(ip, "out = net(x)")
    assert compiled.is_compile_error(exc)
    fixes = compiled.eager_hint(exc, ip.user_ns)
    assert [f.title for f in fixes] == [
        "Run this line without torch.compile, to see the plain error"
    ]
    _, result = run_quiet(ip, fixes[0].code)
    assert result.success


def test_a_statement_sharing_its_line_is_not_wrapped(ip: InteractiveShell) -> None:
    exc = failure(ip, "a = 1; y = cfn(x, w)")
    fixes = compiled.eager_hint(exc, ip.user_ns)
    assert [f.code for f in fixes] == ["a = 1; y = cfn._torchdynamo_orig_callable(x, w)\n"]


def test_torch_is_imported_when_the_cell_has_no_torch_name(ip: InteractiveShell) -> None:
    run_quiet(ip, "import torch as th\nfast = th.compile(fn, backend='eager')\ndel torch")
    exc = failure(ip, "y = fast(x, w)")
    stance = compiled.eager_hint(exc, ip.user_ns)[0]
    assert stance.code.startswith("import torch\nwith torch.compiler.set_stance")
    run_quiet(ip, "import torch")


def test_a_script_gets_source_fixes(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\n"
        "w = torch.randn(4, 3, device='meta')\n"
        "x = torch.randn(2, 4)\n"
        "fast = torch.compile(lambda a, b: a @ b, backend='eager')\n"
        "def main():\n"
        "    y = fast(x, w)\n"
        "    return y\n"
        "main()\n"
    )
    with pytest.raises(RuntimeError, match="Tensor device mismatch") as caught:
        runpy.run_path(str(script), run_name="__main__")
    fixes = compiled.eager_hint(caught.value)
    assert [f.scope for f in fixes] == ["source", "source"]
    stance, original = fixes
    assert stance.location == "train.py:8" and stance.lineno == 8
    assert stance.code.endswith("    main()\n")
    assert original.location == "train.py:6"
    assert original.original == "    y = fast(x, w)\n"
    assert original.code == "    y = fast._torchdynamo_orig_callable(x, w)\n"


# -- the panel ------------------------------------------------------------------------------------


def test_the_panel_names_the_culprit_and_offers_the_eager_run(ip: InteractiveShell) -> None:
    cap, _ = run_quiet(ip, "out = cmodel(x)")
    (bundle,) = panels(cap)
    last = ext.hook_of(ip).last
    assert last is not None and last.culprits and last.culprits[0].name == "x"
    titles = [f.title for f in last.fixes]
    assert "Run this line without torch.compile, to see the plain error" in titles
    assert "set_stance" in bundle["text/plain"]
