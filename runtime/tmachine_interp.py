"""Interpreter of the ``tmachine`` dialect: runs a lowered ``tmachine.program`` by launching its Triton
kernels with the lowered grids, meta-parameters and arguments (issue 13 item 5; seeds/003 "Machine
lowering and artifact emission": the machine artifact is what runs).

Design (after xDSL's ``xdsl/interpreters/``: one implementation per op kind, a listener interface):
the program is resolved once into bound callables per step, then each step only calls them.

* **Kernels**: ``kernel = "module:function"`` names a ``@triton.jit`` function of the target's kernel
  package (:data:`KERNEL_PACKAGES`, by ``tmachine.program``'s ``target``); resolved once per program.
  Parameters bind by name (the kernel's ``arg_names``): ``*_ptr`` take the launch's ``args`` in order,
  names in ``meta`` are the constexpr keywords, names in ``scalars`` their value (``"$start_pos"`` the
  step's position, any other ``"$<name>"`` from ``attrs``), ``stride_<p>...`` the row stride of the
  tensor bound to the pointer ``<p>_ptr`` with the longest matching ``<p>`` (0 for a 1-D tensor).
* **Buffers** (``tmachine.buffer``): ``weight`` -> the stage's weight of that GGUF name as the kernels
  read it (:func:`pipeplan.runtime.kernels.triton_weights.load_stage_weights_raw`: the raw bytes of a
  quantized matrix, else the float tensor), ``rope_table``/``rope_table_swa`` -> the float32 ``(cos,
  sin)`` table ``[S, rope_dim]`` of :func:`pipeplan.runtime.kernels.reference.rope_table` for the model's
  rope bases; ``kv`` -> zeros, persistent across steps (:meth:`TMachineInterpreter.reset`);
  ``transient`` and ``edge`` -> one tensor each of the IR's dtype and shape, allocated once.
* **Steps**: an instruction belongs to the step named by its ``step`` (absent: every step). A step runs
  its instructions in stream order, an instruction after the instructions of the selected streams that
  signal the tokens its ``waits`` operands take (waits on other devices' instructions are the edge exchange:
  the caller's rows). Buffer arguments are the instructions' SSA operands (each a ``tmachine.buffer`` value).
  ``tmachine.copy`` copies ``bytes`` bytes; ``tmachine.view`` ``last_row`` copies the last row.
* **Edges**: the inbound edges of the selected streams (recv sources no selected instruction writes)
  receive the caller's rows; the outbound ones (send destinations no selected instruction reads) are
  returned, ``bytes / row bytes`` rows.
* **Shapes per step**: the plan is compiled for a prefill of ``P`` rows and a decode of 1 row
  (``convert-runplan-to-pplan`` ``prompt_len``); :meth:`TMachineInterpreter.forward` runs a frame of
  ``R`` rows as ``R // P`` prefill chunks (fixed row count ``P``, positions ``start_pos + k P``) and the
  ``R % P`` remaining rows as decode steps, so one compiled program serves every prompt length.

Errors: :class:`TMachineError` (a PipeplanError, ``code`` ``tmachine:<reason>``, naming the instruction
or buffer): ``unknown_kernel``, ``unknown_buffer``, ``unbound_scalar``, ``abi`` (a kernel parameter the
launch does not bind, or a buffer the host cannot provide), ``rows`` (a frame that does not fit the step).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from pipeplan.dialects.graph import stable_topo_order
from pipeplan.dialects.triton_machine import (
    BufferOp,
    CopyOp,
    LaunchOp,
    ProgramOp,
    StreamOp,
    ViewOp,
    signaller,
)
from pipeplan.errors import PipeplanError
from pipeplan.runtime.tmachine_run import KERNEL_PACKAGES
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, StringAttr

"""Target name (``tmachine.program``'s ``target`` before ``@``) -> the package its kernel names are in."""

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "i32": torch.int32,
          "i64": torch.int64, "u8": torch.uint8}
"""IR dtype -> torch dtype of a buffer the interpreter allocates."""

START_POS = "$start_pos"


