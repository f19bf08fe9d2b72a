"""Per-query latency of GenerativeAgentsRetriever.invoke against named baselines.

For each size N (synthetic memories: 384-d float32 unit vectors, poignancy 1-10, created and
last accessed over 30 days in 10-second steps, 90% events, 9% thoughts, 1% chats, 3% of events
with an "idle" embedding_key), in one run:

- ``invoke``: ``GenerativeAgentsRetriever(k=30).invoke`` on a MemoryStream in an embedded
  (persistent) Chroma folder, built with ``add_many``; recency modes "hours" and "reverie";
  and ``relevance="hybrid"`` (dense + BM25; each description is "memory i" and 6 words of
  its topic's 40 and 2 of 500 common ones; each query holds "memory", a term of every memory
  (the worst case: a persona's name), one common word and 3 words of its topic), its lexical
  index built by the untimed first call;
- ``scoring``: the scoring step alone, the calls the retriever makes (``scoring.cosine`` over
  every row, ``recency``, ``rank``) on the same float32 matrix;
- ``V@q``: the bare numpy matrix-vector product on that matrix, the floor of exact scoring;
- ``python``: the original algorithm restated in pure Python (dicts, loops and a pure-Python
  ``cos_sim``, as the PostgreSQL port's code node, with the original's candidate order); above
  ``--python-max`` memories it runs on the first ``--python-max`` and is extrapolated linearly;
- ``TW``: LangChain's ``TimeWeightedVectorStoreRetriever`` (k=30, decay_rate 0.01, importance
  = (poignancy-1)/9 as an ``other_score_keys`` key) over a langchain-chroma ``Chroma`` (cosine
  space) holding the same candidate memories, with its recall@30 against our exact top 30
  ("hours" mode) and against the exhaustive ranking of its own formula.

Query i is embedded as vector i of a precomputed table (a memory vector plus noise), so no
model time hides the retriever's. Every latency is the median over ``--queries`` queries
times ``--repeats`` rounds.

Usage:
    python benchmarks/bench_retrieval.py [--sizes 10000,100000,1000000] [--queries 10]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
from busy_core import busy_core, load_average
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream
from langchain_genmem.backends.chroma import DEFAULT_CONFIGURATION
from langchain_genmem.numerics import quantized, scoring

K = 30
DECAY = 0.99
STEP = 10  # seconds between simulation steps
SPAN_DAYS = 30
CHUNK = 50_000  # memories per add_many call while building
TOPICS = 200
TOPIC_WORDS = 40  # words of a topic (6 in each description of it)
COMMON_WORDS = 500  # words of any topic (2 in each description)


def log(*parts: object) -> None:
    print(*parts, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- data


@dataclass
class Data:
    """N synthetic memories (row i is node_{i+1}) and the query vectors."""

    vectors: np.ndarray  # (n, dim) float32, unit rows
    queries: np.ndarray  # (q, dim) float32
    types: list[str]
    keys: list[str]
    poignancy: np.ndarray  # int
    created: list[datetime]  # naive local times, oldest first
    now: datetime
    texts: list[str] = field(default_factory=list)  # descriptions (words for BM25)
    query_words: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        return self.vectors.shape[0]

    @property
    def candidates(self) -> np.ndarray:
        """Rows the original scores: events and thoughts without an "idle" key."""
        return np.array([i for i, (t, k) in enumerate(zip(self.types, self.keys, strict=False))
                         if t != "chat" and "idle" not in k])


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix


def make_data(n: int, dim: int, n_queries: int, seed: int) -> Data:
    """Memories in TOPICS topics: a topic's centroid plus as much noise (cosine about 0.7 to
    the centroid, 0.5 between two memories of a topic, 0 across topics); a query is a topic's
    centroid plus noise, so about n / TOPICS memories are relevant to it."""
    rng = np.random.default_rng(seed)
    centroids = unit_rows(rng.standard_normal((TOPICS, dim), dtype=np.float32))
    topic = rng.integers(0, TOPICS, n)
    vectors = rng.standard_normal((n, dim), dtype=np.float32)
    for block, of in zip(chunks(vectors), chunks(topic), strict=False):  # in blocks, in place
        unit_rows(block)
        block += centroids[of]
        unit_rows(block)
    noise = unit_rows(rng.standard_normal((n_queries, dim), dtype=np.float32))
    now = datetime.now().replace(microsecond=0)
    steps = np.sort(rng.integers(0, SPAN_DAYS * 86400 // STEP, n))[::-1]
    created = [now - timedelta(seconds=int(s) * STEP) for s in steps]
    types = rng.choice(["event", "thought", "chat"], n, p=[0.90, 0.09, 0.01]).tolist()
    idle = rng.random(n) < 0.03
    keys = [f"m{i} is idle" if idle[i] and t == "event" else f"m{i}" for i, t in enumerate(types)]
    q_topic = rng.integers(0, TOPICS, n_queries)
    queries = unit_rows(centroids[q_topic] + noise)
    own = rng.integers(0, TOPIC_WORDS, (n, 6))
    common = rng.integers(0, COMMON_WORDS, (n, 2))
    texts = [f"memory {i} " + " ".join(f"topic{topic[i]}word{w}" for w in own[i]) + " "
             + " ".join(f"common{w}" for w in common[i]) for i in range(n)]
    words = [f"memory common{rng.integers(0, COMMON_WORDS)} "
             + " ".join(f"topic{t}word{w}" for w in rng.integers(0, TOPIC_WORDS, 3))
             for t in q_topic]
    return Data(vectors, queries, types, keys, rng.integers(1, 11, n), created, now,
                texts, words)


def chunks(matrix: np.ndarray, size: int = CHUNK) -> list[np.ndarray]:
    """Row blocks, so float64 copies of a large float32 matrix stay small."""
    return [matrix[lo : lo + size] for lo in range(0, matrix.shape[0], size)]


class VectorTable(Embeddings):
    """Memory key i (``m{i}``...) is vector i, query ``q{j}`` is query vector j."""

    def __init__(self, data: Data) -> None:
        self.data = data

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        rows = [int(t.split()[0][1:]) for t in texts]
        return self.data.vectors[rows].tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.data.queries[int(text.split()[0][1:])].tolist()


def query_texts(data: Data) -> list[str]:
    return [f"q{j} {data.query_words[j]}" for j in range(data.queries.shape[0])]


# ---------------------------------------------------------------- timing


def median_ms(
    contenders: dict[str, Callable[[int], object]], n_inputs: int, repeats: int
) -> dict[str, float]:
    """Median ms per call of each contender over inputs 0..n_inputs-1 and ``repeats`` rounds.

    Calls are interleaved (round, input, contender), so a burst of load from other processes
    hits every contender alike; each contender is called once before timing starts.
    """
    for fn in contenders.values():
        fn(0)
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for i in range(n_inputs):
            for name, fn in contenders.items():
                t = time.perf_counter()
                fn(i)
                times[name].append(time.perf_counter() - t)
    return {name: 1e3 * statistics.median(ts) for name, ts in times.items()}


# ---------------------------------------------------------------- ours


def build_stream(data: Data, folder: str) -> tuple[MemoryStream, float]:
    stream = MemoryStream("bench", embeddings=VectorTable(data), path=folder,
                          clock=lambda: data.now)
    t = time.perf_counter()
    for lo in range(0, data.n, CHUNK):
        stream.add_many([
            {"type": data.types[i], "description": data.texts[i], "embedding_key": data.keys[i],
             "poignancy": int(data.poignancy[i]), "created": data.created[i],
             "embedding": data.vectors[i]}
            for i in range(lo, min(lo + CHUNK, data.n))
        ])
        log(f"  stream: {min(lo + CHUNK, data.n)}/{data.n} memories")
    return stream, time.perf_counter() - t


@dataclass
class Columns:
    """What the retriever's scoring step reads, as the stream's cache holds it."""

    vectors: np.ndarray
    norms: np.ndarray
    inv_norms: np.ndarray
    rows: np.ndarray
    last_accessed: np.ndarray
    type_code: np.ndarray
    poignancy: np.ndarray
    now: float
    codes: np.ndarray | None = None
    unit_scale: np.ndarray | None = None
    max_relative_residual: float = 0.0
    static: tuple[np.ndarray, ...] = ()

    def gather_static(self) -> None:
        """The candidates' columns that only change when memories are added, and their
        normalised importance: NodeCache.candidates() keeps them between retrievals."""
        rows = self.rows
        poignancy = self.poignancy[rows]
        self.static = (self.type_code[rows], rows + 1, poignancy, scoring.minmax(poignancy))

    def quantize(self) -> None:
        """int8 codes of every row, as NodeCache.append makes them (in blocks)."""
        n = self.vectors.shape[0]
        self.codes = np.empty(self.vectors.shape, dtype=np.int8)
        self.unit_scale = np.empty(n)
        for lo in range(0, n, 8192):
            q = quantized.quantize(self.vectors[lo : lo + 8192])
            inv = self.inv_norms[lo : lo + 8192]
            self.codes[lo : lo + 8192] = q.codes
            self.unit_scale[lo : lo + 8192] = q.scale * inv
            self.max_relative_residual = max(self.max_relative_residual,
                                             float((q.residual * inv).max()))

    @classmethod
    def of(cls, data: Data) -> Columns:
        norms = np.concatenate([np.linalg.norm(v.astype(np.float64), axis=1)
                                for v in chunks(data.vectors)])
        epoch = np.array([c.timestamp() for c in data.created])
        code = {"event": 0, "thought": 1, "chat": 2}
        col = cls(data.vectors, norms, scoring.inverse_norms(norms), data.candidates, epoch,
                  np.array([code[t] for t in data.types], dtype=np.int8),
                  data.poignancy.astype(np.float64), data.now.timestamp())
        col.quantize()
        col.gather_static()
        return col


STEPS = ("scan", "gathers", "recency", "rank")


def scoring_step(col: Columns, query: np.ndarray, mode: str, first_pass: str = "float32",
                 parts: dict[str, list[float]] | None = None) -> scoring.Ranking:
    """The retriever's scoring calls (retrieve_with_report): the first pass over every row,
    the per-query gathers, then recency and rank; the static columns come from the cache.
    ``parts`` collects the seconds of each of :data:`STEPS`."""
    rows = col.rows
    t0 = time.perf_counter()
    approx, error = quantized.approximate_cosine(col, col.vectors.shape[0], query,
                                                 int8=first_pass == "int8")
    t1 = time.perf_counter()
    type_code, node_count, poignancy, importance = col.static
    cands = scoring.Candidates(
        last_accessed=col.last_accessed[rows], type_code=type_code,
        node_count=node_count, poignancy=poignancy, cosine=approx[rows],
    )

    def exact(idx: np.ndarray) -> np.ndarray:
        return scoring.exact_cosine(col.vectors[rows[idx]], col.norms[rows[idx]], query)

    t2 = time.perf_counter()
    raw, recency_error, exact_recency = scoring.approximate_recency(
        cands, mode, DECAY, col.now)  # type: ignore[arg-type]
    t3 = time.perf_counter()
    ranked = scoring.rank(cands, raw, scoring.Weights(), K, exact, error, importance,
                          overwrite=True, recency_error=recency_error,
                          exact_recency=exact_recency)
    if parts is not None:
        for name, seconds in zip(STEPS, (t1 - t0, t2 - t1, t3 - t2, time.perf_counter() - t3),
                                 strict=True):
            parts.setdefault(name, []).append(seconds)
    return ranked


def one_thread_matvec(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``vectors @ query`` with BLAS held to one thread (threadpoolctl, when installed)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return vectors @ query
    with threadpool_limits(1, user_api="blas"):
        return vectors @ query


def read_bandwidth(matrix: np.ndarray, repeats: int = 5) -> float:
    """Bytes per second numpy sums a large array at (the best of ``repeats``): the memory
    bandwidth one core gets, the floor of any scan of that many bytes."""
    words = matrix.reshape(-1).view(np.int64)
    best = math.inf
    for _ in range(repeats):
        t = time.perf_counter()
        words.sum()
        best = min(best, time.perf_counter() - t)
    return matrix.nbytes / best


def float64_top(col: Columns, query: np.ndarray) -> tuple[list[int], np.ndarray]:
    """Brute force: every candidate's cosine in float64, scored, the top K ("hours")."""
    rows = col.rows
    cos = np.concatenate([scoring.exact_cosine(v, n, query) for v, n in
                          zip(chunks(col.vectors[rows]), chunks(col.norms[rows]), strict=True)])
    cands = scoring.Candidates(col.last_accessed[rows], col.type_code[rows], rows + 1,
                               col.poignancy[rows], cos)
    scored = scoring.score(cands, scoring.recency(cands, "hours", DECAY, col.now),
                           scoring.Weights())
    best = scoring.top_k(scored.score, cands, K)
    return best.tolist(), scored.score[best]


