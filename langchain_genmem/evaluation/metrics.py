"""Offline evaluation of retrieval: labelled examples, recall@k, nDCG@k and latency.

A labelled example is a query with every memory (node id) that answers it, optionally asked at
a given time. :func:`load_examples` reads them from a JSON Lines (or JSON list) file such as the
project's ``benchmarks/quality/questions.jsonl``; :func:`evaluate` runs a retriever (or any
callable) over them and averages recall@k and nDCG@k (binary relevance), recording each query's
latency; :func:`split_examples` makes the deterministic train / held-out split that weight
fitting uses, and :func:`split_stratified` one that gives each half a share of every stratum
(language, kind of question...).

Example:
    .. code-block:: python

        from langchain_genmem.evaluation.metrics import Example, evaluate

        examples = [Example("Who does Maria like?", ["node_10"])]
        report = evaluate(lambda example: ["node_3", "node_10"], examples, ks=(1, 5))
        report.recall[5]   # 1.0
        report.ndcg[5]     # 1 / log2(3) = 0.63...
"""

from __future__ import annotations

import json
import math
import random
import statistics
import time
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from langchain_genmem.core.errors import ValidationError
from langchain_genmem.core.timeutil import SimulationClock
from langchain_genmem.memory.stream import MemoryStream
from langchain_genmem.retrieval.retrievers import GenerativeAgentsRetriever

DEFAULT_KS = (5, 10, 30)
# The fields a line of a question file may hold; "question" and "query" name the same thing.
EXAMPLE_FIELDS = frozenset(
    {"id", "persona", "language", "group", "question", "query", "relevant", "at", "note"}
)

Ranked = Sequence[str | Document]
Known = MemoryStream | Collection[str]
System = BaseRetriever | Callable[["Example"], Ranked]


@dataclass(frozen=True)
class Example:
    """One labelled query.

    Attributes:
        query: the query text.
        relevant: every node id that answers it (binary relevance), no duplicates.
        at: the time the query is asked (None: the stream's own clock).
        id: a name for reports.
        persona: the stream it is asked of.
        language: the query's language code.
        group: the kind of question, for per-group averages.
        note: how relevance was judged.
    """

    query: str
    relevant: tuple[str, ...]
    at: datetime | None = None
    id: str | None = None
    persona: str | None = None
    language: str | None = None
    group: str | None = None
    note: str | None = None

    def __post_init__(self) -> None:
        """Check the fields and store ``relevant`` as a tuple.

        Raises:
            ValidationError: an empty query, an empty or repeated relevant list, or a
                relevant id that is not a non-empty string.
        """
        if not isinstance(self.query, str) or not self.query.strip():
            raise ValidationError("query: expected non-empty text", field="query")
        if isinstance(self.relevant, str):
            raise ValidationError("relevant: expected a list of node ids, got text",
                                  field="relevant")
        relevant = tuple(self.relevant)
        if not relevant:
            raise ValidationError("relevant: at least one node id is needed", field="relevant")
        bad = [r for r in relevant if not isinstance(r, str) or not r]
        if bad:
            raise ValidationError(f"relevant: {bad[0]!r} is not a node id", field="relevant")
        if len(set(relevant)) != len(relevant):
            twice = next(r for r in relevant if relevant.count(r) > 1)
            raise ValidationError(f"relevant: {twice!r} is listed twice", field="relevant")
        object.__setattr__(self, "relevant", relevant)


@dataclass(frozen=True)
class QueryResult:
    """What one example scored.

    Attributes:
        example: the example.
        ranked: the node ids returned, best first.
        recall: ``{k: recall@k}``.
        ndcg: ``{k: nDCG@k}``.
        latency_ms: wall time of the retrieval call.
    """

    example: Example
    ranked: tuple[str, ...]
    recall: dict[int, float]
    ndcg: dict[int, float]
    latency_ms: float


