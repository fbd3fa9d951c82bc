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

import contextlib
import functools
import hashlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pipeplan.analysis.concurrency import BATCH_ROWS
from pipeplan.analysis.evidence import TABLE_FORMAT, EvidenceError, MeasuredTable, request_key
from pipeplan.errors import PipeplanError

CALIBRATION_FORMAT = "pipeplan-calibration/1"
MODEL_SHA_MEMO = "model-sha256.memo"
"""File beside the tables remembering model sha256s (:func:`model_fingerprint`); not a ``*.json`` table."""
TARGETS = ("cpu", "reference")
"""Kernel targets ``pipeplan calibrate`` can time: ``cpu`` (:func:`measure_cpu`: the numpy + C kernel table
the stage executors of ``pipeplan run`` use, and the shared-memory ring hops of the local backend) and
``reference`` (:func:`measure_runtime`: the torch kernels of the direct replay)."""
HOP_ROUND_TRIPS = 200
"""Round trips per frame size of :func:`measure_hops` (after 20 warm-up ones)."""

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


def _sample_entries(samples: dict[str, list[float]], by_key: dict[str, Any]) -> list[dict[str, Any]]:
    """One table entry per request key: trimmed-mean seconds, median, spread (IQR / mean), the task's
    flops and bytes."""
    entries = []
    for key, xs in samples.items():
        t = by_key[key]
        q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
        mean = _trimmed_mean(xs)
        entries.append({"key": key, "op": str(t.op.data), "seconds": mean, "median_s": statistics.median(xs),
                        "flops": t.flops.value.data, "bytes": t.nbytes_read + t.nbytes_written,
                        "samples": len(xs), "rel_spread": (q[2] - q[0]) / mean if mean > 0 else 0.0})
    return entries


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
    from pipeplan.dialects.pplan import ints
    from pipeplan.dialects.runplan_build import single_plan
    from pipeplan.transforms.convert_runplan_to_pplan import lower_runplan

    out: dict[str, Any] = {}
    for t in lower_runplan(single_plan(plan_module), prompt_len=prompt_len).tasks():
        out.setdefault(request_key(t.op.data, t.dtypes(), ints(t.work)), t)
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
    from pipeplan.dialects.pplan import ints
    from pipeplan.dialects.runplan_build import single_plan
    from pipeplan.runtime.replay import replay_package
    from pipeplan.runtime.tokenizer import SPMTokenizer
    from pipeplan.transforms.convert_runplan_to_pplan import lower_runplan

    if tokens < 1 or repeats < 1 or prompt_len < 1 or not prompts:
        raise CalibrationError(f"calibration needs tokens, repeats and prompt_len >= 1 and a prompt (got {tokens}, "
                               f"{repeats}, {prompt_len})", code="invalid_request")
    import torch

    torch.set_num_threads(threads)
    work = Path(work) if work is not None else Path(tempfile.mkdtemp(prefix="pipeplan-calibrate-"))
    pkg = compile_plan_to_package(plan_module, "virtual-queue", ["roofline"], work / "pkg", pool=pool,
                                  prompt_len=prompt_len, decode_tokens=1)
    tasks = {t.task_id: t for t in lower_runplan(single_plan(plan_module), prompt_len=prompt_len).tasks()}
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
                samples.setdefault(request_key(t.op.data, t.dtypes(), ints(t.work)), []).append(secs)
    by_key = {request_key(t.op.data, t.dtypes(), ints(t.work)): t for t in tasks.values()}
    entries = _sample_entries(samples, by_key)
    return {"format": TABLE_FORMAT, "created_unix": time.time(),
            "machine": {"platform": platform.platform(), "python": sys.version.split()[0], "torch": torch.__version__,
                        "threads": threads, "kernels": "pipeplan.runtime.kernels.reference"},
            "method": {"mode": "runtime", "decode_tokens": tokens, "repeats": repeats, "prompt_len": prompt_len,
                       "prompts": list(prompts), "statistic": "10%-trimmed mean of the charged seconds"},
            "entries": sorted(entries, key=lambda e: e["key"])}


