"""Shared pytest fixtures: paths to ../shared/models (read in place, never copied)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")
# `pipeplan plan` without --nodes states this machine's peaks (frontend.pool.local_peaks): fixed figures keep
# plans deterministic and no test probes or writes the user's cache (tests of the probe unset it).
os.environ.setdefault("PIPEPLAN_LOCAL_PEAKS", "2.0e10,1.0e11")

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
MODELS = SHARED / "models"
STORIES = MODELS / "stories260K.gguf"
VOCAB_ONLY = MODELS / "parser-inputs" / "ggml-vocab-llama-spm.gguf"
TINY_RANDOM = MODELS / "parser-inputs" / "llama-2-tiny-random.gguf"


@pytest.fixture(scope="session")
def stories_path() -> Path:
    """Path of the shared stories260K.gguf (5 blocks, F32)."""
    assert STORIES.exists(), f"missing shared model {STORIES}"
    return STORIES


@pytest.fixture(scope="session")
def expected_cases() -> list[dict]:
    """The llama.cpp greedy cases from shared/models/expected.json."""
    import json

    return json.loads((MODELS / "expected.json").read_text())["cases"]


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch intra-op thread for a module (restored after): tiny shapes and the Triton interpreter are
    overhead-bound, and the 2 cores are shared. Opt in with
    ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
