"""The Ray backend: one Ray actor per stage, placed on the Ray node its plan's node id names.

DESIGN.md §4 ("Scale-out: Ray actors placed on Ray nodes by node id"), issue 8. The backend
implements :class:`pipeplan.runtime.backends.Backend`, so :class:`pipeplan.runtime.orchestrator.Pipeline`
drives it exactly like the local backends (``Pipeline(provisions, backend=RayBackend(...))``), and
each actor runs the ordinary :class:`pipeplan.runtime.stage.StageWorker` (same weight lifecycle,
events and faults as the local backend: the weights are resolved and loaded *on the actor's node*,
only the stage's own byte ranges).

**Node ids -> Ray nodes.** A Ray node carries a pool node id ``N`` when it has the node label
``pipeplan.node=N`` (:data:`NODE_LABEL`) or the custom resource ``pipeplan_node:N``
(:data:`RESOURCE_PREFIX`), e.g. ``ray start --labels pipeplan.node=gpu0`` or
``--resources '{"pipeplan_node:gpu0": 1}'``. :func:`resolve_nodes` maps every node id of the plan to
exactly one *alive* Ray node, before any actor is created; a node id that no alive Ray node carries
is ``RunPlanRejection(code="unknown_node")`` and one that several carry is
``RunPlanRejection(code="ambiguous_node")`` (seed 000 RP-AR-1 applied to the live cluster). An actor
is then pinned to its Ray node with a hard ``NodeAffinitySchedulingStrategy`` (it uses 0 CPUs of the
Ray scheduler, so placement never waits on CPU accounting).

**Edges.** Actors are *named actors scoped to the run* (namespace of the driver, names
``pipeplan/<run_id>/<nonce>/stage<k>@<node_id>``). A :class:`RayTransport` resolves an endpoint by
``(node_id, edge_id)`` through its registry, a table built from the routing table of the provisions
(:func:`pipeplan.runtime.transport.routes_from_provisions`): ``(node_id, edge_id) -> actor name`` of
the actor that holds that edge's buffer; the handle is then looked up by name
(``ray.get_actor``). No actor address or handle is ever in a ProvisionStage (RP-PP-5/6).

Frames cross an edge by one of three transports, chosen per edge (:data:`TRANSPORTS`;
``RayBackend(ray_transport=...)`` or ``$PIPEPLAN_RAY_TRANSPORT``): ``auto`` (the default) carries an edge whose
producer and consumer run on the same Ray node over a channel and an edge between Ray nodes over a TCP stream
(a channel with a reader on another Ray node is pushed there by a thread per channel in the writer's process,
Ray's ``MutableObjectProvider::PollWriterClosure``, which keeps a core busy even while the edge is idle, and its
reader polls); ``channel``, ``socket`` or ``actor`` force one transport on every edge (:func:`edge_transports`).

- ``channel`` (issue 14 item 3): Ray's shared-memory channels
  (``ray.experimental.channel.BufferedSharedMemoryChannel``, what Ray Compiled Graphs move data with;
  ``RingSpec.slots`` buffers of ``slot_bytes`` + :data:`CHANNEL_OVERHEAD_BYTES`). The whole Frame is written
  per hop: control frames (RESET, SHUTDOWN) go down the same channel as DATA. A channel is built by its
  writer (Ray's rule): a stage builds its outbound channel when it connects and hands it to the consumer
  actor the registry names (``accept_channel``); the driver builds the token-in channel at its first send;
  the token-out channel, read by the driver, is fetched once from the producer actor (``out_channel``), with
  a proxy actor on the driver's Ray node standing for the driver as reader (as Compiled Graphs do).
  Back-pressure is credit-based: the consumer writes its taken count into an ack channel per frame taken,
  and the producer writes only while ``sent - acked < slots`` (a full edge makes ``send`` return False after
  ``timeout``, like a full ring). The credits make the bound exact across Ray nodes too, where a channel
  holds more frames than its buffers (Ray's push to the reader's node). Ray's own blocking read polls the
  channel (``sched_yield``) and takes a core's share while it waits, so by default (``ray_wait="backoff"``;
  :data:`WAITS`) a read whose writer is on its Ray node blocks on the channel's doorbell, a POSIX semaphore the
  writer posts per write (:class:`_Chan`), and one from another Ray node waits by non-blocking reads between
  growing sleeps. A DATA frame goes down a channel as bytes (:func:`_encode`), not pickled.
- ``socket``: one TCP stream per edge (``TCP_NODELAY``) between the two processes. The actor the registry names
  for the edge listens on its Ray node's address (:class:`_Listener`; ``socket_address`` /
  ``out_socket_address`` return it) and the other end connects: a producer stage when it connects its edges, the
  driver at its first send or receive. Frames go whole, a DATA frame as :func:`_encode` bytes and any other
  pickled (:class:`_Stream`); a read waits in ``poll`` (no CPU while the edge is idle). Back-pressure is by
  credits as for channels: the consumer writes its cumulative taken count back on the stream per frame taken
  and the producer writes only while ``sent - acked < slots``. The nodes must reach each other's ports (Ray's
  own workers need that too); where they cannot, connecting is an EndpointError that names
  ``PIPEPLAN_RAY_TRANSPORT=actor``.
- ``actor``: the producer pushes each Frame as a Ray object
  with an actor call (``push``, numbered: the inbox admits frames in producer order, since a threaded actor
  may start concurrent calls out of order) to the consumer's inbox. The call returns only when the consumer
  has *taken* the frame, and the producer keeps at most ``RingSpec.slots`` calls outstanding (credit-based
  back-pressure). For the token-out edge, the producer stage keeps a bounded outbox of ``slots`` frames and
  the orchestrator pulls from it (Ray cannot call into the driver).

Objects are checked against the edge's ObjectSpec on send (:func:`~pipeplan.runtime.transport.check_object`):
an object larger than ``max_extent`` is an ``ObjectTooLargeError``, never a resize.

**Events and faults.** Each actor records its worker's events; the backend long-polls them (one
outstanding call per actor) and hands them to the orchestrator in order, so per stage
``WeightsReady`` precedes ``StageReady``. An actor that dies (killed, node lost, process crash)
makes its pending calls fail with a Ray actor error: :meth:`RayBackend.dead_stage` reports it and
the orchestrator raises ``StageFault(kind="runtime")``. :meth:`RayBackend.stop` asks every worker to
stop, then every actor of the run to exit (:func:`end_actors`: one that does not within
:data:`END_WAIT_S` is ``ray.kill``-ed) and waits until Ray reports each one dead, so no actor, and no
semaphore of its channels, is left behind. Actors are owned by the driver (not detached): if the driver process dies,
Ray reclaims them too.

**Connecting.** ``RayBackend(address=...)`` connects to a running cluster (``ray.init(address)``);
with no address and no Ray connected it starts an *embedded* local Ray instance whose single node
carries every node id of the plan (custom resources), and shuts it down in :meth:`RayBackend.stop`.
When Ray is already initialised in the process (tests, notebooks) it is used as is.
"""

from __future__ import annotations

import _multiprocessing
import collections
import contextlib
import copy
import itertools
import math
import os
import pickle
import queue
import re
import select
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pipeplan.errors import RunPlanRejection
from pipeplan.plan_types import ProvisionStage
from pipeplan.runtime.backends import Backend, BackendError, WorkerOptions, _proc_state
from pipeplan.runtime.events import Event
from pipeplan.runtime.shm_ring import SHM_DIR, RingSemaphore, _creator_alive
from pipeplan.runtime.stage import FaultInjection
from pipeplan.runtime.transport import (
    DATA,
    NUMPY_DTYPES,
    ORCHESTRATOR_NODE,
    EdgeRoute,
    EndpointError,
    Frame,
    QueueSend,
    RecvEndpoint,
    Segment,
    SendEndpoint,
    Transport,
    check_object,
    check_segments,
    routes_from_provisions,
)

try:  # ray is an optional dependency: only this backend needs it
    import ray
    from ray.exceptions import (
        ActorUnavailableError,
        GetTimeoutError,
        RayActorError,
        RayChannelError,
        RayChannelTimeoutError,
    )
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
except ImportError:  # pragma: no cover - exercised only without ray
    ray = None  # type: ignore[assignment]

NODE_LABEL = "pipeplan.node"
"""Ray node label whose value is the pool node id the Ray node carries."""
RESOURCE_PREFIX = "pipeplan_node:"
"""Custom resource ``pipeplan_node:<node id>`` marking a Ray node as carrying that pool node id."""
UNAVAILABLE_POLLS = 3
"""Consecutive event polls of a stage failing with ``ActorUnavailableError`` (Ray: temporarily unreachable, may
come back) after which the stage counts as dead; fewer are retried, so a slow RPC under load does not make a
live stage the one a fault is blamed on."""
EVENT_POLL_S = 0.5
"""Seconds one event long-poll waits inside an actor before returning empty."""
RESOLVE_TIMEOUT_S = 30.0
"""Seconds an endpoint keeps retrying ``ray.get_actor`` for a peer that is still being created."""
KILL_WAIT_S = 10.0
"""Seconds :meth:`RayBackend.stop` waits for Ray to report every killed actor dead."""
TRANSPORTS = ("auto", "channel", "socket", "actor")
"""How frames cross the edges of a run: ``auto`` (the default: per edge, a channel within a Ray node and a TCP
stream between Ray nodes; :func:`edge_transports`), ``channel`` (Ray shared-memory channels on every edge),
``socket`` (a TCP stream on every edge) or ``actor`` (one actor call per frame on every edge)."""
EDGE_TRANSPORTS = ("channel", "socket", "actor")
"""The transport of one edge."""
TRANSPORT_ENV = "PIPEPLAN_RAY_TRANSPORT"
"""Environment variable choosing the transport of a :class:`RayBackend` built without one (``auto``)."""
CHANNEL_OVERHEAD_BYTES = 4096
"""Bytes a channel buffer holds beyond the edge's ``slot_bytes`` (the pickled Frame around the array)."""
ACK_BYTES = 1000
"""Buffer bytes of an ack channel (Ray's minimum channel buffer)."""
ACK_WRITE_S = 1.0
"""Seconds a consumer waits to write an ack (it never has to: the credit count keeps a buffer free)."""
WAITS = ("backoff", "spin")
"""How a channel read waits for a frame: ``backoff`` (the default: without spinning; on the doorbell of a channel
written on the reader's Ray node, else by non-blocking reads between sleeps that grow from :data:`BACKOFF_FIRST_S`
to :data:`BACKOFF_MAX_S`) or ``spin`` (Ray's own blocking read, which polls the channel with ``sched_yield`` and
takes a core's share while it waits)."""
WAIT_ENV = "PIPEPLAN_RAY_WAIT"
"""Environment variable choosing the channel wait of a :class:`RayBackend` built without one (``backoff``)."""
BACKOFF_FIRST_S = 50e-6
"""First sleep of a backoff wait (seconds); each further sleep doubles, up to :data:`BACKOFF_MAX_S`."""
BACKOFF_MAX_S = 1e-3
"""Longest sleep of a backoff wait (seconds): the most a frame that arrives during a long wait waits extra."""
BELL_SLICE_S = 0.05
"""Longest a doorbell wait blocks before it reads the channel itself (a broken channel, a value whose post is
late; :class:`_Chan`)."""


