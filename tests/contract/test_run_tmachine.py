"""Issue 13 item 5: ``pipeplan run --target cuda`` executes the lowered ``tmachine`` program.

The product entry (``pipeplan run`` in-process, :func:`pipeplan.tools.cli.main`) compiles stories260K for
``cuda-triton`` down to its ``tmachine.program`` (prefill compiled for the 5 rows of the prompts, launch configurations for
Triton's CPU interpreter) and every stage runs its node's streams with the tmachine interpreter.
``$PIPEPLAN_TMACHINE_TRACE`` makes each stage write every executed instruction; the tests compare that
trace with the cached program file the run reports (``--json`` ``package.path``). The interpreter is slow
(~0.3-0.9 s per step), so the runs generate 2-3 tokens and are shared by the tests (module fixtures).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
from pathlib import Path

import pytest
from pipeplan.dialects.triton_machine import LaunchOp, ProgramOp
from pipeplan.runtime.tmachine_interp import instructions, step_of
from pipeplan.runtime.tmachine_run import TRACE_ENV, TMachineStageProgram
from pipeplan.tools.cli import main

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PREFILL_ROWS = 5
MAX_SEQ = 64


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A private package cache for this module (the compiled tmachine program is reused across its runs)."""
    old = os.environ.get("PIPEPLAN_CACHE")
    path = tmp_path_factory.mktemp("tm-cache")
    os.environ["PIPEPLAN_CACHE"] = str(path)
    yield path
    if old is None:
        os.environ.pop("PIPEPLAN_CACHE", None)
    else:
        os.environ["PIPEPLAN_CACHE"] = old


