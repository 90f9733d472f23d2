"""Errors the job reports as one clear line instead of a stack trace."""

from __future__ import annotations


class JobError(Exception):
    """A problem the view's author or the operator can fix; the message says what."""


class ConfigError(JobError):
    """The job's configuration (or what it implies, e.g. the output schema) is invalid."""
