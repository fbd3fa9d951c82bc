"""``pipeplan serve``: the OpenAI-compatible server over one started pipeline (issue 14 item 2).

Servers run on 127.0.0.1 with port 0: two module-scoped in-process servers (``prepared_server``, the CLI's
own start-up, with uvicorn on a thread) on stories260K, 3 stages local and 1 stage inproc, both with
``--queue 1``; the SIGTERM test and one start-up test run the real command as a subprocess. Requests use
httpx, and the ``openai`` client in one test. Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from pipeplan.tools.cli import build_parser
from pipeplan.tools.cli import main as cli_main
from pipeplan.tools.cmd_serve import prepared_server

from tests.conftest import REPO, STORIES

MAX_SEQ_LEN = 1024
START_S = 180.0  # bound on a server becoming ready (a cold package compile on a busy 2-core host included)
PROMPT = "Once upon a time"


class InProcessServer:
    """``pipeplan serve ARGV`` started in this process: the CLI's :func:`prepared_server`, uvicorn on a thread."""

    def __init__(self, argv: list[str]):
        args = build_parser().parse_args(["serve", *argv])
        self._cm = prepared_server(args)
        self.srv = self._cm.__enter__()
        self.stages, self.backend = args.stages, args.backend
        self.url = self.srv.url
        self.scheduler = self.srv.scheduler
        self.thread = threading.Thread(target=self.srv.server.serve_forever, args=(self.srv.sock,), daemon=True)
        self.thread.start()
        end = time.monotonic() + 30
        while not self.srv.server.started:
            assert self.thread.is_alive() and time.monotonic() < end, "uvicorn did not start"
            time.sleep(0.01)

    def stop(self) -> None:
        self.srv.server.stop()
        self.thread.join(60)
        self._cm.__exit__(None, None, None)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("serve-cache")


def _server_argv(cache: Path, stages: int, backend: str, *extra: str) -> list[str]:
    return [str(STORIES), "--stages", str(stages), "--backend", backend, "--host", "127.0.0.1", "--port", "0",
            "--max-seq-len", str(MAX_SEQ_LEN), "--queue", "1", "--cache-dir", str(cache), *extra]


@pytest.fixture(scope="module")
def server3(cache):
    s = InProcessServer(_server_argv(cache, 3, "local"))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def server1(cache):
    s = InProcessServer(_server_argv(cache, 1, "inproc"))
    yield s
    s.stop()


@pytest.fixture(params=["3-local", "1-inproc"])
def server(request):
    return request.getfixturevalue("server3" if request.param == "3-local" else "server1")


def _post(url: str, path: str, body, timeout: float = 120.0) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(url + path, content=content, headers={"Content-Type": "application/json"}, timeout=timeout)


def _sse(lines) -> tuple[list[dict], bool]:
    """The JSON events of an SSE line iterator, and whether ``data: [DONE]`` ended it."""
    events, done = [], False
    for line in lines:
        if not line.startswith("data: "):
            assert line == "", line
            continue
        data = line[len("data: "):]
        if data == "[DONE]":
            done = True
            break
        events.append(json.loads(data))
    return events, done


def _wait_health(url: str, pred, bound_s: float = 30.0) -> dict:
    end = time.monotonic() + bound_s
    while True:
        doc = httpx.get(url + "/health", timeout=10).json()
        if pred(doc) or time.monotonic() > end:
            return doc
        time.sleep(0.01)


# --------------------------------------------------------------------------- generation
def test_completions_greedy_equal_pipeplan_run(server, cache, capsys, expected_cases):
    """Issue 14 item 2: greedy ids and text of /v1/completions equal `pipeplan run`'s (same model, plan, prompt
    and max_tokens; 3 stages local and 1 stage inproc), which are llama.cpp's (shared/models/expected.json)."""
    rc = cli_main(["run", str(STORIES), "--prompt", PROMPT, "--stages", str(server.stages), "--backend",
                   server.backend, "--max-tokens",
                   "40", "--max-seq-len", str(MAX_SEQ_LEN), "--cache-dir", str(cache), "--json"])
    run = json.loads(capsys.readouterr().out)
    assert rc == 0
    r = _post(server.url, "/v1/completions", {"model": "stories260K.gguf", "prompt": PROMPT, "max_tokens": 40,
                                               "return_token_ids": True})
    assert r.status_code == 200, r.text
    doc = r.json()
    choice = doc["choices"][0]
    assert doc["object"] == "text_completion" and doc["model"] == "stories260K.gguf"
    assert doc["prompt_token_ids"] == run["prompt_ids"]
    assert choice["token_ids"] == run["token_ids"] == expected_cases[0]["greedy_ids"]
    assert choice["text"] == run["text"] and choice["finish_reason"] == "length"
    assert doc["usage"] == {"prompt_tokens": 5, "completion_tokens": 40, "total_tokens": 45}


