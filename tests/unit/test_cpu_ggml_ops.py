"""The CPU table's ggml-faithful kernels besides the matmuls (``runtime/kernels/csrc/ops.c``): rms_norm,
rope and its table, the F16 GELU product, the F16 KV cache and llama.cpp's attention.

Each is checked against the reference table (the plain float32 path) within the rounding it adds, against
a float emulation of ggml's arithmetic where one is short to write (rms_norm, the GELU table, the F16
cache), and the portable C against the AVX2 code bit for bit. That the whole table gives llama.cpp's
numbers is shown on the real model (tests/contract/test_gemma3.py: exact ids).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from pipeplan.runtime.kernels import cpu, reference

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SIMD = [True, False] if cpu.available() and cpu._qkernels.cpu_has_avx2() else [False]
F16_EPS = 2.0 ** -11


def _both_paths(fn):
    """``fn()`` on every code path (AVX2, portable); returns the results."""
    out = []
    for simd in SIMD:
        prev = cpu._qkernels.set_simd(simd)
        try:
            out.append(fn())
        finally:
            cpu._qkernels.set_simd(prev)
    return out


def _rms_norm_emulated(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """ggml_compute_forward_rms_norm_f32 + mul: sequential double sum of float32 squares, the mean
    rounded to float, scale = 1 / sqrtf(mean + eps), y = (x * scale) * w, all float32 steps."""
    out = np.empty_like(x)
    for r in range(x.shape[0]):
        s = 0.0
        for v in x[r]:
            s += float(np.float32(v) * np.float32(v))
        mean = np.float32(s / x.shape[1])
        scale = np.float32(1.0) / np.sqrt(np.float32(mean + np.float32(eps)))
        out[r] = (x[r] * scale) * w
    return out


def _complex_table(cs: np.ndarray) -> np.ndarray:
    """The CPU table's (cos, sin) pairs ``[S, d/2, 2]`` as the reference's complex64 ``[S, 1, d/2]``."""
    return np.ascontiguousarray(cs).view(np.complex64).reshape(cs.shape[0], 1, cs.shape[1])


def test_rms_norm_is_ggml_arithmetic():
    """rms_norm equals the float emulation of ggml's (double sum, float scale) bit for bit, and the
    reference within float32 rounding; head_rms_norm is rms_norm of each head's row."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((5, 37)) * 3).astype(np.float32)
    w = rng.standard_normal(37).astype(np.float32)
    got = cpu.rms_norm(x, w, eps=1e-6)
    assert np.array_equal(got, _rms_norm_emulated(x, w, 1e-6))
    ref = reference.rms_norm(torch.from_numpy(x), torch.from_numpy(w), eps=1e-6).numpy()
    assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()
    xh = (rng.standard_normal((3, 4 * 16))).astype(np.float32)
    wh = rng.standard_normal(16).astype(np.float32)
    hn = cpu.head_rms_norm(xh, wh, eps=1e-6, n_heads=4, head_dim=16)
    assert np.array_equal(hn, _rms_norm_emulated(xh.reshape(12, 16), wh, 1e-6).reshape(3, 64))


