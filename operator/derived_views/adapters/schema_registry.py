"""A schema registry speaking the Confluent API, as the operator asks it before a job starts.

Two questions: which subjects it holds (`GET /subjects`: one request answers whether it is
there at all and whether each topic's `<topic>-value` subject exists), and the schema text
of a pinned version (`GET /subjects/<subject>/versions/<version>`). The connection is the
view's registry Secret, read the way the job reads its mounted files: `url` (the API's base,
e.g. `http://registry:8080/apis/ccompat/v7`), optional `username` and `password` (HTTP basic
authentication), optional `ca.crt` (PEM certificates to trust for https).

Every failure is one of two exceptions whose message names the registry by its host and
port, never by a credential: RegistryUnavailable (no answer, credentials refused, TLS, an
answer that is not the Confluent API) and SchemaNotFound. Standard library only.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

REGISTRY_TIMEOUT_SECONDS = 5.0
"""Per request: a pass waits this long at most for a registry that does not answer."""
ACCEPT = "application/vnd.schemaregistry.v1+json, application/json"
SUBJECT_NOT_FOUND, VERSION_NOT_FOUND = 40401, 40402
"""Confluent's error codes for an unknown subject and an unknown version of one."""
REGISTRY_SECRET_KEYS = "url, optionally username and password, and ca.crt"
MAX_ANSWER_BYTES = 8 * 1024 * 1024
"""The largest answer read: a subject list of a large registry is a few hundred kilobytes;
the URL is the tenant's to choose, and the operator's memory is not for whatever a server
there sends. Nothing of an answer is quoted back into a view's status either, beyond the
HTTP status: the operator's network is not the tenant's to read through it."""


class RegistrySecretInvalid(ValueError):
    """The registry Secret's data cannot make a connection; the message names the key."""


class RegistryUnavailable(Exception):
    """The registry could not be asked: the message says why and what to check."""


class SchemaNotFound(LookupError):
    """The registry answered: no such subject or version (or not an Avro schema)."""


@dataclass(frozen=True)
class Registry:
    """One registry connection; hashable, so caches key by it (credentials included: two
    Secrets with other credentials never share an answer), and never shows them."""

    url: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_pem: str | None = field(default=None, repr=False)

    @classmethod
    def from_secret_data(cls, data: Mapping[str, str]) -> Registry:
        """The Secret's keys; RegistrySecretInvalid names what is missing or malformed (never
        a value)."""
        url = (data.get("url") or "").strip()
        if not url:
            raise RegistrySecretInvalid(
                f"key url is missing (a schema registry Secret holds {REGISTRY_SECRET_KEYS}; url is the "
                "Confluent-compatible API, e.g. http://registry:8080/apis/ccompat/v7)")
        try:
            parsed = urllib.parse.urlsplit(url)
            parsed.port  # noqa: B018 (raises on a port that is not a number)
        except ValueError:
            parsed = None
        if parsed is None or parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise RegistrySecretInvalid("key url must be an http:// or https:// address of the "
                                        "registry's Confluent-compatible API, e.g. "
                                        "http://registry:8080/apis/ccompat/v7")
        if parsed.username or parsed.password:
            raise RegistrySecretInvalid("key url must not carry credentials: put them in the "
                                        "keys username and password")
        username, password = data.get("username") or None, data.get("password") or None
        if (username is None) != (password is None):
            raise RegistrySecretInvalid("keys username and password go together: set both or "
                                        "neither")
        ca_pem = data.get("ca.crt") or None
        if ca_pem is not None:
            try:
                ssl.create_default_context(cadata=ca_pem)
            except (ssl.SSLError, ValueError):
                raise RegistrySecretInvalid("key ca.crt holds no PEM certificate") from None
        return cls(url=url.rstrip("/"), username=username, password=password, ca_pem=ca_pem)

    def describe(self) -> str:
        """host:port, for messages: the URL's path and query may say more than needed."""
        parsed = urllib.parse.urlsplit(self.url)
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        return f"{parsed.hostname}:{port}"


def subjects(registry: Registry) -> frozenset[str]:
    """Every subject the registry holds (that its credentials may see)."""
    answer = _get(registry, "/subjects")
    if not isinstance(answer, list) or not all(isinstance(s, str) for s in answer):
        raise RegistryUnavailable(_not_the_api(registry, "/subjects", "a list of subjects"))
    return frozenset(answer)