def test_sampling_params_map_onto_the_run_sampler(server1, cache, capsys):
    """Issue 14 item 2: temperature/top_k/top_p/seed of a request are the last stage's sampler, as `pipeplan run`'s
    options: equal seeds give `pipeplan run`'s ids, another seed other ids."""
    argv = ["--temperature", "0.9", "--top-k", "40", "--top-p", "0.95", "--seed", "7"]
    rc = cli_main(["run", str(STORIES), "--prompt", PROMPT, "--stages", "1", "--backend", "inproc", "--max-tokens",
                   "24", "--max-seq-len", str(MAX_SEQ_LEN), "--cache-dir", str(cache), "--json", *argv])
    run = json.loads(capsys.readouterr().out)
    assert rc == 0
    body = {"prompt": PROMPT, "max_tokens": 24, "temperature": 0.9, "top_k": 40, "top_p": 0.95, "seed": 7,
            "return_token_ids": True}
    ids = [_post(server1.url, "/v1/completions", {**body, "seed": seed}).json()["choices"][0]["token_ids"]
           for seed in (7, 7, 8)]
    assert ids[0] == ids[1] == run["token_ids"] and ids[2] != ids[0]


def test_stream_chunks_reassemble_to_the_text(server):
    """Issue 14 item 2: `stream: true` sends OpenAI text_completion chunks as server-sent events ending in
    `data: [DONE]`; their text (and token ids) concatenate to the non-streamed response's, the last chunk has
    the finish_reason, and stream_options.include_usage adds a usage chunk."""
    body = {"prompt": "The little dog", "max_tokens": 24, "return_token_ids": True}
    full = _post(server.url, "/v1/completions", body).json()
    with httpx.stream("POST", server.url + "/v1/completions", timeout=120,
                      json={**body, "stream": True, "stream_options": {"include_usage": True}}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events, done = _sse(r.iter_lines())
    assert done
    chunks, usage = events[:-1], events[-1]
    assert all(c["object"] == "text_completion" and c["id"] == chunks[0]["id"] for c in chunks)
    assert len(chunks) >= 24
    assert "".join(c["choices"][0]["text"] for c in chunks) == full["choices"][0]["text"]
    assert sum((c["choices"][0]["token_ids"] for c in chunks), []) == full["choices"][0]["token_ids"]
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None] * (len(chunks) - 1) + ["length"]
    assert usage["choices"] == [] and usage["usage"] == full["usage"]


def test_openai_client(server3):
    """Issue 14 item 2: the `openai` package talks to the server: models.list names the GGUF file,
    completions (plain and streamed) return the greedy text, and chat on a GGUF without a chat template
    is a BadRequestError (400) whose code is chat_template_missing."""
    import openai

    client = openai.OpenAI(base_url=server3.url + "/v1", api_key="unused", max_retries=0, timeout=120)
    assert [m.id for m in client.models.list()] == ["stories260K.gguf"]
    c = client.completions.create(model="stories260K.gguf", prompt=PROMPT, max_tokens=12)
    assert c.choices[0].finish_reason == "length" and c.usage.completion_tokens == 12
    assert c.choices[0].text.startswith(", there was a little girl")
    streamed = "".join(ch.choices[0].text for ch in client.completions.create(
        model="stories260K.gguf", prompt=PROMPT, max_tokens=12, stream=True))
    assert streamed == c.choices[0].text
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="stories260K.gguf", messages=[{"role": "user", "content": "hi"}])
    assert e.value.status_code == 400 and e.value.code == "chat_template_missing"


