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
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pipeplan.dialects.carriers import i64_of, int_array, int_tuple, str_tuple, strings
from pipeplan.dialects.diagnostics import PipeplanOp, located
from pipeplan.errors import RunPlanRejection
from pipeplan.plan_types import (
    DTYPE_WIDTHS,
    EDGE_KINDS,
    ORCHESTRATOR,
    EdgePlan,
    EdgeProvision,
    ModelFacts,
    NodePool,
    NodeSpec,
    ObjectSpec,
    ProvisionStage,
    RingSpec,
    RunPlanSpec,
    RuntimeConfig,
    StagePlan,
    TensorInfo,
    TensorSlice,
    WeightSource,
)
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    UnitAttr,
    f64,
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

ORCHESTRATOR_NODE = "orchestrator"
"""Peer node id of the orchestrator in edge provisions (plan_types.EdgeProvision)."""

TOKEN_EDGE_KINDS = ("token_in", "token_out")
OBJECT_KINDS = ("token", "activation")
LAYOUTS = ("row_major",)

# --------------------------------------------------------------------------- contract IDs -> codes
INVARIANT_CODES: dict[str, str] = {
    "RP-LA-1": "invalid_layer_assignment",
    "RP-LA-2": "invalid_layer_assignment",
    "RP-LA-3": "inconsistent_model_facts",
    "RP-LA-4": "invalid_layer_assignment",
    "RP-LA-5": "missing_stage",
    "RP-EA-1": "edge_endpoint_mismatch",
    "RP-EA-2": "edge_endpoint_mismatch",
    "RP-EA-3": "edge_endpoint_mismatch",
    "RP-EA-4": "edge_endpoint_mismatch",
    "RP-EA-5": "edge_endpoint_mismatch",
    "RP-PP-1": "inconsistent_provision",
    "RP-PP-2": "inconsistent_provision",
    "RP-PP-3": "inconsistent_provision",
    "RP-PP-4": "inconsistent_provision",
    "RP-PP-5": "inconsistent_provision",
    "RP-PP-6": "inconsistent_provision",
    "RP-OS-1": "invalid_object_spec",
    "RP-OS-2": "invalid_object_spec",
    "RP-OS-3": "invalid_object_spec",
    "RP-OS-4": "invalid_object_spec",
    "RP-OS-5": "invalid_object_spec",
    "RP-AR-1": "unknown_node",
    "RP-AR-2": "duplicate_stage",
    "RP-AR-3": "missing_stage",
    "RP-AR-4": "invalid_stage_count",
    "RP-AR-5": "edge_endpoint_mismatch",
    "RP-AR-6": "inconsistent_model_facts",
    "RP-AR-7": "malformed_runplan",
}
"""Contract ID (shared/CONTRACTS.md) of each verifier message -> RunPlanRejection code."""

MALFORMED_CODE = "malformed_runplan"
"""Code of a rejection whose message names no contract ID (IR that is not a RunPlan at all:
wrong property types, ops outside a ``runplan.plan``)."""

_ID_RE = re.compile(r"\[(RP-[A-Z]{2}-\d+)\]")


def _fail(cid: str, invariant: str, detail: str) -> VerifyException:
    assert cid in INVARIANT_CODES, cid
    return VerifyException(f"[{cid}] {invariant}: {detail}")


# --------------------------------------------------------------------------- attribute helpers
def _ints(vs: Iterable[int]) -> DenseArrayBase:
    return int_array(int(v) for v in vs)


def _int_of(a: Attribute) -> int:
    assert isinstance(a, IntegerAttr)
    return a.value.data


# Schema kinds of dictionary entries.
INT, FLOAT, STR, STRS, INTS, DICT = "i64", "f64", "string", "array of strings", "array<i64>", "dictionary"


def _check_kind(v: Attribute, kind: str) -> bool:
    if kind == INT:
        return isinstance(v, IntegerAttr) and v.type == i64
    if kind == FLOAT:
        return isinstance(v, FloatAttr) and v.type == f64
    if kind == STR:
        return isinstance(v, StringAttr)
    if kind == STRS:
        return isinstance(v, ArrayAttr) and all(isinstance(x, StringAttr) for x in v.data)
    if kind == INTS:
        return isinstance(v, DenseArrayBase) and v.elt_type == i64
    if kind == DICT:
        return isinstance(v, DictionaryAttr)
    raise AssertionError(kind)


def _value(v: Attribute, kind: str) -> Any:
    if kind == INT:
        return _int_of(v)
    if kind == FLOAT:
        assert isinstance(v, FloatAttr)
        return float(v.value.data)
    if kind == STR:
        assert isinstance(v, StringAttr)
        return v.data
    if kind == STRS:
        assert isinstance(v, ArrayAttr)
        return str_tuple(v)
    if kind == INTS:
        assert isinstance(v, DenseArrayBase)
        return int_tuple(v)
    return v


