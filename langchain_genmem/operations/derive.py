"""A front end's arguments, derived from an operation's declaration.

A front end that takes an operation as separate arguments (an MCP tool, say) names which
declared fields it offers and under what names (:class:`Argument`); their types, bounds,
patterns and defaults come from the declaration. Only what a front end has reason to say
otherwise is declared beside it: its words for a model, or a default its readers need (see
:mod:`~langchain_genmem.core.recall_sizes`).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field

from langchain_genmem.operations.fields import field_kind, plain_value

_DECLARED: Any = object()
"""The default of an :class:`Argument` that keeps the declaration's."""


@dataclass(frozen=True)
class Argument:
    """One argument of a front end: a declared field, maybe with its own words or default.

    Attributes:
        field: the declared field it fills.
        description: the front end's words for it; None keeps the declaration's.
        default: the front end's default; the declaration's unless given.
    """

    field: str
    description: str | None = None
    default: Any = _DECLARED


def parameters(
    model: type[BaseModel], arguments: Mapping[str, Argument]
) -> list[inspect.Parameter]:
    """Keyword-only parameters for ``arguments``, typed, bounded and defaulted by ``model``.

    Each parameter's annotation is the declared field's type with its bounds, patterns and
    JSON schema, the plain-kind check every request makes (no boolean for a number, no
    number for a boolean, no NUL), and the argument's description.

    Args:
        model: the declared request.
        arguments: the front end's argument names, each with the field it fills.

    Returns:
        The parameters, in the order of ``arguments``.

    Raises:
        KeyError: an argument names a field the declaration does not have.
    """
    out = []
    for name, argument in arguments.items():
        info = model.model_fields[argument.field]
        kind = field_kind(model, argument.field)
        annotation: Any = Annotated[  # a value built at run time, not a type alias
            info.rebuild_annotation(),
            BeforeValidator(lambda value, kind=kind: plain_value(value, kind)),
            Field(description=argument.description or info.description,
                  json_schema_extra=info.json_schema_extra),
        ]
        default = argument.default
        if default is _DECLARED:
            default = inspect.Parameter.empty if info.is_required() else info.default
        out.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                     annotation=annotation, default=default))
    return out


def declared_fields(arguments: Mapping[str, Any], names: Mapping[str, Argument]) -> dict[str, Any]:
    """A front end's arguments by the declared fields they fill.

    Args:
        arguments: the values, by the front end's names.
        names: the front end's :class:`Argument` of each name.

    Returns:
        The values by field name; names not in ``names`` are left out.
    """
    return {names[name].field: value for name, value in arguments.items() if name in names}
