"""The package's layout as a contract: layers import only downwards, no import cycle, argparse only at the edge.

The imports are read from the source (nothing is executed), every one of them: function-local and
``TYPE_CHECKING`` imports tie modules together as much as top-level ones. docs/architecture.md draws the
same layers; a change that needs an upward import belongs in a lower layer or a higher one.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT

PACKAGE = ROOT / "reportgen"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("reportgen", "reportgen.errors", "reportgen.text", "reportgen.config", "reportgen.store.location"),
    ("reportgen.model",),
    ("reportgen.devices",),
    ("reportgen.store",),
    ("reportgen.scenario",),
    ("reportgen.analysis",),
    ("reportgen.catalog",),
    ("reportgen.traces",),
    ("reportgen.profile",),
    ("reportgen.render",),
    ("reportgen.compare",),
    ("reportgen.ab",),
    ("reportgen.site",),
    ("reportgen.ci",),
    ("reportgen.commands", "reportgen.cli", "reportgen.cli_text", "reportgen.__main__"),
)
"""Bottom to top. A module may import its own layer and the layers below it."""

ARGPARSE_ALLOWED = {"reportgen.cli", "reportgen.commands", "reportgen.ci.comment"}
"""The command line, and the GitHub Action's own small entry point."""

MAX_MODULE_LINES = 400
MAX_FLAT_MODULES = 12


@dataclass(frozen=True)
class Import:
    """One import statement of the package's own modules (or of argparse)."""

    module: str
    target: str
    line: int


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def resolve(name: str) -> str | None:
    """The module ``name`` refers to (a name imported from a module resolves to the module)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> list[Import]:
    """Every import in ``module``'s source, absolute names, at any depth."""
    path = MODULES[module]
    return imports_in(module, path.read_text(), is_package=path.name == "__init__.py")


def imports_in(module: str, source: str, is_package: bool) -> list[Import]:
    """Every import in ``source`` (the text of ``module``), relative ones made absolute."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                base = ".".join(anchor[: len(anchor) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{a.name}" for a in node.names] or [base]
        else:
            continue
        out += [Import(module, n, node.lineno) for n in names]
    return out


def internal_edges() -> dict[str, set[str]]:
    """Module -> the package's modules it imports.

    A folder's face importing its own parts is no edge, nor is an import of the package's version.
    """
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for m in MODULES:
        for imp in imports_of(m):
            target = resolve(imp.target) if imp.target.startswith("reportgen.") else None
            if target and target != m and not target.startswith(m + ".") and target != "reportgen":
                edges[m].add(target)
    return edges


def layer_of(module: str) -> int:
    """Index of the layer holding ``module`` (its longest matching prefix)."""
    best = max((len(p), i) for i, layer in enumerate(LAYERS) for p in layer
               if module == p or module.startswith(p + "."))
    return best[1]


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_every_module_has_a_layer() -> None:
    for m in MODULES:
        assert any(m == p or m.startswith(p + ".") for layer in LAYERS for p in layer if p != "reportgen") \
            or m == "reportgen", f"{m}: add it to a layer in LAYERS and to docs/architecture.md"


def test_no_import_cycle() -> None:
    assert cycles(internal_edges()) == []


def test_layers_import_only_downwards() -> None:
    upward = [f"{m} imports {t} (layer {layer_of(m)} -> {layer_of(t)})"
              for m, targets in internal_edges().items() for t in sorted(targets) if layer_of(t) > layer_of(m)]
    assert upward == []


def test_argparse_only_at_the_edge() -> None:
    users = {imp.module for m in MODULES for imp in imports_of(m) if imp.target.split(".")[0] == "argparse"}
    assert users <= ARGPARSE_ALLOWED, sorted(users - ARGPARSE_ALLOWED)


def test_modules_are_small_and_few_are_flat() -> None:
    big = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert big == {}
    flat = [m for m, p in MODULES.items() if p.parent == PACKAGE and p.name != "__init__.py"]
    assert len(flat) <= MAX_FLAT_MODULES, flat


def test_each_folder_states_its_role() -> None:
    for init in PACKAGE.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and doc.splitlines()[0].strip(), f"{init.relative_to(ROOT)}: a one-line role as its docstring"


@pytest.mark.parametrize("edges, expected", [
    ({"a": {"b"}, "b": {"a"}, "c": set()}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
])
def test_the_cycle_finder_finds_cycles(edges: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert cycles(edges) == expected


def test_function_local_and_relative_imports_are_seen() -> None:
    """The reader sees imports inside functions and TYPE_CHECKING blocks, where cycles used to hide."""
    src = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from reportgen.cli import main\n"
           "def f():\n    from ..site import build\n    import argparse\n")
    found = sorted(i.target for i in imports_in("reportgen.model.run", src, is_package=False))
    assert found == ["argparse", "reportgen.cli.main", "reportgen.site.build", "typing.TYPE_CHECKING"]
    assert layer_of("reportgen.cli") > layer_of("reportgen.site.build") > layer_of("reportgen.model.run") \
        > layer_of("reportgen.errors")
