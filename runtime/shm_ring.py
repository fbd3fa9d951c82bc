"""Shared-memory rings: one ring per edge, usable across ``spawn``-ed processes (DESIGN.md §4).

Layout of one ring (one :class:`multiprocessing.shared_memory.SharedMemory` segment)::

    slot 0: [header 128 B][segment table][payload slot_bytes B] slot 1: [...] ... slot slots-1: [...]

The header (:data:`HEADER`, little-endian) holds ``op, dtype, ndim, seq_id, position, nbytes,
shape[4]``, for RESET frames the sampler parameters, and the number of segments of a micro-batched DATA
frame (0: ``Frame.segments`` is None); bytes 120..127 (:data:`SEQ_OFFSET`) are the slot's *publication
word*: the 1-based number of the object last written there. The segment table that follows holds
:data:`~pipeplan.runtime.transport.MAX_SEGMENTS` rows of int64 ``(seq_id, slot, position, n_rows)``
(:data:`TABLE_BYTES`), so the payload keeps its full ``slot_bytes``. Two POSIX
semaphores signal the ring: ``free`` (initially ``slots``: a producer takes one before writing a slot)
and ``full`` (initially 0: released once per object, taken by the consumer before reading). So at most
``RingSpec.slots`` objects are in flight (back-pressure). Each ring has a single producer and a single
consumer; each keeps its own slot cursor and object count.

Wake-up overlap (issue 3's throughput target): a consumer blocked in ``sem_wait`` on a busy 2-core host
takes tens to hundreds of µs to be scheduled after the ``full`` post, once per hop. So a producer that
starts computing the next object calls :meth:`_RingSend.announce`: it takes a free slot and posts
``full`` *before* the object exists; the consumer wakes during the producer's computation and then
waits on the slot's publication word (spinning with ``sched_yield``, so it gives the CPU to any other
runnable process; after the ring's ``spin_s``, see :func:`spin_budget`, it polls with short sleeps).
:meth:`send` writes the payload and header, then the publication word (and posts ``full`` itself when nothing was announced). At most one
consumer spins per announcing producer, and in a decode pipeline only the stage after the working one
is announced. The ordering "payload, then publication word" seen by the other process relies on the
total store order of x86-64; on other architectures :data:`ANNOUNCE` is off and every object is
signalled by its ``full`` post after it is written (the semaphore orders memory).

Owner: the process that :meth:`ShmTransport.create`-s the rings (the orchestrator) unlinks them
(:meth:`ShmTransport.unlink`); stage processes attach by name when the transport is unpickled.
Payloads are copied in on send and copied out on receive, so a slot is reusable as soon as the
consumer has read it.

Names and leftovers: every /dev/shm object of a run carries its creator's pid: ring and control
segments are ``pipeplan-<pid>-<hex>``, the rings' semaphores ``sem.pipeplan-<pid>-<hex>``
(:class:`RingSemaphore`, named by us instead of multiprocessing's anonymous ``sem.mp-*``). After a
crash that skipped the unlink (SIGKILL of the whole process group, resource tracker included),
:func:`remove_orphans` removes the objects whose creator process is gone (``pipeplan clean``, and every
local run before it creates its rings). This assumes /dev/shm is not shared with another pid namespace.
"""

from __future__ import annotations

import _multiprocessing
import mmap
import os
import platform
import re
import secrets
import stat
import struct
import time
from multiprocessing import resource_tracker, shared_memory
from multiprocessing.context import BaseContext
from pathlib import Path

import numpy as np
from pipeplan.analysis.concurrency import consumers_spin
from pipeplan.runtime.transport import (
    DATA,
    MAX_SEGMENTS,
    NUMPY_DTYPES,
    RESET,
    EdgeRoute,
    Frame,
    RecvEndpoint,
    SamplerParams,
    Segment,
    SendEndpoint,
    Transport,
    TransportError,
    check_object,
    check_segments,
)

