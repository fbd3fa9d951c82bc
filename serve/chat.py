"""Chat messages -> prompt text with the GGUF's ``tokenizer.chat_template`` (a Jinja template).

Rendered the way Hugging Face ``apply_chat_template`` and llama.cpp's jinja path (``common_chat_templates``)
do: a sandboxed environment with ``trim_blocks`` and ``lstrip_blocks``, the ``loopcontrols`` extension,
a ``tojson`` filter, the globals ``raise_exception(message)`` and ``strftime_now(format)``, and the
variables ``messages`` (a list of ``{"role", "content"}``), ``add_generation_prompt``, ``bos_token`` and
``eos_token`` (the vocabulary's BOS/EOS pieces, ``""`` when absent).

A render has a time limit: the template's ``range`` is the sandbox's (at most ``MAX_RANGE`` items) and every
loop over it checks the deadline, so nested loops end with ``chat_template_rejected`` instead of running on.
"""

from __future__ import annotations

import datetime
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pipeplan.errors import PipeplanError


class ChatTemplateError(PipeplanError):
    """The chat template does not compile (code ``bad_chat_template``), or rejects the messages when rendered
    (code ``chat_template_rejected``: its ``raise_exception``, or a Jinja error on these messages)."""

    code = "bad_chat_template"


def _raise_exception(message: str) -> None:
    from jinja2.exceptions import TemplateError

    raise TemplateError(message)


def _tojson(value: Any, indent: int | None = None, separators: tuple[str, str] | None = None,
            sort_keys: bool = False, ensure_ascii: bool = False) -> str:
    return json.dumps(value, indent=indent, separators=separators, sort_keys=sort_keys, ensure_ascii=ensure_ascii)


DEFAULT_RENDER_TIMEOUT_S = 5.0
"""Most seconds one render may take (``pipeplan serve --chat-template-timeout``)."""

_deadline = threading.local()
"""``at``: the monotonic deadline of the render running on this thread (None: none); ``stop``: a callable
that ends it early when it returns true (None: none)."""


class _RenderTimeout(Exception):
    pass


class _DeadlineRange:
    """The sandbox's ``range`` (``jinja2.sandbox.safe_range``: OverflowError past ``MAX_RANGE`` items) whose
    iteration raises _RenderTimeout once the thread's render deadline has passed or its ``stop`` returns true."""

    def __init__(self, *args: int):
        from jinja2.sandbox import safe_range

        self._range = safe_range(*args)

    def __len__(self) -> int:
        return len(self._range)

    def __getitem__(self, i: Any) -> Any:
        return self._range[i]

    def __contains__(self, v: object) -> bool:
        return v in self._range

    def __iter__(self) -> Any:
        at, stop = getattr(_deadline, "at", None), getattr(_deadline, "stop", None)
        for n, v in enumerate(self._range):
            if n % 64 == 0 and ((at is not None and time.monotonic() > at) or (stop is not None and stop())):
                raise _RenderTimeout
            yield v


def _strftime_now(fmt: str) -> str:
    return datetime.datetime.now().strftime(fmt)


class ChatTemplate:
    """A compiled chat template.

    Args:
        source: the Jinja text (``tokenizer.chat_template``).
        bos_token / eos_token: the vocabulary's BOS and EOS pieces (``""`` when the vocabulary has none).
    Raises: ChatTemplateError(bad_chat_template) when ``source`` is not a valid template.
    """

    def __init__(self, source: str, *, bos_token: str = "", eos_token: str = ""):
        from jinja2 import TemplateError
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = _strftime_now
        env.globals["range"] = _DeadlineRange
        try:
            self._template = env.from_string(source)
        except TemplateError as e:
            raise ChatTemplateError(f"the GGUF's tokenizer.chat_template does not compile: {e}",
                                    where="tokenizer.chat_template") from None
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> ChatTemplate | None:
        """The template of an :class:`~pipeplan.runtime.tokenizer.SPMTokenizer` read from a GGUF (its
        ``chat_template``, BOS/EOS pieces); None when the GGUF has none. Raises ChatTemplateError."""
        source = getattr(tokenizer, "chat_template", None)
        if not source:
            return None

        def piece(i: int | None) -> str:
            return tokenizer.tokens[i] if i is not None else ""

        return cls(source, bos_token=piece(tokenizer.bos_id), eos_token=piece(tokenizer.eos_id))

    def render(self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True,
               timeout_s: float | None = DEFAULT_RENDER_TIMEOUT_S,
               should_stop: Callable[[], bool] | None = None) -> str:
        """The prompt text for ``messages`` (each a mapping with at least ``role`` and ``content``), rendered
        within ``timeout_s`` seconds (None: no limit) and while ``should_stop()`` is false (a server that
        stops: the render ends as a timeout does).

        Raises ChatTemplateError(chat_template_rejected) with the template's own message (e.g. roles that
        do not alternate), the Jinja error it hit on these messages, a range beyond the sandbox's
        ``MAX_RANGE``, or a render that exceeded ``timeout_s``."""
        from jinja2 import TemplateError

        _deadline.at = None if timeout_s is None else time.monotonic() + timeout_s
        _deadline.stop = should_stop
        try:
            return self._template.render(messages=[dict(m) for m in messages],
                                         add_generation_prompt=add_generation_prompt,
                                         bos_token=self.bos_token, eos_token=self.eos_token)
        except _RenderTimeout:
            why = "rendering was stopped" if should_stop is not None and should_stop() else \
                f"rendering exceeded {timeout_s:g} s (--chat-template-timeout)"
            raise ChatTemplateError(f"the chat template rejected the messages: {why}", code="chat_template_rejected",
                                    where="messages") from None
        except TemplateError as e:
            raise ChatTemplateError(f"the chat template rejected the messages: {e}", code="chat_template_rejected",
                                    where="messages") from None
        except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError, RecursionError) as e:
            raise ChatTemplateError(f"the chat template failed on the messages: {type(e).__name__}: {e}",
                                    code="chat_template_rejected", where="messages") from None
        finally:
            _deadline.at = _deadline.stop = None
