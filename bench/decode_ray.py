"""Decode benchmark of the Ray backend next to the local backend (issue 8): decode tokens/s and per-hop latency.

Usage: ``python bench/decode_ray.py [--stages 3] [--tokens 200] [--repeat 3] [--hops 300] [--address ADDR]``.

Without ``--address`` it starts a local Ray cluster (``bench/_ray_cluster.py``) with ``--stages`` nodes
(1 CPU, 80 MB object store each) carrying the pool ids ``n0..n{k-1}``; with ``--address`` the cluster must
already carry those ids. The same plan (stories260K, ``--stages`` stages, greedy, one torch
thread per stage) runs on the local backend (processes + shared-memory rings, through
``bench/decode.py``'s ``bench_pipeline``) and on the Ray backend (one actor per stage, pinned to its node);
each configuration runs a warm-up sequence, then ``--repeat`` timed sequences (median).

Per-hop latency, two figures:
- ``ray_hop``: measured. Median one-way time (round trip / 2) of an actor call carrying a [1, 64] f32
  activation Frame from the driver to an actor on another Ray node (the Ray backend's push), next to
  ``shm_hop``, the same ping-pong through a shared-memory ring between two processes (``bench/decode.py``).
- ``derived_extra_per_hop_ms``: ``(1/ray_tok_s - 1/local_tok_s) / (stages + 1)``, the decode step time the
  Ray backend adds per edge (stages + 1 edges per token, including token-in and token-out).

Prints a table and writes ``bench/results/decode_ray.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _ray_cluster import compiled_stages, ray_cluster  # noqa: E402
from decode import MODEL, PROMPT, bench_hop, bench_pipeline  # noqa: E402

MB = 1024 * 1024


def bench_ray_pipeline(model: Path, nodes: list[str], prompt_ids: list[int], tokens: int, repeat: int,
                       threads: int) -> dict:
    """Like ``decode.bench_pipeline`` on the Ray backend (the connected cluster)."""
    from pipeplan.runtime.orchestrator import Pipeline
    from pipeplan.runtime.ray_backend import RayBackend

    run = compiled_stages(model, nodes, memory_bytes=1 << 30)
    with Pipeline(run.pop("provisions"), backend=RayBackend(), num_threads=threads, **run) as pipe:
        pipe.generate_ids(prompt_ids, 8)
        runs = [pipe.generate_ids(prompt_ids, tokens)[1] for _ in range(repeat)]
        load_s = pipe.load_s
    return {"stages": len(nodes), "backend": "ray", "load_s": load_s,
            "prefill_tok_s": statistics.median(r["prefill_tok_s"] for r in runs),
            "decode_tok_s": statistics.median(r["decode_tok_s"] for r in runs),
            "n_prompt": len(prompt_ids), "n_decode": tokens}


def bench_ray_hop(n: int, node: str) -> dict:
    """Median one-way hop (round trip / 2) of a [1, 64] f32 Frame pushed to an actor on the node carrying ``node``."""
    import ray
    from pipeplan.runtime.ray_backend import resolve_nodes
    from pipeplan.runtime.transport import DATA, Frame
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    @ray.remote(num_cpus=0)
    class Echo:
        def push(self, edge_id, n, frame):
            return True

    target = resolve_nodes([node])[node]
    a = Echo.options(scheduling_strategy=NodeAffinitySchedulingStrategy(target, soft=False)).remote()
    try:
        x = np.random.default_rng(0).standard_normal((1, 64)).astype(np.float32)
        for i in range(50):
            ray.get(a.push.remote("e", i, Frame(DATA, 0, i, x)))
        hops = []
        for i in range(n):
            t0 = time.perf_counter()
            ray.get(a.push.remote("e", i, Frame(DATA, 0, i, x)))
            hops.append((time.perf_counter() - t0) / 2)
    finally:
        ray.kill(a)
    hops.sort()
    return {"median_us": statistics.median(hops) * 1e6, "p90_us": hops[int(0.9 * len(hops))] * 1e6,
            "min_us": hops[0] * 1e6, "n": n, "payload_bytes": int(x.nbytes), "to_node": node}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=MODEL)
    ap.add_argument("--stages", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--hops", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--address", default=None, help="existing Ray cluster carrying n0..n{k-1} (default: start one)")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "decode_ray.json")
    args = ap.parse_args(argv)

    from pipeplan.runtime.tokenizer import SPMTokenizer

    nodes = [f"n{i}" for i in range(args.stages)]
    prompt_ids = SPMTokenizer.from_gguf(args.model).encode(PROMPT)
    local = bench_pipeline(args.model, args.stages, "local", prompt_ids, args.tokens, args.repeat, args.threads)
    shm = bench_hop(max(args.hops, 200))

    with ray_cluster(nodes, object_store_mb=80, address=args.address) as info:
        cluster_s = info["start_s"]
        rayrow = bench_ray_pipeline(args.model, nodes, prompt_ids, args.tokens, args.repeat, args.threads)
        rayhop = bench_ray_hop(args.hops, nodes[-1])

    edges = args.stages + 1
    extra_ms = (1 / rayrow["decode_tok_s"] - 1 / local["decode_tok_s"]) / edges * 1e3
    rows = [local, rayrow]
    print("| backend | stages | load s | prefill tok/s | decode tok/s |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['backend']} | {r['stages']} | {r['load_s']:.2f} | {r['prefill_tok_s']:.0f} | "
              f"{r['decode_tok_s']:.0f} |")
    print(f"shm ring hop  ([1,64] f32, cross-process):   median {shm['median_us']:8.1f} us  p90 {shm['p90_us']:8.1f} us")
    print(f"ray actor hop ([1,64] f32, to node {rayhop['to_node']}): median {rayhop['median_us']:8.1f} us  "
          f"p90 {rayhop['p90_us']:8.1f} us")
    print(f"derived: Ray adds {extra_ms:.2f} ms per edge per decode step ({edges} edges); cluster start "
          f"{cluster_s:.1f} s")
    doc = {"model": str(args.model), "machine": {"python": sys.version.split()[0], "platform": platform.platform(),
                                                 "cpus": os.cpu_count(), "torch_threads": args.threads},
           "prompt_tokens": len(prompt_ids), "decode_tokens": args.tokens, "repeat": args.repeat,
           "rows": rows, "shm_hop": shm, "ray_hop": rayhop, "derived_extra_per_hop_ms": extra_ms,
           "cluster_start_s": cluster_s if args.address is None else None}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
