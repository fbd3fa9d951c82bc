"""Issues 7 and 12.4: each Triton kernel against the torch reference kernel, under TRITON_INTERPRET=1.

Shapes are small and deliberately odd (sizes that are not powers of two nor multiples of the block
size, GQA ratios 1/2/4, every weight format). Tolerances, per kernel / dtype:

* matmul, the 32-weight formats (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1; weights made by
  ``gguf.quants.quantize``): the kernel dequantizes to exactly the values gguf's ``dequantize`` gives,
  so the only difference to ``F.linear`` on the dequantized matrix is float32 summation order:
  ``rtol = atol = 1e-4`` (measured max |diff| <= 1.4e-5 for K <= 160);
* matmul, K-quants (Q4_K, Q5_K, Q6_K: random bytes, fp16 d/dmin in [1e-3, 1e-2], so |w| reaches ~10-40
  and |y| ~170-700): the GEMV path sums ``x*q`` per 16-weight group and applies the group's scale / min
  afterwards (another float32 summation order than ``x @ dequant(W).T``), so the bound is relative to
  the sum of magnitudes: ``|got - want| <= 1e-6 * (|x| @ |W|.T)`` elementwise against a float64 product
  (measured <= 3e-8 of it); a hand-built block of each through unit vectors is decoded bit-exactly;
* embedding_gather (every format, with and without ``scale``), kv_cache_write, argmax, add, add_bias:
  exact;
* rms_norm, head_rms_norm, silu_mul, gelu_mul, rope (norm and neox): ``rtol = 1e-5, atol = 1e-6``
  (measured <= 4.8e-7);
* attention (online softmax vs SDPA / bmm; causal and sliding-window, explicit scale, hd_k != hd_v):
  ``rtol = 1e-5, atol = 2e-6`` (measured <= 3.6e-7).

The kernels the contract adds (kernel-contract: ``head_rms_norm``, ``gelu_mul``, ``add_bias``, rope
``mode``, attention ``scale``/``window``, gather ``scale``) are checked against the reference table's
functions of the same names, and against expected values written from the contract's definitions
(``_contract_*``), so a change of either side shows.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
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

MATMUL_TOL = 1e-4
"""Matmul of the 32-weight formats: rtol = atol (module docstring)."""
TIGHT = {"rtol": 1e-5, "atol": 1e-6}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _dense(w: torch.Tensor) -> torch.Tensor:
    return w.dequantized() if isinstance(w, GGMLWeight) else w


CONTRACT_KERNELS = ("embedding_gather", "rms_norm", "matmul", "split", "rope", "kv_cache_write", "attention",
                    "silu_mul", "add", "last_row", "argmax", "head_rms_norm", "gelu_mul", "add_bias")
"""Every kernel name of the kernel contract (existing and new)."""


def test_interpreter_and_table():
    """Issue 7: without a GPU the kernels run under the interpreter; the table has the reference's names, and
    the package has a Triton function for every kernel of the contract (issue 12.4: the new ones too)."""
    assert TK.interpreting() and TK.device().type == "cpu"
    assert set(TK.KERNELS) == set(R.KERNELS)
    assert TK.KERNELS["matmul"] is TK.matmul and TK.KERNELS["matmul"] is not R.KERNELS["matmul"]
    assert all(callable(getattr(TK, name)) for name in CONTRACT_KERNELS)
    assert set(RAW_TYPES) == {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"}


KQUANTS = ["Q4_K", "Q5_K", "Q6_K"]
"""The 256-weight super-block formats (gguf has no quantizer for them: the tests build their bytes)."""
GENERIC = [f for f in RAW_TYPES if f not in KQUANTS]
"""Formats gguf can quantize: the generic GEMV kernel's (F32 ... Q5_1)."""


