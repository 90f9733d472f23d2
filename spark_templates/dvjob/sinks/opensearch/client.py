"""The OpenSearch client of the job's sink: from the environment, and its failures as one line.

The operator passes the sink Secret's keys as DV_OPENSEARCH_URL and the optional
DV_OPENSEARCH_USERNAME / DV_OPENSEARCH_PASSWORD pair (docs/sinks.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from opensearchpy import OpenSearch
from opensearchpy.exceptions import TransportError

from dvjob.errors import ConfigError, JobError

REQUEST_TIMEOUT_SECONDS = 120.0


class OpenSearchUnavailableError(JobError):
    """A request to OpenSearch failed as a whole (connection, authentication, rights)."""


class Failing:
    """Turns a failed request into one line naming the server and the step."""

    def __init__(self, what: str) -> None:
        self.what = what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 _tb: Any) -> None:
        if isinstance(exc, TransportError):
            raise OpenSearchUnavailableError(
                f"{self.what} failed: {_transport_cause(exc)}") from exc


def _transport_cause(exc: TransportError) -> str:
    info = exc.info if isinstance(exc.info, dict) else {}
    error = info.get("error")
    if isinstance(error, dict):
        return f"{exc.status_code} {error.get('type')}: {error.get('reason')}"
    return f"{exc.status_code} {exc.error}"


def redacted_url(url: str) -> str:
    """The URL without credentials, for the job's log."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def client_from(values: Mapping[str, str]) -> tuple[OpenSearch, str]:
    """A client configured by DV_OPENSEARCH_URL and the optional DV_OPENSEARCH_USERNAME /
    DV_OPENSEARCH_PASSWORD pair (the sink Secret's keys url, username and password, see
    dvjob.credentials); it connects on first use."""
    url = values.get("DV_OPENSEARCH_URL", "")
    if not url:
        raise ConfigError("DV_OPENSEARCH_URL is not set: the job needs the OpenSearch URL "
                          "(the sink Secret's key `url`)")
    if urlsplit(url).scheme not in ("http", "https"):
        raise ConfigError(f"DV_OPENSEARCH_URL {redacted_url(url)!r}: give an http:// or "
                          "https:// URL")
    user = values.get("DV_OPENSEARCH_USERNAME") or None
    password = values.get("DV_OPENSEARCH_PASSWORD") or None
    if (user is None) != (password is None):
        raise ConfigError("DV_OPENSEARCH_USERNAME and DV_OPENSEARCH_PASSWORD go together (the "
                          "sink Secret's keys `username` and `password`): set both or neither")
    auth = (user, password) if user is not None and password is not None else None
    client = OpenSearch(hosts=[url], http_auth=auth, timeout=REQUEST_TIMEOUT_SECONDS,
                        max_retries=3, retry_on_timeout=True)
    return client, url
