"""A scripted OpenAI-compatible chat server for tests, run as a separate process.

The server answers `POST /v1/chat/completions` (also `/chat/completions`), plain or streamed
(`"stream": true` gives SSE chunks, then `data: [DONE]`), and `GET /v1/models`. It never thinks:
a script decides every reply. The script is a JSON list, tried in order:

```json
[
  {"when": "importance|poignancy", "reply": "7"},
  {"when": "focal point", "reply": "1. 玛丽亚在准备考试", "times": 1},
  {"default": "好的"}
]
```

`when` is a regular expression searched (`re.search`, `re.DOTALL`) in the text of all messages
joined by newlines; the first rule that matches and whose `times` is not used up answers. The
optional `default` answers everything else. Without one, an unmatched request gets HTTP 500 with a
JSON error that quotes the prompt, so a test fails loudly instead of silently. Every request is
appended to the log file as one JSON line: `{"path", "model", "stream", "messages", "body",
"rule", "reply"}`, where `rule` is the index of the rule that answered, `"default"`, or `null`.

From a shell (the server uses only the standard library):

```sh
python -m tests.support.openai_server --script script.json --log log.jsonl --port-file port.txt
```

From a test, `ScriptedOpenAI` starts it on a free port of 127.0.0.1 and stops it by its pid:

```python
with ScriptedOpenAI([{"when": "天气", "reply": "晴天"}], tmp_path=tmp_path) as srv:
    model = ChatOpenAI(model="scripted", api_key="test-key", base_url=srv.base_url)
    assert model.invoke("今天天气怎么样?").content == "晴天"
```

`srv.env()` gives `OPENAI_API_KEY` and `OPENAI_BASE_URL` for a subprocess (the CLI, examples),
and `srv.requests()` the parsed log.

Structured replies (a request with a `response_format`): by default (`schemas="refuse"`) the
server refuses them as a server without JSON-schema support does, with HTTP 400
`{"error": {"message": "... JSON schema ...", "type": "invalid_request_error"}}` (llama.cpp's
shape), so a client that falls back to text prompts is tested on every run; such a request is
logged with `"rule": "refused"` and left out of `srv.requests()` unless `refused=True`.
`schemas="answer"` answers them from the script like any request (the script then holds the
JSON replies), and a rule may also match the schema's name, which is appended to the prompt
text as `[schema NAME]`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from tests.support.processes import ServerProcess

if TYPE_CHECKING:  # the server runs on the standard library alone
    from typing_extensions import NotRequired

__all__ = ["MODEL_NAME", "Rule", "ScriptedOpenAI", "main"]

MODEL_NAME = "scripted-model"
CHUNK_CHARS = 4
REPO_ROOT = Path(__file__).resolve().parents[2]


class Rule(TypedDict):
    """One scripted answer: `reply` to any request whose text matches the regex `when`."""

    when: str
    reply: str
    times: NotRequired[int]


class Script:
    """The rules of one server, with how often each has fired; safe to share between threads.

    Args:
        entries: The parsed script file: rules and at most one `{"default": text}`.

    Raises:
        ValueError: An entry is neither a rule nor a default.
    """

    def __init__(self, entries: list[dict[str, Any]]) -> None:
        self.rules: list[tuple[re.Pattern[str], str, int | None]] = []
        self.default: str | None = None
        for i, entry in enumerate(entries):
            if set(entry) == {"default"}:
                self.default = str(entry["default"])
            elif {"when", "reply"} <= set(entry) <= {"when", "reply", "times"}:
                times = entry.get("times")
                self.rules.append((re.compile(entry["when"], re.DOTALL), entry["reply"], times))
            else:
                msg = f"script entry {i} is not {{when, reply, times?}} or {{default}}: {entry}"
                raise ValueError(msg)
        self.fired = [0] * len(self.rules)
        self.lock = threading.Lock()

    def answer(self, text: str) -> tuple[int | str | None, str | None]:
        """Pick the reply for a prompt and count the rule as used.

        Args:
            text: The prompt text of all messages.

        Returns:
            The rule index (or `"default"`) and its reply, or `(None, None)` if nothing matches.
        """
        with self.lock:
            for i, (pattern, reply, times) in enumerate(self.rules):
                if (times is None or self.fired[i] < times) and pattern.search(text):
                    self.fired[i] += 1
                    return i, reply
        if self.default is not None:
            return "default", self.default
        return None, None


def prompt_text(messages: list[dict[str, Any]]) -> str:
    """Join the text of all messages by newlines (text parts of multi-part contents included)."""
    texts: list[str] = []
    for message in messages:
        content = message.get("content") or ""
        if isinstance(content, list):
            content = "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
        texts.append(str(content))
    return "\n".join(texts)


def usage(prompt: str, reply: str) -> dict[str, int]:
    """Rough token counts (whitespace words, at least 1) in the OpenAI `usage` shape."""
    prompt_tokens, completion_tokens = max(1, len(prompt.split())), max(1, len(reply.split()))
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def completion(model: str, prompt: str, reply: str) -> dict[str, Any]:
    """Build a non-streaming `chat.completion` response body."""
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion",
        "created": int(time.time()), "model": model, "system_fingerprint": None,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                     "logprobs": None, "finish_reason": "stop"}],
        "usage": usage(prompt, reply),
    }


def completion_chunks(model: str, prompt: str, reply: str, *, with_usage: bool) -> list[dict]:
    """Build the `chat.completion.chunk` bodies of a streamed reply, a few characters each.

    Args:
        model: The model name to echo.
        prompt: The prompt text, for the usage counts.
        reply: The full reply.
        with_usage: Add the final usage-only chunk (`stream_options.include_usage`).

    Returns:
        The role chunk, the content chunks, the `finish_reason` chunk and maybe the usage chunk.
    """
    base = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model, "system_fingerprint": None}
    pieces = [reply[i:i + CHUNK_CHARS] for i in range(0, len(reply), CHUNK_CHARS)]
    deltas = [{"role": "assistant", "content": ""}] + [{"content": p} for p in pieces]
    chunks = [{**base, "choices": [{"index": 0, "delta": d, "logprobs": None,
                                    "finish_reason": None}]} for d in deltas]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "logprobs": None,
                                        "finish_reason": "stop"}]})
    if with_usage:
        chunks.append({**base, "choices": [], "usage": usage(prompt, reply)})
    return chunks


REFUSAL = ("Unable to generate parser for this template. Automatic parser generation failed: "
           "JSON schema error: response_format json_schema is not supported by this server")
SCHEMA_MODES = ("refuse", "answer")


def schema_name(body: dict[str, Any]) -> str | None:
    """The name of the JSON schema a request asks for, "" for an unnamed one, None for none."""
    response_format = body.get("response_format")
    if not isinstance(response_format, dict):
        return None
    return str((response_format.get("json_schema") or {}).get("name") or "")


class ScriptedServer(ThreadingHTTPServer):
    """A threading HTTP server that holds the script and the request log."""

    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], script: Script, log_path: Path, schemas: str = "refuse"
    ) -> None:
        super().__init__(address, ScriptedHandler)
        self.script = script
        self.log_path = log_path
        self.schemas = schemas
        self.log_lock = threading.Lock()

    def log_request_line(self, record: dict[str, Any]) -> None:
        """Append one request record to the log file as a JSON line."""
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self.log_lock, self.log_path.open("a", encoding="utf-8") as log:
            log.write(line)


class ScriptedHandler(BaseHTTPRequestHandler):
    """Routes the OpenAI endpoints to the script; anything else is a JSON 404."""

    server: ScriptedServer

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        """Answer `GET /v1/models` with the one scripted model."""
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self.send_json(200, {"object": "list", "data": [
                {"id": MODEL_NAME, "object": "model", "created": 0, "owned_by": "tests"}]})
        else:
            self.send_error_json(404, f"no route for GET {self.path}", "not_found")

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        """Answer a chat completion from the script, streamed or not."""
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self.send_error_json(404, f"no route for POST {self.path}", "not_found")
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        messages = body.get("messages") or []
        model, stream = body.get("model") or MODEL_NAME, bool(body.get("stream"))
        text = prompt_text(messages)
        schema = schema_name(body)
        if schema is not None and self.server.schemas == "refuse":
            self.server.log_request_line({"path": self.path, "model": model, "stream": stream,
                                          "messages": messages, "body": body,
                                          "rule": "refused", "reply": None})
            self.send_error_json(400, REFUSAL, "invalid_request_error")
            return
        if schema is not None:
            text += f"\n[schema {schema}]"
        rule, reply = self.server.script.answer(text)
        self.server.log_request_line({"path": self.path, "model": model, "stream": stream,
                                      "messages": messages, "body": body, "rule": rule,
                                      "reply": reply})
        if reply is None:
            self.send_error_json(500, f"no scripted rule matches the prompt:\n{text}",
                                 "unmatched_prompt")
        elif stream:
            with_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self.send_events(completion_chunks(model, text, reply, with_usage=with_usage))
        else:
            self.send_json(200, completion(model, text, reply))

    def send_json(self, status: int, payload: dict[str, Any]) -> None:
        """Send a JSON response."""
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_error_json(self, status: int, message: str, kind: str) -> None:
        """Send an error in the OpenAI `{"error": {...}}` shape."""
        self.send_json(status, {"error": {"message": message, "type": kind, "param": None,
                                          "code": kind}})

    def send_events(self, chunks: list[dict]) -> None:
        """Send server-sent events, one per chunk, then `[DONE]`; the connection then closes."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base signature
        """Keep the access log out of stderr; the JSON log has every request."""


