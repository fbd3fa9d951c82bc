"""``convert-cplan-to-vmachine``: lower a verified concrete plan (``cplan.plan``) to the virtual target's MachineIR.

Seeds/003 "Machine lowering and artifact emission" (AB-M-1, AB-M-4, AB-D-1). One instruction per
concrete command, placed in the queue the plan put the command on, in the plan's queue order
restricted to the command's stage and step; one ``vmachine.signal``/``vmachine.wait`` pair per
signal/wait edge of the plan whose two commands are in the same step (edges between steps are
implied by running steps in order; they are counted in the result). Buffers are the plan's
allocations with their offsets and sizes. Nothing else is decided here: no reordering, no new
synchronization, no new buffers (the tests reconstruct queue order and syncs from the program and
compare them with the plan).

The pass reads the ``cplan`` ops directly and lowers in two phases (:mod:`pipeplan.transforms.machine_lowering`,
as ``convert-cplan-to-triton``): :func:`place_commands` builds the skeleton (ABI, buffers, edges, tokens,
stages, steps, queues with the ``signal``/``wait`` instructions) and moves each ``cplan.command`` into its
queue, then the :class:`LowerCommand` ``RewritePattern``, driven by a ``PatternRewriteWalker``, replaces
each placed command by its one instruction (1:1).

Kernel calls take their static attributes (``eps``, rope's ``n_heads``/``head_dim``/``rope_dim``,
``last_row``'s ``if``, ...) from the model kernel ABI's hyper-parameters through
:func:`pipeplan.models.stage_program.kernel_attrs` -- the function the stage-program builders use -- with
the command's block (the ``blk.<N>.`` of the buffers it names) and role (the heads its output holds); the
runtime's stage program is not rebuilt. A kernel command the ABI cannot serve (a kernel the architecture
does not call, a block outside the model, a rope of neither q nor k or on the wrong table, the same call
twice in a step) fails machine verification with the full lineage path. Whether each stage step holds
every call of its layer range is the plan's business (``cplan-verify``'s correlation with the portable
tasks); reads before writes are machine verification's.

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

from pipeplan.dialects.carriers import build_op, i64_of, scalar_attr, string
from pipeplan.dialects.cplan import (
    AllocOp,
    CommandOp,
    PlanOp,
    QueueScheduleOp,
    SlotDataflowOp,
    SlotOp,
    SyncOp,
    alloc_name,
    command_name,
)
from pipeplan.dialects.cplan import QueueOp as PlanQueueOp
from pipeplan.dialects.diagnostics import gc_paused
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
    lifetime_attr,
    step_attr,
    verify_machine,
)
from pipeplan.errors import PipeplanError
from pipeplan.models.stage_program import HParams, ProgramError, rope_table
from pipeplan.transforms.machine_lowering import (
    LowerPlacedCommand,
    UnsupportedPlanError,
    block_of,
    call_attrs,
    lower_placed,
    new_op,
    stage_layer_range,
)
from xdsl.context import Context
from xdsl.dialects.builtin import DenseArrayBase, DictionaryAttr, ModuleOp, UnitAttr, i32
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException


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


_STEP_SOURCE = re.compile(r"^([a-z_]+)\.s(\d+)\.(.+)$")
_WEIGHT_SOURCE = re.compile(r"^s(\d+)\.w\.(.+)$")
_STAGE_SOURCE = re.compile(r"^s(\d+)\.(.+)$")


def binding_name(source: str, steps: tuple[str, ...]) -> tuple[int, str, str] | None:
    """``(stage, step, name)`` of an allocation source (module docstring); stage -1 for edges."""
    if source.startswith("edge."):
        return (-1, "", source[len("edge."):])
    m = _STEP_SOURCE.match(source)
    if m and m.group(1) in steps:
        return (int(m.group(2)), m.group(1), m.group(3))
    m = _WEIGHT_SOURCE.match(source) or _STAGE_SOURCE.match(source)
    if m:
        return (int(m.group(1)), "", m.group(2))
    return None


_SEGMENTS: dict[tuple[int, ...], DenseArrayBase] = {}


_UNIT = UnitAttr()


def _segments(*sizes: int) -> DenseArrayBase:
    """The ``operandSegmentSizes`` property of ``sizes`` (shared: attributes are immutable)."""
    seg = _SEGMENTS.get(sizes)
    if seg is None:
        seg = _SEGMENTS[sizes] = DenseArrayBase.from_list(i32, list(sizes))
    return seg


@dataclass
class Lowering:
    """What :class:`LowerCommand` needs beyond the command (built by :func:`place_commands`): the ABI's
    hyper-parameters ``hp``; ``names`` alloc id -> ``(stage, step, binding name)``; the program's values
    ``buffers`` (alloc id -> ``!vmachine.buffer``) and ``edges`` (edge id -> ``!vmachine.edge``);
    ``iid`` command id -> its instruction id, ``where`` command id -> ``(step, stage)``; ``lineage``
    instruction id -> lineage path; ``used`` the kernel calls already lowered per stage step (call key ->
    command id); ``ids`` command id -> the alloc ids it reads and writes."""

    hp: HParams
    names: dict[str, tuple[int, str, str]]
    buffers: dict[str, SSAValue] = field(default_factory=dict)
    edges: dict[str, SSAValue] = field(default_factory=dict)
    iid: dict[str, str] = field(default_factory=dict)
    where: dict[str, tuple[str, int]] = field(default_factory=dict)
    lineage: dict[str, str] = field(default_factory=dict)
    used: dict[tuple, str] = field(default_factory=dict)
    ids: dict[str, tuple[list[str], list[str]]] = field(default_factory=dict)


def _steps(cmds: list[CommandOp]) -> dict[str, tuple[str, int]]:
    """Command id -> ``(step, stage)`` of its lineage."""
    return {c.id.data: (c.lineage.step, c.lineage.stage) for c in cmds}


def place_commands(plan: PlanOp, abi: Mapping[str, Any], concrete: str = "") -> tuple[ProgramOp, Lowering, int]:
    """The skeleton of the ``vmachine.program`` of ``plan`` (which it consumes: pass a clone to keep it):
    the ``vmachine.abi`` of ``abi``, one ``vmachine.buffer`` per allocation, one ``vmachine.edge`` per
    send/recv edge, the tokens of the syncs within a step, and per stage and step one ``vmachine.queue`` per
    plan queue holding that queue's ``cplan.command`` ops of the step (queue order) between their
    ``wait``/``signal`` instructions; the commands' dependencies are dropped (their order is the queues', the
    syncs are the tokens) and the plan keeps its allocations. Returns the skeleton, the :class:`Lowering`
    that :class:`LowerCommand` needs, and the number of cross-step syncs (implied by step order).

    Raises UnsupportedPlanError (module docstring)."""
    body = list(plan.body.block.ops)
    cmds = [o for o in body if isinstance(o, CommandOp)]
    allocs = [o for o in body if isinstance(o, AllocOp)]
    where = _steps(cmds)
    steps = tuple(dict.fromkeys(s for s, _ in where.values()))
    names: dict[str, tuple[int, str, str]] = {}
    for a in allocs:
        b = binding_name(a.source.data, steps)
        if b is None:
            raise UnsupportedPlanError(f"allocation '{a.id.data}' (source '{a.source.data}') has no runtime binding "
                                       f"name", where=a.id.data)
        names[a.id.data] = b
    device: dict[int, str] = {}
    for c in cmds:
        st = where[c.id.data][1]
        if device.setdefault(st, c.device.data) != c.device.data:
            raise UnsupportedPlanError(f"stage {st} has commands on devices '{device[st]}' and '{c.device.data}' "
                                       f"(command '{c.id.data}': {c.lineage_text}); the virtual target runs one stage per device",
                                       where=c.id.data)
    hp = hparams_of(abi)
    env = Lowering(hp, names, where=where)

    # per stage: layer range (checked for the ABI); per stage step: the stage input allocation (rows)
    blocks: dict[int, set[int]] = {}
    first: set[int] = set()
    last: set[int] = set()
    gathered: set[str] = set()
    edge_rows: dict[str, dict[str, Any]] = {}
    for c in cmds:
        cid, op = c.id.data, c.op.data
        st = where[cid][1]
        ins, outs, after = c.groups()
        reads, writes = [alloc_name(v) for v in ins], [alloc_name(v) for v in outs]
        env.ids[cid] = (reads, writes)
        if after:  # dependencies: the queue order and the tokens below
            c.operands = [*ins, *outs]
            c.properties["operandSegmentSizes"] = _segments(len(ins), len(outs), 0)
        bs = blocks.setdefault(st, set())
        for a in (*reads, *writes):
            if a in names:
                b = block_of((names[a][2],))
                if b is not None:
                    bs.add(b)
        if op == "embedding_gather":
            first.add(st)
            gathered.update(reads)
        elif op in ("last_row", "argmax"):
            last.add(st)
        elif op in ("send", "recv"):
            eid = c.lineage.edge
            e = edge_rows.setdefault(eid, {"producer": -1, "consumer": -1, "buffer": "", "link": ""})
            e["buffer"] = (writes if op == "send" else reads)[0]
            if op == "send":
                e["producer"] = st
                e["link"] = "" if c.link is None else c.link.data
            else:
                e["consumer"] = st
    stages = sorted(blocks)
    ranges = {st: stage_layer_range(hp, st, blocks[st], st in first, st in last, int(abi["max_seq_len"]))
              for st in stages}
    inputs: dict[tuple[int, str], AllocOp] = {}
    for a in allocs:
        st, sp, n = names[a.id.data]
        if n == "input":
            inputs.setdefault((st, sp), a)

    # queues in plan order; syncs
    ext = next(o for o in body if isinstance(o, QueueScheduleOp | SlotDataflowOp))
    if isinstance(ext, QueueScheduleOp):
        queues = [(q.engine.data, [command_name(v) for v in q.commands]) for q in ext.body.block.ops
                  if isinstance(q, PlanQueueOp)]
    else:
        queues = [(s.engine.data, [command_name(v) for v in s.members]) for s in ext.body.block.ops
                  if isinstance(s, SlotOp)]
    syncs = [(k, (command_name(s.signal), command_name(s.wait))) for k, s in
             enumerate(o for o in body if isinstance(o, SyncOp))]
    syncs = [(k, s) for k, s in syncs if s[0] in where and s[1] in where]
    same = [(k, s) for k, s in syncs if where[s[0]][0] == where[s[1]][0]]
    sig_after: dict[str, list[tuple[int, tuple[str, str]]]] = {}
    wait_before: dict[str, list[tuple[int, tuple[str, str]]]] = {}
    for k, s in same:
        sig_after.setdefault(s[0], []).append((k, s))
        wait_before.setdefault(s[1], []).append((k, s))
    # each queue's commands per (stage, step), in queue order
    placed: dict[tuple[int, str], list[tuple[str, list[str]]]] = {}
    for engine, order in queues:
        mine: dict[tuple[int, str], list[str]] = {}
        for cid in order:
            w = where.get(cid)
            if w is not None:
                mine.setdefault((w[1], w[0]), []).append(cid)
        for key, cs in mine.items():
            placed.setdefault(key, []).append((engine, cs))

    # the plan keeps only its allocations and commands (their dependencies dropped above)
    for o in body:
        if isinstance(o, SyncOp | QueueScheduleOp | SlotDataflowOp):
            o.detach()
            o.erase()
    cmd_of = {c.id.data: c for c in cmds}

    # program-level values: buffers (allocations) and edges, so they dominate every stage
    body_ops: list[Operation] = [abi_op(abi)]
    buffer_t = BufferType()
    for a in allocs:
        aid = a.id.data
        st, step, name = names[aid]
        props = {"id": a.id, "name": string(name), "stage": i64_of(st), "device": a.device, "space": a.space,
                 "offset": a.offset, "size": a.size, "alignment": a.alignment,
                 "lifetime": lifetime_attr(a.lifetime.data)}
        if step:
            props["step"] = step_attr(step)
        b = new_op(BufferOp, (), props, [buffer_t]).name_result()
        env.buffers[aid] = b.result
        body_ops.append(b)
    for eid in sorted(edge_rows):
        e = edge_rows[eid]
        if e["buffer"] not in env.buffers:
            raise UnsupportedPlanError(f"edge '{eid}': its object '{e['buffer']}' is not an allocation of the plan",
                                       where=eid)
        eo = EdgeOp.create(operands=[env.buffers[e["buffer"]]], properties={
            "id": string(eid), "producer": i64_of(e["producer"]), "consumer": i64_of(e["consumer"]),
            "link": string(e["link"])}, result_types=[EdgeType()])
        env.edges[eid] = eo.result
        body_ops.append(eo)

    counter = 0
    stage_ops: list[Operation] = []
    program_tokens: dict[int, TokenOp] = {}
    for st in stages:
        step_ops: list[Operation] = []
        for step in steps:
            tokens: dict[int, TokenOp] = {}

            def token(k: int, s: tuple[str, str], tokens: dict[int, TokenOp] = tokens) -> SSAValue:
                pool = program_tokens if where[s[0]][1] != where[s[1]][1] else tokens  # across stages: program
                t = pool.get(k)
                if t is None:
                    t = pool[k] = TokenOp.create(properties={"id": string(f"sync.{k}"), "signal": string(s[0]),
                                                             "wait": string(s[1])}, result_types=[TokenType()])
                return t.result

            q_ops: list[Operation] = []
            for engine, order in placed.get((st, step), ()):
                ops: list[Operation] = []
                for cid in order:
                    c = cmd_of[cid]
                    lin = c.lineage_text
                    for k, s in wait_before.get(cid, ()):
                        iid = f"i{counter}"
                        counter += 1
                        ops.append(WaitOp.create(operands=[token(k, s)], properties={"id": string(iid)}))
                        env.lineage[iid] = f"{lin} -> command {cid} -> wait sync.{k} from {s[0]} -> instruction {iid}"
                    iid = f"i{counter}"
                    counter += 1
                    env.iid[cid] = iid
                    env.lineage[iid] = f"{lin} -> command {cid} -> instruction {iid}"
                    c.detach()
                    ops.append(c)
                    for k, s in sig_after.get(cid, ()):
                        sid = f"i{counter}"
                        counter += 1
                        ops.append(SignalOp.create(operands=[token(k, s)], properties={"id": string(sid)}))
                        env.lineage[sid] = f"{lin} -> command {cid} -> signal sync.{k} to {s[1]} -> instruction {sid}"
                q_ops.append(build_op(QueueOp, {"engine": string(engine)}, ops))
            if not q_ops:
                continue
            a_in = inputs.get((st, step))
            rows = 1
            if a_in is not None:
                size = a_in.size.value.data
                rows = max(1, size // 4 if a_in.id.data in gathered else size // (4 * hp.n_embd))
            step_ops.append(build_op(StepOp, {"name": step_attr(step), "rows": i64_of(rows)},
                                     [tokens[k] for k in sorted(tokens)] + q_ops))
        ls, le = ranges[st]
        stage_ops.append(build_op(StageOp, {"index": i64_of(st), "device": string(device[st]), "layer_start": i64_of(ls),
                                         "layer_end": i64_of(le)}, step_ops))
    body_ops += [program_tokens[k] for k in sorted(program_tokens)] + stage_ops
    prog = build_op(ProgramOp, {
        "target": plan.target, "deployment": plan.deployment, "concrete": string(concrete),
        "portable": plan.source, "binder": plan.binder, "engine": string(ENGINE_REVISION)}, body_ops)
    assert isinstance(prog, ProgramOp)
    return prog, env, len(syncs) - len(same)


class LowerCommand(LowerPlacedCommand):
    """``cplan.command`` placed in its ``vmachine.queue`` -> its one instruction (``vmachine.recv``/``send``/
    ``sample``/``kernel``), 1:1: the command's alloc operands become the program's buffer values, a kernel's
    static attributes come from :func:`~pipeplan.models.stage_program.kernel_attrs` for the ABI with the
    command's block and role; the command's ``timing`` annotation is copied.

    Raises UnsupportedPlanError (a buffer that is not an allocation) or MachineVerifyError (unknown op, wrong
    read/write counts, a kernel call the ABI cannot serve, the same call twice in a step), with the lineage."""

    container = QueueOp

    def __init__(self, env: Lowering):
        from pipeplan.transforms.cplan_project_timing import TIMING

        super().__init__()
        self.env = env
        self.timing = TIMING
        self.attr_dicts: dict[tuple, DictionaryAttr] = {}  # equal kernel attributes share one dictionary

    def lower(self, op: CommandOp) -> Operation:
        env = self.env
        cid, kind, lin = op.id.data, op.op.data, op.lineage_text
        iid = env.iid[cid]
        path = env.lineage[iid]
        reads, writes = env.ids[cid]

        def buf(aid: str) -> SSAValue:
            v = env.buffers.get(aid)
            if v is None:
                raise UnsupportedPlanError(f"command '{cid}' ({lin}): buffer '{aid}' is not an allocation of the plan",
                                           where=cid)
            return v

        props: dict[str, Attribute] = {"id": string(iid), "cmd": op.id}
        if kind in ("recv", "send", "argmax"):
            ends = [buf(reads[0]), buf(writes[0])]
            if kind == "recv":
                ins_op: Operation = new_op(RecvOp, [env.edges[op.lineage.edge], ends[1]], props)
            elif kind == "send":
                ins_op = new_op(SendOp, [ends[0], env.edges[op.lineage.edge]], props)
            else:
                ins_op = new_op(SampleOp, ends, props)
            return self._timed(ins_op, op)
        sig = KERNEL_ABI.get(kind)
        if sig is None:
            raise MachineVerifyError(f"command '{cid}': op '{kind}' has no virtual-target instruction", path=path,
                                     where=cid)
        if len(reads) != sig.reads or len(writes) != sig.writes:
            raise MachineVerifyError(f"command '{cid}': kernel '{kind}' needs {sig.reads} reads and {sig.writes} "
                                     f"writes, the command has {len(reads)} and {len(writes)}", path=path, where=cid)
        operands = [buf(a) for a in (*reads, *writes)]

        def nm(aid: str) -> str:
            return START_POS if aid == START_POS else env.names[aid][2]

        call_ins = reads + (writes if sig.inplace else []) + ([START_POS] if sig.start_pos else [])
        call_outs = [] if sig.inplace else writes
        key = (kind, tuple(nm(a) for a in call_ins), tuple(nm(a) for a in call_outs))
        block = block_of((*key[1], *key[2]))
        try:
            attrs = call_attrs(env.hp, kind, block, key[2][0] if key[2] else "")
        except ProgramError as err:
            raise MachineVerifyError(f"command '{cid}': {kind}{list(key[1])} -> {list(key[2])} is not a call the model "
                                     f"ABI can serve: {err.message}", path=path, where=cid) from None
        if kind == "rope" and block is not None and key[1][1] != rope_table(env.hp, block):
            raise MachineVerifyError(f"command '{cid}': rope of block {block} reads '{key[1][1]}', the model ABI's "
                                     f"table of that block is '{rope_table(env.hp, block)}'", path=path, where=cid)
        step, st = env.where[cid]
        used = (st, step, key)
        if used in env.used:
            raise MachineVerifyError(f"command '{cid}': the call {kind}{list(key[1])} is already lowered by "
                                     f"'{env.used[used]}'", path=path, where=cid)
        env.used[used] = cid
        items = sorted(attrs.items())
        akey = tuple((k, type(v), repr(v)) for k, v in items)
        adict = self.attr_dicts.get(akey)
        if adict is None:
            adict = self.attr_dicts[akey] = DictionaryAttr({k: scalar_attr(v) for k, v in items})
        props["kernel"] = op.op
        if sig.start_pos:
            props["start_pos"] = _UNIT
        props["attrs"] = adict
        props["block"] = i64_of(-1 if block is None else block)
        props["operandSegmentSizes"] = _segments(len(reads), len(writes))
        return self._timed(new_op(KernelOp, operands, props), op)


    def _timed(self, ins: Operation, cmd: CommandOp) -> Operation:
        """``ins`` with the command's ``timing`` annotation (when it has one)."""
        t = cmd.attributes.get(self.timing)
        if t is not None:
            ins.attributes[self.timing] = t
        return ins


