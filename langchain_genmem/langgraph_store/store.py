"""GenerativeAgentsStore: the memory stream as a LangGraph ``BaseStore``.

LangGraph's long-term memory API (``create_react_agent(..., store=...)``, LangMem's
``create_manage_memory_tool`` / ``create_search_memory_tool``, LangGraph's server with
``"store": {"path": ...}`` in ``langgraph.json``) speaks ``BaseStore``. This store keeps
every item as a memory of a persona's stream and ranks ``search`` with the paper's weighted
retrieval, or by similarity alone when asked.

How the store maps onto the stream:

- **Namespaces -> personas**: ``persona_for(namespace)`` names the persona whose stream holds
  a namespace's items; by default the namespace's labels joined by ``"/"``
  (``("memories", "u1")`` -> ``"memories/u1"``; labels a persona name cannot hold are
  escaped, see :mod:`~langchain_genmem.langgraph_store.namespaces`). Several namespaces may
  share a persona (e.g. ``persona_for=lambda ns: ns[-1]``); items keep their namespace, as
  given, either way. Every operation's namespace is checked as ``BaseStore`` checks labels,
  those passed to ``batch`` too; a list is read as a tuple.
- **put** adds a memory per text of the value (see
  :mod:`~langchain_genmem.langgraph_store.indexing`): with ``index=IndexConfig`` the texts at
  its ``fields`` (default ``["$"]``, the whole value as JSON) or at the put's ``index``
  paths; without one the ``text_field`` text (default ``"content"``, what LangMem writes;
  else the value's JSON). An item with several texts is held by several memories (its
  *facets*); a search scores it by its best one. ``index=False`` (or no text found) stores
  one memory that ranked search does not see. The memory's type is ``value[type_field]``
  when that is ``"event"`` or ``"thought"`` (else an event), its poignancy
  ``value[poignancy_field]`` when a number, else rated by the
  :class:`~langchain_genmem.ImportanceScorer` of ``model`` when one is given (each facet),
  else ``default_poignancy``; ``created`` is the stream's clock. The key, the value, the
  item's times and TTL live in the persona's state (``extra["langgraph_store"]``), written
  in the same commit as the memories. A value that is a turn of a conversation says so:
  ``value["conversation"]`` (any id) and ``value["speaker"]``; a value with a speaker put
  from a LangGraph run without a conversation is a turn of the run's ``thread_id``. A turn
  is embedded with the turns before it (see :mod:`langchain_genmem.memory.turns`).
- **put on an existing key** adds new memories that *supersede* the old ones: node
  numbering never changes, the old memories stay in the stream, and the store's
  ``get``/``search`` see only each key's live version (search passes the live rows to the
  retriever as its candidate filter). The key's record lists the memories it superseded,
  and the new memory supersedes the previous version (``supersedes``, see
  :mod:`~langchain_genmem.memory.corrections`), so a plain retriever over the persona also
  finds only each key's newest version (``include_superseded=True`` finds the older ones).
  ``created_at`` is kept across updates (as LangGraph's PostgreSQL store does;
  ``InMemoryStore`` resets it) and ``updated_at`` is the latest put. Item times are the
  stream's clock, read as UTC.
- **delete** (``put(..., None)``, a batch's deletes) *forgets* the key's memories and every
  memory it superseded (:meth:`~langchain_genmem.MemoryStream.forget`, with the thoughts
  concluded from them): afterwards no retriever over the persona finds them, exports leave
  them out, and the key's record with its value is gone. Forgotten node numbers are never
  reused. The forget and the key records without the key are one write, all or nothing (a
  batch's puts are a second write, after its deletes). A record whose memory was forgotten
  outside the store (``MemoryStream.forget``, ``genmem forget``) is no item: ``get``,
  ``search`` and ``list_namespaces`` leave it out, here and in any other process, and the
  next write of the persona drops it. ``keep_history=True`` only retires the key instead:
  its memories stay in the stream as history, which a plain
  :class:`~langchain_genmem.GenerativeAgentsRetriever` over the persona still finds.
- **search** with a query ranks the namespace's live items (access times updated). With
  ``ranking="weighted"`` (the default) ``SearchItem.score`` is the weighted score of
  recency, relevance and importance on the retriever's *absolute* scale (see
  :data:`~langchain_genmem.numerics.scoring.Scale`), so scores compare across searches and
  a lone unrelated item scores low; the options are
  :data:`~langchain_genmem.retrieval.presets.CHAT_RETRIEVAL` unless ``retriever_kwargs``
  gives others (``{}``: the persona's own settings, e.g. ``store.stream(persona)
  .update_settings(relevance_mode="hybrid")``). With ``ranking="similarity"`` the score is
  the cosine similarity of the query and the item's best text and the order follows it, as
  in LangGraph's own stores (so a similarity threshold works as there). The original's idle
  filter is off: an item that says "idle" is something a user told the store, not a
  simulation's idle marker (``retriever_kwargs={"idle_filter": True}`` turns it on; with
  ``"score_in": "database"`` the database applies it, ranks by dense relevance and
  normalises over the candidates). Items ranked search does not see (``index=False``) follow
  the ranked ones, score None, newest first. Across several personas (a prefix that spans
  them) each persona is ranked on its own and the results are merged by score. Without a
  query (or with a blank one) it lists items newest first (by ``updated_at``). ``filter``
  holds equality tests on value fields (``{"kind": "food"}``, or ``{"n": {"$gte": 3}}`` with
  ``$eq $ne $gt $gte $lt $lte``) and the retrieval filters ``created_after``,
  ``created_before``, ``types`` and ``min_poignancy`` (reserved names; see
  :mod:`~langchain_genmem.langgraph_store.filters`), which limit listing too.
- **How a search finds the live items**: the store keeps, per persona, which node rows hold
  a key's live memories, their namespaces and the filtered value fields as masks
  (:mod:`langchain_genmem.numerics.item_masks`), updated key by key on put and delete. A
  search reads nothing but the head the retrieval reads anyway; a commit of another writer
  seen there is compared key by key with what the store holds. Personas are listed once
  and again when a search's namespace prefix names a persona the store does not know, so
  a persona another process makes is found by a search of its namespace (or of any prefix
  that is no persona of its own) and by ``list_namespaces``.
- **TTL** (``ttl=TTLConfig``, ``put(..., ttl=minutes)``; see
  :mod:`~langchain_genmem.langgraph_store.ttl`): an item expires ``ttl`` minutes of the
  stream's clock after it was written, or last read with ``refresh_ttl``; an expired item is
  never returned, and :meth:`GenerativeAgentsStore.sweep_ttl` (or the sweeper,
  :meth:`GenerativeAgentsStore.start_ttl_sweeper`) deletes it as a delete does.

One process writes a persona's items at a time (a store holds a lock; two processes putting
into the same persona at once may lose each other's key records, never a memory).

Example:
    .. code-block:: python

        from langchain_genmem import GenerativeAgentsStore

        store = GenerativeAgentsStore(path=".genmem")
        store.put(("memories", "u1"), "food", {"content": "I love dumplings"})
        store.search(("memories", "u1"), query="what do I like to eat?")[0].score
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, get_args

import numpy as np
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langgraph.config import get_config
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from langchain_genmem.backends.base import MemoryBackend
from langchain_genmem.backends.chroma import DEFAULT_COLLECTION
from langchain_genmem.backends.opener import open_backend
from langchain_genmem.core import validation
from langchain_genmem.core.errors import UnknownNodeError, ValidationError
from langchain_genmem.core.nodes import node_number_or_none
from langchain_genmem.core.timeutil import naive
from langchain_genmem.langgraph_store.filters import compare, namespace_matches, split_filter
from langchain_genmem.langgraph_store.indexing import ItemIndex, as_json
from langchain_genmem.langgraph_store.items import (
    REGISTRY,
    Items,
    Key,
    Record,
    live_version,
    memory_ids,
    ns_text,
)
from langchain_genmem.langgraph_store.namespaces import checked_op, default_persona
from langchain_genmem.langgraph_store.ttl import (
    DEFAULT_SWEEP_MINUTES,
    REFRESH_STEP,
    Sweeper,
    expiry,
    ttl_config,
    ttl_minutes,
)
from langchain_genmem.llm.importance import ImportanceScorer
from langchain_genmem.memory.stream import Clock, MemoryStream
from langchain_genmem.numerics.candidate_filter import make_filter
from langchain_genmem.numerics.item_masks import Rows, ValueTest
from langchain_genmem.reflection.settings import ReflectionSettings
from langchain_genmem.retrieval.presets import CHAT_RETRIEVAL, SIMILARITY_RETRIEVAL
from langchain_genmem.retrieval.retrievers import GenerativeAgentsRetriever

__all__ = ["GenerativeAgentsStore", "Ranking"]

Ranking = Literal["weighted", "similarity"]
"""How a store's search scores: the weighted retrieval on the absolute scale, or the cosine."""

