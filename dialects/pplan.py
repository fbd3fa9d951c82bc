"""The ``pplan`` dialect: PortablePlanIR (seed 003, "Binding gate" input; DESIGN.md §3).

A portable plan states *what* work a run does, before any target is chosen. Buffers are SSA values of
``!pplan.buffer<shape x dtype[, lifetime][, align N]>`` and the plan's dataflow is SSA:

* ``pplan.plan`` — one per module: the run id and a single-block region holding the buffer
  declarations and the steps, in program order.
* ``pplan.weight`` / ``pplan.table`` / ``pplan.kv`` / ``pplan.edge_object`` — declare the persistent
  buffers (GGUF weights, runtime tables, KV caches, RunPlan edge objects).
* ``pplan.step`` (``prefill`` | ``decode``) holding ``pplan.stage`` regions: the tasks of one stage in
  one step; each region ends in ``pplan.yield`` of the values later regions use (its results).
* ``pplan.task`` — one unit of exact work at the granularity of one runtime kernel call (or one
  edge transfer): it takes the buffers it reads as operands and yields the buffers it writes; an
  in-place write of a persistent buffer (``kv_cache_write``, ``send``) takes the current version and
  yields the next, so RAW/WAR/WAW order is SSA. The token loop (a step's token-out ``send`` feeds the
  next step's token-in ``recv``) is a ``!pplan.token`` value. What the types imply (dtypes, bytes of
  a buffer, memory space, alignment) is not repeated; a task states its op, work shape, flops,
  bytes per access and lineage.

Analysis results are never properties of the plan: bindings (``dialects/bindings.py``) and the
analysis headers ``pplan.candidates`` (target, digest) and ``pplan.costed_view`` (provenance) are
sibling ops at module level; a task's implementation candidates and their costs are typed
*discardable* attributes of the task (``pplan.candidates = [#pplan.candidate<..>]``,
``pplan.costs = [#pplan.cost<..>]``), so they sit next to the work they describe and name it by
position, not by a symbol; the target revision is stated once, on the target binding. The **portable digest**
(:func:`portable_digest`) is the sha256 of the canonical print of the ``pplan.plan`` op with every
discardable attribute stripped, so binding, legalization, selection and cost resolution cannot
change it (AB-G-2, AB-C-2).

Sizes: bytes of a buffer of dtype ``d`` and shape ``s`` are ``prod(s) / block(d) * type_size(d)``
with ``(block, type_size)`` from ``gguf.constants.GGML_QUANT_SIZES`` (llama.cpp's table); the
innermost dimension must be a multiple of the block size.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from operator import is_
from typing import ClassVar

from pipeplan.dialects.bindings import DeploymentBindingOp, EvidencePolicyOp, TargetBindingOp
from pipeplan.dialects.carriers import i64_attr, int_array, int_tuple, string, string_elements, strings
from pipeplan.dialects.costs import RESOLVED_COST_STATUSES, CostStatus, EvidenceKind  # noqa: F401  (re-exported)
from pipeplan.dialects.diagnostics import IRVerifyError, PipeplanOp
from pipeplan.dialects.ggml_types import GGML_TYPE_SIZES
from pipeplan.dialects.lifetimes import LIFETIMES, Lifetime  # noqa: F401  (re-exported)
from pipeplan.dialects.steps import STEPS, Step, task_path  # noqa: F401  (re-exported)
from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
    UnitAttr,
    f64,
    i32,
    i64,
)
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import (
    Attribute,
    Block,
    Dialect,
    Operation,
    OpResult,
    ParametrizedAttribute,
    Region,
    SpacedOpaqueSyntaxAttribute,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    AttrSizedOperandSegments,
    ParsePropInAttrDict,
    irdl_attr_definition,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import IsTerminator, NoTerminator, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.mlir_lexer import MLIRTokenKind
from xdsl.utils.str_enum import StrEnum

# --------------------------------------------------------------------------- vocabulary
DTYPE_SIZES: dict[str, tuple[int, int]] = {t.lower(): v for t, v in GGML_TYPE_SIZES.items()}
"""dtype name -> (elements per block, bytes per block), from gguf's GGML_QUANT_SIZES
(:data:`~pipeplan.dialects.ggml_types.GGML_TYPE_SIZES`: the table without importing gguf)."""

MEMSPACES = ("device", "host", "link")
"""Memory-space requirement of a task or buffer: device memory, host memory, or an edge link."""

COLLECTIVES = ("none", "send", "recv")
"""Collective kind of a task: point-to-point edge transfers are the only collectives so far."""

LAYOUTS = ("row_major",)
"""Layouts a task may require (activations and weights are row-major, GGUF order reversed)."""


PORTABLE_OPS = (
    "embedding_gather", "rms_norm", "matmul", "rope", "kv_cache_write", "attention", "silu_mul",
    "add", "argmax", "last_row", "send", "recv", "head_rms_norm", "gelu_mul", "add_bias",
)
"""Portable op names: the runtime's kernel names plus the two edge transfers."""


def dtype_nbytes(dtype: str, shape: Sequence[int]) -> int:
    """Exact bytes of a ``dtype`` tensor of ``shape`` (numpy order, innermost dimension last).

    Raises:
        ValueError: unknown dtype, negative dimension, or innermost dimension not a multiple of
            the dtype's block size (e.g. 100 elements of ``q4_k``, whose blocks hold 256).
    Source: llama.cpp ``ggml_row_size`` = ne0 / blck_size * type_size, via gguf's table.
    """
    if dtype not in DTYPE_SIZES:
        raise ValueError(f"unknown dtype {dtype!r}")
    block, size = DTYPE_SIZES[dtype]
    if any(d < 0 for d in shape):
        raise ValueError(f"negative dimension in shape {list(shape)}")
    n = math.prod(shape)
    if block > 1 and (not shape or shape[-1] % block):
        raise ValueError(f"innermost dimension of shape {list(shape)} is not a multiple of the {dtype} block size {block}")
    return n // block * size


@lru_cache(maxsize=65536)
def _ref(v: str) -> SymbolRefAttr:
    return SymbolRefAttr(v)


def _refs(names: Iterable[str]) -> ArrayAttr:
    return ArrayAttr(tuple(_ref(n) for n in names))


ints = int_tuple
"""The values of an i64 dense array property as a tuple (:func:`pipeplan.dialects.carriers.int_tuple`)."""


def ref_names(attr: ArrayAttr) -> tuple[str, ...]:
    """The root names of an array of symbol refs."""
    return tuple(r.root_reference.data for r in attr.data if isinstance(r, SymbolRefAttr))


str_list = string_elements
"""The values of an array of strings (:func:`pipeplan.dialects.carriers.string_elements`)."""


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


# --------------------------------------------------------------------------- types and attributes
class PortableOp(StrEnum):
    """The portable op of a task (PORTABLE_OPS)."""

    EMBEDDING_GATHER = "embedding_gather"
    RMS_NORM = "rms_norm"
    MATMUL = "matmul"
    ROPE = "rope"
    KV_CACHE_WRITE = "kv_cache_write"
    ATTENTION = "attention"
    SILU_MUL = "silu_mul"
    ADD = "add"
    ARGMAX = "argmax"
    LAST_ROW = "last_row"
    SEND = "send"
    RECV = "recv"
    HEAD_RMS_NORM = "head_rms_norm"
    GELU_MUL = "gelu_mul"
    ADD_BIAS = "add_bias"


@irdl_attr_definition
class PortableOpAttr(EnumAttribute[PortableOp], SpacedOpaqueSyntaxAttribute):
    """``#pplan<op matmul>``: the portable op of a ``pplan.task``."""

    name = "pplan.op"


@irdl_attr_definition
class StepAttr(EnumAttribute[Step], SpacedOpaqueSyntaxAttribute):
    """``#pplan<step decode>``: the step a ``pplan.step`` region describes."""

    name = "pplan.step"


@irdl_attr_definition
class EvidenceKindAttr(EnumAttribute[EvidenceKind], SpacedOpaqueSyntaxAttribute):
    """``#pplan<evidence roofline>``: the provider kind of a ``#pplan.cost`` (printed bare inside it)."""

    name = "pplan.evidence"


@irdl_attr_definition
class CostStatusAttr(EnumAttribute[CostStatus], SpacedOpaqueSyntaxAttribute):
    """``#pplan<cost_status direct>``: the status of a ``#pplan.cost`` (printed bare inside it); the
    :class:`~pipeplan.dialects.costs.CostStatus` vocabulary, whose ``missing`` the cost's verifier rejects."""

    name = "pplan.cost_status"


DEFAULT_ALIGNMENT = 64
"""Alignment (bytes) a ``!pplan.buffer`` type states when it prints none."""


