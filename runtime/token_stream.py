"""Token ids -> text pieces as they are sampled, for ``on_token(token_id, text_piece)`` callbacks: an adapter
over the tokenizer's incremental decoder (:meth:`~pipeplan.runtime.tokenizer.SPMTokenizer.stream`), so a
character split over several tokens (byte-fallback tokens ``<0xE2>`` ``<0x82>`` ``<0xAC>``, or pieces
ending mid-sequence) comes out whole with the token that completes it.

The pieces of a sequence concatenate to a prefix of ``tokenizer.decode(ids)``; only the U+FFFD of a
trailing incomplete sequence is missing, since no later token completes it (a caller that printed the
pieces prints ``text[len(streamed):]`` at the end).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class PieceDecoder:
    """Calls ``on_token(token_id, text_piece)`` for every id given to it (:meth:`__call__`), in order;
    ``text_piece`` is the text completed by that token (``""`` while a multi-byte character is incomplete).
    ``tokenizer`` is an :class:`~pipeplan.runtime.tokenizer.SPMTokenizer` (its ``stream()``).
    Raises (call): TokenizerError for an id outside the vocabulary."""

    def __init__(self, tokenizer: Any, on_token: Callable[[int, str], None]):
        self._stream = tokenizer.stream()
        self.on_token = on_token

    def __call__(self, token_id: int) -> None:
        self.on_token(int(token_id), self._stream.push(int(token_id)))
