"""TimelineBundle: predicted (projection + simulation) or measured (replay) timelines, their Chrome
trace export, and the predicted-vs-measured comparison.

Seeds/003 "Timing and simulation projection": "the projection and trace are published with
concrete, evidence and policy digests in a TimelineBundle" (AB-T-4); "First implementation
milestone" 7: "establish a command/event correspondence level between simulation and replay"
(AB-D-2).

A bundle is plain JSON (format :data:`BUNDLE_FORMAT`)::

    {"format": "pipeplan-timeline/1", "kind": "predicted" | "measured",
     "digests": {"concrete": "sha256:…", "evidence": "…", "policy": "…", ...},
     "schedule": ["prefill", "decode", ...],          # the step instances, in order
     "events": [{"step", "iteration", "command", "instruction", "op", "stage", "device", "queue",
                 "engine", "link", "start_s", "end_s", "lineage"}, ...],
     "syncs": [{"kind": "signal" | "wait", "time_s", "command", "peer", "step", "iteration"}],
     "projection": {"makespan_s", "lo_makespan_s", "hi_makespan_s", "critical_path": [...],
                    "contended": n} | null,
     "meta": {...}}

Times are seconds from the start of the run. Key of an event: ``(step, iteration, command)``;
every command appears once per step instance.

Chrome trace (the Trace Event Format that Perfetto and chrome://tracing open): one process per
device (``pid``), one thread (track) per queue of that device, and one process ``links`` with a
track per link; commands are complete events (``ph = "X"``, microseconds) named by op and command,
with the lineage in ``args``; each step instance is an enclosing ``X`` span on every track it
touches (category ``step``), so commands nest under their step; signal/wait are instant events.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pipeplan.analysis.simulate import Projection, Simulation
from pipeplan.errors import PipeplanError
from pipeplan.files.atomic import OutputPathError, check_output_file, write_file_atomic
from pipeplan.files.paths import check_input_file

BUNDLE_FORMAT = "pipeplan-timeline/1"
LEVELS = ("none", "command", "instruction", "order")
"""Correspondence levels, each including the previous: ``command`` — the same (step, iteration,
command) keys on both sides, each once; ``instruction`` — each key maps to the same machine
instruction on both sides; ``order`` — every queue runs its events in the same order."""


class TimelineError(PipeplanError):
    """A timeline file that is not a TimelineBundle (``code`` ``bad_timeline``)."""

    code = "bad_timeline"


def _non_finite(doc: Any, path: str = "") -> str | None:
    """The JSON path of the first non-finite float in ``doc`` (dicts, lists, tuples), or None."""
    if isinstance(doc, float):
        return None if math.isfinite(doc) else path or "<value>"
    if isinstance(doc, dict):
        for k, v in doc.items():
            got = _non_finite(v, f"{path}.{k}" if path else str(k))
            if got is not None:
                return got
    elif isinstance(doc, list | tuple):
        for i, v in enumerate(doc):
            got = _non_finite(v, f"{path}[{i}]")
            if got is not None:
                return got
    return None


def _event_name(e: TimelineEvent | SyncEvent) -> str:
    return f"{e.step}#{e.iteration} command {e.command}"


def _check_ordered(b: TimelineBundle, what: str) -> None:
    """Raise TimelineError(bad_event_time) naming the first event with a negative ``start_s`` or an
    ``end_s`` before its ``start_s`` (times are seconds from the run's start)."""
    for e in b.events:
        if e.start_s < 0 or e.end_s < e.start_s:
            why = "starts before the run (negative time)" if e.start_s < 0 else "ends before it starts"
            raise TimelineError(f"{what}: event {_event_name(e)} has start_s = {e.start_s!r}, end_s = {e.end_s!r}: "
                                f"{why}", code="bad_event_time", where=e.command)


def _check_finite(b: TimelineBundle, what: str) -> None:
    """Raise TimelineError(non_finite) naming the first event (step#iteration and command) whose time is
    not finite, or the projection/meta field holding a non-finite number."""
    for e in b.events:
        for f in ("start_s", "end_s"):
            v = getattr(e, f)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise TimelineError(f"{what}: event {_event_name(e)} has {f} = {v!r}, not a finite number of seconds",
                                    code="non_finite", where=e.command)
    for s in b.syncs:
        if isinstance(s.time_s, bool) or not isinstance(s.time_s, int | float) or not math.isfinite(s.time_s):
            raise TimelineError(f"{what}: {s.kind} event {_event_name(s)} has time_s = {s.time_s!r}, not a finite "
                                f"number of seconds", code="non_finite", where=s.command)
    for name, doc in (("projection", b.projection), ("meta", b.meta)):
        bad = _non_finite(doc)
        if bad is not None:
            raise TimelineError(f"{what}: {name}.{bad} is not a finite number", code="non_finite", where=name)


def _json_text(doc: Any, what: str, **kw: Any) -> str:
    """``json.dumps(doc, allow_nan=False, sort_keys=True, **kw)`` + newline; a non-finite number left in
    ``doc`` is TimelineError(non_finite) naming its JSON path (never ``NaN``/``Infinity`` in a file)."""
    try:
        return json.dumps(doc, allow_nan=False, sort_keys=True, **kw) + "\n"
    except ValueError:
        raise TimelineError(f"{what}: {_non_finite(doc) or 'a value'} is not a finite number", code="non_finite",
                            where=what) from None


@dataclass(frozen=True)
class TimelineEvent:
    """One command execution (seconds from the run start). ``instruction`` is the machine
    instruction id ("" when the timeline was made before machine lowering)."""

    step: str
    iteration: int
    command: str
    instruction: str
    op: str
    stage: int
    device: str
    queue: str
    engine: str
    link: str
    start_s: float
    end_s: float
    lineage: str

    @property
    def key(self) -> tuple[str, int, str]:
        """``(step, iteration, command)``."""
        return (self.step, self.iteration, self.command)


@dataclass(frozen=True)
class SyncEvent:
    """A signal (the signalling command completed) or wait (the waiting command was released)."""

    kind: str
    time_s: float
    command: str
    peer: str
    step: str
    iteration: int


@dataclass
class TimelineBundle:
    """A predicted or measured timeline with the digests it is published under (module docstring)."""

    kind: str
    digests: dict[str, str]
    schedule: list[str]
    events: list[TimelineEvent]
    syncs: list[SyncEvent] = field(default_factory=list)
    projection: dict[str, Any] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ JSON
    def to_json(self) -> dict[str, Any]:
        """The JSON document (module docstring)."""
        return {"format": BUNDLE_FORMAT, "kind": self.kind, "digests": dict(sorted(self.digests.items())),
                "schedule": list(self.schedule), "events": [asdict(e) for e in self.events],
                "syncs": [asdict(s) for s in self.syncs], "projection": self.projection, "meta": self.meta}

    def dumps(self) -> str:
        """Deterministic text: sorted keys, 1-space indent, trailing newline. Raises TimelineError(non_finite)
        naming the event whose time (or the projection/meta field whose number) is NaN or infinite."""
        _check_finite(self, f"{self.kind} timeline")
        return _json_text(self.to_json(), f"{self.kind} timeline", indent=1)

    def write(self, path: str | Path, option: str = "--timeline") -> Path:
        """Write :meth:`dumps` to ``path`` atomically (:func:`~pipeplan.files.atomic.write_file_atomic`);
        returns it. Raises TimelineError(non_finite) before touching the path; OutputPathError (a path that
        is not a regular file, a missing directory, a failed write: no partial file)."""
        return write_file_atomic(path, self.dumps(), option)

    @classmethod
    def from_json(cls, doc: Any, where: str = "<timeline>") -> TimelineBundle:
        """Parse a bundle document. Raises TimelineError naming the file and the missing field
        (``bad_timeline``), or the event whose time is not a finite number (``non_finite``)."""
        if not isinstance(doc, dict) or doc.get("format") != BUNDLE_FORMAT:
            raise TimelineError(f"{where}: not a {BUNDLE_FORMAT} document", where=where)
        try:
            events = [TimelineEvent(**e) for e in doc["events"]]
            syncs = [SyncEvent(**s) for s in doc.get("syncs", [])]
            bundle = cls(str(doc["kind"]), dict(doc["digests"]), list(doc["schedule"]), events, syncs,
                         doc.get("projection"), dict(doc.get("meta", {})))
        except (KeyError, TypeError, ValueError) as e:
            raise TimelineError(f"{where}: malformed timeline bundle ({e})", where=where) from None
        _check_finite(bundle, where)
        return bundle

    @classmethod
    def read(cls, path: str | Path) -> TimelineBundle:
        """Read a bundle file (a regular file: a FIFO or device is refused before opening). Raises
        TimelineError (unreadable, not JSON, not a bundle; ``non_finite`` for a ``NaN``/``Infinity`` time)."""
        p = check_input_file(path, "timeline", TimelineError)
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))  # NaN/Infinity literals: rejected by from_json
        except (OSError, ValueError, RecursionError) as e:
            raise TimelineError(f"{path}: cannot read timeline: {e}", where=str(path)) from None
        return cls.from_json(doc, str(path))

    # ------------------------------------------------------------------ views
    def by_key(self) -> dict[tuple[str, int, str], TimelineEvent]:
        """Events keyed by ``(step, iteration, command)`` (the last one wins on duplicates)."""
        return {e.key: e for e in self.events}

    def instance_ends(self) -> list[tuple[str, int, float]]:
        """``(step, iteration, end_s)`` of every step instance, in schedule order."""
        ends: dict[tuple[str, int], float] = {}
        for e in self.events:
            k = (e.step, e.iteration)
            ends[k] = max(ends.get(k, 0.0), e.end_s)
        out = []
        it: dict[str, int] = {}
        for s in self.schedule:
            i = it.get(s, 0)
            it[s] = i + 1
            if (s, i) in ends:
                out.append((s, i, ends[(s, i)]))
        return out

    def token_latencies(self) -> list[float]:
        """Per decode token: end of its decode instance minus the end of the previous instance
        (the inter-token latency a user sees), in iteration order."""
        ends = self.instance_ends()
        return [e - ends[k - 1][2] for k, (s, _, e) in enumerate(ends) if s == "decode" and k > 0]

    def chrome_trace(self, prefix: str = "") -> dict[str, Any]:
        """The Chrome trace (module docstring) as a dict; ``prefix`` names the processes
        (``"predicted "``/``"measured "`` in a side-by-side trace)."""
        return {"traceEvents": _trace_events(self, prefix, 0), "displayTimeUnit": "ns",
                "otherData": {"kind": self.kind, **{f"digest.{k}": v for k, v in sorted(self.digests.items())}}}

    def write_chrome_trace(self, path: str | Path, option: str = "--trace") -> Path:
        """Write :meth:`chrome_trace` as JSON atomically; returns the path. Raises TimelineError(non_finite)
        naming the event with a NaN/infinite time; OutputPathError like :meth:`write`."""
        _check_finite(self, f"{self.kind} trace")
        return write_file_atomic(path, _json_text(self.chrome_trace(), f"{self.kind} trace"), option)


