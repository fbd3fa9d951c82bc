"""Seed 001 (Weight Lifecycle) as black-box behaviour: observable events of stage workers run by the
orchestrator, for successes and for injected and real failures of every kind."""

from __future__ import annotations

import dataclasses
import hashlib
import multiprocessing as mp
import os
import signal
import threading
import time

import pytest
from pipeplan.errors import StageFault
from pipeplan.plan_types import RuntimeConfig, WeightSource
from pipeplan.runtime.events import StageFaulted, StageReady, WeightsReady
from pipeplan.runtime.orchestrator import Pipeline, generate, generate_many
from pipeplan.runtime.shm_ring import segment_prefix
from pipeplan.runtime.stage import FaultInjection, FaultInjectionError, StageWorker

from tests.conftest import STORIES

PROMPT = "Once upon a time"
GREEDY_5 = [432, 383, 286, 261, 376]


def _provisions(path, n: int, max_seq_len: int = 64):
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.frontend.pool import local_pool

    facts = read_model_facts(path)
    return project_provisions(plan_run(facts, RuntimeConfig(max_seq_len=max_seq_len), local_pool(n), n))


@pytest.fixture(scope="module")
def prov3():
    return _provisions(STORIES, 3)


@pytest.fixture(scope="module")
def programs3(prov3):
    """The compiled stage programs of ``prov3`` (what a Pipeline hands its stages)."""
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.runtime.compiled import compile_provisions

    return compile_provisions(prov3, read_model_facts(STORIES)).programs


def _shm_segments() -> set[str]:
    """Shared-memory rings created by this test process (other processes' rings are not ours to judge)."""
    return {n for n in os.listdir("/dev/shm") if n.startswith(segment_prefix())}


def _assert_ready_order(events, stages):
    for s in stages:
        kinds = [type(e) for e in events if e.stage == s]
        assert kinds == [WeightsReady, StageReady], (s, kinds)
        w = next(e for e in events if e.stage == s and isinstance(e, WeightsReady))
        r = next(e for e in events if e.stage == s and isinstance(e, StageReady))
        assert w.seq < r.seq and w.t <= r.t


def test_weights_ready_before_stage_ready_inproc(prov3):
    """WL-R-4, WL-L-4: every stage reports WeightsReady strictly before StageReady (seq and monotonic time),
    and the run generates the expected tokens."""
    seen = []
    r = generate(STORIES, prov3, PROMPT, max_tokens=5, backend="inproc", on_event=seen.append)
    assert r.token_ids == GREEDY_5
    _assert_ready_order(r.events, range(3))
    assert [e.seq for e in r.events] == list(range(1, 7)) and seen == r.events


def test_stage_maps_only_its_own_bytes(prov3):
    """WL-A-4, WL-L-1, WL-R-3: each stage maps only its own tensors' byte ranges (WeightsReady.bytes),
    far less than the file; the stages together map about the file's tensor bytes."""
    from pipeplan.frontend.gguf_facts import read_model_facts

    facts = read_model_facts(STORIES)
    file_tensor_bytes = sum(t.n_bytes for t in facts.tensors)
    events = []
    with Pipeline(prov3, backend="inproc", on_event=events.append):
        pass
    ready = sorted((e for e in events if isinstance(e, WeightsReady)), key=lambda e: e.stage)
    size = STORIES.stat().st_size
    for e, p in zip(ready, prov3):
        own = sum(t.n_bytes for t in p.tensors)
        assert own <= e.bytes < own + 2 * 3 * mmap_granule() and e.bytes < 0.7 * size
    total = sum(e.bytes for e in ready)
    assert file_tensor_bytes <= total <= file_tensor_bytes + len(ready) * 8 * mmap_granule()


def mmap_granule() -> int:
    import mmap

    return mmap.ALLOCATIONGRANULARITY


def test_stage_memory_on_a_multi_block_model(tmp_path_factory):
    """WL-A-4: on a generated 8-block model each of 4 stages maps about a quarter of the block bytes."""
    from tests.ggufgen import write_random_llama

    path = write_random_llama(tmp_path_factory.mktemp("rand") / "rand8.gguf", blocks=8, hidden=128, heads=4,
                              kv_heads=2, ffn=344, vocab=64)
    ps = _provisions(path, 4, max_seq_len=16)
    events = []
    with Pipeline(ps, backend="inproc", on_event=events.append):
        pass
    mapped = {e.stage: e.bytes for e in events if isinstance(e, WeightsReady)}
    size = path.stat().st_size
    for p in ps:
        own = sum(t.n_bytes for t in p.tensors)
        assert own <= mapped[p.stage] <= own + 64 * mmap_granule()
        assert mapped[p.stage] < 0.4 * size
    assert sum(mapped.values()) < 1.2 * size


def _run_fault(provisions, backend, fi=None):
    events = []
    before = _shm_segments()
    t0 = time.monotonic()
    with pytest.raises(StageFault) as e:
        generate(STORIES, provisions, PROMPT, max_tokens=3, backend=backend, fault_injection=fi,
                 on_event=events.append)
    assert time.monotonic() - t0 < 60
    assert mp.active_children() == []
    assert _shm_segments() <= before
    return e.value, events


