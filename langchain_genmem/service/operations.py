"""What the service does, once, for both front ends: the HTTP app and the MCP server.

:class:`MemoryService` takes the validated requests of :mod:`langchain_genmem.service.schemas`
and returns their replies; it knows nothing of HTTP, keys or MCP. Each method is plain sync
code over the shared :class:`~langchain_genmem.service.streams.StreamPool` (FastAPI runs it
in its thread pool, the MCP server in a worker thread).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.documents import Document

from langchain_genmem.backends.base import ranking_of
from langchain_genmem.core.errors import (
    ConfigurationError,
    EmbeddingDimensionError,
    GenMemError,
    UnknownNodeError,
    ValidationError,
)
from langchain_genmem.core.nodes import MemoryNode, node_number_or_none
from langchain_genmem.llm.chat import MISSING_KEY_HINT
from langchain_genmem.llm.importance import ImportanceScorer
from langchain_genmem.memory.location import StoreLocation
from langchain_genmem.memory.stats import stream_stats
from langchain_genmem.reflection import ReflectionSettings, create_reflection_graph
from langchain_genmem.retrieval.retrievers import GenerativeAgentsRetriever
from langchain_genmem.service.schemas import (
    SELECTORS,
    AddResponse,
    ForgetRequest,
    ForgetResponse,
    KeywordRequest,
    KeywordResponse,
    Memory,
    MemoryItem,
    PersonaStats,
    ReflectResponse,
    RetrieveDebug,
    RetrievedNode,
    RetrieveRequest,
    RetrieveResponse,
)
from langchain_genmem.service.streams import DEFAULT_MAX_OPEN, StreamPool

if TYPE_CHECKING:
    from langchain_genmem.core.state import StreamState
    from langchain_genmem.memory.forgetting import ForgetReport
    from langchain_genmem.memory.stream import MemoryStream


class ReflectionBusyError(GenMemError):
    """A reflection of this persona is already running; try again when it has finished."""


class NotStoredError(GenMemError):
    """A persona without memories, or a node id it never stored (forgotten ones are stored)."""


class MemoryService:
    """The memory operations of the service over a pool of streams.

    Args:
        streams: the persona streams.
        model: the chat model for ``reflect`` (and, through the pool's importance scorer,
            for memories added without poignancy); None when the server has none.
        score_in: where retrievals rank (``GenerativeAgentsRetriever(score_in=...)``).
        settings: the settings of every reflection (sizes, output form, call bounds,
            budget); None for the defaults.
    """

    def __init__(
        self,
        streams: StreamPool,
        *,
        model: Any = None,
        score_in: Literal["process", "database"] = "process",
        settings: ReflectionSettings | None = None,
    ) -> None:
        self.streams = streams
        self.model = model
        self.score_in = score_in
        self.settings = ReflectionSettings.merged(settings)

    # ------------------------------------------------------------------ reading

    def retrieve(self, request: RetrieveRequest) -> RetrieveResponse:
        """The Dify workflow's weighted retrieval for one focal text.

        An unknown or empty persona is ``no_candidates``; a query vector that does not fit
        the store is ``error`` with its message (so a workflow can branch on ``status``).
        A store that fails raises, as for every other request.

        Args:
            request: the validated request.

        Returns:
            The reply.
        """
        with self.streams.reading(request.persona_name) as stream:
            if stream is None:
                return _empty(
                    "no_candidates", f"no memories for persona {request.persona_name!r}"
                )
            return self._retrieve(stream, request)

    def _retrieve(self, stream: MemoryStream, request: RetrieveRequest) -> RetrieveResponse:
        retriever = GenerativeAgentsRetriever(
            memory_stream=stream, score_in=self.score_in,
            **request.scoring(in_database=self.score_in == "database"), **request.filters()
        )
        try:
            report = retriever.retrieve_with_report(request.focal_text)
        except EmbeddingDimensionError as e:  # a store failing raises: 503 over HTTP
            return _empty("error", str(e))
        left_out = ""
        if report.skipped_filtered:
            left_out = f" ({report.skipped_filtered} left out by the filter)"
        if report.status == "no_candidates":
            return _empty(
                "no_candidates",
                f"no candidate memories (events or thoughts) for {request.persona_name!r}"
                + left_out,
            )
        nodes = [_retrieved(d) for d in report.documents]
        return RetrieveResponse(
            retrieved_nodes=nodes,
            accessed_ids=report.accessed_ids,
            status="ok",
            message=f"{len(nodes)} of {report.candidate_count} memories{left_out}",
            debug=RetrieveDebug(
                total_candidates=report.candidate_count,
                retrieved_count=len(nodes),
                min_score=report.min_score or 0.0,
                max_score=report.max_score or 0.0,
            ),
        )

    def keyword_retrieve(self, request: KeywordRequest) -> KeywordResponse:
        """The original's ``retrieve()``: events and thoughts indexed under s, p or o.

        Args:
            request: the validated request.

        Returns:
            The newest ``limit`` of each, with the full counts.
        """
        with self.streams.reading(request.persona_name) as stream:
            if stream is None:
                return KeywordResponse(persona_name=request.persona_name,
                                       status="no_candidates", event_count=0, thought_count=0,
                                       events=[], thoughts=[])
            stream.refresh()
            spo = (request.subject, request.predicate, request.object)
            events = stream.retrieve_relevant_events(*spo)
            thoughts = stream.retrieve_relevant_thoughts(*spo)
        return KeywordResponse(
            persona_name=request.persona_name,
            status="ok" if events or thoughts else "no_candidates",
            event_count=len(events),
            thought_count=len(thoughts),
            events=[memory_of(n) for n in events[: request.limit]],
            thoughts=[memory_of(n) for n in thoughts[: request.limit]],
        )

    def personas(self) -> list[str]:
        """Every persona of the store."""
        return self.streams.personas()

    def persona_stats(self, persona: str) -> PersonaStats | None:
        """Counts, trigger, settings and keyword strengths of a persona.

        Args:
            persona: the persona.

        Returns:
            The statistics, or None for an unknown persona.
        """
        with self.streams.reading(persona) as stream:
            if stream is None:
                return None
            stream.refresh()
            stats = stream_stats(stream, top=10)
        stats["depths"] = {str(k): v for k, v in stats["depths"].items()}
        return PersonaStats.model_validate(stats)

    # ------------------------------------------------------------------ writing

    def add(
        self, persona: str, items: Sequence[MemoryItem], idempotency_key: str | None = None
    ) -> AddResponse:
        """Add memories in one all-or-nothing write.

        Args:
            persona: the persona (created by its first memory).
            items: the memories, oldest first.
            idempotency_key: names the write: sent again (to any replica), it stores nothing
                and returns the first write's memories (see
                :mod:`~langchain_genmem.memory.idempotency`).

        Returns:
            The stored memories.

        Raises:
            ValidationError: a memory is bad (names ``items[i].field``), or has no poignancy
                and the server has no chat model to rate it.
        """
        inputs = [item.as_input() for item in items]
        if self.streams.importance is None:
            for i, item in enumerate(inputs):
                if item["poignancy"] is None:
                    where = "poignancy" if len(inputs) == 1 else f"memories[{i}].poignancy"
                    msg = (
                        f"{where}: give the importance (1-10); this server has no chat model "
                        "to rate it (start it with OPENAI_API_KEY set to let it rate memories)"
                    )
                    raise ValidationError(msg, field="poignancy")
        with self.streams.writing(persona) as stream:
            nodes = stream.add_many(inputs, idempotency_key=idempotency_key)
        return AddResponse(persona_name=persona, count=len(nodes),
                           memories=[memory_of(n) for n in nodes])

    def reflect(self, persona: str, *, force: bool = False) -> ReflectResponse:
        """Run the reflection graph on a persona, one reflection per persona at a time.

        Args:
            persona: the persona.
            force: reflect even if the trigger has not fired.

        Returns:
            What it did, with the thoughts written.

        Raises:
            ConfigurationError: the server has no chat model.
            ReflectionBusyError: a reflection of this persona is running.
        """
        if self.model is None:
            raise ConfigurationError(f"reflect: {MISSING_KEY_HINT}")

        with self.streams.reading(persona) as stream:
            if stream is None:
                return ReflectResponse(persona_name=persona, status="not_due", focal_points=[],
                                       thoughts=[], dropped=0, llm_calls=0)
            lock = self.streams.reflection_lock(persona)
            if not lock.acquire(blocking=False):
                msg = f"a reflection of {persona!r} is already running; try again when it ends"
                raise ReflectionBusyError(msg)
            try:
                stream.refresh()
                graph = create_reflection_graph(self.model, stream, force=force,
                                                settings=self.settings)
                out = graph.invoke({})
            finally:
                lock.release()
            return ReflectResponse(
                persona_name=persona,
                status=out["status"],
                focal_points=out.get("focal_points", []),
                thoughts=[memory_of(stream.get(i)) for i in out.get("written", [])],
                dropped=len(out.get("dropped", [])),
                reasons=out.get("reasons", []),
                llm_calls=out.get("llm_calls", 0),
            )

    # ------------------------------------------------------------------ forgetting

    def forget(self, request: ForgetRequest) -> ForgetResponse:
        """Forget the memories a request names or selects, for good.

        Idempotent: an id forgotten before is listed in ``already_forgotten`` and forgetting
        it again forgets nothing more; an id the persona never stored fails the call.

        Args:
            request: the validated request.

        Returns:
            What was forgotten (or would be, for a dry run).

        Raises:
            ValidationError: neither a node id nor a selector, or a bad selector.
            NotStoredError: the persona has no memories, or a node id was never stored;
                nothing was forgotten.
        """
        if not request.ids() and not request.selectors():
            msg = ("node_ids: nothing selected; give node ids or a selector "
                   f"({', '.join(SELECTORS)})")
            raise ValidationError(msg, field="node_ids")
        with self._stored(request.persona_name) as stream:
            try:
                return self._forget(stream, request)
            except UnknownNodeError:  # another process forgot one of them just now
                return self._forget(stream, request)

    def forget_persona(self, persona: str, *, dry_run: bool = False) -> ForgetResponse:
        """Forget every memory of a persona; forgetting it again forgets nothing more.

        Args:
            persona: the persona.
            dry_run: only list what would be forgotten.

        Returns:
            What was forgotten.

        Raises:
            NotStoredError: the store never held a memory of the persona.
        """
        with self._stored(persona) as stream:
            return _forget_reply(stream.forget_all(dry_run=dry_run), [])

    @contextmanager
    def _stored(self, persona: str) -> Iterator[MemoryStream]:
        with self.streams.reading(persona) as stream:
            if stream is None:
                raise NotStoredError(f"persona_name: no memories for persona {persona!r}")
            yield stream

    @staticmethod
    def _forget(stream: MemoryStream, request: ForgetRequest) -> ForgetResponse:
        stream.refresh()
        ids = request.ids()
        live, gone = _live_ids(stream.committed, ids)
        if ids and not live:  # each forgotten before: nothing more to do
            return ForgetResponse(persona_name=stream.persona, dry_run=request.dry_run, count=0,
                                  forgotten=[], derived=[], kept=[], already_forgotten=gone,
                                  remaining=len(stream))
        report = stream.forget(live, keep_derived=request.keep_derived,
                               dry_run=request.dry_run, **request.selectors())
        return _forget_reply(report, gone)

    def close(self) -> int:
        """Flush and close every open stream.

        Returns:
            How many streams were closed.
        """
        return self.streams.close()


def memory_of(node: MemoryNode) -> Memory:
    """A stored node as the service shows it.

    Args:
        node: the node.

    Returns:
        The reply model.
    """
    return Memory(
        node_id=node.node_id,
        type=node.type,
        depth=node.depth,
        created=node.created,
        last_accessed=node.last_accessed,
        expiration=node.expiration,
        poignancy=node.poignancy,
        description=node.description,
        subject=node.subject,
        predicate=node.predicate,
        object=node.object,
        keywords=list(node.keywords),
        evidence=list(node.evidence),
        conversation=node.conversation,
        speaker=node.speaker,
    )


def _live_ids(state: StreamState, ids: Sequence[str]) -> tuple[list[str], list[str]]:
    """The ids of live memories, and those forgotten before, in the order given.

    Raises:
        NotStoredError: an id the persona never stored (numbered after its last memory).
    """
    live: list[str] = []
    gone: list[str] = []
    forgotten = [(first, last) for first, last, _ in state.forgotten]
    for node_id in ids:
        number = node_number_or_none(node_id)
        if number is None or not 1 <= number <= state.node_count:
            msg = f"node_ids: {node_id!r} was never stored for this persona; nothing was forgotten"
            raise NotStoredError(msg)
        was = any(first <= number <= last for first, last in forgotten)
        (gone if was else live).append(node_id)
    return live, gone


def _forget_reply(report: ForgetReport, already: list[str]) -> ForgetResponse:
    return ForgetResponse(
        persona_name=report.persona, dry_run=report.dry_run, count=len(report.forgotten),
        forgotten=list(report.forgotten), derived=list(report.derived), kept=list(report.kept),
        rekeyed=list(report.rekeyed), already_forgotten=already, remaining=report.live_count,
        erased=report.erased, erasure=report.erasure,
    )


def _retrieved(doc: Document) -> RetrievedNode:
    m = doc.metadata
    return RetrievedNode(
        id=m["node_id"],
        node_id=m["node_id"],
        type=m["type"],
        created_at=m["created"],
        last_accessed=m["last_accessed"],
        description=doc.page_content,
        poignancy=m["poignancy"],
        subject=m["subject"],
        predicate=m["predicate"],
        object=m["object"],
        keywords=m["keywords"],
        depth=m["depth"],
        score=m["score"],
        recency=m["recency"],
        relevance=m["relevance"],
        importance=m["importance"],
        dense=m.get("dense"),
        lexical=m.get("lexical"),
        cosine=m.get("cosine"),
        bm25=m.get("bm25"),
    )


def _empty(status: str, message: str) -> RetrieveResponse:
    return RetrieveResponse(
        retrieved_nodes=[],
        accessed_ids=[],
        status=status,  # type: ignore[arg-type]
        message=message,
        debug=RetrieveDebug(total_candidates=0, retrieved_count=0, min_score=0.0, max_score=0.0),
    )


def _can_rank(store: StoreLocation) -> bool:
    """Whether the store ranks memories itself; Chroma (a folder or a server) is not opened."""
    if store.dsn is None and store.backend_object is None:
        return False  # Chroma ranks nothing itself
    try:
        backend = store.backend(create=False)
    except ValidationError:
        return False  # an embedded folder or collection not made yet: Chroma, which cannot
    return ranking_of(backend) is not None


def create_service(
    store: StoreLocation | str | os.PathLike[str],
    *,
    model: Any = None,
    score_in: Literal["process", "database"] = "process",
    max_open_personas: int = DEFAULT_MAX_OPEN,
    settings: ReflectionSettings | None = None,
) -> MemoryService:
    """A memory service over a store.

    Args:
        store: where the memories live: a :class:`StoreLocation` (``StoreLocation(dsn=...)``,
            the ``genmem`` command's ``Store``) or an embedded folder's path.
        model: a chat model for reflection and for rating memories added without poignancy;
            None for a server that needs poignancy given and cannot reflect.
        score_in: ``"database"``: the store ranks every retrieval and the streams are lazy
            (``MemoryStream(..., lazy=True)``), so the service holds no persona in memory
            and any number of replicas can serve one PostgreSQL database.
        max_open_personas: the most personas kept open at once; the least recently used
            one is closed (its memory freed) beyond that, and reopens on its next request.
        settings: the settings of reflection; their call bounds and output form also rate
            the memories added without poignancy. None for the defaults.

    Returns:
        The service; streams open on the first request that needs them.

    Raises:
        ConfigurationError: ``score_in="database"`` on a store that cannot rank.
    """
    settings = ReflectionSettings.merged(settings)
    importance = None
    if model is not None:
        importance = ImportanceScorer(model, limits=settings.limits, output=settings.output)
    if not isinstance(store, StoreLocation):
        store = StoreLocation(store)
    lazy = score_in == "database"
    if lazy and not _can_rank(store):
        msg = (f"score_in 'database': {store.where()} cannot rank memories itself; "
               "serve a PostgreSQL database (--dsn) or rank in process")
        raise ConfigurationError(msg)
    pool = StreamPool.from_store(store, importance=importance, lazy=lazy,
                                 max_open=max_open_personas)
    return MemoryService(pool, model=model, score_in=score_in, settings=settings)
