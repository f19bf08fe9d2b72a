"""GenerativeAgentsStore: the memory stream as a LangGraph ``BaseStore``.

LangGraph's long-term memory API (``create_react_agent(..., store=...)``, LangMem's
``create_manage_memory_tool`` / ``create_search_memory_tool``, deployments) speaks
``BaseStore``. This store keeps every item as a memory of a persona's stream and ranks
``search`` with the paper's weighted retrieval instead of similarity alone.

How the store maps onto the stream:

- **Namespaces -> personas**: ``persona_for(namespace)`` names the persona whose stream holds
  a namespace's items; by default the namespace's labels joined by ``"/"``
  (``("memories", "u1")`` -> ``"memories/u1"``). Several namespaces may share a persona (e.g.
  ``persona_for=lambda ns: ns[-1]``); items keep their namespace either way.
- **put** adds a memory: its description is ``value[text_field]`` (default ``"content"``, what
  LangMem writes; a value without it is described by its JSON), its type is
  ``value[type_field]`` when that is ``"event"`` or ``"thought"`` (else an event), its
  poignancy ``value[poignancy_field]`` when a number, else rated by the
  :class:`~langchain_genmem.ImportanceScorer` of ``model`` when one is given, else
  ``default_poignancy``; ``created`` is the stream's clock. The key, the value and the item's
  times live in the persona's state (``extra["langgraph_store"]``), written in the same commit
  as the memory. A value that is a turn of a conversation says so: ``value["conversation"]``
  (any id) and ``value["speaker"]``; a value with a speaker put from a LangGraph run without
  a conversation is a turn of the run's ``thread_id``. A turn is embedded with the turns
  before it (see :mod:`langchain_genmem.memory.turns`).
- **put on an existing key** adds a new memory that *supersedes* the old one: node
  numbering never changes, the old memory stays in the stream, and the store's
  ``get``/``search`` see only each key's live memory (search passes the live node ids to the
  retriever as its candidate filter). The key's record lists the memories it superseded,
  and the new memory supersedes the previous version (``supersedes``, see
  :mod:`~langchain_genmem.memory.corrections`), so a plain retriever over the persona also
  finds only each key's newest version (``include_superseded=True`` finds the older ones).
  ``created_at`` is kept across updates (as LangGraph's PostgreSQL store does;
  ``InMemoryStore`` resets it) and ``updated_at`` is the latest put. Item times are the
  stream's clock, read as UTC.
- **delete** (``put(..., None)``, a batch's deletes) *forgets* the key's memory and every
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
- **search** with a query ranks the namespace's live items with the retriever's exact
  scoring (access times updated, ``SearchItem.score`` is the weighted score). It scores as
  the persona is set: its weights, decay, ``relevance_mode`` (dense, lexical or hybrid) and
  ``lexical_weight`` (``store.stream(persona).update_settings(relevance_mode="hybrid")``),
  unless ``retriever_kwargs`` fixes them for every persona
  (``{"relevance": "hybrid", "lexical_weight": 0.5}``). The original's idle filter is off:
  an item that says "idle" is something a user told the store, not a simulation's idle
  marker (``retriever_kwargs={"idle_filter": True}`` turns it on; with
  ``"score_in": "database"`` the database applies it, and ranks by dense relevance).
  Across several personas (a prefix that spans them) each persona is ranked on its own and
  the results are merged by score. Without a query it lists items newest first (by ``updated_at``).
  ``filter`` holds equality tests on value fields (``{"kind": "food"}``, or
  ``{"n": {"$gte": 3}}`` with ``$eq $ne $gt $gte $lt $lte``) and the retrieval filters
  ``created_after``, ``created_before``, ``types`` and ``min_poignancy`` (reserved names;
  see :mod:`langchain_genmem.numerics.candidate_filter`), which limit listing too.
- **How a search finds the live items**: the store keeps, per persona, which node rows hold
  a key's live memory, their namespaces and the filtered value fields as masks
  (:mod:`langchain_genmem.numerics.item_masks`), updated key by key on put and delete. A
  search reads nothing but the head the retrieval reads anyway; a commit of another writer
  seen there is compared key by key with what the store holds. Personas are listed once
  and again when a search's namespace prefix names a persona the store does not know, so
  a persona another process makes is found by a search of its namespace (or of any prefix
  that is no persona of its own) and by ``list_namespaces``.
- **TTL** is not supported (``supports_ttl`` is False: ``put(..., ttl=...)`` raises);
  memories fade by recency instead. ``index=False`` stores an item that listing shows and
  ranked search leaves out; ``index=[fields]`` describes the memory by those value fields.

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
import copy
import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langgraph.config import get_config
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from langchain_genmem.backends.opener import open_backend
from langchain_genmem.core import validation
from langchain_genmem.core.errors import UnknownNodeError, ValidationError
from langchain_genmem.core.nodes import node_number_or_none
from langchain_genmem.core.state import StreamState
from langchain_genmem.core.timeutil import naive
from langchain_genmem.llm.importance import ImportanceScorer
from langchain_genmem.memory.stream import Clock, MemoryStream
from langchain_genmem.numerics.candidate_filter import make_filter
from langchain_genmem.numerics.item_masks import ItemMasks, ValueTest
from langchain_genmem.reflection.settings import ReflectionSettings
from langchain_genmem.retrieval.presets import CHAT_RETRIEVAL
from langchain_genmem.retrieval.retrievers import GenerativeAgentsRetriever

REGISTRY = "langgraph_store"
TIME_FILTERS = ("created_after", "created_before", "types", "min_poignancy")
_OPS = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: float(a) > float(b),
    "$gte": lambda a, b: float(a) >= float(b),
    "$lt": lambda a, b: float(a) < float(b),
    "$lte": lambda a, b: float(a) <= float(b),
}


def default_persona(namespace: tuple[str, ...]) -> str:
    """The default persona of a namespace: its labels joined by ``"/"``.

    Args:
        namespace: the namespace.

    Returns:
        The persona name.
    """
    return "/".join(namespace)


@dataclass(frozen=True)
class _Record:
    """One live item: its memory and what ``get`` returns."""

    namespace: tuple[str, ...]
    key: str
    node_id: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    indexed: bool

    def item(self, score: float | None = None, *, search: bool = False) -> Item:
        fields = dict(namespace=self.namespace, key=self.key, value=copy.deepcopy(self.value),
                      created_at=self.created_at, updated_at=self.updated_at)
        return SearchItem(**fields, score=score) if search else Item(**fields)


Key = tuple[tuple[str, ...], str]


class _Items:
    """A persona's live items as this store last read them: entries by key, masks by row.

    Kept up to date by this store's own writes; a state another writer committed is
    compared with it entry by entry (by node id) and only the keys that changed are redone.
    """

    def __init__(self) -> None:
        self.rev = -1  # the state revision these items were read at
        self.entries: dict[Key, Mapping[str, Any]] = {}
        self.forgotten: set[Key] = set()  # records whose memory is forgotten: no items
        self.keys: dict[int, Key] = {}  # row -> key
        self.masks = ItemMasks()
        self._records: dict[Key, _Record] = {}  # made when first asked for

    def set(self, namespace: tuple[str, ...], key: str, entry: Mapping[str, Any]) -> None:
        self.drop(namespace, key)
        number = node_number_or_none(entry["node_id"])
        if number is None:  # not a memory of this stream: nothing to find
            return
        self.entries[(namespace, key)] = entry
        self.keys[number - 1] = (namespace, key)
        self.masks.put(number - 1, namespace, entry["value"], indexed=entry.get("indexed", True))

    def drop(self, namespace: tuple[str, ...], key: str) -> None:
        self._records.pop((namespace, key), None)
        entry = self.entries.pop((namespace, key), None)
        number = None if entry is None else node_number_or_none(entry["node_id"])
        if number is not None and self.keys.get(number - 1) == (namespace, key):
            del self.keys[number - 1]
            self.masks.retire(number - 1)

    def sync(
        self, registry: Mapping[str, Mapping[str, Mapping[str, Any]]], state: StreamState
    ) -> None:
        """Take a registry another writer committed: redo only the keys whose memory changed.

        A record whose memory is forgotten in ``state`` is no item (the memory was forgotten
        outside the store, or by a delete of an earlier release, which wrote the key records
        after the forget and may have stopped in between); such records are kept in
        :attr:`forgotten` for the next write to drop.
        """
        seen: set[Key] = set()
        changed: list[tuple[Key, Mapping[str, Any]]] = []
        for ns_text, entries in registry.items():
            namespace = tuple(json.loads(ns_text))
            for key, entry in entries.items():
                seen.add((namespace, key))
                held = self.entries.get((namespace, key))
                if held is not entry and (held is None or held["node_id"] != entry["node_id"]):
                    changed.append(((namespace, key), entry))
        for gone in [k for k in self.entries if k not in seen]:
            self.drop(*gone)
        self.forgotten &= seen
        every = [(lo, hi) for lo, hi, _ in state.forgotten]
        lost = _forgotten([entry for _, entry in changed], every)
        for ((namespace, key), entry), is_lost in zip(changed, lost, strict=True):
            if is_lost:
                self.lose(namespace, key)
            else:
                self.set(namespace, key, entry)
        since = state.forgotten_since(self.rev)  # held records whose memory went since
        if since:
            held = list(self.entries.items())
            lost = _forgotten([entry for _, entry in held], since)
            for ((namespace, key), _), is_lost in zip(held, lost, strict=True):
                if is_lost:
                    self.lose(namespace, key)

    def lose(self, namespace: tuple[str, ...], key: str) -> None:
        """A record whose memory is forgotten: no item, and the next write drops it."""
        self.drop(namespace, key)
        self.forgotten.add((namespace, key))

    def record(self, namespace: tuple[str, ...], key: str) -> _Record | None:
        made = self._records.get((namespace, key))
        if made is not None:
            return made
        r = self.entries.get((namespace, key))
        if r is None:
            return None
        made = self._records[(namespace, key)] = _Record(
            namespace, key, r["node_id"], r["value"], _utc(r["created_at"]),
            _utc(r["updated_at"]), r.get("indexed", True),
        )
        return made


class GenerativeAgentsStore(BaseStore):
    """A LangGraph store whose items are memories ranked by recency, relevance and importance.

    See the module docstring for how namespaces, keys, updates and deletes map onto the
    stream.

    Args:
        path: a folder for embedded Chroma.
        client: any chromadb client (e.g. a ``chroma run`` server's ``HttpClient``).
        dsn: a PostgreSQL connection string (pgvector) instead of Chroma.
        collection_name: the Chroma collection.
        embeddings: any LangChain ``Embeddings``; None = the bundled offline model.
        clock: the streams' clock (e.g. a :class:`~langchain_genmem.SimulationClock`).
        model: a chat model that rates the poignancy of values that carry none.
        settings: the call bounds and output form of those ratings
            (:class:`~langchain_genmem.ReflectionSettings`); None for the defaults.
        default_poignancy: the poignancy of values without one when no model is given.
        persona_for: namespace -> persona name (default: labels joined by ``"/"``).
        text_field: the value field whose text is the memory's description.
        type_field: the value field giving the memory type (``"event"`` / ``"thought"``).
        poignancy_field: the value field giving the poignancy.
        retriever_kwargs: arguments of the :class:`~langchain_genmem.GenerativeAgentsRetriever`
            that ranks searches (weights, ``recency_mode``, ``relevance``,
            ``lexical_weight``, ``score_in``...); what it leaves out is the persona's
            setting, except ``idle_filter``, which is off unless given (or scored in the
            database). None (the default) is
            :data:`~langchain_genmem.retrieval.presets.CHAT_RETRIEVAL`, measured best on
            conversations; ``{}`` ranks by the persona's settings (the simulation's
            weights unless changed).
        keep_history: ``delete`` retires the key and keeps its memories in the stream (as
            history a retriever over the persona still finds); False (the default) forgets
            them for good.

    Raises:
        ValidationError: a bad argument, naming it.
    """

    supports_ttl = False

    def __init__(
        self,
        *,
        path: str | Any | None = None,
        client: Any | None = None,
        dsn: str | None = None,
        collection_name: str = "genmem",
        embeddings: Embeddings | None = None,
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
        names = set(GenerativeAgentsRetriever.model_fields) - {"memory_stream"}
        validation.known_arguments(retriever_kwargs or {}, names, "retriever_kwargs")
        self.backend = open_backend(path, client=client, dsn=dsn, collection=collection_name)
        self.embeddings = embeddings
        self.clock = clock
        self.importance = None
        if model is not None:
            chosen = ReflectionSettings.merged(settings)
            self.importance = ImportanceScorer(model, limits=chosen.limits, output=chosen.output)
        self.default_poignancy = make_filter(min_poignancy=default_poignancy).min_poignancy
        self.persona_for = persona_for
        self.text_field, self.type_field = text_field, type_field
        self.poignancy_field = poignancy_field
        self.retriever_kwargs = dict(
            CHAT_RETRIEVAL if retriever_kwargs is None else retriever_kwargs
        )
        if self.retriever_kwargs.get("score_in") != "database":  # the database always filters
            # Items are what users said, never a simulation's idle markers: keep them all.
            self.retriever_kwargs.setdefault("idle_filter", False)
        self.keep_history = keep_history
        self._streams: dict[str, MemoryStream] = {}
        self._items_of: dict[str, _Items] = {}  # each persona's live items, as last read
        self._rankers: dict[str, GenerativeAgentsRetriever] = {}
        self._personas: set[str] | None = None  # the personas known, listed when needed
        self._lock = threading.RLock()

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
                    persona, embeddings=self.embeddings, clock=self.clock,
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
        return GenerativeAgentsRetriever(stream=self.stream(persona), **self.retriever_kwargs)

    def close(self) -> None:
        """Flush access times and close every stream and the backend."""
        with self._lock:
            for stream in self._streams.values():
                stream.close()
            self._streams.clear()
            self._items_of.clear()
            self._rankers.clear()
            self._personas = None
            self.backend.close()

    # ------------------------------------------------------------------ BaseStore

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run operations in order of reads first, then writes, as ``InMemoryStore`` does.

        Reads (get, search, list_namespaces) see the store as it was before the batch; puts
        of the same key keep the last; each persona's puts are one all-or-nothing write.

        Args:
            ops: the operations.

        Returns:
            One result per operation, in order.
        """
        ops = list(ops)
        with self._lock:
            results: list[Result] = []
            puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
            for op in ops:
                if isinstance(op, PutOp):
                    puts[(op.namespace, op.key)] = op
                    results.append(None)
                else:
                    results.append(self._read(op))
            self._apply_puts(list(puts.values()))
            return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async :meth:`batch` (the same work, in a thread: writes hold a lock).

        Args:
            ops: the operations.

        Returns:
            One result per operation, in order.
        """
        return await asyncio.to_thread(self.batch, list(ops))

    def _read(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            record = self._items(self.persona_for(op.namespace)).record(op.namespace, op.key)
            return None if record is None else record.item()
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        msg = f"op: unknown store operation {type(op).__name__}"
        raise ValidationError(msg, field="op")

    # ------------------------------------------------------------------ registry

    def _items(self, persona: str, *, refresh: bool = True) -> _Items:
        """A persona's live items, caught up with its stream's state.

        Args:
            persona: the persona.
            refresh: look at the store first (a head read) for other writers' commits;
                False when the stream just did (a retrieval refreshes before it ranks).
        """
        stream = self.stream(persona)
        if refresh:
            stream.refresh()
        items = self._items_of.setdefault(persona, _Items())
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

    def _apply_puts(self, puts: Sequence[PutOp]) -> None:
        by_persona: dict[str, list[PutOp]] = {}
        for op in puts:
            _check_put(op)
            by_persona.setdefault(self.persona_for(op.namespace), []).append(op)
        for persona, ops in by_persona.items():
            self._write_persona(persona, ops)

    def _write_persona(self, persona: str, ops: Sequence[PutOp]) -> None:
        held = self._items(persona)  # caught up with the state this write starts from
        stream = self.stream(persona)
        base_rev = stream.committed.rev
        extra = {**stream.committed.extra}
        # Entries are never changed in place: copy the namespaces' dicts, not every entry.
        registry = {ns: dict(items) for ns, items in extra.get(REGISTRY, {}).items()}
        now = naive(stream.clock())
        adds = [op for op in ops if op.value is not None]
        deleted = [entry for op in ops if op.value is None
                   for entry in [registry.get(_ns_text(op.namespace), {}).pop(op.key, None)]
                   if entry is not None]
        for namespace, key in held.forgotten:  # records of forgotten memories go now
            registry.get(_ns_text(namespace), {}).pop(key, None)
        registry = {ns: items for ns, items in registry.items() if items}
        items = [self._memory(op, now) for op in adds]
        forgot = False
        if deleted and not self.keep_history:  # with the key records, in one write
            without = {ns: dict(keys) for ns, keys in registry.items()} if items else registry
            forgot = _forget_versions(stream, deleted, without)
        if not items:
            if not forgot:
                stream.set_extra(**{REGISTRY: registry})
            self._note_write(persona, held, base_rev, registry, ops)
            return
        # Node ids are known before the write: the stream numbers nodes in order, after the
        # highest number ever used (forgotten ones included).
        first = stream.committed.node_count + 1
        for i, op in enumerate(adds):
            entries = registry.setdefault(_ns_text(op.namespace), {})
            old = entries.get(op.key)
            entries[op.key] = {
                "node_id": f"node_{first + i}",
                "value": json.loads(json.dumps(op.value)),  # as stored, not the caller's dict
                "created_at": old["created_at"] if old else now.isoformat(),
                "updated_at": now.isoformat(),
                "indexed": op.index is not False,
            }
            if old:  # the memories this one supersedes, for a delete to forget
                entries[op.key]["superseded"] = _versions(old)
                items[i]["supersedes"] = _committed(_versions(old), first)[-1:]
        nodes = stream.add_many(items, state={"extra": {**extra, REGISTRY: registry}})
        wrote = [n.node_id for n in nodes]
        expected = [f"node_{first + i}" for i in range(len(adds))]
        if wrote != expected:  # another process wrote this persona in between
            for op, node_id in zip(adds, wrote, strict=True):
                registry[_ns_text(op.namespace)][op.key]["node_id"] = node_id
            stream.set_extra(**{REGISTRY: registry})
        self._note_write(persona, held, base_rev, registry, ops)

    def _note_write(self, persona: str, held: _Items, base_rev: int,
                    registry: Mapping[str, Mapping[str, Any]], ops: Sequence[PutOp]) -> None:
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
        for op in ops:
            if op.value is None:
                held.drop(op.namespace, op.key)
            else:
                held.set(op.namespace, op.key, registry[_ns_text(op.namespace)][op.key])
        held.rev = state.rev

    def _memory(self, op: PutOp, now: datetime) -> dict[str, Any]:
        value = op.value or {}
        kind = value.get(self.type_field)
        item: dict[str, Any] = {
            "type": kind if kind in ("event", "thought") else "event",
            "description": self._text(value, op.index),
            "created": now,
        }
        for name, given in _turn_of(value).items():
            item[name] = given
        poignancy = value.get(self.poignancy_field)
        if isinstance(poignancy, int | float) and not isinstance(poignancy, bool):
            item["poignancy"] = poignancy
        elif self.importance is None:
            item["poignancy"] = self.default_poignancy
        return item

    def _text(self, value: Mapping[str, Any], index: Any) -> str:
        fields = [self.text_field] if index in (None, False) else list(index)
        texts = [value[f] for f in fields if isinstance(value.get(f), str) and value[f].strip()]
        if texts:
            return "\n".join(texts)
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)

    # ------------------------------------------------------------------ search

    def _search(self, op: SearchOp) -> list[SearchItem]:
        value_filter, flt = _split_filter(op.filter)
        if op.limit <= 0:
            return []
        prefix = op.namespace_prefix
        group = ValueTest(("prefix", prefix), lambda ns: ns[: len(prefix)] == prefix)
        fields = {
            name: ValueTest(repr(want), lambda have, want=want: _compare(have, want),
                            only=want if type(want) is str else None)
            for name, want in value_filter.items()
        }
        personas = self._personas_under(prefix)
        if op.query is None:
            kept = [r for p in personas for r in self._listed(p, group, fields, flt)]
            kept.sort(key=lambda r: (r.updated_at, r.key), reverse=True)
            return [r.item(search=True) for r in kept[op.offset : op.offset + op.limit]]
        scored: list[tuple[float, _Record]] = []
        for persona in personas:

            def live(persona: str = persona) -> np.ndarray:
                # called once the retrieval caught up with the store: no second head read
                items = self._items(persona, refresh=False)
                return items.masks.select(group, fields, indexed_only=True)

            report = self._ranker(persona).retrieve_with_report(
                op.query, k=op.offset + op.limit, node_mask=live, **flt
            )
            items = self._items_of[persona]
            for d in report.documents:
                # an item deleted (or put anew) since the ranking is left out, not an error
                held = items.keys.get(node_number_or_none(d.id) - 1)  # type: ignore[operator]
                record = None if held is None else items.record(*held)
                if record is not None and record.node_id == d.id:
                    scored.append((d.metadata["score"], record))
        if len(personas) > 1:
            scored.sort(key=lambda s: s[0], reverse=True)
        return [r.item(score, search=True) for score, r in scored[op.offset : op.offset + op.limit]]

    def _listed(self, persona: str, group: ValueTest, fields: Mapping[str, ValueTest],
                flt: Mapping[str, Any]) -> list[_Record]:
        """A persona's live items that pass, in the order of their namespaces' key records.

        Listing sorts by (``updated_at``, key); two items equal in both are in different
        namespaces, and keep the order in which the persona's key records hold those.
        """
        items = self._items(persona)
        rows = np.flatnonzero(items.masks.select(group, fields))
        if rows.size == 0:
            return []
        records = [items.record(*items.keys[row]) for row in rows.tolist()]
        if flt:
            stream, passes = self.stream(persona), make_filter(**flt).passes
            records = [r for r in records if _passes(stream, r.node_id, passes)]  # type: ignore[union-attr]
        registry = self.stream(persona).committed.extra.get(REGISTRY, {})
        place = {tuple(json.loads(ns_text)): i for i, ns_text in enumerate(registry)}
        records.sort(key=lambda r: place[r.namespace])  # type: ignore[union-attr]
        return records  # type: ignore[return-value]

    # ------------------------------------------------------------------ namespaces

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        personas = self._personas_under((), fresh=True)  # another process may have made some
        found = {ns for p in personas for ns, _ in self._items(p).entries}
        for cond in op.match_conditions or ():
            found = {ns for ns in found if _namespace_matches(cond, ns)}
        if op.max_depth is not None:
            found = {ns[: op.max_depth] for ns in found}
        return sorted(found)[op.offset : op.offset + op.limit]


# ---------------------------------------------------------------------------- helpers


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


def _versions(entry: Mapping[str, Any]) -> list[str]:
    """Every memory a key's record stands for: those it superseded, then its live one."""
    return [*entry.get("superseded", ()), entry["node_id"]]


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
    ids = [i for entry in entries for i in _versions(entry) if i in stream]
    return bool(ids) and stream.forget(ids, extra={REGISTRY: registry}).rev is not None


