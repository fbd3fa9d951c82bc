"""The ``runplan`` dialect: one RunPlan (seed 000) as IR, its verifiers, and its provisions.

A RunPlan is one ``runplan.plan`` op (a symbol named by the run id) whose single block, without
terminator, holds

* ``runplan.tensor`` -- the model's tensor index (one op per GGUF tensor, file order),
* ``runplan.stage`` -- one per pipeline stage: index, node id, half-open block range,
* ``runplan.edge`` -- token-in, one activation edge per stage boundary, token-out, each with its
  ObjectSpec and RingSpec,
* ``runplan.provision_stage`` -- after ``runplan-project-provisioning``: the ProvisionStage message
  of one stage (seed 000 "Provisioning Projection").

Every property uses a carrier that upstream MLIR parses (``IntegerAttr`` i64, ``StringAttr``,
``ArrayAttr``, ``array<i64: ...>``, ``FloatAttr`` f64, ``UnitAttr``, ``DictionaryAttr``), so the
generic form passes through ``mlir-opt --allow-unregistered-dialect`` unchanged. Grouped values
(model facts, runtime config, weight source, ObjectSpec, RingSpec, edge provisions) are
``DictionaryAttr`` values with a fixed schema checked by the verifiers.

Verification follows seed 000 bullet by bullet. Every message has the stable form
``[<CONTRACT-ID>] <invariant>: <detail>`` naming the offending stage, edge or tensor; the
contract IDs are those of ``shared/CONTRACTS.md``. :data:`INVARIANT_CODES` maps each ID to the
:class:`~pipeplan.errors.RunPlanRejection` code that :func:`verify_runplan` raises.

Local invariants (one op) are checked by each op's ``verify_``; cross-op invariants (stage
indices, contiguity, coverage, edge topology, node ids, model facts vs layout, provisions vs plan)
by ``runplan.plan``'s ``verify_``, which xDSL runs after the nested ops.

This module holds the ops and the plan-level entry points (:func:`check_plan`, :func:`verify_runplan`,
:func:`rejection_from`); the attribute schemas, conversions, syntax helpers and runtime config are
:mod:`pipeplan.dialects.runplan_attrs`, the whole-plan checks and the provisioning projection
:mod:`pipeplan.dialects.runplan_checks`.
"""

from __future__ import annotations

import re
from typing import Any

