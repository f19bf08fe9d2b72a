"""Forgetting: memories a person asks to be forgotten leave the stream and the store for good.

A forget selects memories (by id, and/or by the retrieval filters' time window and types,
a conversation, a speaker or a text, all combined with AND), adds the thoughts that cite
them as evidence (recursively; ``keep_derived=True`` keeps those thoughts and takes the
forgotten ids out of their evidence instead), and commits in one all-or-nothing write
through :meth:`StreamWriter.write <langchain_genmem.memory.writer.StreamWriter.write>`:
the state that lists the numbers as forgotten, with the keyword strengths and the
reflection trigger adjusted, is stored by :meth:`MemoryBackend.forget
<langchain_genmem.backends.base.MemoryBackend.forget>`, which deletes the records.

Node numbers are never reused: ``node_count`` and ``type_count`` stay the highest numbers
given, so the next memory is numbered after every memory ever stored.

Evidence of kept memories: a stored record keeps the bare ids it cited; every reader (the
stream's nodes, a process catching up, a snapshot, an export) takes the forgotten ones out,
by the committed state's forgotten numbers. The edit is so part of the same commit: a
memory's evidence never names a memory that is gone, and never loses an id while it exists.

Conversation turns: a kept turn whose embedded text quotes a forgotten turn (see
:mod:`~langchain_genmem.memory.turns`) gets the text made from the turns that remain, with
the stream's ``context_turns``, and its vector, in the same write (the backend's ``forget``
stores them before or with its commit point; the state lists them as re-keyed at its
revision, so other processes read them again when they catch up). The new texts are
embedded before the write right is taken; one that another writer's change made necessary
meanwhile is embedded inside it.

Reflection trigger: an event forgotten among those counted since the last reflection (the
newest ``importance_ele_n`` events) gives its poignancy back to ``importance_trigger_curr``
(never above ``importance_trigger_max``) and leaves ``importance_ele_n``: what was forgotten
never brings a reflection about. Events counted before the last reflection change nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from langchain_genmem.backends.base import Erasure, StoredNode
from langchain_genmem.core import validation
from langchain_genmem.core.errors import EmbeddingDimensionError, UnknownNodeError, ValidationError
from langchain_genmem.core.nodes import TYPE_CODES, MemoryNode, node_number_or_none
from langchain_genmem.core.state import StreamState
from langchain_genmem.core.text import limits
from langchain_genmem.core.timeutil import to_epoch
from langchain_genmem.memory.keywords import changed_strengths
from langchain_genmem.memory.turns import is_turn
from langchain_genmem.memory.writer import StreamWriter
from langchain_genmem.numerics.candidate_filter import CandidateFilter, make_filter

if TYPE_CHECKING:
    from langchain_genmem.memory.cache import NodeCache
    from langchain_genmem.memory.loader import StreamLoader
    from langchain_genmem.memory.mirror import StreamMirror
    from langchain_genmem.memory.writer import Made, Strengths

Embed = Callable[[list[str]], Sequence[Sequence[float]]]
"""Embeds texts as documents (an ``Embeddings.embed_documents``)."""

NOTHING_SELECTED = (
    "forget: nothing selected; give node ids or a selector (created_after, created_before, "
    "types, conversation, speaker, text, expired), or use forget_all to forget every memory"
)


@dataclass(frozen=True)
class ForgetReport:
    """What a forget did (or, for a dry run, would do).

    Attributes:
        persona: the persona.
        forgotten: every id forgotten, ascending: those selected and the ``derived`` ones.
        derived: the ids in ``forgotten`` that went only because they cite forgotten
            memories as evidence (recursively).
        kept: memories kept whose evidence lost forgotten ids (thoughts with
            ``keep_derived=True``; any memory citing a forgotten chat).
        rekeyed: kept conversation turns whose embedded text quoted a forgotten turn and
            was made again (with a new vector) from the turns that remain, ascending.
        dry_run: True when nothing was forgotten, only reported.
        live_count: the memories left afterwards (that would be left, for a dry run).
        rev: the committed revision; None for a dry run or when nothing matched.
        erased: whether the forgotten records were erased from the store's own files (an
            embedded folder): False when they were only deleted, as the store deletes (an
            untested Chroma version, a folder laid out otherwise); None for a store whose
            files are not this package's (a Chroma server, PostgreSQL), or when nothing was
            forgotten.
        erasure: why they were not erased, in one line (None when they were, or None
            applies).
    """

    persona: str
    forgotten: tuple[str, ...] = ()
    derived: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    rekeyed: tuple[str, ...] = ()
    dry_run: bool = False
    live_count: int = 0
    rev: int | None = None
    erased: bool | None = None
    erasure: str | None = None

    def __len__(self) -> int:
        return len(self.forgotten)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data.

        Returns:
            Its fields, the id tuples as lists.
        """
        return {
            "persona": self.persona,
            "forgotten": list(self.forgotten),
            "derived": list(self.derived),
            "kept": list(self.kept),
            "rekeyed": list(self.rekeyed),
            "dry_run": self.dry_run,
            "live_count": self.live_count,
            "rev": self.rev,
            "erased": self.erased,
            "erasure": self.erasure,
        }