def same_as_float64(col: Columns, queries: Sequence[np.ndarray]) -> bool:
    """Whether the int8 first pass gives float64's ids, order and scores (to 1e-9)."""
    for q in queries:
        ours = scoring_step(col, q, "hours", "int8")
        ids, scores = float64_top(col, q)
        if ours.best.tolist() != ids:
            return False
        if not np.allclose(ours.scored.score[ours.best], scores, rtol=0, atol=1e-9):
            return False
    return True


# ---------------------------------------------------------------- the original, in pure Python


def cos_sim(a: list[float], b: list[float]) -> float:
    if not a or not b or len(a) != len(b):
        return 0.0
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(x * x for x in b))
    if na < 1e-8 or nb < 1e-8:
        return 0.0
    return dot / (na * nb)


def normalize(d: dict[str, float]) -> dict[str, float]:
    vmin, vmax = min(d.values()), max(d.values())
    span = vmax - vmin
    if span == 0:
        return {key: 0.5 for key in d}
    return {key: (v - vmin) * 1.0 / span + 0.0 for key, v in d.items()}


def python_rows(data: Data, m: int) -> list[dict]:
    return [{"id": f"node_{i + 1}", "type": data.types[i], "embedding_key": data.keys[i],
             "poignancy": int(data.poignancy[i]), "last_accessed": data.created[i].timestamp(),
             "embedding": data.vectors[i].tolist()} for i in range(m)]


