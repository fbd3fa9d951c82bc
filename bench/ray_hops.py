"""Ray hops over the Ray backend's transports next to Ray's Compiled Graph (issue 14 item 3): per-hop latency, a
relay chain, decode tok/s.

Usage: ``python bench/ray_hops.py [--models stories260K,gemma3] [--stages 3] [--hops 400] [--tokens 64]
[--repeat 3] [--rounds 3] [--transports auto,channel,socket,actor] [--waits backoff,spin]``.

It starts a local Ray cluster (``bench/_ray_cluster.py``) with ``--stages`` Ray nodes (1 CPU, 200 MB object
store each) carrying the pool ids ``n0..n{k-1}``, the driver connected to ``n0``. The transports of
:class:`pipeplan.runtime.ray_backend.RayBackend` run on the same cluster (``PIPEPLAN_RAY_TRANSPORT``): ``auto`` (the
default: a channel within a Ray node, a TCP stream between Ray nodes), ``channel`` (Ray shared-memory channels on
every edge), ``socket`` (a TCP stream on every edge) and ``actor`` (one actor call per frame on every edge, the
transport before issue 14); the channel transport
once per ``--waits`` entry (how a channel read waits: ``backoff``, the default, or ``spin``, Ray's own blocking read;
``PIPEPLAN_RAY_WAIT``). Every decode runs the compiled stage programs on the CPU kernels, as ``pipeplan run`` does.

- **hop**: one frame, one hop. The driver sends a DATA Frame of one activation row ([1, n_embd] f32 of the
  model) through the transport's own endpoints (``RayTransport.open_send`` / ``open_recv``) to an echo actor,
  which receives it and sends it back on a second edge; median of round trip / 2 over ``--hops`` frames
  after a warm-up, for an echo actor on the driver's Ray node (``same node``) and on another (``cross node``).
  ``compiled graph`` is the reference: Ray's own Compiled Graph (``InputNode -> echo.bind(inp)``,
  ``experimental_compile()``) passing the same array to an echo actor on the same Ray node and on the other one.
  Each of ``--rounds`` rounds measures every variant once (interleaved); the table gives the median of the rounds'
  medians.
- **relay chain**: the loop of a token through ``--stages`` stages without their work: driver -> a relay actor
  on each of ``n0..n{k-1}`` -> driver, each relay passing the frame on as it arrives (:func:`bench_chain`; Compiled
  Graph: ``InputNode -> relay0.echo -> ... -> relay{k-1}.echo``). Per edge: round trip / (k + 1); relay: a relay's
  median time from its receive's return to its send's return; relay CPU: the CPU a relay's process uses per frame
  (every thread; what a stage pays per frame besides its work).
- **wait CPU**: CPU-s/s of the echo actor's process while it waits on its inbound edge with nothing sent, and of
  the driver waiting on the return edge (1 s each): what a waiting read takes from the computing stages.
- **decode**: the model over ``--stages`` stage actors on ``n0..n{k-1}`` (greedy, one thread per stage),
  a warm-up sequence, then ``--repeat`` timed sequences of ``--tokens`` tokens (median decode tok/s).

Prints a table and writes ``bench/results/ray_hops.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from _ray_cluster import compiled_stages, ray_cluster  # noqa: E402
from decode import MODEL, PROMPT  # noqa: E402
from pipeplan.runtime.ray_chain import Relay as Echo  # noqa: E402
from pipeplan.runtime.ray_chain import loop_seconds, measure_chain  # noqa: E402

MB = 1024 * 1024
TRANSPORTS = ("auto", "channel", "socket", "actor")
CG = "compiled graph"
WAITS = ("backoff", "spin")


def gemma3_model() -> Path:
    """The Gemma 3 270M Q4_K_M GGUF the tests use (assembled once by its package)."""
    sys.path.insert(0, str(REPO))
    from tests.conftest import gemma3_file

    return gemma3_file()


def bench_hop(mode: str, wait: str, ray_node: str, node_id: str, n_embd: int, n: int) -> dict:
    """Median one-way hop (round trip / 2) of a [1, n_embd] f32 DATA Frame through ``mode``'s endpoints
    (``wait``: the channel read's wait), and the CPU-s/s of a waiting consumer (the echo actor) and of the
    driver waiting on the return edge, each over 1 s with nothing sent."""
    import ray
    from pipeplan.plan_types import ObjectSpec, RingSpec
    from pipeplan.runtime.ray_backend import RayTransport, RunScope, edge_transports, start_driver_proxy
    from pipeplan.runtime.transport import EdgeRoute
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    spec = ObjectSpec("activation", "f32", 4, (256, n_embd), "row_major", 64, 256 * n_embd * 4)
    rs = RingSpec(2, spec.max_extent)
    routes = {"in": EdgeRoute("in", "activation", "orchestrator", node_id, spec, rs),
              "out": EdgeRoute("out", "activation", node_id, "orchestrator", spec, rs)}
    scope = RunScope(ray.get_runtime_context().namespace, f"pipeplan/bench-hop/{os.getpid()}/{mode}/{node_id}")
    name = f"{scope.prefix}/echo"
    edge_modes = edge_transports(routes, {"orchestrator": ray.get_runtime_context().get_node_id(), node_id: ray_node},
                                 mode)
    proxy_name = f"{scope.prefix}/driver" if "channel" in edge_modes.values() else None
    proxy = start_driver_proxy(proxy_name, scope.namespace) if proxy_name else None
    tr = RayTransport(routes, scope, {(node_id, "in"): name, ("orchestrator", "out"): name}, mode=mode,
                      proxy=proxy_name, wait=wait, edge_modes=edge_modes)
    echo = ray.remote(Echo).options(name=name, num_cpus=0, max_concurrency=8, scheduling_strategy=
                                    NodeAffinitySchedulingStrategy(ray_node, soft=False)).remote(tr, node_id)
    try:
        tx, rx = tr.open_send(node_id, "in"), tr.open_recv("orchestrator", "out")
        x = np.random.default_rng(0).standard_normal((1, n_embd)).astype(np.float32)

        def once(i: int) -> float:
            return loop_seconds(tx, rx, x, i, 30.0) / 2

        for i in range(100):
            once(i)
        hops = sorted(once(100 + i) for i in range(n))
        echo_idle = ray.get(echo.idle_cpu.remote(1.0))
        t0 = time.process_time()
        assert rx.recv(timeout=1.0) is None
        driver_idle = time.process_time() - t0
    finally:
        ray.get(echo.stop.remote())
        tr.close()
        ray.kill(echo)
        if proxy is not None:
            ray.kill(proxy)
    return {"median_us": statistics.median(hops) * 1e6, "p90_us": hops[int(0.9 * len(hops))] * 1e6,
            "min_us": hops[0] * 1e6, "n": n, "payload_bytes": int(x.nbytes),
            "consumer_wait_cpu_s_per_s": echo_idle, "driver_wait_cpu_s_per_s": driver_idle}


def bench_chain(mode: str, wait: str, ids: dict[str, str], nodes: list[str], n_embd: int, n: int,
                rows: int = 1) -> dict:
    """A frame through a relay chain laid out as a pipeline of ``len(nodes)`` stages
    (:func:`pipeplan.runtime.ray_chain.measure_chain`, what ``pipeplan calibrate --backend ray`` caches), in us:
    ``loop_us`` (median round trip), ``loop_p90_us``, its share per edge (``per_hop_us``: loop / (S + 1) edges), the
    relays' median receive-return -> send-return (``turnaround_us``), the CPU per frame of a relay's process
    (``relay_cpu_us``) and of the driver's (``driver_cpu_us``)."""
    c = measure_chain(ids, nodes, n_embd, mode=mode, wait=wait, frames=n, rows=rows, tag="bench-chain")
    k = c["relays"]
    return {"loop_us": c["loop_s"] * 1e6, "loop_p90_us": c["loop_p90_s"] * 1e6, "per_hop_us": c["loop_s"] * 1e6 / (k + 1),
            "turnaround_us": c["turnaround_s"] * 1e6, "relay_cpu_us": c["relay_cpu_s"] * 1e6,
            "driver_cpu_us": c["driver_cpu_s"] * 1e6, "relays": k, "n": n, "payload_bytes": c["payload_bytes"]}


@contextlib.contextmanager
def compiled_chain(ray_nodes: list[str]):
    """Ray's Compiled Graph ``InputNode -> relay0.echo -> ... -> relay{k-1}.echo`` with relay i a :class:`CgEcho`
    on Ray node ``ray_nodes[i]`` (``experimental_compile()``); yields ``(compiled dag, relays)``, torn down after."""
    import ray
    from ray.dag import InputNode
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    relays = [ray.remote(CgEcho).options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(
        node, soft=False)).remote() for node in ray_nodes]
    ray.get([r.__ray_ready__.remote() for r in relays])
    with InputNode() as inp:
        dag = inp
        for r in relays:
            dag = r.echo.bind(dag)
    cdag = dag.experimental_compile()
    try:
        yield cdag, relays
    finally:
        cdag.teardown()
        for r in relays:
            ray.kill(r)