@pytest.mark.parametrize("fmt", GENERIC)
@pytest.mark.parametrize("m,n,k", [(1, 37, 64), (3, 100, 96), (5, 7, 160)])
def test_matmul_formats(fmt, m, n, k):
    """Issues 7, 12.4: fused-dequant GEMV/matmul equals x @ dequant(W).T (gguf.quants dequantization) for
    F32/F16/BF16/Q8_0/Q4_0/Q4_1/Q5_0/Q5_1 at odd N and K that is not a multiple of the K block (Q formats:
    multiples of 32 only, as ggml requires)."""
    g = _gen(m * 1000 + n)
    w = quantize_matrix(torch.randn(n, k, generator=g), fmt, name=f"w{fmt}")
    x = torch.randn(m, k, generator=g)
    want = R.matmul(x, _dense(w))
    got = TK.matmul(x, w)
    assert got.shape == (m, n) and got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=MATMUL_TOL, atol=MATMUL_TOL)
    if fmt != "F32":  # the quantized matrix really is a different matrix: the kernel did dequantize it
        assert isinstance(w, GGMLWeight) and w.nbytes_raw < n * k * 4


@pytest.mark.parametrize("fmt", ["F16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"])
def test_matmul_dot_path(fmt):
    """Issues 7, 12.4: the tl.dot (prefill, T >= 16 on a GPU) path gives the same result as the GEMV path."""
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


def test_matmul_reads_q5_high_bits():
    """Issue 12.4: Q5_0 / Q5_1 5th bits come from qh (little-endian u32: bit j = weight j) and Q4_1/Q5_1 add
    their f16 min m: a hand-built block dotted with unit vectors returns each weight as ggml defines it."""
    d, m = np.float16(0.25), np.float16(-1.5)
    qs = np.arange(16, dtype=np.uint8) | (np.arange(16, dtype=np.uint8)[::-1] << 4)
    qh = np.uint32(0b1010_0110_0101_1100_1001_0011_1110_0001)
    nib = np.concatenate([np.arange(16), np.arange(16)[::-1]])
    hbit = (int(qh) >> np.arange(32)) & 1
    cases = {
        "Q4_1": (d.tobytes() + m.tobytes() + qs.tobytes(), 0.25 * nib + np.float32(m)),
        "Q5_0": (d.tobytes() + qh.tobytes() + qs.tobytes(), 0.25 * (nib + 16 * hbit - 16.0)),
        "Q5_1": (d.tobytes() + m.tobytes() + qh.tobytes() + qs.tobytes(), 0.25 * (nib + 16 * hbit) + np.float32(m)),
    }
    for fmt, (block, want) in cases.items():
        w = weight_from_bytes(np.frombuffer(block, np.uint8), fmt, (32, 1))
        np.testing.assert_array_equal(TK.matmul(torch.eye(32), w)[:, 0].numpy(), want.astype(np.float32), err_msg=fmt)
        np.testing.assert_array_equal(w.dequantized()[0].numpy(), want.astype(np.float32), err_msg=fmt)


def _table(fmt: str, v: int, d: int, seed: int):
    """A ``[v, d]`` table of ``fmt`` and its gguf dequantization (K-quants: random super-block bytes)."""
    if fmt in KQUANTS:
        raw = _kq_raw(fmt, v, d, seed)
        return weight_from_bytes(raw, fmt, (d, v)), _gguf_dense(raw, fmt, v)
    w = quantize_matrix(torch.randn(v, d, generator=_gen(seed)), fmt)
    return w, _dense(w)


@pytest.mark.parametrize("fmt", RAW_TYPES)
def test_embedding_gather_formats(fmt):
    """Issues 7, 12.4: embedding gather of every table format (K-quants included) equals the rows of the
    gguf-dequantized table exactly; with the contract's ``scale`` (gemma3: sqrt(n_embd)) it equals those rows
    times the float32 scale, exactly. Only the gathered rows are dequantized (the kernel reads row ids only)."""
    table, dense = _table(fmt, 11, 512, seed=3)
    ids = torch.tensor([3, 0, 10, 3, 7])
    assert torch.equal(TK.embedding_gather(ids, table), R.embedding_gather(ids, dense))
    scale = math.sqrt(640)
    got = TK.embedding_gather(ids, table, scale=scale)
    assert torch.equal(got, _contract_gather(ids, dense, scale))
    assert torch.equal(got, R.embedding_gather(ids, dense, scale=scale))


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


