"""Connections to an OpenSearch sink: the Secret's keys, and one client per cluster and user.

An OpenSearch client is a pool of HTTP connections already, so the operator keeps one client
per (url, username) for its lifetime, its connection pool bounded by DV_SINK_POOL_SIZE, rather
than one per pass.
"""

from __future__ import annotations

import logging
import threading
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field

from opensearchpy import OpenSearch

_REQUEST_TIMEOUT_SECONDS = 30
# The client logs every request at INFO and every 404 at WARNING (an alias not made yet is a
# 404 on each pass): that would drown the operator's log. A failure that matters raises, and
# the pass reports it in the view's status and in the operator's log.
logging.getLogger("opensearch").setLevel(logging.ERROR)
_SECRET_KEYS = "url and optionally username and password"


@dataclass(frozen=True)
class OpenSearchCredentials:
    url: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    @classmethod
    def from_secret_data(cls, data: Mapping[str, str]) -> OpenSearchCredentials:
        """The Secret's keys; ValueError names what is missing or malformed (never a value)."""
        url = (data.get("url") or "").strip()
        if not url:
            raise ValueError(f"key url is missing (an OpenSearch sink Secret holds {_SECRET_KEYS})")
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError("key url must be an http:// or https:// address of the cluster, "
                             "e.g. https://search.example:9200")
        if parsed.username or parsed.password:
            raise ValueError("key url must not carry credentials: put them in the keys username "
                             "and password")
        username, password = data.get("username") or None, data.get("password") or None
        if (username is None) != (password is None):
            raise ValueError("keys username and password go together: set both or neither")
        return cls(url=url.rstrip("/"), username=username, password=password)

    def client(self, pool_size: int) -> OpenSearch:
        auth = (self.username, self.password) if self.username and self.password else None
        return OpenSearch(hosts=[self.url], http_auth=auth, timeout=_REQUEST_TIMEOUT_SECONDS,
                          pool_maxsize=pool_size, max_retries=0, retry_on_timeout=False)


class OpenSearchClients:
    """One client per cluster and user, made on first use (SinkPools keeps this per kind)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._clients: dict[tuple[str, str | None], tuple[OpenSearchCredentials, OpenSearch]] = {}
        self._lock = threading.Lock()

    def client(self, creds: OpenSearchCredentials) -> OpenSearch:
        key = (creds.url, creds.username)
        with self._lock:
            held = self._clients.get(key)
            if held is None or held[0] != creds:  # first use, or the password was rotated
                if held is not None:
                    held[1].close()
                held = (creds, creds.client(self.size))
                self._clients[key] = held
            return held[1]
