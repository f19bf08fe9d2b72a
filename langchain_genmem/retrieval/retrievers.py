"""GenerativeAgentsRetriever: the weighted retrieval of Generative Agents as a LangChain retriever.

Every candidate memory (the persona's events and thoughts, as in the original, and chats
only when a filter asks for them, ``types=["chat"]``; memories whose ``embedding_key``
contains ``"idle"`` skipped, as in the original, unless ``idle_filter=False``) is scored
exactly by recency, relevance and importance (:mod:`langchain_genmem.numerics.scoring`); the best
``k`` come back as Documents and their ``last_accessed`` becomes the stream's clock time.

Relevance is the dense cosine (default, the original's), the BM25 lexical score
(``relevance="lexical"``, :mod:`langchain_genmem.numerics.lexical`, no query embedding) or their
fusion (``"hybrid"``: ``(1 - w) * dense + w * lexical`` over min-max normalised parts,
:func:`~langchain_genmem.numerics.scoring.fuse_relevance`); left as None, the persona's
``relevance_mode`` and ``lexical_weight`` settings decide.

Example:
    .. code-block:: python

        from langchain_genmem import GenerativeAgentsRetriever, MemoryStream

        stream = MemoryStream("Maria Lopez", path=".genmem")
        retriever = GenerativeAgentsRetriever(stream=stream, k=5)
        docs = retriever.invoke("What is Maria working on?")
        docs[0].metadata["score"], docs[0].metadata["relevance"]
        retriever.retrieve_many(["Maria's studies", "Klaus Mueller"])  # new_retrieve

Time-aware retrieval: ``invoke(q, created_after=..., created_before=..., types=[...],
min_poignancy=...)`` (or the same constructor fields) limits the candidates before scoring;
see :mod:`langchain_genmem.numerics.candidate_filter` for the rule and why normalisation is over the
filtered set.

Time in the question: with ``time_in_query="narrow"`` a question that names a time ("last
week", "in late March", "上周日", "五月下旬"; :mod:`langchain_genmem.retrieval.time_window`)
scores only the memories created in that period, relative to the stream's clock (all of
them when none is); ``"weight"`` adds a bounded bonus to those memories' scores instead.
The report (``time_window``, ``time_use``) and each Document's ``time_window`` say what was
read. ``recency_mode="reverie"`` ignores the option, as it stays the original exactly.

Expiration: the original writes ``expiration`` on thoughts and never reads it. Here expired
memories are skipped unless ``include_expired=True``; ``recency_mode="reverie"`` ignores
expiration, as the original does.

Corrections: a memory another live memory supersedes (``supersedes=[...]`` on an add; see
:mod:`langchain_genmem.memory.corrections`) is left out unless ``include_superseded=True``
and counted in ``skipped_filtered``; ``recency_mode="reverie"`` scores it, as it scores
expired ones.

Access times: the in-process view is exact at once; the store is written behind (within the
stream's ``flush_interval``, on ``stream.close()`` and at interpreter exit), so a retrieval
never waits on a Chroma write. A crash can lose access times, never a memory.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from langchain_genmem.retrieval.report import RetrievalReport
from langchain_genmem.retrieval.weighted import WeightedRetrieval

__all__ = ["GenerativeAgentsRetriever", "RetrievalReport", "WeightedRetrieval"]


class GenerativeAgentsRetriever(WeightedRetrieval, BaseRetriever):
    """Scores every memory of a persona by recency, relevance and importance; returns the top k.

    Setup:
        A :class:`~langchain_genmem.MemoryStream` holds the memories. Weights and decay left
        as None are the persona's own (stored with the stream, like the original's
        ``scratch.json``: 1.0, 1.0, 1.0 and 0.99 unless changed).

    Key init args:
        stream: the persona's memory stream (held as ``memory_stream``, since ``stream``
            is the Runnable method that streams output).
        k: how many documents (``invoke(q, k=5)`` overrides it per call).
        recency_mode: ``"hours"`` (default), ``"rank"`` or ``"reverie"`` (the original code).
        recency_decay, recency_w, relevance_w, importance_w: None = the persona's values.
        gains: global gains, default ``(0.5, 3.0, 2.0)``.
        include_expired: score expired memories too.
        include_superseded: score memories a newer memory supersedes too.
        update_access: set ``last_accessed`` of returned memories (the original does).
        score_in: ``"process"`` (default: numpy over the stream's in-process cache) or
            ``"database"`` (one scan in PostgreSQL scores every candidate, for callers
            that must not hold the vectors; same ids, order and scores).
        created_after, created_before, types, min_poignancy: the candidate filter of every
            call (``created_after <= created < created_before``; see
            :mod:`langchain_genmem.numerics.candidate_filter`); a call may pass its own, which
            replace these field by field, plus ``node_ids``.
        first_pass: the approximate cosines every memory gets before the exact rescoring
            (:mod:`langchain_genmem.numerics.quantized`): ``"auto"`` (int8 from 4,096 memories when
            simsimd is installed, else float32), ``"int8"`` or ``"float32"``; the result is
            the same exact top k either way, only the time differs.
        relevance: ``"dense"``, ``"lexical"`` or ``"hybrid"``; None = the persona's
            ``relevance_mode`` (``"dense"`` unless changed).
        lexical_weight: the hybrid's lexical share ``w`` in [0, 1]; None = the persona's
            ``lexical_weight``.
        idle_filter: leave out memories whose embedding_key holds ``"idle"`` (the original's
            rule, default); False keeps them (a physics persona's "the idle reactor").
        time_in_query: what a time the question names does: ``"off"`` (default),
            ``"narrow"`` (only memories created in that period; all when none is) or
            ``"weight"`` (those memories gain ``TIME_BOOST`` x relevance weight x gain;
            scored in process only). Ignored with ``recency_mode="reverie"``.
        scale: how the parts are put on one scale: ``"candidates"`` (default, the paper's
            min-max over the memories of each retrieval, so a score compares only with the
            scores of the same call) or ``"absolute"`` (recency as computed, importance as
            poignancy / 10, the cosine itself, BM25 as a share of the query's ceiling: scores
            compare across calls, and a lone unrelated memory scores low; scored in process
            only). See :data:`~langchain_genmem.numerics.scoring.Scale`.

    Invoke:
        .. code-block:: python

            docs = retriever.invoke("Klaus Mueller", k=3)
            docs = retriever.invoke("the party", created_after="2023-02-13",
                                    created_before="2023-02-14", types=["event"])
            for d in docs:
                print(d.metadata["node_id"], d.metadata["score"], d.page_content)

    Metadata of each Document: ``node_id``, ``type``, ``created``, ``last_accessed``,
    ``poignancy``, ``score``, ``recency``, ``relevance``, ``importance`` (normalised; ``relevance``
    is the fused value used), ``dense`` and ``lexical`` (its normalised parts), ``cosine``
    and ``bm25`` (raw; None for a part the mode does not compute: ``cosine`` and ``dense``
    in ``"lexical"`` mode, ``lexical`` and ``bm25`` in ``"dense"`` mode), ``lexical_share``
    (so ``relevance = (1 - lexical_share) * dense + lexical_share * lexical``: the hybrid's
    lexical weight, or 0 when every candidate has the same BM25, e.g. no query word occurs
    in any memory, and 1 when every one has the same cosine), ``rank``, ``depth``,
    ``subject``, ``predicate``, ``object``, ``keywords``, ``filling``, ``embedding_key``,
    ``expiration``, ``persona``; and, of the
    retrieval as a whole, ``candidates`` (memories scored), ``skipped_expired`` and
    ``skipped_idle`` and ``skipped_filtered`` (memories left out), so nothing is dropped
    without a word.

    Filters choose the candidates; scoring stays exact over them and normalises over the
    filtered set, so the ranking equals that of a stream holding only those memories.

    Arguments the class does not take, and values out of range, raise a
    :class:`~langchain_genmem.core.errors.ValidationError` naming the field
    (:mod:`langchain_genmem.core.validation` holds the rules).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, populate_by_name=True, extra="forbid")

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        **filters: Any,
    ) -> list[Document]:
        return self.retrieve_with_report(query, k=k, **filters).documents

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        **filters: Any,
    ) -> list[Document]:
        report = await asyncio.to_thread(
            functools.partial(self.retrieve_with_report, query, k, **filters)
        )
        return report.documents
