"""The ``cplan`` dialect: the concrete plan IR (seeds/003 "Joint scheduling and memory planning").

A ``cplan.plan`` is one authoritative concrete plan bound to a target, a deployment and an evidence
policy. Its common core holds:

* ``cplan.device`` / ``cplan.link``: the deployment resources (per-memory-space capacity in bytes,
  engines with their slot counts, links with their per-transfer byte capacity);
* ``cplan.alloc``: buffer allocations (source portable buffer, device, memory space, byte offset,
  size, alignment, lifetime class ``weight | kv | transient | edge``), each yielding a ``!cplan.alloc``;
* ``cplan.command``: commands (portable task, operation, implementation, placement on a device and
  engine, lineage, cost used) taking the ``!cplan.alloc`` values they read and write and the
  ``!cplan.timepoint`` of each dependency, and yielding their own ``!cplan.timepoint`` (IREE stream's
  resources + timepoints);
* ``cplan.sync``: explicit signal/wait edges between two timepoints (``signal`` completes before
  ``wait`` starts);

and exactly one typed target extension, as the last op of the plan body:

* ``cplan.queue_schedule`` holding ``cplan.queue`` ops (per-queue order of timepoints), or
* ``cplan.slot_dataflow`` holding ``cplan.slot`` and ``cplan.fire`` ops (slots and firing rules over
  timepoints, no queues).

The op verifiers check what one op (or one extension) can check alone; ``cplan.plan``'s verifier then
checks the seven whole-plan construction invariants (AB-S-1..7,
:mod:`pipeplan.dialects.cplan_invariants`, reading the ops) on parse and reports the first violation at
the op it concerns (``[AB-S-n] <invariant> (<code>): ...``). The ``cplan-verify`` pass
(:mod:`pipeplan.transforms.cplan_verify`) lists every violation and adds the commit gate, which needs
the portable source. The op is the plan: binders write their decisions with :func:`build_plan` (from the
small decision records of :mod:`pipeplan.dialects.cplan_types`), and every reader reads the ops.

Every reference to an allocation or a command is an SSA use, so references are closed by construction;
a dependency on a later command (a forward use) is how a cycle can be written, and the verifier finds it.
Command and alloc ids stay as names (lineage, vmachine ``cmd``/buffer names); device, engine, link and
slot ids are names from outside (``StringAttr``). The accessors ``CommandOp.reads/writes/deps``,
``QueueOp.order``, ``SlotOp.commands`` and ``FireOp.command`` give the ids of the operands.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import TypeVar

from pipeplan.dialects.carriers import PropsInAttrDict, build_op, i64_attr, string
from pipeplan.dialects.costs import CostStatus, EvidenceKind
from pipeplan.dialects.cplan_invariants import core_violations
from pipeplan.dialects.cplan_types import (  # noqa: F401  (re-exported: the dialect's vocabularies and records)
    BINDERS,
    COST_STATUSES,
    EVIDENCE_KINDS,
    LIFETIMES,
    PERSISTENT_LIFETIMES,
    RISK_POLICIES,
    Alloc,
    Command,
    CplanError,
    Device,
    Fire,
    Lineage,
    Link,
    Queue,
    QueueSchedule,
    Slot,
    SlotDataflow,
    Sync,
    lineage_text,
    risk_allows,
)
from pipeplan.dialects.diagnostics import IRVerifyError, PipeplanOp
from pipeplan.dialects.lifetimes import Lifetime, enum_interner
from pipeplan.dialects.steps import STEPS
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    StringAttr,
    f64,
    i32,
)
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import (
    Attribute,
    Block,
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
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import HasParent, NoTerminator
from xdsl.utils.exceptions import VerifyException

_OpT = TypeVar("_OpT", bound=Operation)


# --------------------------------------------------------------------------- attribute helpers
def _intdict(pairs: tuple[tuple[str, int], ...]) -> DictionaryAttr:
    return DictionaryAttr({k: i64_attr(v) for k, v in sorted(pairs)})  # sorted: MLIR's dictionary order


def _rintdict(d: DictionaryAttr) -> tuple[tuple[str, int], ...]:
    out = []
    for k, v in d.data.items():
        if not isinstance(v, IntegerAttr):
            raise VerifyException(f"expected an integer for key '{k}', got {v}")
        out.append((k, v.value.data))
    return tuple(out)


def _body() -> Region:
    # Not "single_block": the parser gives `{ }` zero blocks, and an empty extension is legal.
    return region_def()


def _ops(region: Region) -> list:
    """The ops of a region's (at most one) block; [] for an empty region."""
    return list(region.blocks[0].ops) if region.blocks else []


