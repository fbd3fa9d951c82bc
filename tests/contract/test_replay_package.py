"""Replay packages of the virtual target on stories260K over 3 stages (seeds/003 "Machine lowering and
artifact emission", "Timing and simulation projection", "Checkpoints and diagnostics"; issue 6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pipeplan.analysis.timeline import TimelineBundle, compare
from pipeplan.compiler.replay_package import (
    PackageError,
    compile_plan,
    compile_plan_to_package,
    print_module,
    sha256_hex,
    verify_package,
)
from pipeplan.dialects.cplan import AllocOp, CommandOp, SyncOp, command_name
from pipeplan.dialects.cplan import QueueOp as CQueueOp
from pipeplan.dialects.vmachine import (
    MachineVerifyError,
    QueueOp,
    SignalOp,
    StageOp,
    StepOp,
    TokenOp,
    WaitOp,
    instruction_cmd,
)
from pipeplan.runtime.replay import ReplayError, load_package, replay_package
from pipeplan.transforms.convert_cplan_to_vmachine import abi_from_facts, lower_plan
from pipeplan.transforms.cplan_project_timing import concrete_digest, find_cplan, strip_timing

BINDER = "reference-queue"
"""The list-schedule binder's plans are currently rejected by cplan-verify (AB-S-5, in-flight issue-5 work)."""

POOL = "".join(f'[[nodes]]\nid = "n{i}"\nmemory_bytes = 1073741824\nbandwidth_bytes_per_s = 1.0e11\nflops_per_s = 1.0e12\n'
               f'link_bandwidth_bytes_per_s = 1.0e9\n' for i in range(3))


@pytest.fixture(scope="session")
def inputs(tmp_path_factory, stories_path):
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.frontend.pool import load_pool_toml
    from pipeplan.plan_types import RuntimeConfig

    d = tmp_path_factory.mktemp("pkg")
    (d / "pool.toml").write_text(POOL)
    plan = plan_run(read_model_facts(stories_path), RuntimeConfig(max_seq_len=64), load_pool_toml(d / "pool.toml"), 3)
    (d / "plan.mlir").write_text(print_module(plan))
    return d


@pytest.fixture(scope="session")
def pkg(inputs) -> Path:
    return compile_plan_to_package(inputs / "plan.mlir", "virtual-queue", None, inputs / "pkg", pool=inputs / "pool.toml",
                                   binder=BINDER,
                                   decode_tokens=8, trace=inputs / "trace.json")


@pytest.fixture(scope="session")
def compiled(inputs):
    return compile_plan(inputs / "plan.mlir", "virtual-queue", None, pool=inputs / "pool.toml", binder=BINDER)


def test_replay_gives_expected_tokens(pkg, stories_path, expected_cases):
    """AB-M-2: compile -> replay of stories260K over 3 stages gives exactly the EXPECTED.md greedy tokens
    (the 11-token prompt runs as two prefill chunks of the plan's 8 rows)."""
    for case in expected_cases:
        r = replay_package(pkg, stories_path, case["prompt"], len(case["greedy_ids"]))
        assert r.prompt_ids == case["prompt_ids"]
        assert r.token_ids == case["greedy_ids"], case["prompt"]
    assert load_package(pkg).program is not None


def test_rebuild_is_byte_identical(pkg, inputs):
    """AB-M-2: the package rebuilt from the same inputs is byte-identical, file by file."""
    again = compile_plan_to_package(inputs / "plan.mlir", "virtual-queue", None, inputs / "pkg2", pool=inputs / "pool.toml", binder=BINDER,
                                    decode_tokens=8)
    names = sorted(p.name for p in pkg.iterdir())
    assert names == sorted(p.name for p in again.iterdir()) == ["lineage.json", "manifest.json", "predicted.timeline.json",
                                                                "program.mlir"]
    for n in names:
        assert (pkg / n).read_bytes() == (again / n).read_bytes(), n


