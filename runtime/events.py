"""Stage lifecycle events (seed 001 "WeightsReady", DESIGN.md §4).

A stage reports exactly one of two outcomes for its weight work: :class:`WeightsReady` followed by
:class:`StageReady`, or a :class:`StageFaulted` event carrying an :class:`pipeplan.errors.StageFault`
(kind in download | parse | allocation | bind | invalid_range | runtime). A faulted stage never
reports ``StageReady`` (WL-F-6).

Ordering: every event carries ``t``, the ``time.monotonic()`` reading (seconds; CLOCK_MONOTONIC is
system-wide on Linux, so readings from different stage processes are comparable) taken where the
event happened, and ``seq``, a sequence number stamped by the one :class:`EventLog` that receives
all events of a run (the orchestrator). ``seq`` is the total order: the order in which the run
authority observed the events. Within one stage, events are emitted in program order through one
FIFO channel, so per stage ``seq`` order equals emission order.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pipeplan.errors import StageFault


@dataclass(frozen=True)
class WeightsReady:
    """The stage's assigned weight bytes are local, validated and bound (WL-R-1..3).

    Attributes:
        stage: stage index.
        node_id: the node the stage runs on (from its ProvisionStage).
        bytes: tensor bytes the stage mapped (its own tensors only, not the file).
        seconds: wall time of the weight work (resolve + parse + load + allocate + bind).
        t: ``time.monotonic()`` when emitted; seq: total-order number (0 until logged).
    """

    stage: int
    node_id: str
    bytes: int
    seconds: float
    t: float = field(default_factory=time.monotonic)
    seq: int = 0

    kind = "WeightsReady"


@dataclass(frozen=True)
class StageReady:
    """The stage is bound and its edges are connected: it accepts objects on its inbound edge."""

    stage: int
    node_id: str
    t: float = field(default_factory=time.monotonic)
    seq: int = 0

    kind = "StageReady"


@dataclass(frozen=True)
class StageFaulted:
    """Event wrapper of a :class:`StageFault` (picklable; the fault itself is ``.fault``)."""

    stage: int
    node_id: str
    fault_kind: str
    detail: str
    t: float = field(default_factory=time.monotonic)
    seq: int = 0

    kind = "StageFault"

    @classmethod
    def of(cls, fault: StageFault, node_id: str) -> StageFaulted:
        """Wrap ``fault`` raised on ``node_id``."""
        return cls(stage=fault.stage, node_id=node_id, fault_kind=fault.kind, detail=fault.detail)

    @property
    def fault(self) -> StageFault:
        """The typed error, ready to raise."""
        return StageFault(self.fault_kind, self.stage, self.detail)


Event = WeightsReady | StageReady | StageFaulted
"""Any stage lifecycle event."""


def event_to_dict(ev: Event) -> dict:
    """JSON-ready form: ``{"seq", "event", "stage", "node_id", "t", ...}`` (used by ``pipeplan run --json``)."""
    d = {"seq": ev.seq, "event": ev.kind}
    d.update(dataclasses.asdict(ev))
    return d


class EventLog:
    """The run authority's event log: stamps a strictly increasing ``seq`` on every event it records.

    Thread-safe. ``listener`` (optional) is called with each stamped event, in order.
    """

    def __init__(self, listener: Callable[[Event], None] | None = None):
        self._lock = threading.Lock()
        self._events: list[Event] = []
        self._listener = listener

    def record(self, ev: Event) -> Event:
        """Stamp ``ev`` with the next sequence number, store and return it."""
        with self._lock:
            stamped = dataclasses.replace(ev, seq=len(self._events) + 1)
            self._events.append(stamped)
        if self._listener is not None:
            self._listener(stamped)
        return stamped

    @property
    def events(self) -> list[Event]:
        """A copy of the recorded events in ``seq`` order."""
        with self._lock:
            return list(self._events)

    def of_stage(self, stage: int) -> list[Event]:
        """The recorded events of one stage, in order."""
        return [e for e in self.events if e.stage == stage]

    def first_fault(self) -> StageFaulted | None:
        """The first recorded StageFaulted event, or None."""
        for e in self.events:
            if isinstance(e, StageFaulted):
                return e
        return None
