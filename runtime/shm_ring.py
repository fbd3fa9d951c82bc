"""Shared-memory rings: one ring per edge, usable across ``spawn``-ed processes (DESIGN.md §4).

Layout of one ring (one :class:`multiprocessing.shared_memory.SharedMemory` segment)::

    slot 0: [header 128 B][payload slot_bytes B] slot 1: [...] ... slot slots-1: [...]

The header (:data:`HEADER`, little-endian) holds ``op, dtype, ndim, seq_id, position, nbytes,
shape[4]`` and, for RESET frames, the sampler parameters; its last 8 bytes (:data:`SEQ_OFFSET`) are
the slot's *publication word*: the 1-based number of the object last written there. Two POSIX
semaphores signal the ring: ``free`` (initially ``slots``: a producer takes one before writing a slot)
and ``full`` (initially 0: released once per object, taken by the consumer before reading). So at most
``RingSpec.slots`` objects are in flight (back-pressure). Each ring has a single producer and a single
consumer; each keeps its own slot cursor and object count.

Wake-up overlap (issue 3's throughput target): a consumer blocked in ``sem_wait`` on a busy 2-core host
takes tens to hundreds of µs to be scheduled after the ``full`` post, once per hop. So a producer that
starts computing the next object calls :meth:`_RingSend.announce`: it takes a free slot and posts
``full`` *before* the object exists; the consumer wakes during the producer's computation and then
waits on the slot's publication word (spinning with ``sched_yield``, so it gives the CPU to any other
runnable process; after :data:`SPIN_S` it polls with short sleeps). :meth:`send` writes the payload and
header, then the publication word (and posts ``full`` itself when nothing was announced). At most one
consumer spins per announcing producer, and in a decode pipeline only the stage after the working one
is announced. The ordering "payload, then publication word" seen by the other process relies on the
total store order of x86-64; on other architectures :data:`ANNOUNCE` is off and every object is
signalled by its ``full`` post after it is written (the semaphore orders memory).

Owner: the process that :meth:`ShmTransport.create`-s the rings (the orchestrator) unlinks them
(:meth:`ShmTransport.unlink`); stage processes attach by name when the transport is unpickled.
Payloads are copied in on send and copied out on receive, so a slot is reusable as soon as the
consumer has read it.
"""

from __future__ import annotations

import os
import platform
import secrets
import struct
import time
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
SEQ_OFFSET = HEADER_BYTES - 8
"""Byte offset, within a slot header, of the slot's int64 publication word (object number, 1-based)."""
SPIN_S = 0.02
"""How long a consumer whose object was announced yields-and-polls before polling with 50 µs sleeps."""
ANNOUNCE = (platform.machine().lower() in ("x86_64", "amd64")
            and os.environ.get("PIPEPLAN_RING_ANNOUNCE", "1") != "0")
"""Whether producers announce objects before writing them (needs x86-64 total store order; the
environment variable ``PIPEPLAN_RING_ANNOUNCE=0`` turns it off, for comparison benchmarks)."""
_DTYPE_CODES: dict[np.dtype, int] = {np.dtype(np.int32): 0, np.dtype(np.float32): 1, np.dtype(np.float16): 2}
_CODE_DTYPES: dict[int, np.dtype] = {v: k for k, v in _DTYPE_CODES.items()}
assert HEADER.size <= SEQ_OFFSET
assert set(_DTYPE_CODES) == set(NUMPY_DTYPES.values())


_NO_SAMPLER = SamplerParams()


def _align(n: int, a: int = 64) -> int:
    return (n + a - 1) // a * a


