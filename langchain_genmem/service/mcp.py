"""``genmem mcp``: the memory as Model Context Protocol tools (stdio or streamable HTTP).

:func:`create_mcp_server` gives an MCP client (a desktop assistant, an IDE agent, a
LangGraph agent through ``langchain-mcp-adapters``) six tools over the same
:class:`~langchain_genmem.service.operations.MemoryService` as the HTTP app:

* ``remember``: store something the persona saw, did, said or concluded;
* ``recall``: the memories that matter most for a question or situation (weighted retrieval);
* ``recall_keywords``: memories indexed under a subject, predicate or object;
* ``reflect``: turn recent memories into higher-level thoughts (needs a chat model);
* ``persona_stats``: how many memories, the reflection trigger and the settings;
* ``forget``: forget memories for good, by node id or by selector (period, type,
  conversation, speaker, text).

``persona`` may be left out when the server has a default (``--persona``) or the store holds
one persona. Over HTTP the same keys and persona scopes as ``genmem serve`` apply (401
without a key; a tool call on a persona outside the key's scope is an error); over stdio the
client is the user who started the process.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

from pydantic import BaseModel, Field
from pydantic import ValidationError as PydanticValidationError

from langchain_genmem.core.errors import GenMemError
from langchain_genmem.core.extras import require_extra
from langchain_genmem.core.modes import RELEVANCE, describe
from langchain_genmem.core.recall_sizes import SHOWN_RECALL_K
from langchain_genmem.memory.idempotency import KEY_MAX_CHARS
from langchain_genmem.operations.derive import Argument, declared_fields, parameters
from langchain_genmem.operations.fields import BODY_TIMEOUT, MAX_PERSONA_CHARS
from langchain_genmem.operations.forget import ForgetRequest
from langchain_genmem.operations.recall import KeywordRequest, RetrieveRequest
from langchain_genmem.operations.remember import MemoryItem
from langchain_genmem.retrieval.presets import MODEL_FACING_PRESET
from langchain_genmem.service.operations import MemoryService
from langchain_genmem.service.readiness import retry_advice
from langchain_genmem.service.schemas import ErrorReply
from langchain_genmem.service.security import OPEN_ACCESS, ApiKey, KeyRing
from langchain_genmem.service.slow_clients import BodyDeadline

require_extra("mcp", "service", "genmem mcp")

import anyio  # noqa: E402 - after the check that says which extra to install
from mcp.server.fastmcp import Context, FastMCP  # noqa: E402
from mcp.server.fastmcp.exceptions import ToolError  # noqa: E402
from starlette.types import ASGIApp, Receive, Scope, Send  # noqa: E402

logger = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Long-term memory of one or more personas (Generative Agents memory stream). Call "
    "`recall` before answering anything that depends on what the persona has experienced, "
    "`remember` after something worth keeping happens (one memory per fact or event, in the "
    "persona's language), `reflect` now and then to form higher-level thoughts, and `forget` "
    "when the user asks that something be forgotten."
)

Persona = Annotated[
    str | None,
    Field(
        max_length=MAX_PERSONA_CHARS,
        description="Whose memory: the persona's name. Leave empty for the server's default.",
    ),
]


def create_mcp_server(
    service: MemoryService,
    *,
    default_persona: str | None = None,
    keys: KeyRing | None = None,
    host: str = "127.0.0.1",
    port: int = 8001,
) -> FastMCP:
    """The MCP server over a memory service.

    Args:
        service: what the tools call.
        default_persona: the persona of a call that names none.
        keys: keys and scopes checked on the HTTP transport.
        host: where the HTTP transport listens.
        port: its port.

    Returns:
        The FastMCP server; ``run("stdio")`` or :func:`mcp_http_app`.
    """
    ring = keys or KeyRing()
    # No FastMCP lifespan: the SDK runs it once per client session over streamable HTTP,
    # and the streams must outlive sessions. run_stdio and mcp_http_app close them once.
    mcp = _Server("genmem", instructions=INSTRUCTIONS, host=host, port=port,
                  log_level="WARNING")
    for fn in _Tools(service, default_persona, ring).all():
        mcp.add_tool(fn, name=fn.__name__, description=inspect.cleandoc(fn.__doc__ or ""))
    mcp.genmem_keys = ring  # type: ignore[attr-defined]
    mcp.genmem_service = service  # type: ignore[attr-defined]
    return mcp


def run_stdio(mcp: FastMCP) -> None:
    """Serve one client over stdio, then close (flush) the persona streams once.

    Args:
        mcp: a server from :func:`create_mcp_server`.
    """
    try:
        mcp.run("stdio")
    finally:
        _stopped(mcp.genmem_service.close())  # type: ignore[attr-defined]


def mcp_http_app(mcp: FastMCP, *, body_timeout: float = BODY_TIMEOUT) -> Any:
    """The streamable HTTP app of an MCP server, with its keys checked (401 without one).

    Client sessions come and go while the server runs; the persona streams are closed once,
    when the app shuts down. The SDK's noise about ordinary events (a session ending, a
    request method it does not know, such as a client's ``server/discover`` probe, which is
    answered with an error reply) is logged at DEBUG, not as warnings with tracebacks.

    Args:
        mcp: a server from :func:`create_mcp_server`.
        body_timeout: the most seconds a request's body may take (408 beyond).

    Returns:
        An ASGI app serving ``/mcp``.
    """
    app = mcp.streamable_http_app()
    sessions = app.router.lifespan_context
    service: MemoryService = mcp.genmem_service  # type: ignore[attr-defined]

    @asynccontextmanager
    async def lifespan(app_: Any) -> AsyncIterator[Any]:
        try:
            async with sessions(app_) as state:
                yield state
        finally:
            _stopped(await anyio.to_thread.run_sync(service.close))

    app.router.lifespan_context = lifespan
    quiet_sdk_noise()
    return BodyDeadline(_RequireKey(app, mcp.genmem_keys), body_timeout)  # type: ignore[attr-defined]


def _stopped(closed: int) -> None:
    logger.info("stopped: %d persona stream(s) closed, access times flushed", closed)


class _Ordinary(logging.Filter):
    """Logs the MCP SDK's reports of ordinary events at DEBUG (dropped unless DEBUG is on).

    A session's end closes its event stream under a writer (``ClosedResourceError``), and a
    request the SDK's schema does not know is reported with every validation error of every
    request type it does know (about 200 lines); both are answered or harmless.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        closed = isinstance(error, anyio.ClosedResourceError | anyio.BrokenResourceError)
        unknown = str(record.msg).startswith(("Failed to validate request",
                                              "Failed to validate notification"))
        if not (closed or unknown):
            return True
        first = str(record.msg).split("\n", 1)[0]
        record.msg, record.args, record.exc_info, record.exc_text = first, (), None, None
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


