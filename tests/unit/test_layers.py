"""The packages form a DAG in the documented layer order (issue 13 item 6; ir-design.md principle 6).

:data:`LAYERS` is the one statement of the order (the README "Layout" table is checked against it).
Every ``pipeplan`` import of every product module counts, at module level or inside a function:
``import pipeplan.x``, ``from pipeplan.x import y``, relative imports, and a string constant naming a
pipeplan module (``"pipeplan.x.y"`` or ``"pipeplan.x.y:attr"``, what ``importlib.import_module`` and the
``xdsl.universe`` table resolve). Pure ``ast`` analysis, no module is imported.
"""

from __future__ import annotations

import ast
import graphlib
import re
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

LAYERS: tuple[tuple[str, ...], ...] = (
    ("pipeplan", "errors", "plan_types"),  # the root __init__ (version), typed errors, plan dataclasses
    ("files",),  # input path checks, atomic output writes, the cache directory
    ("models",),  # torch-free architecture program builders, hyper-parameters, kernel calls
    ("dialects",),  # runplan, pplan, cplan, vmachine, tmachine and their verifiers
    ("frontend", "targets", "analysis"),  # GGUF facts/pools/planner; target plugins; scheduling/memory/simulation
    ("transforms",),  # the passes
    ("universe",),  # the xdsl.universe entry point (names dialects and passes)
    ("api",),  # the embedding API
    ("compiler",),  # compile driver and replay packages
    ("runtime",),  # stages, orchestrator, transports, kernels, replay
    ("serve",),  # the HTTP API
    ("tools",),  # pipeplan-opt and pipeplan commands
)
"""Layers, lowest first. A module may import its own package and packages of lower layers only;
packages of one layer (one tuple) are siblings and do not import each other. ``pipeplan`` is the root
package's ``__init__``; the other names are top-level packages (folders) or root modules (``x.py``)."""

RANK = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}
MODULE_STRING = re.compile(r"pipeplan(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_]\w*)?")


def product_units(root: Path = ROOT) -> set[str]:
    """Top-level packages (pyproject ``[tool.setuptools] packages``) and root modules (``x.py``)."""
    packages = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    units = {p.split(".")[1] for p in packages if p.count(".") == 1}
    units |= {p.stem for p in root.glob("*.py") if p.stem.isidentifier() and p.stem != "__init__"}
    return units | {"pipeplan"}


def product_modules(root: Path = ROOT) -> dict[str, str]:
    """Module name -> source of every module of the installed package (root modules and package folders)."""
    out: dict[str, str] = {}
    for unit in sorted(product_units(root) - {"pipeplan"}):
        files = [root / f"{unit}.py"] if (root / f"{unit}.py").is_file() else sorted((root / unit).rglob("*.py"))
        for f in files:
            parts = list(f.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(["pipeplan", *parts])] = f.read_text()
    out["pipeplan"] = (root / "__init__.py").read_text()
    return out