def python_retrieve(rows: list[dict], focal: list[float], now: float, top_k: int = K) -> list[str]:
    """new_retrieve for one focal point: rows oldest first, as the stream was written."""
    events = [r for r in reversed(rows) if r["type"] == "event"]
    thoughts = [r for r in reversed(rows) if r["type"] == "thought"]
    nodes = [r for r in events + thoughts if "idle" not in r["embedding_key"]]
    nodes = sorted(nodes, key=lambda r: r["last_accessed"])
    ids = [r["id"] for r in nodes]
    recency = normalize({ids[i]: DECAY ** (i + 1) for i in range(len(ids))})
    importance = normalize({r["id"]: float(r["poignancy"]) for r in nodes})
    relevance = normalize({r["id"]: cos_sim(r["embedding"], focal) for r in nodes})
    gw = [0.5, 3.0, 2.0]
    master = {i: 1.0 * recency[i] * gw[0] + 1.0 * relevance[i] * gw[1] + 1.0 * importance[i] * gw[2]
              for i in ids}
    best = sorted(master, key=lambda i: master[i], reverse=True)[:top_k]
    by_id = {r["id"]: r for r in nodes}
    for i in best:
        by_id[i]["last_accessed"] = now
    return best


# ---------------------------------------------------------------- LangChain's TimeWeighted


