"""The OpenAI-compatible HTTP API (Starlette) over a :class:`~pipeplan.serve.scheduler.Scheduler`.

Routes:

* ``POST /v1/completions``: ``prompt`` (a string, a list of one string, or a list of token ids), BOS
  prepended to text as ``pipeplan run`` does;
* ``POST /v1/chat/completions``: ``messages`` rendered with the GGUF's ``tokenizer.chat_template``
  (:mod:`pipeplan.serve.chat`), then tokenized with special pieces (BOS added unless the text starts with it);
  a GGUF without a template is a 400 (``chat_template_missing``);
* ``GET /v1/models`` (and ``/v1/models/{id}``): the one model, named after the GGUF file or ``--alias``;
* ``GET /health``: 200 ``{"status": "ok", "running", "slots", "queued", "queue_size"}`` (``slots``: requests run
  at once, ``--parallel``), 503 after a stage fault
  (``"status": "error"`` with the fault) or while shutting down.

Request fields: ``model`` (optional; another id is a 400 ``model_not_found``), ``max_tokens`` (chat also
``max_completion_tokens``; default 16 for completions and the rest of the context for chat, capped there),
``temperature`` (default 0: greedy), ``top_p``, ``top_k``, ``seed`` (default: a fresh random one per request),
``stream``, ``stream_options.include_usage``, ``return_token_ids`` (adds ``prompt_token_ids`` and per-choice
``token_ids``, as vLLM does). ``n`` > 1,
``best_of`` > 1, ``stop`` strings, ``logprobs``, ``echo``, ``suffix``, non-zero penalties, ``logit_bias`` and
``tools`` are a 400 ``unsupported_parameter``; other fields are ignored.

Bodies above ``max_body_bytes`` are a 413 (``request_too_large``) before they are read whole; rendering
(time-limited: ``chat_template_timeout_s``) and tokenizing a prompt run on a daemon thread, so the event
loop (``/health``, other requests, a SIGTERM's stop) is never blocked by them.

Responses follow OpenAI's ``text_completion`` / ``chat.completion`` objects with ``usage`` and
``finish_reason`` (``stop`` at an end-of-generation token, ``length`` at ``max_tokens``). ``stream: true``
sends server-sent events (``data: {chunk}`` ... ``data: [DONE]``); the chunks' text concatenates to the
non-streamed text. A request waits for its turn before the response starts, so errors before its first
token (queue full 429, shutting down 503, a stage fault 500) are HTTP statuses with the JSON body
``{"error": {"message", "type", "param", "code"}}``; an error after it is one ``data: {"error": ...}``
event, then ``data: [DONE]``. A client that disconnects cancels its request (waiting: dropped; running:
ended after the current token).
"""

from __future__ import annotations

import asyncio
import json
import math
import secrets
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from pipeplan.errors import PipeplanError, StageFault
from pipeplan.runtime.limits import check_prompt
from pipeplan.serve.chat import DEFAULT_RENDER_TIMEOUT_S, ChatTemplate, ChatTemplateError
from pipeplan.serve.scheduler import (
    FINISH_CANCELLED,
    GenerationRequest,
    SamplingParams,
    Scheduler,
    ServeError,
    TokenEvent,
    Unavailable,
)
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
"""Largest request body (``pipeplan serve --max-body-bytes``); a larger one is a 413."""
DEFAULT_COMPLETION_MAX_TOKENS = 16
"""``max_tokens`` of ``/v1/completions`` when the request gives none (OpenAI's default)."""

UNSUPPORTED = {"n": 1, "best_of": 1, "stop": None, "logprobs": None, "top_logprobs": None, "echo": False,
               "suffix": None, "presence_penalty": 0, "frequency_penalty": 0, "logit_bias": None, "tools": None,
               "tool_choice": None, "response_format": None}
"""Fields this server does not implement -> the value it accepts for them besides "not set" (absent, null,
false, an empty list/object/string). Another value is a 400 ``unsupported_parameter``."""


@dataclass
class ServedModel:
    """What the server serves: the model id (``/v1/models``), its tokenizer, chat template (None: the GGUF
    has none) and context (``max_seq_len`` positions, prompt + generated); the most bytes of a request body
    and the most seconds of one chat template render."""

    model_id: str
    tokenizer: Any
    chat_template: ChatTemplate | None
    max_seq_len: int
    created: int = 0
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    chat_template_timeout_s: float = DEFAULT_RENDER_TIMEOUT_S