def _cli(argv: list[str], trace: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    os.environ[TRACE_ENV] = str(trace)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
    finally:
        os.environ.pop(TRACE_ENV, None)
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def runs(cache, tmp_path_factory, stories_path, expected_cases):
    """``run(stages, backend, n_tokens, prompts=1, parallel=1, extra=(), target="cuda")`` -> ``(doc, trace events
    by stage)`` of ``pipeplan run --target cuda --json --timeline --trace`` on the first llama.cpp case(s), each
    configuration run once (another ``target``: no trace; ``doc["_trace"]``: the trace directory, which holds
    ``measured.json`` and ``chrome.json``)."""
    memo: dict[tuple, tuple[dict, dict[int, list[dict]]]] = {}

    def run(stages: int, backend: str, n_tokens: int, prompts: int = 1, parallel: int = 1,
            extra: tuple[str, ...] = (), target: str = "cuda"):
        key = (stages, backend, n_tokens, prompts, parallel, extra, target)
        if key not in memo:
            trace = tmp_path_factory.mktemp("trace")
            argv = ["run", str(stories_path), "--stages", str(stages), "--backend", backend, "--target", target,
                    "--max-tokens", str(n_tokens), "--prefill-rows", str(PREFILL_ROWS), "--max-seq-len", str(MAX_SEQ),
                    "--parallel", str(parallel), "--json", *extra]
            if target == "cuda":
                argv += ["--timeline", str(trace / "measured.json"), "--trace", str(trace / "chrome.json")]
            for c in expected_cases[:prompts]:
                argv += ["--prompt", c["prompt"]]
            rc, out, err = _cli(argv, trace)
            assert rc == 0, err
            events = {s: [json.loads(line) for line in (trace / f"stage{s}.jsonl").read_text().splitlines()]
                      for s in range(stages) if target == "cuda"}
            doc = json.loads(out)
            doc["_trace"] = str(trace)
            memo[key] = (doc, events)
        return memo[key]

    return run


def _program(doc: dict) -> ProgramOp:
    path = doc["package"]["path"]
    assert path.endswith(".tmachine.mlir")
    return TMachineStageProgram(Path(path).read_text(), "", source=path).parse()


def _runs(events: list[dict]) -> list[list[dict]]:
    """The trace split into step runs (an instruction of index 0 starts one)."""
    out: list[list[dict]] = []
    for ev in events:
        if ev["index"] == 0:
            out.append([])
        out[-1].append(ev)
    return out


def _check_step_run(prog: ProgramOp, device: str, run: list[dict]) -> None:
    """One step run of ``device``: every instruction of the step in the device's streams exactly once, each
    stream's in stream order, after the instructions its waits name, launches with the IR's kernel and grid."""
    step = run[0]["step"]
    streams = [ops for s, ops in instructions(prog) if s.device.data == device]
    mine = {o.id.data: o for ops in streams for o in ops if step_of(o) in (step, None)}
    at = {ev["id"]: k for k, ev in enumerate(run)}
    assert len(at) == len(run) and set(at) == set(mine)  # each once, nothing else
    for ops in streams:
        ids = [o.id.data for o in ops if o.id.data in mine]
        assert sorted(ids, key=at.__getitem__) == ids  # stream order
    by_cmd = {o.cmd.data: o.id.data for o in mine.values()}
    for ev in run:
        op = mine[ev["id"]]
        assert ev["op"] == op.name and ev["step"] == step
        for w in op.wait_cmds:
            if w in by_cmd:  # a wait on another device's instruction is the edge exchange
                assert at[by_cmd[w]] < at[ev["id"]]
        if isinstance(op, LaunchOp):
            assert ev["kernel"] == op.kernel.data and ev["grid"] == list(op.grid.get_values())
        else:
            assert ev["kernel"] == "" and ev["grid"] == []


CASES = [(1, "inproc", 3), (3, "inproc", 2), (1, "local", 2)]


@pytest.mark.slow
@pytest.mark.parametrize("stages,backend,n_tokens", CASES, ids=["1-inproc", "3-inproc", "1-local"])
def test_run_cuda_executes_the_lowered_program(runs, expected_cases, stages, backend, n_tokens):
    """Issue 13 item 5 / AB-M-1, AB-M-4, WL-L-1: `pipeplan run --target cuda` (inproc 1 and 3 stages, local 1
    stage) gives llama.cpp's greedy ids, and every stage executed the lowered program's instructions of its
    node: per step run, each once, in stream order (waits honoured), launches with the IR's kernel and grid;
    the runs are the prompt's 5-row prefill and one decode per further token, at their positions."""
    doc, events = runs(stages, backend, n_tokens)
    case = expected_cases[0]
    assert doc["target"] == "cuda" and doc["token_ids"] == case["greedy_ids"][:n_tokens]
    prog = _program(doc)
    assert sorted({s.device.data for s, _ in instructions(prog)}) == [f"local{s}" for s in range(stages)]
    n_prompt = len(case["prompt_ids"])
    assert n_prompt == PREFILL_ROWS
    for s in range(stages):
        step_runs = _runs(events[s])
        assert [r[0]["step"] for r in step_runs] == ["prefill"] + ["decode"] * (n_tokens - 1)
        assert [r[0]["start_pos"] for r in step_runs] == [0] + list(range(n_prompt, n_prompt + n_tokens - 1))
        assert {ev["slot"] for ev in events[s]} == {0}
        for r in step_runs:
            _check_step_run(prog, f"local{s}", r)
    for r in _runs(events[stages - 1]):  # the last stage's logits are what its last launch (argmax) read
        assert [ev["kernel"] for ev in r if ev["op"] == "tmachine.launch"][-1] == "argmax:_argmax_kernel"


SAMPLING = ("--temperature", "2.0", "--top-k", "40", "--seed", "11")


@pytest.mark.slow
def test_run_cuda_parallel_slots_sample_like_the_reference(runs, expected_cases):
    """Issue 13 item 5 / AB-M-1: two prompts with --parallel 2 and seeded non-greedy sampling on the tmachine
    path (one interpreter, so one KV set, per slot; decode frames carry both sequences; the last stage samples
    the logits its argmax launch read) give the ids of the same run on the reference kernels, which differ
    from the greedy ones; the trace shows both slots' step runs checked against the program."""
    doc, events = runs(1, "inproc", 2, prompts=2, parallel=2, extra=SAMPLING)
    ref, _ = runs(1, "inproc", 2, prompts=2, parallel=2, extra=SAMPLING, target="reference")
    got = [r["token_ids"] for r in doc["results"]]
    assert got == [r["token_ids"] for r in ref["results"]]
    assert got != [c["greedy_ids"][:2] for c in expected_cases[:2]] and all(len(g) == 2 for g in got)
    prog = _program(doc)
    for slot in (0, 1):
        step_runs = _runs([ev for ev in events[0] if ev["slot"] == slot])
        assert [r[0]["step"] for r in step_runs] == ["prefill", "decode"]
        for r in step_runs:
            _check_step_run(prog, "local0", r)


def test_unbindable_program_is_a_bind_stage_fault(cache, stories_path):
    """Issue 13 item 5 / WL-F-4: a tmachine program naming a kernel the Triton package lacks, run through the
    product's generate with the cuda kernels, is a ``bind`` StageFault carrying the interpreter's typed code
    and the launch -- not a traceback, and before any token. (``compile_for_run`` for cuda-triton gives the
    stage its device and the compiled prefill rows, reuses its cached program and recompiles a truncated one.)"""
    from dataclasses import replace

    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.errors import StageFault
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.runtime.orchestrator import generate
    from pipeplan.runtime.replay import compile_for_run, local_pool_with_peaks
    from pipeplan.tools.cmd_serve import runtime_config
    from pipeplan.tools.generation import TARGET_KERNELS

    pool, pool_text = local_pool_with_peaks(1)
    module = plan_run(read_model_facts(stories_path), runtime_config(MAX_SEQ, 1), pool, 1)
    provisions = project_provisions(module)
    compiled = compile_for_run(module, pool_text, target="cuda-triton", model=stories_path, prompt_len=PREFILL_ROWS)
    again = compile_for_run(module, pool_text, target="cuda-triton", model=stories_path, prompt_len=PREFILL_ROWS)
    assert again.cached and again.package == compiled.package and again.programs == compiled.programs
    Path(compiled.package).write_text(compiled.programs[0].text[:1000])  # a truncated cache file is recompiled
    fresh = compile_for_run(module, pool_text, target="cuda-triton", model=stories_path, prompt_len=PREFILL_ROWS)
    assert not fresh.cached and fresh.programs == compiled.programs
    (good,) = compiled.programs.values()
    assert isinstance(good, TMachineStageProgram)
    assert (good.device, dict(good.rows), good.trace) == ("local0", {"prefill": PREFILL_ROWS, "decode": 1}, "")
    assert good.text.count('"rmsnorm:_rms_norm_kernel"') > 1
    bad = replace(good, text=good.text.replace('"rmsnorm:_rms_norm_kernel"', '"rmsnorm:_no_such_kernel"'))
    with pytest.raises(StageFault) as ei:
        generate(stories_path, provisions, "Hi", max_tokens=1, backend="inproc", kernels=TARGET_KERNELS["cuda"],
                 programs={0: bad})  # type: ignore[dict-item]
    f = ei.value
    assert f.kind == "bind" and f.stage == 0
    assert "error[tmachine:unknown_kernel]: launch 'i.cmd.decode.s0.b0.rms_norm.attn_norm': kernel " \
           "'rmsnorm:_no_such_kernel' is not a function of pipeplan.runtime.kernels.triton" in f.detail


@pytest.mark.parametrize("kind,needle", [
    ("bind", "error[tmachine:abi]: buffer 'alloc.s0.w.token_embd.weight' holds weight token_embd.weight, which the "
             "stage's weights lack"),
    ("allocation", "injected allocation failure for the tmachine program's KV and transient buffers"),
])
def test_run_cuda_injected_fault_exits_3(cache, stories_path, tmp_path, kind, needle):
    """Issue 13 item 5 / WL-F-3, WL-F-4: on the tmachine path an injected allocation failure, or a weight the
    program reads withheld from the stage, is that stage's typed fault (exit 3, one error line), not a
    traceback."""
    rc, out, err = _cli(["run", str(stories_path), "--prompt", "Hi", "--backend", "inproc", "--target", "cuda",
                         "--max-tokens", "1", "--prefill-rows", str(PREFILL_ROWS), "--max-seq-len", str(MAX_SEQ),
                         "--inject-fault", f"0:{kind}"], tmp_path)
    assert rc == 3 and out == ""
    assert err.startswith(f"error[stage_fault:{kind}]: stage 0: ") and err.count("\n") == 1 and needle in err


@pytest.mark.slow
def test_run_cuda_timeline_is_the_executed_instructions(runs):
    """Issue 13 item 5 / AB-D-2: `pipeplan run --target cuda --timeline/--trace` (3 stages, inproc) writes the
    measured TimelineBundle of the executed tmachine instructions: one event per instruction each stage ran, in
    its order, keyed (step, iteration, command) with the instruction id, kernel and stream, the k-th run of a
    step as iteration k; its schedule is the step runs and its machine digest the program's; the Chrome trace
    is written too."""
    import hashlib

    doc, events = runs(3, "inproc", 2)
    bundle = json.loads((Path(doc["_trace"]) / "measured.json").read_text())
    assert bundle["kind"] == "measured" and bundle["schedule"] == ["prefill", "decode"]
    text = Path(doc["package"]["path"]).read_text()
    assert bundle["digests"]["machine"] == f"sha256:{hashlib.sha256(text.encode()).hexdigest()}"
    got = [(e["stage"], e["instruction"], e["step"], e["op"], e["iteration"]) for e in bundle["events"]]
    want = []
    for s in range(3):
        seen: dict[str, int] = {}
        for ev in events[s]:
            if ev["index"] == 0:
                seen[ev["step"]] = seen.get(ev["step"], -1) + 1
            want.append((s, ev["id"], ev["step"], ev["kernel"] or ev["op"], seen[ev["step"]]))
    assert got == want
    keys = [(e["stage"], e["step"], e["iteration"], e["command"]) for e in bundle["events"]]
    assert len(set(keys)) == len(keys) and all(e["command"] and e["queue"].startswith(f"local{e['stage']}:")
                                               and 0 <= e["start_s"] <= e["end_s"] for e in bundle["events"])
    chrome = json.loads((Path(doc["_trace"]) / "chrome.json").read_text())
    assert len(chrome["traceEvents"]) >= len(bundle["events"])


REPLAY_POOL = "".join(f'[[nodes]]\nid = "n{i}"\nmemory_bytes = 1073741824\nbandwidth_bytes_per_s = 1.0e11\n'
                      f'flops_per_s = 1.0e12\nlink_bandwidth_bytes_per_s = 1.0e9\n' for i in range(2))


@pytest.fixture(scope="module")
def replay_packages(tmp_path_factory, stories_path):
    """``(cuda-triton package, virtual-queue package)`` of stories260K over 2 stages (reference-queue binder,
    the 5-row prefill; the tmachine program with the Triton CPU interpreter's launch configurations): the first
    by ``pipeplan compile --target cuda-triton --interpret``, the second by the API."""
    from pipeplan.compiler.replay_package import compile_plan_to_package, print_module
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.frontend.pool import load_pool_toml
    from pipeplan.plan_types import RuntimeConfig

    d = tmp_path_factory.mktemp("tm-pkg")
    (d / "pool.toml").write_text(REPLAY_POOL)
    plan = plan_run(read_model_facts(stories_path), RuntimeConfig(max_seq_len=MAX_SEQ), load_pool_toml(d / "pool.toml"), 2)
    (d / "plan.mlir").write_text(print_module(plan))
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["compile", str(d / "plan.mlir"), "--nodes", str(d / "pool.toml"), "--target", "cuda-triton",
                     "--interpret", "--binder", "reference-queue", "--prompt-len", str(PREFILL_ROWS), "--evidence",
                     "roofline", "--decode-tokens", "2", "-o", str(d / "cuda-triton")]) == 0
    vq = compile_plan_to_package(d / "plan.mlir", "virtual-queue", None, d / "virtual-queue", pool=d / "pool.toml",
                                 binder="reference-queue", prompt_len=PREFILL_ROWS, decode_tokens=2)
    return d / "cuda-triton", vq


