"""Contract tests of the Ray backend (issue 8): stages as Ray actors placed on the planned nodes.

One module-scoped ``ray.cluster_utils.Cluster`` with 3 nodes (1 CPU, 80 MB object store each; the
head is node ``n0``) carries the pool ids: ``n0`` as a custom resource ``pipeplan_node:n0`` only,
``n1`` as the node label ``pipeplan.node=n1`` only, ``n2`` as both, so both ways of naming a node are
exercised. ``RAY_AUTH_MODE=disabled`` and a private temp dir (``RAY_TMPDIR`` + ``temp_dir``) are set
before the cluster starts and restored after. Leftover actors are read from the GCS actor table
(``ray._private.state.actors()``: the public ``ray.util.state`` API needs the dashboard, which the
test cluster does not start to keep the process count low).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from pipeplan.errors import RunPlanRejection, StageFault  # noqa: E402
from pipeplan.plan_types import NodePool, NodeSpec, ObjectSpec, RingSpec, RuntimeConfig  # noqa: E402
from pipeplan.runtime.events import StageFaulted, StageReady, WeightsReady  # noqa: E402
from pipeplan.runtime.orchestrator import GenRequest, Pipeline  # noqa: E402
from pipeplan.runtime.ray_backend import (  # noqa: E402
    RayBackend,
    RayTransport,
    RunScope,
    build_registry,
    resolve_nodes,
)
from pipeplan.runtime.stage import FaultInjection  # noqa: E402
from pipeplan.runtime.transport import (  # noqa: E402
    DATA,
    RESET,
    EdgeRoute,
    EndpointError,
    Frame,
    ObjectTooLargeError,
    SamplerParams,
    Segment,
)

MB = 1024 * 1024
NODES = ("n0", "n1", "n2")
FAULT_DEADLINE_S = 10.0
START_HANG_S = 120.0


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def cluster():
    """A 3-node Ray cluster on this machine; yields ``{pool node id: Ray node id (hex)}`` taken from
    the Cluster's own node objects (independent of the backend's resolver)."""
    from ray.cluster_utils import Cluster

    saved = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_TMPDIR")}
    tmp = tempfile.mkdtemp(prefix="pp-ray-", dir="/tmp")  # short: Ray's unix socket paths must fit 107 bytes
    os.makedirs(os.path.join(tmp, "ray"))
    os.environ["RAY_AUTH_MODE"] = "disabled"
    os.environ["RAY_TMPDIR"] = tmp
    common = dict(num_cpus=1, object_store_memory=80 * MB)
    c = Cluster(initialize_head=True, head_node_args=dict(common, temp_dir=tmp, include_dashboard=False,
                                                          resources={"pipeplan_node:n0": 1}))
    ids = {"n0": c.head_node.node_id}
    ids["n1"] = c.add_node(**common, labels={"pipeplan.node": "n1"}).node_id
    ids["n2"] = c.add_node(**common, labels={"pipeplan.node": "n2"}, resources={"pipeplan_node:n2": 1}).node_id
    try:
        c.wait_for_nodes()
        ray.init(address=c.address, log_to_driver=False)
        yield ids
    finally:
        from pipeplan.runtime.ray_backend import unlink_channel_semaphores

        raylets = [p.process.pid for n in c.list_all_nodes() for p in n.all_processes.get("raylet", [])]
        ray.shutdown()
        c.shutdown()
        unlink_channel_semaphores(raylets)  # what the killed-actor tests leave behind
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def facts(stories_path):
    from pipeplan.frontend.gguf_facts import read_model_facts

    return read_model_facts(stories_path)


def _provisions(facts, nodes, parallel: int = 1):
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.frontend.planner import plan_run

    pool = NodePool(tuple(NodeSpec(n, 1 << 30) for n in nodes))
    config = RuntimeConfig(max_seq_len=256, parallel=parallel, ring_slots=max(2, parallel))
    return project_provisions(plan_run(facts, config, pool, 3, list(nodes)))


@pytest.fixture(scope="module")
def provisions(facts):
    """stories260K over 3 stages on n0, n1, n2."""
    return _provisions(facts, NODES)


_KEPT: set[str] = set()
"""Name prefixes of runs a module fixture keeps started (``concurrent_pipe``): not leftovers of other tests."""


def _live_actors() -> list[dict]:
    """Actors of the cluster that are not DEAD (ALIVE, pending, restarting), from the GCS table, except those
    of a run a module fixture keeps (:data:`_KEPT`)."""
    return [a for a in ray._private.state.actors().values() if a["State"] != "DEAD"
            and not any((a.get("Name") or "").startswith(k + "/") for k in _KEPT)]


# --------------------------------------------------------------------------- the happy path
def test_exact_tokens_on_planned_nodes(cluster, provisions, expected_cases, monkeypatch):
    """WL-R-4, WL-L-1, RP-PP-4, RP-PP-5, RP-PP-6, RP-OS-1: stories260K over 3 Ray actors on a 3-node cluster gives
    exactly the EXPECTED.md greedy tokens, the same ids as the inproc backend; each stage actor ran on the Ray node
    carrying its plan node id (from ray.get_runtime_context() inside the actor) at the driver's niceness (not Ray's
    worker niceness 15); WeightsReady < StageReady per stage;
    edges were resolved by (node_id, edge_id) through the run's registry and, by default (issue 14 item 3, ``auto``),
    carried over a Ray shared-memory channel where both ends run on one Ray node (the driver's token-in edge to the
    stage on the head node n0) and over TCP streams between Ray nodes (n0 -> n1 -> n2 -> driver), with at most
    RingSpec.slots frames in flight; close leaves no actor alive. (Channels on every edge: ``concurrent_pipe``.)"""
    from pipeplan.runtime.backends import InprocBackend

    assert [p.node_id for p in provisions] == list(NODES)
    monkeypatch.delenv("PIPEPLAN_RAY_TRANSPORT", raising=False)
    with Pipeline(provisions, backend=InprocBackend()) as pipe:
        inproc = {c["prompt"]: pipe.generate_ids(c["prompt_ids"], len(c["greedy_ids"]))[0] for c in expected_cases}
    backend = RayBackend()
    with Pipeline(provisions, backend=backend) as pipe:
        where = {s: ray.get(a.where.remote()) for s, a in backend.actors.items()}
        for p in provisions:
            assert where[p.stage]["ray_node_id"] == cluster[p.node_id], f"stage {p.stage} not on {p.node_id}"
        assert len({w["pid"] for w in where.values()}) == 3
        # Ray starts workers at niceness 15; a stage takes the driver's where it may (root here and in CI)
        mine = os.getpriority(os.PRIO_PROCESS, 0)
        assert all(w["niceness"] == mine if os.geteuid() == 0 else w["niceness"] >= mine for w in where.values())
        assert backend.ray_transport == "auto" and backend.transport.mode == "auto"
        first, last = provisions[0], provisions[-1]
        assert backend.edge_modes == {first.inbound.edge_id: "channel", first.outbound.edge_id: "socket",
                                      provisions[1].outbound.edge_id: "socket", last.outbound.edge_id: "socket"}
        for case in expected_cases:
            out, timings = pipe.generate_ids(case["prompt_ids"], len(case["greedy_ids"]))
            assert out == case["greedy_ids"] == inproc[case["prompt"]], case["prompt"]
            assert timings["decode_tok_s"] > 0
        kinds = {s: ray.get(a.__ray_call__.remote(_endpoint_kinds)) for s, a in backend.actors.items()}
        assert kinds == {0: ["_ChannelRecv", "_SocketSend"], 1: ["_SocketRecv", "_SocketSend"],
                         2: ["_SocketRecv", "_SocketSend"]}, kinds
        # the driver's endpoints were resolved through the registry by (node_id, edge_id)
        tx = backend.transport.endpoints[(first.node_id, first.inbound.edge_id, "send")]
        rx = backend.transport.endpoints[("orchestrator", last.outbound.edge_id, "recv")]
        n_tokens, n_cases = sum(len(c["greedy_ids"]) for c in expected_cases), len(expected_cases)
        # per sequence: RESET + prompt + one frame per decoded token in; RESET + one token per step out
        assert tx.sent == n_cases + n_tokens and rx.received == n_cases + n_tokens
        assert (type(tx).__name__, type(rx).__name__) == ("_ChannelSend", "_SocketPull")
        assert 0 <= tx.in_flight <= first.inbound.ring_spec.slots
        events = pipe.events
    for p in provisions:
        mine = [e for e in events if e.stage == p.stage]
        assert [type(e) for e in mine] == [WeightsReady, StageReady], mine
        assert mine[0].seq < mine[1].seq and mine[0].t <= mine[1].t
        assert mine[0].node_id == p.node_id and mine[0].bytes > 0
    assert _live_actors() == []
    assert backend.live_actor_names() == []
    # provisions never carry an actor name or address (RP-PP-6): the registry is built from node/edge ids
    names = set(build_registry(provisions, backend.transport.scope).values())
    assert not any(n in repr(p) for n in names for p in provisions)


def _endpoint_kinds(self_):
    return sorted(type(e).__name__ for e in self_.transport.endpoints.values())


def test_unknown_ray_transport_is_bad_backend(monkeypatch):
    """Issue 14 item 3: the Ray transport is ``auto`` (default), ``channel`` or ``actor``; any other name, from the
    argument or from $PIPEPLAN_RAY_TRANSPORT, is BackendError (bad_backend) naming it, before Ray is touched."""
    from pipeplan.runtime.backends import BackendError

    with pytest.raises(BackendError) as ei:
        RayBackend(ray_transport="compiled-graph")
    assert ei.value.code == "bad_backend" and "compiled-graph" in ei.value.message
    monkeypatch.setenv("PIPEPLAN_RAY_TRANSPORT", "shm")
    with pytest.raises(BackendError) as ei:
        RayBackend()
    assert ei.value.code == "bad_backend" and "PIPEPLAN_RAY_TRANSPORT" in ei.value.message
    monkeypatch.setenv("PIPEPLAN_RAY_TRANSPORT", "actor")
    assert RayBackend().ray_transport == "actor"
    monkeypatch.delenv("PIPEPLAN_RAY_TRANSPORT")
    assert RayBackend().ray_transport == "auto"


def test_edge_transports_choose_channels_within_a_ray_node():
    """Issue 14 item 3: ``auto`` carries an edge over a channel exactly when its producer and consumer (the
    orchestrator: the driver's Ray node) are on one Ray node, else over a TCP stream; ``channel``/``socket``/``actor``
    force one transport on every edge; an unknown mode is BackendError naming it."""
    from pipeplan.runtime.backends import BackendError
    from pipeplan.runtime.ray_backend import edge_transports

    spec, ring = ObjectSpec("activation", "f32", 4, (4, 8), "row_major", 64, 4 * 8 * 4), RingSpec(2, 128)

    def route(e, a, b):
        return EdgeRoute(e, "activation", a, b, spec, ring)

    routes = {"e0": route("e0", "orchestrator", "n0"), "e1": route("e1", "n0", "n1"),
              "e2": route("e2", "n1", "n2"), "e3": route("e3", "n2", "orchestrator")}
    where = {"orchestrator": "R0", "n0": "R0", "n1": "R1", "n2": "R1"}
    assert edge_transports(routes, where, "auto") == {"e0": "channel", "e1": "socket", "e2": "channel", "e3": "socket"}
    assert set(edge_transports(routes, where, "channel").values()) == {"channel"}
    assert set(edge_transports(routes, where, "socket").values()) == {"socket"}
    assert set(edge_transports(routes, where, "actor").values()) == {"actor"}
    with pytest.raises(BackendError) as ei:
        edge_transports(routes, where, "rdma")
    assert "rdma" in ei.value.message


# --------------------------------------------------------------------------- concurrent sequences
CPU = "pipeplan.runtime.kernels.cpu"
STORIES_PROMPTS = ["Once upon a time", "The little dog ran to the park and saw a big red ball", "Sam", "Lily"]


@pytest.fixture(scope="module")
def concurrent_pipe(cluster, facts):
    """stories260K over 3 Ray actors on n0, n1, n2 (channel transport) with 4 KV-cache slots per stage
    (``Pipeline(parallel=4)``, prompts in frames of 4 rows, numpy CPU kernels); started once."""
    backend = RayBackend(ray_transport="channel")
    pipe = Pipeline(_provisions(facts, NODES, parallel=4), backend=backend, kernels=CPU, num_threads=1,
                    parallel=4, prefill_rows=4)
    pipe.start()
    prefix = backend.transport.scope.prefix
    _KEPT.add(prefix)
    yield pipe
    pipe.close()
    _KEPT.discard(prefix)
    assert backend.live_actor_names() == []


def test_concurrent_greedy_ids_equal_single_on_ray(concurrent_pipe, stories_path, expected_cases):
    """RP-PP-3, WL-R-4 (issue 14 item 1 on Ray): ``Pipeline(parallel=4)`` on the Ray backend starts (it was an
    invalid_request before), every stage actor holds 4 KV-cache slots, and 4 concurrent greedy requests
    (different prompts and lengths, admitted at different times, prompts chunked by 4 rows) give each request's
    single-request ids, which are llama.cpp's where EXPECTED has the prompt: the edges carry ``Frame.slot``
    across Ray nodes and the token-out edge returns each sequence's own tokens."""
    from pipeplan.runtime.tokenizer import SPMTokenizer

    pipe = concurrent_pipe
    slots = {s: ray.get(a.__ray_call__.remote(lambda self_: self_.worker.parallel))
             for s, a in pipe.backend.actors.items()}
    assert slots == {0: 4, 1: 4, 2: 4}
    tok = SPMTokenizer.from_gguf(stories_path)
    prompts = [tok.encode(p, add_bos=True) for p in STORIES_PROMPTS]
    lengths = [12, 9, 14, 10]
    single = [pipe.generate_concurrent([GenRequest(p, n, eos_id=tok.eos_id)])[0].ids
              for p, n in zip(prompts, lengths, strict=True)]
    got = pipe.generate_concurrent([GenRequest(p, n, eos_id=tok.eos_id, delay_s=0.002 * i)
                                    for i, (p, n) in enumerate(zip(prompts, lengths, strict=True))])
    assert [g.ids for g in got] == single
    assert [len(ids) for ids in single] == lengths
    firsts, lasts = [g.token_times[0] for g in got], [g.token_times[-1] for g in got]
    assert max(firsts) < min(lasts)  # they ran at the same time
    for prompt, ids in zip(STORIES_PROMPTS, single, strict=True):
        case = next((c for c in expected_cases if c["prompt"] == prompt), None)
        assert case is None or ids == case["greedy_ids"][:len(ids)]


def test_cancel_frees_the_slot_on_ray(concurrent_pipe):
    """RP-PP-3 (issue 14 item 1 on Ray): with all 4 slots taken by long sequences, a fifth request waits;
    cancelling one after 3 ids frees its slot, and the waiting request runs in it with its single-request ids
    while the other long sequences still run."""
    pipe = concurrent_pipe
    short = GenRequest([1, 403, 407], 8)
    want = pipe.generate_concurrent([short])[0].ids
    handles: list = []

    def on_token(_tok: int) -> None:
        if len(handles[0].ids) == 3:
            handles[0].cancel()

    handles.append(pipe.submit(GenRequest([1, 300], 60), on_token=on_token))
    handles += [pipe.submit(GenRequest([1, 301 + i], 60)) for i in range(pipe.parallel - 1)]
    handles.append(pipe.submit(short))
    results = [h.result(timeout=120) for h in handles]
    a, others, c = results[0], results[1:-1], results[-1]
    assert len(a.ids) == 3 and all(len(b.ids) == 60 for b in others) and c.ids == want
    assert handles[-1].slot == handles[0].slot
    assert a.token_times[-1] < c.token_times[0] and all(c.token_times[-1] < b.token_times[-1] for b in others)


def test_bad_parallel_on_ray_is_invalid_request(facts):
    """RP-AR-4: ``parallel`` must be an integer >= 1 on the Ray backend too (0, -1, 2.0, True are
    RunRequestError ``invalid_request`` naming parallel), checked before Ray is touched."""
    from pipeplan.runtime.orchestrator import RunRequestError

    ps = _provisions(facts, NODES)
    for bad in (0, -1, 2.0, True):
        with pytest.raises(RunRequestError) as ei:
            Pipeline(ps, backend=RayBackend(), parallel=bad)
        assert ei.value.code == "invalid_request" and ei.value.where == "parallel"


def test_owned_frame_keeps_every_field():
    """Issue 14 item 1: what a channel read hands the stage (``_owned``: the array copied out of the channel's
    read-only buffer) keeps every Frame field as sent, whatever fields Frame has (slot included)."""
    from pipeplan.runtime.ray_backend import _owned
    from pipeplan.runtime.transport import RESET, SamplerParams

    arr = np.arange(8, dtype=np.float32).reshape(2, 4)
    arr.flags.writeable = False
    f = Frame(DATA, 7, 5, arr, None, 3)
    g = _owned(f)
    assert type(g) is Frame and g._fields == Frame._fields
    assert g.array is not arr and g.array.flags.writeable and np.array_equal(g.array, arr)
    assert all(getattr(g, k) == getattr(f, k) for k in Frame._fields if k != "array")
    r = Frame(RESET, 8, 0, None, SamplerParams(0.5, 3, 0.9, 11), 2)
    assert _owned(r) == r


def test_channel_wire_keeps_every_field():
    """Issue 14 item 3: a DATA frame crosses a channel as bytes (``_encode``; no pickling) and comes back (``_decode``)
    with every field as sent (segments, slot, dtype, shape; a non-contiguous array is sent by value) and a writable
    array; frames with a sampler (RESET) travel as themselves."""
    from pipeplan.runtime.ray_backend import _decode, _encode
    from pipeplan.runtime.transport import RESET, SamplerParams, Segment

    frames = [Frame(DATA, 7, 5, np.arange(8, dtype=np.float32).reshape(2, 4), None, 3),
              Frame(DATA, 2, 0, np.array([5, 6, 7], np.int32), None, 1, (Segment(2, 1, 0, 1), Segment(9, 3, 40, 2))),
              Frame(DATA, 1, 3, np.arange(12, dtype=np.float16).reshape(3, 4)[:, 1:3], None, 0)]
    for f in frames:
        wire = _encode(f)
        assert isinstance(wire, bytes)
        g = _decode(wire)
        assert type(g) is Frame and g.array.flags.writeable and g.array.dtype == f.array.dtype
        assert np.array_equal(g.array, f.array)
        assert all(getattr(g, k) == getattr(f, k) for k in Frame._fields if k != "array")
    r = Frame(RESET, 8, 0, None, SamplerParams(0.5, 3, 0.9, 11), 2)
    assert _encode(r) is r and _decode(r) == r


def test_unknown_ray_wait_is_bad_backend(monkeypatch):
    """Issue 14 item 3 (CPU of waiting reads): a channel read waits by ``backoff`` (default) or ``spin``; any other
    name, from the argument or from $PIPEPLAN_RAY_WAIT, is BackendError (bad_backend) naming it, before Ray is
    touched; the choice travels with the transport to the actors (pickled state)."""
    import pickle

    from pipeplan.runtime.backends import BackendError

    monkeypatch.delenv("PIPEPLAN_RAY_WAIT", raising=False)
    with pytest.raises(BackendError) as ei:
        RayBackend(ray_wait="busy")
    assert ei.value.code == "bad_backend" and "busy" in ei.value.message
    monkeypatch.setenv("PIPEPLAN_RAY_WAIT", "poll")
    with pytest.raises(BackendError) as ei:
        RayBackend()
    assert ei.value.code == "bad_backend" and "PIPEPLAN_RAY_WAIT" in ei.value.message
    monkeypatch.setenv("PIPEPLAN_RAY_WAIT", "spin")
    assert RayBackend().ray_wait == "spin"
    monkeypatch.delenv("PIPEPLAN_RAY_WAIT")
    assert RayBackend().ray_wait == "backoff"
    with pytest.raises(BackendError):
        RayTransport({}, RunScope(None, "p"), {}, wait="busy")
    tr = RayTransport({}, RunScope(None, "p"), {}, wait="spin")
    assert pickle.loads(pickle.dumps(tr)).wait == "spin"


# --------------------------------------------------------------------------- faults
def test_injected_weight_failure_is_typed_fault_without_leftovers(cluster, provisions):
    """WL-F-1, WL-F-6, WL-L-4: an injected download failure on the stage-1 actor ends the start in a
    typed StageFault(download) for stage 1 within 10 s of the failure (the start never hangs); stage 1 never reports StageReady; no actor of the
    run is left alive."""
    backend = RayBackend()
    pipe = Pipeline(provisions, backend=backend, fault_injection=FaultInjection(1, "download"))
    t0 = time.monotonic()
    with pytest.raises(StageFault) as ei:
        pipe.start()
    raised_at = time.monotonic()
    assert ei.value.kind == "download" and ei.value.stage == 1, ei.value
    assert ei.value.code == "stage_fault:download"
    ev1 = [e for e in pipe.events if e.stage == 1]
    faults = [e for e in ev1 if isinstance(e, StageFaulted)]
    assert faults
    # the fault surfaces within the deadline of happening (actor start-up under load is not counted),
    # and the whole start never hangs
    assert raised_at - faults[0].t < FAULT_DEADLINE_S, f"fault surfaced {raised_at - faults[0].t:.1f}s late"
    assert raised_at - t0 < START_HANG_S, f"start took {raised_at - t0:.1f}s"
    assert not any(isinstance(e, StageReady) for e in ev1)
    assert len(backend.actors) == 3  # the actors did exist, and are gone now
    assert _live_actors() == []


def test_killed_actor_mid_generation_is_runtime_fault(cluster, provisions, expected_cases):
    """WL-L-4 (runtime): ray.kill of the stage-1 actor in the middle of a generation ends it in
    StageFault(runtime) naming stage 1 within 10 s of the kill, and no actor of the run is left alive."""
    backend = RayBackend()
    case = expected_cases[0]
    with Pipeline(provisions, backend=backend) as pipe:
        rx = backend.transport.endpoints[("orchestrator", provisions[-1].outbound.edge_id, "recv")]
        killed_at: list[float] = []

        def killer():
            while rx.received < 5:  # a few tokens into the generation
                time.sleep(0.002)
            ray.kill(backend.actors[1])
            killed_at.append(time.monotonic())

        t = threading.Thread(target=killer, daemon=True)
        t.start()
        with pytest.raises(StageFault) as ei:
            pipe.generate_ids(case["prompt_ids"], 200)
        raised_at = time.monotonic()
        t.join(5)
    assert killed_at, f"the actor was never killed: {ei.value!r} {rx.received}"
    assert ei.value.kind == "runtime" and ei.value.stage == 1, ei.value
    assert raised_at - killed_at[0] < FAULT_DEADLINE_S
    assert 5 <= rx.received < 200
    assert _live_actors() == []


def test_unknown_node_rejected_before_any_actor(cluster, facts):
    """RP-AR-1: a plan node id that no live Ray node carries is RunPlanRejection(unknown_node) raised
    before any actor is created (the cluster's actor table does not grow)."""
    provs = _provisions(facts, ("n0", "n1", "ghost"))
    before = len(ray._private.state.actors())
    backend = RayBackend()
    pipe = Pipeline(provs, backend=backend)
    with pytest.raises(RunPlanRejection) as ei:
        pipe.start()
    assert ei.value.code == "unknown_node" and ei.value.where == "ghost"
    assert "ghost" in ei.value.message and "n2" in ei.value.message  # names what the cluster does carry
    assert backend.actors == {}
    assert len(ray._private.state.actors()) == before
    assert pipe.events == []


# --------------------------------------------------------------------------- edges
def _on(ray_node_id):
    """Hard affinity to one Ray node (the test consumers sit on the edge's consumer node)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=ray_node_id, soft=False)


@ray.remote(num_cpus=0, max_concurrency=8)
class _HeldSink:
    """A consumer that takes frames only when released. Actor transport: it accepts push calls but completes
    push ``n`` only once ``n + 1`` have been released (holds its slots; releases in producer order, like the
    stage inbox takes frames). Channel transport: it reads ``n`` frames from the channel on ``release(n)``."""

    def __init__(self, slots):
        from pipeplan.runtime.ray_backend import _ChannelInbox, _SocketInbox

        self.cond = threading.Condition()
        self.released = 0
        self.got = 0
        self.chan_inbox = _ChannelInbox(slots)
        self.sock_inbox = _SocketInbox()

    def accept_channel(self, edge_id, chan, ack_reader, ack_node):
        return self.chan_inbox.accept(chan, ack_reader, ack_node)

    def socket_address(self, edge_id):
        return self.sock_inbox.address()

    def push(self, edge_id, n, frame):
        with self.cond:
            self.got += 1
            while self.released <= n:
                self.cond.wait()
        return True

    def release(self, n):
        with self.cond:
            self.released += n
            self.cond.notify_all()
        box = self.chan_inbox if self.chan_inbox.attached else self.sock_inbox if self.sock_inbox.stream else None
        if box is not None:
            for _ in range(n):
                if box.get(5.0) is not None:
                    self.got += 1

    def count(self):
        return self.got


@pytest.mark.parametrize(("mode", "sink_on"), [("channel", "n1"), ("channel", "n0"), ("socket", "n1"),
                                               ("actor", "n1")])
def test_back_pressure_at_most_slots_in_flight(cluster, mode, sink_on):
    """RP-OS-1 (RingSpec enforced by the transport), issue 8 item 2, issue 14 item 3: a producer resolving its consumer by
    (node_id, edge_id) through the RayTransport registry keeps at most RingSpec.slots objects in flight, over
    shared-memory channels (to another Ray node, and to the driver's own Ray node, where reads wait on a doorbell),
    over a TCP stream to another Ray node and over actor calls: with a consumer that takes nothing, send #slots+1
    times out (a stream holds more bytes than that in its socket buffers: the consumer's acks are the bound);
    one taken object frees exactly one slot, which a send with no time to wait (``timeout=0``, as the orchestrator
    sends) takes too. An object larger than max_extent is ObjectTooLargeError, never sent."""
    slots = 2
    spec = ObjectSpec("activation", "f32", 4, (4, 8), "row_major", 64, 4 * 8 * 4)
    route = EdgeRoute("act.x", "activation", "n0", "n1", spec, RingSpec(slots, 128))
    scope = RunScope(ray.get_runtime_context().namespace, f"pipeplan/test-{mode}-{sink_on}/{os.getpid()}")
    name = f"{scope.prefix}/sink"
    sink = _HeldSink.options(name=name, scheduling_strategy=_on(cluster[sink_on])).remote(slots)
    tr = RayTransport({"act.x": route}, scope, {("n1", "act.x"): name}, mode=mode)
    try:
        with pytest.raises(EndpointError):
            tr.open_send("n2", "act.x")  # the edge's consumer is n1, not n2
        with pytest.raises(EndpointError):
            tr.open_send("n1", "act.unknown")
        tx = tr.open_send("n1", "act.x")
        frame = Frame(DATA, 1, 0, np.ones((2, 8), np.float32))
        assert tx.send(frame, timeout=5.0) and tx.send(frame, timeout=5.0)
        t0 = time.monotonic()
        assert tx.send(frame, timeout=0.3) is False
        assert time.monotonic() - t0 >= 0.25
        assert tx.in_flight == slots
        ray.get(sink.release.remote(1))
        deadline = time.monotonic() + 5.0
        while not tx.send(frame, timeout=0):  # a zero timeout still takes the credit the consumer gave back
            assert time.monotonic() < deadline, "the freed slot never reached a zero-timeout send"
            time.sleep(0.01)
        assert tx.send(frame, timeout=0.2) is False
        with pytest.raises(ObjectTooLargeError):
            tx.send(Frame(DATA, 1, 0, np.ones((5, 8), np.float32)), timeout=1.0)
        ray.get(sink.release.remote(2))
        assert ray.get(sink.count.remote()) == 3 and tx.sent == 3
    finally:
        tr.close()
        ray.kill(sink)


@ray.remote(num_cpus=0, max_concurrency=8)
class _InboxConsumer:
    """A consumer with the backend's own inbox (what a stage actor receives into), draining it slowly."""

    def __init__(self, slots):
        from pipeplan.runtime.ray_backend import _ChannelInbox, _Inbox, _SocketInbox

        self.inbox, self.stop = _Inbox(), threading.Event()
        self.chan_inbox = _ChannelInbox(slots)
        self.sock_inbox = _SocketInbox()

    def socket_address(self, edge_id):
        return self.sock_inbox.address()

    def push(self, edge_id, n, frame):
        return self.inbox.put(n, frame, self.stop)

    def accept_channel(self, edge_id, chan, ack_reader, ack_node):
        return self.chan_inbox.accept(chan, ack_reader, ack_node)

    def drain(self, count, mode):
        box = {"channel": self.chan_inbox, "socket": self.sock_inbox}.get(mode, self.inbox)
        out = []
        while len(out) < count:
            f = box.get(30.0)
            if f is None:
                break
            out.append(f)
            time.sleep(0.001)
        return out


@pytest.mark.parametrize(("mode", "consumer_on"), [("channel", "n2"), ("channel", "n0"), ("socket", "n2"),
                                                   ("actor", "n2")])
def test_edge_keeps_producer_order(cluster, mode, consumer_on):
    """Issue 8 item 2 (edges keep order): frames on one edge reach the consumer in the order the producer sent them, over
    shared-memory channels (to another Ray node, and on the driver's Ray node with a doorbell), over a TCP stream to
    another Ray node and over actor calls, even though the consumer actor runs several push calls at once (a RESET
    overtaking a DATA frame would corrupt a sequence); every frame arrives with every field as sent (control frames
    between DATA frames, slots, segments). A channel's doorbell leaves no name in /dev/shm once its reader holds
    it."""
    slots, count = 4, 120
    spec = ObjectSpec("activation", "f32", 4, (4, 8), "row_major", 64, 4 * 8 * 4)
    route = EdgeRoute("act.o", "activation", "n0", "n2", spec, RingSpec(slots, 128))
    scope = RunScope(ray.get_runtime_context().namespace, f"pipeplan/test-order-{mode}-{consumer_on}/{os.getpid()}")
    name = f"{scope.prefix}/consumer"
    consumer = _InboxConsumer.options(name=name, scheduling_strategy=_on(cluster[consumer_on])).remote(slots)
    ray.get(consumer.__ray_ready__.remote(), timeout=120)  # actor start-up is not what this test times
    tr = RayTransport({"act.o": route}, scope, {("n2", "act.o"): name}, mode=mode)
    try:
        tx = tr.open_send("n2", "act.o")
        got = consumer.drain.remote(count, mode)
        sent = []
        for i in range(count):
            if i % 10 == 9:  # control frames travel in order with the DATA frames
                f = Frame(RESET, i, i, None, SamplerParams(0.5, 3, 0.9, i), i % 4)
            else:
                x = np.full((1 + i % 3, 8), i, np.float32)
                f = Frame(DATA, i, i, x, None, i % 4, (Segment(i, i % 4, i, 1), Segment(i + 1, 3, 0, x.shape[0] - 1))
                          if x.shape[0] > 1 else None)
            sent.append(f)
            assert tx.send(f, timeout=60.0)
            assert tx.in_flight <= slots
        frames = ray.get(got, timeout=60)
        assert [f.position for f in frames] == list(range(count))
        for f, g in zip(sent, frames, strict=True):
            assert type(g) is Frame and all(getattr(g, k) == getattr(f, k) for k in Frame._fields if k != "array")
            assert (f.array is None and g.array is None) or (np.array_equal(g.array, f.array)
                                                             and g.array.dtype == f.array.dtype)
        if os.path.isdir("/dev/shm"):
            assert not [n for n in os.listdir("/dev/shm") if n.startswith(f"sem.pipeplan-{os.getpid()}-")]
    finally:
        tr.close()
        ray.kill(consumer)


# --------------------------------------------------------------------------- placement (pure)
def _fake(node_hex, alive=True, labels=None, resources=None):
    return {"NodeID": node_hex, "Alive": alive, "Labels": labels or {}, "Resources": resources or {}}


def test_resolve_nodes_labels_resources_dead_and_ambiguous():
    """RP-AR-1: pool ids map to the one alive Ray node carrying them (label or custom resource); a dead
    node carries nothing (unknown_node); an id carried by two alive nodes is ambiguous_node."""
    nodes = [_fake("aa", labels={"pipeplan.node": "x"}), _fake("bb", resources={"pipeplan_node:y": 1.0}),
             _fake("cc", alive=False, labels={"pipeplan.node": "z"})]
    assert resolve_nodes(["x", "y", "x"], nodes) == {"x": "aa", "y": "bb"}
    with pytest.raises(RunPlanRejection) as ei:
        resolve_nodes(["x", "z"], nodes)
    assert ei.value.code == "unknown_node" and ei.value.where == "z"
    with pytest.raises(RunPlanRejection) as ei:
        resolve_nodes(["x"], nodes + [_fake("dd", resources={"pipeplan_node:x": 1.0})])
    assert ei.value.code == "ambiguous_node" and ei.value.where == "x"


_EMBEDDED = r'''
import json, sys
import ray
from pipeplan.tools.cli import main
model, prompt = sys.argv[1], sys.argv[2]
raylets, shutdown = [], ray.shutdown
def _shutdown(*a, **k):  # the embedded instance's raylet pids, which name its channels' semaphores
    node = ray._private.worker._global_node
    raylets.extend(p.process.pid for p in (node.all_processes.get("raylet", []) if node is not None else []))
    return shutdown(*a, **k)
ray.shutdown = _shutdown
rc = main(["run", model, "--prompt", prompt, "--stages", "2", "--backend", "ray", "--max-seq-len", "64",
           "--max-tokens", "10", "--json"])
print(json.dumps({"rc": rc, "up_after": ray.is_initialized(), "raylets": raylets}))
'''


def test_embedded_local_instance(stories_path, expected_cases, tmp_path):
    """Issue 8 item 1: `pipeplan run --backend ray` with no --ray-address and no Ray connected starts an embedded
    local Ray instance whose node carries every plan node id (local0, local1), runs the compiled stage programs
    as actors there, generates the EXPECTED tokens, and shuts the instance down, leaving none of its channels'
    POSIX semaphores (``/dev/shm/sem.hdr<raylet pid>-*``, ``sem.obj...``: the actors exit rather than being killed,
    :func:`~pipeplan.runtime.ray_backend.end_actors`)."""
    import glob
    import json
    import subprocess
    import sys

    case = expected_cases[0]
    tmp = tempfile.mkdtemp(prefix="pp-ray-", dir="/tmp")
    try:
        env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_TMPDIR=tmp, PIPEPLAN_CACHE=str(tmp_path))
        proc = subprocess.run([sys.executable, "-c", _EMBEDDED, str(stories_path), case["prompt"]],
                              capture_output=True, text=True, timeout=240, env=env)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    status = json.loads(lines[-1])
    doc = json.loads("\n".join(lines[:-1]))
    assert status["rc"] == 0 and status["up_after"] is False and len(status["raylets"]) == 1
    assert doc["backend"] == "ray" and doc["token_ids"] == case["greedy_ids"][:10]
    left = [p for r in status["raylets"] for k in ("hdr", "obj") for p in glob.glob(f"/dev/shm/sem.{k}{r}-*")]
    assert left == []
    assert sorted({e["node_id"] for e in doc["events"]}) == ["local0", "local1"]


# --------------------------------------------------------------------------- the CLI on the module's cluster
def _pool(tmp_path, nodes):
    p = tmp_path / "pool.toml"
    p.write_text("".join(f'[[nodes]]\nid = "{n}"\nmemory_bytes = 1073741824\nbandwidth_bytes_per_s = 2.0e10\n'
                         f'flops_per_s = 5.0e10\nlink_bandwidth_bytes_per_s = 1.0e9\n' for n in nodes))
    return str(p)


def test_cli_run_ray_on_cluster(cluster, stories_path, expected_cases, tmp_path, capsys):
    """Issue 8 item 1, AB-M-2: `pipeplan run --backend ray --nodes POOL` (Ray already connected: the module's
    3-node cluster) compiles the plan and runs the package's stage programs as actors on n0, n1, n2: EXPECTED's
    tokens, WeightsReady before StageReady per stage on its planned node, no actor left."""
    import json

    from pipeplan.tools.cli import main

    case = expected_cases[1]
    rc = main(["run", str(stories_path), "--prompt", case["prompt"], "--nodes", _pool(tmp_path, NODES), "--stages", "3",
               "--backend", "ray", "--max-tokens", "12", "--cache-dir", str(tmp_path), "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["token_ids"] == case["greedy_ids"][:12]
    for s, node in enumerate(NODES):
        assert [(e["event"], e["node_id"]) for e in doc["events"] if e["stage"] == s] == [
            ("WeightsReady", node), ("StageReady", node)]
    assert _live_actors() == []


def test_cli_calibrate_ray_caches_the_relay_chain(cluster, stories_path, tmp_path, capsys, monkeypatch):
    """Issue 14 item 4, AB-C-2: `pipeplan calibrate --backend ray --nodes POOL --stages 3` (Ray connected: the
    module's 3-node cluster) measures the relay chain of the plan's stages on the Ray nodes carrying their node ids
    and caches it under ``runtime.3.ray_loop``: the driver's edge to n0 a channel, every edge between Ray nodes a
    TCP stream (auto), finite positive figures, no actor left; `pipeplan compare` then predicts a row measured on
    Ray with it and the runtime terms fitted on the Ray pipeline (``terms``: its 1- and 7-sequence rates), and says
    so, and a row measured locally without them."""
    import json
    import math

    from pipeplan.tools.cli import main

    monkeypatch.delenv("PIPEPLAN_RAY_TRANSPORT", raising=False)
    pool, cache = _pool(tmp_path, NODES), str(tmp_path / "cache")
    rc = main(["calibrate", str(stories_path), "--nodes", pool, "--stages", "3", "--backend", "ray",
               "--cache-dir", cache, "--json", "--tokens", "8"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    loop = json.loads(out)["runtime"]["3"]["ray_loop"]
    assert loop["edges"] == {"e0": "channel", "e1": "socket", "e2": "socket", "e3": "socket"}
    assert loop["placement"] == {n: cluster[n] for n in NODES} and loop["relays"] == 3 and loop["transport"] == "auto"
    for k in ("loop_s", "relay_cpu_s", "driver_cpu_s", "turnaround_s"):
        assert math.isfinite(loop[k]) and loop[k] > 0, k
    assert loop["loop_s"] >= loop["turnaround_s"]
    terms, local = loop["terms"], json.loads(out)["runtime"]["3"]["loop"]  # the pipeline loop on Ray and locally
    assert terms["sequences"] == local["sequences"] == 7 and terms["rate_busy_tok_s"] > 0 and terms["rate_one_tok_s"] > 0
    # how closely the terms reproduce the rates depends on the load (CI runs other tests beside this one): calibrate
    # warns when the fit is loose (test_a_loose_loop_fit_warns); here it is reported, and the rates are Ray's own
    assert math.isfinite(terms["fit_residual"]) and terms["fit_residual"] >= 0
    assert terms["rate_one_tok_s"] != local["rate_one_tok_s"]
    assert _live_actors() == []
    plan, pkg = tmp_path / "plan.mlir", tmp_path / "pkg"
    assert main(["plan", str(stories_path), "--nodes", pool, "--stages", "3", "-o", str(plan)]) == 0
    assert main(["compile", str(plan), "--nodes", pool, "--cache-dir", cache, "-o", str(pkg)]) == 0
    rows = [{"n_sequences": 1, "stages": 3, "aggregate_tok_s": 500.0, "p50_s": 2e-3, "p99_s": 3e-3, "backend": b}
            for b in ("ray", "local")]
    (tmp_path / "t.json").write_text(json.dumps({"format": "pipeplan-throughput/1", "rows": rows}))
    capsys.readouterr()
    assert main(["compare", str(pkg), str(tmp_path / "t.json"), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["rows"]
    assert "Ray loop calibrated (3 relays, auto transport" in got[0]["evidence"]
    assert "runtime terms fitted on Ray" in got[0]["evidence"]
    assert "Ray loop" not in got[1]["evidence"]
    assert got[0]["predicted"]["aggregate_tok_s"] != got[1]["predicted"]["aggregate_tok_s"]
    from pipeplan.analysis.concurrency import choose_micro_batches

    choice = choose_micro_batches(pkg, 3, backend="ray")  # the runtime's M on Ray (Pipeline, serve) takes it too
    assert choice is not None and all("Ray loop calibrated" in p.evidence for p in choice.predictions)


def test_cli_run_ray_unknown_node_exits_2(cluster, stories_path, tmp_path, capsys):
    """RP-AR-1: `pipeplan run --backend ray` with a pool node id no live Ray node carries exits 2 with
    error[unknown_node] naming it, before any actor is created."""
    from pipeplan.tools.cli import main

    before = len(ray._private.state.actors())
    rc = main(["run", str(stories_path), "--prompt", "Hi", "--nodes", _pool(tmp_path, ("n0", "ghost")), "--stages", "2",
               "--backend", "ray", "--max-tokens", "2", "--cache-dir", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and err.startswith("error[unknown_node]") and "'ghost'" in err
    assert len(ray._private.state.actors()) == before


def test_unreachable_address_fails_fast_for_api_users():
    """An unreachable HOST:PORT Ray address is a typed RayUnavailableError within the probe timeout, for API users
    too (RayBackend._connect probes before ray.init, whose own retries take minutes); ``auto`` and ``local`` are left
    to Ray, and an address of no form ray.init takes is the same error at once."""
    import socket
    import time

    from pipeplan.runtime.ray_backend import RAY_PROBE_TIMEOUT_S, RayUnavailableError, probe_ray_address

    with socket.socket() as s:  # a port nothing listens on: bind, then close before probing
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    with pytest.raises(RayUnavailableError) as e:
        probe_ray_address(f"127.0.0.1:{port}")
    assert time.monotonic() - t0 <= RAY_PROBE_TIMEOUT_S + 1.0
    assert e.value.code == "ray_unavailable" and f"127.0.0.1:{port}" in e.value.message
    probe_ray_address("auto")  # not HOST:PORT: left to ray.init
    probe_ray_address("local")
    probe_ray_address(None)
    for bad in ("foo", "127.0.0.1", "http://127.0.0.1:6379", "127.0.0.1:0", "127.0.0.1:70000", ""):
        with pytest.raises(RayUnavailableError) as e:  # not a form ray.init takes: at once, no probe
            probe_ray_address(bad)
        assert e.value.code == "ray_unavailable" and repr(bad) in e.value.message and "HOST:PORT" in e.value.message


# --------------------------------------------------------------------------- socket edges
def _tcp_pair():
    import socket

    srv = socket.create_server(("127.0.0.1", 0))
    a = socket.create_connection(srv.getsockname()[:2])
    b, _ = srv.accept()
    srv.close()
    return a, b


def test_socket_stream_keeps_every_field_and_counts_acks():
    """Issue 14 item 3 (socket edges): a stream carries frames whole and in order with every field as sent (DATA as
    raw bytes: segments, slot, dtype, shape, a frame larger than the socket buffers; RESET with its sampler and
    SHUTDOWN pickled), a read that finds nothing within its timeout takes nothing, the consumer's acks reach the
    producer as its cumulative taken count, and a closed end is ``_StreamBroken`` (never a partial frame)."""
    from pipeplan.runtime.ray_backend import _Stream, _StreamBroken
    from pipeplan.runtime.transport import SHUTDOWN

    a, b = _tcp_pair()
    tx, rx = _Stream(a), _Stream(b)
    frames = [Frame(DATA, 7, 5, np.arange(8, dtype=np.float32).reshape(2, 4), None, 3),
              Frame(RESET, 8, 0, None, SamplerParams(0.5, 3, 0.9, 11), 2),
              Frame(DATA, 2, 0, np.array([5, 6, 7], np.int32), None, 1, (Segment(2, 1, 0, 1), Segment(9, 3, 40, 2))),
              Frame(DATA, 1, 9, np.random.default_rng(0).standard_normal((512, 640)).astype(np.float32), None, 0),
              Frame(SHUTDOWN)]
    writer = threading.Thread(target=lambda: [tx.write_frame(f) for f in frames])
    writer.start()
    got = [rx.read_frame(10.0) for _ in frames]
    writer.join(10.0)
    for f, g in zip(frames, got, strict=True):
        assert type(g) is Frame and all(getattr(g, k) == getattr(f, k) for k in Frame._fields if k != "array")
        assert (f.array is None and g.array is None) or (np.array_equal(g.array, f.array) and
                                                         g.array.dtype == f.array.dtype and g.array.flags.writeable)
    t0 = time.monotonic()
    assert rx.read_frame(0.1) is None and time.monotonic() - t0 >= 0.09
    rx.write_ack(1)
    rx.write_ack(2)
    deadline = time.monotonic() + 5.0
    while tx.acked < 2 and time.monotonic() < deadline:
        tx.read_acks(0.5)
    assert tx.acked == 2
    a.close()
    with pytest.raises(_StreamBroken):
        rx.read_frame(5.0)
    b.close()


@ray.remote(num_cpus=0)
class _NoListener:
    """A consumer whose socket edge address has nothing listening on it."""

    def socket_address(self, edge_id):
        import socket

        s = socket.create_server(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        return "127.0.0.1", port


def test_unreachable_socket_edge_is_endpoint_error(cluster):
    """Issue 14 item 3: a socket edge whose consumer's address accepts no connection is an EndpointError naming the
    edge and the way out (``PIPEPLAN_RAY_TRANSPORT=actor``), not a hang or a traceback from the socket layer."""
    spec = ObjectSpec("activation", "f32", 4, (4, 8), "row_major", 64, 4 * 8 * 4)
    route = EdgeRoute("act.u", "activation", "n0", "n1", spec, RingSpec(2, 128))
    scope = RunScope(ray.get_runtime_context().namespace, f"pipeplan/test-unreachable/{os.getpid()}")
    name = f"{scope.prefix}/sink"
    sink = _NoListener.options(name=name, scheduling_strategy=_on(cluster["n1"])).remote()
    tr = RayTransport({"act.u": route}, scope, {("n1", "act.u"): name}, mode="socket")
    try:
        tx = tr.open_send("n1", "act.u")
        with pytest.raises(EndpointError) as ei:
            tx.send(Frame(DATA, 1, 0, np.ones((1, 8), np.float32)), timeout=5.0)
        assert ei.value.where == "act.u" and "PIPEPLAN_RAY_TRANSPORT=actor" in ei.value.message
    finally:
        tr.close()
        ray.kill(sink)


def test_socket_transport_on_every_edge(cluster, facts, expected_cases):
    """Issue 14 item 3: with ``ray_transport="socket"`` every edge, the driver's token-in and token-out included, is a
    TCP stream; one request gives EXPECTED's greedy ids and two concurrent ones (the orchestrator sends with a zero
    timeout while frames are in flight) each give their single-request ids; close leaves no actor alive."""
    backend = RayBackend(ray_transport="socket")
    with Pipeline(_provisions(facts, NODES, parallel=2), backend=backend, kernels=CPU, num_threads=1,
                  parallel=2) as pipe:
        assert set(backend.edge_modes.values()) == {"socket"}
        case = expected_cases[0]
        assert pipe.generate_ids(case["prompt_ids"], len(case["greedy_ids"]))[0] == case["greedy_ids"]
        reqs = [GenRequest([1, 403, 407], 12), GenRequest([1, 300, 301, 302], 9)]
        single = [pipe.generate_concurrent([r])[0].ids for r in reqs]
        assert [g.ids for g in pipe.generate_concurrent(reqs)] == single
        kinds = {type(e).__name__ for e in backend.transport.endpoints.values()}
        assert kinds == {"_SocketSend", "_SocketPull"}
    assert backend.live_actor_names() == []
