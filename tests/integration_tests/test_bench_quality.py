"""bench_quality.py runs end to end on a few questions with the real default embedding model.

Only the shape of the output is checked, never a timing or a quality figure.
"""

from __future__ import annotations

import pytest

from tests.support.benchmarks import load_benchmark, run_benchmark


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


@pytest.mark.slow
def test_bench_quality_smoke_prints_both_tables() -> None:
    out = run_benchmark("bench_quality.py", "--smoke", "--set", "smallville", "--config",
                        'no importance={"importance_w": 0}')
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


def table(lines: list[str], header: str) -> list[list[str]]:
    """The rows of the markdown table under ``header`` (its first line)."""
    head = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[head + 2:]:
        if not line.startswith("| "):
            break
        rows.append(cells(line))
    return rows


# A few rows keep the smoke run short: the baseline and one other family row (each also with
# time_in_query=narrow), one row outside the family and one added from the command line.
FAMILY = ("chat default (hybrid .25)", "dense, relevance only")
NAMES = ["library defaults (simulation weights)", *FAMILY, "中文 hybrid .3"]


@pytest.mark.slow
@pytest.mark.timeout(900)  # the run's own deadline below: two ingests with the real model
def test_bench_quality_conversations_smoke_splits_and_chooses_on_train() -> None:
    out = run_benchmark("bench_quality.py", "--smoke", "--set", "conversations", "--per-kind",
                        "--config", '中文 hybrid .3={"relevance": "hybrid", "lexical_weight": 0.3}',
                        *(f"--only={name}" for name in NAMES), "--time-in-query", "narrow",
                        timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert "## Recall, nDCG and latency per question set" not in out.stdout  # Smallville off
    # a few questions, and only the stretches of sessions their answers were said in
    assert "# Conversations: 9 questions, 2 conversations, 66 turns" in lines

    # the split: disjoint, and every set and kind (of two or more questions) in both halves
    halves = {h: set(next(x for x in lines if x.startswith(f"# {h}: ")).split()[2:])
              for h in ("train", "held-out")}
    assert halves["train"] and halves["held-out"]
    assert not halves["train"] & halves["held-out"]
    split = table(lines, "| set | kind | train | held-out |")
    assert {r[0] for r in split} == {"en", "zh", "zh cross"}
    assert {r[1] for r in split} == {"fact", "context", "multi-session", "temporal"}
    for group in ("en", "zh", "zh cross"):
        assert sum(int(r[2]) for r in split if r[0] == group) > 0, group
        assert sum(int(r[3]) for r in split if r[0] == group) > 0, group
    for row in split:
        if int(row[2]) + int(row[3]) >= 2:
            assert int(row[2]) > 0 and int(row[3]) > 0, row
    assert sum(int(r[2]) for r in split) == len(halves["train"])
    assert sum(int(r[3]) for r in split) == len(halves["held-out"])
    assert {i.split("-q")[0] for h in halves.values() for i in h} == {"en-03", "zh-01"}

    # one row per retrieval configuration, half and set, every figure in [0, 1]
    rows = table(lines, "| ingest | configuration | half | set | questions |")
    narrow = [f"{n}, time_in_query=narrow" for n in NAMES if n in FAMILY]
    names = [*NAMES, *narrow]
    assert list(dict.fromkeys(r[1] for r in rows if r[0] == "turn alone")) == names
    for name in names:
        mine = [r for r in rows if r[:2] == ["turn alone", name]]
        assert [(r[2], r[3]) for r in mine] == [
            (h, s) for h in ("train", "held-out") for s in ("en", "zh", "zh cross", "all")]
        for row in mine:
            assert all(0.0 <= float(v) <= 1.0 for v in row[5:9]), row
            assert float(row[9]) > 0
        counts = {(r[2], r[3]): int(r[4]) for r in mine}
        for half in ("train", "held-out"):
            assert counts[(half, "all")] == len(halves[half])
            assert sum(counts[(half, s)] for s in ("en", "zh", "zh cross")) == len(halves[half])

    ingest = table(lines, "| ingest | configuration | turns | seconds | ms per turn |")
    assert ingest[0][0] == "turn alone" and int(ingest[0][2]) > 0 and float(ingest[0][4]) > 0
    assert [r[0] for r in ingest] == ["turn alone", "turn + 2 previous"]  # turns in context

    kinds = table(lines, "| ingest | configuration | set | fact |")
    assert len(kinds) == 3 * len(names) * len(ingest)

    chosen = table(lines, "| chosen on | chosen (ingest / configuration) | train R@10 |")
    assert [r[0] for r in chosen][:4] == ["all train"] * 4
    scopes = {r[0] for r in chosen}
    assert {"en train", "zh train", "zh cross train", "temporal train"} <= scopes
    for row in chosen:
        assert row[1].split(" / ")[1] not in ("library defaults (simulation weights)",
                                              "中文 hybrid .3")  # outside the family
        baseline, mine = float(row[4]), float(row[5])
        # the difference is of the unrounded figures: up to .1 point off the rounded ones
        assert float(row[6]) == pytest.approx(100 * (mine - baseline), abs=0.101)


def test_conversations_smoke_keeps_only_the_stretches_its_answers_were_said_in() -> None:
    load_benchmark("bench_quality.py")  # puts the benchmarks' folder on the path
    import quality_conversations as qc

    said = [{"session": s, "id": f"c-s{s}-t{t}", "text": f"第{t}句"}
            for s in (1, 2, 3) for t in range(1, 9)]
    questions = [{"answers": ["c-s2-t4", "c-s2-t6"]}, {"answers": ["c-s3-t1"]},
                 {"answers": ["c-s2-t5"]}]
    kept = qc.answered_stretches({"c": said, "other": said[:3]}, questions)
    assert list(kept) == ["c"]  # a conversation without an answer is left out
    assert [t["id"] for t in kept["c"]] == [  # session 1 holds no answer
        "c-s2-t2", "c-s2-t3", "c-s2-t4", "c-s2-t5", "c-s2-t6", "c-s3-t1"]

    smoke = qc.smoke_questions(qc.load_questions())
    assert [q["id"] for q in smoke] == list(qc.SMOKE_QUESTIONS)  # every one is in the set
    turns = qc.answered_stretches(qc.load_turns(), smoke)
    ids = {t["id"] for conversation in turns.values() for t in conversation}
    assert {a for q in smoke for a in q["answers"]} <= ids


@pytest.mark.parametrize(("config", "message"), [
    ("broken", "--config 'broken': expected NAME={JSON object}"),
    ('x=[1]', "--config 'x=[1]': expected NAME={JSON object}"),
    ('x={"k"', """--config 'x={"k"': expected NAME={JSON object}"""),
    ('x={"k": 3}', """--config 'x={"k": 3}': 'k' is set by the benchmark"""),
    ('x={"update_access": true}', "'update_access' is set by the benchmark"),
])
def test_bench_quality_refuses_a_bad_config(config: str, message: str) -> None:
    with pytest.raises(SystemExit) as refused:
        load_benchmark("bench_quality.py").main(["--config", config, "--smoke"])
    assert message in str(refused.value.code)


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--ingest", 'x={"flavour": 1}', "ingest 'x': expected a JSON object with keys among"),
    ("--ingest", 'x={"item_fields": ["说话人"]}', "ingest 'x': item_fields: expected turn fields"),
    ("--ingest", "x=[]", "--ingest 'x=[]': expected NAME={JSON object}"),
    ("--ingest", 'x={"stream": {"no_such_option": 1}}', "--ingest 'x': TypeError"),
    ("--only", "没有这一行", "--only '没有这一行': known are"),
])
def test_bench_quality_refuses_a_bad_conversation_option(
    option: str, value: str, message: str
) -> None:
    with pytest.raises(SystemExit) as refused:
        load_benchmark("bench_quality.py").main(["--set", "conversations", "--smoke", option,
                                                 value])
    assert message in str(refused.value.code)


def test_bench_quality_refuses_before_it_starts_in_one_line_as_a_process() -> None:
    out = run_benchmark("bench_quality.py", "--set", "conversations", "--smoke", "--only",
                        "没有这一行", timeout=120)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("--only '没有这一行': known are")