_Touched = dict[str, dict[Key, None]]  # persona -> keys read with refresh_ttl, in order


class GenerativeAgentsStore(BaseStore):
    """A LangGraph store whose items are memories ranked by recency, relevance and importance.

    See the module docstring for how namespaces, keys, updates and deletes map onto the
    stream.

    Args:
        path: a folder for embedded Chroma.
        client: any chromadb client (e.g. a ``chroma run`` server's ``HttpClient``).
        dsn: a PostgreSQL connection string (pgvector) instead of Chroma.
        collection_name: the Chroma collection.
        backend: a ready backend (e.g. a
            :class:`~langchain_genmem.memory.location.StoreLocation`'s), instead of the
            above; shared, so :meth:`close` leaves it open for its owner to close.
        embeddings: any LangChain ``Embeddings``; None = the bundled offline model (or
            ``index["embed"]``).
        index: LangGraph's ``IndexConfig``: ``embed`` (an ``Embeddings``, a function of
            texts or a provider string), ``dims`` (checked against every vector) and
            ``fields`` (paths into the value; default ``["$"]``). None keeps the reading of
            ``text_field``.
        ttl: LangGraph's ``TTLConfig``: ``default_ttl`` (minutes), ``refresh_on_read``
            (default True), ``sweep_interval_minutes`` (the sweeper's default interval).
        ranking: ``"weighted"`` (default: the weighted retrieval, scores comparable across
            searches) or ``"similarity"`` (score = cosine similarity, order by it).
        clock: the streams' clock (e.g. a :class:`~langchain_genmem.SimulationClock`).
        model: a chat model that rates the poignancy of values that carry none.
        settings: the call bounds and output form of those ratings
            (:class:`~langchain_genmem.ReflectionSettings`); None for the defaults.
        default_poignancy: the poignancy of values without one when no model is given.
        persona_for: namespace -> persona name (default: labels joined by ``"/"``).
        text_field: the value field whose text is the memory's description (without
            ``index``).
        type_field: the value field giving the memory type (``"event"`` / ``"thought"``).
        poignancy_field: the value field giving the poignancy.
        retriever_kwargs: arguments of the :class:`~langchain_genmem.GenerativeAgentsRetriever`
            that ranks weighted searches (weights, ``recency_mode``, ``relevance``,
            ``lexical_weight``, ``scale``, ``score_in``...); what it leaves out is the
            persona's setting, except ``idle_filter``, which is off unless given, and
            ``scale``, which is ``"absolute"`` unless given (both as the database ranks when
            ``score_in="database"``). None (the default) is
            :data:`~langchain_genmem.retrieval.presets.CHAT_RETRIEVAL`, measured best on
            conversations; ``{}`` ranks by the persona's settings (the simulation's
            weights unless changed). Not with ``ranking="similarity"``.
        keep_history: ``delete`` retires the key and keeps its memories in the stream (as
            history a retriever over the persona still finds); False (the default) forgets
            them for good.

    Raises:
        ValidationError: a bad argument, naming it.
    """

    supports_ttl = True

    def __init__(
        self,
        *,
        path: str | Any | None = None,
        client: Any | None = None,
        dsn: str | None = None,
        collection_name: str = DEFAULT_COLLECTION,
        backend: MemoryBackend | None = None,
        embeddings: Embeddings | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        ranking: Ranking = "weighted",
        clock: Clock | None = None,
        model: BaseChatModel | None = None,
        settings: ReflectionSettings | None = None,
        default_poignancy: float = 5.0,
        persona_for: Callable[[tuple[str, ...]], str] = default_persona,
        text_field: str = "content",
        type_field: str = "type",
        poignancy_field: str = "poignancy",
        retriever_kwargs: Mapping[str, Any] | None = None,
        keep_history: bool = False,
    ) -> None:
        self.retriever_kwargs = _search_options(ranking, retriever_kwargs)
        self.ranking = ranking
        self._index = ItemIndex.made(index, embeddings, text_field)
        self.index_config = self._index.config
        self.ttl_config = ttl_config(ttl)
        self._owns_backend = backend is None
        self.backend = open_backend(path, client=client, dsn=dsn, backend=backend,
                                    collection=collection_name)
        self.embeddings = self._index.embeddings
        self.clock = clock
        self.importance = None
        if model is not None:
            chosen = ReflectionSettings.merged(settings)
            self.importance = ImportanceScorer(model, limits=chosen.limits, output=chosen.output)
        self.default_poignancy = make_filter(min_poignancy=default_poignancy).min_poignancy
        self.persona_for = persona_for
        self.text_field, self.type_field = text_field, type_field
        self.poignancy_field = poignancy_field
        self.keep_history = keep_history
        self._streams: dict[str, MemoryStream] = {}
        self._items_of: dict[str, Items] = {}  # each persona's live items, as last read
        self._rankers: dict[str, GenerativeAgentsRetriever] = {}
        self._personas: set[str] | None = None  # the personas known, listed when needed
        self._lock = threading.RLock()
        self._sweeper = Sweeper(self.sweep_ttl)

    # ------------------------------------------------------------------ streams

    def stream(self, persona: str) -> MemoryStream:
        """The stream of a persona (opened once, sharing the store's backend).

        Args:
            persona: the persona name.

        Returns:
            The stream.
        """
        with self._lock:
            if persona not in self._streams:
                self._streams[persona] = MemoryStream(
                    persona, embeddings=self._index.embed_with, clock=self.clock,
                    importance=self.importance, backend=self.backend,
                )
            return self._streams[persona]

    def retriever(self, persona: str) -> GenerativeAgentsRetriever:
        """The retriever that ranks a persona's searches.

        Args:
            persona: the persona name.

        Returns:
            A retriever over the persona's stream with ``retriever_kwargs``.
        """
        return GenerativeAgentsRetriever(memory_stream=self.stream(persona),
                                         **self.retriever_kwargs)

    def close(self) -> None:
        """Stop the sweeper, flush access times and close every stream and the backend."""
        self._sweeper.stop()
        with self._lock:
            for stream in self._streams.values():
                stream.close()
            self._streams.clear()
            self._items_of.clear()
            self._rankers.clear()
            self._personas = None
            if self._owns_backend:
                self.backend.close()

    def __enter__(self) -> GenerativeAgentsStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ BaseStore

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run operations in order of reads first, then writes, as ``InMemoryStore`` does.

        Reads (get, search, list_namespaces) see the store as it was before the batch; puts
        of the same key keep the last; each persona's puts are one all-or-nothing write, and
        the expiry that reads with ``refresh_ttl`` moved on is written with them. Every
        operation is checked before any runs.

        Args:
            ops: the operations.

        Returns:
            One result per operation, in order.

        Raises:
            ValidationError: a bad operation (namespace, value, index, ttl, filter...),
                naming it; nothing of the batch ran.
        """
        ops = [checked_op(op) for op in ops]
        puts: dict[Key, tuple[PutOp, list[str]]] = {}
        for op in ops:
            if isinstance(op, PutOp):
                puts[(op.namespace, op.key)] = (op, self._checked_put(op))
        with self._lock:
            touched: _Touched = {}
            results = [None if isinstance(op, PutOp) else self._read(op, touched)
                       for op in ops]
            self._write(list(puts.values()), touched)
            return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async :meth:`batch` (the same work, in a thread: writes hold a lock).

        Args:
            ops: the operations.

        Returns:
            One result per operation, in order.
        """
        return await asyncio.to_thread(self.batch, list(ops))

    def _read(self, op: Op, touched: _Touched) -> Result:
        if isinstance(op, GetOp):
            persona = self.persona_for(op.namespace)
            items = self._items(persona)
            record = items.record(op.namespace, op.key)
            if record is None or items.is_expired((op.namespace, op.key), self._now(persona)):
                return None
            if op.refresh_ttl:
                _touch(touched, persona, items, [record])
            return record.item()
        if isinstance(op, SearchOp):
            return self._search(op, touched)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        msg = f"op: unknown store operation {type(op).__name__}"
        raise ValidationError(msg, field="op")

    def _now(self, persona: str) -> datetime:
        """The persona's stream clock, naive (what item times and expiries are read by)."""
        return naive(self.stream(persona).clock())

    # ------------------------------------------------------------------ TTL

    def sweep_ttl(self) -> int:
        """Delete every expired item, as a delete does (its memories forgotten).

        Returns:
            How many items were deleted.
        """
        swept = 0
        with self._lock:
            for persona in self._personas_under((), fresh=True):
                if persona not in self._streams and not self._may_expire(persona):
                    continue  # no item with a TTL: the stream is not opened for nothing
                keys = self._items(persona).expired(self._now(persona))
                if keys:
                    ops = [PutOp(namespace, key, None) for namespace, key in keys]
                    swept += self._write_persona(persona, [(op, []) for op in ops], {},
                                                 expired_only=True)
        return swept

    def _may_expire(self, persona: str) -> bool:
        """Whether a persona not opened yet holds an item with a TTL (its state read alone)."""
        state = self.backend.read_state(persona)
        registry = {} if state is None else state.extra.get(REGISTRY, {})
        return any("expires_at" in entry for entries in registry.values()
                   for entry in entries.values())

    async def asweep_ttl(self) -> int:
        """Async :meth:`sweep_ttl` (in a thread).

        Returns:
            How many items were deleted.
        """
        return await asyncio.to_thread(self.sweep_ttl)

    def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> concurrent.futures.Future[None]:
        """Sweep expired items every interval in a thread, until :meth:`stop_ttl_sweeper`.

        Args:
            sweep_interval_minutes: the interval (default: the TTL config's
                ``sweep_interval_minutes``, else 5 minutes).

        Returns:
            A future done when the sweeper stops (the running one's if one runs).

        Raises:
            ValidationError: an interval that is not a number of minutes > 0.
        """
        given = sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes")
        minutes = ttl_minutes(given or DEFAULT_SWEEP_MINUTES, "sweep_interval_minutes")
        return self._sweeper.start(minutes)  # type: ignore[arg-type]

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper.

        Args:
            timeout: seconds to wait for a sweep under way (None: as long as it takes).

        Returns:
            True when no sweeper runs any more, False when ``timeout`` passed first.
        """
        return self._sweeper.stop(timeout)

    async def astart_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> concurrent.futures.Future[None]:
        """Async :meth:`start_ttl_sweeper` (starting a thread does not block the loop).

        Args:
            sweep_interval_minutes: as for :meth:`start_ttl_sweeper`.

        Returns:
            A future done when the sweeper stops.
        """
        return self.start_ttl_sweeper(sweep_interval_minutes)

    async def astop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Async :meth:`stop_ttl_sweeper` (the wait runs in a thread).

        Args:
            timeout: as for :meth:`stop_ttl_sweeper`.

        Returns:
            True when no sweeper runs any more.
        """
        return await asyncio.to_thread(self._sweeper.stop, timeout)

    # ------------------------------------------------------------------ registry

    def _items(self, persona: str, *, refresh: bool = True) -> Items:
        """A persona's live items, caught up with its stream's state.

        Args:
            persona: the persona.
            refresh: look at the store first (a head read) for other writers' commits;
                False when the stream just did (a retrieval refreshes before it ranks).
        """
        stream = self.stream(persona)
        if refresh:
            stream.refresh()
        items = self._items_of.setdefault(persona, Items())
        state = stream.committed
        if items.rev != state.rev:
            items.sync(state.extra.get(REGISTRY, {}), state)
            items.rev = state.rev
        return items

    def _personas_under(self, prefix: tuple[str, ...], *, fresh: bool = False) -> list[str]:
        """The personas that may hold namespaces under ``prefix``, sorted.

        The store's personas are listed (a read of every persona's record) the first time,
        and again when the prefix's own persona is not known yet (a namespace another
        process made); this store's writes add theirs. With the default ``persona_for``
        only the prefix's persona and those below it can hold its namespaces. ``fresh``
        lists them in any case.
        """
        if fresh or self._personas is None or not self._knows(prefix):
            self._personas = set(self.backend.personas())
        known = self._personas | set(self._streams)
        if self.persona_for is default_persona and prefix:
            joined = default_persona(prefix)
            known = {p for p in known if p == joined or p.startswith(joined + "/")}
        return sorted(known)

    def _knows(self, prefix: tuple[str, ...]) -> bool:
        try:
            persona = self.persona_for(prefix)
        except (IndexError, KeyError, TypeError, ValueError):  # a prefix too short to map
            return False
        return self._personas is not None and persona in self._personas

    def _ranker(self, persona: str) -> GenerativeAgentsRetriever:
        """The retriever that ranks a persona's searches (made once)."""
        ranker = self._rankers.get(persona)
        if ranker is None:
            ranker = self._rankers[persona] = self.retriever(persona)
        return ranker

    # ------------------------------------------------------------------ writes

    def _checked_put(self, op: PutOp) -> list[str]:
        """Check a put before anything runs; the texts its value is embedded as."""
        if op.value is None:
            return []
        if not isinstance(op.value, Mapping):
            msg = f"value: expected a dict for key {op.key!r}, got {type(op.value).__name__}"
            raise ValidationError(msg, field="value")
        try:
            json.dumps(op.value, allow_nan=False)
        except (TypeError, ValueError) as e:
            msg = (f"value: the value of key {op.key!r} is not JSON ({e}); store texts, "
                   "numbers, lists")
            raise ValidationError(msg, field="value") from None
        ttl_minutes(op.ttl)
        return self._index.texts(op.value, op.index)

    def _write(self, puts: Sequence[tuple[PutOp, list[str]]], touched: _Touched) -> None:
        by_persona: dict[str, list[tuple[PutOp, list[str]]]] = {p: [] for p in touched}
        for put in puts:
            by_persona.setdefault(self.persona_for(put[0].namespace), []).append(put)
        for persona, ops in by_persona.items():
            self._write_persona(persona, ops, touched.get(persona, {}))

    def _write_persona(
        self,
        persona: str,
        puts: Sequence[tuple[PutOp, list[str]]],
        touched: Mapping[Key, None],
        *,
        expired_only: bool = False,
    ) -> int:
        """One persona's puts, deletes and refreshed expiries, as one write (two with deletes).

        Returns:
            How many items were deleted.
        """
        held = self._items(persona)  # caught up with the state this write starts from
        stream = self.stream(persona)
        base_rev = stream.committed.rev
        extra = {**stream.committed.extra}
        # Entries are never changed in place: copy the namespaces' dicts, not every entry.
        registry = {ns: dict(items) for ns, items in extra.get(REGISTRY, {}).items()}
        now = naive(stream.clock())
        changed = _refresh(registry, touched, now)
        ops = [op for op, _ in puts]
        adds = [(op, texts) for op, texts in puts if op.value is not None]
        deleted = _take_deleted(registry, ops, now if expired_only else None)
        for namespace, key in held.forgotten:  # records of forgotten memories go now
            registry.get(ns_text(namespace), {}).pop(key, None)
        registry = {ns: items for ns, items in registry.items() if items}
        forgot = False
        if deleted and not self.keep_history:  # with the key records, in one write
            without = {ns: dict(keys) for ns, keys in registry.items()} if adds else registry
            forgot = _forget_versions(stream, deleted, without)
        if not adds:
            if not forgot and (deleted or changed or held.forgotten):
                stream.set_extra(**{REGISTRY: registry})
            self._note_write(persona, held, base_rev, registry, [*ops, *changed])
            return len(deleted)
        self._add(stream, adds, registry, extra, now)
        self._note_write(persona, held, base_rev, registry, [*ops, *changed])
        return len(deleted)

    def _add(self, stream: MemoryStream, adds: Sequence[tuple[PutOp, list[str]]],
             registry: dict[str, dict[str, Any]], extra: Mapping[str, Any],
             now: datetime) -> None:
        """The memories of a persona's puts and their key records, in one write."""
        # Node ids are known before the write: the stream numbers nodes in order, after the
        # highest number ever used (forgotten ones included).
        first = stream.committed.node_count + 1
        memories: list[dict[str, Any]] = []
        for op, texts in adds:
            entries = registry.setdefault(ns_text(op.namespace), {})
            old = entries.get(op.key)
            ids = [f"node_{first + len(memories) + i}" for i in range(max(1, len(texts)))]
            entry = entries[op.key] = self._entry(op, ids, bool(texts), old, now)
            made = [self._memory(op, text, now, turn=i == 0)
                    for i, text in enumerate(texts or [self._unranked_text(op)])]
            if old:  # the memories this one supersedes, for a delete to forget
                entry["superseded"] = memory_ids(old)
                made[0]["supersedes"] = _committed(live_version(old), first)
            memories += made
        nodes = stream.add_many(memories, state={"extra": {**extra, REGISTRY: registry}})
        wrote = [n.node_id for n in nodes]
        if wrote != [f"node_{first + i}" for i in range(len(memories))]:
            # another process wrote this persona in between: the key records follow
            at = 0
            for op, _ in adds:
                entry = registry[ns_text(op.namespace)][op.key]
                count = 1 + len(entry.get("facets", ()))
                entry["node_id"], *rest = wrote[at : at + count]
                if rest:
                    entry["facets"] = rest
                at += count
            stream.set_extra(**{REGISTRY: registry})

    def _entry(self, op: PutOp, ids: list[str], indexed: bool,
               old: Mapping[str, Any] | None, now: datetime) -> dict[str, Any]:
        """A key's record for a put whose memories get ``ids``."""
        entry: dict[str, Any] = {
            "node_id": ids[0],
            "value": json.loads(json.dumps(op.value)),  # as stored, not the caller's dict
            "created_at": old["created_at"] if old else now.isoformat(),
            "updated_at": now.isoformat(),
            "indexed": indexed,
        }
        if len(ids) > 1:
            entry["facets"] = ids[1:]
        minutes = ttl_minutes(op.ttl)
        if minutes is not None:
            entry["ttl"], entry["expires_at"] = minutes, expiry(now, minutes).isoformat()
        return entry

    def _note_write(self, persona: str, held: Items, base_rev: int,
                    registry: Mapping[str, Mapping[str, Any]],
                    changed: Sequence[PutOp | Key]) -> None:
        """Apply this store's write to the persona's items, key by key.

        Only when the stream holds exactly the registry written on top of the state the
        items were read at; otherwise the next read compares them with the state.
        """
        if self._personas is not None:
            self._personas.add(persona)
        state = self.stream(persona).committed
        if held.rev != base_rev or state.extra.get(REGISTRY) is not registry:
            return
        held.forgotten.clear()  # the registry written holds none of them
        for change in changed:
            namespace, key = (change.namespace, change.key) if isinstance(change, PutOp) \
                else change
            entry = registry.get(ns_text(namespace), {}).get(key)
            if entry is None:
                held.drop(namespace, key)
            else:
                held.set(namespace, key, entry)
        held.rev = state.rev

    def _memory(self, op: PutOp, text: str, now: datetime, *, turn: bool) -> dict[str, Any]:
        """The memory of one text of a put (``turn``: it carries the value's turn fields)."""
        value = op.value or {}
        kind = value.get(self.type_field)
        item: dict[str, Any] = {
            "type": kind if kind in ("event", "thought") else "event",
            "description": text,
            "created": now,
        }
        if turn:
            item.update(_turn_of(value))
        poignancy = value.get(self.poignancy_field)
        if isinstance(poignancy, int | float) and not isinstance(poignancy, bool):
            item["poignancy"] = poignancy
        elif self.importance is None:
            item["poignancy"] = self.default_poignancy
        return item

    def _unranked_text(self, op: PutOp) -> str:
        """The description of an item ranked search does not see (no text to embed)."""
        value = op.value or {}
        text = value.get(self.text_field)
        return text if isinstance(text, str) and text.strip() else as_json(value)

    # ------------------------------------------------------------------ search

    def _search(self, op: SearchOp, touched: _Touched) -> list[SearchItem]:
        value_filter, flt = split_filter(op.filter)
        if op.limit <= 0:
            return []
        prefix = op.namespace_prefix
        group = ValueTest(("prefix", prefix), lambda ns: ns[: len(prefix)] == prefix)
        fields = {
            name: ValueTest(repr(want), functools.partial(compare, want=want),
                            only=want if type(want) is str else None)
            for name, want in value_filter.items()
        }
        personas = self._personas_under(prefix)
        need = op.offset + op.limit
        query = op.query if op.query and op.query.strip() else None
        scored: list[tuple[float | None, Record]] = []
        if query is not None:
            for persona in personas:
                scored += self._ranked(persona, query, need, group, fields, flt)
            if len(personas) > 1:
                scored.sort(key=lambda s: s[0], reverse=True)  # type: ignore[arg-type,return-value]
            scored = scored[:need]
        if len(scored) < need:  # listing, or the items ranked search does not see
            rows: Rows = "items" if query is None else "unranked"
            kept = [r for p in personas  # a ranking caught up with the store just now
                    for r in self._listed(p, group, fields, flt, rows, refresh=query is None)]
            kept.sort(key=lambda r: (r.updated_at, r.key), reverse=True)
            scored += [(None, r) for r in kept[: need - len(scored)]]
        page = scored[op.offset : need]
        if op.refresh_ttl:
            for persona in personas:
                held = self._items_of.get(persona)
                if held is not None and held.expiring:
                    _touch(touched, persona, held, [r for _, r in page])
        return [r.item(score, search=True) for score, r in page]  # type: ignore[misc]

    def _ranked(self, persona: str, query: str, need: int, group: ValueTest,
                fields: Mapping[str, ValueTest],
                flt: Mapping[str, Any]) -> list[tuple[float | None, Record]]:
        """A persona's best ``need`` items for a query: each by its best memory, best first."""

        def live(persona: str = persona) -> np.ndarray:
            # called once the retrieval caught up with the store: no second head read
            items = self._items(persona, refresh=False)
            mask = items.masks.select(group, fields, rows="ranked")
            if items.expiring:
                gone = items.expired_rows(self._now(persona))
                gone = gone[gone < mask.size]
                if gone.size:
                    mask = mask.copy()
                    mask[gone] = False
            return mask

        k = need
        while True:
            report = self._ranker(persona).retrieve_with_report(query, k=k, node_mask=live,
                                                                **flt)
            items = self._items_of[persona]
            best: dict[Key, tuple[float | None, Record]] = {}
            for d in report.documents:
                assert d.id is not None  # the retriever's Documents carry their node_id
                # an item deleted (or put anew) since the ranking is left out, not an error
                held = items.keys.get(node_number_or_none(d.id) - 1)  # type: ignore[operator]
                record = None if held is None else items.record(*held)
                if record is not None and record.holds(d.id) and held not in best:
                    best[held] = (d.metadata["score"], record)  # type: ignore[index]
            if len(best) >= need or len(report.documents) < k:
                return list(best.values())[:need]
            k *= 2  # several of an item's facets took places: rank more memories

    def _listed(self, persona: str, group: ValueTest, fields: Mapping[str, ValueTest],
                flt: Mapping[str, Any], rows: Rows = "items", *,
                refresh: bool = True) -> list[Record]:
        """A persona's live items that pass, in the order of their namespaces' key records.

        Listing sorts by (``updated_at``, key); two items equal in both are in different
        namespaces, and keep the order in which the persona's key records hold those.
        ``refresh`` as for :meth:`_items`.
        """
        items = self._items(persona, refresh=refresh)
        found = np.flatnonzero(items.masks.select(group, fields, rows=rows))
        if found.size == 0:
            return []
        records = [items.record(*items.keys[row]) for row in found.tolist()]
        if items.expiring:
            now = self._now(persona)
            records = [r for r in records
                       if not items.is_expired((r.namespace, r.key), now)]  # type: ignore[union-attr]
        if flt:
            stream, passes = self.stream(persona), make_filter(**flt).passes
            records = [r for r in records if _passes(stream, r.node_id, passes)]  # type: ignore[union-attr]
        registry = self.stream(persona).committed.extra.get(REGISTRY, {})
        place = {tuple(json.loads(text)): i for i, text in enumerate(registry)}
        records.sort(key=lambda r: place[r.namespace])  # type: ignore[union-attr]
        return records  # type: ignore[return-value]

    # ------------------------------------------------------------------ namespaces

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        personas = self._personas_under((), fresh=True)  # another process may have made some
        found: set[tuple[str, ...]] = set()
        for persona in personas:
            items = self._items(persona)
            now = self._now(persona) if items.expiring else None
            found |= {ns for ns, key in items.entries
                      if now is None or not items.is_expired((ns, key), now)}
        for cond in op.match_conditions or ():
            found = {ns for ns in found if namespace_matches(cond, ns)}
        if op.max_depth is not None:
            found = {ns[: op.max_depth] for ns in found}
        return sorted(found)[op.offset : op.offset + op.limit]


