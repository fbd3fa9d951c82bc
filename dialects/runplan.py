"""The ``runplan`` dialect: one RunPlan (seed 000) as IR, its verifiers, and its provisions.

A RunPlan is one ``runplan.plan`` op (a symbol named by the run id) whose single block, without
terminator, holds

* ``runplan.orchestrator`` -- the orchestrator as a ``!runplan.stage`` value (token-in producer,
  token-out consumer),
* ``runplan.tensor`` -- the model's tensor index (one op per GGUF tensor, file order),
* ``runplan.stage`` -- one per pipeline stage: index, node id, half-open block range; yields the
  stage's ``!runplan.stage`` value,
* ``runplan.edge`` -- token-in, one activation edge per stage boundary, token-out: producer and
  consumer are ``!runplan.stage`` operands, with its ObjectSpec and RingSpec attributes,
* ``runplan.provision_stage`` -- after ``runplan-project-provisioning``: the ProvisionStage message
  of the stage value it takes (seed 000 "Provisioning Projection").

The plan's pool nodes, model facts, runtime config, weight source, the edges' ObjectSpec/RingSpec
and the provisions' tensor slices and edge provisions are typed attributes of
:mod:`pipeplan.dialects.runplan_attrs` with their own verifiers. In generic form every attribute
is a builtin carrier or an ``#runplan.<name><...>`` attribute, so the text passes through
``mlir-opt --allow-unregistered-dialect`` unchanged.

Verification follows seed 000 bullet by bullet. Every message has the stable form
``[<CONTRACT-ID>] <invariant>: <detail>`` naming the offending stage, edge or tensor; the
contract IDs are those of ``shared/CONTRACTS.md``. :data:`INVARIANT_CODES` maps each ID to the
:class:`~pipeplan.errors.RunPlanRejection` code that :func:`verify_runplan` raises.

Attribute verifiers check what one attribute states; each op's ``verify_`` what one op states
against the plan's config and facts; ``runplan.plan``'s ``verify_`` (run by xDSL after the nested
ops) the cross-op invariants: def-before-use of stage values, stage indices, contiguity, coverage,
edge topology, node ids, model facts vs tensor index, provisions vs plan.

This module holds the ops and the plan-level entry points (:func:`check_plan`, :func:`verify_runplan`,
:func:`rejection_from`); the types, attributes and syntax helpers are
:mod:`pipeplan.dialects.runplan_attrs`, the whole-plan checks and the provisioning projection
:mod:`pipeplan.dialects.runplan_checks`.
"""

from __future__ import annotations

import re

