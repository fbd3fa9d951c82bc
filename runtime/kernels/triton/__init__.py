"""Triton kernels of a llama stage program: the same names and calling conventions as the torch
reference (:mod:`pipeplan.runtime.kernels.reference`), so ``StageExecutor(..., kernels=<this module>)``
runs a stage program on them unchanged (DESIGN.md §1).

Where they run: on the GPU when torch sees one (weights, KV cache and activations on ``cuda``); on the
CPU under Triton's interpreter otherwise. The interpreter must be chosen before any kernel is
decorated, so importing this package without a visible GPU sets ``TRITON_INTERPRET=1`` (unless the
variable is already set) before importing the kernel modules.

Kernel families (one module each): :mod:`.embedding` (``embedding_gather``, every weight format,
optional ``scale``), :mod:`.rmsnorm` (``rms_norm``, ``head_rms_norm``), :mod:`.gemv` (``matmul`` with
fused dequant of F32/F16/BF16/Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/Q4_K/Q5_K/Q6_K weights), :mod:`.rope` (``rope``,
NORM and NEOX pairing), :mod:`.attention` (``kv_cache_write``, causal or sliding-window prefill/decode
``attention`` with GQA and a softmax ``scale``), :mod:`.elementwise` (``silu_mul``, ``gelu_mul``,
``add``, ``add_bias``), :mod:`.argmax` (``argmax``). ``split`` and ``last_row`` are views (no
arithmetic, no kernel) and are the reference functions. Names and attributes follow the kernel
contract shared with the reference and CPU tables (kernel-contract: new attrs ``scale``, ``mode``,
``window``; new kernels ``head_rms_norm``, ``gelu_mul``, ``add_bias``).
"""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from pipeplan.runtime.kernels import reference as _reference  # noqa: E402
from pipeplan.runtime.kernels.triton._common import TritonKernelError, interpreting  # noqa: E402
from pipeplan.runtime.kernels.triton.argmax import argmax  # noqa: E402
from pipeplan.runtime.kernels.triton.attention import attention, kv_cache_write  # noqa: E402
from pipeplan.runtime.kernels.triton.elementwise import add, add_bias, gelu_mul, silu_mul  # noqa: E402
from pipeplan.runtime.kernels.triton.embedding import embedding_gather  # noqa: E402
from pipeplan.runtime.kernels.triton.gemv import matmul  # noqa: E402
from pipeplan.runtime.kernels.triton.rmsnorm import head_rms_norm, rms_norm  # noqa: E402
from pipeplan.runtime.kernels.triton.rope import rope  # noqa: E402

split = _reference.split
last_row = _reference.last_row

KERNELS = {name: globals()[name] for name in _reference.KERNELS}
"""Kernel name -> Triton-backed function: the reference table's keys by construction, each bound to the
function of that name in this package (a reference kernel without a Triton function of its name fails
this import)."""


def device() -> torch.device:
    """Where these kernels run: ``cuda`` when torch sees a GPU, else ``cpu`` (interpreter)."""
    return torch.device("cuda" if torch.cuda.is_available() and not interpreting() else "cpu")


def load_stage_weights(files, tensors):
    """A stage's weights for these kernels: :func:`pipeplan.runtime.kernels.triton_weights.load_stage_weights_raw`
    on :func:`device` (GGUF formats kept; quantized matrices are dequantized inside the kernels). Same
    arguments, accounting and errors as :func:`pipeplan.runtime.loader.load_stage_weights`, plus
    ``TritonKernelError`` ``triton:weight_type`` (kind ``bind``) for a matrix type the kernels do not read."""
    from pipeplan.runtime.kernels.triton_weights import load_stage_weights_raw

    return load_stage_weights_raw(files, tensors, device=device())


def allocate(shape: tuple[int, ...]) -> torch.Tensor:
    """KV-cache allocator for a stage running these kernels: float32 zeros on :func:`device`."""
    return torch.zeros(shape, dtype=torch.float32, device=device())


__all__ = ["KERNELS", "allocate", "load_stage_weights", "TritonKernelError", "add", "add_bias", "argmax", "attention",
           "device", "embedding_gather", "gelu_mul", "head_rms_norm", "interpreting", "kv_cache_write", "last_row",
           "matmul", "rms_norm", "rope", "silu_mul", "split"]
