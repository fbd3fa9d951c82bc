"""Edge transports: shared-memory rings (cross-process) and in-process queues, plus edge routing."""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
import pickle
import statistics
import time

import numpy as np
import pytest
from pipeplan.plan_types import ObjectSpec, RingSpec
from pipeplan.runtime.shm_ring import (
    SPIN_S,
    SPIN_SHORT_S,
    ShmTransport,
    announce_default,
    announce_for,
    echo_loop,
    spin_budget,
)
from pipeplan.runtime.transport import (
    DATA,
    MAX_SEGMENTS,
    RESET,
    SHUTDOWN,
    EdgeRoute,
    EndpointError,
    Frame,
    InprocTransport,
    ObjectSpecError,
    ObjectTooLargeError,
    SamplerParams,
    Segment,
    routes_from_provisions,
)

HIDDEN, MAX_SEQ = 64, 16
ACT = ObjectSpec("activation", "f32", 4, (MAX_SEQ, HIDDEN), "row_major", 64, MAX_SEQ * HIDDEN * 4)
TOK = ObjectSpec("token", "i32", 4, (MAX_SEQ,), "row_major", 64, MAX_SEQ * 4)


def _routes(slots: int = 2) -> dict[str, EdgeRoute]:
    return {
        "e0": EdgeRoute("e0", "token_in", "orchestrator", "n1", TOK, RingSpec(slots, TOK.max_extent)),
        "e1": EdgeRoute("e1", "activation", "n1", "orchestrator", ACT, RingSpec(slots, ACT.max_extent)),
    }


def _shm_names() -> set[str]:
    return set(os.listdir("/dev/shm"))


@pytest.fixture(params=["shm", "inproc"])
def transport(request):
    if request.param == "inproc":
        yield InprocTransport(_routes())
        return
    t = ShmTransport.create(_routes(), mp.get_context("spawn"))
    yield t
    t.unlink()


def test_roundtrip_every_frame_kind(transport):
    """DATA (int32 ids, float32 activations), RESET with sampler params and SHUTDOWN arrive intact."""
    tx0, rx0 = transport.open_send("n1", "e0"), transport.open_recv("n1", "e0")
    tx1, rx1 = transport.open_send("orchestrator", "e1"), transport.open_recv("orchestrator", "e1")
    ids = np.array([1, 403, 407, 261, 378], dtype=np.int32)
    act = np.random.default_rng(0).standard_normal((3, HIDDEN)).astype(np.float32)
    assert tx0.send(Frame(RESET, 7, 0, None, SamplerParams(0.7, 40, 0.9, 123)))
    assert tx0.send(Frame(DATA, 7, 0, ids))
    f = rx0.recv(timeout=1)
    assert (f.op, f.seq_id, f.sampler) == (RESET, 7, SamplerParams(0.7, 40, 0.9, 123))
    f = rx0.recv(timeout=1)
    assert (f.op, f.seq_id, f.position) == (DATA, 7, 0) and f.array.dtype == np.int32
    assert np.array_equal(f.array, ids)
    assert tx1.send(Frame(DATA, 7, 5, act))
    assert tx1.send(Frame(SHUTDOWN))
    f = rx1.recv(timeout=1)
    assert f.position == 5 and f.array.shape == (3, HIDDEN) and np.array_equal(f.array, act)
    assert rx1.recv(timeout=1).op == SHUTDOWN
    assert rx1.recv(timeout=0.01) is None


