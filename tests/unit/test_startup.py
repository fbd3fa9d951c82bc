"""Start-up path of local runs (issue 11 item 10): stage host, torch-free orchestrator, pre-parsed stage
programs, thread policy. Figures are measured by bench/startup.py, not here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from pipeplan.runtime.backends import PARALLEL_MIN_ELEMENTS, default_num_threads, usable_cores

from tests.conftest import STORIES


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    """A compiled 2-stage stories260K package in a private cache: (CompiledRun, plan module, pool text)."""
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.plan_types import RuntimeConfig
    from pipeplan.runtime.compiled import compile_for_run, local_pool_with_peaks

    pool, text = local_pool_with_peaks(2)
    module = plan_run(read_model_facts(STORIES), RuntimeConfig(max_seq_len=64), pool, 2)
    cache = tmp_path_factory.mktemp("pkg-cache")
    return compile_for_run(module, text, cache_dir=cache, prompt_len=8), module, text, cache


def test_cached_package_loads_pre_parsed_stage_programs(package, monkeypatch):
    """AB-M-3: a cached package's stage programs come from ``<pkg>.stages.json`` (no program.mlir parse),
    equal to what parsing the package gives; the package's digests are still checked."""
    from pipeplan.runtime import compiled

    run, module, text, cache = package
    parsed = compiled.load_compiled_stages(run.package)
    assert run.programs == parsed and compiled.stages_cache_path(run.package).exists()

    def no_parse(*a, **k):
        raise AssertionError("program.mlir parsed although the pre-parsed form is valid")

    monkeypatch.setattr(compiled, "load_package", no_parse)
    again = compiled.compile_for_run(module, text, cache_dir=cache, prompt_len=8)
    assert again.cached and again.programs == parsed


@pytest.mark.parametrize("damage", ["tamper-programs", "other-machine-digest", "garbage", "missing"])
def test_pre_parsed_form_is_used_only_when_it_matches_the_package(package, damage):
    """A pre-parsed file whose programs were edited (own sha256 off), that names another program digest, that
    is not JSON, or is absent is ignored: the package is parsed again and the file rewritten."""
    from pipeplan.runtime import compiled

    run = package[0]
    path = compiled.stages_cache_path(run.package)
    compiled.load_compiled_stages_fast(run.package)
    doc = json.loads(path.read_text())
    if damage == "tamper-programs":
        first = next(iter(doc["stages"].values()))
        step = next(iter(first["steps"].values()))
        step[0][0] = "no_such_kernel"
        path.write_text(json.dumps(doc))
    elif damage == "other-machine-digest":
        doc["machine"] = "sha256:" + "0" * 64
        path.write_text(json.dumps(doc))
    elif damage == "garbage":
        path.write_text("{not json")
    else:
        path.unlink()
    got = compiled.load_compiled_stages_fast(run.package)
    assert got == compiled.load_compiled_stages(run.package)
    assert json.loads(path.read_text())["sha256"] == json.loads(json.dumps(compiled._stages_doc(
        got, compiled._package_identity(run.package, json.loads((run.package / "manifest.json").read_text())))
    ))["sha256"]


def test_tampered_package_is_rejected_even_with_a_pre_parsed_form(package, tmp_path):
    """The pre-parsed form never bypasses the package's digests: an edited program.mlir is a PackageError."""
    import shutil

    from pipeplan.compiler.replay_package import PackageError
    from pipeplan.runtime import compiled

    src = package[0].package
    pkg = tmp_path / src.name
    shutil.copytree(src, pkg)
    compiled.load_compiled_stages_fast(pkg)
    prog = pkg / "program.mlir"
    prog.write_text(prog.read_text().replace("vmachine", "vmachine ", 1))
    with pytest.raises(PackageError):
        compiled.load_compiled_stages_fast(pkg)