# --------------------------------------------------------------------------- ops
@irdl_op_definition
class PlanOp(PipeplanOp):
    """One concrete plan bound to target, deployment and evidence identities.

    Properties: ``binder`` (one of BINDERS), ``target``/``deployment``/``evidence`` (identities of
    the TargetBinding, DeploymentBinding and evidence policy), ``risk`` (one of RISK_POLICIES),
    ``source`` (digest of the portable plan it was built from). The body holds the common core and
    exactly one extension op, last (seeds/003: "exactly one typed target extension").

    ```mlir
    cplan.plan attributes {binder = "reference-queue", target = "virtual-queue@1",
        deployment = "dep", evidence = "roofline@1", risk = "strict", source = "sha256:00"} {
      cplan.device {id = "d0", capacity = {hbm = 1024 : i64}, engines = {compute = 1 : i64}}
      %0 = cplan.alloc "b0" transient {source = "b0", device = "d0", space = "hbm", offset = 0 : i64,
                             size = 64 : i64, alignment = 64 : i64}
      %1 = cplan.command "c0" () -> (%0) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm",
                     device = "d0", engine = "compute", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_norm">,
                     duration = 1.0e-06 : f64}
      cplan.queue_schedule {
        cplan.queue "d0" "compute" [%1]
      }
    }
    ```
    """

    name = "cplan.plan"
    irdl_options = (ParsePropInAttrDict(),)
    binder = prop_def(StringAttr)
    target = prop_def(StringAttr)
    deployment = prop_def(StringAttr)
    evidence = prop_def(StringAttr)
    risk = prop_def(StringAttr)
    source = prop_def(StringAttr)
    body = _body()
    traits = traits_def(NoTerminator())
    assembly_format = "attr-dict-with-keyword $body"

    def ops_of(self, cls: type[_OpT]) -> list[_OpT]:
        """The ops of class ``cls`` in the plan body, in order (nested extension ops: pass QueueOp, SlotOp or
        FireOp)."""
        out: list[_OpT] = []
        for o in _ops(self.body):
            if isinstance(o, cls):
                out.append(o)
            elif isinstance(o, QueueScheduleOp | SlotDataflowOp) and cls in (QueueOp, SlotOp, FireOp):
                out += [x for x in _ops(o.body) if isinstance(x, cls)]
        return out

    @property
    def extension(self) -> QueueScheduleOp | SlotDataflowOp | None:
        """The plan's target extension op (None when it has none)."""
        return next((o for o in _ops(self.body) if isinstance(o, QueueScheduleOp | SlotDataflowOp)), None)

    def verify_(self) -> None:
        if self.binder.data not in BINDERS:
            raise VerifyException(f"unknown binder '{self.binder.data}', expected one of {', '.join(BINDERS)}")
        if self.risk.data not in RISK_POLICIES:
            raise VerifyException(f"unknown risk policy '{self.risk.data}', expected one of {', '.join(RISK_POLICIES)}")
        # at most one block: the NoTerminator trait rejects a multi-block body before this verifier runs
        ops = _ops(self.body)
        exts = [o for o in ops if isinstance(o, QueueScheduleOp | SlotDataflowOp)]
        if len(exts) != 1:
            raise IRVerifyError(f"a plan needs exactly one target extension (queue_schedule or slot_dataflow), found "
                                f"{len(exts)}", op=exts[1] if exts else self)
        if ops[-1] is not exts[0]:
            raise IRVerifyError("the target extension must be the last op of the plan", op=ops[-1])
        for o in ops:
            if not isinstance(o, DeviceOp | LinkOp | AllocOp | CommandOp | SyncOp | QueueScheduleOp | SlotDataflowOp):
                raise IRVerifyError(f"unexpected op '{o.name}' in a cplan.plan body", op=o)
        violations = core_violations(self)  # kept on the op for cplan-verify while the plan stays unchanged
        if violations:
            v = violations[0]
            raise IRVerifyError(v.diagnostic_text(), op=subject_op(self, v.subject))


@irdl_op_definition
class DeviceOp(PropsInAttrDict):
    """A deployment device: ``capacity`` maps memory space -> bytes, ``engines`` engine -> slots.

    ```mlir
    cplan.device {id = "d0", capacity = {hbm = 1073741824 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
    ```
    """

    name = "cplan.device"
    id = prop_def(StringAttr)
    capacity = prop_def(DictionaryAttr)
    engines = prop_def(DictionaryAttr)
    traits = traits_def(HasParent(PlanOp))

    def verify_(self) -> None:
        for k, v in _rintdict(self.capacity):
            if v < 0:
                raise VerifyException(f"device '{self.id.data}': capacity of '{k}' is negative ({v})")
        for k, v in _rintdict(self.engines):
            if v < 1:
                raise VerifyException(f"device '{self.id.data}': engine '{k}' needs at least one slot, has {v}")


