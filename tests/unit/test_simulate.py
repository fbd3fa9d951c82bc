"""Timing projection and discrete-event simulation on small hand-made concrete plans (AB-T-1, AB-T-2)."""

from __future__ import annotations

import dataclasses

import pytest
from pipeplan.analysis.simulate import SimulationError, build_model, project, run_schedule, simulate
from pipeplan.dialects.cplan import (
    Alloc,
    Command,
    CommandOp,
    Device,
    Lineage,
    Link,
    PlanOp,
    Queue,
    QueueSchedule,
    Sync,
    build_plan,
)
from xdsl.utils.exceptions import VerifyException


def _cmd(cid, op, dev, eng, deps, reads, writes, dur, link="", status="direct", edge=""):
    lineage = Lineage("decode", {"d0": 0, "d1": 1}[dev], -1, f"edge:{edge}" if edge else cid, edge)
    return Command(f"cmd.{cid}", cid, op, f"vq.{op}", dev, eng, tuple(f"cmd.{d}" for d in deps), reads, writes,
                   lineage, "roofline", status, dur, link)


def _parts() -> dict:
    """build_plan's records of :func:`_plan`."""
    return _PARTS


def _plan(**changed) -> PlanOp:
    """:func:`_records` with ``changed`` records, as a ``cplan.plan`` op."""
    return build_plan(**{**_parts(), **changed})


def _records() -> dict:
    """Two stages on two devices: recv(in) -> k0 -> send(e1, link) -> recv(e1) -> k1 -> send(out); plus k0b
    on device 0's compute queue after k0 (a second kernel competing for the queue)."""
    allocs = tuple(Alloc(f"alloc.{n}", n, d, "device", 0, 64, 64, life) for n, d, life in [
        ("edge.e0", "d0", "edge"), ("edge.e1", "d0", "edge"), ("edge.e2", "d1", "edge"),
        ("decode.s0.input", "d0", "transient"), ("decode.s0.output", "d0", "transient"), ("decode.s0.x", "d0", "transient"),
        ("decode.s1.input", "d1", "transient"), ("decode.s1.output", "d1", "transient")])
    a = {x.source: x.id for x in allocs}
    cmds = (
        _cmd("decode.s0.recv.e0", "recv", "d0", "copy", [], (a["edge.e0"],), (a["decode.s0.input"],), 1.0,
             edge="e0"),
        _cmd("decode.s0.k0", "matmul", "d0", "compute", ["decode.s0.recv.e0"], (a["decode.s0.input"],), (a["decode.s0.output"],), 2.0),
        _cmd("decode.s0.k0b", "add", "d0", "compute", ["decode.s0.recv.e0"], (a["decode.s0.input"],), (a["decode.s0.x"],), 3.0),
        _cmd("decode.s0.send.e1", "send", "d0", "copy", ["decode.s0.k0"], (a["decode.s0.output"],), (a["edge.e1"],), 1.0,
             link="l01", edge="e1"),
        _cmd("decode.s1.recv.e1", "recv", "d1", "copy", ["decode.s0.send.e1"], (a["edge.e1"],), (a["decode.s1.input"],), 1.0,
             edge="e1"),
        _cmd("decode.s1.k1", "matmul", "d1", "compute", ["decode.s1.recv.e1"], (a["decode.s1.input"],), (a["decode.s1.output"],), 4.0),
        _cmd("decode.s1.send.e2", "send", "d1", "copy", ["decode.s1.k1"], (a["decode.s1.output"],), (a["edge.e2"],), 1.0,
             edge="e2"),
    )
    q = QueueSchedule((Queue("d0", "copy", ("cmd.decode.s0.recv.e0", "cmd.decode.s0.send.e1")),
                       Queue("d0", "compute", ("cmd.decode.s0.k0b", "cmd.decode.s0.k0")),
                       Queue("d1", "copy", ("cmd.decode.s1.recv.e1", "cmd.decode.s1.send.e2")),
                       Queue("d1", "compute", ("cmd.decode.s1.k1",))))
    syncs = (Sync("cmd.decode.s0.recv.e0", "cmd.decode.s0.k0b"), Sync("cmd.decode.s0.k0", "cmd.decode.s0.send.e1"),
             Sync("cmd.decode.s0.send.e1", "cmd.decode.s1.recv.e1"), Sync("cmd.decode.s1.recv.e1", "cmd.decode.s1.k1"),
             Sync("cmd.decode.s1.k1", "cmd.decode.s1.send.e2"))
    devs = (Device("d0", (("device", 1 << 20),), (("copy", 1), ("compute", 1))),
            Device("d1", (("device", 1 << 20),), (("copy", 1), ("compute", 1))))
    return dict(binder="list-schedule", target="t", deployment="dep", evidence="roofline@r1", risk="strict",
                source="sha256:0", devices=devs, links=(Link("l01", "d0", "d1", 64),), allocs=allocs, commands=cmds,
                syncs=syncs, extension=q)


