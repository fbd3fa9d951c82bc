"""Types and attributes of the ``runplan`` dialect (:mod:`pipeplan.dialects.runplan`).

* ``!runplan.stage`` (:class:`StageType`): the value a ``runplan.stage`` or ``runplan.orchestrator``
  yields; ``runplan.edge`` and ``runplan.provision_stage`` take it as operands.
* Kinds as ``EnumAttribute`` s: :class:`EdgeKindAttr` (token_in | activation | token_out),
  :class:`ObjectKindAttr` (token | activation), :class:`DTypeAttr` (i32 | f32 | f16 | bf16).
* Records as ``ParametrizedAttribute`` s with a fixed, typed key set (:class:`RecordAttr`):
  :class:`ModelFactsAttr`, :class:`RuntimeConfigAttr`, :class:`WeightSourceAttr`,
  :class:`NodeSpecAttr`, :class:`ObjectSpecAttr`, :class:`RingSpecAttr`, :class:`EdgeProvisionAttr`,
  and :class:`TensorSliceAttr` (one tensor byte range of a provision). Each prints as
  ``#runplan.<name><key = value, ...>`` (optional keys left out); upstream MLIR keeps such an
  unregistered attribute body verbatim, so the generic form passes through ``mlir-opt`` unchanged.
  Each has its own ``verify`` for what it states alone (contract-ID messages ``[RP-..] ...``);
  checks that need the plan (config, model facts, pool) are the ops' and the plan's.

Also here: the contract-ID table (:data:`INVARIANT_CODES`), conversion from and to the plan_types
dataclasses, and the custom-syntax helpers of the ops.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

from pipeplan.dialects.carriers import i64_of, int_array, int_tuple, str_tuple, strings
from pipeplan.plan_types import (
    DTYPE_WIDTHS,
    ORCHESTRATOR,
    EdgeProvision,
    NodeSpec,
    ObjectSpec,
    RingSpec,
    RuntimeConfig,
    TensorSlice,
    WeightSource,
)
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    NoneAttr,
    StringAttr,
    f64,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Operation, ParametrizedAttribute, SpacedOpaqueSyntaxAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

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


def _is_pow2(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def _ints(vs: Iterable[int]) -> DenseArrayBase:
    return int_array(int(v) for v in vs)


def _int_of(a: Attribute) -> int:
    assert isinstance(a, IntegerAttr)
    return a.value.data


# --------------------------------------------------------------------------- types and kinds
@irdl_attr_definition
class StageType(ParametrizedAttribute, TypeAttribute):
    """``!runplan.stage``: a pipeline stage of the plan (or the orchestrator) as an SSA value."""

    name = "runplan.stage"


STAGE = StageType()


class EdgeKind(StrEnum):
    TOKEN_IN = "token_in"
    ACTIVATION = "activation"
    TOKEN_OUT = "token_out"


class ObjectKind(StrEnum):
    TOKEN = "token"
    ACTIVATION = "activation"


class DType(StrEnum):
    I32 = "i32"
    F32 = "f32"
    F16 = "f16"
    BF16 = "bf16"


def _parse_kind(parser: AttrParser, enum_type: type[StrEnum], cid: str, invariant: str, what: str) -> Any:
    """An enum keyword; an unknown one is a parse error citing ``cid`` (e.g. ``[RP-AR-5] ...``)."""
    pos = parser.pos
    word = parser.parse_identifier_or_str_literal(what)
    try:
        return enum_type(word)
    except ValueError:
        parser.raise_error(str(_fail(cid, invariant, f"unknown {what} '{word}' ({', '.join(enum_type)})")), pos,
                           parser.pos)


@irdl_attr_definition
class EdgeKindAttr(EnumAttribute[EdgeKind], SpacedOpaqueSyntaxAttribute):
    """``#runplan<edge_kind activation>``: kind of a ``runplan.edge`` (seed 000 Edge Assignment);
    another word is rejected [RP-AR-5]."""

    name = "runplan.edge_kind"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> EdgeKind:
        return _parse_kind(parser, EdgeKind, "RP-AR-5", "edge kind must be token_in, activation or token_out",
                           "edge kind")


@irdl_attr_definition
class ObjectKindAttr(EnumAttribute[ObjectKind], SpacedOpaqueSyntaxAttribute):
    """``#runplan<object_kind token>``: kind of an edge object; another word is rejected [RP-OS-3]."""

    name = "runplan.object_kind"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> ObjectKind:
        return _parse_kind(parser, ObjectKind, "RP-OS-3", "object kinds are token or activation", "object kind")