@irdl_op_definition
class LinkOp(PropsInAttrDict):
    """A link from ``src`` to ``dst`` carrying at most ``capacity`` bytes per transfer.

    ```mlir
    cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1048576 : i64}
    ```
    """

    name = "cplan.link"
    id = prop_def(StringAttr)
    src = prop_def(StringAttr)
    dst = prop_def(StringAttr)
    capacity = prop_def(IntegerAttr)
    traits = traits_def(HasParent(PlanOp))

    def verify_(self) -> None:
        if self.capacity.value.data < 0:
            raise VerifyException(f"link '{self.id.data}': capacity is negative")


@irdl_attr_definition
class AllocType(ParametrizedAttribute, TypeAttribute):
    """``!cplan.alloc``: an allocation (bytes of a memory space of a device), defined by ``cplan.alloc``
    and used by the commands that read or write it."""

    name = "cplan.alloc"


@irdl_attr_definition
class TimepointType(ParametrizedAttribute, TypeAttribute):
    """``!cplan.timepoint``: the completion of a command (IREE stream's timepoint); commands, syncs, queues
    and firing rules take timepoints to name the commands they order."""

    name = "cplan.timepoint"


def alloc_name(v: SSAValue) -> str:
    """The id of the ``cplan.alloc`` defining ``v`` ("" when another op defines it)."""
    o = v.owner
    return o.id.data if isinstance(o, AllocOp) else ""


def command_name(v: SSAValue) -> str:
    """The id of the ``cplan.command`` whose timepoint ``v`` is ("" when another op defines it)."""
    o = v.owner
    return o.id.data if isinstance(o, CommandOp) else ""


def _names(vs: Sequence[SSAValue], name: Callable[[SSAValue], str]) -> ArrayAttr:
    return ArrayAttr([StringAttr(name(v)) for v in vs])


@irdl_attr_definition
class LifetimeAttr(EnumAttribute[Lifetime], SpacedOpaqueSyntaxAttribute):
    """``#cplan<lifetime transient>``: a ``cplan.alloc``'s lifetime class (printed bare after its id)."""

    name = "cplan.lifetime"


lifetime_attr = enum_interner(LifetimeAttr)
"""lifetime name -> the (interned) :class:`LifetimeAttr`; ValueError for a name that is not a
:class:`~pipeplan.dialects.lifetimes.Lifetime`."""


@irdl_attr_definition
class CostStatusAttr(EnumAttribute[CostStatus], SpacedOpaqueSyntaxAttribute):
    """``#cplan<cost_status direct>``: the status of a ``cplan.command``'s cost, ``direct | fallback |
    out_of_domain | missing`` (:class:`~pipeplan.dialects.costs.CostStatus`; printed bare after ``cost``)."""

    name = "cplan.cost_status"


cost_status_attr = enum_interner(CostStatusAttr)
"""status name -> the (interned) :class:`CostStatusAttr`; ValueError for a name outside COST_STATUSES."""


@irdl_attr_definition
class ProviderAttr(EnumAttribute[EvidenceKind], SpacedOpaqueSyntaxAttribute):
    """``#cplan<provider roofline>``: the evidence provider kind that priced a ``cplan.command``'s cost,
    ``roofline | measured`` (:class:`~pipeplan.dialects.costs.EvidenceKind`; printed bare after ``by``)."""

    name = "cplan.provider"


provider_attr = enum_interner(ProviderAttr)
"""provider kind -> the (interned) :class:`ProviderAttr`; ValueError for a name outside EVIDENCE_KINDS."""


