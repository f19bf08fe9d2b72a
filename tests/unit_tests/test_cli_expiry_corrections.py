"""`genmem add --expires-in/--supersedes`, `forget --expired`, `search --include-superseded`."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner, Result

from langchain_genmem.cli import app

P = "玛丽亚"
NOW = "2023-02-14 12:00"
runner = CliRunner()


def run(store: Path, *args: str, code: int = 0, now: str = NOW) -> Result:
    result = runner.invoke(app, ["--path", str(store), "--persona", P, "--now", now, *args])
    assert result.exit_code == code, (result.output, result.exception)
    if code:
        assert "Traceback" not in result.output
    return result


def added(store: Path, *args: str) -> dict:
    return json.loads(run(store, "add", *args, "--json").output)


def found(store: Path, query: str, *args: str, now: str = NOW) -> list[str]:
    rows = json.loads(run(store, "search", query, "--json", "--peek", *args, now=now).output)
    return [r["node_id"] for r in rows]


def test_add_expires_in_counts_from_created_and_search_skips_it_once_expired(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    a = added(store, "event", "玛丽亚今天在咖啡馆值班", "--poignancy", "3",
              "--created", "2023-02-14 09:00", "--expires-in", "12h")
    b = added(store, "event", "玛丽亚的考试在周五", "--poignancy", "5", "--expires-in", "90m")
    c = added(store, "event", "玛丽亚住在宿舍", "--poignancy", "4", "--expires-in", "45s")
    d = added(store, "event", "玛丽亚学物理", "--poignancy", "4", "--expires-in", "30d")
    assert a["expiration"].startswith("2023-02-14 21:00")
    assert b["expiration"].startswith("2023-02-14 13:30")
    assert c["expiration"].startswith("2023-02-14 12:00:45")
    assert d["expiration"].startswith("2023-03-16 12:00")
    assert set(found(store, "玛丽亚")) == {"node_1", "node_2", "node_3", "node_4"}
    assert set(found(store, "玛丽亚", now="2023-02-14 22:00")) == {"node_4"}
    out = run(store, "search", "玛丽亚", "--peek", now="2023-02-14 22:00").output
    assert "expired memories skipped: 3" in out


def test_add_refuses_a_bad_lifetime_naming_the_option(tmp_path: Path) -> None:
    store = tmp_path / "store"
    added(store, "event", "玛丽亚在图书馆", "--poignancy", "2")
    out = run(store, "add", "event", "x", "--poignancy", "2", "--expires-in", "三天",
              code=2).output
    assert "--expires-in: expected a positive number of seconds" in out and "'三天'" in out
    out = run(store, "add", "event", "x", "--poignancy", "2", "--expires-in", "1d",
              "--expiration", "2023-03-01", code=2).output
    assert "--expires-in: give expiration or expires_in, not both" in out
    stats = json.loads(run(store, "stats", "--json").output)
    assert stats["memories"] == 1


def test_forget_expired_with_dry_run_then_for_good(tmp_path: Path) -> None:
    store = tmp_path / "store"
    added(store, "event", "玛丽亚的临时密码是四七一一", "--poignancy", "5", "--expires-in", "10m")
    added(store, "event", "玛丽亚住在奥克山学院", "--poignancy", "6")
    later = "2023-02-14 13:00"
    dry = run(store, "forget", "--expired", "--dry-run", now=later).output
    assert "Would forget 1 memory" in dry and "玛丽亚的临时密码是四七一一" in dry
    nothing = run(store, "forget", "--expired").output  # not expired at noon
    assert nothing.startswith("Nothing to forget")
    out = json.loads(run(store, "forget", "--expired", "--json", now=later).output)
    assert out["forgotten"] == ["node_1"] and out["live_count"] == 1
    assert found(store, "密码", "--include-superseded", now=later) == ["node_2"]


def test_supersedes_leaves_the_old_memory_out_unless_asked(tmp_path: Path) -> None:
    store = tmp_path / "store"
    added(store, "event", "玛丽亚住在北京", "--poignancy", "5")
    added(store, "event", "玛丽亚喜欢茶", "--poignancy", "3")
    added(store, "event", "玛丽亚搬到了上海", "--poignancy", "5", "--supersedes", "node_1")
    assert set(found(store, "玛丽亚住在哪里")) == {"node_2", "node_3"}
    assert set(found(store, "玛丽亚住在哪里", "--include-superseded")) == {
        "node_1", "node_2", "node_3"}
    assert set(found(store, "玛丽亚住在哪里", "--recency-mode", "reverie")) == {
        "node_1", "node_2", "node_3"}
    out = run(store, "add", "event", "x", "--poignancy", "2", "--supersedes", "node_7",
              code=2).output
    assert "--supersedes: no memory 'node_7'" in out
    out = run(store, "add", "event", "x", "--poignancy", "2", "--supersedes", "node_4",
              code=2).output
    assert "--supersedes" in out and "'node_4' is this memory itself" in out
