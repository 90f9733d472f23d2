"""Spark DDL of `source.schema`, checked without Spark: a pure parser of its small grammar.

The job parses the DDL with Spark (`DataType.fromDDL`) only once its driver has
started, minutes after the apply; this parser finds the same mistakes within
the first reconcile pass. The grammar it models is the whole of what Spark 4.0's
`DataType.fromDDL` reads (fields, the built-in types, NOT NULL, COMMENT, COLLATE);
Spark refuses the rest (DEFAULT, GENERATED, a trailing comma), and so does this
parser, so what it passes to Spark names no class and holds no expression.

Judging is bounded by work, not time (the core reads no clock): the text is read
once, left to right (the tokenizer never copies the rest of the text), and
refused beyond MAX_DDL_CHARS characters or MAX_NESTING levels, so the worst DDL
costs the same few milliseconds as the largest legitimate one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

from derived_views.api.spec import MAX_SCHEMA

RESERVED_PREFIXES = ("_kafka_", "_debezium_")
"""Prefixes of the metadata columns the job adds (spark_templates/dvjob/source/parse.py)."""

PRIMITIVE_TYPES = frozenset({
    "boolean", "tinyint", "byte", "smallint", "short", "int", "integer", "bigint", "long",
    "float", "real", "double", "date", "timestamp", "timestamp_ntz", "timestamp_ltz",
    "string", "character", "char", "varchar", "binary", "decimal", "dec", "numeric", "void",
    "variant", "time",
})
"""Type names of Spark 4's DataTypeAstBuilder (case-insensitive)."""
_INTERVAL_UNITS = frozenset({"year", "month", "day", "hour", "minute", "second", "to"})

MAX_DDL_CHARS = MAX_SCHEMA
"""The longest DDL judged, 32768 characters: the CRD's limit of `source.schema`, and the
limit of the DDL derived from an Avro reader schema (core.judges.avro_schema). Reading costs about
1.6 us of CPU a token on the 2-core reference machine: the slowest DDL of this length in
the hostile corpus (tests/hostile_specs_corpus.py: 50 columns nesting 64 levels, 15,800
tokens) is judged in 25 ms."""
MAX_NESTING = 64
"""Levels of STRUCT<, ARRAY< and MAP< a type may nest. Spark reads deeper types, but the
parser recurses per level (about 3 of Python's frames a level) and events nest a handful of
levels; the DDL of an accepted Avro reader schema never nests deeper (core.judges.avro_schema)."""

_TOKEN = re.compile(r"""\s*(?:
    (?P<quoted>`(?:[^`]|``)*`)
  | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<word>\w+)
  | (?P<punct>[<>(),:])
  | (?P<end>\Z)
)""", re.VERBOSE)
_BLANK = re.compile(r"\s*")


class DdlError(ValueError):
    """The DDL is certainly invalid, or beyond what is judged; the message says where, in
    Spark's words where Spark has some."""


@dataclass(frozen=True)
class Field:
    name: str
    nested: tuple[str, ...]
    """Names of the struct fields anywhere inside the field's type."""


@dataclass
class DdlWork:
    """What reading one DDL cost, counted: tests hold the reading linear by these."""

    tokens: int = 0
    matches: int = 0
    """Regular-expression matches tried, each from where the last ended."""


class _Token(NamedTuple):
    kind: str
    text: str
    at: int


def _tokens(ddl: str, work: DdlWork) -> list[_Token]:
    """The tokens, in one pass: each match starts where the previous one ended."""
    tokens: list[_Token] = []
    position = 0
    while True:
        work.matches += 1
        match = _TOKEN.match(ddl, position)
        if match is None or match.lastgroup is None:
            blank = _BLANK.match(ddl, position)
            start = blank.end() if blank is not None else position
            raise DdlError(f"[PARSE_SYNTAX_ERROR] Syntax error at or near "
                           f"'{ddl[start:start + 1]}' (position {start + 1})")
        kind = match.lastgroup
        if kind == "end":
            return tokens
        tokens.append(_Token(kind, match.group(kind), match.start(kind)))
        work.tokens += 1
        position = match.end()


def _syntax(token: _Token, expected: str = "") -> DdlError:
    return DdlError(f"[PARSE_SYNTAX_ERROR] Syntax error at or near '{token.text}' "
                    f"(position {token.at + 1}){': expected ' + expected if expected else ''}")


