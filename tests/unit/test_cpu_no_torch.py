"""The CPU target is torch-free end to end (issue 12, issue 11 item 10): with ``--target cpu`` neither the
orchestrator nor the stage host nor a stage process imports torch.

Each run happens in a subprocess whose ``PYTHONPATH`` starts with a stand-in ``torch`` package that records
the importing process (pid and stack) in a marker file and raises ImportError: the forkserver stage host and
the stage processes forked from it inherit that path, so any import of torch anywhere in the run is seen."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import STORIES

BLOCKER = textwrap.dedent("""\
    import os, traceback
    with open(os.environ["PIPEPLAN_TORCH_MARK"], "a") as f:
        f.write(f"pid {os.getpid()}\\n" + "".join(traceback.format_stack()) + "\\n")
    raise ImportError("torch is blocked in this test")
""")


@pytest.fixture(scope="module")
def blocked(tmp_path_factory):
    """(environment with the torch blocker first on PYTHONPATH, marker path, cache dir)."""
    root = tmp_path_factory.mktemp("no-torch")
    (root / "site" / "torch").mkdir(parents=True)
    (root / "site" / "torch" / "__init__.py").write_text(BLOCKER)
    mark = root / "torch-imports.txt"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root / "site")] + [p for p in [env.get("PYTHONPATH", "")] if p])
    env["PIPEPLAN_TORCH_MARK"] = str(mark)
    env["PIPEPLAN_CACHE"] = str(root / "cache")
    return env, mark


def _run(env: dict, mark: Path, code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=240)
    imported = mark.read_text() if mark.exists() else ""
    assert out.returncode == 0, out.stderr[-3000:] + imported[-3000:]
    assert imported == "", f"torch was imported:\n{imported[-4000:]}"
    return out.stdout


@pytest.mark.parametrize("backend, stages", [("inproc", 1), ("local", 2)])
def test_cpu_run_imports_no_torch(blocked, expected_cases, backend, stages):
    """WL-R-3: a ``pipeplan run`` on the CPU target (inproc: one stage in this process; local: the stage host
    and two stage processes forked from it) binds and serves stories260K with torch unimportable, gives
    llama.cpp's greedy ids, and no process of the run tries to import torch."""
    env, mark = blocked
    case = expected_cases[0]
    n = 12
    code = textwrap.dedent(f"""\
        import sys
        from pipeplan.tools.cli import main
        rc = main(["run", {str(STORIES)!r}, "--prompt", {case["prompt"]!r}, "--stages", "{stages}",
                   "--backend", "{backend}", "--max-tokens", "{n}", "--threads", "1", "--json"])
        print("TORCH_LOADED", "torch" in sys.modules)
        sys.exit(rc)
    """)
    out = _run(env, mark, code)
    doc = json.loads(out[: out.rindex("TORCH_LOADED")])
    assert doc["target"] == "cpu" and doc["token_ids"] == case["greedy_ids"][:n]
    assert out.rstrip().endswith("TORCH_LOADED False")


def test_stage_host_preload_and_stage_program_import_no_torch(blocked):
    """WL-R-3: what the stage host preloads (STAGE_PRELOAD) and what a CPU stage runs (StageExecutor on the
    cpu table, the sampler, the shm transport, compiling a vmachine program) import no torch."""
    env, mark = blocked
    code = textwrap.dedent(f"""\
        import importlib, sys
        import numpy as np
        from pipeplan.runtime.stage_host import STAGE_PRELOAD
        for m in STAGE_PRELOAD:
            importlib.import_module(m)
        import pipeplan.transforms.convert_cplan_to_vmachine, pipeplan.runtime.replay, pipeplan.runtime.orchestrator
        from pipeplan.frontend.gguf_facts import read_model_facts
        from pipeplan.runtime.kernels import cpu
        from pipeplan.runtime.loader import stage_slices
        from pipeplan.runtime.program import HParams, StageExecutor, build_stage_program
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        from tests.executor_chain import greedy_generate
        from pipeplan.runtime.sampling import Sampler
        facts = read_model_facts({str(STORIES)!r})
        hp = HParams.from_facts(facts)
        w = cpu.load_stage_weights(list(facts.files), stage_slices(facts, 0, hp.n_layer, True, True))
        ex = StageExecutor(hp, build_stage_program(hp, 0, hp.n_layer, True, True, 16), w, 16, cpu, num_threads=1)
        ids = greedy_generate([ex], [1, 403, 407], 4)
        logits = ex.forward(np.array([ids[-1]], dtype=np.int64), 6, last_only=True)
        assert isinstance(logits, np.ndarray)
        print(ids, Sampler(temperature=0.8, seed=1).sample(logits[-1]))
        print("TORCH_LOADED", "torch" in sys.modules)
    """)
    out = _run(env, mark, code)
    assert out.rstrip().endswith("TORCH_LOADED False")
