"""Attributes of the ``runplan`` dialect (:mod:`pipeplan.dialects.runplan`): the contract-ID table
(:data:`INVARIANT_CODES`), the ``DictionaryAttr`` schemas of model facts, weight source, ObjectSpec,
RingSpec, node and edge-provision entries, their conversion from and to the plan_types dataclasses, the
custom-syntax print/parse helpers of the ops, and the runtime config (:data:`CONFIG_SCHEMA` and its check).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pipeplan.dialects.carriers import i64_of, int_array, int_tuple, str_tuple, strings
from pipeplan.plan_types import (
    DTYPE_WIDTHS,
    ORCHESTRATOR,
    EdgeProvision,
    NodeSpec,
    ObjectSpec,
    RingSpec,
    RuntimeConfig,
    WeightSource,
)
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    f64,
    i64,
)
from xdsl.ir import Attribute, Operation
from xdsl.parser import Parser
from xdsl.printer import Printer
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


# --------------------------------------------------------------------------- runtime config
CONFIG_SCHEMA = _Schema(
    "runtime config", "RP-OS-5",
    {"max_seq_len": INT, "activation_dtype": STR, "token_dtype": STR, "kv_dtype": STR, "ring_slots": INT,
     "alignment": INT},
    {"parallel": INT},
)


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


def _check_config_values(c: RuntimeConfig) -> None:
    _check_config({"max_seq_len": c.max_seq_len, "activation_dtype": c.activation_dtype, "token_dtype": c.token_dtype,
                   "kv_dtype": c.kv_dtype, "ring_slots": c.ring_slots, "alignment": c.alignment,
                   "parallel": c.parallel})
