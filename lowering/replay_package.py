"""Replay package emitter of the virtual target (seeds/003 "Machine lowering and artifact emission",
AB-M-2, AB-M-3, AB-T-4).

:func:`compile_plan_to_package` runs the whole compiler on a RunPlan (``pipeplan plan`` output)::

    convert-runplan-to-pplan{pool, prompt_len} -> pplan-legalize{target} -> pplan-select-implementations
    -> pplan-resolve-costs{evidence} -> convert-pplan-to-cplan{binder, keep_source} -> cplan-verify
    (commit gate) -> cplan-project-timing -> convert-cplan-to-vmachine -> simulate -> package

and writes a directory:

* ``program.mlir`` — the ``vmachine.program`` (a ``builtin.module``), what the runtime replays;
* ``lineage.json`` — detachable: instruction id -> lineage path (model op -> stage/block -> portable
  task -> candidate -> concrete command -> machine instruction) and command id -> instruction id;
* ``predicted.timeline.json`` — the TimelineBundle of the simulation (prefill chunks + K decode
  tokens) with the projection summary, published with concrete/evidence/policy digests;
* ``manifest.json`` — target and deployment identity, portable/concrete/machine digests, plugin and
  engine revisions, runtime requirements (runtime, ABI, kernels, model ABI), evidence fingerprint and
  policy, and the sha256 of every other file.

Every file is a pure function of the inputs (sorted JSON keys, no clocks, no host paths other than
those in the inputs), so a rebuild is byte-identical. :func:`verify_package` recomputes the file
digests (and the machine digest) and raises :class:`PackageError` on any mismatch.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipeplan.errors import PipeplanError

PACKAGE_FORMAT = "pipeplan-replay-package/1"
LINEAGE_FORMAT = "pipeplan-lineage/1"
ANALYSIS_REVISION = "pipeplan-simulate/1"
FILES = ("program.mlir", "lineage.json", "predicted.timeline.json")


class PackageError(PipeplanError):
    """A package that cannot be built or read: ``code`` ``bad_package`` (missing/corrupt file, digest
    mismatch), ``missing_binding`` (no deployment pool), or the compiler's own error code."""

    code = "bad_package"


