"""bench_quality.py runs end to end on a few questions with the real default embedding model.

Only the shape of the output is checked, never a timing or a quality figure.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "bench_quality.py"


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


@pytest.mark.slow
def test_bench_quality_smoke_prints_both_tables() -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke",
         "--config", 'no importance={"importance_w": 0}'],
        capture_output=True, text=True, timeout=600, cwd=REPO, check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    head = lines.index("| configuration | set | questions | R@5 | R@10 | R@30 | nDCG@10 | "
                       "p50 ms | mean ms |")
    rows = [cells(line) for line in lines[head + 2:] if line.startswith("| ")]
    rows = rows[: next(i for i, r in enumerate(rows) if r[0] == "configuration")]
    names = ["dense, relevance only", "lexical, relevance only", "hybrid, relevance only",
             "rrf k=60 (baseline), relevance only", "defaults (recency + importance)",
             "hybrid, defaults", "no importance"]
    assert [r[0] for r in rows] == [n for n in names for _ in range(4)]
    assert [r[1] for r in rows[:4]] == ["en", "zh", "zh -> en", "all"]
    for row in rows:
        assert all(0.0 <= float(v) <= 1.0 for v in row[3:7]), row
        assert float(row[7]) > 0 and float(row[8]) > 0
    assert sum(int(r[2]) for r in rows[:3]) == int(rows[3][2]) == 12
    groups = next(line for line in lines if line.startswith("| configuration | language"))
    assert "cross-lingual" in groups and "fact" in groups
    assert "Maria Lopez (zh): 267 memories" in out.stderr


@pytest.mark.parametrize(("config", "message"), [
    ("broken", "--config 'broken': expected NAME={JSON object}"),
    ('x=[1]', "--config 'x=[1]': expected NAME={JSON object}"),
    ('x={"k"', """--config 'x={"k"': expected NAME={JSON object}"""),
    ('x={"k": 3}', """--config 'x={"k": 3}': 'k' is set by the benchmark"""),
    ('x={"update_access": true}', "'update_access' is set by the benchmark"),
])
def test_bench_quality_refuses_a_bad_config(config: str, message: str) -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--config", config, "--smoke"],
        capture_output=True, text=True, timeout=120, cwd=REPO, check=False,
    )
    assert out.returncode != 0
    assert message in out.stderr
