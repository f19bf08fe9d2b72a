"""The environment of an older Chroma, ``.venv-chroma-old``: the bare package and an older
``chromadb`` 1.x (the Makefile's ``OLD_CHROMA``), which ``make test`` installs.

Under ``make test`` (``GENMEM_OLD_CHROMA_VENV`` set) a test that needs it fails without it;
run on its own, outside make, such a test is skipped, saying how to install it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-chroma-old"
REQUIRED = "GENMEM_OLD_CHROMA_VENV"  # set by `make test`: the environment must be there
INSTALL = "`make .venv-chroma-old/.installed` installs it (as `make test` does)"


def old_chroma_python() -> Path:
    """The older Chroma environment's interpreter (skips or fails without it, see above)."""
    named = os.environ.get(REQUIRED)
    venv = VENV if not named else (ROOT / named).resolve()
    python = venv / "bin" / "python"
    if (venv / ".installed").is_file() and python.exists():
        return python
    if named:
        pytest.fail(f"no {venv.name} ({REQUIRED}={named}): {INSTALL}")
    pytest.skip(f"no {venv.name}, the older Chroma's environment: {INSTALL}")
