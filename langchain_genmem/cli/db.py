"""``genmem db``: the PostgreSQL schema (seed 001), shown or created.

``genmem db init --print`` writes the SQL a DBA can review and run; ``genmem --dsn URL db
init`` creates or migrates the schema in that database (the library also does it on first
use, when the role may create tables).

Example:
    .. code-block:: console

        $ genmem db init --print --dim 384 > genmem.sql
        $ GENMEM_DSN=postgresql://genmem@localhost/genmem genmem db init --dim 384
"""

from __future__ import annotations

from typing import Annotated

import typer

from langchain_genmem.backends.postgres_schema import SCHEMA_VERSION, schema_sql
from langchain_genmem.cli.app import app
from langchain_genmem.cli.store import store_of
from langchain_genmem.errors import ValidationError

db_app = typer.Typer(
    name="db",
    help="The PostgreSQL schema: print it, or create/migrate it in --dsn.",
    no_args_is_help=True,
)
app.add_typer(db_app)


@db_app.command("init")
def init(
    ctx: typer.Context,
    print_only: Annotated[
        bool,
        typer.Option("--print", help="Print the SQL instead of running it (no database needed)."),
    ] = False,
    dim: Annotated[
        int | None,
        typer.Option(
            "--dim", min=1, help="Fix the vector size now (default: the first write fixes it)."
        ),
    ] = None,
) -> None:
    """Create or migrate the schema in the --dsn database, or print its SQL."""
    if print_only:
        typer.echo(schema_sql(dim), nl=False)
        return
    store = store_of(ctx)
    if not store.dsn:
        msg = "--dsn: give the PostgreSQL database (or set GENMEM_DSN), or use --print"
        raise ValidationError(msg, field="dsn")
    from langchain_genmem.backends.postgres import PostgresBackend

    PostgresBackend(store.dsn, dim=dim, min_size=0).close()
    typer.echo(f"schema version {SCHEMA_VERSION} ready in {store.where()}")