def test_manifest_digests_match_recomputation(pkg, compiled):
    """AB-M-3: manifest identities and digests equal their recomputation; a tampered file is rejected."""
    from pipeplan.dialects.pplan import portable_digest

    module, _ = compiled
    m = verify_package(pkg)
    assert m["digests"]["concrete"] == concrete_digest(find_cplan(module))
    assert m["digests"]["portable"] == "sha256:" + portable_digest(module)
    assert m["digests"]["machine"] == sha256_hex((pkg / "program.mlir").read_bytes())
    for name, d in m["files"].items():
        assert sha256_hex((pkg / name).read_bytes()) == d
    assert m["target"]["plugin_revision"] == "virtual-queue@1" and m["target"]["binding"]["abi"] == "vq-abi-1"
    assert m["deployment"]["identity"] == "deployment:n0,n1,n2" and len(m["deployment"]["stages"]) == 3
    assert m["revisions"]["engine"] == "pipeplan-vmachine/1" and m["evidence"]["fingerprint"]
    assert m["runtime"]["kernels"] == sorted(m["runtime"]["kernels"]) and "attention" in m["runtime"]["kernels"]
    bad = pkg.parent / "tampered"
    bad.mkdir(exist_ok=True)
    for p in pkg.iterdir():
        (bad / p.name).write_bytes(p.read_bytes())
    (bad / "program.mlir").write_text((pkg / "program.mlir").read_text().replace("queue.copy", "queue.copz", 1))
    with pytest.raises(PackageError, match="program.mlir has digest"):
        verify_package(bad)
    (bad / "lineage.json").unlink()  # detachable: absent is fine
    (bad / "program.mlir").write_bytes((pkg / "program.mlir").read_bytes())
    assert verify_package(bad)["format"] == "pipeplan-replay-package/1"


def test_strip_timing_same_tokens_and_event_order(pkg, stories_path):
    """AB-T-3: stripping the timing annotations leaves a program that replays with the same tokens and the
    same instruction order."""
    full = load_package(pkg).program
    stripped = full.clone()
    assert strip_timing(stripped) > 100
    assert "timing" not in print_module(stripped) and "timing" in (pkg / "program.mlir").read_text()
    a = replay_package(pkg, stories_path, "Once upon a time", 6)
    b = replay_package(pkg, stories_path, "Once upon a time", 6, program=stripped)
    assert a.token_ids == b.token_ids and a.order == b.order and len(a.order) > 400


