"""The ``vmachine`` dialect: the virtual target's replayable MachineIR (seeds/003 "Machine lowering and
artifact emission", AB-M-1).

A ``vmachine.program`` is what the runtime replays. It holds:

* ``vmachine.abi`` — the model kernel ABI the static kernel attributes come from (llama
  hyper-parameters and ``max_seq_len``); the runtime checks its model against it;
SSA dataflow (destination-passing): ``vmachine.buffer`` yields a ``!vmachine.buffer`` and ``vmachine.edge`` an
``!vmachine.edge`` at program level (so they dominate every stage); instructions take the buffers they read
and write and the edge as operands; ``vmachine.token`` (in a step, before its queues) yields the
``!vmachine.token`` its ``signal``/``wait`` take. String ids stay as properties of the defining ops; the
instructions' ``ins``/``outs``/``src``/``dst``/``edge``/``token`` accessors derive them from the operands.

* ``vmachine.buffer`` — every allocation of the concrete plan (same id, device, memory space, offset,
  size, lifetime) and the runtime *binding name* a stage program uses for it (``blk.0.attn_in``,
  ``blk.0.attn_q.weight``, ``blk.0.cache_k``, ``input``, ``output``, ...);
* ``vmachine.edge`` — edge objects between stages (or the orchestrator, index -1);
* ``vmachine.stage`` (one per pipeline stage: device, layer range) holding one ``vmachine.step`` per
  step (``prefill``, ``decode``; ``rows`` = rows the step's buffers hold), holding one
  ``vmachine.queue`` per engine the stage uses, holding instructions in queue order:

  - ``vmachine.kernel`` — ``writes = kernel(*reads, **attrs)`` over buffer values (flag ``start_pos``: it
    also takes the step's runtime position), the runtime kernel table's names;
  - ``vmachine.recv`` / ``vmachine.send`` — take / put the step's object on an edge;
  - ``vmachine.sample`` — greedy token (argmax of the last logits row);
  - ``vmachine.signal`` / ``vmachine.wait`` — the concrete plan's signal/wait edges (a ``vmachine.token``).

Every instruction carries ``id`` (unique in the program) and ``cmd``, the concrete command it lowers
(signal/wait: ``signal`` and ``wait`` commands). Lineage beyond the command id lives in the
detachable ``lineage.json`` of the replay package, not here.

Whole-program checks (unique buffer/edge/stage ids, edges between existing stages, buffers declared on the
stage's device, dataflow: nothing read before it is written in a step, signal/wait pairing and deadlock
freedom) are :func:`check_program`, which
``vmachine.program``'s verifier runs on parse (``[AB-M-1] ...`` at the offending instruction);
:func:`verify_machine` runs every verifier and its errors carry the full lineage path when a lineage map is given
(AB-D-1). :func:`linearize` gives the deterministic execution order of one stage step that the
replay runs (queue order plus signal/wait; ties: queue order in the step) — timing annotations
never influence it (AB-T-3).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pipeplan.dialects.carriers import (
    PropsInAttrDict,
    build_op,
    i64_of,
    scalar_attr,
    str_tuple,
    strings,
)
from pipeplan.dialects.diagnostics import IRVerifyError, PipeplanOp, value_name
from pipeplan.dialects.lifetimes import Lifetime, enum_interner
from pipeplan.dialects.pplan import Step
from pipeplan.errors import PipeplanError
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, FloatAttr, IntegerAttr, StringAttr, UnitAttr, f64
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import (
    Attribute,
    Dialect,
    Operation,
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
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import HasParent, NoTerminator
from xdsl.utils.exceptions import VerifyException

START_POS = "start_pos"
"""Operand name of the step's runtime position (not a buffer)."""

ENGINE_REVISION = "pipeplan-vmachine/1"
"""Revision of this MachineIR and its lowering (recorded in package manifests)."""


@dataclass(frozen=True)
class KernelSig:
    """Calling convention of one runtime kernel: ``reads`` buffers read, ``writes`` buffers written
    (``inplace``: written buffers are passed as inputs after the reads and nothing is returned),
    ``start_pos`` whether the position is the last input, ``attrs`` the static attribute names."""

    reads: int
    writes: int
    inplace: bool = False
    start_pos: bool = False
    attrs: tuple[str, ...] = ()


KERNEL_ABI: dict[str, KernelSig] = {
    "embedding_gather": KernelSig(2, 1),
    "rms_norm": KernelSig(2, 1, attrs=("eps",)),
    "head_rms_norm": KernelSig(2, 1, attrs=("eps", "n_heads", "head_dim")),
    "matmul": KernelSig(2, 1),
    "add_bias": KernelSig(2, 1),
    "rope": KernelSig(2, 1, start_pos=True, attrs=("n_heads", "head_dim", "rope_dim")),
    "kv_cache_write": KernelSig(2, 2, inplace=True, start_pos=True),
    "attention": KernelSig(3, 1, start_pos=True),
    "add": KernelSig(2, 1),
    "silu_mul": KernelSig(2, 1),
    "gelu_mul": KernelSig(2, 1),
    "last_row": KernelSig(1, 1, attrs=("if",)),
}
"""The virtual target's kernel ABI: the runtime reference kernels (``runtime/kernels/reference.py``)
with the calling convention of ``runtime/program.py`` (``KernelCall``). ``attrs`` are the required
static attributes; optional ones (``embedding_gather``'s ``scale``, ``rope``'s ``mode``,
``attention``'s ``scale``/``window``) appear only when not at their default."""

