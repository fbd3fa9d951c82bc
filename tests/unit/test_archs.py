"""Architectures as data (issue 12 item 1; issue 11 items 2, 3 and 8): one stage-program builder per
``general.architecture`` (llama, gemma3, qwen2, qwen3), the kernels they add, refusals at plan time,
non-finite stage outputs, and the virtual targets' dtypes.

Models are made by the tests (tests/ggufgen.py: random F32 weights, small shapes); llama.cpp's greedy ids
for the qwen2 / qwen3 / gemma3 ones are in tests/data/arch_cases.json (made by
tests/data/make_arch_cases.py, which records the command and the GGUF sha256 the test checks).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from pipeplan.errors import GGUFError, RunPlanRejection
from pipeplan.frontend.gguf_facts import read_model_facts
from pipeplan.frontend.planner import plan_run
from pipeplan.frontend.pool import local_pool
from pipeplan.models.archs import check_model, get_arch, known_architectures
from pipeplan.plan_types import RuntimeConfig
from pipeplan.runtime.kernels import reference as R
from pipeplan.runtime.loader import load_stage_weights, stage_slices
from pipeplan.runtime.program import (
    HParams,
    NonFiniteError,
    StageExecutor,
    UnsupportedArchitectureError,
    build_stage_program,
)
from pipeplan.tools.cli import main

from tests.conftest import REPO
from tests.executor_chain import greedy_generate
from tests.ggufgen import poison_tensor, write_random_model

CASES = json.loads((REPO / "tests" / "data" / "arch_cases.json").read_text())
SMALL = dict(blocks=4, hidden=64, heads=4, kv_heads=2, ffn=96, vocab=300)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def gen(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("archs")


@pytest.fixture(scope="module")
def case_files(gen) -> dict[str, Path]:
    """The recorded cases' GGUFs, regenerated (deterministic) into a temp dir."""
    out = {}
    for name, case in CASES["cases"].items():
        out[name] = write_random_model(gen / f"{name}.gguf", **case["args"])
    return out


def _executors(path: Path, ranges: list[tuple[int, int]], max_seq: int = 32) -> list[StageExecutor]:
    facts = read_model_facts(path)
    hp = HParams.from_facts(facts)
    n = len(ranges)
    out = []
    for i, (a, b) in enumerate(ranges):
        w = load_stage_weights(list(facts.files), stage_slices(facts, a, b, i == 0, i == n - 1))
        out.append(StageExecutor(hp, build_stage_program(hp, a, b, i == 0, i == n - 1, max_seq), w, max_seq))
    return out


def _cli(capsys, argv: list[str]) -> tuple[int, str, str]:
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


# --------------------------------------------------------------------------- registry and programs
def test_registry_lists_every_builder():
    """RP-AR-6: architectures are data: each known name has a module whose builder the registry returns;
    an unknown one is UnsupportedArchitectureError naming it and the known ones."""
    assert known_architectures() == ("gemma3", "llama", "qwen2", "qwen3")
    for name in known_architectures():
        assert get_arch(name).name == name
    with pytest.raises(UnsupportedArchitectureError) as ei:
        get_arch("mamba")
    assert ei.value.code == "unsupported_architecture" and "'mamba'" in ei.value.message
    assert "gemma3, llama, qwen2, qwen3" in ei.value.message


def test_llama_program_has_no_new_attributes(stories_path):
    """WL-A-1: llama programs are unchanged by the new architectures: 16 calls per block, NORM rope from
    ``rope_table``, attention without scale/window, no embedding scale (defaults are omitted)."""
    hp = HParams.from_facts(read_model_facts(stories_path))
    prog = build_stage_program(hp, 0, 5, True, True, 16)
    assert len(prog) == 1 + 5 * 16 + 3
    assert prog[0].attrs == {} and {c.kernel for c in prog} == {
        "embedding_gather", "rms_norm", "matmul", "rope", "kv_cache_write", "attention", "add", "silu_mul",
        "last_row"}
    for c in prog:
        if c.kernel == "rope":
            assert c.inputs[1] == "rope_table" and set(c.attrs) == {"n_heads", "head_dim", "rope_dim"}
        if c.kernel == "attention":
            assert c.attrs == {}
    assert hp.to_abi(16) == {"n_embd": 64, "n_head": 8, "n_head_kv": 4, "n_ff": 172, "n_vocab": 512, "n_ctx": 2048,
                             "rope_dim": 8, "n_layer": 5, "max_seq_len": 16, "rope_base": 10000.0,
                             "rms_eps": hp.rms_eps, "tied_embedding": False}