def round_trips(cdag, x: np.ndarray, n: int, timeout: float) -> list[float]:
    """Sorted seconds of ``n`` executions of ``cdag`` on ``x`` (after 100 warm-up executions)."""
    import ray

    def once() -> float:
        t0 = time.perf_counter()
        y = ray.get(cdag.execute(x), timeout=timeout)
        assert y.shape == x.shape
        return time.perf_counter() - t0

    for _ in range(100):
        once()
    return sorted(once() for _ in range(n))


def bench_compiled_chain(ids: dict[str, str], nodes: list[str], n_embd: int, n: int) -> dict:
    """Ray's Compiled Graph through the same chain (:func:`compiled_chain`, relay i on ``nodes[i]``): median
    round trip of a [1, n_embd] f32 array (as :func:`bench_chain`, without a turnaround)."""
    x = np.random.default_rng(0).standard_normal((1, n_embd)).astype(np.float32)
    with compiled_chain([ids[m] for m in nodes]) as (cdag, _):
        loops = round_trips(cdag, x, n, 60.0)
    loop = statistics.median(loops)
    return {"loop_us": loop * 1e6, "loop_p90_us": loops[int(0.9 * len(loops))] * 1e6,
            "per_hop_us": loop * 1e6 / (len(nodes) + 1), "turnaround_us": None, "relays": len(nodes), "n": n,
            "payload_bytes": int(x.nbytes)}