def test_models_and_health(server1):
    """Issue 14 item 2: /v1/models lists the one model (id: the GGUF file name), /v1/models/{id} it or a 404
    JSON error, /health is 200 ok with the queue state; unknown routes are JSON 404s."""
    doc = httpx.get(server1.url + "/v1/models").json()
    assert doc["object"] == "list" and [m["id"] for m in doc["data"]] == ["stories260K.gguf"]
    assert doc["data"][0]["max_model_len"] == MAX_SEQ_LEN
    assert httpx.get(server1.url + "/v1/models/stories260K.gguf").json()["id"] == "stories260K.gguf"
    r = httpx.get(server1.url + "/v1/models/other")
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
    h = httpx.get(server1.url + "/health")
    assert h.status_code == 200 and h.json() == {"status": "ok", "running": 0, "slots": 1, "queued": 0, "queue_size": 1}
    r = httpx.get(server1.url + "/v2/nothing")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


# --------------------------------------------------------------------------- bad requests
BAD_REQUESTS = [
    ("malformed-json", b'{"prompt": "Once", ', "invalid_json", None),
    ("not-utf8", b'{"prompt": "\xff"}', "invalid_json", None),
    ("not-an-object", b'["Once"]', "invalid_json", None),
    ("lone-surrogate", b'{"prompt": "\\ud800 Once"}', "invalid_prompt", "prompt"),
    ("unknown-model", {"model": "gpt-4", "prompt": "Once"}, "model_not_found", "model"),
    ("max-tokens-0", {"prompt": "Once", "max_tokens": 0}, "invalid_value", "max_tokens"),
    ("max-tokens-negative", {"prompt": "Once", "max_tokens": -3}, "invalid_value", "max_tokens"),
    ("max-tokens-string", {"prompt": "Once", "max_tokens": "8"}, "invalid_value", "max_tokens"),
    ("missing-prompt", {"max_tokens": 4}, "missing_field", "prompt"),
    ("prompt-number", {"prompt": 5}, "invalid_value", "prompt"),
    ("prompt-id-outside-vocab", {"prompt": [1, 512]}, "invalid_value", "prompt"),
    ("prompt-longer-than-context", {"prompt": [1] * (MAX_SEQ_LEN + 1)}, "context_length_exceeded", "prompt"),
    ("prompt-plus-max-tokens", {"prompt": PROMPT, "max_tokens": MAX_SEQ_LEN}, "context_length_exceeded",
     "max_tokens"),
    ("temperature-negative", {"prompt": "Once", "temperature": -1}, "invalid_value", "temperature"),
    ("top-p-2", {"prompt": "Once", "top_p": 2}, "invalid_value", "top_p"),
    ("seed-too-big", {"prompt": "Once", "seed": 2**64}, "invalid_value", "seed"),
    ("stream-not-bool", {"prompt": "Once", "stream": "yes"}, "invalid_value", "stream"),
    ("n-2", {"prompt": "Once", "n": 2}, "unsupported_parameter", "n"),
    ("stop-strings", {"prompt": "Once", "stop": ["."]}, "unsupported_parameter", "stop"),
]