def test_chrome_trace_schema(pkg, inputs):
    """AB-T-4: the predicted Chrome trace is valid trace-event JSON: one process per device plus links, one
    track per queue, every command once per step instance, commands nested in their step span."""
    doc = json.loads((inputs / "trace.json").read_text())
    ev = doc["traceEvents"]
    names = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {"device n0", "device n1", "device n2", "links"}
    threads = {(e["pid"], e["args"]["name"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert sum(1 for _, n in threads if n.startswith("queue ")) == 6 and sum(1 for _, n in threads if n.startswith("link ")) == 2
    cmds = [e for e in ev if e["ph"] == "X" and e["cat"] == "command"]
    for e in cmds:
        assert {"name", "ts", "dur", "pid", "tid", "args"} <= set(e) and e["dur"] >= 0 and e["args"]["lineage"]
    bundle = TimelineBundle.read(pkg / "predicted.timeline.json")
    n_cmd = len({e.command for e in bundle.events})
    per: dict[tuple[str, int], list[str]] = {}
    for e in cmds:
        per.setdefault((e["args"]["step"], e["args"]["iteration"]), []).append(e["args"]["command"])
    assert len(per) == 1 + 8
    for (step, _), cs in per.items():
        assert len(cs) == len(set(cs))
        assert len(cs) == sum(1 for c in {e.command for e in bundle.events} if c.startswith(f"cmd.{step}."))
    assert sum(len(v) for v in per.values()) == n_cmd // 2 * 9 or sum(len(v) for v in per.values()) > n_cmd
    spans = [e for e in ev if e["ph"] == "X" and e["cat"] == "step"]
    for e in cmds:
        parent = [s for s in spans if (s["pid"], s["tid"]) == (e["pid"], e["tid"])
                  and s["name"] == f"{e['args']['step']}#{e['args']['iteration']}"]
        assert len(parent) == 1
        s = parent[0]
        assert s["ts"] <= e["ts"] + 1e-6 and e["ts"] + e["dur"] <= s["ts"] + s["dur"] + 1e-6


def test_emission_adds_no_scheduling_decision(compiled):
    """AB-M-4: per stage and step, each queue's instruction order is the concrete queue order restricted to
    that step, and the signal/wait pairs are exactly the concrete syncs within a step."""
    module, runplan = compiled
    plan = find_cplan(module)
    low = lower_plan(plan, abi_from_facts(runplan.facts(), runplan.config.config().max_seq_len))
    got: dict[tuple[str, str, str], list[str]] = {}
    pairs = set()
    cmd_count = 0
    for st in low.program.body.block.ops:
        if not isinstance(st, StageOp):
            continue
        for step in st.body.block.ops:
            assert isinstance(step, StepOp)
            for q in step.body.block.ops:
                if isinstance(q, TokenOp):
                    continue
                assert isinstance(q, QueueOp)
                for o in q.body.block.ops:
                    if isinstance(o, SignalOp | WaitOp):
                        pairs.add((o.signal.data, o.wait.data))
                        continue
                    cmd_count += 1
                    got.setdefault((st.device.data, q.engine.data, step.step_name), []).append(instruction_cmd(o))
    assert cmd_count == len(plan.ops_of(CommandOp))
    for q in plan.ops_of(CQueueOp):
        for step in ("prefill", "decode"):
            want = [c.data for c in q.order if c.data.startswith(f"cmd.{step}.")]
            assert got.get((q.device.data, q.engine.data, step), []) == want
    syncs = [(command_name(s.signal), command_name(s.wait)) for s in plan.ops_of(SyncOp)]
    same = {(g, w) for g, w in syncs if g.split(".")[1] == w.split(".")[1]}
    assert pairs == same and low.cross_step_syncs == len(syncs) - len(same)


def test_machine_verification_carries_lineage(compiled):
    """AB-D-1: a failing machine verification names the whole path model op -> portable task -> candidate ->
    concrete command -> machine instruction."""
    module, runplan = compiled
    broken = find_cplan(module).clone()
    c = next(c for c in broken.ops_of(CommandOp) if c.id.data == "cmd.decode.s1.b2.matmul.attn_q")
    ffn_in = next(a for a in broken.ops_of(AllocOp) if a.id.data == "alloc.decode.s1.blk.2.ffn_in")
    c.set_operands(inputs=[ffn_in.result, *c.groups()[0][1:]])
    with pytest.raises(MachineVerifyError) as ei:
        lower_plan(broken, abi_from_facts(runplan.facts(), runplan.config.config().max_seq_len))
    msg = ei.value.one_line()
    assert ei.value.code == "machine_verify"
    for part in ("model op blk.2.attn_q", "stage 1 block 2 (decode)", "task @decode.s1.b2.matmul.attn_q",
                 "candidate vq.matmul", "command cmd.decode.s1.b2.matmul.attn_q", "-> instruction i"):
        assert part in msg, (part, msg)


def test_compare_correspondence(pkg, stories_path):
    """AB-D-2: every simulated event maps to one machine instruction and one runtime event (level 'order');
    a measured timeline missing an event drops to 'none'."""
    pred = TimelineBundle.read(pkg / "predicted.timeline.json")
    r = replay_package(pkg, stories_path, "The little dog", 9)
    c = compare(pred, r.timeline)
    assert c.level == "order", c.reason
    assert c.matched == len(pred.events) == len(r.timeline.events)
    assert len(c.token_errors) == 8 and all(x >= 0 for x in c.token_errors)
    assert all(e.instruction for e in pred.events)
    r.timeline.events.pop(3)
    assert compare(pred, r.timeline).level == "none"


def test_replay_rejects_other_model(pkg):
    """AB-M-3 (runtime requirements: the model ABI): a package replayed on a model with another ABI fails with a
    typed model_mismatch error."""
    from tests.conftest import TINY_RANDOM

    with pytest.raises(ReplayError) as ei:
        replay_package(pkg, TINY_RANDOM, "hi", 2)
    assert ei.value.code == "model_mismatch"


def test_replay_rejects_bad_requests(pkg, stories_path):
    """invalid_request: max_tokens < 1 and positions beyond max_seq_len (64)."""
    with pytest.raises(ReplayError, match="max_tokens"):
        replay_package(pkg, stories_path, "hi", 0)
    with pytest.raises(ReplayError, match="exceed the package's max_seq_len 64"):
        replay_package(pkg, stories_path, "hi", 80)


def _id_only_plan(inputs) -> Path:
    """The fixture's plan with its node specs replaced by bare ids (a plan stating no capacities or peaks)."""
    import re

    text = (inputs / "plan.mlir").read_text()
    ids, n = re.subn(r"nodes \[#runplan\.node<[^\]]*>\]", 'nodes ["n0", "n1", "n2"]', text, count=1)
    assert n == 1
    out = inputs / "plan-ids.mlir"
    out.write_text(ids)
    return out


def test_compile_needs_deployment(inputs):
    """AB-G-4: compiling a plan that names its nodes by id only, without the node pool, is a missing-binding
    diagnostic, not a default; nothing is written."""
    with pytest.raises(PackageError) as ei:
        compile_plan_to_package(_id_only_plan(inputs), "virtual-queue", None, inputs / "nopkg")
    assert ei.value.code == "missing_binding" and "by id only" in ei.value.message
    assert not (inputs / "nopkg").exists()


def test_compile_binds_the_plans_own_node_specs(pkg, inputs):
    """AB-G-1, AB-M-2: without --nodes the DeploymentBinding comes from the node specs the plan carries
    (issue 6's `pipeplan compile PLAN.mlir -o PKG`): the package is byte-identical to the one compiled with
    the pool file the plan was made with."""
    again = compile_plan_to_package(inputs / "plan.mlir", "virtual-queue", None, inputs / "pkg-own", binder=BINDER,
                                    decode_tokens=8)
    for n in ("manifest.json", "program.mlir", "predicted.timeline.json", "lineage.json"):
        assert (pkg / n).read_bytes() == (again / n).read_bytes(), n


def test_compile_output_paths_checked_first(inputs, capsys):
    """No partial result and no lost data: `pipeplan compile -o` into a non-empty directory that is not a
    package, into a file, or with `--timeline` in a missing directory is error[bad_output_path] (exit 2)
    before compiling; the user's files are untouched and no package appears."""
    from pipeplan.tools.cli import main

    mine = inputs / "mine"
    mine.mkdir(exist_ok=True)
    (mine / "notes.txt").write_text("keep")
    afile = inputs / "afile"
    afile.write_text("keep")
    plan = str(inputs / "plan.mlir")
    cases = [["-o", str(mine)], ["-o", str(afile)], ["-o", str(afile / "pkg")],
             ["-o", str(inputs / "fresh"), "--timeline", str(inputs / "no-such-dir" / "t.json")]]
    for argv in cases:
        assert main(["compile", plan, *argv]) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error[bad_output_path]: ") and err.count("\n") == 1, err
    assert sorted(x.name for x in mine.iterdir()) == ["notes.txt"] and afile.read_text() == "keep"
    assert not (inputs / "fresh").exists() and not (inputs / "no-such-dir").exists()


@pytest.mark.parametrize("argv, code", [
    (["--binder", "nope"], "unsupported_binder"),
    (["--evidence", "measured:/nonexistent/table.json"], "bad_evidence"),
    (["--decode-tokens", "0"], "invalid_request"),
    (["--prompt-len", "0"], "compile_failed"),
])
def test_cli_compile_bad_options(inputs, capsys, argv, code):
    """A compile diagnostic is ONE `error[<code>]: ` line with the pass's own code (not repeated inside the
    message), exit 2, and no package."""
    from pipeplan.tools.cli import main

    out = inputs / f"bad-{code}"
    assert main(["compile", str(inputs / "plan.mlir"), "-o", str(out), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error[{code}]: ") and err.count("error[") == 1 and err.count("\n") == 1, err
    assert not out.exists()


def test_cli_missing_or_unparsable_plan(inputs, capsys, tmp_path):
    """A plan path that does not exist is error[file_not_found]; a file that is not IR is error[bad_plan]."""
    from pipeplan.tools.cli import main

    junk = tmp_path / "junk.mlir"
    junk.write_text('{"x": 1}\n')
    for path, code in ((tmp_path / "none.mlir", "file_not_found"), (junk, "bad_plan")):
        assert main(["compile", str(path), "-o", str(tmp_path / "p")]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error[{code}]: ") and err.count("\n") == 1, err


def test_cli_compile_replay_compare(inputs, stories_path, capsys, expected_cases):
    """AB-M-2, AB-D-2, AB-G-4: the CLI: pipeplan compile / replay / compare (exit 0; replay gives EXPECTED's
    tokens; compare reaches 'order'); an id-only plan without --nodes is error[missing_binding]."""
    from pipeplan.tools.cli import main

    d = inputs
    assert main(["compile", str(d / "plan.mlir"), "--nodes", str(d / "pool.toml"), "-o", str(d / "cli"),
                 "--decode-tokens", "4", "--binder", BINDER]) == 0
    case = expected_cases[1]
    assert main(["replay", str(d / "cli"), "--model", str(stories_path), "--prompt", case["prompt"], "--max-tokens", "5",
                 "--json", "--backend", "direct", "--timeline", str(d / "m.json")]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["token_ids"] == case["greedy_ids"][:5]
    assert main(["compare", str(d / "cli"), str(d / "m.json"), "--json", "--trace", str(d / "sbs.json")]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["level"] == "order" and len(res["token_errors"]) == 4
    procs = {e["args"]["name"] for e in json.loads((d / "sbs.json").read_text())["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert "predicted device n0" in procs and "measured device n0" in procs
    assert main(["compile", str(_id_only_plan(d)), "-o", str(d / "x")]) == 2
    assert capsys.readouterr().err.startswith("error[missing_binding]: ") and not (d / "x").exists()


@pytest.mark.parametrize("backend", ["inproc", pytest.param("local", marks=pytest.mark.slow)])
def test_cli_replay_through_backend(pkg, stories_path, capsys, expected_cases, backend):
    """AB-M-2: `pipeplan replay PKG --backend inproc|local` runs the package's stage programs through the stage
    runtime (the package's deployment re-planned into provisions): the 11-token prompt (two chunks of the
    8-row prefill step) gives EXPECTED's greedy tokens."""
    from pipeplan.tools.cli import main

    case = expected_cases[2]
    n = 40 if backend == "inproc" else 12
    assert main(["replay", str(pkg), "--model", str(stories_path), "--prompt", case["prompt"], "--max-tokens", str(n),
                 "--backend", backend, "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["backend"] == backend and out["prompt_ids"] == case["prompt_ids"]
    assert out["token_ids"] == case["greedy_ids"][:n]


@pytest.mark.parametrize("argv, code", [
    (["--backend", "inproc", "--max-seq-len", "999"], "bad_option"),
    (["--backend", "direct", "--target", "cuda"], "unsupported_program"),
    (["--backend", "local", "--ray-address", "127.0.0.1:1"], "bad_backend"),
    (["--backend", "direct", "--trace", "/nonexistent-dir-h16/t.json"], "bad_output_path"),
    (["--backend", "direct", "--timeline", "/nonexistent-dir-h16/m.json"], "bad_output_path"),
    (["--max-tokens", "0"], "invalid_request"),
    (["--threads", "0"], "invalid_request"),
    (["--backend", "ray", "--ray-address", "127.0.0.1:1"], "ray_unavailable"),
])
def test_cli_replay_bad_options(pkg, stories_path, capsys, argv, code):
    """Options that do not go together (another max_seq_len than the package's, the cuda target for a
    virtual-queue package), an output file in a missing directory, counts < 1 and an unreachable
    Ray address (probed, not left to ray.init's minutes of retries) are one-line typed errors with exit
    status 2, before anything runs (no stage, no file)."""
    import multiprocessing as mp
    import time

    from pipeplan.tools.cli import main

    t0 = time.monotonic()
    rc = main(["replay", str(pkg), "--model", str(stories_path), "--prompt", "hi", *argv])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith(f"error[{code}]: ") and err.count("\n") == 1, err
    assert time.monotonic() - t0 < 10 and mp.active_children() == []
    assert not Path("/nonexistent-dir-h16").exists()


def test_cli_compare_trace_in_missing_dir(pkg, inputs, capsys):
    """`pipeplan compare --trace` into a missing directory is error[bad_output_path] (exit 2) before comparing;
    unreadable bundles are error[bad_timeline]."""
    from pipeplan.tools.cli import main

    pred = str(pkg / "predicted.timeline.json")
    assert main(["compare", str(pkg), pred, "--trace", str(inputs / "nodir" / "sbs.json")]) == 2
    assert capsys.readouterr().err.startswith("error[bad_output_path]: ") and not (inputs / "nodir").exists()
    assert main(["compare", str(pkg), str(pkg / "manifest.json")]) == 2
    assert capsys.readouterr().err.startswith("error[bad_timeline]: ")


def test_package_provisions_reject_other_model(pkg):
    """AB-M-3: model_mismatch: running a package on a backend with a GGUF that is not its model is rejected before
    any stage starts."""
    from pipeplan.runtime.replay import package_provisions

    from tests.conftest import TINY_RANDOM

    with pytest.raises(ReplayError) as ei:
        package_provisions(load_package(pkg), TINY_RANDOM)
    assert ei.value.code == "model_mismatch"