class _Parser:
    def __init__(self, ddl: str, work: DdlWork) -> None:
        self.tokens = _tokens(ddl, work)
        self.at = 0

    def peek(self) -> _Token | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def word(self) -> str | None:
        token = self.peek()
        return token.text.lower() if token is not None and token.kind == "word" else None

    def next(self) -> _Token:
        token = self.peek()
        if token is None:
            raise DdlError("[PARSE_SYNTAX_ERROR] Syntax error at or near end of input")
        self.at += 1
        return token

    def expect(self, text: str) -> None:
        token = self.next()
        if token.text != text:
            raise _syntax(token, f"'{text}'")

    def accept(self, text: str) -> bool:
        token = self.peek()
        if token is not None and token.text.lower() == text:
            self.at += 1
            return True
        return False

    def identifier(self) -> str:
        token = self.next()
        if token.kind == "quoted":
            return token.text[1:-1].replace("``", "`")
        if token.kind != "word":
            raise _syntax(token, "a field name")
        return token.text

    def fields(self, closing: str | None, depth: int) -> list[Field]:
        """`name [:] TYPE [NOT NULL] [COMMENT '...']`, comma-separated, up to `closing`."""
        fields: list[Field] = []
        while True:
            name = self.identifier()
            self.accept(":")
            token = self.peek()
            if token is None or token.text in (",", ">"):
                raise DdlError(f"[PARSE_SYNTAX_ERROR] field {name!r} has no type: write "
                               f"'{name} STRING' (or another Spark type)")
            nested: list[str] = []
            self.data_type(depth, nested)
            if self.accept("not"):
                self.expect_word("null")
            option = self.word()
            if option in ("default", "generated"):
                token = self.next()
                raise DdlError(f"[PARSE_SYNTAX_ERROR] Syntax error at or near '{token.text}' "
                               f"(position {token.at + 1}): field {name!r}: a view's schema "
                               f"takes no {option.upper()} expression (Spark's DDL of a type "
                               "has none): remove it")
            if self.accept("comment") and self.next().kind != "string":
                raise DdlError("[PARSE_SYNTAX_ERROR] COMMENT needs a quoted string")
            fields.append(Field(name, tuple(nested)))
            token = self.peek()
            if token is None or (closing is not None and token.text == closing):
                return fields
            self.expect(",")

    def expect_word(self, word: str) -> None:
        token = self.next()
        if token.text.lower() != word:
            raise _syntax(token, word.upper())

    def data_type(self, depth: int, names: list[str]) -> None:
        """Parse one type, adding the struct field names inside it to `names`."""
        token = self.next()
        name = token.text.lower()
        if token.kind != "word":
            raise _syntax(token, "a type")
        if name in ("array", "map", "struct"):
            if depth >= MAX_NESTING:
                raise DdlError(f"{name.upper()} at position {token.at + 1} nests deeper than "
                               f"{MAX_NESTING} levels of STRUCT, ARRAY and MAP, more than the "
                               "operator judges: flatten the schema")
            self.expect("<")
            if name == "array":
                self.data_type(depth + 1, names)
            elif name == "map":
                self.data_type(depth + 1, names)
                self.expect(",")
                self.data_type(depth + 1, names)
            elif not self.accept(">"):
                for field in self.fields(">", depth + 1):
                    names.append(field.name)
                    names.extend(field.nested)
            else:
                return
            self.expect(">")
            return
        if name == "interval":
            while self.word() in _INTERVAL_UNITS:
                self.next()
            return
        if name not in PRIMITIVE_TYPES:
            raise DdlError(f'[UNSUPPORTED_DATATYPE] Unsupported data type "{token.text.upper()}" '
                           f"(position {token.at + 1})")
        if self.accept("("):
            while not self.accept(")"):
                parameter = self.next()
                if parameter.kind != "word" and parameter.text != ",":
                    raise _syntax(parameter)
        if self.word() == "collate":
            self.next()
            self.identifier()


def parse_schema(ddl: str, work: DdlWork | None = None) -> list[Field]:
    """The top-level fields of a `source.schema` DDL.

    Raises DdlError when Spark would refuse it, or when it is beyond the judged limits
    (MAX_DDL_CHARS, MAX_NESTING): fail closed, a DDL not judged is never passed on.
    """
    if len(ddl) > MAX_DDL_CHARS:
        raise DdlError(f"{len(ddl)} characters, more than the {MAX_DDL_CHARS} a schema may "
                       "have: list only the fields the transform reads")
    try:
        fields = _top_level(_Parser(ddl, work if work is not None else DdlWork()))
    except DdlError:
        raise
    except Exception as exc:  # fail closed: a DDL the judge cannot finish is refused
        raise DdlError(f"could not be judged ({type(exc).__name__}), so it is refused: "
                       "simplify the schema") from None
    clashes = [f.name for f in fields if f.name.lower().startswith(RESERVED_PREFIXES)]
    if clashes:
        raise DdlError(f"{', '.join(clashes)}: names starting with "
                       f"{' or '.join(map(repr, RESERVED_PREFIXES))} are reserved for Kafka "
                       "and Debezium metadata")
    return fields


def _top_level(parser: _Parser) -> list[Field]:
    """The fields of a whole DDL: `STRUCT<...>` or a bare field list, and nothing after."""
    if not parser.tokens:
        raise DdlError("must list one or more 'name TYPE' fields")
    first, second = parser.word(), (parser.tokens[1].text if len(parser.tokens) > 1 else "")
    if first == "struct" and second == "<":
        parser.next()
        parser.expect("<")
        fields = [] if parser.accept(">") else parser.fields(">", 0)
        if not fields:
            raise DdlError("must list one or more 'name TYPE' fields")
        parser.expect(">")
    elif len(parser.tokens) == 1 or (first in PRIMITIVE_TYPES | {"array", "map"}
                                     and second in ("<", "(")):
        raise DdlError("must list one or more 'name TYPE' fields (one name or type alone "
                       "is not a schema)")
    else:
        fields = parser.fields(None, 0)
    leftover = parser.peek()
    if leftover is not None:
        raise _syntax(leftover)
    return fields
