"""The protocol between Python and the browser, from one source: ``headsne_widget/widget/protocol.py``.

``js/model/model.js`` must name exactly the declared traits (its ``T`` and its ``Traits`` typedef), ``js/PROTOCOL.md``
must hold the tables generated from the declarations and name every JS module, and the browser's only writer
(``js/store/intents.js``) may write only what a user may set."""

from __future__ import annotations

import re
from pathlib import Path

from headsne_widget.widget.headsne import HeadSNE
from headsne_widget.widget.protocol import BROWSER_WRITABLE, KEYWORDS, ROLES, TRAITS, markdown_table

JS = Path(__file__).resolve().parents[1] / "js"
NAMES = [spec.name for spec in TRAITS]


def _table_rows(markdown: str) -> list[list[str]]:
    """The body rows of every table in ``markdown``, cells stripped (alignment padding is prettier's)."""
    rows = []
    for line in markdown.splitlines():
        if line.startswith("|") and not re.match(r"^\|[\s:|-]+\|$", line):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return [row for row in rows if row[0] != "trait"]


def test_model_js_names_exactly_the_declared_traits():
    source = (JS / "model" / "model.js").read_text()
    block = source[source.index("export const T = Object.freeze({") :]
    block = block[: block.index("});")]
    names = re.findall(r"^\s+(\w+): \"(\w+)\",$", block, flags=re.M)
    assert all(key == value for key, value in names), "T.x must be the string 'x'"
    assert sorted(key for key, _ in names) == sorted(NAMES)
    typedef = source[source.index("@typedef {object} Traits") : source.index("@typedef {keyof Traits}")]
    assert sorted(re.findall(r"@property \{[^}]*\}+ (\w+)", typedef)) == sorted(NAMES)


def test_protocol_md_holds_the_generated_tables():
    text = (JS / "PROTOCOL.md").read_text()
    section = text[text.index("<!-- traits: begin") : text.index("<!-- traits: end -->")]
    generated = "\n".join(markdown_table(role) for role in ROLES)
    assert _table_rows(section) == _table_rows(generated), "run python -m headsne_widget.widget.protocol"


def test_protocol_md_names_every_js_module():
    text = (JS / "PROTOCOL.md").read_text()
    table = text[text.index("## Front-end modules") : text.index("## Arrays")]
    rows = "\n".join(line for line in table.splitlines() if line.startswith("|"))
    named = set(re.findall(r"`([\w./*-]+\.(?:js|ts))`", rows))  # paths inside js/
    modules = {
        p.relative_to(JS).as_posix()
        for p in JS.rglob("*")
        if p.suffix in (".js", ".ts") and not p.name.endswith(".test.js")
    }
    assert modules - named == set(), f"js/PROTOCOL.md's module table misses {sorted(modules - named)}"
    assert {n for n in named if "*" not in n} - modules == set(), "the table names modules that do not exist"


def test_the_browser_writes_only_what_a_user_may_set():
    """js/model/model.js's WRITABLE (which its write and preview enforce) is Python's browser-writable set, and no
    module but model.js sets a trait on the model (every write goes through model.js's write / preview)."""
    source = (JS / "model" / "model.js").read_text()
    block = source[source.index("export const WRITABLE") :]
    block = block[: block.index(";")]
    assert set(re.findall(r'"(\w+)"', block)) == BROWSER_WRITABLE
    for path in JS.rglob("*.js"):
        if path.name.endswith(".test.js") or path.parent.name == "test-helpers" or path.name == "model.js":
            continue
        code = re.sub(r"//.*|/\*[\s\S]*?\*/", "", path.read_text())  # comments say "save_changes" too
        assert not re.search(r"\bmodel\.set\(|\.save_changes\(", code), f"{path.name} writes the model itself"


def test_headsne_has_every_trait_and_takes_the_keywords():
    for spec in TRAITS:
        attribute = getattr(HeadSNE, spec.name)
        assert isinstance(attribute, property), spec.name
        assert (attribute.fset is not None) == spec.browser_writable, spec.name
    assert set(KEYWORDS) <= BROWSER_WRITABLE and "layer" not in KEYWORDS and "selected" not in KEYWORDS


def test_the_browser_bounds_are_pythons():
    """js/model/model.js's BOUNDS (which its write and preview enforce, and the settings' fields check) hold every
    number the browser writes, with Python's bounds: the browser never sends a number Python would refuse."""
    import traitlets as t

    from headsne_widget.widget.protocol import StrictFloat

    source = (JS / "model" / "model.js").read_text()
    block = source[source.index("export const BOUNDS") :]
    block = block[: block.index("});")]
    js = {
        name: dict(re.findall(r"(\w+): ([\w.e+-]+)", body))
        for name, body in re.findall(r"^\s+(\w+): \{([^}]*)\},$", block, flags=re.M)
    }
    for spec in TRAITS:
        trait = spec.trait
        if isinstance(trait, t.Union):  # learning_rate: a number or "auto"
            trait = next(part for part in trait.trait_types if isinstance(part, t.Float))
        if not spec.browser_writable or not isinstance(trait, t.Int | t.Float) or spec.name == "selected":
            continue
        assert spec.name in js, f"js/model/model.js BOUNDS misses {spec.name}"
        bounds = js.pop(spec.name)
        low, high = (None if v is None or abs(v) == float("inf") else v for v in (trait.min, trait.max))
        js_max = bounds["max"]
        assert (high is None and js_max == "Number.MAX_SAFE_INTEGER") or float(js_max) == high, (spec.name, bounds)
        if low is not None:
            assert float(bounds["min"]) == low, (spec.name, bounds)
        else:  # no lower bound in Python: the browser's is stricter (a step size or perplexity is > 0)
            assert bounds.get("above") == "true" and float(bounds["min"]) == 0, (spec.name, bounds)
        assert (bounds.get("int") == "true") == isinstance(trait, t.Int), spec.name
        if isinstance(trait, StrictFloat) and trait.positive:
            assert bounds.get("above") == "true", spec.name
    assert js == {}, f"js/model/model.js BOUNDS names traits the browser does not write: {sorted(js)}"