@irdl_attr_definition
class DTypeAttr(EnumAttribute[DType], SpacedOpaqueSyntaxAttribute):
    """``#runplan<dtype f32>``: element type of an edge object, activation, token or KV cache
    (width: plan_types.DTYPE_WIDTHS); another word is rejected [RP-OS-5]."""

    name = "runplan.dtype"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> DType:
        return _parse_kind(parser, DType, "RP-OS-5", "dtypes must have a known width", "dtype")


def _enum(cls: type[EnumAttribute[Any]], value: str, cid: str, invariant: str, detail: str) -> Any:
    try:
        return cls(cls.enum_type(value))
    except ValueError:
        raise _fail(cid, invariant, detail) from None


def edge_kind_attr(kind: str, where: str = "an edge") -> EdgeKindAttr:
    """The EdgeKindAttr of ``kind``; raises VerifyException [RP-AR-5] for another string."""
    return _enum(EdgeKindAttr, kind, "RP-AR-5", "edge kind must be token_in, activation or token_out",
                 f"{where} has kind '{kind}'")


def _dtype_attr(dtype: str, where: str) -> DTypeAttr:
    return _enum(DTypeAttr, dtype, "RP-OS-5", "dtypes must have a known width",
                 f"{where} has unknown dtype '{dtype}' ({', '.join(DTYPE_WIDTHS)})")


# --------------------------------------------------------------------------- records
INT, FLOAT, STR, STRS, INTS, DICT = "i64", "f64", "string", "array of strings", "array of integers", "dictionary"
"""Kinds of record entries; a kind may also be an attribute class (an enum or a nested record)."""


def _parse_value(parser: AttrParser, kind: Any) -> Attribute:
    if kind == INT:
        return i64_of(parser.parse_integer())
    if kind == FLOAT:
        return FloatAttr(parser.parse_float(), f64)
    if kind == STR:
        return StringAttr(parser.parse_str_literal())
    if kind == STRS:
        return strings(parser.parse_comma_separated_list(Parser.Delimiter.SQUARE, parser.parse_str_literal))
    if kind == INTS:
        return _ints(parser.parse_comma_separated_list(Parser.Delimiter.SQUARE, parser.parse_integer))
    if kind == DICT:
        pos = parser.pos
        d = parser.parse_attribute()
        if not isinstance(d, DictionaryAttr):
            parser.raise_error("expected a dictionary '{...}'", pos, parser.pos)
        return d
    if issubclass(kind, EnumAttribute):
        return kind(kind.parse_parameter(parser))
    assert issubclass(kind, RecordAttr)
    return kind.new(kind.parse_parameters(parser))


def _print_value(printer: Printer, v: Attribute) -> None:
    if isinstance(v, IntegerAttr):
        printer.print_string(str(v.value.data))
    elif isinstance(v, FloatAttr):
        printer.print_float(float(v.value.data), f64)
    elif isinstance(v, DenseArrayBase):
        printer.print_string(f"[{', '.join(str(x) for x in int_tuple(v))}]")
    elif isinstance(v, EnumAttribute):
        v.print_parameter(printer)
    elif isinstance(v, RecordAttr):
        v.print_parameters(printer)
    elif isinstance(v, DictionaryAttr):
        printer.print_string("{")
        for n, (k, x) in enumerate(sorted(v.data.items())):
            if n:
                printer.print_string(", ")
            printer.print_identifier_or_string_literal(k)
            printer.print_string(" = ")
            _print_value(printer, x)
        printer.print_string("}")
    else:
        printer.print_attribute(v)


def _kind_ok(v: Attribute, kind: Any) -> bool:
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
    return isinstance(v, kind)


def _py(v: Attribute) -> Any:
    if isinstance(v, IntegerAttr):
        return v.value.data
    if isinstance(v, FloatAttr):
        return float(v.value.data)
    if isinstance(v, StringAttr):
        return v.data
    if isinstance(v, EnumAttribute):
        return str(v.data.value)
    if isinstance(v, ArrayAttr):
        return str_tuple(v)
    if isinstance(v, DenseArrayBase):
        return int_tuple(v)
    return v