_QUIET = _Ordinary()
# The SDK logs these on its transport's logger and (validation) on the root logger.
_NOISY_LOGGERS = ("mcp.server.streamable_http", "mcp.server.streamable_http_manager", "")


def quiet_sdk_noise() -> None:
    """Install :class:`_Ordinary` on the SDK's loggers (once)."""
    for name in _NOISY_LOGGERS:
        log = logging.getLogger(name)
        if _QUIET not in log.filters:
            log.addFilter(_QUIET)


REMEMBER = {
    "description": Argument("description", "The memory in one sentence, e.g. 'Isabella is "
                            "planning a Valentine's Day party at Hobbs Cafe'."),
    "poignancy": Argument("poignancy", "Importance 1 (mundane) to 10 (life-changing); leave "
                          "empty to let the server rate it (needs its chat model)."),
    "type": Argument("type", "event (something seen or done), thought (a conclusion), or chat "
                     "(a conversation summary)."),
    "subject": Argument("subject", "Who or what it is about (default: the persona)."),
    "predicate": Argument("predicate", "The verb, e.g. 'is planning'."),
    "object": Argument("object", "The object, e.g. 'a party'."),
    "evidence": Argument("evidence", "For a thought: the node ids it rests on, comma-separated "
                         "(e.g. 'node_3, node_7')."),
    "conversation": Argument("conversation", "For a turn of a conversation: its id (e.g. the "
                             "session); the turn is embedded with the turns before it."),
    "speaker": Argument("speaker", "For a turn: who said it."),
    "expires_in": Argument("expires_in", "How long it stays true: seconds, or e.g. '30d', "
                           "'12h', '90m'; it is never recalled after that (default: never "
                           "expires)."),
    "supersedes": Argument("supersedes", "The node ids this memory corrects, comma-separated "
                           "(e.g. 'node_3' when the user moved); they are no longer recalled."),
}
"""The ``remember`` tool's arguments: fields of :class:`MemoryItem`, in words for a model."""

