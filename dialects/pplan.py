"""The ``pplan`` dialect: PortablePlanIR (seed 003, "Binding gate" input; DESIGN.md §3).

A portable plan states *what* work a run does, before any target is chosen:

* ``pplan.plan`` — one per module: the run id and a single-block region (no terminator) holding
  buffers and tasks, in program order.
* ``pplan.buffer`` — a named byte range: dtype, shape (row-major, numpy order), exact bytes,
  alignment, lifetime class ``weight | kv | transient | edge``, the stage it lives on (-1 for an
  edge object, which both endpoints see) and lineage (GGUF tensor or edge id).
* ``pplan.task`` — one unit of exact work at the granularity of one runtime kernel call (or one
  edge transfer): portable op name, flops, bytes read and written (per buffer access), operand
  dtypes, work shape, layout, alignment, memory-space requirement, collective kind, explicit
  dependencies, and lineage to the RunPlan (step, stage, block, model op).

Analysis results never live inside ``pplan.plan``: bindings (``dialects/bindings.py``),
implementation candidates (``pplan.candidates``) and costs (``pplan.costed_view``) are sibling ops
at module level. The **portable digest** (:func:`portable_digest`) is the sha256 of the generic
print of the ``pplan.plan`` op with every discardable attribute stripped, so binding,
legalization, selection and cost resolution cannot change it (AB-G-2, AB-C-2).

Every attribute uses a carrier upstream MLIR parses (StringAttr, IntegerAttr i64, FloatAttr f64,
ArrayAttr, DenseArrayBase i64, SymbolRefAttr, DictionaryAttr).

Sizes: bytes of a buffer of dtype ``d`` and shape ``s`` are ``prod(s) / block(d) * type_size(d)``
with ``(block, type_size)`` from ``gguf.constants.GGML_QUANT_SIZES`` (llama.cpp's table); the
innermost dimension must be a multiple of the block size.
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache

from gguf.constants import GGML_QUANT_SIZES
from pipeplan.dialects.bindings import DeploymentBindingOp, EvidencePolicyOp, TargetBindingOp
from pipeplan.dialects.carriers import i64_attr, int_array, int_tuple, string, string_elements, strings
from pipeplan.dialects.diagnostics import PipeplanOp
from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
    f64,
    i64,
)
from xdsl.ir import Attribute, Dialect, Operation, Region
from xdsl.irdl import (
    ParsePropInAttrDict,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
)
from xdsl.traits import NoTerminator, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException

# --------------------------------------------------------------------------- vocabulary
DTYPE_SIZES: dict[str, tuple[int, int]] = {t.name.lower(): v for t, v in GGML_QUANT_SIZES.items()}
"""dtype name -> (elements per block, bytes per block), from gguf's GGML_QUANT_SIZES."""

LIFETIMES = ("weight", "kv", "transient", "edge")
"""Buffer lifetime classes (issue 4, item 1)."""

MEMSPACES = ("device", "host", "link")
"""Memory-space requirement of a task or buffer: device memory, host memory, or an edge link."""

COLLECTIVES = ("none", "send", "recv")
"""Collective kind of a task: point-to-point edge transfers are the only collectives so far."""

COST_STATUSES = ("direct", "fallback", "out_of_domain")
"""Status of a resolved estimate (see CostOp)."""

LAYOUTS = ("row_major",)
"""Layouts a task may require (activations and weights are row-major, GGUF order reversed)."""

STEPS = ("prefill", "decode")
"""The steps a portable plan describes: one prefill of the prompt, one decode of one token."""

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


