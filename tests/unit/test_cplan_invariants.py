"""The concrete plan IR (``cplan``): binders, the seven construction invariants, commit gate and relation invariants
on a small hand-made portable problem (seeds/003). Each negative test breaks a good plan (the ``cplan.plan``
op a binder writes) in exactly one way, by editing its ops, and checks the violation names the invariant,
the code and the commands/buffers involved."""

from __future__ import annotations

from dataclasses import replace

import pytest
from pipeplan.analysis.memplan import align_up, linear_offsets
from pipeplan.analysis.schedule import BufferNode, Problem, TaskNode
from pipeplan.api import register_pipeplan
from pipeplan.dialects.carriers import i64_attr, string
from pipeplan.dialects.cplan import (
    AllocOp,
    Command,
    CommandOp,
    CplanError,
    Device,
    FireOp,
    Lineage,
    LineageAttr,
    Link,
    LinkOp,
    PlanOp,
    QueueOp,
    QueueScheduleOp,
    SlotDataflowOp,
    SlotOp,
    SyncOp,
    build_plan,
    command_name,
    command_op,
    cost_status_attr,
)
from pipeplan.dialects.diagnostics import parse_located
from pipeplan.transforms.convert_pplan_to_cplan import (
    _commands,
    _linear_allocs,
    _queues_in_order,
    _reduced_syncs,
    _topo,
    bind,
)
from pipeplan.transforms.cplan_verify import (
    check_invariants,
    commit_gate,
    op_key,
    relation_violations,
    verify_plan,
)
from xdsl.context import Context
from xdsl.dialects.builtin import DictionaryAttr, ModuleOp
from xdsl.printer import Printer


def _task(tid, op, dev, deps, reads, writes, engine="compute", status="direct", link="", dur=1e-6):
    return TaskNode(tid, op, dev, engine, f"vq.{op}", tuple(deps), tuple(reads), tuple(writes),
                    None if status == "missing" else dur, "roofline", status, f"stage {dev} {tid}",
                    (f"vq.{op}",), link, Lineage("decode", 0, -1, tid))


def problem(risk="strict", cap=1 << 20, status="direct") -> Problem:
    """d0: t0 -> t1 -> t2 (send over l0) ; d1: t3 (recv side compute) reading the edge object."""
    tasks = (
        _task("t0", "rms_norm", "d0", [], ["w"], ["a"]),
        _task("t1", "matmul", "d0", ["t0"], ["a", "w"], ["b"], status=status),
        _task("t2", "send", "d0", ["t1"], ["b"], ["e"], engine="copy", link="l0"),
        _task("t3", "add", "d1", ["t2"], ["e"], ["c"]),
        _task("t4", "add", "d0", ["t1"], ["b"], ["a2"]),
    )
    bufs = (
        BufferNode("w", "d0", "device", 1000, 64, "weight", "blk.0.w"),
        BufferNode("a", "d0", "device", 100, 64, "transient", "x"),
        BufferNode("b", "d0", "device", 300, 128, "transient", "y"),
        BufferNode("a2", "d0", "device", 100, 64, "transient", "z"),
        BufferNode("e", "d0", "link", 300, 64, "edge", "edge e1"),
        BufferNode("c", "d1", "device", 50, 32, "transient", "c"),
    )
    devs = (Device("d0", (("device", cap), ("link", cap)), (("compute", 1), ("copy", 1))),
            Device("d1", (("device", cap), ("link", cap)), (("compute", 1),)))
    return Problem(tasks, bufs, devs, (Link("l0", "d0", "d1", 4096),), "vq@1", "dep", "roofline@r1", risk, "sha256:x")


@pytest.fixture(scope="module")
def prob() -> Problem:
    return problem()


@pytest.fixture(scope="module", params=["reference-queue", "reference-slot", "list-schedule"])
def good(request, prob) -> PlanOp:
    return bind(prob, request.param).plan


def cmd(plan: PlanOp, cid: str) -> CommandOp:
    return next(c for c in plan.ops_of(CommandOp) if c.id.data == cid)


def alloc(plan: PlanOp, aid: str) -> AllocOp:
    return next(a for a in plan.ops_of(AllocOp) if a.id.data == aid)


def stray(cid: str) -> CommandOp:
    """A detached command (no op of the plan): a use of its timepoint names an unknown command."""
    return command_op(Command(cid, cid, "add", "vq.add", "d0", "compute", (), (), (), Lineage("decode", 0, -1, "stray"),
                              "roofline",
                              "direct", 1e-6), {})


