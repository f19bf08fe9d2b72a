"""Apply the test run's embedding settings in every Python process the tests start.

`tests/support/embedding_noise.py` (vectors as on another CPU, GENMEM_TEST_EMBEDDING_NOISE)
and `tests/support/embedding_cache.py` (each text embedded once per run,
GENMEM_TEST_EMBEDDING_CACHE) explain them; `tests/conftest.py` puts this folder first on
PYTHONPATH when either is set, so Python runs this file at start-up. It loads those modules
by their paths (a child's working folder may be anywhere), applies the noise, then the cache
over it, then runs the environment's own sitecustomize, if it has one, which this file hides.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from types import ModuleType

_HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name: str, spec: importlib.machinery.ModuleSpec | None) -> ModuleType | None:
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _support(name: str) -> ModuleType | None:
    """The module ``tests/support/<name>.py``, loaded by its path."""
    return _load(f"_genmem_{name}", importlib.util.spec_from_file_location(
        f"_genmem_{name}", os.path.join(os.path.dirname(_HERE), f"{name}.py")))


# Each only when asked for: this file runs at the start of every Python child of the tests.
if os.environ.get("GENMEM_TEST_EMBEDDING_NOISE", "").strip():
    _noise = _support("embedding_noise")
    if _noise is not None:
        _noise.activate()
if os.environ.get("GENMEM_TEST_EMBEDDING_CACHE", "").strip():
    _cache = _support("embedding_cache")
    if _cache is not None:
        _cache.activate()

_others = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
_load("_genmem_next_sitecustomize",
      importlib.machinery.PathFinder.find_spec("sitecustomize", _others))