from pipeplan.dialects.carriers import i64_of
from pipeplan.dialects.diagnostics import PipeplanOp, located
from pipeplan.dialects.runplan_attrs import (
    _ID_RE,
    ATTRIBUTES,
    INVARIANT_CODES,
    MALFORMED_CODE,
    STAGE,
    EdgeKindAttr,
    EdgeProvisionAttr,
    ModelFactsAttr,
    NodeSpecAttr,
    ObjectSpecAttr,
    RingSpecAttr,
    RuntimeConfigAttr,
    StageType,
    TensorSliceAttr,
    WeightSourceAttr,
    _endpoint_str,
    _fail,
    _int_of,
    _ints,
    _parse_extra_attrs,
    _parse_int_list,
    _parse_range,
    _print_extra_attrs,
    _print_range,
    arch_params_of,
    edge_kind_attr,
    edge_provision_attr,
    object_spec_attr,
    parse_kw_body,
    print_body,
    read_node_entry,
    ring_spec_attr,
    weights_attr,
    within,
)
from pipeplan.dialects.runplan_checks import (
    EdgeRow,
    check_edge_specs,
    check_provisions,
    check_tensor,
    check_whole_plan,
    derive_provisions,
)
from pipeplan.errors import RunPlanRejection
from pipeplan.plan_types import (
    ORCHESTRATOR,
    EdgePlan,
    ModelFacts,
    NodePool,
    NodeSpec,
    ProvisionStage,
    StagePlan,
    TensorInfo,
)
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Dialect, Operation, SSAValue
from xdsl.irdl import (
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsolatedFromAbove, NoTerminator, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException


# --------------------------------------------------------------------------- ops
def _stage_name(op: Operation) -> str | None:
    """``s<index>`` for a stage op with a non-negative index, ``orch`` for the orchestrator."""
    if isinstance(op, OrchestratorOp):
        return "orch"
    idx = op.properties.get("index")
    return f"s{idx.value.data}" if isinstance(idx, IntegerAttr) and idx.value.data >= 0 else None


class _NamedStageValue(PipeplanOp):
    """Base of the ops that define a ``!runplan.stage`` value, named ``%s<index>`` / ``%orch``."""

    def result_name(self) -> str | None:
        return _stage_name(self)


@irdl_op_definition
class OrchestratorOp(_NamedStageValue):
    """The orchestrator of the run as a ``!runplan.stage`` value: the producer of the token-in edge
    and the consumer of the token-out edge (seed 000 Edge Assignment). At most one per plan.

    ```mlir
    %orch = runplan.orchestrator : !runplan.stage
    ```
    """

    name = "runplan.orchestrator"

    stage = result_def(StageType)

    assembly_format = "attr-dict `:` type($stage)"

    traits = lazy_traits_def(lambda: (HasParent(PlanOp),))

    @staticmethod
    def make() -> OrchestratorOp:
        return OrchestratorOp.create(result_types=[STAGE])


@irdl_op_definition
class TensorOp(PipeplanOp):
    """One tensor of the model's GGUF tensor index (plan_types.TensorInfo).

    Properties: ``tensor_name`` (GGUF name), ``ggml_type`` (ggml type name, e.g. ``F32``,
    ``Q8_0``), ``shape`` (ggml order, ``ne0`` first), ``shard`` (index into the weight source
    uris), ``offset`` (absolute byte offset in that shard), ``n_bytes`` (bytes) and ``block``
    (``N`` for ``blk.N.*``, ``-1`` for the others; printed only when ``>= 0``).

    Verifier [RP-AR-6]: non-negative shard/offset, positive dims, ``block`` agrees with the name,
    and ``n_bytes`` equals the size gguf's ``GGML_QUANT_SIZES`` gives for the type and shape.

    ```mlir
    runplan.tensor "blk.0.attn_q.weight" F32 [64, 64] shard 0 offset 1024 bytes 16384 block 0
    ```
    """

    name = "runplan.tensor"

    tensor_name = prop_def(StringAttr)
    ggml_type = prop_def(StringAttr)
    shape = prop_def(DenseArrayBase.constr(i64))
    shard = prop_def(IntegerAttr.constr(type=i64))
    offset = prop_def(IntegerAttr.constr(type=i64))
    n_bytes = prop_def(IntegerAttr.constr(type=i64))
    block = prop_def(IntegerAttr.constr(type=i64))

    traits = lazy_traits_def(lambda: (HasParent(PlanOp),))

    @staticmethod
    def from_info(t: TensorInfo) -> TensorOp:
        """The op of a TensorInfo (``block=None`` becomes ``-1``)."""
        return TensorOp.create(properties={
            "tensor_name": StringAttr(t.name), "ggml_type": StringAttr(t.ggml_type), "shape": _ints(t.shape),
            "shard": i64_of(t.shard), "offset": i64_of(t.offset), "n_bytes": i64_of(t.n_bytes),
            "block": i64_of(-1 if t.block is None else t.block)})

    def info(self) -> TensorInfo:
        """The TensorInfo this op states."""
        b = _int_of(self.block)
        return TensorInfo(self.tensor_name.data, self.ggml_type.data, tuple(self.shape.get_values()),
                          _int_of(self.shard), _int_of(self.offset), _int_of(self.n_bytes), None if b < 0 else b)

    def verify_(self) -> None:
        check_tensor(self.info())

    def print(self, printer: Printer) -> None:
        t = self.info()
        printer.print_string(" ")
        printer.print_string_literal(t.name)
        printer.print_string(" ")
        printer.print_identifier_or_string_literal(t.ggml_type)
        printer.print_string(f" [{', '.join(map(str, t.shape))}] shard {t.shard} offset {t.offset} bytes {t.n_bytes}")
        if t.block is not None:
            printer.print_string(f" block {t.block}")
        _print_extra_attrs(printer, self)

    @classmethod
    def parse(cls, parser: Parser) -> TensorOp:
        name = parser.parse_str_literal("tensor name")
        ggml_type = parser.parse_identifier_or_str_literal("ggml type")
        shape = _parse_int_list(parser)
        parser.parse_keyword("shard")
        shard = parser.parse_integer()
        parser.parse_keyword("offset")
        offset = parser.parse_integer()
        parser.parse_keyword("bytes")
        n_bytes = parser.parse_integer()
        block = parser.parse_integer() if parser.parse_optional_keyword("block") else -1
        op = TensorOp.from_info(TensorInfo(name, ggml_type, tuple(shape), shard, offset, n_bytes,
                                           None if block < 0 else block))
        op.attributes.update(_parse_extra_attrs(parser))
        return op


@irdl_op_definition
class StageOp(_NamedStageValue):
    """One pipeline stage (plan_types.StagePlan): ``index`` in ``0..N-1``, the ``node_id`` it runs
    on, and the half-open GGUF block range ``[layer_start, layer_end)``; yields the stage's
    ``!runplan.stage`` value (edges and provisions take it).

    Verifier: [RP-LA-5] index >= 0; [RP-AR-1] non-empty node id; [RP-LA-4] non-empty range;
    [RP-LA-3] range inside ``[0, block_count)`` of the parent plan. Cross-stage checks are the plan's.

    ```mlir
    %s1 = runplan.stage 1 on "node-b" layers [3, 5) : !runplan.stage
    ```
    """

    name = "runplan.stage"

    index = prop_def(IntegerAttr.constr(type=i64))
    node_id = prop_def(StringAttr)
    layer_start = prop_def(IntegerAttr.constr(type=i64))
    layer_end = prop_def(IntegerAttr.constr(type=i64))

    stage = result_def(StageType)

    traits = lazy_traits_def(lambda: (HasParent(PlanOp),))

    @staticmethod
    def make(index: int, node_id: str, layer_start: int, layer_end: int) -> StageOp:
        """The op of stage ``index`` on ``node_id`` over ``[layer_start, layer_end)`` (its value is named
        ``%s<index>``)."""
        return StageOp.create(properties={
            "index": i64_of(index), "node_id": StringAttr(node_id), "layer_start": i64_of(layer_start),
            "layer_end": i64_of(layer_end)}, result_types=[STAGE])

    @staticmethod
    def from_plan(s: StagePlan) -> StageOp:
        """The op of a planner StagePlan (see :meth:`make`)."""
        return StageOp.make(s.index, s.node_id, s.layer_start, s.layer_end)

    def number(self) -> int:
        """The stage index."""
        return _int_of(self.index)

    def layers(self) -> tuple[int, int]:
        """The half-open block range ``(layer_start, layer_end)``."""
        return _int_of(self.layer_start), _int_of(self.layer_end)

    def verify_(self) -> None:
        index, node = self.number(), self.node_id.data
        start, end = self.layers()
        if index < 0:
            raise _fail("RP-LA-5", "stage indices must be 0..stage_count-1", f"stage index {index} is negative")
        if not node:
            raise _fail("RP-AR-1", "every stage must name a node of the pool", f"stage {index} has an empty node id")
        if end <= start:
            raise _fail("RP-LA-4", "every stage must have exactly one non-empty layer range",
                        f"stage {index} has range [{start}, {end})")
        parent = self.parent_op()
        if isinstance(parent, PlanOp):
            bc = parent.block_count()
            if start < 0 or end > bc:
                raise _fail("RP-LA-3", "stage ranges must lie in the model's block range [0, block_count)",
                            f"stage {index} has range [{start}, {end}) but the model has {bc} blocks")

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.number()} on ")
        printer.print_string_literal(self.node_id.data)
        printer.print_string(" layers ")
        _print_range(printer, *self.layers())
        _print_extra_attrs(printer, self)
        printer.print_string(" : ")
        printer.print_attribute(self.stage.type)

    @classmethod
    def parse(cls, parser: Parser) -> StageOp:
        index = parser.parse_integer()
        parser.parse_keyword("on")
        node = parser.parse_str_literal("node id")
        parser.parse_keyword("layers")
        start, end = _parse_range(parser)
        op = StageOp.make(index, node, start, end)
        op.attributes.update(_parse_extra_attrs(parser))
        parser.parse_punctuation(":")
        parser.parse_type()
        return op