@pytest.mark.parametrize(("body", "code", "param"), [b[1:] for b in BAD_REQUESTS], ids=[b[0] for b in BAD_REQUESTS])
def test_bad_completion_request_is_400_json(server1, body, code, param):
    """Issue 14 item 2: malformed JSON, an unknown model, max_tokens < 1, a prompt (+ max_tokens) longer than the
    context and other invalid or unsupported fields are 400 with an OpenAI-style JSON error body naming the
    field; nothing is queued."""
    r = _post(server1.url, "/v1/completions", body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == code and err["param"] == param and err["type"] == "invalid_request_error"
    assert err["message"]
    assert server1.scheduler.health()["queued"] == 0


@pytest.mark.parametrize(("body", "code"), [
    ({"messages": []}, "invalid_value"),
    ({}, "missing_field"),
    ({"messages": [{"content": "hi"}]}, "invalid_value"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
     "unsupported_parameter"),
    ({"messages": [{"role": "user", "content": "hi"}]}, "chat_template_missing"),
], ids=["empty-messages", "missing-messages", "no-role", "image-part", "no-template"])
def test_bad_chat_request_is_400_json(server1, body, code):
    """Issue 14 item 2: bad chat requests, and chat on a GGUF without tokenizer.chat_template, are 400 JSON."""
    r = _post(server1.url, "/v1/chat/completions", body)
    assert r.status_code == 400 and r.json()["error"]["code"] == code, r.text


# --------------------------------------------------------------------------- queue and cancellation
def test_cancel_mid_stream_frees_the_slot_and_full_queue_is_429(server3):
    """Issue 14 item 2: with one request streaming and one waiting (--queue 1) a third is 429 JSON
    (queue_full); a waiting client that gives up is dropped without running; the streaming client
    disconnecting ends its sequence after the current token (finish cancelled, fewer than max_tokens generated and
    fewer than half the context after the disconnect, however fast decoding ran before it), and the waiting request
    then runs to completion."""
    sched, url = server3.scheduler, server3.url
    long_body = {"prompt": PROMPT, "max_tokens": MAX_SEQ_LEN - 8, "stream": True}
    result: dict = {}

    def queued() -> None:
        result["r"] = _post(url, "/v1/completions", {"prompt": "The little dog", "max_tokens": 8})

    with httpx.Client(timeout=120) as client, client.stream("POST", url + "/v1/completions", json=long_body) as r:
        lines = r.iter_lines()
        assert next(lines).startswith("data: ")  # decoding is under way
        running = sched.running
        assert running is not None and running.max_tokens == MAX_SEQ_LEN - 8
        # a client that gives up while waiting: dropped, never run
        with pytest.raises(httpx.ReadTimeout):
            _post(url, "/v1/completions", {"prompt": "Sam", "max_tokens": 4}, timeout=0.5)
        t = threading.Thread(target=queued)
        t.start()
        assert _wait_health(url, lambda d: d["queued"] == 1)["queued"] == 1
        full = _post(url, "/v1/completions", {"prompt": "Sam", "max_tokens": 4})
        assert full.status_code == 429 and full.json()["error"]["code"] == "queue_full"
        assert sched.running is running
        at_close = len(running.token_ids)  # how far decoding got when the client disconnects (depends on speed)
    # the stream's connection is closed: the sequence ends, the waiting request runs
    t.join(120)
    assert result["r"].status_code == 200 and result["r"].json()["usage"]["completion_tokens"] == 8
    assert running.finish_reason == "cancelled" and 1 <= len(running.token_ids) < running.max_tokens
    assert len(running.token_ids) - at_close < MAX_SEQ_LEN // 2
    gave_up = [q for q in sched.finished if q.id > running.id and q.max_tokens == 4]
    assert gave_up and gave_up[-1].finish_reason == "cancelled" and gave_up[-1].token_ids == []
    assert _wait_health(url, lambda d: d["running"] == 0)["status"] == "ok"
    # the pipeline is still good: greedy ids are unchanged after the cancelled sequence
    again = _post(url, "/v1/completions", {"prompt": PROMPT, "max_tokens": 8, "return_token_ids": True}).json()
    assert again["choices"][0]["token_ids"] == [432, 383, 286, 261, 376, 298, 315, 421]


# --------------------------------------------------------------------------- chat template
CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}{% if loop.first and m['role'] != 'user' %}"
                 "{{ raise_exception('the first message must be the user\\'s') }}{% endif %}"
                 "{{ m['role'] }}: {{ m['content'] | trim }}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant:{% endif %}")


EOT_ID = 426  # "." as the end-of-turn id of the chat variant: an end-of-generation id that is not EOS


@pytest.fixture(scope="module")
def chat_server(cache, tmp_path_factory):
    from gguf import GGUFValueType

    from tests.ggufgen import write_variant

    path = write_variant(STORIES, tmp_path_factory.mktemp("chat") / "stories-chat.gguf",
                         kv_overrides={"tokenizer.chat_template": (CHAT_TEMPLATE, GGUFValueType.STRING),
                                       "tokenizer.ggml.eot_token_id": (EOT_ID, GGUFValueType.UINT32)})
    s = InProcessServer([str(path), "--backend", "inproc", "--port", "0", "--max-seq-len", "256", "--cache-dir",
                         str(cache), "--alias", "stories-chat"])
    yield s
    s.stop()


