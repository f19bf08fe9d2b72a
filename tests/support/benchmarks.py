"""A benchmark script run end to end, as its smoke tests run it: only its output is checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

__all__ = ["REPO", "run_benchmark"]

REPO = Path(__file__).resolve().parents[2]


def run_benchmark(
    script: str, *args: str, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run ``benchmarks/<script>`` with ``args`` from the repository's root.

    Args:
        script: the file name in ``benchmarks/``.
        *args: its command-line arguments.
        timeout: seconds before the run is stopped (and the test fails).

    Returns:
        The finished run, its output captured as text; its exit code is the caller's to check.
    """
    return subprocess.run(  # noqa: S603
        [sys.executable, str(REPO / "benchmarks" / script), *args],
        capture_output=True, text=True, timeout=timeout, cwd=REPO, check=False,
    )