def stage_index(v: SSAValue, where: str) -> int:
    """The stage index of a ``!runplan.stage`` value (ORCHESTRATOR for the orchestrator's). Raises
    VerifyException [RP-EA-2] when ``v`` is not the result of a ``runplan.stage``/``orchestrator``."""
    owner = v.owner
    if isinstance(owner, StageOp):
        return _int_of(owner.index)
    if isinstance(owner, OrchestratorOp):
        return ORCHESTRATOR
    raise _fail("RP-EA-2", "every edge has exactly one producer and one consumer",
                f"{where} is not a stage or the orchestrator of the plan")


@irdl_op_definition
class EdgeOp(PipeplanOp):
    """One edge of the run (plan_types.EdgePlan): ``edge_id``, ``kind`` (token_in | activation |
    token_out), the ``producer`` and ``consumer`` stage values (a ``runplan.stage`` or the
    ``runplan.orchestrator``), and its ``object_spec`` / ``ring_spec`` attributes.

    Verifier (this edge against the parent plan's model facts and runtime config; what a spec states
    alone is its attribute's verifier): [RP-EA-1] non-empty id; [RP-EA-2] producer and consumer
    differ; [RP-OS-1] both specs present; [RP-OS-3] token edges carry ``token`` objects, activation
    edges ``activation`` objects; [RP-OS-5] token shape ``[max_seq_len]`` in the token dtype,
    activation shape ``[max_seq_len, hidden]``, alignment equal to the config's, ring slots equal to
    the config's and ``slot_bytes >= max_extent`` and aligned; [RP-OS-2] activation
    ``max_extent == max_seq_len * embedding_length * width(activation_dtype)``.

    ```mlir
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4,
        shape = [256, 64], layout = "row_major", alignment = 64, max_extent = 65536>
        ring <slots = 2, slot_bytes = 65536>
    ```
    """

    name = "runplan.edge"

    edge_id = prop_def(StringAttr)
    kind = prop_def(EdgeKindAttr)
    object_spec = opt_prop_def(ObjectSpecAttr)
    ring_spec = opt_prop_def(RingSpecAttr)

    producer = operand_def(StageType)
    consumer = operand_def(StageType)

    assembly_format = ("$edge_id $kind $producer `->` $consumer (`object` $object_spec^)? (`ring` $ring_spec^)? "
                       "attr-dict")

    traits = lazy_traits_def(lambda: (HasParent(PlanOp),))

    @staticmethod
    def from_plan(e: EdgePlan, stages: dict[int, SSAValue]) -> EdgeOp:
        """The op of an EdgePlan; ``stages`` maps a stage index (ORCHESTRATOR for the orchestrator) to
        its value. Raises VerifyException when a spec attribute refuses a value or an endpoint is not
        in ``stages`` [RP-EA-2]."""
        w = f"edge '{e.edge_id}'"
        for role, v in (("producer", e.producer), ("consumer", e.consumer)):
            if v not in stages:
                raise _fail("RP-EA-2", "every edge has exactly one producer and one consumer",
                            f"{w} has {role} {_endpoint_str(v)}, which is not a stage of the plan")
        return EdgeOp.create(operands=[stages[e.producer], stages[e.consumer]], properties={
            "edge_id": StringAttr(e.edge_id), "kind": edge_kind_attr(e.kind, w),
            "object_spec": within(w, lambda: object_spec_attr(e.object_spec)),
            "ring_spec": within(w, lambda: ring_spec_attr(e.ring_spec))})

    def where(self) -> str:
        return f"edge '{self.edge_id.data}'"

    def kind_name(self) -> str:
        """``token_in`` | ``activation`` | ``token_out``."""
        return str(self.kind.data.value)

    def specs(self) -> tuple[ObjectSpecAttr, RingSpecAttr]:
        """The ObjectSpec and RingSpec attributes; raises VerifyException [RP-OS-1] when one is missing."""
        for role, a in (("object", self.object_spec), ("ring", self.ring_spec)):
            if a is None:
                raise _fail("RP-OS-1", "every edge has an ObjectSpec and a RingSpec", f"{self.where()} has no {role} spec")
        assert self.object_spec is not None and self.ring_spec is not None
        return self.object_spec, self.ring_spec

    def endpoints(self) -> tuple[int, int]:
        """(producer, consumer) stage indices (ORCHESTRATOR for the orchestrator); raises VerifyException
        [RP-EA-2] when an endpoint is not a stage value of the plan."""
        w = self.where()
        return stage_index(self.producer, f"{w} producer"), stage_index(self.consumer, f"{w} consumer")

    def row(self) -> EdgeRow:
        """``(edge id, kind, producer, consumer)`` (the topology checks' index); raises VerifyException
        [RP-OS-1] when a spec is missing and [RP-EA-2] when an endpoint is not a stage value."""
        self.specs()
        return (self.edge_id.data, self.kind_name(), *self.endpoints())

    def verify_(self) -> None:
        w = self.where()
        if not self.edge_id.data:
            raise _fail("RP-EA-1", "every edge id must be unique and non-empty", "an edge has an empty id")
        if self.producer is self.consumer:
            raise _fail("RP-EA-2", "every edge has exactly one producer and one consumer",
                        f"{w} has the same producer and consumer (%{self.producer.name_hint or '?'})")
        obj, ring = self.specs()
        self.endpoints()
        parent = self.parent_op()
        if isinstance(parent, PlanOp):
            check_edge_specs(self.edge_id.data, self.kind_name(), obj.spec(), ring.spec(), parent.model.values(),
                             parent.config.values())


