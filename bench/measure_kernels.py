"""Measure what pipeplan's tasks cost on this machine -> a measured evidence table (JSON).

Two modes (``--mode``), both writing the ``pipeplan-kernel-timings/1`` table of
:mod:`pipeplan.analysis.evidence` keyed by ``op|dtypes|work shape``:

* ``runtime`` (default; the measuring code is :mod:`pipeplan.tools.calibrate`, which ``pipeplan
  calibrate MODEL`` runs on the model's own plan and caches): what a task costs **in the runtime as it really executes**. A calibration
  package (stories260K planned on ``--stages`` local nodes, default 2, so that every kind of command
  occurs: token-in hop, activation hop, kernels, sampling, token-out hop) is compiled and replayed with
  :func:`pipeplan.runtime.replay.replay_package` (the StageExecutor decode loop, single thread) on
  calibration prompts that are NOT the accuracy bench's prompts. The replay is single-threaded, so the
  wall time of every step instance is a sequence of commands; each command is charged the time from
  the end of the previous command to its own end (its dispatch: the executor's per-call overhead, the
  token loop, the mailbox), except that the gap between a stage's ``recv`` and its first kernel (the
  stage program's entry: input checks, environment) is charged to that ``recv``. So the commands of an
  instance sum exactly to its wall time: ``recv`` of the token-in edge carries the orchestrator's
  per-token step, ``recv``/``send`` of an activation edge the per-hop transport, kernels their call
  including dispatch. ``seconds`` is the 10 %-trimmed mean of a key's samples (a step's latency is a
  sum of task costs, so the table prices expectations; the trim drops preemption spikes of a shared
  machine). Only keys observed are written; shapes the calibration does not run stay absent and are
  scaled out of domain by the table, never passed off as measurements.
* ``isolated``: the previous hot-loop figure of each compute kernel alone: random operands of the
  task's shapes, median of ``repeats`` timed calls after ``warmup`` calls, single thread,
  ``torch.inference_mode``. Keys whose operands are not f32/i32 (quantized weights: the runtime
  dequantizes them at load) and edge transfers are not measured. It leaves out the runtime's dispatch
  (~40 % of a stories260K decode step here), so predictions from it are optimistic.

Usage::

    python bench/measure_kernels.py [--mode runtime|isolated] [--stages 2] [--tokens 24] [--repeats 3]
                                    [--out bench/results/kernel_timings.json]

(stories260K; prints a table of the keys and seconds.)
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from pipeplan.analysis.evidence import TABLE_FORMAT, request_key
from pipeplan.dialects.pplan import PlanOp, ints
from pipeplan.runtime.kernels import reference as K
from pipeplan.runtime.program import LlamaHParams
from pipeplan.tools import calibrate as _calibrate

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
        op, dtypes, shape = str(t.op.data), t.dtypes(), ints(t.work)
        key = request_key(op, dtypes, shape)
        if key in entries or key in skip_keys or t.collective != "none" or not set(dtypes) <= MEASURABLE:
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
                        "bytes": t.nbytes_read + t.nbytes_written, "samples": repeats,
                        "rel_spread": (q3 - q1) / med if med > 0 else 0.0}
    return {"format": TABLE_FORMAT, "created_unix": time.time(),
            "machine": {"platform": platform.platform(), "python": sys.version.split()[0], "torch": torch.__version__,
                        "threads": 1, "kernels": "pipeplan.runtime.kernels.reference"},
            "entries": sorted(entries.values(), key=lambda e: e["key"])}


CALIBRATION_PROMPTS = _calibrate.CALIBRATION_PROMPTS
"""Calibration prompts (the first ``prompt_len`` ids are used so the prefill runs one full chunk of the
compiled shape). Disjoint from ``bench/accuracy.py``'s prompts."""

charge_commands = _calibrate.charge_commands
"""The charge rule (:func:`pipeplan.tools.calibrate.charge_commands`; the run's first command is not charged)."""


def measure_runtime(model: str | Path, *, stages: int = 2, tokens: int = 24, repeats: int = 3, prompt_len: int = 8,
                    max_seq_len: int = 64, prompts=CALIBRATION_PROMPTS, work: Path | None = None) -> dict:
    """The measured table (:data:`TABLE_FORMAT`) of every task key of a ``stages``-stage calibration
    package of ``model`` on local nodes, charged from replays of it (``runtime`` mode of the module
    docstring; :func:`pipeplan.tools.calibrate.measure_runtime`, which ``pipeplan calibrate`` runs).
    The prefill token-in recv (the run's first command) is not charged, so it stays absent.

    ``tokens`` decode tokens per replay, ``repeats`` replays per prompt after one warm-up replay.
    Raises the compiler's / replay's typed errors.
    """
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.plan_types import RuntimeConfig
    from pipeplan.runtime.replay import local_pool_with_peaks

    work = Path(work) if work is not None else Path(tempfile.mkdtemp(prefix="pipeplan-measure-"))
    facts = read_model_facts(str(model))
    pool, pool_text = local_pool_with_peaks(stages)
    pool_path = work / "pool.toml"
    pool_path.write_text(pool_text)
    module = plan_run(facts, RuntimeConfig(max_seq_len=max_seq_len), pool, stages)
    table = _calibrate.measure_runtime(module, model, pool=pool_path, prompt_len=prompt_len, tokens=tokens,
                                       repeats=repeats, threads=1, prompts=prompts, work=work, charge_first=False)
    table["method"].update({"stages": stages, "max_seq_len": max_seq_len})
    return table


def main(argv: list[str] | None = None) -> int:
    """Measure stories260K's task costs (``--mode``) and write the JSON table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(Path(__file__).resolve().parents[2] / "shared/models/stories260K.gguf"))
    ap.add_argument("--mode", choices=("runtime", "isolated"), default="runtime")
    ap.add_argument("--stages", type=int, default=2, help="runtime mode: stages of the calibration package")
    ap.add_argument("--tokens", type=int, default=24, help="runtime mode: decode tokens per replay")
    ap.add_argument("--prompt-len", type=int, default=8)
    ap.add_argument("--max-seq-len", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3, help="replays per prompt (runtime) / timed calls (isolated: 30)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results/kernel_timings.json"))
    a = ap.parse_args(argv)
    from pipeplan.dialects.runplan_build import single_plan
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.frontend.pool import local_pool
    from pipeplan.plan_types import RuntimeConfig
    from pipeplan.transforms.convert_runplan_to_pplan import lower_runplan

    t0 = time.time()
    if a.mode == "runtime":
        table = measure_runtime(a.model, stages=a.stages, tokens=a.tokens, repeats=a.repeats, prompt_len=a.prompt_len,
                                max_seq_len=a.max_seq_len)
    else:
        facts = read_model_facts(a.model)
        runplan = single_plan(plan_run(facts, RuntimeConfig(max_seq_len=a.max_seq_len), local_pool(1), 1))
        plan = lower_runplan(runplan, prompt_len=a.prompt_len)
        table = measure_plan(plan, LlamaHParams.from_facts(facts), a.max_seq_len, repeats=max(a.repeats, 30))
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(table, indent=1))
    print(f"{'key':60s} {'seconds':>12s} {'spread':>8s} {'samples':>8s}")
    for e in table["entries"]:
        print(f"{e['key']:60s} {e['seconds']:12.3e} {e['rel_spread']:8.2f} {e['samples']:8d}")
    print(f"{len(table['entries'])} keys ({a.mode} mode) in {time.time() - t0:.1f} s -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
