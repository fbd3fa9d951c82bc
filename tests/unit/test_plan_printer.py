"""PlanPrinter (dialects/printing.py) prints exactly what xDSL's Printer prints, string escapes included."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from pipeplan.dialects.printing import print_ir
from xdsl.dialects import test as xdsl_test
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr
from xdsl.printer import Printer


def _xdsl(op, generic: bool = False) -> str:
    buf = io.StringIO()
    Printer(stream=buf, print_generic_format=generic).print_op(op)
    return buf.getvalue()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=12), max_size=4))
def test_string_literals_print_as_xdsl_prints_them(strings):
    """Any string (quotes, backslashes, control and non-ASCII characters): the same text as xDSL's Printer,
    custom and generic form."""
    op = ModuleOp([xdsl_test.TestOp(attributes={"s": ArrayAttr([StringAttr(x) for x in strings])})])
    assert print_ir(op) == _xdsl(op)
    assert print_ir(op, generic=True) == _xdsl(op, generic=True)


def test_stories_plan_after_costs_prints_as_xdsl_prints_it():
    """The stories260K 2-stage portable plan after cost resolution (ids, lineage, tensor names): the same
    text with either printer, and it parses back."""
    from pipeplan.api import parse_module, register_pipeplan, run_pipeline
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run_spec
    from pipeplan.plan_types import NodePool, NodeSpec, RuntimeConfig
    from pipeplan.transforms.convert_runplan_to_pplan import build_portable_plan, deployment_for
    from xdsl.context import Context

    from tests.conftest import STORIES

    pool = NodePool(tuple(NodeSpec(f"n{i}", 8 * 10**9, 2.0e10, 1.0e11, 1.0e9) for i in range(2)))
    spec = plan_run_spec(read_model_facts(STORIES), RuntimeConfig(max_seq_len=64), pool, 2)
    module = ModuleOp([build_portable_plan(spec, prompt_len=4), deployment_for(spec, pool).to_op()])
    ctx = register_pipeplan(Context())
    run_pipeline(ctx, module, "pplan-legalize{target=virtual-queue},pplan-select-implementations,"
                              "pplan-resolve-costs{evidence=roofline}")
    text = print_ir(module)
    assert text == _xdsl(module) and len(text) > 10_000
    assert print_ir(parse_module(ctx, text)) == text