@dataclass(frozen=True)
class Selection:
    """Which memories a forget names, validated; every part given must hold (AND).

    Attributes:
        node_ids: ids named (empty: any).
        window: the time window and types, as a retrieval filter.
        conversation: the conversation id a memory must carry.
        speaker: the speaker a memory must name.
        text: a text the description must contain (compared case-insensitively).
        expired: only memories expired at the stream's clock (``expiration`` at or before it).
        everything: every memory of the persona (``forget_all``).
    """

    node_ids: tuple[str, ...] = ()
    window: CandidateFilter = field(default_factory=CandidateFilter)
    conversation: str | None = None
    speaker: str | None = None
    text: str | None = None
    expired: bool = False
    everything: bool = False


def select(
    node_ids: Sequence[str] = (),
    *,
    created_after: datetime | date | str | None = None,
    created_before: datetime | date | str | None = None,
    types: Iterable[str] | str | None = None,
    conversation: str | None = None,
    speaker: str | None = None,
    text: str | None = None,
    expired: bool = False,
) -> Selection:
    """Validate what a forget names (before any store is asked).

    Args:
        node_ids: ``node_N`` ids.
        created_after: as the retrieval filter (inclusive).
        created_before: as the retrieval filter (exclusive).
        types: memory types (None: every type, chats too).
        conversation: a conversation id.
        speaker: a speaker's name.
        text: a text the description contains.
        expired: only memories expired at the stream's clock.

    Returns:
        The selection.

    Raises:
        ValidationError: nothing selected, or a bad value, naming the field.
    """
    if isinstance(node_ids, str):
        msg = f"node_ids: expected a list of node ids, got the text {node_ids!r}"
        raise ValidationError(msg, field="node_ids")
    ids = tuple(dict.fromkeys(node_ids))
    for node_id in ids:
        if not isinstance(node_id, str) or node_number_or_none(node_id) is None:
            raise UnknownNodeError(str(node_id), field="node_ids")
    window = make_filter(created_after=created_after, created_before=created_before, types=types)
    chosen = Selection(
        node_ids=ids,
        window=window,
        conversation=validation.turn_label(conversation, "conversation"),
        speaker=validation.turn_label(speaker, "speaker"),
        text=None if text is None else validation.query(text, "text"),
        expired=_flag(expired, "expired"),
    )
    if not ids and not window.active and not chosen.expired and all(
        v is None for v in (chosen.conversation, chosen.speaker, chosen.text)
    ):
        raise ValidationError(NOTHING_SELECTED, field="node_ids")
    return chosen


def _flag(value: Any, name: str) -> bool:
    """A yes/no selector, refused unless a bool."""
    if not isinstance(value, bool):
        msg = f"{name}: expected true or false, got {value!r}"
        raise ValidationError(msg, field=name)
    return value


EVERYTHING = Selection(everything=True)


