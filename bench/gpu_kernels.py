"""GPU benchmark of the Triton kernels (issues 7, 12.4): GEMV memory bandwidth per weight type and decode tokens/s.

Usage (on a machine with a CUDA GPU)::

    python bench/gpu_kernels.py [--peak-gbps 4800] [--formats F16,BF16,Q8_0,Q4_0,Q4_1,Q5_0,Q5_1,Q4_K,Q5_K,Q6_K]
                                [--iters 100] [--model 7b|tiny] [--decode-format Q4_K] [--decode-tokens 64]
                                [--gemma3 PATH] [--gemma3-tokens 32] [--out bench/results/gpu_kernels.json]

1. GEMV (``T = 1``, the decode shape) of the fused-dequant Triton matmul for weights of 4096x4096,
   8192x8192, 28672x8192 and 8192x28672 (``[N, K]``, torch order: 8192x28672 in both orientations, i.e.
   a 70B ``ffn_up`` and ``ffn_down``) in every weight type the Triton target reads except F32: F16, BF16,
   Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (``_gemv_kernel``) and Q4_K, Q5_K, Q6_K (``_gemv_kq_kernel``). Achieved
   bandwidth = (weight bytes as stored + x + y) / median time (``triton.testing.do_bench``, after
   autotuning), as a fraction of the device's peak HBM bandwidth. Next to it: ``torch.matmul`` of a
   float16 matrix of the same shape (time and its bandwidth over the 2 bytes/weight it reads). Each
   result is checked on its first 64 rows against gguf.quants' dequantization of those rows (CPU) times
   x in float64: ``max |err| / (|x| @ |W|.T)`` is printed (unit tests bound it by 1e-6). Target
   (issue 7): >= 80% of peak on the large GEMVs.
2. Decode tokens/s of a generated Llama-shaped model (random weights of ``--decode-format``, the
   embedding table too, built on the GPU directly) through
   ``StageExecutor(kernels=pipeplan.runtime.kernels.triton)``: prefill 8 tokens, then
   ``--decode-tokens`` greedy steps, synchronised wall time.
3. Gemma 3 270M Q4_K_M (``--gemma3``; default: the test fixture's cached file): ``--gemma3-tokens``
   greedy tokens on one Triton stage, :func:`triton_gemma3.bench_gemma3` (prefill and decode tok/s, and
   how many ids equal llama.cpp's).

Peak bandwidth: ``--peak-gbps`` if given, else a table of known devices by name, else
``2 * memory_clock_rate * memory_bus_width / 8`` from the device properties (DDR rule). Without a GPU
the script prints why and exits 0 (it cannot run under the interpreter: timings would be meaningless).
Writes JSON (``--out``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
KNOWN_PEAK_GBPS = {"H200": 4800.0, "H100 SXM": 3350.0, "H100 PCIe": 2000.0, "H100": 3350.0, "A100-SXM4-80GB": 2039.0,
                   "A100 80GB PCIe": 1935.0, "A100": 1555.0, "L40S": 864.0, "A10": 600.0, "RTX 4090": 1008.0,
                   "L4": 300.0, "B200": 8000.0}
SHAPES = [(4096, 4096), (8192, 8192), (28672, 8192), (8192, 28672)]
MODELS = {  # Llama-shaped (hidden, heads, kv heads, ffn, vocab, layers)
    "7b": (4096, 32, 8, 14336, 32000, 32),
    "tiny": (1024, 16, 4, 2816, 32000, 8),
}


def peak_gbps(torch, override: float | None) -> tuple[float, str]:
    """Peak HBM bandwidth in GB/s (1e9 B/s) and where the figure comes from."""
    if override:
        return float(override), "--peak-gbps"
    props = torch.cuda.get_device_properties(0)
    for key, v in KNOWN_PEAK_GBPS.items():
        if key.lower() in props.name.lower():
            return v, f"table ({key})"
    clock, bus = getattr(props, "memory_clock_rate", 0), getattr(props, "memory_bus_width", 0)
    if clock and bus:
        return 2 * clock * 1e3 * bus / 8 / 1e9, "device properties (2 * memory_clock_rate * bus_width / 8)"
    raise SystemExit(f"unknown peak bandwidth for {props.name}: pass --peak-gbps")


SCALE_FIELDS = {"Q8_0": (0,), "Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q4_K": (0, 2),
                "Q5_K": (0, 2), "Q6_K": (208,)}
"""Byte offsets of each block's f16 scale fields (d, and m / dmin where the format has one; ggml-common.h)."""


