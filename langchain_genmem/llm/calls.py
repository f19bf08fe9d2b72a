"""Every model call of the package: bounded, and structured where the server offers it.

:class:`ModelCaller` sends :class:`Call` s to one chat model:

* Bounds: each call carries the ``max_tokens`` of its kind of reply and the timeout of
  :class:`~langchain_genmem.llm.limits.CallLimits` (bound on the call, so the model's own
  settings stay as they are). Only models whose class takes them get them: OpenAI's and
  OpenAI-compatible ones (``ChatOpenAI`` and subclasses, also inside ``model.bind(...)``).
  Any other model (LangChain's fake models among them) is called as it is, with the bounds
  it was built with.
* Output form (:data:`OutputForm`): ``"structured"`` asks with the call's JSON schema
  (``response_format`` of type ``json_schema``; llama.cpp enforces it by grammar) and its
  structured prompt; ``"text"`` asks with the text prompt of the original and reads the
  reply leniently; ``"auto"`` (the default) is structured where the model's class takes
  schemas, and text otherwise or once the server refused a schema (an HTTP 400 that
  mentions the schema or ``response_format``): the refusal is remembered for that model
  object, so it is asked once, and the same calls are sent again in text form.
* Errors: an error of the OpenAI client (a server that does not answer within the timeout,
  one that cannot be reached) is raised as the one-line
  :class:`~langchain_genmem.core.errors.ChatModelError` of
  :func:`~langchain_genmem.llm.chat.model_error`, whichever ``ChatOpenAI`` was given.
* Replies come back as text in the text form either way
  (:func:`~langchain_genmem.llm.shapes.read_structured`), so the readers of
  :mod:`~langchain_genmem.llm.parsers` read one form. A structured reply cut by
  ``max_tokens`` (``openai.LengthFinishReasonError``) or not matching its schema comes
  back as ``""``: an unreadable reply of that item, never an exception.
"""

from __future__ import annotations

import asyncio
import re
import sys
import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableBinding, RunnableConfig

from langchain_genmem.core.errors import ChatModelError, ValidationError
from langchain_genmem.core.text import clean_text
from langchain_genmem.llm.chat import model_error
from langchain_genmem.llm.limits import CallLimits, OutputForm, ReplyKind
from langchain_genmem.llm.shapes import Shape, read_structured

__all__ = [
    "OUTPUT_FORMS",
    "Call",
    "ModelCaller",
    "OutputForm",
    "bounded",
    "client_errors",
    "reply_text",
    "schema_refused",
    "takes_call_options",
]

OUTPUT_FORMS: tuple[str, ...] = ("auto", "structured", "text")

_OPENAI_MODELS = "langchain_openai.chat_models.base"  # where BaseChatOpenAI is defined
_REFUSAL = re.compile(r"json[ _-]?schema|response_format|grammar|parser generation", re.I)
_refused: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
_refused_lock = threading.Lock()


@dataclass(frozen=True)
class Call:
    """One call: its text form and, when it has one, its structured form.

    Attributes:
        messages: the messages of the text form.
        kind: what it asks for (its ``max_tokens``).
        n: how many items a batch holds.
        shape: the structured reply asked for; None: text only.
        structured: the messages of the structured form (None: ``messages``).
    """

    messages: list[BaseMessage]
    kind: ReplyKind
    n: int = 1
    shape: Shape | None = None
    structured: list[BaseMessage] | None = None


def _target(model: Any) -> Any:
    while isinstance(model, RunnableBinding):
        model = model.bound
    return model


def takes_call_options(model: Any) -> bool:
    """Whether calls to ``model`` may carry ``max_tokens``, ``timeout`` and a schema.

    Args:
        model: a chat model, or a ``model.bind(...)`` of one.

    Returns:
        True for OpenAI's chat models and their subclasses (langchain-openai installed).
    """
    # An OpenAI chat model exists only in a process that imported its module: where none
    # did, the answer is no without importing it (a second of start-up for a command that
    # was about to say that no model is configured)
    module = sys.modules.get(_OPENAI_MODELS)
    return module is not None and isinstance(_target(model), module.BaseChatOpenAI)


def bounded(model: Any, limits: CallLimits, kind: ReplyKind, n: int = 1, **options: Any) -> Any:
    """``model`` with the ``max_tokens`` of ``kind`` and the timeout bound, when it takes them.

    Args:
        model: a chat model.
        limits: the bounds.
        kind: what the call asks for.
        n: how many items a batch holds.
        **options: more call options (``response_format``) for a model that takes them.

    Returns:
        ``model.bind(...)``, or ``model`` itself for a model that takes no call options.
    """
    if not takes_call_options(model):
        return model
    return model.bind(max_tokens=limits.max_tokens(kind, n), timeout=limits.timeout, **options)


