"""Torch reference kernels against explicit per-element formulas (ggml semantics)."""

from __future__ import annotations

import math

import pytest
import torch
from pipeplan.runtime.kernels import reference as K

torch.manual_seed(0)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_embedding_gather():
    """embedding_gather picks table rows: [T] ids, [V, D] table -> [T, D]."""
    table = torch.randn(10, 4)
    ids = torch.tensor([3, 0, 9, 3])
    out = K.embedding_gather(ids, table)
    assert out.shape == (4, 4)
    for i, t in enumerate(ids.tolist()):
        assert torch.equal(out[i], table[t])


def test_rms_norm_formula():
    """rms_norm = x / sqrt(mean(x^2) + eps) * w, per row (ggml rms_norm + mul)."""
    x, w = torch.randn(3, 16), torch.randn(16)
    want = torch.stack([r / math.sqrt(float((r * r).mean()) + 1e-5) * w for r in x])
    torch.testing.assert_close(K.rms_norm(x, w, eps=1e-5), want, rtol=1e-5, atol=1e-6)


def test_matmul_split_add_silu_argmax():
    """matmul is x @ W^T; split gives column views; add; silu_mul = silu(g) * u; argmax per row."""
    x, w = torch.randn(2, 5), torch.randn(7, 5)
    torch.testing.assert_close(K.matmul(x, w), x @ w.T)
    a, b = K.split(K.matmul(x, w), sizes=(3, 4))
    assert a.shape == (2, 3) and b.shape == (2, 4)
    torch.testing.assert_close(torch.cat([a, b], 1), x @ w.T)
    torch.testing.assert_close(K.add(a, a), 2 * a)
    g, u = torch.randn(2, 3), torch.randn(2, 3)
    torch.testing.assert_close(K.silu_mul(g.clone(), u), g / (1 + torch.exp(-g)) * u)
    assert K.argmax(torch.tensor([[0.0, 2.0, 1.0], [5.0, 1.0, 5.0]])).tolist() == [1, 0]
    assert K.last_row(x).shape == (1, 5) and torch.equal(K.last_row(x)[0], x[-1])


def _rope_ggml_norm(x: torch.Tensor, pos0: int, n_heads: int, hd: int, n_dims: int, base: float) -> torch.Tensor:
    """ggml_rope NORM mode written out: theta_i = p * base^(-2i/n_dims) on pairs (x[2i], x[2i+1])."""
    t = x.shape[0]
    x = x.reshape(t, n_heads, hd).double()
    out = x.clone()
    for ti in range(t):
        p = pos0 + ti
        for h in range(n_heads):
            for i in range(n_dims // 2):
                th = p * base ** (-2 * i / n_dims)
                x0, x1 = x[ti, h, 2 * i], x[ti, h, 2 * i + 1]
                out[ti, h, 2 * i] = x0 * math.cos(th) - x1 * math.sin(th)
                out[ti, h, 2 * i + 1] = x0 * math.sin(th) + x1 * math.cos(th)
    return out.float()


@pytest.mark.parametrize("rope_dim", [8, 4])
def test_rope_norm_mode_adjacent_pairs(rope_dim):
    """rope rotates adjacent pairs (ggml NORM mode, LLM_ARCH_LLAMA) by (start_pos+t)*base^(-2i/d);
    with rope_dim < head_dim the tail passes through unchanged."""
    x = torch.randn(3, 2 * 8)
    table = K.rope_table(16, rope_dim, 10000.0)
    assert table.shape == (16, 1, rope_dim // 2)
    got = K.rope(x, table, 5, n_heads=2, head_dim=8, rope_dim=rope_dim)
    assert got.shape == (3, 2, 8)
    torch.testing.assert_close(got, _rope_ggml_norm(x, 5, 2, 8, rope_dim, 10000.0), rtol=1e-5, atol=1e-5)
    if rope_dim < 8:
        assert torch.equal(got[..., rope_dim:], x.reshape(3, 2, 8)[..., rope_dim:])


def _attention_naive(q, k, v, pos0):
    """Per head, per query: softmax(q.k / sqrt(hd)) over keys 0..pos0+t, GQA kv head = h // (H/Hkv)."""
    t, h, hd = q.shape
    hkv = k.shape[1]
    out = torch.zeros(t, h, hd, dtype=torch.float64)
    for ti in range(t):
        n = pos0 + ti + 1
        for hi in range(h):
            kh = hi // (h // hkv)
            s = torch.tensor([float(q[ti, hi].double() @ k[j, kh].double()) / math.sqrt(hd) for j in range(n)])
            p = torch.softmax(s, 0)
            out[ti, hi] = sum(p[j] * v[j, kh].double() for j in range(n))
    return out.reshape(t, h * hd).float()


def test_kv_cache_write_and_attention_gqa():
    """kv_cache_write stores [T, Hkv, hd] keys at their positions in [S, Hkv, hd]; attention (prefill
    from 0, chunk at start_pos > 0, and single-token decode) equals the naive causal GQA formula."""
    h, hkv, hd, s = 4, 2, 8, 16
    q, k, v = torch.randn(6, h, hd), torch.randn(6, hkv, hd), torch.randn(6, hkv, hd)
    ck, cv = torch.zeros(s, hkv, hd), torch.zeros(s, hkv, hd)
    K.kv_cache_write(k[:4], v[:4].reshape(4, hkv * hd), ck, cv, 0)
    assert torch.equal(ck[:4], k[:4]) and torch.equal(cv[:4], v[:4]) and float(ck[4:].abs().sum()) == 0
    want = _attention_naive(q, k, v, 0)
    torch.testing.assert_close(K.attention(q[:4], ck, cv, 0), want[:4], rtol=1e-5, atol=1e-5)
    K.kv_cache_write(k[4:5], v[4:5].reshape(1, -1), ck, cv, 4)  # decode one token
    torch.testing.assert_close(K.attention(q[4:5], ck, cv, 4), want[4:5], rtol=1e-5, atol=1e-5)
    K.kv_cache_write(k[4:6], v[4:6].reshape(2, -1), ck, cv, 4)  # chunk with start_pos > 0, T > 1
    torch.testing.assert_close(K.attention(q[4:6], ck, cv, 4), want[4:6], rtol=1e-5, atol=1e-5)


def test_kernel_table_complete():
    """Every kernel a stage program uses is in KERNELS under its own name."""
    for name in ("embedding_gather", "rms_norm", "matmul", "rope", "kv_cache_write", "attention",
                 "silu_mul", "add", "argmax", "split", "last_row"):
        assert K.KERNELS[name] is getattr(K, name)
