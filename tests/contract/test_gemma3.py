"""Gemma 3 270M Q4_K_M (the real model) with the torch reference kernels (dequantized f32 weights) against
llama.cpp's greedy ids (shared/models/gemma3-expected.json: 5 prompts x 32 tokens), ids in / ids out
(the prompts' ids are given; only the `pipeplan run` case tokenizes the prompt text).

llama.cpp quantizes activations before its quantized dot products (Q8_0 for Q5_0/Q8_0 weights, Q8_K for
the K-quants), keeps the KV cache in F16 and reads GELU from an F16 table; the reference kernels
compute in f32. Where llama.cpp's next id is a near tie in our logits (within ``NEAR_TIE`` of our best)
the two can pick differently; llama.cpp itself does there: its batched prefill of "Once upon a time, there
was a" ranks 2268 first where its one-token decode picked 880. So: every teacher-forced position agrees
or is such a near tie, greedy decoding gives llama.cpp's ids up to its first near tie (2 of the 5 prompts
have none: all 32 ids equal), and the run path (plan -> compile -> replay package -> stage programs,
inproc; `pipeplan run` itself for 2 stages) on 1, 2 and 3 stages gives llama.cpp's first 8 ids.
"""

from __future__ import annotations

import pytest
import torch
from pipeplan.frontend.gguf_facts import read_model_facts
from pipeplan.runtime.loader import load_stage_weights, stage_slices
from pipeplan.runtime.program import HParams, StageExecutor, build_stage_program

NEAR_TIE = 0.1
"""Logits: a llama.cpp id this close to our best is a tie its activation quantization may break either way
(the three seen here are 0.012, 0.038 and 0.059)."""
MAX_SEQ = 64
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gemma3(gemma3_path):
    """One stage holding all 18 blocks (weights dequantized once for the module)."""
    facts = read_model_facts(gemma3_path)
    hp = HParams.from_facts(facts)
    w = load_stage_weights(list(facts.files), stage_slices(facts, 0, 18, True, True))
    return StageExecutor(hp, build_stage_program(hp, 0, 18, True, True, MAX_SEQ), w, MAX_SEQ)


def test_teacher_forced_positions_agree_or_are_near_ties(gemma3, gemma3_expected):
    """WL-R-2: fed llama.cpp's own sequence (prompt + its 32 greedy ids), at each of the 5 x 32 positions
    our argmax is llama.cpp's id, or llama.cpp's id is within NEAR_TIE of our best logit."""
    agree = total = 0
    for case in gemma3_expected["cases"]:
        p, g = case["prompt_ids"], case["greedy_ids"]
        gemma3.reset()
        logits = gemma3.forward(torch.tensor(p + g[:-1]), 0)[len(p) - 1:]
        best = logits.max(dim=-1)
        for i, want in enumerate(g):
            total += 1
            if int(best.indices[i]) == want:
                agree += 1
            else:
                gap = float(best.values[i] - logits[i, want])
                assert gap < NEAR_TIE, (case["prompt"], i, want, int(best.indices[i]), gap)
    assert total == 160 and agree >= 150, agree


def test_greedy_matches_llama_cpp_until_a_near_tie(gemma3, gemma3_expected, capsys):
    """WL-R-2: greedy decoding on one stage gives llama.cpp's 32 ids, or its ids up to a position where
    llama.cpp's choice is our runner-up within NEAR_TIE (reported: prompt, position, top-2 margin)."""
    full = 0
    for case in gemma3_expected["cases"]:
        p, want = case["prompt_ids"], case["greedy_ids"]
        gemma3.reset()
        x, pos = torch.tensor(p), 0
        for i, w in enumerate(want):
            logits = gemma3.forward(x, pos, last_only=True)[-1]
            pos += x.shape[0]
            top = torch.topk(logits, 2)
            tok = int(top.indices[0])
            if tok != w:
                margin = float(top.values[0] - top.values[1])
                assert int(top.indices[1]) == w and margin < NEAR_TIE, (case["prompt"], i, tok, w, margin)
                with capsys.disabled():
                    print(f"\n  gemma3 {case['prompt']!r}: first divergence at token {i} (ours {tok}, llama.cpp {w}, "
                          f"top-2 margin {margin:.3f})")
                break
            x = torch.tensor([tok])
        else:
            full += 1
    assert full >= 2


def test_cli_run_two_stages(gemma3_path, gemma3_expected, tmp_path, capsys, monkeypatch):
    """RP-PP-3, WL-R-2: `pipeplan run --backend inproc --stages 2 --json` on the Gemma 3 file: the prompt
    tokenizes to llama.cpp's ids and the first 8 generated ids are llama.cpp's."""
    import json

    from pipeplan.tools.cli import main

    monkeypatch.setenv("PIPEPLAN_CACHE", str(tmp_path))
    case = gemma3_expected["cases"][3]
    rc = main(["run", str(gemma3_path), "--prompt", case["prompt"], "--stages", "2", "--backend", "inproc",
               "--max-tokens", "8", "--max-seq-len", str(MAX_SEQ), "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["prompt_ids"] == case["prompt_ids"] and doc["token_ids"] == case["greedy_ids"][:8]


@pytest.mark.parametrize("stages, prompt", [(1, 2), (3, 1)])
def test_run_path_on_stages(gemma3_path, gemma3_expected, tmp_path, stages, prompt):
    """RP-PP-3, WL-R-2: plan -> compile (virtual-queue: Q4_K/Q5_0/Q6_K/Q8_0 legal) -> replay package ->
    stage programs on the inproc backend, ids in: 1 and 3 stages give llama.cpp's first 8 ids."""
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.frontend.planner import plan_run
    from pipeplan.plan_types import RuntimeConfig
    from pipeplan.runtime.orchestrator import Pipeline
    from pipeplan.runtime.replay import compile_for_run, local_pool_with_peaks

    case = gemma3_expected["cases"][prompt]
    pool, pool_text = local_pool_with_peaks(stages)
    module = plan_run(read_model_facts(gemma3_path), RuntimeConfig(max_seq_len=MAX_SEQ), pool, stages)
    compiled = compile_for_run(module, pool_text, cache_dir=tmp_path, prompt_len=16)
    kernels = {c.kernel for sp in compiled.programs.values() for calls in sp.steps.values() for c in calls}
    assert {"head_rms_norm", "gelu_mul"} <= kernels
    with Pipeline(project_provisions(module), backend="inproc", programs=compiled.programs) as pipe:
        ids, _ = pipe.generate_ids(case["prompt_ids"], 8)
    assert ids == case["greedy_ids"][:8]