def schema_refused(error: BaseException) -> bool:
    """Whether an error says the server refuses a JSON schema (an HTTP 400 about it).

    The error's causes are looked at too (:func:`~langchain_genmem.llm.chat.model_error`
    wraps the client's error in a ChatModelError).

    Args:
        error: what the call raised.

    Returns:
        True for a 400 whose message mentions the schema, ``response_format`` or grammar.
    """
    seen: BaseException | None = error
    for _ in range(5):
        if seen is None:
            return False
        if getattr(seen, "status_code", None) == 400 and _REFUSAL.search(str(seen)):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _cut(error: BaseException) -> bool:
    """A structured reply cut by ``max_tokens`` or refused by a content filter."""
    return type(error).__name__ in ("LengthFinishReasonError", "ContentFilterFinishReasonError")


class _Refused(Exception):
    """The server refused a schema (internal: the batch is sent again as text)."""


@contextmanager
def client_errors(model: Any, timeout: float) -> Iterator[None]:
    """Raise an error of the model's OpenAI client (a timeout...) as a one-line ChatModelError.

    For any ``ChatOpenAI``, also one the caller built: the error says what to check or raise
    (:func:`~langchain_genmem.llm.chat.model_error`). Other errors pass unchanged.

    Args:
        model: the chat model (or a binding of it).
        timeout: the seconds each call was given, for the message.

    Yields:
        Nothing; the calls run inside.

    Raises:
        ChatModelError: the client failed (server down, key refused, timed out...).
    """
    try:
        yield
    except ChatModelError:
        raise
    except Exception as e:
        base = getattr(_target(model), "openai_api_base", None)
        hint = model_error(e, base=base, timeout=timeout)
        if hint is None:
            raise
        raise hint from e


def reply_text(message: BaseMessage) -> str:
    """Return the text of a model reply, whether its content is a string or a block list.

    The text is cleaned (:func:`~langchain_genmem.core.text.clean_text`: lone surrogates
    replaced, NUL removed), so what a caller keeps of a reply (in records, in state that a
    checkpointer serialises) is valid Unicode.

    Args:
        message: the model's reply.

    Returns:
        The text parts of the reply, joined.
    """
    content = message.content
    if isinstance(content, str):
        return clean_text(content)
    return clean_text(
        "".join(
            part if isinstance(part, str) else str(part.get("text", ""))
            for part in content
            if isinstance(part, str) or part.get("type") == "text"
        )
    )


def _text_of(reply: Any) -> str:
    return reply if isinstance(reply, str) else reply_text(reply)


