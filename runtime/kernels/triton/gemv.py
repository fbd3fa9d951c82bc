"""Triton matmul/GEMV with dequantization fused into the weight load, for every format of
:data:`pipeplan.targets.triton_formats.WEIGHT_FORMATS`: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
Q5_1 (:func:`_gemv_kernel`) and Q4_K, Q5_K, Q6_K (:func:`_gemv_kq_kernel`).

``matmul(x, weight)`` = ``x @ weight.T`` (ggml ``mul_mat(weight, x)``; the reference is
:func:`pipeplan.runtime.kernels.reference.matmul`). ``x`` float32 ``[T, K]``; ``weight`` ``[N, K]``
either a float32 tensor or a :class:`~pipeplan.runtime.kernels.triton_weights.GGMLWeight` holding the
GGUF bytes; result float32 ``[T, N]``. Accumulation is float32.

One program computes a ``[BLOCK_M, BLOCK_N]`` tile of the output and walks ``K``; each step loads the
weight tile in its stored format and dequantizes it in registers, with gguf.quants' arithmetic (ggml
``dequantize_row_*``, ggml-common.h block layouts):

* F16/BF16: load and convert;
* Q8_0 (f16 ``d``, 32 int8): ``w = d * q``;
* Q4_0/Q4_1/Q5_0/Q5_1 (f16 ``d``, [f16 ``m``], [``qh[4]``: bit ``j`` = 5th bit of weight ``j``], 16
  bytes ``qs``: byte ``j`` = weight ``j`` low nibble, ``j + 16`` high): the bytes are split into nibbles
  and joined to ``[..., 16, 2]``; the activations are gathered in that order (column ``(b, j, t)`` is
  ``k = 32b + 16t + j``), so no permute is needed. ``w = d * (q - 8)`` (Q4_0), ``d * q + m`` (Q4_1),
  ``d * (q - 16)`` (Q5_0), ``d * q + m`` (Q5_1);
* K-quants (``QK_K = 256`` weights per super-block, ``K % 256 == 0``), walked ``NSB`` super-blocks per
  step as ``[BLOCK_N, 16 * NSB, 16]`` tiles of 16-weight groups in natural order:
  Q4_K (144 bytes: f16 ``d``, f16 ``dmin``, ``scales[12]``, ``qs[128]``) and Q5_K (176 bytes: the same
  plus ``qh[32]`` before ``qs``): weight ``32s + l`` of the super-block is nibble ``s % 2`` of byte
  ``qs[32 (s // 2) + l]`` (+16 if bit ``s`` of ``qh[l]``, Q5_K), ``w = (d * sc[s]) * q - dmin * m[s]``
  with the 6-bit pairs of ggml ``get_scale_min_k4``; Q6_K (210 bytes: ``ql[128]``, ``qh[64]``, int8
  ``scales[16]``, f16 ``d``): weight ``32s + l`` (``s = 4n + c``) is nibble ``c // 2`` of
  ``ql[64n + 32 (c % 2) + l]`` joined with bits ``2c..2c+1`` of ``qh[32n + l]``,
  ``w = (d * scales[(32s + l) // 16]) * (q - 32)``. The GEMV path factors each 16-weight group's affine
  map out of the row sums (``scale * sum(x q) - min * sum(x)``, as llama.cpp's ``vec_dot_q*_K`` do).

Decode (``T = 1``) is a pure GEMV: ``BLOCK_M = 1`` and the product is a broadcast multiply and row
sum (memory-bound: every weight byte is read once). Prefill with ``T >= 16`` on a GPU uses
``tl.dot`` (``input_precision="ieee"``, i.e. no TF32) over ``BLOCK_M = 16..64`` rows on the
dequantized tile. On the GPU the tile sizes are autotuned per ``(N, K, FMT, BLOCK_M)``; under the
interpreter a single large tile is used (fewest programs): :func:`pipeplan.targets.triton_formats.launch_config`.
"""

from __future__ import annotations

# module import (attribute read at call time): triton_weights imports this package's _common, so
# importing triton_weights first must not need GGMLWeight to exist yet (circular import)
import pipeplan.runtime.kernels.triton_weights as _tw
import torch
import triton
import triton.language as tl
from pipeplan.runtime.kernels.triton._common import TritonKernelError, cdiv, check_float, interpreting
from pipeplan.targets.triton_formats import GEMV_KQ, QK_K, RAW_TYPES, WEIGHT_FORMATS, launch_config

MATMUL_FORMATS: tuple[str, ...] = RAW_TYPES
"""Weight formats :func:`matmul` reads (every :data:`WEIGHT_FORMATS` entry)."""


