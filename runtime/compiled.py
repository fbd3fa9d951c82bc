"""What runs is what was compiled: the machine program of a plan, compiled (or found in the package cache) and
turned into the stage programs every backend's stage workers bind (issue 13 item 5; seeds/003 "Machine lowering
and artifact emission").

For every stage and step, :func:`stage_programs` turns the step's instructions of the package's
``vmachine.program``, in :func:`~pipeplan.dialects.vmachine.linearize` order, into the runtime's
:class:`~pipeplan.runtime.program.KernelCall` list (buffer ids -> the binding names of the ``vmachine.buffer``
table, static attributes from the instruction); :func:`compiled_stages` makes them the
:class:`~pipeplan.runtime.stage.StageProgram` s a stage worker binds on its
:class:`~pipeplan.runtime.program.StageExecutor` (``programs=``). The steps of a stage share its weights and KV
cache.

Two ways in, one compile path (:func:`compile_for_run`: the RunPlan -> a replay package in the package cache
-> its stage programs):

* ``pipeplan run`` / ``serve`` / ``calibrate`` plan a run and compile that RunPlan;
* a library :class:`~pipeplan.runtime.orchestrator.Pipeline` given only the stages' provisions compiles the
  RunPlan those provisions state (:func:`compile_provisions`: :func:`provisions_plan` rebuilds it from the
  provisions and the model's facts, :func:`provisions_facts`).

No stage builds a program of its own: a stage worker without a compiled program is a ``bind`` fault.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeplan.api import parse_module, register_pipeplan
from pipeplan.compiler.replay_package import (
    PACKAGE_FORMAT,
    TMACHINE_FILE,
    PackageError,
    compile_plan_to_package,
    print_module,
    sha256_hex,
    verify_package,
)
from pipeplan.dialects.runplan import verify_runplan
from pipeplan.dialects.runplan_build import build_runplan_module
from pipeplan.dialects.triton_machine import REVISION as TMACHINE_REVISION
from pipeplan.dialects.vmachine import (
    ENGINE_REVISION,
    BufferOp,
    KernelOp,
    ProgramOp,
    QueueOp,
    SignalOp,
    StageOp,
    StepOp,
    WaitOp,
    attr_value,
    linearize,
    strs,
)
from pipeplan.errors import GGUFError, PipeplanError
from pipeplan.frontend.gguf_facts import read_model_facts
from pipeplan.frontend.planner import plan_edges, plan_run_spec
from pipeplan.frontend.pool import local_peaks, local_pool, physical_memory_bytes, pool_toml
from pipeplan.models.stage_program import KernelCall
from pipeplan.plan_types import (
    ModelFacts,
    NodePool,
    NodeSpec,
    ProvisionStage,
    RunPlanSpec,
    RuntimeConfig,
    StagePlan,
    WeightSource,
)
from pipeplan.runtime.stage import StageProgram
from pipeplan.runtime.tmachine_run import (
    TMachineStageProgram,
    compile_tmachine_for_run,
    shared_device,
    tmachine_stage_programs,
)
from pipeplan.runtime.weights_source import (
    CacheError,
    cache_root,
    cache_source,
    cache_write_error,
    local_weight_files,
    staged_with_pool,
)

DEFAULT_PREFILL_ROWS = 64
"""Rows of the compiled prefill step when none are asked for (``pipeplan run --prefill-rows``, a library
:class:`~pipeplan.runtime.orchestrator.Pipeline` without ``prefill_rows``); at most ``max_seq_len - 1``."""


class ReplayError(PipeplanError):
    """A package the runtime cannot replay: ``code`` ``model_mismatch`` (the GGUF is not the model
    the package was compiled for), ``invalid_request`` (empty prompt, positions past max_seq_len,
    max_tokens < 1), ``unsupported_program`` (a stage step whose kernels are not one contiguous run).
    (An object larger than its edge allocation is the transport's ``object_too_large``, a stage fault.)"""

    code = "replay"


@dataclass(frozen=True)
class StepProgram:
    """One stage step: ``order`` (instructions in execution order), ``calls`` (the KernelCall list the
    executor runs), ``rows`` (most tokens per instance)."""

    stage: int
    step: str
    device: str
    rows: int
    order: tuple[Any, ...]
    calls: tuple[KernelCall, ...]
    engine_of: Mapping[str, str]
    input_buffer: str = ""
    output_buffer: str = ""
    kernels: tuple[Any, ...] = ()


@dataclass
class Package:
    """A loaded package: manifest, the program op, the (optional) lineage map, and its directory."""

    path: Path
    manifest: dict[str, Any]
    program: ProgramOp
    lineage: dict[str, str] | None


def load_package(pkg_dir: str | Path, *, verify: bool = True) -> Package:
    """Read a package (checking its digests unless ``verify=False``) and parse ``program.mlir``.

    Raises PackageError (bad digests, unreadable), ReplayError(unsupported_program) when the module
    holds no single vmachine.program.
    """
    from xdsl.context import Context

    d = Path(pkg_dir)
    if verify:
        manifest = verify_package(d)
    else:
        manifest = json.loads((d / "manifest.json").read_text())
    try:
        module = parse_module(register_pipeplan(Context()), (d / "program.mlir").read_text(), str(d / "program.mlir"))
    except Exception as e:  # parse or verify error of a tampered/unsupported file
        raise PackageError(f"{d}/program.mlir: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
                           where="program.mlir") from None
    progs = [o for o in module.ops if isinstance(o, ProgramOp)]
    if len(progs) != 1:
        raise ReplayError(f"{d}/program.mlir holds {len(progs)} vmachine.program ops, expected 1",
                          code="unsupported_program")
    lineage = None
    lp = d / "lineage.json"
    if lp.exists():
        lineage = dict(json.loads(lp.read_text()).get("instructions", {}))
    prog = progs[0]
    prog.detach()
    return Package(d, manifest, prog, lineage)


def stage_programs(program: ProgramOp, lineage: Mapping[str, str] | None = None) -> dict[int, dict[str, StepProgram]]:
    """The per-stage, per-step programs of ``program`` (module docstring).

    Raises MachineVerifyError (deadlocked queues), ReplayError(unsupported_program) when a step's
    kernel instructions are interleaved with a send/recv/sample.
    """
    bufs = {o.id.data: o.name_.data for o in program.body.block.ops if isinstance(o, BufferOp)}
    out: dict[int, dict[str, StepProgram]] = {}
    for st in program.body.block.ops:
        if not isinstance(st, StageOp):
            continue
        s = st.index.value.data
        for step in st.body.block.ops:
            assert isinstance(step, StepOp)
            engine_of = {}
            for q in step.body.block.ops:
                if not isinstance(q, QueueOp):
                    continue  # vmachine.token
                for o in q.body.block.ops:
                    engine_of[o.id.data] = q.engine.data  # type: ignore[attr-defined]
            order = linearize(step, lineage)
            kinds = [o for o in order if not isinstance(o, SignalOp | WaitOp)]
            ks = [i for i, o in enumerate(kinds) if isinstance(o, KernelOp)]
            if ks and ks != list(range(ks[0], ks[-1] + 1)):
                raise ReplayError(f"stage {s} step '{step.step_name}': kernel instructions are interleaved with "
                                  f"transfers; the stage executor runs one contiguous kernel program",
                                  code="unsupported_program")
            calls = tuple(KernelCall(o.kernel.data, tuple(bufs.get(x, x) for x in strs(o.ins)),
                                     tuple(bufs[x] for x in strs(o.outs)),
                                     {k: attr_value(v) for k, v in o.attrs.data.items()},
                                     None if o.block.value.data < 0 else o.block.value.data)
                          for o in order if isinstance(o, KernelOp))
            mine = {b.name_.data: b.id.data for b in program.body.block.ops
                    if isinstance(b, BufferOp) and b.stage.value.data == s and b.step_name == step.step_name}
            out.setdefault(s, {})[step.step_name] = StepProgram(
                s, step.step_name, st.device.data, step.rows.value.data, tuple(order), calls, engine_of,
                mine.get("input", ""), mine.get("output", ""), tuple(o for o in order if isinstance(o, KernelOp)))
    return out


def load_stage_programs(pkg_dir: str | Path) -> dict[int, dict[str, list[KernelCall]]]:
    """stage -> step -> the KernelCall list a StageExecutor must run (for a runtime that makes its own
    executors: pass these calls as their ``program``)."""
    pkg = load_package(pkg_dir)
    return {s: {k: list(v.calls) for k, v in steps.items()} for s, steps in stage_programs(pkg.program).items()}


def compiled_stages(pkg: Package) -> dict[int, StageProgram]:
    """stage -> the :class:`~pipeplan.runtime.stage.StageProgram` (per-step KernelCall lists and the
    steps' rows) of a loaded package: what a backend's stage workers bind (``programs=``)."""
    digest = pkg.manifest.get("digests", {}).get("machine", "")
    out: dict[int, StageProgram] = {}
    for s, steps in stage_programs(pkg.program, pkg.lineage).items():
        out[s] = StageProgram({k: tuple(v.calls) for k, v in steps.items()}, {k: int(v.rows) for k, v in steps.items()},
                              f"{digest} stage {s}")
    return out


def load_compiled_stages(pkg_dir: str | Path, *, verify: bool = True) -> dict[int, StageProgram]:
    """:func:`compiled_stages` of the package in ``pkg_dir`` (digests checked unless ``verify=False``).
    Raises PackageError / ReplayError like :func:`load_package`."""
    return compiled_stages(load_package(pkg_dir, verify=verify))


def tmachine_stages(pkg: Package, trace: str | None = None) -> dict[int, TMachineStageProgram]:
    """stage -> the :class:`~pipeplan.runtime.tmachine_run.TMachineStageProgram` of a ``cuda-triton`` package
    (its ``tmachine.mlir``, the streams of the stage's device; rows of the vmachine program's steps): what
    ``pipeplan replay --target cuda`` binds, so every stage runs the lowered tmachine program through the
    tmachine interpreter. ``trace`` None: ``$PIPEPLAN_TMACHINE_TRACE``.

    Raises ReplayError ``unsupported_program`` (the package holds no tmachine program: compiled for
    another target; or one of another tmachine revision than this runtime's, its manifest says), ``invalid_runtime_config`` (two stages on one device: a stage runs its device's
    streams); PipeplanError(``tmachine:parse``) for a program that does not parse or verify."""
    if TMACHINE_FILE not in pkg.manifest.get("files", {}):
        target = pkg.manifest.get("target", {}).get("name", "?")
        raise ReplayError(f"{pkg.path}: the package was compiled for target '{target}' and holds no tmachine program "
                          f"(--target cuda replays {TMACHINE_FILE}: compile with --target cuda-triton)",
                          code="unsupported_program", where=TMACHINE_FILE)
    got = pkg.manifest.get("tmachine", {}).get("revision")
    if got != TMACHINE_REVISION:
        raise ReplayError(f"{pkg.path}: its tmachine program is revision '{got or 'unstated'}', this runtime runs "
                          f"'{TMACHINE_REVISION}' (recompile the package with --target cuda-triton)",
                          code="unsupported_program", where=TMACHINE_FILE)
    path = pkg.path / TMACHINE_FILE
    text = path.read_text(encoding="utf-8")
    devices = {int(st["stage"]): str(st["device"]) for st in pkg.manifest.get("deployment", {}).get("stages", [])}
    shared = shared_device(devices)
    if shared is not None:
        _, s, d = shared
        raise ReplayError(f"{pkg.path}: --target cuda runs each stage as the tmachine streams of its device, but "
                          f"stage {s} shares device {d}", code="invalid_runtime_config", where=f"stage {s}")
    rows = {step.step_name: step.rows.value.data for st in pkg.program.body.block.ops if isinstance(st, StageOp)
            for step in st.body.block.ops if isinstance(step, StepOp)}
    out = tmachine_stage_programs(text, devices, rows, path, trace)
    if out:
        out[min(out)].parse()  # a tampered file fails here, not in every stage
    return out


STAGES_CACHE_FORMAT = "pipeplan-stage-programs/1"
"""Format of the pre-parsed stage programs kept beside a cached package (:func:`load_compiled_stages_fast`)."""


def stages_cache_path(pkg_dir: str | Path) -> Path:
    """Where :func:`load_compiled_stages_fast` keeps the pre-parsed stage programs of ``pkg_dir``:
    ``<pkg_dir>.stages.json``, beside the package (the package's own files are untouched)."""
    d = Path(pkg_dir)
    return d.with_name(d.name + ".stages.json")


def _package_identity(d: Path, manifest: Mapping[str, Any]) -> dict[str, str]:
    lp = d / "lineage.json"
    return {"machine": str(manifest.get("digests", {}).get("machine", "")),
            "lineage": sha256_hex(lp.read_bytes()) if lp.exists() else ""}


def _stages_doc(programs: Mapping[int, StageProgram], identity: Mapping[str, str]) -> dict[str, Any]:
    body = {str(s): {"source": p.source, "rows": dict(p.rows),
                     "steps": {k: [[c.kernel, list(c.inputs), list(c.outputs), dict(c.attrs), c.block] for c in calls]
                               for k, calls in p.steps.items()}}
            for s, p in sorted(programs.items())}
    text = json.dumps(body, sort_keys=True, allow_nan=False)
    return {"format": STAGES_CACHE_FORMAT, **identity, "sha256": sha256_hex(text.encode()), "stages": body}


def _stages_from_doc(doc: Mapping[str, Any], identity: Mapping[str, str]) -> dict[int, StageProgram] | None:
    if doc.get("format") != STAGES_CACHE_FORMAT or any(doc.get(k) != v for k, v in identity.items()):
        return None
    body = doc["stages"]
    if sha256_hex(json.dumps(body, sort_keys=True, allow_nan=False).encode()) != doc.get("sha256"):
        return None
    return {int(s): StageProgram({k: tuple(KernelCall(c[0], tuple(c[1]), tuple(c[2]), c[3], c[4]) for c in calls)
                                  for k, calls in p["steps"].items()},
                                 {k: int(v) for k, v in p["rows"].items()}, str(p["source"]))
            for s, p in body.items()}


def load_compiled_stages_fast(pkg_dir: str | Path) -> dict[int, StageProgram]:
    """:func:`load_compiled_stages` (digests always checked) without parsing ``program.mlir`` again.

    The stage programs parsed once are kept in :func:`stages_cache_path` as JSON, keyed by the package's
    machine digest (the sha256 of ``program.mlir``, checked by ``verify_package``) and the sha256 of its
    ``lineage.json``, with a sha256 over the programs themselves: they are used only when all three match,
    else the package is parsed and the file rewritten (atomically; an unwritable cache only costs the
    parse). Raises PackageError / ReplayError like :func:`load_package`."""
    d = Path(pkg_dir)
    identity = _package_identity(d, verify_package(d))
    cache = stages_cache_path(d)
    try:
        got = _stages_from_doc(json.loads(cache.read_text()), identity)
        if got is not None:
            return got
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        pass
    programs = compiled_stages(load_package(d, verify=False))
    try:
        text = json.dumps(_stages_doc(programs, identity), allow_nan=False)
        fd, tmp = tempfile.mkstemp(prefix=f".{cache.name}.", dir=cache.parent)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.replace(tmp, cache)
        except BaseException:
            os.unlink(tmp)
            raise
    except (OSError, ValueError, TypeError):  # read-only cache, a non-finite attribute: parse next time too
        pass
    return programs


def local_pool_with_peaks(n: int, memory_bytes: int | None = None):
    """``(NodePool, TOML text)`` of ``n`` local nodes ``local0..`` (:func:`pipeplan.frontend.pool.local_pool`:
    the host's physical memory each) stating this machine's peaks (:func:`pipeplan.frontend.pool.local_peaks`:
    ``$PIPEPLAN_LOCAL_PEAKS``, else the cached numpy probe): the explicit DeploymentBinding input of a run
    without ``--nodes`` (AB-G-4: the binding is a written input, never a hidden default inside the passes).
    The peaks only feed the roofline costs of the predicted timeline and the list scheduler's priorities;
    the tokens do not depend on them. Raises RunPlanRejection(invalid_pool) like ``local_pool``."""
    pool = local_pool(n, memory_bytes, peaks=local_peaks())
    return pool, pool_toml(pool)


@dataclass(frozen=True)
class CompiledRun:
    """A package prepared for a run: its directory, the stage programs, whether it came from the cache,
    and the seconds spent compiling (0 on a cache hit) and loading it."""

    package: Path
    programs: dict[int, StageProgram | TMachineStageProgram]
    cached: bool
    compile_s: float
    load_s: float


def compile_for_run(plan_module, pool_text: str, *, cache_dir: str | Path | None = None,
                    target: str = "virtual-queue", evidence: Sequence[str] = ("roofline",), prompt_len: int = 8,
                    binder: str = "list-schedule", model: str | Path | None = None) -> CompiledRun:
    """Compile a RunPlan into a replay package (or reuse the cached one) and load its stage programs.

    Target ``cuda-triton`` (``--target cuda``) compiles the plan down to its ``tmachine.program`` instead
    (:func:`pipeplan.runtime.tmachine_run.compile_tmachine_for_run`, which needs ``model``, the GGUF giving the
    kernel ABI; ``binder`` is then reference-queue): the programs are
    :class:`~pipeplan.runtime.tmachine_run.TMachineStageProgram` s, which the stages run with the tmachine
    interpreter, and ``package`` is the cached program file.

    The package lives in ``<cache_dir>/packages/<key>`` where ``key`` is the sha256 of everything the
    package is a pure function of: the printed plan, the pool TOML text, target, evidence, prompt_len,
    binder and the package/engine revisions. A cached package is used only when
    :func:`~pipeplan.compiler.replay_package.verify_package` accepts it (else it is rebuilt). A new one
    is compiled into a private sibling directory and renamed into place (concurrent runs are safe).

    Args:
        plan_module: the RunPlan module (``plan_run``). pool_text: the text of the node-pool TOML the
            plan was made for (the DeploymentBinding input). cache_dir: default ``$PIPEPLAN_CACHE`` / ``~/.cache/pipeplan``.
        target / evidence / prompt_len / binder: as :func:`~pipeplan.compiler.replay_package.compile_plan`.
    Returns: :class:`CompiledRun`.
    Raises: PackageError (the compiler's diagnostic, e.g. ``missing_binding``), ReplayError,
    CacheError(cache_unusable) when the cache directory is a file or cannot be written (read-only, no
    space left): no partial package is left in the cache.
    """

    if target.startswith("cuda-triton"):
        if model is None:
            raise ReplayError("compiling for cuda-triton needs the model file (its kernel ABI)", code="missing_binding",
                              where="model")
        r = compile_tmachine_for_run(plan_module, pool_text, model, cache_dir=cache_dir, evidence=evidence,
                                     prompt_len=prompt_len)
        return CompiledRun(r.package, dict(r.programs), r.cached, r.compile_s, r.load_s)
    t0 = time.perf_counter()
    plan_text = print_module(plan_module)
    tables = [hashlib.sha256(Path(e[len("measured:"):]).read_bytes()).hexdigest() if e.startswith("measured:")
              and Path(e[len("measured:"):]).is_file() else "" for e in evidence]  # a re-measured table recompiles
    key = hashlib.sha256("\0".join([PACKAGE_FORMAT, ENGINE_REVISION, plan_text, pool_text, target, ",".join(evidence),
                                     *tables,
                                     str(prompt_len), binder, "decode_tokens=1"]).encode()).hexdigest()[:24]
    root = cache_root(cache_dir)
    final = root / "packages" / key
    if final.exists():
        try:
            programs = load_compiled_stages_fast(final)
            return CompiledRun(final, programs, True, 0.0, time.perf_counter() - t0)
        except PipeplanError:
            shutil.rmtree(final, ignore_errors=True)
    with staged_with_pool(cache_dir, final, pool_text, "the package") as tmp:
        try:
            pkg = compile_plan_to_package(plan_module, target, tuple(evidence), tmp / "pkg", pool=tmp / "pool.toml",
                                          prompt_len=prompt_len, binder=binder, decode_tokens=1)
        except PackageError as e:
            if e.code in ("write_failed", "bad_output_path"):
                raise CacheError(f"{cache_source(cache_dir)}: cannot write the compiled package: {e.message}",
                                 where=str(root)) from None
            raise
        t1 = time.perf_counter()
        try:
            os.rename(pkg, final)
        except OSError as e:  # another run put the same package in place first: use that one
            if not final.exists():
                raise cache_write_error(cache_dir, f"the package {final}", e) from None
    programs = load_compiled_stages_fast(final)
    return CompiledRun(final, programs, False, t1 - t0, time.perf_counter() - t1)


def provisions_facts(provisions: Sequence[ProvisionStage], model: str | Path | None = None, *,
                     cache_dir: str | Path | None = None) -> tuple[ModelFacts | None, str]:
    """``(facts, "")``: the header facts of the model the provisions run: of ``model`` when given, else of the
    first provision's weight source that is on this host without a download (a local file, or a sha256 found in
    the cache: :func:`~pipeplan.runtime.weights_source.local_weight_files`). ``(None, why)`` when no source is
    (the stages then report their own download / parse faults, or a ``bind`` fault naming ``why``).
    Raises GGUFError for a ``model`` that does not parse (an explicit input)."""
    facts, _, why = provisions_model(provisions, model, cache_dir=cache_dir)
    return facts, why


def provisions_model(provisions: Sequence[ProvisionStage], model: str | Path | None = None, *,
                     cache_dir: str | Path | None = None) -> tuple[ModelFacts | None, Path | None, str]:
    """:func:`provisions_facts` with the local GGUF file they were read from: ``(facts, file, "")`` or
    ``(None, None, why)``. Raises GGUFError for a ``model`` that does not parse."""
    if model is not None:
        return read_model_facts(str(model)), Path(model), ""
    why = "no provision names a weight source"
    for src in dict.fromkeys(p.weights for p in sorted(provisions, key=lambda p: p.stage)):
        files = local_weight_files(src, cache_dir)
        if files is None:
            why = f"the weight source {', '.join(src.uris)} is not on this host (only the stages fetch it)"
            continue
        try:
            return read_model_facts(str(files[0])), Path(files[0]), ""
        except GGUFError as e:
            why = f"the weight source {', '.join(src.uris)} does not parse: {e.one_line()}"
    return None, None, why


def _partition_of(provisions: Sequence[ProvisionStage], block_count: int) -> list[tuple[int, int]] | None:
    """The provisions' layer ranges when they are a plan's: stages 0..n-1, non-empty, contiguous, covering
    ``[0, block_count)``; else None."""
    ps = sorted(provisions, key=lambda p: p.stage)
    ranges = [(p.layer_start, p.layer_end) for p in ps]
    if [p.stage for p in ps] != list(range(len(ps))) or not ranges or ranges[0][0] != 0 \
            or ranges[-1][1] != block_count or any(a >= b for a, b in ranges) \
            or any(x[1] != y[0] for x, y in zip(ranges, ranges[1:])):
        return None
    return ranges


def provisions_plan(provisions: Sequence[ProvisionStage], facts: ModelFacts, *, parallel: int = 1):
    """``(RunPlan module, node-pool TOML text)`` of the run the provisions state, for :func:`compile_for_run`.

    The plan (verified, ``runplan.verify_runplan``): run id, stage nodes and layer ranges of the provisions; the
    smallest ``max_seq_len`` among them; the token/activation dtypes, ring slots and alignment of their edges
    (edges as the planner makes them, :func:`~pipeplan.frontend.planner.plan_edges`); ``parallel`` sequences;
    the first provision's weight source (``facts.files`` when its shard count differs); the model ``facts``.
    Provisions whose ranges are not a plan's (tests of broken provisions: a range past the blocks, overlaps)
    get the planner's ranges for that many stages instead: a stage whose provision then disagrees with its
    program faults on its own checks (``invalid_range``, ``bind``). The binding: every node on this host's
    memory and peaks (:func:`~pipeplan.frontend.pool.local_peaks`), as for ``pipeplan run`` without
    ``--nodes``; the peaks only price the predicted timeline.

    Raises RunPlanRejection when no plan of these stages verifies (e.g. more stages than blocks)."""
    ps = sorted(provisions, key=lambda p: p.stage)
    p0 = ps[0]
    token = p0.inbound.object_spec
    act = next((p.outbound.object_spec for p in ps[:-1]), None)
    config = RuntimeConfig(max_seq_len=min(p.max_seq_len for p in ps), activation_dtype=act.dtype if act else "f32",
                           token_dtype=token.dtype, ring_slots=p0.inbound.ring_spec.slots, alignment=token.alignment,
                           parallel=parallel)
    nodes = list(dict.fromkeys(p.node_id for p in ps))
    rates = local_peaks().node_rates()
    pool = NodePool(tuple(NodeSpec(n, physical_memory_bytes(), **rates) for n in nodes))
    ranges = _partition_of(ps, facts.block_count)
    if ranges is None:
        planned = plan_run_spec(facts, config, pool, len(ps), [p.node_id for p in ps], run_id=p0.run_id)
        ranges = [(st.layer_start, st.layer_end) for st in planned.stages]
    weights = p0.weights if len(p0.weights.uris) == max(1, len(facts.files)) else WeightSource(tuple(facts.files))
    stages = tuple(StagePlan(i, p.node_id, a, b) for i, (p, (a, b)) in enumerate(zip(ps, ranges, strict=True)))
    spec = RunPlanSpec(p0.run_id, facts, config, weights, stages, plan_edges(facts, config, len(ps)))
    module = build_runplan_module(spec, pool)
    verify_runplan(module)
    return module, pool_toml(pool)


def compile_provisions(provisions: Sequence[ProvisionStage], facts: ModelFacts, *,
                       cache_dir: str | Path | None = None, parallel: int = 1, prefill_rows: int | None = None,
                       evidence: Sequence[str] = ("roofline",), target: str = "virtual-queue",
                       model: str | Path | None = None) -> CompiledRun:
    """The compiled stage programs of the run the provisions state: :func:`provisions_plan` compiled by
    :func:`compile_for_run` (``target``: ``virtual-queue`` gives StagePrograms, ``cuda-triton`` the
    TMachineStagePrograms of the lowered tmachine program and needs ``model``; the package cache of
    ``cache_dir``) with a prefill step of ``prefill_rows`` rows (default :data:`DEFAULT_PREFILL_ROWS`), at most
    ``max_seq_len - 1``.

    Raises RunPlanRejection (no plan of these stages; two stages on one node for cuda-triton), PackageError (the
    compiler's diagnostic), ReplayError (cuda-triton without ``model``), CacheError."""
    module, pool_text = provisions_plan(provisions, facts, parallel=parallel)
    L = min(p.max_seq_len for p in provisions)
    rows = max(1, min(DEFAULT_PREFILL_ROWS if prefill_rows is None else prefill_rows, L - 1))
    return compile_for_run(module, pool_text, cache_dir=cache_dir, evidence=tuple(evidence), prompt_len=rows,
                           target=target, model=model)


__all__ = ["DEFAULT_PREFILL_ROWS", "STAGES_CACHE_FORMAT", "CompiledRun", "Package", "ReplayError", "StepProgram",
           "compile_for_run", "compile_provisions", "compiled_stages", "load_compiled_stages",
           "load_compiled_stages_fast", "load_package", "load_stage_programs", "local_pool_with_peaks",
           "provisions_facts", "provisions_model", "provisions_plan", "stage_programs", "stages_cache_path", "tmachine_stages"]
