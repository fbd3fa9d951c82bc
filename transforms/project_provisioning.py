"""``runplan-project-provisioning``: derive one ``runplan.provision_stage`` per stage.

Source: seed 000 "Provisioning Projection" (RP-PP-1..6) and "Object/Ring Spec Consistency"
(RP-OS-4). The projection is :func:`pipeplan.dialects.runplan_checks.derive_provisions`: deterministic,
own layer range and own tensor byte ranges only, exactly one inbound and one outbound edge
provision naming peer node ids (never actor addresses), specs copied from the edges.

Idempotent: existing ``runplan.provision_stage`` ops are removed and the derived ones appended at
the end of the plan's block in stage order, so running the pass twice prints the same IR.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeplan.dialects.runplan import PlanOp
from pipeplan.dialects.runplan_build import derive_provision_ops
from pipeplan.errors import RunPlanRejection
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException


def project_plan(plan: PlanOp) -> None:
    """Replace ``plan``'s provision ops by the derived ones (appended in stage order), in place.
    Raises RunPlanRejection when the plan does not verify (the plan is then unchanged)."""
    new_ops = derive_provision_ops(plan)
    block = plan.body.block
    for op in list(plan.provision_ops()):
        block.erase_op(op)
    block.add_ops(new_ops)


@dataclass(frozen=True)
class ProjectProvisioningPass(ModulePass):
    """Add the ProvisionStage op of every stage to every ``runplan.plan`` (see module docstring).

    Raises PassFailedException with the verifier message (``[RP-..] ...``) when a plan is invalid."""

    name = "runplan-project-provisioning"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for plan in [o for o in op.walk() if isinstance(o, PlanOp)]:
            try:
                project_plan(plan)
            except RunPlanRejection as e:
                raise PassFailedException(e.message) from None