_PARTS = _records()


def test_projection_intervals_contention_critical_path():
    """AB-T-1: start/end by hand (queue order puts k0b before k0: k0 waits 3 s for the queue), makespan,
    critical path through the contended queue, uncertainty bounds from roofline confidence 0.5."""
    pr = project(build_model(_plan()), ("decode",))
    by = {pr.model.commands[iv.node.cmd].id: iv for iv in pr.intervals}
    assert (by["cmd.decode.s0.k0b"].start, by["cmd.decode.s0.k0b"].end) == (1.0, 4.0)
    k0 = by["cmd.decode.s0.k0"]
    assert (k0.start, k0.end, k0.contention) == (4.0, 6.0, 3.0)
    assert pr.makespan == 13.0 and pr.contended == 1
    assert (pr.lo_makespan, pr.hi_makespan) == (6.5, 19.5)
    ids = [pr.model.commands[pr.graph.nodes[v].cmd].id for v in pr.critical_path]
    assert ids == ["cmd.decode.s0.recv.e0", "cmd.decode.s0.k0b", "cmd.decode.s0.k0", "cmd.decode.s0.send.e1",
                   "cmd.decode.s1.recv.e1", "cmd.decode.s1.k1", "cmd.decode.s1.send.e2"]


def test_simulation_matches_projection_and_emits_events():
    """AB-T-2: the DES of one instance gives the projection's intervals; every command has one start and
    one end event and every sync one signal and one wait."""
    m = build_model(_plan())
    pr, sim = project(m, ("decode",)), simulate(m, ("decode",))
    assert [(i.start, i.end) for i in pr.intervals] == [(i.start, i.end) for i in sim.intervals]
    kinds = [e.kind for e in sim.events]
    assert kinds.count("start") == kinds.count("end") == 7
    assert kinds.count("signal") == kinds.count("wait") == 5
    assert [e.time for e in sim.events] == sorted(e.time for e in sim.events)


def test_decode_repeats_with_token_loop_and_pipeline_overlap():
    """AB-T-2: K decode instances; instance i+1's token-in recv waits for instance i's token-out send, so
    the per-token period is the makespan of one token; stage 0's queue is free while stage 1 works."""
    m = build_model(_plan())
    sim = simulate(m, run_schedule(m, 0, 3))
    ends = {}
    for iv in sim.intervals:
        ends[iv.node.iteration] = max(ends.get(iv.node.iteration, 0.0), iv.end)
    assert ends == {0: 13.0, 1: 26.0, 2: 39.0}
    starts = [iv.start for iv in sim.intervals if sim.model.commands[iv.node.cmd].id == "cmd.decode.s0.recv.e0"]
    assert starts == [0.0, 13.0, 26.0]


def test_link_is_a_shared_resource():
    """AB-T-1, AB-T-2: contention on links: two sends on one link in one instance serialize (FIFO)."""
    cmds = list(_parts()["commands"])
    cmds[6] = dataclasses.replace(cmds[6], link="l01")
    sim = simulate(build_model(_plan(commands=tuple(cmds))), ("decode", "decode"))
    uses = sorted((iv.start, iv.end) for iv in sim.intervals if sim.model.commands[iv.node.cmd].link)
    assert all(a[1] <= b[0] for a, b in zip(uses, uses[1:]))