def _cut_short() -> Unavailable:
    return Unavailable("the server is shutting down: the generation was cut short")


class _ClientGone(Exception):
    """The client disconnected while its request waited or ran (its request was cancelled)."""


# --------------------------------------------------------------------------- errors
def error_body(e: PipeplanError) -> tuple[int, dict[str, Any]]:
    """HTTP status and OpenAI-style body of ``e``: ServeError carries its own; a StageFault is 500
    ``server_error`` with its ``stage_fault:<kind>`` code; another PipeplanError 400."""
    if isinstance(e, ServeError):
        status, etype = e.status, e.type
    elif isinstance(e, StageFault):
        status, etype = 500, "server_error"
    else:
        status, etype = 400, "invalid_request_error"
    return status, {"error": {"message": e.message, "type": etype, "param": e.where, "code": e.code}}


def error_response(e: PipeplanError) -> JSONResponse:
    status, body = error_body(e)
    headers = {"Retry-After": "1"} if status in (429, 503) else None
    return JSONResponse(body, status_code=status, headers=headers)


# --------------------------------------------------------------------------- request fields
def _bad(field: str, what: str) -> ServeError:
    return ServeError(f"'{field}' {what}", code="invalid_value", where=field)


def _get_int(doc: dict, name: str, default: int | None, lo: int, hi: int | None = None) -> int | None:
    v = doc.get(name)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        raise _bad(name, f"must be an integer, got {json.dumps(v)}")
    if v < lo or (hi is not None and v > hi):
        raise _bad(name, f"must be >= {lo}" + (f" and <= {hi}" if hi is not None else "") + f", got {v}")
    return v


def _get_number(doc: dict, name: str, default: float) -> float:
    v = doc.get(name)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise _bad(name, f"must be a finite number, got {json.dumps(v)}")
    return float(v)


def _get_bool(doc: dict, name: str) -> bool:
    v = doc.get(name)
    if v is None:
        return False
    if not isinstance(v, bool):
        raise _bad(name, f"must be true or false, got {json.dumps(v)}")
    return v


def _check_unsupported(doc: dict) -> None:
    for name, ok in UNSUPPORTED.items():
        v = doc.get(name)
        if v is None or v is False or v in ([], {}, "") or (v == ok and type(v) is not bool):
            continue
        raise ServeError(f"'{name}' = {json.dumps(v)} is not supported by pipeplan serve yet", code="unsupported_parameter",
                         where=name)


def _sampling(doc: dict) -> SamplingParams:
    from pipeplan.runtime.sampling import SEED_MAX, TOP_K_MAX, Sampler, SamplingError

    temperature = _get_number(doc, "temperature", 0.0)
    top_p = _get_number(doc, "top_p", 1.0)
    top_k = _get_int(doc, "top_k", 0, 0, TOP_K_MAX)
    seed = _get_int(doc, "seed", None, 0, SEED_MAX)
    if seed is None:  # as llama.cpp's server: a request without a seed samples with a fresh one
        seed = secrets.randbits(32)
    assert top_k is not None
    try:
        Sampler(temperature, top_k, top_p, seed)
    except SamplingError as e:
        raise ServeError(e.message, code="invalid_value", where=e.where) from None
    return SamplingParams(temperature, top_k, top_p, seed)


def _too_large(limit: int) -> ServeError:
    return ServeError(f"the request body is larger than {limit} bytes (--max-body-bytes)", code="request_too_large",
                      status=413)


