"""``pipeplan plan --nodes POOL`` without ``--stages`` (tools/cmd_plan.py): the fewest stages that fit."""

from __future__ import annotations

import pytest
from pipeplan.tools.cli import main as cli_main

from tests.conftest import REPO, STORIES

LLAMA70B = REPO / "examples" / "llama3-70b.toml"


def _pool(tmp_path, n: int, memory: int, name: str = "pool.toml") -> str:
    p = tmp_path / name
    p.write_text("".join(f'[[nodes]]\nid = "node{i}"\nmemory_bytes = {memory}\n' for i in range(n)))
    return str(p)


def _plan(capsys, argv):
    rc = cli_main(["plan", *map(str, argv)])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _stage_count(text: str) -> int:
    from pipeplan.api import parse_module, register_pipeplan
    from pipeplan.dialects.runplan_build import single_plan
    from xdsl.context import Context

    return len(single_plan(parse_module(register_pipeplan(Context()), text)).stage_ops())


def test_picks_the_fewest_stages_that_fit(capsys, tmp_path):
    """RP-F-1, RP-AR-4: 80 Q4_K blocks (llama3-70b facts) on eight 12 GiB nodes: without --stages the plan
    has the smallest stage count N that fits -- N - 1 stages are insufficient_memory -- and stderr says N."""
    pool = _pool(tmp_path, 8, 12 << 30)
    rc, out, err = _plan(capsys, ["--model-facts", LLAMA70B, "--nodes", pool])
    assert rc == 0, err
    n = _stage_count(out)
    assert 2 < n <= 8
    assert err == f"note: --stages not given: {n} stages fit the memory of {pool} (the fewest)\n"
    rc, out, err = _plan(capsys, ["--model-facts", LLAMA70B, "--nodes", pool, "--stages", n - 1])
    assert rc == 2 and out == "" and err.startswith("error[insufficient_memory]: ")
    rc, out, err = _plan(capsys, ["--model-facts", LLAMA70B, "--nodes", pool, "--stages", n])
    assert rc == 0 and err == "" and _stage_count(out) == n


def test_one_stage_when_one_node_holds_the_model(capsys, tmp_path):
    """A pool whose first node holds the whole model: 1 stage, said on stderr; -o gets the plan."""
    out_file = tmp_path / "plan.mlir"
    pool = _pool(tmp_path, 3, 1 << 30)
    rc, out, err = _plan(capsys, [STORIES, "--nodes", pool, "-o", out_file])
    assert rc == 0 and out == ""
    assert err == f"note: --stages not given: 1 stage fits the memory of {pool} (the fewest)\n"
    assert _stage_count(out_file.read_text()) == 1


def test_no_stage_count_fits_is_one_rejection(capsys, tmp_path):
    """When even every node of the pool together cannot hold the model: one insufficient_memory line that
    names the range tried, no note, nothing on stdout."""
    pool = _pool(tmp_path, 3, 8 << 30)
    rc, out, err = _plan(capsys, ["--model-facts", LLAMA70B, "--nodes", pool])
    assert rc == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error[insufficient_memory]: no stage count from 1 to 3 fits")


@pytest.mark.parametrize("extra", [["--stages", "2"], ["--placement", "node0,node1"]])
def test_explicit_stages_or_placement_are_kept(capsys, tmp_path, extra):
    """With --stages or --placement the count is the user's: 2 stages of 12 GiB is insufficient_memory,
    as before, and no note is printed."""
    pool = _pool(tmp_path, 8, 12 << 30)
    rc, out, err = _plan(capsys, ["--model-facts", LLAMA70B, "--nodes", pool, *extra])
    assert rc == 2 and out == "" and err.startswith("error[insufficient_memory]: ") and "note:" not in err