def main(argv: Sequence[str] | None = None) -> None:
    """Run the server until it is terminated.

    Args:
        argv: Command-line arguments; default `sys.argv[1:]`.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", type=Path, required=True, help="JSON list of rules")
    parser.add_argument("--log", type=Path, required=True, help="JSON-lines request log")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 = any free port")
    parser.add_argument("--port-file", type=Path, help="where to write the bound port")
    parser.add_argument("--schemas", choices=SCHEMA_MODES, default="refuse",
                        help="refuse requests with a response_format (HTTP 400), or answer them")
    args = parser.parse_args(argv)
    script = Script(json.loads(args.script.read_text(encoding="utf-8")))
    args.log.touch()
    server = ScriptedServer((args.host, args.port), script, args.log, args.schemas)
    if args.port_file:
        tmp = args.port_file.with_suffix(".tmp")
        tmp.write_text(str(server.server_address[1]), encoding="utf-8")
        tmp.replace(args.port_file)  # atomic: a reader sees the whole port or no file
    server.serve_forever()


class ScriptedOpenAI(ServerProcess):
    """Run the scripted server in a child process for the duration of a `with` block.

    Args:
        rules: The rules, tried in order.
        default: The reply to anything no rule matches; None = HTTP 500 for those.
        tmp_path: Folder for the script, the log and the server's output; default: a temporary
            folder removed on exit.
        startup_timeout: Seconds to wait for the server to answer.
        schemas: `"refuse"` requests with a `response_format` (HTTP 400, as a server without
            JSON-schema support), or `"answer"` them from the script.

    Attributes:
        base_url: `http://127.0.0.1:PORT/v1`, for `ChatOpenAI(base_url=...)`.
        log_path: The JSON-lines request log that `requests()` reads.
        pid: The server's process id.
        startup_seconds: How long the start took.
    """

    temp_prefix = "scripted-openai-"

    def __init__(
        self,
        rules: Sequence[Rule],
        *,
        default: str | None = None,
        tmp_path: Path | None = None,
        startup_timeout: float = 15.0,
        schemas: str = "refuse",
    ) -> None:
        if schemas not in SCHEMA_MODES:
            raise ValueError(f"schemas: expected one of {SCHEMA_MODES}, got {schemas!r}")
        self.schemas = schemas
        self._entries: list[dict[str, Any]] = [dict(rule) for rule in rules]
        if default is not None:
            self._entries.append({"default": default})
        Script(self._entries)  # validate here, not in the child
        super().__init__(tmp_path, startup_timeout=startup_timeout)
        self.log_path = self.folder / "openai_requests.jsonl"
        self.base_url = ""

    def _start(self) -> None:
        script_path, port_path = self.folder / "openai_script.json", self.folder / "port.txt"
        port_path.unlink(missing_ok=True)
        script_path.write_text(json.dumps(self._entries, ensure_ascii=False), encoding="utf-8")

        def answers() -> bool:
            self.base_url = f"http://127.0.0.1:{int(port_path.read_text())}/v1"
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as response:
                return response.status == 200

        self.launch([sys.executable, "-m", "tests.support.openai_server",
                     "--script", str(script_path), "--log", str(self.log_path),
                     "--port", "0", "--port-file", str(port_path), "--schemas", self.schemas],
                    check=answers, what="scripted OpenAI server", cwd=REPO_ROOT)

    def requests(self, *, refused: bool = False) -> list[dict[str, Any]]:
        """Return the requests answered so far, oldest first, as logged by the server.

        Args:
            refused: also return the structured requests refused (`"rule": "refused"`).

        Returns:
            One dict per request: `path`, `model`, `stream`, `messages`, `body`, `rule` (the
            index of the rule that answered, `"default"`, `"refused"`, or None) and `reply`.
        """
        if not self.log_path.exists():
            return []
        lines = self.log_path.read_text(encoding="utf-8").splitlines()
        logged = [json.loads(line) for line in lines if line.strip()]
        return [r for r in logged if refused or r["rule"] != "refused"]

    def env(self) -> dict[str, str]:
        """Return the variables that point an OpenAI client in a subprocess at this server."""
        return {"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": self.base_url}


if __name__ == "__main__":
    main()
