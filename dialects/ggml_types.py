"""gguf's ggml type table without importing gguf (which imports numpy and yaml: ~0.2 s of every
``pipeplan-opt`` run that verifies a plan).

:data:`GGML_TYPE_SIZES` is ``gguf.constants.GGML_QUANT_SIZES`` (gguf 0.19.0, llama.cpp's table) keyed by
the ``GGMLQuantizationType`` member name, in its order; ``tests/unit/test_opt_startup.py`` checks it
equals the installed gguf's table and that every member is listed.
"""

from __future__ import annotations

GGML_TYPE_SIZES: dict[str, tuple[int, int]] = {
    "F32": (1, 4), "F16": (1, 2), "Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22), "Q5_1": (32, 24),
    "Q8_0": (32, 34), "Q8_1": (32, 40), "Q2_K": (256, 84), "Q3_K": (256, 110), "Q4_K": (256, 144),
    "Q5_K": (256, 176), "Q6_K": (256, 210), "Q8_K": (256, 292), "IQ2_XXS": (256, 66), "IQ2_XS": (256, 74),
    "IQ3_XXS": (256, 98), "IQ1_S": (256, 50), "IQ4_NL": (32, 18), "IQ3_S": (256, 110), "IQ2_S": (256, 82),
    "IQ4_XS": (256, 136), "I8": (1, 1), "I16": (1, 2), "I32": (1, 4), "I64": (1, 8), "F64": (1, 8),
    "IQ1_M": (256, 56), "BF16": (1, 2), "TQ1_0": (256, 54), "TQ2_0": (256, 66), "MXFP4": (32, 17), "NVFP4": (64, 36),
    "Q1_0": (128, 18),
}
"""ggml type name -> (elements per block, bytes per block)."""

__all__ = ["GGML_TYPE_SIZES"]
