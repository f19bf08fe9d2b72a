"""The HTTP service: a FastAPI app whose OpenAPI schema Dify imports as a custom tool.

:func:`create_app` serves a :class:`~langchain_genmem.service.operations.MemoryService`:

==========================  ====================  ===========================================
``POST /retrieve``          ``retrieve``          the Dify workflow's weighted retrieval
``POST /memories``          ``add_memory``        add one memory (flat fields)
``POST /memories/batch``    ``add_memories``      add several memories, all or nothing
``POST /keyword-retrieve``  ``keyword_retrieve``  the original retrieve() by subject/pred./object
``POST /reflect``           ``reflect``           run the reflection graph (needs a chat model)
``POST /forget``            ``forget``            forget memories by id or by selector
``GET /personas``           ``list_personas``     the personas the key may see
``GET /personas/{name}``    ``get_persona``       counts, reflection trigger and settings
``DELETE /personas/{name}`` ``forget_persona``    forget every memory of a persona
``DELETE .../{node_id}``    ``forget_memory``     forget the memory ``node_id`` of ``{name}``
``GET /healthz``            ``health``            liveness and the input limits (no key needed)
``GET /readyz``             (not in the schema)   readiness: 503 while the store is unreachable
``GET /docs``               (not in the schema)   Swagger UI, with a plain listing of these
                                                  endpoints for a browser offline (no key)
``GET /openapi.json``       (the schema)          what Dify imports (no key needed)
==========================  ====================  ===========================================

``forget_memory``'s path is ``DELETE /personas/{name}/memories/{node_id}``.

Every error is ``{"status": "error", "message": ..., "field": ...}``: 401 without a valid
key, 403 for a persona outside the key's scope, 404 for a persona without memories or a
memory never stored (forgetting one forgotten before is a success that forgets nothing
more), 413 for a body over the limit, 422 for bad input (naming the field), 409 while a
persona is already reflecting, 503 when the store or the chat model is missing (with
``Retry-After`` while the store cannot be reached: see
:mod:`~langchain_genmem.service.readiness`). The app's
lifespan closes (flushes) every open stream at shutdown, which uvicorn runs on SIGTERM and
SIGINT.

Example:
    .. code-block:: python

        from fastapi.testclient import TestClient
        from langchain_genmem.service import create_app, create_service

        app = create_app(create_service(".genmem"), api_keys=["a-long-secret-key-1234"])
        with TestClient(app) as client:
            client.post("/retrieve", json={"persona_name": "Ada", "focal_text": "tea"},
                        headers={"Authorization": "Bearer a-long-secret-key-1234"})
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any

from pydantic import ValidationError as PydanticValidationError

from langchain_genmem.core.errors import (
    ConfigurationError,
    GenMemError,
    ParseError,
    StorageError,
    ValidationError,
)
from langchain_genmem.core.extras import require_extra
from langchain_genmem.memory.idempotency import KEY_PATTERN
from langchain_genmem.operations.fields import limits
from langchain_genmem.service.docs_page import docs_page
from langchain_genmem.service.operations import (
    MemoryService,
    NotStoredError,
    ReflectionBusyError,
)
from langchain_genmem.service.readiness import Ready, check_store, retry_headers
from langchain_genmem.service.schemas import (
    BODY_TIMEOUT,
    HEADER_TIMEOUT,
    MAX_BODY_BYTES,
    MAX_PERSONA_CHARS,
    NAME_PATTERN,
    NODE_ID_PATTERN,
    AddResponse,
    ErrorReply,
    ForgetRequest,
    ForgetResponse,
    Health,
    KeywordRequest,
    KeywordResponse,
    MemoryBatchRequest,
    MemoryRequest,
    PersonaList,
    PersonaStats,
    ReflectRequest,
    ReflectResponse,
    RetrieveRequest,
    RetrieveResponse,
)
from langchain_genmem.service.security import ApiKey, KeyRing
from langchain_genmem.service.slow_clients import BodyDeadline

require_extra("fastapi", "service", "genmem serve")

import anyio  # noqa: E402 - after the check that says which extra to install
from fastapi import (  # noqa: E402
    Depends,
    FastAPI,
    Header,
    HTTPException,
    Path,
    Query,
    Request,
    Security,
)
from fastapi.exceptions import RequestValidationError  # noqa: E402
from fastapi.responses import HTMLResponse, JSONResponse  # noqa: E402
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer  # noqa: E402
from starlette.exceptions import HTTPException as StarletteHTTPException  # noqa: E402
from starlette.routing import Match  # noqa: E402
from starlette.types import ASGIApp, Message, Receive, Scope, Send  # noqa: E402

logger = logging.getLogger(__name__)

DEFAULT_PUBLIC_URL = "http://127.0.0.1:8000"
TITLE = "genmem memory service"
DESCRIPTION = (
    "Generative Agents memory for one or many personas: add memories, retrieve the ones that "
    "matter for a focal text (recency x relevance x importance), keyword retrieval, reflection."
)
Responses = dict[int | str, dict[str, Any]]
"""FastAPI's ``responses=`` of a route: status code to its reply."""
_ERRORS: Responses = {
    401: {"model": ErrorReply, "description": "No valid API key."},
    403: {"model": ErrorReply, "description": "The key may not use this persona."},
    408: {"model": ErrorReply, "description": "The request body took longer than its "
          "deadline (body seconds in /healthz)."},
    413: {"model": ErrorReply, "description": "The request body is over the limit."},
    422: {"model": ErrorReply, "description": "Bad input; names the field."},
    503: {"model": ErrorReply, "description": "The store (or the chat model) is unavailable."},
    500: {"model": ErrorReply, "description": "A fault of the server (logged with its "
          "traceback); the request may be sent again."},
}
_NOT_FOUND: Responses = {
    404: {"model": ErrorReply, "description": "No memories for this persona."},
}
_NEVER_STORED: Responses = {
    404: {"model": ErrorReply, "description": "No memories for this persona, or a node id it "
          "never stored (nothing was forgotten)."},
}
_REFLECT: Responses = {
    409: {"model": ErrorReply, "description": "A reflection of this persona is running."},
    502: {"model": ErrorReply, "description": "The chat model's reply could not be read."},
}
_ANYONE: Responses = {code: _ERRORS[code] for code in (413, 503, 500)}  # no key needed
_STATUS_OF: tuple[tuple[type[GenMemError], int], ...] = (
    (NotStoredError, 404),
    (ValidationError, 422),
    (ReflectionBusyError, 409),
    (ConfigurationError, 503),
    (StorageError, 503),
    (ParseError, 502),
)