@irdl_op_definition
class ProvisionStageOp(PipeplanOp):
    """The ProvisionStage message of the stage value it takes (seed 000 "Provisioning Projection",
    seed 001).

    Properties: ``stage_count``, ``node_id``, ``layer_start``/``layer_end`` (own half-open block
    range), ``block_count`` (the model's), ``has_embedding``/``has_head`` (UnitAttr flags),
    ``max_seq_len``, ``weights`` (WeightSourceAttr), ``tensors`` (the stage's tensor byte ranges,
    TensorSliceAttr) and ``inbound``/``outbound`` (EdgeProvisionAttr: a peer is a node id or
    ``"orchestrator"``, never an actor address). ``run_id`` is the parent plan's symbol, the stage
    index that of the operand's ``runplan.stage``.

    Verifier: [RP-PP-1] the operand is a ``runplan.stage`` of the plan; [RP-PP-2] non-empty own range.
    Agreement with the plan is checked by the plan.

    ```mlir
    runplan.provision_stage %s1 of 3 on "node-b" layers [2, 4) blocks 5 max_seq_len 256
        weights <uris = ["model.gguf"], sha256 = [], sizes = []>
        in <edge_id = "act.0", kind = activation, peer_node_id = "node-a", object_spec = <...>, ring_spec = <...>>
        out <edge_id = "act.1", kind = activation, peer_node_id = "node-c", object_spec = <...>, ring_spec = <...>>
        tensors ["blk.2.attn_q.weight" F32 [64, 64] shard 0 offset 1024 bytes 16384, ...]
    ```
    """

    name = "runplan.provision_stage"

    stage_count = prop_def(IntegerAttr.constr(type=i64))
    node_id = prop_def(StringAttr)
    layer_start = prop_def(IntegerAttr.constr(type=i64))
    layer_end = prop_def(IntegerAttr.constr(type=i64))
    block_count = prop_def(IntegerAttr.constr(type=i64))
    has_embedding = opt_prop_def(UnitAttr)
    has_head = opt_prop_def(UnitAttr)
    max_seq_len = prop_def(IntegerAttr.constr(type=i64))
    weights = prop_def(WeightSourceAttr)
    tensors = prop_def(ArrayAttr[TensorSliceAttr])
    inbound = prop_def(EdgeProvisionAttr)
    outbound = prop_def(EdgeProvisionAttr)

    stage = operand_def(StageType)

    traits = lazy_traits_def(lambda: (HasParent(PlanOp),))

    @staticmethod
    def from_provision(p: ProvisionStage, stage: SSAValue) -> ProvisionStageOp:
        """The op of a ProvisionStage about the ``stage`` value (its ``run_id`` is the parent plan's
        symbol and its index the stage's: neither is stored)."""
        props: dict[str, Attribute] = {
            "stage_count": i64_of(p.stage_count), "node_id": StringAttr(p.node_id),
            "layer_start": i64_of(p.layer_start), "layer_end": i64_of(p.layer_end), "block_count": i64_of(p.block_count),
            "max_seq_len": i64_of(p.max_seq_len), "weights": weights_attr(p.weights),
            "tensors": ArrayAttr([TensorSliceAttr.of(t) for t in p.tensors]),
            "inbound": edge_provision_attr(p.inbound), "outbound": edge_provision_attr(p.outbound)}
        if p.has_embedding:
            props["has_embedding"] = UnitAttr()
        if p.has_head:
            props["has_head"] = UnitAttr()
        return ProvisionStageOp.create(operands=[stage], properties=props)

    def stage_index(self) -> int:
        """The index of the stage this provision is for; raises VerifyException [RP-PP-1] when the
        operand is not a ``runplan.stage``."""
        owner = self.stage.owner
        if not isinstance(owner, StageOp):
            raise _fail("RP-PP-1", "exactly one provision per stage",
                        f"a provision is about %{self.stage.name_hint or '?'}, which is not a stage of the plan")
        return _int_of(owner.index)

    def where(self) -> str:
        return f"provision of stage {self.stage_index()}"

    def provision(self, run_id: str = "") -> ProvisionStage:
        """The ProvisionStage this op states (``run_id`` given by the caller, normally the plan's)."""
        return ProvisionStage(
            run_id=run_id, stage=self.stage_index(), stage_count=_int_of(self.stage_count), node_id=self.node_id.data,
            layer_start=_int_of(self.layer_start), layer_end=_int_of(self.layer_end),
            block_count=_int_of(self.block_count), has_embedding=self.has_embedding is not None,
            has_head=self.has_head is not None, max_seq_len=_int_of(self.max_seq_len),
            weights=self.weights.source(), tensors=tuple(t.slice() for t in self.tensors.data),
            inbound=self.inbound.provision("in"), outbound=self.outbound.provision("out"))

    def verify_(self) -> None:
        start, end = _int_of(self.layer_start), _int_of(self.layer_end)
        if end <= start:
            raise _fail("RP-PP-2", "a stage receives only its own non-empty layer range",
                        f"{self.where()} has range [{start}, {end})")

    def print(self, printer: Printer) -> None:
        s = _int_of
        printer.print_string(" ")
        printer.print_operand(self.stage)
        printer.print_string(f" of {s(self.stage_count)} on ")
        printer.print_string_literal(self.node_id.data)
        printer.print_string(" layers ")
        _print_range(printer, s(self.layer_start), s(self.layer_end))
        printer.print_string(f" blocks {s(self.block_count)} max_seq_len {s(self.max_seq_len)}")
        if self.has_embedding is not None:
            printer.print_string(" embedding")
        if self.has_head is not None:
            printer.print_string(" head")
        with printer.indented(2):
            for kw, a in (("weights", self.weights), ("in", self.inbound), ("out", self.outbound)):
                printer._print_new_line()
                printer.print_string(kw + " ")
                print_body(printer, a)
            printer._print_new_line()
            printer.print_string("tensors [")
            with printer.indented():
                for n, t in enumerate(self.tensors.data):
                    if n:
                        printer.print_string(",")
                    printer._print_new_line()
                    t.print_body(printer)
            printer.print_string("]")
        _print_extra_attrs(printer, self)

    @classmethod
    def parse(cls, parser: Parser) -> ProvisionStageOp:
        stage = parser.parse_operand(STAGE)
        parser.parse_keyword("of")
        count = parser.parse_integer()
        parser.parse_keyword("on")
        node = parser.parse_str_literal("node id")
        parser.parse_keyword("layers")
        start, end = _parse_range(parser)
        parser.parse_keyword("blocks")
        blocks = parser.parse_integer()
        parser.parse_keyword("max_seq_len")
        max_seq_len = parser.parse_integer()
        props: dict[str, Attribute] = {
            "stage_count": i64_of(count), "node_id": StringAttr(node), "layer_start": i64_of(start),
            "layer_end": i64_of(end), "block_count": i64_of(blocks), "max_seq_len": i64_of(max_seq_len)}
        if parser.parse_optional_keyword("embedding"):
            props["has_embedding"] = UnitAttr()
        if parser.parse_optional_keyword("head"):
            props["has_head"] = UnitAttr()
        props["weights"] = parse_kw_body(parser, "weights", WeightSourceAttr)
        props["inbound"] = parse_kw_body(parser, "in", EdgeProvisionAttr)
        props["outbound"] = parse_kw_body(parser, "out", EdgeProvisionAttr)
        parser.parse_keyword("tensors")

        def entry() -> TensorSliceAttr:
            pos = parser.pos
            params = TensorSliceAttr.parse_body(parser)
            try:
                return TensorSliceAttr.new(params)
            except VerifyException as e:
                parser.raise_error(str(e), pos, parser.pos)

        props["tensors"] = ArrayAttr(parser.parse_comma_separated_list(Parser.Delimiter.SQUARE, entry))
        return ProvisionStageOp.create(operands=[stage], properties=props, attributes=_parse_extra_attrs(parser))