def test_gemma3_facts_and_program(gemma3_path):
    """RP-AR-6: Gemma 3 270M facts: head dim 256 from key_length (not 640/4), rope dims 256, sliding window
    512, per-block KV bytes with 256-wide heads; the program follows llm_build_gemma3: embedding scaled
    by sqrt(640), 20 calls per block, QK norm before NEOX rope, layers il % 6 == 5 global (rope_table,
    no window), the others sliding-window (rope_table_swa at base 10000, window 512), Q scaled by
    1/sqrt(256) instead of the scores (attr scale_q: ``ggml_scale(Qcur, f_attention_scale)``), post norms,
    GELU, tied head."""
    f = read_model_facts(gemma3_path)
    assert (f.architecture, f.head_dim, f.head_dim_v, f.rope_dimension_count) == ("gemma3", 256, 256, 256)
    assert f.param("attention.sliding_window") == 512 and f.kv_bytes_per_block(100) == 2 * 1 * 256 * 100 * 4
    assert sum(f.block_bytes) == sum(t.n_bytes for t in f.tensors if t.block is not None)
    hp = HParams.from_facts(f)
    assert (hp.rope_mode, hp.n_swa, hp.rope_base, hp.rope_base_swa, hp.tied_embedding) == ("neox", 512, 1e6, 1e4, True)
    prog = build_stage_program(hp, 0, 18, True, True, 64)
    assert prog[0].attrs == {"scale": math.sqrt(640)}
    assert len(prog) == 1 + 18 * 20 + 3 and prog[-1].inputs == ("h_norm", "token_embd.weight")
    for b in range(18):
        calls = [c for c in prog if c.block == b]
        kinds = [c.kernel for c in calls]
        assert kinds[4:8] == ["head_rms_norm", "head_rms_norm", "rope", "rope"] and "gelu_mul" in kinds
        assert [c.inputs[1] for c in calls if c.kernel == "rms_norm"] == [
            f"blk.{b}.{n}.weight" for n in ("attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm")]
        rope = next(c for c in calls if c.kernel == "rope")
        att = next(c for c in calls if c.kernel == "attention")
        assert rope.attrs["mode"] == "neox" and rope.attrs["head_dim"] == 256
        scaled = {"scale_q": True}
        if b % 6 == 5:
            assert rope.inputs[1] == "rope_table" and att.attrs == scaled
        else:
            assert rope.inputs[1] == "rope_table_swa" and att.attrs == {**scaled, "window": 512}
    assert check_model(f) == hp


def test_abi_carries_the_architecture(gemma3_path, stories_path):
    """AB-M-3: the vmachine ABI of a gemma3 model carries its architecture fields (arch, head dims, rope
    mode, local base, window, pattern, embedding scale) and gives back the same HParams; llama's has
    none of them; the dialect and HParams agree on the optional field names."""
    from pipeplan.dialects.carriers import build_op, string
    from pipeplan.dialects.vmachine import ABI_OPTIONAL, ProgramOp, abi_of, abi_op
    from pipeplan.models.stage_program import ABI_EXTRA

    assert set(ABI_OPTIONAL) == set(ABI_EXTRA)
    for path, extra in ((gemma3_path, {"arch", "n_embd_head_k", "n_embd_head_v", "rope_mode", "rope_base_swa",
                                       "n_swa", "swa_pattern", "embd_scale"}), (stories_path, set())):
        hp = HParams.from_facts(read_model_facts(path))
        abi = hp.to_abi(64)
        assert set(abi) & set(ABI_EXTRA) == extra
        prog = build_op(ProgramOp, {k: string("") for k in ("target", "deployment", "concrete", "portable",
                                                             "binder", "engine")}, [abi_op(abi)])
        assert isinstance(prog, ProgramOp)
        assert abi_of(prog) == abi and HParams.from_abi(abi_of(prog)) == hp