def _to_attr(v: Any, kind: str) -> Attribute:
    if kind == INT:
        return i64_of(v)
    if kind == FLOAT:
        return FloatAttr(float(v), f64)
    if kind == STR:
        return StringAttr(v)
    if kind == STRS:
        return strings(v)
    if kind == INTS:
        return _ints(v)
    assert isinstance(v, DictionaryAttr)
    return v


class _Schema:
    """Fixed key set of a DictionaryAttr property: required keys, optional keys, their kinds."""

    def __init__(self, what: str, cid: str, required: Mapping[str, str], optional: Mapping[str, str] = {}):
        self.what, self.cid, self.required, self.optional = what, cid, dict(required), dict(optional)
        self.order = list(self.required) + list(self.optional)

    def read(self, d: Attribute | None, where: str) -> dict[str, Any]:
        """Python values of ``d``'s entries; raises VerifyException naming the first bad key."""
        inv = f"{self.what} must hold exactly {', '.join(self.required)}"
        if not isinstance(d, DictionaryAttr):
            raise _fail(self.cid, inv, f"{where} has no {self.what} dictionary")
        data = d.data
        for k in data:
            if k not in self.required and k not in self.optional:
                raise _fail(self.cid, inv, f"{where} has unexpected key '{k}'")
        out: dict[str, Any] = {}
        for k in self.required:
            if k not in data:
                raise _fail(self.cid, inv, f"{where} lacks key '{k}'")
        for k in self.order:
            if k in data:
                kind = self.required.get(k) or self.optional[k]
                if not _check_kind(data[k], kind):
                    raise _fail(self.cid, inv, f"{where}: '{k}' must be {kind}, got {data[k]}")
                out[k] = _value(data[k], kind)
        return out

    def build(self, values: Mapping[str, Any]) -> DictionaryAttr:
        """DictionaryAttr of ``values`` (None values of optional keys are left out)."""
        out: dict[str, Attribute] = {}
        for k in self.order:
            v = values.get(k)
            if v is None and k in self.optional:
                continue
            out[k] = _to_attr(v, self.required.get(k) or self.optional[k])
        return DictionaryAttr(out)


MODEL_SCHEMA = _Schema(
    "model facts", "RP-AR-6",
    {"architecture": STR, "name": STR, "block_count": INT, "embedding_length": INT, "head_count": INT,
     "head_count_kv": INT, "feed_forward_length": INT, "vocab_size": INT, "context_length": INT,
     "rope_dimension_count": INT, "rope_freq_base": FLOAT, "rms_norm_eps": FLOAT, "alignment": INT,
     "block_bytes": INTS, "files": STRS},
    {"sha256": STR, "key_length": INT, "value_length": INT, "arch_params": DICT},
)
CONFIG_SCHEMA = _Schema(
    "runtime config", "RP-OS-5",
    {"max_seq_len": INT, "activation_dtype": STR, "token_dtype": STR, "kv_dtype": STR, "ring_slots": INT,
     "alignment": INT},
    {"parallel": INT},
)
WEIGHTS_SCHEMA = _Schema("weight source", "RP-AR-6", {"uris": STRS, "sha256": STRS, "sizes": INTS})
OBJECT_SCHEMA = _Schema(
    "object spec", "RP-OS-1",
    {"kind": STR, "dtype": STR, "dtype_width": INT, "shape": INTS, "layout": STR, "alignment": INT,
     "max_extent": INT},
)
RING_SCHEMA = _Schema("ring spec", "RP-OS-1", {"slots": INT, "slot_bytes": INT})
NODE_SCHEMA = _Schema(
    "node spec", "RP-AR-1", {"id": STR, "memory_bytes": INT},
    {"bandwidth_bytes_per_s": FLOAT, "flops_per_s": FLOAT, "link_bandwidth_bytes_per_s": FLOAT},
)
"""One entry of ``runplan.plan``'s ``nodes``: a pool node's id, capacity (bytes) and optional peaks
(bytes/s, FLOP/s) — the :class:`~pipeplan.plan_types.NodeSpec` fields."""
EDGE_PROVISION_SCHEMA = _Schema(
    "edge provision", "RP-PP-6",
    {"edge_id": STR, "kind": STR, "peer_node_id": STR, "object_spec": DICT, "ring_spec": DICT},
)


