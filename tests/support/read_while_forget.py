"""Reads racing forgets: the workload and the checks of the read-while-forget stress tests.

A persona gets memories whose texts are unique (the memory's number is in its text, in
Chinese) and built from a few English and Chinese words, so a reader can check what comes
back: every memory returned must carry the text its id was written with, and a lexical score
above 0 exactly when the memory holds one of the query's words. One writer forgets memories
one by one; readers retrieve, look up keywords and read memories by id meanwhile. A memory
whose forget returned before a read began must not come back from it.

`Ledger` keeps what was written and what was forgotten (and when); `check_documents` and
`check_nodes` check one read's results against it and return the problems found.
"""

from __future__ import annotations

import itertools
import random
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from langchain_genmem.core.tokens import tokens

__all__ = ["KEYWORDS", "QUERIES", "START", "Ledger", "check_documents", "check_nodes", "items",
           "run", "served_run"]

START = datetime(2024, 3, 1, 9, 0)
NOW = START + timedelta(days=30)
_PLACES = ["cafe", "library", "park", "咖啡馆", "图书馆", "公园", "harbor"]
_THINGS = ["physics", "pancake", "garden", "情人节", "量子", "钢琴", "river", "上海", "雨伞",
           "violin", "火车"]
_MOODS = ["quietly", "开心地", "slowly", "认真地", "happily"]
KEYWORDS = ["cafe", "图书馆", "physics", "量子", "harbor", "雨伞"]
QUERIES = ["cafe physics", "图书馆 量子", "park garden", "情人节 派对", "钢琴 river",
           "上海 火车", "harbor violin", "雨伞 pancake", "公园 开心地", "slowly 咖啡馆"]


def text_of(i: int) -> str:
    """The description of the i-th memory (from 0): unique, English and Chinese words."""
    return (f"{_PLACES[i % 7]} {_THINGS[i % 11]} {_MOODS[i % 5]} "
            f"第{i}号记忆")


def items(count: int) -> list[dict[str, Any]]:
    """``count`` memories to write in one batch, a minute apart, with two keywords each."""
    out = []
    for i in range(count):
        out.append({
            "type": "event", "description": text_of(i), "subject": "玛丽亚",
            "predicate": "记得", "object": f"第{i}号",
            "keywords": [_PLACES[i % 7], _THINGS[i % 11]],
            "poignancy": 1 + i % 9, "created": (START + timedelta(minutes=i)).isoformat(),
        })
    return out


def lexical_text(item: Mapping[str, Any]) -> str:
    """What lexical relevance searches of a memory (as ``indexed_text`` builds it)."""
    return "\n".join([item["description"], *item["keywords"], item["subject"],
                      item["predicate"], item["object"]])


@dataclass
class Ledger:
    """What was written and forgotten, shared by the writer and the readers.

    Attributes:
        written: ``{node_id: item}`` of every memory written.
        forgotten_at: ``{node_id: sequence number}`` of each forget that returned.
        problems: what the checks found, one line each.
        kinds: how many problems of each kind: ``"wrong"`` (a memory that should not have
            come back, or not as it was written) or ``"error"`` (a read or forget failed).
        returned: ids any retrieval returned (their access time moved).
        reads: reads made.
    """

    written: dict[str, dict[str, Any]] = field(default_factory=dict)
    forgotten_at: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)
    returned: set[str] = field(default_factory=set)
    reads: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    _sequence: Iterable[int] = field(default_factory=lambda: itertools.count(1))

    def forgotten(self, node_id: str) -> None:
        """Note that the forget of ``node_id`` returned."""
        with self.lock:
            self.forgotten_at[node_id] = next(self._sequence)  # type: ignore[call-overload]

    def gone_now(self) -> frozenset[str]:
        """The ids whose forget has returned, as a read begins."""
        with self.lock:
            return frozenset(self.forgotten_at)

    def problem(self, what: str, kind: str = "wrong") -> None:
        """Note a problem: a wrong memory, or (``kind="error"``) a failed call."""
        with self.lock:
            self.problems.append(what)
            self.kinds[kind] = self.kinds.get(kind, 0) + 1

    def read(self, returned: Iterable[str] = ()) -> None:
        with self.lock:
            self.reads += 1
            self.returned.update(returned)


def check_documents(ledger: Ledger, query: str, before: frozenset[str],
                    results: Sequence[tuple[str, str, float | None]],
                    *, accessed: bool = True) -> None:
    """Check one retrieval: ``(node_id, description, lexical score or None)`` per memory.

    Args:
        ledger: the ledger.
        query: the query the results answer.
        before: the ids forgotten before the read began.
        results: what came back.
        accessed: the read records access on what it returned (a retrieval).
    """
    words = set(tokens(query))
    for node_id, description, lexical in results:
        item = ledger.written.get(node_id)
        if item is None:
            ledger.problem(f"{query!r}: {node_id} was never written")
            continue
        if description != item["description"]:
            ledger.problem(f"{query!r}: {node_id} came back with the text of another memory "
                           f"({description!r}, written {item['description']!r})")
        if node_id in before:
            ledger.problem(f"{query!r}: {node_id} came back after its forget returned")
        if lexical is not None:
            holds = bool(words & set(tokens(lexical_text(item))))
            if holds != (lexical > 0):
                ledger.problem(f"{query!r}: {node_id} has lexical score {lexical} but "
                               f"{'holds' if holds else 'holds none of'} the query's words")
    ledger.read(node_id for node_id, _, _ in results if accessed)