def names(arr) -> list[str]:
    return [x.data for x in arr]


def text(op) -> str:
    from io import StringIO

    buf = StringIO()
    Printer(stream=buf).print_op(op)
    return buf.getvalue()


def parts(prob: Problem, commands=None) -> dict:
    """The reference-queue binder's decisions for ``prob`` as build_plan's keyword arguments (``commands``
    replaces the command records)."""
    _, topo = _topo(prob)
    return dict(binder="reference-queue", target=prob.target, deployment=prob.deployment, evidence=prob.evidence,
                risk=prob.risk, source=prob.source, devices=prob.devices, links=prob.links,
                allocs=_linear_allocs(prob), commands=_commands(prob) if commands is None else commands,
                syncs=_reduced_syncs(prob, topo), extension=_queues_in_order(prob, topo))


def codes(vs, inv):
    return {v.code for v in vs if v.invariant == inv}


def test_good_plans_pass_everything(good, prob):
    """AB-S-1..7, AB-R-5, AB-R-6: every binder's plan passes all verifiers and survives IR round trip."""
    assert verify_plan(good, prob) == []
    op = good.clone()
    op.verify()
    ctx = register_pipeplan(Context())
    back = parse_located(ctx, text(ModuleOp([op]))).ops.first
    back.verify()
    assert text(back) == text(op) and op_key(back) == op_key(good)


def test_reference_binders_identity_topology_and_bindings(prob):
    """AB-R-1, AB-R-2, AB-R-4: 1:1 task->command, same deps and buffer uses, impl/placement from bindings."""
    for binder in ("reference-queue", "reference-slot"):
        plan = bind(prob, binder).plan
        cmds = plan.ops_of(CommandOp)
        assert [c.task.data for c in cmds] == [t.id for t in prob.tasks]
        allocs = {a.id.data: a.source.data for a in plan.ops_of(AllocOp)}
        for c, t in zip(cmds, prob.tasks):
            assert [d.removeprefix("cmd.") for d in names(c.deps)] == list(t.deps)
            assert [allocs[r] for r in names(c.reads)] == list(t.reads)
            assert [allocs[w] for w in names(c.writes)] == list(t.writes)
            assert (c.impl.data, c.device.data, c.engine.data) == (t.implementation, t.device, t.engine)


def test_reference_linear_allocation_formula(prob):
    """AB-R-3: offset_0 = 0; bound_i = align_up(offset_i, align_i); offset_(i+1) = bound_i + size_i."""
    plan = bind(prob, "reference-queue").plan
    d0 = [a for a in plan.ops_of(AllocOp) if (a.device.data, a.space.data) == ("d0", "device")]
    off = 0
    for a in d0:
        assert a.offset.value.data == align_up(off, a.alignment.value.data)
        off = a.offset.value.data + a.size.value.data
    assert linear_offsets([(10, 1), (5, 8), (3, 64)]) == ([0, 16, 64], 67)


def test_queue_and_slot_extensions_differ(prob):
    """AB-R-7: the two reference binders map the same input into different typed extensions, both gated."""
    q, s = bind(prob, "reference-queue").plan, bind(prob, "reference-slot").plan
    assert isinstance(q.extension, QueueScheduleOp) and isinstance(s.extension, SlotDataflowOp)
    assert [op_key(c) for c in q.ops_of(CommandOp)] == [op_key(c) for c in s.ops_of(CommandOp)]
    assert [op_key(a) for a in q.ops_of(AllocOp)] == [op_key(a) for a in s.ops_of(AllocOp)]
    assert commit_gate(q, prob) == [] and commit_gate(s, prob) == []
    assert "cplan.queue_schedule" in text(q) and "cplan.slot_dataflow" in text(s)


# --------------------------------------------------------------------------- one negative per invariant
def _qplan(prob):
    return bind(prob, "reference-queue").plan


def test_s1_unknown_dependency_and_cycle(prob):
    """AB-S-1: a dependency naming no command, and a dependency cycle, are rejected with lineage."""
    p = _qplan(prob)
    cmd(p, "cmd.t1").set_operands(after=[cmd(p, "cmd.t0").done, stray("cmd.nope").done])
    vs = check_invariants(p)
    assert "unknown_dependency" in codes(vs, "AB-S-1")
    p = _qplan(prob)
    cmd(p, "cmd.t0").set_operands(after=[cmd(p, "cmd.t1").done])
    vs = check_invariants(p)
    cyc = [v for v in vs if v.code == "dependency_cycle"]
    assert cyc and "'cmd.t0' (model op t0 -> stage 0 (decode) -> task @t0 -> candidate vq." in cyc[0].message and "'cmd.t1'" in cyc[0].message