# --------------------------------------------------------------------------- contract kernels (issue 12.4)
def _contract_gather(ids: torch.Tensor, dense: torch.Tensor, scale: float) -> torch.Tensor:
    """kernel-contract ``embedding_gather(..., scale)``: the gathered rows times ``scale`` in float32."""
    return R.embedding_gather(ids, dense) * torch.tensor(scale, dtype=torch.float32)


def _contract_head_rms_norm(x, w, *, eps, n_heads, head_dim):
    """kernel-contract ``head_rms_norm``: the reference RMS norm over each head's head_dim values, times w."""
    return R.rms_norm(x.reshape(x.shape[0], n_heads, head_dim), w, eps=eps).reshape(x.shape)


def _contract_rope_neox(x, table, start_pos, *, n_heads, head_dim, rope_dim):
    """kernel-contract ``rope(mode="neox")``: pairs (x[i], x[i + rope_dim/2]) rotate by table[p, i]; the
    dims past rope_dim pass through."""
    t, half = x.shape[0], rope_dim // 2
    xh = x.reshape(t, n_heads, head_dim)
    rot = torch.complex(xh[..., :half], xh[..., half:rope_dim]) * table[start_pos:start_pos + t]
    return torch.cat([rot.real, rot.imag, xh[..., rope_dim:]], dim=-1)


def _contract_attention(q, cache_k, cache_v, start_pos, *, scale=None, window=0):
    """kernel-contract ``attention(scale, window)``: query at p sees keys j <= p (and p - j < window when
    window > 0), softmax scale ``scale`` (default 1/sqrt(hd_k)), GQA; [T, H * hd_v]."""
    t, h, hd = q.shape
    n = start_pos + t
    p = torch.arange(start_pos, n)[:, None]
    j = torch.arange(n)[None, :]
    mask = (j <= p) & ((p - j < window) if window else torch.ones_like(j, dtype=torch.bool))
    o = F.scaled_dot_product_attention(q.transpose(0, 1), cache_k[:n].transpose(0, 1), cache_v[:n].transpose(0, 1),
                                       attn_mask=mask, scale=scale, enable_gqa=True)
    return o.transpose(0, 1).reshape(t, -1)


@pytest.mark.parametrize("t,n_heads,head_dim", [(1, 4, 256), (3, 3, 12), (2, 8, 20)])
def test_head_rms_norm(t, n_heads, head_dim):
    """Issue 12.4 (QK norm): head_rms_norm normalizes each head's head_dim values and scales them by the
    [head_dim] weight (gemma3 4 x 256 at decode; odd head counts and dims)."""
    g = _gen(t * 100 + head_dim)
    x, w = torch.randn(t, n_heads * head_dim, generator=g) * 3, torch.randn(head_dim, generator=g)
    kw = {"eps": 1e-6, "n_heads": n_heads, "head_dim": head_dim}
    got = TK.head_rms_norm(x, w, **kw)
    assert got.shape == x.shape
    torch.testing.assert_close(got, R.head_rms_norm(x, w, **kw), **TIGHT)
    torch.testing.assert_close(got, _contract_head_rms_norm(x, w, **kw), **TIGHT)


def test_gelu_mul_add_bias_on_split_views():
    """Issue 12.4: gelu_mul = gelu_tanh(gate) * up (gemma3 FFN; also far in both tails, where the sigmoid form
    stays finite) and add_bias = x + bias broadcast over rows (qwen2), on column views as split returns them."""
    both = torch.randn(3, 2 * 173, generator=_gen(6)) * 4
    both[0, :4] = torch.tensor([-60.0, -12.0, 12.0, 60.0])
    gate, up = R.split(both, sizes=(173, 173))
    got = TK.gelu_mul(gate, up)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, R.gelu_mul(gate.clone(), up), **TIGHT)
    torch.testing.assert_close(got, F.gelu(gate, approximate="tanh") * up, **TIGHT)
    bias = torch.randn(173, generator=_gen(7))
    assert torch.equal(TK.add_bias(gate, bias), R.add_bias(gate, bias))
    assert torch.equal(TK.add_bias(gate, bias), gate + bias)