@irdl_attr_definition
class BufferType(ParametrizedAttribute, TypeAttribute):
    """``!pplan.buffer<8x64xf32>``: a row-major byte range of ``dtype`` elements of ``shape`` (numpy
    order), its lifetime class (printed unless ``transient``) and alignment (printed unless 64):
    ``!pplan.buffer<64x64xq4_k, weight, align 32>``. Bytes are :func:`dtype_nbytes`; the memory space
    follows from the lifetime (``edge``: ``link``, else ``device``).

    Verifier: lifetime class, alignment a power of two; :meth:`verify_size` (run by the ops that define
    buffer values): known dtype, non-negative dimensions, innermost dimension a multiple of the dtype's
    block ([AB-R-6]).
    """

    name = "pplan.buffer"

    shape_: DenseArrayBase
    dtype_: StringAttr
    lifetime_: StringAttr
    alignment_: IntAttr

    def __init__(self, shape: Sequence[int], dtype: str, lifetime: str = "transient",
                 alignment: int = DEFAULT_ALIGNMENT):
        super().__init__(int_array(shape), StringAttr(dtype), StringAttr(lifetime), IntAttr(alignment))

    @property
    def shape(self) -> tuple[int, ...]:
        return int_tuple(self.shape_)

    @property
    def dtype(self) -> str:
        return self.dtype_.data

    @property
    def lifetime(self) -> str:
        return self.lifetime_.data

    @property
    def alignment(self) -> int:
        return self.alignment_.data

    @property
    def memspace(self) -> str:
        return "link" if self.lifetime == "edge" else "device"

    @property
    def nbytes(self) -> int:
        d = self.__dict__  # computed once per (immutable) type, outside its fields, equality and hash
        n = d.get("_pp_nbytes")
        if n is None:
            n = d["_pp_nbytes"] = dtype_nbytes(self.dtype, self.shape)
        return n

    def verify(self) -> None:
        if self.lifetime not in LIFETIMES:
            raise VerifyException(f"[AB-R-6] buffer type: lifetime {self.lifetime!r} is not one of {list(LIFETIMES)}")
        if not _pow2(self.alignment):
            raise VerifyException(f"[AB-R-6] buffer type: alignment {self.alignment} is not a power of two")

    def verify_size(self) -> None:
        """Raise VerifyException unless the dtype is known and its blocks divide the innermost
        dimension (checked by the ops defining buffer values, so a type can name any shape)."""
        try:
            dtype_nbytes(self.dtype, self.shape)
        except ValueError as e:
            raise VerifyException(f"[AB-R-6] buffer type {self}: {e}") from None

    def print_parameters(self, printer: Printer) -> None:
        text = "x".join(map(str, self.shape)) + ("x" if self.shape else "") + self.dtype
        if self.lifetime != "transient":
            text += f", {self.lifetime}"
        if self.alignment != DEFAULT_ALIGNMENT:
            text += f", align {self.alignment}"
        printer.print_string(f"<{text}>")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            dims = parser.parse_dimension_list()
            if dims:
                parser.parse_shape_delimiter()
            dtype = parser.parse_identifier(context_msg=" (buffer dtype)")
            lifetime, align = "transient", DEFAULT_ALIGNMENT
            while parser.parse_optional_punctuation(",") is not None:
                if parser.parse_optional_keyword("align") is not None:
                    align = parser.parse_integer(allow_boolean=False, allow_negative=False)
                else:
                    lifetime = parser.parse_identifier(context_msg=" (buffer lifetime)")
        return (int_array(dims), StringAttr(dtype), StringAttr(lifetime), IntAttr(align))


@irdl_attr_definition
class TokenType(ParametrizedAttribute, TypeAttribute):
    """``!pplan.token``: an ordering value, for orders that data does not imply (the token loop)."""

    name = "pplan.token"


def _nbytes_or_0(t: Attribute) -> int:
    """Bytes of a buffer type; 0 for another type or an invalid one (its verifier reports it)."""
    try:
        return t.nbytes if isinstance(t, BufferType) else 0
    except ValueError:
        return 0


def _buffer_type(v: SSAValue) -> BufferType:
    t = v.type
    assert isinstance(t, BufferType), t
    return t


# --------------------------------------------------------------------------- parse/print helpers
def _parse_value(parser: Parser) -> SSAValue:
    """An operand that must already be defined (pplan values are used after their definition)."""
    u = parser.parse_unresolved_operand()
    vals = parser.ssa_values.get(u.operand_name)
    if vals is None or u.index >= len(vals):
        parser.raise_error(f"[AB-S-1] value %{u.operand_name} is used before its definition", u.span)
    return vals[u.index]


def _parse_values(parser: Parser) -> list[SSAValue]:
    return parser.parse_comma_separated_list(parser.Delimiter.PAREN, lambda: _parse_value(parser))


def _print_values(printer: Printer, vals: Sequence[SSAValue]) -> None:
    printer.print_string("(")
    printer.print_list(vals, printer.print_operand)
    printer.print_string(")")


def _parse_int_list(parser: Parser) -> list[int]:
    return parser.parse_comma_separated_list(parser.Delimiter.SQUARE, lambda: parser.parse_integer(allow_boolean=False))


def _print_int_list(printer: Printer, vs: Sequence[int]) -> None:
    printer.print_string("[" + ", ".join(map(str, vs)) + "]")


# --------------------------------------------------------------------------- declarations
class _DeclOp(PipeplanOp):
    """Base of the ops declaring a persistent buffer value (weight, table, kv cache, edge object)."""

    LIFETIME: ClassVar[str] = "weight"
    stage = prop_def(IntegerAttr[I64])
    origin = prop_def(StringAttr)
    result = result_def(BufferType)

    def __init__(self, *, stage: int, origin: str, type: BufferType):
        super().__init__(properties={"stage": i64_attr(stage), "origin": string(origin)}, result_types=[type])

    @property
    def type(self) -> BufferType:
        return _buffer_type(self.result)

    @property
    def buffer_name(self) -> str:
        return f"s{self.stage.value.data}.{self.origin.data}"

    @property
    def origin_text(self) -> str:
        return self.origin.data

    def verify_(self) -> None:
        t = self.result.type
        if not isinstance(t, BufferType) or t.lifetime != self.LIFETIME:
            raise VerifyException(f"[AB-R-6] {self.name} {self.origin.data!r}: its buffer type must have lifetime "
                                  f"{self.LIFETIME}, got {t}")
        if self.stage.value.data < 0:
            raise VerifyException(f"[AB-R-6] {self.name} {self.origin.data!r}: stage {self.stage.value.data} < 0")
        t.verify_size()


@irdl_op_definition
class WeightOp(_DeclOp):
    """A GGUF weight of one stage: ``%w = pplan.weight 0 "blk.0.attn_q.weight" : !pplan.buffer<64x64xf32,
    weight, align 32>`` (buffer ``s0.w.blk.0.attn_q.weight``)."""

    name = "pplan.weight"
    assembly_format = "$stage $origin attr-dict `:` type($result)"

    @property
    def buffer_name(self) -> str:
        return f"s{self.stage.value.data}.w.{self.origin.data}"


@irdl_op_definition
class TableOp(_DeclOp):
    """A table the runtime computes once per stage (``rope_table``): lifetime weight, buffer
    ``s<stage>.<origin>``."""

    name = "pplan.table"
    assembly_format = "$stage $origin attr-dict `:` type($result)"


@irdl_op_definition
class KvOp(_DeclOp):
    """A KV cache of one stage and block: ``%k = pplan.kv 0 "blk.0.cache_k" : !pplan.buffer<64x1x8xf32, kv>``
    (buffer ``s0.blk.0.cache_k``); ``kv_cache_write`` tasks yield its new versions."""

    name = "pplan.kv"
    LIFETIME: ClassVar[str] = "kv"
    assembly_format = "$stage $origin attr-dict `:` type($result)"


@irdl_op_definition
class EdgeObjectOp(PipeplanOp):
    """The object of a RunPlan edge both endpoints see: ``%e = pplan.edge_object "e1" activation :
    !pplan.buffer<2048x64xf32, edge>`` (buffer ``edge.e1``); ``send`` tasks yield its new versions."""

    name = "pplan.edge_object"

    edge = prop_def(StringAttr)
    kind = prop_def(StringAttr)
    result = result_def(BufferType)
    assembly_format = "$edge $kind attr-dict `:` type($result)"

    def __init__(self, *, edge: str, kind: str, type: BufferType):
        super().__init__(properties={"edge": string(edge), "kind": string(kind)}, result_types=[type])

    @property
    def type(self) -> BufferType:
        return _buffer_type(self.result)

    @property
    def buffer_name(self) -> str:
        return f"edge.{self.edge.data}"

    @property
    def origin_text(self) -> str:
        return f"edge {self.edge.data} ({self.kind.data})"

    def verify_(self) -> None:
        t = self.result.type
        if not isinstance(t, BufferType) or t.lifetime != "edge":
            raise VerifyException(f"[AB-R-6] edge object {self.edge.data}: its buffer type must have lifetime edge")
        t.verify_size()


