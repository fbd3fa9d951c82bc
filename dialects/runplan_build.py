"""Builder of ``runplan`` IR from the planner's decision record, and readers of the plan's pool and provisions.

* :func:`build_runplan_module` -- RunPlanSpec + node pool (NodeSpecs, or bare ids) -> ``builtin.module``
  holding one ``runplan.plan`` (built directly, no text parsing; not verified: call :func:`verify_runplan`).
  Passes and tools read the plan through the ops' accessors (``PlanOp.facts()``, ``stage_ops()``, ...),
  never back into a RunPlanSpec.
* :func:`single_plan` -- the module's one ``runplan.plan``.
* :func:`plan_node_pool` -- the NodePool the plan carries (None when it names nodes by id only).
* :func:`provisions_from_module` -- the ProvisionStage values of the ``runplan.provision_stage`` ops.
* :func:`derive_provision_ops` -- the ``runplan.provision_stage`` ops ``runplan-project-provisioning`` inserts.
* :func:`project_provisions` -- those ops' ProvisionStage values, built detached (the module is unchanged).

Cost is linear in tensors + stages + edges (80 blocks x 8 stages: a few tens of ms).
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeplan.dialects.runplan import (
    EdgeOp,
    OrchestratorOp,
    PlanOp,
    ProvisionStageOp,
    StageOp,
    TensorOp,
    check_plan,
    plan_ops,
    rejection_from,
    verify_runplan,
)
from pipeplan.dialects.runplan_attrs import (
    INVARIANT_CODES,
    ModelFactsAttr,
    arch_params_attr,
    config_attr,
    node_entry_attr,
    weights_attr,
    within,
)
from pipeplan.dialects.runplan_checks import check_whole_plan, derive_provisions
from pipeplan.errors import RunPlanRejection
from pipeplan.plan_types import ORCHESTRATOR, NodePool, NodeSpec, ProvisionStage, RunPlanSpec
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

__all__ = ["INVARIANT_CODES", "build_runplan_module", "build_plan_op", "single_plan",
           "provisions_from_module", "derive_provision_ops", "project_provisions", "derive_provisions",
           "verify_runplan", "plan_node_ids", "plan_node_pool"]


def build_plan_op(spec: RunPlanSpec, nodes: NodePool | Sequence[NodeSpec | str]) -> PlanOp:
    """The ``runplan.plan`` op of ``spec``: the orchestrator, tensor ops (file order), then stages,
    then edges (producer/consumer: the stage values), each in the order of ``spec``. ``nodes`` is the
    candidate pool (pool order) — a NodePool or NodeSpecs, recorded as node spec attributes (id,
    memory and peaks: what ``convert-runplan-to-pplan`` builds the DeploymentBinding from), or bare
    node ids (the plan then states no capacities) — so the verifier can reject unknown nodes (RP-AR-1).

    Raises RunPlanRejection when an attribute verifier refuses a value (an invalid ObjectSpec,
    RingSpec, config, model facts or node spec) or an edge names an endpoint that is not a stage
    of ``spec``; the cross-op invariants are :func:`verify_runplan`'s."""
    try:
        return _build_plan_op(spec, nodes)
    except VerifyException as e:
        raise rejection_from(e, spec.run_id) from None


def _build_plan_op(spec: RunPlanSpec, nodes: NodePool | Sequence[NodeSpec | str]) -> PlanOp:
    entries = nodes.nodes if isinstance(nodes, NodePool) else nodes
    f = spec.facts
    model = within("the plan", lambda: ModelFactsAttr.of(
        architecture=f.architecture, name=f.name, block_count=f.block_count,
        embedding_length=f.embedding_length, head_count=f.head_count, head_count_kv=f.head_count_kv,
        feed_forward_length=f.feed_forward_length, vocab_size=f.vocab_size,
        context_length=f.context_length, rope_dimension_count=f.rope_dimension_count,
        rope_freq_base=f.rope_freq_base, rms_norm_eps=f.rms_norm_eps, alignment=f.alignment,
        block_bytes=f.block_bytes, files=f.files, sha256=f.sha256, key_length=f.key_length or None,
        value_length=f.value_length or None, arch_params=arch_params_attr(f.arch_params)))

    def props() -> dict[str, Attribute]:
        return {"sym_name": StringAttr(spec.run_id),
                "nodes": ArrayAttr([within(f"nodes[{k}]", lambda n=n: node_entry_attr(n)) for k, n in enumerate(entries)]),
                "model": model, "config": within("the plan", lambda: config_attr(spec.config)),
                "weights": within("the plan", lambda: weights_attr(spec.weights))}

    orch = OrchestratorOp.make()
    ops: list[Operation] = [orch]
    ops += [TensorOp.from_info(t) for t in f.tensors]
    stage_ops = [StageOp.from_plan(s) for s in spec.stages]
    ops += stage_ops
    values: dict[int, SSAValue] = {ORCHESTRATOR: orch.stage}
    for op in stage_ops:
        values.setdefault(op.number(), op.stage)
    if any(v not in values for e in spec.edges for v in (e.producer, e.consumer)):
        # An edge to a stage the plan lacks cannot be stated in SSA: report the first broken invariant of
        # the plan without its edges and the planner's edges (a duplicate or missing stage, an endpoint out
        # of range), else EdgeOp.from_plan's RP-EA-2.
        for op in stage_ops:
            op.verify_()
        stages_only = PlanOp.create(properties=props(), regions=[Region(Block(ops))])
        check_whole_plan(stages_only, [(e.edge_id, e.kind, e.producer, e.consumer) for e in spec.edges])
        for op in ops:
            op.detach()
    ops += [EdgeOp.from_plan(e, values) for e in spec.edges]
    return PlanOp.create(properties=props(), regions=[Region(Block(ops))])


