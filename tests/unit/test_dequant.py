"""Dequantization: agreement with gguf.quants and with ggml's C reference loops (K-quants)."""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import quants as gq
from pipeplan.runtime.dequant import DequantError, dequantize, expected_nbytes

RNG = np.random.default_rng(1234)
SHAPE = (256, 3)  # ggml order: 3 rows of 256 (a multiple of every block size incl. QK_K = 256)


def _values() -> np.ndarray:
    return RNG.standard_normal((SHAPE[1], SHAPE[0])).astype(np.float32)


def test_f32_zero_copy_and_shape_order():
    """F32 dequant is a view with the shape reversed from ggml order."""
    v = _values()
    raw = np.frombuffer(v.tobytes(), dtype=np.uint8)
    out = dequantize(raw, "F32", SHAPE)
    assert out.shape == (3, 256) and out.dtype == np.float32
    assert np.array_equal(out, v) and np.shares_memory(out, raw)


@pytest.mark.parametrize("name,tol", [("F16", 2e-3), ("BF16", 2e-2), ("Q8_0", 3e-2), ("Q4_0", 0.5)])
def test_quantized_roundtrip_matches_gguf(name, tol):
    """Bytes made by gguf.quants.quantize dequantize exactly as gguf.quants.dequantize does, and
    close to the source values (tolerance: max abs error for N(0,1) data)."""
    v = _values()
    q = gq.quantize(v, QT[name])
    raw = np.frombuffer(q.tobytes(), dtype=np.uint8)
    assert raw.size == expected_nbytes(name, SHAPE)
    out = dequantize(raw, name, SHAPE)
    ref = gq.dequantize(q, QT[name]).reshape(3, 256)
    assert out.shape == (3, 256) and out.dtype == np.float32
    assert np.array_equal(out, ref)
    assert float(np.abs(out - v).max()) < tol


def _f16(x: float) -> bytes:
    return np.float16(x).tobytes()


def _q4k_blocks(n: int) -> bytes:
    """Random Q4_K blocks with sane fp16 d/dmin (0.01..0.1) and random 6-bit scales/mins, quants."""
    out = b""
    for _ in range(n):
        out += _f16(RNG.uniform(0.01, 0.1)) + _f16(RNG.uniform(0.01, 0.1))
        out += RNG.integers(0, 256, 12, dtype=np.uint8).tobytes() + RNG.integers(0, 256, 128, dtype=np.uint8).tobytes()
    return out


def _q6k_blocks(n: int) -> bytes:
    """Random Q6_K blocks: ql[128], qh[64], int8 scales[16], fp16 d (0.001..0.01)."""
    out = b""
    for _ in range(n):
        out += RNG.integers(0, 256, 192, dtype=np.uint8).tobytes()
        out += RNG.integers(-128, 128, 16, dtype=np.int8).tobytes() + _f16(RNG.uniform(0.001, 0.01))
    return out


def _ggml_q4k(block: bytes) -> list[float]:
    """ggml dequantize_row_q4_K for one block, transcribed from ggml-quants.c (scalar loops)."""
    d = float(np.frombuffer(block[0:2], np.float16)[0])
    dmin = float(np.frombuffer(block[2:4], np.float16)[0])
    sc_b, q = block[4:16], block[16:144]

    def scale_min(j):
        if j < 4:
            return sc_b[j] & 63, sc_b[j + 4] & 63
        return (sc_b[j + 4] & 0xF) | ((sc_b[j - 4] >> 6) << 4), (sc_b[j + 4] >> 4) | ((sc_b[j] >> 6) << 4)

    y, qi, is_ = [], 0, 0
    for _ in range(0, 256, 64):
        sc, m = scale_min(is_)
        d1, m1 = np.float32(d) * np.float32(sc), np.float32(dmin) * np.float32(m)
        sc, m = scale_min(is_ + 1)
        d2, m2 = np.float32(d) * np.float32(sc), np.float32(dmin) * np.float32(m)
        y += [d1 * np.float32(q[qi + li] & 0xF) - m1 for li in range(32)]
        y += [d2 * np.float32(q[qi + li] >> 4) - m2 for li in range(32)]
        qi += 32
        is_ += 2
    return y