DeclOp = WeightOp | TableOp | KvOp | EdgeObjectOp


# --------------------------------------------------------------------------- tasks
_BLK = re.compile(r"blk\.(\d+)\.")


def default_block(model_op: str) -> int:
    """The block a task's lineage names: ``N`` of a ``blk.N.`` model op, else -1 (the printed default)."""
    m = _BLK.match(model_op)
    return int(m.group(1)) if m else -1


def default_flops(op: str, work: Sequence[int]) -> int:
    """The printed default of a task's flops: ``2*M*N*K`` for a ``matmul`` of work ``[M, N, K]``, else 0."""
    return 2 * math.prod(work) if op == "matmul" and len(work) == 3 else 0


def default_task_name(op: str, model_op: str, block: int) -> str:
    """The task name ``convert-runplan-to-pplan`` derives from op and lineage (the printed default):
    ``recv.e0`` (``edge:e0``), ``b0.matmul.attn_q`` (``blk.0.attn_q``), ``b0.rope.q`` (``blk.0.rope(q)``),
    ``b0.kv_cache_write`` (``blk.0.kv_cache_write()``), ``matmul.output`` (``output``)."""
    if model_op.startswith("edge:") and op in ("send", "recv"):
        return f"{op}.{model_op[len('edge:'):]}"
    pre, rest = "", model_op
    if block >= 0:
        pre = f"b{block}."
        if rest.startswith(f"blk.{block}."):
            rest = rest[len(f"blk.{block}."):]
    if rest.startswith(op + "(") and rest.endswith(")"):
        label = rest[len(op) + 1:-1]
        return pre + op + (f".{label}" if label else "")
    return f"{pre}{op}.{rest}"