ABI_FIELDS = ("n_embd", "n_head", "n_head_kv", "n_ff", "n_vocab", "n_ctx", "rope_dim", "n_layer", "max_seq_len")

ABI_OPTIONAL: dict[str, str] = {"arch": "str", "n_embd_head_k": "int", "n_embd_head_v": "int", "rope_mode": "str",
                                "rope_base_swa": "float", "n_swa": "int", "swa_pattern": "int",
                                "attn_scale": "float", "embd_scale": "float"}
"""ABI fields beyond llama's (``models.stage_program.HParams``: architecture, key/value head dims, rope
mode, local rope base, sliding window and pattern, attention and embedding scales), present only when
they differ from llama's defaults; kind of each."""


class MachineVerifyError(PipeplanError):
    """A vmachine program that fails machine verification. ``path`` is the lineage path of the
    offending instruction (model op -> portable task -> candidate -> concrete command -> machine
    instruction) when known. ``code`` is ``machine_verify``."""

    code = "machine_verify"

    def __init__(self, message: str, *, path: str = "", where: str | None = None, op: Operation | None = None):
        super().__init__(message + (f" [lineage: {path}]" if path else ""), where=where)
        self.path = path
        self.op = op


# --------------------------------------------------------------------------- helpers
strs = str_tuple
"""The strings of an ``ArrayAttr`` of ``StringAttr`` (:func:`pipeplan.dialects.carriers.str_tuple`)."""

to_attr = scalar_attr
"""Kernel attribute carrier of a Python value (float -> f64, int -> i64, str -> string;
:func:`pipeplan.dialects.carriers.scalar_attr`). Raises ValueError for any other type."""

build = build_op
"""Create a vmachine op from properties (and a body for the region ops;
:func:`pipeplan.dialects.carriers.build_op`)."""


def attr_value(a: Attribute) -> Any:
    """Python value of a kernel attribute (f64 -> float, i64/i1 -> int, string -> str)."""
    if isinstance(a, FloatAttr):
        return float(a.value.data)
    if isinstance(a, IntegerAttr):
        return int(a.value.data)
    if isinstance(a, StringAttr):
        return a.data
    raise VerifyException(f"unsupported kernel attribute {a}")


def _body() -> Region:
    return region_def("single_block")


# --------------------------------------------------------------------------- ops
@irdl_op_definition
class ProgramOp(PipeplanOp):
    """A replayable virtual program lowered from one concrete plan.

    Properties: ``target`` (plugin revision), ``deployment``, ``concrete`` (concrete digest it was
    lowered from), ``portable`` (portable digest), ``binder``, ``engine`` (:data:`ENGINE_REVISION`).

    ```mlir
    vmachine.program attributes {target = "virtual-queue@1", deployment = "deployment:n0",
        concrete = "sha256:00", portable = "sha256:11", binder = "list-schedule",
        engine = "pipeplan-vmachine/1"} {
      vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64,
                    n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64,
                    max_seq_len = 64 : i64, rope_base = 1.0e+04 : f64, rms_eps = 1.0e-05 : f64,
                    tied_embedding = 0 : i64}
      vmachine.stage {index = 0 : i64, device = "n0", layer_start = 0 : i64, layer_end = 5 : i64} {
        vmachine.step decode attributes {rows = 1 : i64} {
          vmachine.queue {engine = "queue.compute"} {
          }
        }
      }
    }
    ```
    """

    name = "vmachine.program"
    irdl_options = (ParsePropInAttrDict(),)
    target = prop_def(StringAttr)
    deployment = prop_def(StringAttr)
    concrete = prop_def(StringAttr)
    portable = prop_def(StringAttr)
    binder = prop_def(StringAttr)
    engine = prop_def(StringAttr)
    body = _body()
    traits = traits_def(NoTerminator())
    assembly_format = "attr-dict-with-keyword $body"

    def verify_(self) -> None:
        abis = [o for o in self.body.block.ops if isinstance(o, AbiOp)]
        if len(abis) != 1:
            raise VerifyException(f"a vmachine.program needs exactly one vmachine.abi, found {len(abis)}")
        ids: set[str] = set()
        for o in self.body.block.ops:
            if not isinstance(o, AbiOp | BufferOp | EdgeOp | TokenOp | StageOp):
                raise IRVerifyError(f"unexpected op '{o.name}' in a vmachine.program body", op=o)
        for o in self.walk():
            if isinstance(o, INSTRUCTIONS):
                i = o.id.data  # type: ignore[attr-defined]
                if i in ids:
                    raise IRVerifyError(f"duplicate instruction id '{i}'", op=o)
                ids.add(i)
        try:
            check_program(self)
        except MachineVerifyError as e:
            raise IRVerifyError(f"{MACHINE_INVARIANT}: {e.message}", op=e.op or self) from None


