"""The device flow of a block of code: where each name and expression lives, as far as
the text and the values it starts from tell, without running anything.

:func:`first_clash` follows statements in order, from what a ``lookup`` says of the
names and chains they read (a tensor on ``cuda:0``, a module whose parameters are on
the CPU, a device, a scalar) and what ``moved`` says a fix changed. It knows:

* creation calls (``zeros``, ``randn``, ``tensor``...) without ``device=`` make CPU
  tensors; ``*_like`` calls follow their argument;
* ``.to(...)``, ``.cuda()``, ``.cpu()``: a tensor's result is a new tensor (the tensor
  itself stays), a module moves in place;
* calling a module: its inputs meet its parameters, the result is where they are;
* indexing: the result is where the indexed tensor is; indices may stay on the CPU;
* arithmetic, comparisons, a tensor's methods and a library's functions: the tensors
  meet, the result is where they are;
* assignments bind names and chains; a name bound to what the model cannot tell is
  unknown from there on (never read from its old value).

The first place two known devices meet is a :class:`Clash`. Calls of user functions,
loops' variables and whatever the lookup cannot read are unknown: unknown never clashes,
so a prediction is only ever made from what is known. Standard library only: the live
values come through ``lookup`` (``ipydevice.diagnosis.flow``), the device comparison
through ``same``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from ipydevice.code.statements import chain_text

__all__ = [
    "CPU_ARGUMENTS",
    "FACTORIES",
    "INDEXING",
    "Clash",
    "Flow",
    "Known",
    "cpu_arguments",
    "discarded_moves",
    "first_clash",
    "indexing_operands",
    "loop_item_moves",
]


#: What a flow reads of a value: ``kind`` is ``tensor``, ``scalar`` (mixes with any
#: device: a number, a 0-dim CPU tensor), ``module`` (its parameters' device),
#: ``device`` (a device or its spelling), ``library`` (a Python module: its functions
#: are operations on tensors); ``device`` is ``""`` when unknown.
@dataclass(frozen=True, slots=True)
class Known:
    kind: str
    device: str = ""


@dataclass(frozen=True, slots=True)
class Clash:
    """Two devices predicted to meet: on which line, in which expression, and what met."""

    lineno: int
    text: str
    devices: tuple[str, ...]
    operands: tuple[str, ...]


Lookup = Callable[[ast.expr], "Known | None"]
Same = Callable[[str, str], bool]

#: torch's creation functions that take ``device=``: without it they make CPU tensors.
FACTORIES = frozenset(
    {
        "zeros", "ones", "empty", "full", "arange", "range", "linspace", "logspace", "eye",
        "rand", "randn", "randint", "randperm", "tensor", "as_tensor", "scalar_tensor",
        "tril_indices", "triu_indices", "empty_strided", "normal",
    }
)  # fmt: skip
_LIKE = frozenset({"zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "randint_like"})  # fmt: skip
#: Tensor methods that take indices, and the position of the index argument after the
#: tensor indexed (``t.index_add_(dim, index, source)``; ``torch.index_add(t, ...)``
#: one further); ``index_put_`` takes a tuple of index tensors.
INDEXING = {
    "index_put_": 0, "index_put": 0, "index_add_": 1, "index_add": 1, "index_copy_": 1,
    "index_copy": 1, "index_fill_": 1, "index_fill": 1, "index_reduce_": 1,
    "index_select": 1, "gather": 1, "scatter_": 1, "scatter": 1, "scatter_add_": 1,
    "scatter_add": 1, "scatter_reduce_": 1, "scatter_reduce": 1, "take_along_dim": 0,
}  # fmt: skip
#: Calls that want an argument on the CPU whatever the device of the rest: its
#: position and keyword (``pack_padded_sequence(x, lengths)``; an RNG state, a byte
#: tensor on the CPU even for ``torch.cuda.set_rng_state``).
CPU_ARGUMENTS = {"pack_padded_sequence": (1, "lengths"), "set_rng_state": (0, "new_state")}
_MOVES = frozenset({"to", "cuda", "cpu"})
_NOT_TENSORS = frozenset({"item", "tolist", "numpy", "size", "dim", "numel", "data_ptr"})


class Flow:
    """The devices of a block's names, followed statement by statement."""

    def __init__(self, lookup: Lookup, same: Same, moved: dict[str, Known | None] | None = None):
        self.lookup, self.same = lookup, same
        #: chain text -> what it holds now; None: rebound to something unknown
        self.env: dict[str, Known | None] = dict(moved or {})
        self.clash: Clash | None = None
        self._line = 0

    # -- statements ------------------------------------------------------------------
    def run(self, stmts: Iterable[ast.stmt]) -> Clash | None:
        for stmt in stmts:
            self._line = stmt.lineno
            self.statement(stmt)
            if self.clash is not None:
                return self.clash
        return None

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign):
            value = self.value(stmt.value)
            for target in stmt.targets:
                self.bind(target, value)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            self.bind(stmt.target, self.value(stmt.value))
        elif isinstance(stmt, ast.AugAssign):
            self.bind(stmt.target, self.meet([stmt.target, stmt.value], stmt))
        elif isinstance(stmt, (ast.Expr, ast.Return)) and stmt.value is not None:
            self.value(stmt.value)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            self.value(stmt.iter)
            self.bind(stmt.target, None)
        elif isinstance(stmt, (ast.If, ast.While)):
            self.value(stmt.test)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                self.value(item.context_expr)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, None)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.env[stmt.name] = None
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                self.env[(alias.asname or alias.name).split(".")[0]] = None

    def bind(self, target: ast.expr, value: Known | None) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.bind(element, None)
            return
        if isinstance(target, ast.Starred):
            self.bind(target.value, None)
            return
        text = chain_text(target)
        for key in [k for k in self.env if k.startswith((text + ".", text + "["))]:
            del self.env[key]
        self.env[text] = value

    # -- expressions -----------------------------------------------------------------
    def value(self, node: ast.expr) -> Known | None:
        if self.clash is not None:
            return None
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                return Known("device", node.value)
            return Known("scalar") if isinstance(node.value, (int, float, complex)) else None
        if isinstance(node, (ast.Name, ast.Attribute)) or (
            isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
        ):
            return self.chain(node)
        if isinstance(node, ast.Subscript):
            return self.index(node)
        if isinstance(node, ast.BinOp):
            return self.meet([node.left, node.right], node)
        if isinstance(node, ast.UnaryOp):
            return self.value(node.operand)
        if isinstance(node, ast.Compare):
            return self.meet([node.left, *node.comparators], node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.IfExp):
            self.value(node.test)
            return None
        if isinstance(node, (ast.Tuple, ast.List)):  # ``return (x + shift,)``: each is computed
            for element in node.elts:
                self.value(element)
            return None
        return None

    def chain(self, node: ast.expr) -> Known | None:
        text = chain_text(node)
        if text in self.env:
            return self.env[text]
        if isinstance(node, ast.Name):
            return self.lookup(node)
        base_node = node.value  # type: ignore[attr-defined]
        if self._rebound(base_node):
            base = self.value(base_node)
            if base is None:
                return None
            if base.kind == "tensor":  # ``x.T``, ``x.grad``: where ``x`` is
                return base
            if base.kind == "module":  # a moved module's parts moved with it
                found = self.lookup(node)
                if found is not None and found.kind in ("tensor", "module"):
                    return Known(found.kind, base.device)
                return found
            return None
        found = self.lookup(node)
        if found is None:  # ``x.T``, ``tags[0]``: a tensor's part is where the tensor is
            base = self.value(base_node)
            if base is not None and base.kind == "tensor":
                return base
        return found

    def _rebound(self, node: ast.expr) -> bool:
        """Some prefix of the chain ``node`` is bound in the flow (not read live)."""
        while True:
            if chain_text(node) in self.env:
                return True
            if isinstance(node, ast.Attribute) or (
                isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
            ):
                node = node.value
                continue
            return False

    def index(self, node: ast.Subscript) -> Known | None:
        base = self.value(node.value)
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        for part in parts:
            if isinstance(part, ast.Slice):
                continue
            index = self.value(part)
            if base is not None and base.kind == "tensor":
                self._indices(base, index, node, node.value, part)
        return Known("tensor", base.device) if base is not None and base.kind == "tensor" else None

    def _indices(
        self, base: Known, index: Known | None, node: ast.AST, held: ast.expr, part: ast.expr
    ) -> None:
        if index is None or index.kind != "tensor" or not index.device or not base.device:
            return
        if self.same(index.device, "cpu") or self.same(index.device, base.device):
            return
        self._clash(node, (base.device, index.device), (held, part))

    def meet(self, nodes: list[ast.expr], where: ast.AST) -> Known | None:
        """Tensors meeting in one operation: a clash when two known devices differ;
        the result is where the non-scalar tensors are."""
        seen: list[tuple[ast.expr, Known]] = []
        for node in nodes:
            known = self.value(node)
            if known is not None and known.kind == "tensor" and known.device:
                seen.append((node, known))
        if self.clash is not None:
            return None
        for node, known in seen[1:]:
            if not self.same(known.device, seen[0][1].device):
                self._clash(where, (seen[0][1].device, known.device), (seen[0][0], node))
                return None
        if seen:
            return seen[0][1]
        anything = [self.value(n) for n in nodes]
        return (
            Known("scalar")
            if anything and all(k is not None and k.kind == "scalar" for k in anything)
            else None
        )

    def call(self, node: ast.Call) -> Known | None:
        func = node.func
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        if isinstance(func, ast.Attribute):
            receiver = self.value(func.value)
            name = func.attr
            if receiver is not None and receiver.kind in ("tensor", "module"):
                if name in _MOVES:
                    return self.move(node, func.value, receiver, name, keywords)
                if receiver.kind == "module":
                    return self.module_call(node, receiver)
                if name in _NOT_TENSORS:
                    return Known("scalar")
                if name in INDEXING:
                    return self.indexing_call(node, func.value, receiver, INDEXING[name])
                return self.meet([func.value, *self._tensor_args(node)], node)
            if receiver is not None and receiver.kind == "library":
                if name in FACTORIES or name == "from_numpy":  # (always the CPU)
                    return self.made(node, keywords, "cpu")
                if name in _LIKE and node.args:
                    first = self.value(node.args[0])
                    return self.made(node, keywords, first.device if first else "")
                return self.meet(self._tensor_args(node), node)
            self._tensor_args(node)
            return None
        callee = self.value(func)
        if callee is not None and callee.kind == "module":
            return self.module_call(node, callee)
        for arg in self._tensor_args(node):
            self.value(arg)
        return None

    def _tensor_args(self, node: ast.Call) -> list[ast.expr]:
        return [a.value if isinstance(a, ast.Starred) else a for a in node.args] + [
            k.value for k in node.keywords if k.arg not in ("device", "dtype", "generator", "out")
        ]

    def made(self, node: ast.Call, keywords: dict, default: str) -> Known | None:
        for arg in node.args:
            self.value(arg)
        place = keywords.get("device")
        if place is None:
            return Known("tensor", default) if default else None
        where = self.value(place)
        return Known("tensor", where.device) if where is not None and where.device else None

    def move(
        self, node: ast.Call, held: ast.expr, receiver: Known, name: str, keywords: dict
    ) -> Known | None:
        if name == "cpu":
            device = "cpu"
        elif name == "cuda":
            arg = node.args[0] if node.args else keywords.get("device")
            number = arg.value if isinstance(arg, ast.Constant) else None
            device = f"cuda:{number}" if type(number) is int else "cuda"
        else:
            device = receiver.device
            for arg in [*node.args, keywords.get("device")]:
                if arg is None:
                    continue
                found = self.value(arg)
                if found is not None and found.kind in ("device", "tensor") and found.device:
                    device = found.device
                    break
        moved = Known(receiver.kind, device)
        if receiver.kind == "module":  # Module.to moves the module itself
            self.bind(held, moved)
        return moved

    def module_call(self, node: ast.Call, module: Known) -> Known | None:
        for arg in self._tensor_args(node):
            known = self.value(arg)
            if (
                known is not None
                and known.kind == "tensor"
                and known.device
                and module.device
                and not self.same(known.device, module.device)
            ):
                self._clash(node, (module.device, known.device), (node.func, arg))
                return None
        return Known("tensor", module.device) if module.device else None

    def indexing_call(
        self, node: ast.Call, held: ast.expr, receiver: Known, position: int
    ) -> Known | None:
        for at, arg in enumerate(node.args):
            parts = arg.elts if at == position and isinstance(arg, (ast.Tuple, ast.List)) else [arg]
            for part in parts:
                known = self.value(part)
                if at == position:
                    self._indices(receiver, known, node, held, part)
                elif known is not None and _differ(known, receiver, self.same):
                    self._clash(node, (receiver.device, known.device), (held, part))
                if self.clash is not None:
                    return None
        return receiver

    def _clash(
        self, where: ast.AST, devices: tuple[str, ...], operands: tuple[ast.AST, ...]
    ) -> None:
        if self.clash is None:
            self.clash = Clash(
                getattr(where, "lineno", self._line),
                chain_text(where),
                devices,
                tuple(chain_text(o) for o in operands),
            )


