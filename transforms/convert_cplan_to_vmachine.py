"""``convert-cplan-to-vmachine``: lower a verified ConcretePlanIR to the virtual target's MachineIR.

Seeds/003 "Machine lowering and artifact emission" (AB-M-1, AB-M-4, AB-D-1). One instruction per
concrete command, placed in the queue the plan put the command on, in the plan's queue order
restricted to the command's stage and step; one ``vmachine.signal``/``vmachine.wait`` pair per
signal/wait edge of the plan whose two commands are in the same step (edges between steps are
implied by running steps in order; they are counted in the result). Buffers are the plan's
allocations with their offsets and sizes. Nothing else is decided here: no reordering, no new
synchronization, no new buffers (the tests reconstruct queue order and syncs from the program and
compare them with the plan).

Kernel calls take their static attributes (``eps``, rope's ``n_heads``/``head_dim``/``rope_dim``,
``last_row``'s ``if``) from the model kernel ABI: the lowering rebuilds the runtime's stage program
(:func:`pipeplan.runtime.program.build_stage_program`) for the ABI and the stage's layer range and
requires a 1:1 match between the stage step's kernel commands and its calls (kernel, inputs,
outputs) — a command without a counterpart, or a call without a command, fails machine verification
with the full lineage path.

The ABI is an explicit input: a module-level ``vmachine.abi`` op, or the ``model`` option (a GGUF
file or model-facts TOML; ``max_seq_len`` then comes from the plan's KV-cache allocations). Without
one the pass fails ("missing binding: model ABI").

Runtime binding names of allocations (sources from ``convert-runplan-to-pplan``):
``<step>.s<n>.<name>`` (transients, stage input/output), ``s<n>.w.<tensor>`` (weights),
``s<n>.<name>`` (KV cache, rope table), ``edge.<id>`` (edge objects).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pipeplan.analysis.simulate import parse_step
from pipeplan.dialects.carriers import build_op, i64_of, scalar_attr, string
from pipeplan.dialects.cplan import Command, ConcretePlan, PlanOp, QueueSchedule, plan_from_ir
from pipeplan.dialects.vmachine import (
    ENGINE_REVISION,
    KERNEL_ABI,
    START_POS,
    AbiOp,
    BufferOp,
    BufferType,
    EdgeOp,
    EdgeType,
    KernelOp,
    MachineVerifyError,
    ProgramOp,
    QueueOp,
    RecvOp,
    SampleOp,
    SendOp,
    SignalOp,
    StageOp,
    StepOp,
    TokenOp,
    TokenType,
    WaitOp,
    abi_of,
    abi_op,
    verify_machine,
)
from pipeplan.errors import PipeplanError
from pipeplan.models.stage_program import HParams, ProgramError, build_stage_program
from xdsl.context import Context
from xdsl.dialects.builtin import DenseArrayBase, DictionaryAttr, ModuleOp, UnitAttr, i32
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

_BLK = re.compile(r"^blk\.(\d+)\.")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.$-]*$")


@dataclass
class Lowered:
    """Result of :func:`lower_plan`: the program, instruction id -> lineage path, command id ->
    instruction id, and the number of cross-step signal/wait edges implied by step order."""

    program: ProgramOp
    lineage: dict[str, str] = field(default_factory=dict)
    instruction_of: dict[str, str] = field(default_factory=dict)
    cross_step_syncs: int = 0


def abi_from_facts(facts, max_seq_len: int) -> dict[str, Any]:
    """The ABI dict of a model (``ModelFacts``) for ``max_seq_len`` positions (``HParams.to_abi``: the
    llama fields, plus the architecture's own ones when they differ from llama's defaults).

    Raises BindError (pipeplan.runtime.program) when the architecture's invariants do not hold or the
    architecture has no builder."""
    return HParams.from_facts(facts).to_abi(max_seq_len)


def hparams_of(abi: Mapping[str, Any]):
    """``HParams`` of an ABI dict (``HParams.from_abi``)."""
    return HParams.from_abi(abi)


def binding_name(source: str, steps: tuple[str, ...]) -> tuple[int, str, str] | None:
    """``(stage, step, name)`` of an allocation source (module docstring); stage -1 for edges."""
    if source.startswith("edge."):
        return (-1, "", source[len("edge."):])
    m = re.match(r"^([a-z_]+)\.s(\d+)\.(.+)$", source)
    if m and m.group(1) in steps:
        return (int(m.group(2)), m.group(1), m.group(3))
    m = re.match(r"^s(\d+)\.w\.(.+)$", source) or re.match(r"^s(\d+)\.(.+)$", source)
    if m:
        return (int(m.group(1)), "", m.group(2))
    return None


def _path(c: Command, iid: str) -> str:
    return f"{c.lineage} -> command {c.id} -> instruction {iid}"


def lower_plan(plan: ConcretePlan, abi: Mapping[str, Any], *, concrete: str = "",
               timings: Mapping[str, Attribute] | None = None, verify: bool = True) -> Lowered:
    """Lower ``plan`` for the model kernel ABI ``abi`` (module docstring); ``concrete`` is the plan's
    digest to record, ``timings`` the ``timing`` annotation of each command id (copied onto its
    instruction as an annotation). ``verify=False`` leaves machine verification (:func:`verify_machine`)
    to the caller, e.g. once the program is in its module.

    Raises MachineVerifyError (with the lineage path) or PipeplanError(code ``unsupported_plan``)
    for a plan this target cannot lower (unknown step, a stage spread over devices, unknown buffer).
    """
    timings = timings or {}
    cmds = {c.id: c for c in plan.commands}
    where: dict[str, tuple[str, int]] = {}
    for c in plan.commands:
        ps = parse_step(c.task)
        if ps is None:
            raise PipeplanError(f"command '{c.id}' ({c.lineage}): task '{c.task}' has no step", code="unsupported_plan",
                                where=c.id)
        where[c.id] = ps
    steps = tuple(dict.fromkeys(s for s, _ in where.values()))
    allocs = {a.id: a for a in plan.allocs}
    names: dict[str, tuple[int, str, str]] = {}
    for a in plan.allocs:
        b = binding_name(a.source, steps)
        if b is None:
            raise PipeplanError(f"allocation '{a.id}' (source '{a.source}') has no runtime binding name",
                                code="unsupported_plan", where=a.id)
        names[a.id] = b
    stages = sorted({st for _, st in where.values()})
    device: dict[int, str] = {}
    for c in plan.commands:
        st = where[c.id][1]
        if device.setdefault(st, c.device) != c.device:
            raise PipeplanError(f"stage {st} has commands on devices '{device[st]}' and '{c.device}' ({c.lineage}); the "
                                f"virtual target runs one stage per device", code="unsupported_plan", where=c.id)
    hp = hparams_of(abi)
    L = int(abi["max_seq_len"])

    def nm(aid: str) -> str:
        return START_POS if aid == START_POS else names[aid][2]

    # per stage: layer range, first/last, and the runtime's reference program
    ref: dict[int, dict[tuple, Any]] = {}
    ranges: dict[int, tuple[int, int]] = {}
    for st in stages:
        mine = [c for c in plan.commands if where[c.id][1] == st]
        blocks = sorted({int(m.group(1)) for c in mine for a in c.reads + c.writes
                         if a in names and (m := _BLK.match(names[a][2]))})
        first = any(c.op == "embedding_gather" for c in mine)
        last = any(c.op in ("last_row", "argmax") for c in mine)
        ls, le = (blocks[0], blocks[-1] + 1) if blocks else (0, 0)
        if blocks and blocks != list(range(ls, le)):
            raise PipeplanError(f"stage {st} uses blocks {blocks}, not a contiguous range", code="unsupported_plan")
        ranges[st] = (ls, le)
        try:
            prog = build_stage_program(hp, ls, le, first, last, L)
        except ProgramError as err:
            raise PipeplanError(f"stage {st}: the runtime program for blocks [{ls}, {le}) cannot be built: {err.message}",
                                code="unsupported_plan") from None
        ref[st] = {(k.kernel, k.inputs, k.outputs): k for k in prog}

    # edges
    edge_rows: dict[str, dict[str, Any]] = {}
    for c in plan.commands:
        if c.op in ("send", "recv"):
            eid = c.task.split(".")[3]
            e = edge_rows.setdefault(eid, {"producer": -1, "consumer": -1, "buffer": "", "link": ""})
            e["buffer"] = (c.writes if c.op == "send" else c.reads)[0]
            if c.op == "send":
                e["producer"] = where[c.id][1]
                e["link"] = c.link
            else:
                e["consumer"] = where[c.id][1]

    # queues in plan order
    if isinstance(plan.extension, QueueSchedule):
        queues = [(q.engine, q.order) for q in plan.extension.queues]
    else:
        queues = [(s.engine, s.commands) for s in plan.extension.slots]
    syncs = [(k, s) for k, s in enumerate(plan.syncs) if s.signal in where and s.wait in where]
    same = [(k, s) for k, s in syncs if where[s.signal][0] == where[s.wait][0]]
    sig_after: dict[str, list[tuple[int, Any]]] = {}
    wait_before: dict[str, list[tuple[int, Any]]] = {}
    for k, s in same:
        sig_after.setdefault(s.signal, []).append((k, s))
        wait_before.setdefault(s.wait, []).append((k, s))

    out = Lowered(program=None)  # type: ignore[arg-type]
    counter = [0]

    def new_id() -> str:
        i = f"i{counter[0]}"
        counter[0] += 1
        return i

    def with_timing(op: Operation, cid: str) -> Operation:
        t = timings.get(cid)
        if t is not None:
            op.attributes["timing"] = t
        return op

    # program-level values: buffers (allocations) and edges, so they dominate every stage
    body_ops: list[Operation] = [abi_op(abi)]
    bv: dict[str, SSAValue] = {}
    for a in plan.allocs:
        st, step, name = names[a.id]
        b = BufferOp.create(properties={
            "id": string(a.id), "name": string(name), "stage": i64_of(st), "step": string(step), "device": string(a.device),
            "space": string(a.space), "offset": i64_of(a.offset), "size": i64_of(a.size), "alignment": i64_of(a.alignment),
            "lifetime": string(a.lifetime)}, result_types=[BufferType()])
        b.result.name_hint = _hint(a.id[len("alloc."):] if a.id.startswith("alloc.") else a.id)
        bv[a.id] = b.result
        body_ops.append(b)
    ev: dict[str, SSAValue] = {}
    for eid in sorted(edge_rows):
        e = edge_rows[eid]
        if e["buffer"] not in bv:
            raise PipeplanError(f"edge '{eid}': its object '{e['buffer']}' is not an allocation of the plan",
                                code="unsupported_plan", where=eid)
        eo = EdgeOp.create(operands=[bv[e["buffer"]]], properties={
            "id": string(eid), "producer": i64_of(e["producer"]), "consumer": i64_of(e["consumer"]),
            "link": string(e["link"])}, result_types=[EdgeType()])
        eo.result.name_hint = _hint(eid)
        ev[eid] = eo.result
        body_ops.append(eo)

    stage_ops: list[Operation] = []
    program_tokens: dict[int, TokenOp] = {}
    for st in stages:
        used: dict[tuple, str] = {}
        step_ops: list[Operation] = []
        for step in steps:
            q_ops: list[Operation] = []
            tokens: dict[int, TokenOp] = {}

            def token(k: int, s: Any, tokens: dict[int, TokenOp] = tokens) -> SSAValue:
                shared = where[s.signal][1] != where[s.wait][1]  # across stages: a program-level token
                t = (program_tokens if shared else tokens).get(k)
                if t is None:
                    t = (program_tokens if shared else tokens)[k] = TokenOp.create(properties={"id": string(f"sync.{k}"), "signal": string(s.signal),
                                                               "wait": string(s.wait)}, result_types=[TokenType()])
                    t.result.name_hint = f"sync.{k}"
                return t.result

            for engine, order in queues:
                body: list[Operation] = []
                for cid in order:
                    if cid not in where or where[cid] != (step, st):
                        continue
                    c = cmds[cid]
                    for k, s in wait_before.get(cid, ()):
                        iid = new_id()
                        body.append(WaitOp.create(operands=[token(k, s)], properties={"id": string(iid)}))
                        out.lineage[iid] = f"{c.lineage} -> command {c.id} -> wait sync.{k} from {s.signal} -> " \
                                           f"instruction {iid}"
                    iid = new_id()
                    out.instruction_of[cid] = iid
                    out.lineage[iid] = _path(c, iid)
                    body.append(with_timing(_instruction(c, iid, nm, ref[st], used, out.lineage[iid], bv, ev), cid))
                    for k, s in sig_after.get(cid, ()):
                        sid = new_id()
                        body.append(SignalOp.create(operands=[token(k, s)], properties={"id": string(sid)}))
                        out.lineage[sid] = f"{c.lineage} -> command {c.id} -> signal sync.{k} to {s.wait} -> " \
                                           f"instruction {sid}"
                if body:
                    q_ops.append(build_op(QueueOp, {"engine": string(engine)}, body))
            if not q_ops:
                continue
            rows = _rows(plan, step, st, allocs, names, hp.n_embd)
            step_ops.append(build_op(StepOp, {"name": string(step), "rows": i64_of(rows)},
                                     [tokens[k] for k in sorted(tokens)] + q_ops))
            missing = [k for k in ref[st] if (step, k) not in used]
            if missing:
                call = missing[0]
                raise MachineVerifyError(
                    f"stage {st} step '{step}': the runtime stage program's call {call[0]}{list(call[1])} -> {list(call[2])} has "
                    f"no concrete command (the plan's stage program is incomplete)", where=f"stage {st}")
        ls, le = ranges[st]
        stage_ops.append(build_op(StageOp, {"index": i64_of(st), "device": string(device[st]), "layer_start": i64_of(ls),
                                         "layer_end": i64_of(le)}, step_ops))
    body_ops += [program_tokens[k] for k in sorted(program_tokens)] + stage_ops
    prog = build_op(ProgramOp, {
        "target": string(plan.target), "deployment": string(plan.deployment), "concrete": string(concrete),
        "portable": string(plan.source), "binder": string(plan.binder), "engine": string(ENGINE_REVISION)}, body_ops)
    assert isinstance(prog, ProgramOp)
    out.program = prog
    out.cross_step_syncs = len(syncs) - len(same)
    if verify:
        verify_machine(prog, out.lineage)
    return out


def _rows(plan: ConcretePlan, step: str, stage: int, allocs, names, n_embd: int) -> int:
    """Rows a step's buffers hold: from the stage's input allocation (token ids i32 ``[T]`` on the
    first stage, activations f32 ``[T, D]`` elsewhere)."""
    for aid, (st, sp, name) in names.items():
        if st == stage and sp == step and name == "input":
            size = allocs[aid].size
            first = any(c.op == "embedding_gather" and aid in c.reads for c in plan.commands)
            return max(1, size // 4 if first else size // (4 * n_embd))
    return 1


def _hint(name: str) -> str | None:
    """A printable SSA name hint of an id (None when the id has characters a name cannot hold)."""
    return name if _NAME.match(name) else None


def _instruction(c: Command, iid: str, nm, ref: dict[tuple, Any], used: dict[tuple, str], path: str,
                 bv: Mapping[str, SSAValue], ev: Mapping[str, SSAValue]) -> Operation:
    step = parse_step(c.task)[0]  # type: ignore[index]

    def buf(aid: str) -> SSAValue:
        v = bv.get(aid)
        if v is None:
            raise PipeplanError(f"command '{c.id}' ({c.lineage}): buffer '{aid}' is not an allocation of the plan",
                                code="unsupported_plan", where=c.id)
        return v

    props = {"id": string(iid), "cmd": string(c.id)}
    if c.op == "recv":
        return RecvOp.create(operands=[ev[c.task.split(".")[3]], buf(c.writes[0])], properties=props)
    if c.op == "send":
        return SendOp.create(operands=[buf(c.reads[0]), ev[c.task.split(".")[3]]], properties=props)
    if c.op == "argmax":
        return SampleOp.create(operands=[buf(c.reads[0]), buf(c.writes[0])], properties=props)
    sig = KERNEL_ABI.get(c.op)
    if sig is None:
        raise MachineVerifyError(f"command '{c.id}': op '{c.op}' has no virtual-target instruction", path=path,
                                 where=c.id)
    if len(c.reads) != sig.reads or len(c.writes) != sig.writes:
        raise MachineVerifyError(f"command '{c.id}': kernel '{c.op}' needs {sig.reads} reads and {sig.writes} writes, "
                                 f"the command has {len(c.reads)} and {len(c.writes)}", path=path, where=c.id)
    ins = list(c.reads) + (list(c.writes) if sig.inplace else []) + ([START_POS] if sig.start_pos else [])
    outs = [] if sig.inplace else list(c.writes)
    key = (c.op, tuple(nm(a) for a in ins), tuple(nm(a) for a in outs))
    call = ref.get(key)
    if call is None:
        raise MachineVerifyError(f"command '{c.id}': {c.op}{list(key[1])} -> {list(key[2])} is not a call of the "
                                 f"runtime stage program for this ABI", path=path, where=c.id)
    if (step, key) in used:
        raise MachineVerifyError(f"command '{c.id}': the runtime call {c.op}{list(key[1])} is already lowered by "
                                 f"'{used[(step, key)]}'", path=path, where=c.id)
    used[(step, key)] = c.id
    attrs = DictionaryAttr({k: scalar_attr(v) for k, v in sorted(call.attrs.items())})
    props.update(kernel=string(c.op), attrs=attrs, block=i64_of(-1 if call.block is None else call.block),
                 operandSegmentSizes=DenseArrayBase.from_list(i32, [len(c.reads), len(c.writes)]))
    if sig.start_pos:
        props["start_pos"] = UnitAttr()
    return KernelOp.create(operands=[buf(a) for a in (*c.reads, *c.writes)], properties=props)


def _max_seq_len_from_plan(plan: ConcretePlan, abi_partial: Mapping[str, Any]) -> int:
    hd = abi_partial.get("n_embd_head_k") or abi_partial["n_embd"] // abi_partial["n_head"]
    for a in plan.allocs:
        if a.lifetime == "kv" and a.source.endswith("cache_k"):
            return a.size // (abi_partial["n_head_kv"] * hd * 4)
    raise PipeplanError("the plan has no KV-cache allocation to derive max_seq_len from", code="missing_binding")


def abi_for_module(module: ModuleOp, plan: ConcretePlan, model: str = "") -> tuple[dict[str, Any], AbiOp | None]:
    """The ABI input: a module-level ``vmachine.abi`` op (returned too, to be consumed), else the
    ``model`` file's facts. Raises PipeplanError(missing_binding) when neither is given."""
    ops = [o for o in module.ops if isinstance(o, AbiOp)]
    if ops:
        a = ops[0]
        tmp = build_op(ProgramOp, {k: string("") for k in ("target", "deployment", "concrete", "portable", "binder",
                                                     "engine")}, [a.clone()])
        return abi_of(tmp), a  # type: ignore[arg-type]
    if not model:
        raise PipeplanError("missing binding: model ABI (give a module-level vmachine.abi op or the pass option "
                            "model=MODEL.gguf|FACTS.toml)", code="missing_binding")
    if model.endswith(".toml"):
        from pipeplan.frontend.facts_toml import load_facts_toml

        facts = load_facts_toml(model)
    else:
        from pipeplan.frontend.gguf_facts import read_model_facts

        facts = read_model_facts(model)
    partial = abi_from_facts(facts, 1)
    return abi_from_facts(facts, _max_seq_len_from_plan(plan, partial)), None


