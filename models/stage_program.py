"""Torch-free half of the stage programs: hyper-parameters, kernel calls and the program builder.

The compiler needs the ordered :class:`KernelCall` list of a stage (``convert-runplan-to-pplan``) and
the static attributes of one call (:func:`kernel_attrs`, which the builders use too:
``convert-cplan-to-vmachine`` / ``convert-cplan-to-triton`` lower with it and never rebuild a program)
but not the torch executor, so these names live here and
import nothing heavier than the standard library; :mod:`pipeplan.runtime.program` re-exports every
one of them (existing imports from there keep working) and adds the torch :class:`StageExecutor`.
:func:`build_stage_program` dispatches on ``HParams.arch`` to the builders of
:mod:`pipeplan.models.archs` (one module per architecture, each following its llama.cpp graph).
See :mod:`pipeplan.runtime.program` for the buffer naming.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from pipeplan.errors import PipeplanError
from pipeplan.plan_types import ModelFacts

STAGE_INPUT = "input"
STAGE_OUTPUT = "output"
START_POS = "start_pos"
ROPE_TABLE = "rope_table"
ROPE_TABLE_SWA = "rope_table_swa"


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
class UnsupportedArchitectureError(BindError):
    """``general.architecture`` names no stage-program builder (:mod:`pipeplan.models.archs`)."""

    code = "unsupported_architecture"


class InvalidHParamsError(BindError):
    """Hyper-parameters the architecture's graph cannot use (heads that do not divide the width,
    a rope dimension above the head dimension, a negative sliding window, ...)."""

    code = "invalid_hparams"


class MissingTensorError(BindError):
    """A tensor the stage program reads is not in the model (names the block and the tensor)."""

    code = "missing_tensor"


class UnexpectedTensorError(BindError):
    """A model tensor the architecture's stage program would ignore (e.g. ``blk.0.attn_q.bias`` in a
    llama file): running without it would silently compute another model."""

    code = "unexpected_tensor"


@dataclass(frozen=True)
class HParams:
    """Hyper-parameters of a decoder-only transformer (llama.cpp ``llama_hparams``, read from the
    ``<arch>.*`` GGUF keys by the architecture's module in :mod:`pipeplan.models.archs`).

    Attributes:
        n_embd: hidden size D. n_head / n_head_kv: query / KV heads. n_ff: FFN width.
        n_vocab: vocabulary size. n_ctx: training context length. rope_dim: rotated dims per head.
        rope_base: rope frequency base (global layers). rms_eps: RMS-norm epsilon.
        n_layer: block count (0 = unknown: ranges are then not checked against it).
        tied_embedding: True when the model has no ``output.weight`` (the head is ``token_embd.weight``).
        arch: ``general.architecture`` (selects the program builder).
        n_embd_head_k / n_embd_head_v: key / value head dims (``attention.key_length`` /
            ``value_length``; 0 = ``n_embd // n_head``).
        rope_mode: ``"norm"`` (GGML_ROPE_TYPE_NORM) or ``"neox"`` (GGML_ROPE_TYPE_NEOX).
        rope_base_swa: rope frequency base of sliding-window layers (0 = none).
        n_swa: sliding window in positions (0 = every layer attends causally to all positions).
        swa_pattern: with ``n_swa > 0``, layer ``il`` is sliding-window iff ``swa_pattern == 0`` or
            ``il % swa_pattern < swa_pattern - 1`` (llama.cpp ``set_swa_pattern``).
        attn_scale: softmax scale (0 = ``1 / sqrt(n_embd_head_k)``).
        embd_scale: factor on the gathered embedding rows (gemma: ``sqrt(n_embd)``).

    The fields after ``tied_embedding`` default to llama's graph; a field equal to its default is
    left out of the ABI (:meth:`to_abi`), so llama packages stay unchanged.
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
    arch: str = "llama"
    n_embd_head_k: int = 0
    n_embd_head_v: int = 0
    rope_mode: str = "norm"
    rope_base_swa: float = 0.0
    n_swa: int = 0
    swa_pattern: int = 0
    attn_scale: float = 0.0
    embd_scale: float = 1.0

    @property
    def head_dim(self) -> int:
        """Key head dim: ``n_embd_head_k`` when set, else ``n_embd // n_head``."""
        return self.n_embd_head_k or self.n_embd // self.n_head

    @property
    def head_dim_v(self) -> int:
        """Value head dim: ``n_embd_head_v`` when set, else :attr:`head_dim`."""
        return self.n_embd_head_v or self.head_dim

    def is_swa(self, il: int) -> bool:
        """Whether block ``il`` uses sliding-window attention (llama.cpp ``hparams.is_swa(il)``)."""
        if self.n_swa <= 0:
            return False
        return self.swa_pattern == 0 or il % self.swa_pattern < self.swa_pattern - 1

    @property
    def softmax_scale(self) -> float:
        """The attention softmax scale: :attr:`attn_scale`, or ``1 / sqrt(head_dim)`` when 0."""
        return self.attn_scale or 1.0 / math.sqrt(self.head_dim)

    @classmethod
    def from_facts(cls, facts: ModelFacts) -> HParams:
        """Hyper-parameters of ``facts`` by its architecture's module (``tied_embedding`` when
        ``output.weight`` is absent).

        Raises:
            UnsupportedArchitectureError: no builder for ``facts.architecture``.
            InvalidHParamsError: invariants of that architecture do not hold (:meth:`check`).
        """
        from pipeplan.models.archs import get_arch

        return get_arch(facts.architecture).hparams(facts)

    def check(self) -> None:
        """Raise :class:`InvalidHParamsError` unless the invariants hold: positive sizes, ``n_head``
        divides ``n_embd`` (when no key length is given), ``n_head_kv`` divides ``n_head``, even
        ``rope_dim <= head_dim``, a known rope mode, non-negative window and pattern."""
        if min(self.n_embd, self.n_head, self.n_head_kv, self.n_ff, self.n_vocab) <= 0:
            raise InvalidHParamsError(f"hyper-parameters must be positive: {self}", where="hparams")
        if (not self.n_embd_head_k and self.n_embd % self.n_head) or self.n_head % self.n_head_kv:
            raise InvalidHParamsError(
                f"n_embd {self.n_embd}, n_head {self.n_head}, n_head_kv {self.n_head_kv} do not divide",
                where="head_count")
        if self.n_embd_head_k < 0 or self.n_embd_head_v < 0:
            raise InvalidHParamsError(f"key/value head dims must be positive, got {self.n_embd_head_k}/"
                                      f"{self.n_embd_head_v}", where="key_length")
        if self.rope_dim <= 0 or self.rope_dim % 2 or self.rope_dim > self.head_dim:
            raise InvalidHParamsError(f"rope_dim {self.rope_dim} must be even and <= head_dim {self.head_dim}",
                                      where="rope_dim")
        if self.rope_mode not in ROPE_MODES:
            raise InvalidHParamsError(f"rope mode {self.rope_mode!r} is not one of {ROPE_MODES}", where="rope_mode")
        if self.n_swa < 0 or self.swa_pattern < 0:
            raise InvalidHParamsError(f"sliding window {self.n_swa} / pattern {self.swa_pattern} must be >= 0",
                                      where="sliding_window")
        if not (math.isfinite(self.attn_scale) and self.attn_scale >= 0 and math.isfinite(self.embd_scale)
                and self.embd_scale > 0 and math.isfinite(self.rope_base_swa) and self.rope_base_swa >= 0):
            raise InvalidHParamsError(f"attention scale {self.attn_scale}, embedding scale {self.embd_scale} and "
                                      f"rope base {self.rope_base_swa} must be finite and positive", where="hparams")

    def weight_shape(self, name: str) -> tuple[int, ...] | None:
        """Torch-order shape the program expects for weight ``name`` (None: not a weight of this
        architecture); from the architecture's module."""
        from pipeplan.models.archs import get_arch

        return get_arch(self.arch).weight_shapes(self).get(
            name.split(".", 2)[-1] if name.startswith("blk.") else name)

    def to_abi(self, max_seq_len: int) -> dict[str, Any]:
        """The model kernel ABI (``vmachine.abi``) of these hyper-parameters for ``max_seq_len``
        positions: the llama fields always, each later field only when it differs from its default."""
        out: dict[str, Any] = {
            "n_embd": self.n_embd, "n_head": self.n_head, "n_head_kv": self.n_head_kv, "n_ff": self.n_ff,
            "n_vocab": self.n_vocab, "n_ctx": self.n_ctx, "rope_dim": self.rope_dim, "n_layer": self.n_layer,
            "max_seq_len": int(max_seq_len), "rope_base": self.rope_base, "rms_eps": self.rms_eps,
            "tied_embedding": self.tied_embedding}
        for f in fields(self):
            if f.name in ABI_EXTRA and getattr(self, f.name) != f.default:
                out[f.name] = getattr(self, f.name)
        return out

    @classmethod
    def from_abi(cls, abi: Mapping[str, Any]) -> HParams:
        """Inverse of :meth:`to_abi` (``max_seq_len`` is not a hyper-parameter and is ignored)."""
        kw: dict[str, Any] = {k: abi[k] for k in ("n_embd", "n_head", "n_head_kv", "n_ff", "n_vocab", "n_ctx",
                                                   "rope_dim", "n_layer")}
        kw.update(rope_base=float(abi["rope_base"]), rms_eps=float(abi["rms_eps"]),
                  tied_embedding=bool(abi["tied_embedding"]))
        for name, kind in ABI_EXTRA.items():
            if name in abi:
                kw[name] = kind(abi[name])
        return cls(**kw)


LlamaHParams = HParams
"""The historical name of :class:`HParams` (kept for existing imports)."""

ROPE_MODES = ("norm", "neox")
"""Rope pairings: GGML_ROPE_TYPE_NORM (adjacent pairs) and GGML_ROPE_TYPE_NEOX (halves)."""

ABI_EXTRA: dict[str, type] = {"arch": str, "n_embd_head_k": int, "n_embd_head_v": int, "rope_mode": str,
                              "rope_base_swa": float, "n_swa": int, "swa_pattern": int, "attn_scale": float,
                              "embd_scale": float}
"""HParams fields the ABI carries only when they differ from their (llama) defaults, and their types."""


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
    """Whether buffer ``name`` is a GGUF tensor (its name ends in ``.weight`` or ``.bias``)."""
    return name.endswith(".weight") or name.endswith(".bias")


def is_cache(name: str) -> bool:
    """Whether buffer ``name`` is a KV cache (``blk.N.cache_k`` / ``blk.N.cache_v``)."""
    return name.endswith(".cache_k") or name.endswith(".cache_v")


def check_stage_range(hp: HParams, layer_start: int, layer_end: int, first: bool, last: bool,
                      max_seq_len: int) -> None:
    """Raise :class:`InvalidRangeError` for ``layer_start < 0``, ``layer_end < layer_start``,
    ``layer_end > n_layer`` (when known), an empty range on a stage that is neither first nor last, or
    ``max_seq_len < 1`` (every builder calls it first)."""
    if layer_start < 0 or layer_end < layer_start or (hp.n_layer and layer_end > hp.n_layer):
        raise InvalidRangeError(
            f"layer range [{layer_start}, {layer_end}) is not inside [0, {hp.n_layer or '?'})",
            where=f"[{layer_start}, {layer_end})")
    if layer_start == layer_end and not (first or last):
        raise InvalidRangeError(f"empty layer range [{layer_start}, {layer_end}) on a middle stage",
                                where=f"[{layer_start}, {layer_end})")
    if max_seq_len < 1:
        raise InvalidRangeError(f"max_seq_len must be >= 1, got {max_seq_len}", where="max_seq_len")


class UnservedKernelError(BindError):
    """A kernel call the model's stage program cannot hold: a kernel its architecture does not use, a block
    outside ``[0, n_layer)``, a block kernel without a block, or a ``rope``/``head_rms_norm`` of neither the
    query nor the key heads (:func:`kernel_attrs`)."""

    code = "unserved_kernel"


HEAD_KERNELS = ("rope", "head_rms_norm")
"""Kernels whose attributes depend on the heads they act on: their role is ``"q"`` or ``"k"``."""

STAGE_KERNELS = ("embedding_gather", "last_row", "rms_norm", "matmul")
"""Kernels of the stage skeleton every architecture has (embedding gather, final norm, head)."""


def kernel_role(kernel: str, output: str) -> str:
    """The role of a call of ``kernel`` writing buffer ``output``: ``"q"`` / ``"k"`` for a
    :data:`HEAD_KERNELS` call writing the query / key heads (``blk.N.q``, ``blk.N.q_norm``, ``blk.N.k``,
    ``blk.N.k_norm``, the names the builders give them), ``""`` otherwise."""
    if kernel not in HEAD_KERNELS:
        return ""
    name = output.split(".", 2)[-1] if output.startswith("blk.") else output
    return {"q": "q", "q_norm": "q", "k": "k", "k_norm": "k"}.get(name, "")


def rope_table(hp: HParams, block: int) -> str:
    """The rope table block ``block`` reads: ``rope_table_swa`` on a sliding-window layer with its own base
    (``rope_base_swa > 0``), else ``rope_table``."""
    return ROPE_TABLE_SWA if (hp.is_swa(block) and hp.rope_base_swa > 0) else ROPE_TABLE


def kernel_attrs(hp: HParams, kernel: str, block: int | None = None, role: str = "") -> FrozenAttrs:
    """The static attributes of one kernel call of ``hp``'s stage program (``KernelCall.attrs``): what the
    builders of :mod:`pipeplan.models.archs` put on the call and what the lowerings put on the instruction.

    ``block`` is the call's GGUF block (None: embedding/head), ``role`` its :func:`kernel_role`. Per kernel:
    ``embedding_gather`` ``scale`` (when ``embd_scale != 1``); ``rms_norm`` ``eps``; ``head_rms_norm``
    ``eps``, ``n_heads`` (``n_head`` for ``q``, ``n_head_kv`` for ``k``), ``head_dim``; ``rope`` ``n_heads``,
    ``head_dim``, ``rope_dim``, ``mode`` (when not ``"norm"``); ``attention`` ``scale`` (when not
    ``1/sqrt(head_dim)``), ``scale_q`` (architectures that scale Q: gemma3), ``window`` (sliding-window
    layers); ``last_row`` ``if = "last_only"``; every other kernel none.

    Raises:
        UnservedKernelError: a kernel ``hp.arch``'s programs do not call, a block kernel without a block
            or with a block outside ``[0, n_layer)`` (when known), a head kernel without a role.
        UnsupportedArchitectureError: no builder for ``hp.arch``.
    """
    from pipeplan.models.archs import get_arch

    arch = get_arch(hp.arch)
    if kernel not in arch.kernels and kernel not in STAGE_KERNELS:
        raise UnservedKernelError(f"kernel {kernel!r} is not called by {hp.arch} stage programs ({arch.source})",
                                  where=kernel)
    if block is None and kernel not in STAGE_KERNELS:
        raise UnservedKernelError(f"{kernel} call outside any block (a block kernel)", where=kernel)
    if block is not None and (block < 0 or (hp.n_layer and block >= hp.n_layer)):
        raise UnservedKernelError(f"{kernel} call of block {block}: not a block of the model "
                                  f"[0, {hp.n_layer or '?'})", where=kernel)
    if kernel in HEAD_KERNELS and role not in ("q", "k"):
        raise UnservedKernelError(f"{kernel} call acting on neither the query nor the key heads (role {role!r})",
                                  where=kernel)
    attrs: dict[str, Any] = {}
    if kernel == "embedding_gather":
        if hp.embd_scale != 1.0:
            attrs["scale"] = hp.embd_scale
    elif kernel == "rms_norm":
        attrs["eps"] = hp.rms_eps
    elif kernel == "head_rms_norm":
        attrs.update(eps=hp.rms_eps, n_heads=hp.n_head if role == "q" else hp.n_head_kv, head_dim=hp.head_dim)
    elif kernel == "rope":
        attrs.update(n_heads=hp.n_head if role == "q" else hp.n_head_kv, head_dim=hp.head_dim, rope_dim=hp.rope_dim)
        if hp.rope_mode != "norm":
            attrs["mode"] = hp.rope_mode
    elif kernel == "attention":
        assert block is not None
        if hp.attn_scale and hp.attn_scale != 1.0 / math.sqrt(hp.head_dim):
            attrs["scale"] = hp.attn_scale
        if arch.scale_q:
            attrs["scale_q"] = True
        if hp.is_swa(block):
            attrs["window"] = hp.n_swa
    elif kernel == "last_row":
        attrs["if"] = "last_only"
    return FrozenAttrs(attrs)


def kernel_call(hp: HParams, kernel: str, inputs: tuple[str, ...], outputs: tuple[str, ...],
                block: int | None = None) -> KernelCall:
    """The :class:`KernelCall` of ``kernel`` over ``inputs`` -> ``outputs`` in ``block``, its attributes
    from :func:`kernel_attrs` (role from the first output, :func:`kernel_role`). Raises UnservedKernelError."""
    role = kernel_role(kernel, outputs[0] if outputs else "")
    return KernelCall(kernel, inputs, outputs, kernel_attrs(hp, kernel, block, role), block)


def build_stage_program(hp: HParams, layer_start: int, layer_end: int, first: bool, last: bool,
                        max_seq_len: int) -> list[KernelCall]:
    """The ordered kernel calls of a stage owning blocks ``[layer_start, layer_end)``, built by the
    module of ``hp.arch`` (:mod:`pipeplan.models.archs`: llama, gemma3, qwen2, qwen3).

    ``first`` adds the embedding gather (``input`` = token ids); ``last`` adds the final norm and
    output head (``output`` = logits; a ``last_row`` call marked ``attrs["if"] == "last_only"`` lets
    the executor keep only the last position). Pure: names weights, caches and transients only.
    llama (16 calls per block): rms_norm, 3 matmuls (q, k, v), 2 ropes, kv_cache_write, attention,
    matmul (attn_output), add, rms_norm, 2 matmuls (gate, up), silu_mul, matmul (down), add.

    Raises:
        InvalidRangeError: see :func:`check_stage_range`.
        UnsupportedArchitectureError: no builder for ``hp.arch``.
    """
    from pipeplan.models.archs import get_arch

    return get_arch(hp.arch).build(hp, layer_start, layer_end, first, last, max_seq_len)
