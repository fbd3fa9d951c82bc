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
* ``tmachine.mlir`` — only for a ``cuda-triton`` target: the ``tmachine.program`` lowered from the same
  concrete plan (``convert-cplan-to-triton`` with the package's model ABI; ``interpret``: launch
  configurations for Triton's CPU interpreter, recorded in the manifest's ``tmachine`` with the program's
  ``revision``), what ``pipeplan replay --target cuda`` runs through the tmachine interpreter (only a program of
  the runtime's own revision: an older package is refused, to be recompiled);
* ``predicted.timeline.json`` — the TimelineBundle of the simulation (prefill chunks + K decode
  tokens) with the projection summary, published with concrete/evidence/policy digests;
* ``manifest.json`` — target and deployment identity, portable/concrete/machine digests, plugin and
  engine revisions, runtime requirements (runtime, ABI, kernels, model ABI), evidence fingerprint and
  policy, the sha256 of every other file, and ``manifest_digest``: the sha256 of the manifest's own
  canonical JSON without that field (:func:`manifest_self_digest`), so an edited manifest is detected.

Every file is a pure function of the inputs (sorted JSON keys, no clocks, no host paths other than
those in the inputs), so a rebuild is byte-identical. :func:`verify_package` recomputes the manifest's
self-digest, the file digests (and the machine digest) and raises :class:`PackageError` on any mismatch.

Writing (:func:`write_package`): a new or empty directory receives a complete package built in a
temporary sibling directory and renamed into place; an existing package (its manifest verifies) has its
files replaced one by one, atomically (manifest last), and only the files its old manifest lists are ever
replaced or removed: anything else in the directory (a saved ``measured.json``) is left alone.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipeplan.analysis.simulate import build_model, run_schedule, simulate
from pipeplan.analysis.timeline import TimelineBundle, bundle_from_simulation
from pipeplan.api import parse_module, register_pipeplan
from pipeplan.dialects.bindings import TargetBindingOp
from pipeplan.dialects.cplan import CommandOp, DeviceOp, LinkOp
from pipeplan.dialects.pplan import PlanOp as PPlanOp
from pipeplan.dialects.runplan_build import plan_node_pool, single_plan
from pipeplan.dialects.triton_machine import REVISION as TMACHINE_REVISION
from pipeplan.dialects.vmachine import ENGINE_REVISION, KernelOp
from pipeplan.errors import PipeplanError
from pipeplan.files.atomic import OutputPathError, check_output_file, current_umask, write_file_atomic
from pipeplan.files.paths import InputPathError, check_input_file, file_kind
from pipeplan.transforms.convert_cplan_to_triton import lower_plan as lower_tmachine
from pipeplan.transforms.convert_cplan_to_vmachine import abi_from_facts, lower_module
from pipeplan.transforms.convert_pplan_to_cplan import ConvertPplanToCplanPass
from pipeplan.transforms.convert_runplan_to_pplan import ConvertRunplanToPplanPass
from pipeplan.transforms.cplan_project_timing import (
    CplanProjectTimingPass,
    confidences_from_module,
    find_cplan,
    project_module,
    publication_digests,
)
from pipeplan.transforms.cplan_verify import CplanVerifyPass
from pipeplan.transforms.pplan_legalize import PplanLegalizePass
from pipeplan.transforms.pplan_resolve_costs import PplanResolveCostsPass
from pipeplan.transforms.pplan_select_implementations import PplanSelectImplementationsPass

PACKAGE_FORMAT = "pipeplan-replay-package/1"
LINEAGE_FORMAT = "pipeplan-lineage/1"
ANALYSIS_REVISION = "pipeplan-simulate/1"
TMACHINE_FILE = "tmachine.mlir"
TMACHINE_TARGET = "cuda-triton"
FILES = ("program.mlir", "lineage.json", "predicted.timeline.json", TMACHINE_FILE)
MANIFEST = "manifest.json"
SELF_DIGEST_KEY = "manifest_digest"


class PackageError(PipeplanError):
    """A package that cannot be built or read: ``code`` ``bad_package`` (missing/corrupt file, digest
    mismatch), ``package_tampered`` (the manifest's self-digest does not match: it was edited),
    ``missing_binding`` (no deployment pool), ``bad_output_path`` / ``write_failed`` (``-o``), or the
    compiler's own error code."""

    code = "bad_package"


def sha256_hex(data: bytes) -> str:
    """``sha256:<hex>`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _dumps(doc: Any) -> str:
    try:
        return json.dumps(doc, sort_keys=True, indent=1, allow_nan=False) + "\n"
    except ValueError:
        raise PackageError("a package file would hold a NaN or infinite number", code="non_finite") from None


def manifest_self_digest(manifest: dict[str, Any]) -> str:
    """``sha256:<hex>`` of the manifest's canonical JSON (sorted keys, no whitespace, ASCII) without its
    ``manifest_digest`` field."""
    body = {k: v for k, v in manifest.items() if k != SELF_DIGEST_KEY}
    return sha256_hex(json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                                 allow_nan=False).encode())


def print_module(op) -> str:
    """The custom-syntax print of an op (trailing newline)."""
    from pipeplan.dialects.printing import print_ir

    return print_ir(op) + "\n"


def _parse_plan(plan_module) -> Any:
    from xdsl.context import Context
    from xdsl.dialects.builtin import ModuleOp

    if isinstance(plan_module, ModuleOp):
        return plan_module.clone()
    is_path = isinstance(plan_module, Path) or (isinstance(plan_module, str) and "\n" not in plan_module
                                                 and not plan_module.lstrip().startswith(("builtin.", "runplan.", "{", '"')))
    if is_path:
        check_input_file(plan_module, "plan", PackageError)  # a FIFO/device/directory: refused before open()
    try:
        text = Path(plan_module).read_text(encoding="utf-8") if is_path else str(plan_module)
    except UnicodeDecodeError as e:  # a GGUF or other binary file given as the plan
        raise PackageError(f"{plan_module}: not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start}); "
                           f"a plan is RunPlan MLIR text (pipeplan plan output)", code="input_not_text",
                           where=str(plan_module)) from None
    except OSError as e:
        why = e.strerror or str(e)
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

    Returns ``(module, runplan)``: the module holding the portable source, bindings, costed view and the
    timing-annotated ``cplan.plan``; a copy of the input ``runplan.plan`` op (its facts and config). ``evidence`` defaults to ``("roofline",)``.

    ``pool``: the node-pool TOML of the DeploymentBinding; None: the node specs the RunPlan carries
    (``pipeplan plan`` records its pool's specs, peaks included), which are the plan's own explicit binding.

    Raises PackageError(missing_binding) without a pool when the plan names its nodes by id only (AB-G-4:
    never a default); PackageError(file_not_found / input_not_text / bad_plan) for an unreadable, binary or unparsable plan;
    PackageError carrying the failing pass's code and one-line message otherwise.
    """
    from xdsl.context import Context
    from xdsl.passes import PassPipeline
    from xdsl.utils.exceptions import PassFailedException

    if isinstance(evidence, str):
        evidence = tuple(x for x in evidence.split(",") if x)
    evidence = tuple(evidence or ("roofline",))
    module = _parse_plan(plan_module)
    try:
        runplan = single_plan(module, readable=True).clone()
        carried = plan_node_pool(runplan)
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
    return module, runplan


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


def _tmachine_text(module, plan_op, abi, interpret: bool) -> str:
    """The printed ``tmachine.program`` of the compiled module's concrete plan (``convert-cplan-to-triton``'s
    :func:`~pipeplan.transforms.convert_cplan_to_triton.lower_plan` with the model ABI). Raises
    PackageError with the lowering's message (unsupported kernel/dtype, no queue extension)."""
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.utils.exceptions import PassFailedException

    pplans = [o for o in module.ops if isinstance(o, PPlanOp)]
    if len(pplans) != 1:
        raise PackageError(f"the cuda-triton lowering needs the portable plan (found {len(pplans)} pplan.plan)")
    try:
        prog = lower_tmachine(plan_op, pplans[0], abi, interpret)
    except PassFailedException as e:
        msg, code = _diagnostic(" ".join(str(e).split()))
        raise PackageError(msg, code=code) from None
    return print_module(ModuleOp([prog]))


def build_package_files(module, runplan, *, target: str, decode_tokens: int = 16, prompt_chunks: int = 1,
                        interpret: bool = False) -> dict[str, str]:
    """The package's file contents (name -> text) from a compiled module and its ``runplan.plan`` copy
    (:func:`compile_plan`); a
    ``cuda-triton`` target adds ``tmachine.mlir`` (``interpret``: its launch configurations are the Triton
    CPU interpreter's).

    Raises MachineVerifyError (lineage path) or PipeplanError from the lowering or the simulation.
    """
    from xdsl.dialects.builtin import ModuleOp

    plan_op = find_cplan(module)
    facts, max_seq_len = runplan.facts(), runplan.config.config().max_seq_len
    abi = abi_from_facts(facts, max_seq_len)
    low = lower_module(module, abi)
    program_text = print_module(ModuleOp([low.program]))
    digests = publication_digests(module, plan_op)
    digests["machine"] = sha256_hex(program_text.encode())
    proj = project_module(module)
    model = build_model(plan_op, confidences_from_module(module, plan_op))
    sim = simulate(model, run_schedule(model, prompt_chunks, decode_tokens))
    body = list(plan_op.body.block.ops)
    statuses = {c.id.data: str(c.status.data) for c in body if isinstance(c, CommandOp)}
    bundle = bundle_from_simulation(sim, digests, projection=proj, instructions=low.instruction_of,
                                    meta={"prompt_chunks": prompt_chunks, "decode_tokens": decode_tokens})
    lineage = {"format": LINEAGE_FORMAT, "machine": digests["machine"], "concrete": digests["concrete"],
               "instructions": {i: p for i, p in sorted(low.lineage.items(), key=lambda kv: int(kv[0][1:]))},
               "commands": dict(sorted(low.instruction_of.items())),
               "cross_step_syncs": low.cross_step_syncs}
    files = {"program.mlir": program_text, "lineage.json": _dumps(lineage), "predicted.timeline.json": bundle.dumps()}
    tmachine: dict[str, Any] = {}
    if target.startswith(TMACHINE_TARGET):
        files[TMACHINE_FILE] = _tmachine_text(module, plan_op, abi, interpret)
        tmachine = {"tmachine": {"file": TMACHINE_FILE, "interpret": bool(interpret), "revision": TMACHINE_REVISION}}
    stages = []
    for st in low.program.body.block.ops:
        if st.name == "vmachine.stage":
            stages.append({"stage": st.index.value.data, "device": st.device.data,  # type: ignore[attr-defined]
                           "layer_start": st.layer_start.value.data, "layer_end": st.layer_end.value.data})  # type: ignore[attr-defined]
    kernels = sorted({o.kernel.data for o in low.program.walk() if isinstance(o, KernelOp)})
    tb = _target_binding(module)
    manifest = {
        "format": PACKAGE_FORMAT,
        "target": {"name": target, "plugin_revision": plan_op.target.data, "binding": tb},
        "deployment": {"identity": plan_op.deployment.data,
                       "devices": [d.id.data for d in body if isinstance(d, DeviceOp)],
                       "links": [ln.id.data for ln in body if isinstance(ln, LinkOp)], "stages": stages},
        "digests": {"portable": plan_op.source.data, "concrete": digests["concrete"], "machine": digests["machine"]},
        "revisions": {"plugin": plan_op.target.data, "engine": ENGINE_REVISION, "analysis": ANALYSIS_REVISION,
                      "binder": plan_op.binder.data},
        "runtime": {"runtime": tb.get("runtime", ""), "abi": tb.get("abi", ""), "library": tb.get("library", ""),
                    "kernels": kernels, "model_abi": {k: (v if not isinstance(v, float) or math.isfinite(v) else str(v))
                                                      for k, v in sorted(abi.items())},
                    "model": facts.name, "max_seq_len": max_seq_len},
        "evidence": {"fingerprint": digests["evidence"], "policy": digests["policy"],
                     "identity": plan_op.evidence.data, "risk": plan_op.risk.data,
                     "statuses": dict(sorted(_count(statuses.values()).items()))},
        "lineage": {"file": "lineage.json", "detachable": True},
        **tmachine,
        "files": {name: sha256_hex(text.encode()) for name, text in sorted(files.items())},
    }
    manifest[SELF_DIGEST_KEY] = manifest_self_digest(manifest)
    files[MANIFEST] = _dumps(manifest)
    return files


def _count(xs) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in xs:
        out[x] = out.get(x, 0) + 1
    return out


def write_package(files: dict[str, str], out_dir: str | Path, *, option: str = "-o") -> Path:
    """Write ``files`` (name -> text, :func:`build_package_files`) as the package ``out_dir`` (module
    docstring, "Writing"). Returns the directory.

    Raises PackageError(bad_output_path), writing nothing, when :func:`check_package_dir` refuses
    ``out_dir``; PackageError(write_failed) on an OS error while writing (no space, permission denied):
    a new package's temporary directory is removed; an existing package may then hold some new files,
    and its old manifest no longer verifies them (replay refuses it, recompiling replaces it)."""
    out = Path(out_dir)
    old = check_package_dir(out, option=option)
    names = [n for n in files if n != MANIFEST] + [MANIFEST]
    if old is None:
        tmp: Path | None = None
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
            for name in names:
                write_file_atomic(tmp / name, files[name], option)
            os.chmod(tmp, 0o777 & ~current_umask())
            os.rename(tmp, out)  # onto an absent or empty directory only (rename(2) refuses a non-empty one)
            tmp = None
        except OutputPathError as e:
            raise PackageError(f"{option} {out}: cannot write the package: {e.message}", code="write_failed",
                               where=str(out)) from None
        except OSError as e:
            raise PackageError(f"{option} {out}: cannot write the package: {e.strerror or e}", code="write_failed",
                               where=str(out)) from None
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
        return out
    try:
        for name in names:
            write_file_atomic(out / name, files[name], option)
        for name in sorted(set(old.get("files", {})) - set(files)):
            (out / name).unlink(missing_ok=True)  # listed by the old manifest, verified by check_package_dir
    except OutputPathError as e:
        raise PackageError(f"{option} {out}: cannot write the package: {e.message}", code="write_failed",
                           where=str(out)) from None
    except OSError as e:
        raise PackageError(f"{option} {out}: cannot write the package: {e.strerror or e}", code="write_failed",
                           where=str(out)) from None
    return out


def read_own_manifest(pkg_dir: str | Path) -> dict[str, Any] | None:
    """The manifest of ``pkg_dir`` when it is a package this module wrote: ``manifest.json`` is a regular
    file holding a :data:`PACKAGE_FORMAT` manifest whose self-digest matches and whose ``files`` are package
    file names (:data:`FILES`); else None."""
    d = Path(pkg_dir)
    try:
        p = check_input_file(d / MANIFEST, "manifest")
        manifest = json.loads(p.read_text(encoding="utf-8"))
    except (InputPathError, OSError, ValueError):
        return None
    if (not isinstance(manifest, dict) or manifest.get("format") != PACKAGE_FORMAT
            or not isinstance(manifest.get("files"), dict) or not set(manifest["files"]) <= set(FILES)):
        return None
    try:
        ok = manifest.get(SELF_DIGEST_KEY) == manifest_self_digest(manifest)
    except (TypeError, ValueError):
        return None
    return manifest if ok else None


def check_package_dir(out_dir: str | Path, *, option: str = "-o") -> dict[str, Any] | None:
    """Check, before compiling, that ``out_dir`` may receive a package: absent (its nearest existing
    ancestor a directory), an empty directory, or a directory holding a package whose manifest verifies
    (:func:`read_own_manifest`) and whose listed files are regular files with the digests it records (they
    are the only files ever replaced or removed). Returns that manifest, or None for an absent/empty
    directory. Raises PackageError(bad_output_path) otherwise, naming what is in the way."""
    out = Path(out_dir)

    def bad(why: str) -> PackageError:
        return PackageError(f"{option} {out}: {why}", code="bad_output_path", where=str(out))

    try:
        st = os.lstat(out)
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        st = None
    except OSError as e:
        raise bad(f"cannot stat: {e.strerror or e}") from None
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise bad(f"exists and is a {file_kind(st.st_mode)}, not a directory")
    if st is None:
        up = out.parent
        while not up.exists() and up != up.parent:
            up = up.parent
        if not up.is_dir():
            raise bad(f"{up} is not a directory")
        return None
    try:
        entries = sorted(x.name for x in out.iterdir())
    except OSError as e:
        raise bad(f"cannot list the directory: {e.strerror or e}") from None
    if not entries:
        return None
    manifest = read_own_manifest(out)
    if manifest is None:
        raise bad("a non-empty directory that is not a replay package (no manifest.json of this format with a "
                  "matching self-digest; refusing to replace it: give a new or empty directory)")
    for name, digest in sorted(manifest["files"].items()):
        p = out / name
        try:
            pst = os.lstat(p)
        except FileNotFoundError:
            continue
        except OSError as e:
            raise bad(f"cannot stat {name}: {e.strerror or e}") from None
        if not stat.S_ISREG(pst.st_mode):
            raise bad(f"{name} is not a regular file (refusing to replace it)")
        try:
            got = sha256_hex(p.read_bytes())
        except OSError as e:
            raise bad(f"cannot read {name}: {e.strerror or e}") from None
        if got != digest:
            raise bad(f"{name} was changed since the package was written (its digest is not the manifest's); "
                      f"refusing to replace it: move it away or give another directory")
    return manifest


def compile_plan_to_package(plan_module, target: str = "virtual-queue", evidence: Sequence[str] | str | None = None,
                            out_dir: str | Path = "package", *, pool: str | Path | None = None, prompt_len: int = 8,
                            binder: str = "list-schedule", decode_tokens: int = 16, prompt_chunks: int = 1,
                            trace: str | Path | None = None, timeline: str | Path | None = None,
                            interpret: bool = False) -> Path:
    """Compile a RunPlan (module, IR text or path) into a replay package directory (module docstring).

    Args:
        plan_module: ``pipeplan plan`` output. target: target plugin name (``virtual-queue``).
        evidence: providers in policy order (``roofline``, ``measured:TABLE.json``), default roofline.
        out_dir: package directory (new, empty, or a package: see :func:`write_package`). pool: node-pool
            TOML (DeploymentBinding).
        prompt_len: rows of the prefill step. binder: ``list-schedule`` | ``reference-queue``.
        decode_tokens / prompt_chunks: the simulated run in ``predicted.timeline.json``.
        trace: also write the predicted Chrome trace (Perfetto / chrome://tracing) here.
        timeline: also write the predicted TimelineBundle JSON (a copy of ``predicted.timeline.json``) here.
        interpret: a ``cuda-triton`` target's ``tmachine.mlir`` uses the Triton CPU interpreter's launch
            configurations (default: the GPU's).
    Returns: the package directory.
    Raises: PackageError (missing binding, compile failure with the pass's message, ``bad_output_path``,
    ``write_failed``), OutputPathError (``trace``/``timeline`` not writable), MachineVerifyError. Output
    paths are checked before compiling: a failure writes nothing; every file is written atomically.
    """
    check_package_dir(out_dir)
    if trace is not None:
        check_output_file(trace, "--trace")
    if timeline is not None:
        check_output_file(timeline, "--timeline")
    module, runplan = compile_plan(plan_module, target, evidence, pool=pool, prompt_len=prompt_len, binder=binder)
    files = build_package_files(module, runplan, target=target, decode_tokens=decode_tokens, prompt_chunks=prompt_chunks,
                                interpret=interpret)
    out = write_package(files, out_dir)
    if trace is not None:
        TimelineBundle.from_json(json.loads(files["predicted.timeline.json"])).write_chrome_trace(trace, "--trace")
    if timeline is not None:
        write_file_atomic(timeline, files["predicted.timeline.json"], "--timeline")
    return out


def verify_package(pkg_dir: str | Path) -> dict[str, Any]:
    """Read and check a package: manifest format, its self-digest (:func:`manifest_self_digest`), the
    sha256 of every file it lists (``lineage.json`` may be detached: absent is fine, different is not) and
    the machine digest of ``program.mlir``. Every file must be a regular file (a FIFO or device is refused
    before opening). Returns the manifest. Raises PackageError: ``bad_package`` naming the file,
    ``package_tampered`` when the manifest's self-digest is missing or does not match."""
    d = Path(pkg_dir)
    try:
        mp = check_input_file(d / MANIFEST, "package manifest", PackageError)
        manifest = json.loads(mp.read_text(encoding="utf-8"))
    except PackageError as e:
        raise PackageError(f"{d}: cannot read manifest.json: {e.message}", where=str(d)) from None
    except (OSError, ValueError) as e:
        raise PackageError(f"{d}: cannot read manifest.json: {e}", where=str(d)) from None
    if not isinstance(manifest, dict) or manifest.get("format") != PACKAGE_FORMAT:
        raise PackageError(f"{d}/manifest.json is not a {PACKAGE_FORMAT} manifest", where=str(d))
    try:
        want = manifest_self_digest(manifest)
    except (TypeError, ValueError):
        want = None
    got_self = manifest.get(SELF_DIGEST_KEY)
    if want is None or got_self != want:
        why = "has no manifest_digest" if got_self is None else f"has manifest_digest {got_self}, its content hashes to {want}"
        raise PackageError(f"{d}/manifest.json {why}: the manifest was edited after the package was written "
                           f"(recompile the package)", code="package_tampered", where=MANIFEST)
    listed = manifest.get("files", {})
    if not isinstance(listed, dict) or not set(listed) <= set(FILES):
        raise PackageError(f"{d}/manifest.json lists files other than {', '.join(FILES)}", where=MANIFEST)
    for name, digest in listed.items():
        p = d / name
        if not p.exists() and not p.is_symlink():
            if name == "lineage.json":
                continue
            raise PackageError(f"{d}: {name} is missing", where=name)
        check_input_file(p, "package file", PackageError)
        got = sha256_hex(p.read_bytes())
        if got != digest:
            raise PackageError(f"{d}: {name} has digest {got}, the manifest says {digest}", where=name)
    prog = d / "program.mlir"
    if not prog.exists() or sha256_hex(prog.read_bytes()) != manifest.get("digests", {}).get("machine"):
        raise PackageError(f"{d}: program.mlir does not match the manifest's machine digest", where="program.mlir")
    return manifest


__all__ = ["FILES", "MANIFEST", "PACKAGE_FORMAT", "TMACHINE_FILE", "PackageError", "build_package_files", "check_package_dir", "compile_plan",
           "compile_plan_to_package", "manifest_self_digest", "print_module", "read_own_manifest", "sha256_hex",
           "verify_package", "write_package"]
