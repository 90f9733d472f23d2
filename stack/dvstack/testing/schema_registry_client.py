"""A few calls of the Confluent Schema Registry API, for tests and the demo.

Plain `urllib.request`, so the stack needs no registry client library; `url` is the
API's base (dvstack.services.schema_registry.registry_url, `schema_registry` in stack.json). A refusal
raises `RegistryError` with the status and Confluent's `error_code`, which callers check.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_TIMEOUT = 10.0


class RegistryError(Exception):
    """The registry refused a request: HTTP `status`, Confluent's `error_code` and message."""

    def __init__(self, status: int, error_code: int | None, message: str) -> None:
        super().__init__(f"HTTP {status}, error_code {error_code}: {message}")
        self.status = status
        self.error_code = error_code
        self.message = message


def _path(*segments: str) -> str:
    """URL path segments, each quoted whole (a subject may hold `/` or spaces)."""
    return "/".join(urllib.parse.quote(s, safe="") for s in segments)


def _error(exc: urllib.error.HTTPError) -> RegistryError:
    raw = exc.read().decode(errors="replace")
    exc.close()
    try:
        body = json.loads(raw)
    except ValueError:
        return RegistryError(exc.code, None, raw)
    if not isinstance(body, dict):
        return RegistryError(exc.code, None, raw)
    code = body.get("error_code")
    return RegistryError(exc.code, code if isinstance(code, int) else None,
                         str(body.get("message", raw)))


def call(url: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """One request to `url` + `/` + `path`; the decoded JSON answer, or RegistryError."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{url.rstrip('/')}/{path}", data=data, method=method,
                                 headers={"Accept": CONTENT_TYPE, "Content-Type": CONTENT_TYPE})
    try:
        with urllib.request.urlopen(req, timeout=_TIMEOUT) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        raise _error(exc) from None


def register(url: str, subject: str, schema_json: str) -> int:
    """Register an Avro schema under `subject`; its id (the same id for a known schema)."""
    answer = call(url, "POST", _path("subjects", subject, "versions"), {"schema": schema_json})
    return int(answer["id"])


def schema_by_id(url: str, schema_id: int) -> str:
    """The schema text registered with `schema_id` (what a wire-format reader needs)."""
    return str(call(url, "GET", _path("schemas", "ids", str(schema_id)))["schema"])


def set_compatibility(url: str, subject: str, level: str) -> None:
    """The subject's compatibility level (BACKWARD, FORWARD, FULL, NONE, ..._TRANSITIVE)."""
    answer = call(url, "PUT", _path("config", subject), {"compatibility": level})
    # Confluent echoes {"compatibility": ...}; Apicurio {"compatibilityLevel": ...}.
    echoed = answer.get("compatibility", answer.get("compatibilityLevel"))
    if echoed != level:
        raise RegistryError(200, None, f"asked for {level}, the registry answered {answer}")


def is_compatible(url: str, subject: str, schema_json: str, version: str = "latest") -> bool:
    """Whether `schema_json` may follow `version` of `subject` under its compatibility level."""
    answer = call(url, "POST", _path("compatibility", "subjects", subject, "versions", version),
                  {"schema": schema_json})
    return bool(answer["is_compatible"])
