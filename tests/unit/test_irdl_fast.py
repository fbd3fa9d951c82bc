"""The precompiled IRDL acceptance test (:mod:`pipeplan.dialects.irdl_fast`): every pipeplan op class gets
it, and on the real pipeline's ops and on broken copies of them (wrong operand, result or property type,
missing or unknown property, bad segment sizes, extra block) the fast ``verify_`` raises exactly what
xDSL's generated ``verify_`` raises, or nothing where it raises nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from pipeplan.api import register_pipeplan, run_pipeline
from pipeplan.dialects import cplan, irdl_fast, pplan, runplan
from pipeplan.dialects import vmachine as vm
from pipeplan.dialects.diagnostics import PipeplanOp, verify_module
from pipeplan.frontend.gguf_facts import read_model_facts
from pipeplan.frontend.planner import plan_run
from pipeplan.plan_types import RuntimeConfig
from pipeplan.universe import PIPEPLAN_UNIVERSE
from xdsl.context import Context
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, ModuleOp, StringAttr, i32, i64
from xdsl.ir import Block, Operation, SSAValue
from xdsl.traits import IsolatedFromAbove
from xdsl.utils.exceptions import VerifyException

PIPE = ("convert-runplan-to-pplan{{pool=\"{pool}\" prompt_len=4}},pplan-legalize{{target=virtual-queue}},"
        "pplan-select-implementations,pplan-resolve-costs{{evidence=roofline}},"
        "convert-pplan-to-cplan{{binder=list-schedule keep_source=true}}")
VM = ",convert-cplan-to-vmachine{{model=\"{model}\"}}"


def _all_op_classes() -> list[type[Operation]]:
    return [op for f in PIPEPLAN_UNIVERSE.all_dialects.values() for op in f().operations]


def test_every_pipeplan_op_class_gets_the_fast_test():
    """Every op of pipeplan's dialects is a PipeplanOp whose definition the fast test handles."""
    for cls in _all_op_classes():
        assert issubclass(cls, PipeplanOp), cls.name
        irdl_fast.install(cls)
        assert irdl_fast.accept_of(cls) is not None, cls.name


@pytest.fixture(scope="module")
def modules(tmp_path_factory, stories_path) -> list[ModuleOp]:
    """The stories260K 2-stage plan as runplan, as pplan and cplan (``keep_source``), and as vmachine."""
    from tests.unit.test_cplan_pipeline import _pool

    d: Path = tmp_path_factory.mktemp("irdlfast")
    pool = _pool(d / "pool.toml", 2, 1 << 30)
    mods = []
    for passes in ("", PIPE.format(pool=d / "pool.toml"), (PIPE + VM).format(pool=d / "pool.toml", model=stories_path)):
        mod = plan_run(read_model_facts(stories_path), RuntimeConfig(max_seq_len=64), pool, 2)
        if passes:
            run_pipeline(register_pipeplan(Context()), mod, passes)
        verify_module(mod)
        mods.append(mod)
    return mods


def _outcome(verify, op: Operation) -> tuple[str, str] | None:
    try:
        verify(op)
    except Exception as e:  # noqa: BLE001  (any failure must be the same)
        return type(e).__name__, str(e)
    return None


def _same_as_xdsl(op: Operation) -> None:
    cls = type(op)
    fast = cls.__dict__["verify_"]
    xdsl = fast._pp_xdsl
    assert _outcome(fast, op) == _outcome(xdsl, op), op.name


def _other_value(op: Operation, v: SSAValue, values: list[SSAValue]) -> SSAValue | None:
    return next((w for w in values if w.type != v.type), None)