# ---------------------------------------------------------------------------- helpers


def _search_options(ranking: Any, given: Mapping[str, Any] | None) -> dict[str, Any]:
    """The retriever options a store's searches rank with."""
    if ranking not in get_args(Ranking):
        msg = f"ranking: expected 'weighted' or 'similarity', got {ranking!r}"
        raise ValidationError(msg, field="ranking")
    if ranking == "similarity":
        if given is not None:
            msg = ("retriever_kwargs: ranking='similarity' scores by the cosine alone; "
                   "retriever_kwargs set the weighted ranking's options")
            raise ValidationError(msg, field="retriever_kwargs")
        return dict(SIMILARITY_RETRIEVAL)
    names = set(GenerativeAgentsRetriever.model_fields) - {"memory_stream"}
    validation.known_arguments(given or {}, names, "retriever_kwargs")
    options = dict(CHAT_RETRIEVAL if given is None else given)
    if options.get("score_in") != "database":  # the database always filters, min-max
        # Items are what users said, never a simulation's idle markers: keep them all.
        options.setdefault("idle_filter", False)
        options.setdefault("scale", "absolute")
    return options


def _touch(touched: _Touched, persona: str, items: Items, records: Iterable[Record]) -> None:
    """Note the items read with ``refresh_ttl`` whose expiry a write moves on."""
    for r in records:
        if (r.namespace, r.key) in items.expiring:
            touched.setdefault(persona, {})[(r.namespace, r.key)] = None


