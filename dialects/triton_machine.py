"""The ``tmachine`` dialect: the CUDA/Triton target's MachineIR (seeds/003 "Machine lowering and
artifact emission", AB-M-1).

``convert-cplan-to-triton`` lowers each concrete command of a ``cuda-triton`` concrete plan to one
machine instruction; nothing is added that the concrete plan did not decide (AB-M-4): streams are the
plan's queues, instruction order is the queue order, cross-stream ``waits`` are the plan's
dependencies on commands of other queues.

* ``tmachine.program`` (``target``, ``concrete`` = sha256 of the concrete plan it lowers,
  ``revision``) holds the ``tmachine.buffer`` declarations (the plan's allocations) and one
  ``tmachine.stream`` per (device, engine) queue;
* ``tmachine.buffer``: one concrete allocation -- ``id`` (the alloc id instructions name), ``device``,
  ``dtype``/``shape`` (of the portable buffer it holds), ``lifetime`` (``weight``, ``kv``, ``transient``,
  ``edge``) and ``origin`` (the GGUF tensor name of a weight, ``rope_table``/``rope_table_swa``,
  ``blk.N.cache_k``/``cache_v``, ``<step>:<value>`` of a transient, ``edge <id> (<kind>)``);
* ``tmachine.stream`` holds instructions in queue order:

  - ``tmachine.launch``: one Triton kernel launch -- ``kernel`` (``module:function`` of a ``@triton.jit``
    kernel, the module named within the target's kernel package: the IR names no runtime import path,
    the runtime resolves the package from ``target``), ``grid`` (3 positive ints),
    ``meta`` (constexpr meta-parameters: block sizes, format codes, ``num_warps``), ``args`` (buffer
    arguments, concrete alloc ids, in kernel parameter order), ``scalars`` (scalar arguments: ints,
    floats, or a ``"$<name>"`` bound at run time: ``"$start_pos"`` the step's position, any other
    ``"$<attr>"`` the attribute of that name of the stage-program kernel call the command lowers, recorded
    so when the lowering had no model ABI), ``autotune`` (the runtime may retune the block sizes per its
    key; the grid is then recomputed from them);
  - ``tmachine.view``: a command that is a view, not a kernel (``last_row``);
  - ``tmachine.copy``: a copy-engine transfer (edge ``send``/``recv``) of ``bytes`` from ``src`` to ``dst``.

Every instruction carries ``id``, ``cmd`` (the concrete command it lowers), ``step`` (optional: the
plan step it belongs to, ``prefill``/``decode``; absent, it runs in every step), ``waits`` (commands of
other streams that must complete first) and ``lineage`` (the concrete command's lineage path, so a
diagnostic reaches model op -> stage/block -> portable task -> candidate -> command -> instruction,
AB-D-1).
"""

from __future__ import annotations

from typing import ClassVar

from pipeplan.dialects.carriers import PropsInAttrDict, check_strs
from pipeplan.dialects.diagnostics import IRVerifyError, PipeplanOp
from pipeplan.dialects.graph import cycle_members, stable_topo_order
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    StringAttr,
)
from xdsl.ir import Dialect, Operation
from xdsl.irdl import (
    ParsePropInAttrDict,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
)
from xdsl.traits import HasParent, NoTerminator
from xdsl.utils.exceptions import VerifyException

REVISION = "pipeplan-tmachine/1"
"""Revision of this MachineIR and its lowering."""


