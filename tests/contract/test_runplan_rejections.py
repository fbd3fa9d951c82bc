"""RunPlan rejections (seed 000, "Authority / Rejection"): for every rejection code, contradictory
inputs give that code and NO plan — through the API (``plan_run`` raises, returns nothing) and
through the CLI (exit 2, empty stdout, exactly one ``error[<code>]: ...`` line on stderr, no ``-o``
file written)."""

from __future__ import annotations

import dataclasses

import pytest
from pipeplan.errors import RunPlanRejection
from pipeplan.frontend.gguf_facts import read_model_facts
from pipeplan.frontend.planner import plan_run
from pipeplan.frontend.pool import local_pool
from pipeplan.plan_types import NodePool, NodeSpec, RuntimeConfig, TensorInfo
from pipeplan.tools.cli import main as cli_main

from tests.conftest import STORIES, VOCAB_ONLY
from tests.contract.test_runplan_properties import llama_facts

CONFIG = RuntimeConfig(max_seq_len=256)


@pytest.fixture(scope="session")
def facts():
    return read_model_facts(STORIES)


def _rejects(code, *args, **kwargs) -> RunPlanRejection:
    result = None
    with pytest.raises(RunPlanRejection) as ei:
        result = plan_run(*args, **kwargs)
    assert result is None
    assert ei.value.code == code, ei.value.one_line()
    assert ei.value.one_line().startswith(f"error[{code}]: ") and "\n" not in ei.value.one_line()
    return ei.value


def _cli_rejects(capsys, tmp_path, code: str, argv: list[str]) -> str:
    out = tmp_path / "plan.mlir"
    rc = cli_main(["plan", *argv, "-o", str(out)])
    cap = capsys.readouterr()
    assert rc == 2
    assert cap.out == ""
    lines = cap.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error[{code}]: "), cap.err
    assert not out.exists() and list(tmp_path.glob(".plan.mlir*")) == []
    rc = cli_main(["plan", *argv])  # stdout mode: nothing printed either
    cap = capsys.readouterr()
    assert rc == 2 and cap.out == "" and cap.err.startswith(f"error[{code}]: ")
    return lines[0]


def _pool_file(tmp_path, nodes: list[tuple[str, int]]) -> str:
    p = tmp_path / "pool.toml"
    p.write_text("".join(f'[[nodes]]\nid = "{i}"\nmemory_bytes = {m}\n' for i, m in nodes))
    return str(p)


# --------------------------------------------------------------------------- unknown_node
def test_unknown_node(facts, capsys, tmp_path):
    """RP-AR-1: a placement naming a node outside the pool -> unknown_node (API and CLI)."""
    err = _rejects("unknown_node", facts, CONFIG, local_pool(2), 2, ["local0", "nowhere"])
    assert "stage 1" in err.message and "'nowhere'" in err.message
    line = _cli_rejects(capsys, tmp_path, "unknown_node", [str(STORIES), "--stages", "2", "--placement", "local0,gpu9"])
    assert "'gpu9'" in line


# --------------------------------------------------------------------------- duplicate_stage
def test_duplicate_stage(facts, capsys, tmp_path):
    """RP-AR-2: one node claimed by two stages -> duplicate_stage (API and CLI)."""
    err = _rejects("duplicate_stage", facts, CONFIG, local_pool(2), 2, ["local1", "local1"])
    assert "stages 0 and 1" in err.message
    _cli_rejects(capsys, tmp_path, "duplicate_stage", [str(STORIES), "--placement", "local0,local1,local0",
                                                      "--nodes", _pool_file(tmp_path, [("local0", 1 << 30),
                                                                                       ("local1", 1 << 30)])])


# --------------------------------------------------------------------------- missing_stage
@pytest.mark.parametrize("placement, fragment", [
    (["local0", "local1"], "stage 2 has no node"),
    (["local0", "", "local2"], "stage 1 has no node"),
    (["local0", None, "local2"], "stage 1 has no node"),
    ("local0,local1,local2", "must be a sequence of node ids"),
])
def test_missing_stage(facts, placement, fragment):
    """RP-AR-3: a stage left without a node (short placement, empty entry, not a list) -> missing_stage."""
    err = _rejects("missing_stage", facts, CONFIG, local_pool(3), 3, placement)
    assert fragment in err.message


def test_missing_stage_cli(capsys, tmp_path):
    """RP-AR-3: through the CLI, --stages 3 with a 2-node placement -> missing_stage."""
    _cli_rejects(capsys, tmp_path, "missing_stage", [str(STORIES), "--stages", "3", "--placement", "local0,local1"])