from pipeplan.dialects.carriers import i64_of, strings
from pipeplan.dialects.diagnostics import PipeplanOp, located
from pipeplan.dialects.runplan_attrs import (
    _ID_RE,
    CONFIG_SCHEMA,
    EDGE_PROVISION_SCHEMA,
    INVARIANT_CODES,
    MALFORMED_CODE,
    MODEL_SCHEMA,
    NODE_SCHEMA,
    OBJECT_SCHEMA,
    RING_SCHEMA,
    WEIGHTS_SCHEMA,
    _check_config,
    _endpoint_str,
    _fail,
    _int_of,
    _ints,
    _parse_dict,
    _parse_extra_attrs,
    _parse_int_list,
    _parse_kw_dict,
    _parse_range,
    _print_dict,
    _print_extra_attrs,
    _print_range,
    arch_params_of,
    edge_provision_attr,
    object_spec_attr,
    read_edge_provision,
    read_node_entry,
    read_object_spec,
    read_ring_spec,
    read_weights,
    ring_spec_attr,
    weights_attr,
)
from pipeplan.dialects.runplan_checks import (
    check_edge_specs,
    check_provisions,
    check_spec,
    check_tensor,
    derive_provisions,
)
from pipeplan.errors import RunPlanRejection
from pipeplan.plan_types import (
    EDGE_KINDS,
    ORCHESTRATOR,
    EdgePlan,
    ModelFacts,
    NodePool,
    NodeSpec,
    ProvisionStage,
    RunPlanSpec,
    RuntimeConfig,
    StagePlan,
    TensorInfo,
    TensorSlice,
)
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Dialect, Operation
from xdsl.irdl import (
    irdl_op_definition,
    lazy_traits_def,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsolatedFromAbove, NoTerminator, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException


# --------------------------------------------------------------------------- ops
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
class StageOp(PipeplanOp):
    """One pipeline stage (plan_types.StagePlan): ``index`` in ``0..N-1``, the ``node_id`` it runs
    on, and the half-open GGUF block range ``[layer_start, layer_end)``.

    Verifier: [RP-LA-5] index >= 0; [RP-AR-1] non-empty node id; [RP-LA-4] non-empty range;
    [RP-LA-3] range inside ``[0, block_count)`` of the parent plan. Cross-stage checks are the plan's.

    ```mlir
    runplan.stage 1 on "node-b" layers [3, 5)
    ```
    """

    name = "runplan.stage"

    index = prop_def(IntegerAttr.constr(type=i64))
    node_id = prop_def(StringAttr)
    layer_start = prop_def(IntegerAttr.constr(type=i64))
    layer_end = prop_def(IntegerAttr.constr(type=i64))

    traits = lazy_traits_def(lambda: (HasParent(PlanOp),))

    @staticmethod
    def from_plan(s: StagePlan) -> StageOp:
        """The op of a StagePlan."""
        return StageOp.create(properties={
            "index": i64_of(s.index), "node_id": StringAttr(s.node_id), "layer_start": i64_of(s.layer_start),
            "layer_end": i64_of(s.layer_end)})

    def plan(self) -> StagePlan:
        """The StagePlan this op states."""
        return StagePlan(_int_of(self.index), self.node_id.data, _int_of(self.layer_start), _int_of(self.layer_end))

    def verify_(self) -> None:
        s = self.plan()
        if s.index < 0:
            raise _fail("RP-LA-5", "stage indices must be 0..stage_count-1", f"stage index {s.index} is negative")
        if not s.node_id:
            raise _fail("RP-AR-1", "every stage must name a node of the pool", f"stage {s.index} has an empty node id")
        if s.layer_end <= s.layer_start:
            raise _fail("RP-LA-4", "every stage must have exactly one non-empty layer range",
                        f"stage {s.index} has range [{s.layer_start}, {s.layer_end})")
        parent = self.parent_op()
        if isinstance(parent, PlanOp):
            bc = parent.block_count()
            if bc is not None and (s.layer_start < 0 or s.layer_end > bc):
                raise _fail("RP-LA-3", "stage ranges must lie in the model's block range [0, block_count)",
                            f"stage {s.index} has range [{s.layer_start}, {s.layer_end}) but the model has {bc} blocks")

    def print(self, printer: Printer) -> None:
        s = self.plan()
        printer.print_string(f" {s.index} on ")
        printer.print_string_literal(s.node_id)
        printer.print_string(" layers ")
        _print_range(printer, s.layer_start, s.layer_end)
        _print_extra_attrs(printer, self)

    @classmethod
    def parse(cls, parser: Parser) -> StageOp:
        index = parser.parse_integer()
        parser.parse_keyword("on")
        node = parser.parse_str_literal("node id")
        parser.parse_keyword("layers")
        start, end = _parse_range(parser)
        op = StageOp.from_plan(StagePlan(index, node, start, end))
        op.attributes.update(_parse_extra_attrs(parser))
        return op


@irdl_op_definition
class EdgeOp(PipeplanOp):
    """One edge of the run (plan_types.EdgePlan): ``edge_id``, ``kind`` (token_in | activation |
    token_out), ``producer`` and ``consumer`` (stage index, or ``-1`` printed ``orchestrator``), and
    its ``object_spec`` / ``ring_spec`` dictionaries.

    Verifier (this edge alone, sizes from the parent plan's model facts and runtime config):
    [RP-EA-1] non-empty id; [RP-AR-5] known kind; [RP-EA-2] one producer and one consumer that
    differ; [RP-OS-1] both specs present and well-formed; [RP-OS-3] token edges carry ``token``
    objects, activation edges ``activation`` objects; [RP-OS-5] known dtype whose width matches,
    ``row_major`` layout, positive dims, power-of-two alignment equal to the config's,
    ``max_extent == prod(shape) * dtype_width``, token shape ``[max_seq_len]`` in the token dtype,
    activation shape ``[max_seq_len, hidden]``, ring slots equal to the config's and
    ``slot_bytes >= max_extent`` and aligned; [RP-OS-2] activation
    ``max_extent == max_seq_len * embedding_length * width(activation_dtype)``.

    ```mlir
    runplan.edge "act.0" activation 0 -> 1 object {kind = "activation", dtype = "f32", dtype_width = 4,
        shape = array<i64: 256, 64>, layout = "row_major", alignment = 64, max_extent = 65536}
        ring {slots = 2, slot_bytes = 65536}
    ```
    """

    name = "runplan.edge"

    edge_id = prop_def(StringAttr)
    kind = prop_def(StringAttr)
    producer = prop_def(IntegerAttr.constr(type=i64))
    consumer = prop_def(IntegerAttr.constr(type=i64))
    object_spec = opt_prop_def(DictionaryAttr)
    ring_spec = opt_prop_def(DictionaryAttr)

    traits = lazy_traits_def(lambda: (HasParent(PlanOp),))

    @staticmethod
    def from_plan(e: EdgePlan) -> EdgeOp:
        """The op of an EdgePlan."""
        return EdgeOp.create(properties={
            "edge_id": StringAttr(e.edge_id), "kind": StringAttr(e.kind), "producer": i64_of(e.producer),
            "consumer": i64_of(e.consumer), "object_spec": object_spec_attr(e.object_spec),
            "ring_spec": ring_spec_attr(e.ring_spec)})

    def where(self) -> str:
        return f"edge '{self.edge_id.data}'"

    def plan(self) -> EdgePlan:
        """The EdgePlan this op states; raises VerifyException [RP-OS-1] when a spec is missing/malformed."""
        w = self.where()
        return EdgePlan(self.edge_id.data, self.kind.data, _int_of(self.producer), _int_of(self.consumer),
                        read_object_spec(self.object_spec, w), read_ring_spec(self.ring_spec, w))

    def verify_(self) -> None:
        w = self.where()
        if not self.edge_id.data:
            raise _fail("RP-EA-1", "every edge id must be unique and non-empty", "an edge has an empty id")
        kind = self.kind.data
        if kind not in EDGE_KINDS:
            raise _fail("RP-AR-5", "edge kind must be token_in, activation or token_out", f"{w} has kind '{kind}'")
        p, c = _int_of(self.producer), _int_of(self.consumer)
        for role, v in (("producer", p), ("consumer", c)):
            if v < ORCHESTRATOR:
                raise _fail("RP-EA-2", "every edge has exactly one producer and one consumer",
                            f"{w} has {role} {v}, which is neither a stage index nor the orchestrator")
        if p == c:
            raise _fail("RP-EA-2", "every edge has exactly one producer and one consumer",
                        f"{w} has the same producer and consumer ({_endpoint_str(p)})")
        e = self.plan()
        parent = self.parent_op()
        facts = config = None
        if isinstance(parent, PlanOp):
            facts, config = parent.model_values(), parent.config_values()
        check_edge_specs(e, facts, config)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_string_literal(self.edge_id.data)
        printer.print_string(" ")
        printer.print_identifier_or_string_literal(self.kind.data)
        p, c = _int_of(self.producer), _int_of(self.consumer)
        printer.print_string(f" {'orchestrator' if p == ORCHESTRATOR else p} -> {'orchestrator' if c == ORCHESTRATOR else c}")
        if self.object_spec is not None:
            printer.print_string(" object ")
            _print_dict(printer, self.object_spec, OBJECT_SCHEMA)
        if self.ring_spec is not None:
            printer.print_string(" ring ")
            _print_dict(printer, self.ring_spec, RING_SCHEMA)
        _print_extra_attrs(printer, self)

    @classmethod
    def parse(cls, parser: Parser) -> EdgeOp:
        edge_id = parser.parse_str_literal("edge id")
        kind = parser.parse_identifier_or_str_literal("edge kind")

        def endpoint() -> int:
            return ORCHESTRATOR if parser.parse_optional_keyword("orchestrator") else parser.parse_integer()

        producer = endpoint()
        parser.parse_punctuation("->")
        consumer = endpoint()
        props: dict[str, Attribute] = {"edge_id": StringAttr(edge_id), "kind": StringAttr(kind),
                                       "producer": i64_of(producer), "consumer": i64_of(consumer)}
        if parser.parse_optional_keyword("object"):
            props["object_spec"] = _parse_dict(parser)
        if parser.parse_optional_keyword("ring"):
            props["ring_spec"] = _parse_dict(parser)
        return EdgeOp.create(properties=props, attributes=_parse_extra_attrs(parser))


@irdl_op_definition
class ProvisionStageOp(PipeplanOp):
    """The ProvisionStage message of one stage (seed 000 "Provisioning Projection", seed 001).

    Properties: ``stage``, ``stage_count``, ``node_id``, ``layer_start``/``layer_end`` (own half-open
    block range), ``block_count`` (the model's), ``has_embedding``/``has_head`` (UnitAttr flags),
    ``max_seq_len``, ``weights`` (``{uris, sha256, sizes}``), the stage's tensor byte ranges as
    parallel arrays ``tensor_names``/``tensor_types``/``tensor_shapes``/``tensor_shards``/
    ``tensor_offsets``/``tensor_bytes`` (bytes), and ``inbound``/``outbound`` edge provisions
    ``{edge_id, kind, peer_node_id, object_spec, ring_spec}``: a peer is a node id or
    ``"orchestrator"``, never an actor address. ``run_id`` is the parent plan's symbol.

    Verifier: [RP-PP-2] parallel arrays of equal length, non-empty own range; [RP-PP-6] edge
    provisions hold exactly the keys above. Agreement with the plan is checked by the plan.

    ```mlir
    runplan.provision_stage 1 of 3 on "node-b" layers [2, 4) blocks 5 max_seq_len 256
        weights {uris = ["model.gguf"], sha256 = [], sizes = array<i64>}
        in {edge_id = "act.0", kind = "activation", peer_node_id = "node-a", object_spec = {...}, ring_spec = {...}}
        out {edge_id = "act.1", kind = "activation", peer_node_id = "node-c", object_spec = {...}, ring_spec = {...}}
        tensors ["blk.2.attn_q.weight" F32 [64, 64] shard 0 offset 1024 bytes 16384, ...]
    ```
    """

    name = "runplan.provision_stage"

    stage = prop_def(IntegerAttr.constr(type=i64))
    stage_count = prop_def(IntegerAttr.constr(type=i64))
    node_id = prop_def(StringAttr)
    layer_start = prop_def(IntegerAttr.constr(type=i64))
    layer_end = prop_def(IntegerAttr.constr(type=i64))
    block_count = prop_def(IntegerAttr.constr(type=i64))
    has_embedding = opt_prop_def(UnitAttr)
    has_head = opt_prop_def(UnitAttr)
    max_seq_len = prop_def(IntegerAttr.constr(type=i64))
    weights = prop_def(DictionaryAttr)
    tensor_names = prop_def(ArrayAttr[StringAttr])
    tensor_types = prop_def(ArrayAttr[StringAttr])
    tensor_shapes = prop_def(ArrayAttr[DenseArrayBase])
    tensor_shards = prop_def(DenseArrayBase.constr(i64))
    tensor_offsets = prop_def(DenseArrayBase.constr(i64))
    tensor_bytes = prop_def(DenseArrayBase.constr(i64))
    inbound = prop_def(DictionaryAttr)
    outbound = prop_def(DictionaryAttr)

    traits = lazy_traits_def(lambda: (HasParent(PlanOp),))

    @staticmethod
    def from_provision(p: ProvisionStage) -> ProvisionStageOp:
        """The op of a ProvisionStage (its ``run_id`` is the parent plan's symbol, not stored)."""
        props: dict[str, Attribute] = {
            "stage": i64_of(p.stage), "stage_count": i64_of(p.stage_count), "node_id": StringAttr(p.node_id),
            "layer_start": i64_of(p.layer_start), "layer_end": i64_of(p.layer_end), "block_count": i64_of(p.block_count),
            "max_seq_len": i64_of(p.max_seq_len), "weights": weights_attr(p.weights),
            "tensor_names": strings(t.name for t in p.tensors), "tensor_types": strings(t.ggml_type for t in p.tensors),
            "tensor_shapes": ArrayAttr([_ints(t.shape) for t in p.tensors]),
            "tensor_shards": _ints(t.shard for t in p.tensors), "tensor_offsets": _ints(t.offset for t in p.tensors),
            "tensor_bytes": _ints(t.n_bytes for t in p.tensors),
            "inbound": edge_provision_attr(p.inbound), "outbound": edge_provision_attr(p.outbound)}
        if p.has_embedding:
            props["has_embedding"] = UnitAttr()
        if p.has_head:
            props["has_head"] = UnitAttr()
        return ProvisionStageOp.create(properties=props)

    def where(self) -> str:
        return f"provision of stage {_int_of(self.stage)}"

    def tensor_slices(self) -> tuple[TensorSlice, ...]:
        """The tensor byte ranges, one TensorSlice per entry of the parallel arrays."""
        names = [a.data for a in self.tensor_names.data]
        types = [a.data for a in self.tensor_types.data]
        if any(a.elt_type != i64 for a in self.tensor_shapes.data):
            raise _fail("RP-PP-2", "provision tensor shapes must be array<i64>", f"{self.where()} has another shape type")
        shapes = [tuple(int(x) for x in a.get_values()) for a in self.tensor_shapes.data]  # type: ignore[misc]
        shards, offsets, nbytes = (self.tensor_shards.get_values(), self.tensor_offsets.get_values(),
                                   self.tensor_bytes.get_values())
        lens = {len(names), len(types), len(shapes), len(shards), len(offsets), len(nbytes)}
        if len(lens) != 1:
            raise _fail("RP-PP-2", "provision tensor arrays must have one entry per tensor",
                        f"{self.where()} has arrays of lengths {sorted(lens)}")
        return tuple(TensorSlice(*row) for row in zip(names, types, shapes, shards, offsets, nbytes))

    def provision(self, run_id: str = "") -> ProvisionStage:
        """The ProvisionStage this op states (``run_id`` given by the caller, normally the plan's)."""
        w = self.where()
        return ProvisionStage(
            run_id=run_id, stage=_int_of(self.stage), stage_count=_int_of(self.stage_count), node_id=self.node_id.data,
            layer_start=_int_of(self.layer_start), layer_end=_int_of(self.layer_end),
            block_count=_int_of(self.block_count), has_embedding=self.has_embedding is not None,
            has_head=self.has_head is not None, max_seq_len=_int_of(self.max_seq_len),
            weights=read_weights(self.weights, w), tensors=self.tensor_slices(),
            inbound=read_edge_provision(self.inbound, "in", w), outbound=read_edge_provision(self.outbound, "out", w))

    def verify_(self) -> None:
        p = self.provision()
        if p.layer_end <= p.layer_start:
            raise _fail("RP-PP-2", "a stage receives only its own non-empty layer range",
                        f"{self.where()} has range [{p.layer_start}, {p.layer_end})")

    def print(self, printer: Printer) -> None:
        s = _int_of
        printer.print_string(f" {s(self.stage)} of {s(self.stage_count)} on ")
        printer.print_string_literal(self.node_id.data)
        printer.print_string(" layers ")
        _print_range(printer, s(self.layer_start), s(self.layer_end))
        printer.print_string(f" blocks {s(self.block_count)} max_seq_len {s(self.max_seq_len)}")
        if self.has_embedding is not None:
            printer.print_string(" embedding")
        if self.has_head is not None:
            printer.print_string(" head")
        with printer.indented(2):
            printer._print_new_line()
            printer.print_string("weights ")
            _print_dict(printer, self.weights, WEIGHTS_SCHEMA)
            printer._print_new_line()
            printer.print_string("in ")
            _print_dict(printer, self.inbound, EDGE_PROVISION_SCHEMA)
            printer._print_new_line()
            printer.print_string("out ")
            _print_dict(printer, self.outbound, EDGE_PROVISION_SCHEMA)
            printer._print_new_line()
            printer.print_string("tensors [")
            with printer.indented():
                for n, t in enumerate(self.tensor_slices()):
                    if n:
                        printer.print_string(",")
                    printer._print_new_line()
                    printer.print_string_literal(t.name)
                    printer.print_string(" ")
                    printer.print_identifier_or_string_literal(t.ggml_type)
                    printer.print_string(f" [{', '.join(map(str, t.shape))}] shard {t.shard} offset {t.offset} "
                                         f"bytes {t.n_bytes}")
            printer.print_string("]")
        _print_extra_attrs(printer, self)

    @classmethod
    def parse(cls, parser: Parser) -> ProvisionStageOp:
        stage = parser.parse_integer()
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
            "stage": i64_of(stage), "stage_count": i64_of(count), "node_id": StringAttr(node), "layer_start": i64_of(start),
            "layer_end": i64_of(end), "block_count": i64_of(blocks), "max_seq_len": i64_of(max_seq_len)}
        if parser.parse_optional_keyword("embedding"):
            props["has_embedding"] = UnitAttr()
        if parser.parse_optional_keyword("head"):
            props["has_head"] = UnitAttr()
        props["weights"] = _parse_kw_dict(parser, "weights")
        props["inbound"] = _parse_kw_dict(parser, "in")
        props["outbound"] = _parse_kw_dict(parser, "out")
        parser.parse_keyword("tensors")

        def entry() -> tuple[str, str, list[int], int, int, int]:
            name = parser.parse_str_literal("tensor name")
            ty = parser.parse_identifier_or_str_literal("ggml type")
            shape = _parse_int_list(parser)
            parser.parse_keyword("shard")
            shard = parser.parse_integer()
            parser.parse_keyword("offset")
            off = parser.parse_integer()
            parser.parse_keyword("bytes")
            return name, ty, shape, shard, off, parser.parse_integer()

        rows = parser.parse_comma_separated_list(Parser.Delimiter.SQUARE, entry)
        props.update({
            "tensor_names": strings(r[0] for r in rows), "tensor_types": strings(r[1] for r in rows),
            "tensor_shapes": ArrayAttr([_ints(r[2]) for r in rows]), "tensor_shards": _ints(r[3] for r in rows),
            "tensor_offsets": _ints(r[4] for r in rows), "tensor_bytes": _ints(r[5] for r in rows)})
        return ProvisionStageOp.create(properties=props, attributes=_parse_extra_attrs(parser))


