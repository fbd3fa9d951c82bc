"""FastMLIRLexer / FastParser (pipeplan.dialects.parsing) are exactly xDSL's MLIRLexer / Parser, only
faster (issue 13, parse speed): same token stream (kind, start, end) or the same error, on every lit
file, on the stories260K pipeline outputs (runplan .. vmachine), and on hypothesis-generated text;
the same printed module after parsing. Contracts: [RP-IR] (the IR is the exchange format)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pipeplan.api import register_pipeplan, run_pipeline
from pipeplan.dialects.diagnostics import parse_located
from pipeplan.dialects.parsing import FastMLIRLexer, FastParser
from pipeplan.frontend.gguf_facts import read_model_facts
from pipeplan.frontend.planner import plan_run
from pipeplan.frontend.pool import pool_toml
from pipeplan.plan_types import NodePool, NodeSpec, RuntimeConfig
from xdsl.context import Context
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError
from xdsl.utils.lexer import Input
from xdsl.utils.mlir_lexer import MLIRLexer, MLIRTokenKind

REPO = Path(__file__).resolve().parents[2]
LIT_FILES = sorted((REPO / "tests" / "filecheck").rglob("*.mlir"))
STAGES = ("convert-runplan-to-pplan{{pool=\"{pool}\" prompt_len=4}}", "pplan-legalize{{target=virtual-queue}}",
          "pplan-select-implementations", "pplan-resolve-costs{{evidence=roofline}}",
          "convert-pplan-to-cplan{{binder=list-schedule}}", "convert-cplan-to-vmachine{{model=\"{model}\"}}")


def _tokens(lexer_cls: type[MLIRLexer], text: str) -> list[tuple]:
    """(kind, start, end, text) of every token up to EOF, then ('error', message) if lexing fails."""
    lexer = lexer_cls(Input(text, "<t>"))
    out: list[tuple] = []
    for _ in range(len(text) + 2):
        try:
            tok = lexer.lex()
        except ParseError as e:
            out.append(("error", str(e)))
            return out
        out.append((tok.kind, tok.span.start, tok.span.end, tok.text))
        if tok.kind is MLIRTokenKind.EOF:
            return out
    raise AssertionError("lexer did not reach EOF")


def _same_tokens(text: str) -> None:
    assert _tokens(FastMLIRLexer, text) == _tokens(MLIRLexer, text)


def _printed(module) -> str:
    buf = io.StringIO()
    Printer(stream=buf).print_op(module)
    return buf.getvalue()


@pytest.mark.parametrize("path", LIT_FILES, ids=lambda p: str(p.relative_to(REPO / "tests" / "filecheck")))
def test_lit_file_token_streams_match_xdsl(path: Path):
    """Every lit file (valid and invalid cases, comments, CHECK lines) lexes to xDSL's tokens."""
    text = path.read_text()
    _same_tokens(text)
    for chunk in text.split("// -----"):
        _same_tokens(chunk)


@pytest.fixture(scope="module")
def pipeline_texts(tmp_path_factory, stories_path) -> dict[str, str]:
    """The printed IR after each stage of stories260K on 2 stages (runplan .. vmachine)."""
    d = tmp_path_factory.mktemp("fastlex")
    nodes = tuple(NodeSpec(f"n{i}", 1 << 30, 1.0e11, 1.0e12, 1.0e9) for i in range(2))
    (d / "pool.toml").write_text(pool_toml(NodePool(nodes)))
    ctx = register_pipeplan(Context())
    module = plan_run(read_model_facts(stories_path), RuntimeConfig(max_seq_len=64), NodePool(nodes), 2)
    texts = {"runplan": _printed(module)}
    for stage in STAGES:
        run_pipeline(ctx, module, stage.format(pool=d / "pool.toml", model=stories_path))
        texts[stage.split("{")[0]] = _printed(module)
    return texts


def test_pipeline_outputs_lex_and_parse_like_xdsl(pipeline_texts):
    """Each pipeline output: same tokens, and FastParser / parse_located print the same module as Parser."""
    ctx = register_pipeplan(Context())
    assert len(pipeline_texts) == len(STAGES) + 1
    for name, text in pipeline_texts.items():
        _same_tokens(text)
        reference = _printed(Parser(ctx, text).parse_module())
        assert _printed(FastParser(ctx, text).parse_module()) == reference, name
        assert _printed(parse_located(ctx, text, "x.mlir")) == reference, name


ALPHABET = st.sampled_from(list("aZ_09x.$-#%^!@\"\\ntf<>{}()[]:,=+?/*|eE \n\t\r\f\vé²~&") +
                           ["->", "...", "{-#", "#-}", "//", "0x1F", "1.5e-3", "\\22", "\\n", "i64", "\"s\""])


@settings(max_examples=600, deadline=None)
@given(st.lists(ALPHABET, max_size=40).map("".join))
def test_random_text_lexes_like_xdsl(text: str):
    """Hypothesis: any mix of MLIR's lexical pieces (and bad characters) gives xDSL's tokens or error."""
    _same_tokens(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30))
def test_random_unicode_lexes_like_xdsl(text: str):
    """Hypothesis: arbitrary unicode text gives xDSL's tokens or xDSL's error."""
    _same_tokens(text)


def test_parse_errors_are_xdsls():
    """A malformed module fails with the same ParseError message from both parsers."""
    ctx = register_pipeplan(Context())
    for text in ('"builtin.module"() ({ %0 = "test.op"() : () -> (i32 }) : () -> ()', "module { ... }",
                 '"a.b"() {x = "unterminated} : () -> ()'):
        msgs = []
        for cls in (Parser, FastParser):
            with pytest.raises(ParseError) as e:
                cls(ctx, text).parse_module()
            msgs.append(str(e.value))
        assert msgs[0] == msgs[1]