def sha256_hex(data: bytes) -> str:
    """``sha256:<hex>`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _dumps(doc: Any) -> str:
    return json.dumps(doc, sort_keys=True, indent=1) + "\n"


def print_module(op) -> str:
    """The custom-syntax print of an op (trailing newline)."""
    from xdsl.printer import Printer

    buf = io.StringIO()
    Printer(stream=buf).print_op(op)
    return buf.getvalue() + "\n"


def _parse_plan(plan_module) -> Any:
    from pipeplan.api import parse_module, register_pipeplan
    from xdsl.context import Context
    from xdsl.dialects.builtin import ModuleOp

    if isinstance(plan_module, ModuleOp):
        return plan_module.clone()
    is_path = isinstance(plan_module, Path) or (isinstance(plan_module, str) and "\n" not in plan_module
                                                 and not plan_module.lstrip().startswith(("builtin.", "runplan.", "{", '"')))
    try:
        text = Path(plan_module).read_text() if is_path else str(plan_module)
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise PackageError(f"{plan_module}: cannot read the plan: {why}", code="file_not_found",
                           where=str(plan_module)) from None
    try:
        return parse_module(register_pipeplan(Context()), text)
    except Exception as e:  # xDSL parse/verify errors
        lines = [x.strip() for x in str(e).splitlines() if x.strip() and set(x.strip()) != {"^"}]
        what = f"{lines[0]}: {lines[-1]}" if len(lines) > 1 else (lines[0] if lines else type(e).__name__)
        raise PackageError(f"cannot parse the plan: {what}", code="bad_plan") from None


def compile_plan(plan_module, target: str = "virtual-queue", evidence: Sequence[str] | str | None = None, *,
                 pool: str | Path | None = None, prompt_len: int = 8, binder: str = "list-schedule"):
    """Run the compiler up to the annotated concrete plan (module docstring).

    Returns ``(module, spec)``: the module holding the portable source, bindings, costed view and the
    timing-annotated ``cplan.plan``; the RunPlanSpec. ``evidence`` defaults to ``("roofline",)``.

    ``pool``: the node-pool TOML of the DeploymentBinding; None: the node specs the RunPlan carries
    (``pipeplan plan`` records its pool's specs, peaks included), which are the plan's own explicit binding.

    Raises PackageError(missing_binding) without a pool when the plan names its nodes by id only (AB-G-4:
    never a default); PackageError(file_not_found / bad_plan) for an unreadable or unparsable plan;
    PackageError carrying the failing pass's code and one-line message otherwise.
    """
    from pipeplan.api import register_pipeplan
    from pipeplan.dialects.runplan_build import plan_node_pool, runplan_spec_from_module
    from pipeplan.transforms.convert_pplan_to_cplan import ConvertPplanToCplanPass
    from pipeplan.transforms.convert_runplan_to_pplan import ConvertRunplanToPplanPass
    from pipeplan.transforms.cplan_project_timing import CplanProjectTimingPass
    from pipeplan.transforms.cplan_verify import CplanVerifyPass
    from pipeplan.transforms.pplan_legalize import PplanLegalizePass
    from pipeplan.transforms.pplan_resolve_costs import PplanResolveCostsPass
    from pipeplan.transforms.pplan_select_implementations import PplanSelectImplementationsPass
    from xdsl.context import Context
    from xdsl.passes import PassPipeline
    from xdsl.utils.exceptions import PassFailedException

    if isinstance(evidence, str):
        evidence = tuple(x for x in evidence.split(",") if x)
    evidence = tuple(evidence or ("roofline",))
    module = _parse_plan(plan_module)
    try:
        spec = runplan_spec_from_module(module)
        carried = plan_node_pool(module)
    except PipeplanError as e:
        raise PackageError(f"the input is not a RunPlan: {e.one_line()}", code="bad_plan") from None
    if pool is None and carried is None:
        raise PackageError("missing binding: DeploymentBinding (the plan names its nodes by id only: give the node "
                           "pool TOML the plan was made for: --nodes POOL.toml)", code="missing_binding")
    passes = (ConvertRunplanToPplanPass(prompt_len=prompt_len, pool="" if pool is None else str(pool)),
              PplanLegalizePass(target=target),
              PplanSelectImplementationsPass(), PplanResolveCostsPass(evidence=evidence),
              ConvertPplanToCplanPass(binder=binder, keep_source=True), CplanVerifyPass(require_source=True),
              CplanProjectTimingPass())
    try:
        PassPipeline(passes).apply(register_pipeplan(Context()), module)
    except PassFailedException as e:
        msg, code = _diagnostic(" ".join(str(e).split()))
        raise PackageError(msg, code=code) from None
    return module, spec


_CODE = re.compile(r"error\[([A-Za-z0-9_:.-]+)\]: ")


def _diagnostic(msg: str) -> tuple[str, str]:
    """(message, code) of a pass diagnostic: the first embedded ``error[<code>]: `` gives the code and is
    removed from the message (``pplan-resolve-costs: error[bad_evidence]: x`` -> ``bad_evidence``,
    ``pplan-resolve-costs: x``); none: ``compile_failed`` and the message as it is."""
    m = _CODE.search(msg)
    if m is None:
        return msg, "compile_failed"
    return msg[:m.start()] + msg[m.end():], m.group(1)


def _target_binding(module) -> dict[str, Any]:
    from pipeplan.dialects.bindings import TargetBindingOp
    from xdsl.dialects.builtin import ArrayAttr, StringAttr

    def val(v) -> Any:
        if isinstance(v, StringAttr):
            return v.data
        if isinstance(v, ArrayAttr):
            return [val(x) for x in v.data]
        return str(v)

    for o in module.ops:
        if isinstance(o, TargetBindingOp):
            return {k: val(v) for k, v in sorted(o.properties.items())}
    return {}


def build_package_files(module, spec, *, target: str, decode_tokens: int = 16, prompt_chunks: int = 1
                        ) -> dict[str, str]:
    """The package's file contents (name -> text) from a compiled module (:func:`compile_plan`).

    Raises MachineVerifyError (lineage path) or PipeplanError from lowering/simulation.
    """
    from pipeplan.dialects.cplan import plan_from_ir
    from pipeplan.dialects.vmachine import ENGINE_REVISION, KernelOp
    from pipeplan.lowering.simulate import build_model, run_schedule, simulate
    from pipeplan.lowering.timeline import bundle_from_simulation
    from pipeplan.transforms.convert_cplan_to_vmachine import abi_from_facts, lower_module
    from pipeplan.transforms.cplan_project_timing import (
        confidences_from_module,
        find_cplan,
        project_module,
        publication_digests,
    )
    from xdsl.dialects.builtin import ModuleOp

    plan_op = find_cplan(module)
    plan = plan_from_ir(plan_op)
    abi = abi_from_facts(spec.facts, spec.config.max_seq_len)
    low = lower_module(module, abi)
    program_text = print_module(ModuleOp([low.program]))
    digests = publication_digests(module, plan_op)
    digests["machine"] = sha256_hex(program_text.encode())
    proj = project_module(module)
    model = build_model(plan, confidences_from_module(module, plan))
    sim = simulate(model, run_schedule(model, prompt_chunks, decode_tokens))
    cmds = {c.id: c for c in plan.commands}
    bundle = bundle_from_simulation(sim, digests, projection=proj, instructions=low.instruction_of,
                                    meta={"prompt_chunks": prompt_chunks, "decode_tokens": decode_tokens})
    lineage = {"format": LINEAGE_FORMAT, "machine": digests["machine"], "concrete": digests["concrete"],
               "instructions": {i: p for i, p in sorted(low.lineage.items(), key=lambda kv: int(kv[0][1:]))},
               "commands": dict(sorted(low.instruction_of.items())),
               "cross_step_syncs": low.cross_step_syncs}
    files = {"program.mlir": program_text, "lineage.json": _dumps(lineage), "predicted.timeline.json": bundle.dumps()}
    stages = []
    for st in low.program.body.block.ops:
        if st.name == "vmachine.stage":
            stages.append({"stage": st.index.value.data, "device": st.device.data,  # type: ignore[attr-defined]
                           "layer_start": st.layer_start.value.data, "layer_end": st.layer_end.value.data})  # type: ignore[attr-defined]
    kernels = sorted({o.kernel.data for o in low.program.walk() if isinstance(o, KernelOp)})
    tb = _target_binding(module)
    manifest = {
        "format": PACKAGE_FORMAT,
        "target": {"name": target, "plugin_revision": plan.target, "binding": tb},
        "deployment": {"identity": plan.deployment, "devices": [d.id for d in plan.devices],
                       "links": [ln.id for ln in plan.links], "stages": stages},
        "digests": {"portable": plan.source, "concrete": digests["concrete"], "machine": digests["machine"]},
        "revisions": {"plugin": plan.target, "engine": ENGINE_REVISION, "analysis": ANALYSIS_REVISION,
                      "binder": plan.binder},
        "runtime": {"runtime": tb.get("runtime", ""), "abi": tb.get("abi", ""), "library": tb.get("library", ""),
                    "kernels": kernels, "model_abi": {k: (v if not isinstance(v, float) or math.isfinite(v) else str(v))
                                                      for k, v in sorted(abi.items())},
                    "model": spec.facts.name, "max_seq_len": spec.config.max_seq_len},
        "evidence": {"fingerprint": digests["evidence"], "policy": digests["policy"], "identity": plan.evidence,
                     "risk": plan.risk, "statuses": dict(sorted(_count(c.status for c in cmds.values()).items()))},
        "lineage": {"file": "lineage.json", "detachable": True},
        "files": {name: sha256_hex(text.encode()) for name, text in sorted(files.items())},
    }
    files["manifest.json"] = _dumps(manifest)
    return files


def _count(xs) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in xs:
        out[x] = out.get(x, 0) + 1
    return out


def write_package(files: dict[str, str], out_dir: str | Path) -> Path:
    """Write ``files`` into ``out_dir`` atomically (a temporary sibling directory renamed into place;
    an existing package directory is replaced, an empty directory too). Returns the directory.

    Raises PackageError(bad_output_path), writing nothing, when ``out_dir`` is a file, its parent is a
    file, or it is a non-empty directory that is not a package (never deletes a user's directory), or
    on an OS error while writing (the temporary directory is removed)."""
    out = Path(out_dir)
    check_package_dir(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    except OSError as e:
        raise PackageError(f"-o {out}: cannot create: {e.strerror or e}", code="bad_output_path",
                           where=str(out)) from None
    try:
        for name, text in files.items():
            (tmp / name).write_text(text)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise PackageError(f"-o {out}: cannot write the package: {e.strerror or e}", code="bad_output_path",
                           where=str(out)) from None
    return out


def check_package_dir(out_dir: str | Path) -> Path:
    """Check, before compiling, that ``out_dir`` may receive a package: absent (its nearest existing
    ancestor a directory), an empty directory, or a directory holding a package (a ``manifest.json`` of
    :data:`PACKAGE_FORMAT`; it is replaced). Raises PackageError(bad_output_path) otherwise."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise PackageError(f"-o {out}: exists and is not a directory", code="bad_output_path", where=str(out))
    if out.is_dir() and any(out.iterdir()):
        try:
            fmt = json.loads((out / "manifest.json").read_text()).get("format")
        except (OSError, ValueError, AttributeError):
            fmt = None
        if fmt != PACKAGE_FORMAT:
            raise PackageError(f"-o {out}: a non-empty directory that is not a replay package (refusing to replace "
                               f"it; give a new or empty directory)", code="bad_output_path", where=str(out))
    up = out.parent
    while not up.exists() and up != up.parent:
        up = up.parent
    if not up.is_dir():
        raise PackageError(f"-o {out}: {up} is not a directory", code="bad_output_path", where=str(out))
    return out


def compile_plan_to_package(plan_module, target: str = "virtual-queue", evidence: Sequence[str] | str | None = None,
                            out_dir: str | Path = "package", *, pool: str | Path | None = None, prompt_len: int = 8,
                            binder: str = "list-schedule", decode_tokens: int = 16, prompt_chunks: int = 1,
                            timeline: str | Path | None = None) -> Path:
    """Compile a RunPlan (module, IR text or path) into a replay package directory (module docstring).

    Args:
        plan_module: ``pipeplan plan`` output. target: target plugin name (``virtual-queue``).
        evidence: providers in policy order (``roofline``, ``measured:TABLE.json``), default roofline.
        out_dir: package directory (replaced if present). pool: node-pool TOML (DeploymentBinding).
        prompt_len: rows of the prefill step. binder: ``list-schedule`` | ``reference-queue``.
        decode_tokens / prompt_chunks: the simulated run in ``predicted.timeline.json``.
        timeline: also write the predicted Chrome trace here.
    Returns: the package directory.
    Raises: PackageError (missing binding, compile failure with the pass's message, ``bad_output_path``),
    OutputPathError (``timeline`` in a missing directory), MachineVerifyError. Output paths are checked
    before compiling: a failure writes nothing.
    """
    from pipeplan.lowering.timeline import check_output_file

    check_package_dir(out_dir)
    if timeline is not None:
        check_output_file(timeline, "--timeline")
    module, spec = compile_plan(plan_module, target, evidence, pool=pool, prompt_len=prompt_len, binder=binder)
    files = build_package_files(module, spec, target=target, decode_tokens=decode_tokens, prompt_chunks=prompt_chunks)
    out = write_package(files, out_dir)
    if timeline is not None:
        from pipeplan.lowering.timeline import TimelineBundle

        TimelineBundle.from_json(json.loads(files["predicted.timeline.json"])).write_chrome_trace(timeline)
    return out


def verify_package(pkg_dir: str | Path) -> dict[str, Any]:
    """Read and check a package: manifest format, the sha256 of every file it lists (``lineage.json``
    may be detached: absent is fine, different is not) and the machine digest of ``program.mlir``.
    Returns the manifest. Raises PackageError(bad_package) naming the file."""
    d = Path(pkg_dir)
    try:
        manifest = json.loads((d / "manifest.json").read_text())
    except (OSError, ValueError) as e:
        raise PackageError(f"{d}: cannot read manifest.json: {e}", where=str(d)) from None
    if not isinstance(manifest, dict) or manifest.get("format") != PACKAGE_FORMAT:
        raise PackageError(f"{d}/manifest.json is not a {PACKAGE_FORMAT} manifest", where=str(d))
    for name, digest in manifest.get("files", {}).items():
        p = d / name
        if not p.exists():
            if name == "lineage.json":
                continue
            raise PackageError(f"{d}: {name} is missing", where=name)
        got = sha256_hex(p.read_bytes())
        if got != digest:
            raise PackageError(f"{d}: {name} has digest {got}, the manifest says {digest}", where=name)
    prog = d / "program.mlir"
    if not prog.exists() or sha256_hex(prog.read_bytes()) != manifest.get("digests", {}).get("machine"):
        raise PackageError(f"{d}: program.mlir does not match the manifest's machine digest", where="program.mlir")
    return manifest


__all__ = ["FILES", "PACKAGE_FORMAT", "PackageError", "build_package_files", "check_package_dir", "compile_plan",
           "compile_plan_to_package", "print_module", "sha256_hex", "verify_package", "write_package"]
