"""Verifiers on parse, pointing at the op (issue 13 item 3): a broken runplan / cplan / vmachine / tmachine is
rejected by parsing alone, with its contract ID, the offending op's ``line:col`` and a short message.

The 3-stage programs are stories260K planned on 3 nodes and lowered once per module (about 5 s)."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pipeplan.api import IRVerifyError, parse_module, register_pipeplan, run_pipeline
from pipeplan.dialects import cplan, runplan, triton_machine, vmachine
from pipeplan.dialects.diagnostics import OpPassError, parse_located
from pipeplan.frontend.gguf_facts import read_model_facts
from pipeplan.frontend.planner import plan_run
from pipeplan.plan_types import NodePool, NodeSpec, RuntimeConfig
from pipeplan.transforms.cplan_verify import CplanVerifyPass
from xdsl.context import Context
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError, VerifyException

SHORT = 2048
"""Upper bound (bytes) of a whole diagnostic for a 3-stage program."""


def _text(op) -> str:
    buf = io.StringIO()
    Printer(stream=buf).print_op(op)
    return buf.getvalue()


def _ctx() -> Context:
    return register_pipeplan(Context())


@pytest.fixture(scope="module")
def three_stage(tmp_path_factory, stories_path) -> dict[str, str]:
    """Texts of stories260K on 3 stages: ``runplan``, ``cplan`` (list-schedule) and ``vmachine``."""
    d = tmp_path_factory.mktemp("vop")
    mem = 1 << 30
    (d / "pool.toml").write_text("".join(
        f'[[nodes]]\nid = "n{i}"\nmemory_bytes = {mem}\nbandwidth_bytes_per_s = 1.0e11\nflops_per_s = 1.0e12\n'
        f'link_bandwidth_bytes_per_s = 1.0e9\n' for i in range(3)))
    pool = NodePool(tuple(NodeSpec(f"n{i}", mem, 1.0e11, 1.0e12, 1.0e9) for i in range(3)))
    mod = plan_run(read_model_facts(stories_path), RuntimeConfig(max_seq_len=16), pool, 3)
    out = {"runplan": _text(mod)}
    run_pipeline(_ctx(), mod, f'convert-runplan-to-pplan{{pool="{d / "pool.toml"}" prompt_len=4}},'
                              'pplan-legalize{target=virtual-queue},pplan-select-implementations,'
                              'pplan-resolve-costs{evidence=roofline},convert-pplan-to-cplan{binder=list-schedule}')
    out["cplan"] = _text(next(o for o in mod.ops if isinstance(o, cplan.PlanOp)))
    run_pipeline(_ctx(), mod, f'convert-cplan-to-vmachine{{model="{stories_path}"}}')
    out["vmachine"] = _text(next(o for o in mod.ops if isinstance(o, vmachine.ProgramOp)))
    return out


def _line_col(text: str, needle: str) -> tuple[int, int]:
    """1-based line and column of the first op line of ``text`` containing ``needle``."""
    for i, line in enumerate(text.split("\n")):
        if needle in line:
            return i + 1, len(line) - len(line.lstrip()) + 1
    raise AssertionError(needle)


def _rejects(text: str, name: str = "bad.mlir") -> IRVerifyError:
    with pytest.raises(IRVerifyError) as ei:
        parse_module(_ctx(), text, name)
    return ei.value


def _check_short(e: IRVerifyError, text: str, where: tuple[int, int], name: str = "bad.mlir") -> str:
    diag = e.diagnostic()
    assert e.location == (name, *where), (e.location, where)
    assert diag.startswith(f"{name}:{where[0]}:{where[1]}: error: [{e.invariant}] "), diag
    assert len(diag.encode()) < SHORT < len(text), (len(diag), len(text))
    assert diag.count("\n") == 1  # the message and the op's one line, no module dump
    return diag


def test_sound_programs_parse(three_stage):
    """RP-AR-7, AB-S-1, AB-M-1: the pipeline's own 3-stage runplan, cplan and vmachine texts pass the on-parse
    verifiers (each is re-parsed with its ops carrying file:line:col)."""
    for kind, text in three_stage.items():
        m = parse_module(_ctx(), text, f"{kind}.mlir")
        first = next(iter(m.ops))
        assert first.location.filename.data == f"{kind}.mlir"  # type: ignore[attr-defined]
        want = (2, 3) if text.startswith("builtin.module {") else (1, 1)
        assert (first.location.line.data, first.location.column.data) == want  # type: ignore[attr-defined]


def test_runplan_overlap_points_at_stage(three_stage):
    """RP-LA-2: overlapping layer ranges are rejected on parse, at the stage that overlaps; the Python API's
    error is typed (code, invariant, op) and still an xDSL VerifyException."""
    text = three_stage["runplan"]
    m = re.search(r'runplan\.stage 1 on "n1" layers \[(\d+), (\d+)\)', text)
    assert m
    bad = text.replace(m.group(0), f'runplan.stage 1 on "n1" layers [0, {m.group(2)})')
    e = _rejects(bad)
    assert isinstance(e, VerifyException) and e.code == "invalid_ir" and e.invariant == "RP-LA-2"
    assert isinstance(e.op, runplan.StageOp) and e.op.index.value.data == 1
    diag = _check_short(e, bad, _line_col(bad, 'runplan.stage 1 on "n1"'))
    assert "stage ranges must not overlap" in diag


def test_cplan_cycle_points_at_command(three_stage):
    """AB-S-1: a dependency cycle in the 3-stage concrete plan (the first command waits on the last command's
    timepoint, a forward use) is rejected on parse, at a command of the cycle."""
    text = three_stage["cplan"]
    cmds = re.findall(r'(%\d+) = cplan\.command "([^"]+)"', text)
    first = re.search(r'(%\d+ = cplan\.command "' + re.escape(cmds[0][1]) + r'" \([^)]*\) -> \([^)]*\)) cost ', text)
    assert first
    bad = text.replace(first.group(0), first.group(1) + f" after({cmds[-1][0]}) cost ", 1)
    e = _rejects(bad)
    assert e.invariant == "AB-S-1" and "dependency_cycle" in e.message
    assert isinstance(e.op, cplan.CommandOp)
    _check_short(e, bad, _line_col(bad, f'= cplan.command "{e.op.id.data}"'))


def test_cplan_overlap_points_at_alloc(three_stage):
    """AB-S-5: moving a live transient allocation onto another's bytes is rejected on parse, at that allocation."""
    text = three_stage["cplan"]
    allocs = re.findall(r'cplan\.alloc "([^"]+)" transient \{source = "[^"]*", device = "n0", space = "device", '
                        r'offset = (\d+) : i64, size = (\d+) : i64, alignment = (\d+) : i64\}',
                        text)
    a, b = allocs[0], allocs[1]
    old = f'cplan.alloc "{b[0]}" transient {{'
    line = next(ln for ln in text.split("\n") if old in ln)
    bad = text.replace(line, line.replace(f"offset = {b[1]} : i64", f"offset = {a[1]} : i64"))
    e = _rejects(bad)
    assert e.invariant == "AB-S-5" and "unsafe_reuse" in e.message
    assert isinstance(e.op, cplan.AllocOp)
    _check_short(e, bad, _line_col(bad, f'cplan.alloc "{e.op.id.data}" {e.op.lifetime.data} {{'))