def test_segment_tables_roundtrip(transport):
    """RP-OS-1: a micro-batched DATA frame keeps its segment table (MAX_SEGMENTS segments with a payload of the
    full slot_bytes: the table does not take payload bytes), a one-sequence frame sent after it into the same
    ring slot comes back with ``segments`` None, and a table whose rows do not add up is refused at send."""
    tx, rx = transport.open_send("n1", "e0"), transport.open_recv("n1", "e0")
    ids = np.arange(MAX_SEQ, dtype=np.int32)
    segs = tuple(Segment(100 + i, i % 7, 3 * i, 1) for i in range(MAX_SEQ))
    assert tx.send(Frame(DATA, 100, 0, ids, None, 0, segs), timeout=1)
    f = rx.recv(timeout=1)
    assert f.segments == segs and all(type(s) is Segment for s in f.segments) and np.array_equal(f.array, ids)
    for _ in range(2):  # both ring slots once more: the second lands where the table was written
        assert tx.send(Frame(DATA, 5, 9, ids[:1], None, 3), timeout=1)
        f = rx.recv(timeout=1)
        assert (f.seq_id, f.position, f.slot, f.segments) == (5, 9, 3, None)
    act = np.random.default_rng(1).standard_normal((MAX_SEQ, HIDDEN)).astype(np.float32)
    with pytest.raises(ObjectSpecError, match="do not add up"):
        transport.open_send("orchestrator", "e1").send(Frame(DATA, 0, 0, act, None, 0, segs[:3]))
    assert transport.open_recv("orchestrator", "e1").recv(timeout=0.01) is None  # nothing was sent
    # a token edge of MAX_SEGMENTS ids: every row of the table, 64-bit positions
    wide = ObjectSpec("token", "i32", 4, (MAX_SEGMENTS,), "row_major", 64, MAX_SEGMENTS * 4)
    routes = {"w": EdgeRoute("w", "token_out", "n1", "orchestrator", wide, RingSpec(1, wide.max_extent))}
    other = InprocTransport(routes) if isinstance(transport, InprocTransport) else ShmTransport.create(routes)
    try:
        full = tuple(Segment(i, MAX_SEGMENTS - 1 - i, 2**40 + i, 1) for i in range(MAX_SEGMENTS))
        ids = np.arange(MAX_SEGMENTS, dtype=np.int32)
        assert other.open_send("orchestrator", "w").send(Frame(DATA, 0, 0, ids, None, 0, full), timeout=1)
        f = other.open_recv("orchestrator", "w").recv(timeout=1)
        assert f.segments == full and np.array_equal(f.array, ids)
        with pytest.raises(ObjectSpecError, match=f"{MAX_SEGMENTS + 1} segments"):
            other.open_send("orchestrator", "w").send(
                Frame(DATA, 0, 0, ids[:1], None, 0, full + (Segment(0, 0, 0, 1),)), timeout=1)
    finally:
        if isinstance(other, ShmTransport):
            other.unlink()


def test_back_pressure_bounds_objects_in_flight(transport):
    """RingSpec.slots bounds the objects in flight: with 2 slots a third send waits (times out) until the
    consumer frees a slot."""
    tx, rx = transport.open_send("n1", "e0"), transport.open_recv("n1", "e0")
    one = np.array([1], dtype=np.int32)
    assert tx.send(Frame(DATA, 0, 0, one), timeout=0.5)
    assert tx.send(Frame(DATA, 0, 1, one), timeout=0.5)
    t0 = time.monotonic()
    assert tx.send(Frame(DATA, 0, 2, one), timeout=0.1) is False
    assert time.monotonic() - t0 >= 0.09
    assert rx.recv(timeout=1).position == 0
    assert tx.send(Frame(DATA, 0, 2, one), timeout=0.5)
    assert [rx.recv(timeout=1).position for _ in range(2)] == [1, 2]


def test_oversized_or_mistyped_object_is_rejected_not_resized(transport):
    """An object larger than ObjectSpec.max_extent raises ObjectTooLargeError; a dtype or rank that does
    not match the ObjectSpec raises ObjectSpecError; nothing reaches the consumer."""
    tx, rx = transport.open_send("orchestrator", "e1"), transport.open_recv("orchestrator", "e1")
    with pytest.raises(ObjectTooLargeError) as e:
        tx.send(Frame(DATA, 0, 0, np.zeros((MAX_SEQ + 1, HIDDEN), np.float32)))
    assert e.value.code == "object_too_large" and "max_extent 4096" in e.value.message
    with pytest.raises(ObjectSpecError, match="dtype float64"):
        tx.send(Frame(DATA, 0, 0, np.zeros((1, HIDDEN), np.float64)))
    with pytest.raises(ObjectSpecError, match="rank 3"):
        tx.send(Frame(DATA, 0, 0, np.zeros((1, 1, HIDDEN), np.float32)))
    assert rx.recv(timeout=0.02) is None


