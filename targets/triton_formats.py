"""What the Triton kernels read: one table shared by the kernels, the ``cuda-triton`` legality and the
``convert-cplan-to-triton`` lowering (issue 11 item 8: every dtype the target legalizes lowers).

Pure Python (no torch, no triton, no xDSL): the legality imports it while planning, the kernels while
running a stage.

* :data:`WEIGHT_FORMATS`: per ggml type the kernel family and ``FMT`` code of the matmul (and of the
  embedding gather, which reads every format listed), the block geometry (ggml ``GGML_QUANT_SIZES``);
* :data:`OPERANDS`: per kernel op the role of each operand dtype (reads then writes, the order of a
  ``pplan.task``'s ``dtypes``); :data:`ROLE_DTYPES` the plan dtypes each role accepts;
* :func:`unsupported`: why the Triton kernels cannot run a task (``None`` when they can); the target's
  legality and the lowering both call it, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class WeightFormat:
    """One stored weight format.

    Attributes:
        ggml_type: ggml name (``"Q5_K"``); ``dtype``: the plan dtype (``"q5_k"``).
        block, block_bytes: weights per block and bytes per block (1 and the element size for floats).
        kernel: the matmul kernel (``module:function`` under ``pipeplan.runtime.kernels.triton``).
        fmt: that kernel's ``FMT`` constexpr; ``gather_fmt``: the embedding gather's ``FMT``.
    """

    ggml_type: str
    block: int
    block_bytes: int
    kernel: str
    fmt: int
    gather_fmt: int

    @property
    def dtype(self) -> str:
        """Plan dtype name (lower-case ggml name)."""
        return self.ggml_type.lower()

    @property
    def quantized(self) -> bool:
        """Block-quantized (stored as raw bytes), not a float type."""
        return self.block > 1


GEMV = "gemv:_gemv_kernel"
"""F32/F16/BF16 and the 32-weight block formats (in-loop dequantization)."""
GEMV_KQ = "gemv:_gemv_kq_kernel"
"""The 256-weight K-quant super-block formats."""

WEIGHT_FORMATS: dict[str, WeightFormat] = {f.ggml_type: f for f in (
    WeightFormat("F32", 1, 4, GEMV, 0, 0),
    WeightFormat("F16", 1, 2, GEMV, 1, 1),
    WeightFormat("BF16", 1, 2, GEMV, 2, 2),
    WeightFormat("Q8_0", 32, 34, GEMV, 3, 3),
    WeightFormat("Q4_0", 32, 18, GEMV, 4, 4),
    WeightFormat("Q4_1", 32, 20, GEMV, 5, 5),
    WeightFormat("Q5_0", 32, 22, GEMV, 6, 6),
    WeightFormat("Q5_1", 32, 24, GEMV, 7, 7),
    WeightFormat("Q4_K", 256, 144, GEMV_KQ, 0, 8),
    WeightFormat("Q5_K", 256, 176, GEMV_KQ, 1, 9),
    WeightFormat("Q6_K", 256, 210, GEMV_KQ, 2, 10),
)}
"""ggml type -> :class:`WeightFormat`: every matrix format the Triton matmul and embedding gather read
(issue 12 item 4: the CPU's types). Layouts: ggml ``block_q8_0`` ... ``block_q6_K`` (ggml-common.h)."""

RAW_TYPES: tuple[str, ...] = tuple(WEIGHT_FORMATS)
"""ggml types a Triton stage keeps as stored (matrices); other matrix types are a ``bind`` fault."""

PLAN_WEIGHT_DTYPES: tuple[str, ...] = tuple(f.dtype for f in WEIGHT_FORMATS.values())
"""The same types as plan dtypes (``f32`` ... ``q6_k``)."""

ROLE_DTYPES: dict[str, tuple[str, ...]] = {
    "act": ("f32",),          # activations: the kernels compute in float32
    "ids": ("i32", "i64"),    # token ids of the gather
    "token": ("i32", "i64"),  # argmax result
    "weight": PLAN_WEIGHT_DTYPES,  # matmul weight, embedding table
    "vec": ("f32",),          # 1-D weights (norm weights, biases; llama.cpp keeps them F32)
    "table": ("f32",),        # rope table (float32 (cos, sin) pairs)
    "cache": ("f32",),        # KV cache (float32 on the Triton target)
    "any": ("f32", "i32", "i64"),  # edge transfers copy bytes
}
"""Operand role -> the plan dtypes the Triton kernels read for it."""

OPERANDS: dict[str, tuple[str, ...]] = {
    "embedding_gather": ("ids", "weight", "act"),
    "rms_norm": ("act", "vec", "act"),
    "head_rms_norm": ("act", "vec", "act"),
    "matmul": ("act", "weight", "act"),
    "rope": ("act", "table", "act"),
    "kv_cache_write": ("act", "act", "cache", "cache"),
    "attention": ("act", "cache", "cache", "act"),
    "silu_mul": ("act", "act", "act"),
    "gelu_mul": ("act", "act", "act"),
    "add": ("act", "act", "act"),
    "add_bias": ("act", "vec", "act"),
    "argmax": ("act", "token"),
    "last_row": ("act", "act"),
    "send": ("any", "any"),
    "recv": ("any", "any"),
}
"""Portable op -> role of each operand dtype (reads then writes, as in ``pplan.task`` ``dtypes``)."""

TC_WEIGHTS: tuple[str, ...] = ("f32", "f16", "bf16")
"""Weight dtypes of the tensor-core matmul implementation (``triton.matmul_tc``: ``tl.dot`` on float tiles)."""
TC_SHAPE_MULTIPLE = 16
"""``triton.matmul_tc`` needs ``N`` and ``K`` multiples of this (its 16-wide ``tl.dot`` tiles)."""

KERNEL_OPS: tuple[str, ...] = tuple(o for o in OPERANDS if o not in ("last_row", "send", "recv"))
"""Ops the Triton target runs as kernel launches (``last_row`` is a view, ``send``/``recv`` copies)."""

DTYPES: tuple[str, ...] = tuple(dict.fromkeys(d for ds in ROLE_DTYPES.values() for d in ds))
"""Every plan dtype some Triton operand accepts (the target's ``dtype:`` capabilities)."""


ROPE_MODES = {"norm": 0, "neox": 1}
"""Rope ``mode`` attribute -> the rope kernel's ``NEOX`` argument (GGML_ROPE_TYPE_NORM / _NEOX pairing)."""

QK_K = 256
"""Weights per K-quant super-block (ggml ``QK_K``)."""


def next_pow2(n: int) -> int:
    """Smallest power of two ``>= max(n, 1)`` (Triton block sizes must be powers of two)."""
    n = max(int(n), 1)
    return 1 << (n - 1).bit_length()


INTERPRET_TILE = 1 << 19
"""Elements of one matmul tile under the interpreter, whose cost is mostly per program and per op (not per
element): a few large programs (Triton caps a block at 2**20 elements)."""


def _pow2_divisor(n: int, cap: int) -> int:
    """Largest power of two ``<= cap`` dividing ``n`` (``n > 0``)."""
    p = 1
    while p * 2 <= cap and n % (p * 2) == 0:
        p *= 2
    return p


def launch_config(fmt: str, m: int, n: int, k: int, interpret: bool) -> dict:
    """Launch meta-parameters of a ``[m, k] x [n, k]^T`` matmul of weight format ``fmt`` (ggml name), used
    by the kernel and by the ``convert-cplan-to-triton`` lowering (``interpret=False``).

    GPU: ``tl.dot`` for ``m >= 16``; ``BLOCK_N``/``BLOCK_K`` are the defaults the lowering records,
    ``autotune`` says the runtime retunes them per ``(N, K, FMT, BLOCK_M)``. Interpreter: tiles of about
    :data:`INTERPRET_TILE` elements, a K step that divides ``K`` when it can (no masked tail). K-quants
    (kernel :data:`GEMV_KQ`) step ``NSB`` super-blocks of 256 (key ``NSB`` instead of ``BLOCK_K``)."""
    use_dot = (not interpret) and m >= 16
    block_m = min(next_pow2(m), 64) if use_dot else (1 if m == 1 else min(next_pow2(m), 16))
    if WEIGHT_FORMATS[fmt].kernel == GEMV_KQ:
        if not interpret:
            return {"BLOCK_M": block_m, "USE_DOT": use_dot, "BLOCK_N": 32 if use_dot else min(16, next_pow2(n)),
                    "NSB": 1, "autotune": True}
        nsb = _pow2_divisor(max(k // QK_K, 1), 4)
        bn = min(next_pow2(n), max(16, INTERPRET_TILE // (nsb * QK_K * block_m)))
        return {"BLOCK_M": block_m, "USE_DOT": False, "BLOCK_N": bn, "NSB": nsb, "autotune": False}
    if not interpret:
        bn, bk = (64, 64) if use_dot else (min(16, next_pow2(n)), 256)
        return {"BLOCK_M": block_m, "USE_DOT": use_dot, "BLOCK_N": bn, "BLOCK_K": bk, "autotune": True}
    bk = max(_pow2_divisor(k, 256), 32) if k % 32 == 0 else min(max(next_pow2(k), 32), 256)
    bn = min(next_pow2(n), max(16, INTERPRET_TILE // (bk * block_m)))
    return {"BLOCK_M": block_m, "USE_DOT": False, "BLOCK_N": bn, "BLOCK_K": bk, "autotune": False}


def attention_config(t: int, h: int, hkv: int, hd_k: int, hd_v: int, n_keys: int, interpret: bool) -> dict:
    """Block sizes of an attention launch (kernel and lowering): ``G`` query heads per KV head,
    ``BLOCK_M`` query positions per program, ``BLOCK_R`` padded rows (``>= 16`` for ``tl.dot``),
    ``BLOCK_N`` keys per tile, ``BLOCK_DK``/``BLOCK_DV`` padded key/value head dims; under the interpreter
    one program per KV head."""
    g = h // hkv
    if interpret:
        bm = min(next_pow2(t), 64)
        bn = min(max(next_pow2(n_keys), 16), 256)
    else:
        bm = max(1, min(next_pow2(t), max(1, 64 // next_pow2(g))))
        bn = 64
    return {"G": g, "BLOCK_M": bm, "BLOCK_R": max(16, next_pow2(bm * g)), "BLOCK_N": bn,
            "BLOCK_DK": max(16, next_pow2(hd_k)), "BLOCK_DV": max(16, next_pow2(hd_v))}


def weight_format(dtype: str) -> WeightFormat | None:
    """The :class:`WeightFormat` of a plan dtype (``"q6_k"``) or ggml name (``"Q6_K"``); None if unread."""
    return WEIGHT_FORMATS.get(dtype.upper())


def unsupported(op: str, dtypes: Sequence[str], shape: Sequence[int], impl: str = "") -> str | None:
    """Why the Triton kernels cannot run a task (None when they can).

    Args:
        op: portable op. dtypes: operand dtypes, reads then writes. shape: the task's work shape
            (``matmul``: ``[M, N, K]``). impl: the implementation (``triton.matmul_tc`` adds its
            :data:`TC_WEIGHTS` and :data:`TC_SHAPE_MULTIPLE` constraints).

    Returns:
        a phrase naming the operand (``"weight dtype q2_k (Triton matmul reads f32, ..., q6_k)"``,
        ``"q4_k weight with row length 64 (not a multiple of 256)"``; the row length is ``K`` of a matmul,
        ``D`` of a gather), or None.
    """
    roles = OPERANDS.get(op)
    if roles is None:
        return f"op {op}"
    if len(dtypes) != len(roles):
        return f"{op} with {len(dtypes)} operands (the Triton {op} takes {len(roles)}: {', '.join(roles)})"
    for role, d in zip(roles, dtypes):
        ok = ROLE_DTYPES[role]
        if d not in ok:
            return f"{_ROLE_NAMES[role]} dtype {d} (Triton {op} reads {', '.join(ok)})"
    row = {"matmul": 2, "embedding_gather": 1}.get(op)
    if row is not None and len(shape) > row:
        fmt = weight_format(dtypes[1])
        if fmt is not None and shape[row] % fmt.block:
            return f"{fmt.dtype} weight with row length {shape[row]} (not a multiple of {fmt.block})"
    if impl == "triton.matmul_tc":
        if dtypes[1] not in TC_WEIGHTS:
            return f"weight dtype {dtypes[1]} on the tensor-core matmul (it reads {', '.join(TC_WEIGHTS)})"
        if any(d % TC_SHAPE_MULTIPLE for d in shape[1:]):
            return f"tensor-core matmul of shape {list(shape)} (N and K must be multiples of {TC_SHAPE_MULTIPLE})"
    return None


_ROLE_NAMES = {"act": "activation", "weight": "weight", "ids": "token ids", "token": "token", "vec": "vector weight",
               "table": "rope table", "cache": "KV cache", "any": "edge"}


__all__ = ["DTYPES", "GEMV", "GEMV_KQ", "KERNEL_OPS", "OPERANDS", "PLAN_WEIGHT_DTYPES", "QK_K", "INTERPRET_TILE", "ROPE_MODES", "RAW_TYPES",
           "ROLE_DTYPES", "TC_SHAPE_MULTIPLE", "TC_WEIGHTS", "WEIGHT_FORMATS", "WeightFormat", "attention_config", "launch_config", "next_pow2",
           "unsupported", "weight_format"]
