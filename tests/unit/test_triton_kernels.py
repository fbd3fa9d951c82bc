"""Issue 7: each Triton kernel against the torch reference kernel, under TRITON_INTERPRET=1.

Shapes are small and deliberately odd (sizes that are not powers of two nor multiples of the block
size, GQA ratios 1/2/4, every weight format). Tolerances, per kernel / dtype:

* matmul, every format (F32, F16, BF16, Q8_0, Q4_0): the kernel dequantizes to exactly the values
  gguf's ``dequantize`` gives (f16 scale times a small integer is exact in float32), so the only
  difference to ``F.linear`` on the dequantized matrix is float32 summation order:
  ``rtol = atol = 1e-4`` (measured max |diff| <= 1.4e-5 for K <= 160);
* matmul, Q4_K (random bytes, fp16 d/dmin in [1e-3, 1e-2], so |w| <= 9.5 and |y| reaches ~170): the
  GEMV path sums ``x*q`` per 32-value sub-block and applies ``d*sc`` / ``dmin*m`` afterwards (another
  float32 summation order than ``x @ dequant(W).T``), so the bound is relative to the sum of magnitudes:
  ``|got - want| <= 1e-6 * (|x| @ |W|.T)`` elementwise against a float64 product (measured <= 4e-8 of
  it, i.e. max |diff| <= 2e-5); a hand-built block through unit vectors is decoded bit-exactly;
* embedding_gather (every format), kv_cache_write, argmax, add: exact;
* rms_norm, silu_mul, rope: ``rtol = 1e-5, atol = 1e-6`` (measured <= 2.4e-7);
* attention (online softmax vs SDPA / bmm): ``rtol = 1e-5, atol = 2e-6`` (measured <= 3.6e-7).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pipeplan.errors import PipeplanError
from pipeplan.plan_types import TensorSlice
from pipeplan.runtime.kernels import reference as R
from pipeplan.runtime.kernels import triton as TK
from pipeplan.runtime.kernels.triton_weights import (
    RAW_TYPES,
    GGMLWeight,
    load_stage_weights_raw,
    quantize_matrix,
    weight_from_bytes,
)

MATMUL_TOL = {"F32": 1e-4, "F16": 1e-4, "BF16": 1e-4, "Q8_0": 1e-4, "Q4_0": 1e-4}
TIGHT = {"rtol": 1e-5, "atol": 1e-6}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _dense(w: torch.Tensor) -> torch.Tensor:
    return w.dequantized() if isinstance(w, GGMLWeight) else w


def test_interpreter_and_table():
    """Issue 7: without a GPU the kernels run under the interpreter; the table has the reference's names."""
    assert TK.interpreting() and TK.device().type == "cpu"
    assert set(TK.KERNELS) == set(R.KERNELS)
    assert TK.KERNELS["matmul"] is TK.matmul and TK.KERNELS["matmul"] is not R.KERNELS["matmul"]


GENERIC = [f for f in RAW_TYPES if f != "Q4_K"]
"""Formats of the generic GEMV kernel and the gather (Q4_K has its own kernel and tests below; gguf cannot
quantize to it)."""


@pytest.mark.parametrize("fmt", GENERIC)
@pytest.mark.parametrize("m,n,k", [(1, 37, 64), (3, 100, 96), (5, 7, 160)])
def test_matmul_formats(fmt, m, n, k):
    """Issue 7: fused-dequant GEMV/matmul equals x @ dequant(W).T for F32/F16/BF16/Q8_0/Q4_0 at odd N and
    K that is not a multiple of the K block (Q formats: multiples of 32 only, as ggml requires)."""
    g = _gen(m * 1000 + n)
    w = quantize_matrix(torch.randn(n, k, generator=g), fmt, name=f"w{fmt}")
    x = torch.randn(m, k, generator=g)
    want = R.matmul(x, _dense(w))
    got = TK.matmul(x, w)
    assert got.shape == (m, n) and got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=MATMUL_TOL[fmt], atol=MATMUL_TOL[fmt])
    if fmt != "F32":  # the quantized matrix really is a different matrix: the kernel did dequantize it
        assert isinstance(w, GGMLWeight) and w.nbytes_raw < n * k * 4


