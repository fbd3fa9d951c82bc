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


def test_reading_a_plan_builds_no_runplan_spec(monkeypatch, tmp_path):
    """Issue 13 item 4: once the planner's decision is IR, verifying it (on parse too), projecting its
    provisions, lowering it to pplan, listing its calibration keys and compiling it construct no
    RunPlanSpec (the constructor is disabled after planning)."""
    from pipeplan.api import parse_module, register_pipeplan
    from pipeplan.compiler.replay_package import compile_plan
    from pipeplan.dialects.runplan_build import project_provisions, single_plan, verify_runplan
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.frontend.pool import load_pool_toml
    from pipeplan.plan_types import RunPlanSpec, RuntimeConfig
    from pipeplan.tools.calibrate import plan_request_keys
    from pipeplan.transforms.convert_runplan_to_pplan import lower_runplan
    from xdsl.context import Context

    from tests.conftest import REPO, STORIES

    pool = load_pool_toml(REPO / "examples" / "pool-2.toml")
    module = plan_run(read_model_facts(STORIES), RuntimeConfig(max_seq_len=64), pool, 2)
    text = str(module)

    def no_spec(*_a, **_k):
        raise AssertionError("a RunPlanSpec was built from the IR")

    monkeypatch.setattr(RunPlanSpec, "__init__", no_spec)
    parsed = parse_module(register_pipeplan(Context()), text)
    verify_runplan(parsed)
    assert len(project_provisions(parsed)) == 2
    assert lower_runplan(single_plan(parsed), prompt_len=4).tasks()
    assert plan_request_keys(parsed, prompt_len=4)
    (tmp_path / "plan.mlir").write_text(text)
    compiled, runplan = compile_plan(tmp_path / "plan.mlir", pool=None)
    assert runplan.sym_name == single_plan(parsed).sym_name and compiled.ops
