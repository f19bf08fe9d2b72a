"""Evaluation: retrieval metrics on labelled questions, and the weights learned from them.

:mod:`~langchain_genmem.evaluation.metrics` (the former ``evaluation`` module; its
names are importable from this package as before) and
:mod:`~langchain_genmem.evaluation.tuning`.
"""

from langchain_genmem.evaluation.metrics import (
    DEFAULT_KS,
    EXAMPLE_FIELDS,
    EvaluationReport,
    Example,
    Known,
    QueryResult,
    Ranked,
    System,
    evaluate,
    load_examples,
    ndcg_at_k,
    recall_at_k,
    split_examples,
    split_stratified,
)

__all__ = [
    "DEFAULT_KS",
    "EXAMPLE_FIELDS",
    "EvaluationReport",
    "Example",
    "Known",
    "QueryResult",
    "Ranked",
    "System",
    "evaluate",
    "load_examples",
    "ndcg_at_k",
    "recall_at_k",
    "split_examples",
    "split_stratified",
]