@dataclass(frozen=True)
class EvaluationReport:
    """Averages over a set of examples, with every query's own result.

    Attributes:
        ks: the cut-offs.
        results: one result per example, in the order given.
    """

    ks: tuple[int, ...]
    results: tuple[QueryResult, ...] = field(default=())

    @property
    def count(self) -> int:
        """How many examples."""
        return len(self.results)

    @property
    def recall(self) -> dict[int, float]:
        """Mean recall@k for each k (NaN without examples)."""
        return {k: _mean(r.recall[k] for r in self.results) for k in self.ks}

    @property
    def ndcg(self) -> dict[int, float]:
        """Mean nDCG@k for each k (NaN without examples)."""
        return {k: _mean(r.ndcg[k] for r in self.results) for k in self.ks}

    @property
    def latency_ms(self) -> dict[str, float]:
        """Per-query latency in milliseconds: ``p50``, ``mean``, ``max`` (NaN without examples)."""
        values = [r.latency_ms for r in self.results]
        if not values:
            return {"p50": math.nan, "mean": math.nan, "max": math.nan}
        return {"p50": statistics.median(values), "mean": statistics.fmean(values),
                "max": max(values)}

    def subset(self, keep: Callable[[Example], bool]) -> EvaluationReport:
        """The report over the examples ``keep`` accepts (no retrieval is run again).

        Args:
            keep: a test on each example, e.g. ``lambda e: e.language == "zh"``.

        Returns:
            A report holding those examples' results.
        """
        return EvaluationReport(self.ks, tuple(r for r in self.results if keep(r.example)))


# ---------------------------------------------------------------------------- metrics


def recall_at_k(ranked_ids: Sequence[str], relevant: Collection[str], k: int) -> float:
    """Share of the relevant ids found in the first ``k`` ranked ids.

    Args:
        ranked_ids: node ids, best first (a repeated id counts once).
        relevant: the relevant ids (not empty).
        k: the cut-off (at least 1).

    Returns:
        A number in [0, 1].

    Raises:
        ValidationError: ``k`` below 1 or ``relevant`` empty.
    """
    wanted = _relevant_set(relevant)
    found = wanted.intersection(ranked_ids[: _cutoff(k)])
    return len(found) / len(wanted)


def ndcg_at_k(ranked_ids: Sequence[str], relevant: Collection[str], k: int) -> float:
    """Normalised discounted cumulative gain at ``k`` with binary relevance.

    DCG adds ``1 / log2(rank + 1)`` for every relevant id at ``rank`` (1-based) in the first
    ``k``; it is divided by the DCG of the ideal ranking, all relevant ids first (at most
    ``k`` of them). A repeated id gains only at its first rank.

    Args:
        ranked_ids: node ids, best first.
        relevant: the relevant ids (not empty).
        k: the cut-off (at least 1).

    Returns:
        A number in [0, 1].

    Raises:
        ValidationError: ``k`` below 1 or ``relevant`` empty.
    """
    wanted = _relevant_set(relevant)
    k = _cutoff(k)
    seen: set[str] = set()
    dcg = 0.0
    for rank, node_id in enumerate(ranked_ids[:k], start=1):
        if node_id in wanted and node_id not in seen:
            dcg += 1.0 / math.log2(rank + 1)
        seen.add(node_id)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(k, len(wanted)) + 1))
    return dcg / ideal


def _relevant_set(relevant: Collection[str]) -> set[str]:
    wanted = set(relevant)
    if not wanted:
        raise ValidationError("relevant: at least one node id is needed", field="relevant")
    return wanted