class RecordAttr(ParametrizedAttribute):
    """A record with a fixed key set: one parameter per key, in declaration order; an optional key
    that is absent holds ``NoneAttr``. Text: ``<key = value, ...>`` in declaration order (any order
    parses), optional keys left out. Subclasses set ``WHAT`` / ``CID`` (the contract ID of a
    malformed record), ``KINDS`` (key -> kind), ``OPTIONAL`` (keys that may be absent) and ``check``
    (value checks of the record alone, on Python values; raises VerifyException)."""

    WHAT: ClassVar[str]
    CID: ClassVar[str]
    KINDS: ClassVar[dict[str, Any]]
    OPTIONAL: ClassVar[frozenset[str]] = frozenset()

    def values(self) -> dict[str, Any]:
        """The present entries as Python values (ints, floats, strings, tuples; nested records and
        dictionaries as attributes)."""
        return {k: _py(v) for k, v in zip(self.KINDS, self.parameters) if not isinstance(v, NoneAttr)}

    @classmethod
    def of(cls, **values: Any) -> Any:
        """The record of Python values (None for an absent optional key); raises VerifyException."""
        params: list[Attribute] = []
        for k, kind in cls.KINDS.items():
            v = values.get(k)
            if v is None:
                params.append(NoneAttr())
            elif isinstance(v, Attribute):
                params.append(v)
            elif kind == INT:
                params.append(i64_of(v))
            elif kind == FLOAT:
                params.append(FloatAttr(float(v), f64))
            elif kind == STR:
                params.append(StringAttr(v))
            elif kind == STRS:
                params.append(strings(v))
            elif kind == INTS:
                params.append(_ints(v))
            elif kind is DTypeAttr:
                params.append(_dtype_attr(v, f"{cls.WHAT} '{k}'"))
            else:
                params.append(kind(kind.enum_type(v)))
        return cls.new(params)

    def verify(self) -> None:
        inv = f"{self.WHAT} must hold exactly {', '.join(k for k in self.KINDS if k not in self.OPTIONAL)}"
        for k, v in zip(self.KINDS, self.parameters):  # required keys: the parameter constraints
            if k in self.OPTIONAL and not isinstance(v, NoneAttr) and not _kind_ok(v, self.KINDS[k]):
                kind = self.KINDS[k]
                raise _fail(self.CID, inv, f"{self.WHAT}: '{k}' must be {getattr(kind, 'name', kind)}, got {v}")
        self.check(self.values())

    def check(self, v: Mapping[str, Any]) -> None:
        """Value checks of the record alone (none by default)."""

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        start = parser.pos
        got: dict[str, Attribute] = {}
        inv = f"{cls.WHAT} must hold exactly {', '.join(k for k in cls.KINDS if k not in cls.OPTIONAL)}"

        def entry() -> None:
            pos = parser.pos
            key = parser.parse_identifier_or_str_literal("record key")
            if key not in cls.KINDS:
                parser.raise_error(str(_fail(cls.CID, inv, f"{cls.WHAT} has unexpected key '{key}'")), pos, parser.pos)
            if key in got:
                parser.raise_error(f"{cls.WHAT} repeats key '{key}'", pos, parser.pos)
            parser.parse_punctuation("=")
            got[key] = _parse_value(parser, cls.KINDS[key])

        parser.parse_comma_separated_list(Parser.Delimiter.ANGLE, entry)
        for k in cls.KINDS:
            if k not in got and k not in cls.OPTIONAL:
                parser.raise_error(str(_fail(cls.CID, inv, f"{cls.WHAT} lacks key '{k}'")), start, parser.pos)
        params = [got.get(k, NoneAttr()) for k in cls.KINDS]
        try:
            cls.new(params)
        except VerifyException as e:
            parser.raise_error(str(e), start, parser.pos)
        return params

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<")
        first = True
        for k, v in zip(self.KINDS, self.parameters):
            if isinstance(v, NoneAttr):
                continue
            if not first:
                printer.print_string(", ")
            first = False
            printer.print_string(f"{k} = ")
            _print_value(printer, v)
        printer.print_string(">")