@dataclass(frozen=True)
class ConvertCplanToVmachinePass(ModulePass):
    """Lower the module's ``cplan.plan`` to the virtual target's ``vmachine.program`` (MachineIR).

    The plan (and a module-level ``vmachine.abi``) is replaced by the program (module docstring).
    Option ``model``: GGUF/facts TOML giving the ABI when the module has no ``vmachine.abi``.

    Errors (PassFailedException): no concrete plan, missing ABI binding, a plan this target cannot
    lower, machine verification failure (message with the lineage path).
    """

    name = "convert-cplan-to-vmachine"

    model: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from pipeplan.transforms.cplan_project_timing import find_cplan

        try:
            plan_op = find_cplan(op)
            plan = plan_from_ir(plan_op)
            abi, abi_input = abi_for_module(op, plan, self.model)
            low = _lower_plan_op(plan_op, plan, abi, verify=False)
        except PipeplanError as e:
            raise PassFailedException(f"convert-cplan-to-vmachine: {e.one_line()}") from None
        op.body.block.add_op(low.program)  # verified where it stays, so the pipeline's verify finds it verified
        try:
            verify_machine(low.program, low.lineage)
        except PipeplanError as e:
            low.program.detach()
            raise PassFailedException(f"convert-cplan-to-vmachine: {e.one_line()}") from None
        for o in [plan_op] + ([abi_input] if abi_input is not None else []):
            o.detach()
            o.erase()
        left = [o.name for o in op.walk() if o.name.startswith("cplan.")]
        if left:
            raise PassFailedException(f"convert-cplan-to-vmachine: cplan ops remain: {left[:3]}")


def lower_module(module: ModuleOp, abi: Mapping[str, Any]) -> Lowered:
    """Lower the module's ``cplan.plan`` for ``abi`` without changing the module (used by the package
    emitter, which keeps the plan to compute digests). Raises PipeplanError / MachineVerifyError."""
    from pipeplan.transforms.cplan_project_timing import find_cplan

    plan_op: PlanOp = find_cplan(module)
    return _lower_plan_op(plan_op, plan_from_ir(plan_op), abi)


def _lower_plan_op(plan_op: PlanOp, plan: ConcretePlan, abi: Mapping[str, Any], verify: bool = True) -> Lowered:
    """:func:`lower_plan` of ``plan`` (the value of ``plan_op``) with ``plan_op``'s concrete digest and
    the timing annotations of its ops (keyed by op id). Raises PipeplanError / MachineVerifyError."""
    from pipeplan.transforms.cplan_project_timing import TIMING, concrete_digest

    timings = {o.id.data: o.attributes[TIMING] for o in plan_op.body.block.ops
               if TIMING in o.attributes and hasattr(o, "id")}
    return lower_plan(plan, abi, concrete=concrete_digest(plan_op), timings=timings, verify=verify)