def test_vmachine_unknown_buffer_points_at_instruction(three_stage):
    """AB-M-1: a machine instruction reading a buffer the program does not declare is rejected on parse: an
    undefined !vmachine.buffer value is a parse error, and a declared buffer the stage does not bind (another
    stage's, on another device) is rejected at that instruction."""
    text = three_stage["vmachine"]
    m = re.search(r'(vmachine\.kernel "([^"]+)" "[a-z_]+" \()(%[^,)]+)', text)
    assert m
    with pytest.raises(ParseError, match="alloc.ghost"):
        parse_module(_ctx(), text.replace(m.group(0), m.group(1) + "%alloc.ghost", 1), "bad.mlir")
    other = re.search(r'(%[\w.]+) = vmachine\.buffer "[^"]+" \w+ \{name = "[^"]+", stage = 2 : i64', text)
    assert other and m.group(3) != other.group(1)
    bad = text.replace(m.group(0), m.group(1) + other.group(1), 1)
    e = _rejects(bad)
    assert e.invariant == "AB-M-1" and "is on device 'n2', not the stage's 'n0'" in e.message, e.message
    assert isinstance(e.op, vmachine.KernelOp) and e.op.id.data == m.group(2)
    _check_short(e, bad, _line_col(bad, f'vmachine.kernel "{m.group(2)}"'))