HEADER = struct.Struct("<iiiiqqq4qddqqi")
"""op, dtype code, ndim, slot, seq_id, position, nbytes, shape[4], temperature, top_p, top_k, seed, n_segments."""
SEQ_OFFSET = 120
"""Byte offset, within a slot header, of the slot's int64 publication word (object number, 1-based)."""
TABLE_OFFSET = 128
"""Byte offset, within a slot, of the segment table."""
TABLE_BYTES = MAX_SEGMENTS * 4 * 8
"""Bytes of the segment table: MAX_SEGMENTS x int64 (seq_id, slot, position, n_rows)."""
HEADER_BYTES = TABLE_OFFSET + TABLE_BYTES
"""Bytes before a slot's payload (header and segment table; a multiple of 64)."""
SPIN_S = 0.02
"""How long a consumer whose object was announced yields-and-polls before polling with 50 µs sleeps, when
every busy process of the run has a core (:func:`spin_budget`)."""
SPIN_SHORT_S = 0.0002
"""The yield-and-poll time when busy processes outnumber cores, where a longer spin takes CPU time from a
stage that computes."""
SHM_DIR = Path("/dev/shm")
"""Where POSIX shared memory and named semaphores appear (Linux)."""
_ORPHAN_NAME = re.compile(r"^(?:sem\.)?pipeplan-(\d+)-(?:ctl-)?[0-9a-f]+$")
CONTROL_TAG = "ctl-"
"""Infix of control-block segment names: ``pipeplan-<pid>-ctl-<hex>``."""


def announce_default() -> bool:
    """Whether producers announce objects before writing them (needs x86-64 total store order; the
    environment variable ``PIPEPLAN_RING_ANNOUNCE=0`` turns it off, for comparison benchmarks). Read when
    a transport is created and carried by its rings, so stage processes follow their creator."""
    return (platform.machine().lower() in ("x86_64", "amd64")
            and os.environ.get("PIPEPLAN_RING_ANNOUNCE", "1") != "0")


def spin_budget(stages: int, frames_in_flight: int, cores: int) -> float:
    """Seconds a consumer of an announced object yields-and-polls before it sleeps between polls:
    :data:`SPIN_S` (awake when the object lands) where
    :func:`pipeplan.analysis.concurrency.consumers_spin` says the spinners fit the cores (the rule the
    throughput model follows), else :data:`SPIN_SHORT_S`. Raises ValueError when an argument is < 1."""
    return SPIN_S if consumers_spin(stages, frames_in_flight, cores) else SPIN_SHORT_S


def announce_for(spin_s: float) -> bool:
    """Whether producers announce objects to consumers that yield-and-poll for ``spin_s`` seconds: only where
    they spin (``spin_s >= SPIN_S``, and :func:`announce_default`). A consumer that cannot spin would wake at
    the announcement and then poll every 50 µs for the rest of the producer's step, taking a busy core each
    time; it blocks on the ring's ``full`` semaphore instead, posted once the object is written."""
    return spin_s >= SPIN_S and announce_default()


ANNOUNCE = announce_default()
""":func:`announce_default` at import time (the default of :meth:`ShmTransport.create`)."""
BEAT_S = 0.1
"""Seconds between two heartbeats of a stage process (:meth:`StageControl.beat`)."""
_DTYPE_CODES: dict[np.dtype, int] = {np.dtype(np.int32): 0, np.dtype(np.float32): 1, np.dtype(np.float16): 2}
_CODE_DTYPES: dict[int, np.dtype] = {v: k for k, v in _DTYPE_CODES.items()}
assert HEADER.size <= SEQ_OFFSET and HEADER_BYTES % 64 == 0
assert set(_DTYPE_CODES) == set(NUMPY_DTYPES.values())


_NO_SAMPLER = SamplerParams()


def _align(n: int, a: int = 64) -> int:
    return (n + a - 1) // a * a


def segment_prefix(pid: int | None = None) -> str:
    """Name prefix of the shared-memory segments created by process ``pid`` (default: this one)."""
    return f"pipeplan-{os.getpid() if pid is None else pid}-"


def _new_name(tag: str = "") -> str:
    return f"{segment_prefix()}{tag}{secrets.token_hex(6)}"


class _Attached:
    """A segment another process created, mapped by name *without* registering it with this process's
    resource tracker (``SharedMemory(name=...)`` registers on attach before Python 3.13, so a stage that
    attached just before the owner unlinked would make the tracker report a "leaked" segment). Same
    ``buf`` / ``close()`` / ``name`` surface as SharedMemory; never unlinks."""

    def __init__(self, name: str):
        self.name = name
        fd = os.open(SHM_DIR / name, os.O_RDWR)
        try:
            self._mmap: mmap.mmap | None = mmap.mmap(fd, os.fstat(fd).st_size)
        finally:
            os.close(fd)
        self.buf: memoryview | None = memoryview(self._mmap)

    def close(self) -> None:
        if self.buf is not None:
            self.buf.release()
            self.buf = None
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None

    def unlink(self) -> None:  # pragma: no cover - owners only unlink
        raise RuntimeError(f"{self.name}: an attached segment is unlinked by its creator")