# --------------------------------------------------------------------------- invalid_stage_count
@pytest.mark.parametrize("count, pool_size, placement, fragment", [
    (0, 2, None, "must be >= 1"),
    (-3, 2, None, "must be >= 1"),
    (6, 6, None, "5 blocks cannot fill 6 stages"),
    (3, 2, None, "3 stages need 3 distinct nodes but the pool has 2"),
    (2, 3, ["local0", "local1", "local2"], "placement names 3 nodes but the stage count is 2"),
    (2.0, 2, None, "must be an integer"),
])
def test_invalid_stage_count(facts, count, pool_size, placement, fragment):
    """RP-AR-4: stage counts outside 1..block_count, beyond the pool, or contradicting the placement."""
    err = _rejects("invalid_stage_count", facts, CONFIG, local_pool(pool_size), count, placement)
    assert fragment in err.message


@pytest.mark.parametrize("argv", [["--stages", "6"], ["--stages", "0"]])
def test_invalid_stage_count_cli(capsys, tmp_path, argv):
    """RP-AR-4: through the CLI: 5 blocks over 6 stages, and 0 stages -> invalid_stage_count."""
    _cli_rejects(capsys, tmp_path, "invalid_stage_count", [str(STORIES), *argv])


# --------------------------------------------------------------------------- edge_endpoint_mismatch
@pytest.mark.parametrize("mutate", [
    lambda e: dataclasses.replace(e, consumer=e.consumer + 1) if e.kind == "activation" else e,
    lambda e: dataclasses.replace(e, producer=0) if e.kind == "token_out" else e,
    lambda e: dataclasses.replace(e, edge_id="e0") if e.kind == "token_out" else e,
])
def test_edge_endpoint_mismatch(facts, mutate):
    """RP-AR-5: the planner never emits a wrong edge (it alone assigns edges); a plan whose edges are
    altered afterwards (wrong consumer, wrong producer, reused id) is rejected by the verification
    every plan passes: edge_endpoint_mismatch. (No planner input can state an edge, so there is no
    CLI form of this rejection.)"""
    from pipeplan.dialects.runplan import verify_runplan
    from pipeplan.dialects.runplan_build import build_runplan_module
    from pipeplan.frontend.planner import plan_run_spec

    spec = plan_run_spec(facts, CONFIG, local_pool(3), 3)
    bad = dataclasses.replace(spec, edges=tuple(mutate(e) for e in spec.edges[:-1]) + (mutate(spec.edges[-1]),))
    assert bad != spec
    with pytest.raises(RunPlanRejection) as ei:
        verify_runplan(build_runplan_module(bad, ["local0", "local1", "local2"]))
    assert ei.value.code == "edge_endpoint_mismatch"


# --------------------------------------------------------------------------- inconsistent_model_facts
def _drop_tensor(f, name):
    return dataclasses.replace(f, tensors=tuple(t for t in f.tensors if t.name != name))


@pytest.mark.parametrize("change, fragment", [
    (lambda f: dataclasses.replace(f, block_count=6), "block_count is 6 but block_bytes has 5 entries"),
    (lambda f: dataclasses.replace(f, block_count=6, block_bytes=f.block_bytes + (10,)), "block 5 has no tensors"),
    (lambda f: dataclasses.replace(f, block_bytes=(1,) + f.block_bytes[1:]), "block_bytes[0] is 1"),
    (lambda f: dataclasses.replace(f, head_count=7), "not divisible by head_count 7"),
    (lambda f: dataclasses.replace(f, head_count_kv=3), "not divisible by head_count_kv 3"),
    (lambda f: dataclasses.replace(f, embedding_length=0), "embedding_length must be an integer in [1, 2**63-1]"),
    (lambda f: _drop_tensor(f, "token_embd.weight"), "'token_embd.weight' is missing"),
    (lambda f: _drop_tensor(f, "output_norm.weight"), "'output_norm.weight' is missing"),
    (lambda f: dataclasses.replace(f, tensors=()), "tensor index is empty"),
    (lambda f: dataclasses.replace(f, tensors=f.tensors + (TensorInfo("blk.9.x", "F32", (4,), 0, 0, 16, 9),)),
     "belongs to block 9"),
    (lambda f: dataclasses.replace(f, tensors=f.tensors + (f.tensors[0],)), "appears twice"),
    (lambda f: dataclasses.replace(f, tensors=tuple(dataclasses.replace(t, shard=1) for t in f.tensors)),
     "is in shard 1"),
    (lambda f: dataclasses.replace(f, embedding_length=128, head_count=8), "token_embd.weight has shape"),
    (lambda f: "not facts", "must be a ModelFacts"),
    (lambda f: dataclasses.replace(f, vocab_size=1 << 64), "vocab_size must be an integer in [1, 2**63-1]"),
    (lambda f: dataclasses.replace(f, tensors=f.tensors[:-1] + (dataclasses.replace(f.tensors[-1], offset=1 << 63),)),
     "beyond the 2**63-1 byte limit"),
    (lambda f: dataclasses.replace(f, tensors=f.tensors[:-1] + (dataclasses.replace(f.tensors[-1], shape=(1 << 64,)),)),
     "every dimension must be an integer in [0, 2**63-1]"),
])
def test_inconsistent_model_facts(facts, change, fragment):
    """RP-AR-6: model facts that contradict the block/tensor layout -> inconsistent_model_facts."""
    err = _rejects("inconsistent_model_facts", change(facts), CONFIG, local_pool(2), 2)
    assert fragment in err.message


