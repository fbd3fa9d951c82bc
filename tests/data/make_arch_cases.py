"""Record llama.cpp's greedy ids for the generated qwen2 / qwen3 / gemma3 test models (run once, by hand).

    .venv/bin/python tests/data/make_arch_cases.py --llama-python /work/llama-venv/bin/python

Writes ``tests/data/arch_cases.json``: per case the :func:`tests.ggufgen.write_random_model` arguments,
the sha256 of the GGUF they produce, the prompt ids and llama.cpp's 16 greedy ids. The models are
written with this repository's generator (deterministic: fixed seeds); the ids come from
llama-cpp-python (a reference tool, never a dependency) in a child process of ``--llama-python``:
``Llama(path, n_ctx=64, n_threads=1, logits_all=True, type_k=F32, type_v=F32)``, ``eval(prompt_ids)``,
then 16 times argmax of the last logits and ``eval([id])`` (greedy, no sampler, no BOS added: the
prompt ids start with BOS 1). The test (tests/unit/test_archs.py) regenerates each GGUF, checks its
sha256 against the recorded one and compares our greedy ids with llama.cpp's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.ggufgen import write_random_model  # noqa: E402

N_TOKENS = 16
PROMPT = [1, 40, 77, 5, 100, 200, 33]
CASES = {
    "qwen2": dict(arch="qwen2", blocks=3, hidden=64, heads=4, kv_heads=2, ffn=96, vocab=300, seed=11),
    "qwen3": dict(arch="qwen3", blocks=3, hidden=64, heads=4, kv_heads=2, ffn=96, vocab=300, head_dim=32, seed=12),
    "gemma3": dict(arch="gemma3", blocks=6, hidden=64, heads=4, kv_heads=2, ffn=96, vocab=300, head_dim=32,
                   sliding_window=4, seed=13, kv_overrides={"gemma3.rope.freq_base": 1e6}),
}
"""Case name -> write_random_model arguments (gemma3: window 4 so the 23 positions exercise it; layer 5
global with base 1e6, layers 0-4 local with the default base 10000)."""

_CHILD = r"""
import json, sys
import numpy as np
from llama_cpp import Llama
GGML_TYPE_F32 = 0
path, prompt, n = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
llm = Llama(path, n_ctx=64, n_threads=1, logits_all=True, verbose=False, type_k=GGML_TYPE_F32, type_v=GGML_TYPE_F32)
llm.eval(prompt)
out = []
for _ in range(n):
    tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
    out.append(tok)
    llm.eval([tok])
print(json.dumps(out))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama-python", required=True, help="a Python with llama-cpp-python installed")
    ap.add_argument("-o", default=str(REPO / "tests" / "data" / "arch_cases.json"))
    a = ap.parse_args()
    out = {"generator": "tests/ggufgen.py write_random_model", "n_tokens": N_TOKENS,
           "reference": "llama.cpp via llama-cpp-python (" + subprocess.run(
               [a.llama_python, "-c", "import llama_cpp; print(llama_cpp.__version__)"], capture_output=True,
               text=True, check=True).stdout.strip() + "), greedy argmax, F32 KV cache, n_threads 1",
           "command": "tests/data/make_arch_cases.py --llama-python " + a.llama_python, "cases": {}}
    with tempfile.TemporaryDirectory() as d:
        for name, kw in CASES.items():
            path = write_random_model(Path(d) / f"{name}.gguf", **kw)  # type: ignore[arg-type]
            sha = hashlib.sha256(path.read_bytes()).hexdigest()
            ids = json.loads(subprocess.run([a.llama_python, "-c", _CHILD, str(path), json.dumps(PROMPT), str(N_TOKENS)],
                                            capture_output=True, text=True, check=True).stdout)
            out["cases"][name] = {"args": kw, "sha256": sha, "prompt_ids": PROMPT, "greedy_ids": ids}
            print(name, sha[:16], ids)
    Path(a.o).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
