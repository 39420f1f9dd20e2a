"""Property-based tests (hypothesis): escaping, the code of fixes, and naming.

Names, keys, attribute names and messages come from the user and from torch,
and end up in HTML, in widgets, in terminal text and in *code*. Whatever their
text:

* the panel's HTML (diagnosis, widget, inventory) parses to the tags and
  attributes ipydevice emits and nothing else (no ``script``, no ``on*``
  attribute), and its text content carries the user's text verbatim (invisible and
  reordering characters written as their escapes, ``wording.visible``);
* every fix's code parses, names no variable but the ones involved and a few
  fixed helpers, and holds a key only as a literal: nothing the user typed as a
  key or a message is ever code. Applying the fix makes the failed cell run.

A last property: in a model of nested blocks, the module a device error failed
in is named by its full path (``model.layers[2].child.child``), whatever the
nesting, from whichever layer it failed in.
"""

from __future__ import annotations

import ast
import keyword
import textwrap
import unicodedata
from html.parser import HTMLParser
from typing import Any

import pytest
import torch
from cells import Notebook
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

import ipydevice
from ipydevice.collect.scan import SKIP_NAMES
from ipydevice.model import Diagnosis, Fix
from ipydevice.pipeline import inventory as census
from ipydevice.wording import visible

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

#: What ipydevice's HTML is made of (render/html.py, widget.py).
TAGS = frozenset(
    {
        "b",
        "code",
        "details",
        "div",
        "li",
        "pre",
        "span",
        "summary",
        "table",
        "tbody",
        "td",
        "th",
        "thead",
        "tr",
        "ul",
    }
)
ATTRIBUTES = frozenset({"class", "style", "data-scope", "data-verbosity", "data-ipydevice-anchor"})

#: Names a fix's code may use besides the user's own (comprehension variables,
#: the helpers of generated fixes).
HELPERS = frozenset({"torch", "k", "v", "t", "isinstance", "dict", "tuple", "list", "type"})

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# Text as users write it: any printable character, markup and quotes included
# (hypothesis' text() already leaves out lone surrogates).
text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40)
markup = st.sampled_from(
    [
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(1)>",
        '"><b onmouseover="x">',
        "</code></pre></div>",
        "&lt;already&gt; &amp;",
        "`x` and ``y``",
        "<!-- comment -->",
        "<![CDATA[ x ]]>",
    ]
)
hostile_text = st.one_of(text, markup, st.tuples(text, markup, text).map("".join))


def identifiers() -> st.SearchStrategy[str]:
    """Valid Python identifiers, unicode included, as written in source (NFKC)."""
    return (
        st.from_regex(r"[^\W\d]\w{0,15}", fullmatch=True)
        .filter(str.isidentifier)
        .filter(lambda n: not keyword.iskeyword(n) and not n.startswith("_"))
        .filter(lambda n: unicodedata.normalize("NFKC", n) == n)
        .filter(
            lambda n: (
                n
                not in {
                    "model",
                    "torch",
                    "nn",
                    "out",
                    "key",
                    "batch",
                    "holder",
                    "In",
                    "Out",
                    "exit",
                    "quit",
                    "get_ipython",
                    *HELPERS,
                }
            )
        )
    )


# -- HTML ---------------------------------------------------------------------------------


class Markup(HTMLParser):
    """Every tag, attribute and text run of an HTML fragment."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.attributes: set[str] = set()
        self.text: list[str] = []
        self.other: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes.update(name for name, _ in attrs)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def handle_comment(self, data: str) -> None:
        self.other.append(f"comment {data!r}")

    def handle_decl(self, decl: str) -> None:
        self.other.append(f"declaration {decl!r}")

    def handle_pi(self, data: str) -> None:
        self.other.append(f"processing instruction {data!r}")

    def unknown_decl(self, data: str) -> None:
        self.other.append(f"declaration {data!r}")


def check_html(fragment: str, *verbatim: str) -> str:
    """Parses ``fragment``: only ipydevice's tags and attributes; each of
    ``verbatim`` appears, unchanged, in its text. Returns the text."""
    parser = Markup()
    parser.feed(fragment)
    parser.close()
    assert parser.tags <= TAGS, sorted(parser.tags - TAGS)
    assert parser.attributes <= ATTRIBUTES, sorted(parser.attributes - ATTRIBUTES)
    assert not any(a.startswith("on") for a in parser.attributes)
    assert not parser.other, parser.other
    content = "".join(parser.text)
    for piece in verbatim:
        assert visible(piece) in content, (piece, content[:2000])
    return content


def widget_html(d: Diagnosis, namespace: dict[str, Any]) -> list[str]:
    """The HTML shown with the buttons: the header before the traceback; the buttons'
    widget itself carries the fixes' code as data, which the browser shows as text."""
    pytest.importorskip("anywidget")
    from ipydevice.integrations.ipython_display import header_bundle
    from ipydevice.render.widget import build_panel

    panel = build_panel(d, lambda: namespace, lambda code: None)
    assert all(isinstance(row["code"], str) for row in panel.fixes)
    panel.close()
    return [header_bundle(d)["text/html"]] if d.is_device_error else []


