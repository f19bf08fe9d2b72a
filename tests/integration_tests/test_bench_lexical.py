"""bench_lexical.py runs end to end at a tiny size and prints its table (never a timing check)."""

from __future__ import annotations

from tests.support.benchmarks import run_benchmark


def test_bench_lexical_prints_its_table() -> None:
    out = run_benchmark("bench_lexical.py", "--sizes", "300", "--queries", "5")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert "## 300 memories" in lines
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip()
            for line in lines if line.startswith("| ") and not line.startswith("| measure")}
    assert rows["open: LexicalIndex().sync(cache)"].endswith(" s")
    assert rows["query: scores(query, every row), p50"].endswith(" ms")
    assert rows["target: equal to bm25s to its float32 (1e-4)"] == "pass"  # scores, not time
    assert rows["tantivy: every matching score, p50"].endswith(" ms")
