"""Time pipeplan's own runtime kernels on this machine -> a measured evidence table (JSON).

For every distinct estimate key (``op|dtypes|work shape``, see ``pipeplan.lowering.evidence``) of
the compute tasks of a portable plan, build random operands of the task's shapes and time the
torch reference kernel (``pipeplan.runtime.kernels.reference``) the runtime runs for it: median
of ``repeats`` timed calls after ``warmup`` calls, single thread, ``torch.inference_mode``. Keys
whose operands are not f32/i32 (quantized weights: the runtime dequantizes them at load, so no
kernel of ours runs on them) and edge transfers are NOT measured — they stay absent from the
table, and cost resolution reports them as fallback / out of domain, never as measurements.

Usage::

    python bench/measure_kernels.py [--prompt-len 8] [--repeats 30] [--out bench/results/kernel_timings.json]

(stories260K, one stage; prints a table of the keys and seconds.)
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
from pipeplan.dialects.pplan import PlanOp, ints, str_list
from pipeplan.lowering.evidence import TABLE_FORMAT, request_key
from pipeplan.runtime.kernels import reference as K
from pipeplan.runtime.program import LlamaHParams

MEASURABLE = {"f32", "i32"}


def _call_for(op: str, dtypes: tuple[str, ...], shape: tuple[int, ...], hp: LlamaHParams, max_seq_len: int):
    """A zero-argument callable running the reference kernel of ``op`` on random operands of ``shape``."""
    g = torch.Generator().manual_seed(0)

    def r(*s):
        return torch.randn(*s, generator=g)

    hd = hp.head_dim
    if op == "matmul":
        m, n, k = shape
        x, w = r(m, k), r(n, k)
        return lambda: K.matmul(x, w)
    if op == "rms_norm":
        x, w = r(*shape), r(shape[-1])
        return lambda: K.rms_norm(x, w, eps=hp.rms_eps)
    if op in ("add", "silu_mul"):
        a, b = r(*shape), r(*shape)
        f = K.add if op == "add" else K.silu_mul
        return lambda: f(a, b)
    if op == "embedding_gather":
        t, d = shape
        ids = torch.randint(0, hp.n_vocab, (t,), generator=g)
        table = r(hp.n_vocab, d)
        return lambda: K.embedding_gather(ids, table)
    if op == "rope":
        t, width = shape
        x = r(t, width)
        table = K.rope_table(max_seq_len, hp.rope_dim, hp.rope_base)
        return lambda: K.rope(x, table, 0, n_heads=width // hd, head_dim=hd, rope_dim=hp.rope_dim)
    if op == "kv_cache_write":
        t, width = shape
        k, v = r(t, width // hd, hd), r(t, width)
        ck, cv = torch.zeros(max_seq_len, width // hd, hd), torch.zeros(max_seq_len, width // hd, hd)
        return lambda: K.kv_cache_write(k, v, ck, cv, 0)
    if op == "attention":
        t, width, ctx = shape
        q = r(t, width // hd, hd)
        ck, cv = r(max_seq_len, hp.n_head_kv, hd), r(max_seq_len, hp.n_head_kv, hd)
        return lambda: K.attention(q, ck, cv, ctx - t)
    if op == "last_row":
        x = r(4, shape[-1])
        return lambda: K.last_row(x)
    if op == "argmax":
        x = r(1, hp.n_vocab)
        return lambda: K.argmax(x)
    return None


def measure_plan(plan: PlanOp, hp: LlamaHParams, max_seq_len: int, *, repeats: int = 30, warmup: int = 3,
                 skip_keys: frozenset[str] = frozenset()) -> dict:
    """The measured table (a dict in :data:`TABLE_FORMAT`) for the compute keys of ``plan``.

    ``skip_keys`` are left out on purpose (tests use it to build a table lacking a shape).
    """
    torch.set_num_threads(1)
    entries: dict[str, dict] = {}
    for t in plan.tasks():
        op, dtypes, shape = t.op.data, str_list(t.dtypes), ints(t.shape)
        key = request_key(op, dtypes, shape)
        if key in entries or key in skip_keys or t.collective.data != "none" or not set(dtypes) <= MEASURABLE:
            continue
        fn = _call_for(op, dtypes, shape, hp, max_seq_len)
        if fn is None:
            continue
        with torch.inference_mode():
            for _ in range(warmup):
                fn()
            samples = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                fn()
                samples.append(time.perf_counter() - t0)
        med = statistics.median(samples)
        q1, q3 = statistics.quantiles(samples, n=4)[0], statistics.quantiles(samples, n=4)[2]
        entries[key] = {"key": key, "op": op, "seconds": med, "flops": t.flops.value.data,
                        "bytes": t.bytes_read.value.data + t.bytes_written.value.data, "samples": repeats,
                        "rel_spread": (q3 - q1) / med if med > 0 else 0.0}
    return {"format": TABLE_FORMAT, "created_unix": time.time(),
            "machine": {"platform": platform.platform(), "python": sys.version.split()[0], "torch": torch.__version__,
                        "threads": 1, "kernels": "pipeplan.runtime.kernels.reference"},
            "entries": sorted(entries.values(), key=lambda e: e["key"])}


def main(argv: list[str] | None = None) -> int:
    """Measure the stories260K one-stage plan's kernels and write the JSON table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(Path(__file__).resolve().parents[2] / "shared/models/stories260K.gguf"))
    ap.add_argument("--prompt-len", type=int, default=8)
    ap.add_argument("--max-seq-len", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results/kernel_timings.json"))
    a = ap.parse_args(argv)
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run_spec
    from pipeplan.frontend.pool import local_pool
    from pipeplan.plan_types import RuntimeConfig
    from pipeplan.transforms.convert_runplan_to_pplan import build_portable_plan

    facts = read_model_facts(a.model)
    spec = plan_run_spec(facts, RuntimeConfig(max_seq_len=a.max_seq_len), local_pool(1), 1)
    plan = build_portable_plan(spec, prompt_len=a.prompt_len)
    table = measure_plan(plan, LlamaHParams.from_facts(facts), a.max_seq_len, repeats=a.repeats)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(table, indent=1))
    print(f"{'key':60s} {'seconds':>12s} {'spread':>8s}")
    for e in table["entries"]:
        print(f"{e['key']:60s} {e['seconds']:12.3e} {e['rel_spread']:8.2f}")
    print(f"{len(table['entries'])} keys -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