@pytest.mark.parametrize("fmt", ["F16", "Q8_0", "Q4_0"])
def test_matmul_dot_path(fmt):
    """Issue 7: the tl.dot (prefill, T >= 16 on a GPU) path gives the same result as the GEMV path."""
    g = _gen(7)
    w = quantize_matrix(torch.randn(24, 96, generator=g), fmt)
    x = torch.randn(17, 96, generator=g)
    torch.testing.assert_close(TK.matmul(x, w, use_dot=True), R.matmul(x, _dense(w)), rtol=1e-4, atol=1e-4)


def test_matmul_reads_raw_layout():
    """Issue 7: Q4_0 nibble order (low nibble = weight j, high = j + 16) and Q8_0's f16 scale are decoded
    as ggml defines them: a hand-built block dotted with unit vectors returns each weight."""
    d = np.float16(0.5)
    q4 = np.arange(16, dtype=np.uint8) | (np.arange(16, dtype=np.uint8)[::-1] << 4)
    blk4 = np.concatenate([np.frombuffer(d.tobytes(), np.uint8), q4])
    w4 = weight_from_bytes(blk4, "Q4_0", (32, 1))
    want4 = 0.5 * (np.concatenate([np.arange(16), np.arange(16)[::-1]]) - 8.0)
    got4 = TK.matmul(torch.eye(32), w4)[:, 0].numpy()
    np.testing.assert_array_equal(got4, want4.astype(np.float32))
    q8 = np.arange(-16, 16, dtype=np.int8).view(np.uint8)
    w8 = weight_from_bytes(np.concatenate([np.frombuffer(d.tobytes(), np.uint8), q8]), "Q8_0", (32, 1))
    np.testing.assert_array_equal(TK.matmul(torch.eye(32), w8)[:, 0].numpy(), 0.5 * np.arange(-16, 16, dtype=np.float32))


@pytest.mark.parametrize("fmt", GENERIC)
def test_embedding_gather_formats(fmt):
    """Issue 7: embedding gather of every table format equals the rows of the dequantized table (exact)."""
    table = quantize_matrix(torch.randn(11, 96, generator=_gen(3)), fmt)
    ids = torch.tensor([3, 0, 10, 3, 7])
    assert torch.equal(TK.embedding_gather(ids, table), R.embedding_gather(ids, _dense(table)))


@pytest.mark.parametrize("t,d", [(1, 64), (5, 70), (3, 1000)])
def test_rms_norm(t, d):
    """Issue 7: RMS norm of odd widths matches the reference."""
    g = _gen(d)
    x, w = torch.randn(t, d, generator=g), torch.randn(d, generator=g)
    torch.testing.assert_close(TK.rms_norm(x, w, eps=1e-5), R.rms_norm(x, w, eps=1e-5), **TIGHT)


@pytest.mark.parametrize("n_heads,head_dim,rope_dim", [(6, 10, 10), (6, 10, 8), (3, 12, 4)])
@pytest.mark.parametrize("start_pos,t", [(0, 5), (5, 1), (9, 3)])
def test_rope_norm_mode(n_heads, head_dim, rope_dim, start_pos, t):
    """Issue 7: NORM-mode rope (adjacent pairs; partial rope_dim passes the tail through) matches the reference."""
    table = R.rope_table(16, rope_dim, 10000.0)
    x = torch.randn(t, n_heads * head_dim, generator=_gen(t + start_pos))
    kw = {"n_heads": n_heads, "head_dim": head_dim, "rope_dim": rope_dim}
    torch.testing.assert_close(TK.rope(x, table, start_pos, **kw), R.rope(x, table, start_pos, **kw), **TIGHT)


@pytest.mark.parametrize("h,hkv", [(4, 4), (4, 2), (8, 2)])
@pytest.mark.parametrize("hd", [12, 16])
def test_attention_prefill_decode_gqa(h, hkv, hd):
    """Issue 7: causal prefill (start 0), decode (T=1) and a chunk after cached positions, GQA ratios
    1/2/4, over a KV cache written by the Triton kv_cache_write (equal to the reference's cache)."""
    s = 24
    g = _gen(h * 100 + hkv * 10 + hd)
    caches = [torch.zeros(s, hkv, hd) for _ in range(4)]
    for sp, t in [(0, 7), (7, 1), (8, 3)]:
        k, v, q = torch.randn(t, hkv, hd, generator=g), torch.randn(t, hkv * hd, generator=g), torch.randn(t, h, hd,
                                                                                                          generator=g)
        assert TK.kv_cache_write(k, v, caches[0], caches[1], sp) is None
        R.kv_cache_write(k, v, caches[2], caches[3], sp)
        assert torch.equal(caches[0], caches[2]) and torch.equal(caches[1], caches[3])
        got = TK.attention(q, caches[0], caches[1], sp)
        torch.testing.assert_close(got, R.attention(q, caches[2], caches[3], sp), rtol=1e-5, atol=2e-6)