def build_time_weighted(data: Data, folder: str, hnsw: str):
    import chromadb
    from chromadb.config import Settings
    from langchain_chroma import Chroma
    from langchain_classic.retrievers import TimeWeightedVectorStoreRetriever

    config: dict = {"space": "cosine"}
    if hnsw == "light":
        config.update(DEFAULT_CONFIGURATION["hnsw"])
    client = chromadb.PersistentClient(path=folder, settings=Settings(anonymized_telemetry=False))
    store = Chroma("time-weighted", embedding_function=VectorTable(data), client=client,
                   collection_configuration={"hnsw": config})
    tw = TimeWeightedVectorStoreRetriever(vectorstore=store, decay_rate=1 - DECAY, k=K,
                                          other_score_keys=["importance"])
    rows = data.candidates
    t = time.perf_counter()
    for lo in range(0, rows.size, 5000):
        tw.add_documents([
            Document(page_content=data.keys[i], metadata={
                "node_id": f"node_{i + 1}", "importance": (float(data.poignancy[i]) - 1) / 9,
                "last_accessed_at": data.created[i].timestamp(),
                "created_at": data.created[i].timestamp()})
            for i in rows[lo : lo + 5000].tolist()
        ])
        if (lo // 5000) % 20 == 19 or lo + 5000 >= rows.size:
            log(f"  TimeWeighted: {min(lo + 5000, rows.size)}/{rows.size} memories")
    return tw, time.perf_counter() - t


def time_weighted_ids(tw, query: str) -> list[str]:
    """TW's top k, with its in-memory access times put back (so every query sees fresh data)."""
    docs = tw.invoke(query)
    for d in docs:
        d.metadata["last_accessed_at"] = d.metadata["created_at"]
    return [d.metadata["node_id"] for d in docs]


def time_weighted_exhaustive(data: Data, col: Columns, queries: np.ndarray) -> list[list[str]]:
    """TW's own formula (recency + importance + cosine) over every candidate, exactly."""
    rows = col.rows
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    cos = np.vstack([v.astype(np.float64) @ q.T for v in chunks(data.vectors)])[rows]
    cos *= col.inv_norms[rows, None]
    base = DECAY ** ((col.now - col.last_accessed[rows]) / 3600) + (col.poignancy[rows] - 1) / 9
    return [[f"node_{rows[i] + 1}" for i in np.argsort(-(base + c), kind="stable")[:K]]
            for c in cos.T]


def recall(truth: Sequence[str], got: Sequence[str]) -> float:
    return len(set(truth) & set(got)) / len(truth)


# ---------------------------------------------------------------- one size


@dataclass
class Result:
    n: int
    data_s: float = 0.0
    build_s: float = math.nan
    invoke_ms: float = math.nan
    invoke_busy_ms: float = math.nan
    invoke_reverie_ms: float = math.nan
    invoke_hybrid_ms: float = math.nan
    scoring_ms: float = 0.0
    topk_ms: float = 0.0
    topk_busy_ms: float = math.nan
    matvec_ms: float = 0.0
    matvec_busy_ms: float = math.nan
    steps: dict[str, float] = field(default_factory=dict)  # the exact top k's, see STEPS
    steps_busy: dict[str, float] = field(default_factory=dict)
    bandwidth: float = math.nan  # bytes/s numpy reads the int8 codes at
    scan_bytes: int = 0
    matvec_bytes: int = 0
    exact: bool | None = None
    python_ms: float = math.nan
    python_note: str = ""
    tw_ms: float = math.nan
    tw_build_s: float = math.nan
    recall_ours: float = math.nan
    recall_own: float = math.nan
    agree: bool | None = None
    notes: list[str] = field(default_factory=list)


def run_size(n: int, args: argparse.Namespace) -> Result:
    res = Result(n)
    started = time.perf_counter()
    data = make_data(n, args.dim, args.queries, args.seed)
    col = Columns.of(data)
    res.data_s = time.perf_counter() - started
    qvec = [data.queries[j].astype(np.float64) for j in range(data.queries.shape[0])]
    log(f"[{n}] synthetic data and int8 codes in {res.data_s:.1f} s; checking exactness")
    res.exact = same_as_float64(col, qvec[: args.exact_queries])
    log(f"[{n}] timing the scoring step")
    q32 = [q.astype(np.float32) for q in qvec]
    parts: dict[str, list[float]] = {}
    ms = median_ms({
        "matvec": lambda i: data.vectors @ q32[i],
        "scoring": lambda i: scoring_step(col, qvec[i], "hours"),
        "topk": lambda i: scoring_step(col, qvec[i], "hours", "int8", parts),
    }, len(qvec), args.repeats)
    res.matvec_ms, res.scoring_ms, res.topk_ms = ms["matvec"], ms["scoring"], ms["topk"]
    res.steps = {name: 1e3 * statistics.median(ts) for name, ts in parts.items()}
    res.bandwidth = read_bandwidth(col.codes)  # type: ignore[arg-type]
    res.scan_bytes = col.codes.nbytes  # type: ignore[union-attr]
    res.matvec_bytes = data.vectors.nbytes
    if args.busy_core:
        with busy_core() as pid:
            log(f"[{n}] timing the exact top-k with one core busy (pid {pid})")
            time.sleep(0.5)
            busy_parts: dict[str, list[float]] = {}
            busy = median_ms({  # BLAS on one thread: two would wait for the busy core
                "matvec": lambda i: one_thread_matvec(data.vectors, q32[i]),
                "topk": lambda i: scoring_step(col, qvec[i], "hours", "int8", busy_parts),
            }, len(qvec), args.repeats)
            res.topk_busy_ms, res.matvec_busy_ms = busy["topk"], busy["matvec"]
            res.steps_busy = {name: 1e3 * statistics.median(ts)
                              for name, ts in busy_parts.items()}
    if n <= args.stream_max:
        run_stream(data, col, res, args)
    return res


def run_stream(data: Data, col: Columns, res: Result, args: argparse.Namespace) -> None:
    n = res.n
    queries = query_texts(data)
    qvec = [data.queries[j].astype(np.float64) for j in range(len(queries))]
    work = tempfile.mkdtemp(prefix="bench-retrieval-")
    try:
        log(f"[{n}] building the stream with add_many")
        stream, res.build_s = build_stream(data, os.path.join(work, "stream"))
        exact_top = GenerativeAgentsRetriever(stream=stream, k=K, update_access=False)
        reverie_top = exact_top.model_copy(update={"recency_mode": "reverie"})

        m = min(n, args.python_max)
        rows = python_rows(data, m)
        if m == n:  # same algorithm, same data: the pure-Python top 30 must be ours
            fresh = [dict(r) for r in rows]
            res.agree = python_retrieve(fresh, qvec[0].tolist(), 0.0) == [
                d.metadata["node_id"] for d in reverie_top.invoke(queries[0])]

        tw = None
        if n <= args.tw_max:
            log(f"[{n}] building TimeWeighted's Chroma ({args.tw_hnsw} HNSW)")
            tw, res.tw_build_s = build_time_weighted(data, os.path.join(work, "tw"), args.tw_hnsw)
            ours = [[d.metadata["node_id"] for d in exact_top.invoke(q)] for q in queries]
            theirs = [time_weighted_ids(tw, q) for q in queries]
            own = time_weighted_exhaustive(data, col, np.array(qvec))
            res.recall_ours = statistics.mean(map(recall, ours, theirs))
            res.recall_own = statistics.mean(map(recall, own, theirs))

        log(f"[{n}] timing (load average {load_average()})")
        retriever = GenerativeAgentsRetriever(stream=stream, k=K)
        reverie = retriever.model_copy(update={"recency_mode": "reverie"})
        hybrid = retriever.model_copy(update={"relevance": "hybrid"})
        contenders = {
            "invoke": lambda i: retriever.invoke(queries[i]),
            "reverie": lambda i: reverie.invoke(queries[i]),
            "hybrid": lambda i: hybrid.invoke(queries[i]),  # 1st (untimed) call builds BM25
        }
        if tw is not None:
            contenders["tw"] = lambda i: tw.invoke(queries[i])
        ms = median_ms(contenders, len(queries), args.repeats)
        res.invoke_ms, res.invoke_reverie_ms = ms["invoke"], ms["reverie"]
        res.invoke_hybrid_ms = ms["hybrid"]
        res.tw_ms = ms.get("tw", math.nan)
        if args.busy_core:
            with busy_core() as pid:
                log(f"[{n}] timing with one core busy (pid {pid})")
                time.sleep(0.5)
                busy = median_ms({"invoke": contenders["invoke"]}, len(queries), args.repeats)
            res.invoke_busy_ms = busy["invoke"]
        stream.close()

        log(f"[{n}] timing the pure-Python original on {m} memories")
        few = [q.tolist() for q in qvec[: args.python_queries]]
        now = data.now.timestamp()
        start = time.perf_counter()
        for q in few:
            python_retrieve(rows, q, now)
        res.python_ms = 1e3 * (time.perf_counter() - start) / len(few) * n / m
        res.python_note = "" if m == n else f"extrapolated x{n / m:g} from {m}"
    finally:
        from chromadb.api.client import SharedSystemClient

        SharedSystemClient.clear_system_cache()  # the embedded clients of this size
        gc.collect()
        shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------- report


def cpu_model() -> str:
    """The CPU's model name and the vector extensions the scan can use (Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            info = f.read()
    except OSError:
        return platform.processor() or "unknown"
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines()
                  if line.startswith("model name")), "unknown")
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines()
                  if line.startswith("flags")), [])
    wanted = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni")
    return f"{model} ({', '.join(f for f in wanted if f in flags) or 'no AVX2'})"


def simsimd_kernels() -> str:
    try:
        import simsimd
    except ImportError:
        return "simsimd not installed"
    return ", ".join(k for k, on in simsimd.get_capabilities().items() if on) or "none"


def machine() -> list[str]:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        blas = "threadpoolctl not installed"
    else:
        blas = "; ".join(f"{i.get('internal_api')} {i.get('version')} "
                         f"kernel={i.get('architecture')} threads={i.get('num_threads')}"
                         for i in threadpool_info() if i.get("user_api") == "blas")
    env = {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
                                      "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")
           if k in os.environ}
    return [
        f"CPU: {cpu_model()}",
        f"python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs, "
        f"{platform.machine()}, simsimd kernels: {simsimd_kernels()}",
        f"BLAS: {blas}",
        f"environment: {env or 'no OPENBLAS_/OMP_ variables set'}",
    ]


def fmt(x: float, spec: str = ".2f") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def ratio(a: float, b: float) -> float:
    return a / b if b and not math.isnan(a) and not math.isnan(b) else math.nan


def yes_no(flag: bool | None) -> str:
    return "-" if flag is None else ("yes" if flag else "NO")


def report(results: list[Result], args: argparse.Namespace) -> None:
    print("# bench_retrieval")
    for line in machine():
        print(f"# {line}")
    print(f"# k={K}, dim={args.dim}, {args.queries} queries x {args.repeats} rounds, medians; "
          f"pure Python on {args.python_queries} queries; TimeWeighted HNSW: {args.tw_hnsw}; "
          f"load average {load_average()} at the end")
    print()
    head = ("memories", "build s", "invoke ms", "reverie ms", "hybrid ms", "scoring ms",
            "V@q ms", "python ms", "TW ms", "TW build s")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in results:
        cells = (str(r.n), fmt(r.build_s, ".1f"), fmt(r.invoke_ms), fmt(r.invoke_reverie_ms),
                 fmt(r.invoke_hybrid_ms), fmt(r.scoring_ms), fmt(r.matvec_ms),
                 fmt(r.python_ms, ".0f"), fmt(r.tw_ms), fmt(r.tw_build_s, ".1f"))
        print("| " + " | ".join(cells) + " |")
    print()
    head = ("memories", "python/invoke", "python/reverie", "scoring/V@q", "invoke/TW",
            "TW recall@30 vs ours", "TW recall@30 vs own formula", "python agrees")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in results:
        cells = (str(r.n), fmt(ratio(r.python_ms, r.invoke_ms), ".0f") + "x",
                 fmt(ratio(r.python_ms, r.invoke_reverie_ms), ".0f") + "x",
                 fmt(ratio(r.scoring_ms, r.matvec_ms)) + "x",
                 fmt(ratio(r.invoke_ms, r.tw_ms)) + "x", fmt(r.recall_ours),
                 fmt(r.recall_own), yes_no(r.agree))
        print("| " + " | ".join(cells) + " |")
    print()
    print_steps(results, args)
    print()
    print_targets(results, args)
    notes = [f"{r.n}: python {r.python_note}" for r in results if r.python_note]
    notes += [f"{r.n}: TimeWeighted skipped (--tw-max {args.tw_max})"
              for r in results if r.n > args.tw_max and r.n <= args.stream_max]
    notes += [f"{r.n}: no Chroma stream (--stream-max {args.stream_max}): scoring step only; "
              f"synthetic data and int8 codes built in {r.data_s:.0f} s"
              for r in results if r.n > args.stream_max]
    print()
    print("targets at 100000: python/invoke >= 300x, scoring/V@q <= 2x")
    for note in notes:
        print(f"note {note}")


def print_steps(results: list[Result], args: argparse.Namespace) -> None:
    """The exact top k's steps (medians of each over the timed calls) beside the float32
    mat-vec of the same vectors, timed interleaved with it, and the scan's bandwidth floor."""
    head = ("memories", "load", *(f"{s} ms" for s in STEPS), "exact top 30 ms", "V@q ms",
            "exact top 30 / float32 mat-vec (same run)")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in results:
        rows = [("quiet", r.steps, r.topk_ms, r.matvec_ms)]
        if args.busy_core:
            rows.append(("one core busy (V@q on one BLAS thread)", r.steps_busy,
                         r.topk_busy_ms, r.matvec_busy_ms))
        for load, steps, topk, matvec in rows:
            cells = (str(r.n), load, *(fmt(steps.get(s, math.nan)) for s in STEPS), fmt(topk),
                     fmt(matvec), fmt(ratio(topk, matvec)) + "x")
            print("| " + " | ".join(cells) + " |")
    print()
    for r in results:
        if r.bandwidth > 0:
            print(f"floor at {r.n}: numpy reads {r.bandwidth / 1e9:.1f} GB/s on one core; "
                  f"the int8 scan's {r.scan_bytes / r.n:.0f} B/row x {r.n} = "
                  f"{1e3 * r.scan_bytes / r.bandwidth:.1f} ms, the float32 mat-vec's "
                  f"{r.matvec_bytes / r.n:.0f} B/row = "
                  f"{1e3 * r.matvec_bytes / r.bandwidth:.1f} ms: scan floor / mat-vec floor "
                  f"= {r.scan_bytes / r.matvec_bytes:.2f}x")


def target_row(name: str, n: int, value: float, bound: float, unit: str = "x") -> str:
    ok = "-" if math.isnan(value) else ("pass" if value <= bound else "FAIL")
    return f"| {name} | {n} | {fmt(value)}{unit} | <= {bound:g}{unit} | {ok} |"


def print_targets(results: list[Result], args: argparse.Namespace) -> None:
    """The retrieval speed targets, each with its figure and pass/fail."""
    print("| target | memories | measured | target | pass |")
    print("|---|---|---|---|---|")
    for r in results:
        if args.busy_core and not math.isnan(r.invoke_ms):
            print(target_row("invoke p50, one core busy / quiet", r.n,
                             ratio(r.invoke_busy_ms, r.invoke_ms), 1.3))
        if not math.isnan(r.invoke_reverie_ms):
            print(target_row("reverie p50 / hours p50", r.n,
                             ratio(r.invoke_reverie_ms, r.invoke_ms), 1.25))
        if not math.isnan(r.invoke_hybrid_ms):
            print(target_row("hybrid p50 / dense p50", r.n,
                             ratio(r.invoke_hybrid_ms, r.invoke_ms), 2.0))
        print(target_row("exact top-30 p50 (int8 first pass)", r.n, r.topk_ms, 30.0, " ms"))
        print(target_row("exact top-30 / float32 mat-vec (same run)", r.n,
                         ratio(r.topk_ms, r.matvec_ms), 0.3))
        if args.busy_core:
            print(target_row("exact top-30 / float32 mat-vec (same run), one core busy", r.n,
                             ratio(r.topk_busy_ms, r.matvec_busy_ms), 0.3))
        if args.busy_core:
            print(target_row("exact top-30 p50, one core busy", r.n, r.topk_busy_ms, 30.0,
                             " ms"))
        flag = "pass" if r.exact else "FAIL"
        print(f"| top-30 identical to float64 (ids, order, scores to 1e-9) | {r.n} | "
              f"{yes_no(r.exact)} on {args.exact_queries} queries | yes | {flag} |")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,20000,100000,1000000",
                        help="comma-separated memory counts (default: 10000,20000,100000,"
                        "1000000)")
    parser.add_argument("--queries", type=int, default=10, help="queries per size (default 10)")
    parser.add_argument("--repeats", type=int, default=5,
                        help="rounds over the queries (default 5)")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--python-queries", type=int, default=2,
                        help="queries timed for the pure-Python original (default 2)")
    parser.add_argument("--python-max", type=int, default=100_000,
                        help="memories the pure-Python original runs on; more is extrapolated")
    parser.add_argument("--tw-hnsw", choices=["light", "default"], default="light",
                        help="TimeWeighted's Chroma HNSW: the stream's light build settings "
                        "(default) or Chroma's defaults (builds about 3x slower)")
    parser.add_argument("--tw-max", type=int, default=100_000,
                        help="largest size with the TimeWeighted baseline (default 100000: its "
                        "Chroma build at 1M adds about 15 minutes); 0 skips it")
    parser.add_argument("--stream-max", type=int, default=100_000,
                        help="largest size built as a Chroma-backed stream (invoke, reverie, "
                        "python, TW); larger sizes time the scoring step on synthetic columns")
    parser.add_argument("--busy-core", action="store_true",
                        help="also time invoke with a CPU-bound child process on one core")
    parser.add_argument("--exact-queries", type=int, default=3,
                        help="queries checked against float64 brute force (default 3)")
    parser.add_argument("--blas-threads", type=int, default=None,
                        help="limit BLAS threads (threadpoolctl); default: leave as is")
    args = parser.parse_args(argv)
    args.queries = max(1, args.queries)
    args.python_queries = max(1, min(args.python_queries, args.queries))
    args.exact_queries = max(1, min(args.exact_queries, args.queries))
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        if args.blas_threads:
            from threadpoolctl import threadpool_limits

            stack.enter_context(threadpool_limits(args.blas_threads, user_api="blas"))
        results = [run_size(int(s), args) for s in args.sizes.split(",")]
        report(results, args)
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
