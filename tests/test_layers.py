"""The package's layers, checked on its source: each layer imports only from the layers
below it, and no modules import each other in a circle.

Every ``import`` and ``from ... import`` counts, wherever it stands: at the top, inside
a function (a late import hides a dependency, it does not remove it) and, for the
layers, under ``if TYPE_CHECKING:``.  Imports under ``TYPE_CHECKING`` never run, so the
circles check leaves them out (``ir/core.py`` names ``Op`` in annotations only).  Importing
a submodule runs its package's ``__init__`` too; that is Python's doing, not an edge.

The layers, bottom up, are those of the design map (a folder or module of ``pullback/``
is a layer), with two modules placed lower than the map has them, because they import
only the base and the layers below need them:

* ``keys`` (what makes two callables the same computation) imports only ``errors``; the
  frontend keys the values a function reads from outside with it (``frontend/outside.py``).
* ``tracebacks`` (how errors leave the public functions) imports only ``config`` and
  ``errors``; ``api`` and ``derivatives`` use it.
"""

from __future__ import annotations

import ast
from collections import deque
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pullback"  # read, never imported

#: Bottom up; a module may import from its own layer and the ones before it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "config", "tree", "keys", "tracebacks"),
    ("ir",),
    ("ops",),
    ("numpy_api",),
    ("frontend",),
    ("transforms",),
    ("passes",),
    ("backends", "tiered"),
    ("api",),
    ("derivatives",),
    ("random",),
    ("batching",),
    ("nn", "optim", "train"),
    ("__init__",),
)

#: The C backend's phases, bottom up, checked the same way inside ``backends/c``: the
#: loop IR is the backend's own IR, under everything; build (the compiler, the cache,
#: the libraries linked) knows no stage, and lowering names the linked BLAS's symbols
#: from it; the plan reads op declarations only; the graph rewrite of ``prepare`` asks
#: the plan which ops fuse; lowering reads the plan and makes loop IR; emit prints
#: lowered loop IR; the call module loads what build made; the pipeline strings the
#: stages together.
PHASES: tuple[tuple[str, ...], ...] = (
    ("runtime",), ("loops",), ("build",), ("plan",), ("prepare",), ("lower",), ("emit",),
    ("call",), ("pipeline",), ("__init__",),
)

#: Each scope whose parts are ordered: the package, and the C backend inside it.
SCOPES = {"pullback": LAYERS, "pullback.backends.c": PHASES}


@dataclass(frozen=True)
class Import:
    source: str  # dotted module names
    target: str
    file: str
    line: int
    runs: bool  # False under ``if TYPE_CHECKING:``

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def _module_names(package: Path) -> dict[str, Path]:
    names = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _under_type_checking(tree: ast.AST) -> set[int]:
    """The ``id``s of the nodes under ``if TYPE_CHECKING:``."""
    hidden = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in (
                getattr(node.test, "id", None), getattr(node.test, "attr", None)):
            for stmt in node.body:
                hidden.update(id(n) for n in ast.walk(stmt))
    return hidden


def _targets(node: ast.Import | ast.ImportFrom, source: str, is_package: bool,
             modules: dict[str, Path]) -> list[str]:
    """The package's modules that ``node``, in module ``source``, imports."""
    if isinstance(node, ast.Import):
        named = [a.name for a in node.names]
    else:
        here = source.split(".") if is_package else source.split(".")[:-1]
        base = here[: len(here) - node.level + 1] if node.level else []
        origin = ".".join([*base, *([node.module] if node.module else [])])
        named = [f"{origin}.{a.name}" if f"{origin}.{a.name}" in modules else origin
                 for a in node.names]
    root = source.split(".")[0]
    return list(dict.fromkeys(n for n in named if n.split(".")[0] == root))


def imports(package: Path) -> list[Import]:
    """Every import of one of the package's modules by another, in file order."""
    modules = _module_names(package)
    found = []
    for source, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        hidden = _under_type_checking(tree)
        file = path.relative_to(package.parent).as_posix()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(node, source, path.name == "__init__.py", modules):
                    found.append(Import(source, target, file, node.lineno, id(node) not in hidden))
    return sorted(found, key=lambda i: (i.file, i.line))


def _layer_of(module: str, scope: str) -> str | None:
    """The part of ``scope`` that ``module`` is in (None: it is not in ``scope``)."""
    if module == scope:
        return "__init__"
    if not module.startswith(scope + "."):
        return None
    return module[len(scope) + 1:].split(".")[0]