@irdl_op_definition
class TaskOp(PipeplanOp):
    """One portable task: the exact work of one runtime kernel call or one edge transfer.

    Operands: ``ins`` (buffers read), ``updates`` (buffers written in place: KV caches, edge objects;
    the results are their new versions, so later readers use them), ``after`` (``!pplan.token``s
    ordering it after tasks data does not relate). Results: the written buffers (one fresh transient,
    or one new version per update), then a ``!pplan.token`` when ``token`` is set.

    Properties: ``task`` (short name; the task id is ``<step>.s<stage>.<task>``), ``op`` (#pplan<op ..>),
    ``out`` (name of a fresh result: buffer ``<step>.s<stage>.<out>``), ``model_op`` and ``block``
    (lineage), ``flops`` (a multiply-add counts 2), ``work`` (work shape; ``matmul``: ``[M, N, K]``),
    ``bytes`` (bytes of each access: ins, then writes; <= the buffer's bytes). Dtypes, memory space,
    alignment (the smallest of the operands') and collective kind (``send``/``recv`` ops) follow from
    the types and the op. Discardable attributes: ``pplan.candidates`` (:class:`CandidateAttr`s) and
    ``pplan.costs`` (:class:`CostAttr`s, each naming a candidate by rule), set by legalization,
    selection and cost resolution.

    Syntax: ``["<task>"] <op>(<ins>) [updates(..)] [after(..)] [-> "<out>"] at "<model op>" [blk N]
    [work [..]] [flops N] [bytes [..]] [token] [attr-dict] : <result types>``; what is elided takes its
    default: the task name :func:`default_task_name`, the block :func:`default_block`, the work shape
    the fresh result's shape, flops :func:`default_flops`, bytes every buffer whole.

    Example (task ``b0.matmul.attn_q`` of block 0, flops 8192, bytes [256, 16384, 256]):
    ```mlir
    %3 = pplan.task matmul(%1, %2) -> "blk.0.q" at "blk.0.attn_q" work [1, 64, 64]
      {pplan.candidates = [#pplan.candidate<"vq.matmul", "queue.compute", 0>],
       pplan.costs = [#pplan.cost<"vq.matmul", 1.0e-06 s, roofline, direct, conf 0.5>]} : !pplan.buffer<1x64xf32>
    ```
    """

    name = "pplan.task"

    ins = var_operand_def(BufferType)
    updates = var_operand_def(BufferType)
    after = var_operand_def(TokenType)
    outs = var_result_def()

    task = prop_def(StringAttr)
    op = prop_def(PortableOpAttr)
    out = opt_prop_def(StringAttr)
    model_op = prop_def(StringAttr)
    block = prop_def(IntegerAttr[I64])
    flops = prop_def(IntegerAttr[I64])
    work = prop_def(DenseArrayBase.constr(i64))
    bytes = prop_def(DenseArrayBase.constr(i64))
    token = opt_prop_def(UnitAttr)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(self, task: str, *, op: str, ins: Sequence[SSAValue], updates: Sequence[SSAValue] = (),
                 after: Sequence[SSAValue] = (), out: BufferType | None = None, out_name: str | None = None,
                 model_op: str, block: int, flops: int, work: Sequence[int], nbytes: Sequence[int],
                 token: bool = False):
        results: list[Attribute] = [v.type for v in updates] if updates else ([out] if out is not None else [])
        if token:
            results.append(TokenType())
        props: dict[str, Attribute] = {
            "task": string(task), "op": PortableOpAttr(PortableOp(op)), "model_op": string(model_op),
            "block": i64_attr(block), "flops": i64_attr(flops), "work": int_array(work), "bytes": int_array(nbytes)}
        if out_name is not None:
            props["out"] = string(out_name)
        if token:
            props["token"] = UnitAttr()
        super().__init__(operands=[ins, updates, after], result_types=[results], properties=props)

    # ---- accessors (plain Python values)
    @property
    def stage_op(self) -> StageOp:
        p = self.parent_op()
        assert isinstance(p, StageOp), "a pplan.task lives in a pplan.stage"
        return p

    @property
    def stage_index(self) -> int:
        return self.stage_op.index.value.data

    @property
    def step_name(self) -> str:
        return str(self.stage_op.step_op.step.data)

    @property
    def task_id(self) -> str:
        """``<step>.s<stage>.<task>``: the task's identity (commands are ``cmd.<task id>``)."""
        st = self.stage_op
        return f"{st.step_op.step.data}.s{st.index.value.data}.{self.task.data}"

    @property
    def written(self) -> tuple[SSAValue, ...]:
        """The written buffer values (results, without the token)."""
        return tuple(r for r in self.outs if isinstance(r.type, BufferType))

    @property
    def token_result(self) -> SSAValue | None:
        return next((r for r in self.outs if isinstance(r.type, TokenType)), None)

    def reads(self) -> tuple[str, ...]:
        """Names of the buffers read (``ins``), in operand order."""
        return tuple(buffer_name(v) for v in self.ins)

    def writes(self) -> tuple[str, ...]:
        """Names of the buffers written: the updated ones, else the fresh result."""
        return tuple(buffer_name(v) for v in self.written)

    def read_bytes(self) -> tuple[int, ...]:
        return int_tuple(self.bytes)[: len(self.ins)]

    def write_bytes(self) -> tuple[int, ...]:
        return int_tuple(self.bytes)[len(self.ins):]

    @property
    def nbytes_read(self) -> int:
        return sum(self.read_bytes())

    @property
    def nbytes_written(self) -> int:
        return sum(self.write_bytes())

    def dtypes(self) -> tuple[str, ...]:
        """Operand dtypes: reads, then writes."""
        return tuple(_buffer_type(v).dtype for v in (*self.ins, *self.written))

    @property
    def memspace(self) -> str:
        return "link" if self.op.data in ("send", "recv") else "device"

    @property
    def collective(self) -> str:
        return str(self.op.data) if self.op.data in ("send", "recv") else "none"

    @property
    def layout(self) -> str:
        return "row_major"

    @property
    def alignment(self) -> int:
        vals = (*self.ins, *self.written)
        return min(_buffer_type(v).alignment for v in vals) if vals else 1

    @property
    def edge(self) -> str | None:
        """The RunPlan edge id a send/recv moves (from its edge-object operand)."""
        if self.collective == "none":
            return None
        for v in (*self.updates, *self.ins):
            d = _decl_of(v)
            if isinstance(d, EdgeObjectOp):
                return d.edge.data
        return None

    @property
    def lineage(self) -> str:
        """``model op -> stage/block -> portable task`` (AB-D-1), for diagnostics."""
        return task_path(self.step_name, self.stage_index, self.block.value.data, self.model_op.data, self.task_id)

    # ---- analysis annotations (discardable: outside the portable digest)
    @property
    def candidates(self) -> tuple[CandidateAttr, ...]:
        """The task's implementation candidates (its ``pplan.candidates`` attribute; empty when absent)."""
        a = self.attributes.get(CANDIDATES_ATTR)
        return tuple(c for c in a.data if isinstance(c, CandidateAttr)) if isinstance(a, ArrayAttr) else ()

    @property
    def costs(self) -> tuple[CostAttr, ...]:
        """The resolved costs of the task's candidates (its ``pplan.costs`` attribute; empty when absent)."""
        a = self.attributes.get(COSTS_ATTR)
        return tuple(c for c in a.data if isinstance(c, CostAttr)) if isinstance(a, ArrayAttr) else ()

    def selected_candidate(self) -> CandidateAttr | None:
        """The rank-0 candidate, or None before selection."""
        return next((c for c in self.candidates if c.rank == 0), None)

    def cost_of(self, rule: str) -> CostAttr | None:
        """The cost of the candidate admitted by ``rule``, or None."""
        return next((c for c in self.costs if c.rule == rule), None)

    def set_candidates(self, cands: Sequence[CandidateAttr], *, keep_costs: bool = False) -> None:
        """Replace the candidates; costs are dropped, or with ``keep_costs`` those of candidates still there
        (their rule) are kept."""
        costs = self.costs
        self.attributes.pop(COSTS_ATTR, None)
        self.attributes[CANDIDATES_ATTR] = ArrayAttr(tuple(cands))
        rules = {c.rule for c in cands}
        if keep_costs and costs:
            self.set_costs([c for c in costs if c.rule in rules])

    def set_costs(self, costs: Sequence[CostAttr]) -> None:
        """Replace the costs (kept after the candidates, the order MLIR sorts discardable attributes in)."""
        self.attributes[COSTS_ATTR] = ArrayAttr(tuple(costs))

    # ---- syntax
    def default_bytes(self) -> tuple[int, ...]:
        """Bytes of each access when the whole buffer moves (the printed default)."""
        return tuple(_buffer_type(v).nbytes for v in (*self.ins, *self.written))

    def print(self, printer: Printer) -> None:
        blk = self.block.value.data
        if self.task.data != default_task_name(str(self.op.data), self.model_op.data, blk):
            printer.print_string(" ")
            printer.print_string_literal(self.task.data)
        printer.print_string(f" {self.op.data}")
        _print_values(printer, self.ins)
        if self.updates:
            printer.print_string(" updates")
            _print_values(printer, self.updates)
        if self.after:
            printer.print_string(" after")
            _print_values(printer, self.after)
        if self.out is not None:
            printer.print_string(" -> ")
            printer.print_string_literal(self.out.data)
        printer.print_string(" at ")
        printer.print_string_literal(self.model_op.data)
        if blk != default_block(self.model_op.data):
            printer.print_string(f" blk {blk}")
        work = int_tuple(self.work)
        written = self.written
        if self.out is None or len(written) != 1 or work != _buffer_type(written[0]).shape:
            printer.print_string(" work ")
            _print_int_list(printer, work)
        if self.flops.value.data != default_flops(str(self.op.data), work):
            printer.print_string(f" flops {self.flops.value.data}")
        nb = int_tuple(self.bytes)
        try:
            full = self.default_bytes()
        except (ValueError, AssertionError):
            full = ()
        if nb != full:
            printer.print_string(" bytes ")
            _print_int_list(printer, nb)
        if self.token is not None:
            printer.print_string(" token")
        printer.print_op_attributes(self.attributes)
        if self.outs:
            printer.print_string(" : ")
            printer.print_list([r.type for r in self.outs], printer.print_attribute)

    @classmethod
    def parse(cls, parser: Parser) -> TaskOp:
        task = parser.parse_optional_str_literal()
        op = parser.parse_identifier(context_msg=" (portable op)")
        if op not in PORTABLE_OPS:
            parser.raise_error(f"[AB-L-1] unknown portable op {op!r}")
        ins = _parse_values(parser)
        updates = _parse_values(parser) if parser.parse_optional_keyword("updates") else []
        after = _parse_values(parser) if parser.parse_optional_keyword("after") else []
        out_name = parser.parse_str_literal() if parser.parse_optional_punctuation("->") else None
        parser.parse_keyword("at")
        model_op = parser.parse_str_literal()
        block = parser.parse_integer() if parser.parse_optional_keyword("blk") else default_block(model_op)
        work_pos = parser.pos
        work = _parse_int_list(parser) if parser.parse_optional_keyword("work") else None
        flops = parser.parse_integer() if parser.parse_optional_keyword("flops") else None
        nbytes = _parse_int_list(parser) if parser.parse_optional_keyword("bytes") else None
        token = parser.parse_optional_keyword("token") is not None
        attrs = parser.parse_optional_attr_dict()
        types: list[Attribute] = []
        if parser.parse_optional_punctuation(":"):
            types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        if work is None:
            res = next((t for t in types if isinstance(t, BufferType)), None)
            if out_name is None or res is None:
                parser.raise_error("[AB-R-6] a task states its work shape unless it yields one fresh buffer of that "
                                   "shape", work_pos, work_pos + 1)
            work = list(res.shape)
        if flops is None:
            flops = default_flops(op, work)
        if nbytes is None:
            nbytes = [_nbytes_or_0(t) for t in (*(v.type for v in ins), *(t for t in types if isinstance(t, BufferType)))]
        props: dict[str, Attribute] = {
            "task": string(default_task_name(op, model_op, block) if task is None else task),
            "op": PortableOpAttr(PortableOp(op)), "model_op": string(model_op),
            "block": i64_attr(block), "flops": i64_attr(flops), "work": int_array(work), "bytes": int_array(nbytes),
            "operandSegmentSizes": DenseArrayBase.from_list(i32, [len(ins), len(updates), len(after)])}
        if out_name is not None:
            props["out"] = string(out_name)
        if token:
            props["token"] = UnitAttr()
        return cls.create(operands=[*ins, *updates, *after], result_types=types, properties=props, attributes=attrs)

    ATTRIBUTE_VERIFIER: ClassVar[bool] = True  # verify_ reads pplan.candidates/pplan.costs only in verify_attributes_

    def verify_attributes_(self) -> None:
        self._verify_analysis(f"task {self.task.data!r}")

    def _verify_analysis(self, where: str) -> None:
        cands = self.attributes.get(CANDIDATES_ATTR)
        rules: set[str] = set()
        if cands is not None:
            if not isinstance(cands, ArrayAttr) or not all(isinstance(c, CandidateAttr) for c in cands.data):
                raise VerifyException(f"[AB-I-1] {where}: {CANDIDATES_ATTR} must be an array of #pplan.candidate")
            for c in self.candidates:
                if c.rule in rules:
                    raise VerifyException(f"[AB-I-1] {where}: two candidates share rule {c.rule!r}")
                rules.add(c.rule)
        costs = self.attributes.get(COSTS_ATTR)
        if costs is not None:
            if not isinstance(costs, ArrayAttr) or not all(isinstance(c, CostAttr) for c in costs.data):
                raise VerifyException(f"[AB-C-1] {where}: {COSTS_ATTR} must be an array of #pplan.cost")
            priced: set[str] = set()
            for k in self.costs:
                if k.rule not in rules or k.rule in priced:
                    raise VerifyException(f"[AB-C-1] {where}: cost of {k.rule!r} prices no candidate of the task, "
                                          f"or one already priced")
                priced.add(k.rule)

    def verify_(self) -> None:
        where = f"task {self.task.data!r}"
        self._verify_analysis(where)
        op = self.op.data
        nb = int_tuple(self.bytes)
        written = self.written
        for r in written:
            _buffer_type(r).verify_size()
        n_tok = sum(isinstance(r.type, TokenType) for r in self.outs)
        if n_tok != (1 if self.token is not None else 0):
            raise VerifyException(f"[AB-S-1] {where}: a task with 'token' yields exactly one !pplan.token (and only it)")
        if self.updates:
            if [v.type for v in self.updates] != [r.type for r in written]:
                raise VerifyException(f"[AB-S-4] {where}: results must be the new versions of its updates "
                                      f"(same types, same order)")
            if self.out is not None:
                raise VerifyException(f"[AB-S-4] {where}: an in-place task names no fresh result")
        elif len(written) > 1 or (len(written) == 1) != (self.out is not None):
            raise VerifyException(f"[AB-S-4] {where}: a task without updates yields one fresh buffer named by 'out'")
        if len(nb) != len(self.ins) + len(written):
            raise VerifyException(f"[AB-R-6] {where}: one byte count per access (reads, then writes) expected, "
                                  f"got {len(nb)} for {len(self.ins) + len(written)}")
        if any(b < 0 for b in nb) or self.flops.value.data < 0:
            raise VerifyException(f"[AB-R-6] {where}: negative byte or flop count")
        for k, (v, n) in enumerate(zip((*self.ins, *written), nb)):
            cap = _buffer_type(v).nbytes
            if n > cap:
                raise VerifyException(f"[AB-R-6] {where}: access {k} moves {n} bytes of a buffer holding {cap}")
        if op in ("send", "recv"):
            edges = [v for v in (self.updates if op == "send" else self.ins) if _buffer_type(v).lifetime == "edge"]
            if len(edges) != 1:
                raise VerifyException(f"[AB-L-2] {where}: a {op} {'updates' if op == 'send' else 'reads'} exactly one "
                                      f"edge object")
        if op == "matmul":
            shape = int_tuple(self.work)
            if len(shape) != 3 or self.flops.value.data != 2 * math.prod(shape):
                raise VerifyException(f"[AB-L-2] {where}: matmul flops {self.flops.value.data} inconsistent with work "
                                      f"shape [M, N, K] = {list(shape)} (expected 2*M*N*K)")