@irdl_op_definition
class AbiOp(PropsInAttrDict):
    """The model kernel ABI: the model's hyper-parameters (``models.stage_program.HParams``) and the
    positions the KV cache holds. All sizes must be positive. Inside a ``vmachine.program`` it states
    the ABI the program was lowered for; at module level, next to a ``cplan.plan``, it is the explicit
    ABI input of ``convert-cplan-to-vmachine``. The optional fields (:data:`ABI_OPTIONAL`: ``arch``,
    ``n_embd_head_k``, ``rope_mode``, ``n_swa``, ...) are present only for models that are not llama-shaped.

    ```mlir
    vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64,
                  n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64,
                  max_seq_len = 64 : i64, rope_base = 1.0e+04 : f64, rms_eps = 1.0e-05 : f64,
                  tied_embedding = 0 : i64}
    ```
    """

    name = "vmachine.abi"
    n_embd = prop_def(IntegerAttr)
    n_head = prop_def(IntegerAttr)
    n_head_kv = prop_def(IntegerAttr)
    n_ff = prop_def(IntegerAttr)
    n_vocab = prop_def(IntegerAttr)
    n_ctx = prop_def(IntegerAttr)
    rope_dim = prop_def(IntegerAttr)
    n_layer = prop_def(IntegerAttr)
    max_seq_len = prop_def(IntegerAttr)
    rope_base = prop_def(FloatAttr)
    rms_eps = prop_def(FloatAttr)
    tied_embedding = prop_def(IntegerAttr)
    arch = opt_prop_def(StringAttr)
    n_embd_head_k = opt_prop_def(IntegerAttr)
    n_embd_head_v = opt_prop_def(IntegerAttr)
    rope_mode = opt_prop_def(StringAttr)
    rope_base_swa = opt_prop_def(FloatAttr)
    n_swa = opt_prop_def(IntegerAttr)
    swa_pattern = opt_prop_def(IntegerAttr)
    attn_scale = opt_prop_def(FloatAttr)
    embd_scale = opt_prop_def(FloatAttr)

    def verify_(self) -> None:
        for f in ABI_FIELDS:
            v = getattr(self, f).value.data
            if v < 1:
                raise VerifyException(f"vmachine.abi: {f} must be positive, got {v}")
        for f in ("n_embd_head_k", "n_embd_head_v", "n_swa", "swa_pattern"):
            a = getattr(self, f)
            if a is not None and a.value.data < 0:
                raise VerifyException(f"vmachine.abi: {f} must be >= 0, got {a.value.data}")


@irdl_attr_definition
class BufferType(ParametrizedAttribute, TypeAttribute):
    """``!vmachine.buffer``: one allocation of the program, defined by ``vmachine.buffer`` (program level,
    so it dominates every stage) and taken by the instructions that read or write it."""

    name = "vmachine.buffer"


@irdl_attr_definition
class EdgeType(ParametrizedAttribute, TypeAttribute):
    """``!vmachine.edge``: an edge object between stages, defined by ``vmachine.edge``; taken by
    ``vmachine.recv``/``vmachine.send``."""

    name = "vmachine.edge"


@irdl_attr_definition
class TokenType(ParametrizedAttribute, TypeAttribute):
    """``!vmachine.token``: a signal/wait token of one step, defined by ``vmachine.token``; taken by
    ``vmachine.signal`` and ``vmachine.wait``."""

    name = "vmachine.token"


def buffer_id(v: SSAValue) -> str:
    """The id of the ``vmachine.buffer`` defining ``v``; for a value defined elsewhere, its SSA name
    (``%b.ghost``), which the program's verifier then rejects as undeclared."""
    o = v.owner
    return o.id.data if isinstance(o, BufferOp) else _foreign(v)


def _foreign(v: SSAValue) -> str:
    """``%name`` of a value no op of this dialect defines (``%?`` when it has no name)."""
    return f"%{v.name_hint or '?'}"


def _ids(vs: Sequence[SSAValue]) -> tuple[str, ...]:
    return tuple(buffer_id(v) for v in vs)


@irdl_attr_definition
class LifetimeAttr(EnumAttribute[Lifetime], SpacedOpaqueSyntaxAttribute):
    """``#vmachine<lifetime transient>``: a ``vmachine.buffer``'s lifetime class (printed bare in its syntax)."""

    name = "vmachine.lifetime"


lifetime_attr = enum_interner(LifetimeAttr)
"""lifetime name -> the (interned) :class:`LifetimeAttr`; ValueError for a name that is not a
:class:`~pipeplan.dialects.lifetimes.Lifetime`."""


@irdl_attr_definition
class StepAttr(EnumAttribute[Step], SpacedOpaqueSyntaxAttribute):
    """``#vmachine<step decode>``: the plan step (:class:`~pipeplan.dialects.pplan.Step`) a ``vmachine.step``
    runs or a ``vmachine.buffer`` belongs to (printed bare in their syntax)."""

    name = "vmachine.step"


step_attr = enum_interner(StepAttr)
"""step name -> the (interned) :class:`StepAttr`; ValueError for a name that is not a step."""


