"""ConcretePlanIR: binders, the seven construction invariants, commit gate and relation invariants
on a small hand-made portable problem (seeds/003). Each negative test breaks a good plan in exactly
one way and checks the violation names the invariant, the code and the commands/buffers involved."""

from __future__ import annotations

from dataclasses import replace

import pytest
from pipeplan.analysis.memplan import align_up, linear_offsets
from pipeplan.analysis.schedule import BufferNode, Problem, TaskNode
from pipeplan.dialects.cplan import (
    ConcretePlan,
    CplanError,
    Device,
    Link,
    Queue,
    QueueSchedule,
    SlotDataflow,
    plan_from_ir,
    plan_to_ir,
)
from pipeplan.transforms.convert_pplan_to_cplan import bind
from pipeplan.transforms.cplan_verify import check_invariants, commit_gate, relation_violations, verify_plan


def _task(tid, op, dev, deps, reads, writes, engine="compute", status="direct", link="", dur=1e-6):
    return TaskNode(tid, op, dev, engine, f"vq.{op}", tuple(deps), tuple(reads), tuple(writes),
                    None if status == "missing" else dur, "roofline", status, f"stage {dev} {tid}",
                    (f"vq.{op}",), link)


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
def good(request, prob) -> ConcretePlan:
    return bind(prob, request.param).plan


def codes(vs, inv):
    return {v.code for v in vs if v.invariant == inv}


def test_good_plans_pass_everything(good, prob):
    """AB-S-1..7, AB-R-5, AB-R-6: every binder's plan passes all verifiers and survives IR round trip."""
    assert verify_plan(good, prob) == []
    op = plan_to_ir(good)
    op.verify()
    assert plan_from_ir(op) == good


def test_reference_binders_identity_topology_and_bindings(prob):
    """AB-R-1, AB-R-2, AB-R-4: 1:1 task->command, same deps and buffer uses, impl/placement from bindings."""
    for binder in ("reference-queue", "reference-slot"):
        plan = bind(prob, binder).plan
        assert [c.task for c in plan.commands] == [t.id for t in prob.tasks]
        allocs = {a.id: a.source for a in plan.allocs}
        for c, t in zip(plan.commands, prob.tasks):
            assert [d.removeprefix("cmd.") for d in c.deps] == list(t.deps)
            assert [allocs[r] for r in c.reads] == list(t.reads) and [allocs[w] for w in c.writes] == list(t.writes)
            assert (c.implementation, c.device, c.engine) == (t.implementation, t.device, t.engine)


def test_reference_linear_allocation_formula(prob):
    """AB-R-3: offset_0 = 0; bound_i = align_up(offset_i, align_i); offset_(i+1) = bound_i + size_i."""
    plan = bind(prob, "reference-queue").plan
    d0 = [a for a in plan.allocs if (a.device, a.space) == ("d0", "device")]
    off = 0
    for a in d0:
        assert a.offset == align_up(off, a.alignment)
        off = a.offset + a.size
    assert linear_offsets([(10, 1), (5, 8), (3, 64)]) == ([0, 16, 64], 67)


def test_queue_and_slot_extensions_differ(prob):
    """AB-R-7: the two reference binders map the same input into different typed extensions, both gated."""
    q, s = bind(prob, "reference-queue").plan, bind(prob, "reference-slot").plan
    assert isinstance(q.extension, QueueSchedule) and isinstance(s.extension, SlotDataflow)
    assert q.commands == s.commands and q.allocs == s.allocs
    assert commit_gate(q, prob) == [] and commit_gate(s, prob) == []
    assert "cplan.queue_schedule" in str(plan_to_ir(q)) and "cplan.slot_dataflow" in str(plan_to_ir(s))


# --------------------------------------------------------------------------- one negative per invariant
def _qplan(prob):
    return bind(prob, "reference-queue").plan


def test_s1_unknown_dependency_and_cycle(prob):
    """AB-S-1: a dependency naming no command, and a dependency cycle, are rejected with lineage."""
    p = _qplan(prob)
    cmds = list(p.commands)
    cmds[1] = replace(cmds[1], deps=("cmd.t0", "cmd.nope"))
    vs = check_invariants(replace(p, commands=tuple(cmds)))
    assert "unknown_dependency" in codes(vs, "AB-S-1")
    cmds = list(p.commands)
    cmds[0] = replace(cmds[0], deps=("cmd.t1",))
    vs = check_invariants(replace(p, commands=tuple(cmds)))
    cyc = [v for v in vs if v.code == "dependency_cycle"]
    assert cyc and "'cmd.t0' (stage d0 t0)" in cyc[0].message and "'cmd.t1'" in cyc[0].message