def test_silu_mul_add_on_split_views():
    """Issue 7: silu_mul and add on column views (what split returns after a fused matmul)."""
    both = torch.randn(3, 2 * 173, generator=_gen(5))
    gate, up = R.split(both, sizes=(173, 173))
    assert not gate.is_contiguous()
    torch.testing.assert_close(TK.silu_mul(gate, up), R.silu_mul(gate.clone(), up), **TIGHT)
    assert torch.equal(TK.add(gate, up), R.add(gate, up))


def test_argmax_ties_and_width():
    """Issue 7: argmax per row; ties resolve to the lowest index like torch.argmax; odd vocab width."""
    logits = torch.randn(3, 517, generator=_gen(9))
    logits[1, 100] = logits[1, 300] = 50.0
    logits[2, :] = 1.0
    got = TK.argmax(logits)
    assert got.dtype == torch.int64 and torch.equal(got, R.argmax(logits))
    assert got.tolist()[1:] == [100, 0]


def test_ggml_weight_under_reference_kernels():
    """Issue 7: a GGMLWeight bound to the reference table dequantizes on use (same weights for both tables)."""
    w = quantize_matrix(torch.randn(9, 64, generator=_gen(2)), "Q8_0")
    x = torch.randn(2, 64, generator=_gen(3))
    assert w.shape == (9, 64) and w.dtype == torch.float32
    torch.testing.assert_close(R.matmul(x, w), x @ w.dequantized().T)


# --------------------------------------------------------------------------- rejections
@pytest.mark.parametrize("call,reason", [
    (lambda: TK.matmul(torch.randn(2, 64, dtype=torch.float64), torch.randn(3, 64)), "triton:dtype"),
    (lambda: TK.matmul(torch.randn(2, 63), torch.randn(3, 64)), "triton:shape"),
    (lambda: TK.matmul(torch.randn(2, 64), torch.randn(3, 64).to(torch.int8)), "triton:weight_type"),
    (lambda: TK.embedding_gather(torch.tensor([[1]]), torch.randn(3, 4)), "triton:shape"),
    (lambda: TK.embedding_gather(torch.tensor([1.0]), torch.randn(3, 4)), "triton:dtype"),
    (lambda: TK.rms_norm(torch.randn(2, 5), torch.randn(4), eps=1e-5), "triton:shape"),
    (lambda: TK.rope(torch.randn(2, 12), R.rope_table(4, 6, 1e4), 3, n_heads=2, head_dim=6, rope_dim=6),
     "triton:shape"),
    (lambda: TK.rope(torch.randn(2, 12), R.rope_table(8, 6, 1e4), 0, n_heads=2, head_dim=6, rope_dim=5),
     "triton:shape"),
    (lambda: TK.kv_cache_write(torch.randn(2, 2, 4), torch.randn(2, 8), torch.zeros(2, 2, 4), torch.zeros(2, 2, 4), 1),
     "triton:shape"),
    (lambda: TK.attention(torch.randn(1, 3, 4), torch.zeros(4, 2, 4), torch.zeros(4, 2, 4), 0), "triton:shape"),
    (lambda: TK.silu_mul(torch.randn(2, 3), torch.randn(2, 4)), "triton:shape"),
    (lambda: TK.add(torch.randn(2, 3), torch.randn(2, 3, dtype=torch.float16)), "triton:dtype"),
    (lambda: TK.argmax(torch.randn(5)), "triton:shape"),
    (lambda: weight_from_bytes(np.zeros(10, np.uint8), "Q8_0", (32, 1)), "triton:weight_layout"),
    (lambda: weight_from_bytes(np.zeros(210, np.uint8), "Q6_K", (256, 1)), "triton:weight_type"),
    (lambda: quantize_matrix(torch.randn(2, 32), "Q5_0"), "triton:weight_type"),
    (lambda: quantize_matrix(torch.randn(2, 256), "Q4_K"), "triton:weight_type"),
])
def test_rejections(call, reason):
    """Issue 7: bad calls raise a typed TritonKernelError with a stable code, never a raw traceback."""
    with pytest.raises(PipeplanError) as ei:
        call()
    assert ei.value.code == reason and ei.value.one_line().startswith(f"error[{reason}]")