def _refresh(registry: dict[str, dict[str, Any]], touched: Mapping[Key, None],
             now: datetime) -> list[Key]:
    """Move on the expiry of the keys read with ``refresh_ttl``; the keys changed.

    An expiry moves only by at least :data:`REFRESH_STEP` of its TTL (a hot item is not
    rewritten on every read).
    """
    changed = []
    for namespace, key in touched:
        entries = registry.get(ns_text(namespace), {})
        entry = entries.get(key)
        if entry is None or "ttl" not in entry:
            continue
        moved = expiry(now, entry["ttl"])
        was = datetime.fromisoformat(entry["expires_at"])
        if was > now and (moved - was).total_seconds() >= REFRESH_STEP * entry["ttl"] * 60:
            entries[key] = {**entry, "expires_at": moved.isoformat()}
            changed.append((namespace, key))
    return changed


def _take_deleted(registry: dict[str, dict[str, Any]], ops: Sequence[PutOp],
                  expired_at: datetime | None) -> list[Mapping[str, Any]]:
    """Take the deleted keys' records out of ``registry``.

    With ``expired_at``, only those expired then: a sweep leaves a key refreshed meanwhile.
    """
    deleted = []
    for op in ops:
        entries = registry.get(ns_text(op.namespace), {})
        entry = entries.get(op.key) if op.value is None else None
        if entry is None:
            continue
        if expired_at is not None and not (
            entry.get("expires_at") and datetime.fromisoformat(entry["expires_at"]) <= expired_at
        ):
            continue
        deleted.append(entries.pop(op.key))
    return deleted


