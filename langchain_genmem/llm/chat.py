"""A chat model from the standard OpenAI variables, for the CLI, the examples and the graphs.

``OPENAI_API_KEY`` (for OpenAI, or a server that checks keys), ``OPENAI_BASE_URL`` (any
OpenAI-compatible server: Ollama, llama.cpp's ``llama-server``, vLLM, LM Studio...; a local
server needs no key) and ``OPENAI_MODEL`` (default ``gpt-4o-mini``).

Whatever goes wrong with the model surfaces as one
:class:`~langchain_genmem.core.errors.ChatModelError`
whose one-line message says what to set or check: no model configured
(:func:`chat_model_from_env`), or a server that cannot be reached, refuses the key or has no
such model (the model it returns translates its client's errors). A script runs the code
that needs the model inside :func:`one_line_errors`, which prints any
:class:`~langchain_genmem.core.errors.GenMemError` as one ``error: ...`` line and exits::

    with one_line_errors():
        model = chat_model_from_env()
        print(model.invoke("Hello").content)
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult

from langchain_genmem.core.errors import ChatModelError, GenMemError, error_line
from langchain_genmem.core.extras import require_extra
from langchain_genmem.llm.limits import CallLimits

DEFAULT_MODEL = "gpt-4o-mini"
# What a local server that checks no key gets (the OpenAI client insists on one).
LOCAL_SERVER_KEY = "not-needed"

LOCAL_SERVERS = "Ollama: http://localhost:11434/v1, llama.cpp's llama-server, vLLM"
MISSING_KEY_HINT = (
    "no chat model: set OPENAI_API_KEY, or point OPENAI_BASE_URL at a local OpenAI-compatible "
    f"server ({LOCAL_SERVERS}); OPENAI_MODEL names the model (default {DEFAULT_MODEL})"
)


def chat_model_configured(env: Mapping[str, str] | None = None) -> bool:
    """Tell whether the variables name a chat model: a key, or a server's address.

    Args:
        env: the variables (default ``os.environ``).

    Returns:
        True when ``OPENAI_API_KEY`` or ``OPENAI_BASE_URL`` is set.
    """
    env = os.environ if env is None else env
    return bool(env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"))


def chat_model_from_env(
    env: Mapping[str, str] | None = None, *, limits: CallLimits | None = None, **kwargs: Any
) -> Any:
    """``ChatOpenAI`` configured from ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``OPENAI_MODEL``.

    A server named by ``OPENAI_BASE_URL`` alone (a local one) gets a placeholder key. The
    model's client errors (server down, key refused, no such model, no answer in time) are
    raised as one-line :class:`~langchain_genmem.core.errors.ChatModelError` hints. Its
    timeout and retries are the package's (``CallLimits.timeout`` and
    ``CallLimits.max_retries`` of :mod:`~langchain_genmem.llm.limits`), not the client's
    600 s and 2 retries.

    Args:
        env: the variables (default ``os.environ``).
        limits: the call bounds whose ``timeout`` and ``max_retries`` the client gets;
            None for the defaults.
        **kwargs: more ``ChatOpenAI`` arguments (temperature, timeout, max_retries...).

    Returns:
        The chat model.

    Raises:
        ChatModelError: neither ``OPENAI_API_KEY`` nor ``OPENAI_BASE_URL`` is set (the message
            says what to set).
        ConfigurationError: langchain-openai is not installed.
    """
    env = os.environ if env is None else env
    if not chat_model_configured(env):
        raise ChatModelError(MISSING_KEY_HINT)
    limits = limits or CallLimits()
    options: dict[str, Any] = {"model": env.get("OPENAI_MODEL") or DEFAULT_MODEL,
                               "api_key": env.get("OPENAI_API_KEY") or LOCAL_SERVER_KEY,
                               "timeout": limits.timeout, "max_retries": limits.max_retries}
    if env.get("OPENAI_BASE_URL"):
        options["base_url"] = env["OPENAI_BASE_URL"]
    return _hinting_chat_openai()(**{**options, **kwargs})


@contextmanager
def one_line_errors(status: int = 2) -> Iterator[None]:
    """Print a :class:`GenMemError` raised inside as one ``error: ...`` line, then exit.

    For scripts and the manual's blocks: without a chat model, or with a server that is down,
    the reader gets the line saying what to set, not a traceback (the message alone: not its
    cause, which the error keeps as ``__cause__`` for code that catches it). Other exceptions
    pass through unchanged.

    Args:
        status: the exit status (2, as the command line's for something to set first).

    Yields:
        Nothing; the block runs inside.

    Raises:
        SystemExit: with ``status``, after printing the error on stderr.
    """
    try:
        yield
    except GenMemError as e:
        print(error_line(e), file=sys.stderr)
        raise SystemExit(status) from None


@functools.cache
def _hinting_chat_openai() -> type[BaseChatModel]:
    """``ChatOpenAI`` whose client errors become :class:`ChatModelError` hints (made once)."""
    chat_openai = require_extra("langchain_openai", "openai", "the chat model").ChatOpenAI

    class HintingChatOpenAI(chat_openai):  # type: ignore[misc, valid-type]
        """``ChatOpenAI`` that raises its client's errors as one-line hints."""

        def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
            with _hints(self.openai_api_base, kwargs.get("timeout", self.request_timeout)):
                return super()._generate(*args, **kwargs)

        async def _agenerate(self, *args: Any, **kwargs: Any) -> ChatResult:
            with _hints(self.openai_api_base, kwargs.get("timeout", self.request_timeout)):
                return await super()._agenerate(*args, **kwargs)

        def _stream(self, *args: Any, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
            with _hints(self.openai_api_base, kwargs.get("timeout", self.request_timeout)):
                yield from super()._stream(*args, **kwargs)

        async def _astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
            with _hints(self.openai_api_base, kwargs.get("timeout", self.request_timeout)):
                async for chunk in super()._astream(*args, **kwargs):
                    yield chunk

    HintingChatOpenAI.__qualname__ = HintingChatOpenAI.__name__
    return HintingChatOpenAI


@contextmanager
def _hints(base: str | None, timeout: Any = None) -> Iterator[None]:
    """Re-raise an error of the OpenAI client as the :func:`model_error` hint."""
    try:
        yield
    except Exception as e:
        hint = model_error(e, base=base, timeout=timeout)
        if hint is None:
            raise
        raise hint from e


class UnconfiguredChatModel(BaseChatModel):
    """Stands in for a chat model that cannot be built yet: every call raises the hint.

    Deployed graphs (``langgraph dev``) are built when the server loads them; a graph factory
    that raised there would leave the caller with "An internal error occurred" and the hint in
    the server log only. With this stand-in the graph builds, runs that need no model (a
    reflection that is not due) work, and a run that needs one fails with the hint itself
    (a :class:`ChatModelError`, whose message the server passes on to the caller).

    Attributes:
        hint: what to set, raised as a ChatModelError.
    """

    hint: str = MISSING_KEY_HINT

    @property
    def _llm_type(self) -> str:
        return "unconfigured"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        raise ChatModelError(self.hint)


def model_error(
    error: BaseException, *, base: str | None = None, timeout: Any = None
) -> ChatModelError | None:
    """A one-line hint for an error of the OpenAI client, or None for any other error.

    An unreachable server, a refused key or an unknown model says which variable to check
    instead of a traceback; a server that did not answer in time says after how long, and
    which setting to raise.

    Args:
        error: what the chat model raised.
        base: the server's address, for the message (default ``OPENAI_BASE_URL``).
        timeout: the call's timeout in seconds, for the message of a timeout.

    Returns:
        The hint as a ChatModelError, or None when the error is not the client's.
    """
    try:
        import openai
    except ImportError:
        return None
    base = base or os.environ.get("OPENAI_BASE_URL")
    where = f"the chat model at {base}" if base else "the OpenAI API"
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    if isinstance(error, openai.APITimeoutError):  # before its base, APIConnectionError
        after = f" after {timeout:g} s" if isinstance(timeout, (int, float)) else ""
        msg = (
            f"{where} did not answer in time (timed out{after}); raise the timeout "
            "(CallLimits(timeout=...) in the settings, genmem reflect --timeout) or use a "
            "faster model"
        )
    elif isinstance(error, openai.APIConnectionError):
        if base:
            fix = (f"start that server, point OPENAI_BASE_URL at one that runs ({LOCAL_SERVERS}), "
                   "or unset it and set OPENAI_API_KEY for OpenAI")
        else:
            fix = ("check the network, or point OPENAI_BASE_URL at a local OpenAI-compatible "
                   f"server ({LOCAL_SERVERS})")
        msg = f"cannot reach {where} ({first}): {fix}"
    elif isinstance(error, openai.AuthenticationError):
        msg = f"{where} refused the key ({first}); check OPENAI_API_KEY"
    elif isinstance(error, openai.NotFoundError):
        msg = f"{where} has no such model or route ({first}); check " \
              "OPENAI_MODEL and OPENAI_BASE_URL (most servers end in /v1)"
    elif isinstance(error, openai.APIError):
        msg = f"{where} failed ({first})"
    else:
        return None
    return ChatModelError(msg)