# --------------------------------------------------------------------------- ops
@irdl_op_definition
class BufferOp(PipeplanOp):
    """A declared buffer of the portable plan.

    Properties: ``dtype`` (key of DTYPE_SIZES), ``shape`` (numpy order), ``bytes`` (exact, must
    equal :func:`dtype_nbytes`), ``alignment`` (power of two, bytes), ``lifetime`` (one of
    LIFETIMES), ``memspace`` (one of MEMSPACES), ``stage`` (owning stage, -1 for an edge object),
    ``origin`` (lineage: GGUF tensor name, ``kv:<block>:k|v``, edge id, or ``<step>:<value>``).

    Example:
    ```mlir
    pplan.buffer @s0.w.blk.0.attn_q.weight {alignment = 32 : i64, bytes = 16384 : i64,
      dtype = "f32", lifetime = "weight", memspace = "device", origin = "blk.0.attn_q.weight",
      shape = array<i64: 64, 64>, stage = 0 : i64}
    ```
    """

    name = "pplan.buffer"

    sym_name = prop_def(SymbolNameConstraint())
    dtype = prop_def(StringAttr)
    shape = prop_def(DenseArrayBase.constr(i64))
    bytes = prop_def(IntegerAttr[I64])
    alignment = prop_def(IntegerAttr[I64])
    lifetime = prop_def(StringAttr)
    memspace = prop_def(StringAttr)
    stage = prop_def(IntegerAttr[I64])
    origin = prop_def(StringAttr)

    traits = traits_def(SymbolOpInterface())
    assembly_format = "$sym_name attr-dict"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, name: str, *, dtype: str, shape: Sequence[int], nbytes: int, alignment: int,
                 lifetime: str, memspace: str, stage: int, origin: str):
        super().__init__(properties={
            "sym_name": string(name), "dtype": string(dtype), "shape": int_array(shape), "bytes": i64_attr(nbytes),
            "alignment": i64_attr(alignment), "lifetime": string(lifetime), "memspace": string(memspace),
            "stage": i64_attr(stage), "origin": string(origin),
        })

    def verify_(self) -> None:
        where = f"buffer @{self.sym_name.data}"
        if self.lifetime.data not in LIFETIMES:
            raise VerifyException(f"{where}: lifetime {self.lifetime.data!r} is not one of {list(LIFETIMES)}")
        if self.memspace.data not in MEMSPACES:
            raise VerifyException(f"{where}: memspace {self.memspace.data!r} is not one of {list(MEMSPACES)}")
        if not _pow2(self.alignment.value.data):
            raise VerifyException(f"{where}: alignment {self.alignment.value.data} is not a power of two")
        shape = ints(self.shape)
        try:
            expect = dtype_nbytes(self.dtype.data, shape)
        except ValueError as e:
            raise VerifyException(f"{where}: {e}") from None
        if expect != self.bytes.value.data:
            raise VerifyException(
                f"{where}: bytes {self.bytes.value.data} inconsistent with dtype {self.dtype.data} and shape "
                f"{list(shape)} (expected {expect})")
        if (self.lifetime.data == "edge") != (self.stage.value.data == -1):
            raise VerifyException(f"{where}: edge buffers (and only they) have stage -1")


