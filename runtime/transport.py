"""Edge transports: the interface, the edge routing table, and the in-process implementation.

A stage never sees an actor or process address (seed 000 RP-PP-5/6, DESIGN.md §4): it asks the
transport for an endpoint by ``(node_id, edge_id)`` -- the consumer's node id and the edge id from
its :class:`~pipeplan.plan_types.EdgeProvision` -- and the transport resolves it. Every edge is a
ring of ``RingSpec.slots`` objects: a sender blocks when all slots are in flight (back-pressure);
an object larger than ``ObjectSpec.max_extent`` (or not of the spec's dtype) is a typed
:class:`ObjectTooLargeError` / :class:`ObjectSpecError`, never a resize.

Objects are :class:`Frame` values: ``DATA`` (a numpy array at a sequence position, or the rows of several
sequences with a :class:`Segment` table: a micro-batch), ``RESET``
(start a new sequence in ``Frame.slot``: stages clear that slot's KV cache; carries the sampler parameters for the last
stage) and ``SHUTDOWN`` (end the stage loop).

Implementations: :class:`InprocTransport` (threads, bounded ``queue.Queue`` per edge; for tests)
here, and :class:`pipeplan.runtime.shm_ring.ShmTransport` (processes, shared-memory rings).
"""

from __future__ import annotations

import queue
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from pipeplan.errors import PipeplanError
from pipeplan.plan_types import EdgeProvision, ObjectSpec, ProvisionStage, RingSpec

ORCHESTRATOR_NODE = "orchestrator"
"""The node id the orchestrator uses as an edge endpoint (EdgeProvision.peer_node_id)."""

DATA, RESET, SHUTDOWN = 0, 1, 2
NUMPY_DTYPES: dict[str, np.dtype] = {"i32": np.dtype(np.int32), "f32": np.dtype(np.float32),
                                     "f16": np.dtype(np.float16)}
"""ObjectSpec dtype -> numpy dtype carried on the wire (bf16 has no numpy dtype: unsupported)."""


class TransportError(PipeplanError):
    """A transport-level failure (code ``transport``)."""

    code = "transport"


class EndpointError(TransportError):
    """No edge ``edge_id`` whose endpoint is ``node_id`` (code ``unknown_endpoint``)."""

    code = "unknown_endpoint"


class ObjectSpecError(TransportError):
    """An object whose dtype/rank does not fit its edge's ObjectSpec (code ``object_spec``)."""

    code = "object_spec"


class ObjectTooLargeError(ObjectSpecError):
    """An object larger than ``ObjectSpec.max_extent`` (or the slot) (code ``object_too_large``)."""

    code = "object_too_large"


