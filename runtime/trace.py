"""Instruction traces of a run: what every stage executed, on every backend and target (issue 13 item 5).

A stage whose program carries a trace directory (``StageProgram.trace``, ``TMachineStageProgram.trace``)
appends one JSON line per executed instruction to ``<dir>/stage<i>.jsonl`` after each frame; the process
that started the run reads the files back (:func:`read_traces`) and turns them into the measured
:class:`~pipeplan.analysis.timeline.TimelineBundle` (:func:`timeline_from_records`). The same records come
from an in-process thread, a local stage process or a Ray actor on this host, so ``--timeline``/``--trace``
mean the same thing on every backend.

Record (JSON object): ``stage``, ``slot`` (KV-cache slot), ``step``, ``index`` (0 for the first instruction of
a step run: it starts a new iteration), ``id`` (the machine instruction id; ``""`` when the reader resolves it
from ``op``/``call``), ``op`` (``recv``, ``kernel``, ``argmax``, ``send``, or a tmachine op name), ``kernel``,
``call`` (index of the kernel call in the step's program; -1 otherwise), ``t0``/``t1`` (``time.perf_counter``
seconds, one clock per host).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any


class JsonlTrace:
    """Records of one stage, kept as tuples while the stage runs and appended to ``path`` as JSON lines by
    :meth:`flush`, which the stage calls when :attr:`full` and when it stops serving, so encoding stays out of
    the measured frames."""

    limit = 65536

    def __init__(self, path: str | Path, stage: int, slot: int):
        self.path = Path(path)
        self.stage, self.slot = stage, slot
        self._recs: list[tuple[Any, ...]] = []

    def record(self, step: str, index: int, op: str, t0: float, t1: float, *, id: str = "", kernel: str = "",
               call: int = -1, **extra: Any) -> None:
        """One executed instruction (module docstring)."""
        self._recs.append((self.slot, step, index, id, op, kernel, call, t0, t1, extra))

    @property
    def full(self) -> bool:
        return len(self._recs) >= self.limit

    def on_instruction(self, event: Any) -> None:
        """Listener of the tmachine interpreter: one :class:`~pipeplan.runtime.tmachine_interp.InstructionEvent`."""
        self.record(event.step, event.index, event.op, event.t0, event.t1, id=event.id, kernel=event.kernel,
                    grid=list(event.grid), start_pos=event.start_pos)

    def flush(self) -> None:
        if self._recs:
            lines = [json.dumps({"stage": self.stage, "slot": slot, "step": step, "index": index, "id": id, "op": op,
                                 "kernel": kernel, "call": call, "t0": t0, "t1": t1, **extra})
                     for slot, step, index, id, op, kernel, call, t0, t1, extra in self._recs]
            with open(self.path, "a", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
            self._recs.clear()


def read_traces(trace: str | Path, stages: int) -> dict[int, list[dict[str, Any]]]:
    """stage -> the records its stage wrote to ``<trace>/stage<i>.jsonl`` (none: empty)."""
    out: dict[int, list[dict[str, Any]]] = {}
    for s in range(stages):
        p = Path(trace) / f"stage{s}.jsonl"
        out[s] = [json.loads(x) for x in p.read_text(encoding="utf-8").splitlines() if x] if p.exists() else []
    return out


def append_traces(src: str | Path, dst: str | Path) -> None:
    """Append every ``stage<i>.jsonl`` of ``src`` to the file of that name in ``dst`` (created if missing)."""
    for p in sorted(Path(src).glob("stage*.jsonl")):
        with open(Path(dst) / p.name, "a", encoding="utf-8") as f:
            f.write(p.read_text(encoding="utf-8"))


def timeline_from_records(traces: Mapping[int, Sequence[Mapping[str, Any]]],
                          info: Callable[[int, Mapping[str, Any]], tuple[str, str, str, str, str, str] | None],
                          digests: Mapping[str, str], meta: Mapping[str, Any]) -> Any:
    """The measured TimelineBundle of the stages' records: one event per record keyed ``(step, iteration,
    command)`` (iteration: the stage's k-th run of that step, counted at ``index == 0``); ``info(stage, record)``
    gives ``(instruction id, command, device, engine, link, lineage)`` (None: the record is left out).
    Times in seconds from the first record. ``schedule``: the step runs of the lowest stage."""
    from pipeplan.analysis.timeline import TimelineBundle, TimelineEvent

    starts = [float(ev["t0"]) for evs in traces.values() for ev in evs]
    t0 = min(starts) if starts else 0.0
    events, schedule = [], []
    first = min(traces) if traces else 0
    for stage, evs in sorted(traces.items()):
        runs: dict[str, int] = {}
        it = 0
        for ev in evs:
            if ev["index"] == 0:
                it = runs.get(ev["step"], 0)
                runs[ev["step"]] = it + 1
                if stage == first:
                    schedule.append(ev["step"])
            got = info(stage, ev)
            if got is None:
                continue
            iid, cmd, dev, eng, link, lineage = got
            events.append(TimelineEvent(ev["step"], it, cmd, iid, ev.get("kernel") or ev["op"], stage, dev,
                                        f"{dev}:{eng}", eng, link, float(ev["t0"]) - t0, float(ev["t1"]) - t0,
                                        lineage))
    return TimelineBundle("measured", dict(digests), schedule, events, [], None, dict(meta))


__all__ = ["JsonlTrace", "append_traces", "read_traces", "timeline_from_records"]