@irdl_op_definition
class PlanOp(PipeplanOp):
    """One RunPlan (seed 000): a symbol named by the run id, the ``nodes`` of the candidate pool
    (in pool order: each a node spec dictionary ``{id, memory_bytes[, bandwidth_bytes_per_s,
    flops_per_s, link_bandwidth_bytes_per_s]}`` — bytes, bytes/s, FLOP/s — or, in plans written
    before node specs, a bare node id), the ``model`` facts, the runtime ``config`` and the ``weights`` source, and a
    single block (no terminator) holding the ``runplan.tensor``, ``runplan.stage``, ``runplan.edge``
    and ``runplan.provision_stage`` ops.

    ``model`` keys: architecture, name, block_count, embedding_length, head_count, head_count_kv,
    feed_forward_length, vocab_size, context_length, rope_dimension_count, rope_freq_base (f64),
    rms_norm_eps (f64), alignment, block_bytes (array<i64>), files, and optionally sha256,
    key_length / value_length (``<arch>.attention.key_length``/``value_length``, left out when the
    model states none) and arch_params (a dictionary of the architecture's own ``<arch>.*`` scalars,
    e.g. ``{attention.sliding_window = 512}``; left out when empty).
    ``config`` keys: max_seq_len, activation_dtype, token_dtype, kv_dtype, ring_slots, alignment, and
    optionally parallel (sequences in flight; 1 when left out).
    ``weights`` keys: uris, sha256, sizes.

    Verifier (whole plan, after the nested ops): see :func:`check_plan`.

    ```mlir
    runplan.plan @run0 nodes [{id = "node-a", memory_bytes = 1000000, bandwidth_bytes_per_s = 2.000000e+10},
                              "node-b"]
        model {architecture = "llama", name = "tiny", block_count = 2, ...}
        config {max_seq_len = 16, activation_dtype = "f32", ...}
        weights {uris = ["tiny.gguf"], sha256 = [], sizes = array<i64>} {
      runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 0 bytes 32 block 0
      runplan.stage 0 on "node-a" layers [0, 1)
      runplan.edge "tok.in" token_in orchestrator -> 0 object {...} ring {...}
    }
    ```
    """

    name = "runplan.plan"

    sym_name = prop_def(StringAttr)
    nodes = prop_def(ArrayAttr)
    model = prop_def(DictionaryAttr)
    config = prop_def(DictionaryAttr)
    weights = prop_def(DictionaryAttr)

    body = region_def("single_block")

    traits = traits_def(NoTerminator(), IsolatedFromAbove(), SymbolOpInterface())

    def node_ids(self) -> tuple[str, ...]:
        """The candidate pool's node ids, in pool order (entries without a string id are skipped:
        :meth:`node_specs` reports them)."""
        out = []
        for a in self.nodes.data:
            ident = a.data.get("id") if isinstance(a, DictionaryAttr) else a
            if isinstance(ident, StringAttr):
                out.append(ident.data)
        return tuple(out)

    def node_specs(self) -> tuple[NodeSpec | None, ...]:
        """Per pool node, its NodeSpec (None for a bare id). Raises VerifyException [RP-AR-1] on a
        malformed entry or a duplicate id."""
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

    def model_values(self) -> dict[str, Any] | None:
        """The ``model`` dictionary as Python values, or None when it is malformed."""
        try:
            return MODEL_SCHEMA.read(self.model, "the plan")
        except VerifyException:
            return None

    def config_values(self) -> dict[str, Any] | None:
        """The ``config`` dictionary as Python values, or None when it is malformed or invalid."""
        try:
            c = CONFIG_SCHEMA.read(self.config, "the plan")
            _check_config(c)
            return c
        except VerifyException:
            return None

    def block_count(self) -> int | None:
        v = self.model.data.get("block_count")
        return _int_of(v) if isinstance(v, IntegerAttr) else None

    def spec(self) -> RunPlanSpec:
        """The RunPlanSpec this plan states (tensors, stages, edges in op order).

        Raises VerifyException when a dictionary or spec is malformed."""
        m = MODEL_SCHEMA.read(self.model, "the plan")
        c = CONFIG_SCHEMA.read(self.config, "the plan")
        tensors, stages, edges = [], [], []
        for op in self.body.block.ops:
            if isinstance(op, TensorOp):
                tensors.append(op.info())
            elif isinstance(op, StageOp):
                stages.append(op.plan())
            elif isinstance(op, EdgeOp):
                edges.append(op.plan())
        facts = ModelFacts(
            architecture=m["architecture"], name=m["name"], block_count=m["block_count"],
            embedding_length=m["embedding_length"], head_count=m["head_count"], head_count_kv=m["head_count_kv"],
            feed_forward_length=m["feed_forward_length"], vocab_size=m["vocab_size"],
            context_length=m["context_length"], rope_dimension_count=m["rope_dimension_count"],
            rope_freq_base=m["rope_freq_base"], rms_norm_eps=m["rms_norm_eps"], alignment=m["alignment"],
            tensors=tuple(tensors), block_bytes=m["block_bytes"], files=m["files"], sha256=m.get("sha256"),
            key_length=m.get("key_length", 0), value_length=m.get("value_length", 0),
            arch_params=arch_params_of(m.get("arch_params"), "the plan"))
        config = RuntimeConfig(**c)
        return RunPlanSpec(self.sym_name.data, facts, config, read_weights(self.weights, "the plan"),
                           tuple(stages), tuple(edges))

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
        for k, a in enumerate(self.nodes.data):
            if k:
                printer.print_string(", ")
            if isinstance(a, DictionaryAttr):
                _print_dict(printer, a, NODE_SCHEMA)
            else:
                printer.print_attribute(a)
        printer.print_string("]")
        with printer.indented(2):
            for kw, d, schema in (("model", self.model, MODEL_SCHEMA), ("config", self.config, CONFIG_SCHEMA),
                                  ("weights", self.weights, WEIGHTS_SCHEMA)):
                printer._print_new_line()
                printer.print_string(kw + " ")
                _print_dict(printer, d, schema)
            _print_extra_attrs(printer, self)
        printer.print_string(" ")
        printer.print_region(self.body)

    @classmethod
    def parse(cls, parser: Parser) -> PlanOp:
        sym = parser.parse_symbol_name()
        parser.parse_keyword("nodes")

        def node() -> Attribute:
            ident = parser.parse_optional_str_literal()
            if ident is not None:
                return StringAttr(ident)
            pos = parser.pos
            d = parser.parse_optional_attr_dict()
            if not d and parser.pos == pos:
                parser.raise_error("expected a node id string or a node spec dictionary '{id = ..., ...}'")
            return DictionaryAttr(d)

        nodes = parser.parse_comma_separated_list(Parser.Delimiter.SQUARE, node)
        props: dict[str, Attribute] = {"sym_name": sym, "nodes": ArrayAttr(nodes), "model": _parse_kw_dict(parser, "model"),
                 "config": _parse_kw_dict(parser, "config"), "weights": _parse_kw_dict(parser, "weights")}
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
            if kind == "provision" and isinstance(op, ProvisionStageOp) and str(op.stage.value.data) == key:
                return op
            if kind == "stage" and isinstance(op, StageOp) and str(op.index.value.data) == key:
                return op
            if kind == "edge" and isinstance(op, EdgeOp) and op.edge_id.data == key:
                return op
            if kind == "tensor" and isinstance(op, TensorOp) and op.tensor_name.data == key:
                return op
    return plan