_bearer = HTTPBearer(
    auto_error=False, scheme_name="bearer", description="Authorization: Bearer <API key>"
)
_header = APIKeyHeader(
    name="X-API-Key", auto_error=False, scheme_name="apiKey", description="X-API-Key: <API key>"
)


def create_app(
    service: MemoryService,
    *,
    keys: KeyRing | None = None,
    api_keys: Sequence[str] = (),
    public_url: str = DEFAULT_PUBLIC_URL,
    max_body_bytes: int = MAX_BODY_BYTES,
    body_timeout: float = BODY_TIMEOUT,
    header_timeout: float = HEADER_TIMEOUT,
) -> FastAPI:
    """The FastAPI app over a memory service.

    Args:
        service: what the endpoints call.
        keys: the accepted keys with their scopes (see
            :mod:`langchain_genmem.service.security`).
        api_keys: more keys, reaching every persona.
        public_url: the URL clients reach the server at (``servers[0].url`` of the schema,
            which Dify calls).
        max_body_bytes: the largest request body (413 beyond).
        body_timeout: the most seconds a request's body may take (408 beyond).
        header_timeout: the header deadline the server runs with
            (:func:`~langchain_genmem.service.slow_clients.header_protocol`), as
            ``/healthz`` shows it.

    Returns:
        The app; ``app.state.service`` is the service.
    """
    ring = KeyRing([*(keys.keys if keys else ()), *(ApiKey(k) for k in api_keys)])

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        closed = await anyio.to_thread.run_sync(service.close)
        logger.info("stopped: %d persona stream(s) closed, access times flushed", closed)

    app = FastAPI(
        title=TITLE,
        description=DESCRIPTION,
        version=_version(),
        servers=[{"url": public_url.rstrip("/")}],
        lifespan=lifespan,
        docs_url=None,  # served by _add_docs: Swagger UI with a listing that needs no CDN
        redoc_url=None,
    )
    app.state.service = service
    app.state.keys = ring
    app.state.limits = limits(body_bytes=max_body_bytes, header_seconds=header_timeout,
                              body_seconds=body_timeout)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    app.add_middleware(BodyDeadline, seconds=body_timeout)
    _add_error_handlers(app)
    _add_routes(app, service)
    _add_docs(app)
    return app