async def _read_body(request: Request, limit: int) -> bytes:
    """The request body; ServeError(request_too_large, 413) as soon as it is known to exceed ``limit`` bytes
    (its Content-Length, or the bytes received so far)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def _off_loop(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` on a daemon thread (not the default executor, which an exiting loop would wait for);
    its result or exception, awaited without blocking the event loop."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[Any] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if fut.done():
            return
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)

    def work() -> None:
        try:
            out, ok = fn(*args), True
        except Exception as e:
            out, ok = e, False
        try:
            loop.call_soon_threadsafe(settle, ok, out)
        except RuntimeError:  # the loop has closed: nobody waits for this any more
            pass

    threading.Thread(target=work, name="pipeplan-serve-prompt", daemon=True).start()
    return await fut


async def _json_object(request: Request, limit: int) -> dict:
    raw = await _read_body(request, limit)
    try:
        doc = json.loads(raw)
    except UnicodeDecodeError as e:
        raise ServeError(f"the request body is not UTF-8 text: {e.reason} at byte {e.start}", code="invalid_json") from None
    except ValueError as e:
        raise ServeError(f"the request body is not valid JSON: {e}", code="invalid_json") from None
    if not isinstance(doc, dict):
        raise ServeError(f"the request body must be a JSON object, got {type(doc).__name__}", code="invalid_json")
    return doc


# --------------------------------------------------------------------------- the app
def make_app(model: ServedModel, scheduler: Scheduler, *, on_shutdown: Callable[[], None] | None = None) -> Starlette:
    """The Starlette app serving ``model`` through ``scheduler``. Its lifespan starts the scheduler and, on
    shutdown, closes it (and the pipeline: every stage stopped); ``on_shutdown`` runs after that."""
    tok = model.tokenizer
    created = model.created or int(time.time())
    stop_ids = frozenset(getattr(tok, "eog_ids", ())) | ({tok.eos_id} if tok.eos_id is not None else frozenset())
    # every token covers at most this many bytes of the text, so a text of more than max_seq_len times it
    # cannot fit the context: it is rejected without tokenizing it
    max_piece_bytes = max((len(p.encode("utf-8", "surrogatepass")) for p in tok.tokens), default=1)

    def check_text_fits(text: str, where: str) -> None:
        n = len(text.encode("utf-8", "surrogatepass"))
        if n > model.max_seq_len * max_piece_bytes:
            raise ServeError(f"the prompt is {n} bytes, at least {-(-n // max_piece_bytes)} tokens: longer than the "
                             f"context of {model.max_seq_len} positions (--max-seq-len)",
                             code="context_length_exceeded", where=where)

    def check_model(doc: dict) -> None:
        name = doc.get("model")
        if name is None:
            return
        if name != model.model_id:
            raise ServeError(f"model {json.dumps(name)} is not served here; this server serves {json.dumps(model.model_id)} "
                             f"(GET /v1/models)", code="model_not_found", where="model")

    def max_tokens_for(doc: dict, n_prompt: int, default: int | None, *names: str) -> int:
        room = model.max_seq_len - n_prompt + 1
        if room < 1:
            raise ServeError(f"the prompt is {n_prompt} tokens, longer than the context of {model.max_seq_len} "
                             f"positions (--max-seq-len)", code="context_length_exceeded", where="prompt")
        for name in names:
            v = _get_int(doc, name, None, 1)
            if v is not None:
                if v > room:
                    raise ServeError(f"prompt of {n_prompt} tokens + {name} {v} does not fit the context of "
                                     f"{model.max_seq_len} positions (at most {room} tokens can follow this prompt)",
                                     code="context_length_exceeded", where=name)
                return v
        return room if default is None else min(default, room)

    def completion_prompt(doc: dict) -> list[int]:
        if "prompt" not in doc:
            raise ServeError("'prompt' is required", code="missing_field", where="prompt")
        p = doc["prompt"]
        if isinstance(p, list) and len(p) == 1 and isinstance(p[0], str):
            p = p[0]
        if isinstance(p, str):
            check_text_fits(check_prompt(p, "prompt"), "prompt")
            ids = tok.encode(p, add_bos=True)
        elif isinstance(p, list) and p and all(isinstance(i, int) and not isinstance(i, bool) for i in p):
            bad = [i for i in p if not 0 <= i < tok.n_vocab]
            if bad:
                raise _bad("prompt", f"holds token id {bad[0]} outside the vocabulary [0, {tok.n_vocab})")
            ids = list(p)
        else:
            raise _bad("prompt", "must be a string, a list of one string, or a non-empty list of token ids "
                                 "(several prompts in one request are not supported)")
        if not ids:
            raise _bad("prompt", "is empty (and the vocabulary adds no BOS)")
        return ids

    def chat_prompt(doc: dict) -> list[int]:
        msgs = doc.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise ServeError("'messages' is required: a non-empty list of {role, content} objects",
                             code="missing_field" if msgs is None else "invalid_value", where="messages")
        out = []
        for i, m in enumerate(msgs):
            where = f"messages[{i}]"
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                raise _bad(where, "must be an object with a string 'role'")
            content = m.get("content")
            if isinstance(content, list):
                parts = []
                for j, part in enumerate(content):
                    if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                        raise ServeError(f"'{where}.content[{j}]': only text parts ({{\"type\": \"text\", \"text\": ...}}) "
                                         f"are supported", code="unsupported_parameter", where=f"{where}.content")
                    parts.append(part["text"])
                content = "".join(parts)
            elif content is not None and not isinstance(content, str):
                raise _bad(f"{where}.content", "must be a string, a list of text parts, or null")
            if content is not None:
                check_prompt(content, f"{where}.content")
            msg = {"role": m["role"], "content": content if content is not None else ""}
            if isinstance(m.get("name"), str):
                msg["name"] = m["name"]
            out.append(msg)
        if model.chat_template is None:
            raise ServeError(f"the model {model.model_id} has no chat template (GGUF key tokenizer.chat_template); "
                             f"use /v1/completions with a prompt", code="chat_template_missing", where="messages")
        try:
            text = model.chat_template.render(out, add_generation_prompt=True, timeout_s=model.chat_template_timeout_s,
                                              should_stop=lambda: scheduler.closing)
        except ChatTemplateError as e:
            if scheduler.closing:  # SIGTERM while a slow template renders: stop now, not after its time limit
                raise Unavailable("the server is shutting down") from None
            raise ServeError(e.message, code=e.code, where=e.where) from None
        check_text_fits(text, "messages")
        bos = model.chat_template.bos_token
        return tok.encode(text, add_bos=not (bos and text.startswith(bos)), special=True)

    async def disconnected(request: Request) -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    async def until_ready(request: Request, req: GenerationRequest, what: Any) -> Any:
        """Await ``what`` unless the client goes away first (then ``req`` is cancelled: _ClientGone)."""
        watch = asyncio.ensure_future(disconnected(request))
        task = asyncio.ensure_future(what)
        try:
            await asyncio.wait({watch, task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
        if task.done():
            return task.result()
        req.cancel()
        task.cancel()
        raise _ClientGone

    async def handle(request: Request, chat: bool) -> Response:
        try:
            doc = await _json_object(request, model.max_body_bytes)
            check_model(doc)
            _check_unsupported(doc)
            sampling = _sampling(doc)
            stream = _get_bool(doc, "stream")
            opts = doc.get("stream_options")
            if opts is not None and not isinstance(opts, dict):
                raise _bad("stream_options", "must be an object")
            include_usage = stream and _get_bool(opts or {}, "include_usage")
            with_ids = _get_bool(doc, "return_token_ids")
            prompt_ids = await _off_loop(chat_prompt if chat else completion_prompt, doc)
            if chat:
                max_tokens = max_tokens_for(doc, len(prompt_ids), None, "max_completion_tokens", "max_tokens")
            else:
                max_tokens = max_tokens_for(doc, len(prompt_ids), DEFAULT_COMPLETION_MAX_TOKENS, "max_tokens")
            req = GenerationRequest(prompt_ids, max_tokens, sampling, stop_ids=stop_ids)
            scheduler.submit(req)
        except PipeplanError as e:
            return error_response(e)
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        try:
            first = await until_ready(request, req, req.next_event())
        except _ClientGone:
            return Response(status_code=499)
        if first is None and req.error is not None:
            return error_response(req.error)
        if stream:
            return StreamingResponse(_sse(req, first, chat, rid, include_usage, with_ids),
                                     media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        try:
            if first is not None:
                await until_ready(request, req, req.wait())
        except _ClientGone:
            return Response(status_code=499)
        if req.error is not None:
            return error_response(req.error)
        if req.finish_reason == FINISH_CANCELLED:  # the server began shutting down while it ran
            return error_response(_cut_short())
        return JSONResponse(_full(req, chat, rid, with_ids))

    def usage(req: GenerationRequest) -> dict[str, int]:
        n_p, n_c = len(req.prompt_ids), len(req.token_ids)
        return {"prompt_tokens": n_p, "completion_tokens": n_c, "total_tokens": n_p + n_c}

    def _full(req: GenerationRequest, chat: bool, rid: str, with_ids: bool) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": req.finish_reason}
        if chat:
            choice["message"] = {"role": "assistant", "content": req.text}
        else:
            choice["text"] = req.text
        if with_ids:
            choice["token_ids"] = list(req.token_ids)
        doc = {"id": rid, "object": "chat.completion" if chat else "text_completion", "created": int(time.time()),
               "model": model.model_id, "choices": [choice], "usage": usage(req)}
        if with_ids:
            doc["prompt_token_ids"] = list(req.prompt_ids)
        return doc

    async def _sse(req: GenerationRequest, first: TokenEvent | None, chat: bool, rid: str, include_usage: bool,
                   with_ids: bool) -> AsyncIterator[str]:
        obj = "chat.completion.chunk" if chat else "text_completion"
        now = int(time.time())

        def chunk(text: str | None, finish: str | None = None, ids: list[int] | None = None,
                  role: bool = False) -> str:
            choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": finish}
            if chat:
                delta: dict[str, Any] = {"role": "assistant"} if role else {}
                if text is not None:
                    delta["content"] = text
                choice["delta"] = delta
            else:
                choice["text"] = text or ""
            if with_ids and ids is not None:
                choice["token_ids"] = ids
            doc: dict[str, Any] = {"id": rid, "object": obj, "created": now, "model": model.model_id,
                                   "choices": [choice]}
            if include_usage:
                doc["usage"] = None
            return f"data: {json.dumps(doc, ensure_ascii=False)}\n\n"

        streamed = ""
        try:
            if chat:
                yield chunk("", role=True)
            ev = first
            while ev is not None:
                if ev.piece or with_ids:
                    streamed += ev.piece
                    yield chunk(ev.piece, ids=[ev.token_id])
                ev = await req.next_event()
            if req.error is not None or req.finish_reason == FINISH_CANCELLED:
                _, body = error_body(req.error if req.error is not None else _cut_short())
                yield f"data: {json.dumps(body)}\n\n"
            else:
                # the replacement character of a trailing incomplete UTF-8 sequence: in the text, in no piece
                rest = req.text[len(streamed):] if req.text.startswith(streamed) else ""
                yield chunk(rest if rest or not chat else None, finish=req.finish_reason,
                            ids=[] if with_ids else None)
                if include_usage:
                    doc = {"id": rid, "object": obj, "created": now, "model": model.model_id, "choices": [],
                           "usage": usage(req)}
                    yield f"data: {json.dumps(doc)}\n\n"
            yield "data: [DONE]\n\n"
        finally:
            req.cancel()  # client gone mid-stream (the task is cancelled here): end the sequence; no-op once ended

    async def completions(request: Request) -> Response:
        return await handle(request, chat=False)

    async def chat_completions(request: Request) -> Response:
        return await handle(request, chat=True)

    def model_card() -> dict[str, Any]:
        return {"id": model.model_id, "object": "model", "created": created, "owned_by": "pipeplan",
                "max_model_len": model.max_seq_len}

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [model_card()]})

    async def model_info(request: Request) -> Response:
        name = request.path_params["name"]
        if name != model.model_id:
            return JSONResponse({"error": {"message": f"model {json.dumps(name)} is not served here", "type":
                                           "invalid_request_error", "param": "model", "code": "model_not_found"}},
                                status_code=404)
        return JSONResponse(model_card())

    async def health(request: Request) -> Response:
        doc = scheduler.health()
        return JSONResponse(doc, status_code=200 if doc["status"] == "ok" else 503)

    async def internal_error(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": {"message": f"internal server error: {type(exc).__name__}: {exc}",
                                       "type": "server_error", "param": None, "code": "internal_error"}},
                            status_code=500)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return JSONResponse({"error": {"message": f"{request.method} {request.url.path}: {exc.detail}",
                                       "type": "invalid_request_error", "param": None, "code": code}},
                            status_code=exc.status_code, headers=exc.headers)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await scheduler.start()
        try:
            yield
        finally:
            await scheduler.aclose()
            if on_shutdown is not None:
                on_shutdown()

    routes = [Route("/v1/completions", completions, methods=["POST"]),
              Route("/v1/chat/completions", chat_completions, methods=["POST"]),
              Route("/v1/models", models, methods=["GET"]),
              Route("/v1/models/{name:path}", model_info, methods=["GET"]),
              Route("/health", health, methods=["GET"])]
    return Starlette(routes=routes, lifespan=lifespan,
                     exception_handlers={HTTPException: http_error, Exception: internal_error})