def _trace_events(b: TimelineBundle, prefix: str, pid_base: int) -> list[dict[str, Any]]:
    devices: list[str] = []
    tracks: dict[tuple[str, str], int] = {}
    links: list[str] = []
    for e in b.events:
        if e.device not in devices:
            devices.append(e.device)
        if (e.device, e.queue) not in tracks:
            tracks[(e.device, e.queue)] = sum(1 for k in tracks if k[0] == e.device) + 1
        if e.link and e.link not in links:
            links.append(e.link)
    pid = {d: pid_base + i + 1 for i, d in enumerate(devices)}
    link_pid = pid_base + len(devices) + 1
    out: list[dict[str, Any]] = []
    for d in devices:
        out.append({"ph": "M", "name": "process_name", "pid": pid[d], "tid": 0, "args": {"name": f"{prefix}device {d}"}})
        out.append({"ph": "M", "name": "process_sort_index", "pid": pid[d], "tid": 0, "args": {"sort_index": pid[d]}})
    for (d, q), tid in tracks.items():
        out.append({"ph": "M", "name": "thread_name", "pid": pid[d], "tid": tid, "args": {"name": f"queue {q}"}})
    if links:
        out.append({"ph": "M", "name": "process_name", "pid": link_pid, "tid": 0, "args": {"name": f"{prefix}links"}})
        for i, ln in enumerate(links):
            out.append({"ph": "M", "name": "thread_name", "pid": link_pid, "tid": i + 1, "args": {"name": f"link {ln}"}})
    spans: dict[tuple[int, int, str, int], list[float]] = {}

    def add_span(p: int, t: int, e: TimelineEvent) -> None:
        k = (p, t, e.step, e.iteration)
        s = spans.setdefault(k, [e.start_s, e.end_s])
        s[0], s[1] = min(s[0], e.start_s), max(s[1], e.end_s)

    for e in b.events:
        args = {"command": e.command, "instruction": e.instruction, "step": e.step, "iteration": e.iteration,
                "stage": e.stage, "lineage": e.lineage}
        name = f"{e.op} {e.command}"
        p, t = pid[e.device], tracks[(e.device, e.queue)]
        out.append({"ph": "X", "cat": "command", "name": name, "pid": p, "tid": t, "ts": e.start_s * 1e6,
                    "dur": max(0.0, e.end_s - e.start_s) * 1e6, "args": args})
        add_span(p, t, e)
        if e.link:
            lt = links.index(e.link) + 1
            out.append({"ph": "X", "cat": "transfer", "name": name, "pid": link_pid, "tid": lt,
                        "ts": e.start_s * 1e6, "dur": max(0.0, e.end_s - e.start_s) * 1e6, "args": args})
            add_span(link_pid, lt, e)
    for (p, t, step, it), (s0, s1) in spans.items():
        out.append({"ph": "X", "cat": "step", "name": f"{step}#{it}", "pid": p, "tid": t, "ts": s0 * 1e6,
                    "dur": (s1 - s0) * 1e6, "args": {"step": step, "iteration": it}})
    where = {e.key: (pid[e.device], tracks[(e.device, e.queue)]) for e in b.events}
    for s in b.syncs:
        p, t = where.get((s.step, s.iteration, s.command), (pid_base + 1, 1))
        out.append({"ph": "i", "s": "t", "cat": "sync", "name": f"{s.kind} {s.peer} -> {s.command}", "pid": p,
                    "tid": t, "ts": s.time_s * 1e6, "args": {"step": s.step, "iteration": s.iteration}})
    return out


