"""llama.cpp's SentencePiece-BPE ("SPM", ``tokenizer.ggml.model == "llama"``) tokenizer.

A port of ``llm_tokenizer_spm`` (llama.cpp ``src/llama-vocab.cpp``): the text is escaped (space ->
``▁``, a ``▁`` prepended), split into UTF-8 characters, and adjacent symbols are merged greedily by
the vocabulary score of the merged piece (highest score first, leftmost first on ties); a final
symbol that is not a token is re-split along its merge history, and a character that no token
covers falls back to its UTF-8 bytes as ``<0xXX>`` tokens. ``decode`` reverses it: ``▁`` -> space,
byte tokens -> bytes, control tokens -> nothing.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import gguf
from pipeplan.errors import PipeplanError

ABSENT = 0xFFFFFFFF
"""Special token id meaning "absent" in GGUF metadata."""

# llama_token_type (gguf.TokenType)
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
SPACE = "\u2581"


class TokenizerError(PipeplanError):
    """A tokenizer that cannot be built from a GGUF (missing/inconsistent ``tokenizer.ggml.*``
    keys, a model other than ``llama``), or an id outside the vocabulary in ``decode``."""

    code = "tokenizer"
    kind = "parse"


@dataclass
class _Symbol:
    start: int  # byte offset... here: char offset into the escaped text
    n: int  # length in chars (0 = merged away)
    prev: int
    next: int


class SPMTokenizer:
    """SPM tokenizer over a vocabulary of ``tokens`` with ``scores`` and ``token_types``.

    Args:
        tokens: piece strings by id. scores: merge scores by id. token_types: llama token types.
        bos_id / eos_id / unk_id: special ids (None when absent).
        add_space_prefix: prepend ``▁`` to the text (``tokenizer.ggml.add_space_prefix``, default True).

    Raises:
        TokenizerError: lengths of tokens/scores/types differ, or the vocabulary is empty.
    """

    def __init__(self, tokens: Sequence[str], scores: Sequence[float], token_types: Sequence[int], *,
                 bos_id: int | None = None, eos_id: int | None = None, unk_id: int | None = None,
                 add_space_prefix: bool = True):
        if not tokens or len(tokens) != len(scores) or len(tokens) != len(token_types):
            raise TokenizerError(
                f"vocabulary arrays disagree: {len(tokens)} tokens, {len(scores)} scores, {len(token_types)} types")
        self.tokens = list(tokens)
        self.scores = [float(s) for s in scores]
        self.token_types = [int(t) for t in token_types]
        self.bos_id, self.eos_id, self.unk_id = bos_id, eos_id, unk_id
        self.add_space_prefix = add_space_prefix
        self.token_to_id: dict[str, int] = {}
        for i, t in enumerate(self.tokens):
            self.token_to_id.setdefault(t, i)
        self._byte_ids: dict[int, int] = {}
        for i, t in enumerate(self.tokens):
            if self.token_types[i] == BYTE and len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
                self._byte_ids[int(t[3:5], 16)] = i

    @property
    def n_vocab(self) -> int:
        """Vocabulary size."""
        return len(self.tokens)

    @classmethod
    def from_gguf(cls, path: str | Path) -> SPMTokenizer:
        """Read ``tokenizer.ggml.{model,tokens,scores,token_type,bos_token_id,eos_token_id,
        unknown_token_id,add_space_prefix}`` from a GGUF file (ids ``0xFFFFFFFF`` mean absent).

        Raises:
            TokenizerError: the file cannot be read, keys are missing, or the model is not ``llama``.
        """
        try:
            r = gguf.GGUFReader(str(path))
        except (OSError, ValueError) as e:
            raise TokenizerError(f"cannot read tokenizer from {path}: {e}", where=str(path)) from e

        def get(key: str, default=None, required=False):
            f = r.fields.get(key)
            if f is None:
                if required:
                    raise TokenizerError(f"{path}: missing key {key}", where=key)
                return default
            return f.contents()

        model = get("tokenizer.ggml.model", required=True)
        if model != "llama":
            raise TokenizerError(f"{path}: tokenizer model {model!r} is not llama SPM", where="tokenizer.ggml.model")
        tokens = get("tokenizer.ggml.tokens", required=True)
        scores = get("tokenizer.ggml.scores", [0.0] * len(tokens))
        types = get("tokenizer.ggml.token_type", [NORMAL] * len(tokens))

        def special(key: str) -> int | None:
            v = get(key)
            return None if v is None or int(v) == ABSENT or int(v) >= len(tokens) else int(v)

        return cls(tokens, scores, types, bos_id=special("tokenizer.ggml.bos_token_id"),
                   eos_id=special("tokenizer.ggml.eos_token_id"), unk_id=special("tokenizer.ggml.unknown_token_id"),
                   add_space_prefix=bool(get("tokenizer.ggml.add_space_prefix", True)))

    # ------------------------------------------------------------------ encode
    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        """Token ids of ``text`` (llama.cpp ``llama_tokenize`` with ``parse_special=False``).

        ``add_bos`` prepends the BOS id when the vocabulary has one. Empty text gives ``[bos]`` or ``[]``.
        """
        out: list[int] = [self.bos_id] if add_bos and self.bos_id is not None else []
        if not text:
            return out
        s = text.replace(" ", SPACE)
        if self.add_space_prefix:
            s = SPACE + s
        syms = [_Symbol(i, 1, i - 1, i + 1 if i + 1 < len(s) else -1) for i in range(len(s))]
        heap: list[tuple[float, int, int, int]] = []  # (-score, left, right, size)
        rev_merge: dict[str, tuple[int, int]] = {}

        def try_add(left: int, right: int) -> None:
            if left == -1 or right == -1:
                return
            piece = s[syms[left].start : syms[left].start + syms[left].n + syms[right].n]
            tid = self.token_to_id.get(piece)
            if tid is None:
                return
            heapq.heappush(heap, (-self.scores[tid], left, right, len(piece)))
            rev_merge[piece] = (left, right)

        for i in range(1, len(syms)):
            try_add(i - 1, i)
        while heap:
            _, left, right, size = heapq.heappop(heap)
            ls, rs = syms[left], syms[right]
            if ls.n == 0 or rs.n == 0 or ls.n + rs.n != size:
                continue  # stale: one side was merged since
            ls.n += rs.n
            rs.n = 0
            ls.next = rs.next
            if rs.next >= 0:
                syms[rs.next].prev = left
            try_add(ls.prev, left)
            try_add(left, ls.next)

        def resegment(idx: int) -> None:
            sym = syms[idx]
            piece = s[sym.start : sym.start + sym.n]
            tid = self.token_to_id.get(piece)
            if tid is not None:
                out.append(tid)
                return
            merge = rev_merge.get(piece)
            if merge is None:
                for b in piece.encode("utf-8"):
                    bid = self._byte_ids.get(b)
                    if bid is not None:
                        out.append(bid)
                    elif self.unk_id is not None:
                        out.append(self.unk_id)
                return
            resegment(merge[0])
            resegment(merge[1])

        i = 0
        while i != -1:
            resegment(i)
            i = syms[i].next
        return out

    # ------------------------------------------------------------------ decode
    def token_to_piece(self, token_id: int) -> bytes:
        """The bytes token ``token_id`` stands for: ``▁`` -> space for normal/user pieces, the byte of
        a ``<0xXX>`` token, and nothing for control/unknown/unused tokens.

        Raises:
            TokenizerError: ``token_id`` outside ``[0, n_vocab)``.
        """
        if not 0 <= token_id < len(self.tokens):
            raise TokenizerError(f"token id {token_id} outside [0, {len(self.tokens)})", where=str(token_id))
        tt = self.token_types[token_id]
        piece = self.tokens[token_id]
        if tt == BYTE:
            return bytes([int(piece[3:5], 16)])
        if tt in (NORMAL, USER_DEFINED):
            return piece.replace(SPACE, " ").encode("utf-8")
        return b""

    def decode(self, ids: Sequence[int]) -> str:
        """Concatenated pieces of ``ids`` decoded as UTF-8 (invalid sequences -> U+FFFD).

        Raises:
            TokenizerError: an id outside the vocabulary.
        """
        return b"".join(self.token_to_piece(int(i)) for i in ids).decode("utf-8", errors="replace")