def _assert_faulted(fault, events, kind, stage):
    assert (fault.kind, fault.stage) == (kind, stage) and fault.code == f"stage_fault:{kind}"
    mine = [e for e in events if e.stage == stage]
    assert any(isinstance(e, StageFaulted) and e.fault_kind == kind for e in mine)
    assert not any(isinstance(e, StageReady) for e in mine)
    assert not any(isinstance(e, WeightsReady) for e in mine)


@pytest.mark.parametrize("kind", ["download", "parse", "allocation", "bind", "invalid_range"])
def test_injected_fault_inproc(prov3, kind):
    """WL-F-1..5, WL-F-6, WL-L-4: an injected failure of each kind in stage 1 gives StageFault(kind, 1),
    a StageFaulted event and no WeightsReady/StageReady from stage 1."""
    fault, events = _run_fault(prov3, "inproc", FaultInjection(1, kind))
    _assert_faulted(fault, events, kind, 1)


@pytest.mark.parametrize("kind", ["download", "parse", "allocation", "bind", "invalid_range"])
def test_injected_fault_local_processes(kind):
    """WL-F-1..5, WL-F-6: the same with one process per stage; afterwards no stage process is alive and
    no shared-memory ring is left."""
    ps = _provisions(STORIES, 2)
    fault, events = _run_fault(ps, "local", FaultInjection(1, kind))
    _assert_faulted(fault, events, kind, 1)


def test_real_download_fault_missing_file(prov3, tmp_path):
    """WL-A-1, WL-F-1: the stage loads the weight source its ProvisionStage names: one that does not exist
    on the node faults the stage (download)."""
    bad = dataclasses.replace(prov3[2], weights=WeightSource((str(tmp_path / "missing.gguf"),)))
    fault, events = _run_fault([prov3[0], prov3[1], bad], "inproc")
    _assert_faulted(fault, events, "download", 2)


def test_real_parse_faults(prov3, tmp_path):
    """WL-F-2: a file that is not GGUF, and a provision whose tensor byte range disagrees with the file's
    tensor index, each fault the stage (parse)."""
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"NOPE" * 64)
    bad = dataclasses.replace(prov3[0], weights=WeightSource((str(junk),)))
    fault, events = _run_fault([bad, prov3[1], prov3[2]], "inproc")
    _assert_faulted(fault, events, "parse", 0)
    t0 = prov3[1].tensors[0]
    shifted = (dataclasses.replace(t0, offset=t0.offset + 32),) + prov3[1].tensors[1:]
    fault, events = _run_fault([prov3[0], dataclasses.replace(prov3[1], tensors=shifted), prov3[2]], "inproc")
    _assert_faulted(fault, events, "parse", 1)
    assert t0.name in fault.detail


def test_real_invalid_range_faults(prov3):
    """WL-A-2, WL-A-3, WL-F-5, WL-R-2: a range outside the plan's blocks, a block count that disagrees with
    the file, and a provision holding tensors of blocks outside its range each fault (invalid_range) with no
    WeightsReady: the range is validated before WeightsReady."""
    p = prov3[1]
    cases = [
        dataclasses.replace(p, layer_end=p.block_count + 1),
        dataclasses.replace(p, layer_start=p.layer_end),
        dataclasses.replace(p, block_count=6, layer_end=6),
        dataclasses.replace(p, tensors=p.tensors + tuple(t for t in prov3[2].tensors if t.name.startswith("blk."))),
        dataclasses.replace(p, has_embedding=True),
    ]
    for bad in cases:
        fault, events = _run_fault([prov3[0], bad, prov3[2]], "inproc")
        _assert_faulted(fault, events, "invalid_range", 1)


def test_real_allocation_fault(prov3):
    """WL-F-3: a KV cache that cannot be allocated (max_seq_len 2**40 positions) faults (allocation)."""
    bad = dataclasses.replace(prov3[2], max_seq_len=2**40)
    fault, events = _run_fault([prov3[0], prov3[1], bad], "inproc")
    _assert_faulted(fault, events, "allocation", 2)


def test_faulting_worker_in_isolation(prov3, programs3):
    """WL-L-4, WL-F-6: the worker is a black box with observable events: after a bind fault it emitted
    exactly one StageFaulted and refuses to connect (no StageReady)."""
    from pipeplan.runtime.transport import InprocTransport, routes_from_provisions

    events = []
    w = StageWorker(prov3[1], events.append, fault_injection=FaultInjection(1, "bind"), program=programs3[1])
    with pytest.raises(StageFault, match="is missing"):
        w.load()
    with pytest.raises(StageFault):
        w.connect(InprocTransport(routes_from_provisions(prov3)))
    assert [type(e) for e in events] == [StageFaulted] and events[0].fault_kind == "bind"


