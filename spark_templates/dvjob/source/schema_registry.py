"""The writers' schemas, fetched from a registry that speaks the Confluent Schema Registry API.

A record in the Confluent wire format names its writer's schema by a global id; the job
fetches each id once (`GET /schemas/ids/{id}`). At start it learns the ids already
registered under each topic's value subject (TopicNameStrategy: `<topic>-value`), so a
replay decodes its history without a restart; an id met later (a producer's new version,
another naming strategy) is fetched then (dvjob.source.avro_decoding).

The registry's URL and credentials are the `registry` Secret's mounted files (`url`,
optional `username` and `password` for HTTP basic authentication, optional `ca.crt`):
read by code that opens them, never placed in the configuration or the environment.
Standard library only: the Spark image carries no HTTP client of its own.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dvjob.errors import ConfigError

TIMEOUT_SECONDS = 30
MAX_ANSWER_BYTES = 8 * 1024 * 1024
"""The largest answer read: a schema is kilobytes; the URL is the tenant's to choose, and the
driver's memory is not for whatever a server there sends."""
REGISTRY_KEYS = ("url", "username", "password", "ca.crt")
NOT_FOUND_CODES = frozenset({40401, 40402, 40403})
"""Confluent's error codes for an unknown subject, version and schema id."""


class SchemaNotFound(LookupError):
    """The registry answered that the id (or subject) does not exist."""


@dataclass(frozen=True)
class Registry:
    """A Confluent-compatible registry: its base URL (up to, e.g., `/apis/ccompat/v7`)."""

    url: str
    username: str | None = None
    password: str | None = None
    ca_pem: str | None = None

    @property
    def where(self) -> str:
        """host:port, for messages: a URL's path or query may carry a token."""
        parsed = urllib.parse.urlsplit(self.url)
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        return f"{parsed.hostname}:{port}"

    def _get(self, path: str) -> Any:
        request = urllib.request.Request(self.url.rstrip("/") + path, headers={
            "Accept": "application/vnd.schemaregistry.v1+json, application/json"})
        if self.username is not None:
            token = base64.b64encode(f"{self.username}:{self.password or ''}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        context = ssl.create_default_context(cadata=self.ca_pem) if self.ca_pem else None
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS,
                                        context=context) as answer:
                return parsed_answer(answer.read(MAX_ANSWER_BYTES + 1), self.where, path)
        except urllib.error.HTTPError as exc:
            body = _error_body(exc)
            if exc.code == 404 or body.get("error_code") in NOT_FOUND_CODES:
                raise SchemaNotFound(str(body.get("message") or path)) from None
            raise ConfigError(f"schema registry {self.where} answered {exc.code} for {path}: "
                              f"{body.get('message') or exc.reason}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ConfigError(f"schema registry {self.where} cannot be read ({path}): "
                              f"{reason}") from None

    def schema(self, schema_id: int) -> str:
        """The Avro schema (JSON text) of a global id; SchemaNotFound when there is none, or
        it is of another type (PROTOBUF, JSON)."""
        path = f"/schemas/ids/{schema_id}"
        answer = _fields(self._get(path), self.where, path, "schema")
        kind = str(answer.get("schemaType") or "AVRO").upper()
        if kind != "AVRO":
            raise SchemaNotFound(f"schema id {schema_id} is a {kind} schema, not Avro")
        return str(answer["schema"])

    def subject_schemas(self, subject: str) -> dict[int, str]:
        """Every version registered under `subject`, by global id (empty: no such subject)."""
        quoted = urllib.parse.quote(subject, safe="")
        try:
            versions = self._get(f"/subjects/{quoted}/versions")
        except SchemaNotFound:
            return {}
        if not isinstance(versions, list) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in versions):
            raise ConfigError(f"schema registry {self.where} answered no list of versions for "
                              f"subject {subject!r}: is url the Confluent-compatible API?")
        found: dict[int, str] = {}
        for version in versions:
            path = f"/subjects/{quoted}/versions/{version}"
            answer = _fields(self._get(path), self.where, path, "id", "schema")
            if str(answer.get("schemaType") or "AVRO").upper() == "AVRO":
                found[int(answer["id"])] = str(answer["schema"])
        return found


def parsed_answer(raw: bytes, url: str, path: str) -> Any:
    """A registry's answer as JSON: a clear error for one too large or not JSON at all."""
    if len(raw) > MAX_ANSWER_BYTES:
        raise ConfigError(f"schema registry {url} answered more than {MAX_ANSWER_BYTES} bytes "
                          f"for {path}: no schema is that large; is url a schema registry?")
    try:
        return json.loads(raw)
    except ValueError:
        raise ConfigError(f"schema registry {url} answered something that is not JSON for "
                          f"{path}: is url the Confluent-compatible API?") from None


def _fields(answer: Any, url: str, path: str, *required: str) -> dict[str, Any]:
    """`answer` when it is an object with the `required` keys, else a clear error."""
    if not isinstance(answer, dict) or any(k not in answer for k in required):
        raise ConfigError(f"schema registry {url} answered no {', '.join(required)} for "
                          f"{path}: is url the Confluent-compatible API?")
    return answer


def _error_body(exc: urllib.error.HTTPError) -> dict[str, Any]:
    try:
        body = json.loads(exc.read() or b"{}")
    except (ValueError, OSError):
        return {}
    return body if isinstance(body, dict) else {}


def registry_from(files: Mapping[str, str], secret: str) -> Registry:
    """The registry a mounted Secret's keys describe; a clear error when `url` is missing."""
    url = (files.get("url") or "").strip()
    if not url:
        raise ConfigError(f"the schema registry Secret {secret} has no key 'url' (the "
                          "registry's Confluent-compatible API, e.g. "
                          "http://registry:8080/apis/ccompat/v7)")
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise ConfigError(f"the schema registry Secret {secret}: url {url!r} is not http(s)")
    username, password = files.get("username"), files.get("password")
    if (username is None) != (password is None):
        raise ConfigError(f"the schema registry Secret {secret}: give both username and "
                          "password, or neither")
    return Registry(url=url, username=username, password=password,
                    ca_pem=files.get("ca.crt") or None)