@irdl_op_definition
class BufferOp(PipeplanOp):
    """One allocation of the concrete plan and the runtime binding name a stage program uses for it;
    yields the ``!vmachine.buffer`` value instructions take; ``lifetime`` (:class:`LifetimeAttr`) follows the id.

    ``stage``/``step`` (:class:`StepAttr`) say whose program binds it (no ``step`` for persistent buffers:
    weights, KV cache; ``stage = -1`` for edge objects). ``offset`` is a multiple of ``alignment``.

    ```mlir
    %blk.0.attn_in = vmachine.buffer "alloc.decode.s0.blk.0.attn_in" transient step decode {
        name = "blk.0.attn_in", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64,
        size = 256 : i64, alignment = 64 : i64}
    ```
    """

    name = "vmachine.buffer"
    irdl_options = (ParsePropInAttrDict(),)
    id = prop_def(StringAttr)
    name_ = prop_def(StringAttr, prop_name="name")
    stage = prop_def(IntegerAttr)
    step = opt_prop_def(StepAttr)
    device = prop_def(StringAttr)
    space = prop_def(StringAttr)
    offset = prop_def(IntegerAttr)
    size = prop_def(IntegerAttr)
    alignment = prop_def(IntegerAttr)
    lifetime = prop_def(LifetimeAttr)
    result = result_def(BufferType)
    traits = traits_def(HasParent(ProgramOp))
    assembly_format = "$id $lifetime (`step` $step^)? attr-dict"

    def result_name(self) -> str | None:
        """``%<id>`` without its ``alloc.`` prefix."""
        return value_name(self.id.data.removeprefix("alloc."))

    @property
    def step_name(self) -> str:
        """The step it belongs to, ``""`` for a persistent buffer."""
        return "" if self.step is None else self.step.data.value

    def verify_(self) -> None:
        off, size, al = self.offset.value.data, self.size.value.data, self.alignment.value.data
        if al < 1 or al & (al - 1) or off < 0 or size < 0 or off % al:
            raise VerifyException(f"buffer '{self.id.data}': offset {off} / size {size} / alignment {al} invalid")


@irdl_op_definition
class EdgeOp(PipeplanOp):
    """An edge object between stages: ``producer``/``consumer`` stage indices (-1: orchestrator), the
    operand its allocation, ``link`` the link a transfer uses ("" none); yields the ``!vmachine.edge``
    value recv/send take. ``buffer`` is the allocation's id.

    ```mlir
    %e1 = vmachine.edge "e1" %edge.e1 {producer = 0 : i64, consumer = 1 : i64, link = "link.n0.n1"}
    ```
    """

    name = "vmachine.edge"
    irdl_options = (ParsePropInAttrDict(),)
    id = prop_def(StringAttr)
    allocation = operand_def(BufferType)
    producer = prop_def(IntegerAttr)
    consumer = prop_def(IntegerAttr)
    link = prop_def(StringAttr)
    result = result_def(EdgeType)
    traits = traits_def(HasParent(ProgramOp))
    assembly_format = "$id $allocation attr-dict"

    def result_name(self) -> str | None:
        """``%<id>``."""
        return value_name(self.id.data)

    @property
    def buffer(self) -> StringAttr:
        """Id of the edge object's allocation."""
        return StringAttr(buffer_id(self.allocation))


def edge_id(v: SSAValue) -> str:
    """The id of the ``vmachine.edge`` defining ``v``; for a value defined elsewhere, its SSA name."""
    o = v.owner
    return o.id.data if isinstance(o, EdgeOp) else _foreign(v)


@irdl_op_definition
class StageOp(PipeplanOp):
    """The program of one pipeline stage on ``device`` owning blocks ``[layer_start, layer_end)``.

    ```mlir
    vmachine.stage {index = 1 : i64, device = "n1", layer_start = 2 : i64, layer_end = 4 : i64} {
    }
    ```
    """

    name = "vmachine.stage"
    irdl_options = (ParsePropInAttrDict(),)
    index = prop_def(IntegerAttr)
    device = prop_def(StringAttr)
    layer_start = prop_def(IntegerAttr)
    layer_end = prop_def(IntegerAttr)
    body = _body()
    traits = traits_def(NoTerminator(), HasParent(ProgramOp))
    assembly_format = "attr-dict-with-keyword $body"

    def verify_(self) -> None:
        if self.layer_end.value.data < self.layer_start.value.data:
            raise VerifyException(f"stage {self.index.value.data}: layer range is reversed")
        names = []
        for o in self.body.block.ops:
            if not isinstance(o, StepOp):
                raise IRVerifyError(f"vmachine.stage may hold only vmachine.step ops, found '{o.name}'", op=o)
            if o.step_name in names:
                raise IRVerifyError(f"stage {self.index.value.data}: duplicate step name '{o.step_name}'", op=o)
            names.append(o.step_name)


@irdl_op_definition
class StepOp(PipeplanOp):
    """The instructions of one step (``prefill``, ``decode``) of a stage: its ``vmachine.token`` ops, then
    its queues; ``rows`` is the most rows (tokens) its buffers hold.

    ```mlir
    vmachine.step prefill attributes {rows = 8 : i64} {
      %sync.0 = vmachine.token "sync.0" {signal = "c0", wait = "c1"}
      vmachine.queue attributes {engine = "queue.compute"} {
      }
    }
    ```
    """

    name = "vmachine.step"
    irdl_options = (ParsePropInAttrDict(),)
    step = prop_def(StepAttr, prop_name="name")
    rows = prop_def(IntegerAttr)
    body = _body()
    traits = traits_def(NoTerminator(), HasParent(StageOp))
    assembly_format = "$name attr-dict-with-keyword $body"

    @property
    def step_name(self) -> str:
        """``prefill`` or ``decode``."""
        return self.step.data.value

    def verify_(self) -> None:
        if self.rows.value.data < 1:
            raise VerifyException(f"step '{self.step_name}': rows must be >= 1")
        queued = False
        for o in self.body.block.ops:
            if isinstance(o, TokenOp) and not queued:
                continue
            if not isinstance(o, QueueOp):
                raise IRVerifyError(f"vmachine.step may hold only vmachine.token ops then vmachine.queue ops, "
                                    f"found '{o.name}'", op=o)
            queued = True