_OS5 = "object specs must have a valid extent, alignment, dtype width, shape and layout"
_RING = "ring specs must hold at least one slot of at least max_extent bytes, aligned"


@irdl_attr_definition
class ObjectSpecAttr(RecordAttr):
    """ObjectSpec of an edge (seed 000 "Object/Ring Spec"): ``kind`` (token | activation), ``dtype``,
    ``dtype_width`` (bytes), ``shape``, ``layout`` (row_major), ``alignment`` (bytes, power of two),
    ``max_extent`` (bytes).

    Verifier [RP-OS-5]: the width is the dtype's, known layout, power-of-two alignment, positive dims,
    ``max_extent == prod(shape) * dtype_width``. Sizes against the runtime config: ``runplan.edge``.

    ``#runplan.object<kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major",
    alignment = 16, max_extent = 128>``
    """

    name = "runplan.object"
    WHAT, CID = "object spec", "RP-OS-1"
    KINDS = {"kind": ObjectKindAttr, "dtype": DTypeAttr, "dtype_width": INT, "shape": INTS, "layout": STR,
             "alignment": INT, "max_extent": INT}

    kind: ObjectKindAttr
    dtype: DTypeAttr
    dtype_width: IntegerAttr
    shape: DenseArrayBase
    layout: StringAttr
    alignment: IntegerAttr
    max_extent: IntegerAttr

    def check(self, v: Mapping[str, Any]) -> None:
        w = f"{v['kind']} object spec"
        if v["dtype_width"] != DTYPE_WIDTHS[v["dtype"]]:
            raise _fail("RP-OS-5", _OS5, f"{w} has dtype_width {v['dtype_width']} but {v['dtype']} is "
                        f"{DTYPE_WIDTHS[v['dtype']]} bytes")
        if v["layout"] not in LAYOUTS:
            raise _fail("RP-OS-5", _OS5, f"{w} has unsupported layout '{v['layout']}'")
        if not _is_pow2(v["alignment"]):
            raise _fail("RP-OS-5", _OS5, f"{w} has alignment {v['alignment']}, which is not a positive power of two")
        if not v["shape"] or any(d <= 0 for d in v["shape"]):
            raise _fail("RP-OS-5", _OS5, f"{w} has unsupported shape {list(v['shape'])}")
        n = math.prod(v["shape"]) * v["dtype_width"]
        if v["max_extent"] != n:
            raise _fail("RP-OS-5", _OS5, f"{w} has max_extent {v['max_extent']} but shape {list(v['shape'])} of "
                        f"{v['dtype']} takes {n} bytes")

    def spec(self) -> ObjectSpec:
        return ObjectSpec(**self.values())


@irdl_attr_definition
class RingSpecAttr(RecordAttr):
    """RingSpec of an edge: ``slots`` (>= 1) of ``slot_bytes`` (bytes, >= 0) each. Verifier [RP-OS-5];
    slots vs the config and slot_bytes vs the object spec: ``runplan.edge``.

    ``#runplan.ring<slots = 2, slot_bytes = 128>``
    """

    name = "runplan.ring"
    WHAT, CID = "ring spec", "RP-OS-1"
    KINDS = {"slots": INT, "slot_bytes": INT}

    slots: IntegerAttr
    slot_bytes: IntegerAttr

    def check(self, v: Mapping[str, Any]) -> None:
        if v["slots"] < 1:
            raise _fail("RP-OS-5", _RING, f"ring spec has {v['slots']} slots")
        if v["slot_bytes"] < 0:
            raise _fail("RP-OS-5", _RING, f"ring spec has slot_bytes {v['slot_bytes']}")

    def spec(self) -> RingSpec:
        return RingSpec(**self.values())