def merge_tables(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> dict[str, Any]:
    """``new`` with the entries of ``old`` whose keys ``new`` lacks (keys of other plans stay), the
    ``runtime`` sections of ``old``'s other stage counts, and ``old``'s Ray loop of a stage count whose new section
    has none (a local calibration keeps the ``--backend ray`` measurement)."""
    out = dict(new)
    if old is None:
        return out
    mine = {e["key"] for e in new["entries"]}
    extra = [e for e in old.get("entries", []) if isinstance(e, dict) and e.get("key") not in mine]
    out["entries"] = sorted([*new["entries"], *extra], key=lambda e: e["key"])
    runtime = old.get("runtime")
    if isinstance(runtime, dict) and runtime:
        fresh = dict(new.get("runtime") or {})
        for s, sec in fresh.items():
            was = runtime.get(s)
            if isinstance(sec, dict) and "ray_loop" not in sec and isinstance(was, dict) and "ray_loop" in was:
                fresh[s] = {**sec, "ray_loop": was["ray_loop"]}
        out["runtime"] = {**runtime, **fresh}
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
    return EvidenceChoice((f"measured:{path}", "roofline"), "calibrated", path,
                          f"evidence: calibrated ({path}) for the {target} kernels",
                          {"keys": len(table.entries), "target": target})


def plan_model_files(plan_module) -> list[str] | None:
    """The GGUF file(s) a RunPlan module names (``model.files``); None when it names none."""
    from pipeplan.dialects.runplan_build import single_plan
    from xdsl.utils.exceptions import VerifyException

    try:
        files = list(single_plan(plan_module).facts().files or ())
    except (PipeplanError, VerifyException):
        return None
    return [str(f) for f in files] or None


def plan_evidence(explicit: Sequence[str] | None, plan, *, target: str | Sequence[str] = ("cpu", "reference"),
                  threads: int = 1, cache_dir: str | os.PathLike[str] | None = None) -> EvidenceChoice:
    """:func:`select_evidence` for a RunPlan (module, IR text or path; its ``model.files``): the first of the
    kernel targets ``target`` with a usable calibration (default: ``cpu``, else ``reference``), else the first
    target's roofline line. A plan that cannot be read is left to the compiler's diagnostic: roofline is
    chosen here and no error raised."""
    if explicit:
        return select_evidence(explicit, None)
    try:
        from pipeplan.compiler.replay_package import _parse_plan

        module = _parse_plan(plan)
    except PipeplanError:
        return EvidenceChoice(("roofline",), "roofline", None, "evidence: roofline (the plan could not be read)")
    files = plan_model_files(module)
    targets = (target,) if isinstance(target, str) else tuple(target)
    choices = []
    for t in targets:
        choice = select_evidence(None, files, target=t, threads=threads, cache_dir=cache_dir)
        if choice.kind == "calibrated":
            return choice
        choices.append(choice)
    return choices[0]


# --------------------------------------------------------------------------- target cpu
def measure_hops(frame_bytes: Sequence[int], *, round_trips: int = HOP_ROUND_TRIPS) -> list[dict[str, Any]]:
    """The local backend's transport hop per frame size: a spawned process echoes float32 frames of
    ``ceil(bytes / 4)`` values through two shared-memory rings (:func:`pipeplan.runtime.shm_ring.echo_loop`,
    as ``bench/decode.py``). Per size: ``hop_s`` (median round trip / 2: copy in, wake-up, copy out),
    ``send_s`` (median time of the producer's ``send`` call) and ``round_trips``.

    Raises CalibrationError(invalid_request) for no size, a size < 1 or round_trips < 1;
    CalibrationError(transport) when the echo process does not answer (5 s per frame).
    """
    import multiprocessing as mp

    import numpy as np
    from pipeplan.plan_types import ObjectSpec, RingSpec
    from pipeplan.runtime.shm_ring import ShmTransport, echo_loop
    from pipeplan.runtime.transport import DATA, SHUTDOWN, EdgeRoute, Frame

    sizes = sorted({int(b) for b in frame_bytes})
    if not sizes or sizes[0] < 1 or round_trips < 1:
        raise CalibrationError(f"hop measurement needs frame sizes >= 1 and round trips >= 1 (got {sizes[:4]}, "
                               f"{round_trips})", code="invalid_request")
    most = -(-sizes[-1] // 4)
    spec = ObjectSpec("activation", "f32", 4, (1, most), "row_major", 64, most * 4)
    rs = RingSpec(2, spec.max_extent)
    routes = {"a": EdgeRoute("a", "activation", "orchestrator", "n1", spec, rs),
              "b": EdgeRoute("b", "activation", "n1", "orchestrator", spec, rs)}
    ctx = mp.get_context("spawn")
    t = ShmTransport.create(routes, ctx)
    proc = ctx.Process(target=echo_loop, args=(t, "n1", "a", "orchestrator", "b"), daemon=True)
    proc.start()
    out = []
    try:
        tx, rx = t.open_send("n1", "a"), t.open_recv("orchestrator", "b")
        clock = time.perf_counter
        for nbytes in sizes:
            x = np.random.default_rng(nbytes).standard_normal((1, -(-nbytes // 4))).astype(np.float32)
            hops, sends = [], []
            for i in range(20 + round_trips):
                t0 = clock()
                tx.send(Frame(DATA, 0, i, x))
                t1 = clock()
                if rx.recv(timeout=5.0) is None:
                    raise CalibrationError(f"hop measurement: the echo process did not answer a {nbytes}-byte frame "
                                           f"within 5 s", code="transport")
                if i >= 20:
                    hops.append((clock() - t0) / 2)
                    sends.append(t1 - t0)
            out.append({"bytes": nbytes, "hop_s": statistics.median(hops), "send_s": statistics.median(sends),
                        "round_trips": round_trips})
        tx.send(Frame(SHUTDOWN))
        rx.recv(timeout=5.0)
        proc.join(5)
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join(5)
        t.unlink()
    return out


def hop_seconds(hops: Sequence[Mapping[str, Any]], nbytes: int) -> tuple[float, float]:
    """``(hop_s, send_s)`` of a frame of ``nbytes`` from :func:`measure_hops` rows: the row of that size, else
    linear interpolation between the two nearest sizes (the nearest one outside the measured range)."""
    import numpy as np

    rows = sorted(hops, key=lambda r: r["bytes"])
    xs = [r["bytes"] for r in rows]
    return (float(np.interp(nbytes, xs, [r["hop_s"] for r in rows])),
            float(np.interp(nbytes, xs, [r["send_s"] for r in rows])))


class _TimedKernels:
    """A kernel module for :class:`~pipeplan.runtime.program.StageExecutor` whose ``KERNELS`` log every call
    as ``(kernel, t0, t1)`` in ``log``; every other attribute (hooks, ``ARRAYS``) is the wrapped module's."""

    def __init__(self, module: Any):
        import types

        self.log: list[tuple[str, float, float]] = []
        proxy = types.ModuleType(f"{module.__name__}.timed")
        proxy.__dict__.update({k: v for k, v in vars(module).items() if not k.startswith("__")})
        proxy.KERNELS = {k: self._wrap(k, f) for k, f in module.KERNELS.items()}  # type: ignore[attr-defined]
        self.module = proxy

    def _wrap(self, name: str, fn: Any) -> Any:
        log, clock = self.log, time.perf_counter

        def timed(*a: Any, **kw: Any) -> Any:
            t0 = clock()
            r = fn(*a, **kw)
            log.append((name, t0, clock()))
            return r

        return timed


def measure_cpu(plan_module, model: str | Path, *, pool: str | Path | None = None, prompt_len: int = 8,
                tokens: int = 8, repeats: int = 1, threads: int = 1, prompts: Sequence[str] = CALIBRATION_PROMPTS,
                work: Path | None = None, round_trips: int = HOP_ROUND_TRIPS) -> dict[str, Any]:
    """The measured table (:data:`TABLE_FORMAT`) of the RunPlan ``plan_module`` on the ``cpu`` target.

    The package is compiled into ``work/pkg``; each stage's compiled step programs are bound to
    :mod:`pipeplan.runtime.kernels.cpu` (weights in their GGUF types, the executor ``pipeplan run``'s stage
    workers use, ``threads`` threads) and run stage after stage on the calibration prompts (one warm-up
    run, then ``repeats`` per prompt, ``prompt_len``-row prefill chunks, ``tokens`` decode steps). A stage
    step's wall time is charged to its kernels: each from the end of the one before (the first from the
    step's start) to its end, the last also the step's tail, so the charges sum to the step; ``argmax``
    is the sample. ``send``/``recv`` are priced from :func:`measure_hops` on the plan's frame sizes: an
    inter-stage ``send`` its producer's call (at most the hop), the ``recv`` the rest of the hop; the token loop (stage 0's
    ``recv``, the last stage's ``send``) is a ring hop through the orchestrator on each side, so each of
    them is a whole hop. The table's ``transport`` lists the hop rows.

    Raises the compiler's / loader's typed errors; CalibrationError(invalid_request) for bad counts,
    CalibrationError(measure_mismatch) when the executor's kernel calls are not the step's instructions.
    """
    import numpy as np
    from pipeplan.compiler.replay_package import compile_plan_to_package
    from pipeplan.dialects.pplan import ints
    from pipeplan.dialects.runplan_build import single_plan
    from pipeplan.dialects.vmachine import SampleOp, StageOp, abi_of
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.runtime.compiled import load_package, stage_programs
    from pipeplan.runtime.kernels import cpu
    from pipeplan.runtime.loader import stage_slices
    from pipeplan.runtime.program import StageExecutor, is_cache
    from pipeplan.runtime.tokenizer import SPMTokenizer
    from pipeplan.transforms.convert_cplan_to_vmachine import hparams_of
    from pipeplan.transforms.convert_runplan_to_pplan import lower_runplan

    if tokens < 1 or repeats < 1 or prompt_len < 1 or not prompts or round_trips < 1:
        raise CalibrationError(f"calibration needs tokens, repeats, prompt_len and round trips >= 1 and a prompt "
                               f"(got {tokens}, {repeats}, {prompt_len}, {round_trips})", code="invalid_request")
    work = Path(work) if work is not None else Path(tempfile.mkdtemp(prefix="pipeplan-calibrate-"))
    pkg_dir = compile_plan_to_package(plan_module, "virtual-queue", ["roofline"], work / "pkg", pool=pool,
                                      prompt_len=prompt_len, decode_tokens=1)
    tasks = {t.task_id: t for t in lower_runplan(single_plan(plan_module), prompt_len=prompt_len).tasks()}

    def key_of(t: Any) -> str:
        return request_key(t.op.data, t.dtypes(), ints(t.work))

    pkg = load_package(pkg_dir, verify=False)
    abi = abi_of(pkg.program)
    hp = hparams_of(abi)
    facts = read_model_facts(str(model))
    programs = stage_programs(pkg.program, pkg.lineage)
    n = len(programs)
    L = int(abi["max_seq_len"])
    timed = _TimedKernels(cpu)
    klog = timed.log
    rows = programs[0]["prefill"].rows if "prefill" in programs[0] else 1
    batch_rows = [r for r in BATCH_ROWS if r == 1 or r <= rows]  # decode frames calibrated: 1 .. the prefill rows
    stages = []
    for s in sorted(programs):
        steps = programs[s]
        so = next(o for o in pkg.program.body.block.ops if isinstance(o, StageOp) and o.index.value.data == s)
        first = any(c.kernel == "embedding_gather" for sp in steps.values() for c in sp.calls)
        last = any(c.kernel == "last_row" for sp in steps.values() for c in sp.calls)
        weights = cpu.load_stage_weights(list(facts.files),
                                         stage_slices(facts, so.layer_start.value.data, so.layer_end.value.data,
                                                      first, last))
        shared: dict[str, Any] = {}
        exs = {}
        for name, sp in steps.items():
            fresh = iter(list(dict.fromkeys(x for c in sp.calls for x in c.inputs if is_cache(x))))

            def allocate(shape: tuple[int, ...], fresh: Any = fresh, shared: dict[str, Any] = shared) -> Any:
                x = next(fresh)
                if x not in shared:
                    shared[x] = cpu.allocate(shape)
                return shared[x]

            exs[name] = StageExecutor(hp, list(sp.calls), weights, L, timed.module, num_threads=threads,
                                      allocate=allocate)
        if len(batch_rows) > 1 and "decode" in steps:  # the runtime's batched decode frames: one slot per row
            exs[BATCHED] = StageExecutor(hp, list(steps["decode"].calls), weights, L, timed.module,
                                         num_threads=threads, slots=batch_rows[-1])
        stages.append((steps, exs, last))
    cmd_task = {}  # instruction id -> task of its command
    for steps in programs.values():
        for sp in steps.values():
            for o in sp.order:
                if hasattr(o, "cmd"):
                    cmd_task[o.id.data] = tasks[o.cmd.data.removeprefix("cmd.")]
    samples: dict[str, list[float]] = {}
    clock = time.perf_counter
    argmax = cpu.KERNELS["argmax"]

    def run_instance(step: str, ids: list[int], pos: int, keep: bool) -> int:
        x: Any = np.asarray(ids, dtype=np.int64)
        token = -1
        for s, (steps, exs, last) in enumerate(stages):
            sp, ex = steps[step], exs[step]
            k0 = len(klog)
            ex.n_past = pos
            t0 = clock()
            x = ex.forward(x, pos, last_only=last)
            t1 = clock()
            got = klog[k0:]
            if [g[0] for g in got] != [k.kernel.data for k in sp.kernels]:
                raise CalibrationError(f"stage {s} step {step}: the executor called {len(got)} kernels for "
                                       f"{len(sp.kernels)} instructions", code="measure_mismatch")
            if keep:
                prev = t0
                for j, (k, (_, _, end)) in enumerate(zip(sp.kernels, got)):
                    tail = t1 - end if j == len(got) - 1 else 0.0
                    samples.setdefault(key_of(cmd_task[k.id.data]), []).append(end - prev + tail)
                    prev = end
            if last:
                t2 = clock()
                token = int(argmax(np.asarray(x)[-1:])[0])
                if keep:
                    for o in sp.order:
                        if isinstance(o, SampleOp):
                            samples.setdefault(key_of(cmd_task[o.id.data]), []).append(clock() - t2)
            else:
                x = np.array(x, copy=True)  # the next stage's copy of the frame (a ring's copy out)
        return token

    tok = SPMTokenizer.from_gguf(model)
    steps0 = programs[0]
    for r, prompt in enumerate((prompts[0], *[p for p in prompts for _ in range(repeats)])):
        keep = r > 0
        ids = _prompt_ids(tok, prompt, prompt_len)
        pos, t = 0, -1
        for k in range(0, len(ids), rows):
            chunk = ids[k:k + rows]
            t = run_instance("prefill" if "prefill" in steps0 else "decode", chunk, pos, keep)
            pos += len(chunk)
        for _ in range(tokens):
            t = run_instance("decode", [t], pos, keep)
            pos += 1
    ref_pos = prompt_len + (tokens - 1) / 2  # the mean KV position of the calibrated decode steps
    frame_rows = _measure_frame_rows(stages, batch_rows, samples=samples, cmd_task=cmd_task, key_of=key_of,
                                     repeats=max(7, 2 * repeats), np=np, position=min(L - 1, round(ref_pos)))
    kv_pos = kv_positions(prompt_len, tokens, L)
    kv_rows = _measure_kv_rows(stages, kv_pos, klog=klog, repeats=max(7, 2 * repeats), np=np)
    # transfers: the ring hops of the plan's frame sizes
    transfer = {key_of(t): t for t in tasks.values() if t.op.data in ("send", "recv")}
    hops = measure_hops(sorted({int(t.nbytes_read + t.nbytes_written) // 2 or 1
                                for t in transfer.values()}), round_trips=round_trips)
    last_stage = n - 1
    hop_entries = {}
    for t in tasks.values():
        if t.op.data not in ("send", "recv"):
            continue
        stage = t.stage_index
        nbytes = int(t.nbytes_read + t.nbytes_written) // 2 or 1
        hop_s, send_s = hop_seconds(hops, nbytes)
        loop = (t.op.data == "recv" and stage == 0) or (t.op.data == "send" and stage == last_stage)
        send_part = min(send_s, hop_s)
        secs = hop_s if loop else (send_part if t.op.data == "send" else hop_s - send_part)
        hop_entries[key_of(t)] = (t, secs)
    by_key = {key_of(t): t for t in tasks.values()}
    entries = _sample_entries(samples, by_key)
    for key, (t, secs) in hop_entries.items():
        entries.append({"key": key, "op": str(t.op.data), "seconds": secs, "median_s": secs, "flops": 0,
                        "bytes": t.nbytes_read + t.nbytes_written, "samples": round_trips,
                        "rel_spread": 0.05})
    return {"format": TABLE_FORMAT, "created_unix": time.time(),
            "machine": {"platform": platform.platform(), "python": sys.version.split()[0], "threads": threads,
                        "kernels": "pipeplan.runtime.kernels.cpu"},
            "method": {"mode": "cpu", "decode_tokens": tokens, "repeats": repeats, "prompt_len": prompt_len,
                       "prompts": list(prompts), "statistic": "10%-trimmed mean of the charged seconds; hops: "
                       "median round trip / 2 of the local shared-memory rings"},
            "transport": {"kind": "shm_ring", "hops": hops},
            "runtime": {str(n): {"frame_rows": list(BATCH_ROWS[:len(frame_rows[0])]), "frame_rows_s": frame_rows,
                                 "kv_pos": kv_pos, "kv_row_s": kv_rows,
                                 "kv_ref_pos": ref_pos}},
            "entries": sorted(entries, key=lambda e: e["key"])}


BATCHED = "decode.batched"
"""Key of a stage's batched-decode executor in :func:`measure_cpu` (the decode step bound with one KV slot per
row of the largest batched frame)."""


def _measure_frame_rows(stages: Sequence[Any], rows_list: Sequence[int], *, samples: Mapping[str, list[float]],
                        cmd_task: Mapping[str, Any], key_of: Any, repeats: int, np: Any,
                        position: int) -> list[list[float]]:
    """Per stage, the seconds of a decode frame of r rows for r in ``rows_list`` (1 first). r = 1: the decode
    step's calibrated kernels (trimmed means of ``samples``, sampling included). r > 1: that step's kernels times
    the ratio of a micro-batched frame as the runtime runs it
    (:meth:`~pipeplan.runtime.program.StageExecutor.forward_segments` of the decode step over r one-row segments
    in r KV slots, every one at ``position``) to the same frame of one row, the two timed back to back (median
    over ``repeats`` rounds after a warm-up round, so a slower or faster patch of the machine moves both), plus
    r samples on the last stage; never below the frame of fewer rows."""
    clock = time.perf_counter
    x0 = np.asarray([1 + (7 * j) % 13 for j in range(max(rows_list))], dtype=np.int64)
    ratios: list[dict[int, list[float]]] = [{r: [] for r in rows_list[1:]} for _ in stages]
    for rep in range(repeats + 1):  # the first round warms the steps up and is not kept
        secs: list[dict[int, float]] = [{} for _ in stages]
        for r in rows_list:
            x: Any = x0[:r]
            for s, (_steps, exs, last) in enumerate(stages):
                ex = exs.get(BATCHED)
                if ex is None:
                    continue
                for k in range(r):
                    ex.n_pasts[k] = position
                t0 = clock()
                y = ex.forward_segments(x, [(k, position, 1) for k in range(r)], last_only=last)
                secs[s][r] = clock() - t0
                x = y if last else np.array(y, copy=True)
        if rep:
            for s, got in enumerate(secs):
                for r in rows_list[1:]:
                    if got.get(rows_list[0], 0.0) > 0 and r in got:
                        ratios[s][r].append(got[r] / got[rows_list[0]])
    out = []
    for s, (steps, _exs, _last) in enumerate(stages):
        dec = steps["decode"]
        kernels = sum(_trimmed_mean(list(samples[key_of(cmd_task[k.id.data])])) for k in dec.kernels)
        sample = sum(_trimmed_mean(list(samples[key_of(cmd_task[o.id.data])]))
                     for o in dec.order if o.__class__.__name__ == "SampleOp")
        row = [kernels + sample]
        for r in rows_list[1:]:
            xs = ratios[s][r]
            row.append(max(row[-1], kernels * statistics.median(xs) + r * sample if xs else row[0] * r))
        out.append(row)
    return out


def kv_positions(prompt_len: int, tokens: int, max_seq_len: int) -> list[int]:
    """KV positions :func:`_measure_kv_rows` measures: the calibrated decode positions' first and one past their
    last (``prompt_len``, ``prompt_len + tokens``), then powers of two up to the last position
    ``max_seq_len - 1`` (included), at most 10."""
    last = max(0, max_seq_len - 1)
    pos = {min(prompt_len, last), min(prompt_len + tokens, last), last}
    p = 1
    while p < last:
        if p > prompt_len + tokens:
            pos.add(p)
        p *= 2
    out = sorted(pos)
    while len(out) > 10:  # thin the middle, keep both ends
        out.pop(len(out) // 2)
    return out


def _measure_kv_rows(stages: Sequence[Any], positions: Sequence[int], *, klog: list[Any], repeats: int,
                     np: Any) -> list[list[float]]:
    """Per stage, the seconds of the ``attention`` kernels of one decode row at each KV position of
    ``positions`` (the decode step run stage after stage at that position, the kernels charged as
    :func:`measure_cpu` charges them; median of ``repeats`` runs after one warm-up). The KV cache rows
    written there are scratch (calibration only)."""
    clock = time.perf_counter
    got_s: list[list[list[float]]] = [[[] for _ in positions] for _ in stages]
    for rep in range(repeats + 1):
        for j, pos in enumerate(positions):
            x: Any = np.asarray([1 + (7 * j) % 13], dtype=np.int64)
            for s, (_steps, exs, last) in enumerate(stages):
                ex = exs["decode"]
                k0 = len(klog)
                ex.n_past = pos
                t0 = clock()
                y = ex.forward(x, pos, last_only=last)
                prev, secs = t0, 0.0
                for name, _, end in klog[k0:]:
                    if name == "attention":
                        secs += end - prev
                    prev = end
                if rep:
                    got_s[s][j].append(secs)
                x = y if last else np.array(y, copy=True)
    return [[statistics.median(xs) for xs in per] for per in got_s]


LOOP_TOKENS = 24
"""Most generated tokens per sequence of :func:`measure_loop`'s runs (``pipeplan calibrate``: ``--tokens`` + 8,
at least 8, within the plan's positions)."""


def loop_sequences(stages: int) -> int:
    """Sequences of :func:`measure_loop`'s busy run: ``2 S + 1`` (every stage has a frame waiting)."""
    return 2 * stages + 1


def _pipeline_rate(pipe: Any, vocab: int, n: int, prompt_len: int, tokens: int, repeats: int) -> float:
    """Best steady-state aggregate decode tok/s (:func:`~pipeplan.analysis.concurrency.throughput_summary`) of
    ``n`` greedy requests at once over ``repeats`` runs."""
    from pipeplan.analysis.concurrency import throughput_summary
    from pipeplan.runtime.orchestrator import GenRequest

    best = 0.0
    for _ in range(repeats):
        reqs = [GenRequest([1] + [(5 + 29 * k + 11 * j) % (vocab - 3) + 3 for j in range(prompt_len - 1)], tokens)
                for k in range(n)]
        t0 = time.perf_counter()
        got = pipe.generate_concurrent(reqs)
        best = max(best, throughput_summary([[t - t0 for t in g.token_times] for g in got])["aggregate_tok_s"])
    return best


CONTENTION_MAX = 4.0
"""Largest memory contention :func:`fit_runtime_terms` fits (each of two computing stages 5x slower)."""


def _with_terms(costs: Any, cores: int, frame_s: float, wake_s: float, contention: float,
                work_scale: float = 1.0) -> Any:
    """``costs`` with the runtime terms the loop fits (``orch_s = frame_s``) on ``cores`` cores, every stage's
    work times ``work_scale``."""
    return replace(costs.scaled(work_scale), frame_s=frame_s, orch_s=frame_s, wake_s=wake_s, cores=cores,
                   contention=contention)


def fit_runtime_terms(costs: Any, rate_one: float, rate_busy: float, n_busy: int, prompt_len: int, tokens: int,
                      cores: int) -> dict[str, float]:
    """``{"wake_s", "frame_s", "contention", "work_scale"}`` of the runtime model (:mod:`pipeplan.analysis.concurrency`,
    "Runtime model") that make :func:`~pipeplan.analysis.concurrency.predict_concurrent` of ``costs``
    (``cores`` cores, ``orch_s = frame_s``) give the measured aggregate rates of 1 sequence (one frame in
    flight, as ``pipeplan run``) and of ``n_busy`` sequences (the runtime's default micro-batches ``min(N, S)``).

    The one-sequence cycle ``1 / rate_one`` is the sum of the stages' work and hops plus the runtime's per-frame
    terms. Where it is shorter than the work and hops alone (the kernels ran faster in the pipeline than when they
    were timed one by one: the machine's speed drifts), the work is scaled to fit it (``work_scale`` < 1,
    :meth:`~pipeplan.analysis.concurrency.StageCosts.scaled`) and the per-frame terms are 0; else ``work_scale``
    is 1.

    When the one-sequence run's ring consumers spin (:func:`~pipeplan.analysis.concurrency.consumers_spin`:
    two cores or more) it pays no wake-up and runs one stage at a time: ``frame_s`` from its cycle, then the
    ``contention`` of stages computing at once by bisection on the busy rate (``wake_s`` 0: a woken consumer
    costs its ring hop, measured with the hops). On one core: ``wake_s`` from the one-sequence cycle and
    ``frame_s`` by bisection on the busy rate (three alternations), ``contention`` 0 (one stage computes at a
    time). Terms that the rates cannot make positive are 0."""
    from pipeplan.analysis.concurrency import consumers_spin, default_micro_batches, predict_concurrent

    s = costs.stages
    hops, work = sum(costs.decode_hop_s), sum(costs.decode_s)
    cycle = 1.0 / rate_one if rate_one > 0 else hops + work
    scale = max(0.05, (cycle - hops) / work) if work > 0 and cycle < hops + work else 1.0
    costs = costs.scaled(scale)
    base = hops + sum(costs.decode_s)
    m_busy = default_micro_batches(n_busy, s)

    def rate(f: float, w: float, c: float = 0.0) -> float:
        return predict_concurrent(_with_terms(costs, cores, f, w, c), n_busy, prompt_len, tokens,
                                  micro_batches=m_busy).aggregate_tok_s

    def solve(fn: Callable[[float], float], top: float) -> float:
        """The x in [0, top] where the decreasing ``fn(x)`` meets ``rate_busy`` (0 when fn(0) is at or below it,
        or when x does not move fn: e.g. contention with one stage and one frame in flight)."""
        lo, hi = 0.0, top
        f0 = fn(lo)
        if f0 <= rate_busy or abs(f0 - fn(hi)) <= 1e-9 * f0:
            return 0.0
        for _ in range(40):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if fn(mid) > rate_busy else (lo, mid)
        return (lo + hi) / 2

    if consumers_spin(s, 1, cores):
        frame = max(0.0, (cycle - base) / (s + 1))
        contention = solve(functools.partial(rate, frame, 0.0), CONTENTION_MAX)
        return {"wake_s": 0.0, "frame_s": frame, "contention": contention, "work_scale": scale}
    frame = wake = 0.0
    for _ in range(3):
        wake = max(0.0, (cycle - base - (s + 1) * frame) / (s + 1))
        frame = solve(functools.partial(rate, w=wake), max(base, 1e-6))
    return {"wake_s": wake, "frame_s": frame, "contention": 0.0, "work_scale": scale}


def measure_loop(plan_module, package: str | Path, *, prompt_len: int = 8, tokens: int = LOOP_TOKENS,
                 repeats: int = 4, threads: int = 1, backend: str = "local") -> dict[str, Any]:
    """The runtime's own costs, measured on the plan's local pipeline (one process per stage, ``threads``
    threads each, the cpu kernels, the package's stage programs): aggregate decode tok/s of 1 sequence and of
    :func:`loop_sequences` sequences (``tokens`` each; best of ``repeats``), and the runtime terms
    :func:`fit_runtime_terms` derives from them for the package's costs (its predicted timeline, the
    calibrated kernels and hops). The plan must carry ``parallel >= loop_sequences(S)``. ``backend="ray"``: the
    same on Ray actors (the Ray connected in this process, :func:`ray_session`), the costs with the relay chain of
    the package's calibration in place of the ring hops (``stage_costs(package, backend="ray")``).
    Returns ``{"sequences", "tokens", "rate_one_tok_s", "rate_busy_tok_s", "cores", "wake_s", "frame_s", "orch_s",
    "contention", "work_scale", "fit_residual"}``; ``fit_residual`` is the largest relative error of the fitted model on the two measured rates
    (large when the busy run was not faster than one sequence: a loaded machine).
    Raises StageFault / RunRequestError from the pipeline."""
    from pipeplan.analysis.concurrency import predict_concurrent, stage_costs
    from pipeplan.dialects.runplan_build import project_provisions, single_plan
    from pipeplan.runtime.backends import usable_cores
    from pipeplan.runtime.compiled import load_compiled_stages_fast
    from pipeplan.runtime.orchestrator import GenRequest, Pipeline

    costs = stage_costs(package, prefill_rows=prompt_len, backend=backend)
    n_busy = loop_sequences(costs.stages)
    vocab = int(single_plan(plan_module).facts().vocab_size)
    programs = load_compiled_stages_fast(package)
    rates = []
    for n in (1, n_busy):  # a pipeline each: its frames in flight set the rings' spin (as `run` and `serve`)
        with Pipeline(project_provisions(plan_module), backend=backend, programs=programs,
                      kernels="pipeplan.runtime.kernels.cpu", num_threads=threads, parallel=n) as pipe:
            # first touch of weights, caches and every KV slot and position the timed runs use
            pipe.generate_concurrent([GenRequest([1, 2], prompt_len + tokens - 2) for _ in range(n)])
            rates.append(_pipeline_rate(pipe, vocab, n, prompt_len, tokens, repeats))
    one, busy = rates
    cores = usable_cores()
    terms = fit_runtime_terms(costs, one, busy, n_busy, prompt_len, tokens, cores)
    fitted = _with_terms(costs, cores, terms["frame_s"], terms["wake_s"], terms["contention"], terms["work_scale"])
    back = [predict_concurrent(fitted, n, prompt_len, tokens).aggregate_tok_s for n in (1, n_busy)]
    residual = max(abs(b - m) / m for b, m in zip(back, (one, busy), strict=True) if m > 0) if one > 0 else 1.0
    return {"sequences": n_busy, "tokens": tokens, "rate_one_tok_s": one, "rate_busy_tok_s": busy, "cores": cores,
            "wake_s": terms["wake_s"], "frame_s": terms["frame_s"], "orch_s": terms["frame_s"],
            "contention": terms["contention"], "work_scale": terms["work_scale"], "fit_residual": residual}


@contextlib.contextmanager
def ray_session(plan_module, address: str | None = None) -> Iterator[dict[str, str]]:
    """Ray connected for the plan's stages while the block runs, as ``pipeplan run --backend ray`` connects
    (``address``: a running cluster; None: the Ray already connected in this process, else an embedded local
    instance carrying every node id, shut down afterwards). Yields ``{plan node id: Ray node id}`` of every stage.
    Raises RayUnavailableError, RunPlanRejection (``unknown_node`` / ``ambiguous_node``)."""
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.runtime.ray_backend import make_ray_backend

    backend = make_ray_backend(address)
    try:
        yield backend.check_placement(sorted(project_provisions(plan_module), key=lambda p: p.stage))
    finally:
        backend.stop()


def measure_ray_loop(plan_module, ids: Mapping[str, str], *, frames: int | None = None) -> dict[str, Any]:
    """The relay chain of the plan's stages on the connected Ray (:func:`pipeplan.runtime.ray_chain.measure_chain`;
    ``ids``: :func:`ray_session`'s placement), over the run's transport and channel wait
    (``$PIPEPLAN_RAY_TRANSPORT``, ``$PIPEPLAN_RAY_WAIT``), one activation row of the model. Returns its figures in
    seconds (``loop_s``, ``relay_cpu_s``, ``driver_cpu_s``, ...); every actor is gone when it returns. Raises
    BackendError, TimeoutError."""
    from pipeplan.dialects.runplan_build import project_provisions, single_plan
    from pipeplan.runtime.ray_backend import RayBackend
    from pipeplan.runtime.ray_chain import CHAIN_FRAMES, measure_chain

    provisions = sorted(project_provisions(plan_module), key=lambda p: p.stage)
    n_embd = int(single_plan(plan_module).facts().embedding_length)
    conf = RayBackend()  # the run's transport and wait, from the environment
    return measure_chain(ids, [p.node_id for p in provisions], n_embd, mode=conf.ray_transport, wait=conf.ray_wait,
                         frames=frames or CHAIN_FRAMES, tag="calibrate-chain")
