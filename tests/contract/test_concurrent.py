"""Concurrent sequences through the stages (issue 14 item 1): ``Pipeline(parallel=N)`` KV-cache slots,
the orchestrator's interleaving and micro-batching (default ``micro_batches``), the plan sized for N, and
``pipeplan run/serve --parallel``.

One started pipeline per (model, stages, backend), module-scoped: the single-request ids come from the
same pipeline run one request at a time, then the 4 requests run concurrently (different prompts and
lengths, admitted at different times through ``delay_s``; the compiled prefill step takes few rows, so
long prompts go in chunks that interleave with the others' decodes).
"""

from __future__ import annotations

import json
import threading

import httpx
import numpy as np
import pytest
from pipeplan.errors import RunPlanRejection, StageFault
from pipeplan.plan_types import NodePool, NodeSpec, RuntimeConfig
from pipeplan.runtime.orchestrator import GenRequest, Pipeline, RunRequestError
from pipeplan.runtime.transport import DATA, RESET, Frame, SamplerParams

from tests.conftest import STORIES

CPU = "pipeplan.runtime.kernels.cpu"
STORIES_PROMPTS = ["Once upon a time", "The little dog ran to the park and saw a big red ball", "Sam", "Lily"]


def _pipeline(model, stages: int, backend: str, cache, *, max_seq_len: int, prefill_rows: int,
              parallel: int = 4, compiled: bool = True, tag: str = "") -> Pipeline:
    """A started pipeline of ``model`` on the CPU target running the compiled package's programs (prefill step
    of ``prefill_rows`` rows): compiled here from the plan (``compile_for_run``, as ``pipeplan run`` does) or,
    with ``compiled=False``, by the Pipeline itself from the provisions (its default compile)."""
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.runtime.replay import compile_for_run, local_pool_with_peaks

    facts = read_model_facts(model)
    pool, text = local_pool_with_peaks(stages)
    module = plan_run(facts, RuntimeConfig(max_seq_len=max_seq_len, ring_slots=parallel, parallel=parallel),
                      pool, stages)
    programs = compile_for_run(module, text, cache_dir=cache, prompt_len=prefill_rows).programs if compiled else None
    pipe = Pipeline(project_provisions(module), backend=backend, programs=programs, kernels=CPU,
                    num_threads=1, parallel=parallel, prefill_rows=prefill_rows)
    assert pipe.prefill_rows == prefill_rows
    pipe.start()
    return pipe


@pytest.fixture(scope="module")
def pipelines(tmp_path_factory):
    """``(model, stages, backend) -> started Pipeline(parallel=4)``, made on first use, closed at the end."""
    cache = tmp_path_factory.mktemp("concurrent-packages")
    made: dict[tuple, Pipeline] = {}

    def get(model, stages: int, backend: str, **kw) -> Pipeline:
        key = (str(model), stages, backend, kw.get("tag", ""))
        if key not in made:
            made[key] = _pipeline(model, stages, backend, cache, **kw)
        return made[key]

    yield get
    for p in made.values():
        p.close()


def _concurrent_equals_single(pipe: Pipeline, prompts: list[list[int]], max_tokens: list[int],
                              eos_id: int | None) -> list[list[int]]:
    single = [pipe.generate_concurrent([GenRequest(p, n, eos_id=eos_id)])[0].ids
              for p, n in zip(prompts, max_tokens, strict=True)]
    reqs = [GenRequest(p, n, eos_id=eos_id, delay_s=0.002 * i)
            for i, (p, n) in enumerate(zip(prompts, max_tokens, strict=True))]
    pipe.segments_returned.clear()
    got = pipe.generate_concurrent(reqs)
    assert [g.ids for g in got] == single
    # micro-batching was on (default micro_batches = min(4, stages)): frames carried several sequences
    assert max(pipe.segments_returned) > 1 and max(pipe.segments_returned) <= pipe.batch_rows
    assert all(len(ids) == n for ids, n in zip(single, max_tokens, strict=True))
    assert all(len(g.token_times) == len(g.ids) and g.token_times == sorted(g.token_times) for g in got)
    # they did run at the same time: every request had its first token before any request had its last one
    firsts, lasts = [g.token_times[0] for g in got], [g.token_times[-1] for g in got]
    assert max(firsts) < min(lasts)
    return single