@irdl_attr_definition
class NodeSpecAttr(RecordAttr):
    """One node of the candidate pool (plan_types.NodeSpec): ``id``, ``memory_bytes`` (> 0) and the
    optional peaks ``bandwidth_bytes_per_s``, ``flops_per_s``, ``link_bandwidth_bytes_per_s``
    (bytes/s, FLOP/s; finite, > 0). Verifier [RP-AR-1].

    ``#runplan.node<id = "node-a", memory_bytes = 1000000, bandwidth_bytes_per_s = 2.000000e+10>``
    """

    name = "runplan.node"
    WHAT, CID = "node spec", "RP-AR-1"
    KINDS = {"id": STR, "memory_bytes": INT, "bandwidth_bytes_per_s": FLOAT, "flops_per_s": FLOAT,
             "link_bandwidth_bytes_per_s": FLOAT}
    OPTIONAL = frozenset({"bandwidth_bytes_per_s", "flops_per_s", "link_bandwidth_bytes_per_s"})

    id: StringAttr
    memory_bytes: IntegerAttr
    bandwidth_bytes_per_s: Attribute
    flops_per_s: Attribute
    link_bandwidth_bytes_per_s: Attribute

    def check(self, v: Mapping[str, Any]) -> None:
        inv = "every pool node is a node id or a node spec {id, memory_bytes[, peaks]}"
        if not v["id"]:
            raise _fail("RP-AR-1", inv, "a node spec has an empty 'id'")
        if v["memory_bytes"] <= 0:
            raise _fail("RP-AR-1", inv, f"node '{v['id']}': 'memory_bytes' must be > 0, got {v['memory_bytes']}")
        for k in sorted(self.OPTIONAL):
            if k in v and not (math.isfinite(v[k]) and v[k] > 0):
                raise _fail("RP-AR-1", inv, f"node '{v['id']}': '{k}' must be a finite number > 0, got {v[k]}")

    def spec(self) -> NodeSpec:
        return NodeSpec(**self.values())


@irdl_attr_definition
class WeightSourceAttr(RecordAttr):
    """Where the stages get their weights (plan_types.WeightSource): ``uris`` (one per gguf-split
    shard), ``sha256`` and ``sizes`` (bytes), each empty or one per uri. Verifier [RP-AR-6].

    ``#runplan.weights<uris = ["tiny.gguf"], sha256 = [], sizes = []>``
    """

    name = "runplan.weights"
    WHAT, CID = "weight source", "RP-AR-6"
    KINDS = {"uris": STRS, "sha256": STRS, "sizes": INTS}

    uris: ArrayAttr
    sha256: ArrayAttr
    sizes: DenseArrayBase

    def check(self, v: Mapping[str, Any]) -> None:
        for n in ("sha256", "sizes"):
            if v[n] and len(v[n]) != len(v["uris"]):
                raise _fail("RP-AR-6", "model facts must be consistent with the requested stage layout",
                            f"the weight source has {len(v['uris'])} uris but {len(v[n])} {n}")

    def source(self) -> WeightSource:
        v = self.values()
        return WeightSource(v["uris"], v["sha256"], v["sizes"])


@irdl_attr_definition
class RuntimeConfigAttr(RecordAttr):
    """The runtime config (plan_types.RuntimeConfig): ``max_seq_len`` (positions), the activation,
    token and KV dtypes, ``ring_slots``, ``alignment`` (bytes, power of two), optional ``parallel``
    (sequences in flight, 1 when absent). Verifier [RP-OS-5].

    ``#runplan.config<max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32,
    ring_slots = 2, alignment = 16>``
    """

    name = "runplan.config"
    WHAT, CID = "runtime config", "RP-OS-5"
    KINDS = {"max_seq_len": INT, "activation_dtype": DTypeAttr, "token_dtype": DTypeAttr, "kv_dtype": DTypeAttr,
             "ring_slots": INT, "alignment": INT, "parallel": INT}
    OPTIONAL = frozenset({"parallel"})

    max_seq_len: IntegerAttr
    activation_dtype: DTypeAttr
    token_dtype: DTypeAttr
    kv_dtype: DTypeAttr
    ring_slots: IntegerAttr
    alignment: IntegerAttr
    parallel: Attribute

    def check(self, v: Mapping[str, Any]) -> None:
        _check_config(v)

    def config(self) -> RuntimeConfig:
        return RuntimeConfig(**self.values())


