"""A faster drop-in for xDSL's MLIR lexer, and a ``Parser`` that uses it (issue 13, parse speed).

:class:`FastMLIRLexer` lexes with ONE compiled regular expression (whitespace, comments and the
token in one ``match``) instead of xDSL's per-character dispatch. It yields exactly the tokens of
:class:`xdsl.utils.mlir_lexer.MLIRLexer` (kind, start, end): every case the regex does not cover
with certainty -- end of input, non-ASCII or unexpected characters, string literals with escapes,
``@"..."``, lone ``.`` -- is handed back to ``MLIRLexer.lex`` from the same position, so errors
and corner cases are xDSL's own. ``tests/unit/test_fast_lexer.py`` compares both token streams on
every lit file, on pipeline outputs and on hypothesis-generated text.

:class:`FastParser` is ``xdsl.parser.Parser`` with this lexer. Source: MLIR LangRef lexical syntax,
``xdsl/utils/mlir_lexer.py`` (xDSL 0.75).
"""

from __future__ import annotations

import re

from xdsl.context import Context
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, StringAttr
from xdsl.ir import TypeAttribute
from xdsl.parser import Parser
from xdsl.parser.generic_parser import ParserState
from xdsl.utils.lexer import Input, Span, Token
from xdsl.utils.mlir_lexer import MLIRLexer, MLIRToken, MLIRTokenKind, PunctuationSpelling

_K = MLIRTokenKind
_PUNCT = {"->": _K.ARROW, ":": _K.COLON, ",": _K.COMMA, "...": _K.ELLIPSIS, "=": _K.EQUAL, ">": _K.GREATER,
          "{": _K.L_BRACE, "(": _K.L_PAREN, "[": _K.L_SQUARE, "<": _K.LESS, "-": _K.MINUS, "+": _K.PLUS,
          "?": _K.QUESTION, "}": _K.R_BRACE, ")": _K.R_PAREN, "]": _K.R_SQUARE, "/": _K.SLASH, "*": _K.STAR,
          "|": _K.VERTICAL_BAR, "{-#": _K.FILE_METADATA_BEGIN, "#-}": _K.FILE_METADATA_END}
_PREFIX = {"#": _K.HASH_IDENT, "%": _K.PERCENT_IDENT, "^": _K.CARET_IDENT, "!": _K.EXCLAMATION_IDENT}

# group order = xDSL's dispatch order on the first character; sub-patterns are xDSL's own regexes
_TOKEN = re.compile(
    r"(?>(?://[^\n]*\n?|[ \t\n\r\f\v]+)*)"  # MLIRLexer._whitespace_regex (re.ASCII \s), atomic: never
    # given back, so a failed token match after a comment cannot re-read the comment's tail as a token
    r"(?:(?P<bare>[a-zA-Z_][a-zA-Z0-9_$.]*)"
    r"|(?P<punct>->|\{-\#|\#-\}|\.\.\.|[:,()}\[\]<>=+/*?|{-])"
    r"|(?P<at>@[a-zA-Z_][a-zA-Z0-9_$.]*)"
    r"|(?P<prefixed>[#!^%](?:[0-9]+|[a-zA-Z$._-][a-zA-Z0-9$._-]*))"
    r'|(?P<string>"[^"\\\n\v\f]*")'
    r"|(?P<hex>0x[0-9a-fA-F]+)"
    r"|(?P<float>[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?)"
    r"|(?P<int>[0-9]+))")
_STRING, _FLOAT, _INT, _BARE, _AT = _K.STRING_LIT, _K.FLOAT_LIT, _K.INTEGER_LIT, _K.BARE_IDENT, _K.AT_IDENT


def _span(start: int, end: int, input: Input[str]) -> Span[str]:
    """``Span(start, end, input)`` without the frozen dataclass ``__init__`` (same fields, same class)."""
    span = object.__new__(Span)
    d = span.__dict__
    d["start"] = start
    d["end"] = end
    d["input"] = input
    return span


class FastToken(Token[MLIRTokenKind, str]):
    """A ``Token`` whose ``text`` is computed once when lexed (xDSL recomputes it on every access)."""

    text: str  # type: ignore[assignment]  # a plain attribute shadows Token.text (a property)

    def __init__(self, kind: MLIRTokenKind, span: Span[str], text: str):
        self.kind = kind
        self.span = span
        self.text = text


FastToken.text = None  # type: ignore[assignment]  # the class attribute hides the property; instances set it


