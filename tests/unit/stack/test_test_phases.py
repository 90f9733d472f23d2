"""`dvstack test`'s phases: which pytest runs, their joint status, their merged times."""

from __future__ import annotations

from dvstack.test_phases import exit_status, merge_timings, phases


def test_two_phases_parallel_then_alone() -> None:
    assert phases(["-m", "not slow"], 3) == [
        ("shared", ["-n", "3", "--dist", "loadfile", "--no-loadscope-reorder", "-m", "not slow"]),
        ("exclusive", ["-m", "not slow"])]


def test_one_plain_run_when_the_caller_distributes_or_parallelism_is_off() -> None:
    assert phases(["-n", "2", "tests/unit"], 3) == [("", ["-n", "2", "tests/unit"])]
    assert phases(["--numprocesses=2"], 3) == [("", ["--numprocesses=2"])]
    assert phases(["-p", "no:xdist"], 3) == [("", ["-p", "no:xdist"])]
    assert phases(["tests/unit"], 1) == [("", ["tests/unit"])]


def test_a_phase_with_nothing_to_run_is_no_failure() -> None:
    assert exit_status([0, 5]) == 0
    assert exit_status([5, 0]) == 0
    assert exit_status([5, 5]) == 5
    assert exit_status([1, 0]) == 1
    assert exit_status([0, 2]) == 2
    assert exit_status([5, 1]) == 1


def test_merged_times_add_walls_and_setups() -> None:
    merged = merge_timings([
        {"phase": "shared", "wall_seconds": 100.0,
         "files": [{"name": "a.py", "seconds": 30.0}, {"name": "b.py", "seconds": 70.0}],
         "fixtures": [{"name": "stack (session)", "seconds": 1.5, "setups": 3}]},
        {"phase": "exclusive", "wall_seconds": 20.0,
         "files": [{"name": "c.py", "seconds": 50.0}],
         "fixtures": [{"name": "stack (session)", "seconds": 0.5, "setups": 1}]}])
    assert merged["wall_seconds"] == 120.0
    assert merged["phases"] == {"shared": 100.0, "exclusive": 20.0}
    assert [f["name"] for f in merged["files"]] == ["b.py", "c.py", "a.py"]
    assert merged["fixtures"] == [{"name": "stack (session)", "seconds": 2.0, "setups": 4}]