def _attach(name: str) -> shared_memory.SharedMemory | _Attached:
    """Map an existing segment: directly from /dev/shm where it is (Linux), else through SharedMemory."""
    try:
        if SHM_DIR.is_dir():
            return _Attached(name)
        return shared_memory.SharedMemory(name=name)  # pragma: no cover - no /dev/shm
    except FileNotFoundError:
        _end_if_starting()
        raise


def _end_if_starting() -> None:
    """In a process multiprocessing is still starting (unpickling what its parent sent), a segment or semaphore
    that is gone was removed by the parent's cleanup (it was interrupted): end this process quietly
    (SystemExit, exit status 1; its parent no longer waits for it) rather than print a traceback on the
    user's terminal. Elsewhere, return (the caller raises)."""
    import multiprocessing

    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise SystemExit(1)


class RingSemaphore:
    """A counting POSIX semaphore named ``/pipeplan-<creator pid>-<hex>`` (``sem.pipeplan-...`` in /dev/shm).

    The same primitive as :class:`multiprocessing.Semaphore` (``_multiprocessing.SemLock``), but named
    after its creator so that a leftover is attributable (:func:`remove_orphans`), unlinked explicitly by
    its owner (:meth:`unlink`), and picklable by name at any time (the other side reopens it by name).
    The owner registers it with the multiprocessing resource tracker, which unlinks it if the owner
    dies without doing so (``track=False``: not registered, e.g. in a Ray actor, where the tracker would be
    one more process; then only :func:`remove_orphans` removes a leftover).
    """

    _KIND = 1  # _multiprocessing's SEMAPHORE kind (0 is RECURSIVE_MUTEX)

    def __init__(self, value: int, *, name: str | None = None, track: bool = True):
        self.owner = name is None
        self._tracked = self.owner and track
        maxvalue = _multiprocessing.SemLock.SEM_VALUE_MAX
        if name is None:
            for _ in range(16):
                name = "/" + _new_name()
                try:
                    self._sl = _multiprocessing.SemLock(self._KIND, int(value), maxvalue, name, False)
                    break
                except FileExistsError:
                    continue
            else:  # pragma: no cover - 16 collisions of 48 random bits
                raise FileExistsError("cannot find a free semaphore name")
            if self._tracked:
                resource_tracker.register(name, "semaphore")
        else:
            self._sl = _multiprocessing.SemLock._rebuild(0, self._KIND, maxvalue, name)
        self.name = name
        self._unlinked = False

    def acquire(self, block: bool = True, timeout: float | None = None) -> bool:
        """Take one permit; False when none came within ``timeout`` s (or at once, ``block=False``)."""
        return self._sl.acquire(block, timeout)

    def release(self) -> None:
        """Give one permit back."""
        self._sl.release()

    def unlink(self) -> None:
        """Remove the name (owner only; idempotent). Processes that opened it keep a working handle."""
        if not self.owner or self._unlinked:
            return
        self._unlinked = True
        try:
            _multiprocessing.sem_unlink(self.name)
        except FileNotFoundError:
            pass
        if self._tracked:
            resource_tracker.unregister(self.name, "semaphore")

    def __reduce__(self):
        return (_open_semaphore, (self.name,))


def _open_semaphore(name: str) -> RingSemaphore:
    try:
        return RingSemaphore(0, name=name)
    except FileNotFoundError:
        _end_if_starting()
        raise


def _creator_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def orphan_entries(shm_dir: str | os.PathLike = SHM_DIR) -> list[Path]:
    """The regular files in ``shm_dir`` named by pipeplan (``pipeplan-<pid>-...``, ``sem.pipeplan-<pid>-...``)
    whose creator process ``pid`` no longer exists, sorted by name. Entries of live processes, and anything
    that is not a regular file (not made by shm_open/sem_open), are never listed."""
    d = Path(shm_dir)
    try:
        names = sorted(os.listdir(d))
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for n in names:
        m = _ORPHAN_NAME.match(n)
        if m is None or int(m.group(1)) == os.getpid() or _creator_alive(int(m.group(1))):
            continue
        try:
            regular = stat.S_ISREG(os.lstat(d / n).st_mode)
        except FileNotFoundError:
            continue
        if regular:
            out.append(d / n)
    return out