@irdl_op_definition
class PlanOp(PipeplanOp):
    """One RunPlan (seed 000): a symbol named by the run id, the ``nodes`` of the candidate pool
    (in pool order: each a NodeSpecAttr or, in plans written before node specs, a bare node id),
    the ``model`` facts (ModelFactsAttr), the runtime ``config`` (RuntimeConfigAttr) and the
    ``weights`` source (WeightSourceAttr), and a single block (no terminator) holding the
    ``runplan.orchestrator``, ``runplan.tensor``, ``runplan.stage``, ``runplan.edge`` and
    ``runplan.provision_stage`` ops.

    Verifier (whole plan, after the nested ops): see :func:`check_plan`.

    ```mlir
    runplan.plan @run0 nodes [#runplan.node<id = "node-a", memory_bytes = 1000000>, "node-b"]
        model <architecture = "llama", name = "tiny", block_count = 2, ...>
        config <max_seq_len = 16, activation_dtype = f32, ...>
        weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
      %orch = runplan.orchestrator : !runplan.stage
      runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 0 bytes 32 block 0
      %s0 = runplan.stage 0 on "node-a" layers [0, 1) : !runplan.stage
      runplan.edge "tok.in" token_in %orch -> %s0 object <...> ring <...>
    }
    ```
    """

    name = "runplan.plan"

    sym_name = prop_def(StringAttr)
    nodes = prop_def(ArrayAttr)
    model = prop_def(ModelFactsAttr)
    config = prop_def(RuntimeConfigAttr)
    weights = prop_def(WeightSourceAttr)

    body = region_def("single_block")

    traits = traits_def(NoTerminator(), IsolatedFromAbove(), SymbolOpInterface())

    def node_ids(self) -> tuple[str, ...]:
        """The candidate pool's node ids, in pool order (entries that are neither a string nor a node
        spec are skipped: :meth:`node_specs` reports them)."""
        out = []
        for a in self.nodes.data:
            if isinstance(a, NodeSpecAttr):
                out.append(a.id.data)
            elif isinstance(a, StringAttr):
                out.append(a.data)
        return tuple(out)

    def node_specs(self) -> tuple[NodeSpec | None, ...]:
        """Per pool node, its NodeSpec (None for a bare id). Raises VerifyException [RP-AR-1] on an
        entry that is neither or a duplicate id."""
        seen: dict[str, int] = {}
        out = []
        for k, a in enumerate(self.nodes.data):
            ident, spec = read_node_entry(a, f"nodes[{k}]")
            if ident in seen:
                raise _fail("RP-AR-1", "pool node ids are unique",
                            f"nodes[{k}] repeats node id '{ident}' of nodes[{seen[ident]}]")
            seen[ident] = k
            out.append(spec)
        return tuple(out)

    def node_pool(self) -> NodePool | None:
        """The candidate pool as a NodePool when every entry is a node spec, else None (a plan that
        names its nodes by id only states no capacities or peaks). Raises like :meth:`node_specs`."""
        specs = self.node_specs()
        if not specs or any(x is None for x in specs):
            return None
        return NodePool(tuple(x for x in specs if x is not None))

    def block_count(self) -> int:
        return _int_of(self.model.block_count)

    def facts(self) -> ModelFacts:
        """The ModelFacts this plan states: the ``model`` attribute and the ``runplan.tensor`` ops (op order)."""
        return self._facts([op.info() for op in self.body.block.ops if isinstance(op, TensorOp)])

    def _facts(self, tensors: list[TensorInfo]) -> ModelFacts:
        m = self.model.values()
        return ModelFacts(
            architecture=m["architecture"], name=m["name"], block_count=m["block_count"],
            embedding_length=m["embedding_length"], head_count=m["head_count"], head_count_kv=m["head_count_kv"],
            feed_forward_length=m["feed_forward_length"], vocab_size=m["vocab_size"],
            context_length=m["context_length"], rope_dimension_count=m["rope_dimension_count"],
            rope_freq_base=m["rope_freq_base"], rms_norm_eps=m["rms_norm_eps"], alignment=m["alignment"],
            tensors=tuple(tensors), block_bytes=m["block_bytes"], files=m["files"], sha256=m.get("sha256"),
            key_length=m.get("key_length", 0), value_length=m.get("value_length", 0),
            arch_params=arch_params_of(m.get("arch_params"), "the plan"))

    def tensor_ops(self) -> list[TensorOp]:
        return [op for op in self.body.block.ops if isinstance(op, TensorOp)]

    def stage_ops(self) -> list[StageOp]:
        return [op for op in self.body.block.ops if isinstance(op, StageOp)]

    def edge_ops(self) -> list[EdgeOp]:
        return [op for op in self.body.block.ops if isinstance(op, EdgeOp)]

    def provision_ops(self) -> list[ProvisionStageOp]:
        return [op for op in self.body.block.ops if isinstance(op, ProvisionStageOp)]

    def verify_(self) -> None:
        try:
            check_plan(self)
        except VerifyException as e:
            raise located(e, subject_op(self, str(e))) from None

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string(" nodes [")
        printer.print_list(self.nodes.data, printer.print_attribute)
        printer.print_string("]")
        with printer.indented(2):
            for kw, a in (("model", self.model), ("config", self.config), ("weights", self.weights)):
                printer._print_new_line()
                printer.print_string(kw + " ")
                print_body(printer, a)
            _print_extra_attrs(printer, self)
        printer.print_string(" ")
        printer.print_region(self.body)

    @classmethod
    def parse(cls, parser: Parser) -> PlanOp:
        sym = parser.parse_symbol_name()
        parser.parse_keyword("nodes")
        nodes = parser.parse_comma_separated_list(Parser.Delimiter.SQUARE, parser.parse_attribute)
        props: dict[str, Attribute] = {
            "sym_name": sym, "nodes": ArrayAttr(nodes), "model": parse_kw_body(parser, "model", ModelFactsAttr),
            "config": parse_kw_body(parser, "config", RuntimeConfigAttr),
            "weights": parse_kw_body(parser, "weights", WeightSourceAttr)}
        attrs = _parse_extra_attrs(parser)
        region = parser.parse_region()
        if not region.blocks:
            region.add_block(Block())
        return PlanOp.create(properties=props, attributes=attrs, regions=[region])