# --------------------------------------------------------------------------- regions
@irdl_op_definition
class YieldOp(PipeplanOp):
    """``pplan.yield %a, %b``: the values a ``pplan.stage``/``pplan.step`` region passes on (new versions
    of persistent buffers, tokens); they become the region op's results."""

    name = "pplan.yield"

    values = var_operand_def()
    traits = traits_def(IsTerminator())

    def __init__(self, values: Sequence[SSAValue]):
        super().__init__(operands=[values])

    def print(self, printer: Printer) -> None:
        if self.values:
            printer.print_string(" ")
            printer.print_list(self.values, printer.print_operand)

    @classmethod
    def parse(cls, parser: Parser) -> YieldOp:
        vals: list[SSAValue] = []
        if parser._current_token.kind == MLIRTokenKind.PERCENT_IDENT:  # noqa: SLF001
            vals = parser.parse_comma_separated_list(parser.Delimiter.NONE, lambda: _parse_value(parser))
        return cls(vals)


class _RegionOp(PipeplanOp):
    """Base of ``pplan.stage``/``pplan.step``: one block ending in ``pplan.yield``; results = the yield's
    operand types."""

    body = region_def("single_block")
    outs = var_result_def()

    @property
    def yield_op(self) -> YieldOp:
        y = self.body.block.last_op
        assert isinstance(y, YieldOp)
        return y

    def _verify_yield(self, where: str) -> None:
        y = self.body.block.last_op  # a terminator (xDSL's region verifier), and only pplan.yield is one here
        if not isinstance(y, YieldOp) or [v.type for v in y.values] != [r.type for r in self.outs]:
            raise VerifyException(f"[AB-S-1] {where}: results must match the yielded values' types")


@irdl_op_definition
class StageOp(_RegionOp):
    """The tasks of one stage in one step, in program order: ``%v:2 = pplan.stage 0 { ... pplan.yield %a, %b }``."""

    name = "pplan.stage"

    index = prop_def(IntegerAttr[I64])

    def __init__(self, index: int, ops: Sequence[Operation], yielded: Sequence[SSAValue]):
        super().__init__(properties={"index": i64_attr(index)}, result_types=[[v.type for v in yielded]],
                         regions=[Region(Block([*ops, YieldOp(yielded)]))])

    @property
    def step_op(self) -> StepOp:
        p = self.parent_op()
        assert isinstance(p, StepOp), "a pplan.stage lives in a pplan.step"
        return p

    def tasks(self) -> list[TaskOp]:
        return [o for o in self.body.block.ops if isinstance(o, TaskOp)]

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.index.value.data} ")
        printer.print_region(self.body)

    @classmethod
    def parse(cls, parser: Parser) -> StageOp:
        index = parser.parse_integer()
        region = parser.parse_region()
        last = region.block.last_op if region.blocks else None
        types = [v.type for v in last.operands] if isinstance(last, YieldOp) else []
        return cls.create(properties={"index": i64_attr(index)}, result_types=types, regions=[region])

    def verify_(self) -> None:
        where = f"stage {self.index.value.data}"
        self._verify_yield(where)
        for o in self.body.block.ops:
            if not isinstance(o, TaskOp | YieldOp):
                raise VerifyException(f"[AB-S-1] {where}: unexpected op {o.name} (only pplan.task)")


@irdl_op_definition
class StepOp(_RegionOp):
    """One step of the plan (``prefill``/``decode``): its ``pplan.stage`` regions in stage order."""

    name = "pplan.step"

    step = prop_def(StepAttr)

    def __init__(self, step: str, ops: Sequence[Operation], yielded: Sequence[SSAValue]):
        super().__init__(properties={"step": StepAttr(Step(step))}, result_types=[[v.type for v in yielded]],
                         regions=[Region(Block([*ops, YieldOp(yielded)]))])

    def stages(self) -> list[StageOp]:
        return [o for o in self.body.block.ops if isinstance(o, StageOp)]

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.step.data} ")
        printer.print_region(self.body)

    @classmethod
    def parse(cls, parser: Parser) -> StepOp:
        step = parser.parse_identifier(context_msg=" (step)")
        if step not in STEPS:
            parser.raise_error(f"[AB-S-1] step {step!r} is not one of {list(STEPS)}")
        region = parser.parse_region()
        last = region.block.last_op if region.blocks else None
        types = [v.type for v in last.operands] if isinstance(last, YieldOp) else []
        return cls.create(properties={"step": StepAttr(Step(step))}, result_types=types, regions=[region])

    def verify_(self) -> None:
        where = f"step {self.step.data}"
        self._verify_yield(where)
        seen: list[int] = []
        for o in self.body.block.ops:
            if isinstance(o, StageOp):
                seen.append(o.index.value.data)
            elif not isinstance(o, YieldOp):
                raise VerifyException(f"[AB-S-1] {where}: unexpected op {o.name} (only pplan.stage)")
        if seen != sorted(set(seen)):
            raise VerifyException(f"[AB-S-1] {where}: stages must appear once each, in increasing order, got {seen}")


# --------------------------------------------------------------------------- value analysis
def _root(v: SSAValue) -> SSAValue:
    """The value ``v`` stands for: through stage/step results to the yielded value, until a task or
    declaration result."""
    while isinstance(v, OpResult) and isinstance(v.op, StageOp | StepOp):
        v = v.op.yield_op.values[v.index]
    return v


def _decl_of(v: SSAValue) -> Operation | None:
    """The declaration op of the buffer ``v`` is a version of (None for a fresh transient)."""
    v = _root(v)
    while isinstance(v, OpResult) and isinstance(v.op, TaskOp):
        t = v.op
        if not t.updates:
            return None
        v = _root(t.updates[v.index])
    return v.op if isinstance(v, OpResult) else None


def producer(v: SSAValue) -> TaskOp | None:
    """The task that defines ``v`` (through region results), or None for a declaration."""
    r = _root(v)
    return r.op if isinstance(r, OpResult) and isinstance(r.op, TaskOp) else None


def buffer_name(v: SSAValue) -> str:
    """The buffer ``v`` is a version of: ``edge.<id>``, ``s<stage>.w.<tensor>``, ``s<stage>.<kv or table>``,
    or ``<step>.s<stage>.<out>`` for a transient."""
    r = _root(v)
    while isinstance(r, OpResult) and isinstance(r.op, TaskOp):
        t = r.op
        if t.updates:
            r = _root(t.updates[r.index])
            continue
        assert t.out is not None
        st = t.stage_op
        return f"{st.step_op.step.data}.s{st.index.value.data}.{t.out.data}"
    assert isinstance(r, OpResult) and isinstance(r.op, WeightOp | TableOp | KvOp | EdgeObjectOp), r
    return r.op.buffer_name


@dataclass(frozen=True)
class BufferInfo:
    """One buffer of the plan (all versions of one value chain): name, type, owning stage (-1: edge
    object) and lineage origin (GGUF tensor, ``kv``/table name, ``edge <id> (<kind>)``, ``<step>:<out>``)."""

    name: str
    type: BufferType
    stage: int
    origin: str


def plan_buffers(plan: PlanOp) -> list[BufferInfo]:
    """The plan's buffers in declaration order: edge objects, then in program order each task's
    first-used declarations (operand order) and its fresh result, then any declaration no task uses."""
    out: list[BufferInfo] = []
    seen: set[Operation] = set()
    for o in plan.body.block.ops:
        if isinstance(o, EdgeObjectOp):
            seen.add(o)
            out.append(BufferInfo(o.buffer_name, o.type, -1, o.origin_text))
    for t in plan.tasks():
        for v in (*t.ins, *t.updates):
            d = _decl_of(v)
            if d is not None and d not in seen and isinstance(d, WeightOp | TableOp | KvOp):
                seen.add(d)
                out.append(BufferInfo(d.buffer_name, d.type, d.stage.value.data, d.origin_text))
        if t.out is not None and t.written:
            out.append(BufferInfo(buffer_name(t.written[0]), _buffer_type(t.written[0]), t.stage_index,
                                  f"{t.step_name}:{t.out.data}"))
    for o in plan.body.block.ops:
        if isinstance(o, WeightOp | TableOp | KvOp) and o not in seen:
            out.append(BufferInfo(o.buffer_name, o.type, o.stage.value.data, o.origin_text))
    return out


