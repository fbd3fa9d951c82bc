"""``cplan-verify``: the seven construction invariants and the commit gate of the concrete plan IR.

Seeds/003 "Joint scheduling and memory planning" (AB-S-1..7) and "Implemented reference-binder
passes" (AB-R-5, AB-R-6). Functions of the ``cplan.plan`` op (they read its ops); the seven invariants
live in :mod:`pipeplan.dialects.cplan_invariants` (re-exported here), since they need no binding and
``cplan.plan``'s verifier checks them on parse:

* :func:`check_invariants` -- returns every :class:`Violation` of (the closure checks, that every operand
  is defined by a command or allocation of the plan, only matter for edited IR: parsed IR is closed by
  construction, and the on-parse verifier runs :func:`~pipeplan.dialects.cplan_invariants.check_ir_invariants`):
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
* :func:`commit_gate` (AB-R-5) -- rebuilds the plan op from its portable Problem with the same pure
  normalizer (:func:`~pipeplan.transforms.convert_pplan_to_cplan.bind`) and compares the two ops op by op
  (name, properties, the ids of the ops defining the operands): source-buffer identity, exact size, task
  lineage, command mapping and the typed extension must be equal.
* :func:`relation_violations` (AB-R-6) -- portable <-> concrete relations: buffer identity,
  capacity (size) and alignment; dependency correspondence; buffer access; operation identity;
  target ABI (plan target and legal implementation).

The pass ``cplan-verify`` runs :func:`check_invariants` on every ``cplan.plan`` of the module and,
when the module also holds the portable source (``convert-pplan-to-cplan{keep_source=true}``) or
``require_source`` is set, the commit gate and relation invariants.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pipeplan.analysis.schedule import Problem
from pipeplan.dialects.cplan import CplanError, PlanOp, subject_op
from pipeplan.dialects.cplan_invariants import (  # noqa: F401  (re-exported: the checks live with the dialect)
    GENERIC_IMPLS,
    INVARIANTS,
    PlanIndex,
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
    owner_id,
)
from pipeplan.dialects.diagnostics import OpPassError, gc_paused
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Attribute, Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

# --------------------------------------------------------------------------- commit gate + relations
_IDENTITIES = ("binder", "target", "deployment", "evidence", "risk", "source")
_GROUPS = (("devices", "devices"), ("links", "links"),
           ("allocs", "allocation (source-buffer identity, exact size, offset)"),
           ("cmds", "command mapping / task lineage"), ("syncs", "signal/wait edges"))


def _definer(v: Any) -> tuple[str, str]:
    """The name and ``id`` of the op defining operand ``v`` (``("", "")`` for a block argument)."""
    o = v.owner
    return (o.name, owner_id(v)) if isinstance(o, Operation) else ("", "")


def op_key(op: Operation) -> tuple[object, ...]:
    """What the commit gate compares of one op: its name, properties (not the discardable attributes, such as
    timing) and the op defining each operand, by name and id; for an extension op, its nested ops."""
    props: tuple[tuple[str, Attribute], ...] = tuple(sorted(op.properties.items()))
    nested = tuple(op_key(o) for r in op.regions for b in r.blocks for o in b.ops)
    return op.name, props, tuple(_definer(v) for v in op.operands), nested


def _describe(op: Operation, other: Operation | None) -> str:
    """``op`` as a commit-gate message shows it: its name and id, then the properties and operand definers in
    which it differs from ``other`` (all of them when ``other`` is None), e.g.
    ``cplan.command "cmd.t0" {lineage = #cplan.lineage<decode, stage 0, "elsewhere">}``."""
    ident = op.properties.get("id")
    head = op.name + (f' "{ident.data}"' if isinstance(ident, StringAttr) else "")
    theirs = {} if other is None or other.name != op.name else other.properties
    shown = [f"{k} = {v}" for k, v in op.properties.items()
             if k != "id" and (other is None or theirs.get(k) != v)]
    if other is not None:
        shown += [f"{k} = <none>" for k in theirs if k not in op.properties]
    mine = [_definer(v) for v in op.operands]
    if other is None or other.name != op.name or mine != [_definer(v) for v in other.operands]:
        if mine:
            shown.append("operands = [" + ", ".join(f"{n} {i!r}" if i else n for n, i in mine) + "]")
    if other is not None and other.name == op.name and not shown:
        shown.append("nested ops differ")
    return head + (" {" + ", ".join(shown) + "}" if shown else "")


def _first_difference(what: str, got: Sequence[Operation], want: Sequence[Operation]) -> Violation | None:
    k = next((i for i, (x, y) in enumerate(zip(got, want)) if op_key(x) != op_key(y)), min(len(got), len(want)))
    if k == len(got) == len(want):
        return None
    g = _describe(got[k], want[k] if k < len(want) else None) if k < len(got) else "<none>"
    w = _describe(want[k], got[k] if k < len(got) else None) if k < len(want) else "<none>"
    return Violation("AB-R-5", "commit_gate_mismatch", f"{what} differs from the rebuild at #{k}: got {g}, rebuilt {w}")


def commit_gate(plan: PlanOp, problem: Problem, index: PlanIndex | None = None) -> list[Violation]:
    """AB-R-5: rebuild the plan op with the same binder and pure normalizer and compare (empty when equal).

    The two ops are compared op by op (:func:`op_key`) per field group: the plan's identities, devices,
    links, allocations (source-buffer identity, exact size, offset), commands (task lineage, command
    mapping), signal/wait edges, the typed extension; each group reports its first differing op. Raises
    nothing; a rebuild that fails is reported as a violation. ``index``: the plan's PlanIndex when the
    caller has it.
    """
    from pipeplan.transforms.convert_pplan_to_cplan import bind

    try:
        with gc_paused():  # thousands of acyclic ops: no cyclic-GC scans while the rebuild is built
            ref = bind(problem, plan.binder.data).plan
    except CplanError as e:
        return [Violation("AB-R-5", "rebuild_failed", f"the portable source no longer binds: {e.message}")]
    out = []
    for name in _IDENTITIES:
        got, want = getattr(plan, name).data, getattr(ref, name).data
        if got != want:
            out.append(Violation("AB-R-5", "commit_gate_mismatch", f"{name} differs from the rebuild: got {got!r}, "
                                                                   f"rebuilt {want!r}"))
    mine, theirs = index or PlanIndex(plan), PlanIndex(ref)
    for group, what in _GROUPS:
        v = _first_difference(what, getattr(mine, group), getattr(theirs, group))
        if v is not None:
            out.append(v)
    e1, e2 = mine.ext, theirs.ext
    if e1 is None or e2 is None or e1.name != e2.name:
        if e1 is not e2:
            out.append(Violation("AB-R-5", "commit_gate_mismatch",
                                 f"typed extension differs from the rebuild: got {getattr(e1, 'name', '<none>')}, "
                                 f"rebuilt {getattr(e2, 'name', '<none>')}"))
    else:
        v = _first_difference("typed extension", [*mine.units, *mine.fires], [*theirs.units, *theirs.fires])
        if v is not None:
            out.append(v)
    return out


def _ids(vs: Sequence[Any]) -> tuple[str, ...]:
    return tuple(owner_id(v) for v in vs)


def relation_violations(plan: PlanOp, problem: Problem, index: PlanIndex | None = None) -> list[Violation]:
    """AB-R-6: portable <-> concrete relations (see the module docstring). ``index``: the plan's PlanIndex
    when the caller has it."""
    from pipeplan.transforms.convert_pplan_to_cplan import alloc_id, command_id

    out = []
    cx = index or PlanIndex(plan)
    target, source = plan.target.data, plan.source.data
    if target != problem.target or source != problem.source:
        out.append(Violation("AB-R-6", "target_abi", f"plan is bound to target '{target}' from '{source}', "
                                                     f"the portable input to '{problem.target}' from '{problem.source}'"))
    by_source: dict[str, list[Any]] = {}
    for a in cx.allocs:
        by_source.setdefault(a.source.data, []).append(a)
    for b in problem.buffers:
        got = by_source.get(b.id, [])
        if len(got) != 1:
            out.append(Violation("AB-R-6", "buffer_identity", f"portable buffer '{b.id}' ({b.lineage}) has {len(got)} "
                                                              f"allocations, expected 1"))
            continue
        a = got[0]
        size, align, offset, life = a.size.value.data, a.alignment.value.data, a.offset.value.data, a.lifetime.data
        if size < b.size or align % b.alignment or offset % b.alignment or life != b.lifetime:
            out.append(Violation("AB-R-6", "buffer_capacity",
                                 f"allocation '{a.id.data}' ({size} B, align {align}, offset {offset}, "
                                 f"{life}) does not hold portable buffer '{b.id}' ({b.size} B, align "
                                 f"{b.alignment}, {b.lifetime})"))
    known = {b.id for b in problem.buffers}
    for a in cx.allocs:
        if a.source.data not in known:
            out.append(Violation("AB-R-6", "buffer_identity", f"allocation '{a.id.data}' has no portable buffer "
                                                              f"'{a.source.data}'"))
    cmds = {c.task.data: c for c in cx.cmds}
    for t in problem.tasks:
        c = cmds.get(t.id)
        if c is None:
            out.append(Violation("AB-R-6", "operation_identity", f"portable task '{t.id}' ({t.lineage}) has no "
                                                                 f"command"))
            continue
        cid, op = c.id.data, c.op.data
        ins, outs, after = c.groups()
        deps, reads, writes = _ids(after), _ids(ins), _ids(outs)
        if op != t.op or cid != command_id(t.id):
            out.append(Violation("AB-R-6", "operation_identity", f"command '{cid}' runs op '{op}' but task "
                                                                 f"'{t.id}' ({t.lineage}) is '{t.op}'"))
        if deps != tuple(command_id(d) for d in t.deps):
            out.append(Violation("AB-R-6", "dependency_correspondence",
                                 f"command '{cid}' depends on {list(deps)} but task '{t.id}' ({t.lineage}) on "
                                 f"{list(t.deps)}"))
        if reads != tuple(alloc_id(b) for b in t.reads) or writes != tuple(alloc_id(b) for b in t.writes):
            out.append(Violation("AB-R-6", "buffer_access", f"command '{cid}' accesses {list(reads)}/"
                                                            f"{list(writes)} but task '{t.id}' ({t.lineage}) "
                                                            f"{list(t.reads)}/{list(t.writes)}"))
        if t.candidates and c.impl.data not in t.candidates:
            out.append(Violation("AB-R-6", "target_abi", f"command '{cid}' uses implementation "
                                                         f"'{c.impl.data}' that target '{problem.target}' does "
                                                         f"not offer for task '{t.id}' ({t.lineage})"))
    tasks = {t.id for t in problem.tasks}
    for c in cx.cmds:
        if c.task.data not in tasks:
            out.append(Violation("AB-R-6", "operation_identity", f"command '{c.id.data}' has no portable task "
                                                                 f"'{c.task.data}'"))
    return out


def verify_plan(plan: PlanOp, problem: Problem | None = None) -> list[Violation]:
    """Invariants, then (with the portable ``problem``) the commit gate and relation invariants."""
    cx = PlanIndex(plan)
    out = check_invariants(plan, cx)
    if problem is not None:
        out += relation_violations(plan, problem, cx) + commit_gate(plan, problem, cx)
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
            errors += [(v, p) for v in verify_plan(p, problem)]
        if errors:
            lines = [v.text() for v, _ in errors[:20]]
            more = f"\n... and {len(errors) - 20} more" if len(errors) > 20 else ""
            first, plan = errors[0]
            raise OpPassError("cplan-verify failed:\n" + "\n".join(lines) + more, op=subject_op(plan, first.subject))