@irdl_attr_definition
class LineageAttr(ParametrizedAttribute):
    """Where a ``cplan.command`` comes from in the model: ``step`` (``prefill``/``decode``), pipeline
    ``stage``, transformer ``block`` (-1: none), the portable task's ``model_op`` and the RunPlan ``edge``
    a send/recv moves ("" otherwise). The task and candidate are the command's ``task``/``impl``.

    Syntax: ``#cplan.lineage<<step>, stage <s>[, block <b>], "<model op>"[, edge "<edge>"]>``, e.g.
    ``#cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">``,
    ``#cplan.lineage<decode, stage 1, "edge:e1", edge "e1">`` (block -1 and edge "" elided).

    Verifier: step one of STEPS; stage >= 0; block >= -1; model op non-empty; an edge only with an
    ``edge:`` model op.
    """

    name = "cplan.lineage"

    step_: StringAttr
    stage_: IntAttr
    block_: IntAttr
    model_op_: StringAttr
    edge_: StringAttr

    def __init__(self, step: str, stage: int, block: int = -1, model_op: str = "", edge: str = ""):
        super().__init__(StringAttr(step), IntAttr(stage), IntAttr(block), StringAttr(model_op), StringAttr(edge))

    @property
    def step(self) -> str:
        return self.step_.data

    @property
    def stage(self) -> int:
        return self.stage_.data

    @property
    def block(self) -> int:
        return self.block_.data

    @property
    def model_op(self) -> str:
        return self.model_op_.data

    @property
    def edge(self) -> str:
        return self.edge_.data

    def record(self) -> Lineage:
        """The :class:`~pipeplan.dialects.cplan_types.Lineage` record of the attribute."""
        return Lineage(self.step, self.stage, self.block, self.model_op, self.edge)

    def text(self, task: str, impl: str) -> str:
        """``model op <op> -> stage <s>[ block <b>] (<step>) -> task @<task> -> candidate <impl>`` (AB-D-1)."""
        return lineage_text(self.step, self.stage, self.block, self.model_op, task, impl)

    def verify(self) -> None:
        if self.step not in STEPS:
            raise VerifyException(f"lineage: unknown step '{self.step}', expected one of {', '.join(STEPS)}")
        if self.stage < 0:
            raise VerifyException(f"lineage: stage {self.stage} is negative")
        if self.block < -1:
            raise VerifyException(f"lineage: block {self.block} < -1 (-1: no block)")
        if not self.model_op:
            raise VerifyException("lineage: the model op is empty")
        if self.edge and not self.model_op.startswith("edge:"):
            raise VerifyException(f"lineage: edge '{self.edge}' on model op '{self.model_op}' (only an 'edge:' "
                                  f"model op moves an edge)")

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.step}, stage {self.stage}")
        if self.block != -1:
            printer.print_string(f", block {self.block}")
        printer.print_string(", ")
        printer.print_string_literal(self.model_op)
        if self.edge:
            printer.print_string(", edge ")
            printer.print_string_literal(self.edge)
        printer.print_string(">")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            step = parser.parse_identifier(context_msg=" (lineage step)")
            parser.parse_punctuation(",")
            parser.parse_keyword("stage")
            stage = parser.parse_integer(allow_boolean=False)
            parser.parse_punctuation(",")
            block = -1
            if parser.parse_optional_keyword("block") is not None:
                block = parser.parse_integer(allow_boolean=False)
                parser.parse_punctuation(",")
            model_op = parser.parse_str_literal()
            edge = ""
            if parser.parse_optional_punctuation(",") is not None:
                parser.parse_keyword("edge")
                edge = parser.parse_str_literal()
        return (StringAttr(step), IntAttr(stage), IntAttr(block), StringAttr(model_op), StringAttr(edge))


@lru_cache(maxsize=65536)
def lineage_attr(lin: Lineage) -> LineageAttr:
    """The :class:`LineageAttr` of a :class:`~pipeplan.dialects.cplan_types.Lineage` record."""
    return LineageAttr(lin.step, lin.stage, lin.block, lin.model_op, lin.edge)


@irdl_op_definition
class AllocOp(PipeplanOp):
    """A buffer allocation of ``size`` bytes at byte ``offset`` of ``space`` on ``device``; yields the
    ``!cplan.alloc`` value commands read and write.

    ``id`` names it (lineage, vmachine buffers); ``lifetime`` (:class:`LifetimeAttr`) follows it; ``offset``
    must be a multiple of ``alignment`` (a power of two); ``source`` names the portable buffer it allocates.

    ```mlir
    %b0 = cplan.alloc "b0" transient {source = "b0", device = "d0", space = "hbm", offset = 128 : i64,
                                      size = 100 : i64, alignment = 64 : i64}
    ```
    """

    name = "cplan.alloc"
    irdl_options = (ParsePropInAttrDict(),)
    id = prop_def(StringAttr)
    source = prop_def(StringAttr)
    device = prop_def(StringAttr)
    space = prop_def(StringAttr)
    offset = prop_def(IntegerAttr)
    size = prop_def(IntegerAttr)
    alignment = prop_def(IntegerAttr)
    lifetime = prop_def(LifetimeAttr)
    result = result_def(AllocType)
    traits = traits_def(HasParent(PlanOp))
    assembly_format = "$id $lifetime attr-dict"

    def verify_(self) -> None:
        name = self.id.data
        off, size, al = self.offset.value.data, self.size.value.data, self.alignment.value.data
        if al < 1 or al & (al - 1):
            raise VerifyException(f"alloc '{name}': alignment {al} is not a positive power of two")
        if off < 0 or size < 0:
            raise VerifyException(f"alloc '{name}': offset and size must be non-negative")
        if off % al:
            raise VerifyException(f"alloc '{name}': offset {off} is not a multiple of alignment {al}")