def subject_version(registry: Registry, subject: str, version: int) -> str:
    """The Avro schema (JSON text) registered as `version` of `subject`; SchemaNotFound when
    there is no such subject or version, or it is a schema of another type."""
    path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{int(version)}"
    answer = _get(registry, path, subject=subject, version=version)
    if not isinstance(answer, dict) or not isinstance(answer.get("schema"), str):
        raise RegistryUnavailable(_not_the_api(registry, path, "a schema"))
    kind = str(answer.get("schemaType") or "AVRO").upper()
    if kind != "AVRO":
        raise SchemaNotFound(f"subject {subject} version {version} is a {kind} schema, not "
                             "Avro: pin a version of an Avro subject")
    return str(answer["schema"])


def _get(registry: Registry, path: str, *, subject: str | None = None,
         version: int | None = None) -> Any:
    where = registry.describe()
    request = urllib.request.Request(registry.url + path, headers={"Accept": ACCEPT})
    if registry.username is not None:
        token = base64.b64encode(f"{registry.username}:{registry.password or ''}".encode())
        request.add_header("Authorization", f"Basic {token.decode()}")
    try:
        context = (ssl.create_default_context(cadata=registry.ca_pem) if registry.ca_pem
                   else None)
        with urllib.request.urlopen(request, timeout=REGISTRY_TIMEOUT_SECONDS, context=context) as answer:
            body = answer.read(MAX_ANSWER_BYTES + 1)
    except urllib.error.HTTPError as exc:
        code = _error_code(exc)
        exc.close()
        if subject is not None and (exc.code == 404 or code in (SUBJECT_NOT_FOUND,
                                                                VERSION_NOT_FOUND)):
            raise SchemaNotFound(_not_found(where, subject, version, code)) from None
        raise RegistryUnavailable(_refused(registry, path, exc.code)) from None
    except ssl.SSLError as exc:  # before OSError: it is one
        raise _tls_failed(where, exc) from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, ssl.SSLError):
            raise _tls_failed(where, reason) from None
        raise RegistryUnavailable(f"schema registry at {where} cannot be reached ({reason}): "
                                  "check that it runs and the Secret's url") from None
    except OSError as exc:  # a timeout, a reset connection
        raise RegistryUnavailable(f"schema registry at {where} cannot be read ({exc}): check "
                                  "that it runs and the Secret's url") from None
    except (ValueError, http.client.HTTPException) as exc:  # not HTTP: named, never quoted
        raise RegistryUnavailable(f"schema registry at {where} does not speak HTTP "
                                  f"({type(exc).__name__}): check the Secret's url") from None
    if len(body) > MAX_ANSWER_BYTES:
        raise RegistryUnavailable(_not_the_api(registry, path, f"at most {MAX_ANSWER_BYTES} "
                                                               "bytes"))
    try:
        return json.loads(body)
    except ValueError:
        raise RegistryUnavailable(_not_the_api(registry, path, "JSON")) from None


def _tls_failed(where: str, error: ssl.SSLError) -> RegistryUnavailable:
    return RegistryUnavailable(
        f"schema registry at {where}: TLS failed ({error.reason or error}): put the "
        "certificate(s) of the registry's CA in the Secret's key ca.crt")


def _error_code(exc: urllib.error.HTTPError) -> int | None:
    """Confluent's `error_code` of a refusal, when its body has one."""
    try:
        body = json.loads(exc.read(MAX_ANSWER_BYTES) or b"{}")
    except (ValueError, OSError, http.client.HTTPException):
        return None
    code = body.get("error_code") if isinstance(body, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def _not_found(where: str, subject: str, version: int | None, code: int | None) -> str:
    if code == VERSION_NOT_FOUND:
        return (f"subject {subject} has no version {version} in the schema registry at "
                f"{where}: register it, or pin a version the subject has")
    return (f"subject {subject} (version {version}) is not in the schema registry at {where}: "
            "register the reader schema there, or fix source.avro.readerSchema.subject")


def _refused(registry: Registry, path: str, status: int) -> str:
    where = registry.describe()
    if status in (401, 403):
        return (f"schema registry at {where} refused the credentials (HTTP {status}): check "
                "the Secret's username and password")
    if status == 404:
        return _not_the_api(registry, path, "an answer")
    return (f"schema registry at {where} answered HTTP {status} to GET {path}: check that it "
            "runs and the Secret's url")


def _not_the_api(registry: Registry, path: str, wanted: str) -> str:
    base = urllib.parse.urlsplit(registry.url).path or "/"
    return (f"schema registry at {registry.describe()} did not answer GET {path} with "
            f"{wanted}: the Secret's url (path {base}) must be the registry's Confluent-"
            "compatible API, e.g. http://registry:8080/apis/ccompat/v7")