@irdl_op_definition
class TaskOp(PipeplanOp):
    """One portable task: the exact work of one runtime kernel call or one edge transfer.

    Properties:
      * ``op`` — portable op name (PORTABLE_OPS); ``collective`` — ``none | send | recv`` (edge
        transfers are ``send``/``recv`` and carry ``edge``, the RunPlan edge id).
      * ``reads``/``writes`` — buffers accessed (symbol refs to ``pplan.buffer``), with
        ``read_bytes``/``write_bytes`` the bytes of each access (<= the buffer's bytes);
        ``bytes_read``/``bytes_written`` are their sums. ``dtypes`` lists the operand dtypes,
        reads then writes, and must equal the buffers' dtypes.
      * ``flops`` — floating-point operations (a multiply-add counts 2); ``shape`` — the work
        shape (``matmul``: ``[M, N, K]`` with ``flops = 2*M*N*K``; others: their output shape).
      * ``layout``, ``alignment`` (bytes every operand must be aligned to), ``memspace``.
      * ``deps`` — tasks that must finish first (RAW/WAR/WAW hazards on buffers, and edge order).
      * lineage: ``step`` (prefill|decode), ``stage``, ``block`` (-1 outside blocks), ``model_op``
        (e.g. ``blk.3.attn_q`` or ``edge:e1``).

    Example:
    ```mlir
    pplan.task @decode.s0.b0.attn_q {alignment = 32 : i64, block = 0 : i64, bytes_read = 16640 : i64,
      bytes_written = 256 : i64, collective = "none", deps = [@decode.s0.b0.attn_norm],
      dtypes = ["f32", "f32", "f32"], flops = 8192 : i64, layout = "row_major", memspace = "device",
      model_op = "blk.0.attn_q", op = "matmul", read_bytes = array<i64: 256, 16384>,
      reads = [@decode.s0.b0.xn, @s0.w.blk.0.attn_q.weight], shape = array<i64: 1, 64, 64>,
      stage = 0 : i64, step = "decode", write_bytes = array<i64: 256>, writes = [@decode.s0.b0.q]}
    ```
    """

    name = "pplan.task"

    sym_name = prop_def(SymbolNameConstraint())
    op = prop_def(StringAttr)
    step = prop_def(StringAttr)
    stage = prop_def(IntegerAttr[I64])
    block = prop_def(IntegerAttr[I64])
    model_op = prop_def(StringAttr)
    flops = prop_def(IntegerAttr[I64])
    bytes_read = prop_def(IntegerAttr[I64])
    bytes_written = prop_def(IntegerAttr[I64])
    reads = prop_def(ArrayAttr[SymbolRefAttr])
    read_bytes = prop_def(DenseArrayBase.constr(i64))
    writes = prop_def(ArrayAttr[SymbolRefAttr])
    write_bytes = prop_def(DenseArrayBase.constr(i64))
    dtypes = prop_def(ArrayAttr[StringAttr])
    shape = prop_def(DenseArrayBase.constr(i64))
    layout = prop_def(StringAttr)
    alignment = prop_def(IntegerAttr[I64])
    memspace = prop_def(StringAttr)
    collective = prop_def(StringAttr)
    edge = opt_prop_def(StringAttr)
    deps = prop_def(ArrayAttr[SymbolRefAttr])

    traits = traits_def(SymbolOpInterface())
    assembly_format = "$sym_name attr-dict"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, name: str, *, op: str, step: str, stage: int, block: int, model_op: str, flops: int,
                 reads: Sequence[str], read_bytes: Sequence[int], writes: Sequence[str],
                 write_bytes: Sequence[int], dtypes: Sequence[str], shape: Sequence[int],
                 deps: Sequence[str], layout: str = "row_major", alignment: int = 32,
                 memspace: str = "device", collective: str = "none", edge: str | None = None):
        props: dict[str, Attribute] = {
            "sym_name": string(name), "op": string(op), "step": string(step), "stage": i64_attr(stage), "block": i64_attr(block),
            "model_op": string(model_op), "flops": i64_attr(flops), "bytes_read": i64_attr(sum(read_bytes)),
            "bytes_written": i64_attr(sum(write_bytes)), "reads": _refs(reads), "read_bytes": int_array(read_bytes),
            "writes": _refs(writes), "write_bytes": int_array(write_bytes), "dtypes": strings(dtypes),
            "shape": int_array(shape), "layout": string(layout), "alignment": i64_attr(alignment), "memspace": string(memspace),
            "collective": string(collective), "deps": _refs(deps),
        }
        if edge is not None:
            props["edge"] = string(edge)
        super().__init__(properties=props)

    @property
    def lineage(self) -> str:
        """``model op -> stage/block -> portable task`` (AB-D-1), for diagnostics."""
        blk = self.block.value.data
        where = f"stage {self.stage.value.data}" + (f" block {blk}" if blk >= 0 else "")
        return f"model op {self.model_op.data} -> {where} ({self.step.data}) -> task @{self.sym_name.data}"

    def verify_(self) -> None:
        where = f"task @{self.sym_name.data}"
        op = self.op.data
        if op not in PORTABLE_OPS:
            raise VerifyException(f"{where}: unknown portable op {op!r}")
        if self.step.data not in STEPS:
            raise VerifyException(f"{where}: step {self.step.data!r} is not one of {list(STEPS)}")
        if self.layout.data not in LAYOUTS:
            raise VerifyException(f"{where}: layout {self.layout.data!r} is not one of {list(LAYOUTS)}")
        if self.memspace.data not in MEMSPACES:
            raise VerifyException(f"{where}: memspace {self.memspace.data!r} is not one of {list(MEMSPACES)}")
        coll = self.collective.data
        if coll not in COLLECTIVES:
            raise VerifyException(f"{where}: collective {coll!r} is not one of {list(COLLECTIVES)}")
        if (op in ("send", "recv")) != (coll != "none") or (coll != "none" and coll != op):
            raise VerifyException(f"{where}: op {op} requires collective {op if op in ('send', 'recv') else 'none'}")
        if (coll != "none") != (self.edge is not None):
            raise VerifyException(f"{where}: edge transfers (and only they) name an edge")
        if not _pow2(self.alignment.value.data):
            raise VerifyException(f"{where}: alignment {self.alignment.value.data} is not a power of two")
        rb, wb = ints(self.read_bytes), ints(self.write_bytes)
        if len(rb) != len(self.reads.data) or len(wb) != len(self.writes.data):
            raise VerifyException(f"{where}: one byte count per buffer access expected")
        if any(b < 0 for b in rb + wb) or self.flops.value.data < 0:
            raise VerifyException(f"{where}: negative byte or flop count")
        if sum(rb) != self.bytes_read.value.data or sum(wb) != self.bytes_written.value.data:
            raise VerifyException(
                f"{where}: bytes_read/bytes_written {self.bytes_read.value.data}/{self.bytes_written.value.data} "
                f"differ from the sums of the accesses {sum(rb)}/{sum(wb)}")
        if len(self.dtypes.data) != len(rb) + len(wb):
            raise VerifyException(f"{where}: one dtype per operand (reads then writes) expected")
        if op == "matmul":
            shape = ints(self.shape)
            if len(shape) != 3 or self.flops.value.data != 2 * math.prod(shape):
                raise VerifyException(f"{where}: matmul flops {self.flops.value.data} inconsistent with work shape "
                                      f"[M, N, K] = {list(shape)} (expected 2*M*N*K)")


