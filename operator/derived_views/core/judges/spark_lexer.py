"""Spark SQL text as Spark 4.0's lexer (SqlBaseLexer) reads it: comments, strings, quoted names.

The operator judges a view's SQL with sqlglot, whose lexer is not Spark's: a
`--` comment ending in a backslash goes on to the next line in Spark and not in
sqlglot, and Spark substitutes `${env:X}` before it lexes at all. Where the two
could read the same text differently, the text is refused here, naming why; the
rest is handed to sqlglot with comments blanked out as Spark drops them (newlines
kept, so positions in sqlglot's messages still point at the author's text) and
raw strings spelt as plain ones.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

HINT_BODY = re.compile(r"[A-Za-z0-9_,().\s]*")
"""What a hint (`/*+ BROADCAST(e) */`) may hold: Spark lexes a hint's inside as SQL and
sqlglot does not, so anything that could open a string or comment there is refused."""
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class SqlTextError(ValueError):
    """Text Spark and sqlglot could read differently, or that Spark rewrites before reading."""


@dataclass(frozen=True)
class Lexed:
    text: str
    """The SQL with comments blanked and raw strings spelt as plain ones, for sqlglot."""
    words: tuple[str, ...]
    """Upper-cased words outside strings, comments and quoted names, in order."""


def lex(sql: str) -> Lexed:
    """`sql` read as Spark reads it; SqlTextError naming the first ambiguous construct."""
    if "${" in sql:
        raise SqlTextError(
            "`${` asks Spark to substitute a variable before parsing (`${env:X}` would put "
            "the job's environment into the query) and the job substitutes none: remove it")
    for i, ch in enumerate(sql):
        if (ord(ch) < 32 and ch not in "\t\n\r") or ord(ch) == 127:
            raise SqlTextError(f"control character {ch!r} at {_where(sql, i)}: Spark and the "
                               "operator's check may read it differently: remove it")
    out: list[str] = []
    words: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        two = sql[i:i + 2]
        if two == "--":
            end = _line_end(sql, i)
            if sql[end - 1:end] == "\\" and sql[end:end + 1] == "\n":
                raise SqlTextError(
                    f"the `--` comment at {_where(sql, i)} ends in a backslash, which in Spark "
                    "continues the comment onto the next line: remove the backslash")
            out.append(" " * (end - i))
            i = end
        elif two == "/*" and sql[i + 2:i + 3] == "+":
            end = sql.find("*/", i + 3)
            if end < 0 or not HINT_BODY.fullmatch(sql, i + 3, end):
                raise SqlTextError(f"the hint at {_where(sql, i)} may only name tables, columns "
                                   "and numbers, and must end with */")
            out.append(sql[i:end + 2])
            i = end + 2
        elif two == "/*":
            end = _comment_end(sql, i)
            out.append(re.sub(r"[^\n]", " ", sql[i:end]))
            i = end
        elif ch in "'\"":
            end = _string_end(sql, i, raw=False)
            out.append(_as_single_quoted(sql[i + 1:end - 1], raw=False))
            i = end
        elif ch in "rR" and sql[i + 1:i + 2] in ("'", '"') and not _in_word(sql, i):
            end = _string_end(sql, i + 1, raw=True)
            out.append(_as_single_quoted(sql[i + 2:end - 1], raw=True))
            i = end
        elif ch == "`":
            end = _quoted_name_end(sql, i)
            out.append(sql[i:end])
            i = end
        elif (match := WORD.match(sql, i)) is not None:
            words.append(match.group().upper())
            out.append(match.group())
            i = match.end()
        elif ord(ch) > 127:
            raise SqlTextError(f"character {ch!r} at {_where(sql, i)} outside quotes: Spark "
                               "reads it differently from the operator's check: quote the name "
                               "with backticks or remove the character")
        else:
            out.append(ch)
            i += 1
    for first, second in itertools.pairwise(words):
        if (first, second) == ("EXECUTE", "IMMEDIATE"):
            raise SqlTextError("EXECUTE IMMEDIATE runs a string as SQL that no check has read")
    return Lexed("".join(out), tuple(words))


def _where(sql: str, i: int) -> str:
    line = sql.count("\n", 0, i) + 1
    return f"line {line}, column {i - (sql.rfind(chr(10), 0, i) + 1) + 1}"


def _in_word(sql: str, i: int) -> bool:
    return i > 0 and (sql[i - 1].isalnum() or sql[i - 1] == "_")


def _line_end(sql: str, i: int) -> int:
    """The index of the first CR or LF at or after `i` (or the end)."""
    for j in range(i, len(sql)):
        if sql[j] in "\r\n":
            return j
    return len(sql)


def _comment_end(sql: str, start: int) -> int:
    """The index after the `*/` that closes the comment at `start`; nesting and an unclosed
    comment are refused (Spark nests bracketed comments, other readers may not)."""
    end = sql.find("*/", start + 2)
    if end < 0:
        raise SqlTextError(f"the /* comment at {_where(sql, start)} is not closed: end it "
                           "with */")
    inner = sql.find("/*", start + 2, end)
    if inner >= 0:
        raise SqlTextError(f"a /* comment inside the comment at {_where(sql, start)}: Spark "
                           "nests bracketed comments, so where it ends depends on the reader: "
                           "remove the inner /*")
    return end + 2


def _string_end(sql: str, start: int, *, raw: bool) -> int:
    """The index after the quote that closes the literal opened at `start`. Spark takes a
    backslash as an escape (not in a raw string); a doubled quote ends one literal and opens
    the next, which Spark and sqlglot both join."""
    quote, i = sql[start], start + 1
    while i < len(sql):
        if sql[i] == "\\" and not raw:
            i += 2
        elif sql[i] == quote:
            return i + 1
        else:
            i += 1
    raise SqlTextError(f"the string opened at {_where(sql, start)} is not closed")


def _quoted_name_end(sql: str, start: int) -> int:
    i = start + 1
    while i < len(sql):
        if sql[i] == "`":
            if sql[i + 1:i + 2] != "`":
                return i + 1
            i += 2
        else:
            i += 1
    raise SqlTextError(f"the `name` opened at {_where(sql, start)} is not closed")


def _as_single_quoted(body: str, *, raw: bool) -> str:
    """The literal as a single-quoted, backslash-escaped string of the same value and extent."""
    chars, i = [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and not raw:
            chars.append(body[i:i + 2])
            i += 2
            continue
        chars.append("\\\\" if ch == "\\" else "\\'" if ch == "'" else ch)
        i += 1
    return "'" + "".join(chars) + "'"