def segment_prefix(pid: int | None = None) -> str:
    """Name prefix of the shared-memory segments created by process ``pid`` (default: this one)."""
    return f"pipeplan-{os.getpid() if pid is None else pid}-"


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
        self._shm: shared_memory.SharedMemory | None = (shm if shm is not None
                                                         else shared_memory.SharedMemory(name=name))
        mem = self._shm.buf
        assert mem is not None
        self._mem: memoryview | None = mem
        self._buf: np.ndarray | None = np.ndarray((self.slots * self.stride,), np.uint8, buffer=mem)
        self._payload: list[np.ndarray] | None = [self._buf[i * self.stride + HEADER_BYTES: (i + 1) * self.stride]
                                                  for i in range(self.slots)]
        self._seq: np.ndarray | None = np.ndarray((self.slots,), np.int64, buffer=mem, offset=SEQ_OFFSET,
                                                  strides=(self.stride,))

    @classmethod
    def create(cls, route: EdgeRoute, ctx: BaseContext) -> ShmRing:
        """Allocate the segment (``slots * stride`` bytes) and semaphores for ``route``.

        The segment is named ``pipeplan-<creator pid>-<random>`` (see :func:`segment_prefix`) so a
        leak is attributable to the process that created it.

        Raises TransportError when the segment cannot be created (e.g. /dev/shm full)."""
        slots = max(1, route.ring_spec.slots)
        size = slots * (HEADER_BYTES + _align(route.ring_spec.slot_bytes))
        try:
            shm = shared_memory.SharedMemory(name=f"{segment_prefix()}{secrets.token_hex(6)}", create=True,
                                             size=size)
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
        mem, payload = self._mem, self._payload
        assert mem is not None and payload is not None, "ring is closed"
        sp = frame.sampler or _NO_SAMPLER
        arr = frame.array
        if arr is not None:
            arr = np.ascontiguousarray(arr)
            shape = tuple(arr.shape) + (0,) * (4 - arr.ndim)
            HEADER.pack_into(mem, off, frame.op, _DTYPE_CODES[arr.dtype], arr.ndim, 0, frame.seq_id,
                             frame.position, arr.nbytes, *shape, sp.temperature, sp.top_p, sp.top_k, sp.seed)
            payload[slot][: arr.nbytes] = arr.reshape(-1).view(np.uint8)
        else:
            HEADER.pack_into(mem, off, frame.op, 0, 0, 0, frame.seq_id, frame.position, 0, 0, 0, 0, 0,
                             sp.temperature, sp.top_p, sp.top_k, sp.seed)

    def read(self, slot: int) -> Frame:
        """Copy the frame out of ``slot`` (the caller holds a ``full`` permit)."""
        off = slot * self.stride
        mem, payload = self._mem, self._payload
        assert mem is not None and payload is not None, "ring is closed"
        (op, code, ndim, _pad, seq_id, position, nbytes, s0, s1, s2, s3, temp, top_p, top_k,
         seed) = HEADER.unpack_from(mem, off)
        if op == DATA:
            dt = _CODE_DTYPES[code]
            shape = (s0, s1, s2, s3)[:ndim]
            arr = payload[slot][:nbytes].view(dt).reshape(shape).copy()
            return Frame(DATA, seq_id, position, arr)
        sampler = SamplerParams(temp, top_k, top_p, seed) if op == RESET else None
        return Frame(op, seq_id, position, None, sampler)

    def close(self) -> None:
        """Unmap the segment in this process (idempotent)."""
        if self._shm is not None:
            self._buf = self._payload = self._seq = None  # drop the exported views before closing
            self._mem = None
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
        self._n = 0  # objects sent
        self._announced = False

    def announce(self) -> None:
        """Take a free slot and post ``full`` now, before the object exists (module docstring); a no-op
        when already announced, when no slot is free, or when :data:`ANNOUNCE` is off."""
        if ANNOUNCE and not self._announced and self.ring.free.acquire(False):
            self._announced = True
            self.ring.full.release()

    def send(self, frame: Frame, timeout: float | None = None) -> bool:
        if frame.op == DATA:
            assert frame.array is not None
            check_object(self.edge_id, self.object_spec, self.ring_spec, frame.array)
        announced = self._announced
        if not announced and not self.ring.free.acquire(True, timeout):
            return False
        ring, slot = self.ring, self._slot
        ring.write(slot, frame)
        self._n += 1
        seq = ring._seq
        assert seq is not None, "ring is closed"
        seq[slot] = self._n  # publish: after the payload and header (x86-64 store order)
        self._slot = (slot + 1) % ring.slots
        self._announced = False
        if not announced:
            ring.full.release()
        return True


class _RingRecv(RecvEndpoint):
    def __init__(self, ring: ShmRing):
        self.ring = ring
        self.edge_id = ring.route.edge_id
        self._slot = 0
        self._n = 0  # objects received
        self._held = False  # a full permit taken whose object was not published yet

    def recv(self, timeout: float | None = None) -> Frame | None:
        ring = self.ring
        if not self._held:
            if not ring.full.acquire(True, timeout):
                return None
            self._held = True
        seq = ring._seq
        assert seq is not None, "ring is closed"
        want, slot = self._n + 1, self._slot
        if seq[slot] != want:  # announced, not written yet: the producer is computing it
            t0 = time.perf_counter()
            while seq[slot] != want:
                waited = time.perf_counter() - t0
                if timeout is not None and waited > timeout:
                    return None  # keep the permit: the next recv waits for the same object
                if waited < SPIN_S:
                    os.sched_yield()
                else:
                    time.sleep(5e-5)
        frame = ring.read(slot)
        self._n = want
        self._held = False
        self._slot = (slot + 1) % ring.slots
        ring.free.release()
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