def test_orchestrator_process_never_imports_torch(package):
    """A local ``pipeplan run`` with a cached package (plan, package load, 2 stages, tokens) keeps torch out of
    the orchestrator process: only the stage host and the stages import it."""
    cache = package[3]
    script = textwrap.dedent(f"""
        import sys
        from pipeplan.tools.cli import main
        rc = main(["run", {str(STORIES)!r}, "--prompt", "Once upon a time", "--max-tokens", "4", "--stages", "2",
                   "--max-seq-len", "64", "--prefill-rows", "8", "--json"])
        assert rc == 0, rc
        print("TORCH_IMPORTED", "torch" in sys.modules)
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, PIPEPLAN_CACHE=str(cache)))
    assert p.returncode == 0, p.stderr
    body, flag = p.stdout.rsplit("TORCH_IMPORTED", 1)
    assert json.loads(body)["package"]["cached"] is True and flag.strip() == "False"


def test_stage_host_is_started_once_and_preloads_the_runtime():
    """The local backend's stage host is a forkserver that imported the runtime before forking: starting it
    again is a no-op, and a stage process finds the runtime already imported and torch not (the CPU target
    never needs it; tests/unit/test_cpu_no_torch.py)."""
    from multiprocessing import forkserver

    from pipeplan.runtime.stage_host import STAGE_PRELOAD, prestart_stage_host, stage_context

    ctx = stage_context()
    assert ctx.get_start_method() == "forkserver" and "pipeplan.runtime.stage" in STAGE_PRELOAD
    prestart_stage_host()
    pid = forkserver._forkserver._forkserver_pid
    prestart_stage_host()
    assert pid is not None and forkserver._forkserver._forkserver_pid == pid
    q = ctx.SimpleQueue()
    p = ctx.Process(target=_report_preloaded, args=(q,))
    p.start()
    got = q.get()
    p.join(60)
    assert got == (False, True) and p.exitcode == 0


def _report_preloaded(q) -> None:
    q.put(("torch" in sys.modules, "pipeplan.runtime.program" in sys.modules))


@pytest.mark.parametrize(("largest", "stages", "cores", "want"), [
    (PARALLEL_MIN_ELEMENTS - 1, 1, 8, 1),  # small model: one thread even with cores to spare
    (PARALLEL_MIN_ELEMENTS, 1, 8, 8),
    (PARALLEL_MIN_ELEMENTS, 3, 8, 2),  # cores split among stages, never more threads in all than cores
    (PARALLEL_MIN_ELEMENTS, 2, 2, 1),  # stages >= cores: one each
    (PARALLEL_MIN_ELEMENTS, 5, 2, 1),
])
def test_default_threads_follow_cores_and_stage_size(largest, stages, cores, want):
    """Intra-op threads per stage: cores // stages (at least 1), and 1 for a stage whose largest weight is
    under PARALLEL_MIN_ELEMENTS (the 1-stage inproc collapse under load: bench/startup.py)."""
    import dataclasses

    from tests.unit.test_shm_ring import _provisions

    ps = _provisions(1) * stages
    big = dataclasses.replace(ps[0].tensors[0], shape=(largest, 1))
    ps = [dataclasses.replace(ps[0], tensors=(big,))] * stages
    assert default_num_threads(ps, cores) == want
    assert default_num_threads(ps) == (1 if largest < PARALLEL_MIN_ELEMENTS else max(1, usable_cores() // stages))


def test_stories_runs_single_threaded_and_inproc_restores_the_callers_setting():
    """stories260K (largest weight 32768 elements) gets one torch thread per stage on both backends (local: one
    per stage process, always); an inproc run gives the caller's torch thread setting back when it ends."""
    import torch
    from pipeplan.runtime.orchestrator import Pipeline

    from tests.unit.test_shm_ring import _provisions

    ps = _provisions(2)
    assert default_num_threads(ps) == 1
    before = torch.get_num_threads()
    with Pipeline(ps, backend="inproc") as pipe:
        assert pipe.options.num_threads == 1
        pipe.generate_ids([1, 403, 407], 2)
    assert torch.get_num_threads() == before
    assert Pipeline(ps, backend="local").options.num_threads == 1


def test_spawn_fallback_runs_the_same_tokens(expected_cases):
    """The ``spawn`` start method (platforms without a forkserver) runs the same stage main: same greedy
    tokens, named segments, heartbeats, and nothing left in /dev/shm."""
    from pipeplan.runtime.backends import LocalBackend
    from pipeplan.runtime.orchestrator import generate

    from tests.unit.test_shm_ring import _provisions

    c = expected_cases[0]
    b = LocalBackend(start_method="spawn")
    r = generate(STORIES, _provisions(1), c["prompt"], max_tokens=8, backend=b)
    assert r.token_ids == c["greedy_ids"][:8]
    assert b.shm_entries() and not set(b.shm_entries()) & set(os.listdir("/dev/shm"))
