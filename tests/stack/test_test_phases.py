"""`dvstack test`'s phases: which pytest runs, their joint status, their merged times."""

from __future__ import annotations

import itertools
from pathlib import Path

from dvstack.testing import phases as test_phases
from dvstack.testing.phases import exit_status, in_phase, merge_timings, phases


def test_parallel_then_alone_beside_the_unit_tests() -> None:
    assert phases(["-m", "not slow"], 3) == [
        [("shared", ["-n", "3", "--dist", "loadfile", "--no-loadscope-reorder",
                     "-m", "not slow"])],
        [("all_namespaces", ["-m", "not slow"]), ("services_only", ["-m", "not slow"])],
        [("exclusive", ["-m", "not slow"]), ("unit", ["-m", "not slow"])]]


def test_one_plain_run_when_the_caller_distributes_or_parallelism_is_off() -> None:
    assert phases(["-n", "2", "tests/unit"], 3) == [[("", ["-n", "2", "tests/unit"])]]
    assert phases(["--numprocesses=2"], 3) == [[("", ["--numprocesses=2"])]]
    assert phases(["-p", "no:xdist"], 3) == [[("", ["-p", "no:xdist"])]]
    assert phases(["tests/unit"], 1) == [[("", ["tests/unit"])]]


def test_each_test_in_exactly_one_phase() -> None:
    for exclusive, all_namespaces, unit, services_only in itertools.product((False, True),
                                                                            repeat=4):
        if unit and services_only:
            continue  # folders: a file is under one of them at most
        said = {"exclusive": exclusive, "all_namespaces": all_namespaces, "unit": unit,
                "services_only": services_only}
        homes = [p for p in test_phases.PHASES if in_phase(p, **said)]
        assert len(homes) == 1, (said, homes)
        assert in_phase("", **said)


def test_a_marker_places_a_test_before_its_folder() -> None:
    """An exclusive unit test still runs alone; an `all_namespaces` test under a
    services-only folder still runs with no other test's views."""
    assert in_phase("exclusive", exclusive=True, all_namespaces=True, unit=True,
                    services_only=False)
    assert in_phase("all_namespaces", exclusive=False, all_namespaces=True, unit=False,
                    services_only=True)
    assert in_phase("shared", exclusive=False, all_namespaces=False, unit=False,
                    services_only=False)
    assert not in_phase("shared", exclusive=False, all_namespaces=False, unit=False,
                        services_only=True)


def test_a_phase_with_nothing_to_run_is_no_failure() -> None:
    assert exit_status([0, 5]) == 0
    assert exit_status([5, 0]) == 0
    assert exit_status([5, 5]) == 5
    assert exit_status([1, 0]) == 1
    assert exit_status([0, 2]) == 2
    assert exit_status([5, 1]) == 1


def test_merged_times_add_walls_and_setups() -> None:
    merged = merge_timings([
        {"phase": "shared", "step": 0, "wall_seconds": 100.0,
         "files": [{"name": "a.py", "seconds": 30.0}, {"name": "b.py", "seconds": 70.0}],
         "fixtures": [{"name": "stack (session)", "seconds": 1.5, "setups": 3}]},
        {"phase": "exclusive", "step": 1, "wall_seconds": 20.0,
         "files": [{"name": "c.py", "seconds": 50.0}],
         "fixtures": [{"name": "stack (session)", "seconds": 0.5, "setups": 1}]},
        {"phase": "unit", "step": 1, "wall_seconds": 15.0, "files": [], "fixtures": []}])
    assert merged["wall_seconds"] == 120.0  # exclusive and unit ran at the same time
    assert merged["phases"] == {"shared": 100.0, "exclusive": 20.0, "unit": 15.0}
    assert [f["name"] for f in merged["files"]] == ["b.py", "c.py", "a.py"]
    assert merged["fixtures"] == [{"name": "stack (session)", "seconds": 2.0, "setups": 4}]


def test_an_earlier_runs_phase_tables_are_cleared_before_a_run(tmp_path: Path) -> None:
    """A run of a few files selects nothing for the exclusive phase: its summary must not
    report the exclusive seconds of the last full run."""
    for phase in ("shared", "exclusive", "unit"):
        test_phases.timing_file(tmp_path, phase).write_text('{"wall_seconds": 400}')
    test_phases.clear_timings(tmp_path, [["shared"], ["exclusive", "unit"]])
    assert list(tmp_path.iterdir()) == []
    assert test_phases.write_merged(tmp_path, [["shared"], ["exclusive", "unit"]]) is None


def test_the_tests_spell_the_phases_names_as_the_stack_does() -> None:
    """The tests read them without importing the stack (tests/support/results.py)."""
    from support import results

    assert results.PHASE_ENV == test_phases.PHASE_ENV
    assert results.FILE_SECONDS == test_phases.FILE_SECONDS
    for phase in ("", "unit", "shared"):
        assert results.timing_name(phase) == test_phases.timing_file(Path("."), phase).name
