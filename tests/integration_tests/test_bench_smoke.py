"""The benchmark scripts run end to end at a tiny size and print their tables.

Only the shape of the output is checked, never a timing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.benchmarks import run_benchmark
from tests.support.model_file import q8_0_model
from tests.support.processes import pid_is_running


@pytest.mark.slow
def test_bench_retrieval_prints_its_tables() -> None:
    out = run_benchmark("bench_retrieval.py", "--sizes", "2000,5000", "--queries", "3",
                        "--repeats", "1", "--stream-max", "2000", "--busy-core")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert any(line.startswith("# BLAS: ") for line in lines)
    latency = next(i for i, line in enumerate(lines) if line.startswith("| memories | build s"))
    assert "invoke ms" in lines[latency] and "python ms" in lines[latency]
    assert "TW ms" in lines[latency] and "V@q ms" in lines[latency]
    assert "hybrid ms" in lines[latency]
    assert lines[latency + 2].startswith("| 2000 |")
    ratios = next(i for i, line in enumerate(lines) if line.startswith("| memories | python/"))
    row = [cell.strip() for cell in lines[ratios + 2].strip("|").split("|")]
    assert row[0] == "2000"
    assert all(cell.endswith("x") for cell in row[1:5])  # every ratio was computed
    assert row[-1] == "yes"  # the pure-Python original picked our top 30
    targets = lines.index("| target | memories | measured | target | pass |")
    rows = [line for line in lines[targets + 2:] if line.startswith("| ")]
    names = {line.split("|")[1].strip() for line in rows}
    assert names == {"invoke p50, one core busy / quiet", "reverie p50 / hours p50",
                     "hybrid p50 / dense p50",
                     "exact top-30 p50 (int8 first pass)", "exact top-30 p50, one core busy",
                     "exact top-30 / float32 mat-vec (same run)",
                     "exact top-30 / float32 mat-vec (same run), one core busy",
                     "top-30 identical to float64 (ids, order, scores to 1e-9)"}
    assert all(line.split("|")[-2].strip() in {"pass", "FAIL"} for line in rows)
    exact = [line for line in rows if line.startswith("| top-30 identical")]
    assert [line.split("|")[2].strip() for line in exact] == ["2000", "5000"]
    assert all(line.split("|")[-2].strip() == "pass" for line in exact)  # exact, never timed
    assert "5000: no Chroma stream (--stream-max 2000)" in out.stdout
    spinners = [line for line in out.stderr.splitlines() if "one core busy (pid " in line]
    assert len(spinners) == 3  # invoke at 2000, the top-k step at 2000 and 5000
    for spinner in spinners:
        assert not pid_is_running(int(spinner.split("pid ")[1].split(")")[0]))


@pytest.mark.slow
def test_bench_store_prints_its_targets() -> None:
    out = run_benchmark("bench_store.py", "--sizes", "500", "--dim", "16", "--adds", "4",
                        "--busy-core")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| memories | ingest s"))
    assert lines[head + 2].startswith("| 500 |")
    adds = next(i for i, line in enumerate(lines) if line.startswith("| memories | single adds"))
    assert [r.split("|")[2].strip() for r in lines[adds + 2:adds + 4]] == ["quiet",
                                                                         "one core busy"]
    targets = lines.index("| target | memories | measured | target | pass |")
    rows = lines[targets + 2:targets + 6]
    assert [r.split("|")[1].strip() for r in rows] == [
        "add_event p50 / bare single add", "add_event p50 / bare single add, one core busy",
        "reopen to first query / bare paged get", "bulk ingest, precomputed vectors"]
    assert all(r.split("|")[-2].strip() in {"pass", "FAIL"} for r in rows)
    spinner = next(line for line in out.stderr.splitlines() if "one core busy (pid " in line)
    assert not pid_is_running(int(spinner.split("pid ")[1].split(")")[0]))


@pytest.mark.slow
def test_bench_store_reopen_only_reuses_its_folder(tmp_path: Path) -> None:
    def run() -> list[str]:
        out = run_benchmark("bench_store.py", "--sizes", "300", "--dim", "16", "--reopen-only",
                            "--folder", str(tmp_path))
        assert out.returncode == 0, out.stderr[-3000:]
        return out.stdout.splitlines()

    first = run()
    assert sorted(p.name for p in (tmp_path / "n300-d16").iterdir()) == ["bare", "stream"]
    lines = run()  # a second build would add 300 more memories: the script checks there are 300
    for out in (first, lines):
        head = next(i for i, line in enumerate(out) if line.startswith("| memories | reopen"))
        assert out[head + 2].startswith("| 300 |")
        row = next(line for line in out if line.startswith("| reopen to first query"))
        assert row.split("|")[-2].strip() in {"pass", "FAIL"}
    assert not any(line.startswith("| add_event") for line in lines)


@pytest.mark.slow
def test_bench_service_prints_its_tables() -> None:
    out = run_benchmark("bench_service.py", "--memories", "300", "--topics", "20", "--clients",
                        "2", "--requests", "10", "--samples", "3")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| memories | clients |"))
    assert "req/s | p50 ms | p95 ms | p99 ms" in lines[head]
    assert lines[head + 2].startswith("| 300 | 2 | 10 | 0 |")
    assert any(line.startswith("| best of 3 |") for line in lines)
    assert any(line.startswith("server CPU: ") for line in lines)
    assert lines[-1].startswith("bound: CPU")


@pytest.mark.slow
def test_bench_open_prints_its_table() -> None:
    out = run_benchmark("bench_open.py", "--size", "300", "--dim", "16", "--repeats", "1")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith("# 300 memories, dim 16")
    assert lines[1].startswith("| run | nodes | open s | peak RSS MB")
    assert lines[3].startswith("| 1 | 300 |")


@pytest.mark.slow
def test_bench_postgres_prints_its_tables_and_leaves_no_server() -> None:
    out = run_benchmark("bench_postgres.py", "--sizes", "300", "--queries", "2", "--adds", "2",
                        "--writes", "5", "--writers", "1,2")  # each writer is a process of its own
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    head = lines.index("| memories | backend | import s | reopen s | add ms | process ms "
                       "| database ms |")
    assert lines[head + 2].startswith("| 300 | PostgreSQL |")
    assert lines[head + 3].startswith("| 300 | Chroma (embedded) |")
    writers = lines.index("| memories before | writer processes | events | events/s (all "
                          "writers) |")
    rows = [line.split("|")[2].strip() for line in lines[writers + 2:] if line.startswith("| ")]
    assert rows == ["1", "2"]
    started = next(line for line in out.stderr.splitlines() if "started PostgreSQL" in line)
    pid = int(started.split("pid ")[1].split(")")[0])
    assert not pid_is_running(pid)


@pytest.mark.slow
def test_bench_tuning_prints_start_and_tuned_and_the_real_retriever_agrees() -> None:
    out = run_benchmark("bench_tuning.py", "--smoke", "--samples", "10")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| persona |"))
    rows = [line.split("|")[1:-1] for line in lines[head + 2:] if line.startswith("| ")]
    assert [r[0].strip() for r in rows] == ["Isabella Rodriguez", "Maria Lopez (zh)"]
    for row in rows:
        start_train, tuned_train = float(row[2]), float(row[4])
        assert tuned_train >= start_train
        assert row[5].strip() == row[6].strip()  # the fast path and the retriever agree
    assert any(line.startswith("held-out recall@10 over") for line in lines)


@pytest.mark.slow
def test_bench_service_compares_before_after_and_the_echo() -> None:
    out = run_benchmark("bench_service.py", "--compare", "--memories", "300", "--topics", "20",
                        "--clients", "2", "--requests", "8")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| server | focal points"))
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[head + 2:]
            if line.startswith("| ")]
    assert [(r[0], r[1]) for r in rows] == [
        ("echo (bare FastAPI)", "-"), ("before: no query cache", "distinct"),
        ("before: no query cache", "repeated"), ("after: query cache", "distinct"),
        ("after: query cache", "repeated")]
    assert all(r[2] == "0" for r in rows)  # every request answered with top_k memories
    assert all(r[6].endswith("x") for r in rows)
    assert all(r[7].endswith("x") or r[7] == "n/a" for r in rows)  # n/a: the echo's CPU < 1 tick


@pytest.mark.slow
def test_bench_long_query_prints_its_table() -> None:
    out = run_benchmark("bench_long_query.py", "--chars", "900", "--repeats", "1")
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [line for line in out.stdout.splitlines() if line.startswith(("| Chinese", "| English"))]
    assert len(rows) == 2 and all(r.split("|")[2].strip() == "900" for r in rows)
    assert all(r.rstrip(" |").endswith("x") for r in rows)


@pytest.mark.slow
def test_real_model_prints_its_three_tables_and_leaves_no_server() -> None:
    # the real SmolLM2-135M server on one thread, at the smallest size: replies of 8 tokens,
    # short reflection prompts (the server's CPU goes to reading prompts: the questions'
    # prompt of 4 memories is half that of 10), on the model file the other tests serve
    model = q8_0_model()
    out = run_benchmark("real_model.py", "--reflections", "1", "--memories", "2", "--turns",
                        "1", "--max-tokens", "8", "--evidence", "5", "--window", "4",
                        "--model", str(model))
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"# {model.name} on llama.cpp's server"), lines[0]
    assert lines[1].startswith("# CPU: ") and "unknown" not in lines[1]
    heads = {"| run | status |": "| 1 |", "| mode | calls |": "| batched |",
             "| turn | done |": "| 1 |"}
    for head, first in heads.items():
        at = next(i for i, line in enumerate(lines) if line.startswith(head))
        assert lines[at + 2].startswith(first), lines[at:at + 3]
    modes = [line.split("|")[1].strip() for line in lines if line.startswith(("| batched",
                                                                              "| one by one"))]
    assert modes == ["batched", "one by one"]
    assert any(re.fullmatch(r"batched / one by one: calls \d+\.\d\dx, seconds \d+\.\d\dx", line)
               for line in lines)
    assert any(line.startswith("reflections that wrote a thought") for line in lines)
    assert any(line.startswith("turns completed: ") for line in lines)
    assert lines[-2].startswith("# output='structured' ")  # taken, or said not to be
    started = next(line for line in out.stderr.splitlines() if "started llama.cpp" in line)
    assert not pid_is_running(int(started.split("pid ")[1].split(")")[0]))


@pytest.mark.slow
def test_bench_forget_prints_both_backends_beside_bare_deletes() -> None:
    out = run_benchmark("bench_forget.py", "--nodes", "400", "--dim", "8", "--repeats", "2")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    head = lines.index("| backend | memories | forget | genmem ms | bare delete ms "
                       "| genmem / bare |")
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[head + 2:]]
    assert [(r[0], r[2]) for r in rows] == [
        (backend, what) for backend in ("Chroma (embedded)", "PostgreSQL")
        for what in ("forget 1", "forget 99", "expiry sweep, nothing expired",
                     "forget all (whole persona)")]
    assert all(r[1] == "400" for r in rows)
    assert all(r[5].endswith("x") == (r[2] != "expiry sweep, nothing expired") for r in rows)


@pytest.mark.slow
def test_bench_startup_prints_each_case_against_the_chroma_import() -> None:
    out = run_benchmark("bench_startup.py", "--repeats", "1", "--cases", "help,stats")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith("# CPU: ") and lines[1].startswith("| case | CPU s |")
    rows = {row[0]: row[1:] for row in
            ([c.strip() for c in line.strip("|").split("|")] for line in lines[3:])}
    assert list(rows) == ["import chromadb", "help", "stats"]
    for case in ("help", "stats"):
        cpu, wall, base, ratio = rows[case]
        assert float(cpu) > 0 and float(wall) > 0 and base == "import chromadb"
        assert ratio == f"{float(cpu) / float(rows['import chromadb'][0]):.1f}x" or \
            re.fullmatch(r"\d+\.\dx", ratio)


@pytest.mark.slow
def test_bench_reads_while_forgetting_prints_its_table() -> None:
    out = run_benchmark("bench_reads_while_forgetting.py", "--memories", "30", "--forget", "3",
                        "--stores", "folder")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    header = lines.index("| store, ranking | reads | wrong memories | errors | deadlocks | "
                         "seconds |")
    row = [cell.strip() for cell in lines[header + 2].strip("|").split("|")]
    assert row[0] == "embedded folder, in process"
    assert int(row[1]) >= 3 and row[2:5] == ["0", "0", "0"]
