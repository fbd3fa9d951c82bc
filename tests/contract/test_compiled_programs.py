"""The machine IR is what runs (issue 13 item 5): every stage of every backend binds the plan's compiled machine
program; no stage builds its own. A library ``Pipeline`` given only provisions compiles the RunPlan they state
through the CLI's compile path (``runtime.compiled.compile_provisions`` -> ``compile_for_run``)."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import sys
from pathlib import Path

import pytest
from pipeplan.errors import StageFault
from pipeplan.plan_types import RuntimeConfig, WeightSource
from pipeplan.runtime.events import StageFaulted, WeightsReady
from pipeplan.runtime.orchestrator import Pipeline, RunRequestError, generate

from tests.conftest import STORIES

RUNTIME = Path(__file__).resolve().parents[2] / "runtime"


@pytest.fixture(scope="module")
def plan2():
    """``(RunPlan module, pool TOML, provisions)``: stories260K on 2 local nodes stating this host's peaks
    (what ``pipeplan run --stages 2`` plans)."""
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.runtime.compiled import local_pool_with_peaks

    pool, text = local_pool_with_peaks(2)
    module = plan_run(read_model_facts(STORIES), RuntimeConfig(max_seq_len=64), pool, 2)
    return module, text, project_provisions(module)


@pytest.fixture
def no_runtime_builds(monkeypatch):
    """``build_stage_program`` raises when the runtime calls it (the compiler's passes may: they make the
    machine program); every module holding the name gets the guarded one. Yields the runtime callers seen."""
    import pipeplan.models.stage_program as sp

    original = sp.build_stage_program
    calls: list[str] = []

    def guarded(*args, **kwargs):
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller.startswith("pipeplan.runtime"):
            calls.append(caller)
            raise AssertionError(f"{caller} built a stage program itself")
        return original(*args, **kwargs)

    for name, mod in list(sys.modules.items()):
        if name.startswith("pipeplan") and getattr(mod, "build_stage_program", None) is original:
            monkeypatch.setattr(mod, "build_stage_program", guarded)
    yield calls


@pytest.mark.parametrize("backend", ["inproc", "local"])
def test_two_stage_generate_binds_the_compiled_program(plan2, expected_cases, no_runtime_builds, backend):
    """WL-R-3, AB-M-2: a 2-stage stories260K ``generate`` with no ``programs=`` gives llama.cpp's greedy ids
    (expected.json) on inproc and local, with ``build_stage_program`` raising for any runtime caller: the stages
    bound the compiled program (a stage without one faults ``bind``:
    :func:`test_a_stage_without_a_compiled_program_faults_bind`)."""
    ps = plan2[2]
    for c in expected_cases[:2]:
        r = generate(STORIES, ps, c["prompt"], max_tokens=len(c["greedy_ids"]), backend=backend)
        assert r.prompt_ids == c["prompt_ids"] and r.token_ids == c["greedy_ids"], c["prompt"]
        assert sorted(e.stage for e in r.events if isinstance(e, WeightsReady)) == [0, 1]
    assert no_runtime_builds == []


def test_pipeline_hands_each_stage_the_compiled_program(plan2, no_runtime_builds):
    """AB-M-2, AB-M-4: the default compile is the CLI's: ``Pipeline(provisions)`` compiles the RunPlan the provisions state into
    the same stage programs (steps, rows, kernel calls, machine digest) as ``compile_for_run`` of the plan they
    were projected from, with the CLI's default prefill rows; every inproc stage bound exactly its program."""
    from pipeplan.runtime.compiled import DEFAULT_PREFILL_ROWS, compile_for_run
    from pipeplan.tools import cmd_run, cmd_serve

    assert cmd_run.DEFAULT_PREFILL_ROWS == DEFAULT_PREFILL_ROWS  # `pipeplan run --prefill-rows` default
    serve_parser = argparse.ArgumentParser()
    cmd_serve.add_arguments(serve_parser)
    serve_args = serve_parser.parse_args(["m.gguf"])
    assert serve_args.prefill_rows == DEFAULT_PREFILL_ROWS  # `pipeplan serve --prefill-rows` default
    module, text, ps = plan2
    want = compile_for_run(module, text, prompt_len=min(DEFAULT_PREFILL_ROWS, 63)).programs
    with Pipeline(ps, backend="inproc") as pipe:
        assert pipe.compiled is not None and pipe.options.programs == want
        assert [w.bound for w in pipe.backend.workers] == [want[0], want[1]]
        assert pipe.prefill_rows == 63 and want[0].source.startswith("sha256:")
        pipe.generate_ids([1, 403, 407], 3)
    assert no_runtime_builds == []