def test_chat_applies_the_gguf_chat_template(chat_server):
    """Issue 14 item 2: /v1/chat/completions renders the GGUF's tokenizer.chat_template with jinja2
    (messages, add_generation_prompt, bos_token): the prompt ids are the rendered text tokenized with its
    special pieces (one BOS, from the template), and the greedy answer equals /v1/completions on those ids;
    streamed deltas reassemble to the message; the template's raise_exception is a 400."""
    from pipeplan.runtime.tokenizer import SPMTokenizer

    tok = SPMTokenizer.from_gguf(STORIES)
    msgs = [{"role": "user", "content": "Once upon a time "}]
    r = _post(chat_server.url, "/v1/chat/completions", {"model": "stories-chat", "messages": msgs, "max_tokens": 16,
                                                        "return_token_ids": True})
    assert r.status_code == 200, r.text
    doc = r.json()
    want_ids = tok.encode("<s>user: Once upon a time\nassistant:", add_bos=False, special=True)
    assert doc["prompt_token_ids"] == want_ids and want_ids.count(tok.bos_id) == 1 and want_ids[0] == tok.bos_id
    assert doc["object"] == "chat.completion" and doc["choices"][0]["message"]["role"] == "assistant"
    plain = _post(chat_server.url, "/v1/completions", {"prompt": want_ids, "max_tokens": 16, "return_token_ids": True})
    assert doc["choices"][0]["token_ids"] == plain.json()["choices"][0]["token_ids"]
    assert doc["choices"][0]["message"]["content"] == plain.json()["choices"][0]["text"]
    with httpx.stream("POST", chat_server.url + "/v1/chat/completions", timeout=120,
                      json={"messages": msgs, "max_tokens": 16, "stream": True}) as s:
        events, done = _sse(s.iter_lines())
    assert done and events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(e["object"] == "chat.completion.chunk" for e in events)
    assert "".join(e["choices"][0]["delta"].get("content", "") for e in events) == doc["choices"][0]["message"]["content"]
    assert events[-1]["choices"][0]["finish_reason"] == doc["choices"][0]["finish_reason"]
    assert doc["choices"][0]["finish_reason"] == plain.json()["choices"][0]["finish_reason"]
    bad = _post(chat_server.url, "/v1/chat/completions", {"messages": [{"role": "assistant", "content": "x"}]})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "chat_template_rejected"
    assert "the first message must be the user's" in bad.json()["error"]["message"]


def test_finish_reason_stop_at_end_of_generation(chat_server, expected_cases):
    """Issue 14 item 2: a sequence ends at an end-of-generation id (here the variant's end-of-turn id, not EOS:
    the should_stop path) with finish_reason "stop", the id itself neither in the text, the ids nor the usage;
    max_tokens ends it with "length"."""
    greedy = expected_cases[0]["greedy_ids"]
    n = greedy.index(EOT_ID)
    r = _post(chat_server.url, "/v1/completions", {"prompt": PROMPT, "max_tokens": 40, "return_token_ids": True}).json()
    assert r["choices"][0]["finish_reason"] == "stop" and r["choices"][0]["token_ids"] == greedy[:n]
    assert r["choices"][0]["text"] == ", there was a little girl named Lily" and r["usage"]["completion_tokens"] == n
    with httpx.stream("POST", chat_server.url + "/v1/completions", timeout=120,
                      json={"prompt": PROMPT, "max_tokens": 40, "stream": True}) as s:
        events, done = _sse(s.iter_lines())
    assert done and events[-1]["choices"][0]["finish_reason"] == "stop"
    assert "".join(e["choices"][0]["text"] for e in events) == r["choices"][0]["text"]
    short = _post(chat_server.url, "/v1/completions", {"prompt": PROMPT, "max_tokens": n}).json()
    assert short["choices"][0]["finish_reason"] == "length" and short["usage"]["completion_tokens"] == n


def test_chat_template_renders_like_hugging_face():
    """Issue 14 item 2: the template environment has HF's trim_blocks/lstrip_blocks, loop controls, tojson
    and raise_exception; a template that does not compile is a typed ChatTemplateError."""
    from pipeplan.serve.chat import ChatTemplate, ChatTemplateError

    t = ChatTemplate("{% for m in messages %}\n  {%- if m.role == 'system' %}{% continue %}{% endif %}\n"
                     "[{{ m.role }}]{{ m.content | tojson }}{% endfor %}{{ eos_token }}", eos_token="</s>")
    assert t.render([{"role": "system", "content": "s"}, {"role": "user", "content": "é\""}]) == '[user]"é\\""</s>'
    with pytest.raises(ChatTemplateError) as e:
        ChatTemplate("{% for m in messages %}")
    assert e.value.code == "bad_chat_template"
    with pytest.raises(ChatTemplateError) as e:
        ChatTemplate("{{ raise_exception('no') }}").render([])
    assert e.value.code == "chat_template_rejected" and "no" in e.value.message


