"""Micro-batched decode (issue 14 item 1): DATA frames that carry the rows of several sequences
(``Frame.segments``), the executor's one-pass run of them (``StageExecutor.forward_segments``) and the
orchestrator's ``micro_batches`` policy.

The greedy ids of concurrent requests with batching on (the default ``micro_batches``) are checked against
their single-request ids in tests/contract/test_concurrent.py (stories260K and Gemma 3, 1 and 3 stages, inproc
and local), which also asserts that frames there carried several sequences.
"""

from __future__ import annotations

import numpy as np
import pytest
from pipeplan.errors import StageFault
from pipeplan.plan_types import RuntimeConfig
from pipeplan.runtime.dequant import QuantTensor
from pipeplan.runtime.kernels import cpu
from pipeplan.runtime.orchestrator import GenRequest, Pipeline, RunRequestError
from pipeplan.runtime.program import ExecutionError, HParams, StageExecutor, build_stage_program
from pipeplan.runtime.transport import (
    DATA,
    MAX_SEGMENTS,
    RESET,
    Frame,
    ObjectSpecError,
    SamplerParams,
    Segment,
    check_segments,
)

from tests.conftest import STORIES
from tests.unit.test_cpu_kernels import QUANTIZED, SIMD, _weight

CPU = "pipeplan.runtime.kernels.cpu"
PROMPTS = [[1, 403, 407, 260, 431], [1, 300, 301], [1, 20, 30, 40, 50, 60, 70], [1, 5]]


# --------------------------------------------------------------------------- kernels and executor
@pytest.mark.parametrize("simd", SIMD, ids=lambda s: "avx2" if s else "portable")
@pytest.mark.parametrize("ggml_type", ("F32", *QUANTIZED))
def test_rows_alone_matmul_equals_one_row_matmuls(ggml_type, simd):
    """RP-PP-3: in a step of rows alone (``begin_step(..., rows_alone=True)``) the C matmul of 6 rows gives
    every row the bits of its one-row matmul, for every weight type (Q4_K's repacked gemv with N % 8 == 0,
    the multi-row dot products of NYMAX rows and the remainder, the multi-weight-row decode kernels)."""
    n, k, t = 64, 256, 6
    if ggml_type == "F32":
        w = (np.random.default_rng(3).standard_normal((n, k)) * 0.05).astype(np.float32)
    else:
        w = QuantTensor(ggml_type, (n, k), _weight(ggml_type, n, k, 3), "w")
    x = (np.random.default_rng(4).standard_normal((t, k)) * 2).astype(np.float32)
    prev = cpu._qkernels.set_simd(simd)
    try:
        alone = np.concatenate([cpu.matmul(x[i:i + 1], w) for i in range(t)])
        cpu.begin_step(0, t, True)
        try:
            got = cpu.matmul(x, w)
        finally:
            cpu.begin_step(0, 0)
    finally:
        cpu._qkernels.set_simd(prev)
    assert got.shape == (t, n) and np.array_equal(got, alone)


@pytest.fixture(scope="module")
def gemma_parts(gemma3_path):
    """Gemma 3 270M on the CPU table, as two executors of 3 slots: blocks [0, 2) with the embedding and
    blocks [16, 18) with the head (the middle blocks are the same kernels)."""
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.runtime.loader import load_quantized_weights, slice_of

    facts = read_model_facts(gemma3_path)
    hp = HParams.from_facts(facts)
    w = load_quantized_weights(facts.files, [slice_of(t) for t in facts.tensors], types=cpu.CPU_TYPES)
    first = StageExecutor(hp, build_stage_program(hp, 0, 2, True, False, 32), w, 32, cpu, slots=3, num_threads=1)
    last = StageExecutor(hp, build_stage_program(hp, 16, 18, False, True, 32), w, 32, cpu, slots=3, num_threads=1)
    return first, last


def _snap(v):
    return v.copy() if isinstance(v, np.ndarray) else v.clone()


def _host(v) -> np.ndarray:
    return np.array(v if isinstance(v, np.ndarray) else v.numpy(), copy=True)