@pytest.mark.parametrize("change,needle", [
    ('grid = array<i64: 0, 1, 1>', "grid must be 3 positive integers"),
    ('y = ""', "has an empty buffer argument"),
    ('waits = waits(%t)', "waits for token 'done.c9' that no instruction of the program signals"),
])
def test_tmachine_launch_points_at_launch(change, needle):
    """AB-M-1: a tmachine launch with a bad grid, an empty buffer argument (its buffer's id is empty) or a wait on a
    token nothing signals is rejected on parse, at the launch (line 6, column 5)."""
    props = {"grid": "array<i64: 1, 1, 1>", "y": '"y"', "waits": ""}
    key, val = change.split(" = ", 1)
    props[key] = val
    buf = 'transient {device = "n0", dtype = "f32", shape = array<i64: 1, 4>, origin = "decode:x"}'
    text = ('tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "r"} {\n'
            f'  %x = tmachine.buffer "x" {buf}\n'
            f'  %y = tmachine.buffer {props["y"]} {buf}\n'
            '  %t = tmachine.token "done.c9"\n'
            '  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {\n'
            f'    tmachine.launch "i.c1" "m:f" (%x, %y) {props["waits"]} {{cmd = "c1", grid = {props["grid"]}, '
            'meta = {}, scalars = {}, autotune = false, task = "decode.s0.t", impl = "triton.rms_norm", '
            'lineage = #cplan.lineage<decode, stage 0, "m">}\n'
            '  }\n}\n')
    e = _rejects(text, "t.mlir")
    assert e.invariant == "AB-M-1" and needle in e.message and isinstance(e.op, triton_machine.LaunchOp)
    assert e.location == ("t.mlir", 6, 5)


_SMALL_CPLAN = """cplan.plan attributes {binder = "reference-queue", target = "vq@1", deployment = "dep", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 100 : i64}, engines = {compute = 1 : i64}}
  %a = cplan.alloc "alloc.a" transient {source = "a", device = "d0", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "cmd.t0" () -> (%a) cost direct by roofline {task = "t0", op = "add", impl = "generic", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, "m0">, duration = 1.0e-06 : f64}
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
  }
}
"""


def test_cplan_verify_pass_error_points_at_op():
    """AB-S-3: the cplan-verify pass (reached without the on-parse verifier) keeps its own message and raises an
    OpPassError located at the command of its first violation."""
    mod = parse_located(_ctx(), _SMALL_CPLAN, "p.mlir")
    with pytest.raises(OpPassError) as ei:
        CplanVerifyPass().apply(_ctx(), mod)
    e = ei.value
    assert "AB-S-3 no_implementation: command 'cmd.t0' (model op m0 -> stage 0 (decode) -> task @t0 -> candidate generic) has no legal implementation ('generic')" in e.message
    assert isinstance(e.op, cplan.CommandOp) and e.location == ("p.mlir", 4, 3)
    assert e.diagnostic().startswith("p.mlir:4:3: error: cplan-verify failed:")


def test_pipeplan_opt_prints_location_not_module(tmp_path):
    """AB-S-3: ``pipeplan-opt file.mlir`` (no pass) exits 1 with ``file:line:col: error: [AB-S-3] ...`` and the
    command's one line, never the module."""
    f = tmp_path / "bad.mlir"
    f.write_text(_SMALL_CPLAN)
    r = subprocess.run([sys.executable, "-m", "pipeplan.tools.opt", str(f)], capture_output=True, text=True,
                       cwd=Path(__file__).resolve().parents[2])
    assert r.returncode == 1 and r.stdout == ""
    lines = r.stderr.strip().split("\n")
    assert lines[0].startswith(f"{f}:4:3: error: [AB-S-3] every command needs a legal implementation and "
                               f"placement (no_implementation): command 'cmd.t0' (model op m0 -> stage 0 (decode) -> task @t0 -> candidate generic)"), r.stderr
    assert lines[1].startswith('  %t0 = cplan.command "cmd.t0"') and len(lines) == 2