def check_plan(plan: PlanOp, *, provisions: bool = True) -> RunPlanSpec:
    """Whole-plan verification of ``plan`` (its nested ops already passed their own verifiers):
    :func:`check_spec`, then (when ``provisions`` and any are present) :func:`check_provisions`.
    Returns the plan's RunPlanSpec; raises VerifyException."""
    for op in plan.body.block.ops:
        if not isinstance(op, TensorOp | StageOp | EdgeOp | ProvisionStageOp):
            raise _fail("RP-AR-7", "the plan is the only source of stage, layer, edge and object-spec assignment",
                        f"'{op.name}' is not a runplan op and cannot be part of a plan")
    c = CONFIG_SCHEMA.read(plan.config, "the plan")
    _check_config(c)
    spec = plan.spec()
    plan.node_specs()
    check_spec(spec, plan.node_ids())
    if provisions:
        ops = plan.provision_ops()
        if ops:
            check_provisions([op.provision(spec.run_id) for op in ops], derive_provisions(spec), plan.node_ids())
    return spec


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
            if isinstance(op, TensorOp | StageOp | EdgeOp | ProvisionStageOp) and not isinstance(op.parent_op(), PlanOp):
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
    """The RunPlanRejection of a verifier message (code from its ``[RP-..]`` contract ID)."""
    msg = str(e).split("\n")[0]
    m = _ID_RE.search(msg)
    code = INVARIANT_CODES.get(m.group(1), MALFORMED_CODE) if m else MALFORMED_CODE
    return RunPlanRejection(msg, code=code, where=where)


def plan_ops(module: Operation) -> list[PlanOp]:
    """Every ``runplan.plan`` in ``module`` (walk order)."""
    return [op for op in module.walk() if isinstance(op, PlanOp)]


Runplan = Dialect("runplan", [PlanOp, TensorOp, StageOp, EdgeOp, ProvisionStageOp], [])