def lower_plan(plan: PlanOp, abi: Mapping[str, Any], *, concrete: str = "", verify: bool = True,
               consume: bool = False) -> Lowered:
    """Lower ``plan`` for the model kernel ABI ``abi`` (module docstring): the skeleton of
    :func:`place_commands`, then :class:`LowerCommand` applied by a ``PatternRewriteWalker`` to every placed
    command. ``concrete`` is the plan's digest to record; ``consume``: lower ``plan`` itself (its commands
    move into the program) instead of a clone. ``verify=False`` leaves machine verification
    (:func:`verify_machine`) to the caller, e.g. once the program is in its module.

    Raises MachineVerifyError (with the lineage path) or UnsupportedPlanError (code ``unsupported_plan``)
    for a plan this target cannot lower (unknown step, a stage spread over devices, unknown buffer, ...).
    """
    with gc_paused():  # thousands of acyclic ops: no cyclic-GC scans while they are built
        prog, env, cross = place_commands(plan if consume else plan.clone(), abi, concrete)
        left = lower_placed(prog.body, LowerCommand(env))
    if left is not None:
        raise MachineVerifyError(f"command '{left.id.data}' was not lowered", where=left.id.data)
    out = Lowered(prog, env.lineage, {c: i for c, i in env.iid.items()}, cross)
    if verify:
        with gc_paused():
            verify_machine(prog, out.lineage)
    return out