_SUBJECTS = (
    (re.compile(r"provisions? (?:of|names) stage (-?\d+)"), "provision"),
    (re.compile(r"(?:^|: )(?:stage|stages) (-?\d+)"), "stage"),
    (re.compile(r"edges? (?:id )?'([^']*)'"), "edge"),
    (re.compile(r"tensor '([^']*)'"), "tensor"),
    (re.compile(r"(orchestrator)s? "), "orchestrator"),
)


def subject_op(plan: PlanOp, message: str) -> Operation:
    """The op a whole-plan verifier message is about: the provision, stage, edge or tensor its detail
    names first (``provision of stage 1``, ``stage 1 ...``, ``edge 'act.0'``, ``tensor 'x'``), else
    ``plan``. Used to point diagnostics at the offending op."""
    detail = message.split("]", 1)[-1]
    detail = detail.split(": ", 1)[1] if ": " in detail else detail
    found: list[tuple[int, str, str]] = []
    for rx, kind in _SUBJECTS:
        m = rx.search(detail)
        if m:
            found.append((m.start(), kind, m.group(1)))
    for _, kind, key in sorted(found):
        for op in plan.body.block.ops:
            if kind == "provision" and isinstance(op, ProvisionStageOp) and isinstance(op.stage.owner, StageOp) \
                    and str(op.stage.owner.index.value.data) == key:
                return op
            if kind == "stage" and isinstance(op, StageOp) and str(op.index.value.data) == key:
                return op
            if kind == "edge" and isinstance(op, EdgeOp) and op.edge_id.data == key:
                return op
            if kind == "tensor" and isinstance(op, TensorOp) and op.tensor_name.data == key:
                return op
            if kind == "orchestrator" and isinstance(op, OrchestratorOp):
                return op
    return plan