def test_endpoints_resolve_by_node_and_edge_only(transport):
    """RP-PP-5, RP-PP-6: an endpoint is resolved by (consumer node_id, edge_id); a wrong node or an unknown
    edge is a typed EndpointError, never a guess."""
    with pytest.raises(EndpointError, match="consumed by node 'n1', not 'n2'"):
        transport.open_send("n2", "e0")
    with pytest.raises(EndpointError, match="consumed by node 'orchestrator'"):
        transport.open_recv("n1", "e1")
    with pytest.raises(EndpointError, match="unknown edge 'e9'"):
        transport.open_recv("n1", "e9")


def test_cross_process_ring_and_unlink():
    """Rings work across spawn-ed processes (echo through another process); the measured median hop is
    printed (target < 50 us, measured in bench/decode.py); unlink leaves no /dev/shm segment."""
    ctx = mp.get_context("spawn")
    before = _shm_names()
    t = ShmTransport.create(_routes(), ctx)
    names = set(t.segment_names())
    assert names <= _shm_names() - before and len(names) == 2
    p = ctx.Process(target=echo_loop, args=(t, "n1", "e0", "orchestrator", "e1"), daemon=True)
    try:
        p.start()  # e0 (i32) and e1 (f32) differ in dtype: echo control frames only here
        tx, rx = t.open_send("n1", "e0"), t.open_recv("orchestrator", "e1")
        for i in range(3):
            assert tx.send(Frame(RESET, i, 0, None, SamplerParams(seed=i)))
            f = rx.recv(timeout=30)
            assert f is not None and (f.op, f.seq_id, f.sampler.seed) == (RESET, i, i)
        assert tx.send(Frame(SHUTDOWN))
        assert rx.recv(timeout=10).op == SHUTDOWN
        p.join(10)
        assert p.exitcode == 0
    finally:
        if p.is_alive():
            p.kill()
        t.unlink()
    assert not (names & _shm_names())


def test_cross_process_activation_hop_latency():
    """An activation [1, 64] f32 goes write -> read in another process and back; data is bit-exact and
    the median hop (round trip / 2) is well under a millisecond here (target < 50 us: bench/decode.py)."""
    ctx = mp.get_context("spawn")
    routes = {
        "a": EdgeRoute("a", "activation", "orchestrator", "n1", ACT, RingSpec(2, ACT.max_extent)),
        "b": EdgeRoute("b", "activation", "n1", "orchestrator", ACT, RingSpec(2, ACT.max_extent)),
    }
    t = ShmTransport.create(routes, ctx)
    p = ctx.Process(target=echo_loop, args=(t, "n1", "a", "orchestrator", "b"), daemon=True)
    try:
        p.start()
        tx, rx = t.open_send("n1", "a"), t.open_recv("orchestrator", "b")
        x = np.random.default_rng(1).standard_normal((1, HIDDEN)).astype(np.float32)
        assert tx.send(Frame(DATA, 0, 0, x)) and np.array_equal(rx.recv(timeout=30).array, x)
        hops = []
        for i in range(300):
            t0 = time.perf_counter()
            tx.send(Frame(DATA, 0, i, x))
            f = rx.recv(timeout=5)
            hops.append((time.perf_counter() - t0) / 2)
            assert f.position == i
        med = statistics.median(hops)
        print(f"median shm hop: {med * 1e6:.1f} us")
        assert med < 1e-3
        tx.send(Frame(SHUTDOWN))
        rx.recv(timeout=5)
        p.join(10)
    finally:
        if p.is_alive():
            p.kill()
        t.unlink()