# --------------------------------------------------------------------------- builders
def bundle_from_simulation(sim: Simulation, digests: Mapping[str, str], *, projection: Projection | None = None,
                           instructions: Mapping[str, str] | None = None,
                           meta: Mapping[str, Any] | None = None) -> TimelineBundle:
    """The predicted TimelineBundle of a simulation (AB-T-2, AB-T-4).

    ``instructions`` maps command id -> machine instruction id (after machine lowering);
    ``projection`` adds its makespan bounds and critical path (command ids, as ``step#it:cmd``).
    """
    cmds = sim.model.commands
    instructions = instructions or {}
    ev = []
    for iv in sim.intervals:
        c = cmds[iv.node.cmd]
        ev.append(TimelineEvent(iv.node.step, iv.node.iteration, c.id, instructions.get(c.id, ""), c.op, c.stage,
                                c.device, c.queue, c.engine, c.link, iv.start, iv.end, c.lineage))
    ev.sort(key=lambda e: (e.start_s, e.end_s, e.step, e.iteration, e.command))
    syncs = []
    for e in sim.events:
        if e.kind in ("signal", "wait"):
            n, p = sim.graph.nodes[e.node], sim.graph.nodes[e.peer]
            syncs.append(SyncEvent(e.kind, e.time, cmds[n.cmd].id, cmds[p.cmd].id, n.step, n.iteration))
    proj = None
    if projection is not None:
        g = projection.graph
        proj = {"makespan_s": projection.makespan, "lo_makespan_s": projection.lo_makespan,
                "hi_makespan_s": projection.hi_makespan, "contended": projection.contended,
                "critical_path": [f"{g.nodes[v].step}#{g.nodes[v].iteration}:{cmds[g.nodes[v].cmd].id}"
                                  for v in projection.critical_path]}
    return TimelineBundle("predicted", dict(digests), list(sim.schedule), ev, syncs, proj,
                          {"source": "pipeplan.analysis.simulate", "makespan_s": sim.makespan, **(meta or {})})