@irdl_op_definition
class CommandOp(PipeplanOp):
    """One concrete command, 1:1 with a portable task: reads the allocations in parentheses, writes those
    after ``->``, starts once every timepoint of ``after`` has completed (its dependencies), and yields
    its own completion ``!cplan.timepoint``.

    ``id`` names it (lineage, vmachine ``cmd``); ``impl`` is the selected implementation,
    ``device``/``engine`` its placement, ``lineage`` (:class:`LineageAttr`) its place in the model
    (:attr:`lineage_text` the diagnostic path); the cost used is ``cost <status> [by <provider>]``
    (:class:`CostStatusAttr`, :class:`ProviderAttr`) and ``duration`` (seconds). ``provider`` and ``duration``
    are present exactly when ``status`` is not ``missing``; ``link`` names the link a transfer uses.
    ``reads``/``writes``/``deps`` give the alloc and command ids of the operands.

    ```mlir
    %c1 = cplan.command "c1" (%b0) -> (%b1) after(%c0) cost direct by roofline {task = "t1", op = "matmul",
        impl = "vq.matmul", device = "d0", engine = "compute",
        lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">, duration = 2.5e-06 : f64}
    %c2 = cplan.command "c2" (%b1) -> (%b2) after(%c1) cost missing {task = "t2", op = "add", impl = "vq.add",
        device = "d0", engine = "compute", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.add(h_mid)">}
    ```
    """

    name = "cplan.command"
    irdl_options = (ParsePropInAttrDict(), AttrSizedOperandSegments(as_property=True))
    inputs = var_operand_def(AllocType)
    outputs = var_operand_def(AllocType)
    after = var_operand_def(TimepointType)
    done = result_def(TimepointType)
    id = prop_def(StringAttr)
    task = prop_def(StringAttr)
    op = prop_def(StringAttr)
    impl = prop_def(StringAttr)
    device = prop_def(StringAttr)
    engine = prop_def(StringAttr)
    lineage = prop_def(LineageAttr)
    provider = opt_prop_def(ProviderAttr)
    status = prop_def(CostStatusAttr)
    duration = opt_prop_def(FloatAttr)
    link = opt_prop_def(StringAttr)
    traits = traits_def(HasParent(PlanOp))
    assembly_format = ("$id ` ` `(` $inputs `)` `->` `(` $outputs `)` (`after` `(` $after^ `)`)? "
                       "`cost` $status (`by` $provider^)? attr-dict")

    def groups(self) -> tuple[Sequence[SSAValue], Sequence[SSAValue], Sequence[SSAValue]]:
        """``(inputs, outputs, after)`` in one read of the operand segments (the field accessors decode
        ``operandSegmentSizes`` on every access)."""
        seg = self.properties["operandSegmentSizes"]
        assert isinstance(seg, DenseArrayBase)
        n_in, n_out, _ = seg.get_values()
        ops = self.operands
        return ops[:n_in], ops[n_in:n_in + n_out], ops[n_in + n_out:]

    def set_operands(self, inputs: Sequence[SSAValue] | None = None, outputs: Sequence[SSAValue] | None = None,
                     after: Sequence[SSAValue] | None = None) -> None:
        """Replace the read allocations, written allocations or awaited timepoints (the groups given; None
        keeps a group), updating ``operandSegmentSizes``."""
        ins, outs, aft = self.groups()
        ins, outs, aft = (list(ins if inputs is None else inputs), list(outs if outputs is None else outputs),
                          list(aft if after is None else after))
        self.operands = [*ins, *outs, *aft]
        self.properties["operandSegmentSizes"] = _segments(len(ins), len(outs), len(aft))

    @property
    def reads(self) -> ArrayAttr:
        """The ids of the allocations read (``inputs``), in operand order."""
        return _names(self.groups()[0], alloc_name)

    @property
    def writes(self) -> ArrayAttr:
        """The ids of the allocations written (``outputs``), in operand order."""
        return _names(self.groups()[1], alloc_name)

    @property
    def deps(self) -> ArrayAttr:
        """The ids of the commands it depends on (``after``), in operand order."""
        return _names(self.groups()[2], command_name)

    @property
    def lineage_text(self) -> str:
        """The diagnostic lineage path ``model op -> stage/block (step) -> task @<task> -> candidate <impl>``."""
        return self.lineage.text(self.task.data, self.impl.data)

    def verify_(self) -> None:
        name = self.id.data
        missing = self.status.data is CostStatus.MISSING
        if (self.duration is None) != missing:
            raise VerifyException(f"command '{name}': duration must be present exactly when the cost is not missing")
        if (self.provider is None) != missing:
            raise VerifyException(f"command '{name}': provider must be present exactly when the cost is not missing")
        if self.duration is not None and not self.duration.value.data >= 0.0:
            raise VerifyException(f"command '{name}': duration must be >= 0 seconds")


@irdl_op_definition
class SyncOp(PipeplanOp):
    """A signal/wait edge: the command of timepoint ``signal`` completes before that of ``wait`` starts.

    ```mlir
    cplan.sync %c0 -> %c3
    ```
    """

    name = "cplan.sync"
    signal = operand_def(TimepointType)
    wait = operand_def(TimepointType)
    traits = traits_def(HasParent(PlanOp))
    assembly_format = "$signal `->` $wait attr-dict"