def test_ir_references_are_ssa_uses(prob):
    """AB-S-1, AB-S-4 (issue 13 item 1): in IR a dependency is a timepoint operand, so a value-form plan naming
    an unknown command or allocation has no IR (CplanError); a dependency on a later command becomes a forward
    use, which round-trips and which the on-parse verifier rejects as the cycle it closes, at a command."""
    from pipeplan.dialects.diagnostics import IRVerifyError

    cmds = list(_commands(prob))
    cmds[1] = replace(cmds[1], deps=("cmd.t0", "cmd.nope"))
    with pytest.raises(CplanError, match="unknown command 'cmd.nope'"):
        build_plan(**parts(prob, tuple(cmds)))
    cmds = list(_commands(prob))
    cmds[1] = replace(cmds[1], reads=("alloc.nope",))
    with pytest.raises(CplanError, match="unknown allocation 'alloc.nope'"):
        build_plan(**parts(prob, tuple(cmds)))
    cmds = list(_commands(prob))
    cmds[0] = replace(cmds[0], deps=("cmd.t1",))
    op = build_plan(**parts(prob, tuple(cmds)))
    printed = text(ModuleOp([op]))
    back = parse_located(register_pipeplan(Context()), printed).ops.first
    assert text(ModuleOp([back.clone()])) == printed and op_key(back) == op_key(op)
    first = next(o for o in op.body.block.ops if isinstance(o, CommandOp))
    assert [v.owner.id.data for v in first.groups()[2]] == ["cmd.t1"]
    with pytest.raises(IRVerifyError, match="dependency_cycle"):
        op.verify()


def test_s2_swapped_queue_order_deadlocks():
    """AB-S-2: a: Q1, b: Q2, c: Q1 with a->b->c; swapping Q1 to [c, a] makes a signal/wait cycle."""
    tasks = (_task("a", "add", "d0", [], [], ["x"]), _task("b", "add", "d0", ["a"], ["x"], ["y"], engine="copy"),
             _task("c", "add", "d0", ["b"], ["y"], ["z"]))
    bufs = tuple(BufferNode(n, "d0", "device", 8, 8, "transient") for n in "xyz")
    devs = (Device("d0", (("device", 1 << 20),), (("compute", 1), ("copy", 1))),)
    prob = Problem(tasks, bufs, devs, (), "vq@1", "dep", "ev", "strict", "s")
    plan = bind(prob, "reference-queue").plan
    assert check_invariants(plan) == []
    for q in plan.ops_of(QueueOp):
        if q.engine.data == "compute":
            q.operands = list(reversed(q.operands))
    vs = check_invariants(plan)
    dl = [v for v in vs if v.code == "deadlock"]
    assert dl and dl[0].invariant == "AB-S-2" and "'cmd.a'" in dl[0].message and "'cmd.c'" in dl[0].message


def test_s2_queue_and_slot_name_unknown_commands(prob):
    """AB-S-2: a queue or slot member that no command of the plan defines (a detached command's timepoint)
    is named, with the queue (device/engine) or slot, and the unit as subject."""
    p = _qplan(prob)
    q = p.ops_of(QueueOp)[0]
    q.operands = [*q.operands, stray("cmd.nope").done]
    hit = [v for v in check_invariants(p) if v.code == "unknown_command"]
    assert [(v.invariant, v.message, v.subject) for v in hit] == [
        ("AB-S-2", f"queue {q.device.data}/{q.engine.data} orders unknown command 'cmd.nope'", ("queue", 0))]
    p = bind(prob, "reference-slot").plan
    sl = p.ops_of(SlotOp)[0]
    sl.operands = [*sl.operands, stray("cmd.gone").done]
    hit = [v for v in check_invariants(p) if v.code == "unknown_command"]
    assert [(v.invariant, v.message, v.subject) for v in hit] == [
        ("AB-S-2", f"slot '{sl.id.data}' holds unknown command 'cmd.gone'", ("slot", 0))]


def test_s2_dropped_wait(prob):
    """AB-S-2: dropping the signal/wait edge of a cross-queue dependency leaves it unenforced."""
    p = _qplan(prob)
    syncs = p.ops_of(SyncOp)
    assert syncs
    signal, wait = command_name(syncs[0].signal), command_name(syncs[0].wait)
    syncs[0].detach()
    syncs[0].erase()
    vs = check_invariants(p)
    bad = [v for v in vs if v.code == "unenforced_dependency"]
    assert bad and signal in bad[0].message and wait in bad[0].message