def _differ(known: Known | None, other: Known, same: Same) -> bool:
    """``known`` is a tensor on a known device other than ``other``'s."""
    return (
        known is not None
        and known.kind == "tensor"
        and bool(known.device and other.device)
        and not same(known.device, other.device)
    )


def first_clash(
    stmts: Iterable[ast.stmt],
    lookup: Lookup,
    same: Same,
    moved: dict[str, Known | None] | None = None,
) -> Clash | None:
    """The first place ``stmts`` are predicted to bring two devices together, with
    ``moved`` (chain text -> what a fix leaves there) over what ``lookup`` reads."""
    return Flow(lookup, same, moved).run(stmts)


def discarded_moves(stmts: Iterable[ast.stmt]) -> Iterator[tuple[ast.Expr, str]]:
    """Statements that move a chain and drop the result (``x.to(device)`` on its own
    line), with the chain's text: a tensor's ``.to()`` returns a new tensor."""
    for stmt in stmts:
        if not isinstance(stmt, ast.Expr) or not isinstance(stmt.value, ast.Call):
            continue
        func = stmt.value.func
        if not isinstance(func, ast.Attribute) or func.attr not in _MOVES:
            continue
        held = func.value
        if isinstance(held, (ast.Name, ast.Attribute)) or (
            isinstance(held, ast.Subscript) and isinstance(held.slice, ast.Constant)
        ):
            yield stmt, chain_text(held)


