"""The ``genmem`` commands that serve the memory: ``serve`` (HTTP), ``mcp`` and ``openapi``.

They serve whatever store the global options name (``--path``, ``--chroma-host``...), every
persona in it. Like every command but ``import`` and ``add``, they refuse a store that does
not exist, in one line saying how to make one, unless ``--create`` lets them start a new,
empty one that their clients fill. The chat model for reflection (and for rating memories
added without poignancy) comes from the ``OPENAI_*`` variables, or ``--model``/``--base-url``;
without ``OPENAI_API_KEY`` the server runs without one. The service needs the ``service``
extra.
"""

from __future__ import annotations

import functools
import inspect
import ipaddress
import json
import logging
import os
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, fields
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, cast, get_type_hints

import typer

from langchain_genmem.backends.base import STORE_TIMEOUT_VARIABLE
from langchain_genmem.cli.app import app
from langchain_genmem.cli.options import ScoreIn, ScoreInOption
from langchain_genmem.cli.store import CHROMA_FILE, Store, store_of
from langchain_genmem.core.errors import ConfigurationError, ValidationError
from langchain_genmem.core.extras import require_extra
from langchain_genmem.operations.fields import BODY_TIMEOUT, HEADER_TIMEOUT
from langchain_genmem.service.readiness import DEFAULT_STORE_TIMEOUT
from langchain_genmem.service.security import KEY_VARIABLE, KeyRing, check_listen
from langchain_genmem.service.streams import DEFAULT_MAX_OPEN, StreamPool

if TYPE_CHECKING:
    from langchain_genmem.service.operations import MemoryService  # lazy: start-up time

# The service, its chat model and the web framework are imported by the commands that run
# them, when they run: every other `genmem` command starts without them.

Host = Annotated[
    str,
    typer.Option("--host", help="Address to listen on; beyond 127.0.0.1 only with API keys."),
]
ApiKeys = Annotated[
    list[str] | None,
    typer.Option(
        "--api-key",
        envvar=KEY_VARIABLE,
        help=f"An API key reaching every persona. Prefer the {KEY_VARIABLE} variable: a key on "
        "the command line is shown to every user of the machine (ps). With no key, the server "
        "answers anyone on this machine and listens only on 127.0.0.1.",
    ),
]
KeysFile = Annotated[
    Path | None,
    typer.Option(
        "--keys-file",
        help='JSON keys with persona scopes: {"keys": [{"key": "...", "personas": ["A"]}]}.',
    ),
]
Model = Annotated[
    str | None, typer.Option("--model", help="Chat model name (default: OPENAI_MODEL).")
]
MaxOpen = Annotated[
    int,
    typer.Option(
        "--max-open-personas", min=1,
        help="Most personas kept open at once; the least recently used one is closed "
        "(access times flushed, memory freed) beyond it and reopens on its next request.",
    ),
]
BaseUrl = Annotated[
    str | None,
    typer.Option("--base-url", help="OpenAI-compatible server (default: OPENAI_BASE_URL)."),
]
Create = Annotated[
    bool,
    typer.Option(
        "--create",
        help="Start on a store that does not exist yet: create it, empty, for the clients to "
        "fill. Without it, a store that does not exist (a mistyped --path) is refused.",
    ),
]
ForgetExpiredEvery = Annotated[
    float | None,
    typer.Option("--forget-expired-every", min=0.001, help="Every this many seconds, "
                 "forget (delete for good) the expired memories of the personas the "
                 "server has open (default: never; expired memories are never "
                 "retrieved anyway)."),
]
StoreTimeout = Annotated[
    float,
    typer.Option(
        "--store-timeout", min=0.001, envvar=STORE_TIMEOUT_VARIABLE,
        help="Most seconds a request waits for the store (PostgreSQL) before it answers 503; "
        "while the store is known to be down, requests answer at once.",
    ),
]
HeaderTimeout = Annotated[
    float,
    typer.Option("--header-timeout", min=0.001, help="Most seconds a connection may take to "
                 "send a request's headers (once open, or after a response); a slower one is "
                 "closed."),
]
BodyTimeout = Annotated[
    float,
    typer.Option("--body-timeout", min=0.001, help="Most seconds a request may take to send "
                 "its whole body; a slower one answers 408."),
]


