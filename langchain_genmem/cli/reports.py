"""What the ``genmem`` commands compute, as JSON-ready data.

Retrieved rows, effective weights, the keyword retrieval, stream statistics and tuning.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_genmem.cli.options import TIME_FORMAT, renamed
from langchain_genmem.core.errors import ValidationError
from langchain_genmem.core.extras import require_extra
from langchain_genmem.dataframe import document_row, retrieve_memories
from langchain_genmem.memory.stats import number
from langchain_genmem.memory.stats import stream_stats as stream_stats  # importable here as before

if TYPE_CHECKING:
    from langchain_genmem.evaluation.metrics import Example
    from langchain_genmem.evaluation.tuning import FitResult
    from langchain_genmem.memory.stream import MemoryStream
    from langchain_genmem.retrieval.weighted import WeightedRetrieval

COMPONENTS = ("recency", "relevance", "importance")
RELEVANCE_PARTS = ("dense", "lexical")


def retrieve_rows(
    retriever: WeightedRetrieval, query: str, k: int, filter_: str | None
) -> list[dict[str, Any]]:
    """Retrieved memories as flat rows (metadata and description), best first.

    Args:
        retriever: the retriever.
        query: the focal point.
        k: how many.
        filter_: a filter expression (needs pandas), or None.

    Returns:
        The rows; each also says how many memories were scored (``candidates``) and left
        out (``skipped_expired``, ``skipped_idle``).

    Raises:
        ConfigurationError: a filter without the ``pandas`` extra.
    """
    if filter_ is None:
        docs = retriever.retrieve_with_report(query, k=k).documents
        return [document_row(d) for d in docs]
    require_extra("pandas", "pandas", "--filter")
    with warnings.catch_warnings():  # the commands say it themselves (skipped_expired)
        warnings.filterwarnings("ignore", message="no rows: ", category=UserWarning)
        try:
            df = retrieve_memories(retriever, query, k=k, filter=filter_)
        except ValidationError as e:
            if e.field != "filter":
                raise
            raise renamed(e, "--filter") from e
    return [{**row, **df.attrs} for row in df.to_dict("records")]


LEFT_OUT = ("skipped_expired", "skipped_idle", "skipped_filtered")


def retrieval_counts(
    retriever: WeightedRetrieval, query: str, rows: list[dict[str, Any]]
) -> dict[str, int]:
    """How many memories a retrieval scored and left out, also when it returned no row.

    Args:
        retriever: the retriever.
        query: the focal point.
        rows: what :func:`retrieve_rows` returned for it.

    Returns:
        ``candidates`` (memories scored, before any ``--filter`` expression),
        ``skipped_expired``, ``skipped_idle`` and ``skipped_filtered``.
    """
    if rows:
        return {name: int(rows[0][name]) for name in ("candidates", *LEFT_OUT)}
    peek = retriever.model_copy(update={"update_access": False})
    report = peek.retrieve_with_report(query, k=0)
    return {"candidates": report.candidate_count,
            **{name: int(getattr(report, name)) for name in LEFT_OUT}}


def time_window_line(
    retriever: WeightedRetrieval, query: str, rows: list[dict[str, Any]]
) -> str | None:
    """The period the query names and what it did, as one line; None when none was read.

    Args:
        retriever: the retriever (its ``time_in_query`` option reads the time).
        query: the focal point.
        rows: what :func:`retrieve_rows` returned for it.

    Returns:
        e.g. ``time in the query: '上周日' = 2024-01-14 00:00 to 2024-01-15 00:00 (end
        excluded), narrowed``, or None.
    """
    if rows and rows[0].get("time_window"):
        return f"time in the query: {rows[0]['time_window']}"
    window = retriever.query_window(query)
    return None if window is None else f"time in the query: {window.text()}"


def effective_gains(retriever: WeightedRetrieval) -> dict[str, float]:
    """What each normalised component is multiplied by: persona or given weight × gain.

    Args:
        retriever: the retriever.

    Returns:
        ``{"recency": ..., "relevance": ..., "importance": ...}``.
    """
    w = retriever.effective_weights()
    weights = (w.recency_w, w.relevance_w, w.importance_w)
    return {n: x * g for n, x, g in zip(COMPONENTS, weights, w.gains, strict=True)}


def keyword_report(stream: MemoryStream, spo: tuple[str, str, str], limit: int) -> dict[str, Any]:
    """The keyword retrieval for a triple, as JSON-ready data.

    Args:
        stream: the stream.
        spo: subject, predicate, object.
        limit: memories listed per type.

    Returns:
        ``{"query", "strength", "events", "thoughts"}``; the lists hold counts and the
        newest memories.
    """
    strength = stream.kw_strength
    found = {
        "events": stream.retrieve_relevant_events(*spo),
        "thoughts": stream.retrieve_relevant_thoughts(*spo),
    }
    return {
        "query": list(spo),
        "strength": {
            t: {kw: strength[t].get(kw.lower(), 0) for kw in spo if kw}
            for t in ("event", "thought")
        },
        **{
            name: {
                "count": len(nodes),
                "newest": [_brief(n) for n in nodes[:limit]],
            }
            for name, nodes in found.items()
        },
    }


def _brief(node: Any) -> dict[str, Any]:
    return {
        "node_id": node.node_id,
        "type": node.type,
        "created": node.created.strftime(TIME_FORMAT),
        "poignancy": number(node.poignancy),
        "description": node.description,
    }


def persona_examples(examples: Sequence[Example], persona: str, path: Path) -> list[Example]:
    """The examples asked of a persona: those naming it, and those naming none.

    Args:
        examples: the loaded examples.
        persona: the persona tuned.
        path: the file, for the error.

    Returns:
        The examples kept, in file order.

    Raises:
        ValidationError: none is left.
    """
    kept = [e for e in examples if e.persona in (None, persona)]
    if not kept:
        others = sorted({e.persona for e in examples if e.persona})
        msg = (
            f"--examples: no question in {path} is asked of {persona!r} (it names "
            f"{', '.join(repr(o) for o in others)}); choose the persona with --persona"
        )
        raise ValidationError(msg, field="examples")
    return kept


def tune_report(persona: str, result: FitResult, *, saved: bool) -> dict[str, Any]:
    """What ``genmem tune`` found, as data.

    Args:
        persona: the persona.
        result: the fit.
        saved: whether the tuned settings were stored.

    Returns:
        The report: the metric, the split sizes and each row's settings and scores.
    """
    return {
        "persona": persona,
        "metric": f"{result.metric}@{result.k}",
        "train_examples": result.train_count,
        "held_out_examples": result.held_out_count,
        "seed": result.seed,
        "settings_tried": result.tried,
        "rows": [
            {
                "name": row.name,
                "settings": {k: v if isinstance(v, str) else number(v)
                             for k, v in row.setting.settings().items()},
                "train": row.train,
                "held_out": row.held_out,
            }
            for row in result.rows
        ],
        "saved": saved,
    }