def test_s2_slot_firing_rule_missing_input(prob):
    """AB-S-2: a slot firing rule that omits a same-slot dependency leaves it unenforced."""
    p = bind(prob, "reference-slot").plan
    for f in p.ops_of(FireOp):
        if f.command.data == "cmd.t1":
            f.operands = [f.cmd]
    vs = check_invariants(p)
    assert "unenforced_dependency" in codes(vs, "AB-S-2")


def test_s3_illegal_implementation_and_placement(prob):
    """AB-S-3: empty/generic implementation, unknown engine, unknown device are rejected."""
    p = _qplan(prob)
    cmd(p, "cmd.t0").properties["impl"] = string("generic")
    cmd(p, "cmd.t3").properties["engine"] = string("tensor")
    vs = check_invariants(p)
    assert {"no_implementation", "unknown_engine"} <= codes(vs, "AB-S-3")
    assert any("'cmd.t3' (model op t3 -> stage 0 (decode) -> task @t3 -> candidate vq." in v.message for v in vs if v.code == "unknown_engine")


def test_s4_lifetime_does_not_cover_consumer(prob):
    """AB-S-4: a transient read with no producer ordered before it, and an access on another device."""
    p = _qplan(prob)
    cmd(p, "cmd.t0").set_operands(outputs=[])
    vs = check_invariants(p)
    gap = [v for v in vs if v.code == "lifetime_gap"]
    assert gap and "alloc.a" in gap[0].message and "'cmd.t1'" in gap[0].message
    p = _qplan(prob)
    cmd(p, "cmd.t3").set_operands(inputs=[alloc(p, "alloc.b").result])
    assert "buffer_placement" in codes(check_invariants(p), "AB-S-4")


def test_s5_overlapping_live_allocations(prob):
    """AB-S-5: two transients accessed by the same command placed at overlapping offsets."""
    p = bind(prob, "list-schedule").plan
    alloc(p, "alloc.b").properties["offset"] = alloc(p, "alloc.a").offset
    vs = check_invariants(p)
    bad = [v for v in vs if v.invariant == "AB-S-5"]
    assert bad and "alloc.a" in bad[0].message and "alloc.b" in bad[0].message and "cmd.t1" in bad[0].message


def test_s5_persistent_never_shared(prob):
    """AB-S-5: a weight overlapping a transient is rejected (weights are live for the whole plan)."""
    p = _qplan(prob)
    alloc(p, "alloc.a").properties["offset"] = alloc(p, "alloc.w").offset
    vs = check_invariants(p)
    assert any("weight buffer is live for the whole plan" in v.message for v in vs if v.invariant == "AB-S-5")


def test_s5_reuse_needs_every_execution_not_one_schedule():
    """AB-S-5: x (on Q1) and y (on Q2) are never live together in the list schedule's timeline when
    one queue is slow, but nothing orders them, so sharing bytes is rejected."""
    tasks = (_task("a", "add", "d0", [], [], ["x"], dur=1.0), _task("b", "add", "d0", [], [], ["y"], engine="copy",
                                                                     dur=1e-9))
    bufs = (BufferNode("x", "d0", "device", 64, 64, "transient"), BufferNode("y", "d0", "device", 64, 64, "transient"))
    devs = (Device("d0", (("device", 1 << 20),), (("compute", 1), ("copy", 1))),)
    prob = Problem(tasks, bufs, devs, (), "vq@1", "dep", "ev", "strict", "s")
    plan = bind(prob, "list-schedule").plan
    a0, a1 = plan.ops_of(AllocOp)[:2]
    assert a0.offset != a1.offset  # the planner did not share them
    a1.properties["offset"] = a0.offset
    assert "unsafe_reuse" in codes(check_invariants(plan), "AB-S-5")


def test_s6_capacity(prob):
    """AB-S-6: memory-space capacity, engine slots and link capacity."""
    p = _qplan(prob)
    d0 = next(d for d in p.body.block.ops if d.name == "cplan.device" and d.id.data == "d0")
    d0.properties["capacity"] = DictionaryAttr({"device": i64_attr(500), "link": i64_attr(1 << 20)})
    vs = check_invariants(p)
    cap = [v for v in vs if v.code == "capacity_exceeded"]
    assert cap and "device 'd0'" in cap[0].message and "alloc.w" in cap[0].message
    p2 = _qplan(prob)
    p2.ops_of(LinkOp)[0].properties["capacity"] = i64_attr(10)
    assert "link_capacity" in codes(check_invariants(p2), "AB-S-6")
    p3 = _qplan(prob)
    ext = p3.extension
    assert ext is not None
    ext.body.block.add_op(QueueOp.create(properties={"device": string("d1"), "engine": string("compute")}))
    assert codes(check_invariants(p3), "AB-S-6") or codes(check_invariants(p3), "AB-S-2")