def test_qwen_programs(case_files):
    """RP-AR-6: qwen2 adds q/k/v biases after the projections (add_bias), qwen3 QK norms over key_length
    32 (wider than 64/4); both rotate NEOX."""
    q2 = HParams.from_facts(read_model_facts(case_files["qwen2"]))
    p2 = build_stage_program(q2, 0, 1, False, False, 8)
    assert [c.kernel for c in p2][4:7] == ["add_bias"] * 3 and p2[4].inputs[1] == "blk.0.attn_q.bias"
    q3f = read_model_facts(case_files["qwen3"])
    q3 = HParams.from_facts(q3f)
    assert (q3f.head_dim, q3.head_dim, q3.rope_dim) == (32, 32, 32)
    p3 = build_stage_program(q3, 0, 1, False, False, 8)
    assert p3[4].kernel == "head_rms_norm" and p3[4].attrs["head_dim"] == 32
    assert all(c.attrs.get("mode") == "neox" for c in p2 + p3 if c.kernel == "rope")


# --------------------------------------------------------------------------- new kernels
def test_kernel_attrs_is_the_programs_one_source(case_files, stories_path, gemma3_path):
    """Issue 13.4: ``kernel_attrs`` (hparams, kernel, block, role) gives every call's attributes of every
    architecture's program, per layer (gemma3: window and local rope table on the sliding-window layers only);
    each ``Arch.kernels`` is exactly the kernels its blocks call; a kernel the architecture does not call, a
    block outside the model, or a head kernel without a role is refused (``unserved_kernel``)."""
    from pipeplan.models.stage_program import (
        STAGE_KERNELS,
        UnservedKernelError,
        kernel_attrs,
        kernel_role,
        rope_table,
    )

    for path in [stories_path, gemma3_path, *case_files.values()]:
        hp = HParams.from_facts(read_model_facts(path))
        prog = build_stage_program(hp, 0, hp.n_layer, True, True, 16)
        for c in prog:
            role = kernel_role(c.kernel, c.outputs[0] if c.outputs else "")
            assert kernel_attrs(hp, c.kernel, c.block, role) == c.attrs, (hp.arch, c)
            if c.kernel == "rope":
                assert c.inputs[1] == rope_table(hp, c.block) and role in ("q", "k")
        assert {c.kernel for c in prog if c.block is not None} == get_arch(hp.arch).kernels
        assert {c.kernel for c in prog if c.block is None} <= set(STAGE_KERNELS)
    g = HParams.from_facts(read_model_facts(gemma3_path))
    assert [("window" in kernel_attrs(g, "attention", b)) for b in range(6)] == [True] * 5 + [False]
    assert [rope_table(g, b) for b in (4, 5)] == ["rope_table_swa", "rope_table"]
    assert kernel_attrs(g, "rope", 0, "k")["n_heads"] == g.n_head_kv != kernel_attrs(g, "rope", 0, "q")["n_heads"]
    llama = HParams.from_facts(read_model_facts(stories_path))
    for args in (("gelu_mul", 0, ""), ("attention", llama.n_layer, ""), ("attention", None, ""), ("rope", 0, "v")):
        with pytest.raises(UnservedKernelError) as ei:
            kernel_attrs(llama, *args)
        assert ei.value.code == "unserved_kernel"


def test_rope_neox_pairs_halves():
    """NEOX rope rotates (x[i], x[i + r/2]) by p * base^(-2i/r); dims >= r pass through."""
    x = torch.randn(3, 2 * 8, generator=torch.Generator().manual_seed(0))
    table = R.rope_table(10, 6, 100.0)
    got = R.rope(x, table, 4, n_heads=2, head_dim=8, rope_dim=6, mode="neox")
    xh = x.view(3, 2, 8)
    want = xh.clone()
    for t in range(3):
        for i in range(3):
            th = (4 + t) * 100.0 ** (-2 * i / 6)
            a, b = xh[t, :, i], xh[t, :, i + 3]
            want[t, :, i] = a * math.cos(th) - b * math.sin(th)
            want[t, :, i + 3] = a * math.sin(th) + b * math.cos(th)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="rope mode"):
        R.rope(x, table, 0, n_heads=2, head_dim=8, rope_dim=6, mode="yarn")