@irdl_op_definition
class PlanOp(PipeplanOp):
    """The portable plan of one run: buffers and tasks in program order.

    Properties: ``sym_name`` (run id), ``stage_count``, ``prompt_len`` (tokens of the prefill step),
    ``decode_pos`` (position of the decode step's token), ``model`` (GGUF model name),
    ``source`` (lineage: ``runplan @<run id>``).

    Verifier (whole plan, linear in ops + edges): symbols unique; every buffer use names a declared
    buffer; every access within the buffer's bytes; operand dtypes equal the buffers'; every
    dependency names a declared task (closed) and the dependency graph is acyclic.

    Example:
    ```mlir
    pplan.plan @run0 {decode_pos = 4 : i64, model = "m", prompt_len = 4 : i64, source = "runplan @run0",
                      stage_count = 1 : i64} {
      pplan.buffer @b {alignment = 32 : i64, bytes = 16 : i64, dtype = "i32", lifetime = "transient",
        memspace = "device", origin = "decode:tokens", shape = array<i64: 4>, stage = 0 : i64}
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
            regions=[Region(_block(ops))],
        )

    def buffers(self) -> list[BufferOp]:
        """The plan's buffers, in order."""
        return [o for o in self.body.block.ops if isinstance(o, BufferOp)]

    def tasks(self) -> list[TaskOp]:
        """The plan's tasks, in program order."""
        return [o for o in self.body.block.ops if isinstance(o, TaskOp)]

    def verify_(self) -> None:
        bufs: dict[str, BufferOp] = {}
        order: dict[str, int] = {}
        tasks: list[TaskOp] = []
        for o in self.body.block.ops:
            if isinstance(o, BufferOp):
                n = o.sym_name.data
                if n in bufs or n in order:
                    raise VerifyException(f"plan @{self.sym_name.data}: symbol @{n} declared twice")
                bufs[n] = o
            elif isinstance(o, TaskOp):
                n = o.sym_name.data
                if n in bufs or n in order:
                    raise VerifyException(f"plan @{self.sym_name.data}: symbol @{n} declared twice")
                order[n] = len(tasks)
                tasks.append(o)
            else:
                raise VerifyException(f"plan @{self.sym_name.data}: unexpected op {o.name} (only pplan.buffer and pplan.task)")
        for t in tasks:
            where = f"task @{t.sym_name.data}"
            dts = str_list(t.dtypes)
            names = ref_names(t.reads) + ref_names(t.writes)
            sizes = ints(t.read_bytes) + ints(t.write_bytes)
            for k, (bname, nbytes) in enumerate(zip(names, sizes)):
                b = bufs.get(bname)
                if b is None:
                    raise VerifyException(f"{where}: uses undeclared buffer @{bname}")
                if nbytes > b.bytes.value.data:
                    raise VerifyException(f"{where}: accesses {nbytes} bytes of buffer @{bname} which holds "
                                          f"{b.bytes.value.data}")
                if dts[k] != b.dtype.data:
                    raise VerifyException(f"{where}: operand {k} dtype {dts[k]} differs from buffer @{bname} dtype "
                                          f"{b.dtype.data}")
            for d in ref_names(t.deps):
                if d not in order:
                    raise VerifyException(f"{where}: depends on undeclared task @{d}")
        _check_acyclic(tasks, order)


