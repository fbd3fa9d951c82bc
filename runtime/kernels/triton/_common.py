"""Shared helpers of the Triton kernels: run mode (GPU or interpreter), errors, launch-size policy.

Run mode (DESIGN.md §5): Triton kernels run on the GPU when torch sees one; otherwise they run under
Triton's interpreter (``TRITON_INTERPRET=1``, which must be set before a kernel is decorated:
:mod:`pipeplan.runtime.kernels.triton` sets it at import when no GPU is present). The interpreter
costs ~1.5 ms per program, so :func:`interpreting` launches use the largest legal blocks (fewest
programs) while GPU launches use autotuned or bandwidth-oriented configurations.
"""

from __future__ import annotations

import os

import torch
from pipeplan.errors import PipeplanError
from pipeplan.targets.triton_formats import next_pow2

__all__ = ["TritonKernelError", "cdiv", "check_float", "interpreting", "next_pow2", "on_device"]


class TritonKernelError(PipeplanError):
    """A Triton kernel cannot run a call: an unsupported weight format or dtype, a shape the kernel
    does not handle, or operands on different devices. ``kind`` is the StageFault kind (``runtime``;
    ``bind`` for a weight format the kernels cannot consume). ``code`` is ``triton:<reason>``."""

    kind = "runtime"

    def __init__(self, reason: str, detail: str, *, where: str | None = None, kind: str = "runtime"):
        super().__init__(detail, code=f"triton:{reason}", where=where)
        self.reason = reason
        self.kind = kind


def interpreting() -> bool:
    """True when Triton kernels run under the CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def cdiv(a: int, b: int) -> int:
    """Ceiling division."""
    return -(-a // b)


def on_device(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``x`` on ``device`` (no copy when already there): stage inputs and the rope table arrive on
    the CPU while a GPU stage keeps weights and caches on the GPU."""
    return x if x.device == device else x.to(device, non_blocking=True)


def check_float(x: torch.Tensor, what: str) -> None:
    """Raise :class:`TritonKernelError` (``triton:dtype``) unless ``x`` is float32 (the activation
    dtype of every stage program)."""
    if x.dtype != torch.float32:
        raise TritonKernelError("dtype", f"{what} must be float32, got {x.dtype}", where=what)