def unit_of(module: str) -> str:
    """``pipeplan.runtime.stage`` -> ``runtime``; ``pipeplan`` -> ``pipeplan``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "pipeplan"


def imports(module: str, source: str, is_package: bool = False,
            units: frozenset[str] = frozenset(RANK)) -> Iterator[tuple[str, int, bool]]:
    """(imported pipeplan module, line, inside a function) for every import of ``source`` (the spellings of
    the module docstring); ``from pipeplan import x`` imports unit ``x`` when it is one of ``units``, else
    the root package (``__version__``)."""
    tree = ast.parse(source)
    base = module.split(".") if is_package else module.split(".")[:-1]

    def walk(node: ast.AST, local: bool) -> Iterator[tuple[str, int, bool]]:
        for child in ast.iter_child_nodes(node):
            inner = local or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.Import):
                yield from ((a.name, child.lineno, local) for a in child.names
                            if a.name == "pipeplan" or a.name.startswith("pipeplan."))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    up = base[:len(base) - (child.level - 1)]
                    target = ".".join(up + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                if target == "pipeplan":
                    yield from ((f"pipeplan.{a.name}" if a.name in units else "pipeplan", child.lineno, local)
                                for a in child.names)
                elif target.startswith("pipeplan."):
                    yield target, child.lineno, local
            elif isinstance(child, ast.Constant) and isinstance(child.value, str) \
                    and MODULE_STRING.fullmatch(child.value) and unit_of(child.value.split(":")[0]) in RANK:
                yield child.value.split(":")[0], child.lineno, local
            yield from walk(child, inner)

    yield from walk(tree, False)


def package_edges(modules: Mapping[str, str]) -> Iterator[tuple[str, str, str, int, str]]:
    """(importing unit, imported unit, importing module, line, imported module) across units."""
    packages = {m.rsplit(".", 1)[0] for m in modules if "." in m} | {"pipeplan"}
    units = frozenset(RANK) | {unit_of(m) for m in modules}
    for module, source in modules.items():
        for target, line, _local in imports(module, source, is_package=module in packages, units=units):
            dst = unit_of(target)
            if dst != unit_of(module):
                yield unit_of(module), dst, module, line, target


Edge = tuple[str, str, str, int, str]


def edges_of(modules: Mapping[str, str]) -> list[Edge]:
    return list(package_edges(modules))


def layer_violations(edges: Iterable[Edge]) -> list[str]:
    """Every import of a unit that is not in a strictly lower layer (or is in no layer), one line each."""
    out = []
    for src, dst, module, line, target in edges:
        if src not in RANK or dst not in RANK:
            out.append(f"{module}:{line}: {src} or {dst} is in no layer of LAYERS")
        elif RANK[dst] >= RANK[src]:
            out.append(f"{module}:{line} imports {target}: {dst} (layer {RANK[dst]}) is not below {src} "
                       f"(layer {RANK[src]})")
    return out


def package_cycle(edges: Iterable[Edge]) -> list[str] | None:
    """A cycle of the unit import graph (``graphlib``'s CycleError path), or None when it is a DAG."""
    graph: dict[str, set[str]] = {}
    for src, dst, *_ in edges:
        graph.setdefault(src, set()).add(dst)
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as e:
        return list(e.args[1])
    return None


def runtime_imports(edges: Iterable[Edge]) -> list[str]:
    """Imports of ``pipeplan.runtime`` by modules under dialects/ or transforms/ (issue 13 item 4)."""
    return [f"{module}:{line} imports {target}" for src, dst, module, line, target in edges
            if src in ("dialects", "transforms") and dst == "runtime"]


@pytest.fixture(scope="module")
def modules() -> dict[str, str]:
    return product_modules()


@pytest.fixture(scope="module")
def edges(modules) -> list[Edge]:
    return edges_of(modules)


def test_no_dialect_or_transform_imports_runtime(modules, edges):
    """Issue 13 "What it must show": no module under dialects/ or transforms/ imports runtime/, at module
    level or in a function; the check catches each spelling (synthetic modules)."""
    assert any(m.startswith("pipeplan.dialects.") for m in modules)
    assert any(m.startswith("pipeplan.transforms.") for m in modules)
    assert runtime_imports(edges) == []
    for name, src, target in (
        ("pipeplan.dialects.x", "def f():\n    from pipeplan.runtime.stage import StageWorker\n", "runtime.stage"),
        ("pipeplan.transforms.x", "import pipeplan.runtime.program as p\n", "runtime.program"),
        ("pipeplan.transforms.x", "from ..runtime import replay\n", "runtime"),
        ("pipeplan.dialects.x", "import os.path\nfrom pipeplan import runtime\n", "runtime"),
        ("pipeplan.transforms.x", "KERNELS = {'cpu': 'pipeplan.runtime.kernels.cpu'}\n", "runtime.kernels.cpu"),
    ):
        line = src.count("\n", 0, src.index("runtime")) + 1
        assert runtime_imports(edges_of({name: src})) == [f"{name}:{line} imports pipeplan.{target}"], src
    assert runtime_imports(edges_of({"pipeplan.tools.x": "from pipeplan.runtime import replay\n"})) == []


def test_packages_form_a_dag_in_layer_order(edges):
    """Issue 13 item 6: every package import (module level and function level) goes to a lower layer of
    LAYERS, so the package graph has no cycle; an upward, sibling or unplaced import is reported."""
    assert len({e[2] for e in edges}) > 50  # the walk found the modules
    assert layer_violations(edges) == []
    assert package_cycle(edges) is None
    upward = {"pipeplan.dialects.x": "def f():\n    from pipeplan.transforms.project_provisioning import p\n"}
    assert layer_violations(edges_of(upward)) == [
        "pipeplan.dialects.x:2 imports pipeplan.transforms.project_provisioning: transforms (layer 5) is not "
        "below dialects (layer 3)"]
    sibling = {"pipeplan.frontend.x": "from pipeplan.targets import cuda_triton\n"}
    assert layer_violations(edges_of(sibling)) == [
        "pipeplan.frontend.x:1 imports pipeplan.targets: targets (layer 4) is not below frontend (layer 4)"]
    unplaced = {"pipeplan.lowering.x": "from pipeplan.dialects import cplan\n"}
    assert layer_violations(edges_of(unplaced)) == ["pipeplan.lowering.x:1: lowering or dialects is in no layer of LAYERS"]
    stale = {"pipeplan.tools.x": "def f():\n    from pipeplan.lowering.atomic import write_file_atomic\n",
             "pipeplan.tools.y": "from pipeplan import __version__, runtime\n"}
    assert layer_violations(edges_of(stale)) == ["pipeplan.tools.x:2: tools or lowering is in no layer of LAYERS"]
    cycle = {"pipeplan.runtime.a": "from pipeplan.compiler.b import c\n",
             "pipeplan.compiler.b": "def c():\n    from pipeplan.runtime.a import d\n"}
    found = package_cycle(edges_of(cycle))
    assert found is not None and set(found) == {"runtime", "compiler"}
    assert layer_violations(edges_of(cycle)) == [
        "pipeplan.compiler.b:2 imports pipeplan.runtime.a: runtime (layer 9) is not below compiler (layer 8)"]


def test_every_package_is_in_one_layer():
    """Issue 13 item 6: each top-level package of pyproject.toml and each root module is in exactly one
    layer of LAYERS, and LAYERS names nothing that does not exist."""
    placed = [u for layer in LAYERS for u in layer]
    assert len(placed) == len(set(placed))
    assert set(placed) == product_units()


def test_readme_layout_shows_the_layers_in_order():
    """Issue 13 item 6: the README "Layout" table lists every layer of LAYERS, in order, with its folders."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Layout"):]
    section = section[:section.index("\n## ", 1)]
    rows = [r for r in section.splitlines() if re.match(r"\| \d+ \|", r)]
    shown = tuple(tuple(n.removesuffix("/").removesuffix(".py") for n in re.findall(r"`([\w./]+)`", r.split("|")[2]))
                  for r in rows)
    assert [int(r.split("|")[1]) for r in rows] == list(range(len(LAYERS)))
    assert tuple(tuple("pipeplan" if n == "__init__" else n for n in layer) for layer in shown) == LAYERS