@dataclass(frozen=True)
class ServerOptions:
    """The options ``genmem serve`` and ``genmem mcp`` share, declared once.

    Each field's type is its option (the ``Annotated`` aliases above) and its default the
    option's; :func:`server_command` adds them to a command.
    """

    host: Host = "127.0.0.1"
    api_key: ApiKeys = None
    keys_file: KeysFile = None
    model: Model = None
    base_url: BaseUrl = None
    score_in: ScoreInOption = ScoreIn.process
    max_open_personas: MaxOpen = DEFAULT_MAX_OPEN
    create: Create = False
    forget_expired_every: ForgetExpiredEvery = None
    store_timeout: StoreTimeout = DEFAULT_STORE_TIMEOUT
    header_timeout: HeaderTimeout = HEADER_TIMEOUT
    body_timeout: BodyTimeout = BODY_TIMEOUT


def _server_options() -> list[inspect.Parameter]:
    """:class:`ServerOptions`' fields as keyword-only parameters, typed by their options."""
    hints = get_type_hints(ServerOptions, include_extras=True)
    return [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=hints[f.name],
                              default=f.default) for f in fields(ServerOptions)]


def server_command(fn: Callable[..., None]) -> Callable[..., None]:
    """``fn(ctx, server=ServerOptions, ...)`` as a command taking the shared server options.

    Args:
        fn: the command; its own parameters come first in its help.

    Returns:
        The command, its signature the command's own parameters and the shared options.
    """
    own = [p for p in inspect.signature(fn, eval_str=True).parameters.values()
           if p.name != "server"]
    shared_params = _server_options()
    names = [p.name for p in shared_params]

    @functools.wraps(fn)
    def command(**kwargs: Any) -> None:
        shared = ServerOptions(**{name: kwargs.pop(name) for name in names})
        fn(server=shared, **kwargs)

    params = [*own, *shared_params]
    cast(Any, command).__signature__ = inspect.Signature(params)  # what typer reads
    command.__annotations__ = {p.name: p.annotation for p in params}
    return command


WILDCARD_SHOWN_AS = {4: "127.0.0.1", 6: "::1"}
"""What a client on this machine reaches a server listening on every address (``0.0.0.0``,
``::``) at: that is the URL messages give, never the wildcard itself."""


class Transport(str, Enum):
    """How ``genmem mcp`` talks to its client."""

    stdio = "stdio"
    http = "http"


@app.command()
@server_command
def serve(
    ctx: typer.Context,
    server: ServerOptions,
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port.")] = 8000,
    public_url: Annotated[
        str | None,
        typer.Option(
            "--public-url",
            help="URL clients (Dify) reach this server at: the schema's servers[0].url and the "
            "URL a process refused the folder is sent to (default: http://HOST:PORT, a "
            "wildcard HOST such as 0.0.0.0 shown as 127.0.0.1).",
        ),
    ] = None,
) -> None:
    """Serve the memory over HTTP (FastAPI): the Dify workflow's /retrieve, importable by Dify."""
    keys = _keys(server.api_key, server.keys_file)

    check_listen(server.host, keys)
    store_of(ctx).request_timeout = server.store_timeout
    service = _service(ctx, server)  # reads nothing yet
    url = client_url(server.host, port, public_url)
    where = _open_store(store_of(ctx), "genmem serve", url, create=server.create)
    app_ = _http_app(service, keys, url, server)
    _log_service("genmem serve")
    _say_without_model(service, "/reflect")
    typer.echo(f"genmem serve: {where} at {url} (docs: {url}/docs; listening on "
               f"{_url(server.host, port)}; {len(keys.keys)} API key(s); stop with Ctrl-C)",
               err=True)
    with _sweeping(service, server.forget_expired_every):
        _run(app_, server, port)


