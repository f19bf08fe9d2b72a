"""Lexical relevance: exact, incremental BM25 over every memory of a persona.

A :class:`LexicalIndex` mirrors one stream's :class:`~langchain_genmem.memory.cache.NodeCache`
(its rows, ascending by node number) as an inverted index held in numpy: for each term, the rows
that hold it and how often (its postings), and for each row its length in terms. A query
adds, term by term, the BM25 part of every posting into one float64 array over all rows, so
every row gets its exact score (0.0 where no query term occurs), not the top-n of an
approximate index.

What is indexed for a memory (:func:`indexed_text`): its description, then its keywords and
its subject, predicate and object, each distinct part once. Terms come from
:func:`langchain_genmem.core.tokens.tokens` (English and Chinese).

Why hand-written: ``bm25s`` scores fast but rebuilds its whole matrix on each add, and
``tantivy`` adds incrementally but is a second on-disk index whose searches return the top
documents, not a score for every row. Here an add appends to the postings of its terms, the
statistics (N, document frequencies, average length) are read at query time, and the index
is rebuilt from the nodes on open (a store is the single source of truth; see
``benchmarks/bench_lexical.py`` for the costs).

Coherence: :meth:`LexicalIndex.sync` catches up with rows the cache gained since the last
call (the store appends nodes and never rewrites one) and with rows it marked dead
(forgotten memories: their postings stay, but N, the document frequencies and the average
length leave them out, so the scores of the live rows equal those of an index built from
them alone); :meth:`LexicalIndex.reindex` and ``sync(cache, recheck=True)`` take a changed
text of rows already indexed.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import numpy as np

from langchain_genmem.core.errors import ValidationError
from langchain_genmem.core.nodes import MemoryNode
from langchain_genmem.core.text import unique
from langchain_genmem.core.tokens import tokens

__all__ = [
    "BM25_B", "BM25_K1", "BM25_VARIANT", "LexicalIndex", "bm25_idf", "indexed_text", "tokens",
]

BM25_K1 = 1.2
"""Term-frequency saturation ``k1`` of BM25 (Lucene's and Elasticsearch's default)."""

BM25_B = 0.75
"""Length normalisation ``b`` of BM25 (Lucene's and Elasticsearch's default)."""

BM25_VARIANT = "lucene"
"""The BM25 of this module: Lucene's non-negative idf with the classic (Robertson) term part.

For a query ``q`` (each distinct term once) and a document ``d`` of ``|d|`` terms, in a
corpus of ``N`` documents of average length ``avgdl``, where ``df(t)`` documents hold ``t``
and ``tf(t, d)`` is how often ``d`` holds it::

    score(q, d) = sum over t in q of
        idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl))
    idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))

with ``k1`` = :data:`BM25_K1` and ``b`` = :data:`BM25_B`. The idf is never negative (the
original Robertson-Sparck Jones idf is, for terms in more than half of the documents), so
a matching term never lowers a score. N, df and avgdl are those of the index when the
query runs, so scores after adds equal those of an index built from scratch.
"""

_PAGE = 32768  # rows tokenised and indexed per batch when catching up with a cache
_FIRST = 4  # first capacity of a term's postings


class NodeRows(Protocol):
    """What the index reads of a stream's cache: ``n`` rows, ``nodes[row]`` each."""

    n: int
    dead: int  # how many rows are dead
    alive: np.ndarray  # per row, False once its memory was forgotten

    @property
    def nodes(self) -> Sequence[MemoryNode]:
        """The MemoryNode of each row (``nodes[row]`` must work)."""


def indexed_text(node: MemoryNode) -> str:
    """The text of a memory that lexical relevance searches.

    Args:
        node: the memory.

    Returns:
        Its description, then the embedded text when it holds more (a chat's utterances,
        see :func:`_indexes_key`), then each distinct keyword and subject/predicate/object
        part once (compared case-insensitively), one per line.
    """
    extra = [p.strip() for p in (*node.keywords, node.subject, node.predicate, node.object)]
    seen = {node.description.strip().casefold()}
    parts = [node.description]
    if _indexes_key(node):
        parts.append(node.embedding_key)
    for part in unique(p for p in extra if p):
        if part.casefold() not in seen:
            seen.add(part.casefold())
            parts.append(part)
    return "\n".join(parts)


INDEX_TURN_CONTEXT = False
"""Whether a conversation turn's lexical text holds its embedded text (earlier turns and
speakers) too. Off: on the training half of the conversational set the chosen configuration
scored .812 recall@10 with a turn's own words indexed and .801 with its context too (see
docs/quality.md)."""


