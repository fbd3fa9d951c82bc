"""Requests and the scheduler that feeds them to one started pipeline (issue 14 item 2).

A :class:`GenerationRequest` is one sequence: its prompt ids, ``max_tokens``, its own
:class:`SamplingParams` and stop ids, and an async stream of :class:`TokenEvent` (token id and the text
it completes) that ends with a finish reason or an error. The :class:`Scheduler` owns the
:class:`~pipeplan.runtime.orchestrator.Pipeline`: an asyncio task takes requests from a bounded FIFO
queue and runs up to ``parallel`` of them at once (the pipeline's ``parallel``: its KV-cache slots), each in a
worker thread that calls :meth:`~pipeplan.runtime.orchestrator.Pipeline.generate_ids` (with ``parallel`` 1 the
pipeline is only ever driven from that one thread; above 1 the calls are sequences of the pipeline's loop
thread, which is thread-safe); tokens cross back to the event loop with ``call_soon_threadsafe``. Cancelling a request
(client gone, shutdown) ends its sequence after the current token through ``generate_ids``'
``should_stop`` hook, which frees its slot: the next queued request runs. A request that fails inside the pipeline (a stage
fault, or any other failure: the pipeline is then stopped) marks the scheduler faulted: that request and every later one fail
and :meth:`Scheduler.health` reports the fault.

Capacity: ``parallel`` running requests plus at most ``queue_size`` waiting ones; beyond that
:meth:`Scheduler.submit` raises :class:`QueueFull` (HTTP 429).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
from collections.abc import AsyncIterator, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pipeplan.errors import PipeplanError, StageFault

FINISH_STOP = "stop"
"""Finish reason: an end-of-generation token (EOS, or another of the vocabulary's EOG ids) was sampled."""
FINISH_LENGTH = "length"
"""Finish reason: ``max_tokens`` were generated."""
FINISH_CANCELLED = "cancelled"
"""Finish reason (never sent to a client): the request was cancelled (client gone, server shutting down)."""


class ServeError(PipeplanError):
    """A request the server refuses, as an OpenAI-style error: ``status`` (HTTP), ``type`` (OpenAI error
    type), ``code`` and ``where`` (the request field it concerns, OpenAI's ``param``)."""

    code = "invalid_request"
    status = 400
    type = "invalid_request_error"

    def __init__(self, message: str, *, code: str | None = None, where: str | None = None,
                 status: int | None = None, type: str | None = None):
        super().__init__(message, code=code, where=where)
        if status is not None:
            self.status = status
        if type is not None:
            self.type = type


class QueueFull(ServeError):
    """The queue of waiting requests is full (HTTP 429, code ``queue_full``)."""

    code = "queue_full"
    status = 429
    type = "rate_limit_error"


class Unavailable(ServeError):
    """The server cannot take or finish requests (HTTP 503): shutting down (``server_shutting_down``) or
    the pipeline is stopped after a stage fault (``pipeline_down``)."""

    code = "server_shutting_down"
    status = 503
    type = "server_error"


@dataclass(frozen=True)
class SamplingParams:
    """One request's sampler settings (the last stage's :class:`~pipeplan.runtime.sampling.Sampler`;
    temperature 0 is greedy)."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None


@dataclass(frozen=True)
class TokenEvent:
    """A generated token: its id and the text it completes (``""`` inside a multi-byte character)."""

    token_id: int
    piece: str


_END = object()


class GenerationRequest:
    """One sequence to generate (made on the event loop's thread).

    Attributes (set when it ends): ``token_ids`` (generated ids, stop token excluded), ``text`` (their
    decoding), ``finish_reason`` (:data:`FINISH_STOP`, :data:`FINISH_LENGTH` or :data:`FINISH_CANCELLED`;
    None while running or after an error), ``error`` (the PipeplanError that ended it, or None),
    ``timings`` (as :class:`~pipeplan.runtime.orchestrator.RunResult`'s).
    """

    _ids = itertools.count(1)

    def __init__(self, prompt_ids: Sequence[int], max_tokens: int, sampling: SamplingParams = SamplingParams(),
                 *, stop_ids: Iterable[int] = ()):
        self.id = next(self._ids)
        self.prompt_ids = [int(i) for i in prompt_ids]
        self.max_tokens = int(max_tokens)
        self.sampling = sampling
        self.stop_ids = frozenset(int(i) for i in stop_ids)
        self.token_ids: list[int] = []
        self.text = ""
        self.finish_reason: str | None = None
        self.error: PipeplanError | None = None
        self.timings: dict[str, float] = {}
        self.cancelled = False  # a plain attribute: set from a signal handler or the loop, read by the worker
        self.done = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._events: asyncio.Queue[Any] = asyncio.Queue()

    def cancel(self) -> None:
        """Stop this request: if waiting it is dropped, if running its sequence ends after the current token.
        Safe from any thread and from a signal handler; no-op once it ended."""
        self.cancelled = True

    def _post(self, item: Any) -> None:
        """Hand ``item`` to the event loop (from any thread); dropped if the loop is gone."""
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(self._events.put_nowait, item)
        except RuntimeError:  # the loop was closed: nobody is listening any more
            pass

    def _finish(self, reason: str | None = None, error: PipeplanError | None = None) -> None:
        self.finish_reason, self.error = reason, error
        self.done = True
        self._post(_END)

    async def next_event(self) -> TokenEvent | None:
        """The next token, or None once the request ended (then see ``finish_reason`` / ``error``)."""
        item = await self._events.get()
        if item is _END:
            self._events.put_nowait(_END)  # later calls see the end too
            return None
        return item

    async def events(self) -> AsyncIterator[TokenEvent]:
        """Every token as it is generated, until the request ends."""
        while (ev := await self.next_event()) is not None:
            yield ev

    async def wait(self) -> None:
        """Until the request ended (its tokens are in ``token_ids``)."""
        async for _ in self.events():
            pass


class Scheduler:
    """Runs up to ``pipeline.parallel`` requests at once, admitted in arrival order, through ``pipeline`` (a
    started :class:`~pipeplan.runtime.orchestrator.Pipeline`).

    Args:
        pipeline: the started pipeline; the scheduler drives it from its worker threads and closes it in
            :meth:`aclose`.
        tokenizer: the model's :class:`~pipeplan.runtime.tokenizer.SPMTokenizer` (EOS id, text pieces).
        queue_size: most requests waiting while ``parallel`` run (>= 0).
        history: how many finished requests :attr:`finished` keeps.
    Raises: ValueError for ``queue_size < 0``.
    """

    def __init__(self, pipeline: Any, tokenizer: Any, *, queue_size: int = 8, history: int = 64):
        if queue_size < 0:
            raise ValueError(f"queue_size must be >= 0, got {queue_size}")
        self.pipeline = pipeline
        self.tokenizer = tokenizer
        self.queue_size = queue_size
        self.parallel = max(1, int(getattr(pipeline, "parallel", 1)))
        """Requests running at once (the pipeline's KV-cache slots)."""
        self.running_set: list[GenerationRequest] = []
        """The running requests, oldest first."""
        self.fault: PipeplanError | None = None
        self.closing = False
        self.finished: collections.deque[GenerationRequest] = collections.deque(maxlen=history)
        """The most recently ended requests, oldest first."""
        self._worker = ThreadPoolExecutor(self.parallel, thread_name_prefix="pipeplan-pipeline")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiting: collections.deque[GenerationRequest] = collections.deque()
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def running(self) -> GenerationRequest | None:
        """The oldest running request, or None."""
        r = self.running_set
        return r[0] if r else None

    # ------------------------------------------------------------------ lifecycle (event loop)
    async def start(self) -> None:
        """Start the scheduling task on the running event loop."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._task = self._loop.create_task(self._run(), name="pipeplan-scheduler")

    def begin_shutdown(self) -> None:
        """Stop taking requests, cancel the running ones (each ends after its current token) and fail the waiting
        ones with :class:`Unavailable`. Idempotent; safe from a signal handler and from any thread."""
        if self.closing:
            return
        self.closing = True
        for running in list(self.running_set):
            running.cancel()
        if self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._drain)
            except RuntimeError:  # loop already closed
                pass

    def _drain(self) -> None:
        assert self._wake is not None
        while self._waiting:
            self._end(self._waiting.popleft(), error=Unavailable("the server is shutting down"))
        self._wake.set()

    async def aclose(self) -> None:
        """Shut down (:meth:`begin_shutdown`), wait for the running requests to end, then close the pipeline
        (every stage stopped, its shared memory released) in the worker thread. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self.begin_shutdown()
        if self._task is not None:
            await self._task
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._worker, self.pipeline.close)
        finally:
            self._worker.shutdown(wait=True)

    # ------------------------------------------------------------------ requests
    def submit(self, req: GenerationRequest) -> None:
        """Queue ``req`` (on the event loop's thread). Raises Unavailable (shutting down, or the pipeline is
        down after a stage fault) or QueueFull (``queue_size`` requests already waiting, beyond free slots)."""
        assert self._wake is not None and self._loop is not None, "Scheduler.start() was not awaited"
        if self.closing:
            raise Unavailable("the server is shutting down")
        if self.fault is not None:
            raise Unavailable(f"the pipeline is stopped after a stage fault: {self.fault.one_line()}",
                              code="pipeline_down")
        waiting = self.queued
        free = self.parallel - len(self.running_set)
        if waiting >= self.queue_size + free:
            raise QueueFull(f"{waiting} request(s) waiting and {len(self.running_set)} running: the queue holds "
                            f"{self.queue_size} (--queue); retry later", where="queue")
        req._loop = self._loop
        self._waiting.append(req)
        self._wake.set()

    @property
    def queued(self) -> int:
        """Requests waiting for the pipeline (cancelled ones, dropped when their turn comes, not counted)."""
        return sum(not r.cancelled for r in self._waiting)

    def health(self) -> dict[str, Any]:
        """``status`` (``ok``, ``error`` after a stage fault, ``shutting_down``), ``running`` (requests
        running), ``slots`` (most running at once: ``parallel``), ``queued``, ``queue_size``, and ``error``
        ({message, code}) after a fault."""
        status = "error" if self.fault is not None else "shutting_down" if self.closing else "ok"
        doc: dict[str, Any] = {"status": status, "running": len(self.running_set), "slots": self.parallel,
                               "queued": self.queued,
                               "queue_size": self.queue_size}
        if self.fault is not None:
            doc["error"] = {"message": self.fault.message, "code": self.fault.code}
        return doc

    def _end(self, req: GenerationRequest, reason: str | None = None, error: PipeplanError | None = None) -> None:
        req._finish(reason, error)
        self.finished.append(req)

    async def _run(self) -> None:
        assert self._wake is not None and self._loop is not None
        tasks: set[asyncio.Task[None]] = set()
        while True:
            while not self._waiting or len(self.running_set) >= self.parallel:
                if self.closing and not self._waiting and not self.running_set:
                    return
                self._wake.clear()
                await self._wake.wait()
            req = self._waiting.popleft()
            if req.cancelled:
                self._end(req, FINISH_CANCELLED)
                continue
            if self.closing:
                self._end(req, error=Unavailable("the server is shutting down"))
                continue
            if self.fault is not None:
                self._end(req, error=Unavailable(f"the pipeline is stopped after a stage fault: "
                                                 f"{self.fault.one_line()}", code="pipeline_down"))
                continue
            self.running_set.append(req)
            task = self._loop.create_task(self._run_one(req), name=f"pipeplan-request-{req.id}")
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    async def _run_one(self, req: GenerationRequest) -> None:
        assert self._wake is not None and self._loop is not None
        try:
            await self._loop.run_in_executor(self._worker, self._generate, req)
        finally:
            self.running_set.remove(req)
            self._wake.set()

    # ------------------------------------------------------------------ the worker thread
    def _generate(self, req: GenerationRequest) -> None:
        """Run ``req`` through the pipeline (worker thread). A RunRequestError leaves the pipeline running; any
        other failure has stopped it (``Pipeline.generate_ids``) and faults the scheduler."""
        from pipeplan.runtime.orchestrator import RunRequestError

        decoder = self.tokenizer.stream()
        hit_stop = False

        def on_token(tok: int) -> None:
            nonlocal hit_stop
            if tok in req.stop_ids:
                hit_stop = True
                return
            req.token_ids.append(tok)
            req._post(TokenEvent(tok, decoder.push(tok)))

        def should_stop() -> bool:
            return hit_stop or req.cancelled

        sp = req.sampling
        try:
            ids, timings = self.pipeline.generate_ids(
                req.prompt_ids, req.max_tokens, temperature=sp.temperature, top_k=sp.top_k, top_p=sp.top_p,
                seed=sp.seed, eos_id=self.tokenizer.eos_id, on_token=on_token, should_stop=should_stop)
        except RunRequestError as e:
            self._end(req, error=ServeError(e.message, code="invalid_request", where=e.where))
            return
        except StageFault as e:  # generate_ids has stopped the pipeline
            self.fault = e
            self._end(req, error=e)
            return
        except Exception as e:  # a failure in this process (e.g. decoding a token): the pipeline is stopped too
            what = e.one_line() if isinstance(e, PipeplanError) else f"{type(e).__name__}: {e}"
            self.fault = ServeError(f"the pipeline failed: {what}", code=getattr(e, "code", "internal_error"),
                                    status=500, type="server_error")
            self._end(req, error=self.fault)
            return
        req.text = self.tokenizer.decode(req.token_ids)
        req.timings = timings
        if hit_stop or len(ids) < req.max_tokens and not req.cancelled:
            reason = FINISH_STOP
        elif len(ids) >= req.max_tokens:
            reason = FINISH_LENGTH
        else:
            reason = FINISH_CANCELLED
        self._end(req, reason)
