"""Issue 7: each Triton kernel against the torch reference kernel, under TRITON_INTERPRET=1.

Shapes are small and deliberately odd (sizes that are not powers of two nor multiples of the block
size, GQA ratios 1/2/4, every weight format). Tolerances, per kernel / dtype:

* matmul, every format (F32, F16, BF16, Q8_0, Q4_0): the kernel dequantizes to exactly the values
  gguf's ``dequantize`` gives (f16 scale times a small integer is exact in float32), so the only
  difference to ``F.linear`` on the dequantized matrix is float32 summation order:
  ``rtol = atol = 1e-4`` (measured max |diff| <= 1.4e-5 for K <= 160);
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


@pytest.mark.parametrize("fmt", RAW_TYPES)
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


@pytest.mark.parametrize("fmt", RAW_TYPES)
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
    (lambda: weight_from_bytes(np.zeros(144, np.uint8), "Q4_K", (256, 1)), "triton:weight_type"),
    (lambda: quantize_matrix(torch.randn(2, 32), "Q5_0"), "triton:weight_type"),
])
def test_rejections(call, reason):
    """Issue 7: bad calls raise a typed TritonKernelError with a stable code, never a raw traceback."""
    with pytest.raises(PipeplanError) as ei:
        call()
    assert ei.value.code == reason and ei.value.one_line().startswith(f"error[{reason}]")


def test_raw_loader_rejects_kquant_before_mapping(tmp_path):
    """WL-F-4: a matrix type the Triton kernels do not read (Q4_K) is a bind fault at load, not a silent
    dequantize-to-F32 fallback; nothing is mapped (the file does not even need to exist)."""
    sl = TensorSlice("blk.0.attn_q.weight", "Q4_K", (256, 2), 0, 0, 288)
    with pytest.raises(TK.TritonKernelError) as ei:
        load_stage_weights_raw([tmp_path / "absent.gguf"], [sl])
    assert ei.value.code == "triton:weight_type" and ei.value.kind == "bind" and "Q4_K" in str(ei.value)
