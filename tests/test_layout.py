"""The package's shape, held by a test: folders follow the pipeline and import only from the stages before them
(but for the calls up named in CALLS_UP, each inside one function), no module imports itself back through others
(inside a stage too), no module grows beyond 450 lines and no function beyond 80 (ruff holds complexity and
arguments, eslint the front end's sizes)."""

from __future__ import annotations

import ast
from pathlib import Path

from headsne_widget.widget.codegen import GENERATED

PACKAGE = Path(__file__).resolve().parents[1] / "headsne_widget"
#: the stages in pipeline order; each may import the shared modules at the package's root and earlier stages
STAGES = ("capture", "syntax", "affinity", "embedding", "widget", "studies", "figures", "export", "cli")
SHARED = {"budget", "errors", "_checks", "_device", "_memory", "_parallel", "texts"}
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 80
#: the calls up the pipeline, each an import inside one named function: module -> {stage: function}. HeadSNE (the
#: widget) writes its page through the export, which draws with the figures, which sit after the studies.
CALLS_UP: dict[str, dict[str, str]] = {"widget/headsne.py": {"export": "save_html"}}
#: modules still beyond the sizes, each with who is splitting it; remove an entry once its module fits
OVER_SIZE: dict[str, str] = {}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "static" not in p.parts)


def _stage(path: Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else path.stem


def _imports_by_function(path: Path) -> list[tuple[str, str]]:
    """(top-level name of the package that ``path`` imports, the function the import sits in or "") for every
    import at any depth: stages and shared modules."""
    found = []
    package = path.relative_to(PACKAGE).parts[:-1]

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, ast.ImportFrom) and node.level and (node.module or "").split(".")[0] in STAGES:
            base = package[: len(package) - node.level + 1]
            target = [*base, *(node.module.split(".") if node.module else [])]
            found.extend((name, function) for name in ([target[0]] if target else [a.name for a in node.names]))
        elif isinstance(node, ast.ImportFrom | ast.Import):
            for name in [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]:
                if name and name.startswith("headsne_widget."):
                    found.append((name.split(".")[1], function))
        inner = node.name if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else function
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(ast.parse(path.read_text()), "")
    return found


def _imported(path: Path) -> set[str]:
    """The package's top-level names (stages or shared modules) that ``path`` imports, at any depth."""
    return {name for name, _ in _imports_by_function(path)}


def test_each_stage_imports_only_the_shared_modules_and_earlier_stages():
    wrong = []
    for path in _modules():
        stage = _stage(path)
        if stage not in STAGES:
            continue
        allowed = SHARED | set(STAGES[: STAGES.index(stage) + 1])
        up = CALLS_UP.get(path.relative_to(PACKAGE).as_posix(), {})
        for name, function in _imports_by_function(path):
            if name not in allowed and up.get(name) != function:
                wrong.append(f"{path.relative_to(PACKAGE)} imports {name}" + (f" in {function}" if function else ""))
    assert wrong == []


def test_each_call_up_the_pipeline_is_still_made():
    """An entry of CALLS_UP goes once its module no longer makes that call."""
    stale = [
        f"{name}: {stage} in {function}"
        for name, calls in CALLS_UP.items()
        for stage, function in calls.items()
        if (stage, function) not in _imports_by_function(PACKAGE / name)
    ]
    assert stale == [], "remove these from CALLS_UP"


