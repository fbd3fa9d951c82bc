"""CPU kernel table (``pipeplan.runtime.kernels.cpu``): weights quantized at rest, matmuls on the GGUF bytes.

Each quantized type's matmul is checked on odd shapes (several N, K an odd multiple of the block size,
T = 1 and T > 1) against ``gguf.quants`` dequantization + a float64 matmul, on both code paths (AVX2
and portable), with a tolerance derived from the activation quantization (module helper
:func:`_act_error_bound`); the embedding gather is checked row-exact against ``gguf.quants``.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType as QT
from gguf import quants
from pipeplan.runtime.dequant import DequantError, QuantTensor, WeightTypeError
from pipeplan.runtime.kernels import cpu
from pipeplan.runtime.loader import load_quantized_weights, slice_of

from tests import ggufgen

pytestmark = pytest.mark.usefixtures("one_torch_thread")

QUANTIZED = ("F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K")
K_QUANTS = ("Q4_K", "Q5_K", "Q6_K")
SIMD = [True, False] if cpu.available() and cpu._qkernels.cpu_has_avx2() else [False]
F16_EPS, BF16_EPS = 2.0 ** -11, 2.0 ** -8  # unit roundoff of the activation types


def _f16(v: float) -> np.ndarray:
    return np.frombuffer(np.float16(v).tobytes(), np.uint8)


def _random_k_blocks(ggml_type: str, n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Valid random K-quant rows ``[n, row_bytes]``: random quants/scales bytes, small finite f16 scales."""
    block, size = gguf.GGML_QUANT_SIZES[QT[ggml_type]]
    b = rng.integers(0, 256, (n, k // block, size), dtype=np.uint8)
    if ggml_type == "Q6_K":
        b[..., 208:210] = _f16(0.002)
    else:
        b[..., 0:2] = _f16(0.003)
        b[..., 2:4] = _f16(0.001)
    return b.reshape(n, -1)


def _weight(ggml_type: str, n: int, k: int, seed: int = 0) -> np.ndarray:
    """Rows ``[n, row_bytes]`` of ``ggml_type``: gguf.quants for the types it can quantize, random blocks
    for the K-quants."""
    rng = np.random.default_rng(seed)
    if ggml_type in K_QUANTS:
        return _random_k_blocks(ggml_type, n, k, rng)
    w = (rng.standard_normal((n, k)) * 0.05).astype(np.float32)
    return quants.quantize(w, QT[ggml_type])


def _dequant(ggml_type: str, data: np.ndarray, k: int) -> np.ndarray:
    return quants.dequantize(data, QT[ggml_type]).astype(np.float64).reshape(-1, k)


def _act_error_bound(ggml_type: str, x: np.ndarray) -> np.ndarray:
    """Per-element bound on ``|x - x_quantized|`` for the activation type of ``ggml_type``'s matmul.

    Q8_0/Q8_1 (blocks of 32): step ``d = amax/127``, rounding error <= d/2, plus the f16 rounding of
    ``d`` times at most 127: ``amax * (1/254 + 2^-11)``. Q8_K (blocks of 256): float32 scale,
    ``amax/254`` (+ slack). F16 / BF16 activations: ``|x| * u`` with u = 2^-11 / 2^-8."""
    vdt = cpu.VEC_DOT_TYPE[ggml_type]
    if vdt in ("F16", "BF16"):
        return np.abs(x) * (F16_EPS if vdt == "F16" else BF16_EPS)
    block = 256 if vdt == "Q8_K" else 32
    amax = np.abs(x).reshape(x.shape[0], -1, block).max(axis=-1, keepdims=True)
    per = amax * ((1 / 254 + 1e-6) if vdt == "Q8_K" else (1 / 254 + F16_EPS))
    return np.broadcast_to(per, (x.shape[0], x.shape[1] // block, block)).reshape(x.shape)


def _check_matmul(ggml_type: str, n: int, k: int, t: int, simd: bool, seed: int = 0) -> None:
    data = _weight(ggml_type, n, k, seed)
    w = _dequant(ggml_type, data, k)
    x = (np.random.default_rng(seed + 1).standard_normal((t, k)) * 2).astype(np.float32)
    qt = QuantTensor(ggml_type, (n, k), data, "w")
    prev = cpu._qkernels.set_simd(simd)
    try:
        got = cpu.KERNELS["matmul"](x, qt).astype(np.float64)
    finally:
        cpu._qkernels.set_simd(prev)
    assert got.shape == (t, n)
    want = x.astype(np.float64) @ w.T
    # activation quantization (the derived bound) + q8_1's f16 block sums + float32 accumulation
    tol = _act_error_bound(ggml_type, x) @ np.abs(w).T + 1e-5 * (np.abs(x) @ np.abs(w).T) + 1e-6
    err = np.abs(got - want)
    assert (err <= tol).all(), (ggml_type, n, k, t, simd, float((err - tol).max()))
    # the bound is tight: a few percent of the output's absolute scale, not "anything goes"
    assert float(tol.max()) < 0.05 * float((np.abs(x) @ np.abs(w).T).max())


@pytest.mark.parametrize("simd", SIMD, ids=lambda s: "avx2" if s else "portable")
@pytest.mark.parametrize("ggml_type", QUANTIZED)
def test_matmul_matches_dequantized_f32_on_odd_shapes(ggml_type, simd):
    """Every quantized type: the CPU matmul equals gguf.quants dequantize + matmul within the error the
    activation quantization allows (vec_dot_type Q8_0/Q8_1/Q8_K/F16/BF16), on odd shapes: N in {1, 7, 37},
    K an odd multiple of the block (3 or 5 blocks), T in {1, 5}."""
    block = 256 if ggml_type in K_QUANTS else 32
    for n, kb, t in ((1, 3, 1), (7, 5, 1), (37, 3, 5), (7, 1, 5)):
        _check_matmul(ggml_type, n, kb * block, t, simd, seed=n * 10 + t)


@pytest.mark.parametrize("ggml_type", ("Q8_0", "Q4_K", "Q5_0"))
def test_matmul_is_exact_integer_arithmetic_on_quantized_activations(ggml_type):
    """The kernel computes sum_b d_w*d_x*sum(q_w*q_x) on the activation quantized the way ggml's x86
    build does (Q8_0: id = 127/amax, round half to even; Q8_K: iscale = -127/max): against that
    emulation in float64 the difference is float32 rounding only (1e-5 of the absolute sum)."""
    n, k, t = 9, 768, 3
    data = _weight(ggml_type, n, k, 3)
    w = _dequant(ggml_type, data, k)
    x = (np.random.default_rng(4).standard_normal((t, k)) * 3).astype(np.float32)
    xq = np.empty((t, cpu._qkernels.row_bytes(gguf.GGMLQuantizationType[cpu.VEC_DOT_TYPE[ggml_type]], k)), np.uint8)
    cpu._qkernels.quantize_act(x, int(QT[ggml_type]), k, xq)
    if cpu.VEC_DOT_TYPE[ggml_type] == "Q8_0":
        blocks = x.reshape(t, -1, 32)
        amax = np.abs(blocks).max(-1, keepdims=True)
        with np.errstate(divide="ignore"):
            q = np.rint(blocks * np.where(amax == 0, 0, np.float32(127) / amax).astype(np.float32))
        emul = (q * (amax / np.float32(127)).astype(np.float16).astype(np.float32)).reshape(t, k)
        assert np.array_equal(quants.dequantize(xq, QT.Q8_0), emul)  # same bytes as the emulation
    else:  # Q8_K: float32 d, int8 qs, int16 bsums
        blk = xq.reshape(t, -1, 292)
        d = blk[..., :4].copy().view(np.float32)
        qs = blk[..., 4:260].view(np.int8).astype(np.float32)
        bsums = blk[..., 260:].copy().view(np.int16)
        assert np.array_equal(bsums, qs.reshape(t, -1, 16, 16).sum(-1).astype(np.int16))
        emul = (qs * d).reshape(t, k)
        assert np.abs(emul - x).max() <= np.abs(x).max() / 254 * 1.001
    got = cpu.matmul(x, QuantTensor(ggml_type, (n, k), data))
    ref = emul.astype(np.float64) @ w.T
    assert np.abs(got - ref).max() <= 1e-5 * (np.abs(emul) @ np.abs(w).T).max()


@pytest.mark.parametrize("ggml_type", QUANTIZED)
def test_embedding_gather_rows_exact(ggml_type):
    """The quantized embedding gather dequantizes only the rows it reads, bit-exactly as gguf.quants; the
    ``scale`` attribute multiplies them in float32 (gemma3's sqrt(n_embd))."""
    block = 256 if ggml_type in K_QUANTS else 32
    n, k = 41, 3 * block
    data = _weight(ggml_type, n, k, 7)
    table = QuantTensor(ggml_type, (n, k), data, "token_embd.weight")
    ids = np.array([40, 0, 17, 17, 3], dtype=np.int64)
    rows = cpu.KERNELS["embedding_gather"](ids, table)
    want = quants.dequantize(data[ids], QT[ggml_type]).astype(np.float32)
    assert isinstance(rows, np.ndarray) and rows.dtype == np.float32 and np.array_equal(rows, want)
    scaled = cpu.KERNELS["embedding_gather"](ids, table, scale=25.298221281347036)
    assert np.array_equal(scaled, want * np.float32(25.298221281347036))
    with pytest.raises(ValueError, match="outside"):
        cpu.dequantize_rows(table, [n])


def test_gemma3_real_q4_k_and_q6_k_rows(gemma3_path):
    """Blocks of the real Gemma 3 file (Q4_K attn_output, Q6_K ffn_down, Q5_0 ffn_up, Q8_0 token_embd):
    matmul within the activation-quantization bound of dequantize + matmul; gathered rows exact."""
    from pipeplan.frontend.gguf_facts import read_model_facts

    facts = read_model_facts(gemma3_path)
    rng = np.random.default_rng(5)
    for name in ("blk.0.attn_output.weight", "blk.0.ffn_down.weight", "blk.0.ffn_up.weight", "token_embd.weight"):
        t = facts.tensor(name)
        k = int(t.shape[0])
        row_bytes = t.n_bytes // int(t.shape[1])
        rows = np.fromfile(gemma3_path, dtype=np.uint8, count=13 * row_bytes, offset=t.offset).reshape(13, -1)
        qt = QuantTensor(t.ggml_type, (13, k), rows, name)  # 13 rows: odd N
        w = quants.dequantize(rows, QT[t.ggml_type]).astype(np.float64)
        x = rng.standard_normal((2, k)).astype(np.float32)
        got = cpu.matmul(x, qt)
        tol = _act_error_bound(t.ggml_type, x) @ np.abs(w).T + 1e-5 * (np.abs(x) @ np.abs(w).T)
        assert (np.abs(got - x @ w.T) <= tol).all(), name
        assert np.array_equal(cpu.dequantize_rows(qt, [12, 0]), w[[12, 0]].astype(np.float32))
    assert {facts.tensor(n).ggml_type for n in ("blk.0.attn_output.weight", "blk.0.ffn_down.weight")} == {"Q4_K", "Q6_K"}


def test_float32_weights_use_ggml_f32_arithmetic():
    """A contiguous float32 weight (F32 tensors, zero-copy views) runs ggml's F32 arithmetic
    (ggml_vec_dot_f32: 4 x 8 lanes, the rest of K added in float; a prompt of 2+ rows with K % 8 == 0
    and N % 4 == 0: llamafile's tinyBLAS): equal to F.linear within float32 rounding, the same bits on the
    portable and AVX2 paths; a non-contiguous weight is made contiguous first (the same bits)."""
    g = np.random.default_rng(5)
    for t, n, k in ((1, 5, 75), (3, 8, 64), (3, 7, 64)):
        x, w = g.standard_normal((t, k), dtype=np.float32), g.standard_normal((n, k), dtype=np.float32)
        got = _both_paths_mm(lambda x=x, w=w: cpu.matmul(x, w))
        assert all(np.array_equal(a, got[0]) for a in got)
        ref = x.astype(np.float64) @ w.T.astype(np.float64)
        assert np.abs(got[0] - ref).max() <= 1e-5 * (np.abs(x) @ np.abs(w).T).max()
    wt = g.standard_normal((64, 5), dtype=np.float32).T
    assert not wt.flags.c_contiguous
    assert np.array_equal(cpu.matmul(x[:, :64], wt), cpu.matmul(x[:, :64], np.ascontiguousarray(wt)))


def test_kernel_table_has_the_reference_names():
    """Same KERNELS names as the reference table, every one this table's own (numpy; the ggml-faithful
    ones on the C extension), none the torch reference's."""
    from pipeplan.runtime.kernels import reference

    assert set(cpu.KERNELS) == set(reference.KERNELS)
    assert all(cpu.KERNELS[n] is not reference.KERNELS[n] and cpu.KERNELS[n].__module__ == cpu.__name__
               for n in cpu.KERNELS)
    assert cpu.ARRAYS == "numpy"


def test_quant_tensor_rejects_wrong_sizes():
    """QuantTensor checks its bytes against type and shape (DequantError names the tensor)."""
    data = _weight("Q8_0", 4, 64)
    with pytest.raises(DequantError, match="blk.0.attn_q.weight"):
        QuantTensor("Q8_0", (5, 64), data, "blk.0.attn_q.weight")
    with pytest.raises(DequantError, match="block size"):
        QuantTensor("Q4_K", (4, 64), data)
    with pytest.raises(cpu.CpuKernelError, match="K differs"):
        cpu.matmul(np.zeros((1, 32), np.float32), QuantTensor("Q8_0", (4, 64), data))


# ----------------------------------------------------------------------------------- loading


@pytest.fixture(scope="module")
def q8_model(tmp_path_factory) -> Path:
    """A 2-block random llama (hidden 64) in Q8_0 (norms F32, ffn_down of ne0 = 96 Q8_0 too)."""
    return ggufgen.write_random_llama(tmp_path_factory.mktemp("q8") / "m.gguf", blocks=2, hidden=64, heads=4,
                                      kv_heads=2, ffn=96, vocab=64, ggml_type="Q8_0")


def _mapping_of(addr: int) -> str:
    """The file backing virtual address ``addr`` in this process (/proc/self/maps), '' if anonymous."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        parts = line.split(maxsplit=5)
        lo, hi = (int(v, 16) for v in parts[0].split("-"))
        if lo <= addr < hi:
            return parts[5] if len(parts) > 5 else ""
    return ""


def test_loader_keeps_matrices_quantized_and_f32_zero_copy(q8_model):
    """12.2: matrices stay QuantTensor views of the mapped GGUF (no float32 copy), F32 tensors are numpy views
    of the same map (their memory is the file's), norms stay 1-D float32."""
    from pipeplan.frontend.gguf_facts import read_model_facts

    facts = read_model_facts(q8_model)
    slices = [slice_of(t) for t in facts.tensors]
    w = cpu.load_stage_weights(facts.files, slices)
    assert w.tensor_bytes == sum(t.n_bytes for t in facts.tensors)
    q = w["blk.0.attn_q.weight"]
    assert isinstance(q, QuantTensor) and q.ggml_type == "Q8_0" and q.shape == (64, 64)
    assert _mapping_of(q.data.ctypes.data) == str(q8_model)
    norm = w["blk.0.attn_norm.weight"]
    assert isinstance(norm, np.ndarray) and norm.dtype == np.float32 and tuple(norm.shape) == (64,)
    assert _mapping_of(norm.ctypes.data) == str(q8_model)  # zero-copy: the array's memory is the file map
    assert not any(isinstance(v, np.ndarray) and v.ndim >= 2 for v in w.values())


def test_stage_runs_quantized_weights_like_the_reference(q8_model):
    """A StageExecutor on the CPU table (QuantTensor weights) gives the reference target's greedy ids on a
    Q8_0 model and logits within 2% of the reference's range (activation quantization)."""
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.runtime.loader import load_stage_weights, stage_slices
    from pipeplan.runtime.program import LlamaHParams, StageExecutor, build_stage_program

    from tests.executor_chain import greedy_generate

    facts = read_model_facts(q8_model)
    hp = LlamaHParams.from_facts(facts)
    slices = stage_slices(facts, 0, hp.n_layer, True, True)
    prog = build_stage_program(hp, 0, hp.n_layer, True, True, 32)
    ex_cpu = StageExecutor(hp, prog, cpu.load_stage_weights(facts.files, slices), 32, cpu)
    ex_ref = StageExecutor(hp, prog, load_stage_weights(facts.files, slices), 32)
    ids = np.array([1, 5, 9, 2], dtype=np.int64)
    a, b = ex_cpu.forward(ids, 0), ex_ref.forward(torch.from_numpy(ids), 0).numpy()
    assert isinstance(a, np.ndarray) and float(np.abs(a - b).max()) <= 0.02 * float(np.abs(b).max())
    assert greedy_generate([ex_cpu], [1, 5, 9], 8) == greedy_generate([ex_ref], [1, 5, 9], 8)


def _rewrite_with_raw_type(src: Path, dst: Path, name: str, qtype: QT) -> Path:
    """Copy ``src`` with tensor ``name`` re-typed as ``qtype`` (random bytes of the right size)."""
    reader = gguf.GGUFReader(src)
    tensors = []
    for t in reader.tensors:
        shape = tuple(int(d) for d in reversed([int(x) for x in t.shape]))
        if t.name == name:
            def make(shape=shape):
                block, size = gguf.GGML_QUANT_SIZES[qtype]
                return np.random.default_rng(0).integers(0, 256, int(np.prod(shape)) // block * size, dtype=np.uint8)

            tensors.append(ggufgen._Tensor(t.name, shape, qtype, make))
        else:
            tensors.append(ggufgen._Tensor(t.name, shape, t.tensor_type, lambda t=t: np.array(t.data)))
    ggufgen._write(dst, ggufgen._arch(reader), ggufgen._source_kvs(reader, None), tensors)
    return dst


@pytest.mark.parametrize("qtype", (QT.Q2_K, QT.IQ2_XS, QT.Q3_K))
def test_unsupported_type_is_a_bind_fault_naming_tensor_and_type(tmp_path, qtype):
    """12.2: a ggml type the CPU kernels do not execute is WeightTypeError (kind bind) at load, and a stage
    worker on the CPU target faults with StageFault(bind) naming the tensor and the type."""
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.errors import StageFault
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.frontend.pool import local_pool
    from pipeplan.plan_types import RuntimeConfig
    from pipeplan.runtime.events import StageFaulted
    from pipeplan.runtime.stage import StageWorker

    src = ggufgen.write_random_llama(tmp_path / "f32.gguf", blocks=1, hidden=256, heads=2, kv_heads=2, ffn=256,
                                     vocab=32)
    bad = _rewrite_with_raw_type(src, tmp_path / "bad.gguf", "blk.0.ffn_down.weight", qtype)
    facts = read_model_facts(bad)
    with pytest.raises(WeightTypeError, match=f"blk.0.ffn_down.weight has ggml type {qtype.name}") as e:
        load_quantized_weights(facts.files, [slice_of(t) for t in facts.tensors], types=cpu.CPU_TYPES)
    assert e.value.kind == "bind"
    prov = project_provisions(plan_run(facts, RuntimeConfig(max_seq_len=16), local_pool(1), 1))[0]
    events = []
    with pytest.raises(StageFault) as f:
        StageWorker(prov, events.append, kernels="pipeplan.runtime.kernels.cpu").load()
    assert f.value.kind == "bind" and "blk.0.ffn_down.weight" in f.value.detail and qtype.name in f.value.detail
    assert [type(ev) for ev in events] == [StageFaulted]


def test_every_virtual_target_dtype_runs_on_cpu():
    """Every dtype the virtual targets declare (targets/virtual_queue.py DTYPES) is in CPU_TYPES and
    a matrix of it runs through the CPU table's matmul (F32 by ggml's F32 arithmetic, the rest on their GGUF bytes)."""
    from pipeplan.targets import virtual_queue, virtual_slot

    for dtype in sorted(set(virtual_queue.DTYPES) | set(virtual_slot.DTYPES)):
        name = dtype.upper()
        assert name in cpu.CPU_TYPES, dtype
        if name == "F32":
            w = np.random.default_rng(3).standard_normal((3, 256), dtype=np.float32)
            assert np.allclose(cpu.matmul(np.ones((1, 256), np.float32), w), w.sum(1)[None], atol=1e-4)
            continue
        _check_matmul(name, 3, 256, 2, simd=SIMD[0])


def test_f32_mapping_is_private_copy_on_write(q8_model):
    """F32 views come from a private (copy-on-write) map: writing one never changes the GGUF file."""
    from pipeplan.frontend.gguf_facts import read_model_facts

    facts = read_model_facts(q8_model)
    before = q8_model.read_bytes()
    w = cpu.load_stage_weights(facts.files, [slice_of(facts.tensor("output_norm.weight"))])
    np.add(w["output_norm.weight"], 1.0, out=w["output_norm.weight"])
    assert q8_model.read_bytes() == before


def test_threads_split_rows_with_identical_results():
    """A thread count > 1 splits the output rows; each row is the same dot product, so the result is
    bit-identical to one thread (the matmul follows cpu.get_num_threads())."""
    q = cpu._qkernels
    data = _weight("Q4_K", 512, 2048, 11)
    x = np.random.default_rng(12).standard_normal((3, 2048)).astype(np.float32)
    one, two = np.empty((3, 512), np.float32), np.empty((3, 512), np.float32)
    q.mul_mat(data, int(QT.Q4_K), 512, 2048, x, one, 1)
    q.mul_mat(data, int(QT.Q4_K), 512, 2048, x, two, 2)
    assert np.array_equal(one, two)
    n = cpu.get_num_threads()
    cpu.set_num_threads(2)
    try:
        got = cpu.matmul(x, QuantTensor("Q4_K", (512, 2048), data))
    finally:
        cpu.set_num_threads(n)
    assert np.array_equal(got, one)


def test_extension_rejects_bad_buffers():
    """The extension checks every size before computing: wrong weight bytes, ragged x, wrong out size,
    read-only out, a type without a matmul (Q8_K, an activation-only type; F32 has ggml's F32 one), a
    row length off the block size: ValueError."""
    q = cpu._qkernels
    w = _weight("Q8_0", 4, 64)
    x = np.ones((2, 64), np.float32)
    out = np.empty((2, 4), np.float32)
    q.mul_mat(w, 8, 4, 64, x, out)  # the valid call
    cases = [
        ((w[:3], 8, 4, 64, x, out), "weight has"),
        ((w, 8, 4, 64, np.ones(65, np.float32), out), "x has"),
        ((w, 8, 4, 64, x, np.empty((2, 5), np.float32)), "out has"),
        ((w, 8, 4, 64, x, np.empty((2, 4), np.float32)[:, ::2]), "C-contiguous"),
        ((w, 10, 4, 64, x, out), "no quantized matmul"),
        ((w, 15, 4, 64, x, out), "no quantized matmul"),
        ((np.ones((4, 64), np.float32)[:3], 0, 4, 64, x, out), "weight has"),
        ((w, 8, 4, 48, x, out), "bad matmul shape"),
    ]
    ro = np.empty((2, 4), np.float32)
    ro.flags.writeable = False
    cases.append(((w, 8, 4, 64, x, ro), "writable"))
    for args, msg in cases:
        with pytest.raises(ValueError, match=msg):
            q.mul_mat(*args)
    with pytest.raises(ValueError, match="int64"):
        q.get_rows(w, 8, 64, np.array([0], np.int32), np.empty((1, 64), np.float32))
    with pytest.raises(ValueError, match="cannot be dequantized"):
        q.get_rows(w, 10, 64, np.array([0], np.int64), np.empty((1, 64), np.float32))


def test_portable_kernels_forced_by_environment():
    """PIPEPLAN_CPU_KERNELS=portable selects the portable C kernels at import (the AVX2 ones otherwise,
    when the CPU has AVX2/FMA/F16C)."""
    import subprocess
    import sys

    code = "from pipeplan.runtime.kernels import cpu; print(cpu.simd())"
    env = {**__import__("os").environ, "PIPEPLAN_CPU_KERNELS": "portable"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert cpu.simd() == cpu._qkernels.cpu_has_avx2()


@pytest.mark.parametrize("ggml_type", QUANTIZED)
def test_prefill_rows_equal_decode_rows_bit_for_bit(ggml_type):
    """A matmul of T rows gives, row for row, exactly the T = 1 result (the multi-row kernels keep the
    single-row arithmetic), so prefill and decode agree to the bit."""
    block = 256 if ggml_type in K_QUANTS else 32
    n, k, t = 19, 3 * block, 7
    qt = QuantTensor(ggml_type, (n, k), _weight(ggml_type, n, k, 21))
    x = (np.random.default_rng(22).standard_normal((t, k)) * 2).astype(np.float32)
    for simd in SIMD:
        prev = cpu._qkernels.set_simd(simd)
        try:
            full = cpu.matmul(x, qt)
            rows = np.concatenate([cpu.matmul(x[i:i + 1], qt) for i in range(t)])
        finally:
            cpu._qkernels.set_simd(prev)
        assert np.array_equal(full, rows), (ggml_type, simd)


def _mm(qt: QuantTensor, x: np.ndarray, ub: int) -> np.ndarray:
    out = np.empty((x.shape[0], qt.shape[0]), np.float32)
    cpu._qkernels.mul_mat(qt.data, qt.type_id, qt.shape[0], qt.shape[1], np.ascontiguousarray(x), out, 1, ub)
    return out


@pytest.mark.parametrize("ggml_type, n, ub", [("Q4_K", 16, 6), ("Q4_K", 16, 9), ("Q4_K", 16, 1), ("Q6_K", 19, 9),
                                              ("Q5_K", 7, 8), ("Q4_K", 21, 12)])
def test_llama_cpp_matmul_routes(ggml_type, n, ub):
    """The route llama.cpp's CPU backend takes for a micro-batch of ``ub`` rows: Q4_K with N % 8 == 0 is
    repacked (rows in fours through the gemm arithmetic, the last ub % 4 through the gemv arithmetic),
    other K-quants with ub >= 8 take the tiled kernel's arithmetic, the rest vec_dot. Every route stays
    within the activation-quantization bound of dequantize + matmul; each row of a multi-row call is the
    same route's one-row result bit for bit (gemm rows: a 4-row call; gemv rows: ub = 1); the portable
    code gives the AVX2 bits."""
    k = 3 * 256
    data = _weight(ggml_type, n, k, 31)
    qt = QuantTensor(ggml_type, (n, k), data)
    t = min(ub, 6) if ub < 8 else ub
    x = (np.random.default_rng(32).standard_normal((t, k)) * 2).astype(np.float32)
    got = _both_paths_mm(lambda: _mm(qt, x, ub))
    assert all(np.array_equal(g, got[0]) for g in got)
    w = _dequant(ggml_type, data, k)
    tol = _act_error_bound(ggml_type, x) @ np.abs(w).T + 1e-5 * (np.abs(x) @ np.abs(w).T) + 1e-6
    assert (np.abs(got[0] - x.astype(np.float64) @ w.T) <= tol).all()
    repack = ggml_type == "Q4_K" and n % 8 == 0
    gemv = ub % 4 if repack else 0
    for i in range(t):
        if repack and i < t - gemv:
            g0 = (i // 4) * 4
            one = _mm(qt, x[g0:g0 + 4], 4)[i - g0] if g0 + 4 <= t - gemv else None
        else:
            one = _mm(qt, x[i:i + 1], 1 if repack else ub)[0]
        if one is not None:
            assert np.array_equal(got[0][i], one), (ggml_type, n, ub, i)


def _both_paths_mm(fn):
    out = []
    for simd in SIMD:
        prev = cpu._qkernels.set_simd(simd)
        try:
            out.append(fn())
        finally:
            cpu._qkernels.set_simd(prev)
    return out


def test_repack_and_vec_dot_rows_differ_only_by_float_order():
    """The Q4_K gemv and gemm arithmetic and vec_dot share the integer block sums; their float sums differ
    in rounding only (1e-5 of the absolute sum), and on real data they do differ (why llama.cpp's route
    has to be followed to get its bits)."""
    k, n = 4 * 256, 32
    qt = QuantTensor("Q4_K", (n, k), _weight("Q4_K", n, k, 41))
    x = (np.random.default_rng(42).standard_normal((4, k))).astype(np.float32)
    gemm, gemv = _mm(qt, x, 4), np.concatenate([_mm(qt, x[i:i + 1], 1) for i in range(4)])
    vd = np.empty_like(gemm)
    for i in range(4):  # a 37-row weight is not repacked: the vec_dot route on the same rows
        w37 = QuantTensor("Q4_K", (37, k), np.concatenate([qt.data.reshape(n, -1), qt.data.reshape(n, -1)[:5]]))
        vd[i] = _mm(w37, x[i:i + 1], 1)[0, :n]
    scale = np.abs(x) @ np.abs(_dequant("Q4_K", qt.data, k)).T
    for a, b in ((gemm, gemv), (gemm, vd), (gemv, vd)):
        assert np.abs(a - b).max() <= 1e-5 * scale.max() and not np.array_equal(a, b)


@pytest.mark.parametrize("ggml_type", ("Q4_0", "Q5_0", "Q8_0"))
def test_decode_weight_row_groups_keep_single_row_bits(ggml_type):
    """12.3: a one-row (decode) matmul takes the weight rows several at a time on the AVX2 path (their
    accumulator chains interleave); every output equals the single-row product of its weight row to the bit,
    for N not a multiple of the group (37 rows)."""
    n, k = 37, 5 * 32
    data = _weight(ggml_type, n, k, 31)
    x = (np.random.default_rng(32).standard_normal((1, k)) * 2).astype(np.float32)
    qt = QuantTensor(ggml_type, (n, k), data)
    for simd in SIMD:
        prev = cpu._qkernels.set_simd(simd)
        try:
            full = cpu.matmul(x, qt)
            rows = np.concatenate([cpu.matmul(x, QuantTensor(ggml_type, (1, k), data[r:r + 1])) for r in range(n)],
                                  axis=1)
        finally:
            cpu._qkernels.set_simd(prev)
        assert np.array_equal(full, rows), (ggml_type, simd)