@triton.jit
def _f16_at(p, mask):
    """The little-endian f16 at byte pointer(s) ``p`` as float32 (two bytes joined and bitcast)."""
    lo = tl.load(p, mask=mask, other=0).to(tl.uint16)
    hi = tl.load(p + 1, mask=mask, other=0).to(tl.uint16)
    return (lo | (hi << 8)).to(tl.float16, bitcast=True).to(tl.float32)


@triton.jit
def _gemv_kernel(x_ptr, w_ptr, y_ptr, M, N, K, stride_xm, stride_wn, stride_ym,
                 FMT: tl.constexpr, USE_DOT: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """``y[M, N] = x[M, K] @ dequant(w)[N, K]^T``; ``FMT`` 0..7 = F32, F16, BF16, Q8_0, Q4_0, Q4_1,
    Q5_0, Q5_1; grid ``(cdiv(N, BLOCK_N), cdiv(M, BLOCK_M))``."""
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
            # bytes per 32-weight block: Q8_0 34; Q4_0 18, Q4_1 20, Q5_0 22, Q5_1 24
            BS: tl.constexpr = 34 if FMT == 3 else 18 + 2 * (FMT - 4)
            sp = w_ptr + rn[:, None] * stride_wn + blk[None, :] * BS
            d = _f16_at(sp, wmask2)
            if FMT == 3:
                j = tl.arange(0, 32)
                q = tl.load(sp[:, :, None] + 2 + j[None, None, :], mask=wmask2[:, :, None], other=0)
                qf = q.to(tl.int8, bitcast=True).to(tl.float32)
                w = tl.reshape(qf * d[:, :, None], [BLOCK_N, BLOCK_K])
                rk = k0 + tl.arange(0, BLOCK_K)
            else:
                QS: tl.constexpr = 2 + 2 * (FMT - 4)  # qs offset: after d [, m] [, qh[4]]
                j = tl.arange(0, 16)
                mask3 = wmask2[:, :, None]
                q = tl.load(sp[:, :, None] + QS + j[None, None, :], mask=mask3, other=0).to(tl.int32)
                lo = q & 15
                hi = q >> 4
                if FMT >= 6:  # Q5_0 / Q5_1: 5th bits, weight j in bit j of the little-endian qh[4]
                    QH: tl.constexpr = 2 if FMT == 6 else 4
                    jb = j[None, None, :]
                    h_lo = tl.load(sp[:, :, None] + QH + jb // 8, mask=mask3, other=0).to(tl.int32)
                    h_hi = tl.load(sp[:, :, None] + QH + 2 + jb // 8, mask=mask3, other=0).to(tl.int32)
                    lo = lo | (((h_lo >> (jb % 8)) & 1) << 4)
                    hi = hi | (((h_hi >> (jb % 8)) & 1) << 4)
                d3 = d[:, :, None]
                if FMT % 2 == 1:  # Q4_1 / Q5_1: w = d * q + m
                    m3 = _f16_at(sp + 2, wmask2)[:, :, None]
                    w_lo = d3 * lo.to(tl.float32) + m3
                    w_hi = d3 * hi.to(tl.float32) + m3
                else:  # Q4_0 / Q5_0: w = d * (q - 8 | 16)
                    ZP: tl.constexpr = 8.0 if FMT == 4 else 16.0
                    w_lo = d3 * (lo.to(tl.float32) - ZP)
                    w_hi = d3 * (hi.to(tl.float32) - ZP)
                w = tl.reshape(tl.join(w_lo, w_hi), [BLOCK_N, BLOCK_K])  # [BLOCK_N, NB, 16, 2] flattened
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


# --------------------------------------------------------------------------- K-quants
@triton.jit
def _k4_scale_min(sp, j, mask):
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
def _kq_quant(bp, s, pos, mask, FMT: tl.constexpr):
    """Quantized value (float32, before its group's scale) of weight ``32 s + pos`` (``s`` 0..7, ``pos``
    0..31) of the K-quant super-block at ``bp`` (module docstring): Q4_K / Q5_K ``q`` (0..15 / 0..31),
    Q6_K ``q - 32``."""
    if FMT == 2:
        ql = tl.load(bp + 64 * (s // 4) + 32 * (s % 2) + pos, mask=mask, other=0).to(tl.int32)
        qh = tl.load(bp + 128 + 32 * (s // 4) + pos, mask=mask, other=0).to(tl.int32)
        q = ((ql >> (4 * ((s % 4) // 2))) & 15) | (((qh >> (2 * (s % 4))) & 3) << 4)
        return q.to(tl.float32) - 32.0
    else:
        QS: tl.constexpr = 16 if FMT == 0 else 48
        b = tl.load(bp + QS + 32 * (s // 2) + pos, mask=mask, other=0).to(tl.int32)
        q = (b >> (4 * (s % 2))) & 15
        if FMT == 1:
            h = tl.load(bp + 16 + pos, mask=mask, other=0).to(tl.int32)
            q = q | (((h >> s) & 1) << 4)
        return q.to(tl.float32)


@triton.jit
def _kq_scale(bp, g, mask, FMT: tl.constexpr):
    """Scale of 16-weight group ``g`` (0..15) of the K-quant super-block at ``bp``: ``d * sc[g // 2]``
    (Q4_K / Q5_K) or ``d * scales[g]`` (Q6_K, int8)."""
    if FMT == 2:
        sc = tl.load(bp + 192 + g, mask=mask, other=0).to(tl.int8, bitcast=True).to(tl.float32)
        return _f16_at(bp + 208, mask) * sc
    else:
        sc, mn = _k4_scale_min(bp + 4, g // 2, mask)
        return _f16_at(bp, mask) * sc


@triton.jit
def _kq_min(bp, g, mask):
    """Min of 16-weight group ``g`` of a Q4_K / Q5_K super-block: ``dmin * m[g // 2]``."""
    sc, mn = _k4_scale_min(bp + 4, g // 2, mask)
    return _f16_at(bp + 2, mask) * mn


@triton.jit
def _gemv_kq_kernel(x_ptr, w_ptr, y_ptr, M, N, K, stride_xm, stride_wn, stride_ym,
                    FMT: tl.constexpr, USE_DOT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    NSB: tl.constexpr):
    """``y[M, N] = x[M, K] @ dequant(w)[N, K]^T`` for ``FMT`` 0/1/2 = Q4_K/Q5_K/Q6_K; ``K % 256 == 0``;
    ``NSB`` super-blocks (``16 * NSB`` groups of 16 weights) per step; grid
    ``(cdiv(N, BLOCK_N), cdiv(M, BLOCK_M))``."""
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok = rm < M
    n_ok = rn < N
    BSB: tl.constexpr = 144 if FMT == 0 else (176 if FMT == 1 else 210)
    U: tl.constexpr = NSB * 16
    BLOCK_K: tl.constexpr = NSB * 256
    u = tl.arange(0, U)  # 16-weight group of the step
    r = tl.arange(0, 16)
    g = u % 16  # group within its super-block
    s3 = (g // 2)[None, :, None]  # 32-weight sub-block
    l3 = (16 * (g % 2))[None, :, None] + r[None, None, :]  # position in the sub-block
    n_sb = K // 256
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        sb = k0 // 256 + u // 16
        ok = n_ok[:, None] & (sb[None, :] < n_sb)  # [BLOCK_N, U]
        bp = w_ptr + rn[:, None] * stride_wn + sb[None, :] * BSB
        scale = _kq_scale(bp, g[None, :], ok, FMT)  # [BLOCK_N, U]
        q = _kq_quant(bp[:, :, None], s3, l3, ok[:, :, None], FMT)  # [BLOCK_N, U, 16]
        kk = k0 + 16 * u[:, None] + r[None, :]  # [U, 16]
        x = tl.load(x_ptr + rm[:, None, None] * stride_xm + kk[None, :, :],
                    mask=m_ok[:, None, None] & (kk[None, :, :] < K), other=0.0)  # [BLOCK_M, U, 16]
        if USE_DOT:
            w = q * scale[:, :, None]
            if FMT != 2:
                w = w - _kq_min(bp, g[None, :], ok)[:, :, None]
            acc += tl.dot(tl.reshape(x, [BLOCK_M, BLOCK_K]), tl.trans(tl.reshape(w, [BLOCK_N, BLOCK_K])),
                          input_precision="ieee")
        else:
            part = tl.sum(x[:, None, :, :] * q[None, :, :, :], axis=3) * scale[None, :, :]  # [BLOCK_M, BLOCK_N, U]
            if FMT != 2:
                part = part - tl.sum(x, axis=2)[:, None, :] * _kq_min(bp, g[None, :], ok)[None, :, :]
            acc += tl.sum(part, axis=2)
    tl.store(y_ptr + rm[:, None] * stride_ym + rn[None, :], acc, mask=m_ok[:, None] & n_ok[None, :])


def _prune_kq(configs, named_args, **kwargs):
    """Autotune pruning: ``tl.dot`` needs ``BLOCK_N >= 16``; keep the GEMV configs otherwise."""
    if kwargs.get("USE_DOT"):
        return [c for c in configs if c.kwargs["BLOCK_N"] >= 16] or configs[-1:]
    return configs


_KQ_CONFIGS = [
    triton.Config({"BLOCK_N": bn, "NSB": nsb}, num_warps=nw, num_stages=ns)
    for bn in (4, 8, 16, 32, 64) for nsb in (1, 2) for nw in (4, 8) for ns in (2, 4)
    if bn * nsb * 256 <= 16384
]
_gemv_kq_autotuned = triton.autotune(configs=_KQ_CONFIGS, key=["N", "K", "FMT", "USE_DOT", "BLOCK_M"],
                                     prune_configs_by={"early_config_prune": _prune_kq})(_gemv_kq_kernel)


def weight_format(weight: torch.Tensor, formats: tuple[str, ...] = MATMUL_FORMATS) -> tuple[str, torch.Tensor]:
    """``(format name, tensor the kernel reads)`` of a weight (float32 tensor or :class:`GGMLWeight`).

    Args:
        weight: the weight. formats: the format names the calling kernel reads (default: all of
            :data:`WEIGHT_FORMATS`).

    Raises:
        TritonKernelError: ``triton:weight_type`` for a float tensor that is not float32/float16/bfloat16,
            or a :class:`GGMLWeight` whose format is not in ``formats``.
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


def matmul(x: torch.Tensor, weight: torch.Tensor, *, use_dot: bool | None = None) -> torch.Tensor:
    """``x @ weight.T`` with the weight dequantized in-kernel (module docstring).

    Args:
        x: float32 ``[T, K]`` (moved to the weight's device if needed).
        weight: ``[N, K]`` float32/float16/bfloat16 tensor or :class:`GGMLWeight` (any :data:`MATMUL_FORMATS`;
            block formats need ``K`` a multiple of their block: 32, or 256 for the K-quants).
        use_dot: force the ``tl.dot`` path on/off (tests); default per :func:`launch_config`.

    Returns:
        float32 ``[T, N]`` on the weight's device.

    Raises:
        TritonKernelError: ``triton:dtype`` (x not float32), ``triton:shape`` (x not 2-D, ``K``
            mismatch, or a raw tensor that is not ``K / block`` blocks per row), ``triton:weight_type``
            (unsupported weight dtype or format).
    """
    check_float(x, "matmul input")
    fmt, w = weight_format(weight)
    n, k = int(weight.shape[0]), int(weight.shape[1])
    where = getattr(weight, "wname", "weight")
    if x.dim() != 2 or x.shape[1] != k:
        raise TritonKernelError("shape", f"matmul: x {tuple(x.shape)} does not match weight [N={n}, K={k}]", where=where)
    spec = WEIGHT_FORMATS[fmt]
    if spec.quantized and (k % spec.block or tuple(w.shape) != (n, k // spec.block * spec.block_bytes)):
        raise TritonKernelError("shape", f"matmul: {fmt} weight [N={n}, K={k}] needs K a multiple of {spec.block} stored "
                                f"as {spec.block_bytes} bytes per block, got raw {tuple(w.shape)}", where=where)
    if x.device != w.device:
        x = x.to(w.device)
    x = x.contiguous()
    m = x.shape[0]
    y = torch.empty((m, n), dtype=torch.float32, device=w.device)
    if m == 0:
        return y
    cfg = launch_config(fmt, m, n, k, interpreting())
    kq = spec.kernel == GEMV_KQ
    if use_dot is not None:
        cfg["USE_DOT"] = bool(use_dot)
        if use_dot:
            cfg["BLOCK_M"] = max(cfg["BLOCK_M"], 16)
            if interpreting():
                cfg["BLOCK_N"] = max(16, min(cfg["BLOCK_N"], 32 if kq else 64))
                if kq:
                    cfg["NSB"] = 1
    bm = cfg["BLOCK_M"]
    args = (x, w, y, m, n, k, x.stride(0), w.stride(0), y.stride(0))
    kernel, tuned = (_gemv_kq_kernel, _gemv_kq_autotuned) if kq else (_gemv_kernel, _gemv_autotuned)
    if not cfg["autotune"]:
        grid = (cdiv(n, cfg["BLOCK_N"]), cdiv(m, bm))
        blocks = {"NSB": cfg["NSB"]} if kq else {"BLOCK_K": cfg["BLOCK_K"]}
        kernel[grid](*args, FMT=spec.fmt, USE_DOT=cfg["USE_DOT"], BLOCK_M=bm, BLOCK_N=cfg["BLOCK_N"], **blocks)
    else:
        def grid_of(meta):
            return (cdiv(n, meta["BLOCK_N"]), cdiv(m, bm))

        tuned[grid_of](*args, FMT=spec.fmt, USE_DOT=cfg["USE_DOT"], BLOCK_M=bm)
    return y


__all__ = ["MATMUL_FORMATS", "QK_K", "launch_config", "matmul", "weight_format"]
