"""Stage programs and StageExecutor on stories260K: EXPECTED greedy tokens, chained stages, typed errors."""

from __future__ import annotations

import pickle

import pytest
import torch
from pipeplan.frontend.gguf_facts import read_model_facts
from pipeplan.runtime.loader import load_stage_weights, stage_slices
from pipeplan.runtime.program import (
    AllocationError,
    BindError,
    ExecutionError,
    InvalidRangeError,
    KernelCall,
    LlamaHParams,
    StageExecutor,
    build_stage_program,
    fuse_matmuls,
)
from pipeplan.runtime.tokenizer import SPMTokenizer

from tests.executor_chain import greedy_generate

MAX_SEQ = 64
SPLITS = {
    1: [(0, 5)],
    2: [(0, 2), (2, 5)],
    3: [(0, 1), (1, 3), (3, 5)],
    4: [(0, 1), (1, 2), (2, 4), (4, 5)],
    5: [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)],
}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def facts(stories_path):
    return read_model_facts(stories_path)


@pytest.fixture(scope="module")
def hp(facts):
    return LlamaHParams.from_facts(facts)


@pytest.fixture(scope="module")
def weights(facts, stories_path):
    return load_stage_weights([stories_path], stage_slices(facts, 0, 5, True, True))


def make_chain(hp, weights, ranges, **kw) -> list[StageExecutor]:
    n = len(ranges)
    return [
        StageExecutor(hp, build_stage_program(hp, a, b, i == 0, i == n - 1, MAX_SEQ), weights, MAX_SEQ, **kw)
        for i, (a, b) in enumerate(ranges)
    ]


def test_hparams_from_facts(hp):
    """LlamaHParams mirrors the llama.* header keys of stories260K (DESIGN §6)."""
    assert (hp.n_embd, hp.n_head, hp.n_head_kv, hp.n_ff, hp.n_vocab) == (64, 8, 4, 172, 512)
    assert (hp.n_layer, hp.head_dim, hp.rope_dim, hp.n_ctx) == (5, 8, 8, 2048)
    assert hp.rope_base == 10000.0 and abs(hp.rms_eps - 1e-5) < 1e-9 and not hp.tied_embedding


def test_program_shape_and_lineage(hp):
    """A stage program is an ordered list of named kernel calls: 16 per block, embedding on the first
    stage, norm + head on the last; every block call carries its block index."""
    prog = build_stage_program(hp, 1, 3, False, False, MAX_SEQ)
    assert len(prog) == 32
    assert [c.block for c in prog] == [1] * 16 + [2] * 16
    assert prog[0] == KernelCall("rms_norm", ("input", "blk.1.attn_norm.weight"), ("blk.1.attn_in",),
                                 {"eps": hp.rms_eps}, 1)
    assert prog[-1].outputs == ("output",)
    weights_read = {n for c in prog for n in c.inputs if n.endswith(".weight")}
    assert weights_read == {f"blk.{b}.{n}.weight" for b in (1, 2) for n in (
        "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")}
    full = build_stage_program(hp, 0, 5, True, True, MAX_SEQ)
    assert full[0].kernel == "embedding_gather" and full[0].block is None
    assert [c.kernel for c in full[-3:]] == ["last_row", "rms_norm", "matmul"]
    assert full[-1].inputs == ("h_norm", "output.weight")
    # pure: same inputs, equal program; calls are hashable, read-only and survive pickling (spawned stages)
    assert build_stage_program(hp, 0, 5, True, True, MAX_SEQ) == full
    assert pickle.loads(pickle.dumps(full)) == full and len(set(full)) == len(full)
    with pytest.raises(TypeError, match="read-only"):
        full[1].attrs["eps"] = 0.0


@pytest.mark.parametrize("rng", [(-1, 2), (3, 2), (0, 6), (2, 2)])
def test_invalid_range_rejected(hp, rng):
    """WL-F-5: an invalid layer range (negative, reversed, past the block count, empty middle stage)
    raises InvalidRangeError (StageFault kind invalid_range)."""
    with pytest.raises(InvalidRangeError) as e:
        build_stage_program(hp, rng[0], rng[1], False, False, MAX_SEQ)
    assert e.value.kind == "invalid_range" and e.value.code == "invalid_range"
    assert f"[{rng[0]}, {rng[1]})" in str(e.value)