def _forgotten(
    entries: Sequence[Mapping[str, Any]], ranges: Sequence[tuple[int, int]]
) -> list[bool]:
    """Whether each record's memory is in one of the forgotten ``(first, last)`` ranges."""
    if not ranges or not entries:
        return [False] * len(entries)
    numbers = np.array([node_number_or_none(e["node_id"]) or 0 for e in entries], dtype=np.int64)
    first, last = np.array(sorted(ranges), dtype=np.int64).T  # disjoint: ascending both
    at = np.searchsorted(first, numbers, side="right") - 1
    return ((at >= 0) & (numbers <= last[np.maximum(at, 0)])).tolist()


def _ns_text(namespace: tuple[str, ...]) -> str:
    return json.dumps(list(namespace), ensure_ascii=False)


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


def _check_put(op: PutOp) -> None:
    if op.value is not None and not isinstance(op.value, Mapping):
        msg = f"value: expected a dict for key {op.key!r}, got {type(op.value).__name__}"
        raise ValidationError(msg, field="value")
    try:
        json.dumps(op.value, allow_nan=False)
    except (TypeError, ValueError) as e:
        msg = f"value: the value of key {op.key!r} is not JSON ({e}); store texts, numbers, lists"
        raise ValidationError(msg, field="value") from None
    if op.index not in (None, False) and (
        isinstance(op.index, str) or not all(isinstance(f, str) for f in op.index)
    ):
        msg = f"index: expected False or a list of value field names, got {op.index!r}"
        raise ValidationError(msg, field="index")