def build_runplan_module(spec: RunPlanSpec, nodes: NodePool | Sequence[NodeSpec | str]) -> ModuleOp:
    """A ``builtin.module`` holding the ``runplan.plan`` of ``spec`` (see :func:`build_plan_op`).

    Verifies only the attributes (RunPlanRejection when one refuses a value): the planner calls
    :func:`verify_runplan` for the rest (RunPlanRejection on failure)."""
    return ModuleOp([build_plan_op(spec, nodes)])


def _single_plan(module: ModuleOp | PlanOp) -> PlanOp:
    if isinstance(module, PlanOp):
        return module
    plans = plan_ops(module)
    if len(plans) != 1:
        raise RunPlanRejection(f"expected exactly one runplan.plan, found {len(plans)}", code="malformed_runplan")
    return plans[0]


def single_plan(module: ModuleOp | PlanOp, *, readable: bool = False) -> PlanOp:
    """The module's single ``runplan.plan`` (``module`` itself when it is one). Raises
    RunPlanRejection(malformed_runplan) when there is not exactly one; with ``readable``, also
    RunPlanRejection when an edge lacks a spec or names a non-stage endpoint or the model facts do not
    read (what the tools read from a plan; not the whole-plan verifier)."""
    plan = _single_plan(module)
    if readable:
        try:
            for op in plan.edge_ops():
                op.row()
            plan.facts()
        except VerifyException as e:
            raise rejection_from(e, plan.sym_name.data) from None
    return plan


def plan_node_ids(module: ModuleOp | PlanOp) -> tuple[str, ...]:
    """The node pool ids recorded in the module's single plan."""
    return _single_plan(module).node_ids()


def plan_node_pool(module: ModuleOp | PlanOp) -> NodePool | None:
    """The candidate pool the module's single plan carries (node specs, pool order), or None when
    any node is named by id only. Raises RunPlanRejection(unknown_node) on a malformed node entry."""
    plan = _single_plan(module)
    try:
        return plan.node_pool()
    except VerifyException as e:
        raise rejection_from(e, plan.sym_name.data) from None


def provisions_from_module(module: ModuleOp | PlanOp) -> list[ProvisionStage]:
    """The ProvisionStage values of the plan's ``runplan.provision_stage`` ops, in stage order
    (``run_id`` = the plan's symbol). Empty before ``runplan-project-provisioning`` ran.
    Raises RunPlanRejection when an op is malformed."""
    plan = _single_plan(module)
    try:
        out = [op.provision(plan.sym_name.data) for op in plan.body.block.ops if isinstance(op, ProvisionStageOp)]
    except VerifyException as e:
        raise rejection_from(e, plan.sym_name.data) from None
    return sorted(out, key=lambda p: p.stage)


def derive_provision_ops(plan: PlanOp) -> list[ProvisionStageOp]:
    """The derived (detached) ``runplan.provision_stage`` ops of ``plan``, in stage order.

    The plan, ignoring any provision ops it already holds, is verified first (every tensor, stage
    and edge op's own checks, then the whole-plan checks). Raises RunPlanRejection (code from the
    broken invariant) when it does not verify. Cost: O(ops + stages x tensors)."""
    try:
        for op in plan.body.block.ops:
            if isinstance(op, TensorOp | StageOp | EdgeOp):
                op.verify_()
        check_plan(plan, provisions=False)
        derived = derive_provisions(plan)
    except VerifyException as e:
        raise rejection_from(e, plan.sym_name.data) from None
    values = {op.number(): op.stage for op in plan.stage_ops()}
    return [ProvisionStageOp.from_provision(p, values[p.stage]) for p in derived]


def project_provisions(module: ModuleOp | PlanOp) -> list[ProvisionStage]:
    """The ProvisionStage values ``runplan-project-provisioning`` derives for the module's plan,
    read back from the very ``runplan.provision_stage`` ops the pass would insert (built detached,
    so ``module`` is not changed and no clone is made). Raises RunPlanRejection when the plan does
    not verify."""
    plan = _single_plan(module)
    ops = derive_provision_ops(plan)
    try:
        return [op.provision(plan.sym_name.data) for op in ops]
    except VerifyException as e:  # pragma: no cover - derived ops are well-formed by construction
        raise rejection_from(e, plan.sym_name.data) from None