RECALL = {
    "query": Argument("focal_text", "The question, situation or topic to remember things "
                      "about."),
    "k": Argument("top_k", "How many memories.", default=SHOWN_RECALL_K),
    "since": Argument("created_after", "Only memories created at or after this ISO time, e.g. "
                      "'2023-02-13' (for 'what happened last week')."),
    "until": Argument("created_before", "Only memories created before this ISO time."),
    "relevance": Argument("relevance", "How relevance is measured: "
                          f"{describe(RELEVANCE, for_model=True)}. Leave empty for the "
                          "persona's setting."),
    "lexical_weight": Argument("lexical_weight", "For hybrid: the share of the lexical "
                               "signal, 0 to 1 (leave empty for the persona's setting)."),
    "idle_filter": Argument("idle_filter", "Leave out memories marked idle, as the original "
                            "simulation does (leave empty for the preset's: kept in "
                            "conversation, left out in simulation)."),
    "preset": Argument("preset", "'conversation' (default): relevance alone, a time the query "
                       "names ('last weekend', '上周') narrows the memories to it; "
                       "'simulation': the original's recency, relevance and importance "
                       "weights.", default=MODEL_FACING_PRESET),
    "include_superseded": Argument("include_superseded", "Also recall memories a newer memory "
                                   "corrected (left out by default)."),
}
"""The ``recall`` tool's arguments: fields of :class:`RetrieveRequest`. A model reads fewer
memories (:data:`~langchain_genmem.core.recall_sizes.SHOWN_RECALL_K`) and recalls what was
said (:data:`~langchain_genmem.retrieval.presets.MODEL_FACING_PRESET`)."""

RECALL_KEYWORDS = {
    "subject": Argument("subject", "Subject of what was just perceived, e.g. 'Klaus Mueller'."),
    "predicate": Argument("predicate", "Its predicate."),
    "object": Argument("object", "Its object."),
    "limit": Argument("limit", "Most memories per type.", default=SHOWN_RECALL_K),
}
"""The ``recall_keywords`` tool's arguments: fields of :class:`KeywordRequest`."""

FORGET = {
    "node_ids": Argument("node_ids", "The memories to forget: node ids, comma-separated (e.g. "
                         "'node_3, node_7'), as remember and recall return them."),
    "since": Argument("created_after", "Only memories created at or after this ISO time."),
    "until": Argument("created_before", "Only memories created before this ISO time."),
    "types": Argument("types", "Only these types, comma-separated: event, thought, chat "
                      "(default: every type)."),
    "conversation": Argument("conversation", "Only the turns of this conversation."),
    "speaker": Argument("speaker", "Only what this speaker said."),
    "text": Argument("text", "Only memories whose text contains this (any case), e.g. a name "
                     "or a phone number."),
    "expired": Argument("expired", "Only memories whose expiration passed."),
    "keep_derived": Argument("keep_derived", "Keep the thoughts concluded from a forgotten "
                             "memory (by default they are forgotten too)."),
    "dry_run": Argument("dry_run", "Only list what would be forgotten; forget nothing."),
}
"""The ``forget`` tool's arguments: fields of :class:`ForgetRequest`."""

TOOL_ARGUMENTS: dict[str, tuple[type[BaseModel], dict[str, Argument]]] = {
    "remember": (MemoryItem, REMEMBER),
    "recall": (RetrieveRequest, RECALL),
    "recall_keywords": (KeywordRequest, RECALL_KEYWORDS),
    "forget": (ForgetRequest, FORGET),
}
"""Each tool that takes an operation's fields: the declaration and the arguments it offers."""

_PERSONA = inspect.Parameter("persona", inspect.Parameter.KEYWORD_ONLY, annotation=Persona,
                             default=None)
_IDEMPOTENCY_KEY = inspect.Parameter(
    "idempotency_key", inspect.Parameter.KEYWORD_ONLY, default=None,
    annotation=Annotated[str | None, Field(
        max_length=KEY_MAX_CHARS, description="A unique id of this memory (e.g. a UUID): "
        "calling again with the same id stores nothing new and returns the memory stored the "
        "first time.")],
)


def _signed(fn: Callable[..., Any], extra: list[inspect.Parameter]) -> Callable[..., Any]:
    """``fn`` with the signature FastMCP reads: its declared arguments, the persona, ``extra``.

    Args:
        fn: a tool method taking ``ctx``, ``persona`` and keyword arguments.
        extra: parameters of the tool besides the declared ones and the persona.

    Returns:
        A function FastMCP can add as a tool.
    """
    params = [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)]
    if fn.__name__ in TOOL_ARGUMENTS:
        model, arguments = TOOL_ARGUMENTS[fn.__name__]
        params += parameters(model, arguments)
    params += [_PERSONA, *extra]

    async def tool(**kwargs: Any) -> Any:
        return await fn(**kwargs)

    tool.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    tool.__annotations__ = {p.name: p.annotation for p in params}
    tool.__name__ = fn.__name__
    tool.__doc__ = fn.__doc__
    return tool


