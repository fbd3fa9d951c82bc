"""Stage programs: a stage as an ordered list of named kernel calls over named buffers.

A stage executes what the compiler produced (DESIGN.md §1): an ordered program of
:class:`KernelCall` over named buffers, not one opaque forward function. Buffer names:

* ``input`` — the stage input: token ids int64 ``[T]`` (first stage) or activations float32 ``[T, D]``;
* ``start_pos`` — the position of the first input token (a Python int bound per call);
* ``rope_table`` / ``rope_table_swa`` — constant complex rotation tables ``[max_seq_len, 1, rope_dim/2]``
  (base ``rope_base``; ``rope_base_swa`` for the sliding-window layers of models that have one);
* GGUF tensor names (``blk.3.attn_q.weight``, ``blk.3.attn_q.bias``, ``token_embd.weight``, ...) —
  weights, torch order;
* ``blk.N.cache_k`` / ``blk.N.cache_v`` — KV cache of block N, ``[max_seq_len, Hkv, hd_k]`` / ``[.., hd_v]``;
* ``output`` — the stage result: activations ``[T, D]`` or, on the last stage, logits ``[T, V]``;
* anything else (``h0``, ``blk.3.q`` ...) — transients, written before they are read.

:func:`build_stage_program` makes the program (pure, no weights) with the builder of the model's
architecture (:mod:`pipeplan.models.archs`: llama.cpp's ``llm_build_llama``, ``llm_build_gemma3``,
``llm_build_qwen2``, ``llm_build_qwen3`` graphs): the compiler's passes start from it, and it is re-exported
here for kernel-level users of the executor; a stage worker never calls it, it binds the compiled program
(:mod:`pipeplan.runtime.compiled`). :class:`StageExecutor` binds a program to weights (checking
names and shapes), allocates the KV cache and runs it with a kernel table (the torch reference
kernels by default). A table module whose ``ARRAYS`` is ``"numpy"`` (the CPU table) runs on numpy
buffers, and then nothing here imports torch; other tables (reference, Triton) hold torch tensors,
imported when such an executor is made.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

import numpy as np
from pipeplan.models.stage_program import (  # noqa: F401  (re-exported: torch-free half)
    ROPE_TABLE,
    ROPE_TABLE_SWA,
    STAGE_INPUT,
    STAGE_OUTPUT,
    START_POS,
    AllocationError,
    BindError,
    ExecutionError,
    FrozenAttrs,
    HParams,
    InvalidHParamsError,
    InvalidRangeError,
    KernelCall,
    LlamaHParams,
    MissingTensorError,
    ProgramError,
    UnexpectedTensorError,
    UnsupportedArchitectureError,
    build_stage_program,
    is_cache,
    is_weight,
)
from pipeplan.runtime.dequant import QuantTensor


class NonFiniteError(ExecutionError):
    """A stage output holding Inf or NaN (issue 11 item 3): names the block whose output first holds one
    (or the embedding / output head). ``kind`` is ``runtime``."""

    code = "non_finite"


class _NumpyArrays:
    """Array operations of the executor for numpy buffers (tables with ``ARRAYS = "numpy"``)."""

    name = "numpy"
    array_type: Any = np.ndarray

    @staticmethod
    def is_array(x: Any) -> bool:
        return isinstance(x, np.ndarray)

    @staticmethod
    def as_weight(x: Any) -> Any:
        """A float32 numpy weight (a CPU torch tensor is viewed through ``numpy()``), None if not an array."""
        if not isinstance(x, np.ndarray):
            if not type(x).__module__.startswith("torch") or not hasattr(x, "numpy"):
                return None
            x = x.detach().cpu().numpy()
        return x if x.dtype == np.float32 else x.astype(np.float32)

    @staticmethod
    def zeros(shape: tuple[int, ...]) -> Any:
        return np.zeros(shape, dtype=np.float32)

    @staticmethod
    def cat_rows(ts: Sequence[Any]) -> Any:
        return np.ascontiguousarray(np.concatenate(list(ts), axis=0))

    @staticmethod
    def all_finite(x: Any) -> bool:
        # a sum is finite iff every element is (no finite float32 sum of these sizes overflows); the
        # element test only confirms a failure
        return math.isfinite(float(np.sum(x))) or bool(np.isfinite(x).all())

    @staticmethod
    def ids(x: Any) -> tuple[Any, str | None]:
        """Token ids as int64, or an error text."""
        if not isinstance(x, np.ndarray):
            return x, f"stage input must be a numpy array, got {type(x).__name__}"
        if x.ndim != 1 or x.dtype not in (np.int64, np.int32):
            return x, f"first stage takes int64 token ids [T], got {x.dtype} {tuple(x.shape)}"
        return (x if x.dtype == np.int64 else x.astype(np.int64)), None

    @staticmethod
    def acts_ok(x: Any, d: int) -> bool:
        return isinstance(x, np.ndarray) and x.ndim == 2 and x.shape[1] == d and x.dtype == np.float32

    @staticmethod
    def token_ids(ids: Sequence[int]) -> Any:
        return np.asarray(list(ids), dtype=np.int64)

    @staticmethod
    def argmax_row(x: Any) -> int:
        return int(np.argmax(x))

    @staticmethod
    def no_grad() -> Any:
        return contextlib.nullcontext()

    @staticmethod
    def set_threads(n: int) -> None:
        pass


class _TorchArrays:
    """Array operations of the executor for torch tensors (reference and Triton tables); imports torch."""

    name = "torch"

    def __init__(self) -> None:
        import torch

        self.torch = torch
        self.array_type = torch.Tensor

    def is_array(self, x: Any) -> bool:
        return isinstance(x, self.torch.Tensor)

    def as_weight(self, x: Any) -> Any:
        """A float32 torch weight (a numpy array is wrapped without a copy), None if not an array."""
        if isinstance(x, np.ndarray):
            x = self.torch.from_numpy(x)
        if not isinstance(x, self.torch.Tensor):
            return None
        return x if x.dtype == self.torch.float32 else x.float()

    def zeros(self, shape: tuple[int, ...]) -> Any:
        return self.torch.zeros(shape, dtype=self.torch.float32)

    def cat_rows(self, ts: Sequence[Any]) -> Any:
        return self.torch.cat(list(ts), dim=0).contiguous()

    def all_finite(self, x: Any) -> bool:
        return math.isfinite(float(x.sum())) or bool(self.torch.isfinite(x).all())

    def ids(self, x: Any) -> tuple[Any, str | None]:
        torch = self.torch
        if not isinstance(x, torch.Tensor):
            return x, f"stage input must be a torch.Tensor, got {type(x).__name__}"
        if x.dim() != 1 or x.dtype not in (torch.int64, torch.int32):
            return x, f"first stage takes int64 token ids [T], got {x.dtype} {tuple(x.shape)}"
        return x.long(), None

    def acts_ok(self, x: Any, d: int) -> bool:
        return isinstance(x, self.torch.Tensor) and x.dim() == 2 and x.shape[1] == d and x.dtype == self.torch.float32

    def token_ids(self, ids: Sequence[int]) -> Any:
        return self.torch.tensor(list(ids), dtype=self.torch.int64)

    def argmax_row(self, x: Any) -> int:
        return int(self.torch.argmax(x))

    def no_grad(self) -> Any:
        return self.torch.inference_mode()

    def set_threads(self, n: int) -> None:
        self.torch.set_num_threads(int(n))


def _arrays_of(module: ModuleType | None, table: Mapping[str, Callable]) -> Any:
    """The array operations for a kernel table: numpy when its module (or the module defining its
    ``matmul``) says ``ARRAYS = "numpy"``, else torch."""
    if module is None:
        fn = table.get("matmul") or next(iter(table.values()), None)
        module = sys.modules.get(getattr(fn, "__module__", "") or "")
    if getattr(module, "ARRAYS", "torch") == "numpy":
        return _NumpyArrays
    return _TorchArrays()


def _reference_table() -> ModuleType:
    return importlib.import_module("pipeplan.runtime.kernels.reference")


def fuse_matmuls(program: Sequence[KernelCall], weights: Mapping[str, Any]
                 ) -> tuple[list[KernelCall], dict[str, Any]]:
    """Program rewrite: consecutive ``matmul`` calls reading the same activation (q/k/v, gate/up)
    become one ``matmul`` over the row-concatenated weight plus a ``split`` (column views).

    Returns the new program and the fused weights (``<w1>+<w2>+...`` names, e.g.
    ``blk.0.attn_q.weight+blk.0.attn_k.weight+blk.0.attn_v.weight``). Each output column is the
    same dot product as before, so results agree with the unfused program to float rounding of
    the BLAS blocking (the EXPECTED greedy tokens are unchanged: tested).
    """
    out: list[KernelCall] = []
    fused: dict[str, Any] = {}
    i = 0
    while i < len(program):
        c = program[i]
        j = i
        while (c.kernel == "matmul" and j + 1 < len(program) and program[j + 1].kernel == "matmul"
               and program[j + 1].inputs[0] == c.inputs[0] and program[j + 1].block == c.block):
            j += 1
        if j == i or any(n not in weights or isinstance(weights[n], QuantTensor)
                         for k in program[i : j + 1] for n in k.inputs[1:]):
            out.append(c)
            i += 1
            continue
        group = program[i : j + 1]
        names = [k.inputs[1] for k in group]
        fname = "+".join(names)
        ws = [weights[n] for n in names]
        fused[fname] = (_NumpyArrays if isinstance(ws[0], np.ndarray) else _TorchArrays()).cat_rows(ws)
        tmp = f"{fname}:out"
        out.append(KernelCall("matmul", (c.inputs[0], fname), (tmp,), {}, c.block))
        sizes = tuple(int(weights[n].shape[0]) for n in names)
        out.append(KernelCall("split", (tmp,), tuple(k.outputs[0] for k in group), {"sizes": sizes}, c.block))
        i = j + 1
    return out, fused


# --------------------------------------------------------------------------- executor
class StageExecutor:
    """Runs a stage program with bound weights and a KV cache.

    Args:
        hp: model hyper-parameters.
        program: a compiled stage step's KernelCall list (:mod:`pipeplan.runtime.compiled`), or
            :func:`build_stage_program`'s (kernel-level use).
        weights: name -> float32 array of the table's kind (torch tensor, or numpy for a numpy table; e.g.
            :func:`pipeplan.runtime.loader.load_stage_weights`) or QuantTensor; extra tensors are ignored.
        max_seq_len: positions the KV cache holds (prompt + generated).
        kernels: a module with a ``KERNELS`` table, or the table itself (default: torch reference).
            A module may provide the hooks ``allocate``, ``rope_table``, ``begin_step``, ``set_num_threads``
            and ``OUTPUT_ROWS_ONLY``, and ``ARRAYS = "numpy"`` for numpy buffers.
        fuse: apply :func:`fuse_matmuls` at bind time (default False: on stories260K the extra
            ``split`` and the non-contiguous views cost more than the saved matmul launches,
            measured ~1550 vs ~1750 decode tok/s; it should pay off when matmuls dominate).
        num_threads: if set, the table's ``set_num_threads(num_threads)`` (else torch's; process-wide).
        allocate: ``shape -> array`` used for the KV cache (default: the table's ``allocate``, else float32
            zeros; a hook for fault injection). Called slot by slot, each slot's caches in the order the
            program first reads them.
        slots: KV-cache slots (concurrent sequences, issue 14 item 1): each slot has its own
            ``blk.N.cache_k/v`` pair per block and its own ``n_past``; :meth:`forward` and :meth:`reset`
            take the slot (default 0).

    Raises:
        BindError: unknown kernel; a weight the program reads is missing or has the wrong shape
            (the message names the tensor and the call's block); a buffer read before written.
        AllocationError: allocating the KV cache or rope table failed (RuntimeError/MemoryError).
    """

    def __init__(self, hp: LlamaHParams, program: Sequence[KernelCall], weights: Mapping[str, Any],
                 max_seq_len: int, kernels: ModuleType | Mapping[str, Callable] | None = None, *,
                 fuse: bool = False, num_threads: int | None = None,
                 allocate: Callable[[tuple[int, ...]], Any] | None = None, slots: int = 1):
        self.hp = hp
        if int(slots) < 1:
            raise AllocationError(f"KV-cache slots must be >= 1, got {slots}", where="parallel")
        self.slots = int(slots)
        self.max_seq_len = int(max_seq_len)
        self.program = list(program)
        if kernels is None:
            kernels = _reference_table()
        table = kernels.KERNELS if isinstance(kernels, ModuleType) else kernels
        module = kernels if isinstance(kernels, ModuleType) else None
        arrays = self._arrays = _arrays_of(module, table)
        if num_threads is not None:
            setter = getattr(module, "set_num_threads", None)
            (setter or arrays.set_threads)(int(num_threads))
        if self.max_seq_len < 1:
            raise AllocationError(f"max_seq_len must be >= 1, got {max_seq_len}", where="max_seq_len")
        self.first = any(c.kernel == "embedding_gather" for c in self.program)
        self.last = any(c.kernel == "last_row" for c in self.program)
        static: dict[str, Any] = {}
        # bind weights: every weight the program reads, present and with the right shape
        for c in self.program:
            if c.kernel not in table:
                raise BindError(f"unknown kernel {c.kernel!r} (block {c.block})", where=c.kernel)
            for n in c.inputs:
                if not is_weight(n) or n in static:
                    continue
                where = f"block {c.block}" if c.block is not None else "stage head/embedding"
                if n not in weights:
                    raise BindError(f"weight {n} is missing ({where}, kernel {c.kernel})", where=n)
                t = weights[n]
                want = hp.weight_shape(n)
                quant = isinstance(t, QuantTensor)  # kept in its GGUF type (CPU target): bound as is
                a = t if quant else arrays.as_weight(t)
                if a is None:
                    kind = "a numpy array" if arrays.name == "numpy" else "a torch.Tensor"
                    raise BindError(f"weight {n} is a {type(t).__name__}, not {kind} or QuantTensor", where=n)
                if want is not None and tuple(a.shape) != want:
                    raise BindError(f"weight {n} has shape {tuple(a.shape)}, expected {want} ({where})", where=n)
                static[n] = a
        # allocate KV caches and the rope tables
        alloc = allocate or getattr(module, "allocate", None) or arrays.zeros
        make_rope_table = getattr(module, "rope_table", None) or _reference_table().rope_table
        cache_shape = (self.max_seq_len, hp.n_head_kv, hp.head_dim)
        v_shape = (self.max_seq_len, hp.n_head_kv, hp.head_dim_v)
        cache_names = list(dict.fromkeys(n for c in self.program for n in c.inputs if is_cache(n) and n not in static))
        slot_caches: list[dict[str, Any]] = []
        try:
            for _ in range(self.slots):
                slot_caches.append({n: alloc(v_shape if n.endswith(".cache_v") else cache_shape) for n in cache_names})
            static.update(slot_caches[0])
            for name, base in ((ROPE_TABLE, hp.rope_base), (ROPE_TABLE_SWA, hp.rope_base_swa)):
                if any(name in c.inputs for c in self.program):
                    static[name] = make_rope_table(self.max_seq_len, hp.rope_dim, base)
        except (RuntimeError, MemoryError) as e:
            raise AllocationError(
                f"cannot allocate KV cache {cache_shape} x {len(cache_names)} x {self.slots} slot(s) for max_seq_len "
                f"{self.max_seq_len}: {e}".splitlines()[0], where="kv_cache") from e
        self.caches = {n: v for n, v in static.items() if is_cache(n)}
        """Slot 0's KV caches by name (``slot_caches[s]`` for slot ``s``)."""
        self.slot_caches = slot_caches
        run_program = self.program
        if fuse:
            run_program, fused = fuse_matmuls(self.program, static)
            static.update(fused)
        self.run_program = run_program
        # check dataflow: every read has a writer before it
        defined = set(static) | {STAGE_INPUT, START_POS}
        for c in run_program:
            for n in c.inputs:
                if n not in defined:
                    raise BindError(f"kernel {c.kernel} (block {c.block}) reads {n} before it is written", where=n)
            defined.update(c.outputs)
        if STAGE_OUTPUT not in defined:
            raise BindError("program never writes the stage output", where=STAGE_OUTPUT)
        self._static = static
        # per-slot environments resolved once: the shared buffers with that slot's caches
        self._slot_static = [static] + [{**static, **slot_caches[k]} for k in range(1, self.slots)]
        self._calls = [(table[c.kernel], c.inputs, c.outputs, dict(c.attrs)) for c in run_program
                       if c.kernel != "last_row"]
        # where a non-finite stage output is traced back to: embedding, each block's output, the head
        ends: dict[int, str] = {}
        for c in run_program:
            if c.block is not None and c.outputs:
                ends[c.block] = c.outputs[-1]
        emb = [("the embedding (token_embd.weight)", c.outputs[0]) for c in run_program
               if c.kernel == "embedding_gather"]
        self._checkpoints = emb + [(f"block {b}", n) for b, n in sorted(ends.items())]
        self._last_row_at = next((i for i, c in enumerate(run_program) if c.kernel == "last_row"), None)
        self._begin_step = getattr(module, "begin_step", None)
        self._tail_at: int = -1
        self._tail_rows: tuple[str, ...] = ()
        if self._last_row_at is not None and getattr(module, "OUTPUT_ROWS_ONLY", False):
            self._tail_at, self._tail_rows = _output_rows_tail(run_program[: self._last_row_at], set(static))
        if self._last_row_at is not None:
            lr = run_program[self._last_row_at]
            self._last_row = (table["last_row"], lr.inputs[0], lr.outputs[0])
        # buffers dropped after their last read (the block outputs stay for the non-finite diagnosis)
        keep = set(static) | {STAGE_OUTPUT, START_POS} | {n for _, n in self._checkpoints}
        last_read = {n: j for j, c in enumerate(run_program) for n in c.inputs if n not in keep}
        self._free: list[tuple[str, ...]] = [() for _ in run_program]
        for n, j in last_read.items():
            self._free[j] += (n,)
        # the loop's steps, resolved once: (kernel or None for last_row, inputs, the one output or None,
        # outputs, attrs or None, buffers dropped after it)
        self._steps: list[tuple[Any, tuple[str, ...], str | None, tuple[str, ...], dict[str, Any] | None,
                                tuple[str, ...]]] = [
            (None if c.kernel == "last_row" else table[c.kernel], tuple(c.inputs),
             c.outputs[0] if len(c.outputs) == 1 else None, tuple(c.outputs), dict(c.attrs) or None, self._free[j])
            for j, c in enumerate(run_program)]
        self.n_pasts = [0] * self.slots
        """Cached positions per slot: ``[0, n_pasts[s])`` of slot ``s`` are written."""
        self.trace: list[tuple[int, float, float]] | None = None
        """When a list: every call appends ``(index in run_program, t0, t1)`` (``perf_counter`` s; the
        stage's instruction trace, :mod:`pipeplan.runtime.trace`)."""
        # micro-batches: the calls that read a position or a KV cache run once per segment
        self._batch_rows = bool(getattr(module, "BATCH_ROWS", False)) and self._begin_step is not None
        self._per_segment = [any(n == START_POS or is_cache(n) for n in c.inputs) for c in run_program]
        self._rows_bufs = {n for c in run_program for n in (*c.inputs, *c.outputs)
                           if n not in static and n != START_POS}

    @property
    def n_past(self) -> int:
        """Cached positions of slot 0."""
        return self.n_pasts[0]

    @n_past.setter
    def n_past(self, value: int) -> None:
        self.n_pasts[0] = int(value)

    @property
    def kv_cache_bytes(self) -> int:
        """Bytes held by the KV cache (all slots)."""
        return sum(int(t.nbytes) for d in self.slot_caches for t in d.values())

    def reset(self, slot: int | None = None) -> None:
        """Forget every cached position of ``slot`` (None: of every slot): zeroes its KV cache; its next
        call must start at 0. Raises ExecutionError for a slot outside ``[0, slots)``."""
        for s in (range(self.slots) if slot is None else (self._slot(slot),)):
            for t in self.slot_caches[s].values():
                t.fill(0) if isinstance(t, np.ndarray) else t.zero_()
            self.n_pasts[s] = 0

    def _slot(self, slot: int) -> int:
        if not (isinstance(slot, int) and 0 <= slot < self.slots):
            raise ExecutionError(f"KV-cache slot {slot!r} outside [0, {self.slots})", where="slot")
        return slot

    def _check_input(self, x: Any, start_pos: int, n_past: int, positions: bool = True) -> Any:
        arrays = self._arrays
        if self.first:
            x, bad = arrays.ids(x)
            if bad is not None:
                raise ExecutionError(bad, where=STAGE_INPUT)
            ids = x.tolist()  # one host copy; cheaper than two reductions for the few ids of a step
            if ids and (min(ids) < 0 or max(ids) >= self.hp.n_vocab):
                raise ExecutionError(f"token id outside [0, {self.hp.n_vocab}): {ids}", where=STAGE_INPUT)
        else:
            if not arrays.is_array(x):
                what = "a numpy array" if arrays.name == "numpy" else "a torch.Tensor"
                raise ExecutionError(f"stage input must be {what}, got {type(x).__name__}", where=STAGE_INPUT)
            if not arrays.acts_ok(x, self.hp.n_embd):
                raise ExecutionError(
                    f"stage takes float32 activations [T, {self.hp.n_embd}], got {x.dtype} {tuple(x.shape)}",
                    where=STAGE_INPUT)
        t = x.shape[0]
        if t < 1:
            raise ExecutionError("stage input has no tokens", where=STAGE_INPUT)
        if not positions:
            return x
        if not isinstance(start_pos, int) or start_pos < 0:
            raise ExecutionError(f"start_pos must be a non-negative int, got {start_pos!r}", where=START_POS)
        if start_pos + t > self.max_seq_len:
            raise ExecutionError(
                f"positions [{start_pos}, {start_pos + t}) exceed max_seq_len {self.max_seq_len}", where=START_POS)
        if start_pos > n_past:
            raise ExecutionError(
                f"start_pos {start_pos} skips positions: only [0, {n_past}) are cached", where=START_POS)
        return x

    def forward(self, x: Any, start_pos: int, last_only: bool = False, slot: int = 0) -> Any:
        """Run the program on ``T`` tokens at positions ``[start_pos, start_pos + T)``.

        Args:
            x: int64 token ids ``[T]`` (first stage) or float32 activations ``[T, n_embd]`` (numpy for a
                numpy table, else torch).
            start_pos: position of ``x[0]``; must be ``<=`` the number of cached positions (a
                smaller value overwrites the cache from there, e.g. to re-run a prompt).
            last_only: on the last stage, compute logits for the last position only.
            slot: the KV-cache slot (sequence) this call reads and writes.

        Returns:
            float32 activations ``[T, n_embd]`` (non-last stage) or logits ``[T, n_vocab]``
            (``[1, n_vocab]`` with ``last_only``). The tensor may be a buffer of this executor:
            copy it if it must outlive the next call.

        Raises:
            ExecutionError: wrong input dtype/shape, token id outside the vocabulary,
                ``start_pos + T > max_seq_len``, a gap after the slot's cached positions, a slot outside
                ``[0, slots)``.
            NonFiniteError: the output holds Inf/NaN (checked once per call; on failure the block
                outputs are scanned to name the first block whose output holds one).
        """
        if slot:
            self._slot(slot)
        x = self._check_input(x, start_pos, self.n_pasts[slot])
        env = dict(self._slot_static[slot])
        env[STAGE_INPUT] = x
        env[START_POS] = start_pos
        split_at = self._last_row_at if self._last_row_at is not None else len(self._calls)
        if self._begin_step is not None:
            self._begin_step(start_pos, x.shape[0])
        tail_at = self._tail_at if last_only and x.shape[0] > 1 else -1
        try:
            self._run(env, split_at, tail_at, last_only)
        finally:
            if self._begin_step is not None:
                self._begin_step(0, 0)
        out = env[STAGE_OUTPUT]
        with self._arrays.no_grad():
            # a sum is finite iff every element is (0.03 ms instead of 0.6 ms for 262144 logits)
            if not self._arrays.all_finite(out):
                self._non_finite(env, start_pos, x.shape[0])
        self.n_pasts[slot] = start_pos + x.shape[0]
        return out

    def forward_segments(self, x: Any, segments: Sequence[tuple[int, int, int]], last_only: bool = False) -> Any:
        """Run a micro-batch: the rows of several sequences, ``segments[i] = (slot, position, n_rows)`` in row order.

        Every segment's rows get the numbers :meth:`forward` gives them alone (``forward(rows, position,
        last_only, slot)``). With a table whose ``BATCH_ROWS`` is true and one-row segments (decode steps) the
        row-wise calls (norms, matmuls, adds, activations, head) run once over all rows and the calls that read
        a position or a KV cache (rope, kv_cache_write, attention) once per segment, in its slot at its position;
        otherwise each segment runs alone through :meth:`forward`.

        Returns the rows of every segment in order (``last_only``: the last row of each, ``[len(segments), V]``).
        Raises ExecutionError for a bad table (no segment, a slot outside ``[0, slots)`` or named twice, rows
        that do not add up to ``x``'s, a position that skips cached positions or runs past ``max_seq_len``), and
        as :meth:`forward`.
        """
        segs = self._check_segments(x, segments)
        arrays = self._arrays
        if not (self._batch_rows and all(n == 1 for _, _, n in segs)) or len(segs) == 1:
            outs, r = [], 0
            for slot, pos, n in segs:
                o = self.forward(x[r:r + n], pos, last_only=last_only, slot=slot)
                outs.append(o)
                r += n
            return outs[0] if len(outs) == 1 else arrays.cat_rows(outs)
        x = self._check_input(x, 0, 0, positions=False)
        env = dict(self._static)
        env[STAGE_INPUT] = x
        env[START_POS] = 0
        assert self._begin_step is not None
        self._begin_step(0, x.shape[0], True)
        try:
            self._run(env, len(self._calls), -1, False, segs)
        finally:
            self._begin_step(0, 0)
        out = env[STAGE_OUTPUT]
        with arrays.no_grad():
            if not arrays.all_finite(out):
                lo, hi = min(p for _, p, _ in segs), max(p for _, p, _ in segs)
                self._non_finite(env, lo, hi + 1 - lo)
        for slot, pos, n in segs:
            self.n_pasts[slot] = pos + n
        return out

    def _check_segments(self, x: Any, segments: Sequence[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
        segs = [tuple(s) for s in segments]
        if not segs:
            raise ExecutionError("a micro-batch without segments", where="segments")
        rows = int(x.shape[0]) if getattr(x, "ndim", 0) >= 1 else -1
        seen: set[int] = set()
        for s in segs:
            if len(s) != 3 or not all(isinstance(v, int) and not isinstance(v, bool) for v in s):
                raise ExecutionError(f"segment {s!r} is not (slot, position, n_rows) ints", where="segments")
            slot, pos, n = s
            if not 0 <= slot < self.slots:
                raise ExecutionError(f"segment names KV-cache slot {slot} outside [0, {self.slots})", where="segments")
            if slot in seen:
                raise ExecutionError(f"KV-cache slot {slot} named by two segments of one micro-batch", where="segments")
            seen.add(slot)
            if n < 1 or pos < 0:
                raise ExecutionError(f"segment of slot {slot}: position {pos}, {n} rows (need >= 0, >= 1)",
                                     where="segments")
            if pos + n > self.max_seq_len:
                raise ExecutionError(f"segment of slot {slot}: positions [{pos}, {pos + n}) exceed max_seq_len "
                                     f"{self.max_seq_len}", where="segments")
            if pos > self.n_pasts[slot]:
                raise ExecutionError(f"segment of slot {slot}: position {pos} skips positions: only "
                                     f"[0, {self.n_pasts[slot]}) are cached", where="segments")
        total = sum(n for _, _, n in segs)
        if total != rows:
            raise ExecutionError(f"segments hold {total} rows but the input has {rows}", where="segments")
        return segs  # type: ignore[return-value]

    def _run(self, env: dict[str, Any], split_at: int, tail_at: int, last_only: bool,
             segs: Sequence[tuple[int, int, int]] | None = None) -> None:
        """The calls in order on ``env`` (``forward``'s loop): ``last_row`` at its place (before call
        ``split_at`` of the calls without it), buffers dropped after their last read, the output-rows tail
        after call ``tail_at`` (which precedes ``last_row``)."""
        log = self.trace
        clock = time.perf_counter
        with self._arrays.no_grad():
            for i, (fn, ins, out, outs, kw, free) in enumerate(self._steps):
                if log is not None:
                    t0 = clock()
                if fn is None:  # last_row
                    env[out] = self._last_row[0](env[ins[0]]) if last_only else env[ins[0]]  # type: ignore[index]
                elif segs is not None and self._per_segment[i]:
                    self._per_segment_call(env, fn, ins, out, outs, kw, segs)
                else:
                    r = fn(*[env[n] for n in ins], **kw) if kw else fn(*[env[n] for n in ins])
                    if out is not None:
                        env[out] = r
                    elif outs:
                        for n, v in zip(outs, r, strict=True):
                            env[n] = v
                if log is not None:
                    log.append((i, t0, clock()))
                for n in free:
                    del env[n]
                if i == tail_at:  # the rest of the last block computes the output row only
                    for n in self._tail_rows:
                        env[n] = env[n][-1:]

    def _per_segment_call(self, env: dict[str, Any], fn: Any, ins: tuple[str, ...], out: str | None,
                          outs: tuple[str, ...], kw: dict[str, Any] | None,
                          segs: Sequence[tuple[int, int, int]]) -> None:
        """One call of a micro-batch run once per one-row segment: row ``i`` of the row buffers, segment ``i``'s
        slot caches and position; the outputs' rows joined in segment order."""
        if len(outs) > 1:
            raise ExecutionError(f"kernel with outputs {outs} reads a position or a KV cache: a micro-batch runs "
                                 f"such calls with at most one output", where="segments")
        rows_bufs, caches = self._rows_bufs, self.slot_caches
        parts = []
        for i, (slot, pos, _n) in enumerate(segs):
            args = [pos if n == START_POS else caches[slot][n] if is_cache(n)
                    else env[n][i:i + 1] if n in rows_bufs else env[n] for n in ins]
            parts.append(fn(*args, **kw) if kw else fn(*args))
        if out is not None:
            env[out] = self._arrays.cat_rows(parts)

    def _non_finite(self, env: Mapping[str, Any], start_pos: int, t: int) -> None:
        """Raise NonFiniteError naming the first checkpoint (embedding, block outputs in order) whose
        buffer holds Inf/NaN; the output head when all of them are finite."""
        where = "the output head" if self.last else "this stage's last call"
        for label, name in self._checkpoints:
            v = env.get(name)
            if self._arrays.is_array(v) and not self._arrays.all_finite(v):
                where = label
                break
        raise NonFiniteError(f"non-finite values (Inf/NaN) in the stage output for positions [{start_pos}, "
                             f"{start_pos + t}): they first appear in the output of {where}", where=where)

    __call__ = forward


def _output_rows_tail(calls: Sequence[KernelCall], static: set[str]) -> tuple[int, tuple[str, ...]]:
    """Where llama.cpp's graph keeps only the output rows (``ggml_get_rows(cur, inp_out_ids)`` after the
    last block's attention output projection): the index of the ``matmul`` that reads the last
    ``attention`` output, and the row buffers read after it that exist at that point. ``(-1, ())``
    when the program has no such call."""
    att = max((i for i, c in enumerate(calls) if c.kernel == "attention"), default=-1)
    if att < 0:
        return -1, ()
    proj = next((i for i in range(att + 1, len(calls))
                 if calls[i].kernel == "matmul" and calls[i].inputs[0] == calls[att].outputs[0]), -1)
    if proj < 0:
        return -1, ()
    known = {STAGE_INPUT} | {n for c in calls[: proj + 1] for n in c.outputs}
    later = [n for c in calls[proj + 1:] for n in c.inputs if n in known and n not in static]
    return proj, tuple(dict.fromkeys(later))


__all__ = [
    "AllocationError", "BindError", "ExecutionError", "HParams", "InvalidRangeError", "KernelCall", "LlamaHParams",
    "NonFiniteError", "ProgramError", "StageExecutor", "build_stage_program", "fuse_matmuls",
]