@pytest.mark.parametrize("n_heads,head_dim,rope_dim", [(4, 256, 256), (6, 10, 8), (3, 12, 4)])
@pytest.mark.parametrize("start_pos,t", [(0, 5), (9, 1)])
def test_rope_neox_mode(n_heads, head_dim, rope_dim, start_pos, t):
    """Issue 12.4: NEOX-mode rope (pairs i, i + rope_dim/2; gemma3 / qwen; partial rope_dim passes the tail
    through) matches the contract's definition, on a table of either base (1e6 global, 1e4 local)."""
    for base in (1e6, 1e4):
        table = R.rope_table(16, rope_dim, base)
        x = torch.randn(t, n_heads * head_dim, generator=_gen(t + start_pos + head_dim))
        kw = {"n_heads": n_heads, "head_dim": head_dim, "rope_dim": rope_dim}
        got = TK.rope(x, table, start_pos, **kw, mode="neox")
        torch.testing.assert_close(got, R.rope(x, table, start_pos, **kw, mode="neox"), **TIGHT)
        torch.testing.assert_close(got, _contract_rope_neox(x, table, start_pos, **kw), **TIGHT)
        torch.testing.assert_close(TK.rope(x, table, start_pos, **kw, mode="norm"), R.rope(x, table, start_pos, **kw),
                                   **TIGHT)


@pytest.mark.parametrize("h,hkv,hd_k,hd_v", [(4, 1, 16, 16), (4, 2, 12, 20), (8, 2, 16, 8)])
def test_attention_window_scale(h, hkv, hd_k, hd_v):
    """Issue 12.4 (sliding window): causal and windowed attention (window 1, 4, and one wider than the
    context) with an explicit softmax scale or the default 1/sqrt(hd_k), on prefill chunks and decode steps
    past the window, GQA 1/2/4, key and value head dims that differ (KV cache written by kv_cache_write)."""
    s = 24
    g = _gen(h * 100 + hkv * 10 + hd_k)
    ck, cv = torch.zeros(s, hkv, hd_k), torch.zeros(s, hkv, hd_v)
    for sp, t in [(0, 9), (9, 1), (10, 5), (15, 1)]:
        k, v = torch.randn(t, hkv, hd_k, generator=g), torch.randn(t, hkv * hd_v, generator=g)
        q = torch.randn(t, h, hd_k, generator=g)
        TK.kv_cache_write(k, v, ck, cv, sp)
        assert torch.equal(ck[sp:sp + t], k) and torch.equal(cv[sp:sp + t].reshape(t, -1), v)
        for window, scale in [(0, None), (4, 0.3), (1, None), (100, 0.0625)]:
            got = TK.attention(q, ck, cv, sp, scale=scale, window=window)
            assert got.shape == (t, h * hd_v)
            want = _contract_attention(q, ck, cv, sp, scale=scale, window=window)
            torch.testing.assert_close(got, want, rtol=1e-5, atol=2e-6)
            torch.testing.assert_close(got, R.attention(q, ck, cv, sp, scale=scale, window=window), rtol=1e-5,
                                       atol=2e-6)