def test_rope_table_is_float32_theta_by_repeated_multiplication():
    """rope_table: position 0 is (1, 0); the angles are p * base^(-2i/d) advanced in float32 by repeated
    multiplication (ggml_rope_cache_init), so they drift from the float64 angles of the reference
    table by float32 rounding only; its (cos, sin) float32 pairs are the real view of the reference's complex64
    layout."""
    s, d, base = 48, 16, 10000.0
    cs = cpu.rope_table(s, d, base)
    assert cs.shape == (s, d // 2, 2) and cs.dtype == np.float32
    t = torch.from_numpy(_complex_table(cs))
    r = reference.rope_table(s, d, base)
    assert t.shape == r.shape == (s, 1, d // 2) and t.dtype == torch.complex64
    assert torch.equal(t[0], torch.ones_like(t[0]))
    theta_scale = np.float32(base) ** np.float32(-2.0 / d)
    for p in (1, 7, 47):
        theta, want = np.float32(p), []
        for _ in range(d // 2):
            want.append(theta)
            theta = np.float32(theta * theta_scale)
        got = np.angle(t[p, 0].numpy().astype(np.complex128))
        wrapped = np.angle(np.exp(1j * np.asarray(want, np.float64)))
        assert np.abs(got - wrapped).max() < 1e-6
    assert (t - r).abs().max() < 1e-4


@pytest.mark.parametrize("mode", ["norm", "neox"])
def test_rope_matches_reference_rotation(mode):
    """rope (NORM: pairs (2i, 2i+1); NEOX: (i, i + d/2); dims past rope_dim pass through) equals the
    reference rotation on the same table within float32 rounding; portable == AVX2."""
    rng = np.random.default_rng(1)
    t, h, hd, rd = 3, 2, 12, 8
    x = rng.standard_normal((t, h * hd)).astype(np.float32)
    table = cpu.rope_table(16, rd, 500.0)
    got = _both_paths(lambda: cpu.rope(x, table, 5, n_heads=h, head_dim=hd, rope_dim=rd, mode=mode))
    ref = reference.rope(torch.from_numpy(x), torch.from_numpy(_complex_table(table)), 5, n_heads=h, head_dim=hd,
                         rope_dim=rd, mode=mode).numpy()
    assert got[0].shape == (t, h, hd) and all(np.array_equal(g, got[0]) for g in got)
    assert np.abs(got[0] - ref).max() < 1e-6
    assert np.array_equal(got[0][..., rd:], x.reshape(t, h, hd)[..., rd:])
    # the reference's complex table gives the same bits
    assert np.array_equal(cpu.rope(x, _complex_table(table), 5, n_heads=h, head_dim=hd, rope_dim=rd, mode=mode),
                          got[0])
    with pytest.raises(ValueError, match="rope mode"):
        cpu.rope(x, table, 0, n_heads=h, head_dim=hd, rope_dim=rd, mode="yarn")


def test_gelu_mul_reads_an_f16_table():
    """gelu_mul (ggml_vec_geglu_f32 with GGML_GELU_FP16): gate <= -10 -> 0, gate >= 10 -> gate * up, else
    f16(gelu_tanh(f16(gate))) * up: one f16 rounding of the input and of the result away from the
    reference (float64 gelu_tanh here)."""
    rng = np.random.default_rng(2)
    g = np.concatenate([rng.standard_normal(500) * 3, [-12.0, -10.0, 10.0, 11.5, 0.0]]).astype(np.float32)
    u = rng.standard_normal(g.size).astype(np.float32)
    got = cpu.gelu_mul(g, u)
    assert got[-5] == 0.0 and got[-4] == 0.0 and got[-3] == np.float32(10.0) * u[-3] and got[-2] == g[-2] * u[-2]
    gh = g.astype(np.float16).astype(np.float64)
    gelu = 0.5 * gh * (1 + np.tanh(math.sqrt(2 / math.pi) * gh * (1 + 0.044715 * gh * gh)))
    want = gelu.astype(np.float16).astype(np.float32) * u
    inner = np.abs(g) < 10
    # the table entry is f16 of the float32 gelu: at most one f16 step from f16 of the exact one
    bound = (np.abs(gelu) * 2 * F16_EPS + 2.0 ** -24) * np.abs(u)  # 2^-24: the f16 subnormal step
    assert np.all(np.abs(got - want)[inner] <= bound[inner] + 1e-9)
    ref = reference.gelu_mul(torch.from_numpy(g), torch.from_numpy(u)).numpy()
    assert np.abs(got - ref).max() < 0.01 * np.abs(ref).max()


def test_silu_mul_is_ggml_swiglu():
    """silu_mul (ggml_vec_swiglu_f32): groups of 8 values take ggml's exp (the softmax's), the rest of a
    row libm's expf; equal to the reference within float32 rounding, rows independent."""
    rng = np.random.default_rng(4)
    g = (rng.standard_normal((3, 21)) * 4).astype(np.float32)
    u = rng.standard_normal((3, 21)).astype(np.float32)
    got = cpu.silu_mul(g, u)
    ref = reference.silu_mul(torch.from_numpy(g), torch.from_numpy(u)).numpy()
    assert np.abs(got - ref).max() <= 4e-7 * float(np.abs(ref).max())
    assert np.array_equal(cpu.silu_mul(g[1:2], u[1:2]), got[1:2])


def test_kv_cache_is_f16_rounded_to_nearest_even():
    """The table allocates float16 caches; kv_cache_write stores k and v rounded to nearest even (ggml
    cpy f32 -> f16), at [start_pos, start_pos + T); a float32 cache (another allocator) takes them as is."""
    ck, cv = cpu.allocate((6, 2, 4)), cpu.allocate((6, 2, 4))
    assert ck.dtype == np.float16 and float(np.abs(ck).sum()) == 0
    rng = np.random.default_rng(9)
    k = (rng.standard_normal((3, 2, 4)) * 1000).astype(np.float32)
    v = rng.standard_normal((3, 8)).astype(np.float32)
    cpu.kv_cache_write(k, v, ck, cv, 2)
    assert np.array_equal(ck[2:5], k.astype(np.float16)) and np.array_equal(cv[2:5], v.reshape(3, 2, 4).astype(np.float16))
    assert float(np.abs(ck[:2]).sum()) == 0 and float(np.abs(ck[5:]).sum()) == 0
    fk, fv = np.zeros((6, 2, 4), np.float32), np.zeros((6, 2, 4), np.float32)
    cpu.kv_cache_write(k, v, fk, fv, 0)
    assert np.array_equal(fk[:3], k)


def _attention_case(t: int, start: int, h: int, hkv: int, dk: int, dv: int, seed: int):
    rng = np.random.default_rng(seed)
    s = start + t
    ck, cv = cpu.allocate((s + 3, hkv, dk)), cpu.allocate((s + 3, hkv, dv))
    cpu.kv_cache_write(rng.standard_normal((s, hkv, dk)).astype(np.float32),
                       rng.standard_normal((s, hkv * dv)).astype(np.float32), ck, cv, 0)
    q = (rng.standard_normal((t, h, dk)) * 2).astype(np.float32)
    return q, ck, cv


@pytest.mark.parametrize("t, start, window, scale_q, scale", [
    (1, 9, 0, False, None), (5, 0, 0, False, None), (4, 6, 3, True, 0.25), (1, 20, 8, False, 0.3), (9, 0, 4, True, None),
])
def test_attention_matches_reference_over_the_same_cache(t, start, window, scale_q, scale):
    """llama.cpp's attention over the F16 cache (q rounded to F16, after the scale with scale_q; F16 dot
    products, ggml softmax, probabilities rounded to F16) equals the reference attention over the same cached
    values in float32 within those F16 roundings; GQA (4 heads on 2 KV heads), hd_k != hd_v, causal and
    sliding-window masks, decode (T = 1) and prefill (T > 1: the tinyBLAS lane order) routes; the portable
    code gives the AVX2 bits."""
    q, ck, cv = _attention_case(t, start, 4, 2, 40, 24, seed=t * 7 + start)
    kw = {"scale": scale, "window": window, "scale_q": scale_q}
    got = _both_paths(lambda: cpu.attention(q, ck, cv, start, **kw))
    assert got[0].shape == (t, 4 * 24) and all(np.array_equal(g, got[0]) for g in got)
    ck32, cv32 = ck.astype(np.float32), cv.astype(np.float32)
    ref = reference.attention(torch.from_numpy(q), torch.from_numpy(ck32), torch.from_numpy(cv32), start, **kw).numpy()
    assert np.abs(got[0] - ref).max() < 4 * F16_EPS * float(np.abs(cv32).max()) * 4
    # a float32 cache (another allocator) runs the reference attention
    assert np.array_equal(cpu.attention(q, ck32, cv32, start, **kw), ref)


def test_attention_routes_follow_the_micro_batch():
    """The lane order of the F16 dot products follows llama.cpp's micro-batch: a prompt of several tokens
    (tinyBLAS) and the same rows one at a time (vec_dot_f16) agree to float32 rounding, and the route
    follows the micro-batch the executor reports (begin_step), not the rows of one call."""
    q, ck, cv = _attention_case(6, 0, 2, 1, 64, 64, seed=3)
    full = cpu.attention(q, ck, cv, 0)
    rows = np.concatenate([cpu.attention(q[i:i + 1], ck, cv, i) for i in range(6)])
    assert np.abs(full - rows).max() < 1e-5 and not np.array_equal(full[1:], rows[1:])
    cpu.begin_step(4, 2)  # rows 4..5 of a 6-row prompt frame: the prompt's micro-batch, tinyBLAS
    try:
        tail = cpu.attention(q[4:6], ck, cv, 4)
    finally:
        cpu.begin_step(0, 0)
    assert np.array_equal(tail, full[4:6])


def test_ubatches_split_rows_like_llama_cpp():
    """ubatches: prompt rows are cut at multiples of UBATCH positions, each slice tagged with the size of
    the micro-batch it ends; a call whose rows differ from the step's (the last block's output row) or a
    one-row step is its own batch; no step begun: one batch of the call's rows."""
    assert cpu.ubatches(7) == [(0, 7, 7)]
    cpu.begin_step(0, 600)
    try:
        assert cpu.ubatches(600) == [(0, 512, 512), (512, 600, 88)]
        assert cpu.ubatches(1) == [(0, 1, 1)]
    finally:
        cpu.begin_step(0, 0)
    cpu.begin_step(512 + 64, 3)  # the last 3 rows of a 579-token prompt sent in frames of 64
    try:
        assert cpu.ubatches(3) == [(0, 3, 67)]
    finally:
        cpu.begin_step(0, 0)
    assert cpu.ubatches(3) == [(0, 3, 3)]


@pytest.mark.parametrize("call, args", [
    ("rms_norm", lambda: (np.zeros(10, np.float32), None, np.zeros(9, np.float32), 5, 1e-6)),
    ("rope", lambda: (np.zeros(8, np.float32), np.zeros(8, np.float32), np.zeros((1, 4), np.float32), 1, 8, 4, 1, True)),
    ("geglu", lambda: (np.zeros(4, np.float32), np.zeros(3, np.float32), np.zeros(4, np.float32))),
    ("swiglu", lambda: (np.zeros(8, np.float32), np.zeros(8, np.float32), np.zeros(8, np.float32), 3)),
    ("kv_store_rows", lambda: (np.zeros((2, 4), np.float32), np.zeros((2, 4), np.float16), 4, 1)),
    ("attention", lambda: (np.zeros((1, 1, 8), np.float32), np.zeros((2, 1, 8), np.float16),
                           np.zeros((2, 1, 8), np.float16), np.zeros((1, 8), np.float32), 1, 1, 8, 8, 2, 1.0, 1.0, 0, 1)),
    ("rope_cache", lambda: (4, 3, 10000.0, np.zeros(12, np.float32))),
])
def test_extension_rejects_bad_buffers(call, args):
    """The extension's entry points refuse wrong sizes, odd rope dims and positions past the table or
    cache with a ValueError naming the kernel (never a read or write out of bounds)."""
    with pytest.raises(ValueError, match=call.split("_")[0] if call != "kv_store_rows" else "kv_store"):
        getattr(cpu._qkernels, call)(*args())


def test_executor_binds_f16_caches_and_output_rows_only(stories_path):
    """With the CPU table the executor allocates float16 caches (half the reference's bytes), builds rope
    tables with the table's rope_table, and when only the last logits are asked for computes the last
    block after its attention projection for the output row alone (llama.cpp inp_out_ids): the logits
    equal the full forward's last row to float32 rounding."""
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.runtime.loader import stage_slices
    from pipeplan.runtime.program import HParams, StageExecutor, build_stage_program

    facts = read_model_facts(stories_path)
    hp = HParams.from_facts(facts)
    w = cpu.load_stage_weights(list(facts.files), stage_slices(facts, 0, 5, True, True))
    ex = StageExecutor(hp, build_stage_program(hp, 0, 5, True, True, 16), w, 16, cpu)
    rf = StageExecutor(hp, build_stage_program(hp, 0, 5, True, True, 16), w, 16, reference)
    assert all(c.dtype == np.float16 for c in ex.caches.values()) and ex.kv_cache_bytes * 2 == rf.kv_cache_bytes
    assert np.array_equal(ex._static["rope_table"], cpu.rope_table(16, hp.rope_dim, hp.rope_base))
    assert ex._tail_at > 0 and "h4" in ex._tail_rows and rf._tail_at == -1
    ids = np.array([1, 403, 407, 261, 378, 292], dtype=np.int64)
    last = ex.forward(ids, 0, last_only=True).copy()
    ex.reset()
    full = ex.forward(ids, 0)
    assert isinstance(last, np.ndarray) and last.shape == (1, hp.n_vocab)
    assert np.abs(last[0] - full[-1]).max() < 1e-4