def _is_pow2(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


# --------------------------------------------------------------------------- dataclass <-> dict
def object_spec_attr(s: ObjectSpec) -> DictionaryAttr:
    """The ``object_spec`` dictionary of an ObjectSpec."""
    return OBJECT_SCHEMA.build(
        {"kind": s.kind, "dtype": s.dtype, "dtype_width": s.dtype_width, "shape": s.shape, "layout": s.layout,
         "alignment": s.alignment, "max_extent": s.max_extent})


def ring_spec_attr(s: RingSpec) -> DictionaryAttr:
    """The ``ring_spec`` dictionary of a RingSpec."""
    return RING_SCHEMA.build({"slots": s.slots, "slot_bytes": s.slot_bytes})


def read_object_spec(d: Attribute | None, where: str) -> ObjectSpec:
    """ObjectSpec of an ``object_spec`` dictionary. Raises VerifyException [RP-OS-1] when malformed."""
    return ObjectSpec(**OBJECT_SCHEMA.read(d, where))


def read_ring_spec(d: Attribute | None, where: str) -> RingSpec:
    """RingSpec of a ``ring_spec`` dictionary. Raises VerifyException [RP-OS-1] when malformed."""
    return RingSpec(**RING_SCHEMA.read(d, where))


def edge_provision_attr(p: EdgeProvision) -> DictionaryAttr:
    """The ``inbound``/``outbound`` dictionary of an EdgeProvision (direction is the property name)."""
    return EDGE_PROVISION_SCHEMA.build(
        {"edge_id": p.edge_id, "kind": p.kind, "peer_node_id": p.peer_node_id,
         "object_spec": object_spec_attr(p.object_spec), "ring_spec": ring_spec_attr(p.ring_spec)})


def read_edge_provision(d: Attribute | None, direction: str, where: str) -> EdgeProvision:
    """EdgeProvision of an ``inbound``/``outbound`` dictionary; raises VerifyException when malformed."""
    v = EDGE_PROVISION_SCHEMA.read(d, where)
    w = f"{where} {direction}bound edge '{v['edge_id']}'"
    return EdgeProvision(v["edge_id"], v["kind"], direction, v["peer_node_id"],
                         read_object_spec(v["object_spec"], w), read_ring_spec(v["ring_spec"], w))


def node_entry_attr(n: NodeSpec | str) -> Attribute:
    """The ``nodes`` entry of a pool node: a NODE_SCHEMA dictionary for a NodeSpec (peaks that are
    None are left out), a bare string for a plain node id (plans written before node specs)."""
    if isinstance(n, str):
        return StringAttr(n)
    return NODE_SCHEMA.build({"id": n.id, "memory_bytes": n.memory_bytes,
                              "bandwidth_bytes_per_s": n.bandwidth_bytes_per_s, "flops_per_s": n.flops_per_s,
                              "link_bandwidth_bytes_per_s": n.link_bandwidth_bytes_per_s})


def read_node_entry(a: Attribute, where: str) -> tuple[str, NodeSpec | None]:
    """``(node id, NodeSpec or None)`` of one ``nodes`` entry: a string is an id without a spec; a
    dictionary must follow NODE_SCHEMA with a non-empty id, ``memory_bytes`` > 0 and finite peaks
    > 0. Raises VerifyException [RP-AR-1] naming ``where`` and the key."""
    if isinstance(a, StringAttr):
        return a.data, None
    inv = "every pool node is a node id or a node spec {id, memory_bytes[, peaks]}"
    if not isinstance(a, DictionaryAttr):
        raise _fail("RP-AR-1", inv, f"{where} is {a}, neither a string nor a dictionary")
    v = NODE_SCHEMA.read(a, where)
    if not v["id"]:
        raise _fail("RP-AR-1", inv, f"{where} has an empty 'id'")
    if v["memory_bytes"] <= 0:
        raise _fail("RP-AR-1", inv, f"{where} ('{v['id']}'): 'memory_bytes' must be > 0, got {v['memory_bytes']}")
    for k in NODE_SCHEMA.optional:
        if k in v and not (math.isfinite(v[k]) and v[k] > 0):
            raise _fail("RP-AR-1", inv, f"{where} ('{v['id']}'): '{k}' must be a finite number > 0, got {v[k]}")
    return v["id"], NodeSpec(**v)


# --------------------------------------------------------------------------- printing helpers
def _print_value(printer: Printer, v: Attribute) -> None:
    if isinstance(v, IntegerAttr) and v.type == i64:
        printer.print_string(str(v.value.data))
    elif isinstance(v, FloatAttr) and v.type == f64:
        printer.print_float(float(v.value.data), f64)
    elif isinstance(v, DictionaryAttr):
        _print_dict(printer, v, None)
    else:
        printer.print_attribute(v)


def _print_dict(printer: Printer, d: DictionaryAttr, schema: _Schema | None) -> None:
    """``{k = v, ...}`` in schema order (so MLIR's key sorting never changes the text), with i64
    and f64 values printed bare (they parse back to i64 / f64)."""
    keys = list(d.data)
    order = schema.order if schema is not None else _DICT_ORDER.get(frozenset(keys), sorted(keys))
    keys = [k for k in order if k in d.data] + sorted(k for k in keys if k not in order)
    printer.print_string("{")
    for n, k in enumerate(keys):
        if n:
            printer.print_string(", ")
        printer.print_identifier_or_string_literal(k)
        printer.print_string(" = ")
        _print_value(printer, d.data[k])
    printer.print_string("}")


_DICT_ORDER = {frozenset(s.order): s.order for s in (OBJECT_SCHEMA, RING_SCHEMA, EDGE_PROVISION_SCHEMA)}


def _parse_dict(parser: Parser) -> DictionaryAttr:
    return DictionaryAttr(parser.parse_optional_attr_dict())


def _parse_kw_dict(parser: Parser, keyword: str) -> DictionaryAttr:
    parser.parse_keyword(keyword)
    pos = parser.pos
    d = parser.parse_optional_attr_dict()
    if not d and parser.pos == pos:
        parser.raise_error(f"expected a '{{...}}' dictionary after '{keyword}'")
    return DictionaryAttr(d)


def _print_range(printer: Printer, start: int, end: int) -> None:
    printer.print_string(f"[{start}, {end})")


def _parse_range(parser: Parser) -> tuple[int, int]:
    parser.parse_punctuation("[")
    start = parser.parse_integer()
    parser.parse_punctuation(",")
    end = parser.parse_integer()
    parser.parse_punctuation(")")
    return start, end


def _parse_int_list(parser: Parser) -> list[int]:
    return parser.parse_comma_separated_list(Parser.Delimiter.SQUARE, parser.parse_integer)


def _print_extra_attrs(printer: Printer, op: Operation) -> None:
    if op.attributes:
        printer.print_op_attributes(op.attributes, print_keyword=True)


def _parse_extra_attrs(parser: Parser) -> dict[str, Attribute]:
    a = parser.parse_optional_attr_dict_with_keyword()
    return dict(a.data) if a is not None else {}


def _endpoint_str(v: int) -> str:
    return "orchestrator" if v == ORCHESTRATOR else f"stage {v}"


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


def arch_params_attr(params: Iterable[tuple[str, int | float | str]]) -> DictionaryAttr | None:
    """The ``arch_params`` dictionary of ``ModelFacts.arch_params`` (None when empty): ints as i64,
    floats as f64, strings as strings."""
    items = {k: (i64_of(v) if isinstance(v, int) else FloatAttr(v, f64) if isinstance(v, float) else StringAttr(v))
             for k, v in params}
    return DictionaryAttr(items) if items else None


def arch_params_of(d: Attribute | None, where: str) -> tuple[tuple[str, int | float | str], ...]:
    """``ModelFacts.arch_params`` of an ``arch_params`` dictionary (sorted pairs; () for None).
    Raises VerifyException [RP-AR-6] for a value that is not an i64, f64 or string."""
    if d is None:
        return ()
    assert isinstance(d, DictionaryAttr)
    out: list[tuple[str, int | float | str]] = []
    for k, v in d.data.items():
        if isinstance(v, IntegerAttr) and v.type == i64:
            out.append((k, _int_of(v)))
        elif isinstance(v, FloatAttr) and v.type == f64:
            out.append((k, float(v.value.data)))
        elif isinstance(v, StringAttr):
            out.append((k, v.data))
        else:
            raise _fail("RP-AR-6", "model facts must be consistent with the requested stage layout",
                        f"{where}: arch_params '{k}' must be an i64, f64 or string, got {v}")
    return tuple(sorted(out))


def weights_attr(w: WeightSource) -> DictionaryAttr:
    """The ``weights`` dictionary of a WeightSource."""
    return WEIGHTS_SCHEMA.build({"uris": w.uris, "sha256": w.sha256, "sizes": w.sizes})


def read_weights(d: Attribute | None, where: str) -> WeightSource:
    """WeightSource of a ``weights`` dictionary; raises VerifyException [RP-AR-6] when malformed."""
    v = WEIGHTS_SCHEMA.read(d, where)
    return WeightSource(v["uris"], v["sha256"], v["sizes"])


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


# --------------------------------------------------------------------------- checks
def check_tensor(t: TensorInfo) -> None:
    """[RP-AR-6] one tensor of the index: non-negative shard/offset, positive dims, ``block`` agrees
    with a ``blk.N.`` name, ``n_bytes`` equals gguf's size for the ggml type and shape."""
    w = f"tensor '{t.name}'"
    inv = "model facts must be consistent with the tensor index"
    if not t.name:
        raise _fail("RP-AR-6", inv, "a tensor has an empty name")
    if t.shard < 0 or t.offset < 0 or t.n_bytes < 0:
        raise _fail("RP-AR-6", inv, f"{w} has a negative shard, offset or size")
    if not t.shape or any(d <= 0 for d in t.shape):
        raise _fail("RP-AR-6", inv, f"{w} has shape {list(t.shape)}; dimensions must be positive")
    m = re.match(r"blk\.(\d+)\.", t.name)
    expect_block = int(m.group(1)) if m else None
    if t.block != expect_block:
        raise _fail("RP-AR-6", inv, f"{w} has block {-1 if t.block is None else t.block} "
                    f"but its name says {-1 if expect_block is None else expect_block}")
    import gguf

    try:
        qtype = gguf.GGMLQuantizationType[t.ggml_type]
    except KeyError:
        raise _fail("RP-AR-6", inv, f"{w} has unknown ggml type '{t.ggml_type}'") from None
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    n = math.prod(t.shape)
    if t.shape[0] % block_size or t.n_bytes != n // block_size * type_size:
        raise _fail("RP-AR-6", inv, f"{w} has {t.n_bytes} bytes but {t.ggml_type} {list(t.shape)} "
                    f"takes {n // block_size * type_size}")


def check_edge_specs(e: EdgePlan, facts: Mapping[str, Any] | None, config: Mapping[str, Any] | None) -> None:
    """Object/Ring Spec Consistency of one edge (see :class:`EdgeOp`); ``facts``/``config`` are the
    plan's dictionaries (checks needing them are skipped when they are None)."""
    w = f"edge '{e.edge_id}'"
    o, r = e.object_spec, e.ring_spec
    want_kind = "token" if e.kind in TOKEN_EDGE_KINDS else "activation"
    if o.kind != want_kind:
        raise _fail("RP-OS-3", "token edges use token object specs, activation edges activation object specs",
                    f"{w} ({e.kind}) has a '{o.kind}' object spec")
    inv5 = "object specs must have a valid extent, alignment, dtype width, shape and layout"
    if o.dtype not in DTYPE_WIDTHS:
        raise _fail("RP-OS-5", inv5, f"{w} has unknown dtype '{o.dtype}'")
    if o.dtype_width != DTYPE_WIDTHS[o.dtype]:
        raise _fail("RP-OS-5", inv5, f"{w} has dtype_width {o.dtype_width} but {o.dtype} is {DTYPE_WIDTHS[o.dtype]} bytes")
    if o.layout not in LAYOUTS:
        raise _fail("RP-OS-5", inv5, f"{w} has unsupported layout '{o.layout}'")
    if not _is_pow2(o.alignment):
        raise _fail("RP-OS-5", inv5, f"{w} has alignment {o.alignment}, which is not a positive power of two")
    if not o.shape or any(d <= 0 for d in o.shape):
        raise _fail("RP-OS-5", inv5, f"{w} has unsupported shape {list(o.shape)}")
    if facts is not None and config is not None and o.kind == "activation":
        act_w = DTYPE_WIDTHS.get(config["activation_dtype"], 0)
        want = config["max_seq_len"] * facts["embedding_length"] * act_w
        if o.dtype != config["activation_dtype"] or o.max_extent != want:
            raise _fail("RP-OS-2", "activation max_extent must be max_seq_len * hidden_dim * dtype_width_bytes",
                        f"{w} has {o.dtype} max_extent {o.max_extent} but {config['max_seq_len']} * "
                        f"{facts['embedding_length']} * {act_w} ({config['activation_dtype']}) = {want}")
    if o.max_extent != math.prod(o.shape) * o.dtype_width:
        raise _fail("RP-OS-5", inv5, f"{w} has max_extent {o.max_extent} but shape {list(o.shape)} of {o.dtype} "
                    f"takes {math.prod(o.shape) * o.dtype_width} bytes")
    if facts is not None and config is not None:
        if o.kind == "token":
            want_shape: tuple[int, ...] = (config["max_seq_len"],)
            if o.dtype != config["token_dtype"]:
                raise _fail("RP-OS-5", inv5, f"{w} has token dtype {o.dtype} but the config's is {config['token_dtype']}")
        else:
            want_shape = (config["max_seq_len"], facts["embedding_length"])
        if tuple(o.shape) != want_shape:
            raise _fail("RP-OS-5", inv5, f"{w} has unsupported shape {list(o.shape)}; a {o.kind} object is "
                        f"{list(want_shape)}")
        if o.alignment != config["alignment"]:
            raise _fail("RP-OS-5", inv5, f"{w} has alignment {o.alignment} but the config's is {config['alignment']}")
    inv_ring = "ring specs must hold at least one slot of at least max_extent bytes, aligned"
    if r.slots < 1 or (config is not None and r.slots != config["ring_slots"]):
        raise _fail("RP-OS-5", inv_ring, f"{w} has {r.slots} ring slots"
                    + ("" if config is None else f" but the config asks for {config['ring_slots']}"))
    if r.slot_bytes < o.max_extent:
        raise _fail("RP-OS-5", inv_ring, f"{w} has slot_bytes {r.slot_bytes} < max_extent {o.max_extent}")
    if r.slot_bytes % o.alignment:
        raise _fail("RP-OS-5", inv_ring, f"{w} has slot_bytes {r.slot_bytes}, not a multiple of alignment {o.alignment}")


def _check_config(c: Mapping[str, Any]) -> None:
    inv = "the runtime config must give valid object sizes"
    if c["max_seq_len"] <= 0:
        raise _fail("RP-OS-5", inv, f"max_seq_len is {c['max_seq_len']}")
    for k in ("activation_dtype", "token_dtype", "kv_dtype"):
        if c[k] not in DTYPE_WIDTHS:
            raise _fail("RP-OS-5", inv, f"{k} '{c[k]}' has no known width ({', '.join(DTYPE_WIDTHS)})")
    if c["ring_slots"] < 1:
        raise _fail("RP-OS-5", inv, f"ring_slots is {c['ring_slots']}")
    if c.get("parallel", 1) < 1:
        raise _fail("RP-OS-5", inv, f"parallel is {c['parallel']} (sequences in flight must be >= 1)")
    if not _is_pow2(c["alignment"]):
        raise _fail("RP-OS-5", inv, f"alignment {c['alignment']} is not a positive power of two")


def _check_facts(f: ModelFacts, weights: WeightSource) -> None:
    inv = "model facts must be consistent with the requested stage layout"
    for k in ("block_count", "embedding_length", "head_count", "head_count_kv", "vocab_size"):
        if getattr(f, k) <= 0:
            raise _fail("RP-AR-6", inv, f"{k} is {getattr(f, k)}")
    if f.head_count % f.head_count_kv:
        raise _fail("RP-AR-6", inv, f"head_count {f.head_count} is not a multiple of head_count_kv {f.head_count_kv}")
    if f.block_bytes and len(f.block_bytes) != f.block_count:
        raise _fail("RP-AR-6", inv, f"block_bytes has {len(f.block_bytes)} entries but block_count is {f.block_count}")
    for n, u in (("sha256", weights.sha256), ("sizes", weights.sizes)):
        if u and len(u) != len(weights.uris):
            raise _fail("RP-AR-6", inv, f"the weight source has {len(weights.uris)} uris but {len(u)} {n}")
    if not f.tensors:
        return
    sums = [0] * f.block_count
    names: set[str] = set()
    for t in f.tensors:
        if t.name in names:
            raise _fail("RP-AR-6", inv, f"tensor '{t.name}' appears twice in the tensor index")
        names.add(t.name)
        if t.block is not None:
            if t.block >= f.block_count:
                raise _fail("RP-AR-6", inv, f"tensor '{t.name}' is in block {t.block} but block_count is {f.block_count}")
            sums[t.block] += t.n_bytes
        if weights.uris and t.shard >= len(weights.uris):
            raise _fail("RP-AR-6", inv, f"tensor '{t.name}' is in shard {t.shard} but the weight source has "
                        f"{len(weights.uris)} uris")
    for b, total in enumerate(sums):
        if total == 0:
            raise _fail("RP-AR-6", inv, f"block {b} has no tensors but block_count is {f.block_count}")
    if tuple(sums) != tuple(f.block_bytes):
        b = next((i for i in range(f.block_count) if i >= len(f.block_bytes) or f.block_bytes[i] != sums[i]), 0)
        have = f.block_bytes[b] if b < len(f.block_bytes) else "nothing"
        raise _fail("RP-AR-6", inv, f"block_bytes[{b}] is {have} but the tensors of block {b} total {sums[b]} bytes")


def check_spec(spec: RunPlanSpec, node_ids: Sequence[str]) -> None:
    """Every whole-plan invariant of seed 000 over a RunPlanSpec whose ops passed their local checks.

    Order (the first failure is reported): runtime config [RP-OS-5]; model facts [RP-AR-6];
    duplicate stage index [RP-AR-2]; missing stage index [RP-AR-3]; stage count [RP-AR-4] (at least 1,
    at most block_count); node ids [RP-AR-1]; layer ranges in stage order: start at 0 [RP-LA-3],
    contiguous [RP-LA-1], no overlap [RP-LA-2], end at block_count [RP-LA-3]; edge ids unique
    [RP-EA-1]; endpoints are stages or the orchestrator [RP-EA-2]; exactly one token-in
    orchestrator -> 0 [RP-EA-3]; one activation edge i -> i+1 per boundary [RP-EA-4]; exactly one
    token-out N-1 -> orchestrator [RP-EA-5]. Raises VerifyException.
    """
    _check_config_values(spec.config)
    _check_facts(spec.facts, spec.weights)
    f = spec.facts
    counts: dict[int, int] = {}
    for s in spec.stages:
        counts[s.index] = counts.get(s.index, 0) + 1
    for idx, n in sorted(counts.items()):
        if n > 1:
            raise _fail("RP-AR-2", "each stage index is assigned exactly once", f"stage {idx} is assigned {n} times")
    n_st = len(spec.stages)
    missing = [i for i in range(n_st) if i not in counts]
    if missing:
        extra = sorted(i for i in counts if i >= n_st)
        raise _fail("RP-AR-3", "stage indices must be exactly 0..stage_count-1",
                    f"stage {missing[0]} is missing" + (f" (stage {extra[0]} is out of range)" if extra else ""))
    if n_st == 0:
        raise _fail("RP-AR-4", "the stage count must be between 1 and block_count", "the plan has no stages")
    if n_st > f.block_count:
        raise _fail("RP-AR-4", "the stage count must be between 1 and block_count",
                    f"{n_st} stages for {f.block_count} blocks")
    pool = set(node_ids)
    stages = sorted(spec.stages, key=lambda s: s.index)
    for s in stages:
        if s.node_id not in pool:
            raise _fail("RP-AR-1", "every stage must run on a node of the pool",
                        f"stage {s.index} is assigned to unknown node '{s.node_id}'")
    if stages[0].layer_start != 0:
        raise _fail("RP-LA-3", "the union of stage ranges must cover the block range [0, block_count)",
                    f"stage 0 starts at block {stages[0].layer_start}")
    for prev, s in zip(stages, stages[1:]):
        if s.layer_start > prev.layer_end:
            raise _fail("RP-LA-1", "stage ranges must be contiguous",
                        f"stage {s.index} starts at block {s.layer_start} but stage {prev.index} ends at block {prev.layer_end}")
        if s.layer_start < prev.layer_end:
            raise _fail("RP-LA-2", "stage ranges must not overlap",
                        f"stage {s.index} starts at block {s.layer_start} but stage {prev.index} ends at block {prev.layer_end}")
    if stages[-1].layer_end != f.block_count:
        raise _fail("RP-LA-3", "the union of stage ranges must cover the block range [0, block_count)",
                    f"stage {stages[-1].index} ends at block {stages[-1].layer_end} but the model has {f.block_count} blocks")
    _check_edges(spec.edges, n_st)


def _check_config_values(c: RuntimeConfig) -> None:
    _check_config({"max_seq_len": c.max_seq_len, "activation_dtype": c.activation_dtype, "token_dtype": c.token_dtype,
                   "kv_dtype": c.kv_dtype, "ring_slots": c.ring_slots, "alignment": c.alignment,
                   "parallel": c.parallel})


def _check_edges(edges: Sequence[EdgePlan], n: int) -> None:
    seen: set[str] = set()
    for e in edges:
        if e.edge_id in seen:
            raise _fail("RP-EA-1", "every edge id must be unique within the run", f"edge id '{e.edge_id}' is used twice")
        seen.add(e.edge_id)
        for role, v in (("producer", e.producer), ("consumer", e.consumer)):
            if v != ORCHESTRATOR and not 0 <= v < n:
                raise _fail("RP-EA-2", "every edge has exactly one producer and one consumer",
                            f"edge '{e.edge_id}' has {role} stage {v} but the plan has {n} stages")
    by_kind: dict[str, list[EdgePlan]] = {k: [] for k in EDGE_KINDS}
    for e in edges:
        by_kind[e.kind].append(e)
    tin, acts, tout = by_kind["token_in"], by_kind["activation"], by_kind["token_out"]
    if len(tin) != 1:
        raise _fail("RP-EA-3", "the token-in edge is orchestrator -> stage 0",
                    f"the plan has {len(tin)} token-in edges, expected exactly one")
    e = tin[0]
    if (e.producer, e.consumer) != (ORCHESTRATOR, 0):
        raise _fail("RP-EA-3", "the token-in edge is orchestrator -> stage 0",
                    f"edge '{e.edge_id}' is {_endpoint_str(e.producer)} -> {_endpoint_str(e.consumer)}")
    have: dict[int, EdgePlan] = {}
    for e in acts:
        if e.producer == ORCHESTRATOR or e.consumer != e.producer + 1:
            raise _fail("RP-EA-4", "activation edge i is stage i -> stage i+1",
                        f"edge '{e.edge_id}' is {_endpoint_str(e.producer)} -> {_endpoint_str(e.consumer)}")
        if e.producer in have:
            raise _fail("RP-EA-4", "activation edge i is stage i -> stage i+1",
                        f"edges '{have[e.producer].edge_id}' and '{e.edge_id}' both connect stage {e.producer} -> "
                        f"stage {e.producer + 1}")
        have[e.producer] = e
    for i in range(n - 1):
        if i not in have:
            raise _fail("RP-EA-4", "activation edge i is stage i -> stage i+1",
                        f"no activation edge connects stage {i} -> stage {i + 1}")
    if len(tout) != 1:
        raise _fail("RP-EA-5", "the token-out edge is stage N-1 -> orchestrator",
                    f"the plan has {len(tout)} token-out edges, expected exactly one")
    e = tout[0]
    if (e.producer, e.consumer) != (n - 1, ORCHESTRATOR):
        raise _fail("RP-EA-5", "the token-out edge is stage N-1 -> orchestrator",
                    f"edge '{e.edge_id}' is {_endpoint_str(e.producer)} -> {_endpoint_str(e.consumer)} "
                    f"but the last stage is {n - 1}")


# --------------------------------------------------------------------------- provisions
def derive_provisions(spec: RunPlanSpec) -> list[ProvisionStage]:
    """One ProvisionStage per stage, in stage-index order (seed 000 "Provisioning Projection").

    Deterministic: a pure function of ``spec``. Stage ``i`` gets its own range ``[start, end)``, the
    tensors of :meth:`ModelFacts.tensors_for_stage` (token_embd on stage 0; output_norm/output on the
    last stage, plus a tied token_embd when output.weight is absent) as byte ranges, the inbound
    edge (consumer ``i``) with its producer's node id (``"orchestrator"`` for token-in) and the
    outbound edge (producer ``i``) with its consumer's node id (``"orchestrator"`` for token-out),
    both with the edge's ObjectSpec/RingSpec copied. Requires a spec that passed :func:`check_spec`.
    Cost: O(stages x tensors).
    """
    stages = sorted(spec.stages, key=lambda s: s.index)
    n = len(stages)
    node = {s.index: s.node_id for s in stages}
    inbound = {e.consumer: e for e in spec.edges}
    outbound = {e.producer: e for e in spec.edges}

    def peer(i: int) -> str:
        return ORCHESTRATOR_NODE if i == ORCHESTRATOR else node[i]

    out = []
    for s in stages:
        first, last = s.index == 0, s.index == n - 1
        ein, eout = inbound[s.index], outbound[s.index]
        tensors = tuple(TensorSlice(t.name, t.ggml_type, t.shape, t.shard, t.offset, t.n_bytes)
                        for t in spec.facts.tensors_for_stage(s.layer_start, s.layer_end, first, last))
        out.append(ProvisionStage(
            run_id=spec.run_id, stage=s.index, stage_count=n, node_id=s.node_id, layer_start=s.layer_start,
            layer_end=s.layer_end, block_count=spec.facts.block_count, has_embedding=first, has_head=last,
            max_seq_len=spec.config.max_seq_len, weights=spec.weights, tensors=tensors,
            inbound=EdgeProvision(ein.edge_id, ein.kind, "in", peer(ein.producer), ein.object_spec, ein.ring_spec),
            outbound=EdgeProvision(eout.edge_id, eout.kind, "out", peer(eout.consumer), eout.object_spec,
                                   eout.ring_spec)))
    return out


def check_provisions(have: Sequence[ProvisionStage], want: Sequence[ProvisionStage], node_ids: Sequence[str]) -> None:
    """Provisions present in a plan against the derivation (seed 000 Provisioning Projection).

    [RP-PP-1] exactly one provision per stage, and every non-range field equals the derivation;
    [RP-PP-2] own layer range and own tensors only; [RP-PP-3] the inbound/outbound edges are the
    stage's; [RP-PP-5]/[RP-PP-6] peers are node ids of the pool or "orchestrator" (never addresses);
    [RP-PP-4] the outbound peer is the consumer's node id; [RP-OS-4] specs equal the edge's.
    """
    by_stage: dict[int, ProvisionStage] = {}
    for p in have:
        if p.stage in by_stage:
            raise _fail("RP-PP-1", "exactly one provision per stage", f"stage {p.stage} has two provisions")
        by_stage[p.stage] = p
    for p in have:
        if not 0 <= p.stage < len(want):
            raise _fail("RP-PP-1", "exactly one provision per stage",
                        f"a provision names stage {p.stage} but the plan has {len(want)} stages")
    for w in want:
        if w.stage not in by_stage:
            raise _fail("RP-PP-1", "exactly one provision per stage", f"stage {w.stage} has no provision")
    pool = set(node_ids) | {ORCHESTRATOR_NODE}
    for w in want:
        p = by_stage[w.stage]
        where = f"provision of stage {w.stage}"
        if (p.layer_start, p.layer_end) != (w.layer_start, w.layer_end):
            raise _fail("RP-PP-2", "a stage receives only its own layer range",
                        f"{where} has [{p.layer_start}, {p.layer_end}) but the stage owns [{w.layer_start}, {w.layer_end})")
        if p.tensors != w.tensors:
            bad = sorted({t.name for t in p.tensors} ^ {t.name for t in w.tensors})
            detail = f"tensor '{bad[0]}' differs" if bad else "tensor byte ranges differ from the tensor index"
            raise _fail("RP-PP-2", "a stage receives only its own tensors", f"{where}: {detail}")
        for field in ("stage_count", "node_id", "block_count", "has_embedding", "has_head", "max_seq_len", "weights"):
            if getattr(p, field) != getattr(w, field):
                raise _fail("RP-PP-1", "provisions are the deterministic projection of the plan",
                            f"{where} has {field} {getattr(p, field)!r} but the plan gives {getattr(w, field)!r}")
        for direction, pe, we in (("in", p.inbound, w.inbound), ("out", p.outbound, w.outbound)):
            if (pe.edge_id, pe.kind) != (we.edge_id, we.kind):
                raise _fail("RP-PP-3", "a stage receives exactly its one inbound and one outbound edge",
                            f"{where} {direction}bound edge is '{pe.edge_id}' ({pe.kind}) but the plan's is "
                            f"'{we.edge_id}' ({we.kind})")
            if pe.peer_node_id not in pool:
                cid = "RP-PP-5" if direction == "in" else "RP-PP-6"
                raise _fail(cid, "edge provisions name peer node ids, never actor addresses",
                            f"{where} {direction}bound edge '{pe.edge_id}' names peer '{pe.peer_node_id}', which is "
                            "not a node id of the pool")
            if pe.peer_node_id != we.peer_node_id:
                cid, who = ("RP-PP-4", "consumer") if direction == "out" else ("RP-PP-5", "producer")
                raise _fail(cid, f"the {direction}bound provision names the {who} node_id",
                            f"{where} {direction}bound edge '{pe.edge_id}' names '{pe.peer_node_id}' but the {who} "
                            f"is '{we.peer_node_id}'")
            if (pe.object_spec, pe.ring_spec) != (we.object_spec, we.ring_spec):
                raise _fail("RP-OS-4", "specs are copied consistently into stage provisions",
                            f"{where} {direction}bound edge '{pe.edge_id}' specs differ from the edge's")


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
