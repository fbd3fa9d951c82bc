"""``pplan-select-implementations{keep=N}``: keep the N preferred candidates per task (AB-I-1).

Reads the ``pplan.candidates`` op that ``pplan-legalize`` produced, ranks each task's candidates
with the target plugin's ImplementationSelector (unrewritten before rewritten, then rule
preference, then rule name), keeps the first ``keep`` (rank 0 = preferred) and erases the others,
recording on each kept candidate why each dropped one was not selected. Several candidates may be
kept for later search (seed 003). The plan is not modified, so its digest is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeplan.dialects.pplan import CandidateOp, CandidatesOp, gc_paused, str_list
from pipeplan.targets import Candidate, CapabilityRule, UnknownTargetError, get_target
from pipeplan.transforms.pplan_legalize import plan_of, task_requirements
from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, StringAttr, i64
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

    Errors (PassFailedException): keep < 1; no candidates op; a candidate for a task the plan does
    not declare; a candidate naming a rule the plugin does not have.
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
        tasks = {t.task_id: t for t in plan.tasks()}
        groups: dict[str, list[CandidateOp]] = {}
        for c in cands.body.block.ops:
            assert isinstance(c, CandidateOp)
            groups.setdefault(c.task.root_reference.data, []).append(c)
        for task, group in groups.items():
            t = tasks.get(task)
            if t is None:
                raise PassFailedException(f"{self.name}: candidate for undeclared task @{task}")
            req = task_requirements(t)
            rules: dict[str, CapabilityRule] = {r.name: r for r in plugin.capability.rules_for(req.op)}
            wrapped: list[tuple[Candidate, CandidateOp]] = []
            for c in group:
                rule = rules.get(c.rule.data)
                if rule is None:
                    raise PassFailedException(f"{self.name}: candidate @{c.sym_name.data} names rule {c.rule.data} "
                                              f"that target {plugin.name} ({plugin.revision}) does not offer")
                rw = c.resources.data.get("rewrite")
                creq = req if rw is None else type(req)(**{**req.__dict__, "rewrite": rw.data})  # type: ignore[union-attr]
                wrapped.append((Candidate(task, rule, creq), c))
            order = plugin.selector.rank(req, [w for w, _ in wrapped])
            by_rule = {w.rule.name: c for w, c in wrapped}
            ranked = [by_rule[w.rule.name] for w in order]
            kept, dropped = ranked[: self.keep], ranked[self.keep:]
            notes = [f"{c.rule.data}: not selected (rank {i + self.keep} >= keep {self.keep})"
                     for i, c in enumerate(dropped)]
            for i, c in enumerate(kept):
                c.properties["rank"] = IntegerAttr(i, i64)
                if notes:
                    c.properties["rejected"] = ArrayAttr(tuple(StringAttr(s) for s in (*str_list(c.rejected), *notes)))
            for c in dropped:
                c.detach()
                c.erase()
        cands.properties["selected"] = IntegerAttr(self.keep, i64)
