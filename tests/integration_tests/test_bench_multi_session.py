"""bench_multi_session.py runs end to end on the smoke questions with the real embedding model.

Only the shape of the output is checked, never a timing or a quality figure.
"""

from __future__ import annotations

import re

import pytest

from tests.support.benchmarks import load_benchmark, run_benchmark

ROW = re.compile(r"^\| (?P<name>[^|]+) \| (?P<cells>.+) \| "
                 r"(?P<ms>[\d.]+) \((?P<ratio>[\d.]+)x\) \|$")


@pytest.mark.slow
def test_every_variant_is_scored_on_both_halves_and_timed() -> None:
    out = run_benchmark("bench_multi_session.py", "--smoke")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith("# 9 questions, 66 turns, ingest 'turn + 2 previous'")
    rows = {m["name"]: m for m in map(ROW.match, lines) if m}
    variants = load_benchmark("bench_multi_session.py").VARIANTS
    assert list(rows) == list(variants)
    for name, row in rows.items():
        cells = [c.strip() for c in row["cells"].split("|")]
        assert len(cells) == 6, name
        assert all(0.0 <= float(c) <= 1.0 for c in cells), (name, cells)
        assert float(row["ms"]) > 0
    assert rows["chat default (CHAT_RETRIEVAL)"]["ratio"] == "1.0"
