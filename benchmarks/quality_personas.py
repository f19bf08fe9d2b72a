"""The personas the labelled quality set asks about, opened the way the project loads them.

``Maria Lopez`` and ``Isabella Rodriguez`` are the original Smallville saves in
``data/generative_agents/``; ``Maria Lopez (zh)`` is their Chinese rendering in
``benchmarks/quality/maria_lopez_zh/`` (same layout, without ``embeddings.json``). Each is loaded
with :func:`langchain_genmem.interop.load_associative_memory` and its embedding_keys embedded
again by the model given, so the original 1536-d vectors play no part.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from langchain_genmem import MemoryStream
from langchain_genmem.interop import load_associative_memory
from langchain_genmem.interop.generative_agents import embed_in_batches

REPO = Path(__file__).resolve().parents[1]
QUALITY = REPO / "benchmarks" / "quality"
QUESTIONS = QUALITY / "questions.jsonl"
_SMALLVILLE = REPO / "data" / "generative_agents"
PERSONAS = {
    "Maria Lopez": _SMALLVILLE / "July1_the_ville_isabella_maria_klaus-step-3-12" / "personas"
    / "Maria Lopez" / "bootstrap_memory",
    "Isabella Rodriguez": _SMALLVILLE / "July1_the_ville_isabella_maria_klaus-step-3-2"
    / "personas" / "Isabella Rodriguez" / "bootstrap_memory",
    "Maria Lopez (zh)": QUALITY / "maria_lopez_zh" / "bootstrap_memory",
}
MEMORY = "associative_memory"


def node_ids(persona: str) -> set[str]:
    """The node ids a persona's saved ``nodes.json`` holds (the loader keeps them).

    Args:
        persona: a key of :data:`PERSONAS`.

    Returns:
        The ids.
    """
    nodes = json.loads((PERSONAS[persona] / MEMORY / "nodes.json").read_text(encoding="utf-8"))
    return set(nodes)


def open_persona(persona: str, embeddings: Embeddings, path: Path, **kwargs: Any) -> MemoryStream:
    """Load a persona into a new store at ``path``, every embedding_key embedded by ``embeddings``.

    The stream's clock is the save's simulation time (scratch ``curr_time``), as the project's
    loader sets it.

    Args:
        persona: a key of :data:`PERSONAS`.
        embeddings: the embedding model.
        path: an empty folder for the store.
        **kwargs: passed to ``load_associative_memory`` (``collection_name``...).

    Returns:
        The stream.
    """
    folder = PERSONAS[persona] / MEMORY
    if (folder / "embeddings.json").exists():
        return load_associative_memory(folder, persona=persona, embeddings=embeddings,
                                       reembed=True, progress=False, path=str(path), **kwargs)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "bootstrap_memory"
        shutil.copytree(PERSONAS[persona], copy)
        nodes = json.loads((folder / "nodes.json").read_text(encoding="utf-8"))
        keys = list(dict.fromkeys(node["embedding_key"] for node in nodes.values()))
        vectors = embed_in_batches(embeddings, keys, progress=False)
        (copy / MEMORY / "embeddings.json").write_text(json.dumps(vectors), encoding="utf-8")
        return load_associative_memory(copy / MEMORY, persona=persona, embeddings=embeddings,
                                       reembed=False, progress=False, path=str(path), **kwargs)