def test_deadlock_and_unknown_step_are_typed_errors():
    """A queue order contradicting a dependency deadlocks (SimulationError deadlock, naming commands); a command
    whose step is unknown is rejected (its ``#cplan.lineage`` verifier, at parse)."""
    q = _parts()["extension"].queues
    bad = QueueSchedule((Queue("d0", "copy", ("cmd.decode.s0.send.e1", "cmd.decode.s0.recv.e0")),) + q[1:])
    with pytest.raises(SimulationError) as ei:
        simulate(build_model(_plan(extension=bad)), ("decode",))
    assert ei.value.code == "deadlock" and "cmd.decode.s0" in ei.value.message
    with pytest.raises(SimulationError) as ei:
        project(build_model(_plan(extension=bad)), ("decode",))
    assert ei.value.code == "deadlock"
    cmds = _parts()["commands"]
    cmds = (dataclasses.replace(cmds[0], lineage=dataclasses.replace(cmds[0].lineage, step="warmup")),) + cmds[1:]
    with pytest.raises(VerifyException, match="lineage: unknown step 'warmup'"):
        _plan(commands=cmds).verify()  # the plan never reaches the model: parse runs this verifier
    with pytest.raises(SimulationError) as ei:
        simulate(build_model(_plan()), ("prefill",))
    assert ei.value.code == "bad_schedule"


def test_loop_edges_agree_with_the_plans_token_loop_dependency(stories_path):
    """AB-T-2: on stories260K over 2 stages (list-schedule), the plan states the token loop explicitly
    (decode token-in recv -> prefill token-out send; the other cross-step dependencies are KV-cache and
    edge-buffer hazards, all from decode to prefill); the model's loop sinks/sources are exactly the
    loop's two ends in each step, and a run of 2 prefill chunks + 3 decode tokens simulates without deadlock
    with each instance's commands in the plan's queue order."""
    from pipeplan.api import register_pipeplan, run_pipeline
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.plan_types import NodePool, NodeSpec, RuntimeConfig
    from pipeplan.transforms.convert_pplan_to_cplan import bind, problem_from_module
    from xdsl.context import Context

    pool = NodePool(tuple(NodeSpec(f"n{i}", 1 << 30, 2.0e10, 1.0e11, 1.0e9) for i in range(2)))
    mod = plan_run(read_model_facts(stories_path), RuntimeConfig(max_seq_len=64), pool, 2)
    run_pipeline(register_pipeplan(Context()), mod, "convert-runplan-to-pplan{prompt_len=4},pplan-legalize{target=virtual-queue},"
                 "pplan-select-implementations,pplan-resolve-costs{evidence=roofline}")
    plan = bind(problem_from_module(mod), "list-schedule").plan
    cmds = plan.ops_of(CommandOp)
    step = {c.id.data: c.task.data.split(".")[0] for c in cmds}
    cross = [(c.id.data, d.data) for c in cmds for d in c.deps if step[d.data] != step[c.id.data]]
    assert ("cmd.decode.s0.recv.e0", "cmd.prefill.s1.send.e2") in cross
    assert all(step[c] == "decode" and step[d] == "prefill" for c, d in cross)
    model = build_model(plan)
    ids = [c.id for c in model.commands]
    assert {ids[i] for i in model.loop_sinks} == {"cmd.prefill.s0.recv.e0", "cmd.decode.s0.recv.e0"}
    assert {ids[i] for i in model.loop_sources} == {"cmd.prefill.s1.send.e2", "cmd.decode.s1.send.e2"}
    sim = simulate(model, run_schedule(model, prompt_chunks=2, decode_tokens=3))
    assert len(sim.intervals) == 2 * sum(s == "prefill" for s in step.values()) + 3 * sum(s == "decode" for s in step.values())