def _split_filter(
    given: Mapping[str, Any] | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The value-field tests and the retrieval filters of a search's ``filter``."""
    given = dict(given or {})
    flt = {k: given.pop(k) for k in TIME_FILTERS if k in given}
    make_filter(**flt)  # refuse bad values now, naming the field
    _check_operators(given)
    return given, flt


def _check_operators(tests: Mapping[str, Any]) -> None:
    for key, want in tests.items():
        if str(key).startswith("$") and key not in _OPS:
            msg = f"filter: unknown operator {key!r}; operators are {', '.join(_OPS)}"
            raise ValidationError(msg, field="filter")
        if isinstance(want, Mapping):
            _check_operators(want)


def _matches(value: Mapping[str, Any], tests: Mapping[str, Any]) -> bool:
    return all(_compare(value.get(k), want) for k, want in tests.items())


def _compare(have: Any, want: Any) -> bool:
    if isinstance(want, Mapping) and any(str(k).startswith("$") for k in want):
        for op, operand in want.items():
            try:
                if not _OPS[op](have, operand):
                    return False
            except (TypeError, ValueError):
                return False
        return True
    if isinstance(want, Mapping):
        return isinstance(have, Mapping) and _matches(have, want)
    return have == want


def _namespace_matches(cond: MatchCondition, ns: tuple[str, ...]) -> bool:
    path = tuple(cond.path)
    if len(ns) < len(path):
        return False
    part = ns[: len(path)] if cond.match_type == "prefix" else ns[len(ns) - len(path) :]
    return all(p in ("*", n) for p, n in zip(path, part, strict=True))