# --------------------------------------------------------------------------- comparison
def _q(xs: Sequence[float], q: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    k = (len(s) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


@dataclass(frozen=True)
class Comparison:
    """Result of :func:`compare`: the correspondence level reached (one of LEVELS) with the reason
    it stopped there, per-command relative errors (median over instances, by command id), per-token
    predicted/measured decode latencies and their relative errors."""

    level: str
    reason: str
    matched: int
    predicted_only: tuple[tuple[str, int, str], ...]
    measured_only: tuple[tuple[str, int, str], ...]
    command_errors: dict[str, float]
    token_predicted: tuple[float, ...]
    token_measured: tuple[float, ...]
    token_errors: tuple[float, ...]

    @property
    def token_median(self) -> float:
        """Median relative per-token latency error (0 when no decode tokens)."""
        return statistics.median(self.token_errors) if self.token_errors else 0.0

    @property
    def token_p90(self) -> float:
        """90th percentile (linear interpolation) of the relative per-token latency errors."""
        return _q(self.token_errors, 0.9)

    def to_json(self) -> dict[str, Any]:
        """A JSON summary (the worst 20 commands by error)."""
        worst = sorted(self.command_errors.items(), key=lambda kv: -abs(kv[1]))[:20]
        return {"level": self.level, "reason": self.reason, "matched": self.matched,
                "predicted_only": [list(k) for k in self.predicted_only[:20]],
                "measured_only": [list(k) for k in self.measured_only[:20]],
                "token_predicted_s": list(self.token_predicted), "token_measured_s": list(self.token_measured),
                "token_errors": list(self.token_errors), "token_error_median": self.token_median,
                "token_error_p90": self.token_p90, "worst_commands": [{"command": c, "rel_error": e} for c, e in worst]}


def compare(predicted: TimelineBundle, measured: TimelineBundle) -> Comparison:
    """Compare a predicted and a measured timeline (AB-D-2) over the step instances of their common
    schedule prefix (a run of 40 tokens against a prediction of 16 compares 16): the correspondence level, per-command
    errors ``(predicted - measured) / measured`` (median over instances; commands measured at 0 s are
    skipped) and per-token decode latency errors ``|p - m| / m`` (pairs in iteration order).

    Raises TimelineError(non_finite) when either side has an event time that is NaN or infinite, and
    TimelineError(bad_event_time) for a negative time or an event ending before it starts (no level is
    reported for times that are not times).
    """
    _check_finite(predicted, "predicted timeline")
    _check_finite(measured, "measured timeline")
    _check_ordered(predicted, "predicted timeline")
    _check_ordered(measured, "measured timeline")
    n_common = 0
    for a, b in zip(predicted.schedule, measured.schedule):
        if a != b:
            break
        n_common += 1
    common: set[tuple[str, int]] = set()
    it: dict[str, int] = {}
    for s in predicted.schedule[:n_common]:
        common.add((s, it.get(s, 0)))
        it[s] = it.get(s, 0) + 1
    pk = {k: e for k, e in predicted.by_key().items() if (k[0], k[1]) in common}
    mk = {k: e for k, e in measured.by_key().items() if (k[0], k[1]) in common}
    p_only = tuple(sorted(set(pk) - set(mk)))
    m_only = tuple(sorted(set(mk) - set(pk)))
    dup = (len(predicted.by_key()) != len(predicted.events)) or (len(measured.by_key()) != len(measured.events))
    matched = len(set(pk) & set(mk))
    if p_only or m_only or dup or not matched:
        level, reason = "none", (f"{len(p_only)} predicted-only and {len(m_only)} measured-only events"
                                 + ("; duplicate keys" if dup else ""))
    else:
        level, reason = "command", "every (step, iteration, command) appears once on both sides"
        if all(pk[k].instruction and pk[k].instruction == mk[k].instruction for k in pk):
            level, reason = "instruction", "every event maps to the same machine instruction on both sides"

            def order(b: TimelineBundle) -> dict[tuple[str, str], list[tuple[str, int, str]]]:
                qs: dict[tuple[str, str], list[TimelineEvent]] = {}
                for e in b.events:
                    if (e.step, e.iteration) in common:
                        qs.setdefault((e.device, e.engine), []).append(e)
                return {q: [e.key for e in sorted(v, key=lambda e: (e.start_s, e.end_s))] for q, v in qs.items()}

            po, mo = order(predicted), order(measured)
            bad = [q for q in po if po[q] != mo.get(q)]
            if not bad:
                level, reason = "order", "every queue runs the same events in the same order"
            else:
                reason = f"event order differs on queue(s) {', '.join(':'.join(q) for q in bad[:3])}"
        else:
            reason = "some events lack or disagree on their machine instruction"
    per: dict[str, list[float]] = {}
    for k in set(pk) & set(mk):
        m = mk[k].end_s - mk[k].start_s
        if m > 0:
            per.setdefault(k[2], []).append((pk[k].end_s - pk[k].start_s - m) / m)
    cerr = {c: statistics.median(v) for c, v in sorted(per.items())}
    if n_common < max(len(predicted.schedule), len(measured.schedule)):
        reason += f" (over the {n_common} step instances both runs have)"
    tp, tm = predicted.token_latencies(), measured.token_latencies()
    n = min(len(tp), len(tm))
    terr = tuple(abs(tp[i] - tm[i]) / tm[i] for i in range(n) if tm[i] > 0)
    return Comparison(level, reason, matched, p_only, m_only, cerr, tuple(tp[:n]), tuple(tm[:n]), terr)


def write_side_by_side_trace(predicted: TimelineBundle, measured: TimelineBundle, path: str | Path,
                             option: str = "--trace") -> Path:
    """Write :func:`side_by_side_trace` as JSON to ``path`` atomically. Raises TimelineError(non_finite),
    OutputPathError."""
    _check_finite(predicted, "predicted trace")
    _check_finite(measured, "measured trace")
    return write_file_atomic(path, _json_text(side_by_side_trace(predicted, measured), "side-by-side trace"), option)


def side_by_side_trace(predicted: TimelineBundle, measured: TimelineBundle) -> dict[str, Any]:
    """One Chrome trace holding the predicted processes (``predicted device …``) above the measured
    ones (``measured device …``), both starting at 0."""
    a = _trace_events(predicted, "predicted ", 0)
    base = max((e["pid"] for e in a), default=0) + 1
    b = _trace_events(measured, "measured ", base)
    return {"traceEvents": a + b, "displayTimeUnit": "ns",
            "otherData": {"predicted": predicted.digests.get("concrete", ""), "measured": measured.digests.get("concrete", "")}}


__all__ = ["BUNDLE_FORMAT", "LEVELS", "Comparison", "OutputPathError", "SyncEvent", "TimelineBundle", "TimelineError",
           "TimelineEvent", "bundle_from_simulation", "check_output_file", "compare", "side_by_side_trace",
           "write_side_by_side_trace"]