@pytest.mark.parametrize("t,start,window", [(1, 9, 4), (5, 0, 3), (4, 6, 4), (6, 2, 0), (3, 1, 20)])
def test_attention_window_scale_and_value_dim(t, start, window):
    """Sliding-window GQA attention (key j seen by query p iff p - W < j <= p), an explicit softmax
    scale and value heads narrower than key heads, against a dense masked softmax."""
    g = torch.Generator().manual_seed(t * 100 + start)
    h, hkv, hd, hdv, s = 4, 2, 8, 6, 16
    q = torch.randn(t, h, hd, generator=g)
    ck, cv = torch.randn(s, hkv, hd, generator=g), torch.randn(s, hkv, hdv, generator=g)
    got = R.attention(q, ck, cv, start, scale=0.3, window=window)
    want = torch.empty(t, h, hdv)
    for i in range(t):
        p = start + i
        keys = [j for j in range(p + 1) if window <= 0 or p - j < window]
        for hh in range(h):
            kv = hh // (h // hkv)
            sc = torch.softmax(torch.stack([q[i, hh] @ ck[j, kv] for j in keys]) * 0.3, dim=0)
            want[i, hh] = sum(w * cv[j, kv] for w, j in zip(sc, keys))
    torch.testing.assert_close(got, want.reshape(t, h * hdv), rtol=1e-5, atol=1e-5)


def test_head_rms_norm_gelu_mul_add_bias_and_gather_scale():
    """head_rms_norm normalizes each head over head_dim; gelu_mul is the tanh GELU gate; add_bias
    broadcasts over rows; embedding_gather's scale multiplies the gathered rows."""
    g = torch.Generator().manual_seed(1)
    x, w = torch.randn(3, 2 * 4, generator=g), torch.randn(4, generator=g)
    xh = x.view(3, 2, 4)
    want = (xh / torch.sqrt((xh * xh).mean(-1, keepdim=True) + 1e-6) * w).reshape(3, 8)
    torch.testing.assert_close(R.head_rms_norm(x, w, eps=1e-6, n_heads=2, head_dim=4), want)
    a, b = torch.randn(3, 5, generator=g), torch.randn(3, 5, generator=g)
    gelu = 0.5 * a * (1 + torch.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3)))
    torch.testing.assert_close(R.gelu_mul(a, b), gelu * b)
    torch.testing.assert_close(R.add_bias(a, b[0]), a + b[0])
    table = torch.randn(7, 5, generator=g)
    ids = torch.tensor([3, 0, 3])
    torch.testing.assert_close(R.embedding_gather(ids, table, scale=2.5), F.embedding(ids, table) * 2.5)


# --------------------------------------------------------------------------- llama.cpp agreement
@pytest.mark.parametrize("name", sorted(CASES["cases"]))
def test_generated_models_match_llama_cpp(case_files, name):
    """WL-R-2: the qwen2 (biases), qwen3 (QK norm, key_length 32) and gemma3 (window 4, local/global
    bases, post norms, GELU) models the tests generate give llama.cpp's 16 greedy ids, on one stage and
    split over two; the regenerated GGUF is byte-identical to the one the ids were recorded for."""
    case = CASES["cases"][name]
    path = case_files[name]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == case["sha256"], "the generator changed: re-record"
    n = case["args"]["blocks"]
    want = case["greedy_ids"]
    assert greedy_generate(_executors(path, [(0, n)]), case["prompt_ids"], len(want)) == want
    assert greedy_generate(_executors(path, [(0, 1), (1, n)]), case["prompt_ids"], len(want)) == want


@pytest.mark.parametrize("name", sorted(CASES["cases"]))
def test_generated_models_on_the_run_path(case_files, tmp_path, name):
    """RP-PP-3: planning, portable costs, concrete plan, vmachine lowering, the replay package and the
    stage programs the stages bind (2 stages, inproc) cover every architecture: llama.cpp's ids."""
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.runtime.orchestrator import Pipeline
    from pipeplan.runtime.replay import compile_for_run, local_pool_with_peaks

    case = CASES["cases"][name]
    pool, pool_text = local_pool_with_peaks(2)
    module = plan_run(read_model_facts(case_files[name]), RuntimeConfig(max_seq_len=32), pool, 2)
    compiled = compile_for_run(module, pool_text, cache_dir=tmp_path, prompt_len=8)
    with Pipeline(project_provisions(module), backend="inproc", programs=compiled.programs) as pipe:
        ids, _ = pipe.generate_ids(case["prompt_ids"], len(case["greedy_ids"]))
    assert ids == case["greedy_ids"]


