"""Triton matmul/GEMV with dequantization fused into the weight load: F32, F16, BF16, Q8_0, Q4_0, Q4_K.

``matmul(x, weight)`` = ``x @ weight.T`` (ggml ``mul_mat(weight, x)``; the reference is
:func:`pipeplan.runtime.kernels.reference.matmul`). ``x`` float32 ``[T, K]``; ``weight`` ``[N, K]``
either a float32 tensor or a :class:`~pipeplan.runtime.kernels.triton_weights.GGMLWeight` holding the
GGUF bytes; result float32 ``[T, N]``. Accumulation is float32.

One program computes a ``[BLOCK_M, BLOCK_N]`` tile of the output and walks ``K`` in ``BLOCK_K``
steps; each step loads the weight tile in its stored format and dequantizes it in registers:

* F16/BF16: load and convert (``w.to(float32)``);
* Q8_0 (ggml ``block_q8_0``: f16 ``d`` + 32 int8): the tile is read as ``[BLOCK_N, BLOCK_K/32, 32]``
  int8 plus ``[BLOCK_N, BLOCK_K/32]`` scales (two bytes joined and bitcast to f16), ``w = d * q``;
* Q4_0 (``block_q4_0``: f16 ``d`` + 16 bytes, byte ``j`` = weight ``j`` low nibble, ``j+16`` high):
  ``[BLOCK_N, BLOCK_K/32, 16]`` bytes split into nibbles and joined to ``[..., 16, 2]``; the
  matching activations are gathered in that order (column ``(b, j, t)`` is ``k = 32b + 16t + j``),
  so no permute is needed; ``w = d * (nibble - 8)``.

Decode (``T = 1``) is a pure GEMV: ``BLOCK_M = 1`` and the product is a broadcast multiply and row
sum (memory-bound: every weight byte is read once). Prefill with ``T >= 16`` on a GPU uses
``tl.dot`` (``input_precision="ieee"``, i.e. no TF32) over ``BLOCK_M = 16..64`` rows.
On the GPU the tile sizes are autotuned per ``(N, K, format, BLOCK_M)``; under the interpreter a
single large tile is used (fewest programs).

Q4_K (ggml ``block_q4_K``, ``QK_K = 256`` weights in 144 bytes: f16 ``d``, f16 ``dmin``, ``scales[12]``
holding eight 6-bit scales and eight 6-bit mins as in ggml's ``get_scale_min_k4``, ``qs[128]``) has its
own kernel, :func:`_gemv_q4k_kernel`, because its step is whole super-blocks (``BLOCK_K = 256 * NSB``)
rather than 32-weight blocks. Value ``64g + 32h + i`` of a super-block is nibble ``h`` (0 low, 1 high)
of byte ``qs[32g + i]`` and belongs to sub-block ``j = 2g + h``: ``w = d*sc[j]*q - dmin*m[j]``
(gguf.quants ``Q4_K.dequantize_blocks``, the reference). ``K`` must be a multiple of 256. The GEMV path
factors the per-sub-block affine map out of the row sums (``d*sc*sum(x q) - dmin*m*sum(x)``, as
llama.cpp's ``vec_dot_q4_K`` does), so each weight costs a nibble extract and one multiply-add.
Other K-quants (Q5_K, Q6_K, ...) are not implemented (rejected at weight load; see
:mod:`pipeplan.runtime.kernels.triton_weights`).
"""

from __future__ import annotations

# module import (attribute read at call time): triton_weights imports this package's _common, so
# importing triton_weights first must not need GGMLWeight to exist yet (circular import)
import pipeplan.runtime.kernels.triton_weights as _tw
import torch
import triton
import triton.language as tl
from pipeplan.runtime.kernels.triton._common import (
    TritonKernelError,
    cdiv,
    check_float,
    interpreting,
    next_pow2,
)

