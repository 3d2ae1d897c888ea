"""The package's layers, read from its import graph (docs/architecture.md).

    base      the modules directly in blackwell_stack/ (errors, fileio, proc, output, download, paths, ...)
    formats   readers of file formats that know nothing of the project
    data      the project's nouns (Stack, Lock, profiles, pins, plan items) and the data registry
    areas     pins, stacks, kernel, serve, doctor, verify
    cli       the command line (with __main__)

A module may import its own layer and the layers below it. An area may
import another area only through that area's public modules (its
`__init__.py` lists them in `__all__`), and never one that imports it back.
No import circles at all. An import inside a function is a smell (most dodge
a loop): at most MAX_FUNCTION_IMPORTS of the project's own modules, each
with a comment that gives its reason. Every module stays under MAX_LINES.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import REPO

PACKAGE = REPO / "src" / "blackwell_stack"
LAYERS = ("base", "formats", "data", "area", "cli")
AREAS = ("pins", "stacks", "kernel", "serve", "doctor", "verify")
MAX_FUNCTION_IMPORTS = 5
MAX_LINES = 450


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module of the package
    line: int
    in_function: bool
    reason: str  # the comment on the import's line or the line above ("" when none)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _comment(lines: list[str], line: int) -> str:
    """The comment on an import's line, or a comment line right above it."""
    here = lines[line - 1]
    if "#" in here:
        return here.split("#", 1)[1].strip()
    above = lines[line - 2].strip() if line >= 2 else ""
    return above[1:].strip() if above.startswith("#") else ""


def imports() -> list[Import]:
    known = modules()
    found = []
    for name, path in known.items():
        text = path.read_text()
        lines = text.splitlines()
        tree = ast.parse(text)
        in_function = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                       for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
                # `from P import m` imports the module P.m when there is one, else a name of P.
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            else:
                continue
            for target in dict.fromkeys(targets):
                if target in known and target != name:
                    found.append(Import(name, target, node.lineno, id(node) in in_function,
                                        _comment(lines, node.lineno)))
    return found


def layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or (len(parts) == 2 and parts[1] != "__main__" and parts[1] not in (*AREAS, "formats", "data", "cli")):
        return "base"
    top = parts[1]
    if top in ("cli", "__main__"):
        return "cli"
    return "area" if top in AREAS else top


def area(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in AREAS else None


def _all(package_dir: Path) -> list[str]:
    """The names a package's __init__.py lists in `__all__` (none when it has no list)."""
    tree = ast.parse((package_dir / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return []


def public_modules(area_name: str) -> set[str]:
    """The modules other areas may import: listed in `__all__`, as is each sub-package on the way to them."""
    found, todo = set(), [(PACKAGE / area_name, f"blackwell_stack.{area_name}")]
    while todo:
        directory, dotted = todo.pop()
        for name in _all(directory):
            if (directory / name).is_dir():
                todo.append((directory / name, f"{dotted}.{name}"))
            else:
                found.add(f"{dotted}.{name}")
    return found


GRAPH = imports()


def test_the_graph_is_read():
    assert len(modules()) > 80 and len(GRAPH) > 300
    assert any(i.source == "blackwell_stack.cli" and i.target == "blackwell_stack.cli.areas" for i in GRAPH)


def test_no_import_circles():
    edges: dict[str, set[str]] = {}
    for i in GRAPH:
        edges.setdefault(i.source, set()).add(i.target)
    state: dict[str, int] = {}
    circles = []

    def visit(node: str, trail: list[str]) -> None:
        if state.get(node) == 2:
            return
        if state.get(node) == 1:
            circles.append(" -> ".join(trail[trail.index(node):] + [node]))
            return
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            visit(nxt, [*trail, node])
        state[node] = 2

    for node in sorted(edges):
        visit(node, [])
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_no_import_runs_up_a_layer():
    upward = [f"{i.source}:{i.line} imports {i.target} ({layer(i.source)} -> {layer(i.target)})" for i in GRAPH
              if LAYERS.index(layer(i.target)) > LAYERS.index(layer(i.source))]
    assert not upward, "imports that run up a layer:\n" + "\n".join(upward)


def test_areas_use_each_other_only_through_public_modules_and_never_both_ways():
    between = {(area(i.source), area(i.target)) for i in GRAPH
               if area(i.source) and area(i.target) and area(i.source) != area(i.target)}
    both_ways = sorted(f"{a} <-> {b}" for a, b in between if (b, a) in between and a < b)
    assert not both_ways, "areas that import each other: " + ", ".join(both_ways)
    internal = [f"{i.source}:{i.line} imports {i.target}, which {area(i.target)} does not list in __all__"
                for i in GRAPH if area(i.source) and area(i.target) and area(i.source) != area(i.target)
                and i.target not in public_modules(str(area(i.target)))]
    assert not internal, "an area importing another area's internals:\n" + "\n".join(internal)


def test_the_public_modules_of_each_area_exist():
    for name in AREAS:
        for module in public_modules(name):
            assert module in modules(), f"{name}/__init__.py lists {module} in __all__, which does not exist"


def test_few_function_level_imports_each_with_its_reason():
    local = [i for i in GRAPH if i.in_function]
    shown = "\n".join(f"{i.source}:{i.line} {i.target} ({i.reason or 'no reason given'})" for i in local)
    assert len(local) <= MAX_FUNCTION_IMPORTS, f"{len(local)} imports inside functions:\n{shown}"
    assert all(i.reason for i in local), "each import inside a function says why in a comment:\n" + shown


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")) + sorted((REPO / "modules").rglob("*.nix")),
                         ids=lambda p: str(p.relative_to(REPO)))
def test_no_module_file_is_over_the_limit(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(REPO)}: {lines} lines (at most {MAX_LINES}: split it by concern)"
