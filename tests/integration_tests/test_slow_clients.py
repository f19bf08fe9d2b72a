"""Slow clients are cut off: `genmem serve` closes a connection whose headers take too long and
answers 408 to a body that takes too long, while other clients are served."""

from __future__ import annotations

import json
import socket
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.genmem_server import GenmemServer

KEY = "slow-clients-key-0123456789"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> GenmemServer:
    store = tmp_path_factory.mktemp("slow") / "store"
    with GenmemServer(store, "--api-key", KEY, "--create", "--header-timeout", "0.5",
                      "--body-timeout", "0.5") as srv:
        yield srv


def connect(server: GenmemServer) -> socket.socket:
    sock = socket.create_connection((server.host, server.port), timeout=5)
    sock.settimeout(5)
    return sock


def read_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def healthz(server: GenmemServer) -> dict:
    with urllib.request.urlopen(f"{server.url}/healthz", timeout=5) as reply:  # noqa: S310
        return json.loads(reply.read())


def test_a_connection_that_never_finishes_its_headers_is_closed(server: GenmemServer) -> None:
    slow = [connect(server) for _ in range(20)]
    for sock in slow:
        sock.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    assert healthz(server)["status"] == "ok"  # served beside them
    started = time.monotonic()
    assert all(read_all(sock) == b"" for sock in slow)  # closed, nothing answered
    assert time.monotonic() - started < 4


def test_a_body_that_takes_too_long_answers_408(server: GenmemServer) -> None:
    sock = connect(server)
    body = json.dumps({"persona_name": "伊莎贝拉", "focal_text": "派对"}).encode()
    sock.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 + f"Authorization: Bearer {KEY}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                 + body[:5])
    reply = read_all(sock)
    assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
    assert b'"field":null' in reply or b"body: not received within 0.5 seconds" in reply


def test_a_kept_alive_connection_has_the_deadline_again_after_a_response(
    server: GenmemServer,
) -> None:
    sock = connect(server)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    first = b""
    while b"\r\n\r\n" not in first:
        first += sock.recv(65536)
    head, _, body = first.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length")))
    while len(body) < length:
        body += sock.recv(65536)
    assert head.startswith(b"HTTP/1.1 200") and json.loads(body)["status"] == "ok"
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # never finished
    assert read_all(sock) == b""


def test_healthz_states_the_deadlines_the_server_runs_with(server: GenmemServer) -> None:
    limits = healthz(server)["limits"]
    assert limits["header seconds"] == 0.5 and limits["body seconds"] == 0.5


def test_the_deadlines_default_to_the_declared_ones(tmp_path: Path) -> None:
    from langchain_genmem.operations.fields import BODY_TIMEOUT, HEADER_TIMEOUT

    with GenmemServer(tmp_path / "store", "--api-key", KEY, "--create") as srv:
        limits = healthz(srv)["limits"]
    assert (limits["header seconds"], limits["body seconds"]) == (HEADER_TIMEOUT, BODY_TIMEOUT)