@pytest.mark.parametrize("stages, backend", [(1, "inproc"), (1, "local"), (3, "inproc"), (3, "local")])
def test_concurrent_greedy_ids_equal_single_stories(pipelines, expected_cases, stages, backend):
    """RP-PP-3, WL-R-4: on stories260K, 4 concurrent greedy requests (different prompts and lengths, admitted
    at different times, prompts chunked by 4 prefill rows) give each request's single-request ids; the single
    ids are llama.cpp's where EXPECTED has the prompt. Local rings spin and announce by the run's frames in
    flight and cores (spin_budget, announce_for)."""
    from pipeplan.runtime.backends import usable_cores
    from pipeplan.runtime.shm_ring import announce_for, spin_budget
    from pipeplan.runtime.tokenizer import SPMTokenizer

    pipe = pipelines(STORIES, stages, backend, max_seq_len=128, prefill_rows=4)
    if backend == "local":
        spin = spin_budget(stages, pipe.micro_batches, usable_cores())
        rings = pipe.backend.transport.rings.values()
        assert rings and all(r.spin_s == spin and r.announce is announce_for(spin) for r in rings)
    tok = SPMTokenizer.from_gguf(STORIES)
    prompts = [tok.encode(p, add_bos=True) for p in STORIES_PROMPTS]
    single = _concurrent_equals_single(pipe, prompts, [12, 9, 14, 10], tok.eos_id)
    for prompt, ids in zip(STORIES_PROMPTS, single, strict=True):
        case = next((c for c in expected_cases if c["prompt"] == prompt), None)
        assert case is None or ids == case["greedy_ids"][:len(ids)]


@pytest.mark.slow
@pytest.mark.parametrize("stages, backend", [(1, "inproc"), (1, "local"), (3, "inproc"), (3, "local")])
def test_concurrent_greedy_ids_equal_single_gemma3(pipelines, gemma3_path, gemma3_expected, stages, backend):
    """RP-PP-3, WL-R-2: the same on Gemma 3 270M Q4_K_M (CPU target; sliding-window and global layers, F16 KV
    slots): 4 concurrent greedy requests (prompts of 5, 8, 4, 7 ids) give their single-request ids, which are
    llama.cpp's."""
    pipe = pipelines(gemma3_path, stages, backend, max_seq_len=64, prefill_rows=4, compiled=False)
    cases = [gemma3_expected["cases"][i] for i in (0, 4, 3, 2)]
    single = _concurrent_equals_single(pipe, [c["prompt_ids"] for c in cases], [5, 3, 4, 3], None)
    assert single == [c["greedy_ids"][:len(ids)] for c, ids in zip(cases, single, strict=True)]


def test_reset_of_one_slot_leaves_the_others(pipelines):
    """RP-PP-3: frames name their KV-cache slot: a RESET (and a new sequence) in slot 1 between two steps of
    the sequence in slot 0 does not change slot 0's ids; a frame naming a slot the stages do not have is a
    runtime StageFault."""
    pipe = pipelines(STORIES, 1, "inproc", max_seq_len=128, prefill_rows=4, tag="faulted")  # a pipeline of its own
    prompt = [1, 403, 407, 260, 431]
    want = pipe.generate_concurrent([GenRequest(prompt, 4)])[0].ids
    tx, rx = pipe._tx, pipe._rx
    assert tx is not None and rx is not None
    got: list[int] = []

    def step(op: int, slot: int, pos: int = 0, ids=None) -> Frame:
        arr = None if ids is None else np.asarray(ids, dtype=np.int32)
        assert tx.send(Frame(op, 90 + slot, pos, arr, SamplerParams() if op == RESET else None, slot), timeout=5)
        while True:
            f = rx.recv(timeout=5)
            assert f is not None
            if f.op == op:
                return f

    step(RESET, 0)
    pos = 0
    for k in range(0, len(prompt), 4):
        f = step(DATA, 0, k, prompt[k:k + 4])
    got.append(int(f.array[0]))
    pos = f.position
    for i in range(3):
        step(RESET, 1)  # another sequence starts in slot 1 and runs two steps between slot 0's steps
        step(DATA, 1, 0, [1, 300 + i, 301])
        f = step(DATA, 0, pos, [got[-1]])
        got.append(int(f.array[0]))
        pos = f.position
    assert got == want
    bad = Frame(DATA, 99, 0, np.asarray([1], dtype=np.int32), None, 4)
    assert tx.send(bad, timeout=5)
    with pytest.raises(StageFault) as e:
        pipe.generate_concurrent([GenRequest([1, 2], 2)])
    assert e.value.kind == "runtime" and "slot 4" in e.value.detail