@dataclass(frozen=True)
class SamplerParams:
    """Sampling parameters a RESET frame carries to the last stage (seed -1: unseeded)."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = -1


MAX_SEGMENTS = 64
"""Most sequences one DATA frame carries (the bound of the shared-memory ring's segment table)."""


class Segment(NamedTuple):
    """The rows of one sequence in a micro-batched DATA frame: ``n_rows`` consecutive rows of the frame's array
    at positions ``[position, position + n_rows)`` of KV-cache slot ``slot``."""

    seq_id: int
    slot: int
    position: int
    n_rows: int


class Frame(NamedTuple):
    """One object on an edge (a NamedTuple: immutable and cheap to build on the hot path).

    Attributes:
        op: DATA | RESET | SHUTDOWN.
        seq_id: the sequence (prompt) number within the run.
        position: position of the first row (DATA), i.e. the stage's ``start_pos``.
        array: DATA payload: int32 token ids [T] or activations [T, n_embd]; None otherwise.
        sampler: RESET payload: sampling parameters for the new sequence.
        slot: the KV-cache slot of the sequence in every stage (``[0, parallel)``); a RESET resets only it.
        segments: None for a frame of one sequence (``seq_id``, ``slot``, ``position``); else the micro-batch's
            table, in row order: the array's rows are the segments' rows one after the other (at most
            :data:`MAX_SEGMENTS`; ``seq_id``/``slot``/``position`` then repeat the first segment's). A token-out
            frame of a micro-batch carries one id per segment, each segment with its next position and 1 row.
    """

    op: int
    seq_id: int = 0
    position: int = 0
    array: np.ndarray | None = None
    sampler: SamplerParams | None = None
    slot: int = 0
    segments: tuple[Segment, ...] | None = None


def check_segments(edge_id: str, frame: Frame) -> None:
    """Check the segment table of a DATA ``frame`` against its array (shape only; stages check slots and
    positions).

    Raises ObjectSpecError: more than :data:`MAX_SEGMENTS` segments, none, a segment of fewer than 1 row, or
    rows that do not add up to the array's."""
    segs = frame.segments
    if segs is None:
        return
    rows = 0 if frame.array is None or frame.array.ndim == 0 else int(frame.array.shape[0])
    if not 1 <= len(segs) <= MAX_SEGMENTS:
        raise ObjectSpecError(f"edge {edge_id}: a frame of {len(segs)} segments (1 to {MAX_SEGMENTS})", where=edge_id)
    if any(int(s.n_rows) < 1 for s in segs) or sum(int(s.n_rows) for s in segs) != rows:
        raise ObjectSpecError(f"edge {edge_id}: segment rows {[int(s.n_rows) for s in segs]} do not add up to the "
                              f"frame's {rows} rows", where=edge_id)


def check_object(edge_id: str, spec: ObjectSpec, ring: RingSpec, array: np.ndarray) -> None:
    """Check that ``array`` fits ``spec`` on edge ``edge_id``.

    Raises:
        ObjectSpecError: dtype differs from ``spec.dtype``, or rank above 4 or above the spec's rank.
        ObjectTooLargeError: ``array.nbytes`` > ``spec.max_extent`` or > ``ring.slot_bytes``.
    """
    want = NUMPY_DTYPES.get(spec.dtype)
    if want is None:
        raise ObjectSpecError(f"edge {edge_id}: ObjectSpec dtype {spec.dtype!r} is not supported by the transport",
                              where=edge_id)
    if array.dtype != want:
        raise ObjectSpecError(f"edge {edge_id}: object dtype {array.dtype} does not match ObjectSpec dtype "
                              f"{spec.dtype}", where=edge_id)
    if array.ndim > max(len(spec.shape), 1) or array.ndim > 4:
        raise ObjectSpecError(f"edge {edge_id}: object of rank {array.ndim} exceeds ObjectSpec shape {spec.shape}",
                              where=edge_id)
    limit = min(spec.max_extent, ring.slot_bytes)
    if array.nbytes > limit:
        raise ObjectTooLargeError(f"edge {edge_id}: object of {array.nbytes} bytes (shape {tuple(array.shape)}) "
                                  f"exceeds max_extent {spec.max_extent} / slot_bytes {ring.slot_bytes}",
                                  where=edge_id)


@dataclass(frozen=True)
class EdgeRoute:
    """One edge as the transport routes it: producer and consumer node ids plus its specs."""

    edge_id: str
    kind: str
    producer_node: str
    consumer_node: str
    object_spec: ObjectSpec
    ring_spec: RingSpec


def routes_from_provisions(provisions: list[ProvisionStage]) -> dict[str, EdgeRoute]:
    """The routing table (edge id -> EdgeRoute) of a run, from its stages' provisions.

    Every edge must be seen exactly once as some stage's outbound provision or as the token-in
    (orchestrator-produced) inbound of stage 0, and once as an inbound provision (or the token-out
    edge to the orchestrator), with the same kind and specs on both sides.

    Raises:
        EndpointError: an edge provided twice in the same direction, specs that disagree between
        producer and consumer, or an edge with a missing side.
    """
    out_side: dict[str, tuple[str, EdgeProvision]] = {}
    in_side: dict[str, tuple[str, EdgeProvision]] = {}
    for p in provisions:
        for prov, table, me in ((p.outbound, out_side, p.node_id), (p.inbound, in_side, p.node_id)):
            if prov.edge_id in table:
                raise EndpointError(f"edge {prov.edge_id} is provided twice as {prov.direction}bound "
                                    f"(stage {p.stage})", where=prov.edge_id)
            table[prov.edge_id] = (me, prov)
    routes: dict[str, EdgeRoute] = {}
    for edge_id in sorted(set(out_side) | set(in_side)):
        o = out_side.get(edge_id)
        i = in_side.get(edge_id)
        if o is not None and i is not None:
            (prod, po), (cons, pi) = o, i
            if (po.kind, po.object_spec, po.ring_spec) != (pi.kind, pi.object_spec, pi.ring_spec):
                raise EndpointError(f"edge {edge_id}: producer and consumer provisions disagree on kind/specs",
                                    where=edge_id)
            if po.peer_node_id != cons:
                raise EndpointError(f"edge {edge_id}: outbound provision names consumer {po.peer_node_id!r} but "
                                    f"the consuming stage is on {cons!r}", where=edge_id)
            routes[edge_id] = EdgeRoute(edge_id, po.kind, prod, cons, po.object_spec, po.ring_spec)
        elif o is not None and o[1].peer_node_id == ORCHESTRATOR_NODE:
            prod, po = o
            routes[edge_id] = EdgeRoute(edge_id, po.kind, prod, ORCHESTRATOR_NODE, po.object_spec, po.ring_spec)
        elif i is not None and i[1].peer_node_id == ORCHESTRATOR_NODE:
            cons, pi = i
            routes[edge_id] = EdgeRoute(edge_id, pi.kind, ORCHESTRATOR_NODE, cons, pi.object_spec, pi.ring_spec)
        else:
            raise EndpointError(f"edge {edge_id} has no {'consumer' if i is None else 'producer'}", where=edge_id)
    return routes


class SendEndpoint(ABC):
    """The producer side of one edge."""

    edge_id: str
    object_spec: ObjectSpec
    ring_spec: RingSpec

    @abstractmethod
    def send(self, frame: Frame, timeout: float | None = None) -> bool:
        """Put ``frame`` into a free slot, waiting at most ``timeout`` s (None: forever) for one.

        Returns False on timeout (nothing sent). Raises ObjectSpecError/ObjectTooLargeError for a
        DATA array that does not fit the edge's ObjectSpec."""

    def announce(self) -> None:  # noqa: B027 - optional hint, nothing to do by default
        """Hint that the next :meth:`send` follows soon (the producer started computing it), so that a
        transport whose consumer sleeps can wake it now and overlap the wake-up with the computation.
        Never blocks and never changes what is delivered; the default does nothing."""

    def close(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release local resources of the endpoint (not the edge)."""


class RecvEndpoint(ABC):
    """The consumer side of one edge."""

    edge_id: str

    @abstractmethod
    def recv(self, timeout: float | None = None) -> Frame | None:
        """Take the next frame, waiting at most ``timeout`` s (None: forever); None on timeout."""

    def close(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release local resources of the endpoint (not the edge)."""


class Transport(ABC):
    """Endpoint resolution by ``(node_id, edge_id)`` over a routing table of EdgeRoutes."""

    routes: dict[str, EdgeRoute]

    def _route(self, node_id: str, edge_id: str) -> EdgeRoute:
        r = self.routes.get(edge_id)
        if r is None:
            raise EndpointError(f"unknown edge {edge_id!r}", where=edge_id)
        if r.consumer_node != node_id:
            raise EndpointError(f"edge {edge_id!r} is consumed by node {r.consumer_node!r}, not {node_id!r}",
                                where=edge_id)
        return r

    @abstractmethod
    def open_send(self, consumer_node_id: str, edge_id: str) -> SendEndpoint:
        """The producer endpoint of ``edge_id``, whose consumer is ``consumer_node_id``.

        Raises EndpointError when the edge is unknown or consumed by another node."""

    @abstractmethod
    def open_recv(self, node_id: str, edge_id: str) -> RecvEndpoint:
        """The consumer endpoint of ``edge_id`` on ``node_id`` (EndpointError otherwise)."""


# --------------------------------------------------------------------------- in-process
class QueueSend(SendEndpoint):
    """Producer side of an edge backed by a bounded ``queue.Queue`` of ``slots`` frames: DATA objects are
    checked against the ObjectSpec/RingSpec (ObjectTooLargeError, ObjectSpecError) and copied; a full queue
    past ``timeout`` returns False (back-pressure)."""

    def __init__(self, route: EdgeRoute, q: queue.Queue):
        self.edge_id, self.object_spec, self.ring_spec, self._q = route.edge_id, route.object_spec, route.ring_spec, q

    def send(self, frame: Frame, timeout: float | None = None) -> bool:
        if frame.op == DATA:
            assert frame.array is not None
            check_object(self.edge_id, self.object_spec, self.ring_spec, frame.array)
            check_segments(self.edge_id, frame)
            frame = Frame(DATA, frame.seq_id, frame.position, np.array(frame.array, copy=True), None, frame.slot,
                          frame.segments)
        try:
            self._q.put(frame, timeout=timeout)
        except queue.Full:
            return False
        return True


class _QueueRecv(RecvEndpoint):
    def __init__(self, route: EdgeRoute, q: queue.Queue):
        self.edge_id, self._q = route.edge_id, q

    def recv(self, timeout: float | None = None) -> Frame | None:
        try:
            return self._q.get(timeout=timeout)
        except queue.Empty:
            return None


class InprocTransport(Transport):
    """Threads in one process: one ``queue.Queue(maxsize=RingSpec.slots)`` per edge.

    DATA arrays are copied on send (a slot holds its own bytes, like a ring slot would)."""

    def __init__(self, routes: dict[str, EdgeRoute]):
        self.routes = dict(routes)
        self._queues: dict[str, queue.Queue[Frame]] = {e: queue.Queue(maxsize=max(1, r.ring_spec.slots))
                                                       for e, r in self.routes.items()}

    def open_send(self, consumer_node_id: str, edge_id: str) -> SendEndpoint:
        r = self._route(consumer_node_id, edge_id)
        return QueueSend(r, self._queues[edge_id])

    def open_recv(self, node_id: str, edge_id: str) -> RecvEndpoint:
        r = self._route(node_id, edge_id)
        return _QueueRecv(r, self._queues[edge_id])