def remove_orphans(shm_dir: str | os.PathLike = SHM_DIR) -> list[tuple[str, int]]:
    """Remove :func:`orphan_entries`; returns ``(name, bytes)`` of each entry removed (an entry another
    process removed first is skipped). Raises OSError when an entry cannot be removed (e.g. EACCES)."""
    removed = []
    for path in orphan_entries(shm_dir):
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            continue
        removed.append((path.name, size))
    return removed


class ShmRing:
    """One edge's ring: a shared-memory segment plus its ``free``/``full`` semaphores.

    Create with :meth:`create` (owner) or rebuild in another process from the pickled handle
    (attaches by segment name). ``slot_stride = HEADER_BYTES + align64(slot_bytes)``. ``announce``: whether the
    producer announces objects (:func:`announce_default` of the creating process); ``spin_s``: how long its
    consumer yields-and-polls for an announced object (:func:`spin_budget`).
    """

    def __init__(self, route: EdgeRoute, name: str, free: RingSemaphore, full: RingSemaphore, *, owner: bool,
                 shm: shared_memory.SharedMemory | None = None, announce: bool = ANNOUNCE,
                 spin_s: float = SPIN_S):
        self.route = route
        self.announce = announce
        self.spin_s = spin_s
        self.slots = max(1, route.ring_spec.slots)
        self.slot_bytes = route.ring_spec.slot_bytes
        self.stride = HEADER_BYTES + _align(self.slot_bytes)
        self.name = name
        self.free, self.full = free, full
        self.owner = owner
        self._shm: shared_memory.SharedMemory | _Attached | None = shm if shm is not None else _attach(name)
        mem = self._shm.buf
        assert mem is not None
        self._mem: memoryview | None = mem
        self._buf: np.ndarray | None = np.ndarray((self.slots * self.stride,), np.uint8, buffer=mem)
        self._payload: list[np.ndarray] | None = [self._buf[i * self.stride + HEADER_BYTES: (i + 1) * self.stride]
                                                  for i in range(self.slots)]
        self._seq: np.ndarray | None = np.ndarray((self.slots,), np.int64, buffer=mem, offset=SEQ_OFFSET,
                                                  strides=(self.stride,))
        self._tables: list[np.ndarray] | None = [
            np.ndarray((MAX_SEGMENTS, 4), np.int64, buffer=mem, offset=i * self.stride + TABLE_OFFSET)
            for i in range(self.slots)]

    @classmethod
    def create(cls, route: EdgeRoute, ctx: BaseContext | None = None, *, announce: bool | None = None,
               spin_s: float = SPIN_S) -> ShmRing:
        """Allocate the segment (``slots * stride`` bytes) and the two :class:`RingSemaphore` of ``route``.

        The segment is named ``pipeplan-<creator pid>-<random>`` (see :func:`segment_prefix`) so a
        leak is attributable to the process that created it. ``ctx`` is accepted for API compatibility
        (the semaphores are named POSIX semaphores, usable from any start method). ``announce``: default
        :func:`announce_default`.

        Raises TransportError when the segment or a semaphore cannot be created (e.g. /dev/shm full)."""
        slots = max(1, route.ring_spec.slots)
        size = slots * (HEADER_BYTES + _align(route.ring_spec.slot_bytes))
        try:
            shm = shared_memory.SharedMemory(name=_new_name(), create=True, size=size)
        except OSError as e:
            raise TransportError(f"edge {route.edge_id}: cannot create a {size}-byte shared-memory ring: {e}",
                                 where=route.edge_id) from None
        sems: list[RingSemaphore] = []
        try:
            sems.append(RingSemaphore(slots))
            sems.append(RingSemaphore(0))
        except OSError as e:
            for sem in sems:
                sem.unlink()
            shm.close()
            shm.unlink()
            raise TransportError(f"edge {route.edge_id}: cannot create the ring's semaphores: {e}",
                                 where=route.edge_id) from None
        return cls(route, shm.name, sems[0], sems[1], owner=True, shm=shm,
                   announce=announce_default() if announce is None else announce, spin_s=spin_s)

    def __getstate__(self):
        return {"route": self.route, "name": self.name, "free": self.free, "full": self.full,
                "announce": self.announce, "spin_s": self.spin_s}

    def __setstate__(self, st):
        self.__init__(st["route"], st["name"], st["free"], st["full"], owner=False, announce=st["announce"],
                      spin_s=st["spin_s"])

    # ------------------------------------------------------------------ data path
    def write(self, slot: int, frame: Frame) -> None:
        """Write ``frame`` into ``slot`` (the caller holds a ``free`` permit)."""
        off = slot * self.stride
        mem, payload = self._mem, self._payload
        assert mem is not None and payload is not None, "ring is closed"
        sp = frame.sampler or _NO_SAMPLER
        arr = frame.array
        segs = frame.segments
        n_seg = 0
        if segs is not None:
            assert self._tables is not None
            n_seg = len(segs)
            self._tables[slot][:n_seg] = segs
        if arr is not None:
            arr = np.ascontiguousarray(arr)
            shape = tuple(arr.shape) + (0,) * (4 - arr.ndim)
            HEADER.pack_into(mem, off, frame.op, _DTYPE_CODES[arr.dtype], arr.ndim, frame.slot, frame.seq_id,
                             frame.position, arr.nbytes, *shape, sp.temperature, sp.top_p, sp.top_k, sp.seed, n_seg)
            payload[slot][: arr.nbytes] = arr.reshape(-1).view(np.uint8)
        else:
            HEADER.pack_into(mem, off, frame.op, 0, 0, frame.slot, frame.seq_id, frame.position, 0, 0, 0, 0, 0,
                             sp.temperature, sp.top_p, sp.top_k, sp.seed, n_seg)

    def read(self, slot: int) -> Frame:
        """Copy the frame out of ``slot`` (the caller holds a ``full`` permit)."""
        off = slot * self.stride
        mem, payload = self._mem, self._payload
        assert mem is not None and payload is not None, "ring is closed"
        (op, code, ndim, kv_slot, seq_id, position, nbytes, s0, s1, s2, s3, temp, top_p, top_k,
         seed, n_seg) = HEADER.unpack_from(mem, off)
        if op == DATA:
            dt = _CODE_DTYPES[code]
            shape = (s0, s1, s2, s3)[:ndim]
            arr = payload[slot][:nbytes].view(dt).reshape(shape).copy()
            segs = None
            if n_seg:
                assert self._tables is not None
                segs = tuple(Segment(*r) for r in self._tables[slot][:n_seg].tolist())
            return Frame(DATA, seq_id, position, arr, None, kv_slot, segs)
        sampler = SamplerParams(temp, top_k, top_p, seed) if op == RESET else None
        return Frame(op, seq_id, position, None, sampler, kv_slot)

    def close(self) -> None:
        """Unmap the segment in this process (idempotent)."""
        if self._shm is not None:
            self._buf = self._payload = self._seq = self._tables = None  # drop the exported views before closing
            self._mem = None
            try:
                self._shm.close()
            except BufferError:  # pragma: no cover - a caller still holds a view
                pass

    def unlink(self) -> None:
        """Remove the segment and semaphore names (owner only; idempotent)."""
        self.close()
        if self.owner and self._shm is not None:
            try:
                self._shm.unlink()
            except FileNotFoundError:
                pass
            self._shm = None
            self.free.unlink()
            self.full.unlink()


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
        when already announced, when no slot is free, or when the ring does not announce."""
        if self.ring.announce and not self._announced and self.ring.free.acquire(False):
            self._announced = True
            self.ring.full.release()

    def send(self, frame: Frame, timeout: float | None = None) -> bool:
        if frame.op == DATA:
            assert frame.array is not None
            check_object(self.edge_id, self.object_spec, self.ring_spec, frame.array)
            check_segments(self.edge_id, frame)
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
                if waited < ring.spin_s:
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
    """Shared-memory rings for every edge of a run; picklable into stage processes (any start method:
    segments and semaphores are reopened by name)."""

    def __init__(self, routes: dict[str, EdgeRoute], rings: dict[str, ShmRing]):
        self.routes = dict(routes)
        self.rings = rings

    @classmethod
    def create(cls, routes: dict[str, EdgeRoute], ctx: BaseContext | None = None, *,
               announce: bool | None = None, spin_s: float = SPIN_S) -> ShmTransport:
        """Create one ring per route (owner side; ``ctx``, ``announce`` and ``spin_s`` as
        :meth:`ShmRing.create`). On failure, rings already made are unlinked."""
        rings: dict[str, ShmRing] = {}
        ann = announce_default() if announce is None else announce
        try:
            for edge_id, r in routes.items():
                rings[edge_id] = ShmRing.create(r, ctx, announce=ann, spin_s=spin_s)
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

    def shm_entries(self) -> list[str]:
        """Every /dev/shm entry of the rings: segments and ``sem.``-prefixed semaphore files."""
        return [n for r in self.rings.values() for n in (r.name, "sem." + r.free.name[1:], "sem." + r.full.name[1:])]

    def close(self) -> None:
        """Unmap every ring in this process."""
        for r in self.rings.values():
            r.close()

    def unlink(self) -> None:
        """Unmap and remove every ring (owner)."""
        for r in self.rings.values():
            r.unlink()


class StageControl:
    """The run's control block: one small shared-memory segment (``pipeplan-<pid>-ctl-<hex>``) of int64 words.

    Word 0 is the stop flag (set by the orchestrator, polled by the stages' serve loops: the
    ``stop`` object of :meth:`pipeplan.runtime.stage.StageWorker.serve`); word ``1 + i`` is stage
    ``i``'s heartbeat, the ``time.monotonic_ns()`` of its last beat (0: none yet); word ``1 + n + i`` the
    number of DATA frames stage ``i`` had served at that beat. A stage process beats from a thread every
    :data:`BEAT_S` (:meth:`beat`), so a stage whose beat is older than the orchestrator's liveness limit
    is not running (stopped, frozen) even if it has not exited. Picklable by name; the creator unlinks it
    (:meth:`unlink`). :func:`read_control` reads one from outside (tests, tools) without attaching.
    """

    def __init__(self, n_stages: int, *, name: str | None = None):
        self.n_stages = int(n_stages)
        size = 8 * (1 + 2 * self.n_stages)
        self.owner = name is None
        if name is None:
            try:
                self._shm: shared_memory.SharedMemory | _Attached | None = shared_memory.SharedMemory(
                    name=_new_name(CONTROL_TAG), create=True, size=size)
            except OSError as e:
                raise TransportError(f"cannot create the {size}-byte control block: {e}", where="control") from None
        else:
            self._shm = _attach(name)
        assert self._shm is not None and self._shm.buf is not None
        self.name = self._shm.name
        self._words: np.ndarray | None = np.ndarray((1 + 2 * self.n_stages,), np.int64, buffer=self._shm.buf)
        if self.owner:
            self._words[:] = 0

    def __reduce__(self):
        return (_open_control, (self.n_stages, self.name))

    def _w(self) -> np.ndarray:
        w = self._words
        assert w is not None, "control block is closed"
        return w

    def set(self) -> None:
        """Raise the stop flag."""
        self._w()[0] = 1

    def is_set(self) -> bool:
        """Whether the stop flag is raised (False once closed: nothing to stop)."""
        return self._words is not None and bool(self._words[0])

    def beat(self, stage: int, served: int = 0) -> None:
        """Stamp stage ``stage``'s heartbeat with ``time.monotonic_ns()`` and its served-frame count."""
        w = self._w()
        w[1 + self.n_stages + stage] = served
        w[1 + stage] = time.monotonic_ns()

    def last_beat(self, stage: int) -> int:
        """``time.monotonic_ns()`` of stage ``stage``'s last beat (0: none yet)."""
        return int(self._w()[1 + stage])

    def close(self) -> None:
        """Unmap in this process (idempotent)."""
        if self._shm is not None:
            self._words = None
            self._shm.close()

    def unlink(self) -> None:
        """Unmap and remove the segment (owner; idempotent)."""
        self.close()
        if self.owner and self._shm is not None:
            try:
                self._shm.unlink()
            except FileNotFoundError:
                pass
        self._shm = None


def _open_control(n_stages: int, name: str) -> StageControl:
    return StageControl(n_stages, name=name)


def read_control(path: str | os.PathLike) -> dict[str, object]:
    """A snapshot of a control block file (``/dev/shm/pipeplan-<pid>-ctl-<hex>``) read as a plain file:
    ``{"stop": bool, "beats": [ns, ...], "served": [frames, ...]}``. Raises OSError / ValueError."""
    words = np.fromfile(path, dtype=np.int64)
    n = (len(words) - 1) // 2
    if len(words) != 1 + 2 * n or n < 1:
        raise ValueError(f"{path}: not a control block ({len(words)} words)")
    return {"stop": bool(words[0]), "beats": [int(x) for x in words[1:1 + n]],
            "served": [int(x) for x in words[1 + n:]]}


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