@irdl_op_definition
class QueueOp(PipeplanOp):
    """An in-order queue (an engine of the stage's device): its instructions run in order.

    ```mlir
    vmachine.queue attributes {engine = "queue.copy"} {
      vmachine.recv "i0" %e0 -> %decode.s0.input {cmd = "cmd.decode.s0.recv.e0"}
    }
    ```
    """

    name = "vmachine.queue"
    irdl_options = (ParsePropInAttrDict(),)
    engine = prop_def(StringAttr)
    body = _body()
    traits = traits_def(NoTerminator(), HasParent(StepOp))
    assembly_format = "attr-dict-with-keyword $body"

    def verify_(self) -> None:
        for o in self.body.block.ops:
            if not isinstance(o, INSTRUCTIONS):
                raise IRVerifyError(f"vmachine.queue may hold only instructions, found '{o.name}'", op=o)


@irdl_op_definition
class TokenOp(PipeplanOp):
    """A signal/wait token of the step (the concrete signal/wait edge ``signal`` -> ``wait``, command ids);
    yields the ``!vmachine.token`` that one ``vmachine.signal`` and the ``vmachine.wait`` ops take. Placed in
    the step before its queues when both are in that step; at program level (before the stages) when the
    signal and the wait are in different stages, so it dominates both.

    ```mlir
    %sync.0 = vmachine.token "sync.0" {signal = "cmd.decode.s0.recv.e0", wait = "cmd.decode.s0.embedding_gather.token_embd"}
    ```
    """

    name = "vmachine.token"
    irdl_options = (ParsePropInAttrDict(),)
    id = prop_def(StringAttr)
    signal = prop_def(StringAttr)
    wait = prop_def(StringAttr)
    result = result_def(TokenType)
    traits = traits_def(HasParent(StepOp, ProgramOp))
    assembly_format = "$id attr-dict"

    def result_name(self) -> str | None:
        """``%<id>``."""
        return value_name(self.id.data)


@irdl_op_definition
class KernelOp(PropsInAttrDict):
    """``writes = kernel(*reads, **attrs)``: ``kernel`` from :data:`KERNEL_ABI`; ``reads``/``writes`` the
    buffers it reads and writes (destination-passing); ``start_pos`` marks a kernel that also takes the
    step's runtime position; ``block`` the GGUF block (-1 none). ``ins``/``outs`` give the runtime calling
    convention as buffer ids (in-place writes passed after the reads, then ``"start_pos"``).

    ```mlir
    vmachine.kernel "i3" "rms_norm" (%decode.s0.h0, %s0.w.blk.0.attn_norm.weight) -> (%decode.s0.blk.0.attn_in)
        {cmd = "cmd.decode.s0.b0.rms_norm.attn_norm", attrs = {eps = 1.0e-05 : f64}, block = 0 : i64}
    ```
    """

    name = "vmachine.kernel"
    irdl_options = (ParsePropInAttrDict(), AttrSizedOperandSegments(as_property=True))
    KEYWORD_DICTS: ClassVar[tuple[str, ...]] = ("attrs",)
    id = prop_def(StringAttr)
    cmd = prop_def(StringAttr)
    kernel = prop_def(StringAttr)
    reads = var_operand_def(BufferType)
    writes = var_operand_def(BufferType)
    start_pos = opt_prop_def(UnitAttr)
    attrs = prop_def(DictionaryAttr)
    block = prop_def(IntegerAttr)
    traits = traits_def(HasParent(QueueOp))
    assembly_format = ("$id $kernel ` ` `(` $reads `)` `->` `(` $writes `)` (`start_pos` $start_pos^)? "
                       "attr-dict")

    @property
    def ins(self) -> ArrayAttr:
        """The runtime call's inputs (buffer ids): reads, in-place writes, ``"start_pos"``."""
        sig = KERNEL_ABI.get(self.kernel.data)
        ids = _ids(self.reads) + (_ids(self.writes) if sig is not None and sig.inplace else ())
        return strings(ids + ((START_POS,) if self.start_pos is not None else ()))

    @property
    def outs(self) -> ArrayAttr:
        """The runtime call's outputs (buffer ids; none for an in-place kernel)."""
        sig = KERNEL_ABI.get(self.kernel.data)
        return strings(() if sig is not None and sig.inplace else _ids(self.writes))

    def verify_(self) -> None:
        k = self.kernel.data
        where = f"instruction '{self.id.data}' (command '{self.cmd.data}')"
        sig = KERNEL_ABI.get(k)
        if sig is None:
            raise VerifyException(f"{where}: kernel '{k}' is not in the virtual target's kernel ABI")
        n_in = sig.reads + (sig.writes if sig.inplace else 0) + (1 if sig.start_pos else 0)
        n_out = 0 if sig.inplace else sig.writes
        n_r, n_w = len(self.reads), len(self.writes)
        got_in = n_r + (n_w if sig.inplace else 0) + (1 if self.start_pos is not None else 0)
        got_out = 0 if sig.inplace else n_w
        if n_r != sig.reads or n_w != sig.writes:
            raise VerifyException(f"{where}: kernel '{k}' takes {n_in} inputs and {n_out} outputs, got "
                                  f"{got_in} and {got_out}")
        if sig.start_pos != (self.start_pos is not None):
            raise VerifyException(f"{where}: kernel '{k}' takes '{START_POS}' as its last input"
                                  if sig.start_pos else f"{where}: kernel '{k}' takes no '{START_POS}'")
        missing = set(sig.attrs) - set(self.attrs.data)
        if missing:
            raise VerifyException(f"{where}: kernel '{k}' needs attributes {sorted(missing)}")