@pytest.mark.slow
def test_replay_cuda_executes_the_packaged_tmachine_program(cache, replay_packages, stories_path, expected_cases, tmp_path):
    """Issue 13 item 5 / AB-M-1, AB-M-2, AB-M-4: `pipeplan replay PKG --target cuda` (a cuda-triton package, 2
    stages, inproc) runs the package's lowered ``tmachine.mlir`` through the tmachine interpreter, not the
    vmachine stage programs: llama.cpp's greedy ids, and every stage executed its device's instructions of
    that program per step run, each once, in stream order, launches with the IR's kernel and grid."""
    pkg, _ = replay_packages
    case = expected_cases[0]
    manifest = json.loads((pkg / "manifest.json").read_text())
    assert manifest["tmachine"] == {"file": "tmachine.mlir", "interpret": True, "revision": "pipeplan-tmachine/3"}
    assert "tmachine.mlir" in manifest["files"]
    assert manifest["target"]["name"] == "cuda-triton"
    trace = tmp_path / "trace"
    trace.mkdir()
    rc, out, err = _cli(["replay", str(pkg), "--model", str(stories_path), "--prompt", case["prompt"], "--target", "cuda",
                         "--backend", "inproc", "--max-tokens", "2", "--json", "--timeline", str(tmp_path / "m.json"),
                         "--trace", str(tmp_path / "chrome.json")], trace)
    assert rc == 0, err
    assert json.loads(out)["token_ids"] == case["greedy_ids"][:2]
    text = (pkg / "tmachine.mlir").read_text()
    prog = TMachineStageProgram(text, "", source="pkg").parse()
    for s in range(2):
        events = [json.loads(line) for line in (trace / f"stage{s}.jsonl").read_text().splitlines()]
        step_runs = _runs(events)
        assert [r[0]["step"] for r in step_runs] == ["prefill", "decode"]
        for r in step_runs:
            _check_step_run(prog, f"n{s}", r)
    bundle = json.loads((tmp_path / "m.json").read_text())  # the measured timeline is those instructions
    assert bundle["kind"] == "measured" and bundle["schedule"] == ["prefill", "decode"]
    assert bundle["digests"]["machine"] == f"sha256:{hashlib.sha256(text.encode()).hexdigest()}"
    assert len(bundle["events"]) == sum(len((trace / f"stage{s}.jsonl").read_text().splitlines()) for s in range(2))
    assert json.loads((tmp_path / "chrome.json").read_text())["traceEvents"]