def test_chat_template_render_is_time_limited():
    """Issue 14 item 2 (QA cases 3, 3b): a template whose loops run past the render's time limit or while
    should_stop() is true (a server stopping), or that asks for a range beyond the sandbox's MAX_RANGE, is a
    typed ChatTemplateError(chat_template_rejected)."""
    from pipeplan.serve.chat import ChatTemplate, ChatTemplateError

    with pytest.raises(ChatTemplateError) as e:
        ChatTemplate(SLOW_TEMPLATE).render([{"role": "user", "content": "x"}], timeout_s=0.1)
    assert e.value.code == "chat_template_rejected" and "rendering exceeded 0.1 s" in e.value.message
    with pytest.raises(ChatTemplateError) as e:
        ChatTemplate(OVERFLOW_TEMPLATE).render([])
    assert e.value.code == "chat_template_rejected" and "OverflowError" in e.value.message
    polls = iter(range(10**6))
    with pytest.raises(ChatTemplateError) as e:  # a server that stops: the render ends without its time limit
        ChatTemplate(SLOW_TEMPLATE).render([], timeout_s=None, should_stop=lambda: next(polls) >= 3)
    assert e.value.code == "chat_template_rejected" and "rendering was stopped" in e.value.message
    t = ChatTemplate("{{ range(3)|list }}{{ range(4)|length }}{% for i in range(2) %}{{ loop.length }}{% endfor %}")
    assert t.render([]) == "[0, 1, 2]422"


SLOW_TEMPLATE = "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}"
OVERFLOW_TEMPLATE = "{% for i in range(100000000) %}{{ i }}{% endfor %}"
GUARD_BODY_BYTES = 4096
GUARD_RENDER_S = 1.5


@pytest.fixture(scope="module")
def guard_server(cache, tmp_path_factory):
    """A stories260K copy whose chat template (written with the gguf package) loops for hours, or asks for
    a range past MAX_RANGE when the first message is "overflow"; a 1.5 s render limit and a 4 KiB body limit."""
    from gguf import GGUFValueType

    from tests.ggufgen import write_variant

    template = f"{{% if messages[0]['content'] == 'overflow' %}}{OVERFLOW_TEMPLATE}{{% else %}}{SLOW_TEMPLATE}{{% endif %}}"
    path = write_variant(STORIES, tmp_path_factory.mktemp("guard") / "stories-guard.gguf",
                         kv_overrides={"tokenizer.chat_template": (template, GGUFValueType.STRING)})
    s = InProcessServer([str(path), "--backend", "inproc", "--port", "0", "--max-seq-len", "256", "--cache-dir",
                         str(cache), "--chat-template-timeout", str(GUARD_RENDER_S), "--max-body-bytes", str(GUARD_BODY_BYTES)])
    yield s
    s.stop()


