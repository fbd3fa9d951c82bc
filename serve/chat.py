"""Chat messages -> prompt text with the GGUF's ``tokenizer.chat_template`` (a Jinja template).

Rendered the way Hugging Face ``apply_chat_template`` and llama.cpp's jinja path (``common_chat_templates``)
do: a sandboxed environment with ``trim_blocks`` and ``lstrip_blocks``, the ``loopcontrols`` extension,
a ``tojson`` filter, the globals ``raise_exception(message)`` and ``strftime_now(format)``, and the
variables ``messages`` (a list of ``{"role", "content"}``), ``add_generation_prompt``, ``bos_token`` and
``eos_token`` (the vocabulary's BOS/EOS pieces, ``""`` when absent).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
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

    def render(self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True) -> str:
        """The prompt text for ``messages`` (each a mapping with at least ``role`` and ``content``).

        Raises ChatTemplateError(chat_template_rejected) with the template's own message (e.g. roles that
        do not alternate) or the Jinja error it hit on these messages."""
        from jinja2 import TemplateError

        try:
            return self._template.render(messages=[dict(m) for m in messages],
                                         add_generation_prompt=add_generation_prompt,
                                         bos_token=self.bos_token, eos_token=self.eos_token)
        except TemplateError as e:
            raise ChatTemplateError(f"the chat template rejected the messages: {e}", code="chat_template_rejected",
                                    where="messages") from None
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as e:
            raise ChatTemplateError(f"the chat template failed on the messages: {type(e).__name__}: {e}",
                                    code="chat_template_rejected", where="messages") from None
