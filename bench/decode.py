"""Decode benchmark: prefill and decode tokens/s for 1..5 stages on both backends, and the per-hop
latency of a shared-memory activation ring between two processes.

Usage: ``python bench/decode.py [--stages 1,2,3,4,5] [--tokens 200] [--repeat 5] [--hops 2000]``, or
``python bench/decode.py --backend ray [decode_ray options]`` for the Ray backend (bench/decode_ray.py).
Prints a table and writes ``bench/results/decode.json``. Greedy decoding of stories260K with one torch
thread per stage (``--threads``). Every configuration's pipeline is started first (and warmed up);
then ``--repeat`` rounds each time one sequence on every configuration in turn, so that load drift on a
shared machine hits all configurations alike (interleaved; the order rotates by one each round, so that
no configuration always runs right after the same one). Per configuration the median over rounds is
reported, and the target ratio is the median of the per-round ratios (paired within a round). A
``local`` 5-stage pipeline without ring announcements (``PIPEPLAN_RING_ANNOUNCE=0`` in its stage
processes: every hop signalled only after the object is written) runs as a control row. The load
average before and after is recorded. If ``llama_cpp`` (llama-cpp-python) is importable it also times
llama.cpp on the same file and prints the ratio; otherwise that row is skipped.

Targets (issue 3): 5 local stages decode >= 80% of 1-stage in-process decode; ring hop < 50 us.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
MODEL = REPO.parent / "shared" / "models" / "stories260K.gguf"
PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park."


def _provisions(model: Path, n: int, max_seq_len: int):
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.frontend.pool import local_pool
    from pipeplan.plan_types import RuntimeConfig

    facts = read_model_facts(model)
    return project_provisions(plan_run(facts, RuntimeConfig(max_seq_len=max_seq_len), local_pool(n), n))


def start_pipeline(model: Path, stages: int, backend: str, prompt_ids: list[int], threads: int,
                   env: dict[str, str] | None = None):
    """Start (and warm up with one short sequence) a pipeline; ``env`` is set while its stage processes
    spawn (they inherit it), then restored."""
    from pipeplan.runtime.orchestrator import Pipeline

    saved = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        pipe = Pipeline(_provisions(model, stages, 256), backend=backend, num_threads=threads)
        pipe.start()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    pipe.generate_ids(prompt_ids, 8)
    return pipe


def bench_pipeline(model: Path, stages: int, backend: str, prompt_ids: list[int], tokens: int, repeat: int,
                   threads: int) -> dict:
    """Start one pipeline, warm up, time ``repeat`` greedy sequences; medians of prefill/decode tok/s
    (one configuration alone; ``bench/decode_ray.py`` uses it)."""
    pipe = start_pipeline(model, stages, backend, prompt_ids, threads)
    try:
        runs = [pipe.generate_ids(prompt_ids, tokens)[1] for _ in range(repeat)]
    finally:
        pipe.close()
    return {"stages": stages, "backend": backend, "load_s": pipe.load_s,
            "prefill_tok_s": statistics.median(r["prefill_tok_s"] for r in runs),
            "decode_tok_s": statistics.median(r["decode_tok_s"] for r in runs),
            "n_prompt": len(prompt_ids), "n_decode": tokens}


def bench_hop(n: int) -> dict:
    """Median one-way hop of a [1, 64] f32 activation through shm rings (ping-pong with an echo process)."""
    from pipeplan.plan_types import ObjectSpec, RingSpec
    from pipeplan.runtime.shm_ring import ShmTransport, echo_loop
    from pipeplan.runtime.transport import DATA, SHUTDOWN, EdgeRoute, Frame

    spec = ObjectSpec("activation", "f32", 4, (256, 64), "row_major", 64, 256 * 64 * 4)
    rs = RingSpec(2, spec.max_extent)
    routes = {"a": EdgeRoute("a", "activation", "orchestrator", "n1", spec, rs),
              "b": EdgeRoute("b", "activation", "n1", "orchestrator", spec, rs)}
    ctx = mp.get_context("spawn")
    t = ShmTransport.create(routes, ctx)
    p = ctx.Process(target=echo_loop, args=(t, "n1", "a", "orchestrator", "b"), daemon=True)
    p.start()
    try:
        tx, rx = t.open_send("n1", "a"), t.open_recv("orchestrator", "b")
        x = np.random.default_rng(0).standard_normal((1, 64)).astype(np.float32)
        for i in range(200):
            tx.send(Frame(DATA, 0, i, x))
            rx.recv()
        hops = []
        for i in range(n):
            t0 = time.perf_counter()
            tx.send(Frame(DATA, 0, i, x))
            rx.recv()
            hops.append((time.perf_counter() - t0) / 2)
        tx.send(Frame(SHUTDOWN))
        rx.recv(timeout=5)
        p.join(5)
    finally:
        if p.is_alive():
            p.kill()
        t.unlink()
    hops.sort()
    return {"median_us": statistics.median(hops) * 1e6, "p90_us": hops[int(0.9 * len(hops))] * 1e6,
            "min_us": hops[0] * 1e6, "n": n, "payload_bytes": int(x.nbytes)}


def bench_llama_cpp(model: Path, prompt: str, tokens: int) -> dict | None:
    """llama.cpp decode tok/s on the same file (single thread), or None when llama_cpp is not importable."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return None
    from llama_cpp import Llama

    llm = Llama(model_path=str(model), n_ctx=256, n_threads=1, verbose=False)
    t0 = time.perf_counter()
    out = llm(prompt, max_tokens=tokens, temperature=0.0, top_k=1)
    dt = time.perf_counter() - t0
    return {"tok_s": out["usage"]["completion_tokens"] / dt}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (module docstring); returns 0. ``--backend ray`` runs ``bench/decode_ray.py``
    instead (Ray decode tok/s and per-hop latency next to the local backend; its own options follow)."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--backend", choices=("inproc,local", "ray"), default="inproc,local")
    known, rest = pre.parse_known_args(argv)
    if known.backend == "ray":
        sys.path.insert(0, str(HERE))
        from decode_ray import main as ray_main

        return ray_main(rest)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=MODEL)
    ap.add_argument("--stages", default="1,2,3,4,5")
    ap.add_argument("--backends", default="inproc,local")
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--hops", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-control", action="store_true", help="skip the local 5-stage no-announce control row")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "decode.json")
    args = ap.parse_args(argv)

    import torch
    from pipeplan.runtime.tokenizer import SPMTokenizer

    torch.set_num_threads(args.threads)
    prompt_ids = SPMTokenizer.from_gguf(args.model).encode(PROMPT)
    load_before = os.getloadavg()
    configs: list[tuple[str, int, str, dict[str, str]]] = [
        (backend, n, "", {}) for backend in args.backends.split(",") for n in (int(x) for x in args.stages.split(","))]
    if not args.no_control and "local" in args.backends.split(","):
        configs.append(("local", 5, "no-announce", {"PIPEPLAN_RING_ANNOUNCE": "0"}))
    pipes = []
    try:
        for backend, n, _variant, env in configs:
            pipes.append(start_pipeline(args.model, n, backend, prompt_ids, args.threads, env))
        runs: list[list[dict]] = [[] for _ in configs]
        for r in range(args.repeat):
            # rotate the order each round: a row's position in a round can bias it (in paired runs of two
            # equivalent local 5-stage variants, the one right after inproc-1 read 0.01-0.06 lower)
            for i in [(r + k) % len(pipes) for k in range(len(pipes))]:
                runs[i].append(pipes[i].generate_ids(prompt_ids, args.tokens)[1])
    finally:
        for pipe in pipes:
            pipe.close()
    load_after = os.getloadavg()
    rows = []
    for (backend, n, variant, _), pipe, rs in zip(configs, pipes, runs):
        rows.append({"stages": n, "backend": backend, "variant": variant, "load_s": pipe.load_s,
                     "prefill_tok_s": statistics.median(r["prefill_tok_s"] for r in rs),
                     "decode_tok_s": statistics.median(r["decode_tok_s"] for r in rs),
                     "decode_tok_s_rounds": [r["decode_tok_s"] for r in rs],
                     "n_prompt": len(prompt_ids), "n_decode": args.tokens})
        r = rows[-1]
        print(f"{backend:7s} {n} stage(s){' ' + variant if variant else '':13s}: load {r['load_s']:6.2f} s  prefill "
              f"{r['prefill_tok_s']:8.0f} tok/s  decode {r['decode_tok_s']:7.0f} tok/s", flush=True)
    hop = bench_hop(args.hops)
    print(f"shm ring hop ([1,64] f32, cross-process): median {hop['median_us']:.1f} us, "
          f"p90 {hop['p90_us']:.1f} us, min {hop['min_us']:.1f} us")

    def find(backend: str, n: int, variant: str = "") -> dict | None:
        return next((r for r in rows if (r["backend"], r["stages"], r["variant"]) == (backend, n, variant)), None)

    base, five, ctrl = find("inproc", 1), find("local", 5), find("local", 5, "no-announce")
    ratio = ratio_ctrl = None
    if base and five:
        ratio = statistics.median(f / b for f, b in zip(five["decode_tok_s_rounds"], base["decode_tok_s_rounds"]))
        print(f"5 local stages / 1 inproc stage decode: {ratio:.2f} (median of {args.repeat} paired rounds; "
              f"target >= 0.80: {'met' if ratio >= 0.8 else 'NOT met'})")
    if base and ctrl:
        ratio_ctrl = statistics.median(f / b for f, b in zip(ctrl["decode_tok_s_rounds"], base["decode_tok_s_rounds"]))
        print(f"  control, 5 local stages without ring announcements / 1 inproc: {ratio_ctrl:.2f}")
    print(f"load average (1, 5, 15 min) before {tuple(round(x, 2) for x in load_before)}, after "
          f"{tuple(round(x, 2) for x in load_after)} on {mp.cpu_count()} CPUs")
    llama = bench_llama_cpp(args.model, PROMPT, args.tokens)
    if llama is None:
        print("llama.cpp: llama_cpp not importable, skipped")
    elif base:
        print(f"llama.cpp decode {llama['tok_s']:.0f} tok/s; 1-stage inproc / llama.cpp = "
              f"{base['decode_tok_s'] / llama['tok_s']:.2f}")
    print()
    print("| backend | stages | variant | load s | prefill tok/s | decode tok/s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['backend']} | {r['stages']} | {r['variant'] or '-'} | {r['load_s']:.2f} | {r['prefill_tok_s']:.0f} | "
              f"{r['decode_tok_s']:.0f} |")
    doc = {"model": str(args.model), "machine": {"python": sys.version.split()[0], "platform": platform.platform(),
                                                 "cpus": mp.cpu_count(), "torch_threads": args.threads},
           "command": " ".join(["python", "bench/decode.py", *(argv if argv is not None else sys.argv[1:])]),
           "interleaved": True, "load_average_before": load_before, "load_average_after": load_after,
           "prompt_tokens": len(prompt_ids), "decode_tokens": args.tokens, "repeat": args.repeat,
           "rows": rows, "ring_hop": hop, "ratio_local5_over_inproc1": ratio,
           "ratio_local5_no_announce_over_inproc1": ratio_ctrl,
           "targets": {"ratio_min": 0.8, "hop_us_max": 50.0}, "llama_cpp": llama}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
