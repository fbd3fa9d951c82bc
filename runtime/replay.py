"""Run a replay package: the vmachine program's stage programs on the stage runtime (seeds/003 "Machine
lowering and artifact emission"; issue 6 item 6, issue 13 item 5).

What runs is what was compiled (:mod:`pipeplan.runtime.compiled`, whose names this module re-exports: packages,
:func:`stage_programs`, :func:`compiled_stages`, :func:`compile_for_run`): every backend's stage worker binds
the package's stage programs (``programs=``) on its :class:`~pipeplan.runtime.program.StageExecutor`.
:func:`package_provisions` re-derives the stages' provisions of a package for a model file.

Measured timeline: the stages record the instructions they execute (:mod:`pipeplan.runtime.trace`) on any
backend; :func:`measured_timeline` maps the records to the program's instructions, keyed by (step, iteration,
command) and carrying the instruction id (AB-D-2). :func:`replay_package` is that run on the inproc backend with
the reference kernels (greedy): what ``pipeplan replay --backend direct --timeline`` does, and what
``pipeplan calibrate --target reference`` measures.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeplan.analysis.timeline import TimelineBundle
from pipeplan.dialects.runplan_build import project_provisions
from pipeplan.dialects.vmachine import EdgeOp, ProgramOp, RecvOp, SampleOp, SendOp, abi_of
from pipeplan.errors import PipeplanError
from pipeplan.frontend.gguf_facts import read_model_facts
from pipeplan.frontend.planner import plan_run
from pipeplan.frontend.pool import physical_memory_bytes
from pipeplan.plan_types import NodePool, NodeSpec, RuntimeConfig
from pipeplan.runtime.compiled import (
    STAGES_CACHE_FORMAT,
    CompiledRun,
    Package,
    ReplayError,
    StepProgram,
    compile_for_run,
    compiled_stages,
    load_compiled_stages,
    load_compiled_stages_fast,
    load_package,
    load_stage_programs,
    local_pool_with_peaks,
    stage_programs,
    stages_cache_path,
    tmachine_stages,
)
from pipeplan.runtime.trace import timeline_from_records
from pipeplan.transforms.convert_cplan_to_vmachine import abi_from_facts


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


__all__ = ["STAGES_CACHE_FORMAT", "CompiledRun", "Package", "ReplayError", "ReplayResult", "StepProgram",
           "compile_for_run", "compiled_stages", "load_compiled_stages",
           "load_compiled_stages_fast", "load_package", "load_stage_programs", "local_pool_with_peaks",
           "measured_timeline", "package_digests", "package_provisions", "replay_package", "stage_programs",
           "stages_cache_path", "tmachine_stages"]