class TMachineError(PipeplanError):
    """A tmachine program the interpreter cannot bind or run (module docstring); ``code`` is
    ``tmachine:<reason>``, ``where`` the instruction or buffer id; ``kind`` the StageFault kind (``bind``)."""

    kind = "bind"

    def __init__(self, reason: str, message: str, *, where: str | None = None):
        super().__init__(message, code=f"tmachine:{reason}", where=where)
        self.reason = reason


@dataclass(frozen=True)
class InstructionEvent:
    """One executed instruction: ``step``, its ``index`` in the step's order, ``id``, ``op`` (the op
    name), ``kernel`` and ``grid`` (launches; else ``""``/``()``), ``start_pos``, and
    ``t0``/``t1`` (``time.perf_counter`` seconds; the device is synchronized after a GPU launch only
    when a listener asks for timing)."""

    step: str
    index: int
    id: str
    op: str
    kernel: str
    grid: tuple[int, ...]
    start_pos: int
    t0: float
    t1: float


class TMachineListener(Protocol):
    """Receives each executed instruction (launch events, timing)."""

    def on_instruction(self, event: InstructionEvent) -> None: ...


def _value(a: Any) -> Any:
    if isinstance(a, IntegerAttr):
        return int(a.value.data)
    if isinstance(a, FloatAttr):
        return float(a.value.data)
    if isinstance(a, StringAttr):
        return a.data
    return a


def _row_stride(t: torch.Tensor) -> int:
    return int(t.stride(0)) if t.dim() >= 2 else 0


def _bytes(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1).view(torch.uint8)


def instructions(program: ProgramOp) -> list[tuple[StreamOp, list[LaunchOp | ViewOp | CopyOp]]]:
    """The program's streams with their instructions, in program order."""
    out = []
    for b in program.body.blocks:
        for s in b.ops:
            if isinstance(s, StreamOp):
                out.append((s, [o for sb in s.body.blocks for o in sb.ops if isinstance(o, LaunchOp | ViewOp | CopyOp)]))
    return out


def step_of(op: LaunchOp | ViewOp | CopyOp) -> str | None:
    """The ``step`` an instruction belongs to (None: every step)."""
    return op.step_name


