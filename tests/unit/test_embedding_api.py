"""Embedding API: pipeplan's dialects and passes used from another xDSL program (no command line),
from stock ``xdsl-opt`` through the ``xdsl.universe`` entry point, and a lazy ``universe``."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pipeplan.api import build_pipeline, parse_module, register_pipeplan, run_pipeline
from pipeplan.dialects.runplan_build import build_runplan_module, project_provisions, provisions_from_module
from xdsl.context import Context
from xdsl.printer import Printer

from tests.unit.runplan_fixtures import llama_facts, make_spec

VENV_BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def plan_text() -> str:
    """A verified 2-stage plan of a 4-block llama model, printed in custom syntax."""
    buf = io.StringIO()
    Printer(buf).print_op(build_runplan_module(make_spec(llama_facts(4), 2), ["node-0", "node-1"]))
    return buf.getvalue()


def test_register_parse_and_project_in_a_fresh_context(plan_text):
    """RP-PP-1, RP-PP-3, RP-PP-4: a caller's own Context gets our dialects; parsing a plan and running
    runplan-project-provisioning through the API gives one provision per stage with node-id peers."""
    ctx = Context()
    assert "runplan" not in ctx.registered_dialect_names
    register_pipeplan(ctx)
    assert {"builtin", "runplan"} <= set(ctx.registered_dialect_names)
    module = parse_module(ctx, plan_text)
    assert provisions_from_module(module) == []
    run_pipeline(ctx, module, "runplan-project-provisioning")
    ps = provisions_from_module(module)
    assert [(p.stage, p.node_id, p.layer_start, p.layer_end) for p in ps] == [(0, "node-0", 0, 2), (1, "node-1", 2, 4)]
    assert [(p.inbound.peer_node_id, p.outbound.peer_node_id) for p in ps] == [
        ("orchestrator", "node-1"), ("node-0", "orchestrator")]
    assert ps == project_provisions(parse_module(ctx, plan_text))
    run_pipeline(ctx, module, "runplan-verify")  # the projected module verifies as a whole
    register_pipeplan(ctx)  # registering twice keeps what is there
    assert build_pipeline("runplan-verify,runplan-project-provisioning").passes[0].name == "runplan-verify"


def test_unknown_pass_is_a_key_error():
    """RP-F-1: a pipeline naming a pass pipeplan does not define fails with a KeyError listing ours."""
    with pytest.raises(KeyError, match="runplan-project-provisioning"):
        build_pipeline("no-such-pass")


def test_stock_xdsl_opt_sees_the_dialect_and_passes(plan_text, tmp_path):
    """RP-PP-1: the installed xdsl.universe entry point lets stock xdsl-opt parse a RunPlan and run
    runplan-project-provisioning."""
    exe = shutil.which("xdsl-opt", path=str(VENV_BIN)) or shutil.which("xdsl-opt")
    assert exe, "xdsl-opt console script not installed"
    src = tmp_path / "plan.mlir"
    src.write_text(plan_text)
    r = subprocess.run([exe, str(src), "-p", "runplan-project-provisioning"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("runplan.provision_stage") == 2
    assert 'runplan.provision_stage %s1 of 2 on "node-1" layers [2, 4)' in r.stdout


def test_universe_import_is_lazy():
    """Importing pipeplan.universe (what every xdsl-opt run does) imports no pipeplan dialect or pass."""
    code = ("import sys, pipeplan.universe as u; "
            "bad = sorted(m for m in sys.modules if m.startswith(('pipeplan.dialects.', 'pipeplan.transforms.')));"
            "print(bad); assert not bad, bad; "
            "u.PIPEPLAN_UNIVERSE.all_dialects['runplan'](); assert 'pipeplan.dialects.runplan' in sys.modules")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