def loop_item_moves(stmts: Iterable[ast.stmt]) -> Iterator[tuple[ast.Expr, str, ast.expr]]:
    """Dropped moves of a loop's items (``for k in batch: batch[k].to(device)``, ``for k,
    v in batch.items(): v.to(device)``, ``for i in range(len(xs)): xs[i].to(device)``):
    each statement, the item as it can be assigned (``batch[k]``) and the holder looped
    over (``batch``)."""
    for loop in stmts:
        if not isinstance(loop, ast.For):
            continue
        holder, key, value = _looped(loop)
        if holder is None or key is None:
            continue
        item = f"{chain_text(holder)}[{key}]"
        for stmt, held in discarded_moves(loop.body):
            if held in (value, item):
                yield stmt, item, holder
        for line in loop.body:  # ``xs[i]``: a subscript by the loop's name
            if not (isinstance(line, ast.Expr) and isinstance(line.value, ast.Call)):
                continue
            func = line.value.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr in _MOVES
                and isinstance(func.value, ast.Subscript)
                and isinstance(func.value.slice, ast.Name)
                and func.value.slice.id == key
                and ast.dump(func.value.value) == ast.dump(holder)
            ):
                yield line, item, holder


def _looped(loop: ast.For) -> tuple[ast.expr | None, str | None, str | None]:
    """``(holder, key name, value name)`` of ``for k in H``, ``for k in H.keys()``,
    ``for k, v in H.items()`` and ``for i in range(len(H))``; a holder chain only."""
    it, target = loop.iter, loop.target
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and not it.args:
        if it.func.attr == "items" and isinstance(target, ast.Tuple) and len(target.elts) == 2:
            k, v = target.elts
            if isinstance(k, ast.Name) and isinstance(v, ast.Name):
                return _chain(it.func.value), k.id, v.id
            return None, None, None
        if it.func.attr == "keys" and isinstance(target, ast.Name):
            return _chain(it.func.value), target.id, None
        return None, None, None
    if (
        isinstance(it, ast.Call)
        and isinstance(it.func, ast.Name)
        and it.func.id == "range"
        and len(it.args) == 1
        and isinstance(it.args[0], ast.Call)
        and isinstance(it.args[0].func, ast.Name)
        and it.args[0].func.id == "len"
        and len(it.args[0].args) == 1
        and isinstance(target, ast.Name)
    ):
        return _chain(it.args[0].args[0]), target.id, None
    if isinstance(target, ast.Name):
        return _chain(it), target.id, None
    return None, None, None