@irdl_attr_definition
class ModelFactsAttr(RecordAttr):
    """The model facts (plan_types.ModelFacts without the tensor index, which the plan's
    ``runplan.tensor`` ops state): architecture parameters, ``alignment`` (bytes), ``block_bytes``
    (bytes per block), ``files``, optional ``sha256``, ``key_length``/``value_length`` (left out when
    the model states none) and ``arch_params`` (the architecture's own ``<arch>.*`` scalars; left out
    when empty). Verifier [RP-AR-6]: positive counts, ``head_count`` a multiple of ``head_count_kv``,
    one ``block_bytes`` entry per block; against the tensor index: the plan's.
    """

    name = "runplan.model"
    WHAT, CID = "model facts", "RP-AR-6"
    KINDS = {"architecture": STR, "name": STR, "block_count": INT, "embedding_length": INT, "head_count": INT,
             "head_count_kv": INT, "feed_forward_length": INT, "vocab_size": INT, "context_length": INT,
             "rope_dimension_count": INT, "rope_freq_base": FLOAT, "rms_norm_eps": FLOAT, "alignment": INT,
             "block_bytes": INTS, "files": STRS, "sha256": STR, "key_length": INT, "value_length": INT,
             "arch_params": DICT}
    OPTIONAL = frozenset({"sha256", "key_length", "value_length", "arch_params"})

    architecture: StringAttr
    name_: StringAttr
    block_count: IntegerAttr
    embedding_length: IntegerAttr
    head_count: IntegerAttr
    head_count_kv: IntegerAttr
    feed_forward_length: IntegerAttr
    vocab_size: IntegerAttr
    context_length: IntegerAttr
    rope_dimension_count: IntegerAttr
    rope_freq_base: FloatAttr
    rms_norm_eps: FloatAttr
    alignment: IntegerAttr
    block_bytes: DenseArrayBase
    files: ArrayAttr
    sha256: Attribute
    key_length: Attribute
    value_length: Attribute
    arch_params: Attribute

    def check(self, v: Mapping[str, Any]) -> None:
        inv = "model facts must be consistent with the requested stage layout"
        for k in ("block_count", "embedding_length", "head_count", "head_count_kv", "vocab_size"):
            if v[k] <= 0:
                raise _fail("RP-AR-6", inv, f"{k} is {v[k]}")
        if v["head_count"] % v["head_count_kv"]:
            raise _fail("RP-AR-6", inv, f"head_count {v['head_count']} is not a multiple of head_count_kv "
                        f"{v['head_count_kv']}")
        if v["block_bytes"] and len(v["block_bytes"]) != v["block_count"]:
            raise _fail("RP-AR-6", inv, f"block_bytes has {len(v['block_bytes'])} entries but block_count is "
                        f"{v['block_count']}")
        arch_params_of(self.arch_params if isinstance(self.arch_params, DictionaryAttr) else None, "model facts")


@irdl_attr_definition
class TensorSliceAttr(ParametrizedAttribute):
    """One tensor byte range a stage receives (plan_types.TensorSlice): GGUF name, ggml type, shape
    (ggml order), shard, absolute offset and size (bytes). Verifier [RP-PP-2]: positive dims,
    non-negative shard, offset and size.

    ``#runplan.slice<"blk.0.attn_q.weight" F32 [64, 64] shard 0 offset 1024 bytes 16384>``
    """

    name = "runplan.slice"

    tensor_name: StringAttr
    ggml_type: StringAttr
    shape: DenseArrayBase
    shard: IntegerAttr
    offset: IntegerAttr
    n_bytes: IntegerAttr

    @staticmethod
    def of(t: TensorSlice) -> TensorSliceAttr:
        return TensorSliceAttr(StringAttr(t.name), StringAttr(t.ggml_type), _ints(t.shape), i64_of(t.shard),
                               i64_of(t.offset), i64_of(t.n_bytes))

    def slice(self) -> TensorSlice:
        return TensorSlice(self.tensor_name.data, self.ggml_type.data, int_tuple(self.shape), _int_of(self.shard),
                           _int_of(self.offset), _int_of(self.n_bytes))

    def verify(self) -> None:
        t = self.slice()
        if not t.shape or any(d <= 0 for d in t.shape) or min(t.shard, t.offset, t.n_bytes) < 0:
            raise _fail("RP-PP-2", "a stage receives only its own tensors",
                        f"tensor slice '{t.name}' has shape {list(t.shape)}, shard {t.shard}, offset {t.offset}, "
                        f"bytes {t.n_bytes}")

    def print_body(self, printer: Printer) -> None:
        t = self.slice()
        printer.print_string_literal(t.name)
        printer.print_string(" ")
        printer.print_identifier_or_string_literal(t.ggml_type)
        printer.print_string(f" [{', '.join(map(str, t.shape))}] shard {t.shard} offset {t.offset} bytes {t.n_bytes}")

    @classmethod
    def parse_body(cls, parser: AttrParser) -> list[Attribute]:
        name = parser.parse_str_literal("tensor name")
        ty = parser.parse_identifier_or_str_literal("ggml type")
        shape = parser.parse_comma_separated_list(Parser.Delimiter.SQUARE, parser.parse_integer)
        parser.parse_keyword("shard")
        shard = parser.parse_integer()
        parser.parse_keyword("offset")
        off = parser.parse_integer()
        parser.parse_keyword("bytes")
        nb = parser.parse_integer()
        return [StringAttr(name), StringAttr(ty), _ints(shape), i64_of(shard), i64_of(off), i64_of(nb)]

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<")
        self.print_body(printer)
        printer.print_string(">")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        start = parser.pos
        parser.parse_punctuation("<")
        params = cls.parse_body(parser)
        parser.parse_punctuation(">")
        return _checked(cls, params, parser, start)


