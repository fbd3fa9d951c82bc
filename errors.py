"""Typed errors shared by every layer of pipeplan.

Every user-facing failure is a :class:`PipeplanError` with a stable ``code``; the CLI prints
``error[<code>]: <message>`` (see :meth:`PipeplanError.one_line`) and never a traceback.
Codes are part of the public contract: tests match on them.
"""

from __future__ import annotations


class PipeplanError(Exception):
    """Base of all typed pipeplan errors.

    Args:
        code: stable machine-readable code, e.g. ``"unknown_node"``.
        message: human-readable message naming what is wrong and where.
        where: optional locator (file, tensor, key, stage or edge) for tooling.
    """

    code: str = "error"

    def __init__(self, message: str, *, code: str | None = None, where: str | None = None):
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.where = where

    def one_line(self) -> str:
        """The CLI form: ``error[<code>]: <message>`` on a single line."""
        return f"error[{self.code}]: {' '.join(self.message.split())}"


# --------------------------------------------------------------------------- GGUF reader
class GGUFError(PipeplanError):
    """A GGUF file (or shard set) that cannot be read into ModelFacts. ``code`` names the kind."""

    code = "gguf"


class NotGGUFError(GGUFError):
    """The file does not start with the ``GGUF`` magic, or has an unsupported version."""

    code = "not_gguf"


class TruncatedGGUFError(GGUFError):
    """The header, tensor index or tensor data reach past the end of the file."""

    code = "truncated"


class UnknownTensorTypeError(GGUFError):
    """A tensor's ggml type id is not one gguf knows."""

    code = "unknown_tensor_type"


class BadAlignmentError(GGUFError):
    """``general.alignment`` is not a positive power of two."""

    code = "bad_alignment"


class VocabOnlyError(GGUFError):
    """The file holds a vocabulary but no weight tensors."""

    code = "vocab_only"


class BlockCountMismatchError(GGUFError):
    """``<arch>.block_count`` disagrees with the ``blk.N.*`` tensors present."""

    code = "block_count_mismatch"


class InconsistentTensorIndexError(GGUFError):
    """Overlapping or out-of-file tensor data ranges, or counts that do not match."""

    code = "inconsistent_tensor_index"


class MissingKeyError(GGUFError):
    """A required metadata key is absent (or has the wrong type)."""

    code = "missing_key"


class InconsistentShardsError(GGUFError):
    """A gguf-split shard set whose shards disagree, or a shard that is missing."""

    code = "inconsistent_shards"


class UnsupportedArchitectureError(GGUFError):
    """``general.architecture`` names no stage-program builder (``pipeplan.models.archs``)."""

    code = "unsupported_architecture"


class InvalidHParamsError(GGUFError):
    """Hyperparameters present but unusable together (heads that do not divide the hidden size, a
    rope dimension above the head dimension, ...)."""

    code = "invalid_hparams"


class MissingTensorError(GGUFError):
    """A tensor the architecture's stage program reads is absent (names the block and tensor)."""

    code = "missing_tensor"


class UnexpectedTensorError(GGUFError):
    """A tensor the architecture's stage program would ignore (``blk.0.attn_q.bias`` in a llama file)."""

    code = "unexpected_tensor"


ARCH_GGUF_ERRORS: dict[str, type[GGUFError]] = {c.code: c for c in (
    UnsupportedArchitectureError, InvalidHParamsError, MissingTensorError, UnexpectedTensorError)}
"""The GGUFError class of each architecture check code (the facts reader raises them)."""


class ModelFactsError(GGUFError):
    """A model-facts TOML file that is malformed or incomplete."""

    code = "bad_model_facts"


# --------------------------------------------------------------------------- planner
class RunPlanRejection(PipeplanError):
    """The planner refused to emit a RunPlan (seed 000, "Authority / Rejection").

    ``code`` is one of: unknown_node, duplicate_stage, missing_stage, invalid_stage_count,
    edge_endpoint_mismatch, inconsistent_model_facts, insufficient_memory, invalid_object_spec,
    invalid_pool, invalid_runtime_config; from the runplan IR verifiers also
    invalid_layer_assignment (RP-LA-1/2/4), inconsistent_provision (RP-PP-*) and malformed_runplan
    (IR that is not a RunPlan at all). See ``pipeplan.dialects.runplan_attrs.INVARIANT_CODES``.
    """

    code = "rejected"


# --------------------------------------------------------------------------- runtime
STAGE_FAULT_KINDS = ("download", "parse", "allocation", "bind", "invalid_range", "runtime")


class StageFault(PipeplanError):
    """A stage failed (seed 001, "Failure Behavior"). ``kind`` is one of STAGE_FAULT_KINDS."""

    def __init__(self, kind: str, stage: int, detail: str):
        if kind not in STAGE_FAULT_KINDS:
            raise ValueError(f"unknown StageFault kind {kind!r}")
        super().__init__(f"stage {stage}: {detail}", code=f"stage_fault:{kind}", where=f"stage {stage}")
        self.kind = kind
        self.stage = stage
        self.detail = detail

    def __reduce__(self):  # picklable across processes
        return (StageFault, (self.kind, self.stage, self.detail))
