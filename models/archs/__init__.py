"""Architectures as data: one module per GGUF ``general.architecture`` (torch-free).

Each module (``llama``, ``gemma3``, ``qwen2``, ``qwen3``) exposes ``ARCH: Arch``: the metadata keys it
reads beyond the common ones, its hyper-parameter reader (``<arch>.*`` keys -> :class:`HParams`), the
kernel calls of one block (its llama.cpp graph, ``llm_build_<arch>``) and the torch-order shapes of
its block tensors. :meth:`Arch.build` wraps the blocks in the common stage skeleton (embedding gather
on the first stage; final norm and output head on the last), so every consumer of stage programs
(executor, ``convert-runplan-to-pplan``, replay) covers every architecture by construction; a call's
static attributes come from :func:`pipeplan.models.stage_program.kernel_attrs` (the machine lowerings
read it directly, with ``Arch.kernels`` and ``Arch.scale_q``). A new architecture is one module plus one line in :data:`ARCHS`.

:func:`check_model` is the plan-time check a model must pass: a known architecture, valid
hyper-parameters, every tensor the full-model program reads present and no tensor it would ignore.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import import_module

from pipeplan.models.stage_program import (
    STAGE_INPUT,
    STAGE_OUTPUT,
    HParams,
    KernelCall,
    MissingTensorError,
    UnexpectedTensorError,
    UnsupportedArchitectureError,
    check_stage_range,
    is_weight,
    kernel_call,
)
from pipeplan.plan_types import ModelFacts

ARCHS: dict[str, str] = {
    "llama": "pipeplan.models.archs.llama",
    "gemma3": "pipeplan.models.archs.gemma3",
    "qwen2": "pipeplan.models.archs.qwen2",
    "qwen3": "pipeplan.models.archs.qwen3",
}
"""``general.architecture`` -> the module whose ``ARCH`` builds its stage programs."""

BlockBuilder = Callable[[HParams, int, str, str], list[KernelCall]]
"""``(hp, block, h_in, h_out) -> calls``: the kernel calls of one block reading ``h_in``, writing ``h_out``."""


@dataclass(frozen=True)
class MetaKey:
    """One ``<arch>.<key>`` metadata value an architecture reads into ``ModelFacts.arch_params``.

    ``kind``: ``"int"`` (positive integer) or ``"float"`` (positive number); ``required``: the facts
    reader fails with ``missing_key`` when it is absent (llama.cpp ``get_key(..., required)``)."""

    key: str
    kind: str
    required: bool = False


@dataclass(frozen=True)
class Arch:
    """One architecture (module docstring).

    Attributes:
        name: ``general.architecture``.
        source: the llama.cpp graph it follows (for diagnostics and docs).
        metadata: the architecture-specific keys the facts reader records.
        hparams: ``ModelFacts -> HParams`` (raises InvalidHParamsError).
        block: the block builder (:data:`BlockBuilder`).
        block_weights: ``hp -> {tensor suffix: torch shape}`` of one block (``attn_q.weight`` ...).
        kernels: the kernels its blocks call (the lowerings refuse a command of any other kernel).
        scale_q: the graph scales Q instead of the scores (attention attr ``scale_q``; gemma3).
    """

    name: str
    source: str
    metadata: tuple[MetaKey, ...]
    hparams: Callable[[ModelFacts], HParams]
    block: BlockBuilder
    block_weights: Callable[[HParams], Mapping[str, tuple[int, ...]]]
    kernels: frozenset[str] = frozenset()
    scale_q: bool = False

    def weight_shapes(self, hp: HParams) -> dict[str, tuple[int, ...]]:
        """Torch-order shapes of every tensor the programs read, keyed by name (``token_embd.weight``,
        ``output.weight``, ``output_norm.weight``) or block suffix (``attn_q.weight``)."""
        d, v = hp.n_embd, hp.n_vocab
        return {"token_embd.weight": (v, d), "output.weight": (v, d), "output_norm.weight": (d,),
                **self.block_weights(hp)}

    def build(self, hp: HParams, layer_start: int, layer_end: int, first: bool, last: bool,
              max_seq_len: int) -> list[KernelCall]:
        """The stage program (see :func:`pipeplan.models.stage_program.build_stage_program`):
        ``embedding_gather`` (``scale`` attr when ``hp.embd_scale != 1``) on the first stage, then
        each block's calls (block ``b`` reads ``h<b>``, writes ``h<b+1>``; the stage's last block writes
        ``output`` unless the stage is last), then ``last_row``, the ``output_norm`` RMS norm and the
        head matmul (``token_embd.weight`` when tied) on the last stage.

        Raises InvalidRangeError (see ``check_stage_range``)."""
        check_stage_range(hp, layer_start, layer_end, first, last, max_seq_len)
        calls: list[KernelCall] = []
        h = STAGE_INPUT
        if first:
            calls.append(kernel_call(hp, "embedding_gather", (STAGE_INPUT, "token_embd.weight"), ("h0",)))
            h = "h0"
        for b in range(layer_start, layer_end):
            h_out = STAGE_OUTPUT if (b == layer_end - 1 and not last) else f"h{b + 1}"
            calls += self.block(hp, b, h, h_out)
            h = h_out
        if last:
            head = "token_embd.weight" if hp.tied_embedding else "output.weight"
            calls += [
                kernel_call(hp, "last_row", (h,), ("h_last",)),
                kernel_call(hp, "rms_norm", ("h_last", "output_norm.weight"), ("h_norm",)),
                kernel_call(hp, "matmul", ("h_norm", head), (STAGE_OUTPUT,)),
            ]
        elif layer_start == layer_end:  # first stage with no blocks: the embedding is the output
            calls[-1] = kernel_call(hp, "embedding_gather", (STAGE_INPUT, "token_embd.weight"), (STAGE_OUTPUT,))
        return calls


_LOADED: dict[str, Arch] = {}


def known_architectures() -> tuple[str, ...]:
    """The architectures with a builder, sorted."""
    return tuple(sorted(ARCHS))


def get_arch(name: str) -> Arch:
    """The :class:`Arch` of ``general.architecture`` ``name``.

    Raises:
        UnsupportedArchitectureError: no module for ``name`` (the message lists the known ones).
    """
    arch = _LOADED.get(name)
    if arch is None:
        mod = ARCHS.get(name)
        if mod is None:
            raise UnsupportedArchitectureError(
                f"architecture {name!r} has no stage program (pipeplan runs {', '.join(known_architectures())})",
                where=name)
        arch = _LOADED[name] = import_module(mod).ARCH
    return arch


def check_model(facts: ModelFacts) -> HParams:
    """The hyper-parameters of ``facts`` once the model is known to run as its architecture's program.

    Checks, in order: a builder for ``facts.architecture``; its hyper-parameter invariants; every
    tensor the full-model program reads is present (first missing one, in program order, named with
    its block); no tensor of the model is left unread (e.g. ``blk.0.attn_q.bias`` in a llama file).
    Shapes are the facts reader's check (``read_model_facts``), not this one's.

    Raises:
        UnsupportedArchitectureError, InvalidHParamsError, MissingTensorError, UnexpectedTensorError
        (codes ``unsupported_architecture``, ``invalid_hparams``, ``missing_tensor``, ``unexpected_tensor``).
    """
    arch = get_arch(facts.architecture)
    hp = arch.hparams(facts)
    present = {t.name for t in facts.tensors}
    read: dict[str, int | None] = {}
    for c in arch.build(hp, 0, facts.block_count, True, True, 1):
        for n in c.inputs:
            if is_weight(n):
                read.setdefault(n, c.block)
    for n, b in read.items():
        if n not in present:
            where = f"block {b}" if b is not None else "the embedding/head"
            raise MissingTensorError(f"model {facts.name!r} ({facts.architecture}): {where} lacks tensor {n}, which "
                                     f"the {arch.source} program reads", where=n)
    for t in facts.tensors:
        if t.name not in read:
            raise UnexpectedTensorError(
                f"model {facts.name!r} ({facts.architecture}): tensor {t.name} is not read by the {arch.source} "
                f"program (running without it would compute another model)", where=t.name)
    return hp


__all__ = ["ARCHS", "Arch", "BlockBuilder", "MetaKey", "check_model", "get_arch", "known_architectures"]