def _max_seq_len_from_plan(plan: PlanOp, abi_partial: Mapping[str, Any]) -> int:
    hd = abi_partial.get("n_embd_head_k") or abi_partial["n_embd"] // abi_partial["n_head"]
    for a in plan.body.block.ops:
        if isinstance(a, AllocOp) and a.lifetime.data == "kv" and a.source.data.endswith("cache_k"):
            return a.size.value.data // (abi_partial["n_head_kv"] * hd * 4)
    raise PipeplanError("the plan has no KV-cache allocation to derive max_seq_len from", code="missing_binding")


def abi_for_module(module: ModuleOp, plan: PlanOp, model: str = "") -> tuple[dict[str, Any], AbiOp | None]:
    """The ABI input: a module-level ``vmachine.abi`` op (returned too, to be consumed), else the
    ``model`` file's facts (``max_seq_len`` from ``plan``'s KV-cache allocations). Raises
    PipeplanError(missing_binding) when neither is given."""
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
    lower, machine verification failure (message with the lineage path). The lowering consumes the plan's
    commands (no clone: the plan is replaced); a failing pass leaves no program in the module.
    """

    name = "convert-cplan-to-vmachine"

    model: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from pipeplan.transforms.cplan_project_timing import concrete_digest, find_cplan

        try:
            plan_op = find_cplan(op)
            abi, abi_input = abi_for_module(op, plan_op, self.model)
            low = lower_plan(plan_op, abi, concrete=concrete_digest(plan_op), verify=False, consume=True)
        except PipeplanError as e:
            raise PassFailedException(f"convert-cplan-to-vmachine: {e.one_line()}") from None
        op.body.block.add_op(low.program)  # verified where it stays, so the pipeline's verify finds it verified
        try:
            with gc_paused():
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
    from pipeplan.transforms.cplan_project_timing import concrete_digest, find_cplan

    plan_op: PlanOp = find_cplan(module)
    return lower_plan(plan_op, abi, concrete=concrete_digest(plan_op))