def test_prefill_rows_are_the_compiled_steps(plan2, expected_cases):
    """``Pipeline(prefill_rows=R)`` without programs compiles a prefill step of R rows (prompts go in R-row
    chunks) and the greedy ids stay llama.cpp's."""
    c = expected_cases[1]
    with Pipeline(plan2[2], backend="inproc", prefill_rows=3) as pipe:
        assert {p.rows["prefill"] for p in pipe.options.programs.values()} == {3} and pipe.prefill_rows == 3
        assert pipe.generate_ids(c["prompt_ids"], len(c["greedy_ids"]))[0] == c["greedy_ids"]


@pytest.mark.parametrize("backend", ["inproc", "local"])
def test_a_stage_without_a_compiled_program_faults_bind(plan2, backend):
    """WL-F-4, WL-F-6: a stage worker given no compiled program never builds one: it loads its weights, then
    faults ``bind`` naming its stage, with no WeightsReady."""
    events = []
    with pytest.raises(StageFault) as e:
        Pipeline(plan2[2], backend=backend, programs={}, on_event=events.append).start()
    assert e.value.kind == "bind" and f"stage {e.value.stage} was given no compiled stage program" in e.value.detail
    faulted = [ev for ev in events if isinstance(ev, StageFaulted)]
    assert faulted and all(ev.fault_kind == "bind" for ev in faulted)
    assert not any(isinstance(ev, WeightsReady) for ev in events)


def test_stage_worker_requires_a_program(plan2):
    """WL-F-4: a StageWorker made without ``program=`` is a bind fault at load (after resolve/parse/validate/load)."""
    from pipeplan.runtime.stage import StageWorker

    events = []
    w = StageWorker(plan2[2][1], events.append)
    with pytest.raises(StageFault, match="stage 1 was given no compiled stage program") as e:
        w.load()
    assert (e.value.kind, e.value.stage) == ("bind", 1) and w.mapped_bytes > 0
    assert [type(ev) for ev in events] == [StageFaulted]


def test_unreadable_model_facts_are_a_request_error_before_any_stage(plan2):
    """AB-G-4: without programs the orchestrator needs the model's header; provisions whose weight source is
    not on this host (an http URL not cached) and no ``model=`` are RunRequestError before any stage starts;
    ``model=`` gives the facts and the run starts."""
    src = WeightSource(("http://127.0.0.1:9/stories260K.gguf",))
    ps = [dataclasses.replace(p, weights=src) for p in plan2[2]]
    events = []
    pipe = Pipeline(ps, backend="inproc", on_event=events.append)
    with pytest.raises(RunRequestError, match="not on this host") as e:
        pipe.start()
    assert e.value.where == "model" and events == [] and pipe.backend.workers == []
    with pytest.raises(StageFault) as f:  # the facts come from model=; the stages still fetch their weights
        Pipeline(ps, backend="inproc", model=STORIES).start()
    assert f.value.kind == "download"


def test_runtime_never_calls_build_stage_program():
    """No runtime module calls ``build_stage_program`` (``runtime/program.py`` only re-exports it for
    StageExecutor users and the kernel tests)."""
    callers = []
    for path in sorted(RUNTIME.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if name == "build_stage_program":
                    callers.append(f"{path.relative_to(RUNTIME.parent)}:{node.lineno}")
    assert callers == []


def test_triton_kernels_compile_and_run_the_tmachine_program(plan2, expected_cases, tmp_path, monkeypatch):
    """AB-M-1, AB-M-4: ``Pipeline(kernels=<the Triton table>)`` without programs compiles the provisions' RunPlan
    for ``cuda-triton`` (what ``pipeplan run --target cuda`` runs): every stage binds its part of the lowered
    ``tmachine.program`` (never a vmachine program with the Triton table swapped in), the stages interpret it
    (Triton's CPU interpreter) and the greedy ids are llama.cpp's."""
    from pipeplan.runtime.tmachine_run import TRACE_ENV, TMachineStageProgram, compile_target

    trace = tmp_path / "trace"
    trace.mkdir()
    monkeypatch.setenv(TRACE_ENV, str(trace))
    c = expected_cases[0]
    n = 2
    with Pipeline(plan2[2], backend="inproc", kernels="pipeplan.runtime.kernels.triton", prefill_rows=len(c["prompt_ids"]),
                  cache_dir=tmp_path / "cache") as pipe:
        assert compile_target("pipeplan.runtime.kernels.triton") == "cuda-triton"
        assert compile_target("pipeplan.runtime.kernels.cpu") == compile_target(None) == "virtual-queue"
        progs = pipe.options.programs
        assert progs and all(isinstance(p, TMachineStageProgram) for p in progs.values())
        assert all(w.tmachine is not None and w.bound is None for w in pipe.backend.workers)
        assert str(pipe.compiled.package).endswith(".tmachine.mlir")
        assert pipe.generate_ids(c["prompt_ids"], n)[0] == c["greedy_ids"][:n]
    for stage in (0, 1):  # each stage wrote the tmachine instructions it executed: launches with their grids
        recs = [json.loads(line) for line in (trace / f"stage{stage}.jsonl").read_text().splitlines()]
        assert any(r["op"] == "tmachine.launch" and r["grid"] for r in recs)