def test_s7_cost_not_covered(prob):
    """AB-S-7: a fallback cost under the strict risk policy is rejected by the verifier and the binder."""
    p = _qplan(prob)
    cmd(p, "cmd.t1").properties["status"] = cost_status_attr("fallback")
    vs = check_invariants(p)
    assert [v.code for v in vs] == ["cost_not_covered"] and "'cmd.t1'" in vs[0].message
    with pytest.raises(CplanError) as ei:
        bind(problem(status="fallback"), "list-schedule")
    assert ei.value.code == "cost_not_covered" and "t1" in ei.value.message
    assert verify_plan(bind(problem(status="fallback", risk="accept-fallback"), "list-schedule").plan) == []
    assert verify_plan(bind(problem(status="missing", risk="accept-missing"), "list-schedule").plan) == []


def test_binder_rejects_capacity_naming_device_peak_contributors():
    """AB-S-6: the production binder rejects a device over capacity naming device, peak and contributors."""
    with pytest.raises(CplanError) as ei:
        bind(problem(cap=1100), "list-schedule")
    e = ei.value
    assert e.code == "capacity_exceeded" and e.where == "d0"
    assert "device 'd0'" in e.message and "peak" in e.message and "'w' 1000 B weight (blk.0.w)" in e.message


def test_binder_missing_binding():
    """AB-R-4, AB-G-4: a task whose device the deployment does not declare is a diagnostic."""
    p = problem()
    bad = replace(p, tasks=p.tasks[:-1] + (replace(p.tasks[-1], device="d9"),))
    with pytest.raises(CplanError) as ei:
        bind(bad, "reference-queue")
    assert ei.value.code == "missing_binding" and "d9" in ei.value.message
    with pytest.raises(CplanError) as ei:
        bind(p, "nope")
    assert ei.value.code == "unsupported_binder"


def _reorder(ops: list, block, before=None) -> None:
    """Put ``ops`` (of ``block``) back into it in the given order, before ``before`` (at the end: None)."""
    for o in ops:
        o.detach()
    for o in ops:
        if before is None:
            block.add_op(o)
        else:
            block.insert_op_before(o, before)


def test_commit_gate_detects_tampering(prob):
    """AB-R-5: a changed offset, lineage or extension differs from the rebuild."""
    p = bind(prob, "list-schedule").plan
    assert commit_gate(p, prob) == []
    cmd(p, "cmd.t0").properties["lineage"] = LineageAttr("decode", 0, -1, "elsewhere")
    vs = commit_gate(p, prob)
    assert vs and vs[0].code == "commit_gate_mismatch" and "task lineage" in vs[0].message
    p = bind(prob, "list-schedule").plan
    ext = p.extension
    assert ext is not None
    _reorder(p.ops_of(QueueOp)[::-1], ext.body.block)
    p2 = bind(prob, "list-schedule").plan
    _reorder(p2.ops_of(AllocOp)[::-1], p2.body.block, before=p2.ops_of(CommandOp)[0])
    vs = commit_gate(p, prob) + commit_gate(p2, prob)
    assert any(v.message.startswith("typed extension differs") for v in vs)
    assert any("allocation (source-buffer identity" in v.message for v in vs)


def test_relation_invariants(prob):
    """AB-R-6: buffer capacity/alignment, op identity, dependency correspondence, access, target ABI."""
    p = _qplan(prob)
    alloc(p, "alloc.b").properties["size"] = i64_attr(10)
    t3 = cmd(p, "cmd.t3")
    t3.properties["op"], t3.properties["impl"] = string("matmul"), string("vq.other")
    t3.set_operands(after=[])
    p.properties["target"] = string("other@1")
    vs = relation_violations(p, prob)
    got = {v.code for v in vs}
    assert {"buffer_capacity", "operation_identity", "dependency_correspondence", "target_abi"} <= got
    p = _qplan(prob)
    cmd(p, "cmd.t1").set_operands(inputs=[])
    assert "buffer_access" in {v.code for v in relation_violations(p, prob)}