def _checked(cls: type[ParametrizedAttribute], params: list[Attribute], parser: AttrParser, start: int) -> list[Attribute]:
    try:
        cls.new(params)
    except VerifyException as e:
        parser.raise_error(str(e), start, parser.pos)
    return params


@irdl_attr_definition
class EdgeProvisionAttr(RecordAttr):
    """One edge provision of a stage (plan_types.EdgeProvision, direction given by the op's ``in`` /
    ``out``): ``edge_id``, ``kind``, ``peer_node_id`` (a node id of the pool or ``"orchestrator"``,
    never an actor address: checked by the plan), and the edge's ``object_spec`` and ``ring_spec``.
    """

    name = "runplan.edge_provision"
    WHAT, CID = "edge provision", "RP-PP-6"
    KINDS = {"edge_id": STR, "kind": EdgeKindAttr, "peer_node_id": STR, "object_spec": ObjectSpecAttr,
             "ring_spec": RingSpecAttr}

    edge_id: StringAttr
    kind: EdgeKindAttr
    peer_node_id: StringAttr
    object_spec: ObjectSpecAttr
    ring_spec: RingSpecAttr

    def provision(self, direction: str) -> EdgeProvision:
        return EdgeProvision(self.edge_id.data, str(self.kind.data.value), direction, self.peer_node_id.data,
                             self.object_spec.spec(), self.ring_spec.spec())


# ModelFactsAttr's key "name" collides with the attribute's own ``name`` (its IR name), so the
# parameter is ``name_`` and the record key stays ``name``.
ATTRIBUTES = [StageType, EdgeKindAttr, ObjectKindAttr, DTypeAttr, ObjectSpecAttr, RingSpecAttr, NodeSpecAttr,
              WeightSourceAttr, RuntimeConfigAttr, ModelFactsAttr, TensorSliceAttr, EdgeProvisionAttr]


# --------------------------------------------------------------------------- dataclass -> attribute
def within(where: str, make: Callable[[], Any]) -> Any:
    """``make()``, with ``where`` put in front of the detail of a VerifyException it raises
    (``[ID] invariant: <where>: detail``): builders name the edge/node whose attribute is refused."""
    try:
        return make()
    except VerifyException as e:
        head, _, detail = str(e).partition(": ")
        raise VerifyException(f"{head}: {where}: {detail}") from None


def object_spec_attr(s: ObjectSpec) -> ObjectSpecAttr:
    """The ObjectSpecAttr of an ObjectSpec; raises VerifyException (RP-OS-5) when invalid."""
    kind = _enum(ObjectKindAttr, s.kind, "RP-OS-3", "object kinds are token or activation",
                 f"object spec has kind '{s.kind}'")
    return ObjectSpecAttr.of(kind=kind, dtype=s.dtype, dtype_width=s.dtype_width, shape=s.shape, layout=s.layout,
                             alignment=s.alignment, max_extent=s.max_extent)