def test_greedy_matches_llama_cpp_single_stage(hp, weights, expected_cases):
    """One executor over all 5 blocks reproduces llama.cpp's 40 greedy ids for all three prompts,
    with and without the fused q/k/v and gate/up matmuls."""
    for fuse in (True, False):
        (ex,) = make_chain(hp, weights, SPLITS[1], fuse=fuse)
        for case in expected_cases:
            assert greedy_generate([ex], case["prompt_ids"], 40) == case["greedy_ids"], (fuse, case["prompt"])


@pytest.mark.parametrize("n_stages", [2, 3, 4, 5])
def test_greedy_matches_llama_cpp_chained(hp, weights, expected_cases, n_stages):
    """A model split into 2..5 chained executors (in-process) gives llama.cpp's greedy ids."""
    chain = make_chain(hp, weights, SPLITS[n_stages])
    for case in expected_cases:
        assert greedy_generate(chain, case["prompt_ids"], 40) == case["greedy_ids"], case["prompt"]


def test_chain_logits_equal_single_stage(hp, weights, expected_cases):
    """Prefill logits of a 3-stage chain equal those of one [0,5) executor (all positions)."""
    ids = torch.tensor(expected_cases[2]["prompt_ids"])
    (one,) = make_chain(hp, weights, SPLITS[1], fuse=False)
    ref = one.forward(ids, 0).clone()
    h = ids
    for s in make_chain(hp, weights, SPLITS[3], fuse=False):
        h = s.forward(h, 0)
    assert h.shape == (ids.numel(), hp.n_vocab)
    torch.testing.assert_close(h, ref, rtol=0, atol=1e-5)


def test_end_to_end_text(stories_path, hp, weights, expected_cases):
    """Encode the prompt, generate 40 greedy tokens, decode: the EXPECTED text."""
    tok = SPMTokenizer.from_gguf(stories_path)
    (ex,) = make_chain(hp, weights, SPLITS[1])
    for case in expected_cases:
        ids = greedy_generate([ex], tok.encode(case["prompt"]), 40)
        assert tok.decode(ids) == case["text"]


def test_last_only_and_chunked_prefill(hp, weights, expected_cases):
    """last_only gives the last row of the full logits; a prompt fed in two chunks (start_pos > 0
    with T > 1) gives the same logits as one prefill; reset forgets the cache."""
    ids = torch.tensor(expected_cases[2]["prompt_ids"])
    (ex,) = make_chain(hp, weights, SPLITS[1], fuse=False)
    full = ex.forward(ids, 0).clone()
    ex.reset()
    last = ex.forward(ids, 0, last_only=True).clone()
    assert last.shape == (1, hp.n_vocab)
    torch.testing.assert_close(last, full[-1:], rtol=1e-5, atol=1e-5)
    ex.reset()
    a = ex.forward(ids[:4], 0).clone()
    b = ex.forward(ids[4:], 4).clone()
    torch.testing.assert_close(torch.cat([a, b]), full, rtol=1e-4, atol=1e-4)  # other attention path
    ex.reset()
    assert ex.n_past == 0 and all(float(c.abs().sum()) == 0.0 for c in ex.caches.values())


def test_intermediate_stage_io(hp, weights):
    """Non-first stages take float32 [T, n_embd]; non-last stages return [T, n_embd]."""
    mid = make_chain(hp, weights, [(0, 1), (1, 3), (3, 5)])[1]
    out = mid.forward(torch.randn(3, hp.n_embd), 0)
    assert out.shape == (3, hp.n_embd) and out.dtype == torch.float32
    assert mid.kv_cache_bytes == 2 * 2 * hp.n_head_kv * MAX_SEQ * hp.head_dim * 4


def test_fuse_matmuls_rewrite(hp, weights):
    """fuse_matmuls turns q/k/v and gate/up into one matmul + split per block, and nothing else."""
    prog = build_stage_program(hp, 0, 2, True, False, MAX_SEQ)
    fused_prog, fused = fuse_matmuls(prog, weights)
    assert len(fused) == 4
    assert fused["blk.0.attn_q.weight+blk.0.attn_k.weight+blk.0.attn_v.weight"].shape == (128, 64)
    assert [c.kernel for c in fused_prog].count("split") == 4
    # per block: 3 matmuls -> matmul + split (one call fewer), 2 matmuls -> matmul + split (same count)
    assert len(fused_prog) == len(prog) - 2
    assert sum(c.kernel == "matmul" for c in fused_prog) == sum(c.kernel == "matmul" for c in prog) - 3 * 2
    untouched = [c for c in prog if c.kernel != "matmul" or c.inputs[1].endswith(("attn_output.weight",
                                                                                  "ffn_down.weight"))]
    assert [c for c in fused_prog if c.kernel != "split" and "+" not in c.inputs[-1]] == untouched