def _check_acyclic(tasks: list[TaskOp], order: dict[str, int]) -> None:
    """Kahn's algorithm over the dependency graph; raises naming a task on a cycle (AB-S-1)."""
    indeg = [0] * len(tasks)
    succ: list[list[int]] = [[] for _ in tasks]
    for i, t in enumerate(tasks):
        for d in ref_names(t.deps):
            succ[order[d]].append(i)
            indeg[i] += 1
    ready = [i for i, k in enumerate(indeg) if k == 0]
    seen = 0
    while ready:
        i = ready.pop()
        seen += 1
        for j in succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(j)
    if seen != len(tasks):
        stuck = next(t for i, t in enumerate(tasks) if indeg[i] > 0)
        raise VerifyException(f"dependency cycle through task @{stuck.sym_name.data}")


def _block(ops: Sequence[Operation]):
    from xdsl.ir import Block

    return Block(list(ops))


# --------------------------------------------------------------------------- analysis ops
@irdl_op_definition
class CandidateOp(PipeplanOp):
    """One legal implementation candidate of a portable task (AB-I-1).

    Properties: ``task`` (the originating ``pplan.task``), ``impl`` (implementation id),
    ``rule`` (the target capability rule that admitted it), ``plugin_revision``, ``resources``
    (dictionary of required resources: ``engine``, ``workspace_bytes``, ...), ``rejected`` (the
    other rules for this task's op and why each was rejected, ``"<rule>: <reason>"``), ``rank``
    (selection order: 0 is preferred; -1 until ``pplan-select-implementations`` ran).

    Example:
    ```mlir
    pplan.candidate @c.decode.s0.b0.attn_q.vq_matmul {impl = "vq.matmul", plugin_revision = "virtual-queue@1",
      rank = 0 : i64, rejected = [], resources = {engine = "compute", workspace_bytes = 0 : i64},
      rule = "vq.matmul", task = @decode.s0.b0.attn_q}
    ```
    """

    name = "pplan.candidate"

    sym_name = prop_def(SymbolNameConstraint())
    task = prop_def(SymbolRefAttr)
    impl = prop_def(StringAttr)
    rule = prop_def(StringAttr)
    plugin_revision = prop_def(StringAttr)
    resources = prop_def(DictionaryAttr)
    rejected = prop_def(ArrayAttr[StringAttr])
    rank = prop_def(IntegerAttr[I64])

    traits = traits_def(SymbolOpInterface())
    assembly_format = "$sym_name attr-dict"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, name: str, *, task: str, impl: str, rule: str, plugin_revision: str,
                 resources: dict[str, Attribute], rejected: Sequence[str], rank: int = -1):
        super().__init__(properties={
            "sym_name": string(name), "task": _ref(task), "impl": string(impl), "rule": string(rule),
            "plugin_revision": string(plugin_revision), "resources": DictionaryAttr(resources),
            "rejected": strings(rejected), "rank": i64_attr(rank),
        })