def test_the_shared_modules_import_no_stage():
    """The root's modules are below every stage; ``__init__`` names the public ones lazily (and imports them only for
    type checkers, where nothing runs)."""
    wrong = [
        f"{p.name} imports {n}"
        for p in PACKAGE.glob("*.py")
        if p.name != "__init__.py"
        for n in _imported(p) & set(STAGES)
    ]
    init = ast.parse((PACKAGE / "__init__.py").read_text())
    at_run_time = [
        node for node in init.body if not (isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING")
    ]
    wrong += [
        f"__init__.py imports {node.module}" for node in at_run_time if isinstance(node, ast.ImportFrom) and node.level
    ]
    assert wrong == []


def test_no_module_or_function_beyond_its_size():
    too_long = []
    for path in _modules():
        if path.relative_to(PACKAGE).as_posix() in OVER_SIZE:
            continue
        source = path.read_text()
        if GENERATED in source[:400]:  # widget/params.py: one typed property a trait, written by codegen
            continue
        lines = source.count("\n")
        if lines > MAX_MODULE_LINES:
            too_long.append(f"{path.relative_to(PACKAGE)}: {lines} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    too_long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}: {size} lines")
    assert too_long == []


def test_the_modules_allowed_over_size_exist_and_are_over_it():
    """An entry of OVER_SIZE goes once its module is split (or gone)."""
    stale = []
    for name in OVER_SIZE:
        path = PACKAGE / name
        if not path.exists():
            stale.append(f"{name}: no such module")
            continue
        source = path.read_text()
        functions = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        longest = max(((n.end_lineno or n.lineno) - n.lineno + 1 for n in functions), default=0)
        if source.count("\n") <= MAX_MODULE_LINES and longest <= MAX_FUNCTION_LINES:
            stale.append(f"{name}: fits now")
    assert stale == [], "remove these from OVER_SIZE"


def _module_name(path: Path) -> str:
    """``widget.owner`` for ``headsne_widget/widget/owner.py``, ``affinity.sources`` for its ``__init__.py``."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Each module of the package and the package's modules it imports: every import statement at any depth,
    those under ``if TYPE_CHECKING:`` and inside functions included (a circle dodged by a late import is a
    circle still). ``from .pkg import name`` points at ``pkg.name`` when that is a module, else at ``pkg``."""
    paths = {_module_name(p): p for p in _modules()}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("headsne_widget")):
                base = package[: len(package) - node.level + 1] if node.level else []
                module = (node.module or "").split(".") if node.module else []
                target = ".".join([*base, *(module if node.level else module[1:])])
                for alias in node.names:
                    child = f"{target}.{alias.name}" if target else alias.name
                    targets.add(child if child in paths else target)
            elif isinstance(node, ast.Import):
                targets.update(a.name.split(".", 1)[1] for a in node.names if a.name.startswith("headsne_widget."))
        graph[name] = {t for t in targets if t in paths and t != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def test_the_circle_finder_finds_a_circle_and_only_circles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set(), "f": {"g"}, "g": {"f", "d"}}
    assert _circles(graph) == [["a", "b", "c"], ["f", "g"]]


def test_no_import_circle_anywhere_in_the_package():
    """Inside a stage too: each circle is listed (``a <-> b``) until it is cut."""
    circles = [" <-> ".join(c) for c in _circles(_import_graph())]
    assert not circles, "import circles, each until it is cut:\n" + "\n".join(circles)


#: the owner (one class: its state and every handler): the only modules that assign its fields or write the traits
OWNER = "widget/owner"
OWNER_MODULES = {p.relative_to(PACKAGE).as_posix() for p in (PACKAGE / OWNER).glob("*.py")}
#: the synced model itself: the browser's updates enter through its ``set_state`` (only what a user may set) and
#: what it refuses it sends back; it writes no value of its own
MODEL_MODULE = "widget/model.py"
#: what a widget's traits are written with besides ``widget.x = ...`` and ``setattr``: traitlets' and ipywidgets'
#: methods (a ``hold_sync`` block is there to write), and links that write one widget's trait from another's
TRAIT_WRITERS = {"set_trait", "set_state", "send_state", "hold_sync", "hold_trait_notifications", "add_traits"}
LINKS = {"link", "dlink", "directional_link", "jslink", "jsdlink"}
#: the synced model's class and ipywidgets' widget classes: ``self`` in their methods is a widget
WIDGET_CLASSES = {"HeadSNEModel", "AnyWidget", "DOMWidget", "Widget"}