def test_plan_rejects_a_pool_that_holds_one_sequence_but_not_n():
    """RP-F-1, RP-OS-5: the planner counts the KV cache once per sequence: a node that holds the model for
    parallel=1 but not for 4 is a typed rejection naming parallel and the KV bytes; parallel 0 is
    invalid_runtime_config; the plan's config prints parallel."""
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run, plan_run_spec

    facts = read_model_facts(STORIES)
    kv = facts.kv_bytes_per_block(256, 4)
    one = plan_run_spec(facts, RuntimeConfig(max_seq_len=256), NodePool((NodeSpec("n0", 10**9),)), 1)
    assert one.config.parallel == 1
    need = sum(facts.block_bytes) + facts.block_count * kv + 10**6  # weights, one KV cache, rings and head
    pool = NodePool((NodeSpec("n0", need),))
    plan_run_spec(facts, RuntimeConfig(max_seq_len=256), pool, 1)
    with pytest.raises(RunPlanRejection) as e:
        plan_run_spec(facts, RuntimeConfig(max_seq_len=256, parallel=4), pool, 1)
    assert e.value.code == "insufficient_memory" and e.value.where == "parallel"
    assert "parallel 4" in e.value.message and f"{kv} bytes per block per sequence" in e.value.message
    assert f"{kv * facts.block_count * 4} bytes" in e.value.message
    with pytest.raises(RunPlanRejection) as e:
        plan_run_spec(facts, RuntimeConfig(parallel=0), pool, 1)
    assert e.value.code == "invalid_runtime_config" and e.value.where == "parallel"
    module = plan_run(facts, RuntimeConfig(max_seq_len=256, parallel=3, ring_slots=3),
                      NodePool((NodeSpec("n0", 10**9),)), 1)
    assert "ring_slots = 3, alignment = 64, parallel = 3>" in str(module)