# --------------------------------------------------------------------------- refusals at plan time
@pytest.mark.parametrize("kw, code, names", [
    (dict(arch="llama", label="mamba"), "unsupported_architecture", ["'mamba'", "llama"]),
    (dict(arch="llama", extra_tensors={"blk.0.attn_q.bias": (64,)}), "unexpected_tensor", ["blk.0.attn_q.bias"]),
    (dict(arch="qwen2", drop_tensors=["blk.1.attn_k.bias"]), "missing_tensor", ["block 1", "blk.1.attn_k.bias"]),
    (dict(arch="gemma3", drop_tensors=["blk.3.post_ffw_norm.weight"]), "missing_tensor",
     ["block 3", "blk.3.post_ffw_norm.weight"]),
    (dict(arch="llama", kv_overrides={"llama.attention.head_count": 5}), "invalid_hparams", ["head_count = 5"]),
    (dict(arch="qwen3", kv_overrides={"qwen3.rope.dimension_count": 48}), "invalid_hparams", ["rope_dim 48"]),
    (dict(arch="gemma3", kv_overrides={"gemma3.attention.sliding_window": None}), "missing_key",
     ["gemma3.attention.sliding_window"]),
])
def test_plan_refuses_models_the_program_cannot_run(capsys, gen, kw, code, names):
    """RP-F-1, RP-AR-6: `pipeplan plan` refuses, with one error[<code>] line and exit 2, a GGUF whose
    architecture has no builder (never run as llama), whose tensors include one the program would
    ignore, whose block lacks a tensor the program reads (block and tensor named), or whose
    hyperparameters do not fit (invalid_hparams, not missing_key)."""
    arch = kw.pop("arch")
    path = write_random_model(gen / f"bad-{code}-{arch}.gguf", arch=arch, **{**SMALL, **kw})
    rc, out, err = _cli(capsys, ["plan", str(path), "--stages", "2"])
    assert rc == 2 and out == "" and err.startswith(f"error[{code}]: ") and err.count("\n") == 1, err
    for n in names:
        assert n in err, (n, err)


def test_planner_refuses_facts_without_the_programs_tensors(stories_path):
    """RP-AR-6: facts that did not come from the reader (TOML, hand-made) get the same checks in the
    planner: a llama facts index with a bias tensor, or lacking a block tensor, is a typed rejection."""
    import dataclasses

    f = read_model_facts(stories_path)
    extra = dataclasses.replace(f.tensors[-1], name="blk.4.attn_q.bias", shape=(64,), n_bytes=256)
    bad = dataclasses.replace(f, tensors=f.tensors + (extra,), block_bytes=f.block_bytes[:4] + (f.block_bytes[4] + 256,))
    with pytest.raises(RunPlanRejection) as ei:
        plan_run(bad, RuntimeConfig(max_seq_len=16), local_pool(2), 2)
    assert ei.value.code == "unexpected_tensor" and "blk.4.attn_q.bias" in ei.value.message
    gone = next(t for t in f.tensors if t.name == "blk.2.ffn_up.weight")
    miss = dataclasses.replace(f, tensors=tuple(t for t in f.tensors if t is not gone),
                               block_bytes=tuple(b - (gone.n_bytes if i == 2 else 0) for i, b in enumerate(f.block_bytes)))
    with pytest.raises(RunPlanRejection) as ei:
        plan_run(miss, RuntimeConfig(max_seq_len=16), local_pool(2), 2)
    assert ei.value.code == "missing_tensor" and "block 2" in ei.value.message and "blk.2.ffn_up.weight" in ei.value.message


def test_reader_codes_are_gguf_errors(gen):
    """The facts reader raises the architecture checks as GGUFError subclasses naming the file."""
    path = write_random_model(gen / "labelled.gguf", arch="qwen2", label="qwen9", **SMALL)
    with pytest.raises(GGUFError) as ei:
        read_model_facts(path)
    assert type(ei.value) is not GGUFError and ei.value.code == "unsupported_architecture"
    assert str(path) in ei.value.message