def _provisions(n: int):
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.frontend.pool import local_pool
    from pipeplan.plan_types import RuntimeConfig

    from tests.conftest import STORIES

    facts = read_model_facts(STORIES)
    return project_provisions(plan_run(facts, RuntimeConfig(max_seq_len=64), local_pool(n), n))


def test_routes_from_provisions_follow_the_plan():
    """RP-PP-3, RP-PP-4: each edge is routed from its producer's node to the consumer node_id named in
    the outbound provision; token-in comes from and token-out goes to the orchestrator."""
    ps = _provisions(3)
    routes = routes_from_provisions(ps)
    assert len(routes) == 4
    assert routes[ps[0].inbound.edge_id].producer_node == "orchestrator"
    assert routes[ps[0].inbound.edge_id].consumer_node == ps[0].node_id
    for a, b in zip(ps, ps[1:]):
        r = routes[a.outbound.edge_id]
        assert (r.producer_node, r.consumer_node, r.kind) == (a.node_id, b.node_id, "activation")
        assert r.object_spec == a.outbound.object_spec == b.inbound.object_spec
    assert routes[ps[-1].outbound.edge_id].consumer_node == "orchestrator"


def test_routes_reject_disagreeing_or_dangling_provisions():
    """Producer and consumer provisions of an edge must agree on specs and consumer node; an edge with a
    missing side is rejected (EndpointError)."""
    ps = _provisions(2)
    bad_ring = dataclasses.replace(ps[1].inbound, ring_spec=RingSpec(3, ps[1].inbound.ring_spec.slot_bytes))
    with pytest.raises(EndpointError, match="disagree"):
        routes_from_provisions([ps[0], dataclasses.replace(ps[1], inbound=bad_ring)])
    wrong_peer = dataclasses.replace(ps[0].outbound, peer_node_id="elsewhere")
    with pytest.raises(EndpointError, match="names consumer 'elsewhere'"):
        routes_from_provisions([dataclasses.replace(ps[0], outbound=wrong_peer), ps[1]])
    with pytest.raises(EndpointError, match="has no consumer"):
        routes_from_provisions([ps[0]])


def test_announce_then_send_delivers_in_order_and_keeps_back_pressure(transport):
    """RP-OS-1: an announced object (the producer posted the ring before writing it) is delivered once, in
    order, with its bytes; a consumer that times out on an announced-but-unwritten object gets it on the
    next recv; an announcement takes a slot, so with 2 slots in flight a further announce is a no-op and
    the send waits for a free slot as before."""
    tx, rx = transport.open_send("orchestrator", "e1"), transport.open_recv("orchestrator", "e1")
    a = np.arange(HIDDEN, dtype=np.float32).reshape(1, HIDDEN)
    b = a + 1
    tx.announce()
    assert rx.recv(timeout=0.02) is None  # announced, not yet written: no frame, no error
    assert tx.send(Frame(DATA, 0, 5, a))
    f = rx.recv(timeout=1)
    assert f is not None and f.position == 5 and np.array_equal(f.array, a)
    tx.announce()
    assert tx.send(Frame(DATA, 0, 6, b))
    tx.announce()  # second object in flight
    assert tx.send(Frame(DATA, 0, 7, a))
    tx.announce()  # both slots are taken: nothing to announce
    assert not tx.send(Frame(DATA, 0, 8, b), timeout=0.05)
    got = [rx.recv(timeout=1), rx.recv(timeout=1)]
    assert [g.position for g in got] == [6, 7] and np.array_equal(got[0].array, b)
    assert rx.recv(timeout=0.02) is None


def _announce_and_die(t, edge):
    tx = t.open_send("orchestrator", edge)
    tx.announce()
    os._exit(0)  # a producer that dies between announcing and writing (a killed stage)


