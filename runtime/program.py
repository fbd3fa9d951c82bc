"""Stage programs: a llama stage as an ordered list of named kernel calls over named buffers.

A stage executes what the compiler produced (DESIGN.md §1): an ordered program of
:class:`KernelCall` over named buffers, not one opaque forward function. Buffer names:

* ``input`` — the stage input: token ids int64 ``[T]`` (first stage) or activations float32 ``[T, D]``;
* ``start_pos`` — the position of the first input token (a Python int bound per call);
* ``rope_table`` — constant complex rotation table ``[max_seq_len, 1, rope_dim/2]``;
* GGUF tensor names (``blk.3.attn_q.weight``, ``token_embd.weight``, ...) — weights, torch order;
* ``blk.N.cache_k`` / ``blk.N.cache_v`` — KV cache of block N, ``[max_seq_len, Hkv, hd]``;
* ``output`` — the stage result: activations ``[T, D]`` or, on the last stage, logits ``[T, V]``;
* anything else (``h0``, ``blk.3.q`` ...) — transients, written before they are read.

:func:`build_stage_program` makes the program (pure, no weights); :class:`StageExecutor` binds it
to weights (checking names and shapes), allocates the KV cache and runs it with a kernel table
(the torch reference kernels by default). The graph follows llama.cpp ``build_llama``
(src/llama-model.cpp, ``LLM_ARCH_LLAMA``): pre-norm attention with NORM-mode rope and GQA, pre-norm
SwiGLU FFN, final RMS norm and output head (``token_embd.weight`` when the model has no
``output.weight``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch
from pipeplan.errors import PipeplanError
from pipeplan.plan_types import ModelFacts
from pipeplan.runtime.kernels import reference as reference_kernels

STAGE_INPUT = "input"
STAGE_OUTPUT = "output"
START_POS = "start_pos"
ROPE_TABLE = "rope_table"


# --------------------------------------------------------------------------- errors
class ProgramError(PipeplanError):
    """Base of stage-program errors. ``kind`` is the StageFault kind a stage reports for it."""

    code = "program"
    kind = "runtime"


class InvalidRangeError(ProgramError):
    """A layer range outside ``[0, n_layer)``, empty, or reversed (seed 001 WL-F-5)."""

    code = "invalid_range"
    kind = "invalid_range"


class BindError(ProgramError):
    """A weight the program names is missing or has the wrong shape, or a malformed program
    (unknown kernel, a buffer read before it is written) (seed 001 WL-F-4)."""

    code = "bind"
    kind = "bind"


class AllocationError(ProgramError):
    """KV cache or table allocation failed (seed 001 WL-F-3)."""

    code = "allocation"
    kind = "allocation"


class ExecutionError(ProgramError):
    """Bad input to :meth:`StageExecutor.forward`: positions past ``max_seq_len``, a gap in the
    positions, wrong dtype/shape, or a token id outside the vocabulary."""

    code = "execution"
    kind = "runtime"


# --------------------------------------------------------------------------- hparams
@dataclass(frozen=True)
class LlamaHParams:
    """Hyper-parameters of a llama model (the llama.cpp ``llama.*`` metadata keys).

    Attributes:
        n_embd: hidden size D. n_head / n_head_kv: query / KV heads. n_ff: FFN width.
        n_vocab: vocabulary size. n_ctx: training context length. rope_dim: rotated dims per head.
        rope_base: rope frequency base. rms_eps: RMS-norm epsilon.
        n_layer: block count (0 = unknown: ranges are then not checked against it).
        tied_embedding: True when the model has no ``output.weight`` (the head is ``token_embd.weight``).
    """

    n_embd: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_vocab: int
    n_ctx: int
    rope_dim: int
    rope_base: float
    rms_eps: float
    n_layer: int = 0
    tied_embedding: bool = False

    @property
    def head_dim(self) -> int:
        """``n_embd // n_head``."""
        return self.n_embd // self.n_head

    @classmethod
    def from_facts(cls, facts: ModelFacts) -> LlamaHParams:
        """Hyper-parameters from header facts (``tied_embedding`` when ``output.weight`` is absent).

        Raises:
            BindError: a llama invariant does not hold (heads not dividing the hidden size or each
                other, odd or too large rope dimension).
        """
        hp = cls(
            n_embd=facts.embedding_length,
            n_head=facts.head_count,
            n_head_kv=facts.head_count_kv,
            n_ff=facts.feed_forward_length,
            n_vocab=facts.vocab_size,
            n_ctx=facts.context_length,
            rope_dim=facts.rope_dimension_count or facts.head_dim,
            rope_base=float(facts.rope_freq_base),
            rms_eps=float(facts.rms_norm_eps),
            n_layer=facts.block_count,
            tied_embedding=facts.tensor("output.weight") is None,
        )
        hp.check()
        return hp

    def check(self) -> None:
        """Raise :class:`BindError` unless the llama invariants hold (positive sizes, ``n_head``
        divides ``n_embd``, ``n_head_kv`` divides ``n_head``, even ``rope_dim <= head_dim``)."""
        if min(self.n_embd, self.n_head, self.n_head_kv, self.n_ff, self.n_vocab) <= 0:
            raise BindError(f"hyper-parameters must be positive: {self}")
        if self.n_embd % self.n_head or self.n_head % self.n_head_kv:
            raise BindError(f"n_embd {self.n_embd}, n_head {self.n_head}, n_head_kv {self.n_head_kv} do not divide")
        if self.rope_dim <= 0 or self.rope_dim % 2 or self.rope_dim > self.head_dim:
            raise BindError(f"rope_dim {self.rope_dim} must be even and <= head_dim {self.head_dim}")

    def weight_shape(self, name: str) -> tuple[int, ...] | None:
        """Torch-order shape the program expects for weight ``name`` (None: not a llama weight)."""
        d, hd, f, v = self.n_embd, self.head_dim, self.n_ff, self.n_vocab
        suffix = name.split(".", 2)[-1] if name.startswith("blk.") else name
        return {
            "token_embd.weight": (v, d),
            "output.weight": (v, d),
            "output_norm.weight": (d,),
            "attn_norm.weight": (d,),
            "ffn_norm.weight": (d,),
            "attn_q.weight": (self.n_head * hd, d),
            "attn_k.weight": (self.n_head_kv * hd, d),
            "attn_v.weight": (self.n_head_kv * hd, d),
            "attn_output.weight": (d, self.n_head * hd),
            "ffn_gate.weight": (f, d),
            "ffn_up.weight": (f, d),
            "ffn_down.weight": (d, f),
        }.get(suffix)


