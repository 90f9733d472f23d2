"""Errors the job reports as one clear line instead of a stack trace."""

from __future__ import annotations


class JobError(Exception):
    """A problem the view's author or the operator can fix; the message says what."""


class ConfigError(JobError):
    """The job's configuration (or what it implies, e.g. the output schema) is invalid."""


# Spark's tag for `raise_error(...)`: the job raises it to refuse a record it cannot map.
_RAISED = "[USER_RAISED_EXCEPTION]"


def one_line(exc: BaseException) -> str:
    """The line that says why, for the last line of a failed run.

    A record the job refuses surfaces from Spark wrapped in Py4J and streaming
    errors whose first line is only "An error occurred while calling ..."; the
    refusal's own message is dug out of the Java trace instead.
    """
    text = str(exc)
    if _RAISED in text:
        raised = text.split(_RAISED, 1)[1].strip().splitlines()[0]
        return raised.split(" SQLSTATE:", 1)[0].strip()[:900]
    first = (text.strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first[:900]}"