def test_builder_bug_is_not_disguised_as_a_rejection(facts, monkeypatch):
    """RP-F-1: only the IR builder's attribute VerifyException becomes a typed rejection; an untyped
    exception (a bug) propagates unchanged instead of being reported as invalid_object_spec."""
    import pipeplan.dialects.runplan_build as rb

    def broken(*args, **kwargs):
        raise ZeroDivisionError("builder bug")

    monkeypatch.setattr(rb, "build_runplan_module", broken)
    with pytest.raises(ZeroDivisionError, match="builder bug"):
        plan_run(facts, CONFIG, local_pool(2), 2)


def test_builder_verify_exception_is_typed(facts, monkeypatch):
    """RP-F-2: an attribute verifier refusing a value while building gives a typed rejection, no plan."""
    import pipeplan.dialects.runplan_build as rb
    from xdsl.utils.exceptions import VerifyException

    def refusing(*args, **kwargs):
        raise VerifyException("[RP-OS-5] edge e1: value refused by the attribute verifier")

    monkeypatch.setattr(rb, "build_runplan_module", refusing)
    err = _rejects("invalid_object_spec", facts, CONFIG, local_pool(2), 2)
    assert "value refused" in err.message


def test_vocab_only_cli(capsys, tmp_path):
    """RP-AR-6: the vocab-only parser input (no weights, claims 32 blocks) is rejected by the CLI
    with its GGUF code and no plan."""
    _cli_rejects(capsys, tmp_path, "vocab_only", [str(VOCAB_ONLY), "--stages", "2"])


def test_missing_model_cli(capsys, tmp_path):
    """A model path that does not exist is a typed one-line error, not a traceback."""
    out = tmp_path / "plan.mlir"
    rc = cli_main(["plan", str(tmp_path / "absent.gguf"), "-o", str(out)])
    cap = capsys.readouterr()
    assert rc == 2 and cap.out == "" and len(cap.err.splitlines()) == 1 and cap.err.startswith("error[")
    assert not out.exists()


# --------------------------------------------------------------------------- insufficient_memory
def test_insufficient_memory(facts, capsys, tmp_path):
    """A pool whose placed nodes cannot hold their shares -> insufficient_memory naming the node and
    the bytes needed vs available (API and CLI)."""
    pool = NodePool((NodeSpec("roomy", 1 << 30), NodeSpec("tiny", 150_000)))
    err = _rejects("insufficient_memory", facts, CONFIG, pool, 2)
    assert "'tiny'" in err.message and "has 150000 bytes" in err.message and "needs" in err.message
    # total too small although each node could hold one block
    small = NodePool(tuple(NodeSpec(f"s{i}", 600_000) for i in range(2)))
    err = _rejects("insufficient_memory", facts, CONFIG, small, 2)
    assert "has 600000 bytes" in err.message
    line = _cli_rejects(capsys, tmp_path, "insufficient_memory",
                        [str(STORIES), "--stages", "2", "--nodes", _pool_file(tmp_path, [("a", 1 << 30), ("b", 1000)])])
    assert "'b'" in line


def test_insufficient_memory_kv_cache(facts):
    """KV cache counts: a pool that holds the weights at max_seq_len 16 fails at 2048 positions."""
    pool = NodePool((NodeSpec("a", 900_000), NodeSpec("b", 900_000)))
    plan_run(facts, RuntimeConfig(max_seq_len=16), pool, 2)
    err = _rejects("insufficient_memory", facts, RuntimeConfig(max_seq_len=2048), pool, 2)
    assert "max_seq_len 2048" in err.message


# --------------------------------------------------------------------------- invalid_object_spec
@pytest.mark.parametrize("config, fragment", [
    (RuntimeConfig(alignment=3), "power of two"),
    (RuntimeConfig(alignment=0), "power of two"),
    (RuntimeConfig(alignment=1 << 21), "power of two in [1, 1048576]"),
    (RuntimeConfig(alignment=2), "smaller than the i32 width 4"),
    (RuntimeConfig(activation_dtype="f8"), "no known width"),
    (RuntimeConfig(activation_dtype="i32"), "activation dtype must be a float dtype"),
    (RuntimeConfig(token_dtype="f16"), "token objects hold token ids"),
])
def test_invalid_object_spec(facts, config, fragment):
    """RP-OS-5: invalid alignment or dtype width or token layout -> invalid_object_spec."""
    err = _rejects("invalid_object_spec", facts, config, local_pool(2), 2)
    assert fragment in err.message