def _prefill_then_compare(first: StageExecutor, last: StageExecutor, prompts: list[list[int]]) -> None:
    """Prefill each prompt into its slot, decode one token per slot alone (saving and restoring the caches),
    then the same decodes as one micro-batch: its logits and KV caches equal the single steps' bit for bit."""
    ids = first._arrays.token_ids
    toks = []
    for s, p in enumerate(prompts):
        first.reset(s)
        last.reset(s)
        toks.append(int(np.argmax(_host(last.forward(first.forward(ids(p), 0, slot=s), 0, last_only=True,
                                                     slot=s))[-1])))
    saved = [[{k: _snap(v) for k, v in d.items()} for d in ex.slot_caches] for ex in (first, last)]
    alone = [_host(last.forward(first.forward(ids([toks[s]]), len(p), slot=s), len(p), last_only=True, slot=s))
             for s, p in enumerate(prompts)]
    after_alone = [[{k: _snap(v) for k, v in d.items()} for d in ex.slot_caches] for ex in (first, last)]
    for ex, sv in zip((first, last), saved, strict=True):
        for d, sd in zip(ex.slot_caches, sv, strict=True):
            for k in d:
                d[k][...] = sd[k]
        for s, p in enumerate(prompts):
            ex.n_pasts[s] = len(p)
    table = [(s, len(p), 1) for s, p in enumerate(prompts)]
    got = _host(last.forward_segments(first.forward_segments(ids(toks), table), table, last_only=True))
    assert got.shape == (len(prompts), last.hp.n_vocab)
    for s in range(len(prompts)):
        assert np.array_equal(got[s:s + 1], alone[s]), s
    # the KV caches hold what the single steps wrote, and every slot moved on by one position
    for ex, want in zip((first, last), after_alone, strict=True):
        assert [ex.n_pasts[s] for s in range(len(prompts))] == [len(p) + 1 for p in prompts]
        for d, w in zip(ex.slot_caches, want, strict=True):
            assert all(np.array_equal(_host(d[k]), _host(w[k])) for k in d)


def test_batched_frame_equals_single_frames_gemma(gemma_parts):
    """RP-PP-3, WL-R-2: one frame of 3 sequences (decode rows at positions 4, 2, 6 of slots 0-2) through the
    CPU table gives logits bit-identical to 3 single-sequence frames (Q5_0/Q8_0/Q4_K/Q6_K matmuls, F16 KV
    slots, sliding-window attention), and the same KV-cache contents."""
    first, last = gemma_parts
    _prefill_then_compare(first, last, [[2, 100, 200, 300], [2, 5000], [2, 9, 8, 7, 6, 5]])


@pytest.mark.parametrize("kernels", ["cpu", "reference"])
def test_batched_frame_equals_single_frames_stories(stories_path, kernels):
    """RP-PP-3: the same on stories260K with the CPU table (one pass) and the torch reference table (a table
    without ``BATCH_ROWS``: the executor runs the segments one by one); a mixed micro-batch (decode rows and a
    prompt chunk) is run per segment and equals the single frames too."""
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.runtime.kernels import reference
    from pipeplan.runtime.loader import load_quantized_weights, load_stage_weights, slice_of

    facts = read_model_facts(stories_path)
    hp = HParams.from_facts(facts)
    slices = [slice_of(t) for t in facts.tensors]
    table = cpu if kernels == "cpu" else reference
    w = load_quantized_weights(facts.files, slices, types=cpu.CPU_TYPES) if kernels == "cpu" \
        else load_stage_weights(facts.files, slices)
    half = hp.n_layer // 2
    first = StageExecutor(hp, build_stage_program(hp, 0, half, True, False, 32), w, 32, table, slots=3)
    last = StageExecutor(hp, build_stage_program(hp, half, hp.n_layer, False, True, 32), w, 32, table, slots=3)
    assert first._batch_rows == (kernels == "cpu")
    prompts = [[1, 403, 407, 260], [1, 300], [1, 20, 30, 40, 50, 60]]
    _prefill_then_compare(first, last, prompts)
    # mixed: slot 0 decodes one row at 5 while slot 2 re-runs positions [2, 5) (3 rows)
    ids = first._arrays.token_ids
    want0 = _host(last.forward(first.forward(ids([7]), 5, slot=0), 5, last_only=True, slot=0))
    want2 = _host(last.forward(first.forward(ids([11, 12, 13]), 2, slot=2), 2, last_only=True, slot=2))
    mixed = [(0, 5, 1), (2, 2, 3)]
    got = _host(last.forward_segments(first.forward_segments(ids([7, 11, 12, 13]), mixed), mixed, last_only=True))
    assert got.shape == (2, hp.n_vocab)
    assert np.array_equal(got[0:1], want0) and np.array_equal(got[1:2], want2)