def test_bind_missing_weight(hp, weights):
    """WL-F-4: a weight the program names but the stage lacks raises BindError naming the tensor."""
    w = {k: v for k, v in weights.items() if k != "blk.1.ffn_up.weight"}
    with pytest.raises(BindError) as e:
        StageExecutor(hp, build_stage_program(hp, 0, 2, True, False, MAX_SEQ), w, MAX_SEQ)
    assert e.value.kind == "bind" and "blk.1.ffn_up.weight" in str(e.value) and "block 1" in str(e.value)


def test_bind_wrong_shape(hp, weights):
    """WL-F-4: a weight with the wrong shape raises BindError with the found and expected shapes."""
    w = dict(weights)
    w["blk.0.attn_k.weight"] = torch.zeros(64, 64)
    with pytest.raises(BindError, match=r"blk\.0\.attn_k\.weight has shape \(64, 64\), expected \(32, 64\)"):
        StageExecutor(hp, build_stage_program(hp, 0, 1, True, False, MAX_SEQ), w, MAX_SEQ)


def test_bind_bad_program(hp, weights):
    """WL-F-4: an unknown kernel or a buffer read before it is written is a BindError."""
    with pytest.raises(BindError, match="unknown kernel 'conv2d'"):
        StageExecutor(hp, [KernelCall("conv2d", ("input",), ("output",))], weights, MAX_SEQ)
    with pytest.raises(BindError, match="reads blk.0.nothing before it is written"):
        StageExecutor(hp, [KernelCall("add", ("input", "blk.0.nothing"), ("output",), {}, 0)], weights, MAX_SEQ)


def test_allocation_failure(hp, weights):
    """WL-F-3: a failing KV-cache allocation raises AllocationError (kind allocation)."""
    def fail(shape):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory")

    with pytest.raises(AllocationError) as e:
        StageExecutor(hp, build_stage_program(hp, 0, 5, True, True, MAX_SEQ), weights, MAX_SEQ, allocate=fail)
    assert e.value.kind == "allocation" and "can't allocate memory" in str(e.value)


def test_forward_rejects_bad_inputs(hp, weights):
    """forward rejects positions past max_seq_len, gaps in positions, wrong dtypes/shapes and
    token ids outside the vocabulary with ExecutionError; nothing is cached on rejection."""
    first, last = make_chain(hp, weights, SPLITS[2])
    with pytest.raises(ExecutionError, match=r"positions \[60, 65\) exceed max_seq_len 64"):
        first.forward(torch.ones(5, dtype=torch.int64), 60)
    with pytest.raises(ExecutionError, match="skips positions"):
        first.forward(torch.ones(1, dtype=torch.int64), 3)
    with pytest.raises(ExecutionError, match="token id outside"):
        first.forward(torch.tensor([1, 512]), 0)
    with pytest.raises(ExecutionError, match="int64 token ids"):
        first.forward(torch.zeros(2, hp.n_embd), 0)
    with pytest.raises(ExecutionError, match=r"float32 activations \[T, 64\]"):
        last.forward(torch.ones(2, dtype=torch.int64), 0)
    with pytest.raises(ExecutionError, match="no tokens"):
        last.forward(torch.zeros(0, hp.n_embd), 0)
    assert first.n_past == 0 and last.n_past == 0
    first.forward(torch.ones(64, dtype=torch.int64), 0)  # exactly max_seq_len positions is fine
    assert first.n_past == 64


def test_empty_range_on_first_or_last_stage(hp, weights):
    """An embedding-only first stage and a head-only last stage (empty block ranges, allowed only
    there) chained around a [0, 5) middle give the single-stage logits."""
    ids = torch.tensor([1, 403, 407])
    emb = StageExecutor(hp, build_stage_program(hp, 0, 0, True, False, MAX_SEQ), weights, MAX_SEQ)
    mid = StageExecutor(hp, build_stage_program(hp, 0, 5, False, False, MAX_SEQ), weights, MAX_SEQ)
    head = StageExecutor(hp, build_stage_program(hp, 5, 5, False, True, MAX_SEQ), weights, MAX_SEQ)
    h = emb.forward(ids, 0)
    assert torch.equal(h, weights["token_embd.weight"][ids])
    (one,) = make_chain(hp, weights, SPLITS[1])
    torch.testing.assert_close(head.forward(mid.forward(h, 0), 0), one.forward(ids, 0), rtol=0, atol=1e-5)