def _chain(node: ast.expr) -> ast.expr | None:
    ok = isinstance(node, (ast.Name, ast.Attribute)) or (
        isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
    )
    return node if ok else None


def indexing_operands(stmt: ast.stmt) -> Iterator[tuple[ast.expr, list[ast.expr], list[ast.expr]]]:
    """``(indexed, indices, others)`` of each indexing on a statement's own line:
    ``table[idx]``, ``acc.index_add_(0, idx, src)``, ``acc.index_put_((idx,), v)``
    (a call on a library, ``torch.index_add(acc, 0, idx, src)``, shifts by one:
    the caller tells the two apart by what the receiver is)."""
    for node in ast.walk(stmt):
        if isinstance(node, ast.Subscript) and not isinstance(
            node.slice, (ast.Constant, ast.Slice)
        ):
            parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            yield node.value, [p for p in parts if not isinstance(p, ast.Slice)], []
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in INDEXING
        ):
            position = INDEXING[node.func.attr]
            args = [a for a in node.args if not isinstance(a, ast.Starred)]
            yield node.func.value, *_split(args, position)
            if args:
                yield args[0], *_split(args[1:], position)


def _split(args: list[ast.expr], position: int) -> tuple[list[ast.expr], list[ast.expr]]:
    if position >= len(args):
        return [], []
    held = args[position]
    indices = list(held.elts) if isinstance(held, (ast.Tuple, ast.List)) else [held]
    return indices, [a for i, a in enumerate(args) if i != position]


#: id(tree) -> (tree, its CPU arguments): a frame's tree is parsed once and kept
#: (``frame_tree``), so each is walked once, not once per diagnosis.
_CPU_ARGUMENTS_OF: dict[int, tuple[ast.AST, frozenset[str]]] = {}


def cpu_arguments(tree: ast.AST) -> frozenset[str]:
    """The texts of the arguments that calls in ``tree`` want on the CPU
    (:data:`CPU_ARGUMENTS`): moving those to the device would fail there."""
    cached = _CPU_ARGUMENTS_OF.get(id(tree))
    if cached is not None and cached[0] is tree:
        return cached[1]
    if len(_CPU_ARGUMENTS_OF) > 256:
        _CPU_ARGUMENTS_OF.clear()
    found = frozenset(_cpu_arguments(tree))
    _CPU_ARGUMENTS_OF[id(tree)] = (tree, found)
    return found


def _cpu_arguments(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        wanted = CPU_ARGUMENTS.get(name)
        if wanted is None:
            continue
        position, keyword = wanted
        if len(node.args) > position:
            out.add(ast.unparse(node.args[position]))
        out.update(ast.unparse(k.value) for k in node.keywords if k.arg == keyword)
    return out