def test_raw_loader_rejects_kquant_before_mapping(tmp_path):
    """WL-F-4: a matrix type the Triton kernels do not read (Q6_K) is a bind fault at load, not a silent
    dequantize-to-F32 fallback; nothing is mapped (the file does not even need to exist)."""
    sl = TensorSlice("blk.0.attn_q.weight", "Q6_K", (256, 2), 0, 0, 420)
    with pytest.raises(TK.TritonKernelError) as ei:
        load_stage_weights_raw([tmp_path / "absent.gguf"], [sl])
    assert ei.value.code == "triton:weight_type" and ei.value.kind == "bind" and "Q6_K" in str(ei.value)


# --------------------------------------------------------------------------- Q4_K
Q4K_TOL = 1e-6
"""Q4_K matmul: ``|got - want| <= Q4K_TOL * (|x| @ |W|.T)`` elementwise (module docstring)."""


def _q4k_raw(n: int, k: int, seed: int) -> np.ndarray:
    """Random Q4_K bytes of an ``[n, k]`` matrix (ggml ``(k, n)``): per 144-byte super-block fp16 d and dmin
    in [1e-3, 1e-2] (sane scales, as the dequant tests make them) and random bytes for scales[12] and qs[128]."""
    rng = np.random.default_rng(seed)
    nb = n * (k // 256)
    blocks = rng.integers(0, 256, (nb, 144), dtype=np.uint8)
    for off in (0, 2):  # d, dmin
        blocks[:, off:off + 2] = rng.uniform(1e-3, 1e-2, nb).astype(np.float16).view(np.uint8).reshape(nb, 2)
    return blocks.reshape(-1)


def _gguf_q4k(raw: np.ndarray, n: int) -> torch.Tensor:
    """The reference: gguf.quants' Q4_K dequantization of ``raw`` as a float32 ``[n, k]`` tensor."""
    from gguf import GGMLQuantizationType
    from gguf import quants as gq

    return torch.from_numpy(np.array(gq.dequantize(raw.reshape(n, -1), GGMLQuantizationType.Q4_K), np.float32))


def _assert_q4k_close(x: torch.Tensor, got: torch.Tensor, dense: torch.Tensor) -> None:
    want = x.double() @ dense.double().T
    bound = Q4K_TOL * (x.abs().double() @ dense.abs().double().T)
    err = (got.double() - want).abs()
    assert got.dtype == torch.float32 and got.shape == want.shape
    assert bool((err <= bound).all()), f"max err {err.max().item():.3g}, worst err/bound {(err / bound).max().item():.3g}"


@pytest.mark.parametrize("t,n,k", [(1, 37, 256), (3, 37, 512), (1, 13, 512), (3, 5, 256)])
def test_matmul_q4k_matches_gguf_dequant(t, n, k):
    """Issue 7 (Q4_K): the fused-dequant Q4_K GEMV on raw super-blocks (random qs/scales bytes, sane fp16
    d/dmin) equals x @ dequantize(raw).T with gguf.quants as the reference, at odd N, K = 256 and 512
    (one and two super-blocks per row) and T = 1 and 3."""
    raw = _q4k_raw(n, k, seed=t * 1000 + n + k)
    w = weight_from_bytes(raw, "Q4_K", (k, n), name="wq4k")
    assert isinstance(w, GGMLWeight) and w.ggml_type == "Q4_K" and w.nbytes_raw == n * k // 256 * 144
    dense = _gguf_q4k(raw, n)
    assert torch.equal(w.dequantized(), dense)  # the wrapper's own (reference-kernel) view is gguf's
    x = torch.randn(t, k, generator=_gen(k + t))
    _assert_q4k_close(x, TK.matmul(x, w), dense)


def test_matmul_q4k_dot_path():
    """Issue 7 (Q4_K): the tl.dot path (prefill, T >= 16 on a GPU; dequantized [BLOCK_N, 256] tiles) equals
    the gguf reference too (T = 17, odd N, two super-blocks)."""
    raw = _q4k_raw(19, 512, seed=3)
    w = weight_from_bytes(raw, "Q4_K", (512, 19))
    x = torch.randn(17, 512, generator=_gen(17))
    _assert_q4k_close(x, TK.matmul(x, w, use_dot=True), _gguf_q4k(raw, 19))


def _scale_min_k4(s: bytes, j: int) -> tuple[int, int]:
    """ggml get_scale_min_k4 (ggml-quants.c), transcribed independently of the kernel."""
    if j < 4:
        return s[j] & 63, s[j + 4] & 63
    return (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4)


def test_matmul_q4k_hand_built_block_bit_exact():
    """Issue 7 (Q4_K): one hand-built super-block dotted with the 256 unit vectors returns each weight
    bit-exactly as ggml's dequantize_row_q4_K defines it (and as gguf.quants gives): d/dmin f16, the 6-bit
    scales and mins of every sub-block -- j < 4 (low 6 bits of bytes j and j+4) and j >= 4 (nibbles of
    byte j+4 joined with the top 2 bits of bytes j-4 and j, all set here) -- and the nibble order (byte
    32g+i: low nibble = value 64g+i, high nibble = value 64g+32+i)."""
    d, dmin = np.float16(0.0123), np.float16(0.0456)
    scales = bytes([0xC5, 0x4A, 0x87, 0x7F, 0xD1, 0x62, 0xAB, 0x4C, 0x9E, 0x37, 0xF0, 0x5B])
    qs = bytes((7 * b + 3) % 256 for b in range(128))
    block = d.tobytes() + dmin.tobytes() + scales + qs
    raw = np.frombuffer(block, np.uint8)
    sm = [_scale_min_k4(scales, j) for j in range(8)]
    assert all(scales[j - 4] >> 6 and scales[j] >> 6 for j in range(4, 8))  # j >= 4 uses both top-bit pairs
    assert len(set(sm)) == 8  # every sub-block has its own (scale, min)
    want = np.empty(256, np.float32)
    for v in range(256):
        g, h, i = v // 64, (v // 32) % 2, v % 32
        q = (qs[32 * g + i] >> (4 * h)) & 15
        sc, m = sm[2 * g + h]
        want[v] = (np.float32(d) * np.float32(sc)) * np.float32(q) - np.float32(dmin) * np.float32(m)
    np.testing.assert_array_equal(_gguf_q4k(raw, 1)[0].numpy(), want)
    w = weight_from_bytes(raw, "Q4_K", (256, 1))
    got = TK.matmul(torch.eye(256), w)[:, 0].numpy()
    np.testing.assert_array_equal(got, want)


def test_q4k_raw_loader_keeps_blocks(tmp_path):
    """WL-L-1 / issue 7 (Q4_K): a stage's Q4_K matrix is mapped from its byte range and kept as raw
    super-blocks (no dequantize-to-F32 at load); the GEMV on it matches gguf's dequantization."""
    raw = _q4k_raw(3, 512, seed=11)
    path = tmp_path / "w.bin"
    path.write_bytes(b"\x00" * 64 + raw.tobytes())
    sl = TensorSlice("blk.0.ffn_down.weight", "Q4_K", (512, 3), 0, 64, raw.size)
    w = load_stage_weights_raw([path], [sl])["blk.0.ffn_down.weight"]
    assert isinstance(w, GGMLWeight) and w.ggml_type == "Q4_K" and w.raw.dtype == torch.uint8
    assert torch.equal(w.raw.reshape(-1), torch.from_numpy(raw))
    x = torch.randn(1, 512, generator=_gen(1))
    _assert_q4k_close(x, TK.matmul(x, w), _gguf_q4k(raw, 3))


@pytest.mark.parametrize("call,code", [
    (lambda: weight_from_bytes(np.zeros(72, np.uint8), "Q4_K", (128, 1)), "dequant"),
    (lambda: GGMLWeight(torch.zeros(1, 72, dtype=torch.uint8), "Q4_K", (1, 128)), "triton:weight_layout"),
    (lambda: GGMLWeight(torch.zeros(2, 145, dtype=torch.uint8), "Q4_K", (2, 256)), "triton:weight_layout"),
    (lambda: TK.embedding_gather(torch.tensor([0]), weight_from_bytes(_q4k_raw(2, 256, 0), "Q4_K", (256, 2))),
     "triton:weight_type"),
])
def test_q4k_rejections(call, code):
    """Issue 7 (Q4_K): a row length K that is not a multiple of 256 is refused with a typed error when the
    bytes are wrapped (gguf's block rule) and when the raw tensor is built by hand; a wrong byte layout too;
    the embedding gather, which has no Q4_K path, refuses a Q4_K table (typed, kind bind) rather than
    misreading it."""
    with pytest.raises(PipeplanError) as ei:
        call()
    assert ei.value.code == code and ei.value.one_line().startswith(f"error[{code}]")
    if code.startswith("triton:"):
        assert ei.value.kind == "bind" and "Q4_K" in str(ei.value)
