"""``--busy-core``: a bounded CPU-bound child process, so loaded figures can be measured.

The child spins on one core and exits by itself after ``limit`` seconds, so a benchmark
that dies cannot leave it running; the benchmark stops it earlier by its pid.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

SPIN = "import time\nend = time.monotonic() + {limit}\nwhile time.monotonic() < end:\n    pass\n"


@contextlib.contextmanager
def busy_core(limit: float = 1800.0) -> Iterator[int]:
    """Keep one core busy with a child process for the ``with`` block; yield its pid."""
    child = subprocess.Popen([sys.executable, "-c", SPIN.format(limit=limit)])
    try:
        yield child.pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signal.SIGTERM)
        child.wait(timeout=10)


def load_average() -> str:
    """The 1-minute load average, or '?' where the OS has none."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:  # pragma: no cover
        return "?"
