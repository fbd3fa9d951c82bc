"""Gemma 3 270M Q4_K_M (the real model) on the CPU target against llama.cpp, token for token.

The CPU kernel table reproduces ggml's CPU arithmetic (F16 KV cache and llama.cpp's attention, rms_norm,
rope, the F16 GELU table, the Q4_K repack and tiled K-quant matmul routes): the greedy ids are llama.cpp's
exactly, with no allowance at near-ties. Cases: shared/models/gemma3-expected.json (5 prompts x 32 ids,
n_ctx 512) and tests/data/gemma3_long.json (a 652-token prompt, past the 512-token sliding window; recorded
by tests/data/make_gemma3_long.py). The run path is the one `pipeplan run` takes (plan -> compile ->
package -> stage programs -> orchestrator, ``--target cpu``); `pipeplan run` itself runs one case.

Every prompt runs on 1 stage and on a multi-stage pipeline, and every (stages, backend) pair of
{1, 2, 3} x {inproc, local} runs at least one full case. One module-wide plan/compile per stage count.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from pipeplan.frontend.gguf_facts import read_model_facts

CPU = "pipeplan.runtime.kernels.cpu"
MAX_SEQ = 704
"""Positions every stage holds: the long prompt (652) and its 32 generated ids fit."""
PREFILL_ROWS = 64
"""Rows of a prompt frame (`pipeplan run`'s default --prefill-rows): the long prompt goes in 11 frames."""
LONG = Path(__file__).resolve().parent.parent / "data" / "gemma3_long.json"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def long_case() -> dict:
    """llama.cpp's greedy ids after a 652-token prompt (n_ctx 1024)."""
    return json.loads(LONG.read_text())


@pytest.fixture(scope="module")
def packages(gemma3_path, tmp_path_factory):
    """``stages -> (module, compiled)``: the plan and replay package of each stage count, made once for the
    module (a cache directory `pipeplan run` in this module shares)."""
    from pipeplan.frontend.planner import plan_run
    from pipeplan.plan_types import RuntimeConfig
    from pipeplan.runtime.replay import compile_for_run, local_pool_with_peaks

    cache = tmp_path_factory.mktemp("gemma3-packages")
    facts = read_model_facts(gemma3_path)
    made: dict[int, tuple] = {}

    def get(stages: int):
        if stages not in made:
            pool, pool_text = local_pool_with_peaks(stages)
            module = plan_run(facts, RuntimeConfig(max_seq_len=MAX_SEQ), pool, stages)
            made[stages] = (module, compile_for_run(module, pool_text, cache_dir=cache, prompt_len=PREFILL_ROWS))
        return made[stages]

    get.cache_dir = cache  # type: ignore[attr-defined]
    return get


def _cases(which: str, expected: dict, long_case: dict) -> list[dict]:
    short = expected["cases"]
    picked = {"all": short, "long": [long_case], "all+long": short + [long_case]}.get(which)
    return picked if picked is not None else [short[int(i)] for i in which.split(",")]


@pytest.mark.parametrize("stages, backend, which", [
    (1, "inproc", "all+long"), (2, "local", "all"), (3, "inproc", "long"),
    (1, "local", "3"), (2, "inproc", "1"), (3, "local", "4"),
])
def test_run_path_gives_llama_cpp_ids(packages, gemma3_expected, long_case, stages, backend, which):
    """RP-PP-3, WL-R-2: plan -> compile (virtual-queue) -> replay package -> stage programs on the CPU kernel
    table, through the orchestrator on ``backend``: every generated id is llama.cpp's (32 per case)."""
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.runtime.orchestrator import Pipeline

    module, compiled = packages(stages)
    kernels = {c.kernel for sp in compiled.programs.values() for calls in sp.steps.values() for c in calls}
    assert {"head_rms_norm", "gelu_mul"} <= kernels
    cases = _cases(which, gemma3_expected, long_case)
    with Pipeline(project_provisions(module), backend=backend, programs=compiled.programs, kernels=CPU,
                  num_threads=1) as pipe:
        got = [pipe.generate_ids(case["prompt_ids"], len(case["greedy_ids"]))[0] for case in cases]
    for case, ids in zip(cases, got, strict=True):
        assert ids == case["greedy_ids"], (stages, backend, case["prompt"][:40])


def test_cli_run_two_stages(packages, gemma3_path, gemma3_expected, capsys, monkeypatch):
    """RP-PP-3, WL-R-2: `pipeplan run --stages 2 --backend inproc --json` on the Gemma 3 file (default target
    cpu): the prompt tokenizes to llama.cpp's ids and all 32 generated ids are llama.cpp's."""
    from pipeplan.tools.cli import main

    monkeypatch.setenv("PIPEPLAN_CACHE", str(packages.cache_dir))
    case = gemma3_expected["cases"][0]
    rc = main(["run", str(gemma3_path), "--prompt", case["prompt"], "--stages", "2", "--backend", "inproc",
               "--max-tokens", "32", "--max-seq-len", str(MAX_SEQ), "--threads", "1", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["target"] == "cpu"
    assert doc["prompt_ids"] == case["prompt_ids"] and doc["token_ids"] == case["greedy_ids"]


def test_reference_table_agrees_on_two_real_blocks(gemma3_path, gemma3_expected):
    """WL-R-2: the reference table (torch float32, weights dequantized) stays the plain float path of the
    same programs: on blocks 4 (local) and 5 (global) of the real model, fed the CPU table's own block-4
    input for a prompt, its block outputs agree with the CPU table's to 1% of their scale (the CPU table
    rounds K/V/q/probabilities to F16 and quantizes activations; the reference does not)."""
    from pipeplan.runtime.kernels import cpu, reference
    from pipeplan.runtime.loader import load_stage_weights, stage_slices
    from pipeplan.runtime.program import HParams, StageExecutor, build_stage_program

    facts = read_model_facts(gemma3_path)
    hp = HParams.from_facts(facts)
    ids = np.array(gemma3_expected["cases"][1]["prompt_ids"], dtype=np.int64)
    head = StageExecutor(hp, build_stage_program(hp, 0, 4, True, False, 16),
                         cpu.load_stage_weights(list(facts.files), stage_slices(facts, 0, 4, True, False)), 16, cpu)
    h = head.forward(ids, 0).copy()
    q = StageExecutor(hp, build_stage_program(hp, 4, 6, False, False, 16),
                      cpu.load_stage_weights(list(facts.files), stage_slices(facts, 4, 6, False, False)), 16, cpu)
    r = StageExecutor(hp, build_stage_program(hp, 4, 6, False, False, 16),
                      load_stage_weights(list(facts.files), stage_slices(facts, 4, 6, False, False)), 16, reference)
    a, b = q.forward(h, 0), r.forward(torch.from_numpy(h), 0).numpy()
    assert np.all(np.isfinite(a)) and np.abs(a - b).max() <= 0.01 * np.abs(b).max()
    assert q.caches["blk.4.cache_k"].dtype == np.float16 and r.caches["blk.4.cache_k"].dtype == torch.float32
