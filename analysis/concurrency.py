"""Predicted throughput and latency of N concurrent sequences through S pipeline stages.

Seeds/003 "Timing and simulation projection" (AB-T-2): the same commands and costs the single-sequence
simulation runs (:mod:`pipeplan.analysis.simulate`), reduced to one *frame cost* per stage and step and one
*hop* per edge, then cycled by N sequences (the interleaving of vLLM / SGLang pipeline parallelism and
llama.cpp's async pipeline: stage i works on sequence k while stage i+1 works on k-1).

**Costs** (:class:`StageCosts`, seconds): ``decode_s[i]`` / ``prefill_s[i]`` — stage i's work for one
frame of the step (every command of the step on stage i but its ``send``/``recv``); ``decode_hop_s[i]`` /
``prefill_hop_s[i]`` — the hop *into* stage i: the ``send`` of the producing stage plus the ``recv`` of
stage i (for i = 0: the last stage's token-out ``send`` and stage 0's token-in ``recv``, the loop through
the orchestrator). A prefill frame holds ``prefill_rows`` prompt rows (the plan's prefill step) and costs
the prefill step whatever the rows of the last chunk.

**Model.** Sequence k (arriving at ``arrivals[k]``, default 0) runs ``ceil(prompt_tokens / prefill_rows)``
prefill frames then ``decode_tokens - 1`` decode frames; the last prefill frame yields its first token and
each decode frame one more (as ``pipeplan run``). One frame per sequence is in flight: frame j+1 enters the
hop into stage 0 when frame j leaves the last stage. A frame reaches stage i ``hop[i]`` after it left stage
i-1 (hops are pure delays: rings and wake-ups, no stage busy); each stage serves one frame at a time,
first come first served (ties: sequence index). A token is out when its frame leaves the last stage.

**Runtime model** (:func:`simulate_frames`; used when a runtime term is set or M < N). The orchestrator is
one more server after the last stage: a returning frame costs it ``orch_s`` CPU seconds (token out, the
next frame built and sent); a sequence's token is out when the orchestrator starts on its frame. Every
stage frame costs ``frame_s`` more (receive, announce, send). A frame reaching an idle server (stage or
orchestrator) starts ``wake_s`` later (the wake-up of a process blocked on its ring); a busy server takes
its next frame at once. With ``cores`` set, the wake-up is paid only when the runtime's ring consumers
cannot spin (:func:`consumers_spin`: a spinning consumer is awake when its frame lands). The servers share
``cores`` CPUs (None: each its own) by processor sharing, and the memory system by ``contention`` c: with k
working servers each runs at ``min(1, cores / k) / (1 + c (min(k, cores) - 1))`` of its speed (S busy stages
on C < S cores are slowed by S / C; two stages computing at once on two cores each by 1 + c, as two
processes streaming weights from one memory do). Micro-batching
(``micro_batches`` M, default ``min(N, S)``; the runtime's M is :func:`best_micro_batches`): at most M frames in flight; a decode frame carries the ready
decoding sequences, first ready first, up to ``ceil(N / M)`` rows and costs :meth:`StageCosts.frame_cost` at its rows (``rows_s``: calibrated at :data:`BATCH_ROWS`); a prefill
chunk of a new sequence travels as its own frame and counts as one of the M. A decode row at KV position p
costs :meth:`StageCosts.kv_extra` more than at the calibrated position (attention reads p + 1 cached rows;
``kv_row_s``: one row's attention measured at the positions ``kv_pos``). M = N with no runtime term is
the model above exactly. ``pipeplan calibrate`` (target cpu) measures ``rows_s`` and fits ``frame_s = orch_s``, ``contention``
and ``wake_s`` on the local pipeline (:func:`pipeplan.tools.calibrate.measure_loop`);
:func:`with_runtime_terms` reads them for a package compiled with that calibration.

**Figures** (:func:`throughput_summary`, the same for simulated and measured token times):

* ``aggregate_tok_s`` — steady-state decode rate over the middle half of every sequence, which leaves out
  the admission and drain transients: with ``m1 = D // 4`` and ``m2 = D - 1 - D // 4`` per sequence of D
  tokens (``0`` and ``D - 1`` when D < 3), ``sum_k (m2 - m1) / (max_k t_k[m2] - min_k t_k[m1])``. Each
  counted token's frame starts after ``min_k t_k[m1]``, so the figure never exceeds ``1 / max(decode_s)``.
  Meant for N requests started together with the same ``max_tokens``.
* ``per_token_p50_s`` / ``per_token_p99_s`` — percentiles (numpy's linear interpolation) of the gaps
  between consecutive tokens of a sequence, over every sequence.
* ``request_latency_s`` — mean over sequences of last token time minus arrival; ``ttft_s`` the mean first
  token time minus arrival; ``makespan_s`` the last token time; ``overall_tok_s`` every token / makespan.

Closed forms (tests): N = 1: a decode token takes ``sum(decode_s) + sum(decode_hop_s)``; steady state
``aggregate = min(N / cycle, 1 / max(decode_s))`` with ``cycle`` that sum (Little's law on the closed
cycle, bounded by the bottleneck stage).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import heapq
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pipeplan.errors import PipeplanError

BATCH_ROWS = (1, 2, 4, 8)
"""Rows of the decode frames whose cost calibration measures (``StageCosts.rows_s``)."""

THROUGHPUT_FORMAT = "pipeplan-throughput/1"
"""``format`` of a throughput measurement document (:func:`read_throughput`)."""

class ConcurrencyError(PipeplanError):
    """A request the concurrency model cannot answer: ``invalid_request`` (counts < 1, costs not finite or
    negative, mismatched stage counts), ``bad_throughput`` (a measurement document that is not one),
    ``unknown_step`` (a model without a decode step)."""

    code = "concurrency"


@dataclass(frozen=True)
class StageCosts:
    """Per-stage frame costs and hops (seconds; module docstring). All tuples have one entry per stage;
    ``frame_s``, ``orch_s``, ``wake_s``, ``cores``, ``rows_s`` (per stage, decode frame seconds at
    :data:`BATCH_ROWS` rows) and ``contention`` (dimensionless, >= 0) are the runtime model's terms (module
    docstring; 0 / None / () leave them out)."""

    decode_s: tuple[float, ...]
    decode_hop_s: tuple[float, ...]
    prefill_s: tuple[float, ...]
    prefill_hop_s: tuple[float, ...]
    prefill_rows: int = 8
    evidence: str = ""
    frame_s: float = 0.0
    orch_s: float = 0.0
    wake_s: float = 0.0
    cores: int | None = None
    rows_s: tuple[tuple[float, ...], ...] = ()
    contention: float = 0.0
    kv_pos: tuple[int, ...] = ()
    kv_row_s: tuple[tuple[float, ...], ...] = ()
    kv_ref_pos: float = 0.0

    @property
    def runtime_terms(self) -> bool:
        """Whether any term of the runtime model is set (``frame_s``, ``orch_s``, ``wake_s``, ``cores``,
        ``contention``, the KV-position table ``kv_pos``)."""
        return bool(self.frame_s or self.orch_s or self.wake_s or self.contention or self.cores is not None
                    or self.kv_pos)

    def kv_extra(self, stage: int, pos: int) -> float:
        """Seconds one decode row at KV position ``pos`` costs stage ``stage`` more than a row at ``kv_ref_pos``
        (where ``decode_s`` / ``rows_s`` were measured): ``kv_row_s[stage]`` (one decode row's attention seconds at
        the positions ``kv_pos``) interpolated linearly at ``pos`` minus at ``kv_ref_pos``, flat outside the
        table; 0 without a table. Negative below ``kv_ref_pos``."""
        if not self.kv_pos:
            return 0.0
        import numpy as np

        at = np.interp((float(pos), self.kv_ref_pos), self.kv_pos, self.kv_row_s[stage])
        return float(at[0] - at[1])

    def frame_cost(self, stage: int, rows: int) -> float:
        """Seconds of stage ``stage``'s work for a decode frame of ``rows`` rows (one row per sequence):
        linear interpolation of ``rows_s[stage]`` at :data:`BATCH_ROWS` (extrapolated past the last with
        its slope); without ``rows_s``, the line through ``(1, decode_s)`` and ``(prefill_rows,
        prefill_s)``, never below ``decode_s``."""
        d = self.decode_s[stage]
        if rows <= 1:
            return d
        if self.rows_s:
            xs = BATCH_ROWS[:len(self.rows_s[stage])]
            ys = self.rows_s[stage]
            for i in range(1, len(xs)):
                if rows <= xs[i] or i == len(xs) - 1:
                    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
                    return max(d, y0 + (rows - x0) * (y1 - y0) / (x1 - x0))
            return d * rows
        if self.prefill_rows <= 1:
            return d * rows
        slope = max(0.0, (self.prefill_s[stage] - d) / (self.prefill_rows - 1))
        return d + (rows - 1) * slope

    def scaled(self, k: float) -> StageCosts:
        """These costs with every stage's work (``decode_s``, ``prefill_s``, ``rows_s``, ``kv_row_s``) times ``k``
        (the loop's ``work_scale``: the pipeline ran its kernels ``k`` times as long as they were calibrated);
        hops and runtime terms unchanged."""
        if k == 1.0:
            return self
        return dataclasses.replace(
            self, decode_s=tuple(k * x for x in self.decode_s), prefill_s=tuple(k * x for x in self.prefill_s),
            rows_s=tuple(tuple(k * x for x in r) for r in self.rows_s),
            kv_row_s=tuple(tuple(k * x for x in r) for r in self.kv_row_s))

    def with_ray_loop(self, loop: Mapping[str, Any]) -> StageCosts:
        """These costs with what a Ray run pays around its stages instead of the local ring's hops and wake-up,
        from its relay chain measured on the cluster (``loop``: :func:`pipeplan.runtime.ray_chain.measure_chain`'s
        ``loop_s``, ``relay_cpu_s``, ``driver_cpu_s``, seconds): every stage frame costs ``relay_cpu_s`` more CPU (a
        relay process's CPU per frame: receive, ack and send over the Ray transport, and Ray's own threads), every
        returning frame costs the orchestrator ``driver_cpu_s`` more, and what the loop takes beyond that CPU,
        ``loop_s - S relay_cpu_s - driver_cpu_s`` (at least 0), is the transit, spread evenly over the S hops. A
        measured loop includes the wake-up of every blocked reader, so the wake-up term is left out. Raises
        ConcurrencyError(invalid_request) for a missing, negative or non-finite figure."""
        vals = {}
        for name in ("loop_s", "relay_cpu_s", "driver_cpu_s"):
            x = loop.get(name) if isinstance(loop, Mapping) else None
            if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or x < 0:
                raise ConcurrencyError(f"Ray loop: {name} = {x!r} is not a finite number of seconds >= 0",
                                       code="invalid_request", where=name)
            vals[name] = float(x)
        n = self.stages
        transit = max(0.0, vals["loop_s"] - n * vals["relay_cpu_s"] - vals["driver_cpu_s"])
        hop = (transit / n,) * n
        return dataclasses.replace(self, decode_hop_s=hop, prefill_hop_s=hop, wake_s=0.0,
                                   frame_s=self.frame_s + vals["relay_cpu_s"], orch_s=self.orch_s + vals["driver_cpu_s"])

    def terms_line(self) -> str:
        """The runtime terms in one line (``pipeplan compile --parallel``, ``pipeplan compare``)."""
        if not self.runtime_terms:
            return "no runtime terms (the calibration has no pipeline loop for this stage count)"
        return (f"runtime terms: frame {self.frame_s * 1e6:.1f} us, orchestrator {self.orch_s * 1e6:.1f} us, wake "
                f"{self.wake_s * 1e6:.1f} us, contention {self.contention:.2f}, "
                f"{f'{self.cores} cores' if self.cores else 'cores not calibrated'}")

    @property
    def stages(self) -> int:
        """Number of stages S."""
        return len(self.decode_s)

    def check(self) -> None:
        """Raise ConcurrencyError(invalid_request) for no stage, unequal lengths, a negative or non-finite
        cost, or ``prefill_rows`` < 1."""
        s = len(self.decode_s)
        fields = {"decode_s": self.decode_s, "decode_hop_s": self.decode_hop_s, "prefill_s": self.prefill_s,
                  "prefill_hop_s": self.prefill_hop_s}
        if s < 1:
            raise ConcurrencyError("stage costs: no stage", code="invalid_request", where="decode_s")
        for name, xs in fields.items():
            if len(xs) != s:
                raise ConcurrencyError(f"stage costs: {name} has {len(xs)} entries for {s} stages",
                                       code="invalid_request", where=name)
            for i, x in enumerate(xs):
                if not isinstance(x, int | float) or not math.isfinite(x) or x < 0:
                    raise ConcurrencyError(f"stage costs: {name}[{i}] = {x!r} is not a finite number of seconds >= 0",
                                           code="invalid_request", where=name)
        if self.prefill_rows < 1:
            raise ConcurrencyError(f"stage costs: prefill_rows must be >= 1, got {self.prefill_rows}",
                                   code="invalid_request", where="prefill_rows")
        for name in ("frame_s", "orch_s", "wake_s", "contention"):
            x = getattr(self, name)
            if not isinstance(x, int | float) or not math.isfinite(x) or x < 0:
                unit = "" if name == "contention" else " of seconds"
                raise ConcurrencyError(f"stage costs: {name} = {x!r} is not a finite number{unit} >= 0",
                                       code="invalid_request", where=name)
        if self.cores is not None and (isinstance(self.cores, bool) or not isinstance(self.cores, int)
                                       or self.cores < 1):
            raise ConcurrencyError(f"stage costs: cores must be an integer >= 1 or None, got {self.cores!r}",
                                   code="invalid_request", where="cores")
        kv_ok = (len(self.kv_row_s) == s and len(self.kv_pos) >= 1
                 and all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in self.kv_pos)
                 and list(self.kv_pos) == sorted(set(self.kv_pos))
                 and all(len(r) == len(self.kv_pos) and all(isinstance(x, int | float) and math.isfinite(x) and x >= 0
                                                            for x in r) for r in self.kv_row_s)
                 and isinstance(self.kv_ref_pos, int | float) and math.isfinite(self.kv_ref_pos)
                 and self.kv_ref_pos >= 0)
        if (self.kv_pos or self.kv_row_s) and not kv_ok:
            raise ConcurrencyError(f"stage costs: kv_pos must be ascending distinct positions >= 0 and kv_row_s hold, "
                                   f"per stage ({s}), one finite number of seconds >= 0 per position; kv_ref_pos a "
                                   f"position >= 0", code="invalid_request", where="kv_row_s")
        if self.rows_s and (len(self.rows_s) != s or any(
                not 1 <= len(r) <= len(BATCH_ROWS)
                or any(not isinstance(x, int | float) or not math.isfinite(x) or x < 0 for x in r)
                for r in self.rows_s)):
            raise ConcurrencyError(f"stage costs: rows_s must hold, per stage, 1 to {len(BATCH_ROWS)} finite "
                                   f"seconds >= 0 (frames of {BATCH_ROWS} rows)", code="invalid_request",
                                   where="rows_s")

    @classmethod
    def uniform(cls, stages: int, step_s: float, hop_s: float = 0.0, *, prefill_s: float | None = None,
                prefill_rows: int = 8) -> StageCosts:
        """``stages`` equal stages (tests and what-if figures)."""
        p = step_s if prefill_s is None else prefill_s
        return cls((step_s,) * stages, (hop_s,) * stages, (p,) * stages, (hop_s,) * stages, prefill_rows)


@dataclass(frozen=True)
class ConcurrentPrediction:
    """Predicted figures for ``n_sequences`` (module docstring); ``stage_utilisation[i]`` is stage i's
    busy time over the makespan; ``token_times[k]`` the seconds at which sequence k's tokens came out."""

    n_sequences: int
    stages: int
    prompt_tokens: int
    decode_tokens: int
    aggregate_tok_s: float
    per_token_p50_s: float
    per_token_p99_s: float
    request_latency_s: float
    ttft_s: float
    makespan_s: float
    overall_tok_s: float
    stage_utilisation: tuple[float, ...]
    bottleneck_s: float
    cycle_s: float
    evidence: str = ""
    token_times: tuple[tuple[float, ...], ...] = field(default=(), repr=False)
    micro_batches: int = 0

    def to_json(self) -> dict[str, Any]:
        """The figures as a JSON object (``token_times`` left out)."""
        d = asdict(self)
        d.pop("token_times")
        d["stage_utilisation"] = list(self.stage_utilisation)
        return d


def _percentile(xs: Sequence[float], q: float) -> float:
    import numpy as np

    return float(np.percentile(np.asarray(xs, dtype=np.float64), q)) if len(xs) else 0.0


def throughput_summary(token_times: Sequence[Sequence[float]], arrivals: Sequence[float] | None = None
                       ) -> dict[str, float]:
    """``aggregate_tok_s, per_token_p50_s, per_token_p99_s, request_latency_s, ttft_s, makespan_s,
    overall_tok_s`` of per-sequence token times (seconds from a common origin; module docstring).

    Raises ConcurrencyError(invalid_request) when there is no sequence, a sequence has no token, or its
    times are not finite and non-decreasing.
    """
    if not token_times:
        raise ConcurrencyError("no sequence", code="invalid_request", where="token_times")
    arr = list(arrivals) if arrivals is not None else [0.0] * len(token_times)
    if len(arr) != len(token_times):
        raise ConcurrencyError(f"{len(arr)} arrival times for {len(token_times)} sequences", code="invalid_request",
                               where="arrivals")
    gaps: list[float] = []
    for k, ts in enumerate(token_times):
        if not ts:
            raise ConcurrencyError(f"sequence {k} has no token", code="invalid_request", where="token_times")
        for j, t in enumerate(ts):
            if not math.isfinite(t) or (j and t < ts[j - 1]) or t < arr[k]:
                raise ConcurrencyError(f"sequence {k}: token time {j} = {t!r} is not finite, or before the one "
                                       f"before it or the arrival", code="invalid_request", where="token_times")
        gaps += [b - a for a, b in zip(ts, ts[1:])]
        d = len(ts)
    ref = token_times[0]
    d = len(ref)
    m1, m2 = (d // 4, d - 1 - d // 4) if d >= 3 else (0, d - 1)
    lo, hi = ref[m1], ref[m2]
    counted = sum(1 for ts in token_times for t in ts[1:] if lo < t <= hi)
    agg = counted / (hi - lo) if hi > lo else 0.0
    last = max(ts[-1] for ts in token_times)
    n_tok = sum(len(ts) for ts in token_times)
    return {"aggregate_tok_s": agg, "per_token_p50_s": _percentile(gaps, 50), "per_token_p99_s": _percentile(gaps, 99),
            "request_latency_s": sum(ts[-1] - a for ts, a in zip(token_times, arr)) / len(token_times),
            "ttft_s": sum(ts[0] - a for ts, a in zip(token_times, arr)) / len(token_times),
            "makespan_s": last, "overall_tok_s": n_tok / last if last > 0 else 0.0}


def simulate_sequences(costs: StageCosts, n_sequences: int, prompt_tokens: int, decode_tokens: int, *,
                       arrivals: Sequence[float] | None = None) -> tuple[list[list[float]], list[float]]:
    """Event simulation of the model (module docstring): ``(token_times per sequence, busy seconds per
    stage)``. Raises ConcurrencyError(invalid_request) for counts < 1 or bad costs/arrivals."""
    costs.check()
    for name, v in (("n_sequences", n_sequences), ("prompt_tokens", prompt_tokens), ("decode_tokens", decode_tokens)):
        if not isinstance(v, int) or v < 1:
            raise ConcurrencyError(f"{name} must be an integer >= 1, got {v!r}", code="invalid_request", where=name)
    arr = [0.0] * n_sequences if arrivals is None else [float(a) for a in arrivals]
    if len(arr) != n_sequences or any(not math.isfinite(a) or a < 0 for a in arr):
        raise ConcurrencyError(f"arrivals must be {n_sequences} finite times >= 0", code="invalid_request",
                               where="arrivals")
    s_count = costs.stages
    chunks = -(-prompt_tokens // costs.prefill_rows)
    frames = chunks + decode_tokens - 1
    busy = [0.0] * s_count
    waiting: list[list[tuple[float, int, int]]] = [[] for _ in range(s_count)]  # (arrival, seq, frame) heap
    active = [False] * s_count
    tokens: list[list[float]] = [[] for _ in range(n_sequences)]
    # events: (time, kind, seq, stage, frame); kind 0 = a stage finishes a frame, 1 = a frame reaches a stage
    ev: list[tuple[float, int, int, int, int]] = []

    def cost(stage: int, frame: int) -> float:
        return costs.prefill_s[stage] if frame < chunks else costs.decode_s[stage]

    def hop(stage: int, frame: int) -> float:
        return costs.prefill_hop_s[stage] if frame < chunks else costs.decode_hop_s[stage]

    def start(stage: int, t: float) -> None:
        arrival, k, j = heapq.heappop(waiting[stage])
        active[stage] = True
        d = cost(stage, j)
        busy[stage] += d
        heapq.heappush(ev, (max(t, arrival) + d, 0, k, stage, j))

    for k, a in enumerate(arr):
        heapq.heappush(ev, (a + hop(0, 0), 1, k, 0, 0))
    while ev:
        t, kind, k, stage, j = heapq.heappop(ev)
        if kind == 1:
            heapq.heappush(waiting[stage], (t, k, j))
            if not active[stage]:
                start(stage, t)
            continue
        active[stage] = False
        if stage + 1 < s_count:
            heapq.heappush(ev, (t + hop(stage + 1, j), 1, k, stage + 1, j))
        else:
            if j >= chunks - 1:
                tokens[k].append(t)
            if j + 1 < frames:
                heapq.heappush(ev, (t + hop(0, j + 1), 1, k, 0, j + 1))
        if waiting[stage]:
            start(stage, t)
    return tokens, busy


def consumers_spin(stages: int, frames_in_flight: int, cores: int) -> bool:
    """Whether the local runtime's ring consumers spin for an announced frame (so they pay no wake-up):
    each frame in flight keeps one stage computing and one consumer spinning, and the stage processes and the
    orchestrator are ``stages + 1`` processes at most, so spinning takes no core from a computing stage when
    ``min(2 * frames_in_flight, stages + 1) <= cores``. Raises ValueError when an argument is < 1."""
    if min(stages, frames_in_flight, cores) < 1:
        raise ValueError(f"consumers_spin needs stages, frames in flight and cores >= 1, got "
                         f"{stages}, {frames_in_flight}, {cores}")
    return min(2 * frames_in_flight, stages + 1) <= cores


def default_micro_batches(n_sequences: int, stages: int) -> int:
    """``min(N, S)``: the most frames in flight that keep every stage busy, the largest M
    :func:`best_micro_batches` considers (and the runtime's M when no stage costs are known)."""
    return max(1, min(n_sequences, stages))


CHOICE_DECODE_TOKENS = 32
"""Generated tokens per sequence of the workload the runtime's M is chosen for (:func:`choose_micro_batches`)."""


@dataclass(frozen=True)
class MicroBatchChoice:
    """The M :func:`best_micro_batches` chose and the prediction of every M it considered (M = 1, 2, ...)."""

    micro_batches: int
    predictions: tuple[ConcurrentPrediction, ...]

    def line(self) -> str:
        """One line naming the M chosen and the predicted aggregate tok/s per M (``pipeplan run/serve``)."""
        per = ", ".join(f"M={p.micro_batches} {p.aggregate_tok_s:.1f}" for p in self.predictions)
        n = self.predictions[0].n_sequences if self.predictions else 0
        return (f"pipeplan: micro-batches {self.micro_batches} for --parallel {n} (predicted fastest; "
                f"aggregate tok/s {per})")

    def to_json(self) -> dict[str, Any]:
        """``{"micro_batches": M, "predicted_tok_s": {"1": tok/s, ...}}``."""
        return {"micro_batches": self.micro_batches,
                "predicted_tok_s": {str(p.micro_batches): p.aggregate_tok_s for p in self.predictions}}


def best_micro_batches(costs: Any, n_sequences: int, prompt_tokens: int, decode_tokens: int, *,
                       prefill_rows: int | None = None, arrivals: Sequence[float] | None = None,
                       cores: int | None = None) -> MicroBatchChoice:
    """The M in ``1..min(N, S)`` whose :func:`predict_concurrent` (same costs and arguments) has the highest
    ``aggregate_tok_s``; ties (within 1e-9 relative): lower ``per_token_p50_s``, then larger M. Deterministic.

    M > S is not considered: S frames already keep every stage busy, and more frames only split the rows into
    smaller frames (each paying its frame and hop costs again). ``costs``: anything :func:`stage_costs` takes.
    Raises what :func:`predict_concurrent` raises."""
    c = stage_costs(costs, prefill_rows=prefill_rows)
    preds = tuple(predict_concurrent(c, n_sequences, prompt_tokens, decode_tokens, arrivals=arrivals,
                                     micro_batches=m, cores=cores)
                  for m in range(1, default_micro_batches(n_sequences, c.stages) + 1))
    best = preds[0]
    for p in preds[1:]:
        a, b = p.aggregate_tok_s, best.aggregate_tok_s
        if a > b * (1 + 1e-9) or (abs(a - b) <= 1e-9 * max(abs(a), abs(b))
                                  and p.per_token_p50_s <= best.per_token_p50_s * (1 + 1e-9)):
            best = p
    return MicroBatchChoice(best.micro_batches, preds)


def choose_micro_batches(package: str | Path | StageCosts, n_sequences: int, *,
                         prefill_rows: int | None = None, backend: str = "local") -> MicroBatchChoice | None:
    """The runtime's M for ``n_sequences`` on a compiled package directory (or its StageCosts, already read):
    :func:`best_micro_batches` of its stage costs (:func:`stage_costs`, the evidence it was compiled with) for
    a prompt of one prefill frame and :data:`CHOICE_DECODE_TOKENS` generated tokens per sequence (the
    steady-state decode rate, which the choice maximises, hardly depends on them). None when ``n_sequences``
    is 1 or the package's costs are not readable (e.g. a ``cuda-triton`` program file): the caller keeps
    ``min(N, S)``. ``backend``: the runtime the package runs on (``ray``: its calibration's relay chain)."""
    if n_sequences <= 1 or not (isinstance(package, StageCosts) or Path(package).is_dir()):
        return None
    try:
        costs = stage_costs(package, prefill_rows=prefill_rows, backend=backend)
        return best_micro_batches(costs, n_sequences, costs.prefill_rows, CHOICE_DECODE_TOKENS)
    except (PipeplanError, OSError, ValueError):
        return None


def simulate_frames(costs: StageCosts, n_sequences: int, prompt_tokens: int, decode_tokens: int, *,
                    micro_batches: int | None = None, arrivals: Sequence[float] | None = None
                    ) -> tuple[list[list[float]], list[float]]:
    """Event simulation of the runtime model (module docstring, "Runtime model"): ``(token times per
    sequence, busy seconds per stage)``. ``micro_batches`` M (None: :func:`default_micro_batches`): most
    frames in flight; a decode frame carries up to ``ceil(N / M)`` ready decoding sequences (FIFO), a
    prefill chunk travels alone and counts as one of the M. Raises ConcurrencyError(invalid_request)."""
    costs.check()
    for name, v in (("n_sequences", n_sequences), ("prompt_tokens", prompt_tokens), ("decode_tokens", decode_tokens)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ConcurrencyError(f"{name} must be an integer >= 1, got {v!r}", code="invalid_request", where=name)
    m = default_micro_batches(n_sequences, costs.stages) if micro_batches is None else micro_batches
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise ConcurrencyError(f"micro_batches must be an integer >= 1, got {m!r}", code="invalid_request",
                               where="micro_batches")
    arr = [0.0] * n_sequences if arrivals is None else [float(a) for a in arrivals]
    if len(arr) != n_sequences or any(not math.isfinite(a) or a < 0 for a in arr):
        raise ConcurrencyError(f"arrivals must be {n_sequences} finite times >= 0", code="invalid_request",
                               where="arrivals")
    s_count = costs.stages
    orch = s_count  # server index of the orchestrator
    chunks = -(-prompt_tokens // costs.prefill_rows)
    per_frame = -(-n_sequences // m)
    cores = math.inf if costs.cores is None else float(costs.cores)
    wake = 0.0 if costs.cores is not None and consumers_spin(s_count, m, costs.cores) else costs.wake_s
    done_frames = [0] * n_sequences  # frames of each sequence that came back
    tokens: list[list[float]] = [[] for _ in range(n_sequences)]
    busy = [0.0] * s_count
    frames: list[tuple[bool, tuple[int, ...], tuple[int, ...]]] = []  # (prefill, sequences, decode KV positions)
    queue: list[collections.deque[int]] = [collections.deque() for _ in range(s_count + 1)]
    taken = [False] * (s_count + 1)  # a frame is waking up or running on the server
    active: dict[int, list[float]] = {}  # server -> [remaining work, frame, wall start]
    ready: list[int] = []  # sequences waiting for their next frame, FIFO
    in_flight = 0
    ev: list[tuple[float, int, int, int, int]] = []  # (time, order, kind, server, frame/seq)
    order = itertools.count()
    ARRIVE, START, ADMIT = 0, 1, 2

    def work(server: int, f: int) -> float:
        prefill, seqs, pos = frames[f]
        if server == orch:
            return costs.orch_s
        if prefill:
            return costs.frame_s + costs.prefill_s[server]
        step = costs.frame_cost(server, len(seqs)) + sum(costs.kv_extra(server, p) for p in pos)
        return costs.frame_s + max(0.0, step)

    def hop(server: int, f: int) -> float:
        return (costs.prefill_hop_s if frames[f][0] else costs.decode_hop_s)[server]

    def arrive(server: int, f: int, t: float) -> None:
        if taken[server]:
            queue[server].append(f)
        else:
            taken[server] = True
            heapq.heappush(ev, (t + wake, next(order), START, server, f))

    def dispatch(t: float) -> None:
        nonlocal in_flight
        while in_flight < m and ready:
            k = ready[0]
            if done_frames[k] < chunks:
                seqs = [ready.pop(0)]
            else:
                seqs = [x for x in ready if done_frames[x] >= chunks][:per_frame]
                for x in seqs:
                    ready.remove(x)
            prefill = done_frames[seqs[0]] < chunks
            frames.append((prefill, tuple(seqs),
                           () if prefill else tuple(prompt_tokens + done_frames[x] - chunks for x in seqs)))
            in_flight += 1
            f = len(frames) - 1
            heapq.heappush(ev, (t + hop(0, f), next(order), ARRIVE, 0, f))

    def finish(server: int, f: int, t: float) -> None:
        nonlocal in_flight
        if server < s_count:
            busy[server] += t - active[server][2]
        del active[server]
        if queue[server]:
            heapq.heappush(ev, (t, next(order), START, server, queue[server].popleft()))
        else:
            taken[server] = False
        if server + 1 < s_count:
            heapq.heappush(ev, (t + hop(server + 1, f), next(order), ARRIVE, server + 1, f))
        elif server + 1 == s_count:
            arrive(orch, f, t)
        else:
            in_flight -= 1
            for k in frames[f][1]:
                done_frames[k] += 1
                if done_frames[k] < chunks + decode_tokens - 1:
                    ready.append(k)
            dispatch(t)

    for k, a in enumerate(arr):
        heapq.heappush(ev, (a, next(order), ADMIT, 0, k))
    now = 0.0
    while ev or active:
        rate = (min(1.0, cores / len(active)) / (1.0 + costs.contention * (min(len(active), cores) - 1))
                if active else 0.0)
        t_done = now + min(r[0] for r in active.values()) / rate if active else math.inf
        t_ev = ev[0][0] if ev else math.inf
        t = min(t_done, t_ev)
        for r in active.values():
            r[0] -= (t - now) * rate
        now = t
        if t_done <= t_ev:
            # the server with the least work left finishes now (its remainder may be a rounding residue that no
            # longer moves ``now``), and with it every server within rounding of zero
            low, lim = min(active, key=lambda sv: active[sv][0]), 1e-12 * max(1.0, now)
            for server in sorted(sv for sv, r in active.items() if r[0] <= lim or sv == low):
                finish(server, int(active[server][1]), now)
            continue
        _, _, kind, server, x = heapq.heappop(ev)
        if kind == ADMIT:
            ready.append(x)
            dispatch(now)
        elif kind == ARRIVE:
            arrive(server, x, now)
        else:
            if server == orch:
                for k in frames[x][1]:
                    if done_frames[k] >= chunks - 1:
                        tokens[k].append(now)
            active[server] = [work(server, x), float(x), now]
    return tokens, busy


def predict_concurrent(source: Any, n_sequences: int, prompt_tokens: int, decode_tokens: int, *,
                       evidence: str | None = None, prefill_rows: int | None = None,
                       arrivals: Sequence[float] | None = None, micro_batches: int | None = None,
                       cores: int | None = None, backend: str = "local") -> ConcurrentPrediction:
    """Predicted figures of ``n_sequences`` concurrent requests of ``prompt_tokens`` prompt tokens and
    ``decode_tokens`` generated tokens each (module docstring).

    ``source``: :class:`StageCosts`, an :class:`~pipeplan.analysis.simulate.ExecModel`, a
    :class:`~pipeplan.dialects.cplan.PlanOp`, or a package directory (its ``predicted.timeline.json``:
    the plan's resolved costs, and the runtime terms of the calibration its manifest names). ``evidence``
    names the evidence the costs came from (default: the package manifest's evidence identity, or the
    costs' own). ``prefill_rows``: rows of a prefill frame (default: the package's prefill step, else 8 as
    ``pipeplan compile``). ``micro_batches``: most frames in flight (None: ``min(N, S)``, the runtime's
    M when it knows no costs, else it takes :func:`choose_micro_batches`; N: one frame per sequence). ``cores``: replaces the costs' core count.
    ``backend``: the runtime predicted for a package (``ray``: its calibration's relay chain, :func:`with_runtime_terms`).
    Raises ConcurrencyError, SimulationError, PackageError / TimelineError for an unreadable package.
    """
    costs = stage_costs(source, prefill_rows=prefill_rows, backend=backend)
    if evidence is not None:
        costs = dataclasses.replace(costs, evidence=evidence)
    if cores is not None:
        costs = dataclasses.replace(costs, cores=cores)
    m = default_micro_batches(n_sequences, costs.stages) if micro_batches is None else micro_batches
    if m == n_sequences and not costs.runtime_terms:
        tokens, busy = simulate_sequences(costs, n_sequences, prompt_tokens, decode_tokens, arrivals=arrivals)
    else:
        tokens, busy = simulate_frames(costs, n_sequences, prompt_tokens, decode_tokens, micro_batches=m,
                                       arrivals=arrivals)
    summ = throughput_summary(tokens, arrivals)
    mk = summ["makespan_s"]
    return ConcurrentPrediction(
        n_sequences, costs.stages, prompt_tokens, decode_tokens, summ["aggregate_tok_s"], summ["per_token_p50_s"],
        summ["per_token_p99_s"], summ["request_latency_s"], summ["ttft_s"], mk, summ["overall_tok_s"],
        tuple(b / mk if mk > 0 else 0.0 for b in busy), max(costs.decode_s),
        sum(costs.decode_s) + sum(costs.decode_hop_s), costs.evidence, tuple(tuple(ts) for ts in tokens), m)


def steady_state_tok_s(costs: StageCosts, n_sequences: int) -> float:
    """The closed form ``min(N / cycle, 1 / max(decode_s))`` of the decode rate (module docstring);
    ``inf`` for a zero-cost pipeline."""
    cycle = sum(costs.decode_s) + sum(costs.decode_hop_s)
    bott = max(costs.decode_s)
    a = n_sequences / cycle if cycle > 0 else math.inf
    return min(a, 1.0 / bott if bott > 0 else math.inf)


# --------------------------------------------------------------------------- costs from a plan
def _costs_from_durations(rows: Sequence[tuple[str, int, str, float]], prefill_rows: int,
                          evidence: str) -> StageCosts:
    """StageCosts from ``(step, stage, op, seconds)`` rows of one instance per step; a ``send`` goes to
    the hop into the next stage, the last stage's (the token-out) to stage 0's."""
    stages = 1 + max((r[1] for r in rows), default=-1)
    if stages < 1:
        raise ConcurrencyError("the plan has no command", code="invalid_request")
    work = {s: [0.0] * stages for s in ("prefill", "decode")}
    hops = {s: [0.0] * stages for s in ("prefill", "decode")}
    seen = set()
    for step, stage, op, secs in rows:
        if step not in work:
            continue
        seen.add(step)
        if op == "recv":
            hops[step][stage] += secs
        elif op == "send":
            hops[step][(stage + 1) % stages] += secs
        else:
            work[step][stage] += secs
    if "decode" not in seen:
        raise ConcurrencyError("the plan has no decode step", code="unknown_step", where="decode")
    if "prefill" not in seen:
        work["prefill"], hops["prefill"] = list(work["decode"]), list(hops["decode"])
    return StageCosts(tuple(work["decode"]), tuple(hops["decode"]), tuple(work["prefill"]), tuple(hops["prefill"]),
                      prefill_rows, evidence)


def costs_from_model(model: Any, *, prefill_rows: int = 8, evidence: str = "") -> StageCosts:
    """StageCosts of an :class:`~pipeplan.analysis.simulate.ExecModel` (its commands' durations: the
    plan's resolved costs, 0 s for a missing cost)."""
    rows = [(c.step, c.stage, c.op, c.duration) for c in model.commands]
    return _costs_from_durations(rows, prefill_rows, evidence)


def costs_from_bundle(doc: Mapping[str, Any], *, prefill_rows: int = 8, evidence: str = "") -> StageCosts:
    """StageCosts of a predicted TimelineBundle document (its first instance of each step)."""
    rows = [(e["step"], int(e["stage"]), e["op"], float(e["end_s"]) - float(e["start_s"]))
            for e in doc.get("events", []) if int(e.get("iteration", 0)) == 0]
    return _costs_from_durations(rows, prefill_rows, evidence)


@functools.lru_cache(maxsize=16)
def _prefill_rows_of(program: str, _mtime_ns: int) -> int:
    from pipeplan.dialects.parsing import FastParser
    from pipeplan.dialects.vmachine import StageOp, StepOp, Vmachine
    from xdsl.context import Context
    from xdsl.dialects.builtin import Builtin

    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Vmachine)
    module = FastParser(ctx, Path(program).read_text(), program).parse_module()
    stages = sorted((op for op in module.walk() if isinstance(op, StageOp)), key=lambda st: st.index.value.data)
    if not stages:
        return 1
    rows = [st.rows.value.data for st in stages[0].body.block.ops if isinstance(st, StepOp) and st.step_name == "prefill"]
    return rows[0] if rows else 1


def _package_prefill_rows(pkg: Path) -> int:
    """Rows of the package's prefill step (its ``program.mlir``, parsed once per file version)."""
    prog = (pkg / "program.mlir").resolve()
    return _prefill_rows_of(str(prog), prog.stat().st_mtime_ns)


def runtime_section(table: Mapping[str, Any], stages: int) -> dict[str, Any]:
    """The ``runtime`` section of a calibration table for ``stages`` stages (``{}`` when it has none):
    ``frame_rows`` / ``frame_rows_s`` (batched decode frame costs per stage) and ``loop`` (the runtime terms
    ``pipeplan calibrate`` fitted on the local pipeline)."""
    sec = table.get("runtime") if isinstance(table, Mapping) else None
    got = sec.get(str(stages)) if isinstance(sec, Mapping) else None
    return dict(got) if isinstance(got, Mapping) else {}


def with_runtime_terms(costs: StageCosts, evidence: str, backend: str = "local") -> StageCosts:
    """``costs`` with the runtime terms of the first ``measured:TABLE`` provider of ``evidence`` (a package's
    evidence identity) for its stage count: ``rows_s`` from ``frame_rows_s``, ``kv_pos`` / ``kv_row_s`` /
    ``kv_ref_pos`` from the same names, ``frame_s`` / ``orch_s`` /
    ``wake_s`` / ``cores`` / ``contention`` (0 when absent) from ``loop``, every stage's work times its ``work_scale``
    (1 when absent; :meth:`StageCosts.scaled`). Unchanged when the table is unreadable or has no such section (the
    costs then predict the pipeline without its runtime; ``evidence`` says which was used). ``backend="ray"``: the
    hops of the relay chain ``ray_loop`` (``pipeplan calibrate --backend ray``; :meth:`StageCosts.with_ray_loop`),
    the evidence naming it, or saying the table has none (the local pipeline's hops are then predicted); with the
    ``terms`` fitted on the Ray pipeline (``ray_loop.terms``) in place of the local ``loop``'s when present."""
    path = next((p[len("measured:"):] for p in evidence.split(",") if p.startswith("measured:")), None)
    if path is None:
        return _ray_terms(costs, {}, backend)
    try:
        table = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return _ray_terms(costs, {}, backend)
    sec = runtime_section(table, costs.stages)
    out = costs
    rows = sec.get("frame_rows_s")
    if (isinstance(rows, list) and len(rows) == costs.stages and all(isinstance(r, list) and r for r in rows)
            and list(sec.get("frame_rows", []))[:len(rows[0])] == list(BATCH_ROWS[:len(rows[0])])):
        try:
            cand = dataclasses.replace(out, rows_s=tuple(tuple(float(x) for x in r) for r in rows))
            cand.check()
            out = cand
        except (TypeError, ValueError, ConcurrencyError):
            pass
    if isinstance(sec.get("kv_pos"), list) and isinstance(sec.get("kv_row_s"), list):
        try:
            cand = dataclasses.replace(out, kv_pos=tuple(int(p) for p in sec["kv_pos"]),
                                       kv_row_s=tuple(tuple(float(x) for x in r) for r in sec["kv_row_s"]),
                                       kv_ref_pos=float(sec.get("kv_ref_pos", 0.0)))
            cand.check()
            out = cand
        except (TypeError, ValueError, ConcurrencyError):
            pass
    ray = sec.get("ray_loop") if backend == "ray" else None
    if isinstance(ray, Mapping) and isinstance(ray.get("terms"), Mapping):
        try:  # the loop fitted on Ray actors over the chain's hops replaces the local one
            cand = _loop_terms(out.with_ray_loop(ray), ray["terms"])
            return dataclasses.replace(cand, evidence=_ray_evidence(cand, ray, True))
        except (KeyError, TypeError, ValueError, ConcurrencyError):
            pass
    loop = sec.get("loop")
    if isinstance(loop, Mapping):
        try:
            out = _loop_terms(out, loop)
        except (KeyError, TypeError, ValueError, ConcurrencyError):
            pass
    return _ray_terms(out, sec, backend)


def _loop_terms(costs: StageCosts, loop: Mapping[str, Any]) -> StageCosts:
    """``costs`` with a fitted loop's terms (``work_scale``, ``frame_s``, ``orch_s``, ``wake_s``, ``cores``,
    ``contention``). Raises KeyError, TypeError, ValueError, ConcurrencyError for a malformed loop."""
    scale = float(loop.get("work_scale", 1.0))
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError("work_scale")
    cand = dataclasses.replace(costs.scaled(scale), frame_s=float(loop["frame_s"]), orch_s=float(loop["orch_s"]),
                               wake_s=float(loop["wake_s"]), cores=int(loop["cores"]),
                               contention=float(loop.get("contention", 0.0)))
    cand.check()
    return cand


def _ray_evidence(costs: StageCosts, loop: Mapping[str, Any], fitted: bool) -> str:
    mode = loop.get("transport")
    return (f"{costs.evidence} + Ray loop calibrated ({costs.stages} relays, {mode if isinstance(mode, str) else '?'} "
            f"transport: loop {float(loop['loop_s']) * 1e6:.0f} us, CPU per frame relay "
            f"{float(loop['relay_cpu_s']) * 1e6:.0f} us, driver {float(loop['driver_cpu_s']) * 1e6:.0f} us"
            f"{'; runtime terms fitted on Ray' if fitted else ''})")


def _ray_terms(costs: StageCosts, sec: Mapping[str, Any], backend: str) -> StageCosts:
    """``costs`` for ``backend``: unchanged unless ``ray``; for ``ray``, with the relay chain ``sec["ray_loop"]``
    (a calibration's runtime section) over the local loop's terms and an evidence naming it, or an evidence saying
    there is none, or that the one there is unusable (malformed figures)."""
    if backend != "ray":
        return costs
    loop = sec.get("ray_loop")
    if isinstance(loop, Mapping):
        try:
            out = costs.with_ray_loop(loop)
            out.check()
            return dataclasses.replace(out, evidence=_ray_evidence(costs, loop, False))
        except (KeyError, TypeError, ValueError, ConcurrencyError):
            return dataclasses.replace(costs, evidence=f"{costs.evidence} + the Ray loop calibrated for "
                                                       f"{costs.stages} stages is unusable (local hops; pipeplan "
                                                       f"calibrate --backend ray --force)")
    return dataclasses.replace(costs, evidence=f"{costs.evidence} + no Ray loop calibrated for {costs.stages} "
                                               f"stages (local hops; pipeplan calibrate --backend ray)")


def stage_costs(source: Any, *, prefill_rows: int | None = None, backend: str = "local") -> StageCosts:
    """StageCosts of ``source`` (see :func:`predict_concurrent`); a package's with the runtime terms of its
    calibration for ``backend`` (:func:`with_runtime_terms`). Raises ConcurrencyError(invalid_request)
    for anything else; TimelineError / PackageError for an unreadable package."""
    from pipeplan.analysis.simulate import ExecModel, build_model
    from pipeplan.dialects.cplan import PlanOp

    if isinstance(source, StageCosts):
        if prefill_rows is not None:
            source = dataclasses.replace(source, prefill_rows=prefill_rows)
        source.check()
        return source
    if isinstance(source, PlanOp):
        source = build_model(source)
    if isinstance(source, ExecModel):
        return costs_from_model(source, prefill_rows=prefill_rows or 8)
    if isinstance(source, str | Path) and Path(source).is_dir():
        from pipeplan.analysis.timeline import TimelineBundle

        pkg = Path(source)
        bundle = TimelineBundle.read(pkg / "predicted.timeline.json")
        try:
            manifest = json.loads((pkg / "manifest.json").read_text(encoding="utf-8"))
            ident = str(manifest.get("evidence", {}).get("identity", ""))
        except (OSError, ValueError):
            ident = ""
        rows = prefill_rows or _package_prefill_rows(pkg)
        costs = costs_from_bundle(bundle.to_json(), prefill_rows=rows, evidence=ident)
        return with_runtime_terms(costs, ident, backend)
    raise ConcurrencyError(f"cannot take stage costs from {type(source).__name__} {str(source)[:80]!r}: give "
                           f"StageCosts, an ExecModel, a cplan.plan op or a package directory", code="invalid_request")


# --------------------------------------------------------------------------- measurements
@dataclass(frozen=True)
class ThroughputMeasurement:
    """One measured row (``pipeplan-throughput/1``): ``n_sequences``, ``stages``, ``aggregate_tok_s``,
    ``p50_s``, ``p99_s`` (per-token latency), optional ``prompt_tokens``, ``decode_tokens``,
    ``request_latency_s``, ``backend``, ``micro_batches`` (frames in flight; absent: one frame per sequence)."""

    n_sequences: int
    stages: int
    aggregate_tok_s: float
    p50_s: float
    p99_s: float
    prompt_tokens: int | None = None
    decode_tokens: int | None = None
    request_latency_s: float | None = None
    backend: str = ""
    micro_batches: int | None = None


THROUGHPUT_BACKENDS = ("", "local", "inproc", "ray")
"""A measured row's ``backend`` (any case; ``""``: not said, predicted as local)."""


def read_throughput(path: str | Path) -> list[ThroughputMeasurement]:
    """The measured rows of a throughput document: ``{"format": "pipeplan-throughput/1", "rows": [row, ...]}``,
    a bare list of rows, or one row object (fields: :class:`ThroughputMeasurement`).

    Raises ConcurrencyError(bad_throughput) naming the file and the row/field that is missing or wrong (a
    ``backend`` not in :data:`THROUGHPUT_BACKENDS`);
    ConcurrencyError(file_not_found | bad_input_path | unreadable) for a path that is not a readable file.
    """
    from pipeplan.files.paths import check_input_file

    check_input_file(str(path), "throughput measurement", ConcurrencyError)
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ConcurrencyError(f"{path}: not a JSON document ({type(e).__name__}: {str(e)[:200]})",
                               code="bad_throughput", where=str(path)) from None
    if isinstance(doc, dict) and "rows" in doc:
        if doc.get("format", THROUGHPUT_FORMAT) != THROUGHPUT_FORMAT:
            raise ConcurrencyError(f"{path}: format {doc.get('format')!r} is not {THROUGHPUT_FORMAT}",
                                   code="bad_throughput", where=str(path))
        rows = doc["rows"]
    elif isinstance(doc, dict):
        rows = [doc]
    else:
        rows = doc
    if not isinstance(rows, list) or not rows:
        raise ConcurrencyError(f"{path}: no measured row", code="bad_throughput", where=str(path))
    out = []
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise ConcurrencyError(f"{path}: row {i} is not an object", code="bad_throughput", where=str(path))
        vals: dict[str, Any] = {}
        for name, kind in (("n_sequences", int), ("stages", int), ("aggregate_tok_s", float), ("p50_s", float),
                           ("p99_s", float), ("prompt_tokens", int), ("decode_tokens", int),
                           ("request_latency_s", float), ("micro_batches", int)):
            v = r.get(name)
            if v is None and name in ("prompt_tokens", "decode_tokens", "request_latency_s", "micro_batches"):
                continue
            num = v if isinstance(v, int | float) and not isinstance(v, bool) else None
            ok = num is not None and math.isfinite(num) and num >= 0
            if ok and kind is int:
                ok = float(num).is_integer() and num >= 1  # type: ignore[arg-type, operator]
            if not ok or num is None:
                raise ConcurrencyError(f"{path}: row {i}: {name} = {v!r} is not a finite "
                                       f"{'integer >= 1' if kind is int else 'number >= 0'}",
                                       code="bad_throughput", where=name)
            vals[name] = kind(num)
        backend = r.get("backend", "")
        if not isinstance(backend, str) or backend.strip().lower() not in THROUGHPUT_BACKENDS:
            raise ConcurrencyError(f"{path}: row {i}: backend = {backend!r} is not one of "
                                   f"{', '.join(repr(b) for b in THROUGHPUT_BACKENDS)}", code="bad_throughput",
                                   where="backend")
        out.append(ThroughputMeasurement(**vals, backend=backend.strip().lower()))
    return out


__all__ = [
    "THROUGHPUT_FORMAT", "ConcurrencyError", "ConcurrentPrediction", "StageCosts", "ThroughputMeasurement",
    "BATCH_ROWS", "CHOICE_DECODE_TOKENS", "MicroBatchChoice", "best_micro_batches", "choose_micro_batches",
    "costs_from_bundle", "costs_from_model", "default_micro_batches", "predict_concurrent",
    "read_throughput", "runtime_section", "simulate_frames", "simulate_sequences", "with_runtime_terms",
    "stage_costs", "steady_state_tok_s", "throughput_summary",
]
