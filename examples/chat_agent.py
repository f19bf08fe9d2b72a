"""A chat agent with long-term Generative Agents memory, on any OpenAI-compatible server.

Each turn it recalls memories for your message, answers with them in mind, stores the
exchange with importance rated by the model, and reflects when enough has happened. A memory
the model gives no rating for is stored with the fallback importance (a warning on stderr
names it) and the turn goes on; a reflection that writes nothing says why. Memories
live in a local folder, so the next run remembers this one. Recall is tuned for a chat
(``langchain_genmem.agent.CHAT_RETRIEVAL``: hybrid dense + lexical relevance alone, measured
best on the labelled question set), not the simulation's recency and importance weights.

Needs a chat model: OpenAI, or a local OpenAI-compatible server (Ollama, llama.cpp's
llama-server, vLLM), which needs no key. Without one it says what to set, in one line.

    export OPENAI_API_KEY=sk-...                                       # OpenAI, or
    export OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_MODEL=qwen2.5  # Ollama, no key
    python examples/chat_agent.py                       # interactive; empty line or Ctrl-D ends
    python examples/chat_agent.py --script turns.txt    # one user message per line
"""

from __future__ import annotations

import argparse
from pathlib import Path

from langgraph.checkpoint.memory import InMemorySaver

from langchain_genmem import MemoryStream
from langchain_genmem.agent import create_memory_agent
from langchain_genmem.llm.chat import chat_model_from_env, one_line_errors


def turns(script: str | None):
    """User messages: the script's non-empty lines, or what is typed at the prompt."""
    if script:
        yield from (line.strip() for line in Path(script).read_text("utf-8").splitlines()
                    if line.strip())
        return
    while True:
        try:
            line = input("you> ").strip()
        except EOFError:
            return
        if not line:
            return
        yield line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", default=".genmem-chat", help="memory folder (kept across runs)")
    parser.add_argument("--name", default="Ada", help="the agent's name (its persona)")
    parser.add_argument("--user", default="User", help="your name in its memories")
    parser.add_argument("--script", help="a file with one user message per line")
    parser.add_argument("-k", type=int, default=5, help="memories recalled per turn")
    args = parser.parse_args()
    with one_line_errors():  # no model, a server that is down, a store that refuses
        chat(args)
    return 0


def chat(args: argparse.Namespace) -> None:
    """Talk with the agent over the memories in ``args.path``."""
    model = chat_model_from_env(temperature=0)
    with MemoryStream(args.name, path=args.path) as stream:
        # the checkpointer keeps this session's messages; the stream keeps memories for good
        agent = create_memory_agent(model, stream, k=args.k, user=args.user,
                                    checkpointer=InMemorySaver())
        session = {"configurable": {"thread_id": "session"}}
        print(f"[{args.name} remembers {len(stream)} memories from {args.path}]")
        for text in turns(args.script):
            if args.script:
                print(f"you> {text}")
            out = agent.invoke({"messages": [("user", text)]}, session)
            recalled = [stream.get(i).description for i in out.get("recalled", [])]
            for memory in recalled:
                print(f"  (recalled) {memory}")
            print(f"{args.name}> {out['messages'][-1].content}")
            reflection = out.get("reflection", {})
            for node_id in reflection.get("written", []):
                print(f"  (reflected) {stream.get(node_id).description}")
            if reflection.get("status") in ("no_questions", "no_insights"):
                for reason in reflection.get("reasons", []):  # why it wrote nothing
                    print(f"  (reflection: {reason})")
        print(f"[{len(stream)} memories saved in {args.path}]")


if __name__ == "__main__":
    raise SystemExit(main())
