"""`genmem --dsn` / `GENMEM_DSN` and `genmem db init` against the suite's PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from langchain_genmem.backends.postgres_schema import SCHEMA_VERSION
from langchain_genmem.cli import app

ISABELLA = (Path(__file__).resolve().parents[2] / "data" / "generative_agents"
            / "July1_the_ville_isabella_maria_klaus-step-3-2/personas/Isabella Rodriguez")
ASSOC = ISABELLA / "bootstrap_memory" / "associative_memory"
runner = CliRunner()


@pytest.fixture
def dsn(request, tmp_path):
    from tests.support.fixtures import open_store

    with open_store(request, "postgres", tmp_path) as store:
        yield store.dsn


def test_import_then_search_through_the_dsn_option_and_variable(dsn):
    done = runner.invoke(app, ["--dsn", dsn, "import", str(ASSOC), "--no-progress"])
    assert done.exit_code == 0, done.output
    assert "Imported Isabella Rodriguez: 14 memories" in done.output
    assert "PostgreSQL database" in done.output and "password" not in done.output
    found = runner.invoke(app, ["search", "情人节派对 at Hobbs Cafe", "-k", "3", "--json"],
                          env={"GENMEM_DSN": dsn})
    assert found.exit_code == 0, found.output
    rows = json.loads(found.output)
    assert len(rows) == 3 and all(r["node_id"].startswith("node_") for r in rows)
    with psycopg.connect(dsn) as conn:
        count = conn.execute("SELECT count(*) FROM memory_nodes WHERE persona_name = %s",
                             ("Isabella Rodriguez",)).fetchone()
    assert count == (14,)


def test_db_init_prints_or_creates_the_schema(dsn):
    printed = runner.invoke(app, ["db", "init", "--print", "--dim", "384"])
    assert printed.exit_code == 0
    sql = printed.output
    for part in ("CREATE EXTENSION IF NOT EXISTS vector", "CREATE TABLE IF NOT EXISTS memory_nodes",
                 "keywords       text[]", "filling        jsonb", "kw_strength",
                 "USING gin (keywords_lower)", "vector(384)", "genmem_schema_version"):
        assert part in sql, part
    made = runner.invoke(app, ["--dsn", dsn, "db", "init", "--dim", "384"])
    assert made.exit_code == 0, made.output
    assert f"schema version {SCHEMA_VERSION} ready" in made.output
    with psycopg.connect(dsn) as conn:
        typmod = conn.execute("SELECT atttypmod FROM pg_attribute WHERE attrelid = "
                              "'memory_nodes'::regclass AND attname = 'embedding'").fetchone()
    assert typmod == (384,)


def test_db_init_without_a_database_says_what_to_give():
    result = runner.invoke(app, ["db", "init"], env={"GENMEM_DSN": ""})
    assert result.exit_code == 2
    assert "--dsn" in result.output and "Traceback" not in result.output


def test_an_unreachable_database_is_one_line():
    bad = "postgresql://nobody:secret@/nowhere?host=/nonexistent-socket-dir&connect_timeout=1"
    result = runner.invoke(app, ["--dsn", bad, "stats"])
    assert result.exit_code == 1
    assert "could not open PostgreSQL" in result.output and "secret" not in result.output
