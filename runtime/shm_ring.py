"""Shared-memory rings: one ring per edge, usable across ``spawn``-ed processes (DESIGN.md §4).

Layout of one ring (one :class:`multiprocessing.shared_memory.SharedMemory` segment)::

    slot 0: [header 128 B][payload slot_bytes B] slot 1: [...] ... slot slots-1: [...]

The header (:data:`HEADER`, little-endian) holds ``op, dtype, ndim, seq_id, position, nbytes,
shape[4]`` and, for RESET frames, the sampler parameters. Two POSIX semaphores signal the ring:
``free`` (initially ``slots``: a producer takes one before writing a slot) and ``full``
(initially 0: released after a write, taken by the consumer before reading). So at most
``RingSpec.slots`` objects are in flight (back-pressure) and neither side spins. Each ring has a
single producer and a single consumer; each keeps its own slot cursor.

Owner: the process that :meth:`ShmTransport.create`-s the rings (the orchestrator) unlinks them
(:meth:`ShmTransport.unlink`); stage processes attach by name when the transport is unpickled.
Payloads are copied in on send and copied out on receive, so a slot is reusable as soon as the
consumer has read it.
"""

from __future__ import annotations

import struct
from multiprocessing import shared_memory
from multiprocessing.context import BaseContext

import numpy as np
from pipeplan.runtime.transport import (
    DATA,
    NUMPY_DTYPES,
    RESET,
    EdgeRoute,
    Frame,
    RecvEndpoint,
    SamplerParams,
    SendEndpoint,
    Transport,
    TransportError,
    check_object,
)

HEADER = struct.Struct("<iiiiqqq4qddqq")
"""op, dtype code, ndim, pad, seq_id, position, nbytes, shape[4], temperature, top_p, top_k, seed."""
HEADER_BYTES = 128
_DTYPE_CODES = {np.dtype(np.int32): 0, np.dtype(np.float32): 1, np.dtype(np.float16): 2}
_CODE_DTYPES = {v: k for k, v in _DTYPE_CODES.items()}
assert HEADER.size <= HEADER_BYTES
assert set(_DTYPE_CODES) == set(NUMPY_DTYPES.values())


def _align(n: int, a: int = 64) -> int:
    return (n + a - 1) // a * a


class ShmRing:
    """One edge's ring: a shared-memory segment plus its ``free``/``full`` semaphores.

    Create with :meth:`create` (owner) or rebuild in another process from the pickled handle
    (attaches by segment name). ``slot_stride = 128 + align64(slot_bytes)``.
    """

    def __init__(self, route: EdgeRoute, name: str, free, full, *, owner: bool,
                 shm: shared_memory.SharedMemory | None = None):
        self.route = route
        self.slots = max(1, route.ring_spec.slots)
        self.slot_bytes = route.ring_spec.slot_bytes
        self.stride = HEADER_BYTES + _align(self.slot_bytes)
        self.name = name
        self.free, self.full = free, full
        self.owner = owner
        self._shm = shm if shm is not None else shared_memory.SharedMemory(name=name)
        self._buf = np.ndarray((self.slots * self.stride,), np.uint8, buffer=self._shm.buf)
        self._payload = [self._buf[i * self.stride + HEADER_BYTES: (i + 1) * self.stride] for i in range(self.slots)]

    @classmethod
    def create(cls, route: EdgeRoute, ctx: BaseContext) -> ShmRing:
        """Allocate the segment (``slots * stride`` bytes) and semaphores for ``route``.

        Raises TransportError when the segment cannot be created (e.g. /dev/shm full)."""
        slots = max(1, route.ring_spec.slots)
        size = slots * (HEADER_BYTES + _align(route.ring_spec.slot_bytes))
        try:
            shm = shared_memory.SharedMemory(create=True, size=size)
        except OSError as e:
            raise TransportError(f"edge {route.edge_id}: cannot create a {size}-byte shared-memory ring: {e}",
                                 where=route.edge_id) from None
        return cls(route, shm.name, ctx.Semaphore(slots), ctx.Semaphore(0), owner=True, shm=shm)

    def __getstate__(self):
        return {"route": self.route, "name": self.name, "free": self.free, "full": self.full}

    def __setstate__(self, st):
        self.__init__(st["route"], st["name"], st["free"], st["full"], owner=False)

    # ------------------------------------------------------------------ data path
    def write(self, slot: int, frame: Frame) -> None:
        """Write ``frame`` into ``slot`` (the caller holds a ``free`` permit)."""
        off = slot * self.stride
        sp = frame.sampler or SamplerParams()
        arr = frame.array
        if arr is not None:
            arr = np.ascontiguousarray(arr)
            shape = tuple(arr.shape) + (0,) * (4 - arr.ndim)
            HEADER.pack_into(self._buf, off, frame.op, _DTYPE_CODES[arr.dtype], arr.ndim, 0, frame.seq_id,
                             frame.position, arr.nbytes, *shape, sp.temperature, sp.top_p, sp.top_k, sp.seed)
            self._payload[slot][: arr.nbytes] = arr.reshape(-1).view(np.uint8)
        else:
            HEADER.pack_into(self._buf, off, frame.op, 0, 0, 0, frame.seq_id, frame.position, 0, 0, 0, 0, 0,
                             sp.temperature, sp.top_p, sp.top_k, sp.seed)

    def read(self, slot: int) -> Frame:
        """Copy the frame out of ``slot`` (the caller holds a ``full`` permit)."""
        off = slot * self.stride
        (op, code, ndim, _pad, seq_id, position, nbytes, s0, s1, s2, s3, temp, top_p, top_k,
         seed) = HEADER.unpack_from(self._buf, off)
        if op == DATA:
            dt = _CODE_DTYPES[code]
            shape = (s0, s1, s2, s3)[:ndim]
            arr = self._payload[slot][:nbytes].view(dt).reshape(shape).copy()
            return Frame(DATA, seq_id, position, arr)
        sampler = SamplerParams(temp, top_k, top_p, seed) if op == RESET else None
        return Frame(op, seq_id, position, None, sampler)

    def close(self) -> None:
        """Unmap the segment in this process (idempotent)."""
        if self._shm is not None:
            self._buf = self._payload = None  # drop the exported views before closing
            try:
                self._shm.close()
            except BufferError:  # pragma: no cover - a caller still holds a view
                pass

    def unlink(self) -> None:
        """Remove the segment name (owner only; idempotent)."""
        self.close()
        if self.owner and self._shm is not None:
            try:
                self._shm.unlink()
            except FileNotFoundError:
                pass
            self._shm = None