def _check_ssa(plan: PlanOp) -> None:
    """Stage values: every operand is defined by an earlier op of the plan's block (def before use)
    [RP-AR-7] and the plan has at most one orchestrator [RP-AR-7]. (The plan is isolated from above,
    so an operand is always a value of this plan.)"""
    defined: set[SSAValue] = set()
    orchestrators = 0
    for op in plan.body.block.ops:
        if isinstance(op, OrchestratorOp):
            orchestrators += 1
            if orchestrators > 1:
                raise _fail("RP-AR-7", "the plan has one orchestrator", "the plan has 2 orchestrators")
        for k, v in enumerate(op.operands):
            if v not in defined:
                raise _fail("RP-AR-7", "stage values are defined before they are used",
                            f"'{op.name}' operand {k} (%{v.name_hint or '?'}) is used before its definition")
        defined.update(op.results)


def check_plan(plan: PlanOp, *, provisions: bool = True) -> None:
    """Whole-plan verification of ``plan`` (its nested ops already passed their own verifiers), on its
    ops: only runplan ops [RP-AR-7], def-before-use of stage values (:func:`_check_ssa`), every edge's
    specs and endpoints (:meth:`EdgeOp.row`), the model facts, the pool's nodes,
    :func:`check_whole_plan`, then (when ``provisions`` and any are present) :func:`check_provisions`
    against :func:`derive_provisions`. Raises VerifyException."""
    for op in plan.body.block.ops:
        if not isinstance(op, OrchestratorOp | TensorOp | StageOp | EdgeOp | ProvisionStageOp):
            raise _fail("RP-AR-7", "the plan is the only source of stage, layer, edge and object-spec assignment",
                        f"'{op.name}' is not a runplan op and cannot be part of a plan")
    _check_ssa(plan)
    edges = [op.row() for op in plan.edge_ops()]
    facts = plan.facts()
    plan.node_specs()
    check_whole_plan(plan, edges)
    if provisions:
        ops = plan.provision_ops()
        if ops:
            run_id = plan.sym_name.data
            check_provisions([op.provision(run_id) for op in ops], derive_provisions(plan, facts), plan.node_ids())


