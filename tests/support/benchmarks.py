"""A benchmark script run end to end, as its smoke tests run it: only its output is checked."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from tests.support.warm import shared

__all__ = ["REPO", "load_benchmark", "run_benchmark"]

REPO = Path(__file__).resolve().parents[2]


def run_benchmark(
    script: str, *args: str, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run ``benchmarks/<script>`` with ``args`` from the repository's root (warm:
    `tests.support.warm`, its own process without the imports' start-up).

    Args:
        script: the file name in ``benchmarks/``.
        *args: its command-line arguments.
        timeout: seconds before the run is stopped (and the test fails).

    Returns:
        The finished run, its output captured as text; its exit code is the caller's to check.
    """
    return shared().run([sys.executable, str(REPO / "benchmarks" / script), *args],
                        timeout=timeout, cwd=REPO)


def load_benchmark(script: str) -> ModuleType:
    """Import ``benchmarks/<script>`` in this process (once), to call its functions directly.

    For checks of what a benchmark refuses before it starts: a process of its own costs
    seconds of imports each time; one run as a process shows the exit itself.

    Args:
        script: the file name in ``benchmarks/``.

    Returns:
        The module.
    """
    name = f"_benchmark_{Path(script).stem}"
    if name not in sys.modules:
        folder = str(REPO / "benchmarks")
        if folder not in sys.path:  # the benchmarks import their siblings by name
            sys.path.insert(0, folder)
        spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / script)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