def _ggml_q6k(block: bytes) -> list[float]:
    """ggml dequantize_row_q6_K for one block, transcribed from ggml-quants.c (scalar loops)."""
    ql, qh = block[0:128], block[128:192]
    sc = np.frombuffer(block[192:208], np.int8)
    d = np.float32(np.frombuffer(block[208:210], np.float16)[0])
    y = [0.0] * 256
    for n in range(2):
        o, lo, ho, so = 128 * n, 64 * n, 32 * n, 8 * n
        for li in range(32):
            is_ = li // 16
            q1 = ((ql[lo + li] & 0xF) | (((qh[ho + li] >> 0) & 3) << 4)) - 32
            q2 = ((ql[lo + li + 32] & 0xF) | (((qh[ho + li] >> 2) & 3) << 4)) - 32
            q3 = ((ql[lo + li] >> 4) | (((qh[ho + li] >> 4) & 3) << 4)) - 32
            q4 = ((ql[lo + li + 32] >> 4) | (((qh[ho + li] >> 6) & 3) << 4)) - 32
            y[o + li] = d * np.float32(sc[so + is_]) * np.float32(q1)
            y[o + li + 32] = d * np.float32(sc[so + is_ + 2]) * np.float32(q2)
            y[o + li + 64] = d * np.float32(sc[so + is_ + 4]) * np.float32(q3)
            y[o + li + 96] = d * np.float32(sc[so + is_ + 6]) * np.float32(q4)
    return y


@pytest.mark.parametrize("name,make,oracle,bsize", [
    ("Q4_K", _q4k_blocks, _ggml_q4k, 144),
    ("Q6_K", _q6k_blocks, _ggml_q6k, 210),
])
def test_kquant_matches_gguf_and_ggml(name, make, oracle, bsize):
    """Hand-made K-quant tensors (random bytes, sane fp16 scales) of shape ggml (512, 2)
    dequantize equal to gguf.quants.dequantize, and to ggml's scalar C loops transcribed here."""
    raw = np.frombuffer(make(4), dtype=np.uint8)  # 4 blocks = 2 rows of 512
    assert raw.size == 4 * bsize == expected_nbytes(name, (512, 2))
    out = dequantize(raw, name, (512, 2))
    ref = gq.dequantize(raw.reshape(2, 2 * bsize), QT[name])
    assert out.shape == (2, 512)
    assert np.array_equal(out, ref)
    want = np.array([v for b in range(4) for v in oracle(raw[b * bsize:(b + 1) * bsize].tobytes())],
                    dtype=np.float32).reshape(2, 512)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
    assert np.isfinite(out).all() and float(np.abs(out).max()) > 0


def test_dequant_errors():
    """Unknown type, row length not a multiple of the block size, and a wrong byte count are
    DequantError (kind parse) naming the tensor."""
    with pytest.raises(DequantError, match="unknown ggml type 'Q9_9'") as e:
        dequantize(np.zeros(4, np.uint8), "Q9_9", (1,), what="t")
    assert e.value.kind == "parse" and e.value.code == "dequant"
    with pytest.raises(DequantError, match="blk.0.ffn_down.weight: row length 172 is not a multiple of the Q8_0"):
        dequantize(np.zeros(1000, np.uint8), "Q8_0", (172, 64), what="blk.0.ffn_down.weight")
    with pytest.raises(DequantError, match=r"x: Q8_0 \(32, 2\) needs 68 bytes, got 67"):
        dequantize(np.zeros(67, np.uint8), "Q8_0", (32, 2), what="x")
    with pytest.raises(DequantError, match="invalid shape"):
        dequantize(np.zeros(0, np.uint8), "F32", (0,))
