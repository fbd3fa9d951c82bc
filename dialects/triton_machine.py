"""The ``tmachine`` dialect: the CUDA/Triton target's MachineIR (seeds/003 "Machine lowering and
artifact emission", AB-M-1).

``convert-cplan-to-triton`` lowers each concrete command of a ``cuda-triton`` concrete plan to one
machine instruction; nothing is added that the concrete plan did not decide (AB-M-4): streams are the
plan's queues, instruction order is the queue order, cross-stream waits are the plan's dependencies on
commands of other queues.

SSA dataflow: ``tmachine.buffer`` yields a ``!tmachine.buffer`` and ``tmachine.token`` a ``!tmachine.token``
at program level, before the streams (so they dominate every stream); instructions take the buffers they
use as operands, ``waits(...)`` the tokens of the instructions of other streams they wait for, and
``signal`` the token they complete (an instruction another stream waits on signals exactly one token).
String ids stay properties of the defining ops; :func:`buffer_id`, :func:`token_id` and the instructions'
``arg_ids``/``src``/``dst``/``wait_cmds`` accessors derive them from the operands.

* ``tmachine.program`` (``target``, ``concrete`` = sha256 of the concrete plan it lowers,
  ``revision``) holds the ``tmachine.buffer`` declarations (the plan's allocations), the
  ``tmachine.token`` timepoints, then one ``tmachine.stream`` per (device, engine) queue;
* ``tmachine.buffer``: one concrete allocation -- ``id`` (the alloc id), ``device``,
  ``dtype``/``shape`` (of the portable buffer it holds), ``lifetime`` (``weight``, ``kv``, ``transient``,
  ``edge``) and ``origin`` (the GGUF tensor name of a weight, ``rope_table``/``rope_table_swa``,
  ``blk.N.cache_k``/``cache_v``, ``<step>:<value>`` of a transient, ``edge <id> (<kind>)``);
* ``tmachine.token``: the completion of one instruction that an instruction of another stream waits for;
* ``tmachine.stream`` holds instructions in queue order:

  - ``tmachine.launch``: one Triton kernel launch -- ``kernel`` (``module:function`` of a ``@triton.jit``
    kernel, the module named within the target's kernel package: the IR names no runtime import path,
    the runtime resolves the package from ``target``), the buffer arguments (operands, in kernel parameter
    order), ``grid`` (3 positive ints), ``meta`` (constexpr meta-parameters: block sizes, format codes,
    ``num_warps``), ``scalars`` (scalar arguments: ints, floats, or a ``"$<name>"`` bound at run time:
    ``"$start_pos"`` the step's position, any other ``"$<attr>"`` the attribute of that name of the
    stage-program kernel call the command lowers, recorded so when the lowering had no model ABI),
    ``autotune`` (the runtime may retune the block sizes per its key; the grid is then recomputed);
  - ``tmachine.view``: a command that is a view, not a kernel (``last_row``; operands: source, target);
  - ``tmachine.copy``: a copy-engine transfer (edge ``send``/``recv``) of ``bytes`` from one buffer to another.

Every instruction carries ``id``, ``step`` (optional, a :class:`StepAttr` printed bare after the operands:
the plan step it runs in, ``prefill``/``decode``; absent, it runs in every step) and the provenance of the
concrete command it lowers, as ``cplan.command`` states it: ``cmd`` (the command id), ``task`` (its portable
task), ``impl`` (its candidate) and ``lineage`` (its ``#cplan.lineage``: step, stage, block, model op, edge),
so a diagnostic reaches model op -> stage/block -> portable task -> candidate -> command -> instruction
(AB-D-1; :attr:`lineage_text <_Instruction.lineage_text>` spells that path). A ``step`` is the step of its
lineage.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pipeplan.dialects.carriers import PropsInAttrDict
from pipeplan.dialects.cplan import LineageAttr
from pipeplan.dialects.diagnostics import IRVerifyError, PipeplanOp, value_name
from pipeplan.dialects.graph import cycle_members, stable_topo_order
from pipeplan.dialects.lifetimes import LIFETIMES, Lifetime, enum_interner  # noqa: F401  (LIFETIMES re-exported)
from pipeplan.dialects.steps import STEPS, Step  # noqa: F401  (STEPS re-exported)
from xdsl.dialects.builtin import (
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    StringAttr,
)
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import (
    Dialect,
    Operation,
    ParametrizedAttribute,
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
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import HasParent, NoTerminator
from xdsl.utils.exceptions import VerifyException

REVISION = "pipeplan-tmachine/3"
"""Revision of this MachineIR and its lowering (2: SSA buffers and tokens; 3: ``step`` a :class:`StepAttr`,
the command's provenance as ``task``/``impl`` and a typed ``#cplan.lineage``)."""


@irdl_attr_definition
class BufferType(ParametrizedAttribute, TypeAttribute):
    """``!tmachine.buffer``: one allocation, defined by ``tmachine.buffer`` at program level (so it
    dominates every stream) and taken by the instructions that use it."""

    name = "tmachine.buffer"


@irdl_attr_definition
class TokenType(ParametrizedAttribute, TypeAttribute):
    """``!tmachine.token``: the completion of one instruction, defined by ``tmachine.token`` at program level;
    the instruction signals it (``signal``), instructions of other streams wait for it (``waits``)."""

    name = "tmachine.token"


def _foreign(v: SSAValue) -> str:
    """``%name`` of a value no op of this dialect's program defines (``%?`` when it has no name)."""
    return f"%{v.name_hint or '?'}"


def buffer_id(v: SSAValue) -> str:
    """The id of the ``tmachine.buffer`` defining ``v``; for a value defined elsewhere, its SSA name
    (``%b.ghost``), which the program's verifier rejects as undeclared."""
    o = v.owner
    return o.id.data if isinstance(o, BufferOp) else _foreign(v)


def token_id(v: SSAValue) -> str:
    """The id of the ``tmachine.token`` defining ``v``; for a value defined elsewhere, its SSA name."""
    o = v.owner
    return o.id.data if isinstance(o, TokenOp) else _foreign(v)


def signaller(v: SSAValue) -> Operation | None:
    """The first instruction that signals token ``v`` (takes it as its ``signal`` operand), or None."""
    for u in v.uses:
        o = u.operation
        if isinstance(o, INSTRUCTIONS) and o.signal is v:
            return o
    return None


@irdl_op_definition
class ProgramOp(PipeplanOp):
    """A Triton machine program: the lowering of one concrete plan.

    ```mlir
    tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
      %x = tmachine.buffer "b0" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:h0"}
      %w = tmachine.buffer "w0" weight {device = "n0", dtype = "f32", shape = array<i64: 64>, origin = "blk.0.attn_norm.weight"}
      %y = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:blk.0.attn_in"}
      tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
        tmachine.launch "i.c0" "rmsnorm:_rms_norm_kernel" (%x, %w, %y) step prefill {cmd = "c0",
          grid = array<i64: 4, 1, 1>, meta = {BLOCK_D = 64 : i64}, scalars = {D = 64 : i64}, autotune = false,
          task = "t0", impl = "triton.rms_norm", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_norm">}
      }
    }
    ```
    """

    name = "tmachine.program"
    irdl_options = (ParsePropInAttrDict(),)
    target = prop_def(StringAttr)
    concrete = prop_def(StringAttr)
    revision = prop_def(StringAttr)
    body = region_def()
    traits = traits_def(NoTerminator())
    assembly_format = "attr-dict-with-keyword $body"

    def verify_(self) -> None:
        if not self.target.data.startswith("cuda-triton"):
            raise VerifyException(f"tmachine.program targets '{self.target.data}', expected a cuda-triton target")
        seen: set[str] = set()
        for b in self.body.blocks:
            for op in b.ops:
                if isinstance(op, BufferOp | TokenOp):
                    if seen:
                        raise IRVerifyError(f"'{op.name}' after a tmachine.stream (buffers and tokens come before the "
                                            "streams that use them)", op=op)
                    continue
                if not isinstance(op, StreamOp):
                    raise IRVerifyError(f"unexpected op '{op.name}' in a tmachine.program (buffers, tokens and "
                                        "streams only)", op=op)
                key = f"{op.device.data}/{op.engine.data}"
                if key in seen:
                    raise IRVerifyError(f"stream {key} appears twice", op=op)
                seen.add(key)
        check_streams(self)


@irdl_attr_definition
class LifetimeAttr(EnumAttribute[Lifetime], SpacedOpaqueSyntaxAttribute):
    """``#tmachine<lifetime kv>``: a ``tmachine.buffer``'s lifetime class (printed bare in its syntax)."""

    name = "tmachine.lifetime"


lifetime_attr = enum_interner(LifetimeAttr)
"""lifetime name -> the (interned) :class:`LifetimeAttr`; ValueError for a name that is not a
:class:`~pipeplan.dialects.lifetimes.Lifetime`."""


@irdl_attr_definition
class StepAttr(EnumAttribute[Step], SpacedOpaqueSyntaxAttribute):
    """``#tmachine<step decode>``: the plan step (:class:`~pipeplan.dialects.steps.Step`) an instruction runs in
    (printed bare in its syntax: ``step decode``)."""

    name = "tmachine.step"


step_attr = enum_interner(StepAttr)
"""step name -> the (interned) :class:`StepAttr`; ValueError for a name that is not a step."""


@irdl_op_definition
class BufferOp(PipeplanOp):
    """One concrete allocation (``id``: the alloc id; see the module docstring; ``lifetime``, a
    :class:`LifetimeAttr`, follows it); yields the ``!tmachine.buffer`` the instructions take.

    ```mlir
    %s0.blk.0.cache_k = tmachine.buffer "alloc.s0.blk.0.cache_k" kv {device = "n0", dtype = "f32",
      shape = array<i64: 64, 4, 8>, origin = "blk.0.cache_k"}
    ```
    """

    name = "tmachine.buffer"
    irdl_options = (ParsePropInAttrDict(),)
    id = prop_def(StringAttr)
    device = prop_def(StringAttr)
    dtype = prop_def(StringAttr)
    shape = prop_def(DenseArrayBase)
    lifetime = prop_def(LifetimeAttr)
    origin = prop_def(StringAttr)
    result = result_def(BufferType)
    traits = traits_def(HasParent(ProgramOp))
    assembly_format = "$id $lifetime attr-dict"

    def result_name(self) -> str | None:
        """``%<id>`` without its ``alloc.`` prefix."""
        return value_name(self.id.data.removeprefix("alloc."))

    def verify_(self) -> None:
        if any(not isinstance(d, int) or d < 0 for d in self.shape.get_values()):
            raise VerifyException(f"buffer '{self.id.data}': shape must be non-negative integers")


@irdl_op_definition
class TokenOp(PipeplanOp):
    """The completion of one instruction that instructions of other streams wait for: yields the
    ``!tmachine.token`` that instruction signals and the waiting instructions take (program level, before
    the streams, so it dominates all of them).

    ```mlir
    %done.c0 = tmachine.token "done.c0"
    ```
    """

    name = "tmachine.token"
    irdl_options = (ParsePropInAttrDict(),)
    id = prop_def(StringAttr)
    result = result_def(TokenType)
    traits = traits_def(HasParent(ProgramOp))
    assembly_format = "$id attr-dict"

    def result_name(self) -> str | None:
        """``%done.<command>`` for the token ``done.cmd.<command>``."""
        return value_name("done." + self.id.data.removeprefix("done.").removeprefix("cmd."))


@irdl_op_definition
class StreamOp(PipeplanOp):
    """One queue (CUDA stream or copy engine) of a device; its instructions run in order.

    ```mlir
    tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
      tmachine.copy "i.c9" %e0 -> %b0 signal %done.c9 step decode {cmd = "c9", bytes = 16 : i64, task = "t9",
        impl = "triton.recv", lineage = #cplan.lineage<decode, stage 1, "edge:e0", edge "e0">}
    }
    ```
    """

    name = "tmachine.stream"
    irdl_options = (ParsePropInAttrDict(),)
    device = prop_def(StringAttr)
    engine = prop_def(StringAttr)
    body = region_def()
    traits = traits_def(NoTerminator(), HasParent(ProgramOp))
    assembly_format = "attr-dict-with-keyword $body"

    def verify_(self) -> None:
        for b in self.body.blocks:
            for op in b.ops:
                if not isinstance(op, INSTRUCTIONS):
                    raise IRVerifyError(f"unexpected op '{op.name}' in a tmachine.stream", op=op)


class _Instruction(PropsInAttrDict):
    """Common accessors of the instructions: the buffers they use, the commands they wait for, their step and
    lineage path."""

    irdl_options = (ParsePropInAttrDict(), AttrSizedOperandSegments(as_property=True))

    @property
    def step_name(self) -> str | None:
        """The step it runs in (None: every step)."""
        step = self.step  # type: ignore[attr-defined]
        return None if step is None else str(step.data.value)

    @property
    def lineage_text(self) -> str:
        """``model op <op> -> stage <s>[ block <b>] (<step>) -> task @<task> -> candidate <impl> -> concrete
        command <cmd>``: the diagnostic path of the command it lowers (AB-D-1)."""
        lin: LineageAttr = self.lineage  # type: ignore[attr-defined]
        return f"{lin.text(self.task.data, self.impl.data)} -> concrete command {self.cmd.data}"  # type: ignore[attr-defined]

    def verify_step(self) -> None:
        """A ``step``, when given, is the step of its lineage. Raises VerifyException."""
        step, lin = self.step_name, self.lineage  # type: ignore[attr-defined]
        if step is not None and step != lin.step:
            raise VerifyException(f"{ABI_INVARIANT}: instruction '{self.id.data}' runs in step '{step}' but "  # type: ignore[attr-defined]
                                  f"lowers a command of step '{lin.step}' (its lineage)")

    def buffers(self) -> Sequence[SSAValue]:
        """The ``!tmachine.buffer`` operands, in operand order."""
        raise NotImplementedError

    def tokens(self) -> Sequence[SSAValue]:
        """The ``!tmachine.token`` operands this instruction waits for."""
        return self.waits  # type: ignore[attr-defined,no-any-return]

    @property
    def arg_ids(self) -> tuple[str, ...]:
        """The ids of the buffers it uses (operand order)."""
        return tuple(buffer_id(v) for v in self.buffers())

    @property
    def wait_cmds(self) -> tuple[str, ...]:
        """The commands it waits for: the ``cmd`` of each wait token's signaller ("" when none signals it)."""
        out = []
        for t in self.tokens():
            s = signaller(t)
            out.append(s.cmd.data if s is not None else "")  # type: ignore[attr-defined]
        return tuple(out)


@irdl_op_definition
class LaunchOp(_Instruction):
    """One Triton kernel launch (see the module docstring): ``args`` the buffer arguments in kernel parameter
    order, ``waits`` the tokens of other streams' instructions to wait for, ``signal`` the token it completes.

    ```mlir
    tmachine.launch "i.c1" "gemv:_gemv_kernel" (%x, %w, %y) waits(%done.c0) step prefill {cmd = "c1",
      grid = array<i64: 4, 1, 1>, meta = {BLOCK_K = 256 : i64, BLOCK_M = 1 : i64, BLOCK_N = 16 : i64, FMT = 3 : i64,
      USE_DOT = 0 : i64}, scalars = {K = 64 : i64, M = 1 : i64, N = 64 : i64}, autotune = true, task = "t1",
      impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    ```
    """

    name = "tmachine.launch"
    KEYWORD_DICTS: ClassVar[tuple[str, ...]] = ("meta", "scalars")
    id = prop_def(StringAttr)
    kernel = prop_def(StringAttr)
    args = var_operand_def(BufferType)
    waits = var_operand_def(TokenType)
    signal = opt_operand_def(TokenType)
    cmd = prop_def(StringAttr)
    grid = prop_def(DenseArrayBase)
    meta = prop_def(DictionaryAttr)
    scalars = prop_def(DictionaryAttr)
    autotune = prop_def(IntegerAttr)
    step = opt_prop_def(StepAttr)
    task = prop_def(StringAttr)
    impl = prop_def(StringAttr)
    lineage = prop_def(LineageAttr)
    traits = traits_def(HasParent(StreamOp))
    assembly_format = ("$id $kernel ` ` `(` $args `)` (`waits` `(` $waits^ `)`)? (`signal` $signal^)? "
                       "(`step` $step^)? attr-dict")

    def buffers(self) -> Sequence[SSAValue]:
        return self.args

    def verify_(self) -> None:
        self.verify_step()
        name = self.id.data
        grid = self.grid.get_values()
        if len(grid) != 3 or any(not isinstance(g, int) or g < 1 for g in grid):
            raise VerifyException(f"{ABI_INVARIANT}: launch '{name}': grid must be 3 positive integers, got {list(grid)}")
        if ":" not in self.kernel.data:
            raise VerifyException(f"{ABI_INVARIANT}: launch '{name}': kernel '{self.kernel.data}' is not 'module:function'")
        for k, v in self.meta.data.items():
            if not isinstance(v, IntegerAttr):
                raise VerifyException(f"{ABI_INVARIANT}: launch '{name}': meta-parameter '{k}' must be an integer, got {v}")
        for k, v in self.scalars.data.items():
            if not isinstance(v, IntegerAttr | FloatAttr) and not (isinstance(v, StringAttr) and v.data.startswith("$")):
                raise VerifyException(f"{ABI_INVARIANT}: launch '{name}': scalar '{k}' must be a number or a '$runtime' name, got {v}")


@irdl_op_definition
class ViewOp(_Instruction):
    """A command that is a view of buffer ``source`` into ``target``, not a kernel (``last_row``).

    ```mlir
    tmachine.view "i.c5" "last_row" %b3 -> %b4 step decode {cmd = "c5", task = "t5", impl = "triton.last_row",
      lineage = #cplan.lineage<decode, stage 1, "h_last">}
    ```
    """

    name = "tmachine.view"
    id = prop_def(StringAttr)
    kind = prop_def(StringAttr)
    source = operand_def(BufferType)
    target = operand_def(BufferType)
    waits = var_operand_def(TokenType)
    signal = opt_operand_def(TokenType)
    cmd = prop_def(StringAttr)
    step = opt_prop_def(StepAttr)
    task = prop_def(StringAttr)
    impl = prop_def(StringAttr)
    lineage = prop_def(LineageAttr)
    traits = traits_def(HasParent(StreamOp))
    assembly_format = ("$id $kind $source `->` $target (`waits` `(` $waits^ `)`)? (`signal` $signal^)? "
                       "(`step` $step^)? attr-dict")

    def buffers(self) -> Sequence[SSAValue]:
        return (self.source, self.target)

    def verify_(self) -> None:
        self.verify_step()
        if self.kind.data not in ("last_row",):
            raise VerifyException(f"view '{self.id.data}': unknown view kind '{self.kind.data}'")


@irdl_op_definition
class CopyOp(_Instruction):
    """A copy-engine transfer of ``bytes`` from buffer ``source`` to buffer ``target`` (edge send/recv;
    ``src``/``dst``: their ids).

    ```mlir
    tmachine.copy "i.c9" %e0 -> %b0 signal %done.c9 step decode {cmd = "c9", bytes = 16 : i64, task = "t9",
      impl = "triton.recv", lineage = #cplan.lineage<decode, stage 1, "edge:e0", edge "e0">}
    ```
    """

    name = "tmachine.copy"
    id = prop_def(StringAttr)
    source = operand_def(BufferType)
    target = operand_def(BufferType)
    waits = var_operand_def(TokenType)
    signal = opt_operand_def(TokenType)
    cmd = prop_def(StringAttr)
    bytes = prop_def(IntegerAttr)
    step = opt_prop_def(StepAttr)
    task = prop_def(StringAttr)
    impl = prop_def(StringAttr)
    lineage = prop_def(LineageAttr)
    traits = traits_def(HasParent(StreamOp))
    assembly_format = ("$id $source `->` $target (`waits` `(` $waits^ `)`)? (`signal` $signal^)? "
                       "(`step` $step^)? attr-dict")

    def buffers(self) -> Sequence[SSAValue]:
        return (self.source, self.target)

    @property
    def src(self) -> StringAttr:
        return StringAttr(buffer_id(self.source))

    @property
    def dst(self) -> StringAttr:
        return StringAttr(buffer_id(self.target))

    def verify_(self) -> None:
        self.verify_step()
        if self.bytes.value.data < 0:
            raise VerifyException(f"copy '{self.id.data}': bytes must be >= 0")


INSTRUCTIONS = (LaunchOp, ViewOp, CopyOp)

ABI_INVARIANT = "[AB-M-1] a machine program must respect its launch ABI and stream order"
"""Prefix of the on-parse messages of the tmachine verifiers (contract ID and invariant)."""


def check_streams(program: ProgramOp) -> None:
    """Whole-program checks of a ``tmachine.program`` whose ops passed their own verifiers, from its SSA
    structure: buffer, token and instruction ids unique; every buffer operand is a ``tmachine.buffer`` of this
    program with a non-empty id, every token operand a ``tmachine.token`` of this program; each token is signalled
    by one instruction, and an instruction waits only for tokens signalled in another stream; stream order plus
    waits is acyclic (no deadlock). Raises IRVerifyError at the offending instruction (or buffer/token op)."""
    top = [o for b in program.body.blocks for o in b.ops]
    for kind in (BufferOp, TokenOp):
        ids: set[str] = set()
        for o in top:
            if isinstance(o, kind):
                if o.id.data in ids:
                    raise IRVerifyError(f"{ABI_INVARIANT}: duplicate {o.name.split('.')[1]} id '{o.id.data}'", op=o)
                ids.add(o.id.data)
    mine = {o for o in top if isinstance(o, BufferOp | TokenOp)}
    streams = [[o for b in s.body.blocks for o in b.ops if isinstance(o, INSTRUCTIONS)] for s in _streams(program)]
    stream_of: dict[Operation, int] = {}
    signals: dict[SSAValue, Operation] = {}
    iids: set[str] = set()
    for si, ops in enumerate(streams):
        for o in ops:
            iid = o.id.data
            if iid in iids:
                raise IRVerifyError(f"{ABI_INVARIANT}: duplicate instruction id '{iid}'", op=o)
            iids.add(iid)
            stream_of[o] = si
            for v in o.buffers():
                if v.owner not in mine:
                    raise IRVerifyError(f"{ABI_INVARIANT}: instruction '{iid}' names buffer '{buffer_id(v)}', which "
                                        "the program does not declare", op=o)
                if not buffer_id(v):
                    raise IRVerifyError(f"{ABI_INVARIANT}: instruction '{iid}' has an empty buffer argument", op=o)
            for v in [*o.waits, *([o.signal] if o.signal is not None else [])]:
                if v.owner not in mine:
                    raise IRVerifyError(f"{ABI_INVARIANT}: instruction '{iid}' uses token '{token_id(v)}', which the "
                                        "program does not declare", op=o)
            if o.signal is not None:
                first = signals.setdefault(o.signal, o)
                if first is not o:
                    raise IRVerifyError(f"{ABI_INVARIANT}: token '{token_id(o.signal)}' is signalled by instruction "
                                        f"'{first.id.data}' and by '{iid}'", op=o)  # type: ignore[attr-defined]
    node: dict[Operation, int] = {}
    flat: list[Operation] = []
    for ops in streams:
        for o in ops:
            node[o] = len(flat)
            flat.append(o)
    preds: list[list[int]] = []
    for si, ops in enumerate(streams):
        for k, o in enumerate(ops):
            ps = [node[ops[k - 1]]] if k else []
            for t in o.waits:
                src = signals.get(t)
                if src is None:
                    raise IRVerifyError(f"{ABI_INVARIANT}: instruction '{o.id.data}' waits for token '{token_id(t)}' "
                                        "that no instruction of the program signals", op=o)
                if stream_of[src] == si:
                    raise IRVerifyError(f"{ABI_INVARIANT}: instruction '{o.id.data}' waits for token '{token_id(t)}' "
                                        f"signalled by '{src.id.data}' of its own stream (stream order already "  # type: ignore[attr-defined]
                                        "orders them)", op=o)
                ps.append(node[src])
            preds.append(ps)
    if stable_topo_order(len(flat), preds) is None:
        o = flat[cycle_members(len(flat), preds)[0]]
        raise IRVerifyError(f"{ABI_INVARIANT}: stream order and waits deadlock at instruction "
                            f"'{o.id.data}'", op=o)  # type: ignore[attr-defined]


def _streams(program: ProgramOp) -> list[StreamOp]:
    return [o for b in program.body.blocks for o in b.ops if isinstance(o, StreamOp)]


Tmachine = Dialect("tmachine", [ProgramOp, BufferOp, TokenOp, StreamOp, LaunchOp, ViewOp, CopyOp],
                   [BufferType, TokenType, LifetimeAttr, StepAttr])

__all__ = ["ABI_INVARIANT", "BufferOp", "BufferType", "CopyOp", "LIFETIMES", "INSTRUCTIONS", "LaunchOp", "LifetimeAttr", "ProgramOp",
           "REVISION", "STEPS", "StepAttr", "StreamOp", "TokenOp", "TokenType", "Tmachine", "ViewOp", "buffer_id", "check_streams",
           "signaller", "step_attr", "token_id"]
