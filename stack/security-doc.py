"""Write the generated part of docs/security.md from what the tests measured.

The hostile corpora (tests/support/corpora/hostile_transforms.py, tests/support/corpora/hostile_checks.py) are run by
unit, integration and e2e tests, which leave their verdicts in the stack's results
directory; this script turns them into the counts and tables between the markers of
docs/security.md, so the page says what was refused, where and with which words, as
last measured. Run it with `make security-doc` after the tests.
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path
from typing import Any

BEGIN, END = "<!-- generated: make security-doc -->", "<!-- end of generated part -->"
RULE_SUFFIX = "; a view's SQL may only query `events`"
SHOWN = 220


def main(results: Path, doc: Path) -> int:
    sections = [_transforms(results), _checks(results), _specs(results)]
    missing = [name for name, text in sections if text is None]
    if missing:
        print(f"missing results ({', '.join(missing)}) in {results}: run `make test` first",
              file=sys.stderr)
        return 1
    page = doc.read_text()
    if BEGIN not in page or END not in page:
        print(f"{doc} lacks the markers {BEGIN} ... {END}", file=sys.stderr)
        return 1
    head, rest = page.split(BEGIN, 1)
    _old, tail = rest.split(END, 1)
    body = "\n\n".join(text for _name, text in sections if text)
    doc.write_text(f"{head}{BEGIN}\n\n{body}\n\n{END}{tail}")
    print(f"wrote {doc}")
    return 0


def _load(path: Path) -> Any:
    return json.loads(path.read_text()) if path.is_file() else None


def _cell(text: str) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    if RULE_SUFFIX in text:
        text = text.split(RULE_SUFFIX, 1)[0] + " (+ the rule)"
    return text if len(text) <= SHOWN else text[:SHOWN] + "..."


def _counts(rows: list[dict[str, Any]], layer_of: str) -> list[str]:
    by_class: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for row in rows:
        by_class[row["class"]][row[layer_of]] += 1
    layers = sorted({row[layer_of] for row in rows})
    lines = ["| class | " + " | ".join(layers) + " | all |",
             "|---|" + "---|" * (len(layers) + 1)]
    for cls, counter in by_class.items():
        lines.append(f"| {cls} | " + " | ".join(str(counter[layer]) for layer in layers)
                     + f" | {sum(counter.values())} |")
    lines.append("| **all** | " + " | ".join(
        str(sum(c[layer] for c in by_class.values())) for layer in layers)
        + f" | {len(rows)} |")
    return lines


def _transforms(results: Path) -> tuple[str, str | None]:
    e2e = _load(results / "hostile_transforms.json")
    both = _load(results / "sql_guard_hostile.json")
    if e2e is None or both is None:
        return "hostile_transforms.json, sql_guard_hostile.json", None
    job = {row["what"]: row.get("job") for row in both}
    refused_by_job = sum(1 for message in job.values() if message)
    lines = ["### Hostile transforms", "",
             f"{len(e2e)} transforms from `tests/support/corpora/hostile_transforms.py`, applied as views to "
             "the operator on the local stack (`tests/e2e/test_hostile_transforms.py`); the "
             "earliest layer that refused each one, by class:", "",
             *_counts(e2e, "layer"), "",
             f"The job's guard, given the same {len(both)} texts on a real Spark session "
             f"(`tests/unit/dvjob/test_sql_guard.py`), refused {refused_by_job}; no "
             "SparkApplication was created for any of them.", "",
             "| class | attempt | refused at | reason | operator's message | job's message |",
             "|---|---|---|---|---|---|"]
    for row in e2e:
        lines.append(f"| {row['class']} | {_cell(row['what'])} | {row['layer']} | "
                     f"`{row['reason']}` | {_cell(row['message'])} | "
                     f"{_cell(job.get(row['what']) or '-')} |")
    return "transforms", "\n".join(lines)


def _checks(results: Path) -> tuple[str, str | None]:
    found = _load(results / "hostile_checks.json")
    if found is None:
        return "hostile_checks.json", None
    hostile, legitimate = found["hostile"], found.get("legitimate", [])
    lines = ["### Hostile cutover checks", "",
             f"{len(hostile)} check SQL texts from `tests/support/corpora/hostile_checks.py`, judged by "
             "PostgreSQL's own parser (`core/judges/assertion_sql.py`) and then, to show what the "
             "server would have done had a check got through, sent to the stack's "
             "PostgreSQL as a check role through the extended protocol "
             "(`tests/integration/adapters/test_postgres_check_protocol.py`); "
             f"{len(legitimate)} legitimate checks ran and passed. By class:", "",
             *_counts(hostile, "layer"), "",
             "| class | check SQL | operator's message | the server, had it run |",
             "|---|---|---|---|"]
    for row in hostile:
        lines.append(f"| {row['class']} | `{_cell(row['sql'])}` | {_cell(row['message'])} | "
                     f"{_cell(row.get('server') or '-')} |")
    return "checks", "\n".join(lines)


def _specs(results: Path) -> tuple[str, str | None]:
    found = _load(results / "hostile_specs.json")
    if found is None:
        return "hostile_specs.json", None
    lines = ["### Specs that would wedge the operator", "",
             "Views applied to the operator on the local stack "
             "(`tests/e2e/test_hostile_specs.py`); each ended Stalled within "
             f"{found.get('seconds_to_stalled', '?')} s and was deleted cleanly:", "",
             "| view | reason | message |", "|---|---|---|"]
    for name, condition in found.get("stalled", {}).items():
        lines.append(f"| {name} | `{condition['reason']}` | {_cell(condition['message'])} |")
    return "specs", "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