@irdl_op_definition
class ProgramOp(PipeplanOp):
    """A Triton machine program: the lowering of one concrete plan.

    ```mlir
    tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/1"} {
      tmachine.buffer {id = "b0", device = "n0", dtype = "f32", shape = array<i64: 4, 64>, lifetime = "transient",
        origin = "prefill:h0"}
      tmachine.stream {device = "n0", engine = "cuda.stream"} {
        tmachine.launch {id = "i.c0", cmd = "c0", kernel = "rmsnorm:_rms_norm_kernel",
          grid = array<i64: 4, 1, 1>, meta = {BLOCK_D = 64 : i64}, args = ["b0", "w0", "b1"],
          scalars = {D = 64 : i64}, autotune = false, waits = [], lineage = "blk.0.attn_norm -> c0"}
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
                if isinstance(op, BufferOp):
                    continue
                if not isinstance(op, StreamOp):
                    raise IRVerifyError(f"unexpected op '{op.name}' in a tmachine.program (buffers and streams only)",
                                        op=op)
                key = f"{op.device.data}/{op.engine.data}"
                if key in seen:
                    raise IRVerifyError(f"stream {key} appears twice", op=op)
                seen.add(key)
        check_streams(self)


@irdl_op_definition
class BufferOp(PropsInAttrDict):
    """One concrete allocation the instructions name by ``id`` (see the module docstring).

    ```mlir
    tmachine.buffer {id = "alloc.s0.blk.0.cache_k", device = "n0", dtype = "f32", shape = array<i64: 64, 4, 8>,
      lifetime = "kv", origin = "blk.0.cache_k"}
    ```
    """

    name = "tmachine.buffer"
    id = prop_def(StringAttr)
    device = prop_def(StringAttr)
    dtype = prop_def(StringAttr)
    shape = prop_def(DenseArrayBase)
    lifetime = prop_def(StringAttr)
    origin = prop_def(StringAttr)
    traits = traits_def(HasParent(ProgramOp))

    def verify_(self) -> None:
        if self.lifetime.data not in LIFETIMES:
            raise VerifyException(f"buffer '{self.id.data}': lifetime '{self.lifetime.data}' is not one of "
                                  f"{', '.join(LIFETIMES)}")
        if any(not isinstance(d, int) or d < 0 for d in self.shape.get_values()):
            raise VerifyException(f"buffer '{self.id.data}': shape must be non-negative integers")


LIFETIMES = ("weight", "kv", "transient", "edge")
"""``tmachine.buffer`` lifetimes (the concrete plan's allocation lifetimes)."""


@irdl_op_definition
class StreamOp(PipeplanOp):
    """One queue (CUDA stream or copy engine) of a device; its instructions run in order.

    ```mlir
    tmachine.stream {device = "n0", engine = "cuda.copy"} {
      tmachine.copy {id = "i.c9", cmd = "c9", src = "e0", dst = "b0", bytes = 16 : i64, waits = [], lineage = "edge:e0"}
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
                if not isinstance(op, LaunchOp | ViewOp | CopyOp):
                    raise IRVerifyError(f"unexpected op '{op.name}' in a tmachine.stream", op=op)


@irdl_op_definition
class LaunchOp(PropsInAttrDict):
    """One Triton kernel launch (see the module docstring).

    ```mlir
    tmachine.launch {id = "i.c1", cmd = "c1", kernel = "gemv:_gemv_kernel",
      grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, USE_DOT = 0 : i64, BLOCK_M = 1 : i64, BLOCK_N = 16 : i64,
      BLOCK_K = 256 : i64}, args = ["x", "w", "y"], scalars = {M = 1 : i64, N = 64 : i64, K = 64 : i64},
      autotune = true, waits = [], lineage = "blk.0.attn_q -> c1"}
    ```
    """

    name = "tmachine.launch"
    KEYWORD_DICTS: ClassVar[tuple[str, ...]] = ("meta", "scalars")
    id = prop_def(StringAttr)
    cmd = prop_def(StringAttr)
    kernel = prop_def(StringAttr)
    grid = prop_def(DenseArrayBase)
    meta = prop_def(DictionaryAttr)
    args = prop_def(ArrayAttr)
    scalars = prop_def(DictionaryAttr)
    autotune = prop_def(IntegerAttr)
    step = opt_prop_def(StringAttr)
    waits = prop_def(ArrayAttr)
    lineage = prop_def(StringAttr)
    traits = traits_def(HasParent(StreamOp))

    def verify_(self) -> None:
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
        check_strs(self.args, f"launch '{name}': args")
        check_strs(self.waits, f"launch '{name}': waits")


@irdl_op_definition
class ViewOp(PropsInAttrDict):
    """A command that is a view of a buffer, not a kernel (``last_row``).

    ```mlir
    tmachine.view {id = "i.c5", cmd = "c5", kind = "last_row", args = ["b3", "b4"], waits = [], lineage = "h_last"}
    ```
    """

    name = "tmachine.view"
    id = prop_def(StringAttr)
    cmd = prop_def(StringAttr)
    kind = prop_def(StringAttr)
    args = prop_def(ArrayAttr)
    step = opt_prop_def(StringAttr)
    waits = prop_def(ArrayAttr)
    lineage = prop_def(StringAttr)
    traits = traits_def(HasParent(StreamOp))

    def verify_(self) -> None:
        if self.kind.data not in ("last_row",):
            raise VerifyException(f"view '{self.id.data}': unknown view kind '{self.kind.data}'")


@irdl_op_definition
class CopyOp(PropsInAttrDict):
    """A copy-engine transfer of ``bytes`` from alloc ``src`` to alloc ``dst`` (edge send/recv).

    ```mlir
    tmachine.copy {id = "i.c9", cmd = "c9", src = "e0", dst = "b0", bytes = 16 : i64, waits = [], lineage = "edge:e0"}
    ```
    """

    name = "tmachine.copy"
    id = prop_def(StringAttr)
    cmd = prop_def(StringAttr)
    src = prop_def(StringAttr)
    dst = prop_def(StringAttr)
    bytes = prop_def(IntegerAttr)
    step = opt_prop_def(StringAttr)
    waits = prop_def(ArrayAttr)
    lineage = prop_def(StringAttr)
    traits = traits_def(HasParent(StreamOp))

    def verify_(self) -> None:
        if self.bytes.value.data < 0:
            raise VerifyException(f"copy '{self.id.data}': bytes must be >= 0")


INSTRUCTIONS = (LaunchOp, ViewOp, CopyOp)

STEPS = ("prefill", "decode")
"""The plan steps an instruction's ``step`` may name (absent: every step)."""

ABI_INVARIANT = "[AB-M-1] a machine program must respect its launch ABI and stream order"
"""Prefix of the on-parse messages of the tmachine verifiers (contract ID and invariant)."""


def check_streams(program: ProgramOp) -> None:
    """Whole-program checks of a ``tmachine.program`` whose ops passed their own verifiers: instruction
    ids unique; an instruction's ``step``, when present, one of :data:`STEPS`; every instruction's buffer
    arguments are non-empty alloc ids and, when the program declares its buffers, declared ones (buffer ids
    unique); every ``waits`` entry names a command lowered by an instruction of another stream; stream order
    plus waits is acyclic (no deadlock). Raises IRVerifyError at the offending instruction."""
    streams = [list(b.ops) for s in _streams(program) for b in s.body.blocks]
    declared: set[str] = set()
    for buf in (o for b in program.body.blocks for o in b.ops if isinstance(o, BufferOp)):
        if buf.id.data in declared:
            raise IRVerifyError(f"{ABI_INVARIANT}: duplicate buffer id '{buf.id.data}'", op=buf)
        declared.add(buf.id.data)
    by_cmd: dict[str, tuple[int, int]] = {}
    ids: set[str] = set()
    for si, ops in enumerate(streams):
        for k, o in enumerate(ops):
            if not isinstance(o, INSTRUCTIONS):
                continue
            if o.id.data in ids:
                raise IRVerifyError(f"{ABI_INVARIANT}: duplicate instruction id '{o.id.data}'", op=o)
            ids.add(o.id.data)
            if o.step is not None and o.step.data not in STEPS:
                raise IRVerifyError(f"{ABI_INVARIANT}: instruction '{o.id.data}' belongs to step '{o.step.data}', "
                                    f"not one of {', '.join(STEPS)}", op=o)
            by_cmd.setdefault(o.cmd.data, (si, k))
            names = [o.src.data, o.dst.data] if isinstance(o, CopyOp) else [a.data for a in o.args.data
                                                                             if isinstance(a, StringAttr)]
            if any(not n for n in names):
                raise IRVerifyError(f"{ABI_INVARIANT}: instruction '{o.id.data}' has an empty buffer argument", op=o)
            unknown = [n for n in names if declared and n not in declared]
            if unknown:
                raise IRVerifyError(f"{ABI_INVARIANT}: instruction '{o.id.data}' names buffer '{unknown[0]}', which "
                                    "the program does not declare", op=o)
    preds: list[list[int]] = []
    node: dict[tuple[int, int], int] = {}
    flat: list[Operation] = []
    for si, ops in enumerate(streams):
        for k, o in enumerate(ops):
            node[(si, k)] = len(flat)
            flat.append(o)
    for si, ops in enumerate(streams):
        for k, o in enumerate(ops):
            ps = [node[(si, k - 1)]] if k else []
            for w in (x.data for x in o.waits.data if isinstance(x, StringAttr)) if isinstance(o, INSTRUCTIONS) else ():
                src = by_cmd.get(w)
                if src is None:
                    raise IRVerifyError(f"{ABI_INVARIANT}: instruction '{o.id.data}' waits for command '{w}' that no "
                                        f"instruction of the program lowers", op=o)
                if src[0] == si:
                    raise IRVerifyError(f"{ABI_INVARIANT}: instruction '{o.id.data}' waits for command '{w}' of its "
                                        f"own stream (stream order already orders them)", op=o)
                ps.append(node[src])
            preds.append(ps)
    if stable_topo_order(len(flat), preds) is None:
        o = flat[cycle_members(len(flat), preds)[0]]
        raise IRVerifyError(f"{ABI_INVARIANT}: stream order and waits deadlock at instruction "
                            f"'{getattr(o, 'id', StringAttr('?')).data}'", op=o)


def _streams(program: ProgramOp) -> list[StreamOp]:
    return [o for b in program.body.blocks for o in b.ops if isinstance(o, StreamOp)]


Tmachine = Dialect("tmachine", [ProgramOp, BufferOp, StreamOp, LaunchOp, ViewOp, CopyOp], [])

__all__ = ["ABI_INVARIANT", "BufferOp", "CopyOp", "LIFETIMES", "INSTRUCTIONS", "LaunchOp", "ProgramOp", "REVISION", "StreamOp", "Tmachine",
           "ViewOp", "check_streams"]