@irdl_op_definition
class RecvOp(PropsInAttrDict):
    """Take the step's object from edge ``channel`` into buffer ``target`` (``edge``/``dst``: their ids).

    ```mlir
    vmachine.recv "i0" %e1 -> %decode.s1.input {cmd = "cmd.decode.s1.recv.e1"}
    ```
    """

    name = "vmachine.recv"
    id = prop_def(StringAttr)
    cmd = prop_def(StringAttr)
    channel = operand_def(EdgeType)
    target = operand_def(BufferType)
    traits = traits_def(HasParent(QueueOp))
    assembly_format = "$id $channel `->` $target attr-dict"

    @property
    def edge(self) -> StringAttr:
        return StringAttr(edge_id(self.channel))

    @property
    def dst(self) -> StringAttr:
        return StringAttr(buffer_id(self.target))


@irdl_op_definition
class SendOp(PropsInAttrDict):
    """Put buffer ``source`` as the step's object on edge ``channel`` (``src``/``edge``: their ids).

    ```mlir
    vmachine.send "i9" %decode.s0.output -> %e1 {cmd = "cmd.decode.s0.send.e1"}
    ```
    """

    name = "vmachine.send"
    id = prop_def(StringAttr)
    cmd = prop_def(StringAttr)
    source = operand_def(BufferType)
    channel = operand_def(EdgeType)
    traits = traits_def(HasParent(QueueOp))
    assembly_format = "$id $source `->` $channel attr-dict"

    @property
    def edge(self) -> StringAttr:
        return StringAttr(edge_id(self.channel))

    @property
    def src(self) -> StringAttr:
        return StringAttr(buffer_id(self.source))


@irdl_op_definition
class SampleOp(PropsInAttrDict):
    """Greedy sampling: ``target`` = argmax of the last row of logits ``source`` (llama.cpp greedy;
    ``src``/``dst``: their ids).

    ```mlir
    vmachine.sample "i8" %decode.s2.output -> %decode.s2.token {cmd = "cmd.decode.s2.argmax.token"}
    ```
    """

    name = "vmachine.sample"
    id = prop_def(StringAttr)
    cmd = prop_def(StringAttr)
    source = operand_def(BufferType)
    target = operand_def(BufferType)
    traits = traits_def(HasParent(QueueOp))
    assembly_format = "$id $source `->` $target attr-dict"

    @property
    def src(self) -> StringAttr:
        return StringAttr(buffer_id(self.source))

    @property
    def dst(self) -> StringAttr:
        return StringAttr(buffer_id(self.target))


class _SyncOp(PropsInAttrDict):
    """Signal/wait on a step's ``vmachine.token``: ``token`` its id, ``signal``/``wait`` its commands."""

    @property
    def _tok(self) -> TokenOp | None:
        o = self.event.owner  # type: ignore[attr-defined]
        return o if isinstance(o, TokenOp) else None

    @property
    def token(self) -> StringAttr:
        t = self._tok
        return t.id if t is not None else StringAttr("")

    @property
    def signal(self) -> StringAttr:
        t = self._tok
        return t.signal if t is not None else StringAttr("")

    @property
    def wait(self) -> StringAttr:
        t = self._tok
        return t.wait if t is not None else StringAttr("")


@irdl_op_definition
class SignalOp(_SyncOp):
    """Signal token ``event`` after the previous instruction of this queue completed.

    ```mlir
    vmachine.signal "i2" %sync.0
    ```
    """

    name = "vmachine.signal"
    id = prop_def(StringAttr)
    event = operand_def(TokenType)
    traits = traits_def(HasParent(QueueOp))
    assembly_format = "$id $event attr-dict"


@irdl_op_definition
class WaitOp(_SyncOp):
    """Block this queue until token ``event`` is signalled.

    ```mlir
    vmachine.wait "i3" %sync.0
    ```
    """

    name = "vmachine.wait"
    id = prop_def(StringAttr)
    event = operand_def(TokenType)
    traits = traits_def(HasParent(QueueOp))
    assembly_format = "$id $event attr-dict"


INSTRUCTIONS = (KernelOp, RecvOp, SendOp, SampleOp, SignalOp, WaitOp)

Vmachine = Dialect(
    "vmachine",
    [ProgramOp, AbiOp, BufferOp, EdgeOp, StageOp, StepOp, TokenOp, QueueOp, KernelOp, RecvOp, SendOp, SampleOp,
     SignalOp, WaitOp],
    [BufferType, EdgeType, TokenType, LifetimeAttr, StepAttr],
)


# --------------------------------------------------------------------------- reading
def instruction_cmd(o: Operation) -> str:
    """The concrete command an instruction lowers (for signal: its signal, for wait: its wait command)."""
    if isinstance(o, SignalOp):
        return o.signal.data
    if isinstance(o, WaitOp):
        return o.wait.data
    return o.cmd.data  # type: ignore[attr-defined]