def _passes(stream: MemoryStream, node_id: str, passes: Callable[[Any], bool]) -> bool:
    """Whether an item's memory passes a retrieval filter (one forgotten meanwhile: no)."""
    try:
        return passes(stream.get(node_id))
    except UnknownNodeError:
        return False


def _turn_of(value: Mapping[str, Any]) -> dict[str, str]:
    """The conversation and speaker of a value that is a turn of a conversation.

    A value's ``"conversation"`` names its conversation; a value with a ``"speaker"`` and no
    conversation is a turn of the LangGraph thread it is put from (``thread_id`` of the
    running graph's config), when there is one. Other values are no turns.
    """
    out = {name: value[name] for name in ("conversation", "speaker")
           if isinstance(value.get(name), str)}
    if "speaker" in out and "conversation" not in out:
        thread = _thread_id()
        if thread is not None:
            out["conversation"] = thread
    return out


def _thread_id() -> str | None:
    """The ``thread_id`` of the LangGraph run this is called in, or None outside one."""
    try:
        config = get_config()
    except RuntimeError:  # not inside a runnable
        return None
    thread = (config.get("configurable") or {}).get("thread_id")
    return None if thread is None else str(thread)


def _committed(node_ids: Sequence[str], first: int) -> list[str]:
    """The ids numbered below ``first`` (the versions committed before this write)."""
    return [i for i in node_ids if (node_number_or_none(i) or first) < first]


def _forget_versions(
    stream: MemoryStream, entries: Sequence[Mapping[str, Any]],
    registry: Mapping[str, Mapping[str, Any]],
) -> bool:
    """Forget the memories of deleted keys, every version (those forgotten before skipped).

    The key records without them are committed in the same write: a delete is all or
    nothing. Returns whether anything was written (False: nothing left to forget).
    """
    ids = [i for entry in entries for i in memory_ids(entry) if i in stream]
    return bool(ids) and stream.forget(ids, extra={REGISTRY: registry}).rev is not None