def _cutoff(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValidationError(f"k: expected a whole number >= 1, got {k!r}", field="k")
    return k


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.fmean(values) if values else math.nan


# ---------------------------------------------------------------------------- running


def evaluate(
    system: System, examples: Iterable[Example], ks: Sequence[int] = DEFAULT_KS
) -> EvaluationReport:
    """Run every example and score the ranking it returns.

    A LangChain retriever is invoked with the query; a
    :class:`~langchain_genmem.GenerativeAgentsRetriever` is asked for ``max(ks)`` documents,
    and an example's ``at`` sets its stream's :class:`~langchain_genmem.SimulationClock` for
    that query (restored afterwards). Any other callable receives the :class:`Example` and
    returns node ids or Documents (their ``id``, else ``metadata["node_id"]``), best first.
    The latency is the wall time of that one call.

    Args:
        system: a retriever, or a callable ``example -> ranked ids or Documents``.
        examples: the labelled examples.
        ks: the cut-offs (each at least 1).

    Returns:
        The report: mean recall@k and nDCG@k for each k, latencies, per-query results.

    Raises:
        ValidationError: a bad k, a Document without a node id, or an ``at`` the retriever
            cannot honour.
    """
    cutoffs = tuple(dict.fromkeys(_cutoff(k) for k in ks))
    if not cutoffs:
        raise ValidationError("ks: at least one cut-off is needed", field="ks")
    run = _runner(system, max(cutoffs))
    results = []
    for example in examples:
        start = time.perf_counter()
        ranked = tuple(_node_id(item) for item in run(example))
        latency = (time.perf_counter() - start) * 1000.0
        results.append(QueryResult(
            example, ranked,
            {k: recall_at_k(ranked, example.relevant, k) for k in cutoffs},
            {k: ndcg_at_k(ranked, example.relevant, k) for k in cutoffs},
            latency,
        ))
    return EvaluationReport(cutoffs, tuple(results))


def _runner(system: System, k: int) -> Callable[[Example], Ranked]:
    if not isinstance(system, BaseRetriever):
        return system

    if isinstance(system, GenerativeAgentsRetriever):
        def ask(example: Example) -> Ranked:
            with _asked_at(system, example.at):
                return system.invoke(example.query, k=k)

        return ask

    def ask_any(example: Example) -> Ranked:
        if example.at is not None:
            msg = f"at: {type(system).__name__} cannot be asked at a time; drop 'at'"
            raise ValidationError(msg, field="at")
        return system.invoke(example.query)

    return ask_any


@contextmanager
def _asked_at(retriever: Any, when: datetime | None) -> Iterator[None]:
    if when is None:
        yield
        return

    clock = retriever.memory_stream.clock
    if not isinstance(clock, SimulationClock):
        msg = "at: the stream's clock is not a SimulationClock, so a query cannot be timed"
        raise ValidationError(msg, field="at")
    saved = clock.now
    clock.now = when
    try:
        yield
    finally:
        clock.now = saved


def _node_id(item: str | Document) -> str:
    if isinstance(item, str):
        return item
    node_id = item.id or item.metadata.get("node_id")
    if not node_id:
        raise ValidationError("a returned Document has no id or metadata['node_id']",
                              field="node_id")
    return str(node_id)


# ---------------------------------------------------------------------------- splits


def split_examples(
    examples: Sequence[Example], train_fraction: float, seed: int = 0
) -> tuple[list[Example], list[Example]]:
    """Split examples into a training part and a held-out part, the same way for a seed.

    The examples are shuffled with ``random.Random(seed)``; the first
    ``round(train_fraction * n)`` go to training. Each part keeps the order of the input.

    Args:
        examples: the examples.
        train_fraction: the training share, in [0, 1].
        seed: the shuffle's seed.

    Returns:
        ``(train, held_out)``, disjoint, together all examples.

    Raises:
        ValidationError: a fraction outside [0, 1].
    """
    ok = isinstance(train_fraction, (int, float)) and not isinstance(train_fraction, bool)
    if not ok or not 0.0 <= train_fraction <= 1.0:
        msg = f"train_fraction: expected a number in [0, 1], got {train_fraction!r}"
        raise ValidationError(msg, field="train_fraction")
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    train = set(order[: round(train_fraction * len(examples))])
    return ([e for i, e in enumerate(examples) if i in train],
            [e for i, e in enumerate(examples) if i not in train])


def split_stratified(
    examples: Sequence[Example], stratum: Callable[[Example], Hashable]
) -> tuple[list[Example], list[Example]]:
    """Split examples into two halves that share every stratum, the same way each time.

    The examples of a stratum (in input order) go alternately to training and held-out. The
    alternation carries on from one stratum to the next (strata taken in order of first
    appearance), so strata of odd size do not all favour training: the halves differ by at
    most one example, and every stratum of two or more examples has some in each half. No
    randomness: sort the input (by id, say) to fix the split.

    Args:
        examples: the examples.
        stratum: the stratum of an example, e.g. ``lambda e: (e.language, e.group)``.

    Returns:
        ``(train, held_out)``, disjoint, together all examples, each in input order.
    """
    strata: dict[Hashable, list[int]] = {}
    for i, example in enumerate(examples):
        strata.setdefault(stratum(example), []).append(i)
    order = [i for members in strata.values() for i in members]
    train = set(order[::2])
    return ([e for i, e in enumerate(examples) if i in train],
            [e for i, e in enumerate(examples) if i not in train])


# ---------------------------------------------------------------------------- loading


def load_examples(
    path: str | Path,
    *,
    known_ids: Known | Mapping[str, Known] | None = None,
) -> list[Example]:
    """Read labelled examples from a JSON Lines file (or a JSON file holding a list).

    Each object holds ``question`` (or ``query``) and ``relevant`` (node ids), and optionally
    ``id``, ``persona``, ``language``, ``group``, ``at`` (ISO time) and ``note``. Blank lines
    are skipped.

    Args:
        path: the file.
        known_ids: check every relevant id against a stream (a
            :class:`~langchain_genmem.MemoryStream` or its node ids) that every example is
            asked of, or ``{persona: stream or node ids}`` (each example's ``persona`` must be
            a key).

    Returns:
        The examples, in file order.

    Raises:
        ValidationError: the file is missing or unreadable, or an object is malformed; the
            message names the file, the line (or list index) and the field.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ValidationError(f"{path}: cannot read: {e}", field="path") from e
    examples = []
    for where, raw in _records(path, text):
        example = _example(raw, f"{path}, {where}")
        if known_ids is not None:
            _check_ids(example, known_ids, f"{path}, {where}")
        examples.append(example)
    ids = [e.id for e in examples if e.id is not None]
    if len(set(ids)) != len(ids):
        twice = next(i for i in ids if ids.count(i) > 1)
        raise ValidationError(f"{path}: id {twice!r} is used twice", field="id")
    return examples


def _records(path: Path, text: str) -> Iterator[tuple[str, Any]]:
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValidationError(f"{path}: not JSON ({e})", field="path") from e
        if not isinstance(data, list):
            raise ValidationError(f"{path}: expected a list of objects", field="path")
        for n, raw in enumerate(data):
            yield f"item {n}", raw
        return
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValidationError(f"{path}, line {n}: not JSON ({e.msg})", field="line") from e
        yield f"line {n}", raw


def _example(raw: Any, where: str) -> Example:
    if not isinstance(raw, dict):
        raise ValidationError(f"{where}: expected an object, got {type(raw).__name__}")
    unknown = sorted(set(raw) - EXAMPLE_FIELDS)
    if unknown:
        raise ValidationError(f"{where}: unknown field {unknown[0]!r}", field=unknown[0])
    if "question" in raw and "query" in raw:
        raise ValidationError(f"{where}: give 'question' or 'query', not both", field="query")
    if "relevant" not in raw:
        raise ValidationError(f"{where}: relevant: missing", field="relevant")
    texts = {}
    for name in ("id", "persona", "language", "group", "note"):
        value = raw.get(name)
        if value is not None and not isinstance(value, str):
            raise ValidationError(f"{where}: {name}: expected text, got {value!r}", field=name)
        texts[name] = value
    query: Any = raw.get("question", raw.get("query"))  # unchecked: Example refuses a bad one
    try:
        return Example(query, raw["relevant"],
                       at=_time(raw.get("at"), where), **texts)
    except ValidationError as e:
        raise ValidationError(f"{where}: {e}", field=e.field) from e
    except TypeError as e:  # relevant is not iterable
        msg = f"{where}: relevant: expected a list of node ids, got {raw['relevant']!r}"
        raise ValidationError(msg, field="relevant") from e


def _time(value: Any, where: str) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value)
    except (TypeError, ValueError) as e:
        msg = f"{where}: at: {value!r} is not an ISO time like '2023-02-13 15:17:40'"
        raise ValidationError(msg, field="at") from e


def _check_ids(example: Example, known: Known | Mapping[str, Known], where: str) -> None:
    if isinstance(known, Mapping):
        if example.persona is None or example.persona not in known:
            names = ", ".join(sorted(known)) or "none"
            msg = f"{where}: persona: {example.persona!r} is not one of {names}"
            raise ValidationError(msg, field="persona")
        known = known[example.persona]
    if isinstance(known, MemoryStream):
        known = {node.node_id for node in known.nodes()}
    missing = [r for r in example.relevant if r not in known]
    if missing:
        of = f" of persona {example.persona!r}" if example.persona else ""
        msg = f"{where}: relevant: no memory {missing[0]!r} in the stream{of}"
        raise ValidationError(msg, field="relevant")