def check_every_view(d: Diagnosis, namespace: dict[str, Any], *verbatim: str) -> None:
    """The text report, the static HTML and the header's HTML."""
    report = str(d)
    assert report.startswith("ipydevice")
    combined = check_html(d._repr_html_(), *verbatim)
    combined += "".join(check_html(fragment) for fragment in widget_html(d, namespace))
    for piece in verbatim:
        assert visible(piece) in combined, piece


# -- code ---------------------------------------------------------------------------------


def check_fix_code(fix: Fix, allowed: set[str], keys: tuple[Any, ...] = ()) -> None:
    """Parses, uses only ``allowed`` names and helpers, and holds keys as literals."""
    code = textwrap.dedent(fix.code)
    tree = ast.parse(code)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert names <= allowed | HELPERS, (sorted(names - allowed - HELPERS), code)
    calls = {
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
    assert not calls & {"eval", "exec", "compile", "__import__", "getattr", "globals"} - (
        {"getattr", "globals"} if any(not isinstance(k, int) for k in keys) else set()
    ), code
    for key in keys:
        if repr(key) in code:  # present: as a literal, never as a name or an expression
            assert key in _literals(tree), (key, code)


def _literals(tree: ast.AST) -> list[Any]:
    """The values of the literal expressions in ``tree`` (``-1`` is a UnaryOp)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Constant, ast.UnaryOp)):
            try:
                out.append(ast.literal_eval(node))
            except ValueError:
                continue
    return out


# -- properties ---------------------------------------------------------------------------

IMPORTS = "import torch\nimport torch.nn as nn\nmodel = nn.Linear(4, 2).to('meta')\n"


@SETTINGS
@given(name=identifiers())
def test_variable_names(name: str) -> None:
    nb = Notebook()
    nb.run(IMPORTS + f"{name} = torch.randn(3, 4)\n")
    d = ipydevice.diagnose(nb.fails(f"out = model({name})\n"), namespace=nb.ns)
    assert [f.name for f in d.culprits][:1] == [name]
    check_every_view(d, nb.ns, name)
    for fix in d.fixes:
        check_fix_code(fix, {name, "model", "out"})
    assert d.fixes[0].apply(nb.ns).ok
    nb.run(f"out = model({name})\n")
    inv = ipydevice.inventory(nb.ns)
    check_html(inv._repr_html_(), name)
    assert name in str(inv)


@SETTINGS
@given(key=st.one_of(hostile_text, st.integers(min_value=-(10**30), max_value=10**30)))
def test_dict_keys(key: Any) -> None:
    nb = Notebook()
    nb.ns["key"] = key
    nb.run(IMPORTS + "batch = {key: torch.randn(3, 4), 'other': torch.zeros(2)}\n")
    d = ipydevice.diagnose(nb.fails("out = model(batch[key])\n"), namespace=nb.ns)
    expected = f"batch[{key!r}]"
    assert [f.name for f in d.culprits][:1] == [expected]
    check_every_view(d, nb.ns, expected)
    for fix in d.fixes:
        check_fix_code(fix, {"batch", "model", "out", "key"}, keys=(key,))
    assert d.fixes[0].apply(nb.ns).ok
    nb.run("out = model(batch[key])\n")


@SETTINGS
@given(attribute=hostile_text.filter(lambda a: "." not in a))
@example(attribute="µ")  # the micro sign: net.µ in code reads net.μ (NFKC), another buffer
def test_attribute_names(attribute: str) -> None:
    # A buffer on the CPU in a model on meta, under any name register_buffer takes
    # (not a name the module has already: Module.float, .cuda, .fc ...).
    assume(attribute != "fc" and not hasattr(torch.nn.Module(), attribute))
    nb = Notebook()
    nb.ns["attribute"] = attribute
    nb.run(
        IMPORTS
        + textwrap.dedent(
            """
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 2)

                def forward(self, x):
                    return self.fc(x) + getattr(self, attribute)

            net = Net().to('meta')
            net.register_buffer(attribute, torch.zeros(2))
            x = torch.randn(3, 4, device='meta')
            """
        )
    )
    d = ipydevice.diagnose(nb.fails("out = net(x)\n"), namespace=nb.ns)
    assert d.is_device_error and d.target == "meta", d
    plain = (
        attribute.isidentifier()
        and not keyword.iskeyword(attribute)
        and unicodedata.normalize("NFKC", attribute) == attribute  # net.µ in code is net.μ
    )
    path = f"net.{attribute}" if plain else f"getattr(net, {attribute!r})"
    assert path in [f.name for f in d.culprits], [f.name for f in d.culprits]
    check_every_view(d, nb.ns, path)
    for fix in d.fixes:
        check_fix_code(fix, {"net", "x", "out", "self", "attribute", "Net"}, keys=(attribute,))
    applicable = [f for f in d.fixes if f.can_apply]
    assert applicable and applicable[0].apply(nb.ns).ok
    nb.run("out = net(x)\n")


@SETTINGS
@given(extra=hostile_text.filter(lambda t: "\n" not in t and "\r" not in t))
def test_exception_messages(extra: str) -> None:
    message = (
        "Expected all tensors to be on the same device, but found at least two devices, "
        f"cuda:0 and cpu! {extra}"
    )
    d = ipydevice.diagnose(RuntimeError(message))
    assert d.is_device_error
    # The panel shows the first line, cut at 300, with invisible characters (a form
    # feed, a bidi override) written as escapes.
    shown = visible(message).splitlines()[0][:300]
    check_every_view(d, {}, shown)
    for fix in d.fixes:
        check_fix_code(fix, set())


@SETTINGS
@given(names=st.lists(st.one_of(identifiers(), hostile_text), min_size=1, max_size=5, unique=True))
@example(names=["µ"])  # the micro sign: Python reads it as Greek mu (NFKC)
def test_inventory_of_any_names(names: list[str]) -> None:
    # globals() may hold any string as a name (globals()['a b'] = ...).
    namespace: dict[str, Any] = {"model": torch.nn.Linear(4, 2).to("meta")}
    for index, name in enumerate(names):
        namespace[name] = torch.zeros(index + 1)
    inv = census.inventory(namespace, include_private=True)
    shown = {r.name for r in inv.records}
    for name in names:
        if (name.startswith("_") and name.isidentifier()) or name in SKIP_NAMES:
            continue  # private, or IPython's own bookkeeping (In, Out, get_ipython...)
        plain = (
            name.isidentifier()
            and not keyword.iskeyword(name)
            and unicodedata.normalize("NFKC", name) == name  # 'µ' in code is 'μ': another name
        )
        expected = name if plain else f"globals()[{name!r}]"
        assert expected in shown, (expected, shown)
    check_html(inv._repr_html_())
    text_report = str(inv)
    assert "ipydevice" in text_report


# -- naming through nested method frames ----------------------------------------------------

NESTED = """
import torch
import torch.nn as nn

