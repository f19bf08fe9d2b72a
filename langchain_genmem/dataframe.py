"""pandas views of a memory stream, for notebooks.

The stepwise design's ``get_memory_df`` and ``retrieve_memories``. Both take ``importance_scale``:
``"poignancy"`` (default) shows the ``poignancy`` column as stored (1 to 10 in the
original), ``"unit"`` shows the stepwise design's 0.1 to 1.0 (poignancy / 10; a filter then compares
with those values). What is stored never changes. The ``importance`` column of
``retrieve_memories`` is the normalised importance component of the score, on neither scale.

pandas is an optional extra: ``pip install 'langchain-genmem[pandas]'``.

Example:
    .. code-block:: python

        from langchain_genmem import GenerativeAgentsRetriever
        from langchain_genmem.dataframe import get_memory_df, retrieve_memories

        get_memory_df(stream).groupby("type").poignancy.mean()
        retriever = GenerativeAgentsRetriever(stream=stream, k=10)
        retrieve_memories(retriever, "Klaus Mueller", k=5,
                          filter='relevance > 0.5 and type == "thought"')
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_genmem.core.extras import require_extra
from langchain_genmem.core.nodes import ImportanceScale, MemoryNode, importance_divisor
from langchain_genmem.filters import apply_filter, check_columns, parse_filter

if TYPE_CHECKING:
    import pandas as pd
    from langchain_core.documents import Document

    from langchain_genmem.memory.stream import MemoryStream
    from langchain_genmem.retrieval.report import RetrievalReport
    from langchain_genmem.retrieval.weighted import WeightedRetrieval

# Columns of retrieve_memories, the score components first: the metadata of a retrieved
# Document but the counts of the retrieval as a whole, which go to ``df.attrs``.
RESULT_COLUMNS = (
    "node_id",
    "description",
    "score",
    "recency",
    "relevance",
    "dense",
    "lexical",
    "importance",
    "poignancy",
    "cosine",
    "bm25",
    "lexical_share",
    "type",
    "depth",
    "rank",
    "created",
    "last_accessed",
    "expiration",
    "subject",
    "predicate",
    "object",
    "keywords",
    "filling",
    "embedding_key",
    "persona",
)
NODE_COLUMNS = tuple(MemoryNode.model_fields)


def require_pandas() -> Any:
    """Import pandas, or say how to install it.

    Returns:
        The pandas module.

    Raises:
        ConfigurationError: pandas is not installed.
    """
    return require_extra("pandas", "pandas", "this")


def get_memory_df(
    stream: MemoryStream, *, vectors: bool = False, importance_scale: ImportanceScale = "poignancy"
) -> pd.DataFrame:
    """Every memory of the stream as one row, oldest (``node_1``) first.

    Args:
        stream: the persona's stream.
        vectors: add an ``embedding`` column with each memory's vector.
        importance_scale: ``"poignancy"`` (as stored) or ``"unit"`` (poignancy / 10).

    Returns:
        One row per node with every node field (``node_id``, ``type``, ``depth``,
        ``created``, ``last_accessed``, ``poignancy``, ``description``, ``filling``...).

    Raises:
        ConfigurationError: pandas is not installed.
        ValidationError: an unknown ``importance_scale``.
    """
    divisor = importance_divisor(importance_scale)
    pd = require_pandas()
    nodes = stream.nodes()[::-1]
    df = _scaled(pd.DataFrame([n.model_dump() for n in nodes], columns=list(NODE_COLUMNS)), divisor)
    if vectors:
        df["embedding"] = [stream.vector(n.node_id) for n in nodes]
    return df


def retrieve_memories(
    retriever: WeightedRetrieval,
    query: str,
    *,
    k: int | None = None,
    filter: str | None = None,  # noqa: A002 - the stepwise design's name
    importance_scale: ImportanceScale = "poignancy",
) -> pd.DataFrame:
    """Weighted retrieval as a table, best first, optionally filtered before the top k.

    As in that design, the filter applies to every scored candidate and the best ``k`` that pass
    are returned; only those get their ``last_accessed`` updated (when the retriever
    updates access times).

    Args:
        retriever: the retriever (its weights, mode and stream).
        query: the focal point.
        k: how many rows (default: the retriever's k).
        filter: a filter expression over the result columns, e.g.
            ``'relevance > 0.5 and type == "thought"'`` (see :mod:`langchain_genmem.filters`).
        importance_scale: ``"poignancy"`` (as stored) or ``"unit"`` (poignancy / 10), for
            the ``poignancy`` column and the filter.

    Returns:
        Columns ``node_id``, ``description``, ``score``, ``recency``, ``relevance`` and its
        normalised parts ``dense`` and ``lexical``, ``importance``, ``poignancy``,
        ``cosine``, ``bm25``, ``lexical_share`` (relevance = (1 - it) × dense + it ×
        lexical), ``type``, ``depth``, ``rank``, ``created``, ``last_accessed`` and the
        other node fields (a part the relevance mode does not compute is None).
        ``df.attrs`` says how many memories were scored (``candidates``) and left out
        (``skipped_expired``, ``skipped_idle``, ``skipped_filtered``); an empty table
        because of expired memories also warns.

    Raises:
        ConfigurationError: pandas is not installed.
        ValidationError: a bad filter, an unknown column or ``importance_scale``.
    """
    divisor = importance_divisor(importance_scale)
    pd = require_pandas()

    k = retriever.k if k is None else k
    if filter is None:
        report = retriever.retrieve_with_report(query, k=k)
        rows = [document_row(d) for d in report.documents]
        return _described(_scaled(_frame(pd, rows), divisor), report)
    expr = parse_filter(filter)
    check_columns(expr, RESULT_COLUMNS)
    stream = retriever.memory_stream
    peek = retriever.model_copy(update={"update_access": False})
    report = peek.retrieve_with_report(query, k=len(stream))
    rows = [document_row(d) for d in report.documents]
    df = apply_filter(_scaled(_frame(pd, rows), divisor), expr).head(k)
    if retriever.update_access and len(df):
        stream.mark_accessed(list(df["node_id"]))
        df = df.assign(last_accessed=[stream.get(i).last_accessed for i in df["node_id"]])
    return _described(df.reset_index(drop=True).assign(rank=range(len(df))), report)


def document_row(doc: Document) -> dict[str, Any]:
    """A retrieved Document as one flat row: its metadata and its text as ``description``.

    Args:
        doc: a document from :class:`~langchain_genmem.GenerativeAgentsRetriever`.

    Returns:
        The row.
    """
    return {**doc.metadata, "description": doc.page_content}


def _described(df: pd.DataFrame, report: RetrievalReport) -> pd.DataFrame:
    """Say in ``df.attrs`` what was scored and skipped; warn when skipping emptied the table."""
    df.attrs.update(
        candidates=report.candidate_count,
        skipped_expired=report.skipped_expired,
        skipped_idle=report.skipped_idle,
        skipped_filtered=report.skipped_filtered,
    )
    if df.empty and report.skipped_expired:
        msg = (
            f"no rows: {report.skipped_expired} expired memories were skipped at the stream's "
            "clock; pass include_expired=True to the retriever, or open the stream with the "
            "simulation's clock (a SimulationClock)"
        )
        warnings.warn(msg, UserWarning, stacklevel=3)
    return df


def _frame(pd: Any, rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=list(RESULT_COLUMNS))


def _scaled(df: pd.DataFrame, divisor: float) -> pd.DataFrame:
    """``df`` with its ``poignancy`` column divided by ``divisor`` (a copy; 1 returns it)."""
    return df if divisor == 1 else df.assign(poignancy=df["poignancy"] / divisor)
