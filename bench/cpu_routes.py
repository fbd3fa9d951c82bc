"""Benchmark: candidate CPU kernel routes for quantized GEMV (how the ``--target cpu`` route was chosen).

Usage::

    .venv/bin/python bench/cpu_routes.py [--reps 20] [--ggml-lib DIR] [--out bench/results/cpu_routes.json]

One thread, decode (T = 1) GEMV on Q8_0 and Q4_K weights at the real shapes of the two benchmark models
(Gemma 3 270M: 640x2048, 2048x640, the 262144x640 head; the 110M llama: 768x768, 768x2048, 2048x768,
the 32000x768 head; ``N x K`` = out x in). Routes, best-of-``--reps`` time per GEMV:

* ``qkernels``: this project's C extension (``pipeplan.runtime.kernels._qkernels``), AVX2 and portable;
* ``torch-f32``: ``F.linear`` on a resident float32 copy (the reference target: 4-8x the weight bytes);
* ``torch-tile``: dequantize 256-row tiles per call with the extension, then ``F.linear`` per tile
  (no resident copy, but every call dequantizes everything);
* ``torch-int8``: ``torch._weight_int8pack_mm`` (int8 weights, one scale per output row: Q8_0's
  per-32 block scales cannot be repacked exactly, so it is timed on requantized weights);
* ``numba``: an ``@njit`` int8 block-dot GEMV for Q8_0 and Q4_K (when numba is importable; the JIT
  compile time is reported separately: it counts against the start-up target);
* ``ggml``: ggml's own ``mul_mat`` through ctypes on ``libggml-base.so``/``libggml-cpu.so`` of a
  llama-cpp-python install (``--ggml-lib`` or the ``llama_cpp`` package of this interpreter; never a
  dependency). With it, the extension's AVX2 activation quantizers and dot products are also compared
  bit for bit with ggml's exported ``quantize_row_*`` / ``ggml_vec_dot_*``.

"tok/s-equivalent" = 1 / (sum over one token's GEMVs) for each model's per-token matmul mix (all its
matrices in the one type). Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
GEMMA_MIX = {(1024, 640): 18, (256, 640): 36, (640, 1024): 18, (2048, 640): 36, (640, 2048): 18, (262144, 640): 1}
LLAMA_MIX = {(768, 768): 48, (2048, 768): 24, (768, 2048): 12, (32000, 768): 1}
SHAPES = list(dict.fromkeys([*GEMMA_MIX, *LLAMA_MIX]))
QT_ID = {"Q8_0": 8, "Q4_K": 12}


def best(f, reps: int) -> float:
    f()
    t = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        t = min(t, time.perf_counter() - t0)
    return t


def weight(ggml_type: str, n: int, k: int, rng) -> np.ndarray:
    """Valid rows ``[n, row_bytes]`` (random quants, small f16 scales)."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    block, size = GGML_QUANT_SIZES[GGMLQuantizationType[ggml_type]]
    b = rng.integers(0, 256, (n, k // block, size), dtype=np.uint8)
    b[..., 0:2] = np.frombuffer(np.float16(0.002).tobytes(), np.uint8)
    if ggml_type == "Q4_K":
        b[..., 2:4] = np.frombuffer(np.float16(0.001).tobytes(), np.uint8)
    return b.reshape(n, -1)


# ----------------------------------------------------------------------------- numba
def numba_kernels():
    """(q8_0 gemv, q4_k gemv, compile seconds) or None without numba."""
    try:
        import numba
    except ImportError:
        return None

    @numba.njit(cache=False, fastmath=False)
    def q8_0(w, d_w, xq, d_x, out):  # w int8 [n, k], d_w f32 [n, k/32], xq int8 [k], d_x f32 [k/32]
        n, k = w.shape
        for r in range(n):
            acc = np.float32(0)
            for b in range(k // 32):
                s = 0
                for j in range(32):
                    s += np.int32(w[r, 32 * b + j]) * np.int32(xq[32 * b + j])
                acc += np.float32(s) * d_w[r, b] * d_x[b]
            out[r] = acc

    @numba.njit(cache=False, fastmath=False)
    def q4_k(qs, sc, mn, d, dmin, xq, dx, bsum, out):  # qs uint8 [n, k/2] packed nibbles, sc/mn [n, k/32]
        n = qs.shape[0]
        k = qs.shape[1] * 2
        for r in range(n):
            acc = np.float32(0)
            for sb in range(k // 256):
                si = 0
                sm = 0
                for j in range(4):
                    lo = 0
                    hi = 0
                    b = 128 * sb + 32 * j
                    a = 256 * sb + 64 * j
                    for i in range(32):
                        v = np.int32(qs[r, b + i])
                        lo += (v & 15) * np.int32(xq[a + i])
                        hi += (v >> 4) * np.int32(xq[a + 32 + i])
                    si += lo * np.int32(sc[r, 8 * sb + 2 * j]) + hi * np.int32(sc[r, 8 * sb + 2 * j + 1])
                    sm += (np.int32(mn[r, 8 * sb + 2 * j]) * bsum[8 * sb + 2 * j]
                           + np.int32(mn[r, 8 * sb + 2 * j + 1]) * bsum[8 * sb + 2 * j + 1])
                acc += dx[sb] * (d[r, sb] * np.float32(si) - dmin[r, sb] * np.float32(sm))
            out[r] = acc

    t0 = time.perf_counter()
    q8_0(np.zeros((1, 32), np.int8), np.zeros((1, 1), np.float32), np.zeros(32, np.int8), np.zeros(1, np.float32),
         np.zeros(1, np.float32))
    q4_k(np.zeros((1, 128), np.uint8), np.zeros((1, 8), np.uint8), np.zeros((1, 8), np.uint8),
         np.zeros((1, 1), np.float32), np.zeros((1, 1), np.float32), np.zeros(256, np.int8), np.zeros(1, np.float32),
         np.zeros(8, np.int32), np.zeros(1, np.float32))
    return q8_0, q4_k, time.perf_counter() - t0


# ----------------------------------------------------------------------------- ggml through ctypes
class Ggml:
    """ggml's CPU mul_mat (graph compute, 1 thread) and its exported row kernels."""

    class _Init(ctypes.Structure):
        _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]

    def __init__(self, libdir: Path):
        vp = ctypes.c_void_p
        self.base = ctypes.CDLL(str(libdir / "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
        self.cpu = ctypes.CDLL(str(libdir / "libggml-cpu.so"), mode=ctypes.RTLD_GLOBAL)
        b, c = self.base, self.cpu
        b.ggml_init.argtypes, b.ggml_init.restype = [self._Init], vp
        b.ggml_new_tensor_2d.argtypes, b.ggml_new_tensor_2d.restype = [vp, ctypes.c_int, ctypes.c_int64, ctypes.c_int64], vp
        b.ggml_get_data.argtypes, b.ggml_get_data.restype = [vp], vp
        b.ggml_mul_mat.argtypes, b.ggml_mul_mat.restype = [vp, vp, vp], vp
        b.ggml_new_graph.argtypes, b.ggml_new_graph.restype = [vp], vp
        b.ggml_build_forward_expand.argtypes = [vp, vp]
        b.ggml_free.argtypes = [vp]
        c.ggml_graph_compute_with_ctx.argtypes, c.ggml_graph_compute_with_ctx.restype = [vp, vp, ctypes.c_int], ctypes.c_int
        c.ggml_cpu_init()

    def gemv(self, w: np.ndarray, wtype: int, n: int, k: int, x: np.ndarray, reps: int) -> tuple[float, np.ndarray]:
        b, c = self.base, self.cpu
        ctx = b.ggml_init(self._Init(w.nbytes + x.nbytes + n * 4 * x.shape[0] + (16 << 20), None, False))
        try:
            a = b.ggml_new_tensor_2d(ctx, wtype, k, n)
            ctypes.memmove(b.ggml_get_data(a), w.ctypes.data, w.nbytes)
            xt = b.ggml_new_tensor_2d(ctx, 0, k, x.shape[0])
            ctypes.memmove(b.ggml_get_data(xt), x.ctypes.data, x.nbytes)
            y = b.ggml_mul_mat(ctx, a, xt)
            gf = b.ggml_new_graph(ctx)
            b.ggml_build_forward_expand(gf, y)
            t = best(lambda: c.ggml_graph_compute_with_ctx(ctx, gf, 1), reps)
            out = np.ctypeslib.as_array((ctypes.c_float * (n * x.shape[0])).from_address(b.ggml_get_data(y))).copy()
        finally:
            b.ggml_free(ctx)
        return t, out.reshape(x.shape[0], n)

    def bit_exact(self, rng) -> dict[str, bool]:
        """Extension (AVX2) vs ggml: activation bytes and per-row dot products, every type, random data."""
        from pipeplan.runtime.kernels import _qkernels as q

        quant = {8: "quantize_row_q8_0", 9: "quantize_row_q8_1", 15: "quantize_row_q8_K"}
        dots = {1: "ggml_vec_dot_f16", 30: "ggml_vec_dot_bf16", 2: "ggml_vec_dot_q4_0_q8_0",
                3: "ggml_vec_dot_q4_1_q8_1", 6: "ggml_vec_dot_q5_0_q8_0", 7: "ggml_vec_dot_q5_1_q8_1",
                8: "ggml_vec_dot_q8_0_q8_0", 12: "ggml_vec_dot_q4_K_q8_K", 13: "ggml_vec_dot_q5_K_q8_K",
                14: "ggml_vec_dot_q6_K_q8_K"}
        names = {1: "F16", 30: "BF16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 12: "Q4_K", 13: "Q5_K",
                 14: "Q6_K"}
        res = {}
        for t, fn in dots.items():
            k, n = (768, 9) if t in (12, 13, 14) else (96, 9)
            if t in (1, 30):
                w = (rng.standard_normal((n, k)) * 0.1).astype(np.float32)
                w = (w.astype(np.float16).view(np.uint16) if t == 1 else (w.view(np.uint32) >> 16).astype(np.uint16))
                w = w.view(np.uint8).reshape(n, -1)
            else:
                w = rng.integers(0, 256, (n, q.row_bytes(t, k)), dtype=np.uint8)
                bs = {2: 18, 3: 20, 6: 22, 7: 24, 8: 34, 12: 144, 13: 176, 14: 210}[t]
                v = w.reshape(n, -1, bs)
                off = 208 if t == 14 else 0
                v[..., off:off + 2] = np.frombuffer(np.float16(0.01).tobytes(), np.uint8)
                if t in (3, 7, 12, 13):
                    v[..., 2:4] = np.frombuffer(np.float16(0.004).tobytes(), np.uint8)
            x = (rng.standard_normal((1, k)) * 3).astype(np.float32)
            vt = q.vec_dot_type(t)
            xq = np.empty(q.row_bytes(vt, k), np.uint8)
            q.quantize_act(x, t, k, xq)
            ok = True
            if vt in quant:
                g = np.empty_like(xq)
                getattr(self.cpu, quant[vt])(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(g.ctypes.data), ctypes.c_int64(k))
                ok = bool(np.array_equal(g, xq))
            out = np.empty((1, n), np.float32)
            q.mul_mat(w, t, n, k, x, out, 1)
            for r in range(n):
                s = ctypes.c_float()
                getattr(self.cpu, fn)(ctypes.c_int(k), ctypes.byref(s), ctypes.c_size_t(0), ctypes.c_void_p(w[r].ctypes.data),
                                      ctypes.c_size_t(0), ctypes.c_void_p(xq.ctypes.data), ctypes.c_size_t(0), ctypes.c_int(1))
                ok = ok and bool(s.value == out[0, r])
            res[names[t]] = ok
        return res


def time_shape(ggml_type: str, n: int, k: int, rng, reps: int, nb, ggml: Ggml | None) -> dict[str, float]:
    """Best-of-``reps`` seconds of one ``[1, k] x [n, k]^T`` GEMV on every route."""
    from pipeplan.runtime.kernels import _qkernels as q

    tid = QT_ID[ggml_type]
    w = weight(ggml_type, n, k, rng)
    x = rng.standard_normal((1, k)).astype(np.float32)
    out = np.empty((1, n), np.float32)
    r: dict[str, float] = {}
    q.set_simd(True)
    r["qkernels-avx2"] = best(lambda: q.mul_mat(w, tid, n, k, x, out, 1), reps)
    q.set_simd(False)
    r["qkernels-portable"] = best(lambda: q.mul_mat(w, tid, n, k, x, out, 1), max(3, reps // 4))
    q.set_simd(q.cpu_has_avx2())
    wf = np.empty((n, k), np.float32)
    q.get_rows(w, tid, k, np.arange(n, dtype=np.int64), wf)
    tw, tx = torch.from_numpy(wf), torch.from_numpy(x)
    r["torch-f32"] = best(lambda: torch.nn.functional.linear(tx, tw), reps)

    def tile(w=w, n=n, k=k, tid=tid):
        buf = np.empty((256, k), np.float32)
        for r0 in range(0, n, 256):
            m = min(256, n - r0)
            q.get_rows(w, tid, k, np.arange(r0, r0 + m, dtype=np.int64), buf[:m])
            torch.nn.functional.linear(tx, torch.from_numpy(buf[:m]))

    r["torch-tile"] = best(tile, max(3, reps // 4))
    scale = np.abs(wf).max(1) / 127
    w8 = torch.from_numpy(np.rint(wf / np.where(scale == 0, 1, scale)[:, None]).astype(np.int8))
    ts = torch.from_numpy(scale.astype(np.float32))
    r["torch-int8"] = best(lambda: torch._weight_int8pack_mm(tx, w8, ts), reps)
    if nb is not None:
        q8_0, q4_k, _ = nb
        xq = np.empty(q.row_bytes(q.vec_dot_type(tid), k), np.uint8)
        q.quantize_act(x, tid, k, xq)
        o = np.empty(n, np.float32)
        if ggml_type == "Q8_0":
            blk = w.reshape(n, -1, 34)
            qs = np.ascontiguousarray(blk[..., 2:].view(np.int8).reshape(n, k))
            dw = blk[..., :2].copy().view(np.float16).astype(np.float32).reshape(n, -1)
            xb = xq.reshape(-1, 34)
            xqs = np.ascontiguousarray(xb[:, 2:].view(np.int8).reshape(k))
            dx = xb[:, :2].copy().view(np.float16).astype(np.float32).reshape(-1)
            r["numba"] = best(lambda: q8_0(qs, dw, xqs, dx, o), reps)
        else:  # Q4_K: packed nibbles read in place; the 6-bit scales/mins unpacked ahead of time
            nib = np.ascontiguousarray(w.reshape(n, -1, 144)[..., 16:].reshape(n, k // 2))
            sc = rng.integers(0, 64, (n, k // 32), dtype=np.uint8)
            mn = rng.integers(0, 64, (n, k // 32), dtype=np.uint8)
            d = np.full((n, k // 256), 0.002, np.float32)
            xb = xq.reshape(-1, 292)
            xqs = np.ascontiguousarray(xb[:, 4:260].view(np.int8).reshape(k))
            dx = xb[:, :4].copy().view(np.float32).reshape(-1)
            bsum = xb[:, 260:].copy().view(np.int16).reshape(-1, 8, 2).sum(-1).astype(np.int32).reshape(-1)
            r["numba"] = best(lambda: q4_k(nib, sc, mn, d, d, xqs, dx, bsum, o), reps)
    if ggml is not None:
        r["ggml"], _ = ggml.gemv(w, tid, n, k, x, reps)
    return r


def ggml_libdir(arg: str | None) -> Path | None:
    if arg:
        return Path(arg)
    try:
        import llama_cpp

        return Path(llama_cpp.__file__).parent / "lib"
    except ImportError:
        d = os.environ.get("PIPEPLAN_GGML_LIB")
        return Path(d) if d else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--ggml-lib", default=None, help="folder with libggml-base.so and libggml-cpu.so")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "cpu_routes.json")
    args = ap.parse_args(argv)
    from pipeplan.runtime.kernels import _qkernels as q

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    libdir = ggml_libdir(args.ggml_lib)
    ggml = Ggml(libdir) if libdir and (libdir / "libggml-cpu.so").exists() else None
    nb = numba_kernels()
    rows: dict[str, dict[str, float]] = {}
    for ggml_type in ("Q8_0", "Q4_K"):
        for n, k in SHAPES:
            if ggml_type == "Q4_K" and k % 256:
                continue
            rows[f"{ggml_type} {n}x{k}"] = time_shape(ggml_type, n, k, rng, args.reps, nb, ggml)
    routes = sorted({k for r in rows.values() for k in r})
    tok_s: dict[str, dict[str, float]] = {}
    for ggml_type in ("Q8_0", "Q4_K"):
        for model, mix in (("gemma3", GEMMA_MIX), ("llama110m", LLAMA_MIX)):
            if ggml_type == "Q4_K" and any(k % 256 for _, k in mix):
                continue  # K = 640 cannot be Q4_K (Gemma 3 stores those matrices as Q5_0/Q8_0)
            for route in routes:
                ts = [rows.get(f"{ggml_type} {n}x{k}", {}).get(route) for n, k in mix]
                if all(t is not None for t in ts):
                    tok_s.setdefault(f"{model} {ggml_type}", {})[route] = 1.0 / sum(
                        t * c for t, c in zip(ts, mix.values()))
    exact = ggml.bit_exact(rng) if ggml is not None and q.cpu_has_avx2() else None
    doc = {"machine": platform.processor() or platform.machine(), "threads": 1, "reps": args.reps,
           "gemv_seconds": rows, "tok_s_equivalent": tok_s, "numba_compile_s": nb[2] if nb else None,
           "ggml_lib": str(libdir) if ggml else None, "bit_exact_vs_ggml": exact, "loadavg": os.getloadavg()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1))
    print(f"GEMV, 1 thread, best of {args.reps} (microseconds); load avg {os.getloadavg()[0]:.1f}")
    print(f"{'shape':<18}" + "".join(f"{r:>19}" for r in routes))
    for name, r in rows.items():
        print(f"{name:<18}" + "".join(f"{r[k] * 1e6:>19.0f}" if k in r else f"{'-':>19}" for k in routes))
    print("\ntok/s-equivalent (one token's matmuls, every matrix in the one type)")
    for name, r in tok_s.items():
        print(f"{name:<18}" + "".join(f"{r[k]:>19.1f}" if k in r else f"{'-':>19}" for k in routes))
    if nb:
        print(f"numba JIT compile of the two kernels: {nb[2]:.2f} s")
    else:
        print("numba: not importable (route not timed)")
    print("ggml: " + (f"{libdir}" if ggml else "no libggml found (route not timed)"))
    if exact is not None:
        print("AVX2 kernels bit-exact with ggml: " + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in exact.items()))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
