"""The modes and ranges are declared once (core.modes); every place that lists them agrees."""

from __future__ import annotations

import typing

import pytest
from pydantic import TypeAdapter

from langchain_genmem.backends import postgres_schema
from langchain_genmem.cli import options
from langchain_genmem.core import modes, state, validation
from langchain_genmem.core.errors import ValidationError
from langchain_genmem.core.modes import (
    DECAY,
    LEXICAL_WEIGHT,
    POIGNANCY,
    RECENCY,
    RECENCY_MODES,
    RELEVANCE,
    RELEVANCE_MODES,
    describe,
)
from langchain_genmem.numerics import scoring
from langchain_genmem.service import schemas


def test_every_mode_is_explained_once():
    assert tuple(RECENCY) == RECENCY_MODES == typing.get_args(modes.RecencyMode)
    assert tuple(RELEVANCE) == RELEVANCE_MODES == typing.get_args(modes.RelevanceMode)
    assert set(modes.DATABASE_RELEVANCE_MODES) <= set(RELEVANCE_MODES)


def test_the_command_line_offers_the_modes_with_their_help():
    assert [m.value for m in options.RecencyMode] == list(RECENCY_MODES)
    assert [m.value for m in options.Relevance] == list(RELEVANCE_MODES)
    helps = {typing.get_args(a)[1].help for a in (options.Mode, options.RelevanceOption)}
    assert any(describe(RECENCY) in h for h in helps)
    assert any(describe(RELEVANCE) in h for h in helps)


def test_the_service_schema_lists_the_modes_and_ranges():
    props = schemas.RetrieveRequest.model_json_schema()["properties"]
    assert props["recency_mode"]["enum"] == list(RECENCY_MODES)
    assert describe(RECENCY) in props["recency_mode"]["description"]
    assert props["relevance"]["enum"] == list(RELEVANCE_MODES)
    assert describe(RELEVANCE) in props["relevance"]["description"]
    assert (props["lexical_weight"]["minimum"], props["lexical_weight"]["maximum"]) == (
        LEXICAL_WEIGHT.low, LEXICAL_WEIGHT.high)
    assert (props["recency_decay"]["exclusiveMinimum"], props["recency_decay"]["maximum"]) == (
        DECAY.low, DECAY.high)


def test_the_mcp_tool_lists_the_modes_for_a_model():
    pytest.importorskip("mcp")
    from langchain_genmem.operations.derive import parameters
    from langchain_genmem.service import mcp

    hints = {p.name: p.annotation for name in ("recall", "remember")
             for p in parameters(*mcp.TOOL_ARGUMENTS[name])}
    schema = TypeAdapter(hints["relevance"]).json_schema()
    listed = [s for s in schema.get("anyOf", [schema]) if "enum" in s][0]["enum"]
    assert listed == list(RELEVANCE_MODES)
    assert describe(RELEVANCE, for_model=True) in schema["description"]
    poignancy = TypeAdapter(hints["poignancy"]).json_schema() if "poignancy" in hints else None
    if poignancy is not None:
        assert poignancy.get("maximum", POIGNANCY.high) == POIGNANCY.high


def test_the_library_validates_by_the_same_declaration():
    assert typing.get_args(state.StreamState.model_fields["relevance_mode"].annotation) == (
        RELEVANCE_MODES)
    for mode in RELEVANCE_MODES:
        assert validation.relevance_mode(mode) == mode
    with pytest.raises(ValidationError, match=", ".join(RELEVANCE_MODES)):
        validation.relevance_mode("nope")
    with pytest.raises(ValidationError, match=DECAY.text().replace("(", r"\(").replace("]", r"\]")):
        validation.decay(0)
    assert scoring.RECENCY_MODES == RECENCY_MODES  # the old names, the same values


def test_sql_derives_its_checks():
    check = postgres_schema.SETTING_CHECKS["genmem_personas_relevance_mode_check"]
    assert check == f"relevance_mode IN ({modes.sql_values(RELEVANCE_MODES)})"
    script = postgres_schema.schema_sql()
    for name in postgres_schema.SETTING_CHECKS:
        for sql in postgres_schema.check_sql(name):
            assert sql in script


def test_the_database_keeps_its_checks_in_step(postgres_server):
    psycopg = pytest.importorskip("psycopg")
    dsn = postgres_server.create_database("t_modes_checks")
    try:
        with psycopg.connect(dsn) as conn:
            postgres_schema.ensure_schema(conn)
            # a database made by an older release: its CHECK misses a mode, no comment
            conn.execute("ALTER TABLE genmem_personas DROP CONSTRAINT "
                         "genmem_personas_relevance_mode_check, ADD CONSTRAINT "
                         "genmem_personas_relevance_mode_check CHECK (relevance_mode = 'dense')")
            conn.commit()
            postgres_schema.ensure_schema(conn)
            rows = dict(conn.execute(
                "SELECT conname, obj_description(oid, 'pg_constraint') FROM pg_constraint "
                "WHERE conrelid = 'genmem_personas'::regclass AND contype = 'c'").fetchall())
            assert {n: rows.get(n) for n in postgres_schema.SETTING_CHECKS} == (
                postgres_schema.SETTING_CHECKS)
            with pytest.raises(psycopg.errors.CheckViolation), conn.transaction():
                conn.execute(
                    "INSERT INTO genmem_personas (persona_name, importance_trigger_max, "
                    "importance_trigger_curr, importance_ele_n, recency_w, relevance_w, "
                    "importance_w, recency_decay, relevance_mode) "
                    "VALUES ('p', 150, 150, 0, 1, 1, 1, 0.99, 'nope')")
            for mode in RELEVANCE_MODES:
                with conn.transaction():
                    conn.execute(
                        "INSERT INTO genmem_personas (persona_name, importance_trigger_max, "
                        "importance_trigger_curr, importance_ele_n, recency_w, relevance_w, "
                        "importance_w, recency_decay, relevance_mode) "
                        "VALUES (%s, 150, 150, 0, 1, 1, 1, 0.99, %s)", (mode, mode))
    finally:
        postgres_server.drop_database("t_modes_checks")


def test_ranges_read_as_they_check():
    assert [v in POIGNANCY for v in (1, 10, 0.5, 11)] == [True, True, False, False]
    assert [v in DECAY for v in (1, 0.99, 0, 1.01)] == [True, True, False, False]
    assert validation.poignancy(10) == 10  # validation reads POIGNANCY
    with pytest.raises(ValidationError, match=f"from {POIGNANCY.low:g} .*to {POIGNANCY.high:g}"):
        validation.poignancy(11)
    assert (validation.POIGNANCY_MIN, validation.POIGNANCY_MAX) == (POIGNANCY.low, POIGNANCY.high)
