"""The ``genmem`` typer app: its global options, and library errors turned into one-line hints."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from langchain_genmem.cli.options import parse_time
from langchain_genmem.cli.store import Store
from langchain_genmem.errors import ConfigurationError, GenMemError, ValidationError
from langchain_genmem.shutdown import flush_on_signals

DEFAULT_PATH = Path(".genmem")


class _HintingGroup(TyperGroup):
    """Turns library errors into one-line hints and exit codes (2: input or setup, 1: other)."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except GenMemError as e:
            typer.echo(f"error: {e}", err=True)
            code = 2 if isinstance(e, (ValidationError, ConfigurationError)) else 1
            raise typer.Exit(code) from None


app = typer.Typer(
    cls=_HintingGroup,
    name="genmem",
    help="Generative Agents memory streams: import, search, explain and reflect.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _main(
    ctx: typer.Context,
    path: Annotated[
        Path,
        typer.Option(
            "--path", help="Folder of the embedded Chroma store (import and add create it)."
        ),
    ] = DEFAULT_PATH,
    chroma_host: Annotated[
        str | None,
        typer.Option("--chroma-host", help="Use the Chroma server on this host instead of --path."),
    ] = None,
    chroma_port: Annotated[
        int, typer.Option("--chroma-port", help="Port of the Chroma server.")
    ] = 8000,
    collection: Annotated[
        str, typer.Option("--collection", help="Chroma collection holding the memories.")
    ] = "genmem",
    dsn: Annotated[
        str | None,
        typer.Option(
            "--dsn",
            envvar="GENMEM_DSN",
            help="PostgreSQL + pgvector database (postgresql://user@host/db) instead of Chroma.",
        ),
    ] = None,
    persona: Annotated[
        str | None,
        typer.Option(
            "--persona",
            envvar="GENMEM_PERSONA",
            help="Persona to work on (default: the only one in the store).",
        ),
    ] = None,
    now: Annotated[
        str | None,
        typer.Option(
            "--now",
            help="Current time, e.g. '2023-02-13 18:00:00' (default: the imported simulation's "
            "curr_time, else the wall clock).",
        ),
    ] = None,
) -> None:
    """Generative Agents memory streams: import, search, explain and reflect."""
    when = parse_time(now, "--now") if now is not None else None
    ctx.obj = Store(path, chroma_host, chroma_port, collection, persona, when, dsn=dsn)
    ctx.call_on_close(ctx.obj.close)


def main() -> None:
    """Entry point of the ``genmem`` command (access times are flushed on SIGTERM/SIGINT)."""
    flush_on_signals()
    app()