@app.command()
def openapi(
    ctx: typer.Context,
    host: Host = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port.")] = 8000,
    public_url: Annotated[
        str | None,
        typer.Option("--public-url", help="servers[0].url (default: http://HOST:PORT, a "
                     "wildcard HOST such as 0.0.0.0 shown as 127.0.0.1)."),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file, not stdout.")
    ] = None,
) -> None:
    """Print the OpenAPI schema of `genmem serve`, ready for Dify's custom-tool import."""
    def unused(*_: object) -> NoReturn:  # the pool's opener (of a persona) and backend
        raise ConfigurationError("the schema needs no store")

    from langchain_genmem.service.operations import MemoryService  # lazy: start-up time

    service = MemoryService(StreamPool(unused, unused))
    schema = _http_app(service, KeyRing(), client_url(host, port, public_url)).openapi()
    text = json.dumps(schema, ensure_ascii=False, indent=2)
    if output is None:
        typer.echo(text)
    else:
        output.write_text(text + "\n", encoding="utf-8")
        typer.echo(f"Wrote {output}", err=True)


@app.command("mcp")
@server_command
def mcp_(
    ctx: typer.Context,
    server: ServerOptions,
    transport: Annotated[
        Transport,
        typer.Option("--transport", help="stdio (the client starts genmem) or http "
                     "(streamable HTTP on /mcp)."),
    ] = Transport.stdio,
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="HTTP port.")] = 8001,
) -> None:
    """Serve MCP tools: remember, recall, recall_keywords, reflect, persona_stats, forget."""
    keys = _keys(server.api_key, server.keys_file)
    from langchain_genmem.service import check_listen, create_mcp_server  # lazy: optional extra

    if transport is Transport.http:
        check_listen(server.host, keys)
    store_of(ctx).request_timeout = server.store_timeout
    http = transport is Transport.http
    service = _service(ctx, server)  # reads nothing yet
    url = f"{client_url(server.host, port)}/mcp" if http else None
    where = _open_store(store_of(ctx), "genmem mcp", url, create=server.create)
    mcp = create_mcp_server(service, default_persona=store_of(ctx).persona, keys=keys,
                            host=server.host, port=port)
    _log_service("genmem mcp")
    _say_without_model(service, "the reflect tool")
    from langchain_genmem.service.mcp import mcp_http_app, run_stdio  # lazy: optional extra

    if transport is Transport.stdio:
        with _sweeping(service, server.forget_expired_every):
            run_stdio(mcp)
        return

    typer.echo(f"genmem mcp: {where} at {url} (listening on {_url(server.host, port)})",
               err=True)
    with _sweeping(service, server.forget_expired_every):
        _run(mcp_http_app(mcp, body_timeout=server.body_timeout), server, port)


def _run(app_: Any, server: ServerOptions, port: int) -> None:
    """Serve ``app_`` with uvicorn, slow clients cut off after the header deadline."""
    from langchain_genmem.service.slow_clients import header_protocol  # lazy: optional extra

    _uvicorn().run(app_, host=server.host, port=port, log_level="warning",
                   http=header_protocol(server.header_timeout))


def _sweeping(service: MemoryService, every: float | None) -> AbstractContextManager[Any]:
    """The expiry sweep of a server's open personas while it serves (none without ``every``)."""
    from langchain_genmem.service.expiry import forgetting_expired  # lazy: start-up time

    return forgetting_expired(service.streams, every)


