"""The package's shape, held by a test: folders follow the pipeline and import only from the stages before them,
no module grows beyond 450 lines and no function beyond 80 (ruff holds complexity and arguments, eslint the
front end's sizes)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "headsne_widget"
#: the stages in pipeline order; each may import the shared modules at the package's root and earlier stages
STAGES = ("capture", "affinity", "embedding", "widget", "studies")
SHARED = {"budget", "errors", "_checks", "_device", "_parallel", "texts"}
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 80
#: modules still beyond the sizes, each with who is splitting it; remove an entry once its module fits
OVER_SIZE: dict[str, str] = {}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "static" not in p.parts)


def _stage(path: Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else path.stem


def _imported(path: Path) -> set[str]:
    """The package's top-level names (stages or shared modules) that ``path`` imports, at any depth."""
    found = set()
    package = path.relative_to(PACKAGE).parts[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - node.level + 1]
            target = [*base, *(node.module.split(".") if node.module else [])]
            names = [target[0]] if target else [alias.name for alias in node.names]
            found.update(names)
        elif isinstance(node, ast.ImportFrom | ast.Import):
            for name in [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]:
                if name and name.startswith("headsne_widget."):
                    found.add(name.split(".")[1])
    return found


def test_each_stage_imports_only_the_shared_modules_and_earlier_stages():
    wrong = []
    for path in _modules():
        stage = _stage(path)
        if stage not in STAGES:
            continue
        allowed = SHARED | set(STAGES[: STAGES.index(stage) + 1])
        for name in _imported(path) - allowed:
            wrong.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert wrong == []


def test_the_shared_modules_import_no_stage():
    wrong = [f"{p.name} imports {n}" for p in PACKAGE.glob("*.py") for n in _imported(p) & set(STAGES)]
    assert wrong == [], "the root's modules are below every stage (__init__ only names them lazily)"


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
