"""llama.cpp's SentencePiece ("SPM", ``tokenizer.ggml.model == "llama"``) tokenizer: encode, decode, stream.

Follows llama.cpp ``src/llama-vocab.cpp`` (``llama_vocab::impl::load``, ``tokenize``, ``token_to_piece``,
``tokenizer_st_partition`` and ``llm_tokenizer_spm_session``):

* partition: user-defined pieces (and, with ``special=True``, control and unknown pieces) are cut out of
  the raw text first, longest piece (in bytes) first, each becoming its own token;
* every remaining text fragment gets a leading space when ``add_space_prefix`` is set and the fragment
  starts the text or follows a cut-out token; spaces become ``▁`` and the fragment is split into
  characters;
* adjacent symbols merge by the score of the merged piece (highest score first, leftmost first on
  ties; a priority queue whose stale entries are skipped); a final symbol that is no piece falls back
  to its UTF-8 bytes as ``<0xXX>`` tokens (else the one-byte piece);
* decoding concatenates ``token_to_piece`` bytes (normal pieces with ``▁`` -> space, user-defined pieces
  verbatim, byte tokens as their byte, control/unknown pieces only with ``special``) and decodes UTF-8;
  :class:`StreamDecoder` does the same one token at a time, holding back an incomplete UTF-8 sequence.

The vocabulary is read from the GGUF header without per-string views (the string array is split from
one buffer), so Gemma 3's 262144 pieces load in well under a second (``bench/tokenizer.py``).
"""

from __future__ import annotations

import codecs
import heapq
import re
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGUFValueType as VT
from pipeplan.errors import GGUFError, PipeplanError

__all__ = ["SPMTokenizer", "StreamDecoder", "TokenizerError", "SPACE", "ABSENT"]

ABSENT = 0xFFFFFFFF
"""A special-token id meaning "not set" in GGUF metadata (llama.cpp then keeps its default id)."""

# llama_token_type (gguf.TokenType)
UNDEFINED, NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 0, 1, 2, 3, 4, 5, 6
SPACE = "\u2581"

# what token_to_piece does with a token (llama_token_attr, reduced to the cases SPM distinguishes)
_K_NONE, _K_SPECIAL, _K_USER, _K_NORMAL, _K_BYTE = 0, 1, 2, 3, 4
_KIND_OF_TYPE = np.array([_K_NONE, _K_NORMAL, _K_SPECIAL, _K_SPECIAL, _K_USER, _K_NONE, _K_BYTE], dtype=np.int8)

