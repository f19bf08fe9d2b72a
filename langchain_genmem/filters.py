"""Safe filter expressions over memory tables, such as ``relevance > 0.5 and type == "thought"``.

The text is parsed by a small grammar and evaluated as vectorised column operations; it is
never given to ``eval``, ``exec`` or ``DataFrame.query``. The grammar, whole::

    expression  := term ("or" term)*
    term        := factor ("and" factor)*
    factor      := "not" factor | "(" expression ")" | test
    test        := column ["not"] "in" "[" [literal ("," literal)*] "]"
                 | operand ("==" | "!=" | "<" | "<=" | ">" | ">=") operand
    operand     := column | literal          (at least one side of a test is a column)
    literal     := number | "double-quoted" | 'single-quoted'
    column      := a name of the table's columns

``and``, ``or``, ``not`` and ``in`` are case-insensitive. Anything else (function calls,
attributes, subscripts, lambdas, comprehensions, arithmetic) is a
:class:`~langchain_genmem.core.errors.ValidationError`, as is a name that is not a column.

Example:
    .. code-block:: python

        from langchain_genmem.filters import apply_filter, parse_filter

        expr = parse_filter('relevance > 0.5 and type in ["event", "thought"]')
        expr.columns                    # {"relevance", "type"}
        apply_filter(df, expr)          # the rows that pass
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache, reduce
from typing import TYPE_CHECKING, Any, Protocol

from langchain_genmem.core.errors import ValidationError
from langchain_genmem.core.extras import require_extra

if TYPE_CHECKING:
    import pandas as pd
    import pyparsing as pp

MAX_LENGTH = 2000
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_NUMBER = r"[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?"
_STRINGS = r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'"
# Every token the grammar knows; the first character outside them is reported by position.
_TOKEN = re.compile(rf"\s+|{_NAME}|{_NUMBER}|{_STRINGS}|==|!=|<=|>=|<|>|[()\[\],]")
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_HINT = (
    "use comparisons of columns with numbers or quoted strings (==, !=, <, <=, >, >=, "
    "in [...]) joined by and / or / not, e.g. relevance > 0.5 and type == \"thought\""
)


class Expr(Protocol):
    """A parsed filter expression."""

    @property
    def columns(self) -> frozenset[str]:
        """The column names the expression reads."""

    def mask(self, df: pd.DataFrame) -> pd.Series:
        """The rows of ``df`` that pass, as a boolean Series."""


@dataclass(frozen=True)
class Column:
    """A column of the table.

    Attributes:
        name: the column's name.
    """

    name: str

    def value(self, df: pd.DataFrame) -> Any:
        """The column's Series."""
        return df[self.name]


@dataclass(frozen=True)
class Constant:
    """A number or a string.

    Attributes:
        value: the value.
    """

    value: float | int | str


@dataclass(frozen=True)
class Compare:
    """``left <op> right``, at least one side being a column.

    Attributes:
        left: left operand.
        op: the operator.
        right: right operand.
    """

    left: Column | Constant
    op: str
    right: Column | Constant

    @property
    def columns(self) -> frozenset[str]:
        """The column names the comparison reads."""
        return frozenset(x.name for x in (self.left, self.right) if isinstance(x, Column))

    def mask(self, df: pd.DataFrame) -> pd.Series:
        """Rows where the comparison holds."""
        left, right = (_operand(x, df) for x in (self.left, self.right))
        try:
            result = _COMPARE[self.op](left, right)
        except (TypeError, ValueError) as e:
            held = "; ".join(f"{x.name} holds {_kind(df[x.name])}"
                             for x in (self.left, self.right) if isinstance(x, Column))
            msg = f"filter: cannot compare {_show(self.left)} {self.op} {_show(self.right)}: {held}"
            raise ValidationError(msg, field="filter") from e
        return result.fillna(False).astype(bool)


@dataclass(frozen=True)
class Member:
    """``column in [values]`` (or ``not in``).

    Attributes:
        column: the column.
        values: the allowed values.
        negated: True for ``not in``.
    """

    column: Column
    values: tuple[float | int | str, ...]
    negated: bool = False

    @property
    def columns(self) -> frozenset[str]:
        """The column name the test reads."""
        return frozenset({self.column.name})

    def mask(self, df: pd.DataFrame) -> pd.Series:
        """Rows whose value is (or is not) among the values."""
        found = self.column.value(df).isin(list(self.values))
        return ~found if self.negated else found


@dataclass(frozen=True)
class Not:
    """``not <expr>``.

    Attributes:
        expr: the negated expression.
    """

    expr: Expr

    @property
    def columns(self) -> frozenset[str]:
        """The column names the expression reads."""
        return self.expr.columns

    def mask(self, df: pd.DataFrame) -> pd.Series:
        """Rows where the inner expression fails."""
        return ~self.expr.mask(df)


@dataclass(frozen=True)
class Join:
    """``a and b and ...`` or ``a or b or ...``.

    Attributes:
        op: ``"and"`` or ``"or"``.
        parts: the joined expressions.
    """

    op: str
    parts: tuple[Expr, ...]

    @property
    def columns(self) -> frozenset[str]:
        """The column names the expressions read."""
        return frozenset().union(*(p.columns for p in self.parts))

    def mask(self, df: pd.DataFrame) -> pd.Series:
        """Rows where all (``and``) or any (``or``) of the parts hold."""
        combine = operator.and_ if self.op == "and" else operator.or_
        return reduce(combine, (p.mask(df) for p in self.parts))


