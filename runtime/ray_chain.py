"""The relay chain of a Ray placement: what a token's loop through S stage actors pays besides their work.

A frame of one activation row goes driver -> a :class:`Relay` actor on each stage's Ray node -> driver, over the
endpoints a run of :class:`~pipeplan.runtime.ray_backend.RayBackend` uses (``RayTransport.open_send`` /
``open_recv``, the run's transport per edge, :func:`~pipeplan.runtime.ray_backend.edge_transports`), each relay
passing the frame on as it arrives. :func:`measure_chain` times the loop and the CPU each process spends per frame;
``pipeplan calibrate --backend ray`` caches it (``runtime.<S>.ray_loop``) and
:meth:`pipeplan.analysis.concurrency.StageCosts.with_ray_loop` turns it into the hops of a Ray prediction.
Source: issue 14 items 3 and 4.
"""

from __future__ import annotations

import os
import queue
import statistics
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

CHAIN_FRAMES = 300
"""Timed frames of one chain measurement (after :data:`CHAIN_WARM` untimed ones)."""
CHAIN_WARM = 100
FRAME_TIMEOUT_S = 60.0


class Relay:
    """An actor holding edge ``inbound`` (consumer) and edge ``outbound`` (producer, to node ``consumer``: the
    driver or the next relay) of a RayTransport in any mode; a thread sends every frame received on ``inbound`` on
    ``outbound`` and keeps the seconds from each receive's return to its send's return (``turnaround``). The edge
    methods are a :class:`~pipeplan.runtime.ray_backend.StageActor`'s, so the transport's endpoints connect to it
    as to a stage."""

    def __init__(self, transport: Any, node_id: str, inbound: str = "in", outbound: str = "out",
                 consumer: str = "orchestrator"):
        from pipeplan.runtime.ray_backend import _ChannelInbox, _Inbox, _Listener, _OutChannel, _SocketInbox

        self.tr, self.node_id = transport, node_id
        self.inbound, self.outbound, self.consumer = inbound, outbound, consumer
        self._turn: list[float] = []
        slots = transport.routes[inbound].ring_spec.slots
        self._inbox, self._chan_inbox, self._out_chan = _Inbox(), _ChannelInbox(slots, transport.wait), _OutChannel()
        self._sock_inbox, self._out_sock = _SocketInbox(), _Listener()
        self._outbox: queue.Queue = queue.Queue(maxsize=slots)
        self._stop = threading.Event()
        transport.attach(inbound, {"channel": self._chan_inbox, "socket": self._sock_inbox}.get(
            transport.edge_mode(inbound), self._inbox))
        if consumer == "orchestrator":
            transport.attach(outbound, {"channel": self._out_chan, "socket": self._out_sock}.get(
                transport.edge_mode(outbound), self._outbox))
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        rx = self.tr.open_recv(self.node_id, self.inbound)
        tx = self.tr.open_send(self.consumer, self.outbound)
        while not self._stop.is_set():
            f = rx.recv(timeout=0.05)
            if f is not None:
                t0 = time.perf_counter()
                while not tx.send(f, timeout=0.05) and not self._stop.is_set():
                    pass
                self._turn.append(time.perf_counter() - t0)

    def cpu(self) -> float:
        """CPU seconds this actor's process has used (every thread: the relay's, Ray's)."""
        return time.process_time()

    def turnaround(self, skip: int) -> float:
        """Median seconds from a receive's return to its send's return, over the frames after the first ``skip``."""
        return statistics.median(self._turn[skip:]) if len(self._turn) > skip else 0.0

    def stop(self) -> None:
        self._stop.set()

    def idle_cpu(self, seconds: float) -> float:
        """CPU seconds per second this actor's process uses while its loop waits on ``in`` with nothing sent."""
        t0 = time.process_time()
        time.sleep(seconds)
        return (time.process_time() - t0) / seconds

    # the stage actor's edge methods (StageActor's)
    def push(self, edge_id: str, n: int, frame: Any) -> bool:
        return self._inbox.put(n, frame, self._stop)

    def pull(self, edge_id: str, wait_s: float) -> Any:
        try:
            return self._outbox.get(timeout=wait_s)
        except queue.Empty:
            return None

    def accept_channel(self, edge_id: str, chan: Any, ack_reader: Any, ack_node: str) -> Any:
        return self._chan_inbox.accept(chan, ack_reader, ack_node)

    def socket_address(self, edge_id: str) -> Any:
        return self._sock_inbox.address()

    def out_socket_address(self, edge_id: str) -> Any:
        return self._out_sock.address()

    def out_channel(self, edge_id: str, wait_s: float) -> Any:
        return self._out_chan.wait(wait_s)

    def accept_ack(self, edge_id: str, ack: Any) -> bool:
        assert self._out_chan.credits is not None
        self._out_chan.credits.set_ack(ack)
        return True


def loop_seconds(tx: Any, rx: Any, x: np.ndarray, i: int, timeout: float) -> float:
    """Seconds from sending DATA frame ``i`` of ``x`` on ``tx`` until frame ``i`` comes back on ``rx``. Raises
    TimeoutError when the send or the frame does not come within ``timeout`` s, RuntimeError for another frame."""
    from pipeplan.runtime.transport import DATA, Frame

    t0 = time.perf_counter()
    if not tx.send(Frame(DATA, 0, i, x), timeout=timeout):
        raise TimeoutError(f"relay chain: frame {i} not sent within {timeout:.0f} s")
    f = rx.recv(timeout=timeout)
    if f is None:
        raise TimeoutError(f"relay chain: frame {i} did not come back within {timeout:.0f} s")
    if f.position != i:
        raise RuntimeError(f"relay chain: frame {f.position} came back for frame {i}")
    return time.perf_counter() - t0