def _broken_copies(op: Operation, values: list[SSAValue]):
    """Copies of ``op`` with one IRDL-relevant thing wrong (and some still right)."""
    for name, value in op.properties.items():
        c = op.clone()
        c.properties[name] = IntegerAttr(7, i64) if isinstance(value, StringAttr) else StringAttr("x")
        yield c
        c = op.clone()
        del c.properties[name]
        yield c
    c = op.clone()
    c.properties["not_a_property"] = StringAttr("x")
    yield c
    c = op.clone()
    c.attributes["pplan.any"] = StringAttr("x")  # a discardable attribute: allowed by IRDL
    yield c
    for i, v in enumerate(op.operands):
        w = _other_value(op, v, values)
        if w is not None:
            c = op.clone()
            c.operands = [*c.operands[:i], w, *c.operands[i + 1:]]
            yield c
        c = op.clone()
        c.operands = [*c.operands[:i], *c.operands[i + 1:]]  # one fewer: segment sizes or count wrong
        yield c
    if values:
        c = op.clone()
        c.operands = [*c.operands, values[0]]
        yield c
    if "operandSegmentSizes" in op.properties:
        sizes = list(op.properties["operandSegmentSizes"].get_values())
        for bad in ([*sizes, 0], [-1, *sizes[1:]], [sizes[0] + 1, *sizes[1:]], [-1, sizes[0] + sizes[1] + 1, *sizes[2:]]):
            c = op.clone()
            c.properties["operandSegmentSizes"] = DenseArrayBase.from_list(i32, bad)
            yield c
        c = op.clone()
        c.properties["operandSegmentSizes"] = DenseArrayBase.from_list(i64, sizes)
        yield c
    for r in op.results:
        w = next((x for x in values if x.type != r.type), None)
        if w is not None:
            c = op.clone()
            c.results[r.index]._type = w.type  # pyright: ignore[reportPrivateUsage]
            yield c
    for i, region in enumerate(op.regions):
        c = op.clone()
        c.regions[i].add_block(Block())
        yield c
        if region.blocks:
            c = op.clone()
            c.regions[i].blocks[0].insert_arg(i64, 0)
            yield c


def test_fast_verify_matches_xdsl_on_real_and_broken_ops(modules):
    """On every op of the real pipeline (in place, with its parent) and on broken detached copies of one op
    of each kind, the fast ``verify_`` and xDSL's raise the same exception (type and message) or none."""
    seen: set[type[Operation]] = set()
    for mod in modules:
        values = [r for o in mod.walk() for r in o.results]
        for op in mod.walk():
            if not isinstance(op, PipeplanOp):
                continue
            irdl_fast.install(type(op))
            _same_as_xdsl(op)
            assert irdl_fast.accept_of(type(op))(op), op.name  # type: ignore[misc]
            if type(op) in seen or sum(1 for _ in op.walk()) > 200:
                continue
            seen.add(type(op))
            for c in _broken_copies(op, values):
                _same_as_xdsl(c)
    assert {pplan.TaskOp, cplan.CommandOp, vm.KernelOp, runplan.EdgeOp} <= seen


def _first(mod: ModuleOp, cls: type[Operation]) -> Operation:
    return next(o for o in mod.walk() if isinstance(o, cls))


@pytest.mark.parametrize("cls", [pplan.TaskOp, cplan.CommandOp, vm.KernelOp])
def test_module_verify_rejects_what_xdsl_rejects(modules, cls):
    """Through the cached module verification: a wrong property type, a missing property and a wrong
    operand type are rejected with xDSL's message; restored, the module verifies again."""
    mod = modules[2 if cls is vm.KernelOp else 1]
    op = _first(mod, cls)
    irdl_fast.install(cls)
    name = next(n for n, v in op.properties.items() if isinstance(v, IntegerAttr | StringAttr))
    saved = op.properties[name]
    op.properties[name] = StringAttr("x") if isinstance(saved, IntegerAttr) else IntegerAttr(1, i64)
    with pytest.raises(VerifyException, match=rf"{name}|should be of base attribute|Expected attribute"):
        verify_module(mod)
    del op.properties[name]
    with pytest.raises(VerifyException, match=rf"property '{name}' expected in operation '{cls.name}'"):
        verify_module(mod)
    op.properties[name] = saved
    verify_module(mod)
    v = op.operands[0]
    other = next(r for o in mod.walk() for r in o.results if type(r.type) is not type(v.type))
    op.operands = [other, *op.operands[1:]]
    with pytest.raises(VerifyException, match=r"operand '\w+' at positions? 0( to \d+)? does not verify"):
        verify_module(mod)
    op.operands = [v, *op.operands[1:]]
    verify_module(mod)