def abi_of(program: ProgramOp) -> dict[str, Any]:
    """The ABI op's values as a dict (ints and floats)."""
    a = next(o for o in program.body.block.ops if isinstance(o, AbiOp))
    out: dict[str, Any] = {f: getattr(a, f).value.data for f in ABI_FIELDS}
    out.update(rope_base=a.rope_base.value.data, rms_eps=a.rms_eps.value.data,
               tied_embedding=bool(a.tied_embedding.value.data))
    for f, kind in ABI_OPTIONAL.items():
        v = getattr(a, f)
        if v is not None:
            out[f] = v.data if kind == "str" else (float(v.value.data) if kind == "float" else int(v.value.data))
    return out


def abi_op(values: Mapping[str, Any]) -> AbiOp:
    """Build a ``vmachine.abi`` from a dict with :data:`ABI_FIELDS`, ``rope_base``, ``rms_eps``,
    ``tied_embedding`` and any of :data:`ABI_OPTIONAL`."""
    props: dict[str, Attribute] = {f: i64_of(values[f]) for f in ABI_FIELDS}
    props.update(rope_base=FloatAttr(float(values["rope_base"]), f64), rms_eps=FloatAttr(float(values["rms_eps"]), f64),
                 tied_embedding=i64_of(1 if values["tied_embedding"] else 0))
    for f, kind in ABI_OPTIONAL.items():
        if f in values:
            v = values[f]
            props[f] = StringAttr(str(v)) if kind == "str" else (
                FloatAttr(float(v), f64) if kind == "float" else i64_of(int(v)))
    return AbiOp.create(properties=props)


def linearize(step: StepOp, lineage: Mapping[str, str] | None = None) -> list[Operation]:
    """The execution order of one stage step: instructions in queue order, a ``wait`` only after its
    ``signal`` when that signal is in this step (signals of other stages are satisfied by the
    pipeline order), ties by queue position in the step. Never reads timing annotations.

    Raises MachineVerifyError: the queues deadlock (a wait whose signal can never run first).
    """
    queues = [list(q.body.block.ops) for q in step.body.block.ops if isinstance(q, QueueOp)]
    local = {o.token.data for q in queues for o in q if isinstance(o, SignalOp)}
    signalled: set[str] = set()
    pos = [0] * len(queues)
    out: list[Operation] = []
    total = sum(len(q) for q in queues)
    while len(out) < total:
        progressed = False
        for qi, q in enumerate(queues):
            while pos[qi] < len(q):
                o = q[pos[qi]]
                if isinstance(o, WaitOp) and o.token.data in local and o.token.data not in signalled:
                    break
                if isinstance(o, SignalOp):
                    signalled.add(o.token.data)
                out.append(o)
                pos[qi] += 1
                progressed = True
                if isinstance(o, SignalOp):
                    break  # let a waiting earlier queue go first
            if progressed:
                break
        if not progressed:
            stuck = [q[pos[qi]] for qi, q in enumerate(queues) if pos[qi] < len(q)]
            o = stuck[0]
            raise MachineVerifyError(
                f"step '{step.step_name}': queues deadlock: instruction '{o.id.data}' waits for token "  # type: ignore[attr-defined]
                f"'{o.token.data}' that no runnable instruction signals",  # type: ignore[attr-defined]
                path=(lineage or {}).get(o.id.data, ""), where=o.id.data, op=o)  # type: ignore[attr-defined]
    return out


MACHINE_INVARIANT = "[AB-M-1] a machine program must respect its dataflow and kernel ABI"
"""Prefix of the on-parse message of a :func:`check_program` failure (contract ID and invariant)."""


def verify_machine(program: ProgramOp, lineage: Mapping[str, str] | None = None) -> None:
    """Machine verification of a whole program: the op verifiers, which include :func:`check_program`
    (``vmachine.program``'s verifier runs it on parse). ``lineage`` maps instruction id -> lineage path,
    included in the error of a failing instruction (AB-D-1).

    Raises MachineVerifyError (``op``: the offending op)."""
    lineage = lineage or {}
    try:
        program.verify()
    except VerifyException as err:
        op = getattr(err, "op", None)
        iid = op.id.data if isinstance(op, INSTRUCTIONS) else None
        raise MachineVerifyError(f"vmachine verifier: {str(err).splitlines()[0]}",
                                 path=lineage.get(iid, "") if iid else "", where=iid, op=op) from None