def random_weight(torch, fmt: str, n: int, k: int, device: str):
    """A random ``[n, k]`` weight in ``fmt`` made on the GPU: random bytes for the quants (and the K-quants'
    6-bit / int8 sub-block scales), f16 block scales in [1e-3, 1.1e-3] (valid GGUF block bytes)."""
    from pipeplan.runtime.kernels.triton_weights import BLOCK_BYTES, GGMLWeight

    if fmt in ("F16", "BF16"):
        dt = torch.float16 if fmt == "F16" else torch.bfloat16
        return GGMLWeight((torch.randn(n, k, device=device) * 0.02).to(dt), fmt, (n, k), f"w{n}x{k}")
    qk, bs = BLOCK_BYTES[fmt]
    raw = torch.randint(0, 256, (n, k // qk, bs), dtype=torch.uint8, device=device)
    for off in SCALE_FIELDS[fmt]:
        f16 = (torch.rand(n, k // qk, device=device) * 1e-4 + 1e-3).half()
        raw[:, :, off:off + 2] = f16.view(torch.uint8).view(n, k // qk, 2)
    return GGMLWeight(raw.reshape(n, -1).contiguous(), fmt, (n, k), f"w{n}x{k}")


def check_rows(torch, y, x, w, rows: int = 64) -> float:
    """``max |y - x @ W.T| / (|x| @ |W|.T)`` over the first ``rows`` outputs, ``W`` dequantized by gguf.quants
    on the CPU (float64 product): the unit tests' relative bound, measured on the benchmark's own weights."""
    import numpy as np
    from pipeplan.runtime.dequant import dequantize

    r = min(rows, int(w.shape[0]))
    k = int(w.shape[1])
    if w.ggml_type in ("F16", "BF16"):
        dense = w.raw[:r].double().cpu()
    else:
        raw = w.raw[:r].contiguous().cpu().numpy().reshape(-1)
        dense = torch.from_numpy(np.array(dequantize(raw, w.ggml_type, (k, r)), dtype=np.float64))
    xd = x.double().cpu()
    want = xd @ dense.T
    bound = (xd.abs() @ dense.abs().T).clamp_min(1e-30)
    return float(((y[:, :r].double().cpu() - want).abs() / bound).max().item())


def bench_gemv(torch, triton, fmts, iters: int, peak: float, device: str) -> list[dict]:
    """GEMV rows (see the module docstring)."""
    from pipeplan.runtime.kernels.triton import matmul

    rows = []
    for n, k in SHAPES:
        w16 = (torch.randn(n, k, device=device) * 0.02).half()
        x16 = torch.randn(1, k, device=device).half()
        t_torch = triton.testing.do_bench(lambda x16=x16, w16=w16: torch.matmul(x16, w16.T), rep=iters) * 1e-3
        torch_gbps = (2 * n * k + 2 * k + 2 * n) / t_torch / 1e9
        del w16
        for fmt in fmts:
            w = random_weight(torch, fmt, n, k, device)
            x = torch.randn(1, k, device=device)
            y = matmul(x, w)  # autotunes on first call
            err = check_rows(torch, y, x, w)
            t_tri = triton.testing.do_bench(lambda x=x, w=w: matmul(x, w), rep=iters) * 1e-3
            moved = w.nbytes_raw + 4 * k + 4 * n
            gbps = moved / t_tri / 1e9
            rows.append({"N": n, "K": k, "format": fmt, "weight_bytes": w.nbytes_raw,
                         "bits_per_weight": 8 * w.nbytes_raw / (n * k), "triton_us": t_tri * 1e6,
                         "triton_gbps": gbps, "fraction_of_peak": gbps / peak, "torch_f16_us": t_torch * 1e6,
                         "torch_f16_gbps": torch_gbps, "torch_fraction_of_peak": torch_gbps / peak,
                         "speedup_vs_torch_f16": t_torch / t_tri, "max_err_over_bound_vs_gguf": err})
            r = rows[-1]
            print(f"  {n:>5}x{k:<5} {fmt:<5} {r['bits_per_weight']:4.1f} b/w  triton {r['triton_us']:9.1f} us "
                  f"{gbps:8.1f} GB/s ({100 * r['fraction_of_peak']:5.1f}% peak) | torch f16 {r['torch_f16_us']:9.1f} us"
                  f" {torch_gbps:8.1f} GB/s | x{r['speedup_vs_torch_f16']:.2f} | err/bound {err:.1e}", flush=True)
            del w
            torch.cuda.empty_cache()
    return rows


def bench_decode(torch, model: str, fmt: str, tokens: int, device: str) -> dict:
    """Decode tokens/s of a random Llama-shaped model (see the module docstring)."""
    import pipeplan.runtime.kernels.triton as tk
    from pipeplan.runtime.program import LlamaHParams, StageExecutor, build_stage_program

    d, h, hkv, f, v, layers = MODELS[model]
    max_seq = 8 + tokens + 1
    hp = LlamaHParams(n_embd=d, n_head=h, n_head_kv=hkv, n_ff=f, n_vocab=v, n_ctx=4096, rope_dim=d // h,
                      rope_base=10000.0, rms_eps=1e-5, n_layer=layers)
    program = build_stage_program(hp, 0, layers, True, True, max_seq)
    weights = {}
    for c in program:
        for name in c.inputs:
            if name.endswith(".weight") and name not in weights:
                shape = hp.weight_shape(name)
                if len(shape) == 1:
                    weights[name] = torch.ones(shape, device=device)
                else:
                    weights[name] = random_weight(torch, fmt, shape[0], shape[1], device)
    ex = StageExecutor(hp, program, weights, max_seq, kernels=tk,
                       allocate=lambda shape: torch.zeros(shape, dtype=torch.float32, device=device))
    wbytes = sum(getattr(w, "nbytes_raw", w.numel() * 4) for w in weights.values())
    ids = torch.randint(0, v, (8,))
    logits = ex.forward(ids, 0, last_only=True)
    tok = torch.argmax(logits[-1]).view(1).cpu()
    ex.forward(tok, 8)  # warm-up (autotune of the T=1 shapes)
    ex.reset()
    logits = ex.forward(ids, 0, last_only=True)
    tok = torch.argmax(logits[-1]).view(1).cpu()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(tokens):
        logits = ex.forward(tok, 8 + i)
        tok = torch.argmax(logits[-1]).view(1).cpu()
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    out = {"model": model, "format": fmt, "layers": layers, "hidden": d, "heads": h, "kv_heads": hkv, "ffn": f,
           "vocab": v, "weight_bytes": wbytes, "decode_tokens": tokens, "decode_tok_s": tokens / dt,
           "weight_gbps_at_decode": wbytes * tokens / dt / 1e9}
    print(f"  decode {model} {fmt}: {out['decode_tok_s']:.1f} tok/s ({out['weight_gbps_at_decode']:.0f} GB/s of weights)")
    del ex, weights
    torch.cuda.empty_cache()
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit status (0 also when no GPU is present)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--peak-gbps", type=float, default=None, help="device peak HBM bandwidth, GB/s")
    ap.add_argument("--formats", default="F16,BF16,Q8_0,Q4_0,Q4_1,Q5_0,Q5_1,Q4_K,Q5_K,Q6_K")
    ap.add_argument("--iters", type=int, default=100, help="do_bench measuring window, ms")
    ap.add_argument("--model", default="7b", choices=sorted(MODELS))
    ap.add_argument("--decode-format", default="Q4_K")
    ap.add_argument("--decode-tokens", type=int, default=64)
    ap.add_argument("--skip-decode", action="store_true")
    ap.add_argument("--gemma3", type=Path, default=None, help="Gemma 3 GGUF (default: the test fixture's file)")
    ap.add_argument("--gemma3-tokens", type=int, default=32)
    ap.add_argument("--skip-gemma3", action="store_true")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "gpu_kernels.json")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("gpu_kernels: no CUDA GPU visible to torch; this benchmark needs one (nothing measured).")
        return 0
    import triton

    device = "cuda"
    peak, peak_src = peak_gbps(torch, args.peak_gbps)
    name = torch.cuda.get_device_name(0)
    print(f"device: {name}; peak {peak:.0f} GB/s ({peak_src})")
    fmts = [f.strip() for f in args.formats.split(",") if f.strip()]
    result = {"device": name, "peak_gbps": peak, "peak_source": peak_src, "torch": torch.__version__,
              "triton": triton.__version__, "gemv": bench_gemv(torch, triton, fmts, args.iters, peak, device)}
    large = [r for r in result["gemv"] if r["N"] * r["K"] >= 8192 * 8192]
    result["large_gemv_min_fraction_of_peak"] = min((r["fraction_of_peak"] for r in large), default=None)
    if not args.skip_decode:
        result["decode"] = bench_decode(torch, args.model, args.decode_format, args.decode_tokens, device)
    if not args.skip_gemma3:
        from triton_gemma3 import bench_gemma3, gemma3_file

        result["gemma3"] = bench_gemma3(torch, gemma3_file(args.gemma3), args.gemma3_tokens)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
