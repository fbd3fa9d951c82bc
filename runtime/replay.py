"""Run a replay package: the vmachine program's stage programs on the stage runtime (seeds/003 "Machine
lowering and artifact emission"; issue 6 item 6, issue 13 item 5).

What runs is what was compiled: for every stage and step, :func:`stage_programs` turns the step's
instructions, in :func:`~pipeplan.dialects.vmachine.linearize` order, into the runtime's
:class:`~pipeplan.runtime.program.KernelCall` list (buffer ids -> the binding names of the
``vmachine.buffer`` table, static attributes from the instruction); every backend's stage worker binds
exactly that list (:func:`compiled_stages`, ``programs=``) on its :class:`~pipeplan.runtime.program.StageExecutor`.
The steps of a stage share its weights and KV cache.

Measured timeline: the stages record the instructions they execute (:mod:`pipeplan.runtime.trace`) on any
backend; :func:`measured_timeline` maps the records to the program's instructions, keyed by (step, iteration,
command) and carrying the instruction id (AB-D-2). :func:`replay_package` is that run on the inproc backend with
the reference kernels (greedy): what ``pipeplan replay --backend direct --timeline`` does, and what
``pipeplan calibrate --target reference`` measures.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeplan.analysis.timeline import TimelineBundle
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
from pipeplan.dialects.runplan_build import project_provisions
from pipeplan.dialects.vmachine import (
    ENGINE_REVISION,
    BufferOp,
    EdgeOp,
    KernelOp,
    ProgramOp,
    QueueOp,
    RecvOp,
    SampleOp,
    SendOp,
    SignalOp,
    StageOp,
    StepOp,
    WaitOp,
    abi_of,
    attr_value,
    linearize,
    strs,
)
from pipeplan.errors import PipeplanError
from pipeplan.frontend.gguf_facts import read_model_facts
from pipeplan.frontend.planner import plan_run
from pipeplan.frontend.pool import local_peaks, local_pool, physical_memory_bytes, pool_toml
from pipeplan.models.stage_program import KernelCall
from pipeplan.plan_types import NodePool, NodeSpec, RuntimeConfig
from pipeplan.runtime.tmachine_run import TMachineStageProgram, shared_device, tmachine_stage_programs
from pipeplan.runtime.trace import timeline_from_records
from pipeplan.transforms.convert_cplan_to_vmachine import abi_from_facts

if TYPE_CHECKING:
    from pipeplan.runtime.stage import StageProgram


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
                raise ReplayError(f"stage {s} step '{step.name_.data}': kernel instructions are interleaved with "
                                  f"transfers; the stage executor runs one contiguous kernel program",
                                  code="unsupported_program")
            calls = tuple(KernelCall(o.kernel.data, tuple(bufs.get(x, x) for x in strs(o.ins)),
                                     tuple(bufs[x] for x in strs(o.outs)),
                                     {k: attr_value(v) for k, v in o.attrs.data.items()},
                                     None if o.block.value.data < 0 else o.block.value.data)
                          for o in order if isinstance(o, KernelOp))
            mine = {b.name_.data: b.id.data for b in program.body.block.ops
                    if isinstance(b, BufferOp) and b.stage.value.data == s and b.step.data == step.name_.data}
            out.setdefault(s, {})[step.name_.data] = StepProgram(
                s, step.name_.data, st.device.data, step.rows.value.data, tuple(order), calls, engine_of,
                mine.get("input", ""), mine.get("output", ""), tuple(o for o in order if isinstance(o, KernelOp)))
    return out


def load_stage_programs(pkg_dir: str | Path) -> dict[int, dict[str, list[KernelCall]]]:
    """stage -> step -> the KernelCall list a StageExecutor must run (for a runtime that builds its
    own workers: pass ``program=`` these calls instead of ``build_stage_program``)."""
    pkg = load_package(pkg_dir)
    return {s: {k: list(v.calls) for k, v in steps.items()} for s, steps in stage_programs(pkg.program).items()}


def compiled_stages(pkg: Package) -> dict[int, StageProgram]:
    """stage -> the :class:`~pipeplan.runtime.stage.StageProgram` (per-step KernelCall lists and the
    steps' rows) of a loaded package: what a backend's stage workers bind (``programs=``)."""
    from pipeplan.runtime.stage import StageProgram

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
    another target), ``invalid_runtime_config`` (two stages on one device: a stage runs its device's
    streams); PipeplanError(``tmachine:parse``) for a program that does not parse or verify."""
    if TMACHINE_FILE not in pkg.manifest.get("files", {}):
        target = pkg.manifest.get("target", {}).get("name", "?")
        raise ReplayError(f"{pkg.path}: the package was compiled for target '{target}' and holds no tmachine program "
                          f"(--target cuda replays {TMACHINE_FILE}: compile with --target cuda-triton)",
                          code="unsupported_program", where=TMACHINE_FILE)
    path = pkg.path / TMACHINE_FILE
    text = path.read_text(encoding="utf-8")
    devices = {int(st["stage"]): str(st["device"]) for st in pkg.manifest.get("deployment", {}).get("stages", [])}
    shared = shared_device(devices)
    if shared is not None:
        _, s, d = shared
        raise ReplayError(f"{pkg.path}: --target cuda runs each stage as the tmachine streams of its device, but "
                          f"stage {s} shares device {d}", code="invalid_runtime_config", where=f"stage {s}")
    rows = {step.name_.data: step.rows.value.data for st in pkg.program.body.block.ops if isinstance(st, StageOp)
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
    from pipeplan.runtime.stage import StageProgram

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
    import os
    import tempfile

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


def package_provisions(pkg: Package, model_path: str | Path) -> list:
    """The ProvisionStage of every stage of ``pkg`` for running it on a backend with ``model_path``.

    The package records its deployment (stage -> device id and layer range) and the plan's
    ``max_seq_len``; the RunPlan is re-derived by the planner (the only source of stage/edge assignment,
    RP-AR-7) on a pool of those device ids (this host's memory each) with that placement, and must give
    the package's layer ranges.

    Raises: ReplayError ``model_mismatch`` (the GGUF is not the package's model) or ``package_mismatch``
    (the planner assigns other layer ranges than the package's), RunPlanRejection from the planner.
    """
    abi = abi_of(pkg.program)
    facts = read_model_facts(str(model_path))
    _check_model(abi, facts)
    stages = sorted(pkg.manifest.get("deployment", {}).get("stages", []), key=lambda st: st["stage"])
    if not stages:
        raise ReplayError(f"{pkg.path}: the manifest lists no deployment stages", code="package_mismatch")
    devices = [st["device"] for st in stages]
    mem = physical_memory_bytes()
    pool = NodePool(tuple(NodeSpec(d, mem) for d in dict.fromkeys(devices)))
    module = plan_run(facts, RuntimeConfig(max_seq_len=int(abi["max_seq_len"])), pool, len(stages), devices)
    provisions = project_provisions(module)
    got = [(p.layer_start, p.layer_end) for p in provisions]
    want = [(st["layer_start"], st["layer_end"]) for st in stages]
    if got != want:
        raise ReplayError(f"{pkg.path}: the package's stages cover layer ranges {want} but the planner assigns {got} "
                          f"on devices {devices}", code="package_mismatch", where="deployment")
    return provisions


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
    import hashlib
    import os
    import shutil

    from pipeplan.runtime.weights_source import (
        CacheError,
        cache_root,
        cache_source,
        cache_write_error,
        staged_with_pool,
    )

    if target.startswith("cuda-triton"):
        from pipeplan.runtime.tmachine_run import compile_tmachine_for_run

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


@dataclass
class ReplayResult:
    """Outcome of a replay: generated ids (EOS excluded), prompt ids, text, the measured timeline,
    and the executed instructions in order as ``(step, iteration, instruction id)``."""

    token_ids: list[int]
    prompt_ids: list[int]
    text: str
    timeline: Any
    order: list[tuple[str, int, str]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds and rates with the keys of :class:`~pipeplan.runtime.orchestrator.RunResult` (``load_s``: package
    verified and parsed, weights loaded, executors bound)."""


def _check_model(abi: Mapping[str, Any], facts) -> None:
    try:
        got = abi_from_facts(facts, abi["max_seq_len"])
    except PipeplanError as e:
        raise ReplayError(f"the model is not a model this package can run: {e.one_line()}",
                          code="model_mismatch") from None
    diff = [k for k in list(abi) + [k for k in got if k not in abi] if got.get(k) != abi.get(k)]
    if diff:
        k = diff[0]
        raise ReplayError(f"model {facts.name} does not match the package's model ABI: {k} is {got.get(k)}, the package "
                          f"was compiled for {abi.get(k)}", code="model_mismatch", where=k)


def replay_package(pkg_dir: str | Path, model_path: str | Path, prompt: str | Sequence[int], max_tokens: int = 16, *,
                   num_threads: int | None = 1, verify: bool = True, program: ProgramOp | None = None,
                   on_token: Callable[[int, str], None] | None = None) -> ReplayResult:
    """Replay a package on ``model_path``: its stage programs on the stage runtime (inproc backend, reference
    kernels, greedy), every stage recording the instructions it executes (:mod:`pipeplan.runtime.trace`), as
    ``pipeplan replay --backend direct --timeline`` does.

    Args:
        pkg_dir: package directory. model_path: the GGUF (its weights, tokenizer and ABI check).
        prompt: text (tokenized with BOS by the GGUF's vocabulary) or token ids.
        max_tokens: tokens to generate (>= 1). num_threads: kernel threads per stage (None: the backend's default).
        verify: check the package digests first. program: run this program op instead of the
            package's ``program.mlir`` (tests: a stripped or modified program).
        on_token: called as ``on_token(token_id, text_piece)`` with each generated token as it arrives
            (:class:`~pipeplan.runtime.token_stream.PieceDecoder`).
    Returns: ReplayResult with the measured TimelineBundle (:func:`measured_timeline`; digests from the
        manifest), ``order`` (the executed instructions, stage by stage, as ``(step, iteration, id)``) and timings.
    Raises: ReplayError (``model_mismatch``, ``invalid_request``, ``unsupported_program``), PackageError,
        MachineVerifyError, StageFault, loader/tokenizer errors (all typed); LimitError(invalid_request) for
        ``num_threads`` outside ``[1, 4 x cores]``.
    """
    import dataclasses
    import shutil
    import tempfile

    from pipeplan.runtime.backends import InprocBackend
    from pipeplan.runtime.limits import check_thread_count
    from pipeplan.runtime.orchestrator import Pipeline
    from pipeplan.runtime.token_stream import PieceDecoder
    from pipeplan.runtime.tokenizer import SPMTokenizer
    from pipeplan.runtime.trace import read_traces

    if num_threads is not None:
        check_thread_count(num_threads, "num_threads")
    pkg = load_package(pkg_dir, verify=verify)
    if program is not None:
        pkg = dataclasses.replace(pkg, program=program)
    L = int(abi_of(pkg.program)["max_seq_len"])
    provisions = package_provisions(pkg, model_path)  # ReplayError(model_mismatch) first
    tok = SPMTokenizer.from_gguf(model_path)
    prompt_ids = tok.encode(prompt) if isinstance(prompt, str) else [int(x) for x in prompt]
    if not prompt_ids:
        raise ReplayError("empty prompt", code="invalid_request")
    if max_tokens < 1:
        raise ReplayError(f"max_tokens must be >= 1, got {max_tokens}", code="invalid_request")
    if len(prompt_ids) + max_tokens - 1 > L:
        raise ReplayError(f"prompt ({len(prompt_ids)}) + generated ({max_tokens}) positions exceed the package's "
                          f"max_seq_len {L}", code="invalid_request")
    trace_dir = tempfile.mkdtemp(prefix="pipeplan-replay-")
    try:
        programs = {st: dataclasses.replace(sp, trace=trace_dir) for st, sp in compiled_stages(pkg).items()}
        stream = None if on_token is None else PieceDecoder(tok, on_token)
        with Pipeline(provisions, backend=InprocBackend(), num_threads=num_threads, programs=programs) as pipe:
            out_ids, timings = pipe.generate_ids(prompt_ids, max_tokens, eos_id=tok.eos_id, on_token=stream)
            load_s = pipe.load_s
        timeline = measured_timeline(pkg, read_traces(trace_dir, len(programs)),
                                     {"source": "pipeplan.runtime.replay", "prompt_tokens": len(prompt_ids),
                                      "generated": len(out_ids), "threads": num_threads})
    finally:
        shutil.rmtree(trace_dir, ignore_errors=True)
    timings = {"load_s": load_s, **timings}
    order = [(e.step, e.iteration, e.instruction) for e in timeline.events]
    return ReplayResult(out_ids, prompt_ids, tok.decode(out_ids), timeline, order, timings)


def package_digests(pkg: Package) -> dict[str, str]:
    """The digests a measured timeline of ``pkg`` carries: the manifest's, plus the evidence fingerprint and
    policy (what ``pipeplan compare`` checks against the prediction)."""
    digests = dict(pkg.manifest.get("digests", {}))
    digests.update({k: pkg.manifest.get("evidence", {}).get(k2, "") for k, k2 in (("evidence", "fingerprint"),
                                                                                    ("policy", "policy"))})
    return digests


def measured_timeline(pkg: Package, traces: Mapping[int, Sequence[Mapping[str, Any]]],
                      meta: Mapping[str, Any] | None = None) -> TimelineBundle:
    """The measured TimelineBundle of a run of ``pkg``'s stage programs from the stages' instruction records
    (:mod:`pipeplan.runtime.trace`, written on any backend): a ``kernel`` record is the step's kernel
    instruction of its ``call`` index, ``recv``/``argmax``/``send`` the step's recv/sample/send instruction;
    events carry the command, queue, edge link and lineage of the program (the keys of the prediction)."""
    programs = stage_programs(pkg.program, pkg.lineage)
    edges = {o.id.data: o for o in pkg.program.body.block.ops if isinstance(o, EdgeOp)}
    lineage = pkg.lineage or {}
    table: dict[tuple[int, str], dict[Any, tuple[str, str, str, str, str, str]]] = {}
    for s, steps in programs.items():
        for name, sp in steps.items():
            row: dict[Any, tuple[str, str, str, str, str, str]] = {}
            for j, k in enumerate(sp.kernels):
                iid = k.id.data
                row[j] = (iid, k.cmd.data, sp.device, sp.engine_of[iid], "", lineage.get(iid, ""))
            for o in sp.order:
                kind = ("recv" if isinstance(o, RecvOp) else "send" if isinstance(o, SendOp)
                        else "argmax" if isinstance(o, SampleOp) else None)
                if kind is not None and kind not in row:
                    iid = o.id.data
                    link = edges[o.edge.data].link.data if isinstance(o, SendOp) else ""
                    row[kind] = (iid, o.cmd.data, sp.device, sp.engine_of[iid], link, lineage.get(iid, ""))
            table[(s, name)] = row

    def info(stage: int, ev: Mapping[str, Any]) -> tuple[str, str, str, str, str, str] | None:
        row = table.get((stage, ev["step"]), {})
        return row.get(int(ev["call"]) if ev["op"] == "kernel" else ev["op"])

    return timeline_from_records(traces, info, package_digests(pkg),
                                 {"source": "pipeplan.runtime.trace",
                                  "package": pkg.manifest.get("digests", {}).get("machine"), **dict(meta or {})})


__all__ = ["CompiledRun", "Package", "ReplayError", "ReplayResult", "StepProgram", "compile_for_run",
           "compiled_stages", "load_compiled_stages", "load_compiled_stages_fast", "load_package", "load_stage_programs", "local_pool_with_peaks", "measured_timeline", "package_digests", "package_provisions",
           "replay_package", "stage_programs"]
