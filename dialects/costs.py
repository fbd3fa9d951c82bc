"""Cost vocabularies, one for every dialect that records a cost (``#pplan.cost``, ``cplan.command``): the evidence
provider kind that priced it and its status. Each dialect declares its own ``EnumAttribute`` over these enums
(as with :mod:`pipeplan.dialects.lifetimes`); :func:`~pipeplan.dialects.lifetimes.enum_interner` makes the
instances."""

from __future__ import annotations

from xdsl.utils.str_enum import StrEnum


class EvidenceKind(StrEnum):
    """The evidence provider kind that priced a cost: ``roofline`` (analytic) or ``measured`` (a kernel-timing
    table); ``pplan.evidence_policy`` names providers by kind (``roofline``, ``measured:<file>``)."""

    ROOFLINE = "roofline"
    MEASURED = "measured"


class CostStatus(StrEnum):
    """Status of a cost, in risk order (AB-S-7: each risk policy accepts one more): ``direct`` (the policy's first
    provider answered in its domain), ``fallback`` (a later provider did), ``out_of_domain`` (no provider answered
    in its domain), ``missing`` (nothing priced it: only a ``cplan.command`` can be missing; a ``#pplan.cost`` is
    a resolved estimate)."""

    DIRECT = "direct"
    FALLBACK = "fallback"
    OUT_OF_DOMAIN = "out_of_domain"
    MISSING = "missing"


EVIDENCE_KINDS: tuple[str, ...] = tuple(m.value for m in EvidenceKind)
"""The evidence provider kinds, in declaration order."""

COST_STATUSES: tuple[str, ...] = tuple(m.value for m in CostStatus)
"""The cost statuses, in risk order."""

RESOLVED_COST_STATUSES: tuple[str, ...] = tuple(m.value for m in CostStatus if m is not CostStatus.MISSING)
"""The statuses of a resolved estimate (``#pplan.cost``): all but ``missing``."""

__all__ = ["COST_STATUSES", "EVIDENCE_KINDS", "RESOLVED_COST_STATUSES", "CostStatus", "EvidenceKind"]