def test_slow_chat_template_is_400_and_server_stays_responsive(guard_server):
    """Issue 14 item 2 (QA cases 3, 3b): a chat template that renders past --chat-template-timeout is a 400
    chat_template_rejected naming the limit, and /health answers within half that while it renders (off the
    event loop); one
    that asks for a range past MAX_RANGE is a 400 chat_template_rejected, not a 500."""
    url, result = guard_server.url, {}

    def chat() -> None:
        result["r"] = _post(url, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}, timeout=30)

    t = threading.Thread(target=chat)
    t.start()
    healths = []
    while t.is_alive():
        healths.append(httpx.get(url + "/health", timeout=GUARD_RENDER_S / 2).status_code)
    t.join()
    assert healths and set(healths) == {200}
    r = result["r"]
    assert r.status_code == 400 and r.json()["error"]["code"] == "chat_template_rejected", r.text
    assert f"rendering exceeded {GUARD_RENDER_S:g} s" in r.json()["error"]["message"]
    r = _post(url, "/v1/chat/completions", {"messages": [{"role": "user", "content": "overflow"}]}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["code"] == "chat_template_rejected", r.text
    assert "MAX_RANGE" in r.json()["error"]["message"]


def test_body_over_the_limit_is_413(guard_server):
    """Issue 14 item 2 (QA case 4): a body above --max-body-bytes is a 413 JSON error (request_too_large), by its
    Content-Length or, chunked, by the bytes received; a body at the limit is read (here a 400 for its prompt)."""
    body = json.dumps({"prompt": "a" * GUARD_BODY_BYTES}).encode()
    r = _post(guard_server.url, "/v1/completions", body)
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large", r.text
    assert f"larger than {GUARD_BODY_BYTES} bytes" in r.json()["error"]["message"]
    r = httpx.post(guard_server.url + "/v1/completions", content=iter([body[:3000], body[3000:]]), timeout=30)
    assert "content-length" not in r.request.headers
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large", r.text
    at_limit = json.dumps({"prompt": "a " * ((GUARD_BODY_BYTES - 40) // 2), "max_tokens": 1}).encode()
    assert len(at_limit) <= GUARD_BODY_BYTES
    r = _post(guard_server.url, "/v1/completions", at_limit)
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded", r.text


def test_prompt_is_tokenized_off_the_event_loop(guard_server, monkeypatch):
    """Issue 14 item 2 (QA case 4): a request's prompt is tokenized on a daemon thread, not on the event loop's,
    so a long prompt does not hold up /health or other requests; a text longer in bytes than the context times
    the longest vocabulary piece is context_length_exceeded without being tokenized."""
    tok = guard_server.scheduler.tokenizer
    threads, encode = [], tok.encode

    def recording_encode(*a, **k):
        threads.append(threading.current_thread())
        return encode(*a, **k)

    monkeypatch.setattr(tok, "encode", recording_encode)
    r = _post(guard_server.url, "/v1/completions", {"prompt": PROMPT, "max_tokens": 2})
    assert r.status_code == 200, r.text
    assert threads and all(th.name == "pipeplan-serve-prompt" and th.daemon for th in threads)
    assert guard_server.thread not in threads
    threads.clear()
    max_piece = max(len(p.encode("utf-8", "surrogatepass")) for p in tok.tokens)
    long = "a" * (256 * max_piece + 1)  # more bytes than 256 positions of the longest piece can hold
    assert len(long) < GUARD_BODY_BYTES - 100
    r = _post(guard_server.url, "/v1/completions", {"prompt": long, "max_tokens": 1})
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded", r.text
    assert threads == []  # rejected by its length, never tokenized


# --------------------------------------------------------------------------- faults and start-up
def test_stage_fault_is_500_and_server_unhealthy(cache):
    """Issue 14 item 2 / WL-L-4: a stage fault mid-generation is a 500 JSON error with the stage_fault code;
    /health is then 503 with the fault, later requests are 503 pipeline_down, and the server still stops."""
    s = InProcessServer(_server_argv(cache, 1, "inproc", "--inject-fault", "0:runtime:4"))
    try:
        r = _post(s.url, "/v1/completions", {"prompt": PROMPT, "max_tokens": 20})
        assert r.status_code == 500, r.text
        err = r.json()["error"]
        assert err["code"] == "stage_fault:runtime" and err["type"] == "server_error" and "stage 0" in err["message"]
        h = httpx.get(s.url + "/health")
        assert h.status_code == 503 and h.json()["status"] == "error"
        assert h.json()["error"]["code"] == "stage_fault:runtime"
        later = _post(s.url, "/v1/completions", {"prompt": PROMPT, "max_tokens": 2})
        assert later.status_code == 503 and later.json()["error"]["code"] == "pipeline_down"
    finally:
        s.stop()
    assert not s.thread.is_alive()


def test_startup_errors_are_one_line_exit_2(tmp_path, capsys):
    """Issue 14 item 2: start-up failures are the CLI's one `error[code]: ...` line and exit 2, before any
    stage starts: a missing model, a rejected plan (--stages above the block count), an address in use."""
    import socket

    assert cli_main(["serve", str(tmp_path / "missing.gguf"), "--port", "0"]) == 2
    assert capsys.readouterr().err.startswith("error[file_not_found]:")
    assert cli_main(["serve", str(STORIES), "--stages", "9", "--port", "0", "--cache-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error[invalid_stage_count]:") and err.count("\n") == 1
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert cli_main(["serve", str(STORIES), "--port", str(port), "--cache-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error[bind_failed]: cannot listen on 127.0.0.1:{port}:") and err.count("\n") == 1


@pytest.mark.parametrize(("argv", "code", "message"), [
    (["--ray-address", "127.0.0.1:1"], "bad_backend", "--ray-address needs --backend ray (the backend is 'local')"),
    (["--backend", "ray", "--ray-address", "not-an-address"], "ray_unavailable", "--ray-address 'not-an-address'"),
], ids=["address-without-ray", "malformed-address"])
def test_serve_ray_address_checked_first(tmp_path, capsys, argv, code, message):
    """Issue 14 items 2-3: serve's --ray-address without --backend ray is error[bad_backend], as run, replay and
    calibrate say it; with it, an address of no form ray.init takes is error[ray_unavailable]; one line, exit 2,
    before the model is read or a port bound."""
    assert cli_main(["serve", str(STORIES), *argv, "--port", "0", "--cache-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error[{code}]: {message}") and err.count("\n") == 1


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--queue", "-1", "--queue must be in [0, 4096], got -1"),
    ("--queue", "4097", "--queue must be in [0, 4096], got 4097"),
    ("--queue", "99999999999999999999", "--queue must be in [0, 4096], got 99999999999999999999"),
    ("--max-body-bytes", "0", "--max-body-bytes must be in [1, 1073741824], got 0"),
    ("--chat-template-timeout", "0", "--chat-template-timeout must be in (0, 3600] seconds, got 0.0"),
    ("--chat-template-timeout", "nan", "--chat-template-timeout must be in (0, 3600] seconds, got nan"),
], ids=["queue-negative", "queue-4097", "queue-huge", "body-0", "template-timeout-0", "template-timeout-nan"])
def test_serve_limit_out_of_range_is_one_line_exit_2(tmp_path, capsys, option, value, message):
    """Issue 14 item 2 (QA cases 9, 3, 4): --queue outside [0, 4096], --max-body-bytes outside [1, 2**30] and
    --chat-template-timeout outside (0, 3600] are error[invalid_request] naming the option, exit 2, before the
    model is read or a port bound."""
    assert cli_main(["serve", str(STORIES), option, value, "--port", "0", "--cache-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error[invalid_request]: {message}") and err.count("\n") == 1


@pytest.mark.parametrize(("sig", "status", "group"), [(signal.SIGTERM, 143, False), (signal.SIGINT, 130, True)],
                         ids=["sigterm", "sigint-to-group"])
def test_signal_stops_every_stage(cache, tmp_path, sig, status, group):
    """Issue 14 item 2 (graceful shutdown): SIGTERM to `pipeplan serve --stages 3 --backend local` (or Ctrl-C
    style SIGINT to its process group, twice) while a response streams ends the stream (an error event, then
    data: [DONE]), stops every stage process (and the stage host), leaves no /dev/shm entry of the server,
    and exits 143 / 130 with one error[interrupted] line (runtime/interrupts.py's convention)."""
    from tests.contract.test_signals import _alive, _descendants, _entries, _wait_gone

    exe = REPO / ".venv" / "bin" / "pipeplan"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "pipeplan.tools.cli"]
    err_path = tmp_path / "stderr"
    proc = subprocess.Popen([*cmd, "serve", *_server_argv(cache, 3, "local")], stdout=subprocess.DEVNULL,
                            stderr=err_path.open("wb"), start_new_session=True)
    try:
        end = time.monotonic() + START_S
        while "serving" not in err_path.read_text():
            assert proc.poll() is None and time.monotonic() < end, err_path.read_text()
            time.sleep(0.02)
        url = err_path.read_text().split(" on ", 1)[1].split()[0]
        assert httpx.get(url + "/health").json()["status"] == "ok"
        with httpx.stream("POST", url + "/v1/completions", timeout=60,
                          json={"prompt": PROMPT, "max_tokens": MAX_SEQ_LEN - 8, "stream": True}) as r:
            lines = r.iter_lines()
            assert next(lines).startswith("data: ")
            procs = _descendants(proc.pid)
            entries = _entries(proc.pid)
            assert len(procs) >= 4 and entries  # stage host + 3 stages, their rings
            for _ in range(2 if group else 1):  # Ctrl-C twice: the second is ignored, the stop stays graceful
                (os.killpg if group else os.kill)(proc.pid, sig)
            events, done = _sse(lines)
        assert done and events[-1]["error"]["code"] == "server_shutting_down"
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    err = err_path.read_text()
    assert rc == status, err
    assert [ln for ln in err.splitlines() if ln.startswith("error[")] == [
        f"error[interrupted]: interrupted by {sig.name}; every stage was stopped and its shared memory released"]
    assert "Traceback" not in err and "leaked" not in err
    assert _wait_gone(procs) == set() and not _alive(procs)
    assert _entries(proc.pid) == set()