def test_segment_sizes_of_single_variadic_and_optional_groups():
    """A definition with a single, a variadic and an optional operand group (``AttrSizedOperandSegments``),
    and one with a variadic between singles (no segment sizes): for every split of 0..4 values into segment
    sizes (-1..3 each) and every typing, the fast test accepts exactly what xDSL's ``OpDef.verify`` accepts."""
    import itertools

    from xdsl.dialects.builtin import IndexType, IntegerType, i1
    from xdsl.dialects.test import TestOp
    from xdsl.irdl import (
        AttrSizedOperandSegments,
        IRDLOperation,
        irdl_op_definition,
        operand_def,
        opt_operand_def,
        prop_def,
        var_operand_def,
    )

    @irdl_op_definition
    class Segmented(IRDLOperation):
        name = "test.segmented"
        a = operand_def(IntegerType)
        b = var_operand_def(IndexType)
        c = opt_operand_def(IntegerType)
        irdl_options = (AttrSizedOperandSegments(as_property=True),)

    @irdl_op_definition
    class Between(IRDLOperation):
        name = "test.between"
        a = operand_def(IntegerType)
        b = var_operand_def(IndexType)
        c = operand_def(IntegerType)
        k = prop_def(IntegerAttr[IntegerType])

    ints = TestOp(result_types=[i1]).results[0]
    idx = TestOp(result_types=[IndexType()]).results[0]
    checked = 0
    for n in range(5):
        for vals in itertools.product((ints, idx), repeat=n):
            for sizes in itertools.product(range(-1, 4), repeat=3):
                op = Segmented.create(operands=vals, properties={
                    "operandSegmentSizes": DenseArrayBase.from_list(i32, sizes)})
                checked += _accepts_as_xdsl(op)
            op = Between.create(operands=vals, properties={"k": IntegerAttr(1, i1)})
            checked += _accepts_as_xdsl(op)
            op = Between.create(operands=vals, properties={"k": StringAttr("x")})
            checked += _accepts_as_xdsl(op)
    assert checked >= 10  # accepted cases among the ~1,000 checked


def _accepts_as_xdsl(op: Operation) -> int:
    """Assert the fast test accepts ``op`` exactly when xDSL's ``OpDef.verify`` does; 1 when it accepted."""
    accept = irdl_fast.compile_accept(type(op).get_irdl_definition())
    assert accept is not None
    try:
        type(op).get_irdl_definition().verify(op)
        ok = True
    except VerifyException:
        ok = False
    assert accept(op) == ok, (op.operand_types, op.properties)
    return int(ok)


def test_isolated_from_above_as_xdsl_checks_it():
    """``builtin.module`` (IsolatedFromAbove: the module walk of every verification between passes): on
    random nestings of ops, modules and blocks whose operands are defined inside, outside, by a sibling
    module or by the module itself, the fast ``verify_`` raises what xDSL's raises (or nothing)."""
    import random

    from xdsl.dialects.builtin import i32
    from xdsl.dialects.test import TestOp
    from xdsl.ir import Region

    irdl_fast.install(ModuleOp)
    rng = random.Random(7)
    outside = TestOp(result_types=[i32]).results[0]
    checked = failed = 0
    for _ in range(150):
        values: list[SSAValue] = [outside]

        def block(depth: int, values: list[SSAValue] = values) -> Block:
            b = Block(arg_types=[i32] * rng.randint(0, 1))
            values.extend(b.args)
            for _ in range(rng.randint(1, 3)):
                ops_in = [rng.choice(values)] if rng.random() < 0.7 else []
                if depth < 3 and rng.random() < 0.4:
                    inner = ModuleOp([]) if rng.random() < 0.5 else TestOp(regions=[Region(block(depth + 1, values))])
                    if isinstance(inner, ModuleOp):
                        inner.body.block.add_op(TestOp(operands=ops_in))
                        for _ in range(rng.randint(0, 2)):
                            inner.body.block.add_op(TestOp(operands=[rng.choice(values)], result_types=[i32]))
                    b.add_op(inner)
                else:
                    op = TestOp(operands=ops_in, result_types=[i32])
                    b.add_op(op)
                    values.extend(op.results)
            return b

        top = ModuleOp([])
        body = block(0)
        for op in list(body.ops):
            op.detach()
            top.body.block.add_op(op)
        for m in [top, *(o for o in top.walk() if isinstance(o, ModuleOp) and o is not top)]:
            out = _outcome(type(m).__dict__["verify_"], m)
            assert out == _outcome(type(m).__dict__["verify_"]._pp_xdsl, m)
            checked += 1
            failed += out is not None
            assert irdl_fast.isolated_ok(m) == (_outcome(lambda o: IsolatedFromAbove().verify(o), m) is None)
    assert checked > 150 and 0 < failed < checked
