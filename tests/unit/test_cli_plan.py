"""``pipeplan plan`` (tools/cmd_plan.py): output, options, -o, defaults, and one run of the installed script."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pipeplan.tools.cli import main as cli_main

from tests.conftest import REPO, STORIES
from tests.unit.runplan_fixtures import read_spec


def _spec(text: str):
    from pipeplan.api import parse_module, register_pipeplan
    from xdsl.context import Context

    return read_spec(parse_module(register_pipeplan(Context()), text))


def _run(capsys, argv):
    rc = cli_main(["plan", *argv])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _pool(tmp_path, n: int, memory: int, name: str = "pool.toml") -> str:
    p = tmp_path / name
    p.write_text("".join(f'[[nodes]]\nid = "node{i}"\nmemory_bytes = {memory}\n'
                         f'bandwidth_bytes_per_s = {1e11 * (1 + i % 2)}\n' for i in range(n)))
    return str(p)


def test_plan_stdout_defaults(capsys):
    """RP-F-1: `pipeplan plan MODEL` prints one verified RunPlan: 1 stage on local0, max_seq_len
    = min(context 2048, 2048), stderr empty."""
    rc, out, err = _run(capsys, [str(STORIES)])
    assert rc == 0 and err == ""
    spec = _spec(out)
    assert [(s.index, s.node_id, s.layer_start, s.layer_end) for s in spec.stages] == [(0, "local0", 0, 5)]
    assert spec.config.max_seq_len == 2048
    assert [e.edge_id for e in spec.edges] == ["e0", "e1"]


def test_plan_stages_placement_options(capsys, tmp_path):
    """RP-LA-1..5: --nodes/--stages/--placement/--max-seq-len/--run-id reach the plan."""
    pool = _pool(tmp_path, 4, 1 << 30)
    rc, out, err = _run(capsys, [str(STORIES), "--nodes", pool, "--placement", "node3,node0,node2",
                                 "--max-seq-len", "128", "--run-id", "my-run", "--activation-dtype", "f16",
                                 "--ring-slots", "3", "--alignment", "128"])
    assert rc == 0 and err == ""
    spec = _spec(out)
    assert spec.run_id == "my-run"
    assert [s.node_id for s in spec.stages] == ["node3", "node0", "node2"]
    assert spec.stages[0].layer_start == 0 and spec.stages[-1].layer_end == 5
    act = [e for e in spec.edges if e.kind == "activation"]
    assert act[0].object_spec.max_extent == 128 * 64 * 2 and act[0].ring_spec.slots == 3
    assert act[0].object_spec.alignment == 128


def test_plan_output_file(capsys, tmp_path):
    """-o writes the same IR that stdout would show, and prints nothing."""
    out_file = tmp_path / "plan.mlir"
    rc, out, err = _run(capsys, [str(STORIES), "--stages", "3", "-o", str(out_file)])
    assert rc == 0 and out == "" and err == ""
    rc, out2, _ = _run(capsys, [str(STORIES), "--stages", "3"])
    assert out_file.read_text() == out2
    assert len(_spec(out2).stages) == 3


def test_plan_output_unwritable(capsys, tmp_path):
    """An -o path in a missing directory is a typed one-line error (code bad_output_path), nothing on stdout."""
    rc, out, err = _run(capsys, [str(STORIES), "-o", str(tmp_path / "no" / "dir" / "plan.mlir")])
    assert rc == 2 and out == "" and err.startswith("error[bad_output_path]: ") and len(err.splitlines()) == 1


def test_plan_needs_exactly_one_model(capsys, tmp_path):
    """Neither or both of MODEL and --model-facts: error[usage], exit 2."""
    for argv in ([], [str(STORIES), "--model-facts", str(REPO / "examples" / "llama3-8b.toml")]):
        rc, out, err = _run(capsys, argv)
        assert rc == 2 and out == "" and err.startswith("error[usage]: ")


def test_plan_llama3_70b_facts_on_8_nodes(capsys, tmp_path):
    """RP-LA-3, RP-LA-4: the llama3-70b facts TOML (80 blocks) plans over an 8-node pool: 8 non-empty
    contiguous ranges covering [0, 80), and max_seq_len defaults to 2048 (< context 8192)."""
    pool = _pool(tmp_path, 8, 24 << 30)
    rc, out, err = _run(capsys, ["--model-facts", str(REPO / "examples" / "llama3-70b.toml"), "--nodes", pool,
                                 "--stages", "8"])
    assert rc == 0 and err == ""
    spec = _spec(out)
    assert spec.facts.block_count == 80 and spec.config.max_seq_len == 2048
    assert [s.node_id for s in spec.stages] == [f"node{i}" for i in range(8)]
    assert spec.stages[0].layer_start == 0 and spec.stages[-1].layer_end == 80
    assert all(a.layer_end == b.layer_start for a, b in zip(spec.stages, spec.stages[1:]))
    assert all(s.layer_end > s.layer_start for s in spec.stages)
    # 12 GiB nodes cannot hold 80 Q4_K blocks over 2 stages
    rc, out, err = _run(capsys, ["--model-facts", str(REPO / "examples" / "llama3-70b.toml"),
                                 "--nodes", _pool(tmp_path, 2, 12 << 30, "small.toml"), "--stages", "2"])
    assert rc == 2 and out == "" and err.startswith("error[insufficient_memory]: ")


def test_installed_pipeplan_script(tmp_path):
    """The installed `pipeplan` console script plans (exit 0, IR on stdout) and rejects (exit 2,
    one stderr line, empty stdout)."""
    exe = shutil.which("pipeplan", path=str(Path(sys.executable).parent))
    assert exe is not None
    ok = subprocess.run([exe, "plan", str(STORIES), "--stages", "5"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert len(_spec(ok.stdout).stages) == 5
    bad = subprocess.run([exe, "plan", str(STORIES), "--stages", "6"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.splitlines() == [bad.stderr.strip()] and bad.stderr.startswith("error[invalid_stage_count]: ")


@pytest.mark.parametrize("argv", [["--stages", "two"]])
def test_argparse_errors_exit_2(capsys, argv):
    """Malformed option values are argparse usage errors (exit 2), never a traceback."""
    with pytest.raises(SystemExit) as ei:
        cli_main(["plan", str(STORIES), *argv])
    assert ei.value.code == 2
    assert capsys.readouterr().out == ""


def test_relative_model_path_gives_absolute_weight_uris(capsys, tmp_path, monkeypatch):
    """RP-PP-4: a model named by a path relative to the cwd is recorded with an absolute path
    (model files and weight source), so the plan still locates its weights from another directory."""
    import os

    monkeypatch.chdir(STORIES.parent)
    rc, out, err = _run(capsys, [STORIES.name, "--stages", "2"])
    assert rc == 0, err
    spec = _spec(out)
    assert spec.weights.uris == (str(STORIES),) and spec.facts.files == (str(STORIES),)
    monkeypatch.chdir(tmp_path)  # elsewhere: the recorded path still names the model
    assert all(os.path.isabs(u) and os.path.isfile(u) for u in spec.weights.uris)


def test_url_weight_uri_kept_as_given(tmp_path):
    """RP-PP-4: a URL in the model facts' files is kept verbatim (only local paths are made absolute)."""
    from dataclasses import replace

    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run_spec
    from pipeplan.frontend.pool import local_pool
    from pipeplan.plan_types import RuntimeConfig

    url = "https://example.com/models/stories260K.gguf"
    facts = replace(read_model_facts(STORIES), files=(url,))
    spec = plan_run_spec(facts, RuntimeConfig(max_seq_len=64), local_pool(1, memory_bytes=1 << 30), 1)
    assert spec.weights.uris == (url,) and spec.weights.sizes == ()