@dataclass(frozen=True)
class Plan:
    """The numbers a forget takes out, worked out from one committed state.

    Attributes:
        selected: numbers selected, ascending.
        derived: numbers that go because they cite forgotten evidence, ascending.
        kept: numbers kept whose evidence cites forgotten ones, ascending.
        given_back: poignancy the reflection trigger gets back, and how many events.
        rekeys: ``{number: new embedding_key}`` of kept turns that quoted forgotten ones.
    """

    selected: tuple[int, ...]
    derived: tuple[int, ...]
    kept: tuple[int, ...]
    given_back: tuple[float, int]
    rekeys: Mapping[int, str] = field(default_factory=dict)

    @property
    def numbers(self) -> list[int]:
        """Every number forgotten, ascending."""
        return sorted((*self.selected, *self.derived))


class Forgetter:
    """Forgets memories of one persona: selects, plans and commits (see the module docstring).

    Args:
        mirror: the stream's mirror.
        loader: loads every node first (a forget reads them all).
        writer: commits through its write path (its ``context_turns`` too).
        embed: the stream's embedding model's ``embed_documents``, for the new texts of
            re-keyed turns.
    """

    def __init__(self, mirror: StreamMirror, loader: StreamLoader, writer: StreamWriter,
                 embed: Embed) -> None:
        self.mirror = mirror
        self.loader = loader
        self.writer = writer
        self.embed = embed

    def forget(self, chosen: Selection, *, keep_derived: bool, dry_run: bool,
               extra: Mapping[str, Any] | None = None) -> ForgetReport:
        """Forget what ``chosen`` names, or say what would go (``dry_run``).

        Args:
            chosen: from :func:`select` (or :data:`EVERYTHING`).
            keep_derived: keep the thoughts citing forgotten memories.
            dry_run: forget nothing; report what would go.
            extra: scratch values committed in the same write (``StreamState.extra``).

        Returns:
            The report.

        Raises:
            UnknownNodeError: a named id is no memory of the persona (or was forgotten).
        """
        m = self.mirror
        lazy = m.lazy  # a lazy stream loads every node for the forget, then holds none again
        self.loader.load_everything()
        try:
            return self._forget(chosen, keep_derived=keep_derived, dry_run=dry_run,
                                extra=extra or {})
        finally:
            if lazy:
                m.release()

    def _forget(self, chosen: Selection, *, keep_derived: bool, dry_run: bool,
                extra: Mapping[str, Any]) -> ForgetReport:
        m = self.mirror
        self.loader.refresh()
        if dry_run:
            with m.lock:
                plan = self._plan(chosen, keep_derived)
                return self._report(plan, dry_run=True, live=m.live() - len(plan.numbers))
        with m.lock:  # the selected turns' texts (derived thoughts are seldom turns)
            selected = self._selected(m.cache, chosen)
            if not selected:  # nothing to forget as of now: no write right is taken
                return self._report(Plan((), (), (), (0.0, 0)), dry_run=False, live=m.live())
            first = {} if chosen.everything else self._rekeys(m.cache, selected)
        vectors = self._embedded(first.values(), {})  # before the write right
        planned: list[Plan] = []

        def make() -> Made | None:
            plan = self._plan(chosen, keep_derived)
            if not plan.numbers:
                return None  # nothing matches once caught up: nothing is written
            planned[:] = [plan]  # a write run again (a conflict) plans again
            vectors.update(self._embedded(plan.rekeys.values(), vectors))  # others' changes
            state, changes = self._next_state(plan)
            if extra:
                state = state.model_copy(update={"extra": {**state.extra, **extra}})
            return self._replaced(plan, vectors), state, changes

        state = self.writer.write(make)
        if not planned:
            return self._report(Plan((), (), (), (0.0, 0)), dry_run=False, live=m.live())
        erasure = self.writer.last_erasure
        return self._report(planned[0], dry_run=False, live=m.live(), rev=state.rev,
                            erasure=erasure)

    def _embedded(self, keys: Iterable[str], known: Mapping[str, np.ndarray]
                  ) -> dict[str, np.ndarray]:
        """The vectors of new texts that neither ``known`` nor the cache holds, embedded."""
        cache = self.mirror.cache
        texts = [k for k in dict.fromkeys(keys) if k not in known and k not in cache.key_row]
        if not texts:
            return {}
        paired = StreamWriter.pair(texts, self.embed(texts))
        out = {text: np.asarray(vector, dtype=np.float32) for text, vector in paired.items()}
        for text, vector in out.items():
            if cache.dim is not None and vector.shape[0] != cache.dim:
                raise EmbeddingDimensionError(cache.dim, int(vector.shape[0]),
                                              where=f"embedding of {text[:40]!r}")
        return out

    def _replaced(self, plan: Plan, vectors: Mapping[str, np.ndarray]) -> list[StoredNode]:
        """The re-keyed turns with their new texts and vectors."""
        cache = self.mirror.cache
        out = []
        for number, key in sorted(plan.rekeys.items()):
            node = _held(cache, number)
            vector = vectors.get(key)
            if vector is None:
                vector = cache.vector_of_key(key)
                # make() embedded every key of the plan that the cache does not hold, and
                # runs under the mirror's lock: the cache still holds the others
                assert vector is not None
            out.append(StoredNode(node.model_copy(update={"embedding_key": key}), vector))
        return out

    def _report(self, plan: Plan, *, dry_run: bool, live: int,
                rev: int | None = None, erasure: Erasure | None = None) -> ForgetReport:
        return ForgetReport(
            erased=None if erasure is None else erasure.erased,
            erasure=None if erasure is None else erasure.reason,
            persona=self.mirror.persona,
            forgotten=_ids(plan.numbers),
            derived=_ids(plan.derived),
            kept=_ids(plan.kept),
            rekeyed=_ids(sorted(plan.rekeys)),
            dry_run=dry_run,
            live_count=live,
            rev=rev,
        )

    def _plan(self, chosen: Selection, keep_derived: bool) -> Plan:
        """What to forget, from the caught-up mirror (under its lock).

        Costs what is forgotten: the memories citing it are found in the mirror's
        citations (built on the first forget), not by reading every memory.
        """
        m = self.mirror
        cache = m.cache
        if chosen.everything:  # nothing is kept: nothing cites, nothing is re-keyed
            numbers = np.sort(cache.node_number[cache.live_rows()])
            return Plan(tuple(numbers.tolist()), (), (), self._given_back(cache, None))
        selected = self._selected(cache, chosen)
        citations = m.citations
        citations.build(cache)
        derived: set[int] = set()
        if not keep_derived:
            frontier = set(selected)
            while frontier:
                frontier = citations.citing(frontier, thoughts_only=True) - selected - derived
                derived.update(frontier)
        gone = selected | derived
        kept = citations.citing(gone) - gone
        return Plan(tuple(sorted(selected)), tuple(sorted(derived)), tuple(sorted(kept)),
                    self._given_back(cache, gone), self._rekeys(cache, gone))

    def _rekeys(self, cache: NodeCache, gone: set[int]) -> dict[int, str]:
        """``{number: new embedding_key}`` of kept turns quoting a turn in ``gone``."""
        rows = cache.rows_of_numbers(np.fromiter(gone, dtype=np.int64, count=len(gone)))
        nodes = cache.nodes
        by_conversation: dict[str, set[int]] = {}
        for row in rows.tolist():
            node = nodes[row]
            if is_turn(node):
                by_conversation.setdefault(str(node.conversation), set()).add(node.node_count)
        if not by_conversation:
            return {}
        turns = self.mirror.turns
        turns.sync(cache)

        def key_of(number: int) -> str:
            return _held(cache, number).embedding_key

        return turns.rekeyed(by_conversation, key_of, self.writer.context_turns,
                             limits().description)

    def _selected(self, cache: NodeCache, chosen: Selection) -> set[int]:
        """The numbers of the live memories ``chosen`` names.

        Ids alone cost what they name; a selector reads the columns of every live memory.
        """
        if chosen.node_ids:
            named = np.array([node_number_or_none(i) for i in chosen.node_ids], dtype=np.int64)
            rows = cache.rows_of_numbers(named)
            missing = [i for i, r in zip(chosen.node_ids, rows.tolist(), strict=True) if r < 0]
            if missing:
                raise UnknownNodeError(missing[0], field="node_ids", persona=self.mirror.persona)
        else:
            rows = cache.live_rows()
        if chosen.everything:
            return set(cache.node_number[rows].tolist())
        keep = chosen.window.mask(cache.created[rows], cache.type_code[rows],
                                  cache.poignancy[rows], cache.node_number[rows])
        if chosen.expired:
            keep &= cache.expiration[rows] <= to_epoch(self.mirror.clock())
        picked = rows[keep].tolist()
        if chosen.conversation or chosen.speaker or chosen.text:
            nodes = cache.nodes
            picked = [r for r in picked if _matches(nodes[r], chosen)]
        return set(cache.node_number[picked].tolist())

    def _given_back(self, cache: NodeCache, gone: set[int] | None) -> tuple[float, int]:
        """Poignancy and count of forgotten events the reflection trigger counted.

        Those are among the newest ``importance_ele_n`` live events: the rows are read from
        the newest back, a block at a time, until that many events were seen. ``gone``
        None: every memory goes.
        """
        counted = self.mirror.state.importance_ele_n
        if counted <= 0 or gone is not None and not gone:
            return 0.0, 0
        events = _newest_events(cache, counted)
        if gone is not None:
            events = events[np.isin(cache.node_number[events],
                                    np.fromiter(gone, dtype=np.int64))]
        return float(cache.poignancy[events].sum()), int(events.size)

    def _next_state(self, plan: Plan) -> tuple[StreamState, Strengths]:
        """The committed state with the plan's numbers forgotten and its counters adjusted.

        The kept turns the plan re-keys are listed as re-keyed at its revision.

        Returns:
            The state, and the keyword strengths it changes (0: the keyword goes).
        """
        m = self.mirror
        state = m.state.forgetting(plan.numbers).rekeying(plan.rekeys)
        poignancy, events = plan.given_back
        if len(plan.numbers) == m.live():  # every memory goes: no node need be read
            strength, changes = m.keywords.strength_without_all(m.cache)
        else:
            rows = m.cache.rows_of_numbers(np.asarray(plan.numbers, dtype=np.int64))
            nodes = [m.cache.nodes[r] for r in rows.tolist()]
            strength = m.keywords.strength_without(nodes)
            changes = changed_strengths(nodes, strength)
        return state.model_copy(update={
            "kw_strength": strength,
            "importance_trigger_curr": min(state.importance_trigger_max,
                                           state.importance_trigger_curr + poignancy)
            if events else state.importance_trigger_curr,
            "importance_ele_n": max(0, state.importance_ele_n - events),
        }), changes