@pytest.mark.parametrize("segments, message", [
    ([], "without segments"),
    ([(3, 0, 1)], "slot 3 outside [0, 3)"),
    ([(0, 0, 1), (0, 1, 1)], "slot 0 named by two segments"),
    ([(0, 0, 1), (1, 0, 1)], "hold 2 rows but the input has 3"),
    ([(0, 0, 1), (1, 31, 2)], "exceed max_seq_len 32"),
    ([(0, 0, 2), (1, 5, 1)], "skips positions"),
    ([(0, 0, 0), (1, 0, 3)], "0 rows (need"),
    ([(0, 0, 2), (1, -1, 1)], "need >= 0"),
    ([(0, 0, 2), (1, 0, True)], "ints"),
])
def test_bad_segment_tables_are_execution_errors(stories_path, segments, message):
    """RP-PP-3: a bad segment table (no segment, a slot out of range or named twice, rows that do not add up,
    positions past max_seq_len or past the cached ones) is an ExecutionError naming it, before any kernel runs."""
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.runtime.loader import load_quantized_weights, slice_of

    facts = read_model_facts(stories_path)
    hp = HParams.from_facts(facts)
    w = load_quantized_weights(facts.files, [slice_of(t) for t in facts.tensors], types=cpu.CPU_TYPES)
    ex = StageExecutor(hp, build_stage_program(hp, 0, 1, True, False, 32), w, 32, cpu, slots=3)
    with pytest.raises(ExecutionError) as e:
        ex.forward_segments(np.asarray([1, 2, 3]), segments)
    assert e.value.where == "segments" and message in e.value.message
    assert ex.n_pasts == [0, 0, 0]


# --------------------------------------------------------------------------- transport
def test_segment_tables_on_the_transports():
    """RP-OS-1: the transports check a frame's segment table: more than MAX_SEGMENTS segments or rows that do
    not add up to the array's are an ObjectSpecError at send time; a table of one frame keeps its fields."""
    arr = np.zeros(3, dtype=np.int32)
    ok = Frame(DATA, 1, 4, arr, None, 0, (Segment(1, 0, 4, 1), Segment(2, 1, 9, 2)))
    check_segments("e", ok)
    check_segments("e", Frame(DATA, 1, 4, arr))
    with pytest.raises(ObjectSpecError, match="do not add up"):
        check_segments("e", ok._replace(segments=(Segment(1, 0, 4, 1),)))
    many = tuple(Segment(i, i, 0, 1) for i in range(MAX_SEGMENTS + 1))
    with pytest.raises(ObjectSpecError, match="segments"):
        check_segments("e", Frame(DATA, 0, 0, np.zeros(MAX_SEGMENTS + 1, dtype=np.int32), None, 0, many))
    assert ok._replace(array=arr.copy()).segments == ok.segments  # what the Ray backend's _owned does


# --------------------------------------------------------------------------- orchestrator policy
def _stories_pipeline(stages: int, parallel: int, micro_batches: int | None, backend: str = "inproc") -> Pipeline:
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.runtime.replay import local_pool_with_peaks

    facts = read_model_facts(STORIES)
    pool, _ = local_pool_with_peaks(stages)
    module = plan_run(facts, RuntimeConfig(max_seq_len=48, ring_slots=parallel, parallel=parallel), pool, stages)
    return Pipeline(project_provisions(module), backend=backend, kernels=CPU, num_threads=1, parallel=parallel,
                    prefill_rows=4, micro_batches=micro_batches)


@pytest.mark.parametrize("micro_batches, rows", [(1, 4), (2, 2), (4, 1)])
def test_micro_batches_policy_rows_per_frame(micro_batches, rows):
    """RP-PP-3: ``Pipeline(parallel=4, micro_batches=M)`` on 3 inproc stages: decode frames carry at most
    ``ceil(4 / M)`` sequences and, once all four decode, exactly that many (M = 1: all four in one frame; M = 4:
    no micro-batching, one sequence per frame); the greedy ids equal each request's single-request ids; the
    stages saw the same frames."""
    with _stories_pipeline(3, 4, micro_batches) as pipe:
        assert (pipe.micro_batches, pipe.batch_rows) == (micro_batches, rows)
        single = [pipe.generate_concurrent([GenRequest(p, 12)])[0].ids for p in PROMPTS]
        pipe.segments_sent.clear()
        pipe.segments_returned.clear()
        got = pipe.generate_concurrent([GenRequest(p, 12) for p in PROMPTS])
        assert [g.ids for g in got] == single
        assert pipe.segments_sent == pipe.segments_returned
        assert max(pipe.segments_sent) == rows
        # after the prompts, 11 decode steps per sequence: at least 4 * 11 / rows - rows frames of `rows` rows
        assert pipe.segments_sent[rows] * rows >= 4 * 11 - 4 * rows
        workers = pipe.backend.workers  # type: ignore[attr-defined]
        served = [dict(w.segments_served) for w in workers]
        assert all(s == served[0] for s in served)
        if rows > 1:
            assert served[0] == {k: v for k, v in pipe.segments_sent.items() if k > 1}
        else:
            assert served[0] == {}


