"""``runplan-verify``: whole-plan verification of every ``runplan.plan`` as a pass.

Runs :func:`pipeplan.dialects.runplan.verify_runplan` (every op's local checks, then the plan's
cross-op checks of seed 000) and turns a rejection into a PassFailedException carrying the same
stable message ``[<CONTRACT-ID>] <invariant>: <detail>``. The IR is not changed.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeplan.dialects.runplan import plan_ops, verify_runplan
from pipeplan.errors import RunPlanRejection
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException


@dataclass(frozen=True)
class RunplanVerifyPass(ModulePass):
    """Verify every RunPlan in the module against the RunPlan contract invariants.

    Raises PassFailedException("[RP-..] ...") on the first broken invariant (the rejection code is
    ``INVARIANT_CODES`` of that ID)."""

    name = "runplan-verify"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for plan in plan_ops(op):
            try:
                verify_runplan(plan)
            except RunPlanRejection as e:
                raise PassFailedException(e.message) from None
