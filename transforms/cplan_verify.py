"""``cplan-verify``: the seven construction invariants and the commit gate of ConcretePlanIR.

Seeds/003 "Joint scheduling and memory planning" (AB-S-1..7) and "Implemented reference-binder
passes" (AB-R-5, AB-R-6). Pure functions over :class:`~pipeplan.dialects.cplan.ConcretePlan`; the
seven invariants live in :mod:`pipeplan.dialects.cplan_invariants` (re-exported here), since they need
no binding and ``cplan.plan``'s verifier checks them on parse:

* :func:`check_invariants` -- returns every :class:`Violation` of (the closure checks, names of
  commands/allocations that exist, only matter for a value-form plan: in IR every reference is an SSA
  use, and the on-parse verifier runs :func:`~pipeplan.dialects.cplan_invariants.check_ir_invariants`):
  1. ``AB-S-1`` command ids unique, dependencies closed (name existing commands) and acyclic;
  2. ``AB-S-2`` the execution order cannot deadlock and enforces every dependency: queue plans run
     each queue in order and a command waits for its ``cplan.sync`` signals, so queue order plus
     signal/wait must be acyclic and every dependency must be implied by it (a dropped wait is an
     unenforced dependency); slot plans fire on their firing rules, which must cover every
     dependency and be acyclic; every command is in exactly one queue/slot matching its placement;
  3. ``AB-S-3`` every command names an implementation (not empty/``generic``) and is placed on a
     declared device and one of its engines; a transfer's link is declared and leaves its device;
  4. ``AB-S-4`` allocation ids are unique; every buffer access names an allocation on the command's
     device (an ``edge`` object may also be on a device linked to it: both link endpoints see it), and
     each read of a transient buffer happens after one of its writers in every execution (its lifetime
     covers producers and consumers);
  5. ``AB-S-5`` two allocations whose byte ranges overlap in one (device, space) are both
     transient and every access of one happens-before every access of the other in every legal
     execution (the happens-before closure of the execution order, not one schedule);
  6. ``AB-S-6`` device and link ids are unique; per device and memory space the high-water mark fits
     the capacity; queues or slots per engine fit its slot count; a transfer's bytes fit its link's
     capacity;
  7. ``AB-S-7`` every command's cost status is covered by the plan's risk policy.

  Each message names the commands/buffers involved and their lineage.
* :func:`commit_gate` (AB-R-5) -- rebuilds the plan from its portable Problem with the same pure
  normalizer (:func:`~pipeplan.transforms.convert_pplan_to_cplan.bind`) and requires equality of
  source-buffer identity, exact size, task lineage, command mapping and the typed extension.
* :func:`relation_violations` (AB-R-6) -- portable <-> concrete relations: buffer identity,
  capacity (size) and alignment; dependency correspondence; buffer access; operation identity;
  target ABI (plan target and legal implementation).

The pass ``cplan-verify`` runs :func:`check_invariants` on every ``cplan.plan`` of the module and,
when the module also holds the portable source (``convert-pplan-to-cplan{keep_source=true}``) or
``require_source`` is set, the commit gate and relation invariants.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from pipeplan.analysis.schedule import Problem
from pipeplan.dialects.cplan import ConcretePlan, CplanError, PlanOp, plan_from_ir, subject_op
from pipeplan.dialects.cplan_invariants import (  # noqa: F401  (re-exported: the checks live with the dialect)
    GENERIC_IMPLS,
    INVARIANTS,
    Violation,
    check_invariants,
    check_s1,
    check_s2,
    check_s3,
    check_s4,
    check_s5,
    check_s6,
    check_s7,
    execution_graph,
)
from pipeplan.dialects.diagnostics import OpPassError
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException


# --------------------------------------------------------------------------- commit gate + relations
def commit_gate(plan: ConcretePlan, problem: Problem) -> list[Violation]:
    """AB-R-5: rebuild with the same binder and pure normalizer and compare (empty when equal).

    Differences are reported per field group: source-buffer identity and exact size (allocations),
    task lineage and command mapping (commands), signal/wait edges, the typed extension, and the
    plan's identities. Raises nothing; a rebuild that fails is reported as a violation.
    """
    from pipeplan.transforms.convert_pplan_to_cplan import bind

    try:
        ref = bind(problem, plan.binder).plan
    except CplanError as e:
        return [Violation("AB-R-5", "rebuild_failed", f"the portable source no longer binds: {e.message}")]
    out = []
    names = {"allocs": "allocation (source-buffer identity, exact size, offset)", "commands":
             "command mapping / task lineage", "syncs": "signal/wait edges", "extension": "typed extension"}
    for f in fields(ConcretePlan):
        got, want = getattr(plan, f.name), getattr(ref, f.name)
        if got == want:
            continue
        what = names.get(f.name, f.name)
        if isinstance(got, tuple) and isinstance(want, tuple):
            k = next((i for i, (x, y) in enumerate(zip(got, want)) if x != y), min(len(got), len(want)))
            out.append(Violation("AB-R-5", "commit_gate_mismatch",
                                 f"{what} differs from the rebuild at #{k}: got "
                                 f"{got[k] if k < len(got) else '<none>'}, rebuilt "
                                 f"{want[k] if k < len(want) else '<none>'}"))
        else:
            out.append(Violation("AB-R-5", "commit_gate_mismatch", f"{what} differs from the rebuild: got {got!r}, "
                                                                   f"rebuilt {want!r}"))
    return out


def relation_violations(plan: ConcretePlan, problem: Problem) -> list[Violation]:
    """AB-R-6: portable <-> concrete relations (see the module docstring)."""
    from pipeplan.transforms.convert_pplan_to_cplan import alloc_id, command_id

    out = []
    if plan.target != problem.target or plan.source != problem.source:
        out.append(Violation("AB-R-6", "target_abi", f"plan is bound to target '{plan.target}' from '{plan.source}', "
                                                     f"the portable input to '{problem.target}' from '{problem.source}'"))
    by_source: dict[str, list] = {}
    for a in plan.allocs:
        by_source.setdefault(a.source, []).append(a)
    for b in problem.buffers:
        got = by_source.get(b.id, [])
        if len(got) != 1:
            out.append(Violation("AB-R-6", "buffer_identity", f"portable buffer '{b.id}' ({b.lineage}) has {len(got)} "
                                                              f"allocations, expected 1"))
            continue
        a = got[0]
        if a.size < b.size or a.alignment % b.alignment or a.offset % b.alignment or a.lifetime != b.lifetime:
            out.append(Violation("AB-R-6", "buffer_capacity",
                                 f"allocation '{a.id}' ({a.size} B, align {a.alignment}, offset {a.offset}, "
                                 f"{a.lifetime}) does not hold portable buffer '{b.id}' ({b.size} B, align "
                                 f"{b.alignment}, {b.lifetime})"))
    known = {b.id for b in problem.buffers}
    for a in plan.allocs:
        if a.source not in known:
            out.append(Violation("AB-R-6", "buffer_identity", f"allocation '{a.id}' has no portable buffer "
                                                              f"'{a.source}'"))
    cmds = {c.task: c for c in plan.commands}
    for t in problem.tasks:
        c = cmds.get(t.id)
        if c is None:
            out.append(Violation("AB-R-6", "operation_identity", f"portable task '{t.id}' ({t.lineage}) has no "
                                                                 f"command"))
            continue
        if c.op != t.op or c.id != command_id(t.id):
            out.append(Violation("AB-R-6", "operation_identity", f"command '{c.id}' runs op '{c.op}' but task "
                                                                 f"'{t.id}' ({t.lineage}) is '{t.op}'"))
        if c.deps != tuple(command_id(d) for d in t.deps):
            out.append(Violation("AB-R-6", "dependency_correspondence",
                                 f"command '{c.id}' depends on {list(c.deps)} but task '{t.id}' ({t.lineage}) on "
                                 f"{list(t.deps)}"))
        if c.reads != tuple(alloc_id(b) for b in t.reads) or c.writes != tuple(alloc_id(b) for b in t.writes):
            out.append(Violation("AB-R-6", "buffer_access", f"command '{c.id}' accesses {list(c.reads)}/"
                                                            f"{list(c.writes)} but task '{t.id}' ({t.lineage}) "
                                                            f"{list(t.reads)}/{list(t.writes)}"))
        if t.candidates and c.implementation not in t.candidates:
            out.append(Violation("AB-R-6", "target_abi", f"command '{c.id}' uses implementation "
                                                         f"'{c.implementation}' that target '{problem.target}' does "
                                                         f"not offer for task '{t.id}' ({t.lineage})"))
    tasks = {t.id for t in problem.tasks}
    for c in plan.commands:
        if c.task not in tasks:
            out.append(Violation("AB-R-6", "operation_identity", f"command '{c.id}' has no portable task '{c.task}'"))
    return out


def verify_plan(plan: ConcretePlan, problem: Problem | None = None) -> list[Violation]:
    """Invariants, then (with the portable ``problem``) the commit gate and relation invariants."""
    out = check_invariants(plan)
    if problem is not None:
        out += relation_violations(plan, problem) + commit_gate(plan, problem)
    return out


@dataclass(frozen=True)
class CplanVerifyPass(ModulePass):
    """Verify every ``cplan.plan`` of the module (see the module docstring).

    Option ``require_source``: fail when the module lacks the portable source needed by the commit
    gate. Raises PassFailedException listing up to 20 violations, one per line, each
    ``AB-S-n code: message`` or ``AB-R-n code: message`` (an :class:`OpPassError` located at the op of
    the first violation).
    """

    name = "cplan-verify"

    require_source: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        plans = [o for o in op.ops if isinstance(o, PlanOp)]
        if not plans:
            raise PassFailedException("cplan-verify: the module holds no cplan.plan")
        problem = None
        if any(o.name == "pplan.plan" for o in op.ops):
            from pipeplan.transforms.convert_pplan_to_cplan import problem_from_module

            try:
                problem = problem_from_module(op, plans[0].risk.data)
            except CplanError as e:
                raise PassFailedException(e.one_line()) from None
        elif self.require_source:
            raise PassFailedException("cplan-verify: commit gate needs the portable source; run "
                                      "convert-pplan-to-cplan{keep_source=true}")
        errors: list[tuple[Violation, PlanOp]] = []
        for p in plans:
            errors += [(v, p) for v in verify_plan(plan_from_ir(p), problem)]
        if errors:
            lines = [v.text() for v, _ in errors[:20]]
            more = f"\n... and {len(errors) - 20} more" if len(errors) > 20 else ""
            first, plan = errors[0]
            raise OpPassError("cplan-verify failed:\n" + "\n".join(lines) + more, op=subject_op(plan, first.subject))