class CgEcho:
    """The echo of Ray's own Compiled Graph reference: one DAG node, an actor method returning its input. An empty
    array makes it sleep 1 s first (the driver-wait probe)."""

    def echo(self, x):
        if x.size == 0:
            time.sleep(1.0)
        return x

    def idle_cpu(self, seconds: float) -> float:
        """CPU-s/s of this actor's process while its compiled-graph loop waits on its input with nothing sent."""
        t0 = time.process_time()
        time.sleep(seconds)
        return (time.process_time() - t0) / seconds


def bench_compiled_graph(ray_node: str, n_embd: int, n: int) -> dict:
    """Ray's own Compiled Graph as the reference (:func:`compiled_chain` of one echo actor on ``ray_node``):
    median one-way hop (round trip / 2) of the same [1, n_embd] f32 array there and back, and the wait CPU-s/s
    of the echo actor and of the driver (as :func:`bench_hop`)."""
    import ray

    x = np.random.default_rng(0).standard_normal((1, n_embd)).astype(np.float32)
    with compiled_chain([ray_node]) as (cdag, (echo,)):
        hops = [t / 2 for t in round_trips(cdag, x, n, 30.0)]
        echo_idle = ray.get(echo.idle_cpu.remote(1.0))
        ref = cdag.execute(np.zeros(0, np.float32))
        t0, w0 = time.process_time(), time.perf_counter()
        ray.get(ref, timeout=30.0)
        driver_idle = (time.process_time() - t0) / (time.perf_counter() - w0)
    return {"median_us": statistics.median(hops) * 1e6, "p90_us": hops[int(0.9 * len(hops))] * 1e6,
            "min_us": hops[0] * 1e6, "n": n, "payload_bytes": int(x.nbytes),
            "consumer_wait_cpu_s_per_s": echo_idle, "driver_wait_cpu_s_per_s": driver_idle}