def test_url_model_is_a_typed_error(capsys):
    """RP-F-2: a URL given as MODEL.gguf gives exit 2, one ``error[remote_model]`` line naming the URL
    verbatim (not a mangled local path) and nothing on stdout."""
    url = "https://example.com/models/x.gguf"
    rc, out, err = _run(capsys, [url, "--stages", "2"])
    assert rc == 2 and out == ""
    assert err.startswith("error[remote_model]: ") and url in err and err.count("\n") == 1


def test_plan_without_nodes_states_local_peaks(capsys, monkeypatch):
    """RP-F-1, AB-G-4: without --nodes the local pool states this machine's peaks (here the
    PIPEPLAN_LOCAL_PEAKS override) in the plan's node specs, so the issue-4 pipeline
    convert-runplan-to-pplan -> legalize -> select -> roofline costs runs on `pipeplan plan` output as is."""
    from pipeplan.api import parse_module, register_pipeplan, run_pipeline
    from pipeplan.dialects.bindings import DeploymentBinding, DeploymentBindingOp
    from pipeplan.dialects.runplan_build import plan_node_pool
    from pipeplan.frontend.pool import physical_memory_bytes
    from pipeplan.plan_types import NodeSpec
    from xdsl.context import Context

    monkeypatch.setenv("PIPEPLAN_LOCAL_PEAKS", "2.5e10,1.5e11")
    rc, out, err = _run(capsys, [str(STORIES), "--stages", "2", "--max-seq-len", "64"])
    assert rc == 0 and err == ""
    ctx = register_pipeplan(Context())
    mod = parse_module(ctx, out)
    mem = physical_memory_bytes()
    assert plan_node_pool(mod).nodes == tuple(NodeSpec(f"local{i}", mem, 2.5e10, 1.5e11, 2.5e10) for i in range(2))
    run_pipeline(ctx, mod, "convert-runplan-to-pplan,pplan-legalize{target=virtual-queue},pplan-select-implementations,"
                           "pplan-resolve-costs{evidence=roofline}")
    (op,) = [o for o in mod.ops if isinstance(o, DeploymentBindingOp)]
    binding = DeploymentBinding.from_op(op)
    assert binding.stage_devices == ("local0", "local1")
    assert all(d.flops_per_s == 1.5e11 and d.bandwidth_bytes_per_s == 2.5e10 for d in binding.devices)
    assert any(o.name == "pplan.costed_view" for o in mod.ops)