def plan_dependencies(plan: PlanOp) -> dict[str, tuple[str, ...]]:
    """Task id -> the ids of the tasks it must follow, from SSA uses in program order: the producer
    of each read (RAW); for each in-place update, the producer of the updated version (WAW) and the
    earlier readers of that version (WAR); the producer of each ``after`` token."""
    readers: dict[SSAValue, list[str]] = {}
    deps_of: dict[str, tuple[str, ...]] = {}
    for t in plan.tasks():
        me = t.task_id
        deps: dict[str, None] = {}
        ins = [_root(v) for v in t.ins]
        for v in ins:
            p = producer(v)
            if p is not None:
                deps[p.task_id] = None
        for v in t.updates:
            r = _root(v)
            p = producer(r)
            if p is not None:
                deps[p.task_id] = None
            for x in readers.get(r, ()):
                deps[x] = None
        for v in t.after:
            p = producer(v)
            if p is not None:
                deps[p.task_id] = None
        deps.pop(me, None)
        deps_of[me] = tuple(deps)
        for v in ins:
            readers.setdefault(v, []).append(me)
    return deps_of


# --------------------------------------------------------------------------- plan
@irdl_op_definition
class PlanOp(PipeplanOp):
    """The portable plan of one run: buffer declarations, then the steps in order.

    Properties: ``sym_name`` (run id), ``stage_count``, ``prompt_len`` (tokens of the prefill step),
    ``decode_pos`` (position of the decode step's token), ``model`` (GGUF model name),
    ``source`` (lineage: ``runplan @<run id>``).

    Verifier (whole plan, linear in ops + uses): every operand is defined before its use in program
    order (def-before-use, so the dependency graph is acyclic, [AB-S-1]); a buffer version updated in
    place is not read after the update ([AB-S-4]); task ids unique ([AB-R-1]); stage indices below
    ``stage_count``; each step at most once, prefill before decode.

    Example:
    ```mlir
    pplan.plan @run0 attributes {stage_count = 1 : i64, prompt_len = 4 : i64, decode_pos = 4 : i64, model = "m",
                                 source = "runplan @run0"} {
      %0 = pplan.edge_object "e0" token_in : !pplan.buffer<16xi32, edge>
      pplan.step decode {
        pplan.stage 0 {
          %1 = pplan.task recv(%0) -> "input" at "edge:e0" bytes [4, 4] : !pplan.buffer<1xi32>
          pplan.yield
        }
        pplan.yield
      }
    }
    ```
    """

    name = "pplan.plan"

    sym_name = prop_def(SymbolNameConstraint())
    stage_count = prop_def(IntegerAttr[I64])
    prompt_len = prop_def(IntegerAttr[I64])
    decode_pos = prop_def(IntegerAttr[I64])
    model = prop_def(StringAttr)
    source = prop_def(StringAttr)
    body = region_def("single_block")

    traits = traits_def(NoTerminator(), SymbolOpInterface())
    assembly_format = "$sym_name attr-dict-with-keyword $body"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, name: str, *, stage_count: int, prompt_len: int, decode_pos: int, model: str,
                 source: str, ops: Sequence[Operation] = ()):
        super().__init__(
            properties={"sym_name": string(name), "stage_count": i64_attr(stage_count), "prompt_len": i64_attr(prompt_len),
                        "decode_pos": i64_attr(decode_pos), "model": string(model), "source": string(source)},
            regions=[Region(Block(list(ops)))],
        )

    def steps(self) -> list[StepOp]:
        return [o for o in self.body.block.ops if isinstance(o, StepOp)]

    def tasks(self) -> list[TaskOp]:
        """The plan's tasks, in program order."""
        return [t for s in self.steps() for st in s.stages() for t in st.tasks()]

    def buffers(self) -> list[BufferInfo]:
        """The plan's buffers (:func:`plan_buffers`)."""
        return plan_buffers(self)

    def dependencies(self) -> dict[str, tuple[str, ...]]:
        """Task id -> dependency task ids (:func:`plan_dependencies`)."""
        return plan_dependencies(self)

    def verify_(self) -> None:
        where = f"plan @{self.sym_name.data}"
        n = self.stage_count.value.data
        steps: list[str] = []
        for o in self.body.block.ops:
            if isinstance(o, StepOp):
                steps.append(str(o.step.data))
                for st in o.stages():
                    if not 0 <= st.index.value.data < n:
                        raise VerifyException(f"[AB-S-3] {where}: stage {st.index.value.data} outside [0, {n})")
            elif not isinstance(o, WeightOp | TableOp | KvOp | EdgeObjectOp):
                raise VerifyException(f"[AB-S-1] {where}: unexpected op {o.name} (declarations and pplan.step only)")
        if steps != [s for s in STEPS if s in steps]:
            raise VerifyException(f"[AB-S-1] {where}: steps must appear once each, prefill before decode, got {steps}")
        self._verify_dataflow(where)

    def _verify_dataflow(self, where: str) -> None:
        scopes: list[set[SSAValue]] = [set()]
        consumed: dict[SSAValue, TaskOp] = {}
        ids: set[str] = set()

        def use(o: Operation, v: SSAValue) -> None:
            if not any(v in s for s in scopes):
                raise IRVerifyError(f"[AB-S-1] {where}: {_what(o)} uses a value before its definition (SSA "
                                    f"def-before-use: dependencies closed and acyclic)", op=o)
            r = _root(v)
            if r in consumed and not isinstance(o, YieldOp):
                raise IRVerifyError(f"[AB-S-4] {where}: {_what(o)} reads a buffer version that task "
                                    f"{consumed[r].task_id!r} already updated in place (use its result)", op=o)

        def visit(block: Block) -> None:
            for o in block.ops:
                if isinstance(o, TaskOp):
                    for v in o.operands:
                        use(o, v)
                    for v in o.updates:
                        consumed[_root(v)] = o
                    tid = o.task_id
                    if tid in ids:
                        raise IRVerifyError(f"[AB-R-1] {where}: task id {tid!r} declared twice", op=o)
                    ids.add(tid)
                elif isinstance(o, YieldOp):
                    for v in o.operands:
                        use(o, v)
                elif isinstance(o, StageOp | StepOp):
                    scopes.append(set())
                    visit(o.body.block)
                    scopes.pop()
                scopes[-1].update(o.results)

        visit(self.body.block)


def _what(o: Operation) -> str:
    return f"task {o.task.data!r}" if isinstance(o, TaskOp) else o.name


# --------------------------------------------------------------------------- analysis ops
def _float_text(x: float) -> str:
    """``repr`` of ``x`` as an MLIR float literal (a ``.`` in the mantissa: ``1e-06`` -> ``1.0e-06``)."""
    r = repr(float(x))
    if "e" in r and "." not in r.split("e")[0]:
        m, e = r.split("e")
        r = f"{m}.0e{e}"
    elif "e" not in r and "." not in r and r not in ("inf", "-inf", "nan"):
        r += ".0"
    return r