@irdl_op_definition
class CandidatesOp(PipeplanOp):
    """Analysis: the legal implementation candidates of a portable plan on one target.

    Lives next to ``pplan.plan`` (never inside it). Properties: ``plan`` (the plan symbol),
    ``target`` (target plugin name), ``portable_digest`` (digest of the plan it was computed on),
    ``selected`` (set once ``pplan-select-implementations`` ran: candidates kept per task).

    Example:
    ```mlir
    pplan.candidates {plan = @run0, portable_digest = "ab12", selected = 1 : i64, target = "virtual-queue"} {
    }
    ```
    """

    name = "pplan.candidates"

    plan = prop_def(SymbolRefAttr)
    target = prop_def(StringAttr)
    portable_digest = prop_def(StringAttr)
    selected = prop_def(IntegerAttr[I64])
    body = region_def("single_block")

    traits = traits_def(NoTerminator())
    assembly_format = "attr-dict-with-keyword $body"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, *, plan: str, target: str, portable_digest: str, ops: Sequence[Operation] = (),
                 selected: int = 0):
        super().__init__(properties={"plan": SymbolRefAttr(plan), "target": string(target),
                                     "portable_digest": string(portable_digest), "selected": i64_attr(selected)},
                         regions=[Region(_block(ops))])


@irdl_op_definition
class CostOp(PipeplanOp):
    """One resolved estimate of the CostedTaskView (AB-C-1, AB-C-3).

    Properties: ``candidate`` (a ``pplan.candidate``), ``task``, ``duration_s`` (f64 seconds),
    ``provider`` (the provider that answered: ``roofline``, ``measured``), ``confidence`` (f64 in
    [0, 1]), ``status``: ``direct`` (the policy's first provider answered in its domain),
    ``fallback`` (a later provider answered because an earlier one had no in-domain evidence),
    ``out_of_domain`` (only extrapolated evidence existed), ``key`` (the normalized request key).

    Example:
    ```mlir
    pplan.cost {candidate = @c.t.vq_matmul, confidence = 5.000000e-01 : f64, duration_s = 1.0e-06 : f64,
      key = "matmul|f32,f32,f32|1x64x64", provider = "roofline", status = "direct", task = @t}
    ```
    """

    name = "pplan.cost"

    candidate = prop_def(SymbolRefAttr)
    task = prop_def(SymbolRefAttr)
    duration_s = prop_def(FloatAttr)
    provider = prop_def(StringAttr)
    confidence = prop_def(FloatAttr)
    status = prop_def(StringAttr)
    key = prop_def(StringAttr)

    assembly_format = "attr-dict"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, *, candidate: str, task: str, duration_s: float, provider: str, confidence: float,
                 status: str, key: str):
        super().__init__(properties={
            "candidate": SymbolRefAttr(candidate), "task": _ref(task),
            "duration_s": FloatAttr(duration_s, f64), "provider": string(provider),
            "confidence": FloatAttr(confidence, f64), "status": string(status), "key": string(key)})

    def verify_(self) -> None:
        if self.status.data not in COST_STATUSES:
            raise VerifyException(f"cost of @{self.task.root_reference.data}: status {self.status.data!r} is not one "
                                  f"of {list(COST_STATUSES)}")
        c = self.confidence.value.data
        if not 0.0 <= c <= 1.0 or self.duration_s.value.data < 0:
            raise VerifyException(f"cost of @{self.task.root_reference.data}: confidence must be in [0, 1] and "
                                  f"duration >= 0")
        if self.status.data != "direct" and self.provider.data == "measured" and self.status.data != "out_of_domain":
            raise VerifyException(f"cost of @{self.task.root_reference.data}: a measured estimate is either direct "
                                  f"or out_of_domain")