def upward_imports(found: list[Import], scope: str = "pullback",
                   layers: tuple[tuple[str, ...], ...] = LAYERS) -> list[str]:
    """What breaks the layer order inside ``scope``: an import from a higher layer, a
    module in no layer."""
    rank = {name: i for i, layer in enumerate(layers) for name in layer}
    problems = set()
    for imp in found:
        low, high = _layer_of(imp.source, scope), _layer_of(imp.target, scope)
        if low is None or high is None:
            continue
        for module, layer in ((imp.source, low), (imp.target, high)):
            if layer not in rank:
                problems.add(f"{imp.where}: {module} is in no layer of {scope} (place "
                             f"{layer!r} in tests/test_layers.py)")
        if rank.get(high, -1) > rank.get(low, len(rank)):
            problems.add(f"{imp.where}: {imp.source} imports {imp.target}, but layer "
                         f"{low!r} is below {high!r}")
    return sorted(problems)


def _reachable(graph: dict[str, list[str]], start: str) -> dict[str, str]:
    """Breadth first from ``start``: each module reached, with the one it was reached
    from (``start`` is among them only when a circle leads back to it)."""
    came_from: dict[str, str] = {}
    todo = deque([start])
    while todo:
        node = todo.popleft()
        for succ in graph.get(node, ()):
            if succ not in came_from:
                came_from[succ] = node
                todo.append(succ)
    return came_from


def circles(found: list[Import]) -> list[str]:
    """For each group of modules that import each other (run-time imports only), the
    group and one shortest circle through it, each step shown with its import."""
    first: dict[tuple[str, str], Import] = {}
    graph: dict[str, list[str]] = {}
    for imp in found:
        if imp.runs and imp.source != imp.target and (imp.source, imp.target) not in first:
            first[imp.source, imp.target] = imp
            graph.setdefault(imp.source, []).append(imp.target)
    reach = {module: _reachable(graph, module) for module in graph}
    problems, seen = [], set()
    for start in sorted(graph):
        if start in seen or start not in reach[start]:
            continue
        group = sorted(m for m in reach[start] if start in reach.get(m, ()))
        seen.update(group)
        path = [start, reach[start][start]]
        while path[-1] != start:
            path.append(reach[start][path[-1]])
        steps = [first[a, b] for a, b in pairwise(reversed(path))]
        lines = [f"{', '.join(group)} import each other; one circle:"]
        lines += [f"  {s.where}: {s.source} imports {s.target}" for s in steps]
        problems.append("\n".join(lines))
    return problems


def test_each_layer_imports_only_from_the_layers_below_it():
    found = imports(PACKAGE)
    problems = [p for scope, layers in SCOPES.items()
                for p in upward_imports(found, scope, layers)]
    assert not problems, "imports against the layer order:\n" + "\n".join(problems)


def test_no_modules_import_each_other_in_a_circle():
    problems = circles(imports(PACKAGE))
    assert not problems, "import circles:\n" + "\n".join(problems)


def test_the_checks_name_an_upward_import_and_a_circle(tmp_path):
    package = tmp_path / "pullback"
    for name, text in {
        "__init__.py": "from . import api\n",
        "errors.py": "",
        "api.py": "from .ir import core\n",
        "ir/__init__.py": "",
        "ir/core.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                      "    from ..api import jit\n    from .op import Op\n",
        "ir/op.py": "from .core import Var\n\n\ndef late():\n    from .printer import show\n",
        "ir/printer.py": "from ..errors import X\nfrom . import op\n",
    }.items():
        (package / name).parent.mkdir(exist_ok=True)
        (package / name).write_text(text)
    found = imports(package)
    assert upward_imports(found) == [
        "pullback/ir/core.py:4: pullback.ir.core imports pullback.api, "
        "but layer 'ir' is below 'api'"]
    inside_ir = (("printer",), ("op",), ("core",))  # a scope's own order, upside down
    assert upward_imports(found, "pullback.ir", inside_ir) == [
        "pullback/ir/op.py:1: pullback.ir.op imports pullback.ir.core, "
        "but layer 'op' is below 'core'",
        "pullback/ir/printer.py:2: pullback.ir.printer imports pullback.ir.op, "
        "but layer 'printer' is below 'op'"]
    assert circles(found) == [
        "pullback.ir.op, pullback.ir.printer import each other; one circle:\n"
        "  pullback/ir/op.py:5: pullback.ir.op imports pullback.ir.printer\n"
        "  pullback/ir/printer.py:2: pullback.ir.printer imports pullback.ir.op"]