class _Tools:
    """The tools; their docstrings are the descriptions the model reads."""

    def __init__(self, service: MemoryService, default: str | None, keys: KeyRing) -> None:
        self.service = service
        self.default = default
        self.keys = keys

    def all(self) -> list[Callable[..., Any]]:
        """The tools, signed as FastMCP reads them, in the order a client lists them."""
        return [_signed(self.remember, [_IDEMPOTENCY_KEY]), _signed(self.recall, []),
                _signed(self.recall_keywords, []), _signed(self.reflect, [_FORCE]),
                _signed(self.persona_stats, []), _signed(self.forget, [])]

    async def remember(self, ctx: Context, persona: str | None = None,
                       idempotency_key: str | None = None, **arguments: Any) -> dict[str, Any]:
        """Store one memory of the persona: something it saw, did, said or concluded.

        Use it after anything worth remembering happens; one memory per fact. Returns the
        stored memory with its node_id (cite node ids as evidence of later thoughts).
        """
        name = await self._persona(persona, ctx)
        item = _valid(MemoryItem, declared_fields(arguments, REMEMBER), REMEMBER)
        out = await self._call(self.service.add, name, [item], idempotency_key,
                               names={"items[0].": ""})
        return out.memories[0].model_dump(mode="json")

    async def recall(self, ctx: Context, persona: str | None = None,
                     **arguments: Any) -> dict[str, Any]:
        """Recall the persona's memories that matter most for a question or situation.

        By default memories are found by what they say (hybrid relevance), within the period
        the query names if it names one; preset 'simulation' scores by recency, relevance and
        importance as the original simulation does. The best k come back, best first, each
        with its score and the dense and lexical parts of its relevance. Call it before
        answering anything that depends on what the persona has experienced; give
        since/until to recall a period. status is no_candidates when the persona has no
        memories yet (or none in the period).
        """
        name = await self._persona(persona, ctx)
        fields = {"persona_name": name, **declared_fields(arguments, RECALL)}
        request = _valid(RetrieveRequest, fields, RECALL)
        out = await self._call(self.service.retrieve, request, names=_names(RECALL))
        return out.model_dump(mode="json")

    async def recall_keywords(self, ctx: Context, persona: str | None = None,
                              **arguments: Any) -> dict[str, Any]:
        """Find events and thoughts filed under a subject, predicate or object (exact keywords).

        The original Generative Agents retrieval on perceiving an event: everything the
        persona remembers about these words, newest first. Prefer recall for open questions.
        """
        name = await self._persona(persona, ctx)
        fields = {"persona_name": name, **declared_fields(arguments, RECALL_KEYWORDS)}
        request = _valid(KeywordRequest, fields, RECALL_KEYWORDS)
        out = await self._call(self.service.keyword_retrieve, request)
        return out.model_dump(mode="json")

    async def reflect(self, ctx: Context, persona: str | None = None,
                      force: bool = False) -> dict[str, Any]:
        """Reflect: turn the persona's recent memories into higher-level thoughts.

        Asks the salient questions about recent memories and writes insights with their
        evidence as new thoughts. Runs only when enough important things happened (the
        importance trigger) unless force is true. Slow: it calls a language model.
        """
        name = await self._persona(persona, ctx)
        out = await self._call(self.service.reflect, name, force=force)
        return out.model_dump(mode="json")

    async def persona_stats(self, ctx: Context, persona: str | None = None) -> dict[str, Any]:
        """How many memories the persona has, its reflection trigger and its settings.

        Counts per type and depth, the importance trigger, the retrieval weights and the
        strongest keywords. Says which personas exist when the one named has no memories.
        """
        name = await self._persona(persona, ctx)
        stats = await self._call(self.service.persona_stats, name)
        if stats is None:
            known = await self._call(self.service.personas)
            msg = f"persona: no memories for {name!r}; personas: {', '.join(known) or 'none'}"
            raise ToolError(msg)
        return stats.model_dump(mode="json")

    async def forget(self, ctx: Context, persona: str | None = None,
                     **arguments: Any) -> dict[str, Any]:
        """Forget memories of the persona for good, when the user asks that something be forgotten.

        Name the memories by node_ids, or select them: since/until (a period), types,
        conversation, speaker, text (words the memory contains), expired; several given must all
        match. Thoughts concluded from a forgotten memory go too unless keep_derived. Use
        dry_run first to see what would go. Forgotten memories are never recalled again;
        an id forgotten before is listed in already_forgotten.
        """
        name = await self._persona(persona, ctx)
        fields = {"persona_name": name, **declared_fields(arguments, FORGET)}
        request = _valid(ForgetRequest, fields, FORGET)
        out = await self._call(self.service.forget, request, names=_names(FORGET))
        return out.model_dump(mode="json")

    async def _persona(self, persona: str | None, ctx: Context) -> str:
        name = persona or self.default
        if not name:
            known = await self._call(self.service.personas)
            if len(known) != 1:
                msg = ("persona: give the persona's name"
                       + (f" (one of {', '.join(known)})" if known else ""))
                raise ToolError(msg)
            name = known[0]
        key = self._key(ctx)
        if key is None or not key.allows(name):
            msg = f"persona: this API key may not use persona {name!r}"
            raise ToolError(msg)
        return name

    def _key(self, ctx: Context) -> ApiKey | None:
        request = getattr(ctx.request_context, "request", None)
        if request is None:  # stdio: the user who started the process
            return OPEN_ACCESS
        return self.keys.authenticate(token_of(request.headers))

    @staticmethod
    async def _call(
        fn: Callable[..., Any], *args: Any, names: dict[str, str] | None = None, **kwargs: Any
    ) -> Any:
        try:
            return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))
        except GenMemError as e:
            raise ToolError(_renamed(retry_advice(e), names or {})) from e