def _matches(node: MemoryNode, chosen: Selection) -> bool:
    """Whether a memory passes the conversation, speaker and text selectors."""
    if chosen.conversation is not None and node.conversation != chosen.conversation:
        return False
    if chosen.speaker is not None and node.speaker != chosen.speaker:
        return False
    return chosen.text is None or chosen.text.casefold() in node.description.casefold()


def _newest_events(cache: NodeCache, count: int) -> np.ndarray:
    """The rows of the newest ``count`` live events (fewer when there are fewer)."""
    event = TYPE_CODES["event"]
    if cache.moved:  # rows are not in number order: every live event, by number
        rows = cache.live_rows()
        rows = rows[cache.type_code[rows] == event]
        return rows[np.argsort(cache.node_number[rows], kind="stable")][-count:]
    found: list[np.ndarray] = []
    seen, end, block = 0, cache.n, 1024
    while end > 0 and seen < count:
        start = max(0, end - block)
        rows = start + np.flatnonzero((cache.type_code[start:end] == event)
                                      & cache.alive[start:end])
        found.append(rows)
        seen += rows.size
        end, block = start, block * 2
    rows = np.concatenate(found[::-1]) if found else np.zeros(0, dtype=np.int64)
    return rows[-count:]


def _held(cache: NodeCache, number: int) -> MemoryNode:
    """The node of a number the cache holds (a turn the plan found in it)."""
    row = cache.row_of_number(number)
    if row is None:
        raise UnknownNodeError(f"node_{number}")
    return cache.nodes[row]


def _ids(numbers: Iterable[int]) -> tuple[str, ...]:
    return tuple(f"node_{n}" for n in numbers)
