"""Load a persona saved by Stanford's Smallville simulation and query its memories.

Reads the original ``associative_memory/`` files (nodes.json, embeddings.json,
kw_strength.json) and ``scratch.json``, re-embeds the memories with the bundled offline model,
then runs the original's two retrievals: weighted (``new_retrieve``) and by keyword
(``retrieve``). The stream's clock stays at the simulation time of the save. Needs no chat
model: the saved memories already carry their importance.

    python examples/smallville.py [ASSOCIATIVE_MEMORY_FOLDER] [--persona NAME]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from langchain_genmem import (
    GenerativeAgentsRetriever,
    GenMemError,
    MemoryStream,
    load_associative_memory,
)
from langchain_genmem.interop.generative_agents import persona_of

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = (ROOT / "data" / "generative_agents"
           / "July1_the_ville_isabella_maria_klaus-step-3-12" / "personas" / "Maria Lopez"
           / "bootstrap_memory" / "associative_memory")


def short(text: str, width: int = 70) -> str:
    """The text cut to ``width`` characters."""
    return text if len(text) <= width else text[: width - 1] + "…"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=str(FIXTURE), help="associative_memory/")
    parser.add_argument("--persona", default=None, help="name (default: from the folder path)")
    args = parser.parse_args()
    folder = Path(args.folder)
    persona = args.persona or persona_of(folder)
    if not (folder / "nodes.json").is_file():
        print(f"error: {folder} is not an associative_memory folder (no nodes.json in it); "
              f"e.g. {FIXTURE.relative_to(ROOT)}", file=sys.stderr)
        return 2
    if persona is None:
        print(f"error: cannot tell the persona from {folder}; pass --persona NAME",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="genmem-smallville-") as path:
        try:
            with load_associative_memory(folder, persona=persona, path=path) as stream:
                show(stream)  # closed (access times flushed) before the folder is removed
        except GenMemError as e:  # a malformed save: the message names the file and node
            print(f"error: {e}", file=sys.stderr)
            return 2
    return 0


def show(stream: MemoryStream) -> None:
    """Print the stream's state, two weighted retrievals and one keyword retrieval."""
    persona, state = stream.persona, stream.state
    print(f"{persona}: {len(stream)} memories, clock at {stream.clock():%Y-%m-%d %H:%M:%S}, "
          f"recency_decay {state.recency_decay}, trigger {state.importance_trigger_curr:g}/"
          f"{state.importance_trigger_max:g}")

    retriever = GenerativeAgentsRetriever(stream=stream, k=5)
    for focal in ["Klaus Mueller", "What is Maria working on for college?"]:
        print(f"\nnew_retrieve({focal!r}):")
        for doc in retriever.invoke(focal):
            m = doc.metadata
            print(f"  {m['node_id']:>9} {m['type']:<7} score {m['score']:.2f} = recency "
                  f"{m['recency']:.2f}·0.5 + relevance {m['relevance']:.2f}·3 + importance "
                  f"{m['importance']:.2f}·2  {short(doc.page_content)}")

    latest = stream.nodes("event")[0]
    related = stream.keyword_retrieve([latest])[latest.description]
    print(f"\nretrieve() for the latest event {latest.description!r}:")
    print(f"  {len(related['events'])} related events, {len(related['thoughts'])} thoughts; "
          f"newest thought: {related['thoughts'][0].description if related['thoughts'] else '-'}")


if __name__ == "__main__":
    raise SystemExit(main())
