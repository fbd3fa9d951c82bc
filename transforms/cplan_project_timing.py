"""``cplan-project-timing``: annotate a concrete plan (``cplan.plan``) with its timing projection.

Seeds/003 "Timing and simulation projection" (AB-T-1, AB-T-3): predicted start/end of every command
from the plan's costs (the CostedTaskView it was bound with), contention on shared queues and links,
the critical path, and an uncertainty interval from the evidence's confidence. The model is
:func:`pipeplan.analysis.simulate.project` over one ``prefill`` and one ``decode`` instance.

The results are **discardable attributes** (annotations), never properties: the concrete digest
(:func:`concrete_digest`, over properties only) does not change, and :func:`strip_timing` removes
them leaving the same replayable dependency/queue program::

    %3 = cplan.command "c0" (%0) -> (%1) {timing = {start = 0.0 : f64, end = 1.0e-06 : f64,
                   lo_start = …, lo_end = …, hi_start = …, hi_end = …, contention = 0.0 : f64,
                   critical = true}, task = …}
    cplan.plan attributes {...} {...}   // plus attribute timing = {makespan = …, lo_makespan = …,
                                        //   hi_makespan = …, contended = n : i64,
                                        //   critical_path = ["decode#0:cmd.…", …], steps = [...]}

Confidence per command: the ``#pplan.cost`` of its task's candidate of that implementation, once a
``pplan.costed_view`` is in the module (present when the plan was bound with ``keep_source=true``); otherwise the status
defaults of :data:`pipeplan.analysis.simulate.STATUS_CONFIDENCE`.

Errors (PassFailedException): no ``cplan.plan`` in the module, queue order and signal/wait edges that deadlock.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from pipeplan.analysis.simulate import Projection, build_model, project
from pipeplan.dialects.cplan import CommandOp, PlanOp
from pipeplan.dialects.pplan import CostedViewOp, fingerprint
from pipeplan.dialects.pplan import PlanOp as PortablePlanOp
from pipeplan.errors import PipeplanError
from xdsl.context import Context
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    f64,
    i64,
)
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

TIMING = "timing"
"""Name of the discardable timing attribute (on ``cplan.command``, ``cplan.plan`` and vmachine ops)."""


def find_cplan(module: ModuleOp) -> PlanOp:
    """The module's single ``cplan.plan``. Raises PipeplanError(code ``no_concrete_plan``)."""
    plans = [o for o in module.ops if isinstance(o, PlanOp)]
    if len(plans) != 1:
        raise PipeplanError(f"expected exactly one cplan.plan at module level, found {len(plans)}",
                            code="no_concrete_plan")
    return plans[0]


def concrete_digest(plan: PlanOp) -> str:
    """``sha256:<hex>`` of the canonical print of ``plan``'s properties (discardable annotations such
    as timing are excluded, see :func:`pipeplan.dialects.pplan.canonical_text`)."""
    return "sha256:" + fingerprint(plan)


def confidences_from_module(module: ModuleOp, plan: PlanOp) -> dict[str, float]:
    """Command id -> confidence of its cost in the module's ``pplan.costed_view`` (empty when the
    portable source was not kept). Matches by task and selected implementation."""
    conf: dict[tuple[str, str], float] = {}
    if any(isinstance(o, CostedViewOp) for o in module.ops):
        for p in module.ops:
            if isinstance(p, PortablePlanOp):
                for t in p.tasks():
                    impl = {c.rule: c.impl for c in t.candidates}
                    for cost in t.costs:
                        conf.setdefault((t.task_id, impl.get(cost.rule, "")), cost.confidence)
    out: dict[str, float] = {}
    for c in plan.body.block.ops:
        if isinstance(c, CommandOp):
            key = (c.task.data, c.impl.data)
            if key in conf:
                out[c.id.data] = conf[key]
    return out


def publication_digests(module: ModuleOp, plan_op: PlanOp) -> dict[str, str]:
    """The digests a TimelineBundle is published with (AB-T-4): ``concrete`` (:func:`concrete_digest`),
    ``portable`` (the plan's source), ``evidence`` and ``policy`` (the CostedTaskView's fingerprints
    when the module holds it, else sha256 of the plan's evidence identity, marked ``identity:``)."""
    out = {"concrete": concrete_digest(plan_op), "portable": plan_op.source.data, "target": plan_op.target.data,
           "deployment": plan_op.deployment.data}
    views = [o for o in module.ops if isinstance(o, CostedViewOp)]
    if views:
        out["evidence"] = views[0].evidence_fingerprint.data
        out["policy"] = views[0].policy_fingerprint.data
    else:
        ident = hashlib.sha256(plan_op.evidence.data.encode()).hexdigest()
        out["evidence"] = out["policy"] = f"identity:{plan_op.evidence.data}:{ident}"
    return out


def _f(v: float) -> FloatAttr:
    return FloatAttr(float(v), f64)


def annotate(plan_op: PlanOp, proj: Projection) -> None:
    """Attach the projection's intervals to ``plan_op``'s commands and its summary to the plan."""
    model, g = proj.model, proj.graph
    per: dict[str, int] = {}
    for v, n in enumerate(g.nodes):
        per.setdefault(model.commands[n.cmd].id, v)
    crit = set(proj.critical_path)
    for o in plan_op.body.block.ops:
        if isinstance(o, CommandOp) and o.id.data in per:
            v = per[o.id.data]
            iv = proj.intervals[v]
            o.attributes[TIMING] = DictionaryAttr({
                "start": _f(iv.start), "end": _f(iv.end), "lo_start": _f(iv.lo_start), "lo_end": _f(iv.lo_end),
                "hi_start": _f(iv.hi_start), "hi_end": _f(iv.hi_end), "contention": _f(iv.contention),
                "critical": IntegerAttr.from_bool(v in crit)})
    plan_op.attributes[TIMING] = DictionaryAttr({
        "makespan": _f(proj.makespan), "lo_makespan": _f(proj.lo_makespan), "hi_makespan": _f(proj.hi_makespan),
        "contended": IntegerAttr(proj.contended, i64),
        "critical_path": ArrayAttr([StringAttr(f"{g.nodes[v].step}#{g.nodes[v].iteration}:"
                                               f"{model.commands[g.nodes[v].cmd].id}") for v in proj.critical_path]),
        "steps": ArrayAttr([StringAttr(s) for s in model.steps])})


def strip_timing(root: Operation) -> int:
    """Remove every ``timing`` annotation under ``root`` (cplan and vmachine ops); returns how many
    (AB-T-3: what is left is the same dependency/queue program)."""
    n = 0
    for o in root.walk():
        if TIMING in o.attributes:
            del o.attributes[TIMING]
            n += 1
    return n


def project_module(module: ModuleOp) -> Projection:
    """Project the module's ``cplan.plan`` and annotate it (see the module docstring).

    Raises PipeplanError (no_concrete_plan) or SimulationError (deadlock).
    """
    plan_op = find_cplan(module)
    model = build_model(plan_op, confidences_from_module(module, plan_op))
    proj = project(model, tuple(s for s in ("prefill", "decode") if s in model.steps) or model.steps[:1])
    annotate(plan_op, proj)
    return proj


@dataclass(frozen=True)
class CplanProjectTimingPass(ModulePass):
    """Annotate the module's ``cplan.plan`` with its timing projection (module docstring)."""

    name = "cplan-project-timing"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        try:
            project_module(op)
        except PipeplanError as e:
            raise PassFailedException(f"cplan-project-timing: {e.one_line()}") from None
