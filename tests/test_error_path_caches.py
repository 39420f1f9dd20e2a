"""What the error path reads once and keeps: parsed cells, the facts of a tree, the
visible copy of a diagnosis. Each gives what reading afresh gives, and stays bounded."""

from __future__ import annotations

import ast
import dataclasses
import gc

from ipydevice import wording
from ipydevice.code.statements import file_tree
from ipydevice.code.treefacts import tree_facts

CELL = """\
import torch

def helper(x, *rest, scale=2):
    y = x * scale
    del rest
    return y + offset

@decorated
@twice
def forward(self, batch):
    for xb, (yb, zb) in loader:
        out = model(xb) + yb
    total = out.sum() + bias
    return total

async def later(a):
    async for b in stream:
        await a(b)
"""


def _walk_loads(tree: ast.AST, start: int) -> list[str]:
    names = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.lineno >= start
    ]
    names.sort(key=lambda n: (n.lineno, n.col_offset))
    return [n.id for n in names]


def test_a_text_is_parsed_once() -> None:
    lines = CELL.splitlines(keepends=True)
    first = file_tree("<cell-cache-test>", lines)
    again = file_tree("<cell-cache-test>", list(lines))
    assert first is not None and first is again
    assert ast.dump(first) == ast.dump(ast.parse(CELL))
    assert file_tree("<cell-cache-test>", ["def broken(:\n"]) is None


def test_tree_facts_are_what_a_walk_finds() -> None:
    tree = ast.parse(CELL)
    facts = tree_facts(tree)
    assert tree_facts(tree) is facts  # read once
    for start in range(1, len(CELL.splitlines()) + 2):
        assert facts.loads_from(start) == _walk_loads(tree, start)
    walked = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.AsyncFor))]
    assert facts.loops == walked
    # a function by the line its code object starts at: its first decorator's
    assert sorted(facts.functions) == [3, 8, 16]
    forward = facts.functions[8]
    assert isinstance(forward, ast.FunctionDef) and forward.name == "forward"
    assert facts.function_bound(facts.functions[3]) == {"x", "rest", "scale", "y"}
    assert facts.function_bound(forward) == {"self", "batch", "xb", "yb", "zb", "out", "total"}
    assert facts.function_bound(facts.functions[16]) == {"a", "b"}


def test_tree_facts_go_with_their_tree() -> None:
    from ipydevice.code import treefacts

    tree = ast.parse("x = y + 1\n")
    tree_facts(tree)
    before = len(treefacts._FACTS)
    del tree
    gc.collect()
    assert len(treefacts._FACTS) == before - 1


@dataclasses.dataclass(frozen=True)
class _Frozen:
    name: str
    parts: tuple[str, ...] = ()


@dataclasses.dataclass
class _Mutable:
    name: str


def test_a_frozen_record_is_made_visible_once() -> None:
    record = _Frozen("w\u202eeight", ("ok", "zero\u200bwidth"))
    shown = wording.visible_fields(record)
    assert shown == _Frozen("w\\u202eeight", ("ok", "zero\\u200bwidth"))
    assert wording.visible_fields(record) is shown
    plain = _Frozen("weight")
    assert wording.visible_fields(plain) is plain
    # an equal record is read on its own (the same result)
    assert wording.visible_fields(_Frozen("w\u202eeight", ("ok", "zero\u200bwidth"))) == shown


def test_a_mutable_record_is_read_every_time() -> None:
    record = _Mutable("plain")
    assert wording.visible_fields(record).name == "plain"
    record.name = "w\u202eeight"
    assert wording.visible_fields(record).name == "w\\u202eeight"


def test_visible_records_kept_are_bounded() -> None:
    for index in range(3 * wording._MAX_SEEN):
        wording.visible_fields(_Frozen(f"r{index}\u200b"))
    assert len(wording._SEEN) <= wording._MAX_SEEN


CHAINS = """\
out = self.q_proj.weight @ x.T + a.b[c].d - (e + f).g + h[0].i.j + k().l + m["n"].o
"""