class RayUnavailableError(BackendError):
    """The Ray backend was requested but ``ray`` is not installed, or Ray cannot be reached
    (code ``ray_unavailable``)."""

    code = "ray_unavailable"


RAY_PROBE_TIMEOUT_S = 3.0
"""Seconds a TCP probe of a ``HOST:PORT`` Ray address may take before it counts as unreachable."""

RAY_ADDRESS_FORMS = "HOST:PORT, ray://HOST:PORT, auto, local"
"""The Ray addresses ``--ray-address`` takes (as ``ray.init``)."""

_RAY_HOST_PORT = re.compile(r"^(?:ray://)?\[?([^\]/]+?)\]?:(\d{1,5})$")


def probe_ray_address(address: str | None) -> None:
    """Fail fast on a ``--ray-address`` HOST:PORT (or ``ray://HOST:PORT``) that accepts no TCP connection
    within :data:`RAY_PROBE_TIMEOUT_S`: ``ray.init`` itself retries an unreachable GCS for minutes
    (20 tries of ~36 s in Ray 2.60), which a user sees as a hang. ``auto`` and ``local`` are left to Ray; any
    other form (what ``ray.init`` takes: :data:`RAY_ADDRESS_FORMS`), or a port outside 1..65535, is an error
    here, before any work. Raises RayUnavailableError (``ray_unavailable``, exit 2)."""
    import socket

    if address is None or address in ("auto", "local"):
        return
    m = _RAY_HOST_PORT.match(address)
    if m is None or not 1 <= int(m.group(2)) <= 65535:
        raise RayUnavailableError(f"--ray-address {address!r} is not one of {RAY_ADDRESS_FORMS}", where=address)
    host, port = m.group(1), int(m.group(2))
    try:
        with socket.create_connection((host, port), timeout=RAY_PROBE_TIMEOUT_S) as conn:
            answer = _h2_answer(conn)
    except OSError as e:
        raise RayUnavailableError(f"cannot connect to Ray at {address}: nothing accepts connections on {host}:{port} "
                                  f"({e.strerror or type(e).__name__}); start the cluster (`ray start --head`) or "
                                  f"leave out --ray-address for an embedded instance", where=address) from None
    if answer is not None and not answer:
        raise RayUnavailableError(f"cannot connect to Ray at {address}: {host}:{port} accepts connections but does "
                                  f"not answer as a Ray cluster (its GCS speaks gRPC over HTTP/2); check the port "
                                  f"(`ray status` on the head node prints the address)", where=address)


_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
"""The HTTP/2 client connection preface and an empty SETTINGS frame (RFC 9113 3.4, 6.5)."""


def _h2_answer(conn: Any) -> bool | None:
    """Whether the server on ``conn`` answers an HTTP/2 connection preface with a SETTINGS frame, as a gRPC server
    (Ray's GCS, a Ray Client server) does, within :data:`RAY_PROBE_TIMEOUT_S`; None when that cannot be told (the
    send failed)."""
    try:
        conn.sendall(_H2_PREFACE)
    except OSError:
        return None
    data = b""
    end = time.monotonic() + RAY_PROBE_TIMEOUT_S
    while len(data) < 9 and time.monotonic() < end:
        conn.settimeout(max(0.01, end - time.monotonic()))
        try:
            chunk = conn.recv(9 - len(data))
        except OSError:  # a timeout too
            break
        if not chunk:
            break
        data += chunk
    return len(data) == 9 and data[3] == 4


END_WAIT_S = 2.0
"""Longest :func:`end_actors` waits for actors to exit by themselves before it kills them."""


def end_actors(actors: Sequence[Any], wait_s: float = END_WAIT_S) -> int:
    """End ``actors`` (Ray actor handles; None entries skipped): ask each to exit (``__ray_terminate__``, queued
    behind its running calls) and wait up to ``wait_s`` s, then ``ray.kill`` every one that has not answered.
    An actor that exits by itself unlinks the POSIX semaphores of the Ray channels it registered
    (``sem.hdr*`` / ``sem.obj*`` in /dev/shm); a killed one leaves them behind. Returns how many were killed."""
    live = [a for a in actors if a is not None]
    refs = []
    for a in live:
        try:
            refs.append(a.__ray_terminate__.remote())
        except Exception:  # noqa: BLE001 - already gone: the kill below is a no-op
            refs.append(None)
    pending = [r for r in refs if r is not None]
    done: set[Any] = set()
    if pending and wait_s > 0:
        try:
            done = set(ray.wait(pending, num_returns=len(pending), timeout=wait_s)[0])
        except Exception:  # noqa: BLE001 - best effort: the kills below are what guarantee the end
            done = set()
    killed = 0
    for a, r in zip(live, refs, strict=True):
        if r is not None and r in done:
            continue
        try:
            ray.kill(a, no_restart=True)
            killed += 1
        except Exception:  # noqa: BLE001 - already gone
            pass
    return killed


def _actor_state(handle: Any) -> str:
    """The GCS state of the actor ``handle`` names (``ALIVE``, ``DEAD``, ...; ``""`` when the table does not
    answer)."""
    try:
        return str((ray._private.state.actors(actor_id=handle._actor_id.hex()) or {}).get("State", ""))
    except Exception:  # noqa: BLE001 - a GCS table that does not answer: not known dead
        return ""


def embedded_raylet_pids() -> list[int]:
    """Process ids of the raylets of the Ray instance this process started (``ray.init`` without an address);
    empty when it connected to a cluster or Ray does not say."""
    try:
        node = ray._private.worker._global_node
        return [int(p.process.pid) for p in node.all_processes.get("raylet", [])] if node is not None else []
    except Exception:  # noqa: BLE001 - a Ray whose internals differ: nothing to sweep
        return []


def unlink_channel_semaphores(raylets: Sequence[int], wait_s: float = 5.0) -> int:
    """Unlink the POSIX semaphores of Ray shared-memory channels (``/dev/shm/sem.hdr<raylet pid>-<n>``,
    ``sem.obj...``: Ray names them after the object store's raylet) of ``raylets`` that have exited (waited for
    up to ``wait_s`` s): Ray unlinks them only when a process that registered the channel exits cleanly, so a
    killed worker or a driver that ends without it leaves them behind, and with their raylet gone no process
    can use them. Semaphores of a raylet still running are kept. Returns how many were unlinked."""
    if not raylets or not os.path.isdir(SHM_DIR):
        return 0
    end = time.monotonic() + wait_s
    gone = []
    for pid in raylets:
        while _alive(pid) and time.monotonic() < end:
            time.sleep(0.05)
        if not _alive(pid):
            gone.append(pid)
    if not gone:
        return 0
    names = re.compile(rf"^sem\.(?:hdr|obj)(?:{'|'.join(str(p) for p in gone)})-\d+$")
    n = 0
    for f in os.listdir(SHM_DIR):
        if names.match(f):
            try:
                _multiprocessing.sem_unlink("/" + f[len("sem."):])
                n += 1
            except OSError:  # unlinked meanwhile
                pass
    return n


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (its /proc state where there is one, else ``kill(pid,
    0)``)."""
    state = _proc_state(pid)
    return state != "Z" if state else _creator_alive(pid)


@contextlib.contextmanager
def _driver_signals_kept() -> Iterator[None]:
    """Around ``ray.init`` in this (driver) process: SIGINT and SIGTERM are deferred until it returns
    (:func:`~pipeplan.runtime.interrupts.interrupts_deferred`: an interrupted start-up leaves Ray processes
    orphaned), and Ray installs none of its own handlers for them: neither its Python SIGTERM handler
    (``sys.exit`` without any cleanup) nor its C++ failure signal handler in the driver (which dumps a stack
    and aborts on SIGTERM). The command's own handlers (``error[interrupted]``, stages stopped, 130 / 143) stay
    in place. Ray's workers are not affected."""
    from pipeplan.runtime.interrupts import interrupts_deferred

    utils, consts = ray._private.utils, ray._private.ray_constants
    saved = (getattr(utils, "set_sigterm_handler", None), getattr(consts, "RAY_DISABLE_FAILURE_SIGNAL_HANDLER", None))
    try:
        if saved[0] is not None:
            utils.set_sigterm_handler = lambda handler: None
        if saved[1] is not None:
            consts.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = True
        with interrupts_deferred():
            yield
    finally:
        if saved[0] is not None:
            utils.set_sigterm_handler = saved[0]
        if saved[1] is not None:
            consts.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = saved[1]


def _require_ray() -> None:
    if ray is None:
        raise RayUnavailableError("the ray backend needs the `ray` package (pip install 'ray==2.60.0')",
                                  where="backend")


def node_resource(node_id: str) -> str:
    """The custom resource name that marks a Ray node as carrying pool node ``node_id``."""
    return f"{RESOURCE_PREFIX}{node_id}"


# --------------------------------------------------------------------------- placement
def carried_node_ids(ray_node: Mapping[str, Any]) -> set[str]:
    """Pool node ids a Ray node (an entry of ``ray.nodes()``) carries: its ``pipeplan.node`` label
    value and every ``pipeplan_node:<id>`` custom resource."""
    ids = set()
    label = (ray_node.get("Labels") or {}).get(NODE_LABEL)
    if label:
        ids.add(str(label))
    for res in (ray_node.get("Resources") or {}):
        if res.startswith(RESOURCE_PREFIX) and len(res) > len(RESOURCE_PREFIX):
            ids.add(res[len(RESOURCE_PREFIX):])
    return ids


def resolve_nodes(node_ids: Sequence[str], ray_nodes: Sequence[Mapping[str, Any]] | None = None) -> dict[str, str]:
    """Map each pool node id to the hex id of the one alive Ray node that carries it.

    Args:
        node_ids: pool node ids (e.g. the ``node_id`` of every ProvisionStage).
        ray_nodes: ``ray.nodes()`` entries (default: the connected cluster's).
    Returns: ``{pool node id: Ray node id (hex)}``.
    Raises:
        RunPlanRejection(code="unknown_node"): an id that no alive Ray node carries (the message
            lists the ids the cluster does carry).
        RunPlanRejection(code="ambiguous_node"): an id that several alive Ray nodes carry.
    Source: issue 8 ("a node id that no live Ray node carries is a typed rejection before any actor
    starts"); seed 000 RP-AR-1.
    """
    if ray_nodes is None:
        _require_ray()
        ray_nodes = ray.nodes()
    carriers: dict[str, list[str]] = collections.defaultdict(list)
    for n in ray_nodes:
        if n.get("Alive"):
            for pid in carried_node_ids(n):
                carriers[pid].append(str(n["NodeID"]))
    out: dict[str, str] = {}
    for pid in dict.fromkeys(node_ids):
        found = carriers.get(pid, [])
        if not found:
            known = ", ".join(sorted(carriers)) or "none"
            raise RunPlanRejection(f"node id {pid!r} is carried by no live Ray node (label {NODE_LABEL}={pid} or "
                                   f"resource {node_resource(pid)}); the cluster carries: {known}",
                                   code="unknown_node", where=pid)
        if len(found) > 1:
            raise RunPlanRejection(f"node id {pid!r} is carried by {len(found)} live Ray nodes "
                                   f"({', '.join(f[:12] for f in found)}); it must name exactly one",
                                   code="ambiguous_node", where=pid)
        out[pid] = found[0]
    return out