@irdl_op_definition
class QueueScheduleOp(PipeplanOp):
    """Queue schedule extension: ``cplan.queue`` ops only, one per (device, engine).

    ```mlir
    cplan.queue_schedule {
      cplan.queue "d0" "compute" [%c0, %c1]
    }
    ```
    """

    name = "cplan.queue_schedule"
    body = _body()
    traits = traits_def(NoTerminator(), HasParent(PlanOp))
    assembly_format = "$body attr-dict"

    def verify_(self) -> None:
        seen: set[tuple[str, str]] = set()
        placed: set[SSAValue] = set()
        for o in _ops(self.body):
            if not isinstance(o, QueueOp):
                raise IRVerifyError(f"queue_schedule may hold only cplan.queue ops, found '{o.name}'", op=o)
            key = (o.device.data, o.engine.data)
            if key in seen:
                raise IRVerifyError(f"queue_schedule: two queues for device '{key[0]}' engine '{key[1]}'", op=o)
            seen.add(key)
            for v in o.commands:
                if v in placed:
                    raise IRVerifyError(f"queue_schedule: command '{command_name(v)}' appears in more than one queue "
                                        f"position", op=o)
                placed.add(v)


@irdl_op_definition
class QueueOp(PipeplanOp):
    """The command order of the queue of engine ``engine`` on ``device``: the commands of the timepoints,
    in order (``order`` gives their ids).

    ```mlir
    cplan.queue "d0" "compute" [%c0, %c1]
    ```
    """

    name = "cplan.queue"
    irdl_options = (ParsePropInAttrDict(),)
    device = prop_def(StringAttr)
    engine = prop_def(StringAttr)
    commands = var_operand_def(TimepointType)
    traits = traits_def(HasParent(QueueScheduleOp))
    assembly_format = "$device $engine ` ` `[` $commands `]` attr-dict"

    @property
    def order(self) -> ArrayAttr:
        """The command ids of the queue, in order."""
        return _names(self.commands, command_name)


@irdl_op_definition
class SlotDataflowOp(PipeplanOp):
    """Slot dataflow extension: ``cplan.slot`` and ``cplan.fire`` ops, no queues.

    ```mlir
    cplan.slot_dataflow {
      cplan.slot "s0" on "d0" "compute" [%c0, %c1]
      cplan.fire %c0 on "s0" after []
      cplan.fire %c1 on "s0" after [%c0]
    }
    ```
    """

    name = "cplan.slot_dataflow"
    body = _body()
    traits = traits_def(NoTerminator(), HasParent(PlanOp))
    assembly_format = "$body attr-dict"

    def verify_(self) -> None:
        slots: dict[str, tuple[str, ...]] = {}
        slot_ops: dict[str, SlotOp] = {}
        fired: dict[str, str] = {}
        fire_ops: dict[str, FireOp] = {}
        for o in _ops(self.body):
            if isinstance(o, SlotOp):
                if o.id.data in slots:
                    raise IRVerifyError(f"slot_dataflow: duplicate slot '{o.id.data}'", op=o)
                slots[o.id.data] = tuple(command_name(v) for v in o.members)
                slot_ops[o.id.data] = o
            elif isinstance(o, FireOp):
                c = command_name(o.cmd)
                if c in fired:
                    raise IRVerifyError(f"slot_dataflow: command '{c}' has more than one firing rule", op=o)
                fired[c] = o.slot.data
                fire_ops[c] = o
            else:
                raise IRVerifyError(f"slot_dataflow may hold only cplan.slot and cplan.fire ops, found '{o.name}'", op=o)
        bound: dict[str, str] = {}
        for s, cs in slots.items():
            for c in cs:
                if c in bound:
                    raise IRVerifyError(f"slot_dataflow: command '{c}' is bound to slots '{bound[c]}' and '{s}'",
                                        op=slot_ops[s])
                bound[c] = s
        for c, s in fired.items():
            if s not in slots:
                raise IRVerifyError(f"slot_dataflow: firing rule of '{c}' names unknown slot '{s}'", op=fire_ops[c])
            if bound.get(c) != s:
                raise IRVerifyError(f"slot_dataflow: command '{c}' fires on slot '{s}' but is not bound to it",
                                    op=fire_ops[c])
        for c, s in bound.items():
            if c not in fired:
                raise IRVerifyError(f"slot_dataflow: command '{c}' has no firing rule", op=slot_ops[s])


@irdl_op_definition
class SlotOp(PipeplanOp):
    """A dataflow slot ``id`` of ``engine`` on ``device`` and the commands (timepoints) bound to it.

    ```mlir
    cplan.slot "s0" on "d0" "compute" [%c0]
    ```
    """

    name = "cplan.slot"
    irdl_options = (ParsePropInAttrDict(),)
    id = prop_def(StringAttr)
    device = prop_def(StringAttr)
    engine = prop_def(StringAttr)
    members = var_operand_def(TimepointType)
    traits = traits_def(HasParent(SlotDataflowOp))
    assembly_format = "$id `on` $device $engine ` ` `[` $members `]` attr-dict"

    @property
    def commands(self) -> ArrayAttr:
        """The ids of the commands bound to the slot."""
        return _names(self.members, command_name)


