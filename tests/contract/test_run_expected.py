"""End to end: the planned pipeline, compiled into a replay package and run by the stages binding the
package's stage programs (what ``pipeplan run`` does), reproduces llama.cpp's greedy continuations
(expected.json) token for token, for 1..5 stages on both backends (all prompts through one started
pipeline per case)."""

from __future__ import annotations

import multiprocessing as mp

import pytest
from pipeplan.plan_types import RuntimeConfig
from pipeplan.runtime.events import StageReady, WeightsReady
from pipeplan.runtime.orchestrator import Pipeline, generate_many

from tests.conftest import STORIES


@pytest.fixture(scope="module")
def compiled_runs(tmp_path_factory):
    """stages -> (provisions, CompiledRun) for the local pool with stated peaks (what ``pipeplan run`` builds);
    prefill compiled for 8 rows so the 11-token prompt runs in two chunks."""
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.runtime.replay import compile_for_run, local_pool_with_peaks

    cache = tmp_path_factory.mktemp("pkgcache")
    facts = read_model_facts(STORIES)
    out = {}

    def get(n: int):
        if n not in out:
            pool, text = local_pool_with_peaks(n)
            module = plan_run(facts, RuntimeConfig(max_seq_len=256), pool, n)
            out[n] = (project_provisions(module), compile_for_run(module, text, cache_dir=cache, prompt_len=8))
        return out[n]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["inproc", "local"])
@pytest.mark.parametrize("stages", [1, 2, 3, 4, 5])
def test_expected_greedy_tokens(stages, backend, expected_cases, compiled_runs):
    """RP-PP-2, RP-PP-3, WL-R-4, AB-M-2: with the planner's provisions (each stage only its own range, one
    inbound and one outbound edge) and the compiled package's stage programs, prompt ids equal EXPECTED's and
    the 40 greedy ids and text equal llama.cpp's for every prompt; every stage reports WeightsReady before
    StageReady; nothing is left running."""
    ps, compiled = compiled_runs(stages)
    assert [(p.layer_start, p.layer_end) for p in ps][0][0] == 0 and ps[-1].layer_end == 5
    assert sorted(compiled.programs) == list(range(stages))
    results = generate_many(STORIES, ps, [c["prompt"] for c in expected_cases], max_tokens=40, backend=backend,
                            programs=compiled.programs)
    for r, c in zip(results, expected_cases, strict=True):
        assert r.prompt_ids == c["prompt_ids"], c["prompt"]
        assert r.token_ids == c["greedy_ids"], c["prompt"]
        assert r.text == c["text"]
        assert r.timings["n_generated"] == 40 and r.timings["decode_tok_s"] > 0
    events = results[0].events
    for s in range(stages):
        kinds = [type(e) for e in events if e.stage == s]
        assert kinds == [WeightsReady, StageReady]
    assert mp.active_children() == []


def test_stages_bind_the_compiled_program(compiled_runs, expected_cases):
    """AB-M-2 ("the runtime runs what the compiler produced"): every inproc stage binds the package's per-step
    kernel-call lists (the list scheduler's order, which differs from build_stage_program's), not its own;
    the 11-token prompt goes through the 8-row prefill step in two chunks and still gives EXPECTED's tokens."""
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.runtime.program import LlamaHParams, build_stage_program

    ps, compiled = compiled_runs(3)
    hp = LlamaHParams.from_facts(read_model_facts(STORIES))
    reordered = 0
    with Pipeline(ps, backend="inproc", programs=compiled.programs) as pipe:
        assert pipe.prefill_rows == 8
        for w, p in zip(pipe.backend.workers, ps, strict=True):
            assert w.bound is compiled.programs[p.stage] and set(w.executors) == {"prefill", "decode"}
            assert w.bound.source.endswith(f"stage {p.stage}") and w.bound.source.startswith("sha256:")
            for name, ex in w.executors.items():
                assert ex.program == list(compiled.programs[p.stage].steps[name])
            own = build_stage_program(hp, p.layer_start, p.layer_end, p.has_embedding, p.has_head, p.max_seq_len)
            reordered += w.executors["decode"].program != list(own)
            key = lambda c: (c.kernel, c.outputs)  # noqa: E731 - same calls, maybe in another order
            assert sorted(w.executors["decode"].program, key=key) == sorted(own, key=key)
        c = expected_cases[2]
        assert len(c["prompt_ids"]) == 11
        out, _ = pipe.generate_ids(c["prompt_ids"], 12)
    assert out == c["greedy_ids"][:12]
    assert reordered >= 1


def test_compiled_program_for_other_blocks_is_bind_fault(compiled_runs):
    """WL-F-4, WL-F-6: a stage given a compiled program for other blocks than its provision's faults with
    kind bind (naming both ranges) and never reports StageReady."""
    from pipeplan.errors import StageFault
    from pipeplan.runtime.events import StageFaulted

    ps, compiled = compiled_runs(2)
    swapped = {0: compiled.programs[1], 1: compiled.programs[1]}
    pipe = Pipeline(ps, backend="inproc", programs=swapped)
    with pytest.raises(StageFault) as ei:
        pipe.start()
    assert ei.value.kind == "bind" and ei.value.stage == 0
    assert "provision assigns [0, " in ei.value.detail
    assert not any(isinstance(e, StageReady) and e.stage == 0 for e in pipe.events)
    assert any(isinstance(e, StageFaulted) for e in pipe.events)


def test_package_is_cached_by_plan(compiled_runs, tmp_path):
    """AB-M-2, AB-M-3: compile_for_run reuses the verified package of the same plan and options (no recompile)
    and rebuilds a tampered one (its digests no longer match the manifest)."""
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.runtime.replay import compile_for_run, local_pool_with_peaks

    pool, text = local_pool_with_peaks(2)
    module = plan_run(read_model_facts(STORIES), RuntimeConfig(max_seq_len=64), pool, 2)
    first = compile_for_run(module, text, cache_dir=tmp_path, prompt_len=4)
    again = compile_for_run(module, text, cache_dir=tmp_path, prompt_len=4)
    assert not first.cached and again.cached and again.package == first.package and again.compile_s == 0.0
    assert first.compile_s > 0 and again.programs == first.programs
    other = compile_for_run(module, text, cache_dir=tmp_path, prompt_len=5)
    assert other.package != first.package and other.programs[0].rows["prefill"] == 5
    prog = first.package / "program.mlir"
    prog.write_text(prog.read_text() + "\n")
    rebuilt = compile_for_run(module, text, cache_dir=tmp_path, prompt_len=4)
    assert not rebuilt.cached and rebuilt.programs == first.programs