# --------------------------------------------------------------------------- non-finite numbers
def test_executor_names_the_block_where_inf_appears(gen):
    """An Inf weight in block 2 makes the stage output non-finite: NonFiniteError (kind runtime) names
    block 2, on the stage that holds it, never a silent argmax of NaNs."""
    path = poison_tensor(write_random_model(gen / "inf-exec.gguf", arch="llama", **SMALL), "blk.2.ffn_norm.weight")
    first, second = _executors(path, [(0, 2), (2, 4)])
    h = first.forward(torch.tensor([1, 5, 9]), 0)
    assert bool(torch.isfinite(h).all())
    with pytest.raises(NonFiniteError) as ei:
        second.forward(h, 0, last_only=True)
    assert ei.value.kind == "runtime" and "block 2" in ei.value.message


@pytest.mark.parametrize("value", [float("inf"), float("nan")], ids=["inf", "nan"])
def test_run_with_inf_weight_is_a_runtime_stage_fault(capsys, gen, tmp_path, monkeypatch, value):
    """WL-F-4 (runtime faults are typed): `pipeplan run` on a model with an Inf (or NaN) weight in block 2
    exits 3 with error[stage_fault:runtime]: stage 1: ... block 2 ... (blocks 2-3 are stage 1's)."""
    monkeypatch.setenv("PIPEPLAN_CACHE", str(tmp_path / "cache"))
    path = poison_tensor(write_random_model(gen / f"{value}-run.gguf", arch="llama", **SMALL),
                         "blk.2.attn_norm.weight", 5, value)
    rc, out, err = _cli(capsys, ["run", str(path), "--prompt", "ab", "--stages", "2", "--backend", "inproc",
                                 "--max-tokens", "2", "--max-seq-len", "16"])
    assert rc == 3, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("error[stage_fault:runtime]: stage 1: ") and "block 2" in line, err


# --------------------------------------------------------------------------- virtual targets (issue 11 item 8)
def test_virtual_targets_accept_every_cpu_runtime_dtype():
    """AB-L-1: the virtual targets' legality accepts exactly the dtypes the CPU runtime executes."""
    from pipeplan.targets import CPU_RUNTIME_DTYPES, get_target

    assert set(CPU_RUNTIME_DTYPES) == {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k",
                                       "q6_k"}
    for name in ("virtual-queue", "virtual-slot"):
        t = get_target(name)
        rule = t.capability.rules_for("matmul")[0]
        assert set(rule.dtypes) == set(CPU_RUNTIME_DTYPES) | {"i32"}
        assert {f"dtype:{d}" for d in CPU_RUNTIME_DTYPES} <= set(t.binding.capabilities)
        for op in ("head_rms_norm", "gelu_mul", "add_bias"):
            assert t.capability.rules_for(op), (name, op)


@pytest.mark.slow
def test_llama3_70b_q4k_facts_compile(capsys, tmp_path):
    """AB-M-2: the shipped examples/llama3-70b.toml (Q4_K) plans over 8 nodes and `pipeplan compile` runs
    the concrete pipeline (legalized on virtual-queue) into a replay package."""
    pool = tmp_path / "pool.toml"
    pool.write_text("".join(f'[[nodes]]\nid = "n{i}"\nmemory_bytes = {24 << 30}\nbandwidth_bytes_per_s = 2.0e10\n'
                            f'flops_per_s = 1.0e11\nlink_bandwidth_bytes_per_s = 1.0e9\n\n' for i in range(8)))
    plan = tmp_path / "plan.mlir"
    rc, out, err = _cli(capsys, ["plan", "--model-facts", str(REPO / "examples" / "llama3-70b.toml"), "--nodes",
                                 str(pool), "--stages", "8", "--max-seq-len", "32", "-o", str(plan)])
    assert rc == 0, err
    rc, out, err = _cli(capsys, ["compile", str(plan), "-o", str(tmp_path / "pkg")])
    assert rc == 0, err
    manifest = json.loads((tmp_path / "pkg" / "manifest.json").read_text())
    assert manifest["target"]["name"] == "virtual-queue" and len(manifest["deployment"]["stages"]) == 8
    assert "dtype:q4_k" in manifest["target"]["binding"]["capabilities"]

