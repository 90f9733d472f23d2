"""The commit-msg hook `make setup` installs (.githooks/commit-msg), run as git runs it: on a
file holding the message, refusing with a reason or accepting."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

HOOK = Path(__file__).resolve().parents[2] / ".githooks" / "commit-msg"
WHY = "\n\nThe pass read the Secret twice; once is enough.\n"


def run(tmp_path: Path, message: str) -> subprocess.CompletedProcess[str]:
    file = tmp_path / "COMMIT_EDITMSG"
    file.write_text(message)
    return subprocess.run(["bash", str(HOOK), str(file)], capture_output=True, text=True,
                          timeout=30, check=False)


@pytest.mark.parametrize("message", [
    "Read the sink Secret once per pass" + WHY,
    "e2e: hold the migration to a log that lost its beginning" + WHY,
    "Process a batch's rows in one COPY" + WHY,
    "Keep the subject short" + WHY + "# a comment git drops\n",
    "Merge branch 'x'\n",
    "fixup! Read the sink Secret once per pass\n",
    "x" * 72 + WHY,
])
def test_accepted(tmp_path: Path, message: str) -> None:
    done = run(tmp_path, message)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(("message", "said"), [
    ("x" * 73 + WHY, "73 characters, more than 72"),
    ("Read the sink Secret once per pass." + WHY, "full stop"),
    ("Added a cache for Secrets" + WHY, '"Added" is not the imperative'),
    ("Reads the Secret once" + WHY, '"Reads" is not the imperative'),
    ("Fixing the pass" + WHY, '"Fixing" is not the imperative'),
    ("Read the sink Secret once per pass\n", "no body"),
    ("Read the sink Secret once\nbecause\n", "second line must be blank"),
    ("# only a comment\n", "subject is empty"),
])
def test_refused_with_the_reason(tmp_path: Path, message: str, said: str) -> None:
    done = run(tmp_path, message)
    assert done.returncode == 1 and said in done.stderr, done.stderr