@irdl_attr_definition
class CandidateAttr(ParametrizedAttribute):
    """One legal implementation candidate of the ``pplan.task`` it annotates (AB-I-1).

    Parameters: ``impl`` (implementation id), ``engine`` (the engine it runs on), ``rank`` (selection
    order: 0 is preferred; -1 until ``pplan-select-implementations`` ran), ``rule`` (the target
    capability rule that admitted it; default: the impl), ``workspace_bytes`` (default 0), ``rewrite``
    (the requirement rewrite it was checked under; default none), ``rejected`` (the other rules for
    the task's op and why each was rejected, ``"<rule>: <reason>"``). The originating task is the op
    it annotates; the plugin revision is the ``pplan.target_binding``'s, once per module.

    Syntax: ``#pplan.candidate<"<impl>", "<engine>", <rank>[, rule "<rule>"][, workspace <bytes>]
    [, rewrite "<rewrite>"][, rejected [...]]>`` (defaults elided).

    Verifier: impl, engine and rule non-empty; rank >= -1; workspace >= 0.
    """

    name = "pplan.candidate"

    impl_: StringAttr
    engine_: StringAttr
    rank_: IntAttr
    rule_: StringAttr
    workspace_: IntAttr
    rewrite_: StringAttr
    rejected_: ArrayAttr[StringAttr]

    def __init__(self, impl: str, engine: str, rank: int = -1, *, rule: str | None = None, workspace_bytes: int = 0,
                 rewrite: str = "", rejected: Sequence[str] = ()):
        super().__init__(StringAttr(impl), StringAttr(engine), IntAttr(rank), StringAttr(impl if rule is None else rule),
                         IntAttr(workspace_bytes), StringAttr(rewrite), strings(rejected))

    @property
    def impl(self) -> str:
        return self.impl_.data

    @property
    def engine(self) -> str:
        return self.engine_.data

    @property
    def rank(self) -> int:
        return self.rank_.data

    @property
    def rule(self) -> str:
        return self.rule_.data

    @property
    def workspace_bytes(self) -> int:
        return self.workspace_.data

    @property
    def rewrite(self) -> str:
        return self.rewrite_.data

    @property
    def rejected(self) -> tuple[str, ...]:
        return string_elements(self.rejected_)

    def resources(self) -> dict[str, int | str]:
        """The resources the candidate needs (``engine``, ``workspace_bytes``, ``rewrite`` when set)."""
        out: dict[str, int | str] = {"engine": self.engine, "workspace_bytes": self.workspace_bytes}
        if self.rewrite:
            out["rewrite"] = self.rewrite
        return out

    def with_(self, *, rank: int | None = None, rejected: Sequence[str] | None = None) -> CandidateAttr:
        """A copy with ``rank`` and/or ``rejected`` replaced."""
        return CandidateAttr(self.impl, self.engine, self.rank if rank is None else rank, rule=self.rule,
                             workspace_bytes=self.workspace_bytes, rewrite=self.rewrite,
                             rejected=self.rejected if rejected is None else rejected)

    def verify(self) -> None:
        if not (self.impl and self.engine and self.rule):
            raise VerifyException("[AB-I-1] candidate: impl, engine and rule must be non-empty")
        if self.rank < -1:
            raise VerifyException(f"[AB-I-1] candidate {self.impl!r}: rank {self.rank} < -1 (-1: not ranked yet)")
        if self.workspace_bytes < 0:
            raise VerifyException(f"[AB-I-1] candidate {self.impl!r}: negative workspace {self.workspace_bytes}")

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<")
        printer.print_string_literal(self.impl)
        printer.print_string(", ")
        printer.print_string_literal(self.engine)
        printer.print_string(f", {self.rank}")
        if self.rule != self.impl:
            printer.print_string(", rule ")
            printer.print_string_literal(self.rule)
        if self.workspace_bytes:
            printer.print_string(f", workspace {self.workspace_bytes}")
        if self.rewrite:
            printer.print_string(", rewrite ")
            printer.print_string_literal(self.rewrite)
        if self.rejected:
            printer.print_string(", rejected ")
            printer.print_attribute(self.rejected_)
        printer.print_string(">")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            impl = parser.parse_str_literal()
            parser.parse_punctuation(",")
            engine = parser.parse_str_literal()
            parser.parse_punctuation(",")
            rank = parser.parse_integer(allow_boolean=False)
            rule, ws, rewrite = impl, 0, ""
            rejected: list[str] = []
            while parser.parse_optional_punctuation(",") is not None:
                if parser.parse_optional_keyword("rule") is not None:
                    rule = parser.parse_str_literal()
                elif parser.parse_optional_keyword("workspace") is not None:
                    ws = parser.parse_integer(allow_boolean=False)
                elif parser.parse_optional_keyword("rewrite") is not None:
                    rewrite = parser.parse_str_literal()
                else:
                    parser.parse_keyword("rejected")
                    arr = parser.parse_attribute()
                    if not isinstance(arr, ArrayAttr) or not all(isinstance(x, StringAttr) for x in arr.data):
                        parser.raise_error("candidate rejections must be an array of strings")
                    rejected = [x.data for x in arr.data if isinstance(x, StringAttr)]
        return (StringAttr(impl), StringAttr(engine), IntAttr(rank), StringAttr(rule), IntAttr(ws), StringAttr(rewrite),
                strings(rejected))


@irdl_attr_definition
class CostAttr(ParametrizedAttribute):
    """One resolved estimate of the CostedTaskView: the cost of one candidate of the annotated task
    (AB-C-1, AB-C-3).

    Parameters: ``rule`` (the candidate it prices, by its rule), ``duration_s`` (f64 seconds),
    ``evidence`` (the provider kind that answered), ``status``: ``direct`` (the policy's first provider
    answered in its domain), ``fallback`` (a later provider answered because an earlier one had no
    in-domain evidence), ``out_of_domain`` (only extrapolated evidence existed), ``confidence`` (f64 in
    [0, 1]). The request key is the task's (:func:`cost_key`).

    Syntax: ``#pplan.cost<"<rule>", <seconds> s, <evidence>, <status>, conf <c>>``; floats print exactly
    (``repr``).

    Verifier: status one of RESOLVED_COST_STATUSES (not ``missing``); confidence in [0, 1], duration >= 0; a
    measured estimate is direct or out_of_domain.
    """

    name = "pplan.cost"

    rule_: StringAttr
    duration_: FloatAttr
    evidence_: EvidenceKindAttr
    status_: CostStatusAttr
    confidence_: FloatAttr

    def __init__(self, rule: str, duration_s: float, evidence: str, status: str, confidence: float):
        super().__init__(StringAttr(rule), FloatAttr(float(duration_s), f64), EvidenceKindAttr(EvidenceKind(evidence)),
                         CostStatusAttr(CostStatus(status)), FloatAttr(float(confidence), f64))

    @property
    def rule(self) -> str:
        return self.rule_.data

    @property
    def duration_s(self) -> float:
        return float(self.duration_.value.data)

    @property
    def evidence(self) -> str:
        return str(self.evidence_.data)

    @property
    def status(self) -> str:
        return str(self.status_.data)

    @property
    def confidence(self) -> float:
        return float(self.confidence_.value.data)

    def verify(self) -> None:
        if self.status_.data is CostStatus.MISSING:
            raise VerifyException(f"cost of {self.rule!r}: a resolved estimate is never missing (direct, fallback or "
                                  f"out_of_domain)")
        if not 0.0 <= self.confidence <= 1.0 or self.duration_s < 0:
            raise VerifyException(f"cost of {self.rule!r}: confidence must be in [0, 1] and duration >= 0")
        if self.evidence == "measured" and self.status == "fallback":
            raise VerifyException(f"cost of {self.rule!r}: a measured estimate is either direct or out_of_domain")

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<")
        printer.print_string_literal(self.rule)
        printer.print_string(f", {_float_text(self.duration_s)} s, {self.evidence}, {self.status}, "
                             f"conf {_float_text(self.confidence)}>")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            rule = parser.parse_str_literal()
            parser.parse_punctuation(",")
            duration = parser.parse_float()
            parser.parse_keyword("s")
            parser.parse_punctuation(",")
            evidence = EvidenceKindAttr.parse_parameter(parser)
            parser.parse_punctuation(",")
            status = CostStatusAttr.parse_parameter(parser)
            parser.parse_punctuation(",")
            parser.parse_keyword("conf")
            conf = parser.parse_float()
        return (StringAttr(rule), FloatAttr(duration, f64), EvidenceKindAttr(evidence), CostStatusAttr(status),
                FloatAttr(conf, f64))


CANDIDATES_ATTR = "pplan.candidates"
"""Discardable attribute of a ``pplan.task``: its legal candidates (array of ``#pplan.candidate``)."""

COSTS_ATTR = "pplan.costs"
"""Discardable attribute of a ``pplan.task``: its candidates' resolved costs (array of ``#pplan.cost``)."""


def candidate_id(task_id: str, rule: str) -> str:
    """``c.<task id>.<rule>``: the name diagnostics give the candidate of a task under a rule."""
    return f"c.{task_id}.{rule}"


def cost_key(t: TaskOp) -> str:
    """The normalized request key of a task's estimates: ``<op>|<dtypes reads then writes>|<work shape>``
    (:func:`pipeplan.analysis.evidence.request_key`)."""
    return f"{t.op.data}|{','.join(t.dtypes())}|{'x'.join(map(str, int_tuple(t.work)))}"


@irdl_op_definition
class CandidatesOp(PipeplanOp):
    """Analysis header: the plan's tasks carry their legal candidates on a target (AB-I-1).

    Lives next to ``pplan.plan``; each task's candidates are its ``pplan.candidates`` attribute (a
    discardable annotation, so the portable digest does not see it). Properties: ``plan`` (the plan
    symbol), ``target`` (target plugin name: its ``pplan.target_binding`` states the plugin revision),
    ``portable_digest`` (digest of the plan it was computed on), ``selected`` (set once
    ``pplan-select-implementations`` ran: candidates kept per task, ranked).

    Example:
    ```mlir
    pplan.candidates {plan = @run0, target = "virtual-queue", portable_digest = "ab12", selected = 1 : i64}
    ```
    """

    name = "pplan.candidates"

    plan = prop_def(SymbolRefAttr)
    target = prop_def(StringAttr)
    portable_digest = prop_def(StringAttr)
    selected = prop_def(IntegerAttr[I64])

    assembly_format = "attr-dict"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, *, plan: str, target: str, portable_digest: str, selected: int = 0):
        super().__init__(properties={"plan": SymbolRefAttr(plan), "target": string(target),
                                     "portable_digest": string(portable_digest), "selected": i64_attr(selected)})