# --------------------------------------------------------------------------- rejections
@pytest.mark.parametrize("call,reason", [
    (lambda: TK.matmul(torch.randn(2, 64, dtype=torch.float64), torch.randn(3, 64)), "triton:dtype"),
    (lambda: TK.matmul(torch.randn(2, 63), torch.randn(3, 64)), "triton:shape"),
    (lambda: TK.matmul(torch.randn(2, 64), torch.randn(3, 64).to(torch.int8)), "triton:weight_type"),
    (lambda: TK.embedding_gather(torch.tensor([[1]]), torch.randn(3, 4)), "triton:shape"),
    (lambda: TK.embedding_gather(torch.tensor([1.0]), torch.randn(3, 4)), "triton:dtype"),
    (lambda: TK.rms_norm(torch.randn(2, 5), torch.randn(4), eps=1e-5), "triton:shape"),
    (lambda: TK.head_rms_norm(torch.randn(2, 12), torch.randn(4), eps=1e-5, n_heads=2, head_dim=6), "triton:shape"),
    (lambda: TK.head_rms_norm(torch.randn(2, 12), torch.randn(6), eps=1e-5, n_heads=3, head_dim=6), "triton:shape"),
    (lambda: TK.rope(torch.randn(2, 12), R.rope_table(4, 6, 1e4), 3, n_heads=2, head_dim=6, rope_dim=6),
     "triton:shape"),
    (lambda: TK.rope(torch.randn(2, 12), R.rope_table(8, 6, 1e4), 0, n_heads=2, head_dim=6, rope_dim=5),
     "triton:shape"),
    (lambda: TK.rope(torch.randn(2, 12), R.rope_table(8, 6, 1e4), 0, n_heads=2, head_dim=6, rope_dim=6, mode="gptj"),
     "triton:attr"),
    (lambda: TK.kv_cache_write(torch.randn(2, 2, 4), torch.randn(2, 8), torch.zeros(2, 2, 4), torch.zeros(2, 2, 4), 1),
     "triton:shape"),
    (lambda: TK.attention(torch.randn(1, 3, 4), torch.zeros(4, 2, 4), torch.zeros(4, 2, 4), 0), "triton:shape"),
    (lambda: TK.attention(torch.randn(1, 2, 4), torch.zeros(4, 2, 4), torch.zeros(4, 2, 4), 0, window=-1),
     "triton:attr"),
    (lambda: TK.attention(torch.randn(1, 2, 4), torch.zeros(4, 2, 4), torch.zeros(4, 2, 4), 0, scale=float("nan")),
     "triton:attr"),
    (lambda: TK.silu_mul(torch.randn(2, 3), torch.randn(2, 4)), "triton:shape"),
    (lambda: TK.gelu_mul(torch.randn(2, 3), torch.randn(2, 4)), "triton:shape"),
    (lambda: TK.add_bias(torch.randn(2, 3), torch.randn(4)), "triton:shape"),
    (lambda: TK.add_bias(torch.randn(2, 3), torch.randn(3, dtype=torch.float16)), "triton:dtype"),
    (lambda: TK.add(torch.randn(2, 3), torch.randn(2, 3, dtype=torch.float16)), "triton:dtype"),
    (lambda: TK.argmax(torch.randn(5)), "triton:shape"),
    (lambda: weight_from_bytes(np.zeros(10, np.uint8), "Q8_0", (32, 1)), "triton:weight_layout"),
    (lambda: weight_from_bytes(np.zeros(110, np.uint8), "Q3_K", (256, 1)), "triton:weight_type"),
    (lambda: quantize_matrix(torch.randn(2, 256), "Q2_K"), "triton:weight_type"),
    (lambda: quantize_matrix(torch.randn(2, 256), "Q4_K"), "triton:weight_type"),
])
def test_rejections(call, reason):
    """Issues 7, 12.4: bad calls raise a typed TritonKernelError with a stable code, never a raw traceback."""
    with pytest.raises(PipeplanError) as ei:
        call()
    assert ei.value.code == reason and ei.value.one_line().startswith(f"error[{reason}]")


def test_raw_loader_rejects_unread_type_before_mapping(tmp_path):
    """WL-F-4: a matrix type the Triton kernels do not read (Q3_K) is a bind fault at load, not a silent
    dequantize-to-F32 fallback; nothing is mapped (the file does not even need to exist)."""
    sl = TensorSlice("blk.0.attn_q.weight", "Q3_K", (256, 2), 0, 0, 220)
    with pytest.raises(TK.TritonKernelError) as ei:
        load_stage_weights_raw([tmp_path / "absent.gguf"], [sl])
    assert ei.value.code == "triton:weight_type" and ei.value.kind == "bind" and "Q3_K" in str(ei.value)


