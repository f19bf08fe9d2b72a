"""A store search's ``filter``: tests on value fields, and the retrieval filters it may carry.

``{"kind": "food"}`` is equality; ``{"n": {"$gte": 3}}`` uses an operator (``$eq $ne $gt
$gte $lt $lte``); a nested dict matches a nested value. The names in :data:`TIME_FILTERS` are
not value fields: they are the retrieval's candidate filters
(:mod:`langchain_genmem.numerics.candidate_filter`). Namespace match conditions of
``list_namespaces`` (``"*"`` matches any label) are tested here too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langgraph.store.base import MatchCondition

from langchain_genmem.core.errors import ValidationError
from langchain_genmem.numerics.candidate_filter import make_filter
from langchain_genmem.numerics.item_masks import field_value

__all__ = ["OPERATORS", "TIME_FILTERS", "compare", "matches", "namespace_matches",
           "split_filter"]

TIME_FILTERS = ("created_after", "created_before", "types", "min_poignancy")
"""Filter names that are the retrieval's candidate filters, not value fields."""

OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: float(a) > float(b),
    "$gte": lambda a, b: float(a) >= float(b),
    "$lt": lambda a, b: float(a) < float(b),
    "$lte": lambda a, b: float(a) <= float(b),
}
"""The comparison operators a value test may use."""


def split_filter(given: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The value-field tests and the retrieval filters of a search's ``filter``.

    Args:
        given: the search's filter (None: none).

    Returns:
        ``(value tests, retrieval filters)``.

    Raises:
        ValidationError: a bad retrieval filter value or an unknown operator, naming it.
    """
    given = dict(given or {})
    flt = {k: given.pop(k) for k in TIME_FILTERS if k in given}
    make_filter(**flt)  # refuse bad values now, naming the field
    _check_operators(given)
    return given, flt


def _check_operators(tests: Mapping[str, Any]) -> None:
    for key, want in tests.items():
        if str(key).startswith("$") and key not in OPERATORS:
            msg = f"filter: unknown operator {key!r}; operators are {', '.join(OPERATORS)}"
            raise ValidationError(msg, field="filter")
        if isinstance(want, Mapping):
            _check_operators(want)


def matches(value: Mapping[str, Any], tests: Mapping[str, Any]) -> bool:
    """Whether a value passes every test of a filter.

    Args:
        value: the item's value.
        tests: field -> wanted value or ``{operator: operand}``.

    Returns:
        Whether it passes.
    """
    return all(compare(field_value(value, k), want) for k, want in tests.items())


def compare(have: Any, want: Any) -> bool:
    """Whether one field's value passes its test (a failed comparison is no match).

    Args:
        have: the field's value (None when missing).
        want: the wanted value, ``{operator: operand}`` or a nested filter.

    Returns:
        Whether it passes.
    """
    if isinstance(want, Mapping) and any(str(k).startswith("$") for k in want):
        for op, operand in want.items():
            try:
                if not OPERATORS[op](have, operand):
                    return False
            except (TypeError, ValueError):
                return False
        return True
    if isinstance(want, Mapping):
        return isinstance(have, Mapping) and matches(have, want)
    return have == want


def namespace_matches(cond: MatchCondition, ns: tuple[str, ...]) -> bool:
    """Whether a namespace passes a ``list_namespaces`` match condition.

    Args:
        cond: a prefix or suffix condition; ``"*"`` matches any label.
        ns: the namespace.

    Returns:
        Whether it passes.
    """
    path = tuple(cond.path)
    if len(ns) < len(path):
        return False
    part = ns[: len(path)] if cond.match_type == "prefix" else ns[len(ns) - len(path) :]
    return all(p in ("*", n) for p, n in zip(path, part, strict=True))