class _RingSend(SendEndpoint):
    def __init__(self, ring: ShmRing):
        self.ring = ring
        self.edge_id = ring.route.edge_id
        self.object_spec, self.ring_spec = ring.route.object_spec, ring.route.ring_spec
        self._slot = 0

    def send(self, frame: Frame, timeout: float | None = None) -> bool:
        if frame.op == DATA:
            assert frame.array is not None
            check_object(self.edge_id, self.object_spec, self.ring_spec, frame.array)
        if not self.ring.free.acquire(True, timeout):
            return False
        self.ring.write(self._slot, frame)
        self._slot = (self._slot + 1) % self.ring.slots
        self.ring.full.release()
        return True


class _RingRecv(RecvEndpoint):
    def __init__(self, ring: ShmRing):
        self.ring = ring
        self.edge_id = ring.route.edge_id
        self._slot = 0

    def recv(self, timeout: float | None = None) -> Frame | None:
        if not self.ring.full.acquire(True, timeout):
            return None
        frame = self.ring.read(self._slot)
        self._slot = (self._slot + 1) % self.ring.slots
        self.ring.free.release()
        return frame


class ShmTransport(Transport):
    """Shared-memory rings for every edge of a run; picklable into ``spawn``-ed stage processes.

    Pickle it only as an argument of ``Process(...)`` (the semaphores travel only that way)."""

    def __init__(self, routes: dict[str, EdgeRoute], rings: dict[str, ShmRing]):
        self.routes = dict(routes)
        self.rings = rings

    @classmethod
    def create(cls, routes: dict[str, EdgeRoute], ctx: BaseContext) -> ShmTransport:
        """Create one ring per route (owner side). On failure, rings already made are unlinked."""
        rings: dict[str, ShmRing] = {}
        try:
            for edge_id, r in routes.items():
                rings[edge_id] = ShmRing.create(r, ctx)
        except BaseException:
            for ring in rings.values():
                ring.unlink()
            raise
        return cls(routes, rings)

    def open_send(self, consumer_node_id: str, edge_id: str) -> SendEndpoint:
        self._route(consumer_node_id, edge_id)
        return _RingSend(self.rings[edge_id])

    def open_recv(self, node_id: str, edge_id: str) -> RecvEndpoint:
        self._route(node_id, edge_id)
        return _RingRecv(self.rings[edge_id])

    def segment_names(self) -> list[str]:
        """Names of the shared-memory segments (under /dev/shm), for leak checks."""
        return [r.name for r in self.rings.values()]

    def close(self) -> None:
        """Unmap every ring in this process."""
        for r in self.rings.values():
            r.close()

    def unlink(self) -> None:
        """Unmap and remove every ring (owner)."""
        for r in self.rings.values():
            r.unlink()


def echo_loop(transport: Transport, node_id: str, in_edge: str, out_node: str, out_edge: str) -> int:
    """Forward every frame received on ``in_edge`` (consumed by ``node_id``) to ``out_edge`` (consumed by
    ``out_node``) until a SHUTDOWN frame, which is forwarded too. Returns the number of frames forwarded.

    A process target for ring tests and the hop-latency benchmark (bench/decode.py): run it in a
    spawned process and ping-pong through it; one hop = round trip / 2."""
    from pipeplan.runtime.transport import SHUTDOWN

    rx = transport.open_recv(node_id, in_edge)
    tx = transport.open_send(out_node, out_edge)
    n = 0
    try:
        while True:
            f = rx.recv()
            assert f is not None
            tx.send(f)
            n += 1
            if f.op == SHUTDOWN:
                return n
    finally:
        if isinstance(transport, ShmTransport):
            transport.close()
