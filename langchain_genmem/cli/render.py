"""How ``genmem`` shows results: console, JSON, score tables and formula, text reports, chart.

The text forms of the keyword and stats reports (the ``explain`` chart is in ``chart``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal

import typer

from langchain_genmem.cli.options import TIME_FORMAT
from langchain_genmem.cli.reports import (
    RELEVANCE_PARTS,
    effective_gains,
    number,
)
from langchain_genmem.core.nodes import TYPE_CODES
from langchain_genmem.memory.stats import plural

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from langchain_genmem.memory.stream import MemoryStream
    from langchain_genmem.retrieval.weighted import WeightedRetrieval

_WIDTH = 120  # when stdout is not a terminal (pipes, `make demo | tee`, tests)
_TABLE_COLUMNS = ("#", "node", "type", "created", "score", "recency", "relevance", "importance")
_TABLE_WIDTH = 76  # cells the columns before the description take (padding and rules included)
_PART_WIDTH = 16  # cells the dense and lexical columns add


def stdout_console() -> Console:
    """A rich console on stdout, 120 cells wide when stdout is not a terminal."""
    from rich.console import Console

    return Console(width=None if sys.stdout.isatty() else _WIDTH, highlight=False)


def show(
    report: Mapping[str, Any], printer: Callable[[Console, Mapping[str, Any]], None], as_json: bool
) -> None:
    """Print a report as JSON or, with its printer, as text.

    Args:
        report: the report.
        printer: prints the report as text on a console.
        as_json: print JSON instead.
    """
    if as_json:
        echo_json(report)
    else:
        printer(stdout_console(), report)


def echo_json(data: Any) -> None:
    """Print data as indented JSON (times as ``YYYY-MM-DD HH:MM:SS``, arrays as lists).

    Args:
        data: the data.
    """
    typer.echo(json.dumps(data, ensure_ascii=False, indent=2, default=_json_default))


def count_text(stream: MemoryStream) -> str:
    """A stream's size in words, e.g. ``14 memories (8 events, 6 thoughts, 0 chats)``.

    Args:
        stream: the stream.

    Returns:
        The words.
    """
    cache = stream.columns  # what exists: forgotten memories are no row
    codes = cache.type_code[: cache.n].tolist()
    parts = ", ".join(plural(codes.count(TYPE_CODES[t]), t) for t in ("event", "thought", "chat"))
    return f"{memories(len(stream))} ({parts})"


def formula(retriever: WeightedRetrieval) -> str:
    """The score formula a retriever applies, e.g. ``score = 0.5×recency + 3×relevance + ...``.

    Args:
        retriever: the retriever.

    Returns:
        The formula; each factor is a global gain times a weight (the persona's or given),
        shown as such, with the recency mode and decay.
    """
    parts = " + ".join(f"{number(g)}×{n}" for n, g in effective_gains(retriever).items())
    w = retriever.effective_weights()
    gains = "/".join(str(number(g)) for g in w.gains)
    weights = "/".join(str(number(x)) for x in (w.recency_w, w.relevance_w, w.importance_w))
    decay = retriever.recency_decay
    if decay is None:
        decay = retriever.memory_stream.state.recency_decay
    return (
        f"score = {parts} = gains {gains} × weights {weights}  "
        f"(recency {retriever.recency_mode}, decay {number(decay)})"
    )


def relevance_formula(
    retriever: WeightedRetrieval, rows: Sequence[Mapping[str, Any]] = ()
) -> str | None:
    """What the relevance component of a retrieval is, unless it is the original's cosine.

    The weights are those the retrieval used (its rows' ``lexical_share``), so the parts
    shown add up to the relevance shown: a hybrid falls back to one part when the other is
    equal for every candidate (e.g. no query word occurs in any memory), and says so.

    Args:
        retriever: the retriever.
        rows: the retrieval's rows (:func:`~langchain_genmem.cli.reports.retrieve_rows`);
            without rows, the retriever's own lexical weight.

    Returns:
        E.g. ``relevance = 0.75×dense + 0.25×lexical (hybrid of the normalised parts)``, or
        None for dense relevance.
    """
    mode, weight = retriever.effective_relevance()
    if mode == "dense":
        return None
    if mode == "lexical":
        return "relevance = lexical (BM25 of the query's words, normalised)"
    used = rows[0].get("lexical_share") if rows else None
    share = weight if used is None else float(used)
    why = "hybrid of the normalised parts"
    if share != weight and share == 0.0:
        why = "hybrid, dense part alone: every memory has the same BM25 for this query"
    elif share != weight and share == 1.0:
        why = "hybrid, lexical part alone: every memory has the same cosine to this query"
    return f"relevance = {number(1.0 - share)}×dense + {number(share)}×lexical ({why})"


def left_out_lines(
    counts: Mapping[str, int],
    shown: int,
    *,
    clock: datetime,
    options: str,
    expression: str | None = None,
) -> list[str]:
    """What a retrieval left out, one line per reason; and why nothing is shown, if so.

    Args:
        counts: :func:`~langchain_genmem.cli.reports.retrieval_counts` of the retrieval.
        shown: how many rows are shown.
        clock: the stream's clock (expiration is judged at it).
        options: the candidate filter options given (``RetrievalOptions.filter_options``).
        expression: the ``--filter`` expression, or None.

    Returns:
        The lines, e.g. ``nothing to show: --since 2024-01-01 left out 124 memories``.
    """
    lines = []
    if counts["skipped_expired"]:
        lines.append(f"expired memories skipped: {counts['skipped_expired']} (clock "
                     f"{clock:{TIME_FORMAT}}; --now sets it)")
    filtered, scored = counts["skipped_filtered"], counts["candidates"]
    if filtered and (shown or scored):
        lines.append(f"left out by {options}: {filtered}")
    if shown or (scored and expression is None):  # rows, or -k 0
        return lines
    if scored:
        every = "the" if scored == 1 else "all"
        lines.append(f"nothing to show: --filter {expression!r} left out {every} "
                     f"{memories(scored)} scored")
    elif filtered:
        lines.append(f"nothing to show: {options} left out {memories(filtered)}")
    elif idle := counts["skipped_idle"]:
        lines.append(f"nothing to score: {plural(idle, 'memory is', 'memories are')} idle "
                     "(--keep-idle scores them)")
    elif not counts["skipped_expired"]:
        lines.append("nothing to score: no events or thoughts (--type chat scores the chats)")
    return lines


def score_table(
    rows: Sequence[Mapping[str, Any]],
    *,
    title: str | None,
    width: int | None = None,
    parts: bool = False,
) -> Table:
    """A rich table of memories with their normalised score components.

    Args:
        rows: rows from :func:`~langchain_genmem.cli.reports.retrieve_rows`.
        title: the table's title.
        width: fit the table in this many cells by cutting descriptions to one line; None
            wraps them instead.
        parts: add the normalised ``dense`` and ``lexical`` parts of the relevance after it
            (a part the rows lack shows as ``-``).

    Returns:
        The table.
    """
    from rich.table import Table
    from rich.text import Text

    columns = list(_TABLE_COLUMNS)
    if parts:
        at = columns.index("relevance") + 1
        columns[at:at] = RELEVANCE_PARTS
    table = Table(title=title, box=None, title_justify="left", pad_edge=False, header_style="bold")
    for name in columns:
        justify: Literal["left", "right"] = "left" if name in ("node", "type") else "right"
        table.add_column(name, justify=justify, no_wrap=True)
    table.add_column("description", overflow="fold")
    used = _TABLE_WIDTH + (_PART_WIDTH if parts else 0)
    room = None if width is None else max(20, width - used)
    scores = columns[columns.index("score") :]
    for i, r in enumerate(rows, start=1):
        text = Text(r["description"])
        if room is not None:
            text.truncate(room, overflow="ellipsis")
        table.add_row(
            str(i),
            r["node_id"],
            r["type"],
            f"{r['created']:%m-%d %H:%M}",
            *(_cell(r.get(c)) for c in scores),
            text,
        )
    return table


def weighted_table(
    rows: Sequence[Mapping[str, Any]], gains: Mapping[str, float], *, title: str
) -> Table:
    """What the ``explain`` chart draws, as a table: each memory's weighted components.

    Args:
        rows: rows from :func:`~langchain_genmem.cli.reports.retrieve_rows`, best first.
        gains: what each normalised component is multiplied by
            (:func:`~langchain_genmem.cli.reports.effective_gains`).
        title: the table's title.

    Returns:
        The table: rank, node, score, then ``gain × component`` for each component (they
        add up to the score) and the description.
    """
    from rich.table import Table

    table = Table(title=title, box=None, title_justify="left", pad_edge=False, header_style="bold")
    for name in ("#", "node", "score", *(f"{number(g)}×{n}" for n, g in gains.items())):
        table.add_column(name, justify="left" if name == "node" else "right", no_wrap=True)
    table.add_column("description", overflow="fold")
    for i, r in enumerate(rows, start=1):
        table.add_row(str(i), r["node_id"], _cell(r["score"]),
                      *(_cell(g * r[n]) for n, g in gains.items()), r["description"])
    return table


def print_keyword_report(console: Console, report: Mapping[str, Any]) -> None:
    """Print :func:`~langchain_genmem.cli.reports.keyword_report` as text.

    Args:
        console: where to print.
        report: the report.
    """
    terms = ", ".join(repr(t) for t in report["query"])
    for name in ("events", "thoughts"):
        part = report[name]
        console.print(f"{name} indexed under {terms}: {part['count']}", highlight=False)
        for n in part["newest"]:
            console.print(f"  {n['node_id']:>9}  {n['created'][5:16]}  {n['description']}",
                          highlight=False, overflow="ellipsis", no_wrap=True)
    for kind, counts in report["strength"].items():
        shown = ", ".join(f"{kw} {v}" for kw, v in counts.items())
        console.print(f"{kind} keyword strength: {shown}", highlight=False)


def print_stats(console: Console, report: Mapping[str, Any]) -> None:
    """Print :func:`~langchain_genmem.memory.stats.stream_stats` as text.

    Args:
        console: where to print.
        report: the stats.
    """
    types = ", ".join(plural(n, t) for t, n in report["types"].items())
    depths = ", ".join(f"{d}: {n}" for d, n in report["depths"].items())
    lines = [
        f"{report['persona']}: {memories(report['memories'])} ({types}); "
        f"{report['vector_size']}-d vectors; clock {report['clock']:{TIME_FORMAT}}",
        f"depth histogram: {depths}",
        f"reflection trigger: {report['trigger']['explanation']} "
        f"({plural(report['trigger']['importance_ele_n'], 'event')})",
        "settings: " + ", ".join(f"{k} {v}" for k, v in report["settings"].items()),
    ]
    for kind, counts in report["keyword_strength"].items():
        lines.append(f"top {kind} keywords: " + ", ".join(f"{kw} {v}" for kw, v in counts.items()))
    for text in lines:
        console.print(text, highlight=False)


def _cell(value: Any) -> str:
    """A score in a table: two decimals, ``-`` when missing."""
    return "-" if value is None else f"{value:.2f}"


def print_tune_report(console: Console, report: Mapping[str, Any]) -> None:
    """Print :func:`~langchain_genmem.cli.reports.tune_report` as a table and a summary.

    Args:
        console: where to print.
        report: the tuning report.
    """
    from rich.table import Table

    metric = report["metric"]
    table = Table(title=f"{report['persona']}: {metric}, start vs tuned")
    for column in ("settings", "recency_w", "relevance_w", "importance_w", "decay",
                   "relevance", f"train {metric}", f"held-out {metric}"):
        table.add_column(column, justify="left" if column in ("settings", "relevance") else "right")
    for row in report["rows"]:
        s = row["settings"]
        relevance = s["relevance_mode"]
        if relevance == "hybrid":
            relevance = f"hybrid w={s['lexical_weight']}"
        held = "-" if row["held_out"] is None else f"{row['held_out']:.3f}"
        table.add_row(row["name"], str(s["recency_w"]), str(s["relevance_w"]),
                      str(s["importance_w"]), str(s["recency_decay"]), relevance,
                      f"{row['train']:.3f}", held)
    console.print(table)
    console.print(
        f"{report['train_examples']} training and {report['held_out_examples']} held-out "
        f"questions (seed {report['seed']}); {report['settings_tried']} settings tried",
        highlight=False,
    )
    if report["saved"]:
        console.print(f"saved the tuned values as {report['persona']}'s settings", highlight=False)
    else:
        console.print("--save stores the tuned values as the persona's settings", highlight=False)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return None if value != value else value.strftime(TIME_FORMAT)  # NaT != NaT
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Enum):
        return value.value
    return str(value)


def memories(n: int) -> str:
    """``1 memory``, ``2 memories``: :func:`plural` of the word every report counts."""
    return plural(n, "memory", "memories")