def _owner_assignments(path: Path) -> list[str]:
    """``owner.x = ...`` (or ``self._owner.x``, ``own.x``) in ``path``: the owner's fields set from outside."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        flat = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
        for target in flat:
            holder = target.value if isinstance(target, ast.Attribute) else None
            name = holder.attr if isinstance(holder, ast.Attribute) else getattr(holder, "id", "")
            if name in ("owner", "_owner", "own") and isinstance(target, ast.Attribute):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} sets {name}.{target.attr}")
    return found


def test_only_the_owner_assigns_its_fields():
    """Issue 27: results are applied by the owner's handlers, construction is an owner method."""
    wrong = [
        w for p in _modules() if p.relative_to(PACKAGE).as_posix() not in OWNER_MODULES for w in _owner_assignments(p)
    ]
    assert wrong == []


def test_the_owner_declares_its_state_once():
    """Every field the owner's modules assign (``self.x = ...``) is declared in ``OwnerState``, and only there: no
    concern of the class adds state of its own."""
    state = ast.parse((PACKAGE / OWNER / "state.py").read_text())
    base = next(n for n in state.body if isinstance(n, ast.ClassDef) and n.name == "OwnerState")
    declared = {n.target.id for n in base.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    wrong = []
    for name in sorted(OWNER_MODULES):
        for node in ast.walk(ast.parse((PACKAGE / name).read_text())):
            if isinstance(node, ast.ClassDef) and node.bases:  # a layer of the class (RunState is a record)
                wrong += [f"{name}: {node.name} declares {n.target.id}" for n in node.body
                          if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]  # fmt: skip
            for target in _assigned(node):
                is_field = isinstance(target, ast.Attribute) and getattr(target.value, "id", "") == "self"
                if is_field and target.attr not in declared:
                    wrong.append(f"{name}:{node.lineno} sets self.{target.attr}, not declared in OwnerState")
    assert declared and wrong == []


def _flat(target: ast.expr) -> list[ast.expr]:
    """The single targets of an assignment target (tuples and starred unpacked)."""
    if isinstance(target, ast.Tuple | ast.List):
        return [e for t in target.elts for e in _flat(t)]
    return _flat(target.value) if isinstance(target, ast.Starred) else [target]


def _assigned(node: ast.AST) -> list[ast.expr]:
    """The single targets ``node`` assigns, if it is an assignment."""
    if isinstance(node, ast.Assign):
        return [t for ts in node.targets for t in _flat(ts)]
    return _flat(node.target) if isinstance(node, ast.AugAssign | ast.AnnAssign) else []


class _TraitWrites(ast.NodeVisitor):
    """Every write of a widget's traits in one module, in any form: ``owner.widget.x = ...``, an alias
    (``w = self.widget; w.x, w.y = ...``, a parameter annotated ``HeadSNEModel``, ``self`` in a widget class),
    ``setattr(widget, ...)``, ``widget.set_trait(...)`` and the other TRAIT_WRITERS (``with w.hold_sync():``,
    ``send_state``), a traitlets link, or a ``HeadSNEModel(...)`` made with values."""

    def __init__(self, where: str) -> None:
        self.where, self.found, self.aliases, self.in_widget_class = where, [], [set()], False

    def is_widget(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Attribute):
            return node.attr in ("widget", "_widget")
        if isinstance(node, ast.Name):
            return node.id in self.aliases[-1] or node.id == "widget" or (node.id == "self" and self.in_widget_class)
        return False

    def note(self, node: ast.AST, what: str) -> None:
        self.found.append(f"{self.where}:{node.lineno} {what}")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        outer = self.in_widget_class
        self.in_widget_class = node.name in WIDGET_CLASSES or any(
            getattr(b, "id", getattr(b, "attr", "")) in WIDGET_CLASSES for b in node.bases
        )
        self.generic_visit(node)
        self.in_widget_class = outer

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        scope = self.aliases[-1] | {  # the enclosing function's aliases, and parameters typed as the model
            a.arg
            for a in [*node.args.args, *node.args.kwonlyargs]
            if "HeadSNEModel" in ast.unparse(a.annotation or ast.Constant(""))
        }
        bound: set[str] = set()
        for _ in range(3):  # an alias of an alias
            self.aliases.append(scope | bound)
            for assign in (n for n in ast.walk(node) if isinstance(n, ast.Assign)):
                for target in assign.targets:
                    pairs = (
                        zip(_flat(target), _flat(assign.value))
                        if isinstance(target, ast.Tuple) and isinstance(assign.value, ast.Tuple)
                        else [(target, assign.value)]
                    )
                    bound |= {t.id for t, v in pairs if isinstance(t, ast.Name) and self.is_widget(v)}
            self.aliases.pop()
        self.aliases.append(scope | bound)
        self.generic_visit(node)
        self.aliases.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assign(self, node: ast.Assign | ast.AugAssign | ast.AnnAssign) -> None:
        for target in _assigned(node):
            if isinstance(target, ast.Attribute) and self.is_widget(target.value):
                self.note(node, f"sets {ast.unparse(target)}")
        self.generic_visit(node)

    visit_AugAssign = visit_AnnAssign = visit_Assign

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in ("setattr", "delattr") and node.args and self.is_widget(node.args[0]):
            self.note(node, f"{name}({ast.unparse(node.args[0])}, ...)")
        elif isinstance(func, ast.Attribute) and name in TRAIT_WRITERS and self.is_widget(func.value):
            self.note(node, f"{ast.unparse(func)}(...)")
        elif name in LINKS and any(self.is_widget(e) for a in node.args for e in ast.walk(a)):
            self.note(node, f"{name}(...) of a widget")
        elif name == "HeadSNEModel" and (node.args or node.keywords):
            self.note(node, "makes a HeadSNEModel with values")
        self.generic_visit(node)


def _trait_writes(path: Path) -> list[str]:
    finder = _TraitWrites(path.relative_to(PACKAGE).as_posix())
    finder.visit(ast.parse(path.read_text()))
    return finder.found


def test_the_trait_write_finder_sees_every_form():
    source = """
class HeadSNEModel(AnyWidget):
    def set_state(self, data):
        self.send_state(["layer"])
def direct(owner):
    owner.widget.layer = 1
def aliased(self):
    w, ex = self.widget, self.ex
    w.kl, w.status = None, "done"
    v = w
    v.frame += 1
def helpers(owner, model: HeadSNEModel):
    setattr(owner.widget, "layer", 2)
    owner.widget.set_trait("head", 3)
    with model.hold_sync():
        pass
    traitlets.link((owner.widget, "layer"), (other, "value"))
    return HeadSNEModel(layer=1)
def reads(owner):
    w = owner.widget
    x = w.layer
    setattr(HeadSNE, "layer", property())
    other.layer = w.head
"""
    path = PACKAGE / "widget" / "example.py"
    finder = _TraitWrites("example")
    finder.visit(ast.parse(source))
    assert [f.split(" ", 1)[1] for f in finder.found] == [
        "self.send_state(...)", "sets owner.widget.layer", "sets w.kl", "sets w.status", "sets v.frame",
        "setattr(owner.widget, ...)", "owner.widget.set_trait(...)", "model.hold_sync(...)", "link(...) of a widget",
        "makes a HeadSNEModel with values",
    ]  # fmt: skip
    del path


def test_only_the_owner_writes_traits():
    """Issue 51: every write of the synced model's traits goes through the owner (the views and the user API hand it
    values), so that one thread, in one place, sets traits."""
    wrong = [
        w
        for p in _modules()
        if p.relative_to(PACKAGE).as_posix() not in OWNER_MODULES | {MODEL_MODULE}
        for w in _trait_writes(p)
    ]
    assert wrong == []


def test_type_checkers_see_every_public_name_as_what_it_is():
    """The public names are imported lazily at run time; for mypy and IDEs the package's TYPE_CHECKING block imports
    each of them (``from headsne_widget import HeadSNE`` is the class, not Any), from the module that defines it."""
    import importlib
    import types

    import headsne_widget

    tree = ast.parse(Path(headsne_widget.__file__).read_text())
    block = next(
        node for node in tree.body if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING"
    )
    seen = {
        alias.asname: f"headsne_widget{node.module and '.' + node.module}"
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname == alias.name
    }
    names = {n for n in headsne_widget.__all__ if not isinstance(getattr(headsne_widget, n), types.ModuleType)}
    assert set(seen) == names
    for name, module in seen.items():
        assert getattr(importlib.import_module(module), name) is getattr(headsne_widget, name), name