def test_ir_references_are_ssa_uses(prob):
    """AB-S-1, AB-S-4 (issue 13 item 1): in IR a dependency is a timepoint operand, so a value-form plan naming
    an unknown command or allocation has no IR (CplanError); a dependency on a later command becomes a forward
    use, which round-trips and which the on-parse verifier rejects as the cycle it closes, at a command."""
    from pipeplan.dialects.cplan import CommandOp, CplanError
    from pipeplan.dialects.diagnostics import IRVerifyError

    p = _qplan(prob)
    cmds = list(p.commands)
    cmds[1] = replace(cmds[1], deps=("cmd.t0", "cmd.nope"))
    with pytest.raises(CplanError, match="unknown command 'cmd.nope'"):
        plan_to_ir(replace(p, commands=tuple(cmds)))
    cmds = list(p.commands)
    cmds[1] = replace(cmds[1], reads=("alloc.nope",))
    with pytest.raises(CplanError, match="unknown allocation 'alloc.nope'"):
        plan_to_ir(replace(p, commands=tuple(cmds)))
    cmds = list(p.commands)
    cmds[0] = replace(cmds[0], deps=("cmd.t1",))
    cyclic = replace(p, commands=tuple(cmds))
    op = plan_to_ir(cyclic)
    assert plan_from_ir(op) == cyclic
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
    q = plan.extension.queues
    swapped = tuple(Queue(x.device, x.engine, tuple(reversed(x.order))) if x.engine == "compute" else x for x in q)
    vs = check_invariants(replace(plan, extension=QueueSchedule(swapped)))
    dl = [v for v in vs if v.code == "deadlock"]
    assert dl and dl[0].invariant == "AB-S-2" and "'cmd.a'" in dl[0].message and "'cmd.c'" in dl[0].message


def test_s2_dropped_wait(prob):
    """AB-S-2: dropping the signal/wait edge of a cross-queue dependency leaves it unenforced."""
    p = _qplan(prob)
    assert p.syncs
    vs = check_invariants(replace(p, syncs=p.syncs[1:]))
    bad = [v for v in vs if v.code == "unenforced_dependency"]
    assert bad and p.syncs[0].signal in bad[0].message and p.syncs[0].wait in bad[0].message


def test_s2_slot_firing_rule_missing_input(prob):
    """AB-S-2: a slot firing rule that omits a same-slot dependency leaves it unenforced."""
    p = bind(prob, "reference-slot").plan
    fires = tuple(replace(f, after=()) if f.command == "cmd.t1" else f for f in p.extension.fires)
    vs = check_invariants(replace(p, extension=SlotDataflow(p.extension.slots, fires)))
    assert "unenforced_dependency" in codes(vs, "AB-S-2")


def test_s3_illegal_implementation_and_placement(prob):
    """AB-S-3: empty/generic implementation, unknown engine, unknown device are rejected."""
    p = _qplan(prob)
    cmds = list(p.commands)
    cmds[0] = replace(cmds[0], implementation="generic")
    cmds[3] = replace(cmds[3], engine="tensor")
    vs = check_invariants(replace(p, commands=tuple(cmds)))
    assert {"no_implementation", "unknown_engine"} <= codes(vs, "AB-S-3")
    assert any("'cmd.t3' (stage d1 t3)" in v.message for v in vs if v.code == "unknown_engine")


def test_s4_lifetime_does_not_cover_consumer(prob):
    """AB-S-4: a transient read with no producer ordered before it, and an access on another device."""
    p = _qplan(prob)
    cmds = list(p.commands)
    cmds[0] = replace(cmds[0], writes=())
    vs = check_invariants(replace(p, commands=tuple(cmds)))
    gap = [v for v in vs if v.code == "lifetime_gap"]
    assert gap and "alloc.a" in gap[0].message and "'cmd.t1'" in gap[0].message
    cmds = list(p.commands)
    cmds[3] = replace(cmds[3], reads=("alloc.b",))
    assert "buffer_placement" in codes(check_invariants(replace(p, commands=tuple(cmds))), "AB-S-4")


