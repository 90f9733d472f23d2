"""The DDL check's bounds: it reads a DDL once, left to right, up to MAX_DDL_CHARS characters
and MAX_NESTING levels, refuses past them, and refuses whatever it cannot finish (the
grammar's own cases, in Spark's words, are in test_sql_check.py)."""

from __future__ import annotations

from typing import Any

import pytest

from derived_views.core.judges import spark_ddl
from derived_views.core.judges.spark_ddl import (
    MAX_DDL_CHARS,
    MAX_NESTING,
    DdlError,
    DdlWork,
    Field,
    parse_schema,
)


class Copies(str):
    """A DDL that counts the characters copied out of it by slicing and stripping: the
    quadratic tokenizer copied the rest of the text for every token."""

    copied = 0

    def __getitem__(self, key: Any) -> str:
        part = super().__getitem__(key)
        Copies.copied += len(part)
        return part

    def strip(self, chars: str | None = None) -> str:
        Copies.copied += len(self)
        return super().strip(chars)

    def lstrip(self, chars: str | None = None) -> str:
        Copies.copied += len(self)
        return super().lstrip(chars)


def columns(count: int) -> str:
    return ", ".join(f"c{i} STRUCT<a: INT, b: ARRAY<STRING>>" for i in range(count))


def test_the_tokenizer_reads_each_character_once() -> None:
    """Twice the text is twice the tokens and matches, and no part of the text is copied."""
    small, large = DdlWork(), DdlWork()
    Copies.copied = 0
    parse_schema(Copies(columns(200)), small)
    parse_schema(Copies(columns(400)), large)
    assert Copies.copied == 0
    assert large.matches == 2 * small.matches
    assert large.tokens == 2 * small.tokens + 1  # the comma joining the two halves
    assert small.matches == small.tokens + 1  # one match per token, one finds the end
    with pytest.raises(DdlError, match=r"at or near ';' \(position"):
        parse_schema(Copies(columns(400) + " ;"))
    assert Copies.copied <= 1  # the character named in the refusal


def test_a_ddl_of_the_limit_is_read_and_one_more_character_is_not() -> None:
    ddl = "a INT, b " + "STRING" + " " * (MAX_DDL_CHARS - 15)
    assert len(ddl) == MAX_DDL_CHARS
    assert parse_schema(ddl) == [Field("a", ()), Field("b", ())]
    with pytest.raises(DdlError, match=f"{MAX_DDL_CHARS + 1} characters, more than the "
                                       f"{MAX_DDL_CHARS} a schema may have"):
        parse_schema(ddl + " ")


@pytest.mark.parametrize(("opening", "closing"), [
    ("ARRAY<", ">"), ("MAP<STRING, ", ">"), ("STRUCT<x: ", ">")])
def test_a_type_nests_at_most_max_nesting_levels(opening: str, closing: str) -> None:
    def nested(levels: int) -> str:
        return "a " + opening * levels + "INT" + closing * levels

    parse_schema(nested(MAX_NESTING))
    parse_schema("STRUCT<" + nested(MAX_NESTING) + ">")  # the top-level STRUCT<> is no level
    with pytest.raises(DdlError, match=f"nests deeper than {MAX_NESTING} levels"):
        parse_schema(nested(MAX_NESTING + 1))


def test_a_ddl_nesting_thousands_of_levels_within_the_limit_is_refused_not_recursed() -> None:
    deep = "a " + "ARRAY<" * 4000 + "INT" + ">" * 4000
    assert len(deep) < MAX_DDL_CHARS
    with pytest.raises(DdlError, match=f"ARRAY at position {3 + 6 * MAX_NESTING} nests deeper"):
        parse_schema(deep)


def test_the_names_inside_a_field_are_collected_once() -> None:
    (field,) = parse_schema("a STRUCT<b: MAP<STRING, STRUCT<c: INT>>, d: ARRAY<STRUCT<e: INT>>>")
    assert field == Field("a", ("b", "c", "d", "e"))


def test_whatever_else_goes_wrong_while_judging_is_a_refusal(monkeypatch: Any) -> None:
    def broken(*args: Any) -> None:
        raise RecursionError("maximum recursion depth exceeded")
    monkeypatch.setattr(spark_ddl._Parser, "data_type", broken)
    with pytest.raises(DdlError, match=r"could not be judged \(RecursionError\), so it is "
                                       "refused"):
        parse_schema("a INT")
