"""The diff check: what differs between the candidate's index and the active's, and whether
that is more than the spec allows.

A row count and a key sample say the candidate holds about the same keys; a transform that
writes a wrong value into every row passes both. The diff matches the two indexes' rows by
primary key and compares their values, so a reviewer sees *what* a new revision changes
before readers see it. Pure: which columns are compared, how (row by row or by hashed key
ranges first) and the judging of what an adapter measured; the adapters measure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum

from derived_views.api.spec import DiffCheck
from derived_views.api.status import CheckOutcome

RESERVED_PREFIX = "_dv_"
"""Columns of the operator's own (never a view's): not compared."""
ROWS_PER_RANGE = 16
"""Rows per hashed key range: a range that differs costs a row-by-row comparison of this
many rows of each index, so small ranges keep the second step small when few rows differ."""
MIN_RANGES, MAX_RANGES = 1024, 1 << 22
"""Bounds of the number of key ranges (a power of two: a range is the key's hash masked)."""


class Mode(StrEnum):
    """How the two indexes were compared."""

    FULL = "full"
    """Row by row, every row: the index is small enough (fullComparisonMaxRows)."""
    HASHED = "hashed"
    """Each key range's rows hashed first; row by row only inside ranges whose hashes differ."""
    STREAMED = "streamed"
    """Both indexes read in key order side by side (OpenSearch), as far as the timeout let."""


@dataclass(frozen=True)
class ColumnChanges:
    """Rows in both indexes whose value of one column differs."""

    column: str
    rows: int
    examples: tuple[str, ...] = ()


@dataclass(frozen=True)
class DiffFound:
    """What an adapter found comparing the candidate's index with the active's."""

    mode: Mode
    candidate_rows: int
    active_rows: int
    only_candidate: int
    only_active: int
    changed: int
    """Rows in both whose values differ in at least one compared column."""
    columns: tuple[ColumnChanges, ...]
    """Every compared column, in the index's order, with the rows whose value differs."""
    only_candidate_examples: tuple[str, ...] = ()
    only_active_examples: tuple[str, ...] = ()
    changed_examples: tuple[str, ...] = ()
    not_compared: tuple[str, ...] = ()
    """Columns only one index has (a column added or dropped): not compared."""
    ranges: int = 0
    """Hashed mode: key ranges hashed, and how many differed."""
    differing_ranges: int = 0
    complete: bool = True
    """False: the timeout came first; the counts are of the rows compared (`compared`)."""
    compared: int = 0
    """Rows (of both indexes together) read before the comparison stopped."""
    in_flight: int = 0
    """Keys left out: written by a batch past the log position both indexes have reached
    (`in_flight_batches`), so their two values may differ only by that lag."""
    settled: int = 0
    """Keys that differed when first read and agreed when read again once both indexes had
    passed the position the further one had reached (OpenSearch: `settle_position`): the
    lag between the two jobs, not the transform; counted as agreeing."""

    @property
    def different(self) -> int:
        """Rows that differ in all: only in one index, or with other values."""
        return self.only_candidate + self.only_active + self.changed


@dataclass(frozen=True)
class Columns:
    """The columns a diff compares, and those it cannot (only one index has them)."""

    compared: tuple[str, ...]
    not_compared: tuple[str, ...]


class ColumnsRefused(ValueError):
    """The spec names a column an index lacks: the diff is not run (an error of the check)."""


def diff_columns(candidate: tuple[str, ...], active: tuple[str, ...],
                 key: tuple[str, ...], check: DiffCheck) -> Columns:
    """The compared columns: those both indexes actually have (their catalog's names, never
    the spec's text), or the named ones among them; the key matches rows and is not compared.
    A named column either index lacks is refused with the columns it could have named, so a
    spec can neither reach other tables' columns nor silently compare nothing."""
    in_both = [c for c in candidate if c in active and c not in key
               and not c.startswith(RESERVED_PREFIX)]
    field, named = (("columns", list(check.columns)) if check.columns
                    else ("maxChangedRowsByColumn", list(check.max_changed_rows_by_column)))
    unknown = [c for c in named if c not in in_both]
    if unknown:
        raise ColumnsRefused(
            f"diff.{field} names {', '.join(unknown)}, which "
            f"{'is' if len(unknown) == 1 else 'are'} not a compared column of both indexes "
            f"(the primary key is matched, not compared); columns both have: "
            f"{', '.join(in_both) or 'none'}")
    compared = [c for c in in_both if c in check.columns] if check.columns else in_both
    only_one = sorted({c for c in (*candidate, *active)
                       if c not in in_both and c not in key
                       and not c.startswith(RESERVED_PREFIX)})
    return Columns(tuple(compared), tuple(only_one))


EndOffsets = dict[str, dict[str, int]]
"""End offsets as a ledger row holds them: topic -> partition (as text) -> offset."""


def common_position(a: EndOffsets, b: EndOffsets) -> EndOffsets:
    """The log position both indexes have reached: per partition the lower of their end
    offsets (a partition one of them has not read yet: 0)."""
    topics = set(a) | set(b)
    return {t: {p: min(int(a.get(t, {}).get(p, 0)), int(b.get(t, {}).get(p, 0)))
                for p in set(a.get(t, {})) | set(b.get(t, {}))} for t in topics}


def past(end_offsets: EndOffsets, position: EndOffsets) -> bool:
    """Whether a batch ending at `end_offsets` read a record beyond `position`."""
    return any(int(offset) > position.get(t, {}).get(p, 0)
               for t, parts in end_offsets.items() for p, offset in parts.items())


def settle_position(a: Mapping[tuple[str, int], int], b: Mapping[tuple[str, int], int]
                    ) -> dict[tuple[str, int], int]:
    """Where both indexes must be before keys that differed are read again: per partition the
    further of the two. A key whose two values differed only because one job was behind holds,
    in each index, its value as of the same records once both are there."""
    return {p: max(a.get(p, 0), b.get(p, 0)) for p in set(a) | set(b)}


def reached(position: Mapping[tuple[str, int], int], target: Mapping[tuple[str, int], int]
            ) -> bool:
    return all(position.get(p, 0) >= offset for p, offset in target.items())


def in_flight_batches(candidate: dict[int, EndOffsets], active: dict[int, EndOffsets]
                      ) -> tuple[set[int], set[int]]:
    """Per index, the batches (by id) past the position both indexes have reached.

    Under live traffic the two jobs commit at different offsets, so a key the newer one
    already updated differs from the older one's only by the lag. A key that no batch past
    the common position wrote holds, in each index, its value as of that position (whatever
    a later batch read did not change it): those two values are comparable, the others are
    left out. Without a ledger row for an index nothing is left out."""
    if not candidate or not active:
        return set(), set()
    newest_c, newest_a = candidate[max(candidate)], active[max(active)]
    position = common_position(newest_c, newest_a)
    return ({b for b, ends in candidate.items() if past(ends, position)},
            {b for b, ends in active.items() if past(ends, position)})


def mode_for(rows: int, check: DiffCheck) -> Mode:
    """Row by row up to fullComparisonMaxRows (the larger index's rows), hashed above: a full
    comparison joins every row of both indexes, which past a few hundred thousand rows spills
    to disk under the checks' memory limit; hashing reads each index once into one small sum
    per key range, and joins only the rows of ranges that differ."""
    return Mode.FULL if rows <= check.full_comparison_max_rows else Mode.HASHED


def ranges_for(rows: int) -> int:
    """Key ranges for an index of `rows` rows: about ROWS_PER_RANGE rows each, a power of two."""
    wanted = max(MIN_RANGES, min(MAX_RANGES, rows // ROWS_PER_RANGE))
    return 1 << max(0, math.ceil(math.log2(wanted)))


def allowed_rows(threshold: int | str, active_rows: int) -> int:
    """Rows a threshold allows: the count itself, or the share of the active's rows (rounded
    down: "1%" of 150 rows allows 1)."""
    if isinstance(threshold, int):
        return threshold
    return math.floor(Decimal(threshold.rstrip("%")) * active_rows / 100)


def _shown(threshold: int | str, active_rows: int) -> str:
    allowed = allowed_rows(threshold, active_rows)
    rows = f"{allowed} row{'s' if allowed != 1 else ''}"
    return rows if isinstance(threshold, int) else f"{rows} ({threshold} of {active_rows})"


def _examples(examples: tuple[str, ...]) -> str:
    return f" (e.g. {', '.join(examples)})" if examples else ""


def observed_text(found: DiffFound) -> str:
    """One line for the status: how it compared, what differs, a few keys."""
    how = {Mode.FULL: "row by row",
           Mode.HASHED: f"hashed, {found.differing_ranges} of {found.ranges} key ranges "
                        "compared row by row",
           Mode.STREAMED: "streamed in key order"}[found.mode]
    whole = "" if found.complete else f"; stopped at the timeout after {found.compared} rows"
    parts = [f"{found.different} of {found.active_rows} rows differ ({how}{whole}): "
             f"{found.only_candidate} only in the candidate"
             f"{_examples(found.only_candidate_examples)}, {found.only_active} only in the "
             f"active{_examples(found.only_active_examples)}, {found.changed} changed"
             f"{_examples(found.changed_examples)}"]
    changed = [c for c in found.columns if c.rows]
    if changed:
        parts.append("by column: " + ", ".join(f"{c.column} {c.rows}" for c in changed))
    if found.not_compared:
        parts.append(f"not compared (in one index only): {', '.join(found.not_compared)}")
    if found.settled:
        parts.append(f"{found.settled} key{'s' if found.settled != 1 else ''} differed only "
                     "while one job was behind the other (agreed when read again)")
    if found.in_flight:
        parts.append(f"{found.in_flight} key{'s' if found.in_flight != 1 else ''} left out: "
                     "written past the log position both indexes have reached; "
                     f"{found.different} of the {settled_keys(found)} compared is "
                     f"{scaled(found.different, found)} of the whole")
    return "; ".join(parts)


def expected_text(check: DiffCheck, active_rows: int) -> str:
    parts = [f"at most {_shown(check.max_changed_rows, active_rows)} differ"]
    parts.extend(f"{column} at most {_shown(threshold, active_rows)}"
                 for column, threshold in check.max_changed_rows_by_column.items())
    return "; ".join(parts)


MAX_IN_FLIGHT_SHARE = 0.5
"""Above this share of the keys left out as in flight, a run does not judge: what it compared
is too small a part of the index to stand for the whole (the next run, with the two jobs
closer, may)."""


def settled_keys(found: DiffFound) -> int:
    """Keys compared: those of the larger index less the ones left out as in flight."""
    return max(0, max(found.candidate_rows, found.active_rows) - found.in_flight)


def scaled(rows: int, found: DiffFound) -> int:
    """What differs among the keys compared, scaled to the whole index (rounded up): the keys
    left out as in flight are those the traffic touched, not those the transform changed,
    so the compared ones stand for them. Without keys left out: the count itself."""
    if not found.in_flight:
        return rows
    settled = settled_keys(found)
    whole = max(found.candidate_rows, found.active_rows)
    return rows if settled == 0 else math.ceil(rows * whole / settled)


def over(check: DiffCheck, found: DiffFound) -> list[str]:
    """What is over its threshold: `all` and the columns, in the spec's order (judged on the
    counts scaled to the whole index when keys were left out as in flight)."""
    out = []
    if scaled(found.different, found) > allowed_rows(check.max_changed_rows, found.active_rows):
        out.append("all")
    by_column = {c.column: c.rows for c in found.columns}
    out.extend(column for column, threshold in check.max_changed_rows_by_column.items()
               if scaled(by_column.get(column, 0), found)
               > allowed_rows(threshold, found.active_rows))
    return out


def judge_diff(check: DiffCheck, found: DiffFound) -> tuple[CheckOutcome, str, str]:
    """(outcome, observed, expected). A comparison the timeout stopped fails if what it
    already found is too much (the counts only grow), else it could not decide: an error
    that says to give it longer."""
    observed, expected = observed_text(found), expected_text(check, found.active_rows)
    whole = max(found.candidate_rows, found.active_rows)
    if found.in_flight and found.in_flight > MAX_IN_FLIGHT_SHARE * whole:
        return (CheckOutcome.Error, f"{observed}; too few keys compared to judge (more than "
                                    f"{MAX_IN_FLIGHT_SHARE:.0%} in flight): judged again at "
                                    "the next run", expected)
    if over(check, found):
        return CheckOutcome.Failed, observed, expected
    if not found.complete:
        return (CheckOutcome.Error, f"{observed}; compare the rest within a longer "
                                    "cutover.checks.timeoutSeconds", expected)
    return CheckOutcome.Passed, observed, expected