def test_announced_object_of_a_dead_producer_times_out_not_hangs():
    """Liveness under announcements (issue 3: a killed stage is a StageFault within 5 s, not a hang): when
    the producer process dies after announcing an object, the consumer's recv returns None at its
    timeout (so the orchestrator gets to check for the dead stage) instead of spinning forever."""
    ctx = mp.get_context("spawn")
    t = ShmTransport.create(_routes(), ctx)
    try:
        p = ctx.Process(target=_announce_and_die, args=(t, "e1"))
        p.start()
        p.join(30)
        rx = t.open_recv("orchestrator", "e1")
        t0 = time.perf_counter()
        assert rx.recv(timeout=0.2) is None
        assert 0.15 < time.perf_counter() - t0 < 5.0
    finally:
        t.unlink()


def test_spin_budget_is_long_only_when_busy_processes_fit_the_cores():
    """A consumer spins long (no wake-up per hop) only when the computing stages and spinning consumers
    (two per frame in flight, at most stages + orchestrator) fit the cores; else briefly, so it does not take
    a core from a computing stage (issue 14 throughput on 2 cores)."""
    assert spin_budget(1, 1, 2) == SPIN_S  # one stage + orchestrator on 2 cores
    assert spin_budget(3, 1, 2) == SPIN_S  # one frame in flight: one computes, one spins
    assert spin_budget(2, 2, 2) == SPIN_SHORT_S  # two frames: two compute and two spin on 2 cores
    assert spin_budget(3, 3, 4) == SPIN_S  # 3 stages + orchestrator on 4 cores
    assert spin_budget(8, 8, 4) == SPIN_SHORT_S
    assert SPIN_SHORT_S < SPIN_S
    for bad in ((0, 1, 2), (1, 0, 2), (1, 1, 0)):
        with pytest.raises(ValueError):
            spin_budget(*bad)


def test_only_spinning_consumers_are_announced_to(monkeypatch):
    """A producer announces (posts the ring before it computes) only to a consumer that spins for it: a consumer
    with the short spin would poll every 50 us for the whole step on a busy core, so it blocks on the ring's
    semaphore instead (issue 14 throughput on 2 cores); PIPEPLAN_RING_ANNOUNCE=0 turns announcing off for both."""
    assert announce_for(SPIN_SHORT_S) is False
    assert announce_for(SPIN_S) is announce_default()
    monkeypatch.setenv("PIPEPLAN_RING_ANNOUNCE", "0")
    assert announce_for(SPIN_S) is False


def test_ring_spin_travels_with_the_pickled_transport():
    """The spin the orchestrator chose reaches the stage process (rings are pickled into it)."""
    t = ShmTransport.create(_routes(), spin_s=SPIN_SHORT_S)
    try:
        other = pickle.loads(pickle.dumps(t))
        assert {r.spin_s for r in other.rings.values()} == {SPIN_SHORT_S}
        other.close()
    finally:
        t.unlink()
    t = ShmTransport.create(_routes())
    try:
        assert {r.spin_s for r in t.rings.values()} == {SPIN_S}  # default: the long spin
    finally:
        t.unlink()


def test_a_child_whose_parent_cleaned_up_ends_quietly(monkeypatch):
    """Interrupts: a process multiprocessing is still starting whose ring segment or semaphore the parent
    already removed (an interrupt's cleanup raced the start) ends with SystemExit(1), which the forkserver
    does not print as a traceback; anywhere else the same name is FileNotFoundError."""
    import multiprocessing

    from pipeplan.runtime import shm_ring

    gone = f"pipeplan-{os.getpid()}-gone-{os.urandom(4).hex()}"
    with pytest.raises(FileNotFoundError):
        shm_ring._open_semaphore("/" + gone)
    with pytest.raises(FileNotFoundError):
        shm_ring._attach(gone)
    monkeypatch.setattr(multiprocessing.current_process(), "_inheriting", True, raising=False)
    for opener, name in ((shm_ring._open_semaphore, "/" + gone), (shm_ring._attach, gone)):
        with pytest.raises(SystemExit) as e:
            opener(name)
        assert e.value.code == 1
