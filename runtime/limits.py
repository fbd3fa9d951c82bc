"""Range checks of user-given runtime counts, before they reach torch or the OS
(``torch.set_num_threads(100000)`` crashes the process), and of prompt text (``run``, ``replay``, ``serve``)."""

from __future__ import annotations

import os

from pipeplan.errors import PipeplanError

__all__ = ["LimitError", "PromptError", "check_prompt", "check_thread_count", "max_threads"]


class LimitError(PipeplanError):
    """A count outside its accepted range (code ``invalid_request``)."""

    code = "invalid_request"


def max_threads() -> int:
    """The most threads a stage may ask for: 4 x ``os.cpu_count()`` (1 core when it is unknown)."""
    return 4 * (os.cpu_count() or 1)


def check_thread_count(n: object, what: str = "--threads") -> int:
    """``n`` when it is an int in ``[1, max_threads()]``; raises LimitError naming ``what`` otherwise."""
    hi = max_threads()
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= hi:
        raise LimitError(f"{what} must be an integer in [1, {hi}] (4 x the {os.cpu_count() or 1} cores), got {n!r}",
                         where=what.lstrip("-").replace("-", "_"))
    return n


class PromptError(PipeplanError):
    """A prompt that is not text (code ``invalid_prompt``): bytes that are not UTF-8 on the command line."""

    code = "invalid_prompt"


def check_prompt(text: str, option: str = "--prompt") -> str:
    """``text`` when it is valid Unicode text. Command-line bytes that are not UTF-8 reach Python as lone
    surrogates (PEP 383); they are PromptError(invalid_prompt) naming the first bad byte and its offset."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        offset = len(text[:e.start].encode("utf-8"))
        c = ord(text[e.start])
        what = f"byte 0x{c - 0xDC00:02x}" if 0xDC80 <= c <= 0xDCFF else f"lone surrogate U+{c:04X}"
        raise PromptError(f"{option} is not valid UTF-8 text: {what} at byte offset {offset} (pass the prompt as "
                          f"UTF-8)", where=option.lstrip("-")) from None
    return text