class ModelCaller:
    """Sends calls to one chat model with its bounds and output form (module docstring).

    Args:
        model: any LangChain chat model.
        limits: the bounds of every call; None for the defaults.
        output: ``"auto"``, ``"structured"`` or ``"text"``.

    Raises:
        ValidationError: another output form, or limits that are not a CallLimits.
    """

    def __init__(
        self, model: BaseChatModel | Runnable[Any, Any], limits: CallLimits | None = None,
        output: OutputForm = "auto",
    ) -> None:
        if output not in OUTPUT_FORMS:
            msg = f"output: expected one of {', '.join(OUTPUT_FORMS)}, got {output!r}"
            raise ValidationError(msg, field="output")
        if limits is not None and not isinstance(limits, CallLimits):
            msg = f"limits: expected a CallLimits, got {type(limits).__name__}"
            raise ValidationError(msg, field="limits")
        self.model = model
        self.limits = limits or CallLimits()
        self.output = output

    def structured(self) -> bool:
        """Whether calls go in the structured form now."""
        if self.output == "text":
            return False
        if self.output == "structured":
            return True
        return takes_call_options(self.model) and _refused.get(id(self.model)) is not self.model

    def _refuse(self) -> None:
        """Remember that this model's server refuses schemas (or raise, when required)."""
        if self.output == "structured":
            msg = (
                "the chat model's server refuses JSON schemas (structured replies); "
                'use output="auto" or "text" (genmem reflect --output text)'
            )
            raise ChatModelError(msg)
        with _refused_lock:
            _refused[id(self.model)] = self.model

    def _structured_runnable(self, call: Call) -> tuple[Runnable[Any, Any], list[BaseMessage]]:
        if call.shape is None:
            return bounded(self.model, self.limits, call.kind, call.n), call.messages
        if not takes_call_options(self.model):
            msg = (
                f"{type(_target(self.model)).__name__} takes no JSON schema; use "
                'output="auto" or "text" with this model'
            )
            raise ChatModelError(msg)
        runnable = bounded(self.model, self.limits, call.kind, call.n,
                           response_format=call.shape.response_format())
        return runnable, call.structured or call.messages

    def _read(self, call: Call, reply: Any, structured: bool) -> str:
        text = _text_of(reply)
        if structured and call.shape is not None:
            return read_structured(text, call.shape)
        return text

    def _one(self, call: Call, config: RunnableConfig | None) -> str:
        runnable, messages = self._structured_runnable(call)
        try:
            return self._read(call, runnable.invoke(messages, config), True)
        except Exception as e:
            return self._failed(call, e)

    async def _aone(self, call: Call, config: RunnableConfig | None) -> str:
        runnable, messages = self._structured_runnable(call)
        try:
            return self._read(call, await runnable.ainvoke(messages, config), True)
        except Exception as e:
            return self._failed(call, e)

    def _failed(self, call: Call, error: Exception) -> str:
        if call.shape is not None and _cut(error):
            return ""
        if call.shape is not None and schema_refused(error):
            raise _Refused from error
        raise error

    def batch(self, calls: Sequence[Call], config: RunnableConfig | None = None) -> list[str]:
        """Send calls concurrently (``max_concurrency`` of ``config`` honoured).

        Args:
            calls: the calls.
            config: a runnable config (callbacks, tags, ``max_concurrency``).

        Returns:
            One reply text per call, in order ("" for a structured reply that failed).
        """
        if not calls:
            return []
        with self._hints():
            if self.structured():
                try:
                    return self._batch_structured(calls, config)
                except _Refused:
                    self._refuse()
            return self._batch_text(calls, config)

    async def abatch(
        self, calls: Sequence[Call], config: RunnableConfig | None = None
    ) -> list[str]:
        """Async :meth:`batch`: the same calls and replies."""
        if not calls:
            return []
        with self._hints():
            if self.structured():
                try:
                    return await self._abatch_structured(calls, config)
                except _Refused:
                    self._refuse()
            return await self._abatch_text(calls, config)

    def _hints(self) -> AbstractContextManager[None]:
        """An error of the OpenAI client (a timeout...) raised as a one-line ChatModelError."""
        return client_errors(self.model, self.limits.timeout)

    def _batch_structured(self, calls: Sequence[Call], config: RunnableConfig | None) -> list[str]:
        if len(calls) == 1:
            return [self._one(calls[0], config)]
        from langchain_core.runnables import RunnableLambda

        runner: RunnableLambda[int, str] = RunnableLambda(
            lambda i, config: self._one(calls[i], config), name="calls"
        )
        return runner.batch(list(range(len(calls))), config)

    async def _abatch_structured(
        self, calls: Sequence[Call], config: RunnableConfig | None
    ) -> list[str]:
        limit = (config or {}).get("max_concurrency")
        gate = asyncio.Semaphore(limit or len(calls))

        async def one(call: Call) -> str:
            async with gate:
                return await self._aone(call, config)

        return list(await asyncio.gather(*(one(call) for call in calls)))

    def _text_groups(self, calls: Sequence[Call]) -> dict[tuple[str, int], list[int]]:
        groups: dict[tuple[str, int], list[int]] = {}
        same = not takes_call_options(self.model)
        for i, call in enumerate(calls):
            groups.setdefault(("", 0) if same else (call.kind, call.n), []).append(i)
        return groups

    def _batch_text(self, calls: Sequence[Call], config: RunnableConfig | None) -> list[str]:
        out = [""] * len(calls)
        for (_, _), indexes in self._text_groups(calls).items():
            first = calls[indexes[0]]
            model = bounded(self.model, self.limits, first.kind, first.n)
            replies = model.batch([calls[i].messages for i in indexes], config)
            for i, reply in zip(indexes, replies, strict=True):
                out[i] = _text_of(reply)
        return out

    async def _abatch_text(
        self, calls: Sequence[Call], config: RunnableConfig | None
    ) -> list[str]:
        out = [""] * len(calls)
        for (_, _), indexes in self._text_groups(calls).items():
            first = calls[indexes[0]]
            model = bounded(self.model, self.limits, first.kind, first.n)
            replies = await model.abatch([calls[i].messages for i in indexes], config)
            for i, reply in zip(indexes, replies, strict=True):
                out[i] = _text_of(reply)
        return out