def _log_service(name: str) -> None:
    """Show the service's own messages (start, stop, flush) on stderr."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(f"{name}: %(message)s"))
    log = logging.getLogger("langchain_genmem.service")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


def _keys(api_key: list[str] | None, keys_file: Path | None) -> KeyRing:
    return KeyRing.from_options(api_key or (), keys_file)


def _service(ctx: typer.Context, server: ServerOptions) -> MemoryService:
    from langchain_genmem.service.operations import create_service  # lazy: start-up time

    return create_service(store_of(ctx), model=_chat_model(server.model, server.base_url),
                          score_in=server.score_in.value,
                          max_open_personas=server.max_open_personas)


def _open_store(store: Store, command: str, url: str | None, *, create: bool) -> str:
    """Take the store for a server until it stops; the store in words for its start line.

    Args:
        store: the store of the global options.
        command: the server (``"genmem serve"``), named to the processes it refuses.
        url: where its clients reach it (None over stdio), named to them too.
        create: a store that does not exist is created (empty) instead of refused.

    Returns:
        E.g. ``"the store at store"``, or ``"the store at store (new, empty)"``.

    Raises:
        ValidationError: the store does not exist and ``create`` is False.
    """
    exists = _store_exists(store)
    if not exists and not create:
        option, missing = "--path", store.where()
        if store.host:
            option, missing = "--collection", f"collection {store.collection!r} on {missing}"
        msg = (f"{option}: {missing} does not exist; check {option}, or start "
               f"`{command} --create` to serve a new, empty store for its clients to fill "
               "(`genmem import FOLDER` and `genmem add ...` create one too)")
        raise ValidationError(msg, field="path")
    store.claim(command=command, url=url)  # an embedded folder is owned until it stops
    if exists:
        return store.where()
    store.backend(create=True)  # made now, so a restart without --create finds it
    return f"{store.where()} (new, empty)"


def _store_exists(store: Store) -> bool:
    """Whether the store exists, read without opening an embedded folder before its claim."""
    if store.dsn:
        return True  # a database: its tables are made on first use, as for every command
    if not store.host:
        return (Path(store.path or ".") / CHROMA_FILE).is_file()
    try:
        store.backend(create=False)  # a Chroma server: its collection
    except ValidationError:
        return False
    return True


def _chat_model(model: str | None, base_url: str | None) -> Any:
    """The chat model of the OPENAI_* variables and flags, or None without a key or server."""
    from langchain_genmem.llm.chat import (  # lazy: start-up time
        chat_model_configured,
        chat_model_from_env,
    )

    env = dict(os.environ)
    if model:
        env["OPENAI_MODEL"] = model
    if base_url:
        env["OPENAI_BASE_URL"] = base_url
    if not chat_model_configured(env):
        if model:
            raise ConfigurationError("--model: set OPENAI_API_KEY too, or give the server's "
                                     "--base-url")
        return None
    return chat_model_from_env(env)


def _say_without_model(service: MemoryService, reflect: str) -> None:
    """Tell, as the server starts, what a server without a chat model cannot do.

    Args:
        service: the service.
        reflect: what reflects, in the server's words (``/reflect``, ``the reflect tool``).
    """
    if service.model is None:
        print(f"no chat model (neither OPENAI_API_KEY nor OPENAI_BASE_URL is set): {reflect} is "
              "unavailable and memories need a poignancy", file=sys.stderr)


def _http_app(service: MemoryService, keys: KeyRing, public_url: str,
              server: ServerOptions | None = None) -> Any:
    require_extra("fastapi", "service", "genmem serve")
    from langchain_genmem.service.http import create_app  # lazy: optional extra

    if server is None:  # the schema only
        return create_app(service, keys=keys, public_url=public_url)
    return create_app(service, keys=keys, public_url=public_url,
                      header_timeout=server.header_timeout, body_timeout=server.body_timeout)


def _uvicorn() -> Any:
    return require_extra("uvicorn", "service", "genmem serve")


def client_url(host: str, port: int, public_url: str | None = None) -> str:
    """The URL clients should use: the public URL when given, else the listening address.

    A wildcard address (``0.0.0.0``, ``::``) is never shown: a server listening on it is
    reached from this machine at the loopback address of its family.

    Args:
        host: the address the server listens on.
        port: its port.
        public_url: ``--public-url``, or None.

    Returns:
        E.g. ``http://genmem:8000`` or ``http://127.0.0.1:8000``.
    """
    if public_url:
        return public_url.rstrip("/")
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return _url(host, port)
    return _url(WILDCARD_SHOWN_AS[address.version] if address.is_unspecified else host, port)


def _url(host: str, port: int) -> str:
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    return f"http://{shown}:{port}"
