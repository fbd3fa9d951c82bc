"""Vocabularies of the concrete plan IR (the ``cplan`` dialect, :mod:`pipeplan.dialects.cplan`): lifetimes, cost
statuses and evidence kinds (from :mod:`pipeplan.dialects.costs`), risk policies, binders; and the decision records a binder hands to
:func:`~pipeplan.dialects.cplan.build_plan` (one record per op it builds). The ``cplan.plan`` op is the
plan: nothing reads these records back out of IR."""

from __future__ import annotations

from dataclasses import dataclass

from pipeplan.dialects.costs import COST_STATUSES, EVIDENCE_KINDS  # noqa: F401  (re-exported)
from pipeplan.dialects.lifetimes import LIFETIMES, PERSISTENT_LIFETIMES  # noqa: F401  (re-exported)
from pipeplan.dialects.steps import task_path
from pipeplan.errors import PipeplanError

RISK_POLICIES = ("strict", "accept-fallback", "accept-out-of-domain", "accept-missing")
"""Explicit risk policies (AB-S-7), each accepting the statuses of the previous one and one more:
``strict`` only ``direct`` costs, then ``fallback``, then ``out_of_domain``, then ``missing``."""


def risk_allows(risk: str, status: str) -> bool:
    """Whether risk policy ``risk`` covers a cost of ``status`` (False for unknown names)."""
    if risk not in RISK_POLICIES or status not in COST_STATUSES:
        return False
    return COST_STATUSES.index(status) <= RISK_POLICIES.index(risk)

BINDERS = ("reference-queue", "reference-slot", "list-schedule")


class CplanError(PipeplanError):
    """A concrete plan that cannot be built or does not hold an invariant.

    ``code`` is one of ``capacity_exceeded``, ``invalid_problem``, ``missing_binding``,
    ``unsupported_binder``, ``invariant_violation`` (with ``invariant`` set to ``AB-S-n``),
    ``commit_gate_mismatch``, ``relation_violation``.
    """

    code = "cplan"

    def __init__(self, message: str, *, code: str | None = None, where: str | None = None,
                 invariant: str | None = None):
        super().__init__(message, code=code, where=where)
        self.invariant = invariant


# --------------------------------------------------------------------------- decision records (build_plan's input)
@dataclass(frozen=True)
class Device:
    """A deployment device: ``capacities`` maps memory space -> bytes, ``engines`` engine -> slots."""

    id: str
    capacities: tuple[tuple[str, int], ...]
    engines: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Link:
    """A link from device ``src`` to ``dst`` carrying at most ``capacity`` bytes per transfer."""

    id: str
    src: str
    dst: str
    capacity: int


@dataclass(frozen=True)
class Alloc:
    """One buffer allocation: bytes ``[offset, offset + size)`` of ``space`` on ``device``."""

    id: str
    source: str
    device: str
    space: str
    offset: int
    size: int
    alignment: int
    lifetime: str


@dataclass(frozen=True)
class Lineage:
    """Where a command comes from in the model (``#cplan.lineage``): the ``step`` (``prefill``/``decode``),
    the pipeline ``stage``, the transformer ``block`` (-1: none), the portable task's ``model_op``
    (``blk.0.attn_q``, ``token_embd``, ``edge:e0``) and the RunPlan ``edge`` a send/recv moves ("" otherwise)."""

    step: str
    stage: int
    block: int = -1
    model_op: str = ""
    edge: str = ""

    def text(self, task: str, impl: str) -> str:
        """``model op <op> -> stage <s>[ block <b>] (<step>) -> task @<task> -> candidate <impl>`` (AB-D-1)."""
        return lineage_text(self.step, self.stage, self.block, self.model_op, task, impl)


def lineage_text(step: str, stage: int, block: int, model_op: str, task: str, impl: str) -> str:
    """The diagnostic lineage path of a command (see :meth:`Lineage.text`)."""
    return f"{task_path(step, stage, block, model_op, task)} -> candidate {impl}"


@dataclass(frozen=True)
class Command:
    """One concrete command, 1:1 with portable task ``task``. ``status`` is one of COST_STATUSES; ``provider``
    the evidence kind that priced it (one of EVIDENCE_KINDS, "" when the cost is missing); ``duration`` is
    seconds (None when the cost is missing); ``lineage`` places it in the model; ``link`` names the link a
    transfer command uses ("" otherwise)."""

    id: str
    task: str
    op: str
    implementation: str
    device: str
    engine: str
    deps: tuple[str, ...]
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    lineage: Lineage
    provider: str
    status: str
    duration: float | None
    link: str = ""


@dataclass(frozen=True)
class Sync:
    """A signal/wait edge: command ``signal`` completes before command ``wait`` starts."""

    signal: str
    wait: str


@dataclass(frozen=True)
class Queue:
    """One hardware queue (an engine of a device) and the order it runs its commands in."""

    device: str
    engine: str
    order: tuple[str, ...]


@dataclass(frozen=True)
class QueueSchedule:
    """The queue schedule extension: one :class:`Queue` per used (device, engine)."""

    queues: tuple[Queue, ...]


@dataclass(frozen=True)
class Slot:
    """A dataflow slot (an issue slot of an engine) and the commands bound to it."""

    id: str
    device: str
    engine: str
    commands: tuple[str, ...]


@dataclass(frozen=True)
class Fire:
    """Firing rule: ``command`` fires on ``slot`` once every command in ``after`` completed."""

    command: str
    slot: str
    after: tuple[str, ...]


@dataclass(frozen=True)
class SlotDataflow:
    """The slot dataflow extension: slots and one firing rule per command (no queues)."""

    slots: tuple[Slot, ...]
    fires: tuple[Fire, ...]
