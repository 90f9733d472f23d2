"""Spark DDL of `source.schema`, checked without Spark: a pure parser of its small grammar.

The job parses the DDL with Spark (`DataType.fromDDL`) only once its driver has
started, minutes after the apply; this parser finds the same mistakes within
the first reconcile pass. It refuses only what Spark refuses for certain
(an unknown type, a field without a type, unbalanced brackets, trailing text,
reserved names) and lets anything it does not understand through, so that the
job, not this module, has the last word on a DDL it might accept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

RESERVED_PREFIXES = ("_kafka_", "_debezium_")
"""Prefixes of the metadata columns the job adds (spark_templates/dvjob/parse.py)."""

PRIMITIVE_TYPES = frozenset({
    "boolean", "tinyint", "byte", "smallint", "short", "int", "integer", "bigint", "long",
    "float", "real", "double", "date", "timestamp", "timestamp_ntz", "timestamp_ltz",
    "string", "character", "char", "varchar", "binary", "decimal", "dec", "numeric", "void",
    "variant", "time",
})
"""Type names of Spark 4's DataTypeAstBuilder (case-insensitive)."""
INTERVAL_UNITS = frozenset({"year", "month", "day", "hour", "minute", "second", "to"})

_TOKEN = re.compile(r"""\s*(?:
    (?P<quoted>`(?:[^`]|``)*`)
  | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<word>\w+)
  | (?P<punct>[<>(),:])
)""", re.VERBOSE)


class DdlError(ValueError):
    """The DDL is certainly invalid; the message says where, in Spark's words."""


class Unsure(Exception):
    """The DDL uses syntax this parser does not model (e.g. DEFAULT)."""


@dataclass(frozen=True)
class Field:
    name: str
    nested: tuple[str, ...]
    """Names of the struct fields anywhere inside the field's type."""


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    at: int


def _tokens(ddl: str) -> list[_Token]:
    tokens: list[_Token] = []
    position = 0
    while position < len(ddl):
        if ddl[position:].strip() == "":
            break
        match = _TOKEN.match(ddl, position)
        if match is None or match.lastgroup is None:
            start = len(ddl) - len(ddl[position:].lstrip())
            raise DdlError(f"[PARSE_SYNTAX_ERROR] Syntax error at or near "
                           f"'{ddl[start:start + 1]}' (position {start + 1})")
        kind = match.lastgroup
        tokens.append(_Token(kind, match.group(kind), match.start(kind)))
        position = match.end()
    return tokens


class _Parser:
    def __init__(self, ddl: str) -> None:
        self.tokens = _tokens(ddl)
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
            raise DdlError(f"[PARSE_SYNTAX_ERROR] Syntax error at or near '{token.text}' "
                           f"(position {token.at + 1}): expected '{text}'")

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
            raise DdlError(f"[PARSE_SYNTAX_ERROR] Syntax error at or near '{token.text}' "
                           f"(position {token.at + 1}): expected a field name")
        return token.text

    def fields(self, closing: str | None) -> list[Field]:
        """`name [:] TYPE [NOT NULL] [COMMENT '...']`, comma-separated, up to `closing`."""
        fields: list[Field] = []
        while True:
            name = self.identifier()
            self.accept(":")
            token = self.peek()
            if token is None or token.text in (",", ">"):
                raise DdlError(f"[PARSE_SYNTAX_ERROR] field {name!r} has no type: write "
                               f"'{name} STRING' (or another Spark type)")
            nested = self.data_type()
            if self.accept("not"):
                self.expect_word("null")
            if self.word() in ("default", "generated", "collate"):
                raise Unsure
            if self.accept("comment") and self.next().kind != "string":
                raise DdlError("[PARSE_SYNTAX_ERROR] COMMENT needs a quoted string")
            fields.append(Field(name, nested))
            token = self.peek()
            if token is None or (closing is not None and token.text == closing):
                return fields
            self.expect(",")
            if closing is None and self.peek() is None:
                return fields  # a trailing comma: unsure whether Spark minds, so let it by

    def expect_word(self, word: str) -> None:
        token = self.next()
        if token.text.lower() != word:
            raise DdlError(f"[PARSE_SYNTAX_ERROR] Syntax error at or near '{token.text}' "
                           f"(position {token.at + 1}): expected {word.upper()}")

    def data_type(self) -> tuple[str, ...]:
        """Parse one type; the struct field names inside it."""
        token = self.next()
        name = token.text.lower()
        if token.kind != "word":
            raise DdlError(f"[PARSE_SYNTAX_ERROR] Syntax error at or near '{token.text}' "
                           f"(position {token.at + 1}): expected a type")
        if name == "array":
            self.expect("<")
            inner = self.data_type()
            self.expect(">")
            return inner
        if name == "map":
            self.expect("<")
            keys = self.data_type()
            self.expect(",")
            values = self.data_type()
            self.expect(">")
            return keys + values
        if name == "struct":
            self.expect("<")
            if self.accept(">"):
                return ()
            fields = self.fields(">")
            self.expect(">")
            return tuple(n for f in fields for n in (f.name, *f.nested))
        if name == "interval":
            while self.word() in INTERVAL_UNITS:
                self.next()
            return ()
        if name not in PRIMITIVE_TYPES:
            raise DdlError(f'[UNSUPPORTED_DATATYPE] Unsupported data type "{token.text.upper()}" '
                           f"(position {token.at + 1})")
        if self.accept("("):
            while not self.accept(")"):
                parameter = self.next()
                if parameter.kind != "word" and parameter.text != ",":
                    raise DdlError(f"[PARSE_SYNTAX_ERROR] Syntax error at or near "
                                   f"'{parameter.text}' (position {parameter.at + 1})")
        if self.word() == "collate":
            self.next()
            self.identifier()
        return ()


def parse_schema(ddl: str) -> list[Field] | None:
    """The top-level fields of a `source.schema` DDL, None when unsure (the job decides).

    Raises DdlError when Spark would certainly refuse it.
    """
    parser = _Parser(ddl)
    if not parser.tokens:
        raise DdlError("must list one or more 'name TYPE' fields")
    try:
        first, second = parser.word(), (parser.tokens[1].text if len(parser.tokens) > 1 else "")
        if first == "struct" and second == "<":
            parser.next()
            parser.expect("<")
            fields = [] if parser.accept(">") else parser.fields(">")
            if not fields:
                raise DdlError("must list one or more 'name TYPE' fields")
            parser.expect(">")
        elif len(parser.tokens) == 1 or (first in PRIMITIVE_TYPES | {"array", "map"}
                                         and second in ("<", "(")):
            raise DdlError("must list one or more 'name TYPE' fields (one name or type alone "
                           "is not a schema)")
        else:
            fields = parser.fields(None)
        leftover = parser.peek()
        if leftover is not None:
            raise DdlError(f"[PARSE_SYNTAX_ERROR] Syntax error at or near '{leftover.text}' "
                           f"(position {leftover.at + 1})")
    except Unsure:
        return None
    clashes = [f.name for f in fields if f.name.lower().startswith(RESERVED_PREFIXES)]
    if clashes:
        raise DdlError(f"{', '.join(clashes)}: names starting with "
                       f"{' or '.join(map(repr, RESERVED_PREFIXES))} are reserved for Kafka "
                       "and Debezium metadata")
    return fields
