"""Per-persona state that must survive restarts: counters, weights, keyword strengths.

The original keeps these in the persona's ``scratch.json`` (reflection trigger, retrieval
weights, ``recency_decay``) and ``kw_strength.json``. Here they live with the memories in the
store, written in the same commit as the nodes they describe.

Forgetting: node numbers are never reused. ``node_count`` stays the highest number ever
given, and the numbers of forgotten memories are kept as ranges, each with the revision
that forgot it (:attr:`StreamState.forgotten`), so a process that cached the nodes of an
older revision learns what to drop (:meth:`StreamState.forgotten_since`). A state that never
forgot anything is stored and hashed exactly as before the field existed.

Corrections: a memory may supersede earlier ones (``supersedes=[...]`` on an add). The
pairs ``(old, new)`` live here (:attr:`StreamState.superseded`), committed with the new
memory, so every process and replica reads them with the state; an old memory is superseded
while a live memory supersedes it (:meth:`StreamState.superseded_numbers`). A state that
never recorded a correction is stored and hashed exactly as before the field existed.

Re-keyed turns: a conversation turn is embedded with the turns before it, so a forget that
removes a turn gives the kept turns that quoted it a new embedded text and vector in the same
write. The numbers it re-keyed are kept with that revision (:attr:`StreamState.rekeyed`, each
number with its latest re-keying only), so a process holding older rows reloads them
(:meth:`StreamState.rekeyed_since`). A state that never re-keyed a turn is stored and hashed
exactly as before the field existed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from pydantic import (
    BaseModel,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from langchain_genmem.core.errors import ValidationError
from langchain_genmem.core.modes import DEFAULT_RELEVANCE_MODE, LEXICAL_WEIGHT, RelevanceMode

# the modes are declared in core.modes; importable from here as before
from langchain_genmem.core.modes import RELEVANCE_MODES as RELEVANCE_MODES

DEFAULT_TRIGGER_MAX = 150.0
DEFAULT_RECENCY_DECAY = 0.99
# Share of the lexical signal in the hybrid relevance (0: dense only, 1: lexical only).
# Chosen on training splits of the labelled set (benchmarks/bench_fusion.py: 0.25 is the best
# of a 0.05 grid on the training half, and on 19 of 20 random training halves).
DEFAULT_LEXICAL_WEIGHT = 0.25


# Fields a user may change through MemoryStream.update_settings().
SETTINGS = (
    "importance_trigger_max",
    "importance_trigger_curr",
    "importance_ele_n",
    "recency_w",
    "relevance_w",
    "importance_w",
    "recency_decay",
    "relevance_mode",
    "lexical_weight",
)
# Settings the original's scratch.json does not have: exported only when set or already there.
NEW_SETTINGS = ("relevance_mode", "lexical_weight")

Superseded = tuple[int, int]
"""A correction: ``(old, new)``, node ``new`` supersedes node ``old``."""

Forgotten = tuple[int, int, int]
"""A range of forgotten node numbers: ``(first, last, rev)``, ``rev`` the forgetting one."""

Rekeyed = tuple[int, int, int]
"""A range of re-keyed node numbers: ``(first, last, rev)``, ``rev`` the forget that re-keyed
them (their newest embedded text and vector are of that revision)."""

Claimed = tuple[str, str, int, int]
"""A write made with an idempotency key: ``(key, fingerprint, first, last)``, the fingerprint
of its items and the numbers of the memories it stored (see
:mod:`~langchain_genmem.memory.idempotency`)."""


def _no_kw_strength() -> dict[str, dict[str, int]]:
    """The keyword strengths of a new persona: none counted for events or thoughts."""
    return {"event": {}, "thought": {}}


class StreamState(BaseModel):
    """What a persona's stream remembers besides its nodes.

    Attributes:
        node_count: the highest node number ever committed; ``node_1`` ..
            ``node_{node_count}`` exist but for the :attr:`forgotten` ones (numbers are
            never reused).
        type_count: the highest per-type number given (forgotten nodes included: like
            ``node_count``, it numbers new nodes and never goes back).
        dim: size of the persona's vectors, once one is stored.
        rev: bumped by every commit, so other processes can tell the state changed.
        importance_trigger_max: reflection threshold (the original's default is 150).
        importance_trigger_curr: counts down by each event's poignancy; reflection is due at 0.
        importance_ele_n: events added since the last reflection.
        recency_w: persona weight of recency.
        relevance_w: persona weight of relevance.
        importance_w: persona weight of importance.
        recency_decay: decay of recency per hour (or per rank, by retrieval mode).
        relevance_mode: the persona's relevance signal: ``"dense"`` (cosine, the
            original's), ``"lexical"`` or ``"hybrid"`` (both fused).
        lexical_weight: share of the lexical signal in the hybrid relevance, in [0, 1].
        kw_strength: ``{"event": {kw: n}, "thought": {kw: n}}``.
        extra: other ``scratch.json`` values kept for a faithful export.
        forgotten: the forgotten node numbers as ``(first, last, rev)`` ranges, oldest
            forget first (left out of the stored JSON while empty).
        idempotency: the latest writes made with an idempotency key, oldest first (left
            out of the stored JSON while empty; see
            :mod:`~langchain_genmem.memory.idempotency`).
        superseded: the corrections as ``(old, new)`` node numbers, oldest first (left out
            of the stored JSON while empty).
        rekeyed: the kept turns a forget gave a new embedded text and vector, as
            ``(first, last, rev)`` ranges, each number at its latest re-keying only and
            forgotten numbers left out (left out of the stored JSON while empty).
    """

    node_count: int = 0
    type_count: dict[str, int] = Field(
        default_factory=lambda: {"event": 0, "thought": 0, "chat": 0}
    )
    dim: int | None = None
    rev: int = 0
    importance_trigger_max: float = DEFAULT_TRIGGER_MAX
    importance_trigger_curr: float = DEFAULT_TRIGGER_MAX
    importance_ele_n: int = 0
    recency_w: float = 1.0
    relevance_w: float = 1.0
    importance_w: float = 1.0
    recency_decay: float = DEFAULT_RECENCY_DECAY
    relevance_mode: RelevanceMode = DEFAULT_RELEVANCE_MODE
    lexical_weight: float = Field(DEFAULT_LEXICAL_WEIGHT, **LEXICAL_WEIGHT.field())
    kw_strength: dict[str, dict[str, int]] = Field(default_factory=_no_kw_strength)
    extra: dict[str, Any] = Field(default_factory=dict)
    forgotten: list[Forgotten] = Field(default_factory=list)
    idempotency: list[Claimed] = Field(default_factory=list)
    superseded: list[Superseded] = Field(default_factory=list)
    rekeyed: list[Rekeyed] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _dump(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        """Every field; the forgotten, idempotency, superseded and rekeyed lists once set."""
        dumped = handler(self)
        for name in ("forgotten", "idempotency", "superseded", "rekeyed"):
            if not getattr(self, name):
                dumped.pop(name, None)
        return dumped

    def superseded_numbers(self) -> frozenset[int]:
        """The numbers of the memories a live memory supersedes (forgotten ones left out).

        Forgetting the memory that superseded another brings the other back (unless a live
        memory supersedes it too).

        Returns:
            The numbers (empty when nothing was corrected).
        """
        if not self.superseded:
            return frozenset()
        gone = self.forgotten_numbers()
        return frozenset(old for old, new in self.superseded
                         if new not in gone and old not in gone)

    @property
    def live_count(self) -> int:
        """How many nodes exist: ``node_count`` less the forgotten ones."""
        return self.node_count - sum(last - first + 1 for first, last, _ in self.forgotten)

    def forgotten_since(self, rev: int) -> list[tuple[int, int]]:
        """The ``(first, last)`` ranges forgotten after revision ``rev``, oldest first.

        Args:
            rev: the revision a process's cache was read at.

        Returns:
            The ranges whose nodes that cache must drop (none when nothing was forgotten).
        """
        return [(first, last) for first, last, at in self.forgotten if at > rev]

    def is_forgotten(self, number: int) -> bool:
        """Whether ``node_{number}`` was forgotten.

        Args:
            number: a node number.

        Returns:
            True when a forgotten range holds it.
        """
        return any(lo <= number <= hi for lo, hi, _ in self.forgotten)

    def forgotten_numbers(self) -> frozenset[int]:
        """Every forgotten node number.

        Returns:
            The numbers (empty when nothing was forgotten).
        """
        return frozenset(n for lo, hi, _ in self.forgotten for n in range(lo, hi + 1))

    def live_numbers(self, first: int, last: int) -> np.ndarray:
        """The node numbers from ``first`` to ``last`` (inclusive) that are not forgotten.

        Args:
            first: the lowest number.
            last: the highest number.

        Returns:
            The numbers, ascending (int64).
        """
        start = max(first, 1)
        numbers = np.arange(start, min(last, self.node_count) + 1, dtype=np.int64)
        keep = np.ones(numbers.shape[0], dtype=bool)
        for lo, hi, _ in self.forgotten:
            if hi >= start and lo <= last:
                keep[max(lo - start, 0) : hi - start + 1] = False
        return numbers[keep]

    def forgetting(self, numbers: Iterable[int]) -> StreamState:
        """This state with ``numbers`` forgotten, at the next revision (counters unchanged).

        Args:
            numbers: node numbers to forget (each committed and not forgotten yet).

        Returns:
            The new state, for :meth:`~langchain_genmem.backends.base.MemoryBackend.forget`.

        Raises:
            ValidationError: a number never committed, already forgotten, or none at all.
        """
        wanted = np.unique(np.fromiter(numbers, dtype=np.int64))
        if not wanted.size:
            raise ValidationError("forget: no node numbers given", field="node_numbers")
        outside = wanted[(wanted < 1) | (wanted > self.node_count)]
        gone = outside if outside.size else self._among_forgotten(wanted)
        if gone.size:
            msg = (f"forget: node_{int(gone[0])} is not a stored memory (numbers run from 1 to "
                   f"{self.node_count}, forgotten ones excepted)")
            raise ValidationError(msg, field="node_numbers")
        rev = self.rev + 1
        added = [(lo, hi, rev) for lo, hi in number_runs(wanted)]
        return self.model_copy(update={"rev": rev, "forgotten": [*self.forgotten, *added]})

    def _among_forgotten(self, numbers: np.ndarray) -> np.ndarray:
        """Which of ``numbers`` (ascending) a forgotten range holds: a bisection each."""
        if not self.forgotten:
            return numbers[:0]
        ranges = np.array(sorted((lo, hi) for lo, hi, _ in self.forgotten), dtype=np.int64)
        at = np.searchsorted(ranges[:, 0], numbers, side="right") - 1
        held = (at >= 0) & (ranges[np.maximum(at, 0), 1] >= numbers)
        return numbers[held]

    def rekeying(self, numbers: Iterable[int]) -> StreamState:
        """This state with ``numbers`` re-keyed at its revision (call after :meth:`forgetting`).

        Older entries of the same numbers and entries of forgotten numbers are left out: a
        process holding rows of an older revision reloads each number once.

        Args:
            numbers: the kept nodes given a new embedded text and vector.

        Returns:
            The new state (this one when ``numbers`` is empty).
        """
        wanted = {int(n) for n in numbers}
        if not wanted:
            return self
        gone = self.forgotten_numbers()
        latest = {n: rev for lo, hi, rev in self.rekeyed for n in range(lo, hi + 1)
                  if n not in gone and n not in wanted}
        latest.update(dict.fromkeys(wanted, self.rev))
        ranges = [(lo, hi, rev) for rev in sorted(set(latest.values()))
                  for lo, hi in number_runs(sorted(n for n, r in latest.items() if r == rev))]
        return self.model_copy(update={"rekeyed": ranges})

    def rekeyed_since(self, rev: int) -> list[int]:
        """The numbers re-keyed after revision ``rev``, ascending.

        Args:
            rev: the revision a process's cache was read at.

        Returns:
            The numbers whose held rows (text and vector) that cache must reload.
        """
        return sorted(n for lo, hi, at in self.rekeyed if at > rev for n in range(lo, hi + 1))

    def rekeyed_at(self, rev: int) -> list[int]:
        """The numbers re-keyed at exactly revision ``rev``, ascending.

        Args:
            rev: a revision.

        Returns:
            The numbers.
        """
        return sorted(n for lo, hi, at in self.rekeyed if at == rev for n in range(lo, hi + 1))

    @property
    def reflection_due(self) -> bool:
        """True when the original's trigger has fired (``importance_trigger_curr <= 0``)."""
        return self.importance_trigger_curr <= 0


def number_runs(numbers: Iterable[int] | np.ndarray) -> list[tuple[int, int]]:
    """Sorted distinct numbers as ``(first, last)`` runs of consecutive ones.

    Args:
        numbers: ascending, distinct integers.

    Returns:
        The runs, ascending.
    """
    held = np.asarray(numbers if isinstance(numbers, np.ndarray) else list(numbers),
                      dtype=np.int64)
    if not held.size:
        return []
    cuts = np.flatnonzero(np.diff(held) != 1) + 1
    firsts = held[np.concatenate(([0], cuts))]
    lasts = held[np.concatenate((cuts - 1, [held.size - 1]))]
    return list(zip(firsts.tolist(), lasts.tolist(), strict=True))