# --------------------------------------------------------------------------- program
class FrozenAttrs(dict):
    """A read-only, hashable, picklable dict (the static attributes of a :class:`KernelCall`)."""

    def _ro(self, *a, **k):
        raise TypeError("KernelCall attrs are read-only")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _ro  # type: ignore[assignment]

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items())))

    def __reduce__(self):
        return (FrozenAttrs, (dict(self),))


@dataclass(frozen=True)
class KernelCall:
    """One step of a stage program: ``outputs = kernels[kernel](*inputs, **attrs)``.

    ``inputs``/``outputs`` are buffer names (see the module docstring); ``attrs`` are static
    keyword arguments (a read-only, hashable, picklable dict); ``block`` is the GGUF block the call belongs to
    (None for embedding/head), kept for lineage in diagnostics.
    """

    kernel: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any] = field(default_factory=FrozenAttrs)
    block: int | None = None

    def __post_init__(self):
        if not isinstance(self.attrs, FrozenAttrs):
            object.__setattr__(self, "attrs", FrozenAttrs(self.attrs))
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))


def is_weight(name: str) -> bool:
    """Whether buffer ``name`` is a GGUF weight (its name ends in ``.weight``)."""
    return name.endswith(".weight")


def is_cache(name: str) -> bool:
    """Whether buffer ``name`` is a KV cache (``blk.N.cache_k`` / ``blk.N.cache_v``)."""
    return name.endswith(".cache_k") or name.endswith(".cache_v")