def test_a_chain_is_written_as_unparse_writes_it() -> None:
    from ipydevice.collect.frames import chain_text

    tree = ast.parse(CELL + CHAINS)
    chains = [n for n in ast.walk(tree) if isinstance(n, (ast.Name, ast.Attribute, ast.Subscript))]
    assert len(chains) > 40
    for node in chains:
        assert chain_text(node) == ast.unparse(node)


def test_a_statement_copy_is_the_statement() -> None:
    from ipydevice.fixes.factories import copy_node

    tree = ast.parse(CELL + CHAINS)
    for stmt in [n for n in ast.walk(tree) if isinstance(n, ast.stmt)]:
        copied = copy_node(stmt)
        assert copied is not stmt
        assert ast.dump(copied, include_attributes=True) == ast.dump(stmt, include_attributes=True)
    # moving the copy leaves the original where it was (the parse is shared)
    last = tree.body[-1]
    moved = ast.increment_lineno(copy_node(last), 10)
    assert moved.lineno == last.lineno + 10
    assert last.lineno == len((CELL + CHAINS).splitlines())


def test_a_statement_is_walked_once_and_the_facts_kept_are_bounded() -> None:
    from ipydevice.code import statements

    tree = ast.parse("out = model(batch['x']) + scheduler.add_noise(clean, noise)[idx]\n")
    stmt = tree.body[0]
    chains = statements.per_statement(statements.load_chains, stmt)
    assert statements.per_statement(statements.load_chains, stmt) is chains  # read once
    assert [statements.chain_text(n) for n in chains] == [
        statements.chain_text(n) for n in statements.load_chains(stmt)
    ]
    assert statements.per_statement(statements.receivers, stmt) == {"scheduler"}
    assert statements.per_statement(statements.index_nodes, stmt) == statements.index_nodes(stmt)
    for index in range(statements._MAX_STATEMENTS + 10):
        statements.per_statement(statements.load_chains, ast.parse(f"y{index} = x\n").body[0])
    assert len(statements._STATEMENT_FACTS) <= statements._MAX_STATEMENTS


def test_a_files_lines_are_hashed_only_when_linecache_reads_them_anew(monkeypatch):
    """The tree of a block of a file as linecache keeps it is found by the list's
    identity: the lines are copied and hashed (what torch's 6,000-line files cost on
    every error) only when the text was read anew; new text is parsed anew."""
    from ipydevice.code import statements

    calls = []
    real = statements.parse_block
    monkeypatch.setattr(
        statements, "parse_block", lambda *a: calls.append(a[0]) or real(*a), raising=True
    )
    lines = ["def f(x):\n", "    return x + 1\n"]
    first = statements.block_of("<lib>", 1, False, lines)
    assert statements.block_of("<lib>", 1, False, lines) is first
    assert calls == ["<lib>"]
    changed = ["def f(x):\n", "    return x + 2\n"]
    again = statements.block_of("<lib>", 1, False, changed)
    assert again is not None and again is not first
    assert calls == ["<lib>", "<lib>"]


def test_the_roots_reach_looks_in_are_picked_by_the_top_level_pass():
    """Classes, modules and caches (collect/reach.py's roots) are found in the same
    pass over the namespace's types as the names to walk, not in a second one; the
    roots are the same either way."""
    import functools
    import types

    import torch

    from ipydevice.collect import reach
    from ipydevice.collect.scan import Scan
    from ipydevice.settings import Settings

    class Stats:
        MEAN = torch.zeros(3)

    @functools.cache
    def table():
        return torch.ones(2)

    ns = {f"t{i}": torch.zeros(1) for i in range(50)}
    ns.update(Stats=Stats, table=table, helpers=types.ModuleType("helpers"), n=3, xs=[1])
    scan = Scan(Settings())
    scan.add(Stats.MEAN, (("local", "MEAN"),), "f")
    _, values, _ = scan.namespace_slice(ns)
    assert scan.root_indexes(values) is None
    scan.name_from(ns, deep=False)
    picked = scan.root_indexes(values)
    assert [list(ns)[i] for i in picked or []] == ["Stats", "table", "helpers"]
    fresh = Scan(Settings())
    assert reach._roots(scan, ns) == reach._roots(fresh, ns)