@irdl_op_definition
class FireOp(PipeplanOp):
    """Firing rule: the command of timepoint ``cmd`` fires on ``slot`` once every command of ``after``
    has completed.

    ```mlir
    cplan.fire %c1 on "s0" after [%c0]
    ```
    """

    name = "cplan.fire"
    irdl_options = (ParsePropInAttrDict(),)
    cmd = operand_def(TimepointType)
    slot = prop_def(StringAttr)
    after = var_operand_def(TimepointType)
    traits = traits_def(HasParent(SlotDataflowOp))
    assembly_format = "$cmd `on` $slot `after` ` ` `[` $after `]` attr-dict"

    @property
    def command(self) -> StringAttr:
        """The id of the command this rule fires."""
        return StringAttr(command_name(self.cmd))


Cplan = Dialect(
    "cplan",
    [PlanOp, DeviceOp, LinkOp, AllocOp, CommandOp, SyncOp, QueueScheduleOp, QueueOp, SlotDataflowOp, SlotOp, FireOp],
    [AllocType, TimepointType, LifetimeAttr, CostStatusAttr, ProviderAttr, LineageAttr],
)


def subject_op(plan: PlanOp, subject: tuple[str, int | str]) -> Operation:
    """The op of ``plan`` a :class:`~pipeplan.dialects.cplan_invariants.Violation` subject names
    (``("command", i)``, ``("alloc", id)``, ``("alloc", k)``, ``("device", k)``, ``("link", k)``,
    ``("sync", i)``, ``("queue", i)``, ``("slot", i)``; an int is the position among ops of that kind);
    ``plan`` itself when it names none."""
    kind, key = subject
    ops = _ops(plan.body)
    if kind == "alloc" and isinstance(key, str):
        return next((o for o in ops if isinstance(o, AllocOp) and o.id.data == key), plan)
    kinds: dict[str, type[Operation]] = {"alloc": AllocOp, "device": DeviceOp, "link": LinkOp}
    if kind in kinds:
        same = [o for o in ops if isinstance(o, kinds[kind])]
        return same[key] if isinstance(key, int) and 0 <= key < len(same) else plan
    if kind in ("queue", "slot"):
        ext = next((o for o in ops if isinstance(o, QueueScheduleOp | SlotDataflowOp)), None)
        cls: type[Operation] = QueueOp if kind == "queue" else SlotOp
        pool: list[Operation] = [o for o in _ops(ext.body) if isinstance(o, cls)] if ext is not None else []
    else:
        cls = CommandOp if kind == "command" else SyncOp
        pool = [o for o in ops if kind in ("command", "sync") and isinstance(o, cls)]
    return pool[key] if isinstance(key, int) and 0 <= key < len(pool) else plan


# --------------------------------------------------------------------------- building ops from decisions
_ALLOC_T = AllocType()
_TIMEPOINT_T = TimepointType()
_F64: dict[str, FloatAttr] = {}


@lru_cache(maxsize=4096)
def _segments(n_in: int, n_out: int, n_after: int) -> DenseArrayBase:
    return DenseArrayBase.from_list(i32, [n_in, n_out, n_after])


def _f64(v: float) -> FloatAttr:
    """``FloatAttr(v, f64)``, one instance per value (keyed by its exact bits: ``-0.0`` is not ``0.0``)."""
    key = float(v).hex()
    a = _F64.get(key)
    if a is None:
        a = _F64[key] = FloatAttr(v, f64)
    return a


def _new(cls: type[Operation], operands: Sequence[SSAValue], results: Sequence[Attribute],
         props: dict[str, Attribute]) -> Operation:
    """An op of ``cls`` with its properties as given: the caller lists them in the op's declaration order
    (segment sizes last), as ``create`` would store them."""
    op = cls.__new__(cls)
    Operation.__init__(op, operands=operands, result_types=results, properties=props)
    return op


def alloc_op(a: Alloc) -> AllocOp:
    """The ``cplan.alloc`` op of ``a`` (unattached)."""
    return _new(AllocOp, (), (_ALLOC_T,), {  # type: ignore[return-value]
        "id": string(a.id), "source": string(a.source), "device": string(a.device), "space": string(a.space),
        "offset": i64_attr(a.offset), "size": i64_attr(a.size), "alignment": i64_attr(a.alignment),
        "lifetime": lifetime_attr(a.lifetime)})