def build_stage_program(hp: LlamaHParams, layer_start: int, layer_end: int, first: bool, last: bool,
                        max_seq_len: int) -> list[KernelCall]:
    """The ordered kernel calls of a stage owning blocks ``[layer_start, layer_end)``.

    ``first`` adds the embedding gather (``input`` = token ids); ``last`` adds the final norm and
    output head (``output`` = logits; a ``last_row`` call marked ``attrs["if"] == "last_only"`` lets
    the executor keep only the last position). Pure: names weights, caches and transients only.
    Per block (16 calls): rms_norm, 3 matmuls (q, k, v), 2 ropes, kv_cache_write, attention,
    matmul (attn_output), add, rms_norm, 2 matmuls (gate, up), silu_mul, matmul (down), add.

    Raises:
        InvalidRangeError: ``layer_start < 0``, ``layer_end < layer_start``, ``layer_end > n_layer``
            (when known), an empty range on a stage that is neither first nor last, or
            ``max_seq_len < 1``.
    """
    if layer_start < 0 or layer_end < layer_start or (hp.n_layer and layer_end > hp.n_layer):
        raise InvalidRangeError(
            f"layer range [{layer_start}, {layer_end}) is not inside [0, {hp.n_layer or '?'})",
            where=f"[{layer_start}, {layer_end})")
    if layer_start == layer_end and not (first or last):
        raise InvalidRangeError(f"empty layer range [{layer_start}, {layer_end}) on a middle stage",
                                where=f"[{layer_start}, {layer_end})")
    if max_seq_len < 1:
        raise InvalidRangeError(f"max_seq_len must be >= 1, got {max_seq_len}", where="max_seq_len")
    hd = hp.head_dim
    calls: list[KernelCall] = []
    h = STAGE_INPUT
    if first:
        calls.append(KernelCall("embedding_gather", (STAGE_INPUT, "token_embd.weight"), ("h0",)))
        h = "h0"
    rope_q = {"n_heads": hp.n_head, "head_dim": hd, "rope_dim": hp.rope_dim}
    rope_k = {"n_heads": hp.n_head_kv, "head_dim": hd, "rope_dim": hp.rope_dim}
    for b in range(layer_start, layer_end):
        p = f"blk.{b}."
        w = lambda n, p=p: f"{p}{n}.weight"  # noqa: E731
        t = lambda n, p=p: f"{p}{n}"  # noqa: E731
        ck, cv = t("cache_k"), t("cache_v")
        h_out = STAGE_OUTPUT if (b == layer_end - 1 and not last) else f"h{b + 1}"
        calls += [
            KernelCall("rms_norm", (h, w("attn_norm")), (t("attn_in"),), {"eps": hp.rms_eps}, b),
            KernelCall("matmul", (t("attn_in"), w("attn_q")), (t("q_proj"),), {}, b),
            KernelCall("matmul", (t("attn_in"), w("attn_k")), (t("k_proj"),), {}, b),
            KernelCall("matmul", (t("attn_in"), w("attn_v")), (t("v"),), {}, b),
            KernelCall("rope", (t("q_proj"), ROPE_TABLE, START_POS), (t("q"),), rope_q, b),
            KernelCall("rope", (t("k_proj"), ROPE_TABLE, START_POS), (t("k"),), rope_k, b),
            KernelCall("kv_cache_write", (t("k"), t("v"), ck, cv, START_POS), (), {}, b),
            KernelCall("attention", (t("q"), ck, cv, START_POS), (t("attn"),), {}, b),
            KernelCall("matmul", (t("attn"), w("attn_output")), (t("attn_out"),), {}, b),
            KernelCall("add", (h, t("attn_out")), (t("h_mid"),), {}, b),
            KernelCall("rms_norm", (t("h_mid"), w("ffn_norm")), (t("ffn_in"),), {"eps": hp.rms_eps}, b),
            KernelCall("matmul", (t("ffn_in"), w("ffn_gate")), (t("gate"),), {}, b),
            KernelCall("matmul", (t("ffn_in"), w("ffn_up")), (t("up"),), {}, b),
            KernelCall("silu_mul", (t("gate"), t("up")), (t("ffn_act"),), {}, b),
            KernelCall("matmul", (t("ffn_act"), w("ffn_down")), (t("ffn_out"),), {}, b),
            KernelCall("add", (t("h_mid"), t("ffn_out")), (h_out,), {}, b),
        ]
        h = h_out
    if last:
        head = "token_embd.weight" if hp.tied_embedding else "output.weight"
        calls += [
            KernelCall("last_row", (h,), ("h_last",), {"if": "last_only"}),
            KernelCall("rms_norm", ("h_last", "output_norm.weight"), ("h_norm",), {"eps": hp.rms_eps}),
            KernelCall("matmul", ("h_norm", head), (STAGE_OUTPUT,)),
        ]
    elif layer_start == layer_end:  # first stage with no blocks: the embedding is the output
        calls[-1] = KernelCall("embedding_gather", (STAGE_INPUT, "token_embd.weight"), (STAGE_OUTPUT,))
    return calls