def check_program(program: ProgramOp, lineage: Mapping[str, str] | None = None) -> None:
    """The whole-program checks of machine verification (module docstring); the program's ops passed
    their own verifiers. ``lineage`` maps instruction id -> lineage path, included in every error (AB-D-1).

    Checks: buffer, edge and stage ids are unique; an edge's producer and consumer are stages of the program
    (or -1, the orchestrator); every buffer an instruction names is declared, on the stage's device and
    bound by that stage (or an edge); every edge named exists and is produced/consumed by the stage
    that sends/receives it; per stage step, in :func:`linearize` order, nothing is read before it
    is written (persistent buffers and ``start_pos`` are defined); every wait token has exactly one
    signal; a wait on another stage's signal names an earlier stage.

    Raises MachineVerifyError (``op``: the offending instruction).
    """
    lineage = lineage or {}
    bufs: dict[str, BufferOp] = {}
    edges: dict[str, EdgeOp] = {}
    stages: dict[int, StageOp] = {}
    for o in program.body.block.ops:
        if isinstance(o, BufferOp):
            if o.id.data in bufs:
                raise MachineVerifyError(f"buffer id '{o.id.data}' is declared twice", op=o)
            bufs[o.id.data] = o
        elif isinstance(o, EdgeOp):
            if o.id.data in edges:
                raise MachineVerifyError(f"edge id '{o.id.data}' is declared twice", op=o)
            edges[o.id.data] = o
        elif isinstance(o, StageOp):
            if o.index.value.data in stages:
                raise MachineVerifyError(f"stage {o.index.value.data} is declared twice", op=o)
            stages[o.index.value.data] = o
    for edge in edges.values():
        for end, v in (("producer", edge.producer.value.data), ("consumer", edge.consumer.value.data)):
            if v != -1 and v not in stages:
                raise MachineVerifyError(f"edge '{edge.id.data}': {end} {v} is neither a stage of the program nor "
                                         f"-1 (the orchestrator)", op=edge)
    sig_stage: dict[str, list[int]] = {}
    sig_ops: dict[str, list[SignalOp]] = {}
    for st in program.body.block.ops:
        if isinstance(st, StageOp):
            for o in st.walk():
                if isinstance(o, SignalOp):
                    sig_stage.setdefault(o.token.data, []).append(st.index.value.data)
                    sig_ops.setdefault(o.token.data, []).append(o)
    for tok, ss in sig_stage.items():
        if len(ss) != 1:
            raise MachineVerifyError(f"token '{tok}' is signalled {len(ss)} times", op=sig_ops[tok][-1])

    def fail(o: Operation, what: str) -> MachineVerifyError:
        i = o.id.data  # type: ignore[attr-defined]
        return MachineVerifyError(f"instruction '{i}' (command '{instruction_cmd(o)}'): {what}",
                                  path=lineage.get(i, ""), where=i, op=o)

    persistent: dict[int, set[str]] = {}  # per stage: its buffers bound for every step, and start_pos
    for b, o in bufs.items():
        if o.step is None:
            persistent.setdefault(o.stage.value.data, {START_POS}).add(b)
    for st in program.body.block.ops:
        if not isinstance(st, StageOp):
            continue
        s, dev = st.index.value.data, st.device.data
        for step in st.body.block.ops:
            assert isinstance(step, StepOp)
            name = step.step_name
            defined = set(persistent.get(s, {START_POS}))

            def check_buf(o: Operation, b: str, step_name: str = name, stage: int = s, device: str = dev) -> None:
                if b == START_POS:
                    return
                x = bufs.get(b)
                if x is None:
                    raise fail(o, f"names buffer '{b}' that the program does not declare")
                if x.device.data != device:
                    raise fail(o, f"buffer '{b}' is on device '{x.device.data}', not the stage's '{device}'")
                if x.stage.value.data != stage or x.step_name not in ("", step_name):
                    raise fail(o, f"buffer '{b}' belongs to stage {x.stage.value.data} step '{x.step_name}'")

            for o in linearize(step, lineage):
                if isinstance(o, KernelOp):
                    sig = KERNEL_ABI[o.kernel.data]
                    ins = strs(o.ins)
                    for b in ins:
                        check_buf(o, b)
                        if b not in defined:
                            raise fail(o, f"kernel '{o.kernel.data}' reads buffer '{b}' before it is written in "
                                          f"step '{name}'")
                    for b in strs(o.outs):
                        check_buf(o, b)
                        defined.add(b)
                    if sig.inplace:
                        defined.update(ins[sig.reads:sig.reads + sig.writes])
                elif isinstance(o, RecvOp | SendOp):
                    e = edges.get(o.edge.data)
                    if e is None:
                        raise fail(o, f"uses edge '{o.edge.data}' that the program does not declare")
                    if isinstance(o, RecvOp):
                        if e.consumer.value.data != s:
                            raise fail(o, f"receives on edge '{o.edge.data}' whose consumer is stage "
                                          f"{e.consumer.value.data}")
                        check_buf(o, o.dst.data)
                        defined.add(o.dst.data)
                    else:
                        if e.producer.value.data != s:
                            raise fail(o, f"sends on edge '{o.edge.data}' whose producer is stage "
                                          f"{e.producer.value.data}")
                        check_buf(o, o.src.data)
                        if o.src.data not in defined:
                            raise fail(o, f"sends buffer '{o.src.data}' before it is written in step '{name}'")
                elif isinstance(o, SampleOp):
                    check_buf(o, o.src.data)
                    if o.src.data not in defined:
                        raise fail(o, f"samples buffer '{o.src.data}' before it is written in step '{name}'")
                    check_buf(o, o.dst.data)
                    defined.add(o.dst.data)
                elif isinstance(o, WaitOp):
                    signallers = sig_stage.get(o.token.data)
                    if not signallers:
                        raise fail(o, f"waits for token '{o.token.data}' that nothing signals")
                    if signallers[0] > s:
                        raise fail(o, f"waits for token '{o.token.data}' signalled by later stage {signallers[0]}")


__all__ = [
    "ABI_FIELDS", "ENGINE_REVISION", "INSTRUCTIONS", "KERNEL_ABI", "START_POS", "AbiOp", "BufferOp", "EdgeOp",
    "BufferType", "EdgeType", "KernelOp", "KernelSig", "TokenOp", "TokenType", "buffer_id", "edge_id", "MachineVerifyError", "ProgramOp", "QueueOp", "RecvOp", "SampleOp", "SendOp", "SignalOp",
    "StageOp", "StepAttr", "StepOp", "Vmachine", "WaitOp", "abi_of", "abi_op", "attr_value", "build", "check_program", "instruction_cmd",
    "linearize", "strs", "to_attr", "verify_machine",
]