def ring_spec_attr(s: RingSpec) -> RingSpecAttr:
    """The RingSpecAttr of a RingSpec."""
    return RingSpecAttr.of(slots=s.slots, slot_bytes=s.slot_bytes)


def edge_provision_attr(p: EdgeProvision) -> EdgeProvisionAttr:
    """The EdgeProvisionAttr of an EdgeProvision (direction is the op's ``in``/``out``)."""
    return EdgeProvisionAttr.of(edge_id=p.edge_id, kind=edge_kind_attr(p.kind), peer_node_id=p.peer_node_id,
                                object_spec=object_spec_attr(p.object_spec), ring_spec=ring_spec_attr(p.ring_spec))


def node_entry_attr(n: NodeSpec | str) -> Attribute:
    """The ``nodes`` entry of a pool node: a NodeSpecAttr (peaks that are None left out), or a bare
    string for a plain node id (plans written before node specs)."""
    if isinstance(n, str):
        return StringAttr(n)
    return NodeSpecAttr.of(id=n.id, memory_bytes=n.memory_bytes, bandwidth_bytes_per_s=n.bandwidth_bytes_per_s,
                           flops_per_s=n.flops_per_s, link_bandwidth_bytes_per_s=n.link_bandwidth_bytes_per_s)


def read_node_entry(a: Attribute, where: str) -> tuple[str, NodeSpec | None]:
    """``(node id, NodeSpec or None)`` of one ``nodes`` entry (a string is an id without a spec).
    Raises VerifyException [RP-AR-1] for an entry that is neither."""
    if isinstance(a, StringAttr):
        return a.data, None
    if not isinstance(a, NodeSpecAttr):
        raise _fail("RP-AR-1", "every pool node is a node id or a node spec {id, memory_bytes[, peaks]}",
                    f"{where} is {a}, neither a string nor a node spec")
    return a.id.data, a.spec()


def weights_attr(w: WeightSource) -> WeightSourceAttr:
    """The WeightSourceAttr of a WeightSource."""
    return WeightSourceAttr.of(uris=w.uris, sha256=w.sha256, sizes=w.sizes)


def config_attr(c: RuntimeConfig) -> RuntimeConfigAttr:
    """The RuntimeConfigAttr of a RuntimeConfig; raises VerifyException [RP-OS-5] when invalid."""
    return RuntimeConfigAttr.of(max_seq_len=c.max_seq_len, activation_dtype=c.activation_dtype,
                                token_dtype=c.token_dtype, kv_dtype=c.kv_dtype, ring_slots=c.ring_slots,
                                alignment=c.alignment, parallel=c.parallel)


def arch_params_attr(params: Iterable[tuple[str, int | float | str]]) -> DictionaryAttr | None:
    """The ``arch_params`` dictionary of ``ModelFacts.arch_params`` (None when empty): ints as i64,
    floats as f64, strings as strings."""
    items = {k: (i64_of(v) if isinstance(v, int) else FloatAttr(v, f64) if isinstance(v, float) else StringAttr(v))
             for k, v in sorted(params)}
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


# --------------------------------------------------------------------------- syntax helpers
def print_body(printer: Printer, a: Attribute) -> None:
    """A record attribute's body ``<...>`` (after a keyword that fixes its kind)."""
    assert isinstance(a, RecordAttr)
    a.print_parameters(printer)


def parse_kw_body(parser: Parser, keyword: str, cls: type[RecordAttr]) -> Attribute:
    """``keyword <...>`` -> the ``cls`` record (a ParseError at the body when it does not verify)."""
    parser.parse_keyword(keyword)
    return cls.new(cls.parse_parameters(parser))


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


# --------------------------------------------------------------------------- runtime config
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


__all__ = ["ATTRIBUTES", "INVARIANT_CODES", "MALFORMED_CODE", "ORCHESTRATOR_NODE", "STAGE", "DType", "DTypeAttr",
           "EdgeKind", "EdgeKindAttr", "EdgeProvisionAttr", "ModelFactsAttr", "NodeSpecAttr", "ObjectKind",
           "ObjectKindAttr", "ObjectSpecAttr", "RecordAttr", "RingSpecAttr", "RuntimeConfigAttr", "StageType",
           "TensorSliceAttr", "WeightSourceAttr"]