_RUNPLAN_OPS = (OrchestratorOp, TensorOp, StageOp, EdgeOp, ProvisionStageOp)


def verify_runplan(module: ModuleOp | PlanOp) -> None:
    """Verify every ``runplan.plan`` in ``module`` (nested ops first, then the plan); raise
    :class:`~pipeplan.errors.RunPlanRejection` on the first broken invariant.

    The rejection's message is the verifier message ``[<ID>] <invariant>: <detail>``, its ``code``
    is ``INVARIANT_CODES[<ID>]`` (``malformed_runplan`` when the IR is not a RunPlan at all) and its
    ``where`` the plan symbol. Runs ops' ``verify_`` directly so a failure does not print the
    module. Cost: linear in the number of ops.
    """
    plans = [module] if isinstance(module, PlanOp) else [op for op in module.walk() if isinstance(op, PlanOp)]
    if isinstance(module, ModuleOp):
        for op in module.walk():
            if isinstance(op, _RUNPLAN_OPS) and not isinstance(op.parent_op(), PlanOp):
                raise RunPlanRejection(f"'{op.name}' must be directly inside a runplan.plan", code=MALFORMED_CODE)
    if not plans:
        raise RunPlanRejection("the module holds no runplan.plan", code=MALFORMED_CODE)
    for plan in plans:
        try:
            for op in plan.body.block.ops:
                if isinstance(op, TensorOp | StageOp | EdgeOp | ProvisionStageOp):
                    op.verify_()
            plan.verify_()
        except VerifyException as e:
            raise rejection_from(e, plan.sym_name.data) from None


def rejection_from(e: Exception, where: str | None = None) -> RunPlanRejection:
    """The RunPlanRejection of a verifier or parse error (code from its ``[RP-..]`` contract ID; the
    message is the line that cites it, else the first line)."""
    lines = str(e).split("\n")
    msg = next((ln.strip() for ln in lines if _ID_RE.search(ln)), lines[0])
    m = _ID_RE.search(msg)
    code = INVARIANT_CODES.get(m.group(1), MALFORMED_CODE) if m else MALFORMED_CODE
    return RunPlanRejection(msg, code=code, where=where)


def plan_ops(module: Operation) -> list[PlanOp]:
    """Every ``runplan.plan`` in ``module`` (walk order)."""
    return [op for op in module.walk() if isinstance(op, PlanOp)]


Runplan = Dialect("runplan", [PlanOp, OrchestratorOp, TensorOp, StageOp, EdgeOp, ProvisionStageOp], ATTRIBUTES)