def command_op(c: Command, allocs: Mapping[str, SSAValue], after: Sequence[SSAValue] = ()) -> CommandOp:
    """The ``cplan.command`` op of ``c`` (unattached): reads/writes ``allocs[id]`` for each of its alloc ids,
    waits on the ``after`` timepoints (its ``deps``, resolved by the caller). Raises KeyError for an alloc id
    ``allocs`` lacks."""
    props: dict[str, Attribute] = {
        "id": string(c.id), "task": string(c.task), "op": string(c.op), "impl": string(c.implementation),
        "device": string(c.device), "engine": string(c.engine), "lineage": lineage_attr(c.lineage)}
    if c.provider:
        props["provider"] = provider_attr(c.provider)
    props["status"] = cost_status_attr(c.status)
    if c.duration is not None:
        props["duration"] = _f64(c.duration)
    if c.link:
        props["link"] = string(c.link)
    props["operandSegmentSizes"] = _segments(len(c.reads), len(c.writes), len(after))
    return _new(CommandOp, [*(allocs[r] for r in c.reads), *(allocs[w] for w in c.writes), *after],  # type: ignore[return-value]
                (_TIMEPOINT_T,), props)


def _unknown(what: str, name: str, where: str) -> CplanError:
    return CplanError(f"{where} names unknown {what} '{name}' (no SSA value to refer to)", code="invariant_violation",
                      invariant="AB-S-4" if what == "allocation" else "AB-S-1")


def build_plan(*, binder: str, target: str, deployment: str, evidence: str, risk: str, source: str,
               devices: Sequence[Device] = (), links: Sequence[Link] = (), allocs: Sequence[Alloc] = (),
               commands: Sequence[Command] = (), syncs: Sequence[Sync] = (),
               extension: QueueSchedule | SlotDataflow) -> PlanOp:
    """Build one ``cplan.plan`` op from a binder's decisions, one op per record (deterministic: op order is the
    records' order); the six strings are the plan's properties. Every reference becomes an SSA use: an
    allocation id the ``!cplan.alloc`` of its (first) ``cplan.alloc``, a command id the ``!cplan.timepoint`` of
    its (first) ``cplan.command``; a dependency on a later command is a forward use (the verifier reports the
    cycle it may close).

    Raises CplanError (invariant_violation) when a record names an allocation or command the others lack; the
    result is unattached and verified by the caller (``op.verify()``).
    """
    ops: list[Operation] = []
    for d in devices:
        ops.append(build_op(DeviceOp, {"id": string(d.id), "capacity": _intdict(d.capacities), "engines": _intdict(d.engines)}))
    for ln in links:
        ops.append(build_op(LinkOp, {"id": string(ln.id), "src": string(ln.src), "dst": string(ln.dst), "capacity": i64_attr(ln.capacity)}))
    values: dict[str, SSAValue] = {}
    for a in allocs:
        aop = alloc_op(a)
        values.setdefault(a.id, aop.result)
        ops.append(aop)
    known = {c.id for c in commands}
    for c in commands:
        for r in (*c.reads, *c.writes):
            if r not in values:
                raise _unknown("allocation", r, f"command '{c.id}'")
        for d in c.deps:
            if d not in known:
                raise _unknown("command", d, f"command '{c.id}'")
    tps: dict[str, SSAValue] = {}
    cmd_ops: list[CommandOp] = []
    forward: list[int] = []
    for c in commands:
        if all(d in tps for d in c.deps):
            cop = command_op(c, values, [tps[d] for d in c.deps])
        else:  # a forward dependency: rebuilt below, once every timepoint exists
            cop = command_op(c, values, [])
            forward.append(len(cmd_ops))
        tps.setdefault(c.id, cop.done)
        cmd_ops.append(cop)
    for i in forward:
        c, old = commands[i], cmd_ops[i]
        cmd_ops[i] = new = command_op(c, values, [tps[d] for d in c.deps])
        old.done.replace_all_uses_with(new.done)
        if tps.get(c.id) is old.done:
            tps[c.id] = new.done
    ops += cmd_ops

    def tp(name: str, where: str) -> SSAValue:
        if name not in tps:
            raise _unknown("command", name, where)
        return tps[name]

    for s in syncs:
        ops.append(SyncOp.create(operands=[tp(s.signal, "a sync"), tp(s.wait, "a sync")]))
    ext = extension
    inner: list[Operation]
    if isinstance(ext, QueueSchedule):
        inner = [QueueOp.create(operands=[tp(c, f"queue {q.device}/{q.engine}") for c in q.order],
                                properties={"device": string(q.device), "engine": string(q.engine)})
                 for q in ext.queues]
        ops.append(build_op(QueueScheduleOp, {}, inner))
    else:
        inner = [SlotOp.create(operands=[tp(c, f"slot '{s.id}'") for c in s.commands], properties={
            "id": string(s.id), "device": string(s.device), "engine": string(s.engine)}) for s in ext.slots]
        inner += [FireOp.create(operands=[tp(f.command, "a firing rule"), *(tp(a, "a firing rule") for a in f.after)],
                                properties={"slot": string(f.slot)}) for f in ext.fires]
        ops.append(build_op(SlotDataflowOp, {}, inner))
    return PlanOp.create(properties={
        "binder": string(binder), "target": string(target), "deployment": string(deployment),
        "evidence": string(evidence), "risk": string(risk), "source": string(source)},
        regions=[Region(Block(ops))])
