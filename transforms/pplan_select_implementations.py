"""``pplan-select-implementations{keep=N}``: keep the N preferred candidates per task (AB-I-1).

Reads the candidates ``pplan-legalize`` attached to each task (its ``pplan.candidates`` attribute; the
``pplan.candidates`` op names the target), ranks them with the target plugin's ImplementationSelector
(unrewritten before rewritten, then rule preference, then rule name), keeps the first ``keep`` in rank
order (rank 0 = preferred) and drops the others, recording on each kept candidate why each dropped one
was not selected. Several candidates may be kept for later search (seed 003). Only discardable
annotations change, so the plan's digest is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeplan.dialects.diagnostics import gc_paused
from pipeplan.dialects.pplan import CandidateAttr, CandidatesOp
from pipeplan.targets import Candidate, CapabilityRule, UnknownTargetError, get_target
from pipeplan.transforms.pplan_legalize import plan_of, plan_task_requirements
from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException


def candidates_of(module: ModuleOp, pass_name: str) -> CandidatesOp:
    """The module's ``pplan.candidates`` op; PassFailedException when absent or ambiguous."""
    found = [o for o in module.ops if isinstance(o, CandidatesOp)]
    if len(found) != 1:
        raise PassFailedException(f"{pass_name}: expected one pplan.candidates op (run pplan-legalize first), "
                                  f"found {len(found)}")
    return found[0]


@dataclass(frozen=True)
class PplanSelectImplementationsPass(ModulePass):
    """Keep ``keep`` (>= 1) candidates per task, ranked by the target plugin's selector.

    Errors (PassFailedException): keep < 1; no candidates op; a candidate naming a rule the plugin
    does not have.
    """

    name = "pplan-select-implementations"

    keep: int = 1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        with gc_paused():
            self._apply(op)

    def _apply(self, op: ModuleOp) -> None:
        if self.keep < 1:
            raise PassFailedException(f"{self.name}: keep must be >= 1, got {self.keep}")
        plan = plan_of(op, self.name)
        cands = candidates_of(op, self.name)
        try:
            plugin = get_target(cands.target.data)
        except UnknownTargetError as e:
            raise PassFailedException(f"{self.name}: {e.message}") from None
        made: dict[tuple, CandidateAttr] = {}
        for t, _, req in plan_task_requirements(plan):
            group = t.candidates
            if not group:
                continue
            task = req.task
            rules: dict[str, CapabilityRule] = {r.name: r for r in plugin.capability.rules_for(req.op)}
            wrapped: list[tuple[Candidate, CandidateAttr]] = []
            for c in group:
                rule = rules.get(c.rule)
                if rule is None:
                    raise PassFailedException(f"{self.name}: candidate {c.rule} of @{task} names a rule that target "
                                              f"{plugin.name} ({plugin.revision}) does not offer")
                creq = req if not c.rewrite else type(req)(**{**req.__dict__, "rewrite": c.rewrite})
                wrapped.append((Candidate(task, rule, creq), c))
            order = plugin.selector.rank(req, [w for w, _ in wrapped])
            by_rule = {w.rule.name: c for w, c in wrapped}
            ranked = [by_rule[w.rule.name] for w in order]
            kept, dropped = ranked[: self.keep], ranked[self.keep:]
            notes = [f"{c.rule}: not selected (rank {i + self.keep} >= keep {self.keep})"
                     for i, c in enumerate(dropped)]
            out = []
            for i, c in enumerate(kept):
                key = (id(c), i, tuple(notes))  # the attributes of the plan's ops stay alive: ids are unique
                a = made.get(key)
                if a is None:
                    a = made[key] = c.with_(rank=i, rejected=(*c.rejected, *notes))
                out.append(a)
            t.set_candidates(out, keep_costs=True)
        cands.properties["selected"] = IntegerAttr(self.keep, i64)
