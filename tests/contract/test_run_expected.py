"""End to end: the planned pipeline reproduces llama.cpp's greedy continuations (expected.json) token for
token, for 1..5 stages on both backends (all prompts through one started pipeline per case)."""

from __future__ import annotations

import multiprocessing as mp

import pytest
from pipeplan.plan_types import RuntimeConfig
from pipeplan.runtime.events import StageReady, WeightsReady
from pipeplan.runtime.orchestrator import generate_many

from tests.conftest import STORIES


def _provisions(n: int):
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.frontend.pool import local_pool

    facts = read_model_facts(STORIES)
    return project_provisions(plan_run(facts, RuntimeConfig(max_seq_len=256), local_pool(n), n))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["inproc", "local"])
@pytest.mark.parametrize("stages", [1, 2, 3, 4, 5])
def test_expected_greedy_tokens(stages, backend, expected_cases):
    """RP-PP-2, RP-PP-3, WL-R-4: with the planner's provisions (each stage only its own range, one inbound
    and one outbound edge), prompt ids equal EXPECTED's and the 40 greedy ids and text equal llama.cpp's
    for every prompt; every stage reports WeightsReady before StageReady; nothing is left running."""
    ps = _provisions(stages)
    assert [(p.layer_start, p.layer_end) for p in ps][0][0] == 0 and ps[-1].layer_end == 5
    results = generate_many(STORIES, ps, [c["prompt"] for c in expected_cases], max_tokens=40, backend=backend)
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
