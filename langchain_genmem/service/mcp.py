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

from pydantic import Field
from pydantic import ValidationError as PydanticValidationError

from langchain_genmem.core.errors import GenMemError
from langchain_genmem.core.extras import require_extra
from langchain_genmem.core.modes import (
    LEXICAL_WEIGHT,
    POIGNANCY,
    RELEVANCE,
    RelevanceMode,
    describe,
)
from langchain_genmem.core.recall_sizes import SHOWN_RECALL_K
from langchain_genmem.core.validation import K_MIN
from langchain_genmem.memory.idempotency import KEY_MAX_CHARS
from langchain_genmem.numerics.candidate_filter import when
from langchain_genmem.retrieval.presets import Preset
from langchain_genmem.service.operations import MemoryService
from langchain_genmem.service.readiness import retry_advice
from langchain_genmem.service.schemas import (
    MAX_FIELD_CHARS,
    MAX_IDS_CHARS,
    MAX_PERSONA_CHARS,
    MAX_TEXT_CHARS,
    MAX_TOP_K,
    Duration,
    ErrorReply,
    ForgetRequest,
    KeywordRequest,
    MemoryItem,
    NodeKind,
    RetrieveRequest,
)
from langchain_genmem.service.security import OPEN_ACCESS, ApiKey, KeyRing

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
    tools = _Tools(service, default_persona, ring)
    for fn in (tools.remember, tools.recall, tools.recall_keywords, tools.reflect,
               tools.persona_stats, tools.forget):
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


