"""Token ids -> text pieces as they are sampled, decoded incrementally so that a character split over
several tokens (byte-fallback tokens ``<0xE2>`` ``<0x96>`` ``<0x81>``, or pieces ending mid-sequence)
comes out whole, once its last byte arrives.

The pieces of a sequence concatenate to a prefix of ``tokenizer.decode(ids)`` (UTF-8 with invalid
bytes replaced by U+FFFD); only the replacement of a trailing incomplete sequence is missing from the
stream, since no later token completes it (a caller that printed the pieces prints
``text[len(streamed):]`` at the end).
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from typing import Protocol


class _Pieces(Protocol):
    def token_to_piece(self, token_id: int) -> bytes: ...


class PieceDecoder:
    """Calls ``on_token(token_id, text_piece)`` for every id given to it (:meth:`__call__`), in order.

    ``text_piece`` is the text completed by that token (``""`` while a multi-byte character is still
    incomplete). ``tokenizer`` needs ``token_to_piece(id) -> bytes`` (:class:`~pipeplan.runtime.tokenizer.SPMTokenizer`).
    """

    def __init__(self, tokenizer: _Pieces, on_token: Callable[[int, str], None]):
        self.tokenizer = tokenizer
        self.on_token = on_token
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def __call__(self, token_id: int) -> None:
        piece = self._decoder.decode(self.tokenizer.token_to_piece(int(token_id)))
        self.on_token(int(token_id), piece)
