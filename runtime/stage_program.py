"""Torch-free half of the stage programs: hyper-parameters, kernel calls and the program builder.

The compiler (``convert-runplan-to-pplan``, ``convert-cplan-to-vmachine``) needs the ordered
:class:`KernelCall` list of a stage but not the torch executor, so these names live here and
import nothing heavier than the standard library; :mod:`pipeplan.runtime.program` re-exports every
one of them (existing imports from there keep working) and adds the torch :class:`StageExecutor`.
See :mod:`pipeplan.runtime.program` for the buffer naming and the llama.cpp graph it follows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pipeplan.errors import PipeplanError
from pipeplan.plan_types import ModelFacts

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
