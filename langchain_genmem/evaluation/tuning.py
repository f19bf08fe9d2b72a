"""Retrieval weights learned from labelled examples: scratch.json's weights, fitted.

:func:`fit_weights` searches ``recency_w``, ``relevance_w``, ``importance_w``,
``recency_decay`` and the lexical weight of the hybrid relevance for the values that rank a
training split of labelled examples best (mean recall@k or nDCG@k), and reports both the
starting settings and the tuned ones on the training split and on the held-out split::

    from langchain_genmem.evaluation.metrics import load_examples
    from langchain_genmem.evaluation.tuning import fit_weights

    result = fit_weights(stream, load_examples("questions.jsonl"), metric="recall", k=10)
    for row in result.rows:                     # start vs tuned, train vs held-out
        print(row.name, row.setting, row.train, row.held_out)
    stream.update_settings(**result.settings())  # keep them as the persona's

How it is fast without a second copy of the formula: everything a ranking needs that does not
depend on the weights is computed once per example (:class:`PreparedExamples`): the candidate
rows the retriever would score (its own :meth:`~GenerativeAgentsRetriever.pick_candidates`),
the exact float64 cosine of each (:func:`~langchain_genmem.numerics.scoring.exact_cosine`), their
BM25 (the stream's own :meth:`~langchain_genmem.MemoryStream.lexical_index`), poignancy,
access times, tie order and the time the query is asked. Each setting tried then costs the
scoring module's own ``recency`` (kept per decay), ``minmax``, ``fuse_relevance``,
``combine`` and ``top_k``, the functions the retriever ranks with, so the tuned weights rank
exactly as a retriever given them does (a test holds the two to the same ids and order).

The search (deterministic for a seed):

- the three weights are non-negative and sum to 3 (the defaults' total): only their ratios
  change a ranking, so the simplex holds every distinct ranking once and the defaults
  ``(1, 1, 1)`` lie on it; values are rounded to 3 decimals, so the settings stored are
  exactly the ones measured;
- ``recency_decay`` comes from :data:`DECAYS` (an hour's decay from 0.5 to none);
- the lexical weight is in [0, 1] in steps of 0.05 (``relevance="hybrid"``);
- first a coarse grid plus ``samples`` random settings (``numpy`` generator seeded with
  ``seed``), then coordinate refinement from the best one with halving steps;
- a setting replaces the best only when it scores strictly higher, or equally and closer to
  the starting settings, so ties go to what the persona already has.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from langchain_genmem.core import validation
from langchain_genmem.core.errors import ValidationError
from langchain_genmem.core.modes import DEFAULT_RELEVANCE_MODE, RelevanceMode
from langchain_genmem.core.state import DEFAULT_LEXICAL_WEIGHT, DEFAULT_RECENCY_DECAY
from langchain_genmem.core.timeutil import to_epoch
from langchain_genmem.evaluation.metrics import Example, ndcg_at_k, recall_at_k, split_examples
from langchain_genmem.memory.query_cache import embed_query
from langchain_genmem.numerics.scoring import (
    Candidates,
    Weights,
    combine,
    exact_cosine,
    fuse_relevance,
    minmax,
    normalise_lexical,
    recency,
    top_k,
)
from langchain_genmem.retrieval.retrievers import GenerativeAgentsRetriever

if TYPE_CHECKING:
    from langchain_genmem.memory.stream import MemoryStream
    from langchain_genmem.retrieval.weighted import WeightedRetrieval

Metric = Literal["recall", "ndcg"]
METRICS: dict[str, Any] = {"recall": recall_at_k, "ndcg": ndcg_at_k}
TunedRelevance = Literal["dense", "hybrid"]

WEIGHT_TOTAL = 3.0
"""The three weights sum to this (the defaults' 1 + 1 + 1)."""

DECAYS: tuple[float, ...] = (
    0.5, 0.7, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99, 0.995, 0.998, 0.999, 0.9995, 1.0,
)
"""The recency decays searched (per hour in ``"hours"`` mode, per place in ``"rank"``)."""

LEXICAL_STEP = 0.05
DEFAULT_SAMPLES = 200
_PLACES = 3
_EQUAL = 1e-9  # means of the same hits summed in another order may differ in the last bit


@dataclass(frozen=True)
class Setting:
    """One setting of the tuned values.

    Attributes:
        recency_w: weight of recency.
        relevance_w: weight of relevance.
        importance_w: weight of importance.
        recency_decay: recency decay.
        lexical_weight: share of the lexical signal in the relevance (used in
            ``"hybrid"`` only).
        relevance_mode: ``"dense"``, ``"lexical"`` or ``"hybrid"``.
    """

    recency_w: float = 1.0
    relevance_w: float = 1.0
    importance_w: float = 1.0
    recency_decay: float = DEFAULT_RECENCY_DECAY
    lexical_weight: float = DEFAULT_LEXICAL_WEIGHT
    relevance_mode: RelevanceMode = DEFAULT_RELEVANCE_MODE

    def weights(self, gains: tuple[float, float, float]) -> Weights:
        """The scoring weights of this setting.

        Args:
            gains: the global gains.

        Returns:
            The weights.
        """
        return Weights(self.recency_w, self.relevance_w, self.importance_w, gains)

    def settings(self) -> dict[str, float | str]:
        """This setting as persona settings, for :meth:`MemoryStream.update_settings`.

        Returns:
            ``{name: value}``.
        """
        return {
            "recency_w": self.recency_w,
            "relevance_w": self.relevance_w,
            "importance_w": self.importance_w,
            "recency_decay": self.recency_decay,
            "relevance_mode": self.relevance_mode,
            "lexical_weight": self.lexical_weight,
        }

    def key(self) -> tuple[float, ...]:
        """The values that change a ranking (for caching)."""
        lexical = {"dense": -1.0, "lexical": -2.0}.get(self.relevance_mode, self.lexical_weight)
        return (self.recency_w, self.relevance_w, self.importance_w, self.recency_decay, lexical)


@dataclass(frozen=True)
class Scores:
    """A setting's mean metric on each split.

    Attributes:
        name: ``"start"`` (the persona's settings) or ``"tuned"``.
        setting: the setting.
        train: mean metric over the training examples.
        held_out: mean metric over the held-out examples (None when there are none).
    """

    name: str
    setting: Setting
    train: float
    held_out: float | None


@dataclass(frozen=True)
class FitResult:
    """What :func:`fit_weights` found.

    Attributes:
        metric: ``"recall"`` or ``"ndcg"``.
        k: the cut-off.
        seed: the seed of the split and the search.
        start: the persona's (or the given retriever's) settings, scored.
        tuned: the best setting found on the training split, scored.
        train_count: training examples.
        held_out_count: held-out examples.
        tried: distinct settings scored.
    """

    metric: str
    k: int
    seed: int
    start: Scores
    tuned: Scores
    train_count: int
    held_out_count: int
    tried: int

    @property
    def rows(self) -> tuple[Scores, Scores]:
        """The start and tuned scores, in that order."""
        return (self.start, self.tuned)

    def settings(self) -> dict[str, float | str]:
        """The tuned values as persona settings (``stream.update_settings(**...)``)."""
        return self.tuned.setting.settings()


@dataclass
class _Prepared:
    """The weight-free parts of one example's ranking."""

    cands: Candidates
    ids: np.ndarray
    relevant: tuple[str, ...]
    importance: np.ndarray
    dense: np.ndarray
    lexical: np.ndarray | None
    now: float


class PreparedExamples:
    """Examples with their weight-free ranking parts computed once, ready to score settings.

    Args:
        stream: the persona's stream.
        examples: the labelled examples.
        retriever: the retriever whose candidates, recency mode and gains are used.
        lexical: also compute BM25 for the hybrid relevance.
    """

    def __init__(
        self,
        stream: MemoryStream,
        examples: Sequence[Example],
        retriever: WeightedRetrieval,
        *,
        lexical: bool,
    ) -> None:
        self.retriever = retriever
        self.examples = list(examples)
        self.gains: tuple[float, float, float] = tuple(retriever.gains)  # type: ignore[assignment]
        stream.refresh()
        index = stream.lexical_index() if lexical else None
        self._items = [self._prepare(stream, e, index) for e in self.examples]
        self._recency: list[dict[float, np.ndarray]] = [{} for _ in self._items]

    def _prepare(self, stream: MemoryStream, example: Example, index: Any) -> _Prepared:
        cache = stream.columns
        chats = self.retriever.candidate_filter().chats
        static = cache.candidates(self.retriever.idle_filter, chats=chats)
        now = to_epoch(example.at if example.at is not None else stream.clock())
        rows, importance, (type_code, node_count, poignancy), _ = (
            self.retriever.pick_candidates(static, cache, now)
        )
        vector = embed_query(stream.embeddings, example.query)
        cos = exact_cosine(cache.vectors[rows], cache.norms[rows], vector)
        cands = Candidates(cache.last_accessed[rows].copy(), type_code, node_count, poignancy, cos)
        lexical = None if index is None else normalise_lexical(index.scores(example.query, rows))
        return _Prepared(
            cands=cands,
            ids=np.array([cache.nodes[r].node_id for r in rows], dtype=object),
            relevant=example.relevant,
            importance=minmax(poignancy) if importance is None else importance,
            dense=minmax(cos),
            lexical=lexical,
            now=now,
        )

    def ranked(self, setting: Setting, k: int) -> list[list[str]]:
        """The top k node ids of every example under a setting, best first.

        Args:
            setting: the setting.
            k: how many.

        Returns:
            One list per example, in the examples' order.
        """
        return [self._ranked(i, setting, k) for i in range(len(self._items))]

    def score(self, setting: Setting, metric: Metric, k: int, which: Sequence[int]) -> float:
        """The mean metric of a setting over some of the examples.

        Args:
            setting: the setting.
            metric: ``"recall"`` or ``"ndcg"``.
            k: the cut-off.
            which: indices of the examples.

        Returns:
            The mean (NaN for no examples).
        """
        measure = METRICS[metric]
        values = [measure(self._ranked(i, setting, k), self._items[i].relevant, k) for i in which]
        return float(np.mean(values)) if values else math.nan

    def _ranked(self, i: int, setting: Setting, k: int) -> list[str]:
        item = self._items[i]
        if len(item.cands) == 0:
            return []
        rec = self._recency_of(i, setting.recency_decay)
        if setting.relevance_mode != "dense" and item.lexical is None:
            msg = "relevance: prepare the examples with lexical=True to score lexical relevance"
            raise ValidationError(msg, field="relevance")
        rel = fuse_relevance(item.dense, item.lexical, setting.relevance_mode,
                             setting.lexical_weight)
        total = combine(rec, rel, item.importance, setting.weights(self.gains))
        return list(item.ids[top_k(total, item.cands, k)])

    def _recency_of(self, i: int, decay: float) -> np.ndarray:
        held = self._recency[i]
        if decay not in held:
            item = self._items[i]
            mode = self.retriever.recency_mode
            held[decay] = minmax(recency(item.cands, mode, decay, item.now))
        return held[decay]


# ---------------------------------------------------------------------------- the search


def fit_weights(
    stream: MemoryStream,
    examples: Iterable[Example | tuple[Any, ...]],
    *,
    metric: Metric = "recall",
    k: int = 10,
    train_fraction: float = 0.7,
    seed: int = 0,
    relevance: TunedRelevance = "hybrid",
    retriever: WeightedRetrieval | None = None,
    samples: int = DEFAULT_SAMPLES,
) -> FitResult:
    """Learn retrieval weights from labelled examples: best on a training split, reported on both.

    Args:
        stream: the persona's stream.
        examples: :class:`~langchain_genmem.evaluation.metrics.Example` objects, or tuples
            ``(query, [relevant node ids])`` / ``(query, ids, at)``.
        metric: the objective: mean ``"recall"``@k or ``"ndcg"``@k.
        k: the cut-off.
        train_fraction: share of the examples the search sees
            (:func:`~langchain_genmem.evaluation.metrics.split_examples` with ``seed``); the rest
            are held out and only reported.
        seed: seeds the split and the random part of the search.
        relevance: ``"hybrid"`` also tunes the lexical weight (0 = dense only, 1 = lexical
            only); ``"dense"`` keeps the original's cosine relevance.
        retriever: the retriever whose candidate filter, recency mode and gains to tune for
            (default: a plain :class:`~langchain_genmem.GenerativeAgentsRetriever`). Its own
            weights, else the persona's settings, are the starting point.
        samples: random settings tried besides the grid.

    Returns:
        The result: the starting and the tuned settings, each scored on both splits.

    Raises:
        ValidationError: no examples, a bad example (empty query or relevant list, a node id
            the stream does not hold, naming the example and the id), an empty training
            split, or a bad metric, k or relevance.
    """
    metric, k = _check_options(metric, k, relevance, samples)
    stream.refresh()  # ids another process added are known
    labelled = _examples(stream, examples)
    train, held_out = split_examples(labelled, train_fraction, seed)
    if not train:
        msg = f"train_fraction: {train_fraction!r} leaves no training example of {len(labelled)}"
        raise ValidationError(msg, field="train_fraction")
    retriever = retriever or _plain_retriever(stream)
    start = _start(stream, retriever)
    lexical = relevance == "hybrid" or start.relevance_mode != "dense"
    prepared = PreparedExamples(stream, train + held_out, retriever, lexical=lexical)
    search = _Search(prepared, metric, k, range(len(train)), start)
    best = _simplest(search.run(relevance, np.random.default_rng(seed), samples), start)
    held = range(len(train), len(train) + len(held_out))

    def scored(name: str, setting: Setting) -> Scores:
        out = prepared.score(setting, metric, k, held) if held_out else None
        return Scores(name, setting, search.value(setting), out)

    return FitResult(
        metric=metric, k=k, seed=seed,
        start=scored("start", search.start), tuned=scored("tuned", best),
        train_count=len(train), held_out_count=len(held_out), tried=len(search.seen),
    )


def _check_options(metric: Any, k: Any, relevance: Any, samples: Any) -> tuple[Metric, int]:
    validation.one_of(metric, METRICS, "metric")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValidationError(f"k: expected a whole number >= 1, got {k!r}", field="k")
    if relevance not in ("dense", "hybrid"):
        msg = f"relevance: expected 'dense' or 'hybrid', got {relevance!r}"
        raise ValidationError(msg, field="relevance")
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
        msg = f"samples: expected a whole number >= 0, got {samples!r}"
        raise ValidationError(msg, field="samples")
    return metric, k


def _examples(stream: MemoryStream, given: Iterable[Example | tuple[Any, ...]]) -> list[Example]:
    """The examples as Example objects, every relevant id checked against the stream."""
    out = []
    for n, item in enumerate(given):
        try:
            example = item if isinstance(item, Example) else _from_tuple(item)
        except ValidationError as e:
            raise ValidationError(f"examples[{n}]: {e}", field=e.field) from e
        missing = [r for r in example.relevant if stream.row_of(r) is None]
        if missing:
            msg = (
                f"examples[{n}] ({example.id or example.query!r}): relevant: no memory "
                f"{missing[0]!r} in the stream of persona {stream.persona!r}"
            )
            raise ValidationError(msg, field="relevant")
        out.append(example)
    if not out:
        raise ValidationError("examples: at least one labelled example is needed",
                              field="examples")
    return out


def _from_tuple(item: Any) -> Example:
    if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
        msg = f"expected an Example or (query, [node ids][, at]), got {item!r}"
        raise ValidationError(msg, field="examples")
    at = item[2] if len(item) == 3 else None
    if at is not None and not isinstance(at, datetime):
        raise ValidationError(f"at: expected a datetime, got {at!r}", field="at")
    return Example(item[0], item[1], at=at)


def _plain_retriever(stream: MemoryStream) -> GenerativeAgentsRetriever:
    return GenerativeAgentsRetriever(memory_stream=stream, update_access=False)


def _start(stream: MemoryStream, retriever: WeightedRetrieval) -> Setting:
    """The settings retrieval uses today: the retriever's own, else the persona's."""
    w = retriever.effective_weights()
    mode, lexical_weight = retriever.effective_relevance()
    state = stream.state
    decay = state.recency_decay if retriever.recency_decay is None else retriever.recency_decay
    return Setting(w.recency_w, w.relevance_w, w.importance_w, decay, lexical_weight, mode)


class _Search:
    """Coarse grid and random settings, then coordinate refinement; ties go to the start."""

    def __init__(
        self, prepared: PreparedExamples, metric: Metric, k: int, train: Sequence[int],
        start: Setting,
    ) -> None:
        self.prepared, self.metric, self.k, self.train = prepared, metric, k, list(train)
        self.start = start
        self.seen: dict[tuple[float, ...], float] = {}

    def value(self, setting: Setting) -> float:
        """Mean training metric of a setting (each distinct setting scored once)."""
        key = setting.key()
        if key not in self.seen:
            self.seen[key] = self.prepared.score(setting, self.metric, self.k, self.train)
        return self.seen[key]

    def run(self, relevance: TunedRelevance, rng: np.random.Generator, samples: int) -> Setting:
        """The best setting found.

        Args:
            relevance: ``"dense"`` or ``"hybrid"``.
            rng: the seeded generator.
            samples: random settings besides the grid.

        Returns:
            The best setting.
        """
        best = self.start
        for setting in self._coarse(relevance, rng, samples):
            best = self._better(best, setting)
        return self._refine(best, relevance)

    def _better(self, best: Setting, other: Setting) -> Setting:
        a, b = self.value(best), self.value(other)
        if b > a + _EQUAL or (b >= a - _EQUAL and self._distance(other) < self._distance(best)):
            return other
        return best

    def _distance(self, s: Setting) -> float:
        """How far a setting is from the start (weights compared on the simplex)."""
        a, b = _on_simplex(s), _on_simplex(self.start)
        weights = sum(abs(x - y) for x, y in zip(a, b, strict=True)) / WEIGHT_TOTAL
        decay = abs(_decay_place(s.recency_decay) - _decay_place(self.start.recency_decay))
        lexical = abs(s.lexical_weight - self.start.lexical_weight)
        modes = float(s.relevance_mode != self.start.relevance_mode)
        return weights + decay / len(DECAYS) + lexical + modes

    def _coarse(
        self, relevance: TunedRelevance, rng: np.random.Generator, samples: int
    ) -> list[Setting]:
        grid = [w for w in _simplex_grid(1.0) if any(w)]
        lexical = (0.0, 0.5, 1.0) if relevance == "hybrid" else (self.start.lexical_weight,)
        out = [
            _setting(w, d, x, relevance) for w in grid for d in DECAYS[::3] for x in lexical
        ]
        for _ in range(samples):
            w = rng.dirichlet(np.ones(3)) * WEIGHT_TOTAL
            d = DECAYS[int(rng.integers(len(DECAYS)))]
            x = _snap(float(rng.random())) if relevance == "hybrid" else lexical[0]
            out.append(_setting(tuple(w), d, x, relevance))
        return out

    def _refine(self, best: Setting, relevance: TunedRelevance) -> Setting:
        step = 0.5
        while step >= 0.05:
            moved = False
            for neighbour in _neighbours(best, step, relevance):
                chosen = self._better(best, neighbour)
                moved, best = moved or chosen is not best, chosen
            if not moved:
                step /= 2
        return best


def _simplest(s: Setting, start: Setting) -> Setting:
    """A hybrid setting with no lexical share is the dense relevance: store it as such."""
    if s.relevance_mode == "hybrid" and s.lexical_weight == 0:
        return replace(s, relevance_mode="dense", lexical_weight=start.lexical_weight)
    return s


def _setting(
    weights: Sequence[float], decay: float, lexical: float, relevance: TunedRelevance
) -> Setting:
    w = _round_simplex(weights)
    return Setting(w[0], w[1], w[2], decay, _snap(lexical), relevance)


def _round_simplex(weights: Sequence[float]) -> tuple[float, float, float]:
    """Non-negative weights scaled to sum to :data:`WEIGHT_TOTAL`, rounded to 3 decimals."""
    clipped = [max(0.0, float(w)) for w in weights]
    total = sum(clipped)
    if total == 0:
        clipped, total = [1.0, 1.0, 1.0], 3.0
    return tuple(round(w * WEIGHT_TOTAL / total, _PLACES) for w in clipped)  # type: ignore[return-value]


def _on_simplex(s: Setting) -> tuple[float, float, float]:
    return _round_simplex((s.recency_w, s.relevance_w, s.importance_w))


def _simplex_grid(step: float) -> list[tuple[float, float, float]]:
    n = round(WEIGHT_TOTAL / step)
    return [
        (i * step, j * step, (n - i - j) * step) for i in range(n + 1) for j in range(n + 1 - i)
    ]


def _snap(value: float) -> float:
    return round(min(1.0, max(0.0, round(value / LEXICAL_STEP) * LEXICAL_STEP)), _PLACES)


def _decay_place(decay: float) -> int:
    return min(range(len(DECAYS)), key=lambda i: abs(DECAYS[i] - decay))


def _neighbours(s: Setting, step: float, relevance: TunedRelevance) -> list[Setting]:
    """Settings one step away along each coordinate (weights moved on the simplex)."""
    out = []
    w = _on_simplex(s)
    for i in range(3):
        for delta in (step, -step):
            moved = list(w)
            moved[i] = min(WEIGHT_TOTAL, max(0.0, moved[i] + delta))
            rest = sum(w) - w[i]
            for j in range(3):
                if j != i:
                    share = w[j] / rest if rest > 0 else 0.5
                    moved[j] = (WEIGHT_TOTAL - moved[i]) * share
            out.append(_setting(moved, s.recency_decay, s.lexical_weight, relevance))
    place = _decay_place(s.recency_decay)
    for p in (place - 1, place + 1):
        if 0 <= p < len(DECAYS):
            out.append(replace(s, recency_decay=DECAYS[p]))
    if relevance == "hybrid":
        for delta in (step / 5, -step / 5):
            out.append(replace(s, lexical_weight=_snap(s.lexical_weight + delta)))
    return out
