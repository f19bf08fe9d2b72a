"""The package's layers, read from its imports: docs/architecture.md states the same rules.

Each module belongs to one layer (by its path); it may import modules of its own layer and of
the layers below, never above; nothing imports in a circle; front ends do not import each
other (one declared exception); an import inside a function names its reason (``# lazy:``);
backends are used through their declared contract only; no private module of another
package is imported.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "langchain_genmem"
PKG = "langchain_genmem"

# Lowest first. A module's layer is that of the longest prefix that names it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("vocabulary", ("core",)),
    ("numerics", ("numerics",)),
    ("storage", ("backends",)),
    ("memory", ("memory", "interop")),
    ("retrieval", ("retrieval",)),
    ("model-facing", ("llm",)),
    ("reflection", ("reflection",)),
    ("evaluation", ("evaluation",)),
    ("views", ("dataframe", "filters")),
    ("operations", ("operations",)),
    ("front ends", ("cli", "service", "agent", "langgraph_store")),
    ("package", ("", "_compat")),
]
FRONT_ENDS = ("cli", "service", "agent", "langgraph_store")
# (importing module prefix, imported front end): the only imports between front ends.
FRONT_END_EXCEPTIONS = {
    ("cli.serving", "service"),  # `genmem serve` / `genmem mcp` start the service
}
LAZY_REASONS = ("optional extra", "start-up time")
MAX_ROOT_MODULES = 12


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)  # "" is the package itself


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer_of(module: str) -> int:
    best, index = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            hit = module == prefix or (prefix and module.startswith(prefix + "."))
            if hit and len(prefix) > best:
                best, index = len(prefix), i
    assert index is not None, f"{module}: in no layer; add its folder to LAYERS"
    return index


def front_end_of(module: str) -> str | None:
    return next((f for f in FRONT_ENDS if module == f or module.startswith(f + ".")), None)


class Edge:
    def __init__(self, source: str, target: str, kind: str, line: int, text: str) -> None:
        self.source, self.target, self.kind, self.line, self.text = (
            source, target, kind, line, text)

    def __repr__(self) -> str:
        return f"{self.source or PKG}:{self.line} -> {self.target} ({self.kind})"


def resolve(found: str) -> str | None:
    """The package module an absolute import names (a name imported from it is dropped)."""
    if found != PKG and not found.startswith(PKG + "."):
        return None
    name = found[len(PKG) + 1:]
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def edges_of(module: str, path: Path) -> list[Edge]:
    source = path.read_text()
    lines = source.splitlines()
    out: list[Edge] = []

    def record(node: ast.Import | ast.ImportFrom, kind: str) -> None:
        if isinstance(node, ast.Import):
            found = {resolve(a.name) for a in node.names}
        elif node.level == 0 and node.module:
            found = set()
            for a in node.names:  # `from pkg import module` names the module, not pkg
                whole = f"{node.module}.{a.name}"
                found.add(resolve(whole) if whole[len(PKG) + 1:] in MODULES
                          else resolve(node.module))
        else:
            found = set()
        text = "\n".join(lines[node.lineno - 1:node.end_lineno])
        for target in found - {None, module}:
            out.append(Edge(module, target, kind, node.lineno, text))

    def visit(node: ast.AST, kind: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                record(child, kind)
            elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for n in child.body:
                    visit(ast.Module(body=[n], type_ignores=[]), "typecheck")
                for n in child.orelse:
                    visit(ast.Module(body=[n], type_ignores=[]), kind)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, "typecheck" if kind == "typecheck" else "function")
            else:
                visit(child, kind)

    visit(ast.parse(source), "top")
    return out


EDGES = [e for m, p in MODULES.items() for e in edges_of(m, p)]


def test_every_module_is_in_a_layer():
    for m in MODULES:
        layer_of(m)


def test_imports_run_down_the_layers():
    upward = [e for e in EDGES if layer_of(e.target) > layer_of(e.source)
              and e.source not in ("", "_compat")]
    assert not upward, "imports that run up the layers:\n" + "\n".join(map(repr, upward))


def test_no_import_circles():
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for e in EDGES:
        if e.kind != "typecheck":
            graph[e.source].add(e.target)
            # importing a.b.c runs a/__init__ and a/b/__init__ first
            parts = e.target.split(".")
            for i in range(1, len(parts)):
                parent = ".".join(parts[:i])
                if parent in MODULES and not e.source.startswith(parent):
                    graph[e.source].add(parent)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    circles: list[list[str]] = []

    def strong(v: str) -> None:  # Tarjan
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            # a package and the modules its __init__ re-exports are one unit, not a circle
            if len(comp) > 1 and not all(c.startswith(min(comp, key=len)) for c in comp):
                circles.append(sorted(comp))

    for v in graph:
        if v not in index:
            strong(v)
    assert not circles, f"import circles: {circles}"


def test_front_ends_do_not_import_each_other():
    crossing = []
    for e in EDGES:
        a, b = front_end_of(e.source), front_end_of(e.target)
        if a and b and a != b:
            if not any(e.source.startswith(s) and b == t for s, t in FRONT_END_EXCEPTIONS):
                crossing.append(e)
    assert not crossing, "front ends importing each other:\n" + "\n".join(map(repr, crossing))


def test_imports_inside_functions_say_why():
    silent = [e for e in EDGES if e.kind == "function"
              and not re.search(r"#\s*lazy:\s*(" + "|".join(LAZY_REASONS) + ")", e.text)]
    assert not silent, (
        "imports of the package inside functions without `# lazy: optional extra` or "
        "`# lazy: start-up time`:\n" + "\n".join(map(repr, silent)))


def test_at_most_a_dozen_modules_in_the_root():
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(loose) <= MAX_ROOT_MODULES, loose


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not m.startswith("backends")))
def test_backends_are_used_through_their_contract(module):
    text = MODULES[module].read_text()
    assert not re.search(r"getattr\(\s*[\w.]*backend\b", text), "a getattr probe of a backend"
    assert not re.search(r"isinstance\([^)]*(PostgresBackend|ChromaBackend)", text), (
        "a concrete backend class check")
    assert "type: ignore[attr-defined]" not in text or "backend" not in text


def test_no_private_modules_of_other_packages():
    private = []
    for m, p in MODULES.items():
        for node in ast.walk(ast.parse(p.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for n in names:
                if not n.startswith(PKG) and any(part.startswith("_") and part != "__future__"
                                                 for part in n.split(".")):
                    private.append(f"{m}: {n}")
    assert not private, private
