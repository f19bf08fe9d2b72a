"""Quickstart: a memory stream, weighted retrieval, and the retriever inside an LCEL chain.

Needs no chat model, and runs offline: the bundled multilingual model embeds, and the "LLM"
at the end of the chain is a plain function that shows the prompt it would send. Swap in
``langchain_genmem.llm.chat.chat_model_from_env()`` for a real one (OpenAI with
``OPENAI_API_KEY``, or a local server with ``OPENAI_BASE_URL=http://localhost:11434/v1``).

    python examples/quickstart.py [--path FOLDER]
"""

from __future__ import annotations

import argparse
import tempfile
from datetime import datetime, timedelta

from langchain_core.documents import Document
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream, SimulationClock
from langchain_genmem.llm.chat import one_line_errors

MEMORIES = [
    # (hours after 8:00, description, subject, predicate, object, poignancy)
    (0, "Maria Lopez is brushing her teeth", "Maria Lopez", "brush", "teeth", 1),
    (1, "Maria Lopez is studying quantum physics for her exam", "Maria Lopez", "study",
     "quantum physics", 5),
    (2, "Klaus Mueller asked Maria Lopez to the Valentine's Day party", "Klaus Mueller", "ask",
     "Maria Lopez", 8),
    (3, "Maria Lopez is eating lunch at Hobbs Cafe", "Maria Lopez", "eat", "lunch", 2),
    (4, "玛丽亚在直播打游戏", "Maria Lopez", "stream", "games", 3),
]


def build_stream(path: str) -> MemoryStream:
    """A stream for Maria Lopez with a simulation clock, filled with a few memories."""
    clock = SimulationClock(datetime(2023, 2, 13, 8, 0))
    stream = MemoryStream("Maria Lopez", path=path, clock=clock)
    if len(stream) == 0:
        stream.add_many([
            {"type": "event", "description": d, "subject": s, "predicate": p, "object": o,
             "poignancy": poignancy, "created": clock.now + timedelta(hours=h)}
            for h, d, s, p, o, poignancy in MEMORIES
        ])
    clock.now = datetime(2023, 2, 13, 18, 0)  # the evening: morning memories are older
    return stream


def format_docs(docs: list[Document]) -> str:
    """One line per memory with its score components."""
    return "\n".join(
        f"- {d.page_content} (score {d.metadata['score']:.2f}: recency "
        f"{d.metadata['recency']:.2f}, relevance {d.metadata['relevance']:.2f}, "
        f"importance {d.metadata['importance']:.2f})"
        for d in docs
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", default=None, help="store folder (default: a temporary one)")
    args = parser.parse_args()
    with one_line_errors(), \
            tempfile.TemporaryDirectory(prefix="genmem-quickstart-") as temporary:
        run(args.path or temporary)  # the temporary store is removed at the end
    return 0


def run(path: str) -> None:
    """Build the stream at ``path``, retrieve, and run the chain."""
    with build_stream(path) as stream:  # closed (access times flushed) when done
        show_retrieval(stream)


def show_retrieval(stream: MemoryStream) -> None:
    """Retrieve directly, then through an LCEL chain."""
    retriever = GenerativeAgentsRetriever(stream=stream, k=3)

    print("== retriever.invoke('What is Maria preparing for?')")
    for doc in retriever.invoke("What is Maria preparing for?"):
        print(f"{doc.metadata['node_id']:>8}  {doc.metadata['score']:.3f}  {doc.page_content}")

    prompt = ChatPromptTemplate.from_messages([
        ("system", "You are Maria Lopez. Your relevant memories:\n{memories}"),
        ("human", "{question}"),
    ])
    show = RunnableLambda(lambda value: value.to_string())  # stands in for a chat model
    chain = {
        "memories": retriever | format_docs,
        "question": RunnablePassthrough(),
    } | prompt | show
    print("\n== the same retriever inside an LCEL chain")
    print(chain.invoke("Who invited you to a party?"))


if __name__ == "__main__":
    raise SystemExit(main())