# --------------------------------------------------------------------------- edge buffers (actor side)
class _Inbox:
    """The consumer's buffer of one edge.

    ``put(n, frame)`` (called by the producer's ``push`` number ``n``, counting from 0) returns only when
    the frame has been taken by ``get`` (or on stop): that is what makes a producer's outstanding push
    calls count the objects in flight. A threaded actor may *start* concurrent push calls in any order,
    so ``put`` admits frames strictly in producer order (push ``n`` waits until ``0..n-1`` are queued).
    """

    def __init__(self):
        self._q: queue.Queue = queue.Queue()
        self._cond = threading.Condition()
        self._next = 0

    def put(self, n: int, frame: Frame, stop: threading.Event) -> bool:
        with self._cond:
            while self._next != n:
                if stop.is_set():
                    return False
                self._cond.wait(0.05)
            taken = threading.Event()
            self._q.put((frame, taken))
            self._next += 1
            self._cond.notify_all()
        while not taken.wait(0.05):
            if stop.is_set():
                return False
        return True

    def get(self, timeout: float | None) -> Frame | None:
        try:
            frame, taken = self._q.get(timeout=timeout)
        except queue.Empty:
            return None
        taken.set()
        return frame


class _InboxRecv(RecvEndpoint):
    def __init__(self, edge_id: str, inbox: _Inbox):
        self.edge_id, self._inbox = edge_id, inbox

    def recv(self, timeout: float | None = None) -> Frame | None:
        f = self._inbox.get(timeout)
        if f is not None and f.op == DATA and f.array is not None and not f.array.flags.writeable:
            f = f._replace(array=np.array(f.array, copy=True))  # Ray objects are read-only
        return f


class _OutboxSend(QueueSend):
    """Producer side of an orchestrator-consumed edge: a bounded queue of ``slots`` frames that the
    orchestrator pulls (Ray cannot call into the driver)."""


# --------------------------------------------------------------------------- endpoints (any side)
class _Peer:
    """A named actor looked up lazily (it may still be being created when first needed)."""

    def __init__(self, name: str, namespace: str | None):
        self.name, self.namespace = name, namespace
        self.handle: Any = None
        self.dead: str | None = None

    def get(self) -> Any:
        if self.handle is None:
            end = time.monotonic() + RESOLVE_TIMEOUT_S
            while True:
                try:
                    self.handle = ray.get_actor(self.name, namespace=self.namespace)
                    break
                except ValueError as e:
                    if time.monotonic() > end:
                        raise EndpointError(f"no actor {self.name!r} in the run: {e}", where=self.name) from None
                    time.sleep(0.05)
        return self.handle


class _PushSend(SendEndpoint):
    """Producer side of a stage-consumed edge: ``push`` calls to the consumer actor, at most
    ``RingSpec.slots`` outstanding. A dead consumer makes ``send`` return False (the edge never frees):
    the orchestrator attributes the fault to the dead stage, not to this producer."""

    def __init__(self, route: EdgeRoute, peer: _Peer):
        self.edge_id, self.object_spec, self.ring_spec = route.edge_id, route.object_spec, route.ring_spec
        self.slots = max(1, route.ring_spec.slots)
        self._peer = peer
        self._pending: collections.deque = collections.deque()
        self.sent = 0

    def _reap(self, timeout: float) -> None:
        """Drop completed push calls; wait up to ``timeout`` s for the oldest when all slots are used."""
        while self._pending:
            ready, _ = ray.wait([self._pending[0]], num_returns=1,
                                timeout=timeout if len(self._pending) >= self.slots else 0)
            if not ready:
                return
            ref = self._pending.popleft()
            try:
                ray.get(ref)
            except RayActorError as e:
                self._peer.dead = str(e).splitlines()[0] if str(e) else type(e).__name__
                return

    def send(self, frame: Frame, timeout: float | None = None) -> bool:
        if frame.op == DATA:
            assert frame.array is not None
            check_object(self.edge_id, self.object_spec, self.ring_spec, frame.array)
            check_segments(self.edge_id, frame)
        if self._peer.dead is not None:
            if timeout:
                time.sleep(min(timeout, 0.05))
            return False
        handle = self._peer.get()
        self._reap(1e9 if timeout is None else timeout)
        if self._peer.dead is not None or len(self._pending) >= self.slots:
            return False
        self._pending.append(handle.push.remote(self.edge_id, self.sent, frame))
        self.sent += 1
        return True

    @property
    def in_flight(self) -> int:
        """Push calls sent and not yet known to be taken by the consumer (<= ``slots``)."""
        self._reap(0.0)
        return len(self._pending)


class _PullRecv(RecvEndpoint):
    """Orchestrator side of an orchestrator-consumed edge: pulls from the producer actor's outbox.
    A dead producer makes ``recv`` return None (the backend reports the dead stage)."""

    def __init__(self, edge_id: str, peer: _Peer):
        self.edge_id, self._peer = edge_id, peer
        self.received = 0

    def recv(self, timeout: float | None = None) -> Frame | None:
        if self._peer.dead is not None:
            time.sleep(min(timeout or 0.0, 0.05))
            return None
        wait = 1.0 if timeout is None else max(0.0, timeout)
        try:
            f = ray.get(self._peer.get().pull.remote(self.edge_id, wait), timeout=wait + 30.0)
        except RayActorError as e:
            self._peer.dead = str(e).splitlines()[0] if str(e) else type(e).__name__
            return None
        except GetTimeoutError:
            return None
        if f is not None:
            self.received += 1
        return f


# --------------------------------------------------------------------------- shared-memory channels
def _ray_channel_types() -> tuple[Any, Any]:
    from ray.experimental.channel.shared_memory_channel import BufferedSharedMemoryChannel, SharedMemoryType

    return BufferedSharedMemoryChannel, SharedMemoryType


def _new_channel(writer: Any, reader: Any, reader_node: str, buffers: int, nbytes: int,
                 wait: str = "backoff") -> _Chan:
    """A Ray shared-memory channel written by ``writer`` (an actor handle; None: the driver) and read by
    ``reader`` on Ray node ``reader_node``, with ``buffers`` buffers of ``nbytes`` bytes, and a doorbell when
    the reader is on this Ray node and reads wait by ``backoff`` (:class:`_Chan`). Must be built in the
    writer's process (Ray's rule)."""
    buffered, shm_type = _ray_channel_types()
    chan = buffered(writer, [(reader, reader_node)], max(1, buffers),
                    shm_type(buffer_size_bytes=max(ACK_BYTES, int(nbytes))))
    bell = None
    if wait == "backoff" and reader_node == _node_id_of_self():
        try:
            bell = RingSemaphore(0, track=False)
        except OSError:  # no POSIX semaphores here: the reader polls
            bell = None
    return _Chan(chan, bell)


def _self_actor() -> Any:
    """This process's actor handle; None on the driver."""
    try:
        return ray.get_runtime_context().current_actor
    except RuntimeError:
        return None


def _node_id_of_self(_actor: Any = None) -> str:
    return ray.get_runtime_context().get_node_id()