def measure_chain(ids: Mapping[str, str], nodes: Sequence[str], n_embd: int, *, mode: str = "auto",
                  wait: str = "backoff", frames: int = CHAIN_FRAMES, rows: int = 1,
                  tag: str = "chain") -> dict[str, Any]:
    """The relay chain of a pipeline on ``nodes`` (stage i's plan node id; ``ids``: plan node id -> Ray node id,
    :func:`~pipeplan.runtime.ray_backend.resolve_nodes`) on the connected Ray cluster: a [rows, n_embd] f32 DATA
    frame driver -> relay 0 -> ... -> relay S-1 -> driver, every edge over ``mode`` (``auto``: as a run places
    it) with channel reads waiting by ``wait``; ``frames`` timed loops after :data:`CHAIN_WARM`.

    Returns seconds: ``loop_s`` (median round trip: what a token's loop pays besides the stages' work),
    ``loop_p90_s``, ``turnaround_s`` (a relay's median receive-return -> send-return), ``relay_cpu_s`` (CPU per frame
    of a relay's process, every thread, median over relays), ``driver_cpu_s`` (the driver's); and ``relays``,
    ``frames``, ``payload_bytes``, ``transport`` (``mode``), ``edges`` (edge -> transport), ``placement``
    (plan node id -> Ray node id). Every actor it starts has ended before it returns (:func:`~pipeplan.runtime.ray_backend.end_actors`). Raises BackendError
    (unknown mode), TimeoutError when a frame does not come back within 60 s.
    """
    import ray
    from pipeplan.plan_types import ObjectSpec, RingSpec
    from pipeplan.runtime.ray_backend import (
        RayTransport,
        RunScope,
        edge_transports,
        end_actors,
        start_driver_proxy,
    )
    from pipeplan.runtime.transport import ORCHESTRATOR_NODE, EdgeRoute
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    k = len(nodes)
    spec = ObjectSpec("activation", "f32", 4, (256, n_embd), "row_major", 64, 256 * n_embd * 4)
    rs = RingSpec(2, spec.max_extent)
    ends = [ORCHESTRATOR_NODE, *nodes, ORCHESTRATOR_NODE]
    routes = {f"e{i}": EdgeRoute(f"e{i}", "activation", ends[i], ends[i + 1], spec, rs) for i in range(k + 1)}
    scope = RunScope(ray.get_runtime_context().namespace, f"pipeplan/{tag}/{os.getpid()}/{mode}/{k}/{time.time_ns()}")
    names = [f"{scope.prefix}/relay{i}" for i in range(k)]
    holders = {(nodes[i], f"e{i}"): names[i] for i in range(k)}
    holders[(ORCHESTRATOR_NODE, f"e{k}")] = names[-1]
    placement = {m: ids[m] for m in nodes}
    edge_modes = edge_transports(routes, {ORCHESTRATOR_NODE: ray.get_runtime_context().get_node_id(), **placement},
                                 mode)
    proxy_name = f"{scope.prefix}/driver" if "channel" in edge_modes.values() else None
    proxy = start_driver_proxy(proxy_name, scope.namespace) if proxy_name else None
    tr = RayTransport(routes, scope, holders, mode=mode, proxy=proxy_name, wait=wait, edge_modes=edge_modes)
    relays: list[Any] = [ray.remote(Relay).options(name=names[i], num_cpus=0, max_concurrency=8, scheduling_strategy=
                                        NodeAffinitySchedulingStrategy(ids[nodes[i]], soft=False)).remote(
        tr, nodes[i], f"e{i}", f"e{i + 1}", ends[i + 2]) for i in range(k)]
    try:
        tx, rx = tr.open_send(nodes[0], "e0"), tr.open_recv(ORCHESTRATOR_NODE, f"e{k}")
        x = np.random.default_rng(0).standard_normal((rows, n_embd)).astype(np.float32)
        for i in range(CHAIN_WARM):
            loop_seconds(tx, rx, x, i, FRAME_TIMEOUT_S)
        cpu0, d0 = ray.get([r.cpu.remote() for r in relays]), time.process_time()
        loops = sorted(loop_seconds(tx, rx, x, CHAIN_WARM + i, FRAME_TIMEOUT_S) for i in range(frames))
        driver_cpu = (time.process_time() - d0) / frames
        cpu1 = ray.get([r.cpu.remote() for r in relays])
        relay_cpu = statistics.median(b - a for a, b in zip(cpu0, cpu1, strict=True)) / frames
        turn = statistics.median(ray.get([r.turnaround.remote(CHAIN_WARM) for r in relays]))
    finally:
        try:
            ray.get([r.stop.remote() for r in relays], timeout=10.0)
        except Exception:  # noqa: BLE001 - the kills below are what guarantee cleanup
            pass
        tr.close()
        end_actors([*relays, proxy])
    return {"loop_s": statistics.median(loops), "loop_p90_s": loops[int(0.9 * len(loops))], "turnaround_s": turn,
            "relay_cpu_s": relay_cpu, "driver_cpu_s": driver_cpu, "relays": k, "frames": frames,
            "payload_bytes": int(x.nbytes), "transport": mode, "edges": dict(edge_modes), "placement": placement}


__all__ = ["CHAIN_FRAMES", "Relay", "loop_seconds", "measure_chain"]
