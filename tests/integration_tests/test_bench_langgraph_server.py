"""benchmarks/bench_langgraph_server.py runs end to end at a tiny size and prints its tables.

Two real `langgraph dev` servers (the LangGraph server's environment, `.venv-langgraph`);
only the shape of the output is checked, never a timing.
"""

from __future__ import annotations

import pytest

from tests.support.benchmarks import run_benchmark
from tests.support.langgraph_server import langgraph_venv


@pytest.mark.slow
def test_bench_langgraph_server_prints_its_tables() -> None:
    out = run_benchmark("bench_langgraph_server.py", "--smoke", "--items", "60",
                        "--venv", str(langgraph_venv()))
    assert out.returncode == 0, out.stderr[-3000:] + out.stdout[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith("CPU: ") and ", load " in lines[0]
    head = lines.index(
        "| store | items | put p50 ms | put p90 ms | put mean ms | search p50 ms "
        "| search p90 ms |")
    assert [line.split("|")[1].strip() for line in lines[head + 2: head + 4]] == [
        "genmem", "default"]
    ratios = lines.index("| items | put p50 genmem/default | put mean genmem/default "
                         "| search p50 genmem/default |")
    row = [cell.strip() for cell in lines[ratios + 2].strip("|").split("|")]
    assert row[0] == "60" and all(cell.endswith("x") for cell in row[1:])
    assert lines[-1] == "BlockingError lines in the servers' logs: {'genmem': 0, 'default': 0}"
    started = [line for line in out.stderr.splitlines() if "langgraph dev (pid " in line]
    assert len(started) == 2