def bench_decode(mode: str, wait: str, model: Path, nodes: list[str], prompt_ids: list[int], tokens: int,
                 repeat: int) -> dict:
    """Decode tok/s of ``model`` over one stage actor per node with the ``mode`` transport and ``wait``
    (median of ``repeat``)."""
    from pipeplan.runtime.orchestrator import Pipeline
    from pipeplan.runtime.ray_backend import RayBackend

    run = compiled_stages(model, nodes)
    with Pipeline(run.pop("provisions"), backend=RayBackend(ray_transport=mode, ray_wait=wait), num_threads=1,
                  **run) as pipe:
        warm, _ = pipe.generate_ids(prompt_ids, 8)
        runs = [pipe.generate_ids(prompt_ids, tokens) for _ in range(repeat)]
        load_s = pipe.load_s
    return {"load_s": load_s, "decode_tok_s": statistics.median(r[1]["decode_tok_s"] for r in runs),
            "prefill_tok_s": statistics.median(r[1]["prefill_tok_s"] for r in runs),
            "ids": runs[0][0], "n_prompt": len(prompt_ids), "n_decode": tokens}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="stories260K,gemma3")
    ap.add_argument("--stages", type=int, default=3)
    ap.add_argument("--hops", type=int, default=400)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3, help="hop measurements: rounds over all variants")
    ap.add_argument("--transports", default=",".join(TRANSPORTS))
    ap.add_argument("--waits", default=",".join(WAITS), help="channel read waits to compare (channel transport)")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "ray_hops.json")
    args = ap.parse_args(argv)

    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.runtime.tokenizer import SPMTokenizer

    variants = [(m, w) for m in args.transports.split(",") if m
                for w in ([w for w in args.waits.split(",") if w] if m == "channel" else ["backoff"])]
    modes = [m if m != "channel" else f"channel/{w}" for m, w in variants]
    models = {"stories260K": MODEL, "gemma3": None}
    nodes = [f"n{i}" for i in range(args.stages)]
    hop_labels = [CG, *modes]
    hops: list[dict] = []
    chains: list[dict] = []
    decode: list[dict] = []
    with ray_cluster(nodes, object_store_mb=200) as info:
        ids = info["ids"]
        for name in [m for m in args.models.split(",") if m]:
            model = models[name] or gemma3_model()
            n_embd = read_model_facts(model).embedding_length
            prompt_ids = SPMTokenizer.from_gguf(model).encode(PROMPT)
            for rnd in range(args.rounds):  # every variant once per round, so load drifts hit all alike
                for where, node in (("same node", nodes[0]), ("cross node", nodes[-1])):
                    for label, (mode, wait) in [(CG, ("", "")), *zip(modes, variants, strict=True)]:
                        h = (bench_compiled_graph(ids[node], n_embd, args.hops) if label == CG
                             else bench_hop(mode, wait, ids[node], node, n_embd, args.hops))
                        hops.append({"model": name, "transport": label, "where": where, "to_node": node,
                                     "round": rnd, "load_avg": os.getloadavg(), **h})
                for label, (mode, wait) in [(CG, ("", "")), *zip(modes, variants, strict=True)]:
                    c = (bench_compiled_chain(ids, nodes, n_embd, args.hops) if label == CG
                         else bench_chain(mode, wait, ids, nodes, n_embd, args.hops))
                    chains.append({"model": name, "transport": label, "round": rnd, "load_avg": os.getloadavg(), **c})
            for label, (mode, wait) in zip(modes, variants, strict=True):
                d = bench_decode(mode, wait, model, nodes, prompt_ids, args.tokens, args.repeat)
                decode.append({"model": name, "transport": label, "stages": args.stages,
                               "load_avg": os.getloadavg(), **d})

    def summary(name: str, where: str) -> dict[str, dict]:
        """Per variant: the median over rounds of each round's figures (and the rounds' medians)."""
        out = {}
        for m in hop_labels:
            rs = [h for h in hops if h["model"] == name and h["where"] == where and h["transport"] == m]
            out[m] = {k: statistics.median(r[k] for r in rs) for k in
                      ("median_us", "p90_us", "consumer_wait_cpu_s_per_s", "driver_wait_cpu_s_per_s")}
            out[m].update(payload_bytes=rs[0]["payload_bytes"], round_medians_us=[r["median_us"] for r in rs])
        return out

    summaries = [{"model": name, "where": where, "transports": summary(name, where)}
                 for name in dict.fromkeys(h["model"] for h in hops) for where in ("same node", "cross node")]
    print(f"hop: median over {args.rounds} round(s) of each round's median of {args.hops} hops (one-way, round "
          f"trip / 2); '{CG}' is Ray's own Compiled Graph (InputNode -> echo actor method) on the same cluster")
    print("| model | hop | payload B | " + " | ".join(f"{m} median us (p90)" for m in hop_labels) + " |")
    print("|---|---|---|" + "---|" * len(hop_labels))
    for s in summaries:
        row = s["transports"]
        print(f"| {s['model']} | {s['where']} | {row[CG]['payload_bytes']} | " + " | ".join(
            f"{row[m]['median_us']:.0f} ({row[m]['p90_us']:.0f})" for m in hop_labels) + " |")
    print()
    print(f"relay chain: driver -> {args.stages} relay actors on {', '.join(nodes)} -> driver ({args.stages + 1} edges); "
          f"per edge: median over rounds of (median round trip / {args.stages + 1}); relay: receive-return -> "
          f"send-return")
    print("| model | relays | " + " | ".join(f"{m} per edge us (loop us, relay us, relay CPU us)" for m in hop_labels)
          + " |")
    print("|---|---|" + "---|" * len(hop_labels))
    chain_summary = []
    for name in dict.fromkeys(c["model"] for c in chains):
        row = {}
        for m in hop_labels:
            rs = [c for c in chains if c["model"] == name and c["transport"] == m]
            row[m] = {"per_hop_us": statistics.median(r["per_hop_us"] for r in rs),
                      "loop_us": statistics.median(r["loop_us"] for r in rs),
                      "turnaround_us": None if m == CG else statistics.median(r["turnaround_us"] for r in rs),
                      "relay_cpu_us": None if m == CG else statistics.median(r["relay_cpu_us"] for r in rs),
                      "driver_cpu_us": None if m == CG else statistics.median(r["driver_cpu_us"] for r in rs),
                      "round_loops_us": [r["loop_us"] for r in rs]}
        chain_summary.append({"model": name, "relays": args.stages, "transports": row})
        print(f"| {name} | {args.stages} | " + " | ".join(
            f"{row[m]['per_hop_us']:.0f} ({row[m]['loop_us']:.0f}"
            + ("" if row[m]["turnaround_us"] is None else
               f", {row[m]['turnaround_us']:.0f}, {row[m]['relay_cpu_us']:.0f}") + ")"
            for m in hop_labels) + " |")
    print()
    print("| model | hop | " + " | ".join(f"{m} wait CPU-s/s (consumer, driver)" for m in hop_labels) + " |")
    print("|---|---|" + "---|" * len(hop_labels))
    for s in summaries:
        row = s["transports"]
        print(f"| {s['model']} | {s['where']} | " + " | ".join(
            f"{row[m]['consumer_wait_cpu_s_per_s']:.2f}, {row[m]['driver_wait_cpu_s_per_s']:.2f}"
            for m in hop_labels) + " |")
    print()
    print("| model | stages | " + " | ".join(f"{m} decode tok/s" for m in modes) + " | same ids |")
    print("|---|---|" + "---|" * len(modes) + "---|")
    for name in dict.fromkeys(d["model"] for d in decode):
        row = {d["transport"]: d for d in decode if d["model"] == name}
        same = len({tuple(r["ids"]) for r in row.values()}) == 1
        print(f"| {name} | {args.stages} | " + " | ".join(f"{row[m]['decode_tok_s']:.1f}" for m in modes)
              + f" | {same} |")
    doc = {"command": "python bench/ray_hops.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "machine": {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count()},
           "cluster": {"nodes": nodes, "cpus_per_node": 1, "object_store_mb_per_node": 200},
           "hop_summary": summaries, "chain_summary": chain_summary, "hops": hops, "chains": chains, "decode": decode}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
