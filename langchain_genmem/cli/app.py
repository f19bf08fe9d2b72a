"""The ``genmem`` typer app: its global options, and library errors turned into one-line hints."""

from __future__ import annotations

import atexit
import gc
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from langchain_genmem.backends.chroma import DEFAULT_COLLECTION
from langchain_genmem.cli.options import parse_time
from langchain_genmem.cli.store import Store
from langchain_genmem.cli.usage import UsageError, is_help, usage_line
from langchain_genmem.core.errors import (
    ConcurrentWriterError,
    ConfigurationError,
    GenMemError,
    InteropError,
    ValidationError,
    error_line,
)
from langchain_genmem.memory.shutdown import flush_on_signals

DEFAULT_PATH = Path(".genmem")


# What the user gave or must set up: a bad value or option, a missing install or
# variable, a Generative Agents folder that is missing, malformed or cannot be written,
# a folder another process owns (stop it, or send the request to it). They exit with 2,
# as click's own usage errors do; the others (the store or a model failing at run time)
# with 1.
INPUT_ERRORS: tuple[type[GenMemError], ...] = (
    ValidationError, ConfigurationError, InteropError, ConcurrentWriterError,
)


def exit_code(error: GenMemError) -> int:
    """The exit code of a library error: 2 for input or setup, 1 for a failure at run time.

    Args:
        error: the error.

    Returns:
        2 or 1.
    """
    return 2 if isinstance(error, INPUT_ERRORS) else 1


class _HintingGroup(TyperGroup):
    """Turns library and usage errors into one-line hints and exit codes (:func:`exit_code`).

    Usage errors (an unknown option or command, a bad or missing value) are click's: raised
    while the global options are read (:meth:`make_context`) or a command's (:meth:`invoke`),
    each is one ``error:`` line (:func:`~langchain_genmem.cli.usage.usage_line`), exit 2.
    """

    def make_context(
        self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any
    ) -> Any:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except UsageError as e:
            raise _usage_exit(e) from None

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        _plain_flags(self, ctx)  # before --help is read: it prints the help
        return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except GenMemError as e:
            # one line, even when the message carries another library's multi-line text
            typer.echo(error_line(e), err=True)
            raise typer.Exit(exit_code(e)) from None
        except UsageError as e:
            raise _usage_exit(e) from None


def _plain_flags(command: Any, ctx: Any) -> None:
    """Show no value placeholder (typer's ``<bool>``) for a flag in help, here and below."""
    for param in command.get_params(ctx):
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        _plain_flags(sub, ctx)


def _usage_exit(error: Any) -> Exception:
    """Print a usage error as one line; what to raise then (exit 2, or click's help as it is)."""
    if is_help(error):
        return error
    typer.echo(usage_line(error), err=True)
    return typer.Exit(2)


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
    ] = DEFAULT_COLLECTION,
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
    given = {name for name in ("path", "chroma_host", "chroma_port", "dsn")
             if _given(ctx, name)}
    if "chroma_port" in given and chroma_host is None:
        msg = "--chroma-port: it needs --chroma-host (the Chroma server's host)"
        raise ValidationError(msg, field="--chroma-port")
    if "dsn" not in given and given & {"path", "chroma_host"}:
        dsn = None  # an explicit store beats GENMEM_DSN from the environment
    ctx.obj = Store(path, chroma_host, chroma_port, collection, dsn=dsn, persona=persona, now=when)
    ctx.call_on_close(ctx.obj.close)


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether an option was given on the command line (not a default nor a variable)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def main() -> None:
    """Entry point of the ``genmem`` command (access times are flushed on SIGTERM/SIGINT).

    At exit the heap is frozen (:func:`gc.freeze`): the interpreter's final collections
    then skip the objects the command made (a third of a second for a search, more than
    its ranking), and leave them to the end of the process. The exit hooks still run (the
    stores are closed before, access times flushed by their hook), streams flushed, files
    closed by reference counting; only garbage left in reference cycles is not finalised,
    and no object of this package needs that.
    """
    flush_on_signals()
    atexit.register(gc.freeze)
    app()