def _caller(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
    header: Annotated[str | None, Security(_header)],
) -> ApiKey:
    ring: KeyRing = request.app.state.keys
    key = ring.authenticate(bearer.credentials if bearer else header)
    if key is None:
        raise HTTPException(
            401,
            "missing or unknown API key; send 'Authorization: Bearer KEY' or 'X-API-Key: KEY'",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return key


Caller = Annotated[ApiKey, Depends(_caller)]
"""The API key of the request (401 without a valid one)."""

# str, not str | None: Dify's importer takes plain parameter types only; None when not sent.
IdempotencyKey = Annotated[str, Header(
    alias="Idempotency-Key", json_schema_extra={"pattern": KEY_PATTERN},
    description="Names the write (1-128 printable ASCII characters, e.g. a UUID): sent again "
    "with the same body, to any replica, it stores nothing and returns the first write's "
    "memories; with another body it is refused (422).",
)]
"""The ``Idempotency-Key`` header of a write (see :mod:`langchain_genmem.memory.idempotency`)."""


PersonaPath = Annotated[str, Path(
    max_length=MAX_PERSONA_CHARS, description="The persona (not blank, no control character).",
    json_schema_extra={"pattern": NAME_PATTERN})]
"""A persona named in the path, with the rule a body's ``persona_name`` states."""


def _allow(key: ApiKey, persona: str) -> None:
    if not key.allows(persona):
        raise HTTPException(403, f"persona_name: this API key may not use persona {persona!r}")


def _add_routes(app: FastAPI, service: MemoryService) -> None:
    @app.post("/retrieve", operation_id="retrieve", responses=_ERRORS)
    def retrieve(body: RetrieveRequest, key: Caller) -> RetrieveResponse:
        """Retrieve the persona's memories that matter most for a focal text.

        Every event and thought of the persona is scored by recency, relevance to
        focal_text and importance (Generative Agents' new_retrieve, the Dify workflow's contract);
        the best top_k come back with their score and normalised components, and their
        last_accessed becomes now. relevance picks the signal: dense (embeddings), lexical
        (words) or hybrid (both, weighted by lexical_weight); each node shows its dense and
        lexical parts. status is ok, no_candidates (unknown or empty persona) or error
        (message says why); while the store is unavailable the reply is 503.
        """
        _allow(key, body.persona_name)
        return service.retrieve(body)

    @app.post("/memories", operation_id="add_memory", responses=_ERRORS)
    def add_memory(
        body: MemoryRequest,
        key: Caller,
        idempotency_key: IdempotencyKey = None,  # type: ignore[assignment]
    ) -> AddResponse:
        """Add one memory (an event, a thought or a chat) to a persona's memory stream.

        Give poignancy (1-10) unless the server has a chat model to rate it. A new persona
        is created by its first memory. Send an Idempotency-Key header to retry safely.
        """
        _allow(key, body.persona_name)
        return service.add(body.persona_name, [body], idempotency_key)

    @app.post("/memories/batch", operation_id="add_memories", responses=_ERRORS)
    def add_memories(
        body: MemoryBatchRequest,
        key: Caller,
        idempotency_key: IdempotencyKey = None,  # type: ignore[assignment]
    ) -> AddResponse:
        """Add several memories to one persona in one all-or-nothing write.

        memories is a JSON array of objects with the fields of add_memory (without
        persona_name), oldest first, or that array's JSON text; a thought's evidence may cite
        a memory of the same batch. Send an Idempotency-Key header to retry safely.
        """
        _allow(key, body.persona_name)
        return service.add(body.persona_name, body.memories, idempotency_key)

    @app.post("/keyword-retrieve", operation_id="keyword_retrieve", responses=_ERRORS)
    def keyword_retrieve(body: KeywordRequest, key: Caller) -> KeywordResponse:
        """Events and thoughts indexed under a perceived event's subject, predicate or object.

        The original Generative Agents retrieve(): keyword lookups, newest first.
        """
        _allow(key, body.persona_name)
        return service.keyword_retrieve(body)

    @app.post("/reflect", operation_id="reflect", responses={**_ERRORS, **_REFLECT})
    def reflect(body: ReflectRequest, key: Caller) -> ReflectResponse:
        """Reflect: turn the persona's recent memories into thoughts with evidence.

        Runs when the importance trigger has fired (or with force); needs the server's chat
        model. Returns the questions asked and the thoughts written.
        """
        _allow(key, body.persona_name)
        return service.reflect(body.persona_name, force=body.force)

    @app.post("/forget", operation_id="forget", responses={**_ERRORS, **_NEVER_STORED})
    def forget(body: ForgetRequest, key: Caller) -> ForgetResponse:
        """Forget memories of a persona for good: by node id, by selector, or both (AND).

        Selectors: created_after / created_before (a period), types, conversation, speaker,
        text (a part of the description). Thoughts citing a forgotten memory as evidence go
        too unless keep_derived; dry_run only lists them. An id forgotten before is listed in
        already_forgotten (nothing more to do); an id never stored is 404, forgetting nothing.
        """
        _allow(key, body.persona_name)
        return service.forget(body)

    @app.get("/personas", operation_id="list_personas", responses=_ERRORS)
    def list_personas(key: Caller) -> PersonaList:
        """The personas in the store that this API key may use."""
        return PersonaList(personas=[p for p in service.personas() if key.allows(p)])

    # {name:path}: a persona named "a/b" is reached as /personas/a%2Fb (or /personas/a/b)
    @app.get("/personas/{name:path}", operation_id="get_persona",
             responses={**_ERRORS, **_NOT_FOUND})
    def get_persona(
        name: PersonaPath,
        key: Caller,
    ) -> PersonaStats:
        """Memory counts, depths, keyword strengths, reflection trigger and settings."""
        _allow(key, name)
        stats = service.persona_stats(name)
        if stats is None:
            raise HTTPException(404, f"name: no memories for persona {name!r}")
        return stats

    # Declared before forget_persona, whose {name:path} would take ".../memories/node_3" too.
    @app.delete("/personas/{name:path}/memories/{node_id}", operation_id="forget_memory",
                responses={**_ERRORS, **_NEVER_STORED})
    def forget_memory(
        name: PersonaPath,
        node_id: Annotated[str, Path(max_length=MAX_PERSONA_CHARS,
                                     description="The memory, e.g. node_3.",
                                     json_schema_extra={"pattern": NODE_ID_PATTERN})],
        key: Caller,
        keep_derived: Annotated[bool, Query(description="Keep thoughts citing it.")] = False,
    ) -> ForgetResponse:
        """Forget one memory (and the thoughts citing it, unless keep_derived).

        Forgetting a memory forgotten before succeeds and forgets nothing more.
        """
        _allow(key, name)
        request = _path_request(ForgetRequest, {"persona_name": name, "node_ids": node_id,
                                                "keep_derived": keep_derived})
        return service.forget(request)

    @app.delete("/personas/{name:path}", operation_id="forget_persona",
                responses={**_ERRORS, **_NEVER_STORED})
    def forget_persona(
        name: PersonaPath,
        key: Caller,
        dry_run: Annotated[bool, Query(description="Only list what would go.")] = False,
    ) -> ForgetResponse:
        """Forget every memory of a persona; a second call forgets nothing more."""
        _allow(key, name)
        return service.forget_persona(name, dry_run=dry_run)

    @app.get("/healthz", operation_id="health", responses=_ANYONE)
    def health() -> Health:
        """Liveness, the version, the input limits and the open personas (no key needed)."""
        return Health(status="ok", version=app.version, limits=app.state.limits,
                      open_personas=service.streams.open_count,
                      max_open_personas=service.streams.max_open)

    @app.get("/readyz", include_in_schema=False, responses=_ANYONE)
    def ready() -> Ready:
        """Readiness: 200 when the store answers a read, 503 while it does not (no key)."""
        check_store(service.streams)
        return Ready()


def _path_request(model: type[ForgetRequest], fields: dict[str, Any]) -> ForgetRequest:
    """A request made of path parameters, its bad values 422 naming the parameter."""
    try:
        return model.model_validate(fields)
    except PydanticValidationError as e:
        first = e.errors()[0]
        field = ".".join(str(x) for x in first["loc"]) or "path"
        field = "node_id" if field == "node_ids" else field
        raise HTTPException(422, f"{field}: {first['msg']}") from None


def _add_docs(app: FastAPI) -> None:
    @app.get("/docs", include_in_schema=False)
    def docs(request: Request) -> HTMLResponse:
        """Swagger UI over the schema; its plain listing of the endpoints needs no internet."""
        root = str(request.scope.get("root_path", "")).rstrip("/")
        return docs_page(app.openapi(), openapi_url=f"{root}{app.openapi_url}",
                         title=f"{app.title} - docs")


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def bad_input(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "bad input"}
        loc = [str(x) for x in first.get("loc", ()) if x not in ("body", "path", "query")]
        if first.get("type") == "json_invalid":  # loc holds a character position
            loc = []
        field = ".".join(loc) or "body"
        return _error(422, f"{field}: {first.get('msg')}", field)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:  # a body FastAPI could not read (not UTF-8, say)
            return _error(422, f"body: {exc.detail}: expected a JSON object", "body")
        if exc.status_code == 405:  # Starlette lists the methods of one route of the path
            allowed = ", ".join(_methods(request.app, request.scope))
            return _error(405, f"method {request.method} is not allowed here; allowed: "
                          f"{allowed}", headers={"Allow": allowed})
        return _error(exc.status_code, str(exc.detail), headers=exc.headers)

    @app.exception_handler(GenMemError)
    async def library_error(request: Request, exc: GenMemError) -> JSONResponse:
        status = next((code for kind, code in _STATUS_OF if isinstance(exc, kind)), 500)
        return _error(status, str(exc), getattr(exc, "field", None), retry_headers(exc))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        # a bug, not the caller's doing: the one error shape, and the traceback in the log
        logger.error("%s %s failed", request.method, request.url.path,
                     exc_info=(type(exc), exc, exc.__traceback__))
        return _error(500, "internal error: the server failed this request (see its log)")


def _methods(app: FastAPI, scope: Scope) -> list[str]:
    """Every method some route serves at the request's path."""
    methods: set[str] = set()
    for route in app.router.routes:
        match, _ = route.matches({**scope, "method": "GET"})
        if match != Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return sorted(methods)


def _error(
    status: int, message: str, field: str | None = None, headers: Any = None
) -> JSONResponse:
    body = ErrorReply(message=message, field=field).model_dump()
    return JSONResponse(body, status_code=status, headers=headers)


class BodyLimit:
    """ASGI middleware: 413 for a request body over ``max_bytes`` (declared or streamed).

    Args:
        app: the wrapped app.
        max_bytes: the largest body.
    """

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, its body counted."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await _error(413, self._message())(scope, receive, send)
            return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                raise HTTPException(413, self._message())
            return message

        await self.app(scope, limited, send)

    def _message(self) -> str:
        return f"body: larger than the limit of {self.max_bytes} bytes"


def _version() -> str:
    try:
        return version("langchain-genmem")
    except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return "0"