def test_replay_cuda_needs_a_tmachine_package(cache, replay_packages, stories_path, tmp_path):
    """Issue 13 item 5 / AB-M-2: `pipeplan replay --target cuda` of a package compiled for another target (no
    ``tmachine.mlir``) is ``error[unsupported_program]`` (exit 2, before any stage runs), not the vmachine
    program on the Triton kernel table."""
    _, vq = replay_packages
    assert not (vq / "tmachine.mlir").exists() and "tmachine" not in json.loads((vq / "manifest.json").read_text())
    rc, out, err = _cli(["replay", str(vq), "--model", str(stories_path), "--prompt", "Hi", "--target", "cuda",
                         "--backend", "inproc", "--max-tokens", "1"], tmp_path)
    assert rc == 2 and out == "" and err.startswith("error[unsupported_program]: ") and "cuda-triton" in err


def test_replay_cuda_refuses_an_older_tmachine_revision(cache, replay_packages, stories_path, tmp_path):
    """Issue 13 item 2: a cuda-triton package whose manifest states another tmachine revision (or none: written
    before the revision was recorded) is ``error[unsupported_program]`` naming both revisions (exit 2, before any
    stage runs), not a program misread; a program text of another revision is refused on parse
    (``tmachine:parse``)."""
    import shutil

    from pipeplan.compiler.replay_package import MANIFEST, SELF_DIGEST_KEY, manifest_self_digest
    from pipeplan.dialects.triton_machine import REVISION
    from pipeplan.errors import PipeplanError

    pkg, _ = replay_packages
    for old in ("pipeplan-tmachine/2", None):
        d = tmp_path / f"old-{old is None}"
        shutil.copytree(pkg, d)
        manifest = json.loads((d / MANIFEST).read_text())
        if old is None:
            del manifest["tmachine"]["revision"]
        else:
            manifest["tmachine"]["revision"] = old
        manifest[SELF_DIGEST_KEY] = manifest_self_digest(manifest)
        (d / MANIFEST).write_text(json.dumps(manifest))
        rc, out, err = _cli(["replay", str(d), "--model", str(stories_path), "--prompt", "Hi", "--target", "cuda",
                             "--backend", "inproc", "--max-tokens", "1"], tmp_path)
        assert rc == 2 and out == "" and err.startswith("error[unsupported_program]: ")
        assert f"revision '{old or 'unstated'}', this runtime runs '{REVISION}'" in err
    text = (pkg / "tmachine.mlir").read_text().replace(f'revision = "{REVISION}"', 'revision = "pipeplan-tmachine/2"')
    with pytest.raises(PipeplanError, match="revision 'pipeplan-tmachine/2'") as e:
        TMachineStageProgram(text, "n0", source="old").parse()
    assert e.value.code == "tmachine:parse"


def test_cuda_package_rebuilds_identically_and_detects_tampering(cache, replay_packages, tmp_path):
    """Issue 13 item 5 / AB-M-2, AB-M-3: a cuda-triton package's ``tmachine.mlir`` is a pure function of the
    inputs (a rebuild is byte-identical) and covered by the manifest's digests (an edited copy is
    ``bad_package`` naming it)."""
    import shutil

    from pipeplan.compiler.replay_package import PackageError, compile_plan_to_package, verify_package

    pkg, _ = replay_packages
    again = compile_plan_to_package(pkg.parent / "plan.mlir", "cuda-triton", ("roofline",), tmp_path / "again",
                                    pool=pkg.parent / "pool.toml", binder="reference-queue", prompt_len=PREFILL_ROWS,
                                    decode_tokens=2, interpret=True)
    assert (again / "tmachine.mlir").read_bytes() == (pkg / "tmachine.mlir").read_bytes()
    bad = tmp_path / "bad"
    shutil.copytree(pkg, bad)
    (bad / "tmachine.mlir").write_text((pkg / "tmachine.mlir").read_text().replace("gemv", "gemw", 1))
    with pytest.raises(PackageError, match="tmachine.mlir has digest"):
        verify_package(bad)