@irdl_op_definition
class CostedViewOp(PipeplanOp):
    """Analysis: the CostedTaskView of a plan's candidates under one evidence policy (AB-C-1).

    Lives next to ``pplan.plan``; it is not a new semantic representation and is excluded from the
    portable digest. Properties: ``plan``, ``portable_digest``, ``policy_fingerprint`` (sha256 of
    the EvidencePolicy op), ``evidence_fingerprint`` (sha256 over the providers' evidence
    identities: measured table digests, deployment peaks), ``target_fingerprint``,
    ``deployment_fingerprint`` (provenance of the selected identities, AB-G-3).

    Example:
    ```mlir
    pplan.costed_view {deployment_fingerprint = "d", evidence_fingerprint = "e", plan = @run0,
      policy_fingerprint = "p", portable_digest = "x", target_fingerprint = "t"} {
    }
    ```
    """

    name = "pplan.costed_view"

    plan = prop_def(SymbolRefAttr)
    portable_digest = prop_def(StringAttr)
    policy_fingerprint = prop_def(StringAttr)
    evidence_fingerprint = prop_def(StringAttr)
    target_fingerprint = prop_def(StringAttr)
    deployment_fingerprint = prop_def(StringAttr)
    body = region_def("single_block")

    traits = traits_def(NoTerminator())
    assembly_format = "attr-dict-with-keyword $body"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, *, plan: str, portable_digest: str, policy_fingerprint: str, evidence_fingerprint: str,
                 target_fingerprint: str, deployment_fingerprint: str, ops: Sequence[Operation] = ()):
        super().__init__(properties={
            "plan": SymbolRefAttr(plan), "portable_digest": string(portable_digest),
            "policy_fingerprint": string(policy_fingerprint), "evidence_fingerprint": string(evidence_fingerprint),
            "target_fingerprint": string(target_fingerprint), "deployment_fingerprint": string(deployment_fingerprint)},
            regions=[Region(_block(ops))])


# --------------------------------------------------------------------------- digests
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f\x7f-\uffff]')


@lru_cache(maxsize=64)
def _enc_type(t: Attribute) -> str:
    return str(t)


def _enc(a: Attribute) -> str:
    """Canonical text of one property value (fixed encoding per carrier; others via xDSL's printer)."""
    if isinstance(a, StringAttr):
        return json.dumps(a.data) if _NEEDS_ESCAPE.search(a.data) else f'"{a.data}"'
    if isinstance(a, IntegerAttr):
        return f"{a.value.data}:{_enc_type(a.type)}"
    if isinstance(a, FloatAttr):
        return f"{a.value.data!r}:f"
    if isinstance(a, SymbolRefAttr):
        return "@" + ".".join([a.root_reference.data, *(r.data for r in a.nested_references.data)])
    if isinstance(a, DenseArrayBase):
        return f"array<{_enc_type(a.elt_type)}:{','.join(map(str, a.get_values()))}>"
    if isinstance(a, ArrayAttr):
        return "[" + ",".join(_enc(x) for x in a.data) + "]"
    if isinstance(a, DictionaryAttr):
        return "{" + ",".join(f"{json.dumps(k)}={_enc(v)}" for k, v in sorted(a.data.items())) + "}"
    return str(a)


def canonical_text(op: Operation) -> str:
    """The canonical printed form of ``op`` and everything nested in it.

    Rule: one line per op in pre-order: the op name, then each *property* as ``key=value``
    sorted by key, with a fixed encoding per carrier (strings JSON-quoted, integers with their
    width, floats by ``repr``, symbol refs, dense arrays, arrays and dictionaries recursively;
    any other attribute by xDSL's printer). Discardable attributes (``op.attributes``) are
    analysis annotations and are excluded; so are operands/results (pplan ops have none) and
    locations. Equal properties in equal order give equal text; the encoding is linear in the
    plan's size (xDSL's generic printer is ~50x slower on plans of thousands of ops).
    """
    lines = []
    for o in op.walk():
        props = o.properties
        lines.append(o.name + " " + " ".join(f"{k}={_enc(props[k])}" for k in sorted(props)))
    return "\n".join(lines) + "\n"


def fingerprint(op: Operation) -> str:
    """sha256 (hex) of :func:`canonical_text` of ``op``: identity of a binding or analysis op."""
    return hashlib.sha256(canonical_text(op).encode()).hexdigest()


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause CPython's cyclic garbage collector for a block, restoring its state after.

    Passes that build thousands of (acyclic) ops trigger repeated full-heap GC scans: on the
    80-block Llama-3-70B plan this halves the pipeline's time (measured in bench/portable_scaling.py).
    Reference counting still frees everything; only cycle detection waits until the block ends.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


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
    [PlanOp, BufferOp, TaskOp, CandidatesOp, CandidateOp, CostedViewOp, CostOp,
     TargetBindingOp, DeploymentBindingOp, EvidencePolicyOp],
    [],
)
"""The PortablePlanIR dialect (plan, buffers, tasks), its analysis ops and the binding ops."""