def _node_of(handle: Any) -> str:
    """Hex id of the Ray node the actor ``handle`` runs on (one ``__ray_call__``)."""
    return str(ray.get(handle.__ray_call__.remote(_node_id_of_self), timeout=RESOLVE_TIMEOUT_S))


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _first_line(e: BaseException) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def _channel_read(chan: Any, timeout: float | None, wait: str) -> Any:
    """``chan.read`` within ``timeout`` s (None: forever). ``wait="spin"``: Ray's blocking read; ``"backoff"``:
    non-blocking reads (``timeout=0``) between sleeps of :data:`BACKOFF_FIRST_S` doubling to
    :data:`BACKOFF_MAX_S`. Raises RayChannelTimeoutError on timeout, RayChannelError when the channel broke."""
    if wait == "spin":
        return chan.read(timeout=timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    nap = BACKOFF_FIRST_S
    while True:
        try:
            return chan.read(timeout=0)
        except RayChannelTimeoutError:
            left = _left(deadline)
            if left is not None and left <= 0:
                raise
        time.sleep(nap if left is None else min(nap, left))
        nap = min(2 * nap, BACKOFF_MAX_S)


class _Chan:
    """A Ray shared-memory channel plus, where its reader runs on the writer's Ray node, a doorbell: a named POSIX
    semaphore (:class:`~pipeplan.runtime.shm_ring.RingSemaphore`, not tracked) that the writer posts once per
    value written. A reader blocks on it (no CPU while it waits, woken by the post) instead of polling between
    sleeps; every :data:`BELL_SLICE_S` it reads the channel itself, so a broken channel still raises. Pickles with
    the bell's name: the process that unpickles it (the reader's) opens the bell and removes the name."""

    def __init__(self, chan: Any, bell: RingSemaphore | None):
        self.chan, self.bell = chan, bell

    def __reduce__(self):
        return (_open_chan, (self.chan, None if self.bell is None else self.bell.name))

    def copy(self) -> _Chan:
        """A copy with its own copy of the Ray channel (which keeps its buffer position) and the same bell."""
        return _Chan(copy.copy(self.chan), self.bell)

    def write(self, value: Any, timeout: float | None) -> None:
        self.chan.write(value, timeout=timeout)
        if self.bell is not None:
            try:
                self.bell.release()
            except (ValueError, OSError):  # count at its maximum (a reader that never opened it): it polls
                pass

    def read(self, timeout: float | None, wait: str) -> Any:
        """The next value within ``timeout`` s (None: forever); see :func:`_channel_read` for ``wait`` and the
        errors."""
        if self.bell is None:
            return _channel_read(self.chan, timeout, wait)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = _left(deadline)
            nap = BELL_SLICE_S if left is None else min(left, BELL_SLICE_S)
            rung = self.bell.acquire(True, nap)
            try:
                return self.chan.read(timeout=0)
            except RayChannelTimeoutError:  # unrung, or the post of a value already read unrung
                if not rung and left is not None and left <= nap:
                    raise

    def close(self) -> None:
        try:
            self.chan.close()
        finally:
            if self.bell is not None:
                self.bell.unlink()


def _open_chan(chan: Any, bell_name: str | None) -> _Chan:
    bell = None
    if bell_name is not None:
        try:
            bell = RingSemaphore(0, name=bell_name)
            _multiprocessing.sem_unlink(bell_name)
        except OSError:  # gone (another copy took it) or not openable: this reader polls
            pass
    return _Chan(chan, bell)


_WIRE = struct.Struct("<qqqBBH")
"""Header of a DATA frame on a channel: seq_id, position, slot, dtype code, ndim, number of segments."""
_WIRE_DTYPES = tuple(NUMPY_DTYPES.values())
_WIRE_CODES = {dt: i for i, dt in enumerate(_WIRE_DTYPES)}


def _encode(frame: Frame) -> Frame | bytes:
    """What a channel carries for ``frame``: a DATA frame without sampler as bytes (:data:`_WIRE`, the shape, the
    segment table as int64 rows, then the array), which Ray writes into the buffer as they are; any other frame
    as itself, pickled by Ray."""
    a = frame.array
    code = None if a is None else _WIRE_CODES.get(a.dtype)
    if frame.op != DATA or a is None or code is None or frame.sampler is not None or a.ndim > 255:
        return frame
    segs = frame.segments or ()
    return b"".join((_WIRE.pack(frame.seq_id, frame.position, frame.slot, code, a.ndim, len(segs)),
                     struct.pack(f"<{a.ndim}q", *a.shape),
                     struct.pack(f"<{4 * len(segs)}q", *itertools.chain.from_iterable(segs)),
                     np.ascontiguousarray(a).data))


def _decode(value: Any) -> Frame:
    """The Frame a channel read returned (:func:`_encode`), with its own writable array."""
    if not isinstance(value, bytes | bytearray):
        return _owned(value)
    seq_id, position, slot, code, ndim, n_seg = _WIRE.unpack_from(value)
    off = _WIRE.size
    shape = struct.unpack_from(f"<{ndim}q", value, off)
    off += 8 * ndim
    segments = None
    if n_seg:
        rows = struct.unpack_from(f"<{4 * n_seg}q", value, off)
        segments = tuple(Segment(*rows[i:i + 4]) for i in range(0, 4 * n_seg, 4))
        off += 32 * n_seg
    array = np.frombuffer(value, _WIRE_DTYPES[code], math.prod(shape), off).reshape(shape).copy()
    return Frame(DATA, seq_id, position, array, None, slot, segments)


def _owned(frame: Frame) -> Frame:
    """``frame`` with its own copy of the DATA array. A value read from a channel maps the channel's buffer
    (read-only), and Ray frees that buffer for the next write only once the read value is dropped, so the
    copy is what releases the slot (every other field of the Frame is kept as is)."""
    if frame.array is not None:
        return frame._replace(array=np.array(frame.array, copy=True))
    return frame


class _Credits:
    """Producer-side credit count of one channel edge: ``sent - acked < slots`` before each write.

    ``acked`` is the consumer's count of taken frames, read from the edge's ack channel (one int per taken
    frame, written by the consumer). A Ray channel whose reader is on another Ray node holds more than its
    buffer count (Ray's writer buffer, the push to the reader's node and the reader's buffer), so the
    RingSpec bound comes from these credits, not from the channel's buffers."""

    def __init__(self, slots: int, wait: str = "backoff"):
        self.slots = max(1, slots)
        self.wait = wait
        self.sent = 0
        self.acked = 0
        self.ack: Any = None
        self._ack_ready = threading.Event()

    def set_ack(self, ack: Any) -> None:
        self.ack = ack
        self._ack_ready.set()

    def _read_ack(self, timeout: float | None) -> bool:
        if self.ack is None and not self._ack_ready.wait(timeout):
            return False
        try:
            self.acked = max(self.acked, int.from_bytes(self.ack.read(timeout, self.wait), "little"))
        except RayChannelTimeoutError:
            return False
        return True

    def wait_free(self, deadline: float | None) -> bool:
        """Wait (until ``deadline``, monotonic s; None: forever) for a free slot; False on timeout."""
        while self.sent - self.acked >= self.slots:
            if not self._read_ack(_left(deadline)):
                return False
        return True

    def drain(self) -> None:
        """Read every ack already written (never blocks)."""
        while self.sent > self.acked and self._read_ack(0.0):
            pass


class _ChannelInbox:
    """Consumer side of one channel edge: the data channel (attached when the producer hands it over) and
    the ack channel this side writes one cumulative taken-count into per frame taken."""

    def __init__(self, slots: int, wait: str = "backoff"):
        self.slots = max(1, slots)
        self.wait = wait
        self.taken = 0
        self._chan: Any = None
        self._ack: Any = None
        self._ready = threading.Event()

    @property
    def attached(self) -> bool:
        return self._ready.is_set()

    def attach(self, chan: Any, ack: Any) -> None:
        self._chan, self._ack = chan, ack
        self._ready.set()

    def accept(self, chan: Any, ack_reader: Any, ack_node: str) -> Any:
        """Attach the producer's ``chan`` and build the ack channel (written here, read by ``ack_reader`` on
        ``ack_node``); returns the ack channel for the producer. Actor side."""
        ack = _new_channel(_self_actor(), ack_reader, ack_node, self.slots + 1, ACK_BYTES, self.wait)
        self.attach(chan, ack)
        return ack

    def get(self, timeout: float | None) -> Frame | None:
        """Take the next frame (None after ``timeout`` s). Raises RayChannelError when the channel broke."""
        if not self._ready.wait(timeout):
            return None
        try:
            frame = _decode(self._chan.read(timeout, self.wait))
        except RayChannelTimeoutError:
            return None
        self.taken += 1
        # never blocks: at most `slots` acks are unread (the producer reads one before each write past
        # `slots` in flight) and the ack channel has slots + 1 buffers; it fails only when the producer's
        # end is gone, and the frame is still this consumer's
        try:
            self._ack.write(self.taken.to_bytes(8, "little"), timeout=ACK_WRITE_S)
        except RayChannelError:
            pass
        return frame


class _OutChannel:
    """Producer side, in the producer's actor, of an orchestrator-consumed channel edge: the data channel
    (published when the stage connects) for the driver to fetch, and the credits its ack channel feeds."""

    def __init__(self):
        self.chan: Any = None
        self.credits: _Credits | None = None
        self._ready = threading.Event()

    def publish(self, chan: _Chan, credits: _Credits) -> None:
        """Publish ``chan`` before its first write: the driver gets a copy taken now, since a Ray buffered
        channel pickles its write position and its reader must start at buffer 0."""
        self.chan, self.credits = chan.copy(), credits
        self._ready.set()

    def wait(self, timeout: float) -> Any:
        return self.chan if self._ready.wait(timeout) else None


class _PeerSend(SendEndpoint):
    """What a channel and a socket edge's producer share: the route's specs, the consumer's peer (None: the
    orchestrator), the first broken call's line in ``dead`` (told to the peer), and the checks before a send."""

    def __init__(self, route: EdgeRoute, transport: RayTransport, consumer_node_id: str):
        self.edge_id, self.object_spec, self.ring_spec = route.edge_id, route.object_spec, route.ring_spec
        self.slots = max(1, route.ring_spec.slots)
        self._tr = transport
        self._peer = None if consumer_node_id == ORCHESTRATOR_NODE else transport._peer(consumer_node_id, route.edge_id)
        self.dead: str | None = None

    def _broken(self, e: BaseException) -> None:
        self.dead = _first_line(e)
        if self._peer is not None:
            self._peer.dead = self.dead

    def _may_send(self, frame: Frame, timeout: float | None) -> bool:
        """Check a DATA frame against the edge's specs (EndpointError); False (after at most 50 ms of
        ``timeout``) when the edge or its consumer is dead."""
        if frame.op == DATA:
            assert frame.array is not None
            check_object(self.edge_id, self.object_spec, self.ring_spec, frame.array)
            check_segments(self.edge_id, frame)
        if self.dead is not None or (self._peer is not None and self._peer.dead is not None):
            if timeout:
                time.sleep(min(timeout, 0.05))
            return False
        return True


class _ChannelSend(_PeerSend):
    """Producer side of a channel edge: each Frame is written whole into a Ray shared-memory channel
    (``RingSpec.slots`` buffers of ``slot_bytes`` + :data:`CHANNEL_OVERHEAD_BYTES`), at most ``slots``
    frames not yet taken by the consumer (:class:`_Credits`). In a stage actor the channel is built when
    the stage connects; on the driver at the first send. A broken channel or dead consumer makes ``send``
    return False (the backend attributes the fault to the dead stage)."""

    def __init__(self, route: EdgeRoute, transport: RayTransport, consumer_node_id: str):
        super().__init__(route, transport, consumer_node_id)
        self._consumer = consumer_node_id
        self._credits = _Credits(self.slots, transport.wait)
        self._chan: Any = None

    @property
    def sent(self) -> int:
        return self._credits.sent

    def connect(self) -> None:
        """Build the channel and hand it to the consumer (blocks up to :data:`RESOLVE_TIMEOUT_S`).
        Raises EndpointError when the consumer cannot be reached."""
        if self._chan is not None:
            return
        size = self.ring_spec.slot_bytes + CHANNEL_OVERHEAD_BYTES
        me = _self_actor()
        try:
            if self._consumer == ORCHESTRATOR_NODE:
                holder = self._tr._local.get(self.edge_id)
                if not isinstance(holder, _OutChannel):
                    raise EndpointError(f"edge {self.edge_id!r} to the orchestrator is sent from the actor that holds "
                                        f"it, not from this process", where=self.edge_id)
                proxy = self._tr._proxy_handle()
                chan = _new_channel(me, proxy, _node_of(proxy), self.slots, size, self._tr.wait)
                holder.publish(chan, self._credits)  # the driver fetches it and hands back the ack channel
            else:
                assert self._peer is not None
                consumer = self._peer.get()
                chan = _new_channel(me, consumer, _node_of(consumer), self.slots, size, self._tr.wait)
                ack_reader = me if me is not None else self._tr._proxy_handle()
                ack = ray.get(consumer.accept_channel.remote(self.edge_id, chan, ack_reader,
                                                             _node_id_of_self()), timeout=RESOLVE_TIMEOUT_S)
                self._credits.set_ack(ack)
        except (RayActorError, GetTimeoutError, RayChannelError) as e:
            raise EndpointError(f"cannot connect channel edge {self.edge_id!r} to node {self._consumer!r}: "
                                f"{type(e).__name__}: {_first_line(e)}", where=self.edge_id) from None
        self._chan = chan

    def send(self, frame: Frame, timeout: float | None = None) -> bool:
        if not self._may_send(frame, timeout):
            return False
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            self.connect()
            if not self._credits.wait_free(deadline):
                return False
            self._chan.write(_encode(frame), timeout=_left(deadline))
        except RayChannelTimeoutError:
            return False
        except (RayActorError, RayChannelError) as e:
            self._broken(e)
            return False
        self._credits.sent += 1
        return True

    @property
    def in_flight(self) -> int:
        """Frames sent and not yet known to be taken by the consumer (<= ``slots``)."""
        self._credits.drain()
        return self._credits.sent - self._credits.acked

    def close(self) -> None:
        if self._chan is not None and _self_actor() is None:
            try:
                self._chan.close()
            except Exception:  # noqa: BLE001 - best effort: the actors holding the other ends are gone
                pass


class _TakenRecv(RecvEndpoint):
    """Consumer side of an edge whose frames an inbox in a stage actor takes (``inbox.get``, ``inbox.taken``);
    an exception of ``broken`` (the producer's end is gone) is no frame: the backend reports the dead stage."""

    broken: tuple[type[BaseException], ...] = ()

    def __init__(self, edge_id: str, inbox: Any):
        self.edge_id, self._inbox = edge_id, inbox

    @property
    def received(self) -> int:
        return self._inbox.taken

    def recv(self, timeout: float | None = None) -> Frame | None:
        try:
            return self._inbox.get(timeout)
        except self.broken:
            time.sleep(min(timeout or 0.0, 0.05))
            return None


class _ChannelRecv(_TakenRecv):
    """Consumer side of a channel edge in a stage actor (:class:`_ChannelInbox`)."""

    broken = (RayChannelError,)


class _ChannelPull(RecvEndpoint):
    """Driver side of an orchestrator-consumed channel edge: fetches the producer actor's channel once
    (``out_channel``), hands it the ack channel (``accept_ack``), then reads frames from shared memory."""

    def __init__(self, route: EdgeRoute, peer: _Peer, wait: str = "backoff"):
        self.edge_id, self._peer = route.edge_id, peer
        self._inbox = _ChannelInbox(route.ring_spec.slots, wait)

    @property
    def received(self) -> int:
        return self._inbox.taken

    def _attach(self, wait: float) -> bool:
        producer = self._peer.get()
        chan = ray.get(producer.out_channel.remote(self.edge_id, wait), timeout=wait + RESOLVE_TIMEOUT_S)
        if chan is None:
            return False
        ack = _new_channel(None, producer, _node_of(producer), self._inbox.slots + 1, ACK_BYTES, self._inbox.wait)
        ray.get(producer.accept_ack.remote(self.edge_id, ack), timeout=RESOLVE_TIMEOUT_S)
        self._inbox.attach(chan, ack)
        return True

    def close(self) -> None:
        """Close the ack channel the driver wrote (Ray keeps pushing a channel to a reader on another Ray node
        from a thread of the writer's process until it is closed)."""
        ack = self._inbox._ack
        if ack is not None and _self_actor() is None:
            try:
                ack.close()
            except Exception:  # noqa: BLE001 - best effort: the producer's end may be gone
                pass

    def recv(self, timeout: float | None = None) -> Frame | None:
        if self._peer.dead is not None:
            time.sleep(min(timeout or 0.0, 0.05))
            return None
        try:
            if not self._inbox.attached and not self._attach(1.0 if timeout is None else max(0.0, timeout)):
                return None
            return self._inbox.get(timeout)
        except (RayActorError, RayChannelError) as e:
            if isinstance(e, RayChannelTimeoutError):
                return None
            self._peer.dead = _first_line(e)
            return None
        except GetTimeoutError:
            return None


# --------------------------------------------------------------------------- TCP streams between Ray nodes
_MSG = struct.Struct("<QB")
"""Header of a message on a socket edge: body bytes, kind (0: a DATA frame as :func:`_encode` bytes, 1: a pickled
Frame)."""
_ACK = struct.Struct("<q")
"""An ack on a socket edge: the consumer's cumulative count of frames taken."""


class _StreamBroken(Exception):
    """The other end of a socket edge closed or reset the connection."""


class _Stream:
    """One connected TCP stream of a socket edge (``TCP_NODELAY``): whole frames from producer to consumer, and
    the consumer's cumulative taken-count (:data:`_ACK`) back per frame taken. A read waits in ``poll`` (no CPU),
    then takes what has arrived into a buffer (one ``recv`` for a small frame) until the message is whole; a send
    writes the whole message (it waits only while a frame larger than the socket buffers is being read by its
    consumer). Raises :class:`_StreamBroken` when the other end is gone."""

    def __init__(self, sock: socket.socket):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(True)
        self.sock = sock
        self._poll = select.poll()
        self._poll.register(sock, select.POLLIN)
        self._buf = bytearray()
        self._pos = 0
        self._acks = bytearray()
        self._lock = threading.Lock()
        self.acked = 0

    def _readable(self, timeout: float | None) -> bool:
        return bool(self._poll.poll(None if timeout is None else max(0, int(timeout * 1000 + 0.999))))

    def _fill(self, need: int) -> None:
        """Read until ``need`` unread bytes are buffered."""
        if self._pos and (self._pos == len(self._buf) or self._pos > 1 << 20):
            del self._buf[:self._pos]
            self._pos = 0
        try:
            while len(self._buf) - self._pos < need:
                chunk = self.sock.recv(max(1 << 16, need - (len(self._buf) - self._pos)))
                if not chunk:
                    raise _StreamBroken("connection closed by the producer")
                self._buf += chunk
        except OSError as e:
            raise _StreamBroken(f"{type(e).__name__}: {e}") from None

    def _take(self, n: int) -> bytearray:
        self._fill(n)
        out = self._buf[self._pos:self._pos + n]
        self._pos += n
        return out

    def write_frame(self, frame: Frame) -> None:
        wire = _encode(frame)
        body, kind = (wire, 0) if isinstance(wire, bytes) else (pickle.dumps(wire, 5), 1)
        try:
            self.sock.sendall(_MSG.pack(len(body), kind) + body, socket.MSG_NOSIGNAL)
        except OSError as e:
            raise _StreamBroken(f"{type(e).__name__}: {e}") from None

    def read_frame(self, timeout: float | None) -> Frame | None:
        """The next frame, or None when none starts within ``timeout`` s (None: forever)."""
        if len(self._buf) == self._pos and not self._readable(timeout):
            return None
        n, kind = _MSG.unpack(self._take(_MSG.size))
        body = self._take(n)
        return _decode(body) if kind == 0 else pickle.loads(body)

    def write_ack(self, taken: int) -> None:
        try:
            self.sock.sendall(_ACK.pack(taken), socket.MSG_NOSIGNAL)
        except OSError as e:
            raise _StreamBroken(f"{type(e).__name__}: {e}") from None

    def read_acks(self, timeout: float | None) -> None:
        """Take the acks that arrived (waiting up to ``timeout`` s for one when none has: 0 never waits) into
        :attr:`acked`."""
        with self._lock:
            if timeout != 0 and not self._readable(timeout):
                return
            try:
                chunk = self.sock.recv(65536, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                raise _StreamBroken(f"{type(e).__name__}: {e}") from None
            if not chunk:
                raise _StreamBroken("connection closed by the consumer")
            self._acks += chunk
            whole = len(self._acks) // _ACK.size * _ACK.size
            if whole:
                self.acked = max(self.acked, _ACK.unpack_from(self._acks, whole - _ACK.size)[0])
                del self._acks[:whole]

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class _Listener:
    """The end of a socket edge held by the actor the registry names for it (the consumer of a stage-consumed edge,
    the producer of one the orchestrator consumes): a TCP listener on this Ray node's address (``address``, built
    on first call) that takes the one connection the other end makes."""

    def __init__(self):
        self._srv: socket.socket | None = None
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self.stream: _Stream | None = None

    def address(self) -> tuple[str, int]:
        """``(host, port)`` the other end connects to. Actor side."""
        with self._lock:
            if self._srv is None:
                host = ray.util.get_node_ip_address()
                self._srv = socket.create_server((host, 0), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
                threading.Thread(target=self._accept, args=(self._srv,), name="pipeplan-edge-accept",
                                 daemon=True).start()
            host, port = self._srv.getsockname()[:2]
            return str(host), int(port)

    def _accept(self, srv: socket.socket) -> None:
        try:
            sock, _ = srv.accept()
        except OSError:
            return
        finally:
            srv.close()
        self.adopt(_Stream(sock))

    def adopt(self, stream: _Stream) -> None:
        """Take ``stream`` as this end's connection (accepted here, or connected by this end)."""
        self.stream = stream
        self._ready.set()

    def wait(self, timeout: float | None) -> _Stream | None:
        """The connected stream (None when the other end has not connected within ``timeout`` s)."""
        return self.stream if self._ready.wait(timeout) else None


class _SocketInbox(_Listener):
    """Consumer side of a socket edge in a stage actor: frames read from the stream, one ack written per frame
    taken."""

    def __init__(self):
        super().__init__()
        self.taken = 0

    def get(self, timeout: float | None) -> Frame | None:
        """Take the next frame (None after ``timeout`` s). Raises _StreamBroken when the producer is gone."""
        deadline = None if timeout is None else time.monotonic() + timeout
        stream = self.wait(timeout)
        if stream is None:
            return None
        frame = stream.read_frame(_left(deadline))
        if frame is None:
            return None
        self.taken += 1
        try:
            stream.write_ack(self.taken)
        except _StreamBroken:  # the producer is gone; the frame is still this consumer's
            pass
        return frame


def _connect_stream(peer: _Peer, method: str, edge_id: str, timeout: float) -> _Stream:
    """Connect to the listener of ``edge_id`` in the actor ``peer`` (its ``method`` returns the address). Raises
    RayActorError / GetTimeoutError (actor) or EndpointError (no connection)."""
    host, port = ray.get(getattr(peer.get(), method).remote(edge_id), timeout=timeout)
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as e:
        raise EndpointError(f"cannot connect socket edge {edge_id!r} to {host}:{port} ({type(e).__name__}: {e}); "
                            f"a cluster whose nodes cannot reach each other's ports runs with "
                            f"{TRANSPORT_ENV}=actor", where=edge_id) from None
    return _Stream(sock)


class _SocketSend(_PeerSend):
    """Producer side of a socket edge: each Frame is written whole on a TCP stream to the consumer, at most
    ``RingSpec.slots`` frames not yet taken (credits from the consumer's acks). To a stage: connects to the
    consumer actor's listener (a stage when it connects its edges, the driver at its first send); to the
    orchestrator: the stream the driver connected to this actor's listener. A broken stream or dead consumer makes
    ``send`` return False (the backend attributes the fault to the dead stage)."""

    def __init__(self, route: EdgeRoute, transport: RayTransport, consumer_node_id: str):
        super().__init__(route, transport, consumer_node_id)
        self._stream: _Stream | None = None
        self.sent = 0

    def connect(self, timeout: float | None = RESOLVE_TIMEOUT_S) -> bool:
        """Connect (to the orchestrator: wait up to ``timeout`` s for the driver to connect; False if it has not).
        Raises EndpointError when the consumer cannot be reached."""
        if self._stream is not None:
            return True
        if self._peer is None:
            holder = self._tr._local.get(self.edge_id)
            if not isinstance(holder, _Listener):
                raise EndpointError(f"edge {self.edge_id!r} to the orchestrator is sent from the actor that holds it, "
                                    f"not from this process", where=self.edge_id)
            self._stream = holder.wait(timeout)
            return self._stream is not None
        try:
            self._stream = _connect_stream(self._peer, "socket_address", self.edge_id, RESOLVE_TIMEOUT_S)
        except (RayActorError, GetTimeoutError) as e:
            raise EndpointError(f"cannot connect socket edge {self.edge_id!r}: {type(e).__name__}: {_first_line(e)}",
                                where=self.edge_id) from None
        return True

    def send(self, frame: Frame, timeout: float | None = None) -> bool:
        if not self._may_send(frame, timeout):
            return False
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            if not self.connect(timeout):
                return False
            stream = self._stream
            assert stream is not None
            if self.sent - stream.acked >= self.slots:  # acks are read only when the credits run out
                stream.read_acks(0)  # those that arrived, even with no time to wait (timeout=0)
                while self.sent - stream.acked >= self.slots:
                    left = _left(deadline)
                    if left is not None and left <= 0:
                        return False
                    stream.read_acks(left)
            stream.write_frame(frame)
        except _StreamBroken as e:
            self._broken(e)
            return False
        self.sent += 1
        return True

    @property
    def in_flight(self) -> int:
        """Frames sent and not yet known to be taken by the consumer (<= ``slots``)."""
        if self._stream is not None:
            try:
                self._stream.read_acks(0)
            except _StreamBroken:
                pass
            return self.sent - self._stream.acked
        return 0

    def close(self) -> None:
        if self._stream is not None and _self_actor() is None:
            self._stream.close()


class _SocketRecv(_TakenRecv):
    """Consumer side of a socket edge in a stage actor (:class:`_SocketInbox`)."""

    broken = (_StreamBroken,)


class _SocketPull(RecvEndpoint):
    """Driver side of an orchestrator-consumed socket edge: connects once to the producer actor's listener
    (``out_socket_address``), then reads frames and writes acks like :class:`_SocketInbox`."""

    def __init__(self, route: EdgeRoute, peer: _Peer):
        self.edge_id, self._peer = route.edge_id, peer
        self._inbox = _SocketInbox()

    @property
    def received(self) -> int:
        return self._inbox.taken

    def recv(self, timeout: float | None = None) -> Frame | None:
        if self._peer.dead is not None:
            time.sleep(min(timeout or 0.0, 0.05))
            return None
        try:
            if self._inbox.stream is None:
                self._inbox.adopt(_connect_stream(self._peer, "out_socket_address", self.edge_id, RESOLVE_TIMEOUT_S))
            return self._inbox.get(timeout)
        except (RayActorError, _StreamBroken) as e:
            self._peer.dead = _first_line(e)
            return None
        except GetTimeoutError:
            return None

    def close(self) -> None:
        if self._inbox.stream is not None:
            self._inbox.stream.close()


@dataclass(frozen=True)
class RunScope:
    """The identity of one started run on Ray: the namespace its actors live in and the name prefix
    ``pipeplan/<run_id>/<nonce>`` (a fresh nonce per start, so two runs of one plan never clash)."""

    namespace: str | None
    prefix: str

    def actor_name(self, stage: int, node_id: str) -> str:
        """Name of the actor of ``stage`` placed on ``node_id``."""
        return f"{self.prefix}/stage{stage}@{node_id}"


class RayTransport(Transport):
    """Endpoint resolution by ``(node_id, edge_id)`` over Ray named actors (see the module docstring).

    Args:
        routes: the run's routing table (``routes_from_provisions``).
        scope: the run's :class:`RunScope`.
        holders: the registry ``{(node_id, edge_id): actor name}`` of the actor holding each edge's
            buffer: the consumer for stage-consumed edges, the producer for orchestrator-consumed ones.

    Picklable (plain data): the copy given to an actor gets the actor's own buffers attached with
    :meth:`attach`. Raises EndpointError for an unknown ``(node_id, edge_id)``.
    """

    def __init__(self, routes: Mapping[str, EdgeRoute], scope: RunScope, holders: Mapping[tuple[str, str], str],
                 *, mode: str = "channel", proxy: str | None = None, wait: str = "backoff",
                 edge_modes: Mapping[str, str] | None = None):
        if mode not in TRANSPORTS:
            raise BackendError(f"unknown Ray transport {mode!r} (expected one of {', '.join(TRANSPORTS)})",
                               where="ray_transport")
        if wait not in WAITS:
            raise BackendError(f"unknown Ray channel wait {wait!r} (expected one of {', '.join(WAITS)})",
                               where="ray_wait")
        self.wait = wait
        self.routes = dict(routes)
        self.scope = scope
        self.holders = dict(holders)
        self.mode = mode
        self.edge_modes = dict(edge_modes or {})
        self.proxy = proxy
        self._local: dict[str, Any] = {}
        self._peers: dict[str, _Peer] = {}
        self._own_proxy: Any = None
        self.endpoints: dict[tuple[str, str, str], SendEndpoint | RecvEndpoint] = {}
        """Endpoints opened through this copy: ``(node_id, edge_id, "send"|"recv") -> endpoint`` (their
        ``sent``/``received``/``in_flight`` counters are for tests and benchmarks)."""

    def __getstate__(self):
        return {"routes": self.routes, "scope": self.scope, "holders": self.holders, "mode": self.mode,
                "proxy": self.proxy, "wait": self.wait, "edge_modes": self.edge_modes}

    def __setstate__(self, state):
        self.__init__(state["routes"], state["scope"], state["holders"], mode=state["mode"], proxy=state["proxy"],
                      wait=state["wait"], edge_modes=state["edge_modes"])

    def edge_mode(self, edge_id: str) -> str:
        """The transport (``channel`` | ``actor``) of ``edge_id``: its entry in ``edge_modes``, else the run's
        mode (``auto`` without an entry: ``channel``)."""
        mode = self.edge_modes.get(edge_id, self.mode)
        return "channel" if mode == "auto" else mode

    def _proxy_handle(self) -> Any:
        """The actor on the driver's Ray node that stands for the driver as a channel reader (Ray builds a
        remote reader's buffer through an actor call on the reader's node): the run's named proxy, or, for
        a transport built without one (driver side only), one started here and killed by :meth:`close`."""
        if self.proxy is not None:
            return self._peer_named(self.proxy).get()
        if self._own_proxy is None:
            if _self_actor() is not None:
                raise EndpointError("this run has no driver proxy actor for channels read by the driver",
                                    where="proxy")
            self._own_proxy = start_driver_proxy(None, None)
        return self._own_proxy

    def _peer_named(self, name: str) -> _Peer:
        if name not in self._peers:
            self._peers[name] = _Peer(name, self.scope.namespace)
        return self._peers[name]

    def attach(self, edge_id: str, buffer: Any) -> None:
        """Attach this process's buffer (an inbox or an outbox queue) of ``edge_id`` (actor side)."""
        self._local[edge_id] = buffer

    def _peer(self, node_id: str, edge_id: str) -> _Peer:
        name = self.holders.get((node_id, edge_id))
        if name is None:
            raise EndpointError(f"no actor holds edge {edge_id!r} for node {node_id!r} in run {self.scope.prefix}",
                                where=edge_id)
        return self._peer_named(name)

    def open_send(self, consumer_node_id: str, edge_id: str) -> SendEndpoint:
        r = self._route(consumer_node_id, edge_id)
        if self.edge_mode(edge_id) == "socket":
            sk = _SocketSend(r, self, consumer_node_id)
            if _self_actor() is not None and consumer_node_id != ORCHESTRATOR_NODE:  # as a channel: connect now
                sk.connect()
            self.endpoints[(consumer_node_id, edge_id, "send")] = sk
            return sk
        if self.edge_mode(edge_id) == "channel":
            ch = _ChannelSend(r, self, consumer_node_id)
            if _self_actor() is not None:  # a stage connects its edge now; the driver at its first send
                ch.connect()
            self.endpoints[(consumer_node_id, edge_id, "send")] = ch
            return ch
        if consumer_node_id == ORCHESTRATOR_NODE:
            q = self._local.get(edge_id)
            if q is None:
                raise EndpointError(f"edge {edge_id!r} to the orchestrator is sent from the actor that holds its "
                                    f"outbox, not from this process", where=edge_id)
            ep: SendEndpoint = _OutboxSend(r, q)
        else:
            ep = _PushSend(r, self._peer(consumer_node_id, edge_id))
        self.endpoints[(consumer_node_id, edge_id, "send")] = ep
        return ep

    def open_recv(self, node_id: str, edge_id: str) -> RecvEndpoint:
        r = self._route(node_id, edge_id)
        mode = self.edge_mode(edge_id)
        channel = mode == "channel"
        ep: RecvEndpoint
        if node_id == ORCHESTRATOR_NODE:
            peer = self._peer(node_id, edge_id)
            ep = (_ChannelPull(r, peer, self.wait) if channel else _SocketPull(r, peer) if mode == "socket"
                  else _PullRecv(edge_id, peer))
        else:
            inbox = self._local.get(edge_id)
            if isinstance(inbox, _ChannelInbox) and channel:
                ep = _ChannelRecv(edge_id, inbox)
            elif isinstance(inbox, _SocketInbox) and mode == "socket":
                ep = _SocketRecv(edge_id, inbox)
            elif isinstance(inbox, _Inbox) and mode == "actor":
                ep = _InboxRecv(edge_id, inbox)
            else:
                raise EndpointError(f"edge {edge_id!r} is received on node {node_id!r} by its stage actor, "
                                    f"not by this process", where=edge_id)
        self.endpoints[(node_id, edge_id, "recv")] = ep
        return ep

    def close(self) -> None:
        """Close the channels this process wrote (driver side) and kill a proxy started by
        :meth:`_proxy_handle`; the actors own every other buffer."""
        for ep in list(self.endpoints.values()):
            ep.close()
        if self._own_proxy is not None:
            end_actors([self._own_proxy])
            self._own_proxy = None


def build_registry(provisions: Sequence[ProvisionStage], scope: RunScope) -> dict[tuple[str, str], str]:
    """The ``(node_id, edge_id) -> actor name`` registry of a run: each stage's actor holds its inbound
    edge under ``(its node_id, inbound edge)`` and, when its outbound consumer is the orchestrator,
    that edge under ``("orchestrator", outbound edge)``."""
    reg: dict[tuple[str, str], str] = {}
    for p in provisions:
        name = scope.actor_name(p.stage, p.node_id)
        reg[(p.node_id, p.inbound.edge_id)] = name
        if p.outbound.peer_node_id == ORCHESTRATOR_NODE:
            reg[(ORCHESTRATOR_NODE, p.outbound.edge_id)] = name
    return reg


def edge_transports(routes: Mapping[str, EdgeRoute], ray_node_of: Mapping[str, str], mode: str) -> dict[str, str]:
    """The transport of each edge of a run (``edge id -> "channel" | "socket" | "actor"``): ``mode`` itself unless
    ``auto``; for ``auto``, ``channel`` where the producer's and the consumer's Ray nodes are the same
    (``ray_node_of``: plan node id, or ``"orchestrator"``, -> Ray node id) and ``socket`` otherwise. Raises
    BackendError for an unknown mode."""
    if mode not in TRANSPORTS:
        raise BackendError(f"unknown Ray transport {mode!r} (expected one of {', '.join(TRANSPORTS)})",
                           where="ray_transport")
    if mode != "auto":
        return {e: mode for e in routes}
    return {e: "channel" if ray_node_of[r.producer_node] == ray_node_of[r.consumer_node] else "socket"
            for e, r in routes.items()}


class _DriverProxy:
    """Stands for the driver as a channel reader on the driver's Ray node (as Ray Compiled Graphs'
    ``DAGDriverProxyActor``): writers on other nodes build the driver's reader buffer through it."""

    def node(self) -> str:
        return ray.get_runtime_context().get_node_id()


def start_driver_proxy(name: str | None, namespace: str | None) -> Any:
    """Start a :class:`_DriverProxy` actor pinned (hard affinity, 0 CPUs) to this driver's Ray node and wait
    until it runs; ``name``: its actor name (None: unnamed). Returns its handle."""
    here = ray.get_runtime_context().get_node_id()
    opts: dict[str, Any] = {"num_cpus": 0, "max_restarts": 0,
                            "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=here, soft=False)}
    if name is not None:
        opts.update(name=name, namespace=namespace)
    handle = ray.remote(_DriverProxy).options(**opts).remote()
    ray.get(handle.node.remote(), timeout=RESOLVE_TIMEOUT_S)  # type: ignore[attr-defined]
    return handle


# --------------------------------------------------------------------------- the stage actor
def _take_niceness(niceness: int | None) -> None:
    """Set this process's niceness to ``niceness`` when it is lower than the current one and the process may
    (root, or ``RLIMIT_NICE``); otherwise leave it."""
    if niceness is None or os.getpriority(os.PRIO_PROCESS, 0) <= niceness:
        return
    try:
        os.setpriority(os.PRIO_PROCESS, 0, niceness)
    except OSError:  # not permitted: the cluster's worker_niceness stands
        pass


class StageActor:
    """Body of one stage's Ray actor (wrapped with ``ray.remote`` by :class:`RayBackend`).

    On construction it takes the driver's scheduling priority (``niceness``: Ray starts workers at
    ``worker_niceness``, 15 by default, so a stage would yield its core to every other process; kept as it
    is where this process may not raise its priority), attaches its edge buffers to its copy of the
    transport and starts a thread running ``StageWorker(provision).run(transport, stop)``: load (on this
    node) -> WeightsReady -> connect -> StageReady -> serve. Methods are called concurrently (threaded actor).
    """

    def __init__(self, provision: ProvisionStage, transport: RayTransport,
                 fault_injection: FaultInjection | None, options: WorkerOptions, niceness: int | None = None):
        from pipeplan.runtime.stage import StageWorker

        _take_niceness(niceness)
        self.p = provision
        self._cond = threading.Condition()
        self._events: list[Event] = []
        self._finished: str | None = None
        self._stop = threading.Event()
        self._inbox = _Inbox()
        self._outbox: queue.Queue = queue.Queue(maxsize=max(1, provision.outbound.ring_spec.slots))
        self._chan_inbox = _ChannelInbox(provision.inbound.ring_spec.slots, transport.wait)
        self._out_chan = _OutChannel()
        self._sock_inbox = _SocketInbox()
        self._out_sock = _Listener()
        inbound, outbound = provision.inbound.edge_id, provision.outbound.edge_id
        transport.attach(inbound, {"channel": self._chan_inbox, "socket": self._sock_inbox}.get(
            transport.edge_mode(inbound), self._inbox))
        if provision.outbound.peer_node_id == ORCHESTRATOR_NODE:
            transport.attach(outbound, {"channel": self._out_chan, "socket": self._out_sock}.get(
                transport.edge_mode(outbound), self._outbox))
        self.transport = transport
        num_threads = options.num_threads if options.num_threads is not None else 1
        self.worker = StageWorker(provision, self._emit, fault_injection=fault_injection, kernels=options.kernels,
                                  cache_dir=options.cache_dir, num_threads=num_threads,
                                  program=options.program_for(provision.stage), parallel=options.parallel)
        self._thread = threading.Thread(target=self._body, name=f"pipeplan-stage-{provision.stage}", daemon=True)
        self._thread.start()

    def _emit(self, ev: Event) -> None:
        with self._cond:
            self._events.append(ev)
            self._cond.notify_all()

    def _body(self) -> None:
        ok = self.worker.run(self.transport, self._stop)
        with self._cond:
            self._finished = "ok" if ok else "fault"
            self._cond.notify_all()

    # -- called by the orchestrator
    def poll_events(self, cursor: int, wait_s: float) -> tuple[list[Event], str | None]:
        """Events after index ``cursor`` (waiting up to ``wait_s`` s for one) and the worker's end
        state: None while running, ``"ok"`` (clean end) or ``"fault"``."""
        with self._cond:
            if len(self._events) <= cursor and self._finished is None:
                self._cond.wait(wait_s)
            return list(self._events[cursor:]), self._finished

    def where(self) -> dict[str, Any]:
        """Where this actor runs: ``{"ray_node_id": hex, "node_id": plan node id, "stage": k, "pid": pid,
        "niceness": its scheduling niceness}`` (``ray.get_runtime_context().get_node_id()``)."""
        return {"ray_node_id": ray.get_runtime_context().get_node_id(), "node_id": self.p.node_id,
                "stage": self.p.stage, "pid": os.getpid(), "niceness": os.getpriority(os.PRIO_PROCESS, 0)}

    def stop(self) -> None:
        """Ask the worker to stop (its loop sees the flag within ``POLL_S``)."""
        self._stop.set()

    def join(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the worker thread to end; True when it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # -- called by peers
    def push(self, edge_id: str, n: int, frame: Frame) -> bool:
        """Deliver ``frame``, the producer's ``n``-th object (from 0), on the inbound edge; returns once
        the stage has taken it (False on stop). Frames are taken in ``n`` order."""
        if edge_id != self.p.inbound.edge_id:
            raise EndpointError(f"stage {self.p.stage} on {self.p.node_id} does not consume edge {edge_id!r}",
                                where=edge_id)
        return self._inbox.put(n, frame, self._stop)

    def accept_channel(self, edge_id: str, chan: Any, ack_reader: Any, ack_node: str) -> Any:
        """Attach the producer's data channel of the inbound edge; returns the ack channel this actor
        writes one taken-count into per frame taken (read by ``ack_reader`` on Ray node ``ack_node``)."""
        if edge_id != self.p.inbound.edge_id:
            raise EndpointError(f"stage {self.p.stage} on {self.p.node_id} does not consume edge {edge_id!r}",
                                where=edge_id)
        return self._chan_inbox.accept(chan, ack_reader, ack_node)

    def socket_address(self, edge_id: str) -> tuple[str, int]:
        """``(host, port)`` of the listener of the inbound socket edge (the producer connects to it)."""
        if edge_id != self.p.inbound.edge_id:
            raise EndpointError(f"stage {self.p.stage} on {self.p.node_id} does not consume edge {edge_id!r}",
                                where=edge_id)
        return self._sock_inbox.address()

    def out_socket_address(self, edge_id: str) -> tuple[str, int]:
        """``(host, port)`` of the listener of the orchestrator-consumed outbound socket edge (the driver
        connects to it)."""
        self._check_out(edge_id)
        return self._out_sock.address()

    def _check_out(self, edge_id: str) -> None:
        if edge_id != self.p.outbound.edge_id or self.p.outbound.peer_node_id != ORCHESTRATOR_NODE:
            raise EndpointError(f"stage {self.p.stage} holds no outbound channel for edge {edge_id!r}", where=edge_id)

    def out_channel(self, edge_id: str, wait_s: float) -> Any:
        """The data channel of the orchestrator-consumed outbound edge once the stage has connected it
        (None after ``wait_s`` s)."""
        self._check_out(edge_id)
        return self._out_chan.wait(wait_s)

    def accept_ack(self, edge_id: str, ack: Any) -> bool:
        """Attach the driver's ack channel of the orchestrator-consumed outbound edge."""
        self._check_out(edge_id)
        if self._out_chan.credits is None:
            raise EndpointError(f"edge {edge_id!r} is not connected yet", where=edge_id)
        self._out_chan.credits.set_ack(ack)
        return True

    def pull(self, edge_id: str, wait_s: float) -> Frame | None:
        """Take the next frame of the orchestrator-consumed outbound edge (None after ``wait_s`` s)."""
        if edge_id != self.p.outbound.edge_id or self.p.outbound.peer_node_id != ORCHESTRATOR_NODE:
            raise EndpointError(f"stage {self.p.stage} holds no outbox for edge {edge_id!r}", where=edge_id)
        try:
            return self._outbox.get(timeout=wait_s)
        except queue.Empty:
            return None


# --------------------------------------------------------------------------- the backend
class RayBackend(Backend):
    """Stages as Ray actors on the Ray nodes that carry their plan node ids (see the module docstring).

    Args:
        address: Ray cluster address for ``ray.init(address=...)`` (``"auto"`` works); None: use the
            Ray already initialised in this process, else start an embedded local instance; ``"local"``: an
            embedded local instance (unless Ray is already initialised in this process).
        namespace: Ray namespace for a connection this backend opens (None: Ray's default).
        init_kwargs: extra ``ray.init`` keyword arguments for a connection/instance this backend
            starts (e.g. ``_temp_dir``, ``object_store_memory``, ``include_dashboard``).
        max_concurrency: threads per stage actor (must exceed the inbound ring's ``slots`` + 3).
        ray_transport: ``"auto"`` (per edge: a Ray shared-memory channel within a Ray node, a TCP stream between
            Ray nodes), ``"channel"``, ``"socket"`` or ``"actor"`` (that transport on every edge); None:
            ``$PIPEPLAN_RAY_TRANSPORT``, else ``"auto"``. Unknown: BackendError (``bad_backend``).
        ray_wait: how a channel read waits (:data:`WAITS`): ``"backoff"`` or ``"spin"``; None:
            ``$PIPEPLAN_RAY_WAIT``, else ``"backoff"``. Unknown: BackendError (``bad_backend``).
    Raises (from :meth:`start`): RayUnavailableError (no ray / cannot connect), RunPlanRejection
        (``unknown_node``/``ambiguous_node``, before any actor is created).
    """

    name = "ray"
    transport: RayTransport

    def __init__(self, address: str | None = None, *, namespace: str | None = None,
                 init_kwargs: Mapping[str, Any] | None = None, max_concurrency: int | None = None,
                 ray_transport: str | None = None, ray_wait: str | None = None):
        mode = ray_transport if ray_transport is not None else (os.environ.get(TRANSPORT_ENV) or "auto")
        if mode not in TRANSPORTS:
            raise BackendError(f"unknown Ray transport {mode!r} (from {'ray_transport' if ray_transport else TRANSPORT_ENV}; "
                               f"expected one of {', '.join(TRANSPORTS)})", where=TRANSPORT_ENV)
        self.ray_transport = mode
        wait = ray_wait if ray_wait is not None else (os.environ.get(WAIT_ENV) or "backoff")
        if wait not in WAITS:
            raise BackendError(f"unknown Ray channel wait {wait!r} (from {'ray_wait' if ray_wait else WAIT_ENV}; "
                               f"expected one of {', '.join(WAITS)})", where=WAIT_ENV)
        self.ray_wait = wait
        self.address = address
        self.namespace = namespace
        self.init_kwargs = dict(init_kwargs or {})
        self.max_concurrency = max_concurrency
        self.actors: dict[int, Any] = {}
        self.names: dict[int, str] = {}
        self.proxy: Any = None
        self.proxy_name: str | None = None
        self.placement: dict[str, str] = {}
        self.edge_modes: dict[str, str] = {}
        """The transport of each edge of the started run (:func:`edge_transports`)."""
        self.transport = None  # type: ignore[assignment]
        self._provisions: dict[int, ProvisionStage] = {}
        self._cursor: dict[int, int] = {}
        self._poll: dict[int, Any] = {}
        self._events: collections.deque = collections.deque()
        self._dead: dict[int, str] = {}
        self._unavailable: dict[int, int] = {}
        self._finished: dict[int, str] = {}
        self._expect_exit = False
        self._stopped = False
        self._owns_ray = False
        self._connected_here = False

    # ------------------------------------------------------------------ connection
    def _connect(self, provisions: Sequence[ProvisionStage]) -> None:
        _require_ray()
        if ray.is_initialized():
            return
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if self.address is None or self.address == "local":  # an embedded instance ("local": even with RAY_ADDRESS)
            kw["resources"] = {node_resource(n): 1.0 for n in dict.fromkeys(p.node_id for p in provisions)}
            kw["num_cpus"] = max(1, len(provisions))
            if self.address == "local":
                kw["address"] = "local"
            self._owns_ray = True
        else:
            probe_ray_address(self.address)
            kw["address"] = self.address
        if self.namespace is not None:
            kw["namespace"] = self.namespace
        kw.update(self.init_kwargs)
        try:
            with _driver_signals_kept():
                ray.init(**kw)
        except Exception as e:  # ConnectionError, RuntimeError, ValueError from ray.init
            self._owns_ray = False
            what = f"connect to Ray at {self.address}" if self.address else "start an embedded Ray instance"
            first = str(e).splitlines()[0] if str(e) else ""
            raise RayUnavailableError(f"cannot {what}: {type(e).__name__}: {first}",
                                      where=self.address or "embedded") from None
        self._connected_here = True

    def check_placement(self, provisions: Sequence[ProvisionStage]) -> dict[str, str]:
        """Connect (if needed) and resolve every stage's node id to its Ray node (see :func:`resolve_nodes`).
        Creates no actor. Raises RunPlanRejection / RayUnavailableError."""
        self._connect(provisions)
        return resolve_nodes([p.node_id for p in provisions])

    # ------------------------------------------------------------------ Backend
    def start(self, provisions: Sequence[ProvisionStage], fault_injection: FaultInjection | None,
              options: WorkerOptions) -> None:
        """Resolve placement (rejecting unknown node ids before any actor exists), then create one named,
        node-pinned actor per stage. Returns at once; events arrive through :meth:`next_event`."""
        provisions = sorted(provisions, key=lambda p: p.stage)
        routes = routes_from_provisions(list(provisions))
        self.placement = self.check_placement(provisions)
        ns = ray.get_runtime_context().namespace
        run_id = provisions[0].run_id if provisions else "run"
        scope = RunScope(ns, f"pipeplan/{run_id}/{uuid.uuid4().hex[:12]}")
        ray_node_of = dict(self.placement)
        ray_node_of[ORCHESTRATOR_NODE] = ray.get_runtime_context().get_node_id()
        self.edge_modes = edge_transports(routes, ray_node_of, self.ray_transport)
        channel = "channel" in self.edge_modes.values()
        self.proxy_name = f"{scope.prefix}/driver" if channel else None
        self.transport = RayTransport(routes, scope, build_registry(provisions, scope), mode=self.ray_transport,
                                      proxy=self.proxy_name, wait=self.ray_wait, edge_modes=self.edge_modes)
        slots = max([p.inbound.ring_spec.slots for p in provisions] + [1])
        conc = self.max_concurrency or slots + 6
        if conc < slots + 4:
            raise BackendError(f"max_concurrency {conc} is too small for rings of {slots} slots "
                               f"(need >= {slots + 4})", where="max_concurrency")
        remote_cls = ray.remote(StageActor)
        try:
            if channel:  # the driver's stand-in reader, before any stage connects its token-out channel
                self.proxy = start_driver_proxy(self.proxy_name, ns)
            for p in provisions:
                name = scope.actor_name(p.stage, p.node_id)
                strategy = NodeAffinitySchedulingStrategy(node_id=self.placement[p.node_id], soft=False)
                self.actors[p.stage] = remote_cls.options(
                    name=name, namespace=ns, num_cpus=0, max_concurrency=conc, max_restarts=0,
                    scheduling_strategy=strategy).remote(p, self.transport, fault_injection, options,
                                                         os.getpriority(os.PRIO_PROCESS, 0))
                self.names[p.stage] = name
                self._provisions[p.stage] = p
                self._cursor[p.stage] = 0
        except BaseException:
            self.stop(0.0)
            raise

    def _mark_dead(self, stage: int, err: BaseException) -> None:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        p = self._provisions[stage]
        self._dead.setdefault(stage, f"Ray actor of stage {stage} on node {p.node_id} died "
                                     f"({type(err).__name__}: {first})")

    def _pump(self, timeout: float) -> None:
        """Issue one long-poll per live actor without one, wait up to ``timeout`` s for any to finish,
        and queue the events of every finished poll (stage order within a batch)."""
        if self._stopped:
            return
        for s, a in self.actors.items():
            if s not in self._poll and s not in self._dead and s not in self._finished:
                self._poll[s] = a.poll_events.remote(self._cursor[s], EVENT_POLL_S)
        if not self._poll:
            return
        stages = list(self._poll)
        ready, _ = ray.wait([self._poll[s] for s in stages], num_returns=1, timeout=max(0.0, timeout))
        if ready:  # collect everything that is done by now, not just the first
            ready, _ = ray.wait([self._poll[s] for s in stages], num_returns=len(stages), timeout=0)
        done = set(ready)
        for s in stages:
            ref = self._poll[s]
            if ref not in done:
                continue
            del self._poll[s]
            try:
                evs, finished = ray.get(ref)
            except ActorUnavailableError as e:
                self._unavailable[s] = self._unavailable.get(s, 0) + 1
                if self._unavailable[s] >= UNAVAILABLE_POLLS:
                    self._mark_dead(s, e)
                continue
            except RayActorError as e:
                self._mark_dead(s, e)
                continue
            self._unavailable.pop(s, None)
            self._cursor[s] += len(evs)
            self._events.extend(evs)
            if finished is not None:
                self._finished[s] = finished

    def next_event(self, timeout: float) -> Event | None:
        """The next lifecycle event of any stage (waiting up to ``timeout`` s), else None."""
        end = time.monotonic() + max(0.0, timeout)
        while not self._events:
            left = end - time.monotonic()
            self._pump(max(0.0, left))
            if self._events or left <= 0 or self._stopped or (self._dead and not self._poll):
                break
        return self._events.popleft() if self._events else None

    def dead_stage(self) -> tuple[int, str] | None:
        """``(stage, detail)`` of a stage whose actor died, or whose worker ended cleanly without being
        told to (after :meth:`expect_exit` a clean end is expected); None otherwise."""
        if self._stopped:
            return None
        self._pump(0.0)
        for s in sorted(self._dead):
            return s, self._dead[s]
        for s in self.actors:  # peers may have seen a death before the event poll did
            peer = self.transport._peers.get(self.names[s]) if self.transport is not None else None
            if peer is not None and peer.dead is not None:
                return s, f"Ray actor of stage {s} on node {self._provisions[s].node_id} died ({peer.dead})"
        if not self._expect_exit:
            for s, how in sorted(self._finished.items()):
                if how == "ok":
                    return s, f"stage {s} stopped serving unexpectedly"
        return None

    def wait_exit(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for every stage worker to end (its actor stays until :meth:`stop`)."""
        if not self.actors:
            return True
        refs = [a.join.remote(timeout) for a in self.actors.values()]
        try:
            return all(ray.get(refs, timeout=timeout + 5.0))
        except (RayActorError, GetTimeoutError):
            return False

    def live_actor_names(self) -> list[str]:
        """Names of this run's actors Ray still answers for and does not report dead (empty after :meth:`stop`;
        an actor that exited by itself keeps its name while a handle to it lives, in state DEAD)."""
        out = []
        for name in [*self.names.values(), *([self.proxy_name] if self.proxy_name else [])]:
            try:
                handle = ray.get_actor(name, namespace=self.transport.scope.namespace)
            except ValueError:
                continue
            if _actor_state(handle) != "DEAD":
                out.append(name)
        return out

    def stop(self, grace_s: float = 2.0) -> None:
        """Stop every worker (``grace_s`` s to end cleanly), end every actor of the run (:func:`end_actors`) and wait
        (up to :data:`KILL_WAIT_S`) until Ray reports each one dead; shut down an embedded Ray instance and unlink
        the semaphores of its channels (:func:`unlink_channel_semaphores`).
        Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        try:
            alive = [a for s, a in self.actors.items() if s not in self._dead] if grace_s > 0 else []
            if alive:
                for a in alive:
                    a.stop.remote()
                joins = [a.join.remote(grace_s) for a in alive]
                try:
                    ray.wait(joins, num_returns=len(joins), timeout=grace_s + 1.0)
                except Exception:  # noqa: BLE001 - best effort: the kill below is what guarantees cleanup
                    pass
            end_actors([*self.actors.values(), self.proxy])
            if self.transport is not None:
                self.transport.close()
            self._wait_dead(KILL_WAIT_S)
        finally:
            if self._owns_ray and ray is not None and ray.is_initialized():
                raylets = embedded_raylet_pids()
                ray.shutdown()
                self._owns_ray = False
                unlink_channel_semaphores(raylets)

    def _wait_dead(self, timeout: float) -> bool:
        """Wait until no actor of the run is still registered under its name (Ray frees the name of a
        non-detached actor when it is dead)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if not self.live_actor_names():
                return True
            time.sleep(0.05)
        return False


def make_ray_backend(address: str | None = None, **kwargs: Any) -> RayBackend:
    """A :class:`RayBackend` (``address`` as for ``ray.init``; see the class). Raises
    RayUnavailableError when ``ray`` is not installed."""
    _require_ray()
    return RayBackend(address, **kwargs)


__all__ = ["NODE_LABEL", "RAY_PROBE_TIMEOUT_S", "RESOURCE_PREFIX", "RayBackend", "RayTransport", "RayUnavailableError", "RunScope", "probe_ray_address",
           "END_WAIT_S", "end_actors", "embedded_raylet_pids", "unlink_channel_semaphores",
           "StageActor", "build_registry", "carried_node_ids", "make_ray_backend", "node_resource", "resolve_nodes"]