def _indexes_key(node: MemoryNode) -> bool:
    """Whether ``node``'s embedded text is searched too.

    It is for a chat's utterances (a chat whose embedding_key is not its description), and
    for a turn's context when :data:`INDEX_TURN_CONTEXT`. Imported memories of the original
    keep their own text.
    """
    if node.embedding_key == node.description:
        return False
    return node.type == "chat" or (INDEX_TURN_CONTEXT and node.conversation is not None)


def bm25_idf(n_docs: int, df: np.ndarray | int) -> np.ndarray | float:
    """Lucene's idf (see :data:`BM25_VARIANT`).

    Args:
        n_docs: documents in the corpus.
        df: documents holding the term.

    Returns:
        ``ln(1 + (N - df + 0.5) / (df + 0.5))``.
    """
    if isinstance(df, np.ndarray):
        return np.log1p((n_docs - df + 0.5) / (df + 0.5))
    return math.log1p((n_docs - df + 0.5) / (df + 0.5))


class LexicalIndex:
    """Exact BM25 of every memory of one persona, kept in step with its node cache.

    Use one index per stream (persona)::

        index = LexicalIndex()
        index.sync(cache)  # catches up with rows added since the last call
        scores = index.scores("Maria 在 Hobbs Cafe 学习物理", rows)

    Thread-safe: adds and queries take one lock.

    Attributes:
        k1: BM25 ``k1`` (default :data:`BM25_K1`).
        b: BM25 ``b`` (default :data:`BM25_B`).
        tokenizer: text -> terms, for memories and queries alike (default
            :func:`~langchain_genmem.core.tokens.tokens`; e.g. ``partial(tokens, stem=False)``).
    """

    def __init__(
        self,
        *,
        k1: float = BM25_K1,
        b: float = BM25_B,
        tokenizer: Callable[[str], list[str]] = tokens,
    ) -> None:
        if not (math.isfinite(k1) and k1 >= 0):
            msg = f"k1: expected a finite number >= 0, got {k1!r}"
            raise ValidationError(msg, field="k1")
        if not (math.isfinite(b) and 0 <= b <= 1):
            msg = f"b: expected a number in [0, 1], got {b!r}"
            raise ValidationError(msg, field="b")
        self.k1 = float(k1)
        self.b = float(b)
        self.tokenizer = tokenizer
        self._lock = threading.RLock()
        self._clear()

    def _clear(self) -> None:
        self._n = 0
        self._vocab: dict[str, int] = {}
        self._post_rows: list[np.ndarray] = []  # per term id: rows holding it (capacity)
        self._post_tf: list[np.ndarray] = []  # per term id: its count in each of those rows
        self._post_size: list[int] = []  # per term id: postings in use (= df)
        self._doclen = np.zeros(0)
        self._fingerprint = np.zeros(0, dtype=np.int64)
        self._total = 0.0
        self._dead = np.zeros(0, dtype=bool)  # rows marked dead
        self._dead_df: dict[int, int] = {}  # per term id: dead rows holding it
        self._dead_count = 0
        self._dead_total = 0.0  # their lengths

    def __len__(self) -> int:
        return self._n

    @property
    def live_count(self) -> int:
        """Rows indexed and not dead: the N of the scores."""
        return self._n - self._dead_count

    @property
    def vocabulary_size(self) -> int:
        """Distinct terms held (including any whose postings emptied after a reindex)."""
        return len(self._vocab)

    def sync(self, cache: NodeRows, *, recheck: bool = False) -> int:
        """Catch up with ``cache``: index the rows it gained since the last call.

        A cache with fewer rows than the index (a different or reset stream) is indexed
        afresh. The store only appends nodes, so the row count is all a query needs to be
        current; ``recheck`` also compares every held row's text with what was indexed (a
        fingerprint per row) and re-indexes those that changed.

        Args:
            cache: the stream's cache (``cache.n``, ``cache.nodes[row]``).
            recheck: also look for changed rows (one pass over every node's text).

        Returns:
            The number of rows indexed or re-indexed.
        """
        with self._lock:
            n = cache.n
            if n < self._n:
                self._clear()
            changed = 0
            if recheck:
                rows = [r for r in range(self._n) if _fingerprint(cache.nodes[r]) !=
                        self._fingerprint[r]]
                changed = self.reindex(cache, rows)
            added = n - self._n
            for lo in range(self._n, n, _PAGE):
                self.add(cache.nodes[r] for r in range(lo, min(n, lo + _PAGE)))
            if cache.dead:
                newly = np.flatnonzero(~cache.alive[:n] & ~self._dead[:n])
                if newly.size:
                    self.forget_rows(cache, newly)
            return changed + added

    def forget_rows(self, cache: NodeRows, rows: Iterable[int]) -> int:
        """Leave dead rows (forgotten memories) out of N, document frequencies and lengths.

        Their postings stay (rows keep their numbers); a dead row's score is never read.
        Costs the rows' texts. Rows already dead, or not indexed yet, are skipped.

        Args:
            cache: the stream's cache (the dead rows' nodes are still in it).
            rows: the rows.

        Returns:
            How many rows were marked.
        """
        with self._lock:
            wanted = [r for r in dict.fromkeys(int(r) for r in rows)
                      if r < self._n and not self._dead[r]]
            vocab = self._vocab
            for row in wanted:
                for term in set(self.tokenizer(indexed_text(cache.nodes[row]))):
                    t = vocab.get(term)
                    if t is not None:
                        self._dead_df[t] = self._dead_df.get(t, 0) + 1
                self._dead[row] = True
                self._dead_count += 1
                self._dead_total += float(self._doclen[row])
            return len(wanted)

    def add(self, nodes: Iterable[MemoryNode]) -> None:
        """Index nodes as the next rows, oldest first.

        Args:
            nodes: the nodes of rows ``len(self)``, ``len(self) + 1``, ...
        """
        nodes = list(nodes)
        if not nodes:
            return
        with self._lock:
            texts = [indexed_text(node) for node in nodes]
            lo = self._n
            self._reserve(lo + len(nodes))
            self._fingerprint[lo : lo + len(nodes)] = [hash(t) for t in texts]
            self._index(lo, [self.tokenizer(t) for t in texts])
            self._n = lo + len(nodes)

    def reindex(self, cache: NodeRows, rows: Iterable[int]) -> int:
        """Index the current text of rows already held (a description that changed).

        Costs one pass over the postings of the whole index: meant for rare edits.

        Args:
            cache: the stream's cache.
            rows: rows below ``len(self)`` to index again.

        Returns:
            The number of rows re-indexed.
        """
        with self._lock:
            wanted = sorted({int(r) for r in rows})
            if not wanted:
                return 0
            bad = [r for r in wanted if not 0 <= r < self._n]
            if bad:
                msg = f"rows: {bad[:5]} are not indexed rows (0..{self._n - 1})"
                raise ValidationError(msg, field="rows")
            drop = np.zeros(self._n, dtype=bool)
            drop[wanted] = True
            for t, size in enumerate(self._post_size):
                held = self._post_rows[t][:size]
                keep = ~drop[held]
                if not keep.all():
                    kept = int(keep.sum())
                    self._post_rows[t][:kept] = held[keep]
                    self._post_tf[t][:kept] = self._post_tf[t][:size][keep]
                    self._post_size[t] = kept
            texts = [indexed_text(cache.nodes[r]) for r in wanted]
            self._total -= float(self._doclen[wanted].sum())
            self._fingerprint[wanted] = [hash(t) for t in texts]
            for row, text in zip(wanted, texts, strict=True):
                self._index(row, [self.tokenizer(text)])
            return len(wanted)

    def terms(self, query: str) -> list[str]:
        """The distinct terms a query is scored with, in order (for display and debugging).

        Args:
            query: the query text.

        Returns:
            Its terms, each once; some may occur in no memory.
        """
        return unique(self.tokenizer(query))

    def scores(self, query: str, rows: np.ndarray | Sequence[int]) -> np.ndarray:
        """Exact BM25 of ``query`` for every row of ``rows``, in their order.

        Args:
            query: the query text (each distinct term counts once).
            rows: indexed rows (``0 <= row < len(self)``), any order, repeats allowed.

        Returns:
            float64 scores, one per row, 0.0 where no query term occurs (and for every row
            when the query has no term: empty, only stop words or punctuation).

        Raises:
            ValidationError: a row is not indexed (``sync`` the index first).
        """
        return self.scores_and_ceiling(query, rows)[0]

    def scores_and_ceiling(
        self, query: str, rows: np.ndarray | Sequence[int]
    ) -> tuple[np.ndarray, float]:
        """:meth:`scores`, with the BM25 no memory can reach for this query, from one snapshot.

        The ceiling is ``sum(idf(t) * (k1 + 1))`` over the query's distinct terms held by a
        live memory: each term's part tends to ``idf * (k1 + 1)`` as its frequency grows, so
        every score divided by it lies in [0, 1) and means the same in every search over the
        same statistics (the absolute scale of :func:`~langchain_genmem.numerics.scoring.rank`).

        Args:
            query: the query text (each distinct term counts once).
            rows: indexed rows (``0 <= row < len(self)``), any order, repeats allowed.

        Returns:
            The scores and the ceiling (0.0 when no query term is held by a live memory).

        Raises:
            ValidationError: a row is not indexed (``sync`` the index first).
        """
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        terms = self.terms(query)
        with self._lock:
            n = self._n
            if rows.size and (int(rows.min()) < 0 or int(rows.max()) >= n):
                msg = f"rows: expected rows in 0..{n - 1} (sync the index first)"
                raise ValidationError(msg, field="rows")
            ids = [self._vocab[t] for t in terms if t in self._vocab]
            live, total = n - self._dead_count, self._total - self._dead_total
            if not ids or total <= 0 or live <= 0:
                return np.zeros(rows.size), 0.0
            acc = np.zeros(n)
            ceiling = 0.0
            scale = self.b / (total / live)
            base = self.k1 * (1.0 - self.b)
            for t in ids:
                size = self._post_size[t]
                df = size - self._dead_df.get(t, 0)
                if not df:
                    continue
                idf = bm25_idf(live, df) * (self.k1 + 1.0)
                ceiling += float(idf)
                if not rows.size:
                    continue
                held = self._post_rows[t][:size]
                tf = self._post_tf[t][:size]
                norm = base + (self.k1 * scale) * self._doclen[held]
                acc[held] += idf * tf / (tf + norm)
            return acc[rows], ceiling

    def _index(self, lo: int, docs: Sequence[Sequence[str]]) -> None:
        """Add the postings of ``docs``, rows ``lo``, ``lo + 1``, ... (all unindexed)."""
        lengths = np.fromiter((len(d) for d in docs), dtype=np.int64, count=len(docs))
        self._doclen[lo : lo + len(docs)] = lengths
        self._total += float(lengths.sum())
        if not lengths.sum():
            return
        vocab = self._vocab
        term_ids = np.fromiter(
            (vocab.setdefault(t, len(vocab)) for d in docs for t in d),
            dtype=np.int64, count=int(lengths.sum()),
        )
        self._grow_vocab(len(vocab))
        offsets = np.repeat(np.arange(len(docs), dtype=np.int64), lengths)
        keys, tf = np.unique(term_ids * len(docs) + offsets, return_counts=True)
        tids, rows = np.divmod(keys, len(docs))
        rows += lo
        cuts = np.flatnonzero(np.diff(tids)) + 1
        starts = np.concatenate(([0], cuts))
        ends = np.concatenate((cuts, [tids.size]))
        for t, s, e in zip(tids[starts].tolist(), starts.tolist(), ends.tolist(), strict=True):
            self._append(t, rows[s:e], tf[s:e])

    def _append(self, t: int, rows: np.ndarray, tf: np.ndarray) -> None:
        size = self._post_size[t]
        need = size + rows.size
        if need > self._post_rows[t].size:
            cap = max(need, 2 * self._post_rows[t].size, _FIRST)
            grown_rows = np.empty(cap, dtype=np.int32)
            grown_tf = np.empty(cap, dtype=np.float64)
            grown_rows[:size] = self._post_rows[t][:size]
            grown_tf[:size] = self._post_tf[t][:size]
            self._post_rows[t], self._post_tf[t] = grown_rows, grown_tf
        self._post_rows[t][size:need] = rows
        self._post_tf[t][size:need] = tf
        self._post_size[t] = need

    def _grow_vocab(self, size: int) -> None:
        missing = size - len(self._post_size)
        if missing > 0:
            empty_rows, empty_tf = np.zeros(0, dtype=np.int32), np.zeros(0)
            self._post_rows.extend([empty_rows] * missing)
            self._post_tf.extend([empty_tf] * missing)
            self._post_size.extend([0] * missing)

    def _reserve(self, size: int) -> None:
        if size <= self._doclen.size:
            return
        cap = max(size, int(self._doclen.size * 1.5), 1024)
        doclen = np.zeros(cap)
        doclen[: self._n] = self._doclen[: self._n]
        fingerprint = np.zeros(cap, dtype=np.int64)
        fingerprint[: self._n] = self._fingerprint[: self._n]
        dead = np.zeros(cap, dtype=bool)
        dead[: self._n] = self._dead[: self._n]
        self._doclen, self._fingerprint, self._dead = doclen, fingerprint, dead


def _fingerprint(node: MemoryNode) -> int:
    return hash(indexed_text(node))
