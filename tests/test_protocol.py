"""The protocol between Python and the browser, from one source: ``headsne_widget/widget/protocol.py``.

The files generated from it (``js/model/protocol.generated.js``: ``T``, the ``Traits`` typedef, ``WRITABLE``,
``BOUNDS``, ``MIRRORED``; ``headsne_widget/widget/params.py``: HeadSNE's keywords and the traits' types; the tables
of ``js/PROTOCOL.md``) must be what it generates now and name exactly the declared traits, ``js/PROTOCOL.md`` must
name every JS module, and the browser's only writer (``js/store/intents.js``) may write only what a user may set."""

from __future__ import annotations

import re
from pathlib import Path

from markdown_it import MarkdownIt

from headsne_widget.widget import codegen
from headsne_widget.widget.headsne import HeadSNE
from headsne_widget.widget.params import HeadSNEAttributes
from headsne_widget.widget.protocol import BROWSER_WRITABLE, KEYWORDS, TRAITS, describe

ROOT = Path(__file__).resolve().parents[1]
JS = ROOT / "js"
GENERATED_JS = ROOT / codegen.JS_MODULE
NAMES = [spec.name for spec in TRAITS]


def _rendered_rows(markdown: str) -> dict[str, list[str]]:
    """Every table row of ``markdown`` as a Markdown parser (markdown-it, GFM tables) reads it: its cells' source
    text by the first cell."""
    rows: dict[str, list[str]] = {}
    cells: list[str] | None = None
    for token in MarkdownIt("commonmark").enable("table").parse(markdown):
        if token.type == "tr_open":
            cells = []
        elif token.type == "inline" and cells is not None:
            cells.append(token.content)
        elif token.type == "tr_close" and cells:
            rows[cells[0]], cells = cells, None
    return rows


def test_the_generated_files_are_what_protocol_py_generates():
    """Each generated file is, byte for byte, what codegen.py generates from protocol.py's TRAITS now: a trait added,
    renamed, retyped or rebounded there without ``python -m headsne_widget.widget.codegen`` fails here."""
    for path, generate in ((GENERATED_JS, codegen.js_module), (ROOT / codegen.PY_MODULE, codegen.py_module)):
        assert path.read_text() == generate(), f"{path.name} drifted: run python -m headsne_widget.widget.codegen"
        assert codegen.GENERATED in path.read_text()[:300], f"{path.name} does not say it is generated"


def test_the_generated_js_names_exactly_the_declared_traits():
    source = GENERATED_JS.read_text()
    block = source[source.index("export const T = Object.freeze({") :]
    block = block[: block.index("});")]
    names = re.findall(r"^\s+(\w+): \"(\w+)\",$", block, flags=re.M)
    assert all(key == value for key, value in names), "T.x must be the string 'x'"
    assert sorted(key for key, _ in names) == sorted(NAMES)
    typedef = source[source.index("@typedef {object} Traits") : source.index("@typedef {keyof Traits}")]
    assert sorted(re.findall(r"@property \{[^}]*\}+ (\w+)", typedef)) == sorted(NAMES)


def test_protocol_md_holds_the_generated_tables_as_written_and_as_read():
    """``js/PROTOCOL.md`` is byte for byte what codegen writes (padded as prettier pads, so no formatter runs after
    it), and a Markdown parser reads one row per trait with its four cells: a bar in a meaning (``KL(P||Q)``)
    once split the row and cut the meaning short."""
    text = (JS / "PROTOCOL.md").read_text()
    assert text == codegen.protocol_md(text), "run python -m headsne_widget.widget.codegen"
    rows = _rendered_rows(text)
    for spec in TRAITS:
        row = rows[f"`{spec.name}`"]
        assert row[1] == describe(spec.trait) and row[3] == spec.doc, row


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
    """WRITABLE (which js/model/model.js's write and preview enforce) is Python's browser-writable set, and no
    module but model.js sets a trait on the model (every write goes through model.js's write / preview)."""
    source = GENERATED_JS.read_text()
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
        said = " ".join(spec.doc.replace('"', "'").split()[:4])  # help(HeadSNE) shows the trait's meaning
        doc = getattr(HeadSNEAttributes, spec.name).__doc__  # (HeadSNE's own atlas and atlas_kl say more)
        assert doc and said in " ".join(doc.split()), spec.name
    assert set(KEYWORDS) <= BROWSER_WRITABLE and "layer" not in KEYWORDS and "selected" not in KEYWORDS


def test_the_browser_bounds_are_pythons():
    """BOUNDS (which js/model/model.js's write and preview enforce, and the settings' fields check) hold every number
    the browser writes, with Python's bounds: the browser never sends a number Python would refuse."""
    import traitlets as t

    from headsne_widget.widget.protocol import StrictFloat

    source = GENERATED_JS.read_text()
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
        assert spec.name in js, f"BOUNDS misses {spec.name}"
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
    assert js == {}, f"BOUNDS names traits the browser does not write: {sorted(js)}"


def test_the_page_mirrors_the_declared_traits():
    """MIRRORED (the traits js/store/state.js keeps as received) is the declared ``mirrored`` set: every scalar and
    list the page shows, not the arrays and edges it decodes; and the speed's gap is the model's own check."""
    source = GENERATED_JS.read_text()
    block = source[source.index("export const MIRRORED") :]
    mirrored = re.findall(r'"(\w+)"', block[: block.index("]);")])
    assert mirrored == [spec.name for spec in TRAITS if spec.mirrored]
    assert {"layer", "kl", "status", "atlas"} <= set(mirrored) and not {"frame", "edges", "text"} & set(mirrored)
    assert "speed: { min: 0, max: 1000000, gap: 0.1 }" in source


def test_codegen_check_writes_nothing_and_fails_on_drift(tmp_path):
    """``codegen --check`` on a tree whose generated JS is stale: exit 1 naming it, the file left as it was; on the
    repository itself: exit 0."""
    import shutil

    for name in (codegen.JS_MODULE, codegen.PY_MODULE, codegen.PROTOCOL_MD):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    stale = tmp_path / codegen.JS_MODULE
    stale.write_text(stale.read_text().replace('"atlas_stop"', '"atlas_halt"'))
    before = stale.read_text()
    assert codegen.write_generated(tmp_path, check=True) == [stale]
    assert stale.read_text() == before
    assert codegen.main(["--check"]) == 0


def test_every_control_action_has_one_handler_and_the_page_sends_only_those():
    """The browser's control actions come from protocol.CONTROL_ACTIONS alone: the owner's table handles exactly
    those, and the generated JS lists the same; the page's `control()` takes that type, so tsc (npm run lint)
    refuses any other action the page would send."""
    from headsne_widget.widget.owner.events import CONTROLS
    from headsne_widget.widget.protocol import CONTROL_ACTIONS

    assert set(CONTROLS) == set(CONTROL_ACTIONS)
    source = GENERATED_JS.read_text()
    listed = source[source.index("export const CONTROL_ACTIONS") :].split(";")[0]
    assert re.findall(r'"(\w+)"', listed) == list(CONTROL_ACTIONS)
    assert 'import("./protocol.generated.js").ControlAction} action' in (JS / "model" / "model.js").read_text()
