"""Calibration: this machine's measured evidence for a model's plan, cached by machine + model fingerprint.

* :func:`measure_runtime` — what every task of a compiled plan costs **in the runtime as it really
  executes**: the package is replayed with :func:`pipeplan.runtime.replay.replay_package` (the
  StageExecutor decode loop over the kernel table the direct replay runs, the reference kernels) on
  calibration prompts, and every command of the single-threaded measured timeline is charged by
  :func:`charge_commands` (its dispatch included; the commands of an instance sum to its wall time).
  The keys are exactly the EstimateRequest keys (``op|dtypes|shape``,
  :func:`pipeplan.analysis.evidence.request_key`) of the plan's tasks that ``pplan-resolve-costs``
  prices, transfers (``recv``/``send``: the replay's hops) included. ``seconds`` is the 10 %-trimmed
  mean of a key's samples.
* :func:`machine_fingerprint` / :func:`model_fingerprint` / :func:`calibration_path` — the cache key:
  ``<cache>/calibration/<sha256(machine, model)[:24]>.json``; machine = CPU model, logical core count,
  kernel target, threads, pipeplan version; model = sha256 of the GGUF file(s).
* :func:`write_calibration` merges new entries into the cached table (keys of other stage counts stay)
  and writes it atomically (:func:`pipeplan.files.atomic.write_file_atomic`).
* :func:`select_evidence` — the evidence a command uses: explicit ``--evidence`` first; else the cached
  calibration when one matches this machine + model (``measured:<path>`` then ``roofline`` for keys it
  lacks); else roofline, with the line saying why (none, corrupt, other machine).

Table format: :data:`pipeplan.analysis.evidence.TABLE_FORMAT` plus ``"calibration"`` (the fingerprints
and the key) and ``"method"``.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeplan.analysis.evidence import TABLE_FORMAT, EvidenceError, MeasuredTable, request_key
from pipeplan.errors import PipeplanError

CALIBRATION_FORMAT = "pipeplan-calibration/1"
MODEL_SHA_MEMO = "model-sha256.memo"
"""File beside the tables remembering model sha256s (:func:`model_fingerprint`); not a ``*.json`` table."""
TARGETS = ("reference",)
"""Kernel targets :func:`measure_runtime` can time: the kernel table of the direct replay (the runtime
path that records measured timelines)."""

CALIBRATION_PROMPTS = ("One day a little bird flew over the big green tree",
                       "Tom had a red ball and he liked to play with it",
                       "There was a girl who loved to sing songs in the park")
"""Calibration prompts (disjoint from ``bench/accuracy.py``'s); ids are repeated up to ``prompt_len``."""


class CalibrationError(PipeplanError):
    """A calibration that cannot be made (code ``calibration``; ``unsupported_target``, ``invalid_request``)."""

    code = "calibration"


def cpu_model() -> str:
    """The CPU model name (``/proc/cpuinfo`` ``model name``, else :func:`platform.processor`, else the machine)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def machine_fingerprint(target: str, threads: int) -> dict[str, Any]:
    """What a calibration is valid for on the machine side: CPU model, logical cores, target, threads,
    pipeplan version."""
    from pipeplan import __version__

    return {"cpu": cpu_model(), "cores": os.cpu_count() or 1, "target": target, "threads": int(threads),
            "pipeplan": __version__}


def model_fingerprint(files: Sequence[str | os.PathLike[str]], memo: Path | None = None) -> dict[str, Any]:
    """The model side: sha256 of each GGUF file (shards in order) and their names. ``memo``: a JSON file
    remembering the sha256 of ``path|size|mtime_ns|inode`` so that a large model is hashed once (best effort)."""
    from pipeplan.frontend.gguf_facts import sha256_file

    known: dict[str, str] = {}
    if memo is not None:
        try:
            got = json.loads(memo.read_text(encoding="utf-8"))
            known = {str(k): str(v) for k, v in got.items()} if isinstance(got, dict) else {}
        except (OSError, ValueError):
            known = {}
    shas, changed = [], False
    for f in files:
        st = os.stat(f)
        ident = f"{Path(f).resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}"
        sha = known.get(ident)
        if sha is None:
            sha = known[ident] = sha256_file(f)
            changed = True
        shas.append(sha)
    if memo is not None and changed:
        try:
            from pipeplan.files.atomic import write_file_atomic

            memo.parent.mkdir(parents=True, exist_ok=True)
            write_file_atomic(memo, json.dumps(known, indent=0, sort_keys=True) + "\n", "model sha memo")
        except (OSError, PipeplanError):
            pass
    return {"sha256": shas, "files": [Path(f).name for f in files]}


def calibration_key(machine: Mapping[str, Any], model: Mapping[str, Any]) -> str:
    """sha256 (24 hex digits) of the two fingerprints (canonical JSON)."""
    blob = json.dumps({"machine": dict(machine), "model": {"sha256": list(model["sha256"])}}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def calibration_path(cache_dir: str | os.PathLike[str] | None, key: str) -> Path:
    """``<cache>/calibration/<key>.json`` (cache: ``cache_dir``, else ``$PIPEPLAN_CACHE`` / ``~/.cache/pipeplan``)."""
    from pipeplan.runtime.weights_source import cache_root

    return cache_root(cache_dir) / "calibration" / f"{key}.json"


def _trimmed_mean(xs: list[float], cut: float = 0.1) -> float:
    s = sorted(xs)
    k = int(len(s) * cut)
    core = s[k:len(s) - k] or s
    return sum(core) / len(core)


def charge_commands(events: Iterable[Any], *, charge_first: bool = False) -> list[tuple[str, float]]:
    """``(command, seconds)`` charged to every command of a single-threaded measured timeline
    (``events``: TimelineEvents). Each command is charged from the end of the previous one to its own end,
    except that the gap between a stage's ``recv`` and its first kernel (the stage program's entry) goes
    to the ``recv``. The run's first command (no predecessor) is charged its own span with ``charge_first``,
    else not at all. The charges of an instance after the first sum to its wall time."""
    evs = sorted(events, key=lambda e: (e.start_s, e.end_s))
    out: list[tuple[str, float]] = [(evs[0].command, evs[0].end_s - evs[0].start_s)] if evs and charge_first else []
    for i in range(1, len(evs)):
        e, prev = evs[i], evs[i - 1]
        nxt = evs[i + 1] if i + 1 < len(evs) else None
        if e.op == "recv" and nxt is not None and nxt.stage == e.stage and nxt.op not in ("send", "recv", "argmax"):
            out.append((e.command, nxt.start_s - prev.end_s))
        elif prev.op == "recv" and prev.stage == e.stage and e.op not in ("send", "recv", "argmax"):
            out.append((e.command, e.end_s - e.start_s))
        else:
            out.append((e.command, e.end_s - prev.end_s))
    return out


def plan_request_keys(plan_module, prompt_len: int) -> dict[str, Any]:
    """``key -> task`` of every task of the RunPlan's portable plan whose cost ``pplan-resolve-costs``
    resolves (one EstimateRequest key per (op, dtypes, shape))."""
    from pipeplan.dialects.pplan import ints, str_list
    from pipeplan.dialects.runplan_build import runplan_spec_from_module
    from pipeplan.transforms.convert_runplan_to_pplan import build_portable_plan

    spec = runplan_spec_from_module(plan_module)
    out: dict[str, Any] = {}
    for t in build_portable_plan(spec, prompt_len=prompt_len).tasks():
        out.setdefault(request_key(t.op.data, str_list(t.dtypes), ints(t.shape)), t)
    return out


def _prompt_ids(tok, prompt: str, n: int) -> list[int]:
    ids = tok.encode(prompt)
    while len(ids) < n:
        ids = ids + ids[1:] if len(ids) > 1 else ids * 2
    return ids[:n]


def measure_runtime(plan_module, model: str | Path, *, pool: str | Path | None = None, prompt_len: int = 8,
                    tokens: int = 8, repeats: int = 1, threads: int = 1, prompts: Sequence[str] = CALIBRATION_PROMPTS,
                    work: Path | None = None, charge_first: bool = True) -> dict[str, Any]:
    """The measured table (:data:`TABLE_FORMAT`) of the RunPlan ``plan_module`` (module docstring).

    ``pool``: node-pool TOML (None: the plan's node specs). ``tokens`` decode tokens per replay,
    ``repeats`` replays per prompt after one warm-up replay, ``threads`` torch threads. ``charge_first``
    (:func:`charge_commands`): the prefill's token-in ``recv``, each replay's first command, is priced too,
    so every request key of the plan has an entry. The package is compiled into ``work/pkg``.
    Raises the compiler's / replay's typed errors; CalibrationError(invalid_request) for bad counts or a
    measured command that names no task of the plan.
    """
    from pipeplan.compiler.replay_package import compile_plan_to_package
    from pipeplan.dialects.pplan import ints, str_list
    from pipeplan.dialects.runplan_build import runplan_spec_from_module
    from pipeplan.runtime.replay import replay_package
    from pipeplan.runtime.tokenizer import SPMTokenizer
    from pipeplan.transforms.convert_runplan_to_pplan import build_portable_plan

    if tokens < 1 or repeats < 1 or prompt_len < 1 or not prompts:
        raise CalibrationError(f"calibration needs tokens, repeats and prompt_len >= 1 and a prompt (got {tokens}, "
                               f"{repeats}, {prompt_len})", code="invalid_request")
    import torch

    torch.set_num_threads(threads)
    work = Path(work) if work is not None else Path(tempfile.mkdtemp(prefix="pipeplan-calibrate-"))
    pkg = compile_plan_to_package(plan_module, "virtual-queue", ["roofline"], work / "pkg", pool=pool,
                                  prompt_len=prompt_len, decode_tokens=1)
    tasks = {t.sym_name.data: t for t in build_portable_plan(runplan_spec_from_module(plan_module),
                                                             prompt_len=prompt_len).tasks()}
    tok = SPMTokenizer.from_gguf(model)
    samples: dict[str, list[float]] = {}
    replay_package(pkg, model, _prompt_ids(tok, prompts[0], prompt_len), 4, num_threads=threads)  # warm-up
    for prompt in prompts:
        ids = _prompt_ids(tok, prompt, prompt_len)
        for _ in range(repeats):
            r = replay_package(pkg, model, ids, tokens + 1, num_threads=threads)
            for cmd, secs in charge_commands(r.timeline.events, charge_first=charge_first):
                t = tasks.get(cmd.removeprefix("cmd."))
                if t is None:
                    raise CalibrationError(f"measured command {cmd} names no task of the plan", code="invalid_request")
                samples.setdefault(request_key(t.op.data, str_list(t.dtypes), ints(t.shape)), []).append(secs)
    by_key = {request_key(t.op.data, str_list(t.dtypes), ints(t.shape)): t for t in tasks.values()}
    entries = []
    for key, xs in samples.items():
        t = by_key[key]
        q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
        mean = _trimmed_mean(xs)
        entries.append({"key": key, "op": t.op.data, "seconds": mean, "median_s": statistics.median(xs),
                        "flops": t.flops.value.data, "bytes": t.bytes_read.value.data + t.bytes_written.value.data,
                        "samples": len(xs), "rel_spread": (q[2] - q[0]) / mean if mean > 0 else 0.0})
    return {"format": TABLE_FORMAT, "created_unix": time.time(),
            "machine": {"platform": platform.platform(), "python": sys.version.split()[0], "torch": torch.__version__,
                        "threads": threads, "kernels": "pipeplan.runtime.kernels.reference"},
            "method": {"mode": "runtime", "decode_tokens": tokens, "repeats": repeats, "prompt_len": prompt_len,
                       "prompts": list(prompts), "statistic": "10%-trimmed mean of the charged seconds"},
            "entries": sorted(entries, key=lambda e: e["key"])}


def merge_tables(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> dict[str, Any]:
    """``new`` with the entries of ``old`` whose keys ``new`` lacks (keys of other plans stay)."""
    out = dict(new)
    if old is None:
        return out
    mine = {e["key"] for e in new["entries"]}
    extra = [e for e in old.get("entries", []) if isinstance(e, dict) and e.get("key") not in mine]
    out["entries"] = sorted([*new["entries"], *extra], key=lambda e: e["key"])
    return out


def read_table(path: Path) -> dict[str, Any] | None:
    """The JSON document at ``path`` when it is a readable table of :data:`TABLE_FORMAT`; else None."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != TABLE_FORMAT or not isinstance(doc.get("entries"), list):
        return None
    return doc


def write_calibration(path: Path, table: Mapping[str, Any], machine: Mapping[str, Any], model: Mapping[str, Any],
                      *, force: bool = False) -> dict[str, Any]:
    """Write ``table`` (merged into the cached one unless ``force``) with its fingerprints at ``path``,
    atomically. Returns the written document. Raises OutputPathError (``write_failed``, ``bad_output_path``)."""
    from pipeplan.files.atomic import write_file_atomic

    old = None if force else read_table(path)
    if old is not None and (old.get("calibration") or {}).get("machine") != dict(machine):
        old = None
    doc = merge_tables(old, table)
    doc["calibration"] = {"format": CALIBRATION_FORMAT, "key": path.stem, "machine": dict(machine),
                          "model": dict(model)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        from pipeplan.files.atomic import OutputPathError

        raise OutputPathError(f"calibration: cannot create {path.parent}: {e.strerror or e}", code="write_failed",
                              where=str(path.parent)) from None
    write_file_atomic(path, json.dumps(doc, indent=1) + "\n", "calibration", code="write_failed")
    return doc


@dataclass(frozen=True)
class EvidenceChoice:
    """The evidence a command uses: ``providers`` in policy order, ``kind`` (explicit | calibrated |
    roofline), the calibration ``path`` when one is used, and the one-line ``message``."""

    providers: tuple[str, ...]
    kind: str
    path: Path | None
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """``{"kind", "providers", "path", "message"}``."""
        return {"kind": self.kind, "providers": list(self.providers),
                "path": None if self.path is None else str(self.path), "message": self.message}


def _roofline(model: str | Path, why: str) -> EvidenceChoice:
    return EvidenceChoice(("roofline",), "roofline", None,
                          f"evidence: roofline ({why}: run `pipeplan calibrate {model}`)")


def select_evidence(explicit: Sequence[str] | None, model_files: Sequence[str | os.PathLike[str]] | None, *,
                    target: str = "reference", threads: int = 1,
                    cache_dir: str | os.PathLike[str] | None = None) -> EvidenceChoice:
    """The evidence of a command (module docstring). ``explicit``: the ``--evidence`` providers (kept as
    given); ``model_files``: the GGUF file(s) of the plan (None or missing: roofline). A corrupt or
    unreadable calibration, or one made for another machine or model, falls back to roofline with the
    reason in ``message``; never raises for a calibration file."""
    if explicit:
        return EvidenceChoice(tuple(explicit), "explicit", None, f"evidence: {','.join(explicit)} (--evidence)")
    if not model_files or not all(Path(f).is_file() for f in model_files):
        return EvidenceChoice(("roofline",), "roofline", None,
                              "evidence: roofline (the plan's model file is not readable here, so no calibration applies)")
    model_name = Path(model_files[0])
    machine = machine_fingerprint(target, threads)
    try:
        folder = calibration_path(cache_dir, "x").parent
        if not folder.is_dir() or not any(folder.glob("*.json")):
            return _roofline(model_name, "no calibration for this machine+model")
        model = model_fingerprint(model_files, folder / MODEL_SHA_MEMO)
        path = calibration_path(cache_dir, calibration_key(machine, model))
    except (OSError, PipeplanError) as e:
        return _roofline(model_name, f"no usable calibration cache: {e}")
    if not path.exists():
        return _roofline(model_name, "no calibration for this machine+model")
    try:
        table = MeasuredTable(path)
    except EvidenceError as e:
        return _roofline(model_name, f"calibration {path} is unusable: {e.message}")
    doc = read_table(path) or {}
    got = doc.get("calibration")
    cal: dict[str, Any] = got if isinstance(got, dict) else {}
    if cal.get("machine") != machine:
        return _roofline(model_name, f"calibration {path} was made for another machine ({cal.get('machine')})")
    got_model = cal.get("model")
    if not isinstance(got_model, dict) or got_model.get("sha256") != list(model["sha256"]):
        return _roofline(model_name, f"calibration {path} was made for another model")
    return EvidenceChoice((f"measured:{path}", "roofline"), "calibrated", path, f"evidence: calibrated ({path})",
                          {"keys": len(table.entries)})


def plan_model_files(plan_module) -> list[str] | None:
    """The GGUF file(s) a RunPlan module names (``model.files``); None when it names none."""
    from pipeplan.dialects.runplan_build import runplan_spec_from_module

    try:
        spec = runplan_spec_from_module(plan_module)
    except PipeplanError:
        return None
    files = list(spec.facts.files or ())
    return [str(f) for f in files] or None


def plan_evidence(explicit: Sequence[str] | None, plan, *, target: str = "reference", threads: int = 1,
                  cache_dir: str | os.PathLike[str] | None = None) -> EvidenceChoice:
    """:func:`select_evidence` for a RunPlan (module, IR text or path; its ``model.files``). A plan that
    cannot be read is left to the compiler's diagnostic: roofline is chosen here and no error raised."""
    if explicit:
        return select_evidence(explicit, None)
    try:
        from pipeplan.compiler.replay_package import _parse_plan

        module = _parse_plan(plan)
    except PipeplanError:
        return EvidenceChoice(("roofline",), "roofline", None, "evidence: roofline (the plan could not be read)")
    files = plan_model_files(module)
    return select_evidence(None, files, target=target, threads=threads, cache_dir=cache_dir)
