"""Node pools: ``[[nodes]]`` TOML loading, validation and the local pool (frontend/pool.py)."""

from __future__ import annotations

import os

import pytest
from pipeplan.errors import RunPlanRejection
from pipeplan.frontend.pool import load_pool_toml, local_pool, physical_memory_bytes, pool_toml, validate_pool
from pipeplan.plan_types import NodePool, NodeSpec

GOOD = """
[[nodes]]
id = "gpu0"
memory_bytes = 17179869184
bandwidth_bytes_per_s = 9.0e11
flops_per_s = 6.5e13
link_bandwidth_bytes_per_s = 1250000000

[[nodes]]
id = "host-1.example:7000"
memory_bytes = 8000000000
"""


def _write(tmp_path, text: str, name: str = "pool.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_load_good_pool(tmp_path):
    """A well-formed pool loads in file order with every optional field."""
    pool = load_pool_toml(_write(tmp_path, GOOD))
    assert pool == NodePool((
        NodeSpec("gpu0", 17179869184, 9.0e11, 6.5e13, 1250000000),
        NodeSpec("host-1.example:7000", 8000000000),
    ))


BAD_CASES = {
    "missing_id": ('[[nodes]]\nmemory_bytes = 10\n', "nodes[0]", "missing key 'id'"),
    "missing_memory": ('[[nodes]]\nid = "a"\n', "nodes[0]", "missing key 'memory_bytes'"),
    "duplicate_id": ('[[nodes]]\nid = "a"\nmemory_bytes = 10\n[[nodes]]\nid = "a"\nmemory_bytes = 20\n',
                     "nodes[1]", "duplicate node id 'a' (first in nodes[0])"),
    "zero_memory": ('[[nodes]]\nid = "a"\nmemory_bytes = 0\n', "nodes[0]", "'memory_bytes' must be > 0"),
    "negative_memory": ('[[nodes]]\nid = "a"\nmemory_bytes = -5\n', "nodes[0]", "'memory_bytes' must be > 0"),
    "float_memory": ('[[nodes]]\nid = "a"\nmemory_bytes = 1.5e9\n', "nodes[0]", "'memory_bytes' must be an integer"),
    "string_memory": ('[[nodes]]\nid = "a"\nmemory_bytes = "16GB"\n', "nodes[0]", "'memory_bytes' must be an integer"),
    "bool_memory": ('[[nodes]]\nid = "a"\nmemory_bytes = true\n', "nodes[0]", "'memory_bytes' must be an integer"),
    "int_id": ('[[nodes]]\nid = 3\nmemory_bytes = 10\n', "nodes[0]", "'id' must be a non-empty string"),
    "empty_id": ('[[nodes]]\nid = ""\nmemory_bytes = 10\n', "nodes[0]", "'id' must be a non-empty string"),
    "id_with_comma": ('[[nodes]]\nid = "a,b"\nmemory_bytes = 10\n', "nodes[0]", "is not a valid node id"),
    "reserved_id": ('[[nodes]]\nid = "orchestrator"\nmemory_bytes = 10\n', "nodes[0]", "reserved"),
    "string_bandwidth": ('[[nodes]]\nid = "a"\nmemory_bytes = 10\nbandwidth_bytes_per_s = "fast"\n',
                         "nodes[0]", "'bandwidth_bytes_per_s' must be a number"),
    "negative_flops": ('[[nodes]]\nid = "a"\nmemory_bytes = 10\nflops_per_s = -1.0\n',
                       "nodes[0]", "'flops_per_s' must be a finite number > 0"),
    "inf_link": ('[[nodes]]\nid = "a"\nmemory_bytes = 10\nlink_bandwidth_bytes_per_s = inf\n',
                 "nodes[0]", "'link_bandwidth_bytes_per_s' must be a finite number > 0"),
    "unknown_key": ('[[nodes]]\nid = "a"\nmemory_bytes = 10\nmemroy = 3\n', "nodes[0]", "unknown key 'memroy'"),
    "unknown_top_level": ('name = "x"\n[[nodes]]\nid = "a"\nmemory_bytes = 10\n', "pool.toml",
                          "unknown top-level key 'name'"),
    "no_nodes": ('# nothing\n', "pool.toml", "missing [[nodes]] tables"),
    "empty_nodes": ('nodes = []\n', "pool.toml", "the pool has no nodes"),
    "nodes_not_tables": ('nodes = [1, 2]\n', "pool.toml", "array of tables"),
    "toml_syntax": ('[[nodes]\nid = "a"\n', "pool.toml", "TOML syntax error"),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_pool_rejected(tmp_path, case):
    """Every pool defect is invalid_pool naming the file, the table and the key."""
    text, where, fragment = BAD_CASES[case]
    path = _write(tmp_path, text)
    with pytest.raises(RunPlanRejection) as ei:
        load_pool_toml(path)
    err = ei.value
    assert err.code == "invalid_pool"
    assert str(path) in err.message
    assert where in err.message
    assert fragment in err.message
    assert "\n" not in err.one_line()


def test_unreadable_pool(tmp_path):
    """A missing file is invalid_pool naming the path."""
    path = tmp_path / "nope.toml"
    with pytest.raises(RunPlanRejection) as ei:
        load_pool_toml(path)
    assert ei.value.code == "invalid_pool" and str(path) in ei.value.message


def test_non_utf8_pool(tmp_path):
    """A binary file is invalid_pool, not a UnicodeDecodeError."""
    path = tmp_path / "bin.toml"
    path.write_bytes(b"\xff\xfe\x00id")
    with pytest.raises(RunPlanRejection) as ei:
        load_pool_toml(path)
    assert ei.value.code == "invalid_pool"


@pytest.mark.parametrize("pool, fragment", [
    (NodePool(()), "no nodes"),
    (NodePool((NodeSpec("a", 10), NodeSpec("a", 10))), "duplicate node id 'a'"),
    (NodePool((NodeSpec("a", 0),)), "'memory_bytes' must be > 0"),
    (NodePool([NodeSpec("a", 10)]), "tuple of NodeSpec"),  # type: ignore[arg-type]
    (NodePool(("a",)), "expected a NodeSpec"),  # type: ignore[arg-type]
    ([NodeSpec("a", 10)], "expected a NodePool"),
])
def test_validate_python_pools(pool, fragment):
    """Pools built in Python get the same checks as TOML pools."""
    with pytest.raises(RunPlanRejection) as ei:
        validate_pool(pool)  # type: ignore[arg-type]
    assert ei.value.code == "invalid_pool" and fragment in ei.value.message


def test_local_pool_semantics():
    """local_pool(n): ids local0..local{n-1}, each with the host's whole physical memory, no bandwidths."""
    mem = physical_memory_bytes()
    assert mem == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") and mem > 0
    pool = local_pool(3)
    assert [n.id for n in pool.nodes] == ["local0", "local1", "local2"]
    assert all(n.memory_bytes == mem and n.bandwidth_bytes_per_s is None for n in pool.nodes)
    assert local_pool(2, memory_bytes=1234).nodes[1] == NodeSpec("local1", 1234)


@pytest.mark.parametrize("n, kwargs", [(0, {}), (-1, {}), (True, {}), (2, {"memory_bytes": 0})])
def test_local_pool_rejects(n, kwargs):
    """A local pool needs >= 1 node and positive memory."""
    with pytest.raises(RunPlanRejection) as ei:
        local_pool(n, **kwargs)
    assert ei.value.code == "invalid_pool"


# --------------------------------------------------------------------------- local peaks
def test_local_peaks_env_override(monkeypatch, tmp_path):
    """PIPEPLAN_LOCAL_PEAKS="BW,FLOPS[,LINK]" states the local peaks (link = BW unless given); nothing is
    probed or cached."""
    from pipeplan.frontend.pool import LocalPeaks, local_peaks

    monkeypatch.setenv("PIPEPLAN_LOCAL_PEAKS", "3e10, 2.5e11")
    assert local_peaks(tmp_path) == LocalPeaks(3e10, 2.5e11, 3e10, "env")
    monkeypatch.setenv("PIPEPLAN_LOCAL_PEAKS", "3e10,2.5e11,1e9")
    assert local_peaks(tmp_path).link_bandwidth_bytes_per_s == 1e9
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", ["fast", "1e10", "1e10,0", "1e10,nan", "1,2,3,4", "-1,5"])
def test_local_peaks_env_malformed(monkeypatch, tmp_path, value):
    """A malformed PIPEPLAN_LOCAL_PEAKS is a typed error naming the variable, never a guessed figure."""
    from pipeplan.frontend.pool import local_peaks

    monkeypatch.setenv("PIPEPLAN_LOCAL_PEAKS", value)
    with pytest.raises(RunPlanRejection) as ei:
        local_peaks(tmp_path)
    assert ei.value.code == "invalid_pool" and "PIPEPLAN_LOCAL_PEAKS" in ei.value.message


def test_local_peaks_probe_is_cached(monkeypatch, tmp_path):
    """Without the override, the numpy probe runs once and its result is cached in local_peaks.json
    ($PIPEPLAN_CACHE by default); the next call reads the cache; a corrupt cache is measured again."""
    import json

    from pipeplan.frontend import pool as pool_mod

    monkeypatch.delenv("PIPEPLAN_LOCAL_PEAKS", raising=False)
    monkeypatch.setenv("PIPEPLAN_CACHE", str(tmp_path / "c"))
    first = pool_mod.local_peaks()
    assert first.source == "probe" and first.bandwidth_bytes_per_s > 1e8 and first.flops_per_s > 1e8
    assert first.link_bandwidth_bytes_per_s == first.bandwidth_bytes_per_s
    assert float(f"{first.flops_per_s:.3g}") == first.flops_per_s
    doc = json.loads((tmp_path / "c" / "local_peaks.json").read_text())
    assert doc["format"] == "pipeplan-local-peaks/1" and doc["flops_per_s"] == first.flops_per_s
    calls = []
    monkeypatch.setattr(pool_mod, "probe_local_peaks", lambda: calls.append(1) or (1e9, 2e9))
    again = pool_mod.local_peaks()
    assert again.source == "cache" and again.bandwidth_bytes_per_s == first.bandwidth_bytes_per_s and not calls
    (tmp_path / "c" / "local_peaks.json").write_text("{broken")
    assert pool_mod.local_peaks() == pool_mod.LocalPeaks(1e9, 2e9, 1e9, "probe") and calls == [1]


def test_local_peaks_unwritable_cache_still_measures(monkeypatch, tmp_path):
    """An unwritable cache directory is not an error: the measurement is returned (and not cached)."""
    from pipeplan.frontend import pool as pool_mod

    monkeypatch.delenv("PIPEPLAN_LOCAL_PEAKS", raising=False)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setattr(pool_mod, "probe_local_peaks", lambda: (4e10, 3e11))
    assert pool_mod.local_peaks(blocker / "sub") == pool_mod.LocalPeaks(4e10, 3e11, 4e10, "probe")


def test_local_pool_with_peaks_states_them_on_every_node():
    """local_pool(n, peaks=...): every node states the peaks; ids and memory as without them."""
    from pipeplan.frontend.pool import LocalPeaks

    pool = local_pool(2, memory_bytes=1234, peaks=LocalPeaks(2e10, 1e11, 3e9, "env"))
    assert pool.nodes == (NodeSpec("local0", 1234, 2e10, 1e11, 3e9), NodeSpec("local1", 1234, 2e10, 1e11, 3e9))


def test_pool_toml_round_trips(tmp_path):
    """pool_toml writes text that load_pool_toml reads back to an equal pool (order, set and unset rates)."""
    pool = NodePool((
        NodeSpec("gpu0", 17179869184, 9.0e11, 6.5e13, 1250000000),
        NodeSpec("host-1.example:7000", 8000000000),
        NodeSpec("rack/0@b", 10, flops_per_s=1.5),
    ))
    text = pool_toml(pool)
    assert text.count("[[nodes]]") == 3 and "bandwidth_bytes_per_s" not in text.split("[[nodes]]")[2]
    assert load_pool_toml(_write(tmp_path, text)) == pool


def test_pool_toml_rejects_invalid_pool():
    """pool_toml refuses a pool validate_pool rejects (invalid_pool), writing nothing."""
    with pytest.raises(RunPlanRejection) as ei:
        pool_toml(NodePool((NodeSpec("a", 0),)))
    assert ei.value.code == "invalid_pool" and "'memory_bytes' must be > 0" in ei.value.message
