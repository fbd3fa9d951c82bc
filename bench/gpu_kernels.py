"""GPU benchmark of the Triton kernels (issue 7): GEMV memory bandwidth and decode tokens/s.

Usage (on a machine with a CUDA GPU)::

    python bench/gpu_kernels.py [--peak-gbps 4800] [--formats F16,Q8_0,Q4_0,Q4_K] [--iters 50]
                                [--model 7b|tiny] [--decode-tokens 64] [--out bench/results/gpu_kernels.json]

1. GEMV (``T = 1``, the decode shape) of the fused-dequant Triton matmul for weights of 4096x4096,
   8192x8192, 28672x8192 and 8192x28672 (``[N, K]``, torch order: 8192x28672 in both orientations, i.e.
   a 70B ``ffn_up`` and ``ffn_down``) in F16, Q8_0, Q4_0 and Q4_K (``_gemv_q4k_kernel``; 144 bytes per
   256 weights, 4.5 bits/weight). Achieved bandwidth = (weight bytes as stored
   + x + y) / median time (``triton.testing.do_bench``, after autotuning), reported as a fraction of the
   device's peak HBM bandwidth. Next to it: ``torch.matmul`` on the dequantized float16 weights (time and
   its own achieved bandwidth over the 2 bytes/weight it reads). Each result is checked against that
   torch product (max relative error printed). Target (issue): >= 80% of peak on the large GEMVs.
2. Decode tokens/s of a generated Llama-shaped model (random weights in the chosen format, built on the
   GPU directly) through ``StageExecutor(kernels=pipeplan.runtime.kernels.triton)``: prefill 8 tokens,
   then ``--decode-tokens`` greedy steps, synchronised wall time. With ``--decode-format Q4_K`` the
   embedding table is Q8_0 (the Triton gather has no Q4_K path).

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


def random_weight(torch, fmt: str, n: int, k: int, device: str):
    """A random ``[n, k]`` weight in ``fmt`` made on the GPU (valid GGUF block bytes; scales ~0.01;
    Q4_K: random 6-bit scales/mins and nibbles, f16 ``d`` and ``dmin`` ~1e-3)."""
    from pipeplan.runtime.kernels.triton_weights import BLOCK_BYTES, GGMLWeight

    if fmt == "F16":
        return GGMLWeight((torch.randn(n, k, device=device) * 0.02).half(), "F16", (n, k), f"w{n}x{k}")
    qk, bs = BLOCK_BYTES[fmt]
    raw = torch.randint(0, 256, (n, k // qk, bs), dtype=torch.uint8, device=device)
    n_scales, scale = (2, 1e-3) if fmt == "Q4_K" else (1, 0.01)  # Q4_K: d and dmin
    for i in range(n_scales):
        f16 = (torch.rand(n, k // qk, device=device) * scale + scale / 10).half()
        raw[:, :, 2 * i:2 * i + 2] = f16.view(torch.uint8).view(n, k // qk, 2)
    return GGMLWeight(raw.reshape(n, -1).contiguous(), fmt, (n, k), f"w{n}x{k}")


def dequant_f16(torch, w):
    """Torch (not Triton) dequantization of a GGMLWeight to float16 on the GPU (the baseline's input)."""
    if w.ggml_type in ("F16", "BF16"):
        return w.raw.half()
    n, k = w.shape
    if w.ggml_type == "Q4_K":  # gguf.quants Q4_K.dequantize_blocks, in torch
        blocks = w.raw.view(n, k // 256, 144)
        d = blocks[:, :, 0:2].contiguous().view(torch.float16).float()  # [n, nb, 1]
        dmin = blocks[:, :, 2:4].contiguous().view(torch.float16).float()
        s = blocks[:, :, 4:16].int()
        sc = torch.cat([s[..., 0:4] & 63, (s[..., 8:12] & 15) | ((s[..., 0:4] >> 6) << 4)], dim=2).float()
        mn = torch.cat([s[..., 4:8] & 63, (s[..., 8:12] >> 4) | ((s[..., 4:8] >> 6) << 4)], dim=2).float()
        qs = blocks[:, :, 16:].int().view(n, k // 256, 4, 1, 32)
        q = torch.cat([qs & 15, qs >> 4], dim=3).reshape(n, k // 256, 8, 32).float()
        return ((d * sc)[..., None] * q - (dmin * mn)[..., None]).reshape(n, k).half()
    bs = 34 if w.ggml_type == "Q8_0" else 18
    blocks = w.raw.view(n, k // 32, bs)
    d = blocks[:, :, :2].contiguous().view(torch.float16).float()  # [n, nb, 1]
    if w.ggml_type == "Q8_0":
        q = blocks[:, :, 2:].contiguous().view(torch.int8).float()
    else:
        b = blocks[:, :, 2:].int()
        q = torch.cat([(b & 15) - 8, (b >> 4) - 8], dim=2).float()
    return (q * d).reshape(n, k).half()


def bench_gemv(torch, triton, fmts, iters: int, peak: float, device: str) -> list[dict]:
    """GEMV rows (see the module docstring)."""
    from pipeplan.runtime.kernels.triton import matmul

    rows = []
    for n, k in SHAPES:
        for fmt in fmts:
            w = random_weight(torch, fmt, n, k, device)
            x = torch.randn(1, k, device=device)
            y = matmul(x, w)  # autotunes on first call
            w16 = dequant_f16(torch, w)
            ref = (x.half() @ w16.T).float()
            err = float(((y - ref).abs().max() / ref.abs().max().clamp_min(1e-6)).item())
            t_tri = triton.testing.do_bench(lambda x=x, w=w: matmul(x, w), rep=iters) * 1e-3
            x16 = x.half()
            t_torch = triton.testing.do_bench(lambda x16=x16, w16=w16: torch.matmul(x16, w16.T), rep=iters) * 1e-3
            moved = w.nbytes_raw + 4 * k + 4 * n
            gbps = moved / t_tri / 1e9
            torch_gbps = (2 * n * k + 2 * k + 2 * n) / t_torch / 1e9
            rows.append({"N": n, "K": k, "format": fmt, "weight_bytes": w.nbytes_raw, "triton_us": t_tri * 1e6,
                         "triton_gbps": gbps, "fraction_of_peak": gbps / peak, "torch_f16_us": t_torch * 1e6,
                         "torch_f16_gbps": torch_gbps, "torch_fraction_of_peak": torch_gbps / peak,
                         "speedup_vs_torch": t_torch / t_tri, "max_rel_err_vs_torch": err})
            r = rows[-1]
            print(f"  {n:>5}x{k:<5} {fmt:<5} triton {r['triton_us']:9.1f} us {gbps:8.1f} GB/s "
                  f"({100 * r['fraction_of_peak']:5.1f}% peak) | torch f16 {r['torch_f16_us']:9.1f} us "
                  f"{torch_gbps:8.1f} GB/s | x{r['speedup_vs_torch']:.2f} | rel err {err:.1e}", flush=True)
            del w, w16
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
                    wfmt = "Q8_0" if fmt == "Q4_K" and name == "token_embd.weight" else fmt  # gather: no Q4_K
                    weights[name] = random_weight(torch, wfmt, shape[0], shape[1], device)
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
    ap.add_argument("--formats", default="F16,Q8_0,Q4_0,Q4_K")
    ap.add_argument("--iters", type=int, default=100, help="do_bench measuring window, ms")
    ap.add_argument("--model", default="7b", choices=sorted(MODELS))
    ap.add_argument("--decode-format", default="Q4_0")
    ap.add_argument("--decode-tokens", type=int, default=64)
    ap.add_argument("--skip-decode", action="store_true")
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
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
