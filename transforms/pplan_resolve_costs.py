"""``pplan-resolve-costs{evidence=...}``: price every candidate into a CostedTaskView (AB-C-1..3).

Builds one normalized estimate request per ``#pplan.candidate`` of each task (task work + the device
of the task's stage from the DeploymentBinding) and resolves it under the EvidencePolicy
(:func:`pipeplan.analysis.evidence.resolve`). The result is each task's ``pplan.costs`` attribute (one
``#pplan.cost`` per candidate: duration, evidence kind, status, confidence) and a ``pplan.costed_view``
op next to the plan with the provenance fingerprints of the target, deployment, policy and evidence
(AB-G-3). Only discardable annotations change: the same plan priced with roofline and with measured
evidence keeps its digest.

Options: ``evidence`` — providers in order, e.g. ``evidence=roofline`` or
``evidence="measured:/path/table.json",roofline`` (builds a ``pplan.evidence_policy``, replacing
one already in the module); ``fallback`` (allow | forbid), ``uncertainty_budget`` (0..1),
``max_age_s`` (freshness, 0 = any), ``revision``. Without ``evidence`` the module's
``pplan.evidence_policy`` is used; without either the pass fails with "missing binding:
EvidencePolicy". The DeploymentBinding and TargetBinding must be in the module (AB-G-1, AB-G-4).
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeplan.analysis.evidence import (
    EstimateRequest,
    EvidenceError,
    evidence_fingerprint,
    providers_for,
    resolve,
)
from pipeplan.dialects.bindings import (
    DeploymentBinding,
    DeploymentBindingOp,
    EvidencePolicy,
    EvidencePolicyOp,
    find_binding,
    require_binding,
)
from pipeplan.dialects.diagnostics import gc_paused
from pipeplan.dialects.pplan import (
    CostAttr,
    CostedViewOp,
    PlanOp,
    TaskOp,
    candidate_id,
    cost_key,
    find_plan,
    fingerprint,
)
from pipeplan.transforms.pplan_legalize import plan_of, plan_task_requirements
from pipeplan.transforms.pplan_select_implementations import candidates_of
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException, VerifyException


@dataclass(frozen=True)
class CostEntry:
    """One row of a CostedTaskView (Python form of a ``#pplan.cost``)."""

    candidate: str
    duration_s: float
    provider: str
    confidence: float
    status: str
    key: str


def costed_task_view(module: ModuleOp | PlanOp) -> dict[str, list[CostEntry]]:
    """The module's CostedTaskView: task id -> its candidates' resolved costs (candidate ``c.<task>.<rule>``;
    tasks without costs are absent)."""
    plan = module if isinstance(module, PlanOp) else find_plan(module)
    out: dict[str, list[CostEntry]] = {}
    for t in plan.tasks():
        costs = t.costs
        if costs:
            tid, key = t.task_id, cost_key(t)
            out[tid] = [CostEntry(candidate_id(tid, c.rule), c.duration_s, c.evidence, c.confidence, c.status, key)
                        for c in costs]
    return out


@dataclass(frozen=True)
class PplanResolveCostsPass(ModulePass):
    """Resolve every candidate's cost under the EvidencePolicy into a ``pplan.costed_view``.

    Errors (PassFailedException): missing binding (TargetBinding, DeploymentBinding,
    EvidencePolicy), no candidates, a stage without a device, and every EvidenceError (forbidden
    fallback, missing peak, stale/bad table, uncertainty over budget) with the task's lineage.
    """

    name = "pplan-resolve-costs"

    evidence: tuple[str, ...] = ()
    fallback: str = "allow"
    uncertainty_budget: float = 1.0
    max_age_s: int = 0
    revision: str = "r1"

    def _policy_op(self, op: ModuleOp) -> EvidencePolicyOp:
        if not self.evidence:
            pol = require_binding(op, "EvidencePolicy", self.name)
            assert isinstance(pol, EvidencePolicyOp)
            return pol
        new = EvidencePolicy(tuple(str(e) for e in self.evidence), float(self.uncertainty_budget), self.fallback,
                             int(self.max_age_s), str(self.revision)).to_op()
        try:
            new.verify()
        except VerifyException as e:
            raise PassFailedException(f"{self.name}: {e}") from None
        old = find_binding(op, "EvidencePolicy")
        if old is not None:
            old.detach()
            old.erase()
        op.body.block.add_op(new)
        return new

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        with gc_paused():
            self._apply(op)

    def _apply(self, op: ModuleOp) -> None:
        plan = plan_of(op, self.name)
        target = require_binding(op, "TargetBinding", self.name)
        dep_op = require_binding(op, "DeploymentBinding", self.name)
        assert isinstance(dep_op, DeploymentBindingOp)
        pol_op = self._policy_op(op)
        policy = EvidencePolicy.from_op(pol_op)
        deployment = DeploymentBinding.from_op(dep_op)
        cands = candidates_of(op, self.name)
        digest = cands.portable_digest.data  # the plan as legalized; the plan is never modified after
        try:
            providers = providers_for(policy)
        except EvidenceError as e:
            raise PassFailedException(f"{self.name}: {e.one_line()}") from None
        priced: list[tuple[TaskOp, list[CostAttr]]] = []
        made: dict[tuple, CostAttr] = {}  # equal costs share one attribute (many tasks cost the same)
        for t, stage, tr in plan_task_requirements(plan):
            cands = t.candidates
            if not cands:
                continue
            try:
                device = deployment.stage_device(stage)
            except KeyError:
                raise PassFailedException(f"{self.name}: DeploymentBinding has no device for stage {stage} "
                                          f"({tr.lineage})") from None
            mine: list[CostAttr] = []
            for c in cands:
                req = EstimateRequest(
                    task=tr.task, candidate=candidate_id(tr.task, c.rule), impl=c.impl, op=tr.op,
                    dtypes=tr.dtypes, shape=tr.shape, flops=tr.flops,
                    bytes_read=tr.bytes_read, bytes_written=tr.bytes_written,
                    collective=tr.collective, device=device, lineage=tr.lineage)
                try:
                    est, status = resolve(req, providers, policy)
                except EvidenceError as e:
                    raise PassFailedException(f"{self.name}: {e.one_line()}") from None
                args = (c.rule, est.duration_s, est.provider, status, est.confidence)
                key = tuple((type(a), repr(a)) for a in args)
                ca = made.get(key)
                if ca is None:
                    ca = made[key] = CostAttr(*args)
                mine.append(ca)
            priced.append((t, mine))
        for t, mine in priced:
            t.set_costs(mine)
        for old in [o for o in op.ops if isinstance(o, CostedViewOp)]:
            old.detach()
            old.erase()
        op.body.block.add_op(CostedViewOp(
            plan=plan.sym_name.data, portable_digest=digest, policy_fingerprint=fingerprint(pol_op),
            evidence_fingerprint=evidence_fingerprint(providers), target_fingerprint=fingerprint(target),
            deployment_fingerprint=fingerprint(dep_op)))
