"""A chain of StageExecutors driven greedily in-process: the kernel tests' harness (not a runtime path; the
runtime runs stages through :mod:`pipeplan.runtime.orchestrator`)."""

from __future__ import annotations

from collections.abc import Sequence

from pipeplan.runtime.program import StageExecutor, _NumpyArrays


def greedy_generate(stages: Sequence[StageExecutor], prompt_ids: Sequence[int], n_tokens: int) -> list[int]:
    """Greedy decoding through a chain of executors (in-process, no transport; tests only): prefill the prompt
    (last-position logits only), then decode one token at a time. Resets every stage first.

    Returns the ``n_tokens`` generated ids. Raises :class:`ExecutionError` past ``max_seq_len``.
    """
    for s in stages:
        s.reset()
    out: list[int] = []
    arrays = stages[0]._arrays if stages else _NumpyArrays
    x = arrays.token_ids(prompt_ids)
    pos = 0
    for _ in range(n_tokens):
        h = x
        for s in stages:
            h = s.forward(h, pos, last_only=True)
        pos += x.shape[0]
        tok = stages[-1]._arrays.argmax_row(h[-1])
        out.append(tok)
        x = arrays.token_ids([tok])
    return out