EOG_TEXTS = frozenset({
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<\uff5cend\u2581of\u2581sentence\uff5c>", "[e~[",
})
"""Pieces llama.cpp treats as end-of-generation by their text (``special_eog_ids`` in ``llama_vocab::impl::load``);
like llama.cpp, they also become control tokens (not cut from text unless ``special``, empty pieces)."""

CONTROL_TEXTS = EOG_TEXTS | frozenset({
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\uff5cfim\u2581begin\uff5c>", "<PRE>", "\u2581<PRE>",
    "<|code_prefix|>", "<|prefix|>", "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\uff5cfim\u2581hole\uff5c>",
    "<SUF>", "\u2581<SUF>", "<|code_suffix|>", "<|suffix|>", "<|fim_middle|>", "<fim-middle>", "<fim_middle>",
    "<\uff5cfim\u2581end\uff5c>", "<MID>", "\u2581<MID>", "<|code_middle|>", "<|middle|>", "<|fim_pad|>", "<fim-pad>",
    "<fim_pad>", "<PAD>", "[PAD]", "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>",
})
"""Pieces llama.cpp turns into control tokens by their text (its EOT/EOM/FIM detection, and the EOG pieces)."""

_BYTE_PIECE = re.compile(r"<0x[0-9A-Fa-f]{2}>")
_INT_TYPES = frozenset({VT.UINT8, VT.INT8, VT.UINT16, VT.INT16, VT.UINT32, VT.INT32, VT.UINT64, VT.INT64})
_FLOAT_TYPES = frozenset({VT.FLOAT32, VT.FLOAT64})
_DEFAULT_IDS = {"bos": 1, "eos": 2, "unk": 0}
"""llama.cpp's default special ids for an SPM vocabulary whose GGUF does not set them."""


class TokenizerError(PipeplanError):
    """A tokenizer that cannot be built from a GGUF (missing or malformed ``tokenizer.ggml.*`` keys, a
    model other than ``llama``; code ``bad_tokenizer``, or the GGUF reader's code when the file itself is
    unreadable), an id outside the vocabulary (``bad_token_id``), or text that cannot be tokenized
    (``bad_text``)."""

    code = "bad_tokenizer"
    kind = "parse"


def _describe(types: Sequence[VT]) -> str:
    """``'a string'``, ``'an array of FLOAT32'``, ... for a GGUF field's value types."""
    t = types[0]
    if t == VT.ARRAY:
        return f"an array of {types[1].name}" if len(types) > 1 else "an array"
    if t == VT.STRING:
        return "a string"
    if t == VT.BOOL:
        return "a bool"
    if t in _FLOAT_TYPES:
        return f"a float ({t.name})"
    return f"an integer ({t.name})"


class _Metadata:
    """Typed access to the ``tokenizer.*`` fields of one parsed GGUF header (gguf ``ReaderField``s)."""

    def __init__(self, path: Path, fields: dict[str, Any]):
        self.path, self.fields = path, fields

    def bad(self, key: str, what: str) -> TokenizerError:
        return TokenizerError(f"{self.path}: {key} {what}", where=key)

    def _typed(self, key: str, ok: bool, field: Any, expected: str) -> None:
        if not ok:
            raise self.bad(key, f"is {_describe(field.types)}, expected {expected}")

    def string(self, key: str) -> str | None:
        f = self.fields.get(key)
        if f is None:
            return None
        self._typed(key, f.types == [VT.STRING], f, "a string")
        return str(f.contents())

    def boolean(self, key: str) -> bool | None:
        f = self.fields.get(key)
        if f is None:
            return None
        self._typed(key, f.types == [VT.BOOL], f, "a bool")
        return bool(f.parts[f.data[0]][0])

    def integer(self, key: str) -> int | None:
        f = self.fields.get(key)
        if f is None:
            return None
        self._typed(key, len(f.types) == 1 and f.types[0] in _INT_TYPES, f, "an integer")
        return int(f.parts[f.data[0]][0])

    def array(self, key: str, elem: frozenset[VT], expected: str) -> Any:
        """The field of an array whose element type is in ``elem``; None when absent."""
        f = self.fields.get(key)
        if f is None:
            return None
        self._typed(key, len(f.types) == 2 and f.types[0] == VT.ARRAY and f.types[1] in elem, f, expected)
        return f

    def strings(self, key: str) -> list[str] | None:
        """A string array, split from its one payload buffer (``[u64 length][bytes]`` per string)."""
        f = self.array(key, frozenset({VT.STRING}), "an array of strings")
        if f is None:
            return None
        length = f.parts[f.data[0] - 1]
        n = int(length[0])
        big = length.dtype.byteorder == ">" or (length.dtype.byteorder == "=" and struct.pack("=H", 1) == b"\0\1")
        unpack = struct.Struct(">Q" if big else "<Q").unpack_from
        buf = f.parts[f.data[0]].tobytes()
        out: list[str] = []
        append = out.append
        pos = 0
        try:
            for _ in range(n):
                (ln,) = unpack(buf, pos)
                pos += 8
                append(buf[pos : pos + ln].decode("utf-8"))
                pos += ln
        except UnicodeDecodeError as e:
            raise self.bad(f"{key}[{len(out)}]", f"= {e.object!r} is not UTF-8 ({e.reason})") from None
        return out

    def numbers(self, key: str, elem: frozenset[VT], expected: str) -> np.ndarray | None:
        f = self.array(key, elem, expected)
        return None if f is None else np.asarray(f.parts[f.data[0]])


class SPMTokenizer:
    """SPM tokenizer over a vocabulary of ``tokens`` with ``scores`` and ``token_types``.

    Args:
        tokens: piece strings by id (an empty piece reads as ``[EMPTY_<id>]``, as in llama.cpp).
        scores: merge scores by id. token_types: llama token types (0..6; other values act as
            UNDEFINED, whose piece is empty).
        bos_id / eos_id / unk_id: special ids (None when absent).
        add_space_prefix: prepend a space to the text (``tokenizer.ggml.add_space_prefix``, default True).
        add_bos / add_eos: ``encode(add_bos=True)`` prepends BOS / appends EOS (``tokenizer.ggml.add_bos_token``,
            ``add_eos_token``; add_bos defaults to "BOS is set").
        eog_ids: further end-of-generation ids (EOS and the pieces in :data:`EOG_TEXTS` always are).
        chat_template: ``tokenizer.chat_template`` (a Jinja string) or None.

    Raises:
        TokenizerError: arrays of different lengths or an empty vocabulary, non-integer types, a NaN
            score, a piece twice, a BYTE token that is not ``<0xHH>``, a special id outside the
            vocabulary, or add_bos/add_eos without the id.
    """

    def __init__(self, tokens: Sequence[str], scores: Sequence[float] | np.ndarray,
                 token_types: Sequence[int] | np.ndarray, *, bos_id: int | None = None, eos_id: int | None = None,
                 unk_id: int | None = None, add_space_prefix: bool = True, add_bos: bool | None = None,
                 add_eos: bool = False, eog_ids: Iterable[int] = (), chat_template: str | None = None):
        n = len(tokens)
        if not n or len(scores) != n or len(token_types) != n:
            raise TokenizerError(
                f"vocabulary arrays disagree: {n} tokens, {len(scores)} scores, {len(token_types)} types")
        types = np.asarray(token_types)
        if types.dtype.kind not in "iu":
            raise TokenizerError(f"token types must be integers, got {types.dtype} values")
        try:
            score_arr = np.asarray(scores, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise TokenizerError(f"token scores must be numbers: {e}") from None
        if np.isnan(score_arr).any():
            raise TokenizerError(f"token score of id {int(np.flatnonzero(np.isnan(score_arr))[0])} is NaN")
        self.tokens: list[str] = list(tokens)
        if "" in self.tokens:
            self.tokens = [t or f"[EMPTY_{i}]" for i, t in enumerate(self.tokens)]
        self.token_to_id: dict[str, int] = dict(zip(self.tokens, range(n)))
        if len(self.token_to_id) != n:
            first: dict[str, int] = {}
            for i, t in enumerate(self.tokens):
                if t in first:
                    raise TokenizerError(f"piece {t!r} appears twice in the vocabulary (ids {first[t]} and {i})",
                                         where=str(i))
                first[t] = i
        self.scores: list[float] = score_arr.tolist()
        self.token_types: list[int] = types.tolist()
        kinds = np.where((types >= 0) & (types < len(_KIND_OF_TYPE)),
                         _KIND_OF_TYPE[np.clip(types, 0, len(_KIND_OF_TYPE) - 1)], _K_NONE).astype(np.int8)
        self._byte_value: dict[int, int] = {}
        for i in np.flatnonzero(types == BYTE).tolist():
            if not _BYTE_PIECE.fullmatch(self.tokens[i]):
                raise TokenizerError(f"token {i} {self.tokens[i]!r} has type BYTE but is not <0xHH>", where=str(i))
            self._byte_value[i] = int(self.tokens[i][3:5], 16)
        for name, v in (("bos", bos_id), ("eos", eos_id), ("unk", unk_id)):
            if v is not None and not 0 <= v < n:
                raise TokenizerError(f"{name} id {v} outside the vocabulary [0, {n})", where=f"{name}_id")
        self.bos_id, self.eos_id, self.unk_id = bos_id, eos_id, unk_id
        self.add_space_prefix = bool(add_space_prefix)
        self.add_bos = bos_id is not None if add_bos is None else bool(add_bos)
        self.add_eos = bool(add_eos)
        if self.add_bos and bos_id is None:
            raise TokenizerError("add_bos_token is true, but there is no BOS id", where="bos_id")
        if self.add_eos and eos_id is None:
            raise TokenizerError("add_eos_token is true, but there is no EOS id", where="eos_id")
        self.chat_template = chat_template
        eog = {int(i) for i in eog_ids} | ({eos_id} if eos_id is not None else set())
        for text in CONTROL_TEXTS:
            tid = self.token_to_id.get(text)
            if tid is not None:
                kinds[tid] = _K_SPECIAL  # llama.cpp adds the CONTROL attribute to these
                if text in EOG_TEXTS:
                    eog.add(tid)
        if any(not 0 <= i < n for i in eog):
            raise TokenizerError(f"end-of-generation ids {sorted(eog)} reach outside [0, {n})", where="eog_ids")
        self.eog_ids: frozenset[int] = frozenset(eog)
        self._kinds: list[int] = kinds.tolist()
        # byte fallback (llama_vocab::byte_to_token): the <0xXX> piece, else the one-byte piece
        self._byte_token: list[int | None] = [
            self.token_to_id.get(f"<0x{b:02X}>", self.token_to_id.get(chr(b)) if b < 0x80 else None)
            for b in range(256)]
        # partition order (cache_special_tokens): longest piece in bytes first, lower id first on ties
        cut: list[int] = np.flatnonzero((kinds == _K_SPECIAL) | (kinds == _K_USER)).tolist()
        cut.sort(key=lambda i: (-len(self.tokens[i].encode("utf-8")), i))
        self._cut_special: list[int] = cut
        self._cut_user: list[int] = [i for i in cut if self._kinds[i] == _K_USER]

    @property
    def n_vocab(self) -> int:
        """Vocabulary size."""
        return len(self.tokens)

    # ------------------------------------------------------------------ loading
    @classmethod
    def from_gguf(cls, path: str | Path) -> SPMTokenizer:
        """Read ``tokenizer.ggml.{model,tokens,scores,token_type,bos_token_id,eos_token_id,unknown_token_id,
        eot_token_id,eom_token_id,add_bos_token,add_eos_token,add_space_prefix}`` and
        ``tokenizer.chat_template`` from a GGUF header (llama.cpp ``llama_vocab::impl::load``: missing
        scores are 0, missing types NORMAL, missing special ids default to BOS 1, EOS 2, UNK 0, and an id
        of ``0xFFFFFFFF`` keeps the default).

        Raises:
            TokenizerError: the file cannot be read (the GGUF reader's code: ``file_not_found``,
                ``not_gguf``, ``truncated``, ...), or ``bad_tokenizer``: a key is missing or of the wrong
                type (e.g. ``tokenizer.ggml.bos_token_id is a string, expected an integer``), the model is
                not ``llama``, arrays disagree in length, or the vocabulary is inconsistent (see the class).
        """
        from pipeplan.frontend.gguf_facts import _parse  # the bound-checked GGUF header reader

        path = Path(path)
        try:
            shard = _parse(path)
        except GGUFError as e:
            raise TokenizerError(f"cannot read tokenizer from {path}: {e.message}", code=e.code,
                                 where=str(path)) from None
        md = _Metadata(path, shard.fields)
        model = md.string("tokenizer.ggml.model")
        if model is None:
            raise TokenizerError(f"{path}: missing key tokenizer.ggml.model", where="tokenizer.ggml.model")
        if model != "llama":
            raise TokenizerError(f"{path}: tokenizer model {model!r} is not llama SPM", where="tokenizer.ggml.model")
        tokens = md.strings("tokenizer.ggml.tokens")
        if tokens is None:
            raise TokenizerError(f"{path}: missing key tokenizer.ggml.tokens", where="tokenizer.ggml.tokens")
        n = len(tokens)
        scores = md.numbers("tokenizer.ggml.scores", _FLOAT_TYPES | _INT_TYPES, "an array of numbers")
        types = md.numbers("tokenizer.ggml.token_type", _INT_TYPES, "an array of integers")
        scores = np.zeros(n, np.float32) if scores is None else scores
        types = np.full(n, NORMAL, np.int32) if types is None else types
        if len(scores) != n or len(types) != n:
            raise TokenizerError(
                f"{path}: vocabulary arrays disagree: {n} tokens, {len(scores)} scores, {len(types)} types "
                "(tokenizer.ggml.tokens / scores / token_type)", where="tokenizer.ggml.tokens")

        def special(key: str, default: int | None) -> int | None:
            v = md.integer(key)
            if v is None or v in (ABSENT, -1):
                return default if default is not None and default < n else None
            if not 0 <= v < n:
                raise md.bad(key, f"= {v} is outside the vocabulary [0, {n})")
            return v

        extra_eog = [i for i in (special("tokenizer.ggml.eot_token_id", None),
                                 special("tokenizer.ggml.eom_token_id", None)) if i is not None]
        add_bos = md.boolean("tokenizer.ggml.add_bos_token")
        add_eos = md.boolean("tokenizer.ggml.add_eos_token")
        add_space_prefix = md.boolean("tokenizer.ggml.add_space_prefix")
        bos = special("tokenizer.ggml.bos_token_id", _DEFAULT_IDS["bos"])
        try:
            return cls(tokens, scores, types, bos_id=bos, eos_id=special("tokenizer.ggml.eos_token_id", _DEFAULT_IDS["eos"]),
                       unk_id=special("tokenizer.ggml.unknown_token_id", _DEFAULT_IDS["unk"]),
                       add_space_prefix=True if add_space_prefix is None else add_space_prefix,
                       add_bos=True if add_bos is None else add_bos, add_eos=bool(add_eos), eog_ids=extra_eog,
                       chat_template=md.string("tokenizer.chat_template"))
        except TokenizerError as e:
            raise TokenizerError(f"{path}: {e.message}", code=e.code, where=e.where) from None

    # ------------------------------------------------------------------ encode
    def encode(self, text: str, add_bos: bool = True, *, special: bool = False) -> list[int]:
        """Token ids of ``text`` (llama.cpp ``llama_tokenize(text, add_special=add_bos, parse_special=special)``).

        ``add_bos`` adds the vocabulary's special tokens: BOS first when ``self.add_bos``, EOS last when
        ``self.add_eos``. ``special`` also cuts control pieces (``<start_of_turn>``) out of the text; user-defined
        pieces are always cut. Empty text gives ``[bos]`` or ``[]``.

        Raises:
            TokenizerError: ``bad_text`` for a string that is not encodable as UTF-8 (a lone surrogate);
                ``bad_tokenizer`` when a character needs byte fallback and the vocabulary lacks that byte.
        """
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise TokenizerError(f"text is not valid Unicode at character {e.start}: {e.reason}",
                                 code="bad_text", where=str(e.start)) from None
        out: list[int] = []
        if add_bos and self.add_bos:
            out.append(self.bos_id)  # type: ignore[arg-type]  # checked in __init__
        prev_special = True
        for frag in self._partition(text, special) if text else ():
            if isinstance(frag, int):
                out.append(frag)
                prev_special = True
            else:
                if self.add_space_prefix and prev_special:
                    frag = " " + frag
                self._merge(frag.replace(" ", SPACE), out)
                prev_special = False
        if add_bos and self.add_eos:
            out.append(self.eos_id)  # type: ignore[arg-type]
        return out

    def _partition(self, text: str, special: bool) -> list[str | int]:
        """Cut the user-defined (and with ``special`` control/unknown) pieces out of ``text``, longest first
        (``tokenizer_st_partition``); returns text fragments and token ids in order."""
        frags: list[str | int] = [text]
        for tid in self._cut_special if special else self._cut_user:
            piece = self.tokens[tid]
            if piece not in text:
                continue
            cut: list[str | int] = []
            for f in frags:
                if isinstance(f, int) or piece not in f:
                    cut.append(f)
                    continue
                for j, part in enumerate(f.split(piece)):
                    if j:
                        cut.append(tid)
                    if part:
                        cut.append(part)
            frags = cut
        return frags

    def _merge(self, s: str, out: list[int]) -> None:
        """``llm_tokenizer_spm_session::tokenize`` on one escaped fragment, appending to ``out``.

        Symbol ``i`` always starts at character ``i`` (merges absorb the right neighbour), so a symbol is
        ``(length, prev, next)``. A merged symbol is always a piece, hence llama.cpp's ``resegment``
        reduces to: the piece's id, else the byte tokens of its UTF-8."""
        n = len(s)
        get, scores = self.token_to_id.get, self.scores
        length = [1] * n
        prev = list(range(-1, n - 1))
        nxt = list(range(1, n + 1))
        nxt[-1] = -1
        heap: list[tuple[float, int, int, int]] = []  # (-score, left, right, merged length)
        for i in range(1, n):
            tid = get(s[i - 1 : i + 1])
            if tid is not None:
                heap.append((-scores[tid], i - 1, i, 2))
        heapq.heapify(heap)
        pop, push = heapq.heappop, heapq.heappush
        while heap:
            _, left, right, size = pop(heap)
            ln, rn = length[left], length[right]
            if ln == 0 or rn == 0 or ln + rn != size:
                continue  # stale: one side merged since
            length[left], length[right] = size, 0
            after = nxt[right]
            nxt[left] = after
            if after >= 0:
                prev[after] = left
            before = prev[left]
            if before >= 0:
                m = length[before] + size
                tid = get(s[before : before + m])
                if tid is not None:
                    push(heap, (-scores[tid], before, left, m))
            if after >= 0:
                m = size + length[after]
                tid = get(s[left : left + m])
                if tid is not None:
                    push(heap, (-scores[tid], left, after, m))
        i = 0
        while i != -1:
            piece = s[i : i + length[i]]
            tid = get(piece)
            if tid is not None:
                out.append(tid)
            else:
                for b in piece.encode("utf-8"):
                    bid = self._byte_token[b]
                    if bid is None:
                        raise TokenizerError(
                            f"no byte token <0x{b:02X}> for {piece!r}, which no piece of the vocabulary covers",
                            where=piece)
                    out.append(bid)
            i = nxt[i]

    # ------------------------------------------------------------------ decode
    def token_to_piece(self, token_id: int, *, special: bool = False) -> bytes:
        """The bytes of token ``token_id`` (``llama_token_to_piece(..., lstrip=0, special)``): a normal
        piece with ``▁`` -> space, a user-defined piece verbatim, the byte of a ``<0xXX>`` token, a
        control/unknown piece verbatim only when ``special``, else (and for unused/undefined) nothing.

        Raises:
            TokenizerError: ``bad_token_id``, ``token_id`` outside ``[0, n_vocab)``.
        """
        if not 0 <= token_id < len(self.tokens):
            raise TokenizerError(f"token id {token_id} outside [0, {len(self.tokens)})", code="bad_token_id",
                                 where=str(token_id))
        kind = self._kinds[token_id]
        if kind == _K_NORMAL:
            return self.tokens[token_id].replace(SPACE, " ").encode("utf-8")
        if kind == _K_BYTE:
            return bytes((self._byte_value[token_id],))
        if kind == _K_USER or (kind == _K_SPECIAL and special):
            return self.tokens[token_id].encode("utf-8")
        return b""

    def decode(self, ids: Iterable[int], *, special: bool = False) -> str:
        """Concatenated pieces of ``ids`` decoded as UTF-8 (invalid or cut sequences -> U+FFFD).

        Raises:
            TokenizerError: ``bad_token_id``, an id outside the vocabulary.
        """
        return b"".join(self.token_to_piece(int(i), special=special) for i in ids).decode("utf-8", errors="replace")

    def stream(self, *, special: bool = False) -> StreamDecoder:
        """A :class:`StreamDecoder` over this vocabulary."""
        return StreamDecoder(self, special=special)


class StreamDecoder:
    """Incremental :meth:`SPMTokenizer.decode`: ``push(id)`` returns the text that is complete so far,
    holding back the bytes of a UTF-8 sequence that later byte tokens may finish; ``flush()`` ends the
    stream (a cut sequence becomes U+FFFD). The concatenated outputs equal ``decode(ids)``.

    Raises (push): TokenizerError ``bad_token_id``."""

    def __init__(self, tokenizer: SPMTokenizer, *, special: bool = False):
        self._tok, self._special = tokenizer, special
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token_id: int) -> str:
        """Text completed by token ``token_id`` (possibly empty)."""
        return self._utf8.decode(self._tok.token_to_piece(int(token_id), special=self._special))

    def flush(self) -> str:
        """Text still held back (U+FFFD for an unfinished sequence); the decoder is then reset."""
        rest = self._utf8.decode(b"", final=True)
        self._utf8.reset()
        return rest
