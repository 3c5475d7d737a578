"""The package's shape, held by a test: folders follow the pipeline and import only from the stages before them
(but for the calls up named in CALLS_UP, each inside one function), no module imports itself back through others
(inside a stage too), no module grows beyond 450 lines and no function beyond 80 (ruff holds complexity and
arguments, eslint the front end's sizes)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "headsne_widget"
#: the stages in pipeline order; each may import the shared modules at the package's root and earlier stages
STAGES = ("capture", "affinity", "embedding", "widget", "studies", "figures", "export", "cli")
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


#: the owner's class and its result handlers (mixed into it): the only modules that assign the owner's fields
OWNER_MODULES = {"widget/owner.py", "widget/results.py"}


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
