"""Unit tests may open no network socket, and embedded Chroma still works under that rule."""

from __future__ import annotations

import socket
import uuid

import chromadb
import pytest
from pytest_socket import SocketBlockedError

pytestmark = pytest.mark.filterwarnings("ignore:A test tried to use socket")


def test_tcp_socket_to_localhost_is_blocked() -> None:
    with pytest.raises(SocketBlockedError):
        socket.socket(socket.AF_INET, socket.SOCK_STREAM).connect(("127.0.0.1", 9))
    with pytest.raises(SocketBlockedError):
        socket.create_connection(("127.0.0.1", 9), timeout=1)


def test_unix_sockets_are_allowed() -> None:
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        left.sendall(b"ok")
        assert right.recv(2) == b"ok"


def test_embedded_chroma_works_with_default_settings() -> None:
    client = chromadb.EphemeralClient()
    collection = client.create_collection(f"rules-{uuid.uuid4().hex}", embedding_function=None)
    collection.add(ids=["a"], embeddings=[[1.0, 0.0]], documents=["事件"])
    assert collection.count() == 1
    assert collection.query(query_embeddings=[[1.0, 0.0]], n_results=1)["ids"] == [["a"]]
