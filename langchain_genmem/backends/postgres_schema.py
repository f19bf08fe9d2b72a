"""The PostgreSQL schema of the memory stream, versioned and migrated in order.

Tables (one database may hold any number of personas; every row names its persona):

- ``memory_nodes``: one row per node with every field of the original ``ConceptNode``
  (the Dify workflow's field table), its vector as ``vector(d)`` (pgvector; ``d`` fixed per table by
  the first write, or given up front) and the vector's norm;
- ``kw_strength``: the Dify workflow's keyword strength table, written with its
  ``INSERT ... ON CONFLICT ... DO UPDATE`` upsert;
- ``genmem_personas``: one row per persona with the counters and settings the original keeps
  in ``scratch.json``, the ranges of forgotten and re-keyed node numbers, the latest
  idempotency keys of its writes, and two revisions other processes poll cheaply (``rev``:
  nodes or state changed; ``access_rev``: access times changed);
- ``genmem_schema_version``: the migrations applied.

There is no ANN index: scoring is exact over every candidate. A release that changes the
schema appends a migration to :data:`MIGRATIONS`; :func:`ensure_schema` applies the missing
ones, under an advisory lock, in one transaction each. The CHECK constraints on the
persona's settings (:data:`SETTING_CHECKS`) are not migrations: they are made from
:mod:`langchain_genmem.core.modes` and :func:`sync_checks` re-creates one whose source
changed (a new relevance mode needs no migration).
"""

from __future__ import annotations

from typing import Any

from langchain_genmem.core.errors import StorageError
from langchain_genmem.core.modes import LEXICAL_WEIGHT, RELEVANCE_MODES, sql_values

SCHEMA_LOCK = 0x67656E6D656D  # "genmem": serialises concurrent schema set-ups

MIGRATION_1 = """\
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE IF NOT EXISTS genmem_personas (
    persona_name            text PRIMARY KEY,
    rev                     bigint NOT NULL DEFAULT 0,
    access_rev              bigint NOT NULL DEFAULT 0,
    node_count              integer NOT NULL DEFAULT 0,
    type_count              jsonb NOT NULL DEFAULT '{}',
    dim                     integer,
    importance_trigger_max  double precision NOT NULL,
    importance_trigger_curr double precision NOT NULL,
    importance_ele_n        integer NOT NULL,
    recency_w               double precision NOT NULL,
    relevance_w             double precision NOT NULL,
    importance_w            double precision NOT NULL,
    recency_decay           double precision NOT NULL,
    extra                   jsonb NOT NULL DEFAULT '{}'
);

CREATE TABLE IF NOT EXISTS memory_nodes (
    persona_name   text NOT NULL,
    node_count     integer NOT NULL,
    node_id        text NOT NULL,
    type_count     integer NOT NULL,
    type           text NOT NULL CHECK (type IN ('event', 'thought', 'chat')),
    depth          integer NOT NULL,
    created_at     timestamp NOT NULL,
    expiration     timestamp,
    last_accessed  timestamp NOT NULL,
    access_rev     bigint NOT NULL DEFAULT 0,
    subject        text NOT NULL,
    predicate      text NOT NULL,
    object         text NOT NULL,
    description    text NOT NULL,
    embedding_key  text NOT NULL,
    poignancy      double precision NOT NULL,
    keywords       text[] NOT NULL,
    keywords_lower text[] NOT NULL,
    filling        jsonb,
    embedding      vector NOT NULL,
    embedding_norm double precision NOT NULL,
    PRIMARY KEY (persona_name, node_count)
);
CREATE INDEX IF NOT EXISTS memory_nodes_persona_type ON memory_nodes (persona_name, type);
CREATE INDEX IF NOT EXISTS memory_nodes_keywords ON memory_nodes USING gin (keywords_lower);
CREATE INDEX IF NOT EXISTS memory_nodes_access ON memory_nodes (persona_name, access_rev);

CREATE TABLE IF NOT EXISTS kw_strength (
    persona_name varchar NOT NULL,
    keyword      varchar NOT NULL,
    memory_type  varchar NOT NULL,
    strength     integer NOT NULL DEFAULT 1,
    PRIMARY KEY (persona_name, keyword, memory_type)
);
"""

# The persona's relevance signal and hybrid fusion weight (added with hybrid relevance);
# rows written before
# get the defaults, the original's dense relevance.
MIGRATION_2 = """\
ALTER TABLE genmem_personas
    ADD COLUMN IF NOT EXISTS relevance_mode text NOT NULL DEFAULT 'dense'
        CHECK (relevance_mode IN ('dense', 'lexical', 'hybrid')),
    ADD COLUMN IF NOT EXISTS lexical_weight double precision NOT NULL DEFAULT 0.25
        CHECK (lexical_weight BETWEEN 0 AND 1);
"""

# Conversation memories: the conversation a turn belongs to and who said it (rows written
# before are no turns: NULL).
MIGRATION_3 = """\
ALTER TABLE memory_nodes
    ADD COLUMN IF NOT EXISTS conversation text,
    ADD COLUMN IF NOT EXISTS speaker text;
"""

# One type for persona_name in every table, so a distributed PostgreSQL can colocate them by
# it (varchar to text rewrites neither the table nor its index).
MIGRATION_4 = """\
ALTER TABLE kw_strength ALTER COLUMN persona_name TYPE text;
"""

# Forgetting: the forgotten node numbers, as [first, last, rev] ranges (rows written before
# forgot nothing).
MIGRATION_5 = """\
ALTER TABLE genmem_personas
    ADD COLUMN IF NOT EXISTS forgotten jsonb NOT NULL DEFAULT '[]';
"""

