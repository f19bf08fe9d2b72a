"""bench_lexical.py runs end to end at a tiny size and prints its table (never a timing check)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_lexical_prints_its_table() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_lexical.py"), "--sizes", "300",
         "--queries", "5"],
        capture_output=True, text=True, timeout=600, cwd=REPO, check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert "## 300 memories" in lines
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip()
            for line in lines if line.startswith("| ") and not line.startswith("| measure")}
    assert rows["open: LexicalIndex().sync(cache)"].endswith(" s")
    assert rows["query: scores(query, every row), p50"].endswith(" ms")
    assert rows["target: equal to bm25s to its float32 (1e-4)"] == "pass"  # scores, not time
    assert rows["tantivy: every matching score, p50"].endswith(" ms")
