"""Writing a stream: preparing a batch, numbering and building its nodes, committing them.

The original's write rules live here: ``node_N`` ids after every committed node, per-type
counts, thought depth, shared vectors per ``embedding_key``, the reflection trigger and
keyword strengths. Scoring and embedding are awaited or called by the stream (its sync and
async adds share everything else here). See :mod:`~langchain_genmem.memory.mirror` for the
parts of a stream.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import ValidationError as PydanticValidationError

from langchain_genmem.backends.base import (
    CONFLICT_ATTEMPTS,
    Erasure,
    StoredNode,
    conflict_pause,
)
from langchain_genmem.core import validation
from langchain_genmem.core.errors import (
    ConcurrentWriterError,
    EmbeddingDimensionError,
    GenMemError,
    StorageConflictError,
    StorageError,
    UnknownNodeError,
    ValidationError,
)
from langchain_genmem.core.nodes import MemoryNode, check_poignancy, node_number_or_none
from langchain_genmem.core.state import SETTINGS, StreamState
from langchain_genmem.core.text import limits
from langchain_genmem.core.timeutil import naive
from langchain_genmem.memory import idempotency
from langchain_genmem.memory.corrections import (
    check_supersedes,
    supersedes_unknown,
    with_corrections,
)
from langchain_genmem.memory.expiry import expiration_of
from langchain_genmem.memory.inputs import MemoryInput, validate_items
from langchain_genmem.memory.keywords import default_keywords
from langchain_genmem.memory.turns import TurnLog, chat_text, turn_text

if TYPE_CHECKING:
    from langchain_genmem.memory.loader import StreamLoader
    from langchain_genmem.memory.mirror import StreamMirror

logger = logging.getLogger(__name__)

Strengths = dict[str, dict[str, int]]
# What a write makes: its nodes (for a forget: the kept nodes it re-keys, with their new
# embedded text and vector), the state they commit, and the keyword strengths that state
# changes (None: not known, e.g. an import replaced them; the backend compares).
Made = tuple[list[StoredNode], StreamState, Strengths | None]
# A batch ready to score, embed and commit: its items, the state values it sets, and how
# many committed nodes its evidence was checked against.
Prepared = tuple[list[MemoryInput], dict[str, Any], int]


class StreamWriter:
    """Commits new memories and state of one persona, then mirrors them.

    Args:
        mirror: the stream's mirror.
        loader: catches the mirror up before each write.
        context_turns: earlier turns a conversation's turn is embedded with (see
            :class:`~langchain_genmem.memory.stream.MemoryStream`).

    Attributes:
        context_turns: as given.
        orphans_removed: records of crashed writes removed before writing.
    """

    def __init__(self, mirror: StreamMirror, loader: StreamLoader, context_turns: int) -> None:
        self.mirror = mirror
        self.loader = loader
        self.context_turns = context_turns
        self.orphans_removed = 0
        self._mutex = threading.Lock()  # this stream's writes, one at a time
        self._last = threading.local()  # what this thread's last forget did to the files

    # ------------------------------------------------------------------ committing

    def write(self, make: Callable[[], Made | None]) -> StreamState:
        """One write: under the persona's write right, catch up, sweep, ``make``, store.

        ``make`` numbers and counts from the committed state the stream just caught up
        with; its nodes and state are stored with ``commit`` (or ``write_state`` when there
        are no nodes, or ``forget`` when the state forgets numbers: the nodes are then the
        kept ones it re-keys) and mirrored in process only once the write right was given
        back cleanly, since a backend may make the write durable only then (a transaction).
        A write the store ended in a conflict with another transaction
        (:class:`~langchain_genmem.core.errors.StorageConflictError`: nothing was committed)
        is run again from the start, caught up first, :data:`CONFLICT_ATTEMPTS` times in
        all; so ``make`` may be called more than once.

        Args:
            make: builds the write from the caught-up mirror (under its lock); None calls
                the write off (nothing left to do once caught up).

        Returns:
            The state stored (the committed state caught up with, when ``make`` called the
            write off).
        """
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            try:
                return self._write_once(make)
            except StorageConflictError:
                if attempt == CONFLICT_ATTEMPTS:
                    raise
                logger.debug("persona %r: a write met a conflict; writing it again",
                             self.mirror.persona)
                time.sleep(conflict_pause(attempt))  # outside the mutex and the write right
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _write_once(self, make: Callable[[], Made | None]) -> StreamState:
        """One attempt of :meth:`write`."""
        m = self.mirror
        with self._mutex:
            with m.backend.write_lock(m.persona), m.lock:
                self._sweep()
                made = make()
                if made is None:
                    return m.state
                stored, state, changes = made
                forgets = state.forgotten_since(m.state.rev)
                try:
                    if forgets:
                        numbers = [n for lo, hi in forgets for n in range(lo, hi + 1)]
                        self._last.erasure = m.backend.forget(m.persona, numbers, state,
                                                              stored, strength_changes=changes)
                    elif stored:
                        m.backend.commit(m.persona, stored, state, strength_changes=changes)
                    else:
                        m.backend.write_state(m.persona, state)
                except GenMemError:
                    raise
                except Exception as e:
                    msg = f"could not store the write of {m.persona!r}: {e}"
                    raise StorageError(msg) from e
            with m.lock:
                if m.state.rev == state.rev:
                    pass  # a refresh in another thread loaded it already
                elif forgets and m.state.rev == state.rev - 1:
                    m.install([], state, stored)
                elif not forgets and m.known() + len(stored) == state.node_count:
                    m.install(stored, state)
                else:
                    self.loader.catch_up()
            return state

    @property
    def last_erasure(self) -> Erasure | None:
        """Whether this thread's last forget erased its records from the store's files.

        None: the store keeps no files of its own (a server, a database), or this thread
        forgot nothing yet.
        """
        return getattr(self._last, "erasure", None)

    def _sweep(self) -> None:
        """Catch up with the committed head and remove leftovers of interrupted writes."""
        m = self.mirror
        try:
            self.loader.catch_up()
            removed = m.backend.remove_uncommitted(m.persona, m.state.node_count)
        except GenMemError:
            raise
        except Exception as e:
            msg = f"could not read the committed state of {m.persona!r}: {e}"
            raise StorageError(msg) from e
        if removed:
            self.orphans_removed += removed
            logger.warning(
                "persona %r: removed %d records of an interrupted write above node_%d",
                m.persona, removed, m.state.node_count,
            )

    def write_state(
        self, changes: Mapping[str, Any] | Callable[[StreamState], Mapping[str, Any]]
    ) -> StreamState:
        """Commit state values alone (no node).

        Args:
            changes: the values, or a function of the caught-up state giving them.

        Returns:
            The state stored.
        """
        m = self.mirror

        def make() -> Made:
            update = changes(m.state) if callable(changes) else changes
            return [], m.state.model_copy(update={**update, "rev": m.state.rev + 1}), None

        return self.write(make)

    def commit(
        self,
        prepared: Prepared,
        scores: Sequence[float],
        embedded: Mapping[str, Sequence[float]],
        claim: idempotency.Claim | None = None,
    ) -> list[MemoryNode]:
        """Number, build and commit a prepared batch, scored and embedded.

        Args:
            prepared: what :meth:`prepare` gave.
            scores: the poignancy of each item given none, in order.
            embedded: the vector of each text :meth:`texts_to_embed` named.
            claim: the write's idempotency key: a write the committed state remembers
                under it is not made again (see :mod:`~langchain_genmem.memory.idempotency`).

        Returns:
            The stored nodes, in the order given (the earlier write's, for a repeated key).
        """
        batch, overrides, checked = prepared
        built: list[StoredNode] = []
        replay: list[list[str]] = []

        def make() -> Made | None:
            if claim is not None:
                done = idempotency.replayed(self.mirror.state, claim, self.mirror.persona)
                if done is not None:
                    replay.append(done)
                    return None
            if self.mirror.known() != checked:
                self._check_moved_citations(batch, checked)
            if self.mirror.state.forgotten:  # evidence another process forgot meanwhile
                self._check_evidence(batch, checked)
            check_supersedes(batch, checked, self.mirror.state, self.mirror.persona)
            built[:] = self._build(batch, list(scores), embedded)
            dim = self._check_dims(built)
            state, changes = self._next_state([s.node for s in built], dim)
            state = with_corrections(state, batch, [s.node for s in built])
            if overrides:
                state = state.model_copy(update=dict(overrides))
            if built:
                numbers = built[0].node.node_count, built[-1].node.node_count
                state = idempotency.recorded(state, claim, *numbers)
            return built, state, None if overrides and "kw_strength" in overrides else changes

        self.write(make)
        if replay:
            return [self.loader.node(i) for i in replay[0]]
        return [s.node for s in built]

    def replay(self, claim: idempotency.Claim | None) -> list[MemoryNode] | None:
        """What a write with this claim stored before (the committed state read first).

        Lets a repeated write skip scoring and embedding; :meth:`commit` checks again
        under the write right, where it counts.

        Args:
            claim: the write's idempotency key, or None.

        Returns:
            The earlier write's memories that are not forgotten; None for a new write.

        Raises:
            IdempotencyKeyReusedError: the key was used by a write of other items.
        """
        if claim is None:
            return None
        self.loader.refresh()
        ids = idempotency.replayed(self.mirror.state, claim, self.mirror.persona)
        return None if ids is None else [self.loader.node(i) for i in ids]

    # ------------------------------------------------------------------ preparing

    def prepare(
        self, items: Sequence[Mapping[str, Any] | MemoryInput], state: Mapping[str, Any] | None
    ) -> Prepared:
        """Validate a batch, give turns and chats their embedded text, check its evidence.

        Args:
            items: the memories (as for ``MemoryStream.add_many``).
            state: state values to commit with them (settings, ``kw_strength``, ``extra``).

        Returns:
            The batch, the state values, and the committed count it was checked against.

        Raises:
            ValidationError: a bad item or state value.
            UnknownNodeError: evidence naming no node.
        """
        batch = self._with_context(validate_items(items))
        if self._cites_unknown(batch) or supersedes_unknown(batch, self.mirror.known()):
            self.loader.refresh()  # the ids may be another writer's new memories
        known = self.mirror.known()
        self._check_evidence(batch, known)
        check_supersedes(batch, known, self.mirror.state, self.mirror.persona)
        overrides = dict(state or {})
        for name in overrides:
            if name not in (*SETTINGS, "kw_strength", "extra"):
                msg = f"state.{name}: not a state value an import may set"
                raise ValidationError(msg, field=name)
        if overrides:
            try:
                _check_overrides(self.mirror.state, overrides)
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
        m = self.mirror
        limit = limits().description
        out: list[MemoryInput] = []
        pending = TurnLog()  # this batch's turns, numbered after the stored ones
        with m.lock:
            if self.context_turns and any(i.conversation is not None for i in batch):
                m.turns.sync(m.cache)  # a lazy stream holds none: this batch's only
            stored = m.known()
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
        created = naive(item.created) if item.created is not None else naive(self.mirror.clock())
        previous = sorted([*self.mirror.turns.before(conversation, created, order, n),
                           *pending.before(conversation, created, order, n)],
                          key=lambda t: (t[0], t[1]))[-n:] if n else []
        pending.add(conversation, created, order, item.speaker, item.description)
        key = turn_text([t[2] for t in previous], item.speaker, item.description, limit)
        update: dict[str, Any] = {"created": created}
        if key != item.description:
            update["embedding_key"] = key
        return item.model_copy(update=update)

    @staticmethod
    def pair(texts: Sequence[str], vectors: Sequence[Sequence[float]]) -> dict[str, Any]:
        """The embedding model's vectors by text, each checked.

        Args:
            texts: the texts embedded.
            vectors: what the model returned for them.

        Returns:
            ``{text: vector}``.

        Raises:
            ValidationError: a count that does not match, or a vector not finite.
        """
        if len(vectors) != len(texts):
            msg = f"the embedding model returned {len(vectors)} vectors for {len(texts)} texts"
            raise ValidationError(msg, field="embeddings")
        return {
            text: validation.finite_vector(vector, f"embedding of {text[:40]!r}")
            for text, vector in zip(texts, vectors, strict=True)
        }

    @staticmethod
    def unscored(prepared: Prepared) -> list[tuple[str, str]]:
        """What the importance scorer must score: (type, description) of items without one.

        Args:
            prepared: what :meth:`prepare` gave.

        Returns:
            The pairs, in order.
        """
        return [(m.type, m.description) for m in prepared[0] if m.poignancy is None]

    def texts_to_embed(self, prepared: Prepared) -> list[str]:
        """The texts the embedding model must embed: new keys of items without a vector.

        Args:
            prepared: what :meth:`prepare` gave.

        Returns:
            Each text once, in order.
        """
        keys = (m.embedding_key or m.description for m in prepared[0] if m.embedding is None)
        return [k for k in dict.fromkeys(keys) if k not in self.mirror.cache.key_row]

    def _cites_unknown(self, batch: Sequence[MemoryInput]) -> bool:
        numbers = (node_number_or_none(i) for item in batch for i in evidence_of(item))
        return any(n is not None and n > self.mirror.known() for n in numbers)

    def _check_evidence(self, batch: Sequence[MemoryInput], known: int) -> None:
        for i, item in enumerate(batch):
            for node_id in evidence_of(item):
                number = node_number_or_none(node_id)
                if number is None or number > known + i or (
                    number <= known and self.mirror.state.is_forgotten(number)
                ):
                    where = "evidence" if item.evidence is not None else "filling"
                    field = f"items[{i}].{where}"
                    raise UnknownNodeError(node_id, field=field, persona=self.mirror.persona)

    def _check_moved_citations(self, batch: Sequence[MemoryInput], checked: int) -> None:
        """Refuse a batch citing its own items by id when another writer numbered first."""
        known = self.mirror.known()
        for i, item in enumerate(batch):
            for node_id in evidence_of(item):
                number = node_number_or_none(node_id)
                if number is not None and number > checked:
                    msg = (
                        f"items[{i}] cites {node_id!r}, an item of its own batch, but another "
                        f"writer committed {known - checked} memories of "
                        f"{self.mirror.persona!r} meanwhile, so the batch would be numbered "
                        f"from node_{known + 1}; nothing was written, retry the batch"
                    )
                    raise ConcurrentWriterError(msg, persona=self.mirror.persona)

    # ------------------------------------------------------------------ building

    def _build(
        self,
        batch: Sequence[MemoryInput],
        scores: list[float],
        embedded: Mapping[str, Sequence[float]],
    ) -> list[StoredNode]:
        count = self.mirror.known()
        type_count = dict(self.mirror.state.type_count)
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
        created = naive(item.created) if item.created is not None else naive(self.mirror.clock())
        subject = self.mirror.persona if item.subject is None else item.subject
        filling = item.evidence if item.evidence is not None else item.filling
        if item.type == "thought":
            evidence = evidence_of(item)
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
            expiration=expiration_of(
                created, None if item.expiration is None else naive(item.expiration),
                item.expires_in),
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
        return in_batch[node_id] if node_id in in_batch else self.loader.node(node_id).depth

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
        held = self.mirror.cache.vector_of_key(key)
        if held is not None:
            return held
        return np.asarray(embedded[key], dtype=np.float32)

    def _check_dims(self, stored: Sequence[StoredNode]) -> int | None:
        expected = self.mirror.cache.dim or self.mirror.state.dim
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
        state, keywords = self.mirror.state, self.mirror.keywords
        changes = keywords.strength_changes(nodes)
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
                "kw_strength": keywords.strength_after(changes),
            }
        ), changes


def evidence_of(item: MemoryInput) -> list[str]:
    """The node ids a thought cites: all of ``evidence``; the ``node_``-ids of a filling.

    A saved filling may also hold plain text (the original keeps it and it adds no depth);
    ``evidence`` given by a caller must be ids only.

    Args:
        item: a memory to add.

    Returns:
        The ids (none for an event or a chat).
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


_ALONE = ("kw_strength", "extra")
"""State values checked on their own: no rule of the state ties them to another field."""


def _check_overrides(state: StreamState, overrides: Mapping[str, Any]) -> None:
    """Validate state values as the state would, without copying what they leave alone.

    ``extra`` and ``kw_strength`` alone are checked field by field: a store's key records in
    ``extra`` grow with its items, and validating the whole state for each write made a
    write cost the size of the store. Settings are checked with the whole state (their
    rules may tie fields together).

    Raises:
        pydantic.ValidationError: a bad value (its location starts with the field).
    """
    if all(name in _ALONE for name in overrides):
        StreamState.__pydantic_validator__.validate_assignment(
            StreamState.model_construct(), "extra", overrides.get("extra", {}))
        if "kw_strength" in overrides:
            StreamState.__pydantic_validator__.validate_assignment(
                StreamState.model_construct(), "kw_strength", overrides["kw_strength"])
        return
    StreamState.model_validate({**state.model_dump(), **overrides})

