"""`bench_forget.py --no-erase` times Chroma's forgets without erasing the folder's files."""

from __future__ import annotations

import pytest

from tests.support.benchmarks import run_benchmark

pytestmark = pytest.mark.slow


def test_bench_forget_without_erasure_says_so_and_times_the_chroma_rows() -> None:
    out = run_benchmark("bench_forget.py", "--nodes", "300", "--dim", "8", "--repeats", "2",
                        "--no-postgres", "--no-erase")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert "genmem: stream (no erasure);" in lines[0]
    rows = [line.split("|")[1:4] for line in lines[3:]]
    assert [(r[0].strip(), r[2].strip()) for r in rows] == [
        ("Chroma (embedded)", what) for what in ("forget 1", "forget 74",
                                                 "expiry sweep, nothing expired",
                                                 "forget all (whole persona)")]
    sweep = lines[5].split("|")
    assert float(sweep[4]) >= 0 and sweep[5].strip() == "-"  # no baseline to beat
