"""Namespaces: the labels ``BaseStore`` accepts, and the persona that holds a namespace.

``BaseStore`` takes any non-empty text without a period or NUL as a label (newlines, tabs,
spaces, any script). A persona name has stricter rules (no control character, not blank, at
most :data:`~langchain_genmem.core.validation.PERSONA_NAME_MAX` characters), so
:func:`default_persona` writes a namespace as a valid name: labels joined by ``"/"``,
control characters written as escapes (``"alice\\n"`` -> ``alice\\n``), a blank name's
spaces written as ``\\u0020``, and a name that would be too long cut to its leading labels
that fit (the first label cut short when even it does not). The map keeps prefixes: every
namespace under a prefix maps to the prefix's persona or to one below it (``"a/b"`` ->
``"a/b/..."``). Several namespaces may share a persona; an item keeps its namespace as
given whatever its persona, so labels are always read back exactly.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    Op,
    PutOp,
    SearchOp,
    validate_op_namespace,
)

from langchain_genmem.core.errors import ValidationError
from langchain_genmem.core.validation import PERSONA_NAME_MAX

__all__ = ["InvalidNamespace", "checked_op", "default_persona"]

SEPARATOR = "/"


class InvalidNamespace(ValidationError, InvalidNamespaceError):
    """A namespace ``BaseStore`` refuses (an empty label, a period, NUL, not a text...)."""


def default_persona(namespace: Sequence[str]) -> str:
    """The default persona of a namespace: its labels joined by ``"/"``, made a valid name.

    Args:
        namespace: the namespace (any labels ``BaseStore`` accepts).

    Returns:
        The persona name (``("memories", "u1")`` -> ``"memories/u1"``).
    """
    labels = [_legible(label) for label in namespace]
    name = SEPARATOR.join(labels)
    if len(name) > PERSONA_NAME_MAX:
        name = labels[0][:PERSONA_NAME_MAX]
        for label in labels[1:]:
            longer = name + SEPARATOR + label
            if len(longer) > PERSONA_NAME_MAX:
                break
            name = longer
    if name and not name.strip():  # a blank name is no name: write its spaces out
        name = "".join(f"\\u{ord(c):04x}" for c in name)[:PERSONA_NAME_MAX]
    return name


def _legible(label: str) -> str:
    """A label with its control characters and unpaired surrogates written as escapes."""
    if all(unicodedata.category(c) not in ("Cc", "Cs") for c in label):
        return label
    return "".join(c.encode("unicode_escape", "backslashreplace").decode("ascii")
                   if unicodedata.category(c) in ("Cc", "Cs") else c for c in label)


def checked_op(op: Op) -> Op:
    """An operation with its namespace as a tuple, checked as ``BaseStore`` checks labels.

    Operations passed to ``batch`` directly skip the checks of ``put``, ``get`` and the
    others; this applies them to every operation (a list namespace is read as a tuple).

    Args:
        op: the operation.

    Returns:
        The operation, its namespace a tuple.

    Raises:
        InvalidNamespace: a label ``BaseStore`` refuses (also an ``InvalidNamespaceError``).
    """
    if isinstance(op, (GetOp, PutOp)) and not isinstance(op.namespace, tuple):
        op = op._replace(namespace=_labels(op.namespace))
    elif isinstance(op, SearchOp) and not isinstance(op.namespace_prefix, tuple):
        op = op._replace(namespace_prefix=_labels(op.namespace_prefix))
    elif isinstance(op, ListNamespacesOp) and op.match_conditions:
        op = op._replace(match_conditions=tuple(
            c if isinstance(c.path, tuple) else c._replace(path=_labels(c.path))
            for c in op.match_conditions))
    try:
        validate_op_namespace(op)
    except InvalidNamespaceError as e:
        raise InvalidNamespace(f"namespace: {e}", field="namespace") from None
    if isinstance(op, PutOp) and not op.namespace:
        msg = "namespace: expected at least one label, got ()"
        raise InvalidNamespace(msg, field="namespace")
    return op


def _labels(given: object) -> tuple[str, ...]:
    """A namespace given as a list (or another sequence) as a tuple."""
    if isinstance(given, str) or not isinstance(given, Sequence):
        msg = f"namespace: expected a tuple of labels, got {given!r}"
        raise InvalidNamespace(msg, field="namespace")
    return tuple(given)