def test_pipeline_takes_the_predicted_micro_batches(monkeypatch):
    """RP-PP-3 (issue 14): ``Pipeline(parallel=4)`` without ``micro_batches`` (programs compiled at start) runs
    with the M that ``choose_micro_batches`` predicts fastest on the compiled package; with the choice patched to
    M = 2 it sends frames of 2 rows and the greedy ids stay each request's single-request ids; a given
    ``micro_batches`` wins and no choice is made."""
    import pipeplan.runtime.orchestrator as orch
    from pipeplan.analysis.concurrency import MicroBatchChoice, choose_micro_batches

    with _stories_pipeline(3, 4, None) as pipe:
        want = choose_micro_batches(pipe.compiled.package, 4)
        assert want is not None and pipe.micro_batch_choice == want
        assert (pipe.micro_batches, pipe.options.micro_batches) == (want.micro_batches, want.micro_batches)
    seen = []

    def patched(package, n, **kw):
        seen.append(n)
        return MicroBatchChoice(2, choose_micro_batches(package, n, **kw).predictions)  # type: ignore[union-attr]

    monkeypatch.setattr(orch, "choose_micro_batches", patched)
    with _stories_pipeline(3, 4, None) as pipe:
        assert seen == [4]
        assert (pipe.micro_batches, pipe.batch_rows, pipe.options.micro_batches) == (2, 2, 2)
        single = [pipe.generate_concurrent([GenRequest(p, 10)])[0].ids for p in PROMPTS]
        pipe.segments_sent.clear()
        assert [g.ids for g in pipe.generate_concurrent([GenRequest(p, 10) for p in PROMPTS])] == single
        assert max(pipe.segments_sent) == 2
    with _stories_pipeline(3, 4, 1) as pipe:
        assert (pipe.micro_batches, pipe.micro_batch_choice, seen) == (1, None, [4])


def test_default_micro_batches_and_bad_values():
    """RP-AR-4: the default M is min(parallel, stages) (until a compile at start chooses the predicted fastest);
    M not an int >= 1 is a RunRequestError."""
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.runtime.replay import local_pool_with_peaks

    facts = read_model_facts(STORIES)
    ps = project_provisions(plan_run(facts, RuntimeConfig(max_seq_len=32, parallel=8, ring_slots=8),
                                     local_pool_with_peaks(3)[0], 3))
    assert Pipeline(ps, backend="inproc", parallel=8).micro_batches == 3
    assert Pipeline(ps, backend="inproc", parallel=8).batch_rows == 3
    assert Pipeline(ps, backend="inproc", parallel=2).micro_batches == 2
    assert Pipeline(ps, backend="inproc", parallel=8, micro_batches=2).options.micro_batches == 2  # to the backend
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(RunRequestError) as e:
            Pipeline(ps, backend="inproc", parallel=4, micro_batches=bad)  # type: ignore[arg-type]
        assert e.value.where == "micro_batches"


@pytest.mark.parametrize("segments, message", [
    ((Segment(90, 0, 0, 1), Segment(91, 7, 0, 1)), "slot 7"),
    ((Segment(90, 0, 0, 1), Segment(91, 1, 47, 1)), "skips positions"),
])
def test_bad_segment_table_is_a_stage_fault(segments, message):
    """RP-PP-3: a micro-batched frame whose segment table names a slot the stages do not have, or a
    position past the slot's cached ones, faults the stage (a typed runtime StageFault naming it), and the
    pipeline reports it to the next request; no traceback escapes."""
    with _stories_pipeline(1, 2, None) as pipe:
        tx = pipe._tx
        assert tx is not None
        for slot in (0, 1):
            assert tx.send(Frame(RESET, 90 + slot, 0, None, SamplerParams(), slot), timeout=5)
        assert tx.send(Frame(DATA, 90, 0, np.asarray([1, 2], dtype=np.int32), None, 0, segments), timeout=5)
        with pytest.raises(StageFault) as e:
            pipe.generate_concurrent([GenRequest([1, 2], 2)])
        assert e.value.kind == "runtime" and message in e.value.detail