def fuse_matmuls(program: Sequence[KernelCall], weights: Mapping[str, torch.Tensor]
                 ) -> tuple[list[KernelCall], dict[str, torch.Tensor]]:
    """Program rewrite: consecutive ``matmul`` calls reading the same activation (q/k/v, gate/up)
    become one ``matmul`` over the row-concatenated weight plus a ``split`` (column views).

    Returns the new program and the fused weights (``<w1>+<w2>+...`` names, e.g.
    ``blk.0.attn_q.weight+blk.0.attn_k.weight+blk.0.attn_v.weight``). Each output column is the
    same dot product as before, so results agree with the unfused program to float rounding of
    the BLAS blocking (the EXPECTED greedy tokens are unchanged: tested).
    """
    out: list[KernelCall] = []
    fused: dict[str, torch.Tensor] = {}
    i = 0
    while i < len(program):
        c = program[i]
        j = i
        while (c.kernel == "matmul" and j + 1 < len(program) and program[j + 1].kernel == "matmul"
               and program[j + 1].inputs[0] == c.inputs[0] and program[j + 1].block == c.block):
            j += 1
        if j == i or any(n not in weights for k in program[i : j + 1] for n in k.inputs[1:]):
            out.append(c)
            i += 1
            continue
        group = program[i : j + 1]
        names = [k.inputs[1] for k in group]
        fname = "+".join(names)
        fused[fname] = torch.cat([weights[n] for n in names], dim=0).contiguous()
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
        program: from :func:`build_stage_program` (or the compiler).
        weights: name -> float32 torch tensor (e.g. :func:`pipeplan.runtime.loader.load_stage_weights`);
            extra tensors are ignored.
        max_seq_len: positions the KV cache holds (prompt + generated).
        kernels: a module with a ``KERNELS`` table, or the table itself (default: torch reference).
        fuse: apply :func:`fuse_matmuls` at bind time (default False: on stories260K the extra
            ``split`` and the non-contiguous views cost more than the saved matmul launches,
            measured ~1550 vs ~1750 decode tok/s; it should pay off when matmuls dominate).
        num_threads: if set, ``torch.set_num_threads(num_threads)`` (process-wide).
        allocate: ``shape -> tensor`` used for the KV cache (default ``torch.zeros``; a hook for
            fault injection).

    Raises:
        BindError: unknown kernel; a weight the program reads is missing or has the wrong shape
            (the message names the tensor and the call's block); a buffer read before written.
        AllocationError: allocating the KV cache or rope table failed (RuntimeError/MemoryError).
    """

    def __init__(self, hp: LlamaHParams, program: Sequence[KernelCall], weights: Mapping[str, torch.Tensor],
                 max_seq_len: int, kernels: ModuleType | Mapping[str, Callable] = reference_kernels, *,
                 fuse: bool = False, num_threads: int | None = None,
                 allocate: Callable[[tuple[int, ...]], torch.Tensor] | None = None):
        self.hp = hp
        self.max_seq_len = int(max_seq_len)
        self.program = list(program)
        table = kernels.KERNELS if isinstance(kernels, ModuleType) else kernels
        if num_threads is not None:
            torch.set_num_threads(int(num_threads))
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
                if not isinstance(t, torch.Tensor):
                    raise BindError(f"weight {n} is a {type(t).__name__}, not a torch.Tensor", where=n)
                if want is not None and tuple(t.shape) != want:
                    raise BindError(f"weight {n} has shape {tuple(t.shape)}, expected {want} ({where})", where=n)
                static[n] = t if t.dtype == torch.float32 else t.float()
        # allocate KV caches and the rope table
        alloc = allocate or (lambda shape: torch.zeros(shape, dtype=torch.float32))
        cache_shape = (self.max_seq_len, hp.n_head_kv, hp.head_dim)
        try:
            for c in self.program:
                for n in c.inputs:
                    if is_cache(n) and n not in static:
                        static[n] = alloc(cache_shape)
            if any(ROPE_TABLE in c.inputs for c in self.program):
                static[ROPE_TABLE] = reference_kernels.rope_table(self.max_seq_len, hp.rope_dim, hp.rope_base)
        except (RuntimeError, MemoryError) as e:
            raise AllocationError(
                f"cannot allocate KV cache {cache_shape} x {sum(map(is_cache, static))} for max_seq_len "
                f"{self.max_seq_len}: {e}".splitlines()[0], where="kv_cache") from e
        self.caches = {n: v for n, v in static.items() if is_cache(n)}
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
        self._calls = [(table[c.kernel], c.inputs, c.outputs, dict(c.attrs)) for c in run_program
                       if c.kernel != "last_row"]
        self._last_row_at = next((i for i, c in enumerate(run_program) if c.kernel == "last_row"), None)
        if self._last_row_at is not None:
            lr = run_program[self._last_row_at]
            self._last_row = (table["last_row"], lr.inputs[0], lr.outputs[0])
        self.n_past = 0

    @property
    def kv_cache_bytes(self) -> int:
        """Bytes held by the KV cache."""
        return sum(t.numel() * t.element_size() for t in self.caches.values())

    def reset(self) -> None:
        """Forget every cached position (zeroes the KV cache; the next call must start at 0)."""
        for t in self.caches.values():
            t.zero_()
        self.n_past = 0

    def _check_input(self, x: torch.Tensor, start_pos: int) -> torch.Tensor:
        if not isinstance(x, torch.Tensor):
            raise ExecutionError(f"stage input must be a torch.Tensor, got {type(x).__name__}", where=STAGE_INPUT)
        if self.first:
            if x.dim() != 1 or x.dtype not in (torch.int64, torch.int32):
                raise ExecutionError(f"first stage takes int64 token ids [T], got {x.dtype} {tuple(x.shape)}",
                                     where=STAGE_INPUT)
            x = x.long()
            if x.numel() and (int(x.min()) < 0 or int(x.max()) >= self.hp.n_vocab):
                raise ExecutionError(f"token id outside [0, {self.hp.n_vocab}): {x.tolist()}", where=STAGE_INPUT)
        else:
            if x.dim() != 2 or x.shape[1] != self.hp.n_embd or x.dtype != torch.float32:
                raise ExecutionError(
                    f"stage takes float32 activations [T, {self.hp.n_embd}], got {x.dtype} {tuple(x.shape)}",
                    where=STAGE_INPUT)
        t = x.shape[0]
        if t < 1:
            raise ExecutionError("stage input has no tokens", where=STAGE_INPUT)
        if not isinstance(start_pos, int) or start_pos < 0:
            raise ExecutionError(f"start_pos must be a non-negative int, got {start_pos!r}", where=START_POS)
        if start_pos + t > self.max_seq_len:
            raise ExecutionError(
                f"positions [{start_pos}, {start_pos + t}) exceed max_seq_len {self.max_seq_len}", where=START_POS)
        if start_pos > self.n_past:
            raise ExecutionError(
                f"start_pos {start_pos} skips positions: only [0, {self.n_past}) are cached", where=START_POS)
        return x

    def forward(self, x: torch.Tensor, start_pos: int, last_only: bool = False) -> torch.Tensor:
        """Run the program on ``T`` tokens at positions ``[start_pos, start_pos + T)``.

        Args:
            x: int64 token ids ``[T]`` (first stage) or float32 activations ``[T, n_embd]``.
            start_pos: position of ``x[0]``; must be ``<=`` the number of cached positions (a
                smaller value overwrites the cache from there, e.g. to re-run a prompt).
            last_only: on the last stage, compute logits for the last position only.

        Returns:
            float32 activations ``[T, n_embd]`` (non-last stage) or logits ``[T, n_vocab]``
            (``[1, n_vocab]`` with ``last_only``). The tensor may be a buffer of this executor:
            copy it if it must outlive the next call.

        Raises:
            ExecutionError: wrong input dtype/shape, token id outside the vocabulary,
                ``start_pos + T > max_seq_len``, or a gap after the cached positions.
        """
        x = self._check_input(x, start_pos)
        env = dict(self._static)
        env[STAGE_INPUT] = x
        env[START_POS] = start_pos
        split_at = self._last_row_at if self._last_row_at is not None else len(self._calls)
        with torch.inference_mode():
            calls = self._calls
            for i, (fn, ins, outs, kw) in enumerate(calls):
                if i == split_at:
                    f, src, dst = self._last_row
                    env[dst] = f(env[src]) if last_only else env[src]
                r = fn(*[env[n] for n in ins], **kw)
                if len(outs) == 1:
                    env[outs[0]] = r
                elif outs:
                    for n, v in zip(outs, r, strict=True):
                        env[n] = v
        self.n_past = start_pos + x.shape[0]
        return env[STAGE_OUTPUT]

    __call__ = forward


def greedy_generate(stages: Sequence[StageExecutor], prompt_ids: Sequence[int], n_tokens: int) -> list[int]:
    """Greedy decoding through a chain of executors (in-process, no transport): prefill the prompt
    (last-position logits only), then decode one token at a time. Resets every stage first.

    Returns the ``n_tokens`` generated ids. Raises :class:`ExecutionError` past ``max_seq_len``.
    """
    for s in stages:
        s.reset()
    out: list[int] = []
    x: torch.Tensor = torch.tensor(list(prompt_ids), dtype=torch.int64)
    pos = 0
    for _ in range(n_tokens):
        h = x
        for s in stages:
            h = s.forward(h, pos, last_only=True)
        pos += x.shape[0]
        tok = int(torch.argmax(h[-1]))
        out.append(tok)
        x = torch.tensor([tok], dtype=torch.int64)
    return out


__all__ = [
    "AllocationError", "BindError", "ExecutionError", "InvalidRangeError", "KernelCall", "LlamaHParams",
    "ProgramError", "StageExecutor", "build_stage_program", "fuse_matmuls", "greedy_generate",
]