class Leaf(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x, mask):
        return self.proj(x) + mask

class Wrap(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.child = inner

    def forward(self, x, mask):
        return self.child(x, mask)

class Block(nn.Module):
    def __init__(self, depth, uses_mask):
        super().__init__()
        inner = Leaf()
        for _ in range(depth):
            inner = Wrap(inner)
        self.body = inner
        self.uses_mask = uses_mask
        self.norm = nn.LayerNorm(4)

    def forward(self, x, mask):
        return x + self.body(self.norm(x), mask if self.uses_mask else torch.zeros((), device=x.device))

class Net(nn.Module):
    def __init__(self, layers, failing, depth):
        super().__init__()
        self.layers = nn.ModuleList(Block(depth, i == failing) for i in range(layers))

    def forward(self, x):
        mask = torch.zeros(x.shape[0], 4)  # on the CPU: no device=
        for layer in self.layers:
            x = layer(x, mask)
        return x

model = Net(LAYERS, FAILING, DEPTH).to('meta')
x = torch.zeros(3, 4, device='meta')
"""


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_failing_module_is_named_by_its_full_path(data: st.DataObject) -> None:
    layers = data.draw(st.integers(1, 4), label="layers")
    failing = data.draw(st.integers(0, layers - 1), label="failing")
    depth = data.draw(st.integers(0, 3), label="depth")
    nb = Notebook()
    nb.ns.update(LAYERS=layers, FAILING=failing, DEPTH=depth)
    nb.run(NESTED)
    d = ipydevice.diagnose(nb.fails("out = model(x)\n"), namespace=nb.ns)
    body = f"model.layers[{failing}].body" + ".child" * depth
    assert d.failing_module == f"{body} (Leaf)", d.failing_module
    records = {r.name for r in d.records}
    # Every module of the failing block seen in the frames is named from `model`.
    assert {f"model.layers[{failing}]", body} <= records, sorted(records)
    assert not any(r.startswith("model.body") or r.startswith("model.child") for r in records)
    assert [f.name for f in d.culprits][:1] == ["mask in Leaf.forward"], d.culprits
