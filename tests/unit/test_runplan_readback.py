"""No parallel RunPlanSpec read-back (issue 13 item 4): product code reads the ``runplan`` ops.

The plan's verifier, the provisioning projection, the lowering and the tools read the ops (and their
accessors: ``PlanOp.facts()``, ``stage_ops()``, ``EdgeOp.row()``, ...); the planner's RunPlanSpec is only
written as IR. Pure ``ast`` analysis of every product module (tests/ and bench/ are not product code).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping

from pipeplan.dialects.runplan import PlanOp

from tests.unit.test_layers import product_modules

READERS = ("runplan_spec_from_module",)
"""Names of the removed IR -> RunPlanSpec readers."""


def spec_readbacks(modules: Mapping[str, str]) -> Iterator[str]:
    """``module:line what`` for every use of a RunPlanSpec reader: a name, attribute, import or definition
    of :data:`READERS`, and a ``spec`` method defined on ``PlanOp`` (the reader that was ``PlanOp.spec``)
    or called as ``PlanOp.spec``."""
    for module, source in sorted(modules.items()):
        for node in ast.walk(ast.parse(source)):
            name = None
            if isinstance(node, ast.Name):
                name = node.id
            elif isinstance(node, ast.Attribute):
                name = node.attr
                if node.attr == "spec" and isinstance(node.value, ast.Name) and node.value.id == "PlanOp":
                    yield f"{module}:{node.lineno} uses PlanOp.spec"
            elif isinstance(node, ast.alias):
                name = node.asname or node.name.rsplit(".", 1)[-1]
            elif isinstance(node, ast.FunctionDef):
                name = node.name
            elif isinstance(node, ast.ClassDef) and node.name == "PlanOp":
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == "spec":
                        yield f"{module}:{item.lineno} defines PlanOp.spec"
            if name in READERS:
                yield f"{module}:{node.lineno} uses {name}"


def test_product_code_has_no_runplan_spec_readback():
    """Issue 13 item 4: no product module defines, imports or calls ``runplan_spec_from_module`` or
    ``PlanOp.spec``; the check catches each spelling (synthetic modules)."""
    modules = product_modules()
    assert "pipeplan.dialects.runplan" in modules and "pipeplan.tools.calibrate" in modules
    assert list(spec_readbacks(modules)) == []
    assert not hasattr(PlanOp, "spec")
    for src, want in (
        ("from pipeplan.dialects.runplan_build import runplan_spec_from_module\n", "uses runplan_spec_from_module"),
        ("import pipeplan.dialects.runplan_build as b\nx = b.runplan_spec_from_module(m)\n",
         "uses runplan_spec_from_module"),
        ("def f(m):\n    return runplan_spec_from_module(m)\n", "uses runplan_spec_from_module"),
        ("def runplan_spec_from_module(m):\n    pass\n", "uses runplan_spec_from_module"),
        ("class PlanOp:\n    def spec(self):\n        pass\n", "defines PlanOp.spec"),
        ("f = PlanOp.spec\n", "uses PlanOp.spec"),
    ):
        assert any(x.endswith(want) for x in spec_readbacks({"pipeplan.x": src})), src
    assert list(spec_readbacks({"pipeplan.x": "o = edge.object_spec.spec()\n"})) == []
