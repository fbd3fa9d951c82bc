"""Triton matmul/GEMV with dequantization fused into the weight load: F32, F16, BF16, Q8_0, Q4_0.

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

Q4_K and other K-quants are not implemented here (they are rejected at weight load; see
:mod:`pipeplan.runtime.kernels.triton_weights`).
"""

from __future__ import annotations

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
from pipeplan.runtime.kernels.triton_weights import GGMLWeight

FORMATS = {"F32": 0, "F16": 1, "BF16": 2, "Q8_0": 3, "Q4_0": 4}
"""Weight format name -> the kernel's ``FMT`` constexpr."""


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


def weight_format(weight: torch.Tensor) -> tuple[str, torch.Tensor]:
    """``(format name, tensor the kernel reads)`` of a weight (float32 tensor or :class:`GGMLWeight`).

    Raises:
        TritonKernelError: ``triton:weight_type`` for a float tensor that is not float32/float16/bfloat16.
    """
    if isinstance(weight, GGMLWeight):
        return weight.ggml_type, weight.raw
    fmt = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}.get(weight.dtype)
    if fmt is None:
        raise TritonKernelError("weight_type", f"matmul weight dtype {weight.dtype} is not supported", where="weight")
    return fmt, weight.contiguous()


def launch_config(fmt: str, m: int, n: int, k: int, interpret: bool | None = None) -> dict:
    """Launch meta-parameters of a ``[m, k] x [n, k]^T`` call (used by :func:`matmul` and by the
    ``convert-cplan-to-triton`` lowering). Interpreter: one large tile (fewest programs). GPU:
    ``tl.dot`` for ``m >= 16``; ``BLOCK_N``/``BLOCK_K`` here are the defaults the lowering records,
    ``autotune`` says the runtime retunes them per ``(N, K, FMT, BLOCK_M)``."""
    interp = interpreting() if interpret is None else interpret
    use_dot = (not interp) and m >= 16
    block_m = min(next_pow2(m), 64) if use_dot else (1 if m == 1 else min(next_pow2(m), 16))
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
        weight: ``[N, K]`` float32/float16/bfloat16 tensor or :class:`GGMLWeight` (F16, BF16, Q8_0, Q4_0).
        use_dot: force the ``tl.dot`` path on/off (tests); default per :func:`launch_config`.

    Returns:
        float32 ``[T, N]`` on the weight's device.

    Raises:
        TritonKernelError: ``triton:dtype`` (x not float32), ``triton:shape`` (x not 2-D or ``K``
            mismatch), ``triton:weight_type`` (unsupported weight dtype).
    """
    check_float(x, "matmul input")
    fmt, w = weight_format(weight)
    n, k = int(weight.shape[0]), int(weight.shape[1])
    if x.dim() != 2 or x.shape[1] != k:
        raise TritonKernelError("shape", f"matmul: x {tuple(x.shape)} does not match weight [N={n}, K={k}]",
                                where=getattr(weight, "wname", "weight"))
    if x.device != w.device:
        x = x.to(w.device)
    x = x.contiguous()
    m = x.shape[0]
    y = torch.empty((m, n), dtype=torch.float32, device=w.device)
    if m == 0:
        return y
    cfg = launch_config(fmt, m, n, k)
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


__all__ = ["FORMATS", "launch_config", "matmul", "weight_format"]
