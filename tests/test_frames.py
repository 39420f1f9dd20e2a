"""The statement finders of :mod:`ipydevice.collect.frames` against the plain ``ast.walk``
definitions they replace, over real sources (ipydevice's own and the tests')."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ipydevice.code.statements import iter_statements, statement_at

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*ROOT.glob("ipydevice/**/*.py"), *ROOT.glob("tests/*.py")])
MATCH = """
def f(x):
    match x:
        case [a, b]:
            y = a
        case _:
            try:
                y = 1; z = 2
            except ValueError as e:
                y = 3
            else:
                y = 4
            finally:
                w = 5
    return y
"""


def walked_statement_at(stmts: list[ast.stmt], lineno: int) -> ast.stmt | None:
    """The definition: of the statements spanning the line (``stmts``: the tree's, in
    ``ast.walk`` order), the innermost, the last of those in that order."""
    best = None
    for node in stmts:
        spans = node.lineno <= lineno <= (node.end_lineno or 0)
        if spans and (
            best is None
            or (node.lineno >= best.lineno and (node.end_lineno or 0) <= (best.end_lineno or 0))
        ):
            best = node
    return best


def trees() -> list[tuple[str, ast.AST, int]]:
    out = [("match", ast.parse(MATCH), MATCH.count("\n") + 1)]
    for path in SOURCES:
        text = path.read_text()
        out.append((path.name, ast.parse(text), text.count("\n") + 1))
    return out


@pytest.mark.parametrize(
    ("name", "tree", "lines"), trees(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_statement_at_is_the_innermost_spanning_statement(
    name: str, tree: ast.AST, lines: int
) -> None:
    stride = 1 if lines < 200 else 5  # the definition reads every statement per line
    stmts = [node for node in ast.walk(tree) if isinstance(node, ast.stmt)]
    for lineno in range(1, lines + 1, stride):
        found, expected = statement_at(tree, lineno), walked_statement_at(stmts, lineno)
        assert found is expected, (name, lineno)


@pytest.mark.parametrize(
    ("name", "tree", "lines"), trees(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_iter_statements_finds_every_statement(name: str, tree: ast.AST, lines: int) -> None:
    found = list(iter_statements(tree))
    assert len(found) == len({id(s) for s in found})
    assert {id(s) for s in found} == {id(n) for n in ast.walk(tree) if isinstance(n, ast.stmt)}


def test_a_cell_named_as_ipython_7_names_it_is_top_level():
    """IPython 7.34 (Colab's) compiles a cell's code as ``<cell line: 0>``, not
    ``<module>``: its frame is the cell's top level, whose locals are the namespace,
    not a function's locals to blame."""
    import linecache

    import torch

    import ipydevice
    from ipydevice.collect.frames import is_top_level

    assert is_top_level("<module>") and is_top_level("<cell line: 0>")
    assert not is_top_level("forward") and not is_top_level("<lambda>")
    source = (
        "raise RuntimeError('Expected all tensors to be on the same device, but found at least "
        "two devices, cuda:0 and cpu!')\n"
    )
    filename = "<ipython-input-77-cafe>"
    linecache.cache[filename] = (len(source), None, [source], filename)
    code = compile(source, filename, "exec").replace(co_name="<cell line: 0>")
    namespace = {"model": torch.nn.Linear(4, 2).to("meta"), "x": torch.randn(3, 4)}
    try:
        exec(code, namespace)
    except RuntimeError as exc:
        d = ipydevice.diagnose(exc, namespace=namespace)
    assert d.culprits == () and d.target == "cuda:0"  # the message alone: nothing blamed


def test_a_cell_named_the_ipython_way_says_its_number_without_ipython_s_map():
    from ipydevice.code.cells import cell_number, source_location

    assert cell_number("<ipython-input-12-0a1b2c>") == 12
    assert source_location("<ipython-input-3-demo7>", 5) == "In [3], line 5"
    assert cell_number("<ipython-input-x-0a1b>") is None and cell_number("<string>") is None
    assert source_location("/home/me/train.py", 9) == "train.py:9"