def test_invalid_object_spec_extent_overflow():
    """RP-OS-5: an activation extent beyond 2**63-1 bytes (huge context x hidden) -> invalid_object_spec."""
    big = llama_facts(2, hidden=1 << 24, heads=1 << 10, kv_heads=1 << 10, ffn=1, vocab=1, ctx=1 << 40)
    err = _rejects("invalid_object_spec", big, RuntimeConfig(max_seq_len=1 << 40), local_pool(2, memory_bytes=1 << 62), 2)
    assert "exceeds the 2**63-1 byte limit" in err.message


def test_invalid_object_spec_shape_layout(facts):
    """RP-OS-5: an edge spec with an unsupported layout or a wrong shape (changed after planning) is
    rejected by the plan verification."""
    from pipeplan.dialects.runplan import verify_runplan
    from pipeplan.dialects.runplan_build import build_runplan_module
    from pipeplan.frontend.planner import plan_run_spec

    spec = plan_run_spec(facts, CONFIG, local_pool(2), 2)
    for change in (dict(layout="col_major"), dict(shape=(256, 65), max_extent=256 * 65 * 4)):
        edges = tuple(dataclasses.replace(e, object_spec=dataclasses.replace(e.object_spec, **change))
                      if e.kind == "activation" else e for e in spec.edges)
        with pytest.raises(RunPlanRejection) as ei:
            verify_runplan(build_runplan_module(dataclasses.replace(spec, edges=edges), ["local0", "local1"]))
        assert ei.value.code == "invalid_object_spec", ei.value.one_line()


def test_invalid_object_spec_cli(capsys, tmp_path):
    """RP-OS-5: --alignment 48 through the CLI -> invalid_object_spec."""
    _cli_rejects(capsys, tmp_path, "invalid_object_spec", [str(STORIES), "--alignment", "48"])


# --------------------------------------------------------------------------- invalid_runtime_config
@pytest.mark.parametrize("kwargs, fragment", [
    (dict(config=RuntimeConfig(max_seq_len=4096)), "exceeds the model's context length 2048"),
    (dict(config=RuntimeConfig(max_seq_len=0)), "max_seq_len must be an integer >= 1"),
    (dict(config=RuntimeConfig(ring_slots=0)), "ring_slots must be an integer >= 1"),
    (dict(config=RuntimeConfig(kv_dtype="q8")), "kv_dtype 'q8'"),
    (dict(config="fast"), "must be a RuntimeConfig"),
    (dict(run_id="has space"), "is not a valid run id"),
    (dict(run_id=""), "is not a valid run id"),
])
def test_invalid_runtime_config(facts, kwargs, fragment):
    """A runtime config the model cannot honour (max_seq_len beyond its context) or a malformed one
    -> invalid_runtime_config."""
    config = kwargs.get("config", CONFIG)
    extra = {"run_id": kwargs["run_id"]} if "run_id" in kwargs else {}
    err = _rejects("invalid_runtime_config", facts, config, local_pool(2), 2, **extra)
    assert fragment in err.message


def test_invalid_runtime_config_cli(capsys, tmp_path):
    """--max-seq-len beyond stories260K's 2048 context through the CLI -> invalid_runtime_config."""
    _cli_rejects(capsys, tmp_path, "invalid_runtime_config", [str(STORIES), "--max-seq-len", "4096"])


# --------------------------------------------------------------------------- invalid_pool
@pytest.mark.parametrize("pool", [
    NodePool(()),
    NodePool((NodeSpec("a", 1 << 30), NodeSpec("a", 1 << 30))),
    NodePool((NodeSpec("orchestrator", 1 << 30),)),
    NodePool((NodeSpec("a", -1),)),
])
def test_invalid_pool(facts, pool):
    """RP-F-3: a malformed candidate pool (empty, duplicate ids, the reserved orchestrator id,
    negative memory) -> invalid_pool, before any planning."""
    _rejects("invalid_pool", facts, CONFIG, pool, 1)


def test_invalid_pool_cli(capsys, tmp_path):
    """A pool file with a duplicate id through the CLI -> invalid_pool naming the file."""
    path = _pool_file(tmp_path, [("a", 1 << 30), ("a", 1 << 30)])
    line = _cli_rejects(capsys, tmp_path, "invalid_pool", [str(STORIES), "--nodes", path])
    assert path in line