@irdl_op_definition
class CostedViewOp(PipeplanOp):
    """Analysis header: the CostedTaskView of a plan's candidates under one evidence policy (AB-C-1).

    Lives next to ``pplan.plan``; the costs are each task's ``pplan.costs`` attribute (discardable, so
    it is not a new semantic representation and is excluded from the portable digest). Properties:
    ``plan``, ``portable_digest``, ``policy_fingerprint`` (sha256 of the EvidencePolicy op),
    ``evidence_fingerprint`` (sha256 over the providers' evidence identities: measured table digests,
    deployment peaks), ``target_fingerprint``, ``deployment_fingerprint`` (provenance of the selected
    identities, AB-G-3).

    Example:
    ```mlir
    pplan.costed_view {plan = @run0, portable_digest = "x", policy_fingerprint = "p", evidence_fingerprint = "e",
      target_fingerprint = "t", deployment_fingerprint = "d"}
    ```
    """

    name = "pplan.costed_view"

    plan = prop_def(SymbolRefAttr)
    portable_digest = prop_def(StringAttr)
    policy_fingerprint = prop_def(StringAttr)
    evidence_fingerprint = prop_def(StringAttr)
    target_fingerprint = prop_def(StringAttr)
    deployment_fingerprint = prop_def(StringAttr)

    assembly_format = "attr-dict"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, *, plan: str, portable_digest: str, policy_fingerprint: str, evidence_fingerprint: str,
                 target_fingerprint: str, deployment_fingerprint: str):
        super().__init__(properties={
            "plan": SymbolRefAttr(plan), "portable_digest": string(portable_digest),
            "policy_fingerprint": string(policy_fingerprint), "evidence_fingerprint": string(evidence_fingerprint),
            "target_fingerprint": string(target_fingerprint), "deployment_fingerprint": string(deployment_fingerprint)})


# --------------------------------------------------------------------------- digests
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f\x7f-\uffff]')


@lru_cache(maxsize=64)
def _type_text(t: Attribute) -> str:
    return str(t)


def _enc_type(t: Attribute) -> str:
    """``str(t)`` of a type, kept on the (immutable) type object outside its fields (hashing a type for the
    cache of equal types costs more than the lookup)."""
    d = t.__dict__
    text = d.get("_pp_text")
    if text is None:
        text = d["_pp_text"] = _type_text(t)
    return text


class _EncKind(dict[type, int]):
    """``kind[type(a)]``: which branch of :func:`_enc` encodes an attribute of that class (the first
    ``isinstance`` match in :func:`_enc`'s order), computed once per class."""

    ORDER = (StringAttr, IntegerAttr, FloatAttr, SymbolRefAttr, DenseArrayBase, ArrayAttr, DictionaryAttr,
             EnumAttribute)

    def __missing__(self, cls: type) -> int:
        kind = self[cls] = next((i for i, base in enumerate(self.ORDER) if issubclass(cls, base)), len(self.ORDER))
        return kind


_ENC_KIND = _EncKind()
_ENUM_TEXT: dict[tuple[type, object], str] = {}
"""``str(a)`` of an enum attribute by (class, member): it prints its class's name and its member alone."""


def _enc(a: Attribute) -> str:
    """Canonical text of one property value (fixed encoding per carrier; others via xDSL's printer)."""
    kind = _ENC_KIND[type(a)]
    if kind == 0:  # StringAttr
        return json.dumps(a.data) if _NEEDS_ESCAPE.search(a.data) else f'"{a.data}"'  # type: ignore[attr-defined]
    if kind == 1:  # IntegerAttr
        return f"{a.value.data}:{_enc_type(a.type)}"  # type: ignore[attr-defined]
    if kind == 2:  # FloatAttr
        return f"{a.value.data!r}:f"  # type: ignore[attr-defined]
    if kind == 3:  # SymbolRefAttr
        return "@" + ".".join([a.root_reference.data, *(r.data for r in a.nested_references.data)])  # type: ignore[attr-defined]
    if kind == 4:  # DenseArrayBase
        return f"array<{_enc_type(a.elt_type)}:{','.join(map(str, a.get_values()))}>"  # type: ignore[attr-defined]
    if kind == 5:  # ArrayAttr
        return "[" + ",".join([_enc(x) for x in a.data]) + "]"  # type: ignore[attr-defined]
    if kind == 6:  # DictionaryAttr
        return "{" + ",".join(f"{json.dumps(k)}={_enc(v)}" for k, v in sorted(a.data.items())) + "}"  # type: ignore[attr-defined]
    if kind == 7:  # EnumAttribute
        key = (type(a), a.data)  # type: ignore[attr-defined]
        text = _ENUM_TEXT.get(key)
        if text is None:
            text = _ENUM_TEXT[key] = str(a)
        return text
    return str(a)


def _props_text(o: Operation) -> str:
    """``name key=value ...`` of :func:`canonical_text` for one op, kept on the op while its property
    names and values are the same objects (attributes are immutable), so an unchanged plan re-encodes in
    linear time without re-printing its properties."""
    props = o.properties
    cached = o.__dict__.get("_pp_props_text")
    if cached is not None and len(cached[1]) == len(props) and all(map(is_, props.values(), cached[1])) \
            and cached[0] == tuple(props):
        return cached[2]
    text = o.name + " " + " ".join([f"{k}={_enc(props[k])}" for k in sorted(props)])
    o.__dict__["_pp_props_text"] = (tuple(props), tuple(props.values()), text)
    return text


def canonical_text(op: Operation) -> str:
    """The canonical printed form of ``op`` and everything nested in it.

    Rule: one line per op in pre-order: the op name, then each *property* as ``key=value``
    sorted by key, with a fixed encoding per carrier (strings JSON-quoted, integers with their
    width, floats by ``repr``, symbol refs, dense arrays, arrays and dictionaries recursively;
    any other attribute by xDSL's printer). Discardable attributes (``op.attributes``) are
    analysis annotations and are excluded, and so are locations; operands print as the
    pre-order number of their definition and results by type, so the digest covers the dataflow. Equal properties in equal order give equal text; the encoding is linear in the
    plan's size (xDSL's generic printer is ~50x slower on plans of thousands of ops).
    """
    lines = []
    ids: dict[SSAValue, int] = {}
    get = ids.get
    for o in op.walk():
        line = _props_text(o)
        operands = o._operands  # pyright: ignore[reportPrivateUsage]
        if operands:
            line += " (" + ",".join(["%" + str(get(v, -1)) for v in operands]) + ")"
        results = o.results
        if results:
            for r in results:
                ids[r] = len(ids)
            line += " -> " + ",".join([_enc_type(r.type) for r in results])
        lines.append(line)
    return "\n".join(lines) + "\n"


def fingerprint(op: Operation) -> str:
    """sha256 (hex) of :func:`canonical_text` of ``op``: identity of a binding or analysis op."""
    return hashlib.sha256(canonical_text(op).encode()).hexdigest()


def find_plan(module: ModuleOp) -> PlanOp:
    """The module's single ``pplan.plan``.

    Raises:
        ValueError: none, or more than one.
    """
    plans = [o for o in module.ops if isinstance(o, PlanOp)]
    if len(plans) != 1:
        raise ValueError(f"expected exactly one pplan.plan at module level, found {len(plans)}")
    return plans[0]


def portable_digest(module_or_plan: ModuleOp | PlanOp) -> str:
    """The portable digest: sha256 of the canonical print of the ``pplan.plan`` op (AB-G-2).

    Bindings, candidates and costed views are siblings of the plan, so they are outside what the
    digest covers; discardable attributes inside the plan are stripped (:func:`canonical_text`).
    """
    plan = module_or_plan if isinstance(module_or_plan, PlanOp) else find_plan(module_or_plan)
    return fingerprint(plan)


Pplan = Dialect(
    "pplan",
    [PlanOp, WeightOp, TableOp, KvOp, EdgeObjectOp, StepOp, StageOp, TaskOp, YieldOp, CandidatesOp, CostedViewOp,
     TargetBindingOp, DeploymentBindingOp, EvidencePolicyOp],
    [BufferType, TokenType, PortableOpAttr, StepAttr, EvidenceKindAttr, CostStatusAttr, CandidateAttr, CostAttr],
)
"""The PortablePlanIR dialect (plan, declarations, steps, stages, tasks), its analysis ops and the binding ops."""