class FastMLIRLexer(MLIRLexer):
    """``MLIRLexer`` driven by one compiled regex; same tokens (kind, span), same errors."""

    def lex(self) -> MLIRToken:
        content = self.input.content
        if not isinstance(content, str):
            return super().lex()
        m = _TOKEN.match(content, self.pos)
        if m is None:  # EOF, errors, escapes, non-ASCII: xDSL decides
            return super().lex()
        group = m.lastgroup or ""  # always one named alternative
        start, end = m.span(group)
        if group == "bare":
            kind = _BARE
        elif group == "punct":
            kind = _PUNCT[content[start:end]]
        elif group == "prefixed":
            kind = _PREFIX[content[start]]
        elif group == "string":
            kind = _STRING
        elif group == "int" or group == "hex":
            kind = _INT
        elif group == "float":
            kind = _FLOAT
        else:
            kind = _AT
        self.pos = end
        return FastToken(kind, _span(start, end, self.input), content[start:end])


_INT_TYPE = re.compile(r"(?:i|si|ui)[0-9]+|index")
_NUMBER_TYPES: dict[str, TypeAttribute] = {}
"""``i64``, ``index``, ``f32``, ... by spelling: types are immutable values, so one instance is shared."""


class FastParser(Parser):
    """``xdsl.parser.Parser`` over :class:`FastMLIRLexer` (same results, faster lexing), with the hottest
    token helpers reading the parser state directly (same behaviour, fewer property calls)."""

    def __init__(self, ctx: Context, input: str | bytes, name: str = "<unknown>") -> None:
        super().__init__(ctx, "", name)
        text = input.decode("utf-8") if isinstance(input, bytes) else input
        self._parser_state = ParserState(FastMLIRLexer(Input(text, name)))
        self._int_attrs: dict[tuple[str, str | None], IntegerAttr] = {}

    def _consume_token(self, expected_kind: MLIRTokenKind | None = None) -> MLIRToken:
        state = self._parser_state
        token = state.current_token
        assert expected_kind is None or token.kind == expected_kind, (
            f"Unexpected token {token}, expected {expected_kind}")
        state.current_token = state.lexer.lex()
        return token

    def _parse_optional_token(self, expected_kind: MLIRTokenKind) -> MLIRToken | None:
        state = self._parser_state
        token = state.current_token
        if token.kind is not expected_kind:
            return None
        state.current_token = state.lexer.lex()
        return token

    def parse_optional_characters(self, text: str) -> str | None:
        state = self._parser_state
        if state.current_token.text != text:
            return None
        state.current_token = state.lexer.lex()
        return text

    def parse_optional_punctuation(self, punctuation: PunctuationSpelling) -> PunctuationSpelling | None:
        kind = _PUNCT.get(punctuation)
        assert kind is not None, "'parse_optional_punctuation' must be called with a valid punctuation"
        return punctuation if self._parse_optional_token(kind) is not None else None

    def parse_optional_str_literal(self) -> str | None:
        token = self._parser_state.current_token
        if token.kind is _STRING and isinstance(token, FastToken) and "\\" not in token.text:
            self._parser_state.current_token = self._parser_state.lexer.lex()
            return token.text[1:-1]  # no escapes: the contents are the text between the quotes
        return super().parse_optional_str_literal()

    def _parse_optional_integer_or_float_type(self) -> TypeAttribute | None:
        token = self._parser_state.current_token
        if token.kind is not _BARE:
            return None
        cached = _NUMBER_TYPES.get(token.text)
        if cached is None:
            cached = super()._parse_optional_integer_or_float_type()
            if cached is not None:
                _NUMBER_TYPES[token.text] = cached
            return cached
        self._parser_state.current_token = self._parser_state.lexer.lex()
        return cached

    def parse_optional_builtin_int_or_float_attr(self) -> IntegerAttr | FloatAttr | None:
        # ``42`` or ``42 : i64`` (an integer literal, optionally an integer type): one shared attribute per
        # spelling in this input (attributes are immutable values); anything else is xDSL's own path
        state = self._parser_state
        token = state.current_token
        if token.kind is not _INT or not isinstance(token, FastToken):
            return super().parse_optional_builtin_int_or_float_attr()
        lexer = state.lexer
        pos = lexer.pos
        after = lexer.lex()
        type_name = None
        if after.kind is _K.COLON:
            spelled = lexer.lex()
            if spelled.kind is _BARE and _INT_TYPE.fullmatch(spelled.text):
                type_name = spelled.text
            else:
                type_name = ""  # some other type: not cached
        key = (token.text, type_name)
        if type_name != "" and (cached := self._int_attrs.get(key)) is not None:
            state.current_token = after if type_name is None else lexer.lex()
            return cached
        lexer.pos = pos
        attr = super().parse_optional_builtin_int_or_float_attr()
        if type_name != "" and isinstance(attr, IntegerAttr):
            self._int_attrs[key] = attr
        return attr

    def _parse_optional_string_attr(self) -> StringAttr | None:
        value = self.parse_optional_str_literal()
        return None if value is None else StringAttr(value)


__all__ = ["FastMLIRLexer", "FastParser", "FastToken"]
