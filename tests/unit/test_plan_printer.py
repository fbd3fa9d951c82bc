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


_KEYS = st.one_of(st.sampled_from(["id", "a_b", "x.y", "1st", "has space", 'q"uote', "back\\slash", "é"]),
                  st.text(max_size=6))


def _values():
    from xdsl.dialects.builtin import (
        DenseArrayBase,
        DictionaryAttr,
        FloatAttr,
        IndexType,
        IntegerAttr,
        IntegerType,
        Signedness,
        UnitAttr,
        f64,
        i1,
        i32,
        i64,
    )

    ints = st.sampled_from([i1, i32, i64, IndexType(), IntegerType(8, Signedness.SIGNED),
                            IntegerType(16, Signedness.UNSIGNED)])
    scalar = st.one_of(
        st.text(max_size=8).map(StringAttr),
        st.tuples(st.integers(-(2**31), 2**31 - 1), ints).map(
            lambda p: IntegerAttr(p[0] % 2 if p[1] == i1 else p[0] % 128 if p[1] == IntegerType(8, Signedness.SIGNED)
                                  else abs(p[0]) % 60000 if p[1] == IntegerType(16, Signedness.UNSIGNED) else p[0],
                                  p[1])),
        st.just(UnitAttr()),
        st.floats(allow_nan=False, width=32).map(lambda x: FloatAttr(x, f64)),
        st.lists(st.integers(-5, 5), max_size=3).map(lambda xs: DenseArrayBase.from_list(i64, xs)),
    )
    return st.recursive(scalar, lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(ArrayAttr),
        st.dictionaries(_KEYS, inner, max_size=3).map(DictionaryAttr)), max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_attribute_dictionaries_print_as_xdsl_prints_them(data):
    """Attribute dictionaries (PlanPrinter writes plain strings, builtin integers and unit attributes in one
    string): any keys (bare, quoted, escaped) and values (strings, i1/i32/i64/index/si8/ui16 integers, unit,
    floats, dense arrays, nested arrays and dictionaries) print as xDSL prints them, custom and generic."""
    attrs = data.draw(st.dictionaries(_KEYS, _values(), max_size=5))
    op = ModuleOp([xdsl_test.TestOp(attributes=attrs)])
    assert print_ir(op) == _xdsl(op)
    assert print_ir(op, generic=True) == _xdsl(op, generic=True)


def test_machine_program_prints_as_xdsl_prints_it(tmp_path):
    """The stories260K 2-stage vmachine program (attribute dictionaries of every vmachine op): the same text
    with either printer."""
    from pipeplan.api import register_pipeplan, run_pipeline
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.plan_types import RuntimeConfig
    from xdsl.context import Context

    from tests.conftest import STORIES
    from tests.unit.test_cplan_pipeline import _pool

    pool = _pool(tmp_path / "pool.toml", 2, 1 << 30)
    mod = plan_run(read_model_facts(STORIES), RuntimeConfig(max_seq_len=64), pool, 2)
    run_pipeline(register_pipeplan(Context()), mod,
                 f'convert-runplan-to-pplan{{pool="{tmp_path / "pool.toml"}" prompt_len=4}},'
                 f'pplan-legalize{{target=virtual-queue}},pplan-select-implementations,'
                 f'pplan-resolve-costs{{evidence=roofline}},convert-pplan-to-cplan{{binder=list-schedule}},'
                 f'convert-cplan-to-vmachine{{model="{STORIES}"}}')
    text = print_ir(mod)
    assert "vmachine.kernel" in text and text == _xdsl(mod)
    assert print_ir(mod, generic=True) == _xdsl(mod, generic=True)
