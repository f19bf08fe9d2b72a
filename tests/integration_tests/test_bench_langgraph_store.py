"""benchmarks/bench_langgraph_store.py runs end to end at a tiny size and prints its tables.

Only the shape of the output is checked, never a timing.
"""

from __future__ import annotations

import pytest

from tests.support.benchmarks import run_benchmark
from tests.support.processes import pid_is_running


@pytest.mark.slow
def test_bench_langgraph_store_prints_its_tables_and_targets() -> None:
    out = run_benchmark("bench_langgraph_store.py", "--smoke", "--busy-core")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    head = lines.index("| items | put s | add_many s | InMemoryStore put s | invoke ms | "
                       "search ms | search+filter ms | InMemoryStore search ms |")
    assert lines[head + 2].startswith("| 300 |")
    ratios = next(i for i, line in enumerate(lines) if line.startswith("| items | search/invoke"))
    row = [cell.strip() for cell in lines[ratios + 2].strip("|").split("|")]
    assert row[0] == "300" and all(cell.endswith("x") and cell != "-x" for cell in row[1:])
    targets = lines.index("| target | items | measured | target | pass |")
    rows = [line for line in lines[targets + 2:] if line.startswith("| ")]
    assert [r.split("|")[1].strip() for r in rows] == [
        "search p50 / invoke p50", "search with filter p50 / invoke p50",
        "search p50 / invoke p50, one core busy",
        "search with filter p50 / invoke p50, one core busy", "put batch / add_many"]
    assert all(r.split("|")[-2].strip() in {"pass", "FAIL"} for r in rows)
    spinners = [line for line in out.stderr.splitlines() if "one core busy (pid " in line]
    assert len(spinners) == 1
    assert not pid_is_running(int(spinners[0].split("pid ")[1].split(")")[0]))