def check_nodes(ledger: Ledger, keyword: str, before: frozenset[str],
                nodes: Sequence[tuple[str, str, Sequence[str]]]) -> None:
    """Check one keyword lookup: ``(node_id, description, keywords)`` per memory.

    Args:
        ledger: the ledger.
        keyword: the keyword looked up.
        before: the ids forgotten before the read began.
        nodes: what came back.
    """
    for node_id, description, keywords in nodes:
        item = ledger.written.get(node_id)
        if item is None or description != item["description"]:
            ledger.problem(f"keyword {keyword!r}: {node_id} came back with a text not its own")
        elif keyword.lower() not in [k.lower() for k in keywords]:
            ledger.problem(f"keyword {keyword!r}: {node_id} does not hold it")
        if node_id in before:
            ledger.problem(f"keyword {keyword!r}: {node_id} came back after its forget returned")
    ledger.read()


def run(forget_one: Callable[[str], None], readers: Sequence[Callable[[random.Random], None]],
        victims: Sequence[str], ledger: Ledger, *, min_reads: int = 30) -> None:
    """Forget ``victims`` one by one in a thread while each reader loops in its own thread.

    Each reader runs until the forgets are done and it read ``min_reads`` times; anything a
    reader or the forgetter raises is a problem.

    Args:
        forget_one: forgets one id.
        readers: one read each call (they check what they read).
        victims: the ids to forget, in order.
        ledger: the ledger.
        min_reads: reads each reader makes at least.
    """
    done = threading.Event()

    def forgetter() -> None:
        try:
            for node_id in victims:
                forget_one(node_id)
                ledger.forgotten(node_id)
        except Exception as e:  # noqa: BLE001 - reported as a problem of the run
            ledger.problem(f"forget failed: {type(e).__name__}: {e}", "error")
        finally:
            done.set()

    def reader(read: Callable[[random.Random], None], seed: int) -> None:
        rng = random.Random(seed)
        count = 0
        while not done.is_set() or count < min_reads:
            try:
                read(rng)
            except Exception as e:  # noqa: BLE001 - reported as a problem of the run
                ledger.problem(f"read failed: {type(e).__name__}: {e}", "error")
            count += 1

    threads = [threading.Thread(target=forgetter)]
    threads += [threading.Thread(target=reader, args=(r, i)) for i, r in enumerate(readers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not any(t.is_alive() for t in threads), "a reader or the forgetter hung"


def served_run(url: str, key: str, persona: str, *, memories: int, forgotten: int,
               in_database: bool, readers: int = 3, min_reads: int = 20) -> Ledger:
    """The workload over HTTP: seed a persona on a running ``genmem serve``, then forget.

    One client forgets ``forgotten`` memories one by one (``DELETE``); ``readers`` clients
    retrieve (hybrid relevance when the server ranks in process, so scores carry BM25; two
    of every three readers) and look up keywords (the third) meanwhile. Every status other
    than 200 on a read or a forget is an ``"error"`` problem.

    Args:
        url: the server's URL.
        key: an API key that reaches ``persona``.
        persona: the persona (it should be new).
        memories: how many memories to write first.
        forgotten: how many of them to forget.
        in_database: the server ranks in PostgreSQL (dense relevance only).
        readers: reading clients.
        min_reads: reads each reader makes at least.

    Returns:
        The ledger.
    """
    import httpx  # only the served runs need it

    def client() -> httpx.Client:
        return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"},
                            timeout=120)

    ledger = Ledger()
    sent = items(memories)
    with client() as http:
        for start in range(0, memories, 100):
            page = sent[start : start + 100]
            body = [{**item, "keywords": ",".join(item["keywords"])} for item in page]
            r = http.post("/memories/batch", json={"persona_name": persona, "memories": body})
            r.raise_for_status()
            for item, memory in zip(page, r.json()["memories"], strict=True):
                ledger.written[memory["node_id"]] = item
    victims = random.Random(7).sample(sorted(ledger.written), forgotten)
    hybrid = {} if in_database else {"relevance": "hybrid"}
    local = threading.local()

    def http() -> httpx.Client:
        if not hasattr(local, "client"):
            local.client = client()
        return local.client

    def forget_one(node_id: str) -> None:
        r = http().delete(f"/personas/{persona}/memories/{node_id}")
        if r.status_code != 200:
            msg = f"{r.status_code} {r.text[:200]}"
            raise RuntimeError(msg)

    def retrieve(rng: random.Random) -> None:
        query = rng.choice(QUERIES)
        before = ledger.gone_now()
        r = http().post("/retrieve", json={"persona_name": persona, "focal_text": query,
                                            "top_k": 10, **hybrid})
        if r.status_code != 200:
            ledger.problem(f"/retrieve {query!r}: {r.status_code} {r.text[:200]}", "error")
            return
        check_documents(ledger, query, before, [
            (n["node_id"], n["description"], None if in_database else n["bm25"])
            for n in r.json()["retrieved_nodes"]])

    def look_up(rng: random.Random) -> None:
        keyword = rng.choice(KEYWORDS)
        before = ledger.gone_now()
        r = http().post("/keyword-retrieve", json={"persona_name": persona, "subject": keyword,
                                                    "limit": 100})
        if r.status_code != 200:
            ledger.problem(f"/keyword-retrieve {keyword!r}: {r.status_code} {r.text[:200]}",
                           "error")
            return
        check_nodes(ledger, keyword, before, [(m["node_id"], m["description"], m["keywords"])
                                              for m in r.json()["events"]])

    work = [look_up if i % 3 == 2 else retrieve for i in range(readers)]
    run(forget_one, work, victims, ledger, min_reads=min_reads)
    return ledger