_FORCE = inspect.Parameter(
    "force", inspect.Parameter.KEYWORD_ONLY, default=False,
    annotation=Annotated[bool, Field(description="Reflect even if not enough has happened "
                                     "since the last reflection.")],
)


def _names(arguments: dict[str, Argument]) -> dict[str, str]:
    """The tool's name of each declared field it fills under another name (and the persona)."""
    names = {a.field: name for name, a in arguments.items() if a.field != name}
    return {**names, "persona_name": "persona"}


def _renamed(message: str, names: dict[str, str]) -> str:
    """A message whose leading field name is an internal one, with the tool's name for it."""
    for inner, outer in names.items():
        if message.startswith(inner):
            return outer + message[len(inner):]
    return message


def _valid(model: Any, fields: dict[str, Any], arguments: dict[str, Argument]) -> Any:
    """The declared request of a tool call; a rule it breaks names the tool's argument."""
    try:
        return model.model_validate(fields)
    except PydanticValidationError as e:
        raise ToolError(_renamed(plain_error(e), _names(arguments))) from e


def plain_error(error: PydanticValidationError) -> str:
    """The first problem of a validation error as ``argument: what is wrong``.

    Args:
        error: pydantic's error.

    Returns:
        One line naming the argument, without pydantic's model names or links.
    """
    first = error.errors()[0]
    field = ".".join(str(x) for x in first["loc"]) or "arguments"
    return f"{field}: {first['msg']}"


class _Server(FastMCP):
    """FastMCP whose argument errors name the tool's arguments in one plain line."""

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call a tool; an argument the SDK refuses is reported as ``tool: argument: why``."""
        try:
            return await super().call_tool(name, arguments)
        except ToolError as e:
            if isinstance(e.__cause__, PydanticValidationError):
                msg = f"{name}: {plain_error(e.__cause__)}"
                raise ToolError(msg) from e.__cause__
            raise


def token_of(headers: Any) -> str | None:
    """The API key of a request: ``Authorization: Bearer KEY`` or ``X-API-Key: KEY``.

    Args:
        headers: the request headers (case-insensitive mapping).

    Returns:
        The key, or None.
    """
    scheme, _, token = (headers.get("authorization") or "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return headers.get("x-api-key") or None


class _RequireKey:
    """ASGI middleware: 401 for an HTTP request without a valid key (when keys are set)."""

    def __init__(self, app: ASGIApp, keys: KeyRing) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.keys.enabled:
            from starlette.datastructures import Headers
            from starlette.responses import JSONResponse

            if self.keys.authenticate(token_of(Headers(scope=scope))) is None:
                reply = JSONResponse(
                    ErrorReply(message="missing or unknown API key").model_dump(),
                    status_code=401, headers={"WWW-Authenticate": "Bearer"},
                )
                await reply(scope, receive, send)
                return
        await self.app(scope, receive, send)