FORMATS = {"F32": 0, "F16": 1, "BF16": 2, "Q8_0": 3, "Q4_0": 4}
"""Weight format name -> the ``FMT`` constexpr of :func:`_gemv_kernel` (and of the embedding gather)."""
MATMUL_FORMATS: tuple[str, ...] = (*FORMATS, "Q4_K")
"""Weight formats :func:`matmul` reads: :data:`FORMATS` on :func:`_gemv_kernel`, Q4_K on :func:`_gemv_q4k_kernel`."""


@triton.jit
def _gemv_kernel(x_ptr, w_ptr, y_ptr, M, N, K, stride_xm, stride_wn, stride_ym,
                 FMT: tl.constexpr, USE_DOT: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """``y[M, N] = x[M, K] @ dequant(w)[N, K]^T``; grid ``(cdiv(N, BLOCK_N), cdiv(M, BLOCK_M))``."""
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok = rm < M
    n_ok = rn < N
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    NB: tl.constexpr = BLOCK_K // 32
    for k0 in range(0, K, BLOCK_K):
        if FMT <= 2:
            rk = k0 + tl.arange(0, BLOCK_K)
            w = tl.load(w_ptr + rn[:, None] * stride_wn + rk[None, :],
                        mask=n_ok[:, None] & (rk[None, :] < K), other=0.0).to(tl.float32)
        else:
            blk = k0 // 32 + tl.arange(0, NB)
            wmask2 = n_ok[:, None] & (blk[None, :] < K // 32)
            BS: tl.constexpr = 34 if FMT == 3 else 18  # bytes per 32-weight block: Q8_0 34, Q4_0 18
            sp = w_ptr + rn[:, None] * stride_wn + blk[None, :] * BS
            d_lo = tl.load(sp, mask=wmask2, other=0).to(tl.uint16)
            d_hi = tl.load(sp + 1, mask=wmask2, other=0).to(tl.uint16)
            d = (d_lo | (d_hi << 8)).to(tl.float16, bitcast=True).to(tl.float32)
            if FMT == 3:
                j = tl.arange(0, 32)
                q = tl.load(sp[:, :, None] + 2 + j[None, None, :], mask=wmask2[:, :, None], other=0)
                qf = q.to(tl.int8, bitcast=True).to(tl.float32)
                w = tl.reshape(qf * d[:, :, None], [BLOCK_N, BLOCK_K])
                rk = k0 + tl.arange(0, BLOCK_K)
            else:
                j = tl.arange(0, 16)
                q = tl.load(sp[:, :, None] + 2 + j[None, None, :], mask=wmask2[:, :, None], other=0)
                lo = (q & 15).to(tl.float32) - 8.0
                hi = (q >> 4).to(tl.float32) - 8.0
                wq = tl.join(lo * d[:, :, None], hi * d[:, :, None])  # [BLOCK_N, NB, 16, 2]
                w = tl.reshape(wq, [BLOCK_N, BLOCK_K])
                c = tl.arange(0, BLOCK_K)
                rk = k0 + (c // 32) * 32 + (c % 2) * 16 + (c % 32) // 2
        x = tl.load(x_ptr + rm[:, None] * stride_xm + rk[None, :], mask=m_ok[:, None] & (rk[None, :] < K), other=0.0)
        if USE_DOT:
            acc += tl.dot(x, tl.trans(w), input_precision="ieee")
        else:
            acc += tl.sum(x[:, None, :] * w[None, :, :], axis=2)
    tl.store(y_ptr + rm[:, None] * stride_ym + rn[None, :], acc, mask=m_ok[:, None] & n_ok[None, :])


_AUTOTUNE_CONFIGS = [
    triton.Config({"BLOCK_N": bn, "BLOCK_K": bk}, num_warps=nw, num_stages=ns)
    for bn in (4, 8, 16, 32, 64) for bk in (128, 256, 512) for nw in (4, 8) for ns in (2, 4)
    if bn * bk <= 16384
]
_gemv_autotuned = triton.autotune(configs=_AUTOTUNE_CONFIGS, key=["N", "K", "FMT", "BLOCK_M"])(_gemv_kernel)


# --------------------------------------------------------------------------- Q4_K
QK_K = 256
"""Weights per Q4_K super-block (ggml ``QK_K``)."""
Q4_K_BLOCK_BYTES = 144
"""Bytes per Q4_K super-block: f16 ``d``, f16 ``dmin``, ``scales[12]``, ``qs[128]`` (ggml ``block_q4_K``)."""


@triton.jit
def _f16_at(p, mask):
    """The little-endian f16 at byte pointer(s) ``p`` as float32 (two bytes joined and bitcast)."""
    lo = tl.load(p, mask=mask, other=0).to(tl.uint16)
    hi = tl.load(p + 1, mask=mask, other=0).to(tl.uint16)
    return (lo | (hi << 8)).to(tl.float16, bitcast=True).to(tl.float32)


@triton.jit
def _q4k_scale_min(sp, j, mask):
    """6-bit scale and min of sub-block ``j`` (0..7) from the 12 scale bytes at ``sp`` (ggml
    ``get_scale_min_k4``): ``j < 4``: ``sc = s[j] & 63``, ``m = s[j+4] & 63``; ``j >= 4``:
    ``sc = (s[j+4] & 15) | (s[j-4] >> 6) << 4``, ``m = (s[j+4] >> 4) | (s[j] >> 6) << 4``. float32."""
    sj = tl.load(sp + j, mask=mask, other=0)
    sj4 = tl.load(sp + j + 4, mask=mask, other=0)
    sjm4 = tl.load(sp + j % 4, mask=mask, other=0)
    low = j < 4
    sc = tl.where(low, sj & 63, (sj4 & 15) | ((sjm4 >> 6) << 4))
    mn = tl.where(low, sj4 & 63, (sj4 >> 4) | ((sj >> 6) << 4))
    return sc.to(tl.float32), mn.to(tl.float32)


@triton.jit
def _gemv_q4k_kernel(x_ptr, w_ptr, y_ptr, M, N, K, stride_xm, stride_wn, stride_ym,
                     USE_DOT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, NSB: tl.constexpr):
    """``y[M, N] = x[M, K] @ dequant_q4_k(w)[N, K]^T``; ``K % 256 == 0``; ``NSB`` super-blocks
    (``BLOCK_K = 256 * NSB``) per step; grid ``(cdiv(N, BLOCK_N), cdiv(M, BLOCK_M))``.

    A super-block is 4 groups of 64 values; group ``g`` is byte ``qs[32g + i]``: low nibble = value
    ``64g + i`` (sub-block ``2g``), high nibble = ``64g + 32 + i`` (sub-block ``2g + 1``). The GEMV
    path factors the affine dequantization out of each 32-value sub-block:
    ``sum_i x_i (d sc q_i - dmin m) = d sc (sum_i x_i q_i) - dmin m (sum_i x_i)``; the ``tl.dot``
    path dequantizes the ``[BLOCK_N, BLOCK_K]`` tile (``(d*sc)*q - dmin*m``, gguf's order)."""
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok = rm < M
    n_ok = rn < N
    G: tl.constexpr = NSB * 4  # 64-value groups per step
    BLOCK_K: tl.constexpr = NSB * 256
    g4 = tl.arange(0, 4)
    i32 = tl.arange(0, 32)
    gg = tl.arange(0, G)
    n_sb = K // 256
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        sb = k0 // 256 + tl.arange(0, NSB)
        ok2 = n_ok[:, None] & (sb[None, :] < n_sb)  # [BLOCK_N, NSB]
        bp = w_ptr + rn[:, None] * stride_wn + sb[None, :] * 144
        d = _f16_at(bp, ok2)[:, :, None]
        dmin = _f16_at(bp + 2, ok2)[:, :, None]
        sp = bp[:, :, None] + 4
        sc_lo, mn_lo = _q4k_scale_min(sp, 2 * g4[None, None, :], ok2[:, :, None])  # sub-blocks 0, 2, 4, 6
        sc_hi, mn_hi = _q4k_scale_min(sp, 2 * g4[None, None, :] + 1, ok2[:, :, None])  # 1, 3, 5, 7
        ds_lo = tl.reshape(d * sc_lo, [BLOCK_N, G])
        ds_hi = tl.reshape(d * sc_hi, [BLOCK_N, G])
        dm_lo = tl.reshape(dmin * mn_lo, [BLOCK_N, G])
        dm_hi = tl.reshape(dmin * mn_hi, [BLOCK_N, G])
        q = tl.load(bp[:, :, None, None] + 16 + 32 * g4[None, None, :, None] + i32[None, None, None, :],
                    mask=ok2[:, :, None, None], other=0)
        q = tl.reshape(q, [BLOCK_N, G, 32])
        lo = (q & 15).to(tl.float32)
        hi = (q >> 4).to(tl.float32)
        kk = k0 + 64 * gg[:, None] + i32[None, :]  # [G, 32]: column of each low-nibble value (high: +32)
        xmask = m_ok[:, None, None] & (kk[None, :, :] < K)
        xp = x_ptr + rm[:, None, None] * stride_xm + kk[None, :, :]
        x_lo = tl.load(xp, mask=xmask, other=0.0)  # [BLOCK_M, G, 32]
        x_hi = tl.load(xp + 32, mask=xmask, other=0.0)
        if USE_DOT:
            w_lo = lo * ds_lo[:, :, None] - dm_lo[:, :, None]
            w_hi = hi * ds_hi[:, :, None] - dm_hi[:, :, None]
            w = tl.reshape(tl.join(w_lo, w_hi), [BLOCK_N, BLOCK_K])  # column (g, i, h): k = 64g + 32h + i
            xk = tl.reshape(tl.join(x_lo, x_hi), [BLOCK_M, BLOCK_K])  # the same column order
            acc += tl.dot(xk, tl.trans(w), input_precision="ieee")
        else:
            s_lo = tl.sum(x_lo[:, None, :, :] * lo[None, :, :, :], axis=3)  # [BLOCK_M, BLOCK_N, G]
            s_hi = tl.sum(x_hi[:, None, :, :] * hi[None, :, :, :], axis=3)
            xs_lo = tl.sum(x_lo, axis=2)[:, None, :]  # [BLOCK_M, 1, G]
            xs_hi = tl.sum(x_hi, axis=2)[:, None, :]
            part = s_lo * ds_lo[None, :, :] + s_hi * ds_hi[None, :, :] - xs_lo * dm_lo[None, :, :]
            acc += tl.sum(part - xs_hi * dm_hi[None, :, :], axis=2)
    tl.store(y_ptr + rm[:, None] * stride_ym + rn[None, :], acc, mask=m_ok[:, None] & n_ok[None, :])


def _prune_q4k(configs, named_args, **kwargs):
    """Autotune pruning: ``tl.dot`` needs ``BLOCK_N >= 16``; keep the GEMV configs otherwise."""
    if kwargs.get("USE_DOT"):
        return [c for c in configs if c.kwargs["BLOCK_N"] >= 16] or configs[-1:]
    return configs


_Q4K_CONFIGS = [
    triton.Config({"BLOCK_N": bn, "NSB": nsb}, num_warps=nw, num_stages=ns)
    for bn in (4, 8, 16, 32, 64) for nsb in (1, 2) for nw in (4, 8) for ns in (2, 4)
    if bn * nsb * 256 <= 16384
]
_gemv_q4k_autotuned = triton.autotune(configs=_Q4K_CONFIGS, key=["N", "K", "USE_DOT", "BLOCK_M"],
                                      prune_configs_by={"early_config_prune": _prune_q4k})(_gemv_q4k_kernel)


def weight_format(weight: torch.Tensor, formats: tuple[str, ...] | dict = FORMATS) -> tuple[str, torch.Tensor]:
    """``(format name, tensor the kernel reads)`` of a weight (float32 tensor or :class:`GGMLWeight`).

    Args:
        weight: the weight. formats: the format names the calling kernel reads (default :data:`FORMATS`,
            what :func:`_gemv_kernel` and the embedding gather read; :func:`matmul` passes
            :data:`MATMUL_FORMATS`).

    Raises:
        TritonKernelError: ``triton:weight_type`` for a float tensor that is not float32/float16/bfloat16,
            or a :class:`GGMLWeight` whose format is not in ``formats`` (e.g. a Q4_K embedding table).
    """
    if isinstance(weight, _tw.GGMLWeight):
        if weight.ggml_type not in formats:
            raise TritonKernelError("weight_type", f"weight {weight.wname}: format {weight.ggml_type} is not read by "
                                    f"this kernel (supported: {', '.join(formats)})", where=weight.wname, kind="bind")
        return weight.ggml_type, weight.raw
    fmt = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}.get(weight.dtype)
    if fmt is None:
        raise TritonKernelError("weight_type", f"matmul weight dtype {weight.dtype} is not supported", where="weight")
    return fmt, weight.contiguous()


def launch_config(fmt: str, m: int, n: int, k: int, interpret: bool | None = None) -> dict:
    """Launch meta-parameters of a ``[m, k] x [n, k]^T`` call (used by :func:`matmul` and by the
    ``convert-cplan-to-triton`` lowering). Interpreter: one large tile (fewest programs). GPU:
    ``tl.dot`` for ``m >= 16``; ``BLOCK_N``/``BLOCK_K`` here are the defaults the lowering records,
    ``autotune`` says the runtime retunes them per ``(N, K, FMT, BLOCK_M)``. For ``fmt == "Q4_K"`` the
    K step is ``NSB`` super-blocks of 256 (key ``NSB`` instead of ``BLOCK_K``; kernel :func:`_gemv_q4k_kernel`)."""
    interp = interpreting() if interpret is None else interpret
    use_dot = (not interp) and m >= 16
    block_m = min(next_pow2(m), 64) if use_dot else (1 if m == 1 else min(next_pow2(m), 16))
    if fmt == "Q4_K":  # whole super-blocks per step: NSB (BLOCK_K = 256 * NSB) instead of BLOCK_K
        if not interp:
            return {"BLOCK_M": block_m, "USE_DOT": use_dot, "BLOCK_N": 32 if use_dot else min(16, next_pow2(n)),
                    "NSB": 1, "autotune": True}
        nsb = min(next_pow2(max(k // QK_K, 1)), 2)
        bn = min(next_pow2(n), max(16, 65536 // (nsb * QK_K * block_m)))
        return {"BLOCK_M": block_m, "USE_DOT": False, "BLOCK_N": bn, "NSB": nsb, "autotune": False}
    if not interp:
        bn, bk = (64, 64) if use_dot else (min(16, next_pow2(n)), 256)
        return {"BLOCK_M": block_m, "USE_DOT": use_dot, "BLOCK_N": bn, "BLOCK_K": bk, "autotune": True}
    bk = min(max(next_pow2(k), 32), 256)
    bn = min(next_pow2(n), max(16, 65536 // (bk * block_m)))
    return {"BLOCK_M": block_m, "USE_DOT": False, "BLOCK_N": bn, "BLOCK_K": bk, "autotune": False}


def matmul(x: torch.Tensor, weight: torch.Tensor, *, use_dot: bool | None = None) -> torch.Tensor:
    """``x @ weight.T`` with the weight dequantized in-kernel (module docstring).

    Args:
        x: float32 ``[T, K]`` (moved to the weight's device if needed).
        weight: ``[N, K]`` float32/float16/bfloat16 tensor or :class:`GGMLWeight` (F16, BF16, Q8_0, Q4_0,
            Q4_K; Q4_K needs ``K % 256 == 0``).
        use_dot: force the ``tl.dot`` path on/off (tests); default per :func:`launch_config`.

    Returns:
        float32 ``[T, N]`` on the weight's device.

    Raises:
        TritonKernelError: ``triton:dtype`` (x not float32), ``triton:shape`` (x not 2-D, ``K``
            mismatch, or a Q4_K weight whose ``K`` is not a multiple of 256), ``triton:weight_type``
            (unsupported weight dtype or format).
    """
    check_float(x, "matmul input")
    fmt, w = weight_format(weight, MATMUL_FORMATS)
    n, k = int(weight.shape[0]), int(weight.shape[1])
    if x.dim() != 2 or x.shape[1] != k:
        raise TritonKernelError("shape", f"matmul: x {tuple(x.shape)} does not match weight [N={n}, K={k}]",
                                where=getattr(weight, "wname", "weight"))
    if fmt == "Q4_K" and (k % QK_K or w.shape[1] != k // QK_K * Q4_K_BLOCK_BYTES):
        raise TritonKernelError("shape", f"matmul: Q4_K weight [N={n}, K={k}] needs K a multiple of {QK_K} stored as "
                                f"{Q4_K_BLOCK_BYTES} bytes per super-block, got raw {tuple(w.shape)}",
                                where=getattr(weight, "wname", "weight"))
    if x.device != w.device:
        x = x.to(w.device)
    x = x.contiguous()
    m = x.shape[0]
    y = torch.empty((m, n), dtype=torch.float32, device=w.device)
    if m == 0:
        return y
    cfg = launch_config(fmt, m, n, k)
    if fmt == "Q4_K":
        return _matmul_q4k(x, w, y, cfg, use_dot)
    if use_dot is not None:
        cfg["USE_DOT"] = bool(use_dot)
        if use_dot:
            cfg["BLOCK_M"] = max(cfg["BLOCK_M"], 16)
            if interpreting():
                cfg["BLOCK_N"] = max(16, min(cfg["BLOCK_N"], 64))
    bm = cfg["BLOCK_M"]
    args = (x, w, y, m, n, k, x.stride(0), w.stride(0), y.stride(0))
    if not cfg["autotune"]:
        grid = (cdiv(n, cfg["BLOCK_N"]), cdiv(m, bm))
        _gemv_kernel[grid](*args, FMT=FORMATS[fmt], USE_DOT=cfg["USE_DOT"], BLOCK_M=bm,
                           BLOCK_N=cfg["BLOCK_N"], BLOCK_K=cfg["BLOCK_K"])
    else:
        def grid_of(meta):
            return (cdiv(n, meta["BLOCK_N"]), cdiv(m, bm))

        _gemv_autotuned[grid_of](*args, FMT=FORMATS[fmt], USE_DOT=cfg["USE_DOT"], BLOCK_M=bm)
    return y



def _matmul_q4k(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, cfg: dict, use_dot: bool | None) -> torch.Tensor:
    """Launch :func:`_gemv_q4k_kernel` for :func:`matmul` (checked operands, ``cfg`` from :func:`launch_config`)."""
    m, n, k = x.shape[0], y.shape[1], x.shape[1]
    if use_dot is not None:
        cfg["USE_DOT"] = bool(use_dot)
        if use_dot:
            cfg["BLOCK_M"] = max(cfg["BLOCK_M"], 16)
            if interpreting():
                cfg["BLOCK_N"], cfg["NSB"] = max(16, min(cfg["BLOCK_N"], 32)), 1
    bm = cfg["BLOCK_M"]
    args = (x, w, y, m, n, k, x.stride(0), w.stride(0), y.stride(0))
    if not cfg["autotune"]:
        grid = (cdiv(n, cfg["BLOCK_N"]), cdiv(m, bm))
        _gemv_q4k_kernel[grid](*args, USE_DOT=cfg["USE_DOT"], BLOCK_M=bm, BLOCK_N=cfg["BLOCK_N"], NSB=cfg["NSB"])
    else:
        def grid_of(meta):
            return (cdiv(n, meta["BLOCK_N"]), cdiv(m, bm))

        _gemv_q4k_autotuned[grid_of](*args, USE_DOT=cfg["USE_DOT"], BLOCK_M=bm)
    return y


__all__ = ["FORMATS", "MATMUL_FORMATS", "Q4_K_BLOCK_BYTES", "QK_K", "launch_config", "matmul", "weight_format"]
