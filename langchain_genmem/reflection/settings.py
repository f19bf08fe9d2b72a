"""The knobs of a reflection, declared once: :class:`ReflectionSettings`.

Every entry point of reflection takes ``settings=`` (the graph, the step-by-step functions,
the thoughts after a conversation, the chat agent, the service, ``genmem reflect``); the
keyword arguments each took before (``k=``, ``max_insights=``...) still work, as overrides
of the settings' fields: :meth:`ReflectionSettings.merged` is the one place that builds
the settings a call uses.

Example:
    .. code-block:: python

        from langchain_genmem import CallLimits, ReflectionSettings

        settings = ReflectionSettings(k=10, output="text", max_calls=12,
                                      limits=CallLimits(timeout=120))
        graph = create_reflection_graph(model, stream, settings=settings)
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from langchain_genmem.core.errors import ValidationError
from langchain_genmem.llm.limits import CallLimits, FrozenSettings, OutputForm

__all__ = ["UNSET", "ReflectionSettings"]


class _Unset:
    """The value of a keyword argument not given (None may mean something)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()
"""The default of the keyword arguments that override a field of :class:`ReflectionSettings`."""


class ReflectionSettings(FrozenSettings):
    """How a reflection runs: sizes, trigger, output form, call bounds and budget.

    A bad value raises a one-line :class:`~langchain_genmem.core.errors.ValidationError`
    naming its field (``ReflectionSettings: k: Input should be greater than or equal to 1
    (got 0)``).

    Attributes:
        k: memories retrieved per question (30, the original's).
        n_focal_points: questions (focal points) asked (3).
        n_insights: insights asked per question (5).
        max_insights: the most insights kept per question; more are condensed (5).
        window: memories in the window (window trigger, and counters after a reset) (50).
        trigger: ``"counters"`` (the original's) or ``"window"`` (the stepwise design's).
        threshold: the window trigger's threshold; None for the persona's trigger max.
        relevance_min: keep only evidence whose normalised relevance is above this; None
            keeps all.
        output: ``"auto"`` (structured replies where the server takes JSON schemas, else
            text), ``"structured"`` or ``"text"`` (the original's text prompts).
        limits: ``max_tokens`` per kind of reply, timeout and retries of every call.
        max_calls: the most model calls one reflection makes (the importance ratings
            included); when they are spent the remaining steps are skipped and the reason
            is recorded. None: no budget.
    """

    k: int = Field(30, ge=1, strict=True)
    n_focal_points: int = Field(3, ge=1, strict=True)
    n_insights: int = Field(5, ge=1, strict=True)
    max_insights: int = Field(5, ge=1, strict=True)
    window: int = Field(50, ge=1, strict=True)
    trigger: Literal["counters", "window"] = "counters"
    threshold: float | None = Field(None, strict=True, allow_inf_nan=False)
    relevance_min: float | None = Field(None, strict=True, allow_inf_nan=False)
    output: OutputForm = "auto"
    limits: CallLimits = Field(default_factory=CallLimits)
    max_calls: int | None = Field(40, ge=1, strict=True)

    @classmethod
    def merged(cls, settings: ReflectionSettings | None, **given: Any) -> ReflectionSettings:
        """The settings a call uses: ``settings`` with the keyword arguments given.

        Args:
            settings: the settings passed (None: the defaults).
            **given: fields to override; those left at :data:`UNSET` are not given.

        Returns:
            The settings.

        Raises:
            ValidationError: ``settings`` is not a ReflectionSettings, or a bad value
                (naming its field).
        """
        if settings is not None and not isinstance(settings, ReflectionSettings):
            msg = f"settings: expected a ReflectionSettings, got {type(settings).__name__}"
            raise ValidationError(msg, field="settings")
        changes = {name: value for name, value in given.items() if value is not UNSET}
        if settings is None:
            return cls(**changes)
        if not changes:
            return settings
        return cls(**{**dict(settings), **changes})
