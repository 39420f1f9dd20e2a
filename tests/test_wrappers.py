"""The same failing line under a wrapper (``%%time``, ``%timeit``, ``%%prun``, ``exec``,
``eval``, a nested ``run_cell``) gets the culprit, the fixes and the single panel a
plain cell gets: the wrapped code's text is found where the wrapper left it
(:mod:`ipydevice.collect.wrapped`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from shells import panels, run, run_captured, singleton_shell

from ipydevice.integrations import ipython as ext

SETUP = "import timeit\nimport torch\nx = torch.randn(3, 4)\nw = torch.randn(3, 4, device='meta')\nsrc = 'y = w + x'\n"

WRAPPED = {
    "plain": "y = w + x",
    "cell time": "%%time\ny = w + x",
    "cell time, second line": "%%time\nz = 1\ny = w + x\nz + 1",
    "line time": "%time y = w + x",
    "line time, expression": "%time w + x",
    "cell timeit": "%%timeit -n1 -r1\ny = w + x",
    "cell timeit with setup": "%%timeit -n1 -r1 z = 2\ny = w + x",
    "line timeit": "%timeit -n1 -r1 w + x",
    "cell prun": "%%prun -q\ny = w + x",
    "line prun": "%prun -q y = w + x",
    "exec": "exec('y = w + x')",
    "exec of a name": "exec(src)",
    "exec with its own globals": "exec(src, {'w': w, 'x': x})",
    "eval": "eval('w + x')",
    "exec of a function it defines": "exec('def f():\\n    return w + x\\nf()')",
    "exec of compile": "exec(compile(src, '<mine>', 'exec'))",
    "eval in a function": "def run():\n    return eval('w + x')\nrun()",
    "cell time, last expression": "%%time\nz = 1\nw + x",
    "stdlib timeit": "timeit.timeit('w + x', globals=globals(), number=1)",
    "exec under cell time": "%%time\nexec(src)",
    "eval under cell prun": "%%prun -q\nz = eval('w + x')",
    "nested run_cell": "get_ipython().run_cell('y = w + x')",
    "nested run_cell, raised again": "get_ipython().run_cell('y = w + x').raise_error()",
    "nested run_cell of a magic": "get_ipython().run_cell('%time y = w + x')",
}


@pytest.fixture(scope="module")
def ip() -> Iterator[InteractiveShell]:
    with singleton_shell(reset=True) as shell:
        shell.run_line_magic("load_ext", "ipydevice")
        run(shell, SETUP)
        yield shell


def diagnosed(ip: InteractiveShell, source: str) -> tuple[int, object]:
    hook = ext.hook_of(ip)
    assert hook is not None
    hook.last = None
    cap, _ = run_captured(ip, source)
    return len(panels(cap)), hook.last


@pytest.mark.parametrize("source", list(WRAPPED.values()), ids=list(WRAPPED))
def test_wrapped_line_names_the_culprit_as_a_plain_cell_does(
    ip: InteractiveShell, source: str
) -> None:
    count, diagnosis = diagnosed(ip, source)
    assert count == 1
    assert diagnosis is not None
    assert [c.name for c in diagnosis.culprits][:1] == ["x"]
    assert diagnosis.target == "meta"
    assert any(f.scope == "namespace" and f.code == "x = x.to('meta')" for f in diagnosis.fixes)


TYPED = {
    "cell time": ("%%time\ny = w + x", "%%time\nx = x.to('meta')\ny = w + x\n"),
    "cell time, second line": (
        "%%time\nz = 1\ny = w + x\nz + 1",
        "%%time\nz = 1\nx = x.to('meta')\ny = w + x\nz + 1\n",
    ),
    "cell time, in a loop": (
        "%%time\nfor i in range(2):\n    y = w + x",
        "%%time\nfor i in range(2):\n    x = x.to('meta')\n    y = w + x\n",
    ),
    "cell time, a line magic in its body": (
        "%%time\nfor i in range(2):\n    %time y = w + x",
        "%%time\nfor i in range(2):\n    x = x.to('meta')\n    %time y = w + x\n",
    ),
    "a shell line before": ("!true\ny = w + x", "!true\nx = x.to('meta')\ny = w + x\n"),
    "line time after a line": (
        "z = 1\n%time y = w + x",
        "z = 1\nx = x.to('meta')\n%time y = w + x\n",
    ),
    "line time in a block": (
        "if True:\n    %time y = w + x",
        "if True:\n    x = x.to('meta')\n    %time y = w + x\n",
    ),
    "cell prun": ("%%prun -q\ny = w + x", "%%prun -q\nx = x.to('meta')\ny = w + x\n"),
    "exec under cell time": ("%%time\nexec(src)", "%%time\nx = x.to('meta')\nexec(src)\n"),
}


@pytest.mark.parametrize("history", [True, False], ids=["history", "no history"])
@pytest.mark.parametrize(("source", "expected"), list(TYPED.values()), ids=list(TYPED))
def test_cell_fix_rewrites_the_cell_as_typed_and_runs(
    ip: InteractiveShell, source: str, expected: str, history: bool
) -> None:
    hook = ext.hook_of(ip)
    assert hook is not None
    hook.last = None
    with capture_output():
        ip.run_cell(source, store_history=history)
    assert hook.last is not None
    (fix,) = [f for f in hook.last.fixes if f.scope == "cell"]
    assert fix.code == expected
    try:
        with capture_output():
            result = ip.run_cell(fix.code)
        assert result.success, result.error_in_exec
    finally:
        run(ip, SETUP)


# A cell of one wrapped line: its rewrite would be the move followed by the cell as
# typed, which the move (then running the cell again) already says, so it has none.
ONE_LINE = {
    "line time": "%time y = w + x",
    "line time after a blank line": "\n%time y = w + x\n",
    "line timeit": "%timeit -n1 -r1 w + x",
    "exec": "exec('y = w + x')",
}


@pytest.mark.parametrize("history", [True, False], ids=["history", "no history"])
@pytest.mark.parametrize("source", list(ONE_LINE.values()), ids=list(ONE_LINE))
def test_a_wrapped_line_alone_gets_the_move_and_no_rewrite(
    ip: InteractiveShell, source: str, history: bool
) -> None:
    hook = ext.hook_of(ip)
    assert hook is not None
    hook.last = None
    with capture_output():
        ip.run_cell(source, store_history=history)
    assert hook.last is not None
    assert [f for f in hook.last.fixes if f.scope == "cell"] == []
    (move,) = [f for f in hook.last.fixes if f.scope == "namespace"]
    try:
        with capture_output():
            result = ip.run_cell(f"{move.code}\n{source}")
        assert result.success, result.error_in_exec
    finally:
        run(ip, SETUP)


# Text run by exec that makes a tensor from one the namespace holds, then fails on
# it: a re-run of the cell runs the text again and remakes the tensor, so the one it
# is made from is the culprit and moves; the name the text binds is not rebound by a
# fix (issue 17, class 3).
MADE_IN_EXEC = {
    "exec of a literal": "exec('v = x * 2\\ny = w + v')",
    "exec of a name": "gen = 'feats = x.flatten(1)\\nout = w.flatten(1) + feats'\nexec(gen)",
    "exec of compile": (
        "gen = 'h = x.T.contiguous()\\nz = w.T + h'\nexec(compile(gen, '<generated>', 'exec'))"
    ),
}


@pytest.mark.parametrize("source", list(MADE_IN_EXEC.values()), ids=list(MADE_IN_EXEC))
def test_a_tensor_exec_made_is_named_by_the_one_it_is_made_from(
    ip: InteractiveShell, source: str
) -> None:
    try:
        count, diagnosis = diagnosed(ip, source)
        assert count == 1
        assert diagnosis is not None
        assert [c.name for c in diagnosis.culprits][:1] == ["x"]
        moves = [f for f in diagnosis.fixes if f.scope == "namespace"]
        assert moves and moves[0].code == "x = x.to('meta')"
        for name in ("v", "feats", "h"):
            assert not any(f"{name} = {name}.to(" in f.code for f in moves)
        with capture_output():
            result = ip.run_cell(f"{moves[0].code}\n{source}")
        assert result.success, result.error_in_exec
    finally:
        run(ip, SETUP)


def test_a_name_exec_binds_is_not_moved_in_the_namespace(ip: InteractiveShell) -> None:
    """Made from two tensors (no one source): the text binds the name again on a
    re-run, so no namespace move of it is offered (it would not last)."""
    run(ip, "x2 = torch.randn(3, 4)")
    try:
        count, diagnosis = diagnosed(ip, "exec('v = x + x2\\ny = w + v')")
        assert count == 1 and diagnosis is not None
        assert [c.name for c in diagnosis.culprits][:1] == ["v"]
        assert not any(
            f.scope == "namespace" and f.code.startswith("v = ") for f in diagnosis.fixes
        )
    finally:
        run(ip, SETUP)
