"""The registry adapter against a stand-in speaking the Confluent API on loopback (stdlib
http.server, plain and TLS): the Secret's keys, basic authentication, a trusted ca.crt, and
each failure as one exception whose message names the host and never a credential.
(The real registry of the local stack: tests/integration/adapters.)"""

from __future__ import annotations

import base64
import http.server
import json
import re
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from derived_views.adapters import schema_registry
from derived_views.adapters.schema_registry import (
    Registry,
    RegistrySecretInvalid,
    RegistryUnavailable,
    SchemaNotFound,
    subject_version,
    subjects,
)

SCHEMA = '{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]}'
PASSWORD = "s3cr3t-never-shown"


class Answers(http.server.BaseHTTPRequestHandler):
    """GET /api/subjects and /api/subjects/<s>/versions/<v>, as Confluent answers them."""

    auth: str | None = None
    seen: ClassVar[list[tuple[str, str | None]]] = []

    def do_GET(self) -> None:
        self.seen.append((self.path, self.headers.get("Authorization")))
        if self.auth is not None and self.headers.get("Authorization") != self.auth:
            return self._send(401, {"error_code": 40101, "message": "Unauthorized"})
        if self.path == "/api/subjects":
            return self._send(200, ["orders-value", "payments-value"])
        if self.path == "/html/subjects":
            return self._send(200, "<html>not the API</html>", raw=True)
        answers = {
            "/api/subjects/orders-value/versions/3": (200, {
                "subject": "orders-value", "version": 3, "id": 7, "schema": SCHEMA}),
            "/api/subjects/orders-value/versions/4": (404, {
                "error_code": 40402, "message": "Version 4 not found."}),
            "/api/subjects/proto-value/versions/1": (200, {
                "subject": "proto-value", "version": 1, "id": 8, "schemaType": "PROTOBUF",
                "schema": "syntax = \"proto3\";"}),
            "/api/subjects/broken/versions/1": (500, {"error_code": 50001,
                                                      "message": "Error in the backend"}),
        }
        status, body = answers.get(self.path, (404, {"error_code": 40401,
                                                    "message": "Subject not found."}))
        self._send(status, body)

    def _send(self, status: int, body: Any, raw: bool = False) -> None:
        data = (body if raw else json.dumps(body)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def serve(handler: type[Answers], context: ssl.SSLContext | None = None
          ) -> Iterator[tuple[str, int]]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True)
    thread.start()
    try:
        yield server.server_address[0], server.server_address[1]  # type: ignore[misc]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture()
def plain() -> Iterator[str]:
    class Open(Answers):
        seen: ClassVar[list[tuple[str, str | None]]] = []
    for host, port in serve(Open):
        yield f"http://{host}:{port}/api"


@pytest.fixture()
def guarded() -> Iterator[tuple[str, type[Answers]]]:
    class Guarded(Answers):
        auth = "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
        seen: ClassVar[list[tuple[str, str | None]]] = []
    for host, port in serve(Guarded):
        yield f"http://{host}:{port}/api", Guarded


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


@pytest.fixture()
def tls(certificate: tuple[Path, Path]) -> Iterator[str]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    for host, port in serve(Answers, context):
        yield f"https://{host}:{port}/api"


# the Secret ---------------------------------------------------------------------------------

@pytest.mark.parametrize("data, said", [
    ({}, "key url is missing"),
    ({"url": "registry:8081"}, "must be an http:// or https:// address"),
    ({"url": "ftp://registry/api"}, "must be an http:// or https:// address"),
    ({"url": "http://registry:port/api"}, "must be an http:// or https:// address"),
    ({"url": f"http://alice:{PASSWORD}@registry/api"}, "must not carry credentials"),
    ({"url": "http://registry/api", "username": "alice"}, "go together"),
    ({"url": "https://registry/api", "ca.crt": "not a certificate"}, "holds no PEM"),
])
def test_a_secret_that_cannot_make_a_connection_says_which_key(data: dict[str, str],
                                                               said: str) -> None:
    with pytest.raises(RegistrySecretInvalid, match=said) as refused:
        Registry.from_secret_data(data)
    assert PASSWORD not in str(refused.value)


def test_a_registry_is_named_by_host_and_port_and_never_shows_its_password() -> None:
    registry = Registry.from_secret_data({"url": "https://registry.example/apis/ccompat/v7/",
                                          "username": "alice", "password": PASSWORD})
    assert registry.url == "https://registry.example/apis/ccompat/v7"
    assert registry.describe() == "registry.example:443"
    assert PASSWORD not in repr(registry)
    assert Registry(url="http://r:8081/x").describe() == "r:8081"