def test_bad_parallel_requests_are_typed(pipelines, capsys):
    """RP-AR-4: ``Pipeline(parallel=0)`` and a request that does not fit are RunRequestError before anything
    runs; ``pipeplan run --parallel 0`` (or ``--micro-batches`` outside ``[1, --parallel]``) is one error line,
    exit 2."""
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.runtime.replay import local_pool_with_peaks
    from pipeplan.tools.cli import main

    facts = read_model_facts(STORIES)
    ps = project_provisions(plan_run(facts, RuntimeConfig(max_seq_len=32), local_pool_with_peaks(1)[0], 1))
    with pytest.raises(RunRequestError):
        Pipeline(ps, backend="inproc", parallel=0)
    pipe = pipelines(STORIES, 3, "inproc", max_seq_len=128, prefill_rows=4)
    with pytest.raises(RunRequestError):
        pipe.generate_concurrent([GenRequest([1, 2], 4), GenRequest([1] * 200, 4)])
    with pytest.raises(RunRequestError):
        pipe.generate_concurrent([GenRequest([1, 2], 4, delay_s=-1.0)])
    assert main(["run", str(STORIES), "--prompt", "a", "--parallel", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error[invalid_runtime_config]: --parallel must be in [1, ") and err.count("\n") == 1
    for m in ("0", "3"):
        assert main(["run", str(STORIES), "--prompt", "a", "--parallel", "2", "--micro-batches", m]) == 2
        err = capsys.readouterr().err
        assert err == f"error[invalid_runtime_config]: --micro-batches must be in [1, --parallel 2], got {m}\n"
    assert main(["serve", str(STORIES), "--parallel", "2", "--micro-batches", "3", "--port", "0"]) == 2
    assert capsys.readouterr().err.startswith("error[invalid_runtime_config]: --micro-batches must be in [1, ")


@pytest.fixture(scope="module")
def cli_cache(tmp_path_factory):
    """The package cache `pipeplan run` and `serve` share here (one plan: 2 stages, --parallel 2, 1024)."""
    return tmp_path_factory.mktemp("concurrent-cli")


def test_cli_run_several_prompts_in_parallel(cli_cache, capsys, monkeypatch, expected_cases):
    """RP-PP-3: ``pipeplan run --parallel 2`` with three ``--prompt``: each generated text equals its own
    single-prompt run's (llama.cpp's ids for the EXPECTED prompts, a ``pipeplan run`` of its own otherwise), also
    with ``--micro-batches 1``."""
    from pipeplan.tools.cli import main

    monkeypatch.setenv("PIPEPLAN_CACHE", str(cli_cache))
    base = ["run", str(STORIES), "--stages", "2", "--backend", "inproc", "--max-tokens", "8", "--json",
            "--max-seq-len", "1024", "--parallel", "2"]
    assert main([*base, "--prompt", "Lily"]) == 0
    alone = json.loads(capsys.readouterr().out)["token_ids"]
    prompts = [expected_cases[0]["prompt"], "Lily", expected_cases[1]["prompt"]]
    argv = base + [x for p in prompts for x in ("--prompt", p)]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["parallel"] == 2 and doc["package"]["cached"] and [r["prompt"] for r in doc["results"]] == prompts
    assert [r["token_ids"] for r in doc["results"]] == [expected_cases[0]["greedy_ids"][:8], alone,
                                                        expected_cases[1]["greedy_ids"][:8]]
    # --micro-batches 1: both running prompts decode in one frame per step; the same texts
    assert main([*argv, "--micro-batches", "1"]) == 0
    assert [r["token_ids"] for r in json.loads(capsys.readouterr().out)["results"]] == \
        [r["token_ids"] for r in doc["results"]]


@pytest.fixture
def micro_batch_spy(monkeypatch) -> list[int]:
    """The micro-batch counts every Pipeline is set to (``Pipeline._set_micro_batches`` calls), in order."""
    import pipeplan.runtime.orchestrator as orch

    used: list[int] = []
    real_set = orch.Pipeline._set_micro_batches

    def spy(self, m: int) -> None:
        used.append(m)
        real_set(self, m)

    monkeypatch.setattr(orch.Pipeline, "_set_micro_batches", spy)
    return used


def test_cli_run_names_the_chosen_micro_batches(cli_cache, capsys, monkeypatch, micro_batch_spy):
    """RP-PP-3 (issue 14): ``pipeplan run --parallel 2`` without ``--micro-batches`` prints one stderr line naming
    the M the compiled package's costs predict fastest and the predicted tok/s per M (``--json``:
    ``micro_batches``), and the pipeline runs with that M; ``--micro-batches`` overrides it (no line, no key);
    the token ids are the same."""
    import re

    from pipeplan.analysis.concurrency import choose_micro_batches
    from pipeplan.tools.cli import main

    monkeypatch.setenv("PIPEPLAN_CACHE", str(cli_cache))
    used = micro_batch_spy
    argv = ["run", str(STORIES), "--stages", "2", "--backend", "inproc", "--max-tokens", "6", "--json",
            "--max-seq-len", "1024", "--parallel", "2", "--prompt", "Lily", "--prompt", "Sam"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    want = choose_micro_batches(doc["package"]["path"], 2)
    assert want is not None
    lines = [x for x in err.splitlines() if x.startswith("pipeplan: micro-batches ")]
    assert len(lines) == 1 and re.fullmatch(
        rf"pipeplan: micro-batches {want.micro_batches} for --parallel 2 \(predicted fastest; aggregate tok/s "
        r"M=1 [0-9.]+, M=2 [0-9.]+\)", lines[0]), lines
    assert doc["micro_batches"] == json.loads(json.dumps(want.to_json()))
    assert used[-1] == want.micro_batches
    forced = 3 - want.micro_batches
    used.clear()
    assert main([*argv, "--micro-batches", str(forced)]) == 0
    out, err = capsys.readouterr()
    doc2 = json.loads(out)
    assert "micro-batches" not in err and "micro_batches" not in doc2 and used == [forced]
    assert [r["token_ids"] for r in doc2["results"]] == [r["token_ids"] for r in doc["results"]]


def test_cancel_frees_the_slot_for_a_queued_request(pipelines):
    """RP-PP-3: with every slot (4) taken by a long sequence, a fifth request waits; cancelling one (from its
    on_token hook after 3 ids) ends it at its next step, and the waiting request is admitted into the freed
    slot and completes, with its single-request ids, while the other long sequence still runs."""
    pipe = pipelines(STORIES, 3, "inproc", max_seq_len=128, prefill_rows=4)
    short = GenRequest([1, 403, 407], 8)
    want = pipe.generate_concurrent([short])[0].ids
    handles: list = []

    def on_token(_tok: int) -> None:
        if len(handles[0].ids) == 3:
            handles[0].cancel()

    handles.append(pipe.submit(GenRequest([1, 300], 100), on_token=on_token))
    handles += [pipe.submit(GenRequest([1, 301 + i], 100)) for i in range(pipe.parallel - 1)]
    handles.append(pipe.submit(short))
    results = [h.result(timeout=60) for h in handles]
    a, others, c = results[0], results[1:-1], results[-1]
    assert len(a.ids) == 3 and all(len(b.ids) == 100 for b in others) and c.ids == want
    assert handles[-1].slot == handles[0].slot  # the freed slot
    assert a.token_times[-1] < c.token_times[0] and all(c.token_times[-1] < b.token_times[-1] for b in others)
    assert c.timings["queue_s"] > 0


def test_serve_parallel_streams_overlap(cli_cache):
    """Issue 14 item 2 with --parallel 2 --micro-batches 1 (both requests decode in one frame per step): two
    streams run at the same time (their chunks interleave) and each text equals the non-concurrent one;
    /health reports 2 slots."""
    from tests.contract.test_serve import InProcessServer, _post, _sse

    argv = [str(STORIES), "--stages", "2", "--backend", "inproc", "--host", "127.0.0.1", "--port", "0",
            "--max-seq-len", "1024", "--queue", "1", "--parallel", "2", "--micro-batches", "1",
            "--cache-dir", str(cli_cache)]
    srv = InProcessServer(argv)
    try:
        url = srv.url
        h = httpx.get(url + "/health", timeout=30).json()
        assert h["slots"] == 2 and h["running"] == 0
        bodies = [{"prompt": "Once upon a time", "max_tokens": 300}, {"prompt": "The little dog", "max_tokens": 250}]
        alone = [_post(url, "/v1/completions", b).json()["choices"][0]["text"] for b in bodies]
        order: list[int] = []
        texts: dict[int, str] = {}

        def stream(i: int) -> None:
            with httpx.Client(timeout=120) as c, c.stream("POST", url + "/v1/completions",
                                                           json={**bodies[i], "stream": True}) as r:
                chunks = []
                for line in r.iter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        order.append(i)
                    chunks.append(line)
                events, done = _sse(chunks)
                assert done
                texts[i] = "".join(e["choices"][0]["text"] for e in events)

        ts = [threading.Thread(target=stream, args=(i,)) for i in (0, 1)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        assert texts == {0: alone[0], 1: alone[1]}
        # interleaved: stream 0 still sends chunks after stream 1 started
        assert 0 in order[order.index(1):], order[:20]
    finally:
        srv.stop()


def test_serve_names_the_chosen_micro_batches(cli_cache, capsys, micro_batch_spy):
    """RP-PP-3 (issue 14): ``pipeplan serve --parallel 2`` without ``--micro-batches`` prints, before it serves,
    one stderr line naming the M the compiled package's costs predict fastest (the line ``pipeplan run``
    prints), and its pipeline runs with that M; with ``--micro-batches`` there is no such line and the given M
    is used."""
    import re

    from tests.contract.test_serve import InProcessServer

    used = micro_batch_spy
    argv = [str(STORIES), "--stages", "2", "--backend", "inproc", "--host", "127.0.0.1", "--port", "0",
            "--max-seq-len", "1024", "--queue", "1", "--parallel", "2", "--cache-dir", str(cli_cache)]
    capsys.readouterr()
    srv = InProcessServer(argv)
    try:
        lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("pipeplan: micro-batches ")]
        assert httpx.get(srv.url + "/health", timeout=30).json()["slots"] == 2
    finally:
        srv.stop()
    assert len(lines) == 1 and re.fullmatch(
        r"pipeplan: micro-batches [12] for --parallel 2 \(predicted fastest; aggregate tok/s "
        r"M=1 [0-9.]+, M=2 [0-9.]+\)", lines[0]), lines
    chosen = int(lines[0].split()[2])
    assert used and used[-1] == chosen
    forced = 3 - chosen
    used.clear()
    srv = InProcessServer([*argv, "--micro-batches", str(forced)])
    try:
        err = capsys.readouterr().err
    finally:
        srv.stop()
    assert "micro-batches" not in err and used == [forced]
