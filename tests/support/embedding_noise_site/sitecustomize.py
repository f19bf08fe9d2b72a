"""Perturb the bundled embedding model in every Python process a noisy test run starts.

`tests/support/embedding_noise.py` explains the noise; `tests/conftest.py` puts this folder
first on PYTHONPATH when GENMEM_TEST_EMBEDDING_NOISE is set, so Python runs this file at
start-up. It loads that module by its path (a child's working folder may be anywhere), applies
the noise, then runs the environment's own sitecustomize, if it has one, which this file hides.
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


_noise = _load("_genmem_embedding_noise", importlib.util.spec_from_file_location(
    "_genmem_embedding_noise", os.path.join(os.path.dirname(_HERE), "embedding_noise.py")))
if _noise is not None:
    _noise.activate()

_others = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
_load("_genmem_next_sitecustomize",
      importlib.machinery.PathFinder.find_spec("sitecustomize", _others))