def test_s5_overlapping_live_allocations(prob):
    """AB-S-5: two transients accessed by the same command placed at overlapping offsets."""
    p = bind(prob, "list-schedule").plan
    allocs = {a.id: a for a in p.allocs}
    moved = tuple(replace(a, offset=allocs["alloc.a"].offset) if a.id == "alloc.b" else a for a in p.allocs)
    vs = check_invariants(replace(p, allocs=moved))
    bad = [v for v in vs if v.invariant == "AB-S-5"]
    assert bad and "alloc.a" in bad[0].message and "alloc.b" in bad[0].message and "cmd.t1" in bad[0].message


def test_s5_persistent_never_shared(prob):
    """AB-S-5: a weight overlapping a transient is rejected (weights are live for the whole plan)."""
    p = _qplan(prob)
    w = next(a for a in p.allocs if a.id == "alloc.w")
    moved = tuple(replace(a, offset=w.offset) if a.id == "alloc.a" else a for a in p.allocs)
    vs = check_invariants(replace(p, allocs=moved))
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
    assert plan.allocs[0].offset != plan.allocs[1].offset  # the planner did not share them
    shared = (plan.allocs[0], replace(plan.allocs[1], offset=plan.allocs[0].offset))
    assert "unsafe_reuse" in codes(check_invariants(replace(plan, allocs=shared)), "AB-S-5")


def test_s6_capacity(prob):
    """AB-S-6: memory-space capacity, engine slots and link capacity."""
    p = _qplan(prob)
    small = tuple(replace(d, capacities=(("device", 500), ("link", 1 << 20))) if d.id == "d0" else d
                  for d in p.devices)
    vs = check_invariants(replace(p, devices=small))
    cap = [v for v in vs if v.code == "capacity_exceeded"]
    assert cap and "device 'd0'" in cap[0].message and "alloc.w" in cap[0].message
    p2 = replace(p, links=(Link("l0", "d0", "d1", 10),))
    assert "link_capacity" in codes(check_invariants(p2), "AB-S-6")
    q = p.extension.queues
    p3 = replace(p, extension=QueueSchedule(q + (Queue("d1", "compute", ()),)))
    assert codes(check_invariants(p3), "AB-S-6") or codes(check_invariants(p3), "AB-S-2")


def test_s7_cost_not_covered(prob):
    """AB-S-7: a fallback cost under the strict risk policy is rejected by the verifier and the binder."""
    p = _qplan(prob)
    cmds = tuple(replace(c, status="fallback") if c.id == "cmd.t1" else c for c in p.commands)
    vs = check_invariants(replace(p, commands=cmds))
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


def test_commit_gate_detects_tampering(prob):
    """AB-R-5: a changed offset, lineage or extension differs from the rebuild."""
    p = bind(prob, "list-schedule").plan
    assert commit_gate(p, prob) == []
    cmds = tuple(replace(c, lineage="elsewhere") if c.id == "cmd.t0" else c for c in p.commands)
    vs = commit_gate(replace(p, commands=cmds), prob)
    assert vs and vs[0].code == "commit_gate_mismatch" and "task lineage" in vs[0].message
    vs = commit_gate(replace(p, extension=QueueSchedule(p.extension.queues[::-1])), prob) + \
        commit_gate(replace(p, allocs=p.allocs[::-1]), prob)
    assert any(v.message.startswith("typed extension differs") for v in vs)
    assert any("allocation (source-buffer identity" in v.message for v in vs)


def test_relation_invariants(prob):
    """AB-R-6: buffer capacity/alignment, op identity, dependency correspondence, access, target ABI."""
    p = _qplan(prob)
    allocs = tuple(replace(a, size=10) if a.id == "alloc.b" else a for a in p.allocs)
    cmds = tuple(replace(c, op="matmul", deps=(), implementation="vq.other") if c.id == "cmd.t3" else c
                 for c in p.commands)
    vs = relation_violations(replace(p, allocs=allocs, commands=cmds, target="other@1"), prob)
    got = {v.code for v in vs}
    assert {"buffer_capacity", "operation_identity", "dependency_correspondence", "target_abi"} <= got
    cmds = tuple(replace(c, reads=()) if c.id == "cmd.t1" else c for c in p.commands)
    assert "buffer_access" in {v.code for v in relation_violations(replace(p, commands=cmds), prob)}