# Writes that can be retried: the latest keyed writes, as [key, fingerprint, first, last]
# (rows written before remember none).
MIGRATION_6 = """\
ALTER TABLE genmem_personas
    ADD COLUMN IF NOT EXISTS idempotency jsonb NOT NULL DEFAULT '[]';
"""

# Corrections: which memories supersede which, as [old, new] node numbers (rows written
# before corrected nothing).
MIGRATION_7 = """\
ALTER TABLE genmem_personas
    ADD COLUMN IF NOT EXISTS superseded jsonb NOT NULL DEFAULT '[]';
"""

# Re-keyed turns: the kept conversation turns a forget gave a new embedded text, as
# [first, last, rev] ranges (rows written before re-keyed none).
MIGRATION_8 = """\
ALTER TABLE genmem_personas
    ADD COLUMN IF NOT EXISTS rekeyed jsonb NOT NULL DEFAULT '[]';
"""

# Append only: (version, SQL). Never edit a released migration.
MIGRATIONS: tuple[tuple[int, str], ...] = (
    (1, MIGRATION_1), (2, MIGRATION_2), (3, MIGRATION_3), (4, MIGRATION_4), (5, MIGRATION_5),
    (6, MIGRATION_6), (7, MIGRATION_7), (8, MIGRATION_8),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]

# name -> condition; the name is what PostgreSQL gave the CHECKs migration 2 wrote inline.
SETTING_CHECKS: dict[str, str] = {
    "genmem_personas_relevance_mode_check": f"relevance_mode IN ({sql_values(RELEVANCE_MODES)})",
    "genmem_personas_lexical_weight_check": LEXICAL_WEIGHT.sql("lexical_weight"),
}

VERSION_TABLE = """\
CREATE TABLE IF NOT EXISTS genmem_schema_version (
    version    integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);
"""


def schema_sql(dim: int | None = None) -> str:
    """The whole schema as one SQL script (what ``genmem db init --print`` shows).

    Args:
        dim: fix the vector size now; None leaves it to the first write.

    Returns:
        The SQL, idempotent (``IF NOT EXISTS`` throughout).
    """
    parts = [f"-- langchain-genmem schema, version {SCHEMA_VERSION}", VERSION_TABLE]
    for version, sql in MIGRATIONS:
        parts.append(f"-- migration {version}\n{sql}")
        parts.append(
            f"INSERT INTO genmem_schema_version (version) VALUES ({version}) "
            "ON CONFLICT DO NOTHING;\n"
        )
    parts.append("-- the settings' CHECK constraints, from langchain_genmem.core.modes")
    parts += [f"{sql};" for name in SETTING_CHECKS for sql in check_sql(name)]
    if dim is not None:
        parts.append(f"{fix_dimension_sql(dim)};\n")
    return "\n".join(parts)


def check_sql(name: str) -> list[str]:
    """The statements that (re)make one of :data:`SETTING_CHECKS`, its source as its comment.

    Args:
        name: the constraint.

    Returns:
        The SQL statements, in order.
    """
    condition = SETTING_CHECKS[name]
    quoted = condition.replace("'", "''")
    return [
        f"ALTER TABLE genmem_personas DROP CONSTRAINT IF EXISTS {name}, "
        f"ADD CONSTRAINT {name} CHECK ({condition})",
        f"COMMENT ON CONSTRAINT {name} ON genmem_personas IS '{quoted}'",
    ]


def sync_checks(conn: Any) -> list[str]:
    """Re-make each settings CHECK whose comment is not its current source (in a transaction).

    Args:
        conn: a psycopg connection inside ensure_schema's transaction and lock.

    Returns:
        The constraints re-made.
    """
    rows = conn.execute(
        "SELECT conname, obj_description(oid, 'pg_constraint') FROM pg_constraint "
        "WHERE conrelid = 'genmem_personas'::regclass AND contype = 'c'"
    ).fetchall()
    have = {name: comment for name, comment in rows}
    changed = [name for name, condition in SETTING_CHECKS.items() if have.get(name) != condition]
    for name in changed:
        for sql in check_sql(name):
            conn.execute(sql)
    return changed


def fix_dimension_sql(dim: int) -> str:
    """The statement that fixes the vector size of ``memory_nodes``.

    Args:
        dim: the vector size.

    Returns:
        The SQL.
    """
    return f"ALTER TABLE memory_nodes ALTER COLUMN embedding TYPE vector({int(dim)})"


def ensure_schema(conn: Any) -> int:
    """Create or migrate the schema on a connection; safe when many processes do it at once.

    Args:
        conn: a psycopg connection (autocommit off).

    Returns:
        The schema version now in place.

    Raises:
        StorageError: the database holds a newer schema than this release knows.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        conn.execute(VERSION_TABLE)
        row = conn.execute("SELECT max(version) FROM genmem_schema_version").fetchone()
        current = row[0] or 0
        if current > SCHEMA_VERSION:
            msg = (
                f"the database holds genmem schema version {current}, this release knows "
                f"{SCHEMA_VERSION}: upgrade langchain-genmem"
            )
            raise StorageError(msg)
        for version, sql in MIGRATIONS:
            if version > current:
                conn.execute(sql)
                conn.execute(
                    "INSERT INTO genmem_schema_version (version) VALUES (%s)", (version,)
                )
        sync_checks(conn)
    return SCHEMA_VERSION