# answers ----------------------------------------------------------------------------------

def test_subjects_and_a_pinned_version(plain: str) -> None:
    registry = Registry(url=plain)
    assert subjects(registry) == {"orders-value", "payments-value"}
    assert subject_version(registry, "orders-value", 3) == SCHEMA


@pytest.mark.parametrize("subject, version, said", [
    ("orders-value", 4, "subject orders-value has no version 4 in the schema registry at "
                        "127.0.0.1:"),
    ("nothing-value", 1, "subject nothing-value (version 1) is not in the schema registry"),
    ("proto-value", 1, "subject proto-value version 1 is a PROTOBUF schema, not Avro"),
])
def test_what_the_registry_lacks_is_schema_not_found(plain: str, subject: str, version: int,
                                                     said: str) -> None:
    with pytest.raises(SchemaNotFound, match=re.escape(said)):
        subject_version(Registry(url=plain), subject, version)


def test_basic_authentication_is_sent_and_a_refusal_never_echoes_it(
        guarded: tuple[str, type[Answers]]) -> None:
    url, handler = guarded
    good = Registry.from_secret_data({"url": url, "username": "alice", "password": PASSWORD})
    assert subject_version(good, "orders-value", 3) == SCHEMA
    assert handler.seen[-1][1] == handler.auth
    bad = Registry.from_secret_data({"url": url, "username": "alice", "password": "wrong"})
    with pytest.raises(RegistryUnavailable, match="refused the credentials") as refused:
        subjects(bad)
    assert "HTTP 401" in str(refused.value) and "wrong" not in str(refused.value)
    assert "check the Secret's username and password" in str(refused.value)


@pytest.mark.parametrize("path, said", [
    ("/html", "did not answer GET /subjects with JSON: the Secret's url "
              "(path /html) must be the registry's Confluent-compatible API"),
    ("/elsewhere", "did not answer GET /subjects with an answer"),
])
def test_a_url_that_is_not_the_api_says_so(plain: str, path: str, said: str) -> None:
    with pytest.raises(RegistryUnavailable, match=re.escape(said)):
        subjects(Registry(url=plain.removesuffix("/api") + path))


def test_a_server_error_and_an_unreachable_registry_are_unavailable(plain: str) -> None:
    with pytest.raises(RegistryUnavailable, match="answered HTTP 500 to GET "
                                                  "/subjects/broken/versions/1"):
        subject_version(Registry(url=plain), "broken", 1)
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(RegistryUnavailable, match=f"schema registry at 127.0.0.1:{port} cannot "
                                                  "be reached"):
        subjects(Registry(url=f"http://127.0.0.1:{port}/api"))


def test_a_registry_that_does_not_answer_in_time_is_unavailable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schema_registry, "REGISTRY_TIMEOUT_SECONDS", 0.2)
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        with pytest.raises(RegistryUnavailable, match=r"127\.0\.0\.1:.*timed out"):
            subjects(Registry(url=f"http://127.0.0.1:{port}/api"))


def test_https_trusts_the_secrets_ca_and_says_so_when_it_is_missing(
        tls: str, certificate: tuple[Path, Path]) -> None:
    trusted = Registry.from_secret_data({"url": tls, "ca.crt": certificate[0].read_text()})
    assert subject_version(trusted, "orders-value", 3) == SCHEMA
    with pytest.raises(RegistryUnavailable, match=r"TLS failed .*put the certificate"):
        subjects(Registry(url=tls))


def test_nothing_a_server_says_is_quoted_back(plain: str) -> None:
    """The url is the tenant's: an answer's words never reach the view's status."""
    with pytest.raises(RegistryUnavailable) as refused:
        subject_version(Registry(url=plain), "broken", 1)
    assert "backend" not in str(refused.value)
    with socket.socket() as banner:  # a server that is not HTTP, saying something
        banner.bind(("127.0.0.1", 0))
        banner.listen()
        port = banner.getsockname()[1]

        def speak() -> None:
            conn, _ = banner.accept()
            conn.sendall(b"-ERR internal secret banner\r\n")
            conn.close()

        threading.Thread(target=speak, daemon=True).start()
        with pytest.raises(RegistryUnavailable, match="does not speak HTTP") as refused:
            subjects(Registry(url=f"http://127.0.0.1:{port}/api"))
    assert "banner" not in str(refused.value)


def test_an_answer_too_large_is_refused_unread(monkeypatch: pytest.MonkeyPatch,
                                               plain: str) -> None:
    monkeypatch.setattr(schema_registry, "MAX_ANSWER_BYTES", 10)
    with pytest.raises(RegistryUnavailable, match="with at most 10 bytes"):
        subjects(Registry(url=plain))