# --------------------------------------------------------------------------- K-quants
KQ_TOL = 1e-6
"""K-quant matmul: ``|got - want| <= KQ_TOL * (|x| @ |W|.T)`` elementwise (module docstring)."""
KQ_BYTES = {"Q4_K": 144, "Q5_K": 176, "Q6_K": 210}
"""Bytes per 256-weight super-block (ggml block_q4_K / block_q5_K / block_q6_K)."""


def _kq_raw(fmt: str, n: int, k: int, seed: int) -> np.ndarray:
    """Random ``fmt`` bytes of an ``[n, k]`` matrix (ggml ``(k, n)``): random bytes everywhere except the fp16
    super-block scales (Q4_K/Q5_K ``d``, ``dmin`` at 0 and 2; Q6_K ``d`` at 208), set in [1e-3, 1e-2]."""
    rng = np.random.default_rng(seed)
    nb = n * (k // 256)
    blocks = rng.integers(0, 256, (nb, KQ_BYTES[fmt]), dtype=np.uint8)
    for off in ((208,) if fmt == "Q6_K" else (0, 2)):
        blocks[:, off:off + 2] = rng.uniform(1e-3, 1e-2, nb).astype(np.float16).view(np.uint8).reshape(nb, 2)
    return blocks.reshape(-1)


def _gguf_dense(raw: np.ndarray, fmt: str, n: int) -> torch.Tensor:
    """The reference: gguf.quants' dequantization of ``raw`` as a float32 ``[n, k]`` tensor."""
    from gguf import GGMLQuantizationType
    from gguf import quants as gq

    return torch.from_numpy(np.array(gq.dequantize(raw.reshape(n, -1), GGMLQuantizationType[fmt]), np.float32))


def _assert_kq_close(x: torch.Tensor, got: torch.Tensor, dense: torch.Tensor) -> None:
    want = x.double() @ dense.double().T
    bound = KQ_TOL * (x.abs().double() @ dense.abs().double().T)
    err = (got.double() - want).abs()
    assert got.dtype == torch.float32 and got.shape == want.shape
    assert bool((err <= bound).all()), f"max err {err.max().item():.3g}, worst err/bound {(err / bound).max().item():.3g}"


@pytest.mark.parametrize("fmt", KQUANTS)
@pytest.mark.parametrize("t,n,k", [(1, 37, 256), (3, 37, 512), (1, 13, 512), (3, 5, 256)])
def test_matmul_kquant_matches_gguf_dequant(fmt, t, n, k):
    """Issues 7, 12.4 (K-quants): the fused-dequant GEMV on raw super-blocks (random bytes, sane fp16 scales)
    equals x @ dequantize(raw).T with gguf.quants as the reference, for Q4_K, Q5_K and Q6_K at odd N, K = 256
    and 512 (one and two super-blocks per row) and T = 1 and 3."""
    raw = _kq_raw(fmt, n, k, seed=t * 1000 + n + k)
    w = weight_from_bytes(raw, fmt, (k, n), name=f"w{fmt}")
    assert isinstance(w, GGMLWeight) and w.ggml_type == fmt and w.nbytes_raw == n * k // 256 * KQ_BYTES[fmt]
    dense = _gguf_dense(raw, fmt, n)
    assert torch.equal(w.dequantized(), dense)  # the wrapper's own (reference-kernel) view is gguf's
    x = torch.randn(t, k, generator=_gen(k + t))
    _assert_kq_close(x, TK.matmul(x, w), dense)


@pytest.mark.parametrize("fmt", KQUANTS)
def test_matmul_kquant_dot_path(fmt):
    """Issues 7, 12.4 (K-quants): the tl.dot path (prefill, T >= 16 on a GPU; dequantized [BLOCK_N, 256]
    tiles) equals the gguf reference too (T = 17, odd N, two super-blocks)."""
    raw = _kq_raw(fmt, 19, 512, seed=3)
    w = weight_from_bytes(raw, fmt, (512, 19))
    x = torch.randn(17, 512, generator=_gen(17))
    _assert_kq_close(x, TK.matmul(x, w, use_dot=True), _gguf_dense(raw, fmt, 19))


def _scale_min_k4(s: bytes, j: int) -> tuple[int, int]:
    """ggml get_scale_min_k4 (ggml-quants.c), transcribed independently of the kernel."""
    if j < 4:
        return s[j] & 63, s[j + 4] & 63
    return (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4)


K4_SCALES = bytes([0xC5, 0x4A, 0x87, 0x7F, 0xD1, 0x62, 0xAB, 0x4C, 0x9E, 0x37, 0xF0, 0x5B])
"""12 scale bytes whose 8 (scale, min) pairs all differ and whose j >= 4 pairs use both top-bit pairs."""


def _q45k_want(d, dmin, qs: bytes, qh: bytes | None) -> np.ndarray:
    """ggml dequantize_row_q4_K / dequantize_row_q5_K for one super-block, transcribed loop by loop (groups
    of 64: low nibbles with scale is, high nibbles with is + 1; Q5_K's high bit from qh[l] & u1 / u2)."""
    out, qi, is_, u1, u2 = [], 0, 0, 1, 2
    for _ in range(4):
        sc, m = _scale_min_k4(K4_SCALES, is_)
        d1, m1 = np.float32(d) * np.float32(sc), np.float32(dmin) * np.float32(m)
        sc, m = _scale_min_k4(K4_SCALES, is_ + 1)
        d2, m2 = np.float32(d) * np.float32(sc), np.float32(dmin) * np.float32(m)
        out += [d1 * np.float32((qs[qi + i] & 0xF) + (16 if qh and qh[i] & u1 else 0)) - m1 for i in range(32)]
        out += [d2 * np.float32((qs[qi + i] >> 4) + (16 if qh and qh[i] & u2 else 0)) - m2 for i in range(32)]
        qi, is_, u1, u2 = qi + 32, is_ + 2, u1 << 2, u2 << 2
    return np.array(out, np.float32)


def _q6k_want(d, ql: bytes, qh: bytes, sc: bytes) -> np.ndarray:
    """ggml dequantize_row_q6_K for one super-block, transcribed loop by loop (two halves of 128)."""
    y = np.zeros(256, np.float32)
    scs = np.frombuffer(sc, np.int8)
    for n in range(2):
        yo, lo, ho, so = 128 * n, 64 * n, 32 * n, 8 * n
        for i in range(32):
            is_ = i // 16
            q1 = ((ql[lo + i] & 0xF) | (((qh[ho + i] >> 0) & 3) << 4)) - 32
            q2 = ((ql[lo + i + 32] & 0xF) | (((qh[ho + i] >> 2) & 3) << 4)) - 32
            q3 = ((ql[lo + i] >> 4) | (((qh[ho + i] >> 4) & 3) << 4)) - 32
            q4 = ((ql[lo + i + 32] >> 4) | (((qh[ho + i] >> 6) & 3) << 4)) - 32
            for off, q, s6 in ((0, q1, 0), (32, q2, 2), (64, q3, 4), (96, q4, 6)):
                y[yo + i + off] = np.float32(d) * np.float32(scs[so + is_ + s6]) * np.float32(q)
    return y


def _hand_built(fmt: str) -> tuple[np.ndarray, np.ndarray]:
    """One hand-built super-block of ``fmt`` and its 256 weights per ggml's dequantize_row_* (above)."""
    d, dmin = np.float16(0.0123), np.float16(0.0456)
    qs = bytes((7 * b + 3) % 256 for b in range(128))
    qh = bytes((37 * b + 11) % 256 for b in range(64))
    if fmt == "Q4_K":
        block, want = d.tobytes() + dmin.tobytes() + K4_SCALES + qs, _q45k_want(d, dmin, qs, None)
    elif fmt == "Q5_K":
        block, want = d.tobytes() + dmin.tobytes() + K4_SCALES + qh[:32] + qs, _q45k_want(d, dmin, qs, qh[:32])
    else:
        sc = bytes((-100 + 13 * b) % 256 for b in range(16))
        block, want = qs + qh + sc + d.tobytes(), _q6k_want(d, qs, qh, sc)
    return np.frombuffer(block, np.uint8), want


@pytest.mark.parametrize("fmt", KQUANTS)
def test_kquant_hand_built_block_bit_exact(fmt):
    """Issues 7, 12.4 (K-quants): one hand-built super-block dotted with the 256 unit vectors returns each weight
    bit-exactly as ggml's dequantize_row_q4_K / _q5_K / _q6_K define it (transcribed independently of the
    kernel, and equal to gguf.quants): Q4_K/Q5_K 6-bit scales and mins of every sub-block (j < 4 and j >= 4,
    whose top-bit pairs are all set here), nibble order and Q5_K's qh bits; Q6_K's ql/qh split and its sixteen
    int8 scales (negative ones included); the embedding gather decodes the same row."""
    raw, want = _hand_built(fmt)
    assert len(raw) == KQ_BYTES[fmt]
    assert len({_scale_min_k4(K4_SCALES, j) for j in range(8)}) == 8
    np.testing.assert_array_equal(_gguf_dense(raw, fmt, 1)[0].numpy(), want)
    w = weight_from_bytes(raw, fmt, (256, 1))
    np.testing.assert_array_equal(TK.matmul(torch.eye(256), w)[:, 0].numpy(), want)
    np.testing.assert_array_equal(TK.embedding_gather(torch.tensor([0]), w)[0].numpy(), want)


def test_q4k_raw_loader_keeps_blocks(tmp_path):
    """WL-L-1 / issue 7 (Q4_K): a stage's Q4_K matrix is mapped from its byte range and kept as raw
    super-blocks (no dequantize-to-F32 at load); the GEMV on it matches gguf's dequantization."""
    raw = _kq_raw("Q4_K", 3, 512, seed=11)
    path = tmp_path / "w.bin"
    path.write_bytes(b"\x00" * 64 + raw.tobytes())
    sl = TensorSlice("blk.0.ffn_down.weight", "Q4_K", (512, 3), 0, 64, raw.size)
    w = load_stage_weights_raw([path], [sl])["blk.0.ffn_down.weight"]
    assert isinstance(w, GGMLWeight) and w.ggml_type == "Q4_K" and w.raw.dtype == torch.uint8
    assert torch.equal(w.raw.reshape(-1), torch.from_numpy(raw))
    x = torch.randn(1, 512, generator=_gen(1))
    _assert_kq_close(x, TK.matmul(x, w), _gguf_dense(raw, "Q4_K", 3))


@pytest.mark.parametrize("fmt", KQUANTS)
def test_kquant_rejections(fmt):
    """Issues 7, 12.4 (K-quants): a row length K that is not a multiple of 256 is refused with a typed error when
    the bytes are wrapped (gguf's block rule) and when the raw tensor is built by hand; a wrong byte layout too
    (kind bind, naming the format)."""
    bs = KQ_BYTES[fmt]
    for call, code in [(lambda: weight_from_bytes(np.zeros(bs // 2, np.uint8), fmt, (128, 1)), "dequant"),
                       (lambda: GGMLWeight(torch.zeros(1, bs // 2, dtype=torch.uint8), fmt, (1, 128)),
                        "triton:weight_layout"),
                       (lambda: GGMLWeight(torch.zeros(2, bs + 1, dtype=torch.uint8), fmt, (2, 256)),
                        "triton:weight_layout")]:
        with pytest.raises(PipeplanError) as ei:
            call()
        assert ei.value.code == code and ei.value.one_line().startswith(f"error[{code}]")
        if code.startswith("triton:"):
            assert ei.value.kind == "bind" and fmt in str(ei.value)