def parse_filter(text: str) -> Expr:
    """Parse a filter expression (see the module docstring for the grammar).

    Args:
        text: the expression.

    Returns:
        The parsed expression.

    Raises:
        ValidationError: the text is not an expression of the grammar.
    """
    if not isinstance(text, str):
        msg = f"filter: expected a text, got {type(text).__name__}"
        raise ValidationError(msg, field="filter")
    if not text.strip():
        msg = f"filter: empty; {_HINT}"
        raise ValidationError(msg, field="filter")
    if len(text) > MAX_LENGTH:
        msg = f"filter: longer than {MAX_LENGTH} characters"
        raise ValidationError(msg, field="filter")
    _check_tokens(text)
    pp = _pyparsing()
    try:
        return _grammar().parse_string(text, parse_all=True)[0]
    except pp.ParseBaseException as e:
        near = repr(text[e.loc : e.loc + 20]) if e.loc < len(text) else "the end"
        why = f" ({e.msg})" if isinstance(e, pp.ParseFatalException) else ""
        msg = f"filter: cannot read {text!r} at position {e.loc} near {near}{why}; {_HINT}"
        raise ValidationError(msg, field="filter") from None
    except RecursionError:
        msg = "filter: nested too deeply"
        raise ValidationError(msg, field="filter") from None


def check_columns(expr: Expr, columns: Iterable[str]) -> None:
    """Raise unless every column the expression reads exists.

    Args:
        expr: the parsed expression.
        columns: the table's columns.

    Raises:
        ValidationError: a name that is not a column; the message lists the columns.
    """
    known = list(columns)
    unknown = sorted(expr.columns - set(known))
    if unknown:
        msg = f"filter: unknown column {unknown[0]!r}; columns are {', '.join(known)}"
        raise ValidationError(msg, field="filter")


def apply_filter(df: pd.DataFrame, expr: str | Expr) -> pd.DataFrame:
    """The rows of ``df`` that pass the filter, in their order.

    Args:
        df: the table.
        expr: a filter text or a parsed expression.

    Returns:
        The passing rows.

    Raises:
        ValidationError: a bad expression, an unknown column, or values that cannot be
            compared (a number with a text column, say).
    """
    parsed = parse_filter(expr) if isinstance(expr, str) else expr
    check_columns(parsed, df.columns)
    return df[parsed.mask(df)]


# ---------------------------------------------------------------------------- grammar


def _pyparsing() -> Any:
    """pyparsing, imported when a filter is first parsed (it comes with the pandas extra)."""
    return require_extra("pyparsing", "pandas", "a filter expression")


@lru_cache(maxsize=1)
def _grammar() -> pp.ParserElement:
    pp = _pyparsing()
    and_, or_, not_, in_ = (pp.CaselessKeyword(w) for w in ("and", "or", "not", "in"))
    reserved = and_ | or_ | not_ | in_
    name = (~reserved + pp.Regex(_NAME)).set_name("column")
    column = name.copy().set_parse_action(lambda t: Column(t[0]))
    number = pp.Regex(_NUMBER).set_name("number")
    number.set_parse_action(lambda s, loc, t: Constant(_number(s, loc, t[0])))
    string = (pp.QuotedString('"', esc_char="\\") | pp.QuotedString("'", esc_char="\\")).set_name(
        "string"
    )
    string.set_parse_action(lambda t: Constant(t[0]))
    literal = number | string
    operand = literal | column
    values = pp.Suppress("[") + pp.Opt(pp.DelimitedList(literal)) + pp.Suppress("]")
    member = column + pp.Opt(not_)("negated") + in_ + pp.Group(values)("values")
    member.set_parse_action(_member)
    compare = operand + pp.one_of("== != <= >= < >") + operand
    compare.set_parse_action(_compare)
    return pp.infix_notation(
        member | compare,
        [
            (not_, 1, pp.OpAssoc.RIGHT, lambda t: Not(t[0][1])),
            (and_, 2, pp.OpAssoc.LEFT, lambda t: Join("and", tuple(t[0][0::2]))),
            (or_, 2, pp.OpAssoc.LEFT, lambda t: Join("or", tuple(t[0][0::2]))),
        ],
    )


def _check_tokens(text: str) -> None:
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            msg = f"filter: unexpected {text[pos]!r} at position {pos} of {text!r}; {_HINT}"
            raise ValidationError(msg, field="filter")
        pos = match.end()


def _member(s: str, loc: int, t: pp.ParseResults) -> Member:
    return Member(t[0], tuple(v.value for v in t["values"]), negated="negated" in t)


def _compare(s: str, loc: int, t: pp.ParseResults) -> Compare:
    left, op, right = t
    if not (isinstance(left, Column) or isinstance(right, Column)):
        raise _pyparsing().ParseFatalException(s, loc, "a comparison needs a column on one side")
    return Compare(left, op, right)


def _number(s: str, loc: int, text: str) -> int | float:
    """The number of a literal; one beyond what a float column holds is a parse error."""
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 20 else f"{text[:20]}… ({len(text)} characters)"
        msg = f"the number {shown} is out of range (at most about 1.8e308)"
        raise _pyparsing().ParseFatalException(s, loc, msg)
    return int(text) if text.lstrip("+-").isdigit() and abs(value) < 2**63 else value


def _operand(x: Column | Constant, df: pd.DataFrame) -> Any:
    return x.value(df) if isinstance(x, Column) else x.value


def _kind(column: pd.Series) -> str:
    """What a column holds, in words a filter's author can act on."""
    import pandas as pd

    if pd.api.types.is_datetime64_any_dtype(column):
        return 'times (compare with e.g. "2023-02-13 07:00:00")'
    if pd.api.types.is_numeric_dtype(column):
        return "numbers"
    return "texts or lists"


def _show(x: Column | Constant) -> str:
    return x.name if isinstance(x, Column) else repr(x.value)
