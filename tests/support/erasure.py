"""Looking for a forgotten memory's bytes in every file of an embedded Chroma folder.

For the tests of erasure (`tests/unit_tests/test_forget_erasure.py` and the crash tests):
nodes are those of :mod:`tests.support.forgetting` (Chinese descriptions, random vectors),
looked for as stored: the description's UTF-8 bytes and the vector's float32 bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tests.support.forgetting import text_of

__all__ = ["holding", "needles"]


def holding(folder: Path, needles: dict[str, bytes]) -> list[tuple[str, str]]:
    """``(file name, needle name)`` for every file under ``folder`` holding a needle."""
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found += [(path.name, name) for name, needle in needles.items() if needle in data]
    return found


def needles(vectors: np.ndarray, numbers: Sequence[int]) -> dict[str, bytes]:
    """The description and vector bytes of the nodes ``numbers`` (numbered from 1)."""
    out = {f"text {n}": text_of(n).encode() for n in numbers}
    out.update({f"vector {n}": vectors[n - 1].tobytes() for n in numbers})
    return out
