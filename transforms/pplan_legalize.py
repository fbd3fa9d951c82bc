"""``pplan-legalize{target=...}``: map every portable task to legal implementations (AB-L-1, AB-L-2, AB-I-2).

For each ``pplan.task`` the target plugin's capability rules for its op are checked by the
plugin's LegalityModel (dtype, shape, layout, alignment, memory space, collective, runtime,
library, ABI), for the task as written and for each requirement rewrite the plugin's selector
offers. A rewrite that changes the task's op, flops, bytes, dtypes, shape or collective is refused
(AB-L-2). The legal (task, rule) pairs become the task's ``pplan.candidates`` attribute (an array of
``#pplan.candidate``, rank -1; costs of candidates it keeps stay), each recording rule, resources and the
reasons every other rule was rejected; the originating task is the op it annotates and the plugin
revision is the ``pplan.target_binding``'s (AB-I-1). A ``pplan.candidates`` op next to the plan names
the target and the portable digest.

A task with no legal candidate fails the pass with the lineage path
``model op -> stage/block (step) -> task -> rejected candidates with reasons`` — never a generic
fallback implementation (AB-I-2). The TargetBinding comes from the ``target`` option (the plugin's
identity is inserted as ``pplan.target_binding``) or from a ``pplan.target_binding`` already in the
module; neither is a "missing binding" diagnostic (AB-G-4). The plan's properties are not modified (the
annotations are discardable, so the portable digest is unchanged).
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeplan.dialects.bindings import TargetBinding, TargetBindingOp, find_binding, require_binding
from pipeplan.dialects.carriers import int_tuple
from pipeplan.dialects.diagnostics import gc_paused
from pipeplan.dialects.pplan import (
    BufferType,
    CandidateAttr,
    CandidatesOp,
    PlanOp,
    TaskOp,
    find_plan,
    ints,
    portable_digest,
)
from pipeplan.targets import (
    Candidate,
    TargetPlugin,
    TaskRequirements,
    UnknownTargetError,
    get_target,
)
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException


def task_requirements(t: TaskOp) -> TaskRequirements:
    """The normalized requirements of a ``pplan.task``."""
    return TaskRequirements(
        task=t.task_id, op=str(t.op.data), dtypes=t.dtypes(), shape=ints(t.work), layout=t.layout,
        alignment=t.alignment, memspace=t.memspace, collective=t.collective,
        flops=t.flops.value.data, bytes_read=t.nbytes_read, bytes_written=t.nbytes_written,
        lineage=t.lineage)


def plan_task_requirements(plan: PlanOp) -> list[tuple[TaskOp, int, TaskRequirements]]:
    """``(task, stage index, task_requirements(task))`` of every task of ``plan`` in program order, read in
    one walk (each step's and stage's names once, each buffer type's dtype and alignment once)."""
    types: dict[int, tuple[str, int]] = {}
    out: list[tuple[TaskOp, int, TaskRequirements]] = []
    for sp in plan.steps():
        step = str(sp.step.data)
        for st in sp.stages():
            idx = st.index.value.data
            pre = f"{step}.s{idx}."
            for t in st.tasks():
                tid = pre + t.task.data
                op = str(t.op.data)
                ins = t.ins
                tys = []
                for v in (*ins, *(r for r in t.outs if isinstance(r.type, BufferType))):
                    ty = v.type
                    got = types.get(id(ty))
                    if got is None:
                        assert isinstance(ty, BufferType), ty
                        got = types[id(ty)] = (ty.dtype, ty.alignment)
                    tys.append(got)
                nb = int_tuple(t.bytes)
                n = len(ins)
                blk = t.block.value.data
                comm = op in ("send", "recv")
                where = f"stage {idx}" + (f" block {blk}" if blk >= 0 else "")
                out.append((t, idx, TaskRequirements(
                    task=tid, op=op, dtypes=tuple(x[0] for x in tys), shape=ints(t.work), layout="row_major",
                    alignment=min(x[1] for x in tys) if tys else 1, memspace="link" if comm else "device",
                    collective=op if comm else "none", flops=t.flops.value.data, bytes_read=sum(nb[:n]),
                    bytes_written=sum(nb[n:]),
                    lineage=f"model op {t.model_op.data} -> {where} ({step}) -> task @{tid}")))
    return out


def plan_of(module: ModuleOp, pass_name: str) -> PlanOp:
    """The module's ``pplan.plan``, or PassFailedException naming ``pass_name``."""
    try:
        return find_plan(module)
    except ValueError as e:
        raise PassFailedException(f"{pass_name}: {e}") from None


def resolve_target(module: ModuleOp, option: str, pass_name: str) -> tuple[TargetPlugin, TargetBindingOp]:
    """The target plugin and its ``pplan.target_binding`` op (inserted from the plugin when the
    option names one and the module has none).

    Raises:
        PassFailedException: missing binding (no option, no op), unknown target, or an option that
            contradicts the module's binding.
    """
    existing = find_binding(module, "TargetBinding")
    name = option or (existing.target.data if isinstance(existing, TargetBindingOp) else "")
    if not name:
        require_binding(module, "TargetBinding", pass_name)
    try:
        plugin = get_target(name)
    except UnknownTargetError as e:
        raise PassFailedException(f"{pass_name}: {e.message}") from None
    if isinstance(existing, TargetBindingOp):
        if TargetBinding.from_op(existing) != plugin.binding:
            raise PassFailedException(
                f"{pass_name}: the module's TargetBinding (target {existing.target.data}, plugin revision "
                f"{existing.plugin_revision.data}) does not match target plugin {plugin.name} ({plugin.revision})")
        return plugin, existing
    op = plugin.binding.to_op()
    module.body.block.add_op(op)
    return plugin, op


def legalize_task(plugin: TargetPlugin, binding: TargetBinding, req: TaskRequirements
                  ) -> tuple[list[Candidate], list[str]]:
    """Legal candidates of one task and the rejection reasons (``"<rule>[ (rewrite)]: <reasons>"``).

    Raises:
        PassFailedException: a plugin rewrite changes the task's semantics (AB-L-2).
    """
    alts = [req]
    for alt in plugin.selector.alternatives(req):
        if alt.semantic_key() != req.semantic_key() or alt.task != req.task:
            raise PassFailedException(
                f"pplan-legalize: target {plugin.name} ({plugin.revision}) offered rewrite {alt.rewrite!r} of "
                f"{req.lineage} that changes its op, bytes, flops, dtypes, shape or collective: refused")
        alts.append(alt)
    legal: list[Candidate] = []
    rejected: list[str] = []
    for rule in plugin.capability.rules_for(req.op):
        for alt in alts:
            reasons = plugin.legality.check(alt, rule, binding)
            tag = rule.name + (f" ({alt.rewrite})" if alt.rewrite else "")
            if reasons:
                rejected.append(f"{tag}: {'; '.join(reasons)}")
            else:
                legal.append(Candidate(req.task, rule, alt, plugin.resources.resources(alt, rule)))
                break  # the least-rewritten legal form of this rule is enough
    return legal, rejected


def candidate_attr(c: Candidate, rejected: list[str]) -> CandidateAttr:
    """The ``#pplan.candidate`` of a legal candidate (rank -1).

    Raises:
        PassFailedException: the plugin's resources name something other than ``engine`` and
            ``workspace_bytes`` (the typed parameters of a candidate).
    """
    res = dict(c.resources)
    engine, ws = res.pop("engine", ""), res.pop("workspace_bytes", 0)
    if res or not isinstance(engine, str) or not isinstance(ws, int):
        raise PassFailedException(f"pplan-legalize: candidate {c.rule.impl} of @{c.task}: resources {c.resources} are "
                                  f"not {{engine: str, workspace_bytes: int}}")
    return CandidateAttr(c.rule.impl, engine, rule=c.rule.name, workspace_bytes=ws,
                         rewrite=c.requirements.rewrite or "", rejected=rejected)


@dataclass(frozen=True)
class PplanLegalizePass(ModulePass):
    """Legalize the portable plan for ``target`` (a name in ``lowering.targets.TARGETS``).

    Errors (PassFailedException): no plan; missing/unknown/contradicting TargetBinding; a task
    without legal implementation (lineage path and every rejected candidate with its reasons);
    a plugin rewrite that changes semantics.
    """

    name = "pplan-legalize"

    target: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        with gc_paused():
            self._apply(op)

    def _apply(self, op: ModuleOp) -> None:
        plan = plan_of(op, self.name)
        plugin, bop = resolve_target(op, self.target, self.name)
        binding = TargetBinding.from_op(bop)
        cands: list[tuple[TaskOp, list[CandidateAttr]]] = []
        made: dict[tuple, CandidateAttr] = {}
        failures: list[str] = []
        for t, _, req in plan_task_requirements(plan):
            legal, rejected = legalize_task(plugin, binding, req)
            if not legal:
                why = "; ".join(rejected) if rejected else f"none (target offers no implementation of op {req.op})"
                failures.append(f"no legal implementation on target {plugin.name} ({plugin.revision}) for "
                                f"{req.lineage} -> rejected candidates: {why}")
                continue
            mine: list[CandidateAttr] = []
            for c in legal:
                others = [r for r in rejected if not r.startswith(c.rule.name + ":") and
                          not r.startswith(c.rule.name + " (")]
                key = (c.rule.impl, c.rule.name, c.requirements.rewrite, repr(c.resources), tuple(others))
                a = made.get(key)  # equal candidates share one attribute (same rule, resources, reasons)
                if a is None:
                    a = made[key] = candidate_attr(c, others)
                mine.append(a)
            cands.append((t, mine))
        if failures:
            more = f" (and {len(failures) - 1} more tasks)" if len(failures) > 1 else ""
            raise PassFailedException(f"pplan-legalize: {failures[0]}{more}")
        for old in [o for o in op.ops if isinstance(o, CandidatesOp)]:
            old.detach()
            old.erase()
        for t, mine in cands:
            t.set_candidates(mine, keep_costs=True)
        op.body.block.add_op(CandidatesOp(plan=plan.sym_name.data, target=plugin.name,
                                          portable_digest=portable_digest(plan)))