class TMachineInterpreter:
    """Binds and runs one ``tmachine.program`` (module docstring).

    Args:
        program: the verified ``tmachine.program``.
        weights: GGUF tensor name -> weight as the Triton kernels read it (float tensor or ``GGMLWeight``).
        rope_bases: ``rope_table`` / ``rope_table_swa`` -> rope base of that table (the model's
            ``rope_base``/``rope_base_swa``); needed only when the program declares the table.
        devices: the devices (``tmachine.stream`` ``device``) this interpreter runs, i.e. the stage; None: all.
        attrs: values of ``"$<name>"`` scalars other than ``$start_pos``.
        listeners: :class:`TMachineListener` s told about every executed instruction.
        device: where buffers live (default: the kernel package's ``device()``).

    Raises:
        TMachineError: ``unknown_kernel``, ``unknown_buffer``, ``unbound_scalar``, ``abi`` (module docstring).
    """

    def __init__(self, program: ProgramOp, weights: Mapping[str, Any], *, rope_bases: Mapping[str, float] | None = None,
                 devices: Sequence[str] | None = None, attrs: Mapping[str, Any] | None = None,
                 listeners: Sequence[TMachineListener] = (), device: torch.device | None = None):
        target = program.target.data.split("@", 1)[0]
        pkg = KERNEL_PACKAGES.get(target)
        if pkg is None:
            raise TMachineError("unknown_kernel", f"no kernel package for target '{program.target.data}'",
                                where=program.target.data)
        self.package = importlib.import_module(pkg)
        self.device = device if device is not None else self.package.device()
        self.listeners = list(listeners)
        self.attrs = dict(attrs or {})
        self.devices = None if devices is None else set(devices)
        streams = [(s, ops) for s, ops in instructions(program)
                   if self.devices is None or s.device.data in self.devices]
        self.decls = {o.id.data: o for b in program.body.blocks for o in b.ops if isinstance(o, BufferOp)}
        used = {n for _, ops in streams for o in ops for n in self._names(o)}
        self.buffers: dict[str, torch.Tensor] = {}
        self._kv: list[torch.Tensor] = []
        for name in sorted(used):
            self.buffers[name] = self._bind_buffer(name, weights, rope_bases or {})
        self._kernels: dict[str, Any] = {}
        steps = sorted({s for _, ops in streams for o in ops if (s := step_of(o)) is not None})
        self.steps: dict[str, list[tuple[LaunchOp | ViewOp | CopyOp, Callable[[int], None]]]] = {}
        self.inbound: dict[str, list[str]] = {}
        self.outbound: dict[str, list[tuple[str, int]]] = {}
        self.rows: dict[str, int] = {}
        self.last_step: str | None = None
        """The step :meth:`run_step` ran last (the step of a frame's last chunk)."""
        for st in steps or ["any"]:
            ops = self._order([(s, [o for o in os_ if step_of(o) in (st, None)]) for s, os_ in streams])
            self.steps[st] = [(o, self._resolve(o)) for o in ops]
            self._edges(st, ops)

    # ------------------------------------------------------------------ binding
    @staticmethod
    def _names(o: LaunchOp | ViewOp | CopyOp) -> list[str]:
        return list(o.arg_ids)

    def _bind_buffer(self, name: str, weights: Mapping[str, Any], rope_bases: Mapping[str, float]) -> torch.Tensor:
        decl = self.decls.get(name)
        if decl is None:
            raise TMachineError("unknown_buffer", f"instruction argument '{name}' names no tmachine.buffer of the "
                                "program", where=name)
        shape = tuple(int(v) for v in decl.shape.get_values())  # type: ignore[arg-type]
        life, origin = decl.lifetime.data, decl.origin.data
        if life == "weight":
            if origin in ("rope_table", "rope_table_swa"):
                return self._rope_table(name, origin, shape, rope_bases)
            w = weights.get(origin)
            if w is None:
                raise TMachineError("abi", f"buffer '{name}' holds weight {origin}, which the stage's weights lack",
                                    where=name)
            if tuple(w.shape) != shape:
                raise TMachineError("abi", f"buffer '{name}': weight {origin} has shape {tuple(w.shape)}, the program "
                                    f"declares {shape}", where=name)
            raw = getattr(w, "raw", None)
            return (raw if raw is not None else w.contiguous()).to(self.device)
        dtype = DTYPES.get(decl.dtype.data)
        if dtype is None:
            raise TMachineError("abi", f"buffer '{name}' has dtype {decl.dtype.data}, which the interpreter does not "
                                "allocate", where=name)
        t = torch.zeros(shape, dtype=dtype, device=self.device)
        if life == "kv":
            self._kv.append(t)
        return t

    def _rope_table(self, name: str, origin: str, shape: tuple[int, ...], bases: Mapping[str, float]) -> torch.Tensor:
        from pipeplan.runtime.kernels.reference import rope_table

        base = bases.get(origin)
        if base is None or len(shape) != 2:
            raise TMachineError("abi", f"buffer '{name}' ({origin} {shape}): no rope base given for it", where=name)
        table = torch.view_as_real(rope_table(shape[0], shape[1], float(base))).reshape(shape[0], -1)
        if tuple(table.shape) != shape:
            raise TMachineError("abi", f"buffer '{name}': {origin} is {tuple(table.shape)}, the program declares "
                                f"{shape}", where=name)
        return table.contiguous().to(self.device)

    def _kernel(self, op: LaunchOp) -> Any:
        name = op.kernel.data
        fn = self._kernels.get(name)
        if fn is None:
            mod, _, func = name.partition(":")
            try:
                fn = getattr(importlib.import_module(f"{self.package.__name__}.{mod}"), func)
            except (ImportError, AttributeError):
                raise TMachineError("unknown_kernel", f"launch '{op.id.data}': kernel '{name}' is not a function of "
                                    f"{self.package.__name__}", where=op.id.data) from None
            if not hasattr(fn, "arg_names"):
                raise TMachineError("unknown_kernel", f"launch '{op.id.data}': '{name}' is not a Triton kernel",
                                    where=op.id.data)
            self._kernels[name] = fn
        return fn

    def _scalar(self, op: LaunchOp, key: str, v: Any) -> Any:
        if isinstance(v, str) and v.startswith("$") and v != START_POS:
            if v[1:] not in self.attrs:
                raise TMachineError("unbound_scalar", f"launch '{op.id.data}': scalar {key} = \"{v}\" has no "
                                    "binding (give it in attrs)", where=op.id.data)
            return self.attrs[v[1:]]
        return v

    def _resolve(self, op: LaunchOp | ViewOp | CopyOp) -> Callable[[int], None]:
        if isinstance(op, CopyOp):
            n = int(op.bytes.value.data)
            src, dst = _bytes(self.buffers[op.src.data]), _bytes(self.buffers[op.dst.data])
            s, d = src[:n], dst[:n]

            def copy(_pos: int) -> None:
                d.copy_(s)
            return copy
        if isinstance(op, ViewOp):
            x, y = (self.buffers[n] for n in op.arg_ids)

            def last_row(_pos: int) -> None:
                y.reshape(-1).copy_(x[-1].reshape(-1))
            return last_row
        return self._resolve_launch(op)

    def _resolve_launch(self, op: LaunchOp) -> Callable[[int], None]:
        fn = self._kernel(op)
        meta = {k: _value(v) for k, v in op.meta.data.items()}
        scalars = {k: self._scalar(op, k, _value(v)) for k, v in op.scalars.data.items()}
        args = [self.buffers[n] for n in op.arg_ids]
        ptrs = [p for p in fn.arg_names if p.endswith("_ptr")]
        if len(ptrs) != len(args):
            raise TMachineError("abi", f"launch '{op.id.data}': kernel {op.kernel.data} takes {len(ptrs)} buffers "
                                f"({', '.join(ptrs)}), the launch passes {len(args)}", where=op.id.data)
        by_ptr = dict(zip((p.removesuffix("_ptr") for p in ptrs), args, strict=True))
        positional: list[Any] = []
        pos_at: list[int] = []
        for p in fn.arg_names:
            if p in meta:
                continue
            if p.endswith("_ptr"):
                positional.append(by_ptr[p.removesuffix("_ptr")])
            elif p in scalars:
                if scalars[p] == START_POS:
                    pos_at.append(len(positional))
                positional.append(scalars[p])
            elif p.startswith("stride_"):
                rest = p.removeprefix("stride_")
                owner = max((q for q in by_ptr if rest.startswith(q)), key=len, default=None)
                if owner is None:
                    raise TMachineError("abi", f"launch '{op.id.data}': kernel parameter {p} strides no buffer "
                                        "parameter", where=op.id.data)
                positional.append(_row_stride(by_ptr[owner]))
            else:
                raise TMachineError("abi", f"launch '{op.id.data}': kernel {op.kernel.data} parameter {p} is neither "
                                    "a buffer, a meta-parameter, a scalar nor a stride of the launch", where=op.id.data)
        grid = tuple(int(g) for g in op.grid.get_values())  # type: ignore[arg-type]
        launcher = fn[grid]
        if not pos_at:
            fixed = tuple(positional)

            def launch(_pos: int) -> None:
                launcher(*fixed, **meta)
            return launch

        def launch_at(pos: int) -> None:
            a = list(positional)
            for i in pos_at:
                a[i] = pos
            launcher(*a, **meta)
        return launch_at

    def _order(self, streams: list[tuple[StreamOp, list[LaunchOp | ViewOp | CopyOp]]]
               ) -> list[LaunchOp | ViewOp | CopyOp]:
        flat = [o for _, ops in streams for o in ops]
        node: dict[Any, int] = {o: i for i, o in enumerate(flat)}
        preds: list[list[int]] = []
        i = 0
        for _, ops in streams:
            for k, o in enumerate(ops):
                ps = [i - 1] if k else []
                ps += [node[w] for t in o.waits if (w := signaller(t)) in node]
                preds.append(ps)
                i += 1
        order = stable_topo_order(len(flat), preds)
        if order is None:  # the verifier rejects deadlocks; an in-memory program may still have one
            raise TMachineError("abi", "stream order and waits deadlock", where="tmachine.program")
        return [flat[j] for j in order]

    def _edges(self, step: str, ops: list[LaunchOp | ViewOp | CopyOp]) -> None:
        written = {o.arg_ids[-1] for o in ops if o.arg_ids}
        read = {n for o in ops for n in (o.arg_ids[:1] if isinstance(o, CopyOp) else o.arg_ids)}
        edges = {n for n, d in self.decls.items() if d.lifetime.data == "edge"}
        self.inbound[step] = [o.src.data for o in ops if isinstance(o, CopyOp) and o.src.data in edges
                              and o.src.data not in written]
        self.outbound[step] = [(o.dst.data, int(o.bytes.value.data)) for o in ops if isinstance(o, CopyOp)
                               and o.dst.data in edges and o.dst.data not in read]
        ins = [o for o in ops if isinstance(o, CopyOp) and o.src.data in self.inbound[step]]
        if ins:
            e = self.buffers[ins[0].src.data]
            self.rows[step] = int(ins[0].bytes.value.data) // max(1, e[0].numel() * e.element_size())

    # ------------------------------------------------------------------ running
    def reset(self) -> None:
        """Zero the KV caches (a new sequence)."""
        for t in self._kv:
            t.zero_()

    def run_step(self, step: str, start_pos: int, inbound: torch.Tensor | None = None) -> list[torch.Tensor]:
        """Run one step at position ``start_pos``: ``inbound`` (the step's rows, ``[rows]`` token ids or
        ``[rows, D]`` activations) is written to the inbound edge; returns the outbound edges' rows (copies).

        Raises:
            TMachineError: ``rows`` (an unknown step, or rows that do not fit the step's inbound edge).
        """
        calls = self.steps.get(step)
        if calls is None:
            raise TMachineError("rows", f"the program has no step '{step}' (steps: {', '.join(self.steps)})",
                                where=step)
        if inbound is not None:
            want = self.rows.get(step)
            if not self.inbound[step] or int(inbound.shape[0]) != want:
                raise TMachineError("rows", f"step '{step}' takes {want} inbound rows, got {int(inbound.shape[0])}",
                                    where=step)
            for name in self.inbound[step]:
                e = self.buffers[name]
                e[: inbound.shape[0]].copy_(inbound.reshape((inbound.shape[0], *e.shape[1:])).to(e.dtype))
        self.last_step = step
        if self.listeners:
            for i, (op, fn) in enumerate(calls):
                t0 = time.perf_counter()
                fn(start_pos)
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
                t1 = time.perf_counter()
                ev = InstructionEvent(step, i, op.id.data, op.name,
                                      op.kernel.data if isinstance(op, LaunchOp) else "",
                                      tuple(int(g) for g in op.grid.get_values()) if isinstance(op, LaunchOp) else (),
                                      start_pos, t0, t1)  # type: ignore[arg-type]
                for li in self.listeners:
                    li.on_instruction(ev)
        else:
            for _, fn in calls:
                fn(start_pos)
        out = []
        for name, n in self.outbound[step]:
            e = self.buffers[name]
            row = e[0].numel() * e.element_size()
            out.append(e[: n // max(1, row)].clone())
        return out

    def forward(self, inbound: torch.Tensor, start_pos: int) -> torch.Tensor:
        """A frame of ``R`` rows at ``start_pos``: ``R // P`` prefill chunks of the prefill step's ``P`` rows,
        then decode steps of 1 row (module docstring). Returns the first outbound edge's rows of every
        chunk, concatenated (the last stage: one token id per chunk, the last one the frame's)."""
        r = int(inbound.shape[0])
        p = self.rows.get("prefill", 0)
        outs: list[torch.Tensor] = []
        i = 0
        while i < r:
            step, n = ("prefill", p) if p > 1 and r - i >= p else ("decode", 1)
            outs.append(self.run_step(step, start_pos + i, inbound[i:i + n])[0])
            i += n
        return torch.cat(outs) if outs else inbound[:0]


__all__ = ["DTYPES", "InstructionEvent", "KERNEL_PACKAGES", "TMachineError", "TMachineInterpreter", "TMachineListener",
           "instructions", "step_of"]