def test_fault_injection_spec_parsing(monkeypatch):
    """The injection hook parses STAGE:KIND[:AFTER] (CLI flag / $PIPEPLAN_INJECT_FAULT) and rejects junk."""
    assert FaultInjection.parse("1:bind") == FaultInjection(1, "bind")
    assert FaultInjection.parse("0:runtime:7") == FaultInjection(0, "runtime", 7)
    monkeypatch.setenv("PIPEPLAN_INJECT_FAULT", "2:parse")
    assert FaultInjection.from_env() == FaultInjection(2, "parse")
    monkeypatch.setenv("PIPEPLAN_INJECT_FAULT", "")
    assert FaultInjection.from_env() is None
    for bad in ("x:bind", "1", "1:explode", "1:bind:x"):
        with pytest.raises(FaultInjectionError):
            FaultInjection.parse(bad)


def test_runtime_fault_while_serving_inproc(prov3):
    """A stage that fails while serving (injected after 1 frame) ends the run with StageFault(runtime)
    after it had reported StageReady."""
    fault, events = _run_fault(prov3, "inproc", FaultInjection(2, "runtime", after=1))
    assert (fault.kind, fault.stage) == ("runtime", 2) and "injected runtime failure" in fault.detail
    _assert_ready_order([e for e in events if not isinstance(e, StageFaulted)], range(3))


def test_killed_stage_process_faults_within_5s():
    """DESIGN §4: killing a stage process mid-generation yields StageFault(kind="runtime") within 5 s,
    not a hang; no stage process or shared-memory segment is left."""
    ps = _provisions(STORIES, 3, max_seq_len=256)
    before = _shm_segments()
    pipe = Pipeline(ps, backend="local")
    pipe.start()
    try:
        victim = pipe.backend.pids[1]
        killed_at = []

        def kill():
            killed_at.append(time.monotonic())
            os.kill(victim, signal.SIGKILL)

        timer = threading.Timer(0.05, kill)
        timer.start()
        with pytest.raises(StageFault) as e:
            for _ in range(50):  # keeps generating until the kill lands
                pipe.generate_ids([1, 403, 407, 261, 378], 200)
        timer.join()
        assert time.monotonic() - killed_at[0] < 5.0
        assert (e.value.kind, e.value.stage) == ("runtime", 1) and "killed by signal 9" in e.value.detail
    finally:
        pipe.close()
    assert mp.active_children() == [] and _shm_segments() <= before


def test_shards_and_cached_artifact_give_the_same_tokens(tmp_path, expected_cases):
    """WL-L-2, WL-L-3, WL-A-1: a gguf-split shard set (3 shards) runs with the same greedy tokens, and so
    does a provision whose weight source is only a sha256 found in the node's cache."""
    from tests.ggufgen import write_split

    shards = write_split(STORIES, tmp_path / "split", 3)
    ps = _provisions(shards[0], 2)
    assert len(ps[0].weights.uris) == 3
    c = expected_cases[0]
    r = generate(shards[0], ps, c["prompt"], max_tokens=40, backend="inproc")
    assert r.prompt_ids == c["prompt_ids"] and r.token_ids == c["greedy_ids"]
    # cached artifact: the source names a path that does not exist here, but its sha256 is cached
    cache = tmp_path / "cache"
    sha = hashlib.sha256(STORIES.read_bytes()).hexdigest()
    (cache / sha).mkdir(parents=True)
    (cache / sha / "stories260K.gguf").write_bytes(STORIES.read_bytes())
    gone = WeightSource(("/nonexistent/node-a/stories260K.gguf",), (sha,))
    ps = [dataclasses.replace(p, weights=gone) for p in _provisions(STORIES, 2)]
    r = generate(STORIES, ps, c["prompt"], max_tokens=40, backend="inproc", cache_dir=cache)
    assert r.token_ids == c["greedy_ids"]


def test_http_download_by_stages_then_cache(tmp_path, expected_cases):
    """WL-L-1, WL-L-3, WL-R-1: stages download the GGUF from an http URL (loopback server) into the cache,
    verified by sha256, and generate the expected tokens; a second run makes no request."""
    import http.server

    data = STORIES.read_bytes()
    requests = []

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            requests.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/stories260K.gguf"
        src = WeightSource((url,), (hashlib.sha256(data).hexdigest(),), (len(data),))
        ps = [dataclasses.replace(p, weights=src) for p in _provisions(STORIES, 2)]
        c = expected_cases[1]
        cache = tmp_path / "cache"
        results = generate_many(STORIES, ps, [c["prompt"]], max_tokens=40, backend="inproc", cache_dir=cache)
        assert results[0].token_ids == c["greedy_ids"]
        assert 1 <= len(requests) <= 2  # each stage may fetch concurrently; both land in the same cache entry
        n = len(requests)
        r = generate(STORIES, ps, c["prompt"], max_tokens=40, backend="inproc", cache_dir=cache)
        assert r.token_ids == c["greedy_ids"] and len(requests) == n
        assert not [p for p in cache.rglob("*.part")]
    finally:
        srv.shutdown()
        srv.server_close()
