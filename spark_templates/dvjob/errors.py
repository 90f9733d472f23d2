"""Errors the job reports as one clear line instead of a stack trace."""

from __future__ import annotations

import os
from collections.abc import Mapping


class JobError(Exception):
    """A problem the view's author or the operator can fix; the message says what."""


class ConfigError(JobError):
    """The job's configuration (or what it implies, e.g. the output schema) is invalid."""


class NullKeyError(JobError):
    """A row has a NULL primary-key column; no sink can key a row by NULL.

    Raised under the bad-record policy `fail` (dvjob.sinks.contract.null_key_error), whichever
    sink found the row.
    """


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


# Kubernetes' default terminationMessagePath: the kubelet shows what the container
# wrote there as its `state.terminated.message`, keeping at most 4 KiB.
TERMINATION_LOG = "/dev/termination-log"
MAX_TERMINATION_MESSAGE_BYTES = 4096


def write_termination_message(message: str, environ: Mapping[str, str] = os.environ) -> None:
    """Leave the one-line cause where Kubernetes carries it to the pod's status.

    DV_TERMINATION_MESSAGE_PATH (set by the local stack) wins; the default path
    is used only when it exists, i.e. when a kubelet mounted it: outside a
    container /dev/termination-log is no file to create.  A path that cannot be
    written is ignored: the message is also the log's last line.
    """
    path = environ.get("DV_TERMINATION_MESSAGE_PATH") or (
        TERMINATION_LOG if os.path.exists(TERMINATION_LOG) else "")
    if not path:
        return
    data = message.encode()[:MAX_TERMINATION_MESSAGE_BYTES].decode(errors="ignore").encode()
    try:
        with open(path, "wb") as fh:
            fh.write(data)
    except OSError:
        pass