def mcp_http_app(mcp: FastMCP) -> Any:
    """The streamable HTTP app of an MCP server, with its keys checked (401 without one).

    Client sessions come and go while the server runs; the persona streams are closed once,
    when the app shuts down. The SDK's noise about ordinary events (a session ending, a
    request method it does not know, such as a client's ``server/discover`` probe, which is
    answered with an error reply) is logged at DEBUG, not as warnings with tracebacks.

    Args:
        mcp: a server from :func:`create_mcp_server`.

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
    return _RequireKey(app, mcp.genmem_keys)  # type: ignore[attr-defined]


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


class _Tools:
    """The tools; their docstrings are the descriptions the model reads."""

    def __init__(self, service: MemoryService, default: str | None, keys: KeyRing) -> None:
        self.service = service
        self.default = default
        self.keys = keys

    async def remember(
        self,
        description: Annotated[
            str,
            Field(max_length=MAX_TEXT_CHARS, description="The memory in one sentence, e.g. "
                  "'Isabella is planning a Valentine's Day party at Hobbs Cafe'."),
        ],
        ctx: Context,
        persona: Persona = None,
        poignancy: Annotated[
            float | None,
            Field(**POIGNANCY.field(), description="Importance 1 (mundane) to 10 (life-changing); "
                  "leave empty to let the server rate it (needs its chat model)."),
        ] = None,
        type: Annotated[  # noqa: A002 - the memory type, as the library names it
            NodeKind, Field(description="event (something seen or done), thought (a "
                            "conclusion), or chat (a conversation summary).")
        ] = "event",
        subject: Annotated[
            str | None, Field(max_length=MAX_FIELD_CHARS, description="Who or what it is about "
                              "(default: the persona).")
        ] = None,
        predicate: Annotated[str, Field(max_length=MAX_FIELD_CHARS, description="The verb, "
                                        "e.g. 'is planning'.")] = "",
        object: Annotated[  # noqa: A002 - the triple's object, as the library names it
            str, Field(max_length=MAX_FIELD_CHARS, description="The object, e.g. 'a party'.")
        ] = "",
        evidence: Annotated[
            str | None, Field(max_length=MAX_FIELD_CHARS, description="For a thought: the "
                              "node ids it rests on, comma-separated (e.g. 'node_3, node_7').")
        ] = None,
        conversation: Annotated[
            str | None, Field(max_length=MAX_PERSONA_CHARS, description="For a turn of a "
                              "conversation: its id (e.g. the session); the turn is embedded "
                              "with the turns before it.")
        ] = None,
        speaker: Annotated[
            str | None, Field(max_length=MAX_PERSONA_CHARS, description="For a turn: who said "
                              "it.")
        ] = None,
        expires_in: Annotated[
            Duration | None, Field(description="How long it stays true: seconds, or e.g. "
                                   "'30d', '12h', '90m'; it is never recalled after that "
                                   "(default: never expires).")
        ] = None,
        supersedes: Annotated[
            str | None, Field(max_length=MAX_FIELD_CHARS, description="The node ids this "
                              "memory corrects, comma-separated (e.g. 'node_3' when the user "
                              "moved); they are no longer recalled.")
        ] = None,
        idempotency_key: Annotated[
            str | None, Field(max_length=KEY_MAX_CHARS, description="A unique id of this "
                              "memory (e.g. a UUID): calling again with the same id stores "
                              "nothing new and returns the memory stored the first time.")
        ] = None,
    ) -> dict[str, Any]:
        """Store one memory of the persona: something it saw, did, said or concluded.

        Use it after anything worth remembering happens; one memory per fact. Returns the
        stored memory with its node_id (cite node ids as evidence of later thoughts).
        """
        name = await self._persona(persona, ctx)
        fields = {"type": type, "description": description, "poignancy": poignancy,
                  "subject": subject, "predicate": predicate, "object": object,
                  "evidence": evidence, "conversation": conversation, "speaker": speaker,
                  "expires_in": expires_in, "supersedes": supersedes}
        item = _valid(MemoryItem, fields)
        out = await self._call(self.service.add, name, [item], idempotency_key,
                               names={"items[0].": ""})
        return out.memories[0].model_dump(mode="json")

    async def recall(
        self,
        query: Annotated[
            str, Field(max_length=MAX_TEXT_CHARS, description="The question, situation or "
                       "topic to remember things about.")
        ],
        ctx: Context,
        persona: Persona = None,
        k: Annotated[int, Field(ge=K_MIN, le=MAX_TOP_K,
                                description="How many memories.")] = SHOWN_RECALL_K,
        since: Annotated[str | None, Field(
            max_length=64, description="Only memories created at or after this ISO time, "
            "e.g. '2023-02-13' (for 'what happened last week')."
        )] = None,
        until: Annotated[str | None, Field(
            max_length=64, description="Only memories created before this ISO time."
        )] = None,
        relevance: Annotated[RelevanceMode | None, Field(
            description=f"How relevance is measured: {describe(RELEVANCE, for_model=True)}. "
            "Leave empty for the persona's setting."
        )] = None,
        lexical_weight: Annotated[float | None, Field(
            **LEXICAL_WEIGHT.field(),
            description="For hybrid: the share of the lexical signal, 0 to 1 "
            "(leave empty for the persona's setting)."
        )] = None,
        idle_filter: Annotated[bool | None, Field(
            description="Leave out memories marked idle, as the original simulation does "
            "(leave empty for the preset's: kept in conversation, left out in simulation)."
        )] = None,
        preset: Annotated[Preset, Field(
            description="'conversation' (default): relevance alone, a time the query names "
            "('last weekend', '上周') narrows the memories to it; 'simulation': the original's "
            "recency, relevance and importance weights."
        )] = "conversation",
        include_superseded: Annotated[bool, Field(
            description="Also recall memories a newer memory corrected (left out by default)."
        )] = False,
    ) -> dict[str, Any]:
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
        window = _window(since, until)
        request = _valid(RetrieveRequest, names=_RECALL_NAMES, fields={
            "persona_name": name, "focal_text": query, "top_k": k, "relevance": relevance,
            "lexical_weight": lexical_weight, "idle_filter": idle_filter, "preset": preset,
            "include_superseded": include_superseded, **window})
        out = await self._call(self.service.retrieve, request, names=_RECALL_NAMES)
        return out.model_dump(mode="json")

    async def recall_keywords(
        self,
        subject: Annotated[str, Field(max_length=MAX_FIELD_CHARS, description="Subject of "
                                      "what was just perceived, e.g. 'Klaus Mueller'.")],
        ctx: Context,
        predicate: Annotated[str, Field(max_length=MAX_FIELD_CHARS,
                                        description="Its predicate.")] = "",
        object: Annotated[str, Field(max_length=MAX_FIELD_CHARS,  # noqa: A002
                                     description="Its object.")] = "",
        persona: Persona = None,
        limit: Annotated[int, Field(ge=K_MIN, le=MAX_TOP_K,
                                    description="Most memories per type.")] = SHOWN_RECALL_K,
    ) -> dict[str, Any]:
        """Find events and thoughts filed under a subject, predicate or object (exact keywords).

        The original Generative Agents retrieval on perceiving an event: everything the
        persona remembers about these words, newest first. Prefer recall for open questions.
        """
        name = await self._persona(persona, ctx)
        request = _valid(KeywordRequest, {"persona_name": name, "subject": subject,
                                          "predicate": predicate, "object": object,
                                          "limit": limit})
        out = await self._call(self.service.keyword_retrieve, request)
        return out.model_dump(mode="json")

    async def reflect(
        self,
        ctx: Context,
        persona: Persona = None,
        force: Annotated[bool, Field(description="Reflect even if not enough has happened "
                                     "since the last reflection.")] = False,
    ) -> dict[str, Any]:
        """Reflect: turn the persona's recent memories into higher-level thoughts.

        Asks the salient questions about recent memories and writes insights with their
        evidence as new thoughts. Runs only when enough important things happened (the
        importance trigger) unless force is true. Slow: it calls a language model.
        """
        name = await self._persona(persona, ctx)
        out = await self._call(self.service.reflect, name, force=force)
        return out.model_dump(mode="json")

    async def persona_stats(self, ctx: Context, persona: Persona = None) -> dict[str, Any]:
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

    async def forget(
        self,
        ctx: Context,
        persona: Persona = None,
        node_ids: Annotated[str | None, Field(
            max_length=MAX_IDS_CHARS, description="The memories to forget: node ids, "
            "comma-separated (e.g. 'node_3, node_7'), as remember and recall return them."
        )] = None,
        since: Annotated[str | None, Field(
            max_length=64, description="Only memories created at or after this ISO time."
        )] = None,
        until: Annotated[str | None, Field(
            max_length=64, description="Only memories created before this ISO time."
        )] = None,
        types: Annotated[str | None, Field(
            max_length=MAX_FIELD_CHARS, description="Only these types, comma-separated: "
            "event, thought, chat (default: every type)."
        )] = None,
        conversation: Annotated[str | None, Field(
            max_length=MAX_PERSONA_CHARS, description="Only the turns of this conversation."
        )] = None,
        speaker: Annotated[str | None, Field(
            max_length=MAX_PERSONA_CHARS, description="Only what this speaker said."
        )] = None,
        text: Annotated[str | None, Field(
            max_length=MAX_TEXT_CHARS, description="Only memories whose text contains this "
            "(any case), e.g. a name or a phone number."
        )] = None,
        expired: Annotated[bool, Field(
            description="Only memories whose expiration passed."
        )] = False,
        keep_derived: Annotated[bool, Field(
            description="Keep the thoughts concluded from a forgotten memory (by default "
            "they are forgotten too)."
        )] = False,
        dry_run: Annotated[bool, Field(
            description="Only list what would be forgotten; forget nothing."
        )] = False,
    ) -> dict[str, Any]:
        """Forget memories of the persona for good, when the user asks that something be forgotten.

        Name the memories by node_ids, or select them: since/until (a period), types,
        conversation, speaker, text (words the memory contains), expired; several given must all
        match. Thoughts concluded from a forgotten memory go too unless keep_derived. Use
        dry_run first to see what would go. Forgotten memories are never recalled again;
        an id forgotten before is listed in already_forgotten.
        """
        name = await self._persona(persona, ctx)
        window = _window(since, until)
        request = _valid(ForgetRequest, names=_FORGET_NAMES, fields={
            "persona_name": name, "node_ids": node_ids, "types": types,
            "conversation": conversation, "speaker": speaker, "text": text,
            "expired": expired, "keep_derived": keep_derived, "dry_run": dry_run, **window})
        out = await self._call(self.service.forget, request, names=_FORGET_NAMES)
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


# The request fields recall fills, by the names of recall's own arguments.
_RECALL_NAMES = {"focal_text": "query", "top_k": "k", "created_after": "since",
                 "created_before": "until", "persona_name": "persona"}

# The request fields forget fills, by the names of forget's own arguments.
_FORGET_NAMES = {"created_after": "since", "created_before": "until", "persona_name": "persona"}


def _window(since: str | None, until: str | None) -> dict[str, Any]:
    """A tool's since/until as the request's time filter; a bad time names the argument."""
    try:
        return {"created_after": when(since, "since"), "created_before": when(until, "until")}
    except GenMemError as e:
        raise ToolError(str(e)) from e


def _renamed(message: str, names: dict[str, str]) -> str:
    """A message whose leading field name is an internal one, with the tool's name for it."""
    for inner, outer in names.items():
        if message.startswith(inner):
            return outer + message[len(inner):]
    return message


def _valid(model: Any, fields: dict[str, Any], names: dict[str, str] | None = None) -> Any:
    try:
        return model.model_validate(fields)
    except PydanticValidationError as e:
        raise ToolError(_renamed(plain_error(e), names or {})) from e


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
