"""Keyword strengths in PostgreSQL: a write that names the strengths it changed stores only them.

A commit or a forget given ``strength_changes`` upserts the strengths it names (their values
in the state) and deletes those the state no longer holds, without reading the persona's
other strengths; without it, the stored strengths are compared with the state's, as before.
Either way the table ends equal to the state.
"""

from __future__ import annotations

import psycopg
import pytest

from langchain_genmem.backends.postgres import PostgresBackend
from langchain_genmem.core.state import StreamState
from tests.support.forgetting import commit_nodes, random_vectors

PERSONA = "玛丽亚"
VOCABULARY = {"event": {f"词{i}": 1 + i % 7 for i in range(500)},
              "thought": {f"想{i}": 2 for i in range(50)}}


@pytest.fixture
def dsn(request, tmp_path):
    from tests.support.fixtures import open_store

    with open_store(request, "postgres", tmp_path) as store:
        yield store.dsn


def stored(dsn: str) -> dict[str, dict[str, int]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT memory_type, keyword, strength FROM kw_strength "
                            "WHERE persona_name = %s", (PERSONA,)).fetchall()
    out: dict[str, dict[str, int]] = {"event": {}, "thought": {}}
    for kind, keyword, strength in rows:
        out.setdefault(kind, {})[keyword] = strength
    return out


def with_strengths(state: StreamState, strengths: dict[str, dict[str, int]]) -> StreamState:
    return state.model_copy(update={"rev": state.rev + 1, "kw_strength": strengths})


def recorded(monkeypatch) -> list[str]:
    sent: list[str] = []
    execute = psycopg.Cursor.execute

    def recording(self, query, params=None, **kw):
        sent.append(str(query))
        return execute(self, query, params, **kw)

    monkeypatch.setattr(psycopg.Cursor, "execute", recording)
    return sent


def reads_every_strength(sent: list[str]) -> bool:
    return any(sql.startswith("SELECT memory_type, keyword, strength FROM kw_strength")
               for sql in sent)


def test_a_commit_and_a_forget_naming_their_changes_store_only_them(dsn, monkeypatch):
    backend = PostgresBackend(dsn)
    state = commit_nodes(backend, PERSONA, random_vectors(6, 8))
    state = with_strengths(state, {t: dict(m) for t, m in VOCABULARY.items()})
    backend.write_state(PERSONA, state)  # changes unknown: compared, all 550 stored
    assert stored(dsn) == VOCABULARY

    sent = recorded(monkeypatch)
    changes = {"event": {"词3": 9, "新": 1}}
    grown = {"event": {**state.kw_strength["event"], "词3": 9, "新": 1},
             "thought": state.kw_strength["thought"]}
    state = with_strengths(state, grown)
    backend.commit(PERSONA, [], state, strength_changes=changes)
    assert not reads_every_strength(sent)  # its keywords, not the persona's
    assert stored(dsn) == grown

    sent.clear()
    kept_events = {k: v for k, v in grown["event"].items() if k not in ("词3", "词4")}
    shrunk = {"event": {**kept_events, "词5": 1}, "thought": {}}
    forgetting = state.forgetting([2, 3]).model_copy(update={"kw_strength": shrunk})
    changes = {"event": {"词3": 0, "词4": 0, "词5": 1},
               "thought": {k: 0 for k in VOCABULARY["thought"]}}
    backend.forget(PERSONA, [2, 3], forgetting, strength_changes=changes)
    assert not reads_every_strength(sent)
    monkeypatch.undo()
    assert stored(dsn) == shrunk
    assert backend.read_state(PERSONA) == forgetting
    backend.close()


def test_without_changes_the_stored_strengths_are_compared_with_the_state(dsn, monkeypatch):
    backend = PostgresBackend(dsn)
    state = commit_nodes(backend, PERSONA, random_vectors(4, 8))
    state = with_strengths(state, {t: dict(m) for t, m in VOCABULARY.items()})
    backend.write_state(PERSONA, state)
    sent = recorded(monkeypatch)
    smaller = {"event": {"词1": 5}, "thought": {"想1": 2}}
    forgetting = state.forgetting([1]).model_copy(update={"kw_strength": smaller})
    backend.forget(PERSONA, [1], forgetting)
    assert reads_every_strength(sent)
    monkeypatch.undo()
    assert stored(dsn) == smaller
    backend.close()
